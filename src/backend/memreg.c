/*
 * memreg.c: the host side of a registered region's OPEN and CLOSE, by
 * kind (see memreg.h). Backends call these from their own threads and add
 * what only they do (the GPU lane pins and unpins).
 */
#include "memreg.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"

int fprep__memreg_map(fprep__memreg *r)
{
	int rv;

	r->message[0] = '\0';
	switch (r->kind) {
	case FPREP__MEMREG_SHM:
		rv = fprep__shm_region_map(&r->u.shm.map, r->u.shm.name,
		                           r->size, r->u.shm.peer_uid,
		                           r->u.shm.max_size, r->message,
		                           sizeof(r->message));
		if (rv == 0)
			r->base = r->u.shm.map->base;
		return rv;
	case FPREP__MEMREG_CUDA:
		snprintf(r->message, sizeof(r->message),
		         "CUDA regions need the GPU backend; this daemon runs "
		         "without a GPU (cpu backend)");
		return FPREP_EUNSUPPORTED;
	default:
		snprintf(r->message, sizeof(r->message),
		         "region kind %d is not supported by this backend",
		         r->kind);
		return FPREP_EUNSUPPORTED;
	}
}

void fprep__memreg_unmap(fprep__memreg *r)
{
	switch (r->kind) {
	case FPREP__MEMREG_SHM:
		fprep__shm_region_unmap(r->u.shm.map);
		r->u.shm.map = NULL;
		break;
	case FPREP__MEMREG_CUDA:
		if (r->u.cuda.opened != NULL)
			fprep__log(FPREP_LOG_WARNING,
			           "CUDA region %u left open at exit", r->id);
		r->u.cuda.opened = NULL;
		break;
	default:
		break;
	}
	r->base = NULL;
}

int fprep__memreg_broken(const fprep__memreg *r)
{
	return r->kind == FPREP__MEMREG_SHM && r->u.shm.map != NULL &&
	       atomic_load_explicit(&r->u.shm.map->broken,
	                            memory_order_acquire) != 0;
}

int fprep__memreg_span(const fprep__memreg *r, uint64_t offset, uint64_t len,
                       const char *field, char *msg, size_t msg_size)
{
	uint64_t end;

	if (__builtin_add_overflow(offset, len, &end) || end > r->size) {
		snprintf(msg, msg_size,
		         "%s: offset %llu + length %llu exceeds region %u size "
		         "%llu",
		         field, (unsigned long long)offset,
		         (unsigned long long)len, r->id,
		         (unsigned long long)r->size);
		return FPREP_EINVAL;
	}
	return 0;
}

void fprep__memreg_describe(const fprep__memreg *r, char *buf, size_t size)
{
	if (r->kind == FPREP__MEMREG_CUDA)
		snprintf(buf, size, "cuda +%" PRIu64, r->u.cuda.offset);
	else
		snprintf(buf, size, "%s", r->u.shm.name);
}
