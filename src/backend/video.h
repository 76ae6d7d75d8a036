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
 * hands a stream at most one job at a time (or its session's window, for a
 * session that runs its jobs in order on one thread of its own), in the
 * order its requests came, so a session needs no lock and may run on any
 * of the backend's threads; different streams run at once.
 *
 * The CPU backend's session is libavcodec's software decoder followed by
 * the CPU ops (video_avcodec.c). The CUDA backend's (gpu/cuda_video.c)
 * plugs in the same way: its video_open makes a session whose run, on a
 * thread of its own on its GPU (fprep__video.uuid), parses with the same
 * checks, decodes on NVDEC into the decoder's surfaces (sized once per
 * sequence) and runs the NV12 letterbox kernel on them in place, writing the
 * tensors into the room job->reserve gives, or straight into the
 * client's region (a CUDA region: no copy at all). What both do alike (the
 * refusals' words, the reply's room and frame records, the run by kind)
 * is video_common.c's. A backend without a decoder leaves video_open NULL
 * and the daemon refuses streams with FPREP_EUNSUPPORTED.
 */
#ifndef FPREP_VIDEO_H
#define FPREP_VIDEO_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"

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

/* fprep__video: a session; each kind embeds it first. on_device: its
 * jobs must run on a backend lane of the GPU whose cudaDeviceProp.uuid is
 * uuid (a decoder's surfaces live in that device's context); 0: any. Set
 * by the session's open, read by the backend that routes jobs
 * (backend_multi.c). */
struct fprep__video {
	const fprep__video_ops *ops;
	int on_device;
	uint8_t uuid[FPREP_CUDA_UUID_SIZE];
	/* window: the stream's jobs the daemon may hand the backend at once,
	 * in the order of their requests; 0 or 1: one at a time. Above 1
	 * only for a session that runs its jobs in the order they were
	 * submitted, one at a time (on its own thread: gpu/cuda_video.c),
	 * and may start on the next while it ends the one before. Set by
	 * the backend's video_open. */
	unsigned window;
};

/* fprep__video_run runs job on its session (job->video). */
void fprep__video_run(fprep__job *job);

/* What every session does alike (video_common.c). Any thread. */

/* fprep__video_codec_name: "H.264" or "HEVC", the stream's codec (spec:
 * its STREAM_OPEN request); fprep__video_key_name: the picture a stream
 * starts from, "IDR" or "IRAP". */
const char *fprep__video_codec_name(const fprep_request *spec);
const char *fprep__video_key_name(const fprep_request *spec);

/* fprep__video_fail sets job->status and job->message (printf format);
 * returns status. */
int fprep__video_fail(fprep__job *job, int status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* fprep__video_broken answers the job's packet as a broken bitstream
 * (FPREP_EBITSTREAM, FPREP__VIDEO_BROKEN, the codec, the packet's pts, why in
 * the decoder's words, and the picture the stream waits for); returns
 * FPREP_EBITSTREAM. */
int fprep__video_broken(fprep__job *job, const fprep_request *spec,
                        const char *why);

/* fprep__video_check_size checks a coded size of w x h pixels (<= 0: not
 * known yet, passes) against job->limits: max_width, max_height and
 * max_frame_bytes (NV12 bytes); refuses with FPREP_ELIMIT naming the
 * limit. Returns FPREP_OK or FPREP_ELIMIT. */
int fprep__video_check_size(fprep__job *job, const fprep_request *spec, int w,
                            int h);

/* fprep__video_job_begin resets what a run writes: status, frames,
 * reply_flags, output_size and xf. */
void fprep__video_job_begin(fprep__job *job);

/* fprep__video_frame_request fills *req as a FRAME of format (NV12,
 * I420) of w x h pixels with unpadded planes that follow each other, with
 * the stream's tensor spec. */
void fprep__video_frame_request(const fprep_request *spec, fprep_request *req,
                                uint16_t format, uint32_t w, uint32_t h);

/* fprep__video_room: where a reply's n frames go (fprep__video_reserve):
 * frame k's tensor at tensors + k x one, in the reply's payload or, when
 * the request names a region (job->output set by the loop), in it:
 * device memory when device is set (a CUDA region on the session's GPU),
 * else host memory; frame k's record at records + k x
 * FPREP_STREAM_FRAME_SIZE, in the reply. */
typedef struct fprep__video_room {
	uint8_t *tensors;
	uint8_t *records;
	uint64_t one; /* bytes of one frame's tensor (the stream's shape) */
	int device;
} fprep__video_room;

/* fprep__video_reserve makes the room of a reply of n frames (*room):
 * asks the daemon for the reply's payload (job->reserve: the n tensors
 * and n frame records, or only the records when the tensors go to a
 * region), and checks that n tensors fit the region's out_capacity; sets
 * job->shape (N = n), output_size and frames. Returns FPREP_OK, or the
 * job failed: FPREP_ENOMEM, FPREP_ELIMIT naming out_capacity. At most
 * once a job. */
int fprep__video_reserve(fprep__job *job, const fprep_request *spec, unsigned n,
                         fprep__video_room *room);

/* fprep__video_record writes frame k's record (pts, decoded size w x h,
 * transform xf) into room (fprep__video_reserve); frame 0's xf becomes
 * the reply's (job->xf). */
void fprep__video_record(fprep__job *job, const fprep__video_room *room,
                         unsigned k, int64_t pts, uint32_t w, uint32_t h,
                         const fprep_transform *xf);

/* fprep__video_ps: parameter sets (Annex-B NAL units, start codes
 * included), len bytes at data, cap allocated (grow-only; free(data)). */
typedef struct fprep__video_ps {
	uint8_t *data;
	size_t len, cap;
} fprep__video_ps;

/* fprep__video_scan reads the NAL unit types of an Annex-B packet (n
 * bytes at p) of the stream's codec (spec): returns 1 when it holds a
 * slice of an IDR (H.264, type 5) or IRAP (HEVC, types 16 to 23) picture,
 * else 0, or -1 when out of memory. With ps, the packet's parameter sets
 * (H.264 SPS 7 and PPS 8; HEVC VPS 32, SPS 33 and PPS 34), if it has any,
 * replace those in *ps. A decoder that starts again (a new parser) is fed
 * them. */
int fprep__video_scan(const fprep_request *spec, const uint8_t *p, size_t n,
                      fprep__video_ps *ps);

/* fprep__video_steps: the steps of a session's run, each returning
 * FPREP_OK or the job's failed status: open (the STREAM_OPEN job), packet
 * and flush (into frames the session holds), then emit (those frames
 * into the reply). */
typedef struct fprep__video_steps {
	int (*open)(fprep__video *v, fprep__job *job);
	int (*packet)(fprep__video *v, fprep__job *job);
	int (*flush)(fprep__video *v, fprep__job *job);
	int (*emit)(fprep__video *v, fprep__job *job);
} fprep__video_steps;

/* fprep__video_steps_run runs job on v by its kind (fprep__video_job_begin
 * first): open for STREAM_OPEN; for PACKET and FLUSH (FPREP_EINTERNAL
 * unless opened) the step, its time in job->t_decode_us, then emit when
 * it succeeded; sets job->status. */
void fprep__video_steps_run(fprep__video *v, fprep__job *job,
                            const fprep__video_steps *steps, int opened);

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
