/*
 * client_internal.h: what other modules of libframeprep need from a client
 * beyond the public API (internal).
 */
#ifndef FPREP_CLIENT_INTERNAL_H
#define FPREP_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"

/* fprep__client_peer_uid stores in *uid the user id the daemon runs as, as
 * the kernel reported it when the connection was made (SO_PEERCRED through
 * NNG_OPT_IPC_PEER_UID). Returns 0, or FPREP_EUNSUPPORTED while no ipc://
 * connection has been made (tcp:// has no peer credentials). Any thread. */
int fprep__client_peer_uid(fprep_client *c, uint64_t *uid);

/* fprep__client_trusts says whether uid may own the daemon's socket (and
 * so be given access to this client's shared memory): this user, root,
 * the service account, or the user the client was opened trusting. Any
 * thread. */
int fprep__client_trusts(const fprep_client *c, uint64_t uid);

/* fprep__client_set_error records text as the client's last error (what
 * fprep_client_last_error returns) and returns err. */
int fprep__client_set_error(fprep_client *c, int err, const char *text);

/* fprep__client_check_shm returns 0 when c may use regions (shared memory
 * or CUDA), or FPREP_EUNSUPPORTED, with the reason for
 * fprep_client_last_error, when it dials several daemons: a region is
 * registered with one daemon, and the requests are spread over all. */
int fprep__client_check_shm(fprep_client *c);

/* fprep__client_add_shm records a shared-memory region that c registered
 * (id, its mapping base and size), so that a request asking for its reply
 * in that region (fprep_request.shm_reply) finds where to wait. Returns 0
 * or FPREP_ENOMEM. fprep__client_remove_shm forgets it. Any thread. */
int fprep__client_add_shm(fprep_client *c, uint32_t id, void *base,
                          size_t size);
void fprep__client_remove_shm(fprep_client *c, uint32_t id);

#endif /* FPREP_CLIENT_INTERNAL_H */
