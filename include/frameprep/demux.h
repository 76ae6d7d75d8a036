/*
 * frameprep/demux.h: reading the H.264 or HEVC video of a file (.mp4,
 * .mkv, raw .h264/.hevc) as the Annex-B access units a stream takes
 * (fprep_stream_send), with FFmpeg's libavformat.
 *
 * libframeprep does not link FFmpeg: the first fprep_demux_open loads
 * libavutil.so.57, libavcodec.so.59 and libavformat.so.59 (Debian 12's
 * libavutil57, libavcodec59, libavformat59), else the unversioned names,
 * with dlopen, and refuses other major versions; without them it fails
 * with FPREP_EUNSUPPORTED naming the library.
 */
#ifndef FRAMEPREP_DEMUX_H
#define FRAMEPREP_DEMUX_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fprep_demux: an open file's video stream. */
typedef struct fprep_demux fprep_demux;

/* fprep_demux_info: what the container says of the video stream. */
typedef struct fprep_demux_info {
	uint16_t codec;  /* FPREP_PIX_H264 or FPREP_PIX_HEVC */
	uint32_t width;  /* the picture's display width, pixels */
	uint32_t height; /* the picture's display height, pixels */
	int64_t frames;  /* the container's frame count; 0: not told (raw) */
	int32_t fps_num; /* frame rate fps_num / fps_den frames per second; */
	int32_t fps_den; /* 0 / 1 when unknown */
	int32_t time_base_num; /* the unit of the packets' pts: */
	int32_t time_base_den; /* time_base_num / time_base_den seconds */
} fprep_demux_info;

/* fprep_demux_open opens the file at path and its best H.264 or HEVC
 * video stream; *dp receives the demuxer (on success only) and *info (if
 * not NULL) what the container says of the stream. Packets are turned
 * into Annex-B access units by libavcodec's h264_mp4toannexb /
 * hevc_mp4toannexb filters (parameter sets in band before each IDR
 * picture; raw Annex-B passes as it is).
 *
 * Returns 0; FPREP_EUNSUPPORTED (libavformat, libavcodec or libavutil
 * missing or of another major version); FPREP_EIO (the file cannot be
 * opened or read); FPREP_EINVAL (no H.264 or HEVC video stream);
 * FPREP_ENOMEM. The reason, naming the file or the library, is in
 * fprep_demux_last_error(NULL). Any thread. */
FPREP_EXTERN int fprep_demux_open(const char *path, fprep_demux **dp,
                                  fprep_demux_info *info);

/* fprep_demux_read reads the next access unit: *data (size bytes, owned
 * by d and valid until the next read or the close) and *pts (the
 * container's, in time_base units, else the packet's index in decode
 * order). Returns 0 with a packet, 1 at the end of the file (or where it
 * cannot be read further), or FPREP_EIO when the Annex-B filter refuses a
 * packet, the reason in fprep_demux_last_error(d). One thread at a
 * time per demuxer. */
FPREP_EXTERN int fprep_demux_read(fprep_demux *d, const uint8_t **data,
                                  size_t *size, int64_t *pts);

/* fprep_demux_last_error returns the sentence of d's last failure, or
 * with d NULL of the calling thread's last failed fprep_demux_open ("" if
 * none). Valid until the next call on d (on the thread). */
FPREP_EXTERN const char *fprep_demux_last_error(const fprep_demux *d);

/* fprep_demux_close closes the file and frees d (NULL: nothing). */
FPREP_EXTERN void fprep_demux_close(fprep_demux *d);

#ifdef __cplusplus
}
#endif

#endif /* FRAMEPREP_DEMUX_H */
