/*
 * test_backend_cpu.c: the CPU backend (backend_cpu.c). Jobs are submitted
 * from the main thread, as the loop does; done callbacks are counted with
 * atomics and must come from worker threads, exactly once per job; tensors
 * must equal a direct fprep_preprocess_cpu; close must complete or fail
 * every job still in flight.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "backend.h"
#include "frameprep/frameprep.h"

static atomic_int t_done;
static atomic_int t_on_main;
static atomic_int t_twice;
static pthread_t t_main;

struct t_job {
	fprep__job job;
	atomic_int calls;
	uint8_t *input;
	size_t input_size;
	size_t output_size;
};

static void t_done_cb(fprep__job *job)
{
	struct t_job *tj = job->data;

	if (pthread_equal(pthread_self(), t_main))
		atomic_fetch_add(&t_on_main, 1);
	if (atomic_fetch_add(&tj->calls, 1) != 0)
		atomic_fetch_add(&t_twice, 1);
	atomic_fetch_add(&t_done, 1);
}

/* t_job_alloc makes a job for a w x h BGR8 frame of pseudo-random pixels,
 * letterboxed to ow x oh in the given dtype. */
static struct t_job *t_job_alloc(uint32_t w, uint32_t h, uint32_t ow,
                                 uint32_t oh, uint8_t dtype, uint32_t seed)
{
	struct t_job *tj = calloc(1, sizeof(*tj));
	fprep_request *r;
	size_t i, esize;

	assert_non_null(tj);
	r = &tj->job.req;
	fprep_request_init(r, FPREP_PIX_BGR8, w, h);
	r->out_width = ow;
	r->out_height = oh;
	r->dtype = dtype;
	esize = dtype == FPREP_DTYPE_F32 ? 4 : dtype == FPREP_DTYPE_F16 ? 2 : 1;
	tj->input_size = r->input_size;
	tj->output_size = (size_t)ow * oh * 3 * esize;
	tj->input = malloc(tj->input_size);
	tj->job.output = malloc(tj->output_size);
	assert_non_null(tj->input);
	assert_non_null(tj->job.output);
	for (i = 0; i < tj->input_size; i++) {
		seed = seed * 1664525u + 1013904223u;
		tj->input[i] = (uint8_t)(seed >> 24);
	}
	memset(tj->job.output, 0xcd, tj->output_size);
	tj->job.input = tj->input;
	assert_int_equal(fprep__job_plan(&tj->job), FPREP_OK);
	assert_true(tj->job.output_size == tj->output_size);
	tj->job.done = t_done_cb;
	tj->job.data = tj;
	tj->job.status = -1;
	return tj;
}

static void t_job_free(struct t_job *tj)
{
	free(tj->input);
	free(tj->job.output);
	free(tj);
}

/* t_job_check compares a completed job with a direct run of the op. */
static void t_job_check(struct t_job *tj)
{
	uint8_t *want = malloc(tj->output_size);
	fprep_transform xf;

	assert_non_null(want);
	assert_int_equal(atomic_load(&tj->calls), 1);
	assert_int_equal(tj->job.status, FPREP_OK);
	assert_int_equal(fprep_preprocess_cpu(&tj->job.req, tj->input, want,
	                                      tj->output_size, &xf),
	                 FPREP_OK);
	assert_memory_equal(want, tj->job.output, tj->output_size);
	assert_memory_equal(&xf, &tj->job.xf, sizeof(xf));
	assert_true(tj->job.t_end_ns >= tj->job.t_start_ns);
	free(want);
}

static void t_reset(void)
{
	atomic_store(&t_done, 0);
	atomic_store(&t_on_main, 0);
	atomic_store(&t_twice, 0);
	t_main = pthread_self();
}

/* t_wait waits up to 20 s for n done callbacks. */
static void t_wait(int n)
{
	struct timespec ts = {0, 1000000};
	int i;

	for (i = 0; i < 20000 && atomic_load(&t_done) < n; i++)
		nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&t_done), n);
}

/* t_finish waits for n jobs, closes the backend, checks that each job was
 * done once from a worker with the right tensor, and frees the jobs. */
static void t_finish(fprep__backend *b, struct t_job **jobs, int n)
{
	int i;

	t_wait(n);
	b->close(b, 1000);
	assert_int_equal(atomic_load(&t_on_main), 0);
	assert_int_equal(atomic_load(&t_twice), 0);
	for (i = 0; i < n; i++) {
		t_job_check(jobs[i]);
		t_job_free(jobs[i]);
	}
}

static void test_open_info(void **state)
{
	static const char head[] = "version: x\nworkers: 3\njpeg_decoder: "
	                           "libjpeg-turbo (on the workers)\n"
	                           "video_decoder: ";
	fprep__backend *b;
	char buf[512] = "version: x\n";
	const char *video;

	(void)state;
	assert_int_equal(fprep__backend_cpu_open(&b, 3), FPREP_OK);
	assert_string_equal(b->name, "cpu");
	b->info(b, buf, sizeof(buf));
	/* The video line names libavcodec's version, or why there is none
	 * (the library is loaded at run time). */
	assert_memory_equal(buf, head, strlen(head));
	video = buf + strlen(head);
	assert_true(strncmp(video, "libavcodec ", 11) == 0 ||
	            strncmp(video, "none (", 6) == 0);
	assert_non_null(strchr(video, '\n'));
	assert_string_equal(strchr(video, '\n') + 1,
	                    "jpeg_queued: 0\njpeg_queued_keys: 0\n"
	                    "jpeg_turns_shared: 0\n");
	b->close(b, 1000);

	/* 0 threads: one per online core. */
	assert_int_equal(fprep__backend_cpu_open(&b, 0), FPREP_OK);
	buf[0] = '\0';
	b->info(b, buf, sizeof(buf));
	assert_non_null(strstr(buf, "workers: "));
	assert_string_not_equal(buf, "workers: 0\n");
	b->close(b, 1000);
}

/* Many jobs of mixed sizes: every one done once, from a worker, with the
 * tensor a direct call gives. */
static void test_many_jobs(void **state)
{
	enum { N = 120 };
	static const uint8_t dtypes[] = {FPREP_DTYPE_F32, FPREP_DTYPE_F16,
	                                 FPREP_DTYPE_U8};
	struct t_job *jobs[N];
	fprep__backend *b;
	int i;

	(void)state;
	t_reset();
	assert_int_equal(fprep__backend_cpu_open(&b, 4), FPREP_OK);
	for (i = 0; i < N; i++) {
		jobs[i] = t_job_alloc(17 + (uint32_t)i * 7, 9 + (uint32_t)i * 3,
		                      64 + (uint32_t)(i % 5) * 16,
		                      48 + (uint32_t)(i % 3) * 40,
		                      dtypes[i % 3], (uint32_t)i);
		assert_int_equal(b->submit(b, &jobs[i]->job), FPREP_OK);
	}
	t_finish(b, jobs, N);
}

/* Large frames are cut into row bands written by several workers: alone
 * (idle workers help) and several at once, in every dtype and layout. */
static void test_large_jobs(void **state)
{
	enum { N = 7 };
	static const uint8_t dtypes[] = {FPREP_DTYPE_F32, FPREP_DTYPE_F16,
	                                 FPREP_DTYPE_U8};
	struct t_job *jobs[N];
	fprep__backend *b;
	int i;

	(void)state;
	t_reset();
	assert_int_equal(fprep__backend_cpu_open(&b, 4), FPREP_OK);
	jobs[0] = t_job_alloc(1920, 1080, 1280, 1280, FPREP_DTYPE_F32, 99);
	assert_int_equal(b->submit(b, &jobs[0]->job), FPREP_OK);
	t_wait(1);
	for (i = 1; i < N; i++) {
		jobs[i] = t_job_alloc(1000 + (uint32_t)i * 31,
		                      700 - (uint32_t)i * 17,
		                      640 - (uint32_t)i * 5, 480 + (uint32_t)i,
		                      dtypes[i % 3], (uint32_t)i);
		if (i % 2)
			jobs[i]->job.req.layout = FPREP_LAYOUT_NHWC;
	}
	for (i = 1; i < N; i++)
		assert_int_equal(b->submit(b, &jobs[i]->job), FPREP_OK);
	t_finish(b, jobs, N);
}

/* ECHO does no work but reports the transform planned for it; a job the
 * backend cannot run (no input buffer) fails the job, not the backend. */
static void test_echo_and_error(void **state)
{
	struct t_job *echo, *bad;
	fprep__backend *b;
	fprep_transform xf;
	size_t i;

	(void)state;
	t_reset();
	assert_int_equal(fprep__backend_cpu_open(&b, 2), FPREP_OK);
	echo = t_job_alloc(320, 200, 160, 160, FPREP_DTYPE_F32, 1);
	echo->job.req.kind = FPREP_KIND_ECHO;
	/* The backend reports the transform planned for the job; it does not
	 * work it out again. */
	echo->job.xf.scale_x = 0.25f;
	bad = t_job_alloc(32, 20, 16, 16, FPREP_DTYPE_F32, 2);
	bad->job.input = NULL;
	assert_int_equal(b->submit(b, &echo->job), FPREP_OK);
	assert_int_equal(b->submit(b, &bad->job), FPREP_OK);
	t_wait(2);
	b->close(b, 1000);

	assert_int_equal(echo->job.status, FPREP_OK);
	fprep_transform_compute(&echo->job.req, &xf);
	assert_true(echo->job.xf.scale_x == 0.25f);
	xf.scale_x = 0.25f;
	assert_memory_equal(&xf, &echo->job.xf, sizeof(xf));
	assert_int_equal(xf.resized_h, 100);
	for (i = 0; i < echo->output_size; i++)
		assert_int_equal(echo->job.output[i], 0xcd);
	assert_int_equal(bad->job.status, FPREP_EINVAL);
	assert_true(bad->job.message[0] != '\0');
	t_job_free(echo);
	t_job_free(bad);
}

/* close with jobs queued and a generous timeout completes them all before
 * it returns. */
static void test_close_drains(void **state)
{
	enum { N = 40 };
	struct t_job *jobs[N];
	fprep__backend *b;
	int i;

	(void)state;
	t_reset();
	assert_int_equal(fprep__backend_cpu_open(&b, 2), FPREP_OK);
	for (i = 0; i < N; i++) {
		jobs[i] = t_job_alloc(640, 360, 320, 320, FPREP_DTYPE_F32,
		                      (uint32_t)i);
		assert_int_equal(b->submit(b, &jobs[i]->job), FPREP_OK);
	}
	b->close(b, 20000);
	assert_int_equal(atomic_load(&t_done), N);
	for (i = 0; i < N; i++) {
		t_job_check(jobs[i]);
		t_job_free(jobs[i]);
	}
}

/* close with a zero timeout fails what is still queued with
 * FPREP_ESHUTDOWN; every job is still done exactly once. */
static void test_close_fails_queued(void **state)
{
	enum { N = 30 };
	struct t_job *jobs[N];
	fprep__backend *b;
	int i, ok = 0, shut = 0;

	(void)state;
	t_reset();
	assert_int_equal(fprep__backend_cpu_open(&b, 1), FPREP_OK);
	/* Make the frames first so that the queue is long at close. */
	for (i = 0; i < N; i++)
		jobs[i] = t_job_alloc(1920, 1080, 640, 640, FPREP_DTYPE_F32,
		                      (uint32_t)i);
	for (i = 0; i < N; i++)
		assert_int_equal(b->submit(b, &jobs[i]->job), FPREP_OK);
	b->close(b, 0);
	assert_int_equal(atomic_load(&t_done), N);
	assert_int_equal(atomic_load(&t_twice), 0);
	for (i = 0; i < N; i++) {
		if (jobs[i]->job.status == FPREP_OK) {
			t_job_check(jobs[i]);
			ok++;
		} else {
			assert_int_equal(jobs[i]->job.status, FPREP_ESHUTDOWN);
			assert_true(jobs[i]->job.message[0] != '\0');
			shut++;
		}
		t_job_free(jobs[i]);
	}
	assert_int_equal(ok + shut, N);
	assert_true(shut > 0);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_open_info),
        cmocka_unit_test(test_many_jobs),
        cmocka_unit_test(test_large_jobs),
        cmocka_unit_test(test_echo_and_error),
        cmocka_unit_test(test_close_drains),
        cmocka_unit_test(test_close_fails_queued),
})
