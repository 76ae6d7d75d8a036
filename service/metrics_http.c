/*
 * metrics_http.c: the HTTP server of --metrics-listen (see metrics_http.h).
 *
 * The design is simple: libmicrohttpd's internal thread answers every
 * request at once from atomics (metrics.c's counters, the readiness state
 * here) and /proc/self; nothing waits for the event loop. Slow clients are
 * bounded three ways: libmicrohttpd's connection limits (in all, and per
 * address) and its idle timeout, and a deadline of our own on each request
 * (libmicrohttpd has none: a client that sends a header byte a second is
 * never idle). A reaper thread wakes every second and shuts down (shutdown
 * (2), which libmicrohttpd then sees as the peer's end) the connections
 * whose request began more than FPREP__METRICS_HTTP_REQUEST_S ago. The
 * table of connections is kept under a mutex that libmicrohttpd's
 * connection-closed notice also takes, before it closes the socket: the
 * reaper never shuts down a descriptor that was closed and reused.
 *
 * Slow clients that connect again as soon as they are cut would hold every
 * place all the same (32 from one address left 1 scrape of 20 through, 64
 * none, when the newcomer was refused), so a new connection is never
 * refused for want of a place: past FPREP__METRICS_HTTP_CONNS / 2
 * connections of its address the one of that address whose request began
 * longest ago is cut, past FPREP__METRICS_HTTP_CONNS in all the oldest of
 * all. A scraper sends its request as it connects and is answered in a
 * turn or two of libmicrohttpd's loop; a connection whose request arrived
 * whole is cut only when every other one's did too, so slow clients that
 * reconnect faster than a scrape is answered cut one another, not the
 * scrape. Whole means read by libmicrohttpd, or lying in the socket with
 * its head's end, not read yet (http_whole peeks when the connection
 * comes and when it would be cut): a loop busy with thousands of
 * connections a second reads a scrape's request late, and the slow ones
 * cut it meanwhile (1 to 4 scrapes of 20 lost). While the slow ones fit
 * in their address's half (64), nobody is cut and they come back only
 * after the idle timeout; past it, a scrape lasts as long as it takes
 * that many of them to connect.
 */
#include "metrics_http.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frameprep/frameprep.h"
#include "log.h"
#include "metrics.h"

/* http_conn: one connection's entry in the table; its socket context. */
struct http_conn {
	int fd;            /* -1: the entry is free */
	uint64_t begun_s;  /* CLOCK_MONOTONIC second its request began */
	uint64_t begun_ns; /* the same, in ns: the order of eviction */
	int cut;           /* shut down: its close is on its way */
	int answering;     /* its request arrived whole (read, or seen in the
	                      socket: http_whole) and is being answered */
	uint8_t addr[17];  /* the peer's family and address */
};

/* HTTP_ENTRIES: the table's size, room for the connections cut and not
 * yet closed besides those served. */
#define HTTP_ENTRIES (2 * FPREP__METRICS_HTTP_CONNS)

static struct {
	struct MHD_Daemon *httpd;
	unsigned port;
	atomic_int ready;         /* -1 starting, 1 serving, 0 stopped */
	_Atomic uint64_t beat_ms; /* the loop's last heartbeat; 0: none yet */
	double start_time;        /* process start, seconds since the epoch */

	pthread_mutex_t mu; /* guards conns, cut and stop */
	uint64_t cut;       /* connections cut for a new one, not yet logged */
	pthread_cond_t wake;
	struct http_conn conns[HTTP_ENTRIES];
	int stop;
	pthread_t reaper;
	int reaper_started;
} http = {
        .ready = -1,
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .wake = PTHREAD_COND_INITIALIZER,
};

static const char *const http_paths[] = {"/metrics", "/healthz", "/readyz",
                                         "/ready"};

static uint64_t http_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static uint64_t http_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* http_addr_key writes the family and address of sa into key (zeroed
 * first). */
static void http_addr_key(const struct sockaddr *sa, uint8_t key[17])
{
	memset(key, 0, 17);
	if (sa == NULL)
		return;
	key[0] = (uint8_t)sa->sa_family;
	if (sa->sa_family == AF_INET)
		memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6)
		memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
}

/* http_whole tells whether c's request has arrived whole, marking it
 * answering: read already, or its head's end in the socket, not yet read
 * (peeked; a scraper's request comes with its connection, and may wait
 * there for a turn of libmicrohttpd's loop). With http.mu held, on
 * libmicrohttpd's thread (which alone closes c->fd). */
static int http_whole(struct http_conn *c)
{
	char buf[2048];
	ssize_t n;

	if (c->answering)
		return 1;
	n = recv(c->fd, buf, sizeof(buf) - 1, MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	c->answering = memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL;
	return c->answering;
}

/* http_older tells whether c goes before o: one still waiting for its
 * request before one being answered, then the one begun first. */
static int http_older(const struct http_conn *c, const struct http_conn *o)
{
	if (o == NULL)
		return 1;
	if (c->answering != o->answering)
		return !c->answering;
	return c->begun_ns < o->begun_ns;
}

/* http_victim returns the connection that a new one from addr replaces
 * when its address already holds half the places, or all places are held
 * (see the top of this file), or NULL. With http.mu held. */
static struct http_conn *http_victim(const uint8_t addr[17])
{
	struct http_conn *oldest = NULL, *oldest_here = NULL;
	unsigned live = 0, here = 0;

	for (unsigned i = 0; i < HTTP_ENTRIES; i++) {
		struct http_conn *c = &http.conns[i];

		if (c->fd < 0 || c->cut)
			continue;
		live++;
		if (http_older(c, oldest))
			oldest = c;
		if (memcmp(c->addr, addr, 17) != 0)
			continue;
		here++;
		if (http_older(c, oldest_here))
			oldest_here = c;
	}
	if (here >= FPREP__METRICS_HTTP_CONNS / 2)
		return oldest_here;
	return live < FPREP__METRICS_HTTP_CONNS ? NULL : oldest;
}

/* http_make_room cuts, with http.mu held, the connection that a new one
 * from addr replaces, if any: one whose request has not arrived whole
 * when there is one (a victim whose request is found whole in its socket
 * is marked so, and another chosen). */
static void http_make_room(const uint8_t addr[17])
{
	struct http_conn *c;

	/* Each turn marks one more entry whole: at most HTTP_ENTRIES. */
	while ((c = http_victim(addr)) != NULL && !c->answering &&
	       http_whole(c))
		;
	if (c == NULL)
		return;
	shutdown(c->fd, SHUT_RDWR);
	c->cut = 1;
	http.cut++;
}

void fprep__metrics_http_ready(int ready)
{
	atomic_store(&http.ready, ready ? 1 : 0);
}

/* http_now_ms is CLOCK_MONOTONIC in milliseconds, never 0 (0 means "no
 * heartbeat yet"). The heartbeat is kept to the millisecond: in whole
 * seconds a beat at 4.99 s and a look at 14.0 s would be "10 s old" after
 * 9.01 s. */
static uint64_t http_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + 1;
}

void fprep__metrics_http_heartbeat(void)
{
	atomic_store_explicit(&http.beat_ms, http_now_ms(),
	                      memory_order_relaxed);
}

int fprep__metrics_http_liveness(char *buf, size_t size)
{
	uint64_t beat =
	        atomic_load_explicit(&http.beat_ms, memory_order_relaxed);
	uint64_t now = http_now_ms();

	if (beat != 0 && now > beat &&
	    now - beat >= (uint64_t)FPREP__METRICS_HTTP_STALL_S * 1000) {
		snprintf(buf, size,
		         "not live: the event loop has not turned for %" PRIu64
		         ".%03" PRIu64 " s\n",
		         (now - beat) / 1000, (now - beat) % 1000);
		return 0;
	}
	snprintf(buf, size, "ok\n");
	return 1;
}

/* http_start_time works out when the process started, in seconds since the
 * epoch, as Prometheus' clients do, from /proc/self/stat's start time (in
 * clock ticks since boot) and the clocks (not /proc/stat's btime, which
 * the unit's ProcSubset=pid hides). Falls back to now. */
static double http_start_time(void)
{
	struct timespec real, boot;
	char buf[1024], *p;
	unsigned long long ticks;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = 0;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	/* Field 22; the command name (field 2) may hold spaces: count from
	 * its closing parenthesis (field 3 is the first after it). */
	p = strrchr(buf, ')');
	for (int field = 2; p != NULL && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || hz <= 0 || sscanf(p, " %llu", &ticks) != 1)
		return (double)real.tv_sec + real.tv_nsec / 1e9;
	return (double)real.tv_sec + real.tv_nsec / 1e9 -
	       ((double)boot.tv_sec + boot.tv_nsec / 1e9) +
	       (double)ticks / (double)hz;
}

/* http_open_fds counts the entries of /proc/self/fd (the directory's own
 * descriptor excluded); -1 if it cannot be read. */
static long http_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

/* http_process writes the process_* series (the names and meanings of
 * Prometheus' client libraries) into buf; returns the length, or -1 when
 * they do not fit. */
static int http_process(char *buf, size_t size)
{
	struct rusage ru;
	struct rlimit rl;
	unsigned long long vm_pages = 0, rss_pages = 0;
	long page = sysconf(_SC_PAGESIZE), fds = http_open_fds();
	FILE *f = fopen("/proc/self/statm", "r");
	double cpu = 0;
	int n, len = 0;

	if (f != NULL) {
		if (fscanf(f, "%llu %llu", &vm_pages, &rss_pages) != 2)
			vm_pages = rss_pages = 0;
		fclose(f);
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	n = snprintf(buf, size,
	             "# HELP process_cpu_seconds_total Total user and system "
	             "CPU time spent in seconds.\n"
	             "# TYPE process_cpu_seconds_total counter\n"
	             "process_cpu_seconds_total %.6f\n"
	             "# HELP process_start_time_seconds Start time of the "
	             "process since unix epoch in seconds.\n"
	             "# TYPE process_start_time_seconds gauge\n"
	             "process_start_time_seconds %.2f\n",
	             cpu, http.start_time);
	if (n < 0 || (size_t)n >= size)
		return -1;
	len = n;
	if (rss_pages > 0) {
		n = snprintf(buf + len, size - (size_t)len,
		             "# HELP process_resident_memory_bytes Resident "
		             "memory size in bytes.\n"
		             "# TYPE process_resident_memory_bytes gauge\n"
		             "process_resident_memory_bytes %llu\n"
		             "# HELP process_virtual_memory_bytes Virtual "
		             "memory size in bytes.\n"
		             "# TYPE process_virtual_memory_bytes gauge\n"
		             "process_virtual_memory_bytes %llu\n",
		             rss_pages * (unsigned long long)page,
		             vm_pages * (unsigned long long)page);
		if (n < 0 || (size_t)n >= size - (size_t)len)
			return -1;
		len += n;
	}
	if (fds >= 0) {
		n = snprintf(buf + len, size - (size_t)len,
		             "# HELP process_open_fds Number of open file "
		             "descriptors.\n"
		             "# TYPE process_open_fds gauge\n"
		             "process_open_fds %ld\n",
		             fds);
		if (n < 0 || (size_t)n >= size - (size_t)len)
			return -1;
		len += n;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY) {
		n = snprintf(buf + len, size - (size_t)len,
		             "# HELP process_max_fds Maximum number of open "
		             "file descriptors.\n"
		             "# TYPE process_max_fds gauge\n"
		             "process_max_fds %llu\n",
		             (unsigned long long)rl.rlim_cur);
		if (n < 0 || (size_t)n >= size - (size_t)len)
			return -1;
		len += n;
	}
	return len;
}

/* http_readiness writes /readyz's reason into buf; returns 1 when ready. */
static int http_readiness(char *buf, size_t size)
{
	fprep__backend_stats st;
	int known = fprep__metrics_backend_stats(&st);

	return fprep__metrics_http_readiness(known ? &st : NULL, buf, size);
}

int fprep__metrics_http_readiness(const fprep__backend_stats *st, char *buf,
                                  size_t size)
{
	int ready = atomic_load(&http.ready);

	if (ready < 0) {
		snprintf(buf, size, "not ready: starting\n");
		return 0;
	}
	if (ready == 0) {
		snprintf(buf, size, "not ready: shutting down\n");
		return 0;
	}
	/* The CPU backend keeps no figures: its workers do not fail. */
	if (st != NULL && st->lanes > 0 && st->lanes_in_service == 0) {
		snprintf(buf, size,
		         "not ready: no GPU lane in service (0 of %u)\n",
		         st->lanes);
		return 0;
	}
	snprintf(buf, size, "ready\n");
	return 1;
}

/* http_health writes frameprep_live and frameprep_ready (1 or 0, as
 * /healthz and /readyz answer) into buf; returns the length, or -1. */
static int http_health(char *buf, size_t size)
{
	char why[160];
	int live = fprep__metrics_http_liveness(why, sizeof(why));
	int ready = http_readiness(why, sizeof(why));
	int n = snprintf(buf, size,
	                 "# HELP frameprep_live 1 while /healthz answers 200 "
	                 "(the event loop turns).\n"
	                 "# TYPE frameprep_live gauge\n"
	                 "frameprep_live %d\n"
	                 "# HELP frameprep_ready 1 while /readyz answers 200 "
	                 "(requests are served).\n"
	                 "# TYPE frameprep_ready gauge\n"
	                 "frameprep_ready %d\n",
	                 live, ready);

	return n < 0 || (size_t)n >= size ? -1 : n;
}

/* http_metrics builds /metrics' body: metrics.c's text, then the
 * process_* series and the health gauges. Returns a malloc'd text or NULL
 * (out of memory). */
static char *http_metrics(size_t *len)
{
	char proc[2048];
	int plen = http_process(proc, sizeof(proc)), hlen;
	size_t n;
	char *text = fprep__metrics_text(&n), *all;

	if (plen >= 0) {
		hlen = http_health(proc + plen, sizeof(proc) - (size_t)plen);
		plen = hlen < 0 ? -1 : plen + hlen;
	}
	if (text == NULL || plen < 0) {
		free(text);
		return NULL;
	}
	all = realloc(text, n + (size_t)plen + 1);
	if (all == NULL) {
		free(text);
		return NULL;
	}
	memcpy(all + n, proc, (size_t)plen + 1);
	*len = n + (size_t)plen;
	return all;
}

/* http_reply queues a response of code with body (copied) and, when
 * allow is set, an Allow header. */
static enum MHD_Result http_reply(struct MHD_Connection *conn, unsigned code,
                                  const char *body, const char *allow)
{
	struct MHD_Response *rep;
	enum MHD_Result rv;

	rep = MHD_create_response_from_buffer(strlen(body), (void *)body,
	                                      MHD_RESPMEM_MUST_COPY);
	if (rep == NULL)
		return MHD_NO;
	MHD_add_response_header(rep, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        "text/plain; charset=utf-8");
	if (allow != NULL)
		MHD_add_response_header(rep, MHD_HTTP_HEADER_ALLOW, allow);
	rv = MHD_queue_response(conn, code, rep);
	MHD_destroy_response(rep);
	return rv;
}

/* http_mark_answering notes that conn's request arrived whole
 * (libmicrohttpd's thread). */
static void http_mark_answering(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
	        conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	pthread_mutex_lock(&http.mu);
	if (info != NULL && info->socket_context != NULL)
		((struct http_conn *)info->socket_context)->answering = 1;
	pthread_mutex_unlock(&http.mu);
}

static enum MHD_Result http_answer(void *cls, struct MHD_Connection *conn,
                                   const char *url, const char *method,
                                   const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **state)
{
	struct MHD_Response *rep;
	enum MHD_Result rv;
	size_t npaths = sizeof(http_paths) / sizeof(http_paths[0]), i, len;
	char body[256], *text;

	(void)cls;
	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)state;
	http_mark_answering(conn);
	for (i = 0; i < npaths; i++)
		if (strcmp(url, http_paths[i]) == 0)
			break;
	if (i == npaths) {
		len = (size_t)snprintf(
		        body, sizeof(body),
		        "frameprepd: no %.64s here; paths:", url);
		for (i = 0; i < npaths && len < sizeof(body); i++)
			len += (size_t)snprintf(body + len, sizeof(body) - len,
			                        " %s", http_paths[i]);
		if (len < sizeof(body) - 1)
			strcat(body, "\n");
		return http_reply(conn, MHD_HTTP_NOT_FOUND, body, NULL);
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		snprintf(body, sizeof(body),
		         "frameprepd: %.16s %s: only GET "
		         "and HEAD\n",
		         method, url);
		return http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, body,
		                  "GET, HEAD");
	}
	if (strcmp(url, "/healthz") == 0) {
		int live = fprep__metrics_http_liveness(body, sizeof(body));

		return http_reply(
		        conn, live ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
		        body, NULL);
	}
	if (strcmp(url, "/metrics") != 0) {
		int ready = http_readiness(body, sizeof(body));

		return http_reply(conn,
		                  ready ? MHD_HTTP_OK
		                        : MHD_HTTP_SERVICE_UNAVAILABLE,
		                  body, NULL);
	}
	text = http_metrics(&len);
	if (text == NULL)
		return http_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                  "frameprepd: out of memory\n", NULL);
	rep = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (rep == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(rep, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        "text/plain; version=0.0.4; charset=utf-8");
	rv = MHD_queue_response(conn, MHD_HTTP_OK, rep);
	MHD_destroy_response(rep);
	return rv;
}

/* http_notify keeps the table of connections (libmicrohttpd's thread). A
 * connection beyond the table's size (libmicrohttpd's limit is its size)
 * is closed at once. */
static void http_notify(void *cls, struct MHD_Connection *conn,
                        void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
	struct http_conn *c = *socket_context;
	const union MHD_ConnectionInfo *info;

	(void)cls;
	pthread_mutex_lock(&http.mu);
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (c != NULL)
			c->fd = -1;
		*socket_context = NULL;
	} else {
		const union MHD_ConnectionInfo *peer = MHD_get_connection_info(
		        conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		uint8_t addr[17];

		http_addr_key(peer != NULL ? peer->client_addr : NULL, addr);
		http_make_room(addr);
		info = MHD_get_connection_info(
		        conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		for (unsigned i = 0; i < HTTP_ENTRIES; i++)
			if (http.conns[i].fd < 0) {
				c = &http.conns[i];
				break;
			}
		if (c != NULL && info != NULL) {
			c->fd = info->connect_fd;
			c->begun_s = http_now_s();
			c->begun_ns = http_now_ns();
			c->cut = 0;
			c->answering = 0;
			memcpy(c->addr, addr, sizeof(addr));
			*socket_context = c;
			(void)http_whole(c);
		} else if (info != NULL) {
			shutdown(info->connect_fd, SHUT_RDWR);
		}
	}
	pthread_mutex_unlock(&http.mu);
}

/* http_completed restarts the request clock of a connection whose request
 * was answered: a kept-alive connection's next request has a deadline of
 * its own (libmicrohttpd's thread). */
static void http_completed(void *cls, struct MHD_Connection *conn, void **state,
                           enum MHD_RequestTerminationCode why)
{
	const union MHD_ConnectionInfo *info;

	(void)cls;
	(void)state;
	(void)why;
	info = MHD_get_connection_info(conn,
	                               MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	pthread_mutex_lock(&http.mu);
	if (info != NULL && info->socket_context != NULL) {
		struct http_conn *c = info->socket_context;

		c->begun_s = http_now_s();
		c->begun_ns = http_now_ns();
		c->answering = 0;
	}
	pthread_mutex_unlock(&http.mu);
}

/* http_reaper ends the requests past their deadline, once a second, until
 * http.stop. */
static void *http_reaper(void *arg)
{
	struct timespec until;
	unsigned cut;

	(void)arg;
	pthread_mutex_lock(&http.mu);
	while (!http.stop) {
		/* The condition variable's clock is CLOCK_REALTIME. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec++;
		pthread_cond_timedwait(&http.wake, &http.mu, &until);
		cut = 0;
		for (unsigned i = 0; i < HTTP_ENTRIES; i++) {
			struct http_conn *c = &http.conns[i];

			if (c->fd >= 0 && !c->cut &&
			    http_now_s() - c->begun_s >=
			            FPREP__METRICS_HTTP_REQUEST_S) {
				shutdown(c->fd, SHUT_RDWR);
				/* Once: libmicrohttpd closes it soon. */
				c->cut = 1;
				cut++;
			}
		}
		if (cut > 0)
			fprep__log(FPREP_LOG_WARNING,
			           "metrics: closed %u connections whose "
			           "request took over %d s",
			           cut, FPREP__METRICS_HTTP_REQUEST_S);
		if (http.cut > 0)
			fprep__log(FPREP_LOG_WARNING,
			           "metrics: cut %" PRIu64 " connections for "
			           "newer ones (%d at once in all, %d from one "
			           "address)",
			           http.cut, FPREP__METRICS_HTTP_CONNS,
			           FPREP__METRICS_HTTP_CONNS / 2);
		http.cut = 0;
	}
	pthread_mutex_unlock(&http.mu);
	return NULL;
}

/* http_resolve splits listen into host and port and resolves them; logs
 * why it cannot. */
static int http_resolve(const char *listen, struct addrinfo **res)
{
	const char *colon = strrchr(listen, ':'), *host = listen;
	struct addrinfo hints;
	char buf[256];
	size_t n;
	int rv;

	n = colon != NULL ? (size_t)(colon - listen) : 0;
	if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']') {
		host++;
		n -= 2;
	}
	if (colon == NULL || colon[1] == '\0' || n >= sizeof(buf)) {
		fprep__log(FPREP_LOG_ERR, "--metrics-listen %s: not HOST:PORT",
		           listen);
		return FPREP_EINVAL;
	}
	memcpy(buf, host, n);
	buf[n] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rv = getaddrinfo(n > 0 ? buf : NULL, colon + 1, &hints, res);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "--metrics-listen %s: %s", listen,
		           gai_strerror(rv));
		return FPREP_EINVAL;
	}
	return 0;
}

static void http_close(void);

/* http_open starts serving on listen ("HOST:PORT"). From main's thread,
 * once. Returns 0, FPREP_EINVAL or FPREP_ETRANSPORT (logged). */
static int http_open(const char *listen)
{
	struct addrinfo *res = NULL;
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
	int rv;

	rv = http_resolve(listen, &res);
	if (rv != 0)
		return rv;
	http.start_time = http_start_time();
	for (unsigned i = 0; i < HTTP_ENTRIES; i++)
		http.conns[i].fd = -1;
	http.stop = 0;
	rv = pthread_create(&http.reaper, NULL, http_reaper, NULL);
	if (rv != 0) {
		freeaddrinfo(res);
		fprep__log(FPREP_LOG_ERR, "metrics: no reaper thread: %s",
		           strerror(rv));
		return FPREP_ETRANSPORT;
	}
	http.reaper_started = 1;
	if (res->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	http.httpd = MHD_start_daemon(
	        flags, 0, NULL, NULL, http_answer, NULL, MHD_OPTION_SOCK_ADDR,
	        res->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
	        (unsigned)HTTP_ENTRIES, MHD_OPTION_CONNECTION_TIMEOUT,
	        (unsigned)FPREP__METRICS_HTTP_IDLE_S,
	        MHD_OPTION_NOTIFY_CONNECTION, http_notify, NULL,
	        MHD_OPTION_NOTIFY_COMPLETED, http_completed, NULL,
	        MHD_OPTION_END);
	freeaddrinfo(res);
	if (http.httpd == NULL) {
		http_close();
		fprep__log(FPREP_LOG_ERR,
		           "--metrics-listen %s: cannot listen (address in use "
		           "or not local?)",
		           listen);
		return FPREP_ETRANSPORT;
	}
	info = MHD_get_daemon_info(http.httpd, MHD_DAEMON_INFO_BIND_PORT);
	http.port = info != NULL ? info->port : 0;
	fprep__log(FPREP_LOG_NOTICE,
	           "metrics: http://%s/metrics (port %u), Prometheus text "
	           "format; /healthz, /readyz",
	           listen, http.port);
	return 0;
}

unsigned fprep__metrics_http_port(void)
{
	return http.httpd != NULL ? http.port : 0;
}

/* http_close stops the server: once it returns no request is being
 * answered. Safe when it was never opened. */
static void http_close(void)
{
	if (http.httpd != NULL)
		MHD_stop_daemon(http.httpd);
	http.httpd = NULL;
	http.port = 0;
	if (http.reaper_started) {
		pthread_mutex_lock(&http.mu);
		http.stop = 1;
		pthread_cond_signal(&http.wake);
		pthread_mutex_unlock(&http.mu);
		pthread_join(http.reaper, NULL);
		http.reaper_started = 0;
	}
}

int fprep__metrics_http_open(const char *listen, const char *device)
{
	int rv;

	fprep__metrics_start(device);
	rv = http_open(listen);
	if (rv != 0)
		fprep__metrics_stop();
	return rv;
}

void fprep__metrics_http_close(void)
{
	http_close();
	fprep__metrics_stop();
}
