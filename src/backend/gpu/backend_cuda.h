/*
 * backend_cuda.h: the GPU backend of frameprepd: one lane per (GPU, lane) pair,
 * each with double-buffered (or deeper) pinned staging slots, H2D / compute /
 * D2H on separate CUDA streams ordered by events, kernels compiled at run time
 * by NVRTC and cached on disk (kernel_cache.h).
 */
#ifndef FPREP_BACKEND_CUDA_H
#define FPREP_BACKEND_CUDA_H

#include "backend.h"

/* fprep__cuda_config: how to start the GPU backend. */
typedef struct fprep__cuda_config {
	int device;             /* CUDA device id of the lane */
	unsigned lane;          /* the lane's number in the daemon, for logs */
	unsigned slots;         /* staging slots per lane, >= 2 */
	const char *kernel_dir; /* NULL: the sources embedded at build time */
	const char *cache_dir;  /* NULL: $XDG_CACHE_HOME/frameprep (or
	                           ~/.cache/frameprep) */
	int cache_enabled;      /* 0: compile at every start, write nothing */
	int transfer;           /* FPREP__CUDA_STAGED, _MAPPED or _AUTO */
	int all_rows; /* 1: a staged H2D copies the whole frame; 0: only the
	                 rows the kernel reads (row_plan.h) */
	int trace;    /* keep the device clock's anchor for job->t_stage_ns */
	/* 1: JPEG sources the engine takes (sequential Huffman) are decoded
	 * there (nvJPEG's hardware backend); 0: by libjpeg-turbo on CPU
	 * threads. The engine does not check that a file's data fills the
	 * frame its header names: on an H200 a short file's frame showed
	 * other data than its own in 269 of 400 replies after another
	 * client's frames (integration_jpeg_race on GPU 0), so it is for
	 * trusted clients only. */
	int jpeg_engine;
	uint64_t spin_ns; /* the lane and completion threads poll for work
	                     (and the GPU) this long before sleeping; a
	                     wait for the GPU first sleeps until shortly
	                     before the completion expected (cuda_wait.c,
	                     pacing); 0: sleep at once, no pacing */
} fprep__cuda_config;

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

/* fprep__backend_cuda_open starts the GPU backend on cfg->device: compiles
 * (or loads from the cache) the kernels, allocates the staging slots, creates
 * the streams, events and the completion thread. Call from the loop thread at
 * start-up. Returns 0, or FPREP_EUNSUPPORTED (no such device), FPREP_ECUDA,
 * FPREP_ENVRTC, FPREP_ENOMEM, FPREP_EIO, with the reason logged. */
int fprep__backend_cuda_open(fprep__backend **bp,
                             const fprep__cuda_config *cfg);

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

/* fprep__backend_cuda_set_probe installs fn (NULL: none) on a GPU backend.
 * Call before submitting jobs; meant for tests and benchmarks. */
void fprep__backend_cuda_set_probe(fprep__backend *b, fprep__cuda_probe_fn fn,
                                   void *arg);

/* fprep__backend_cuda_identity tells which device the GPU backend b runs
 * on: its ordinal, its UUID (cudaDeviceProp.uuid) and its name (NUL-
 * terminated in size bytes). Any thread. */
void fprep__backend_cuda_identity(fprep__backend *b, int *device,
                                  uint8_t uuid[FPREP_CUDA_UUID_SIZE],
                                  char *name, size_t size);

#endif /* FPREP_BACKEND_CUDA_H */
