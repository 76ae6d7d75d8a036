/*
 * test_server_nonreaders.c: connections that never read their replies
 * (issue 35, item 3) cannot keep another client from the server's request
 * slots, however many there are. 4, then 16, connections (the SP protocol
 * spoken by hand over the ipc socket, so that nothing reads for them) each
 * send FRAME requests whose replies are large (2.4 MB; 0.6 MB under a
 * sanitizer), as many as one connection may hold, never read one, and
 * connect again at once when the server closes them. Meanwhile another
 * connection of the same uid (the reserve keeps slots for connections that hold
 * none; the per-uid share cannot be told apart in one process) sends INFO
 * requests one at a time. Before the reserve, four non-readers made INFOs wait
 * the whole 10 s send timeout; with it, an INFO still waited behind the
 * requests received before it, each a 2.4 MB reply that the loop allocates (and
 * nng zeroes): 18 ms on average, up to 101 ms on a quiet machine and 750 ms at
 * load 15, all between nng's receipt and the loop. Now an INFO goes to the loop
 * ahead of them (its receipt to its reply sent: under a millisecond) and
 * is never refused for the shares. Every one is answered within
 * INFO_WORST_US and their median within INFO_MEDIAN_US. Those bounds hold
 * on a loaded machine (the client, the loop and nng's threads share two
 * cores with the non-readers and whatever else runs; at load 20 the
 * worst round trips, 100 to 300 ms, are spent outside the server): the
 * 100 ms target is read from the printed figures, on a quiet one. Once the
 * non-readers are gone, the memory of their replies is given back: the resident
 * set comes back within twice its idle size. The server runs with its defaults
 * and a fake backend that completes each job at once.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
#include "fake_backend.h"
#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "memreg.h"
#include "server.h"
#include "server_fixture.h"
#include "sp_peer.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

#define MAX_NONREADERS 16
#define SENDS          21 /* each connection: as many as it may hold */
/* A 448 x 448 x 3 float tensor: 2.4 MB; under a sanitizer 224 x 224 (0.6
 * MB, still far past a socket's buffers): the sanitizer's cost per byte
 * allocated and freed (ThreadSanitizer's shadow, on the loop and nng's
 * threads: INFO medians of 250 ms at load 10 with 2.4 MB, whether or not
 * the INFO goes first) is not what is measured here. */
#if RSS_CHECKED
#define OUT_SIDE 448
#else
#define OUT_SIDE 224
#endif
#define INFOS         40 /* INFO requests measured, one every 10 ms */
#define INFO_BOUND_US 100000
#define RECONNECT_US  5000 /* the pause before a closed one reconnects */
/* The bounds checked: every INFO, and their median (the failure they
 * catch takes 10 s; a loaded machine delays the loop by a few hundred
 * ms at worst: 750 ms seen at load 15 on two cores). */
#define INFO_WORST_US  3000000
#define INFO_MEDIAN_US 250000

static const char *url;
static atomic_int stop_flood;
static atomic_int connects, closed_by_server;

/* nonreader_main: until stop_flood, connects, sends SENDS FRAME requests
 * framed as nng's ipc transport does (type 1, a 64-bit length, the REQ
 * request id, the request), never reads a reply, and waits for the
 * server to close the connection, then connects again. */
static void *nonreader_main(void *arg)
{
	struct sp_peer_frame f;
	uint32_t id = 0;

	(void)arg;
	sp_peer_frame_init(&f, OUT_SIDE);
	while (!atomic_load(&stop_flood)) {
		int fd = sp_peer_connect(url, 1, 1);

		if (fd < 0) {
			usleep(1000);
			continue;
		}
		connects++;
		for (int k = 0; k < SENDS && !atomic_load(&stop_flood); k++) {
			id = (id + 1) & 0x7fffffffu;
			sp_peer_frame_id(&f, id | 0x80000000u, id);
			if (send(fd, f.bytes, sizeof(f.bytes), MSG_NOSIGNAL) !=
			    (ssize_t)sizeof(f.bytes))
				break; /* closed by the server */
			usleep(1000);
		}
		/* Never read: wait until the server closes it. */
		while (!atomic_load(&stop_flood)) {
			struct pollfd p = {fd, POLLRDHUP, 0};

			if (poll(&p, 1, 20) > 0 &&
			    (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
				closed_by_server++;
				break;
			}
		}
		close(fd);
		usleep(RECONNECT_US);
	}
	return NULL;
}

/* rss_kib: this process's resident set, KiB. */
static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* info_us sends one INFO on c; returns its round trip in microseconds
 * (CHECKed to be answered). */
static uint64_t info_us(fprep_client *c)
{
	fprep_result res;
	uint64_t t0 = fprep__now_ns(), us;
	int rv = fprep_client_info(c, &res);

	us = (fprep__now_ns() - t0) / 1000;
	CHECK(rv == FPREP_OK, "INFO: %s: %s", fprep_strerror(rv),
	      fprep_client_last_error(c));
	if (rv == FPREP_OK) {
		CHECK(res.header.status == FPREP_OK, "INFO status %u",
		      res.header.status);
		if (us >= INFO_BOUND_US / 2)
			printf("INFO took %llu us\n", (unsigned long long)us);
		fprep_result_fini(&res);
	}
	return us;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* flood runs n non-readers while INFO requests are timed on c. */
static void flood(fprep_client *c, int n, long idle_kib)
{
	pthread_t threads[MAX_NONREADERS];
	uint64_t worst = 0, sum = 0, us, all[INFOS];
	long peak = 0, after;
	int over = 0;

	atomic_store(&stop_flood, 0);
	connects = closed_by_server = 0;
	for (int i = 0; i < n; i++)
		REQUIRE(pthread_create(&threads[i], NULL, nonreader_main,
		                       NULL) == 0);
	usleep(300000); /* they hold what they may by now */
	for (int i = 0; i < INFOS; i++) {
		us = info_us(c);
		all[i] = us;
		sum += us;
		worst = us > worst ? us : worst;
		over += us >= INFO_BOUND_US;
		if (rss_kib() > peak)
			peak = rss_kib();
		usleep(10000);
	}
	atomic_store(&stop_flood, 1);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	/* The server gives freed reply memory back within a few seconds of
	 * going idle. */
	for (int i = 0; i < 50 && (after = rss_kib()) > 2 * idle_kib; i++)
		usleep(100000);
	after = rss_kib();
	printf("%d non-readers (%d connections, %d closed by the server): "
	       "INFO mean %llu us, worst %llu us, %d of %d over %d ms; RSS "
	       "idle %ld KiB, peak %ld KiB, after %ld KiB\n",
	       n, (int)connects, (int)closed_by_server,
	       (unsigned long long)(sum / INFOS), (unsigned long long)worst,
	       over, INFOS, INFO_BOUND_US / 1000, idle_kib, peak, after);
	qsort(all, INFOS, sizeof(all[0]), cmp_u64);
	printf("%d non-readers: INFO median %llu us\n", n,
	       (unsigned long long)all[INFOS / 2]);
	CHECK(all[INFOS / 2] < INFO_MEDIAN_US,
	      "%d non-readers: INFO median %llu us (bound %d us)", n,
	      (unsigned long long)all[INFOS / 2], INFO_MEDIAN_US);
	CHECK(worst < INFO_WORST_US,
	      "%d non-readers: INFO took up to %llu us (bound %d us)", n,
	      (unsigned long long)worst, INFO_WORST_US);
	/* A sanitizer's allocator keeps freed memory on purpose (ASan's
	 * quarantine): only glibc's gives it back, so only the plain build
	 * can tell. */
	if (!RSS_CHECKED)
		printf("%d non-readers gone: RSS not checked under a "
		       "sanitizer's allocator\n",
		       n);
	else
		CHECK(after <= 2 * idle_kib,
		      "%d non-readers gone: RSS %ld KiB, idle %ld KiB", n,
		      after, idle_kib);
}

/* test_main: the clients, on a thread of their own; the server runs on
 * the main thread until SIGTERM. */
static void *test_main(void *arg)
{
	fprep_client *client = NULL;
	long idle_kib;

	(void)arg;
	client = server_fixture_client(url);
	(void)info_us(client);
	idle_kib = rss_kib();
	flood(client, 4, idle_kib);
	flood(client, 16, idle_kib);
	fprep_client_close(client);
	kill(getpid(), SIGTERM);
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/fprep-nonreaders-XXXXXX";

	return server_fixture_main(dir, &url, NULL, test_main);
}
