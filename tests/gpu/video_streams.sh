#!/usr/bin/env bash
# video_streams.sh IMAGE_DIR OUT_DIR [rate]: the streams of test_video_gpu, made by
# Debian's ffmpeg from the photographs (as tests/integration/video_test.py
# makes the CPU tests'): raw Annex-B with access unit delimiters (split on
# them there), a pan and zoom at 25 fps, 2 B-frames, an IDR/IRAP picture
# every 8 frames:
#   h264  astronaut 320x240, 24 frames (libx264)
#   hevc  coffee 352x240, 24 frames (libx265)
#   odd   chelsea 330x186, 24 frames (libx264: not whole macroblocks,
#         cropped)
#   rate  with "rate" only (the GPU bundle's): astronaut 1920x1080, 120
#         frames, 6 Mb/s, H.264 (rate.h264) and HEVC (rate.hevc): the
#         rate runs' and the peer's (peer_video.py); about 2 minutes of
#         encoding on 2 cores
# and OUT_DIR/streams.txt listing the first three ("NAME CODEC").
# About 0.2 MB without the rate files, 6 MB with them.
set -euo pipefail
images=$1 out=$2 rate=${3:-}
mkdir -p "$out"
make() { # make NAME PHOTO WxH CODEC FRAMES [EXTRA...]
	local name=$1 photo=$2 size=$3 codec=$4 frames=$5
	shift 5
	local enc ext bsf
	if [ "$codec" = h264 ]; then
		enc=(-c:v libx264 -bf 2 -g 8 -x264-params scenecut=0:open-gop=0)
		bsf=h264_metadata=aud=insert ext=h264
	else
		enc=(-c:v libx265 -x265-params
		     bframes=2:keyint=8:min-keyint=8:scenecut=0:open-gop=0:log-level=error)
		bsf=hevc_metadata=aud=insert ext=hevc
	fi
	ffmpeg -v error -y -loop 1 -i "$images/$photo" \
		-vf "zoompan=z='1+0.01*on':x='on*3':y='on*2':d=1:s=$size:fps=25,format=yuv420p" \
		-frames:v "$frames" "${enc[@]}" "$@" -bsf:v "$bsf" -f "$ext" \
		"$out/$name.$ext"
}
make h264 astronaut.png 320x240 h264 24
make hevc coffee.png 352x240 hevc 24
make odd chelsea.png 330x186 h264 24
if [ "$rate" = rate ]; then
	make rate astronaut.png 1920x1080 h264 120 -b:v 6M
	make rate astronaut.png 1920x1080 hevc 120 -b:v 6M
fi
printf 'h264 h264\nhevc hevc\nodd h264\n' >"$out/streams.txt"
