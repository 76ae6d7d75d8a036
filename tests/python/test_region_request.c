/*
 * test_region_request.c: the C functions under the Python ring
 * (fprep_region_doorbell, fprep_region_request, fprep_region_unregister),
 * against a real frameprepd on the CPU backend that polls its doorbells.
 *
 * A region laid out as the ring lays it out (per slot a tensor with the
 * reply header after it, then the frame; a doorbell area of one entry per
 * slot after the slots): four threads, one per slot, each send 200
 * frames through their entry and get their own frame's tensor (equal to
 * the inline reply) every time; the doorbell's arguments are checked; an
 * unregistered region is refused before anything is sent while its
 * memory stays readable; a request waiting in an entry, and one waiting
 * for its reply in the slot (no doorbell), end with FPREP_ETRANSPORT soon
 * after the daemon is killed, not at the timeout; and after the restart
 * the region is refused with FPREP_EREGION, nothing sent, and a new one
 * serves.
 *
 * Usage: test_region_request FRAMEPREPD
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define SLOTS        4
#define W            64
#define H            48
#define FRAME_BYTES  (W * H * 3)
#define OUT          32
#define TENSOR_BYTES (3 * OUT * OUT * 4)
#define PAGE         4096
#define ROUNDS       200

/* The ring's layout. */
#define REPLY_OFF    ((TENSOR_BYTES + 7) / 8 * 8)
#define OUT_CAPACITY (REPLY_OFF + FPREP_REPLY_HEADER_SIZE)
#define FRAME_OFF    ((OUT_CAPACITY + PAGE - 1) / PAGE * PAGE)
#define SLOT_BYTES   (FRAME_OFF + (FRAME_BYTES + PAGE - 1) / PAGE * PAGE)
#define DB_OFF       (SLOTS * SLOT_BYTES)
#define REGION_BYTES (DB_OFF + PAGE)

static uint8_t frames[SLOTS][FRAME_BYTES];
static uint8_t want[SLOTS][TENSOR_BYTES];

struct worker {
	fprep_region *r;
	unsigned k;
	int wrong, failed;
};

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void request_init(fprep_request *req)
{
	fprep_request_init(req, FPREP_PIX_BGR8, W, H);
	req->out_width = req->out_height = OUT;
	req->shm_reply = 1;
}

/* slot_request sends slot k's frame (already there) through entry k. */
static int slot_request(fprep_region *r, unsigned k, fprep_result *res)
{
	fprep_request req;

	request_init(&req);
	fprep_request_set_regions(&req, r, (uint64_t)k * SLOT_BYTES + FRAME_OFF,
	                          r, (uint64_t)k * SLOT_BYTES, OUT_CAPACITY);
	return fprep_region_request(r, k, &req, res);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t *base = fprep_region_base(w->r);
	uint8_t *slot = base + (size_t)w->k * SLOT_BYTES;
	fprep_result res;

	for (int i = 0; i < ROUNDS; i++) {
		unsigned f = (w->k + (unsigned)i) % SLOTS;

		memcpy(slot + FRAME_OFF, frames[f], FRAME_BYTES);
		if (slot_request(w->r, w->k, &res) != 0 ||
		    res.header.status != FPREP_OK) {
			w->failed++;
			continue;
		}
		if (res.header.output_loc != FPREP_LOC_SHM ||
		    memcmp(slot, want[f], TENSOR_BYTES) != 0)
			w->wrong++;
		fprep_result_fini(&res);
	}
	return NULL;
}

struct waiter {
	fprep_client *c;
	fprep_region *r;
	unsigned k;
	int err;
	double ms;
	char why[256];
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	fprep_result res;
	double t0 = now_ms();

	w->err = slot_request(w->r, w->k, &res);
	w->ms = now_ms() - t0;
	snprintf(w->why, sizeof(w->why), "%s", fprep_client_last_error(w->c));
	if (w->err == 0)
		fprep_result_fini(&res);
	return NULL;
}

int main(int argc, char **argv)
{
	char url[128];
	char *extra[] = {"--spin-us", "100000", "--workers", "2", NULL};
	struct worker workers[SLOTS];
	pthread_t th[SLOTS];
	fprep_client *c;
	fprep_region *r, *plain;
	fprep_request req;
	fprep_result res;
	pid_t pid;

	daemon_args(argc, argv, 2, "FRAMEPREPD");
	snprintf(url, sizeof(url), "ipc:///tmp/fprep-region-req-%ld.sock",
	         (long)getpid());
	pid = daemon_start(argv[1], "cpu", url, extra);
	REQUIRE(fprep_client_open(&c, url, 20000) == 0);

	/* The reference tensors, inline. */
	fprep_client_set_staging(c, 0);
	for (unsigned f = 0; f < SLOTS; f++) {
		for (size_t i = 0; i < FRAME_BYTES; i++)
			frames[f][i] =
			        (uint8_t)((i * 2654435761u + f * 77) >> 11);
		request_init(&req);
		req.shm_reply = 0;
		REQUIRE(fprep_client_request(c, &req, frames[f], &res) == 0);
		REQUIRE(res.header.status == FPREP_OK &&
		        res.payload_size == TENSOR_BYTES);
		memcpy(want[f], res.payload, TENSOR_BYTES);
		fprep_result_fini(&res);
	}

	/* The doorbell's arguments. */
	REQUIRE(fprep_region_open(&r, c, REGION_BYTES) == 0);
	CHECK(fprep_region_doorbell(r, DB_OFF + 8, SLOTS) == FPREP_EINVAL,
	      "an offset not a multiple of 64 is refused");
	CHECK(fprep_region_doorbell(r, DB_OFF, 0) == FPREP_EINVAL,
	      "no entries is refused");
	CHECK(fprep_region_doorbell(r, REGION_BYTES - 64, SLOTS) ==
	              FPREP_EINVAL,
	      "an area past the region is refused");
	REQUIRE(fprep_region_doorbell(r, DB_OFF, SLOTS) == 0);

	/* Four threads, one entry each. */
	for (unsigned k = 0; k < SLOTS; k++) {
		workers[k] = (struct worker){r, k, 0, 0};
		REQUIRE(pthread_create(&th[k], NULL, worker_main,
		                       &workers[k]) == 0);
	}
	for (unsigned k = 0; k < SLOTS; k++) {
		pthread_join(th[k], NULL);
		CHECK(workers[k].failed == 0 && workers[k].wrong == 0,
		      "entry %u: %d failed, %d wrong of %d", k,
		      workers[k].failed, workers[k].wrong, ROUNDS);
	}

	/* Unregistered: refused, nothing sent, the memory still readable. */
	memcpy((uint8_t *)fprep_region_base(r) + FRAME_OFF, frames[0],
	       FRAME_BYTES);
	REQUIRE(slot_request(r, 0, &res) == 0 && res.header.status == 0);
	fprep_result_fini(&res);
	fprep_region_unregister(r);
	CHECK(slot_request(r, 0, &res) == FPREP_EREGION,
	      "a request in an unregistered region is refused");
	CHECK(memcmp(fprep_region_base(r), want[0], TENSOR_BYTES) == 0,
	      "the tensor stays readable after the region was unregistered");
	fprep_region_close(r);

	/* The daemon dies while requests wait: one in its entry, one for
	 * its reply in the slot (a region without a doorbell). */
	REQUIRE(fprep_region_open(&r, c, REGION_BYTES) == 0);
	REQUIRE(fprep_region_doorbell(r, DB_OFF, SLOTS) == 0);
	REQUIRE(fprep_region_open(&plain, c, REGION_BYTES) == 0);
	memcpy((uint8_t *)fprep_region_base(r) + FRAME_OFF, frames[1],
	       FRAME_BYTES);
	memcpy((uint8_t *)fprep_region_base(plain) + FRAME_OFF, frames[2],
	       FRAME_BYTES);
	REQUIRE(daemon_pause(pid) == 0);
	struct waiter in_entry = {c, r, 0, 0, 0, ""},
	              in_slot = {c, plain, 0, 0, 0, ""};
	pthread_t a, b;
	REQUIRE(pthread_create(&a, NULL, waiter_main, &in_entry) == 0);
	REQUIRE(pthread_create(&b, NULL, waiter_main, &in_slot) == 0);
	daemon_sleep_ms(300);
	double killed = now_ms();
	kill(pid, SIGKILL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	waitpid(pid, NULL, 0);
	double late = now_ms() - killed;
	CHECK(in_entry.err == FPREP_ETRANSPORT &&
	              in_slot.err == FPREP_ETRANSPORT,
	      "the waits end with ETRANSPORT (%s: %s; %s: %s)",
	      fprep_err_name(in_entry.err), in_entry.why,
	      fprep_err_name(in_slot.err), in_slot.why);
	CHECK(late < 2000,
	      "the waits ended %.0f ms after the kill, not at "
	      "the 20 s timeout",
	      late);
	printf("kill noticed in %.0f ms (entry wait %.0f ms, slot wait %.0f "
	       "ms)\n",
	       late, in_entry.ms, in_slot.ms);

	/* Restarted: the old regions are refused before anything is sent;
	 * a new one serves. */
	pid = daemon_start(argv[1], "cpu", url, extra);
	for (int i = 0; i < 200; i++) { /* the client redials */
		if (fprep_client_info(c, &res) == 0) {
			fprep_result_fini(&res);
			break;
		}
		daemon_sleep_ms(25);
	}
	CHECK(slot_request(r, 0, &res) == FPREP_EREGION,
	      "a region of the daemon before is refused");
	fprep_region_close(plain);
	fprep_region_close(r);
	REQUIRE(fprep_region_open(&r, c, REGION_BYTES) == 0);
	REQUIRE(fprep_region_doorbell(r, DB_OFF, SLOTS) == 0);
	memcpy((uint8_t *)fprep_region_base(r) + 2 * SLOT_BYTES + FRAME_OFF,
	       frames[3], FRAME_BYTES);
	REQUIRE(slot_request(r, 2, &res) == 0);
	CHECK(res.header.status == 0 &&
	              memcmp((uint8_t *)fprep_region_base(r) + 2 * SLOT_BYTES,
	                     want[3], TENSOR_BYTES) == 0,
	      "a new region serves after the restart");
	fprep_result_fini(&res);
	fprep_region_close(r);
	fprep_client_close(c);
	CHECK(daemon_stop(pid) == 0, "the daemon stops cleanly");
	return check_failures ? 1 : 0;
}
