/*
 * test_video_scan.c: fprep__video_scan (src/backend/video_common.c), which
 * tells the GPU's video session (NVDEC) where a stream may start and which
 * parameter sets a new parser is fed: IDR (H.264) and IRAP (HEVC) slices
 * found by their NAL unit types behind three- and four-byte start codes,
 * the parameter sets of the last packet that held any kept whole (start
 * codes included), packets without any leaving them as they were.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "video.h"

static void scan_h264(void **state)
{
	/* AUD, SPS, PPS (4-byte start codes), IDR slice (3-byte). */
	static const uint8_t idr[] = {0, 0,    0,    1,    0x09, 0xf0, 0, 0,
	                              0, 1,    0x67, 0x42, 0x00, 0x1e, 0, 0,
	                              0, 1,    0x68, 0xce, 0x3c, 0x80, 0, 0,
	                              1, 0x65, 0x88, 0x84, 0x00};
	/* AUD, a non-IDR slice. */
	static const uint8_t p_slice[] = {0, 0, 0, 1,    0x09, 0x30,
	                                  0, 0, 1, 0x41, 0x9a, 0x02};
	static const uint8_t sets[] = {0, 0, 0, 1, 0x67, 0x42, 0x00, 0x1e,
	                               0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80};
	fprep_request spec;
	fprep__video_ps ps = {0};

	(void)state;
	fprep_stream_request_init(&spec, FPREP_PIX_H264);
	assert_int_equal(fprep__video_scan(&spec, idr, sizeof idr, &ps), 1);
	assert_int_equal(ps.len, sizeof sets);
	assert_memory_equal(ps.data, sets, sizeof sets);
	assert_int_equal(fprep__video_scan(&spec, p_slice, sizeof p_slice, &ps),
	                 0);
	assert_int_equal(ps.len, sizeof sets); /* kept */
	assert_int_equal(fprep__video_scan(&spec, idr, 3, &ps), 0);
	assert_int_equal(fprep__video_scan(&spec, idr, 0, NULL), 0);
	free(ps.data);
}

static void scan_hevc(void **state)
{
	/* AUD (35), VPS (32), SPS (33), PPS (34), IDR_W_RADL slice (19). */
	static const uint8_t idr[] = {
	        0,    0,    0, 1, 0x46, 0x01, 0x10, 0,    0,   0, 1, 0x40, 0x01,
	        0x0c, 0,    0, 0, 1,    0x42, 0x01, 0x01, 0,   0, 0, 1,    0x44,
	        0x01, 0xc1, 0, 0, 1,    0x26, 0x01, 0xaf, 0x1d};
	/* AUD, CRA (21): an IRAP picture. */
	static const uint8_t cra[] = {0, 0, 0, 1,    0x46, 0x01, 0x50,
	                              0, 0, 1, 0x2a, 0x01, 0xac};
	/* AUD, TRAIL_R (1). */
	static const uint8_t trail[] = {0, 0, 0, 1,    0x46, 0x01, 0x50,
	                                0, 0, 1, 0x02, 0x01, 0xd0};
	fprep_request spec;
	fprep__video_ps ps = {0};

	(void)state;
	fprep_stream_request_init(&spec, FPREP_PIX_HEVC);
	assert_int_equal(fprep__video_scan(&spec, idr, sizeof idr, &ps), 1);
	assert_int_equal(ps.len, 3 * 7);
	assert_memory_equal(ps.data, idr + 7, 3 * 7);
	assert_int_equal(fprep__video_scan(&spec, cra, sizeof cra, &ps), 1);
	assert_int_equal(fprep__video_scan(&spec, trail, sizeof trail, &ps), 0);
	assert_int_equal(ps.len, 3 * 7);
	free(ps.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(scan_h264),
	        cmocka_unit_test(scan_hevc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
