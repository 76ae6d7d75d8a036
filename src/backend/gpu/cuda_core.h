/*
 * cuda_core.h: what the GPU backend's lanes share with the daemon besides
 * the lane itself (backend_cuda.h): the transfer modes, the device count,
 * the allocation count, and the device stamps a probe receives. Defined in
 * cuda_core.c, the bottom of the backend's files (cuda_core_internal.h).
 */
#ifndef FPREP_CUDA_CORE_H
#define FPREP_CUDA_CORE_H

#include "backend.h"

/* How a lane moves frames and tensors that lie in registered pinned memory
 * (shared-memory regions): STAGED copies them on the copy engines
 * (cudaMemcpyAsync to and from device buffers); MAPPED lets the kernel read
 * the frame and write the tensor through mapped device pointers (no copy
 * engine; also the staging slots' pinned buffers, so an inline frame is
 * read where its payload was copied); AUTO is MAPPED on an integrated GPU
 * (cudaDevAttrIntegrated) and, on a discrete one, MAPPED while the lane has
 * no other job in flight and STAGED under load, where the copy engines
 * overlap frames. The values match frameprepd's --transfer. */
enum { FPREP__CUDA_STAGED, FPREP__CUDA_MAPPED, FPREP__CUDA_AUTO };

/* fprep__cuda_device_count returns the number of usable CUDA devices: 0 when
 * there is no driver or no GPU (cudaErrorInsufficientDriver,
 * cudaErrorNoDevice). Never fails. */
int fprep__cuda_device_count(void);

/* fprep__cuda_alloc_count returns how many device or pinned host buffers
 * (cudaMalloc, cudaMallocHost) the GPU backend has allocated in this
 * process: steady-state traffic must not move it. */
unsigned long fprep__cuda_alloc_count(void);

/* fprep__cuda_stamps: when one job's stages ran on the device, in
 * microseconds since its lane opened (CUDA timing events, ~0.5 us
 * resolution). */
typedef struct fprep__cuda_stamps {
	double h2d_start, h2d_end;
	double kernel_start, kernel_end;
	double d2h_start, d2h_end;
} fprep__cuda_stamps;

/* fprep__cuda_probe_fn: called on the completion thread for every job that
 * ran on the device, just before its done callback. */
typedef void (*fprep__cuda_probe_fn)(void *arg, const fprep__job *job,
                                     const fprep__cuda_stamps *stamps);

#endif /* FPREP_CUDA_CORE_H */
