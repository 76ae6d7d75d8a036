/*
 * backend_cuda.c: one GPU lane of frameprepd (see backend_cuda.h).
 *
 * The design is simple: submit() appends the job to a pending list under a
 * mutex and wakes the lane thread; it never blocks on the GPU. The lane
 * thread takes the oldest pending job as soon as a staging slot is free,
 * copies the payload into the slot's pinned input (skipped when the input
 * is already pinned), and enqueues three steps on three non-blocking
 * streams:
 *
 *   H2D stream:     memcpy pinned -> device input          record ev_h2d
 *   compute stream: wait ev_h2d; letterbox kernel           record ev_kern
 *   D2H stream:     wait ev_kern; memcpy -> pinned output   record ev_done
 *
 * so frame k+1's H2D runs while frame k's kernel and frame k-1's D2H do.
 * The slot then joins the in-flight FIFO. The completion thread waits on
 * the oldest slot's ev_done, copies the pinned output into the job, fills
 * the timings, frees the slot and calls done. A frame alone in the lane
 * (no other in flight, none pending) is not handed over: the lane thread
 * waits for its ev_done itself and completes it (cuda_lane_finish), so a
 * request at concurrency 1 crosses one backend thread, not two; a new job
 * hands it to the completion thread at once.
 *
 * Waiting is paced (cuda_pace_*): waking from a blocking wait adds tens of
 * microseconds to every reply, and polling all along costs a core a
 * thread. A frame's work takes a time the lane learns (from its enqueue
 * when it ran alone, from the previous completion when it queued behind
 * it), so the waiting thread sleeps until shortly before the frame is
 * expected, then polls its event for up to spin_ns, then sleeps on it (a
 * blocking-sync event). The lane thread waiting for a free slot sleeps
 * until the completion expected to free one. A submit wakes the lane
 * thread only when its pending list was empty, and a freed slot only when
 * jobs wait: the others find it awake or about to be.
 *
 * When the job's output is itself pinned (a registered shared-memory slot) the
 * D2H writes it directly and there is no copy out; the host copies that remain
 * are spread over a small copy pool (host_copy.h), since one thread's memcpy is
 * slower than PCIe. Staging buffers are allocated at open and grow only when a
 * larger frame arrives; a slot is reused only after its output was copied out,
 * so its pinned input (read by its H2D) is free by then too.
 *
 * JPEG frames are decoded before any of that, off the lane thread: the
 * lane gives each JPEG frame's slot to its decoders (decode_q), a small
 * pool of threads, and does nothing else with it until a decoder hands
 * the slot back (the decoded queue). Decoders take the slots of decode_q
 * by turns of their clients, not in arrival order (jpeg_turns.h: by uid,
 * then connection, each decode's time charged to its client: the CPU
 * decode's, or a share of the engine's call). With a JPEG engine
 * (nvjpeg_decode.h: nvJPEG's hardware backend, A100/H100/H200) a decoder takes
 * the frames queued with the same channel order, up to a batch
 * (FPREP_NVJPEG_BATCH, 32), checks their headers (a refusal is answered at
 * once) and queues those the engine takes in one batched decode on its own
 * stream, with its own nvJPEG states: the compressed bytes go to the GPU, the
 * engine writes each frame into its slot's device input, an event (ev_dec) is
 * recorded after it, and the letterbox kernel, ordered after that event,
 * reads the frame there as one in device memory (no H2D of pixels, no
 * host round trip). nvJPEG runs one batched call at a time and only a
 * batch spreads over the engine's cores, so a decoder calls at once when
 * the engine is idle (a lone frame never waits) and otherwise gathers:
 * until the batch in the engine is decoded or its own is full, it takes
 * the frames as they come and checks their headers
 * (cuda_decoder_gathers), so the frames that come during one batch make
 * the next and its host work overlaps the engine's. What the
 * engine does not take (progressive, arithmetic, several scans, 4:1:1,
 * RGB or CMYK colour, a truncated file: fprep__jpeg_sequential) and a
 * batch it fails are decoded by the same decoder with libjpeg-turbo into
 * the slot's pinned input, and go back to the lane as frames with nothing
 * left to copy into the slot; optional CPU helpers
 * (FPREP_JPEG_CPU_HELPERS) do the same with frames of a long queue while
 * the engine is busy. Without an engine every JPEG frame goes that way,
 * a frame a decoder. The slots past the first raw_slots are kept for JPEG
 * frames (cuda_jpeg_plan: a batch per engine decoder and half a batch
 * for the frames past the engine, two per CPU decoder; their buffers
 * made when first used, an engine's frame with device memory only), so
 * frames in decode never hold up raw frames.
 * Where the time goes (queue, header checks, gather, the engine's call,
 * libjpeg-turbo, the hand-back, the lane after it) is counted: INFO
 * "jpeg_timing", "jpeg_timing_lone" for frames decoded with nothing else
 * in the lane (what a request at concurrency 1 pays), "jpeg_timing_max"
 * for the longest single wait of each stage (where a tail comes from),
 * and lines at close. With the lane polling (spin_ns), one idle decoder at a
 * time polls for the next JPEG frame before it sleeps, as the lane does for its
 * jobs.
 *
 * CUDA regions (a client's device memory, opened from its IPC handle on
 * this lane) replace a side of that chain: a frame in one is read by the
 * kernel where it lies (no H2D), a tensor for one is written there by the
 * kernel (no D2H). The events are recorded all the same, so the reply
 * still waits for ev_done: the work on the client's memory has completed
 * when the reply leaves.
 *
 * Every CUDA call goes through FPREP__CUDA. A failed request is answered
 * with FPREP_ECUDA naming the call and error; a sticky error (the context is
 * unusable) marks this and every later job fatal.
 */
#include "gpu/backend_cuda.h"

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
/* Bands of a frame whose copies and kernel overlap (cuda_band_plan). */
#define CUDA_BANDS 4
/* Initial staging sizes: a 1080p BGR8 frame in, 640x640x3 float32 out. */
#define CUDA_INITIAL_IN  (1920u * 1080u * 3u)
#define CUDA_INITIAL_OUT (640u * 640u * 3u * 4u)
#define CUDA_GROW_ALIGN  (1u << 20)
/* The longest poll of the trace's clock anchor (cuda_anchor). */
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

/* The kernels by rounding (enum fprep_rounding: float, exact), source
 * family (interleaved pixels, NV12, I420, YUYV) and dtype - 1. */
#define CUDA_FAMILIES  4
#define CUDA_ROUNDINGS 2
static const char *const cuda_kernel_names[CUDA_ROUNDINGS][CUDA_FAMILIES][3] = {
        {{"fprep_letterbox_f32", "fprep_letterbox_f16", "fprep_letterbox_u8"},
         {"fprep_letterbox_nv12_f32", "fprep_letterbox_nv12_f16",
          "fprep_letterbox_nv12_u8"},
         {"fprep_letterbox_i420_f32", "fprep_letterbox_i420_f16",
          "fprep_letterbox_i420_u8"},
         {"fprep_letterbox_yuyv_f32", "fprep_letterbox_yuyv_f16",
          "fprep_letterbox_yuyv_u8"}},
        {{"fprep_letterbox_exact_f32", "fprep_letterbox_exact_f16",
          "fprep_letterbox_exact_u8"},
         {"fprep_letterbox_nv12_exact_f32", "fprep_letterbox_nv12_exact_f16",
          "fprep_letterbox_nv12_exact_u8"},
         {"fprep_letterbox_i420_exact_f32", "fprep_letterbox_i420_exact_f16",
          "fprep_letterbox_i420_exact_u8"},
         {"fprep_letterbox_yuyv_exact_f32", "fprep_letterbox_yuyv_exact_f16",
          "fprep_letterbox_yuyv_exact_u8"}},
};
_Static_assert(FPREP_ROUNDING_OPENCV == CUDA_ROUNDINGS - 1, "roundings");

/* cuda_family: the kernel family of a source format. */
static int cuda_family(uint16_t format)
{
	switch (format) {
	case FPREP_PIX_NV12:
		return 1;
	case FPREP_PIX_I420:
		return 2;
	case FPREP_PIX_YUYV:
		return 3;
	}
	return 0;
}

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
	fprep__jpeg_turn turn; /* its JPEG's turn, taken from decode_q */
	uint32_t decode_us;    /* its JPEG's decode time, for the turns */
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
	atomic_ullong cpu_ns;       /* their time (cuda_cpu_decode) */
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
	uint64_t spin_ns;       /* cuda_spin_wait's poll; 0: sleep at once */
	cuda_pace pace;         /* paced waits (spin_ns > 0) */
	fprep__queue pending;   /* jobs submitted, not yet on a slot */
	fprep__queue flying;    /* slots enqueued, in completion order */
	fprep__queue admin;     /* region operations, not yet run */
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
	pthread_t *decoders; /* the decoders (cuda_decoder_main) */
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
	                               rest are CPU helpers (cuda_helper_take) */
	unsigned helpers;           /* CPU helpers planned (set at open) */
	unsigned jpeg_batch;        /* the most frames of an engine batch
	                               (FPREP_NVJPEG_BATCH) */
	unsigned engine_calls; /* decoders inside the engine's call (cb->mu) */
	unsigned calls_max;    /* decoders in the engine at once before another
	                          gathers (FPREP_NVJPEG_CALLS) */
	int gate_done;         /* a call counts until its decode is done (the
	                          default), or until it returns
	                          (FPREP_NVJPEG_GATE=call) */
	uint64_t gather_ns; /* FPREP_NVJPEG_GATHER_US: cuda_decoder_gathers */
	unsigned help_min;  /* frames waiting for the engine beyond which
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
		cuda_stat_max(&(cb)->jmax.f, v_);                              \
	} while (0)

/* cuda_stat_max raises *m to v if v is larger. Any thread. */
static inline void cuda_stat_max(atomic_ullong *m, unsigned long long v)
{
	unsigned long long cur = atomic_load_explicit(m, memory_order_relaxed);

	while (cur < v &&
	       !atomic_compare_exchange_weak_explicit(
	               m, &cur, v, memory_order_relaxed, memory_order_relaxed))
		;
}

static atomic_ulong cuda_allocs;

unsigned long fprep__cuda_alloc_count(void)
{
	return atomic_load(&cuda_allocs);
}

static uint64_t cuda_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int fprep__cuda_device_count(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		fprep__log(FPREP_LOG_DEBUG, "cudaGetDeviceCount: %s",
		           cudaGetErrorName(e));
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

/* cuda_sticky tells whether e left the context unusable: the listed
 * launch faults always do; otherwise the error persists after the last
 * error was read. */
static int cuda_sticky(int code)
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

/* cuda_fail records an error reply in job. */
static void cuda_fail(fprep__job *job, int status, int fatal, const char *text)
{
	job->status = status;
	job->fatal = fatal;
	snprintf(job->message, sizeof job->message, "%s", text);
}

/* cuda_malloc_host allocates n pinned bytes at *p; with m, mapped for the
 * device too, *m receiving the device's address of them. */
static int cuda_malloc_host(fprep__gpu_status *st, uint8_t **p, uint8_t **m,
                            size_t n)
{
	unsigned flags = m != NULL ? cudaHostAllocMapped | cudaHostAllocPortable
	                           : cudaHostAllocDefault;

	if (FPREP__CUDA(st, cudaHostAlloc((void **)p, n, flags)))
		return -1;
	atomic_fetch_add(&cuda_allocs, 1);
	if (m != NULL &&
	    FPREP__CUDA(st, cudaHostGetDevicePointer((void **)m, *p, 0)))
		return -1;
	return 0;
}

static int cuda_malloc_dev(fprep__gpu_status *st, uint8_t **p, size_t n)
{
	if (FPREP__CUDA(st, cudaMalloc((void **)p, n)))
		return -1;
	atomic_fetch_add(&cuda_allocs, 1);
	return 0;
}

static void cuda_free_pair(uint8_t **h, uint8_t **d, size_t *cap)
{
	if (*h != NULL)
		(void)FPREP__CUDA(NULL, cudaFreeHost(*h));
	if (*d != NULL)
		(void)FPREP__CUDA(NULL, cudaFree(*d));
	*h = *d = NULL;
	*cap = 0;
}

/* cuda_slot_reserve makes the slot's input hold in_size bytes and its
 * output out_size bytes, reallocating only what is too small (or an
 * input that cuda_slot_reserve_dev left without its pinned half). */
static int cuda_slot_reserve(cuda_slot *s, size_t in_size, size_t out_size,
                             int mapped, fprep__gpu_status *st)
{
	if (in_size > s->in_cap || (in_size > 0 && s->h_in == NULL)) {
		size_t n = (in_size + CUDA_GROW_ALIGN - 1) &
		           ~(size_t)(CUDA_GROW_ALIGN - 1);
		cuda_free_pair(&s->h_in, &s->d_in, &s->in_cap);
		s->m_in = NULL;
		if (cuda_malloc_host(st, &s->h_in, mapped ? &s->m_in : NULL,
		                     n) ||
		    cuda_malloc_dev(st, &s->d_in, n))
			return -1;
		s->in_cap = n;
	}
	if (out_size > s->out_cap) {
		size_t n = (out_size + CUDA_GROW_ALIGN - 1) &
		           ~(size_t)(CUDA_GROW_ALIGN - 1);
		cuda_free_pair(&s->h_out, &s->d_out, &s->out_cap);
		s->m_out = NULL;
		if (cuda_malloc_host(st, &s->h_out, mapped ? &s->m_out : NULL,
		                     n) ||
		    cuda_malloc_dev(st, &s->d_out, n))
			return -1;
		s->out_cap = n;
	}
	return 0;
}

/* cuda_slot_reserve_dev makes the slot's device input hold in_size bytes
 * for a frame the JPEG engine writes there; where it must grow, only the
 * device half is made (no pinned input, which such a frame never uses:
 * cuda_slot_reserve makes both again when one is needed). */
static int cuda_slot_reserve_dev(cuda_slot *s, size_t in_size,
                                 fprep__gpu_status *st)
{
	size_t n = (in_size + CUDA_GROW_ALIGN - 1) &
	           ~(size_t)(CUDA_GROW_ALIGN - 1);

	if (in_size <= s->in_cap)
		return 0;
	cuda_free_pair(&s->h_in, &s->d_in, &s->in_cap);
	s->m_in = NULL;
	if (cuda_malloc_dev(st, &s->d_in, n))
		return -1;
	s->in_cap = n;
	return 0;
}

/* cuda_slot_init creates s's events and, with reserve, its staging
 * buffers at their initial sizes (else they grow when first used). */
static int cuda_slot_init(cuda_slot *s, int mapped, int reserve,
                          fprep__gpu_status *st)
{
	if (FPREP__CUDA(st, cudaEventCreateWithFlags(&s->ev_h2d,
	                                             cudaEventDisableTiming)) ||
	    FPREP__CUDA(st, cudaEventCreateWithFlags(&s->ev_kern,
	                                             cudaEventDisableTiming)) ||
	    FPREP__CUDA(st, cudaEventCreateWithFlags(&s->ev_dec,
	                                             cudaEventDisableTiming)) ||
	    FPREP__CUDA(st,
	                cudaEventCreateWithFlags(
	                        &s->ev_done, cudaEventBlockingSync |
	                                             cudaEventDisableTiming)))
		return -1;
	for (int i = 0; i < CUDA_NT; i++)
		if (FPREP__CUDA(st, cudaEventCreateWithFlags(&s->t[i],
		                                             cudaEventDefault)))
			return -1;
	for (int i = 0; i < CUDA_BANDS; i++)
		if (FPREP__CUDA(st, cudaEventCreateWithFlags(
		                            &s->ev_band_h2d[i],
		                            cudaEventDisableTiming)) ||
		    FPREP__CUDA(st, cudaEventCreateWithFlags(
		                            &s->ev_band_kern[i],
		                            cudaEventDisableTiming)))
			return -1;
	if (!reserve)
		return 0;
	return cuda_slot_reserve(s, CUDA_INITIAL_IN, CUDA_INITIAL_OUT, mapped,
	                         st);
}

static void cuda_slot_fini(cuda_slot *s)
{
	cudaEvent_t *evs[] = {&s->ev_h2d, &s->ev_kern, &s->ev_done, &s->ev_dec};
	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (*evs[i] != NULL)
			(void)FPREP__CUDA(NULL, cudaEventDestroy(*evs[i]));
	for (int i = 0; i < CUDA_NT; i++)
		if (s->t[i] != NULL)
			(void)FPREP__CUDA(NULL, cudaEventDestroy(s->t[i]));
	for (int i = 0; i < CUDA_BANDS; i++) {
		if (s->ev_band_h2d[i] != NULL)
			(void)FPREP__CUDA(NULL,
			                  cudaEventDestroy(s->ev_band_h2d[i]));
		if (s->ev_band_kern[i] != NULL)
			(void)FPREP__CUDA(NULL,
			                  cudaEventDestroy(s->ev_band_kern[i]));
	}
	cuda_free_pair(&s->h_in, &s->d_in, &s->in_cap);
	cuda_free_pair(&s->h_out, &s->d_out, &s->out_cap);
	fprep__jpeg_copy_free(&s->jpeg_copy);
}

/* cuda_mapped_ptr returns the device's address of p, which lies in region
 * r, through r's mapping; NULL when r is not mapped. */
static uint8_t *cuda_mapped_ptr(const fprep__memreg *r, const uint8_t *p)
{
	if (r == NULL || r->mapped == NULL)
		return NULL;
	return r->mapped + (p - r->base);
}

/* cuda_use_mapped tells whether a job goes mapped: always in MAPPED mode;
 * in AUTO mode on an integrated GPU, or when no other slot is busy. */
static int cuda_use_mapped(const cuda_backend *cb, unsigned busy)
{
	if (cb->transfer == FPREP__CUDA_MAPPED)
		return 1;
	return cb->transfer == FPREP__CUDA_AUTO &&
	       (cb->integrated || busy == 0);
}

/* cuda_band: one band of a frame processed in bands: tensor rows
 * [r0, r1), and the frame's rows [y0, y1) that its H2D chunk copies (the
 * last band's up to the frame's end). */
typedef struct cuda_band {
	unsigned r0, r1;
	uint32_t y0, y1;
} cuda_band;

/* cuda_rows_needed returns how many of the frame's first rows tensor rows
 * [0, y) read: the neighbours of the last image row among them (the
 * INTER_LINEAR map of kernels/letterbox.cu), plus one row of margin for
 * the kernel's float rounding. */
static unsigned cuda_rows_needed(const fprep__job *job, unsigned y)
{
	unsigned top = job->xf.pad_y, rh = job->xf.resized_h;
	unsigned h = job->req.src_height;

	if (y <= top || rh == 0)
		return 0;
	unsigned last = (y < top + rh ? y : top + rh) - 1 - top;
	double f = ((double)last + 0.5) * ((double)h / (double)rh) - 0.5;
	uint64_t need = (f > 0 ? (uint64_t)f : 0) + 3;

	return need < h ? (unsigned)need : h;
}

/* cuda_band_plan splits job's tensor into up to CUDA_BANDS bands of whole
 * blocks of rows, each cut where the rows it reads reach the next equal
 * share of the frame, so the H2D chunks are about equal. Only for
 * interleaved sources (one plane of rows). Returns the number of bands
 * (below 2: not worth banding). */
static unsigned cuda_band_plan(const fprep__job *job, cuda_band *b)
{
	const fprep_request *rq = &job->req;
	unsigned h = rq->src_height, out_h = rq->out_height;
	unsigned n = 0, r0 = 0, prev = 0;

	if (h < 64 || out_h < CUDA_BANDS * CUDA_BLOCK_Y)
		return 0;
	for (unsigned y = CUDA_BLOCK_Y; y < out_h && n < CUDA_BANDS - 1;
	     y += CUDA_BLOCK_Y) {
		unsigned need = cuda_rows_needed(job, y);

		if ((uint64_t)need * CUDA_BANDS < (uint64_t)(n + 1) * h)
			continue;
		b[n] = (cuda_band){.r0 = r0, .r1 = y, .y0 = prev, .y1 = need};
		prev = need;
		r0 = y;
		n++;
	}
	b[n] = (cuda_band){.r0 = r0, .r1 = out_h, .y0 = prev, .y1 = h};
	return n + 1;
}

/* cuda_plane: a plane of a frame as the lane copies it: rows rows of
 * stride bytes from byte base of the frame, which ends at byte size (its
 * last row may be short); with plan, only the rows the plan lists. */
typedef struct cuda_plane {
	uint64_t base, stride, size;
	uint32_t rows;
	const fprep__row_plan *plan;
} cuda_plane;

/* cuda_plan_get returns p, rebuilt when it is not the plan of rows
 * (shift) of a frame h rows high resized to rh, when it is selective; else
 * NULL. */
static const fprep__row_plan *cuda_plan_get(fprep__row_plan *p, uint32_t h,
                                            uint32_t rh, unsigned shift)
{
	if (p->src_h != h || p->resized_h != rh || p->shift != shift)
		fprep__row_plan_build(p, h, rh, shift);
	return p->ngroups > 0 ? p : NULL;
}

/* cuda_planes fills pl with the planes of job's frame (one for an
 * interleaved or YUYV frame; luma and chroma for NV12, luma, U and V for
 * I420) and the plans of the rows its kernel reads (row_plan.h), when it
 * reads few enough of them to copy alone. Returns how many planes, or 0:
 * copy the frame whole. The lane keeps the last geometry's plans: frames
 * of one size compute them once. Lane thread. */
static unsigned cuda_planes(cuda_backend *cb, const fprep__job *job,
                            cuda_plane *pl)
{
	const fprep_request *rq = &job->req;
	uint32_t h = rq->src_height, rh = job->xf.resized_h, ch = (h + 1) / 2;
	int fam = cuda_family(rq->src_format), planar = fam == 1 || fam == 2;
	const fprep__row_plan *luma, *chroma = NULL;

	if (cb->all_rows || h == 0 || rh == 0)
		return 0;
	luma = cuda_plan_get(&cb->plan[0], h, rh, 0);
	if (planar)
		chroma = cuda_plan_get(&cb->plan[1], h, rh, 1);
	if (luma == NULL && chroma == NULL)
		return 0;
	pl[0] = (cuda_plane){0, rq->src_stride, rq->input_size, h, luma};
	if (!planar)
		return 1;
	pl[1] = (cuda_plane){rq->u_offset, rq->uv_stride, rq->input_size, ch,
	                     chroma};
	if (fam == 1)
		return 2;
	pl[2] = (cuda_plane){rq->v_offset, rq->uv_stride, rq->input_size, ch,
	                     chroma};
	return 3;
}

/* cuda_plane_span gives the bytes [*lo, *hi) of rows [a, b) of plane pl,
 * cut at the frame's end. */
static void cuda_plane_span(const cuda_plane *pl, uint64_t a, uint64_t b,
                            uint64_t *lo, uint64_t *hi)
{
	*lo = pl->base + a * pl->stride;
	*hi = pl->base + b * pl->stride;
	if (*hi > pl->size)
		*hi = pl->size;
}

/* cuda_plane_copies lists in c the copies of rows [y0, y1) of plane pl:
 * those of its plan, or one of the whole range. Returns how many. */
static unsigned cuda_plane_copies(const cuda_plane *pl, uint32_t y0,
                                  uint32_t y1, fprep__row_copy *c)
{
	if (pl->plan != NULL)
		return fprep__row_plan_copies(pl->plan, y0, y1, c);
	c[0] = (fprep__row_copy){y0, y1 > y0 ? y1 - y0 : 0, 0, 1};
	return 1;
}

/* cuda_h2d_rows copies the rows [y0, y1) of plane pl of the frame at src
 * to the same offsets at dev, on the H2D stream: all of them, or with the
 * plane's plan only those it lists (the kernel never reads the others), a
 * 2D copy for each group of equally spaced runs (fprep__row_plan_copies).
 * Lane thread. Returns 0, or -1 with *st set. */
static int cuda_h2d_rows(cuda_backend *cb, uint8_t *dev, const uint8_t *src,
                         const cuda_plane *pl, uint32_t y0, uint32_t y1,
                         fprep__gpu_status *st)
{
	fprep__row_copy c[FPREP__ROW_COPIES_MAX];
	unsigned n = cuda_plane_copies(pl, y0, y1, c);
	uint64_t lo, hi;

	for (unsigned i = 0; i < n; i++) {
		uint64_t pitch = c[i].pitch * pl->stride;

		cuda_plane_span(pl, c[i].first, c[i].first + c[i].len, &lo,
		                &hi);
		if (lo >= hi)
			continue;
		if (c[i].count == 1
		            ? FPREP__CUDA(st,
		                          cudaMemcpyAsync(
		                                  dev + lo, src + lo, hi - lo,
		                                  cudaMemcpyHostToDevice,
		                                  cb->s_h2d))
		            : FPREP__CUDA(st,
		                          cudaMemcpy2DAsync(
		                                  dev + lo, pitch, src + lo,
		                                  pitch, hi - lo, c[i].count,
		                                  cudaMemcpyHostToDevice,
		                                  cb->s_h2d)))
			return -1;
	}
	return 0;
}

/* cuda_h2d_frame copies the frame at src (size bytes) to dev on the H2D
 * stream: whole (np 0), or the rows of its np planes that their plans
 * list. Lane thread. Returns 0, or -1 with *st set. */
static int cuda_h2d_frame(cuda_backend *cb, uint8_t *dev, const uint8_t *src,
                          uint64_t size, const cuda_plane *pl, unsigned np,
                          fprep__gpu_status *st)
{
	if (np == 0)
		return FPREP__CUDA(st, cudaMemcpyAsync(dev, src, size,
		                                       cudaMemcpyHostToDevice,
		                                       cb->s_h2d));
	for (unsigned i = 0; i < np; i++)
		if (cuda_h2d_rows(cb, dev, src, &pl[i], 0, pl[i].rows, st))
			return -1;
	return 0;
}

/* cuda_host_rows copies the rows of plane pl that its plan lists (all of
 * them without one) from the frame at src into the slot's pinned buffer
 * dst, at their offsets, for its H2D. Lane thread. */
static void cuda_host_rows(cuda_backend *cb, uint8_t *dst, const uint8_t *src,
                           const cuda_plane *pl)
{
	fprep__row_copy c[FPREP__ROW_COPIES_MAX];
	unsigned n = cuda_plane_copies(pl, 0, pl->rows, c);
	uint64_t lo, hi;

	for (unsigned i = 0; i < n; i++) {
		cuda_plane_span(pl, c[i].first, c[i].first + c[i].len, &lo,
		                &hi);
		if (lo >= hi)
			continue;
		if (c[i].count > 1)
			fprep__copy_rows(cb->copier, dst + lo, src + lo,
			                 hi - lo, c[i].pitch * pl->stride,
			                 c[i].count);
		else
			fprep__copy(cb->copier, dst + lo, src + lo, hi - lo);
	}
}

/* cuda_enqueue_banded puts job's work on the streams in nb bands: the
 * frame's H2D in nb chunks, each band's kernel launch (a->row0) after its
 * chunk, each band's D2H after its kernel; so the copies in both
 * directions and the kernel overlap within one frame, and the frame takes
 * about its longer copy rather than the sum of the three. Rows of a band
 * are contiguous in NHWC; in NCHW a band is one 2D copy of C plane
 * pieces. Returns 0, or -1 with *st set. */
static int cuda_enqueue_banded(cuda_backend *cb, cuda_slot *s,
                               const fprep__job *job, cuda_lb_args *a,
                               const uint8_t *src, uint8_t *dst,
                               const void *kern, const cuda_band *band,
                               unsigned nb, const cuda_plane *pl,
                               fprep__gpu_status *st)
{
	const fprep_request *rq = &job->req;
	int nchw = rq->layout == FPREP_LAYOUT_NCHW;
	size_t es = rq->dtype == FPREP_DTYPE_F32   ? 4
	            : rq->dtype == FPREP_DTYPE_F16 ? 2
	                                           : 1;
	size_t c = nchw ? job->shape[1] : job->shape[3];
	size_t row = nchw ? rq->out_width * es : rq->out_width * c * es;
	size_t plane = rq->out_height * row;
	dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
	void *args[] = {a};

	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_H2D0], cb->s_h2d)))
		return -1;
	for (unsigned k = 0; k < nb; k++) {
		if (cuda_h2d_rows(cb, s->d_in, src, pl, band[k].y0, band[k].y1,
		                  st) ||
		    FPREP__CUDA(st,
		                cudaEventRecord(s->ev_band_h2d[k], cb->s_h2d)))
			return -1;
	}
	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_H2D1], cb->s_h2d)))
		return -1;
	for (unsigned k = 0; k < nb; k++) {
		dim3 grid = {(rq->out_width + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
		             (band[k].r1 - band[k].r0 + CUDA_BLOCK_Y - 1) /
		                     CUDA_BLOCK_Y,
		             1};

		a->row0 = band[k].r0;
		if (FPREP__CUDA(st,
		                cudaStreamWaitEvent(cb->s_comp,
		                                    s->ev_band_h2d[k], 0)) ||
		    (k == 0 && FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_K0],
		                                               cb->s_comp))) ||
		    FPREP__CUDA(st, cudaLaunchKernel(kern, grid, block, args, 0,
		                                     cb->s_comp)) ||
		    FPREP__CUDA(st, cudaEventRecord(s->ev_band_kern[k],
		                                    cb->s_comp)))
			return -1;
	}
	a->row0 = 0;
	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_K1], cb->s_comp)))
		return -1;
	for (unsigned k = 0; k < nb; k++) {
		size_t off = band[k].r0 * row;
		size_t len = (size_t)(band[k].r1 - band[k].r0) * row;

		if (FPREP__CUDA(st,
		                cudaStreamWaitEvent(cb->s_d2h,
		                                    s->ev_band_kern[k], 0)) ||
		    (k == 0 &&
		     FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_D2H0],
		                                     cb->s_d2h))))
			return -1;
		if (nchw ? FPREP__CUDA(st, cudaMemcpy2DAsync(
		                                   dst + off, plane,
		                                   s->d_out + off, plane, len,
		                                   c, cudaMemcpyDeviceToHost,
		                                   cb->s_d2h))
		         : FPREP__CUDA(st, cudaMemcpyAsync(
		                                   dst + off, s->d_out + off,
		                                   len, cudaMemcpyDeviceToHost,
		                                   cb->s_d2h)))
			return -1;
	}
	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_D2H1], cb->s_d2h)) ||
	    FPREP__CUDA(st, cudaEventRecord(s->ev_done, cb->s_d2h)))
		return -1;
	return 0;
}

/* cuda_enqueue puts job's H2D, kernel and D2H on the streams, using slot s;
 * with mapped, the kernel reads and writes pinned memory that is mapped
 * for the device in place of the copies; with banded (a staged lane with
 * no other job in flight), an interleaved frame goes in bands whose copies
 * and kernels overlap (cuda_enqueue_banded). Runs on the lane thread.
 * Returns 0, or an error with job's reply set. */
/* cuda_roi_rows finds the source rows [*y0, *y1) that the elements of a
 * ROIS job read (fprep__roi_plan's boxes clipped to the frame; every row
 * when one is affine); the planned elements are in e. *y0 == *y1: none. */
static void cuda_roi_rows(const fprep_request *rq,
                          const struct fprep_roi_elem *e, uint32_t n,
                          uint32_t *y0, uint32_t *y1)
{
	int64_t lo = rq->src_height, hi = 0;

	for (uint32_t k = 0; k < n; k++) {
		int64_t a = e[k].y0, b = (int64_t)e[k].y0 + e[k].last_y + 1;

		if (e[k].type == ROI_TYPE_AFFINE) {
			lo = 0, hi = rq->src_height;
			break;
		}
		a = a < 0 ? 0 : a;
		b = b > (int64_t)rq->src_height ? rq->src_height : b;
		if (a < b) {
			lo = a < lo ? a : lo;
			hi = b > hi ? b : hi;
		}
	}
	*y0 = lo < hi ? (uint32_t)lo : 0;
	*y1 = lo < hi ? (uint32_t)hi : 0;
}

/* cuda_enqueue_elements enqueues a ROIS or BATCH job on slot s, staged:
 * the elements planned on the host (fprep__roi_plan) into the tail of the
 * slot's pinned input, the source bytes they read (a ROIS: the rows its
 * boxes cover; a BATCH: its frames' span) and that table copied to the
 * device in one H2D step, one launch of the ROI kernel over (x, y,
 * element), one D2H (none for a CUDA region's input or output, which the
 * kernel reads or writes in place). */
static int cuda_enqueue_elements(cuda_backend *cb, cuda_slot *s,
                                 fprep__job *job)
{
	const fprep_request *rq = &job->req;
	fprep__gpu_status st = {0};
	uint32_t n = rq->elements, bpp = fprep_pixel_bytes(rq->src_format);
	uint64_t out_bytes = job->output_size, span = rq->input_span;
	uint64_t at = 0, len = span; /* the source bytes copied */
	int in_dev = job->input_device, out_dev = job->output_device;
	/* The element table follows the frame, 256-byte aligned. */
	uint64_t tab = in_dev ? 0 : (span + 255) & ~(uint64_t)255;
	size_t tab_bytes = (size_t)n * sizeof(struct fprep_roi_elem);
	struct fprep_roi_elem *e;
	struct fprep_roi_args a;
	fprep_element el;
	const uint8_t *src;
	uint8_t *dst;

	if (rq->dtype < FPREP_DTYPE_F32 || rq->dtype > FPREP_DTYPE_U8 ||
	    n == 0) {
		cuda_fail(job, FPREP_EINVAL, 0, "invalid tensor request");
		return FPREP_EINVAL;
	}
	if (cuda_slot_reserve(s, tab + tab_bytes, out_dev ? 0 : out_bytes,
	                      cb->transfer != FPREP__CUDA_STAGED, &st)) {
		cuda_fail(job,
		          st.code == cudaErrorMemoryAllocation ? FPREP_ENOMEM
		                                               : FPREP_ECUDA,
		          cuda_sticky(st.code), st.text);
		return job->status;
	}
	e = (struct fprep_roi_elem *)(void *)(s->h_in + tab);
	for (uint32_t k = 0; k < n; k++) {
		fprep_element_get(job->table, k, &el);
		fprep__roi_plan(rq, &el, &e[k]);
	}
	if (rq->kind == FPREP_KIND_ROIS) {
		uint32_t y0, y1;

		cuda_roi_rows(rq, e, n, &y0, &y1);
		at = (uint64_t)y0 * rq->src_stride;
		len = y1 > y0 ? (uint64_t)(y1 - y0 - 1) * rq->src_stride +
		                        (uint64_t)rq->src_width * bpp
		              : 0;
	}
	src = job->input;
	if (!in_dev && !job->input_pinned && len > 0) {
		fprep__copy(cb->copier, s->h_in + at, job->input + at, len);
		src = s->h_in;
	}
	s->out_direct = out_dev || job->output_pinned;
	dst = s->out_direct ? job->output : s->h_out;

	fprep__roi_args(rq, &a);
	a.src = in_dev ? job->input : s->d_in;
	a.dst = out_dev ? (void *)job->output : (void *)s->d_out;
	a.elems = (const struct fprep_roi_elem *)(const void *)(s->d_in + tab);
	void *args[] = {&a};
	dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
	dim3 grid = {(rq->out_width + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
	             (rq->out_height + CUDA_BLOCK_Y - 1) / CUDA_BLOCK_Y, n};
	const void *kern = (const void *)cb->roi_kernel[rq->dtype - 1];

	if (FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_H2D0], cb->s_h2d)) ||
	    (!in_dev && len > 0 &&
	     FPREP__CUDA(&st,
	                 cudaMemcpyAsync(s->d_in + at, src + at, len,
	                                 cudaMemcpyHostToDevice, cb->s_h2d))) ||
	    FPREP__CUDA(&st,
	                cudaMemcpyAsync(s->d_in + tab, s->h_in + tab, tab_bytes,
	                                cudaMemcpyHostToDevice, cb->s_h2d)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_H2D1], cb->s_h2d)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->ev_h2d, cb->s_h2d)) ||
	    FPREP__CUDA(&st, cudaStreamWaitEvent(cb->s_comp, s->ev_h2d, 0)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_K0], cb->s_comp)) ||
	    FPREP__CUDA(&st, cudaLaunchKernel(kern, grid, block, args, 0,
	                                      cb->s_comp)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_K1], cb->s_comp)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->ev_kern, cb->s_comp)) ||
	    FPREP__CUDA(&st, cudaStreamWaitEvent(cb->s_d2h, s->ev_kern, 0)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_D2H0], cb->s_d2h)) ||
	    (!out_dev &&
	     FPREP__CUDA(&st,
	                 cudaMemcpyAsync(dst, s->d_out, out_bytes,
	                                 cudaMemcpyDeviceToHost, cb->s_d2h))) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_D2H1], cb->s_d2h)) ||
	    FPREP__CUDA(&st, cudaEventRecord(s->ev_done, cb->s_d2h))) {
		int fatal = cuda_sticky(st.code);

		(void)cudaStreamSynchronize(cb->s_h2d);
		(void)cudaStreamSynchronize(cb->s_comp);
		(void)cudaStreamSynchronize(cb->s_d2h);
		cuda_fail(job, FPREP_ECUDA, fatal, st.text);
		return FPREP_ECUDA;
	}
	return 0;
}

static int cuda_enqueue(cuda_backend *cb, cuda_slot *s, fprep__job *job,
                        int mapped, int banded)
{
	const fprep_request *rq = &job->req;
	fprep__gpu_status st = {0};
	uint64_t out_bytes = job->output_size; /* planned by the loop */
	const uint8_t *src;
	uint8_t *dst;
	cuda_lb_args a;
	fprep__yuv_coefs k;
	int yuv = fprep__yuv_is_yuv(rq->src_format);

	if (job->table != NULL) /* ROIS, BATCH: staged, one launch */
		return cuda_enqueue_elements(cb, s, job);
	if (yuv && fprep__yuv_coefs_get(rq->yuv_matrix, rq->yuv_range, &k)) {
		cuda_fail(job, FPREP_EINVAL, 0, "invalid YUV request");
		return FPREP_EINVAL;
	}
	if (rq->dtype < FPREP_DTYPE_F32 || rq->dtype > FPREP_DTYPE_U8 ||
	    rq->rounding >= CUDA_ROUNDINGS) {
		cuda_fail(job, FPREP_EINVAL, 0, "invalid tensor request");
		return FPREP_EINVAL;
	}
	/* A frame that a decoder left in the slot goes on from there: on the
	 * device (nvJPEG) as if in a CUDA region; in the pinned input with
	 * nothing to copy into it. */
	int in_dev = job->input_device || s->d_frame != NULL;
	int out_dev = job->output_device;
	/* A JPEG source (input inline or in a host region: protocol.c) that
	 * reaches here (a lane without decoder threads) is decoded on this
	 * thread, after its header is checked, straight into the staging
	 * slot, and goes on as that raw frame. */
	int jpeg = rq->src_format == FPREP_PIX_JPEG && !in_dev;
	fprep_request raw;

	if (jpeg && (job->status = fprep__jpeg_open(&cb->jpeg, job, NULL, &raw,
	                                            job->message,
	                                            sizeof job->message)) != 0)
		return job->status;
	if (cuda_slot_reserve(s,
	                      in_dev ? 0
	                      : jpeg ? raw.input_size
	                             : rq->input_size,
	                      out_dev ? 0 : out_bytes,
	                      cb->transfer != FPREP__CUDA_STAGED, &st)) {
		int fatal = cuda_sticky(st.code);
		cuda_fail(job,
		          st.code == cudaErrorMemoryAllocation ? FPREP_ENOMEM
		                                               : FPREP_ECUDA,
		          fatal, st.text);
		return job->status;
	}
	if (jpeg) {
		job->status =
		        fprep__jpeg_decode(&cb->jpeg, job, &raw, s->h_in,
		                           job->message, sizeof job->message);
		if (job->status != 0)
			return job->status;
		job->input_pinned = 0; /* the frame is in the slot, staged */
	}
	s->out_direct = out_dev || job->output_pinned;
	dst = s->out_direct ? job->output : s->h_out;
	src = job->input;
	/* The rows the kernel reads, when a fraction: all that is copied of
	 * a frame, into the staging slot and to the device. */
	cuda_plane planes[3];
	unsigned np = in_dev ? 0 : cuda_planes(cb, job, planes);
	if (!job->input_pinned && !in_dev && !jpeg && !s->staged) {
		for (unsigned i = 0; i < np; i++)
			cuda_host_rows(cb, s->h_in, job->input, &planes[i]);
		if (np == 0)
			fprep__copy(cb->copier, s->h_in, job->input,
			            rq->input_size);
		src = s->h_in;
	}
	if (jpeg || s->staged)
		src = s->h_in;
	/* Mapped: the kernel's own pointer to the frame (a region's mapping,
	 * or the slot's mapped input) and to where the tensor goes (a
	 * region's, or the slot's mapped output, copied out as staged). */
	const uint8_t *m_src = NULL;
	uint8_t *m_dst = NULL;
	if (mapped && !in_dev)
		m_src = job->input_pinned
		                ? cuda_mapped_ptr(job->in_region, job->input)
		                : s->m_in;
	if (mapped && !out_dev)
		m_dst = job->output_pinned
		                ? cuda_mapped_ptr(job->out_region, job->output)
		                : s->m_out;

	memset(&a, 0, sizeof a);
	a.src = s->d_frame != NULL ? s->d_frame
	        : in_dev           ? job->input
	        : m_src != NULL    ? m_src
	                           : s->d_in;
	a.dst = out_dev         ? (void *)job->output
	        : m_dst != NULL ? (void *)m_dst
	                        : (void *)s->d_out;
	if (m_dst != NULL && !job->output_pinned)
		s->out_direct = 0; /* the tensor is in h_out: copied out */
	a.src_w = rq->src_width;
	a.src_h = rq->src_height;
	a.src_stride = rq->src_stride;
	a.src_format = rq->src_format;
	a.out_w = rq->out_width;
	a.out_h = rq->out_height;
	a.resized_w = job->xf.resized_w;
	a.resized_h = job->xf.resized_h;
	a.pad_x = job->xf.pad_x;
	a.pad_y = job->xf.pad_y;
	a.channel_order = rq->channel_order;
	a.layout = rq->layout;
	a.pad_value = rq->pad_value;
	a.scale = rq->scale;
	memcpy(a.mean, rq->mean, sizeof a.mean);
	memcpy(a.std, rq->std, sizeof a.std);
	if (yuv) {
		memcpy(a.yuv, &k, sizeof a.yuv);
		a.uv_stride = rq->uv_stride;
		a.u_offset = rq->u_offset;
		a.v_offset = rq->v_offset;
	}
	void *args[] = {&a};
	dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
	dim3 grid = {(rq->out_width + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
	             (rq->out_height + CUDA_BLOCK_Y - 1) / CUDA_BLOCK_Y, 1};
	int family = cuda_family(rq->src_format);
	const void *kern =
	        (const void *)cb->kernel[rq->rounding][family][rq->dtype - 1];

	cuda_band bands[CUDA_BANDS];
	unsigned nb = 0;
	int failed;

	/* A frame the engine writes (on a decoder's stream): the kernel
	 * runs once its decode has (ev_dec). */
	if (s->d_frame != NULL &&
	    FPREP__CUDA(&st, cudaStreamWaitEvent(cb->s_comp, s->ev_dec, 0))) {
		cuda_fail(job, FPREP_ECUDA, cuda_sticky(st.code), st.text);
		return FPREP_ECUDA;
	}
	if (m_src != NULL)
		np = 0; /* the kernel reads the frame in place */
	if (banded && !in_dev && !out_dev && m_src == NULL && m_dst == NULL &&
	    cuda_family(rq->src_format) == 0)
		nb = cuda_band_plan(job, bands);
	if (np == 0) /* the one plane of an interleaved frame, whole */
		planes[0] = (cuda_plane){0, rq->src_stride, rq->input_size,
		                         rq->src_height, NULL};
	if (nb > 1)
		failed = cuda_enqueue_banded(cb, s, job, &a, src, dst, kern,
		                             bands, nb, &planes[0], &st) != 0;
	else
		failed = FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_H2D0],
		                                          cb->s_h2d)) ||
		         (!in_dev && m_src == NULL &&
		          cuda_h2d_frame(cb, s->d_in, src, rq->input_size,
		                         planes, np, &st)) ||
		         FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_H2D1],
		                                          cb->s_h2d)) ||
		         FPREP__CUDA(&st,
		                     cudaEventRecord(s->ev_h2d, cb->s_h2d)) ||
		         FPREP__CUDA(&st, cudaStreamWaitEvent(cb->s_comp,
		                                              s->ev_h2d, 0)) ||
		         FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_K0],
		                                          cb->s_comp)) ||
		         FPREP__CUDA(&st,
		                     cudaLaunchKernel(kern, grid, block, args,
		                                      0, cb->s_comp)) ||
		         FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_K1],
		                                          cb->s_comp)) ||
		         FPREP__CUDA(&st,
		                     cudaEventRecord(s->ev_kern, cb->s_comp)) ||
		         FPREP__CUDA(&st, cudaStreamWaitEvent(cb->s_d2h,
		                                              s->ev_kern, 0)) ||
		         FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_D2H0],
		                                          cb->s_d2h)) ||
		         (!out_dev && m_dst == NULL &&
		          FPREP__CUDA(&st,
		                      cudaMemcpyAsync(dst, s->d_out, out_bytes,
		                                      cudaMemcpyDeviceToHost,
		                                      cb->s_d2h))) ||
		         FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_D2H1],
		                                          cb->s_d2h)) ||
		         FPREP__CUDA(&st,
		                     cudaEventRecord(s->ev_done, cb->s_d2h));
	if (failed) {
		/* Part of the work may be queued: let it finish before the
		 * slot is reused. */
		int fatal = cuda_sticky(st.code);
		(void)cudaStreamSynchronize(cb->s_h2d);
		(void)cudaStreamSynchronize(cb->s_comp);
		(void)cudaStreamSynchronize(cb->s_d2h);
		cuda_fail(job, FPREP_ECUDA, fatal, st.text);
		return FPREP_ECUDA;
	}
	return 0;
}

/* cuda_kick signals cv, with the lane's mu held, and counts it in *kicks for
 * the thread that polls instead of sleeping (cuda_spin_wait). */
static void cuda_kick(pthread_cond_t *cv, atomic_uint *kicks)
{
	atomic_fetch_add_explicit(kicks, 1, memory_order_release);
	pthread_cond_signal(cv);
}

static void cuda_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
                           uint64_t ns);

/* cuda_pace_load, cuda_pace_store: a pacing estimate (relaxed). */
static uint64_t cuda_pace_load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static void cuda_pace_store(_Atomic uint64_t *v, uint64_t x)
{
	atomic_store_explicit(v, x, memory_order_relaxed);
}

static void cuda_pace_count(atomic_ullong *c, unsigned long long n)
{
	if (n > 0)
		atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* cuda_pace_mean moves the running mean *m an eighth of the way to x, x
 * taken as at most twice the mean (an outlier, a thread descheduled, moves
 * it by an eighth at most); the first sample sets it. A mean is never 0
 * once set. */
static void cuda_pace_mean(_Atomic uint64_t *m, uint64_t x)
{
	uint64_t v = cuda_pace_load(m);

	if (v > 0 && x > 2 * v)
		x = 2 * v;
	v = v == 0 ? x : v - v / 8 + x / 8;
	cuda_pace_store(m, v > 0 ? v : 1);
}

/* cuda_pace_expect returns the host time s's completion is expected at (0:
 * unknown): lone_ns after its enqueue, or gap_ns after the previous
 * completion when s was enqueued before that was seen, whichever is
 * later; *gap tells whether gap_ns gave it. */
static uint64_t cuda_pace_expect(cuda_pace *p, const cuda_slot *s, int *gap)
{
	uint64_t lone = cuda_pace_load(&p->lone_ns);
	uint64_t g = cuda_pace_load(&p->gap_ns);
	uint64_t last = cuda_pace_load(&p->last_ns);
	uint64_t t = lone > 0 ? s->t_enq_ns + lone : 0;

	*gap = 0;
	if (g > 0 && last > s->t_enq_ns && last + g > t) {
		t = last + g;
		*gap = 1;
	}
	return t;
}

/* cuda_pace_wake returns when a thread waiting for a completion expected
 * at expect (0: unknown) ends its paced sleep: early_ns before it, and
 * before it by how late sleeps wake; 0: a sleep is not worth it. */
static uint64_t cuda_pace_wake(cuda_pace *p, uint64_t expect, uint64_t early_ns,
                               uint64_t now)
{
	uint64_t ahead = cuda_pace_load(&p->late_ns) + early_ns;

	if (expect == 0 || expect < now + ahead + CUDA_PACE_MIN_NS)
		return 0;
	if (expect - ahead - now > CUDA_PACE_MAX_NS)
		return now + CUDA_PACE_MAX_NS;
	return expect - ahead;
}

/* cuda_pace_lone_wake: cuda_pace_wake for a frame alone in the lane
 * (cuda_lane_finish), whose reply no other frame's work hides: its sleep
 * ends clear of the lateness envelope (late_hi_ns), and a quarter of the
 * frame's expected time early at least, so that a late wake-up seldom
 * delays the reply of a stream at concurrency 1. */
static uint64_t cuda_pace_lone_wake(cuda_pace *p, const cuda_slot *s,
                                    uint64_t expect, uint64_t now)
{
	uint64_t ahead = cuda_pace_load(&p->late_hi_ns) + CUDA_PACE_GUARD_NS;
	uint64_t late = cuda_pace_load(&p->late_ns);

	if (expect <= s->t_enq_ns)
		return 0;
	if ((expect - s->t_enq_ns) / 4 > ahead)
		ahead = (expect - s->t_enq_ns) / 4;
	return cuda_pace_wake(p, expect, ahead > late ? ahead - late : 0, now);
}

/* cuda_pace_woke counts a paced sleep meant to end at wake that has ended
 * (by its time), and learns how late it woke. */
static void cuda_pace_woke(cuda_pace *p, uint64_t wake, uint64_t now)
{
	cuda_pace_count(&p->sleeps, 1);
	if (now < wake)
		return;
	uint64_t x = now - wake, hi = cuda_pace_load(&p->late_hi_ns);

	cuda_pace_mean(&p->late_ns,
	               x < CUDA_PACE_LATE_NS ? x : CUDA_PACE_LATE_NS);
	if (x > CUDA_PACE_LATE_HI_NS)
		x = CUDA_PACE_LATE_HI_NS;
	cuda_pace_store(&p->late_hi_ns,
	                x > hi ? hi + (x - hi) / 2 : hi - (hi - x) / 64);
}

/* cuda_pace_sleep sleeps until wake (CLOCK_MONOTONIC nanoseconds). */
static void cuda_pace_sleep(cuda_pace *p, uint64_t wake)
{
	struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000u),
	                      .tv_nsec = (long)(wake % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	cuda_pace_woke(p, wake, cuda_now_ns());
}

/* cuda_pace_seen learns from s's completion, seen at seen. polled: it was
 * seen while polling, so seen is exact (or late by a blocking wait's
 * wake-up, which the next point corrects); overslept: a paced sleep (whose
 * estimate was the gap one when gap) ended after it, so that estimate was
 * long and is cut by a quarter. Neither: found done at the first look,
 * which says nothing. Publishes the next completion expected (next_ns)
 * for the lane thread waiting for a free slot. */
static void cuda_pace_seen(cuda_pace *p, const cuda_slot *s, uint64_t seen,
                           int polled, int overslept, int gap)
{
	uint64_t last = cuda_pace_load(&p->last_ns);

	if (overslept) {
		_Atomic uint64_t *m = gap ? &p->gap_ns : &p->lone_ns;
		uint64_t v = cuda_pace_load(m);

		cuda_pace_store(m, v - v / 4 > 0 ? v - v / 4 : 1);
		cuda_pace_count(&p->overslept, 1);
	} else if (polled && s->t_enq_ns >= last) {
		cuda_pace_mean(&p->lone_ns, seen - s->t_enq_ns);
	} else if (polled) {
		cuda_pace_mean(&p->gap_ns, seen - last);
	}
	cuda_pace_store(&p->last_ns, seen);
	uint64_t g = cuda_pace_load(&p->gap_ns);
	cuda_pace_store(&p->next_ns, g > 0 ? seen + g : 0);
}

/* cuda_pace_polled counts a poll of n empty event queries from t0 to t1. */
static void cuda_pace_polled(cuda_pace *p, unsigned long long n, uint64_t t0,
                             uint64_t t1)
{
	cuda_pace_count(&p->queries_empty, n);
	if (t1 > t0)
		cuda_pace_count(&p->spin_ns, t1 - t0);
}

/* cuda_spin_wait waits, with cb->mu held, for the next cuda_kick of cv:
 * with sleep_until set (CLOCK_MONOTONIC nanoseconds, cuda_pace_wake) it
 * first sleeps on cv until then, since the kick is not expected before
 * (a kick ends the sleep); then it polls *kicks with the mutex released
 * for up to spin_ns, since waking a sleeping thread adds tens of
 * microseconds to each hand-off (submit to lane, lane to completion), then
 * sleeps on cv. A kick counts only under cb->mu, so none is lost between
 * the poll and the sleep. */
static void cuda_spin_wait(cuda_backend *cb, pthread_cond_t *cv,
                           atomic_uint *kicks, uint64_t sleep_until)
{
	unsigned k = atomic_load_explicit(kicks, memory_order_relaxed);

	if (sleep_until != 0 && cb->spin_ns > 0) {
		cuda_timedwait(cv, &cb->mu, sleep_until);
		if (atomic_load_explicit(kicks, memory_order_relaxed) != k)
			return;
		uint64_t now = cuda_now_ns();
		if (now >= sleep_until)
			cuda_pace_woke(&cb->pace, sleep_until, now);
	}
	if (cb->spin_ns > 0) {
		uint64_t until = cuda_now_ns() + cb->spin_ns;

		pthread_mutex_unlock(&cb->mu);
		while (atomic_load_explicit(kicks, memory_order_acquire) == k &&
		       cuda_now_ns() < until)
			CUDA_CPU_RELAX();
		pthread_mutex_lock(&cb->mu);
	}
	if (atomic_load_explicit(kicks, memory_order_relaxed) == k)
		pthread_cond_wait(cv, &cb->mu);
}

/* cuda_deliver frees slot s (if any) and calls job's done. */
static void cuda_deliver(cuda_backend *cb, cuda_slot *s, fprep__job *job)
{
	/* A job failed on a frame the engine writes: the slot is free only
	 * once that is done (a frame that ran has passed it). */
	if (s != NULL && s->d_frame != NULL && job->status != FPREP_OK)
		(void)FPREP__CUDA(NULL, cudaEventSynchronize(s->ev_dec));
	job->t_end_ns = cuda_now_ns();
	if (s != NULL && s->t_back_ns != 0) { /* a JPEG frame, decoded */
		CUDA_JSTAT(cb, s, done, 1);
		CUDA_JSTAT(cb, s, lane_ns, job->t_end_ns - s->t_back_ns);
		CUDA_JSTAT(cb, s, total_ns, job->t_end_ns - job->t_start_ns);
	}
	pthread_mutex_lock(&cb->mu);
	if (job->fatal)
		cb->fatal = 1;
	if (s != NULL) {
		s->job = NULL;
		s->d_frame = NULL;
		s->staged = 0;
		s->t_back_ns = 0;
		s->lone = 0;
		/* The lane thread waits for a slot only with jobs pending. */
		if (!fprep__queue_empty(&cb->pending) || cb->stopping)
			cuda_kick(&cb->cv_lane, &cb->lane_kicks);
	}
	pthread_mutex_unlock(&cb->mu);
	job->done(job);
}

/* cuda_free_slot returns a free slot for a job, NULL when none: for a
 * JPEG frame one of the slots kept for those first, then any. With cb->mu
 * held. */
static cuda_slot *cuda_free_slot(cuda_backend *cb, int jpeg)
{
	if (jpeg)
		for (unsigned i = cb->raw_slots; i < cb->nslots; i++)
			if (cb->slots[i].job == NULL)
				return &cb->slots[i];
	for (unsigned i = 0; i < cb->raw_slots; i++)
		if (cb->slots[i].job == NULL)
			return &cb->slots[i];
	return NULL;
}

static void cuda_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
	                      .tv_nsec = (long)(ns % 1000000000u)};
	pthread_cond_timedwait(cv, mu, &ts);
}

/* cuda_addr_range_fn: the driver's cuMemGetAddressRange (v2), fetched
 * through the runtime, so the daemon links no libcuda. */
typedef int (*cuda_addr_range_fn)(unsigned long long *base, size_t *size,
                                  unsigned long long dptr);

static cuda_addr_range_fn cuda_addr_range(void)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
	                                     cudaEnableDefault,
	                                     &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return (cuda_addr_range_fn)fn;
}

/* cuda_ipc_check checks that the region's [offset, offset + size) lies
 * inside the allocation opened at p: its real size from the driver
 * (cuMemGetAddressRange); where the driver entry point is missing, the
 * first and last byte must be device memory of this lane's device. */
static int cuda_ipc_check(cuda_backend *cb, fprep__memreg *r, uint8_t *p)
{
	cuda_addr_range_fn range = cuda_addr_range();
	struct cudaPointerAttributes a0, a1;
	unsigned long long base = 0;
	uint64_t off = r->u.cuda.offset, end;
	size_t alloc = 0;
	int rv;

	if (__builtin_add_overflow(off, r->size, &end))
		end = UINT64_MAX;
	if (range != NULL) {
		rv = range(&base, &alloc, (unsigned long long)(uintptr_t)p);
		if (rv != 0) {
			snprintf(r->message, sizeof(r->message),
			         "cuMemGetAddressRange of the opened handle: "
			         "CUresult %d",
			         rv);
			return FPREP_ECUDA;
		}
		if (base > (uintptr_t)p ||
		    end > (uint64_t)alloc - ((uintptr_t)p - base)) {
			snprintf(r->message, sizeof(r->message),
			         "cuda_offset %" PRIu64
			         " + region_size %" PRIu64
			         " exceeds the allocation's %zu bytes",
			         off, r->size, alloc);
			return FPREP_EINVAL;
		}
		return 0;
	}
	if (end == UINT64_MAX ||
	    cudaPointerGetAttributes(&a0, p + off) != cudaSuccess ||
	    cudaPointerGetAttributes(&a1, p + end - 1) != cudaSuccess ||
	    a0.type != cudaMemoryTypeDevice ||
	    a1.type != cudaMemoryTypeDevice || a0.device != cb->device ||
	    a1.device != cb->device) {
		(void)cudaGetLastError();
		snprintf(r->message, sizeof(r->message),
		         "cuda_offset %" PRIu64 " + region_size %" PRIu64
		         " is not inside the opened allocation",
		         off, r->size);
		return FPREP_EINVAL;
	}
	return 0;
}

/* cuda_ipc_run opens (cudaIpcOpenMemHandle) or closes a CUDA region on
 * the lane thread: the handle must name an allocation on this lane's
 * device (by UUID), holding the region. */
static void cuda_ipc_run(cuda_backend *cb, fprep__memreg *r, int dev_ok)
{
	fprep__gpu_status st = {0};
	char want[48], have[48];
	cudaIpcMemHandle_t h;
	void *p = NULL;

	if (r->verb == FPREP__MEMREG_CLOSE) {
		if (r->u.cuda.opened != NULL)
			(void)FPREP__CUDA(
			        NULL, cudaIpcCloseMemHandle(r->u.cuda.opened));
		r->u.cuda.opened = NULL;
		r->base = NULL;
		return;
	}
	if (!dev_ok) {
		r->status = FPREP_ECUDA;
		snprintf(r->message, sizeof(r->message),
		         "CUDA region not opened: the lane has no device");
		return;
	}
	if (memcmp(r->u.cuda.uuid, cb->uuid, sizeof(cb->uuid)) != 0) {
		fprep__uuid_text(r->u.cuda.uuid, want, sizeof(want));
		fprep__uuid_text(cb->uuid, have, sizeof(have));
		r->status = FPREP_EINVAL;
		snprintf(r->message, sizeof(r->message),
		         "cuda_uuid %s is not the daemon's GPU (%s)", want,
		         have);
		return;
	}
	_Static_assert(sizeof(h) == FPREP_CUDA_HANDLE_SIZE, "IPC handle size");
	memcpy(&h, r->u.cuda.handle, sizeof(h));
	if (FPREP__CUDA(&st, cudaIpcOpenMemHandle(
	                             &p, h, cudaIpcMemLazyEnablePeerAccess))) {
		(void)cudaGetLastError();
		r->status = FPREP_EREGION;
		snprintf(r->message, sizeof(r->message),
		         "%.60s: not the handle of a live allocation (garbage, "
		         "freed, or its process exited)",
		         st.text);
		return;
	}
	r->status = cuda_ipc_check(cb, r, p);
	if (r->status != FPREP_OK) {
		(void)FPREP__CUDA(NULL, cudaIpcCloseMemHandle(p));
		return;
	}
	r->u.cuda.opened = p;
	r->base = (uint8_t *)p + r->u.cuda.offset;
}

/* cuda_region_attach runs OPEN on a shared-memory region that another
 * lane of this process has already mapped and pinned (portable): this
 * lane's device must see its pages as page-locked host memory. */
static void cuda_region_attach(cuda_backend *cb, fprep__memreg *r, int dev_ok)
{
	struct cudaPointerAttributes a;
	fprep__gpu_status st = {0};

	if (dev_ok &&
	    !FPREP__CUDA(&st, cudaPointerGetAttributes(&a, r->base)) &&
	    a.type == cudaMemoryTypeHost)
		return;
	(void)cudaGetLastError();
	r->status = FPREP_ECUDA;
	snprintf(r->message, sizeof(r->message),
	         "region not page-locked for device %d: %.90s", cb->device,
	         !dev_ok      ? "the lane has no device"
	         : st.text[0] ? st.text
	                      : "not registered for it");
}

/* cuda_region_run runs a region operation on the lane thread, whose
 * device is set (dev_ok): OPEN maps the region and pins it
 * (cudaHostRegister), so H2D reads the client's frames and D2H writes its
 * tensors directly; CLOSE unpins it (milliseconds for a large region) and
 * unmaps it. */
static void cuda_region_run(cuda_backend *cb, fprep__memreg *r, int dev_ok)
{
	fprep__gpu_status st = {0};

	r->message[0] = '\0';
	r->status = FPREP_OK;
	if (r->kind == FPREP__MEMREG_CUDA) {
		cuda_ipc_run(cb, r, dev_ok);
		return;
	}
	if (r->verb == FPREP__MEMREG_CLOSE) {
		if (r->pinned)
			(void)FPREP__CUDA(NULL, cudaHostUnregister(r->base));
		r->pinned = 0;
		r->mapped = NULL;
		fprep__memreg_unmap(r);
		return;
	}
	if (r->pinned) {
		cuda_region_attach(cb, r, dev_ok);
		return;
	}
	r->mapped = NULL;
	r->status = fprep__memreg_map(r);
	if (r->status != FPREP_OK)
		return;
	/* Portable: the pin counts for every device of the process, so
	 * the other lanes only check it (cuda_region_attach). Mapped
	 * transfers also need the pages mapped into the device's space. */
	unsigned flags = cudaHostRegisterPortable;
	if (cb->transfer != FPREP__CUDA_STAGED)
		flags |= cudaHostRegisterMapped;
	if (!dev_ok ||
	    FPREP__CUDA(&st,
	                cudaHostRegister(r->base, (size_t)r->size, flags))) {
		r->status = FPREP_ECUDA;
		snprintf(r->message, sizeof(r->message),
		         "region not pinned for the GPU: %.90s",
		         dev_ok ? st.text : "the lane has no device");
		fprep__memreg_unmap(r);
		return;
	}
	r->pinned = 1;
	if ((flags & cudaHostRegisterMapped) != 0 &&
	    FPREP__CUDA(&st, cudaHostGetDevicePointer((void **)&r->mapped,
	                                              r->base, 0))) {
		/* Jobs on it go staged. */
		fprep__log(FPREP_LOG_WARNING, "region not mapped: %s", st.text);
		r->mapped = NULL;
	}
}

/* cuda_region_drain runs the queued region operations; called and returns
 * with cb->mu held. */
static void cuda_region_drain(cuda_backend *cb, int dev_ok)
{
	fprep__qnode *n;

	while ((n = fprep__queue_pop(&cb->admin)) != NULL) {
		fprep__memreg *r = fprep__container_of(n, fprep__memreg, link);

		pthread_mutex_unlock(&cb->mu);
		cuda_region_run(cb, r, dev_ok);
		r->done(r); /* r belongs to the loop from here */
		pthread_mutex_lock(&cb->mu);
	}
}

/* cuda_anchor records ev_anchor on the idle H2D stream and polls it (for
 * up to CUDA_SPIN_NS), so anchor_ns is the host time of its device
 * timestamp to within half the poll; device stages are converted from it
 * (cuda_host_stamps). Lane thread, with no slot busy. */
static void cuda_anchor(cuda_backend *cb)
{
	uint64_t t0 = cuda_now_ns(), t1 = t0;
	cudaError_t e = cudaEventRecord(cb->ev_anchor, cb->s_h2d);

	while (e == cudaSuccess &&
	       (e = cudaEventQuery(cb->ev_anchor)) == cudaErrorNotReady &&
	       (t1 = cuda_now_ns()) - t0 < CUDA_SPIN_NS)
		;
	t1 = cuda_now_ns();
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return;
	}
	cb->anchor_ns = t0 + (t1 - t0) / 2;
}

/* Re-anchor the device clock at most this often, when the lane is idle:
 * cudaEventElapsedTime's float milliseconds hold about 1 us at 10 s. */
#define CUDA_ANCHOR_NS (1000u * 1000u * 1000u)

static int cuda_all_free(const cuda_backend *cb)
{
	for (unsigned i = 0; i < cb->nslots; i++)
		if (cb->slots[i].job != NULL)
			return 0;
	return 1;
}

static void cuda_lane_finish(cuda_backend *cb, cuda_slot *s, unsigned k);

/* cuda_slot_wake: when the lane thread waiting for a free slot ends its
 * paced sleep: as the next completion, which frees one, is expected (the
 * completion thread polls from a little earlier); 0: no sleep. */
static uint64_t cuda_slot_wake(cuda_pace *p)
{
	return cuda_pace_wake(p, cuda_pace_load(&p->next_ns), 0, cuda_now_ns());
}

/* cuda_thread_start names the calling backend thread (top -H,
 * /proc/PID/task/TID/comm: 15 bytes at most) and makes its timed sleeps
 * end within a microsecond of their time (the default timer slack is
 * 50 us: as long as a paced sleep's guard). */
static void cuda_thread_start(const char *prefix, int device)
{
	char name[16];

	snprintf(name, sizeof name, "%s%d", prefix, device);
	pthread_setname_np(pthread_self(), name);
	(void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

/* cuda_is_jpeg: a frame job with a JPEG source that the lane's decoders
 * take (one in a CUDA region goes to cuda_enqueue, which refuses it). */
static int cuda_is_jpeg(const fprep__job *job)
{
	return job->req.kind == FPREP_KIND_FRAME &&
	       job->req.src_format == FPREP_PIX_JPEG && !job->input_device;
}

/* cuda_busy counts the slots in use; with cb->mu held. */
static unsigned cuda_busy(const cuda_backend *cb)
{
	unsigned busy = 0;

	for (unsigned i = 0; i < cb->nslots; i++)
		busy += cb->slots[i].job != NULL;
	return busy;
}

/* cuda_lane_run puts job's work on the streams with slot s
 * (cuda_enqueue), busy being the other slots in use, and hands s to the
 * completion thread, or completes it itself when it is alone
 * (cuda_lane_finish); a job refused is answered at once. Lane thread,
 * cb->mu not held. */
static void cuda_lane_run(cuda_backend *cb, cuda_slot *s, fprep__job *job,
                          unsigned busy)
{
	if (cuda_enqueue(cb, s, job, cuda_use_mapped(cb, busy),
	                 cb->transfer == FPREP__CUDA_STAGED && busy == 0) !=
	    0) {
		cuda_deliver(cb, s, job);
		return;
	}
	s->t_enq_ns = cuda_now_ns();
	pthread_mutex_lock(&cb->mu);
	int alone = busy == 0 && cb->spin_ns > 0 &&
	            fprep__queue_empty(&cb->pending) &&
	            fprep__queue_empty(&cb->flying);
	unsigned k =
	        atomic_load_explicit(&cb->lane_kicks, memory_order_relaxed);
	if (!alone) {
		fprep__queue_push(&cb->flying, &s->link);
		cuda_kick(&cb->cv_done, &cb->done_kicks);
	}
	pthread_mutex_unlock(&cb->mu);
	if (alone)
		cuda_lane_finish(cb, s, k);
}

/* cuda_lane_decoded takes a slot from the decoded queue (a JPEG frame the
 * decoders left on the device or in it) and enqueues its job, or fails it
 * when the lane failed or its drain deadline passed. Lane thread, with
 * cb->mu held (let go meanwhile). */
static void cuda_lane_decoded(cuda_backend *cb)
{
	cuda_slot *s = fprep__container_of(fprep__queue_pop(&cb->decoded),
	                                   cuda_slot, link);
	unsigned busy = cuda_busy(cb) - 1;
	uint64_t now = cuda_now_ns();
	int late = cb->stopping && now >= cb->deadline_ns;
	int fatal = cb->fatal;

	pthread_mutex_unlock(&cb->mu);
	CUDA_JSTAT(cb, s, back, 1);
	CUDA_JSTAT(cb, s, back_ns, now - s->t_back_ns);
	if (fatal)
		cuda_fail(s->job, FPREP_ECUDA, 1,
		          "the GPU lane failed earlier (sticky error)");
	else if (late)
		cuda_fail(s->job, FPREP_ESHUTDOWN, 0,
		          "GPU lane closing: drain deadline passed");
	if (fatal || late)
		cuda_deliver(cb, s, s->job);
	else
		cuda_lane_run(cb, s, s->job, busy);
	pthread_mutex_lock(&cb->mu);
}

/* cuda_queued counts the slots in decode_q; with cb->mu held. */
static unsigned cuda_queued(const cuda_backend *cb)
{
	return cb->decode_q.queued;
}

/* cuda_helped tells whether the lane's CPU helpers take frames now: the
 * engine is busy (calls_max decoders in it), frames are queued, and more
 * than help_min wait for the engine (queued, or in a batch being
 * gathered). With cb->mu held. */
static int cuda_helped(const cuda_backend *cb)
{
	return cb->helpers > 0 && cb->engine_calls >= cb->calls_max &&
	       cuda_queued(cb) > 0 &&
	       cuda_queued(cb) + cb->gathered > cb->help_min;
}

/* cuda_jpeg_start gives slot s, whose job is a JPEG frame, to the
 * decoders (cuda_decoder_main). Lane thread, cb->mu not held. */
static void cuda_jpeg_start(cuda_backend *cb, cuda_slot *s)
{
	pthread_mutex_lock(&cb->mu);
	fprep__jpeg_turns_push(&cb->decode_q, &s->link, s->job->uid,
	                       s->job->conn);
	cb->decoding++;
	atomic_fetch_add_explicit(&cb->decode_kicks, 1, memory_order_release);
	if (!cb->decoder_polling) /* else the polling one takes it */
		pthread_cond_signal(&cb->cv_decode);
	if (cuda_helped(cb))
		pthread_cond_signal(&cb->cv_help);
	pthread_mutex_unlock(&cb->mu);
}

/* cuda_decoder: one decoder thread's own: its libjpeg-turbo handle and,
 * with a JPEG engine, its nvJPEG decoder, the stream its batches are
 * queued on and an event recorded after each (nvjd NULL: libjpeg-turbo
 * only); and the batch it gathers: frames whose headers it checked, for
 * the engine (eng, with their items, headers and start times) and for
 * libjpeg-turbo (cpu), all of one channel order. */
typedef struct cuda_decoder {
	fprep__jpeg j;
	fprep__nvjpeg_dec *nvjd;
	cudaStream_t stream;
	cudaEvent_t ev_batch; /* gate_done: the batch's end */
	cuda_slot *eng[FPREP__NVJPEG_BATCH_MAX], *cpu[FPREP__NVJPEG_BATCH_MAX];
	fprep__nvjpeg_item it[FPREP__NVJPEG_BATCH_MAX];
	fprep_request raw[FPREP__NVJPEG_BATCH_MAX];
	uint64_t t0[FPREP__NVJPEG_BATCH_MAX];
	unsigned n, nc;    /* in eng, in cpu */
	unsigned taken;    /* frames taken for it (counted in cb->gathered) */
	uint8_t order;     /* the batch's channel order (n + nc > 0) */
	uint64_t first_ns; /* when its first frame was taken */
} cuda_decoder;

/* cuda_decoder_back hands slots ss[0..n) back: those with ok[i] to the
 * lane (the decoded queue), the others answered (their job's reply is
 * set). A decoder's thread, cb->mu not held. */
static void cuda_decoder_back(cuda_backend *cb, cuda_slot **ss, const int *ok,
                              unsigned n)
{
	uint64_t now = cuda_now_ns();

	for (unsigned i = 0; i < n; i++)
		if (!ok[i])
			cuda_deliver(cb, ss[i], ss[i]->job);
	pthread_mutex_lock(&cb->mu);
	for (unsigned i = 0; i < n; i++) {
		fprep__jpeg_turns_charge(&cb->decode_q, &ss[i]->turn,
		                         ss[i]->decode_us);
		if (ok[i]) {
			ss[i]->t_back_ns = now;
			fprep__queue_push(&cb->decoded, &ss[i]->link);
		}
		cb->decoding--;
	}
	cuda_kick(&cb->cv_lane, &cb->lane_kicks);
	pthread_mutex_unlock(&cb->mu);
}

/* cuda_cpu_decode decodes the JPEG of s's job with libjpeg-turbo (j) into
 * s's pinned input, grown to hold the frame, and makes the job one on
 * that frame. Returns 0, or the error with the job's reply set. A
 * decoder's thread. */
static int cuda_cpu_decode(cuda_backend *cb, fprep__jpeg *j, cuda_slot *s,
                           fprep__job *job)
{
	fprep__gpu_status st = {0};
	fprep_request raw;
	uint64_t t = cuda_now_ns();

	CUDA_JSTAT(cb, s, cpu_frames, 1);
	job->status = fprep__jpeg_open(j, job, &s->jpeg_copy, &raw,
	                               job->message, sizeof job->message);
	if (job->status == FPREP_OK &&
	    cuda_slot_reserve(s, raw.input_size, 0,
	                      cb->transfer != FPREP__CUDA_STAGED, &st)) {
		cuda_fail(job,
		          st.code == cudaErrorMemoryAllocation ? FPREP_ENOMEM
		                                               : FPREP_ECUDA,
		          cuda_sticky(st.code), st.text);
	} else if (job->status == FPREP_OK) {
		job->status =
		        fprep__jpeg_decode(j, job, &raw, s->h_in, job->message,
		                           sizeof job->message);
	}
	CUDA_JSTAT(cb, s, cpu_ns, cuda_now_ns() - t);
	s->decode_us += (uint32_t)((cuda_now_ns() - t) / 1000);
	if (job->status != FPREP_OK)
		return job->status;
	job->input_pinned = 0; /* in the slot: staged from there */
	s->staged = 1;
	atomic_fetch_add_explicit(&cb->jpeg_cpu, 1, memory_order_relaxed);
	return 0;
}

/* cuda_engine_take checks the header of s's job (j) and, when the engine
 * takes it, grows s's device buffers for the frame and fills *it (into
 * s's device input), *raw and *t0. Returns 1: for the engine; 0: for
 * libjpeg-turbo; -1: answered (refused, or no memory for it). A
 * decoder's thread. */
static int cuda_engine_take(cuda_backend *cb, cuda_decoder *d, cuda_slot *s,
                            fprep__nvjpeg_item *it, fprep_request *raw,
                            uint64_t *t0)
{
	fprep__job *jb = s->job;
	fprep__gpu_status st = {0};
	uint64_t t = cuda_now_ns();
	int take;

	jb->status = fprep__jpeg_open(&d->j, jb, &s->jpeg_copy, raw,
	                              jb->message, sizeof jb->message);
	take = jb->status == FPREP_OK &&
	       (d->j.colorspace == TJCS_YCbCr ||
	        d->j.colorspace == TJCS_GRAY) &&
	       fprep__jpeg_sequential(jb->input, jb->req.input_size) &&
	       fprep__nvjpeg_supported(d->nvjd, jb->input,
	                               (size_t)jb->req.input_size);
	CUDA_JSTAT(cb, s, parse_ns, cuda_now_ns() - t);
	if (jb->status != FPREP_OK)
		return -1;
	if (!take)
		return 0;
	if (cuda_slot_reserve_dev(s, raw->input_size, &st) ||
	    cuda_slot_reserve(s, 0, jb->output_device ? 0 : jb->output_size,
	                      cb->transfer != FPREP__CUDA_STAGED, &st)) {
		cuda_fail(jb,
		          st.code == cudaErrorMemoryAllocation ? FPREP_ENOMEM
		                                               : FPREP_ECUDA,
		          cuda_sticky(st.code), st.text);
		return -1;
	}
	*t0 = fprep__jpeg_t0(&d->j);
	*it = (fprep__nvjpeg_item){jb->input, (size_t)jb->req.input_size,
	                           s->d_in, raw->src_stride};
	return 1;
}

/* cuda_engine_run queues the engine's batch of ss[0..n) (items it, headers
 * raw, begun at t0) on d's stream and records each slot's ev_dec after
 * it (and d's ev_batch with gate_done): the jobs become jobs on frames in
 * device memory. Returns 0, or -1 when nvJPEG refused the batch or an
 * event was not recorded: the caller decodes them with libjpeg-turbo (the
 * stream's work is done by then). A decoder's thread. */
static int cuda_engine_run(cuda_backend *cb, cuda_decoder *d, cuda_slot **ss,
                           const fprep__nvjpeg_item *it,
                           const fprep_request *raw, const uint64_t *t0,
                           unsigned n)
{
	uint8_t order = ss[0]->job->req.channel_order;
	fprep__gpu_status st = {0};
	char msg[FPREP_MESSAGE_SIZE];
	uint64_t t = cuda_now_ns();
	int rc = 0;

	/* The engine does not check that a file's data fills the frame its
	 * header names: it leaves what it did not reach as it was. Cleared
	 * first, so that what it was (an earlier frame in this slot, another
	 * client's) never shows in a tensor. The clear is waited for here:
	 * the engine starts on the call, not after the work queued before it
	 * on the stream (on the H200, a clear queued on d->stream behind a
	 * busy GPU landed after the engine's frame: 1 tensor of 37,095 all
	 * zeros at c=64). The stream holds only this decoder's batches, the
	 * last of which the gate has seen done, so this waits for the clear
	 * alone. */
	for (unsigned i = 0; i < n && rc == 0; i++)
		if (FPREP__CUDA(&st,
		                cudaMemsetAsync(it[i].dst, 0, raw[i].input_size,
		                                d->stream))) {
			snprintf(msg, sizeof msg, "%s", st.text);
			rc = -1;
		}
	if (rc == 0 && FPREP__CUDA(&st, cudaStreamSynchronize(d->stream))) {
		snprintf(msg, sizeof msg, "%s", st.text);
		rc = -1;
	}
	if (rc == 0)
		rc = fprep__nvjpeg_decode(
		        d->nvjd, it, n, order == FPREP_ORDER_BGR,
		        order == FPREP_ORDER_GRAY, d->stream, msg, sizeof msg);

	/* A batch of one counts among the lone frames' when it is one. */
	CUDA_JSTAT(cb, ss[0], call_ns, cuda_now_ns() - t);
	for (unsigned i = 0; i < n; i++) /* the call's time, shared */
		ss[i]->decode_us += (uint32_t)((cuda_now_ns() - t) / 1000 / n);
	CUDA_JSTAT(cb, ss[0], batches, 1);
	CUDA_JSTAT(cb, ss[0], batch_frames, n);
	for (unsigned i = 0; i < n && rc == 0; i++)
		if (FPREP__CUDA(&st,
		                cudaEventRecord(ss[i]->ev_dec, d->stream))) {
			snprintf(msg, sizeof msg, "%s", st.text);
			rc = -1;
		}
	if (rc == 0 && cb->gate_done &&
	    FPREP__CUDA(&st, cudaEventRecord(d->ev_batch, d->stream))) {
		snprintf(msg, sizeof msg, "%s", st.text);
		rc = -1;
	}
	if (rc != 0) {
		fprep__log(FPREP_LOG_WARNING, "%s: decoded by libjpeg-turbo",
		           msg);
		/* What the engine may still write into the slots is done
		 * before libjpeg-turbo's frames are copied there. */
		(void)FPREP__CUDA(NULL, cudaStreamSynchronize(d->stream));
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		fprep__jpeg_adopt(ss[i]->job, &raw[i], ss[i]->d_in, t0[i]);
		ss[i]->d_frame = ss[i]->d_in;
	}
	atomic_fetch_add_explicit(&cb->jpeg_engine, n, memory_order_relaxed);
	return 0;
}

/* cuda_engine_release: a decoder is out of the engine (its call returned,
 * or with gate_done its batch was decoded): the decoders gathering may
 * call now. A decoder's thread, cb->mu not held. */
static void cuda_engine_release(cuda_backend *cb)
{
	pthread_mutex_lock(&cb->mu);
	cb->engine_calls--;
	pthread_cond_broadcast(&cb->cv_decode);
	pthread_mutex_unlock(&cb->mu);
}

/* cuda_decoder_check checks the headers of the slots ss[0..m) the decoder
 * took and adds them to its batch: for the engine (cuda_engine_take), for
 * libjpeg-turbo, or answered at once (refused). A decoder's thread,
 * cb->mu not held. */
static void cuda_decoder_check(cuda_backend *cb, cuda_decoder *d,
                               cuda_slot **ss, unsigned m)
{
	for (unsigned i = 0; i < m; i++) {
		int k = d->nvjd == NULL
		                ? 0
		                : cuda_engine_take(cb, d, ss[i], &d->it[d->n],
		                                   &d->raw[d->n], &d->t0[d->n]);
		int refused = 0;

		if (k > 0)
			d->eng[d->n++] = ss[i];
		else if (k == 0)
			d->cpu[d->nc++] = ss[i];
		else
			cuda_decoder_back(cb, &ss[i], &refused, 1);
	}
}

/* cuda_decoder_finish decodes d's batch: the engine's frames in batches
 * of the sizes cuda_batch_size gives (nvJPEG keeps a state per size), each
 * handed back as soon as it is queued (cuda_engine_run; those of a batch
 * it refused join the others), the decoder leaving the engine
 * (cuda_engine_release) once they are decoded (gate_done) or queued; then
 * the others with libjpeg-turbo, each handed back when done. A decoder
 * counted in engine_calls (engaged) leaves it here. A decoder's thread,
 * cb->mu not held. */
static unsigned cuda_batch_size(unsigned n);
static void cuda_decoder_finish(cuda_backend *cb, cuda_decoder *d, int engaged)
{
	int ok[FPREP__NVJPEG_BATCH_MAX], queued = 0, lone = 0;

	for (unsigned i = 0, k; i < d->n; i += k) {
		k = cuda_batch_size(d->n - i);
		if (cuda_engine_run(cb, d, &d->eng[i], &d->it[i], &d->raw[i],
		                    &d->t0[i], k) == 0) {
			for (unsigned j = 0; j < k; j++)
				ok[j] = 1;
			lone |= d->eng[i]->lone;
			cuda_decoder_back(cb, &d->eng[i], ok, k);
			queued = 1;
		} else {
			for (unsigned j = 0; j < k; j++)
				d->cpu[d->nc++] = d->eng[i + j];
		}
	}
	if (queued && cb->gate_done) {
		uint64_t t = cuda_now_ns();

		(void)FPREP__CUDA(NULL, cudaEventSynchronize(d->ev_batch));
		t = cuda_now_ns() - t;
		atomic_fetch_add_explicit(&cb->jstats.sync_ns, t,
		                          memory_order_relaxed);
		if (lone)
			atomic_fetch_add_explicit(&cb->jlone.sync_ns, t,
			                          memory_order_relaxed);
		cuda_stat_max(&cb->jmax.sync_ns, t);
	}
	if (engaged)
		cuda_engine_release(cb);
	for (unsigned i = 0; i < d->nc; i++) {
		int one = cuda_cpu_decode(cb, &d->j, d->cpu[i],
		                          d->cpu[i]->job) == 0;
		cuda_decoder_back(cb, &d->cpu[i], &one, 1);
	}
	d->n = d->nc = 0;
}

/* cuda_batch_size: the batch sizes a decoder calls the engine with
 * (nvJPEG keeps a state per size, each with buffers for that many frames):
 * n up to 8, above that n rounded down to a multiple of 8. */
static unsigned cuda_batch_size(unsigned n)
{
	return n <= 8 ? n : n & ~7u;
}

/* cuda_decoder_take pops up to room slots from decode_q, each whose turn
 * it is (jpeg_turns.h), into ss, while they have the channel order of d's
 * batch (any, for a batch still empty). Returns how many. With cb->mu
 * held. */
static unsigned cuda_decoder_take(cuda_backend *cb, const cuda_decoder *d,
                                  cuda_slot **ss, unsigned room)
{
	unsigned m = 0;

	fprep__qnode *q;

	while (m < room &&
	       (q = fprep__jpeg_turns_peek(&cb->decode_q)) != NULL) {
		cuda_slot *s = fprep__container_of(q, cuda_slot, link);
		uint8_t order = m > 0 ? ss[0]->job->req.channel_order
		                : d->n + d->nc > 0 ? d->order
		                                   : s->job->req.channel_order;
		if (s->job->req.channel_order != order)
			break;
		(void)fprep__jpeg_turns_pop(&cb->decode_q, &s->turn);
		s->decode_us = 0;
		ss[m++] = s;
	}
	return m;
}

/* cuda_decoder_open sets d up on a decoder's thread: libjpeg-turbo, and
 * with engine (and an engine on the lane) its nvJPEG decoder, stream and
 * event (where one cannot be made, a warning and libjpeg-turbo only). */
static void cuda_decoder_open(cuda_backend *cb, cuda_decoder *d, int engine)
{
	char why[160];

	memset(d, 0, sizeof *d);
	fprep__jpeg_init(&d->j);
	/* The device current for the slots' buffers, helpers too. */
	if (FPREP__CUDA(NULL, cudaSetDevice(cb->device)) || !engine ||
	    cb->nvjpeg == NULL)
		return;
	if (fprep__nvjpeg_dec_open(cb->nvjpeg, &d->nvjd, why, sizeof why)) {
		fprep__log(FPREP_LOG_WARNING,
		           "GPU %d JPEG decoder: %s: libjpeg-turbo only",
		           cb->device, why);
		return;
	}
	if (FPREP__CUDA(NULL, cudaStreamCreateWithFlags(
	                              &d->stream, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(NULL, cudaEventCreateWithFlags(
	                              &d->ev_batch,
	                              cudaEventBlockingSync |
	                                      cudaEventDisableTiming))) {
		fprep__log(FPREP_LOG_WARNING,
		           "GPU %d JPEG decoder: no stream or event: "
		           "libjpeg-turbo only",
		           cb->device);
		fprep__nvjpeg_dec_close(d->nvjd);
		d->nvjd = NULL;
	}
}

static void cuda_decoder_close(cuda_decoder *d)
{
	if (d->stream != NULL) {
		(void)FPREP__CUDA(NULL, cudaStreamSynchronize(d->stream));
		(void)FPREP__CUDA(NULL, cudaStreamDestroy(d->stream));
	}
	if (d->ev_batch != NULL)
		(void)FPREP__CUDA(NULL, cudaEventDestroy(d->ev_batch));
	fprep__nvjpeg_dec_close(d->nvjd);
	fprep__jpeg_fini(&d->j);
}

/* cuda_poll_kicks polls *kicks, with cb->mu let go, until it differs
 * from what it was on entry or for ns; returns whether it changed. With
 * cb->mu held. */
static int cuda_poll_kicks(cuda_backend *cb, atomic_uint *kicks, uint64_t ns)
{
	unsigned k = atomic_load_explicit(kicks, memory_order_relaxed);
	uint64_t until = cuda_now_ns() + ns;

	pthread_mutex_unlock(&cb->mu);
	while (atomic_load_explicit(kicks, memory_order_acquire) == k &&
	       cuda_now_ns() < until)
		CUDA_CPU_RELAX();
	pthread_mutex_lock(&cb->mu);
	return atomic_load_explicit(kicks, memory_order_relaxed) != k;
}

/* cuda_decoder_poll: with the lane polling (spin_ns), one idle decoder
 * at a time polls decode_kicks for up to spin_ns instead of sleeping, so
 * the next frame at low load does not wait for a thread to wake (tens of
 * microseconds); cuda_jpeg_start then signals no one. With cb->mu held
 * (let go meanwhile); the caller takes what came. */
static void cuda_decoder_poll(cuda_backend *cb)
{
	cb->decoder_polling = 1;
	(void)cuda_poll_kicks(cb, &cb->decode_kicks, cb->spin_ns);
	cb->decoder_polling = 0;
}

/* Defaults: the longest a decoder gathers while the engine is busy
 * (FPREP_NVJPEG_GATHER_US), and a lane's decoder threads with a JPEG
 * engine (FPREP_JPEG_THREADS). Measured on an H100 (1080p q90, 640x640
 * f32): 1 thread taking one frame a call 950 frames/s; 2 threads taking
 * every queued frame after a 500 us gather 2,450-3,450 (mean batch
 * 2.3-2.8, with 16 slots for JPEG frames). */
#define CUDA_GATHER_US       10000
#define CUDA_ENGINE_DECODERS 2

/* The longest the idle lane thread polls for a decoder's hand-back
 * (cuda_decoded_wait). */
#define CUDA_DECODED_POLL_NS (10u * 1000u * 1000u)

/* cuda_decoded_wait: the lane thread, with nothing to do but frames with
 * the decoders, polls for their hand-back (lane_kicks) for up to
 * CUDA_DECODED_POLL_NS, then waits as ever (cuda_spin_wait): a frame's
 * decode takes about a millisecond, as long as the lane's own poll
 * (spin_ns), and a sleep then would add a wake-up to the reply of a frame
 * alone. Only where the lane polls (spin_ns > 0). Lane thread, cb->mu
 * held (let go meanwhile). */
static void cuda_decoded_wait(cuda_backend *cb)
{
	if (!cuda_poll_kicks(cb, &cb->lane_kicks, CUDA_DECODED_POLL_NS))
		cuda_spin_wait(cb, &cb->cv_lane, &cb->lane_kicks, 0);
}

/* cuda_helper_take: a CPU helper (a lane with the engine) takes the head
 * slot of decode_q into ss[0] when cuda_helped says so. Returns 1 or 0.
 * With cb->mu held. */
static unsigned cuda_helper_take(cuda_backend *cb, cuda_slot **ss)
{
	if (!cuda_helped(cb))
		return 0;
	fprep__jpeg_turn turn;

	ss[0] = fprep__container_of(fprep__jpeg_turns_pop(&cb->decode_q, &turn),
	                            cuda_slot, link);
	ss[0]->turn = turn;
	ss[0]->decode_us = 0;
	return 1;
}

/* cuda_decoder_room: how many frames decoder d takes now, its batch
 * holding up to cap: while the engine is busy and CPU helpers idle, a
 * batch of help_min frames leaves the rest of the queue to the helpers
 * (cuda_helped), so that they decode what the engine's next batch would
 * not. With cb->mu held. */
static unsigned cuda_decoder_room(const cuda_backend *cb, const cuda_decoder *d,
                                  unsigned cap)
{
	unsigned have = d->n + d->nc;

	if (d->nvjd != NULL && cb->helpers_idle > 0 &&
	    cb->engine_calls >= cb->calls_max && have >= cb->help_min)
		return 0;
	return cap - have;
}

/* cuda_decoder_gathers tells whether decoder d, its batch not empty and
 * nothing more to take now, waits for more rather than decode it: with
 * frames for the engine, while calls_max decoders are in it and the batch
 * is not full, for gather_ns at most since its first frame (so an idle
 * engine is called at once: a lone frame never waits). With cb->mu
 * held. */
static int cuda_decoder_gathers(const cuda_backend *cb, const cuda_decoder *d)
{
	return d->nvjd != NULL && d->n > 0 && d->n + d->nc < cb->jpeg_batch &&
	       cb->engine_calls >= cb->calls_max && !cb->decoders_stop &&
	       cuda_now_ns() - d->first_ns < cb->gather_ns;
}

static unsigned cuda_env_uint(const char *name, unsigned lo, unsigned hi,
                              unsigned def);

/* cuda_decoder_warm runs d's engine once at each batch size it calls it
 * with (cuda_batch_size: 1..8, then multiples of 8 up to the lane's
 * batch) on a 1920x1080 JPEG (4:2:0, RGB out), before the decoder takes
 * frames. nvJPEG makes a state's buffers on its first decode at a batch
 * size: one such call took 235 ms on the H200 (INFO jpeg_timing_max
 * call_us), a stall every frame in flight waited out (c=16: p99.9 156 ms,
 * max 238 ms against a p50 of 5.7 ms). Frames of a larger size or
 * another channel order still pay for theirs once. FPREP_NVJPEG_WARM=0
 * skips it. A decoder's thread, before its loop, while cuda_jpeg_setup
 * waits (the daemon does not listen yet): about 3.4 s on the H200. */
static void cuda_decoder_warm(cuda_backend *cb, cuda_decoder *d)
{
	const unsigned w = 1920, h = 1080;
	const size_t frame = (size_t)w * h * 3;
	fprep__nvjpeg_item it[FPREP__NVJPEG_BATCH_MAX];
	char msg[FPREP_MESSAGE_SIZE];
	uint64_t t = cuda_now_ns();
	unsigned sizes = 0, top = 0;
	uint8_t *jpg, *dev = NULL;
	size_t len;

	if (!cuda_env_uint("FPREP_NVJPEG_WARM", 0, 1, 1) ||
	    fprep__jpeg_encode_test(w, h, &jpg, &len) != 0)
		return;
	if (FPREP__CUDA(NULL,
	                cudaMalloc((void **)&dev, frame * cb->jpeg_batch))) {
		fprep__jpeg_free(jpg);
		return;
	}
	for (unsigned k = 1; k <= cb->jpeg_batch; k++) {
		if (cuda_batch_size(k) != k)
			continue;
		for (unsigned i = 0; i < k; i++)
			it[i] = (fprep__nvjpeg_item){jpg, len, dev + i * frame,
			                             (size_t)w * 3};
		if (fprep__nvjpeg_decode(d->nvjd, it, k, 0, 0, d->stream, msg,
		                         sizeof msg) != 0 ||
		    FPREP__CUDA(NULL, cudaStreamSynchronize(d->stream))) {
			fprep__log(FPREP_LOG_WARNING,
			           "GPU %d JPEG decoder: warm-up stopped at a "
			           "batch of %u: %s",
			           cb->device, k, msg);
			break;
		}
		sizes++;
		top = k;
	}
	(void)FPREP__CUDA(NULL, cudaFree(dev));
	fprep__jpeg_free(jpg);
	fprep__log(FPREP_LOG_INFO,
	           "GPU %d JPEG decoder: engine warmed up at %u batch sizes "
	           "(1 to %u frames of %ux%u) in %.0f ms",
	           cb->device, sizes, top, w, h,
	           (double)(cuda_now_ns() - t) / 1e6);
}

/* cuda_decoder_main: a decoder. A decoder with the engine gathers a
 * batch: it takes the frames queued (up to jpeg_batch) and checks their
 * headers (cuda_decoder_check), and while the engine is busy
 * (cuda_decoder_gathers) waits for more and checks them as they come, so
 * that its host work overlaps the engine's; then it decodes the batch
 * (cuda_decoder_finish) and hands every slot back to the lane or answers
 * it. nvJPEG runs one batched call at a time and only a batch spreads
 * over the engine's cores: the frames that come during one batch make
 * the next. A decoder without the engine takes one frame at a time. Once
 * done it may poll for the next (cuda_decoder_poll) before it sleeps. A
 * CPU helper (past the engine decoders) takes one frame at a time while
 * the engine is busy and the queue long (cuda_helper_take) and decodes it
 * with libjpeg-turbo. */
static void *cuda_decoder_main(void *arg)
{
	cuda_backend *cb = arg;
	cuda_decoder d;
	cuda_slot *ss[FPREP__NVJPEG_BATCH_MAX];
	unsigned idx = atomic_fetch_add(&cb->decoder_seq, 1);
	int helper = idx >= cb->engine_decoders;
	int may_poll = 0;

	cuda_thread_start(helper ? "fp-jpeg-cpu" : "fp-jpeg-gpu", cb->device);
	cuda_decoder_open(cb, &d, !helper);
	if (d.nvjd != NULL)
		cuda_decoder_warm(cb, &d);
	unsigned cap = d.nvjd != NULL ? cb->jpeg_batch : 1;
	pthread_mutex_lock(&cb->mu);
	cb->ready++; /* cuda_jpeg_setup waits for every decoder */
	pthread_cond_broadcast(&cb->cv_decode);
	for (;;) {
		unsigned have = d.n + d.nc, m;

		m = helper ? (have == 0 ? cuda_helper_take(cb, ss) : 0)
		           : cuda_decoder_take(cb, &d, ss,
		                               cuda_decoder_room(cb, &d, cap));
		if (m > 0) {
			/* A frame alone: nothing else in the lane (INFO
			 * jpeg_timing_lone: what a request at c=1 spends
			 * where). */
			ss[0]->lone = have == 0 && m == 1 &&
			              cuda_busy(cb) == 1 &&
			              fprep__queue_empty(&cb->pending);
			if (have == 0) {
				d.order = ss[0]->job->req.channel_order;
				d.first_ns = cuda_now_ns();
			}
			if (d.nvjd != NULL) {
				d.taken += m;
				cb->gathered += m;
			}
			/* More than this batch holds: another decoder. */
			if (!helper && have + m == cap && cuda_queued(cb) > 0)
				pthread_cond_signal(&cb->cv_decode);
			pthread_mutex_unlock(&cb->mu);
			uint64_t now = cuda_now_ns();
			for (unsigned i = 0; i < m; i++) {
				CUDA_JSTAT(cb, ss[i], queue_ns,
				           now - ss[i]->job->t_start_ns);
				CUDA_JSTAT(cb, ss[i], frames, 1);
			}
			cuda_decoder_check(cb, &d, ss, m);
			pthread_mutex_lock(&cb->mu);
			if (d.n + d.nc == 0) { /* every frame refused */
				cb->gathered -= d.taken;
				d.taken = 0;
			}
			continue;
		}
		if (d.n + d.nc > 0 && cuda_decoder_gathers(cb, &d)) {
			/* What this batch leaves queued (cuda_decoder_room)
			 * is the helpers'. */
			if (cuda_helped(cb))
				pthread_cond_signal(&cb->cv_help);
			cuda_timedwait(&cb->cv_decode, &cb->mu,
			               d.first_ns + cb->gather_ns);
			continue;
		}
		if (d.n + d.nc > 0) {
			/* In the engine until cuda_decoder_finish leaves. */
			int engaged = d.n > 0;
			cuda_slot *first = d.n > 0 ? d.eng[0] : d.cpu[0];

			cb->engine_calls += (unsigned)engaged;
			cb->gathered -= d.taken;
			d.taken = 0;
			may_poll = !helper;
			pthread_mutex_unlock(&cb->mu);
			CUDA_JSTAT(cb, first, gather_ns,
			           cuda_now_ns() - d.first_ns);
			cuda_decoder_finish(cb, &d, engaged);
			pthread_mutex_lock(&cb->mu);
			continue;
		}
		if (cb->decoders_stop)
			break;
		if (helper) {
			cb->helpers_idle++;
			pthread_cond_wait(&cb->cv_help, &cb->mu);
			cb->helpers_idle--;
		} else if (may_poll && cb->spin_ns > 0 && !cb->decoder_polling)
			cuda_decoder_poll(cb);
		else
			pthread_cond_wait(&cb->cv_decode, &cb->mu);
		may_poll = 0;
	}
	pthread_mutex_unlock(&cb->mu);
	cuda_decoder_close(&d);
	return NULL;
}

/* cuda_env_uint reads the environment variable name as a number from lo
 * to hi: dflt when unset or empty, or (with a warning) not such a
 * number. */
static unsigned cuda_env_uint(const char *name, unsigned lo, unsigned hi,
                              unsigned dflt)
{
	const char *env = getenv(name);
	char *end;
	unsigned long v;

	if (env == NULL || env[0] == '\0')
		return dflt;
	v = strtoul(env, &end, 10);
	if (*end == '\0' && env[0] != '-' && v >= lo && v <= hi)
		return (unsigned)v;
	fprep__log(FPREP_LOG_WARNING, "%s=%s ignored (%u to %u)", name, env, lo,
	           hi);
	return dflt;
}

/* cuda_jpeg_plan opens the JPEG engine's handle on the open's device
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
static unsigned cuda_jpeg_plan(cuda_backend *cb, int engine, long ncpu,
                               unsigned *threads, char *why, size_t why_size)
{
	const char *gate = getenv("FPREP_NVJPEG_GATE");
	long half = ncpu / 2;
	unsigned n, helpers = 0, slots;

	if (!engine) {
		snprintf(why, why_size,
		         "the JPEG engine is off (--jpeg-engine=false)");
		cb->nvjpeg = NULL;
	} else if (fprep__nvjpeg_open(&cb->nvjpeg, why, why_size) != 0)
		cb->nvjpeg = NULL;
	n = cb->nvjpeg != NULL ? CUDA_ENGINE_DECODERS
	    : half < 1         ? 1
	    : half > 8         ? 8
	                       : (unsigned)half;
	n = cuda_env_uint("FPREP_JPEG_THREADS", 1, 64, n);
	cb->jpeg_batch =
	        cuda_env_uint("FPREP_NVJPEG_BATCH", 1, FPREP__NVJPEG_BATCH_MAX,
	                      FPREP__NVJPEG_BATCH_MAX);
	cb->calls_max = cuda_env_uint("FPREP_NVJPEG_CALLS", 1, 64, 1);
	cb->gather_ns = (uint64_t)cuda_env_uint("FPREP_NVJPEG_GATHER_US", 0,
	                                        1000000, CUDA_GATHER_US) *
	                1000u;
	cb->gate_done = gate == NULL || strcmp(gate, "call") != 0;
	if (cb->nvjpeg != NULL)
		helpers = cuda_env_uint("FPREP_JPEG_CPU_HELPERS", 0, 64, 0);
	cb->help_min = cuda_env_uint("FPREP_JPEG_HELP_MIN", 0, 4096,
	                             cb->jpeg_batch / 2);
	cb->engine_decoders = n;
	cb->helpers = helpers;
	slots = cb->nvjpeg != NULL
	                ? n * cb->jpeg_batch + cb->jpeg_batch / 2 + 2 * helpers
	                : 2 * n;
	*threads = n + helpers;
	return cuda_env_uint("FPREP_JPEG_SLOTS", 1, 4096, slots);
}

/* cuda_jpeg_setup starts the decoders that cuda_jpeg_plan chose (fewer
 * when a thread cannot start: with none, the lane decodes with
 * libjpeg-turbo itself, and the engine's handle is closed) and writes the
 * INFO line. Before the lane starts. */
static void cuda_jpeg_setup(cuda_backend *cb, unsigned lane, unsigned want,
                            char *why, size_t why_size)
{
	unsigned jslots = cb->nslots - cb->raw_slots;

	cb->decoders = calloc(want, sizeof *cb->decoders);
	while (cb->decoders != NULL && cb->ndecoders < want &&
	       pthread_create(&cb->decoders[cb->ndecoders], NULL,
	                      cuda_decoder_main, cb) == 0)
		cb->ndecoders++;
	if (cb->nvjpeg != NULL && cb->ndecoders == 0) {
		fprep__nvjpeg_close(cb->nvjpeg);
		cb->nvjpeg = NULL;
		snprintf(why, why_size, "no decoder thread started");
	}
	/* The daemon listens once every decoder is set up and its engine
	 * warmed up (cuda_decoder_warm), so that no frame waits for that. */
	pthread_mutex_lock(&cb->mu);
	while (cb->ready < cb->ndecoders)
		pthread_cond_wait(&cb->cv_decode, &cb->mu);
	pthread_mutex_unlock(&cb->mu);
	if (cb->nvjpeg != NULL)
		snprintf(
		        cb->jpeg_desc, sizeof cb->jpeg_desc,
		        "%s, batches of up to %u (gathered while %u call%s in "
		        "the engine%s, up to %llu us) from %u decoder threads, "
		        "%u CPU helpers (beyond %u queued); %u slots for JPEG "
		        "frames; libjpeg-turbo for what the engine does not "
		        "take",
		        fprep__nvjpeg_describe(cb->nvjpeg), cb->jpeg_batch,
		        cb->calls_max, cb->calls_max == 1 ? " is" : "s are",
		        cb->gate_done ? " until decoded" : "",
		        (unsigned long long)(cb->gather_ns / 1000u),
		        cb->ndecoders < cb->engine_decoders
		                ? cb->ndecoders
		                : cb->engine_decoders,
		        cb->ndecoders > cb->engine_decoders
		                ? cb->ndecoders - cb->engine_decoders
		                : 0,
		        cb->help_min, jslots);
	else if (cb->ndecoders > 0)
		snprintf(cb->jpeg_desc, sizeof cb->jpeg_desc,
		         "libjpeg-turbo on %u CPU threads, %u slots for JPEG "
		         "frames (%.150s)",
		         cb->ndecoders, jslots, why);
	else
		snprintf(cb->jpeg_desc, sizeof cb->jpeg_desc,
		         "libjpeg-turbo on the lane thread (%.150s)", why);
	fprep__log(FPREP_LOG_INFO, "GPU lane %u: JPEG frames: %s", lane,
	           cb->jpeg_desc);
}

static void *cuda_lane_main(void *arg)
{
	cuda_backend *cb = arg;
	fprep__gpu_status st = {0};
	int dev_ok = !FPREP__CUDA(&st, cudaSetDevice(cb->device));

	cuda_thread_start("fp-lane-gpu", cb->device);

	pthread_mutex_lock(&cb->mu);
	for (;;) {
		fprep__job *job = NULL;
		cuda_slot *s = NULL;

		if (!fprep__queue_empty(&cb->admin)) {
			cuda_region_drain(cb, dev_ok);
			continue;
		}
		if (!fprep__queue_empty(&cb->decoded)) {
			cuda_lane_decoded(cb);
			continue;
		}
		if (!fprep__queue_empty(&cb->pending))
			job = fprep__container_of(cb->pending.head, fprep__job,
			                          link);
		if (job == NULL) {
			if (cb->stopping && cb->decoding == 0)
				break;
			if (cb->trace && dev_ok && !cb->fatal &&
			    cuda_now_ns() - cb->anchor_ns > CUDA_ANCHOR_NS &&
			    cuda_all_free(cb)) {
				pthread_mutex_unlock(&cb->mu);
				cuda_anchor(cb);
				pthread_mutex_lock(&cb->mu);
				continue;
			}
			if (cb->decoding > 0 && cb->spin_ns > 0)
				cuda_decoded_wait(cb);
			else
				cuda_spin_wait(cb, &cb->cv_lane,
				               &cb->lane_kicks, 0);
			continue;
		}
		int late = cb->stopping && cuda_now_ns() >= cb->deadline_ns;
		int now = !dev_ok || cb->fatal || late ||
		          job->req.kind == FPREP_KIND_ECHO;
		int jpeg = cuda_is_jpeg(job) && cb->ndecoders > 0;
		if (!now && (s = cuda_free_slot(cb, jpeg)) == NULL) {
			if (cb->stopping)
				cuda_timedwait(&cb->cv_lane, &cb->mu,
				               cb->deadline_ns);
			else /* a slot frees at the next completion */
				cuda_spin_wait(cb, &cb->cv_lane,
				               &cb->lane_kicks,
				               cuda_slot_wake(&cb->pace));
			continue;
		}
		fprep__queue_pop(&cb->pending);
		unsigned busy = 0;
		for (unsigned i = 0; i < cb->nslots; i++)
			busy += cb->slots[i].job != NULL;
		if (s != NULL)
			s->job = job;
		int fatal = cb->fatal;
		pthread_mutex_unlock(&cb->mu);

		job->t_start_ns = cuda_now_ns();
		job->status = FPREP_OK;
		job->fatal = 0;
		job->message[0] = '\0';
		if (!dev_ok) {
			cuda_fail(job, FPREP_ECUDA, 1, st.text);
			cuda_deliver(cb, NULL, job);
		} else if (fatal) {
			cuda_fail(job, FPREP_ECUDA, 1,
			          "the GPU lane failed earlier (sticky error)");
			cuda_deliver(cb, NULL, job);
		} else if (late) {
			cuda_fail(job, FPREP_ESHUTDOWN, 0,
			          "GPU lane closing: drain deadline passed");
			cuda_deliver(cb, NULL, job);
		} else if (s == NULL) { /* ECHO: no work, no copies */
			cuda_deliver(cb, NULL, job);
		} else if (jpeg) {
			cuda_jpeg_start(cb, s);
		} else {
			cuda_lane_run(cb, s, job, busy);
		}
		pthread_mutex_lock(&cb->mu);
	}
	cb->lane_exited = 1;
	cuda_kick(&cb->cv_done, &cb->done_kicks);
	pthread_mutex_unlock(&cb->mu);
	return NULL;
}

static uint32_t cuda_elapsed_us(cudaEvent_t a, cudaEvent_t b)
{
	float ms = 0;
	if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess || ms < 0)
		return 0;
	return (uint32_t)(ms * 1000.0f + 0.5f);
}

static double cuda_stamp(cudaEvent_t base, cudaEvent_t e)
{
	float ms = 0;
	(void)cudaEventElapsedTime(&ms, base, e);
	return (double)ms * 1000.0;
}

/* cuda_host_stamps fills job->t_stage_ns: each timing event's device time
 * since ev_anchor on the host clock (anchor_ns), kept between the lane's
 * start of the job and seen_ns, when its completion was seen, and in
 * order. */
static void cuda_host_stamps(const cuda_backend *cb, const cuda_slot *s,
                             fprep__job *job, uint64_t seen_ns)
{
	uint64_t lo = job->t_start_ns;

	for (int i = 0; i < CUDA_NT; i++) {
		double us = cuda_stamp(cb->ev_anchor, s->t[i]);
		uint64_t ns = cb->anchor_ns;

		if (us > 0)
			ns += (uint64_t)(us * 1000.0);
		if (ns < lo)
			ns = lo;
		if (ns > seen_ns)
			ns = seen_ns;
		job->t_stage_ns[i] = lo = ns;
	}
}

/* cuda_wait waits for s's ev_done, s the oldest slot in flight: with
 * spin_ns 0 it sleeps on it at once (a blocking-sync event); else it
 * sleeps until shortly before the completion expected (cuda_pace_wake),
 * polls for up to spin_ns, then sleeps on it. Completion thread. */
static cudaError_t cuda_wait(cuda_backend *cb, cuda_slot *s)
{
	cuda_pace *p = &cb->pace;
	cudaError_t e;
	int gap;
	unsigned long long n = 0;

	if (cb->spin_ns == 0)
		return cudaEventSynchronize(s->ev_done);
	if ((e = cudaEventQuery(s->ev_done)) != cudaErrorNotReady) {
		cuda_pace_seen(p, s, cuda_now_ns(), 0, 0, 0);
		return e;
	}
	uint64_t t0 = cuda_now_ns();
	uint64_t expect = cuda_pace_expect(p, s, &gap);
	uint64_t wake = cuda_pace_wake(p, expect, CUDA_PACE_GUARD_NS, t0);

	cuda_pace_store(&p->next_ns, expect);
	if (wake != 0) {
		cuda_pace_sleep(p, wake);
		if ((e = cudaEventQuery(s->ev_done)) != cudaErrorNotReady) {
			cuda_pace_seen(p, s, cuda_now_ns(), 0, 1, gap);
			return e;
		}
		t0 = cuda_now_ns();
	}
	n = 1;
	uint64_t until = t0 + cb->spin_ns, t1;
	while ((e = cudaEventQuery(s->ev_done)) == cudaErrorNotReady) {
		n++;
		if ((t1 = cuda_now_ns()) > until) {
			cuda_pace_polled(p, n, t0, t1);
			cuda_pace_count(&p->blocked, 1);
			e = cudaEventSynchronize(s->ev_done);
			cuda_pace_seen(p, s, cuda_now_ns(), 1, 0, gap);
			return e;
		}
		CUDA_CPU_RELAX();
	}
	t1 = cuda_now_ns();
	cuda_pace_polled(p, n, t0, t1);
	cuda_pace_seen(p, s, t1, 1, 0, gap);
	return e;
}

/* cuda_complete completes the job of the oldest in-flight slot s, whose
 * ev_done wait ended with e. */
static void cuda_complete(cuda_backend *cb, cuda_slot *s, cudaError_t e)
{
	fprep__job *job = s->job;
	fprep__gpu_status st = {0};

	if (FPREP__CUDA(&st, e)) {
		cuda_fail(job, FPREP_ECUDA, cuda_sticky(st.code), st.text);
		cuda_deliver(cb, s, job);
		return;
	}
	uint64_t seen_ns = cuda_now_ns();
	if (!s->out_direct)
		fprep__copy(cb->copier, job->output, s->h_out,
		            job->output_size);
	if (job->trace && cb->trace)
		cuda_host_stamps(cb, s, job, seen_ns);
	job->t_h2d_us = cuda_elapsed_us(s->t[CUDA_T_H2D0], s->t[CUDA_T_H2D1]);
	job->t_kernel_us = cuda_elapsed_us(s->t[CUDA_T_K0], s->t[CUDA_T_K1]);
	job->t_d2h_us = cuda_elapsed_us(s->t[CUDA_T_D2H0], s->t[CUDA_T_D2H1]);
	job->t_compute_us = job->t_kernel_us;
	if (cb->probe != NULL) {
		fprep__cuda_stamps ps = {
		        .h2d_start = cuda_stamp(cb->ev_base, s->t[CUDA_T_H2D0]),
		        .h2d_end = cuda_stamp(cb->ev_base, s->t[CUDA_T_H2D1]),
		        .kernel_start =
		                cuda_stamp(cb->ev_base, s->t[CUDA_T_K0]),
		        .kernel_end = cuda_stamp(cb->ev_base, s->t[CUDA_T_K1]),
		        .d2h_start = cuda_stamp(cb->ev_base, s->t[CUDA_T_D2H0]),
		        .d2h_end = cuda_stamp(cb->ev_base, s->t[CUDA_T_D2H1]),
		};
		cb->probe(cb->probe_arg, job, &ps);
	}
	cuda_deliver(cb, s, job);
}

/* cuda_finish waits for the oldest in-flight slot s and completes its job. */
static void cuda_finish(cuda_backend *cb, cuda_slot *s)
{
	cuda_complete(cb, s, cuda_wait(cb, s));
}

/* cuda_lane_finish: the lane thread has just enqueued s, the only slot in
 * flight, and nothing is pending. It waits for s's ev_done itself and
 * completes the job when it is done, so that a lone request crosses no
 * third thread (the completion thread, and the tens of microseconds of its
 * waking when it slept): it sleeps on cv_lane until shortly before the
 * completion expected (cuda_pace_wake), then polls for up to spin_ns. A
 * kick after k, the count of lane_kicks read under cb->mu when the lane
 * found nothing pending (a new job, a region operation, a stop), or the
 * end of the poll hands s to the completion thread instead, as any slot
 * under load. */
static void cuda_lane_finish(cuda_backend *cb, cuda_slot *s, unsigned k)
{
	cuda_pace *p = &cb->pace;
	int gap, slept = 0;
	uint64_t t0 = cuda_now_ns();
	uint64_t wake =
	        cuda_pace_lone_wake(p, s, cuda_pace_expect(p, s, &gap), t0);
	unsigned long long n = 0;
	cudaError_t e;

	if (wake != 0) {
		pthread_mutex_lock(&cb->mu);
		if (atomic_load_explicit(&cb->lane_kicks,
		                         memory_order_relaxed) == k)
			cuda_timedwait(&cb->cv_lane, &cb->mu, wake);
		pthread_mutex_unlock(&cb->mu);
		t0 = cuda_now_ns();
		if (atomic_load_explicit(&cb->lane_kicks,
		                         memory_order_acquire) == k &&
		    t0 >= wake) {
			cuda_pace_woke(p, wake, t0);
			slept = 1;
		}
	}
	uint64_t until = t0 + cb->spin_ns, t1;
	while ((e = cudaEventQuery(s->ev_done)) == cudaErrorNotReady) {
		n++;
		t1 = cuda_now_ns();
		if (atomic_load_explicit(&cb->lane_kicks,
		                         memory_order_acquire) != k ||
		    t1 > until) {
			cuda_pace_polled(p, n, t0, t1);
			pthread_mutex_lock(&cb->mu);
			fprep__queue_push(&cb->flying, &s->link);
			cuda_kick(&cb->cv_done, &cb->done_kicks);
			pthread_mutex_unlock(&cb->mu);
			return;
		}
		CUDA_CPU_RELAX();
	}
	t1 = cuda_now_ns();
	cuda_pace_polled(p, n, t0, t1);
	cuda_pace_seen(p, s, t1, n > 0, slept && n == 0, gap);
	cuda_complete(cb, s, e);
}

static void *cuda_completion_main(void *arg)
{
	cuda_backend *cb = arg;

	cuda_thread_start("fp-done-gpu", cb->device);
	(void)FPREP__CUDA(NULL, cudaSetDevice(cb->device));
	pthread_mutex_lock(&cb->mu);
	for (;;) {
		fprep__qnode *n = fprep__queue_pop(&cb->flying);
		if (n == NULL) {
			if (cb->lane_exited)
				break;
			cuda_spin_wait(cb, &cb->cv_done, &cb->done_kicks, 0);
			continue;
		}
		cuda_slot *s = fprep__container_of(n, cuda_slot, link);
		pthread_mutex_unlock(&cb->mu);
		cuda_finish(cb, s);
		pthread_mutex_lock(&cb->mu);
	}
	pthread_mutex_unlock(&cb->mu);
	return NULL;
}

static int cuda_submit(fprep__backend *b, fprep__job *job)
{
	cuda_backend *cb = (cuda_backend *)b;

	if (job->req.kind != FPREP_KIND_FRAME &&
	    job->req.kind != FPREP_KIND_ECHO &&
	    job->req.kind != FPREP_KIND_ROIS &&
	    job->req.kind != FPREP_KIND_BATCH)
		return FPREP_EINVAL;
	pthread_mutex_lock(&cb->mu);
	if (cb->stopping) {
		pthread_mutex_unlock(&cb->mu);
		return FPREP_ESHUTDOWN;
	}
	/* A lane thread with jobs pending is awake, or waits for a slot,
	 * which a completion's kick gives it: only the first job wakes it. */
	if (fprep__queue_empty(&cb->pending))
		cuda_kick(&cb->cv_lane, &cb->lane_kicks);
	fprep__queue_push(&cb->pending, &job->link);
	pthread_mutex_unlock(&cb->mu);
	return 0;
}

/* cuda_region_op queues a region operation for the lane thread, which
 * runs it before its next job. */
static int cuda_region_op(fprep__backend *b, fprep__memreg *r)
{
	cuda_backend *cb = (cuda_backend *)b;

	if (r == NULL || r->done == NULL)
		return FPREP_EINVAL;
	pthread_mutex_lock(&cb->mu);
	if (cb->stopping) {
		pthread_mutex_unlock(&cb->mu);
		return FPREP_ESHUTDOWN;
	}
	fprep__queue_push(&cb->admin, &r->link);
	cuda_kick(&cb->cv_lane, &cb->lane_kicks);
	pthread_mutex_unlock(&cb->mu);
	return 0;
}

/* cuda_pace_text writes the lane's pacing figures (cuda_pace) into buf:
 * the estimates in microseconds, the paced sleeps (and how many overslept),
 * the event queries that found the frame not done, the time spent polling
 * events (ms) and the polls that ended in a blocking wait. */
static void cuda_pace_text(cuda_pace *p, char *buf, size_t size)
{
	snprintf(buf, size,
	         "lone_us=%.1f gap_us=%.1f late_us=%.1f late_hi_us=%.1f "
	         "sleeps=%llu overslept=%llu empty_queries=%llu poll_ms=%llu "
	         "blocked=%llu",
	         (double)cuda_pace_load(&p->lone_ns) / 1e3,
	         (double)cuda_pace_load(&p->gap_ns) / 1e3,
	         (double)cuda_pace_load(&p->late_ns) / 1e3,
	         (double)cuda_pace_load(&p->late_hi_ns) / 1e3,
	         atomic_load(&p->sleeps), atomic_load(&p->overslept),
	         atomic_load(&p->queries_empty),
	         atomic_load(&p->spin_ns) / 1000000u, atomic_load(&p->blocked));
}

/* cuda_jpeg_text writes where the lane's JPEG frames spent their time
 * (cuda_jpeg_stats) into buf, in microseconds (means): a frame's wait for
 * a decoder (queue), its header checks (parse), an engine batch's gather
 * (its first frame taken -> its decode begun: header checks and the wait
 * for a busy engine) and call (and the mean batch), a libjpeg-turbo
 * decode (cpu), the wait for the lane once decoded (back), the lane's
 * kernel, copy and completion after it (lane), and the lane's whole time
 * (total: the lane took the job -> answered); and a batch's wait for its
 * decode after the call returned (sync; 0 with FPREP_NVJPEG_GATE=call). */
static void cuda_jpeg_text(cuda_jpeg_stats *j, char *buf, size_t size)
{
	unsigned long long f = atomic_load(&j->frames),
	                   bt = atomic_load(&j->batches),
	                   bf = atomic_load(&j->batch_frames),
	                   c = atomic_load(&j->cpu_frames),
	                   bk = atomic_load(&j->back),
	                   dn = atomic_load(&j->done);
#define PER(ns, k) ((k) ? (double)atomic_load(&(ns)) / 1e3 / (double)(k) : 0.0)
	snprintf(buf, size,
	         "frames=%llu queue_us=%.1f parse_us=%.1f batches=%llu "
	         "mean_batch=%.2f gather_us=%.1f call_us=%.1f "
	         "call_us_per_frame=%.1f sync_us=%.1f cpu_frames=%llu "
	         "cpu_us=%.1f back=%llu back_us=%.1f lane_us=%.1f "
	         "total_us=%.1f",
	         f, PER(j->queue_ns, f), PER(j->parse_ns, f), bt,
	         bt ? (double)bf / (double)bt : 0.0, PER(j->gather_ns, bt),
	         PER(j->call_ns, bt), PER(j->call_ns, bf), PER(j->sync_ns, bt),
	         c, PER(j->cpu_ns, c), bk, PER(j->back_ns, bk),
	         PER(j->lane_ns, dn), PER(j->total_ns, dn));
#undef PER
}

/* cuda_jpeg_max_text writes the largest single wait of each stage of
 * cuda_jpeg_text (INFO "jpeg_timing_max", microseconds): where a tail
 * comes from. */
static void cuda_jpeg_max_text(cuda_jpeg_stats *j, char *buf, size_t size)
{
#define MAX(ns) ((double)atomic_load(&(ns)) / 1e3)
	snprintf(buf, size,
	         "queue_us=%.0f parse_us=%.0f batch=%llu gather_us=%.0f "
	         "call_us=%.0f sync_us=%.0f cpu_us=%.0f back_us=%.0f "
	         "lane_us=%.0f total_us=%.0f",
	         MAX(j->queue_ns), MAX(j->parse_ns),
	         (unsigned long long)atomic_load(&j->batch_frames),
	         MAX(j->gather_ns), MAX(j->call_ns), MAX(j->sync_ns),
	         MAX(j->cpu_ns), MAX(j->back_ns), MAX(j->lane_ns),
	         MAX(j->total_ns));
#undef MAX
}

static void cuda_info(fprep__backend *b, char *buf, size_t size)
{
	cuda_backend *cb = (cuda_backend *)b;
	unsigned hits = 0, misses = 0;
	size_t n = strnlen(buf, size);
	char pace[256];

	if (n >= size)
		return;
	/* Paced waits (the lanes' threads): INFO "pacing". */
	cuda_pace_text(&cb->pace, pace, sizeof pace);
	snprintf(buf + n, size - n, "pacing: %s\n", pace);
	if ((n = strnlen(buf, size)) >= size)
		return;
	fprep__kcache_stats(cb->cache, &hits, &misses);
	const char *dir = fprep__kcache_dir(cb->cache);
	size_t mem_free = 0, mem_total = 0;
	char uuid[48], jt[512], jl[512], jm[512];

	cuda_jpeg_text(&cb->jstats, jt, sizeof jt);
	cuda_jpeg_text(&cb->jlone, jl, sizeof jl);
	cuda_jpeg_max_text(&cb->jmax, jm, sizeof jm);
	/* The device's memory in use by every process: what a leaked CUDA
	 * region (an IPC mapping never closed) would keep. */
	if (cudaMemGetInfo(&mem_free, &mem_total) != cudaSuccess)
		(void)cudaGetLastError();
	fprep__uuid_text(cb->uuid, uuid, sizeof(uuid));
	snprintf(buf + n, size - n,
	         "device_name: %s\n"
	         "compute_capability: %d.%d\n"
	         "kernel_arch: sm_%d\n"
	         "device_memory_mib: %zu\n"
	         "copy_engines: %d\n"
	         "slots: %u\n"
	         "integrated: %s\n"
	         "host_copy_threads: %u\n"
	         "kernel_cache: %s (%s, %u hits, %u misses)\n"
	         "device_uuid: %s\n"
	         "device_memory_used_bytes: %zu\n"
	         "jpeg_decoder: %s\n"
	         "jpeg_frames: %lu by the engine, %lu by libjpeg-turbo\n"
	         "jpeg_timing: %s\n"
	         "jpeg_timing_lone: %s\n"
	         "jpeg_timing_max: %s\n",
	         cb->device_name, cb->cc / 10, cb->cc % 10, cb->arch,
	         cb->memory >> 20, cb->copy_engines, cb->nslots,
	         cb->integrated ? "true" : "false", cb->copy_threads,
	         dir[0] ? dir : "off", cb->cache_hit ? "hit" : "miss", hits,
	         misses, uuid, mem_total - mem_free, cb->jpeg_desc,
	         atomic_load_explicit(&cb->jpeg_engine, memory_order_relaxed),
	         atomic_load_explicit(&cb->jpeg_cpu, memory_order_relaxed), jt,
	         jl, jm); /* The JPEG frames waiting for a decoder, by turns. */
	pthread_mutex_lock(&cb->mu);
	fprep__jpeg_turns_text(&cb->decode_q, buf, size);
	pthread_mutex_unlock(&cb->mu);
}

/* cuda_stats reports the kernel cache and the device's memory; on the
 * metrics thread. cudaMemGetInfo counts every process's allocations. */
static void cuda_stats(fprep__backend *b, fprep__backend_stats *st)
{
	cuda_backend *cb = (cuda_backend *)b;
	size_t free_b = 0, total_b = 0;

	fprep__kcache_stats(cb->cache, &st->cache_hits, &st->cache_misses);
	st->compiles = fprep__nvrtc_compile_count();
	if (cudaSetDevice(cb->device) == cudaSuccess &&
	    cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
		st->memory_total = total_b;
		st->memory_used = total_b - free_b;
	}
}

/* cuda_decoders_stop stops and joins the decoders; their queue is
 * empty by then (the lane exits only when no slot is with them). */
static void cuda_decoders_stop(cuda_backend *cb)
{
	pthread_mutex_lock(&cb->mu);
	cb->decoders_stop = 1;
	pthread_cond_broadcast(&cb->cv_decode);
	pthread_cond_broadcast(&cb->cv_help);
	pthread_mutex_unlock(&cb->mu);
	for (unsigned i = 0; i < cb->ndecoders; i++)
		pthread_join(cb->decoders[i], NULL);
	cb->ndecoders = 0;
	free(cb->decoders);
	cb->decoders = NULL;
}

static void cuda_free(cuda_backend *cb)
{
	cuda_decoders_stop(cb);
	if (cb->nvjpeg != NULL) {
		(void)FPREP__CUDA(NULL, cudaSetDevice(cb->device));
		fprep__nvjpeg_close(cb->nvjpeg);
	}
	if (cb->slots != NULL) {
		for (unsigned i = 0; i < cb->nslots; i++)
			cuda_slot_fini(&cb->slots[i]);
		free(cb->slots);
	}
	cudaStream_t *ss[] = {&cb->s_h2d, &cb->s_comp, &cb->s_d2h};
	for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++)
		if (*ss[i] != NULL)
			(void)FPREP__CUDA(NULL, cudaStreamDestroy(*ss[i]));
	if (cb->ev_base != NULL)
		(void)FPREP__CUDA(NULL, cudaEventDestroy(cb->ev_base));
	if (cb->ev_anchor != NULL)
		(void)FPREP__CUDA(NULL, cudaEventDestroy(cb->ev_anchor));
	if (cb->lib != NULL)
		(void)FPREP__CUDA(NULL, cudaLibraryUnload(cb->lib));
	if (cb->roi_lib != NULL)
		(void)FPREP__CUDA(NULL, cudaLibraryUnload(cb->roi_lib));
	fprep__kcache_close(cb->cache);
	fprep__copy_pool_close(cb->copier);
	fprep__jpeg_fini(&cb->jpeg);
	pthread_cond_destroy(&cb->cv_lane);
	pthread_cond_destroy(&cb->cv_done);
	pthread_cond_destroy(&cb->cv_decode);
	pthread_cond_destroy(&cb->cv_help);
	fprep__jpeg_turns_fini(&cb->decode_q);
	pthread_mutex_destroy(&cb->mu);
	free(cb);
}

static void cuda_close(fprep__backend *b, int timeout_ms)
{
	cuda_backend *cb = (cuda_backend *)b;

	if (cb->threads) {
		pthread_mutex_lock(&cb->mu);
		cb->stopping = 1;
		cb->deadline_ns =
		        cuda_now_ns() +
		        (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
		atomic_fetch_add(&cb->lane_kicks, 1);
		pthread_cond_broadcast(&cb->cv_lane);
		pthread_mutex_unlock(&cb->mu);
		pthread_join(cb->lane, NULL);
		pthread_join(cb->completion, NULL);
		if (cb->spin_ns > 0) {
			char pace[256];

			cuda_pace_text(&cb->pace, pace, sizeof pace);
			fprep__log(FPREP_LOG_INFO, "GPU %d lane pacing: %s",
			           cb->device, pace);
		}
		if (atomic_load(&cb->jstats.frames) > 0) {
			char jt[512];

			cuda_jpeg_text(&cb->jstats, jt, sizeof jt);
			fprep__log(FPREP_LOG_INFO, "GPU %d JPEG timing: %s",
			           cb->device, jt);
			cuda_jpeg_text(&cb->jlone, jt, sizeof jt);
			fprep__log(FPREP_LOG_INFO,
			           "GPU %d JPEG timing, frames alone: %s",
			           cb->device, jt);
		}
	}
	cuda_free(cb);
}

void fprep__backend_cuda_set_probe(fprep__backend *b, fprep__cuda_probe_fn fn,
                                   void *arg)
{
	cuda_backend *cb = (cuda_backend *)b;
	cb->probe = fn;
	cb->probe_arg = arg;
}

/* cuda_read_source reads dir/name into a malloc'ed string. */
static char *cuda_read_source(const char *dir, const char *name)
{
	char path[4096];
	char *text = NULL;
	long n;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (f == NULL) {
		fprep__log(FPREP_LOG_ERR, "cannot open kernel source %s: %s",
		           path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		goto out;
	text = malloc((size_t)n + 1);
	if (text == NULL)
		goto out;
	if (fread(text, 1, (size_t)n, f) != (size_t)n) {
		free(text);
		text = NULL;
		goto out;
	}
	text[n] = '\0';
out:
	if (text == NULL)
		fprep__log(FPREP_LOG_ERR, "cannot read kernel source %s", path);
	fclose(f);
	return text;
}

/* cuda_free_headers frees a table made by cuda_read_headers. */
static void cuda_free_headers(fprep__kernel_source *t)
{
	for (size_t i = 0; t != NULL && t[i].name != NULL; i++)
		free((char *)t[i].text);
	free(t);
}

/* cuda_read_headers reads the files named like the embedded headers from
 * dir into a table like fprep__kernel_headers (every text malloc'ed; free
 * it with cuda_free_headers). Returns NULL when one cannot be read. */
static fprep__kernel_source *cuda_read_headers(const char *dir)
{
	fprep__kernel_source *t;
	size_t n = 0;

	while (fprep__kernel_headers[n].name != NULL)
		n++;
	if ((t = calloc(n + 1, sizeof *t)) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		t[i].name = fprep__kernel_headers[i].name;
		t[i].text = cuda_read_source(dir, t[i].name);
		if (t[i].text == NULL) {
			t[i].name = NULL; /* the table ends here for the free */
			cuda_free_headers(t);
			return NULL;
		}
	}
	return t;
}

/* cuda_load_library builds (or fetches from the cache) the CUBIN of the
 * kernel source name (embedded, or read from cfg->kernel_dir) and loads it
 * into *libp; a cached CUBIN the driver refuses is recompiled once. *hit
 * tells whether it came from the cache. */
static int cuda_load_library(cuda_backend *cb, const fprep__cuda_config *cfg,
                             const char *name, cudaLibrary_t *libp, int *hit)
{
	const fprep__kernel_source *headers = fprep__kernel_headers;
	fprep__kernel_source *owned_headers = NULL;
	const char *text = NULL;
	char *owned = NULL;
	char msg[FPREP_MESSAGE_SIZE];
	fprep__gpu_status st = {0};
	void *cubin = NULL;
	size_t size = 0;
	int err = FPREP_EIO;

	if (cfg->kernel_dir != NULL) {
		text = owned = cuda_read_source(cfg->kernel_dir, name);
		headers = owned_headers = cuda_read_headers(cfg->kernel_dir);
	} else {
		for (const fprep__kernel_source *k = fprep__kernel_sources;
		     k->name != NULL; k++)
			if (strcmp(k->name, name) == 0)
				text = k->text;
	}
	if (text == NULL || headers == NULL)
		goto out;
	for (int force = 0; force < 2; force++) {
		err = fprep__kernel_build(cb->cache, name, text, headers,
		                          cb->arch, force, &cubin, &size, hit,
		                          msg, sizeof msg);
		if (err != 0) {
			fprep__log(FPREP_LOG_ERR, "%s", msg);
			goto out;
		}
		err = FPREP_ECUDA;
		if (!FPREP__CUDA(&st,
		                 cudaLibraryLoadData(libp, cubin, NULL, NULL, 0,
		                                     NULL, NULL, 0)))
			break;
		free(cubin);
		cubin = NULL;
		*libp = NULL;
		if (!*hit)
			goto out;
		fprep__log(
		        FPREP_LOG_WARNING,
		        "cached kernel %s refused by the driver: recompiling",
		        name);
	}
	err = *libp != NULL ? 0 : err;
out:
	free(cubin);
	free(owned);
	cuda_free_headers(owned_headers);
	return err;
}

/* cuda_load_kernels loads the letterbox kernels (letterbox.cu) and the
 * ROIS and BATCH kernels (roi.cu). */
static int cuda_load_kernels(cuda_backend *cb, const fprep__cuda_config *cfg)
{
	static const char *const roi_names[3] = {
	        "fprep_roi_f32", "fprep_roi_f16", "fprep_roi_u8"};
	fprep__gpu_status st = {0};
	int err, roi_hit = 0;

	err = cuda_load_library(cb, cfg, CUDA_KERNEL_SOURCE, &cb->lib,
	                        &cb->cache_hit);
	if (err == 0)
		err = cuda_load_library(cb, cfg, CUDA_ROI_SOURCE, &cb->roi_lib,
		                        &roi_hit);
	if (err != 0)
		return err;
	for (int r = 0; r < CUDA_ROUNDINGS; r++)
		for (int f = 0; f < CUDA_FAMILIES; f++) {
			cudaKernel_t *ks = cb->kernel[r][f];
			const char *const *names = cuda_kernel_names[r][f];

			for (int i = 0; i < 3; i++)
				if (FPREP__CUDA(&st, cudaLibraryGetKernel(
				                             &ks[i], cb->lib,
				                             names[i])))
					return FPREP_ECUDA;
		}
	for (int i = 0; i < 3; i++)
		if (FPREP__CUDA(&st, cudaLibraryGetKernel(&cb->roi_kernel[i],
		                                          cb->roi_lib,
		                                          roi_names[i])))
			return FPREP_ECUDA;
	return 0;
}

int fprep__backend_cuda_open(fprep__backend **bp, const fprep__cuda_config *cfg)
{
	cuda_backend *cb = NULL;
	fprep__gpu_status st = {0};
	struct cudaDeviceProp prop;
	pthread_condattr_t ca;
	int ndev = fprep__cuda_device_count();
	int err = FPREP_ECUDA;

	*bp = NULL;
	if (cfg->device < 0 || cfg->device >= ndev) {
		fprep__log(FPREP_LOG_ERR,
		           "CUDA device %d not present (%d found)", cfg->device,
		           ndev);
		return FPREP_EUNSUPPORTED;
	}
	cb = calloc(1, sizeof *cb);
	if (cb == NULL)
		return FPREP_ENOMEM;
	fprep__jpeg_init(&cb->jpeg);
	cb->base.name = "cuda";
	cb->base.submit = cuda_submit;
	cb->base.info = cuda_info;
	cb->base.close = cuda_close;
	cb->base.region_op = cuda_region_op;
	cb->base.stats = cuda_stats;
	cb->device = cfg->device;
	cb->spin_ns = cfg->spin_ns;
	cb->nslots = cfg->slots < 2 ? 2 : cfg->slots;
	cb->base.capacity = cb->nslots;
	cb->transfer = cfg->transfer;
	cb->all_rows = cfg->all_rows;
	cb->trace = cfg->trace;
	fprep__queue_init(&cb->pending);
	fprep__queue_init(&cb->flying);
	fprep__queue_init(&cb->admin);
	fprep__queue_init(&cb->decoded);
	pthread_mutex_init(&cb->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cb->cv_decode, &ca);
	pthread_cond_init(&cb->cv_help, &ca);
	pthread_cond_init(&cb->cv_lane, &ca);
	pthread_cond_init(&cb->cv_done, &ca);
	pthread_condattr_destroy(&ca);

	err = fprep__jpeg_turns_init(&cb->decode_q, &cb->mu, 0, 0);
	if (err != 0)
		goto fail;
	err = FPREP_ECUDA;
	if (FPREP__CUDA(&st, cudaSetDevice(cb->device)) ||
	    FPREP__CUDA(&st, cudaGetDeviceProperties(&prop, cb->device)))
		goto fail;
	snprintf(cb->device_name, sizeof cb->device_name, "%s", prop.name);
	memcpy(cb->uuid, prop.uuid.bytes, sizeof(cb->uuid));
	cb->cc = prop.major * 10 + prop.minor;
	cb->memory = prop.totalGlobalMem;
	cb->copy_engines = prop.asyncEngineCount;
	cb->integrated = prop.integrated;
	cb->arch = fprep__nvrtc_arch(cb->cc);
	if (cb->arch == 0) {
		fprep__log(FPREP_LOG_ERR,
		           "NVRTC cannot compile for compute capability %d.%d",
		           cb->cc / 10, cb->cc % 10);
		err = FPREP_ENVRTC;
		goto fail;
	}
	err = fprep__kcache_open(&cb->cache, cfg->cache_dir,
	                         cfg->cache_enabled);
	if (err != 0)
		goto fail;
	err = cuda_load_kernels(cb, cfg);
	if (err != 0)
		goto fail;
	err = FPREP_ECUDA;
	if (FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &cb->s_h2d, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &cb->s_comp, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &cb->s_d2h, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(&st, cudaEventCreateWithFlags(&cb->ev_base,
	                                              cudaEventDefault)) ||
	    FPREP__CUDA(&st, cudaEventRecord(cb->ev_base, cb->s_h2d)) ||
	    FPREP__CUDA(&st, cudaEventSynchronize(cb->ev_base)) ||
	    FPREP__CUDA(&st, cudaEventCreateWithFlags(&cb->ev_anchor,
	                                              cudaEventDefault)))
		goto fail;
	cuda_anchor(cb);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cb->copy_threads =
	        ncpu >= 8 ? (unsigned)(ncpu / 4 < 4 ? ncpu / 4 : 4) : 0;
	if (fprep__copy_pool_open(&cb->copier, cb->copy_threads) != 0) {
		err = FPREP_ENOMEM;
		goto fail;
	}
	/* Slots kept for JPEG frames (cuda_jpeg_plan), past the raw ones. */
	char jwhy[160] = "";
	unsigned jthreads = 0;
	cb->raw_slots = cb->nslots;
	cb->nslots += cuda_jpeg_plan(cb, cfg->jpeg_engine, ncpu, &jthreads,
	                             jwhy, sizeof jwhy);
	cb->slots = calloc(cb->nslots, sizeof *cb->slots);
	if (cb->slots == NULL) {
		err = FPREP_ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < cb->nslots; i++)
		if (cuda_slot_init(&cb->slots[i],
		                   cb->transfer != FPREP__CUDA_STAGED,
		                   i < cb->raw_slots, &st)) {
			err = st.code == cudaErrorMemoryAllocation
			              ? FPREP_ENOMEM
			              : FPREP_ECUDA;
			goto fail;
		}
	cuda_jpeg_setup(cb, cfg->lane, jthreads, jwhy, sizeof jwhy);
	if (pthread_create(&cb->lane, NULL, cuda_lane_main, cb) != 0) {
		err = FPREP_ENOMEM;
		goto fail;
	}
	if (pthread_create(&cb->completion, NULL, cuda_completion_main, cb) !=
	    0) {
		pthread_mutex_lock(&cb->mu);
		cb->stopping = 1;
		atomic_fetch_add(&cb->lane_kicks, 1);
		pthread_cond_broadcast(&cb->cv_lane);
		pthread_mutex_unlock(&cb->mu);
		pthread_join(cb->lane, NULL);
		err = FPREP_ENOMEM;
		goto fail;
	}
	cb->threads = 1;
	fprep__log(FPREP_LOG_INFO,
	           "GPU lane %u on device %d (%s, sm_%d, %d copy engines), %u "
	           "staging slots",
	           cfg->lane, cb->device, cb->device_name, cb->cc,
	           cb->copy_engines, cb->nslots);
	*bp = &cb->base;
	return 0;
fail:
	fprep__log(FPREP_LOG_ERR, "GPU backend on device %d not started: %s",
	           cfg->device, fprep_strerror(err));
	cuda_free(cb);
	return err;
}

void fprep__backend_cuda_identity(fprep__backend *b, int *device,
                                  uint8_t uuid[FPREP_CUDA_UUID_SIZE],
                                  char *name, size_t size)
{
	cuda_backend *cb = (cuda_backend *)b;

	*device = cb->device;
	memcpy(uuid, cb->uuid, sizeof(cb->uuid));
	snprintf(name, size, "%s", cb->device_name);
}
