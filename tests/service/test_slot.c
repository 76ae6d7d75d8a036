/*
 * test_slot.c: the request machine (service/slot.c, answer.c) on slots of
 * a port the test plays, whose requests come with an ENTRY sink as a
 * doorbell's do (no nng at all): a header of garbage, a kind a doorbell
 * may not carry, a connection at its in-flight bound and a stopping server
 * are each answered in the entry with the error, and the slot goes back
 * to its port once; a FRAME with frame and tensor in a registered region
 * goes to WORK, is finished by a backend thread, which delivers the reply
 * itself, and the loop ends it (region uses, connection counts) when that
 * delivery's event comes; the same FRAME of a stopping server is answered
 * by the loop, through the same routine (fprep__answer_reply); a job that
 * fails comes back to the loop, which answers the error. Each test ends with
 * every slot IDLE, every count back to zero and the loop closing with nothing
 * open.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "daemon.h"
#include "fake_backend.h"
#include "loop_fixture.h"
#include "shm_object.h"
#include "slot_state.h"

#define REGION_SIZE 65536u
#define PIPE        9u
#define AREA        0u     /* the entry's reply header */
#define FRAME_AT    4096u  /* the frame in the region */
#define TENSOR_AT   32768u /* the tensor in the region */

struct fixture {
	fprep__server srv;
	fprep__config cfg;
	fake_backend *fb; /* holds each job until finish_job */
	fprep__port port;
	fprep__slot s;
	fprep__conn conns[1];
	int fail_job;  /* the backend fails it */
	unsigned ends; /* the port's end calls */
	fprep__memreg *r;
	char shm_name[64];
};

static struct fixture *fx;

/* slot_finish: the fake's result for a job, written on its thread. */
static void slot_finish(fake_backend *fb, fprep__job *job, unsigned n)
{
	(void)fb;
	(void)n;
	job->t_start_ns = 1;
	if (fx->fail_job) {
		job->status = FPREP_ECUDA;
		snprintf(job->message, sizeof(job->message),
		         "cudaErrorLaunchFailure (simulated)");
	} else {
		memset(job->output, 0x5a, job->output_size);
		job->status = FPREP_OK;
	}
	job->t_end_ns = 2;
}

/* finish_job lets the fake's thread finish the one job it holds, and
 * waits until its done returned. */
static void finish_job(struct fixture *f)
{
	unsigned n = fake_backend_count(f->fb, &f->fb->jobs_queued);

	assert_int_equal(fake_backend_count(f->fb, &f->fb->jobs_done) + 1, n);
	fake_backend_allow_jobs(f->fb, n);
	assert_int_equal(fake_backend_wait(f->fb, &f->fb->jobs_done, n, 10000),
	                 0);
}

static void port_end(fprep__port *p, fprep__slot *s)
{
	(void)p;
	fx->ends++;
	fprep__slot_enter(s, FPREP__SLOT_IDLE);
}

static const fprep__port_ops port_ops = {.end = port_end};

static void fixture_event(fprep__event *ev, void *data)
{
	struct fixture *f = data;

	if (ev->kind == FPREP__EV_REGION)
		fprep__regions_event(&f->srv.regions, ev);
	else
		fprep__slot_event(fprep__container_of(ev, fprep__slot, ev));
}

static int slot_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int fd;

	if (f == NULL)
		return -1;
	fx = f;
	fd = shm_object_make(f->shm_name, sizeof(f->shm_name), "slot",
	                     REGION_SIZE);
	if (fd < 0)
		return -1;
	close(fd);
	fprep__config_init(&f->cfg);
	f->cfg.max_inflight_per_conn = 2;
	f->srv.cfg = &f->cfg;
	f->srv.slots = &f->s;
	f->srv.nslots = 1;
	f->srv.conns = f->conns;
	f->srv.nconns = 1;
	f->srv.device = "fake:0";
	f->fb = fake_backend_new();
	f->fb->hold_jobs = 1;
	f->fb->finish = slot_finish;
	f->srv.backend = fake_backend_start(f->fb);
	f->port.ops = &port_ops;
	f->port.name = "test";
	f->port.take = fprep__slot_take;
	f->s.srv = &f->srv;
	f->s.port = &f->port;
	if (loop_fixture_open(&f->srv, f->srv.backend, fixture_event, f,
	                      REGION_SIZE) != 0)
		return -1;
	f->r = loop_fixture_region(&f->srv, f->shm_name, REGION_SIZE, PIPE);
	*state = f;
	return f->r != NULL ? 0 : -1;
}

static int slot_teardown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(f->s.state, FPREP__SLOT_IDLE);
	assert_int_equal(f->srv.active, 0);
	assert_int_equal(f->conns[0].held, 0);
	assert_int_equal(atomic_load(&f->conns[0].inflight), 0);
	assert_int_equal(atomic_load(&f->conns[0].region_answered), 0);
	fprep__regions_close(&f->srv.regions);
	fprep__evq_drain(&f->srv.evq);
	fprep__evq_fini(&f->srv.evq);
	assert_int_equal(uv_run(&f->srv.loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(fprep__regions_fini(&f->srv.regions), 0);
	assert_int_equal(uv_loop_close(&f->srv.loop), 0);
	fprep__config_fini(&f->cfg);
	f->fb->b.close(&f->fb->b, 0);
	fake_backend_free(f->fb);
	shm_unlink(f->shm_name);
	free(f);
	return 0;
}

/* take hands the slot the request header hdr, as the doorbell port
 * does, with its reply going to the region's first bytes. */
static void take(struct fixture *f, const uint8_t *hdr)
{
	fprep__slot *s = &f->s;

	memcpy(s->req_head, hdr, FPREP_REQUEST_HEADER_SIZE);
	s->req = s->req_head;
	s->req_len = FPREP_REQUEST_HEADER_SIZE;
	s->pipe = PIPE;
	s->sink = (fprep__sink){.kind = FPREP__SINK_ENTRY,
	                        .region = f->r,
	                        .area = f->r->base + AREA};
	memset(f->r->base + AREA, 0, FPREP_REPLY_HEADER_SIZE);
	fprep__slot_enter(s, FPREP__SLOT_RECV);
	f->port.take(s);
}

/* reply decodes the reply in the entry, after draining the loop's
 * events, and checks that the slot went back to the port once. */
static void reply(struct fixture *f, unsigned ends, fprep_reply_header *h)
{
	fprep__evq_drain(&f->srv.evq);
	assert_int_equal(f->ends, ends);
	assert_int_equal(f->s.state, FPREP__SLOT_IDLE);
	assert_int_equal(fprep_reply_decode(f->r->base + AREA,
	                                    FPREP_REPLY_HEADER_SIZE, h),
	                 FPREP_OK);
}

/* frame_request: a FRAME of a 32x24 BGR8 frame in the region, its
 * 16x16 tensor into the region too. */
static void frame_request(struct fixture *f, uint64_t id, uint8_t *hdr)
{
	fprep_request req;

	fprep_request_init(&req, FPREP_PIX_BGR8, 32, 24);
	req.out_width = 16;
	req.out_height = 16;
	req.request_id = id;
	req.input_loc = FPREP_LOC_SHM;
	req.in_region = f->r->id;
	req.in_offset = FRAME_AT;
	req.output_loc = FPREP_LOC_SHM;
	req.out_region = f->r->id;
	req.out_offset = TENSOR_AT;
	req.out_capacity = REGION_SIZE - TENSOR_AT;
	fprep_request_encode(&req, hdr);
}

static void test_refusals(void **state)
{
	struct fixture *f = *state;
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	fprep_reply_header h;
	fprep_request req;

	/* Garbage: answered, request_id 0 (none could be read). */
	for (unsigned i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)(0x3c ^ (i * 7));
	take(f, hdr);
	reply(f, 1, &h);
	assert_int_not_equal(h.status, FPREP_OK);
	assert_true(h.request_id == 0);
	assert_true(f->srv.failed == 1);

	/* INFO may not come through a doorbell. */
	fprep_request_init(&req, FPREP_PIX_BGR8, 32, 24);
	req.kind = FPREP_KIND_INFO;
	req.request_id = 77;
	fprep_request_encode(&req, hdr);
	take(f, hdr);
	reply(f, 2, &h);
	assert_int_equal(h.status, FPREP_EINVAL);
	assert_true(h.request_id == 77);
	assert_non_null(strstr(h.message, "doorbell"));

	/* The connection at its in-flight bound. */
	frame_request(f, 78, hdr);
	atomic_store(&f->conns[0].inflight, 2);
	f->conns[0].pipe = PIPE;
	f->conns[0].held = 1;
	take(f, hdr);
	reply(f, 3, &h);
	assert_int_equal(h.status, FPREP_EBUSY);
	assert_non_null(strstr(h.message, "--max-inflight-per-conn"));
	atomic_store(&f->conns[0].inflight, 0);
	f->conns[0].held = 0;
	f->conns[0].pipe = 0;

	/* A stopping server. */
	f->srv.stopping = 1;
	f->srv.stop_status = FPREP_ESHUTDOWN;
	snprintf(f->srv.stop_message, sizeof(f->srv.stop_message),
	         "server shutting down");
	frame_request(f, 79, hdr);
	take(f, hdr);
	reply(f, 4, &h);
	assert_int_equal(h.status, FPREP_ESHUTDOWN);
	assert_int_equal(fake_backend_count(f->fb, &f->fb->jobs_queued), 0);
	f->srv.stopping = 0;
}

static void test_frame(void **state)
{
	struct fixture *f = *state;
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	fprep_reply_header h;

	frame_request(f, 80, hdr);
	take(f, hdr);
	assert_int_equal(f->s.state, FPREP__SLOT_WORK);
	assert_int_equal(fake_backend_count(f->fb, &f->fb->jobs_queued), 1);
	assert_int_equal(atomic_load(&f->conns[0].inflight), 1);
	assert_ptr_equal(f->s.job.output, f->r->base + TENSOR_AT);
	/* The backend thread delivers it: the reply is there before the
	 * loop has seen anything. */
	finish_job(f);
	assert_true(f->s.delivered);
	assert_true(f->srv.served == 0); /* counted when the request ends */
	assert_int_equal(atomic_load(&f->conns[0].inflight), 0);
	assert_int_equal(atomic_load(&f->conns[0].region_answered), 1);
	assert_int_equal(fprep_reply_decode(f->r->base + AREA,
	                                    FPREP_REPLY_HEADER_SIZE, &h),
	                 FPREP_OK);
	assert_int_equal(h.status, FPREP_OK);
	assert_true(h.request_id == 80);
	assert_int_equal(f->ends, 0);
	assert_int_equal(f->s.state, FPREP__SLOT_WORK);
	/* The loop settles it. */
	reply(f, 1, &h);
	assert_false(f->s.delivered);
	assert_true(f->srv.served == 1);
	assert_null(f->s.job.in_region);
	assert_null(f->s.job.out_region);
	assert_int_equal(f->r->base[TENSOR_AT], 0x5a);
}

/* A stopping server's replies go through the loop (no_direct): the same
 * reply, from the same routine, with the slot in SEND meanwhile. Its
 * spans come from the one converter: the fake's job started before the
 * request's receipt (t_start_ns 1), which reads as 1 us, not 0. */
static void test_frame_loop(void **state)
{
	struct fixture *f = *state;
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	fprep_reply_header h;

	atomic_store(&f->srv.no_direct, 1);
	frame_request(f, 82, hdr);
	take(f, hdr);
	finish_job(f);
	assert_false(f->s.delivered);
	assert_int_equal(atomic_load(&f->conns[0].inflight), 1);
	reply(f, 1, &h);
	assert_int_equal(h.status, FPREP_OK);
	assert_true(h.request_id == 82);
	assert_int_equal(h.t_queue_us, 1);
	assert_true(h.t_total_us >= 1);
	assert_true(f->srv.served == 1 && f->srv.failed == 0);
	assert_null(f->s.job.in_region);
	assert_null(f->s.job.out_region);
	assert_int_equal(f->r->base[TENSOR_AT], 0x5a);
}

static void test_frame_fails(void **state)
{
	struct fixture *f = *state;
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	fprep_reply_header h;

	frame_request(f, 81, hdr);
	take(f, hdr);
	f->fail_job = 1;
	finish_job(f);
	/* Not answered on the backend's thread: the loop does it. */
	assert_false(f->s.delivered);
	assert_int_equal(f->s.state, FPREP__SLOT_WORK);
	reply(f, 1, &h);
	assert_int_equal(h.status, FPREP_ECUDA);
	assert_true(h.request_id == 81);
	assert_non_null(strstr(h.message, "cudaErrorLaunchFailure"));
	assert_true(f->srv.failed == 1 && f->srv.served == 0);
	assert_false(f->srv.stop_wanted);
}

CMOCKA_MAIN({
        cmocka_unit_test_setup_teardown(test_refusals, slot_setup,
                                        slot_teardown),
        cmocka_unit_test_setup_teardown(test_frame, slot_setup, slot_teardown),
        cmocka_unit_test_setup_teardown(test_frame_loop, slot_setup,
                                        slot_teardown),
        cmocka_unit_test_setup_teardown(test_frame_fails, slot_setup,
                                        slot_teardown),
})
