/*
 * nvml.h: GPU utilisation and memory of the daemon's GPUs, from NVIDIA's
 * management library (NVML), for the metrics endpoint.
 *
 * libnvidia-ml.so.1 comes with the driver, not the toolkit: it is opened
 * with dlopen at the first sample, so nothing links it, a build needs no
 * header of it, and a machine without it (the CPU machines, a container
 * without the driver's libraries) simply has no such series. FPREP_NVML in
 * the environment names another file, or "off".
 */
#ifndef FPREP_SERVICE_NVML_H
#define FPREP_SERVICE_NVML_H

#include <stddef.h>
#include <stdint.h>

/* fprep__nvml_gpu: one GPU's figures at one moment. A figure NVML would
 * not give (utilisation on a MIG instance, say) is -1. */
typedef struct fprep__nvml_gpu {
	int util_gpu;      /* % of the last sample period a kernel ran */
	int util_memory;   /* % of it device memory was read or written */
	int64_t mem_used;  /* bytes of device memory in use (all processes) */
	int64_t mem_total; /* bytes of device memory */
} fprep__nvml_gpu;

/* fprep__nvml_sample fills *g for the GPU at PCI bus id bus (as CUDA
 * writes it, "0000:65:00.0"). The first call loads NVML (and logs once
 * whether it could, with dlerror's words when not). Returns 0 (at least
 * one figure known), FPREP_EUNSUPPORTED (no NVML here, or turned off) or
 * FPREP_EINVAL (NVML knows no such GPU or gives none of its figures). Any
 * thread; calls are serialised. */
int fprep__nvml_sample(const char *bus, fprep__nvml_gpu *g);

/* fprep__nvml_close shuts NVML down and unloads it; a later sample loads
 * it again (reading FPREP_NVML again). Safe when never loaded. */
void fprep__nvml_close(void);

/* fprep__nvml_bus_id writes CUDA device dev's PCI bus id into buf (size
 * bytes, 16 are enough). Returns 0, or FPREP_EUNSUPPORTED in a build
 * without CUDA (nvml_bus_none.c) or when CUDA cannot say. Any thread. */
int fprep__nvml_bus_id(int dev, char *buf, size_t size);

#endif /* FPREP_SERVICE_NVML_H */
