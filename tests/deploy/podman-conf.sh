#!/usr/bin/env bash
# podman-conf.sh [PACKAGE...]: installs what the container test needs
# when it is missing (podman, runc, catatonit for the pods' pause image,
# debootstrap, and the Debian PACKAGEs named), with apt-get update first,
# and gives podman the two settings these machines need, in
# /etc/containers/containers.conf:
#   [containers] default_ulimits = []   the VM may not raise
#                                       RLIMIT_NOFILE/NPROC
#   [engine] runtime = "runc"           crun refuses its hybrid cgroups
# A containers.conf that exists without them is left as it is and the
# settings go into the drop-in containers.conf.d/50-frameprep.conf.
set -euo pipefail
need=()
for p in podman runc catatonit debootstrap uidmap containernetworking-plugins iptables "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "== apt-get install ${need[*]}"
	log=$(mktemp)
	{
		DEBIAN_FRONTEND=noninteractive apt-get update -q &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
				--no-install-recommends "${need[@]}"
	} >"$log" 2>&1 || {
		tail -n 30 "$log" >&2
		rm -f "$log"
		echo "podman-conf.sh: apt-get install ${need[*]} failed" >&2
		exit 1
	}
	rm -f "$log"
fi
settings='[containers]
default_ulimits = []

[engine]
runtime = "runc"'
conf=/etc/containers/containers.conf
mkdir -p /etc/containers
if [ ! -e "$conf" ]; then
	printf '# Written by frameprep tests/deploy/podman-conf.sh.\n%s\n' "$settings" >"$conf"
elif ! grep -q '^ *default_ulimits *= *\[ *\]' "$conf" ||
	! grep -q '^ *runtime *= *"runc"' "$conf"; then
	mkdir -p /etc/containers/containers.conf.d
	printf '# Written by frameprep tests/deploy/podman-conf.sh.\n%s\n' "$settings" \
		>/etc/containers/containers.conf.d/50-frameprep.conf
fi
runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}')
if [ "$runtime" != runc ]; then
	echo "podman-conf.sh: podman's runtime is $runtime, not runc: see $conf" >&2
	exit 1
fi
echo "== podman $(podman version --format '{{.Client.Version}}'), runtime runc"
