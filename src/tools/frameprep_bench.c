/*
 * frameprep-bench: load generator and checker for frameprepd.
 *
 * The design is simple: every stream is a thread with its own connection
 * (fprep_client), sending FRAME requests built once from decoded or
 * synthetic frames, timing each reply and checking it (status, shape, dtype,
 * size, and for a sample the content against fprep_preprocess_cpu). A
 * closed loop keeps N requests in flight; an open loop sends at a given
 * rate from a pool of N connections and measures latency from the intended
 * send time, so a stalled server is charged for the requests it held up
 * (no coordinated omission). Each thread records into its own histogram;
 * they are merged after the run. Before each measured point the same load
 * is run with ECHO requests to measure the transport ceiling.
 *
 * Only the public API of libframeprep is used.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_elements.h"
#include "bench_hist.h"
#include "bench_input.h"
#include "bench_report.h"
#include "bench_trace.h"
#include "frameprep/frameprep.h"
#include "tool_options.h"

#define BENCH_MAX_POINTS   64
#define BENCH_MAX_STREAMS  4096
#define BENCH_MAX_MESSAGES 5 /* mismatch descriptions printed per run */

enum bench_verify { BENCH_VERIFY_NONE, BENCH_VERIFY_SAMPLE, BENCH_VERIFY_ALL };
enum bench_arrivals { BENCH_ARRIVALS_CONSTANT, BENCH_ARRIVALS_POISSON };

/* bench_opts: the command line. */
typedef struct bench_opts {
	const char *url;
	char urls[TOOL_URLS_SIZE]; /* the --socket URLs, comma-separated */
	const char *trust_owner;   /* --trust-socket-owner, or NULL */
	unsigned conc[BENCH_MAX_POINTS];
	unsigned nconc;
	double rates[BENCH_MAX_POINTS];
	unsigned nrates;
	int arrivals;
	double duration_s;
	uint64_t requests;
	double warmup_s;
	int echo;
	int shm_in;       /* frames through the stream's shared-memory region */
	int shm_out;      /* tensors written into it */
	int shm_reply;    /* replies read from it too (FPREP_LOC_F_SHM_REPLY) */
	unsigned spin_us; /* fprep_client_set_spin, with shm_reply */
	int no_stage;     /* fprep_client_set_staging(client, 0) */
	int no_doorbell;  /* fprep_client_doorbell(client, 0) */
	int doorbell;     /* requests through a doorbell (shm both) */
	int verify;
	unsigned verify_every;
	int timeout_ms;
	int ceiling;
	double ceiling_s;
	double pcie_gbps;
	const char *json;
	const char *csv;
	const char *plot;
	int quiet;
	int trace;      /* tabulate the daemon's --trace stage times */
	unsigned rois;  /* --rois N: ROIS requests of N boxes */
	unsigned batch; /* --batch N: BATCH requests of N frames */
	bench_frame_spec spec;
} bench_opts;

/* bench_conn: one connection of the pool and, with --shm, its
 * shared-memory region: the frame slot at offset 0 (holding the input last
 * written there) and two tensor slots, out_capacity bytes each; requests
 * use the one at out_offset while the verifier may hold the other
 * (bench_verifier). */
typedef struct bench_conn {
	fprep_client *client;
	fprep_region *region;
	const bench_input *staged;
	uint64_t out_offset;
	uint64_t out_slots[2]; /* the tensor slots' offsets */
	uint64_t out_capacity; /* a tensor slot, and the reply after it */
} bench_conn;

/* bench_verifier compares sampled replies with the CPU reference
 * (bench_compare) on a thread of its own, so that a stream never stops for
 * it: a comparison takes milliseconds, and a stream that paused that long
 * would let the daemon's polling threads fall asleep and charge its next
 * request for waking them, a cost of the bench and not of the service. It
 * holds one reply at a time. A stream hands over a reply only when the
 * verifier is idle (bench_verifier_offer): with the tensor in shared
 * memory, the stream moves on to its region's other tensor slot, which
 * nobody holds since the verifier is idle; an inline tensor's message
 * changes hands. A sample that finds the verifier busy waits for the
 * stream's next reply. --verify all compares in the stream, as that run
 * checks every reply and measures nothing finer. */
typedef struct bench_verifier {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int busy; /* a reply is in hand */
	int stop;
	struct bench_run *run;
	bench_input *in;
	const void *tensor;
	fprep_result result; /* an inline reply's message, owned */
	uint64_t verified;
	uint64_t wrong;
} bench_verifier;

/* bench_run: what every thread of one run shares. */
typedef struct bench_run {
	const bench_opts *opts;
	bench_input *inputs;
	size_t ninputs;
	uint16_t kind;
	int open_loop;
	double rate;
	unsigned streams;
	double duration_s; /* 0: run until requests measured requests */
	uint64_t requests;
	double warmup_s;
	uint64_t start_ns;
	uint64_t warm_end_ns;
	uint64_t end_ns; /* duration mode */
	atomic_uint_fast64_t next_input;
	atomic_uint_fast64_t measured_issued; /* closed loop, requests mode */
	atomic_uint_fast64_t progress_ok;
	atomic_uint_fast64_t progress_fail;
	atomic_uint_fast64_t messages;
	atomic_int stop;
	/* Open-loop arrival schedule, shared by the pool. */
	pthread_mutex_t gen_lock;
	uint64_t gen_next_ns;
	uint64_t gen_issued; /* measured arrivals handed out */
	uint64_t gen_rng;
	int gen_done;
	uint64_t gen_dropped;
	bench_verifier *verifier; /* --verify sample of FRAME requests */
} bench_run;

/* bench_stream: one thread and its connection. */
typedef struct bench_stream {
	bench_run *run;
	bench_conn *conn;
	pthread_t thread;
	uint64_t last_done_ns;
	bench_result res;
	bench_trace *trace; /* with run->trace */
	int owed;           /* a sample is due, the verifier was busy */
} bench_stream;

static volatile sig_atomic_t bench_interrupted;

static uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bench_sleep_until(uint64_t ns)
{
	struct timespec ts = {
	        .tv_sec = (time_t)(ns / 1000000000ull),
	        .tv_nsec = (long)(ns % 1000000000ull),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

/* bench_next_arrival hands out the next intended send time of an open
 * loop, or returns 0 when the run is over. Sets *measured. */
static int bench_next_arrival(bench_run *run, uint64_t *intended, int *measured)
{
	double gap_s, u;
	uint64_t now;
	int got = 0;

	pthread_mutex_lock(&run->gen_lock);
	if (run->gen_done || atomic_load(&run->stop))
		goto out;
	*intended = run->gen_next_ns;
	*measured = *intended >= run->warm_end_ns;
	if (run->duration_s > 0 && *intended >= run->end_ns) {
		run->gen_done = 1;
		goto out;
	}
	if (run->duration_s <= 0 && *measured &&
	    run->gen_issued++ >= run->requests) {
		run->gen_done = 1;
		goto out;
	}
	now = bench_now_ns();
	/* A server that falls more than 2 s (and a timeout) behind the
	 * schedule is overloaded: stop and count what was never sent. */
	if (run->duration_s > 0 &&
	    now > *intended + 2000000000ull +
	                    (uint64_t)run->opts->timeout_ms * 1000000ull) {
		run->gen_dropped +=
		        (uint64_t)((double)(run->end_ns - *intended) / 1e9 *
		                   run->rate);
		run->gen_done = 1;
		goto out;
	}
	if (run->opts->arrivals == BENCH_ARRIVALS_POISSON) {
		u = ((double)(bench_splitmix64(&run->gen_rng) >> 11) + 0.5) /
		    9007199254740992.0;
		gap_s = -log(u) / run->rate;
	} else {
		gap_s = 1.0 / run->rate;
	}
	run->gen_next_ns += (uint64_t)(gap_s * 1e9);
	got = 1;
out:
	pthread_mutex_unlock(&run->gen_lock);
	return got;
}

/* bench_next_closed decides whether a closed-loop stream sends again. */
static int bench_next_closed(bench_run *run, uint64_t *intended, int *measured)
{
	uint64_t now = bench_now_ns();

	if (atomic_load(&run->stop))
		return 0;
	*intended = now;
	*measured = now >= run->warm_end_ns;
	if (run->duration_s > 0)
		return now < run->end_ns;
	if (*measured &&
	    atomic_fetch_add(&run->measured_issued, 1) >= run->requests)
		return 0;
	return 1;
}

static void bench_say(bench_run *run, const char *fmt, const char *what,
                      const char *why)
{
	if (atomic_fetch_add(&run->messages, 1) < BENCH_MAX_MESSAGES)
		fprintf(stderr, fmt, what, why);
}

/* bench_verifier_main: the verifier's thread. */
static void *bench_verifier_main(void *arg)
{
	bench_verifier *v = arg;
	char why[256];

	pthread_mutex_lock(&v->mu);
	for (;;) {
		while (!v->busy && !v->stop)
			pthread_cond_wait(&v->cv, &v->mu);
		if (!v->busy)
			break;
		pthread_mutex_unlock(&v->mu);
		int bad = bench_compare(v->in, v->tensor, why, sizeof(why));
		if (bad)
			bench_say(v->run,
			          "frameprep-bench: wrong reply for %s: %s\n",
			          v->in->name, why);
		fprep_result_fini(&v->result);
		pthread_mutex_lock(&v->mu);
		v->verified++;
		v->wrong += bad != 0;
		v->busy = 0;
	}
	pthread_mutex_unlock(&v->mu);
	return NULL;
}

/* bench_verifier_offer hands the reply r of input in, whose tensor is at
 * tensor, to v when it is idle: then the stream's conn moves to its other
 * tensor slot, or r's message goes to v. Returns 1 when v took it. */
static int bench_verifier_offer(bench_verifier *v, bench_conn *conn,
                                bench_input *in, const void *tensor,
                                fprep_result *r)
{
	pthread_mutex_lock(&v->mu);
	if (v->busy) {
		pthread_mutex_unlock(&v->mu);
		return 0;
	}
	v->busy = 1;
	v->in = in;
	v->tensor = tensor;
	if (tensor == r->payload) {
		/* The stream keeps reading the header, not the payload. */
		v->result = *r;
		r->priv = NULL;
	} else {
		conn->out_offset = conn->out_offset == conn->out_slots[0]
		                           ? conn->out_slots[1]
		                           : conn->out_slots[0];
	}
	pthread_cond_signal(&v->cv);
	pthread_mutex_unlock(&v->mu);
	return 1;
}

/* bench_verifier_start starts v for run (no verifier: run->verifier stays
 * NULL); bench_verifier_stop compares what it holds, then adds its counts
 * to out and frees it. */
static int bench_verifier_start(bench_run *run, bench_verifier *v)
{
	memset(v, 0, sizeof(*v));
	v->run = run;
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->cv, NULL);
	if (pthread_create(&v->thread, NULL, bench_verifier_main, v) != 0) {
		pthread_mutex_destroy(&v->mu);
		pthread_cond_destroy(&v->cv);
		return -1;
	}
	run->verifier = v;
	return 0;
}

static void bench_verifier_stop(bench_verifier *v, bench_result *out)
{
	pthread_mutex_lock(&v->mu);
	v->stop = 1;
	pthread_cond_signal(&v->cv);
	pthread_mutex_unlock(&v->mu);
	pthread_join(v->thread, NULL);
	pthread_mutex_destroy(&v->mu);
	pthread_cond_destroy(&v->cv);
	v->run->verifier = NULL;
	if (out != NULL) {
		out->verified += v->verified;
		out->wrong += v->wrong;
	}
}

/* bench_check classifies one request's outcome into res, a stream's. A
 * sampled reply goes to the verifier, which may take r's message. Returns
 * 1 if it was a good reply (so far as the verifier has not judged it). */
static int bench_check(bench_run *run, bench_stream *st, bench_input *in,
                       const fprep_request *req, int rc, fprep_result *r,
                       bench_result *res)
{
	bench_conn *conn = st->conn;
	const fprep_reply_header *h = &r->header;
	const bench_opts *o = run->opts;
	const void *tensor = r->payload;
	uint64_t n, want_payload = in->tensor_bytes;
	uint8_t want_loc = FPREP_LOC_INLINE;
	char why[256];
	unsigned i;
	int bad = 0, err;

	if (o->shm_out) {
		tensor = (const char *)fprep_region_base(conn->region) +
		         conn->out_offset;
		want_payload = 0;
		want_loc = FPREP_LOC_SHM;
	}
	/* ROIS, BATCH: a transform record per element follows. */
	want_payload += (uint64_t)in->req.elements * FPREP_ELEMENT_XF_SIZE;

	if (rc == FPREP_ETIMEDOUT) {
		res->timeouts++;
		return 0;
	}
	if (rc == FPREP_ETRANSPORT || rc == FPREP_ECLOSED) {
		res->lost++;
		return 0;
	}
	if (rc == FPREP_EMISMATCH || rc == FPREP_EPROTO) {
		res->wrong++;
		bench_say(run, "frameprep-bench: %s reply: %s\n",
		          fprep_err_name(rc), fprep_strerror(rc));
		return 0;
	}
	if (rc != FPREP_OK || h->status != FPREP_OK) {
		err = rc != FPREP_OK ? rc : (int)h->status;
		res->errors[err > 0 && err < BENCH_ERR_SLOTS
		                    ? err
		                    : FPREP_EINTERNAL]++;
		bench_say(run, "frameprep-bench: error reply %s: %s\n",
		          fprep_err_name(err),
		          rc == FPREP_OK ? h->message : fprep_strerror(rc));
		return 0;
	}
	if (h->kind != req->kind || h->dtype != req->dtype ||
	    h->layout != req->layout || h->ndim != 4 ||
	    h->output_loc != want_loc)
		bad = snprintf(why, sizeof(why),
		               "kind %u dtype %u layout %u ndim %u loc %u, "
		               "expected %u %u %u 4 %u",
		               h->kind, h->dtype, h->layout, h->ndim,
		               h->output_loc, req->kind, req->dtype,
		               req->layout, want_loc);
	for (i = 0; !bad && i < 4; i++)
		if (h->shape[i] != in->shape[i])
			bad = snprintf(why, sizeof(why),
			               "shape (%u,%u,%u,%u), expected "
			               "(%u,%u,%u,%u)",
			               h->shape[0], h->shape[1], h->shape[2],
			               h->shape[3], in->shape[0], in->shape[1],
			               in->shape[2], in->shape[3]);
	if (!bad && (h->tensor_size != in->tensor_bytes ||
	             r->payload_size != want_payload || !tensor))
		bad = snprintf(why, sizeof(why),
		               "tensor_size %llu, payload %zu, expected %llu "
		               "and %llu",
		               (unsigned long long)h->tensor_size,
		               r->payload_size,
		               (unsigned long long)in->tensor_bytes,
		               (unsigned long long)want_payload);
	if (!bad && req->kind != FPREP_KIND_ECHO &&
	    o->verify != BENCH_VERIFY_NONE) {
		n = atomic_fetch_add(&in->replies, 1);
		if (o->verify == BENCH_VERIFY_ALL || run->verifier == NULL) {
			if (o->verify == BENCH_VERIFY_ALL || n == 0 ||
			    n % o->verify_every == 0) {
				res->verified++;
				if (bench_compare(in, tensor, why, sizeof(why)))
					bad = 1;
			}
		} else {
			if (n == 0 || n % o->verify_every == 0)
				st->owed = 1;
			if (st->owed &&
			    bench_verifier_offer(run->verifier, conn, in,
			                         tensor, r))
				st->owed = 0;
		}
	}
	if (bad) {
		res->wrong++;
		bench_say(run, "frameprep-bench: wrong reply for %s: %s\n",
		          in->name, why);
		return 0;
	}
	return 1;
}

static void *bench_stream_main(void *arg)
{
	bench_stream *st = arg;
	bench_run *run = st->run;
	bench_conn *conn = st->conn;
	const bench_opts *o = run->opts;
	bench_result *res = &st->res;
	uint64_t intended, done, idx;
	const void *payload;
	fprep_request req;
	fprep_result r;
	bench_input *in;
	int measured, rc, good;

	for (;;) {
		if (run->open_loop) {
			if (!bench_next_arrival(run, &intended, &measured))
				break;
			bench_sleep_until(intended);
		} else if (!bench_next_closed(run, &intended, &measured)) {
			break;
		}
		idx = atomic_fetch_add(&run->next_input, 1);
		in = &run->inputs[idx % run->ninputs];
		req = in->req;
		if (in->els == NULL)
			req.kind = run->kind;
		payload = bench_elements_payload(in);
		if (o->shm_in && conn->staged != in) {
			/* The producer's write of a new frame (a BATCH: its
			 * frames) into shared memory; a repeated frame is
			 * already there. */
			memcpy(fprep_region_base(conn->region), payload,
			       in->els != NULL ? in->req.input_span
			                       : in->req.input_size);
			conn->staged = in;
		}
		if (conn->region) {
			fprep_request_set_shm(
			        &req, o->shm_in ? conn->region : NULL, 0,
			        o->shm_out ? conn->region : NULL,
			        conn->out_offset, conn->out_capacity);
			req.shm_reply = (uint8_t)(o->shm_out && o->shm_reply);
			if (o->shm_in)
				payload = NULL;
		}
		memset(&r, 0, sizeof(r));
		if (in->els != NULL)
			rc = fprep_client_elements(conn->client, &req, in->els,
			                           in->req.elements, payload,
			                           &r);
		else
			rc = fprep_client_request(conn->client, &req, payload,
			                          &r);
		done = bench_now_ns();
		/* A timed closed loop counts what completes inside the window,
		 * so the requests in flight as it opens are not lost to the
		 * throughput. */
		if (!run->open_loop && run->duration_s > 0)
			measured = done >= run->warm_end_ns;
		good = bench_check(run, st, in, &req, rc, &r, res);
		if (measured) {
			res->sent++;
			if (good) {
				const fprep_reply_header *h = &r.header;

				res->ok++;
				bench_hist_record(&res->hist, done - intended);
				res->in_bytes += in->els != NULL
				                         ? req.input_span
				                         : req.input_size;
				res->out_bytes += h->tensor_size;
				res->srv_sum_us[0] += h->t_queue_us;
				res->srv_sum_us[1] += h->t_compute_us;
				res->srv_sum_us[2] += h->t_h2d_us;
				res->srv_sum_us[3] += h->t_kernel_us;
				res->srv_sum_us[4] += h->t_d2h_us;
				res->srv_sum_us[5] += h->t_total_us;
				if (done > st->last_done_ns)
					st->last_done_ns = done;
				if (st->trace != NULL)
					bench_trace_record(st->trace,
					                   h->message);
			}
		} else {
			res->warmup_sent++;
		}
		atomic_fetch_add(good ? &run->progress_ok : &run->progress_fail,
		                 1);
		fprep_result_fini(&r);
		if (bench_interrupted)
			atomic_store(&run->stop, 1);
	}
	return NULL;
}

/* bench_watch: the thread that prints a live progress line on stderr (when
 * it is a terminal) and turns SIGINT into a stop, until the streams end. */
typedef struct bench_watch {
	bench_run *run;
	const char *label;
	atomic_int done;
} bench_watch;

static void *bench_watch_main(void *arg)
{
	bench_watch *w = arg;
	uint64_t ok, last_ok = 0, now, last_ns = w->run->start_ns;
	int live = !w->run->opts->quiet && isatty(STDERR_FILENO);
	struct timespec ts = {0, 100000000};
	unsigned tick = 0;

	while (!atomic_load(&w->done)) {
		nanosleep(&ts, NULL);
		if (bench_interrupted)
			atomic_store(&w->run->stop, 1);
		if (!live || ++tick % 5)
			continue;
		now = bench_now_ns();
		ok = atomic_load(&w->run->progress_ok);
		fprintf(stderr,
		        "\r\033[K%s %s %6.1f s  ok %llu  fail %llu  %.1f "
		        "frames/s",
		        w->label,
		        now < w->run->warm_end_ns ? "warm-up" : "running",
		        (double)(now - w->run->start_ns) / 1e9,
		        (unsigned long long)ok,
		        (unsigned long long)atomic_load(&w->run->progress_fail),
		        (double)(ok - last_ok) * 1e9 / (double)(now - last_ns));
		last_ok = ok;
		last_ns = now;
	}
	if (live)
		fprintf(stderr, "\r\033[K");
	return NULL;
}

/* bench_run_exec runs one load described by run (its configuration fields
 * set) on conns[0..run->streams) and merges the streams' results into
 * *out. Returns 0, or -1 if threads could not be started. */
static int bench_run_exec(bench_run *run, bench_conn *conns, const char *label,
                          bench_result *out, bench_trace *trace)
{
	bench_stream *st;
	bench_watch watch = {.run = run, .label = label};
	bench_verifier verifier;
	pthread_t watcher;
	uint64_t last = 0;
	unsigned i, k, started = 0;
	int rc = -1;

	st = calloc(run->streams, sizeof(*st));
	if (!st) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return -1;
	}
	atomic_init(&run->next_input, 0);
	atomic_init(&run->measured_issued, 0);
	atomic_init(&run->progress_ok, 0);
	atomic_init(&run->progress_fail, 0);
	atomic_init(&run->messages, 0);
	atomic_init(&run->stop, 0);
	atomic_init(&watch.done, 0);
	pthread_mutex_init(&run->gen_lock, NULL);
	run->start_ns = bench_now_ns();
	run->warm_end_ns = run->start_ns + (uint64_t)(run->warmup_s * 1e9);
	run->end_ns = run->warm_end_ns + (uint64_t)(run->duration_s * 1e9);
	run->gen_next_ns = run->start_ns;
	run->gen_issued = 0;
	run->gen_rng = run->opts->spec.seed;
	run->gen_done = 0;
	run->gen_dropped = 0;
	run->verifier = NULL;
	if (run->kind == FPREP_KIND_FRAME &&
	    run->opts->verify == BENCH_VERIFY_SAMPLE &&
	    bench_verifier_start(run, &verifier) != 0) {
		fprintf(stderr, "frameprep-bench: cannot start a thread\n");
		free(st);
		return -1;
	}
	for (i = 0; i < run->streams; i++) {
		st[i].run = run;
		st[i].conn = &conns[i];
		bench_hist_init(&st[i].res.hist);
		if (trace != NULL &&
		    (st[i].trace = bench_trace_alloc()) == NULL) {
			fprintf(stderr, "frameprep-bench: out of memory\n");
			atomic_store(&run->stop, 1);
			break;
		}
		if (pthread_create(&st[i].thread, NULL, bench_stream_main,
		                   &st[i]) != 0) {
			fprintf(stderr, "frameprep-bench: cannot start a "
			                "thread\n");
			atomic_store(&run->stop, 1);
			break;
		}
		started++;
	}
	if (pthread_create(&watcher, NULL, bench_watch_main, &watch) != 0)
		goto join;
	for (i = 0; i < started; i++)
		pthread_join(st[i].thread, NULL);
	started = 0;
	atomic_store(&watch.done, 1);
	pthread_join(watcher, NULL);
	memset(out, 0, sizeof(*out));
	if (run->verifier != NULL)
		bench_verifier_stop(run->verifier, out);
	if (atomic_load(&run->messages) > BENCH_MAX_MESSAGES)
		fprintf(stderr,
		        "frameprep-bench: %llu more bad replies not shown\n",
		        (unsigned long long)(atomic_load(&run->messages) -
		                             BENCH_MAX_MESSAGES));

	out->cpu_us = out->cpu_cores = -1;
	bench_hist_init(&out->hist);
	out->open_loop = run->open_loop;
	out->concurrency = run->streams;
	out->rate = run->open_loop ? run->rate : 0;
	out->echo = run->kind == FPREP_KIND_ECHO;
	out->dropped = run->gen_dropped;
	for (i = 0; i < run->streams; i++) {
		const bench_result *s = &st[i].res;

		out->warmup_sent += s->warmup_sent;
		out->sent += s->sent;
		out->ok += s->ok;
		out->wrong += s->wrong;
		out->timeouts += s->timeouts;
		out->lost += s->lost;
		out->verified += s->verified;
		out->in_bytes += s->in_bytes;
		out->out_bytes += s->out_bytes;
		for (k = 0; k < BENCH_ERR_SLOTS; k++)
			out->errors[k] += s->errors[k];
		for (k = 0; k < 6; k++)
			out->srv_sum_us[k] += s->srv_sum_us[k];
		bench_hist_merge(&out->hist, &s->hist);
		if (trace != NULL && st[i].trace != NULL)
			bench_trace_merge(trace, st[i].trace);
		if (st[i].last_done_ns > last)
			last = st[i].last_done_ns;
	}
	out->elapsed_s = last > run->warm_end_ns
	                         ? (double)(last - run->warm_end_ns) / 1e9
	                         : 0;
	rc = 0;
join:
	atomic_store(&run->stop, 1);
	for (i = 0; i < started; i++)
		pthread_join(st[i].thread, NULL);
	if (run->verifier != NULL)
		bench_verifier_stop(run->verifier, NULL);
	pthread_mutex_destroy(&run->gen_lock);
	for (i = 0; i < run->streams; i++)
		free(st[i].trace);
	free(st);
	return rc;
}

/* ---- command line ---- */

static int bench_parse_double(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return (end == s || *end || errno || !isfinite(*v)) ? -1 : 0;
}

/* bench_parse_doubles parses "a,b,c" (up to max values); returns the
 * count, or -1. */
static int bench_parse_doubles(const char *s, double *v, int max)
{
	char *end;
	int n = 0;

	for (;;) {
		if (n == max)
			return -1;
		errno = 0;
		v[n] = strtod(s, &end);
		if (end == s || errno || !isfinite(v[n]))
			return -1;
		n++;
		if (*end == 0)
			return n;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

static void bench_usage(FILE *f)
{
	fprintf(f,
	        "Usage: frameprep-bench [OPTIONS]\n"
	        "Load-test frameprepd and check every reply.\n"
	        "\n"
	        "Load:\n"
	        "  -c, --concurrency N[,N...]  closed loop: N streams, each a "
	        "thread with its\n"
	        "                              own connection; a list is a "
	        "sweep (default 1)\n"
	        "  -r, --rate R[,R...]         open loop: R frames/s from a "
	        "pool of\n"
	        "                              --concurrency connections; "
	        "latency is taken\n"
	        "                              from the intended send time; a "
	        "list is a sweep\n"
	        "      --arrivals KIND         open loop arrivals: constant or "
	        "poisson\n"
	        "                              (default constant)\n"
	        "  -d, --duration SECONDS      measured time per point "
	        "(default 10)\n"
	        "  -n, --requests N            measured requests per point "
	        "instead of a time\n"
	        "  -w, --warmup SECONDS        unmeasured time before each "
	        "point (default 1)\n"
	        "  -t, --timeout MS            per-request reply timeout "
	        "(default 10000)\n"
	        "  -u, --socket URL            daemon URL (default: "
	        "$FRAMEPREP_SOCKET, else\n"
	        "                              "
	        "ipc://$XDG_RUNTIME_DIR/frameprep.sock, else\n"
	        "                              "
	        "ipc:///tmp/frameprep-$UID.sock); repeat it or\n"
	        "                              give a comma list for several "
	        "daemons:\n"
	        "                              requests are spread over them "
	        "and resent\n"
	        "                              when one dies (no --shm)\n"
	        "      --trust-socket-owner USER  dial an ipc:// socket "
	        "owned by USER too\n"
	        "                              (default: only yours, root's "
	        "or frameprep's;\n"
	        "                              "
	        "$FRAMEPREP_TRUST_SOCKET_OWNER likewise)\n"
	        "\n"
	        "Frames (one of; default --synthetic 1920x1080):\n"
	        "  -i, --image FILE            one image, decoded once "
	        "(stb_image)\n"
	        "      --image-dir DIR         every image in DIR, sent round "
	        "robin\n"
	        "      --synthetic WxH         seeded random pixels\n"
	        "      --frame-size WxH        resize decoded images to WxH "
	        "first\n"
	        "  -f, --format FMT            bgr8, rgb8, bgra8, rgba8, "
	        "gray8, "
	        "nv12, i420,\n"
	        "                              yuyv (default bgr8; images are "
	        "converted as\n"
	        "                              the frameprep CLI does), or "
	        "jpeg: the\n"
	        "                              --image/--image-dir files sent "
	        "as they are\n"
	        "      --seed N                synthetic pixels and Poisson "
	        "arrivals (default 1)\n"
	        "\n"
	        "Tensor (defaults: the YOLO convention):\n"
	        "  -s WxH                      same as --size WxH\n");
	tool_preprocess_usage(f, 6, 30);
	fprintf(f,
	        "      --echo                  send ECHO requests: the "
	        "transport alone\n"
	        "      --trace                 tabulate the stage times of "
	        "frameprepd --trace\n"
	        "                              (medians, p99 and the "
	        "hand-offs between them);\n"
	        "                              replies without one fail the "
	        "run\n"
	        "      --shm WHERE             in, out, both, none: frames "
	        "and/or tensors\n"
	        "                              through a shared-memory region "
	        "per connection\n"
	        "                              (ipc:// only; a frame is "
	        "written there when\n"
	        "                              it differs from the last one; "
	        "default none)\n"
	        "      --rois N                each request: N boxes of its "
	        "frame (ROIS),\n"
	        "                              one (N, C, H, W) tensor; "
	        "every reply checked\n"
	        "                              whole (--verify), no ceiling "
	        "run\n"
	        "      --batch N               each request: N frames (BATCH)"
	        ", one (N, C, H, W)\n"
	        "                              tensor; frames/s = N x the "
	        "request rate\n"
	        "      --no-stage              with --shm none: send frames "
	        "through the socket;\n"
	        "                              by default the library stages "
	        "them through\n"
	        "                              shared memory on ipc:// (a copy "
	        "per request)\n"
	        "                              and through the client's "
	        "doorbell; the report\n"
	        "                              counts the requests the daemon "
	        "took there\n"
	        "      --no-doorbell           staged frames through the "
	        "socket, not the\n"
	        "                              client's doorbell\n"
	        "      --shm-reply             with --shm out or both: the "
	        "daemon also writes\n"
	        "                              each reply into the region, "
	        "where the client\n"
	        "                              waits (a futex) instead of on "
	        "the socket\n"
	        "      --spin-us N             with --shm-reply or --doorbell: "
	        "each stream polls\n"
	        "                              for its reply up to N us "
	        "before it sleeps\n"
	        "                              (default 0)\n"
	        "      --doorbell              with --shm both: each stream "
	        "sends its requests\n"
	        "                              through a doorbell that "
	        "frameprepd polls while\n"
	        "                              it spins (its --spin-us), "
	        "through the socket\n"
	        "                              while not; the report counts "
	        "the requests the\n"
	        "                              daemon took there\n"
	        "\n"
	        "Checks:\n"
	        "      --verify MODE           all, sample, none: compare "
	        "tensors with the CPU\n"
	        "                              reference (default sample: the "
	        "first reply of\n"
	        "                              each input and every "
	        "--verify-every-th,\n"
	        "                              compared on a thread of its own "
	        "so streams\n"
	        "                              never pause)\n"
	        "      --verify-every N        sampling period (default 64)\n"
	        "      --ceiling, --no-ceiling before each point, run the same "
	        "load with ECHO\n"
	        "                              and report achieved / transport "
	        "ceiling\n"
	        "                              (default on)\n"
	        "      --ceiling-duration S    length of that ECHO run "
	        "(default 2)\n"
	        "      --pcie-gbps G           measured PCIe GB/s per "
	        "direction: report\n"
	        "                              achieved / PCIe ceiling\n"
	        "\n"
	        "Output:\n"
	        "      --json FILE             results as JSON\n"
	        "      --csv FILE              results as CSV, one row per "
	        "point\n"
	        "      --plot FILE.png         p50/p99 latency vs throughput "
	        "(needs gnuplot)\n"
	        "  -q, --quiet                 no progress line\n"
	        "  -h, --help                  this text\n"
	        "  -V, --version               the version\n"
	        "\n"
	        "Exit status: 0 when every reply was right; 1 when any reply "
	        "was lost,\n"
	        "timed out, wrong or an error; 2 on a usage or setup error.\n");
}

enum {
	OPT_ARRIVALS = TOOL_OPT_END,
	OPT_IMAGE_DIR,
	OPT_SYNTHETIC,
	OPT_FRAME_SIZE,
	OPT_SEED,
	OPT_ECHO,
	OPT_SHM,
	OPT_VERIFY,
	OPT_VERIFY_EVERY,
	OPT_CEILING,
	OPT_NO_CEILING,
	OPT_CEILING_DURATION,
	OPT_PCIE,
	OPT_JSON,
	OPT_CSV,
	OPT_PLOT,
	OPT_TRACE,
	OPT_SHM_REPLY,
	OPT_DOORBELL,
	OPT_SPIN_US,
	OPT_TRUST_OWNER,
	OPT_NO_STAGE,
	OPT_NO_DOORBELL,
	OPT_ROIS,
	OPT_BATCH,
};

static const struct option bench_long_opts[] = {
        {"concurrency", required_argument, NULL, 'c'},
        {"rate", required_argument, NULL, 'r'},
        {"arrivals", required_argument, NULL, OPT_ARRIVALS},
        {"duration", required_argument, NULL, 'd'},
        {"requests", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 't'},
        {"socket", required_argument, NULL, 'u'},
        {"trust-socket-owner", required_argument, NULL, OPT_TRUST_OWNER},
        {"image", required_argument, NULL, 'i'},
        {"image-dir", required_argument, NULL, OPT_IMAGE_DIR},
        {"synthetic", required_argument, NULL, OPT_SYNTHETIC},
        {"frame-size", required_argument, NULL, OPT_FRAME_SIZE},
        {"format", required_argument, NULL, 'f'},
        {"seed", required_argument, NULL, OPT_SEED},
        TOOL_PREPROCESS_OPTIONS,
        {"echo", no_argument, NULL, OPT_ECHO},
        {"shm", required_argument, NULL, OPT_SHM},
        {"shm-reply", no_argument, NULL, OPT_SHM_REPLY},
        {"doorbell", no_argument, NULL, OPT_DOORBELL},
        {"no-stage", no_argument, NULL, OPT_NO_STAGE},
        {"no-doorbell", no_argument, NULL, OPT_NO_DOORBELL},
        {"rois", required_argument, NULL, OPT_ROIS},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"spin-us", required_argument, NULL, OPT_SPIN_US},
        {"verify", required_argument, NULL, OPT_VERIFY},
        {"verify-every", required_argument, NULL, OPT_VERIFY_EVERY},
        {"ceiling", no_argument, NULL, OPT_CEILING},
        {"no-ceiling", no_argument, NULL, OPT_NO_CEILING},
        {"ceiling-duration", required_argument, NULL, OPT_CEILING_DURATION},
        {"pcie-gbps", required_argument, NULL, OPT_PCIE},
        {"json", required_argument, NULL, OPT_JSON},
        {"csv", required_argument, NULL, OPT_CSV},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"trace", no_argument, NULL, OPT_TRACE},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
};

/* bench_opt_name returns "--name" for the getopt value opt. */
static const char *bench_opt_name(int opt)
{
	static char name[32];

	for (const struct option *o = bench_long_opts; o->name != NULL; o++)
		if (o->val == opt) {
			snprintf(name, sizeof(name), "--%s", o->name);
			return name;
		}
	return "option";
}

static int bench_bad(const char *opt, const char *arg)
{
	fprintf(stderr, "frameprep-bench: invalid %s '%s' (see --help)\n", opt,
	        arg);
	return 2;
}

/* bench_parse fills *o from argv. Returns 0 to run, -1 to exit 0 (help,
 * version), or 2 on a usage error. */
static int bench_parse(int argc, char **argv, bench_opts *o)
{
	fprep_request *t = &o->spec.tmpl;
	struct tool_preprocess pre = {0};
	double d[BENCH_MAX_POINTS], v;
	int c, n, i, sources = 0;

	memset(o, 0, sizeof(*o));
	o->conc[0] = 1;
	o->nconc = 1;
	o->duration_s = 10;
	o->warmup_s = 1;
	o->verify = BENCH_VERIFY_SAMPLE;
	o->verify_every = 64;
	o->timeout_ms = 10000;
	o->ceiling = 1;
	o->ceiling_s = 2;
	o->spec.format = FPREP_PIX_BGR8;
	o->spec.seed = 1;
	o->spec.synth_w = 1920;
	o->spec.synth_h = 1080;
	fprep_request_init(t, FPREP_PIX_BGR8, 1, 1);

	while ((c = getopt_long(argc, argv, "c:r:d:n:w:t:u:i:f:s:qhV",
	                        bench_long_opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			n = bench_parse_doubles(optarg, d, BENCH_MAX_POINTS);
			if (n < 1)
				return bench_bad("--concurrency", optarg);
			for (i = 0; i < n; i++) {
				if (d[i] < 1 || d[i] > BENCH_MAX_STREAMS ||
				    d[i] != floor(d[i]))
					return bench_bad("--concurrency",
					                 optarg);
				o->conc[i] = (unsigned)d[i];
			}
			o->nconc = (unsigned)n;
			break;
		case 'r':
			n = bench_parse_doubles(optarg, o->rates,
			                        BENCH_MAX_POINTS);
			if (n < 1)
				return bench_bad("--rate", optarg);
			for (i = 0; i < n; i++)
				if (!(o->rates[i] > 0))
					return bench_bad("--rate", optarg);
			o->nrates = (unsigned)n;
			break;
		case OPT_ARRIVALS:
			if (strcmp(optarg, "constant") == 0)
				o->arrivals = BENCH_ARRIVALS_CONSTANT;
			else if (strcmp(optarg, "poisson") == 0)
				o->arrivals = BENCH_ARRIVALS_POISSON;
			else
				return bench_bad("--arrivals", optarg);
			break;
		case 'd':
			if (bench_parse_double(optarg, &o->duration_s) ||
			    !(o->duration_s > 0))
				return bench_bad("--duration", optarg);
			o->requests = 0;
			break;
		case 'n':
			if (bench_parse_double(optarg, &v) || v < 1 ||
			    v != floor(v))
				return bench_bad("--requests", optarg);
			o->requests = (uint64_t)v;
			o->duration_s = 0;
			break;
		case 'w':
			if (bench_parse_double(optarg, &o->warmup_s) ||
			    o->warmup_s < 0)
				return bench_bad("--warmup", optarg);
			break;
		case 't':
			if (bench_parse_double(optarg, &v) || v < 1 ||
			    v > 3600000)
				return bench_bad("--timeout", optarg);
			o->timeout_ms = (int)v;
			break;
		case 'u':
			if (tool_socket(o->urls, sizeof(o->urls), optarg) != 0)
				return bench_bad("--socket", optarg);
			o->url = o->urls;
			break;
		case OPT_TRUST_OWNER:
			o->trust_owner = optarg;
			break;
		case 'i':
			o->spec.image = optarg;
			sources++;
			break;
		case OPT_IMAGE_DIR:
			o->spec.image_dir = optarg;
			sources++;
			break;
		case OPT_SYNTHETIC:
			if (tool_size(optarg, &o->spec.synth_w,
			              &o->spec.synth_h))
				return bench_bad("--synthetic", optarg);
			sources++;
			break;
		case OPT_FRAME_SIZE:
			if (tool_size(optarg, &o->spec.frame_w,
			              &o->spec.frame_h))
				return bench_bad("--frame-size", optarg);
			break;
		case 'f':
			n = tool_lookup(TOOL_FORMAT, optarg);
			if (!n)
				return bench_bad("--format", optarg);
			o->spec.format = (uint16_t)n;
			break;
		case OPT_SEED:
			if (bench_parse_double(optarg, &v) || v < 0)
				return bench_bad("--seed", optarg);
			o->spec.seed = (uint64_t)v;
			break;
		case OPT_ECHO:
			o->echo = 1;
			break;
		case OPT_SHM_REPLY:
			o->shm_reply = 1;
			break;
		case OPT_DOORBELL:
			o->doorbell = 1;
			break;
		case OPT_NO_STAGE:
			o->no_stage = 1;
			break;
		case OPT_NO_DOORBELL:
			o->no_doorbell = 1;
			break;
		case OPT_ROIS:
		case OPT_BATCH:
			if (bench_parse_double(optarg, &v) || v < 1 ||
			    v > FPREP_ELEMENTS_MAX)
				return bench_bad(c == OPT_ROIS ? "--rois"
				                               : "--batch",
				                 optarg);
			*(c == OPT_ROIS ? &o->rois : &o->batch) = (unsigned)v;
			break;
		case OPT_SPIN_US:
			if (bench_parse_double(optarg, &v) || v < 0 ||
			    v > 1000000)
				return bench_bad("--spin-us", optarg);
			o->spin_us = (unsigned)v;
			break;
		case OPT_SHM:
			o->shm_in = strcmp(optarg, "in") == 0 ||
			            strcmp(optarg, "both") == 0;
			o->shm_out = strcmp(optarg, "out") == 0 ||
			             strcmp(optarg, "both") == 0;
			if (!o->shm_in && !o->shm_out &&
			    strcmp(optarg, "none") != 0)
				return bench_bad("--shm", optarg);
			break;
		case OPT_VERIFY:
			if (strcmp(optarg, "all") == 0)
				o->verify = BENCH_VERIFY_ALL;
			else if (strcmp(optarg, "sample") == 0)
				o->verify = BENCH_VERIFY_SAMPLE;
			else if (strcmp(optarg, "none") == 0)
				o->verify = BENCH_VERIFY_NONE;
			else
				return bench_bad("--verify", optarg);
			break;
		case OPT_VERIFY_EVERY:
			if (bench_parse_double(optarg, &v) || v < 1 || v > 1e9)
				return bench_bad("--verify-every", optarg);
			o->verify_every = (unsigned)v;
			break;
		case OPT_CEILING:
			o->ceiling = 1;
			break;
		case OPT_NO_CEILING:
			o->ceiling = 0;
			break;
		case OPT_CEILING_DURATION:
			if (bench_parse_double(optarg, &o->ceiling_s) ||
			    !(o->ceiling_s > 0))
				return bench_bad("--ceiling-duration", optarg);
			break;
		case OPT_PCIE:
			if (bench_parse_double(optarg, &o->pcie_gbps) ||
			    !(o->pcie_gbps > 0))
				return bench_bad("--pcie-gbps", optarg);
			break;
		case OPT_JSON:
			o->json = optarg;
			break;
		case OPT_CSV:
			o->csv = optarg;
			break;
		case OPT_TRACE:
			o->trace = 1;
			break;
		case OPT_PLOT:
			o->plot = optarg;
			break;
		case 'q':
			o->quiet = 1;
			break;
		case 'h':
			bench_usage(stdout);
			return -1;
		case 'V':
			printf("frameprep-bench %s\n", FPREP_VERSION_STRING);
			return -1;
		default:
			n = tool_preprocess_option(&pre, c, optarg);
			if (n < 0) {
				fprintf(stderr,
				        "frameprep-bench: invalid %s '%s': "
				        "%s\n",
				        bench_opt_name(c), optarg,
				        tool_option_values(c));
				return 2;
			}
			if (n > 0) {
				bench_usage(stderr);
				return 2;
			}
			break;
		}
	}
	tool_preprocess_apply(&pre, t);
	if (optind < argc) {
		fprintf(stderr, "frameprep-bench: unexpected argument '%s'\n",
		        argv[optind]);
		return 2;
	}
	if (sources > 1) {
		fprintf(stderr, "frameprep-bench: give one of --image, "
		                "--image-dir, --synthetic\n");
		return 2;
	}
	if (o->spec.format == FPREP_PIX_JPEG && !o->spec.image &&
	    !o->spec.image_dir) {
		fprintf(stderr, "frameprep-bench: --format jpeg sends JPEG "
		                "files: give --image or --image-dir\n");
		return 2;
	}
	if (o->nrates && o->nconc > 1) {
		fprintf(stderr, "frameprep-bench: with --rate, --concurrency "
		                "is the pool size: give one value\n");
		return 2;
	}
	if (o->doorbell && !(o->shm_in && o->shm_out)) {
		fprintf(stderr, "frameprep-bench: --doorbell needs --shm both "
		                "(a request through a doorbell has its frame "
		                "and its tensor in regions)\n");
		return 2;
	}
	return 0;
}

/* bench_info_value copies the value of "key: value" in the INFO text into
 * buf ("" when absent). */
static void bench_info_value(const char *text, const char *key, char *buf,
                             size_t size)
{
	size_t klen = strlen(key), n;
	const char *p = text, *end;

	buf[0] = 0;
	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			p += klen + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			end = strchr(p, '\n');
			n = end ? (size_t)(end - p) : strlen(p);
			if (n >= size)
				n = size - 1;
			memcpy(buf, p, n);
			buf[n] = 0;
			return;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
}

/* bench_doorbell_requests reads the daemon's count of requests taken
 * from doorbells (INFO doorbell_requests); UINT64_MAX when unknown. */
static uint64_t bench_doorbell_requests(fprep_client *c)
{
	fprep_result res;
	char value[32] = "";
	uint64_t n = UINT64_MAX;

	if (fprep_client_info(c, &res) == FPREP_OK &&
	    res.header.status == FPREP_OK && res.payload != NULL) {
		bench_info_value((const char *)res.payload, "doorbell_requests",
		                 value, sizeof(value));
		if (value[0] != '\0')
			n = strtoull(value, NULL, 10);
	}
	fprep_result_fini(&res);
	return n;
}

/* bench_doorbell_report prints how many requests the daemon took from
 * doorbells since it counted db0 (what: which requests could go there),
 * or why that is unknown: no answer to INFO now (the daemon is gone), or
 * a count below db0 (another daemon answers: it restarted). */
static void bench_doorbell_report(fprep_client *c, uint64_t db0,
                                  const char *what)
{
	uint64_t db1 = bench_doorbell_requests(c);

	if (db1 == UINT64_MAX)
		printf("doorbell: requests taken by the daemon from doorbells "
		       "unknown (no INFO answer at the end: %s)\n",
		       fprep_client_last_error(c));
	else if (db1 < db0)
		printf("doorbell: requests taken by the daemon from doorbells "
		       "unknown (its count went from %" PRIu64 " to %" PRIu64
		       ": it restarted)\n",
		       db0, db1);
	else
		printf("doorbell: %" PRIu64 " requests taken by the daemon "
		       "from doorbells%s\n",
		       db1 - db0, what);
}

/* bench_doorbells sets up each connection's doorbell (--doorbell) and
 * returns the daemon's count of requests taken from doorbells so far, or
 * UINT64_MAX after saying why it could not. */
static uint64_t bench_doorbells(bench_conn *conns, unsigned n)
{
	uint64_t taken;
	int rc;

	for (unsigned i = 0; i < n; i++) {
		rc = fprep_client_doorbell(conns[i].client, 1);
		if (rc != FPREP_OK) {
			fprintf(stderr,
			        "frameprep-bench: --doorbell: %s (%s)\n",
			        fprep_strerror(rc),
			        fprep_client_last_error(conns[i].client));
			return UINT64_MAX;
		}
	}
	taken = bench_doorbell_requests(conns[0].client);
	if (taken == UINT64_MAX)
		fprintf(stderr, "frameprep-bench: --doorbell: the daemon's "
		                "INFO has no doorbell_requests\n");
	return taken;
}

/* bench_open_regions gives each connection a shared-memory region with a
 * frame slot for the largest input and, page-aligned after it, two tensor
 * slots for the largest tensor (bench_conn). */
static int bench_open_regions(bench_conn *conns, unsigned n,
                              const bench_input *inputs, size_t ninputs)
{
	uint64_t in_max = 0, out_max = 0;
	unsigned i;
	size_t k;
	int rc;

	for (k = 0; k < ninputs; k++) {
		uint64_t in_k = inputs[k].els != NULL
		                        ? inputs[k].req.input_span
		                        : inputs[k].req.input_size;

		if (in_k > in_max)
			in_max = in_k;
		if (inputs[k].tensor_bytes > out_max)
			out_max = inputs[k].tensor_bytes;
	}
	in_max = (in_max + 4095) & ~(uint64_t)4095;
	/* The reply header (--shm-reply) follows the largest tensor, 8-byte
	 * aligned (protocol.h). */
	out_max = ((out_max + 7) & ~(uint64_t)7) + FPREP_REPLY_HEADER_SIZE;
	for (i = 0; i < n; i++) {
		rc = fprep_region_open(&conns[i].region, conns[i].client,
		                       (size_t)(in_max + 2 * out_max));
		if (rc) {
			fprintf(stderr,
			        "frameprep-bench: --shm: cannot open a "
			        "shared-memory region: %s (%s)\n",
			        fprep_strerror(rc),
			        fprep_client_last_error(conns[i].client));
			return -1;
		}
		conns[i].out_slots[0] = conns[i].out_offset = in_max;
		conns[i].out_slots[1] = in_max + out_max;
		conns[i].out_capacity = out_max;
	}
	return 0;
}

static void bench_on_sigint(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

/* bench_describe writes the input and tensor descriptions. */
static void bench_describe(const bench_opts *o, const bench_input *inputs,
                           size_t n, char *input, size_t isize, char *request,
                           size_t rsize)
{
	const fprep_request *t = &inputs[0].req;
	char fmt[64];

	if (o->spec.format >= FPREP_PIX_NV12 &&
	    o->spec.format != FPREP_PIX_JPEG)
		snprintf(fmt, sizeof(fmt), "%s %s %s",
		         tool_name(TOOL_FORMAT, o->spec.format),
		         t->yuv_matrix ? tool_name(TOOL_MATRIX, t->yuv_matrix)
		                       : "bt601",
		         t->yuv_range ? tool_name(TOOL_RANGE, t->yuv_range)
		                      : "limited");
	else
		snprintf(fmt, sizeof(fmt), "%s",
		         tool_name(TOOL_FORMAT, o->spec.format));

	if (o->spec.image_dir)
		snprintf(input, isize, "%zu images from %s, %s%s", n,
		         o->spec.image_dir, fmt,
		         o->spec.frame_w ? " resized" : "");
	else if (o->spec.image)
		snprintf(input, isize, "image %s, %ux%u %s", o->spec.image,
		         t->src_width, t->src_height, fmt);
	else
		snprintf(input, isize, "synthetic %ux%u %s, seed %llu",
		         t->src_width, t->src_height, fmt,
		         (unsigned long long)o->spec.seed);
	snprintf(
	        request, rsize,
	        "%s%s%ux%u %s %s %s %s, rounding %s, scale %g, mean "
	        "(%g,%g,%g), std (%g,%g,%g), pad %g, %llu bytes in, %llu bytes "
	        "out%s",
	        o->echo ? "ECHO " : "",
	        o->shm_in && o->shm_out ? "shm in+out, "
	        : o->shm_in             ? "shm in, "
	        : o->shm_out            ? "shm out, "
	                                : "",
	        t->out_width, t->out_height, tool_name(TOOL_RESIZE, t->resize),
	        tool_name(TOOL_ORDER, t->channel_order),
	        tool_name(TOOL_DTYPE, t->dtype),
	        tool_name(TOOL_LAYOUT, t->layout),
	        tool_rounding_name(t->rounding), t->scale, t->mean[0],
	        t->mean[1], t->mean[2], t->std[0], t->std[1], t->std[2],
	        t->pad_value, (unsigned long long)t->input_size,
	        (unsigned long long)inputs[0].tensor_bytes,
	        n > 1 ? " (first input)" : "");
}

int main(int argc, char **argv)
{
	bench_opts o;
	bench_input *inputs = NULL;
	size_t ninputs = 0;
	bench_conn *conns = NULL;
	bench_result *runs = NULL, echo_res;
	double ceil_fps, ceil_p50_us;
	bench_report rep;
	bench_run run;
	fprep_result info;
	char url[TOOL_URLS_SIZE], backend[64] = "unknown", device[128] = "";
	char input_desc[512], request_desc[512], label[64];
	char *info_text = NULL, pid_text[32] = "";
	long daemon_pid = 0;
	uint64_t cpu0 = 0, cpu1 = 0, t0 = 0;
	bench_trace *trace = NULL;
	unsigned npoints, nclients = 0, i, p;
	uint64_t ceiling_fail = 0, fail = 0;
	uint64_t db0 = 0;
	int staged;
	int trace_fail = 0;
	int rc, status = 2;

	rc = bench_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, bench_on_sigint);
	if (o.url) {
		snprintf(url, sizeof(url), "%s", o.url);
	} else if (fprep_default_url(url, sizeof(url))) {
		fprintf(stderr, "frameprep-bench: no default URL\n");
		return 2;
	}
	if (bench_inputs_load(&o.spec, &inputs, &ninputs))
		return 2;
	if (o.rois > 0 || o.batch > 0) {
		/* One request carries N elements; no ECHO of them (ceiling). */
		if (o.rois > 0 && o.batch > 0) {
			fprintf(stderr, "frameprep-bench: --rois or --batch, "
			                "not both\n");
			return 2;
		}
		if (o.echo || o.doorbell || o.shm_reply) {
			fprintf(stderr, "frameprep-bench: --rois and --batch "
			                "take no --echo, --doorbell or "
			                "--shm-reply\n");
			return 2;
		}
		o.ceiling = 0;
		if (bench_elements_setup(inputs, ninputs, o.rois, o.batch))
			return 2;
	}
	bench_describe(&o, inputs, ninputs, input_desc, sizeof(input_desc),
	               request_desc, sizeof(request_desc));

	npoints = o.nrates ? o.nrates : o.nconc;
	for (i = 0; i < o.nconc; i++)
		if (o.conc[i] > nclients)
			nclients = o.conc[i];
	conns = calloc(nclients, sizeof(*conns));
	runs = calloc(npoints, sizeof(*runs));
	if (!conns || !runs) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		goto out;
	}
	for (i = 0; i < nclients; i++) {
		rc = fprep_client_open_trusting(&conns[i].client, url,
		                                o.timeout_ms, o.trust_owner);
		if (rc) {
			fprintf(stderr,
			        "frameprep-bench: cannot connect to %s: %s "
			        "(%s%s)\n",
			        url, fprep_strerror(rc),
			        fprep_client_last_error(NULL),
			        rc == FPREP_ETRANSPORT
			                ? "; is frameprepd running?"
			                : "");
			goto out;
		}
		fprep_client_set_spin(conns[i].client, o.spin_us);
		if (o.no_stage)
			fprep_client_set_staging(conns[i].client, 0);
		if (o.no_doorbell)
			(void)fprep_client_doorbell(conns[i].client, 0);
	}

	/* What the daemon runs; a server that cannot answer INFO is still
	 * measured, since its frame replies are checked one by one. */
	memset(&info, 0, sizeof(info));
	rc = fprep_client_info(conns[0].client, &info);
	if (rc == FPREP_OK && info.header.status == FPREP_OK && info.payload) {
		info_text = strndup(info.payload, info.payload_size);
		if (info_text) {
			bench_info_value(info_text, "backend", backend,
			                 sizeof(backend));
			bench_info_value(info_text, "device", device,
			                 sizeof(device));
			bench_info_value(info_text, "pid", pid_text,
			                 sizeof(pid_text));
			if (!backend[0])
				snprintf(backend, sizeof(backend), "unknown");
		}
	} else {
		fprintf(stderr, "frameprep-bench: INFO failed: %s\n",
		        rc ? fprep_strerror(rc) : info.header.message);
	}
	fprep_result_fini(&info);
	/* The daemon's CPU time is read where it runs on this host. */
	if (strncmp(url, "ipc://", 6) == 0 && pid_text[0] != '\0')
		daemon_pid = strtol(pid_text, NULL, 10);
	if (daemon_pid > 0 && bench_cpu_us(daemon_pid, &cpu0) != 0)
		daemon_pid = 0;
	if (o.trace && (trace = bench_trace_alloc()) == NULL) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		goto out;
	}

	/* Frames the daemon would drop unanswered stop the run before it
	 * starts; each client learns the limits here, outside the timing. */
	for (i = 0; i < nclients && !o.shm_in; i++) {
		for (unsigned k = 0; k < ninputs; k++) {
			rc = fprep_client_check_request(conns[i].client,
			                                &inputs[k].req);
			if (rc) {
				fprintf(stderr, "frameprep-bench: %s: %s: %s\n",
				        inputs[k].name, fprep_err_name(rc),
				        fprep_client_last_error(
				                conns[i].client));
				goto out;
			}
		}
	}

	if ((o.shm_in || o.shm_out) &&
	    bench_open_regions(conns, nclients, inputs, ninputs))
		goto out;
	if (o.doorbell &&
	    (db0 = bench_doorbells(conns, nclients)) == UINT64_MAX)
		goto out;
	/* The staged frames go through the client's own doorbell: counted
	 * too, where INFO tells. */
	staged = !o.doorbell && !o.shm_in && !o.shm_out && !o.no_stage &&
	         o.rois == 0 && o.batch == 0;
	if (staged)
		db0 = bench_doorbell_requests(conns[0].client);

	for (p = 0; p < npoints && !bench_interrupted; p++) {
		memset(&run, 0, sizeof(run));
		run.opts = &o;
		run.inputs = inputs;
		run.ninputs = ninputs;
		run.streams = o.nrates ? o.conc[0] : o.conc[p];
		ceil_fps = ceil_p50_us = 0;
		if (o.ceiling && !o.echo) {
			run.kind = FPREP_KIND_ECHO;
			run.duration_s = o.ceiling_s;
			run.warmup_s = o.warmup_s < 0.5 ? o.warmup_s : 0.5;
			snprintf(label, sizeof(label), "[ceiling c=%u]",
			         run.streams);
			if (bench_run_exec(&run, conns, label, &echo_res, NULL))
				goto out;
			ceiling_fail += bench_result_fail_count(&echo_res);
			if (echo_res.elapsed_s > 0)
				ceil_fps = (double)echo_res.ok /
				           echo_res.elapsed_s;
			ceil_p50_us = (double)bench_hist_percentile(
			                      &echo_res.hist, 50) /
			              1000.0;
		}
		run.kind = o.echo ? FPREP_KIND_ECHO : FPREP_KIND_FRAME;
		run.open_loop = o.nrates > 0;
		run.rate = o.nrates ? o.rates[p] : 0;
		run.duration_s = o.duration_s;
		run.requests = o.requests;
		run.warmup_s = o.warmup_s;
		if (run.open_loop)
			snprintf(label, sizeof(label), "[%.0f/s pool %u]",
			         run.rate, run.streams);
		else
			snprintf(label, sizeof(label), "[c=%u]", run.streams);
		if (trace != NULL) {
			free(trace);
			if ((trace = bench_trace_alloc()) == NULL)
				goto out;
		}
		t0 = bench_now_ns();
		if (daemon_pid > 0 && bench_cpu_us(daemon_pid, &cpu0) != 0)
			daemon_pid = 0;
		if (bench_run_exec(&run, conns, label, &runs[p], trace))
			goto out;
		if (daemon_pid > 0 && bench_cpu_us(daemon_pid, &cpu1) == 0 &&
		    runs[p].sent + runs[p].warmup_sent > 0) {
			runs[p].cpu_us =
			        (double)(cpu1 - cpu0) /
			        (double)(runs[p].sent + runs[p].warmup_sent);
			runs[p].cpu_cores = (double)(cpu1 - cpu0) * 1000.0 /
			                    (double)(bench_now_ns() - t0);
		}
		if (trace != NULL) {
			bench_trace_print(stdout, label, trace);
			if (trace->missing || trace->bad || !trace->traced)
				trace_fail = 1;
		}
		runs[p].ceiling_fps = ceil_fps;
		runs[p].ceiling_p50_us = ceil_p50_us;
		fail += bench_result_fail_count(&runs[p]);
	}

	rep.url = url;
	rep.backend = backend;
	rep.device = device;
	rep.server_info = info_text ? info_text : "";
	rep.input = input_desc;
	rep.request = request_desc;
	rep.inputs = (unsigned)ninputs;
	rep.pcie_gbps = o.pcie_gbps;
	rep.runs = runs;
	rep.nruns = p;
	bench_report_table(stdout, &rep);
	if (o.doorbell || (staged && db0 != UINT64_MAX))
		bench_doorbell_report(conns[0].client, db0,
		                      staged ? " (the clients' own, for staged "
		                               "frames: the measured runs', "
		                               "their warm-ups' and the ECHO "
		                               "ceilings'; the others went "
		                               "through the socket)"
		                             : "");
	fflush(stdout);
	status = 0;
	if (o.json && bench_report_json(o.json, &rep))
		status = 2;
	if (o.csv && bench_report_csv(o.csv, &rep))
		status = 2;
	if (o.plot && bench_report_plot(o.plot, &rep))
		status = 2;
	if (ceiling_fail)
		fprintf(stderr,
		        "frameprep-bench: %llu ECHO (ceiling) requests "
		        "failed\n",
		        (unsigned long long)ceiling_fail);
	if (trace_fail) {
		fprintf(stderr, "frameprep-bench: FAILED: --trace: replies "
		                "without a trace or with a malformed one (is "
		                "frameprepd run with --trace?)\n");
		status = 1;
	}
	if (fail || ceiling_fail) {
		fprintf(stderr, "frameprep-bench: FAILED: %llu bad replies\n",
		        (unsigned long long)(fail + ceiling_fail));
		status = 1;
	} else if (bench_interrupted) {
		fprintf(stderr, "frameprep-bench: interrupted\n");
		status = 1;
	}
out:
	for (i = 0; conns && i < nclients; i++) {
		fprep_region_close(conns[i].region);
		fprep_client_close(conns[i].client);
	}
	free(conns);
	free(runs);
	free(trace);
	free(info_text);
	bench_inputs_free(inputs, ninputs);
	return status;
}
