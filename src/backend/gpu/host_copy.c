/*
 * host_copy.c: the copy pool of host_copy.h.
 *
 * A copy of n bytes becomes up to nthreads + 1 chunks of at least
 * HOST_COPY_MIN_CHUNK bytes; all but the first go on the pool's queue, the
 * caller copies the first and then waits on its group's counter. Workers
 * sleep on a condition variable while the queue is empty. A copy of rows
 * (fprep__copy_rows) is cut the same way between rows: a chunk is a span
 * of whole rows.
 */
#include "gpu/host_copy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "queue.h"

#define HOST_COPY_MIN_CHUNK   (512u * 1024u)
#define HOST_COPY_MAX_THREADS 16

typedef struct host_copy_group {
	unsigned remaining; /* chunks not yet copied, under the pool's mutex */
	pthread_cond_t cv;
} host_copy_group;

/* host_copy_task: rows rows of width bytes, pitch bytes apart on both
 * sides, the last one last bytes long (<= width). */
typedef struct host_copy_task {
	unsigned char *dst;
	const unsigned char *src;
	size_t width, pitch, rows, last;
	host_copy_group *group;
	fprep__qnode link;
} host_copy_task;

static void host_copy_run(const host_copy_task *t)
{
	for (size_t r = 0; r < t->rows; r++)
		memcpy(t->dst + r * t->pitch, t->src + r * t->pitch,
		       r + 1 < t->rows ? t->width : t->last);
}

struct fprep__copy_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* queue not empty, or stop */
	fprep__queue tasks;
	int stop;
	unsigned nthreads;
	pthread_t threads[HOST_COPY_MAX_THREADS];
};

static void *host_copy_main(void *arg)
{
	fprep__copy_pool *p = arg;

	pthread_setname_np(pthread_self(), "fp-host-copy");
	pthread_mutex_lock(&p->mu);
	for (;;) {
		fprep__qnode *n = fprep__queue_pop(&p->tasks);
		if (n == NULL) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		host_copy_task *t =
		        fprep__container_of(n, host_copy_task, link);
		pthread_mutex_unlock(&p->mu);
		host_copy_run(t);
		pthread_mutex_lock(&p->mu);
		if (--t->group->remaining == 0)
			pthread_cond_signal(&t->group->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int fprep__copy_pool_open(fprep__copy_pool **pp, unsigned nthreads)
{
	fprep__copy_pool *p = calloc(1, sizeof *p);

	*pp = NULL;
	if (p == NULL)
		return FPREP_ENOMEM;
	fprep__queue_init(&p->tasks);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (nthreads > HOST_COPY_MAX_THREADS)
		nthreads = HOST_COPY_MAX_THREADS;
	for (; p->nthreads < nthreads; p->nthreads++)
		if (pthread_create(&p->threads[p->nthreads], NULL,
		                   host_copy_main, p) != 0)
			break;
	*pp = p;
	return 0;
}

void fprep__copy_pool_close(fprep__copy_pool *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* host_copy_split copies rows rows of width bytes, pitch bytes apart, the
 * last one last bytes long, in chunks of step rows (at most nthreads + 1),
 * the first on the caller. */
static void host_copy_split(fprep__copy_pool *p, unsigned char *dst,
                            const unsigned char *src, size_t width,
                            size_t pitch, size_t rows, size_t last, size_t step)
{
	host_copy_task tasks[HOST_COPY_MAX_THREADS];
	host_copy_group g;

	pthread_cond_init(&g.cv, NULL);
	g.remaining = 0;
	pthread_mutex_lock(&p->mu);
	for (size_t i = 1; i <= p->nthreads && i * step < rows; i++) {
		host_copy_task *t = &tasks[i - 1];
		size_t r0 = i * step;
		*t = (host_copy_task){.dst = dst + r0 * pitch,
		                      .src = src + r0 * pitch,
		                      .width = width,
		                      .pitch = pitch,
		                      .rows = rows - r0 < step ? rows - r0
		                                               : step,
		                      .last = rows - r0 <= step ? last : width,
		                      .group = &g};
		fprep__queue_push(&p->tasks, &t->link);
		g.remaining++;
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);

	host_copy_run(&(host_copy_task){.dst = dst,
	                                .src = src,
	                                .width = width,
	                                .pitch = pitch,
	                                .rows = step < rows ? step : rows,
	                                .last = rows <= step ? last : width});

	pthread_mutex_lock(&p->mu);
	while (g.remaining > 0)
		pthread_cond_wait(&g.cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pthread_cond_destroy(&g.cv);
}

void fprep__copy(fprep__copy_pool *p, void *dst, const void *src, size_t n)
{
	size_t chunks = n / HOST_COPY_MIN_CHUNK;

	if (chunks > p->nthreads + 1)
		chunks = p->nthreads + 1;
	if (chunks < 2) {
		memcpy(dst, src, n);
		return;
	}
	/* Chunks start on 4 KiB boundaries (whole pages per thread): the
	 * copy as rows of step bytes, one chunk each, the last one short. */
	size_t step = ((n + chunks - 1) / chunks + 4095) & ~(size_t)4095;
	size_t rows = (n + step - 1) / step;

	host_copy_split(p, dst, src, step, step, rows, n - (rows - 1) * step,
	                1);
}

void fprep__copy_rows(fprep__copy_pool *p, void *dst, const void *src,
                      size_t width, size_t pitch, size_t rows)
{
	size_t chunks = width * rows / HOST_COPY_MIN_CHUNK;

	if (chunks > p->nthreads + 1)
		chunks = p->nthreads + 1;
	if (chunks < 2)
		chunks = 1;
	if (rows > 0)
		host_copy_split(p, dst, src, width, pitch, rows, width,
		                (rows + chunks - 1) / chunks);
}
