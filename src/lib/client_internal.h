/*
 * client_internal.h: what other modules of libframeprep need from a client
 * beyond the public API (internal, without nng's types): the connection's
 * facts (client_conn.c), the errors, the regions this client registered
 * (client_nng.c), the regions themselves and the stages. The layers of
 * the client and struct fprep_client are in client_conn.h.
 */
#ifndef FPREP_CLIENT_INTERNAL_H
#define FPREP_CLIENT_INTERNAL_H

#include <nng/nng.h>
#include <pthread.h>
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
 * fprep_client_last_error returns) and returns err. fprep__client_error
 * does so with a printf format (at most FPREP__CLIENT_ERROR_MAX - 1
 * bytes are kept); fprep__client_error_clear forgets the calling thread's
 * last failure on c; fprep__client_forked_error is FPREP_EFORKED with the
 * sentence that names the fix. Any thread: each keeps its own. */
#define FPREP__CLIENT_ERROR_MAX 256
int fprep__client_set_error(fprep_client *c, int err, const char *text);
int fprep__client_error(fprep_client *c, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void fprep__client_error_clear(fprep_client *c);
int fprep__client_forked_error(fprep_client *c);

/* fprep__client_forked returns 1 in a child made by fork for a client its
 * parent opened (calls on it fail with FPREP_EFORKED), else 0. */
int fprep__client_forked(const fprep_client *c);

/* fprep__client_check_shm returns 0 when c may use regions (shared memory
 * or CUDA), or FPREP_EUNSUPPORTED, with the reason for
 * fprep_client_last_error, when it dials several daemons: a region is
 * registered with one daemon, and the requests are spread over all. */
int fprep__client_check_shm(fprep_client *c);

/* fprep__client_conn_gen returns how many connections c has made: one
 * more each time it redials (a daemon restarted). A region registered on
 * an earlier connection is gone on the daemon's side, and its id may be
 * given again. Any thread. */
uint64_t fprep__client_conn_gen(fprep_client *c);

/* fprep__client_add_shm records a shared-memory region that c registered
 * (id, its mapping base and size) on connection gen (what
 * fprep__client_conn_gen said once the REGISTER's reply came: a
 * connection is counted before anything is sent on it), so that a
 * request asking for its reply in that region (fprep_request.shm_reply)
 * finds where to wait; a region of an earlier connection is not found.
 * Returns 0 or FPREP_ENOMEM. fprep__client_remove_shm forgets the region
 * id mapped at base. Any thread. */
int fprep__client_add_shm(fprep_client *c, uint32_t id, void *base, size_t size,
                          uint64_t gen);
void fprep__client_remove_shm(fprep_client *c, uint32_t id, void *base);

/* fprep__region_open is fprep_region_open without making room: the
 * client's stages are left as they are. */
int fprep__region_open(fprep_region **rp, fprep_client *client, size_t size);

/* fprep__region_unmap unmaps a shared-memory region and frees r without
 * telling the daemon (its client is closed: the connection's end dropped
 * the daemon's side). */
void fprep__region_unmap(fprep_region *r);

/* Stages (client_stage.c): the shared-memory regions through which the
 * stage and cuda carriers (carrier.h) send an inline frame on an ipc://
 * client. */
#define FPREP__STAGES_MAX 4

struct fprep__stage;

/* fprep__stages: a client's stages, and the smallest frame + tensor the
 * daemon refused to register (0: none), under mtx: a stage is taken by
 * one call at a time (and then by its result). */
struct fprep__stages {
	pthread_mutex_t mtx;
	struct fprep__stage *s[FPREP__STAGES_MAX];
	unsigned n;
	size_t refused_bytes;
	int told_refused; /* the one log line of a refused stage is written */
};

/* fprep__stages_init makes pool empty (when the client is opened);
 * fprep__stages_destroy frees what fprep__stages_init made, when the
 * client is closed (after fprep__stages_fini). */
void fprep__stages_init(struct fprep__stages *pool);
void fprep__stages_destroy(struct fprep__stages *pool);

/* fprep__stages_shed closes the stages of pool that no result or call
 * holds; returns how many. Any thread. */
unsigned fprep__stages_shed(struct fprep__stages *pool);

/* fprep__stages_fini drops the client's hold on every stage of pool:
 * the free ones are closed, the held ones go with their results. */
void fprep__stages_fini(struct fprep__stages *pool);

#endif /* FPREP_CLIENT_INTERNAL_H */
