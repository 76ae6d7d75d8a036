/*
 * test_server_shares.c: a connection's share of the server's request
 * slots (service/conns.c), the audit's case (issue 30, D3): two
 * connections (the SP protocol spoken by hand over the ipc socket, so that
 * nothing reads for them) send FRAME requests whose replies are large,
 * twice --max-inflight-per-conn of them, never read one and do not give
 * up; another client's INFO must still be answered
 * within a second (it took the whole send timeout, 10 s, when the two
 * could hold all 64 slots). The server runs with its defaults (64 slots,
 * 16 requests in flight per connection, a 10 s send timeout) and a fake
 * backend that completes each job at once.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "backend.h"
#include "check.h"
#include "clock.h"
#include "config.h"
#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "server.h"

#define NONREADERS 2
#define SENDS      33  /* each non-reader: one more than it can hold */
#define OUT_SIDE   448 /* a 448 x 448 x 3 float tensor: 2.4 MB a reply */

struct fake_backend {
	fprep__backend b;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	fprep__job *jobs[256];
	unsigned head, tail;
	int stop;
	pthread_t thread;
};

/* fake_main completes every job as it comes, in order. */
static void *fake_main(void *arg)
{
	struct fake_backend *fb = arg;

	pthread_mutex_lock(&fb->lock);
	for (;;) {
		while (fb->head == fb->tail && !fb->stop)
			pthread_cond_wait(&fb->cond, &fb->lock);
		if (fb->head == fb->tail)
			break;
		fprep__job *job = fb->jobs[fb->head++ % 256];

		pthread_mutex_unlock(&fb->lock);
		job->t_start_ns = fprep__now_ns();
		job->status = FPREP_OK;
		job->t_end_ns = fprep__now_ns();
		job->done(job);
		pthread_mutex_lock(&fb->lock);
	}
	pthread_mutex_unlock(&fb->lock);
	return NULL;
}

static int fake_submit(fprep__backend *b, fprep__job *job)
{
	struct fake_backend *fb = (struct fake_backend *)b;

	pthread_mutex_lock(&fb->lock);
	REQUIRE(fb->tail - fb->head < 256);
	fb->jobs[fb->tail++ % 256] = job;
	pthread_cond_signal(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	return 0;
}

static void fake_info(fprep__backend *b, char *buf, size_t size)
{
	(void)b;
	snprintf(buf, size, "fake: yes\n");
}

static void fake_close(fprep__backend *b, int timeout_ms)
{
	struct fake_backend *fb = (struct fake_backend *)b;

	(void)timeout_ms;
	pthread_mutex_lock(&fb->lock);
	fb->stop = 1;
	pthread_cond_signal(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	pthread_join(fb->thread, NULL);
	pthread_cond_destroy(&fb->cond);
	pthread_mutex_destroy(&fb->lock);
	free(fb);
}

static fprep__backend *fake_open(void)
{
	struct fake_backend *fb = calloc(1, sizeof(*fb));

	REQUIRE(fb != NULL);
	fb->b.name = "fake";
	fb->b.submit = fake_submit;
	fb->b.info = fake_info;
	fb->b.close = fake_close;
	pthread_mutex_init(&fb->lock, NULL);
	pthread_cond_init(&fb->cond, NULL);
	REQUIRE(pthread_create(&fb->thread, NULL, fake_main, fb) == 0);
	return &fb->b;
}

static const char *url;
static int nonreaders[NONREADERS];
static int sent[NONREADERS];

/* put_be64 writes v big-endian at p. */
static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* sp_connect connects to the ipc socket of url as a REQ peer speaking the
 * SP protocol by hand (so that nothing reads on its behalf), with a small
 * receive buffer. Returns the descriptor. */
static int sp_connect(void)
{
	static const uint8_t hello[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};
	struct sockaddr_un a;
	uint8_t peer[8];
	int fd = -1, small = 4096;

	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", url + strlen("ipc://"));
	for (int k = 0; k < 500; k++) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		REQUIRE(fd >= 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(10000);
	}
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, hello, sizeof(hello)) == (ssize_t)sizeof(hello));
	REQUIRE(read(fd, peer, sizeof(peer)) == (ssize_t)sizeof(peer));
	return fd;
}

/* nonreader_main sends SENDS FRAME requests, framed as nng's ipc
 * transport does (type 1, a 64-bit length, the REQ request id, the
 * request), and never reads a reply. */
static void *nonreader_main(void *arg)
{
	int i = (int)(intptr_t)arg;
	enum { BODY = FPREP_REQUEST_HEADER_SIZE + 8 * 8 * 3 };
	uint8_t msg[1 + 8 + 4 + BODY];
	fprep_request req;
	int fd = sp_connect();

	nonreaders[i] = fd;
	fprep_request_init(&req, FPREP_PIX_BGR8, 8, 8);
	req.out_width = OUT_SIDE;
	req.out_height = OUT_SIDE;
	memset(msg, 0, sizeof(msg));
	msg[0] = 1;
	put_be64(msg + 1, 4 + BODY);
	for (int k = 0; k < SENDS; k++) {
		uint32_t id = 0x80000000u | (uint32_t)(k + 1);

		msg[9] = (uint8_t)(id >> 24);
		msg[10] = (uint8_t)(id >> 16);
		msg[11] = (uint8_t)(id >> 8);
		msg[12] = (uint8_t)id;
		req.request_id = (uint64_t)k + 1;
		fprep_request_encode(&req, msg + 13);
		if (send(fd, msg, sizeof(msg), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(msg))
			break; /* closed by the server */
		sent[i]++;
		/* Each job ends before the next arrives: none is refused
		 * for the in-flight bound, and every reply waits in its
		 * slot behind the first, which nobody reads. */
		usleep(3000);
	}
	return NULL;
}

/* test_main: the clients, on a thread of their own; the server runs on
 * the main thread until SIGTERM. */
static void *test_main(void *arg)
{
	pthread_t threads[NONREADERS];
	fprep_client *client = NULL;
	fprep_result res;
	uint64_t t0, us;
	int rv;

	(void)arg;
	for (int i = 0; i < 500 && client == NULL; i++)
		if (fprep_client_open(&client, url, 10000) != 0)
			usleep(10000);
	REQUIRE(client != NULL);
	for (int i = 0; i < NONREADERS; i++)
		REQUIRE(pthread_create(&threads[i], NULL, nonreader_main,
		                       (void *)(intptr_t)i) == 0);
	for (int i = 0; i < NONREADERS; i++)
		pthread_join(threads[i], NULL);
	usleep(200000); /* their replies are stuck by now */
	t0 = fprep__now_ns();
	rv = fprep_client_info(client, &res);
	us = (fprep__now_ns() - t0) / 1000;
	printf("non-readers sent %d and %d requests; INFO %s in %llu us\n",
	       sent[0], sent[1], rv == FPREP_OK ? "answered" : "failed",
	       (unsigned long long)us);
	CHECK(rv == FPREP_OK, "INFO: %s", fprep_strerror(rv));
	if (rv == FPREP_OK) {
		CHECK(res.header.status == FPREP_OK, "INFO status %u",
		      res.header.status);
		if (getenv("FPREP_TEST_VERBOSE") != NULL)
			printf("%.*s", (int)res.payload_size,
			       (const char *)res.payload);
		fprep_result_fini(&res);
	}
	CHECK(us < 1000000, "INFO took %llu us behind two non-readers",
	      (unsigned long long)us);
	fprep_client_close(client);
	kill(getpid(), SIGTERM);
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/fprep-shares-XXXXXX";
	static char listen[512];
	fprep__config cfg;
	pthread_t t;
	int status;

	/* nng initialises itself on first use without a lock that
	 * ThreadSanitizer sees: have that happen here, first. */
	nng_socket first;
	REQUIRE(nng_req0_open(&first) == 0);
	nng_close(first);

	REQUIRE(mkdtemp(dir) != NULL);
	fprep__config_init(&cfg);
	snprintf(cfg.listen[0], sizeof(cfg.listen[0]), "ipc://%s/s.sock", dir);
	snprintf(listen, sizeof(listen), "%s", cfg.listen[0]);
	url = listen;
	cfg.nlisten = 1;
	cfg.shutdown_timeout_ms = 2000;
	REQUIRE(pthread_create(&t, NULL, test_main, NULL) == 0);
	status = fprep__server_run(&cfg, fake_open(), "fake:0");
	pthread_join(t, NULL);
	for (int i = 0; i < NONREADERS; i++)
		close(nonreaders[i]);
	printf("server exit status %d\n", status);
	CHECK(status == 0, "server exit status %d", status);
	fprep__config_fini(&cfg);
	rmdir(dir);
	nng_fini();
	return check_failures ? 1 : 0;
}
