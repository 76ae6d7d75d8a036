/*
 * evq.c: the loop's wake-up queue (see evq.h).
 *
 * The design is simple: a producer links its event at the tail under the
 * mutex and calls uv_async_send. libuv coalesces wake-ups, so the loop
 * takes the whole list in one step under the mutex and walks it outside,
 * repeating until the queue is empty: one wake-up serves any number of
 * events, and a producer never waits for the loop. The list taken out
 * stays in the queue (taken) until each event is drained, so a drain
 * nested in a drain callback keeps the order, and a close from a drain
 * callback can dispose of what the walk had not reached. Events pushed
 * first wait in a list of their own, which the walk looks at (an atomic
 * count, no lock while it is empty) before each event it drains: one
 * such event waits for the event being drained, not for the whole list
 * taken out before it.
 */
#include "evq.h"

#include <stddef.h>

static void evq_async_cb(uv_async_t *handle)
{
	fprep__evq_drain(handle->data);
}

static void evq_close_cb(uv_handle_t *handle)
{
	fprep__evq *q = handle->data;

	pthread_mutex_destroy(&q->lock);
}

int fprep__evq_init(fprep__evq *q, uv_loop_t *loop, fprep__evq_drain_cb drain,
                    fprep__evq_dispose_cb dispose, void *data)
{
	int rv;

	fprep__queue_init(&q->queued);
	fprep__queue_init(&q->first);
	atomic_init(&q->nfirst, 0);
	fprep__queue_init(&q->taken);
	q->closed = 0;
	q->drain = drain;
	q->dispose = dispose;
	q->data = data;
	if (pthread_mutex_init(&q->lock, NULL) != 0)
		return UV_ENOMEM;
	rv = uv_async_init(loop, &q->async, evq_async_cb);
	if (rv != 0) {
		pthread_mutex_destroy(&q->lock);
		return rv;
	}
	q->async.data = q;
	return 0;
}

void fprep__evq_push(fprep__evq *q, fprep__event *ev)
{
	pthread_mutex_lock(&q->lock);
	fprep__queue_push(&q->queued, &ev->node);
	pthread_mutex_unlock(&q->lock);
	uv_async_send(&q->async);
}

void fprep__evq_push_first(fprep__evq *q, fprep__event *ev)
{
	pthread_mutex_lock(&q->lock);
	fprep__queue_push(&q->first, &ev->node);
	atomic_fetch_add_explicit(&q->nfirst, 1, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	uv_async_send(&q->async);
}

/* evq_take moves the queued events to the end of q->taken. */
static void evq_take(fprep__evq *q)
{
	pthread_mutex_lock(&q->lock);
	fprep__queue_splice(&q->taken, &q->queued);
	pthread_mutex_unlock(&q->lock);
}

/* evq_take_first pops the oldest event pushed first, or returns NULL. */
static fprep__qnode *evq_take_first(fprep__evq *q)
{
	fprep__qnode *n;

	if (atomic_load_explicit(&q->nfirst, memory_order_relaxed) == 0)
		return NULL;
	pthread_mutex_lock(&q->lock);
	n = fprep__queue_pop(&q->first);
	if (n != NULL)
		atomic_fetch_sub_explicit(&q->nfirst, 1, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	return n;
}

void fprep__evq_drain(fprep__evq *q)
{
	fprep__qnode *n;

	while (!q->closed) {
		if ((n = evq_take_first(q)) == NULL) {
			if (fprep__queue_empty(&q->taken))
				evq_take(q);
			if ((n = fprep__queue_pop(&q->taken)) == NULL)
				return;
		}
		q->drain(fprep__container_of(n, fprep__event, node), q->data);
	}
}

void fprep__evq_fini(fprep__evq *q)
{
	fprep__qnode *n;

	q->closed = 1;
	pthread_mutex_lock(&q->lock);
	fprep__queue_splice(&q->taken, &q->first);
	atomic_store_explicit(&q->nfirst, 0, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	evq_take(q);
	while ((n = fprep__queue_pop(&q->taken)) != NULL) {
		if (q->dispose != NULL)
			q->dispose(fprep__container_of(n, fprep__event, node),
			           q->data);
	}
	uv_close((uv_handle_t *)&q->async, evq_close_cb);
}
