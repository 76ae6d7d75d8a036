/*
 * bench_nvjpeg_backends.c: how fast each of nvJPEG's backends decodes ONE
 * JPEG (a 1080p photograph, say) into device memory, beside the batched
 * hardware engine frameprepd's lane uses (src/backend/gpu/nvjpeg_decode.c)
 * and libjpeg-turbo on a CPU thread.
 *
 * Usage: bench_nvjpeg_backends DIR [THREADS] [SECONDS]
 *   DIR: a folder of .jpg files (all of them are used, in name order);
 *   THREADS: the second throughput column's thread count (default 4);
 *   SECONDS: each throughput measure's length (default 2).
 *
 * Rows (each on its own handle, flags as the lane's:
 * NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION | BITSTREAM_STRICT |
 * HW_DECODE_NO_PIPELINE, or 0 where nvjpegCreateEx refuses those):
 *   hw_batched_1   NVJPEG_BACKEND_HARDWARE, nvjpegDecodeBatchedInitialize
 *                  + nvjpegDecodeBatched, one image a batch (the lane);
 *   hw_batched_32  the same, 32 images a batch (the files repeated): its
 *                  "lone" figures are one whole batch's;
 *   hw_decoupled   the decoupled API on NVJPEG_BACKEND_HARDWARE (may be
 *                  refused: the engine is documented for the batched API);
 *   gpu_hybrid     the decoupled API on NVJPEG_BACKEND_GPU_HYBRID:
 *                  nvjpegJpegStreamParse, nvjpegDecodeJpegHost,
 *                  nvjpegDecodeJpegTransferToDevice, nvjpegDecodeJpegDevice,
 *                  a pinned and a device buffer attached to the state;
 *   hybrid         the same on NVJPEG_BACKEND_HYBRID;
 *   simple         nvjpegDecode on NVJPEG_BACKEND_DEFAULT;
 *   turbojpeg_cpu  tjDecompress2 into host memory (no GPU part).
 * Output NVJPEG_OUTPUT_RGBI (interleaved, as the lane's). For each row:
 * 5 warm-up decodes, then 50 lone decodes (the files in turn), each timed
 * from its first call to the return of its last host call ("host") and
 * to the return of cudaStreamSynchronize ("total"): p50 and p90 in us;
 * then every file decoded and copied back, against tjDecompress2's RGB:
 * max and mean |difference| (a batch: every slot of the first); then
 * frames/s over SECONDS from 1 and from THREADS threads (a stream, state
 * and buffers each, the handle shared), and from THREADS threads each on
 * a handle of its own (whether the library serialises a handle's calls).
 * Separately: the lane's header check alone (nvjpegJpegStreamParseHeader
 * + nvjpegDecodeBatchedSupported), p50.
 *
 * A row whose set-up or decode fails prints the call and its
 * nvjpegStatus_t, and the others go on. Exit status: 0 when it ran and
 * every decoded image is near libjpeg-turbo's (mean |difference| <= 2),
 * 1 when one is not or when no nvJPEG row decoded at all, 2 on bad
 * arguments or files, 77 with a message where there is no GPU or no
 * nvJPEG.
 */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <nvjpeg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#define WARMUP    5
#define LONE      50
#define MAX_FILES 64
#define MAX_BATCH 32
#define MAX_THR   16

#define STR_(x) #x
#define STR(x)  STR_(x)
#define SONAME  "libnvjpeg.so." STR(NVJPEG_VER_MAJOR)

/* nvJPEG's functions, looked up at run time as the lane does. */
#define FUNCS(X)                                                               \
	X(nvjpegGetProperty)                                                   \
	X(nvjpegCreateEx)                                                      \
	X(nvjpegDestroy)                                                       \
	X(nvjpegGetHardwareDecoderInfo)                                        \
	X(nvjpegJpegStateCreate)                                               \
	X(nvjpegJpegStateDestroy)                                              \
	X(nvjpegDecodeBatchedInitialize)                                       \
	X(nvjpegDecodeBatched)                                                 \
	X(nvjpegDecodeBatchedSupported)                                        \
	X(nvjpegDecode)                                                        \
	X(nvjpegJpegStreamCreate)                                              \
	X(nvjpegJpegStreamDestroy)                                             \
	X(nvjpegJpegStreamParse)                                               \
	X(nvjpegJpegStreamParseHeader)                                         \
	X(nvjpegDecoderCreate)                                                 \
	X(nvjpegDecoderDestroy)                                                \
	X(nvjpegDecoderStateCreate)                                            \
	X(nvjpegDecodeJpegHost)                                                \
	X(nvjpegDecodeJpegTransferToDevice)                                    \
	X(nvjpegDecodeJpegDevice)                                              \
	X(nvjpegDecodeParamsCreate)                                            \
	X(nvjpegDecodeParamsDestroy)                                           \
	X(nvjpegDecodeParamsSetOutputFormat)                                   \
	X(nvjpegBufferPinnedCreate)                                            \
	X(nvjpegBufferPinnedDestroy)                                           \
	X(nvjpegBufferDeviceCreate)                                            \
	X(nvjpegBufferDeviceDestroy)                                           \
	X(nvjpegStateAttachPinnedBuffer)                                       \
	X(nvjpegStateAttachDeviceBuffer)

static struct {
#define FIELD(f) __typeof__(f) *f;
	FUNCS(FIELD)
#undef FIELD
} nv;

/* load_from dlopens path and looks every function up; the handle, or
 * NULL (why says why). */
static void *load_from(const char *path, char *why, size_t why_size)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (h == NULL) {
		snprintf(why, why_size, "%s", dlerror());
		return NULL;
	}
#define LOOKUP(f)                                                              \
	if ((*(void **)&nv.f = dlsym(h, #f)) == NULL) {                        \
		snprintf(why, why_size, "%s: no %s", path, #f);                \
		dlclose(h);                                                    \
		return NULL;                                                   \
	}
	FUNCS(LOOKUP)
#undef LOOKUP
	return h;
}

/* load_nvjpeg: FPREP_NVJPEG's file if set ("off": none), else the soname
 * through the loader's search, else the build folder's copy. */
static void *load_nvjpeg(char *why, size_t why_size)
{
	const char *env = getenv("FPREP_NVJPEG");
	void *h;

	if (env != NULL && env[0] != '\0') {
		if (strcmp(env, "off") == 0 || strcmp(env, "0") == 0) {
			snprintf(why, why_size, "FPREP_NVJPEG=%s", env);
			return NULL;
		}
		return load_from(env, why, why_size);
	}
	h = load_from(SONAME, why, why_size);
#ifdef FPREP_NVJPEG_LIBDIR
	if (h == NULL)
		h = load_from(FPREP_NVJPEG_LIBDIR "/" SONAME, why, why_size);
#endif
	return h;
}

static const char *st_name(nvjpegStatus_t s)
{
	static const char *const names[] = {"SUCCESS",
	                                    "NOT_INITIALIZED",
	                                    "INVALID_PARAMETER",
	                                    "BAD_JPEG",
	                                    "JPEG_NOT_SUPPORTED",
	                                    "ALLOCATOR_FAILURE",
	                                    "EXECUTION_FAILED",
	                                    "ARCH_MISMATCH",
	                                    "INTERNAL_ERROR",
	                                    "IMPLEMENTATION_NOT_SUPPORTED",
	                                    "INCOMPLETE_BITSTREAM"};

	if ((unsigned)s < sizeof names / sizeof names[0])
		return names[s];
	return "unknown status";
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The files, read once. */
static struct file {
	unsigned char *data;
	size_t size;
	int w, h;
	unsigned char *ref; /* tjDecompress2's RGB, w * 3 a row */
} files[MAX_FILES];
static int nfiles;
static size_t max_out; /* the largest RGB image's bytes */

enum api { API_BATCHED, API_DECOUPLED, API_SIMPLE, API_CPU };

struct row {
	const char *name;
	nvjpegBackend_t backend;
	enum api api;
	int batch;
	/* results */
	nvjpegHandle_t h;
	unsigned flags; /* h's */
	char err[160];  /* the call that failed and its status */
	double host50, total50, total90;
	double fps1, fpsn, fpsown; /* fpsown: the n threads, a handle each */
	int maxdiff;
	double meandiff;
	int checked;
};

#define ROW(n, b, a, k)                                                        \
	{                                                                      \
		.name = n, .backend = b, .api = a, .batch = k                  \
	}
static struct row rows[] = {
        ROW("hw_batched_1", NVJPEG_BACKEND_HARDWARE, API_BATCHED, 1),
        ROW("hw_batched_32", NVJPEG_BACKEND_HARDWARE, API_BATCHED, 32),
        ROW("hw_decoupled", NVJPEG_BACKEND_HARDWARE, API_DECOUPLED, 1),
        ROW("gpu_hybrid", NVJPEG_BACKEND_GPU_HYBRID, API_DECOUPLED, 1),
        ROW("hybrid", NVJPEG_BACKEND_HYBRID, API_DECOUPLED, 1),
        ROW("simple", NVJPEG_BACKEND_DEFAULT, API_SIMPLE, 1),
        ROW("turbojpeg_cpu", NVJPEG_BACKEND_DEFAULT, API_CPU, 1),
};
#undef ROW
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

/* One thread's decoder for a row: its stream, state, buffers and outputs. */
struct worker {
	struct row *r;
	nvjpegHandle_t h; /* r->h, or its own (own) */
	int own;
	cudaStream_t stream;
	nvjpegJpegState_t state;
	nvjpegJpegDecoder_t dec;
	nvjpegJpegStream_t js;
	nvjpegDecodeParams_t params;
	nvjpegBufferPinned_t pinned;
	nvjpegBufferDevice_t devbuf;
	unsigned char *out[MAX_BATCH]; /* device (host for API_CPU) */
	tjhandle tj;
	char err[160];
	/* throughput */
	double until;
	long frames;
};

/* TRY returns -1 from the function when expr fails, w->err naming call
 * and its status; NEW does the same for a call that makes *obj, and
 * leaves *obj NULL then (for wk_close). */
#define TRY(call, expr) NEW(call, expr, NULL)
#define NEW(call, expr, obj)                                                   \
	do {                                                                   \
		nvjpegStatus_t s_ = (expr);                                    \
		if (s_ != NVJPEG_STATUS_SUCCESS) {                             \
			void **o_ = (void **)(obj);                            \
			if (o_ != NULL)                                        \
				*o_ = NULL;                                    \
			snprintf(w->err, sizeof w->err, "%s: %s (%d)", call,   \
			         st_name(s_), (int)s_);                        \
			return -1;                                             \
		}                                                              \
	} while (0)

static void wk_close(struct worker *w)
{
	for (int i = 0; i < MAX_BATCH; i++)
		if (w->out[i] != NULL) {
			if (w->r->api == API_CPU)
				free(w->out[i]);
			else
				(void)cudaFree(w->out[i]);
		}
	if (w->tj != NULL)
		tjDestroy(w->tj);
	/* In the order of nvJPEG's decoupled-decoding sample. */
	if (w->params != NULL)
		(void)nv.nvjpegDecodeParamsDestroy(w->params);
	if (w->js != NULL)
		(void)nv.nvjpegJpegStreamDestroy(w->js);
	if (w->pinned != NULL)
		(void)nv.nvjpegBufferPinnedDestroy(w->pinned);
	if (w->devbuf != NULL)
		(void)nv.nvjpegBufferDeviceDestroy(w->devbuf);
	if (w->state != NULL)
		(void)nv.nvjpegJpegStateDestroy(w->state);
	if (w->dec != NULL)
		(void)nv.nvjpegDecoderDestroy(w->dec);
	if (w->stream != NULL)
		(void)cudaStreamDestroy(w->stream);
	if (w->own && w->h != NULL)
		(void)nv.nvjpegDestroy(w->h);
	memset(w, 0, sizeof *w);
}

static int wk_open(struct worker *w, struct row *r, int own)
{
	nvjpegHandle_t h = r->h;
	cudaError_t ce;

	memset(w, 0, sizeof *w);
	w->r = r;
	w->h = r->h;
	if (own && r->api != API_CPU) {
		nvjpegStatus_t s = nv.nvjpegCreateEx(r->backend, NULL, NULL,
		                                     r->flags, &w->h);

		w->own = 1;
		if (s != NVJPEG_STATUS_SUCCESS) {
			w->h = NULL;
			snprintf(w->err, sizeof w->err,
			         "nvjpegCreateEx: %s (%d)", st_name(s), (int)s);
			return -1;
		}
		h = w->h;
	}
	if (r->api == API_CPU) {
		if ((w->tj = tjInitDecompress()) == NULL ||
		    (w->out[0] = malloc(max_out)) == NULL) {
			snprintf(w->err, sizeof w->err, "tjInitDecompress");
			return -1;
		}
		return 0;
	}
	ce = cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking);
	if (ce != cudaSuccess) {
		snprintf(w->err, sizeof w->err, "cudaStreamCreate: %s",
		         cudaGetErrorString(ce));
		return -1;
	}
	for (int i = 0; i < r->batch; i++) {
		ce = cudaMalloc((void **)&w->out[i], max_out);
		if (ce != cudaSuccess) {
			snprintf(w->err, sizeof w->err, "cudaMalloc: %s",
			         cudaGetErrorString(ce));
			return -1;
		}
	}
	switch (r->api) {
	case API_BATCHED:
		NEW("nvjpegJpegStateCreate",
		    nv.nvjpegJpegStateCreate(h, &w->state), &w->state);
		TRY("nvjpegDecodeBatchedInitialize",
		    nv.nvjpegDecodeBatchedInitialize(h, w->state, r->batch, 1,
		                                     NVJPEG_OUTPUT_RGBI));
		break;
	case API_DECOUPLED:
		NEW("nvjpegDecoderCreate",
		    nv.nvjpegDecoderCreate(h, r->backend, &w->dec), &w->dec);
		NEW("nvjpegDecoderStateCreate",
		    nv.nvjpegDecoderStateCreate(h, w->dec, &w->state),
		    &w->state);
		NEW("nvjpegBufferPinnedCreate",
		    nv.nvjpegBufferPinnedCreate(h, NULL, &w->pinned),
		    &w->pinned);
		NEW("nvjpegBufferDeviceCreate",
		    nv.nvjpegBufferDeviceCreate(h, NULL, &w->devbuf),
		    &w->devbuf);
		TRY("nvjpegStateAttachPinnedBuffer",
		    nv.nvjpegStateAttachPinnedBuffer(w->state, w->pinned));
		TRY("nvjpegStateAttachDeviceBuffer",
		    nv.nvjpegStateAttachDeviceBuffer(w->state, w->devbuf));
		NEW("nvjpegJpegStreamCreate",
		    nv.nvjpegJpegStreamCreate(h, &w->js), &w->js);
		NEW("nvjpegDecodeParamsCreate",
		    nv.nvjpegDecodeParamsCreate(h, &w->params), &w->params);
		TRY("nvjpegDecodeParamsSetOutputFormat",
		    nv.nvjpegDecodeParamsSetOutputFormat(w->params,
		                                         NVJPEG_OUTPUT_RGBI));
		break;
	case API_SIMPLE:
		NEW("nvjpegJpegStateCreate",
		    nv.nvjpegJpegStateCreate(h, &w->state), &w->state);
		break;
	case API_CPU:
		break;
	}
	return 0;
}

/* wk_submit decodes the row's batch of files first, first + 1, ... (in
 * turn) into w->out; returns when its host calls have (the GPU's part may
 * still run on w->stream). 0 or -1 (w->err says why). */
static int wk_submit(struct worker *w, int first)
{
	struct row *r = w->r;
	nvjpegHandle_t h = w->h;
	nvjpegImage_t dst[MAX_BATCH];
	const unsigned char *data[MAX_BATCH];
	size_t len[MAX_BATCH];
	const struct file *f = &files[first % nfiles];

	memset(dst, 0, sizeof dst);
	for (int i = 0; i < r->batch; i++) {
		const struct file *fi = &files[(first + i) % nfiles];

		data[i] = fi->data;
		len[i] = fi->size;
		dst[i].channel[0] = w->out[i];
		dst[i].pitch[0] = (size_t)fi->w * 3;
	}
	switch (r->api) {
	case API_BATCHED:
		TRY("nvjpegDecodeBatched",
		    nv.nvjpegDecodeBatched(h, w->state, data, len, dst,
		                           w->stream));
		break;
	case API_DECOUPLED:
		TRY("nvjpegJpegStreamParse",
		    nv.nvjpegJpegStreamParse(h, f->data, f->size, 0, 0, w->js));
		TRY("nvjpegDecodeJpegHost",
		    nv.nvjpegDecodeJpegHost(h, w->dec, w->state, w->params,
		                            w->js));
		TRY("nvjpegDecodeJpegTransferToDevice",
		    nv.nvjpegDecodeJpegTransferToDevice(h, w->dec, w->state,
		                                        w->js, w->stream));
		TRY("nvjpegDecodeJpegDevice",
		    nv.nvjpegDecodeJpegDevice(h, w->dec, w->state, &dst[0],
		                              w->stream));
		break;
	case API_SIMPLE:
		TRY("nvjpegDecode",
		    nv.nvjpegDecode(h, w->state, f->data, f->size,
		                    NVJPEG_OUTPUT_RGBI, &dst[0], w->stream));
		break;
	case API_CPU:
		if (tjDecompress2(w->tj, f->data, (unsigned long)f->size,
		                  w->out[0], f->w, f->w * 3, f->h, TJPF_RGB,
		                  0) != 0) {
			snprintf(w->err, sizeof w->err, "tjDecompress2: %s",
			         tjGetErrorStr2(w->tj));
			return -1;
		}
		break;
	}
	return 0;
}

static int wk_sync(struct worker *w)
{
	cudaError_t ce;

	if (w->r->api == API_CPU)
		return 0;
	ce = cudaStreamSynchronize(w->stream);
	if (ce != cudaSuccess) {
		snprintf(w->err, sizeof w->err, "cudaStreamSynchronize: %s",
		         cudaGetErrorString(ce));
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

static atomic_int go;

static void *wk_loop(void *arg)
{
	struct worker *w = arg;
	int i = 0;

	/* A new thread has no current CUDA context until a runtime call
	 * makes device 0's current. The engine rows failed with
	 * ALLOCATOR_FAILURE in every thread of the H100's run, where they
	 * decoded on the main thread: taken to be that. */
	if (w->r->api != API_CPU && cudaSetDevice(0) != cudaSuccess) {
		snprintf(w->err, sizeof w->err, "cudaSetDevice(0)");
		return NULL;
	}
	while (!atomic_load(&go))
		;
	while (now_us() < w->until) {
		if (wk_submit(w, i) != 0 || wk_sync(w) != 0)
			break;
		w->frames += w->r->batch;
		i += w->r->batch;
	}
	return NULL;
}

/* throughput: frames/s of n workers (threads) decoding for secs, on the
 * row's handle or (own) each on a handle of its own; 0 when a worker
 * failed (r->err set). */
static double throughput(struct row *r, int n, double secs, int own)
{
	struct worker w[MAX_THR];
	pthread_t t[MAX_THR];
	int started = 0, ok = 1;
	double t0, t1;
	long frames = 0;

	for (int i = 0; i < n; i++)
		if (wk_open(&w[i], r, own) != 0) {
			snprintf(r->err, sizeof r->err, "%d threads: %.120s", n,
			         w[i].err);
			for (int j = 0; j <= i; j++)
				wk_close(&w[j]);
			return 0;
		}
	atomic_store(&go, 0);
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		w[i].until = t0 + secs * 1e6;
		if (pthread_create(&t[i], NULL, wk_loop, &w[i]) != 0)
			break;
		started++;
	}
	atomic_store(&go, 1);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	t1 = now_us();
	for (int i = 0; i < n; i++) {
		frames += w[i].frames;
		if (w[i].err[0] != '\0' || i >= started) {
			snprintf(r->err, sizeof r->err, "%d threads: %.120s", n,
			         i >= started ? "pthread_create" : w[i].err);
			ok = 0;
		}
		wk_close(&w[i]);
	}
	return ok ? (double)frames / ((t1 - t0) / 1e6) : 0;
}

/* check: every file decoded alone (and, for a batch, the batch's slots)
 * against tjDecompress2's RGB. */
static int check(struct row *r, struct worker *w)
{
	unsigned char *host = malloc(max_out);
	long long sum = 0, count = 0;

	if (host == NULL)
		return -1;
	r->maxdiff = 0;
	for (int k = 0; k < nfiles; k++) {
		if (wk_submit(w, k) != 0 || wk_sync(w) != 0) {
			free(host);
			return -1;
		}
		for (int i = 0; i < r->batch && (i == 0 || k == 0); i++) {
			const struct file *f = &files[(k + i) % nfiles];
			size_t bytes = (size_t)f->w * 3 * (size_t)f->h;

			if (r->api == API_CPU)
				memcpy(host, w->out[i], bytes);
			else if (cudaMemcpy(host, w->out[i], bytes,
			                    cudaMemcpyDeviceToHost) !=
			         cudaSuccess) {
				snprintf(w->err, sizeof w->err,
				         "cudaMemcpy back failed");
				free(host);
				return -1;
			}
			for (size_t b = 0; b < bytes; b++) {
				int d = (int)host[b] - (int)f->ref[b];

				d = d < 0 ? -d : d;
				sum += d;
				if (d > r->maxdiff)
					r->maxdiff = d;
			}
			count += (long long)bytes;
		}
	}
	free(host);
	r->meandiff = count > 0 ? (double)sum / (double)count : 0;
	r->checked = 1;
	return 0;
}

static void run_row(struct row *r, int threads, double secs)
{
	struct worker w;
	double host[LONE], total[LONE];

	if (wk_open(&w, r, 0) != 0) {
		snprintf(r->err, sizeof r->err, "%s", w.err);
		wk_close(&w);
		return;
	}
	for (int i = 0; i < WARMUP + LONE; i++) {
		double t0 = now_us(), t1, t2;

		if (wk_submit(&w, i * r->batch) != 0)
			goto fail;
		t1 = now_us();
		if (wk_sync(&w) != 0)
			goto fail;
		t2 = now_us();
		if (i >= WARMUP) {
			host[i - WARMUP] = t1 - t0;
			total[i - WARMUP] = t2 - t0;
		}
	}
	r->host50 = pct(host, LONE, 0.5);
	r->total50 = pct(total, LONE, 0.5);
	r->total90 = pct(total, LONE, 0.9);
	if (check(r, &w) != 0)
		goto fail;
	wk_close(&w);
	r->fps1 = throughput(r, 1, secs, 0);
	if (threads > 1 && r->err[0] == '\0')
		r->fpsn = throughput(r, threads, secs, 0);
	if (threads > 1 && r->err[0] == '\0' && r->api != API_CPU)
		r->fpsown = throughput(r, threads, secs, 1);
	return;
fail:
	snprintf(r->err, sizeof r->err, "%s", w.err);
	wk_close(&w);
}

/* header_check: the lane's check of a frame before the engine takes it,
 * p50 in us (or -1). */
static double header_check(nvjpegHandle_t h)
{
	nvjpegJpegStream_t js;
	double t[LONE];
	int no = 1;

	if (nv.nvjpegJpegStreamCreate(h, &js) != NVJPEG_STATUS_SUCCESS)
		return -1;
	for (int i = 0; i < WARMUP + LONE; i++) {
		const struct file *f = &files[i % nfiles];
		double t0 = now_us();

		if (nv.nvjpegJpegStreamParseHeader(h, f->data, f->size, js) !=
		            NVJPEG_STATUS_SUCCESS ||
		    nv.nvjpegDecodeBatchedSupported(h, js, &no) !=
		            NVJPEG_STATUS_SUCCESS) {
			(void)nv.nvjpegJpegStreamDestroy(js);
			return -1;
		}
		if (i >= WARMUP)
			t[i - WARMUP] = now_us() - t0;
	}
	(void)nv.nvjpegJpegStreamDestroy(js);
	return pct(t, LONE, 0.5);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* load_files reads DIR's .jpg files and libjpeg-turbo's decode of each. */
static int load_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *names[MAX_FILES];
	int n = 0, rc = 0;
	tjhandle tj;

	if (d == NULL) {
		perror(dir);
		return -1;
	}
	while ((e = readdir(d)) != NULL && n < MAX_FILES) {
		size_t l = strlen(e->d_name);

		if (l > 4 && (strcmp(e->d_name + l - 4, ".jpg") == 0 ||
		              strcmp(e->d_name + l - 4, ".JPG") == 0))
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, by_name);
	tj = tjInitDecompress();
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct file *f = &files[nfiles];
		FILE *fp;
		long size;
		int sub, cs;

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		free(names[i]);
		if (rc != 0 || tj == NULL)
			continue;
		fp = fopen(path, "rb");
		if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 ||
		    (size = ftell(fp)) <= 0 || fseek(fp, 0, SEEK_SET) != 0 ||
		    (f->data = malloc((size_t)size)) == NULL ||
		    fread(f->data, 1, (size_t)size, fp) != (size_t)size) {
			fprintf(stderr, "%s: cannot read\n", path);
			rc = -1;
		} else if (tjDecompressHeader3(tj, f->data, (unsigned long)size,
		                               &f->w, &f->h, &sub, &cs) != 0 ||
		           (f->ref = malloc((size_t)f->w * 3 * f->h)) == NULL ||
		           tjDecompress2(tj, f->data, (unsigned long)size,
		                         f->ref, f->w, f->w * 3, f->h, TJPF_RGB,
		                         0) != 0) {
			fprintf(stderr, "%s: libjpeg-turbo: %s\n", path,
			        tjGetErrorStr2(tj));
			rc = -1;
		} else {
			f->size = (size_t)size;
			if ((size_t)f->w * 3 * f->h > max_out)
				max_out = (size_t)f->w * 3 * f->h;
			printf("%s: %dx%d, %ld bytes\n", path, f->w, f->h,
			       size);
			nfiles++;
		}
		if (fp != NULL)
			fclose(fp);
		if (rc != 0) {
			free(f->data);
			free(f->ref);
			memset(f, 0, sizeof *f);
		}
	}
	if (tj != NULL)
		tjDestroy(tj);
	if (rc == 0 && nfiles == 0) {
		fprintf(stderr, "%s: no .jpg files\n", dir);
		rc = -1;
	}
	return rc;
}

static void free_files(void)
{
	for (int i = 0; i < nfiles; i++) {
		free(files[i].data);
		free(files[i].ref);
	}
	nfiles = 0;
}

int main(int argc, char **argv)
{
	unsigned flags = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION |
	                 NVJPEG_FLAGS_BITSTREAM_STRICT |
	                 NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE;
	int threads = argc > 2 ? atoi(argv[2]) : 4;
	double secs = argc > 3 ? atof(argv[3]) : 2.0;
	int count = 0, major = 0, minor = 0, patch = 0, bad = 0;
	unsigned engines = 0, cores = 0;
	struct cudaDeviceProp prop;
	char why[256];
	void *lib;
	int hc_done = 0;
	cudaError_t ce;

	if (argc < 2 || threads < 1 || threads > MAX_THR || secs <= 0) {
		fprintf(stderr,
		        "usage: %s DIR [THREADS 1..%d] [SECONDS]\n"
		        "  DIR: a folder of .jpg files\n",
		        argv[0], MAX_THR);
		return 2;
	}
	ce = cudaGetDeviceCount(&count);
	if (ce != cudaSuccess || count == 0) {
		printf("bench_nvjpeg_backends: no GPU (%s): skipped\n",
		       ce != cudaSuccess ? cudaGetErrorString(ce)
		                         : "0 devices");
		return 77;
	}
	lib = load_nvjpeg(why, sizeof why);
	if (lib == NULL) {
		printf("bench_nvjpeg_backends: nvJPEG not loaded (%s): "
		       "skipped\n",
		       why);
		return 77;
	}
	if (load_files(argv[1]) != 0) {
		free_files();
		return 2;
	}
	(void)nv.nvjpegGetProperty(MAJOR_VERSION, &major);
	(void)nv.nvjpegGetProperty(MINOR_VERSION, &minor);
	(void)nv.nvjpegGetProperty(PATCH_LEVEL, &patch);
	if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
		snprintf(prop.name, sizeof prop.name, "GPU 0");
	printf("%s; nvJPEG %d.%d.%d; %d files; %d threads, %.1f s a "
	       "throughput run\n",
	       prop.name, major, minor, patch, nfiles, threads, secs);
	for (int i = 0; i < NROWS; i++) {
		struct row *r = &rows[i];
		unsigned used = flags;
		nvjpegStatus_t s = NVJPEG_STATUS_SUCCESS;

		if (r->api != API_CPU) {
			/* One handle a backend, shared by its rows. */
			for (int j = 0; j < i; j++)
				if (rows[j].api != API_CPU &&
				    rows[j].backend == r->backend &&
				    rows[j].h) {
					r->h = rows[j].h;
					r->flags = rows[j].flags;
				}
			if (r->h == NULL) {
				s = nv.nvjpegCreateEx(r->backend, NULL, NULL,
				                      used, &r->h);
				if (s != NVJPEG_STATUS_SUCCESS) {
					used = 0;
					s = nv.nvjpegCreateEx(r->backend, NULL,
					                      NULL, used,
					                      &r->h);
				}
				if (s != NVJPEG_STATUS_SUCCESS) {
					r->h = NULL;
					snprintf(r->err, sizeof r->err,
					         "nvjpegCreateEx: %s (%d)",
					         st_name(s), (int)s);
					printf("%s: %s\n", r->name, r->err);
					continue;
				}
				r->flags = used;
				if (used != flags)
					printf("%s: the lane's flags refused, "
					       "flags 0\n",
					       r->name);
			}
		}
		if (r->backend == NVJPEG_BACKEND_HARDWARE && !hc_done) {
			hc_done = 1;
			if (nv.nvjpegGetHardwareDecoderInfo(r->h, &engines,
			                                    &cores) ==
			    NVJPEG_STATUS_SUCCESS)
				printf("hardware decoder: %u engines, %u "
				       "cores each\n",
				       engines, cores);
			printf("header check (nvjpegJpegStreamParseHeader + "
			       "nvjpegDecodeBatchedSupported): p50 %.0f us\n",
			       header_check(r->h));
		}
		run_row(r, threads, secs);
		if (r->err[0] != '\0')
			printf("%s: %s\n", r->name, r->err);
		if (r->checked && r->meandiff > 2.0)
			bad = 1;
		fflush(stdout);
	}
	printf("\n| backend | lone p50 host us | lone p50 total us | "
	       "p90 total us | frames/s 1 thread | frames/s %d threads | "
	       "the same, a handle each | max diff | mean diff |\n",
	       threads);
	printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < NROWS; i++) {
		struct row *r = &rows[i];

		if (r->total50 <= 0) {
			printf("| %s | failed: %s |\n", r->name, r->err);
			continue;
		}
		printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %d | "
		       "%.3f |%s%s\n",
		       r->name, r->host50, r->total50, r->total90, r->fps1,
		       r->fpsn, r->fpsown, r->maxdiff, r->meandiff,
		       r->err[0] ? " " : "", r->err);
	}
	printf("(hw_batched_32: one batch of 32 a \"lone\" decode; diffs "
	       "against tjDecompress2's RGB)\n");
	{
		const struct row *best = NULL;

		/* The fastest one-image decode (hw_batched_32 is 32). */
		for (int i = 0; i < NROWS; i++)
			if (rows[i].batch == 1 && rows[i].total50 > 0 &&
			    (best == NULL || rows[i].total50 < best->total50))
				best = &rows[i];
		if (best != NULL && rows[0].total50 > 0)
			printf("fastest lone decode: %s, p50 %.0f us = %.2fx "
			       "hw_batched_1's %.0f us\n",
			       best->name, best->total50,
			       best->total50 / rows[0].total50,
			       rows[0].total50);
	}
	for (int i = 0; i < NROWS; i++) {
		int shared = 0;

		for (int j = i + 1; j < NROWS; j++)
			shared |= rows[j].h == rows[i].h;
		if (rows[i].h != NULL && !shared)
			(void)nv.nvjpegDestroy(rows[i].h);
	}
	free_files();
	for (int i = 0; i < NROWS; i++)
		if (rows[i].api != API_CPU && rows[i].total50 > 0)
			return bad;
	printf("no nvJPEG backend decoded: FAIL\n");
	return 1;
}
