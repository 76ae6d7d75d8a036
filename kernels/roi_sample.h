/*
 * roi_sample.h: how one tensor pixel of a ROIS or BATCH element is
 * sampled, in one place for the GPU kernel (kernels/roi.cu, through
 * NVRTC's named headers) and the CPU reference (src/lib/ops_roi.c), so
 * that both follow the same arithmetic: protocol.h, "ROIS and BATCH
 * requests", says what it means. Plain C with no includes: a host includer
 * includes <math.h> first (floorf, rintf, rint) and is built with
 * -ffp-contract=off; the device rounds the coordinate's double operations
 * as the host does (__dmul_rn, __dadd_rn).
 *
 * A resized element (a BOX, or a BATCH frame, which is the box (0, 0, W,
 * H) of its frame) follows OpenCV's INTER_LINEAR resize of the box's
 * pixels, as kernels/letterbox_axis.h does for a whole frame: column u
 * reads x0 + i with i from (u + 0.5) * sx - 0.5 + fx rounded to float, the
 * index clamped to 0..last_x with the fraction zeroed there, rows alike
 * except that only their indices are clamped; 11-bit weights; pixels
 * outside the frame read as the pad value. An AFFINE element follows
 * cv2.warpAffine(INTER_LINEAR | WARP_INVERSE_MAP, BORDER_CONSTANT): the
 * source position in 1/32 pixels from the matrix in 10-bit fixed point,
 * weights (32 - a)(32 - b) * 32 ... of 32768, neighbours outside the frame
 * read as the pad value; the pixel is the exact weighted sum / 32768, which
 * rounds to OpenCV's byte.
 */
#ifndef FPREP_ROI_SAMPLE_H
#define FPREP_ROI_SAMPLE_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ROI_FN         static __device__ __forceinline__
#define ROI_DMUL(a, b) __dmul_rn((a), (b))
#define ROI_DADD(a, b) __dadd_rn((a), (b))
#define ROI_FMUL(a, b) __fmul_rn((a), (b))
#define ROI_FADD(a, b) __fadd_rn((a), (b))
#else
#define ROI_FN         static inline
#define ROI_DMUL(a, b) ((a) * (b))
#define ROI_DADD(a, b) ((a) + (b))
#define ROI_FMUL(a, b) ((a) * (b))
#define ROI_FADD(a, b) ((a) + (b))
#endif

#define ROI_TYPE_RESIZE 1
#define ROI_TYPE_AFFINE 2

/* fprep_roi_elem: one element as the sampler needs it, planned on the
 * host (fprep__roi_plan in src/lib/ops_roi.c) and copied to the device
 * in an array, one per element (128 bytes each). */
struct fprep_roi_elem {
	unsigned long long src_offset; /* bytes from the input to its frame */
	int type;                      /* ROI_TYPE_* */
	int x0, y0;                    /* RESIZE: floor of the box's origin */
	int last_x, last_y; /* RESIZE: last box pixel, from x0 / y0 */
	unsigned int resized_w, resized_h, pad_x, pad_y;
	int reserved;
	double sx, sy; /* RESIZE: source pixels per resized pixel */
	double fx, fy; /* RESIZE: origin - x0, origin - y0 */
	double m[6];   /* AFFINE: source <- tensor */
};

/* fprep_roi_args: the ROI kernels' only parameter, passed by value. src
 * is the input (element k's frame at src + elems[k].src_offset), dst the
 * tensor (element k at k * elem_values values), elems the N planned
 * elements on the device. Enum values as in include/frameprep/protocol.h
 * (checked by the host). */
struct fprep_roi_args {
	const unsigned char *src;
	void *dst;
	const struct fprep_roi_elem *elems;
	unsigned long long elem_values; /* values of one element's tensor */
	unsigned int src_w, src_h, src_stride, src_format;
	unsigned int out_w, out_h, channel_order, layout;
	float pad_value, scale;
	float mean[3], std[3];
};

/* roi_coef rounds a weight to OpenCV's 11-bit fixed point, as a float. */
ROI_FN float roi_coef(float w)
{
	return rintf(w * 2048.0f) * (1.0f / 2048.0f);
}

/* roi_read reads channel byte ch of pixel (x, y) of a w x h frame, or pad
 * outside it. */
ROI_FN float roi_read(const unsigned char *src, int w, int h,
                      unsigned int stride, unsigned int bpp, unsigned int ch,
                      int x, int y, float pad)
{
	if (x < 0 || y < 0 || x >= w || y >= h)
		return pad;
	return (float)src[(unsigned long long)y * stride +
	                  (unsigned long long)x * bpp + ch];
}

/* roi_resize_pixel samples resized pixel (u, v) (inside the resized
 * image: tensor pixel minus the padding) of element e into out[0..nch). */
ROI_FN void roi_resize_pixel(const struct fprep_roi_elem *e,
                             const unsigned char *src, int w, int h,
                             unsigned int stride, unsigned int bpp,
                             const unsigned int *src_ch, unsigned int nch,
                             float pad, unsigned int u, unsigned int v,
                             float *out)
{
	float f, fl, t, a0, a1, b0, b1;
	int i, c0, c1, r0, r1;
	unsigned int c;

	f = (float)ROI_DADD(
	        ROI_DADD(ROI_DMUL(ROI_DADD((double)u, 0.5), e->sx), -0.5),
	        e->fx);
	fl = floorf(f);
	i = (int)fl;
	t = f - fl;
	if (i < 0) {
		i = 0;
		t = 0.0f;
	}
	if (i >= e->last_x) {
		i = e->last_x;
		t = 0.0f;
	}
	a0 = roi_coef(1.0f - t);
	a1 = roi_coef(t);
	c0 = e->x0 + i;
	c1 = e->x0 + (i < e->last_x ? i + 1 : i);

	f = (float)ROI_DADD(
	        ROI_DADD(ROI_DMUL(ROI_DADD((double)v, 0.5), e->sy), -0.5),
	        e->fy);
	fl = floorf(f);
	i = (int)fl;
	t = f - fl;
	b0 = roi_coef(1.0f - t);
	b1 = roi_coef(t);
	r0 = i < 0 ? 0 : i > e->last_y ? e->last_y : i;
	r1 = i + 1 < 0 ? 0 : i + 1 > e->last_y ? e->last_y : i + 1;
	r0 += e->y0;
	r1 += e->y0;

	for (c = 0; c < nch; c++) {
		float h0 = ROI_FADD(ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                                      src_ch[c], c0, r0, pad),
		                             a0),
		                    ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                                      src_ch[c], c1, r0, pad),
		                             a1));
		float h1 = ROI_FADD(ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                                      src_ch[c], c0, r1, pad),
		                             a0),
		                    ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                                      src_ch[c], c1, r1, pad),
		                             a1));

		out[c] = ROI_FADD(ROI_FMUL(h0, b0), ROI_FMUL(h1, b1));
	}
}

/* roi_fixed is OpenCV's saturate_cast<int>(v): round half to even,
 * saturated to 32 bits. */
ROI_FN long long roi_fixed(double v)
{
	if (v >= 2147483647.0)
		return 2147483647LL;
	if (v <= -2147483648.0)
		return -2147483647LL - 1;
	return (long long)rint(v);
}

/* roi_short is saturate_cast<short>. */
ROI_FN int roi_short(long long v)
{
	return v < -32768 ? -32768 : v > 32767 ? 32767 : (int)v;
}

/* roi_affine_pixel samples tensor pixel (u, v) of affine element e into
 * out[0..nch), as cv2.warpAffine does. */
ROI_FN void roi_affine_pixel(const struct fprep_roi_elem *e,
                             const unsigned char *src, int w, int h,
                             unsigned int stride, unsigned int bpp,
                             const unsigned int *src_ch, unsigned int nch,
                             float pad, unsigned int u, unsigned int v,
                             float *out)
{
	/* AB_BITS 10, INTER_BITS 5, round_delta = 1024 / 32 / 2. */
	long long X0 = roi_fixed(ROI_DMUL(
	                       ROI_DADD(ROI_DMUL(e->m[1], (double)v), e->m[2]),
	                       1024.0)) +
	               16;
	long long Y0 = roi_fixed(ROI_DMUL(
	                       ROI_DADD(ROI_DMUL(e->m[4], (double)v), e->m[5]),
	                       1024.0)) +
	               16;
	long long X = (X0 + roi_fixed(ROI_DMUL(ROI_DMUL(e->m[0], (double)u),
	                                       1024.0))) >>
	              5;
	long long Y = (Y0 + roi_fixed(ROI_DMUL(ROI_DMUL(e->m[3], (double)u),
	                                       1024.0))) >>
	              5;
	int sx = roi_short(X >> 5), sy = roi_short(Y >> 5);
	int ax = (int)(X & 31), ay = (int)(Y & 31);
	float w00 = (float)((32 - ax) * (32 - ay) * 32);
	float w01 = (float)(ax * (32 - ay) * 32);
	float w10 = (float)((32 - ax) * ay * 32);
	float w11 = (float)(ax * ay * 32);
	unsigned int c;

	for (c = 0; c < nch; c++) {
		float s = ROI_FMUL(roi_read(src, w, h, stride, bpp, src_ch[c],
		                            sx, sy, pad),
		                   w00);
		s = ROI_FADD(s, ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                                  src_ch[c], sx + 1, sy, pad),
		                         w01));
		s = ROI_FADD(s, ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                                  src_ch[c], sx, sy + 1, pad),
		                         w10));
		s = ROI_FADD(s,
		             ROI_FMUL(roi_read(src, w, h, stride, bpp,
		                               src_ch[c], sx + 1, sy + 1, pad),
		                      w11));
		out[c] = s * (1.0f / 32768.0f);
	}
}

/* roi_pixel samples tensor pixel (x, y) of element e into out[0..nch):
 * the pad value outside a resized element's image. */
ROI_FN void roi_pixel(const struct fprep_roi_elem *e, const unsigned char *src,
                      int w, int h, unsigned int stride, unsigned int bpp,
                      const unsigned int *src_ch, unsigned int nch, float pad,
                      unsigned int x, unsigned int y, float *out)
{
	unsigned int c;

	if (e->type == ROI_TYPE_AFFINE) {
		roi_affine_pixel(e, src, w, h, stride, bpp, src_ch, nch, pad, x,
		                 y, out);
		return;
	}
	if (x < e->pad_x || y < e->pad_y || x - e->pad_x >= e->resized_w ||
	    y - e->pad_y >= e->resized_h) {
		for (c = 0; c < nch; c++)
			out[c] = pad;
		return;
	}
	roi_resize_pixel(e, src, w, h, stride, bpp, src_ch, nch, pad,
	                 x - e->pad_x, y - e->pad_y, out);
}

#endif /* FPREP_ROI_SAMPLE_H */
