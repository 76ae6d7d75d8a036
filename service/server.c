/*
 * server.c: frameprepd's event loop (see server.h).
 *
 * The design is simple: one libuv loop thread owns every request. A
 * request lives in a slot, one per nng context; the number of slots is the
 * in-flight bound. A slot cycles through
 *
 *   RECV  a receive is posted on its context
 *   WORK  the request was decoded and validated (before anything was
 *         allocated) and its job submitted to the backend; the reply
 *         message, header space plus the tensor, is already allocated and
 *         the backend writes the tensor straight into it
 *   SEND  the reply (tensor, INFO text or error) is being sent, with a
 *         timeout
 *
 * and back to RECV, or to IDLE once shutdown began. nng's aio callbacks and
 * the backend's completion callbacks run on other threads: they only record
 * the result in the slot and push it onto the event queue (evq.c), which
 * the loop drains whole at each wake-up. A slot has at most one event
 * queued at a time, because it has at most one operation outstanding.
 *
 * Every request received gets exactly one reply; a request that cannot be
 * served gets an error reply naming the reason.
 *
 * The slots are shared by every connection, so each connection is held to
 * its part of them: a request finds its connection by the message's nng
 * pipe, and past --max-inflight-per-conn requests of that connection in
 * flight it gets EBUSY at once. The tensor bytes of the replies in flight
 * are bounded by --max-reply-bytes, and one connection's by its share,
 * max-reply-bytes * max-inflight-per-conn / max-inflight: a FRAME whose
 * tensor does not fit gets EBUSY too, unless nothing is in flight. A reply
 * waits in its slot until the peer has read the replies before it, so an
 * EBUSY reply holds a slot as well: a connection with more than twice
 * --max-inflight-per-conn requests unanswered does not read its replies,
 * and is closed. A request counts against the cap from its receipt until
 * its reply is handed to nng (slot_send), so a client that sends its next
 * request as soon as it has a reply is never refused; its slot and reply
 * bytes count until the send has ended or failed (slot_next).
 *
 * Shutdown (SIGINT, SIGTERM, or a fatal device error) goes in a fixed
 * order, since nng 1.5.2 has close races: stop receiving (cancel the posted
 * receives; slots do not post new ones) -> let the work in flight finish
 * and its replies go out, within --shutdown-timeout-ms (past it, the
 * backend is closed, which fails what is left with ESHUTDOWN) -> close the
 * backend -> let the last replies leave (a finished send is only queued on
 * the pipe: wait, up to 2 s, for the peers to disconnect) -> close the
 * remaining connections one by one (nng_pipe_close; nng_close in 1.5.2 can
 * hang on connections that are still writing) -> nng_close, waited for at
 * most 2 s (1.5.2 never finishes closing a connection that was closed
 * while a message was arriving on it, as the daemon does to a client that
 * floods it without reading: the socket is then left to the process exit)
 * -> stop and free the aios -> close the uv handles -> uv_loop_close. A
 * watchdog thread ends the process if this takes too long.
 */
#include "server.h"

#include <inttypes.h>
#include <nng/nng.h>
#include <nng/transport/ipc/ipc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#ifdef FPREP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "evq.h"
#include "ingress.h"
#include "log.h"
#include "metrics.h"
#include "regions.h"
#include "reply.h"
#include "watchdog.h"

/* Added to --shutdown-timeout-ms for the watchdog: closing the backend, the
 * socket and the loop after the drain deadline. */
#define SERVER_WATCHDOG_MARGIN_MS 10000
/* How long the backend may take to fail its jobs once the drain deadline
 * has passed. */
#define SERVER_FORCE_CLOSE_MS 1000
/* Bound on each reply's send once shutdown began. */
#define SERVER_STOP_SEND_MS 2000
/* A finished send means "queued on the pipe", not "written": before
 * nng_close, wait up to this long for the peers to disconnect, polling
 * every SERVER_LINGER_POLL_MS, so the last replies reach them. */
#define SERVER_LINGER_MS      2000
#define SERVER_LINGER_POLL_MS 10

#define SERVER_INFO_SIZE 4096

enum slot_state { SLOT_IDLE, SLOT_RECV, SLOT_WORK, SLOT_SEND, SLOT_REGISTER };
enum slot_event { SLOT_EV_AIO, SLOT_EV_DONE, SLOT_EV_PIPE_CLOSED };

/* server_pipe_ev: a connection closed (its regions go); ev.kind is
 * SLOT_EV_PIPE_CLOSED. */
struct server_pipe_ev {
	fprep__event ev;
	uint32_t pipe;
};

/* server_conn: what one connection (nng pipe) holds; an entry is in use
 * while held > 0, so there are never more than the slots. */
struct server_conn {
	uint32_t pipe;        /* nng pipe id; 0: a free entry */
	unsigned held;        /* slots holding one of its requests */
	unsigned inflight;    /* of those, requests not refused with EBUSY */
	uint64_t reply_bytes; /* tensor bytes of its replies in flight */
	int closing;          /* closed for not reading: drop its requests */
};

struct server;

struct server_slot {
	fprep__event ev; /* kind: SLOT_EV_AIO or SLOT_EV_DONE */
	int aio_result;  /* nng error of the finished aio */
	struct server *srv;
	unsigned index;
	int state; /* enum slot_state */
	nng_ctx ctx;
	nng_aio *aio;
	nng_msg *req_msg; /* WORK: the request; job.input points into it */
	nng_msg *rep_msg; /* WORK: the reply; job.output points into it */
	struct server_conn *conn; /* the requester; NULL: none yet */
	int counted;              /* counted in conn->inflight */
	uint64_t reply_bytes;     /* counted in the reply byte totals */
	uint16_t kind;            /* of the request being served, for logs */
	uint64_t request_id;
	uint64_t t_recv_ns;
	fprep__job job;
	/* SLOT_REGISTER: the mapping and pinning, on libuv's thread pool. */
	uv_work_t work;
	nng_msg *reg_msg; /* the REGISTER request */
	fprep_request reg_req;
	uint32_t reg_pipe; /* nng pipe id of the requester */
	uint64_t reg_uid;  /* its peer UID */
	fprep__shm_region *reg_region;
	int reg_rv;
	char reg_why[FPREP_MESSAGE_SIZE];
};

struct server {
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
	fprep__ingress ingress;
	fprep__regions regions;
	fprep__watchdog watchdog;
	struct server_slot *slots;
	unsigned nslots;
	unsigned active;           /* slots not IDLE */
	struct server_conn *conns; /* nslots entries */
	uint64_t reply_bytes;      /* tensor bytes of the replies in flight */
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

static void server_finish(struct server *srv);

/* server_set_message copies why into a reply message field, cut to fit. */
static void server_set_message(char dst[FPREP_MESSAGE_SIZE], const char *why)
{
	size_t n = strnlen(why, FPREP_MESSAGE_SIZE - 1);

	memcpy(dst, why, n);
	dst[n] = '\0';
}

static void server_notify(const char *state)
{
#ifdef FPREP_HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

static uint32_t server_us(uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;

	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* server_info writes the INFO text. */
static void server_info(struct server *srv, char *buf, size_t size)
{
	const fprep__config *cfg = srv->cfg;
	const fprep_limits *lim = &cfg->limits;
	unsigned busy = 0;
	size_t n;

	for (unsigned i = 0; i < srv->nslots; i++)
		busy += srv->slots[i].state == SLOT_WORK ||
		        srv->slots[i].state == SLOT_SEND;
	n = (size_t)snprintf(buf, size,
	                     "version: %s\nprotocol: %d\nbackend: %s\n"
	                     "device: %s\nlisten:",
	                     FPREP_VERSION_STRING, FPREP_PROTOCOL_VERSION,
	                     srv->backend->name, srv->device);
	for (unsigned i = 0; i < cfg->nlisten && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, " %s", cfg->listen[i]);
	if (n < size)
		n += (size_t)snprintf(
		        buf + n, size - n,
		        "\nmax_width: %" PRIu32 "\nmax_height: %" PRIu32
		        "\nmax_frame_bytes: %" PRIu64
		        "\nmax_out_width: %" PRIu32 "\nmax_out_height: %" PRIu32
		        "\nmax_tensor_bytes: %" PRIu64 "\nmax_inflight: %u\n"
		        "max_inflight_per_conn: %u\nmax_reply_bytes: %" PRIu64
		        "\nreply_bytes: %" PRIu64 "\n"
		        "inflight: %u\nserved: %" PRIu64 "\nfailed: %" PRIu64
		        "\nuptime_s: %" PRIu64 "\n",
		        lim->max_width, lim->max_height, lim->max_frame_bytes,
		        lim->max_out_width, lim->max_out_height,
		        lim->max_tensor_bytes, cfg->max_inflight,
		        cfg->max_inflight_per_conn, cfg->max_reply_bytes,
		        srv->reply_bytes, busy, srv->served, srv->failed,
		        (fprep__now_ns() - srv->t_start_ns) / 1000000000u);
	if (n < size) {
		uint64_t shm_bytes;
		unsigned nreg = fprep__regions_count(&srv->regions, &shm_bytes);

		n += (size_t)snprintf(
		        buf + n, size - n,
		        "regions: %u\nshm_bytes: %" PRIu64
		        "\nmax_regions: %u\nmax_region_bytes: "
		        "%" PRIu64 "\nmax_shm_bytes: %" PRIu64 "\n",
		        nreg, shm_bytes, srv->cfg->max_regions,
		        srv->cfg->max_region_bytes, srv->cfg->max_shm_bytes);
	}
	if (n < size - 1)
		srv->backend->info(srv->backend, buf + n, size - n);
}

static void slot_aio_cb(void *arg)
{
	struct server_slot *s = arg;

	s->ev.kind = SLOT_EV_AIO;
	s->aio_result = nng_aio_result(s->aio);
	fprep__evq_push(&s->srv->evq, &s->ev);
}

static void slot_job_done(fprep__job *job)
{
	struct server_slot *s = job->data;

	s->ev.kind = SLOT_EV_DONE;
	fprep__evq_push(&s->srv->evq, &s->ev);
}

static void slot_recv(struct server_slot *s)
{
	if (s->state == SLOT_IDLE)
		s->srv->active++;
	s->state = SLOT_RECV;
	s->kind = 0;
	s->request_id = 0;
	nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(s->ctx, s->aio);
}

/* server_conn_find returns the entry of connection pipe, taking a free one
 * when it holds nothing yet. There is always one: each entry in use holds
 * a slot. */
static struct server_conn *server_conn_find(struct server *srv, uint32_t pipe)
{
	struct server_conn *free_entry = NULL;

	for (unsigned i = 0; i < srv->nslots; i++) {
		if (srv->conns[i].pipe == pipe)
			return &srv->conns[i];
		if (srv->conns[i].pipe == 0 && free_entry == NULL)
			free_entry = &srv->conns[i];
	}
	if (free_entry == NULL) {
		fprep__log(FPREP_LOG_ERR, "connection table full");
		abort();
	}
	free_entry->pipe = pipe;
	return free_entry;
}

/* slot_release ends what the slot's request counted for its connection
 * and in the reply byte totals; once per request. */
static void slot_release(struct server_slot *s)
{
	struct server_conn *c = s->conn;

	if (c == NULL)
		return;
	fprep__metrics_request_end();
	c->held--;
	if (s->counted)
		c->inflight--;
	c->reply_bytes -= s->reply_bytes;
	s->srv->reply_bytes -= s->reply_bytes;
	if (c->held == 0) {
		c->pipe = 0;
		c->closing = 0;
	}
	s->conn = NULL;
	s->counted = 0;
	s->reply_bytes = 0;
}

/* slot_next ends a request: the slot receives again, or rests once the
 * server is stopping. */
static void slot_next(struct server_slot *s)
{
	struct server *srv = s->srv;

	slot_release(s);
	if (!srv->stopping) {
		slot_recv(s);
		return;
	}
	if (s->state != SLOT_IDLE)
		srv->active--;
	s->state = SLOT_IDLE;
	if (srv->active == 0 && !srv->forcing)
		server_finish(srv);
}

static void slot_send(struct server_slot *s, nng_msg *msg)
{
	int timeout_ms = s->srv->cfg->send_timeout_ms;

	if (s->srv->stopping && timeout_ms > SERVER_STOP_SEND_MS)
		timeout_ms = SERVER_STOP_SEND_MS;
	if (s->counted) { /* its work is done */
		s->conn->inflight--;
		s->counted = 0;
	}
	s->state = SLOT_SEND;
	fprep__metrics_reply(nng_msg_body(msg), nng_msg_len(msg));
	nng_aio_set_msg(s->aio, msg);
	nng_aio_set_timeout(s->aio, timeout_ms);
	nng_ctx_send(s->ctx, s->aio);
}

/* slot_fail answers the slot's request with an error. spare is a message
 * the caller gives up, reused for the reply when possible. */
static void slot_fail(struct server_slot *s, nng_msg *spare, int status,
                      const char *why)
{
	nng_msg *msg;

	s->srv->failed++;
	fprep__log(FPREP_LOG_INFO,
	           "request %" PRIu64 " (kind %u, slot %u): %s: %s",
	           s->request_id, s->kind, s->index, fprep_err_name(status),
	           why);
	msg = fprep__reply_error(spare, s->kind, s->request_id, status, why);
	if (msg == NULL) {
		fprep__log(FPREP_LOG_WARNING,
		           "request %" PRIu64 ": no memory for the error "
		           "reply: dropped",
		           s->request_id);
		slot_next(s);
		return;
	}
	slot_send(s, msg);
}

/* slot_answer sends rep, a reply built from the request's message (what
 * names the request kind), or fails the request when it could not be
 * built. */
static void slot_answer(struct server_slot *s, nng_msg *rep, const char *what)
{
	char why[FPREP_MESSAGE_SIZE];

	if (rep == NULL) {
		snprintf(why, sizeof(why), "%s: out of memory", what);
		slot_fail(s, NULL, FPREP_ENOMEM, why);
		return;
	}
	s->srv->served++;
	slot_send(s, rep);
}

/* slot_region finds the region a FRAME names for its input or output (field
 * "in" or "out"): one of this connection's, with [offset, offset + len)
 * inside it. Returns it, or NULL after answering the request with the
 * error. */
static fprep__shm_region *slot_region(struct server_slot *s, nng_msg *msg,
                                      uint32_t id, uint32_t pipe,
                                      uint64_t offset, uint64_t len,
                                      const char *field)
{
	char why[FPREP_MESSAGE_SIZE], span[32];
	fprep__shm_region *r;
	int rv;

	r = fprep__regions_find(&s->srv->regions, id, pipe);
	if (r == NULL) {
		snprintf(why, sizeof(why),
		         "%s_region %" PRIu32 " is not a region of this "
		         "connection",
		         field, id);
		slot_fail(s, msg, FPREP_EREGION, why);
		return NULL;
	}
	snprintf(span, sizeof(span), "%s_offset + length", field);
	rv = fprep__shm_region_span(r, offset, len, span, why, sizeof(why));
	if (rv != 0) {
		slot_fail(s, msg, rv, why);
		return NULL;
	}
	return r;
}

/* slot_unuse_regions ends the job's use of its shared-memory regions. */
static void slot_unuse_regions(struct server_slot *s)
{
	if (s->job.shm_in != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.shm_in);
	if (s->job.shm_out != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.shm_out);
	s->job.shm_in = NULL;
	s->job.shm_out = NULL;
}

/* slot_register_work maps (and, for the GPU, pins) a region; on libuv's
 * thread pool. */
static void slot_register_work(uv_work_t *work)
{
	struct server_slot *s = work->data;
	const fprep__config *cfg = s->srv->cfg;
	fprep__backend *b = s->srv->backend;

	s->reg_rv = fprep__shm_region_map(
	        &s->reg_region, s->reg_req.region_name, s->reg_req.region_size,
	        s->reg_uid, cfg->max_region_bytes, s->reg_why,
	        sizeof(s->reg_why));
	if (s->reg_rv != 0 || b->region_add == NULL)
		return;
	s->reg_rv = b->region_add(b, s->reg_region);
	if (s->reg_rv != 0) {
		snprintf(s->reg_why, sizeof(s->reg_why),
		         "region %s could not be pinned for the GPU (%s)",
		         s->reg_req.region_name, fprep_err_name(s->reg_rv));
		fprep__shm_region_unmap(s->reg_region);
		s->reg_region = NULL;
	}
}

/* slot_register_done enters the mapped region in the table and answers. */
static void slot_register_done(uv_work_t *work, int status)
{
	struct server_slot *s = work->data;
	struct server *srv = s->srv;
	fprep__shm_region *r = s->reg_region;
	nng_msg *msg = s->reg_msg, *rep;
	uint64_t uid;
	char why[FPREP_MESSAGE_SIZE];

	(void)status;
	s->reg_msg = NULL;
	s->reg_region = NULL;
	s->state = SLOT_WORK;
	if (s->reg_rv != 0) {
		fprep__regions_unreserve(&srv->regions, s->reg_req.region_size);
		slot_fail(s, msg, s->reg_rv, s->reg_why);
		return;
	}
	fprep__regions_add(&srv->regions, r, s->reg_pipe);
	if (nng_pipe_get_uint64(nng_msg_get_pipe(msg), NNG_OPT_IPC_PEER_UID,
	                        &uid) != 0 ||
	    srv->stopping) {
		/* The connection closed meanwhile (its close event may have
		 * come before the region was in the table), or shutdown
		 * began. */
		fprep__regions_remove(&srv->regions, r->id, s->reg_pipe);
		slot_fail(s, msg, FPREP_ECLOSED,
		          "connection closed during registration");
		return;
	}
	fprep__log(FPREP_LOG_INFO,
	           "region %" PRIu32 " (%s, %" PRIu64
	           " bytes) registered by connection %" PRIu32 " (uid %" PRIu64
	           ")",
	           r->id, r->name, r->size, s->reg_pipe, s->reg_uid);
	snprintf(why, sizeof(why), "region %" PRIu32 " registered", r->id);
	rep = fprep__reply_region(msg, s->request_id, r->id, why);
	slot_answer(s, rep, "REGISTER");
}

/* slot_register starts a REGISTER: checks what can be checked at once and
 * queues the mapping on the thread pool. */
static void slot_register(struct server_slot *s, nng_msg *msg,
                          const fprep_request *req)
{
	struct server *srv = s->srv;
	nng_pipe pipe = nng_msg_get_pipe(msg);
	char why[FPREP_MESSAGE_SIZE];
	int rv;

	if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &s->reg_uid) != 0) {
		slot_fail(s, msg, FPREP_EUNSUPPORTED,
		          "REGISTER: shared memory needs an ipc:// connection "
		          "(the peer's uid is unknown on this one)");
		return;
	}
	if ((rv = fprep__shm_region_name_check(req->region_name,
	                                       strlen(req->region_name), why,
	                                       sizeof(why)))) {
		slot_fail(s, msg, rv, why);
		return;
	}
	if (req->region_size == 0 ||
	    req->region_size > srv->cfg->max_region_bytes) {
		snprintf(why, sizeof(why),
		         "region_size %" PRIu64
		         " outside 1..max-region-bytes %" PRIu64,
		         req->region_size, srv->cfg->max_region_bytes);
		slot_fail(s, msg, FPREP_ELIMIT, why);
		return;
	}
	s->reg_pipe = (uint32_t)nng_pipe_id(pipe);
	if ((rv = fprep__regions_reserve(&srv->regions, s->reg_pipe,
	                                 req->region_size, why, sizeof(why)))) {
		slot_fail(s, msg, rv, why);
		return;
	}
	s->reg_req = *req;
	s->reg_msg = msg;
	s->reg_region = NULL;
	s->reg_rv = 0;
	s->reg_why[0] = '\0';
	s->work.data = s;
	s->state = SLOT_REGISTER;
	rv = uv_queue_work(&srv->loop, &s->work, slot_register_work,
	                   slot_register_done);
	if (rv != 0) {
		s->state = SLOT_WORK;
		s->reg_msg = NULL;
		fprep__regions_unreserve(&srv->regions, req->region_size);
		snprintf(why, sizeof(why), "REGISTER: %s", uv_strerror(rv));
		slot_fail(s, msg, FPREP_EINTERNAL, why);
	}
}

/* slot_unregister takes a region of this connection out of the table. */
static void slot_unregister(struct server_slot *s, nng_msg *msg,
                            const fprep_request *req)
{
	struct server *srv = s->srv;
	uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));
	char why[FPREP_MESSAGE_SIZE];
	nng_msg *rep;

	if (fprep__regions_remove(&srv->regions, req->region_id, pipe) != 0) {
		snprintf(why, sizeof(why),
		         "region_id %" PRIu32 " is not a region of this "
		         "connection",
		         req->region_id);
		slot_fail(s, msg, FPREP_EREGION, why);
		return;
	}
	snprintf(why, sizeof(why), "region %" PRIu32 " unregistered",
	         req->region_id);
	rep = fprep__reply_error(msg, req->kind, req->request_id, FPREP_OK,
	                         why);
	slot_answer(s, rep, "UNREGISTER");
}

/* slot_refuse answers the slot's request with EBUSY: it no longer counts
 * as in flight for its connection. */
static void slot_refuse(struct server_slot *s, nng_msg *msg, const char *why)
{
	if (s->counted) {
		s->conn->inflight--;
		s->counted = 0;
	}
	slot_fail(s, msg, FPREP_EBUSY, why);
}

/* slot_reserve_reply counts a reply of bytes tensor bytes against the
 * connection's share of --max-reply-bytes and the whole. Returns 0, or -1
 * after answering the request with EBUSY. */
static int slot_reserve_reply(struct server_slot *s, nng_msg *msg,
                              uint64_t bytes)
{
	struct server *srv = s->srv;
	const fprep__config *cfg = srv->cfg;
	struct server_conn *c = s->conn;
	unsigned per_conn = cfg->max_inflight_per_conn < cfg->max_inflight
	                            ? cfg->max_inflight_per_conn
	                            : cfg->max_inflight;
	uint64_t share = cfg->max_reply_bytes * per_conn / cfg->max_inflight;
	char why[FPREP_MESSAGE_SIZE];

	/* A first reply may be larger than the share (or the whole): the
	 * totals can exceed their bounds, hence the >= tests. */
	if (c->reply_bytes > 0 &&
	    (c->reply_bytes >= share || bytes > share - c->reply_bytes)) {
		snprintf(why, sizeof(why),
		         "tensor of %" PRIu64 " bytes: this connection's "
		         "replies hold %" PRIu64 " of its %" PRIu64
		         "-byte share of --max-reply-bytes",
		         bytes, c->reply_bytes, share);
		slot_refuse(s, msg, why);
		return -1;
	}
	if (srv->reply_bytes > 0 &&
	    (srv->reply_bytes >= cfg->max_reply_bytes ||
	     bytes > cfg->max_reply_bytes - srv->reply_bytes)) {
		snprintf(why, sizeof(why),
		         "tensor of %" PRIu64 " bytes: replies in flight hold "
		         "%" PRIu64 " of --max-reply-bytes %" PRIu64,
		         bytes, srv->reply_bytes, cfg->max_reply_bytes);
		slot_refuse(s, msg, why);
		return -1;
	}
	s->reply_bytes = bytes;
	c->reply_bytes += bytes;
	srv->reply_bytes += bytes;
	return 0;
}

/* slot_submit starts a FRAME or ECHO request: allocates the reply with
 * room for the tensor and hands the job to the backend. */
static void slot_submit(struct server_slot *s, nng_msg *msg,
                        const fprep_request *req)
{
	struct server *srv = s->srv;
	fprep__job *job = &s->job;
	char why[FPREP_MESSAGE_SIZE];
	uint32_t shape[4];
	uint64_t bytes = 0;
	uint8_t *tensor = NULL;
	nng_msg *rep = NULL;
	int rv;

	fprep__shm_region *in = NULL, *out = NULL;
	uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));

	rv = fprep_tensor_shape(req, shape, &bytes);
	if (rv != 0) {
		slot_fail(s, msg, rv, "tensor shape: invalid request");
		return;
	}
	if (req->input_loc == FPREP_LOC_SHM &&
	    (in = slot_region(s, msg, req->in_region, pipe, req->in_offset,
	                      req->input_size, "in")) == NULL)
		return;
	if (req->output_loc == FPREP_LOC_SHM &&
	    (out = slot_region(s, msg, req->out_region, pipe, req->out_offset,
	                       bytes, "out")) == NULL)
		return;
	if (out == NULL && slot_reserve_reply(s, msg, bytes) != 0)
		return;
	rv = fprep__reply_tensor_alloc(&rep, out != NULL ? 0 : bytes, &tensor);
	if (rv != 0) {
		snprintf(why, sizeof(why),
		         "tensor of %" PRIu64 " bytes: out of memory", bytes);
		slot_fail(s, msg, rv, why);
		return;
	}
	memset(job, 0, sizeof(*job));
	job->req = *req;
	job->input =
	        (const uint8_t *)nng_msg_body(msg) + FPREP_REQUEST_HEADER_SIZE;
	job->output = tensor;
	if (in != NULL) {
		job->input = in->base + req->in_offset;
		job->input_pinned = in->gpu_priv != NULL;
		job->shm_in = in;
		fprep__regions_use(in);
	}
	if (out != NULL) {
		job->output = out->base + req->out_offset;
		job->shm_out = out;
		fprep__regions_use(out);
	}
	job->output_size = bytes;
	job->done = slot_job_done;
	job->data = s;
	s->req_msg = msg;
	s->rep_msg = rep;
	s->state = SLOT_WORK;
	rv = srv->backend->submit(srv->backend, job);
	if (rv != 0) {
		slot_unuse_regions(s);
		s->req_msg = NULL;
		s->rep_msg = NULL;
		nng_msg_free(msg);
		snprintf(why, sizeof(why), "backend %s refused the job: %s",
		         srv->backend->name, fprep_strerror(rv));
		slot_fail(s, rep, rv, why);
	}
}

/* slot_admit counts a request that just arrived for its connection.
 * Returns 0, or -1 when the connection holds too many unanswered requests:
 * it is closed, and the request dropped. */
static int slot_admit(struct server_slot *s, nng_msg *msg)
{
	struct server *srv = s->srv;
	nng_pipe pipe = nng_msg_get_pipe(msg);
	unsigned bound = 2 * srv->cfg->max_inflight_per_conn;

	s->conn = server_conn_find(srv, (uint32_t)nng_pipe_id(pipe));
	s->conn->held++;
	if (s->conn->held <= bound && !s->conn->closing)
		return 0;
	if (!s->conn->closing) {
		/* Requests it sent before the close may still arrive. */
		fprep__log(FPREP_LOG_WARNING,
		           "connection %" PRIu32 " closed: more than %u "
		           "requests unanswered (twice "
		           "--max-inflight-per-conn): it does not read its "
		           "replies",
		           s->conn->pipe, bound);
		s->conn->closing = 1;
		nng_pipe_close(pipe);
	}
	nng_msg_free(msg);
	slot_next(s);
	return -1;
}

/* slot_received handles a request that just arrived. */
static void slot_received(struct server_slot *s)
{
	struct server *srv = s->srv;
	nng_msg *msg = nng_aio_get_msg(s->aio);
	char why[FPREP_MESSAGE_SIZE], *info;
	fprep_request req;
	nng_msg *rep;
	int rv;

	s->t_recv_ns = fprep__now_ns();
	fprep__metrics_request(nng_msg_len(msg));
	fprep__ingress_request(&srv->ingress, nng_msg_get_pipe(msg));
	if (slot_admit(s, msg) != 0)
		return;
	memset(&req, 0, sizeof(req));
	why[0] = '\0';
	rv = fprep_request_decode(nng_msg_body(msg), nng_msg_len(msg),
	                          &srv->cfg->limits, &req, why, sizeof(why));
	s->kind = req.kind;
	s->request_id = req.request_id;
	if (rv != 0) {
		slot_fail(s, msg, rv,
		          why[0] != '\0' ? why : fprep_strerror(rv));
		return;
	}
	if (srv->stopping) {
		slot_fail(s, msg, srv->stop_status, srv->stop_message);
		return;
	}
	if (s->conn->inflight >= srv->cfg->max_inflight_per_conn) {
		snprintf(why, sizeof(why),
		         "this connection has %u requests in flight: the limit "
		         "is --max-inflight-per-conn %u",
		         s->conn->inflight, srv->cfg->max_inflight_per_conn);
		slot_refuse(s, msg, why);
		return;
	}
	s->conn->inflight++;
	s->counted = 1;
	switch (req.kind) {
	case FPREP_KIND_FRAME:
	case FPREP_KIND_ECHO:
		slot_submit(s, msg, &req);
		return;
	case FPREP_KIND_INFO:
		info = malloc(SERVER_INFO_SIZE);
		if (info == NULL) {
			slot_fail(s, msg, FPREP_ENOMEM, "INFO: out of memory");
			return;
		}
		server_info(srv, info, SERVER_INFO_SIZE);
		rep = fprep__reply_text(msg, req.kind, req.request_id, info);
		free(info);
		slot_answer(s, rep, "INFO");
		return;
	case FPREP_KIND_REGISTER:
		slot_register(s, msg, &req);
		return;
	case FPREP_KIND_UNREGISTER:
		slot_unregister(s, msg, &req);
		return;
	default:
		snprintf(why, sizeof(why), "kind: %u is not supported",
		         req.kind);
		slot_fail(s, msg, FPREP_EUNSUPPORTED, why);
		return;
	}
}

static void server_stop(struct server *srv, int exit_status, int status,
                        const char *why);

/* slot_completed handles a job the backend finished. */
static void slot_completed(struct server_slot *s)
{
	struct server *srv = s->srv;
	fprep__job *job = &s->job;
	nng_msg *rep = s->rep_msg;
	uint64_t now;
	char why[FPREP_MESSAGE_SIZE + 32];

	nng_msg_free(s->req_msg);
	s->req_msg = NULL;
	s->rep_msg = NULL;
	if (job->fatal && srv->exit_status == 0) {
		snprintf(why, sizeof(why), "device failed (%s): %s",
		         fprep_err_name(job->status), job->message);
		fprep__log(FPREP_LOG_ERR,
		           "backend %s on %s: fatal error: %s; failing the "
		           "requests in flight and exiting for a restart",
		           srv->backend->name, srv->device, job->message);
		server_stop(srv, 1,
		            job->status != FPREP_OK ? job->status
		                                    : FPREP_EINTERNAL,
		            why);
	}
	if (job->status == FPREP_OK &&
	    ((job->shm_in != NULL && job->shm_in->broken) ||
	     (job->shm_out != NULL && job->shm_out->broken))) {
		/* The SIGBUS guard caught an access to a region the client
		 * shrank (shm_region.h): what was read or written is not the
		 * client's. */
		job->status = FPREP_EREGION;
		snprintf(job->message, sizeof(job->message),
		         "shared-memory region shrank while the frame was read "
		         "or the tensor written");
	}
	slot_unuse_regions(s);
	if (job->status != FPREP_OK) {
		job->message[FPREP_MESSAGE_SIZE - 1] = '\0';
		slot_fail(s, rep, job->status,
		          job->message[0] != '\0'
		                  ? job->message
		                  : fprep_strerror(job->status));
		return;
	}
	if (srv->exit_status != 0) {
		slot_fail(s, rep, srv->stop_status, srv->stop_message);
		return;
	}
	now = fprep__now_ns();
	fprep__reply_tensor_finish(rep, job,
	                           server_us(s->t_recv_ns, job->t_start_ns),
	                           server_us(s->t_recv_ns, now));
	srv->served++;
	fprep__log(FPREP_LOG_DEBUG,
	           "request %" PRIu64 " (kind %u, slot %u): %" PRIu64
	           " tensor bytes, %" PRIu64 " us",
	           s->request_id, s->kind, s->index, job->output_size,
	           (now - s->t_recv_ns) / 1000);
	slot_send(s, rep);
}

static void slot_aio_done(struct server_slot *s)
{
	struct server *srv = s->srv;
	int rv = s->aio_result;

	switch (s->state) {
	case SLOT_RECV:
		if (rv == 0) {
			slot_received(s);
			return;
		}
		if (!srv->stopping)
			fprep__log(FPREP_LOG_WARNING, "slot %u: receive: %s",
			           s->index, nng_strerror(rv));
		if (rv == NNG_ECLOSED) {
			/* The socket is gone: this slot cannot serve. */
			if (!srv->stopping)
				server_stop(srv, 1, FPREP_ETRANSPORT,
				            "the socket closed");
		}
		slot_next(s);
		return;
	case SLOT_SEND:
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(s->aio));
			nng_aio_set_msg(s->aio, NULL);
			fprep__log(FPREP_LOG_INFO,
			           "request %" PRIu64 " (kind %u, slot %u): "
			           "reply not sent: %s",
			           s->request_id, s->kind, s->index,
			           nng_strerror(rv));
		}
		slot_next(s);
		return;
	default:
		fprep__log(FPREP_LOG_ERR, "slot %u: aio event in state %d",
		           s->index, s->state);
		abort();
	}
}

/* server_pipe_closed is told by the ingress that a connection closed; on
 * an nng thread: it only queues the news for the loop. */
static void server_pipe_closed(uint32_t pipe, void *data)
{
	struct server *srv = data;
	struct server_pipe_ev *pe = malloc(sizeof(*pe));

	if (pe == NULL) {
		fprep__log(FPREP_LOG_WARNING,
		           "connection %" PRIu32 " closed: no memory to tell "
		           "the loop; its regions stay until shutdown",
		           pipe);
		return;
	}
	pe->ev.kind = SLOT_EV_PIPE_CLOSED;
	pe->pipe = pipe;
	fprep__evq_push(&srv->evq, &pe->ev);
}

static void server_event(fprep__event *ev, void *data)
{
	struct server *srv = data;
	struct server_slot *s;

	if (ev->kind == SLOT_EV_PIPE_CLOSED) {
		struct server_pipe_ev *pe =
		        fprep__container_of(ev, struct server_pipe_ev, ev);
		unsigned n = 0;

		if (!srv->finished)
			n = fprep__regions_remove_pipe(&srv->regions, pe->pipe);
		if (n > 0)
			fprep__log(FPREP_LOG_INFO,
			           "connection %" PRIu32 " closed: %u regions "
			           "removed",
			           pe->pipe, n);
		free(pe);
		return;
	}
	s = fprep__container_of(ev, struct server_slot, ev);
	if (s->srv->finished)
		return;
	if (ev->kind == SLOT_EV_DONE)
		slot_completed(s);
	else
		slot_aio_done(s);
}

/* server_event_dispose releases an event the queue dropped at its close:
 * a connection-closed event owns its memory; a slot's is the slot. */
static void server_event_dispose(fprep__event *ev, void *data)
{
	(void)data;
	if (ev->kind == SLOT_EV_PIPE_CLOSED)
		free(fprep__container_of(ev, struct server_pipe_ev, ev));
}

/* server_close_backend closes the backend once. */
static void server_close_backend(struct server *srv, int timeout_ms)
{
	if (srv->backend == NULL)
		return;
	fprep__metrics_set_backend(NULL);
	srv->backend->close(srv->backend, timeout_ms);
	srv->backend = NULL;
	/* Regions released from now on are only unmapped. */
	srv->regions.backend = NULL;
}

/* server_drain_timeout: the drain deadline passed with work in flight. The
 * backend is closed, which completes or fails every job; their replies go
 * out with the shortened shutdown send timeout. */
static void server_drain_timeout(uv_timer_t *timer)
{
	struct server *srv = timer->data;
	unsigned count[SLOT_REGISTER + 1] = {0};

	fprep__log(FPREP_LOG_WARNING,
	           "shutdown: %u requests still in flight after %d ms: "
	           "closing the backend",
	           srv->active, srv->cfg->shutdown_timeout_ms);
	srv->forcing = 1;
	server_close_backend(srv, SERVER_FORCE_CLOSE_MS);
	fprep__evq_drain(&srv->evq);
	for (unsigned i = 0; i < srv->nslots; i++) {
		struct server_slot *s = &srv->slots[i];

		if (s->state == SLOT_WORK) {
			/* The backend's threads are joined: nothing writes
			 * into these messages any more. */
			nng_msg_free(s->req_msg);
			s->req_msg = NULL;
			slot_unuse_regions(s);
			slot_fail(s, s->rep_msg, FPREP_ESHUTDOWN,
			          "server shutting down: the backend did not "
			          "finish this request in time");
			s->rep_msg = NULL;
		}
		if (s->state == SLOT_RECV)
			nng_aio_cancel(s->aio);
	}
	srv->forcing = 0;
	if (srv->active == 0) {
		server_finish(srv);
		return;
	}
	for (unsigned i = 0; i < srv->nslots; i++)
		count[srv->slots[i].state]++;
	fprep__log(FPREP_LOG_NOTICE,
	           "shutdown: waiting for %u replies being sent and %u "
	           "receives being cancelled",
	           count[SLOT_SEND], count[SLOT_RECV]);
}

/* server_stop begins the shutdown: no more receives; the requests in flight
 * are answered. */
static void server_stop(struct server *srv, int exit_status, int status,
                        const char *why)
{
	if (exit_status > srv->exit_status) {
		srv->exit_status = exit_status;
		srv->stop_status = status;
		server_set_message(srv->stop_message, why);
	}
	if (srv->stopping)
		return;
	srv->stopping = 1;
	if (exit_status == 0) {
		srv->stop_status = status;
		server_set_message(srv->stop_message, why);
	}
	server_notify("STOPPING=1");
	if (fprep__watchdog_start(&srv->watchdog,
	                          srv->cfg->shutdown_timeout_ms +
	                                  SERVER_WATCHDOG_MARGIN_MS) != 0)
		fprep__log(FPREP_LOG_WARNING,
		           "shutdown: no watchdog thread (out of memory)");
	for (unsigned i = 0; i < srv->nslots; i++)
		if (srv->slots[i].state == SLOT_RECV)
			nng_aio_cancel(srv->slots[i].aio);
	uv_timer_start(&srv->drain_timer, server_drain_timeout,
	               (uint64_t)srv->cfg->shutdown_timeout_ms, 0);
	if (srv->active == 0 && !srv->forcing)
		server_finish(srv);
}

static void server_signal_cb(uv_signal_t *handle, int signum)
{
	struct server *srv = handle->data;
	const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";

	if (srv->stopping) {
		fprep__log(FPREP_LOG_NOTICE,
		           "%s: already shutting down (%u requests in flight)",
		           name, srv->active);
		return;
	}
	fprep__log(FPREP_LOG_NOTICE,
	           "%s: shutting down: no new requests, answering the "
	           "requests in flight",
	           name);
	server_stop(srv, 0, FPREP_ESHUTDOWN, "server shutting down");
}

/* server_free_slots stops and frees the aios (after nng_close: no
 * operation is pending, and aio callbacks may still push to the queue). */
static void server_free_slots(struct server *srv)
{
	for (unsigned i = 0; i < srv->nslots; i++) {
		struct server_slot *s = &srv->slots[i];

		if (s->aio == NULL)
			continue;
		nng_aio_stop(s->aio);
		nng_aio_free(s->aio);
		s->aio = NULL;
	}
	free(srv->slots);
	free(srv->conns);
	srv->slots = NULL;
	srv->conns = NULL;
	srv->nslots = 0;
}

static void server_close_handles(struct server *srv)
{
	/* Connection-closed events queued by nng_close: their regions go
	 * before the queue closes (what is left is disposed of). */
	fprep__evq_drain(&srv->evq);
	fprep__evq_fini(&srv->evq);
	uv_close((uv_handle_t *)&srv->sigint, NULL);
	uv_close((uv_handle_t *)&srv->sigterm, NULL);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
	uv_close((uv_handle_t *)&srv->linger_timer, NULL);
}

/* server_close_socket ends the ordered close once the replies had their
 * chance to leave: nng_close, the aios, the uv handles. */
static void server_close_socket(struct server *srv)
{
	uv_timer_stop(&srv->linger_timer);
	if (srv->ingress.is_open)
		fprep__ingress_close_pipes(&srv->ingress);
	if (fprep__ingress_close(&srv->ingress) != 0)
		srv->socket_left = 1;
	server_free_slots(srv);
	server_close_handles(srv);
}

static void server_linger_cb(uv_timer_t *timer)
{
	struct server *srv = timer->data;

	if (fprep__ingress_pipes(&srv->ingress) > 0 &&
	    fprep__now_ns() < srv->linger_end_ns)
		return;
	server_close_socket(srv);
}

/* server_finish runs once no slot is busy: the ordered close. */
static void server_finish(struct server *srv)
{
	if (srv->finished)
		return;
	srv->finished = 1;
	uv_timer_stop(&srv->drain_timer);
	/* No request is in flight: every region can go (unpinned first, by
	 * the backend, unless the drain deadline already closed it). */
	fprep__regions_fini(&srv->regions, srv->backend);
	server_close_backend(srv, srv->cfg->shutdown_timeout_ms);
	if (!srv->ingress.is_open || fprep__ingress_pipes(&srv->ingress) == 0) {
		server_close_socket(srv);
		return;
	}
	srv->linger_end_ns =
	        fprep__now_ns() + (uint64_t)SERVER_LINGER_MS * 1000000u;
	uv_timer_start(&srv->linger_timer, server_linger_cb,
	               SERVER_LINGER_POLL_MS, SERVER_LINGER_POLL_MS);
}

static int server_open_slots(struct server *srv)
{
	int rv;

	srv->slots = calloc(srv->cfg->max_inflight, sizeof(*srv->slots));
	if (srv->slots == NULL)
		return FPREP_ENOMEM;
	srv->nslots = srv->cfg->max_inflight;
	srv->conns = calloc(srv->nslots, sizeof(*srv->conns));
	if (srv->conns == NULL)
		return FPREP_ENOMEM;
	for (unsigned i = 0; i < srv->nslots; i++) {
		struct server_slot *s = &srv->slots[i];

		s->srv = srv;
		s->index = i;
		rv = nng_aio_alloc(&s->aio, slot_aio_cb, s);
		if (rv != 0) {
			fprep__log(FPREP_LOG_ERR, "nng_aio_alloc: %s",
			           nng_strerror(rv));
			return FPREP_ENOMEM;
		}
		rv = nng_ctx_open(&s->ctx, srv->ingress.sock);
		if (rv != 0) {
			fprep__log(FPREP_LOG_ERR, "nng_ctx_open: %s",
			           nng_strerror(rv));
			return FPREP_ETRANSPORT;
		}
	}
	return 0;
}

static void server_log_start(struct server *srv)
{
	const fprep__config *cfg = srv->cfg;
	const fprep_limits *lim = &cfg->limits;
	char urls[FPREP__MAX_LISTEN * (FPREP__URL_SIZE + 1)];
	size_t n = 0;

	urls[0] = '\0';
	for (unsigned i = 0; i < cfg->nlisten; i++)
		n += (size_t)snprintf(urls + n, sizeof(urls) - n, "%s%s",
		                      i > 0 ? " " : "", cfg->listen[i]);
	fprep__log(FPREP_LOG_NOTICE,
	           "frameprepd %s started: backend %s, device %s, listen %s, "
	           "max_inflight %u, source <= %" PRIu32 "x%" PRIu32
	           " and %" PRIu64 " bytes, tensor <= %" PRIu32 "x%" PRIu32
	           " and %" PRIu64 " bytes, send timeout %d ms, shutdown "
	           "timeout %d ms",
	           FPREP_VERSION_STRING, srv->backend->name, srv->device, urls,
	           cfg->max_inflight, lim->max_width, lim->max_height,
	           lim->max_frame_bytes, lim->max_out_width,
	           lim->max_out_height, lim->max_tensor_bytes,
	           cfg->send_timeout_ms, cfg->shutdown_timeout_ms);
}

/* server_init_loop sets up the loop and its handles. */
static int server_init_loop(struct server *srv)
{
	int rv;

	rv = uv_loop_init(&srv->loop);
	if (rv != 0)
		goto err;
	rv = fprep__evq_init(&srv->evq, &srv->loop, server_event,
	                     server_event_dispose, srv);
	if (rv != 0)
		goto err_loop;
	uv_signal_init(&srv->loop, &srv->sigint);
	uv_signal_init(&srv->loop, &srv->sigterm);
	uv_timer_init(&srv->loop, &srv->drain_timer);
	uv_timer_init(&srv->loop, &srv->linger_timer);
	srv->sigint.data = srv;
	srv->sigterm.data = srv;
	srv->drain_timer.data = srv;
	srv->linger_timer.data = srv;
	rv = uv_signal_start(&srv->sigint, server_signal_cb, SIGINT);
	if (rv == 0)
		rv = uv_signal_start(&srv->sigterm, server_signal_cb, SIGTERM);
	if (rv != 0) {
		server_close_handles(srv);
		uv_run(&srv->loop, UV_RUN_DEFAULT);
		goto err_loop;
	}
	return 0;

err_loop:
	uv_loop_close(&srv->loop);
err:
	fprep__log(FPREP_LOG_ERR, "libuv: %s", uv_strerror(rv));
	return FPREP_EINTERNAL;
}

int fprep__server_run(const fprep__config *cfg, fprep__backend *backend,
                      const char *device)
{
	struct server *srv;
	int rv, status;

	srv = calloc(1, sizeof(*srv));
	if (srv == NULL) {
		fprep__metrics_set_backend(NULL);
		backend->close(backend, cfg->shutdown_timeout_ms);
		return 1;
	}
	srv->cfg = cfg;
	srv->backend = backend;
	srv->device = device;
	srv->t_start_ns = fprep__now_ns();
	if (server_init_loop(srv) != 0) {
		server_close_backend(srv, cfg->shutdown_timeout_ms);
		free(srv);
		return 1;
	}
	fprep__regions_init(&srv->regions, backend, cfg->max_regions,
	                    cfg->max_shm_bytes);
	rv = fprep__ingress_open(&srv->ingress, cfg);
	if (rv == 0)
		fprep__ingress_on_close(&srv->ingress, server_pipe_closed, srv);
	if (rv == 0)
		rv = server_open_slots(srv);
	if (rv != 0) {
		/* Start-up failed: the same ordered close, with no work. */
		srv->stopping = 1;
		srv->exit_status = 1;
		server_finish(srv);
	} else {
		for (unsigned i = 0; i < srv->nslots; i++)
			slot_recv(&srv->slots[i]);
		server_log_start(srv);
		server_notify("READY=1\nSTATUS=serving");
	}
	uv_run(&srv->loop, UV_RUN_DEFAULT);
	rv = uv_loop_close(&srv->loop);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "uv_loop_close: %s", uv_strerror(rv));
		srv->exit_status = 1;
	}
	fprep__watchdog_stop(&srv->watchdog);
	status = srv->exit_status;
	fprep__log(FPREP_LOG_NOTICE,
	           "frameprepd stopped: %" PRIu64 " requests served, %" PRIu64
	           " failed, exit status %d",
	           srv->served, srv->failed, status);
	/* A socket still closing may call into srv->ingress. */
	if (!srv->socket_left)
		free(srv);
	return status;
}
