/*
 * fake_backend.c: the tests' fake backend (fake_backend.h). One thread
 * runs the jobs and the held region operations, in the order they came,
 * under one lock and condition; done is called without the lock held, as
 * backend.h asks.
 */
#include "fake_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* fake_region_run runs region operation r (OPEN or CLOSE); then its done.
 * Called without the lock. */
static void fake_region_run(fake_backend *fb, fprep__memreg *r)
{
	static uint8_t device[1 << 16]; /* stands for an opened allocation */
	int mapped = 0, unmapped = 0;

	if (r->kind == FPREP__MEMREG_CUDA) {
		/* What a GPU lane does: open the handle, or close it. */
		if (r->verb == FPREP__MEMREG_OPEN) {
			r->u.cuda.opened = device;
			r->base = r->u.cuda.offset < sizeof(device)
			                  ? device + r->u.cuda.offset
			                  : device;
			mapped = 1;
		} else {
			r->u.cuda.opened = NULL;
			r->base = NULL;
			unmapped = 1;
		}
		r->status = FPREP_OK;
	} else if (r->verb == FPREP__MEMREG_OPEN) {
		r->status = fprep__memreg_map(r);
		mapped = r->status == FPREP_OK;
	} else {
		fprep__memreg_unmap(r);
		r->status = FPREP_OK;
		unmapped = 1;
	}
	pthread_mutex_lock(&fb->lock);
	fb->maps += mapped;
	fb->unmaps += unmapped;
	fb->regions_ran++;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	r->done(r);
}

/* fake_job_run finishes job, the nth, and calls its done. Called without
 * the lock. */
static void fake_job_run(fake_backend *fb, fprep__job *job, unsigned n)
{
	if (fb->delay_us > 0)
		usleep(fb->delay_us);
	if (fb->finish != NULL) {
		fb->finish(fb, job, n);
	} else {
		job->t_start_ns = fprep__now_ns();
		job->status = FPREP_OK;
		job->t_end_ns = fprep__now_ns();
	}
	job->done(job);
	pthread_mutex_lock(&fb->lock);
	fb->jobs_done++;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
}

/* fake_next takes what may run now, with the lock held: a job (*job, the
 * *nth) or a region operation (*r); neither when nothing may. Once close
 * began, everything may. */
static void fake_next(fake_backend *fb, fprep__job **job, unsigned *nth,
                      fprep__memreg **r)
{
	fprep__qnode *n;

	*job = NULL;
	*r = NULL;
	if ((fb->stop || !fb->hold_regions ||
	     fb->regions_taken < fb->regions_allowed) &&
	    (n = fprep__queue_pop(&fb->regions)) != NULL) {
		fb->regions_taken++;
		*r = fprep__container_of(n, fprep__memreg, link);
		return;
	}
	if (fb->jobs_queued >= fb->batch)
		fb->batch_met = 1;
	if (!fb->stop && (!fb->batch_met ||
	                  (fb->hold_jobs && fb->jobs_ran >= fb->jobs_allowed)))
		return;
	if ((n = fprep__queue_pop(&fb->jobs)) == NULL)
		return;
	*job = fprep__container_of(n, fprep__job, link);
	*nth = fb->jobs_ran++;
}

static void *fake_main(void *arg)
{
	fake_backend *fb = arg;
	fprep__memreg *r;
	fprep__job *job;
	unsigned nth = 0;

	pthread_mutex_lock(&fb->lock);
	for (;;) {
		fake_next(fb, &job, &nth, &r);
		if (job == NULL && r == NULL) {
			if (fb->stop)
				break;
			pthread_cond_wait(&fb->cond, &fb->lock);
			continue;
		}
		pthread_mutex_unlock(&fb->lock);
		if (r != NULL)
			fake_region_run(fb, r);
		else
			fake_job_run(fb, job, nth);
		pthread_mutex_lock(&fb->lock);
	}
	pthread_mutex_unlock(&fb->lock);
	return NULL;
}

static int fake_submit(fprep__backend *b, fprep__job *job)
{
	fake_backend *fb = (fake_backend *)b;

	if (fb->refuse)
		return FPREP_EUNSUPPORTED;
	pthread_mutex_lock(&fb->lock);
	fprep__queue_push(&fb->jobs, &job->link);
	fb->jobs_queued++;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	return 0;
}

static int fake_region_op(fprep__backend *b, fprep__memreg *r)
{
	fake_backend *fb = (fake_backend *)b;

	pthread_mutex_lock(&fb->lock);
	fb->regions_queued++;
	if (fb->hold_regions) {
		fprep__queue_push(&fb->regions, &r->link);
		pthread_cond_broadcast(&fb->cond);
		pthread_mutex_unlock(&fb->lock);
		return 0;
	}
	pthread_mutex_unlock(&fb->lock);
	fake_region_run(fb, r);
	return 0;
}

static void fake_info(fprep__backend *b, char *buf, size_t size)
{
	fake_backend *fb = (fake_backend *)b;

	snprintf(buf, size, "%s", fb->info != NULL ? fb->info : "fake: yes\n");
}

static void fake_close(fprep__backend *b, int timeout_ms)
{
	fake_backend *fb = (fake_backend *)b;

	(void)timeout_ms;
	pthread_mutex_lock(&fb->lock);
	fb->stop = 1;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	if (fb->running)
		pthread_join(fb->thread, NULL);
	fb->running = 0;
}

fake_backend *fake_backend_new(void)
{
	fake_backend *fb = calloc(1, sizeof(*fb));

	if (fb == NULL) {
		fprintf(stderr, "fake_backend_new: out of memory\n");
		exit(1);
	}
	fb->b.name = "fake";
	fb->b.submit = fake_submit;
	fb->b.info = fake_info;
	fb->b.close = fake_close;
	fb->b.region_op = fake_region_op;
	pthread_mutex_init(&fb->lock, NULL);
	pthread_cond_init(&fb->cond, NULL);
	fprep__queue_init(&fb->jobs);
	fprep__queue_init(&fb->regions);
	return fb;
}

fprep__backend *fake_backend_start(fake_backend *fb)
{
	if (pthread_create(&fb->thread, NULL, fake_main, fb) != 0) {
		fprintf(stderr, "fake_backend_start: no thread\n");
		exit(1);
	}
	fb->running = 1;
	return &fb->b;
}

void fake_backend_free(fake_backend *fb)
{
	if (fb == NULL)
		return;
	if (fb->running)
		fake_close(&fb->b, 0);
	pthread_cond_destroy(&fb->cond);
	pthread_mutex_destroy(&fb->lock);
	free(fb);
}

void fake_backend_allow_jobs(fake_backend *fb, unsigned n)
{
	pthread_mutex_lock(&fb->lock);
	fb->jobs_allowed = n;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
}

void fake_backend_allow_regions(fake_backend *fb, unsigned n)
{
	pthread_mutex_lock(&fb->lock);
	fb->regions_allowed = n;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
}

unsigned fake_backend_run_regions(fake_backend *fb)
{
	fprep__qnode *n;
	unsigned k = 0;

	for (;;) {
		pthread_mutex_lock(&fb->lock);
		n = fprep__queue_pop(&fb->regions);
		fb->regions_taken += n != NULL;
		pthread_mutex_unlock(&fb->lock);
		if (n == NULL)
			return k;
		fake_region_run(fb,
		                fprep__container_of(n, fprep__memreg, link));
		k++;
	}
}

unsigned fake_backend_count(fake_backend *fb, const unsigned *counter)
{
	unsigned n;

	pthread_mutex_lock(&fb->lock);
	n = *counter;
	pthread_mutex_unlock(&fb->lock);
	return n;
}

int fake_backend_wait(fake_backend *fb, const unsigned *counter, unsigned n,
                      int timeout_ms)
{
	struct timespec ts;
	int rc = 0, met;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&fb->lock);
	while (*counter < n && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&fb->cond, &fb->lock, &ts);
	met = *counter >= n;
	pthread_mutex_unlock(&fb->lock);
	return met ? 0 : -1;
}
