/*
 * kernel_host.h: what kernels/letterbox.cu needs from CUDA, for compiling
 * it as ordinary C++ on the host (test_kernel_emulation.cpp). One "thread"
 * runs at a time, named by blockIdx with blocks of one thread; the
 * round-to-nearest intrinsics are plain float operations, which the host
 * compiler does not contract when built with -ffp-contract=off.
 */
#ifndef FPREP_KERNEL_HOST_H
#define FPREP_KERNEL_HOST_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#define __device__
#define __forceinline__ inline
#define __global__

struct kernel_host_dim3 {
	unsigned int x, y, z;
};
static kernel_host_dim3 blockIdx, blockDim = {1, 1, 1}, threadIdx;

static inline unsigned int __float_as_uint(float f)
{
	unsigned int u;

	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float __uint_as_float(unsigned int u)
{
	float f;

	memcpy(&f, &u, sizeof f);
	return f;
}

static inline float __fmul_rn(float a, float b)
{
	return a * b;
}

static inline float __fadd_rn(float a, float b)
{
	return a + b;
}

static inline float __fsub_rn(float a, float b)
{
	return a - b;
}

#endif /* FPREP_KERNEL_HOST_H */
