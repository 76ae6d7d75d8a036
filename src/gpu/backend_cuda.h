/*
 * backend_cuda.h: the GPU backend of frameprepd: one lane per GPU, each with
 * double-buffered (or deeper) pinned staging slots, H2D / compute / D2H on
 * separate CUDA streams ordered by events, kernels compiled at run time by
 * NVRTC and cached on disk (kernel_cache.h).
 */
#ifndef FPREP_BACKEND_CUDA_H
#define FPREP_BACKEND_CUDA_H

#include "backend.h"

/* fprep__cuda_config: how to start the GPU backend. */
typedef struct fprep__cuda_config {
	int device;             /* CUDA device id of the lane */
	unsigned slots;         /* staging slots per lane, >= 2 */
	const char *kernel_dir; /* NULL: the sources embedded at build time */
	const char *cache_dir;  /* NULL: $XDG_CACHE_HOME/frameprep (or
	                           ~/.cache/frameprep) */
	int cache_enabled;      /* 0: compile at every start, write nothing */
} fprep__cuda_config;

/* fprep__cuda_device_count returns the number of usable CUDA devices: 0 when
 * there is no driver or no GPU (cudaErrorInsufficientDriver,
 * cudaErrorNoDevice). Never fails. */
int fprep__cuda_device_count(void);

/* fprep__backend_cuda_open starts the GPU backend on cfg->device: compiles
 * (or loads from the cache) the kernels, allocates the staging slots, creates
 * the streams, events and the completion thread. Call from the loop thread at
 * start-up. Returns 0, or FPREP_EUNSUPPORTED (no such device), FPREP_ECUDA,
 * FPREP_ENVRTC, FPREP_ENOMEM, FPREP_EIO, with the reason logged. */
int fprep__backend_cuda_open(fprep__backend **bp, const fprep__cuda_config *cfg);

#endif /* FPREP_BACKEND_CUDA_H */
