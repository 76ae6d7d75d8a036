/*
 * test_evq.c: the loop's wake-up queue (service/evq.c): order, events
 * pushed first going ahead of those taken out before them, pushes from
 * other threads, nested drains, and a close that disposes of every event
 * it did not drain, with the loop closing with nothing left open.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cmocka_main.h"
#include <uv.h>

#include "evq.h"

#define TEST_MAX_EVENTS 4096

struct test_ev {
	fprep__event ev;
	int id;
};

struct test_ctx {
	uv_loop_t loop;
	fprep__evq q;
	int drained[TEST_MAX_EVENTS];
	int ndrained;
	int ndisposed;
	int fini_after;  /* drain callback closes the queue after this many */
	int nested_push; /* drain callback of event 0 pushes this id, drains */
	int first_push;  /* drain callback of event 0 pushes this id first */
};

static struct test_ev *test_ev_alloc(int id)
{
	struct test_ev *e = malloc(sizeof(*e));

	assert_non_null(e);
	e->id = id;
	return e;
}

static void test_drain_cb(fprep__event *ev, void *data)
{
	struct test_ctx *t = data;
	struct test_ev *e = fprep__container_of(ev, struct test_ev, ev);
	int id = e->id;

	assert_true(t->ndrained < TEST_MAX_EVENTS);
	t->drained[t->ndrained++] = id;
	free(e);
	if (id == 0 && t->nested_push > 0) {
		fprep__evq_push(&t->q, &test_ev_alloc(t->nested_push)->ev);
		fprep__evq_drain(&t->q);
	}
	if (id == 0 && t->first_push > 0)
		fprep__evq_push_first(&t->q, &test_ev_alloc(t->first_push)->ev);
	if (t->fini_after > 0 && t->ndrained == t->fini_after)
		fprep__evq_fini(&t->q);
}

static void test_dispose_cb(fprep__event *ev, void *data)
{
	struct test_ctx *t = data;

	t->ndisposed++;
	free(ev);
}

static struct test_ctx *test_open(void)
{
	struct test_ctx *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	assert_int_equal(uv_loop_init(&t->loop), 0);
	assert_int_equal(fprep__evq_init(&t->q, &t->loop, test_drain_cb,
	                                 test_dispose_cb, t),
	                 0);
	return t;
}

/* test_close runs the loop until the queue's handle has closed and checks
 * that nothing is left open. */
static void test_close(struct test_ctx *t)
{
	uv_run(&t->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&t->loop), 0);
	free(t);
}

static void drains_in_order(void **state)
{
	struct test_ctx *t = test_open();

	(void)state;
	for (int i = 0; i < 5; i++)
		fprep__evq_push(&t->q, &test_ev_alloc(i)->ev);
	uv_run(&t->loop, UV_RUN_NOWAIT);
	assert_int_equal(t->ndrained, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(t->drained[i], i);
	fprep__evq_fini(&t->q);
	assert_int_equal(t->ndisposed, 0);
	test_close(t);
}

static void close_disposes_queued(void **state)
{
	struct test_ctx *t = test_open();

	(void)state;
	for (int i = 0; i < 7; i++)
		fprep__evq_push(&t->q, &test_ev_alloc(i)->ev);
	fprep__evq_fini(&t->q);
	assert_int_equal(t->ndrained, 0);
	assert_int_equal(t->ndisposed, 7);
	test_close(t);
}

static void close_from_drain_disposes_rest(void **state)
{
	struct test_ctx *t = test_open();

	(void)state;
	t->fini_after = 2;
	for (int i = 0; i < 6; i++)
		fprep__evq_push(&t->q, &test_ev_alloc(i)->ev);
	uv_run(&t->loop, UV_RUN_NOWAIT);
	assert_int_equal(t->ndrained, 2);
	assert_int_equal(t->ndisposed, 4);
	test_close(t);
}

static void nested_drain_keeps_order(void **state)
{
	struct test_ctx *t = test_open();

	(void)state;
	t->nested_push = 9;
	for (int i = 0; i < 3; i++)
		fprep__evq_push(&t->q, &test_ev_alloc(i)->ev);
	fprep__evq_drain(&t->q);
	assert_int_equal(t->ndrained, 4);
	assert_int_equal(t->drained[0], 0);
	assert_int_equal(t->drained[1], 1);
	assert_int_equal(t->drained[2], 2);
	assert_int_equal(t->drained[3], 9);
	fprep__evq_fini(&t->q);
	assert_int_equal(t->ndisposed, 0);
	test_close(t);
}

/* Events pushed first are drained before the others, those already taken
 * out included (one came while event 0 was drained), and a close disposes
 * of those not drained. */
static void first_goes_ahead(void **state)
{
	struct test_ctx *t = test_open();
	const int want[] = {7, 8, 0, 9, 1, 2};

	(void)state;
	t->first_push = 9;
	for (int i = 0; i < 3; i++)
		fprep__evq_push(&t->q, &test_ev_alloc(i)->ev);
	fprep__evq_push_first(&t->q, &test_ev_alloc(7)->ev);
	fprep__evq_push_first(&t->q, &test_ev_alloc(8)->ev);
	uv_run(&t->loop, UV_RUN_NOWAIT);
	assert_int_equal(t->ndrained, 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(t->drained[i], want[i]);
	fprep__evq_push(&t->q, &test_ev_alloc(3)->ev);
	fprep__evq_push_first(&t->q, &test_ev_alloc(10)->ev);
	fprep__evq_fini(&t->q);
	assert_int_equal(t->ndisposed, 2);
	test_close(t);
}

#define TEST_THREADS    4
#define TEST_PER_THREAD 500

struct test_pusher {
	struct test_ctx *t;
	int base;
};

static void *test_push_thread(void *arg)
{
	struct test_pusher *p = arg;

	for (int i = 0; i < TEST_PER_THREAD; i++)
		fprep__evq_push(&p->t->q, &test_ev_alloc(p->base + i)->ev);
	return NULL;
}

static void pushes_from_threads(void **state)
{
	struct test_ctx *t = test_open();
	struct test_pusher p[TEST_THREADS];
	pthread_t th[TEST_THREADS];
	int last[TEST_THREADS];

	(void)state;
	for (int i = 0; i < TEST_THREADS; i++) {
		p[i] = (struct test_pusher){t, i * TEST_PER_THREAD};
		assert_int_equal(
		        pthread_create(&th[i], NULL, test_push_thread, &p[i]),
		        0);
	}
	while (t->ndrained < TEST_THREADS * TEST_PER_THREAD / 2)
		uv_run(&t->loop, UV_RUN_ONCE);
	for (int i = 0; i < TEST_THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	/* Half or more drained: close with the rest possibly queued. */
	fprep__evq_fini(&t->q);
	assert_int_equal(t->ndrained + t->ndisposed,
	                 TEST_THREADS * TEST_PER_THREAD);
	/* Each thread's events came out in its order. */
	for (int i = 0; i < TEST_THREADS; i++)
		last[i] = -1;
	for (int k = 0; k < t->ndrained; k++) {
		int id = t->drained[k], th_i = id / TEST_PER_THREAD;

		assert_true(id > last[th_i]);
		last[th_i] = id;
	}
	test_close(t);
}

CMOCKA_MAIN({
        cmocka_unit_test(drains_in_order),
        cmocka_unit_test(close_disposes_queued),
        cmocka_unit_test(close_from_drain_disposes_rest),
        cmocka_unit_test(nested_drain_keeps_order),
        cmocka_unit_test(first_goes_ahead),
        cmocka_unit_test(pushes_from_threads),
})
