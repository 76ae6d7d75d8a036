/*
 * shutdown.c: how frameprepd stops.
 *
 * Shutdown (SIGINT, SIGTERM, or a fatal device error) goes in a fixed
 * order, since nng 1.5.2 has close races: stop receiving (cancel the posted
 * receives; slots do not post new ones) -> let the work in flight finish
 * and its replies go out, within --shutdown-timeout-ms (past it, the
 * backend is closed, which fails what is left with ESHUTDOWN) -> close the
 * regions and the backend -> let the last replies leave (a finished send
 * is only queued on the pipe: wait, up to 2 s, for the peers to
 * disconnect) -> close the remaining connections one by one
 * (nng_pipe_close; nng_close in 1.5.2 can hang on connections that are
 * still writing) -> nng_close, waited for at most 2 s (1.5.2 never
 * finishes closing a connection that was closed while a message was
 * arriving on it, as the daemon does to a client that floods it without
 * reading: the socket is then left to the process exit) -> stop and free
 * the aios -> close the event queue and the uv handles -> uv_loop_close. A
 * watchdog thread ends the process if this takes too long.
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
 * nng_close, wait up to this long for the peers to disconnect, polling
 * every SHUTDOWN_LINGER_POLL_MS, so the last replies reach them. */
#define SHUTDOWN_LINGER_MS      2000
#define SHUTDOWN_LINGER_POLL_MS 10

/* fprep__server_close_backend closes the backend once. */
void fprep__server_close_backend(fprep__server *srv, int timeout_ms)
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
	fprep__server_close_backend(srv, SHUTDOWN_FORCE_CLOSE_MS);
	fprep__evq_drain(&srv->evq);
	for (unsigned i = 0; i < srv->nslots; i++) {
		fprep__slot *s = &srv->slots[i];

		if (s->state == FPREP__SLOT_WORK && !s->direct) {
			/* The backend's threads are joined: nothing writes
			 * into these replies any more. (A direct reply's
			 * delivery ends with its own event.) */
			fprep__slot_fail(
			        s, FPREP_ESHUTDOWN,
			        "server shutting down: the backend did not "
			        "finish this request in time");
			fprep__slot_unuse_regions(s);
		}
	}
	for (unsigned i = 0; i < srv->nports; i++)
		srv->ports[i]->ops->close(srv->ports[i]);
	srv->forcing = 0;
	if (srv->active == 0) {
		fprep__server_finish(srv);
		return;
	}
	for (unsigned i = 0; i < srv->nslots; i++)
		count[srv->slots[i].state]++;
	fprep__log(FPREP_LOG_NOTICE,
	           "shutdown: waiting for %u replies being sent and %u "
	           "receives being cancelled",
	           count[FPREP__SLOT_SEND], count[FPREP__SLOT_RECV]);
}

void fprep__server_stop(fprep__server *srv, int exit_status, int status,
                        const char *why)
{
	fprep__server_want_stop(srv, exit_status, status, why);
	fprep__server_stop_wanted(srv);
}

/* fprep__server_stop_wanted begins the shutdown that
 * fprep__server_want_stop asked for: no more requests are taken; those in
 * flight are answered. */
void fprep__server_stop_wanted(fprep__server *srv)
{
	if (srv->stopping)
		return;
	srv->stopping = 1;
	atomic_store(&srv->no_direct, 1);
	fprep__server_notify("STOPPING=1");
	fprep__metrics_ready(0);
	/* The ports take nothing more: nng's receives are cancelled, and
	 * a client that posted into a doorbell takes its request back and
	 * sends it through nng, and gets stop_status there. */
	for (unsigned i = 0; i < srv->nports; i++)
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
	if (srv->active == 0 && !srv->forcing)
		fprep__server_finish(srv);
}

void fprep__server_signal_cb(uv_signal_t *handle, int signum)
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
	fprep__server_stop(srv, 0, FPREP_ESHUTDOWN, "server shutting down");
}

/* shutdown_free_slots stops and frees the aios (after nng_close: no
 * operation is pending, and aio callbacks may still push to the queue). */
static void shutdown_free_slots(fprep__server *srv)
{
	fprep__port_nng_fini(&srv->nng);
	free(srv->slots);
	free(srv->conns);
	srv->slots = NULL;
	srv->conns = NULL;
	srv->nslots = 0;
	srv->nconns = 0;
}

void fprep__server_close_handles(fprep__server *srv)
{
	/* The waker pushes events: it stops first (with the rest of the
	 * doorbell port). Connection-closed events queued by nng_close:
	 * their regions go before the queue closes (what is left is
	 * disposed of). */
	fprep__doorbells_fini(&srv->doorbells);
	fprep__evq_drain(&srv->evq);
	fprep__evq_fini(&srv->evq);
	fprep__regions_fini(&srv->regions);
	uv_close((uv_handle_t *)&srv->sigint, NULL);
	uv_close((uv_handle_t *)&srv->sigterm, NULL);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
	uv_close((uv_handle_t *)&srv->linger_timer, NULL);
	uv_close((uv_handle_t *)&srv->heartbeat_timer, NULL);
	uv_close((uv_handle_t *)&srv->spin, NULL);
}

/* shutdown_close_socket ends the ordered close once the replies had their
 * chance to leave: nng_close, the aios, the uv handles. */
static void shutdown_close_socket(fprep__server *srv)
{
	uv_timer_stop(&srv->linger_timer);
	if (srv->ingress.is_open)
		fprep__ingress_close_pipes(&srv->ingress);
	if (fprep__ingress_close(&srv->ingress) != 0)
		srv->socket_left = 1;
	shutdown_free_slots(srv);
	fprep__server_close_handles(srv);
}

static void shutdown_linger_cb(uv_timer_t *timer)
{
	fprep__server *srv = timer->data;

	if (fprep__ingress_pipes(&srv->ingress) > 0 &&
	    fprep__now_ns() < srv->linger_end_ns)
		return;
	shutdown_close_socket(srv);
}

/* fprep__server_finish runs once no slot is busy: the ordered close. */
void fprep__server_finish(fprep__server *srv)
{
	if (srv->finished)
		return;
	srv->finished = 1;
	uv_timer_stop(&srv->drain_timer);
	/* No request is in flight: every region can go (unpinned first, by
	 * the backend, unless the drain deadline already closed it). */
	fprep__regions_close(&srv->regions);
	fprep__server_close_backend(srv, srv->cfg->shutdown_timeout_ms);
	if (!srv->ingress.is_open || fprep__ingress_pipes(&srv->ingress) == 0) {
		shutdown_close_socket(srv);
		return;
	}
	srv->linger_end_ns =
	        fprep__now_ns() + (uint64_t)SHUTDOWN_LINGER_MS * 1000000u;
	uv_timer_start(&srv->linger_timer, shutdown_linger_cb,
	               SHUTDOWN_LINGER_POLL_MS, SHUTDOWN_LINGER_POLL_MS);
}
