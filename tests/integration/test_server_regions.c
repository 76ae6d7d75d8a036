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
#include "frameprep/frameprep.h"
#include "server.h"

#define WAIT_MS 20000

struct fake_backend {
	fprep__backend b;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	fprep__queue held; /* operations queued, not yet run */
	unsigned queued;   /* operations queued so far */
	unsigned release;  /* operations the test lets run so far */
	unsigned ran;
	unsigned maps, unmaps;
	unsigned opens_done; /* OPENs whose done was called */
	int stop;
	pthread_t thread;
};

static struct fake_backend *fake;

/* fake_run runs one operation; called with the lock held. */
static void fake_run(struct fake_backend *fb, fprep__memreg *r)
{
	pthread_mutex_unlock(&fb->lock);
	if (r->verb == FPREP__MEMREG_OPEN) {
		r->status = fprep__memreg_map(r);
	} else {
		fprep__memreg_unmap(r);
		r->status = FPREP_OK;
	}
	pthread_mutex_lock(&fb->lock);
	if (r->verb == FPREP__MEMREG_OPEN)
		fb->maps += r->status == FPREP_OK;
	else
		fb->unmaps++;
	fb->ran++;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	r->done(r);
	pthread_mutex_lock(&fb->lock);
}

static void *fake_main(void *arg)
{
	struct fake_backend *fb = arg;
	fprep__qnode *n;

	pthread_mutex_lock(&fb->lock);
	for (;;) {
		if (fb->ran < fb->release &&
		    (n = fprep__queue_pop(&fb->held)) != NULL) {
			fake_run(fb,
			         fprep__container_of(n, fprep__memreg, link));
			continue;
		}
		if (fb->stop)
			break;
		pthread_cond_wait(&fb->cond, &fb->lock);
	}
	/* close: what is still queued runs now. */
	while ((n = fprep__queue_pop(&fb->held)) != NULL)
		fake_run(fb, fprep__container_of(n, fprep__memreg, link));
	pthread_mutex_unlock(&fb->lock);
	return NULL;
}

static int fake_submit(fprep__backend *b, fprep__job *job)
{
	(void)b;
	(void)job;
	return FPREP_EUNSUPPORTED;
}

static int fake_region_op(fprep__backend *b, fprep__memreg *r)
{
	struct fake_backend *fb = (struct fake_backend *)b;

	pthread_mutex_lock(&fb->lock);
	fprep__queue_push(&fb->held, &r->link);
	fb->queued++;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	return 0;
}

static void fake_info(fprep__backend *b, char *buf, size_t size)
{
	(void)b;
	(void)buf;
	(void)size;
}

static void fake_close(fprep__backend *b, int timeout_ms)
{
	struct fake_backend *fb = (struct fake_backend *)b;

	(void)timeout_ms;
	pthread_mutex_lock(&fb->lock);
	fb->stop = 1;
	pthread_cond_broadcast(&fb->cond);
	pthread_mutex_unlock(&fb->lock);
	pthread_join(fb->thread, NULL);
	/* The test reads the counters after the server returned. */
}

/* fake_wait waits until *counter reaches n; returns 0, or -1 after
 * WAIT_MS. */
static int fake_wait(const unsigned *counter, unsigned n)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&fake->lock);
	while (*counter < n && rc == 0)
		rc = pthread_cond_timedwait(&fake->cond, &fake->lock, &ts);
	pthread_mutex_unlock(&fake->lock);
	return *counter >= n ? 0 : -1;
}

static void fake_allow(unsigned n)
{
	pthread_mutex_lock(&fake->lock);
	fake->release = n;
	pthread_cond_broadcast(&fake->cond);
	pthread_mutex_unlock(&fake->lock);
}

/* fake_count reads a counter of the fake. */
static unsigned fake_count(const unsigned *counter)
{
	unsigned n;

	pthread_mutex_lock(&fake->lock);
	n = *counter;
	pthread_mutex_unlock(&fake->lock);
	return n;
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
	CHECK(fake_wait(&fake->queued, 1) == 0, "the OPEN was never queued");
	nng_close(s);
}

int main(void)
{
	char dir[] = "/tmp/fprep-regions-XXXXXX";
	char name[64];
	struct server_arg sa;
	fprep_client *c = NULL;
	fprep_region *r = NULL;
	pthread_t server, reg;
	unsigned queued;
	int fd, rv;

	/* nng 1.5.2 initialises itself on first use without a lock that
	 * ThreadSanitizer sees: have that happen here. */
	nng_socket first;
	REQUIRE(nng_req0_open(&first) == 0);
	nng_close(first);

	fake = calloc(1, sizeof(*fake));
	REQUIRE(fake != NULL);
	fake->b.name = "fake";
	fake->b.submit = fake_submit;
	fake->b.info = fake_info;
	fake->b.close = fake_close;
	fake->b.region_op = fake_region_op;
	fprep__queue_init(&fake->held);
	pthread_mutex_init(&fake->lock, NULL);
	pthread_cond_init(&fake->cond, NULL);
	REQUIRE(pthread_create(&fake->thread, NULL, fake_main, fake) == 0);

	snprintf(name, sizeof(name), "/fprep-test-srvreg-%ld", (long)getpid());
	shm_unlink(name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	REQUIRE(fd >= 0 && ftruncate(fd, 4096) == 0);
	close(fd);

	REQUIRE(mkdtemp(dir) != NULL);
	fprep__config_init(&sa.cfg);
	snprintf(sa.cfg.listen[0], sizeof(sa.cfg.listen[0]), "ipc://%s/s.sock",
	         dir);
	sa.cfg.nlisten = 1;
	sa.cfg.max_inflight = 8;
	sa.cfg.shutdown_timeout_ms = 1000;
	sa.status = -1;
	REQUIRE(pthread_create(&server, NULL, server_main, &sa) == 0);
	for (int i = 0; i < 500 && c == NULL; i++)
		if (fprep_client_open(&c, sa.cfg.listen[0], 10000) != 0)
			usleep(10000);
	REQUIRE(c != NULL);

	/* 1. The connection closes while its REGISTER is being mapped. */
	register_and_close(sa.cfg.listen[0], name);
	usleep(200 * 1000); /* let the close reach the loop (either order
	                       ends the same way) */
	fake_allow(1);
	CHECK(fake_wait(&fake->queued, 2) == 0,
	      "no CLOSE followed the orphaned OPEN");
	fake_allow(2);
	CHECK(fake_wait(&fake->ran, 2) == 0, "the CLOSE did not run");
	printf("1: maps %u unmaps %u\n", fake_count(&fake->maps),
	       fake_count(&fake->unmaps));
	CHECK(fake_count(&fake->maps) == 1 && fake_count(&fake->unmaps) == 1,
	      "orphaned region: not mapped once and unmapped once");
	CHECK(info_has(c, "\nregions: 0\n") && info_has(c, "\nshm_bytes: 0\n"),
	      "INFO still counts the orphaned region");

	/* 2. REGISTER and UNREGISTER through the client library. */
	fake_allow(1000);
	rv = fprep_region_open(&r, c, 8192);
	printf("2: region_open %s, id %u\n", fprep_err_name(rv),
	       r != NULL ? fprep_region_id(r) : 0);
	CHECK(rv == FPREP_OK && r != NULL, "region_open: %s",
	      fprep_err_name(rv));
	CHECK(info_has(c, "\nregions: 1\n"), "INFO does not count it");
	if (r != NULL)
		fprep_region_close(r);
	/* The reply came after the CLOSE ran. */
	CHECK(fake_count(&fake->unmaps) == 2,
	      "UNREGISTER answered before the unmap (%u)",
	      fake_count(&fake->unmaps));
	CHECK(info_has(c, "\nregions: 0\n"), "INFO still counts it");

	/* 3. Shutdown while a REGISTER waits in the backend's queue. */
	pthread_mutex_lock(&fake->lock);
	fake->release = fake->ran;
	queued = fake->queued;
	pthread_mutex_unlock(&fake->lock);
	struct register_arg ra = {.client = c, .rv = -1};
	REQUIRE(pthread_create(&reg, NULL, register_main, &ra) == 0);
	CHECK(fake_wait(&fake->queued, queued + 1) == 0,
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
	pthread_cond_destroy(&fake->cond);
	pthread_mutex_destroy(&fake->lock);
	free(fake);
	fprep__config_fini(&sa.cfg);
	shm_unlink(name);
	rmdir(dir);
	/* nng frees closed sockets and pipes on its own threads: wait for
	 * them, so the leak check at exit sees only what the test kept. */
	nng_fini();
	return check_failures ? 1 : 0;
}
