/*
 * letterbox_axis.h: where the letterbox kernels sample the source, in one
 * place for the kernels (kernels/letterbox.cu, through NVRTC's named
 * headers) and for the host, which copies to the device only the source
 * rows the kernels read (src/backend/gpu/row_plan.c). Both must agree to
 * the bit: the coordinate is computed with round-to-nearest double
 * operations that the device compiler may not fuse (__dmul_rn,
 * __dadd_rn), and host code that includes this header is built with
 * -ffp-contract=off. Plain C with no includes: a host includer includes
 * <math.h> first (floorf, rintf).
 */
#ifndef FPREP_LETTERBOX_AXIS_H
#define FPREP_LETTERBOX_AXIS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LB_AXIS_FN    static __device__ __forceinline__
#define LB_DMUL(a, b) __dmul_rn((a), (b))
#define LB_DADD(a, b) __dadd_rn((a), (b))
#else
#define LB_AXIS_FN    static inline
#define LB_DMUL(a, b) ((a) * (b))
#define LB_DADD(a, b) ((a) + (b))
#endif

/* lb_coef rounds an interpolation weight to OpenCV's 11-bit fixed point
 * (cvRound(w * 2048), half to even), as a float. */
LB_AXIS_FN float lb_coef(float w)
{
	return rintf(w * 2048.0f) * (1.0f / 2048.0f);
}

/* lb_axis_src maps destination index d of an axis resized from n to m
 * pixels into the source as OpenCV's INTER_LINEAR does (resize.cpp, the
 * pixel-centre rule): scale = 1 / (m / n) and (d + 0.5) * scale - 0.5 in
 * double, rounded to float. Returns its floor (not clamped) and sets *t to
 * the fraction. */
LB_AXIS_FN int lb_axis_src(unsigned int d, unsigned int n, unsigned int m,
                           float *t)
{
	double scale = 1.0 / ((double)m / (double)n);
	float f = (float)LB_DADD(LB_DMUL(LB_DADD((double)d, 0.5), scale), -0.5);
	float fl = floorf(f);

	*t = f - fl;
	return (int)fl;
}

/* lb_axis maps destination index d of an axis resized from n to m pixels
 * to the source indices of its two neighbours and their weights, as
 * OpenCV's INTER_LINEAR does (resize.cpp, the pixel-centre rule): scale =
 * 1 / (m / n) and (d + 0.5) * scale - 0.5 in double, rounded to float;
 * below 0 clamps to 0 and at or past the last pixel to the last one, with
 * the fraction set to 0. A neighbour whose weight rounds to 0 adds
 * exactly 0 to the blend (the samples are finite), so the second one is
 * then the first itself: a sample reads one row instead of two where the
 * scale is a whole number (1080 rows to 360 read rows 1, 4, 7, ... only),
 * which is what lets the host copy those rows alone. */
LB_AXIS_FN void lb_axis(unsigned int d, unsigned int n, unsigned int m, int *i0,
                        int *i1, float *w0, float *w1)
{
	float t;
	int i = lb_axis_src(d, n, m, &t);

	if (i < 0) {
		i = 0;
		t = 0.0f;
	}
	if (i >= (int)n - 1) {
		i = (int)n - 1;
		t = 0.0f;
	}
	*w0 = lb_coef(1.0f - t);
	*w1 = lb_coef(t);
	*i0 = i;
	*i1 = i + 1 < (int)n && *w1 != 0.0f ? i + 1 : i;
}

/* lb_axis_rows_fixed gives the rows of exact mode (rounding OPENCV) as
 * OpenCV's resizeGeneric_ takes them for 8-bit images: the indices
 * clamped to the image but the fraction kept (at the top and bottom both
 * neighbours are the edge row, each with its weight), the weights as the
 * 11-bit integers saturate_cast<short>(w * 2048), 0..2048. A neighbour of
 * weight 0 adds exactly 0 to the fixed-point blend, so the second one is
 * then the first: the rows read are those lb_axis names, and the host's row
 * plan holds for both modes. */
LB_AXIS_FN void lb_axis_rows_fixed(unsigned int d, unsigned int n,
                                   unsigned int m, int *i0, int *i1, int *c0,
                                   int *c1)
{
	float t;
	int i = lb_axis_src(d, n, m, &t);
	int last = (int)n - 1;

	*c0 = (int)rintf((1.0f - t) * 2048.0f);
	*c1 = (int)rintf(t * 2048.0f);
	*i0 = i < 0 ? 0 : i > last ? last : i;
	*i1 = *c1 == 0 ? *i0 : i + 1 < 0 ? 0 : i + 1 > last ? last : i + 1;
}

#endif /* FPREP_LETTERBOX_AXIS_H */
