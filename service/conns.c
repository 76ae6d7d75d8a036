/*
 * conns.c: what each connection of frameprepd may hold.
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
 * and is closed; so is one that holds more than a third of the slots, so
 * that two that never read cannot hold them all and stall every other
 * client until the send timeout. A request counts against the cap from
 * its receipt until
 * its reply is delivered (answer.c), so a client that sends its
 * next request as soon as it has a reply is never refused; its slot and
 * reply bytes count until the send has ended or failed (fprep__answer_next).
 * The request machine (slot.c, answer.c) acts on what these counts say;
 * this file only keeps them.
 * A request answered in its shared-memory region by a backend's thread
 * (no nng send) counts as answered from the moment it was written: the
 * client may send its next request before the loop has settled it.
 *
 * A connection that closes takes its regions with it: the ingress tells
 * the loop through the event queue.
 *
 * However many connections there are, the nng port's slots are shared
 * two more ways: the last --inflight-reserve of them are kept
 * for connections that hold none, and the connections of one peer uid
 * hold at most --max-inflight-per-uid together; a request past either
 * gets EBUSY (fprep__conn_share), which a client that reads has at once,
 * an INFO excepted: it is answered whatever the shares (a few kilobytes,
 * no work), ahead of the requests queued for the loop (port_nng.c), so
 * that non-readers holding every share cannot hold another client's.
 * A client that does not read its replies holds its slots all the same,
 * each EBUSY reply included, until a send times out: so while fewer than
 * --inflight-reserve slots are free, fprep__conns_sweep closes each
 * connection holding two slots or more with a reply that has waited
 * --reply-stall-ms with none of its replies handed on meanwhile (a client that
 * reads takes one at least every few milliseconds), which gives its slots and
 * its replies' memory back at once.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/transport/ipc/ipc.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"

/* conns_pipe_ev: a connection closed (its regions go); ev.kind is
 * FPREP__EV_PIPE_CLOSED. */
struct conns_pipe_ev {
	fprep__event ev;
	uint32_t pipe;
};

/* CONNS_RESERVE_STALL_NS: how long a connection's replies may have not
 * moved when it asks for a reserved slot (fprep__conn_share). */
#define CONNS_RESERVE_STALL_NS 2000000u

/* conns_find returns the entry of connection pipe, taking a free one
 * when it holds nothing yet. There is always one: each entry in use holds
 * a slot. */
static fprep__conn *conns_find(fprep__server *srv, uint32_t pipe)
{
	fprep__conn *free_entry = NULL;

	for (unsigned i = 0; i < srv->nconns; i++) {
		if (srv->conns[i].pipe == pipe)
			return &srv->conns[i];
		if (srv->conns[i].pipe == 0 && free_entry == NULL)
			free_entry = &srv->conns[i];
	}
	FPREP__ASSERT(free_entry != NULL);
	if (free_entry == NULL) { /* cannot be: as many entries as slots */
		fprep__log(FPREP_LOG_ERR, "connection table full");
		abort();
	}
	free_entry->pipe = pipe;
	free_entry->uid = NULL;
	free_entry->uid_asked = 0;
	free_entry->nng_held = 0;
	free_entry->progress_ns = fprep__now_ns();
	return free_entry;
}

/* conns_uid_find returns the count of uid, taking a free entry when no
 * connection of uid holds a slot (there is always one: as many entries as
 * connection entries). */
static fprep__uid_held *conns_uid_find(fprep__server *srv, uint64_t uid)
{
	fprep__uid_held *free_entry = NULL;

	for (unsigned i = 0; i < srv->nconns; i++) {
		if (srv->uids[i].held > 0 && srv->uids[i].uid == uid)
			return &srv->uids[i];
		if (srv->uids[i].held == 0 && free_entry == NULL)
			free_entry = &srv->uids[i];
	}
	FPREP__ASSERT(free_entry != NULL);
	free_entry->uid = uid;
	return free_entry;
}

/* conns_is_nng tells whether s is a slot of the nng port. */
static int conns_is_nng(const fprep__slot *s)
{
	return s->port == &s->srv->nng.port;
}

/* conns_reserve: the slots kept for connections that hold none:
 * --inflight-reserve, at most a quarter of the nng port's. */
static unsigned conns_reserve(const fprep__server *srv)
{
	unsigned reserve = srv->cfg->inflight_reserve;

	return reserve < srv->nng.nslots / 4 ? reserve : srv->nng.nslots / 4;
}

unsigned fprep__conn_inflight(fprep__server *srv, uint32_t pipe)
{
	for (unsigned i = 0; i < srv->nconns; i++)
		if (srv->conns[i].pipe == pipe)
			return atomic_load(&srv->conns[i].inflight);
	return 0;
}

void fprep__conn_release(fprep__slot *s)
{
	fprep__conn *c = s->conn;

	if (c == NULL)
		return;
	FPREP__ASSERT(c->held > 0);
	/* What fprep__answer_reply counted, or the request was dropped. */
	if (!s->delivered)
		fprep__metrics_request_end();
	else if (s->sink.kind != FPREP__SINK_NNG)
		atomic_fetch_sub(&c->region_answered, 1);
	c->held--;
	atomic_store_explicit(&s->t_send_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->t_sent_ns, 0, memory_order_relaxed);
	if (conns_is_nng(s)) {
		FPREP__ASSERT(c->nng_held > 0 && s->srv->nng_held > 0);
		c->nng_held--;
		s->srv->nng_held--;
		if (c->uid != NULL) {
			FPREP__ASSERT(c->uid->held > 0);
			c->uid->held--;
		}
	}
	if (s->counted)
		atomic_fetch_sub(&c->inflight, 1);
	c->reply_bytes -= s->reply_bytes;
	s->srv->reply_bytes -= s->reply_bytes;
	if (c->held == 0) {
		c->pipe = 0;
		c->closing = 0;
		c->uid = NULL;
	}
	s->conn = NULL;
	s->counted = 0;
	s->reply_bytes = 0;
}

/* conns_bound: how many slots one connection's requests may hold before
 * it is closed for not reading its replies: twice --max-inflight-per-conn
 * (a reply waits in its slot until the peer has read those before it),
 * but at most a third of the nng port's slots, so that two connections
 * that never read leave a third of them to everyone else; and never less
 * than --max-inflight-per-conn + 1. */
static unsigned conns_bound(const fprep__server *srv)
{
	unsigned per = srv->cfg->max_inflight_per_conn;
	unsigned bound = 2 * per;

	if (bound > srv->nng.nslots / 3)
		bound = srv->nng.nslots / 3;
	return bound > per ? bound : per + 1;
}

int fprep__conn_admit(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	unsigned bound = conns_bound(srv);

	FPREP__ASSERT(s->conn == NULL);
	s->conn = conns_find(srv, s->pipe);
	s->conn->held++;
	if (conns_is_nng(s)) {
		fprep__conn *c = s->conn;
		uint64_t uid;

		/* Once a connection: nng asks the kernel each time. */
		if (!c->uid_asked && s->req_msg != NULL) {
			c->uid_asked = 1;
			if (nng_pipe_get_uint64(nng_msg_get_pipe(s->req_msg),
			                        NNG_OPT_IPC_PEER_UID,
			                        &uid) == 0) {
				c->uid = conns_uid_find(srv, uid);
				c->uid->held += c->nng_held;
			}
		}
		c->nng_held++;
		srv->nng_held++;
		if (c->uid != NULL)
			c->uid->held++;
		if (srv->nng.nslots - srv->nng_held < conns_reserve(srv))
			fprep__conns_sweep(srv);
	}
	/* Requests answered in their region but not yet settled are
	 * answered: the client may send on before the loop knows. A
	 * doorbell's requests are taken by the daemon itself, never more
	 * than the bound (port_doorbell.c): they never close it. */
	if (s->req_msg == NULL ||
	    (s->conn->held - atomic_load(&s->conn->region_answered) <= bound &&
	     !s->conn->closing))
		return 0;
	if (!s->conn->closing) {
		/* Requests it sent before the close may still arrive. */
		fprep__log(FPREP_LOG_WARNING,
		           "connection %" PRIu32 " closed: more than %u "
		           "requests unanswered (twice "
		           "--max-inflight-per-conn, at most a third of "
		           "--max-inflight): it does not read its replies",
		           s->conn->pipe, bound);
		s->conn->closing = 1;
		nng_pipe_close(nng_msg_get_pipe(s->req_msg));
	}
	return -1;
}

/* conns_progress brings the connections' progress_ns up to the sends
 * that ended before the loop has their events. */
static void conns_progress(fprep__server *srv)
{
	uint64_t t;

	for (unsigned i = 0; i < srv->nng.nslots; i++) {
		fprep__slot *s = &srv->nng.slots[i];

		t = atomic_load_explicit(&s->t_sent_ns, memory_order_relaxed);
		if (s->conn != NULL && t > s->conn->progress_ns)
			s->conn->progress_ns = t;
	}
}

/* conns_stalled returns how long (ns) a reply of s's connection has
 * waited in s when it has waited window_ns or more with none of the
 * connection's handed on since (conns_progress ran), and the connection
 * holds two slots or more; else 0. A connection with one request in
 * flight is left alone: its reply's send may wait for the daemon's own
 * threads on a loaded machine (nng's, which end the send), not for the
 * client, and one slot starves no one (the reserve). */
static uint64_t conns_stalled(const fprep__slot *s, uint64_t now,
                              uint64_t window_ns)
{
	const fprep__conn *c = s->conn;
	uint64_t t = atomic_load_explicit(&s->t_send_ns, memory_order_relaxed);

	/* t may be later than now: a backend's thread sent it. */
	if (t == 0 || c == NULL || c->closing || c->held < 2 || t > now ||
	    now - t < window_ns || c->progress_ns > now ||
	    now - c->progress_ns < window_ns)
		return 0;
	return now - t;
}

/* conns_close closes connection c, which does not read its replies (a
 * reply of it has waited waited_ns); its requests that still arrive are
 * dropped (fprep__conn_admit). */
static void conns_close(fprep__server *srv, fprep__conn *c, uint64_t waited_ns)
{
	nng_pipe pipe = NNG_PIPE_INITIALIZER;

	fprep__log(FPREP_LOG_WARNING,
	           "connection %" PRIu32 " closed: a reply has waited %" PRIu64
	           " us and it read none of its %u since, while %u of the %u "
	           "request slots are held (--inflight-reserve %u, "
	           "--reply-stall-ms %d): it does not read its replies",
	           c->pipe, waited_ns / 1000u, c->held, srv->nng_held,
	           srv->nng.nslots, conns_reserve(srv),
	           srv->cfg->reply_stall_ms);
	c->closing = 1;
	srv->stall_closes++;
	pipe.id = c->pipe;
	nng_pipe_close(pipe);
}

int fprep__conn_share(fprep__slot *s, char *why, size_t why_size)
{
	fprep__server *srv = s->srv;
	const fprep__config *cfg = srv->cfg;
	fprep__conn *c = s->conn;
	unsigned reserve = conns_reserve(srv);
	unsigned free_slots = srv->nng.nslots - srv->nng_held;

	/* An INFO costs a few kilobytes and no work: it is never refused for
	 * the shares, which non-readers may hold in full (the loop also takes
	 * it ahead of the queued requests, port_nng.c). */
	if (!conns_is_nng(s) || s->kind == FPREP_KIND_INFO)
		return 0;
	/* This request is counted: it held some before when it holds two. */
	if (c->nng_held > 1 && free_slots < reserve) {
		/* An EBUSY reply would wait behind its others, in one of the
		 * reserved slots: a connection whose replies have not moved
		 * for CONNS_RESERVE_STALL_NS is closed at once instead. */
		uint64_t now = fprep__now_ns(), waited = 0;
		uint64_t window = (uint64_t)cfg->reply_stall_ms * 1000000u;

		if (window > CONNS_RESERVE_STALL_NS)
			window = CONNS_RESERVE_STALL_NS;
		conns_progress(srv);
		for (unsigned i = 0; i < srv->nng.nslots && waited == 0; i++)
			if (srv->nng.slots[i].conn == c)
				waited = conns_stalled(&srv->nng.slots[i], now,
				                       window);
		if (waited > 0) {
			conns_close(srv, c, waited);
			return -1;
		}
		snprintf(why, why_size,
		         "%u of the %u request slots are free, and the last %u "
		         "are kept for connections that hold none "
		         "(--inflight-reserve); this one holds %u",
		         free_slots + 1, srv->nng.nslots, reserve,
		         c->nng_held - 1);
		return FPREP_EBUSY;
	}
	if (cfg->max_inflight_per_uid > 0 && c->uid != NULL &&
	    c->uid->held > cfg->max_inflight_per_uid) {
		snprintf(why, why_size,
		         "the connections of uid %" PRIu64 " hold %u requests: "
		         "the limit is --max-inflight-per-uid %u",
		         c->uid->uid, c->uid->held - 1,
		         cfg->max_inflight_per_uid);
		return FPREP_EBUSY;
	}
	return 0;
}

void fprep__conn_progress(fprep__slot *s)
{
	if (s->conn != NULL)
		s->conn->progress_ns = fprep__now_ns();
}

/* conns_sweep_cb: sweep_timer. */
static void conns_sweep_cb(uv_timer_t *timer)
{
	fprep__conns_sweep(timer->data);
}

void fprep__conns_sweep(fprep__server *srv)
{
	uint64_t now = fprep__now_ns();
	uint64_t stall_ns = (uint64_t)srv->cfg->reply_stall_ms * 1000000u;
	uint64_t period_ms = (uint64_t)srv->cfg->reply_stall_ms / 4 + 1;

	FPREP__LOOP_ONLY(srv);
	if (srv->nng.nslots - srv->nng_held >= conns_reserve(srv) ||
	    srv->stopping) {
		if (srv->sweeping)
			uv_timer_stop(&srv->sweep_timer);
		srv->sweeping = 0;
		return;
	}
	if (!srv->sweeping) {
		srv->sweep_timer.data = srv;
		uv_timer_start(&srv->sweep_timer, conns_sweep_cb, period_ms,
		               period_ms);
		srv->sweeping = 1;
	}
	conns_progress(srv);
	for (unsigned i = 0; i < srv->nng.nslots; i++) {
		fprep__slot *s = &srv->nng.slots[i];
		uint64_t waited = conns_stalled(s, now, stall_ns);

		if (waited > 0)
			conns_close(srv, s->conn, waited);
	}
}

int fprep__conn_reserve_reply(fprep__slot *s, uint64_t bytes, char *why,
                              size_t why_size)
{
	fprep__server *srv = s->srv;
	const fprep__config *cfg = srv->cfg;
	fprep__conn *c = s->conn;
	unsigned per_conn = cfg->max_inflight_per_conn < cfg->max_inflight
	                            ? cfg->max_inflight_per_conn
	                            : cfg->max_inflight;
	uint64_t share = cfg->max_reply_bytes * per_conn / cfg->max_inflight;

	/* A first reply may be larger than the share (or the whole): the
	 * totals can exceed their bounds, hence the >= tests. */
	if (c->reply_bytes > 0 &&
	    (c->reply_bytes >= share || bytes > share - c->reply_bytes)) {
		snprintf(why, why_size,
		         "tensor of %" PRIu64 " bytes: this connection's "
		         "replies hold %" PRIu64 " of its %" PRIu64
		         "-byte share of --max-reply-bytes",
		         bytes, c->reply_bytes, share);
		return FPREP_EBUSY;
	}
	if (srv->reply_bytes > 0 &&
	    (srv->reply_bytes >= cfg->max_reply_bytes ||
	     bytes > cfg->max_reply_bytes - srv->reply_bytes)) {
		snprintf(why, why_size,
		         "tensor of %" PRIu64 " bytes: replies in flight hold "
		         "%" PRIu64 " of --max-reply-bytes %" PRIu64,
		         bytes, srv->reply_bytes, cfg->max_reply_bytes);
		return FPREP_EBUSY;
	}
	s->reply_bytes = bytes;
	srv->trim_wanted = 1;
	c->reply_bytes += bytes;
	srv->reply_bytes += bytes;
	return 0;
}

void fprep__conns_pipe_closed(uint32_t pipe, void *data)
{
	fprep__server *srv = data;
	struct conns_pipe_ev *pe = malloc(sizeof(*pe));

	if (pe == NULL) {
		fprep__log(FPREP_LOG_WARNING,
		           "connection %" PRIu32 " closed: no memory to tell "
		           "the loop; its regions stay until shutdown",
		           pipe);
		return;
	}
	pe->ev.kind = FPREP__EV_PIPE_CLOSED;
	pe->pipe = pipe;
	fprep__evq_push(&srv->evq, &pe->ev);
}

uint32_t fprep__conns_closed_pipe(fprep__event *ev)
{
	struct conns_pipe_ev *pe =
	        fprep__container_of(ev, struct conns_pipe_ev, ev);
	uint32_t pipe = pe->pipe;

	free(pe);
	return pipe;
}
