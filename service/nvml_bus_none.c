/*
 * nvml_bus_none.c: a build without CUDA has no GPU lanes, so no GPU for
 * NVML to look up (nvml.h). CMake builds this file instead of
 * nvml_bus_cuda.c.
 */
#include "nvml.h"

#include "frameprep/frameprep.h"

int fprep__nvml_bus_id(int dev, char *buf, size_t size)
{
	(void)dev;
	if (size > 0)
		buf[0] = '\0';
	return FPREP_EUNSUPPORTED;
}
