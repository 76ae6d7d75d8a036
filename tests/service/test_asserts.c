/*
 * test_asserts.c: the daemon's invariants are checked (FPREP__ASSERT,
 * fprep_assert.h): each case breaks one on purpose in a child process and
 * sees the child abort with the condition named on stderr, after the same
 * steps done right pass in the parent: a slot state step the machine does
 * not take, a second reply to one request, and a slot moved from a thread
 * that is not the loop's. Debug builds only (the
 * sanitizer builds of tests/run-all.sh are Debug); where the checks are
 * compiled out (Release), the test exits 77 (skipped).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "daemon.h"

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			failures++;                                            \
		}                                                              \
	} while (0)

/* dies runs fn(arg) in a child and tells whether the child was ended by
 * SIGABRT (a failed FPREP__ASSERT) rather than returning. */
static int dies(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		return 0;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

/* A server and one slot of it, IDLE, on this thread. */
static fprep__server srv;
static fprep__slot slot;

static void slot_reset(void)
{
	memset(&srv, 0, sizeof(srv));
	memset(&slot, 0, sizeof(slot));
	srv.loop_thread = pthread_self();
	slot.srv = &srv;
	slot.state = FPREP__SLOT_IDLE;
}

static void step_idle_to_send(void *arg)
{
	(void)arg;
	fprep__slot_enter(&slot, FPREP__SLOT_SEND);
}

static void step_send_to_work(void *arg)
{
	(void)arg;
	fprep__slot_enter(&slot, FPREP__SLOT_RECV);
	fprep__slot_enter(&slot, FPREP__SLOT_SEND);
	fprep__slot_enter(&slot, FPREP__SLOT_WORK);
}

/* The machine's own steps: RECV, WORK, SEND, RECV, REGION, SEND, IDLE. */
static void slot_steps(void)
{
	slot_reset();
	fprep__slot_enter(&slot, FPREP__SLOT_RECV);
	CHECK(srv.active == 1, "active %u after IDLE -> RECV", srv.active);
	fprep__slot_enter(&slot, FPREP__SLOT_WORK);
	fprep__slot_enter(&slot, FPREP__SLOT_SEND);
	fprep__slot_enter(&slot, FPREP__SLOT_RECV);
	fprep__slot_enter(&slot, FPREP__SLOT_REGION);
	fprep__slot_enter(&slot, FPREP__SLOT_SEND);
	fprep__slot_enter(&slot, FPREP__SLOT_IDLE);
	CHECK(srv.active == 0, "active %u after the round", srv.active);
	slot_reset();
	CHECK(dies(step_idle_to_send, NULL), "IDLE -> SEND did not abort");
	slot_reset();
	CHECK(dies(step_send_to_work, NULL), "SEND -> WORK did not abort");
}

static void *other_thread(void *arg)
{
	(void)arg;
	fprep__slot_enter(&slot, FPREP__SLOT_RECV);
	return NULL;
}

static void step_from_other_thread(void *arg)
{
	pthread_t t;

	(void)arg;
	if (pthread_create(&t, NULL, other_thread, NULL) == 0)
		pthread_join(t, NULL);
}

static void slot_thread(void)
{
	slot_reset();
	CHECK(dies(step_from_other_thread, NULL),
	      "a slot moved off the loop thread did not abort");
}

/* Deliveries into memory: the loop's queue takes the end event. */
static uint8_t area[FPREP_REPLY_HEADER_SIZE] __attribute__((aligned(8)));
static fprep__memreg region;
static unsigned sent;

static void sent_event(fprep__event *ev, void *data)
{
	(void)ev;
	(void)data;
	sent++;
}

static void deliver_twice(void *arg)
{
	(void)arg;
	(void)fprep__sink_deliver(&slot, NULL, 1000);
	fprep__evq_drain(&srv.evq);
	(void)fprep__sink_deliver(&slot, NULL, 1000);
}

static void one_reply(void)
{
	slot_reset();
	CHECK(uv_loop_init(&srv.loop) == 0, "uv_loop_init");
	CHECK(fprep__evq_init(&srv.evq, &srv.loop, sent_event, NULL, NULL) == 0,
	      "evq_init");
	region.kind = FPREP__MEMREG_SHM;
	region.base = area;
	region.size = sizeof(area);
	slot.sink = (fprep__sink){
	        .kind = FPREP__SINK_ENTRY, .region = &region, .area = area};
	CHECK(fprep__sink_deliver(&slot, NULL, 1000) == 1, "first delivery");
	fprep__evq_drain(&srv.evq);
	CHECK(sent == 1, "%u end events for one delivery", sent);
	slot.delivered = 0; /* the next request */
	CHECK(dies(deliver_twice, NULL),
	      "a second reply to one request did not abort");
	fprep__evq_fini(&srv.evq);
	CHECK(uv_run(&srv.loop, UV_RUN_DEFAULT) == 0, "loop still busy");
	CHECK(uv_loop_close(&srv.loop) == 0, "loop did not close");
}

int main(void)
{
	if (!FPREP__ASSERTS) {
		printf("FPREP__ASSERT is compiled out of this build (NDEBUG): "
		       "skipped; the Debug builds run it\n");
		return 77;
	}
	slot_steps();
	slot_thread();
	one_reply();
	if (failures == 0)
		printf("asserts: illegal slot steps, a slot moved off the loop "
		       "thread and a second reply each abort\n");
	return failures == 0 ? 0 : 1;
}
