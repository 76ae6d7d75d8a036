#!/bin/bash
# frameprep-config-reloader FILE NAME: sends SIGHUP to the process named
# NAME (its /proc/PID/comm) each time FILE's content changes, so that
# frameprepd rereads a ConfigMap the kubelet has rewritten. A sidecar of
# the DaemonSet's pod (shareProcessNamespace: true, the daemon's uid); the
# daemon image has no shell of its own. Polls every RELOAD_INTERVAL
# seconds (default 2): the kubelet replaces the file by swapping a
# symlink, which inotify on the file would miss.
set -u
file=$1
name=$2
interval=${RELOAD_INTERVAL:-2}
sum() { cksum <"$file" 2>/dev/null; }
last=$(sum)
echo "config-reloader: watching $file for $name"
while :; do
	sleep "$interval"
	now=$(sum)
	[ "$now" = "$last" ] && continue
	last=$now
	sent=0
	for comm in /proc/[0-9]*/comm; do
		[ "$(cat "$comm" 2>/dev/null)" = "$name" ] || continue
		pid=${comm#/proc/}
		pid=${pid%/comm}
		if kill -HUP "$pid" 2>/dev/null; then
			echo "config-reloader: $file changed: SIGHUP to $name (pid $pid)"
			sent=1
		fi
	done
	[ "$sent" = 1 ] || echo "config-reloader: $file changed but no $name process to signal"
done
