/*
 * regions.c: the daemon's table of client shared-memory regions (see
 * regions.h).
 *
 * Two singly linked lists are enough: the table holds at most
 * max-regions per connection and lookups happen once per request. A
 * removed region moves to the closing list and is released when its last
 * request completes: the backend unpins and unmaps it on its own thread
 * (cudaHostUnregister takes milliseconds for a large region), so the loop
 * thread does not wait for it.
 */
#include "regions.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "metrics.h"

void fprep__regions_init(fprep__regions *t, fprep__backend *backend,
                         unsigned max_per_pipe, uint64_t max_bytes)
{
	t->head = NULL;
	t->closing = NULL;
	t->backend = backend;
	t->next_id = 1;
	t->max_per_pipe = max_per_pipe;
	t->max_bytes = max_bytes;
	t->bytes = 0;
}

int fprep__regions_reserve(fprep__regions *t, uint32_t pipe, uint64_t size,
                           char *msg, size_t msg_size)
{
	unsigned n = 0;

	for (fprep__shm_region *r = t->head; r != NULL; r = r->next)
		n += r->owner == pipe;
	if (n >= t->max_per_pipe) {
		snprintf(msg, msg_size,
		         "this connection has %u regions, the limit "
		         "max-regions",
		         n);
		return FPREP_ELIMIT;
	}
	if (size > t->max_bytes - t->bytes) {
		snprintf(msg, msg_size,
		         "region_size %" PRIu64 " + %" PRIu64
		         " bytes already mapped exceeds max-shm-bytes %" PRIu64,
		         size, t->bytes, t->max_bytes);
		return FPREP_ELIMIT;
	}
	t->bytes += size;
	return 0;
}

void fprep__regions_unreserve(fprep__regions *t, uint64_t size)
{
	t->bytes -= size;
}

/* regions_id_used tells whether a region in the table or still closing
 * has id. */
static int regions_id_used(const fprep__regions *t, uint32_t id)
{
	for (const fprep__shm_region *r = t->head; r != NULL; r = r->next)
		if (r->id == id)
			return 1;
	for (const fprep__shm_region *r = t->closing; r != NULL; r = r->next)
		if (r->id == id)
			return 1;
	return 0;
}

void fprep__regions_add(fprep__regions *t, fprep__shm_region *r, uint32_t pipe)
{
	/* After the counter wraps, skip the ids of regions still alive. */
	do {
		r->id = t->next_id++;
		if (t->next_id == 0)
			t->next_id = 1;
	} while (regions_id_used(t, r->id));
	r->owner = pipe;
	r->next = t->head;
	t->head = r;
	fprep__metrics_region(1, r->size, r->gpu_priv != NULL);
}

fprep__shm_region *fprep__regions_find(fprep__regions *t, uint32_t id,
                                   uint32_t pipe)
{
	for (fprep__shm_region *r = t->head; r != NULL; r = r->next)
		if (r->id == id)
			return r->owner == pipe && !r->broken ? r : NULL;
	return NULL;
}

/* regions_release unpins, unmaps and frees r: the backend does it (the
 * GPU's unpinning, off the loop thread), or, without one, munmap here. */
static void regions_release(fprep__regions *t, fprep__backend *backend,
                            fprep__shm_region *r)
{
	fprep__log(FPREP_LOG_INFO,
	           "region %" PRIu32 " (%s, %" PRIu64 " bytes) released", r->id,
	           r->name, r->size);
	t->bytes -= r->size;
	fprep__metrics_region(-1, r->size, r->gpu_priv != NULL);
	if (backend != NULL && backend->region_remove != NULL)
		backend->region_remove(backend, r);
	else
		fprep__shm_region_unmap(r);
}

/* regions_retire moves r (already out of the table) to the closing list,
 * or releases it at once when no request uses it. */
static void regions_retire(fprep__regions *t, fprep__shm_region *r)
{
	r->closing = 1;
	if (r->users == 0) {
		regions_release(t, t->backend, r);
		return;
	}
	r->next = t->closing;
	t->closing = r;
}

int fprep__regions_remove(fprep__regions *t, uint32_t id, uint32_t pipe)
{
	for (fprep__shm_region **pp = &t->head; *pp != NULL; pp = &(*pp)->next) {
		fprep__shm_region *r = *pp;
		if (r->id != id || r->owner != pipe)
			continue;
		*pp = r->next;
		regions_retire(t, r);
		return 0;
	}
	return FPREP_EREGION;
}

unsigned fprep__regions_remove_pipe(fprep__regions *t, uint32_t pipe)
{
	unsigned n = 0;

	for (fprep__shm_region **pp = &t->head; *pp != NULL;) {
		fprep__shm_region *r = *pp;
		if (r->owner != pipe) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		regions_retire(t, r);
		n++;
	}
	return n;
}

void fprep__regions_use(fprep__shm_region *r)
{
	r->users++;
}

void fprep__regions_unuse(fprep__regions *t, fprep__shm_region *r)
{
	if (--r->users > 0 || !r->closing)
		return;
	for (fprep__shm_region **pp = &t->closing; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	regions_release(t, t->backend, r);
}

unsigned fprep__regions_count(const fprep__regions *t, uint64_t *bytes)
{
	unsigned n = 0;

	for (const fprep__shm_region *r = t->head; r != NULL; r = r->next)
		n++;
	*bytes = t->bytes;
	return n;
}

void fprep__regions_fini(fprep__regions *t, fprep__backend *backend)
{
	fprep__shm_region *r;

	while ((r = t->head) != NULL) {
		t->head = r->next;
		regions_release(t, backend, r);
	}
	while ((r = t->closing) != NULL) {
		t->closing = r->next;
		regions_release(t, backend, r);
	}
}
