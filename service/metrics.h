/*
 * metrics.h: frameprepd's Prometheus endpoint (--metrics-listen).
 *
 * The counters, gauges and histograms live in this module, one set per
 * process. Whichever thread sees an event updates them with relaxed C11
 * atomics: a request costs a few atomic adds, and nothing when the
 * endpoint is off. An HTTP server (libmicrohttpd, metrics_http.h) on its
 * own thread answers GET /metrics in the Prometheus text format (version
 * 0.0.4), and the health checks; it only reads the atomics, so a scrape
 * never waits for the event loop. The server's calls (fprep__metrics_http_*)
 * are metrics_http.c's, the counters' the others, metrics.c's.
 * Durations are in seconds, following the Prometheus naming guide.
 */
#ifndef FPREP_SERVICE_METRICS_H
#define FPREP_SERVICE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "frameprep/protocol.h"

/* fprep__metrics_http_open starts the endpoint on listen ("HOST:PORT"; HOST a
 * name or address, empty for every interface, [v6] for IPv6; PORT 0 picks
 * a free port, which is logged) and turns the counting on. device labels
 * the per-device series ("cpu", "cuda:0"); it is copied. Call before any
 * request is served, from main. Returns 0, FPREP_EINVAL (listen is
 * malformed or names no address) or FPREP_ETRANSPORT (the port cannot be
 * bound), logged. */
int fprep__metrics_http_open(const char *listen, const char *device);

/* FPREP__METRICS_MAX_LANES: lanes with series of their own; later ones
 * count as lane 0. */
#define FPREP__METRICS_MAX_LANES 64

/* fprep__metrics_set_lanes labels the per-lane series: lane l runs on GPU
 * devices[l] (n lanes). Without it there is one lane, labelled with the
 * device given to fprep__metrics_http_open. Call from main before requests are
 * served. */
void fprep__metrics_set_lanes(const int *devices, unsigned n);

/* fprep__metrics_http_close stops the endpoint (no scrape runs afterwards) and
 * turns the counting off. Safe when it was never opened.
 * fprep__metrics_http_open and fprep__metrics_http_close are metrics_http.c's:
 * they start and stop the counting of this file (fprep__metrics_start,
 * fprep__metrics_stop) around the HTTP server, so that the counters never call
 * the server. */
void fprep__metrics_http_close(void);

/* fprep__metrics_start turns the counting on; device as for
 * fprep__metrics_http_open. fprep__metrics_stop turns it off and forgets the
 * backend. From main's thread. */
void fprep__metrics_start(const char *device);
void fprep__metrics_stop(void);

/* fprep__metrics_http_port returns the TCP port the endpoint listens on, or 0
 * when it is off (metrics_http.c). */
unsigned fprep__metrics_http_port(void);

/* fprep__metrics_http_ready tells the endpoint's /readyz whether the server
 * takes requests: 1 once its listener and request slots are up, 0 once it
 * stops taking them (shutdown). Until the first call /readyz says
 * "starting"; with 1 it also asks that the backend have a lane in
 * service. Any thread (metrics_http.c). */
void fprep__metrics_http_ready(int ready);

/* fprep__metrics_http_heartbeat tells the endpoint's /healthz that the event
 * loop turns: the loop calls it every second at least, and /healthz
 * answers 503 once the last call is FPREP__METRICS_HTTP_STALL_S old (200
 * before the first). Any thread (metrics_http.c). */
void fprep__metrics_http_heartbeat(void);

/* fprep__metrics_http_liveness decides liveness as /healthz does: writes its
 * body ("ok\n" or "not live: ...\n") into buf (size bytes) and returns 1
 * while the loop's heartbeat is recent. fprep__metrics_http_readiness decides
 * readiness as /readyz does, from fprep__metrics_http_ready's state and st (the
 * backend's figures; NULL when it keeps none): writes "ready\n" or "not
 * ready: REASON\n" and returns 1 when ready. Both keep their state
 * whether or not the endpoint is open (INFO's health lines use them). Any
 * thread (metrics_http.c). */
int fprep__metrics_http_liveness(char *buf, size_t size);
int fprep__metrics_http_readiness(const fprep__backend_stats *st, char *buf,
                                  size_t size);

/* fprep__metrics_text writes the frameprep_* exposition (every family of
 * this module, in the Prometheus text format). Returns a NUL-terminated
 * text the caller frees, its length in *len; NULL when out of memory. Any
 * thread (the HTTP server's). */
char *fprep__metrics_text(size_t *len);

/* fprep__metrics_backend_stats fills st from the backend named by
 * fprep__metrics_set_backend. Returns 1, or 0 (st zeroed) when there is
 * none or it keeps no figures. Any thread. */
int fprep__metrics_backend_stats(fprep__backend_stats *st);

/* fprep__metrics_set_backend names the backend asked for GPU memory and
 * kernel-cache figures at each scrape (its metrics hook, when it has one),
 * or NULL before the backend closes: once it returns, no scrape uses the
 * old backend. Any thread. */
void fprep__metrics_set_backend(fprep__backend *b);

/* fprep__metrics_limits publishes the budgets the in-flight and shared-
 * memory gauges are measured against: max_inflight (nng contexts: requests
 * in flight at once) and max_shm_bytes (all regions together); a 0 is not
 * shown. Any thread; called once the server is up (info.c). */
void fprep__metrics_limits(unsigned max_inflight, uint64_t max_shm_bytes);

/* fprep__metrics_doorbells publishes the doorbell areas the daemon polls
 * now, n (port_doorbell.c sets it whenever the number changes), and max,
 * --max-doorbells, which bounds them. Any thread. */
void fprep__metrics_doorbells(unsigned n, unsigned max);

/* fprep__metrics_request counts a request of bytes (the whole message)
 * that arrived; it is in flight until fprep__metrics_request_end. */
void fprep__metrics_request(size_t bytes);

/* fprep__metrics_reply counts a reply delivered: h is the header it was
 * built from (its kind, from protocol.h's kind table, and status label the
 * request count; the timings of a tensor reply feed the duration
 * histograms, the stage ones of the lane that ran it, fprep__job.lane, the
 * GPU stages only with lanes (fprep__metrics_set_lanes); an error reply's
 * t_total_us, when not 0, feeds the failed-request histogram),
 * bytes what it put on the wire or in shared memory (header and payload).
 * Any thread. */
void fprep__metrics_reply(const fprep_reply_header *h, uint64_t bytes,
                          unsigned lane);

/* fprep__metrics_request_end ends a request counted by
 * fprep__metrics_request, answered or dropped. */
void fprep__metrics_request_end(void);

/* fprep__metrics_connection counts a connection opened (delta 1) or
 * closed (-1). Any thread. */
void fprep__metrics_connection(int delta);

/* fprep__metrics_region counts a shared-memory region of bytes entering
 * (delta 1) or leaving (-1) the table; pinned: registered with the GPU. */
void fprep__metrics_region(int delta, uint64_t bytes, int pinned);

#endif /* FPREP_SERVICE_METRICS_H */
