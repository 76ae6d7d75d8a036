/*
 * cuda_region.c: CUDA regions and shared-memory regions on a GPU
 * lane (backend_cuda.c): pinning, IPC handles opened and checked.
 *
 * CUDA regions (a client's device memory, opened from its IPC handle on
 * this lane) replace a side of that chain: a frame in one is read by the
 * kernel where it lies (no H2D), a tensor for one is written there by the
 * kernel (no D2H). The events are recorded all the same, so the reply
 * still waits for ev_done: the work on the client's memory has completed
 * when the reply leaves.
 */
#include "gpu/cuda_core_internal.h"

/* cuda_addr_range_fn: the driver's cuMemGetAddressRange (v2), fetched
 * through the runtime, so the daemon links no libcuda. */
typedef int (*cuda_addr_range_fn)(unsigned long long *base, size_t *size,
                                  unsigned long long dptr);

static cuda_addr_range_fn region_addr_range(void)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
	                                     cudaEnableDefault,
	                                     &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return (cuda_addr_range_fn)fn;
}

/* region_ipc_check checks that the region's [offset, offset + size) lies
 * inside the allocation opened at p: its real size from the driver
 * (cuMemGetAddressRange); where the driver entry point is missing, the
 * first and last byte must be device memory of this lane's device. */
static int region_ipc_check(cuda_backend *cb, fprep__memreg *r, uint8_t *p)
{
	cuda_addr_range_fn range = region_addr_range();
	struct cudaPointerAttributes a0, a1;
	unsigned long long base = 0;
	uint64_t off = r->u.cuda.offset, end;
	size_t alloc = 0;
	int rv;

	if (__builtin_add_overflow(off, r->size, &end))
		end = UINT64_MAX;
	if (range != NULL) {
		rv = range(&base, &alloc, (unsigned long long)(uintptr_t)p);
		if (rv != 0) {
			snprintf(r->message, sizeof(r->message),
			         "cuMemGetAddressRange of the opened handle: "
			         "CUresult %d",
			         rv);
			return FPREP_ECUDA;
		}
		if (base > (uintptr_t)p ||
		    end > (uint64_t)alloc - ((uintptr_t)p - base)) {
			snprintf(r->message, sizeof(r->message),
			         "cuda_offset %" PRIu64
			         " + region_size %" PRIu64
			         " exceeds the allocation's %zu bytes",
			         off, r->size, alloc);
			return FPREP_EINVAL;
		}
		return 0;
	}
	if (end == UINT64_MAX ||
	    cudaPointerGetAttributes(&a0, p + off) != cudaSuccess ||
	    cudaPointerGetAttributes(&a1, p + end - 1) != cudaSuccess ||
	    a0.type != cudaMemoryTypeDevice ||
	    a1.type != cudaMemoryTypeDevice || a0.device != cb->device ||
	    a1.device != cb->device) {
		(void)cudaGetLastError();
		snprintf(r->message, sizeof(r->message),
		         "cuda_offset %" PRIu64 " + region_size %" PRIu64
		         " is not inside the opened allocation",
		         off, r->size);
		return FPREP_EINVAL;
	}
	return 0;
}

/* region_ipc_run opens (cudaIpcOpenMemHandle) or closes a CUDA region on
 * the lane thread: the handle must name an allocation on this lane's
 * device (by UUID), holding the region. */
static void region_ipc_run(cuda_backend *cb, fprep__memreg *r, int dev_ok)
{
	fprep__gpu_status st = {0};
	char want[48], have[48];
	cudaIpcMemHandle_t h;
	void *p = NULL;

	if (r->verb == FPREP__MEMREG_CLOSE) {
		if (r->u.cuda.opened != NULL)
			(void)FPREP__CUDA(
			        NULL, cudaIpcCloseMemHandle(r->u.cuda.opened));
		r->u.cuda.opened = NULL;
		r->base = NULL;
		return;
	}
	if (!dev_ok) {
		r->status = FPREP_ECUDA;
		snprintf(r->message, sizeof(r->message),
		         "CUDA region not opened: the lane has no device");
		return;
	}
	if (memcmp(r->u.cuda.uuid, cb->uuid, sizeof(cb->uuid)) != 0) {
		fprep__uuid_text(r->u.cuda.uuid, want, sizeof(want));
		fprep__uuid_text(cb->uuid, have, sizeof(have));
		r->status = FPREP_EINVAL;
		snprintf(r->message, sizeof(r->message),
		         "cuda_uuid %s is not the daemon's GPU (%s)", want,
		         have);
		return;
	}
	_Static_assert(sizeof(h) == FPREP_CUDA_HANDLE_SIZE, "IPC handle size");
	memcpy(&h, r->u.cuda.handle, sizeof(h));
	if (FPREP__CUDA(&st, cudaIpcOpenMemHandle(
	                             &p, h, cudaIpcMemLazyEnablePeerAccess))) {
		(void)cudaGetLastError();
		r->status = FPREP_EREGION;
		snprintf(r->message, sizeof(r->message),
		         "%.60s: not the handle of a live allocation (garbage, "
		         "freed, or its process exited)",
		         st.text);
		return;
	}
	r->status = region_ipc_check(cb, r, p);
	if (r->status != FPREP_OK) {
		(void)FPREP__CUDA(NULL, cudaIpcCloseMemHandle(p));
		return;
	}
	r->u.cuda.opened = p;
	r->base = (uint8_t *)p + r->u.cuda.offset;
}

/* region_attach runs OPEN on a shared-memory region that another
 * lane of this process has already mapped and pinned (portable): this
 * lane's device must see its pages as page-locked host memory. */
static void region_attach(cuda_backend *cb, fprep__memreg *r, int dev_ok)
{
	struct cudaPointerAttributes a;
	fprep__gpu_status st = {0};

	if (dev_ok &&
	    !FPREP__CUDA(&st, cudaPointerGetAttributes(&a, r->base)) &&
	    a.type == cudaMemoryTypeHost)
		return;
	(void)cudaGetLastError();
	r->status = FPREP_ECUDA;
	snprintf(r->message, sizeof(r->message),
	         "region not page-locked for device %d: %.90s", cb->device,
	         !dev_ok      ? "the lane has no device"
	         : st.text[0] ? st.text
	                      : "not registered for it");
}

/* region_run runs a region operation on the lane thread, whose
 * device is set (dev_ok): OPEN maps the region and pins it
 * (cudaHostRegister), so H2D reads the client's frames and D2H writes its
 * tensors directly; CLOSE unpins it (milliseconds for a large region) and
 * unmaps it. */
static void region_run(cuda_backend *cb, fprep__memreg *r, int dev_ok)
{
	fprep__gpu_status st = {0};

	r->message[0] = '\0';
	r->status = FPREP_OK;
	if (r->kind == FPREP__MEMREG_CUDA) {
		region_ipc_run(cb, r, dev_ok);
		return;
	}
	if (r->verb == FPREP__MEMREG_CLOSE) {
		if (r->pinned)
			(void)FPREP__CUDA(NULL, cudaHostUnregister(r->base));
		r->pinned = 0;
		r->mapped = NULL;
		fprep__memreg_unmap(r);
		return;
	}
	if (r->pinned) {
		region_attach(cb, r, dev_ok);
		return;
	}
	r->mapped = NULL;
	r->status = fprep__memreg_map(r);
	if (r->status != FPREP_OK)
		return;
	/* Portable: the pin counts for every device of the process, so
	 * the other lanes only check it (region_attach). Mapped
	 * transfers also need the pages mapped into the device's space. */
	unsigned flags = cudaHostRegisterPortable;
	if (cb->transfer != FPREP__CUDA_STAGED)
		flags |= cudaHostRegisterMapped;
	if (!dev_ok ||
	    FPREP__CUDA(&st,
	                cudaHostRegister(r->base, (size_t)r->size, flags))) {
		r->status = FPREP_ECUDA;
		snprintf(r->message, sizeof(r->message),
		         "region not pinned for the GPU: %.90s",
		         dev_ok ? st.text : "the lane has no device");
		fprep__memreg_unmap(r);
		return;
	}
	r->pinned = 1;
	if ((flags & cudaHostRegisterMapped) != 0 &&
	    FPREP__CUDA(&st, cudaHostGetDevicePointer((void **)&r->mapped,
	                                              r->base, 0))) {
		/* Jobs on it go staged. */
		fprep__log(FPREP_LOG_WARNING, "region not mapped: %s", st.text);
		r->mapped = NULL;
	}
}

void fprep__cuda_region_drain(cuda_backend *cb, int dev_ok)
{
	fprep__qnode *n;

	while ((n = fprep__queue_pop(&cb->admin)) != NULL) {
		fprep__memreg *r = fprep__container_of(n, fprep__memreg, link);

		pthread_mutex_unlock(&cb->mu);
		region_run(cb, r, dev_ok);
		r->done(r); /* r belongs to the loop from here */
		pthread_mutex_lock(&cb->mu);
	}
}
