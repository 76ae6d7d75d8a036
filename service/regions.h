/*
 * regions.h: the daemon's table of client shared-memory regions (see
 * src/backend/shm_region.h for one region). The loop thread owns the table.
 *
 * A region is registered by one connection (nng pipe) and only that
 * connection's requests may name it. It leaves the table on UNREGISTER,
 * when its connection closes, or at shutdown; it is unpinned and unmapped
 * once no request in flight uses it any more.
 */
#ifndef FPREP_SERVICE_REGIONS_H
#define FPREP_SERVICE_REGIONS_H

#include <stdint.h>

#include "backend.h"
#include "shm_region.h"

/* fprep__regions: the table and its limits. Embedded; init/fini. */
typedef struct fprep__regions {
	fprep__shm_region *head;     /* registered, usable regions */
	fprep__shm_region *closing;  /* out of the table, still in use */
	fprep__backend *backend; /* for region_remove */
	uint32_t next_id;
	unsigned max_per_pipe;
	uint64_t max_bytes; /* all regions, reserved or mapped */
	uint64_t bytes;     /* reserved or mapped now */
} fprep__regions;

/* fprep__regions_init sets up an empty table. */
void fprep__regions_init(fprep__regions *t, fprep__backend *backend,
                         unsigned max_per_pipe, uint64_t max_bytes);

/* fprep__regions_reserve checks a registration of size bytes by pipe
 * against the limits and reserves the bytes. Returns 0, or FPREP_ELIMIT
 * with a sentence in msg. */
int fprep__regions_reserve(fprep__regions *t, uint32_t pipe, uint64_t size,
                           char *msg, size_t msg_size);

/* fprep__regions_unreserve gives back bytes reserved for a registration
 * that failed. */
void fprep__regions_unreserve(fprep__regions *t, uint64_t size);

/* fprep__regions_add enters a mapped region for pipe and gives it its id. */
void fprep__regions_add(fprep__regions *t, fprep__shm_region *r, uint32_t pipe);

/* fprep__regions_find returns pipe's region id, or NULL (another pipe's
 * region, an unknown id, or a region closing or broken). */
fprep__shm_region *fprep__regions_find(fprep__regions *t, uint32_t id,
                                   uint32_t pipe);

/* fprep__regions_remove takes region id of pipe out of the table (release
 * follows when its last user is done). Returns 0 or FPREP_EREGION. */
int fprep__regions_remove(fprep__regions *t, uint32_t id, uint32_t pipe);

/* fprep__regions_remove_pipe takes every region of pipe out of the table;
 * returns how many. */
unsigned fprep__regions_remove_pipe(fprep__regions *t, uint32_t pipe);

/* fprep__regions_use and _unuse count the requests in flight on r; the
 * last _unuse of a removed region releases it. */
void fprep__regions_use(fprep__shm_region *r);
void fprep__regions_unuse(fprep__regions *t, fprep__shm_region *r);

/* fprep__regions_count returns the regions in the table and the mapped
 * bytes. */
unsigned fprep__regions_count(const fprep__regions *t, uint64_t *bytes);

/* fprep__regions_fini releases every region. No request may use any;
 * backend is the one the regions were added to, or NULL once it is closed
 * (the mappings are then only unmapped: the process is ending). */
void fprep__regions_fini(fprep__regions *t, fprep__backend *backend);

#endif /* FPREP_SERVICE_REGIONS_H */
