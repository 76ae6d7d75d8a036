/*
 * cuda_video.c: the CUDA backend's video decoder (video.h): H.264 and HEVC
 * decoded by the GPU's video engines (NVDEC) into device surfaces, each
 * frame then preprocessed in place by the NV12 letterbox kernel, the
 * tensors copied into the reply. The frame never lies in host memory.
 *
 * The design is simple: a session is NVIDIA's video parser
 * (cuvidCreateVideoParser) and one decoder (cuvidCreateDecoder) of the
 * device of the lane that opened it, and a thread of its own (cv_main), as
 * NVIDIA's NvDecoder and PyNvVideoCodec give each decoder one: the lane's
 * submit queues the stream's jobs for it (fprep__cuda_video_submit), so the
 * streams of a GPU decode side by side on its engines and no frame on the
 * lane waits for a stream. The thread makes the device's primary context
 * current (cudaSetDevice), which the session retains so that it outlives
 * the lanes, runs the jobs one at a time in the order they came, and owns
 * every decoder field; the lane that opened the session stops and joins the
 * thread when it closes (fprep__cuda_video_stop: the jobs left run until
 * the drain deadline, later ones are answered FPREP_ESHUTDOWN), or the
 * session's close does. A sticky CUDA error fails the session's later jobs
 * and the lane's, as on the lane. The decoder is given a context lock on
 * the context (cuvidCtxLockCreate, vidLock), which it takes around its own
 * use of the context; the session's calls are not wrapped in that lock
 * (the decoder's calls take it, and it need not be recursive), as NVIDIA's
 * NvDecoder does. A packet is handed to the parser whole, as the one
 * picture it is (CUVID_PKT_ENDOFPICTURE), with its pts; the parser calls
 * back on the same thread, before cuvidParseVideoData returns:
 *   sequence  a new sequence: its coded size is checked against the
 *             limits (fprep__video_check_size) and the engine's
 *             (cuvidGetDecoderCaps) before cuvidCreateDecoder; the
 *             decoder's surfaces (the sequence's
 *             min_num_decode_surfaces + CV_EXTRA_SURFACES, two output
 *             surfaces) are made then, once per sequence, never per
 *             frame;
 *   decode    the picture goes to the engine (cuvidDecodePicture); its
 *             surface is labelled with the packet's pts;
 *   display   a picture leaves the reorder queue (display order): its
 *             index and its packet's pts are kept, at most
 *             max_stream_frames.
 * Once the packet is parsed, the session knows how many frames the reply
 * carries, asks for its room (job->reserve), and for each frame maps the
 * surface (cuvidMapVideoFrame64: an NV12 device pointer and pitch, the
 * session's CUDA stream), runs the letterbox kernel on it, waits for the
 * kernel and unmaps it; one copy then brings all the tensors into the
 * reply, or into the client's shared-memory region. A request whose
 * tensors go to a CUDA region (on this GPU: streams.c checks) has the
 * kernel write them there, with no copy. A packet holds one picture, so no
 * surface that waits to be mapped is decoded into before it is (a second
 * picture in a packet whose surface is one of them is refused as a broken
 * bitstream).
 *
 * The daemon hands a session up to CV_WINDOW of its stream's jobs at once
 * (fprep__video.window), so that the engine need not idle while a frame
 * is preprocessed: when the next job waiting is a
 * packet that starts nothing (no parameter sets, no IDR/IRAP picture) and the
 * current one let out at most CV_AHEAD_FRAMES frames, that packet is parsed
 * before those frames are mapped (cv_look_ahead): its picture decodes on the
 * engine while the frames before it are mapped, letterboxed and copied. Each
 * reply still carries exactly the frames its own packet let out, in display
 * order; a refusal of the packet parsed ahead is answered, and the stream
 * reset, in its turn. With one packet in flight nothing waits: a frame's
 * latency is what it was.
 *
 * Starting points and errors are the CPU session's (video_avcodec.c,
 * video_common.c): the stream decodes from an IDR (H.264) or IRAP (HEVC)
 * picture, found by the NAL unit types of the packet; packets before it
 * are answered STREAM_SKIPPED. A packet the parser or the engine refuses,
 * or a picture the engine reports decoded with errors
 * (cuvidGetDecodeStatus), is answered "broken bitstream"; the session then
 * makes a new parser (fed the stream's parameter sets: those of
 * STREAM_OPEN and the last packet's that held any) and waits for the next
 * IDR/IRAP picture. FLUSH sends the parser the end of the stream, which
 * lets out every frame it holds, and starts again the same way.
 *
 * libnvcuvid.so.1 comes with NVIDIA's driver, not with the toolkit: it is
 * loaded at run time (the nv-codec headers' dynlink loader, dlopen), with
 * libcuda.so.1 for the primary context, on the first stream open or INFO.
 * Without it STREAM_OPEN answers FPREP_EUNSUPPORTED naming it, INFO's
 * video_decoder says why, and frames are served as before.
 * FPREP_NVDEC=off turns it off. Decode sessions per GPU are bounded by
 * max_video_sessions (the engines have a limit; FPREP_ELIMIT past it).
 */
#include "fprep_assert.h"
#include "gpu/cuda_core_internal.h"
#include "video.h"

#include <dlfcn.h>
#include <time.h>

#ifdef FPREP_HAVE_NVCUVID
/* The loader's messages go into cv_why rather than to stderr. */
#define FFNV_LOG_FUNC(logctx, msg, ...)                                        \
	snprintf(cv_why, sizeof cv_why, (msg), __VA_ARGS__)
#define FFNV_DEBUG_LOG_FUNC(logctx, msg, ...)
static char cv_why[256]; /* why not loaded */
#include <ffnvcodec/dynlink_loader.h>
#else
static char cv_why[256];
#endif

/* Decode surfaces past the sequence's minimum: the pictures that wait to
 * be mapped while the parser goes on. */
#define CV_EXTRA_SURFACES 4
/* Surfaces a frame is mapped into (one at a time, and one to spare). */
#define CV_OUTPUT_SURFACES 2
/* Frames of a job at most that wait to be mapped while the next packet is
 * parsed (cv_look_ahead): well under CV_EXTRA_SURFACES, so that the
 * parser, which hands the surfaces out in turn, does not decode the next
 * picture into one of them. */
#define CV_AHEAD_FRAMES 2
/* Jobs of a stream the daemon hands the session at once (video.h,
 * fprep__video.window): the next packet waits in the session's queue. */
#define CV_WINDOW 4
/* A picture's decode status is asked every CV_STATUS_POLL_US while the
 * engine still decodes it, for at most CV_STATUS_WAIT_US. */
#define CV_STATUS_POLL_US 20u
#define CV_STATUS_WAIT_US 1000000u
/* Surfaces of one decoder at most (cuvid's limit). */
#define CV_MAX_SURFACES 32
/* GPUs whose sessions are counted (max_video_sessions). */
#define CV_MAX_DEVICES 64
/* max_video_sessions when the limits do not say. */
#define CV_DEFAULT_SESSIONS 32

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static int cv_loaded;
static char cv_from[128]; /* what was loaded */

#ifdef FPREP_HAVE_NVCUVID
static CuvidFunctions *cvf;
static CudaFunctions *cuf;
static atomic_uint cv_sessions[CV_MAX_DEVICES];

/* cv_load runs once: loads libcuda's and libnvcuvid's functions. */
static void cv_load(void)
{
	const char *env = getenv("FPREP_NVDEC");
	int ver = 0;

	if (env != NULL && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0)) {
		snprintf(cv_why, sizeof cv_why,
		         "libnvcuvid.so.1 not loaded: NVDEC turned off "
		         "(FPREP_NVDEC=%s)",
		         env);
		goto fail;
	}
	if (cuda_load_functions(&cuf, NULL) != 0)
		goto fail;
	if (cuvid_load_functions(&cvf, NULL) != 0) {
		const char *e = dlerror();

		if (e != NULL)
			snprintf(cv_why, sizeof cv_why, "%s", e);
		goto fail;
	}
	if (cvf->cuvidGetDecoderCaps == NULL) {
		snprintf(cv_why, sizeof cv_why,
		         "libnvcuvid.so.1 has no cuvidGetDecoderCaps (driver "
		         "too old)");
		goto fail;
	}
	(void)cudaDriverGetVersion(&ver);
	snprintf(cv_from, sizeof cv_from,
	         "NVDEC (libnvcuvid.so.1, driver CUDA %d.%d)", ver / 1000,
	         ver % 1000 / 10);
	cv_loaded = 1;
	fprep__log(FPREP_LOG_INFO, "video: %s loaded: streams decode on GPUs",
	           cv_from);
	return;
fail:
	cuvid_free_functions(&cvf);
	cuda_free_functions(&cuf);
	fprep__log(FPREP_LOG_INFO,
	           "video: no GPU decoder (%s): STREAM_OPEN "
	           "refused by GPU lanes",
	           cv_why);
}
#else
static void cv_load(void)
{
	snprintf(cv_why, sizeof cv_why,
	         "built without the nv-codec headers (libffmpeg-nvenc-dev): "
	         "libnvcuvid.so.1 not used");
}
#endif

int fprep__cuda_video_load(char *buf, size_t size)
{
	pthread_once(&cv_once, cv_load);
	if (size > 0)
		snprintf(buf, size, "%s", cv_loaded ? cv_from : cv_why);
	return cv_loaded ? FPREP_OK : FPREP_EUNSUPPORTED;
}

/* A picture let out by the parser, to be mapped. */
typedef struct cv_frame {
	int index; /* decode surface */
	int64_t pts;
	int pending; /* still decoding when displayed: its status is asked
	                again once mapped (cv_status_final) */
} cv_frame;

struct cv_video {
	fprep__video base; /* first */
	fprep_request spec;
	uint8_t *params; /* STREAM_OPEN's parameter sets */
	size_t params_len;
	fprep__video_ps ps; /* the last packet's that held any */
	int device;
	int counted;        /* counted in cv_sessions[device] */
	cuda_backend *lane; /* the lane that opened it: its kernels and its
	                       sticky error; NULL once that lane closed */
	fprep__job *job;    /* the job being parsed, for the callbacks */
	/* The session's thread (cv_main) and the jobs it waits to run. The
	 * thread owns everything below jobs and every decoder field; mu
	 * guards jobs, stopping and deadline_ns. */
	pthread_t thread;
	int running;           /* started and not yet joined: in cv_all */
	struct cv_video *next; /* in cv_all */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a job queued, or stop */
	fprep__queue jobs; /* submitted, not yet taken */
	int stopping;
	uint64_t deadline_ns; /* stopping: later jobs fail FPREP_ESHUTDOWN */
	int fatal;            /* a sticky error: every later job fails */
	fprep__job *ahead;    /* a packet taken from jobs and parsed before
	                         the current job's frames were emitted: runs
	                         next (cv_look_ahead) */
#ifdef FPREP_HAVE_NVCUVID
	CUcontext ctx; /* the device's primary context, retained */
	CUvideoctxlock lock;
	CUvideoparser parser;
	CUvideodecoder decoder;
	CUVIDEOFORMAT fmt; /* the decoder's sequence */
#endif
	unsigned surfaces;   /* the decoder's decode surfaces */
	cudaStream_t stream; /* maps, kernels and the copy */
	uint8_t *d_out;      /* the tensors, out_cap bytes (grow-only; allocated
	                        and freed in the order of stream) */
	size_t out_cap;
	int skipping; /* drop packets until an IDR/IRAP */
	int failed;   /* a callback failed the job */
	int broken;   /* a picture of the job's was found broken once mapped
	                 (cv_frame_tensor): the stream resets (cv_emit_broken) */
	uint8_t decoded[CV_MAX_SURFACES]; /* surface decoded since reset */
	/* The pts of the packet whose picture each surface holds: the
	 * parser's own CUVIDPARSERDISPINFO.timestamp hands the packets' pts
	 * out again in increasing order, which is the pictures' only when
	 * the pts are presentation times; libavcodec, the reference, gives
	 * each frame its own packet's. */
	int64_t pts_of[CV_MAX_SURFACES];
	/* Let out by the current job, then by ahead from ahead_first on;
	 * the job being parsed writes from first on. */
	cv_frame *frames;
	unsigned nframes, frames_cap, first, ahead_first;
	int ahead_rv;   /* ahead's parse: FPREP_OK or its failed status */
	int ahead_skip; /* ahead's packet went with a reset after it was
	                   parsed: answered as skipped (cv_packet) */
};

/* cv_on_thread: the session's thread (cv_main) runs the call. */
#define CV_ON_THREAD(v)                                                        \
	FPREP__ASSERT(pthread_equal(pthread_self(), (v)->thread))

#ifdef FPREP_HAVE_NVCUVID

/* cv_cu_error: a driver error's name. */
static const char *cv_cu_error(CUresult r)
{
	const char *name = NULL;

	if (cuf == NULL || cuf->cuGetErrorName(r, &name) != CUDA_SUCCESS ||
	    name == NULL)
		return "CUDA_ERROR_UNKNOWN";
	return name;
}

/* cv_cuda_fail fails the job with a CUDA runtime error (st). */
static int cv_cuda_fail(fprep__job *job, const fprep__gpu_status *st)
{
	cuda_core_fail(job,
	               st->code == cudaErrorMemoryAllocation ? FPREP_ENOMEM
	                                                     : FPREP_ECUDA,
	               cuda_core_sticky(st->code), st->text);
	return job->status;
}

static cudaVideoCodec cv_codec(const struct cv_video *v)
{
	return v->spec.src_format == FPREP_PIX_H264 ? cudaVideoCodec_H264
	                                            : cudaVideoCodec_HEVC;
}

/* cv_check_caps refuses a sequence the engine cannot decode. */
static int cv_check_caps(struct cv_video *v, const CUVIDEOFORMAT *f)
{
	const char *codec = fprep__video_codec_name(&v->spec);
	CUVIDDECODECAPS caps;
	CUresult r;

	memset(&caps, 0, sizeof caps);
	caps.eCodecType = f->codec;
	caps.eChromaFormat = f->chroma_format;
	caps.nBitDepthMinus8 = f->bit_depth_luma_minus8;
	r = cvf->cuvidGetDecoderCaps(&caps);
	if (r != CUDA_SUCCESS)
		return fprep__video_fail(v->job, FPREP_ECUDA,
		                         "cuvidGetDecoderCaps: %s",
		                         cv_cu_error(r));
	if (!caps.bIsSupported)
		return fprep__video_fail(
		        v->job, FPREP_EUNSUPPORTED,
		        "%s of chroma format %d, %u bits: this GPU's video "
		        "engine does not decode it",
		        codec, (int)f->chroma_format,
		        f->bit_depth_luma_minus8 + 8u);
	if (f->coded_width > caps.nMaxWidth ||
	    f->coded_height > caps.nMaxHeight ||
	    f->coded_width < caps.nMinWidth ||
	    f->coded_height < caps.nMinHeight ||
	    (f->coded_width >> 4) * (f->coded_height >> 4) > caps.nMaxMBCount)
		return fprep__video_fail(
		        v->job, FPREP_EUNSUPPORTED,
		        "%s coded size %ux%u: this GPU's video engine "
		        "decodes %ux%u to %ux%u (%u macroblocks)",
		        codec, f->coded_width, f->coded_height, caps.nMinWidth,
		        caps.nMinHeight, caps.nMaxWidth, caps.nMaxHeight,
		        caps.nMaxMBCount);
	return FPREP_OK;
}

/* cv_destroy_decoder lets go of the decoder and its surfaces. */
static void cv_destroy_decoder(struct cv_video *v)
{
	if (v->decoder != NULL) {
		cvf->cuvidDestroyDecoder(v->decoder);
		v->decoder = NULL;
	}
	v->surfaces = 0;
	memset(v->decoded, 0, sizeof v->decoded);
}

/* cv_sequence: the parser's sequence callback. Returns the decode
 * surfaces (overriding the parser's), or 0 to stop the packet. */
static int CUDAAPI cv_sequence(void *arg, CUVIDEOFORMAT *f)
{
	struct cv_video *v = arg;
	fprep__job *job = v->job;
	unsigned want = f->min_num_decode_surfaces + CV_EXTRA_SURFACES;
	CUVIDDECODECREATEINFO ci;
	CUresult r;

	if (v->failed)
		return 0;
	if (want > CV_MAX_SURFACES)
		want = CV_MAX_SURFACES;
	if (f->chroma_format != cudaVideoChromaFormat_420 ||
	    f->bit_depth_luma_minus8 != 0 || f->bit_depth_chroma_minus8 != 0) {
		fprep__video_fail(job, FPREP_EUNSUPPORTED,
		                  "%s stream of chroma format %d, %u bits: "
		                  "only 8-bit 4:2:0 is supported",
		                  fprep__video_codec_name(&v->spec),
		                  (int)f->chroma_format,
		                  f->bit_depth_luma_minus8 + 8u);
		goto fail;
	}
	/* The limits first: nothing is made for a sequence past them. */
	if (fprep__video_check_size(job, &v->spec, (int)f->coded_width,
	                            (int)f->coded_height) != FPREP_OK ||
	    cv_check_caps(v, f) != FPREP_OK)
		goto fail;
	if (v->decoder != NULL && v->fmt.coded_width == f->coded_width &&
	    v->fmt.coded_height == f->coded_height &&
	    v->fmt.codec == f->codec && v->surfaces >= want) {
		v->fmt = *f;
		return (int)v->surfaces;
	}
	if (v->first > 0) { /* an earlier job's frames are not yet mapped */
		fprep__video_broken(job, &v->spec,
		                    "a new sequence without an IDR/IRAP "
		                    "picture");
		goto fail;
	}
	cv_destroy_decoder(v);
	v->nframes = 0; /* pictures of the old sequence, if any, go */
	memset(&ci, 0, sizeof ci);
	ci.ulWidth = f->coded_width;
	ci.ulHeight = f->coded_height;
	ci.ulMaxWidth = f->coded_width;
	ci.ulMaxHeight = f->coded_height;
	/* The whole coded frame, uncropped: the kernel reads the display
	 * area (cv_frame_tensor). */
	ci.display_area.right = (short)f->coded_width;
	ci.display_area.bottom = (short)f->coded_height;
	ci.ulNumDecodeSurfaces = want;
	ci.CodecType = f->codec;
	ci.ChromaFormat = f->chroma_format;
	ci.ulCreationFlags = cudaVideoCreate_PreferCUVID;
	ci.bitDepthMinus8 = 0;
	ci.OutputFormat = cudaVideoSurfaceFormat_NV12;
	ci.DeinterlaceMode = f->progressive_sequence
	                             ? cudaVideoDeinterlaceMode_Weave
	                             : cudaVideoDeinterlaceMode_Adaptive;
	ci.ulTargetWidth = f->coded_width;
	ci.ulTargetHeight = f->coded_height;
	ci.ulNumOutputSurfaces = CV_OUTPUT_SURFACES;
	ci.vidLock = v->lock;
	r = cvf->cuvidCreateDecoder(&v->decoder, &ci);
	if (r != CUDA_SUCCESS) {
		v->decoder = NULL;
		fprep__video_fail(
		        job,
		        r == 2 /* CUDA_ERROR_OUT_OF_MEMORY */
		                ? FPREP_ENOMEM
		                : FPREP_ECUDA,
		        "cuvidCreateDecoder %s %ux%u, %u surfaces: %s",
		        fprep__video_codec_name(&v->spec), f->coded_width,
		        f->coded_height, want, cv_cu_error(r));
		goto fail;
	}
	v->fmt = *f;
	v->surfaces = want;
	return (int)want;
fail:
	v->failed = 1;
	return 0;
}

/* cv_decode: the parser's decode callback (decode order). */
static int CUDAAPI cv_decode(void *arg, CUVIDPICPARAMS *pic)
{
	struct cv_video *v = arg;
	int idx = pic->CurrPicIdx;
	CUresult r;

	CV_ON_THREAD(v);
	if (v->failed || v->decoder == NULL)
		return 0;
	if (idx < 0 || (unsigned)idx >= v->surfaces) {
		fprep__video_broken(v->job, &v->spec,
		                    "the parser chose no decode surface");
		goto fail;
	}
	for (unsigned k = 0; k < v->nframes; k++)
		if (v->frames[k].index == idx) {
			fprep__video_broken(
			        v->job, &v->spec,
			        k < v->first ? "a picture decoded into the "
			                       "surface of one not yet "
			                       "mapped"
			                     : "more than one picture in "
			                       "the packet");
			goto fail;
		}
	r = cvf->cuvidDecodePicture(v->decoder, pic);
	if (r != CUDA_SUCCESS) {
		char why[96];

		snprintf(why, sizeof why, "cuvidDecodePicture: %s",
		         cv_cu_error(r));
		fprep__video_broken(v->job, &v->spec, why);
		goto fail;
	}
	v->decoded[idx] = 1;
	v->pts_of[idx] = v->job->stream.pts; /* one picture a packet */
	return 1;
fail:
	v->failed = 1;
	return 0;
}

/* cv_display: the parser's display callback (display order); NULL at the
 * end of the stream. */
static int CUDAAPI cv_display(void *arg, CUVIDPARSERDISPINFO *d)
{
	struct cv_video *v = arg;
	uint32_t max = v->job->limits->max_stream_frames;
	CUVIDGETDECODESTATUS ds;
	CUresult r;

	if (d == NULL || v->failed)
		return 1;
	if (d->picture_index < 0 ||
	    (unsigned)d->picture_index >= CV_MAX_SURFACES ||
	    !v->decoded[d->picture_index])
		return 1; /* not decoded by this session since its reset */
	/* Asked once here, without waiting: a picture still decoding
	 * reports InProgress, and its final status is asked once it is
	 * mapped (cv_status_final), when the engine is done with it. Waiting
	 * here by asking again and again took the cores with dozens of
	 * streams (H200: 32 streams, 93 % of the CPU in the kernel, the
	 * engines 43 % busy). */
	memset(&ds, 0, sizeof ds);
	r = cvf->cuvidGetDecodeStatus(v->decoder, d->picture_index, &ds);
	if (r == CUDA_SUCCESS &&
	    (ds.decodeStatus == cuvidDecodeStatus_Error ||
	     ds.decodeStatus == cuvidDecodeStatus_Error_Concealed)) {
		fprep__video_broken(v->job, &v->spec,
		                    "a picture decoded with errors "
		                    "(cuvidGetDecodeStatus)");
		v->failed = 1;
		return 0;
	}
	if (v->nframes - v->first >= max) {
		fprep__video_fail(v->job, FPREP_ELIMIT,
		                  "%s stream: more than max_stream_frames "
		                  "%" PRIu32 " decoded frames at once",
		                  fprep__video_codec_name(&v->spec), max);
		v->failed = 1;
		return 0;
	}
	if (v->nframes == v->frames_cap) {
		unsigned cap = v->frames_cap ? 2 * v->frames_cap : 8;
		cv_frame *fr = realloc(v->frames, cap * sizeof(*fr));

		if (fr == NULL) {
			fprep__video_fail(v->job, FPREP_ENOMEM,
			                  "decoded frames: out of memory");
			v->failed = 1;
			return 0;
		}
		v->frames = fr;
		v->frames_cap = cap;
	}
	v->frames[v->nframes].index = d->picture_index;
	v->frames[v->nframes].pts = v->pts_of[d->picture_index];
	v->frames[v->nframes].pending =
	        r != CUDA_SUCCESS ||
	        ds.decodeStatus == cuvidDecodeStatus_InProgress;
	v->nframes++;
	return 1;
}

/* cv_feed hands size bytes at data to the parser (flags: CUVID_PKT_*). */
static CUresult cv_feed(struct cv_video *v, const uint8_t *data, size_t size,
                        unsigned long flags, int64_t pts)
{
	CUVIDSOURCEDATAPACKET pkt;

	memset(&pkt, 0, sizeof pkt);
	pkt.flags = flags;
	pkt.payload = data;
	pkt.payload_size = (tcu_ulong)size;
	pkt.timestamp = pts;
	return cvf->cuvidParseVideoData(v->parser, &pkt);
}

/* cv_parser_open makes a new parser and feeds it the stream's parameter
 * sets; the stream then waits for an IDR/IRAP picture. */
static int cv_parser_open(struct cv_video *v, fprep__job *job)
{
	CUVIDPARSERPARAMS pp;
	CUresult r;

	if (v->parser != NULL) {
		cvf->cuvidDestroyVideoParser(v->parser);
		v->parser = NULL;
	}
	v->skipping = 1;
	v->nframes = 0;
	memset(v->decoded, 0, sizeof v->decoded);
	memset(&pp, 0, sizeof pp);
	pp.CodecType = cv_codec(v);
	pp.ulMaxNumDecodeSurfaces = 1; /* the sequence callback says */
	pp.ulErrorThreshold = 100;     /* decode all; the status tells errors */
	pp.ulMaxDisplayDelay = 0; /* a frame out as soon as its order allows */
	pp.pUserData = v;
	pp.pfnSequenceCallback = cv_sequence;
	pp.pfnDecodePicture = cv_decode;
	pp.pfnDisplayPicture = cv_display;
	r = cvf->cuvidCreateVideoParser(&v->parser, &pp);
	if (r != CUDA_SUCCESS) {
		v->parser = NULL;
		return fprep__video_fail(job, FPREP_ECUDA,
		                         "cuvidCreateVideoParser: %s",
		                         cv_cu_error(r));
	}
	if (v->params_len > 0)
		(void)cv_feed(v, v->params, v->params_len, 0, 0);
	if (v->ps.len > 0)
		(void)cv_feed(v, v->ps.data, v->ps.len, 0, 0);
	return FPREP_OK;
}

/* cv_open opens the session on the lane's device (the STREAM_OPEN job):
 * counts it against max_video_sessions, retains the primary context,
 * makes the lock, the stream and the parser. */
static int cv_open(fprep__video *base, fprep__job *job)
{
	struct cv_video *v = (struct cv_video *)base;
	uint32_t max = job->limits->max_video_sessions != 0
	                       ? job->limits->max_video_sessions
	                       : CV_DEFAULT_SESSIONS;
	fprep__gpu_status st = {0};
	CUdevice dev;
	CUresult r;

	pthread_once(&cv_once, cv_load);
	if (!cv_loaded)
		return fprep__video_fail(job, FPREP_EUNSUPPORTED,
		                         "%s streams on the GPU need NVDEC, "
		                         "which is not available: %s",
		                         fprep__video_codec_name(&v->spec),
		                         cv_why);
	if (v->device < 0 || v->device >= CV_MAX_DEVICES)
		return fprep__video_fail(job, FPREP_EUNSUPPORTED,
		                         "GPU %d: video streams on the first "
		                         "%d GPUs only",
		                         v->device, CV_MAX_DEVICES);
	if (atomic_fetch_add(&cv_sessions[v->device], 1) >= max) {
		unsigned open = atomic_fetch_sub(&cv_sessions[v->device], 1);

		return fprep__video_fail(
		        job, FPREP_ELIMIT,
		        "GPU %d holds %u video decode "
		        "sessions: max_video_sessions %" PRIu32,
		        v->device, open - 1, max);
	}
	v->counted = 1;
	if ((r = cuf->cuDeviceGet(&dev, v->device)) != CUDA_SUCCESS ||
	    (r = cuf->cuDevicePrimaryCtxRetain(&v->ctx, dev)) != CUDA_SUCCESS) {
		v->ctx = NULL;
		return fprep__video_fail(job, FPREP_ECUDA,
		                         "cuDevicePrimaryCtxRetain: %s",
		                         cv_cu_error(r));
	}
	if ((r = cvf->cuvidCtxLockCreate(&v->lock, v->ctx)) != CUDA_SUCCESS) {
		v->lock = NULL;
		return fprep__video_fail(job, FPREP_ECUDA,
		                         "cuvidCtxLockCreate: %s",
		                         cv_cu_error(r));
	}
	if (FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &v->stream, cudaStreamNonBlocking))) {
		v->stream = NULL;
		return cv_cuda_fail(job, &st);
	}
	if (cv_parser_open(v, job) != FPREP_OK)
		return job->status;
	/* A sequence the parameter sets alone made known is checked now. */
	if (v->failed)
		return job->status;
	return FPREP_OK;
}

/* cv_reset: after a refusal, a new parser; the stream waits for the next
 * IDR/IRAP picture. The job keeps its status (the parser's own failure
 * is logged: the next packet tries again). */
static void cv_reset(struct cv_video *v, fprep__job *job)
{
	fprep__job probe = {0};
	int failed = v->failed;

	/* The callbacks the parameter sets may call answer the probe. */
	probe.limits = job->limits;
	probe.stream = job->stream;
	v->job = &probe;
	v->failed = 0;
	if (cv_parser_open(v, &probe) != FPREP_OK)
		fprep__log(FPREP_LOG_ERR, "video: %s", probe.message);
	v->job = job;
	v->failed = failed;
}

/* cv_parse hands size bytes at data to the parser (cv_feed); a refusal,
 * the parser's or a callback's, answers the job and resets the stream. */
static int cv_parse(struct cv_video *v, fprep__job *job, const uint8_t *data,
                    size_t size, unsigned long flags, int64_t pts)
{
	CUresult r = cv_feed(v, data, size, flags, pts);

	if (!v->failed && r == CUDA_SUCCESS)
		return FPREP_OK;
	if (!v->failed) {
		char why[96];

		snprintf(why, sizeof why, "cuvidParseVideoData: %s",
		         cv_cu_error(r));
		fprep__video_broken(job, &v->spec, why);
	}
	cv_reset(v, job);
	return job->status;
}

/* cv_packet decodes the job's packet into v->frames, unless it was
 * parsed ahead (cv_look_ahead): then its frames are there already, or the
 * refusal of its parse is answered now and the stream resets. */
static int cv_packet(fprep__video *base, fprep__job *job)
{
	struct cv_video *v = (struct cv_video *)base;
	size_t size = job->stream.packet_size;
	int key;

	if (v->ahead == job) {
		v->ahead = NULL;
		if (v->ahead_rv == FPREP_OK) {
			if (v->ahead_skip)
				job->reply_flags |=
				        FPREP_REPLY_F_STREAM_SKIPPED;
			v->ahead_skip = 0;
			return FPREP_OK;
		}
		job->status = v->ahead_rv; /* its message is there */
		cv_reset(v, job);
		return job->status;
	}
	key = fprep__video_scan(&v->spec, job->input, size, &v->ps);
	if (key < 0)
		return fprep__video_fail(job, FPREP_ENOMEM,
		                         "packet: out of memory");
	if (v->parser == NULL && cv_parser_open(v, job) != FPREP_OK)
		return job->status;
	if (v->skipping && !key) {
		job->reply_flags |= FPREP_REPLY_F_STREAM_SKIPPED;
		return FPREP_OK;
	}
	v->skipping = 0;
	return cv_parse(v, job, job->input, size,
	                CUVID_PKT_TIMESTAMP | CUVID_PKT_ENDOFPICTURE,
	                job->stream.pts);
}

/* cv_take_ahead takes the session's next job off its queue when it is a
 * packet that may be parsed before the frames of the current job are
 * emitted: the stream decodes (no IDR/IRAP picture to wait for), the
 * current job holds few frames, and the packet starts no sequence (no
 * parameter sets, no IDR/IRAP picture), so that it neither makes a new
 * decoder nor reuses a surface of those frames. NULL: none. */
static fprep__job *cv_take_ahead(struct cv_video *v)
{
	fprep__video_ps ps = {0};
	fprep__qnode *n;
	fprep__job *next;
	int key;

	if (v->skipping || v->parser == NULL || v->nframes == 0 ||
	    v->nframes > CV_AHEAD_FRAMES)
		return NULL;
	pthread_mutex_lock(&v->mu);
	n = v->stopping ? NULL : v->jobs.head;
	pthread_mutex_unlock(&v->mu);
	if (n == NULL)
		return NULL;
	/* Only this thread takes jobs off the queue: n stays its head. */
	next = fprep__container_of(n, fprep__job, link);
	if (next->stream.kind != FPREP_KIND_STREAM_PACKET)
		return NULL;
	key = fprep__video_scan(&v->spec, next->input, next->stream.packet_size,
	                        &ps);
	free(ps.data);
	if (key != 0 || ps.len > 0)
		return NULL;
	pthread_mutex_lock(&v->mu);
	n = fprep__queue_pop(&v->jobs);
	pthread_mutex_unlock(&v->mu);
	FPREP__ASSERT(n == &next->link);
	return next;
}

/* cv_look_ahead parses the session's next packet, if cv_take_ahead
 * gives one, while the current job's frames wait to be mapped: its
 * picture goes to the engine and decodes while those frames are
 * preprocessed. Its frames follow the current job's in v->frames; its
 * parse's status waits for its turn (cv_packet), the stream's reset too. */
static void cv_look_ahead(struct cv_video *v, fprep__job *job)
{
	fprep__job *next = cv_take_ahead(v);
	CUresult r;

	if (next == NULL)
		return;
	fprep__video_job_begin(next);
	next->message[0] = '\0';
	v->job = next;
	v->first = v->nframes;
	v->ahead = next;
	v->ahead_first = v->nframes;
	r = cv_feed(v, next->input, next->stream.packet_size,
	            CUVID_PKT_TIMESTAMP | CUVID_PKT_ENDOFPICTURE,
	            next->stream.pts);
	if (!v->failed && r != CUDA_SUCCESS) {
		char why[96];

		snprintf(why, sizeof why, "cuvidParseVideoData: %s",
		         cv_cu_error(r));
		fprep__video_broken(next, &v->spec, why);
	}
	v->ahead_rv = v->failed || r != CUDA_SUCCESS ? next->status : FPREP_OK;
	if (v->ahead_rv != FPREP_OK)
		v->nframes = v->ahead_first; /* its frames, if any, go */
	v->job = job;
	v->failed = 0;
	v->first = 0;
}

/* cv_flush lets out every frame the parser holds; the stream then starts
 * again at an IDR/IRAP picture. */
static int cv_flush(fprep__video *base, fprep__job *job)
{
	struct cv_video *v = (struct cv_video *)base;

	if (v->skipping || v->parser == NULL)
		return FPREP_OK; /* it holds nothing */
	if (cv_parse(v, job, NULL, 0, CUVID_PKT_ENDOFSTREAM, 0) != FPREP_OK)
		return job->status;
	/* Kept for the reply: the new parser lets nothing out. */
	unsigned n = v->nframes;

	cv_reset(v, job);
	v->nframes = n;
	return FPREP_OK;
}

/* cv_args fills the letterbox kernel's arguments for an NV12 frame of w x h
 * pixels at src (Y rows of pitch bytes, the UV plane uv bytes after src)
 * into the tensor at dst, the stream's spec; its transform into *xf. */
static int cv_args(const struct cv_video *v, cuda_lb_args *a,
                   const uint8_t *src, unsigned pitch, uint64_t uv, uint32_t w,
                   uint32_t h, void *dst, fprep_transform *xf)
{
	fprep_request rq;
	fprep__yuv_coefs k;

	fprep__video_frame_request(&v->spec, &rq, FPREP_PIX_NV12, w, h);
	if (fprep__yuv_coefs_get(rq.yuv_matrix, rq.yuv_range, &k) != 0 ||
	    uv > UINT32_MAX)
		return FPREP_EINVAL;
	fprep_transform_compute(&rq, xf);
	memset(a, 0, sizeof *a);
	a->src = src;
	a->dst = dst;
	a->src_w = w;
	a->src_h = h;
	a->src_stride = pitch;
	a->src_format = FPREP_PIX_NV12;
	a->out_w = rq.out_width;
	a->out_h = rq.out_height;
	a->resized_w = xf->resized_w;
	a->resized_h = xf->resized_h;
	a->pad_x = xf->pad_x;
	a->pad_y = xf->pad_y;
	a->channel_order = rq.channel_order;
	a->layout = rq.layout;
	a->pad_value = rq.pad_value;
	a->scale = rq.scale;
	memcpy(a->mean, rq.mean, sizeof a->mean);
	memcpy(a->std, rq.std, sizeof a->std);
	memcpy(a->yuv, &k, sizeof a->yuv);
	a->uv_stride = pitch;
	a->u_offset = (uint32_t)uv;
	return FPREP_OK;
}

/* cv_status_final asks surface idx's decode status once it is mapped
 * (the engine is done with it: the map waits for that), again every
 * CV_STATUS_POLL_US for at most CV_STATUS_WAIT_US should it still say
 * InProgress. FPREP_OK, or FPREP_EBITSTREAM for a picture decoded with
 * errors. */
static int cv_status_final(struct cv_video *v, int idx)
{
	CUVIDGETDECODESTATUS ds;
	CUresult r;

	for (unsigned waited = 0;; waited += CV_STATUS_POLL_US) {
		memset(&ds, 0, sizeof ds);
		r = cvf->cuvidGetDecodeStatus(v->decoder, idx, &ds);
		if (r != CUDA_SUCCESS ||
		    ds.decodeStatus != cuvidDecodeStatus_InProgress ||
		    waited >= CV_STATUS_WAIT_US)
			break;
		struct timespec ts = {0, CV_STATUS_POLL_US * 1000};
		nanosleep(&ts, NULL);
	}
	return r == CUDA_SUCCESS &&
	                       (ds.decodeStatus == cuvidDecodeStatus_Error ||
	                        ds.decodeStatus ==
	                                cuvidDecodeStatus_Error_Concealed)
	               ? FPREP_EBITSTREAM
	               : FPREP_OK;
}

/* cv_frame_tensor maps frame f, runs the kernel on it into dst, waits
 * for it and unmaps it. */
static int cv_frame_tensor(struct cv_video *v, fprep__job *job,
                           const cv_frame *f, uint8_t *dst, fprep_transform *xf,
                           uint32_t *w, uint32_t *h)
{
	cuda_backend *cb = v->lane;
	const CUVIDEOFORMAT *fm = &v->fmt;
	fprep__gpu_status st = {0};
	unsigned long long dptr = 0;
	unsigned pitch = 0;
	CUVIDPROCPARAMS pp;
	cuda_lb_args a;
	CUresult r;
	int left = fm->display_area.left, top = fm->display_area.top;
	int rounding = v->spec.rounding, dtype = v->spec.dtype;

	*w = (uint32_t)(fm->display_area.right - left);
	*h = (uint32_t)(fm->display_area.bottom - top);
	if (left < 0 || top < 0 || (left | top) & 1 || *w == 0 || *h == 0 ||
	    *w > fm->coded_width || *h > fm->coded_height)
		return fprep__video_broken(job, &v->spec,
		                           "a display area outside the frame");
	if (dtype < FPREP_DTYPE_F32 || dtype > FPREP_DTYPE_U8 ||
	    rounding >= CUDA_ROUNDINGS)
		return fprep__video_fail(job, FPREP_EINVAL,
		                         "invalid tensor request");
	memset(&pp, 0, sizeof pp);
	pp.progressive_frame = 1;
	pp.output_stream = v->stream;
	r = cvf->cuvidMapVideoFrame(v->decoder, f->index, &dptr, &pitch, &pp);
	if (r != CUDA_SUCCESS) {
		char why[96];

		snprintf(why, sizeof why, "cuvidMapVideoFrame64: %s",
		         cv_cu_error(r));
		return fprep__video_broken(job, &v->spec, why);
	}
	if (f->pending && cv_status_final(v, f->index) != FPREP_OK) {
		(void)cvf->cuvidUnmapVideoFrame(v->decoder, dptr);
		v->broken = 1;
		return fprep__video_broken(job, &v->spec,
		                           "a picture decoded with errors "
		                           "(cuvidGetDecodeStatus)");
	}
	/* The surface: ulTargetHeight (the coded height, even) rows of Y,
	 * then the UV rows; the display area starts at (left, top), even. */
	uint64_t rows = (fm->coded_height + 1) & ~1u;
	const uint8_t *src =
	        (const uint8_t *)(uintptr_t)dptr + (size_t)top * pitch + left;
	uint64_t uv = (uint64_t)pitch * (rows - (uint64_t)top + top / 2);
	int rv = cv_args(v, &a, src, pitch, uv, *w, *h, dst, xf);

	if (rv != FPREP_OK) {
		fprep__video_fail(job, rv, "frame %ux%u: kernel refused", *w,
		                  *h);
	} else {
		void *args[] = {&a};
		dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
		dim3 grid = {(a.out_w + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
		             (a.out_h + CUDA_BLOCK_Y - 1) / CUDA_BLOCK_Y, 1};
		const void *kern =
		        (const void *)cb->kernel[rounding][1][dtype - 1];

		if (FPREP__CUDA(&st, cudaLaunchKernel(kern, grid, block, args,
		                                      0, v->stream)) ||
		    FPREP__CUDA(&st, cudaStreamSynchronize(v->stream)))
			rv = cv_cuda_fail(job, &st);
	}
	r = cvf->cuvidUnmapVideoFrame(v->decoder, dptr);
	if (rv == FPREP_OK && r != CUDA_SUCCESS)
		rv = fprep__video_fail(job, FPREP_ECUDA,
		                       "cuvidUnmapVideoFrame64: %s",
		                       cv_cu_error(r));
	return rv;
}

/* cv_emit_broken: a picture of job's was found decoded with errors once
 * mapped (job answered EBITSTREAM): the stream resets and waits for the
 * next IDR/IRAP picture, and a packet parsed ahead into the old parser
 * loses its frames and is answered as dropped while it waits. */
static void cv_emit_broken(struct cv_video *v, fprep__job *job)
{
	v->broken = 0;
	if (v->ahead != NULL) {
		v->ahead_rv = FPREP_OK;
		v->ahead_skip = 1;
	}
	cv_reset(v, job); /* no frames kept: the ahead's go too */
	v->ahead_first = 0;
}

/* cv_emit preprocesses the frames the job let out into its room: their
 * tensors made on the device (in place for a CUDA region, else in the
 * session's buffer and copied out once), then a frame record each. A
 * packet's job parses the next packet first (cv_look_ahead). */
static int cv_emit(fprep__video *base, fprep__job *job)
{
	struct cv_video *v = (struct cv_video *)base;
	fprep__gpu_status st = {0};
	fprep__video_room room;
	unsigned n;
	size_t bytes;

	if (job->stream.kind == FPREP_KIND_STREAM_PACKET)
		cv_look_ahead(v, job);
	n = v->ahead != NULL ? v->ahead_first : v->nframes;
	if (fprep__video_reserve(job, &v->spec, n, &room) != FPREP_OK)
		return job->status;
	bytes = (size_t)room.one * n;
	if (n == 0)
		return FPREP_OK;
	if (!room.device && bytes > v->out_cap) {
		size_t cap = (bytes + CUDA_GROW_ALIGN - 1) &
		             ~(size_t)(CUDA_GROW_ALIGN - 1);

		if (v->d_out != NULL)
			(void)FPREP__CUDA(NULL,
			                  cudaFreeAsync(v->d_out, v->stream));
		v->d_out = NULL;
		v->out_cap = 0;
		if (FPREP__CUDA(&st, cudaMallocAsync((void **)&v->d_out, cap,
		                                     v->stream)))
			return cv_cuda_fail(job, &st);
		v->out_cap = cap;
	}
	for (unsigned k = 0; k < n; k++) {
		uint8_t *dst =
		        (room.device ? room.tensors : v->d_out) + k * room.one;
		fprep_transform xf;
		uint32_t w, h;

		if (cv_frame_tensor(v, job, &v->frames[k], dst, &xf, &w, &h) !=
		    FPREP_OK) {
			if (v->broken)
				cv_emit_broken(v, job);
			return job->status;
		}
		fprep__video_record(job, &room, k, v->frames[k].pts, w, h, &xf);
	}
	if (room.device)
		return FPREP_OK; /* each kernel was waited for */
	if (FPREP__CUDA(&st,
	                cudaMemcpyAsync(room.tensors, v->d_out, bytes,
	                                cudaMemcpyDeviceToHost, v->stream)) ||
	    FPREP__CUDA(&st, cudaStreamSynchronize(v->stream)))
		return cv_cuda_fail(job, &st);
	return FPREP_OK;
}

static const fprep__video_steps cv_steps = {
        .open = cv_open,
        .packet = cv_packet,
        .flush = cv_flush,
        .emit = cv_emit,
};

static void cv_run(struct cv_video *v, fprep__job *job)
{
	unsigned keep;

	CV_ON_THREAD(v);
	FPREP__ASSERT(v->ahead == NULL || v->ahead == job);
	v->job = job;
	v->failed = 0;
	v->broken = 0;
	v->first = 0;
	if (v->ahead != job)
		v->nframes = 0;
	fprep__video_steps_run(&v->base, job, &cv_steps, v->stream != NULL);
	/* The job's frames go; those of the packet parsed ahead stay. */
	keep = v->ahead != NULL ? v->nframes - v->ahead_first : 0;
	if (keep > 0)
		memmove(v->frames, v->frames + v->ahead_first,
		        keep * sizeof(*v->frames));
	v->nframes = keep;
	v->ahead_first = 0;
}

/* cv_drop_ahead forgets the packet parsed ahead, whose job is answered
 * without running (the session stops or failed). */
static void cv_drop_ahead(struct cv_video *v)
{
	v->ahead = NULL;
	v->nframes = 0;
}

/* cv_release lets go of what the session holds once its thread is
 * joined, on the calling thread. */
static void cv_release(struct cv_video *v)
{
	CUcontext none;

	if (v->ctx != NULL) {
		/* Any thread: the session's own context, pushed. */
		(void)cuf->cuCtxPushCurrent(v->ctx);
		if (v->parser != NULL)
			cvf->cuvidDestroyVideoParser(v->parser);
		cv_destroy_decoder(v);
		/* Stream-ordered: nothing here waits for the device (a
		 * cudaFree would, on the loop's thread). */
		if (v->d_out != NULL)
			(void)FPREP__CUDA(NULL,
			                  cudaFreeAsync(v->d_out, v->stream));
		if (v->stream != NULL)
			(void)FPREP__CUDA(NULL, cudaStreamDestroy(v->stream));
		(void)cuf->cuCtxPopCurrent(&none);
		if (v->lock != NULL)
			cvf->cuvidCtxLockDestroy(v->lock);
		CUdevice dev;
		if (cuf->cuDeviceGet(&dev, v->device) == CUDA_SUCCESS)
			(void)cuf->cuDevicePrimaryCtxRelease(dev);
	}
	if (v->counted)
		atomic_fetch_sub(&cv_sessions[v->device], 1);
	free(v->frames);
	free(v->params);
	free(v->ps.data);
}

#else /* !FPREP_HAVE_NVCUVID */

static void cv_run(struct cv_video *v, fprep__job *job)
{
	CV_ON_THREAD(v);
	fprep__video_job_begin(job);
	fprep__video_fail(job, FPREP_EUNSUPPORTED,
	                  "%s streams on the GPU need NVDEC: %s",
	                  fprep__video_codec_name(&v->spec), cv_why);
}

static void cv_drop_ahead(struct cv_video *v)
{
	v->ahead = NULL;
}

static void cv_release(struct cv_video *v)
{
	free(v->params);
}

#endif /* FPREP_HAVE_NVCUVID */

/* The sessions whose thread runs (running), each with the lane that
 * opened it: that lane's close stops them (fprep__cuda_video_stop). */
static pthread_mutex_t cv_all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cv_video *cv_all;

/* cv_lane_fatal tells whether the lane that opened v met a sticky error
 * (the device's context is unusable). */
static int cv_lane_fatal(struct cv_video *v)
{
	int fatal;

	pthread_mutex_lock(&v->lane->mu);
	fatal = v->lane->fatal;
	pthread_mutex_unlock(&v->lane->mu);
	return fatal;
}

/* cv_deliver ends job: a sticky error fails the session's later jobs and
 * the lane's (as fprep__cuda_wait_deliver does), then job->done. */
static void cv_deliver(struct cv_video *v, fprep__job *job)
{
	job->t_end_ns = cuda_core_now_ns();
	if (job->fatal) {
		v->fatal = 1;
		pthread_mutex_lock(&v->lane->mu);
		v->lane->fatal = 1;
		pthread_mutex_unlock(&v->lane->mu);
	}
	job->done(job);
}

/* cv_main: the session's thread. Its device set (cudaSetDevice: the
 * primary context the session retains, current), it runs the session's
 * jobs one at a time in the order they were submitted (the packet parsed
 * ahead first), and answers them as the lane does when it cannot: the
 * device not set, a sticky error, or the backend closing past its drain
 * deadline (FPREP_ESHUTDOWN). It ends once stopped with nothing left. */
static void *cv_main(void *arg)
{
	struct cv_video *v = arg;
	fprep__gpu_status st = {0};
	int dev_ok = !FPREP__CUDA(&st, cudaSetDevice(v->device));

	fprep__cuda_core_thread_start("fp-video-gpu", v->device);
	for (;;) {
		fprep__job *job = v->ahead;
		int late;

		pthread_mutex_lock(&v->mu);
		while (job == NULL && fprep__queue_empty(&v->jobs) &&
		       !v->stopping)
			pthread_cond_wait(&v->cv, &v->mu);
		if (job == NULL) {
			fprep__qnode *n = fprep__queue_pop(&v->jobs);

			if (n == NULL) { /* stopping, and nothing left */
				pthread_mutex_unlock(&v->mu);
				break;
			}
			job = fprep__container_of(n, fprep__job, link);
		}
		late = v->stopping && cuda_core_now_ns() >= v->deadline_ns;
		pthread_mutex_unlock(&v->mu);

		job->t_start_ns = cuda_core_now_ns();
		job->fatal = 0;
		if (job != v->ahead) /* its parse's message waits in it */
			job->message[0] = '\0';
		if (!dev_ok || v->fatal || cv_lane_fatal(v) || late) {
			if (job == v->ahead)
				cv_drop_ahead(v);
			fprep__video_job_begin(job);
			if (!dev_ok)
				cuda_core_fail(job, FPREP_ECUDA, 1, st.text);
			else if (!late)
				cuda_core_fail(
				        job, FPREP_ECUDA, 1,
				        "the GPU lane failed earlier (sticky "
				        "error)");
			else
				cuda_core_fail(
				        job, FPREP_ESHUTDOWN, 0,
				        "GPU lane closing: drain deadline "
				        "passed");
		} else {
			fprep__video_run(job);
		}
		cv_deliver(v, job);
	}
	return NULL;
}

/* cv_thread_stop stops v's thread, which runs the jobs it holds until
 * deadline_ns (CLOCK_MONOTONIC) and answers the rest FPREP_ESHUTDOWN, and
 * joins it. The caller took v out of cv_all. */
static void cv_thread_stop(struct cv_video *v, uint64_t deadline_ns)
{
	pthread_mutex_lock(&v->mu);
	v->stopping = 1;
	v->deadline_ns = deadline_ns;
	pthread_cond_signal(&v->cv);
	pthread_mutex_unlock(&v->mu);
	pthread_join(v->thread, NULL);
}

static void cv_op_run(fprep__video *base, fprep__job *job)
{
	cv_run((struct cv_video *)base, job);
}

/* cv_close: no job of the session is out (video.h), so its thread is
 * idle: stopped and joined at once, unless the lane's close did it. Not
 * while the backend closes. */
static void cv_close(fprep__video *base)
{
	struct cv_video *v = (struct cv_video *)base;
	int running;

	pthread_mutex_lock(&cv_all_mu);
	running = v->running;
	if (running) {
		struct cv_video **pp = &cv_all;

		while (*pp != v)
			pp = &(*pp)->next;
		*pp = v->next;
		v->running = 0;
	}
	pthread_mutex_unlock(&cv_all_mu);
	if (running)
		cv_thread_stop(v, cuda_core_now_ns());
	FPREP__ASSERT(fprep__queue_empty(&v->jobs) && v->ahead == NULL);
	cv_release(v);
	pthread_cond_destroy(&v->cv);
	pthread_mutex_destroy(&v->mu);
	free(v);
}

static const fprep__video_ops cv_ops = {
        .run = cv_op_run,
        .close = cv_close,
};

int fprep__cuda_video_open(fprep__backend *b, const fprep_request *spec,
                           const uint8_t *params, size_t params_len,
                           fprep__video **vp)
{
	cuda_backend *cb = (cuda_backend *)b;
	struct cv_video *v = calloc(1, sizeof(*v));

	if (v == NULL)
		return FPREP_ENOMEM;
	v->base.ops = &cv_ops;
	v->base.on_device = 1;
	v->base.window = CV_WINDOW;
	memcpy(v->base.uuid, cb->uuid, sizeof(v->base.uuid));
	v->spec = *spec;
	v->device = cb->device;
	v->lane = cb;
	if (params_len > 0) {
		v->params = malloc(params_len);
		if (v->params == NULL) {
			free(v);
			return FPREP_ENOMEM;
		}
		memcpy(v->params, params, params_len);
		v->params_len = params_len;
	}
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->cv, NULL);
	fprep__queue_init(&v->jobs);
	if (pthread_create(&v->thread, NULL, cv_main, v) != 0) {
		pthread_cond_destroy(&v->cv);
		pthread_mutex_destroy(&v->mu);
		free(v->params);
		free(v);
		return FPREP_ENOMEM;
	}
	pthread_mutex_lock(&cv_all_mu);
	v->running = 1;
	v->next = cv_all;
	cv_all = v;
	pthread_mutex_unlock(&cv_all_mu);
	*vp = &v->base;
	return 0;
}

int fprep__cuda_video_submit(fprep__job *job)
{
	struct cv_video *v = (struct cv_video *)job->video;
	int rv = 0;

	pthread_mutex_lock(&v->mu);
	if (v->stopping) {
		rv = FPREP_ESHUTDOWN;
	} else {
		fprep__queue_push(&v->jobs, &job->link);
		pthread_cond_signal(&v->cv);
	}
	pthread_mutex_unlock(&v->mu);
	return rv;
}

void fprep__cuda_video_stop(cuda_backend *cb, uint64_t deadline_ns)
{
	struct cv_video *mine = NULL, **pp, *v;

	pthread_mutex_lock(&cv_all_mu);
	for (pp = &cv_all; (v = *pp) != NULL;) {
		if (v->lane != cb) {
			pp = &v->next;
			continue;
		}
		*pp = v->next;
		v->running = 0;
		v->next = mine;
		mine = v;
	}
	pthread_mutex_unlock(&cv_all_mu);
	/* All stop at once, then each is joined: they drain side by side. */
	for (v = mine; v != NULL; v = v->next) {
		pthread_mutex_lock(&v->mu);
		v->stopping = 1;
		v->deadline_ns = deadline_ns;
		pthread_cond_signal(&v->cv);
		pthread_mutex_unlock(&v->mu);
	}
	for (v = mine; v != NULL; v = v->next) {
		cv_thread_stop(v, deadline_ns);
		v->lane = NULL;
	}
}
