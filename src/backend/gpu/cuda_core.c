/*
 * cuda_core.c: the bottom of a GPU lane's files (cuda_core_internal.h):
 * what every file above uses and none of them owns: the devices present,
 * the count of the buffers the lanes allocate, the naming of a backend
 * thread, and the count of a lane's staging slots in use. It calls no
 * other file of the lane.
 */
#include "gpu/cuda_core_internal.h"

/* Device and pinned buffers the lanes allocated (fprep__cuda_alloc_count). */
static atomic_ulong core_allocs;

unsigned long fprep__cuda_alloc_count(void)
{
	return atomic_load(&core_allocs);
}

void fprep__cuda_core_count_alloc(void)
{
	atomic_fetch_add(&core_allocs, 1);
}

int fprep__cuda_device_count(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		fprep__log(FPREP_LOG_DEBUG, "cudaGetDeviceCount: %s",
		           cudaGetErrorName(e));
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

void fprep__cuda_core_thread_start(const char *prefix, int device)
{
	char name[16];

	snprintf(name, sizeof name, "%s%d", prefix, device);
	pthread_setname_np(pthread_self(), name);
	(void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

unsigned fprep__cuda_core_busy(const cuda_backend *cb)
{
	unsigned busy = 0;

	for (unsigned i = 0; i < cb->nslots; i++)
		busy += cb->slots[i].job != NULL;
	return busy;
}
