/*
 * test_rules.c: the rules every side shares, each one public function:
 * the letterbox fit (fprep_fit_compute, and the transforms of frames and
 * ROI boxes built on it), doorbell eligibility (fprep_doorbell_check) and
 * the limits in INFO (fprep_limits_parse).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "frameprep/frameprep.h"

static void fit_letterbox(void **state)
{
	fprep_transform xf;

	(void)state;
	/* 1080p into 640x640: r = 1/3, 640 x 360, 140 rows above. */
	fprep_fit_compute(640, 640, 1920, 1080, FPREP_RESIZE_LETTERBOX, &xf);
	assert_int_equal(xf.resized_w, 640);
	assert_int_equal(xf.resized_h, 360);
	assert_int_equal(xf.pad_x, 0);
	assert_int_equal(xf.pad_y, 140);
	assert_true(xf.scale_x == (float)(640.0 / 1920));
	/* 5 x 3 into 4 x 4: 4 x 2.4 -> 2 rows, pad 0.9 -> 1. */
	fprep_fit_compute(4, 4, 5, 3, FPREP_RESIZE_LETTERBOX, &xf);
	assert_int_equal(xf.resized_h, 2);
	assert_int_equal(xf.pad_y, 1);
	/* Stretch: the whole tensor, no pad. */
	fprep_fit_compute(320, 200, 1920, 1080, FPREP_RESIZE_STRETCH, &xf);
	assert_int_equal(xf.resized_w, 320);
	assert_int_equal(xf.resized_h, 200);
	assert_int_equal(xf.pad_x + xf.pad_y, 0);
	/* No source: nothing. */
	fprep_fit_compute(640, 640, 0, 1080, FPREP_RESIZE_LETTERBOX, &xf);
	assert_int_equal(xf.resized_w + xf.resized_h, 0);
}

/* The transform of a FRAME request and of a ROI box covering the whole
 * frame are the fit of the same sizes. */
static void fit_is_every_transform(void **state)
{
	fprep_request req;
	fprep_transform t, f;
	fprep_element el;
	fprep_element_xf x;

	(void)state;
	fprep_request_init(&req, FPREP_PIX_BGR8, 1279, 721);
	req.out_width = 416;
	req.out_height = 320;
	fprep_transform_compute(&req, &t);
	fprep_fit_compute(416, 320, 1279, 721, req.resize, &f);
	assert_memory_equal(&t, &f, sizeof(t));
	memset(&el, 0, sizeof(el));
	el.type = FPREP_ELEM_BOX;
	el.v[2] = 1279;
	el.v[3] = 721;
	fprep_element_transform(&req, &el, &x);
	assert_int_equal(x.resized_w, t.resized_w);
	assert_int_equal(x.resized_h, t.resized_h);
	assert_int_equal(x.pad_x, t.pad_x);
	assert_int_equal(x.pad_y, t.pad_y);
	assert_true(x.scale_x == t.scale_x && x.scale_y == t.scale_y);
}

static void doorbell_eligibility(void **state)
{
	fprep_request req;
	char why[FPREP_MESSAGE_SIZE];

	(void)state;
	fprep_request_init(&req, FPREP_PIX_BGR8, 640, 480);
	req.input_loc = FPREP_LOC_SHM;
	req.output_loc = FPREP_LOC_CUDA;
	assert_int_equal(fprep_doorbell_check(&req, why, sizeof(why)), 0);
	req.output_loc = FPREP_LOC_INLINE;
	assert_int_equal(fprep_doorbell_check(&req, why, sizeof(why)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(why, "output_loc: inline"));
	req.output_loc = FPREP_LOC_SHM;
	req.input_loc = FPREP_LOC_INLINE;
	assert_int_equal(fprep_doorbell_check(&req, NULL, 0), FPREP_EINVAL);
	req.input_loc = FPREP_LOC_SHM;
	req.kind = FPREP_KIND_INFO;
	assert_int_equal(fprep_doorbell_check(&req, why, sizeof(why)),
	                 FPREP_EINVAL);
	assert_string_equal(why, "kind: 2 through a doorbell: only FRAME and "
	                         "ECHO requests come that way");
}

static void limits_from_info(void **state)
{
	fprep_limits lim;
	const char *info = "backend: cpu\nmax_width: 8192\nmax_height: 4096\n"
	                   "max_frame_bytes: 100663296\nmax_out_width: 4096\n"
	                   "max_out_height: 2048\nmax_tensor_bytes: 5000\n"
	                   "max_elements: 64\n";

	(void)state;
	assert_int_equal(fprep_limits_parse(info, &lim), 0);
	assert_int_equal(lim.max_width, 8192);
	assert_int_equal(lim.max_height, 4096);
	assert_true(lim.max_frame_bytes == 100663296);
	assert_int_equal(lim.max_out_height, 2048);
	assert_true(lim.max_tensor_bytes == 5000);
	assert_int_equal(lim.max_elements, 64);
	assert_true(lim.max_batch_bytes == 0);
	assert_int_equal(lim.max_jpeg_scans, 0);
	/* One of the six missing, or out of its field's range: refused. */
	assert_int_equal(fprep_limits_parse("max_width: 1\n", &lim),
	                 FPREP_EPROTO);
	assert_int_equal(lim.max_width, 0);
	assert_int_equal(
	        fprep_limits_parse("max_width: 4294967296\nmax_height: 1\n"
	                           "max_frame_bytes: 1\nmax_out_width: 1\n"
	                           "max_out_height: 1\nmax_tensor_bytes: 1\n",
	                           &lim),
	        FPREP_EPROTO);
	assert_int_equal(fprep_limits_parse(NULL, &lim), FPREP_EPROTO);
}

/* The limits a daemon may not tell: each read into its own field (64-bit
 * ones past 32 bits), a 32-bit one past its range read as 0 (not told). */
static void limits_told_or_not(void **state)
{
	fprep_limits lim, want;
	const char *info = "max_width: 1\nmax_height: 1\nmax_frame_bytes: 1\n"
	                   "max_out_width: 1\nmax_out_height: 1\n"
	                   "max_tensor_bytes: 1\nmax_elements: 7\n"
	                   "max_batch_bytes: 8589934593\nmax_jpeg_scans: 9\n"
	                   "max_jpeg_scan_pixels: 8589934595\n"
	                   "max_packet_bytes: 8589934597\n"
	                   "max_streams_per_conn: 4294967296\n"
	                   "max_streams_per_uid: 12\nmax_stream_frames: 13\n";

	(void)state;
	memset(&want, 0, sizeof(want));
	want.max_width = want.max_height = 1;
	want.max_frame_bytes = want.max_tensor_bytes = 1;
	want.max_out_width = want.max_out_height = 1;
	want.max_elements = 7;
	want.max_batch_bytes = 8589934593ull;
	want.max_jpeg_scans = 9;
	want.max_jpeg_scan_pixels = 8589934595ull;
	want.max_packet_bytes = 8589934597ull;
	want.max_streams_per_uid = 12;
	want.max_stream_frames = 13;
	assert_int_equal(fprep_limits_parse(info, &lim), 0);
	assert_memory_equal(&lim, &want, sizeof(lim));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(fit_letterbox),
	        cmocka_unit_test(fit_is_every_transform),
	        cmocka_unit_test(doorbell_eligibility),
	        cmocka_unit_test(limits_from_info),
	        cmocka_unit_test(limits_told_or_not),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
