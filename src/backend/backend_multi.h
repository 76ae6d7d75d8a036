/*
 * backend_multi.h: a backend over several lanes (GPU lanes, one or more
 * per device), which schedules each job on one of them and fans region
 * operations out to them (backend_multi.c).
 */
#ifndef FPREP_BACKEND_MULTI_H
#define FPREP_BACKEND_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* fprep__multi_lane: one lane handed to fprep__backend_multi_open. */
typedef struct fprep__multi_lane {
	fprep__backend *backend;            /* an open backend */
	int device;                         /* its CUDA ordinal */
	uint8_t uuid[FPREP_CUDA_UUID_SIZE]; /* its device's UUID */
	char name[64];                      /* its device's name */
} fprep__multi_lane;

/* fprep__backend_multi_open makes one backend of the n lanes (n >= 1),
 * which it owns from then on, also on failure (its close closes them).
 * Scheduling: a job whose input (else output) lies in a CUDA region goes
 * to a lane of that region's device, any other to the lane in service with
 * the fewest jobs in flight (ties in turn). A lane whose job comes back
 * fatal is taken out of service with the other lanes of its device; the
 * job is then only fatal when no lane is left. Loop thread. Returns 0,
 * FPREP_EINVAL (n == 0) or FPREP_ENOMEM. */
int fprep__backend_multi_open(fprep__backend **bp,
                              const fprep__multi_lane *lanes, unsigned n);

/* fprep__uuid_text writes a device UUID as nvidia-smi does:
 * GPU-8-4-4-4-12 hex digits (41 bytes with the NUL). */
void fprep__uuid_text(const uint8_t u[FPREP_CUDA_UUID_SIZE], char *buf,
                      size_t size);

#endif /* FPREP_BACKEND_MULTI_H */
