/*
 * video_avcodec.c: the CPU backend's video decoder (video.h): libavcodec's
 * software H.264 and HEVC decoders, each frame then preprocessed by the
 * CPU ops as the I420 frame it is.
 *
 * A session opens its decoder in its first job (STREAM_OPEN), with the
 * stream's parameter sets as extradata, one thread (the streams are the
 * parallelism) and AV_EF_EXPLODE, so that a damaged slice is an error
 * rather than a concealed picture. Every packet first goes through
 * libavcodec's parser of the codec, which reads the parameter sets and the
 * slice headers without decoding: the coded size of the sequence parameter
 * set that the packet's pictures use is checked against the limits there,
 * before the decoder sees the packet and allocates anything for it, and
 * the parser says whether the packet starts an IDR (H.264) or IRAP (HEVC)
 * picture. A packet the decoder refuses, or a frame it marks corrupt,
 * answers FPREP_EBITSTREAM with a message that starts "broken bitstream"
 * (FPREP__VIDEO_BROKEN); the decoder is then flushed and the session drops
 * packets until the next such picture, from which it decodes again.
 *
 * The frames a packet lets out (display order: the decoder reorders) are
 * held until the packet is done, at most max_stream_frames, then copied
 * into one contiguous I420 buffer of the session's (grow-only) and
 * preprocessed straight into the reply's room (job->reserve). A frame of
 * odd width or height, which the I420 op does not take, is converted at
 * its even coded size to RGB8 by the same op (a STRETCH to its own size,
 * U8 NHWC, which is the exact conversion) and that image, cropped to the
 * frame's size, is preprocessed as an RGB8 frame: protocol.h defines a YUV
 * frame's tensor as that of its RGB8 image.
 *
 * No binary links libavcodec: with its encoders (x264, x265) and their
 * dependencies it weighs more than the rest of the daemon, and a machine
 * that serves only images should not need it. The first stream open
 * (and INFO) loads libavutil and libavcodec with dlopen, the sonames of
 * the headers built against (Debian 12: libavutil.so.57, libavcodec.so.59),
 * else the unversioned names, and looks the functions used up into one
 * table (avc), typed from the headers; a library of another major
 * version is refused, since its structures differ. FPREP_AVCODEC=off
 * turns it off. Without them STREAM_OPEN answers FPREP_EUNSUPPORTED
 * naming the library, and everything else is served as before.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/pixdesc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "fprep_assert.h"
#include "log.h"
#include "ops.h"
#include "video.h"
#include "yuv.h"

#define AVC_STR_(x) #x
#define AVC_STR(x)  AVC_STR_(x)
#define AVC_AVUTIL  "libavutil.so." AVC_STR(LIBAVUTIL_VERSION_MAJOR)
#define AVC_AVCODEC "libavcodec.so." AVC_STR(LIBAVCODEC_VERSION_MAJOR)

/* The functions used, by library. */
#define AVC_AVUTIL_FUNCS(X)                                                    \
	X(avutil_version)                                                      \
	X(av_strerror)                                                         \
	X(av_mallocz)                                                          \
	X(av_get_pix_fmt_name)                                                 \
	X(av_frame_alloc)                                                      \
	X(av_frame_free)                                                       \
	X(av_frame_unref)                                                      \
	X(av_frame_move_ref)
#define AVC_AVCODEC_FUNCS(X)                                                   \
	X(avcodec_version)                                                     \
	X(avcodec_find_decoder)                                                \
	X(avcodec_alloc_context3)                                              \
	X(avcodec_free_context)                                                \
	X(avcodec_open2)                                                       \
	X(avcodec_send_packet)                                                 \
	X(avcodec_receive_frame)                                               \
	X(avcodec_flush_buffers)                                               \
	X(av_parser_init)                                                      \
	X(av_parser_parse2)                                                    \
	X(av_parser_close)                                                     \
	X(av_packet_alloc)                                                     \
	X(av_packet_free)                                                      \
	X(av_packet_unref)                                                     \
	X(av_new_packet)

static struct {
#define AVC_FIELD(f) __typeof__(f) *f;
	AVC_AVUTIL_FUNCS(AVC_FIELD)
	AVC_AVCODEC_FUNCS(AVC_FIELD)
#undef AVC_FIELD
} avc;

static pthread_once_t avc_once = PTHREAD_ONCE_INIT;
static int avc_loaded;
static char avc_why[256];  /* why not loaded */
static char avc_from[128]; /* what was loaded: its version */

/* avc_dlopen opens the first of names that opens; NULL (avc_why says
 * why, in the first name's words) when none does. */
static void *avc_dlopen(const char *const names[2])
{
	void *h;

	for (int i = 0; i < 2; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h != NULL)
			return h;
		if (i == 0)
			snprintf(avc_why, sizeof avc_why, "%s", dlerror());
	}
	return NULL;
}

/* avc_load runs once: opens libavutil and libavcodec and looks every
 * function up, checking their major versions against the headers'. */
static void avc_load(void)
{
	static const char *const util_names[2] = {AVC_AVUTIL, "libavutil.so"};
	static const char *const codec_names[2] = {AVC_AVCODEC,
	                                           "libavcodec.so"};
	const char *env = getenv("FPREP_AVCODEC");
	void *util = NULL, *codec = NULL;
	unsigned uv, cv;

	if (env != NULL && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0)) {
		snprintf(avc_why, sizeof avc_why,
		         "libavcodec turned off (FPREP_AVCODEC=%s)", env);
		goto fail;
	}
	if ((util = avc_dlopen(util_names)) == NULL ||
	    (codec = avc_dlopen(codec_names)) == NULL)
		goto fail;
#define AVC_LOOKUP(lib, name)                                                  \
	if ((*(void **)&avc.name = dlsym(lib, #name)) == NULL) {               \
		snprintf(avc_why, sizeof avc_why, "%s has no %s",              \
		         lib == util ? "libavutil" : "libavcodec", #name);     \
		goto fail;                                                     \
	}
#define AVC_LOOKUP_UTIL(f)  AVC_LOOKUP(util, f)
#define AVC_LOOKUP_CODEC(f) AVC_LOOKUP(codec, f)
	AVC_AVUTIL_FUNCS(AVC_LOOKUP_UTIL)
	AVC_AVCODEC_FUNCS(AVC_LOOKUP_CODEC)
#undef AVC_LOOKUP_CODEC
#undef AVC_LOOKUP_UTIL
#undef AVC_LOOKUP
	uv = avc.avutil_version();
	cv = avc.avcodec_version();
	if (AV_VERSION_MAJOR(uv) != LIBAVUTIL_VERSION_MAJOR ||
	    AV_VERSION_MAJOR(cv) != LIBAVCODEC_VERSION_MAJOR) {
		snprintf(avc_why, sizeof avc_why,
		         "libavutil %u and libavcodec %u found, built for "
		         "%s and %s",
		         AV_VERSION_MAJOR(uv), AV_VERSION_MAJOR(cv), AVC_AVUTIL,
		         AVC_AVCODEC);
		goto fail;
	}
	snprintf(avc_from, sizeof avc_from, "libavcodec %u.%u.%u",
	         AV_VERSION_MAJOR(cv), AV_VERSION_MINOR(cv),
	         AV_VERSION_MICRO(cv));
	avc_loaded = 1;
	fprep__log(FPREP_LOG_INFO,
	           "video: %s loaded: streams decode on the workers", avc_from);
	return;
fail:
	if (codec != NULL)
		dlclose(codec);
	if (util != NULL)
		dlclose(util);
	memset(&avc, 0, sizeof avc);
	fprep__log(FPREP_LOG_INFO,
	           "video: no decoder (%s): STREAM_OPEN refused", avc_why);
}

int fprep__video_avcodec_load(char *buf, size_t size)
{
	pthread_once(&avc_once, avc_load);
	if (size > 0)
		snprintf(buf, size, "%s", avc_loaded ? avc_from : avc_why);
	return avc_loaded ? FPREP_OK : FPREP_EUNSUPPORTED;
}

struct avc_video {
	fprep__video base; /* first */
	int loaded;        /* the open job found libavcodec (avc) */
	fprep_request spec;
	uint8_t *params;
	size_t params_len;
	AVCodecContext *ctx;          /* NULL until the open job */
	AVCodecParserContext *parser; /* the codec's, complete frames */
	AVCodecContext *parser_ctx;
	AVPacket *pkt;
	AVFrame *frame;
	AVFrame **held; /* frames let out by the current job */
	unsigned nheld;
	unsigned held_cap;
	int skipping; /* after an error: drop packets until an IDR/IRAP */
	uint8_t *yuv; /* a frame's I420 planes, contiguous */
	size_t yuv_cap;
	uint8_t *rgb; /* an odd-sized frame's RGB8 image */
	size_t rgb_cap;
};

/* avc_av_error: a libavcodec error's words. */
static const char *avc_av_error(int err, char *buf, size_t size)
{
	if (avc.av_strerror(err, buf, size) != 0)
		snprintf(buf, size, "libavcodec error %d", err);
	return buf;
}

/* avc_parse runs the parser over size bytes at data: it learns the
 * parameter sets and the slice headers, without decoding. */
static void avc_parse(struct avc_video *v, const uint8_t *data, int size,
                      int64_t pts)
{
	uint8_t *out;
	int out_size;

	while (size > 0) {
		int n = avc.av_parser_parse2(v->parser, v->parser_ctx, &out,
		                             &out_size, data, size, pts,
		                             AV_NOPTS_VALUE, 0);

		if (n <= 0)
			break;
		data += n;
		size -= n;
	}
}

/* avc_open opens the decoder and the parser (the STREAM_OPEN job). */
static int avc_open(fprep__video *base, fprep__job *job)
{
	struct avc_video *v = (struct avc_video *)base;
	enum AVCodecID id = v->spec.src_format == FPREP_PIX_H264
	                            ? AV_CODEC_ID_H264
	                            : AV_CODEC_ID_HEVC;
	const AVCodec *codec;
	char err[AV_ERROR_MAX_STRING_SIZE];
	int rv;

	pthread_once(&avc_once, avc_load);
	if (!avc_loaded)
		return fprep__video_fail(
		        job, FPREP_EUNSUPPORTED,
		        "%s streams need libavcodec, which is not "
		        "available: %s",
		        fprep__video_codec_name(&v->spec), avc_why);
	v->loaded = 1;
	codec = avc.avcodec_find_decoder(id);
	if (codec == NULL)
		return fprep__video_fail(job, FPREP_EUNSUPPORTED,
		                         "this libavcodec has no %s decoder",
		                         fprep__video_codec_name(&v->spec));
	v->ctx = avc.avcodec_alloc_context3(codec);
	v->parser = avc.av_parser_init(id);
	v->parser_ctx = avc.avcodec_alloc_context3(NULL);
	v->pkt = avc.av_packet_alloc();
	v->frame = avc.av_frame_alloc();
	if (v->ctx == NULL || v->parser == NULL || v->parser_ctx == NULL ||
	    v->pkt == NULL || v->frame == NULL)
		return fprep__video_fail(job, FPREP_ENOMEM,
		                         "%s decoder: out of memory",
		                         fprep__video_codec_name(&v->spec));
	v->parser->flags |= PARSER_FLAG_COMPLETE_FRAMES;
	v->ctx->thread_count = 1;
	v->ctx->err_recognition = AV_EF_EXPLODE;
	v->ctx->max_pixels =
	        (int64_t)job->limits->max_width * job->limits->max_height;
	if (v->params_len > 0) {
		v->ctx->extradata = avc.av_mallocz(
		        v->params_len + AV_INPUT_BUFFER_PADDING_SIZE);
		if (v->ctx->extradata == NULL)
			return fprep__video_fail(
			        job, FPREP_ENOMEM,
			        "parameter sets: out of memory");
		memcpy(v->ctx->extradata, v->params, v->params_len);
		v->ctx->extradata_size = (int)v->params_len;
		avc_parse(v, v->params, (int)v->params_len, AV_NOPTS_VALUE);
	}
	rv = avc.avcodec_open2(v->ctx, codec, NULL);
	if (rv < 0)
		return fprep__video_fail(job, FPREP_EBITSTREAM,
		                         FPREP__VIDEO_BROKEN
		                         ": %s parameter sets: %s "
		                         "(libavcodec)",
		                         fprep__video_codec_name(&v->spec),
		                         avc_av_error(rv, err, sizeof(err)));
	/* HEVC's decoder exports the first SPS's size at open. */
	if (fprep__video_check_size(job, &v->spec, v->ctx->coded_width,
	                            v->ctx->coded_height))
		return job->status;
	v->skipping = 1; /* the first picture decoded is an IDR/IRAP */
	return FPREP_OK;
}

/* avc_drop lets go of the frames held. */
static void avc_drop(struct avc_video *v)
{
	for (unsigned k = 0; k < v->nheld; k++)
		avc.av_frame_unref(v->held[k]);
	v->nheld = 0;
}

/* avc_reset makes the decoder forget what it held; the stream waits for
 * the next IDR/IRAP picture. */
static void avc_reset(struct avc_video *v)
{
	avc_drop(v);
	avc.avcodec_flush_buffers(v->ctx);
	v->skipping = 1;
}

/* avc_broken answers a broken packet, why in libavcodec's words, and
 * resets the decoder; returns FPREP_EBITSTREAM. */
static int avc_broken(struct avc_video *v, fprep__job *job, const char *why)
{
	avc_reset(v);
	return fprep__video_broken(job, &v->spec, why);
}

/* avc_hold keeps v->frame among the held frames. */
static int avc_hold(struct avc_video *v, fprep__job *job)
{
	uint32_t max = job->limits->max_stream_frames;

	if (v->nheld >= max)
		return fprep__video_fail(
		        job, FPREP_ELIMIT,
		        "%s stream: more than max_stream_frames %" PRIu32
		        " decoded frames at once",
		        fprep__video_codec_name(&v->spec), max);
	if (v->nheld == v->held_cap) {
		unsigned cap = v->held_cap ? 2 * v->held_cap : 8;
		AVFrame **held = realloc(v->held, cap * sizeof(*held));

		if (held == NULL)
			return fprep__video_fail(
			        job, FPREP_ENOMEM,
			        "decoded frames: out of memory");
		for (unsigned k = v->held_cap; k < cap; k++)
			held[k] = NULL;
		v->held = held;
		v->held_cap = cap;
	}
	if (v->held[v->nheld] == NULL &&
	    (v->held[v->nheld] = avc.av_frame_alloc()) == NULL)
		return fprep__video_fail(job, FPREP_ENOMEM,
		                         "decoded frames: out of memory");
	avc.av_frame_move_ref(v->held[v->nheld++], v->frame);
	return FPREP_OK;
}

/* avc_receive takes every frame the decoder lets out now. */
static int avc_receive(struct avc_video *v, fprep__job *job)
{
	char err[AV_ERROR_MAX_STRING_SIZE];
	int rv;

	while ((rv = avc.avcodec_receive_frame(v->ctx, v->frame)) == 0) {
		if (v->frame->decode_error_flags != 0 ||
		    (v->frame->flags & AV_FRAME_FLAG_CORRUPT) != 0) {
			avc.av_frame_unref(v->frame);
			return avc_broken(v, job,
			                  "a picture decoded with errors");
		}
		if (avc_hold(v, job) != FPREP_OK) {
			avc.av_frame_unref(v->frame);
			avc_reset(v);
			return job->status;
		}
	}
	if (rv == AVERROR(EAGAIN) || rv == AVERROR_EOF)
		return FPREP_OK;
	return avc_broken(v, job, avc_av_error(rv, err, sizeof(err)));
}

/* avc_packet decodes the job's packet into held frames. */
static int avc_packet(fprep__video *base, fprep__job *job)
{
	struct avc_video *v = (struct avc_video *)base;
	int size = (int)job->stream.packet_size;
	char err[AV_ERROR_MAX_STRING_SIZE];
	int rv;

	v->parser->key_frame = -1;
	v->parser->coded_width = v->parser->coded_height = 0;
	avc_parse(v, job->input, size, job->stream.pts);
	if (fprep__video_check_size(job, &v->spec, v->parser->coded_width,
	                            v->parser->coded_height) != FPREP_OK) {
		avc_reset(v);
		return job->status;
	}
	if (v->skipping && v->parser->key_frame != 1) {
		job->reply_flags |= FPREP_REPLY_F_STREAM_SKIPPED;
		return FPREP_OK;
	}
	if (v->skipping) {
		avc.avcodec_flush_buffers(v->ctx);
		v->skipping = 0;
	}
	avc.av_packet_unref(v->pkt);
	if (avc.av_new_packet(v->pkt, size) != 0)
		return fprep__video_fail(job, FPREP_ENOMEM,
		                         "packet: out of memory");
	memcpy(v->pkt->data, job->input, (size_t)size);
	v->pkt->pts = job->stream.pts;
	rv = avc.avcodec_send_packet(v->ctx, v->pkt);
	avc.av_packet_unref(v->pkt);
	if (rv < 0)
		return avc_broken(v, job, avc_av_error(rv, err, sizeof(err)));
	if ((uint32_t)v->ctx->has_b_frames > job->limits->max_stream_frames) {
		fprep__video_fail(job, FPREP_ELIMIT,
		                  "%s stream reorders %d frames: more than "
		                  "max_stream_frames %" PRIu32,
		                  fprep__video_codec_name(&v->spec),
		                  v->ctx->has_b_frames,
		                  job->limits->max_stream_frames);
		avc_reset(v);
		return job->status;
	}
	return avc_receive(v, job);
}

/* avc_flush lets out every frame the decoder holds; the stream then
 * starts again at an IDR/IRAP picture. */
static int avc_flush(fprep__video *base, fprep__job *job)
{
	struct avc_video *v = (struct avc_video *)base;
	char err[AV_ERROR_MAX_STRING_SIZE];
	int rv;

	if (v->skipping)
		return FPREP_OK; /* it holds nothing */
	rv = avc.avcodec_send_packet(v->ctx, NULL);
	if (rv < 0 && rv != AVERROR_EOF)
		return avc_broken(v, job, avc_av_error(rv, err, sizeof(err)));
	if (avc_receive(v, job) != FPREP_OK)
		return job->status;
	avc.avcodec_flush_buffers(v->ctx);
	v->skipping = 1;
	return FPREP_OK;
}

/* avc_grow makes *buf hold at least size bytes (grow-only). */
static int avc_grow(uint8_t **buf, size_t *cap, size_t size)
{
	uint8_t *p;

	if (*cap >= size)
		return 0;
	p = realloc(*buf, size);
	if (p == NULL)
		return -1;
	*buf = p;
	*cap = size;
	return 0;
}

/* avc_planes copies frame f's planes, at its even-rounded size we x he,
 * into v->yuv as I420 that follow each other. The decoder's buffers are
 * padded to whole macroblocks or coding blocks, so the row and column
 * past an odd size are there. */
static int avc_planes(struct avc_video *v, const AVFrame *f, uint32_t we,
                      uint32_t he)
{
	size_t y_bytes = (size_t)we * he, c_bytes = (size_t)(we / 2) * (he / 2);
	uint8_t *dst;

	if (avc_grow(&v->yuv, &v->yuv_cap, y_bytes + 2 * c_bytes) != 0)
		return FPREP_ENOMEM;
	dst = v->yuv;
	for (uint32_t y = 0; y < he; y++)
		memcpy(dst + (size_t)y * we,
		       f->data[0] + (ptrdiff_t)y * f->linesize[0], we);
	for (int p = 1; p <= 2; p++) {
		dst = v->yuv + y_bytes + (size_t)(p - 1) * c_bytes;
		for (uint32_t y = 0; y < he / 2; y++)
			memcpy(dst + (size_t)y * (we / 2),
			       f->data[p] + (ptrdiff_t)y * f->linesize[p],
			       we / 2);
	}
	return FPREP_OK;
}

/* avc_i420 fills *req as an I420 FRAME of w x h (even) whose planes
 * follow each other, with the stream's tensor spec (or, rgb set, as the
 * exact RGB8 conversion of it: STRETCH to its own size, U8, NHWC). */
static void avc_i420(const struct avc_video *v, fprep_request *req, uint32_t w,
                     uint32_t h, int rgb)
{
	fprep__video_frame_request(&v->spec, req, FPREP_PIX_I420, w, h);
	if (!rgb)
		return;
	req->out_width = w;
	req->out_height = h;
	req->resize = FPREP_RESIZE_STRETCH;
	req->rounding = FPREP_ROUNDING_FLOAT;
	req->channel_order = FPREP_ORDER_RGB;
	req->dtype = FPREP_DTYPE_U8;
	req->layout = FPREP_LAYOUT_NHWC;
	req->scale = 1.0f / 255.0f;
	for (int c = 0; c < 3; c++) {
		req->mean[c] = 0.0f;
		req->std[c] = 1.0f;
	}
}

/* avc_tensor preprocesses decoded frame f into tensor (bytes), its
 * transform into *xf. */
static int avc_tensor(struct avc_video *v, fprep__job *job, const AVFrame *f,
                      uint8_t *tensor, uint64_t bytes, fprep_transform *xf)
{
	uint32_t w = (uint32_t)f->width, h = (uint32_t)f->height;
	uint32_t we = (w + 1) & ~1u, he = (h + 1) & ~1u;
	fprep_request req;

	if (f->format != AV_PIX_FMT_YUV420P && f->format != AV_PIX_FMT_YUVJ420P)
		return fprep__video_fail(
		        job, FPREP_EUNSUPPORTED,
		        "%s frame of pixel format %s: only 8-bit "
		        "4:2:0 is supported",
		        fprep__video_codec_name(&v->spec),
		        avc.av_get_pix_fmt_name(f->format) != NULL
		                ? avc.av_get_pix_fmt_name(f->format)
		                : "unknown");
	if (fprep__video_check_size(job, &v->spec, f->width, f->height) !=
	    FPREP_OK)
		return job->status;
	if (avc_planes(v, f, we, he) != FPREP_OK)
		return fprep__video_fail(job, FPREP_ENOMEM,
		                         "frame: out of memory");
	if (w == we && h == he) {
		avc_i420(v, &req, w, h, 0);
		if (fprep_preprocess_cpu(&req, v->yuv, tensor, bytes, xf) != 0)
			return fprep__video_fail(
			        job, FPREP_EINTERNAL,
			        "frame %ux%u: preprocessing refused", w, h);
		return FPREP_OK;
	}
	/* Odd: the RGB8 image of the even frame, cropped. */
	if (avc_grow(&v->rgb, &v->rgb_cap, (size_t)we * he * 3) != 0)
		return fprep__video_fail(job, FPREP_ENOMEM,
		                         "frame: out of memory");
	avc_i420(v, &req, we, he, 1);
	if (fprep_preprocess_cpu(&req, v->yuv, v->rgb, (size_t)we * he * 3,
	                         NULL) != 0)
		return fprep__video_fail(job, FPREP_EINTERNAL,
		                         "frame %ux%u: conversion refused", we,
		                         he);
	req = v->spec;
	req.kind = FPREP_KIND_FRAME;
	req.src_format = FPREP_PIX_RGB8;
	req.src_width = w;
	req.src_height = h;
	req.src_stride = we * 3;
	req.input_size = (uint64_t)req.src_stride * (h - 1) + (uint64_t)w * 3;
	if (fprep_preprocess_cpu(&req, v->rgb, tensor, bytes, xf) != 0)
		return fprep__video_fail(job, FPREP_EINTERNAL,
		                         "frame %ux%u: preprocessing refused",
		                         w, h);
	return FPREP_OK;
}

/* avc_emit preprocesses the held frames into the reply: their tensors,
 * then a frame record each. */
static int avc_emit(fprep__video *base, fprep__job *job)
{
	struct avc_video *v = (struct avc_video *)base;
	fprep__video_room room;

	if (fprep__video_reserve(job, &v->spec, v->nheld, &room) != FPREP_OK)
		return job->status;
	/* The loop gives a CPU stream no CUDA region (streams.c). */
	FPREP__ASSERT(!room.device);
	for (unsigned k = 0; k < v->nheld; k++) {
		const AVFrame *f = v->held[k];
		fprep_transform xf;

		if (avc_tensor(v, job, f, room.tensors + k * room.one, room.one,
		               &xf) != FPREP_OK)
			return job->status;
		fprep__video_record(
		        job, &room, k,
		        f->pts != AV_NOPTS_VALUE ? f->pts
		                                 : f->best_effort_timestamp,
		        (uint32_t)f->width, (uint32_t)f->height, &xf);
	}
	return FPREP_OK;
}

static const fprep__video_steps avc_steps = {
        .open = avc_open,
        .packet = avc_packet,
        .flush = avc_flush,
        .emit = avc_emit,
};

static void avc_run(fprep__video *base, fprep__job *job)
{
	struct avc_video *v = (struct avc_video *)base;

	fprep__video_steps_run(base, job, &avc_steps, v->ctx != NULL);
	avc_drop(v);
}

static void avc_close(fprep__video *base)
{
	struct avc_video *v = (struct avc_video *)base;

	if (!v->loaded) { /* nothing of libavcodec's was made */
		free(v->params);
		free(v);
		return;
	}
	avc_drop(v);
	for (unsigned k = 0; k < v->held_cap; k++)
		avc.av_frame_free(&v->held[k]);
	free(v->held);
	avc.av_frame_free(&v->frame);
	avc.av_packet_free(&v->pkt);
	if (v->parser != NULL)
		avc.av_parser_close(v->parser);
	avc.avcodec_free_context(&v->parser_ctx);
	avc.avcodec_free_context(&v->ctx);
	free(v->params);
	free(v->yuv);
	free(v->rgb);
	free(v);
}

static const fprep__video_ops avc_ops = {
        .run = avc_run,
        .close = avc_close,
};

int fprep__video_avcodec_open(const fprep_request *spec, const uint8_t *params,
                              size_t params_len, fprep__video **vp)
{
	struct avc_video *v = calloc(1, sizeof(*v));

	if (v == NULL)
		return FPREP_ENOMEM;
	v->base.ops = &avc_ops;
	v->spec = *spec;
	if (params_len > 0) {
		v->params = malloc(params_len);
		if (v->params == NULL) {
			free(v);
			return FPREP_ENOMEM;
		}
		memcpy(v->params, params, params_len);
		v->params_len = params_len;
	}
	*vp = &v->base;
	return 0;
}
