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
 *
 * Then the shares of the daemon-wide registration budgets (D7: one user
 * took all of --max-shm-bytes, or all 64 doorbells): three connections of
 * this process's uid register shared memory, doorbells and CUDA regions
 * (the fake backend maps shared memory and takes any CUDA handle) against
 * small per-connection and per-uid shares; each refusal names its limit,
 * and what one connection gives back another of the uid may take.
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
#include "client_util.h"
#include "clock.h"
#include "config.h"
#include "fake_backend.h"
#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "memreg.h"
#include "server.h"
#include "server_fixture.h"
#include "sp_peer.h"

#define NONREADERS 2
#define SENDS      33  /* each non-reader: one more than it can hold */
#define OUT_SIDE   448 /* a 448 x 448 x 3 float tensor: 2.4 MB a reply */
#define MIB        ((size_t)1 << 20)
/* The shares under test. */
#define SHM_PER_CONN   (4 * MIB)
#define SHM_PER_UID    (6 * MIB)
#define BELLS_PER_CONN 1
#define BELLS_PER_UID  2
#define CUDA_PER_UID   2

static const char *url;
static int nonreaders[NONREADERS];
static int sent[NONREADERS];

/* nonreader_main sends SENDS FRAME requests, framed as nng's ipc
 * transport does (type 1, a 64-bit length, the REQ request id, the
 * request), and never reads a reply. */
static void *nonreader_main(void *arg)
{
	int i = (int)(intptr_t)arg;
	struct sp_peer_frame f;
	int fd = sp_peer_connect(url, 500, 0);

	REQUIRE(fd >= 0);
	nonreaders[i] = fd;
	sp_peer_frame_init(&f, OUT_SIDE);
	for (int k = 0; k < SENDS; k++) {
		sp_peer_frame_id(&f, 0x80000000u | (uint32_t)(k + 1),
		                 (uint64_t)k + 1);
		if (send(fd, f.bytes, sizeof(f.bytes), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(f.bytes))
			break; /* closed by the server */
		sent[i]++;
		/* Each job ends before the next arrives: none is refused
		 * for the in-flight bound, and every reply waits in its
		 * slot behind the first, which nobody reads. */
		usleep(3000);
	}
	return NULL;
}

/* open_client connects a client of its own (one connection). */
static fprep_client *open_client(void)
{
	return server_fixture_client(url);
}

/* region_refused checks that a region of size bytes is refused to c with
 * FPREP_ELIMIT and a message naming limit. */
static void region_refused(fprep_client *c, const char *who, size_t size,
                           const char *limit)
{
	fprep_region *r = NULL;
	int rv = fprep_region_open(&r, c, size);
	const char *why = fprep_client_last_error(c);

	CHECK(rv == FPREP_ELIMIT, "%s: %zu MiB region: %s (want ELIMIT)", who,
	      size / MIB, fprep_strerror(rv));
	CHECK(rv != 0 && strstr(why, limit) != NULL,
	      "%s: the refusal does not name %s: %s", who, limit, why);
	printf("%s: %zu MiB refused: %s\n", who, size / MIB, why);
	fprep_region_close(r);
}

/* region_ok opens a region of size bytes on c, which must be accepted. */
static fprep_region *region_ok(fprep_client *c, const char *who, size_t size)
{
	fprep_region *r = NULL;
	int rv = fprep_region_open(&r, c, size);

	CHECK(rv == 0, "%s: %zu MiB region: %s: %s", who, size / MIB,
	      fprep_strerror(rv), fprep_client_last_error(c));
	return r;
}

/* doorbell sends a DOORBELL for a one-entry area at the start of r on c:
 * accepted when limit is NULL, else refused with FPREP_ELIMIT naming
 * limit. */
static void doorbell(fprep_client *c, fprep_region *r, const char *who,
                     const char *limit)
{
	fprep_register_request req;
	fprep_result res;
	char why[FPREP_MESSAGE_SIZE] = "";
	int rv = FPREP_EINVAL;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_DOORBELL;
	req.region_id = r != NULL ? fprep_region_id(r) : 0;
	req.doorbell_entries = 1;
	if (fprep_client_register(c, &req, &res) != 0) {
		snprintf(why, sizeof(why), "%s", fprep_client_last_error(c));
	} else {
		rv = (int)res.header.status;
		snprintf(why, sizeof(why), "%s", res.header.message);
		fprep_result_fini(&res);
	}
	if (limit == NULL) {
		CHECK(rv == 0, "%s: doorbell: %s: %s", who, fprep_err_name(rv),
		      why);
		return;
	}
	CHECK(rv == FPREP_ELIMIT && strstr(why, limit) != NULL,
	      "%s: doorbell: %s (%s), want ELIMIT naming %s", who,
	      fprep_err_name(rv), why, limit);
	printf("%s: doorbell refused: %s\n", who, why);
}

/* register_cuda sends a REGISTER_CUDA with a made-up handle on c; returns
 * the reply's status, its message in msg. */
static int register_cuda(fprep_client *c, char *msg, size_t msg_size)
{
	return client_register_made_up(c, 0, MIB, msg, msg_size);
}

/* test_budget_shares: D7, on three connections of this process's uid
 * (the server runs with the shares above). */
static void test_budget_shares(void)
{
	fprep_client *a = open_client(), *b = open_client(), *c = open_client();
	fprep_region *a1, *a2, *b1, *b2, *c1;
	fprep_result res;
	char msg[FPREP_MESSAGE_SIZE], want[64];
	int rv;

	/* Shared memory: A holds 2 MiB and may not pass its 4 MiB... */
	a1 = region_ok(a, "A", 1 * MIB);
	a2 = region_ok(a, "A", 1 * MIB);
	region_refused(a, "A", 3 * MIB, "max-shm-bytes-per-conn");
	/* ...B brings the uid to its 6 MiB, within its own share... */
	b1 = region_ok(b, "B", 2 * MIB);
	b2 = region_ok(b, "B", 2 * MIB);
	/* ...so C, a connection holding nothing, is refused... */
	region_refused(c, "C", 1 * MIB, "max-shm-bytes-per-uid");
	/* ...until A gives 1 MiB back. */
	fprep_region_close(a2);
	c1 = region_ok(c, "C", 1 * MIB);

	/* Doorbells: one a connection, two the uid. */
	doorbell(a, a1, "A", NULL);
	doorbell(b, b1, "B", NULL);
	doorbell(b, b2, "B", "--max-doorbells-per-conn");
	doorbell(c, c1, "C", "--max-doorbells-per-uid");

	/* CUDA regions: two the uid, whichever connections hold them. */
	rv = register_cuda(a, msg, sizeof(msg));
	CHECK(rv == FPREP_OK, "A: REGISTER_CUDA: %s: %s", fprep_err_name(rv),
	      msg);
	rv = register_cuda(b, msg, sizeof(msg));
	CHECK(rv == FPREP_OK, "B: REGISTER_CUDA: %s: %s", fprep_err_name(rv),
	      msg);
	rv = register_cuda(c, msg, sizeof(msg));
	CHECK(rv == FPREP_ELIMIT && strstr(msg, "max-cuda-regions-per-uid"),
	      "C: third CUDA region of the uid: %s: %s", fprep_err_name(rv),
	      msg);
	printf("C: CUDA region refused: %s\n", msg);

	/* INFO shows the shares. */
	rv = fprep_client_info(a, &res);
	CHECK(rv == FPREP_OK, "INFO: %s", fprep_strerror(rv));
	if (rv == FPREP_OK) {
		const char *text = (const char *)res.payload;

		snprintf(want, sizeof(want), "max_shm_bytes_per_uid: %zu\n",
		         SHM_PER_UID);
		CHECK(memmem(text, res.payload_size, want, strlen(want)) !=
		              NULL,
		      "INFO lacks \"%s\"", want);
		snprintf(want, sizeof(want), "max_doorbells_per_conn: %d\n",
		         BELLS_PER_CONN);
		CHECK(memmem(text, res.payload_size, want, strlen(want)) !=
		              NULL,
		      "INFO lacks \"%s\"", want);
		fprep_result_fini(&res);
	}
	fprep_region_close(c1);
	fprep_region_close(b2);
	fprep_region_close(b1);
	fprep_region_close(a1);
	fprep_client_close(c);
	fprep_client_close(b);
	fprep_client_close(a);
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
	client = server_fixture_client(url);
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
	/* Without the per-connection bound INFO waited 9.7 s (the send
	 * timeout's share); 1.5 s was seen under ThreadSanitizer on two
	 * cores at load 18, so the bound is 3 s. */
	CHECK(us < 3000000, "INFO took %llu us behind two non-readers",
	      (unsigned long long)us);
	fprep_client_close(client);
	test_budget_shares();
	kill(getpid(), SIGTERM);
	return NULL;
}

/* shares_config sets the per-connection and per-uid shares under test. */
static void shares_config(fprep__config *cfg)
{
	cfg->shares.shm_bytes_per_conn = SHM_PER_CONN;
	cfg->shares.shm_bytes_per_uid = SHM_PER_UID;
	cfg->shares.doorbells_per_conn = BELLS_PER_CONN;
	cfg->shares.doorbells_per_uid = BELLS_PER_UID;
	cfg->shares.cuda_per_uid = CUDA_PER_UID;
}

int main(void)
{
	char dir[] = "/tmp/fprep-shares-XXXXXX";
	int status = server_fixture_main(dir, &url, shares_config, test_main);

	/* The non-readers stayed connected until the server ended. */
	for (int i = 0; i < NONREADERS; i++)
		close(nonreaders[i]);
	return status;
}
