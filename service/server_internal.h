/*
 * server_internal.h: what the files of frameprepd's event loop share: the
 * server, its slots and its connection table, and the calls between them.
 * The loop thread alone touches any of it.
 *
 *   server.c    set-up, the event dispatch, fprep__server_run
 *   slot.c      the request state machine: intake, validation, the hand-off
 *               to the backend or the regions module, completions
 *   answer.c    the end of a request: replies, error replies, the next
 *               receive
 *   conns.c     per-connection caps (requests and reply bytes in flight),
 *               closed connections
 *   shutdown.c  signals and the ordered close
 *   info.c      the INFO text and the start-up line
 *   doorbell.c  requests taken from shared memory (protocol.h, "Doorbells")
 */
#ifndef FPREP_SERVICE_SERVER_INTERNAL_H
#define FPREP_SERVICE_SERVER_INTERNAL_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "backend.h"
#include "config.h"
#include "evq.h"
#include "ingress.h"
#include "regions.h"
#include "watchdog.h"

/* Bound on each reply's send once shutdown began. */
#define FPREP__STOP_SEND_MS 2000

/* fprep__slot_state: where a slot's request is (slot.c). */
enum fprep__slot_state {
	FPREP__SLOT_IDLE,
	FPREP__SLOT_RECV,
	FPREP__SLOT_WORK,
	FPREP__SLOT_SEND,
	FPREP__SLOT_REGION /* the regions module has its (UN)REGISTER */
};

/* fprep__server_event: the kinds of the loop's events. */
enum fprep__server_event {
	FPREP__EV_AIO,         /* a slot's nng operation ended */
	FPREP__EV_DONE,        /* a slot's job ended */
	FPREP__EV_PIPE_CLOSED, /* a connection closed (conns.c) */
	FPREP__EV_REGION,      /* a region operation ended (regions.c) */
	FPREP__EV_DOORBELL     /* a client rang a doorbell (doorbell.c) */
};

typedef struct fprep__server fprep__server;
typedef struct fprep__slot fprep__slot;
typedef struct fprep__conn fprep__conn;

/* fprep__doorbell: a doorbell area the loop polls (doorbell.c). */
typedef struct fprep__doorbell {
	fprep__memreg *region; /* holds one use of it */
	uint32_t pipe;         /* the connection that set it up */
	uint8_t *area;         /* in region's mapping */
	unsigned entries;
	int waked; /* the waker covers its wake word (fprep__doorbell_waker) */
} fprep__doorbell;

/* The most wake words the doorbell waker sleeps on: futex_waitv(2)'s limit,
 * less its own word. */
#define FPREP__WAKER_WORDS 127

/* fprep__doorbell_waker: a thread that sleeps in futex_waitv(2) on the
 * wake words of the doorbells while the loop does not poll them, and
 * wakes the loop when a client rings (protocol.h, "Doorbells"). The loop
 * writes what it waits on (under mu) and bumps gen, which the thread also
 * waits on, at every change. Where the kernel has no futex_waitv, there is
 * no thread and no word is armed: clients use nng. */
typedef struct fprep__doorbell_waker {
	pthread_t thread;
	int running;                        /* the thread runs */
	pthread_mutex_t mu;                 /* words, nwords, stop */
	_Atomic uint32_t gen;               /* a private futex word */
	uint64_t words[FPREP__WAKER_WORDS]; /* armed wake words' addresses */
	unsigned nwords;                    /* 0: none armed */
	int stop;
	fprep__event ev;   /* kind FPREP__EV_DOORBELL */
	atomic_int queued; /* ev is in the loop's queue */
	uint64_t rings;    /* loop: FPREP__EV_DOORBELL events handled */
} fprep__doorbell_waker;

/* fprep__conn: what one connection (nng pipe) holds; an entry is in use
 * while held > 0, so there are never more than the slots. */
struct fprep__conn {
	uint32_t pipe;        /* nng pipe id; 0: a free entry */
	unsigned held;        /* slots holding one of its requests */
	atomic_uint inflight; /* of those, requests not refused with EBUSY and
	                         not yet answered (a direct reply counts
	                         off on the backend's thread) */
	uint64_t reply_bytes; /* tensor bytes of its replies in flight */
	int closing;          /* closed for not reading: drop its requests */
	/* Of held, requests that a backend's thread answered in their
	 * output region (shm_reply) and the loop has not settled yet: the
	 * client may already have sent its next ones. */
	atomic_uint region_answered;
};

/* fprep__slot: one nng context and the request it serves; or, in the
 * doorbell pool, a request taken from a doorbell (no context: its reply
 * goes into the entry). */
struct fprep__slot {
	fprep__event ev; /* kind: FPREP__EV_AIO or FPREP__EV_DONE */
	int aio_result;  /* nng error of the finished aio */
	fprep__server *srv;
	unsigned index;
	int state; /* enum fprep__slot_state */
	nng_ctx ctx;
	nng_aio *aio;
	nng_msg *req_msg;     /* WORK, REGION: the request (job.input in it) */
	nng_msg *rep_msg;     /* WORK: the reply; job.output points into it */
	fprep__conn *conn;    /* the requester; NULL: none yet */
	int counted;          /* counted in conn->inflight */
	int ended;            /* counted off the metrics' requests in flight
	                         (a direct reply, when it was handed over) */
	uint64_t reply_bytes; /* counted in the reply byte totals */
	uint16_t kind;        /* of the request being served, for logs */
	uint64_t request_id;
	uint64_t t_rx_ns;   /* nng's callback for the request (--trace) */
	uint64_t t_recv_ns; /* the loop took the request */
	int direct;         /* WORK: the backend's thread sent the reply itself
	                       (slot_reply_direct); the loop ends the request once
	                       that send has ended. Written before the send, read
	                       after its event or after the backend closed. */
	/* direct, and answered in the output region instead of sent
	 * (counted in its connection's region_answered). */
	int region_answered;
	int doorbell;             /* a slot of the doorbell pool */
	fprep__memreg *db_region; /* doorbell: the entry's region (in use) */
	uint8_t *db_reply;        /* doorbell: the entry's reply header */
	fprep__job job;
};

struct fprep__server {
	const fprep__config *cfg;
	fprep__backend *backend;
	const char *device;
	uv_loop_t loop;
	fprep__evq evq;
	uv_signal_t sigint;
	uv_signal_t sigterm;
	uv_timer_t drain_timer;
	uv_timer_t linger_timer;
	uint64_t linger_end_ns;
	uv_idle_t spin;         /* keeps the loop polling while it is busy */
	uint64_t spin_ns;       /* --spin-us; 0: the loop sleeps at once */
	uint64_t last_event_ns; /* the loop's last event, for the spin */
	atomic_int no_direct;   /* stopping: replies go through the loop */
	fprep__ingress ingress;
	fprep__regions regions;
	fprep__watchdog watchdog;
	fprep__slot *slots; /* nng's, then the doorbell pool */
	unsigned nslots;    /* all of them */
	unsigned nng_slots; /* the first nng_slots have an nng context */
	fprep__doorbell *doorbells; /* --max-doorbells entries */
	unsigned ndoorbells;
	int polling;                 /* the doorbells say the loop polls */
	fprep__slot **doorbell_free; /* the pool's free slots */
	unsigned ndoorbell_free;
	uint64_t doorbell_requests; /* taken from doorbells */
	fprep__doorbell_waker waker;
	unsigned nwaked;      /* doorbells the waker covers */
	unsigned active;      /* slots not IDLE */
	fprep__conn *conns;   /* nslots entries */
	uint64_t reply_bytes; /* tensor bytes of the replies in flight */
	uint64_t t_start_ns;
	uint64_t served;
	uint64_t failed;

	int stopping;    /* no new receives; new requests get stop_status */
	int forcing;     /* inside the drain deadline's handler */
	int finished;    /* the ordered close has run */
	int socket_left; /* nng_close did not return: srv is never freed */
	int exit_status;
	int stop_status; /* ESHUTDOWN, or the fatal job's status */
	char stop_message[FPREP_MESSAGE_SIZE];
};

/* slot.c */

/* fprep__slot_recv posts a receive on s. */
void fprep__slot_recv(fprep__slot *s);
/* fprep__slot_aio_cb: nng's callback for a slot's aio (nng's thread). */
void fprep__slot_aio_cb(void *arg);
/* fprep__slot_event handles the slot's event (kind AIO or DONE). */
void fprep__slot_event(fprep__slot *s);
/* fprep__slot_unuse_regions ends the job's use of its regions. */
void fprep__slot_unuse_regions(fprep__slot *s);
/* fprep__slot_take serves msg, a request taken from a doorbell, in s (a
 * free slot of the doorbell pool whose db_region and db_reply are set). */
void fprep__slot_take(fprep__slot *s, nng_msg *msg);

/* doorbell.c */

/* fprep__doorbell_set sets up, replaces or (0 entries) ends the doorbell
 * that DOORBELL request req of connection pipe describes. Returns 0, or an
 * error with a sentence in why. */
int fprep__doorbell_set(fprep__server *srv, uint32_t pipe,
                        const fprep_register_request *req, char *why,
                        size_t why_size);
/* fprep__doorbell_drop_region ends the doorbell in region id of pipe, if
 * any; fprep__doorbell_drop_pipe those of connection pipe;
 * fprep__doorbell_drop_all every one. */
void fprep__doorbell_drop_region(fprep__server *srv, uint32_t id,
                                 uint32_t pipe);
void fprep__doorbell_drop_pipe(fprep__server *srv, uint32_t pipe);
void fprep__doorbell_drop_all(fprep__server *srv);
/* fprep__doorbell_poll takes the POSTED requests of every doorbell while
 * the pool has free slots; returns how many it took. */
unsigned fprep__doorbell_poll(fprep__server *srv);
/* fprep__doorbell_set_polling writes whether the loop polls (on) into
 * every doorbell area. */
void fprep__doorbell_set_polling(fprep__server *srv, int on);
/* fprep__doorbell_slot_end returns s, whose request ended, to the pool. */
void fprep__doorbell_slot_end(fprep__slot *s);
/* fprep__doorbell_waker_start starts the waker thread (none where the
 * kernel has no futex_waitv, or with --max-doorbells 0);
 * fprep__doorbell_waker_stop stops and joins it, before the loop's queue
 * closes. Loop thread. */
void fprep__doorbell_waker_start(fprep__server *srv);
void fprep__doorbell_waker_stop(fprep__server *srv);
/* fprep__doorbell_rung handles an FPREP__EV_DOORBELL event: takes what is
 * posted, and with no spin (--spin-us 0) arms the wake words again. */
void fprep__doorbell_rung(fprep__server *srv);

/* answer.c */

/* fprep__slot_send sends msg as the reply of s's request. */
void fprep__slot_send(fprep__slot *s, nng_msg *msg);

/* fprep__slot_sent_now ends the send of s's reply at once, freeing msg:
 * the reply went into the request's output region instead (shm_reply).
 * The end comes through the event queue, as a send's would. Any thread
 * that owns s's pending reply. */
void fprep__slot_sent_now(fprep__slot *s, nng_msg *msg);
/* fprep__slot_fail answers s's request with the error status and why;
 * spare is a message the caller gives up, reused when possible. */
void fprep__slot_fail(fprep__slot *s, nng_msg *spare, int status,
                      const char *why);
/* fprep__slot_answer sends rep, built for the request kind what, or fails
 * the request when rep is NULL (out of memory). */
void fprep__slot_answer(fprep__slot *s, nng_msg *rep, const char *what);
/* fprep__slot_next ends s's request: s receives again, or rests once the
 * server is stopping. */
void fprep__slot_next(fprep__slot *s);

/* conns.c */

/* fprep__slot_admit counts a request that just arrived for its
 * connection. Returns 0, or -1 after closing a connection that does not
 * read its replies (the request is dropped). */
int fprep__slot_admit(fprep__slot *s, nng_msg *msg);
/* fprep__slot_release ends what s's request counted for its connection;
 * once per request. */
void fprep__slot_release(fprep__slot *s);
/* fprep__slot_refuse answers s's request with EBUSY and why. */
void fprep__slot_refuse(fprep__slot *s, nng_msg *msg, const char *why);
/* fprep__slot_reserve_reply counts a reply of bytes tensor bytes against
 * the reply budgets. Returns 0, or -1 after answering EBUSY. */
int fprep__slot_reserve_reply(fprep__slot *s, nng_msg *msg, uint64_t bytes);
/* fprep__server_pipe_closed: the ingress's close callback (nng thread). */
void fprep__server_pipe_closed(uint32_t pipe, void *data);
/* fprep__conn_closed handles an FPREP__EV_PIPE_CLOSED event; with
 * srv NULL it only frees it (the queue dropped it). */
void fprep__conn_closed(fprep__server *srv, fprep__event *ev);

/* shutdown.c */

/* fprep__server_stop begins the shutdown (exit_status, and the status and
 * why that new requests get). */
void fprep__server_stop(fprep__server *srv, int exit_status, int status,
                        const char *why);
/* fprep__server_finish runs the ordered close once no slot is busy. */
void fprep__server_finish(fprep__server *srv);
/* fprep__server_close_backend closes the backend once. */
void fprep__server_close_backend(fprep__server *srv, int timeout_ms);
/* fprep__server_close_handles closes the event queue and the uv handles. */
void fprep__server_close_handles(fprep__server *srv);
/* fprep__server_signal_cb: SIGINT and SIGTERM. */
void fprep__server_signal_cb(uv_signal_t *handle, int signum);

/* server.c */

/* fprep__server_notify tells systemd state (no-op without it). */
void fprep__server_notify(const char *state);

/* info.c */

/* fprep__server_info writes the INFO text into buf (size bytes). */
void fprep__server_info(fprep__server *srv, char *buf, size_t size);
/* fprep__server_log_start logs the start-up line. */
void fprep__server_log_start(fprep__server *srv);

#endif /* FPREP_SERVICE_SERVER_INTERNAL_H */
