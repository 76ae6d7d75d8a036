/*
 * letterbox.cu: the preprocessing kernels of frameprep's GPU backend,
 * compiled at run time by NVRTC.
 *
 * One thread per output pixel. The thread maps its pixel into the resized
 * region given by the host's transform (fprep_transform_compute, so the CPU
 * and GPU backends agree on sizes and padding), samples the source with
 * OpenCV's INTER_LINEAR pixel-centre rule (src = (dst + 0.5) * W / W_new -
 * 0.5; a coordinate below 0 is clamped to 0 with weight 0, one at or past the
 * last pixel to the last pixel with weight 0; weights rounded to OpenCV's
 * 11-bit fixed point, like the CPU reference), horizontally then
 * vertically, reorders the channels, and writes (v * scale - mean[c]) /
 * std[c] as float32 or float16, or the pixel rounded half up for uint8, in
 * NCHW or NHWC. Pixels outside the resized
 * region take pad_value. The dtype is a separate entry point so each one is
 * specialised; so is the source family (interleaved pixels, NV12, I420,
 * YUYV): a YUV kernel reads the four neighbours' Y and chroma samples from
 * the planes, converts each to the RGB8 pixel the CPU reference would
 * (lb_yuv_pixel, no fused multiply-add, so both agree exactly), and
 * resizes those, in one pass. Order and layout are uniform branches.
 *
 * Exact mode (request rounding OPENCV) has entry points of its own
 * (..._exact_<dtype>): the horizontal blend, exact in float (8-bit samples
 * times multiples of 1/2048), is taken as OpenCV's integer sum, the rows
 * are blended in OpenCV's fixed point (lb_axis_rows_fixed, lb_fixed), the
 * padding is pad_value rounded half to even, and the normalisation rounds
 * every step (__fmul_rn, __fsub_rn; the division is IEEE by default), so
 * the tensor equals the CPU reference's bit for bit (src/lib/ops.h).
 *
 * The argument block and enum values are in letterbox_abi.h, the sampling
 * positions (lb_axis) in letterbox_axis.h, which NVRTC finds as named
 * headers (no include path).
 */
#include "half_device.h"
#include "letterbox_abi.h"
#include "letterbox_axis.h"

/* lb_yuv_sat rounds a converted value half up and saturates it to
 * 0..255, as a float. */
__device__ __forceinline__ float lb_yuv_sat(float v)
{
	return fminf(fmaxf(floorf(__fadd_rn(v, 0.5f)), 0.0f), 255.0f);
}

/* lb_yuv_pixel converts one pixel to RGB with the host's coefficients,
 * rounding each step as the CPU reference does (ops.h). */
__device__ __forceinline__ void lb_yuv_pixel(const fprep_letterbox_args &a,
                                             unsigned int y, unsigned int u,
                                             unsigned int v, float *rgb)
{
	float fy =
	        __fmul_rn(fmaxf(__fsub_rn((float)y, a.yuv[0]), 0.0f), a.yuv[1]);
	float fu = (float)u - 128.0f, fv = (float)v - 128.0f;

	rgb[0] = lb_yuv_sat(__fadd_rn(fy, __fmul_rn(a.yuv[2], fv)));
	rgb[1] = lb_yuv_sat(__fadd_rn(__fadd_rn(fy, __fmul_rn(a.yuv[3], fu)),
	                              __fmul_rn(a.yuv[4], fv)));
	rgb[2] = lb_yuv_sat(__fadd_rn(fy, __fmul_rn(a.yuv[5], fu)));
}

/* lb_yuv_fetch converts source pixel (x, y) of a YUV frame to RGB; the
 * pixel takes the chroma sample of its 2x2 block (NV12, I420) or 2x1 pair
 * (YUYV). */
template <int FMT>
__device__ __forceinline__ void lb_yuv_fetch(const fprep_letterbox_args &a,
                                             int x, int y, float *rgb)
{
	const unsigned char *row = a.src + (size_t)y * a.src_stride;
	size_t crow = (size_t)(y >> 1) * a.uv_stride;
	unsigned int yy, u, v;

	if (FMT == LB_PIX_NV12) {
		const unsigned char *c = a.src + a.u_offset + crow;
		yy = row[x];
		u = c[x & ~1];
		v = c[x | 1];
	} else if (FMT == LB_PIX_I420) {
		yy = row[x];
		u = a.src[a.u_offset + crow + (x >> 1)];
		v = a.src[a.v_offset + crow + (x >> 1)];
	} else {
		yy = row[2 * x];
		u = row[4 * (x >> 1) + 1];
		v = row[4 * (x >> 1) + 3];
	}
	lb_yuv_pixel(a, yy, u, v, rgb);
}

/* lb_fixed blends two horizontal sums, given as float multiples of 1/2048
 * (exact), with the 11-bit row weights c0, c1 as OpenCV's
 * VResizeLinear<uchar, int, short, ...> does; the result is 0..255. */
__device__ __forceinline__ float lb_fixed(float top, float bot, int c0, int c1)
{
	int h0 = (int)(top * 2048.0f), h1 = (int)(bot * 2048.0f);

	return (float)((((c0 * (h0 >> 4)) >> 16) + ((c1 * (h1 >> 4)) >> 16) +
	                2) >>
	               2);
}

template <int FMT, int EXACT>
__device__ __forceinline__ void lb_body(const fprep_letterbox_args &a,
                                        int dtype)
{
	unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
	unsigned int y = a.row0 + blockIdx.y * blockDim.y + threadIdx.y;
	if (x >= a.out_w || y >= a.out_h)
		return;

	unsigned int nch = a.channel_order == LB_ORDER_GRAY ? 1 : 3;
	float v[3];

	if (x - a.pad_x < a.resized_w && y - a.pad_y < a.resized_h &&
	    x >= a.pad_x && y >= a.pad_y) {
		int x0, x1, y0, y1, c0 = 0, c1 = 0;
		float wx0, wx1, wy0 = 0.0f, wy1 = 0.0f;
		lb_axis(x - a.pad_x, a.src_w, a.resized_w, &x0, &x1, &wx0,
		        &wx1);
		if (EXACT)
			lb_axis_rows_fixed(y - a.pad_y, a.src_h, a.resized_h,
			                   &y0, &y1, &c0, &c1);
		else
			lb_axis(y - a.pad_y, a.src_h, a.resized_h, &y0, &y1,
			        &wy0, &wy1);

		if (FMT != 0) {
			/* YUV: RGB of the four neighbours, then the blend. */
			float p00[3], p01[3], p10[3], p11[3];
			lb_yuv_fetch<FMT>(a, x0, y0, p00);
			lb_yuv_fetch<FMT>(a, x1, y0, p01);
			lb_yuv_fetch<FMT>(a, x0, y1, p10);
			lb_yuv_fetch<FMT>(a, x1, y1, p11);
			for (unsigned int c = 0; c < 3; c++) {
				unsigned int o = a.channel_order == LB_ORDER_BGR
				                         ? 2 - c
				                         : c;
				float top = p00[o] * wx0 + p01[o] * wx1;
				float bot = p10[o] * wx0 + p11[o] * wx1;
				v[c] = EXACT ? lb_fixed(top, bot, c0, c1)
				             : top * wy0 + bot * wy1;
			}
		} else {
			unsigned int bpp, r, g, b;
			switch (a.src_format) {
			case LB_PIX_BGR8:
				bpp = 3, r = 2, g = 1, b = 0;
				break;
			case LB_PIX_RGB8:
				bpp = 3, r = 0, g = 1, b = 2;
				break;
			case LB_PIX_BGRA8:
				bpp = 4, r = 2, g = 1, b = 0;
				break;
			case LB_PIX_RGBA8:
				bpp = 4, r = 0, g = 1, b = 2;
				break;
			default:
				bpp = 1, r = 0, g = 0, b = 0;
				break;
			}
			unsigned int off[3];
			if (a.channel_order == LB_ORDER_BGR) {
				off[0] = b, off[1] = g, off[2] = r;
			} else {
				off[0] = r, off[1] = g, off[2] = b;
			}

			const unsigned char *row0 =
			        a.src + (size_t)y0 * a.src_stride;
			const unsigned char *row1 =
			        a.src + (size_t)y1 * a.src_stride;
			const unsigned char *p00 = row0 + (size_t)x0 * bpp;
			const unsigned char *p01 = row0 + (size_t)x1 * bpp;
			const unsigned char *p10 = row1 + (size_t)x0 * bpp;
			const unsigned char *p11 = row1 + (size_t)x1 * bpp;
			for (unsigned int c = 0; c < nch; c++) {
				unsigned int o = off[c];
				float top = (float)p00[o] * wx0 +
				            (float)p01[o] * wx1;
				float bot = (float)p10[o] * wx0 +
				            (float)p11[o] * wx1;
				v[c] = EXACT ? lb_fixed(top, bot, c0, c1)
				             : top * wy0 + bot * wy1;
			}
		}
	} else {
		/* Exact: cv2.copyMakeBorder's saturate_cast<uchar>. */
		v[0] = v[1] = v[2] = EXACT ? rintf(a.pad_value) : a.pad_value;
	}

	size_t plane = (size_t)a.out_w * a.out_h;
	size_t pix = (size_t)y * a.out_w + x;
	for (unsigned int c = 0; c < nch; c++) {
		size_t i = a.layout == LB_LAYOUT_NCHW ? c * plane + pix
		                                      : pix * nch + c;
		if (dtype == LB_DTYPE_U8) {
			float r = floorf(v[c] + 0.5f);
			r = fminf(fmaxf(r, 0.0f), 255.0f);
			((unsigned char *)a.dst)[i] = (unsigned char)r;
		} else {
			float n =
			        EXACT ? __fsub_rn(__fmul_rn(v[c], a.scale),
			                          a.mean[c]) /
			                        a.std[c]
			              : (v[c] * a.scale - a.mean[c]) / a.std[c];
			if (dtype == LB_DTYPE_F16)
				((unsigned short *)a.dst)[i] =
				        fprep_dev_f32_to_f16(n);
			else
				((float *)a.dst)[i] = n;
		}
	}
}

/* The entry points: one per source family, rounding and dtype. */
#define LB_ENTRY(name, fmt, exact, dtype)                                      \
	extern "C" __global__ void name(fprep_letterbox_args a)                \
	{                                                                      \
		lb_body<fmt, exact>(a, dtype);                                 \
	}
#define LB_ENTRIES(prefix, fmt)                                                \
	LB_ENTRY(prefix##_f32, fmt, 0, LB_DTYPE_F32)                           \
	LB_ENTRY(prefix##_f16, fmt, 0, LB_DTYPE_F16)                           \
	LB_ENTRY(prefix##_u8, fmt, 0, LB_DTYPE_U8)                             \
	LB_ENTRY(prefix##_exact_f32, fmt, 1, LB_DTYPE_F32)                     \
	LB_ENTRY(prefix##_exact_f16, fmt, 1, LB_DTYPE_F16)                     \
	LB_ENTRY(prefix##_exact_u8, fmt, 1, LB_DTYPE_U8)

LB_ENTRIES(fprep_letterbox, 0)
LB_ENTRIES(fprep_letterbox_nv12, LB_PIX_NV12)
LB_ENTRIES(fprep_letterbox_i420, LB_PIX_I420)
LB_ENTRIES(fprep_letterbox_yuyv, LB_PIX_YUYV)
