/*
 * test_server_regions.c: frameprepd's server loop and its regions module
 * with a backend whose administrative queue the test holds, so that the
 * races of a registration are played in a fixed order:
 *
 *   1. a connection closes while its REGISTER is being mapped: the region
 *      never becomes usable, it is unmapped, and INFO shows no region;
 *   2. a REGISTER and UNREGISTER round trip: the UNREGISTER is answered
 *      only after the backend closed the region;
 *   3. shutdown (SIGTERM) while a REGISTER waits in the queue: the drain
 *      deadline closes the backend, which runs it; the client gets
 *      ESHUTDOWN and the server exits 0 with everything unmapped.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "backend.h"
#include "check.h"
#include "config.h"
#include "fake_backend.h"
#include "frameprep/frameprep.h"
#include "server.h"
#include "server_fixture.h"
#include "shm_object.h"

#define WAIT_MS 20000

static fake_backend *fake;

/* fake_wait waits until *counter of the fake reaches n; returns 0, or -1
 * after WAIT_MS. */
static int fake_wait(const unsigned *counter, unsigned n)
{
	return fake_backend_wait(fake, counter, n, WAIT_MS);
}

struct register_arg {
	fprep_client *client;
	int rv;
};

/* register_main opens a region (REGISTER) and closes it if that worked. */
static void *register_main(void *arg)
{
	struct register_arg *ra = arg;
	fprep_region *r = NULL;

	ra->rv = fprep_region_open(&r, ra->client, 4096);
	if (r != NULL)
		fprep_region_close(r);
	return NULL;
}

struct server_arg {
	fprep__config cfg;
	int status;
};

static void *server_main(void *arg)
{
	struct server_arg *sa = arg;

	sa->status = fprep__server_run(&sa->cfg, &fake->b, "fake:0");
	return NULL;
}

/* info_has tells whether the daemon's INFO text holds line. */
static int info_has(fprep_client *c, const char *line)
{
	fprep_result res;
	int found;

	if (fprep_client_info(c, &res) != 0)
		return 0;
	found = res.payload != NULL &&
	        strstr((const char *)res.payload, line) != NULL;
	fprep_result_fini(&res);
	return found;
}

/* info_soon tells whether the daemon's INFO text holds line within about
 * a second: an INFO is answered ahead of the completions the loop has
 * queued (service/evq.h), so what a backend finished just before may show
 * an INFO later. */
static int info_soon(fprep_client *c, const char *line)
{
	for (int i = 0; i < 100; i++) {
		if (info_has(c, line))
			return 1;
		usleep(10 * 1000);
	}
	return 0;
}

/* register_and_close sends a REGISTER of name on a connection of its own
 * and closes it once the backend has the OPEN queued, before any reply. */
static void register_and_close(const char *url, const char *name)
{
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	fprep_register_request req;
	nng_socket s;

	memset(&req, 0, sizeof(req));
	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_REGISTER;
	req.request_id = 77;
	req.region_size = 4096;
	snprintf(req.region_name, sizeof(req.region_name), "%s", name);
	fprep_register_request_encode(&req, hdr);
	REQUIRE(nng_req0_open(&s) == 0);
	REQUIRE(nng_dial(s, url, NULL, 0) == 0);
	REQUIRE(nng_send(s, hdr, sizeof(hdr), 0) == 0);
	CHECK(fake_wait(&fake->regions_queued, 1) == 0,
	      "the OPEN was never queued");
	nng_close(s);
}

int main(void)
{
	char dir[] = "/tmp/fprep-regions-XXXXXX";
	char name[64];
	struct server_arg sa;
	fprep_client *c;
	fprep_region *r = NULL;
	pthread_t server, reg;
	unsigned queued;
	int fd, rv;

	server_fixture_config(&sa.cfg, dir);
	fake = fake_backend_new();
	fake->refuse = 1;       /* no jobs here */
	fake->hold_regions = 1; /* the test lets each operation run */
	fake->info = "";
	fake_backend_start(fake);

	fd = shm_object_make(name, sizeof(name), "srvreg", 4096);
	REQUIRE(fd >= 0);
	close(fd);

	sa.cfg.max_inflight = 8;
	sa.cfg.shutdown_timeout_ms = 1000;
	sa.status = -1;
	REQUIRE(pthread_create(&server, NULL, server_main, &sa) == 0);
	c = server_fixture_client(sa.cfg.listen[0]);

	/* 1. The connection closes while its REGISTER is being mapped. */
	register_and_close(sa.cfg.listen[0], name);
	usleep(200 * 1000); /* let the close reach the loop (either order
	                       ends the same way) */
	fake_backend_allow_regions(fake, 1);
	CHECK(fake_wait(&fake->regions_queued, 2) == 0,
	      "no CLOSE followed the orphaned OPEN");
	fake_backend_allow_regions(fake, 2);
	CHECK(fake_wait(&fake->regions_ran, 2) == 0, "the CLOSE did not run");
	printf("1: maps %u unmaps %u\n", fake_backend_count(fake, &fake->maps),
	       fake_backend_count(fake, &fake->unmaps));
	CHECK(fake_backend_count(fake, &fake->maps) == 1 &&
	              fake_backend_count(fake, &fake->unmaps) == 1,
	      "orphaned region: not mapped once and unmapped once");
	CHECK(info_soon(c, "\nregions: 0\n") &&
	              info_soon(c, "\nshm_bytes: 0\n"),
	      "INFO still counts the orphaned region");

	/* 2. REGISTER and UNREGISTER through the client library. */
	fake_backend_allow_regions(fake, 1000);
	rv = fprep_region_open(&r, c, 8192);
	printf("2: region_open %s, id %u\n", fprep_err_name(rv),
	       r != NULL ? fprep_region_id(r) : 0);
	CHECK(rv == FPREP_OK && r != NULL, "region_open: %s",
	      fprep_err_name(rv));
	CHECK(info_has(c, "\nregions: 1\n"), "INFO does not count it");
	if (r != NULL)
		fprep_region_close(r);
	/* The reply came after the CLOSE ran. */
	CHECK(fake_backend_count(fake, &fake->unmaps) == 2,
	      "UNREGISTER answered before the unmap (%u)",
	      fake_backend_count(fake, &fake->unmaps));
	CHECK(info_has(c, "\nregions: 0\n"), "INFO still counts it");

	/* 3. Shutdown while a REGISTER waits in the backend's queue. */
	fake_backend_allow_regions(
	        fake, fake_backend_count(fake, &fake->regions_ran));
	queued = fake_backend_count(fake, &fake->regions_queued);
	struct register_arg ra = {.client = c, .rv = -1};
	REQUIRE(pthread_create(&reg, NULL, register_main, &ra) == 0);
	CHECK(fake_wait(&fake->regions_queued, queued + 1) == 0,
	      "the OPEN was never queued");
	kill(getpid(), SIGTERM);
	pthread_join(server, NULL);
	pthread_join(reg, NULL);
	fprep_client_close(c);
	printf("3: region_open %s; server exit status %d; maps %u unmaps %u\n",
	       fprep_err_name(ra.rv), sa.status, fake->maps, fake->unmaps);
	CHECK(ra.rv == FPREP_ESHUTDOWN, "region_open during shutdown: %s",
	      fprep_err_name(ra.rv));
	CHECK(sa.status == 0, "server exit status %d", sa.status);
	/* The backend's close ran the OPEN; the region was unmapped by the
	 * loop once the backend was gone (leak checkers see the rest). */
	CHECK(fake->maps == 3 && fake->unmaps == 2, "%u maps, %u unmaps",
	      fake->maps, fake->unmaps);
	fake_backend_free(fake);
	shm_unlink(name);
	return server_fixture_end(&sa.cfg, dir);
}
