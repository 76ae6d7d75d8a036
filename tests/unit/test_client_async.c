/*
 * test_client_async.c: the asynchronous client API (fprep_client_submit,
 * fprep_pending_done, fprep_pending_wait in src/lib/client.c) against a fake
 * daemon.
 *
 * The fake is a raw REP socket on a private ipc:// path, served by one
 * thread: raw mode lets it hold several requests and answer them in any
 * order, as the daemon does. Every pending must complete exactly once (its
 * callback once, its wait once) with the reply to its own request, also
 * when the reply races a thread already blocked in fprep_pending_wait.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "frameprep/frameprep.h"

#define FAKE_MAX 16

struct fake {
	nng_socket sock;
	pthread_t thread;
	char url[128];
	_Atomic int batch;    /* hold this many requests, answer in reverse */
	_Atomic int silent;   /* never answer */
	_Atomic int gate;     /* with batch 1: answer once gate is set */
	_Atomic int delay_us; /* then wait this long */
	_Atomic int flush;    /* answer what is held after 20 ms of quiet */
	_Atomic int requests; /* requests received */
	_Atomic int stop;     /* end the thread */
	nng_msg *held[FAKE_MAX];
	int nheld;
	fprep_client *client;
};

/* fake_reply turns request msg into its reply (an ECHO-style tensor of
 * the request's shape whose bytes are the request's payload xor), keeping
 * the routing header. */
static nng_msg *fake_reply(nng_msg *msg)
{
	static const fprep_limits lim = {
	        4096, 4096,     1u << 26, 4096, 4096, 1u << 28, 64, 1u << 30,
	        32,   1u << 28, 1u << 20, 4,    8,    16,       32};
	const uint8_t *body = nng_msg_body(msg);
	size_t len = nng_msg_len(msg);
	fprep_reply_header h;
	fprep_request req;
	uint64_t tensor = 0;
	uint8_t sum = 0;
	nng_msg *reply;
	uint8_t *p;

	memset(&h, 0, sizeof(h));
	h.status =
	        (uint32_t)fprep_request_decode(body, len, &lim, &req, NULL, 0);
	for (size_t i = FPREP_REQUEST_HEADER_SIZE; i < len; i++)
		sum ^= body[i];
	h.version = FPREP_PROTOCOL_VERSION;
	h.kind = req.kind;
	h.request_id = req.request_id;
	if (h.status == FPREP_OK && req.kind == FPREP_KIND_INFO) {
		/* The limits the client asks for before its first frame. */
		static const char info[] =
		        "max_width: 4096\nmax_height: 4096\n"
		        "max_frame_bytes: 67108864\nmax_out_width: 4096\n"
		        "max_out_height: 4096\nmax_tensor_bytes: 268435456\n";
		tensor = sizeof(info) - 1;
		h.payload_size = tensor;
		if (nng_msg_alloc(&reply, FPREP_REPLY_HEADER_SIZE + tensor) !=
		    0)
			return NULL;
		p = nng_msg_body(reply);
		fprep_reply_encode(&h, p);
		memcpy(p + FPREP_REPLY_HEADER_SIZE, info, tensor);
		goto routing;
	}
	if (h.status == FPREP_OK) {
		h.ndim = 4;
		h.dtype = req.dtype;
		h.layout = req.layout;
		fprep_tensor_shape(&req, h.shape, &tensor);
		h.tensor_size = tensor;
		h.payload_size = tensor;
	}
	if (nng_msg_alloc(&reply, FPREP_REPLY_HEADER_SIZE + tensor) != 0)
		return NULL;
	p = nng_msg_body(reply);
	fprep_reply_encode(&h, p);
	memset(p + FPREP_REPLY_HEADER_SIZE, sum, tensor);
routing:
	if (nng_msg_header_append(reply, nng_msg_header(msg),
	                          nng_msg_header_len(msg)) != 0) {
		nng_msg_free(reply);
		return NULL;
	}
	return reply;
}

static void fake_send(struct fake *f, nng_msg *msg)
{
	nng_msg *reply = fake_reply(msg);

	nng_msg_free(msg);
	if (reply != NULL && nng_sendmsg(f->sock, reply, 0) != 0)
		nng_msg_free(reply);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	nng_msg *msg;
	int rv;

	while (!f->stop) {
		if ((rv = nng_recvmsg(f->sock, &msg, 0)) != 0) {
			while (f->flush && f->nheld > 0)
				fake_send(f, f->held[--f->nheld]);
			continue;
		}
		if (nng_msg_len(msg) >= 8 &&
		    ((const uint8_t *)nng_msg_body(msg))[6] ==
		            FPREP_KIND_INFO) {
			fake_send(f, msg); /* INFO is answered at once */
			continue;
		}
		f->requests++;
		if (f->silent || f->nheld == FAKE_MAX) {
			nng_msg_free(msg);
			continue;
		}
		f->held[f->nheld++] = msg;
		if (f->nheld < f->batch)
			continue;
		if (f->gate) {
			/* Wait for the test's thread to head into the wait
			 * (bounded: the test fails by itself otherwise). */
			for (int i = 0; i < 100000 && f->gate == 1; i++)
				usleep(10);
			f->gate = 1;
			if (f->delay_us > 0)
				usleep((useconds_t)f->delay_us);
		}
		while (f->nheld > 0)
			fake_send(f, f->held[--f->nheld]);
	}
	while (f->nheld > 0)
		nng_msg_free(f->held[--f->nheld]);
	return NULL;
}

/* fake_start listens and dials a client whose requests time out after
 * timeout_ms. */
static struct fake *fake_start(int timeout_ms)
{
	static _Atomic int serial;
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->batch = 1;
	snprintf(f->url, sizeof(f->url), "ipc:///tmp/fprep-test-async-%d-%d",
	         (int)getpid(), serial++);
	assert_int_equal(nng_rep0_open_raw(&f->sock), 0);
	assert_int_equal(nng_socket_set_ms(f->sock, NNG_OPT_RECVTIMEO, 20), 0);
	assert_int_equal(nng_listen(f->sock, f->url, NULL, 0), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	assert_int_equal(fprep_client_open(&f->client, f->url, timeout_ms),
	                 FPREP_OK);
	/* The limits are asked for once, here, not inside a test's timing. */
	fprep_limits lim;
	assert_int_equal(fprep_client_limits(f->client, &lim), FPREP_OK);
	return f;
}

/* fake_stop closes the client, then the fake. The fake's thread ends
 * before its socket closes: nng 1.5.2 can crash closing a socket under a
 * receive that has a timeout. */
static void fake_stop(struct fake *f)
{
	fprep_client_close(f->client);
	f->stop = 1;
	pthread_join(f->thread, NULL);
	nng_close(f->sock);
	free(f);
}

/* What a pending's callback saw. */
struct done {
	_Atomic int calls;
	_Atomic int done_seen;    /* fprep_pending_done was true inside cb */
	fprep_pending *_Atomic p; /* the pending it was called for */
};

static void done_cb(fprep_pending *p, void *arg)
{
	struct done *d = arg;

	d->p = p;
	d->done_seen = fprep_pending_done(p);
	d->calls++;
}

/* A 16x8 BGR8 frame filled with seed; its xor is seed (384 bytes). */
static void async_frame(fprep_request *req, uint8_t *frame, uint8_t seed)
{
	fprep_request_init(req, FPREP_PIX_BGR8, 16, 8);
	req->out_width = 8;
	req->out_height = 4;
	req->dtype = FPREP_DTYPE_U8;
	memset(frame, 0, 384);
	frame[0] = seed;
}

/* wait_until waits until *v == want, at most ms milliseconds. */
static int wait_until(_Atomic int *v, int want, int ms)
{
	for (int i = 0; i < ms * 10 && *v != want; i++)
		usleep(100);
	return *v == want;
}

/* check_reply checks res is the answer to the request with id and seed. */
static void check_reply(const fprep_result *res, uint64_t id, uint8_t seed)
{
	const uint8_t *t = res->payload;

	assert_int_equal(res->header.status, FPREP_OK);
	assert_true(res->header.request_id == id);
	assert_int_equal(res->payload_size, 8 * 4 * 3);
	for (size_t i = 0; i < res->payload_size; i++)
		assert_int_equal(t[i], seed);
}

/* Several requests in flight, answered in reverse order: each pending gets
 * its own reply, its callback once, and fprep_pending_done turns true. */
static void out_of_order(void **state)
{
	enum { N = 8 };
	struct fake *f = fake_start(10000);
	struct done d[N];
	fprep_pending *p[N];
	fprep_request req[N];
	uint8_t frame[384];
	fprep_result res;

	(void)state;
	f->batch = N;
	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++) {
		if (i == N - 1) {
			/* The fake holds them all until the last arrives. */
			assert_true(wait_until(&f->requests, N - 1, 10000));
			for (int j = 0; j < N - 1; j++) {
				assert_false(fprep_pending_done(p[j]));
				assert_int_equal(d[j].calls, 0);
			}
		}
		async_frame(&req[i], frame, (uint8_t)(i + 1));
		assert_int_equal(fprep_client_submit(f->client, &req[i], frame,
		                                     done_cb, &d[i], &p[i]),
		                 FPREP_OK);
		/* The payload was copied: the buffer may be reused. */
		memset(frame, 0xee, sizeof(frame));
		for (int j = 0; j < i; j++)
			assert_true(req[i].request_id != req[j].request_id);
	}
	for (int i = 0; i < N; i++)
		assert_true(wait_until(&d[i].calls, 1, 10000));
	for (int i = N - 1; i >= 0; i--) {
		assert_true(fprep_pending_done(p[i]));
		assert_ptr_equal(d[i].p, p[i]);
		assert_int_equal(fprep_pending_wait(p[i], &res), FPREP_OK);
		check_reply(&res, req[i].request_id, (uint8_t)(i + 1));
		fprep_result_fini(&res);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(d[i].calls, 1);
		assert_int_equal(d[i].done_seen, 1);
	}
	assert_int_equal(f->requests, N);
	fake_stop(f);
}

/* Several rounds from several threads at once, without callbacks. */
struct round_arg {
	struct fake *f;
	int ok;
};

static void *round_main(void *arg)
{
	struct round_arg *ra = arg;
	uint8_t frame[384];

	for (int r = 0; r < 20; r++) {
		fprep_pending *p[4];
		fprep_request req[4];
		fprep_result res;

		for (int i = 0; i < 4; i++) {
			async_frame(&req[i], frame, (uint8_t)(r * 4 + i + 1));
			if (fprep_client_submit(ra->f->client, &req[i], frame,
			                        NULL, NULL, &p[i]) != FPREP_OK)
				return NULL;
		}
		for (int i = 3; i >= 0; i--) {
			if (fprep_pending_wait(p[i], &res) != FPREP_OK)
				continue;
			const uint8_t *t = res.payload;
			if (res.header.request_id == req[i].request_id &&
			    res.payload_size == 96 &&
			    t[95] == (uint8_t)(r * 4 + i + 1))
				ra->ok++;
			fprep_result_fini(&res);
		}
	}
	return NULL;
}

static void threads(void **state)
{
	struct fake *f = fake_start(10000);
	struct round_arg ra[4];
	pthread_t th[4];

	(void)state;
	/* Answers come in reverse threes, across threads. */
	f->batch = 3;
	f->flush = 1;
	for (int i = 0; i < 4; i++) {
		ra[i] = (struct round_arg){f, 0};
		assert_int_equal(
		        pthread_create(&th[i], NULL, round_main, &ra[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(ra[i].ok, 80);
	}
	fake_stop(f);
}

/* The completion racing the wait: a thread blocks (or is about to block)
 * in fprep_pending_wait while the reply arrives. */
struct waiter {
	struct fake *f;
	fprep_pending *p;
	fprep_result res;
	int rv;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->f->gate = 2; /* let the fake answer */
	w->rv = fprep_pending_wait(w->p, &w->res);
	return NULL;
}

static void completion_races_wait(void **state)
{
	struct fake *f = fake_start(10000);
	uint8_t frame[384];

	(void)state;
	for (int i = 0; i < 200; i++) {
		struct done d = {0};
		struct waiter w;
		fprep_request req;
		pthread_t th;

		memset(&w, 0, sizeof(w));
		w.f = f;
		w.rv = -1;
		f->gate = 1;
		f->delay_us = i % 4 == 0 ? 0 : (i * 37) % 300;
		async_frame(&req, frame, (uint8_t)i);
		assert_int_equal(fprep_client_submit(f->client, &req, frame,
		                                     done_cb, &d, &w.p),
		                 FPREP_OK);
		assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
		pthread_join(th, NULL);
		assert_int_equal(w.rv, FPREP_OK);
		check_reply(&w.res, req.request_id, (uint8_t)i);
		fprep_result_fini(&w.res);
		/* fprep_pending_wait returned after the callback ran. */
		assert_int_equal(d.calls, 1);
	}
	f->gate = 0;
	fake_stop(f);
}

/* A silent daemon: each pending fails with FPREP_ETIMEDOUT after the
 * client's timeout, its callback called once. */
static void timeouts(void **state)
{
	enum { N = 4 };
	struct fake *f = fake_start(300);
	struct timespec t0, t1;
	struct done d[N];
	fprep_pending *p[N];
	fprep_request req;
	uint8_t frame[384];
	fprep_result res;
	double ms;

	(void)state;
	f->silent = 1;
	memset(d, 0, sizeof(d));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < N; i++) {
		async_frame(&req, frame, 1);
		assert_int_equal(fprep_client_submit(f->client, &req, frame,
		                                     done_cb, &d[i], &p[i]),
		                 FPREP_OK);
	}
	for (int i = 0; i < N; i++) {
		assert_true(wait_until(&d[i].calls, 1, 10000));
		assert_ptr_equal(d[i].p, p[i]);
		assert_int_equal(fprep_pending_wait(p[i], &res),
		                 FPREP_ETIMEDOUT);
		assert_null(res.payload);
		assert_null(res.priv);
		assert_int_equal(d[i].calls, 1);
		assert_int_equal(d[i].done_seen, 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	     (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	assert_true(ms >= 250.0);
	assert_non_null(
	        strstr(fprep_client_last_error(f->client), "Timed out"));
	fake_stop(f);
}

/* Closing the client with requests still in flight: every pending then
 * completes once with a transport error, and nothing is used after it is
 * freed or leaks (under ASan). */
static void close_with_pendings(void **state)
{
	enum { N = 4 };
	struct fake *f = fake_start(10000);
	struct done d[N];
	fprep_pending *p[N];
	fprep_request req;
	uint8_t frame[384];
	fprep_result res;

	(void)state;
	f->silent = 1;
	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++) {
		async_frame(&req, frame, 1);
		assert_int_equal(fprep_client_submit(f->client, &req, frame,
		                                     done_cb, &d[i], &p[i]),
		                 FPREP_OK);
	}
	assert_true(wait_until(&f->requests, N, 10000));
	fprep_client_close(f->client);
	f->client = NULL;
	for (int i = 0; i < N; i++) {
		int rv = fprep_pending_wait(p[i], &res);

		assert_true(rv == FPREP_ECLOSED || rv == FPREP_ETRANSPORT);
		assert_null(res.priv);
		assert_int_equal(d[i].calls, 1);
	}
	fake_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(out_of_order),
	        cmocka_unit_test(threads),
	        cmocka_unit_test(completion_races_wait),
	        cmocka_unit_test(timeouts),
	        cmocka_unit_test(close_with_pendings),
	};

	int failed = cmocka_run_group_tests(tests, NULL, NULL);

	/* nng frees closed sockets and pipes on its own threads: wait for
	 * them, so the leak check at exit sees only what the tests kept. */
	nng_fini();
	return failed;
}
