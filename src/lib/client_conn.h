/*
 * client_conn.h: a client's connection, shared by the files of the client
 * (internal; nng's types, so not for the Python extension).
 *
 * The client is layered, each file calling only the ones below it:
 *
 *   client.c          the public calls: the route (fprep__route_pick) and
 *                     the connection's set-up (limits, doorbell)
 *   client_stage.c    carriers "stage" and "cuda": inline frames staged
 *                     through the client's shared memory
 *   client_region.c   regions (shared memory, CUDA) and their REGISTERs
 *   client_doorbell.c carrier "doorbell": requests posted in shared memory
 *   client_nng.c      carrier "nng": the call slots, the replies, the
 *                     asynchronous API
 *   client_conn.c     the socket, its dial and trust, the errors
 *
 * struct fprep_client is here so that each layer reads the fields it
 * owns; who writes each field is said beside it.
 */
#ifndef FPREP_CLIENT_CONN_H
#define FPREP_CLIENT_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <nng/nng.h>

#include "client_internal.h"
#include "frameprep/frameprep.h"

/* The doorbell's mode: set up by the first staged call (the default),
 * set up by fprep_client_doorbell(client, 1), or off. */
enum { FPREP__DB_AUTO, FPREP__DB_ON, FPREP__DB_OFF };

struct fprep__client_slot; /* client_nng.c */
struct fprep__client_shm;  /* client_nng.c */

/* fprep__client_trust: the users whose ipc:// socket (file and peer) a
 * client dials besides its own user and root: the service account, when
 * it exists, and the one the caller named (fprep_client_open_trusting). */
struct fprep__client_trust {
	uid_t service;
	int has_service;
	uid_t named;
	int has_named;
};

struct fprep_client {
	nng_socket sock;
	unsigned fork_gen;        /* client_fork_gen when it was opened */
	int timeout_ms;           /* per request, send plus reply */
	uint64_t serial;          /* this client's, for client_last */
	_Atomic uint64_t next_id; /* the next request id */
	_Atomic unsigned refs;    /* 1 until closed, + 1 per pending */

	/* The blocking calls' slots (client_nng.c): nslots made, the free
	 * ones listed. */
	pthread_mutex_t slot_mtx;
	pthread_cond_t slot_cv;
	struct fprep__client_slot *slots[FPREP_CLIENT_MAX_CALLS];
	unsigned nslots;
	struct fprep__client_slot *free_slots;

	/* The connection's set-up (client.c): the daemon's limits. */
	pthread_mutex_t limits_mtx;  /* asking for the limits */
	_Atomic int limits_state;    /* CLIENT_LIMITS_* (client.c) */
	_Atomic uint64_t limits_gen; /* the connection they were asked on */
	fprep_limits limits; /* the daemon's, when CLIENT_LIMITS_KNOWN */
	/* The connection (client_conn.c: set at open, and by the pipe
	 * callbacks on nng's threads). */
	struct fprep__client_trust trust; /* who may own the daemon's socket */
	unsigned daemons;                 /* URLs dialled */
	_Atomic uint64_t
	        peer_uid; /* the daemon's uid + 1 (ipc://), 0 unknown */
	_Atomic uint64_t conn_gen;  /* connections made so far */
	_Atomic uint64_t conn_lost; /* connections lost so far */

	/* The reply in shared memory (protocol.h; client_nng.c): the
	 * regions this client registered. */
	pthread_mutex_t shm_mtx;
	struct fprep__client_shm *shm; /* nshm entries, under shm_mtx */
	unsigned nshm;
	_Atomic unsigned spin_us; /* poll the reply this long, then sleep */

	/* The doorbell (fprep_client_doorbell): its region and its area, one
	 * entry, set up and dropped by client.c, used by the doorbell carrier
	 * (client_doorbell.c) for one blocking call at a time (db_busy); the
	 * others go through nng. db_area NULL: no doorbell, or given up. It is
	 * set up and dropped under db_mtx, and db_region, db_area and db_gen
	 * change only while db_busy is held too, so a call that holds
	 * db_busy sees them stay. db_mode: FPREP__DB_AUTO (set up by the
	 * first staged call), ON or OFF; db_tried: 1 + the connection on
	 * which the last set-up was tried (0: none), not tried again on it. */
	pthread_mutex_t db_mtx;
	fprep_region *db_region;
	_Atomic(uint8_t *) db_area;
	_Atomic uint64_t db_gen;  /* the connection it was registered on */
	_Atomic uint64_t db_lost; /* conn_lost then: used while unchanged */
	_Atomic uint64_t db_tried;
	_Atomic int db_mode;
	atomic_flag db_busy;

	/* Inline frames staged through shared memory (client_stage.c; made
	 * and ended by client.c's open and close). */
	struct fprep__stages stages;
	/* fprep__client_make_room's work (client.c), set at open. */
	unsigned (*make_room)(fprep_client *c);
	_Atomic int stage_off; /* fprep_client_set_staging(client, 0) */
};

/* fprep__client_open makes c's socket and dials url (client_conn.c): what
 * fprep_client_open_trusting does below the carriers. */
int fprep__client_open(fprep_client **clientp, const char *url, int timeout_ms,
                       const char *trust_owner);

/* fprep__client_make_room closes the client's own regions that nothing
 * holds (its free stages, the doorbell it set up of itself) so that the
 * daemon's limits on regions leave room for the caller's; returns how
 * many. What it does is client.c's (make_room, set when the client is
 * opened), so that a region opened below the route can ask for it. */
unsigned fprep__client_make_room(fprep_client *c);

/* fprep__client_unref drops a hold on c (the client's own, or a pending
 * request's), freeing it with the last. */
void fprep__client_unref(fprep_client *c);

/* fprep__client_nng_err translates an nng error into enum fprep_err. */
int fprep__client_nng_err(int rv);

/* fprep__client_cond_wait waits on cv (mtx held) until deadline (nng's
 * clock); returns 0 when the deadline passed. */
int fprep__client_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mtx,
                            nng_time deadline);

/* The nng carrier's helpers (client_nng.c), which the doorbell carrier
 * and the public calls share. */

/* fprep__client_outer_begin starts the calling thread's outer call on c:
 * the requests it makes on the way (the limits' INFO, a stage's
 * REGISTER, the request itself) share its deadline. Returns what
 * fprep__client_outer_end takes. */
int fprep__client_outer_begin(fprep_client *c);
void fprep__client_outer_end(int outer);

/* fprep__client_deadline is when a call on c that starts now must end:
 * the client's timeout from now, or the outer call's deadline.
 * fprep__client_left is what is left until deadline (at least 1 ms). */
nng_time fprep__client_deadline(const fprep_client *c);
nng_duration fprep__client_left(nng_time deadline);

/* fprep__client_request_id gives req the protocol's version and the
 * client's next request id. */
void fprep__client_request_id(fprep_client *c, fprep_request *req);

/* fprep__client_message builds a request message: head, an encoded
 * request header, plus payload_size bytes of payload. */
int fprep__client_message(fprep_client *c, const uint8_t *head,
                          const void *payload, size_t payload_size,
                          nng_msg **msgp);

/* fprep__client_reply_area finds where the daemon writes the reply of
 * req, which asks for it in its output region (shm_reply); NULL after
 * recording why (FPREP_EINVAL). */
uint8_t *fprep__client_reply_area(fprep_client *c, const fprep_request *req);

/* fprep__client_exchange sends msg (taking it) on a call slot of its own
 * and stores the checked reply to the request id of kind kind in *res,
 * waiting for it in shared memory at area when area is not NULL. */
int fprep__client_exchange(fprep_client *c, nng_msg *msg, uint8_t *area,
                           uint64_t id, uint16_t kind, nng_time deadline,
                           fprep_result *res);

/* fprep__client_check_ids checks that h answers the request id of kind
 * kind: 0, or FPREP_EMISMATCH, recorded. fprep__client_note_status makes
 * the daemon's error in h, if any, the client's last error text. */
int fprep__client_check_ids(fprep_client *c, uint64_t id, uint16_t kind,
                            const fprep_reply_header *h);
void fprep__client_note_status(fprep_client *c, const fprep_reply_header *h);

/* fprep__client_submit is fprep_client_submit of a checked request with
 * size bytes of inline frame at payload. */
int fprep__client_submit(fprep_client *client, fprep_request *req,
                         const void *payload, size_t size, fprep_done_fn cb,
                         void *arg, fprep_pending **pp);

/* fprep__client_submit_msg sends msg (taken, also on failure), a whole
 * request whose id and kind are id and kind, on a context of its own
 * without waiting (fprep_client_submit's rules from there on: cb, arg,
 * *pp, fprep_pending_wait). Returns 0 or a recorded error. */
int fprep__client_submit_msg(fprep_client *client, nng_msg *msg, uint64_t id,
                             uint16_t kind, fprep_done_fn cb, void *arg,
                             fprep_pending **pp);

/* fprep__client_slots_fini stops c's call slots, closes its socket and
 * frees the slots (fprep_client_close, after the carriers above). */
void fprep__client_slots_fini(fprep_client *c);

/* fprep__client_doorbell_hold takes the client's doorbell entry
 * (db_busy), waiting for the call that holds it (client_doorbell.c). */
void fprep__client_doorbell_hold(fprep_client *c);

#endif /* FPREP_CLIENT_CONN_H */
