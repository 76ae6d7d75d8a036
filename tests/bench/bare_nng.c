/*
 * bare_nng.c: the round trip of a bare nng REQ/REP exchange between two
 * processes, with the sizes of a frameprep ECHO (a 128-byte request, a
 * 256-byte reply): the floor under frameprepd's ECHO latency, measured
 * beside it.
 *
 *   bare_nng serve URL              a cooked REP socket that answers each
 *                                   request with 256 bytes at once, on
 *                                   nng's callback thread, until SIGTERM
 *   bare_nng ping URL N [WARMUP]    N round trips, one at a time, from a
 *                                   REQ socket; prints p50 and p99 in us
 *
 * Exit status 0, or 1 with the reason on stderr.
 */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BARE_REQUEST_BYTES 128
#define BARE_REPLY_BYTES   256

struct bare_server {
	nng_ctx ctx;
	nng_aio *aio;
	int sending;
};

static void bare_cb(void *arg)
{
	struct bare_server *b = arg;
	nng_msg *msg;

	if (nng_aio_result(b->aio) != 0) {
		if (b->sending)
			nng_msg_free(nng_aio_get_msg(b->aio));
		if (nng_aio_result(b->aio) == NNG_ECLOSED)
			return;
		b->sending = 0;
		nng_ctx_recv(b->ctx, b->aio);
		return;
	}
	if (b->sending) {
		b->sending = 0;
		nng_ctx_recv(b->ctx, b->aio);
		return;
	}
	msg = nng_aio_get_msg(b->aio);
	if (nng_msg_realloc(msg, BARE_REPLY_BYTES) != 0) {
		nng_msg_free(msg);
		nng_ctx_recv(b->ctx, b->aio);
		return;
	}
	b->sending = 1;
	nng_aio_set_msg(b->aio, msg);
	nng_ctx_send(b->ctx, b->aio);
}

static int bare_serve(const char *url)
{
	struct bare_server b = {0};
	nng_socket sock;
	sigset_t set;
	int sig, rv;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if ((rv = nng_rep0_open(&sock)) != 0 ||
	    (rv = nng_ctx_open(&b.ctx, sock)) != 0 ||
	    (rv = nng_aio_alloc(&b.aio, bare_cb, &b)) != 0 ||
	    (rv = nng_listen(sock, url, NULL, 0)) != 0) {
		fprintf(stderr, "bare_nng serve %s: %s\n", url,
		        nng_strerror(rv));
		return 1;
	}
	nng_ctx_recv(b.ctx, b.aio);
	sigwait(&set, &sig);
	nng_close(sock);
	nng_aio_free(b.aio);
	return 0;
}

static int bare_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double bare_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int bare_ping(const char *url, long n, long warmup)
{
	nng_socket sock;
	double *us;
	int rv;

	us = calloc((size_t)n, sizeof(*us));
	if (us == NULL)
		return 1;
	if ((rv = nng_req0_open(&sock)) != 0 ||
	    (rv = nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 5000)) != 0 ||
	    (rv = nng_dial(sock, url, NULL, 0)) != 0) {
		fprintf(stderr, "bare_nng ping %s: %s\n", url,
		        nng_strerror(rv));
		free(us);
		return 1;
	}
	for (long i = -warmup; i < n; i++) {
		nng_msg *msg;
		double t0 = bare_now_us();

		if ((rv = nng_msg_alloc(&msg, BARE_REQUEST_BYTES)) != 0)
			break;
		memset(nng_msg_body(msg), (int)(i & 0xff), BARE_REQUEST_BYTES);
		if ((rv = nng_sendmsg(sock, msg, 0)) != 0) {
			nng_msg_free(msg);
			break;
		}
		if ((rv = nng_recvmsg(sock, &msg, 0)) != 0)
			break;
		if (nng_msg_len(msg) != BARE_REPLY_BYTES) {
			nng_msg_free(msg);
			rv = NNG_EPROTO;
			break;
		}
		nng_msg_free(msg);
		if (i >= 0)
			us[i] = bare_now_us() - t0;
	}
	nng_close(sock);
	if (rv != 0) {
		fprintf(stderr, "bare_nng ping: %s\n", nng_strerror(rv));
		free(us);
		return 1;
	}
	qsort(us, (size_t)n, sizeof(*us), bare_cmp);
	printf("bare nng REQ/REP round trip (%d B -> %d B), %ld requests at "
	       "c=1: p50 %.1f us, p99 %.1f us\n",
	       BARE_REQUEST_BYTES, BARE_REPLY_BYTES, n, us[n / 2],
	       us[(n * 99) / 100]);
	free(us);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "serve") == 0)
		return bare_serve(argv[2]);
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "ping") == 0) {
		long n = strtol(argv[3], NULL, 10);
		long w = argc == 5 ? strtol(argv[4], NULL, 10) : 100;

		if (n > 0 && w >= 0)
			return bare_ping(argv[2], n, w);
	}
	fprintf(stderr, "usage: bare_nng serve URL | bare_nng ping URL N "
	                "[WARMUP]\n");
	return 1;
}
