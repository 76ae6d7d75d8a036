/*
 * test_queue.c: the intrusive FIFO (src/util/queue.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "queue.h"

typedef struct item {
	int value;
	fprep__qnode link;
} item;

static int pop_value(fprep__queue *q)
{
	fprep__qnode *n = fprep__queue_pop(q);

	return n == NULL ? -1 : fprep__container_of(n, item, link)->value;
}

static void test_fifo_order(void **state)
{
	fprep__queue q;
	item it[5];

	(void)state;
	fprep__queue_init(&q);
	assert_true(fprep__queue_empty(&q));
	assert_null(fprep__queue_pop(&q));
	for (int i = 0; i < 5; i++) {
		it[i].value = i;
		fprep__queue_push(&q, &it[i].link);
		assert_false(fprep__queue_empty(&q));
	}
	for (int i = 0; i < 5; i++)
		assert_int_equal(pop_value(&q), i);
	assert_true(fprep__queue_empty(&q));
	assert_null(fprep__queue_pop(&q));
}

/* Emptying the queue resets its tail: a push after the last pop must not
 * link behind the popped node. */
static void test_reuse_after_empty(void **state)
{
	fprep__queue q;
	item a = {.value = 1}, b = {.value = 2}, c = {.value = 3};

	(void)state;
	fprep__queue_init(&q);
	fprep__queue_push(&q, &a.link);
	assert_int_equal(pop_value(&q), 1);
	assert_null(a.link.next);
	fprep__queue_push(&q, &b.link);
	fprep__queue_push(&q, &c.link);
	assert_int_equal(pop_value(&q), 2);
	assert_int_equal(pop_value(&q), 3);
	assert_int_equal(pop_value(&q), -1);
	/* Nodes popped are pushed again, in a new order. */
	fprep__queue_push(&q, &c.link);
	fprep__queue_push(&q, &a.link);
	assert_int_equal(pop_value(&q), 3);
	fprep__queue_push(&q, &c.link);
	assert_int_equal(pop_value(&q), 1);
	assert_int_equal(pop_value(&q), 3);
	assert_true(fprep__queue_empty(&q));
}

static void test_splice(void **state)
{
	fprep__queue q, from;
	item it[6];

	(void)state;
	fprep__queue_init(&q);
	fprep__queue_init(&from);
	for (int i = 0; i < 6; i++)
		it[i].value = i;
	/* Empty into empty, empty into non-empty: nothing changes. */
	fprep__queue_splice(&q, &from);
	assert_true(fprep__queue_empty(&q));
	fprep__queue_push(&q, &it[0].link);
	fprep__queue_splice(&q, &from);
	/* Non-empty into non-empty keeps both orders. */
	fprep__queue_push(&q, &it[1].link);
	fprep__queue_push(&from, &it[2].link);
	fprep__queue_push(&from, &it[3].link);
	fprep__queue_splice(&q, &from);
	assert_true(fprep__queue_empty(&from));
	/* from works again after the splice, and q's tail moved to it[3]. */
	fprep__queue_push(&from, &it[5].link);
	fprep__queue_push(&q, &it[4].link);
	for (int i = 0; i < 5; i++)
		assert_int_equal(pop_value(&q), i);
	assert_int_equal(pop_value(&q), -1);
	/* Non-empty into empty. */
	fprep__queue_splice(&q, &from);
	assert_int_equal(pop_value(&q), 5);
	assert_true(fprep__queue_empty(&q));
}

CMOCKA_MAIN({
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_reuse_after_empty),
        cmocka_unit_test(test_splice),
})
