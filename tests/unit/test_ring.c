/*
 * test_ring.c: a ring's slot table and in-flight gate (src/lib/ring.c):
 * the order slots are handed out in, tickets, stale releases, the holder
 * that waits for itself, closing, and a waiter woken from another thread.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "frameprep/frameprep.h"
#include "frameprep/ring.h"

static void slots_fifo_and_tickets(void **state)
{
	fprep_slots *s;
	unsigned k, ks[4];
	uint64_t t0, t1, t2, tickets[3];
	uint8_t st[3];

	(void)state;
	assert_int_equal(fprep_slots_alloc(&s, 0), FPREP_EINVAL);
	assert_null(s);
	assert_int_equal(fprep_slots_alloc(&s, 3), 0);
	assert_int_equal(fprep_slots_count(s), 3);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_RESERVED, 1, 1, 0, &k, &t0), 0);
	assert_int_equal(k, 0);
	assert_int_equal(t0, 1);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 1, 1, 0, &k, &t1), 0);
	assert_int_equal(k, 1);
	/* Released slots come back after the never-used one, in order. */
	assert_int_equal(fprep_slots_release(s, 0, t0, 0), 1);
	assert_int_equal(fprep_slots_release(s, 0, t0, 0), 0); /* stale */
	assert_int_equal(fprep_slots_free_list(s, ks, 4), 2);
	assert_int_equal(ks[0], 2);
	assert_int_equal(ks[1], 0);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 1, 1, 0, &k, &t2), 0);
	assert_int_equal(k, 2);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_RESERVED, 1, 1, 0, &k, &t0), 0);
	assert_int_equal(k, 0);
	assert_int_equal(t0, 2); /* slot 0's second turn */
	/* A taken slot's result holds it; only_reserved frees no held one. */
	assert_int_equal(fprep_slots_step(s, 1, t1, FPREP_SLOT_TAKEN,
	                                  FPREP_SLOT_HELD, 1),
	                 1);
	assert_int_equal(fprep_slots_step(s, 1, t1, FPREP_SLOT_TAKEN,
	                                  FPREP_SLOT_HELD, 1),
	                 0);
	assert_int_equal(fprep_slots_release(s, 1, t1, 1), 0);
	fprep_slots_states(s, st, tickets);
	assert_int_equal(st[0], FPREP_SLOT_RESERVED);
	assert_int_equal(st[1], FPREP_SLOT_HELD);
	assert_int_equal(st[2], FPREP_SLOT_TAKEN);
	assert_int_equal(tickets[0], 2);
	assert_int_equal(fprep_slots_take(s, FPREP_SLOT_FREE, 1, 1, 0, &k, &t0),
	                 FPREP_EINVAL);
	fprep_slots_free(s);
}

static void slots_mine_timeout_close(void **state)
{
	fprep_slots *s;
	unsigned k;
	uint64_t t0, t1;

	(void)state;
	assert_int_equal(fprep_slots_alloc(&s, 2), 0);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_RESERVED, 7, 1, 0, &k, &t0), 0);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 7, 1, 0, &k, &t1), 0);
	/* One slot in flight: it may come back, so the holder waits. */
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 7, 1, 20, &k, &t1),
	        FPREP_ETIMEDOUT);
	assert_int_equal(
	        fprep_slots_step(s, 1, 1, FPREP_SLOT_TAKEN, FPREP_SLOT_HELD, 7),
	        1);
	/* Every slot reserved or held by holder 7: told at once. */
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 7, 1, 60000, &k, &t1),
	        FPREP_EBUSY);
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 8, 1, 0, &k, &t1),
	        FPREP_ETIMEDOUT);
	fprep_slots_close(s);
	assert_true(fprep_slots_closed(s));
	assert_int_equal(
	        fprep_slots_take(s, FPREP_SLOT_TAKEN, 8, 1, 0, &k, &t1),
	        FPREP_ECLOSED);
	/* A closed table takes no reserved frame for sending. */
	assert_int_equal(fprep_slots_step(s, 0, t0, FPREP_SLOT_RESERVED,
	                                  FPREP_SLOT_TAKEN, 7),
	                 0);
	assert_int_equal(fprep_slots_release(s, 0, t0, 1), 1);
	fprep_slots_free(s);
}

struct waiter {
	fprep_slots *s;
	fprep_gate *g;
	int err, got;
	unsigned k;
};

static void *slot_waiter(void *arg)
{
	struct waiter *w = arg;
	uint64_t t;

	w->err = fprep_slots_take(w->s, FPREP_SLOT_TAKEN, 2, 1, 60000, &w->k,
	                          &t);
	return NULL;
}

static void *gate_waiter(void *arg)
{
	struct waiter *w = arg;

	w->got = fprep_gate_take(w->g, 60000);
	return NULL;
}

static void woken_from_another_thread(void **state)
{
	struct waiter w = {.err = -1, .got = -1};
	pthread_t th;
	unsigned k;
	uint64_t t;

	(void)state;
	assert_int_equal(fprep_slots_alloc(&w.s, 1), 0);
	assert_int_equal(
	        fprep_slots_take(w.s, FPREP_SLOT_TAKEN, 1, 1, 0, &k, &t), 0);
	assert_int_equal(pthread_create(&th, NULL, slot_waiter, &w), 0);
	assert_int_equal(fprep_slots_release(w.s, k, t, 0), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(w.err, 0);
	assert_int_equal(w.k, 0);
	/* A waiter on a closed table ends with ECLOSED. */
	assert_int_equal(pthread_create(&th, NULL, slot_waiter, &w), 0);
	fprep_slots_close(w.s);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(w.err, FPREP_ECLOSED);
	fprep_slots_free(w.s);

	assert_int_equal(fprep_gate_alloc(&w.g, 0), FPREP_EINVAL);
	assert_int_equal(fprep_gate_alloc(&w.g, 1), 0);
	assert_int_equal(fprep_gate_take(w.g, 0), 1);
	assert_int_equal(fprep_gate_take(w.g, 10), 0);
	assert_int_equal(fprep_gate_tokens(w.g), 0);
	assert_int_equal(pthread_create(&th, NULL, gate_waiter, &w), 0);
	fprep_gate_give(w.g);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(w.got, 1);
	fprep_gate_give(w.g);
	assert_int_equal(fprep_gate_tokens(w.g), 1);
	fprep_gate_free(w.g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(slots_fifo_and_tickets),
	        cmocka_unit_test(slots_mine_timeout_close),
	        cmocka_unit_test(woken_from_another_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
