/*
 * nvml.c: GPU utilisation and memory from NVML, loaded at run time (see
 * nvml.h).
 *
 * The design is simple: the first sample dlopens libnvidia-ml.so.1, looks
 * up the six functions used and calls nvmlInit_v2; each sample then finds
 * the GPU by its PCI bus id (CUDA's ordinals are not NVML's indices: they
 * follow CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER) and reads its
 * utilisation rates and memory. The types and prototypes are NVML's
 * stable C ABI (nvml.h of the driver's development package, which the
 * build does not need), declared here.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "log.h"

#define NVML_SONAME "libnvidia-ml.so.1"

typedef int nvml_return; /* nvmlReturn_t; NVML_SUCCESS = 0 */
typedef struct nvml_device *nvml_device;
struct nvml_utilization { /* nvmlUtilization_t */
	unsigned int gpu;
	unsigned int memory;
};
struct nvml_memory { /* nvmlMemory_t */
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

static struct {
	pthread_mutex_t mu;
	int tried; /* a load was attempted (logged once) */
	void *lib; /* NULL: none */
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	const char *(*error_string)(nvml_return);
	nvml_return (*by_bus_id)(const char *, nvml_device *);
	nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
	nvml_return (*memory)(nvml_device, struct nvml_memory *);
} nvml = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* nvml_load opens the library and initialises NVML; logs the outcome.
 * Under nvml.mu. */
static void nvml_load(void)
{
	const char *env = getenv("FPREP_NVML");
	const char *path = env != NULL && env[0] != '\0' ? env : NVML_SONAME;
	static const char *const names[] = {
	        "nvmlInit_v2",
	        "nvmlShutdown",
	        "nvmlErrorString",
	        "nvmlDeviceGetHandleByPciBusId_v2",
	        "nvmlDeviceGetUtilizationRates",
	        "nvmlDeviceGetMemoryInfo",
	};
	void *fn[sizeof(names) / sizeof(names[0])];
	nvml_return rv;

	nvml.tried = 1;
	if (strcmp(path, "off") == 0) {
		fprep__log(FPREP_LOG_INFO, "metrics: NVML turned off "
		                           "(FPREP_NVML=off): no GPU "
		                           "utilisation series");
		return;
	}
	nvml.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (nvml.lib == NULL) {
		fprep__log(FPREP_LOG_INFO,
		           "metrics: no NVML (%s): no GPU utilisation series",
		           dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		fn[i] = dlsym(nvml.lib, names[i]);
		if (fn[i] == NULL) {
			fprep__log(FPREP_LOG_WARNING,
			           "metrics: %s has no %s: no GPU utilisation "
			           "series",
			           path, names[i]);
			goto fail;
		}
	}
	*(void **)&nvml.init = fn[0];
	*(void **)&nvml.shutdown = fn[1];
	*(void **)&nvml.error_string = fn[2];
	*(void **)&nvml.by_bus_id = fn[3];
	*(void **)&nvml.utilization = fn[4];
	*(void **)&nvml.memory = fn[5];
	rv = nvml.init();
	if (rv != 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "metrics: nvmlInit_v2: %s (%d): no GPU utilisation "
		           "series",
		           nvml.error_string(rv), rv);
		goto fail;
	}
	fprep__log(FPREP_LOG_INFO,
	           "metrics: NVML (%s): GPU utilisation and memory per GPU",
	           path);
	return;
fail:
	dlclose(nvml.lib);
	nvml.lib = NULL;
}

int fprep__nvml_sample(const char *bus, fprep__nvml_gpu *g)
{
	struct nvml_utilization u;
	struct nvml_memory m;
	nvml_device dev;
	int rv = FPREP_EINVAL;

	g->util_gpu = g->util_memory = -1;
	g->mem_used = g->mem_total = -1;
	pthread_mutex_lock(&nvml.mu);
	if (!nvml.tried)
		nvml_load();
	if (nvml.lib == NULL) {
		rv = FPREP_EUNSUPPORTED;
		goto out;
	}
	if (nvml.by_bus_id(bus, &dev) != 0)
		goto out;
	if (nvml.utilization(dev, &u) == 0) {
		g->util_gpu = (int)u.gpu;
		g->util_memory = (int)u.memory;
		rv = 0;
	}
	if (nvml.memory(dev, &m) == 0) {
		g->mem_used = (int64_t)m.used;
		g->mem_total = (int64_t)m.total;
		rv = 0;
	}
out:
	pthread_mutex_unlock(&nvml.mu);
	return rv;
}

void fprep__nvml_close(void)
{
	pthread_mutex_lock(&nvml.mu);
	if (nvml.lib != NULL) {
		nvml.shutdown();
		dlclose(nvml.lib);
		nvml.lib = NULL;
	}
	nvml.tried = 0;
	pthread_mutex_unlock(&nvml.mu);
}
