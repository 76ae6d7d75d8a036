/*
 * test_client.c: the blocking client (src/lib/client.c) against a fake daemon.
 *
 * The fake is an nng REP socket on a private ipc:// path served by one
 * thread. Per test it answers each request in a chosen way: a correct
 * reply, a reply for another request id or kind, garbage, an error status,
 * or nothing at all; the client must turn each into the documented result.
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
#include <unistd.h>

#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

#include "frameprep/frameprep.h"

enum fake_mode {
	FAKE_OK,
	FAKE_WRONG_ID,
	FAKE_WRONG_KIND,
	FAKE_GARBAGE,
	FAKE_SILENT,
	FAKE_STATUS,
};

#define FAKE_INFO                                                              \
	"version: test\nbackend: fake\nmax_width: 4096\nmax_height: 4096\n"    \
	"max_frame_bytes: 1000\nmax_out_width: 4096\nmax_out_height: 4096\n"   \
	"max_tensor_bytes: 268435456\n"

struct fake {
	nng_socket sock;
	pthread_t thread;
	char url[128];
	_Atomic int mode;
	_Atomic int requests; /* requests received, besides INFO */
	fprep_request last;   /* the last request, decoded */
	size_t last_len;      /* its length */
	uint8_t last_sum;     /* xor of its payload */
	fprep_client *client;
};

/* fake_reply builds the reply to a request in the fake's mode. */
static nng_msg *fake_reply(struct fake *f, const uint8_t *body, size_t len)
{
	static const fprep_limits lim = {
	        4096, 4096,     1u << 26, 4096, 4096, 1u << 28, 64, 1u << 30,
	        32,   1u << 28, 1u << 20, 4,    8,    16,       32};
	fprep_request req;
	fprep_reply_header h;
	uint64_t tensor = 0;
	size_t payload = 0;
	nng_msg *msg;
	uint8_t *p;
	int err, mode;

	err = fprep_request_decode(body, len, &lim, &req, NULL, 0);
	f->last = req;
	f->last_len = len;
	f->last_sum = 0;
	for (size_t i = FPREP_REQUEST_HEADER_SIZE; i < len; i++)
		f->last_sum ^= body[i];
	memset(&h, 0, sizeof(h));
	h.version = FPREP_PROTOCOL_VERSION;
	h.kind = req.kind;
	h.request_id = req.request_id;
	h.status = (uint32_t)err;
	/* INFO, which the client asks for its limits, is always answered. */
	mode = req.kind == FPREP_KIND_INFO ? FAKE_OK : f->mode;
	if (mode == FAKE_WRONG_ID)
		h.request_id++;
	if (mode == FAKE_WRONG_KIND)
		h.kind = FPREP_KIND_ECHO;
	if (mode == FAKE_STATUS) {
		h.status = FPREP_ELIMIT;
		snprintf(h.message, sizeof(h.message),
		         "out_width 9999 exceeds max_out_width 4096");
	} else if (err == FPREP_OK && req.kind == FPREP_KIND_INFO) {
		payload = strlen(FAKE_INFO);
	} else if (err == FPREP_OK) {
		h.ndim = 4;
		h.dtype = req.dtype;
		h.layout = req.layout;
		fprep_tensor_shape(&req, h.shape, &tensor);
		h.tensor_size = tensor;
		h.scale_x = 0.5f;
		h.pad_y = 80.0f;
		h.t_total_us = 1234;
		payload = (size_t)tensor;
	}
	h.payload_size = payload;
	if (nng_msg_alloc(&msg, FPREP_REPLY_HEADER_SIZE + payload) != 0)
		return NULL;
	p = nng_msg_body(msg);
	fprep_reply_encode(&h, p);
	if (h.kind == FPREP_KIND_INFO)
		memcpy(p + FPREP_REPLY_HEADER_SIZE, FAKE_INFO, payload);
	else
		for (size_t i = 0; i < payload; i++)
			p[FPREP_REPLY_HEADER_SIZE + i] = (uint8_t)(i * 7);
	if (mode == FAKE_GARBAGE) {
		nng_msg_clear(msg);
		nng_msg_append(msg, "not a reply", 11);
	}
	return msg;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	nng_msg *msg, *reply;

	while (nng_recvmsg(f->sock, &msg, 0) == 0) {
		reply = fake_reply(f, nng_msg_body(msg), nng_msg_len(msg));
		nng_msg_free(msg);
		if (f->last.kind == FPREP_KIND_INFO) {
			if (reply != NULL && nng_sendmsg(f->sock, reply, 0))
				nng_msg_free(reply);
			continue;
		}
		f->requests++;
		if (reply == NULL)
			continue;
		if (f->mode == FAKE_SILENT || nng_sendmsg(f->sock, reply, 0))
			nng_msg_free(reply);
	}
	return NULL;
}

static int fake_setup(void **state)
{
	static _Atomic int serial;
	struct fake *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->url, sizeof(f->url), "ipc:///tmp/fprep-test-client-%d-%d",
	         (int)getpid(), serial++);
	if (nng_rep0_open(&f->sock) != 0 ||
	    nng_listen(f->sock, f->url, NULL, 0) != 0 ||
	    pthread_create(&f->thread, NULL, fake_main, f) != 0)
		return -1;
	if (fprep_client_open(&f->client, f->url, 2000) != FPREP_OK)
		return -1;
	/* The fake speaks the inline wire path only: no stages (see
	 * stage_refused). */
	fprep_client_set_staging(f->client, 0);
	*state = f;
	return 0;
}

static int fake_teardown(void **state)
{
	struct fake *f = *state;

	fprep_client_close(f->client);
	nng_close(f->sock);
	pthread_join(f->thread, NULL);
	free(f);
	return 0;
}

/* A 20x10 BGR8 frame holding a pattern; returns its xor. */
static uint8_t test_frame(fprep_request *req, uint8_t *frame)
{
	uint8_t sum = 0;

	fprep_request_init(req, FPREP_PIX_BGR8, 20, 10);
	req->out_width = 16;
	req->out_height = 8;
	for (size_t i = 0; i < 600; i++) {
		frame[i] = (uint8_t)(i * 13 + 1);
		sum ^= frame[i];
	}
	return sum;
}

static void request_ok(void **state)
{
	struct fake *f = *state;
	uint8_t frame[600];
	fprep_request req;
	fprep_result res;
	const uint8_t *t;
	uint8_t sum = test_frame(&req, frame);

	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_int_equal(f->last_len, FPREP_REQUEST_HEADER_SIZE + 600);
	assert_int_equal(f->last_sum, sum);
	assert_int_equal(f->last.out_width, 16);
	assert_true(f->last.request_id == req.request_id);
	assert_int_equal(res.header.status, FPREP_OK);
	assert_true(res.header.request_id == req.request_id);
	assert_int_equal(res.header.ndim, 4);
	assert_int_equal(res.header.shape[1], 3);
	assert_int_equal(res.header.shape[2], 8);
	assert_int_equal(res.header.shape[3], 16);
	assert_int_equal(res.payload_size, 16 * 8 * 3 * 4);
	assert_true(res.header.pad_y == 80.0f);
	assert_int_equal(res.header.t_total_us, 1234);
	t = res.payload;
	for (size_t i = 0; i < res.payload_size; i++)
		assert_int_equal(t[i], (uint8_t)(i * 7));
	assert_string_equal(fprep_client_last_error(f->client), "");
	fprep_result_fini(&res);
	assert_null(res.priv);
	assert_null(res.payload);

	/* Ids are unique per client; ECHO goes the same way. */
	uint64_t first = req.request_id;
	req.kind = FPREP_KIND_ECHO;
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_true(req.request_id != first);
	assert_int_equal(res.header.kind, FPREP_KIND_ECHO);
	/* A result outlives its client. */
	fprep_client_close(f->client);
	f->client = NULL;
	t = res.payload;
	assert_int_equal(t[1], 7);
	fprep_result_fini(&res);
}

static void request_no_payload(void **state)
{
	struct fake *f = *state;
	uint8_t frame[600];
	fprep_request req;
	fprep_result res;

	test_frame(&req, frame);
	assert_int_equal(fprep_client_request(f->client, &req, NULL, &res),
	                 FPREP_EINVAL);
	assert_null(res.priv);
	assert_int_equal(f->requests, 0);
}

static void info(void **state)
{
	struct fake *f = *state;
	fprep_result res;

	assert_int_equal(fprep_client_info(f->client, &res), FPREP_OK);
	assert_int_equal(f->last.kind, FPREP_KIND_INFO);
	assert_int_equal(f->last_len, FPREP_REQUEST_HEADER_SIZE);
	assert_int_equal(res.header.status, FPREP_OK);
	assert_int_equal(res.payload_size, strlen(FAKE_INFO));
	assert_string_equal(res.payload, FAKE_INFO);
	fprep_result_fini(&res);
}

static void server_status(void **state)
{
	struct fake *f = *state;
	uint8_t frame[600];
	fprep_request req;
	fprep_result res;

	f->mode = FAKE_STATUS;
	test_frame(&req, frame);
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_int_equal(res.header.status, FPREP_ELIMIT);
	assert_string_equal(res.header.message,
	                    "out_width 9999 exceeds max_out_width 4096");
	assert_non_null(strstr(fprep_client_last_error(f->client),
	                       "ELIMIT: out_width 9999"));
	fprep_result_fini(&res);
}

static void expect_failure(struct fake *f, int mode, int want,
                           const char *needle)
{
	uint8_t frame[600];
	fprep_request req;
	fprep_result res;

	f->mode = mode;
	test_frame(&req, frame);
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 want);
	assert_null(res.priv);
	assert_null(res.payload);
	assert_int_equal(res.payload_size, 0);
	if (strstr(fprep_client_last_error(f->client), needle) == NULL)
		fail_msg("last error '%s' lacks '%s'",
		         fprep_client_last_error(f->client), needle);
}

static void mismatch(void **state)
{
	struct fake *f = *state;

	expect_failure(f, FAKE_WRONG_ID, FPREP_EMISMATCH, "reply for request");
	expect_failure(f, FAKE_WRONG_KIND, FPREP_EMISMATCH, "kind 3");
}

static void garbage(void **state)
{
	struct fake *f = *state;

	expect_failure(f, FAKE_GARBAGE, FPREP_EPROTO, "unreadable reply");
}

static void timeout(void **state)
{
	struct fake *f = *state;
	uint8_t frame[600];
	fprep_request req;
	fprep_result res;
	nng_time t0;

	fprep_client_close(f->client);
	assert_int_equal(fprep_client_open(&f->client, f->url, 200), FPREP_OK);
	fprep_client_set_staging(f->client, 0);
	t0 = nng_clock();
	expect_failure(f, FAKE_SILENT, FPREP_ETIMEDOUT,
	               "waiting for the reply");
	assert_true(nng_clock() - t0 >= 190);
	assert_int_equal(f->requests, 1);
	/* The client stays usable, and the request was not resent. */
	f->mode = FAKE_OK;
	test_frame(&req, frame);
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_int_equal(res.header.status, FPREP_OK);
	assert_int_equal(f->requests, 2);
	fprep_result_fini(&res);
}

static void nobody_listening(void **state)
{
	fprep_client *c = (fprep_client *)1;
	char url[128];

	(void)state;
	snprintf(url, sizeof(url), "ipc:///tmp/fprep-test-client-%d-none",
	         (int)getpid());
	assert_int_equal(fprep_client_open(&c, url, 100), FPREP_ETRANSPORT);
	assert_null(c);
	assert_non_null(strstr(fprep_client_last_error(NULL), url));
	assert_non_null(strstr(fprep_client_last_error(NULL), "no socket"));
	assert_int_equal(fprep_client_open(&c, "bogus://x", 100), FPREP_EINVAL);
	assert_int_equal(fprep_client_open(&c, url, -1), FPREP_EINVAL);
	fprep_client_close(NULL);
}

/* An inline frame over the daemon's max_frame_bytes (1000 in the fake's
 * INFO) is refused before it is sent: nng would only drop the
 * connection. */
static void frame_over_limit(void **state)
{
	struct fake *f = *state;
	uint8_t frame[1200] = {0};
	fprep_request req;
	fprep_result res;
	fprep_limits lim;
	fprep_pending *p;

	fprep_request_init(&req, FPREP_PIX_BGR8, 20, 20);
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_ELIMIT);
	assert_string_equal(fprep_client_last_error(f->client),
	                    "frame is 1200 bytes; the daemon's max_frame_bytes "
	                    "is 1000 (--max-frame-bytes)");
	assert_int_equal(
	        fprep_client_submit(f->client, &req, frame, NULL, NULL, &p),
	        FPREP_ELIMIT);
	assert_null(p);
	assert_int_equal(f->requests, 0);
	assert_int_equal(fprep_client_limits(f->client, &lim), FPREP_OK);
	assert_int_equal(lim.max_frame_bytes, 1000);
	assert_int_equal(lim.max_out_width, 4096);
	assert_true(lim.max_tensor_bytes == 268435456);
	/* A frame within the limit goes through. */
	fprep_request_init(&req, FPREP_PIX_GRAY8, 20, 20);
	req.out_width = 16;
	req.out_height = 8;
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_int_equal(f->requests, 1);
	fprep_result_fini(&res);
}

/* A daemon that does not register the stage (this fake cannot decode a
 * REGISTER) gets the frame inline, and is not asked again. */
static void stage_refused(void **state)
{
	struct fake *f = *state;
	uint8_t frame[600];
	fprep_request req;
	fprep_result res;

	fprep_client_set_staging(f->client, 1);
	test_frame(&req, frame);
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_int_equal(res.header.status, FPREP_OK);
	assert_int_equal(res.header.output_loc, FPREP_LOC_INLINE);
	assert_int_equal(f->last.input_loc, FPREP_LOC_INLINE);
	assert_int_equal(f->last_len, FPREP_REQUEST_HEADER_SIZE + 600);
	assert_int_equal(f->requests, 2); /* the REGISTER, the frame */
	fprep_result_fini(&res);
	test_frame(&req, frame);
	assert_int_equal(fprep_client_request(f->client, &req, frame, &res),
	                 FPREP_OK);
	assert_int_equal(f->requests, 3);
	fprep_result_fini(&res);
}

/* Addresses are checked as the daemon checks its own, and the error names
 * what is wrong. */
static void bad_urls(void **state)
{
	static const struct {
		const char *url;
		int err;
		const char *needle;
	} cases[] = {
	        {"/tmp/x.sock", FPREP_EINVAL, "not an ipc:// or tcp:// URL"},
	        {"ipc://", FPREP_EINVAL, "not an ipc:// or tcp:// URL"},
	        {"tcp://127.0.0.1", FPREP_EINVAL, "tcp://HOST:PORT"},
	        {"tcp://127.0.0.1:", FPREP_EINVAL, "no valid port"},
	        {"tcp://127.0.0.1:99999", FPREP_EINVAL, "no valid port"},
	        {"tcp://[::1]", FPREP_EINVAL, "tcp://HOST:PORT"},
	        {"ipc:///nonexistent-fprep-dir/f.sock", FPREP_ETRANSPORT,
	         "the directory /nonexistent-fprep-dir does not exist"},
	        {"ipc:///tmp", FPREP_ETRANSPORT, "/tmp is not a socket"},
	};
	fprep_client *c;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(fprep_client_open(&c, cases[i].url, 100),
		                 cases[i].err);
		assert_null(c);
		if (strstr(fprep_client_last_error(NULL), cases[i].needle) ==
		    NULL)
			fail_msg("%s: '%s' lacks '%s'", cases[i].url,
			         fprep_client_last_error(NULL),
			         cases[i].needle);
	}
}

/* A comma list of daemons: one that answers is enough (the others are
 * dialled in the background), requests go through, shared memory and
 * CUDA regions are refused; malformed lists are refused. */
static void several_urls(void **state)
{
	struct fake *f = *state;
	char list[1200], none[128];
	fprep_client *c = NULL;
	fprep_region *r = (fprep_region *)1;
	fprep_result res;

	snprintf(none, sizeof(none), "ipc:///tmp/fprep-test-client-%d-gone",
	         (int)getpid());
	snprintf(list, sizeof(list), "%s,%s", none, f->url);
	if (fprep_client_open(&c, list, 2000) != FPREP_OK)
		fail_msg("%s: %s", list, fprep_client_last_error(NULL));
	assert_int_equal(fprep_client_info(c, &res), FPREP_OK);
	assert_string_equal(res.payload, FAKE_INFO);
	fprep_result_fini(&res);
	assert_int_equal(fprep_region_open(&r, c, 4096), FPREP_EUNSUPPORTED);
	assert_null(r);
	assert_non_null(strstr(fprep_client_last_error(c), "one daemon"));
	/* CUDA regions too, before the pointer is even looked at. */
	r = (fprep_region *)1;
	assert_int_equal(fprep_region_open_cuda(&r, c, list, sizeof(list)),
	                 FPREP_EUNSUPPORTED);
	assert_null(r);
	assert_non_null(strstr(fprep_client_last_error(c),
	                       "CUDA regions need a client of one daemon"));
	fprep_client_close(c);

	snprintf(list, sizeof(list), "%s,%s-2", none, none);
	assert_int_equal(fprep_client_open(&c, list, 100), FPREP_ETRANSPORT);
	assert_null(c);
	snprintf(list, sizeof(list), "%s,,%s", f->url, f->url);
	assert_int_equal(fprep_client_open(&c, list, 100), FPREP_EINVAL);
	assert_non_null(strstr(fprep_client_last_error(NULL), "empty URL"));
	snprintf(list, sizeof(list), "%s,", f->url);
	assert_int_equal(fprep_client_open(&c, list, 100), FPREP_EINVAL);
	list[0] = '\0';
	for (int i = 0; i < 17; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
		         "%s%s", i ? "," : "", f->url);
	assert_int_equal(fprep_client_open(&c, list, 100), FPREP_ELIMIT);
	assert_non_null(strstr(fprep_client_last_error(NULL), "more than 16"));
}

static void default_url(void **state)
{
	char buf[256], want[64];

	(void)state;
	setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
	assert_int_equal(fprep_default_url(buf, sizeof(buf)), FPREP_OK);
	assert_string_equal(buf, "ipc:///run/user/1234/frameprep.sock");
	assert_int_equal(fprep_default_url(buf, 10), FPREP_ELIMIT);
	unsetenv("XDG_RUNTIME_DIR");
	assert_int_equal(fprep_default_url(buf, sizeof(buf)), FPREP_OK);
	snprintf(want, sizeof(want), "ipc:///tmp/frameprep-%u.sock",
	         (unsigned)getuid());
	assert_string_equal(buf, want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(request_ok, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(request_no_payload, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(info, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(server_status, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(mismatch, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(garbage, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(timeout, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(frame_over_limit, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(several_urls, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test_setup_teardown(stage_refused, fake_setup,
	                                        fake_teardown),
	        cmocka_unit_test(nobody_listening),
	        cmocka_unit_test(bad_urls),
	        cmocka_unit_test(default_url),
	};

	int failed = cmocka_run_group_tests(tests, NULL, NULL);

	/* nng frees closed sockets and pipes on its own threads: wait for
	 * them, so the leak check at exit sees only what the tests kept. */
	nng_fini();
	return failed;
}
