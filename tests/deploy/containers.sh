#!/usr/bin/env bash
# containers.sh: the container images and the Kubernetes manifests, run by
# a real container runtime (podman 4.3 + runc) on this machine. As root.
#
#  1. installs podman, runc and debootstrap when missing and sets podman's
#     two settings these machines need (podman-conf.sh);
#  2. validates deploy/k8s (yamllint, kubernetes-validate: k8s-validate.sh);
#  3. builds the images (deploy/container/build.sh: prints their sizes);
#  4. `podman kube play`s the pod of daemonset-cpu.yaml's template and two
#     consumer pods of consumer-pod.yaml (play-pods.py): real photographs
#     (tests/data/fetch-images.sh) through the hostPath socket, each tensor
#     within 1 LSB of OpenCV's letterbox; one consumer shares the daemon's
#     /dev/shm directory (its frames go through shared memory: the
#     daemon's INFO counts its regions), the other does not (its client
#     writes one line saying so and uses the socket);
#  5. kills the daemon (SIGKILL to its process): the pod's restartPolicy
#     brings it back and both consumers go on, every frame answered and
#     checked, through the new daemon;
#  6. rewrites the config file as the kubelet does with a ConfigMap: the
#     pod's config-reloader sends SIGHUP and the daemon's INFO shows the
#     new max_width;
#  7. two more daemon pods on tcp:// (two network namespaces, as two
#     nodes); frameprep-bench (the C client: the Python one dials one
#     daemon) given both addresses, as the headless Service's DNS would:
#     its requests go to both; one daemon is killed mid-load and every
#     request is answered and checked (exit 0);
#  8. SIGTERM (podman stop) drains the daemon: exit status 0.
# Every wait is for a condition, with a deadline of minutes (a loaded
# machine is slow, not wrong). Prints how long it took. Exit 0 passed,
# 1 failed, 77 skipped (not root).
#
# Usage: bash tests/deploy/containers.sh [--prepared] [--clean]
#   --prepared  the build and the wheel were made by build.sh --prepare
#               in the same work folder (CI makes them in its chroot):
#               build.sh --prepared, no compiler here
#   --clean     at the end, passed or failed, removes every container,
#               pod, image and volume that podman did not have before
#               this run (its lists before and after): what CI wants
# Environment: FPREP_CONTAINER_WORK (default build-container/) and
# FPREP_IMAGE_TAG (default latest), as build.sh; FPREP_KEEP=1 leaves the
# pods running (and --clean does nothing).
set -euo pipefail
t0=$(date +%s)
top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/tests/deploy
build_args=()
clean=0
for a in "$@"; do
	case $a in
	--prepared) build_args+=(--prepared) ;;
	--clean) clean=1 ;;
	*) echo "usage: $0 [--prepared] [--clean]" >&2; exit 2 ;;
	esac
done
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: containers.sh needs root (podman's rootful pods, debootstrap)"
	exit 77
fi
export FPREP_CONTAINER_WORK=${FPREP_CONTAINER_WORK:-$top/build-container}
export FPREP_IMAGE_TAG=${FPREP_IMAGE_TAG:-latest}
tag=$FPREP_IMAGE_TAG
mkdir -p "$FPREP_CONTAINER_WORK"
work=$FPREP_CONTAINER_WORK/test
sys_python=/usr/bin/python3

fail() {
	echo "FAIL: $*" >&2
	for p in frameprepd-frameprepd frameprepd-config-reloader consumer-shm-consumer consumer-noshm-consumer; do
		echo "---- podman logs $p (last 15 lines)" >&2
		podman logs "$p" 2>&1 | tail -n 15 >&2 || true
	done
	exit 1
}
# wait_for SECONDS WHAT COMMAND...: runs COMMAND until it succeeds.
wait_for() {
	local limit=$1 what=$2 end
	shift 2
	end=$(($(date +%s) + limit))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || fail "$what: not within $limit s"
		sleep 0.5
	done
}
step() { echo "== [$(($(date +%s) - t0)) s] $*"; }
teardown() {
	local pod
	[ "${FPREP_KEEP:-0}" = 1 ] && return 0
	podman rm -f -t 0 consumer-tcp >/dev/null 2>&1 || true
	# The pods by name: kube down skips a pod whose play failed half-way.
	# Again while one is there: podman 4.3's pod rm can lose a race with
	# a container it is restarting, and a pod left behind fails the next
	# run's play ("name frameprepd-b is in use").
	for pod in consumer-shm consumer-noshm frameprepd-a frameprepd-b frameprepd; do
		for _ in 1 2 3 4 5; do
			podman pod exists "$pod" || break
			podman pod rm -f -t 0 "$pod" >/dev/null 2>&1 || sleep 1
		done
		if podman pod exists "$pod"; then
			echo "containers.sh: pod $pod could not be removed" >&2
		fi
	done
}

# podman's lists: containers, pods, images (every layer), volumes.
podman_state() {
	{
		podman ps -a -q --no-trunc | sed 's/^/container /'
		podman pod ps -q --no-trunc | sed 's/^/pod /'
		podman images -a -q --no-trunc | sed 's/^/image /'
		podman volume ls -q | sed 's/^/volume /'
	} | sort -u
}
# clean_up: removes what podman_state lists now and did not before.
clean_up() {
	local kind id left
	podman_state | comm -13 "$FPREP_CONTAINER_WORK/podman-before" - >"$FPREP_CONTAINER_WORK/podman-new"
	while read -r kind id; do
		case $kind in
		container) podman rm -f -t 0 "$id" ;;
		pod) podman pod rm -f -t 0 "$id" ;;
		esac
	done <"$FPREP_CONTAINER_WORK/podman-new" >/dev/null 2>&1
	# An image's children first: passes until none is removed.
	for _ in 1 2 3 4 5; do
		left=0
		while read -r kind id; do
			[ "$kind" = image ] && podman image exists "$id" || continue
			podman rmi -f "$id" >/dev/null 2>&1 || left=$((left + 1))
		done <"$FPREP_CONTAINER_WORK/podman-new"
		[ "$left" = 0 ] && break
	done
	awk '$1 == "volume" { print $2 }' "$FPREP_CONTAINER_WORK/podman-new" |
		xargs -r podman volume rm -f >/dev/null 2>&1 || true
	left=$(podman_state | comm -13 "$FPREP_CONTAINER_WORK/podman-before" - | wc -l)
	echo "== --clean: $(wc -l <"$FPREP_CONTAINER_WORK/podman-new") containers, pods," \
		"images and volumes of this run removed, $left left"
}
played=0
on_exit() {
	local rc=$?
	[ "${FPREP_KEEP:-0}" = 1 ] && return 0
	[ "$played" = 1 ] && teardown
	[ "$clean" = 1 ] && clean_up
	return "$rc"
}

step "podman, runc, debootstrap and containers.conf; python3-opencv, -yaml, -venv"
bash "$here/podman-conf.sh" python3-opencv python3-yaml python3-venv
if [ "$clean" = 1 ]; then
	podman_state >"$FPREP_CONTAINER_WORK/podman-before"
fi
trap on_exit EXIT

step "manifests: yamllint, kubernetes-validate"
bash "$here/k8s-validate.sh"

step "images"
bash "$top/deploy/container/build.sh" "${build_args[@]}"

step "photographs and OpenCV's tensors"
bash "$top/tests/data/fetch-images.sh" "$FPREP_CONTAINER_WORK/images"
# Pods of an earlier run, of this work folder or another, would make
# the plays fail.
teardown
rm -rf "$work"
mkdir -p "$work/data" "$work/out"
chmod 0777 "$work/out"
chmod 0755 "$work" "$work/data"
"$sys_python" "$here/make-frames.py" "$FPREP_CONTAINER_WORK/images" "$work/data" 6
nframes=$(ls "$work"/data/frame_*.npy | wc -l)
"$sys_python" "$here/play-pods.py" "$work"
played=1

# rounds FILE: the number of the last "round N ok" line of a consumer.
rounds() { sed -n 's/^round \([0-9]*\) ok.*/\1/p' "$1" 2>/dev/null | tail -n 1; }
rounds_past() { local r; r=$(rounds "$1"); [ "${r:-0}" -ge "$2" ]; }
info() { podman exec consumer-shm-consumer frameprep info; }
info_has() { info | grep -cx "$1" >/dev/null; }
# The image's HEALTHCHECK command (kube play does not take an image's
# health check; the pod's probes are the kubelet's).
healthy() {
	podman exec frameprepd-frameprepd /usr/bin/frameprep info --health \
		--timeout 3000 --socket ipc:///run/frameprep/frameprep.sock
}

step "podman kube play: the daemon's pod (init container, frameprepd, config-reloader)"
podman kube play "$work/daemon.yaml" >"$work/play-daemon.log" 2>&1 ||
	{ cat "$work/play-daemon.log" >&2; fail "kube play of the daemon's pod"; }
wait_for 120 "frameprepd ready (frameprep info --health, the image's HEALTHCHECK)" healthy
wait_for 60 "the socket in the hostPath" test -S "$work/host/run-frameprep/frameprep.sock"
stat -c 'socket %n: %U(%u):%G(%g) %a' "$work/host/run-frameprep/frameprep.sock"
podman exec frameprepd-config-reloader python3 -c '
import urllib.request as u
for p in ("/healthz", "/readyz"):
    r = u.urlopen("http://127.0.0.1:9464" + p, timeout=10)
    print(p, r.status)
    assert r.status == 200
m = u.urlopen("http://127.0.0.1:9464/metrics", timeout=10).read().decode()
assert "frameprep_requests_total" in m, "no frameprep_requests_total"
print("/metrics: ok")'

step "podman kube play: two consumers ($nframes photographs each round; one shares /dev/shm, one does not)"
podman kube play "$work/consumers.yaml" >"$work/play-consumers.log" 2>&1 ||
	{ cat "$work/play-consumers.log" >&2; fail "kube play of the consumers"; }
wait_for 300 "3 rounds of checked tensors (shared memory)" rounds_past "$work/out/consumer-shm.log" 3
wait_for 300 "3 rounds of checked tensors (socket only)" rounds_past "$work/out/consumer-noshm.log" 3
grep -h "^round 3 ok" "$work"/out/consumer-*.log
# The shared-memory consumer's stages are regions of the daemon.
wait_for 60 "the daemon maps the consumer's shared memory (INFO regions > 0)" \
	bash -c "podman exec consumer-shm-consumer frameprep info | grep -q '^regions: [1-9]'"
n=$(podman logs consumer-noshm-consumer 2>&1 | grep -c "cannot map this process's shared memory" || true)
[ "$n" = 1 ] || fail "consumer-noshm: $n fallback lines, expected 1"
podman logs consumer-noshm-consumer 2>&1 | grep "cannot map this process's shared memory"
n=$(podman logs consumer-shm-consumer 2>&1 | grep -c "cannot map" || true)
[ "$n" = 0 ] || fail "consumer-shm: $n fallback lines, expected 0"

step "SIGKILL to frameprepd: the restart policy brings it back, the consumers go on"
restarts=$(podman inspect --format '{{.RestartCount}}' frameprepd-frameprepd)
pid=$(podman inspect --format '{{.State.Pid}}' frameprepd-frameprepd)
r_shm=$(rounds "$work/out/consumer-shm.log")
r_noshm=$(rounds "$work/out/consumer-noshm.log")
kill -KILL "$pid"
restarted() {
	[ "$(podman inspect --format '{{.RestartCount}}' frameprepd-frameprepd)" -gt "$restarts" ] &&
		[ "$(podman inspect --format '{{.State.Running}}' frameprepd-frameprepd)" = true ]
}
wait_for 120 "frameprepd restarted" restarted
wait_for 120 "frameprepd ready again" healthy
echo "frameprepd: restart $(podman inspect --format '{{.RestartCount}}' frameprepd-frameprepd), pid $pid -> $(podman inspect --format '{{.State.Pid}}' frameprepd-frameprepd)"
wait_for 300 "consumer-shm: 2 more rounds after the restart" rounds_past "$work/out/consumer-shm.log" $((r_shm + 2))
wait_for 300 "consumer-noshm: 2 more rounds after the restart" rounds_past "$work/out/consumer-noshm.log" $((r_noshm + 2))
# Served by the new daemon: its own counters (they start at 0).
wait_for 60 "the new daemon serves the consumers" \
	bash -c "podman exec consumer-shm-consumer frameprep info | grep -q '^regions: [1-9]'"
grep -h "again on a new connection" "$work"/out/consumer-*.log | sed 's/^/   /' | head -n 4 || true
if grep -h "FAIL" "$work"/out/consumer-*.log; then
	fail "a consumer failed"
fi
tail -n 1 "$work/out/consumer-shm.log" "$work/out/consumer-noshm.log"

step "reload: the ConfigMap's file rewritten, SIGHUP from the config-reloader"
info_has "max_width: 8192" || fail "max_width is not 8192 before the reload"
conf=$work/host/config/frameprepd.conf
# A new file renamed over the old one, as the kubelet swaps its files.
{ cat "$conf"; echo "max-width = 4000"; } >"$conf.new"
mv "$conf.new" "$conf"
wait_for 120 "INFO max_width: 4000 after the reload" info_has "max_width: 4000"
podman logs frameprepd-config-reloader 2>&1 | grep "SIGHUP" | tail -n 1
rounds_now=$(rounds "$work/out/consumer-shm.log")
wait_for 300 "consumer-shm: a round after the reload" rounds_past "$work/out/consumer-shm.log" $((rounds_now + 1))
[ "$(podman inspect --format '{{.RestartCount}}' frameprepd-frameprepd)" -eq $((restarts + 1)) ] ||
	fail "the reload restarted the daemon"

step "two daemons on tcp:// (two pods), one client spreading over both, one killed mid-load"
podman kube play "$work/tcp.yaml" >"$work/play-tcp.log" 2>&1 ||
	{ cat "$work/play-tcp.log" >&2; fail "kube play of the two tcp:// daemons"; }
# ip POD: the pod's address on podman's network (what the headless
# Service's DNS would answer).
ip() {
	podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' \
		"$(podman pod inspect --format '{{.InfraContainerID}}' "$1")"
}
ip_a=$(ip frameprepd-a)
ip_b=$(ip frameprepd-b)
[ -n "$ip_a" ] && [ -n "$ip_b" ] || fail "no pod address ($ip_a, $ip_b)"
# frames IP: FRAME requests answered OK by the daemon at IP (its metrics).
frames() {
	"$sys_python" - "$1" <<'PY'
import sys, urllib.request as u
m = u.urlopen(f"http://{sys.argv[1]}:9464/metrics", timeout=5).read().decode()
print(int(sum(float(l.split()[-1]) for l in m.splitlines()
              if l.startswith('frameprep_requests_total{kind="frame"') and 'status="ok"' in l)))
PY
}
served() { [ "$(frames "$1" 2>/dev/null || echo 0)" -gt 0 ]; }
wait_for 120 "frameprepd-a ready" bash -c "exec 3<>/dev/tcp/$ip_a/5555"
wait_for 120 "frameprepd-b ready" bash -c "exec 3<>/dev/tcp/$ip_b/5555"
echo "daemons: tcp://$ip_a:5555 tcp://$ip_b:5555"
mkdir -p "$work/photos"
for f in "$work"/data/frame_*.npy; do
	n=${f##*/frame_}
	cp "$FPREP_CONTAINER_WORK"/images/"${n%.npy}".* "$work/photos/"
done
# frameprep-bench: 2 streams, each one client (one nng socket) dialling
# both daemons; every reply checked against the CPU reference (--verify
# all); exit 0 only when none was lost, late, wrong or an error.
podman run -d --name consumer-tcp --network podman -v "$work/photos:/photos:ro" \
	"localhost/frameprep-client:$tag" frameprep-bench -q --no-ceiling -w 0 -d 30 \
	-c 2 --verify all --image-dir /photos --socket "tcp://$ip_a:5555,tcp://$ip_b:5555" >/dev/null
wait_for 120 "requests on both daemons" \
	bash -c "$(declare -f frames served); sys_python=$sys_python; served $ip_a && served $ip_b"
echo "before: frameprepd-a $(frames "$ip_a") frames, frameprepd-b $(frames "$ip_b")"
kill -KILL "$(podman inspect --format '{{.State.Pid}}' frameprepd-a-frameprepd)"
[ "$(podman inspect --format '{{.State.Running}}' consumer-tcp)" = true ] ||
	fail "frameprep-bench ended before the kill (its -d 30 s): nothing tested"
echo "SIGKILL to frameprepd-a while frameprep-bench runs"
code=$(podman wait consumer-tcp)
podman logs consumer-tcp 2>&1 | tail -n 12
[ "$code" = 0 ] || fail "frameprep-bench exited $code: a request was lost, wrong or an error"
echo "after: frameprepd-b $(frames "$ip_b") frames"

step "SIGTERM drains: podman stop of the daemon's container, then the pods go"
podman pod stop -t 30 consumer-shm consumer-noshm >/dev/null 2>>"$work/podman.log"
# The container, not its pod: with shareProcessNamespace the pod's infra
# process is the namespace's init, and podman 4.3's pod stop may end it
# first, which SIGKILLs every process in the namespace. The kubelet stops
# the containers first.
podman stop -t 30 frameprepd-frameprepd >/dev/null 2>>"$work/podman.log"
# Not `podman logs | grep -q` under pipefail: grep leaving at the first
# match can end podman logs with SIGPIPE and fail the pipeline (seen here:
# "no SIGTERM drain" beside a log that held it); retried besides, in case
# the log file lags the stop.
wait_for 30 "the SIGTERM drain in the daemon's log" \
	bash -c 'podman logs frameprepd-frameprepd 2>&1 | grep -c "SIGTERM: shutting down"'
podman logs frameprepd-frameprepd 2>&1 | grep "frameprepd stopped" | tail -n 1
code=$(podman inspect --format '{{.State.ExitCode}}' frameprepd-frameprepd)
[ "$code" = 0 ] || fail "frameprepd exited $code after SIGTERM"
echo "PASS: containers.sh in $(($(date +%s) - t0)) s"
