/*
 * test_roi_protocol.c: ROIS and BATCH requests on the wire
 * (src/lib/protocol.c) and their reference op (src/lib/ops_roi.c).
 *
 * Round trips of the element table and the reply's transform records,
 * every refusal of a bad element list (named by index, before anything is
 * allocated), the reply checks, and properties of the op that OpenCV
 * cannot show: a fractional box, a box wholly outside the frame, a batch
 * frame equal to the FRAME op.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "test_limits.h"

static const fprep_limits test_limits = {
        TEST_SMALL_LIMITS,
        .max_elements = 8,
        .max_batch_bytes = 1u << 22,
};

/* test_msg builds a ROIS or BATCH message: header, table of n elements,
 * payload bytes; returns its length. */
static size_t test_msg(uint8_t *buf, const fprep_request *req,
                       const fprep_element *el, uint32_t n, size_t payload)
{
	size_t at = FPREP_REQUEST_HEADER_SIZE + FPREP_TABLE_HEADER_SIZE +
	            (size_t)n * FPREP_ELEMENT_SIZE;

	fprep_request_encode(req, buf);
	fprep_elements_encode(el, n, buf + FPREP_REQUEST_HEADER_SIZE);
	for (size_t i = 0; i < payload; i++)
		buf[at + i] = (uint8_t)(i * 13);
	return at + payload;
}

static void test_rois_req(fprep_request *req)
{
	fprep_request_init(req, FPREP_PIX_BGR8, 64, 48);
	req->kind = FPREP_KIND_ROIS;
	req->request_id = 99;
	req->out_width = 32;
	req->out_height = 16;
}

static uint8_t test_buf[1 << 16];

/* A ROIS request decodes to its fields, N and the span; its elements read
 * back as written; the tensor shape is (N, C, H, W). */
static void rois_roundtrip(void **state)
{
	fprep_element el[3] =
	        {
	                {.type = FPREP_ELEM_BOX,
	                 .resize = 2,
	                 .v = {1.5f, 2, 30, 20}},
	                {.type = FPREP_ELEM_AFFINE,
	                 .v = {1, 0.5f, -3, 0.25f, 2, 7}},
	                {.type = FPREP_ELEM_BOX, .v = {-10, -10, 100, 100}},
	        },
	              got;
	fprep_request req, d;
	uint32_t shape[4];
	uint64_t bytes;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len;

	(void)state;
	test_rois_req(&req);
	len = test_msg(test_buf, &req, el, 3, req.input_size);
	assert_int_equal(fprep_request_decode(test_buf, len, &test_limits, &d,
	                                      msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.kind, FPREP_KIND_ROIS);
	assert_int_equal(d.elements, 3);
	assert_int_equal(d.input_span, req.input_size);
	assert_int_equal(fprep_request_payload_offset(&d),
	                 FPREP_REQUEST_HEADER_SIZE + 8 + 3 * 32);
	for (uint32_t k = 0; k < 3; k++) {
		fprep_element_get(test_buf + FPREP_REQUEST_HEADER_SIZE, k,
		                  &got);
		assert_int_equal(got.type, el[k].type);
		assert_int_equal(got.resize, el[k].resize);
		assert_memory_equal(got.v, el[k].v, sizeof(got.v));
	}
	assert_int_equal(fprep_tensor_shape(&d, shape, &bytes), FPREP_OK);
	assert_int_equal(shape[0], 3);
	assert_int_equal(shape[1], 3);
	assert_int_equal(bytes, 3ull * 3 * 32 * 16 * 4);
}

/* A BATCH request: the span is the furthest frame's end; inline, the
 * payload must be exactly that. */
static void batch_roundtrip(void **state)
{
	fprep_element el[3] = {{.type = FPREP_ELEM_FRAME, .offset = 0}};
	fprep_request req, d;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len;

	(void)state;
	fprep_request_init(&req, FPREP_PIX_GRAY8, 20, 10);
	req.kind = FPREP_KIND_BATCH;
	req.channel_order = FPREP_ORDER_GRAY;
	req.out_width = req.out_height = 8;
	el[1] = el[2] = el[0];
	el[1].offset = 400; /* a gap: frames need not touch */
	el[2].offset = 200;
	len = test_msg(test_buf, &req, el, 3, 600);
	assert_int_equal(fprep_request_decode(test_buf, len, &test_limits, &d,
	                                      msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.input_span, 600);
	len = test_msg(test_buf, &req, el, 3, 599);
	assert_int_equal(fprep_request_decode(test_buf, len, &test_limits, &d,
	                                      msg, sizeof(msg)),
	                 FPREP_EPROTO);
	assert_non_null(strstr(msg, "span 600"));
	/* In a region: no payload, the span is the region's to check. */
	req.input_loc = FPREP_LOC_SHM;
	req.in_region = 1;
	len = test_msg(test_buf, &req, el, 3, 0);
	assert_int_equal(fprep_request_decode(test_buf, len, &test_limits, &d,
	                                      msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.input_span, 600);
}

/* expect_refusal decodes a one-element ROIS (or BATCH) request whose
 * element is el and checks the error and the words of its message. */
static void expect_refusal(fprep_request *req, const fprep_element *el,
                           uint32_t n, int err, const char *words)
{
	fprep_request d;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len = test_msg(
	        test_buf, req, el, n,
	        req->input_loc == FPREP_LOC_INLINE ? req->input_size : 0);

	assert_int_equal(fprep_request_decode(test_buf, len, &test_limits, &d,
	                                      msg, sizeof(msg)),
	                 err);
	if (strstr(msg, words) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", msg, words);
	assert_int_equal(d.request_id, 99);
}

/* Bad element lists are refused with a named error, by index. */
static void refusals(void **state)
{
	fprep_element el[9];
	fprep_request req;
	fprep_element box = {.type = FPREP_ELEM_BOX, .v = {0, 0, 10, 10}};

	(void)state;
	for (int i = 0; i < 9; i++)
		el[i] = box;
	test_rois_req(&req);
	expect_refusal(&req, el, 0, FPREP_EINVAL, "elements is 0");
	expect_refusal(&req, el, 9, FPREP_ELIMIT,
	               "elements 9 exceeds max_elements 8");
	el[2].v[2] = 0;
	expect_refusal(&req, el, 3, FPREP_EINVAL, "element 2: w 0 is not > 0");
	el[2].v[2] = 5, el[2].v[3] = -1;
	expect_refusal(&req, el, 3, FPREP_EINVAL, "element 2: h -1 is not > 0");
	el[2].v[3] = NAN;
	expect_refusal(&req, el, 3, FPREP_EINVAL, "element 2: h nan is not");
	el[2] = box;
	el[1].v[0] = INFINITY;
	expect_refusal(&req, el, 3, FPREP_EINVAL, "element 1: x inf is not");
	el[1].v[0] = 3e7f;
	expect_refusal(&req, el, 3, FPREP_EINVAL,
	               "element 1: x 3e+07 is beyond");
	el[1] = box;
	el[1].type = 7;
	expect_refusal(&req, el, 2, FPREP_EINVAL,
	               "element 1: type 7 in a ROIS");
	el[1].type = FPREP_ELEM_FRAME;
	expect_refusal(&req, el, 2, FPREP_EINVAL,
	               "element 1: type 3 in a ROIS");
	el[1] = box;
	el[1].resize = 3;
	expect_refusal(&req, el, 2, FPREP_EINVAL,
	               "element 1: resize 3 is not a resize mode");
	el[1] = box;
	el[0].type = FPREP_ELEM_AFFINE;
	el[0].v[4] = NAN;
	expect_refusal(&req, el, 1, FPREP_EINVAL, "element 0: m11 nan");
	el[0] = box;
	/* Whole-request refusals. */
	req.out_width = req.out_height = 400;
	expect_refusal(&req, el, 8, FPREP_ELIMIT, "exceed max_batch_bytes");
	test_rois_req(&req);
	req.shm_reply = 1;
	req.output_loc = FPREP_LOC_SHM;
	req.out_capacity = 1 << 20;
	expect_refusal(&req, el, 1, FPREP_EINVAL, "SHM_REPLY in a ROIS");
	test_rois_req(&req);
	req.rounding = FPREP_ROUNDING_OPENCV;
	expect_refusal(&req, el, 1, FPREP_EINVAL,
	               "rounding 1 in a ROIS request: only float");
	test_rois_req(&req);
	req.src_format = FPREP_PIX_NV12;
	req.uv_stride = 64;
	req.u_offset = 64 * 48;
	req.input_size = 64 * 48 * 3 / 2;
	req.src_stride = 64;
	expect_refusal(&req, el, 1, FPREP_EINVAL,
	               "src_format 6 in a ROIS request");
	/* BATCH: a record that is not a FRAME, an offset that overflows. */
	test_rois_req(&req);
	req.kind = FPREP_KIND_BATCH;
	req.input_loc = FPREP_LOC_SHM;
	expect_refusal(&req, el, 1, FPREP_EINVAL,
	               "element 0: type 1 in a BATCH");
	el[0].type = FPREP_ELEM_FRAME;
	el[0].offset = UINT64_MAX - 5;
	expect_refusal(&req, el, 1, FPREP_EINVAL,
	               "element 0: offset 18446744073709551610 + input_size");
	el[0].offset = 1u << 22;
	expect_refusal(&req, el, 1, FPREP_ELIMIT, "span");
}

/* A table cut short, or no table at all, is a protocol error. */
static void truncated(void **state)
{
	fprep_element el[2] = {{.type = FPREP_ELEM_BOX, .v = {0, 0, 4, 4}}};
	fprep_request req, d;
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	el[1] = el[0];
	test_rois_req(&req);
	req.input_loc = FPREP_LOC_SHM;
	test_msg(test_buf, &req, el, 2, 0);
	assert_int_equal(
	        fprep_request_decode(test_buf, FPREP_REQUEST_HEADER_SIZE + 4,
	                             &test_limits, &d, msg, sizeof(msg)),
	        FPREP_EPROTO);
	assert_non_null(strstr(msg, "element table header"));
	assert_int_equal(
	        fprep_request_decode(test_buf,
	                             FPREP_REQUEST_HEADER_SIZE + 8 + 32 + 31,
	                             &test_limits, &d, msg, sizeof(msg)),
	        FPREP_EPROTO);
	assert_non_null(strstr(msg, "the table of 2 elements"));
}

/* The reply: a payload of tensor + N records (inline) or N records
 * (region output); the records round-trip. */
static void reply(void **state)
{
	fprep_reply_header rep, d;
	fprep_element_xf xf = {1, 2, 3, 4, 0.5f, 0.25f, -7.5f, 8}, back;
	uint8_t buf[FPREP_REPLY_HEADER_SIZE + 2 * 3 * 2 * 2 + 2 * 32];

	(void)state;
	memset(&rep, 0, sizeof(rep));
	rep.version = FPREP_PROTOCOL_VERSION;
	rep.kind = FPREP_KIND_ROIS;
	rep.dtype = FPREP_DTYPE_U8;
	rep.layout = FPREP_LAYOUT_NCHW;
	rep.ndim = 4;
	rep.shape[0] = 2, rep.shape[1] = 3, rep.shape[2] = 2;
	rep.shape[3] = 2;
	rep.tensor_size = 24;
	rep.payload_size = 24 + 64;
	fprep_reply_encode(&rep, buf);
	assert_int_equal(fprep_reply_decode(buf, sizeof(buf), &d), FPREP_OK);
	rep.payload_size = 24;
	fprep_reply_encode(&rep, buf);
	assert_int_equal(
	        fprep_reply_decode(buf, FPREP_REPLY_HEADER_SIZE + 24, &d),
	        FPREP_EPROTO);
	rep.output_loc = FPREP_LOC_SHM;
	rep.payload_size = 64;
	fprep_reply_encode(&rep, buf);
	assert_int_equal(
	        fprep_reply_decode(buf, FPREP_REPLY_HEADER_SIZE + 64, &d),
	        FPREP_OK);
	fprep_element_xf_encode(&xf, buf);
	fprep_element_xf_decode(buf, &back);
	assert_memory_equal(&xf, &back, sizeof(xf));
}

/* run_elements runs the reference on a 64x48 gradient frame. */
static void run_elements(fprep_request *req, const fprep_element *el,
                         uint32_t n, const uint8_t *frame, uint8_t *out,
                         fprep_element_xf *xfs)
{
	uint32_t shape[4];
	uint64_t bytes;

	req->elements = n;
	req->input_span = req->input_size;
	assert_int_equal(fprep_tensor_shape(req, shape, &bytes), FPREP_OK);
	assert_int_equal(
	        fprep_preprocess_elements_cpu(req, el, frame, out, bytes, xfs),
	        FPREP_OK);
}

/* A box wholly outside the frame is all pad; a whole-frame box equals the
 * FRAME op; a box shifted by a fraction lies between its neighbours; the
 * transform maps the box's corners to the resized image's. */
static void op_properties(void **state)
{
	static uint8_t frame[64 * 48 * 3], out[4 * 3 * 16 * 32];
	static uint8_t whole[3 * 16 * 32];
	fprep_element el[4] = {
	        {.type = FPREP_ELEM_BOX, .v = {100, 100, 10, 10}},
	        {.type = FPREP_ELEM_BOX, .v = {0, 0, 64, 48}},
	        {.type = FPREP_ELEM_BOX, .v = {10, 10, 16, 8}},
	        {.type = FPREP_ELEM_BOX, .v = {10.5f, 10, 16, 8}},
	};
	fprep_element_xf xfs[4];
	fprep_request req;
	size_t per = 3 * 16 * 32;

	(void)state;
	for (int y = 0; y < 48; y++)
		for (int x = 0; x < 64; x++)
			for (int c = 0; c < 3; c++)
				frame[(y * 64 + x) * 3 + c] =
				        (uint8_t)(x * 3 + y * (c + 1));
	test_rois_req(&req);
	req.dtype = FPREP_DTYPE_U8;
	run_elements(&req, el, 4, frame, out, xfs);
	for (size_t i = 0; i < per; i++)
		assert_int_equal(out[i], 114);
	req.kind = FPREP_KIND_FRAME;
	req.elements = 0;
	assert_int_equal(fprep_preprocess_cpu(&req, frame, whole, per, NULL),
	                 FPREP_OK);
	assert_memory_equal(out + per, whole, per);
	/* 16x8 into 32x16: scale 2, no pad; origin at the box. */
	assert_int_equal(xfs[2].resized_w, 32);
	assert_int_equal(xfs[2].pad_x, 0);
	assert_true(xfs[2].scale_x == 2.0f && xfs[2].origin_x == 10.0f);
	assert_true(xfs[3].origin_x == 10.5f);
	/* The half-pixel shift: each sample between its neighbours. */
	for (size_t i = 0; i < per; i++) {
		int a = out[2 * per + i], b = out[3 * per + i];

		assert_true(abs(a - b) <= 6);
	}
	assert_memory_not_equal(out + 2 * per, out + 3 * per, per);

	/* A box thinner than the float step at its x reads its one pixel
	 * column, as the box (20, 5, 1, 20) does, not the one before it. */
	el[0].v[0] = 20, el[0].v[1] = 5, el[0].v[2] = 1e-30f;
	el[0].v[3] = 20, el[0].resize = FPREP_RESIZE_STRETCH;
	el[1] = el[0];
	el[1].v[2] = 1;
	req.kind = FPREP_KIND_ROIS;
	run_elements(&req, el, 2, frame, out, xfs);
	assert_memory_equal(out, out + per, per);

	/* BATCH: frames past the input_span the request declares. */
	fprep_element fr[2] = {{.type = FPREP_ELEM_FRAME, .offset = 0},
	                       {.type = FPREP_ELEM_FRAME, .offset = 100}};
	uint32_t shape[4];
	uint64_t bytes;
	req.kind = FPREP_KIND_BATCH;
	req.elements = 2;
	req.input_span = req.input_size;
	assert_int_equal(fprep_tensor_shape(&req, shape, &bytes), FPREP_OK);
	assert_int_equal(fprep_preprocess_elements_cpu(&req, fr, frame, out,
	                                               bytes, NULL),
	                 FPREP_EINVAL);
}

CMOCKA_MAIN({
        cmocka_unit_test(rois_roundtrip),
        cmocka_unit_test(batch_roundtrip),
        cmocka_unit_test(refusals),
        cmocka_unit_test(truncated),
        cmocka_unit_test(reply),
        cmocka_unit_test(op_properties),
})
