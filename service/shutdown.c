/*
 * shutdown.c: how frameprepd stops.
 *
 * Shutdown (SIGINT, SIGTERM, or a fatal device error) goes in a fixed
 * order: take no new work (the doorbell port closes; the nng port goes on
 * receiving, and what arrives gets a stop_status reply, ESHUTDOWN, not a
 * reset) -> let the work in flight finish and its replies go out, within
 * --shutdown-timeout-ms (past it, the backend is closed, which fails what
 * is left with ESHUTDOWN) -> once no slot holds a request, stop receiving
 * (cancel the posted receives) -> once no slot is busy, close the regions
 * and the backend -> let the last replies leave (a finished send is only
 * queued on the pipe; nng's ipc transport counts a message in the pipe's
 * tx_msgs once its last byte is in the kernel, and a pipe closed before
 * that loses the rest of it, the peer gets no reply: so wait, polled, up
 * to --send-timeout-ms and within the watchdog's bound, while a connection
 * handed a reply in that time has read more than it wrote) -> close
 * the remaining connections one by one (nng_pipe_close) -> nng_close ->
 * stop and free the aios -> close the event queue and the uv handles ->
 * uv_loop_close. A watchdog thread ends the process if this takes too
 * long.
 */
#include <nng/nng.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"

/* Added to --shutdown-timeout-ms for the watchdog: closing the backend, the
 * socket and the loop after the drain deadline. */
#define SHUTDOWN_WATCHDOG_MARGIN_MS 10000
/* How long the backend may take to fail its jobs once the drain deadline
 * has passed. */
#define SHUTDOWN_FORCE_CLOSE_MS 1000
/* A finished send means "queued on the pipe", not "written": before
 * nng_close, wait, polling every SHUTDOWN_LINGER_POLL_MS, while a
 * connection may still have a reply not wholly written
 * (shutdown_unflushed), so the last replies reach their peers, however
 * slowly they read: up to --send-timeout-ms (a reply's own bound), and
 * until SHUTDOWN_CLOSE_RESERVE_MS before the watchdog would fire, which
 * leaves the close its time. */
#define SHUTDOWN_CLOSE_RESERVE_MS 2000
#define SHUTDOWN_LINGER_POLL_MS   10

void fprep__shutdown_reply_sent(fprep__server *srv, fprep__slot *s)
{
	(void)srv;
	s->sent_pipe = s->pipe;
	s->sent_ns = fprep__now_ns();
}

/* shutdown_linger_end_ns returns when the close stops waiting for the
 * last replies to be written: --send-timeout-ms from now, at the latest
 * SHUTDOWN_CLOSE_RESERVE_MS before the watchdog's deadline. */
static uint64_t shutdown_linger_end_ns(const fprep__server *srv)
{
	uint64_t end = fprep__now_ns() +
	               (uint64_t)srv->cfg->send_timeout_ms * 1000000u;
	uint64_t latest =
	        srv->stop_ns +
	        ((uint64_t)srv->cfg->shutdown_timeout_ms +
	         SHUTDOWN_WATCHDOG_MARGIN_MS - SHUTDOWN_CLOSE_RESERVE_MS) *
	                1000000u;

	return end < latest ? end : latest;
}

/* shutdown_pipe_recent returns whether a slot handed a reply to pipe in
 * the last --send-timeout-ms (the clock's, not the loop's: a loop blocked
 * in the backend's close would date the replies it then hands on
 * earlier). */
static int shutdown_pipe_recent(const fprep__server *srv, uint32_t pipe,
                                uint64_t now_ns)
{
	for (unsigned i = 0; i < srv->nslots; i++)
		if (srv->slots[i].sent_pipe == pipe &&
		    srv->slots[i].sent_ns +
		                    (uint64_t)srv->cfg->send_timeout_ms *
		                            1000000u >
		            now_ns)
			return 1;
	return 0;
}

/* shutdown_unflushed returns whether a connection may still have a reply
 * queued, not yet written: nng's per-pipe statistics count the messages
 * the transport read (rx_msgs) and wrote in whole, the last byte in the
 * kernel (tx_msgs, ipc.c's send callback); once every request taken is
 * answered, a pipe that read more than it wrote and was handed a reply
 * in the last --send-timeout-ms has one in transit (a slow reader's), or had
 * requests answered in shared memory (shm_reply, no message back: such a
 * connection keeps the linger to its bound, or until it closes). Without
 * nng's statistics: while any peer is connected. */
static int shutdown_unflushed(fprep__server *srv)
{
	nng_stat *root = NULL;
	int sock_id, pending = 0;
	uint64_t now_ns = fprep__now_ns();

	if (!srv->ingress.is_open || fprep__ingress_pipes(&srv->ingress) == 0)
		return 0;
	if (nng_stats_get(&root) != 0)
		return 1;
	sock_id = nng_socket_id(srv->ingress.sock);
	for (nng_stat *c = nng_stat_child(root); c != NULL && !pending;
	     c = nng_stat_next(c)) {
		nng_stat *sid, *pid, *rx, *tx;

		if (strcmp(nng_stat_name(c), "pipe") != 0)
			continue;
		sid = nng_stat_find(c, "socket");
		pid = nng_stat_find(c, "id");
		rx = nng_stat_find(c, "rx_msgs");
		tx = nng_stat_find(c, "tx_msgs");
		if (sid == NULL || pid == NULL || rx == NULL || tx == NULL) {
			pending = 1; /* not the statistics expected */
			break;
		}
		if (nng_stat_value(sid) != (uint64_t)sock_id)
			continue;
		pending = nng_stat_value(rx) > nng_stat_value(tx) &&
		          shutdown_pipe_recent(
		                  srv, (uint32_t)nng_stat_value(pid), now_ns);
	}
	nng_stats_free(root);
	return pending;
}

/* fprep__shutdown_close_backend closes the backend once. */
void fprep__shutdown_close_backend(fprep__server *srv, int timeout_ms)
{
	if (srv->backend == NULL)
		return;
	fprep__metrics_set_backend(NULL);
	srv->backend->close(srv->backend, timeout_ms);
	srv->backend = NULL;
	fprep__regions_detach(&srv->regions);
}

/* shutdown_requests counts the slots that hold a request (working on it,
 * sending its reply, or with the regions module): srv->active also counts
 * the slots that only wait for one (RECV). */
static unsigned shutdown_requests(const fprep__server *srv)
{
	unsigned n = 0;

	for (unsigned i = 0; i < srv->nslots; i++) {
		enum fprep__slot_state st = srv->slots[i].state;
		n += st == FPREP__SLOT_WORK || st == FPREP__SLOT_SEND ||
		     st == FPREP__SLOT_REGION;
	}
	return n;
}

/* shutdown_drain_timeout: the drain deadline passed with work in flight. The
 * backend is closed, which completes or fails every job; their replies go
 * out with the shortened shutdown send timeout. */
static void shutdown_drain_timeout(uv_timer_t *timer)
{
	fprep__server *srv = timer->data;
	unsigned count[FPREP__SLOT_REGION + 1] = {0};

	fprep__log(FPREP_LOG_WARNING,
	           "shutdown: %u requests still in flight after %d ms: "
	           "closing the backend",
	           shutdown_requests(srv), srv->cfg->shutdown_timeout_ms);
	srv->forcing = 1;
	fprep__shutdown_close_backend(srv, SHUTDOWN_FORCE_CLOSE_MS);
	fprep__evq_drain(&srv->evq);
	for (unsigned i = 0; i < srv->nslots; i++) {
		fprep__slot *s = &srv->slots[i];

		if (s->state == FPREP__SLOT_WORK && !s->delivered) {
			/* The backend's threads are joined: nothing writes
			 * into these replies any more. (A reply a backend's
			 * thread delivered ends with its own event.) */
			fprep__answer_fail(
			        s, FPREP_ESHUTDOWN,
			        "server shutting down: the backend did not "
			        "finish this request in time");
		}
	}
	for (unsigned i = 0; i < srv->nports; i++)
		srv->ports[i]->ops->close(srv->ports[i]);
	srv->forcing = 0;
	if (srv->active == 0) {
		fprep__shutdown_finish(srv);
		return;
	}
	for (unsigned i = 0; i < srv->nslots; i++)
		count[srv->slots[i].state]++;
	fprep__log(FPREP_LOG_NOTICE,
	           "shutdown: waiting for %u replies being sent and %u "
	           "receives being cancelled",
	           count[FPREP__SLOT_SEND], count[FPREP__SLOT_RECV]);
}

void fprep__shutdown_begin(fprep__server *srv, int exit_status, int status,
                           const char *why)
{
	fprep__shutdown_want(srv, exit_status, status, why);
	fprep__shutdown_begin_wanted(srv);
}

/* fprep__shutdown_begin_wanted begins the shutdown that
 * fprep__shutdown_want asked for: no more requests are taken; those in
 * flight are answered. */
void fprep__shutdown_begin_wanted(fprep__server *srv)
{
	if (srv->stopping)
		return;
	srv->stopping = 1;
	srv->stop_ns = fprep__now_ns();
	atomic_store(&srv->no_direct, 1);
	fprep__info_notify("STOPPING=1");
	fprep__metrics_http_ready(0);
	/* The doorbell port takes nothing more: a client that posted into a
	 * doorbell takes its request back and sends it through nng. The nng
	 * port goes on receiving until no slot holds a request
	 * (fprep__shutdown_progress): what arrives meanwhile gets
	 * stop_status (slot.c), not a connection reset at the close. */
	for (unsigned i = 0; i < srv->nports; i++)
		if (srv->ports[i] != &srv->nng.port)
			srv->ports[i]->ops->close(srv->ports[i]);
	/* The regions leave the table (requests in flight keep theirs until
	 * they are done); registrations still opening end with ESHUTDOWN. */
	fprep__regions_close(&srv->regions);
	if (fprep__watchdog_start(&srv->watchdog,
	                          srv->cfg->shutdown_timeout_ms +
	                                  SHUTDOWN_WATCHDOG_MARGIN_MS) != 0)
		fprep__log(FPREP_LOG_WARNING,
		           "shutdown: no watchdog thread (out of memory)");
	uv_timer_start(&srv->drain_timer, shutdown_drain_timeout,
	               (uint64_t)srv->cfg->shutdown_timeout_ms, 0);
	fprep__shutdown_progress(srv);
}

void fprep__shutdown_progress(fprep__server *srv)
{
	if (!srv->stopping || srv->forcing || srv->finished)
		return;
	/* The receives are cancelled once: a request nng completed before
	 * the cancel still comes as an event and gets stop_status. */
	if (!srv->nng.closed && shutdown_requests(srv) == 0)
		srv->nng.port.ops->close(&srv->nng.port);
	if (srv->active == 0)
		fprep__shutdown_finish(srv);
}

void fprep__shutdown_signal_cb(uv_signal_t *handle, int signum)
{
	fprep__server *srv = handle->data;
	const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";

	if (srv->stopping) {
		fprep__log(FPREP_LOG_NOTICE,
		           "%s: already shutting down (%u requests in flight)",
		           name, shutdown_requests(srv));
		return;
	}
	fprep__log(FPREP_LOG_NOTICE,
	           "%s: shutting down: no new requests, answering the "
	           "requests in flight",
	           name);
	fprep__shutdown_begin(srv, 0, FPREP_ESHUTDOWN, "server shutting down");
}

/* shutdown_free_slots frees the slots, with the messages of those the
 * loop stopped serving when the server finished (a reply its backend
 * made after the drain deadline, a request left unanswered by a forced
 * close), after the queue's last events named them. */
static void shutdown_free_slots(fprep__server *srv)
{
	for (unsigned i = 0; i < srv->nslots; i++) {
		fprep__slot *s = &srv->slots[i];

		if (s->req_msg != NULL)
			nng_msg_free(s->req_msg);
		if (s->rep_msg != NULL)
			nng_msg_free(s->rep_msg);
		s->req_msg = NULL;
		s->rep_msg = NULL;
	}
	free(srv->slots);
	free(srv->conns);
	free(srv->uids);
	srv->slots = NULL;
	srv->conns = NULL;
	srv->uids = NULL;
	srv->nslots = 0;
	srv->nconns = 0;
}

void fprep__shutdown_close_handles(fprep__server *srv)
{
	/* The waker pushes events: it stops first (with the rest of the
	 * doorbell port). Connection-closed events queued by nng_close:
	 * their regions go before the queue closes (what is left is
	 * disposed of). */
	fprep__doorbells_fini(&srv->doorbells);
	fprep__evq_drain(&srv->evq);
	fprep__evq_fini(&srv->evq);
	fprep__regions_fini(&srv->regions);
	fprep__streams_fini(srv);
	uv_close((uv_handle_t *)&srv->sigint, NULL);
	uv_close((uv_handle_t *)&srv->sigterm, NULL);
	uv_close((uv_handle_t *)&srv->sighup, NULL);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
	uv_close((uv_handle_t *)&srv->linger_timer, NULL);
	uv_close((uv_handle_t *)&srv->heartbeat_timer, NULL);
	uv_close((uv_handle_t *)&srv->sweep_timer, NULL);
	uv_close((uv_handle_t *)&srv->spin, NULL);
}

/* shutdown_close_socket ends the ordered close once the replies had their
 * chance to leave: nng_close, the aios, the uv handles. */
static void shutdown_close_socket(fprep__server *srv)
{
	uv_timer_stop(&srv->linger_timer);
	if (srv->ingress.is_open)
		fprep__ingress_close_pipes(&srv->ingress);
	fprep__ingress_close(&srv->ingress);
	/* The aios stop (their messages go) before the queue's last events
	 * are drained, and the slots those events name go after. */
	fprep__port_nng_fini(&srv->nng);
	fprep__shutdown_close_handles(srv);
	shutdown_free_slots(srv);
}

static void shutdown_linger_cb(uv_timer_t *timer)
{
	fprep__server *srv = timer->data;

	if (fprep__now_ns() < srv->linger_end_ns && shutdown_unflushed(srv))
		return;
	shutdown_close_socket(srv);
}

/* fprep__shutdown_finish runs once no slot is busy: the ordered close. */
void fprep__shutdown_finish(fprep__server *srv)
{
	if (srv->finished)
		return;
	srv->finished = 1;
	uv_timer_stop(&srv->drain_timer);
	/* No request is in flight: every region can go (unpinned first, by
	 * the backend, unless the drain deadline already closed it). */
	fprep__regions_close(&srv->regions);
	fprep__shutdown_close_backend(srv, srv->cfg->shutdown_timeout_ms);
	if (!shutdown_unflushed(srv)) {
		shutdown_close_socket(srv);
		return;
	}
	srv->linger_end_ns = shutdown_linger_end_ns(srv);
	uv_timer_start(&srv->linger_timer, shutdown_linger_cb,
	               SHUTDOWN_LINGER_POLL_MS, SHUTDOWN_LINGER_POLL_MS);
}
