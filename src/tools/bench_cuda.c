/*
 * bench_cuda.c: device memory for frameprep-bench --cuda-out, through the
 * CUDA driver API opened with dlopen (bench_cuda.h).
 */
#include "bench_cuda.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int cu_result; /* CUresult: 0 is CUDA_SUCCESS */
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_deviceptr;

static struct {
	cu_result (*init)(unsigned);
	cu_result (*device_get)(cu_device *, int);
	cu_result (*primary_ctx_retain)(cu_context *, cu_device);
	cu_result (*ctx_set_current)(cu_context);
	cu_result (*mem_alloc)(cu_deviceptr *, size_t);
	cu_result (*mem_free)(cu_deviceptr);
	cu_result (*memcpy_dtoh)(void *, cu_deviceptr, size_t);
	cu_context ctx;
} cu;

int bench_cuda_open(int ordinal, char *why, size_t size)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define CU_SYM(f, s) {s, offsetof(__typeof__(cu), f)}
	        CU_SYM(init, "cuInit"),
	        CU_SYM(device_get, "cuDeviceGet"),
	        CU_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
	        CU_SYM(ctx_set_current, "cuCtxSetCurrent"),
	        CU_SYM(mem_alloc, "cuMemAlloc_v2"),
	        CU_SYM(mem_free, "cuMemFree_v2"),
	        CU_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2"),
#undef CU_SYM
	};
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cu_device dev;

	if (lib == NULL) {
		snprintf(why, size, "no CUDA driver here (libcuda.so.1)");
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(lib, syms[i].name);

		if (f == NULL) {
			snprintf(why, size, "the CUDA driver lacks %s",
			         syms[i].name);
			return -1;
		}
		memcpy((char *)&cu + syms[i].off, &f, sizeof(f));
	}
	if (cu.init(0) != 0 || cu.device_get(&dev, ordinal) != 0 ||
	    cu.primary_ctx_retain(&cu.ctx, dev) != 0 ||
	    cu.ctx_set_current(cu.ctx) != 0) {
		snprintf(why, size, "no usable GPU %d", ordinal);
		return -1;
	}
	return 0; /* the driver stays loaded for the life of the process */
}

void *bench_cuda_alloc(size_t size, char *why, size_t why_size)
{
	cu_deviceptr p = 0;

	if (cu.ctx_set_current(cu.ctx) != 0 || cu.mem_alloc(&p, size) != 0) {
		snprintf(why, why_size, "cuMemAlloc of %zu bytes failed", size);
		return NULL;
	}
	return (void *)(uintptr_t)p;
}

void bench_cuda_free(void *dptr)
{
	if (dptr != NULL && cu.ctx_set_current(cu.ctx) == 0)
		(void)cu.mem_free((cu_deviceptr)(uintptr_t)dptr);
}

int bench_cuda_to_host(void *dst, const void *src, size_t size)
{
	if (cu.ctx_set_current(cu.ctx) != 0 ||
	    cu.memcpy_dtoh(dst, (cu_deviceptr)(uintptr_t)src, size) != 0)
		return -1;
	return 0;
}
