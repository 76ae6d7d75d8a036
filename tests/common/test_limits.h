/*
 * test_limits.h: the daemon's limits (fprep_limits) as the tests of the
 * request codec and of the ops give them. Header-only.
 */
#ifndef FPREP_TESTS_TEST_LIMITS_H
#define FPREP_TESTS_TEST_LIMITS_H

#include <stdint.h>

#include "frameprep/protocol.h"

/* test_no_limits: limits that refuse no size (and no ROIS or BATCH:
 * max_elements 0). */
static const fprep_limits test_no_limits __attribute__((unused)) = {
        .max_width = UINT32_MAX,
        .max_height = UINT32_MAX,
        .max_frame_bytes = UINT64_MAX,
        .max_out_width = UINT32_MAX,
        .max_out_height = UINT32_MAX,
        .max_tensor_bytes = UINT64_MAX,
};

/* TEST_SMALL_LIMITS: size bounds small enough for a test to cross each
 * (designated initialisers of an fprep_limits). */
#define TEST_SMALL_LIMITS                                                      \
	.max_width = 1000, .max_height = 800, .max_frame_bytes = 1u << 20,     \
	.max_out_width = 512, .max_out_height = 400,                           \
	.max_tensor_bytes = 1u << 21

/* TEST_SIZE_LIMITS(w, h, frame_bytes, ow, oh): the size bounds of frames
 * up to w x h pixels and frame_bytes bytes into tensors up to ow x oh of
 * three F32 channels (designated initialisers of an fprep_limits). */
#define TEST_SIZE_LIMITS(w, h, frame_bytes, ow, oh)                            \
	.max_width = (w), .max_height = (h), .max_frame_bytes = (frame_bytes), \
	.max_out_width = (ow), .max_out_height = (oh),                         \
	.max_tensor_bytes = (uint64_t)(ow) * (oh)*3 * 4

#endif /* FPREP_TESTS_TEST_LIMITS_H */
