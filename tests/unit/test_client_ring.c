/*
 * test_client_ring.c: a ring of slots in one region (fprep_ring_*,
 * src/lib/client_ring.c) against a real CPU daemon: leases (a stale
 * ticket's release and hold change nothing, cancel frees only a reserved
 * slot, the holder that holds every slot is told at once), the send of a
 * reserved frame and of a crop of it, the in-flight gate, and the
 * re-registration after the daemon restarted: a frame written in the old
 * region is sent from the new one, and the tensor equals the inline one;
 * threads that all find the old registration stale register once; a
 * ring whose client was closed is forgotten without a word to it.
 *
 * Usage: test_client_ring FRAMEPREPD
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon_util.h"
#include "frameprep/frameprep.h"
#include "frameprep/ring.h"

#define SLOTS 3
#define W     64
#define H     48

static const char *daemon_exe;
static char sock[64], url[96];

struct fixture {
	pid_t pid;
	fprep_client *c;
	fprep_gate *gate;
	fprep_ring *ring;
	fprep_request req;
	uint64_t tensor;
};

static int setup(void **state)
{
	static struct fixture f;
	fprep_ring_config cfg = {0};
	uint32_t shape[4];

	memset(&f, 0, sizeof(f));
	unlink(sock);
	f.pid = daemon_start(daemon_exe, "cpu", url, NULL);
	f.c = daemon_client(url);
	fprep_request_init(&f.req, FPREP_PIX_BGR8, W, H);
	f.req.out_width = 32;
	f.req.out_height = 32;
	assert_int_equal(fprep_tensor_shape(&f.req, shape, &f.tensor), 0);
	assert_int_equal(fprep_gate_alloc(&f.gate, 2), 0);
	cfg.slots = SLOTS;
	cfg.frame_bytes = f.req.input_size;
	cfg.tensor_bytes = f.tensor;
	cfg.doorbell = 1;
	cfg.gate = f.gate;
	assert_int_equal(fprep_ring_open(&f.ring, f.c, &cfg), 0);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fprep_ring_close(f->ring);
	fprep_gate_free(f->gate);
	fprep_client_close(f->c);
	assert_int_equal(daemon_stop(f->pid), 0);
	return 0;
}

/* fill writes a frame of pattern seed into px (W x H BGR8). */
static void fill(uint8_t *px, int seed)
{
	for (size_t i = 0; i < (size_t)W * H * 3; i++)
		px[i] = (uint8_t)(i * 7 + (size_t)seed * 31);
}

/* expect_tensor checks that the lease's tensor equals the inline reply
 * for the frame of seed. */
static void expect_tensor(struct fixture *f, const fprep_ring_lease *l,
                          int seed)
{
	static uint8_t px[W * H * 3];
	fprep_request req = f->req;
	fprep_result ref;

	fill(px, seed);
	assert_int_equal(fprep_client_request(f->c, &req, px, &ref), 0);
	assert_int_equal(ref.header.status, 0);
	assert_int_equal(ref.payload_size, f->tensor);
	assert_memory_equal(fprep_ring_lease_tensor(f->ring, l), ref.payload,
	                    f->tensor);
	fprep_result_fini(&ref);
}

/* send_reserved reserves a slot, writes the frame of seed there, sends
 * it and holds the result; *l is its lease. */
static void send_reserved(struct fixture *f, fprep_ring_lease *l, int seed)
{
	fprep_request req = f->req;
	fprep_result res;

	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_RESERVED, 1, 1, 1000, l),
	        0);
	fill(fprep_ring_lease_frame(f->ring, l), seed);
	assert_int_equal(fprep_ring_claim(f->ring, l), 1);
	assert_int_equal(fprep_ring_send(f->ring, l, &req, 0, &res), 0);
	assert_int_equal(res.header.status, 0);
	fprep_result_fini(&res);
	assert_int_equal(fprep_ring_hold(f->ring, l, 1), 1);
}

static void ring_leases(void **state)
{
	struct fixture *f = *state;
	fprep_ring_lease a, b, c, d;
	fprep_request req;
	fprep_result res;
	uint8_t st[SLOTS];

	/* Reserved, cancelled: a second cancel and a release of that turn
	 * change nothing. */
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_RESERVED, 1, 1, 0, &a), 0);
	assert_int_equal(fprep_ring_cancel(f->ring, &a), 1);
	assert_int_equal(fprep_ring_cancel(f->ring, &a), 0);
	assert_int_equal(fprep_ring_release(f->ring, &a), 0);
	/* A reserved slot is not sent before it is claimed, a cancelled one
	 * not at all. */
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_RESERVED, 1, 1, 0, &a), 0);
	req = f->req;
	assert_int_equal(fprep_ring_send(f->ring, &a, &req, 0, &res),
	                 FPREP_EINVAL);
	assert_int_equal(fprep_ring_cancel(f->ring, &a), 1);
	req = f->req;
	assert_int_equal(fprep_ring_send(f->ring, &a, &req, 0, &res),
	                 FPREP_EINVAL);
	/* A taken slot is not cancelled; its stale lease neither steps nor
	 * frees the next turn. */
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_TAKEN, 1, 1, 0, &b), 0);
	assert_int_equal(fprep_ring_cancel(f->ring, &b), 0);
	assert_int_equal(fprep_ring_claim(f->ring, &b), 0);
	assert_int_equal(fprep_ring_release(f->ring, &b), 1);
	/* Every slot held by holder 1, none in flight: FPREP_EBUSY at once;
	 * another holder waits and times out. */
	send_reserved(f, &a, 1);
	send_reserved(f, &b, 2);
	send_reserved(f, &c, 3);
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_TAKEN, 1, 1, 5000, &d),
	        FPREP_EBUSY);
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_TAKEN, 2, 1, 10, &d),
	        FPREP_ETIMEDOUT);
	fprep_slots_states(fprep_ring_table(f->ring), st, NULL);
	for (int k = 0; k < SLOTS; k++)
		assert_int_equal(st[k], FPREP_SLOT_HELD);
	expect_tensor(f, &a, 1);
	expect_tensor(f, &b, 2);
	expect_tensor(f, &c, 3);
	assert_int_equal(fprep_ring_release(f->ring, &b), 1);
	/* The slot freed is handed out again with a new ticket: the old
	 * lease's release is stale. */
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_TAKEN, 1, 1, 0, &d), 0);
	assert_int_equal(d.slot, b.slot);
	assert_true(d.ticket != b.ticket);
	assert_int_equal(fprep_ring_release(f->ring, &b), 0);
	assert_int_equal(fprep_ring_hold(f->ring, &b, 1), 0);
	assert_int_equal(fprep_ring_release(f->ring, &d), 1);
	assert_int_equal(fprep_ring_release(f->ring, &a), 1);
	assert_int_equal(fprep_ring_release(f->ring, &c), 1);
	/* Every token given back by the sends. */
	assert_int_equal(fprep_gate_tokens(f->gate), 2);
}

static void ring_crop_and_bounds(void **state)
{
	struct fixture *f = *state;
	fprep_request req = f->req;
	fprep_ring_lease l;
	fprep_result res;
	uint8_t *frame;

	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_TAKEN, 1, 1, 0, &l), 0);
	/* A frame past the slot's frame area is refused before anything
	 * is sent. */
	assert_int_equal(fprep_ring_send(f->ring, &l, &req, 1, &res),
	                 FPREP_EINVAL);
	/* The lower half of the frame, at an offset into the slot. */
	frame = fprep_ring_lease_frame(f->ring, &l);
	fill(frame, 9);
	req.src_height = H / 2;
	req.input_size = (uint64_t)W * 3 * (H / 2);
	assert_int_equal(fprep_ring_send(f->ring, &l, &req,
	                                 (uint64_t)W * 3 * (H / 2), &res),
	                 0);
	assert_int_equal(res.header.status, 0);
	assert_int_equal(res.header.shape[2], 32);
	fprep_result_fini(&res);
	assert_int_equal(fprep_ring_release(f->ring, &l), 1);
}

static void ring_reregisters(void **state)
{
	struct fixture *f = *state;
	fprep_ring_lease old, l;
	fprep_request req = f->req;
	fprep_result res;

	send_reserved(f, &l, 4);
	assert_int_equal(fprep_ring_epoch(f->ring), 0);
	assert_int_equal(fprep_ring_release(f->ring, &l), 1);
	/* A frame written in the region before the restart. */
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_RESERVED, 1, 1, 0, &old),
	        0);
	fill(fprep_ring_lease_frame(f->ring, &old), 5);
	assert_int_equal(daemon_stop(f->pid), 0);
	unlink(sock);
	f->pid = daemon_start(daemon_exe, "cpu", url, NULL);
	assert_int_equal(fprep_ring_claim(f->ring, &old), 1);
	assert_int_equal(fprep_ring_send(f->ring, &old, &req, 0, &res), 0);
	assert_int_equal(res.header.status, 0);
	fprep_result_fini(&res);
	/* Registered once more, and the frame went with the request. */
	assert_int_equal(fprep_ring_epoch(f->ring), 1);
	assert_int_equal(old.epoch, 1);
	expect_tensor(f, &old, 5);
	assert_int_equal(fprep_ring_release(f->ring, &old), 1);
	/* Later sends go to the new region at once. */
	send_reserved(f, &l, 6);
	assert_int_equal(fprep_ring_epoch(f->ring), 1);
	expect_tensor(f, &l, 6);
	assert_int_equal(fprep_ring_release(f->ring, &l), 1);
	/* Stopped: nothing is handed out or sent. */
	fprep_ring_unregister(f->ring);
	assert_int_equal(
	        fprep_ring_take(f->ring, FPREP_SLOT_TAKEN, 1, 1, 0, &l),
	        FPREP_ECLOSED);
}

struct sender {
	struct fixture *f;
	fprep_ring_lease lease;
	int err, status;
};

static void *send_thread(void *arg)
{
	struct sender *t = arg;
	fprep_request req = t->f->req;
	fprep_result res;

	t->err = fprep_ring_send(t->f->ring, &t->lease, &req, 0, &res);
	if (t->err == 0) {
		t->status = (int)res.header.status;
		fprep_result_fini(&res);
	}
	return NULL;
}

static void ring_reregisters_once(void **state)
{
	struct fixture *f = *state;
	struct sender t[SLOTS];
	pthread_t th[SLOTS];

	/* Every slot's frame written in the region before the restart,
	 * then sent by threads at once (two gate tokens for three). */
	for (int i = 0; i < SLOTS; i++) {
		t[i].f = f;
		assert_int_equal(fprep_ring_take(f->ring, FPREP_SLOT_RESERVED,
		                                 1, 1, 0, &t[i].lease),
		                 0);
		fill(fprep_ring_lease_frame(f->ring, &t[i].lease), 10 + i);
		assert_int_equal(fprep_ring_claim(f->ring, &t[i].lease), 1);
	}
	assert_int_equal(daemon_stop(f->pid), 0);
	unlink(sock);
	f->pid = daemon_start(daemon_exe, "cpu", url, NULL);
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(
		        pthread_create(&th[i], NULL, send_thread, &t[i]), 0);
	for (int i = 0; i < SLOTS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < SLOTS; i++) {
		assert_int_equal(t[i].err, 0);
		assert_int_equal(t[i].status, 0);
		assert_int_equal(t[i].lease.epoch, 1);
		expect_tensor(f, &t[i].lease, 10 + i);
		assert_int_equal(fprep_ring_release(f->ring, &t[i].lease), 1);
	}
	assert_int_equal(fprep_ring_epoch(f->ring), 1);
	assert_int_equal(fprep_gate_tokens(f->gate), 2);
}

static void ring_open_invalid(void **state)
{
	struct fixture *f = *state;
	fprep_ring_config cfg = {0};
	fprep_ring *r;

	cfg.frame_bytes = 1;
	cfg.tensor_bytes = 1;
	assert_int_equal(fprep_ring_open(&r, f->c, &cfg), FPREP_EINVAL);
	assert_null(r);
	cfg.slots = 1;
	cfg.tensor_bytes = SIZE_MAX;
	assert_int_equal(fprep_ring_open(&r, f->c, &cfg), FPREP_EINVAL);
}

/* ring_forget: a ring outlives its client's close (the connection's end
 * dropped the daemon's side): its memory stays readable, and
 * fprep_ring_forget unmaps it without touching the client. */
static void ring_forget(void **state)
{
	struct fixture *f = *state;
	fprep_ring_config cfg = {0};
	fprep_ring_lease l;
	fprep_client *c = daemon_client(url);
	fprep_ring *r;
	uint8_t *px;

	cfg.slots = 2;
	cfg.frame_bytes = f->req.input_size;
	cfg.tensor_bytes = f->tensor;
	cfg.doorbell = 1;
	assert_int_equal(fprep_ring_open(&r, c, &cfg), 0);
	assert_int_equal(fprep_ring_take(r, FPREP_SLOT_RESERVED, 1, 1, 0, &l),
	                 0);
	fprep_client_close(c);
	px = fprep_ring_lease_frame(r, &l);
	fill(px, 3);
	assert_int_equal(px[1], (uint8_t)(7 + 3 * 31));
	fprep_ring_forget(r);
	fprep_ring_forget(NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(ring_leases, setup, teardown),
	        cmocka_unit_test_setup_teardown(ring_crop_and_bounds, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(ring_reregisters, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(ring_reregisters_once, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(ring_open_invalid, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(ring_forget, setup, teardown),
	};

	daemon_args(argc, argv, 2, "FRAMEPREPD");
	daemon_exe = argv[1];
	daemon_socket(sock, sizeof(sock), url, sizeof(url), "ring");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
