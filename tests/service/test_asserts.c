/*
 * test_asserts.c: the daemon's invariants are checked (FPREP__ASSERT,
 * fprep_assert.h): each case breaks one on purpose in a child process and
 * sees the child abort with the condition named on stderr, after the same
 * steps done right pass in the parent: a slot state step the machine does
 * not take, a second reply to one request (through the one routine,
 * fprep__answer_reply), an error reply from a thread that is not the
 * loop's, and a slot moved from such a thread. Debug builds only (the
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
#include "reply.h"
#include "slot_state.h"

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
static fprep__conn conn;
static unsigned sent;

static void sent_event(fprep__event *ev, void *data)
{
	(void)ev;
	(void)data;
	sent++;
}

static fprep_reply_header ok_reply, error_reply;

/* reply_once answers the slot's request (state RECV) on the loop. */
static void reply_once(const fprep_reply_header *h)
{
	fprep__slot_enter(&slot, FPREP__SLOT_RECV);
	fprep__answer_reply(&slot, h, NULL);
	fprep__evq_drain(&srv.evq);
}

static void reply_twice(void *arg)
{
	(void)arg;
	reply_once(&ok_reply);
	fprep__answer_reply(&slot, &ok_reply, NULL);
}

static void *error_thread(void *arg)
{
	fprep__answer_reply(&slot, arg, NULL);
	return NULL;
}

/* An error reply from a backend's thread: only the loop answers those. */
static void error_off_loop(void *arg)
{
	pthread_t t;

	(void)arg;
	fprep__slot_enter(&slot, FPREP__SLOT_RECV);
	fprep__slot_enter(&slot, FPREP__SLOT_WORK);
	if (pthread_create(&t, NULL, error_thread, &error_reply) == 0)
		pthread_join(t, NULL);
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
	slot.conn = &conn;
	fprep__reply_header_simple(&ok_reply, FPREP_KIND_FRAME, 1, FPREP_OK, "",
	                           0, 0);
	fprep__reply_header_simple(&error_reply, FPREP_KIND_FRAME, 1,
	                           FPREP_ECUDA, "simulated", 0, 0);
	reply_once(&ok_reply);
	CHECK(sent == 1, "%u end events for one delivery", sent);
	CHECK(slot.delivered && slot.state == FPREP__SLOT_SEND,
	      "delivered %d, state %d", slot.delivered, slot.state);
	CHECK(atomic_load(&conn.region_answered) == 1 &&
	              slot.status == FPREP_OK,
	      "the reply was not counted");
	slot.delivered = 0; /* the next request (fprep__answer_next) */
	slot.state = FPREP__SLOT_IDLE;
	CHECK(dies(reply_twice, NULL),
	      "a second reply to one request did not abort");
	CHECK(dies(error_off_loop, NULL),
	      "an error reply off the loop thread did not abort");
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
		       "thread, a second reply and an error reply off the loop "
		       "thread each abort\n");
	return failures == 0 ? 0 : 1;
}
