/*
 * metrics_http.h: the HTTP side of frameprepd's --metrics-listen endpoint.
 *
 * One libmicrohttpd daemon on its own thread serves
 *   GET /metrics   the Prometheus text (metrics.c) and the process_* series
 *   GET /healthz   200 while the event loop turns (liveness), else 503
 *   GET /readyz    200 when requests are served, else 503 with the reason
 *                  (readiness; /ready is the same)
 * HEAD too; another method on one of these paths gets 405 with an Allow
 * header, another path 404 listing them. The connections are bounded in
 * number (in all and per client address) and in time (idle, and a whole
 * request), so slow or idle clients cannot keep a scraper out.
 */
#ifndef FPREP_SERVICE_METRICS_HTTP_H
#define FPREP_SERVICE_METRICS_HTTP_H

/* FPREP__METRICS_HTTP_CONNS: connections open at once, in all; per client
 * address, half of it. A new connection past either bound is not refused:
 * the oldest request of its address (past the address's half), or the
 * oldest one (past the whole), is cut instead (metrics_http.c). Each costs
 * a descriptor and libmicrohttpd's memory pool (32 KiB) while open. */
#define FPREP__METRICS_HTTP_CONNS 128
/* FPREP__METRICS_HTTP_IDLE_S: a connection silent this long is closed. */
#define FPREP__METRICS_HTTP_IDLE_S 5
/* FPREP__METRICS_HTTP_REQUEST_S: a connection whose request (received and
 * answered) takes longer than this, however steadily its bytes come, is
 * closed. */
#define FPREP__METRICS_HTTP_REQUEST_S 10

/* FPREP__METRICS_HTTP_STALL_S: /healthz fails once the event loop's last
 * heartbeat (fprep__metrics_http_heartbeat) is this old. */
#define FPREP__METRICS_HTTP_STALL_S 10

#endif /* FPREP_SERVICE_METRICS_HTTP_H */
