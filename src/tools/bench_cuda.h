/*
 * bench_cuda.h: frameprep-bench's device memory for --cuda-out: the
 * tensors written by the daemon straight into this process's GPU memory,
 * where an in-process GPU library (nvImageCodec, torchvision) leaves its
 * output. The CUDA driver (libcuda.so.1) is opened at run time, as the
 * client library does (src/lib/cuda_ptr.c), so the bench runs, and
 * refuses --cuda-out with a sentence, on a machine without one.
 */
#ifndef FRAMEPREP_BENCH_CUDA_H
#define FRAMEPREP_BENCH_CUDA_H

#include <stddef.h>

/* bench_cuda_open loads the driver and makes GPU ordinal's primary
 * context current on the calling thread. Returns 0, or -1 with a
 * sentence in why (size bytes). Main thread, before the streams start. */
int bench_cuda_open(int ordinal, char *why, size_t size);

/* bench_cuda_alloc allocates size bytes of device memory (cuMemAlloc, so
 * it has a CUDA IPC handle for fprep_region_open_cuda). Returns the
 * device pointer, or NULL with a sentence in why. Any thread, after
 * bench_cuda_open. */
void *bench_cuda_alloc(size_t size, char *why, size_t why_size);

/* bench_cuda_free frees what bench_cuda_alloc gave; NULL is ignored. */
void bench_cuda_free(void *dptr);

/* bench_cuda_to_host copies size bytes at device pointer src into host
 * memory dst and waits for the copy (cuMemcpyDtoH). Returns 0 or -1. Any
 * thread (the context is made current on it first). */
int bench_cuda_to_host(void *dst, const void *src, size_t size);

#endif /* FRAMEPREP_BENCH_CUDA_H */
