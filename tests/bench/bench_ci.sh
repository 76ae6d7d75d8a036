#!/bin/sh
# bench_ci.sh: the ctest driver of frameprep-bench's end-to-end tests.
#
#   bench_ci.sh live  DAEMON BENCH [BENCH ARGS...]
#       start DAEMON --device cpu on a scratch ipc socket, run BENCH against
#       it with the given arguments; pass when BENCH exits 0.
#   bench_ci.sh sweep DAEMON BENCH [BENCH ARGS...]
#       as live, with --json, --csv and --plot (when gnuplot is on PATH)
#       into the scratch directory, then bench_plot.py over the JSON; pass
#       when the files are there and sound.
#   bench_ci.sh limit DAEMON BENCH
#       a daemon limited to 320-pixel-wide frames gets 640x480 ones; pass
#       when BENCH counts the ELIMIT error replies and exits 1.
#   bench_ci.sh fake  PYTHON BENCH
#       serve one canned, mismatching reply with nngcat; pass when BENCH
#       exits 1 (bad replies), not 0 and not 2 (a setup error).
#   bench_ci.sh peers DAEMON CLI PYTHON IMAGE
#       run the peers briefly on IMAGE (the torch ones skip without a GPU),
#       then check_peers.py against `CLI send` on a live DAEMON.
#   bench_ci.sh noserver BENCH
#       nobody listens; pass when BENCH exits 2 with a message.
#   bench_ci.sh trace DAEMON BENCH
#       DAEMON --trace: BENCH --trace finds a well-formed, ordered trace in
#       every reply and prints the stage table; DAEMON without --trace:
#       BENCH --trace counts every reply as without one and exits 1.
#   bench_ci.sh video DAEMON BENCH IMAGE
#       ffmpeg makes a 24-frame H.264 .mp4 with B-frames from IMAGE; BENCH
#       --video replays it on 3 streams flat out, then on 1 at its frame
#       rate; pass when each run exits 0 with every stream verified (its
#       72 or 24 frames, pts in display order) and prints frames/s and
#       latencies.
#   bench_ci.sh cpu DAEMON BENCH
#       BENCH prints the daemon's CPU time per request, above zero, for
#       each load.
set -u

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fprep-bench.XXXXXX")
url="ipc://$tmp/fp.sock"
pid=

cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	echo "bench_ci: FAIL: $*" >&2
	for log in "$tmp"/*.log; do
		[ -f "$log" ] || continue
		echo "---- $log" >&2
		tail -n 40 "$log" >&2
	done
	exit 1
}

# wait_socket: wait up to 10 s for the server (pid) to create the socket.
wait_socket() {
	i=0
	while [ ! -S "$tmp/fp.sock" ]; do
		kill -0 "$pid" 2>/dev/null || fail "the server exited early"
		i=$((i + 1))
		[ "$i" -le 100 ] || fail "no socket after 10 s"
		sleep 0.1
	done
}

start_daemon() {
	d=$1
	shift
	"$d" --listen "$url" --device cpu --workers 2 "$@" \
		>"$tmp/daemon.log" 2>&1 &
	pid=$!
	wait_socket
}

mode=${1:?mode}
shift
case $mode in
live)
	daemon=$1 bench=$2
	shift 2
	start_daemon "$daemon"
	"$bench" --socket "$url" --quiet "$@" || fail "frameprep-bench exited $?"
	;;
sweep)
	daemon=$1 bench=$2
	shift 2
	start_daemon "$daemon"
	plot=
	if command -v gnuplot >/dev/null 2>&1; then
		plot="--plot $tmp/sweep.png"
	else
		echo "bench_ci: gnuplot not on PATH: --plot not tested"
	fi
	# shellcheck disable=SC2086
	"$bench" --socket "$url" --quiet "$@" --json "$tmp/sweep.json" \
		--csv "$tmp/sweep.csv" $plot ||
		fail "frameprep-bench exited $?"
	[ -s "$tmp/sweep.json" ] || fail "no JSON"
	if command -v /usr/bin/python3 >/dev/null 2>&1; then
		/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
assert len(runs) == int(sys.argv[2]), len(runs)
for r in runs:
    assert r["ok"] > 0 and r["frames_per_s"] > 0, r
    assert r["latency_us"]["p50"] <= r["latency_us"]["p99"] <= r["latency_us"]["max"], r
    assert r["ceiling_fps"] > 0, r
print("json ok:", len(runs), "runs")
' "$tmp/sweep.json" "${BENCH_CI_POINTS:-2}" || fail "bad JSON"
	fi
	lines=$(wc -l <"$tmp/sweep.csv")
	[ "$lines" -eq $((${BENCH_CI_POINTS:-2} + 1)) ] ||
		fail "CSV has $lines lines"
	if [ -n "$plot" ]; then
		[ -s "$tmp/sweep.png" ] || fail "no PNG"
		sig=$(head -c 4 "$tmp/sweep.png" | tail -c 3)
		[ "$sig" = "PNG" ] || fail "the plot is not a PNG"
		/usr/bin/python3 "$here/bench_plot.py" "$tmp/plots" \
			"$tmp/sweep.json" >"$tmp/plot.log" 2>&1 ||
			fail "bench_plot.py exited $?: $(cat "$tmp/plot.log")"
		for f in throughput.png throughput.svg sweep-latency.png \
			sweep-latency.svg; do
			[ -s "$tmp/plots/$f" ] || fail "bench_plot.py wrote no $f"
		done
		sig=$(head -c 4 "$tmp/plots/throughput.png" | tail -c 3)
		[ "$sig" = "PNG" ] || fail "throughput.png is not a PNG"
		grep -q "<svg" "$tmp/plots/sweep-latency.svg" ||
			fail "sweep-latency.svg is not an SVG"
		echo "bench_plot ok: $(ls "$tmp/plots" | tr '\n' ' ')"
	fi
	;;
video)
	daemon=$1 bench=$2 image=$3
	ffmpeg -v error -y -loop 1 -i "$image" -vf \
		"zoompan=z='1+0.01*on':x='on*3':y='on*2':d=1:s=320x240:fps=25,format=yuv420p" \
		-frames:v 24 -c:v libx264 -bf 2 -g 8 "$tmp/clip.mp4" ||
		fail "ffmpeg could not make the clip"
	start_daemon "$daemon"
	for run in "3" "1 --realtime" "2 --window 1"; do
		# shellcheck disable=SC2086 # run is a stream count and flags
		set -- $run
		streams=$1
		shift
		"$bench" --socket "$url" --video "$tmp/clip.mp4" \
			--streams "$streams" --size 160x160 "$@" \
			>"$tmp/bench.out" 2>&1
		rc=$?
		cat "$tmp/bench.out"
		[ "$rc" -eq 0 ] || fail "frameprep-bench exited $rc, expected 0"
		grep -q "^frames    $((24 * streams)) in .* frames/s" \
			"$tmp/bench.out" || fail "no frames/s line of $((24 * streams)) frames"
		grep -q "^latency   p50 [0-9]* us, p99 [0-9]* us" \
			"$tmp/bench.out" || fail "no latency line"
		grep -q "^verified  every stream: 24 frames" "$tmp/bench.out" ||
			fail "the streams were not verified"
	done
	;;
limit)
	daemon=$1 bench=$2
	start_daemon "$daemon" --max-width 320
	"$bench" --socket "$url" --quiet --synthetic 640x480 --requests 5 \
		--warmup 0 --no-ceiling >"$tmp/bench.out" 2>&1
	rc=$?
	cat "$tmp/bench.out"
	[ "$rc" -eq 1 ] || fail "frameprep-bench exited $rc, expected 1"
	grep -q "FAILURES:.*ELIMIT 5" "$tmp/bench.out" ||
		fail "the ELIMIT replies were not counted"
	;;
fake)
	python=$1 bench=$2
	"$python" "$here/make_canned_reply.py" "$tmp/canned.bin" ||
		fail "cannot write the canned reply"
	nngcat --rep0 --listen "$url" --file "$tmp/canned.bin" --raw \
		>"$tmp/nngcat.log" 2>&1 &
	pid=$!
	wait_socket
	"$bench" --socket "$url" --quiet --synthetic 64x48 --requests 20 \
		--warmup 0 --no-ceiling --timeout 3000 >"$tmp/bench.out" 2>&1
	rc=$?
	cat "$tmp/bench.out"
	[ "$rc" -eq 1 ] || fail "frameprep-bench exited $rc, expected 1"
	grep -q "FAILURES: wrong [1-9]" "$tmp/bench.out" ||
		fail "the canned replies were not counted as wrong"
	;;
peers)
	daemon=$1 cli=$2 python=$3 image=$4
	start_daemon "$daemon"
	for peer in peer_opencv_cpu peer_torch_naive peer_torch_tuned; do
		"$python" "$here/$peer.py" --image "$image" --iters 3 \
			--warmup 1 --out-dir "$tmp/peers"
		rc=$?
		[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "$peer exited $rc"
	done
	"$python" "$here/check_peers.py" --dir "$tmp/peers" \
		--frameprep "$cli" --socket "$url" || fail "check_peers failed"
	;;
noserver)
	bench=$1
	"$bench" --socket "$url" --quiet --synthetic 64x48 --requests 1 \
		>"$tmp/bench.out" 2>&1
	rc=$?
	cat "$tmp/bench.out"
	[ "$rc" -eq 2 ] || fail "frameprep-bench exited $rc, expected 2"
	;;
trace)
	daemon=$1 bench=$2
	set -- --socket "$url" --quiet --synthetic 320x240 --size 160x160 \
		-c 1,2 --requests 40 --warmup 0 --no-ceiling --trace
	start_daemon "$daemon" --trace
	"$bench" "$@" >"$tmp/on.out" 2>&1 || fail "with --trace: exit $?"
	cat "$tmp/on.out"
	n=$(grep -c "replies traced, 0 without a trace, 0 malformed" "$tmp/on.out")
	[ "$n" -eq 2 ] || fail "not every reply had a well-formed trace"
	for stage in "loop (nng -> loop)" "lane (loop -> backend)" \
		"done (completion)" "seen (completion -> loop)" "sent (loop -> nng)"; do
		grep -qF "| $stage |" "$tmp/on.out" || fail "no row $stage"
	done
	grep -q "^| h2d" "$tmp/on.out" && fail "device stages on the CPU backend"
	kill "$pid"
	wait "$pid"
	rm -f "$tmp/fp.sock"
	start_daemon "$daemon"
	"$bench" "$@" >"$tmp/off.out" 2>&1
	rc=$?
	cat "$tmp/off.out"
	[ "$rc" -eq 1 ] || fail "without --trace: exit $rc, expected 1"
	grep -q "0 replies traced, [1-9][0-9]* without a trace" "$tmp/off.out" ||
		fail "replies without --trace were not counted as untraced"
	;;
cpu)
	daemon=$1 bench=$2
	start_daemon "$daemon"
	"$bench" --socket "$url" --quiet --synthetic 320x240 --size 160x160 \
		-c 1,4 --duration 1 --warmup 0.2 --no-ceiling \
		>"$tmp/bench.out" 2>&1 || fail "frameprep-bench exited $?"
	cat "$tmp/bench.out"
	for c in 1 4; do
		v=$(sed -n "s/^c=$c: daemon CPU \([0-9.]*\) us per request.*/\1/p" \
			"$tmp/bench.out")
		[ -n "$v" ] || fail "no daemon CPU line for c=$c"
		awk -v v="$v" 'BEGIN { exit !(v > 0) }' ||
			fail "daemon CPU for c=$c is $v"
	done
	;;
*)
	echo "usage: $0 live|sweep|limit|fake|peers|noserver|trace|cpu ..." >&2
	exit 2
	;;
esac
exit 0
