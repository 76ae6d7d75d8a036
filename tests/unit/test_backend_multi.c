/*
 * test_backend_multi.c: the multi backend's scheduling (backend_multi.c)
 * over fake lanes. A fake lane only queues what it is given; the test
 * completes jobs and runs region operations by hand, one lane at a time,
 * so every choice the multi backend makes is seen in order: the least
 * loaded lane, ties in turn, CUDA regions on their device's lanes, one
 * shared-memory OPEN fanned out to every lane in service with one
 * completion, a failed lane taken out with its device's other lanes while
 * the other device serves, and a job left fatal once no lane is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "backend.h"
#include "backend_multi.h"

#define NLANES 4

typedef struct fake_lane {
	fprep__backend base;
	fprep__queue jobs;  /* submitted, not completed */
	fprep__queue admin; /* region operations not run */
	unsigned njobs, nadmin;
	unsigned maps, attaches, closes;
	int refuse_attach;
	int closed;
} fake_lane;

static fake_lane t_lanes[NLANES];
static fprep__backend *t_mb;
static uint8_t t_shm[64];
static unsigned t_jobs_done, t_regions_done;
static fprep__job *t_last_job;

static int fake_submit(fprep__backend *b, fprep__job *job)
{
	fake_lane *f = (fake_lane *)b;

	fprep__queue_push(&f->jobs, &job->link);
	f->njobs++;
	return 0;
}

static int fake_region_op(fprep__backend *b, fprep__memreg *r)
{
	fake_lane *f = (fake_lane *)b;

	fprep__queue_push(&f->admin, &r->link);
	f->nadmin++;
	return 0;
}

static void fake_info(fprep__backend *b, char *buf, size_t size)
{
	size_t n = strnlen(buf, size);

	(void)b;
	snprintf(buf + n, size - n, "fake_lane: yes\n");
}

static void fake_close(fprep__backend *b, int timeout_ms)
{
	(void)timeout_ms;
	((fake_lane *)b)->closed = 1;
}

/* fake_finish completes lane k's oldest job, fatal or not. */
static void fake_finish(unsigned k, int fatal)
{
	fprep__qnode *n = fprep__queue_pop(&t_lanes[k].jobs);
	fprep__job *job;

	assert_non_null(n);
	t_lanes[k].njobs--;
	job = fprep__container_of(n, fprep__job, link);
	job->status = fatal ? FPREP_ECUDA : FPREP_OK;
	job->fatal = fatal;
	snprintf(job->message, sizeof(job->message), "%s",
	         fatal ? "cudaMemcpyAsync: cudaErrorIllegalAddress" : "");
	job->done(job);
}

/* fake_run runs lane k's oldest region operation as the GPU lane does:
 * OPEN maps and pins a fresh record, only checks a pinned one. */
static void fake_run(unsigned k)
{
	fake_lane *f = &t_lanes[k];
	fprep__qnode *n = fprep__queue_pop(&f->admin);
	fprep__memreg *r;

	assert_non_null(n);
	f->nadmin--;
	r = fprep__container_of(n, fprep__memreg, link);
	r->status = FPREP_OK;
	r->message[0] = '\0';
	if (r->verb == FPREP__MEMREG_CLOSE) {
		f->closes++;
		r->pinned = 0;
		r->base = NULL;
	} else if (r->kind == FPREP__MEMREG_CUDA || !r->pinned) {
		f->maps++;
		r->base = t_shm;
		r->pinned = r->kind == FPREP__MEMREG_SHM;
	} else if (f->refuse_attach) {
		f->attaches++;
		r->status = FPREP_ECUDA;
		snprintf(r->message, sizeof(r->message), "not page-locked");
	} else {
		f->attaches++;
	}
	r->done(r);
}

static void t_job_done(fprep__job *job)
{
	t_jobs_done++;
	t_last_job = job;
}

static void t_region_done(fprep__memreg *r)
{
	(void)r;
	t_regions_done++;
}

/* t_setup opens the multi backend over NLANES fake lanes: lanes 0 and 1
 * on device 0, lanes 2 and 3 on device 1. */
static int t_setup(void **state)
{
	fprep__multi_lane lanes[NLANES];

	(void)state;
	memset(t_lanes, 0, sizeof(t_lanes));
	memset(lanes, 0, sizeof(lanes));
	for (unsigned k = 0; k < NLANES; k++) {
		fake_lane *f = &t_lanes[k];

		f->base.name = "cuda";
		f->base.submit = fake_submit;
		f->base.region_op = fake_region_op;
		f->base.info = fake_info;
		f->base.close = fake_close;
		fprep__queue_init(&f->jobs);
		fprep__queue_init(&f->admin);
		lanes[k].backend = &f->base;
		lanes[k].device = (int)k / 2;
		lanes[k].uuid[0] = (uint8_t)(0xa0 + k / 2);
		snprintf(lanes[k].name, sizeof(lanes[k].name), "Fake GPU");
	}
	t_jobs_done = t_regions_done = 0;
	t_last_job = NULL;
	assert_int_equal(fprep__backend_multi_open(&t_mb, lanes, NLANES), 0);
	assert_string_equal(t_mb->name, "cuda");
	return 0;
}

static int t_teardown(void **state)
{
	(void)state;
	t_mb->close(t_mb, 1000);
	for (unsigned k = 0; k < NLANES; k++)
		assert_int_equal(t_lanes[k].closed, 1);
	return 0;
}

static void t_job_init(fprep__job *job)
{
	memset(job, 0, sizeof(*job));
	job->req.kind = FPREP_KIND_FRAME;
	job->done = t_job_done;
}

static void test_least_loaded(void **state)
{
	fprep__job jobs[8];

	(void)state;
	for (unsigned i = 0; i < 8; i++)
		t_job_init(&jobs[i]);
	/* Ties go in turn: one job each. */
	for (unsigned i = 0; i < NLANES; i++)
		assert_int_equal(t_mb->submit(t_mb, &jobs[i]), 0);
	for (unsigned k = 0; k < NLANES; k++)
		assert_int_equal(t_lanes[k].njobs, 1);
	/* Lane 2 has the fewest in flight once its job is done. */
	fake_finish(2, 0);
	assert_int_equal(t_jobs_done, 1);
	assert_int_equal(t_last_job->lane, 2);
	assert_ptr_equal(t_last_job->done, t_job_done);
	assert_int_equal(t_mb->submit(t_mb, &jobs[4]), 0);
	assert_int_equal(t_lanes[2].njobs, 1);
	/* All equal again: the turn goes on after lane 2. */
	assert_int_equal(t_mb->submit(t_mb, &jobs[5]), 0);
	assert_int_equal(t_lanes[3].njobs, 2);
	assert_int_equal(t_mb->submit(t_mb, &jobs[6]), 0);
	assert_int_equal(t_lanes[0].njobs, 2);
	for (unsigned k = 0; k < NLANES; k++)
		while (t_lanes[k].njobs > 0)
			fake_finish(k, 0);
	assert_int_equal(t_jobs_done, 7);
}

static void test_cuda_region_affinity(void **state)
{
	fprep__memreg reg;
	fprep__job jobs[6];

	(void)state;
	memset(&reg, 0, sizeof(reg));
	reg.kind = FPREP__MEMREG_CUDA;
	reg.u.cuda.uuid[0] = 0xa1; /* device 1: lanes 2 and 3 */
	for (unsigned i = 0; i < 6; i++) {
		t_job_init(&jobs[i]);
		if (i % 2 == 0)
			jobs[i].in_region = &reg;
		else
			jobs[i].out_region = &reg;
		assert_int_equal(t_mb->submit(t_mb, &jobs[i]), 0);
	}
	assert_int_equal(t_lanes[0].njobs + t_lanes[1].njobs, 0);
	assert_int_equal(t_lanes[2].njobs, 3);
	assert_int_equal(t_lanes[3].njobs, 3);
	for (unsigned k = 2; k < NLANES; k++)
		while (t_lanes[k].njobs > 0)
			fake_finish(k, 0);

	/* The region's OPEN and CLOSE run on one lane of its device. */
	reg.verb = FPREP__MEMREG_OPEN;
	reg.done = t_region_done;
	assert_int_equal(t_mb->region_op(t_mb, &reg), 0);
	assert_int_equal(t_lanes[2].nadmin, 1);
	assert_int_equal(
	        t_lanes[0].nadmin + t_lanes[1].nadmin + t_lanes[3].nadmin, 0);
	fake_run(2);
	assert_int_equal(t_regions_done, 1);
	reg.verb = FPREP__MEMREG_CLOSE;
	assert_int_equal(t_mb->region_op(t_mb, &reg), 0);
	assert_int_equal(t_lanes[2].nadmin, 1);
	fake_run(2);
	assert_int_equal(t_regions_done, 2);
	assert_int_equal(t_lanes[2].closes, 1);
}

/* t_shm_open asks for a shared-memory region's OPEN, for data. */
static void t_shm_open(fprep__memreg *reg, void *data)
{
	memset(reg, 0, sizeof(*reg));
	reg->kind = FPREP__MEMREG_SHM;
	reg->verb = FPREP__MEMREG_OPEN;
	reg->done = t_region_done;
	reg->data = data;
	assert_int_equal(t_mb->region_op(t_mb, reg), 0);
}

static void test_shm_fan_out(void **state)
{
	fprep__memreg reg;
	int caller_data;

	(void)state;
	t_shm_open(&reg, &caller_data);
	/* One lane after the other; the caller hears once, at the end. */
	for (unsigned k = 0; k < NLANES; k++) {
		assert_int_equal(t_lanes[k].nadmin, 1);
		assert_int_equal(t_regions_done, 0);
		fake_run(k);
	}
	assert_int_equal(t_regions_done, 1);
	assert_int_equal(reg.status, FPREP_OK);
	assert_ptr_equal(reg.done, t_region_done);
	assert_ptr_equal(reg.data, &caller_data);
	assert_ptr_equal(reg.base, t_shm);
	assert_int_equal(t_lanes[0].maps, 1); /* mapped and pinned once */
	for (unsigned k = 1; k < NLANES; k++) {
		assert_int_equal(t_lanes[k].maps, 0);
		assert_int_equal(t_lanes[k].attaches, 1);
	}
	/* CLOSE undoes the one pin and mapping, on one lane. */
	reg.verb = FPREP__MEMREG_CLOSE;
	assert_int_equal(t_mb->region_op(t_mb, &reg), 0);
	assert_int_equal(t_lanes[0].nadmin, 1);
	fake_run(0);
	assert_int_equal(t_regions_done, 2);
	for (unsigned k = 1; k < NLANES; k++)
		assert_int_equal(t_lanes[k].nadmin, 0);
	assert_int_equal(reg.pinned, 0);
}

static void test_shm_fan_out_refused(void **state)
{
	fprep__memreg reg;

	(void)state;
	t_lanes[2].refuse_attach = 1;
	t_shm_open(&reg, NULL);
	fake_run(0);
	fake_run(1);
	fake_run(2); /* refuses: lane 0 undoes its open */
	assert_int_equal(t_lanes[3].nadmin, 0);
	assert_int_equal(t_regions_done, 0);
	assert_int_equal(t_lanes[0].nadmin, 1);
	fake_run(0);
	assert_int_equal(t_lanes[0].closes, 1);
	assert_int_equal(t_regions_done, 1);
	assert_int_equal(reg.verb, FPREP__MEMREG_OPEN);
	assert_int_equal(reg.status, FPREP_ECUDA);
	assert_non_null(strstr(reg.message, "lane 2: not page-locked"));
	assert_int_equal(reg.pinned, 0);
}

static void test_failed_lanes(void **state)
{
	fprep__job jobs[16];
	fprep__backend_stats st;
	fprep__memreg reg;
	char info[2048];
	unsigned used = 0;

	(void)state;
	for (unsigned i = 0; i < 16; i++)
		t_job_init(&jobs[i]);
	for (unsigned i = 0; i < NLANES; i++)
		assert_int_equal(t_mb->submit(t_mb, &jobs[used++]), 0);
	/* Lane 1 fails: its job is answered, not fatal for the daemon, and
	 * lane 0, on the same device, goes too. */
	fake_finish(1, 1);
	assert_int_equal(t_last_job->status, FPREP_ECUDA);
	assert_int_equal(t_last_job->fatal, 0);
	assert_non_null(strstr(t_last_job->message, "lane 1 out of service"));
	assert_non_null(strstr(t_last_job->message, "cudaErrorIllegalAddress"));
	fake_finish(0, 0); /* done before the error */
	assert_int_equal(t_last_job->status, FPREP_OK);
	/* Device 0 gets no more work, though it has the fewest in flight. */
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(t_mb->submit(t_mb, &jobs[used++]), 0);
	assert_int_equal(t_lanes[0].njobs + t_lanes[1].njobs, 0);
	assert_int_equal(t_lanes[2].njobs, 4);
	assert_int_equal(t_lanes[3].njobs, 4);
	info[0] = '\0';
	t_mb->info(t_mb, info, sizeof(info));
	assert_non_null(strstr(info, "lanes: 4\nlanes_in_service: 2\n"));
	assert_non_null(strstr(info, "lane_0: device=0 uuid=GPU-a0000000-"
	                             "0000-0000-0000-000000000000 "
	                             "in_service=0 inflight=0 jobs=1"));
	assert_non_null(strstr(info, "lane_1: device=0 uuid=GPU-a0000000-"
	                             "0000-0000-0000-000000000000 "
	                             "in_service=0 inflight=0 jobs=1"));
	assert_non_null(strstr(info, "lane_3: device=1 uuid=GPU-a1000000-"
	                             "0000-0000-0000-000000000000 "
	                             "in_service=1 inflight=4 jobs=0 "
	                             "name=Fake GPU\n"));
	assert_non_null(strstr(info, "fake_lane: yes\n"));
	memset(&st, 0, sizeof(st));
	t_mb->stats(t_mb, &st);
	assert_int_equal(st.lanes, 4);
	assert_int_equal(st.lanes_in_service, 2);

	/* A shared-memory OPEN skips device 0's lanes. */
	t_shm_open(&reg, NULL);
	assert_int_equal(t_lanes[2].nadmin, 1);
	fake_run(2);
	fake_run(3);
	assert_int_equal(t_lanes[0].nadmin + t_lanes[1].nadmin, 0);
	assert_int_equal(t_regions_done, 1);
	assert_int_equal(reg.status, FPREP_OK);

	/* Device 1 serves on; its last lane failing leaves a fatal job. */
	fake_finish(3, 0);
	assert_int_equal(t_last_job->fatal, 0);
	fake_finish(2, 1);
	assert_int_equal(t_last_job->fatal, 1);
	assert_int_equal(t_last_job->status, FPREP_ECUDA);
	info[0] = '\0';
	t_mb->info(t_mb, info, sizeof(info));
	assert_non_null(strstr(info, "lanes_in_service: 0\n"));
	for (unsigned k = 0; k < NLANES; k++)
		while (t_lanes[k].njobs > 0)
			fake_finish(k, 1);
	assert_int_equal(t_last_job->fatal, 1);
	assert_int_equal(t_jobs_done, used);
}

static void test_open_refuses_nothing(void **state)
{
	fprep__backend *b;

	(void)state;
	assert_int_equal(fprep__backend_multi_open(&b, NULL, 0), FPREP_EINVAL);
	assert_null(b);
}

CMOCKA_MAIN({
        cmocka_unit_test_setup_teardown(test_least_loaded, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_cuda_region_affinity, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_shm_fan_out, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_shm_fan_out_refused, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_failed_lanes, t_setup, t_teardown),
        cmocka_unit_test(test_open_refuses_nothing),
})
