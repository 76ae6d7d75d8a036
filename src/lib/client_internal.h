/*
 * client_internal.h: what other modules of libframeprep need from a client
 * beyond the public API (internal).
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
 * fprep_client_last_error returns) and returns err. */
int fprep__client_set_error(fprep_client *c, int err, const char *text);

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

/* fprep__client_call sends req, a staged inline frame (its frame and
 * tensor in the stage), and stores the checked reply in *res, waiting for
 * it in shared memory with req->shm_reply: fprep_client_request without
 * the inline frame. It goes through the client's doorbell when its entry
 * is free; unless the program turned doorbells off, the first such call
 * on a connection sets the doorbell up (REGISTER and DOORBELL, while
 * calls on other threads go on through nng), after dropping one of an
 * earlier connection (the daemon restarted) without an UNREGISTER. A
 * daemon that refuses leaves the client on nng until its next
 * connection, and the call goes on. Any thread. */
int fprep__client_call(fprep_client *c, fprep_request *req, fprep_result *res);

/* fprep__client_exchange sends msg, a whole request of kind kind (header
 * and payload; taken, also on failure), with the next request id written
 * into its header, through nng within the client's timeout, and stores
 * the reply in *res (also an error reply: the daemon's status is in
 * res->header.status and its sentence the last error). Returns 0 or the
 * transport's error. Any thread. */
int fprep__client_exchange(fprep_client *c, nng_msg *msg, uint16_t kind,
                           fprep_result *res);

/* fprep__region_open is fprep_region_open without making room: the
 * client's stages are left as they are. */
int fprep__region_open(fprep_region **rp, fprep_client *client, size_t size);

/* fprep__client_shed_stages closes the client's stages that no result
 * or call holds, so the daemon's limits on regions leave room for the
 * caller's own; returns how many. Any thread. */
unsigned fprep__client_shed_stages(fprep_client *c);

/* fprep__region_unmap unmaps a shared-memory region and frees r without
 * telling the daemon (its client is closed: the connection's end dropped
 * the daemon's side). */
void fprep__region_unmap(fprep_region *r);

/* Stages (client_stage.c): the shared-memory regions through which
 * fprep_client_request sends an inline frame on an ipc:// client. */
#define FPREP__STAGES_MAX 4

/* What fprep__stage_call returns when it sent nothing: send inline. */
#define FPREP__STAGE_UNUSED (-1)

/* The low bit of fprep_result.priv marks a result that views a stage (a
 * struct fprep__stage, 8-aligned like an nng_msg, which is the other). */
#define FPREP__RESULT_STAGED ((uintptr_t)1)

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

/* fprep__stages_init makes pool empty; fprep__stages_destroy frees what
 * fprep__stages_init made (after fprep__stages_fini). */
void fprep__stages_init(struct fprep__stages *pool);
void fprep__stages_destroy(struct fprep__stages *pool);

/* fprep__stage_call sends req, an inline FRAME or ECHO with its frame at
 * payload, through a stage of pool and stores the reply in *res as
 * fprep_client_request would (the tensor, payload_size bytes, viewed in
 * the stage, which the result holds until fprep_result_fini). Returns
 * fprep_client_request's errors, or FPREP__STAGE_UNUSED (nothing sent)
 * when req is of another kind or no stage could be had. Any thread: each
 * call takes a stage of its own. */
int fprep__stage_call(fprep_client *c, struct fprep__stages *pool,
                      fprep_request *req, const void *payload,
                      fprep_result *res);

/* fprep__stage_release drops a result's hold on its stage (priv as the
 * result holds it), freeing the stage when its client gave it up. Any
 * thread. */
void fprep__stage_release(void *priv);

/* fprep__stages_shed closes the stages of pool that no result or call
 * holds; returns how many. Any thread. */
unsigned fprep__stages_shed(struct fprep__stages *pool);

/* fprep__stages_fini drops the client's hold on every stage of pool:
 * the free ones are closed, the held ones go with their results. */
void fprep__stages_fini(struct fprep__stages *pool);

#endif /* FPREP_CLIENT_INTERNAL_H */
