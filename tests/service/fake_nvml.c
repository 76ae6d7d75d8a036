/*
 * fake_nvml.c: a stand-in for libnvidia-ml.so.1 with the six functions
 * service/nvml.c looks up, for test_metrics on machines without a GPU
 * (FPREP_NVML names it). One GPU, at PCI bus id 00000000:65:00.0: 37 %
 * busy, memory 12 % busy, 1234567890 of 80000000000 bytes used.
 */
#include <string.h>

#define FAKE_NOT_FOUND 6 /* NVML_ERROR_NOT_FOUND */

struct fake_utilization {
	unsigned int gpu, memory;
};
struct fake_memory {
	unsigned long long total, free, used;
};

static int fake_gpu; /* the one device's handle points here */

int nvmlInit_v2(void)
{
	return 0;
}

int nvmlShutdown(void)
{
	return 0;
}

const char *nvmlErrorString(int rv)
{
	return rv == 0 ? "Success" : "Not Found";
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
	if (strcmp(bus, "00000000:65:00.0") != 0)
		return FAKE_NOT_FOUND;
	*dev = &fake_gpu;
	return 0;
}

int nvmlDeviceGetUtilizationRates(void *dev, struct fake_utilization *u)
{
	if (dev != &fake_gpu)
		return FAKE_NOT_FOUND;
	u->gpu = 37;
	u->memory = 12;
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, struct fake_memory *m)
{
	if (dev != &fake_gpu)
		return FAKE_NOT_FOUND;
	m->total = 80000000000ull;
	m->used = 1234567890ull;
	m->free = m->total - m->used;
	return 0;
}
