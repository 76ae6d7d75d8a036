/*
 * server_fixture.h: a frameprepd loop run in the test's own process
 * (fprep__server_run on the fake backend, fake_backend.h) and the clients
 * that dial it. The loop runs on the thread that calls server_fixture_run
 * (main's); the test's clients run on threads of their own and end it with
 * SIGTERM. Header-only.
 */
#ifndef FPREP_TESTS_SERVER_FIXTURE_H
#define FPREP_TESTS_SERVER_FIXTURE_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "fake_backend.h"
#include "frameprep/frameprep.h"
#include "server.h"

/* server_fixture_config readies *cfg (fprep__config_init's defaults) to
 * listen on ipc://DIR/s.sock alone, DIR a new directory made from the
 * mkdtemp template dir (changed in place; the test rmdirs it), and to give
 * a shutdown 2000 ms. First it has nng initialise itself on this thread:
 * nng 1.5.2 does that on first use without a lock ThreadSanitizer sees,
 * so the clients' threads and the server must not race to it. Ends the
 * program when it cannot. */
static inline void server_fixture_config(fprep__config *cfg, char *dir)
{
	nng_socket first;

	REQUIRE(nng_req0_open(&first) == 0);
	nng_close(first);
	REQUIRE(mkdtemp(dir) != NULL);
	fprep__config_init(cfg);
	snprintf(cfg->listen[0], sizeof(cfg->listen[0]), "ipc://%s/s.sock",
	         dir);
	cfg->nlisten = 1;
	cfg->shutdown_timeout_ms = 2000;
}

/* server_fixture_run starts fb (fake_backend_new's, set as the test
 * needs), serves cfg on it until the server stops, frees fb and returns
 * fprep__server_run's exit status. */
static inline int server_fixture_run(fprep__config *cfg, fake_backend *fb)
{
	int status = fprep__server_run(cfg, fake_backend_start(fb), "fake:0");

	fake_backend_free(fb);
	return status;
}

/* server_fixture_serve runs test(NULL) on a thread of its own, which ends
 * the server with SIGTERM when it is done, against cfg's server on fb (as
 * server_fixture_run), and returns the server's exit status, printed, once
 * both have ended. */
static inline int server_fixture_serve(fprep__config *cfg, fake_backend *fb,
                                       void *(*test)(void *))
{
	pthread_t t;
	int status;

	REQUIRE(pthread_create(&t, NULL, test, NULL) == 0);
	status = server_fixture_run(cfg, fb);
	pthread_join(t, NULL);
	printf("server exit status %d\n", status);
	return status;
}

/* server_fixture_end frees cfg, removes dir and waits for nng's own
 * threads to free the closed sockets and pipes, so that the leak check at
 * exit sees only what the test kept. Returns the program's exit status. */
static inline int server_fixture_end(fprep__config *cfg, const char *dir)
{
	fprep__config_fini(cfg);
	rmdir(dir);
	nng_fini();
	return check_failures ? 1 : 0;
}

/* server_fixture_main is a test program's main: it readies a config
 * (server_fixture_config, dir the mkdtemp template), points *url at its
 * listen URL, lets configure (when not NULL) change it, serves it on the
 * fake backend (each job completed at once) while test(NULL) runs
 * (server_fixture_serve), CHECKs that the server exited with 0 and returns
 * server_fixture_end's status. */
static inline int server_fixture_main(char *dir, const char **url,
                                      void (*configure)(fprep__config *),
                                      void *(*test)(void *))
{
	fprep__config cfg;
	int status;

	server_fixture_config(&cfg, dir);
	*url = cfg.listen[0];
	if (configure != NULL)
		configure(&cfg);
	status = server_fixture_serve(&cfg, fake_backend_new(), test);
	CHECK(status == 0, "server exit status %d", status);
	return server_fixture_end(&cfg, dir);
}

/* server_fixture_client dials url (its own connection), trying for up to
 * 5 s while the server starts; ends the program when it cannot. */
static inline fprep_client *server_fixture_client(const char *url)
{
	fprep_client *c = NULL;

	for (int i = 0; i < 500 && c == NULL; i++)
		if (fprep_client_open(&c, url, 10000) != 0)
			usleep(10000);
	REQUIRE(c != NULL);
	return c;
}

#endif /* FPREP_TESTS_SERVER_FIXTURE_H */
