/*
 * backend.h: the interface between frameprepd's event loop and the code
 * that turns frames into tensors (the CPU backend on worker threads, the GPU
 * backend on lanes of CUDA streams).
 *
 * The design is simple: the loop thread owns every job. It fills a job
 * (decoded request, input bytes, output buffer), hands it to the backend with
 * submit(), which only queues it and never blocks. A backend thread does the
 * work, writes the results into the job and calls job->done exactly once,
 * from a backend thread, with none of the backend's locks held; after done
 * begins, the backend does not touch the job again (it may be reused at
 * once). Between submit and done the backend owns the job; the input and
 * output buffers stay valid until done.
 *
 * done belongs to the daemon (service/slot.c): it never blocks on the loop
 * or on a peer. For a job that succeeded it delivers the reply itself, on
 * the calling thread (an nng send, which only queues, or a header written
 * into shared memory: service/sink.c), and queues the end for the loop;
 * otherwise it pushes the job onto the loop's event queue and wakes the
 * loop, which answers it. Either way the loop settles what it owns (region
 * uses, connection counts) when that event arrives.
 *
 * Beside the job queue, each backend runs an administrative queue of
 * operations on registered memory regions (memreg.h): region_op queues
 * one, a backend thread runs it (the GPU lane, whose device is set, pins
 * and unpins there; a CPU worker only maps and unmaps) and calls its done
 * the same way.
 */
#ifndef FPREP_BACKEND_H
#define FPREP_BACKEND_H

#include <stdint.h>

#include "frameprep/frameprep.h"
#include "memreg.h"
#include "queue.h"
#include "video.h"

/* FPREP__UID_UNKNOWN: a job's uid when its peer's is not known (a tcp://
 * connection): all such requesters count as one user. */
#define FPREP__UID_UNKNOWN UINT64_MAX

typedef struct fprep__job fprep__job;
typedef struct fprep__backend fprep__backend;

/* fprep__backend_stats: what a backend tells the metrics endpoint. */
typedef struct fprep__backend_stats {
	uint64_t memory_used;  /* device memory in use, bytes */
	uint64_t memory_total; /* device memory, bytes; 0: unknown */
	unsigned cache_hits;   /* kernels found in the compiled-kernel cache */
	unsigned cache_misses; /* lookups that found none */
	unsigned compiles;     /* NVRTC compilations */
	unsigned lanes;        /* GPU lanes; 0: one, or not a GPU */
	unsigned lanes_in_service; /* of those, not taken out */
} fprep__backend_stats;

/* fprep__job_cb: completion callback, called once per submitted job from a
 * backend thread, which then lets go of the job (see above). */
typedef void (*fprep__job_cb)(fprep__job *job);

/* fprep__stage: the device stages of a job, as indexes of t_stage_ns. */
enum fprep__stage {
	FPREP__STAGE_H2D0,
	FPREP__STAGE_H2D1,
	FPREP__STAGE_K0,
	FPREP__STAGE_K1,
	FPREP__STAGE_D2H0,
	FPREP__STAGE_D2H1,
	FPREP__STAGE_COUNT
};

struct fprep__job {
	/* Filled by the loop before submit; what is decided once per request
	 * (shape, transform, pinned-ness) is here, and backends read it
	 * rather than work it out again. */
	fprep_request req;    /* validated by fprep_request_decode */
	const uint8_t *input; /* req.input_size bytes of frame (BATCH: the
	                         frames, req.input_span bytes) */
	/* ROIS and BATCH: the element table as on the wire (req.elements
	 * records after its 8-byte header; fprep_element_get reads one), in
	 * the request's message, which outlives the job. NULL otherwise. */
	const uint8_t *table;
	/* ROIS and BATCH: the elements' transforms, computed once by the
	 * loop (fprep_element_transform) and written as the reply carries
	 * them (req.elements records of FPREP_ELEMENT_XF_SIZE bytes;
	 * fprep_element_xf_decode reads one), in the reply's message, which
	 * outlives the job. A backend plans its elements from these
	 * (fprep__roi_plan_xf) rather than work them out again. NULL
	 * otherwise. */
	const uint8_t *xfs;
	uint8_t *output;   /* output_size bytes for the tensor */
	uint32_t shape[4]; /* the tensor's, in req.layout (fprep__job_plan) */
	uint64_t output_size; /* its bytes (fprep__job_plan) */
	fprep_transform xf;   /* source to tensor mapping (fprep__job_plan) */
	int input_pinned;     /* input lies in page-locked memory */
	int output_pinned;    /* output lies in page-locked memory */
	int input_device;     /* input is device memory (a CUDA region) */
	int output_device;    /* output is device memory (a CUDA region) */
	fprep__memreg *in_region;  /* region holding the input, or NULL */
	int input_copied;          /* input is the daemon's copy of what lay in
	                              in_region (a JPEG: jpeg.h), which the client can
	                              no longer change */
	fprep__memreg *out_region; /* region receiving the output, or NULL */
	int trace; /* fill t_stage_ns below (frameprepd --trace) */
	/* The requester, for the turns among JPEG frames (jpeg_turns.h): its
	 * peer's uid (FPREP__UID_UNKNOWN: not known, tcp://) and its
	 * connection (nng pipe id). */
	uint64_t uid;
	uint32_t conn;
	/* The daemon's limits, for what only the backend learns: a JPEG
	 * source's size (jpeg.h). A JPEG job without them is refused. */
	const fprep_limits *limits;
	/* Video stream jobs (video.h); video NULL: a frame's job. The
	 * stream's session, the stream request (kind STREAM_OPEN: req is
	 * the stream's spec; STREAM_PACKET: input holds the packet,
	 * stream.packet_size bytes), and the daemon's allocator of the
	 * reply's payload: reserve(job, bytes) returns room for bytes (the
	 * tensors, then the frame records), or NULL when out of memory;
	 * called at most once a job, by the backend's thread that runs it. */
	fprep__video *video;
	fprep_stream_request stream;
	uint8_t *(*reserve)(fprep__job *job, uint64_t bytes);
	fprep__job_cb done;
	void *data; /* the loop's request */

	/* Written by the backend before done. */
	int status;                       /* FPREP_OK or enum fprep_err */
	int fatal;                        /* sticky device error: exit */
	char message[FPREP_MESSAGE_SIZE]; /* set when status != FPREP_OK */
	uint64_t t_start_ns;              /* CLOCK_MONOTONIC, work began */
	uint64_t t_end_ns;                /* CLOCK_MONOTONIC, output ready */
	uint32_t t_compute_us;
	uint32_t t_h2d_us;
	uint32_t t_kernel_us;
	uint32_t t_d2h_us;
	/* A JPEG source (jpeg.h): the decoded size and the decode time; the
	 * backend then rewrites req, input and xf as the decoded frame's. */
	uint16_t decoded_width;
	uint16_t decoded_height;
	uint32_t t_decode_us;
	/* A stream job: the frames its reply carries (shape[0], and
	 * output_size all their tensors' bytes, xf the first frame's) and
	 * FPREP_REPLY_F_* flags for its reply. */
	uint32_t frames;
	uint32_t reply_flags;
	unsigned lane; /* index of the lane that ran it; 0 with one lane */
	/* With trace set, a GPU backend writes when each device stage began
	 * and ended (enum fprep__stage), converted to CLOCK_MONOTONIC
	 * nanoseconds; 0: the stage did not run or is unknown. */
	uint64_t t_stage_ns[FPREP__STAGE_COUNT];

	/* Private to the backend. */
	fprep__qnode link; /* in the backend's queue */
	uint64_t seq;      /* its place in the order of submits */
	void *priv;
	fprep__job_cb outer_done; /* a backend over others (backend_multi.c)
	                             keeps the caller's done here */
};

struct fprep__backend {
	const char *name; /* "cpu" or "cuda" */
	/* The jobs it runs at once (a GPU lane's staging slots, the CPU
	 * workers); more wait in its queue. Set at open; 0: unknown. The
	 * loop stops polling while the backend holds more (server.c). */
	unsigned capacity;

	/* submit queues job; called on the loop thread; never blocks. Returns 0
	 * (done will be called) or an error (done will not be called). */
	int (*submit)(fprep__backend *b, fprep__job *job);

	/* info appends "key: value\n" lines describing the backend to buf,
	 * which holds size bytes and is NUL-terminated: what only it knows
	 * (the server writes the backend's name and the device itself). */
	void (*info)(fprep__backend *b, char *buf, size_t size);

	/* close stops the backend: jobs already submitted are completed (their
	 * done called) or failed with FPREP_ESHUTDOWN within timeout_ms, the
	 * threads are joined and everything is freed. Not from a backend
	 * thread. */
	void (*close)(fprep__backend *b, int timeout_ms);

	/* region_op queues the operation r->verb on region r (OPEN: map it
	 * and make it usable by jobs, which on the GPU means pinning it;
	 * CLOSE: no job uses r any more: undo that and unmap it) on the
	 * backend's administrative queue; called on the loop thread; never
	 * blocks. Returns 0 (r->done will be called once, from a backend
	 * thread, with r->status and r->message set) or an error (done will
	 * not be called). close runs the operations already queued, and
	 * calls their done, before it returns. */
	int (*region_op)(fprep__backend *b, fprep__memreg *r);

	/* stats fills *st (zeroed by the caller) for the metrics endpoint;
	 * called from any thread while the backend is open, never blocking
	 * on its work. NULL when the backend has nothing to tell (CPU). */
	void (*stats)(fprep__backend *b, fprep__backend_stats *st);

	/* video_open makes a decoder session (video.h) for the stream whose
	 * validated STREAM_OPEN request is spec, with params_len bytes of
	 * parameter sets at params; the stream's jobs then carry it. Loop
	 * thread; never blocks (the decoder opens in the first job).
	 * Returns 0 or FPREP_ENOMEM. NULL: the backend decodes no video,
	 * and the daemon refuses streams with FPREP_EUNSUPPORTED. */
	int (*video_open)(fprep__backend *b, const fprep_request *spec,
	                  const uint8_t *params, size_t params_len,
	                  fprep__video **vp);
};

/* fprep__job_plan decides, once, what job->req implies: the tensor's
 * shape and size (fprep_tensor_shape) and the transform
 * (fprep_transform_compute), stored in the job. Returns 0 or FPREP_EINVAL
 * for a request fprep_request_decode would refuse. */
int fprep__job_plan(fprep__job *job);

/* fprep__backend_cpu_open starts a CPU backend with nthreads worker threads
 * (0: one per online core). */
int fprep__backend_cpu_open(fprep__backend **bp, unsigned nthreads);

#endif /* FPREP_BACKEND_H */
