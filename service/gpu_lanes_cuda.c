/*
 * gpu_lanes_cuda.c: the GPU lanes of a frameprepd built with the CUDA
 * toolkit (gpu_lanes.h): each a CUDA backend (gpu/backend_cuda.h) on one
 * device, several behind one multi backend (backend_multi.h). CMake
 * builds no_cuda.c instead when the toolkit is absent.
 */
#include "gpu_lanes.h"

#include "backend_multi.h"
#include "frameprep/frameprep.h"
#include "gpu/backend_cuda.h"
#include "log.h"

int fprep__gpu_count(void)
{
	return fprep__cuda_device_count();
}

int fprep__gpu_open_lanes(fprep__backend **bp, const fprep__config *cfg,
                          const int *devices, unsigned n)
{
	fprep__multi_lane lanes[FPREP__MAX_LANES];
	unsigned nl = 0;
	int rv = 0;

	if ((size_t)n * cfg->lanes > FPREP__MAX_LANES) {
		fprep__log(FPREP_LOG_ERR,
		           "%u devices x %u lanes: more than %d lanes", n,
		           cfg->lanes, FPREP__MAX_LANES);
		return FPREP_EINVAL;
	}
	for (unsigned d = 0; d < n && rv == 0; d++)
		for (unsigned k = 0; k < cfg->lanes && rv == 0; k++) {
			fprep__cuda_config cc = {
			        .device = devices[d],
			        .lane = nl,
			        .slots = cfg->slots,
			        .kernel_dir = cfg->kernel_dir,
			        .cache_dir = cfg->kernel_cache,
			        .cache_enabled = cfg->cache_enabled,
			        .transfer = cfg->transfer,
			        .all_rows = cfg->h2d_all_rows,
			        .trace = cfg->trace,
			        .jpeg_engine = cfg->jpeg_engine,
			        .spin_ns =
			                (uint64_t)(cfg->spin_us == FPREP__SPIN_AUTO
			                                   ? FPREP__SPIN_GPU_US
			                                   : cfg->spin_us) *
			                1000u,
			};
			fprep__multi_lane *l = &lanes[nl];

			rv = fprep__backend_cuda_open(&l->backend, &cc);
			if (rv == 0) {
				fprep__backend_cuda_identity(
				        l->backend, &l->device, l->uuid,
				        l->name, sizeof(l->name));
				nl++;
			}
		}
	if (rv != 0) {
		while (nl-- > 0)
			lanes[nl].backend->close(lanes[nl].backend, 0);
		return rv;
	}
	if (nl == 1) {
		*bp = lanes[0].backend;
		return 0;
	}
	return fprep__backend_multi_open(bp, lanes, nl);
}
