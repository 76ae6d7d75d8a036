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
 * reply bytes count until the send has ended or failed (fprep__slot_next).
 * The request machine (slot.c, answer.c) acts on what these counts say;
 * this file only keeps them.
 * A request answered in its shared-memory region by a backend's thread
 * (no nng send) counts as answered from the moment it was written: the
 * client may send its next request before the loop has settled it.
 *
 * A connection that closes takes its regions with it: the ingress tells
 * the loop through the event queue.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon.h"
#include "log.h"
#include "metrics.h"

/* conns_pipe_ev: a connection closed (its regions go); ev.kind is
 * FPREP__EV_PIPE_CLOSED. */
struct conns_pipe_ev {
	fprep__event ev;
	uint32_t pipe;
};

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
	return free_entry;
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
	if (!s->ended)
		fprep__metrics_request_end();
	s->ended = 0;
	c->held--;
	if (s->counted)
		atomic_fetch_sub(&c->inflight, 1);
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
