/*
 * cuda_ptr.h: what a client needs to hand a piece of its GPU memory to
 * frameprepd (internal to libframeprep).
 *
 * The daemon opens a CUDA IPC memory handle, which names a whole allocation
 * (what cudaMalloc / cuMemAlloc returned), not a pointer inside it. A
 * buffer inside a bigger allocation (a PyTorch tensor in its caching
 * allocator's block, element k of a batch) is therefore sent as the
 * allocation's handle plus the buffer's byte offset from the allocation's
 * base. The device is named by its UUID, because device ordinals are
 * renumbered per process by CUDA_VISIBLE_DEVICES.
 *
 * libcuda is opened with dlopen on first use, so libframeprep neither links
 * nor needs the CUDA driver: a process without one gets FPREP_EUNSUPPORTED.
 */
#ifndef FPREP_CUDA_PTR_H
#define FPREP_CUDA_PTR_H

#include <stddef.h>
#include <stdint.h>

#define FPREP__CUDA_IPC_HANDLE_SIZE 64
#define FPREP__CUDA_UUID_SIZE       16

/* fprep__cuda_ptr: a device buffer as the daemon is told of it. */
typedef struct fprep__cuda_ptr {
	uint8_t handle[FPREP__CUDA_IPC_HANDLE_SIZE]; /* cuIpcGetMemHandle */
	uint8_t uuid[FPREP__CUDA_UUID_SIZE];         /* cuDeviceGetUuid */
	uint64_t offset;     /* buffer start - allocation base, bytes */
	uint64_t alloc_size; /* bytes of the whole allocation */
	int ordinal;         /* the device's ordinal in this process */
} fprep__cuda_ptr;

/* fprep__cuda_ptr_lookup fills *out for the size bytes of device memory at
 * dptr: the allocation holding them (cuMemGetAddressRange), its IPC handle
 * and the device's UUID. The buffer must lie wholly inside one allocation
 * made by cudaMalloc/cuMemAlloc (stream-ordered pools and cuMemMap memory
 * have no legacy IPC handle). Returns 0, or FPREP_EUNSUPPORTED (no CUDA
 * driver in this process), FPREP_EINVAL (size 0, not device memory, not
 * inside one allocation, no IPC handle for it), FPREP_ECUDA (a driver
 * call failed), with a sentence in msg. Any thread; the pointer's context
 * is made current for the calls and restored after. */
int fprep__cuda_ptr_lookup(const void *dptr, uint64_t size,
                           fprep__cuda_ptr *out, char *msg, size_t msg_size);

/* fprep__cuda_ptr_id tells, with one driver call and no context switch
 * (cuPointerGetAttributes), which allocation holds the device memory at
 * dptr: its buffer ID (CU_POINTER_ATTRIBUTE_BUFFER_ID), unique within the
 * process for its whole life, so an allocation freed and made again at the
 * same address has a new one, and the device's ordinal in this process. A
 * caller that keeps what fprep__cuda_ptr_lookup found per buffer ID looks
 * it up once per allocation. Returns 0, or FPREP_EUNSUPPORTED (no CUDA
 * driver in this process), FPREP_EINVAL (not device memory), FPREP_ECUDA
 * (the call failed), with a sentence in msg. Any thread. */
int fprep__cuda_ptr_id(const void *dptr, uint64_t *buffer_id, int *ordinal,
                       char *msg, size_t msg_size);

#endif /* FPREP_CUDA_PTR_H */
