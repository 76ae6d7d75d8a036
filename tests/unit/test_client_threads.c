/*
 * test_client_threads.c: one client shared by threads, against a real
 * frameprepd on the CPU backend. THREADS threads make REQUESTS blocking
 * calls each on one client at once, every thread cycling through the
 * frames in its own order: inline frames (staged through shared memory),
 * frames in the thread's own region with the reply in shared memory
 * (shm_reply; the client's doorbell on, so some go through it), INFO, and
 * region open/close. Each tensor is compared with the one the daemon gave
 * for the same frame beforehand on a client of its own (staging off, one
 * thread): none may be another frame's.
 *
 * Usage: test_client_threads FRAMEPREPD
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define THREADS  8
#define REQUESTS 500
#define FRAMES   8

/* The frames: sizes differ, so a tensor of another frame differs too. */
static const uint32_t frame_w[FRAMES] = {320, 256, 300, 200,
                                         352, 240, 288, 160};
static const uint32_t frame_h[FRAMES] = {240, 192, 200, 150,
                                         288, 180, 216, 120};

static uint8_t *frames[FRAMES];
static fprep_result expected[FRAMES];
static fprep_client *shared;
static _Atomic int wrong, failed, done_calls, via_region;

static void request_init(fprep_request *req, unsigned f)
{
	fprep_request_init(req, FPREP_PIX_BGR8, frame_w[f], frame_h[f]);
	req->out_width = 160;
	req->out_height = 128;
}

static size_t frame_bytes(unsigned f)
{
	return (size_t)frame_w[f] * frame_h[f] * 3;
}

/* check_tensor compares a tensor with frame f's expected one. */
static void check_tensor(unsigned t, unsigned i, unsigned f, const void *p,
                         size_t n)
{
	if (n != expected[f].payload_size ||
	    memcmp(p, expected[f].payload, n) != 0) {
		wrong++;
		fprintf(stderr,
		        "FAIL thread %u request %u: frame %u's tensor "
		        "differs (%zu bytes, expected %zu)\n",
		        t, i, f, n, expected[f].payload_size);
	}
}

static void fail(unsigned t, unsigned i, const char *what, int err,
                 const fprep_result *r)
{
	failed++;
	fprintf(stderr, "FAIL thread %u request %u (%s): %s: %s\n", t, i, what,
	        fprep_err_name(err),
	        err ? fprep_client_last_error(shared) : r->header.message);
}

/* inline_call sends frame f inline (staged) and checks the tensor. */
static void inline_call(unsigned t, unsigned i, unsigned f)
{
	fprep_request req;
	fprep_result r;
	int err;

	request_init(&req, f);
	err = fprep_client_request(shared, &req, frames[f], &r);
	if (err != 0 || r.header.status != FPREP_OK) {
		fail(t, i, "inline", err, &r);
	} else {
		check_tensor(t, i, f, r.payload, r.payload_size);
		done_calls++;
	}
	if (err == 0)
		fprep_result_fini(&r);
}

/* region_call sends frame f from region reg, its tensor and reply
 * header back into reg (shm_reply), and checks the tensor there. */
static void region_call(unsigned t, unsigned i, unsigned f, fprep_region *reg)
{
	size_t cap = 0, tensor = expected[f].payload_size;
	uint8_t *base = fprep_region_base(reg);
	size_t frame_at = 1u << 20;
	fprep_request req;
	fprep_result r;
	int err;

	cap = ((tensor + 7) & ~(size_t)7) + FPREP_REPLY_HEADER_SIZE;
	memset(base, 0xee, tensor);
	memcpy(base + frame_at, frames[f], frame_bytes(f));
	request_init(&req, f);
	fprep_request_set_regions(&req, reg, frame_at, reg, 0, cap);
	req.shm_reply = 1;
	err = fprep_client_request(shared, &req, NULL, &r);
	if (err != 0 || r.header.status != FPREP_OK) {
		fail(t, i, "region", err, &r);
	} else {
		check_tensor(t, i, f, base, (size_t)r.header.tensor_size);
		done_calls++;
		via_region++;
	}
	if (err == 0)
		fprep_result_fini(&r);
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	fprep_region *reg = NULL, *extra;
	fprep_result r;
	int err;

	err = fprep_region_open(&reg, shared, 2u << 20);
	if (err != 0) {
		fail(t, 0, "region open", err, NULL);
		return NULL;
	}
	for (unsigned i = 0; i < REQUESTS; i++) {
		/* Each thread its own order through the frames. */
		unsigned f = (i * (2 * t + 1) + t) % FRAMES;

		if (i % 50 == 25) {
			err = fprep_client_info(shared, &r);
			if (err != 0 || r.header.status != FPREP_OK ||
			    strstr(r.payload, "max_width: ") == NULL)
				fail(t, i, "info", err, &r);
			if (err == 0)
				fprep_result_fini(&r);
		}
		if (i % 100 == 50) {
			err = fprep_region_open(&extra, shared, 1u << 16);
			if (err != 0)
				fail(t, i, "extra region open", err, NULL);
			else
				fprep_region_close(extra);
		}
		if (i % 3 == 2)
			region_call(t, i, f, reg);
		else
			inline_call(t, i, f);
	}
	fprep_region_close(reg);
	return NULL;
}

int main(int argc, char **argv)
{
	char sock[64], ipc[96];
	char *extra[] = {"--max-regions", "64", NULL};
	pthread_t th[THREADS];
	fprep_client *ref;
	fprep_request req;
	struct timespec t0, t1;
	pid_t pid;
	int err;

	daemon_args(argc, argv, 2, "FRAMEPREPD");
	daemon_socket(sock, sizeof(sock), ipc, sizeof(ipc), "threads");
	pid = daemon_start(argv[1], "cpu", ipc, extra);
	ref = daemon_client(ipc);
	fprep_client_set_staging(ref, 0);
	for (unsigned f = 0; f < FRAMES; f++) {
		frames[f] = malloc(frame_bytes(f));
		REQUIRE(frames[f] != NULL);
		for (size_t k = 0; k < frame_bytes(f); k++)
			frames[f][k] = (uint8_t)((k * 2654435761u + f) >> 11);
		request_init(&req, f);
		err = fprep_client_request(ref, &req, frames[f], &expected[f]);
		REQUIRE(err == 0 && expected[f].header.status == FPREP_OK);
	}
	for (unsigned f = 1; f < FRAMES; f++)
		REQUIRE(expected[f].payload_size != expected[0].payload_size ||
		        memcmp(expected[f].payload, expected[0].payload,
		               expected[0].payload_size) != 0);

	shared = daemon_client(ipc);
	err = fprep_client_doorbell(shared, 1);
	CHECK(err == 0, "doorbell: %s", fprep_client_last_error(shared));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned t = 0; t < THREADS; t++)
		REQUIRE(pthread_create(&th[t], NULL, worker,
		                       (void *)(uintptr_t)t) == 0);
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%d threads x %d requests on one client: %d answered (%d "
	       "through a region), %d wrong, %d failed, %.0f ms\n",
	       THREADS, REQUESTS, (int)done_calls, (int)via_region, (int)wrong,
	       (int)failed,
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	CHECK(wrong == 0, "%d results were another frame's tensor", (int)wrong);
	CHECK(failed == 0, "%d calls failed", (int)failed);
	CHECK(done_calls == THREADS * REQUESTS, "%d of %d answered",
	      (int)done_calls, THREADS * REQUESTS);

	fprep_client_close(shared);
	for (unsigned f = 0; f < FRAMES; f++) {
		fprep_result_fini(&expected[f]);
		free(frames[f]);
	}
	fprep_client_close(ref);
	CHECK(daemon_stop(pid) == 0, "the daemon did not stop cleanly");
	return check_failures ? 1 : 0;
}
