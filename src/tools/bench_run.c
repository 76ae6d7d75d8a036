/*
 * bench_run.c: one run of frameprep-bench's load (see bench_run.h).
 *
 * Each stream is a thread with its own connection that sends requests
 * (closed loop: one after another; open loop: at the intended times of a
 * schedule the streams share), checks each reply and records it into its
 * own histogram; the streams' results are merged once they have ended.
 */
#include "bench_run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_cuda.h"
#include "bench_elements.h"
#include "bench_hist.h"

#define BENCH_MAX_MESSAGES 5 /* mismatch descriptions printed per run */

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

volatile sig_atomic_t bench_interrupted;

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bench_sleep_until(uint64_t ns)
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

/* bench_check_status counts a request that failed (rc) or got an error
 * reply (header h) into res. Returns 1 for a reply with status OK, else
 * 0. */
static int bench_check_status(bench_run *run, int rc,
                              const fprep_reply_header *h, bench_result *res)
{
	int err;

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
	return 1;
}

/* bench_check_header checks reply r's header against request req on input
 * in: the tensor expected where want_loc says, want_payload bytes in the
 * message. Returns 0, or nonzero after writing why into why (size bytes). */
static int bench_check_header(const bench_input *in, const fprep_request *req,
                              const fprep_result *r, uint8_t want_loc,
                              uint64_t want_payload, const void *tensor,
                              char *why, size_t size)
{
	const fprep_reply_header *h = &r->header;

	if (h->kind != req->kind || h->dtype != req->dtype ||
	    h->layout != req->layout || h->ndim != 4 ||
	    h->output_loc != want_loc)
		return snprintf(why, size,
		                "kind %u dtype %u layout %u ndim %u loc %u, "
		                "expected %u %u %u 4 %u",
		                h->kind, h->dtype, h->layout, h->ndim,
		                h->output_loc, req->kind, req->dtype,
		                req->layout, want_loc);
	for (unsigned i = 0; i < 4; i++)
		if (h->shape[i] != in->shape[i])
			return snprintf(why, size,
			                "shape (%u,%u,%u,%u), expected "
			                "(%u,%u,%u,%u)",
			                h->shape[0], h->shape[1], h->shape[2],
			                h->shape[3], in->shape[0], in->shape[1],
			                in->shape[2], in->shape[3]);
	if (h->tensor_size != in->tensor_bytes ||
	    r->payload_size != want_payload || !tensor)
		return snprintf(why, size,
		                "tensor_size %llu, payload %zu, expected %llu "
		                "and %llu",
		                (unsigned long long)h->tensor_size,
		                r->payload_size,
		                (unsigned long long)in->tensor_bytes,
		                (unsigned long long)want_payload);
	return 0;
}

/* bench_check_content compares the tensor with the CPU reference where
 * --verify asks: in the stream (--verify all, or no verifier), else by
 * handing reply r to the verifier, which may take its message. Returns
 * 0, or 1 after writing why into why (size bytes). */
static int bench_check_content(bench_run *run, bench_stream *st,
                               bench_input *in, const void *tensor,
                               fprep_result *r, bench_result *res, char *why,
                               size_t size)
{
	const bench_opts *o = run->opts;
	uint64_t n = atomic_fetch_add(&in->replies, 1);
	int due = n == 0 || n % o->verify_every == 0;

	if (o->verify == BENCH_VERIFY_ALL || run->verifier == NULL) {
		if (o->verify != BENCH_VERIFY_ALL && !due)
			return 0;
		res->verified++;
		return bench_compare(in, tensor, why, size) != 0;
	}
	if (due)
		st->owed = 1;
	if (st->owed &&
	    bench_verifier_offer(run->verifier, st->conn, in, tensor, r))
		st->owed = 0;
	return 0;
}

/* bench_check_cuda compares in's tensor in the connection's device memory
 * with the CPU reference when it is due (--verify), after copying it to
 * the host on the calling stream's thread: the next request of this
 * stream waits for that, which the sampling keeps rare. Returns non-zero
 * (why said) when it differs or cannot be read. */
static int bench_check_cuda(bench_run *run, bench_conn *conn, bench_input *in,
                            bench_result *res, char *why, size_t size)
{
	const bench_opts *o = run->opts;
	uint64_t n = atomic_fetch_add(&in->replies, 1);

	if (o->verify != BENCH_VERIFY_ALL && n != 0 && n % o->verify_every)
		return 0;
	res->verified++;
	if (bench_cuda_to_host(conn->cuda_host, conn->cuda_dptr,
	                       in->tensor_bytes)) {
		snprintf(why, size, "cuMemcpyDtoH of the tensor failed");
		return 1;
	}
	return bench_compare(in, conn->cuda_host, why, size) != 0;
}

/* bench_check classifies one request's outcome into res, a stream's. A
 * sampled reply goes to the verifier, which may take r's message. Returns
 * 1 if it was a good reply (so far as the verifier has not judged it). */
static int bench_check(bench_run *run, bench_stream *st, bench_input *in,
                       const fprep_request *req, int rc, fprep_result *r,
                       bench_result *res)
{
	bench_conn *conn = st->conn;
	const bench_opts *o = run->opts;
	const void *tensor = r->payload;
	uint64_t want_payload = in->tensor_bytes;
	uint8_t want_loc = FPREP_LOC_INLINE;
	char why[256];
	int bad;

	if (o->shm_out) {
		tensor = (const char *)fprep_region_base(conn->region) +
		         conn->out_offset;
		want_payload = 0;
		want_loc = FPREP_LOC_SHM;
	} else if (o->cuda_out) {
		tensor = conn->cuda_host; /* filled when it is compared */
		want_payload = 0;
		want_loc = FPREP_LOC_CUDA;
	}
	/* ROIS, BATCH: a transform record per element follows. */
	want_payload += (uint64_t)in->req.elements * FPREP_ELEMENT_XF_SIZE;
	if (!bench_check_status(run, rc, &r->header, res))
		return 0;
	bad = bench_check_header(in, req, r, want_loc, want_payload, tensor,
	                         why, sizeof(why));
	if (!bad && req->kind != FPREP_KIND_ECHO &&
	    o->verify != BENCH_VERIFY_NONE)
		bad = o->cuda_out ? bench_check_cuda(run, conn, in, res, why,
		                                     sizeof(why))
		                  : bench_check_content(run, st, in, tensor, r,
		                                        res, why, sizeof(why));
	if (bad) {
		res->wrong++;
		bench_say(run, "frameprep-bench: wrong reply for %s: %s\n",
		          in->name, why);
		return 0;
	}
	return 1;
}

/* bench_stream_send sends input in's request on the stream's connection
 * (its frame written into the region first with --shm in, where it is not
 * there already) and waits for its reply into *r. req gets the request
 * sent. Returns the client's status. */
static int bench_stream_send(bench_stream *st, bench_input *in,
                             fprep_request *req, fprep_result *r)
{
	const bench_opts *o = st->run->opts;
	bench_conn *conn = st->conn;
	const void *payload = bench_elements_payload(in);

	*req = in->req;
	if (in->els == NULL)
		req->kind = st->run->kind;
	if (o->shm_in && conn->staged != in) {
		/* The producer's write of a new frame (a BATCH: its frames)
		 * into shared memory; a repeated frame is already there. */
		memcpy(fprep_region_base(conn->region), payload,
		       in->els != NULL ? in->req.input_span
		                       : in->req.input_size);
		conn->staged = in;
	}
	if (conn->region || conn->cuda_region) {
		fprep_request_set_shm(req, o->shm_in ? conn->region : NULL, 0,
		                      conn->cuda_region ? conn->cuda_region
		                      : o->shm_out      ? conn->region
		                                        : NULL,
		                      conn->out_offset, conn->out_capacity);
		req->shm_reply = (uint8_t)(o->shm_out && o->shm_reply);
		if (o->shm_in)
			payload = NULL;
	}
	memset(r, 0, sizeof(*r));
	if (in->els != NULL)
		return fprep_client_elements(conn->client, req, in->els,
		                             in->req.elements, payload, r);
	return fprep_client_request(conn->client, req, payload, r);
}

/* bench_stream_record counts a good measured reply r to req (sent at
 * intended, done at done) into the stream's result. */
static void bench_stream_record(bench_stream *st, const bench_input *in,
                                const fprep_request *req, const fprep_result *r,
                                uint64_t intended, uint64_t done)
{
	const fprep_reply_header *h = &r->header;
	bench_result *res = &st->res;

	res->ok++;
	bench_hist_record(&res->hist, done - intended);
	res->in_bytes += in->els != NULL ? req->input_span : req->input_size;
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
		bench_trace_record(st->trace, h->message);
}

static void *bench_stream_main(void *arg)
{
	bench_stream *st = arg;
	bench_run *run = st->run;
	uint64_t intended, done, idx;
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
		rc = bench_stream_send(st, in, &req, &r);
		done = bench_now_ns();
		/* A timed closed loop counts what completes inside the window,
		 * so the requests in flight as it opens are not lost to the
		 * throughput. */
		if (!run->open_loop && run->duration_s > 0)
			measured = done >= run->warm_end_ns;
		good = bench_check(run, st, in, &req, rc, &r, &st->res);
		if (measured)
			st->res.sent++;
		else
			st->res.warmup_sent++;
		if (measured && good)
			bench_stream_record(st, in, &req, &r, intended, done);
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

/* bench_run_reset readies run's shared state for a run that starts now. */
static void bench_run_reset(bench_run *run)
{
	atomic_init(&run->next_input, 0);
	atomic_init(&run->measured_issued, 0);
	atomic_init(&run->progress_ok, 0);
	atomic_init(&run->progress_fail, 0);
	atomic_init(&run->messages, 0);
	atomic_init(&run->stop, 0);
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
}

/* bench_run_start starts a thread per stream st[0..run->streams) on
 * conns, each with a trace where trace is not NULL. Returns how many
 * started; past a failure (said) the run is stopped. */
static unsigned bench_run_start(bench_run *run, bench_stream *st,
                                bench_conn *conns, const bench_trace *trace)
{
	unsigned i;

	for (i = 0; i < run->streams; i++) {
		st[i].run = run;
		st[i].conn = &conns[i];
		bench_hist_init(&st[i].res.hist);
		if (trace != NULL &&
		    (st[i].trace = bench_trace_alloc()) == NULL) {
			fprintf(stderr, "frameprep-bench: out of memory\n");
			break;
		}
		if (pthread_create(&st[i].thread, NULL, bench_stream_main,
		                   &st[i]) != 0) {
			fprintf(stderr, "frameprep-bench: cannot start a "
			                "thread\n");
			break;
		}
	}
	if (i < run->streams)
		atomic_store(&run->stop, 1);
	return i;
}

/* bench_run_merge adds the streams' results st[0..run->streams) into
 * *out (the verifier's already there) and their traces into trace. */
static void bench_run_merge(const bench_run *run, const bench_stream *st,
                            bench_result *out, bench_trace *trace)
{
	uint64_t last = 0;

	out->cpu_us = out->cpu_cores = -1;
	bench_hist_init(&out->hist);
	out->open_loop = run->open_loop;
	out->concurrency = run->streams;
	out->rate = run->open_loop ? run->rate : 0;
	out->echo = run->kind == FPREP_KIND_ECHO;
	out->dropped = run->gen_dropped;
	for (unsigned i = 0; i < run->streams; i++) {
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
		for (unsigned k = 0; k < BENCH_ERR_SLOTS; k++)
			out->errors[k] += s->errors[k];
		for (unsigned k = 0; k < 6; k++)
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
}

int bench_run_exec(bench_run *run, bench_conn *conns, const char *label,
                   bench_result *out, bench_trace *trace)
{
	bench_stream *st;
	bench_watch watch = {.run = run, .label = label};
	bench_verifier verifier;
	pthread_t watcher;
	unsigned i, started;
	int rc = -1;

	st = calloc(run->streams, sizeof(*st));
	if (!st) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return -1;
	}
	atomic_init(&watch.done, 0);
	bench_run_reset(run);
	if (run->kind == FPREP_KIND_FRAME &&
	    run->opts->verify == BENCH_VERIFY_SAMPLE &&
	    bench_verifier_start(run, &verifier) != 0) {
		fprintf(stderr, "frameprep-bench: cannot start a thread\n");
		pthread_mutex_destroy(&run->gen_lock);
		free(st);
		return -1;
	}
	started = bench_run_start(run, st, conns, trace);
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
	bench_run_merge(run, st, out, trace);
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
