/*
 * test_client_stage_doorbell.c: the simple call (fprep_client_request with
 * an inline frame, staged through shared memory on an ipc:// daemon) goes
 * through the client's doorbell, which the first staged call sets up,
 * against a real frameprepd on the CPU backend that polls (--spin-us):
 *
 * - N staged calls raise the daemon's doorbell_requests by N, each tensor
 *   equal to the inline one; a client turned off with
 *   fprep_client_doorbell(c, 0) before its first call raises it by none;
 * - several threads making their first call at once on one client set up
 *   one doorbell (INFO doorbells: 1), all tensors right; a thread that
 *   turns the doorbell off and on while others call harms none of them;
 * - a doorbell request that the daemon took and did not answer within
 *   the client's timeout (stopped with SIGSTOP once it took it) gives the
 *   doorbell up: the calls after it succeed through nng;
 * - after kill -9 + restart on the same socket the calls give the right
 *   tensors and go through a new doorbell (the new daemon's counter
 *   rises by N);
 * - on a daemon with --max-doorbells 0 the calls succeed through nng, and
 *   the client asks for a doorbell once (INFO failed rises by one).
 *
 * Usage: test_client_stage_doorbell FRAMEPREPD
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define W       160
#define H       120
#define N       20
#define THREADS 4
#define CALLS   40 /* per thread */
#define TOGGLES 40
#define BIG_W   3840
#define BIG_H   2160
/* Every client's timeout. One call is meant to time out (the daemon is
 * stopped, so it does whatever the value); the others must not: 1 s was
 * too short for a small frame beside stress-ng on 2 cores. */
#define TIMEOUT_MS 5000

static uint8_t frame[W * H * 3];
static fprep_result ref; /* the inline tensor of frame */

static void request_init(fprep_request *req)
{
	fprep_request_init(req, FPREP_PIX_BGR8, W, H);
	req->out_width = 64;
	req->out_height = 48;
}

/* info_u64 reads INFO's key as a number; UINT64_MAX when missing. */
static uint64_t info_u64(fprep_client *c, const char *key)
{
	char buf[64];

	if (daemon_info_value(c, key, buf, sizeof(buf)) != 0)
		return UINT64_MAX;
	return strtoull(buf, NULL, 10);
}

/* call makes one simple call on c and checks its tensor against ref;
 * returns the error or status. */
static int call(fprep_client *c, const char *what)
{
	fprep_request req;
	fprep_result r;
	int err;

	request_init(&req);
	err = fprep_client_request(c, &req, frame, &r);
	if (err != 0)
		return err;
	err = (int)r.header.status;
	CHECK(err == 0, "%s: status %s: %s", what, fprep_err_name(err),
	      r.header.message);
	CHECK(err != 0 || (r.payload_size == ref.payload_size &&
	                   memcmp(r.payload, ref.payload, r.payload_size) == 0),
	      "%s: the tensor differs from the inline one", what);
	fprep_result_fini(&r);
	return err;
}

/* calls makes n simple calls on c, all of which must succeed. */
static void calls(fprep_client *c, int n, const char *what)
{
	for (int i = 0; i < n; i++) {
		int err = call(c, what);

		CHECK(err == 0, "%s: call %d: %s: %s", what, i,
		      fprep_err_name(err), fprep_client_last_error(c));
	}
}

/* taken makes n simple calls on c (calls) and returns how many the
 * daemon took from doorbells meanwhile (INFO of the client info). */
static uint64_t taken(fprep_client *info, fprep_client *c, int n,
                      const char *what)
{
	uint64_t before = info_u64(info, "doorbell_requests");

	REQUIRE(before != UINT64_MAX);
	calls(c, n, what);
	return info_u64(info, "doorbell_requests") - before;
}

/* open_client opens a client of url with the test's timeout. */
static fprep_client *open_client(const char *url)
{
	fprep_client *c = NULL;

	REQUIRE(fprep_client_open(&c, url, TIMEOUT_MS) == 0);
	return c;
}

struct first_call {
	fprep_client *c;
	pthread_barrier_t *go;
};

static void *first_call_thread(void *arg)
{
	struct first_call *f = arg;

	pthread_barrier_wait(f->go);
	calls(f->c, CALLS, "threads");
	return NULL;
}

/* big_call: a large frame's call on a thread. */
struct big_call {
	fprep_client *c;
	uint8_t *frame;
	int err;
	atomic_int done;
};

static void *big_call_thread(void *arg)
{
	struct big_call *b = arg;
	fprep_request req;
	fprep_result r;

	fprep_request_init(&req, FPREP_PIX_BGR8, BIG_W, BIG_H);
	req.out_width = 1920;
	req.out_height = 1920;
	b->err = fprep_client_request(b->c, &req, b->frame, &r);
	if (b->err == 0)
		fprep_result_fini(&r);
	atomic_store(&b->done, 1);
	return NULL;
}

/* toggle_thread turns the doorbell off and on while the others call,
 * leaving it on. */
static void *toggle_thread(void *arg)
{
	struct first_call *f = arg;
	int err;

	pthread_barrier_wait(f->go);
	for (int i = 0; i < TOGGLES; i++) {
		daemon_sleep_ms(1);
		CHECK(fprep_client_doorbell(f->c, 0) == 0, "doorbell off");
		daemon_sleep_ms(1);
		err = fprep_client_doorbell(f->c, 1);
		CHECK(err == 0, "doorbell on: %s: %s", fprep_err_name(err),
		      fprep_client_last_error(f->c));
	}
	return NULL;
}

/* run_threads runs THREADS threads that start at once on c, each making
 * CALLS calls, or with toggle the last one toggle_thread. */
static void run_threads(fprep_client *c, int toggle)
{
	pthread_t t[THREADS];
	pthread_barrier_t go;
	struct first_call f[THREADS];

	pthread_barrier_init(&go, NULL, THREADS);
	for (int i = 0; i < THREADS; i++) {
		f[i].c = c;
		f[i].go = &go;
		REQUIRE(pthread_create(&t[i], NULL,
		                       toggle && i == THREADS - 1
		                               ? toggle_thread
		                               : first_call_thread,
		                       &f[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
}

int main(int argc, char **argv)
{
	char sock[64], ipc[96];
	char *polls[] = {"--spin-us", "100000", NULL};
	char *none[] = {"--spin-us", "100000", "--max-doorbells", "0", NULL};
	fprep_client *info, *c, *off;
	fprep_request req;
	uint64_t d0, d1, f0, f1, n;
	pid_t pid;
	int err;

	if (argc != 2) {
		fprintf(stderr,
		        "usage: test_client_stage_doorbell FRAMEPREPD\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)((i * 2654435761u) >> 13);
	daemon_socket(sock, sizeof(sock), ipc, sizeof(ipc), "stagedb");
	pid = daemon_start(argv[1], "cpu", ipc, polls);
	/* INFO and the inline reference: staging off, so no doorbell. */
	info = open_client(ipc);
	fprep_client_set_staging(info, 0);
	request_init(&req);
	REQUIRE(fprep_client_request(info, &req, frame, &ref) == 0 &&
	        ref.header.status == FPREP_OK);

	/* N calls: N doorbell requests. */
	c = open_client(ipc);
	d0 = info_u64(info, "doorbell_requests");
	REQUIRE(d0 != UINT64_MAX);
	calls(c, N, "default");
	d1 = info_u64(info, "doorbell_requests");
	CHECK(d1 - d0 == N,
	      "%d staged calls, %llu doorbell requests (expected as many)", N,
	      (unsigned long long)(d1 - d0));
	CHECK(info_u64(info, "doorbells") == 1, "doorbells %llu, not 1",
	      (unsigned long long)info_u64(info, "doorbells"));
	printf("%d staged calls: %llu taken from the doorbell\n", N,
	       (unsigned long long)(d1 - d0));

	/* Turned off before the first call: none. */
	off = open_client(ipc);
	CHECK(fprep_client_doorbell(off, 0) == 0, "doorbell off failed");
	n = taken(info, off, N, "doorbell off");
	CHECK(n == 0, "doorbell off: %llu doorbell requests",
	      (unsigned long long)n);
	CHECK(info_u64(info, "doorbells") == 1, "doorbell off: doorbells %llu",
	      (unsigned long long)info_u64(info, "doorbells"));
	fprep_client_close(off);
	fprep_client_close(c);

	/* Threads make their first call at once: one doorbell set up. */
	c = open_client(ipc);
	run_threads(c, 0);
	CHECK(info_u64(info, "doorbells") == 1,
	      "%d threads' first calls: doorbells %llu, not 1", THREADS,
	      (unsigned long long)info_u64(info, "doorbells"));
	n = taken(info, c, N, "after the threads");
	CHECK(n == N,
	      "after the threads: %llu of %d calls through the doorbell",
	      (unsigned long long)n, N);
	fprep_client_close(c);

	/* One thread turns the doorbell off and on while others call. */
	c = open_client(ipc);
	run_threads(c, 1);
	n = taken(info, c, N, "after the toggles");
	CHECK(n == N,
	      "after the toggles (on): %llu of %d calls through the doorbell",
	      (unsigned long long)n, N);
	fprep_client_close(c);

	/* A doorbell request that the daemon took and did not answer in
	 * time gives the doorbell up: the calls after it go through nng.
	 * A large frame (the daemon works on it a while) is sent on a
	 * thread; once INFO counts it taken from the doorbell, the daemon
	 * is stopped (SIGSTOP) until the call timed out. */
	c = open_client(ipc);
	n = taken(info, c, 2, "before the timeout");
	CHECK(n == 2,
	      "before the timeout: %llu of 2 calls through the doorbell",
	      (unsigned long long)n);
	{
		struct big_call b = {.c = c};
		pthread_t t;
		int stopped = 0;

		b.frame = calloc((size_t)BIG_W * BIG_H * 3, 1);
		REQUIRE(b.frame != NULL);
		for (int k = 0; k < 3 && !stopped; k++) {
			atomic_store(&b.done, 0);
			d0 = info_u64(info, "doorbell_requests");
			REQUIRE(pthread_create(&t, NULL, big_call_thread, &b) ==
			        0);
			while (!atomic_load(&b.done) &&
			       info_u64(info, "doorbell_requests") == d0)
				;
			if (!atomic_load(&b.done)) {
				REQUIRE(daemon_pause(pid) == 0);
				stopped = 1;
			}
			pthread_join(t, NULL);
			if (stopped)
				REQUIRE(daemon_resume(pid) == 0);
			else
				printf("the large frame was answered before "
				       "the stop: again\n");
		}
		CHECK(stopped && b.err == FPREP_ETIMEDOUT,
		      "the daemon stopped with the request taken: %s, not "
		      "ETIMEDOUT",
		      fprep_err_name(b.err));
		free(b.frame);
	}
	/* The daemon answers it: once INFO counts no request in flight (INFO
	 * does not count itself). A fixed pause was too short for a 4K frame
	 * under ASan beside a CPU hog, and the next call timed out behind
	 * it. */
	n = UINT64_MAX;
	for (int i = 0; i < 12000 && (n = info_u64(info, "inflight")) != 0; i++)
		daemon_sleep_ms(10);
	CHECK(n == 0,
	      "the large frame is still in flight after 120 s (INFO "
	      "inflight: %llu)",
	      (unsigned long long)n);
	n = taken(info, c, N, "after a timeout");
	CHECK(n == 0,
	      "after a timeout: %llu calls through the doorbell given up",
	      (unsigned long long)n);
	fprep_client_close(c);

	/* kill -9 + restart: right tensors, through a new doorbell. */
	c = open_client(ipc);
	calls(c, 2, "before the restart");
	fprep_client_close(info);
	REQUIRE(kill(pid, SIGKILL) == 0);
	REQUIRE(waitpid(pid, NULL, 0) == pid);
	unlink(sock);
	pid = daemon_start(argv[1], "cpu", ipc, polls);
	info = open_client(ipc);
	fprep_client_set_staging(info, 0);
	for (int i = 0; i < 50 && (err = call(c, "reconnecting")) != 0; i++)
		daemon_sleep_ms(20);
	CHECK(err == 0, "no call succeeded after the restart: %s: %s",
	      fprep_err_name(err), fprep_client_last_error(c));
	n = taken(info, c, N, "after the restart");
	CHECK(n == N,
	      "after the restart: %llu of %d calls through the doorbell",
	      (unsigned long long)n, N);
	CHECK(info_u64(info, "doorbells") == 1,
	      "after the restart: doorbells %llu, not 1",
	      (unsigned long long)info_u64(info, "doorbells"));
	printf("after kill -9 + restart: %llu of %d calls through the new "
	       "doorbell\n",
	       (unsigned long long)(d1 - d0), N);
	fprep_client_close(c);
	fprep_client_close(info);
	CHECK(daemon_stop(pid) == 0, "daemon exit status");

	/* --max-doorbells 0: through nng; asked once. */
	pid = daemon_start(argv[1], "cpu", ipc, none);
	info = open_client(ipc);
	c = open_client(ipc);
	f0 = info_u64(info, "failed");
	calls(c, N, "--max-doorbells 0");
	f1 = info_u64(info, "failed");
	CHECK(info_u64(info, "doorbell_requests") == 0,
	      "--max-doorbells 0: doorbell requests");
	CHECK(f1 - f0 == 1,
	      "--max-doorbells 0: %llu requests refused over %d calls (the one "
	      "DOORBELL expected)",
	      (unsigned long long)(f1 - f0), N);
	fprep_client_close(c);
	fprep_client_close(info);
	CHECK(daemon_stop(pid) == 0, "daemon exit status");

	fprep_result_fini(&ref);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}
