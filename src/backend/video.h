/*
 * video.h: video stream decoders, behind one small interface, for the
 * STREAM_* requests (protocol.h, "Video streams").
 *
 * The design is simple: a backend that can decode streams gives a
 * video_open op (backend.h), which makes a session (fprep__video) for one
 * stream: it only allocates and copies the stream's spec, and is cheap
 * enough for the loop thread. Everything else is a job, submitted like a
 * frame's, with job->video set: the backend's thread that takes it calls
 * fprep__video_run, which runs the session's op: opening the decoder (the
 * STREAM_OPEN job), decoding one packet or flushing, and preprocessing the
 * frames that come out into the reply, whose room it asks of the daemon
 * through job->reserve once it knows how many frames it has. The loop
 * hands a stream at most one job at a time, in the order its requests
 * came, so a session needs no lock and may run on any of the backend's
 * threads; different streams run at once.
 *
 * The CPU backend's session is libavcodec's software decoder followed by
 * the CPU ops (video_avcodec.c). A GPU decoder (NVDEC) plugs in the same
 * way: the CUDA backend's video_open makes a session whose run, on its
 * lane, parses with the same checks, decodes into device surfaces from a
 * grow-only pool, and runs the NV12 letterbox kernel on the surfaces in
 * place, writing the tensors into the room job->reserve gives (or a CUDA
 * region). A backend without one leaves video_open NULL and the daemon
 * refuses streams with FPREP_EUNSUPPORTED.
 */
#ifndef FPREP_VIDEO_H
#define FPREP_VIDEO_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/protocol.h"

typedef struct fprep__video fprep__video;
typedef struct fprep__job fprep__job;

/* FPREP__VIDEO_BROKEN starts the message of every refusal of a broken bitstream
 * (FPREP_EBITSTREAM; protocol.h, "Broken bitstreams"). */
#define FPREP__VIDEO_BROKEN "broken bitstream"

/* fprep__video_ops: what a session does. */
typedef struct fprep__video_ops {
	/* run does job (job->stream.kind: STREAM_OPEN, _PACKET or _FLUSH)
	 * on the calling backend thread: sets job->status (and
	 * job->message when it is not FPREP_OK), job->frames and
	 * job->reply_flags, and for PACKET and FLUSH writes the reply's
	 * payload (tensors, then frame records: protocol.h) into the room
	 * job->reserve gives. Never called for two jobs at once. */
	void (*run)(fprep__video *v, fprep__job *job);
	/* close frees the session; no job runs or will run on it. Any
	 * thread. */
	void (*close)(fprep__video *v);
} fprep__video_ops;

/* fprep__video: a session; each kind embeds it first. */
struct fprep__video {
	const fprep__video_ops *ops;
};

/* fprep__video_run runs job on its session (job->video). */
void fprep__video_run(fprep__job *job);

/* fprep__video_avcodec_open makes a libavcodec session for the stream
 * that STREAM_OPEN request spec (validated) opens, with params_len bytes
 * of parameter sets at params (copied; may be 0). The decoder itself is
 * opened by the session's first job. Returns 0, or FPREP_ENOMEM. Any
 * thread. */
int fprep__video_avcodec_open(const fprep_request *spec, const uint8_t *params,
                              size_t params_len, fprep__video **vp);

/* fprep__video_avcodec_load loads libavutil and libavcodec (dlopen) if
 * no call did yet, and writes what was loaded ("libavcodec 59.37.100") or
 * why nothing was (naming the library) into buf (size bytes, terminated).
 * Returns FPREP_OK, or FPREP_EUNSUPPORTED when streams cannot be decoded.
 * Any thread; the first call may take milliseconds. */
int fprep__video_avcodec_load(char *buf, size_t size);

#endif /* FPREP_VIDEO_H */
