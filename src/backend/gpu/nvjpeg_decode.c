/*
 * nvjpeg_decode.c: the GPU's JPEG engine through nvJPEG's batched API
 * (see nvjpeg_decode.h).
 *
 * The design is simple: the library is opened with dlopen and its dozen
 * functions looked up once per process, so no binary links it and a
 * machine without it decodes with libjpeg-turbo. A handle is made on
 * NVJPEG_BACKEND_HARDWARE, the only backend that takes the Huffman decode
 * off the CPU: the hybrid backends do it on the calling thread, no faster
 * than libjpeg-turbo on the lane's decoder threads (cuda_decoder.c). So a
 * GPU without an engine gets no handle, and its lane decodes with
 * libjpeg-turbo on those threads.
 *
 * Flags: NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION makes the chroma
 * upsampling libjpeg's "fancy" (triangle) filter, as libjpeg-turbo and so
 * cv2.imdecode do, where nvJPEG otherwise replicates chroma samples (the
 * up to 39 levels torchvision's decode_jpeg differs by);
 * NVJPEG_FLAGS_BITSTREAM_STRICT refuses what does not follow the standard,
 * so such a file goes to libjpeg-turbo, whose verdict (a named error, not
 * a partly grey frame) the daemon answers with; and
 * NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE, so the engine holds no frames of a
 * batch back for the next one (FPREP_NVJPEG_PIPELINE=1 leaves it off: the
 * library's default, which buffers images across batches, to compare).
 * The batched API wants nvjpegDecodeBatchedInitialize again whenever the
 * batch size changes: a decoder keeps one state per batch size (made when
 * first used, initialised again only when the output format changes or a
 * batch failed), which spares that as the number of frames in flight
 * moves.
 *
 * The handle is shared by a lane's decoding threads (nvJPEG's handle is
 * thread-safe); the states and the parsed-stream object are not, so each
 * thread has its own (fprep__nvjpeg_dec). nvjpegDecodeBatched does its
 * host work (parsing every bitstream, building the engine's descriptors)
 * and its waits for the engine on the calling thread, and the engine runs
 * one batch at a time, spread over its cores: so a lane's decoders
 * (cuda_decoder.c) take turns, one gathering the next batch while the
 * other's is in the engine.
 */
#include "gpu/nvjpeg_decode.h"

#include <stdio.h>
#include <string.h>

#ifdef FPREP_HAVE_NVJPEG_H

#include <dlfcn.h>
#include <nvjpeg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "log.h"

#define NVJ_STR_(x) #x
#define NVJ_STR(x)  NVJ_STR_(x)
#define NVJ_SONAME  "libnvjpeg.so." NVJ_STR(NVJPEG_VER_MAJOR)

/* The functions used, looked up by name. */
#define NVJ_FUNCS(X)                                                           \
	X(nvjpegGetProperty)                                                   \
	X(nvjpegCreateEx)                                                      \
	X(nvjpegDestroy)                                                       \
	X(nvjpegGetHardwareDecoderInfo)                                        \
	X(nvjpegJpegStateCreate)                                               \
	X(nvjpegJpegStateDestroy)                                              \
	X(nvjpegDecodeBatchedInitialize)                                       \
	X(nvjpegDecodeBatched)                                                 \
	X(nvjpegJpegStreamCreate)                                              \
	X(nvjpegJpegStreamDestroy)                                             \
	X(nvjpegJpegStreamParseHeader)                                         \
	X(nvjpegDecodeBatchedSupported)

static struct {
#define NVJ_FIELD(f) __typeof__(f) *f;
	NVJ_FUNCS(NVJ_FIELD)
#undef NVJ_FIELD
} nvj;

static pthread_once_t nvj_once = PTHREAD_ONCE_INIT;
static int nvj_loaded;
static char nvj_why[160]; /* why not loaded */
static char nvj_version[32];

/* nvj_try dlopens path and looks every function up; 0 or -1 (nvj_why
 * says why, the handle is closed). */
static int nvj_try(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (h == NULL) {
		snprintf(nvj_why, sizeof nvj_why, "%s", dlerror());
		return -1;
	}
#define NVJ_LOOKUP(f)                                                          \
	if ((*(void **)&nvj.f = dlsym(h, #f)) == NULL) {                       \
		snprintf(nvj_why, sizeof nvj_why, "%s: no %s", path, #f);      \
		dlclose(h);                                                    \
		memset(&nvj, 0, sizeof nvj);                                   \
		return -1;                                                     \
	}
	NVJ_FUNCS(NVJ_LOOKUP)
#undef NVJ_LOOKUP
	return 0;
}

/* nvj_load runs once: FPREP_NVJPEG's file if set ("off": none), else the
 * soname through the loader's search (LD_LIBRARY_PATH, the CUDA toolkit
 * in ld.so.conf), else the copy deploy/setup.sh fetched into the build
 * folder (FPREP_NVJPEG_LIBDIR). */
static void nvj_load(void)
{
	const char *env = getenv("FPREP_NVJPEG");
	const char *from = NVJ_SONAME;
	int major = 0, minor = 0, patch = 0;

	if (env != NULL && env[0] != '\0') {
		if (strcmp(env, "off") == 0 || strcmp(env, "0") == 0) {
			snprintf(nvj_why, sizeof nvj_why,
			         "turned off (FPREP_NVJPEG=%s)", env);
			goto out;
		}
		from = env;
		if (nvj_try(env) != 0)
			goto out;
	} else if (nvj_try(NVJ_SONAME) != 0) {
#ifdef FPREP_NVJPEG_LIBDIR
		char why[sizeof nvj_why];

		memcpy(why, nvj_why, sizeof why);
		from = FPREP_NVJPEG_LIBDIR "/" NVJ_SONAME;
		if (nvj_try(from) != 0) {
			memcpy(nvj_why, why, sizeof why); /* the first's */
			goto out;
		}
#else
		goto out;
#endif
	}
	(void)nvj.nvjpegGetProperty(MAJOR_VERSION, &major);
	(void)nvj.nvjpegGetProperty(MINOR_VERSION, &minor);
	(void)nvj.nvjpegGetProperty(PATCH_LEVEL, &patch);
	snprintf(nvj_version, sizeof nvj_version, "%d.%d.%d", major, minor,
	         patch);
	nvj_loaded = 1;
out:
	if (nvj_loaded)
		fprep__log(FPREP_LOG_INFO, "nvJPEG %s loaded (%s)", nvj_version,
		           from);
	else
		fprep__log(FPREP_LOG_INFO,
		           "nvJPEG not loaded (%s): JPEG frames are decoded by "
		           "libjpeg-turbo on CPU threads",
		           nvj_why);
}

struct fprep__nvjpeg {
	nvjpegHandle_t h;
	atomic_int warned; /* a header the library could not check was
	                      logged */
	char desc[96];
};

/* One thread's decoder: its parsed-stream object and one state per batch
 * size, initialised for fmt (-1: not yet, or after a failed batch). */
struct fprep__nvjpeg_dec {
	fprep__nvjpeg *nj;
	nvjpegJpegStream_t js;
	nvjpegJpegState_t state[FPREP__NVJPEG_BATCH_MAX + 1];
	int fmt[FPREP__NVJPEG_BATCH_MAX + 1];
};

/* nvj_status names an nvjpegStatus_t. */
static const char *nvj_status(nvjpegStatus_t s)
{
	switch (s) {
	case NVJPEG_STATUS_SUCCESS:
		return "NVJPEG_STATUS_SUCCESS";
	case NVJPEG_STATUS_NOT_INITIALIZED:
		return "NVJPEG_STATUS_NOT_INITIALIZED";
	case NVJPEG_STATUS_INVALID_PARAMETER:
		return "NVJPEG_STATUS_INVALID_PARAMETER";
	case NVJPEG_STATUS_BAD_JPEG:
		return "NVJPEG_STATUS_BAD_JPEG";
	case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
		return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
	case NVJPEG_STATUS_ALLOCATOR_FAILURE:
		return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
	case NVJPEG_STATUS_EXECUTION_FAILED:
		return "NVJPEG_STATUS_EXECUTION_FAILED";
	case NVJPEG_STATUS_ARCH_MISMATCH:
		return "NVJPEG_STATUS_ARCH_MISMATCH";
	case NVJPEG_STATUS_INTERNAL_ERROR:
		return "NVJPEG_STATUS_INTERNAL_ERROR";
	case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
		return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
	default:
		break;
	}
	return "nvjpegStatus_t (unknown)";
}

void fprep__nvjpeg_close(fprep__nvjpeg *nj)
{
	if (nj == NULL)
		return;
	if (nj->h != NULL)
		(void)nvj.nvjpegDestroy(nj->h);
	free(nj);
}

int fprep__nvjpeg_open(fprep__nvjpeg **np, char *msg, size_t msg_size)
{
	unsigned flags = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION |
	                 NVJPEG_FLAGS_BITSTREAM_STRICT |
	                 NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE;
	const char *pipeline = getenv("FPREP_NVJPEG_PIPELINE");
	unsigned engines = 0, cores = 0;
	fprep__nvjpeg *nj;
	nvjpegStatus_t s;

	*np = NULL;
	if (pipeline != NULL && strcmp(pipeline, "1") == 0)
		flags &= ~(unsigned)NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE;
	pthread_once(&nvj_once, nvj_load);
	if (!nvj_loaded) {
		snprintf(msg, msg_size, "nvJPEG not loaded: %s", nvj_why);
		return -1;
	}
	nj = calloc(1, sizeof *nj);
	if (nj == NULL) {
		snprintf(msg, msg_size, "nvJPEG: out of memory");
		return -1;
	}
	s = nvj.nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, NULL, NULL, flags,
	                       &nj->h);
	if (s != NVJPEG_STATUS_SUCCESS) {
		snprintf(msg, msg_size,
		         "nvJPEG %s: no hardware backend (nvjpegCreateEx: "
		         "%s): this GPU has no JPEG engine, or the driver "
		         "none",
		         nvj_version, nvj_status(s));
		nj->h = NULL;
		fprep__nvjpeg_close(nj);
		return -1;
	}
	if (nvj.nvjpegGetHardwareDecoderInfo(nj->h, &engines, &cores) !=
	    NVJPEG_STATUS_SUCCESS)
		engines = 0;
	if (engines > 0)
		snprintf(nj->desc, sizeof nj->desc,
		         "nvJPEG %s, hardware engine (%u engines)", nvj_version,
		         engines);
	else
		snprintf(nj->desc, sizeof nj->desc,
		         "nvJPEG %s, hardware engine", nvj_version);
	*np = nj;
	return 0;
}

const char *fprep__nvjpeg_describe(const fprep__nvjpeg *nj)
{
	return nj->desc;
}

void fprep__nvjpeg_dec_close(fprep__nvjpeg_dec *d)
{
	if (d == NULL)
		return;
	for (int i = 0; i <= FPREP__NVJPEG_BATCH_MAX; i++)
		if (d->state[i] != NULL)
			(void)nvj.nvjpegJpegStateDestroy(d->state[i]);
	if (d->js != NULL)
		(void)nvj.nvjpegJpegStreamDestroy(d->js);
	free(d);
}

int fprep__nvjpeg_dec_open(fprep__nvjpeg *nj, fprep__nvjpeg_dec **dp, char *msg,
                           size_t msg_size)
{
	fprep__nvjpeg_dec *d = calloc(1, sizeof *d);
	nvjpegStatus_t s;

	*dp = NULL;
	if (d == NULL) {
		snprintf(msg, msg_size, "nvJPEG: out of memory");
		return -1;
	}
	d->nj = nj;
	for (int i = 0; i <= FPREP__NVJPEG_BATCH_MAX; i++)
		d->fmt[i] = -1;
	s = nvj.nvjpegJpegStreamCreate(nj->h, &d->js);
	if (s != NVJPEG_STATUS_SUCCESS) {
		snprintf(msg, msg_size, "nvJPEG: nvjpegJpegStreamCreate: %s",
		         nvj_status(s));
		d->js = NULL;
		fprep__nvjpeg_dec_close(d);
		return -1;
	}
	*dp = d;
	return 0;
}

int fprep__nvjpeg_supported(fprep__nvjpeg_dec *d, const uint8_t *p, size_t n)
{
	const char *call = "nvjpegJpegStreamParseHeader";
	nvjpegHandle_t h = d->nj->h;
	nvjpegStatus_t s;
	int no = 1;

	s = nvj.nvjpegJpegStreamParseHeader(h, p, n, d->js);
	if (s == NVJPEG_STATUS_SUCCESS) {
		call = "nvjpegDecodeBatchedSupported";
		s = nvj.nvjpegDecodeBatchedSupported(h, d->js, &no);
	}
	if (s != NVJPEG_STATUS_SUCCESS) {
		/* Said once a lane: every such frame goes to libjpeg-turbo. */
		if (atomic_exchange(&d->nj->warned, 1) == 0)
			fprep__log(FPREP_LOG_WARNING,
			           "%s: %s: decoded by libjpeg-turbo", call,
			           nvj_status(s));
		return 0;
	}
	return no == 0; /* 0: supported */
}

int fprep__nvjpeg_decode(fprep__nvjpeg_dec *d, const fprep__nvjpeg_item *items,
                         unsigned n, int bgr, int gray, void *stream, char *msg,
                         size_t msg_size)
{
	nvjpegHandle_t h = d->nj->h;
	nvjpegOutputFormat_t fmt = gray  ? NVJPEG_OUTPUT_Y
	                           : bgr ? NVJPEG_OUTPUT_BGRI
	                                 : NVJPEG_OUTPUT_RGBI;
	const unsigned char *data[FPREP__NVJPEG_BATCH_MAX];
	size_t len[FPREP__NVJPEG_BATCH_MAX];
	nvjpegImage_t dst[FPREP__NVJPEG_BATCH_MAX];
	nvjpegStatus_t s;
	const char *call = "nvjpegJpegStateCreate";

	if (n == 0 || n > FPREP__NVJPEG_BATCH_MAX) {
		snprintf(msg, msg_size, "nvJPEG: batch of %u", n);
		return -1;
	}
	if (d->state[n] == NULL &&
	    (s = nvj.nvjpegJpegStateCreate(h, &d->state[n])) !=
	            NVJPEG_STATUS_SUCCESS) {
		d->state[n] = NULL;
		goto fail;
	}
	if (d->fmt[n] != (int)fmt) {
		call = "nvjpegDecodeBatchedInitialize";
		s = nvj.nvjpegDecodeBatchedInitialize(h, d->state[n], (int)n, 1,
		                                      fmt);
		if (s != NVJPEG_STATUS_SUCCESS)
			goto fail;
		d->fmt[n] = (int)fmt;
	}
	memset(dst, 0, sizeof dst);
	for (unsigned i = 0; i < n; i++) {
		data[i] = items[i].data;
		len[i] = items[i].size;
		dst[i].channel[0] = items[i].dst;
		dst[i].pitch[0] = items[i].pitch;
	}
	call = "nvjpegDecodeBatched";
	s = nvj.nvjpegDecodeBatched(h, d->state[n], data, len, dst,
	                            (cudaStream_t)stream);
	if (s == NVJPEG_STATUS_SUCCESS)
		return 0;
	d->fmt[n] = -1; /* initialised again before its next batch */
fail:
	snprintf(msg, msg_size, "%s (batch of %u): %s", call, n, nvj_status(s));
	return -1;
}

#else /* built without nvjpeg.h */

struct fprep__nvjpeg {
	int unused;
};

struct fprep__nvjpeg_dec {
	int unused;
};

int fprep__nvjpeg_open(fprep__nvjpeg **np, char *msg, size_t msg_size)
{
	*np = NULL;
	snprintf(msg, msg_size,
	         "nvJPEG: built without nvjpeg.h (deploy/setup.sh fetches "
	         "it for CUDA builds)");
	return -1;
}

void fprep__nvjpeg_close(fprep__nvjpeg *nj)
{
	(void)nj;
}

const char *fprep__nvjpeg_describe(const fprep__nvjpeg *nj)
{
	(void)nj;
	return "nvJPEG (not built)";
}

int fprep__nvjpeg_dec_open(fprep__nvjpeg *nj, fprep__nvjpeg_dec **dp, char *msg,
                           size_t msg_size)
{
	(void)nj;
	*dp = NULL;
	snprintf(msg, msg_size, "nvJPEG: not built");
	return -1;
}

void fprep__nvjpeg_dec_close(fprep__nvjpeg_dec *d)
{
	(void)d;
}

int fprep__nvjpeg_supported(fprep__nvjpeg_dec *d, const uint8_t *p, size_t n)
{
	(void)d, (void)p, (void)n;
	return 0;
}

int fprep__nvjpeg_decode(fprep__nvjpeg_dec *d, const fprep__nvjpeg_item *items,
                         unsigned n, int bgr, int gray, void *stream, char *msg,
                         size_t msg_size)
{
	(void)d, (void)items, (void)n, (void)bgr, (void)gray, (void)stream;
	snprintf(msg, msg_size, "nvJPEG: not built");
	return -1;
}

#endif
