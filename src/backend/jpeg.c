/*
 * jpeg.c: JPEG source frames decoded with libjpeg-turbo's TurboJPEG API
 * (see jpeg.h).
 *
 * The header is read with tjDecompressHeader3, which parses the markers up
 * to the first scan and allocates no image memory, so a few hundred bytes
 * claiming 65535 x 65535 pixels cost nothing before they are refused. Before
 * it, jpeg_sof reads the SOF's size itself: libjpeg refuses a side over
 * 65500 pixels with its own words, and a client is better told which of
 * the daemon's limits it passed. The
 * decode runs with TJFLAG_STOPONWARNING (libjpeg's "Corrupt JPEG data" and
 * "Premature end of JPEG file" warnings would otherwise leave grey rows in
 * a frame reported as decoded) and TJFLAG_LIMITSCANS (a progressive file
 * of thousands of tiny scans takes seconds of CPU). The IDCT (islow) and
 * the chroma upsampling (fancy) are libjpeg-turbo's defaults, which are
 * also what cv2.imdecode uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "clock.h"
#include "jpeg.h"
#include "ops.h"

#define JPEG_FLAGS (TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)

void fprep__jpeg_init(fprep__jpeg *j)
{
	memset(j, 0, sizeof(*j));
	j->tj = tjInitDecompress();
}

void fprep__jpeg_fini(fprep__jpeg *j)
{
	if (j->tj != NULL)
		tjDestroy(j->tj);
	free(j->buf);
	memset(j, 0, sizeof(*j));
}

/* jpeg_failed copies libjpeg-turbo's words about a failure into msg and
 * replaces j's handle: TurboJPEG 2.1 leaves a handle whose header or
 * decode failed in a state where the next call on it fails too (with the
 * old message), so one bad frame would fail every later frame of this
 * thread. Returns FPREP_EINVAL. */
static int jpeg_failed(fprep__jpeg *j, const char *what, char *msg, size_t n)
{
	snprintf(msg, n, "%s%s", what, tjGetErrorStr2(j->tj));
	tjDestroy(j->tj);
	j->tj = tjInitDecompress();
	return FPREP_EINVAL;
}

/* jpeg_colorspace names a TJCS value for messages. */
static const char *jpeg_colorspace(int cs)
{
	switch (cs) {
	case TJCS_RGB:
		return "RGB";
	case TJCS_YCbCr:
		return "YCbCr";
	case TJCS_GRAY:
		return "grayscale";
	case TJCS_CMYK:
		return "CMYK";
	case TJCS_YCCK:
		return "YCCK";
	}
	return "unknown";
}

/* jpeg_check_size checks the header's size against the request and the
 * limits, before anything is allocated. */
static int jpeg_check_size(const fprep_request *rq, const fprep_limits *lim,
                           int w, int h, uint32_t bpp, char *msg, size_t n)
{
	uint64_t bytes = (uint64_t)w * (uint64_t)h * bpp;

	if ((rq->src_width != 0 || rq->src_height != 0) &&
	    (rq->src_width != (uint32_t)w || rq->src_height != (uint32_t)h)) {
		snprintf(msg, n,
		         "src_width x src_height %ux%u != the JPEG header's "
		         "%dx%d (send 0x0 or the header's size)",
		         rq->src_width, rq->src_height, w, h);
		return FPREP_EINVAL;
	}
	if ((uint32_t)w > lim->max_width) {
		snprintf(msg, n, "JPEG width %d exceeds max_width %u", w,
		         lim->max_width);
		return FPREP_ELIMIT;
	}
	if ((uint32_t)h > lim->max_height) {
		snprintf(msg, n, "JPEG height %d exceeds max_height %u", h,
		         lim->max_height);
		return FPREP_ELIMIT;
	}
	if (bytes > lim->max_frame_bytes) {
		snprintf(msg, n,
		         "JPEG %dx%d decodes to %llu bytes: exceeds "
		         "max_frame_bytes %llu",
		         w, h, (unsigned long long)bytes,
		         (unsigned long long)lim->max_frame_bytes);
		return FPREP_ELIMIT;
	}
	return FPREP_OK;
}

/* jpeg_sof walks the marker segments from SOI to the first SOFn and reads
 * its size into *w, *h. Returns 0, or -1 when there is no SOF before the
 * first scan or the bytes end (libjpeg-turbo then says what is wrong). */
static int jpeg_sof(const uint8_t *p, uint64_t n, uint32_t *w, uint32_t *h)
{
	uint64_t i = 2;
	uint8_t m;

	if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
		return -1;
	while (i + 4 <= n) {
		if (p[i] != 0xFF)
			return -1;
		m = p[i + 1];
		if (m == 0xFF) { /* a fill byte */
			i++;
			continue;
		}
		if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* no length */
			i += 2;
			continue;
		}
		if (m == 0xDA || m == 0xD9) /* a scan or the end: no SOF */
			return -1;
		/* SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC). */
		if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 &&
		    m != 0xCC) {
			if (i + 9 > n)
				return -1;
			*h = (uint32_t)p[i + 5] << 8 | p[i + 6];
			*w = (uint32_t)p[i + 7] << 8 | p[i + 8];
			return 0;
		}
		i += 2 + ((uint32_t)p[i + 2] << 8 | p[i + 3]);
	}
	return -1;
}

int fprep__jpeg_open(fprep__jpeg *j, const fprep__job *job, fprep_request *raw,
                     char *msg, size_t msg_size)
{
	const fprep_request *rq = &job->req;
	int w = 0, h = 0, subsamp = 0, cs = 0, rc;
	uint32_t bpp, sw, sh;

	j->t0_ns = fprep__now_ns();
	if (j->tj == NULL) {
		snprintf(msg, msg_size,
		         "JPEG: no decoder (tjInitDecompress "
		         "failed: out of memory)");
		return FPREP_ENOMEM;
	}
	if (job->input == NULL || job->limits == NULL ||
	    rq->input_size > (uint64_t)(unsigned long)-1) {
		snprintf(msg, msg_size, "JPEG: no input or no limits");
		return FPREP_EINVAL;
	}
	if (jpeg_sof(job->input, rq->input_size, &sw, &sh) == 0 && sw > 0 &&
	    sh > 0 &&
	    (rc = jpeg_check_size(rq, job->limits, (int)sw, (int)sh, 3, msg,
	                          msg_size)) != FPREP_OK)
		return rc;
	if (tjDecompressHeader3(j->tj, job->input,
	                        (unsigned long)rq->input_size, &w, &h, &subsamp,
	                        &cs) != 0)
		return jpeg_failed(j, "JPEG header: ", msg, msg_size);
	j->colorspace = cs;
	if (cs == TJCS_CMYK || cs == TJCS_YCCK || cs < 0) {
		snprintf(msg, msg_size,
		         "JPEG colour space %s is not supported (gray, YCbCr "
		         "or RGB)",
		         jpeg_colorspace(cs));
		return FPREP_EINVAL;
	}
	if (w < 1 || h < 1) {
		snprintf(msg, msg_size, "JPEG header: size %dx%d", w, h);
		return FPREP_EINVAL;
	}
	bpp = rq->channel_order == FPREP_ORDER_GRAY ? 1 : 3;
	rc = jpeg_check_size(rq, job->limits, w, h, 3, msg, msg_size);
	if (rc != FPREP_OK)
		return rc;
	*raw = *rq;
	raw->src_format = bpp == 1 ? FPREP_PIX_GRAY8
	                  : rq->channel_order == FPREP_ORDER_BGR
	                          ? FPREP_PIX_BGR8
	                          : FPREP_PIX_RGB8;
	raw->src_width = (uint32_t)w;
	raw->src_height = (uint32_t)h;
	raw->src_stride = (uint32_t)w * bpp;
	raw->input_size = (uint64_t)raw->src_stride * (uint32_t)h;
	raw->yuv_matrix = raw->yuv_range = 0;
	raw->uv_stride = 0;
	raw->u_offset = raw->v_offset = 0;
	return FPREP_OK;
}

uint8_t *fprep__jpeg_buffer(fprep__jpeg *j, size_t n)
{
	uint8_t *p;

	if (n <= j->cap)
		return j->buf;
	/* No realloc: the old contents are not needed. */
	p = malloc(n);
	if (p == NULL)
		return NULL;
	free(j->buf);
	j->buf = p;
	j->cap = n;
	return p;
}

int fprep__jpeg_decode(fprep__jpeg *j, fprep__job *job,
                       const fprep_request *raw, uint8_t *dst, char *msg,
                       size_t msg_size)
{
	int pf = raw->src_format == FPREP_PIX_GRAY8  ? TJPF_GRAY
	         : raw->src_format == FPREP_PIX_BGR8 ? TJPF_BGR
	                                             : TJPF_RGB;

	if (tjDecompress2(j->tj, job->input, (unsigned long)job->req.input_size,
	                  dst, (int)raw->src_width, (int)raw->src_stride,
	                  (int)raw->src_height, pf, JPEG_FLAGS) != 0) {
		return jpeg_failed(j, "JPEG: ", msg, msg_size);
	}
	fprep__jpeg_adopt(job, raw, dst, j->t0_ns);
	return FPREP_OK;
}

void fprep__jpeg_adopt(fprep__job *job, const fprep_request *raw,
                       const uint8_t *frame, uint64_t t0_ns)
{
	job->req = *raw;
	job->input = frame;
	fprep_transform_compute(&job->req, &job->xf);
	job->decoded_width = (uint16_t)raw->src_width;
	job->decoded_height = (uint16_t)raw->src_height;
	job->t_decode_us = (uint32_t)((fprep__now_ns() - t0_ns) / 1000);
}

uint64_t fprep__jpeg_t0(const fprep__jpeg *j)
{
	return j->t0_ns;
}

/* jpeg_entropy_ends scans the entropy-coded data from p[i] and returns
 * 1 when it ends in an EOI with only byte stuffing (FF 00), fill bytes
 * and restart markers before it; 0 at any other marker or at the end of
 * the bytes. */
static int jpeg_entropy_ends(const uint8_t *p, uint64_t n, uint64_t i)
{
	while (i < n) {
		const uint8_t *ff = memchr(p + i, 0xFF, (size_t)(n - i));
		uint8_t m;

		if (ff == NULL)
			return 0;
		i = (uint64_t)(ff - p) + 1;
		while (i < n && p[i] == 0xFF) /* fill bytes */
			i++;
		if (i >= n)
			return 0;
		m = p[i++];
		if (m == 0x00 || (m >= 0xD0 && m <= 0xD7))
			continue;
		return m == 0xD9;
	}
	return 0;
}

int fprep__jpeg_sequential(const uint8_t *p, uint64_t n)
{
	uint64_t i = 2, len;
	unsigned nf = 0;
	uint8_t m;

	if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
		return 0;
	while (i + 4 <= n) {
		if (p[i] != 0xFF)
			return 0;
		m = p[i + 1];
		if (m == 0xFF) {
			i++;
			continue;
		}
		if (m == 0x01 || (m >= 0xD0 && m <= 0xD7) || m == 0xD8 ||
		    m == 0xD9)
			return 0; /* no image before these here */
		len = (uint64_t)p[i + 2] << 8 | p[i + 3];
		if (len < 2 || i + 2 + len > n)
			return 0;
		if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 &&
		    m != 0xCC) {
			/* SOF: only baseline and extended sequential
			 * Huffman, 8-bit, 1 or 3 components; one frame. */
			if ((m != 0xC0 && m != 0xC1) || nf != 0 || len < 8 ||
			    p[i + 4] != 8)
				return 0;
			nf = p[i + 9];
			if ((nf != 1 && nf != 3) || len != 8 + 3 * nf)
				return 0;
		} else if (m == 0xDA) {
			/* The one scan: every component in it. */
			if (nf == 0 || len < 3 || p[i + 4] != nf)
				return 0;
			return jpeg_entropy_ends(p, n, i + 2 + len);
		}
		i += 2 + len;
	}
	return 0;
}
