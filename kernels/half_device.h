/*
 * half_device.h: float32 to IEEE binary16 on the device, for the kernels
 * (letterbox.cu, roi.cu) through NVRTC's named headers, without a toolkit
 * header (cuda_fp16.h is not on NVRTC's path). Also compiled as host C++
 * by the kernel emulation tests (tests/gpu/kernel_host.h).
 */
#ifndef FPREP_HALF_DEVICE_H
#define FPREP_HALF_DEVICE_H

/* fprep_dev_f32_to_f16 returns the IEEE binary16 bits of f rounded to
 * nearest even (NaN stays NaN, overflow gives infinity), like
 * __float2half_rn. */
__device__ __forceinline__ unsigned short fprep_dev_f32_to_f16(float f)
{
	unsigned int u = __float_as_uint(f);
	unsigned int sign = (u >> 16) & 0x8000u;
	unsigned int a = u & 0x7fffffffu;
	unsigned int h;

	if (a >= 0x47800000u) { /* >= 65536, Inf or NaN */
		h = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
	} else if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
		/* Adding 0.5 aligns the 10 result bits at the bottom of the
		 * mantissa; the float add rounds to nearest even. */
		float s = __uint_as_float(a) + 0.5f;
		h = __float_as_uint(s) - 0x3f000000u;
	} else {
		unsigned int odd = (a >> 13) & 1u;
		a += 0xc8000fffu + odd; /* rebias exponent, round half even */
		h = a >> 13;
	}
	return (unsigned short)(sign | h);
}

#endif /* FPREP_HALF_DEVICE_H */
