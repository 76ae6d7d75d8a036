#!/usr/bin/env bash
# run-on-gpu.sh: runs frameprep's GPU tests and the lane benchmark on a
# machine that has a GPU and the CUDA toolkit but not the build's other
# libraries (see GPU-MACHINE.md), from a bundle made on the build machine.
#
#   here:  tests/gpu/run-on-gpu.sh --stage BUILD_DIR IMAGE_DIR BUNDLE_DIR
#          copies the test binaries, the shared libraries they need that the
#          GPU machine lacks (collect-libs.sh, path in $FPREP_COLLECT_LIBS),
#          the photographs and this script into BUNDLE_DIR.
#   there: bash BUNDLE_DIR/run-on-gpu.sh
#          runs test_kernel_cache, test_gpu_backend (plain and under
#          compute-sanitizer memcheck when present) and bench_lane, and ends
#          with a short table. Exit status: 0 when every test passed.
set -uo pipefail

if [ "${1:-}" = "--stage" ]; then
	[ $# -eq 4 ] || { echo "usage: $0 --stage BUILD_DIR IMAGE_DIR BUNDLE_DIR" >&2; exit 2; }
	build=$2 images=$3 out=$4
	collect=${FPREP_COLLECT_LIBS:-/work/shared/device/collect-libs.sh}
	set -e
	mkdir -p "$out/bin" "$out/images"
	bins=()
	for b in test_kernel_cache test_gpu_backend bench_lane; do
		cp "$build/tests/gpu/$b" "$out/bin/"
		bins+=("$out/bin/$b")
	done
	bash "$collect" "$out/libs" "${bins[@]}" >/dev/null
	cp "$images"/*.png "$images"/*.jpg "$out/images/" 2>/dev/null || true
	cp "$0" "$out/run-on-gpu.sh"
	du -sh "$out"
	exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_CACHE_HOME=$(mktemp -d)
logs=${OUT:-$(mktemp -d)}
declare -A result

run() { # run NAME COMMAND...: runs, keeps the log, records the verdict
	local name=$1; shift
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

nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null
TAILN=12 run kernel_cache "$here/bin/test_kernel_cache"
TAILN=30 run gpu_backend "$here/bin/test_gpu_backend" "$here/images"
if command -v compute-sanitizer >/dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
	cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	TAILN=4 run memcheck timeout 150 "$cs" --tool memcheck --leak-check full \
		--error-exitcode 9 "$here/bin/test_gpu_backend" "$here/images" 2
fi
TAILN=40 run bench "$here/bin/bench_lane" "$here/images"

echo
echo "summary"
fails=0
for t in kernel_cache gpu_backend memcheck bench; do
	[ -n "${result[$t]:-}" ] || continue
	printf '  %-14s %s\n' "$t" "${result[$t]}"
	case ${result[$t]} in FAIL*) fails=1 ;; esac
done
exit $fails
