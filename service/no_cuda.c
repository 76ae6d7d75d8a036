/*
 * no_cuda.c: the GPU lanes of a frameprepd built without the CUDA toolkit
 * (gpu_lanes.h): there are none. CMake builds this file instead of
 * gpu_lanes_cuda.c; main.c then says "built without CUDA" for --device
 * auto and refuses a GPU named in the settings (exit status 2).
 */
#include "gpu_lanes.h"

#include "frameprep/frameprep.h"
#include "log.h"

int fprep__gpu_count(void)
{
	return FPREP__GPU_NOT_BUILT;
}

int fprep__gpu_open_lanes(fprep__backend **bp, const fprep__config *cfg,
                          const int *devices, unsigned n)
{
	(void)bp;
	(void)cfg;
	(void)devices;
	fprep__log(FPREP_LOG_ERR,
	           "%u GPU lanes asked of a frameprepd built without CUDA", n);
	return FPREP_EUNSUPPORTED;
}
