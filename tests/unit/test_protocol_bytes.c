/*
 * test_protocol_bytes.c: the wire bytes of every header, assembled here
 * field by field from the tables in protocol.h, against what the encoders
 * write; and the decoders read the hand-made bytes back.
 *
 * Every field gets a distinct, non-zero value whose bytes all differ, so a
 * field written at the wrong offset, with the wrong width or in the wrong
 * byte order shows up as the first differing byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"

/* bytes_le writes the n low bytes of v at buf + off, least significant
 * first. */
static void bytes_le(uint8_t *buf, size_t off, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		buf[off + i] = (uint8_t)(v >> (8 * i));
}

static void bytes_f32(uint8_t *buf, size_t off, float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	bytes_le(buf, off, u, 4);
}

/* bytes_equal fails with the first offset where got and want differ. */
static void bytes_equal(const uint8_t *got, const uint8_t *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			fail_msg("byte %zu: encoder wrote 0x%02x, the table "
			         "says 0x%02x",
			         i, got[i], want[i]);
}

/* A FRAME request with every field set. */
static void frame_request(fprep_request *r)
{
	memset(r, 0, sizeof(*r));
	r->version = FPREP_PROTOCOL_VERSION;
	r->kind = FPREP_KIND_FRAME;
	r->request_id = 0x0807060504030201ull;
	r->src_format = FPREP_PIX_RGBA8;
	r->src_width = 0x0b0a0908u;
	r->src_height = 0x0f0e0d0cu;
	r->src_stride = 0x13121110u;
	r->out_width = 0x17161514u;
	r->out_height = 0x1b1a1918u;
	r->resize = FPREP_RESIZE_STRETCH;
	r->channel_order = FPREP_ORDER_BGR;
	r->dtype = FPREP_DTYPE_F16;
	r->layout = FPREP_LAYOUT_NHWC;
	r->pad_value = 114.25f;
	r->scale = 1.0f / 255.0f;
	r->mean[0] = 0.485f;
	r->mean[1] = -0.456f;
	r->mean[2] = 0.406f;
	r->std[0] = 0.229f;
	r->std[1] = 0.224f;
	r->std[2] = 0.225f;
	r->input_loc = FPREP_LOC_SHM;
	r->output_loc = FPREP_LOC_SHM;
	r->in_region = 0x23222120u;
	r->out_region = 0x27262524u;
	r->in_offset = 0x2f2e2d2c2b2a2928ull;
	r->out_offset = 0x3736353433323130ull;
	r->out_capacity = 0x3f3e3d3c3b3a3938ull;
	r->input_size = 0x4746454443424140ull;
	r->yuv_matrix = 0x48;
	r->yuv_range = 0x49;
	r->uv_stride = 0x4b4a;
	r->u_offset = 0x4f4e4d4cu;
	r->v_offset = 0x53525150u;
}

static void frame_request_bytes(void **state)
{
	uint8_t got[FPREP_REQUEST_HEADER_SIZE];
	uint8_t want[FPREP_REQUEST_HEADER_SIZE] = {0};
	fprep_request r, d;
	fprep_limits lim = {UINT32_MAX, UINT32_MAX, UINT64_MAX, UINT32_MAX,
	                    UINT32_MAX, UINT64_MAX, UINT32_MAX, UINT64_MAX,
	                    UINT32_MAX, UINT64_MAX, UINT64_MAX, UINT32_MAX,
	                    UINT32_MAX, UINT32_MAX, UINT32_MAX};
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	frame_request(&r);
	memcpy(want, "FPRQ", 4);
	bytes_le(want, 4, FPREP_PROTOCOL_VERSION, 2);
	bytes_le(want, 6, FPREP_KIND_FRAME, 2);
	bytes_le(want, 8, r.request_id, 8);
	bytes_le(want, 16, FPREP_PIX_RGBA8, 2);
	want[18] = r.yuv_matrix;
	want[19] = r.yuv_range;
	bytes_le(want, 20, r.src_width, 4);
	bytes_le(want, 24, r.src_height, 4);
	bytes_le(want, 28, r.src_stride, 4);
	bytes_le(want, 32, r.out_width, 4);
	bytes_le(want, 36, r.out_height, 4);
	want[40] = FPREP_RESIZE_STRETCH;
	want[41] = FPREP_ORDER_BGR;
	want[42] = FPREP_DTYPE_F16;
	want[43] = FPREP_LAYOUT_NHWC;
	bytes_f32(want, 44, r.pad_value);
	bytes_f32(want, 48, r.scale);
	for (int c = 0; c < 3; c++) {
		bytes_f32(want, 52 + 4 * c, r.mean[c]);
		bytes_f32(want, 64 + 4 * c, r.std[c]);
	}
	want[76] = FPREP_LOC_SHM;
	want[77] = FPREP_LOC_SHM;
	bytes_le(want, 78, r.uv_stride, 2);
	bytes_le(want, 80, r.in_region, 4);
	bytes_le(want, 84, r.out_region, 4);
	bytes_le(want, 88, r.in_offset, 8);
	bytes_le(want, 96, r.out_offset, 8);
	bytes_le(want, 104, r.out_capacity, 8);
	bytes_le(want, 112, r.input_size, 8);
	bytes_le(want, 120, r.u_offset, 4);
	bytes_le(want, 124, r.v_offset, 4);

	memset(got, 0xa5, sizeof(got));
	fprep_request_encode(&r, got);
	bytes_equal(got, want, sizeof(want));

	/* The decoder reads the hand-made bytes back into the same fields
	 * (validation passes: stride, sizes and tensor fit the limits). */
	r.src_width = 640;
	r.src_height = 480;
	r.src_stride = 2560;
	r.out_width = 320;
	r.out_height = 320;
	r.input_size = 2560ull * 480;
	r.out_capacity = 320ull * 320 * 3 * 2;
	bytes_le(want, 20, r.src_width, 4);
	bytes_le(want, 24, r.src_height, 4);
	bytes_le(want, 28, r.src_stride, 4);
	bytes_le(want, 32, r.out_width, 4);
	bytes_le(want, 36, r.out_height, 4);
	bytes_le(want, 104, r.out_capacity, 8);
	bytes_le(want, 112, r.input_size, 8);
	assert_int_equal(fprep_request_decode(want, sizeof(want), &lim, &d, msg,
	                                      sizeof(msg)),
	                 FPREP_OK);
	assert_memory_equal(&d, &r, sizeof(fprep_request));
}

static void register_request_bytes(void **state)
{
	uint8_t got[FPREP_REQUEST_HEADER_SIZE];
	uint8_t want[FPREP_REQUEST_HEADER_SIZE] = {0};
	const char *name = "/frameprep-4242-7";
	fprep_register_request r, d;
	fprep_request any;
	fprep_limits lim = {0};
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	memset(&r, 0, sizeof(r));
	r.version = FPREP_PROTOCOL_VERSION;
	r.kind = FPREP_KIND_REGISTER;
	r.request_id = 0x1112131415161718ull;
	r.region_size = 0x0000012345678000ull;
	snprintf(r.region_name, sizeof(r.region_name), "%s", name);
	memcpy(want, "FPRQ", 4);
	bytes_le(want, 4, FPREP_PROTOCOL_VERSION, 2);
	bytes_le(want, 6, FPREP_KIND_REGISTER, 2);
	bytes_le(want, 8, r.request_id, 8);
	bytes_le(want, 16, r.region_size, 8);
	bytes_le(want, 24, strlen(name), 4);
	memcpy(want + 32, name, strlen(name));

	memset(got, 0xa5, sizeof(got));
	fprep_register_request_encode(&r, got);
	bytes_equal(got, want, sizeof(want));
	assert_int_equal(fprep_request_decode(want, sizeof(want), &lim, &any,
	                                      msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(fprep_register_request_decode(want, sizeof(want), &d,
	                                               msg, sizeof(msg)),
	                 FPREP_OK);
	assert_true(d.request_id == r.request_id);
	assert_true(d.region_size == r.region_size);
	assert_string_equal(d.region_name, name);

	memset(&r, 0, sizeof(r));
	memset(want, 0, sizeof(want));
	r.version = FPREP_PROTOCOL_VERSION;
	r.kind = FPREP_KIND_UNREGISTER;
	r.request_id = 0x2122232425262728ull;
	r.region_id = 0x31323334u;
	memcpy(want, "FPRQ", 4);
	bytes_le(want, 4, FPREP_PROTOCOL_VERSION, 2);
	bytes_le(want, 6, FPREP_KIND_UNREGISTER, 2);
	bytes_le(want, 8, r.request_id, 8);
	bytes_le(want, 16, r.region_id, 4);
	memset(got, 0xa5, sizeof(got));
	fprep_register_request_encode(&r, got);
	bytes_equal(got, want, sizeof(want));
	assert_int_equal(fprep_request_decode(want, sizeof(want), &lim, &any,
	                                      msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(fprep_register_request_decode(want, sizeof(want), &d,
	                                               msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.region_id, r.region_id);
}

static void register_cuda_request_bytes(void **state)
{
	uint8_t got[FPREP_REQUEST_HEADER_SIZE];
	uint8_t want[FPREP_REQUEST_HEADER_SIZE] = {0};
	fprep_register_request r, d;
	fprep_request any;
	fprep_limits lim = {0};
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	memset(&r, 0, sizeof(r));
	r.version = FPREP_PROTOCOL_VERSION;
	r.kind = FPREP_KIND_REGISTER_CUDA;
	r.request_id = 0x4142434445464748ull;
	r.region_size = 0x0000000123456000ull;
	r.cuda_offset = 0x0000000000abc000ull;
	for (int i = 0; i < FPREP_CUDA_HANDLE_SIZE; i++)
		r.cuda_handle[i] = (uint8_t)(0x80 + i);
	for (int i = 0; i < FPREP_CUDA_UUID_SIZE; i++)
		r.cuda_uuid[i] = (uint8_t)(0xe0 + i);
	memcpy(want, "FPRQ", 4);
	bytes_le(want, 4, FPREP_PROTOCOL_VERSION, 2);
	bytes_le(want, 6, FPREP_KIND_REGISTER_CUDA, 2);
	bytes_le(want, 8, r.request_id, 8);
	bytes_le(want, 16, r.region_size, 8);
	bytes_le(want, 24, r.cuda_offset, 8);
	memcpy(want + 32, r.cuda_handle, FPREP_CUDA_HANDLE_SIZE);
	memcpy(want + 96, r.cuda_uuid, FPREP_CUDA_UUID_SIZE);

	memset(got, 0xa5, sizeof(got));
	fprep_register_request_encode(&r, got);
	bytes_equal(got, want, sizeof(want));
	assert_int_equal(fprep_request_decode(want, sizeof(want), &lim, &any,
	                                      msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(fprep_register_request_decode(want, sizeof(want), &d,
	                                               msg, sizeof(msg)),
	                 FPREP_OK);
	assert_true(d.request_id == r.request_id);
	assert_true(d.region_size == r.region_size);
	assert_true(d.cuda_offset == r.cuda_offset);
	assert_memory_equal(d.cuda_handle, r.cuda_handle,
	                    FPREP_CUDA_HANDLE_SIZE);
	assert_memory_equal(d.cuda_uuid, r.cuda_uuid, FPREP_CUDA_UUID_SIZE);
}

static void reply_bytes(void **state)
{
	uint8_t got[FPREP_REPLY_HEADER_SIZE + 8];
	uint8_t want[FPREP_REPLY_HEADER_SIZE + 8] = {0};
	fprep_reply_header h, d;
	const char *text = "tensor ready";

	(void)state;
	memset(&h, 0, sizeof(h));
	h.version = FPREP_PROTOCOL_VERSION;
	h.kind = FPREP_KIND_ECHO;
	h.request_id = 0x0102030405060708ull;
	h.status = FPREP_OK;
	h.dtype = FPREP_DTYPE_U8;
	h.layout = FPREP_LAYOUT_NHWC;
	h.ndim = 4;
	h.output_loc = FPREP_LOC_INLINE;
	h.shape[0] = 1;
	h.shape[1] = 2;
	h.shape[2] = 4;
	h.shape[3] = 1;
	h.scale_x = 0.3125f;
	h.scale_y = 1.5f;
	h.pad_x = 12.0f;
	h.pad_y = 7.5f;
	h.t_queue_us = 0x41424344u;
	h.t_compute_us = 0x45464748u;
	h.t_h2d_us = 0x494a4b4cu;
	h.t_kernel_us = 0x4d4e4f50u;
	h.t_d2h_us = 0x51525354u;
	h.t_total_us = 0x55565758u;
	h.payload_size = 8;
	h.tensor_size = 8;
	h.region_id = 0x61626364u;
	h.flags = FPREP_REPLY_F_INPUT_RELEASED;
	snprintf(h.message, sizeof(h.message), "%s", text);

	memcpy(want, "FPRP", 4);
	bytes_le(want, 4, FPREP_PROTOCOL_VERSION, 2);
	bytes_le(want, 6, FPREP_KIND_ECHO, 2);
	bytes_le(want, 8, h.request_id, 8);
	bytes_le(want, 16, FPREP_OK, 4);
	want[20] = FPREP_DTYPE_U8;
	want[21] = FPREP_LAYOUT_NHWC;
	want[22] = 4;
	want[23] = FPREP_LOC_INLINE;
	for (int i = 0; i < 4; i++)
		bytes_le(want, 24 + 4 * i, h.shape[i], 4);
	bytes_f32(want, 40, h.scale_x);
	bytes_f32(want, 44, h.scale_y);
	bytes_f32(want, 48, h.pad_x);
	bytes_f32(want, 52, h.pad_y);
	bytes_le(want, 56, h.t_queue_us, 4);
	bytes_le(want, 60, h.t_compute_us, 4);
	bytes_le(want, 64, h.t_h2d_us, 4);
	bytes_le(want, 68, h.t_kernel_us, 4);
	bytes_le(want, 72, h.t_d2h_us, 4);
	bytes_le(want, 76, h.t_total_us, 4);
	bytes_le(want, 80, h.payload_size, 8);
	bytes_le(want, 88, h.tensor_size, 8);
	bytes_le(want, 96, h.region_id, 4);
	bytes_le(want, 100, FPREP_REPLY_F_INPUT_RELEASED, 4);
	memcpy(want + 104, text, strlen(text));

	memset(got, 0, sizeof(got));
	memset(got, 0xa5, FPREP_REPLY_HEADER_SIZE);
	fprep_reply_encode(&h, got);
	bytes_equal(got, want, FPREP_REPLY_HEADER_SIZE);

	assert_int_equal(fprep_reply_decode(want, sizeof(want), &d), FPREP_OK);
	assert_memory_equal(&d, &h, sizeof(h));
}

CMOCKA_MAIN({
        cmocka_unit_test(frame_request_bytes),
        cmocka_unit_test(register_request_bytes),
        cmocka_unit_test(register_cuda_request_bytes),
        cmocka_unit_test(reply_bytes),
})
