/*
 * backend_cuda.h: the GPU backend of frameprepd: one lane per (GPU, lane) pair,
 * each with double-buffered (or deeper) pinned staging slots, H2D / compute /
 * D2H on separate CUDA streams ordered by events, kernels compiled at run time
 * by NVRTC and cached on disk (kernel_cache.h).
 */
#ifndef FPREP_BACKEND_CUDA_H
#define FPREP_BACKEND_CUDA_H

#include "backend.h"
#include "gpu/cuda_core.h"

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

/* fprep__backend_cuda_open starts the GPU backend on cfg->device: compiles
 * (or loads from the cache) the kernels, allocates the staging slots, creates
 * the streams, events and the completion thread. Call from the loop thread at
 * start-up. Returns 0, or FPREP_EUNSUPPORTED (no such device), FPREP_ECUDA,
 * FPREP_ENVRTC, FPREP_ENOMEM, FPREP_EIO, with the reason logged. */
int fprep__backend_cuda_open(fprep__backend **bp,
                             const fprep__cuda_config *cfg);

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
