/*
 * server.c: frameprepd's event loop (see server.h): set-up, the event
 * dispatch and fprep__server_run; server_internal.h lists the other files.
 *
 * The design is simple: one libuv loop thread owns every request. A
 * request lives in a slot, one per nng context; the number of slots is the
 * in-flight bound (slot.c). nng's aio callbacks, the backend's completion
 * callbacks, the regions' operations and the ingress's closed-connection
 * notices run on other threads: they only record the result and push it
 * onto the event queue (evq.c), which the loop drains whole at each
 * wake-up and hands out here by the event's kind. Every request received
 * gets exactly one reply; a request that cannot be served gets an error
 * reply naming the reason (answer.c). Shutdown goes in a fixed order
 * (shutdown.c).
 */
#include "server.h"

#include <nng/nng.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#ifdef FPREP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "server_internal.h"

void fprep__server_notify(const char *state)
{
#ifdef FPREP_HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

/* server_spin_cb runs at each turn of the loop while the spin is on: it
 * takes the queue's events without waiting for the wake-up's turn, and
 * stops the spin once the loop has had no event for --spin-us, so the
 * loop sleeps in epoll again. Spinning trades a core for the tens of
 * microseconds a sleeping thread takes to wake, at every hand-off. */
static void server_spin_cb(uv_idle_t *handle)
{
	fprep__server *srv = handle->data;

	fprep__evq_drain(&srv->evq);
	if (srv->ndoorbells > 0 && fprep__doorbell_poll(srv) > 0)
		srv->last_event_ns = fprep__now_ns();
	if (fprep__now_ns() - srv->last_event_ns <= srv->spin_ns)
		return;
	/* The doorbells say nobody polls, then are looked at once more: a
	 * client that posted before it read that is served (protocol.h). */
	fprep__doorbell_set_polling(srv, 0);
	if (srv->ndoorbells > 0 && fprep__doorbell_poll(srv) > 0) {
		fprep__doorbell_set_polling(srv, 1);
		srv->last_event_ns = fprep__now_ns();
		return;
	}
	uv_idle_stop(handle);
}

/* server_event handles one event of the loop's queue. */
static void server_event(fprep__event *ev, void *data)
{
	fprep__server *srv = data;
	fprep__slot *s;

	if (srv->spin_ns > 0 && !srv->finished) {
		srv->last_event_ns = fprep__now_ns();
		if (!uv_is_active((uv_handle_t *)&srv->spin)) {
			uv_idle_start(&srv->spin, server_spin_cb);
			fprep__doorbell_set_polling(srv, !srv->stopping);
		}
	}

	switch (ev->kind) {
	case FPREP__EV_REGION:
		fprep__regions_event(&srv->regions, ev);
		return;
	case FPREP__EV_PIPE_CLOSED:
		fprep__conn_closed(srv, ev);
		return;
	case FPREP__EV_DOORBELL:
		if (!srv->finished)
			fprep__doorbell_rung(srv);
		else
			atomic_store(&srv->waker.queued, 0);
		return;
	default:
		s = fprep__container_of(ev, fprep__slot, ev);
		if (!srv->finished)
			fprep__slot_event(s);
		return;
	}
}

/* server_event_dispose releases an event the queue dropped at its close:
 * a connection-closed event owns its memory; a slot's is the slot. */
static void server_event_dispose(fprep__event *ev, void *data)
{
	(void)data;
	if (ev->kind == FPREP__EV_PIPE_CLOSED)
		fprep__conn_closed(NULL, ev);
}

/* server_open_slots allocates the slots: --max-inflight with an nng
 * context each, then as many for the doorbell pool when doorbells are on
 * (--max-doorbells > 0), and a connection entry for each. */
static int server_open_slots(fprep__server *srv)
{
	const fprep__config *cfg = srv->cfg;
	unsigned pool = cfg->max_doorbells > 0 ? cfg->max_inflight : 0;
	int rv;

	srv->nng_slots = cfg->max_inflight;
	srv->nslots = srv->nng_slots + pool;
	srv->slots = calloc(srv->nslots, sizeof(*srv->slots));
	srv->conns = calloc(srv->nslots, sizeof(*srv->conns));
	srv->doorbells =
	        calloc(cfg->max_doorbells + 1, sizeof(*srv->doorbells));
	srv->doorbell_free = calloc(pool + 1, sizeof(*srv->doorbell_free));
	if (srv->slots == NULL || srv->conns == NULL ||
	    srv->doorbells == NULL || srv->doorbell_free == NULL)
		return FPREP_ENOMEM;
	for (unsigned i = 0; i < srv->nslots; i++) {
		fprep__slot *s = &srv->slots[i];

		s->srv = srv;
		s->index = i;
		if (i >= srv->nng_slots) {
			s->doorbell = 1;
			srv->doorbell_free[srv->ndoorbell_free++] = s;
			continue;
		}
		rv = nng_aio_alloc(&s->aio, fprep__slot_aio_cb, s);
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

/* server_init_loop sets up the loop and its handles. */
static int server_init_loop(fprep__server *srv)
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
	uv_idle_init(&srv->loop, &srv->spin);
	srv->spin.data = srv;
	srv->spin_ns =
	        srv->cfg->spin_us > 0 ? (uint64_t)srv->cfg->spin_us * 1000u : 0;
	srv->sigint.data = srv;
	srv->sigterm.data = srv;
	srv->drain_timer.data = srv;
	srv->linger_timer.data = srv;
	rv = uv_signal_start(&srv->sigint, fprep__server_signal_cb, SIGINT);
	if (rv == 0)
		rv = uv_signal_start(&srv->sigterm, fprep__server_signal_cb,
		                     SIGTERM);
	if (rv != 0) {
		fprep__server_close_handles(srv);
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
	fprep__server *srv;
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
		fprep__server_close_backend(srv, cfg->shutdown_timeout_ms);
		free(srv);
		return 1;
	}
	fprep__regions_init(&srv->regions, backend, &srv->evq, FPREP__EV_REGION,
	                    cfg->max_regions, cfg->max_region_bytes,
	                    cfg->max_shm_bytes);
	fprep__regions_set_cuda(&srv->regions, cfg->allow_cuda_regions,
	                        cfg->max_cuda_regions);
	rv = fprep__ingress_open(&srv->ingress, cfg);
	if (rv == 0)
		fprep__ingress_on_close(&srv->ingress,
		                        fprep__server_pipe_closed, srv);
	if (rv == 0)
		rv = server_open_slots(srv);
	if (rv != 0) {
		/* Start-up failed: the same ordered close, with no work. */
		srv->stopping = 1;
		srv->exit_status = 1;
		fprep__server_finish(srv);
	} else {
		fprep__doorbell_waker_start(srv);
		for (unsigned i = 0; i < srv->nng_slots; i++)
			fprep__slot_recv(&srv->slots[i]);
		fprep__server_log_start(srv);
		fprep__server_notify("READY=1\nSTATUS=serving");
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
	/* A socket that nng could not close still has threads running in
	 * it, which may call into srv->ingress and hold nng's memory: the
	 * process ends here, without exit handlers, so nothing is torn down
	 * (or reported leaked) under them. */
	if (srv->socket_left)
		_exit(status);
	free(srv);
	return status;
}
