/*
 * ops_roi.c: the CPU reference of ROIS and BATCH requests (protocol.h,
 * "ROIS and BATCH requests") and the per-element transforms their replies
 * carry.
 *
 * An element's transform (the fit of its box in the tensor) is worked out
 * once, by fprep_element_transform: the daemon's loop does it, writes it
 * into the reply and carries it in the job, and the backends plan from it.
 * Each element is planned once (fprep__roi_plan_xf: the box's origin,
 * clamp bounds and scales, or the affine matrix), then every tensor pixel of it
 * is sampled by kernels/roi_sample.h, the code the GPU kernel runs, and
 * normalised and stored as a FRAME's tensor would be. One pixel at a time:
 * this is the reference and the CPU backend's path, not a fast one (64
 * boxes to 224 x 224 take tens of milliseconds).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "ops.h"
#include "roi_sample.h"

/* roi_fit is the letterbox (or stretch) of a w x h source (double: a box
 * may have fractional sides), fprep_fit_compute's, as an element's
 * transform. */
static void roi_fit(const fprep_request *req, int resize, double w, double h,
                    fprep_element_xf *xf)
{
	fprep_transform t;

	fprep_fit_compute(req->out_width, req->out_height, w, h, resize, &t);
	xf->resized_w = t.resized_w;
	xf->resized_h = t.resized_h;
	xf->pad_x = t.pad_x;
	xf->pad_y = t.pad_y;
	xf->scale_x = t.scale_x;
	xf->scale_y = t.scale_y;
}

void fprep_element_transform(const fprep_request *req, const fprep_element *el,
                             fprep_element_xf *xf)
{
	memset(xf, 0, sizeof(*xf));
	if (el->type == FPREP_ELEM_FRAME) {
		roi_fit(req, req->resize, req->src_width, req->src_height, xf);
	} else if (el->type == FPREP_ELEM_BOX) {
		roi_fit(req, el->resize != 0 ? el->resize : req->resize,
		        el->v[2], el->v[3], xf);
		xf->origin_x = el->v[0];
		xf->origin_y = el->v[1];
	}
}

void fprep__roi_plan_xf(const fprep_request *req, const fprep_element *el,
                        const fprep_element_xf *xf, struct fprep_roi_elem *e)
{
	double x, y, w, h;

	memset(e, 0, sizeof(*e));
	if (el->type == FPREP_ELEM_AFFINE) {
		e->type = ROI_TYPE_AFFINE;
		for (int i = 0; i < 6; i++)
			e->m[i] = el->v[i];
		return;
	}
	e->type = ROI_TYPE_RESIZE;
	if (el->type == FPREP_ELEM_FRAME) {
		e->src_offset = el->offset;
		x = 0.0, y = 0.0;
		w = req->src_width, h = req->src_height;
	} else {
		x = el->v[0], y = el->v[1], w = el->v[2], h = el->v[3];
	}
	e->x0 = (int)floor(x);
	e->y0 = (int)floor(y);
	e->fx = x - e->x0;
	e->fy = y - e->y0;
	e->last_x = (int)ceil(x + w) - 1 - e->x0;
	e->last_y = (int)ceil(y + h) - 1 - e->y0;
	/* A box narrower than the float step at x (w = 1e-30) still has
	 * its first pixel: the GPU copies the rows of [y0, y0 + last_y]. */
	e->last_x = e->last_x < 0 ? 0 : e->last_x;
	e->last_y = e->last_y < 0 ? 0 : e->last_y;
	e->resized_w = xf->resized_w;
	e->resized_h = xf->resized_h;
	e->pad_x = xf->pad_x;
	e->pad_y = xf->pad_y;
	/* OpenCV: scale = 1 / inv_scale with inv_scale = dst / src. */
	e->sx = 1.0 / ((double)xf->resized_w / w);
	e->sy = 1.0 / ((double)xf->resized_h / h);
}

void fprep__roi_plan(const fprep_request *req, const fprep_element *el,
                     struct fprep_roi_elem *e)
{
	fprep_element_xf xf;

	fprep_element_transform(req, el, &xf);
	fprep__roi_plan_xf(req, el, &xf, e);
}

/* roi_channels maps tensor channels to source bytes (a packed source);
 * returns the number of tensor channels. */
static uint32_t roi_channels(const fprep_request *req, unsigned int ch[3])
{
	int src_rgb = req->src_format == FPREP_PIX_RGB8 ||
	              req->src_format == FPREP_PIX_RGBA8;

	if (req->src_format == FPREP_PIX_GRAY8) {
		ch[0] = ch[1] = ch[2] = 0;
		return req->channel_order == FPREP_ORDER_GRAY ? 1 : 3;
	}
	if (src_rgb == (req->channel_order == FPREP_ORDER_RGB))
		ch[0] = 0, ch[1] = 1, ch[2] = 2;
	else
		ch[0] = 2, ch[1] = 1, ch[2] = 0;
	return 3;
}

/* roi_store writes the nch values of tensor pixel (x, y) of one element's
 * tensor: normalised F32/F16 or rounded U8, in the request's layout. */
static void roi_store(const fprep_request *req, void *tensor, uint32_t nch,
                      uint32_t x, uint32_t y, const float *v)
{
	size_t w = req->out_width, plane = w * req->out_height, i;

	for (uint32_t c = 0; c < nch; c++) {
		i = req->layout == FPREP_LAYOUT_NCHW ? c * plane + y * w + x
		                                     : (y * w + x) * nch + c;
		if (req->dtype == FPREP_DTYPE_U8) {
			float r = v[c] + 0.5f;

			r = r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r;
			((uint8_t *)tensor)[i] = (uint8_t)r;
			continue;
		}
		float n = (v[c] * req->scale - req->mean[c]) / req->std[c];

		if (req->dtype == FPREP_DTYPE_F32)
			((float *)tensor)[i] = n;
		else
			((uint16_t *)tensor)[i] = fprep__f32_to_f16(n);
	}
}

void fprep__roi_args(const fprep_request *req, struct fprep_roi_args *a)
{
	uint64_t per = fprep__element_bytes(req);

	memset(a, 0, sizeof(*a));
	a->elem_values = per / (req->dtype == FPREP_DTYPE_F32   ? 4
	                        : req->dtype == FPREP_DTYPE_F16 ? 2
	                                                        : 1);
	a->src_w = req->src_width;
	a->src_h = req->src_height;
	a->src_stride = req->src_stride;
	a->src_format = req->src_format;
	a->out_w = req->out_width;
	a->out_h = req->out_height;
	a->channel_order = req->channel_order;
	a->layout = req->layout;
	a->pad_value = req->pad_value;
	a->scale = req->scale;
	memcpy(a->mean, req->mean, sizeof(a->mean));
	memcpy(a->std, req->std, sizeof(a->std));
}

uint64_t fprep__element_bytes(const fprep_request *req)
{
	/* One element's tensor: the request's shape for one frame. */
	fprep_request one = *req;
	uint32_t shape[4];
	uint64_t bytes;

	one.elements = 0;
	return fprep_tensor_shape(&one, shape, &bytes) == FPREP_OK ? bytes : 0;
}

void fprep__element_cpu(const fprep_request *req, const fprep_element *el,
                        const fprep_element_xf *xf, const void *input,
                        void *tensor)
{
	struct fprep_roi_elem e;
	unsigned int ch[3];
	uint32_t nch = roi_channels(req, ch);
	uint32_t bpp = fprep_pixel_bytes(req->src_format);
	const uint8_t *src;
	float v[3];

	if (el->type == FPREP_ELEM_FRAME) {
		/* A batch frame is a FRAME: the separable op, which samples
		 * exactly as roi_sample.h does a whole-frame box, faster. */
		fprep_request fr = *req;
		fprep_transform t;

		fr.kind = FPREP_KIND_FRAME;
		fr.elements = 0;
		fr.input_span = 0;
		fprep_transform_compute(&fr, &t);
		if (fprep__preprocess_cpu_rows(
		            &fr, (const uint8_t *)input + el->offset, tensor,
		            &t, 0, req->out_height) == FPREP_OK)
			return;
	}
	fprep__roi_plan_xf(req, el, xf, &e);
	src = (const uint8_t *)input + e.src_offset;
	for (uint32_t y = 0; y < req->out_height; y++)
		for (uint32_t x = 0; x < req->out_width; x++) {
			roi_pixel(&e, src, (int)req->src_width,
			          (int)req->src_height, req->src_stride, bpp,
			          ch, nch, req->pad_value, x, y, v);
			roi_store(req, tensor, nch, x, y, v);
		}
}

int fprep_preprocess_elements_cpu(const fprep_request *req,
                                  const fprep_element *elements,
                                  const void *input, void *tensor,
                                  size_t tensor_size, fprep_element_xf *xfs)
{
	fprep_element_xf xf;
	uint64_t per, span = 0;
	uint32_t k;

	if (req == NULL || elements == NULL || input == NULL ||
	    tensor == NULL || fprep__preprocess_check(req, tensor_size) != 0)
		return FPREP_EINVAL;
	per = fprep__element_bytes(req);
	for (k = 0; k < req->elements; k++)
		if (fprep__element_check(req, k, &elements[k], &span, NULL,
		                         0) != FPREP_OK)
			return FPREP_EINVAL;
	/* A BATCH's frames must lie in the input_span bytes it declares. */
	if (req->kind == FPREP_KIND_BATCH && span > req->input_span)
		return FPREP_EINVAL;
	for (k = 0; k < req->elements; k++) {
		fprep_element_transform(req, &elements[k], &xf);
		fprep__element_cpu(req, &elements[k], &xf, input,
		                   (uint8_t *)tensor + per * k);
		if (xfs != NULL)
			xfs[k] = xf;
	}
	return FPREP_OK;
}
