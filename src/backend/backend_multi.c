/*
 * backend_multi.c: one backend over several lanes (backend_multi.h), so
 * that one daemon serves from every GPU it was given, with one or more
 * lanes (streams, staging slots, threads) per GPU.
 *
 * The design is simple: the multi backend has no thread of its own.
 * submit (loop thread) picks a lane, counts the job in flight there and
 * hands it over with done replaced by multi_job_done, which runs on the
 * lane's thread: it uncounts the job, takes the lane and the other lanes
 * of its device (they share its context) out of service when the job came
 * back fatal (a sticky CUDA error), and calls the caller's done. Only when no
 * lane is left in service does a fatal job stay fatal for the loop, which then
 * exits for a restart.
 *
 * Region operations (memreg.h):
 *   CUDA region  OPEN and CLOSE run on one lane of the region's device:
 *                the lanes of a device share its primary context, so one
 *                cudaIpcOpenMemHandle serves them all.
 *   shm region   OPEN runs on every lane in service, one after the other
 *                on the same record. The first maps the object and pins
 *                it with cudaHostRegisterPortable, a pin that counts for
 *                every device of the process; each later lane finds the
 *                record pinned and only checks that its device sees the
 *                pages as page-locked. The caller's done is called once,
 *                after the last lane. When a later lane refuses, the
 *                first lane undoes the open (CLOSE) and OPEN fails with
 *                the refusing lane's message. CLOSE runs once, on one
 *                lane, since the pin and the mapping are process-wide.
 */
#include "backend_multi.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

typedef struct multi_backend multi_backend;

typedef struct multi_lane {
	fprep__multi_lane cfg;
	unsigned index;
	multi_backend *mb;
	atomic_uint inflight; /* jobs submitted, done not yet called */
	atomic_ulong jobs;    /* jobs completed */
	atomic_int out;       /* taken out of service */
} multi_lane;

struct multi_backend {
	fprep__backend base;
	multi_lane *lanes;
	unsigned n;
	atomic_uint alive;  /* lanes in service */
	unsigned next;      /* where the round-robin starts; loop thread */
	pthread_mutex_t mu; /* closing, against region steps going on */
	int closing;
};

/* multi_op: a shared-memory OPEN travelling over the lanes. */
typedef struct multi_op {
	multi_backend *mb;
	fprep__memreg_cb done; /* the caller's */
	void *data;            /* the caller's */
	int undoing;           /* the first lane runs the undo CLOSE */
	int status;            /* the refusal being undone */
	char message[FPREP_MESSAGE_SIZE];
	unsigned at, count; /* order[at] runs now */
	unsigned order[];   /* lane indices */
} multi_op;

void fprep__uuid_text(const uint8_t u[FPREP_CUDA_UUID_SIZE], char *buf,
                      size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "GPU-");

	for (int i = 0; i < FPREP_CUDA_UUID_SIZE && n + 3 < size; i++)
		n += (size_t)snprintf(
		        buf + n, size - n, "%s%02x",
		        i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
}

static int multi_in_service(const multi_lane *l)
{
	return !atomic_load(&l->out);
}

static int multi_on(const multi_lane *l, const uint8_t *uuid)
{
	return uuid == NULL ||
	       memcmp(l->cfg.uuid, uuid, FPREP_CUDA_UUID_SIZE) == 0;
}

/* multi_first returns the first lane on uuid's device (NULL: any) that is
 * in service, or with any_state the first such lane at all; else NULL. */
static multi_lane *multi_first(multi_backend *mb, const uint8_t *uuid,
                               int any_state)
{
	for (unsigned k = 0; k < mb->n; k++)
		if (multi_on(&mb->lanes[k], uuid) &&
		    (any_state || multi_in_service(&mb->lanes[k])))
			return &mb->lanes[k];
	return NULL;
}

/* multi_pick chooses a job's lane: among the lanes in service on uuid's
 * device (NULL: all), the one with the fewest jobs in flight, the first
 * from the round-robin start on a tie. With none in service, a lane of
 * that device (or lane 0) takes the job and fails it. */
static multi_lane *multi_pick(multi_backend *mb, const uint8_t *uuid)
{
	multi_lane *best = NULL;
	unsigned best_load = UINT_MAX;

	for (unsigned k = 0; k < mb->n; k++) {
		multi_lane *l = &mb->lanes[(mb->next + k) % mb->n];
		unsigned load = atomic_load(&l->inflight);

		if (multi_on(l, uuid) && multi_in_service(l) &&
		    load < best_load) {
			best = l;
			best_load = load;
		}
	}
	if (best == NULL)
		best = multi_first(mb, uuid, 1);
	return best != NULL ? best : &mb->lanes[0];
}

/* multi_job_uuid: the device a job must run on, when it is a stream's
 * whose decoder lives on one (video.h), or names a CUDA region (its
 * input's first). */
static const uint8_t *multi_job_uuid(const fprep__job *job)
{
	if (job->video != NULL && job->video->on_device)
		return job->video->uuid;
	if (job->in_region != NULL &&
	    job->in_region->kind == FPREP__MEMREG_CUDA)
		return job->in_region->u.cuda.uuid;
	if (job->out_region != NULL &&
	    job->out_region->kind == FPREP__MEMREG_CUDA)
		return job->out_region->u.cuda.uuid;
	return NULL;
}

/* multi_job_done: a lane's completion of job, on the lane's thread. */
static void multi_job_done(fprep__job *job)
{
	multi_lane *l = job->priv;
	multi_backend *mb = l->mb;

	job->lane = l->index;
	job->done = job->outer_done;
	if (job->fatal) {
		/* A sticky error leaves the device's context unusable, and
		 * the lanes of a device share it: all of them go. */
		for (unsigned k = 0; k < mb->n; k++) {
			multi_lane *o = &mb->lanes[k];

			if (!multi_on(o, l->cfg.uuid) ||
			    atomic_exchange(&o->out, 1) != 0)
				continue;
			fprep__log(FPREP_LOG_ERR,
			           "lane %u (device %d, %s) taken out of "
			           "service after lane %u's error: %s; %u "
			           "lane(s) left",
			           k, o->cfg.device, o->cfg.name, l->index,
			           job->message,
			           atomic_fetch_sub(&mb->alive, 1) - 1);
		}
		if (atomic_load(&mb->alive) > 0) {
			char why[FPREP_MESSAGE_SIZE];

			snprintf(why, sizeof(why),
			         "lane %u out of service: %.110s", l->index,
			         job->message);
			memcpy(job->message, why, sizeof(why));
			job->fatal = 0;
		}
	}
	atomic_fetch_add(&l->jobs, 1);
	atomic_fetch_sub(&l->inflight, 1);
	job->done(job);
}

static int multi_submit(fprep__backend *b, fprep__job *job)
{
	multi_backend *mb = (multi_backend *)b;
	multi_lane *l = multi_pick(mb, multi_job_uuid(job));
	int rv;

	mb->next = (l->index + 1) % mb->n;
	job->priv = l;
	job->outer_done = job->done;
	job->done = multi_job_done;
	atomic_fetch_add(&l->inflight, 1);
	rv = l->cfg.backend->submit(l->cfg.backend, job);
	if (rv != 0) {
		atomic_fetch_sub(&l->inflight, 1);
		job->done = job->outer_done;
	}
	return rv;
}

/* multi_video_open opens a stream's decoder session on the lane that
 * multi_pick chooses; the session's jobs then go to the lanes of its
 * device (multi_job_uuid). Loop thread. */
static int multi_video_open(fprep__backend *b, const fprep_request *spec,
                            const uint8_t *params, size_t params_len,
                            fprep__video **vp)
{
	multi_backend *mb = (multi_backend *)b;
	fprep__backend *lb = multi_pick(mb, NULL)->cfg.backend;

	if (lb->video_open == NULL)
		return FPREP_EUNSUPPORTED;
	return lb->video_open(lb, spec, params, params_len, vp);
}

/* multi_forward queues r on lane k unless the backend is closing. */
static int multi_forward(multi_backend *mb, unsigned k, fprep__memreg *r)
{
	fprep__backend *lb = mb->lanes[k].cfg.backend;
	int rv = FPREP_ESHUTDOWN;

	pthread_mutex_lock(&mb->mu);
	if (!mb->closing)
		rv = lb->region_op(lb, r);
	pthread_mutex_unlock(&mb->mu);
	return rv;
}

/* multi_op_finish gives r back to the caller and calls its done. */
static void multi_op_finish(multi_op *op, fprep__memreg *r)
{
	r->done = op->done;
	r->data = op->data;
	free(op);
	r->done(r);
}

/* multi_op_refused ends an OPEN that lane order[at] refused (status,
 * message): the first lane undoes what it did, then the caller learns. */
static void multi_op_refused(multi_op *op, fprep__memreg *r, int status,
                             const char *message)
{
	op->status = status;
	snprintf(op->message, sizeof(op->message), "lane %u: %.126s",
	         op->order[op->at], message);
	op->undoing = 1;
	r->verb = FPREP__MEMREG_CLOSE;
	r->status = FPREP_OK;
	r->message[0] = '\0';
	if (multi_forward(op->mb, op->order[0], r) == 0)
		return;
	/* Closing: no lane runs the undo; the process is ending. */
	fprep__memreg_unmap(r);
	r->pinned = 0;
	r->verb = FPREP__MEMREG_OPEN;
	r->status = op->status;
	memcpy(r->message, op->message, sizeof(r->message));
	multi_op_finish(op, r);
}

/* multi_region_step: one lane ran its part of a shared-memory OPEN (or
 * the undo); on that lane's thread. */
static void multi_region_step(fprep__memreg *r)
{
	multi_op *op = r->data;
	char why[FPREP_MESSAGE_SIZE];
	int rv;

	if (op->undoing) {
		r->verb = FPREP__MEMREG_OPEN;
		r->status = op->status;
		memcpy(r->message, op->message, sizeof(r->message));
		multi_op_finish(op, r);
		return;
	}
	if (r->status != FPREP_OK) {
		if (op->at == 0) { /* nothing done yet to undo */
			multi_op_finish(op, r);
			return;
		}
		memcpy(why, r->message, sizeof(why));
		multi_op_refused(op, r, r->status, why);
		return;
	}
	if (++op->at == op->count) {
		multi_op_finish(op, r);
		return;
	}
	rv = multi_forward(op->mb, op->order[op->at], r);
	if (rv != 0)
		multi_op_refused(op, r, rv, "the lane is closing");
}

/* multi_open_shm starts a shared-memory OPEN on the lanes in service
 * (lane 0 alone when none is). */
static int multi_open_shm(multi_backend *mb, fprep__memreg *r)
{
	multi_op *op = calloc(1, sizeof(*op) + mb->n * sizeof(unsigned));
	int rv;

	if (op == NULL)
		return FPREP_ENOMEM;
	for (unsigned k = 0; k < mb->n; k++)
		if (multi_in_service(&mb->lanes[k]))
			op->order[op->count++] = k;
	if (op->count == 0)
		op->order[op->count++] = 0;
	op->mb = mb;
	op->done = r->done;
	op->data = r->data;
	r->done = multi_region_step;
	r->data = op;
	rv = multi_forward(mb, op->order[0], r);
	if (rv != 0) {
		r->done = op->done;
		r->data = op->data;
		free(op);
	}
	return rv;
}

static int multi_region_op(fprep__backend *b, fprep__memreg *r)
{
	multi_backend *mb = (multi_backend *)b;
	multi_lane *l;

	if (r == NULL || r->done == NULL)
		return FPREP_EINVAL;
	if (r->kind == FPREP__MEMREG_CUDA) {
		/* OPEN on a lane of another device refuses the UUID. */
		l = multi_first(mb, r->u.cuda.uuid,
		                r->verb == FPREP__MEMREG_CLOSE);
		if (l == NULL)
			l = multi_first(mb, NULL, 0);
	} else if (r->verb == FPREP__MEMREG_OPEN) {
		return multi_open_shm(mb, r);
	} else {
		l = multi_first(mb, NULL, 0);
	}
	if (l == NULL)
		l = &mb->lanes[0];
	return multi_forward(mb, l->index, r);
}

/* multi_info writes one line per lane, then the first lane's own lines
 * (its device's details). */
static void multi_info(fprep__backend *b, char *buf, size_t size)
{
	multi_backend *mb = (multi_backend *)b;
	size_t n = strnlen(buf, size);
	char uuid[48];

	if (n < size)
		n += (size_t)snprintf(buf + n, size - n,
		                      "lanes: %u\nlanes_in_service: %u\n",
		                      mb->n, atomic_load(&mb->alive));
	for (unsigned k = 0; k < mb->n && n < size; k++) {
		multi_lane *l = &mb->lanes[k];

		fprep__uuid_text(l->cfg.uuid, uuid, sizeof(uuid));
		n += (size_t)snprintf(
		        buf + n, size - n,
		        "lane_%u: device=%d uuid=%s in_service=%d "
		        "inflight=%u jobs=%lu name=%s\n",
		        k, l->cfg.device, uuid, multi_in_service(l),
		        atomic_load(&l->inflight), atomic_load(&l->jobs),
		        l->cfg.name);
	}
	if (n < size - 1 && mb->lanes[0].cfg.backend->info != NULL)
		mb->lanes[0].cfg.backend->info(mb->lanes[0].cfg.backend, buf,
		                               size);
}

/* multi_stats counts the lanes in service and adds up the lanes' kernel
 * caches and each device's memory once (from its first lane). */
static void multi_stats(fprep__backend *b, fprep__backend_stats *st)
{
	multi_backend *mb = (multi_backend *)b;

	st->lanes = mb->n;
	st->lanes_in_service = atomic_load(&mb->alive);
	for (unsigned k = 0; k < mb->n; k++) {
		fprep__backend *lb = mb->lanes[k].cfg.backend;
		fprep__backend_stats one;

		if (lb->stats == NULL)
			continue;
		memset(&one, 0, sizeof(one));
		lb->stats(lb, &one);
		st->cache_hits += one.cache_hits;
		st->cache_misses += one.cache_misses;
		if (one.compiles > st->compiles) /* a process-wide count */
			st->compiles = one.compiles;
		if (multi_first(mb, mb->lanes[k].cfg.uuid, 1) ==
		    &mb->lanes[k]) {
			st->memory_used += one.memory_used;
			st->memory_total += one.memory_total;
		}
	}
}

static void multi_close(fprep__backend *b, int timeout_ms)
{
	multi_backend *mb = (multi_backend *)b;

	pthread_mutex_lock(&mb->mu);
	mb->closing = 1;
	pthread_mutex_unlock(&mb->mu);
	for (unsigned k = 0; k < mb->n; k++)
		mb->lanes[k].cfg.backend->close(mb->lanes[k].cfg.backend,
		                                timeout_ms);
	pthread_mutex_destroy(&mb->mu);
	free(mb->lanes);
	free(mb);
}

int fprep__backend_multi_open(fprep__backend **bp,
                              const fprep__multi_lane *lanes, unsigned n)
{
	multi_backend *mb;

	*bp = NULL;
	if (n == 0)
		return FPREP_EINVAL;
	mb = calloc(1, sizeof(*mb));
	if (mb != NULL && (mb->lanes = calloc(n, sizeof(*mb->lanes))) == NULL) {
		free(mb);
		mb = NULL;
	}
	if (mb == NULL) {
		for (unsigned k = 0; k < n; k++)
			lanes[k].backend->close(lanes[k].backend, 0);
		return FPREP_ENOMEM;
	}
	mb->base.name = lanes[0].backend->name;
	mb->base.submit = multi_submit;
	mb->base.info = multi_info;
	mb->base.close = multi_close;
	mb->base.region_op = multi_region_op;
	mb->base.stats = multi_stats;
	mb->base.video_open =
	        lanes[0].backend->video_open != NULL ? multi_video_open : NULL;
	mb->n = n;
	pthread_mutex_init(&mb->mu, NULL);
	for (unsigned k = 0; k < n; k++) {
		/* The jobs run at once: every lane's; unknown if one's is. */
		unsigned cap = lanes[k].backend->capacity;

		mb->base.capacity = k == 0 || (mb->base.capacity > 0 && cap > 0)
		                            ? mb->base.capacity + cap
		                            : 0;
		mb->lanes[k].cfg = lanes[k];
		mb->lanes[k].index = k;
		mb->lanes[k].mb = mb;
	}
	atomic_store(&mb->alive, n);
	*bp = &mb->base;
	return 0;
}
