/*
 * cuda_core_internal.h: what the files of a GPU lane share: the lane's
 * structures, the small helpers all of them use (inline here, cuda_core_*),
 * and the calls between the files, each named with its file's prefix
 * (fprep__cuda_video_, _lane_, _decoder_, _wait_, _slot_, _region_,
 * _core_). The files, from the top down: each calls only files below it.
 * The decoders hand their frames back to the lane thread through its
 * queue (decoded) and a kick (cuda_core_kick), never by a call.
 *
 *   backend_cuda.c  the backend's ops (submit, region operations, INFO,
 *                   metrics), its open (kernels, streams, slots, threads)
 *                   and its close
 *   cuda_video.c    video streams: an NVDEC session per stream, whose jobs
 *                   run on a thread of its own
 *   cuda_lane.c     the lane thread: region operations, the hand-backs of
 *                   the decoders, the jobs submitted, onto staging slots
 *   cuda_decoder.c  the JPEG decoders: the engine's batches, CPU decodes
 *   cuda_wait.c     completions, the waits of the lane's threads, pacing,
 *                   the completion thread
 *   cuda_slot.c     the staging slots and the work enqueued on them
 *   cuda_region.c   CUDA regions and IPC: the region operations
 *   cuda_core.c     the devices, the allocation count, a backend thread's
 *                   name, the slots in use (cuda_core.h: what the daemon
 *                   sees of it)
 *
 * Private to src/backend/gpu.
 */
#ifndef FPREP_CUDA_CORE_INTERNAL_H
#define FPREP_CUDA_CORE_INTERNAL_H

#include "gpu/cuda_core.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h> /* roi_sample.h's rintf, floorf, rint */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "backend_multi.h"
#include "gpu/cuda_check.h"
#include "gpu/host_copy.h"
#include "gpu/kernel_cache.h"
#include "gpu/nvjpeg_decode.h"
#include "jpeg.h"
#include "jpeg_turns.h"
#include "log.h"
#include "memreg.h"
#include "ops.h"
#include "row_plan.h"
#include "yuv.h"

/* The kernels' argument block and enum values: one definition, shared
 * with kernels/letterbox.cu (and roi_sample.h with kernels/roi.cu). */
#include "letterbox_abi.h"
#include "roi_sample.h"

typedef struct fprep_letterbox_args cuda_lb_args;

typedef struct fprep_letterbox_args cuda_lb_args;

_Static_assert(sizeof(cuda_lb_args) == 136, "kernel argument layout");
_Static_assert(LB_PIX_BGR8 == FPREP_PIX_BGR8 && LB_PIX_RGB8 == FPREP_PIX_RGB8 &&
                       LB_PIX_BGRA8 == FPREP_PIX_BGRA8 &&
                       LB_PIX_RGBA8 == FPREP_PIX_RGBA8 &&
                       LB_PIX_GRAY8 == FPREP_PIX_GRAY8 &&
                       LB_PIX_NV12 == FPREP_PIX_NV12 &&
                       LB_PIX_I420 == FPREP_PIX_I420 &&
                       LB_PIX_YUYV == FPREP_PIX_YUYV,
               "pixel formats");
_Static_assert(sizeof(((cuda_lb_args *)0)->yuv) == sizeof(fprep__yuv_coefs),
               "YUV coefficients");
_Static_assert(LB_ORDER_RGB == FPREP_ORDER_RGB &&
                       LB_ORDER_BGR == FPREP_ORDER_BGR &&
                       LB_ORDER_GRAY == FPREP_ORDER_GRAY,
               "channel orders");
_Static_assert(LB_LAYOUT_NCHW == FPREP_LAYOUT_NCHW &&
                       LB_LAYOUT_NHWC == FPREP_LAYOUT_NHWC,
               "layouts");
_Static_assert(LB_DTYPE_F32 == FPREP_DTYPE_F32 &&
                       LB_DTYPE_F16 == FPREP_DTYPE_F16 &&
                       LB_DTYPE_U8 == FPREP_DTYPE_U8,
               "dtypes");

#define CUDA_KERNEL_SOURCE "letterbox.cu"
#define CUDA_ROI_SOURCE    "roi.cu"
#define CUDA_BLOCK_X       32
#define CUDA_BLOCK_Y       8
/* Bands of a frame whose copies and kernel overlap (slot_band_plan). */
#define CUDA_BANDS 4
/* Initial staging sizes: a 1080p BGR8 frame in, 640x640x3 float32 out. */
#define CUDA_INITIAL_IN  (1920u * 1080u * 3u)
#define CUDA_INITIAL_OUT (640u * 640u * 3u * 4u)
#define CUDA_GROW_ALIGN  (1u << 20)
/* The longest poll of the trace's clock anchor (fprep__cuda_wait_anchor). */
#define CUDA_SPIN_NS (1000u * 1000u)
/* Pacing (cuda_pace_*): a paced sleep ends this long before the expected
 * completion, besides how late the thread's sleeps wake; a sleep shorter
 * than CUDA_PACE_MIN_NS is not taken (polling costs less); none is longer
 * than CUDA_PACE_MAX_NS. */
#define CUDA_PACE_GUARD_NS (6u * 1000u)
#define CUDA_PACE_MIN_NS   (15u * 1000u)
#define CUDA_PACE_MAX_NS   (50u * 1000u * 1000u)
/* A sleep's lateness counts as at most this much: the figure cannot grow
 * so large that no sleep is taken again (and none measured). */
#define CUDA_PACE_LATE_NS (30u * 1000u)
/* The same for the lateness envelope (late_hi_ns), which a lone frame's
 * sleep keeps clear of: a wake-up that late is rare, and the reply of a
 * stream alone waits for every one. */
#define CUDA_PACE_LATE_HI_NS (100u * 1000u)
/* What a polling thread does between two looks. */
#if defined(__x86_64__) || defined(__i386__)
#define CUDA_CPU_RELAX() __builtin_ia32_pause()
#else
#define CUDA_CPU_RELAX() ((void)0)
#endif

enum {
	CUDA_T_H2D0,
	CUDA_T_H2D1,
	CUDA_T_K0,
	CUDA_T_K1,
	CUDA_T_D2H0,
	CUDA_T_D2H1,
	CUDA_NT
};
_Static_assert((int)CUDA_T_H2D0 == (int)FPREP__STAGE_H2D0 &&
                       (int)CUDA_T_D2H1 == (int)FPREP__STAGE_D2H1 &&
                       (int)CUDA_NT == (int)FPREP__STAGE_COUNT,
               "stage order");

/* The kernels' table dimensions (cuda_kernel_names, backend_cuda.c). */
#define CUDA_FAMILIES  4
#define CUDA_ROUNDINGS 2

typedef struct cuda_slot {
	uint8_t *h_in, *d_in;   /* pinned and device input, in_cap bytes */
	uint8_t *d_out, *h_out; /* device and pinned output, out_cap bytes */
	uint8_t *m_in, *m_out;  /* h_in, h_out mapped for the device, or NULL */
	size_t in_cap, out_cap;
	cudaEvent_t ev_h2d;  /* ordering: kernel after H2D */
	cudaEvent_t ev_kern; /* ordering: D2H after kernel */
	cudaEvent_t ev_done; /* blocking sync: the completion thread waits */
	cudaEvent_t t[CUDA_NT];
	cudaEvent_t ev_band_h2d[CUDA_BANDS];  /* banded: band k's rows are in */
	cudaEvent_t ev_band_kern[CUDA_BANDS]; /* banded: band k is written */
	fprep__job *job;   /* non-NULL while the slot is in use */
	int out_direct;    /* D2H went straight into job->output (pinned) */
	uint64_t t_enq_ns; /* host time its work was enqueued (lane thread) */
	fprep__qnode link; /* in flying, decode_q or decoded */
	fprep__jpeg_turn turn;      /* its JPEG's turn, taken from decode_q */
	fprep__jpeg_turn slot_turn; /* its JPEG's turn for the slot (slot_q) */
	uint32_t decode_us;         /* its JPEG's decode time, for the turns */
	/* Where a decoder left the job's frame (a JPEG's) until the slot is
	 * freed: on the device at d_frame (nvJPEG: written once ev_dec, on
	 * the decoder's stream, has passed), or in h_in (staged). */
	uint8_t *d_frame;
	int staged;
	cudaEvent_t ev_dec; /* ordering: kernel after the engine's decode */
	uint64_t t_back_ns; /* when a decoder handed the slot back */
	int lone; /* its JPEG was decoded alone, nothing else in the lane
	             (counted in jlone too) */
	/* Its job's JPEG when that lay in a client's region: the daemon's
	 * own copy, read by the header check and the decoder alike. */
	fprep__jpeg_copy jpeg_copy;
} cuda_slot;

/* cuda_pace: what the lane learnt of its frames' durations, and what its
 * waits cost. The estimates are written by the thread completing a frame
 * (one at a time: the lane thread completes one only while no other is in
 * flight) and read by both threads: relaxed atomics. */
typedef struct cuda_pace {
	_Atomic uint64_t lone_ns;    /* enqueue to completion seen, a frame that
	                                ran alone (running mean); 0: unknown */
	_Atomic uint64_t gap_ns;     /* previous completion to this one, a frame
	                                that queued behind it; 0: unknown */
	_Atomic uint64_t late_ns;    /* how late a paced sleep wakes (mean) */
	_Atomic uint64_t late_hi_ns; /* and at most, lately: an envelope that
	                                rises by half a later wake-up and
	                                falls by a 64th of an earlier one */
	_Atomic uint64_t last_ns; /* host time the last completion was seen */
	_Atomic uint64_t next_ns; /* the next completion expected; 0: none */
	/* Counters (INFO "pacing", and a line at close): */
	atomic_ullong queries_empty; /* cudaEventQuery found it not done */
	atomic_ullong spin_ns;       /* time spent polling an event */
	atomic_ullong sleeps;        /* paced sleeps taken */
	atomic_ullong overslept;     /* of those, the frame was done already */
	atomic_ullong blocked;       /* polls that ended in a blocking wait */
} cuda_pace;

/* cuda_jpeg_stats: where a lane's JPEG frames spend host time (INFO
 * "jpeg_timing", and a line at close): sums in nanoseconds, written by
 * the decoders and the lane thread, relaxed atomics. */
typedef struct cuda_jpeg_stats {
	atomic_ullong frames;   /* frames the decoders took */
	atomic_ullong queue_ns; /* the lane took the job -> a decoder did */
	atomic_ullong parse_ns; /* header checks: fprep__jpeg_open,
	                           fprep__jpeg_sequential, nvJPEG's parse */
	atomic_ullong batches;  /* the engine's batches (nvjpegDecodeBatched) */
	atomic_ullong batch_frames; /* the frames in them */
	atomic_ullong call_ns;      /* time in nvjpegDecodeBatched */
	atomic_ullong cpu_frames;   /* libjpeg-turbo decodes tried */
	atomic_ullong cpu_ns;       /* their time (decoder_cpu_decode) */
	atomic_ullong back;         /* frames handed back to the lane */
	atomic_ullong back_ns;      /* handed back -> the lane took it */
	atomic_ullong gather_ns;    /* a batch's first frame taken -> its
	                               decode begun (header checks and the
	                               wait for the engine) */
	atomic_ullong done;         /* frames answered after a hand-back */
	atomic_ullong lane_ns;      /* handed back -> answered (kernel, D2H,
	                               the completion) */
	atomic_ullong total_ns;     /* the lane took the job -> answered */
	atomic_ullong sync_ns; /* gate_done: a batch handed back -> decoded */
} cuda_jpeg_stats;

typedef struct cuda_backend {
	fprep__backend base;
	int device;
	char device_name[256];
	int cc, arch;
	uint8_t uuid[FPREP_CUDA_UUID_SIZE]; /* cudaDeviceProp.uuid */
	size_t memory;
	int copy_engines;
	unsigned nslots;
	unsigned copy_threads; /* host copy helpers besides the caller */
	fprep__kcache *cache;
	int cache_hit;

	cudaLibrary_t lib;
	cudaKernel_t kernel[CUDA_ROUNDINGS][CUDA_FAMILIES][3]; /* by name */
	cudaLibrary_t roi_lib;
	cudaKernel_t roi_kernel[3]; /* ROIS and BATCH, by dtype - 1 */
	cudaStream_t s_h2d, s_comp, s_d2h;
	cudaEvent_t ev_base; /* origin of fprep__cuda_stamps */
	cuda_slot *slots;

	pthread_mutex_t mu;
	pthread_cond_t cv_lane; /* first pending job, a slot freed while jobs
	                           pend, region operation, or stop */
	pthread_cond_t cv_done; /* in-flight slot, or lane exited */
	atomic_uint lane_kicks; /* signals of cv_lane, counted under mu */
	atomic_uint done_kicks; /* signals of cv_done, counted under mu */
	uint64_t spin_ns; /* fprep__cuda_wait_spin's poll; 0: sleep at once */
	cuda_pace pace;   /* paced waits (spin_ns > 0) */
	fprep__queue pending; /* jobs submitted, not yet sorted by the lane */
	fprep__queue waiting; /* jobs sorted from pending but JPEG frames for
	                         the decoders, in arrival order, not yet on a
	                         slot */
	fprep__jpeg_turns slot_q; /* JPEG frames for the decoders sorted from
	                             pending, not yet on a slot: by turns of
	                             their clients (jpeg_turns.h) */
	uint64_t seq;             /* jobs sorted from pending (job->seq) */
	fprep__queue flying;      /* slots enqueued, in completion order */
	fprep__queue admin;       /* region operations, not yet run */
	int stopping;
	uint64_t deadline_ns;
	int lane_exited;
	int fatal;
	pthread_t lane, completion;
	int threads;
	fprep__copy_pool *copier;

	fprep__cuda_probe_fn probe;
	void *probe_arg;

	int transfer;            /* FPREP__CUDA_STAGED, _MAPPED or _AUTO */
	int all_rows;            /* a staged H2D copies every row */
	fprep__row_plan plan[2]; /* the last geometry's rows, and chroma
	                            rows (lane thread) */
	int integrated;          /* cudaDevAttrIntegrated */
	int trace;               /* convert job stages to the host clock */
	cudaEvent_t ev_anchor;   /* device time at host time anchor_ns */
	uint64_t anchor_ns;      /* lane thread; read while a slot is busy */
	fprep__jpeg jpeg;        /* JPEG frames, when there are no decoders
	                            (lane thread) */
	fprep__nvjpeg *nvjpeg;   /* the JPEG engine's handle, shared by the
	                            decoders, or NULL (set at open) */
	char jpeg_desc[384]; /* the INFO line's jpeg_decoder (set at open) */
	unsigned raw_slots;  /* slots [0, raw_slots) take any frame, the
	                        rest JPEG frames only */
	pthread_t *decoders; /* the decoders (decoder_main) */
	unsigned ndecoders;  /* how many run; set before the lane starts */
	unsigned ready;      /* decoders set up (and warmed up); under mu */
	pthread_cond_t cv_decode;   /* decode_q has a slot, or decoders_stop */
	fprep__jpeg_turns decode_q; /* slots whose JPEG is to be decoded, by
	                               turns of their clients (jpeg_turns.h) */
	fprep__queue decoded;       /* slots decoded, for the lane to enqueue */
	unsigned decoding;          /* slots given to the decoders, not back */
	int decoder_polling;        /* a decoder polls decode_kicks (cb->mu) */
	atomic_uint decode_kicks;   /* slots pushed on decode_q, under cb->mu */
	atomic_uint decoder_seq;    /* decoder threads started (their index) */
	unsigned engine_decoders;   /* of ndecoders, those with the engine; the
	                               rest are CPU helpers (decoder_helper_take)
	                             */
	unsigned helpers;           /* CPU helpers planned (set at open) */
	unsigned jpeg_batch;        /* the most frames of an engine batch
	                               (FPREP_NVJPEG_BATCH) */
	unsigned engine_calls;  /* decoders inside the engine's call (cb->mu) */
	unsigned calls_max;     /* decoders in the engine at once before another
	                           gathers (FPREP_NVJPEG_CALLS) */
	int gate_done;          /* a call counts until its decode is done (the
	                           default), or until it returns
	                           (FPREP_NVJPEG_GATE=call) */
	uint64_t gather_ns;     /* FPREP_NVJPEG_GATHER_US: decoder_gathers */
	unsigned help_min;      /* frames waiting for the engine beyond which
	                           helpers take one (FPREP_JPEG_HELP_MIN) */
	unsigned helpers_idle;  /* helpers waiting on cv_help (cb->mu) */
	unsigned gathered;      /* frames in the engine decoders' batches, not
	                           yet in the engine (cb->mu) */
	pthread_cond_t cv_help; /* helpers: the queue grew, or decoders_stop */
	int decoders_stop;
	cuda_jpeg_stats jstats;
	cuda_jpeg_stats jlone;    /* the same for frames decoded alone */
	cuda_jpeg_stats jmax;     /* the largest single value of each */
	atomic_ulong jpeg_engine; /* JPEG frames the engine decoded */
	atomic_ulong jpeg_cpu;    /* JPEG frames libjpeg-turbo decoded */
} cuda_backend;

/* CUDA_JSTAT adds v to the JPEG counter f of cb (cuda_jpeg_stats), and
 * to the lone frames' (jlone) when slot s's frame was decoded alone, and
 * raises f's largest value (jmax) to v. */
#define CUDA_JSTAT(cb, s, f, v)                                                \
	do {                                                                   \
		unsigned long long v_ = (v);                                   \
		atomic_fetch_add_explicit(&(cb)->jstats.f, v_,                 \
		                          memory_order_relaxed);               \
		if ((s)->lone)                                                 \
			atomic_fetch_add_explicit(&(cb)->jlone.f, v_,          \
			                          memory_order_relaxed);       \
		cuda_core_stat_max(&(cb)->jmax.f, v_);                         \
	} while (0)

/* cuda_core_stat_max raises *m to v if v is larger. Any thread. */
static inline void cuda_core_stat_max(atomic_ullong *m, unsigned long long v)
{
	unsigned long long cur = atomic_load_explicit(m, memory_order_relaxed);

	while (cur < v &&
	       !atomic_compare_exchange_weak_explicit(
	               m, &cur, v, memory_order_relaxed, memory_order_relaxed))
		;
}

/* cuda_core_jobs_waiting tells whether jobs wait for the lane thread (pending,
 * waiting or slot_q). With cb->mu held. */
static inline int cuda_core_jobs_waiting(const cuda_backend *cb)
{
	return !fprep__queue_empty(&cb->pending) ||
	       !fprep__queue_empty(&cb->waiting) || cb->slot_q.queued > 0;
}

static inline uint64_t cuda_core_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* cuda_core_sticky tells whether e left the context unusable: the listed
 * launch faults always do; otherwise the error persists after the last
 * error was read. */
static inline int cuda_core_sticky(int code)
{
	switch ((cudaError_t)code) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorLaunchTimeout:
	case cudaErrorECCUncorrectable:
	case cudaErrorAssert:
	case cudaErrorContextIsDestroyed:
		return 1;
	default:
		break;
	}
	(void)cudaGetLastError();
	return cudaPeekAtLastError() != cudaSuccess;
}

/* cuda_core_fail records an error reply in job. */
static inline void cuda_core_fail(fprep__job *job, int status, int fatal,
                                  const char *text)
{
	job->status = status;
	job->fatal = fatal;
	snprintf(job->message, sizeof job->message, "%s", text);
}

/* cuda_core_kick signals cv, with the lane's mu held, and counts it in *kicks
 * for the thread that polls instead of sleeping (fprep__cuda_wait_spin). */
static inline void cuda_core_kick(pthread_cond_t *cv, atomic_uint *kicks)
{
	atomic_fetch_add_explicit(kicks, 1, memory_order_release);
	pthread_cond_signal(cv);
}

/* cuda_core_pace_load reads a pacing estimate (relaxed; wait_pace_store in
 * cuda_wait.c writes them). */
static inline uint64_t cuda_core_pace_load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

/* cuda_core_timedwait waits on cv (mu held) until ns, CLOCK_MONOTONIC
 * nanoseconds. */
static inline void cuda_core_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
                                       uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
	                      .tv_nsec = (long)(ns % 1000000000u)};
	pthread_cond_timedwait(cv, mu, &ts);
}

/* Re-anchor the device clock at most this often, when the lane is idle:
 * cudaEventElapsedTime's float milliseconds hold about 1 us at 10 s. */
#define CUDA_ANCHOR_NS (1000u * 1000u * 1000u)

/* cuda_video.c */

/* fprep__cuda_video_open: the lane's video_open (backend.h): an NVDEC
 * session (video.h) for the stream whose STREAM_OPEN request is spec,
 * with params_len bytes of parameter sets (copied), whose jobs run on a
 * thread of its own, started here, on cb's device (the decoder opens in
 * the first job). Returns 0 or FPREP_ENOMEM (no memory or no thread).
 * Loop thread. */
int fprep__cuda_video_open(fprep__backend *b, const fprep_request *spec,
                           const uint8_t *params, size_t params_len,
                           fprep__video **vp);

/* fprep__cuda_video_submit queues a stream job (job->video, a session of
 * fprep__cuda_video_open on this lane's device) for the session's own
 * thread, which runs the stream's jobs in order and calls job->done;
 * never on the lane thread, so a stream's job delays no frame. Returns 0,
 * or FPREP_ESHUTDOWN once the lane that opened the session closes. Loop
 * thread (backend.h, submit). */
int fprep__cuda_video_submit(fprep__job *job);

/* fprep__cuda_video_stop stops the threads of the sessions cb opened:
 * each runs the jobs it holds until deadline_ns (CLOCK_MONOTONIC) and
 * answers the rest FPREP_ESHUTDOWN, then is joined; the sessions
 * themselves stay until the daemon closes them (video.h, close). cb's
 * close, before it frees cb; never beside a session's close. */
void fprep__cuda_video_stop(cuda_backend *cb, uint64_t deadline_ns);

/* fprep__cuda_video_load loads libnvcuvid.so.1 (and libcuda.so.1) if no
 * call did yet, and writes what was loaded ("NVDEC (libnvcuvid.so.1,
 * driver CUDA 13.0)") or why nothing was into buf (size bytes,
 * terminated). Returns FPREP_OK, or FPREP_EUNSUPPORTED when the GPU lanes
 * cannot decode streams. Any thread. */
int fprep__cuda_video_load(char *buf, size_t size);

/* cuda_lane.c */

/* fprep__cuda_lane_main is the lane thread (arg: the cuda_backend) until
 * the lane stops and no frame is with the decoders. */
void *fprep__cuda_lane_main(void *arg);

/* cuda_decoder.c */

/* fprep__cuda_decoder_start gives slot s, whose job is a JPEG frame, to the
 * decoders (decoder_main). Lane thread, cb->mu not held. */
void fprep__cuda_decoder_start(cuda_backend *cb, cuda_slot *s);

/* fprep__cuda_decoder_decoded_wait: the lane thread, with nothing to do but
 * frames with the decoders, polls for their hand-back (lane_kicks) for up to
 * CUDA_DECODED_POLL_NS, then waits as ever (fprep__cuda_wait_spin): a frame's
 * decode takes about a millisecond, as long as the lane's own poll
 * (spin_ns), and a sleep then would add a wake-up to the reply of a frame
 * alone. Only where the lane polls (spin_ns > 0). Lane thread, cb->mu
 * held (let go meanwhile). */
void fprep__cuda_decoder_decoded_wait(cuda_backend *cb);

/* fprep__cuda_decoder_plan opens the JPEG engine's handle on the open's device
 * (none: JPEG frames decode with libjpeg-turbo, why says why) and chooses
 * the lane's decoders and its slots kept for JPEG frames, from the
 * environment (include/frameprep/README.md, "JPEG frames"):
 *   with the engine: FPREP_JPEG_THREADS decoders (2), batches of up to
 *   FPREP_NVJPEG_BATCH (32) frames, gathered while FPREP_NVJPEG_CALLS (1)
 *   batches are in the engine (FPREP_NVJPEG_GATE: "done", the default,
 *   until decoded; "call": until the call returned) for up to
 *   FPREP_NVJPEG_GATHER_US (10000; 0: no gather), and
 *   FPREP_JPEG_CPU_HELPERS (0) CPU helpers taking frames beyond
 *   FPREP_JPEG_HELP_MIN (half a batch) queued; slots: a batch per decoder
 *   (while one batch is in the engine the next one gathers), half a
 *   batch for the frames past the engine (the kernel, the copy, the
 *   reply) and two per helper: 80 by default;
 *   without: FPREP_JPEG_THREADS decoders (half the cores, at most 8), two
 *   slots each;
 * FPREP_JPEG_SLOTS overrides the slots. A slot's buffers are made when
 * first used: for a 1080p frame decoded by the engine 6 MiB of device
 * memory in and the tensor's out (5 MiB for 640x640x3 f32, and as much
 * pinned when the tensor is copied out). Returns the number of slots, and
 * the decoders to start in *threads. Before the slots are made. engine 0
 * (--jpeg-engine=false, the default) plans as without the engine. */
unsigned fprep__cuda_decoder_plan(cuda_backend *cb, int engine, long ncpu,
                                  unsigned *threads, char *why,
                                  size_t why_size);

/* fprep__cuda_decoder_setup starts the decoders that fprep__cuda_decoder_plan
 * chose (fewer when a thread cannot start: with none, the lane decodes with
 * libjpeg-turbo itself, and the engine's handle is closed) and writes the
 * INFO line. Before the lane starts. */
void fprep__cuda_decoder_setup(cuda_backend *cb, unsigned lane, unsigned want,
                               char *why, size_t why_size);

/* fprep__cuda_decoder_text writes where the lane's JPEG frames spent their time
 * (cuda_jpeg_stats) into buf, in microseconds (means): a frame's wait for
 * a decoder (queue), its header checks (parse), an engine batch's gather
 * (its first frame taken -> its decode begun: header checks and the wait
 * for a busy engine) and call (and the mean batch), a libjpeg-turbo
 * decode (cpu), the wait for the lane once decoded (back), the lane's
 * kernel, copy and completion after it (lane), and the lane's whole time
 * (total: the lane took the job -> answered); and a batch's wait for its
 * decode after the call returned (sync; 0 with FPREP_NVJPEG_GATE=call). */
void fprep__cuda_decoder_text(cuda_jpeg_stats *j, char *buf, size_t size);

/* fprep__cuda_decoder_max_text writes the largest single wait of each stage of
 * fprep__cuda_decoder_text (INFO "jpeg_timing_max", microseconds): where a tail
 * comes from. */
void fprep__cuda_decoder_max_text(cuda_jpeg_stats *j, char *buf, size_t size);

/* fprep__cuda_decoder_stop stops and joins the decoders; their queue is
 * empty by then (the lane exits only when no slot is with them). */
void fprep__cuda_decoder_stop(cuda_backend *cb);

/* cuda_wait.c */

/* fprep__cuda_wait_pace_wake returns when a thread waiting for a completion
 * expected at expect (0: unknown) ends its paced sleep: early_ns before it, and
 * before it by how late sleeps wake; 0: a sleep is not worth it. */
uint64_t fprep__cuda_wait_pace_wake(cuda_pace *p, uint64_t expect,
                                    uint64_t early_ns, uint64_t now);

/* fprep__cuda_wait_spin waits, with cb->mu held, for the next cuda_core_kick of
 * cv: with sleep_until set (CLOCK_MONOTONIC nanoseconds,
 * fprep__cuda_wait_pace_wake) it first sleeps on cv until then, since the kick
 * is not expected before (a kick ends the sleep); then it polls *kicks with the
 * mutex released for up to spin_ns, since waking a sleeping thread adds tens of
 * microseconds to each hand-off (submit to lane, lane to completion), then
 * sleeps on cv. A kick counts only under cb->mu, so none is lost between
 * the poll and the sleep. */
void fprep__cuda_wait_spin(cuda_backend *cb, pthread_cond_t *cv,
                           atomic_uint *kicks, uint64_t sleep_until);

/* fprep__cuda_wait_deliver frees slot s (if any) and calls job's done. */
void fprep__cuda_wait_deliver(cuda_backend *cb, cuda_slot *s, fprep__job *job);

/* fprep__cuda_wait_anchor records ev_anchor on the idle H2D stream and polls it
 * (for up to CUDA_SPIN_NS), so anchor_ns is the host time of its device
 * timestamp to within half the poll; device stages are converted from it
 * (wait_host_stamps). Lane thread, with no slot busy. */
void fprep__cuda_wait_anchor(cuda_backend *cb);

/* fprep__cuda_wait_lane_finish: the lane thread has just enqueued s, the only
 * slot in flight, and nothing is pending. It waits for s's ev_done itself and
 * completes the job when it is done, so that a lone request crosses no
 * third thread (the completion thread, and the tens of microseconds of its
 * waking when it slept): it sleeps on cv_lane until shortly before the
 * completion expected (fprep__cuda_wait_pace_wake), then polls for up to
 * spin_ns. A kick after k, the count of lane_kicks read under cb->mu when the
 * lane found nothing pending (a new job, a region operation, a stop), or the
 * end of the poll hands s to the completion thread instead, as any slot
 * under load. */
void fprep__cuda_wait_lane_finish(cuda_backend *cb, cuda_slot *s, unsigned k);

/* fprep__cuda_wait_completion_main is the completion thread (arg: the
 * cuda_backend): it completes the slots in flight in order, until the
 * lane thread has exited and none is left. */
void *fprep__cuda_wait_completion_main(void *arg);

/* fprep__cuda_wait_pace_text writes the lane's pacing figures (cuda_pace) into
 * buf: the estimates in microseconds, the paced sleeps (and how many
 * overslept), the event queries that found the frame not done, the time spent
 * polling events (ms) and the polls that ended in a blocking wait. */
void fprep__cuda_wait_pace_text(cuda_pace *p, char *buf, size_t size);

/* cuda_slot.c */

/* fprep__cuda_slot_reserve makes the slot's input hold in_size bytes and its
 * output out_size bytes, reallocating only what is too small (or an
 * input that fprep__cuda_slot_reserve_dev left without its pinned half). */
int fprep__cuda_slot_reserve(cuda_slot *s, size_t in_size, size_t out_size,
                             int mapped, fprep__gpu_status *st);

/* fprep__cuda_slot_reserve_dev makes the slot's device input hold in_size bytes
 * for a frame the JPEG engine writes there; where it must grow, only the
 * device half is made (no pinned input, which such a frame never uses:
 * fprep__cuda_slot_reserve makes both again when one is needed). */
int fprep__cuda_slot_reserve_dev(cuda_slot *s, size_t in_size,
                                 fprep__gpu_status *st);

/* fprep__cuda_slot_init creates s's events and, with reserve, its staging
 * buffers at their initial sizes (else they grow when first used). */
int fprep__cuda_slot_init(cuda_slot *s, int mapped, int reserve,
                          fprep__gpu_status *st);

/* fprep__cuda_slot_fini frees what fprep__cuda_slot_init and the
 * reserves made. */
void fprep__cuda_slot_fini(cuda_slot *s);

/* fprep__cuda_slot_use_mapped tells whether a job goes mapped: always in MAPPED
 * mode; in AUTO mode on an integrated GPU, or when no other slot is busy. */
int fprep__cuda_slot_use_mapped(const cuda_backend *cb, unsigned busy);

/* fprep__cuda_slot_enqueue puts job's H2D, kernel and D2H on the streams, using
 * slot s; with mapped, the kernel reads and writes pinned memory that is mapped
 * for the device in place of the copies; with banded (a staged lane with
 * no other job in flight), an interleaved frame goes in bands whose copies
 * and kernels overlap (slot_enqueue_banded). Runs on the lane thread.
 * Returns 0, or an error with job's reply set. */
int fprep__cuda_slot_enqueue(cuda_backend *cb, cuda_slot *s, fprep__job *job,
                             int mapped, int banded);

/* cuda_region.c */

/* fprep__cuda_region_drain runs the queued region operations; called and
 * returns with cb->mu held. */
void fprep__cuda_region_drain(cuda_backend *cb, int dev_ok);

/* cuda_core.c */

/* fprep__cuda_core_thread_start names the calling backend thread (top -H,
 * /proc/PID/task/TID/comm: 15 bytes at most) and makes its timed sleeps
 * end within a microsecond of their time (the default timer slack is
 * 50 us: as long as a paced sleep's guard). */
void fprep__cuda_core_thread_start(const char *prefix, int device);

/* fprep__cuda_core_busy counts the slots in use; with cb->mu held. */
unsigned fprep__cuda_core_busy(const cuda_backend *cb);

/* fprep__cuda_core_count_alloc counts one device or pinned buffer a lane
 * allocated (fprep__cuda_alloc_count). Any thread. */
void fprep__cuda_core_count_alloc(void);

#endif /* FPREP_CUDA_CORE_INTERNAL_H */
