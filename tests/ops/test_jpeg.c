/*
 * test_jpeg.c: the JPEG step of the backends (src/backend/jpeg.c) on JPEGs
 * written by libjpeg-turbo's own encoder: the header checked against the
 * limits and the wire's size before anything is allocated, the worker's
 * buffer grown only for a larger frame, the job rewritten as the decoded
 * frame's (pixels equal to libjpeg-turbo's decode), and a handle that
 * failed still decoding the next frame.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"
#include <turbojpeg.h>

#include "backend.h"
#include "frameprep/frameprep.h"
#include "jpeg.h"
#include "test_limits.h"

static const fprep_limits test_limits = {
        TEST_SIZE_LIMITS(1000, 800, 1000 * 600 * 3, 640, 640)};

/* test_encode returns a w x h JPEG of a gradient (libjpeg-turbo, quality
 * 90, subsampling sub, gray when sub is TJSAMP_GRAY); free with tjFree. */
static unsigned char *test_encode(int w, int h, int sub, unsigned long *size)
{
	tjhandle tj = tjInitCompress();
	unsigned char *px = malloc((size_t)w * h * 3), *jpg = NULL;

	assert_non_null(tj);
	assert_non_null(px);
	for (int i = 0; i < w * h * 3; i++)
		px[i] = (unsigned char)((i % (w * 3)) * 255 / (w * 3) + i / 7);
	assert_int_equal(
	        tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, size, sub, 90, 0),
	        0);
	free(px);
	tjDestroy(tj);
	return jpg;
}

/* test_job makes a FRAME job of jpg for channel order order. */
static void test_job(fprep__job *job, const unsigned char *jpg,
                     unsigned long size, uint8_t order)
{
	memset(job, 0, sizeof(*job));
	fprep_request_init(&job->req, FPREP_PIX_JPEG, 0, 0);
	job->req.input_size = size;
	job->req.channel_order = order;
	job->input = jpg;
	job->limits = &test_limits;
	assert_int_equal(fprep__job_plan(job), FPREP_OK);
}

/* test_decode runs both steps into j's buffer; returns the status. */
static int test_decode(fprep__jpeg *j, fprep__job *job, char *msg, size_t n)
{
	fprep_request raw;
	uint8_t *dst;
	int rc = fprep__jpeg_open(j, job, NULL, &raw, msg, n);

	if (rc != FPREP_OK)
		return rc;
	dst = fprep__jpeg_buffer(j, raw.input_size);
	assert_non_null(dst);
	return fprep__jpeg_decode(j, job, &raw, dst, msg, n);
}

static void decode_rewrites_job(void **state)
{
	static const uint8_t orders[] = {FPREP_ORDER_RGB, FPREP_ORDER_BGR,
	                                 FPREP_ORDER_GRAY};
	static const int pfs[] = {TJPF_RGB, TJPF_BGR, TJPF_GRAY};
	static const uint16_t fmts[] = {FPREP_PIX_RGB8, FPREP_PIX_BGR8,
	                                FPREP_PIX_GRAY8};
	unsigned long size = 0;
	unsigned char *jpg = test_encode(97, 61, TJSAMP_420, &size);
	tjhandle td = tjInitDecompress();
	uint8_t *ref = malloc(97 * 61 * 3);
	char msg[FPREP_MESSAGE_SIZE];
	fprep_transform xf;
	fprep__jpeg j;
	fprep__job job;

	(void)state;
	assert_non_null(ref);
	fprep__jpeg_init(&j);
	for (int i = 0; i < 3; i++) {
		uint32_t bpp = fmts[i] == FPREP_PIX_GRAY8 ? 1 : 3;

		test_job(&job, jpg, size, orders[i]);
		assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)),
		                 FPREP_OK);
		assert_int_equal(job.req.src_format, fmts[i]);
		assert_int_equal(job.req.src_width, 97);
		assert_int_equal(job.req.src_height, 61);
		assert_int_equal(job.req.src_stride, 97 * bpp);
		assert_true(job.req.input_size == 97 * 61 * bpp);
		assert_ptr_equal(job.input, j.buf);
		assert_int_equal(job.decoded_width, 97);
		assert_int_equal(job.decoded_height, 61);
		fprep_transform_compute(&job.req, &xf);
		assert_memory_equal(&job.xf, &xf, sizeof(xf));
		assert_int_equal(
		        tjDecompress2(td, jpg, size, ref, 97, 0, 61, pfs[i], 0),
		        0);
		assert_memory_equal(job.input, ref, 97 * 61 * bpp);
	}
	fprep__jpeg_fini(&j);
	tjDestroy(td);
	free(ref);
	tjFree(jpg);
}

static void buffer_grows_only_for_larger(void **state)
{
	unsigned long s1 = 0, s2 = 0, s3 = 0;
	unsigned char *mid = test_encode(320, 240, TJSAMP_444, &s1);
	unsigned char *small = test_encode(64, 48, TJSAMP_422, &s2);
	unsigned char *big = test_encode(640, 480, TJSAMP_GRAY, &s3);
	char msg[FPREP_MESSAGE_SIZE];
	fprep__jpeg j;
	fprep__job job;
	uint8_t *buf;

	(void)state;
	fprep__jpeg_init(&j);
	test_job(&job, mid, s1, FPREP_ORDER_RGB);
	assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)), FPREP_OK);
	buf = j.buf;
	assert_true(j.cap == 320 * 240 * 3);
	for (int i = 0; i < 3; i++) {
		test_job(&job, i == 1 ? small : mid, i == 1 ? s2 : s1,
		         FPREP_ORDER_BGR);
		assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)),
		                 FPREP_OK);
		assert_ptr_equal(j.buf, buf);
		assert_true(j.cap == 320 * 240 * 3);
	}
	test_job(&job, big, s3, FPREP_ORDER_RGB);
	assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)), FPREP_OK);
	assert_true(j.cap == 640 * 480 * 3);
	fprep__jpeg_fini(&j);
	tjFree(mid);
	tjFree(small);
	tjFree(big);
}

/* sof_size rewrites the first SOF's size of a JPEG. */
static void sof_size(unsigned char *jpg, unsigned long size, uint16_t w,
                     uint16_t h)
{
	for (unsigned long i = 2; i + 9 < size; i++)
		if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
			jpg[i + 5] = (unsigned char)(h >> 8);
			jpg[i + 6] = (unsigned char)h;
			jpg[i + 7] = (unsigned char)(w >> 8);
			jpg[i + 8] = (unsigned char)w;
			return;
		}
	fail_msg("no SOF0");
}

static void refused_before_allocation(void **state)
{
	static const struct {
		uint16_t w, h, wire_w, wire_h;
		int want;
		const char *needle;
	} cases[] = {
	        {65535, 65535, 0, 0, FPREP_ELIMIT,
	         "JPEG width 65535 exceeds max_width 1000"},
	        {1000, 801, 0, 0, FPREP_ELIMIT,
	         "JPEG height 801 exceeds max_height 800"},
	        {1000, 800, 0, 0, FPREP_ELIMIT, "exceeds max_frame_bytes"},
	        {64, 48, 64, 47, FPREP_EINVAL, "!= the JPEG header's 64x48"},
	};
	char msg[FPREP_MESSAGE_SIZE];
	fprep_request raw;
	fprep__jpeg j;
	fprep__job job;

	(void)state;
	fprep__jpeg_init(&j);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned long size = 0;
		unsigned char *jpg = test_encode(64, 48, TJSAMP_420, &size);

		sof_size(jpg, size, cases[i].w, cases[i].h);
		test_job(&job, jpg, size, FPREP_ORDER_RGB);
		job.req.src_width = cases[i].wire_w;
		job.req.src_height = cases[i].wire_h;
		assert_int_equal(fprep__jpeg_open(&j, &job, NULL, &raw, msg,
		                                  sizeof(msg)),
		                 cases[i].want);
		assert_non_null(strstr(msg, cases[i].needle));
		assert_null(j.buf); /* nothing allocated */
		tjFree(jpg);
	}
	/* A job without the daemon's limits is refused. */
	job.limits = NULL;
	assert_int_equal(
	        fprep__jpeg_open(&j, &job, NULL, &raw, msg, sizeof(msg)),
	        FPREP_EINVAL);
	fprep__jpeg_fini(&j);
}

static void bad_frames_then_good(void **state)
{
	static const unsigned char marker[] = {0xff, 0xd8, 0xff, 0x9a, 0,
	                                       0,    0,    0,    0,    0};
	unsigned long size = 0;
	unsigned char *jpg = test_encode(64, 48, TJSAMP_420, &size);
	char msg[FPREP_MESSAGE_SIZE];
	fprep__jpeg j;
	fprep__job job;

	(void)state;
	fprep__jpeg_init(&j);
	for (int round = 0; round < 3; round++) {
		test_job(&job, marker, sizeof(marker), FPREP_ORDER_RGB);
		assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)),
		                 FPREP_EINVAL);
		assert_non_null(strstr(msg, "Unsupported marker type 0x9a"));
		test_job(&job, jpg, size / 2, FPREP_ORDER_RGB);
		assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)),
		                 FPREP_EINVAL);
		assert_non_null(strstr(msg, "Premature end of JPEG file"));
		test_job(&job, jpg, size, FPREP_ORDER_RGB);
		assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)),
		                 FPREP_OK);
	}
	fprep__jpeg_fini(&j);
	tjFree(jpg);
}

/* region_bytes_read_once: a JPEG in a client's region is copied before
 * anything reads it, so bytes the client rewrites between the header
 * check and the decode (its SOF's size flipped, the data wiped) change
 * nothing: the decode is the original file's, whole. A caller's own copy
 * (a GPU slot's) is used when named. */
static void region_bytes_read_once(void **state)
{
	unsigned long size = 0;
	unsigned char *jpg = test_encode(64, 48, TJSAMP_420, &size);
	unsigned char *shm = malloc(size);
	uint8_t *ref = malloc(64 * 48 * 3);
	tjhandle td = tjInitDecompress();
	char msg[FPREP_MESSAGE_SIZE];
	fprep__memreg reg;
	fprep__jpeg_copy own = {0};
	fprep_request raw;
	fprep__jpeg j;
	fprep__job job;

	(void)state;
	assert_non_null(shm);
	assert_non_null(ref);
	assert_int_equal(
	        tjDecompress2(td, jpg, size, ref, 64, 0, 48, TJPF_RGB, 0), 0);
	memset(&reg, 0, sizeof(reg));
	reg.kind = FPREP__MEMREG_SHM;
	fprep__jpeg_init(&j);
	for (int round = 0; round < 2; round++) {
		fprep__jpeg_copy *copy = round == 0 ? NULL : &own;

		memcpy(shm, jpg, size);
		test_job(&job, shm, size, FPREP_ORDER_RGB);
		job.in_region = &reg;
		assert_int_equal(fprep__jpeg_open(&j, &job, copy, &raw, msg,
		                                  sizeof(msg)),
		                 FPREP_OK);
		assert_int_equal(job.input_copied, 1);
		assert_ptr_equal(job.input, round == 0 ? j.copy.p : own.p);
		assert_int_equal(raw.src_width, 64);
		/* The client's thread: a smaller size, then nothing. */
		sof_size(shm, size, 32, 24);
		memset(shm, 0, size);
		assert_int_equal(fprep__jpeg_decode(
		                         &j, &job, &raw,
		                         fprep__jpeg_buffer(&j, raw.input_size),
		                         msg, sizeof(msg)),
		                 FPREP_OK);
		assert_int_equal(job.req.src_width, 64);
		assert_int_equal(job.req.src_height, 48);
		assert_memory_equal(job.input, ref, 64 * 48 * 3);
	}
	/* A header read and not decoded here (a GPU engine's frame), then
	 * the next file: opened and decoded as usual. */
	test_job(&job, jpg, size, FPREP_ORDER_RGB);
	assert_int_equal(
	        fprep__jpeg_open(&j, &job, NULL, &raw, msg, sizeof(msg)),
	        FPREP_OK);
	test_job(&job, jpg, size, FPREP_ORDER_RGB);
	assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)), FPREP_OK);
	assert_memory_equal(job.input, ref, 64 * 48 * 3);
	/* Memory of the daemon's own (an nng message) is not copied. */
	test_job(&job, jpg, size, FPREP_ORDER_RGB);
	assert_int_equal(
	        fprep__jpeg_open(&j, &job, NULL, &raw, msg, sizeof(msg)),
	        FPREP_OK);
	assert_int_equal(job.input_copied, 0);
	assert_ptr_equal(job.input, jpg);
	fprep__jpeg_copy_free(&own);
	fprep__jpeg_fini(&j);
	tjDestroy(td);
	free(ref);
	free(shm);
	tjFree(jpg);
}

/* scan_caps: a progressive file (libjpeg-turbo's script: 10 scans for
 * YCbCr) is refused past max_jpeg_scans or max_jpeg_scan_pixels with
 * ELIMIT and words naming the limit, and decodes within them; the decoder
 * then takes the next file. */
static void scan_caps(void **state)
{
	static const struct {
		uint32_t scans;
		uint64_t scan_pixels;
		int want;
		const char *needle;
	} cases[] = {
	        {3, 0, FPREP_ELIMIT, "more than max_jpeg_scans 3 scans"},
	        {32, 64 * 48 * 4, FPREP_ELIMIT, "exceeds max_jpeg_scan_pixels"},
	        {10, 64 * 48 * 10, FPREP_OK, ""},
	        {0, 0, FPREP_OK, ""},
	};
	tjhandle tc = tjInitCompress();
	unsigned char *px = calloc(64 * 48, 3), *jpg = NULL;
	unsigned long size = 0;
	char msg[FPREP_MESSAGE_SIZE];
	fprep_limits lim = test_limits;
	fprep__jpeg j;
	fprep__job job;

	(void)state;
	assert_non_null(px);
	for (int i = 0; i < 64 * 48 * 3; i++)
		px[i] = (unsigned char)(i * 7 + i / 64);
	assert_int_equal(tjCompress2(tc, px, 64, 0, 48, TJPF_RGB, &jpg, &size,
	                             TJSAMP_420, 90, TJFLAG_PROGRESSIVE),
	                 0);
	fprep__jpeg_init(&j);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		lim.max_jpeg_scans = cases[i].scans;
		lim.max_jpeg_scan_pixels = cases[i].scan_pixels;
		test_job(&job, jpg, size, FPREP_ORDER_RGB);
		job.limits = &lim;
		msg[0] = '\0';
		assert_int_equal(test_decode(&j, &job, msg, sizeof(msg)),
		                 cases[i].want);
		assert_non_null(strstr(msg, cases[i].needle));
	}
	fprep__jpeg_fini(&j);
	tjFree(jpg);
	tjDestroy(tc);
	free(px);
}

CMOCKA_MAIN({
        cmocka_unit_test(decode_rewrites_job),
        cmocka_unit_test(buffer_grows_only_for_larger),
        cmocka_unit_test(refused_before_allocation),
        cmocka_unit_test(bad_frames_then_good),
        cmocka_unit_test(region_bytes_read_once),
        cmocka_unit_test(scan_caps),
})
