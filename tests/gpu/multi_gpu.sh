#!/usr/bin/env bash
# multi_gpu.sh: where the time goes when frameprepd serves several GPUs.
# Runs on the GPU machine from a bundle (run-on-gpu.sh --stage):
#
#   bash BUNDLE/multi_gpu.sh [SECONDS]
#
# 1. bench_hosts: the host's copy ceiling, each GPU alone, 1, 2, 4 ... all
#    at once, with and without the clients' host-memory traffic.
# 2. For 1, 2, 4 ... and all GPUs: one frameprepd (--device 0,..,G-1), one
#    frameprep-bench process with 16 streams a GPU (1080p BGR8 frames in
#    shared memory -> 640x640 f32 tensors into shared memory, replies in
#    the region, verified by sample), then the same load split over 2 and
#    4 bench processes. For each run: frames/s, the daemon's CPU per
#    request (utime + stime over INFO's served count, the same window), the
#    loop thread's share of one core, the bench processes' CPU per request,
#    and the lanes' frames in flight sampled from INFO every half second.
# FPREP_MG_STREAMS (default 16) sets the streams per GPU; FPREP_MG_TRACE=1
# runs the daemon with --trace and prints the one-process runs' stage table
# (frameprep-bench --trace); FPREP_MG_PROCS (default "1 2 4") the process
# counts.
#
# FPREP_MG_CMP=DIR compares two daemons instead, DIR/frameprepd (another
# build's, e.g. the commit before a change) against the bundle's, in one
# run: for 1 GPU and all (FPREP_MG_CMP_GPUS), each daemon in turn
# (FPREP_MG_CMP_REPS rounds, default 2), one stream (c=1: p50, p99) and
# FPREP_MG_STREAMS a GPU (frames/s), the same shared-memory load as above,
# each with the daemon's CPU per request and its threads' cores; then the
# new daemon's pacing and loop-spin counters (its log at exit).
# FPREP_MG_CMP_ARGS adds bench arguments (e.g. --doorbell). A libs/ beside
# DIR (or in it) goes first on the daemon's library path and the bench's,
# and DIR/frameprep-bench, when there, drives DIR's daemon: a change to the
# client library is then measured with its own client on each side.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-5}
per=${FPREP_MG_STREAMS:-16}
export LD_LIBRARY_PATH=$here/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_CACHE_HOME=$(mktemp -d)
tmp=$(mktemp -d)
hz=$(getconf CLK_TCK)
bin=${FPREP_MG_BIN:-$here/bin}

if [ -z "${FPREP_MG_CMP:-}" ]; then
	echo "=== bench_hosts"
	"$here/bin/bench_hosts" 2 || exit 1
fi
# FPREP_MG_NGPU and FPREP_MG_DEVICE (e.g. 1 and cpu) try the comparison
# on a machine without a GPU.
ngpu=${FPREP_MG_NGPU:-$(nvidia-smi -L | wc -l)}
command -v nvidia-smi >/dev/null && nvidia-smi topo -m

cpu_ticks() { # cpu_ticks PID [TID]: utime + stime in clock ticks
	local f=/proc/$1/stat
	[ -n "${2:-}" ] && f=/proc/$1/task/$2/stat
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "$f"
}
threads() { # threads PID: "TID COMM TICKS" for each of its threads
	local t
	for t in /proc/$1/task/*; do
		local comm
		comm=$(cat "$t/comm")
		[ "${t##*/}" = "$1" ] && comm=loop
		printf '%s %s %s\n' "${t##*/}" "$comm" \
			"$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "$t/stat")"
	done 2>/dev/null
}
served() { "$bin/frameprep" info --socket "$1" | awk '/^served:/ { print $2 }'; }
cores() { # cores TH0 TH1 SECONDS: the threads' cores by name, busiest first
	awk -v hz="$hz" -v w="$3" '
		NR == FNR { t0[$1] = $3; next }
		{ d[$2] += ($3 - t0[$1]) / hz / w; n[$2]++ }
		END { for (k in d) if (d[k] >= 0.01) printf "%s x%d %.2f\n", k, n[k], d[k] }' "$1" "$2" |
		sort -k3 -rn | tr '\n' ' '
}

# cmp_point BIN URL PID NAME ARGS...: one bench point against the daemon
# PID at URL (BIN/frameprep-bench when there, else the bundle's); prints
# "FPS P50 P99 CPU_US_PER_REQUEST|THREADS".
cmp_point() {
	local url=$2 dp=$3 name=$4 s0 t0 s1 t1 w0 w1 bench=$here/bin/frameprep-bench
	[ -x "$1/frameprep-bench" ] && bench=$1/frameprep-bench
	shift 4
	"$bench" --socket "$url" --quiet --shm both --shm-reply \
		--synthetic 1920x1080 --size 640x640 --duration 1 --warmup 0 \
		--no-ceiling --verify none ${FPREP_MG_CMP_ARGS:-} "$@" >/dev/null 2>&1
	s0=$(served "$url"); t0=$(cpu_ticks "$dp"); threads "$dp" >"$tmp/th0"
	w0=$(date +%s.%N)
	"$bench" --socket "$url" --quiet --shm both --shm-reply \
		--synthetic 1920x1080 --size 640x640 --duration "$secs" --warmup 0 \
		--no-ceiling --verify sample --json "$tmp/$name.json" \
		${FPREP_MG_CMP_ARGS:-} "$@" \
		>"$tmp/$name.log" 2>&1 || { echo "bench failed: $name" >&2; tail -3 "$tmp/$name.log" >&2; }
	w1=$(date +%s.%N)
	s1=$(served "$url"); t1=$(cpu_ticks "$dp"); threads "$dp" >"$tmp/th1"
	python3 - "$tmp/$name.json" $((s1 - s0)) $((t1 - t0)) "$hz" <<'PY' || echo "0 0 0 0"
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
n, t, hz = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print("%.0f %.0f %.0f %.0f" % (r["frames_per_s"], r["latency_us"]["p50"],
      r["latency_us"]["p99"], t / hz * 1e6 / max(n, 1)))
PY
	echo "|$(cores "$tmp/th0" "$tmp/th1" "$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')")"
}

# cmp_run: FPREP_MG_CMP's comparison (see the top).
cmp_run() {
	local old=$FPREP_MG_CMP g which dir url dp rep c1 sat libs out=()
	[ -x "$old/frameprepd" ] || { echo "no $old/frameprepd" >&2; exit 2; }
	local gpus=1
	[ "$ngpu" -gt 1 ] && gpus="1 $ngpu"
	for g in ${FPREP_MG_CMP_GPUS:-$gpus}; do
		[ "$g" -le "$ngpu" ] || continue
		for rep in $(seq "${FPREP_MG_CMP_REPS:-2}"); do
			for which in old new; do
				dir=$old
				[ "$which" = new ] && dir=$bin
				url=ipc://$tmp/cmp-$which-$g.sock
				libs=$LD_LIBRARY_PATH
				for l in "$dir/libs" "$dir/../libs"; do
					[ -d "$l" ] && libs=$l:$libs
				done
				LD_LIBRARY_PATH=$libs "$dir/frameprepd" \
					--device "${FPREP_MG_DEVICE:-$(seq -s, 0 $((g - 1)))}" \
					--listen "$url" --max-inflight 1024 \
					--max-inflight-per-conn 64 \
					2>"$tmp/cmp-$which-$g-$rep.log" &
				dp=$!
				for _ in $(seq 300); do "$bin/frameprep" info --socket "$url" >/dev/null 2>&1 && break; sleep 0.1; done
				c1=$(LD_LIBRARY_PATH=$libs cmp_point "$dir" "$url" "$dp" "cmp-$which-$g-$rep-c1" -c 1)
				sat=$(LD_LIBRARY_PATH=$libs cmp_point "$dir" "$url" "$dp" "cmp-$which-$g-$rep-sat" -c $((per * g)))
				kill -TERM "$dp"
				wait "$dp"
				read -r _ p50 p99 cpu1 <<<"${c1%%|*}"
				read -r fps _ _ cpus <<<"${sat%%|*}"
				out+=("| $g | $which | $rep | $p50 | $p99 | $cpu1 | $fps | $cpus |")
				echo "${out[-1]}"
				echo "  threads c=1: ${c1#*|}"
				echo "  threads saturated: ${sat#*|}"
				grep -E "lane pacing|loop spin" "$tmp/cmp-$which-$g-$rep.log" | sed 's/^/  /'
			done
		done
	done
	echo
	echo "old: $old/frameprepd ($(cat "$old/COMMIT" 2>/dev/null || echo '?')), new: $bin/frameprepd"
	echo "| GPUs | daemon | round | c=1 p50 us | c=1 p99 us | c=1 daemon CPU us/request | $per streams a GPU: frames/s | daemon CPU us/request |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	printf '%s\n' "${out[@]}"
}
if [ -n "${FPREP_MG_CMP:-}" ]; then
	cmp_run
	exit 0
fi

rows=()
for g in $(seq 1 "$ngpu"); do
	case $g in 1 | 2 | 4 | 8) ;; *) [ "$g" = "$ngpu" ] || continue ;; esac
	devs=$(seq -s, 0 $((g - 1)))
	url=ipc://$tmp/mg$g.sock
	"$bin/frameprepd" --device "$devs" --listen "$url" \
		--max-inflight 1024 --max-inflight-per-conn 64 \
		${FPREP_MG_TRACE:+--trace} \
		2>"$tmp/daemon$g.log" &
	dp=$!
	for _ in $(seq 300); do "$bin/frameprep" info --socket "$url" >/dev/null 2>&1 && break; sleep 0.1; done
	for procs in ${FPREP_MG_PROCS:-1 2 4}; do
		c=$((per * g / procs))
		[ "$c" -ge 1 ] || continue
		# Warm-up: every lane compiles its kernel once.
		"$bin/frameprep-bench" --socket "$url" --quiet --shm both --shm-reply \
			--synthetic 1920x1080 --size 640x640 -c "$c" --duration 1 \
			--warmup 1 --no-ceiling --verify none >/dev/null 2>&1
		s0=$(served "$url"); t0=$(cpu_ticks $dp); l0=$(cpu_ticks $dp $dp)
		threads $dp >"$tmp/th0"
		w0=$(date +%s.%N)
		pids=()
		for p in $(seq "$procs"); do
			( "$bin/frameprep-bench" --socket "$url" --quiet --shm both \
				--shm-reply --synthetic 1920x1080 --seed "$p" --size 640x640 \
				-c "$c" --duration "$secs" --warmup 0 --no-ceiling \
				--verify sample --json "$tmp/b${g}_${procs}_$p.json" \
				${FPREP_MG_TRACE:+--trace} \
				>"$tmp/b${g}_${procs}_$p.log" 2>&1; echo "rc $?"; times ) \
				>"$tmp/t${g}_${procs}_$p.txt" &
			pids+=($!)
		done
		depth=()
		while kill -0 "${pids[0]}" 2>/dev/null; do
			depth+=("$("$bin/frameprep" info --socket "$url" 2>/dev/null |
				awk '/^lane_/ { for (i = 1; i <= NF; i++) if ($i ~ /^inflight=/) { sub(/inflight=/, "", $i); printf "%s/", $i } }')")
			sleep 0.5
		done
		wait "${pids[@]}"
		w1=$(date +%s.%N)
		s1=$(served "$url"); t1=$(cpu_ticks $dp); l1=$(cpu_ticks $dp $dp)
		threads $dp >"$tmp/th1"
		# The daemon's threads by name: cores busy over the run (the
		# loop is the main thread, named frameprepd).
		echo "threads ($g GPUs, $procs x $c): $(awk -v hz="$hz" -v w="$(awk -v a="$w0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" '
			NR == FNR { t0[$1] = $3; next }
			{ d[$2] += ($3 - t0[$1]) / hz / w; n[$2]++ }
			END { for (k in d) if (d[k] >= 0.01) printf "%s x%d %.2f, ", k, n[k], d[k] }' "$tmp/th0" "$tmp/th1")"
		fps=0 bcpu=0 ok=1
		for p in $(seq "$procs"); do
			f=$(python3 -c "import json,sys; print(sum(r['frames_per_s'] for r in json.load(open(sys.argv[1]))['runs']))" \
				"$tmp/b${g}_${procs}_$p.json" 2>/dev/null || echo 0)
			fps=$(awk -v a="$fps" -v b="$f" 'BEGIN { print a + b }')
			grep -q '^rc 0' "$tmp/t${g}_${procs}_$p.txt" || { ok=0; tail -5 "$tmp/b${g}_${procs}_$p.log"; }
			# times: the second line is the children's user and system.
			bc=$(sed -n '3p' "$tmp/t${g}_${procs}_$p.txt" |
				awk '{ for (i = 1; i <= 2; i++) { split($i, a, /m|s/); t += a[1] * 60 + a[2] } print t }')
			bcpu=$(awk -v a="$bcpu" -v b="$bc" 'BEGIN { print a + b }')
		done
		n=$((s1 - s0))
		row=$(awk -v g="$g" -v p="$procs" -v c="$c" -v f="$fps" -v n="$n" \
			-v dt=$((t1 - t0)) -v lt=$((l1 - l0)) -v hz="$hz" -v bc="$bcpu" \
			-v w0="$w0" -v w1="$w1" -v ok="$ok" 'BEGIN {
			wall = w1 - w0
			printf "| %d | %d x %d | %.0f | %.0f | %.2f | %.0f | %s |", g, p, c, f,
			    n ? dt / hz * 1e6 / n : 0, lt / hz / wall,
			    n ? bc * 1e6 / n : 0, ok ? "ok" : "FAILED" }')
		rows+=("$row depth ${depth[*]:0:6}")
		[ -n "${FPREP_MG_TRACE:-}" ] && [ "$procs" = 1 ] &&
			tail -25 "$tmp/b${g}_${procs}_1.log"
		echo "$row"
	done
	kill -TERM $dp
	wait $dp
done
echo
echo "| GPUs | bench procs x streams | frames/s | daemon CPU us/request | loop thread (cores) | bench CPU us/request | verified |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for r in "${rows[@]}"; do echo "${r%% depth*}"; done
echo
echo "lanes' frames in flight (INFO samples, lane0/lane1/...):"
for r in "${rows[@]}"; do echo "${r%%|*}${r#* depth}" | cut -c1-200; done

# One daemon a GPU (the same load: 16 streams a GPU, one bench process a
# daemon): what several GPUs reach when no process is shared between them.
echo
echo "| GPUs | daemons | frames/s (sum) | daemon CPU us/request (mean) | verified |"
echo "| --- | --- | --- | --- | --- |"
for g in $(seq 1 "$ngpu"); do
	case $g in 1 | 2 | 4 | 8) ;; *) [ "$g" = "$ngpu" ] || continue ;; esac
	[ "$g" -gt 1 ] || continue
	dps=() bps=()
	for d in $(seq 0 $((g - 1))); do
		"$bin/frameprepd" --device "$d" --listen "ipc://$tmp/split$d.sock" \
			--max-inflight 1024 --max-inflight-per-conn 64 \
			2>"$tmp/split$d.log" &
		dps+=($!)
	done
	for d in $(seq 0 $((g - 1))); do
		for _ in $(seq 300); do "$bin/frameprep" info --socket "ipc://$tmp/split$d.sock" >/dev/null 2>&1 && break; sleep 0.1; done
	done
	declare -A s0=() t0=()
	wps=()
	for d in $(seq 0 $((g - 1))); do
		"$bin/frameprep-bench" --socket "ipc://$tmp/split$d.sock" --quiet --shm both \
			--shm-reply --synthetic 1920x1080 --size 640x640 -c "$per" --duration 1 \
			--warmup 1 --no-ceiling --verify none >/dev/null 2>&1 &
		wps+=($!)
	done
	wait "${wps[@]}"
	for d in $(seq 0 $((g - 1))); do
		s0[$d]=$(served "ipc://$tmp/split$d.sock"); t0[$d]=$(cpu_ticks "${dps[$d]}")
	done
	for d in $(seq 0 $((g - 1))); do
		"$bin/frameprep-bench" --socket "ipc://$tmp/split$d.sock" --quiet --shm both \
			--shm-reply --synthetic 1920x1080 --seed "$d" --size 640x640 -c "$per" \
			--duration "$secs" --warmup 0 --no-ceiling --verify sample \
			--json "$tmp/split_${g}_$d.json" >"$tmp/split_${g}_$d.out" 2>&1 &
		bps+=($!)
	done
	ok=ok
	for b in "${bps[@]}"; do wait "$b" || ok=FAILED; done
	fps=0 us=0
	for d in $(seq 0 $((g - 1))); do
		n=$(( $(served "ipc://$tmp/split$d.sock") - s0[$d] ))
		dt=$(( $(cpu_ticks "${dps[$d]}") - t0[$d] ))
		f=$(python3 -c "import json,sys; print(sum(r['frames_per_s'] for r in json.load(open(sys.argv[1]))['runs']))" \
			"$tmp/split_${g}_$d.json" 2>/dev/null || echo 0)
		fps=$(awk -v a="$fps" -v b="$f" 'BEGIN { print a + b }')
		us=$(awk -v a="$us" -v dt="$dt" -v n="$n" -v hz="$hz" -v g="$g" 'BEGIN { print a + (n ? dt / hz * 1e6 / n : 0) / g }')
	done
	printf '| %d | %d | %.0f | %.0f | %s |\n' "$g" "$g" "$fps" "$us" "$ok"
	kill -TERM "${dps[@]}"
	wait "${dps[@]}" 2>/dev/null
done
