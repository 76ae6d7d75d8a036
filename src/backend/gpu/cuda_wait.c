/*
 * cuda_wait.c: completion, waits and pacing of a GPU lane
 * (backend_cuda.c): the completion thread, a lone frame completed by the
 * lane thread, paced waits, timings and the trace's clock anchor.
 *
 * Waiting is paced (cuda_pace_*): waking from a blocking wait adds tens of
 * microseconds to every reply, and polling all along costs a core a
 * thread. A frame's work takes a time the lane learns (from its enqueue
 * when it ran alone, from the previous completion when it queued behind
 * it), so the waiting thread sleeps until shortly before the frame is
 * expected, then polls its event for up to spin_ns, then sleeps on it (a
 * blocking-sync event). The lane thread waiting for a free slot sleeps
 * until the completion expected to free one. A submit wakes the lane
 * thread only when its pending list was empty, and a freed slot only when
 * jobs wait: the others find it awake or about to be.
 */
#include "gpu/cuda_core_internal.h"

static void wait_pace_store(_Atomic uint64_t *v, uint64_t x)
{
	atomic_store_explicit(v, x, memory_order_relaxed);
}

static void wait_pace_count(atomic_ullong *c, unsigned long long n)
{
	if (n > 0)
		atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* wait_pace_mean moves the running mean *m an eighth of the way to x, x
 * taken as at most twice the mean (an outlier, a thread descheduled, moves
 * it by an eighth at most); the first sample sets it. A mean is never 0
 * once set. */
static void wait_pace_mean(_Atomic uint64_t *m, uint64_t x)
{
	uint64_t v = cuda_core_pace_load(m);

	if (v > 0 && x > 2 * v)
		x = 2 * v;
	v = v == 0 ? x : v - v / 8 + x / 8;
	wait_pace_store(m, v > 0 ? v : 1);
}

/* wait_pace_expect returns the host time s's completion is expected at (0:
 * unknown): lone_ns after its enqueue, or gap_ns after the previous
 * completion when s was enqueued before that was seen, whichever is
 * later; *gap tells whether gap_ns gave it. */
static uint64_t wait_pace_expect(cuda_pace *p, const cuda_slot *s, int *gap)
{
	uint64_t lone = cuda_core_pace_load(&p->lone_ns);
	uint64_t g = cuda_core_pace_load(&p->gap_ns);
	uint64_t last = cuda_core_pace_load(&p->last_ns);
	uint64_t t = lone > 0 ? s->t_enq_ns + lone : 0;

	*gap = 0;
	if (g > 0 && last > s->t_enq_ns && last + g > t) {
		t = last + g;
		*gap = 1;
	}
	return t;
}

uint64_t fprep__cuda_wait_pace_wake(cuda_pace *p, uint64_t expect,
                                    uint64_t early_ns, uint64_t now)
{
	uint64_t ahead = cuda_core_pace_load(&p->late_ns) + early_ns;

	if (expect == 0 || expect < now + ahead + CUDA_PACE_MIN_NS)
		return 0;
	if (expect - ahead - now > CUDA_PACE_MAX_NS)
		return now + CUDA_PACE_MAX_NS;
	return expect - ahead;
}

/* wait_pace_lone_wake: fprep__cuda_wait_pace_wake for a frame alone in the lane
 * (fprep__cuda_wait_lane_finish), whose reply no other frame's work hides: its
 * sleep ends clear of the lateness envelope (late_hi_ns), and a quarter of the
 * frame's expected time early at least, so that a late wake-up seldom
 * delays the reply of a stream at concurrency 1. */
static uint64_t wait_pace_lone_wake(cuda_pace *p, const cuda_slot *s,
                                    uint64_t expect, uint64_t now)
{
	uint64_t ahead =
	        cuda_core_pace_load(&p->late_hi_ns) + CUDA_PACE_GUARD_NS;
	uint64_t late = cuda_core_pace_load(&p->late_ns);

	if (expect <= s->t_enq_ns)
		return 0;
	if ((expect - s->t_enq_ns) / 4 > ahead)
		ahead = (expect - s->t_enq_ns) / 4;
	return fprep__cuda_wait_pace_wake(p, expect,
	                                  ahead > late ? ahead - late : 0, now);
}

/* wait_pace_woke counts a paced sleep meant to end at wake that has ended
 * (by its time), and learns how late it woke. */
static void wait_pace_woke(cuda_pace *p, uint64_t wake, uint64_t now)
{
	wait_pace_count(&p->sleeps, 1);
	if (now < wake)
		return;
	uint64_t x = now - wake, hi = cuda_core_pace_load(&p->late_hi_ns);

	wait_pace_mean(&p->late_ns,
	               x < CUDA_PACE_LATE_NS ? x : CUDA_PACE_LATE_NS);
	if (x > CUDA_PACE_LATE_HI_NS)
		x = CUDA_PACE_LATE_HI_NS;
	wait_pace_store(&p->late_hi_ns,
	                x > hi ? hi + (x - hi) / 2 : hi - (hi - x) / 64);
}

/* wait_pace_sleep sleeps until wake (CLOCK_MONOTONIC nanoseconds). */
static void wait_pace_sleep(cuda_pace *p, uint64_t wake)
{
	struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000u),
	                      .tv_nsec = (long)(wake % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	wait_pace_woke(p, wake, cuda_core_now_ns());
}

/* wait_pace_seen learns from s's completion, seen at seen. polled: it was
 * seen while polling, so seen is exact (or late by a blocking wait's
 * wake-up, which the next point corrects); overslept: a paced sleep (whose
 * estimate was the gap one when gap) ended after it, so that estimate was
 * long and is cut by a quarter. Neither: found done at the first look,
 * which says nothing. Publishes the next completion expected (next_ns)
 * for the lane thread waiting for a free slot. */
static void wait_pace_seen(cuda_pace *p, const cuda_slot *s, uint64_t seen,
                           int polled, int overslept, int gap)
{
	uint64_t last = cuda_core_pace_load(&p->last_ns);

	if (overslept) {
		_Atomic uint64_t *m = gap ? &p->gap_ns : &p->lone_ns;
		uint64_t v = cuda_core_pace_load(m);

		wait_pace_store(m, v - v / 4 > 0 ? v - v / 4 : 1);
		wait_pace_count(&p->overslept, 1);
	} else if (polled && s->t_enq_ns >= last) {
		wait_pace_mean(&p->lone_ns, seen - s->t_enq_ns);
	} else if (polled) {
		wait_pace_mean(&p->gap_ns, seen - last);
	}
	wait_pace_store(&p->last_ns, seen);
	uint64_t g = cuda_core_pace_load(&p->gap_ns);
	wait_pace_store(&p->next_ns, g > 0 ? seen + g : 0);
}

/* wait_pace_polled counts a poll of n empty event queries from t0 to t1. */
static void wait_pace_polled(cuda_pace *p, unsigned long long n, uint64_t t0,
                             uint64_t t1)
{
	wait_pace_count(&p->queries_empty, n);
	if (t1 > t0)
		wait_pace_count(&p->spin_ns, t1 - t0);
}

void fprep__cuda_wait_spin(cuda_backend *cb, pthread_cond_t *cv,
                           atomic_uint *kicks, uint64_t sleep_until)
{
	unsigned k = atomic_load_explicit(kicks, memory_order_relaxed);

	if (sleep_until != 0 && cb->spin_ns > 0) {
		cuda_core_timedwait(cv, &cb->mu, sleep_until);
		if (atomic_load_explicit(kicks, memory_order_relaxed) != k)
			return;
		uint64_t now = cuda_core_now_ns();
		if (now >= sleep_until)
			wait_pace_woke(&cb->pace, sleep_until, now);
	}
	if (cb->spin_ns > 0) {
		uint64_t until = cuda_core_now_ns() + cb->spin_ns;

		pthread_mutex_unlock(&cb->mu);
		while (atomic_load_explicit(kicks, memory_order_acquire) == k &&
		       cuda_core_now_ns() < until)
			CUDA_CPU_RELAX();
		pthread_mutex_lock(&cb->mu);
	}
	if (atomic_load_explicit(kicks, memory_order_relaxed) == k)
		pthread_cond_wait(cv, &cb->mu);
}

void fprep__cuda_wait_deliver(cuda_backend *cb, cuda_slot *s, fprep__job *job)
{
	/* A job failed on a frame the engine writes: the slot is free only
	 * once that is done (a frame that ran has passed it). */
	if (s != NULL && s->d_frame != NULL && job->status != FPREP_OK)
		(void)FPREP__CUDA(NULL, cudaEventSynchronize(s->ev_dec));
	job->t_end_ns = cuda_core_now_ns();
	if (s != NULL && s->t_back_ns != 0) { /* a JPEG frame, decoded */
		CUDA_JSTAT(cb, s, done, 1);
		CUDA_JSTAT(cb, s, lane_ns, job->t_end_ns - s->t_back_ns);
		CUDA_JSTAT(cb, s, total_ns, job->t_end_ns - job->t_start_ns);
	}
	pthread_mutex_lock(&cb->mu);
	if (job->fatal)
		cb->fatal = 1;
	if (s != NULL) {
		s->job = NULL;
		s->d_frame = NULL;
		s->staged = 0;
		s->t_back_ns = 0;
		s->lone = 0;
		/* The lane thread waits for a slot only with jobs pending. */
		if (cuda_core_jobs_waiting(cb) || cb->stopping)
			cuda_core_kick(&cb->cv_lane, &cb->lane_kicks);
	}
	pthread_mutex_unlock(&cb->mu);
	job->done(job);
}

void fprep__cuda_wait_anchor(cuda_backend *cb)
{
	uint64_t t0 = cuda_core_now_ns(), t1 = t0;
	cudaError_t e = cudaEventRecord(cb->ev_anchor, cb->s_h2d);

	while (e == cudaSuccess &&
	       (e = cudaEventQuery(cb->ev_anchor)) == cudaErrorNotReady &&
	       (t1 = cuda_core_now_ns()) - t0 < CUDA_SPIN_NS)
		;
	t1 = cuda_core_now_ns();
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return;
	}
	cb->anchor_ns = t0 + (t1 - t0) / 2;
}

static uint32_t wait_elapsed_us(cudaEvent_t a, cudaEvent_t b)
{
	float ms = 0;
	if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess || ms < 0)
		return 0;
	return (uint32_t)(ms * 1000.0f + 0.5f);
}

static double wait_stamp(cudaEvent_t base, cudaEvent_t e)
{
	float ms = 0;
	(void)cudaEventElapsedTime(&ms, base, e);
	return (double)ms * 1000.0;
}

/* wait_host_stamps fills job->t_stage_ns: each timing event's device time
 * since ev_anchor on the host clock (anchor_ns), kept between the lane's
 * start of the job and seen_ns, when its completion was seen, and in
 * order. */
static void wait_host_stamps(const cuda_backend *cb, const cuda_slot *s,
                             fprep__job *job, uint64_t seen_ns)
{
	uint64_t lo = job->t_start_ns;

	for (int i = 0; i < CUDA_NT; i++) {
		double us = wait_stamp(cb->ev_anchor, s->t[i]);
		uint64_t ns = cb->anchor_ns;

		if (us > 0)
			ns += (uint64_t)(us * 1000.0);
		if (ns < lo)
			ns = lo;
		if (ns > seen_ns)
			ns = seen_ns;
		job->t_stage_ns[i] = lo = ns;
	}
}

/* wait_event waits for s's ev_done, s the oldest slot in flight: with
 * spin_ns 0 it sleeps on it at once (a blocking-sync event); else it
 * sleeps until shortly before the completion expected
 * (fprep__cuda_wait_pace_wake), polls for up to spin_ns, then sleeps on it.
 * Completion thread. */
static cudaError_t wait_event(cuda_backend *cb, cuda_slot *s)
{
	cuda_pace *p = &cb->pace;
	cudaError_t e;
	int gap;
	unsigned long long n = 0;

	if (cb->spin_ns == 0)
		return cudaEventSynchronize(s->ev_done);
	if ((e = cudaEventQuery(s->ev_done)) != cudaErrorNotReady) {
		wait_pace_seen(p, s, cuda_core_now_ns(), 0, 0, 0);
		return e;
	}
	uint64_t t0 = cuda_core_now_ns();
	uint64_t expect = wait_pace_expect(p, s, &gap);
	uint64_t wake =
	        fprep__cuda_wait_pace_wake(p, expect, CUDA_PACE_GUARD_NS, t0);

	wait_pace_store(&p->next_ns, expect);
	if (wake != 0) {
		wait_pace_sleep(p, wake);
		if ((e = cudaEventQuery(s->ev_done)) != cudaErrorNotReady) {
			wait_pace_seen(p, s, cuda_core_now_ns(), 0, 1, gap);
			return e;
		}
		t0 = cuda_core_now_ns();
	}
	n = 1;
	uint64_t until = t0 + cb->spin_ns, t1;
	while ((e = cudaEventQuery(s->ev_done)) == cudaErrorNotReady) {
		n++;
		if ((t1 = cuda_core_now_ns()) > until) {
			wait_pace_polled(p, n, t0, t1);
			wait_pace_count(&p->blocked, 1);
			e = cudaEventSynchronize(s->ev_done);
			wait_pace_seen(p, s, cuda_core_now_ns(), 1, 0, gap);
			return e;
		}
		CUDA_CPU_RELAX();
	}
	t1 = cuda_core_now_ns();
	wait_pace_polled(p, n, t0, t1);
	wait_pace_seen(p, s, t1, 1, 0, gap);
	return e;
}

/* wait_complete completes the job of the oldest in-flight slot s, whose
 * ev_done wait ended with e. */
static void wait_complete(cuda_backend *cb, cuda_slot *s, cudaError_t e)
{
	fprep__job *job = s->job;
	fprep__gpu_status st = {0};

	if (FPREP__CUDA(&st, e)) {
		cuda_core_fail(job, FPREP_ECUDA, cuda_core_sticky(st.code),
		               st.text);
		fprep__cuda_wait_deliver(cb, s, job);
		return;
	}
	uint64_t seen_ns = cuda_core_now_ns();
	if (!s->out_direct)
		fprep__copy(cb->copier, job->output, s->h_out,
		            job->output_size);
	if (job->trace && cb->trace)
		wait_host_stamps(cb, s, job, seen_ns);
	job->t_h2d_us = wait_elapsed_us(s->t[CUDA_T_H2D0], s->t[CUDA_T_H2D1]);
	job->t_kernel_us = wait_elapsed_us(s->t[CUDA_T_K0], s->t[CUDA_T_K1]);
	job->t_d2h_us = wait_elapsed_us(s->t[CUDA_T_D2H0], s->t[CUDA_T_D2H1]);
	job->t_compute_us = job->t_kernel_us;
	if (cb->probe != NULL) {
		fprep__cuda_stamps ps = {
		        .h2d_start = wait_stamp(cb->ev_base, s->t[CUDA_T_H2D0]),
		        .h2d_end = wait_stamp(cb->ev_base, s->t[CUDA_T_H2D1]),
		        .kernel_start =
		                wait_stamp(cb->ev_base, s->t[CUDA_T_K0]),
		        .kernel_end = wait_stamp(cb->ev_base, s->t[CUDA_T_K1]),
		        .d2h_start = wait_stamp(cb->ev_base, s->t[CUDA_T_D2H0]),
		        .d2h_end = wait_stamp(cb->ev_base, s->t[CUDA_T_D2H1]),
		};
		cb->probe(cb->probe_arg, job, &ps);
	}
	fprep__cuda_wait_deliver(cb, s, job);
}

/* wait_finish waits for the oldest in-flight slot s and completes its job. */
static void wait_finish(cuda_backend *cb, cuda_slot *s)
{
	wait_complete(cb, s, wait_event(cb, s));
}

void fprep__cuda_wait_lane_finish(cuda_backend *cb, cuda_slot *s, unsigned k)
{
	cuda_pace *p = &cb->pace;
	int gap, slept = 0;
	uint64_t t0 = cuda_core_now_ns();
	uint64_t wake =
	        wait_pace_lone_wake(p, s, wait_pace_expect(p, s, &gap), t0);
	unsigned long long n = 0;
	cudaError_t e;

	if (wake != 0) {
		pthread_mutex_lock(&cb->mu);
		if (atomic_load_explicit(&cb->lane_kicks,
		                         memory_order_relaxed) == k)
			cuda_core_timedwait(&cb->cv_lane, &cb->mu, wake);
		pthread_mutex_unlock(&cb->mu);
		t0 = cuda_core_now_ns();
		if (atomic_load_explicit(&cb->lane_kicks,
		                         memory_order_acquire) == k &&
		    t0 >= wake) {
			wait_pace_woke(p, wake, t0);
			slept = 1;
		}
	}
	uint64_t until = t0 + cb->spin_ns, t1;
	while ((e = cudaEventQuery(s->ev_done)) == cudaErrorNotReady) {
		n++;
		t1 = cuda_core_now_ns();
		if (atomic_load_explicit(&cb->lane_kicks,
		                         memory_order_acquire) != k ||
		    t1 > until) {
			wait_pace_polled(p, n, t0, t1);
			pthread_mutex_lock(&cb->mu);
			fprep__queue_push(&cb->flying, &s->link);
			cuda_core_kick(&cb->cv_done, &cb->done_kicks);
			pthread_mutex_unlock(&cb->mu);
			return;
		}
		CUDA_CPU_RELAX();
	}
	t1 = cuda_core_now_ns();
	wait_pace_polled(p, n, t0, t1);
	wait_pace_seen(p, s, t1, n > 0, slept && n == 0, gap);
	wait_complete(cb, s, e);
}

void *fprep__cuda_wait_completion_main(void *arg)
{
	cuda_backend *cb = arg;

	fprep__cuda_core_thread_start("fp-done-gpu", cb->device);
	(void)FPREP__CUDA(NULL, cudaSetDevice(cb->device));
	pthread_mutex_lock(&cb->mu);
	for (;;) {
		fprep__qnode *n = fprep__queue_pop(&cb->flying);
		if (n == NULL) {
			if (cb->lane_exited)
				break;
			fprep__cuda_wait_spin(cb, &cb->cv_done, &cb->done_kicks,
			                      0);
			continue;
		}
		cuda_slot *s = fprep__container_of(n, cuda_slot, link);
		pthread_mutex_unlock(&cb->mu);
		wait_finish(cb, s);
		pthread_mutex_lock(&cb->mu);
	}
	pthread_mutex_unlock(&cb->mu);
	return NULL;
}

void fprep__cuda_wait_pace_text(cuda_pace *p, char *buf, size_t size)
{
	snprintf(buf, size,
	         "lone_us=%.1f gap_us=%.1f late_us=%.1f late_hi_us=%.1f "
	         "sleeps=%llu overslept=%llu empty_queries=%llu poll_ms=%llu "
	         "blocked=%llu",
	         (double)cuda_core_pace_load(&p->lone_ns) / 1e3,
	         (double)cuda_core_pace_load(&p->gap_ns) / 1e3,
	         (double)cuda_core_pace_load(&p->late_ns) / 1e3,
	         (double)cuda_core_pace_load(&p->late_hi_ns) / 1e3,
	         atomic_load(&p->sleeps), atomic_load(&p->overslept),
	         atomic_load(&p->queries_empty),
	         atomic_load(&p->spin_ns) / 1000000u, atomic_load(&p->blocked));
}
