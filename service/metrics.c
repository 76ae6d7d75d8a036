/*
 * metrics.c: frameprepd's Prometheus endpoint (see metrics.h).
 *
 * The design is simple: every figure is a relaxed atomic in one static
 * struct. The hooks add to them from the thread that sees the event (the
 * loop for requests and regions, nng's threads for connections); a
 * histogram observation is one add to its bucket and one to its sum, the
 * count being the sum of the buckets. A scrape, on libmicrohttpd's thread
 * (metrics_http.c serves it), reads them and writes the text; the counts
 * of one histogram are made cumulative from one pass over its buckets, so
 * its _count always equals its +Inf bucket. The duration histograms come
 * from the timings every tensor reply carries (protocol.h), so they are
 * what clients see.
 */
#include "metrics.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "log.h"
#include "nvml.h"

/* Upper bounds of the duration buckets, microseconds (shown in seconds):
 * 1, 1.5, 2, 3, 5, 7.5 in each decade from 10 us to 10 s, so that a p99
 * of a few hundred microseconds (a ring's FRAME on a GPU) falls in a
 * bucket no wider than half its value. */
static const uint32_t metrics_bounds_us[] = {
        10,      15,      20,      30,      50,       75,     100,     150,
        200,     300,     500,     750,     1000,     1500,   2000,    3000,
        5000,    7500,    10000,   15000,   20000,    30000,  50000,   75000,
        100000,  150000,  200000,  300000,  500000,   750000, 1000000, 1500000,
        2000000, 3000000, 5000000, 7500000, 10000000,
};
#define METRICS_NBOUNDS                                                        \
	(sizeof(metrics_bounds_us) / sizeof(metrics_bounds_us[0]))

/* Request kinds: the protocol's table (fprep_kind_name); 0 ("unknown")
 * stands for a kind that could not be read or is not one. */
#define METRICS_NKINDS  FPREP_KIND_LIMIT
#define METRICS_NSTATUS 20 /* enum fprep_err 0..18, then any other */

enum metrics_stage {
	STAGE_QUEUE,
	STAGE_COMPUTE,
	STAGE_H2D,
	STAGE_KERNEL,
	STAGE_D2H,
	STAGE_COUNT
};

static const char *const metrics_stage_names[STAGE_COUNT] = {
        "queue", "compute", "h2d", "kernel", "d2h"};

struct metrics_hist {
	_Atomic uint64_t bucket[METRICS_NBOUNDS + 1]; /* last: above all */
	_Atomic uint64_t sum_us;
};

static struct {
	atomic_int on;
	_Atomic uint64_t requests;     /* arrived */
	_Atomic uint64_t request_ends; /* answered or dropped */
	_Atomic uint64_t replies[METRICS_NKINDS][METRICS_NSTATUS];
	_Atomic uint64_t bytes_in;
	_Atomic uint64_t bytes_out;
	_Atomic int64_t connections;
	_Atomic uint64_t connections_opened;
	_Atomic int64_t regions;
	_Atomic int64_t region_bytes;
	_Atomic int64_t pinned_bytes;
	_Atomic uint64_t limit_inflight;  /* --max-inflight; 0: not told */
	_Atomic uint64_t limit_shm_bytes; /* --max-shm-bytes; 0: not told */
	_Atomic uint64_t doorbells;       /* doorbell areas polled now */
	_Atomic uint64_t limit_doorbells; /* --max-doorbells */
	struct metrics_hist total[METRICS_NKINDS];  /* FRAME and ECHO used */
	struct metrics_hist failed[METRICS_NKINDS]; /* timed failures */
	struct metrics_hist stage[FPREP__METRICS_MAX_LANES][STAGE_COUNT];

	/* The endpoint; only main's thread opens and closes it. */
	char device[256];
	unsigned nlanes;                                /* 0: one, "device" */
	char lane_device[FPREP__METRICS_MAX_LANES][32]; /* "cuda:N" */
	int lane_ordinal[FPREP__METRICS_MAX_LANES];     /* N */
	time_t started;
	pthread_mutex_t backend_mu;
	fprep__backend *backend; /* under backend_mu */
} metrics = {.backend_mu = PTHREAD_MUTEX_INITIALIZER};

#define METRICS_ADD(var, n)                                                    \
	atomic_fetch_add_explicit(&(var), (n), memory_order_relaxed)
#define METRICS_GET(var) atomic_load_explicit(&(var), memory_order_relaxed)

static int metrics_on(void)
{
	return atomic_load_explicit(&metrics.on, memory_order_relaxed);
}

static void metrics_observe(struct metrics_hist *h, uint32_t us)
{
	size_t lo = 0, hi = METRICS_NBOUNDS; /* the first bound >= us */

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (us > metrics_bounds_us[mid])
			lo = mid + 1;
		else
			hi = mid;
	}
	METRICS_ADD(h->bucket[lo], 1);
	METRICS_ADD(h->sum_us, us);
}

void fprep__metrics_request(size_t bytes)
{
	if (!metrics_on())
		return;
	METRICS_ADD(metrics.requests, 1);
	METRICS_ADD(metrics.bytes_in, bytes);
}

void fprep__metrics_request_end(void)
{
	if (metrics_on())
		METRICS_ADD(metrics.request_ends, 1);
}

void fprep__metrics_reply(const fprep_reply_header *h, uint64_t bytes,
                          unsigned lane)
{
	struct metrics_hist *stage;
	unsigned kind, status;

	if (!metrics_on())
		return;
	METRICS_ADD(metrics.bytes_out, bytes);
	kind = fprep_kind_name(h->kind) != NULL ? h->kind : 0;
	status = h->status < METRICS_NSTATUS - 1 ? h->status
	                                         : METRICS_NSTATUS - 1;
	METRICS_ADD(metrics.replies[kind][status], 1);
	if (status != FPREP_OK) {
		/* A failure timed from its receipt (its reply's t_total_us;
		 * 0: the reply carries no timing). */
		if (h->t_total_us != 0)
			metrics_observe(&metrics.failed[kind], h->t_total_us);
		return;
	}
	if (kind != FPREP_KIND_FRAME && kind != FPREP_KIND_ECHO)
		return;
	stage = metrics.stage[lane < FPREP__METRICS_MAX_LANES ? lane : 0];
	metrics_observe(&metrics.total[kind], h->t_total_us);
	metrics_observe(&stage[STAGE_QUEUE], h->t_queue_us);
	metrics_observe(&stage[STAGE_COMPUTE], h->t_compute_us);
	/* Only the GPU backend has copies and kernels to time. */
	if (h->t_h2d_us == 0 && h->t_kernel_us == 0 && h->t_d2h_us == 0)
		return;
	metrics_observe(&stage[STAGE_H2D], h->t_h2d_us);
	metrics_observe(&stage[STAGE_KERNEL], h->t_kernel_us);
	metrics_observe(&stage[STAGE_D2H], h->t_d2h_us);
}

void fprep__metrics_connection(int delta)
{
	if (!metrics_on())
		return;
	METRICS_ADD(metrics.connections, delta);
	if (delta > 0)
		METRICS_ADD(metrics.connections_opened, 1);
}

void fprep__metrics_region(int delta, uint64_t bytes, int pinned)
{
	if (!metrics_on())
		return;
	METRICS_ADD(metrics.regions, delta);
	METRICS_ADD(metrics.region_bytes, delta * (int64_t)bytes);
	if (pinned)
		METRICS_ADD(metrics.pinned_bytes, delta * (int64_t)bytes);
}

void fprep__metrics_limits(unsigned max_inflight, uint64_t max_shm_bytes)
{
	atomic_store_explicit(&metrics.limit_inflight, max_inflight,
	                      memory_order_relaxed);
	atomic_store_explicit(&metrics.limit_shm_bytes, max_shm_bytes,
	                      memory_order_relaxed);
}

void fprep__metrics_doorbells(unsigned n, unsigned max)
{
	atomic_store_explicit(&metrics.doorbells, n, memory_order_relaxed);
	atomic_store_explicit(&metrics.limit_doorbells, max,
	                      memory_order_relaxed);
}

void fprep__metrics_set_backend(fprep__backend *b)
{
	pthread_mutex_lock(&metrics.backend_mu);
	metrics.backend = b;
	pthread_mutex_unlock(&metrics.backend_mu);
}

/* metrics_buf: the scrape's text, grown as it is written. */
struct metrics_buf {
	char *text;
	size_t len, cap;
	int failed;
};

static void metrics_printf(struct metrics_buf *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void metrics_printf(struct metrics_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		if (b->failed)
			return;
		va_start(ap, fmt);
		n = vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		char *grown = realloc(b->text, b->cap * 2 + (size_t)n);
		if (grown == NULL) {
			b->failed = 1;
			return;
		}
		b->text = grown;
		b->cap = b->cap * 2 + (size_t)n;
	}
}

static void metrics_head(struct metrics_buf *b, const char *name,
                         const char *type, const char *help)
{
	metrics_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	               type);
}

/* metrics_counter and metrics_gauge write a family of one sample. */
static void metrics_counter(struct metrics_buf *b, const char *name,
                            const char *help, uint64_t v)
{
	metrics_head(b, name, "counter", help);
	metrics_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void metrics_gauge(struct metrics_buf *b, const char *name,
                          const char *help, int64_t v)
{
	metrics_head(b, name, "gauge", help);
	metrics_printf(b, "%s %" PRId64 "\n", name, v);
}

/* metrics_kind: the label of kind k (protocol.h's table). */
static const char *metrics_kind(unsigned k)
{
	const char *name = fprep_kind_name(k);

	return name != NULL ? name : "unknown";
}

/* metrics_requests writes the answered requests: every kind's ok, and
 * the other statuses seen. */
static void metrics_requests(struct metrics_buf *b)
{
	for (unsigned k = 0; k < METRICS_NKINDS; k++) {
		for (unsigned s = 0; s < METRICS_NSTATUS; s++) {
			uint64_t n = METRICS_GET(metrics.replies[k][s]);
			char status[24];

			if (n == 0 && (s != FPREP_OK || k == 0))
				continue;
			snprintf(status, sizeof(status), "%s",
			         s < METRICS_NSTATUS - 1
			                 ? fprep_err_name((int)s)
			                 : "OTHER");
			for (char *p = status; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			metrics_printf(b,
			               "frameprep_requests_total{kind=\"%s\","
			               "status=\"%s\"} %" PRIu64 "\n",
			               metrics_kind(k), status, n);
		}
	}
}

/* metrics_hist_write writes one labelled series of a histogram family;
 * labels is "a=\"x\"," or empty. */
static void metrics_hist_write(struct metrics_buf *b, const char *name,
                               const char *labels, struct metrics_hist *h)
{
	uint64_t cum = 0;

	for (size_t i = 0; i <= METRICS_NBOUNDS; i++) {
		cum += METRICS_GET(h->bucket[i]);
		if (i < METRICS_NBOUNDS)
			metrics_printf(
			        b, "%s_bucket{%sle=\"%g\"} %" PRIu64 "\n", name,
			        labels, metrics_bounds_us[i] / 1e6, cum);
		else
			metrics_printf(b,
			               "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n",
			               name, labels, cum);
	}
	metrics_printf(b, "%s_sum{%.*s} %.6f\n", name,
	               labels[0] ? (int)strlen(labels) - 1 : 0, labels,
	               METRICS_GET(h->sum_us) / 1e6);
	metrics_printf(b, "%s_count{%.*s} %" PRIu64 "\n", name,
	               labels[0] ? (int)strlen(labels) - 1 : 0, labels, cum);
}

/* metrics_hist_empty returns whether h has no observation. */
static int metrics_hist_empty(struct metrics_hist *h)
{
	for (size_t i = 0; i <= METRICS_NBOUNDS; i++)
		if (METRICS_GET(h->bucket[i]) != 0)
			return 0;
	return 1;
}

int fprep__metrics_backend_stats(fprep__backend_stats *st)
{
	int known = 0;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&metrics.backend_mu);
	if (metrics.backend != NULL && metrics.backend->stats != NULL) {
		metrics.backend->stats(metrics.backend, st);
		known = 1;
	}
	pthread_mutex_unlock(&metrics.backend_mu);
	return known;
}

static void metrics_backend(struct metrics_buf *b)
{
	fprep__backend_stats st;
	const char *dev = metrics.device;

	if (!fprep__metrics_backend_stats(&st))
		return;
	metrics_head(b, "frameprep_kernel_cache_hits_total", "counter",
	             "Kernels loaded from the compiled-kernel cache.");
	metrics_printf(b,
	               "frameprep_kernel_cache_hits_total{device=\"%s\"} "
	               "%u\n",
	               dev, st.cache_hits);
	metrics_head(b, "frameprep_kernel_cache_misses_total", "counter",
	             "Kernel cache lookups that found no usable entry.");
	metrics_printf(b,
	               "frameprep_kernel_cache_misses_total{device=\"%s\"} "
	               "%u\n",
	               dev, st.cache_misses);
	metrics_head(b, "frameprep_kernel_compiles_total", "counter",
	             "Kernel compilations with NVRTC.");
	metrics_printf(b, "frameprep_kernel_compiles_total{device=\"%s\"} %u\n",
	               dev, st.compiles);
	if (st.lanes > 0) {
		metrics_head(b, "frameprep_gpu_lanes", "gauge",
		             "GPU lanes started (--lanes on each device).");
		metrics_printf(b, "frameprep_gpu_lanes{device=\"%s\"} %u\n",
		               dev, st.lanes);
		metrics_head(b, "frameprep_gpu_lanes_in_service", "gauge",
		             "GPU lanes not taken out of service by a sticky "
		             "CUDA error.");
		metrics_printf(b,
		               "frameprep_gpu_lanes_in_service{device=\"%s\"} "
		               "%u\n",
		               dev, st.lanes_in_service);
	}
	if (st.memory_total == 0)
		return;
	metrics_head(b, "frameprep_gpu_memory_used_bytes", "gauge",
	             "Device memory in use (all processes), as "
	             "cudaMemGetInfo reports it.");
	metrics_printf(b,
	               "frameprep_gpu_memory_used_bytes{device=\"%s\"} "
	               "%" PRIu64 "\n",
	               dev, st.memory_used);
	metrics_head(b, "frameprep_gpu_memory_total_bytes", "gauge",
	             "Device memory in all.");
	metrics_printf(b,
	               "frameprep_gpu_memory_total_bytes{device=\"%s\"} "
	               "%" PRIu64 "\n",
	               dev, st.memory_total);
}

/* metrics_nvml writes NVML's figures of each GPU the lanes run on (none
 * without lanes, or where NVML or the GPU's bus id cannot be had); a
 * figure NVML does not give is left out. */
static void metrics_nvml(struct metrics_buf *b)
{
	static const struct {
		const char *name, *help;
		double scale; /* NVML's percentages as ratios */
	} fams[4] = {
	        {"frameprep_nvml_gpu_utilization_ratio",
	         "Fraction of NVML's last sample period in which a kernel ran "
	         "on the GPU (all processes), read at the scrape.",
	         0.01},
	        {"frameprep_nvml_memory_utilization_ratio",
	         "Fraction of NVML's last sample period in which device "
	         "memory was read or written (all processes).",
	         0.01},
	        {"frameprep_nvml_memory_used_bytes",
	         "Device memory in use (all processes), as NVML reports it.",
	         1},
	        {"frameprep_nvml_memory_total_bytes",
	         "Device memory in all, as NVML reports it.", 1},
	};
	int64_t v[FPREP__METRICS_MAX_LANES][4];
	const char *label[FPREP__METRICS_MAX_LANES];
	unsigned n = 0;

	for (unsigned l = 0; l < metrics.nlanes; l++) {
		fprep__nvml_gpu g;
		char bus[32];
		unsigned k;

		for (k = 0; k < l; k++) /* one entry a GPU */
			if (metrics.lane_ordinal[k] == metrics.lane_ordinal[l])
				break;
		if (k < l ||
		    fprep__nvml_bus_id(metrics.lane_ordinal[l], bus,
		                       sizeof(bus)) != 0 ||
		    fprep__nvml_sample(bus, &g) != 0)
			continue;
		v[n][0] = g.util_gpu;
		v[n][1] = g.util_memory;
		v[n][2] = g.mem_used;
		v[n][3] = g.mem_total;
		label[n++] = metrics.lane_device[l];
	}
	for (unsigned f = 0; f < 4; f++) {
		int head = 0;

		for (unsigned i = 0; i < n; i++) {
			if (v[i][f] < 0)
				continue;
			if (!head++)
				metrics_head(b, fams[f].name, "gauge",
				             fams[f].help);
			metrics_printf(b, "%s{device=\"%s\"} %.15g\n",
			               fams[f].name, label[i],
			               (double)v[i][f] * fams[f].scale);
		}
	}
}

/* metrics_write writes the whole exposition. */
static void metrics_write(struct metrics_buf *b)
{
	const char *dev = metrics.device;
	char labels[320];

	metrics_head(b, "frameprep_build_info", "gauge",
	             "Version and device of this daemon (always 1).");
	metrics_printf(b,
	               "frameprep_build_info{version=\"%s\",device=\"%s\"} "
	               "1\n",
	               FPREP_VERSION_STRING, dev);
	metrics_head(b, "frameprep_start_time_seconds", "gauge",
	             "Start of the daemon, seconds since the Unix epoch.");
	metrics_printf(b, "frameprep_start_time_seconds %lld\n",
	               (long long)metrics.started);

	metrics_counter(b, "frameprep_requests_received_total",
	                "Requests received.", METRICS_GET(metrics.requests));
	metrics_head(b, "frameprep_requests_total", "counter",
	             "Requests answered, by kind and status (ok, or the "
	             "error's name).");
	metrics_requests(b);
	metrics_gauge(b, "frameprep_requests_in_flight",
	              "Requests received and not yet answered or dropped.",
	              (int64_t)(METRICS_GET(metrics.requests) -
	                        METRICS_GET(metrics.request_ends)));
	if (METRICS_GET(metrics.limit_inflight) != 0)
		metrics_gauge(b, "frameprep_requests_in_flight_limit",
		              "Requests the socket takes in flight at once "
		              "(--max-inflight; doorbells have slots of their "
		              "own).",
		              (int64_t)METRICS_GET(metrics.limit_inflight));
	metrics_counter(b, "frameprep_received_bytes_total",
	                "Bytes of request messages received (headers and "
	                "inline frames).",
	                METRICS_GET(metrics.bytes_in));
	metrics_counter(b, "frameprep_sent_bytes_total",
	                "Bytes of reply messages handed to the transport "
	                "(headers and inline tensors).",
	                METRICS_GET(metrics.bytes_out));
	metrics_gauge(b, "frameprep_connections", "Client connections open.",
	              METRICS_GET(metrics.connections));
	metrics_counter(b, "frameprep_connections_opened_total",
	                "Client connections accepted.",
	                METRICS_GET(metrics.connections_opened));
	metrics_gauge(b, "frameprep_shm_regions",
	              "Shared-memory regions registered.",
	              METRICS_GET(metrics.regions));
	metrics_gauge(b, "frameprep_shm_region_bytes",
	              "Bytes of the shared-memory regions registered.",
	              METRICS_GET(metrics.region_bytes));
	if (METRICS_GET(metrics.limit_shm_bytes) != 0)
		metrics_gauge(b, "frameprep_shm_region_bytes_limit",
		              "Bytes all shared-memory regions together may "
		              "have (--max-shm-bytes).",
		              (int64_t)METRICS_GET(metrics.limit_shm_bytes));
	metrics_gauge(b, "frameprep_pinned_bytes",
	              "Bytes of those regions pinned for the GPU.",
	              METRICS_GET(metrics.pinned_bytes));
	metrics_gauge(b, "frameprep_doorbells",
	              "Doorbell areas polled for requests (a ring's, or a "
	              "client's for its simple calls).",
	              (int64_t)METRICS_GET(metrics.doorbells));
	metrics_gauge(b, "frameprep_doorbells_limit",
	              "Doorbell areas the daemon polls at most "
	              "(--max-doorbells; 0: doorbells off).",
	              (int64_t)METRICS_GET(metrics.limit_doorbells));

	metrics_head(b, "frameprep_request_duration_seconds", "histogram",
	             "Receipt to reply of FRAME and ECHO requests answered "
	             "ok (t_total_us of the reply).");
	for (unsigned k = FPREP_KIND_FRAME; k <= FPREP_KIND_ECHO; k += 2) {
		snprintf(labels, sizeof(labels), "device=\"%s\",kind=\"%s\",",
		         dev, metrics_kind(k));
		metrics_hist_write(b, "frameprep_request_duration_seconds",
		                   labels, &metrics.total[k]);
	}
	metrics_head(b, "frameprep_request_failed_duration_seconds",
	             "histogram",
	             "Receipt to reply of requests answered with an error, by "
	             "kind, from the reply's t_total_us.");
	for (unsigned k = 0; k < METRICS_NKINDS; k++) {
		/* FRAME and ECHO always; another kind once it failed. */
		if (k != FPREP_KIND_FRAME && k != FPREP_KIND_ECHO &&
		    metrics_hist_empty(&metrics.failed[k]))
			continue;
		snprintf(labels, sizeof(labels), "device=\"%s\",kind=\"%s\",",
		         dev, metrics_kind(k));
		metrics_hist_write(b,
		                   "frameprep_request_failed_duration_seconds",
		                   labels, &metrics.failed[k]);
	}
	metrics_head(b, "frameprep_stage_duration_seconds", "histogram",
	             "Time in each stage of FRAME and ECHO requests "
	             "answered ok: queue (receipt to start of work), "
	             "compute (the CPU op or GPU kernel), and on a GPU (only) "
	             "h2d, kernel and d2h, from the timings of each reply.");
	/* The CPU backend has no copies or kernels: only its stages. */
	for (unsigned l = 0; l < (metrics.nlanes ? metrics.nlanes : 1); l++)
		for (unsigned s = 0;
		     s < (metrics.nlanes ? STAGE_COUNT : STAGE_H2D); s++) {
			snprintf(labels, sizeof(labels),
			         "device=\"%s\",lane=\"%u\",stage=\"%s\",",
			         metrics.nlanes ? metrics.lane_device[l] : dev,
			         l, metrics_stage_names[s]);
			metrics_hist_write(b,
			                   "frameprep_stage_duration_seconds",
			                   labels, &metrics.stage[l][s]);
		}
	metrics_backend(b);
	metrics_nvml(b);
}

char *fprep__metrics_text(size_t *len)
{
	struct metrics_buf b = {NULL, 0, 16384, 0};

	b.text = malloc(b.cap);
	if (b.text == NULL)
		return NULL;
	metrics_write(&b);
	if (b.failed) {
		free(b.text);
		return NULL;
	}
	*len = b.len;
	return b.text;
}

void fprep__metrics_start(const char *device)
{
	snprintf(metrics.device, sizeof(metrics.device), "%s", device);
	metrics.started = time(NULL);
	atomic_store(&metrics.on, 1);
}

void fprep__metrics_set_lanes(const int *devices, unsigned n)
{
	if (n > FPREP__METRICS_MAX_LANES)
		n = FPREP__METRICS_MAX_LANES;
	for (unsigned l = 0; l < n; l++) {
		snprintf(metrics.lane_device[l], sizeof(metrics.lane_device[l]),
		         "cuda:%d", devices[l]);
		metrics.lane_ordinal[l] = devices[l];
	}
	metrics.nlanes = n;
}

void fprep__metrics_stop(void)
{
	atomic_store(&metrics.on, 0);
	fprep__metrics_set_backend(NULL);
	fprep__nvml_close();
}
