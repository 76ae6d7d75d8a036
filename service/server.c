/*
 * server.c: frameprepd's event loop (see server.h): set-up, the event
 * dispatch, the spin and fprep__server_run; daemon.h lists the other
 * files.
 *
 * The design is simple: one libuv loop thread owns every request. Requests
 * come in through two ports (port.h): the nng port's slots, one per nng
 * context, and the doorbell port's pool; the number of slots bounds the
 * work in flight. nng's aio callbacks, the backend's completion callbacks,
 * the regions' operations, the doorbells' waker and the ingress's
 * closed-connection notices run on other threads: they only record the
 * result and push it onto the event queue (evq.c), which the loop drains
 * whole at each wake-up and hands out here by the event's kind. Every
 * request taken gets exactly one reply; a request that cannot be served
 * gets an error reply naming the reason (answer.c). After each event the
 * loop begins the shutdown if a file below asked for it, and runs the
 * ordered close once nothing is in flight (shutdown.c).
 */
#include "server.h"

#include <inttypes.h>
#include <malloc.h>
#include <nng/nng.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#ifdef FPREP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"

/* server_spin_cb runs at each turn of the loop while the spin is on: it
 * takes the queue's events without waiting for the wake-up's turn, and
 * stops the spin once the loop has had no event for --spin-us, or while
 * the backend has a backlog (server_backlog), so the loop sleeps in epoll
 * again. Spinning trades a core for the tens of microseconds a sleeping
 * thread takes to wake, at every hand-off; with jobs already waiting in
 * the backend those microseconds delay no reply, and the core is better
 * left to the threads doing the work. */
/* server_pipe_closed: connection pipe closed; its doorbells and regions
 * go. */
static void server_pipe_closed(fprep__server *srv, uint32_t pipe)
{
	unsigned n;

	if (srv->finished)
		return;
	fprep__doorbells_drop_pipe(&srv->doorbells, pipe);
	fprep__streams_drop_pipe(srv, pipe);
	n = fprep__regions_remove_pipe(&srv->regions, pipe);
	if (n > 0)
		fprep__log(FPREP_LOG_INFO,
		           "connection %" PRIu32 " closed: %u regions removed",
		           pipe, n);
}

/* server_backlog tells whether the backend holds more jobs than it runs
 * at once, by at least one a lane (fprep__server.busy_bound): a request
 * taken sooner would wait there all the same. */
static int server_backlog(const fprep__server *srv)
{
	return srv->busy_bound > 0 && srv->working >= srv->busy_bound;
}

/* server_busy: whether an event leaves the spin off, the backend still
 * holding as many jobs as it runs (fprep__server.busy_resume): between
 * that and a backlog the spin stays as it is, so it does not flap. */
static int server_busy(const fprep__server *srv)
{
	return srv->busy_bound > 0 && srv->working >= srv->busy_resume;
}

/* server_set_bounds sets fprep__server.busy_bound and busy_resume for
 * backend b (a backend over several lanes sums its lanes' capacities);
 * where b's capacity is unknown (0), each lane counts --slots (its stats
 * give the lanes). */
static void server_set_bounds(fprep__server *srv, fprep__backend *b,
                              const fprep__config *cfg)
{
	fprep__backend_stats st = {0};
	unsigned cap = b->capacity, lanes;

	if (b->stats != NULL)
		b->stats(b, &st);
	lanes = st.lanes > 0 ? st.lanes : 1;
	if (cap == 0 && st.lanes > 0)
		cap = st.lanes * cfg->slots;
	srv->busy_resume = cap;
	srv->busy_bound = cap > 0 ? cap + lanes : 0;
}

/* server_poll asks every port to poll; returns how many requests they
 * took. */
static unsigned server_poll(fprep__server *srv)
{
	unsigned taken = 0;

	for (unsigned i = 0; i < srv->nports; i++)
		if (srv->ports[i]->ops->poll != NULL)
			taken += srv->ports[i]->ops->poll(srv->ports[i]);
	return taken;
}

/* server_set_spin tells every port whether the loop polls it. */
static void server_set_spin(fprep__server *srv, int on)
{
	srv->spinning = on;
	for (unsigned i = 0; i < srv->nports; i++)
		if (srv->ports[i]->ops->spin != NULL)
			srv->ports[i]->ops->spin(srv->ports[i], on);
}

/* server_after handles what an event may have asked for: the shutdown,
 * and the ordered close once no slot is busy. */
static void server_after(fprep__server *srv)
{
	if (srv->stop_wanted && !srv->stopping)
		fprep__shutdown_begin_wanted(srv);
	fprep__shutdown_progress(srv);
}

static void server_spin_cb(uv_idle_t *handle)
{
	fprep__server *srv = handle->data;

	uint64_t last = srv->last_event_ns;
	int backlog;

	fprep__evq_drain(&srv->evq);
	if (srv->finished) {
		uv_idle_stop(handle);
		return;
	}
	if (server_poll(srv) > 0)
		srv->last_event_ns = fprep__now_ns();
	server_after(srv);
	srv->spin_turns++;
	srv->spin_empty += srv->last_event_ns == last;
	backlog = server_backlog(srv);
	if (srv->finished ||
	    (!backlog && fprep__now_ns() - srv->last_event_ns <= srv->spin_ns))
		return;
	srv->spin_backlogs += backlog;
	/* The ports hear that nobody polls, then are asked once more: a
	 * client that posted before it read that is served (protocol.h). */
	server_set_spin(srv, 0);
	if (server_poll(srv) > 0) {
		srv->last_event_ns = fprep__now_ns();
		server_after(srv);
		if (!srv->finished && !server_backlog(srv)) {
			server_set_spin(srv, !srv->stopping);
			return;
		}
	}
	uv_idle_stop(handle);
}

/* server_spin_start notes an event and starts the loop's spin (when
 * --spin-us asks for one and the backend has room). */
static void server_spin_start(fprep__server *srv)
{
	if (srv->spin_ns == 0 || srv->finished)
		return;
	srv->last_event_ns = fprep__now_ns();
	if (!uv_is_active((uv_handle_t *)&srv->spin) && !server_busy(srv)) {
		uv_idle_start(&srv->spin, server_spin_cb);
		server_set_spin(srv, !srv->stopping);
	}
}

/* server_event handles one event of the loop's queue. */
static void server_event(fprep__event *ev, void *data)
{
	fprep__server *srv = data;
	fprep__slot *s;

	FPREP__LOOP_ONLY(srv);
	/* A ring that finds nothing posted starts no spin: a client ringing
	 * without posting costs the loop a look at the entries, not
	 * --spin-us of polling per ring. */
	if (ev->kind == FPREP__EV_DOORBELL) {
		if (srv->finished) {
			atomic_store(&srv->doorbells.waker.queued, 0);
			return;
		}
		if (fprep__doorbells_rung(&srv->doorbells) > 0)
			server_spin_start(srv);
		return;
	}
	server_spin_start(srv);

	switch (ev->kind) {
	case FPREP__EV_REGION:
		fprep__regions_event(&srv->regions, ev);
		break;
	case FPREP__EV_PIPE_CLOSED:
		server_pipe_closed(srv, fprep__conns_closed_pipe(ev));
		break;
	default:
		s = fprep__container_of(ev, fprep__slot, ev);
		if (srv->finished)
			break;
		if (ev->kind == FPREP__EV_AIO && s->state == FPREP__SLOT_RECV) {
			fprep__port_nng_event(s);
			break;
		}
		if (ev->kind == FPREP__EV_AIO && s->aio_result == 0) {
			fprep__shutdown_reply_sent(srv, s);
			fprep__conn_progress(s);
		}
		fprep__slot_event(s);
		break;
	}
	server_after(srv);
}

/* server_event_dispose releases an event the queue dropped at its close:
 * a connection-closed event owns its memory; a slot's is the slot. */
static void server_event_dispose(fprep__event *ev, void *data)
{
	(void)data;
	if (ev->kind == FPREP__EV_PIPE_CLOSED)
		(void)fprep__conns_closed_pipe(ev);
}

/* server_open_slots allocates the slots: --max-inflight for the nng
 * port, then as many for the doorbell port's pool when doorbells are on
 * (--max-doorbells > 0), and a connection entry for each; and sets up
 * both ports. */
static int server_open_slots(fprep__server *srv)
{
	const fprep__config *cfg = srv->cfg;
	unsigned nng = cfg->max_inflight;
	unsigned pool = cfg->max_doorbells > 0 ? cfg->max_inflight : 0;
	int rv;

	srv->nslots = nng + pool;
	srv->nconns = srv->nslots;
	srv->slots = calloc(srv->nslots, sizeof(*srv->slots));
	srv->conns = calloc(srv->nconns, sizeof(*srv->conns));
	srv->uids = calloc(srv->nconns, sizeof(*srv->uids));
	if (srv->slots == NULL || srv->conns == NULL || srv->uids == NULL)
		return FPREP_ENOMEM;
	for (unsigned i = 0; i < srv->nslots; i++) {
		srv->slots[i].srv = srv;
		srv->slots[i].index = i;
	}
	rv = fprep__doorbells_init(&srv->doorbells, srv, srv->slots + nng,
	                           pool);
	if (rv != 0)
		return rv;
	rv = fprep__port_nng_open(&srv->nng, srv, srv->slots, nng);
	if (rv != 0)
		return rv;
	srv->nng.port.take = fprep__slot_take;
	srv->doorbells.port.take = fprep__slot_take;
	srv->ports[0] = &srv->nng.port;
	srv->ports[1] = &srv->doorbells.port;
	srv->nports = 2;
	return 0;
}

/* server_init_loop sets up the loop and its handles. */
/* server_sighup_cb: SIGHUP reloads the settings file (the live settings
 * change, the others are named and kept: config.h, fprep__config_reload). */
static void server_sighup_cb(uv_signal_t *handle, int signum)
{
	fprep__server *srv = handle->data;
	char changed[1024], kept[512], err[1024];
	int rv;

	(void)signum;
	FPREP__LOOP_ONLY(srv);
	/* systemd sees the reload begin and end (ExecReload only sends the
	 * signal); not while the daemon stops. */
	if (!srv->stopping)
		fprep__info_notify("RELOADING=1");
	rv = fprep__config_reload(srv->cfg, changed, sizeof(changed), kept,
	                          sizeof(kept), err, sizeof(err));
	if (!srv->stopping)
		fprep__info_notify("READY=1\nSTATUS=serving");
	if (rv == FPREP__RELOAD_NO_FILE) {
		fprep__log(FPREP_LOG_NOTICE,
		           "SIGHUP: started without --config: nothing to "
		           "reload");
		return;
	}
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR,
		           "SIGHUP: %s refused, nothing changed: %s",
		           srv->cfg->config_file, err);
		return;
	}
	/* The live settings other threads see go through the loop: the log
	 * level (an atomic), the spin; the limits and the send timeout are
	 * copied into each request's slot as it is submitted (slot.c). */
	fprep__log_set_level(srv->cfg->log_level);
	srv->spin_ns =
	        srv->cfg->spin_us > 0 ? (uint64_t)srv->cfg->spin_us * 1000u : 0;
	fprep__log(FPREP_LOG_NOTICE, "SIGHUP: reloaded %s: %s",
	           srv->cfg->config_file,
	           changed[0] != '\0' ? changed : "no live setting changed");
	if (kept[0] != '\0')
		fprep__log(FPREP_LOG_WARNING,
		           "SIGHUP: kept: %s (restart to change)", kept);
}

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
	uv_signal_init(&srv->loop, &srv->sighup);
	uv_timer_init(&srv->loop, &srv->drain_timer);
	uv_timer_init(&srv->loop, &srv->linger_timer);
	uv_timer_init(&srv->loop, &srv->heartbeat_timer);
	srv->heartbeat_timer.data = srv;
	uv_timer_init(&srv->loop, &srv->sweep_timer);
	srv->sweep_timer.data = srv;
	uv_idle_init(&srv->loop, &srv->spin);
	srv->spin.data = srv;
	srv->spin_ns =
	        srv->cfg->spin_us > 0 ? (uint64_t)srv->cfg->spin_us * 1000u : 0;
	srv->sigint.data = srv;
	srv->sigterm.data = srv;
	srv->sighup.data = srv;
	srv->drain_timer.data = srv;
	srv->linger_timer.data = srv;
	rv = uv_signal_start(&srv->sigint, fprep__shutdown_signal_cb, SIGINT);
	if (rv == 0)
		rv = uv_signal_start(&srv->sigterm, fprep__shutdown_signal_cb,
		                     SIGTERM);
	if (rv == 0)
		rv = uv_signal_start(&srv->sighup, server_sighup_cb, SIGHUP);
	if (rv != 0) {
		fprep__shutdown_close_handles(srv);
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

/* SERVER_HEARTBEAT_MS: the loop's heartbeat period, at most. */
#define SERVER_HEARTBEAT_MS 1000

/* server_heartbeat_cb tells the metrics endpoint's /healthz, and systemd
 * when its watchdog is on, that the loop still turns. */
static void server_heartbeat_cb(uv_timer_t *timer)
{
	fprep__server *srv = timer->data;

	fprep__metrics_http_heartbeat();
	fprep__ingress_tick(&srv->ingress);
	/* Replies are freed on nng's and the backend's threads, into
	 * glibc's arenas, which keep the memory: once the replies are gone
	 * it goes back to the system (non-readers' replies grew the arenas
	 * to a gigabyte, kept after they left). */
	if (srv->trim_wanted && srv->reply_bytes == 0 && srv->nng_held == 0) {
		malloc_trim(0);
		srv->trim_wanted = 0;
	}
	if (srv->sd_watchdog)
		fprep__info_notify("WATCHDOG=1");
}

/* server_heartbeat_start starts the loop's heartbeat: every second, or at
 * half the unit's WatchdogSec when that is shorter, so that a loop that
 * stops turning fails /healthz and gets the daemon restarted. The timer
 * is closed with the other handles (shutdown.c). */
static void server_heartbeat_start(fprep__server *srv)
{
	uint64_t period = SERVER_HEARTBEAT_MS;
#ifdef FPREP_HAVE_SYSTEMD
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
		srv->sd_watchdog = 1;
		if (usec / 2000 < period)
			period = usec / 2000;
		fprep__log(FPREP_LOG_INFO,
		           "systemd watchdog: a keep-alive every %" PRIu64
		           " ms",
		           period);
	}
#endif
	uv_timer_start(&srv->heartbeat_timer, server_heartbeat_cb, 0, period);
}

int fprep__server_run(fprep__config *cfg, fprep__backend *backend,
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
	fprep__config_resolve(cfg);
	srv->cfg = cfg;
	srv->loop_thread = pthread_self();
	srv->backend = backend;
	server_set_bounds(srv, backend, cfg);
	srv->device = device;
	srv->t_start_ns = fprep__now_ns();
	if (server_init_loop(srv) != 0) {
		fprep__shutdown_close_backend(srv, cfg->shutdown_timeout_ms);
		free(srv);
		return 1;
	}
	fprep__regions_init(&srv->regions, backend, &srv->evq, FPREP__EV_REGION,
	                    cfg->max_regions, cfg->max_region_bytes,
	                    cfg->max_shm_bytes);
	fprep__regions_set_cuda(&srv->regions, cfg->allow_cuda_regions,
	                        cfg->max_cuda_regions);
	fprep__regions_set_shares(&srv->regions, &cfg->shares);
	rv = fprep__ingress_open(&srv->ingress, cfg);
	if (rv == 0)
		fprep__ingress_on_close(&srv->ingress, fprep__conns_pipe_closed,
		                        srv);
	if (rv == 0)
		rv = server_open_slots(srv);
	if (rv != 0) {
		/* Start-up failed: the same ordered close, with no work. */
		srv->stopping = 1;
		srv->exit_status = 1;
		fprep__shutdown_finish(srv);
	} else {
		fprep__port_nng_start(&srv->nng);
		fprep__info_log_start(srv);
		fprep__info_notify("READY=1\nSTATUS=serving");
		fprep__metrics_http_ready(1);
		server_heartbeat_start(srv);
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
	if (srv->spin_turns > 0)
		fprep__log(FPREP_LOG_INFO,
		           "loop spin: %" PRIu64 " turns, %" PRIu64
		           " found nothing; stopped %" PRIu64
		           " times for a backlog (%u jobs)",
		           srv->spin_turns, srv->spin_empty, srv->spin_backlogs,
		           srv->busy_bound);
	free(srv);
	return status;
}
