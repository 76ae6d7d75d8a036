/*
 * daemon.h: what the files of frameprepd's event loop share: the server,
 * its slots, its connection table, its two ports and the reply sinks, and
 * the calls between the files. Each file's calls carry its name
 * (fprep__slot_* are slot.c's and slot_state.h's). The files, from the top
 * down: each calls only files below it. The two steps that files of every
 * floor take are inline, so that none calls up for them: a slot's state
 * step (fprep__slot_enter, slot_state.h) and the wish to stop
 * (fprep__shutdown_want, below). The ports hand requests up through a
 * callback (port.h).
 *
 *   server.c         set-up, the event dispatch, the spin, SIGHUP,
 *                    fprep__server_run
 *   shutdown.c       SIGINT/SIGTERM, the ordered close
 *   slot.c           the request machine: intake, validation, the hand-off
 *                    to the backend, the regions module or a stream,
 *                    completions
 *   streams.c        video streams: their table, each one's order
 *   placement.c      the regions a request's frame and tensor lie in,
 *                    found, checked and marked in use
 *   info.c           the INFO text and the start-up line
 *   answer.c         fprep__answer_reply (every reply's one owner), error
 *                    replies, the end of a request
 *   port_nng.c       the nng port: requests on the REP socket's contexts
 *   port_doorbell.c  the doorbell port: requests in shared memory
 *   waker_futex.c    the doorbells' waker thread (no_futex_waitv.c where
 *                    the system has no futex_waitv)
 *   conns.c          per-connection caps (requests, reply bytes)
 *   sink.c           fprep__sink_deliver: where every reply is written
 *   slot_state.h     a slot's states and the steps between them
 *
 * Threads. The loop thread owns everything here, except where a field says
 * otherwise; the marks are:
 *   [L]  loop thread only
 *   [I]  set before the first request, read-only after: any thread
 *   [A]  atomic: any thread
 *   [R]  the reply's owner: the loop; or, while a job is out (state WORK),
 *        the backend thread that finished it, which may answer a job that
 *        succeeded itself, through fprep__answer_reply (answer.c) like every
 *        reply, and then lets go of the slot. The loop reads these again
 *        only after the slot's next event, which orders the two; it leaves
 *        the slot in WORK until then (fprep__answer_reply asserts it).
 *   [W]  the waker thread, under waker.mu where it says so
 * FPREP__LOOP_ONLY(srv) asserts the loop thread in Debug builds.
 */
#ifndef FPREP_SERVICE_DAEMON_H
#define FPREP_SERVICE_DAEMON_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "backend.h"
#include "config.h"
#include "evq.h"
#include "fprep_assert.h"
#include "ingress.h"
#include "port.h"
#include "regions.h"
#include "streams.h"
#include "watchdog.h"

/* Bound on each reply's send once shutdown began. */
#define FPREP__STOP_SEND_MS 2000

/* fprep__slot_state: where a slot's request is. A slot goes
 *
 *   IDLE -> RECV             its port gives it a request to wait for (nng)
 *                            or took one into it (doorbells)
 *   RECV -> WORK | REGION    the request machine handed it on
 *   RECV | WORK | REGION -> SEND    the loop is delivering its reply
 *   REGION -> WORK           the regions module answered (then SEND)
 *   SEND | RECV -> RECV      the next request (nng); also from WORK when
 *                            the backend's thread delivered the reply
 *   any -> IDLE              its port let it rest
 *
 * and fprep__slot_enter asserts that no other step is taken. */
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
	FPREP__EV_SENT,        /* a slot's reply was written in memory */
	FPREP__EV_PIPE_CLOSED, /* a connection closed (conns.c) */
	FPREP__EV_REGION,      /* a region operation ended (regions.c) */
	FPREP__EV_DOORBELL     /* a client rang a doorbell (waker) */
};

typedef struct fprep__server fprep__server;
typedef struct fprep__conn fprep__conn;
typedef struct fprep__uid_held fprep__uid_held;

/* fprep__sink_kind: where a request's reply goes. */
enum fprep__sink_kind {
	FPREP__SINK_NNG,    /* sent on the slot's nng context */
	FPREP__SINK_REGION, /* header into the output region (shm_reply) */
	FPREP__SINK_ENTRY   /* header into the doorbell entry it came from */
};

/* fprep__sink: a request's reply destination, chosen once: by its port
 * when it is taken (NNG or ENTRY), and turned from NNG into REGION when
 * a FRAME asking for shm_reply is accepted (slot.c). area holds
 * FPREP_REPLY_HEADER_SIZE bytes, 8-byte aligned, inside region, which the
 * request holds a use of until it ends. [R] */
typedef struct fprep__sink {
	int kind; /* enum fprep__sink_kind */
	fprep__memreg *region;
	uint8_t *area;
} fprep__sink;

/* fprep__conn: what one connection (nng pipe) holds; an entry is in use
 * while held > 0, so there are never more than the slots. [L] but for
 * the atomics. */
struct fprep__conn {
	uint32_t pipe;        /* nng pipe id; 0: a free entry */
	unsigned held;        /* slots holding one of its requests */
	atomic_uint inflight; /* [A] of those, requests not refused with EBUSY
	                         and not yet answered (fprep__answer_reply
	                         counts off, on the thread that answers) */
	uint64_t reply_bytes; /* tensor bytes of its replies in flight */
	int closing;          /* closed for not reading: drop its requests */
	/* [A] Of held, requests answered in shared memory (a REGION or
	 * ENTRY sink: fprep__answer_reply counts them, on the thread that
	 * answers) that have not ended yet (fprep__conn_release): the client
	 * may already have sent its next ones. */
	atomic_uint region_answered;
	unsigned nng_held;    /* of held, slots of the nng port */
	fprep__uid_held *uid; /* its peer's uid's count; NULL: not known
	                         (tcp://) or not yet asked */
	int uid_asked;        /* the uid was asked of its pipe */
	uint64_t progress_ns; /* the last time one of its nng replies was
	                         handed on (or it came): a reply waiting
	                         longer with none since is not being read */
};

/* fprep__uid_held: the nng slots that the connections of one peer uid
 * hold together (conns.c, --max-inflight-per-uid); an entry is in use
 * while held > 0. [L] */
struct fprep__uid_held {
	uint64_t uid;
	unsigned held;
};

/* fprep__slot: one request in flight, in a slot of one port: the nng
 * port's slots have a context and an aio; the doorbell port's have none
 * (their request's header is copied out of the entry). */
struct fprep__slot {
	fprep__event ev;    /* [R] kind: FPREP__EV_AIO, _DONE or _SENT */
	int aio_result;     /* nng error of the finished aio */
	fprep__server *srv; /* [I] */
	fprep__port *port;  /* [I] the port the slot belongs to */
	unsigned index;     /* [I] */
	int state;          /* [L] enum fprep__slot_state (fprep__slot_enter) */
	nng_ctx ctx;        /* [I] nng port */
	nng_aio *aio;       /* [I] nng port; its operations: [R] */
	/* The last reply this slot handed to an nng pipe: the pipe, and
	 * when (fprep__now_ns), for the shutdown's linger. [L] */
	uint32_t sent_pipe;
	uint64_t sent_ns;
	/* [A] When its reply was handed to nng (sink.c), by the loop or
	 * the backend's thread; 0 again once the send has ended (nng's
	 * callback, port_nng.c), which then sets t_sent_ns; both 0 once
	 * the loop has ended the request. A reply still waiting long after
	 * waits on a peer that does not read (conns.c,
	 * fprep__conns_sweep); t_sent_ns tells that a peer read, before
	 * the loop has the event. */
	_Atomic uint64_t t_send_ns;
	_Atomic uint64_t t_sent_ns;
	/* The request, set by the port before take. [L] */
	const uint8_t *req; /* its bytes (req_len), in req_msg or req_head */
	size_t req_len;     /* its bytes */
	uint32_t pipe;      /* its connection */
	nng_msg *req_msg;   /* nng port: the message holding req, or NULL */
	uint8_t req_head[FPREP_REQUEST_HEADER_SIZE]; /* doorbell port */
	fprep__sink sink;                            /* [R] */
	nng_msg *rep_msg; /* [R] NNG sink, WORK: the reply message;
	                     job.output points into it when inline */
	uint8_t rep_head[FPREP_REPLY_HEADER_SIZE]; /* [R] other sinks */
	/* [R] The reply was handed to the sink (fprep__answer_reply, once a
	 * request: asserted), which also counted it off conn->inflight,
	 * the metrics' requests in flight and, into shared memory,
	 * conn->region_answered; back to 0 when the request ends
	 * (fprep__answer_next), which counts it served or failed by status,
	 * the reply's (enum fprep_err). */
	int delivered;
	int status;
	fprep__conn *conn;    /* [L] the requester; NULL: none yet; [R]
	                         reads it (its atomics) */
	int counted;          /* [R] counted in conn->inflight */
	uint64_t reply_bytes; /* [L] counted in the reply byte totals */
	uint16_t kind;        /* [L] of the request being served, for logs */
	uint64_t request_id;  /* [L] */
	uint64_t t_rx_ns;     /* [R] nng's callback for the request (--trace) */
	uint64_t t_recv_ns;   /* [L] the loop took the request */
	/* The settings the request runs under, copied from cfg when it is
	 * taken (send_timeout_ms) and submitted (limits), since SIGHUP may
	 * change cfg's meanwhile and the backend's threads read these
	 * (job.limits points here). [R] */
	fprep_limits limits;
	int send_timeout_ms;
	fprep__job job; /* [R] */
};

/* The most wake words the doorbell waker sleeps on: futex_waitv(2)'s limit,
 * less its own word. */
#define FPREP__WAKER_WORDS 127

/* fprep__waker: a thread that sleeps in futex_waitv(2) on the wake words
 * of the doorbells while the loop does not poll them, and wakes the loop
 * when a client rings (protocol.h, "Doorbells"). The loop writes what it
 * waits on (under mu) and bumps gen, which the thread also waits on, at
 * every change. Where the system has no futex_waitv, there is no thread
 * and no word is armed: clients use nng. */
typedef struct fprep__waker {
	pthread_t thread;
	int running;                        /* [L] the thread runs */
	pthread_mutex_t mu;                 /* words, nwords, stop */
	_Atomic uint32_t gen;               /* [A] a private futex word */
	uint64_t words[FPREP__WAKER_WORDS]; /* [W, mu] armed words' addresses */
	unsigned nwords;                    /* [W, mu] 0: none armed */
	int stop;                           /* [W, mu] */
	fprep__evq *evq;                    /* [I] where the rings go */
	fprep__event ev;                    /* kind FPREP__EV_DOORBELL */
	atomic_int queued;                  /* [A] ev is in the loop's queue */
} fprep__waker;

/* fprep__doorbell: a doorbell area the loop polls. [L] */
typedef struct fprep__doorbell {
	fprep__memreg *region; /* holds one use of it */
	uint32_t pipe;         /* the connection that set it up */
	uint8_t *area;         /* in region's mapping */
	unsigned entries;
	int waked;               /* the waker covers its wake word */
	unsigned next;           /* the entry its next poll looks at first */
	int rang;                /* its word was RUNG at the last ring */
	unsigned idle_rings;     /* rings without a post since idle_since */
	uint64_t idle_since_ns;  /* start of the window of idle_rings */
	int muted;               /* rung too often for nothing: not armed */
	uint64_t muted_until_ns; /* ... until then */
} fprep__doorbell;

/* fprep__doorbells: the doorbell port (port_doorbell.c). [L] */
typedef struct fprep__doorbells {
	fprep__port port;
	fprep__server *srv;     /* [I] */
	fprep__doorbell *bells; /* --max-doorbells entries */
	unsigned nbells;
	int polling;        /* the areas say the loop polls */
	int closed;         /* no new doorbells, nothing taken */
	fprep__slot *slots; /* its pool */
	unsigned nslots;
	fprep__slot **free; /* the pool's free slots */
	unsigned nfree;
	int deferred;          /* entries left POSTED: poll at an end */
	uint64_t requests;     /* taken from doorbells */
	uint64_t rings;        /* FPREP__EV_DOORBELL events handled */
	uint64_t mutes;        /* doorbells muted for idle rings */
	uv_timer_t mute_timer; /* ends the mutes */
	int timer_open;        /* mute_timer is initialised */
	unsigned nwaked;       /* doorbells the waker covers */
	fprep__waker waker;
} fprep__doorbells;

/* fprep__port_nng: the nng port (port_nng.c). [L] */
typedef struct fprep__port_nng {
	fprep__port port;
	fprep__server *srv; /* [I] */
	fprep__slot *slots; /* one per context: --max-inflight */
	unsigned nslots;
	int closed; /* no new receives */
} fprep__port_nng;

struct fprep__server {
	/* [I]; its LIVE settings (config.c) [L]: SIGHUP writes them, on
	 * the loop (server.c). */
	fprep__config *cfg;
	fprep__backend *backend; /* [L]; NULL once closed */
	const char *device;      /* [I] */
	pthread_t loop_thread;   /* [I] */
	uv_loop_t loop;
	fprep__evq evq; /* [A] push; the rest [L] */
	uv_signal_t sigint;
	uv_signal_t sigterm;
	uv_signal_t sighup; /* reload the settings */
	uv_timer_t drain_timer;
	uv_timer_t linger_timer;
	uv_timer_t heartbeat_timer; /* /healthz and WatchdogSec keep-alives */
	int sd_watchdog;            /* systemd asks for keep-alives */
	uint64_t stop_ns; /* when the shutdown began (fprep__now_ns) */
	uint64_t linger_end_ns;
	uv_idle_t spin;         /* keeps the loop polling while it is busy */
	uint64_t spin_ns;       /* [L] --spin-us; 0: the loop sleeps at once */
	uint64_t last_event_ns; /* the loop's last event, for the spin */
	int spinning;           /* the ports were told the loop polls */
	unsigned working;       /* slots in WORK: jobs the backend holds */
	unsigned busy_bound;    /* [I] working at which the backend has a
	                           backlog and the loop stops its spin: its
	                           capacity plus one a lane; 0: never */
	unsigned busy_resume;   /* [I] working below which an event starts
	                           the spin again: the backend's capacity */
	uint64_t spin_turns;    /* turns of the spin, */
	uint64_t spin_empty;    /* of which found nothing */
	uint64_t spin_backlogs; /* spins stopped for a backlog */
	atomic_int no_direct;   /* [A] stopping: replies go through the loop */
	fprep__ingress ingress;
	fprep__regions regions;
	fprep__streams streams; /* video streams (streams.c) */
	fprep__watchdog watchdog;
	fprep__port_nng nng;        /* the nng port */
	fprep__doorbells doorbells; /* the doorbell port */
	fprep__port *ports[2];      /* [I] both, for the spin */
	unsigned nports;            /* [I] */
	fprep__slot *slots;         /* [I] the nng port's, then the pool's */
	unsigned nslots;            /* [I] all of them */
	unsigned active;            /* slots not IDLE */
	fprep__conn *conns;         /* nconns entries */
	unsigned nconns;            /* [I] nslots */
	fprep__uid_held *uids;      /* nconns entries */
	unsigned nng_held;          /* nng slots holding a request */
	uv_timer_t sweep_timer; /* fprep__conns_sweep while slots are short */
	int sweeping;           /* sweep_timer runs */
	uint64_t stall_closes;  /* connections closed for not reading */
	int trim_wanted;        /* replies were made since the last
	                           malloc_trim (server.c) */
	uint64_t reply_bytes;   /* tensor bytes of the replies in flight */
	uint64_t t_start_ns;    /* [I] */
	uint64_t served;        /* requests ended with an OK reply */
	uint64_t failed;        /* ... with an error reply, or dropped for
	                           want of memory for one */

	int stop_wanted; /* fprep__shutdown_want ran: stop after the event */
	int stopping;    /* no new work; requests that arrive get stop_status */
	int forcing;     /* inside the drain deadline's handler */
	int finished;    /* the ordered close has run */
	int exit_status;
	int stop_status; /* ESHUTDOWN, or the fatal job's status */
	char stop_message[FPREP_MESSAGE_SIZE];
};

/* FPREP__LOOP_ONLY asserts that the caller runs on srv's loop thread. */
#define FPREP__LOOP_ONLY(srv)                                                  \
	FPREP__ASSERT(pthread_equal(pthread_self(), (srv)->loop_thread))

/* slot.c */

/* (fprep__slot_enter, the steps between states: slot_state.h.) */
/* fprep__slot_take: the ports' take callback (port.h): serves the request
 * the port took into s (state RECV, request and sink set). */
void fprep__slot_take(fprep__slot *s);
/* Where a request's frame and tensor lie (placement.c). Loop thread. */
/* fprep__place_region finds the region a request of s names for its input
 * or output (field "in" or "out") at location loc (SHM or CUDA): one of
 * this connection's, of that kind, with [offset, offset + len) inside it.
 * Returns it, or NULL after answering s with the error (FPREP_EREGION,
 * FPREP_EINVAL). */
fprep__memreg *fprep__place_region(fprep__slot *s, int loc, uint32_t id,
                                   uint64_t offset, uint64_t len,
                                   const char *field);
/* fprep__place_output: fprep__place_region for an output (a FRAME's, or a
 * stream packet's tensors), also clear of the region's doorbell areas,
 * and ordered after the replies written there before. */
fprep__memreg *fprep__place_output(fprep__slot *s, int loc, uint32_t id,
                                   uint64_t offset, uint64_t len);
/* fprep__place_job_output points s's job at offset of out (job->output,
 * output_pinned, output_device, out_region) and keeps out in use until
 * the request ends (fprep__answer_next). */
void fprep__place_job_output(fprep__slot *s, fprep__memreg *out,
                             uint64_t offset);
/* fprep__slot_event handles s's event (kind AIO, DONE or SENT) in any
 * state but RECV of an nng slot (port_nng.c has those). */
void fprep__slot_event(fprep__slot *s);

/* answer.c */

/* fprep__answer_fail answers s's request with the error status and why. */
void fprep__answer_fail(fprep__slot *s, int status, const char *why);
/* fprep__answer_ok answers s's request with OK: region_id (REGISTER,
 * DOORBELL; else 0), message and, through the NNG sink, text as payload
 * (INFO; NULL: none). Fails it when out of memory. */
void fprep__answer_ok(fprep__slot *s, uint32_t region_id, const char *message,
                      const char *text);
/* fprep__answer_reply is the one end of every reply, as nni_aio_finish is
 * of every nng aio: it encodes the header h into msg (NNG sink: the whole
 * reply, header space first, which nng then owns) or rep_head (the other
 * sinks: msg NULL), counts s's request off conn->inflight (when counted),
 * counts a reply into shared memory in conn->region_answered, counts it
 * in the metrics, keeps its status for the served and failed counts
 * (taken when the request ends), and delivers it (fprep__sink_deliver),
 * once a request (asserted). On the loop thread the
 * slot enters SEND and a stopping server's sends are shortened to
 * FPREP__STOP_SEND_MS; on a backend thread (the one that finished s's job,
 * which succeeded: asserted) the slot stays in WORK and the caller lets go
 * of it. Either way the loop ends the request at the delivery's event. */
void fprep__answer_reply(fprep__slot *s, const fprep_reply_header *h,
                         nng_msg *msg);
/* fprep__answer_next ends s's request (delivered or dropped): its
 * connection's counts, its job's region uses, its messages, and the slot
 * back to its port. Loop thread. */
void fprep__answer_next(fprep__slot *s);

/* sink.c */

/* fprep__sink_deliver writes the reply of s's request to its sink, once
 * per request (asserted): NNG sends msg (the whole reply, which nng then
 * owns) on s's context with timeout_ms, and s's aio event tells the send's
 * end; REGION and ENTRY write s->rep_head there (msg is NULL) and queue
 * s's FPREP__EV_SENT event. A REGION the SIGBUS guard caught gets the
 * header through nng instead. Returns 1 when the reply went into shared
 * memory, 0 when through nng (or dropped, logged, when no message could be
 * allocated for it). Called by fprep__answer_reply alone, on its thread
 * (daemon.h, [R]). */
int fprep__sink_deliver(fprep__slot *s, nng_msg *msg, int timeout_ms);

/* conns.c */

/* fprep__conn_admit counts s's request for its connection (s->pipe).
 * Returns 0, or -1 when the connection holds more than twice
 * --max-inflight-per-conn unanswered requests: an nng connection is then
 * closed (it does not read its replies) and the request is to be dropped.
 */
int fprep__conn_admit(fprep__slot *s);
/* fprep__conn_release ends what s's request counted for its connection;
 * once per request. */
void fprep__conn_release(fprep__slot *s);
/* fprep__conn_reserve_reply counts a reply of bytes tensor bytes against
 * the reply budgets. Returns 0, or FPREP_EBUSY with why. */
int fprep__conn_reserve_reply(fprep__slot *s, uint64_t bytes, char *why,
                              size_t why_size);
/* fprep__conn_share tells whether s's request (an nng slot's, counted by
 * fprep__conn_admit) is within the shares of the nng port's slots: the
 * last --inflight-reserve slots are kept for connections that hold none,
 * and a peer uid's connections hold at most --max-inflight-per-uid
 * together. Returns 0, FPREP_EBUSY with why, or -1 when the connection
 * was closed instead, its replies not having moved for 2 ms (it does not
 * read: an EBUSY reply would wait in a reserved slot): the request is to
 * be dropped. */
int fprep__conn_share(fprep__slot *s, char *why, size_t why_size);
/* fprep__conn_progress notes that s's nng reply was handed on (its send
 * ended well): its connection reads. */
void fprep__conn_progress(fprep__slot *s);
/* fprep__conns_sweep closes, while the nng port's free slots are fewer
 * than --inflight-reserve, the connections with a reply that has waited
 * --reply-stall-ms or more with none of theirs handed on meanwhile: they
 * do not read, and their slots (and replies) come back. Runs from
 * fprep__conn_admit and sweep_timer, which it stops once slots are free.
 * Loop thread. */
void fprep__conns_sweep(fprep__server *srv);
/* fprep__conn_inflight returns how many requests of connection pipe are in
 * flight (fprep__conn.inflight); 0 for one that holds none. */
unsigned fprep__conn_inflight(fprep__server *srv, uint32_t pipe);
/* fprep__conns_pipe_closed: the ingress's close callback (nng thread):
 * queues an FPREP__EV_PIPE_CLOSED event. */
void fprep__conns_pipe_closed(uint32_t pipe, void *data);
/* fprep__conns_closed_pipe returns the pipe of such an event, and frees
 * it. */
uint32_t fprep__conns_closed_pipe(fprep__event *ev);

/* port_nng.c */

/* fprep__port_nng_open makes the n slots at slots (zeroed, srv and index
 * set) the port's, each with a context on srv's socket and an aio.
 * Returns 0 or an error (logged). */
int fprep__port_nng_open(fprep__port_nng *p, fprep__server *srv,
                         fprep__slot *slots, unsigned n);
/* fprep__port_nng_start posts the first receives. */
void fprep__port_nng_start(fprep__port_nng *p);
/* fprep__port_nng_event handles the aio event of s in state RECV: a
 * request received (handed to take) or a receive that failed. */
void fprep__port_nng_event(fprep__slot *s);
/* fprep__port_nng_fini stops the aios, then frees them with the
 * messages still on them (a failed send, a receive not taken), after
 * nng_close. */
void fprep__port_nng_fini(fprep__port_nng *p);

/* port_doorbell.c */

/* fprep__doorbells_init sets up the port with the n slots at slots
 * (zeroed, srv and index set) as its pool, room for --max-doorbells
 * doorbells, and the waker (none with --max-doorbells 0). Returns 0 or
 * FPREP_ENOMEM. */
int fprep__doorbells_init(fprep__doorbells *db, fprep__server *srv,
                          fprep__slot *slots, unsigned n);
/* fprep__doorbells_fini stops the waker and frees what init allocated,
 * before the loop's queue closes. */
void fprep__doorbells_fini(fprep__doorbells *db);
/* fprep__doorbells_set sets up, replaces or (0 entries) ends the doorbell
 * that DOORBELL request req of connection pipe describes. Returns 0, or an
 * error with a sentence in why. */
int fprep__doorbells_set(fprep__doorbells *db, uint32_t pipe,
                         const fprep_register_request *req, char *why,
                         size_t why_size);
/* fprep__doorbells_drop_region ends the doorbell in region id of pipe, if
 * any; fprep__doorbells_drop_pipe those of connection pipe. */
void fprep__doorbells_drop_region(fprep__doorbells *db, uint32_t id,
                                  uint32_t pipe);
void fprep__doorbells_drop_pipe(fprep__doorbells *db, uint32_t pipe);
/* fprep__doorbells_overlap tells whether [p, p + len) of region r meets
 * a doorbell area (an entry's output may not). */
int fprep__doorbells_overlap(const fprep__doorbells *db, const fprep__memreg *r,
                             const uint8_t *p, uint64_t len);
/* fprep__doorbells_rung handles an FPREP__EV_DOORBELL event: takes what
 * the doorbells hold posted; returns how many requests it took. */
unsigned fprep__doorbells_rung(fprep__doorbells *db);

/* waker_futex.c, or no_futex_waitv.c */

/* fprep__waker_start starts the waker thread, which pushes w->ev onto
 * evq when a word rings. Returns 0, or -1 where the system or the kernel
 * has no futex_waitv, or the thread cannot start (logged): then there is
 * no thread and no word is armed. Loop thread. */
int fprep__waker_start(fprep__waker *w, fprep__evq *evq);
/* fprep__waker_publish gives the thread the n wake words at words to
 * sleep on (0: none) and wakes it to wait on them. Loop thread. */
void fprep__waker_publish(fprep__waker *w, _Atomic uint32_t *const *words,
                          unsigned n);
/* fprep__waker_stop stops and joins the thread, before the loop's queue
 * closes; nothing when it does not run. Loop thread. */
void fprep__waker_stop(fprep__waker *w);

/* shutdown.c */

/* fprep__shutdown_want asks for the shutdown (exit_status, and the
 * status and why that new requests get) from a file below shutdown.c: the
 * status is kept at once, and the loop begins the shutdown once the
 * current event is handled (server.c). A later call with a higher
 * exit_status replaces the status. Inline here, so that the files below
 * shutdown.c (the ports, slot.c) ask for it by a flag and never call up
 * into shutdown.c. Loop thread. */
static inline void fprep__shutdown_want(fprep__server *srv, int exit_status,
                                        int status, const char *why)
{
	size_t n;

	if (exit_status > srv->exit_status ||
	    (!srv->stop_wanted && !srv->stopping && exit_status == 0)) {
		srv->exit_status = exit_status;
		srv->stop_status = status;
		n = strnlen(why, FPREP_MESSAGE_SIZE - 1);
		memmove(srv->stop_message, why, n);
		srv->stop_message[n] = '\0';
	}
	srv->stop_wanted = 1;
}
/* fprep__shutdown_begin begins the shutdown (exit_status, and the status and
 * why that new requests get); fprep__shutdown_begin_wanted begins the one
 * that fprep__shutdown_want asked for. */
void fprep__shutdown_begin(fprep__server *srv, int exit_status, int status,
                           const char *why);
void fprep__shutdown_begin_wanted(fprep__server *srv);
/* fprep__shutdown_finish runs the ordered close once no slot is busy. */
void fprep__shutdown_finish(fprep__server *srv);
/* fprep__shutdown_progress moves a shutdown on after an event: once no
 * slot holds a request, the nng port stops receiving (until then requests
 * that arrive get stop_status replies); once no slot is busy, the ordered
 * close. Nothing when not stopping. Loop thread. */
void fprep__shutdown_progress(fprep__server *srv);
/* fprep__shutdown_reply_sent notes that s's reply was handed to its nng
 * pipe (its send ended well: queued, maybe not yet written), so that the
 * shutdown's close waits for it. Two stores. Loop thread. */
void fprep__shutdown_reply_sent(fprep__server *srv, fprep__slot *s);
/* fprep__shutdown_close_backend closes the backend once. */
void fprep__shutdown_close_backend(fprep__server *srv, int timeout_ms);
/* fprep__shutdown_close_handles closes the event queue and the uv handles. */
void fprep__shutdown_close_handles(fprep__server *srv);
/* fprep__shutdown_signal_cb: SIGINT and SIGTERM. */
void fprep__shutdown_signal_cb(uv_signal_t *handle, int signum);

/* info.c */

/* fprep__info_notify tells systemd state (no-op without it). */
void fprep__info_notify(const char *state);
/* fprep__info_text writes the INFO text into buf (size bytes). */
void fprep__info_text(fprep__server *srv, char *buf, size_t size);
/* fprep__info_log_start logs the start-up line and tells the metrics the
 * budgets their gauges are measured against (fprep__metrics_limits). */
void fprep__info_log_start(fprep__server *srv);

#endif /* FPREP_SERVICE_DAEMON_H */
