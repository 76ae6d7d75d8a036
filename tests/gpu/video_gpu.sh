#!/usr/bin/env bash
# video_gpu.sh TEST_VIDEO_GPU FRAMEPREPD IMAGE_DIR DEVICE: test_video_gpu's
# whole run on one machine: the streams (video_streams.sh), their
# reference tensors from the CPU backend (record cpu), then the check on a
# daemon of --device DEVICE (0: the GPU's NVDEC; cpu: the CPU backend
# against itself, which checks the test's own steps where no GPU is), and
# on a GPU a daemon with NVDEC off (test_video_gpu off).
# Exits 77 when DEVICE is a GPU and there is none.
set -uo pipefail
bin=$1 daemon=$2 images=$3 device=$4
"$bin" probe "$device" || exit $?
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bash "$(dirname "$0")/video_streams.sh" "$images" "$dir" || exit 1
"$bin" record cpu "$daemon" "$dir" || exit 1
rc=0
"$bin" check "$device" "$daemon" "$dir" || rc=1
if [ "$device" != cpu ]; then
	"$bin" off "$device" "$daemon" || rc=1
fi
exit $rc
