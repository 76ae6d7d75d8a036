/*
 * video_common.c: what every video decoder session does alike (video.h):
 * the refusals in the same words (a limit named, a broken bitstream),
 * the job's reset before a run, the reply's room sized from the stream's
 * spec, and the frame records after the tensors. The CPU backend's
 * session (video_avcodec.c) and the GPU's (gpu/cuda_video.c) differ only
 * in how a frame is decoded and preprocessed.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "clock.h"
#include "video.h"
#include "yuv.h"

const char *fprep__video_codec_name(const fprep_request *spec)
{
	return spec->src_format == FPREP_PIX_H264 ? "H.264" : "HEVC";
}

const char *fprep__video_key_name(const fprep_request *spec)
{
	return spec->src_format == FPREP_PIX_H264 ? "IDR" : "IRAP";
}

int fprep__video_fail(fprep__job *job, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(job->message, sizeof(job->message), fmt, ap);
	va_end(ap);
	job->status = status;
	return status;
}

int fprep__video_broken(fprep__job *job, const fprep_request *spec,
                        const char *why)
{
	return fprep__video_fail(job, FPREP_EBITSTREAM,
	                         FPREP__VIDEO_BROKEN
	                         ": %s packet pts %" PRId64
	                         ": %s; the stream waits for the next %s "
	                         "picture",
	                         fprep__video_codec_name(spec), job->stream.pts,
	                         why, fprep__video_key_name(spec));
}

int fprep__video_check_size(fprep__job *job, const fprep_request *spec, int w,
                            int h)
{
	const fprep_limits *lim = job->limits;
	const char *codec = fprep__video_codec_name(spec);
	uint64_t bytes = (uint64_t)w * (uint64_t)h * 3 / 2;

	if (w <= 0 || h <= 0)
		return FPREP_OK; /* not known yet */
	if ((uint32_t)w > lim->max_width)
		return fprep__video_fail(job, FPREP_ELIMIT,
		                         "%s coded width %d exceeds "
		                         "max_width %" PRIu32,
		                         codec, w, lim->max_width);
	if ((uint32_t)h > lim->max_height)
		return fprep__video_fail(job, FPREP_ELIMIT,
		                         "%s coded height %d exceeds "
		                         "max_height %" PRIu32,
		                         codec, h, lim->max_height);
	if (bytes > lim->max_frame_bytes)
		return fprep__video_fail(
		        job, FPREP_ELIMIT,
		        "%s coded size %dx%d: %" PRIu64
		        " NV12 bytes exceed max_frame_bytes %" PRIu64,
		        codec, w, h, bytes, lim->max_frame_bytes);
	return FPREP_OK;
}

void fprep__video_job_begin(fprep__job *job)
{
	job->status = FPREP_OK;
	job->frames = 0;
	job->reply_flags = 0;
	job->output_size = 0;
	memset(&job->xf, 0, sizeof(job->xf));
}

void fprep__video_frame_request(const fprep_request *spec, fprep_request *req,
                                uint16_t format, uint32_t w, uint32_t h)
{
	*req = *spec;
	req->kind = FPREP_KIND_FRAME;
	req->src_format = format;
	req->src_width = w;
	req->src_height = h;
	req->src_stride = w;
	fprep__yuv_default_planes(req);
}

int fprep__video_reserve(fprep__job *job, const fprep_request *spec, unsigned n,
                         fprep__video_room *room)
{
	uint32_t shape[4];
	uint64_t total, tensors;
	fprep_request req;
	uint8_t *out;

	memset(room, 0, sizeof(*room));
	fprep__video_frame_request(spec, &req, FPREP_PIX_I420, 2, 2);
	if (fprep_tensor_shape(&req, shape, &room->one) != FPREP_OK)
		return fprep__video_fail(job, FPREP_EINTERNAL, "tensor shape");
	tensors = room->one * n;
	if (job->output != NULL && tensors > job->req.out_capacity)
		return fprep__video_fail(
		        job, FPREP_ELIMIT,
		        "out_capacity %" PRIu64 " bytes holds %" PRIu64
		        " of this reply's %u frames of %" PRIu64
		        " bytes: they were dropped",
		        job->req.out_capacity,
		        job->req.out_capacity / room->one, n, room->one);
	total = (uint64_t)FPREP_STREAM_FRAME_SIZE * n +
	        (job->output != NULL ? 0 : tensors);
	out = job->reserve(job, total);
	if (out == NULL)
		return fprep__video_fail(
		        job, FPREP_ENOMEM,
		        "reply of %" PRIu64 " bytes: out of memory", total);
	if (job->output != NULL) {
		room->tensors = job->output;
		room->records = out;
		room->device = job->output_device;
	} else {
		room->tensors = out;
		room->records = out + tensors;
	}
	memcpy(job->shape, shape, sizeof(shape));
	job->shape[0] = n;
	job->output_size = tensors;
	job->frames = n;
	return FPREP_OK;
}

void fprep__video_record(fprep__job *job, const fprep__video_room *room,
                         unsigned k, int64_t pts, uint32_t w, uint32_t h,
                         const fprep_transform *xf)
{
	fprep_stream_frame rec;

	rec.pts = pts;
	rec.width = w;
	rec.height = h;
	rec.scale_x = xf->scale_x;
	rec.scale_y = xf->scale_y;
	rec.pad_x = (float)xf->pad_x;
	rec.pad_y = (float)xf->pad_y;
	fprep_stream_frame_encode(
	        &rec, room->records + (size_t)k * FPREP_STREAM_FRAME_SIZE);
	if (k == 0)
		job->xf = *xf;
}

void fprep__video_steps_run(fprep__video *v, fprep__job *job,
                            const fprep__video_steps *steps, int opened)
{
	uint64_t t0 = fprep__now_ns();
	int rv;

	fprep__video_job_begin(job);
	switch (job->stream.kind) {
	case FPREP_KIND_STREAM_OPEN:
		steps->open(v, job);
		return;
	case FPREP_KIND_STREAM_PACKET:
		rv = opened ? steps->packet(v, job) : FPREP_EINTERNAL;
		break;
	case FPREP_KIND_STREAM_FLUSH:
		rv = opened ? steps->flush(v, job) : FPREP_EINTERNAL;
		break;
	default:
		rv = fprep__video_fail(job, FPREP_EINTERNAL,
		                       "stream job of kind %u",
		                       job->stream.kind);
	}
	job->t_decode_us = (uint32_t)((fprep__now_ns() - t0) / 1000);
	if (rv == FPREP_OK)
		rv = steps->emit(v, job);
	job->status = rv;
}

/* video_ps_add appends len bytes at p to ps. */
static int video_ps_add(fprep__video_ps *ps, const uint8_t *p, size_t len)
{
	if (ps->len + len > ps->cap) {
		size_t cap = 2 * (ps->len + len);
		uint8_t *q = realloc(ps->data, cap);

		if (q == NULL)
			return -1;
		ps->data = q;
		ps->cap = cap;
	}
	memcpy(ps->data + ps->len, p, len);
	ps->len += len;
	return 0;
}

int fprep__video_scan(const fprep_request *spec, const uint8_t *p, size_t n,
                      fprep__video_ps *ps)
{
	int h264 = spec->src_format == FPREP_PIX_H264, key = 0, seen = 0;
	size_t i = 0;

	while (i + 3 <= n) {
		if (p[i] != 0 || p[i + 1] != 0 || p[i + 2] != 1) {
			i++;
			continue;
		}
		size_t start = i > 0 && p[i - 1] == 0 ? i - 1 : i;
		size_t body = i + 3, end = body;

		while (end + 3 <= n &&
		       !(p[end] == 0 && p[end + 1] == 0 && p[end + 2] == 1))
			end++;
		if (end + 3 > n)
			end = n;
		else if (end > body && p[end - 1] == 0)
			end--; /* the next one's four-byte start code */
		if (body < n) {
			unsigned t =
			        h264 ? p[body] & 0x1fu : (p[body] >> 1) & 0x3fu;
			int is_ps =
			        h264 ? t == 7 || t == 8 : t >= 32 && t <= 34;

			key |= h264 ? t == 5 : t >= 16 && t <= 23;
			if (ps != NULL && is_ps) {
				if (!seen)
					ps->len = 0;
				seen = 1;
				if (video_ps_add(ps, p + start, end - start) !=
				    0)
					return -1;
			}
		}
		i = end;
	}
	return key;
}
