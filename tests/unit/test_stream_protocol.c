/*
 * test_stream_protocol.c: video stream requests and replies on the wire
 * (src/lib/protocol.c, "Video streams" in protocol.h).
 *
 * Round trips of STREAM_OPEN, STREAM_PACKET, STREAM_FLUSH, STREAM_CLOSE
 * and the reply's frame records, the bytes at their documented offsets,
 * every refusal (naming the field and the limit), and the reply checks
 * (no frame, several frames, a payload that does not add up).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "test_limits.h"

static const fprep_limits test_limits = {
        TEST_SIZE_LIMITS(1920, 1088, 1920 * 1088 * 3 / 2, 640, 640),
        .max_elements = 8,
        .max_batch_bytes = 1u << 22,
        .max_packet_bytes = 1000,
        .max_streams_per_conn = 2,
        .max_streams_per_uid = 3,
        .max_stream_frames = 4,
};

/* test_open_msg encodes a STREAM_OPEN with payload bytes of parameter
 * sets into buf; returns its length. */
static size_t test_open_msg(uint8_t *buf, const fprep_request *req,
                            size_t payload)
{
	fprep_request_encode(req, buf);
	for (size_t i = 0; i < payload; i++)
		buf[FPREP_REQUEST_HEADER_SIZE + i] = (uint8_t)(i * 3);
	return FPREP_REQUEST_HEADER_SIZE + payload;
}

static void open_round_trip(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE + 64];
	fprep_request req, got;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len;

	(void)state;
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	assert_int_equal(req.kind, FPREP_KIND_STREAM_OPEN);
	req.request_id = 0x1122334455667788ull;
	req.input_size = 40;
	req.yuv_matrix = FPREP_MATRIX_BT709;
	req.rounding = FPREP_ROUNDING_OPENCV;
	len = test_open_msg(buf, &req, 40);
	/* The codec at offset 16, the parameter sets' bytes at 112. */
	assert_int_equal(buf[16], FPREP_PIX_H264);
	assert_int_equal(buf[112], 40);
	assert_int_equal(fprep_request_decode(buf, len, &test_limits, &got, msg,
	                                      sizeof(msg)),
	                 FPREP_OK);
	assert_memory_equal(&req, &got, sizeof(req));

	req.src_format = FPREP_PIX_HEVC;
	req.input_size = 0;
	len = test_open_msg(buf, &req, 0);
	assert_int_equal(fprep_request_decode(buf, len, &test_limits, &got, msg,
	                                      sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(got.src_format, FPREP_PIX_HEVC);
	assert_string_equal(fprep_kind_name(FPREP_KIND_STREAM_OPEN),
	                    "stream_open");
	assert_string_equal(fprep_kind_name(FPREP_KIND_STREAM_CLOSE),
	                    "stream_close");
}

/* test_open_refused expects req (with payload bytes) to be refused with
 * err and a message containing words. */
static void test_open_refused(const fprep_request *req, size_t payload, int err,
                              const char *words)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE + 2048];
	fprep_request got;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len = test_open_msg(buf, req, payload);

	assert_int_equal(fprep_request_decode(buf, len, &test_limits, &got, msg,
	                                      sizeof(msg)),
	                 err);
	if (strstr(msg, words) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", msg, words);
	assert_int_equal(got.kind, FPREP_KIND_STREAM_OPEN);
}

static void open_refusals(void **state)
{
	fprep_request req;

	(void)state;
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	req.src_format = FPREP_PIX_NV12;
	test_open_refused(&req, 0, FPREP_EINVAL, "is not a codec");
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	req.src_width = 1920;
	test_open_refused(&req, 0, FPREP_EINVAL, "must be 0");
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	req.output_loc = FPREP_LOC_SHM;
	test_open_refused(&req, 0, FPREP_EINVAL, "inline");
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	req.channel_order = FPREP_ORDER_GRAY;
	test_open_refused(&req, 0, FPREP_EINVAL, "GRAY");
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	req.input_size = 1001;
	test_open_refused(&req, 1001, FPREP_ELIMIT, "max_packet_bytes 1000");
	fprep_stream_request_init(&req, FPREP_PIX_H264);
	req.input_size = 10;
	test_open_refused(&req, 9, FPREP_EPROTO, "!= input_size 10");
	/* The tensor's fields are checked as a FRAME's. */
	fprep_stream_request_init(&req, FPREP_PIX_HEVC);
	req.out_width = 641;
	test_open_refused(&req, 0, FPREP_ELIMIT, "max_out_width 640");
	fprep_stream_request_init(&req, FPREP_PIX_HEVC);
	req.std[1] = 0.0f;
	test_open_refused(&req, 0, FPREP_EINVAL, "std[1]");
	fprep_stream_request_init(&req, FPREP_PIX_HEVC);
	req.yuv_range = 7;
	test_open_refused(&req, 0, FPREP_EINVAL, "yuv_range 7");
}

/* test_stream_msg encodes req with its packet into buf; returns its
 * length. */
static size_t test_stream_msg(uint8_t *buf, const fprep_stream_request *req,
                              size_t payload)
{
	fprep_stream_request_encode(req, buf);
	for (size_t i = 0; i < payload; i++)
		buf[FPREP_REQUEST_HEADER_SIZE + i] = (uint8_t)i;
	return FPREP_REQUEST_HEADER_SIZE + payload;
}

static void packet_round_trip(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE + 100];
	fprep_stream_request req, got;
	fprep_request any;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len;

	(void)state;
	/* Zeroed whole, padding included: compared as bytes below. */
	memset(&req, 0, sizeof(req));
	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_STREAM_PACKET;
	req.request_id = 9;
	req.stream_id = 0xa1b2c3d4u;
	req.pts = -2;
	req.packet_size = 100;
	len = test_stream_msg(buf, &req, 100);
	assert_memory_equal(buf, "FPRQ", 4);
	assert_int_equal(buf[16], 0xd4);
	assert_int_equal(buf[19], 0xa1);
	for (int i = 24; i < 32; i++)
		assert_int_equal(buf[i], i == 24 ? 0xfe : 0xff); /* -2 */
	assert_int_equal(buf[32], 100);
	for (int i = 40; i < FPREP_REQUEST_HEADER_SIZE; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(fprep_stream_request_decode(buf, len, &test_limits,
	                                             &got, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_memory_equal(&req, &got, sizeof(req));
	/* fprep_request_decode accepts it too, with the common part. */
	assert_int_equal(fprep_request_decode(buf, len, &test_limits, &any, msg,
	                                      sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(any.kind, FPREP_KIND_STREAM_PACKET);
	assert_int_equal(any.request_id, 9);

	req.kind = FPREP_KIND_STREAM_FLUSH;
	req.pts = 0;
	req.packet_size = 0;
	len = test_stream_msg(buf, &req, 0);
	assert_int_equal(fprep_stream_request_decode(buf, len, &test_limits,
	                                             &got, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_memory_equal(&req, &got, sizeof(req));
	req.kind = FPREP_KIND_STREAM_CLOSE;
	len = test_stream_msg(buf, &req, 0);
	assert_int_equal(fprep_stream_request_decode(buf, len, &test_limits,
	                                             &got, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(got.kind, FPREP_KIND_STREAM_CLOSE);
}

/* test_stream_refused expects req with payload bytes to be refused. */
static void test_stream_refused(const fprep_stream_request *req, size_t payload,
                                int err, const char *words)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE + 1100];
	fprep_stream_request got;
	char msg[FPREP_MESSAGE_SIZE];
	size_t len = test_stream_msg(buf, req, payload);

	assert_int_equal(fprep_stream_request_decode(buf, len, &test_limits,
	                                             &got, msg, sizeof(msg)),
	                 err);
	if (strstr(msg, words) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", msg, words);
	assert_int_equal(got.request_id, req->request_id);
}

static void packet_refusals(void **state)
{
	fprep_stream_request req = {
	        .version = FPREP_PROTOCOL_VERSION,
	        .kind = FPREP_KIND_STREAM_PACKET,
	        .request_id = 10,
	        .stream_id = 1,
	        .packet_size = 8,
	};
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_stream_request got;

	(void)state;
	test_stream_refused(&req, 7, FPREP_EPROTO, "!= packet_size 8");
	req.packet_size = 1001;
	test_stream_refused(&req, 1001, FPREP_ELIMIT, "max_packet_bytes 1000");
	req.packet_size = 0;
	test_stream_refused(&req, 0, FPREP_EINVAL, "packet_size is 0");
	req.stream_id = 0;
	req.packet_size = 4;
	test_stream_refused(&req, 4, FPREP_EINVAL, "stream_id is 0");
	req.stream_id = 1;
	req.kind = FPREP_KIND_STREAM_FLUSH;
	test_stream_refused(&req, 4, FPREP_EINVAL, "must be 0");
	req.kind = FPREP_KIND_FRAME;
	test_stream_refused(&req, 4, FPREP_EINVAL, "is not STREAM_PACKET");
	/* A short header: EPROTO, with what could be read. */
	req.kind = FPREP_KIND_STREAM_CLOSE;
	req.packet_size = 0;
	fprep_stream_request_encode(&req, buf);
	assert_int_equal(fprep_stream_request_decode(buf, 40, &test_limits,
	                                             &got, NULL, 0),
	                 FPREP_EPROTO);
	assert_int_equal(got.kind, FPREP_KIND_STREAM_CLOSE);
}

/* test_reply builds a stream reply of n frames of a 3x4x5 U8 tensor, the
 * frame records after the tensors; returns its length. */
static size_t test_reply(uint8_t *buf, uint32_t n, fprep_reply_header *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->version = FPREP_PROTOCOL_VERSION;
	rep->kind = FPREP_KIND_STREAM_PACKET;
	rep->dtype = FPREP_DTYPE_U8;
	rep->layout = FPREP_LAYOUT_NCHW;
	rep->ndim = 4;
	rep->shape[0] = n;
	rep->shape[1] = 3;
	rep->shape[2] = 4;
	rep->shape[3] = 5;
	rep->tensor_size = 60ull * n;
	rep->payload_size = rep->tensor_size + n * FPREP_STREAM_FRAME_SIZE;
	fprep_reply_encode(rep, buf);
	for (uint32_t k = 0; k < n; k++) {
		fprep_stream_frame f = {
		        .pts = 1000 * (int64_t)k - 1,
		        .width = 17 + k,
		        .height = 9,
		        .scale_x = 0.5f,
		        .scale_y = 0.25f,
		        .pad_x = 1,
		        .pad_y = 2.5f,
		};

		fprep_stream_frame_encode(
		        &f, buf + FPREP_REPLY_HEADER_SIZE + rep->tensor_size +
		                    (size_t)k * FPREP_STREAM_FRAME_SIZE);
	}
	return FPREP_REPLY_HEADER_SIZE + (size_t)rep->payload_size;
}

static void reply_frames(void **state)
{
	uint8_t buf[FPREP_REPLY_HEADER_SIZE + 3 * (60 + 32)];
	fprep_reply_header rep, got;
	fprep_stream_frame f;
	size_t len;

	(void)state;
	len = test_reply(buf, 0, &rep);
	assert_int_equal(fprep_reply_decode(buf, len, &got), FPREP_OK);
	assert_int_equal(got.shape[0], 0);
	len = test_reply(buf, 3, &rep);
	assert_int_equal(fprep_reply_decode(buf, len, &got), FPREP_OK);
	fprep_stream_frame_decode(buf + FPREP_REPLY_HEADER_SIZE + 180 + 64, &f);
	assert_int_equal(f.pts, 1999);
	assert_int_equal(f.width, 19);
	assert_true(f.pad_y == 2.5f);
	/* A payload that is not the tensor plus the records. */
	assert_int_equal(fprep_reply_decode(buf, len - 1, &got), FPREP_EPROTO);
	rep.payload_size -= FPREP_STREAM_FRAME_SIZE;
	fprep_reply_encode(&rep, buf);
	assert_int_equal(
	        fprep_reply_decode(buf, len - FPREP_STREAM_FRAME_SIZE, &got),
	        FPREP_EPROTO);
	/* An error reply carries no tensor. */
	memset(&rep, 0, sizeof(rep));
	rep.version = FPREP_PROTOCOL_VERSION;
	rep.kind = FPREP_KIND_STREAM_PACKET;
	rep.status = FPREP_EBITSTREAM;
	snprintf(rep.message, sizeof(rep.message),
	         "broken bitstream: H.264 packet pts 3: invalid data");
	fprep_reply_encode(&rep, buf);
	assert_int_equal(fprep_reply_decode(buf, FPREP_REPLY_HEADER_SIZE, &got),
	                 FPREP_OK);
	assert_string_equal(
	        got.message,
	        "broken bitstream: H.264 packet pts 3: invalid data");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(open_round_trip),
	        cmocka_unit_test(open_refusals),
	        cmocka_unit_test(packet_round_trip),
	        cmocka_unit_test(packet_refusals),
	        cmocka_unit_test(reply_frames),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
