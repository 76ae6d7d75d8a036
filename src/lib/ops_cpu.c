/*
 * ops_cpu.c: the CPU reference of the preprocessing (letterbox or stretch,
 * channel order, normalisation, dtype, layout) and the letterbox fit
 * (fprep_fit_compute): the one arithmetic behind the transform of a frame
 * (fprep_transform_compute) and of a ROI element (ops_roi.c), which both
 * backends report and the clients may compute themselves.
 *
 * The resize is separable. For each tensor row we need two source rows
 * resized horizontally; those are kept in a two-row cache (consecutive
 * tensor rows often share source rows when upscaling). The two rows are
 * blended vertically into one float row of the tensor, in channel-planar
 * order, padding included, and a store step converts that row to the
 * tensor's dtype and layout. Column indices and weights are computed once
 * per call, so the inner loops have no division. The arithmetic (OpenCV's
 * coordinate mapping and 11-bit coefficients, evaluated in float) is
 * described in ops.h.
 *
 * Exact mode (rounding OPENCV) changes only the vertical blend: the
 * horizontal rows hold OpenCV's integer sums divided by 2048 exactly (8-bit
 * samples times multiples of 1/2048 need 19 bits, so float loses nothing),
 * and the blend is OpenCV's integer one, giving the uint8 pixel cv2.resize
 * gives; the store then normalises it as in the float mode.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "ops.h"
#include "yuv.h"

#define OPS_COEF_SCALE 2048.0f /* OpenCV INTER_RESIZE_COEF_SCALE */

/* ops_plan: what one call needs, derived from the request. */
struct ops_plan {
	const fprep_request *req;
	const uint8_t *frame;
	uint8_t *tensor;
	fprep_transform xf;
	uint32_t bpp; /* source bytes per pixel (3 for YUV: the RGB row) */
	uint32_t nch; /* tensor channels, 1 or 3 */
	uint32_t src_ch[3]; /* source byte of each tensor channel */
	float mean[3], std[3];
	double scale_y; /* source rows per resized row */
	int exact;      /* rounding OPENCV: the uint8 pixel of cv2.resize */
	float pad;      /* the padding's value (exact mode: rounded) */

	/* Per resized column: byte offsets of the two source pixels and the
	 * weights. */
	uint32_t *xo0, *xo1;
	float *wx0, *wx1;
	/* Two horizontally resized source rows, channel-planar (nch planes of
	 * resized_w), and which source row each holds (-1: none). */
	float *hrow[2];
	int64_t hrow_y[2];
	/* One tensor row in float, channel-planar (nch planes of out_width),
	 * before normalisation. */
	float *trow;
	/* YUV sources: one source row converted to RGB8, and the
	 * coefficients. NULL for the other formats. */
	uint8_t *rgb;
	float *chroma; /* per pixel pair: rv*V, gu*U, gv*V, bu*U (4 planes) */
	fprep__yuv_coefs yuv;
};

/* ops_source_channels maps tensor channels to source bytes; returns the
 * number of tensor channels, or 0 when the order cannot be made from the
 * format (GRAY order from a colour source). */
static uint32_t ops_source_channels(uint16_t format, uint8_t order,
                                    uint32_t ch[3])
{
	/* YUV sources are converted to RGB8 rows first. */
	int src_rgb = format == FPREP_PIX_RGB8 || format == FPREP_PIX_RGBA8 ||
	              fprep__yuv_is_yuv(format);

	if (format == FPREP_PIX_GRAY8) {
		ch[0] = ch[1] = ch[2] = 0;
		return order == FPREP_ORDER_GRAY ? 1 : 3;
	}
	if (order == FPREP_ORDER_GRAY)
		return 0;
	/* Colour source, colour tensor: same order copies, else swap. */
	if (src_rgb == (order == FPREP_ORDER_RGB)) {
		ch[0] = 0, ch[1] = 1, ch[2] = 2;
	} else {
		ch[0] = 2, ch[1] = 1, ch[2] = 0;
	}
	return 3;
}

int fprep__preprocess_check(const fprep_request *req, size_t tensor_size)
{
	uint32_t shape[4];
	uint64_t bytes;

	/* A JPEG is decoded first (the daemon's backend/jpeg.c): the op
	 * takes pixels. */
	if (req == NULL || req->src_format == FPREP_PIX_JPEG ||
	    fprep__request_check(req, NULL, 0) != FPREP_OK ||
	    fprep_tensor_shape(req, shape, &bytes) != FPREP_OK ||
	    bytes != (uint64_t)tensor_size)
		return FPREP_EINVAL;
	return FPREP_OK;
}

/* ops_round_even rounds half to even (Python's round), whatever the
 * current rounding mode. */
static double ops_round_even(double v)
{
	double f = floor(v), d = v - f;

	if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
		f += 1.0;
	return f;
}

void fprep_fit_compute(uint32_t out_width, uint32_t out_height, double src_w,
                       double src_h, int resize, fprep_transform *xf)
{
	double r, w, h;

	memset(xf, 0, sizeof(*xf));
	if (!(src_w > 0.0) || !(src_h > 0.0))
		return;
	if (resize == FPREP_RESIZE_STRETCH) {
		xf->resized_w = out_width;
		xf->resized_h = out_height;
	} else {
		r = fmin((double)out_width / src_w, (double)out_height / src_h);
		w = ops_round_even(src_w * r);
		h = ops_round_even(src_h * r);
		w = fmax(1.0, fmin(w, (double)out_width));
		h = fmax(1.0, fmin(h, (double)out_height));
		xf->resized_w = (uint32_t)w;
		xf->resized_h = (uint32_t)h;
		xf->pad_x = (uint32_t)ops_round_even(
		        (out_width - xf->resized_w) / 2.0 - 0.1);
		xf->pad_y = (uint32_t)ops_round_even(
		        (out_height - xf->resized_h) / 2.0 - 0.1);
	}
	xf->scale_x = (float)((double)xf->resized_w / src_w);
	xf->scale_y = (float)((double)xf->resized_h / src_h);
}

void fprep_transform_compute(const fprep_request *req, fprep_transform *xf)
{
	fprep_fit_compute(req->out_width, req->out_height, req->src_width,
	                  req->src_height, req->resize, xf);
}

/* ops_coef returns OpenCV's 11-bit coefficient for weight w (cvRound of
 * w * 2048, half to even) as a float weight. */
static float ops_coef(float w)
{
	return (float)ops_round_even((double)(w * OPS_COEF_SCALE)) /
	       OPS_COEF_SCALE;
}

/* ops_src_coord maps resized coordinate d to the source: index of the left
 * (top) neighbour and the fraction, as OpenCV does (double product,
 * rounded to float). */
static int64_t ops_src_coord(uint32_t d, double scale, float *frac)
{
	float f = (float)((d + 0.5) * scale - 0.5);
	float fl = floorf(f);

	*frac = f - fl;
	return (int64_t)fl;
}

static void ops_plan_free(struct ops_plan *p)
{
	free(p->xo0);
	free(p->hrow[0]);
	free(p->trow);
	free(p->rgb);
	free(p->chroma);
}

static int ops_plan_init(struct ops_plan *p, const fprep_request *req,
                         const void *frame, void *tensor,
                         const fprep_transform *xf)
{
	uint32_t nw = xf->resized_w, x, c;
	int64_t sx;
	float fx;
	double scale_x;

	memset(p, 0, sizeof(*p));
	p->req = req;
	p->frame = frame;
	p->tensor = tensor;
	p->xf = *xf;
	p->bpp = fprep_pixel_bytes(req->src_format);
	if (fprep__yuv_is_yuv(req->src_format)) {
		p->bpp = 3;
		p->rgb = malloc((size_t)req->src_width * 3);
		p->chroma =
		        malloc((size_t)req->src_width / 2 * 4 * sizeof(float));
		if (p->rgb == NULL || p->chroma == NULL) {
			free(p->rgb);
			free(p->chroma);
			return FPREP_ENOMEM;
		}
		(void)fprep__yuv_coefs_get(req->yuv_matrix, req->yuv_range,
		                           &p->yuv);
	}
	p->nch = ops_source_channels(req->src_format, req->channel_order,
	                             p->src_ch);
	for (c = 0; c < 3; c++) {
		p->mean[c] = req->mean[c];
		p->std[c] = req->std[c];
	}
	/* cv2.copyMakeBorder's value goes through saturate_cast<uchar>:
	 * rounded half to even. */
	p->exact = req->rounding == FPREP_ROUNDING_OPENCV;
	p->pad = p->exact ? (float)ops_round_even(req->pad_value)
	                  : req->pad_value;
	/* OpenCV: scale = 1 / inv_scale with inv_scale = dst / src. */
	scale_x = 1.0 / ((double)nw / req->src_width);
	p->scale_y = 1.0 / ((double)xf->resized_h / req->src_height);
	p->hrow_y[0] = p->hrow_y[1] = -1;

	p->xo0 = malloc((size_t)nw * 2 * (sizeof(uint32_t) + sizeof(float)));
	p->hrow[0] = malloc((size_t)nw * p->nch * 2 * sizeof(float));
	p->trow = malloc((size_t)req->out_width * p->nch * sizeof(float));
	if (p->xo0 == NULL || p->hrow[0] == NULL || p->trow == NULL) {
		ops_plan_free(p);
		return FPREP_ENOMEM;
	}
	p->xo1 = p->xo0 + nw;
	p->wx0 = (float *)(p->xo1 + nw);
	p->wx1 = p->wx0 + nw;
	p->hrow[1] = p->hrow[0] + (size_t)nw * p->nch;

	for (x = 0; x < nw; x++) {
		sx = ops_src_coord(x, scale_x, &fx);
		if (sx < 0) {
			sx = 0;
			fx = 0.0f;
		}
		if (sx >= (int64_t)req->src_width - 1) {
			sx = (int64_t)req->src_width - 1;
			fx = 0.0f;
		}
		p->xo0[x] = (uint32_t)sx * p->bpp;
		p->xo1[x] = (uint32_t)(sx + (fx != 0.0f)) * p->bpp;
		p->wx0[x] = ops_coef(1.0f - fx);
		p->wx1[x] = ops_coef(fx);
	}
	return FPREP_OK;
}

/* ops_yuv_sat rounds a converted value half up and saturates it to a
 * byte. */
static inline uint8_t ops_yuv_sat(float v)
{
	/* |v| < 1024 here. Truncation equals floor for v + 0.5 >= 0, and
	 * below that both saturate to 0. Integer clamps compile without
	 * branches: photographs saturate often enough to defeat prediction. */
	int i = (int)(v + 0.5f);

	i = i < 0 ? 0 : i;
	return (uint8_t)(i > 255 ? 255 : i);
}

/* ops_yuv_row converts source row sy of a YUV frame into p->rgb. Each pixel
 * takes the chroma sample of its 2x2 block (NV12, I420) or 2x1 pair
 * (YUYV). The chroma products are computed once per pair, then each pixel
 * adds them to its luma in the order ops.h gives. */
static const uint8_t *ops_yuv_row(const struct ops_plan *p, uint32_t sy)
{
	const fprep_request *r = p->req;
	const uint8_t *row = p->frame + (size_t)sy * r->src_stride, *cu, *cv;
	size_t crow = (size_t)(sy / 2) * r->uv_stride;
	uint32_t x, j, w = r->src_width, pairs = w / 2;
	const fprep__yuv_coefs k = p->yuv; /* a copy: stores to d alias */
	float *rv = p->chroma, *gu = rv + pairs, *gv = gu + pairs;
	float *bu = gv + pairs;
	uint8_t *d = p->rgb;

	for (j = 0; j < pairs; j++) {
		uint8_t u, v;

		if (r->src_format == FPREP_PIX_NV12) {
			cu = p->frame + r->u_offset + crow;
			u = cu[2 * j], v = cu[2 * j + 1];
		} else if (r->src_format == FPREP_PIX_I420) {
			cu = p->frame + r->u_offset + crow;
			cv = p->frame + r->v_offset + crow;
			u = cu[j], v = cv[j];
		} else { /* YUYV: Y0 U Y1 V */
			u = row[4 * j + 1], v = row[4 * j + 3];
		}
		rv[j] = k.rv * ((float)v - 128.0f);
		gu[j] = k.gu * ((float)u - 128.0f);
		gv[j] = k.gv * ((float)v - 128.0f);
		bu[j] = k.bu * ((float)u - 128.0f);
	}
	for (x = 0; x < w; x++) {
		uint8_t yy =
		        r->src_format == FPREP_PIX_YUYV ? row[2 * x] : row[x];
		float fy = fmaxf((float)yy - k.y_off, 0.0f) * k.y_mul;

		j = x / 2;
		d[3 * x] = ops_yuv_sat(fy + rv[j]);
		d[3 * x + 1] = ops_yuv_sat(fy + gu[j] + gv[j]);
		d[3 * x + 2] = ops_yuv_sat(fy + bu[j]);
	}
	return d;
}

/* ops_hresize resizes source row sy horizontally into dst (channel-planar).
 * Three channels are done in one pass over the column tables. */
static void ops_hresize(const struct ops_plan *p, uint32_t sy, float *dst)
{
	const uint8_t *s = p->rgb != NULL
	                           ? ops_yuv_row(p, sy)
	                           : p->frame + (size_t)sy * p->req->src_stride;
	const uint32_t *xo0 = p->xo0, *xo1 = p->xo1;
	const float *wx0 = p->wx0, *wx1 = p->wx1;
	uint32_t nw = p->xf.resized_w, x, c;

	if (p->nch == 3) {
		const uint8_t *s0 = s + p->src_ch[0], *s1 = s + p->src_ch[1];
		const uint8_t *s2 = s + p->src_ch[2];
		float *d0 = dst, *d1 = dst + nw, *d2 = dst + 2 * (size_t)nw;

		for (x = 0; x < nw; x++) {
			uint32_t o0 = xo0[x], o1 = xo1[x];
			float a0 = wx0[x], a1 = wx1[x];

			d0[x] = s0[o0] * a0 + s0[o1] * a1;
			d1[x] = s1[o0] * a0 + s1[o1] * a1;
			d2[x] = s2[o0] * a0 + s2[o1] * a1;
		}
		return;
	}
	for (c = 0; c < p->nch; c++) {
		const uint8_t *sc = s + p->src_ch[c];
		float *d = dst + (size_t)c * nw;

		for (x = 0; x < nw; x++)
			d[x] = sc[xo0[x]] * wx0[x] + sc[xo1[x]] * wx1[x];
	}
}

/* ops_hrows gets the horizontally resized source rows ya and yb from the
 * two-row cache, resizing the ones it does not hold. */
static void ops_hrows(struct ops_plan *p, uint32_t ya, uint32_t yb,
                      const float **ra, const float **rb)
{
	int ia = -1, ib = -1, i;

	for (i = 0; i < 2; i++) {
		if (p->hrow_y[i] == (int64_t)ya)
			ia = i;
		if (p->hrow_y[i] == (int64_t)yb)
			ib = i;
	}
	if (ia < 0) {
		ia = ib == 0 ? 1 : 0;
		ops_hresize(p, ya, p->hrow[ia]);
		p->hrow_y[ia] = ya;
		if (yb == ya)
			ib = ia;
	}
	if (ib < 0) {
		ib = 1 - ia;
		ops_hresize(p, yb, p->hrow[ib]);
		p->hrow_y[ib] = yb;
	}
	*ra = p->hrow[ia];
	*rb = p->hrow[ib];
}

/* ops_store_u8 rounds n floats to bytes (half up, saturated), every step
 * bytes. */
static void ops_store_u8(uint8_t *d, const float *src, uint32_t n, size_t step)
{
	uint32_t x;

	for (x = 0; x < n; x++) {
		float v = src[x] + 0.5f;

		v = v < 0.0f ? 0.0f : v;
		v = v > 255.0f ? 255.0f : v;
		d[x * step] = (uint8_t)v; /* truncation: v >= 0 */
	}
}

/* ops_store_row converts the float row p->trow into tensor row y:
 * normalised F32/F16, or rounded U8. The unit-step case is written apart so
 * that the compiler vectorises it. */
static void ops_store_row(const struct ops_plan *p, uint32_t y)
{
	const fprep_request *req = p->req;
	uint32_t w = req->out_width, h = req->out_height, x, c;
	size_t plane = (size_t)w * h, base, step;

	for (c = 0; c < p->nch; c++) {
		const float *src = p->trow + (size_t)c * w;
		float sc = req->scale, mean = p->mean[c], sd = p->std[c];

		if (req->layout == FPREP_LAYOUT_NCHW) {
			base = c * plane + (size_t)y * w;
			step = 1;
		} else {
			base = (size_t)y * w * p->nch + c;
			step = p->nch;
		}
		if (req->dtype == FPREP_DTYPE_F32) {
			float *d = (float *)p->tensor + base;

			if (step == 1)
				for (x = 0; x < w; x++)
					d[x] = (src[x] * sc - mean) / sd;
			else
				for (x = 0; x < w; x++)
					d[x * step] = (src[x] * sc - mean) / sd;
		} else if (req->dtype == FPREP_DTYPE_F16) {
			uint16_t *d = (uint16_t *)p->tensor + base;

			for (x = 0; x < w; x++)
				d[x * step] = fprep__f32_to_f16(
				        (src[x] * sc - mean) / sd);
		} else if (step == 1) {
			ops_store_u8(p->tensor + base, src, w, 1);
		} else {
			ops_store_u8(p->tensor + base, src, w, step);
		}
	}
}

/* ops_vblend_exact blends two horizontally resized rows (OpenCV's integer
 * sums / 2048, see the top) into n pixels as cv2.resize does for 8-bit
 * images (VResizeLinear<uchar, int, short, ...>: the sums shifted right by
 * 4, multiplied by the 11-bit row weights, each product shifted right by
 * 16, the two added, rounded by + 2 >> 2). The sums are at most 255 *
 * 2049, so the result is at most 255 and needs no saturation. */
static void ops_vblend_exact(float *d, const float *h0, const float *h1,
                             uint32_t n, float b0, float b1)
{
	int32_t ib0 = (int32_t)(b0 * OPS_COEF_SCALE);
	int32_t ib1 = (int32_t)(b1 * OPS_COEF_SCALE);
	uint32_t x;

	for (x = 0; x < n; x++) {
		int32_t s0 = (int32_t)(h0[x] * OPS_COEF_SCALE);
		int32_t s1 = (int32_t)(h1[x] * OPS_COEF_SCALE);

		d[x] = (float)((((ib0 * (s0 >> 4)) >> 16) +
		                ((ib1 * (s1 >> 4)) >> 16) + 2) >>
		               2);
	}
}

static uint32_t ops_clamp_row(int64_t sy, uint32_t last)
{
	return sy < 0 ? 0 : sy > (int64_t)last ? last : (uint32_t)sy;
}

/* ops_fill fills n floats with v. */
static void ops_fill(float *d, size_t n, float v)
{
	size_t i;

	for (i = 0; i < n; i++)
		d[i] = v;
}

static void ops_run_rows(struct ops_plan *p, uint32_t y0, uint32_t y1)
{
	const fprep_request *req = p->req;
	uint32_t w = req->out_width, nw = p->xf.resized_w;
	uint32_t left = p->xf.pad_x, top = p->xf.pad_y, y, x, c;
	uint32_t last = req->src_height - 1;
	float pad = p->pad, fy, b0, b1;
	const float *r0, *r1;
	int64_t sy;

	for (y = y0; y < y1; y++) {
		if (y < top || y - top >= p->xf.resized_h) {
			ops_fill(p->trow, (size_t)w * p->nch, pad);
			ops_store_row(p, y);
			continue;
		}
		sy = ops_src_coord(y - top, p->scale_y, &fy);
		b0 = ops_coef(1.0f - fy);
		b1 = ops_coef(fy);
		/* OpenCV clamps the row indices, not the weights. */
		ops_hrows(p, ops_clamp_row(sy, last),
		          ops_clamp_row(sy + 1, last), &r0, &r1);
		for (c = 0; c < p->nch; c++) {
			float *d = p->trow + (size_t)c * w;
			const float *h0 = r0 + (size_t)c * nw;
			const float *h1 = r1 + (size_t)c * nw;

			ops_fill(d, left, pad);
			if (p->exact)
				ops_vblend_exact(d + left, h0, h1, nw, b0, b1);
			else
				for (x = 0; x < nw; x++)
					d[left + x] = h0[x] * b0 + h1[x] * b1;
			ops_fill(d + left + nw, w - left - nw, pad);
		}
		ops_store_row(p, y);
	}
}

int fprep__preprocess_cpu_rows(const fprep_request *req, const void *frame,
                               void *tensor, const fprep_transform *xf,
                               uint32_t y0, uint32_t y1)
{
	struct ops_plan p;
	int rc;

	if (y1 > req->out_height)
		y1 = req->out_height;
	if (y0 >= y1)
		return FPREP_OK;
	rc = ops_plan_init(&p, req, frame, tensor, xf);
	if (rc != FPREP_OK)
		return rc;
	ops_run_rows(&p, y0, y1);
	ops_plan_free(&p);
	return FPREP_OK;
}

int fprep_preprocess_cpu(const fprep_request *req, const void *frame,
                         void *tensor, size_t tensor_size, fprep_transform *xf)
{
	fprep_transform t;
	int rc;

	rc = fprep__preprocess_check(req, tensor_size);
	if (rc != FPREP_OK)
		return rc;
	if (frame == NULL || tensor == NULL)
		return FPREP_EINVAL;
	fprep_transform_compute(req, &t);
	rc = fprep__preprocess_cpu_rows(req, frame, tensor, &t, 0,
	                                req->out_height);
	if (rc == FPREP_OK && xf != NULL)
		*xf = t;
	return rc;
}
