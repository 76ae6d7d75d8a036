/*
 * test_regions.c: the daemon's registered regions (service/regions.c):
 * limits, lookups confined to the owning connection, ids, removal, release
 * only after the last request using a region is done, and the
 * asynchronous path: every open and close runs on the backend's
 * administrative queue and ends on the loop thread, through the event
 * queue. The regions are real mappings of one shared-memory object. A fake
 * backend runs each operation at once (inline) or holds it until the test
 * lets it go (held), and counts maps and unmaps; one test uses the real
 * CPU backend; CUDA regions are opened by the fake as the GPU lane would.
 * Each test ends with the loop closing with nothing open.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "config.h"
#include "fake_backend.h"
#include "frameprep/frameprep.h"
#include "regions.h"
#include "shm_object.h"

#define REGION_SIZE 4096u
#define EV_REGION   7 /* the event kind the table's completions carry */

/* fixture: one loop, its event queue, a table and a fake backend. */
struct fixture {
	uv_loop_t loop;
	fprep__evq evq;
	fprep__regions t;
	fake_backend *fb; /* its thread is not started: held operations run
	                     on fake_backend_run_regions */
};

/* result: what a registration's or unregistration's callback said. */
struct result {
	int called;
	int status;
	uint32_t id;
	char message[FPREP_MESSAGE_SIZE];
};

static char regions_shm_name[64];

static void fixture_event(fprep__event *ev, void *data)
{
	struct fixture *f = data;

	assert_int_equal(ev->kind, EV_REGION);
	fprep__regions_event(&f->t, ev);
}

static int regions_setup(void **state)
{
	static struct fixture f;
	int fd;

	fd = shm_object_make(regions_shm_name, sizeof(regions_shm_name),
	                     "regions", REGION_SIZE);
	if (fd < 0)
		return -1;
	close(fd);
	memset(&f, 0, sizeof(f));
	f.fb = fake_backend_new();
	if (uv_loop_init(&f.loop) != 0 ||
	    fprep__evq_init(&f.evq, &f.loop, fixture_event, NULL, &f) != 0)
		return -1;
	*state = &f;
	return 0;
}

/* regions_teardown checks that the loop closes with nothing left open. */
static int regions_teardown(void **state)
{
	struct fixture *f = *state;

	fprep__evq_fini(&f->evq);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	shm_unlink(regions_shm_name);
	fake_backend_free(f->fb);
	return uv_loop_close(&f->loop) == 0 ? 0 : -1;
}

static void table_init(struct fixture *f, unsigned max_per_pipe,
                       uint64_t max_bytes)
{
	fprep__regions_init(&f->t, &f->fb->b, &f->evq, EV_REGION, max_per_pipe,
	                    REGION_SIZE, max_bytes);
}

/* table_end closes what is left, lets the closes complete, and checks
 * that every mapping was undone and nothing is left. */
static void table_end(struct fixture *f)
{
	fprep__regions_close(&f->t);
	fake_backend_run_regions(f->fb);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(fprep__regions_fini(&f->t), 0);
	assert_int_equal(f->fb->maps, f->fb->unmaps);
	assert_true(f->t.bytes == 0);
}

static void result_cb(void *data, int status, uint32_t id, const char *msg)
{
	struct result *res = data;

	res->called++;
	res->status = status;
	res->id = id;
	snprintf(res->message, sizeof(res->message), "%s", msg);
}

/* pump runs the loop until *called reaches n. */
static void pump(struct fixture *f, const int *called, int n)
{
	while (*called < n)
		uv_run(&f->loop, UV_RUN_ONCE);
}

/* region_register registers size bytes of the test's object for pipe and
 * waits for the result, which must be success. Returns the region. */
static fprep__memreg *region_register(struct fixture *f, uint32_t pipe,
                                      uint64_t size)
{
	char msg[FPREP_MESSAGE_SIZE];
	struct result res = {0};
	fprep__memreg *r;

	assert_int_equal(fprep__regions_register(&f->t, regions_shm_name, size,
	                                         pipe, (uint64_t)getuid(),
	                                         result_cb, &res, msg,
	                                         sizeof(msg)),
	                 0);
	pump(f, &res.called, 1);
	assert_int_equal(res.status, FPREP_OK);
	assert_non_null(strstr(res.message, "registered"));
	r = fprep__regions_find(&f->t, res.id, pipe);
	assert_non_null(r);
	assert_int_equal(r->id, res.id);
	assert_int_equal(r->owner, pipe);
	return r;
}

/* region_unregister unregisters id of pipe and waits for the close. */
static void region_unregister(struct fixture *f, uint32_t id, uint32_t pipe)
{
	char msg[FPREP_MESSAGE_SIZE];
	struct result res = {0};

	assert_int_equal(fprep__regions_unregister(&f->t, id, pipe, result_cb,
	                                           &res, msg, sizeof(msg)),
	                 0);
	pump(f, &res.called, 1);
	assert_int_equal(res.status, FPREP_OK);
	assert_int_equal(res.id, id);
}

static int try_register(struct fixture *f, const char *name, uint32_t pipe,
                        uint64_t size, char *msg)
{
	return fprep__regions_register(&f->t, name, size, pipe,
	                               (uint64_t)getuid(), result_cb, NULL, msg,
	                               FPREP_MESSAGE_SIZE);
}

static void limits(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	struct result res = {0};
	uint64_t bytes = 1;

	table_init(f, 2, 3000);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 0);
	assert_true(bytes == 0);
	region_register(f, 1, 1000);
	region_register(f, 1, 1000);

	/* Per connection: the third of pipe 1 is refused, pipe 2 is not. */
	msg[0] = '\0';
	assert_int_equal(try_register(f, regions_shm_name, 1, 1, msg),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-regions"));
	assert_non_null(strstr(msg, "2 regions"));

	/* In bytes, over all connections: 2000 + 1001 > 3000. */
	msg[0] = '\0';
	assert_int_equal(try_register(f, regions_shm_name, 2, 1001, msg),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-shm-bytes 3000"));
	assert_non_null(strstr(msg, "1001"));

	/* The size and the name are checked before anything is queued. */
	assert_int_equal(try_register(f, regions_shm_name, 2, 0, msg),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-region-bytes"));
	assert_int_equal(try_register(f, regions_shm_name, 2, UINT64_MAX, msg),
	                 FPREP_ELIMIT);
	assert_int_equal(try_register(f, "no-slash", 2, 10, msg), FPREP_EINVAL);
	assert_int_equal(f->fb->maps, 2);

	/* A registration that fails to map gives its bytes back, and its
	 * reason reaches the callback. */
	assert_int_equal(
	        fprep__regions_register(&f->t, "/fprep-test-regions-none", 1000,
	                                2, (uint64_t)getuid(), result_cb, &res,
	                                msg, sizeof(msg)),
	        0);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 2);
	assert_true(bytes == 3000); /* reserved while it opens */
	pump(f, &res.called, 1);
	assert_int_equal(res.status, FPREP_EREGION);
	assert_non_null(strstr(res.message, "shm_open"));
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 2);
	assert_true(bytes == 2000);

	/* A removed region's bytes and slot are free again once closed. */
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 1), 2);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 0);
	assert_true(bytes == 0);
	region_register(f, 1, 3000);
	table_end(f);
	assert_int_equal(f->fb->unmaps, 3);
}

/* max-regions 0 turns registration off. */
static void limit_zero(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];

	table_init(f, 0, 1 << 20);
	assert_int_equal(try_register(f, regions_shm_name, 1, 1, msg),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-regions"));
	table_end(f);
	assert_int_equal(f->fb->maps, 0);
}

static void add_find(void **state)
{
	struct fixture *f = *state;
	fprep__memreg *r[6];

	table_init(f, 16, 1 << 20);
	for (int i = 0; i < 6; i++) {
		r[i] = region_register(f, (uint32_t)(i % 2 + 1), 64);
		assert_int_not_equal(r[i]->id, 0);
		assert_non_null(r[i]->base);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(r[i]->id, r[j]->id);
	}
	for (int i = 0; i < 6; i++) {
		uint32_t own = (uint32_t)(i % 2 + 1);

		assert_ptr_equal(fprep__regions_find(&f->t, r[i]->id, own),
		                 r[i]);
		/* Another connection's region is not found. */
		assert_null(fprep__regions_find(&f->t, r[i]->id, 3 - own));
		assert_null(fprep__regions_find(&f->t, r[i]->id, 99));
	}
	assert_null(fprep__regions_find(&f->t, 0, 1));
	assert_null(fprep__regions_find(&f->t, 12345, 1));

	/* A region the SIGBUS guard marked broken is not found either. */
	r[0]->u.shm.map->broken = 1;
	assert_null(fprep__regions_find(&f->t, r[0]->id, 1));
	r[0]->u.shm.map->broken = 0;
	table_end(f);
	assert_int_equal(f->fb->unmaps, 6);
}

/* Ids stay unique and non-zero when the counter wraps around while the
 * first regions are still registered. */
static void ids_wrap(void **state)
{
	struct fixture *f = *state;
	fprep__memreg *r[8];

	table_init(f, 16, 1 << 20);
	f->t.next_id = 1;
	r[0] = region_register(f, 1, 64); /* id 1 */
	r[1] = region_register(f, 2, 64); /* id 2 */
	f->t.next_id = UINT32_MAX - 1;
	for (int i = 2; i < 8; i++)
		r[i] = region_register(f, (uint32_t)(i % 2 + 1), 64);
	for (int i = 0; i < 8; i++) {
		assert_int_not_equal(r[i]->id, 0);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(r[i]->id, r[j]->id);
		assert_ptr_equal(
		        fprep__regions_find(&f->t, r[i]->id, r[i]->owner),
		        r[i]);
	}
	table_end(f);
	assert_int_equal(f->fb->unmaps, 8);
}

/* Each table starts its ids at a random value (protocol.h, REGISTER):
 * two daemons do not give a connection the same first ids, so a request
 * sent across a restart names none of the new daemon's regions. Fails
 * by chance once in about 2^31 runs. */
static void ids_random_start(void **state)
{
	struct fixture *f = *state;
	uint32_t first[2];

	for (int i = 0; i < 2; i++) {
		table_init(f, 16, 1 << 20);
		first[i] = region_register(f, 1, 64)->id;
		assert_int_not_equal(first[i], 0);
		table_end(f);
	}
	assert_int_not_equal(first[0], first[1]);
}

static void unregister_one(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	fprep__memreg *a, *b;
	uint32_t id;
	uint64_t bytes;

	table_init(f, 16, 1 << 20);
	a = region_register(f, 1, 100);
	b = region_register(f, 1, 200);
	id = a->id;
	/* Only the owner can remove it; unknown ids are refused. */
	assert_int_equal(fprep__regions_unregister(&f->t, id, 2, NULL, NULL,
	                                           msg, sizeof(msg)),
	                 FPREP_EREGION);
	assert_non_null(strstr(msg, "not a region of this connection"));
	assert_int_equal(fprep__regions_unregister(&f->t, 999, 1, NULL, NULL,
	                                           msg, sizeof(msg)),
	                 FPREP_EREGION);
	assert_int_equal(f->fb->unmaps, 0);
	/* Not in use: closed at once, then the callback. */
	region_unregister(f, id, 1);
	assert_int_equal(f->fb->unmaps, 1);
	assert_null(fprep__regions_find(&f->t, id, 1));
	assert_int_equal(fprep__regions_unregister(&f->t, id, 1, NULL, NULL,
	                                           msg, sizeof(msg)),
	                 FPREP_EREGION);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 1);
	assert_true(bytes == 200);
	assert_ptr_equal(fprep__regions_find(&f->t, b->id, 1), b);
	table_end(f);
	assert_int_equal(f->fb->unmaps, 2);
}

static void remove_pipe(void **state)
{
	struct fixture *f = *state;
	fprep__memreg *keep;
	uint64_t bytes;

	table_init(f, 16, 1 << 20);
	region_register(f, 1, 10);
	keep = region_register(f, 2, 20);
	region_register(f, 1, 30);
	region_register(f, 1, 40);
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 3), 0);
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 1), 3);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 3);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 1);
	assert_true(bytes == 20);
	assert_ptr_equal(fprep__regions_find(&f->t, keep->id, 2), keep);
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 1), 0);
	table_end(f);
	assert_int_equal(f->fb->unmaps, 4);
}

/* A removed region still in use leaves the table at once (not found, not
 * counted) but is closed only at its last unuse; its bytes stay reserved,
 * and its UNREGISTER unanswered, until then. */
static void use_unuse(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	struct result res = {0};
	fprep__memreg *r[3];
	uint32_t id[3];
	uint64_t bytes;

	table_init(f, 16, 1 << 20);
	for (int i = 0; i < 3; i++) {
		r[i] = region_register(f, 1, 100);
		id[i] = r[i]->id;
	}

	/* In use but not removed: unuse closes nothing. */
	fprep__regions_use(r[0]);
	fprep__regions_unuse(&f->t, r[0]);
	assert_int_equal(f->fb->unmaps, 0);
	assert_ptr_equal(fprep__regions_find(&f->t, id[0], 1), r[0]);

	for (int i = 0; i < 3; i++) {
		fprep__regions_use(r[i]);
		fprep__regions_use(r[i]);
	}
	assert_int_equal(fprep__regions_unregister(&f->t, id[1], 1, result_cb,
	                                           &res, msg, sizeof(msg)),
	                 0);
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 1), 2);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 0);
	assert_int_equal(res.called, 0);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 0);
	assert_true(bytes == 300);
	for (int i = 0; i < 3; i++)
		assert_null(fprep__regions_find(&f->t, id[i], 1));

	/* The middle of the list first, then its ends. */
	fprep__regions_unuse(&f->t, r[1]);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 0);
	fprep__regions_unuse(&f->t, r[1]);
	pump(f, &res.called, 1);
	assert_int_equal(f->fb->unmaps, 1);
	assert_int_equal(res.status, FPREP_OK);
	assert_int_equal(res.id, id[1]);
	assert_true(f->t.bytes == 200);
	fprep__regions_unuse(&f->t, r[0]);
	fprep__regions_unuse(&f->t, r[2]);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 1);
	fprep__regions_unuse(&f->t, r[2]);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 2);
	fprep__regions_unuse(&f->t, r[0]);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 3);
	assert_null(f->t.other);
	assert_true(f->t.bytes == 0);
	table_end(f);
	assert_int_equal(f->fb->unmaps, 3);
}

/* close at shutdown closes the table through the backend; once the
 * backend is detached, closes run here and still complete as events. */
static void close_releases_all(void **state)
{
	struct fixture *f = *state;
	fprep__memreg *busy;
	char msg[FPREP_MESSAGE_SIZE];

	table_init(f, 16, 1 << 20);
	region_register(f, 1, 100);
	region_register(f, 2, 100);
	busy = region_register(f, 1, 100);
	fprep__regions_use(busy);
	fprep__regions_close(&f->t);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 2);
	/* New registrations are refused from now on. */
	assert_int_equal(try_register(f, regions_shm_name, 3, 10, msg),
	                 FPREP_ESHUTDOWN);
	/* The backend closes with a request still in flight (the drain
	 * deadline): the last unuse unmaps here. */
	fprep__regions_detach(&f->t);
	fprep__regions_unuse(&f->t, busy);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->unmaps, 2);
	assert_null(f->t.other);
	assert_true(f->t.bytes == 0);
	assert_int_equal(fprep__regions_fini(&f->t), 0);
}

/* The connection closes while its REGISTER is being mapped: the region
 * never enters the table, the registration ends with ECLOSED, and it is
 * unmapped again. */
static void pipe_closes_while_opening(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	struct result res = {0};
	uint64_t bytes;

	table_init(f, 1, 1 << 20);
	f->fb->hold_regions = 1;
	assert_int_equal(fprep__regions_register(&f->t, regions_shm_name, 100,
	                                         5, (uint64_t)getuid(),
	                                         result_cb, &res, msg,
	                                         sizeof(msg)),
	                 0);
	/* Opening counts against the connection's limit. */
	assert_int_equal(try_register(f, regions_shm_name, 5, 100, msg),
	                 FPREP_ELIMIT);
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 5), 0);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(res.called, 0);
	assert_int_equal(fake_backend_run_regions(f->fb), 1); /* the OPEN */
	pump(f, &res.called, 1);
	assert_int_equal(res.status, FPREP_ECLOSED);
	assert_non_null(strstr(res.message, "connection closed"));
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 0);
	assert_int_equal(fake_backend_run_regions(f->fb), 1); /* its CLOSE */
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->maps, 1);
	assert_int_equal(f->fb->unmaps, 1);
	assert_true(f->t.bytes == 0);
	assert_null(f->t.other);
	table_end(f);
}

/* Shutdown while a REGISTER waits in the backend's administrative queue:
 * the backend's close runs it, the registration fails with ESHUTDOWN, and
 * the mapping is undone here (the backend is gone by then). */
static void shutdown_while_queued(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	struct result res = {0};

	table_init(f, 4, 1 << 20);
	f->fb->hold_regions = 1;
	assert_int_equal(fprep__regions_register(&f->t, regions_shm_name, 100,
	                                         1, (uint64_t)getuid(),
	                                         result_cb, &res, msg,
	                                         sizeof(msg)),
	                 0);
	fprep__regions_close(&f->t);
	/* What the backend's close does: run what is queued. */
	assert_int_equal(fake_backend_run_regions(f->fb), 1);
	fprep__regions_detach(&f->t);
	pump(f, &res.called, 1);
	assert_int_equal(res.status, FPREP_ESHUTDOWN);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->fb->maps, 1);
	assert_null(f->t.other);
	assert_true(f->t.bytes == 0);
	assert_int_equal(fprep__regions_fini(&f->t), 0);
	/* The fake never saw the close: the region was unmapped here. */
	assert_int_equal(f->fb->unmaps, 0);
}

/* The real CPU backend: maps and unmaps run on its workers and come back
 * through the event queue; its close runs what is still queued. */
static void cpu_backend(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	struct result res[4] = {{0}};
	fprep__backend *b;
	uint64_t bytes;
	int called = 0;

	assert_int_equal(fprep__backend_cpu_open(&b, 2), 0);
	fprep__regions_init(&f->t, b, &f->evq, EV_REGION, 8, REGION_SIZE,
	                    1 << 20);
	for (int i = 0; i < 4; i++)
		assert_int_equal(
		        fprep__regions_register(&f->t, regions_shm_name, 1000,
		                                (uint32_t)(i % 2 + 1),
		                                (uint64_t)getuid(), result_cb,
		                                &res[i], msg, sizeof(msg)),
		        0);
	while (called < 4) {
		uv_run(&f->loop, UV_RUN_ONCE);
		called = res[0].called + res[1].called + res[2].called +
		         res[3].called;
	}
	for (int i = 0; i < 4; i++) {
		fprep__memreg *r;

		assert_int_equal(res[i].status, FPREP_OK);
		r = fprep__regions_find(&f->t, res[i].id,
		                        (uint32_t)(i % 2 + 1));
		assert_non_null(r);
		assert_false(r->pinned);
		r->base[i] = (uint8_t)i; /* mapped read/write */
	}
	region_unregister(f, res[0].id, 1);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 3);
	assert_true(bytes == 3000);
	/* Shutdown: the closes are queued, the backend's close runs them. */
	fprep__regions_close(&f->t);
	b->close(b, 1000);
	fprep__regions_detach(&f->t);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_null(f->t.other);
	assert_true(f->t.bytes == 0);
	assert_int_equal(fprep__regions_fini(&f->t), 0);
}

/* cuda_register registers a CUDA region of size bytes at offset for pipe;
 * returns the registration's immediate result, and with res the callback's
 * after the loop ran. */
static int cuda_register(struct fixture *f, uint32_t pipe, uint64_t offset,
                         uint64_t size, struct result *res, char *msg)
{
	fprep_register_request req;
	int rv;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER_CUDA;
	req.region_size = size;
	req.cuda_offset = offset;
	memset(req.cuda_handle, 0x42, sizeof(req.cuda_handle));
	rv = fprep__regions_register_cuda(&f->t, &req, pipe, 1000,
	                                  res ? result_cb : NULL, res, msg,
	                                  FPREP_MESSAGE_SIZE);
	if (rv == 0 && res != NULL)
		pump(f, &res->called, 1);
	return rv;
}

/* CUDA regions: off unless allowed, their own per-connection limit, not
 * counted as shared memory, found only as device memory, closed once the
 * last request using them is done. */
static void cuda_regions(void **state)
{
	struct fixture *f = *state;
	char msg[FPREP_MESSAGE_SIZE];
	struct result a = {0}, b = {0};
	fprep__memreg *r;
	unsigned alive = 9;
	uint64_t bytes;

	table_init(f, 1, 100000);
	assert_int_equal(cuda_register(f, 1, 0, 4096, NULL, msg), FPREP_EPERM);
	assert_non_null(strstr(msg, "allow-cuda-regions=false"));
	fprep__regions_set_cuda(&f->t, 1, 2);
	assert_int_equal(cuda_register(f, 1, 0, 0, NULL, msg), FPREP_EINVAL);
	assert_int_equal(cuda_register(f, 1, UINT64_MAX, 2, NULL, msg),
	                 FPREP_EINVAL);
	assert_int_equal(cuda_register(f, 1, 512, 4096, &a, msg), 0);
	assert_int_equal(a.status, FPREP_OK);
	assert_int_equal(cuda_register(f, 1, 0, 8192, &b, msg), 0);
	assert_int_equal(b.status, FPREP_OK);
	assert_int_equal(cuda_register(f, 1, 0, 64, NULL, msg), FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-cuda-regions 2"));
	/* The shared-memory limit (1 here) is a separate count. */
	region_register(f, 1, 1000);
	assert_int_equal(fprep__regions_count(&f->t, &bytes), 1);
	assert_true(bytes == 1000);
	assert_int_equal(fprep__regions_count_cuda(&f->t, &alive), 2);
	assert_int_equal(alive, 2);

	r = fprep__regions_find(&f->t, a.id, 1);
	assert_non_null(r);
	assert_true(fprep__memreg_on_device(r));
	assert_ptr_equal(r->base, (uint8_t *)r->u.cuda.opened + 512);
	assert_null(fprep__regions_find(&f->t, a.id, 2));
	assert_int_equal(
	        fprep__memreg_span(r, 4000, 97, "in", msg, sizeof(msg)),
	        FPREP_EINVAL);

	/* The connection closes while a request uses region a: it leaves the
	 * table at once and is closed after the request. */
	fprep__regions_use(r);
	assert_int_equal(fprep__regions_remove_pipe(&f->t, 1), 3);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(fprep__regions_count_cuda(&f->t, &alive), 0);
	assert_int_equal(alive, 1);
	fprep__regions_unuse(&f->t, r);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(fprep__regions_count_cuda(&f->t, &alive), 0);
	assert_int_equal(alive, 0);
	table_end(f);
}

/* shares_register registers size bytes for pipe of user uid, left
 * opening (the backend holds it): returns the immediate result. */
static int shares_register(struct fixture *f, uint32_t pipe, uint64_t uid,
                           uint64_t size, char *msg)
{
	msg[0] = '\0';
	return fprep__regions_register(&f->t, regions_shm_name, size, pipe, uid,
	                               NULL, NULL, msg, FPREP_MESSAGE_SIZE);
}

/* shares_cuda registers a CUDA region for pipe of user uid. */
static int shares_cuda(struct fixture *f, uint32_t pipe, uint64_t uid,
                       char *msg)
{
	fprep_register_request req;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER_CUDA;
	req.region_size = 64;
	msg[0] = '\0';
	return fprep__regions_register_cuda(&f->t, &req, pipe, uid, NULL, NULL,
	                                    msg, FPREP_MESSAGE_SIZE);
}

/* The shares of the budgets (config.h): one connection's and one user's
 * bytes, one user's CUDA regions; another user keeps what is left; a
 * change to the shares applies to the next registration. */
static void shares(void **state)
{
	struct fixture *f = *state;
	fprep__shares sh = {.shm_bytes_per_conn = 3000,
	                    .shm_bytes_per_uid = 5000,
	                    .cuda_per_uid = 1};
	char msg[FPREP_MESSAGE_SIZE];

	table_init(f, 16, 100000);
	fprep__regions_set_cuda(&f->t, 1, 16);
	fprep__regions_set_shares(&f->t, &sh);
	f->fb->hold_regions =
	        1; /* every registration stays opening, and counts */

	/* Connection 1 of uid 1000: 2000, then 1001 more is past its 3000. */
	assert_int_equal(shares_register(f, 1, 1000, 2000, msg), 0);
	assert_int_equal(shares_register(f, 1, 1000, 1001, msg), FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-shm-bytes-per-conn 3000"));
	/* Connection 2 of the same user brings it to 5000: a third
	 * connection, holding nothing, is refused its first byte. */
	assert_int_equal(shares_register(f, 2, 1000, 3000, msg), 0);
	assert_int_equal(shares_register(f, 3, 1000, 1, msg), FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-shm-bytes-per-uid 5000"));
	assert_non_null(strstr(msg, "uid 1000"));
	/* Another user is not held to uid 1000's use. */
	assert_int_equal(shares_register(f, 4, 2000, 3000, msg), 0);

	/* CUDA regions: one a user, whichever connection asks. */
	assert_int_equal(shares_cuda(f, 1, 1000, msg), 0);
	assert_int_equal(shares_cuda(f, 2, 1000, msg), FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-cuda-regions-per-uid 1"));
	assert_int_equal(shares_cuda(f, 4, 2000, msg), 0);

	/* A share changed (SIGHUP) applies to the next registration. */
	sh.shm_bytes_per_uid = 0;
	assert_int_equal(shares_register(f, 3, 1000, 1, msg), 0);
	f->fb->hold_regions = 0;
	table_end(f);
}

#define REGIONS_TEST(f)                                                        \
	cmocka_unit_test_setup_teardown(f, regions_setup, regions_teardown)

CMOCKA_MAIN({
        REGIONS_TEST(limits),
        REGIONS_TEST(limit_zero),
        REGIONS_TEST(add_find),
        REGIONS_TEST(ids_wrap),
        REGIONS_TEST(ids_random_start),
        REGIONS_TEST(unregister_one),
        REGIONS_TEST(remove_pipe),
        REGIONS_TEST(use_unuse),
        REGIONS_TEST(close_releases_all),
        REGIONS_TEST(pipe_closes_while_opening),
        REGIONS_TEST(shutdown_while_queued),
        REGIONS_TEST(cpu_backend),
        REGIONS_TEST(cuda_regions),
        REGIONS_TEST(shares),
})
