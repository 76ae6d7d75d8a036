/*
 * roi.cu: the kernels of ROIS and BATCH requests (protocol.h, "ROIS and
 * BATCH requests"), compiled at run time by NVRTC like letterbox.cu.
 *
 * One launch per request: blockIdx.z is the element, each thread one
 * tensor pixel of it (all its channels). The element's sampling was
 * planned on the host (fprep__roi_plan, src/lib/ops_roi.c) and is read
 * from elems[blockIdx.z]; the pixel is sampled by kernels/roi_sample.h,
 * the code the CPU reference runs, and stored as letterbox.cu stores a
 * FRAME's: (v * scale - mean[c]) / std[c] as float32 or float16 (each
 * step rounded, so it equals the CPU's), or v rounded half up for uint8,
 * in NCHW or NHWC. Packed sources only (BGR8, RGB8, BGRA8, RGBA8, GRAY8).
 */
#include "half_device.h"
#include "roi_sample.h"

__device__ __forceinline__ void roi_put(float *d, float v)
{
	*d = v;
}
__device__ __forceinline__ void roi_put(unsigned short *d, float v)
{
	*d = fprep_dev_f32_to_f16(v);
}
__device__ __forceinline__ void roi_put(unsigned char *d, float v)
{
	float r = v + 0.5f;

	r = r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r;
	*d = (unsigned char)r;
}

template <typename T, bool U8>
__device__ __forceinline__ void roi_kernel(const fprep_roi_args &a)
{
	unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
	unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
	unsigned int k = blockIdx.z;
	unsigned int fmt = a.src_format, ch[3], nch, bpp, c;
	int src_rgb = fmt == 2 || fmt == 4; /* RGB8, RGBA8 */
	float v[3];

	if (x >= a.out_w || y >= a.out_h)
		return;
	bpp = fmt == 5 ? 1 : fmt >= 3 ? 4 : 3;
	if (fmt == 5) { /* GRAY8 */
		ch[0] = ch[1] = ch[2] = 0;
		nch = a.channel_order == 3 ? 1 : 3;
	} else {
		nch = 3;
		if (src_rgb == (a.channel_order == 1))
			ch[0] = 0, ch[1] = 1, ch[2] = 2;
		else
			ch[0] = 2, ch[1] = 1, ch[2] = 0;
	}
	const fprep_roi_elem *e = &a.elems[k];
	roi_pixel(e, a.src + e->src_offset, (int)a.src_w, (int)a.src_h,
	          a.src_stride, bpp, ch, nch, a.pad_value, x, y, v);

	T *dst = (T *)a.dst + (unsigned long long)k * a.elem_values;
	unsigned long long plane = (unsigned long long)a.out_w * a.out_h;
	unsigned long long at = (unsigned long long)y * a.out_w + x;
	for (c = 0; c < nch; c++) {
		unsigned long long i =
		        a.layout == 1 ? c * plane + at : at * nch + c;
		/* Each step rounded; the division is IEEE by default. */
		float n = U8 ? v[c]
		             : __fsub_rn(__fmul_rn(v[c], a.scale), a.mean[c]) /
		                          a.std[c];
		roi_put(dst + i, n);
	}
}

extern "C" __global__ void fprep_roi_f32(fprep_roi_args a)
{
	roi_kernel<float, false>(a);
}

extern "C" __global__ void fprep_roi_f16(fprep_roi_args a)
{
	roi_kernel<unsigned short, false>(a);
}

extern "C" __global__ void fprep_roi_u8(fprep_roi_args a)
{
	roi_kernel<unsigned char, true>(a);
}
