/*
 * test_port_doorbell.c: the doorbell port (service/port_doorbell.c) on
 * doorbell areas written by hand in a real shared-memory region, with the
 * loop's spin and the request machine played by the test. The port takes
 * POSTED entries (TAKEN, the header copied, an ENTRY sink at the entry's
 * reply), leaves FREE ones, and holds a use of the region per request;
 * it takes no more than its pool, nor more of a connection's entries than
 * --max-inflight-per-conn allows, leaving the rest POSTED and taking them
 * when a request ends; the areas say whether the loop polls; an output
 * overlapping an area is seen; a doorbell rung again and again with
 * nothing posted is muted, then armed again; the port's close drops every
 * doorbell. The test ends with the loop closing with nothing open.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "daemon.h"
#include "fake_backend.h"
#include "loop_fixture.h"
#include "shm_object.h"

#define REGION_SIZE 65536u
#define AREA_AT     4096u /* the doorbell area's offset in the region */
#define ENTRIES     8u
#define POOL        4u /* the port's slots */
#define PIPE        7u
#define PER_CONN    3u /* --max-inflight-per-conn */

/* fixture: a server with a regions table over a fake backend that maps
 * at once, and the doorbell port with a pool of POOL slots. */
struct fixture {
	fprep__server srv;
	fprep__config cfg;
	fake_backend *fb; /* maps at once; its thread not started */
	fprep__slot slots[POOL];
	fprep__conn conns[POOL];
	fprep__slot *taken[64]; /* what take was given, in order */
	unsigned ntaken;
	fprep__memreg *r;
	uint8_t *area;
	char shm_name[64];
};

static struct fixture *fx;

static void fixture_event(fprep__event *ev, void *data)
{
	struct fixture *f = data;

	if (ev->kind == FPREP__EV_REGION)
		fprep__regions_event(&f->srv.regions, ev);
	else if (ev->kind == FPREP__EV_DOORBELL)
		fprep__doorbells_rung(&f->srv.doorbells);
	else
		fail_msg("event of kind %d", ev->kind);
}

/* take: the request machine's intake, as the test plays it: it records
 * the slot and counts the request in flight for its connection. */
static void take(fprep__slot *s)
{
	assert_int_equal(s->state, FPREP__SLOT_RECV);
	assert_true(fx->ntaken < 64);
	fx->taken[fx->ntaken++] = s;
	atomic_fetch_add(&fx->conns[0].inflight, 1);
}

/* end ends the request in s: its connection's count, then the port. */
static void end(fprep__slot *s)
{
	atomic_fetch_sub(&fx->conns[0].inflight, 1);
	fx->srv.doorbells.port.ops->end(&fx->srv.doorbells.port, s);
}

static int db_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int fd;

	if (f == NULL)
		return -1;
	fx = f;
	fd = shm_object_make(f->shm_name, sizeof(f->shm_name), "db",
	                     REGION_SIZE);
	if (fd < 0)
		return -1;
	close(fd);
	f->cfg.max_doorbells = 4;
	f->cfg.max_inflight = POOL;
	f->cfg.max_inflight_per_conn = PER_CONN;
	f->srv.cfg = &f->cfg;
	f->srv.slots = f->slots;
	f->srv.nslots = POOL;
	f->srv.conns = f->conns;
	f->srv.nconns = POOL;
	f->conns[0].pipe = PIPE;
	f->fb = fake_backend_new();
	if (loop_fixture_open(&f->srv, &f->fb->b, fixture_event, f,
	                      REGION_SIZE) != 0)
		return -1;
	for (unsigned i = 0; i < POOL; i++) {
		f->slots[i].srv = &f->srv;
		f->slots[i].index = i;
	}
	if (fprep__doorbells_init(&f->srv.doorbells, &f->srv, f->slots, POOL) !=
	    0)
		return -1;
	f->srv.doorbells.port.take = take;
	f->r = loop_fixture_region(&f->srv, f->shm_name, REGION_SIZE, PIPE);
	if (f->r == NULL)
		return -1;
	f->area = f->r->base + AREA_AT;
	*state = f;
	return 0;
}

static int db_teardown(void **state)
{
	struct fixture *f = *state;
	fprep__port *p = &f->srv.doorbells.port;

	p->ops->close(p);
	assert_int_equal(f->srv.doorbells.nbells, 0);
	assert_int_equal(atomic_load((_Atomic uint32_t *)(void *)f->area), 0);
	fprep__regions_close(&f->srv.regions);
	uv_run(&f->srv.loop, UV_RUN_NOWAIT);
	fprep__doorbells_fini(&f->srv.doorbells);
	fprep__evq_drain(&f->srv.evq);
	fprep__evq_fini(&f->srv.evq);
	assert_int_equal(uv_run(&f->srv.loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(fprep__regions_fini(&f->srv.regions), 0);
	assert_int_equal(uv_loop_close(&f->srv.loop), 0);
	shm_unlink(f->shm_name);
	fake_backend_free(f->fb);
	free(f);
	return 0;
}

/* doorbell_on sets the doorbell up at AREA_AT with ENTRIES entries. */
static void doorbell_on(struct fixture *f)
{
	fprep_register_request req;
	char why[FPREP_MESSAGE_SIZE];

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_DOORBELL;
	req.region_id = f->r->id;
	req.doorbell_entries = ENTRIES;
	req.doorbell_offset = AREA_AT;
	assert_int_equal(fprep__doorbells_set(&f->srv.doorbells, PIPE, &req,
	                                      why, sizeof(why)),
	                 0);
	assert_int_equal(f->srv.doorbells.nbells, 1);
}

static _Atomic uint32_t *entry_state(struct fixture *f, unsigned k)
{
	return (_Atomic uint32_t *)(void *)(f->area +
	                                    FPREP_DOORBELL_HEADER_SIZE +
	                                    k * FPREP_DOORBELL_ENTRY_SIZE);
}

/* post writes a request header whose request_id is id into entry k, by
 * hand, and posts it. */
static void post(struct fixture *f, unsigned k, uint64_t id)
{
	uint8_t *e = (uint8_t *)entry_state(f, k);

	memset(e + FPREP_DOORBELL_REQUEST_AT, 0, FPREP_REQUEST_HEADER_SIZE);
	memcpy(e + FPREP_DOORBELL_REQUEST_AT + 8, &id, sizeof(id));
	memset(e + FPREP_DOORBELL_REPLY_AT + 8, 0, 8);
	atomic_store(entry_state(f, k), FPREP_DOORBELL_POSTED);
}

static unsigned poll_port(struct fixture *f)
{
	fprep__port *p = &f->srv.doorbells.port;

	return p->ops->poll(p);
}

static uint64_t taken_id(const fprep__slot *s)
{
	uint64_t id;

	memcpy(&id, s->req + 8, sizeof(id));
	return id;
}

/* Entries taken in order, their headers copied, sinks at their replies. */
static void test_take(void **state)
{
	struct fixture *f = *state;

	doorbell_on(f);
	assert_int_equal(poll_port(f), 0);
	post(f, 1, 11);
	post(f, 4, 14);
	assert_int_equal(poll_port(f), 2);
	assert_int_equal(f->ntaken, 2);
	for (unsigned i = 0; i < 2; i++) {
		fprep__slot *s = f->taken[i];
		unsigned k = i == 0 ? 1 : 4;
		uint8_t *e = (uint8_t *)entry_state(f, k);

		assert_true(taken_id(s) == 10 + k);
		assert_ptr_equal(s->req, s->req_head);
		assert_null(s->req_msg);
		assert_int_equal(s->pipe, PIPE);
		assert_int_equal(s->sink.kind, FPREP__SINK_ENTRY);
		assert_ptr_equal(s->sink.region, f->r);
		assert_ptr_equal(s->sink.area, e + FPREP_DOORBELL_REPLY_AT);
		assert_int_equal(atomic_load(entry_state(f, k)),
		                 FPREP_DOORBELL_TAKEN);
	}
	assert_int_equal(f->srv.active, 2);
	assert_true(f->srv.doorbells.requests == 2);
	/* Nothing more until posted again. */
	assert_int_equal(poll_port(f), 0);
	end(f->taken[0]);
	end(f->taken[1]);
	assert_int_equal(f->srv.active, 0);
	assert_int_equal(f->srv.doorbells.nfree, POOL);
}

/* The pool, then the connection's bound: the rest stays POSTED and is
 * taken when a request ends; the connection is never closed. */
static void test_bounds(void **state)
{
	struct fixture *f = *state;

	doorbell_on(f);
	for (unsigned k = 0; k < ENTRIES; k++)
		post(f, k, 100 + k);
	/* PER_CONN (3) of the connection's, though the pool has 4. */
	assert_int_equal(poll_port(f), PER_CONN);
	assert_int_equal(atomic_load(&f->conns[0].inflight), PER_CONN);
	for (unsigned k = PER_CONN; k < ENTRIES; k++)
		assert_int_equal(atomic_load(entry_state(f, k)),
		                 FPREP_DOORBELL_POSTED);
	assert_int_equal(poll_port(f), 0);
	/* One ends: the next entry is taken at once, without a poll. */
	end(f->taken[0]);
	assert_int_equal(f->ntaken, PER_CONN + 1);
	assert_true(taken_id(f->taken[PER_CONN]) == 100 + PER_CONN);
	/* The pool: with more room for the connection, POOL at most. */
	f->cfg.max_inflight_per_conn = 100;
	assert_int_equal(poll_port(f), POOL - PER_CONN);
	assert_int_equal(f->srv.doorbells.nfree, 0);
	assert_int_equal(poll_port(f), 0);
	/* The rest, as slots come back. */
	while (f->ntaken < ENTRIES) {
		unsigned before = f->ntaken;

		for (unsigned i = 0; i < f->ntaken; i++)
			if (f->taken[i]->state == FPREP__SLOT_RECV) {
				end(f->taken[i]);
				break;
			}
		assert_int_equal(f->ntaken, before + 1);
	}
	for (unsigned k = 0; k < ENTRIES; k++)
		assert_int_equal(atomic_load(entry_state(f, k)),
		                 FPREP_DOORBELL_TAKEN);
	for (unsigned i = 0; i < f->ntaken; i++)
		if (f->taken[i]->state == FPREP__SLOT_RECV)
			end(f->taken[i]);
	assert_int_equal(f->srv.active, 0);
}

/* The areas say whether the loop polls; the wake word is armed only
 * while it does not (where the waker runs). */
static void test_spin(void **state)
{
	struct fixture *f = *state;
	fprep__port *p = &f->srv.doorbells.port;
	_Atomic uint32_t *polling = (_Atomic uint32_t *)(void *)f->area;
	_Atomic uint32_t *wake =
	        (_Atomic uint32_t *)(void *)(f->area + FPREP_DOORBELL_WAKE_AT);
	int waker = f->srv.doorbells.waker.running;

	doorbell_on(f);
	assert_int_equal(atomic_load(polling), 0);
	assert_int_equal(atomic_load(wake),
	                 waker ? FPREP_DOORBELL_WAKE_ARMED : 0);
	p->ops->spin(p, 1);
	assert_int_equal(atomic_load(polling), 1);
	assert_int_equal(atomic_load(wake), 0);
	p->ops->spin(p, 0);
	assert_int_equal(atomic_load(polling), 0);
	assert_int_equal(atomic_load(wake),
	                 waker ? FPREP_DOORBELL_WAKE_ARMED : 0);
}

/* An output over the area (or over an entry) is seen; one beside it,
 * or in another region, is not. */
static void test_overlap(void **state)
{
	struct fixture *f = *state;
	const fprep__doorbells *db = &f->srv.doorbells;
	uint64_t len = FPREP_DOORBELL_HEADER_SIZE +
	               ENTRIES * FPREP_DOORBELL_ENTRY_SIZE;
	fprep__memreg other;

	doorbell_on(f);
	assert_true(fprep__doorbells_overlap(db, f->r, f->area, 1));
	assert_true(fprep__doorbells_overlap(db, f->r, f->area - 8, 9));
	assert_true(fprep__doorbells_overlap(db, f->r, f->area + len - 1, 64));
	assert_true(
	        fprep__doorbells_overlap(db, f->r, f->r->base, REGION_SIZE));
	assert_false(fprep__doorbells_overlap(db, f->r, f->area - 8, 8));
	assert_false(fprep__doorbells_overlap(db, f->r, f->area + len, 4096));
	memset(&other, 0, sizeof(other));
	assert_false(fprep__doorbells_overlap(db, &other, f->area, 64));
}

/* Rings without posts: after 32 in a window the doorbell is muted (its
 * word not armed, so its client uses nng), and armed again later. */
static void test_idle_rings(void **state)
{
	struct fixture *f = *state;
	fprep__doorbells *db = &f->srv.doorbells;
	_Atomic uint32_t *wake =
	        (_Atomic uint32_t *)(void *)(f->area + FPREP_DOORBELL_WAKE_AT);

	doorbell_on(f);
	if (!db->waker.running) {
		print_message("no futex_waitv here: no wake words to mute\n");
		return;
	}
	/* A ring with a post is no idle ring. */
	post(f, 0, 1);
	atomic_fetch_or(wake, FPREP_DOORBELL_WAKE_RUNG);
	fprep__doorbells_rung(db);
	assert_int_equal(f->ntaken, 1);
	end(f->taken[0]);
	for (unsigned i = 0; i < 40 && !db->bells[0].muted; i++) {
		assert_int_equal(atomic_load(wake) & FPREP_DOORBELL_WAKE_ARMED,
		                 FPREP_DOORBELL_WAKE_ARMED);
		atomic_fetch_or(wake, FPREP_DOORBELL_WAKE_RUNG);
		fprep__doorbells_rung(db);
	}
	assert_true(db->bells[0].muted);
	assert_true(db->mutes == 1);
	assert_int_equal(atomic_load(wake), 0);
	/* A client finds neither polling nor ARMED: it uses nng. Later the
	 * doorbell is armed again. */
	while (db->bells[0].muted)
		uv_run(&f->srv.loop, UV_RUN_ONCE);
	assert_int_equal(atomic_load(wake), FPREP_DOORBELL_WAKE_ARMED);
}

CMOCKA_MAIN({
        cmocka_unit_test_setup_teardown(test_take, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_bounds, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_spin, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_overlap, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_idle_rings, db_setup, db_teardown),
})
