/*
 * test_sink.c: where replies are written (service/sink.c). A reply into
 * shared memory (a region's header, a doorbell entry) is read by a client
 * thread the way a client does: it waits for the request_id with an
 * acquire load, then checks that every other byte of the header is this
 * reply's, never the previous one's; thousands of replies in a row, each
 * different. Each delivery ends through the loop's event queue as a send
 * would (FPREP__EV_SENT), once; a region the SIGBUS guard caught gets no
 * bytes, and its entry's delivery still ends. Each test ends with the loop
 * closing with nothing open.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "daemon.h"
#include "reply.h"
#include "shm_region.h"

#define SINK_REPLIES 3000u

/* fixture: a loop, its queue, a server holding it and one slot. */
struct fixture {
	fprep__server srv;
	fprep__slot s;
	fprep__memreg r;
	uint8_t *mem;  /* the region's bytes */
	unsigned sent; /* FPREP__EV_SENT events drained */
};

static void fixture_event(fprep__event *ev, void *data)
{
	struct fixture *f = data;

	assert_int_equal(ev->kind, FPREP__EV_SENT);
	assert_ptr_equal(fprep__container_of(ev, fprep__slot, ev), &f->s);
	f->sent++;
}

static int sink_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL || posix_memalign((void **)&f->mem, 64, 4096) != 0)
		return -1;
	memset(f->mem, 0, 4096);
	f->srv.loop_thread = pthread_self();
	if (uv_loop_init(&f->srv.loop) != 0 ||
	    fprep__evq_init(&f->srv.evq, &f->srv.loop, fixture_event, NULL,
	                    f) != 0)
		return -1;
	f->r.kind = FPREP__MEMREG_SHM;
	f->r.size = 4096;
	f->r.base = f->mem;
	f->s.srv = &f->srv;
	f->s.sink.region = &f->r;
	*state = f;
	return 0;
}

static int sink_teardown(void **state)
{
	struct fixture *f = *state;

	fprep__evq_fini(&f->srv.evq);
	assert_int_equal(uv_run(&f->srv.loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&f->srv.loop), 0);
	free(f->mem);
	free(f);
	return 0;
}

/* reader: the client's side of one reply area. */
struct reader {
	uint8_t *area;
	unsigned n;
	atomic_uint acked; /* replies read and checked */
	atomic_uint bad;   /* replies seen torn */
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	_Atomic uint64_t *id = (_Atomic uint64_t *)(void *)(rd->area + 8);

	for (unsigned k = 1; k <= rd->n; k++) {
		fprep_reply_header h;
		char want[32];

		while (atomic_load_explicit(id, memory_order_acquire) != k)
			;
		if (fprep_reply_decode(rd->area, FPREP_REPLY_HEADER_SIZE, &h) !=
		    FPREP_OK)
			atomic_fetch_add(&rd->bad, 1);
		snprintf(want, sizeof(want), "reply %u", k);
		if (h.t_total_us != k || h.region_id != k * 3 ||
		    strcmp(h.message, want) != 0)
			atomic_fetch_add(&rd->bad, 1);
		atomic_store_explicit(id, 0, memory_order_relaxed);
		atomic_store_explicit(&rd->acked, k, memory_order_release);
	}
	return NULL;
}

/* sink_stream delivers SINK_REPLIES replies into area through s's sink,
 * each after the reader has read the one before, as a client sends its
 * next request only after it saw the reply. */
static void sink_stream(struct fixture *f, uint8_t *area)
{
	struct reader rd = {.area = area, .n = SINK_REPLIES};
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, reader_main, &rd), 0);
	for (unsigned k = 1; k <= SINK_REPLIES; k++) {
		fprep_reply_header h;
		char msg[32];

		while (atomic_load_explicit(&rd.acked, memory_order_acquire) !=
		       k - 1)
			;
		snprintf(msg, sizeof(msg), "reply %u", k);
		fprep__reply_header_simple(&h, FPREP_KIND_REGISTER, k, FPREP_OK,
		                           msg, 0, k * 3);
		h.t_total_us = k;
		fprep_reply_encode(&h, f->s.rep_head);
		f->s.delivered = 0; /* a new request (fprep__slot_take) */
		assert_int_equal(fprep__sink_deliver(&f->s, NULL, 1000), 1);
		fprep__evq_drain(&f->srv.evq);
		assert_int_equal(f->sent, k);
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&rd.bad), 0);
	assert_int_equal(atomic_load(&rd.acked), SINK_REPLIES);
	assert_true(atomic_load(&f->r.replies) == SINK_REPLIES);
}

/* A region's header: the last FPREP_REPLY_HEADER_SIZE bytes of an
 * output's capacity. */
static void test_region_order(void **state)
{
	struct fixture *f = *state;

	f->s.sink.kind = FPREP__SINK_REGION;
	f->s.sink.area = f->mem + 4096 - FPREP_REPLY_HEADER_SIZE;
	sink_stream(f, f->s.sink.area);
}

/* A doorbell entry's reply header. */
static void test_entry_order(void **state)
{
	struct fixture *f = *state;

	f->s.sink.kind = FPREP__SINK_ENTRY;
	f->s.sink.area =
	        f->mem + FPREP_DOORBELL_HEADER_SIZE + FPREP_DOORBELL_REPLY_AT;
	sink_stream(f, f->s.sink.area);
}

/* An entry in a region the SIGBUS guard caught: nothing is written, and
 * the delivery ends all the same (there is no other way back). */
static void test_entry_broken(void **state)
{
	struct fixture *f = *state;
	fprep__shm_region map;
	fprep_reply_header h;

	memset(&map, 0, sizeof(map));
	map.broken = 1;
	f->r.u.shm.map = &map;
	f->s.sink.kind = FPREP__SINK_ENTRY;
	f->s.sink.area = f->mem + 512;
	fprep__reply_header_simple(&h, FPREP_KIND_FRAME, 9, FPREP_OK, "", 0, 0);
	fprep_reply_encode(&h, f->s.rep_head);
	assert_int_equal(fprep__sink_deliver(&f->s, NULL, 1000), 1);
	assert_true(f->s.delivered);
	fprep__evq_drain(&f->srv.evq);
	assert_int_equal(f->sent, 1);
	for (unsigned i = 0; i < FPREP_REPLY_HEADER_SIZE; i++)
		assert_int_equal(f->mem[512 + i], 0);
	assert_true(atomic_load(&f->r.replies) == 0);
	f->r.u.shm.map = NULL;
}

CMOCKA_MAIN({
        cmocka_unit_test_setup_teardown(test_region_order, sink_setup,
                                        sink_teardown),
        cmocka_unit_test_setup_teardown(test_entry_order, sink_setup,
                                        sink_teardown),
        cmocka_unit_test_setup_teardown(test_entry_broken, sink_setup,
                                        sink_teardown),
})
