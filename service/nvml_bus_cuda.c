/*
 * nvml_bus_cuda.c: a CUDA device's PCI bus id, by which nvml.c finds the
 * GPU in NVML (nvml.h). CMake builds this file in a build with CUDA and
 * nvml_bus_none.c otherwise.
 */
#include "nvml.h"

#include <cuda_runtime_api.h>
#include <limits.h>

#include "frameprep/frameprep.h"

int fprep__nvml_bus_id(int dev, char *buf, size_t size)
{
	int len = size > INT_MAX ? INT_MAX : (int)size;

	if (len < 1 || cudaDeviceGetPCIBusId(buf, len, dev) != cudaSuccess)
		return FPREP_EUNSUPPORTED;
	return 0;
}
