/*
 * shm_region.h: client shared-memory regions as the daemon sees them.
 *
 * A client creates a POSIX shared-memory object, writes frames into it and
 * asks the daemon to REGISTER it. The daemon maps it once (after checking
 * the name, that it is a regular file owned by the peer's UID, and its size),
 * and from then on a FRAME request names (region, offset, length) instead of
 * carrying bytes. A region belongs to the connection (nng pipe) that
 * registered it.
 *
 * A client can shrink the object under the daemon's feet (ftruncate); the
 * next access to the vanished pages would raise SIGBUS. The SIGBUS guard
 * (fprep__shm_guard_install) knows every mapped region: a fault inside one,
 * on any thread, replaces the mapping with anonymous zero pages (as
 * libwayland does for wl_shm pools), sets the region's broken flag and lets
 * the access finish. Whoever answers a request that used the region checks
 * the flag afterwards and replies FPREP_EREGION instead; the daemon keeps
 * running.
 */
#ifndef FPREP_SHM_REGION_H
#define FPREP_SHM_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "frameprep/protocol.h"

/* Regions mapped at once in the whole daemon (the guard's table). */
#define FPREP__REGIONS_MAX 4096

typedef struct fprep__shm_region fprep__shm_region;

/* fprep__shm_region: one mapping; the registered region that holds it is
 * an fprep__memreg (memreg.h). */
struct fprep__shm_region {
	char name[FPREP_REGION_NAME_MAX + 1];
	uint8_t *base; /* mapping, size bytes, shared read/write */
	uint64_t size;
	/* Set to 1 by the SIGBUS guard (a signal handler, on whichever
	 * thread faulted: a release store after the mapping was replaced),
	 * read by any thread with an acquire load (fprep__memreg_broken). An
	 * atomic that is always lock-free, so the handler may store it. */
	atomic_int broken;
};

_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
               "the SIGBUS guard's flag must be a lock-free atomic");

/* fprep__shm_region_name_check returns 0 when name (len bytes, not
 * NUL-terminated) is a valid POSIX shared-memory name for frameprep: a '/'
 * then 1..FPREP_REGION_NAME_MAX-1 characters from [A-Za-z0-9._-], not "."
 * or ".."; else FPREP_EINVAL with a sentence in msg. */
int fprep__shm_region_name_check(const char *name, size_t len, char *msg,
                                 size_t msg_size);

/* fprep__shm_region_map opens and maps the shared-memory object name for a peer
 * with uid peer_uid: O_RDWR | O_NOFOLLOW, must be a regular file owned by
 * peer_uid, at least size bytes, size in [1, max_size]. On success stores a
 * new region, known to the SIGBUS guard, in *rp;
 * FPREP_ELIMIT also when FPREP__REGIONS_MAX regions are mapped. Returns 0, or
 * FPREP_EINVAL, FPREP_ELIMIT, FPREP_EPERM, FPREP_EREGION (cannot open/map;
 * errno text in msg), FPREP_ENOMEM. Blocking system calls: call off the loop
 * thread or accept a short open+mmap. */
int fprep__shm_region_map(fprep__shm_region **rp, const char *name,
                          uint64_t size, uint64_t peer_uid, uint64_t max_size,
                          char *msg, size_t msg_size);

/* fprep__shm_region_unmap unmaps and frees r. NULL is ignored. */
void fprep__shm_region_unmap(fprep__shm_region *r);

/* fprep__shm_guard_install installs the process-wide SIGBUS handler once.
 * Returns 0 or FPREP_EINTERNAL. */
int fprep__shm_guard_install(void);

#endif /* FPREP_SHM_REGION_H */
