/*
 * backend_cpu.c: the CPU backend, which runs the reference ops
 * (fprep_preprocess_cpu) on a pool of worker threads.
 *
 * The design is simple: submit() appends the job to a FIFO under a mutex and
 * signals a condition variable; that is all the loop thread ever waits
 * for. Each worker takes one job at a time, runs it and calls job->done
 * from the worker thread. A large frame is cut into bands of tensor rows
 * (fprep__preprocess_cpu_rows): the worker that took it publishes it as the
 * shared job, idle workers take bands of it while the queue is empty, and
 * the taker calls done once every band is written. Under load every
 * worker has a frame of its own and nothing is shared; with few frames in
 * flight, one frame's latency drops by the number of idle workers.
 * close() stops new work, waits for the queue to
 * drain until its deadline, then lets the workers fail whatever is still
 * queued with FPREP_ESHUTDOWN, joins them and frees the backend. A job that
 * is already running is always finished: the op cannot be interrupted, and
 * it takes milliseconds.
 *
 * A JPEG source is decoded first, by the worker that took it, into a
 * buffer of that worker's which grows only when a larger frame comes
 * (jpeg.h); the job then reads that frame, bands included. A decode can
 * take a hundred times a raw frame's work (a large progressive file runs
 * to the scan caps), so with two workers or more one is kept from JPEGs:
 * a worker takes the oldest job, unless it is a JPEG and jpeg_max are
 * decoding, then the oldest raw one. Clients sending expensive JPEGs never
 * hold every worker, and raw frames never wait behind them. Among
 * themselves JPEG jobs take turns (jpeg_turns.h): they wait in queues
 * keyed by the requester's uid and connection, and when a JPEG is the
 * oldest job, the worker takes the one whose turn it is, each decode's
 * time charged to its key. A client's costly JPEGs then delay another's
 * by about one decode per decoding worker, not by their whole queue.
 *
 * Operations on registered regions (region_op: map, unmap) wait in their
 * own queue, which workers serve before the jobs; nothing needs pinning
 * here. close() runs every operation queued before the workers exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"
#include "jpeg.h"
#include "jpeg_turns.h"
#include "log.h"
#include "ops.h"

#define CPU_MAX_THREADS 256
#define CPU_BAND_ROWS   32 /* fewest tensor rows in a band */

/* cpu_share: a frame whose row bands several workers write. Guarded by the
 * backend's lock. */
struct cpu_share {
	fprep__job *job;
	fprep_transform xf;
	uint32_t nbands;
	uint32_t next; /* next band to take */
	uint32_t busy; /* bands being written */
	int rc;        /* first error of a band */
};

struct cpu_backend {
	fprep__backend base; /* first: the loop holds a pointer to it */
	pthread_mutex_t lock;
	pthread_cond_t work;      /* a job was queued, or stopping */
	pthread_cond_t idle;      /* the queue drained and no job runs */
	pthread_cond_t band_done; /* a band of the shared frame was written */
	fprep__queue jobs;        /* submitted raw jobs, not yet taken */
	fprep__jpeg_turns turns;  /* submitted JPEG jobs, not yet taken */
	uint64_t seq;             /* jobs submitted */
	fprep__queue admin;       /* region operations, not yet taken */
	struct cpu_share *shared; /* a frame with bands left to take, or NULL */
	unsigned running;         /* jobs taken by workers, not yet done */
	unsigned jpeg_running;    /* of those, JPEG sources */
	unsigned jpeg_max;        /* JPEG sources run at once */
	int closing;              /* submit refuses new jobs */
	int stopping;             /* workers exit once the queue is empty */
	int failing;              /* queued jobs are failed, not run */
	unsigned nthreads;
	pthread_t *threads;
};

/* cpu_elements writes elements [k0, k1) of a ROIS or BATCH job's tensor
 * on the calling thread (ops.h, fprep__element_cpu). */
static void cpu_elements(fprep__job *job, uint32_t k0, uint32_t k1)
{
	uint64_t per = fprep__element_bytes(&job->req);
	fprep_element_xf xf;
	fprep_element el;

	for (uint32_t k = k0; k < k1; k++) {
		fprep_element_get(job->table, k, &el);
		fprep_element_xf_decode(
		        job->xfs + (size_t)k * FPREP_ELEMENT_XF_SIZE, &xf);
		fprep__element_cpu(&job->req, &el, &xf, job->input,
		                   job->output + per * k);
	}
}

/* cpu_units is what a job is cut into bands of: tensor rows, or the
 * elements of a ROIS or BATCH job. */
static uint32_t cpu_units(const fprep__job *job)
{
	return job->table != NULL ? job->req.elements : job->req.out_height;
}

/* cpu_rows writes rows [y0, y1) of job's tensor (elements [y0, y1) of a
 * ROIS or BATCH job) on the calling thread. A
 * shared-memory region that the client shrinks meanwhile is caught by the
 * SIGBUS guard (shm_region.h), which marks it broken: the request then fails.
 */
static int cpu_rows(fprep__job *job, const fprep_transform *xf, uint32_t y0,
                    uint32_t y1)
{
	int rc = FPREP_OK;

	if (job->table != NULL)
		cpu_elements(job, y0, y1);
	else
		rc = fprep__preprocess_cpu_rows(&job->req, job->input,
		                                job->output, xf, y0, y1);
	if ((job->in_region != NULL && fprep__memreg_broken(job->in_region)) ||
	    (job->out_region != NULL && fprep__memreg_broken(job->out_region)))
		return FPREP_EREGION;
	return rc;
}

/* cpu_bands writes the bands of sh that are left; called and returns with
 * the lock held. */
static void cpu_bands(struct cpu_backend *cb, struct cpu_share *sh)
{
	fprep__job *job = sh->job;
	uint64_t h = cpu_units(job);
	uint32_t band;
	int rc;

	while (sh->next < sh->nbands) {
		band = sh->next++;
		sh->busy++;
		pthread_mutex_unlock(&cb->lock);
		rc = cpu_rows(job, &sh->xf, (uint32_t)(h * band / sh->nbands),
		              (uint32_t)(h * (band + 1) / sh->nbands));
		pthread_mutex_lock(&cb->lock);
		if (rc != FPREP_OK && sh->rc == FPREP_OK)
			sh->rc = rc;
		sh->busy--;
	}
	if (sh->busy == 0)
		pthread_cond_broadcast(&cb->band_done);
}

static int cpu_has_bands(const struct cpu_backend *cb)
{
	return cb->shared != NULL && cb->shared->next < cb->shared->nbands;
}

/* cpu_preprocess runs a FRAME job (a ROIS or BATCH job: its elements),
 * in bands shared with idle workers when it is large enough and no other
 * frame is shared. */
static int cpu_preprocess(struct cpu_backend *cb, fprep__job *job)
{
	struct cpu_share sh;
	uint32_t h = cpu_units(job);
	uint32_t band = job->table != NULL ? 1 : CPU_BAND_ROWS;

	/* The request was validated and planned when it was accepted. */
	if (job->input == NULL || job->output == NULL)
		return FPREP_EINVAL;
	if (cb->nthreads < 2 || h < 2 * band)
		return cpu_rows(job, &job->xf, 0, h);
	memset(&sh, 0, sizeof(sh));
	sh.job = job;
	sh.xf = job->xf;
	sh.nbands = h / band;
	if (sh.nbands > 2 * cb->nthreads)
		sh.nbands = 2 * cb->nthreads;
	pthread_mutex_lock(&cb->lock);
	if (cb->shared == NULL) {
		cb->shared = &sh;
		pthread_cond_broadcast(&cb->work);
	}
	cpu_bands(cb, &sh);
	if (cb->shared == &sh)
		cb->shared = NULL;
	while (sh.busy > 0)
		pthread_cond_wait(&cb->band_done, &cb->lock);
	pthread_mutex_unlock(&cb->lock);
	return sh.rc;
}

/* cpu_jpeg decodes a JPEG job's frame into the worker's buffer and makes
 * the job one on that frame (jpeg.h); returns 0 or the error, with the
 * job's message set. */
static int cpu_jpeg(fprep__jpeg *jpeg, fprep__job *job)
{
	fprep_request raw;
	uint8_t *dst;
	int rc;

	rc = fprep__jpeg_open(jpeg, job, NULL, &raw, job->message,
	                      sizeof(job->message));
	if (rc != FPREP_OK)
		return rc;
	dst = fprep__jpeg_buffer(jpeg, raw.input_size);
	if (dst == NULL) {
		snprintf(job->message, sizeof(job->message),
		         "JPEG: out of memory for a %ux%u frame", raw.src_width,
		         raw.src_height);
		return FPREP_ENOMEM;
	}
	rc = fprep__jpeg_decode(jpeg, job, &raw, dst, job->message,
	                        sizeof(job->message));
	if (rc == FPREP_OK && job->in_region != NULL &&
	    fprep__memreg_broken(job->in_region)) {
		snprintf(job->message, sizeof(job->message),
		         "shared-memory region shrank while the JPEG was read");
		return FPREP_EREGION;
	}
	return rc;
}

/* cpu_run does one job on the calling worker thread; returns the time
 * its JPEG source took to read and decode, microseconds (0: none). */
static uint32_t cpu_run(struct cpu_backend *cb, fprep__jpeg *jpeg,
                        fprep__job *job, int fail)
{
	uint32_t jpeg_us = 0;
	int rc;

	job->t_h2d_us = job->t_kernel_us = job->t_d2h_us = 0;
	job->fatal = 0;
	job->message[0] = '\0';
	job->t_start_ns = fprep__now_ns();
	if (job->video != NULL && !fail) {
		fprep__video_run(job); /* a stream's job: video.h */
		return 0;
	}
	if (fail) {
		rc = FPREP_ESHUTDOWN;
		snprintf(job->message, sizeof(job->message),
		         "CPU backend closed before the frame was processed");
	} else if (job->req.kind == FPREP_KIND_ECHO) {
		rc = FPREP_OK; /* the transport ceiling: no work at all */
	} else if (job->req.src_format == FPREP_PIX_JPEG &&
	           (rc = cpu_jpeg(jpeg, job),
	            jpeg_us = (uint32_t)((fprep__now_ns() - job->t_start_ns) /
	                                 1000),
	            rc) != FPREP_OK) {
		job->status = rc; /* cpu_jpeg wrote the message */
	} else {
		rc = cpu_preprocess(cb, job);
		if (rc == FPREP_ENOMEM)
			snprintf(job->message, sizeof(job->message),
			         "CPU preprocessing: out of memory");
		else if (rc == FPREP_EREGION)
			snprintf(job->message, sizeof(job->message),
			         "shared-memory region shrank while the frame "
			         "was read or the tensor written");
		else if (rc != FPREP_OK)
			snprintf(
			        job->message, sizeof(job->message),
			        "CPU preprocessing: no input or output buffer");
	}
	job->status = rc;
	job->t_end_ns = fprep__now_ns();
	job->t_compute_us =
	        (uint32_t)((job->t_end_ns - job->t_start_ns) / 1000);
	return jpeg_us;
}

/* cpu_region_run runs a region operation on the calling worker thread:
 * the CPU reads and writes the mapping as it is. */
static void cpu_region_run(fprep__memreg *r)
{
	r->message[0] = '\0';
	if (r->verb == FPREP__MEMREG_OPEN) {
		r->status = fprep__memreg_map(r);
		r->pinned = 0;
	} else {
		fprep__memreg_unmap(r);
		r->status = FPREP_OK;
	}
}

/* cpu_is_jpeg tells whether job (as submitted) is a JPEG source. */
static int cpu_is_jpeg(const fprep__job *job)
{
	return job->req.src_format == FPREP_PIX_JPEG;
}

/* cpu_before tells whether job node a was submitted before job node b. */
static int cpu_before(const fprep__qnode *a, const fprep__qnode *b)
{
	return fprep__container_of(a, fprep__job, link)->seq <
	       fprep__container_of(b, fprep__job, link)->seq;
}

/* cpu_none_queued tells whether no job waits. Lock held. */
static int cpu_none_queued(const struct cpu_backend *cb)
{
	return fprep__queue_empty(&cb->jobs) && cb->turns.queued == 0;
}

/* cpu_may_take tells whether a worker has a job it may take. Lock held. */
static int cpu_may_take(const struct cpu_backend *cb)
{
	return !fprep__queue_empty(&cb->jobs) ||
	       (cb->turns.queued > 0 && cb->jpeg_running < cb->jpeg_max);
}

/* cpu_take removes and returns the job a worker runs next (see above),
 * filling *turn for a JPEG, or NULL when it may take none. Lock held. */
static fprep__job *cpu_take(struct cpu_backend *cb, fprep__jpeg_turn *turn)
{
	const fprep__qnode *jpeg = NULL;
	fprep__qnode *n;

	if (cb->jpeg_running < cb->jpeg_max)
		jpeg = fprep__jpeg_turns_oldest(&cb->turns, cpu_before);
	if (jpeg != NULL && (fprep__queue_empty(&cb->jobs) ||
	                     cpu_before(jpeg, cb->jobs.head))) {
		n = fprep__jpeg_turns_pop(&cb->turns, turn);
		cb->jpeg_running++;
	} else if ((n = fprep__queue_pop(&cb->jobs)) == NULL) {
		return NULL;
	}
	return fprep__container_of(n, fprep__job, link);
}

static void *cpu_worker(void *arg)
{
	struct cpu_backend *cb = arg;
	fprep__qnode *op;
	fprep__job *job;
	fprep__jpeg jpeg;
	fprep__jpeg_turn turn;
	uint32_t jpeg_us;
	int fail, is_jpeg;

	fprep__jpeg_init(&jpeg);

	pthread_setname_np(pthread_self(), "fp-cpu-worker");
	pthread_mutex_lock(&cb->lock);
	for (;;) {
		while (!cpu_may_take(cb) && fprep__queue_empty(&cb->admin) &&
		       !cpu_has_bands(cb) &&
		       !(cb->stopping && cpu_none_queued(cb)))
			pthread_cond_wait(&cb->work, &cb->lock);
		if ((op = fprep__queue_pop(&cb->admin)) != NULL) {
			fprep__memreg *r =
			        fprep__container_of(op, fprep__memreg, link);

			pthread_mutex_unlock(&cb->lock);
			cpu_region_run(r);
			r->done(r); /* r belongs to the loop from here */
			pthread_mutex_lock(&cb->lock);
			continue;
		}
		if (!cpu_may_take(cb) && cpu_has_bands(cb)) {
			cpu_bands(cb, cb->shared);
			continue;
		}
		if (cpu_none_queued(cb))
			break; /* stopping and drained */
		job = cpu_take(cb, &turn);
		if (job == NULL)
			continue; /* JPEGs only, jpeg_max decoding: wait */
		is_jpeg = cpu_is_jpeg(job);
		fail = cb->failing;
		cb->running++;
		pthread_mutex_unlock(&cb->lock);

		jpeg_us = cpu_run(cb, &jpeg, job, fail);
		job->done(job); /* the job belongs to the loop from here */

		pthread_mutex_lock(&cb->lock);
		cb->running--;
		if (is_jpeg) {
			cb->jpeg_running--;
			fprep__jpeg_turns_charge(&cb->turns, &turn, jpeg_us);
			/* A JPEG waiting for this worker's place. */
			if (cb->turns.queued > 0)
				pthread_cond_signal(&cb->work);
		}
		if (cpu_none_queued(cb) && cb->running == 0)
			pthread_cond_broadcast(&cb->idle);
	}
	pthread_mutex_unlock(&cb->lock);
	fprep__jpeg_fini(&jpeg);
	return NULL;
}

static int cpu_submit(fprep__backend *b, fprep__job *job)
{
	struct cpu_backend *cb = (struct cpu_backend *)b;

	if (job == NULL || job->done == NULL)
		return FPREP_EINVAL;
	if (job->input_device || job->output_device)
		return FPREP_EUNSUPPORTED; /* device memory: GPU backend only */
	pthread_mutex_lock(&cb->lock);
	if (cb->closing) {
		pthread_mutex_unlock(&cb->lock);
		return FPREP_ESHUTDOWN;
	}
	job->seq = cb->seq++;
	if (cpu_is_jpeg(job))
		fprep__jpeg_turns_push(&cb->turns, &job->link, job->uid,
		                       job->conn);
	else
		fprep__queue_push(&cb->jobs, &job->link);
	pthread_cond_signal(&cb->work);
	pthread_mutex_unlock(&cb->lock);
	return FPREP_OK;
}

/* cpu_video_open: streams decode with libavcodec (video_avcodec.c). */
static int cpu_video_open(fprep__backend *b, const fprep_request *spec,
                          const uint8_t *params, size_t params_len,
                          fprep__video **vp)
{
	(void)b;
	return fprep__video_avcodec_open(spec, params, params_len, vp);
}

static int cpu_region_op(fprep__backend *b, fprep__memreg *r)
{
	struct cpu_backend *cb = (struct cpu_backend *)b;

	if (r == NULL || r->done == NULL)
		return FPREP_EINVAL;
	pthread_mutex_lock(&cb->lock);
	if (cb->closing) {
		pthread_mutex_unlock(&cb->lock);
		return FPREP_ESHUTDOWN;
	}
	fprep__queue_push(&cb->admin, &r->link);
	pthread_cond_signal(&cb->work);
	pthread_mutex_unlock(&cb->lock);
	return FPREP_OK;
}

static void cpu_info(fprep__backend *b, char *buf, size_t size)
{
	struct cpu_backend *cb = (struct cpu_backend *)b;
	char video[256];
	size_t len;

	if (size == 0)
		return;
	len = strnlen(buf, size - 1);
	/* libavcodec was loaded (or found missing) when the backend opened:
	 * this only reads the outcome. */
	if (fprep__video_avcodec_load(video, sizeof(video)) == FPREP_OK)
		snprintf(buf + len, size - len,
		         "workers: %u\n"
		         "jpeg_decoder: libjpeg-turbo (on the workers)\n"
		         "video_decoder: %s (on the workers)\n",
		         cb->nthreads, video);
	else
		snprintf(buf + len, size - len,
		         "workers: %u\n"
		         "jpeg_decoder: libjpeg-turbo (on the workers)\n"
		         "video_decoder: none (%s)\n",
		         cb->nthreads, video);
	pthread_mutex_lock(&cb->lock);
	fprep__jpeg_turns_text(&cb->turns, "jpeg", buf, size);
	pthread_mutex_unlock(&cb->lock);
}

/* cpu_free stops and joins the first n workers (the queue must be empty
 * or failing) and frees the backend. */
static void cpu_free(struct cpu_backend *cb, unsigned n)
{
	unsigned i;

	pthread_mutex_lock(&cb->lock);
	cb->closing = cb->stopping = 1;
	pthread_cond_broadcast(&cb->work);
	pthread_mutex_unlock(&cb->lock);
	for (i = 0; i < n; i++)
		pthread_join(cb->threads[i], NULL);
	fprep__jpeg_turns_fini(&cb->turns);
	pthread_cond_destroy(&cb->band_done);
	pthread_cond_destroy(&cb->idle);
	pthread_cond_destroy(&cb->work);
	pthread_mutex_destroy(&cb->lock);
	free(cb->threads);
	free(cb);
}

static void cpu_close(fprep__backend *b, int timeout_ms)
{
	struct cpu_backend *cb = (struct cpu_backend *)b;
	struct timespec deadline;
	int rc = 0;

	if (timeout_ms < 0)
		timeout_ms = 0;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&cb->lock);
	cb->closing = 1;
	while ((!cpu_none_queued(cb) || cb->running > 0) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&cb->idle, &cb->lock, &deadline);
	if (!cpu_none_queued(cb)) {
		fprep__log(FPREP_LOG_WARNING,
		           "cpu backend: close timed out after %d ms, failing "
		           "queued jobs",
		           timeout_ms);
		cb->failing = 1;
	}
	pthread_mutex_unlock(&cb->lock);
	cpu_free(cb, cb->nthreads);
}

int fprep__backend_cpu_open(fprep__backend **bp, unsigned nthreads)
{
	struct cpu_backend *cb;
	pthread_condattr_t ca;
	long online;
	unsigned i;
	int rc;

	*bp = NULL;
	if (nthreads == 0) {
		online = sysconf(_SC_NPROCESSORS_ONLN);
		nthreads = online > 0 ? (unsigned)online : 1;
	}
	if (nthreads > CPU_MAX_THREADS)
		nthreads = CPU_MAX_THREADS;
	cb = calloc(1, sizeof(*cb));
	if (cb == NULL)
		return FPREP_ENOMEM;
	fprep__queue_init(&cb->jobs);
	fprep__queue_init(&cb->admin);
	cb->threads = calloc(nthreads, sizeof(*cb->threads));
	if (cb->threads == NULL ||
	    fprep__jpeg_turns_init(&cb->turns, &cb->lock, 0, 0) != FPREP_OK) {
		free(cb->threads);
		free(cb);
		return FPREP_ENOMEM;
	}
	cb->jpeg_max = nthreads > 1 ? nthreads - 1 : 1;
	cb->base.name = "cpu";
	cb->base.capacity = nthreads;
	cb->base.submit = cpu_submit;
	cb->base.info = cpu_info;
	cb->base.close = cpu_close;
	cb->base.region_op = cpu_region_op;
	cb->base.video_open = cpu_video_open;
	/* libavcodec is loaded here, before the daemon listens, not by the
	 * first INFO or stream on the loop's thread (about 50 ms). */
	(void)fprep__video_avcodec_load(NULL, 0);
	pthread_mutex_init(&cb->lock, NULL);
	pthread_cond_init(&cb->work, NULL);
	pthread_cond_init(&cb->band_done, NULL);
	/* close() waits against CLOCK_MONOTONIC. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cb->idle, &ca);
	pthread_condattr_destroy(&ca);
	cb->nthreads = nthreads;
	for (i = 0; i < nthreads; i++) {
		rc = pthread_create(&cb->threads[i], NULL, cpu_worker, cb);
		if (rc != 0) {
			fprep__log(FPREP_LOG_ERR,
			           "cpu backend: pthread_create: %s",
			           strerror(rc));
			cpu_free(cb, i);
			return FPREP_ENOMEM;
		}
	}
	*bp = &cb->base;
	return FPREP_OK;
}
