/*
 * ingress.h: frameprepd's nng side: one cooked REP socket, its listeners,
 * and the receive-size bound. Requests are received and answered on nng
 * contexts that the server opens on the socket.
 */
#ifndef FPREP_SERVICE_INGRESS_H
#define FPREP_SERVICE_INGRESS_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdint.h>

#include "config.h"

/* fprep__pipe_cb: told that connection pipe_id closed. Runs on one of
 * nng's threads with the ingress lock held: it may only queue work for the
 * loop, and must not touch the socket. */
typedef void (*fprep__pipe_cb)(uint32_t pipe_id, void *data);

/* fprep__peer: a connected peer, from pipe events. */
typedef struct fprep__peer {
	nng_pipe pipe;
	uint64_t pid;      /* ipc peer's process, 0: unknown (tcp) */
	uint64_t uid;      /* ipc peer's user */
	uint64_t requests; /* complete requests received from it */
} fprep__peer;

/* fprep__ingress: the socket and its listeners. Embedded; open/close. */
typedef struct fprep__ingress {
	const fprep__config *cfg;
	nng_socket sock;
	nng_listener listeners[FPREP__MAX_LISTEN]; /* one per cfg->listen */
	unsigned nlisteners;
	int is_open;
	pthread_mutex_t lock; /* guards the peer list (nng's threads add) */
	fprep__peer *peers;   /* connected peers */
	size_t npeers;
	size_t cap;
	int closing;             /* close_pipes ran: closes are not logged */
	int nofiles;             /* "out of file descriptors" logged */
	fprep__pipe_cb on_close; /* NULL: nobody to tell */
	void *on_close_data;
} fprep__ingress;

/* fprep__ingress_open opens the REP socket with NNG_OPT_RECVMAXSZ =
 * max_frame_bytes + FPREP_REQUEST_HEADER_SIZE and starts a listener on each
 * of cfg's URLs (ipc socket files get cfg->socket_mode). A stale ipc socket
 * file is removed; a path on which another process listens is refused, and
 * so is one that belongs to another user and cannot be replaced (the log
 * names its owner). cfg must outlive the ingress. Returns 0, or
 * FPREP_ETRANSPORT (FPREP_EBUSY when another process listens, FPREP_EPERM
 * for another user's path) with the reason logged; on error nothing is
 * left open. */
int fprep__ingress_open(fprep__ingress *in, const fprep__config *cfg);

/* fprep__ingress_on_close sets (or, with NULL, clears) the callback told
 * of each closed connection. Any thread. */
void fprep__ingress_on_close(fprep__ingress *in, fprep__pipe_cb cb, void *data);

/* fprep__ingress_pipes returns the number of peers connected now. Any
 * thread. */
int fprep__ingress_pipes(fprep__ingress *in);

/* fprep__ingress_request counts a complete request received on pipe (a
 * peer that closes before sending one is logged with the receive limit).
 * Any thread but nng's callbacks. */
void fprep__ingress_request(fprep__ingress *in, nng_pipe pipe);

/* fprep__ingress_tick looks whether the process can open a descriptor:
 * when it cannot (EMFILE, ENFILE), nng cannot accept connections either
 * (it retries every 100 ms), which is logged once, and again once
 * descriptors are available. Loop thread, about once a second. */
void fprep__ingress_tick(fprep__ingress *in);

/* fprep__ingress_close_pipes closes every connection, before the socket
 * itself is closed. Not from an nng callback. */
void fprep__ingress_close_pipes(fprep__ingress *in);

/* fprep__ingress_close closes the socket: its listeners, pipes and
 * contexts; pending operations complete with NNG_ECLOSED, and no pipe
 * callback runs once it returned. Idempotent. */
void fprep__ingress_close(fprep__ingress *in);

#endif /* FPREP_SERVICE_INGRESS_H */
