#!/usr/bin/env bash
# run-on-gpu.sh: runs frameprep's GPU tests and the lane benchmark on a
# machine that has a GPU, its driver and the CUDA toolkit but not the
# build's other libraries, from a bundle made on the build machine (see
# "GPU build" in deploy/README.md).
#
#   here:  tests/gpu/run-on-gpu.sh --stage BUILD_DIR IMAGE_DIR BUNDLE_DIR
#          copies the test binaries, the shared libraries they need that the
#          GPU machine lacks (tests/gpu/collect-libs.sh),
#          the photographs and this script into BUNDLE_DIR.
#   there: bash BUNDLE_DIR/run-on-gpu.sh [lane|service|all]
#          lane: test_kernel_cache, test_jpeg_gpu (JPEG frames: nvJPEG's
#          engine, then FPREP_NVJPEG=off), test_roi_gpu (ROIS and BATCH
#          jobs against the CPU reference), test_gpu_backend (its equality cases
#          also in the transfer modes FPREP_TRANSFER names, default
#          mapped,auto; plain and, with
#          FPREP_MEMCHECK=1, under compute-sanitizer memcheck) and bench_lane;
#          service: frameprepd on GPU 0 with the CLI, the shared-memory test,
#          nonreaders (test_server_nonreaders on this machine's cores),
#          b1080_jpeg (JPEG frames staged from the photographs, 1080p q90:
#          the GPU peers, the GPU daemon in the variants FPREP_JPEG_VARIANTS
#          names, the CPU backend against OpenCV on as many threads; a
#          table with the bars), nvjpeg_backends (bench_nvjpeg_backends:
#          one such JPEG at a time through each nvJPEG backend and
#          libjpeg-turbo, a table of lone p50/p90 and frames/s),
#          frameprep-bench (inline, shared memory, ECHO ceiling, sweeps, 1080p
#          and 4K, against the PCIe ceiling that bench_lane measured),
#          b1080_modes (a daemon per --transfer staged, mapped, auto, with
#          --trace: shared-memory 1080p at -c 1,4,16 beside the copy-probe
#          floor) and the
#          peers (OpenCV on the CPU, PyTorch naive and tuned) on the same
#          frames, and the metrics endpoint's cost (metrics_cost.py); two
#          lanes on GPU 0: two_lanes (test_lanes: --lanes 2, inline and
#          shared memory equal to the CPU reference, both lanes served) and
#          b1080_lanes (1080p shm c=16 with --lanes 1, then 2); video
#          (test_video_gpu: streams on NVDEC equal to the CPU backend's
#          tensors made at --stage, errors, then 1, 8 and 32 streams at
#          once: frames/s, latency; FPREP_RUNS=video runs it alone); CUDA
#          regions: cuda_regions (test_cuda_regions: producer and consumer
#          processes, every input x output location, bad handles, leaks),
#          cuda_py (tests/python/test_cuda.py; its video streams into
#          CUDA memory take the streams staged in video/), cuda_example
#          (src/python/examples/cuda_batch.py) and cuda_bench
#          (tests/bench/bench_cuda.py --nv12: also issue 11's NV12 bar),
#          roi_peers (tests/bench/bench_roi.py: issue 27's ROI bar,
#          frameprep against torchvision and CV-CUDA) and batch_bar
#          (BATCH of 16 640x480 frames against one per request);
#          the Python runs need the package's wheel (built at --stage)
#          and torch, torchvision, cuda-python there. Ends with a short table.
#          Exit status: 0 when every test and every verified benchmark
#          passed.
set -uo pipefail

if [ "${1:-}" = "--stage" ]; then
	[ $# -eq 4 ] || { echo "usage: $0 --stage BUILD_DIR IMAGE_DIR BUNDLE_DIR" >&2; exit 2; }
	build=$2 images=$3 out=$4
	set -e
	mkdir -p "$out/bin" "$out/images"
	bins=()
	for b in test_kernel_cache test_gpu_backend test_jpeg_gpu test_roi_gpu bench_lane bench_hosts; do
		cp "$build/tests/gpu/$b" "$out/bin/"
		bins+=("$out/bin/$b")
	done
	# Built only where nvjpeg.h was found.
	if [ -x "$build/tests/gpu/bench_nvjpeg_backends" ]; then
		cp "$build/tests/gpu/bench_nvjpeg_backends" "$out/bin/"
		bins+=("$out/bin/bench_nvjpeg_backends")
	fi
	for b in service/frameprepd src/frameprep src/frameprep-bench \
	         tests/integration/test_shm_daemon tests/integration/test_jpeg_race \
	         tests/integration/test_server_nonreaders \
	         tests/gpu/test_cuda_regions \
	         tests/gpu/test_lanes tests/bench/bare_nng; do
		cp "$build/$b" "$out/bin/"
		bins+=("$out/bin/$(basename "$b")")
	done
	mkdir -p "$out/peers"
	src=$(cd "$(dirname "$0")/../.." && pwd)
	# Video streams (video_streams.sh: ffmpeg, the photographs) and the
	# CPU backend's tensors for them, which the GPU's must equal.
	cp "$build/tests/gpu/test_video_gpu" "$out/bin/"
	bins+=("$out/bin/test_video_gpu")
	{ bash "$src/tests/gpu/video_streams.sh" "$images" "$out/video" rate &&
	  "$build/tests/gpu/test_video_gpu" record cpu "$build/service/frameprepd" \
		"$out/video" >"$out/video/record.log" 2>&1; } ||
		{ echo "no video streams staged (ffmpeg, the photographs?)"; rm -rf "$out/video"; }
	cp "$src"/tests/bench/*.py "$out/peers/"
	mkdir -p "$out/python/tests" "$out/whl"
	cp -r "$src/src/python/examples" "$out/python/"
	cp "$src"/tests/python/conftest.py "$src"/tests/python/test_cuda.py \
		"$src"/tests/python/test_dataloader.py "$out/python/tests/"
	# The Python package: its cp310-abi3 wheel (the extension
	# frameprep._native, nng linked in), built here by scikit-build-core
	# from the project's CMake (as tests/python/wheel-test.sh builds it).
	pw=$(mktemp -d)
	/usr/bin/python3 -m pip wheel --quiet --disable-pip-version-check \
		--no-deps -w "$out/whl" --config-settings=build-dir="$pw" \
		"$src/src/python" || echo "no Python wheel staged"
	rm -rf "$pw"
	cp "$src"/.whl/*.whl "$out/whl/" 2>/dev/null || true
	bash "$src/tests/gpu/collect-libs.sh" "$out/libs" "${bins[@]}" >/dev/null
	cp "$images"/*.png "$images"/*.jpg "$out/images/" 2>/dev/null || true
	# JPEG frames for frameprep-bench --format jpeg: the photographs at
	# 1920x1080, quality 90, 4:2:0 (OpenCV, as peer_jpeg.py encodes).
	mkdir -p "$out/jpeg"
	/usr/bin/python3 - "$images" "$out/jpeg" <<'PY' || echo "no JPEG frames staged (python3-opencv?)"
import glob, os, sys
import cv2
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.png")) +
                   glob.glob(os.path.join(sys.argv[1], "*.jpg"))):
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None or min(img.shape[:2]) < 256:
        continue
    img = cv2.resize(img, (1920, 1080), interpolation=cv2.INTER_LINEAR)
    name = os.path.splitext(os.path.basename(path))[0] + ".jpg"
    cv2.imwrite(os.path.join(sys.argv[2], name), img,
                [cv2.IMWRITE_JPEG_QUALITY, 90])
PY
	cp "$0" "$out/run-on-gpu.sh"
	cp "$(dirname "$0")/multi_gpu.sh" "$out/multi_gpu.sh"
	cp "$(dirname "$0")/ab_python.sh" "$out/ab_python.sh"
	du -sh "$out"
	exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_CACHE_HOME=$(mktemp -d)
logs=${FPREP_LOGS:-$(mktemp -d)}  # FPREP_LOGS: keep the logs there
declare -A result

run() { # run NAME COMMAND...: runs, keeps the log, records the verdict
	local name=$1; shift
	# FPREP_RUNS (a comma-separated list of names) limits what runs.
	case ",${FPREP_RUNS:-$name}," in *",$name,"*) ;; *) return 0 ;; esac
	echo "=== $name: $*"
	"$@" >"$logs/$name.log" 2>&1
	local rc=$?
	case $rc in
	0) result[$name]=pass ;;
	77) result[$name]=skip ;;
	*) result[$name]="FAIL (rc $rc)" ;;
	esac
	grep -v '^<[67]>' "$logs/$name.log" | tail -n "${TAILN:-40}"
}

# latency_run: in one run, the bare nng REQ/REP round trip (bare_nng)
# beside frameprepd's ECHO, then 1080p BGR8 -> 640x640 f32 through shared
# memory at FPREP_LAT_C (default c=1, 16 and 32; and 4K -> 1280x1280 at
# c=1) for each TRANSFER:SPIN[:ROWS] of FPREP_LAT_MODES (default
# staged:auto mapped:auto staged:auto:all staged:0: --transfer, the
# daemon's --spin-us and --h2d-rows, default read) and each
# reply path of FPREP_LAT_REPLIES (default nng shm spin door doorspin:
# through nng, in the region with --shm-reply, and that with the client
# polling for it, --spin-us 1000, at c=1 only; door: the request too
# through a doorbell (--doorbell), doorspin: that with the client polling,
# c=1 only; inline: frame and tensor in the messages, --shm none); beside
# the copy-probe floor of bench_lane. ECHO runs through nng and through a
# doorbell with a polling client.
# Ends with a table: p50 and p99 at c=1, best frames/s.
# latency_run: bare nng, ECHO and 1080p/4K c=1 latency per transfer mode
# (FPREP_LAT_MODES) and reply path (FPREP_LAT_REPLIES), at concurrency
# FPREP_LAT_C. FPREP_LAT_WRAP is a command that daemon and bench run under
# (e.g. "taskset -c 2-9"); FPREP_LAT_BIN the folder of the frameprepd and
# frameprep-bench to run (default the bundle's bin/: another build's, to
# compare two versions in one lease). Ends with a table.
latency_run() {
	local ms m sp rr lu lp rc=0 bu=ipc://$tmp/bare.sock
	local bin=${FPREP_LAT_BIN:-$here/bin}
	local -a wrap
	read -r -a wrap <<<"${FPREP_LAT_WRAP:-}"
	"$here/bin/bare_nng" serve "$bu" & lp=$!
	sleep 0.3
	"$here/bin/bare_nng" ping "$bu" 20000 1000 || rc=1
	kill $lp; wait $lp
	for ms in ${FPREP_LAT_MODES:-staged:auto mapped:auto staged:auto:all staged:0}; do
		local rows
		IFS=: read -r m sp rows <<<"$ms"
		rows=${rows:-read}
		[ "$rows" = read ] || sp=$sp-$rows
		lu=ipc://$tmp/lat-$m-$sp.sock
		"${wrap[@]}" "$bin/frameprepd" --device 0 --listen "$lu" --slots 4 \
			--max-inflight 256 --transfer "$m" --spin-us "${sp%-*}" \
			--h2d-rows "$rows" \
			--max-out-width 4096 --max-out-height 4096 \
			2>"$logs/frameprepd_lat_${m}_${sp}.log" &
		lp=$!
		for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$lu" >/dev/null 2>&1 && break; sleep 0.1; done
		if [ "$m" = staged ] && [ "$rows" = read ]; then
			echo "--- ECHO, spin-us $sp"
			"$bin/frameprep-bench" --socket "$lu" --quiet --echo --synthetic 64x64 --size 8x8 \
				--duration 2 --warmup 0.5 --no-ceiling -c 1 --json "$logs/lat_echo_$sp.json" || rc=1
			echo "--- ECHO through a doorbell, spin-us $sp"
			"$bin/frameprep-bench" --socket "$lu" --quiet --echo --synthetic 64x64 --size 8x8 \
				--shm both --doorbell --spin-us 1000 \
				--duration 2 --warmup 0.5 --no-ceiling -c 1 --json "$logs/lat_echodoor_$sp.json" || rc=1
		fi
		for rr in ${FPREP_LAT_REPLIES:-nng shm spin door doorspin}; do
			local extra=() cs=${FPREP_LAT_C:-1,16,32} where=both
			case $rr in
			inline) where=none ;;
			shm) extra=(--shm-reply) ;;
			# One polling client a stream: c=1 only (more polling
			# streams than cores would measure the scheduler).
			spin) extra=(--shm-reply --spin-us 1000) cs=1 ;;
			door) extra=(--shm-reply --doorbell) ;;
			doorspin) extra=(--shm-reply --doorbell --spin-us 1000) cs=1 ;;
			# 200 frames/s, one stream: 5 ms apart, longer than the
			# daemon polls, so each request wakes it (a camera's
			# stream, not a closed loop).
			doorrate) extra=(--shm-reply --doorbell --spin-us 1000 --rate 200) cs=1 ;;
			# The same through nng: the replies in the region, the
			# requests through the socket.
			spinrate) extra=(--shm-reply --spin-us 1000 --rate 200) cs=1 ;;
			esac
			echo "--- transfer $m, spin-us $sp, reply $rr"
			"${wrap[@]}" "$bin/frameprep-bench" --socket "$lu" --quiet \
				--image "$here/images/astronaut.png" --verify sample \
				--duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling \
				--frame-size 1920x1080 --size 640x640 --shm "$where" -c "$cs" \
				"${extra[@]}" --json "$logs/lat_${m}_${sp}_$rr.json" || rc=1
			[ "${sp%-*}" = auto ] || continue
			"${wrap[@]}" "$bin/frameprep-bench" --socket "$lu" --quiet \
				--image "$here/images/astronaut.png" --verify sample \
				--duration 2 --warmup 1 --no-ceiling \
				--frame-size 3840x2160 --size 1280x1280 --shm "$where" -c 1 \
				"${extra[@]}" --json "$logs/lat4k_${m}_${sp}_$rr.json" || rc=1
		done
		kill -TERM $lp
		wait $lp || rc=1
	done
	echo
	echo "| run | c=1 p50 us | c=1 p99 us | p99/p50 | best frames/s |"
	echo "| --- | --- | --- | --- | --- |"
	for f in "$logs"/lat_*.json "$logs"/lat4k_*.json; do
		[ -s "$f" ] || continue
		python3 - "$f" <<'PY' || true
import json, os, sys
runs = json.load(open(sys.argv[1]))["runs"]
c1 = [r for r in runs if r["concurrency"] == 1]
best = max(r["frames_per_s"] for r in runs)
name = os.path.basename(sys.argv[1])[:-5]
if c1:
    lat = c1[0]["latency_us"]
    print("| %s | %.0f | %.0f | %.2f | %.0f |" % (name, lat["p50"], lat["p99"],
          lat["p99"] / lat["p50"], best))
PY
	done
	# The bounds of bench_lane's copy probes in this run (when it ran):
	# the floor of one frame, and the rates the link allows.
	local h2d d2h dx dr
	h2d=$(awk '/H2D .*1080p BGR8/ { print $(NF-3) }' "$logs/bench.log" 2>/dev/null)
	d2h=$(awk '/D2H .*640x640x3 f32/ { print $(NF-3) }' "$logs/bench.log" 2>/dev/null)
	dx=$(awk '/H2D and D2H at once/ { print $(NF-7) }' "$logs/bench.log" 2>/dev/null)
	dr=$(awk '/the same with the rows read/ { print $(NF-7) }' "$logs/bench.log" 2>/dev/null)
	if [ -n "$h2d" ] && [ -n "$d2h" ]; then
		awk -v h="$h2d" -v d="$d2h" -v x="${dx:-0}" -v r="${dr:-0}" 'BEGIN {
			printf "floor (H2D + D2H probes + 9 us kernel): %.1f us; H2D-bound %.0f frames/s, both directions %.0f, both directions with the rows read %.0f\n",
				h + d + 9, 1e6 / h, x, r }'
	fi
	return $rc
}

# modes_run: 1080p BGR8 -> 640x640 f32 through shared memory with the
# lane's transfers FPREP_MODES (default staged mapped auto; a daemon each,
# with --trace), at concurrency FPREP_MODES_C (default 1,4,16), with the
# bench's extra arguments FPREP_MODES_ARGS (e.g. "--shm-reply --doorbell
# --spin-us 1000"), beside the floor of the same frame's copy probes and
# kernel (bench_lane). Ends with a table and PASS or FAIL.
modes_run() {
	local h2d d2h m mu mp rc=0
	h2d=$(awk '/H2D .*1080p BGR8/ { print $(NF-3) }' "$logs/bench.log")
	d2h=$(awk '/D2H .*640x640x3 f32/ { print $(NF-3) }' "$logs/bench.log")
	for m in ${FPREP_MODES:-staged mapped auto}; do
		mu=ipc://$tmp/modes-$m.sock
		"$here/bin/frameprepd" --device 0 --listen "$mu" --slots 4 \
			--max-inflight 256 --transfer "$m" --trace \
			2>"$logs/frameprepd_$m.log" &
		mp=$!
		for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$mu" >/dev/null 2>&1 && break; sleep 0.1; done
		echo "--- transfer $m"
		"$here/bin/frameprep" info --socket "$mu" | grep -E '^(transfer|trace|integrated):'
		"$here/bin/frameprep-bench" --socket "$mu" --quiet \
			--image "$here/images/astronaut.png" --verify sample \
			--duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling \
			--frame-size 1920x1080 --size 640x640 --shm both -c "${FPREP_MODES_C:-1,4,16}" \
			${FPREP_MODES_ARGS:-} --trace --json "$logs/modes_$m.json" >"$logs/modes_$m.txt" 2>&1 || rc=1
		cat "$logs/modes_$m.txt"
		kill -TERM $mp
		wait $mp || rc=1
	done
	echo
	# The kernel alone (a few us) is the "kernel end" gap of the traces
	# under load; bench_lane's single frame runs in overlapping bands.
	echo "copy probes, 1080p BGR8 -> 640x640 f32: H2D ${h2d:-?} + D2H ${d2h:-?} = $(awk -v a="$h2d" -v c="$d2h" 'BEGIN { printf "%.1f", a + c }') us (the floor adds the kernel)"
	echo "| transfer | load | p50 us | p99 us | frames/s | daemon CPU us/request |"
	echo "| --- | --- | --- | --- | --- | --- |"
	for m in ${FPREP_MODES:-staged mapped auto}; do
		awk -v m="$m" '
			/^c=[0-9]+ / && NF == 11 { fps[$1] = $2; p50[$1] = $5; p99[$1] = $7; order[++n] = $1 }
			/^c=[0-9]+: daemon CPU / { sub(":", "", $1); cpu[$1] = $4 }
			END { for (i = 1; i <= n; i++) { k = order[i]
				printf "| %s | %s | %s | %s | %s | %s |\n", m, k, p50[k], p99[k], fps[k], (k in cpu) ? cpu[k] : "?" } }
		' "$logs/modes_$m.txt"
	done
	[ $rc -eq 0 ] && echo "b1080_modes: PASS" || echo "b1080_modes: FAIL"
	return $rc
}

mode=${1:-all}
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null
tests=()
if [ "$mode" != service ]; then
	TAILN=12 run kernel_cache "$here/bin/test_kernel_cache"
	# Its JPEG case wants libjpeg-turbo's pixels: the lane's CPU decoders.
	TAILN=30 run gpu_backend env FPREP_TRANSFER="${FPREP_TRANSFER:-mapped,auto}" \
		FPREP_NVJPEG=off "$here/bin/test_gpu_backend" "$here/images"
	# JPEG frames: nvJPEG's engine (libnvjpeg carried in libs/), then the
	# lane's libjpeg-turbo decoders; |GPU - CPU| per sampling and a rate.
	TAILN=26 run jpeg_gpu "$here/bin/test_jpeg_gpu" "$here/images"
	TAILN=26 run jpeg_gpu_cpu env FPREP_NVJPEG=off "$here/bin/test_jpeg_gpu" "$here/images"
	# ROIS (68 elements of a 1080p frame) and BATCH (16 x 640x480) jobs.
	TAILN=12 run roi_gpu "$here/bin/test_roi_gpu" "$here/images"
	tests+=(kernel_cache gpu_backend jpeg_gpu jpeg_gpu_cpu roi_gpu)
	cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	if [ "${FPREP_MEMCHECK:-0}" = 1 ] && [ -x "$cs" ]; then
		TAILN=4 run memcheck timeout 150 "$cs" --tool memcheck --leak-check full \
			--error-exitcode 9 "$here/bin/test_gpu_backend" "$here/images" 2
		tests+=(memcheck)
	fi
fi
# The lane benchmark also gives the PCIe ceiling the service runs compare with.
TAILN=40 run bench "$here/bin/bench_lane" "$here/images"
tests+=(bench)
pcie=$(awk '/H2D .*1080p BGR8/ { print $(NF-1) }' "$logs/bench.log")

if [ "$mode" != lane ] && [ -x "$here/bin/frameprepd" ]; then
	tmp=$(mktemp -d)
	url=ipc://$tmp/fp.sock
	TAILN=8 run shm_gpu "$here/bin/test_shm_daemon" "$here/bin/frameprepd" "$here/images" 0
	tests+=(shm_gpu)
	# A JPEG in a region read once by the lane's decoders (nvJPEG's
	# engine and libjpeg-turbo) while the client flips its SOF; then
	# scan bombs filling the lane's staging slots beside another
	# client's photographs ("jpeg turns": slots and decodes by turns).
	TAILN=8 run jpeg_race_gpu "$here/bin/test_jpeg_race" "$here/bin/frameprepd" "$here/images" 0
	tests+=(jpeg_race_gpu)
	# nonreaders: 4, then 16, connections that never read their replies
	# beside another's INFOs (the server in the test, a fake backend: no
	# GPU), on this machine's cores: each INFO's time, their worst.
	TAILN=12 run nonreaders "$here/bin/test_server_nonreaders"
	tests+=(nonreaders)
	TAILN=12 run two_lanes "$here/bin/test_lanes" "$here/bin/frameprepd" "$here/images"
	tests+=(two_lanes)
	# video: H.264 (B-frames), HEVC and an odd size decoded on NVDEC equal
	# to the CPU backend's tensors staged beside them (test_video_gpu
	# check: counts, pts, 1 LSB, a corrupt and a cut packet, INFO), a
	# daemon with FPREP_NVDEC=off (refused naming libnvcuvid.so.1, frames
	# served: off), then
	# FPREP_VIDEO_STREAMS (1 8 32) streams at once of a 1080p H.264, then HEVC, to
	# 640x640 f32 written into each client's CUDA memory
	# (FPREP_VIDEO_RATE_OUT, default cuda; inline or shm) for
	# FPREP_VIDEO_S (5) s each, once every stream's decoder is made:
	# frames/s and reply latency,
	# each stream with one packet in flight (the one-stream latency bar),
	# then with FPREP_VIDEO_WINDOW (4: the NVDEC session decodes the next
	# packet while it preprocesses one); then, where PyNvVideoCodec
	# imports (PYTHONPATH), the peer on the same files, H.264 and HEVC
	# (peer_video.py: decode only, and decode + a torch letterbox), at the
	# same stream counts.
	video_run() {
		local c n w rc=0
		"$here/bin/test_video_gpu" check 0 "$here/bin/frameprepd" "$here/video" || rc=1
		"$here/bin/test_video_gpu" off 0 "$here/bin/frameprepd" || rc=1
		for c in h264 hevc; do
			for w in 1 "${FPREP_VIDEO_WINDOW:-4}"; do
				for n in ${FPREP_VIDEO_STREAMS:-1 8 32}; do
					FPREP_VIDEO_RATE_OUT=${FPREP_VIDEO_RATE_OUT:-cuda} \
						"$here/bin/test_video_gpu" rate 0 "$here/bin/frameprepd" \
						"$here/video" "$n" "${FPREP_VIDEO_S:-5}" "$w" "$c" || rc=1
				done
			done
		done
		if python3 -c 'import PyNvVideoCodec' 2>/dev/null; then
			local streams
			streams=$(echo ${FPREP_VIDEO_STREAMS:-1 8 32} | tr ' ' ,)
			python3 "$here/peers/peer_video.py" --streams "$streams" \
				--seconds "${FPREP_VIDEO_S:-5}" \
				--file "$here/video/rate.h264" --file "$here/video/rate.hevc" || rc=1
		else
			echo "video peer: PyNvVideoCodec not importable: not run"
		fi
		return $rc
	}
	if [ -f "$here/video/streams.txt" ]; then
		TAILN=24 run video video_run
		tests+=(video)
	fi
	# bench_lanes: 1080p BGR8 -> 640x640 f32 over shared memory at c=16 on
	# GPU 0, from a daemon with --lanes 1, then one with --lanes 2.
	bench_lanes() {
		local k lurl lpid fps=()
		for k in 1 2; do
			lurl=ipc://$tmp/lanes$k.sock
			"$here/bin/frameprepd" --device 0 --lanes $k --listen "$lurl" --slots 4 \
				--max-inflight 256 2>"$logs/frameprepd_lanes$k.log" &
			lpid=$!
			for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$lurl" >/dev/null 2>&1 && break; sleep 0.1; done
			"$here/bin/frameprep-bench" --socket "$lurl" --quiet --image "$here/images/astronaut.png" \
				--verify sample --duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling \
				--frame-size 1920x1080 --size 640x640 --shm both -c 16 --json "$logs/b1080_lanes$k.json"
			local rc=$?
			"$here/bin/frameprep" info --socket "$lurl" | grep -E '^(lanes|lane_[0-9]+):'
			kill -TERM $lpid; wait $lpid || rc=1
			[ $rc -eq 0 ] || return 1
			fps[k]=$(grep -o '"frames_per_s": [0-9.]*' "$logs/b1080_lanes$k.json" | awk '$2 > m { m = $2 } END { printf "%.1f", m }')
		done
		echo "1080p -> 640x640 f32 over shm, c=16, GPU 0: --lanes 1 ${fps[1]} frames/s, --lanes 2 ${fps[2]} frames/s," \
			"ratio $(awk -v a="${fps[2]}" -v b="${fps[1]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')"
	}
	TAILN=16 run b1080_lanes bench_lanes
	tests+=(b1080_lanes)
	"$here/bin/frameprepd" --device 0 --listen "$url" --slots 4 \
		--max-inflight 256 --max-out-width 4096 --max-out-height 4096 \
		2>"$logs/frameprepd.log" &
	dpid=$!
	for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$url" >/dev/null 2>&1 && break; sleep 0.1; done
	TAILN=40 run info "$here/bin/frameprep" info --socket "$url"
	TAILN=12 run send "$here/bin/frameprep" send "$here/images/astronaut.png" --socket "$url" -o "$logs/astronaut_gpu.npy"
	TAILN=12 run send_shm "$here/bin/frameprep" send "$here/images/astronaut.png" --socket "$url" --shm -o "$logs/astronaut_gpu_shm.npy"
	tests+=(info send send_shm)
	B=("$here/bin/frameprep-bench" --socket "$url" --quiet --image "$here/images/astronaut.png"
	   --verify sample --duration "${FPREP_BENCH_S:-3}" --warmup 1 --ceiling-duration 2 --pcie-gbps "${pcie:-0}")
	sweep=1,2,4,8,16,32,64
	TAILN=30 run b1080_inline "${B[@]}" --frame-size 1920x1080 --size 640x640 -c $sweep --json "$logs/b1080_inline.json"
	TAILN=30 run b1080_shm "${B[@]}" --frame-size 1920x1080 --size 640x640 --shm both -c $sweep --json "$logs/b1080_shm.json"
	# The same photo as NV12 (converted by the bench as the CLI does): half the bytes in.
	TAILN=30 run b1080_nv12_shm "${B[@]}" --frame-size 1920x1080 --size 640x640 --shm both --format nv12 -c $sweep --json "$logs/b1080_nv12_shm.json"
	TAILN=20 run b4k_inline "${B[@]}" --frame-size 3840x2160 --size 1280x1280 -c 1,8,32 --json "$logs/b4k_inline.json"
	TAILN=20 run b4k_shm "${B[@]}" --frame-size 3840x2160 --size 1280x1280 --shm both -c 1,8,32 --json "$logs/b4k_shm.json"
	TAILN=20 run b1080_f16 "${B[@]}" --frame-size 1920x1080 --size 640x640 --dtype f16 --shm both -c 1,16 --json "$logs/b1080_f16.json"
	# With f32 out, NV12's D2H (4.9 MB) outweighs its H2D (3.1 MB); with f16 (2.5 MB) the input bounds it.
	TAILN=20 run b1080_nv12_f16 "${B[@]}" --frame-size 1920x1080 --size 640x640 --dtype f16 --shm both --format nv12 -c 1,16 --json "$logs/b1080_nv12_f16.json"
	TAILN=20 run b1080_open "${B[@]}" --frame-size 1920x1080 --size 640x640 --shm both -c 32 --rate 2000,6000 --arrivals poisson --json "$logs/b1080_open.json"
	# batch_bar (issue 27's batch bar): BATCH requests of 16 frames
	# 640x480 -> 224x224 f32 against the same frames one per request,
	# frames and tensors in shared memory, at c=1, 4, 16; frames/s of
	# each and the ratio (PASS when the best batch rate is >= 2x the
	# best single rate).
	batch_run() {
		local rc=0 a=("$here/bin/frameprep-bench" --socket "$url" --quiet
			--image "$here/images/astronaut.png" --verify sample
			--duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling
			--frame-size 640x480 --size 224x224 --shm both -c 1,4,16)
		"${a[@]}" --batch 16 --json "$logs/batch16.json" || rc=1
		"${a[@]}" --json "$logs/batch_single.json" || rc=1
		python3 - "$logs/batch16.json" "$logs/batch_single.json" 16 <<'PY' || rc=1
import json, sys
n = int(sys.argv[3])
def rates(path, mult):
    return {r["concurrency"]: r["frames_per_s"] * mult
            for r in json.load(open(path))["runs"]}
b, s = rates(sys.argv[1], n), rates(sys.argv[2], 1)
print("| c | BATCH of %d, frames/s | one per request, frames/s | ratio |" % n)
print("| --- | --- | --- | --- |")
for c in sorted(set(b) & set(s)):
    print("| %d | %.0f | %.0f | %.2f |" % (c, b[c], s[c], b[c] / s[c] if s[c] else 0))
best = max(b.values()) / max(s.values()) if s and b and max(s.values()) else 0
ok = best >= 2.0
print("batch bar: best %.0f / best %.0f frames/s = %.2fx (want >= 2x): %s"
      % (max(b.values() or [0]), max(s.values() or [0]), best, "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
		return $rc
	}
	TAILN=24 run batch_bar batch_run
	tests+=(batch_bar)
	# b1080_jpeg: JPEG frames (1080p q90 photographs, sent as they are;
	# tensors into shared memory, --shm FPREP_JPEG_SHM, default out) ->
	# 640x640 f32, in one go:
	#  - the peers on the GPU (peer_jpeg.py: nvImageCodec, torchvision,
	#    OpenCV + .cuda(), where installed; FPREP_JPEG_PEERS, "" for
	#    none), whose JPEG files the benches then send (the same bytes);
	#  - the defaults' daemon also through the frameprep package, the
	#    tensor into the caller's CUDA memory as the peers' (peer
	#    frameprep of peer_jpeg.py, with the bundle's wheel);
	#  - a GPU daemon (--jpeg-engine=true: these measure the engine) per
	#    variant of FPREP_JPEG_VARIANTS (NAME or
	#    NAME:VAR=VALUE[:VAR=VALUE...]; default: the defaults, calls2
	#    (FPREP_NVJPEG_CALLS=2), gatecall (FPREP_NVJPEG_GATE=call), helpers8
	#    and helpers12 (8 and 12 CPU helpers), b8s16 (batches of 8, 16
	#    JPEG slots: near the previous lane), cpu (FPREP_NVJPEG=off: the
	#    lane's CPU decoders), cudaout (the tensor into the bench's CUDA
	#    memory, as the peers' lands: BENCH=--cuda-out), shmcuda (the
	#    JPEG from shared memory too)),
	#    frameprep-bench at c=FPREP_JPEG_C (1,16,32,64,128), then INFO's
	#    jpeg lines (jpeg_timing_lone: what a frame alone spent where);
	#  - the CPU backend (--device cpu --workers FPREP_JPEG_WORKERS, 16)
	#    against OpenCV on as many CPU threads, its tensor in host memory
	#    (peer opencv_cpu: the fair peer for a CPU backend);
	# and ends with a table and the bars: saturated >= 1.0x the best GPU
	# peer, c=1 p50 <= 1.15x the best GPU peer's one image (the engine's
	# time plus ~0.2 ms), the tail at each concurrency (p99 <= 3x p50, max
	# <= 10x p50), CPU >= 0.9x OpenCV.
	jpeg_run() {
		local v name spec ju jp rc=0 imgs=$here/jpeg pd=$logs/peer_jpeg
		local cs=${FPREP_JPEG_C:-1,16,32,64,128} shm=${FPREP_JPEG_SHM:-out}
		local workers=${FPREP_JPEG_WORKERS:-16}
		local peers=${FPREP_JPEG_PEERS-nvimgcodec,torchvision,opencv}
		local variants=${FPREP_JPEG_VARIANTS:-default calls2:FPREP_NVJPEG_CALLS=2 gatecall:FPREP_NVJPEG_GATE=call helpers8:FPREP_JPEG_CPU_HELPERS=8 helpers12:FPREP_JPEG_CPU_HELPERS=12 b8s16:FPREP_NVJPEG_BATCH=8:FPREP_JPEG_SLOTS=16 cpu:FPREP_NVJPEG=off cudaout:BENCH=--cuda-out shmcuda:BENCH=--shm,in,--cuda-out}
		local fsite=""
		rm -f "$logs/peer_jpeg.json" "$logs/peer_jpeg_cpu.json"
		# The frameprep package (the bundle's wheel), for its peer line.
		if ls "$here"/whl/*.whl >/dev/null 2>&1; then
			fsite=$(mktemp -d)
			python3 -m pip install -q --no-index --no-deps --target "$fsite" "$here"/whl/*.whl ||
				fsite=""
		fi
		if [ -n "$peers" ]; then
			echo "--- peers: $peers"
			python3 "$here/peers/peer_jpeg.py" --image-dir "$here/images" --peers "$peers" \
				--batches 1,8,32,64 --out-dir "$pd" --json "$logs/peer_jpeg.json"
			ls "$pd"/jpeg/*.jpg >/dev/null 2>&1 && imgs=$pd/jpeg
		fi
		echo "--- JPEG files: $imgs"
		for v in $variants; do
			name=${v%%:*}
			spec=${v#"$name"}
			local -a envs=() given=() bargs=(--shm "$shm")
			IFS=: read -r -a given <<<"${spec#:}"
			# BENCH=A,B,...: the bench's tensor placement instead of
			# --shm $shm (e.g. BENCH=--cuda-out or
			# BENCH=--shm,in,--cuda-out); the rest is the daemon's
			# environment.
			for e in "${given[@]}"; do
				case $e in
				BENCH=*) IFS=, read -r -a bargs <<<"${e#BENCH=}" ;;
				*) envs+=("$e") ;;
				esac
			done
			ju=ipc://$tmp/jpeg-$name.sock
			env "${envs[@]}" "$here/bin/frameprepd" --device 0 --listen "$ju" --slots 4 \
				--jpeg-engine=true \
				--max-inflight 256 2>"$logs/frameprepd_jpeg_$name.log" &
			jp=$!
			for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$ju" >/dev/null 2>&1 && break; sleep 0.1; done
			echo "--- $name: ${envs[*]:-(defaults)}"
			"$here/bin/frameprep" info --socket "$ju" | grep -E '^jpeg_decoder:'
			"$here/bin/frameprep-bench" --socket "$ju" --quiet --format jpeg \
				--image-dir "$imgs" --size 640x640 --verify sample "${bargs[@]}" \
				--duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling \
				-c "$cs" --json "$logs/b1080_jpeg_$name.json" >"$logs/b1080_jpeg_$name.txt" 2>&1 || rc=1
			sed -n '/^load  *frames/,/^$/p' "$logs/b1080_jpeg_$name.txt"
			# Who decoded, and where the frames' time went (over the sweep;
			# _lone: the frames decoded with nothing else in the lane).
			"$here/bin/frameprep" info --socket "$ju" | grep -E '^jpeg_(frames|timing|timing_lone|timing_max):' |
				tee "$logs/jpeg_info_$name.txt"
			# The defaults again through the Python package, the tensor
			# into the caller's CUDA memory (as the peers' lands).
			if [ "$name" = default ] && [ -n "$fsite" ]; then
				PYTHONPATH=$fsite${PYTHONPATH:+:$PYTHONPATH} python3 "$here/peers/peer_jpeg.py" \
					--image-dir "$here/images" --peers frameprep --frameprep "$ju" \
					--out-dir "$logs/peer_jpeg_fp" --json "$logs/peer_jpeg.json" ||
					echo "peer_jpeg.py frameprep: exit $?"
			fi
			kill -TERM $jp; wait $jp || rc=1
		done
		# The CPU backend against OpenCV on as many CPU threads.
		echo "--- CPU backend, $workers workers, against OpenCV on $workers CPU threads (tensor in host memory)"
		python3 "$here/peers/peer_jpeg.py" --image-dir "$here/images" --peers opencv_cpu \
			--threads "$workers" --iters 1024 --out-dir "$logs/peer_jpeg_cpu" \
			--json "$logs/peer_jpeg_cpu.json" || echo "peer_jpeg.py opencv_cpu: exit $?"
		ju=ipc://$tmp/jpeg-cpu-backend.sock
		"$here/bin/frameprepd" --device cpu --workers "$workers" --listen "$ju" \
			--max-inflight 256 2>"$logs/frameprepd_jpeg_cpubackend.log" &
		jp=$!
		for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$ju" >/dev/null 2>&1 && break; sleep 0.1; done
		"$here/bin/frameprep-bench" --socket "$ju" --quiet --format jpeg \
			--image-dir "$imgs" --size 640x640 --verify sample --shm "$shm" \
			--duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling \
			-c "1,$workers,$((workers * 2))" --json "$logs/b1080_jpeg_cpubackend.json" \
			>"$logs/b1080_jpeg_cpubackend.txt" 2>&1 || rc=1
		sed -n '/^load  *frames/,/^$/p' "$logs/b1080_jpeg_cpubackend.txt"
		kill -TERM $jp; wait $jp || rc=1
		[ -z "$fsite" ] || rm -rf "$fsite"
		python3 - "$logs" "$cs" $variants <<'PY' || rc=1
import json, os, re, sys
logs, cs, variants = sys.argv[1], [int(c) for c in sys.argv[2].split(",")], sys.argv[3:]
def runs(name):
    try:
        return {r["concurrency"]: r for r in
                json.load(open(os.path.join(logs, f"b1080_jpeg_{name}.json")))["runs"]}
    except (OSError, ValueError, KeyError):
        return {}
def peer_lines(f):
    try:
        return [json.loads(l) for l in open(os.path.join(logs, f)) if l.strip()]
    except OSError:
        return []
print("\n| variant | c=1 p50 ms | c=1 p99 ms | " + " | ".join(f"c={c} frames/s" for c in cs) +
      " | mean batch | c=1 alone: queue / parse / call / sync / back / lane us |")
print("|" + " --- |" * (len(cs) + 5))
best = {}
for v in variants:
    name = v.split(":")[0]
    r = runs(name)
    if not r:
        print(f"| {name} | (no run) |")
        continue
    info = open(os.path.join(logs, f"jpeg_info_{name}.txt")).read() \
        if os.path.exists(os.path.join(logs, f"jpeg_info_{name}.txt")) else ""
    def field(line, key):
        m = re.search(rf"^{line}: .*\b{key}=([0-9.]+)", info, re.M)
        return float(m.group(1)) if m else float("nan")
    c1 = r.get(1, {}).get("latency_us", {})
    fps = [r[c]["frames_per_s"] if c in r else float("nan") for c in cs]
    best[name] = (max(f for f in fps if f == f), c1.get("p50", float("nan")) / 1e3)
    lone = " / ".join("%.0f" % field("jpeg_timing_lone", k) for k in
                      ("queue_us", "parse_us", "call_us", "sync_us", "back_us", "lane_us"))
    print(f"| {name} | {c1.get('p50', float('nan')) / 1e3:.2f} | {c1.get('p99', float('nan')) / 1e3:.2f} | " +
          " | ".join(f"{f:.0f}" for f in fps) +
          f" | {field('jpeg_timing', 'mean_batch'):.2f} | {lone} |")
# The tail, per variant and concurrency: p99 <= 3x p50 and max <= 10x p50.
for v in variants:
    name = v.split(":")[0]
    r = runs(name)
    if not r:
        continue
    cells, ok = [], True
    for c in cs:
        lat = r.get(c, {}).get("latency_us", {})
        if not lat.get("p50"):
            continue
        q99, qmax = lat["p99"] / lat["p50"], lat["max"] / lat["p50"]
        ok = ok and q99 <= 3 and qmax <= 10
        cells.append(f"c={c} p99 {q99:.1f}x max {qmax:.1f}x")
    print(f"tail {name}: " + ", ".join(cells) +
          f" (bars p99 <= 3x, max <= 10x p50: {'met' if ok else 'NOT met'})")
lines = peer_lines("peer_jpeg.json")
gpu = [p for p in lines if p["peer"] in ("nvimgcodec", "torchvision", "opencv")]
fp = [p for p in lines if p["peer"] == "frameprep"]
rates = [(p["frames_per_s"], f'{p["peer"]} {p["what"]}') for p in gpu if p["frames_per_s"]]
p50s = [(p["p50_ms"], p["peer"]) for p in gpu if p["p50_ms"]]
if rates and p50s and "default" in best:
    (pf, pw), (pl, pn) = max(rates), min(p50s)
    f, l = best["default"]
    print(f"\nbest GPU peer: {pw} {pf:.0f} frames/s; best one-image p50: {pn} {pl:.2f} ms")
    print(f"default: saturated {f:.0f} frames/s = {f / pf:.2f}x the best peer (bar >= 1.0x: "
          f"{'met' if f >= pf else 'NOT met'}); c=1 p50 {l:.2f} ms = {l / pl:.2f}x "
          f"(bar <= 1.15x: {'met' if l <= 1.15 * pl else 'NOT met'})")
    for name, (f, l) in best.items():
        if name != "default":
            print(f"  {name}: {f / pf:.2f}x, c=1 {l / pl:.2f}x")
    for p in fp:
        if p["frames_per_s"]:
            print(f"  frameprep package, tensor into CUDA memory, {p['what']}: "
                  f"{p['frames_per_s']:.0f} frames/s = {p['frames_per_s'] / pf:.2f}x")
        elif p["p50_ms"]:
            print(f"  frameprep package, tensor into CUDA memory, one image: "
                  f"p50 {p['p50_ms']:.2f} ms = {p['p50_ms'] / pl:.2f}x")
else:
    print("\nno GPU peer figures (peer_jpeg.py: torch, torchvision, nvImageCodec there?)")
cpu = [p for p in peer_lines("peer_jpeg_cpu.json") if p["peer"] == "opencv_cpu" and p["frames_per_s"]]
r = runs("cpubackend")
if cpu and r:
    of = cpu[0]["frames_per_s"]
    c, f = max(((c, x["frames_per_s"]) for c, x in r.items()), key=lambda t: t[1])
    print(f"CPU backend: {f:.0f} frames/s (c={c}) against OpenCV {cpu[0]['what']}, tensor in "
          f"host memory, {of:.0f}: {f / of:.2f}x (bar 0.9x: {'met' if f >= 0.9 * of else 'NOT met'})")
else:
    print("no CPU backend comparison (peer_jpeg.py opencv_cpu or the CPU daemon's run missing)")
PY
		return $rc
	}
	if ls "$here"/jpeg/*.jpg >/dev/null 2>&1; then
		TAILN=${FPREP_JPEG_TAIL:-120} run b1080_jpeg jpeg_run
		tests+=(b1080_jpeg)
	fi
	# nvjpeg_backends: one 1080p q90 photo at a time through each nvJPEG
	# backend (the engine batched as the lane, GPU_HYBRID, HYBRID,
	# nvjpegDecode) and libjpeg-turbo: lone p50/p90 (host part, total),
	# frames/s from 1 and 4 threads, |difference| from libjpeg-turbo. The
	# peers' files when b1080_jpeg ran, else the same photos of jpeg/.
	nvjpeg_backends_run() {
		local d=$logs/peer_jpeg/jpeg f
		if ! ls "$d"/*.jpg >/dev/null 2>&1; then
			d=$logs/nvjpeg_files
			mkdir -p "$d"
			for f in $(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import peer_jpeg; print(peer_jpeg.DEFAULT_PHOTOS.replace(",", " "))' "$here/peers"); do
				[ -f "$here/jpeg/${f%.*}.jpg" ] && ln -sf "$here/jpeg/${f%.*}.jpg" "$d/"
			done
			ls "$d"/*.jpg >/dev/null 2>&1 || d=$here/jpeg
		fi
		echo "JPEG files: $d"
		"$here/bin/bench_nvjpeg_backends" "$d" 4 2
	}
	if [ -x "$here/bin/bench_nvjpeg_backends" ]; then
		TAILN=40 run nvjpeg_backends nvjpeg_backends_run
		tests+=(nvjpeg_backends)
	fi
	TAILN=40 run b1080_modes modes_run
	tests+=(b1080_modes)
	TAILN=40 run latency latency_run
	tests+=(latency)
	tests+=(b1080_inline b1080_shm b1080_nv12_shm b4k_inline b4k_shm b1080_f16 b1080_nv12_f16 b1080_open)
	# NV12 against BGR8 in the same run: the best frames/s of each sweep.
	best_fps() { grep -o '"frames_per_s": [0-9.]*' "$1" 2>/dev/null | awk '$2 > m { m = $2 } END { printf "%.1f", m }'; }
	for d in f32:b1080_shm:b1080_nv12_shm f16:b1080_f16:b1080_nv12_f16; do
		IFS=: read -r dt bgr_run nv12_run <<<"$d"
		[ -s "$logs/$bgr_run.json" ] && [ -s "$logs/$nv12_run.json" ] || continue
		bgr=$(best_fps "$logs/$bgr_run.json") nv12=$(best_fps "$logs/$nv12_run.json")
		echo "1080p -> 640x640 $dt over shm, best frames/s: BGR8 $bgr, NV12 $nv12, NV12/BGR8 $(awk -v a="$nv12" -v b="$bgr" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')"
	done | tee "$logs/nv12_ratio.txt"
	# What users do instead, on the same photo and sizes.
	if command -v python3 >/dev/null; then
		pd=$logs/peers; mkdir -p "$pd"
		for p in opencv_cpu torch_naive torch_tuned; do
			TAILN=8 run peer_$p python3 "$here/peers/peer_$p.py" --image "$here/images/astronaut.png" \
				--iters "${FPREP_PEER_ITERS:-200}" --out-dir "$pd" --json "$logs/peers.json"
			tests+=(peer_$p)
		done
		TAILN=12 run check_peers python3 "$here/peers/check_peers.py" --dir "$pd" \
			--frameprep "$here/bin/frameprep" --socket "$url"
		tests+=(check_peers)
	fi
	# CUDA regions: the C test runs its own daemons; the Python runs use
	# this one (GPU) and a CPU one as the reference.
	TAILN=30 run cuda_regions "$here/bin/test_cuda_regions" "$here/bin/frameprepd" "$here/images"
	tests+=(cuda_regions)
	site=$(mktemp -d)
	if ls "$here"/whl/*.whl >/dev/null 2>&1; then
		python3 -m pip install -q --no-index --no-deps --target "$site" "$here"/whl/*.whl
	fi
	if command -v python3 >/dev/null &&
	   PYTHONPATH=$site python3 -c 'import frameprep._native, frameprep.cuda' 2>/dev/null; then
		cpu_url=ipc://$tmp/cpu.sock
		"$here/bin/frameprepd" --device cpu --listen "$cpu_url" 2>"$logs/frameprepd_ref.log" &
		rpid=$!
		for _ in $(seq 100); do "$here/bin/frameprep" info --socket "$cpu_url" >/dev/null 2>&1 && break; sleep 0.1; done
		export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
		TAILN=20 run cuda_py env FPREP_DAEMON="$here/bin/frameprepd" FPREP_IMAGES="$here/images" \
			FPREP_VIDEO="$here/video" python3 -m pytest -v -p no:cacheprovider -rs "$here/python/tests/test_cuda.py"
		TAILN=12 run cuda_example python3 "$here/python/examples/cuda_batch.py" --socket "$url" \
			--images "$here/images" --batch 8 --rounds 3
		# The Python client against frameprep-bench on the same daemon:
		# the simple call (inline), ring.preprocess of the same array
		# (copy), the ring's requests over the socket (shm) and through
		# doorbells (door), and the floor under any binding: a Python loop
		# around door's bare C request (bare); FAIL when a bar printed at
		# the end fails. FPREP_PY_PATHS picks paths, FPREP_PY_REPEAT runs.
		TAILN=24 run py_bench env PATH="$here/bin:$PATH" python3 -m frameprep.bench -u "$url" \
			-c 1,16 --paths "${FPREP_PY_PATHS:-inline,copy,shm,door}" -d 2 -w 0.5 -r "${FPREP_PY_REPEAT:-5}" --check
		tests+=(py_bench)
		# The PyTorch consumer's call (issue 38's bars): a numpy frame
		# with the tensor into a torch CUDA tensor (out=) against the
		# host call and the host call plus .cuda(), c=1 and 4 threads.
		TAILN=12 run cuda_out python3 "$here/peers/bench_cuda_out.py" --socket "$url" \
			--image "$here/images/astronaut.png" --duration "${FPREP_BENCH_S:-4}"
		tests+=(cuda_out)
		# The DataLoader recipe with torch (forked workers, pinned
		# batches, moved to the GPU): its test against the package's
		# own results, then the example on the JPEG frames.
		dataloader_run() {
			FPREP_DAEMON="$here/bin/frameprepd" FPREP_IMAGES="$here/images" \
				FPREP_EXAMPLES="$here/python/examples" \
				python3 -m pytest -v -p no:cacheprovider -rs "$here/python/tests/test_dataloader.py" &&
				python3 "$here/python/examples/dataloader.py" --socket "$url" --images "$here/jpeg" --epochs 6
		}
		TAILN=14 run dataloader dataloader_run
		tests+=(dataloader)
		TAILN=36 run cuda_bench python3 "$here/peers/bench_cuda.py" --socket "$url" \
			--cpu-socket "$cpu_url" --image "$here/images/astronaut.png" --duration "${FPREP_BENCH_S:-5}" --nv12
		tests+=(cuda_py cuda_example cuda_bench)
		# roi_peers (issue 27's ROI bar): 64 boxes of a 1080p photo into a
		# (64, 3, 224, 224) f32 CUDA tensor: frameprep (a daemon of its
		# own; frame in a ring slot, tensor into the caller's CUDA memory,
		# c=1 and 4) against torchvision roi_align and a CV-CUDA loop
		# (each also from 1 and 4 threads, a stream each)
		# (importable from FPREP_CVCUDA_SITE, default /tmp/site), each
		# checked against OpenCV; a table and the bars' PASS or FAIL.
		roi_peers_run() {
			local ru=ipc://$tmp/roi.sock rp rc
			"$here/bin/frameprepd" --device 0 --listen "$ru" --slots 4 \
				--max-inflight 256 2>"$logs/frameprepd_roi.log" &
			rp=$!
			for _ in $(seq 200); do "$here/bin/frameprep" info --socket "$ru" >/dev/null 2>&1 && break; sleep 0.1; done
			PYTHONPATH=$PYTHONPATH:${FPREP_CVCUDA_SITE:-/tmp/site} python3 "$here/peers/bench_roi.py" \
				--socket "$ru" --image "$here/images/astronaut.png" -c 1,4 \
				-d "${FPREP_BENCH_S:-4}" -w 1
			rc=$?
			kill -TERM $rp; wait $rp || rc=1
			return $rc
		}
		TAILN=44 run roi_peers roi_peers_run
		tests+=(roi_peers)
		kill -TERM $rpid; wait $rpid
	else
		echo "cuda_py, cuda_example, cuda_bench: skipped (the frameprep wheel in whl/ did not import)"
	fi
	kill -TERM $dpid; wait $dpid; echo "frameprepd exit status $?" | tee -a "$logs/frameprepd.log"
	grep -v '^<[67]>' "$logs/frameprepd.log" | tail -n 5
	# What the metrics endpoint costs at saturation: two GPU daemons, one with
	# --metrics-listen, the same shared-memory load on each in turn; also
	# the histograms' stage means beside the bench's.
	if command -v python3 >/dev/null; then
		TAILN=24 run metrics_cost python3 "$here/peers/metrics_cost.py" \
			--daemon "$here/bin/frameprepd" --bench "$here/bin/frameprep-bench" \
			--rounds "${FPREP_COST_ROUNDS:-3}" --out "$logs/metrics_cost" \
			--daemon-arg=--device --daemon-arg=0 --daemon-arg=--slots --daemon-arg=4 \
			--daemon-arg=--max-inflight --daemon-arg=256 \
			-- --image "$here/images/astronaut.png" --frame-size 1920x1080 --size 640x640 \
			--shm both -c 8,32 --duration "${FPREP_BENCH_S:-3}" --warmup 1 --no-ceiling \
			--verify sample
		tests+=(metrics_cost)
	fi
	# The CPU backend on this machine's cores, for comparison.
	"$here/bin/frameprepd" --device cpu --listen "$url" 2>"$logs/frameprepd_cpu.log" &
	dpid=$!
	for _ in $(seq 100); do "$here/bin/frameprep" info --socket "$url" >/dev/null 2>&1 && break; sleep 0.1; done
	TAILN=20 run b1080_cpu "${B[@]}" --frame-size 1920x1080 --size 640x640 -c 1,16 --no-ceiling --json "$logs/b1080_cpu.json"
	tests+=(b1080_cpu)
	kill -TERM $dpid; wait $dpid
	rm -rf "$tmp"
fi

if [ -n "${OUT:-}" ]; then
	tar czf "$OUT/gpu-logs.tgz" --exclude='*.npy' --exclude='*.png' -C "$logs" . &&
		echo "logs: gpu-logs.tgz"
fi
echo
echo "summary"
fails=0
for t in "${tests[@]}"; do
	[ -n "${result[$t]:-}" ] || continue
	printf '  %-14s %s\n' "$t" "${result[$t]}"
	case ${result[$t]} in FAIL*) fails=1 ;; esac
done
exit $fails
