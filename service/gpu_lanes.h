/*
 * gpu_lanes.h: frameprepd's GPU lanes, as main.c asks for them. CMake
 * builds one of two files: gpu_lanes_cuda.c when the CUDA toolkit is
 * found, no_cuda.c (a stub that says so) when the build is CPU-only, as
 * libuv's no-*.c files stand in for what a platform lacks. main.c names
 * no build option. Main thread, at start-up.
 */
#ifndef FPREP_SERVICE_GPU_LANES_H
#define FPREP_SERVICE_GPU_LANES_H

#include "backend.h"
#include "config.h"

/* FPREP__GPU_NOT_BUILT: fprep__gpu_count's answer in a CPU-only build. */
#define FPREP__GPU_NOT_BUILT (-1)

/* fprep__gpu_count returns the CUDA devices usable now (0: no GPU or no
 * driver), or FPREP__GPU_NOT_BUILT when this frameprepd was built without
 * CUDA (then no setting can give it a GPU). */
int fprep__gpu_count(void);

/* fprep__gpu_open_lanes starts cfg->lanes GPU lanes on each of the n
 * devices (CUDA ordinals, distinct, each below fprep__gpu_count) and
 * writes into *bp the backend that serves them: the lane itself when that
 * makes one, else a multi backend over them (backend_multi.h), which the
 * caller closes. Returns 0, or an enum fprep_err after logging why, with
 * every lane it started closed; FPREP_EUNSUPPORTED without CUDA. */
int fprep__gpu_open_lanes(fprep__backend **bp, const fprep__config *cfg,
                          const int *devices, unsigned n);

#endif /* FPREP_SERVICE_GPU_LANES_H */
