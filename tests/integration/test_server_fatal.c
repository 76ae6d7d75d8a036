/*
 * test_server_fatal.c: frameprepd's server loop with a backend that reports
 * a sticky device error (job->fatal), as a GPU backend does after a CUDA
 * context error.
 *
 * The fake backend holds jobs until NCLIENTS of them are in flight, then
 * fails the first with fatal set and completes the others normally. The
 * server must answer every request with an error naming the device failure
 * (the normal completions included: their results cannot be trusted), then
 * shut down in order and return exit status 1, so that the supervisor
 * restarts the daemon.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "backend.h"
#include "check.h"
#include "clock.h"
#include "config.h"
#include "fake_backend.h"
#include "frameprep/frameprep.h"
#include "server.h"
#include "server_fixture.h"

#define NCLIENTS 4

/* fatal_finish fails the first job with a sticky device error and
 * completes the others; the fake runs them once NCLIENTS are queued. */
static void fatal_finish(fake_backend *fb, fprep__job *job, unsigned n)
{
	(void)fb;
	job->t_start_ns = fprep__now_ns();
	if (n == 0) {
		job->status = FPREP_ECUDA;
		job->fatal = 1;
		snprintf(job->message, sizeof(job->message),
		         "cudaErrorIllegalAddress (simulated)");
	} else {
		memset(job->output, 0, job->output_size);
		job->status = FPREP_OK;
	}
	job->t_end_ns = fprep__now_ns();
}

struct client_arg {
	const char *url;
	int rv;
	uint32_t status;
	char message[FPREP_MESSAGE_SIZE];
};

static void *client_main(void *arg)
{
	struct client_arg *ca = arg;
	static uint8_t frame[64 * 48 * 3];
	fprep_client *client;
	fprep_request req;
	fprep_result res;

	client = server_fixture_client(ca->url);
	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = 32;
	req.out_height = 32;
	ca->rv = fprep_client_request(client, &req, frame, &res);
	if (ca->rv == FPREP_OK) {
		ca->status = res.header.status;
		snprintf(ca->message, sizeof(ca->message), "%s",
		         res.header.message);
		fprep_result_fini(&res);
	}
	fprep_client_close(client);
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/fprep-fatal-XXXXXX";
	struct client_arg args[NCLIENTS];
	pthread_t threads[NCLIENTS];
	fprep__config cfg;
	fake_backend *fb;
	int status;

	server_fixture_config(&cfg, dir);
	cfg.max_inflight = 8;
	for (int i = 0; i < NCLIENTS; i++) {
		args[i] = (struct client_arg){.url = cfg.listen[0], .rv = -1};
		REQUIRE(pthread_create(&threads[i], NULL, client_main,
		                       &args[i]) == 0);
	}
	fb = fake_backend_new();
	fb->batch = NCLIENTS;
	fb->finish = fatal_finish;
	status = server_fixture_run(&cfg, fb);
	for (int i = 0; i < NCLIENTS; i++) {
		pthread_join(threads[i], NULL);
		printf("client %d: rv %d status %s: %s\n", i, args[i].rv,
		       fprep_err_name((int)args[i].status), args[i].message);
		CHECK(args[i].rv == FPREP_OK && args[i].status == FPREP_ECUDA &&
		              strstr(args[i].message,
		                     "cudaErrorIllegalAddress") != NULL,
		      "client %d: not the device failure", i);
	}
	printf("server exit status %d\n", status);
	CHECK(status == 1, "server exit status %d, not 1", status);
	return server_fixture_end(&cfg, dir);
}
