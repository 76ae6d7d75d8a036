/*
 * test_jpeg_turns.c: JPEG frames served by turns (src/backend/jpeg_turns.h):
 * the order among uids and connections, charges by cost, the wait a cheap
 * frame sees beside costly ones, and a full key table.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "jpeg_turns.h"

typedef struct frame {
	uint64_t uid;
	uint32_t conn;
	uint32_t cost_us;
	int seq; /* order pushed within its key */
	fprep__qnode link;
} frame;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int check_keys = 1; /* a frame is served under its own key */

static void push(fprep__jpeg_turns *t, frame *f)
{
	fprep__jpeg_turns_push(t, &f->link, f->uid, f->conn);
}

/* pop_charge takes the next frame and charges its cost at once (one
 * decoding thread). */
static frame *pop_charge(fprep__jpeg_turns *t)
{
	fprep__jpeg_turn turn;
	fprep__qnode *n = fprep__jpeg_turns_pop(t, &turn);
	frame *f;

	if (n == NULL)
		return NULL;
	f = fprep__container_of(n, frame, link);
	if (check_keys) {
		assert_true(turn.uid == f->uid);
		assert_int_equal(turn.conn, f->conn);
	}
	fprep__jpeg_turns_charge(t, &turn, f->cost_us);
	return f;
}

static int setup(void **state)
{
	static fprep__jpeg_turns t;

	pthread_mutex_lock(&lock);
	assert_int_equal(fprep__jpeg_turns_init(&t, &lock, 0, 1000), 0);
	*state = &t;
	return 0;
}

static int teardown(void **state)
{
	fprep__jpeg_turns_fini(*state);
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Equal costs: connections of one uid alternate, each in its own order. */
static void test_round_robin(void **state)
{
	fprep__jpeg_turns *t = *state;
	frame f[12];
	int next[3] = {0, 0, 0};

	for (int i = 0; i < 12; i++) {
		f[i] = (frame){.uid = 7,
		               .conn = (uint32_t)(i % 3 + 1),
		               .cost_us = 1000,
		               .seq = i / 3};
		push(t, &f[i]);
	}
	assert_int_equal(t->queued, 12);
	assert_int_equal(t->keys, 3);
	for (int i = 0; i < 12; i++) {
		fprep__qnode *peeked = fprep__jpeg_turns_peek(t);
		frame *g = pop_charge(t);

		assert_non_null(g);
		assert_ptr_equal(peeked, &g->link);
		assert_int_equal(g->conn, (uint32_t)(i % 3 + 1));
		assert_int_equal(g->seq, next[g->conn - 1]++);
	}
	assert_null(pop_charge(t));
	assert_int_equal(t->keys, 0);
}

/* Two uids share the time equally whatever their connections: uid 1 with
 * three connections gets no more decode time than uid 2 with one. */
static void test_uids_share(void **state)
{
	fprep__jpeg_turns *t = *state;
	frame f[80];
	uint64_t spent[3] = {0, 0, 0};

	for (int i = 0; i < 60; i++) {
		f[i] = (frame){.uid = 1,
		               .conn = (uint32_t)(10 + i % 3),
		               .cost_us = 2000};
		push(t, &f[i]);
	}
	for (int i = 60; i < 80; i++) {
		f[i] = (frame){.uid = 2, .conn = 20, .cost_us = 3000};
		push(t, &f[i]);
	}
	/* While both have frames queued. */
	for (int i = 0; i < 30; i++) {
		frame *g = pop_charge(t);

		spent[g->uid] += g->cost_us;
	}
	assert_true(spent[1] <= spent[2] + 2 * 3000);
	assert_true(spent[2] <= spent[1] + 2 * 3000);
	while (pop_charge(t) != NULL)
		;
}

/* victim_worst pushes a cheap connection's frames (uid victim_uid) beside
 * two connections of costly ones (uid 5), serves them all and returns the
 * most costly frames served between two of the cheap ones (or before the
 * first). */
static int victim_worst(fprep__jpeg_turns *t, uint64_t victim_uid)
{
	enum { BOMBS = 20, CHEAP = 40 };
	static frame bomb[2][BOMBS], cheap[CHEAP];
	int served = 0, between = 0, worst = 0;

	for (int i = 0; i < BOMBS; i++)
		for (int b = 0; b < 2; b++) {
			bomb[b][i] = (frame){.uid = 5,
			                     .conn = (uint32_t)(b + 1),
			                     .cost_us = 140000};
			push(t, &bomb[b][i]);
		}
	for (int i = 0; i < CHEAP; i++) {
		cheap[i] =
		        (frame){.uid = victim_uid, .conn = 3, .cost_us = 2000};
		push(t, &cheap[i]);
	}
	while (served < CHEAP) {
		frame *g = pop_charge(t);

		assert_non_null(g);
		if (g->conn == 3) {
			served++;
			worst = between > worst ? between : worst;
			between = 0;
		} else {
			between++;
		}
	}
	while (pop_charge(t) != NULL)
		;
	return worst;
}

/* A cheap client beside another sending costly frames on two connections:
 * it waits for one costly decode at most, never for their queues (in
 * arrival order its first frame waited 40). */
static void test_victim_other_uid(void **state)
{
	assert_int_equal(victim_worst(*state, 6), 1);
}

/* The same with the three connections of one uid: the turns go round the
 * connections, so at most one costly decode per costly connection. */
static void test_victim_same_uid(void **state)
{
	int worst = victim_worst(*state, 5);

	assert_true(worst >= 1 && worst <= 2);
}

/* Costs charged after the decode: frames taken at once by several
 * threads are charged an estimate, corrected later; a key that owes keeps
 * its debt when its queue empties. */
static void test_late_charge_and_debt(void **state)
{
	fprep__jpeg_turns *t = *state;
	frame a[2], b[2];
	fprep__jpeg_turn ta, tb;

	a[0] = (frame){.uid = 1, .conn = 1, .cost_us = 100000};
	b[0] = (frame){.uid = 2, .conn = 2, .cost_us = 1000};
	push(t, &a[0]);
	push(t, &b[0]);
	assert_ptr_equal(fprep__jpeg_turns_pop(t, &ta), &a[0].link);
	assert_int_equal(ta.est_us, 1000); /* no decode seen: a quantum */
	assert_ptr_equal(fprep__jpeg_turns_pop(t, &tb), &b[0].link);
	fprep__jpeg_turns_charge(t, &ta, 100000);
	fprep__jpeg_turns_charge(t, &tb, 1000);
	/* Both come back: uid 1 owes 100 ms and waits its turns. */
	a[1] = (frame){.uid = 1, .conn = 1, .cost_us = 100000};
	push(t, &a[1]);
	for (int i = 0; i < 5; i++) {
		b[1] = (frame){.uid = 2, .conn = 2, .cost_us = 1000};
		push(t, &b[1]);
		assert_ptr_equal(pop_charge(t), &b[1]);
	}
	assert_ptr_equal(pop_charge(t), &a[1]);
	assert_null(pop_charge(t));
}

/* More connections than keys: frames share a key's turn and none is lost;
 * idle keys are reused. */
static void test_full_table(void **state)
{
	fprep__jpeg_turns t;
	frame f[12];
	int seen = 0;

	(void)state;
	assert_int_equal(fprep__jpeg_turns_init(&t, &lock, 4, 1000), 0);
	for (int i = 0; i < 12; i++) {
		f[i] = (frame){.uid = (uint64_t)(i % 2),
		               .conn = (uint32_t)i,
		               .cost_us = 500};
		push(&t, &f[i]);
	}
	assert_int_equal(t.queued, 12);
	assert_true(t.shared == 8);
	check_keys = 0; /* the 8 are served under others' keys */
	while (pop_charge(&t) != NULL)
		seen++;
	check_keys = 1;
	assert_int_equal(seen, 12);
	/* Idle now: new keys take the entries. */
	for (int i = 0; i < 4; i++) {
		f[i] = (frame){
		        .uid = 9, .conn = (uint32_t)(100 + i), .cost_us = 500};
		push(&t, &f[i]);
	}
	assert_int_equal(t.keys, 4);
	assert_true(t.shared == 8);
	while (pop_charge(&t) != NULL)
		;
	fprep__jpeg_turns_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_round_robin, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_uids_share, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_victim_other_uid, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_victim_same_uid, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_late_charge_and_debt,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_full_table, setup,
	                                        teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
