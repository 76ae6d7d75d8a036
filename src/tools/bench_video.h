/*
 * bench_video.h: frameprep-bench's video mode (bench_video.c): --video
 * FILE --streams N [--realtime] [--window N].
 */
#ifndef FRAMEPREP_BENCH_VIDEO_H
#define FRAMEPREP_BENCH_VIDEO_H

#include "bench_options.h"

/* bench_video_main replays o->video on o->video_streams streams (each a
 * thread with its own connection), at the file's frame rate with
 * o->video_realtime, else flat out, each with o->video_window packets in
 * flight; prints frames/s, the per-frame latency
 * (p50, p99: a packet's send to its frame's tensor) and the verification
 * of every stream (its frame count and pts against the file's). Returns
 * the exit status: 0 verified, 1 a stream failed or was refused, 2 usage
 * (--realtime on a file without a frame rate), 3 the file cannot be read,
 * 4 FFmpeg's libraries missing. */
int bench_video_main(const bench_opts *o);

#endif /* FRAMEPREP_BENCH_VIDEO_H */
