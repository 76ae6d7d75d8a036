/*
 * evq.h: the hand-off from other threads (nng's aio callbacks, backend
 * completions) to the loop thread: a mutex-protected FIFO plus one
 * uv_async_t wake-up, and a second FIFO whose events the loop takes
 * before the first's (fprep__evq_push_first).
 */
#ifndef FPREP_SERVICE_EVQ_H
#define FPREP_SERVICE_EVQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <uv.h>

#include "queue.h"

/* fprep__event: a queue link (queue.h), embedded in whatever is queued,
 * with a kind the owner sets (its own enumeration) so that the drain can
 * tell what it holds; the drain reaches the embedding structure with
 * fprep__container_of. An event is in at most one queue at a time. */
typedef struct fprep__event fprep__event;
struct fprep__event {
	fprep__qnode node;
	int kind;
};

/* fprep__evq_drain_cb: called on the loop thread once per queued event, in
 * the order they were pushed (those of fprep__evq_push_first before the
 * others). */
typedef void (*fprep__evq_drain_cb)(fprep__event *ev, void *data);

/* fprep__evq_dispose_cb: called by fprep__evq_fini, on the loop thread,
 * once for each event that was pushed and not drained, so that what it
 * owns is released. */
typedef void (*fprep__evq_dispose_cb)(fprep__event *ev, void *data);

/* fprep__evq: the queue. Embedded by its owner; init/fini pair. */
typedef struct fprep__evq {
	pthread_mutex_t lock;
	fprep__queue queued; /* under lock */
	fprep__queue first;  /* under lock: fprep__evq_push_first's */
	atomic_uint nfirst;  /* events in first (written under lock) */
	fprep__queue taken;  /* loop thread: taken out, not yet drained */
	uv_async_t async;
	fprep__evq_drain_cb drain;
	fprep__evq_dispose_cb dispose;
	void *data;
	int closed; /* fprep__evq_fini was called: drain no more */
} fprep__evq;

/* fprep__evq_init initialises q on loop, calling drain(ev, data) for each
 * event the loop takes out, and dispose(ev, data) (NULL: nothing) for each
 * event still queued when the queue closes. Returns 0 or a libuv error
 * (negative). Loop thread. */
int fprep__evq_init(fprep__evq *q, uv_loop_t *loop, fprep__evq_drain_cb drain,
                    fprep__evq_dispose_cb dispose, void *data);

/* fprep__evq_push appends ev and wakes the loop. Any thread, until
 * fprep__evq_fini; it never blocks beyond the queue's mutex. */
void fprep__evq_push(fprep__evq *q, fprep__event *ev);

/* fprep__evq_push_first appends ev to the events drained before every
 * other (a request that must not wait behind the work queued before it:
 * an INFO) and wakes the loop. Any thread, as fprep__evq_push. Such an
 * event overtakes completions already queued: an INFO's counts are the
 * loop's as it answers, and may not yet show work a backend finished
 * just before (a reply the client got was sent after its completion was
 * drained, so an INFO after a reply always shows it). */
void fprep__evq_push_first(fprep__evq *q, fprep__event *ev);

/* fprep__evq_drain takes out every queued event (and those pushed while it
 * runs) and calls drain for each, before each one those pushed with
 * fprep__evq_push_first. Loop thread; the async handler calls it, and
 * shutdown may call it directly, also from drain: the inner call goes on
 * with the events the outer one took, in order. */
void fprep__evq_drain(fprep__evq *q);

/* fprep__evq_fini closes the queue: the drain in progress, if any, stops
 * after the current event, and the events still queued (taken out by that
 * drain or not) are given to dispose. The async handle closes, and the
 * mutex is destroyed, when the loop runs next. No thread may push any
 * more. Loop thread; may be called from drain. */
void fprep__evq_fini(fprep__evq *q);

#endif /* FPREP_SERVICE_EVQ_H */
