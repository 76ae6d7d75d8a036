#!/usr/bin/env python3
"""play-pods.py WORK: writes WORK/play.yaml for `podman kube play` from
deploy/k8s: the pod of daemonset-cpu.yaml's template, and two consumer
pods from consumer-pod.yaml, one as written (the socket and /dev/shm
shared with the daemon through hostPaths) and one without the /dev/shm
mount (the socket only: its client falls back to the socket).

What podman 4.3 cannot do the Kubernetes way is changed, and only that:
the hostPaths point under WORK/host (not this machine's /run/frameprep);
the init container is podman's kind "always" and the restart policy
OnFailure (see below);
the ConfigMap volume is a hostPath directory holding its frameprepd.conf
(WORK/host/config, which the test rewrites as the kubelet would); the
probes go (podman runs an httpGet probe as curl inside the container, and
the daemon image has no curl: the image's HEALTHCHECK stays); the CPU
limits go (podman refuses more CPUs than the machine has). The images'
tag is $FPREP_IMAGE_TAG where set (build.sh's), instead of latest. The
consumers read WORK/data (frames and OpenCV's reference tensors) and
write their status lines into WORK/out.
"""
import copy
import os
import sys

import yaml

tag = os.environ.get("FPREP_IMAGE_TAG") or "latest"
top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
k8s = os.path.join(top, "deploy", "k8s")
work = os.path.abspath(sys.argv[1])
host = os.path.join(work, "host")


def load(name):
    with open(os.path.join(k8s, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def rehost(volumes):
    for v in volumes:
        if "hostPath" in v:
            p = v["hostPath"]["path"]
            v["hostPath"] = {"path": os.path.join(host, p.strip("/").replace("/", "-")),
                             "type": "Directory"}
        elif "configMap" in v:
            del v["configMap"]
            v["hostPath"] = {"path": os.path.join(host, "config"),
                             "type": "Directory"}
        elif "emptyDir" in v:
            pass


def strip(c):
    # podman 4.3 publishes a containerPort on the host's port of the same
    # number (Kubernetes does not): pods are reached at their addresses.
    c.pop("ports", None)
    if c["image"].startswith("localhost/frameprep"):
        c["image"] = c["image"].rsplit(":", 1)[0] + ":" + tag
    for k in ("livenessProbe", "readinessProbe", "startupProbe"):
        c.pop(k, None)
    res = c.get("resources", {})
    for part in ("requests", "limits"):
        res.get(part, {}).pop("cpu", None)


ds = load("daemonset-cpu.yaml")[0]
conf = load("configmap.yaml")[0]["data"]["frameprepd.conf"]
tmpl = copy.deepcopy(ds["spec"]["template"])
daemon = {"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": "frameprepd", "labels": tmpl["metadata"]["labels"],
                       "annotations": tmpl["metadata"].get("annotations", {})},
          "spec": tmpl["spec"]}
# OnFailure, not the DaemonSet's Always: podman 4.3 applies the pod's
# policy to its init container too, and under Always restarted that one
# (exit 0) about twice a second for the whole test (some 110 starts in
# two minutes on two cores), and a `pod rm -f` racing those restarts once
# left a pod behind. OnFailure restarts what the test kills (SIGKILL,
# exit 137) and leaves the finished init container alone, as the kubelet
# does.
daemon["spec"]["restartPolicy"] = "OnFailure"
# podman 4.3 removes a "once" init container after it ran and may find it
# still running ("cannot remove container ... as it is running"): an
# "always" one stays (and runs again at each start of the pod, as the
# kubelet's does after a pod sandbox is recreated).
daemon["metadata"]["annotations"]["io.podman.annotations.init.container.type"] = "always"
daemon["spec"].pop("affinity", None)
daemon["spec"].pop("nodeSelector", None)
rehost(daemon["spec"]["volumes"])
for c in daemon["spec"]["containers"] + daemon["spec"]["initContainers"]:
    strip(c)

consumer = load("consumer-pod.yaml")[0]
consumer["metadata"].pop("namespace", None)
rehost(consumer["spec"]["volumes"])
consumer["spec"]["volumes"] += [
    {"name": "data", "hostPath": {"path": os.path.join(work, "data"), "type": "Directory"}},
    {"name": "out", "hostPath": {"path": os.path.join(work, "out"), "type": "Directory"}}]
c = consumer["spec"]["containers"][0]
strip(c)
c["volumeMounts"] += [{"name": "data", "mountPath": "/data", "readOnly": True},
                      {"name": "out", "mountPath": "/out"}]
c["env"] += [{"name": "FRAMES_DIR", "value": "/data"}]

shm = copy.deepcopy(consumer)
shm["metadata"]["name"] = "consumer-shm"
shm["spec"]["containers"][0]["env"].append(
    {"name": "STATUS_FILE", "value": "/out/consumer-shm.log"})
noshm = copy.deepcopy(consumer)
noshm["metadata"]["name"] = "consumer-noshm"
noshm["spec"]["containers"][0]["env"].append(
    {"name": "STATUS_FILE", "value": "/out/consumer-noshm.log"})
noshm["spec"]["containers"][0]["volumeMounts"] = [
    m for m in noshm["spec"]["containers"][0]["volumeMounts"]
    if m["mountPath"] != "/dev/shm"]
noshm["spec"]["volumes"] = [v for v in noshm["spec"]["volumes"]
                            if v["name"] != "frameprep-shm"]
daemon["metadata"].pop("namespace", None)

for d in ("config", "run-frameprep", "dev-shm-frameprep"):
    os.makedirs(os.path.join(host, d), exist_ok=True)
with open(os.path.join(host, "config", "frameprepd.conf"), "w") as f:
    f.write(conf)
with open(os.path.join(work, "daemon.yaml"), "w") as f:
    yaml.safe_dump(daemon, f, sort_keys=False)
with open(os.path.join(work, "consumers.yaml"), "w") as f:
    yaml.safe_dump_all([shm, noshm], f, sort_keys=False)
# Two more daemons, each its own pod (network namespace, socket and
# shared-memory directories): the tcp:// clients' daemons, as two nodes'
# DaemonSet pods behind the headless Service.
tcp = []
for name in ("frameprepd-a", "frameprepd-b"):
    d = copy.deepcopy(daemon)
    d["metadata"]["name"] = name
    for v in d["spec"]["volumes"]:
        if "hostPath" in v and not v["hostPath"]["path"].endswith("/config"):
            v["hostPath"]["path"] += "-" + name
            os.makedirs(v["hostPath"]["path"], exist_ok=True)
    tcp.append(d)
with open(os.path.join(work, "tcp.yaml"), "w") as f:
    yaml.safe_dump_all(tcp, f, sort_keys=False)
print(f"play-pods: {work}/daemon.yaml {work}/consumers.yaml {work}/tcp.yaml")
