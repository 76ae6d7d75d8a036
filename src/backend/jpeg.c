/*
 * jpeg.c: JPEG source frames decoded with libjpeg-turbo's libjpeg API
 * (see jpeg.h).
 *
 * The design is simple: one decompressor per fprep__jpeg reads a file's
 * header once (jpeg_read_header, which parses the markers up to the first
 * scan and allocates no image memory, so a few hundred bytes claiming
 * 65535 x 65535 pixels cost nothing before they are refused), the size is
 * checked against the limits, and the decode goes on from that same
 * header: nothing is parsed twice, and the bytes parsed are the daemon's
 * own (fprep__jpeg_open copies a JPEG out of a client's region first).
 * Before it, jpeg_sof reads the SOF's size itself: libjpeg refuses a side
 * over 65500 pixels with its own words, and a client is better told which
 * of the daemon's limits it passed.
 *
 * libjpeg's warnings ("Corrupt JPEG data", "Premature end of JPEG file")
 * are errors here, as TurboJPEG's TJFLAG_STOPONWARNING makes them: they
 * would otherwise leave grey rows in a frame reported as decoded. A
 * progress monitor counts the scans as libjpeg reads them and stops a
 * file past the scan caps (TurboJPEG's TJFLAG_LIMITSCANS does the same at
 * a fixed 500). The IDCT (islow) and the chroma upsampling (fancy) are
 * libjpeg's defaults, which are also what cv2.imdecode and tjDecompress2
 * use.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "clock.h"
#include "fprep_assert.h"
#include "jpeg.h"
#include "ops.h"

/* fprep__jpeg_dec: the decompressor and what its callbacks need. */
struct fprep__jpeg_dec {
	struct jpeg_decompress_struct cinfo;
	struct jpeg_error_mgr err;
	struct jpeg_progress_mgr progress;
	jmp_buf jump; /* where error_exit returns to */
	int status;   /* FPREP_EINVAL, or FPREP_ELIMIT (caps) */
	char msg[JMSG_LENGTH_MAX + 96];
	uint32_t max_scans; /* caps of the file being decoded */
	uint64_t max_scan_pixels;
	const fprep__job *job; /* whose header was read last, or NULL */
};

void fprep__jpeg_copy_free(fprep__jpeg_copy *c)
{
	free(c->p);
	c->p = NULL;
	c->cap = 0;
}

/* jpeg_error_exit replaces libjpeg's (which exits the process): the
 * message is kept and control returns to the call's setjmp. */
static void jpeg_error_exit(j_common_ptr ci)
{
	struct fprep__jpeg_dec *d = (struct fprep__jpeg_dec *)ci->client_data;

	if (d->msg[0] == '\0') {
		(*ci->err->format_message)(ci, d->msg);
		d->status = FPREP_EINVAL;
	}
	longjmp(d->jump, 1);
}

/* jpeg_emit_message makes libjpeg's warnings (level -1) errors; trace
 * messages (levels > 0) are dropped. */
static void jpeg_emit_message(j_common_ptr ci, int level)
{
	if (level < 0)
		(*ci->err->error_exit)(ci);
}

/* jpeg_progress stops a file past the scan caps; libjpeg calls it as it
 * reads the scans of a progressive (or multi-scan) file. */
static void jpeg_progress(j_common_ptr ci)
{
	struct fprep__jpeg_dec *d = (struct fprep__jpeg_dec *)ci->client_data;
	j_decompress_ptr di = (j_decompress_ptr)ci;
	uint64_t scans =
	        (uint64_t)(di->input_scan_number > 0 ? di->input_scan_number
	                                             : 0);
	uint64_t px = (uint64_t)di->image_width * di->image_height;

	if (scans > d->max_scans) {
		snprintf(d->msg, sizeof(d->msg),
		         "JPEG has more than max_jpeg_scans %u scans",
		         d->max_scans);
	} else if (scans * px > d->max_scan_pixels) {
		snprintf(d->msg, sizeof(d->msg),
		         "JPEG of %ux%u pixels in %u or more scans exceeds "
		         "max_jpeg_scan_pixels %llu (scans x pixels)",
		         di->image_width, di->image_height, (unsigned)scans,
		         (unsigned long long)d->max_scan_pixels);
	} else {
		return;
	}
	d->status = FPREP_ELIMIT;
	longjmp(d->jump, 1);
}

/* jpeg_dec_alloc makes a decompressor; NULL when out of memory (libjpeg
 * allocates its own state in jpeg_create_decompress). */
static struct fprep__jpeg_dec *jpeg_dec_alloc(void)
{
	struct fprep__jpeg_dec *volatile d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->cinfo.err = jpeg_std_error(&d->err);
	d->err.error_exit = jpeg_error_exit;
	d->err.emit_message = jpeg_emit_message;
	d->cinfo.client_data = d;
	if (setjmp(d->jump) != 0) {
		free(d);
		return NULL;
	}
	jpeg_create_decompress(&d->cinfo);
	d->progress.progress_monitor = jpeg_progress;
	return d;
}

void fprep__jpeg_init(fprep__jpeg *j)
{
	memset(j, 0, sizeof(*j));
	j->dec = jpeg_dec_alloc();
}

void fprep__jpeg_fini(fprep__jpeg *j)
{
	if (j->dec != NULL) {
		jpeg_destroy_decompress(&j->dec->cinfo);
		free(j->dec);
	}
	free(j->buf);
	fprep__jpeg_copy_free(&j->copy);
	memset(j, 0, sizeof(*j));
}

/* jpeg_failed copies libjpeg's words about a failure into msg and leaves
 * the decompressor ready for the next file. Returns the status. */
static int jpeg_failed(fprep__jpeg *j, const char *what, char *msg, size_t n)
{
	struct fprep__jpeg_dec *d = j->dec;

	snprintf(msg, n, "%s%s", d->status == FPREP_ELIMIT ? "" : what, d->msg);
	d->cinfo.progress = NULL;
	jpeg_abort_decompress(&d->cinfo);
	d->job = NULL;
	return d->status;
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

/* jpeg_tjcs gives libjpeg's colour space of a file as a TJCS value (-1:
 * none of them). */
static int jpeg_tjcs(J_COLOR_SPACE cs)
{
	switch (cs) {
	case JCS_GRAYSCALE:
		return TJCS_GRAY;
	case JCS_RGB:
		return TJCS_RGB;
	case JCS_YCbCr:
		return TJCS_YCbCr;
	case JCS_CMYK:
		return TJCS_CMYK;
	case JCS_YCCK:
		return TJCS_YCCK;
	default:
		return -1;
	}
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

/* jpeg_own copies job's JPEG out of the client's region into c (see
 * fprep__jpeg_open). Returns 0, or FPREP_ENOMEM / FPREP_EREGION with msg
 * set. */
static int jpeg_own(fprep__jpeg_copy *c, fprep__job *job, char *msg,
                    size_t msg_size)
{
	size_t n = (size_t)job->req.input_size;

	if (job->in_region == NULL || job->input_device || job->input_copied)
		return FPREP_OK;
	if (n > c->cap) {
		uint8_t *p = malloc(n); /* the old bytes are not needed */

		if (p == NULL) {
			snprintf(msg, msg_size,
			         "JPEG: out of memory for a copy of %zu bytes",
			         n);
			return FPREP_ENOMEM;
		}
		free(c->p);
		c->p = p;
		c->cap = n;
	}
	memcpy(c->p, job->input, n);
	/* A client that shrank its object made the SIGBUS guard map zero
	 * pages under the copy: those are not the client's bytes. */
	if (fprep__memreg_broken(job->in_region)) {
		snprintf(msg, msg_size,
		         "shared-memory region shrank while the JPEG was read");
		return FPREP_EREGION;
	}
	job->input = c->p;
	job->input_copied = 1;
	return FPREP_OK;
}

int fprep__jpeg_open(fprep__jpeg *j, fprep__job *job, fprep__jpeg_copy *copy,
                     fprep_request *raw, char *msg, size_t msg_size)
{
	const fprep_request *rq = &job->req;
	struct fprep__jpeg_dec *d = j->dec;
	int w, h, cs, rc;
	uint32_t bpp, sw, sh;

	j->t0_ns = fprep__now_ns();
	if (d == NULL) {
		snprintf(msg, msg_size,
		         "JPEG: no decoder (jpeg_create_decompress "
		         "failed: out of memory)");
		return FPREP_ENOMEM;
	}
	d->job = NULL;
	if (job->input == NULL || job->limits == NULL ||
	    rq->input_size > (uint64_t)(unsigned long)-1) {
		snprintf(msg, msg_size, "JPEG: no input or no limits");
		return FPREP_EINVAL;
	}
	rc = jpeg_own(copy != NULL ? copy : &j->copy, job, msg, msg_size);
	if (rc != FPREP_OK)
		return rc;
	if (jpeg_sof(job->input, rq->input_size, &sw, &sh) == 0 && sw > 0 &&
	    sh > 0 &&
	    (rc = jpeg_check_size(rq, job->limits, (int)sw, (int)sh, 3, msg,
	                          msg_size)) != FPREP_OK)
		return rc;
	d->msg[0] = '\0';
	if (setjmp(d->jump) != 0)
		return jpeg_failed(j, "JPEG header: ", msg, msg_size);
	/* A header read last time and not decoded here (a GPU's engine
	 * decoded that file) is dropped first. */
	jpeg_abort_decompress(&d->cinfo);
	jpeg_mem_src(&d->cinfo, job->input, (unsigned long)rq->input_size);
	(void)jpeg_read_header(&d->cinfo, TRUE);
	w = (int)d->cinfo.image_width;
	h = (int)d->cinfo.image_height;
	cs = jpeg_tjcs(d->cinfo.jpeg_color_space);
	j->colorspace = cs;
	if (cs == TJCS_CMYK || cs == TJCS_YCCK || cs < 0) {
		snprintf(msg, msg_size,
		         "JPEG colour space %s is not supported (gray, YCbCr "
		         "or RGB)",
		         jpeg_colorspace(cs));
		jpeg_abort_decompress(&d->cinfo);
		return FPREP_EINVAL;
	}
	if (w < 1 || h < 1) {
		snprintf(msg, msg_size, "JPEG header: size %dx%d", w, h);
		jpeg_abort_decompress(&d->cinfo);
		return FPREP_EINVAL;
	}
	bpp = rq->channel_order == FPREP_ORDER_GRAY ? 1 : 3;
	rc = jpeg_check_size(rq, job->limits, w, h, 3, msg, msg_size);
	if (rc != FPREP_OK) {
		jpeg_abort_decompress(&d->cinfo);
		return rc;
	}
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
	d->job = job;
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
	struct fprep__jpeg_dec *d = j->dec;
	struct jpeg_decompress_struct *ci;
	const fprep_limits *lim = job->limits;
	JSAMPROW rows[16];

	FPREP__ASSERT(d != NULL && d->job == job);
	ci = &d->cinfo;
	d->max_scans = lim->max_jpeg_scans != 0 ? lim->max_jpeg_scans
	                                        : FPREP__JPEG_SCANS_DEFAULT;
	d->max_scan_pixels = lim->max_jpeg_scan_pixels != 0
	                             ? lim->max_jpeg_scan_pixels
	                             : FPREP__JPEG_SCAN_PIXELS_DEFAULT;
	d->msg[0] = '\0';
	if (setjmp(d->jump) != 0)
		return jpeg_failed(j, "JPEG: ", msg, msg_size);
	ci->out_color_space = raw->src_format == FPREP_PIX_GRAY8 ? JCS_GRAYSCALE
	                      : raw->src_format == FPREP_PIX_BGR8 ? JCS_EXT_BGR
	                                                          : JCS_EXT_RGB;
	ci->progress = &d->progress;
	(void)jpeg_start_decompress(ci);
	/* The size that was checked, or nothing is written (a header cannot
	 * change after the copy; this keeps dst's bounds whatever happens). */
	if (ci->output_width != raw->src_width ||
	    ci->output_height != raw->src_height ||
	    (uint32_t)ci->output_components * ci->output_width !=
	            raw->src_stride) {
		snprintf(d->msg, sizeof(d->msg),
		         "decodes to %ux%u x %d, not the %ux%u checked",
		         ci->output_width, ci->output_height,
		         ci->output_components, raw->src_width,
		         raw->src_height);
		d->status = FPREP_EINVAL;
		longjmp(d->jump, 1);
	}
	while (ci->output_scanline < ci->output_height) {
		JDIMENSION y = ci->output_scanline, k = 0;

		while (k < 16 && y + k < ci->output_height) {
			rows[k] = dst + (size_t)(y + k) * raw->src_stride;
			k++;
		}
		(void)jpeg_read_scanlines(ci, rows, k);
	}
	(void)jpeg_finish_decompress(ci);
	ci->progress = NULL;
	d->job = NULL;
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

int fprep__jpeg_encode_test(unsigned width, unsigned height, uint8_t **out,
                            size_t *size)
{
	tjhandle tj = tjInitCompress();
	unsigned char *rgb, *jpg = NULL;
	unsigned long len = 0;
	int rc;

	*out = NULL;
	*size = 0;
	if (tj == NULL)
		return -1;
	if ((rgb = malloc((size_t)width * height * 3)) == NULL) {
		tjDestroy(tj);
		return -1;
	}
	for (size_t y = 0; y < height; y++)
		for (size_t x = 0; x < width; x++) {
			unsigned char *px = rgb + (y * width + x) * 3;
			/* The grain: an integer hash of the pixel's place. */
			uint32_t g = (uint32_t)(x * 73856093u ^ y * 19349663u);

			g = (g ^ (g >> 13)) * 0x5bd1e995u;
			g ^= g >> 15;
			px[0] = (unsigned char)(x * 191 / (width ? width : 1) +
			                        (g & 63));
			px[1] = (unsigned char)(y * 191 /
			                                (height ? height : 1) +
			                        ((g >> 8) & 63));
			px[2] = (unsigned char)(((x + y) & 191) +
			                        ((g >> 16) & 63));
		}
	rc = tjCompress2(tj, rgb, (int)width, 0, (int)height, TJPF_RGB, &jpg,
	                 &len, TJSAMP_420, 90, 0);
	free(rgb);
	tjDestroy(tj);
	if (rc != 0) {
		tjFree(jpg);
		return -1;
	}
	*out = jpg;
	*size = len;
	return 0;
}

void fprep__jpeg_free(uint8_t *p)
{
	tjFree(p);
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
