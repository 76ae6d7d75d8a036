/*
 * test_protocol.c: the wire codec (src/lib/protocol.c).
 *
 * Round trips of every request and reply field, and every way the request
 * decoder refuses a message: each refusal must come with the right error,
 * a message naming the field, and the kind and request id still recovered
 * for the error reply.
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

#define TEST_ID 0x0123456789abcdefull

static const fprep_limits test_limits = {TEST_SMALL_LIMITS};

/* A valid small request: BGR8 64x48 to 32x32 RGB f32. */
static void test_req(fprep_request *r)
{
	fprep_request_init(r, FPREP_PIX_BGR8, 64, 48);
	r->out_width = 32;
	r->out_height = 32;
	r->request_id = TEST_ID;
}

/* test_decode encodes r followed by payload zero bytes, decodes it with
 * lim and checks the error, that msg contains needle, and that kind and
 * request_id were recovered. */
static void test_decode(const fprep_request *r, size_t payload,
                        const fprep_limits *lim, int want, const char *needle)
{
	size_t len = FPREP_REQUEST_HEADER_SIZE + payload;
	uint8_t *buf = calloc(1, len);
	fprep_request out;
	char msg[FPREP_MESSAGE_SIZE];
	int err;

	assert_non_null(buf);
	fprep_request_encode(r, buf);
	err = fprep_request_decode(buf, len, lim, &out, msg, sizeof(msg));
	if (err != want || (needle != NULL && strstr(msg, needle) == NULL))
		fail_msg("want %s with '%s', got %s: '%s'",
		         fprep_err_name(want), needle ? needle : "",
		         fprep_err_name(err), msg);
	if (want != FPREP_OK)
		assert_true(strlen(msg) > 0);
	assert_int_equal(out.kind, r->kind);
	assert_true(out.request_id == r->request_id);
	free(buf);
}

static void test_ok(const fprep_request *r, size_t payload)
{
	test_decode(r, payload, &test_limits, FPREP_OK, NULL);
}

static void pixel_bytes(void **state)
{
	(void)state;
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_BGR8), 3);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_RGB8), 3);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_BGRA8), 4);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_RGBA8), 4);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_GRAY8), 1);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_NV12), 1);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_I420), 1);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_YUYV), 2);
	assert_int_equal(fprep_pixel_bytes(FPREP_PIX_JPEG), 1);
	assert_int_equal(fprep_pixel_bytes(0), 0);
	assert_int_equal(fprep_pixel_bytes(10), 0);
	assert_int_equal(fprep_pixel_bytes(0xffff), 0);
	assert_string_equal(fprep_dtype_typestr(FPREP_DTYPE_F32), "<f4");
	assert_string_equal(fprep_dtype_typestr(FPREP_DTYPE_F16), "<f2");
	assert_string_equal(fprep_dtype_typestr(FPREP_DTYPE_U8), "|u1");
	assert_null(fprep_dtype_typestr(0));
	assert_null(fprep_dtype_typestr(4));
}

static void request_init_defaults(void **state)
{
	fprep_request r;

	(void)state;
	fprep_request_init(&r, FPREP_PIX_BGRA8, 1920, 1080);
	assert_int_equal(r.version, FPREP_PROTOCOL_VERSION);
	assert_int_equal(r.kind, FPREP_KIND_FRAME);
	assert_int_equal(r.src_format, FPREP_PIX_BGRA8);
	assert_int_equal(r.src_width, 1920);
	assert_int_equal(r.src_height, 1080);
	assert_int_equal(r.src_stride, 1920 * 4);
	assert_int_equal(r.out_width, 640);
	assert_int_equal(r.out_height, 640);
	assert_int_equal(r.resize, FPREP_RESIZE_LETTERBOX);
	assert_int_equal(r.channel_order, FPREP_ORDER_RGB);
	assert_int_equal(r.dtype, FPREP_DTYPE_F32);
	assert_int_equal(r.layout, FPREP_LAYOUT_NCHW);
	assert_true(r.pad_value == 114.0f);
	assert_true(r.scale == 1.0f / 255.0f);
	for (int c = 0; c < 3; c++) {
		assert_true(r.mean[c] == 0.0f);
		assert_true(r.std[c] == 1.0f);
	}
	assert_int_equal(r.input_loc, FPREP_LOC_INLINE);
	assert_int_equal(r.output_loc, FPREP_LOC_INLINE);
	assert_true(r.input_size == 1920ull * 4 * 1080);
}

/* Every field with a distinctive value, shm in and out so the 64-bit
 * fields matter. */
static void request_round_trip(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_request r, d;
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	memset(&r, 0, sizeof(r));
	r.version = FPREP_PROTOCOL_VERSION;
	r.kind = FPREP_KIND_ECHO;
	r.request_id = 0xfedcba9876543210ull;
	r.src_format = FPREP_PIX_RGBA8;
	r.src_width = 999;
	r.src_height = 777;
	r.src_stride = 4001;
	r.out_width = 511;
	r.out_height = 399;
	r.resize = FPREP_RESIZE_STRETCH;
	r.channel_order = FPREP_ORDER_BGR;
	r.dtype = FPREP_DTYPE_F16;
	r.layout = FPREP_LAYOUT_NHWC;
	r.pad_value = 0.5f;
	r.scale = 0.0123f;
	r.mean[0] = 0.485f;
	r.mean[1] = -0.456f;
	r.mean[2] = 1e-7f;
	r.std[0] = 0.229f;
	r.std[1] = 0.224f;
	r.std[2] = 3e5f;
	r.input_loc = FPREP_LOC_SHM;
	r.output_loc = FPREP_LOC_SHM;
	r.in_region = 0x80000001u;
	r.out_region = 0xfffffffeu;
	r.in_offset = 0x1122334455667788ull;
	r.out_offset = 0x8877665544332210ull; /* a multiple of 2 */
	r.out_capacity = 0xffffffffffffffffull;
	r.input_size = 4001ull * 776 + 999 * 4 + 5;
	fprep_request_encode(&r, buf);

	/* Spot checks of the byte layout. */
	assert_memory_equal(buf, "FPRQ", 4);
	assert_int_equal(buf[4], 1);
	assert_int_equal(buf[5], 0);
	assert_int_equal(buf[6], FPREP_KIND_ECHO);
	assert_int_equal(buf[8], 0x10);
	assert_int_equal(buf[15], 0xfe);
	assert_int_equal(buf[20], 999 & 0xff);
	assert_int_equal(buf[21], 999 >> 8);
	assert_int_equal(buf[41], FPREP_ORDER_BGR);
	assert_int_equal(buf[76], FPREP_LOC_SHM);
	assert_int_equal(buf[88], 0x88);
	assert_int_equal(buf[95], 0x11);
	for (int i = 120; i < 128; i++)
		assert_int_equal(buf[i], 0);

	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_no_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.version, r.version);
	assert_int_equal(d.kind, r.kind);
	assert_true(d.request_id == r.request_id);
	assert_int_equal(d.src_format, r.src_format);
	assert_int_equal(d.src_width, r.src_width);
	assert_int_equal(d.src_height, r.src_height);
	assert_int_equal(d.src_stride, r.src_stride);
	assert_int_equal(d.out_width, r.out_width);
	assert_int_equal(d.out_height, r.out_height);
	assert_int_equal(d.resize, r.resize);
	assert_int_equal(d.channel_order, r.channel_order);
	assert_int_equal(d.dtype, r.dtype);
	assert_int_equal(d.layout, r.layout);
	assert_memory_equal(&d.pad_value, &r.pad_value, sizeof(float));
	assert_memory_equal(&d.scale, &r.scale, sizeof(float));
	assert_memory_equal(d.mean, r.mean, sizeof(r.mean));
	assert_memory_equal(d.std, r.std, sizeof(r.std));
	assert_int_equal(d.input_loc, r.input_loc);
	assert_int_equal(d.output_loc, r.output_loc);
	assert_int_equal(d.in_region, r.in_region);
	assert_int_equal(d.out_region, r.out_region);
	assert_true(d.in_offset == r.in_offset);
	assert_true(d.out_offset == r.out_offset);
	assert_true(d.out_capacity == r.out_capacity);
	assert_true(d.input_size == r.input_size);
}

static void request_valid_inline(void **state)
{
	fprep_request r;

	(void)state;
	test_req(&r);
	test_ok(&r, r.input_size);
	/* Stride padding, and a last row of only width * bpp bytes. */
	r.src_stride = 200;
	r.input_size = 200 * 47 + 64 * 3;
	test_ok(&r, r.input_size);
	r.kind = FPREP_KIND_ECHO;
	test_ok(&r, r.input_size);
	/* Gray in, gray out, u8 with scale 1. */
	fprep_request_init(&r, FPREP_PIX_GRAY8, 10, 10);
	r.out_width = r.out_height = 16;
	r.channel_order = FPREP_ORDER_GRAY;
	r.dtype = FPREP_DTYPE_U8;
	r.scale = 1.0f;
	test_ok(&r, 100);
	/* Gray in, RGB out is fine too. */
	r.channel_order = FPREP_ORDER_RGB;
	r.scale = 1.0f / 255.0f;
	test_ok(&r, 100);
}

static void request_truncated(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_request r, d;
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	test_req(&r);
	fprep_request_encode(&r, buf);
	for (size_t len = 0; len < FPREP_REQUEST_HEADER_SIZE; len++) {
		/* A copy of exactly len bytes so ASan sees any overread. */
		uint8_t *p = malloc(len ? len : 1);

		assert_non_null(p);
		memcpy(p, buf, len);
		assert_int_equal(fprep_request_decode(p, len, &test_limits, &d,
		                                      msg, sizeof(msg)),
		                 FPREP_EPROTO);
		assert_non_null(strstr(msg, "length"));
		assert_int_equal(d.kind, len >= 8 ? r.kind : 0);
		assert_true(d.request_id == (len >= 16 ? r.request_id : 0));
		free(p);
	}
	/* NULL msg is allowed. */
	assert_int_equal(
	        fprep_request_decode(buf, 10, &test_limits, &d, NULL, 0),
	        FPREP_EPROTO);
}

static void request_magic_version_kind(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_request r, d;
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	test_req(&r);
	fprep_request_encode(&r, buf);
	buf[3] ^= 0x20;
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_EPROTO);
	assert_non_null(strstr(msg, "magic"));
	assert_int_equal(d.kind, 0);

	r.version = 2;
	test_decode(&r, r.input_size, &test_limits, FPREP_EVERSION,
	            "version 2");
	r.version = 0;
	test_decode(&r, r.input_size, &test_limits, FPREP_EVERSION,
	            "version 0");
	r.version = FPREP_PROTOCOL_VERSION;
	r.kind = 0;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL, "kind 0");
	r.kind = 14;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL, "kind 14");
	r.kind = 0xffff;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL, "kind 65535");
}

/* INFO: only the common part is decoded. REGISTER and UNREGISTER: the
 * request decoder applies their checks and leaves their fields to
 * fprep_register_request_decode. */
static void request_other_kinds(void **state)
{
	fprep_request r, d;
	fprep_register_request g, e;
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE + 8];
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	memset(&r, 0, sizeof(r));
	r.version = FPREP_PROTOCOL_VERSION;
	r.request_id = 42;
	r.src_width = 999999; /* ignored */
	r.kind = FPREP_KIND_INFO;
	test_ok(&r, 0);
	test_ok(&r, 8);
	r.kind = FPREP_KIND_REGISTER;
	test_decode(&r, 0, &test_limits, FPREP_EINVAL, "name_len");

	memset(&g, 0, sizeof(g));
	g.version = FPREP_PROTOCOL_VERSION;
	g.kind = FPREP_KIND_REGISTER;
	g.request_id = 42;
	g.region_size = 1ull << 33;
	snprintf(g.region_name, sizeof(g.region_name), "/frameprep-1-2");
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, NULL, 0),
	                 FPREP_OK);
	assert_int_equal(d.kind, FPREP_KIND_REGISTER);
	assert_true(d.request_id == 42);
	assert_int_equal(
	        fprep_register_request_decode(buf, sizeof(buf), &e, NULL, 0),
	        FPREP_OK);
	assert_int_equal(e.kind, FPREP_KIND_REGISTER);
	assert_true(e.request_id == 42);
	assert_string_equal(e.region_name, "/frameprep-1-2");
	assert_true(e.region_size == 1ull << 33);
	buf[24] = 64; /* name_len over the field */
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, NULL, 0),
	                 FPREP_EINVAL);
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "name_len 64"));
	buf[24] = 14;
	buf[36] = 0; /* a NUL inside the name */
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, NULL, 0),
	                 FPREP_EINVAL);
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "NUL"));

	memset(&g, 0, sizeof(g));
	g.version = FPREP_PROTOCOL_VERSION;
	g.kind = FPREP_KIND_UNREGISTER;
	g.request_id = 43;
	g.region_id = 77;
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, NULL, 0),
	                 FPREP_OK);
	assert_int_equal(d.src_width, 0);
	assert_int_equal(
	        fprep_register_request_decode(buf, sizeof(buf), &e, NULL, 0),
	        FPREP_OK);
	assert_int_equal(e.region_id, 77);
	assert_true(e.request_id == 43);

	/* The register decoder checks the common part the same way and
	 * refuses the other kinds. */
	assert_int_equal(
	        fprep_register_request_decode(buf, 64, &e, msg, sizeof(msg)),
	        FPREP_EPROTO);
	assert_non_null(strstr(msg, "header size"));
	assert_true(e.request_id == 43);
	buf[0] ^= 1;
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_EPROTO);
	assert_non_null(strstr(msg, "magic"));
	buf[0] ^= 1;
	buf[4] = 2;
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_EVERSION);
	test_req(&r);
	fprep_request_encode(&r, buf);
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "kind 1"));
}

#define TEST_BAD_ENUM(field, value, name)                                      \
	do {                                                                   \
		test_req(&r);                                                  \
		r.field = value;                                               \
		test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,      \
		            name);                                             \
	} while (0)

static void request_bad_enums(void **state)
{
	fprep_request r;

	(void)state;
	TEST_BAD_ENUM(src_format, 0, "src_format 0");
	TEST_BAD_ENUM(src_format, 10, "src_format 10");
	TEST_BAD_ENUM(resize, 0, "resize 0");
	TEST_BAD_ENUM(resize, 3, "resize 3");
	TEST_BAD_ENUM(channel_order, 0, "channel_order 0");
	TEST_BAD_ENUM(channel_order, 4, "channel_order 4");
	TEST_BAD_ENUM(dtype, 0, "dtype 0");
	TEST_BAD_ENUM(dtype, 4, "dtype 4");
	TEST_BAD_ENUM(layout, 0, "layout 0");
	TEST_BAD_ENUM(layout, 3, "layout 3");
	TEST_BAD_ENUM(input_loc, 3, "input_loc 3");
	TEST_BAD_ENUM(output_loc, 3, "output_loc 3");
	TEST_BAD_ENUM(output_loc, 127, "output_loc 127");
	/* GRAY tensors need a GRAY8 source. */
	TEST_BAD_ENUM(channel_order, FPREP_ORDER_GRAY, "channel_order GRAY");
}

/* YUV requests: the plane fields round-trip at their offsets, unpadded
 * defaults decode, and each bad geometry is refused naming its field. */
static void request_yuv(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_request r, d;
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	fprep_request_init(&r, FPREP_PIX_I420, 64, 48);
	assert_int_equal(r.src_stride, 64);
	assert_int_equal(r.uv_stride, 32);
	assert_int_equal(r.u_offset, 64 * 48);
	assert_int_equal(r.v_offset, 64 * 48 + 32 * 24);
	assert_true(r.input_size == 64 * 48 * 3 / 2);
	test_decode(&r, r.input_size, &test_no_limits, FPREP_OK, NULL);
	fprep_request_init(&r, FPREP_PIX_NV12, 64, 48);
	assert_int_equal(r.uv_stride, 64);
	assert_int_equal(r.v_offset, 0);
	assert_true(r.input_size == 64 * 48 * 3 / 2);
	test_decode(&r, r.input_size, &test_no_limits, FPREP_OK, NULL);
	fprep_request_init(&r, FPREP_PIX_YUYV, 64, 48);
	assert_int_equal(r.src_stride, 128);
	assert_true(r.input_size == 128 * 48);
	test_decode(&r, r.input_size, &test_no_limits, FPREP_OK, NULL);

	/* A decoder's padded NV12 1080p: pitch 2048, 1088 rows. */
	fprep_request_init(&r, FPREP_PIX_I420, 1920, 1080);
	r.yuv_matrix = FPREP_MATRIX_BT709;
	r.yuv_range = FPREP_RANGE_FULL;
	r.src_stride = 2048;
	r.uv_stride = 1024;
	r.u_offset = 2048 * 1088;
	r.v_offset = 2048 * 1088 + 1024 * 544;
	r.input_size = 2048ull * 1088 + 2 * 1024 * 544;
	r.input_loc = FPREP_LOC_SHM;
	fprep_request_encode(&r, buf);
	assert_int_equal(buf[18], FPREP_MATRIX_BT709);
	assert_int_equal(buf[19], FPREP_RANGE_FULL);
	assert_int_equal(buf[78] | buf[79] << 8, 1024);
	assert_int_equal(buf[120] | buf[121] << 8 | buf[122] << 16,
	                 2048 * 1088);
	assert_int_equal(buf[124] | buf[125] << 8 | buf[126] << 16,
	                 2048 * 1088 + 1024 * 544);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_no_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.yuv_matrix, r.yuv_matrix);
	assert_int_equal(d.yuv_range, r.yuv_range);
	assert_int_equal(d.uv_stride, r.uv_stride);
	assert_int_equal(d.u_offset, r.u_offset);
	assert_int_equal(d.v_offset, r.v_offset);

	/* Each refusal names its field. */
	d = r;
	d.src_width = 1919;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "src_width 1919 is odd");
	d = r;
	d.src_height = 1079;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "src_height 1079 is odd");
	d = r;
	d.uv_stride = 959;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL, "uv_stride 959 <");
	d = r;
	d.u_offset = 0;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "u_offset 0 overlaps the Y plane");
	d = r;
	d.v_offset = 2048 * 1000;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "v_offset 2048000 overlaps");
	d = r;
	d.input_size = r.v_offset + 1024ull * 539 + 960 - 1;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "v_offset plane ends at");
	d = r;
	d.v_offset = UINT32_MAX;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "v_offset plane ends at");
	d = r;
	d.yuv_matrix = 4;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL, "yuv_matrix 4");
	d = r;
	d.yuv_range = 3;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL, "yuv_range 3");
	d = r;
	d.src_format = FPREP_PIX_NV12;
	d.uv_stride = 2048;
	d.u_offset = 2048 * 1088;
	d.input_size = d.u_offset + 2048ull * 539 + 1919;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "u_offset plane ends at");
	d.input_size += 1;
	test_decode(&d, 0, &test_no_limits, FPREP_OK, NULL);
	d = r;
	d.src_format = FPREP_PIX_YUYV;
	d.src_stride = 3839;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL, "src_stride 3839");
	d.src_width = 1921;
	d.src_stride = 3842;
	d.input_size = 3842ull * 1080;
	test_decode(&d, 0, &test_no_limits, FPREP_EINVAL,
	            "src_width 1921 is odd");
	/* Other formats ignore the YUV fields. */
	test_req(&d);
	d.yuv_matrix = 9;
	d.u_offset = 1;
	test_ok(&d, d.input_size);
}

#define TEST_BAD_DIM(field, value, err, text)                                  \
	do {                                                                   \
		test_req(&r);                                                  \
		r.field = value;                                               \
		test_decode(&r, r.input_size, &test_limits, err, text);        \
	} while (0)

/* JPEG sources: the bytes as they are, the size 0x0 or within the limits
 * (the daemon checks it against the header), at least 4 bytes, not in
 * CUDA memory; stride and YUV fields ignored; GRAY tensors allowed. */
static void request_jpeg(void **state)
{
	fprep_request r;

	(void)state;
	fprep_request_init(&r, FPREP_PIX_JPEG, 0, 0);
	assert_int_equal(r.src_stride, 0);
	assert_true(r.input_size == 0);
	r.request_id = TEST_ID;
	r.out_width = 32;
	r.out_height = 32;
	r.input_size = 300;
	test_ok(&r, 300);
	r.src_stride = 7; /* ignored */
	r.uv_stride = 3;
	r.channel_order = FPREP_ORDER_GRAY;
	test_ok(&r, 300);
	r.src_width = 640;
	r.src_height = 480;
	test_ok(&r, 300);
	r.src_width = 1001;
	test_decode(&r, 300, &test_limits, FPREP_ELIMIT, "max_width 1000");
	r.src_width = 0;
	test_decode(&r, 300, &test_limits, FPREP_EINVAL, "src_width is 0");
	r.src_width = r.src_height = 0;
	r.input_size = 0;
	test_decode(&r, 0, &test_limits, FPREP_EINVAL, "at least 4 bytes");
	r.input_size = (1u << 20) + 1;
	test_decode(&r, 0, &test_limits, FPREP_ELIMIT, "max_frame_bytes");
	r.input_size = 300;
	test_decode(&r, 299, &test_limits, FPREP_EPROTO, "!= input_size");
	r.input_loc = FPREP_LOC_CUDA;
	r.in_region = 1;
	test_decode(&r, 0, &test_limits, FPREP_EINVAL,
	            "input_loc INLINE or SHM");
	r.input_loc = FPREP_LOC_SHM;
	test_ok(&r, 0);
}

static void request_bad_dims(void **state)
{
	fprep_request r;

	(void)state;
	TEST_BAD_DIM(src_width, 0, FPREP_EINVAL, "src_width is 0");
	TEST_BAD_DIM(src_height, 0, FPREP_EINVAL, "src_height is 0");
	TEST_BAD_DIM(out_width, 0, FPREP_EINVAL, "out_width is 0");
	TEST_BAD_DIM(out_height, 0, FPREP_EINVAL, "out_height is 0");
	TEST_BAD_DIM(src_width, 1001, FPREP_ELIMIT,
	             "src_width 1001 exceeds max_width 1000");
	TEST_BAD_DIM(src_height, 801, FPREP_ELIMIT,
	             "src_height 801 exceeds max_height 800");
	TEST_BAD_DIM(out_width, 513, FPREP_ELIMIT,
	             "out_width 513 exceeds max_out_width 512");
	TEST_BAD_DIM(out_height, UINT32_MAX, FPREP_ELIMIT,
	             "out_height 4294967295 exceeds max_out_height 400");
	/* At the limit is fine. */
	test_req(&r);
	r.out_width = 512;
	r.out_height = 400;
	r.dtype = FPREP_DTYPE_F16;
	test_ok(&r, r.input_size);
}

static void request_bad_sizes(void **state)
{
	fprep_request r;

	(void)state;
	test_req(&r);
	r.src_stride = 64 * 3 - 1;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "src_stride 191 < src_width*bpp = 192");

	test_req(&r);
	r.input_size -= 1;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "input_size 9215 < stride*(height-1)+width*bpp = 9216");

	test_req(&r);
	r.input_size = (1u << 20) + 1;
	test_decode(&r, 0, &test_limits, FPREP_ELIMIT,
	            "input_size 1048577 exceeds max_frame_bytes 1048576");

	/* A frame whose rows alone exceed the limit. */
	test_req(&r);
	r.src_stride = 1u << 20;
	test_decode(&r, r.input_size, &test_limits, FPREP_ELIMIT,
	            "max_frame_bytes 1048576");

	/* Huge values must not wrap: (2^32-1)^2 is 1 in 32 bits. */
	test_req(&r);
	r.src_format = FPREP_PIX_GRAY8;
	r.channel_order = FPREP_ORDER_GRAY;
	r.src_width = 1;
	r.src_stride = UINT32_MAX;
	r.src_height = UINT32_MAX;
	r.input_size = 1;
	test_decode(&r, 1, &test_no_limits, FPREP_EINVAL, "input_size 1 <");
	fprep_limits lim = test_no_limits;
	lim.max_frame_bytes = 1ull << 40;
	test_decode(&r, 1, &lim, FPREP_ELIMIT, "max_frame_bytes");

	/* The tensor size overflows 64 bits. */
	test_req(&r);
	r.out_width = UINT32_MAX;
	r.out_height = UINT32_MAX;
	test_decode(&r, r.input_size, &test_no_limits, FPREP_ELIMIT,
	            "tensor bytes 4294967295x4294967295x3 x 4 overflow");
	/* Over the tensor limit: 512x400x3x4 > 2 MiB. */
	test_req(&r);
	r.out_width = 512;
	r.out_height = 400;
	r.layout = FPREP_LAYOUT_NHWC;
	r.channel_order = FPREP_ORDER_BGR;
	r.dtype = FPREP_DTYPE_F32;
	test_decode(&r, r.input_size, &test_limits, FPREP_ELIMIT,
	            "tensor bytes 512x400x3 x 4 = 2457600 exceed "
	            "max_tensor_bytes 2097152");
	r.dtype = FPREP_DTYPE_F16;
	test_ok(&r, r.input_size);
}

static void request_bad_payload(void **state)
{
	fprep_request r;

	(void)state;
	test_req(&r);
	test_decode(&r, r.input_size - 1, &test_limits, FPREP_EPROTO,
	            "inline payload 9215 bytes != input_size 9216");
	test_decode(&r, r.input_size + 1, &test_limits, FPREP_EPROTO,
	            "inline payload 9217 bytes");
	test_decode(&r, 0, &test_limits, FPREP_EPROTO, "inline payload 0");
	r.input_loc = FPREP_LOC_SHM;
	test_ok(&r, 0);
	test_decode(&r, 1, &test_limits, FPREP_EPROTO, "input_loc SHM");
	r.input_loc = FPREP_LOC_CUDA;
	test_ok(&r, 0);
	test_decode(&r, 1, &test_limits, FPREP_EPROTO, "input_loc CUDA");
}

#define TEST_BAD_FLOAT(field, value, text)                                     \
	do {                                                                   \
		test_req(&r);                                                  \
		r.field = value;                                               \
		test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,      \
		            text);                                             \
	} while (0)

static void request_bad_norm(void **state)
{
	fprep_request r;

	(void)state;
	TEST_BAD_FLOAT(pad_value, NAN, "pad_value");
	TEST_BAD_FLOAT(pad_value, INFINITY, "pad_value");
	TEST_BAD_FLOAT(pad_value, -1.0f, "pad_value -1 is outside [0, 255]");
	TEST_BAD_FLOAT(pad_value, 255.5f, "pad_value 255.5");
	TEST_BAD_FLOAT(scale, NAN, "scale");
	TEST_BAD_FLOAT(scale, -INFINITY, "scale -inf");
	TEST_BAD_FLOAT(mean[0], NAN, "mean[0]");
	TEST_BAD_FLOAT(mean[2], INFINITY, "mean[2] inf");
	TEST_BAD_FLOAT(std[1], NAN, "std[1]");
	TEST_BAD_FLOAT(std[2], INFINITY, "std[2] inf");
	TEST_BAD_FLOAT(std[0], 0.0f, "std[0] 0 is not > 0");
	TEST_BAD_FLOAT(std[1], -0.0f, "std[1]");
	TEST_BAD_FLOAT(std[2], -1.0f, "std[2] -1");
	/* Edges that are valid. */
	test_req(&r);
	r.pad_value = 255.0f;
	r.std[0] = 1e-30f;
	r.mean[1] = -1e30f;
	test_ok(&r, r.input_size);
	r.pad_value = 0.0f;
	test_ok(&r, r.input_size);
}

static void request_u8_norm(void **state)
{
	fprep_request r;

	(void)state;
	test_req(&r);
	r.dtype = FPREP_DTYPE_U8;
	test_ok(&r, r.input_size);
	r.scale = 1.0f;
	test_ok(&r, r.input_size);
	r.scale = 0.5f;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "scale 0.5 with dtype U8");
	r.scale = 1.0f;
	r.mean[1] = 0.25f;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "mean[1] 0.25 with dtype U8");
	r.mean[1] = 0.0f;
	r.std[2] = 2.0f;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "std[2] 2 with dtype U8");
}

static void request_shm_output(void **state)
{
	fprep_request r;

	(void)state;
	test_req(&r);
	r.output_loc = FPREP_LOC_SHM;
	r.out_capacity = 32 * 32 * 3 * 4;
	test_ok(&r, r.input_size);
	r.out_capacity -= 1;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "out_capacity 12287 < tensor bytes 12288");
	/* Elements at their own alignment: f32 at a multiple of 4, f16 of
	 * 2, u8 anywhere. */
	r.out_capacity += 1;
	r.out_offset = 4098;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "out_offset 4098 is not a multiple of 4, the tensor's "
	            "element size");
	r.dtype = FPREP_DTYPE_F16;
	test_ok(&r, r.input_size);
	r.out_offset = 4097;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "out_offset 4097 is not a multiple of 2");
	r.dtype = FPREP_DTYPE_U8;
	test_ok(&r, r.input_size);
}

/* The reply in the output region: bit 7 of output_loc on the wire, its own
 * field once decoded; SHM output with room for the header, aligned. */
static void request_shm_reply(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	char msg[FPREP_MESSAGE_SIZE];
	fprep_request r, d;

	(void)state;
	test_req(&r);
	r.input_loc = FPREP_LOC_SHM;
	r.output_loc = FPREP_LOC_SHM;
	r.out_offset = 4096;
	r.out_capacity = 32 * 32 * 3 * 4 + FPREP_REPLY_HEADER_SIZE;
	r.shm_reply = 1;
	fprep_request_encode(&r, buf);
	assert_int_equal(buf[77], FPREP_LOC_SHM | FPREP_LOC_F_SHM_REPLY);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.output_loc, FPREP_LOC_SHM);
	assert_int_equal(d.shm_reply, 1);
	r.shm_reply = 0;
	fprep_request_encode(&r, buf);
	assert_int_equal(buf[77], FPREP_LOC_SHM);
	r.shm_reply = 1;
	r.out_capacity -= 1;
	test_decode(&r, 0, &test_limits, FPREP_EINVAL,
	            "out_capacity 12543 < tensor bytes 12288 + 256");
	r.out_capacity += 5; /* room, but 4096 + 12548 is not aligned */
	test_decode(&r, 0, &test_limits, FPREP_EINVAL, "not a multiple of 8");
	r.out_capacity -= 4;
	r.output_loc = FPREP_LOC_INLINE;
	r.input_loc = FPREP_LOC_INLINE;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "SHM_REPLY needs output_loc SHM (1), got 0");
	r.output_loc = FPREP_LOC_CUDA;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "SHM_REPLY needs output_loc SHM (1), got 2");
}

static void request_cuda_output(void **state)
{
	fprep_request r;

	(void)state;
	test_req(&r);
	r.output_loc = FPREP_LOC_CUDA;
	r.out_capacity = 32 * 32 * 3 * 4;
	test_ok(&r, r.input_size);
	r.out_capacity -= 1;
	test_decode(&r, r.input_size, &test_limits, FPREP_EINVAL,
	            "out_capacity 12287 < tensor bytes 12288");
	r.out_capacity = 0;
	r.input_loc = FPREP_LOC_CUDA;
	test_decode(&r, 0, &test_limits, FPREP_EINVAL, "out_capacity 0");
}

/* REGISTER_CUDA: what the request says of itself is checked here (by
 * fprep_register_request_decode, to which fprep_request_decode delegates);
 * the handle, the device and the allocation by the daemon. */
static void request_register_cuda(void **state)
{
	fprep_register_request g, e;
	fprep_request d;
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	char msg[FPREP_MESSAGE_SIZE];

	(void)state;
	memset(&g, 0, sizeof(g));
	g.version = FPREP_PROTOCOL_VERSION;
	g.kind = FPREP_KIND_REGISTER_CUDA;
	g.request_id = 44;
	g.region_size = 4096;
	g.cuda_offset = 512;
	memset(g.cuda_handle, 0x5a, sizeof(g.cuda_handle));
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.kind, FPREP_KIND_REGISTER_CUDA);
	assert_true(d.request_id == 44);
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_OK);
	assert_true(e.region_size == 4096 && e.cuda_offset == 512);
	assert_memory_equal(e.cuda_handle, g.cuda_handle,
	                    FPREP_CUDA_HANDLE_SIZE);

	g.region_size = 0;
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "region_size is 0"));
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &e,
	                                               msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "region_size is 0"));
	g.region_size = 2;
	g.cuda_offset = UINT64_MAX;
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "cuda_offset 18446744073709551615 + "
	                            "region_size 2 overflows"));
	g.kind = 14;
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "kind 14 is not a request kind (1..13)"));
}

/* DOORBELL: its fields survive encode + decode at their offsets, and
 * entries past the maximum or an offset off 64 are refused by name. */
static void doorbell_roundtrip(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_register_request g, d;
	fprep_request r;
	char msg[FPREP_MESSAGE_SIZE];
	uint32_t v32;
	uint64_t v64;

	(void)state;
	memset(&g, 0, sizeof(g));
	g.version = FPREP_PROTOCOL_VERSION;
	g.kind = FPREP_KIND_DOORBELL;
	g.request_id = 42;
	g.region_id = 7;
	g.doorbell_entries = FPREP_DOORBELL_ENTRIES_MAX;
	g.doorbell_offset = 4096 + 64;
	fprep_register_request_encode(&g, buf);
	memcpy(&v32, buf + 16, 4);
	assert_int_equal(v32, 7);
	memcpy(&v32, buf + 20, 4);
	assert_int_equal(v32, FPREP_DOORBELL_ENTRIES_MAX);
	memcpy(&v64, buf + 24, 8);
	assert_int_equal(v64, 4096 + 64);
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &d,
	                                               msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.kind, FPREP_KIND_DOORBELL);
	assert_int_equal(d.request_id, 42);
	assert_int_equal(d.region_id, 7);
	assert_int_equal(d.doorbell_entries, FPREP_DOORBELL_ENTRIES_MAX);
	assert_int_equal(d.doorbell_offset, 4096 + 64);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &r, msg, sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(r.kind, FPREP_KIND_DOORBELL);

	g.doorbell_entries = FPREP_DOORBELL_ENTRIES_MAX + 1;
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &r, msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "entries: 65 > 64"));
	g.doorbell_entries = 0;
	g.doorbell_offset = 100;
	fprep_register_request_encode(&g, buf);
	assert_int_equal(fprep_register_request_decode(buf, sizeof(buf), &d,
	                                               msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_non_null(strstr(msg, "offset: 100 is not a multiple of 64"));
}

static void request_small_msg(void **state)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	fprep_request r, d;
	char msg[8];

	(void)state;
	test_req(&r);
	r.src_width = 0;
	fprep_request_encode(&r, buf);
	memset(msg, 'x', sizeof(msg));
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &test_limits,
	                                      &d, msg, sizeof(msg)),
	                 FPREP_EINVAL);
	assert_string_equal(msg, "src_wid");
}

static void tensor_shape(void **state)
{
	fprep_request r;
	uint32_t shape[4];
	uint64_t bytes;

	(void)state;
	test_req(&r);
	r.out_width = 40;
	r.out_height = 30;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_OK);
	assert_int_equal(shape[0], 1);
	assert_int_equal(shape[1], 3);
	assert_int_equal(shape[2], 30);
	assert_int_equal(shape[3], 40);
	assert_true(bytes == 40 * 30 * 3 * 4);
	r.layout = FPREP_LAYOUT_NHWC;
	r.dtype = FPREP_DTYPE_F16;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_OK);
	assert_int_equal(shape[1], 30);
	assert_int_equal(shape[2], 40);
	assert_int_equal(shape[3], 3);
	assert_true(bytes == 40 * 30 * 3 * 2);
	r.channel_order = FPREP_ORDER_GRAY;
	r.dtype = FPREP_DTYPE_U8;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_OK);
	assert_int_equal(shape[3], 1);
	assert_true(bytes == 40 * 30);
	r.dtype = 9;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_EINVAL);
	r.dtype = FPREP_DTYPE_F32;
	r.layout = 0;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_EINVAL);
	r.layout = FPREP_LAYOUT_NCHW;
	r.out_width = 0;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_EINVAL);
	r.out_width = UINT32_MAX;
	r.out_height = UINT32_MAX;
	r.channel_order = FPREP_ORDER_RGB;
	assert_int_equal(fprep_tensor_shape(&r, shape, &bytes), FPREP_EINVAL);
}

/* A valid reply for a 1x3x4x5 f32 NCHW tensor. */
static void test_rep(fprep_reply_header *h)
{
	memset(h, 0, sizeof(*h));
	h->version = FPREP_PROTOCOL_VERSION;
	h->kind = FPREP_KIND_FRAME;
	h->request_id = TEST_ID;
	h->status = FPREP_OK;
	h->dtype = FPREP_DTYPE_F32;
	h->layout = FPREP_LAYOUT_NCHW;
	h->ndim = 4;
	h->output_loc = FPREP_LOC_INLINE;
	h->shape[0] = 1;
	h->shape[1] = 3;
	h->shape[2] = 4;
	h->shape[3] = 5;
	h->tensor_size = 240;
	h->payload_size = 240;
}

/* test_rep_decode encodes h with payload bytes after it and decodes. */
static int test_rep_decode(const fprep_reply_header *h, size_t payload,
                           fprep_reply_header *d)
{
	size_t len = FPREP_REPLY_HEADER_SIZE + payload;
	uint8_t *buf = calloc(1, len);
	int err;

	assert_non_null(buf);
	fprep_reply_encode(h, buf);
	err = fprep_reply_decode(buf, len, d);
	free(buf);
	return err;
}

static void reply_round_trip(void **state)
{
	fprep_reply_header h, d;
	uint8_t buf[FPREP_REPLY_HEADER_SIZE + 240];

	(void)state;
	test_rep(&h);
	h.kind = FPREP_KIND_ECHO;
	h.output_loc = FPREP_LOC_INLINE;
	h.scale_x = 0.333333f;
	h.scale_y = 1.5e-3f;
	h.pad_x = 12.0f;
	h.pad_y = -0.5f;
	h.t_queue_us = 1;
	h.t_compute_us = 0x80000000u;
	h.t_h2d_us = 3;
	h.t_kernel_us = 4;
	h.t_d2h_us = 5;
	h.t_total_us = 0xffffffffu;
	h.region_id = 0xabcdef01u;
	h.flags = FPREP_REPLY_F_INPUT_RELEASED;
	snprintf(h.message, sizeof(h.message), "all %s", "good");
	memset(buf, 0xa5, sizeof(buf));
	fprep_reply_encode(&h, buf);
	assert_memory_equal(buf, "FPRP", 4);
	assert_int_equal(buf[80], 240);
	assert_int_equal(buf[104 + 8], 0);
	assert_int_equal(buf[255], 0);
	assert_int_equal(buf[256], 0xa5); /* the payload is not touched */
	assert_int_equal(fprep_reply_decode(buf, sizeof(buf), &d), FPREP_OK);
	assert_int_equal(d.version, h.version);
	assert_int_equal(d.kind, h.kind);
	assert_true(d.request_id == h.request_id);
	assert_int_equal(d.status, h.status);
	assert_int_equal(d.dtype, h.dtype);
	assert_int_equal(d.layout, h.layout);
	assert_int_equal(d.ndim, h.ndim);
	assert_int_equal(d.output_loc, h.output_loc);
	assert_memory_equal(d.shape, h.shape, sizeof(h.shape));
	assert_memory_equal(&d.scale_x, &h.scale_x, sizeof(float));
	assert_memory_equal(&d.scale_y, &h.scale_y, sizeof(float));
	assert_memory_equal(&d.pad_x, &h.pad_x, sizeof(float));
	assert_memory_equal(&d.pad_y, &h.pad_y, sizeof(float));
	assert_int_equal(d.t_queue_us, h.t_queue_us);
	assert_int_equal(d.t_compute_us, h.t_compute_us);
	assert_int_equal(d.t_h2d_us, h.t_h2d_us);
	assert_int_equal(d.t_kernel_us, h.t_kernel_us);
	assert_int_equal(d.t_d2h_us, h.t_d2h_us);
	assert_int_equal(d.t_total_us, h.t_total_us);
	assert_true(d.payload_size == h.payload_size);
	assert_true(d.tensor_size == h.tensor_size);
	assert_int_equal(d.region_id, h.region_id);
	assert_int_equal(d.flags, h.flags);
	assert_string_equal(d.message, "all good");

	/* Shm output: 64-bit tensor size, no payload. */
	test_rep(&h);
	h.output_loc = FPREP_LOC_SHM;
	h.dtype = FPREP_DTYPE_U8;
	h.shape[1] = 65536;
	h.shape[2] = 65536;
	h.shape[3] = 3;
	h.tensor_size = 65536ull * 65536 * 3;
	h.payload_size = 0;
	assert_int_equal(test_rep_decode(&h, 0, &d), FPREP_OK);
	assert_true(d.tensor_size == h.tensor_size);

	/* A message of the longest length is cut to fit its NUL. */
	test_rep(&h);
	h.status = FPREP_ELIMIT;
	h.ndim = 0;
	h.tensor_size = 0;
	h.payload_size = 0;
	memset(h.message, 'm', sizeof(h.message));
	assert_int_equal(test_rep_decode(&h, 0, &d), FPREP_OK);
	assert_int_equal(strlen(d.message), FPREP_MESSAGE_SIZE - 1);
	assert_int_equal(d.status, FPREP_ELIMIT);
}

static void reply_errors(void **state)
{
	uint8_t buf[FPREP_REPLY_HEADER_SIZE];
	fprep_reply_header h, d;

	(void)state;
	test_rep(&h);
	h.payload_size = 0;
	h.tensor_size = 0;
	h.ndim = 0;
	h.status = FPREP_EINVAL;
	fprep_reply_encode(&h, buf);
	for (size_t len = 0; len < FPREP_REPLY_HEADER_SIZE; len++) {
		uint8_t *p = malloc(len ? len : 1);

		assert_non_null(p);
		memcpy(p, buf, len);
		assert_int_equal(fprep_reply_decode(p, len, &d), FPREP_EPROTO);
		assert_int_equal(d.kind, len >= 8 ? h.kind : 0);
		assert_true(d.request_id == (len >= 16 ? h.request_id : 0));
		free(p);
	}
	assert_int_equal(fprep_reply_decode(buf, sizeof(buf), &d), FPREP_OK);
	buf[0] = 'X';
	assert_int_equal(fprep_reply_decode(buf, sizeof(buf), &d),
	                 FPREP_EPROTO);
	buf[0] = 'F';
	buf[104 + FPREP_MESSAGE_SIZE - 1] = 'x';
	memset(buf + 104, 'y', FPREP_MESSAGE_SIZE - 1);
	assert_int_equal(fprep_reply_decode(buf, sizeof(buf), &d),
	                 FPREP_EPROTO);
	assert_true(d.request_id == TEST_ID);

	h.version = 7;
	assert_int_equal(test_rep_decode(&h, 0, &d), FPREP_EVERSION);
	assert_int_equal(d.kind, FPREP_KIND_FRAME);
	h.version = FPREP_PROTOCOL_VERSION;
	h.payload_size = 1;
	assert_int_equal(test_rep_decode(&h, 0, &d), FPREP_EPROTO);
	assert_int_equal(test_rep_decode(&h, 2, &d), FPREP_EPROTO);
	assert_int_equal(test_rep_decode(&h, 1, &d), FPREP_OK);
	h.ndim = 5;
	assert_int_equal(test_rep_decode(&h, 1, &d), FPREP_EPROTO);

	/* A successful tensor reply must describe its tensor. */
	test_rep(&h);
	assert_int_equal(test_rep_decode(&h, 240, &d), FPREP_OK);
	h.tensor_size = 239;
	h.payload_size = 239;
	assert_int_equal(test_rep_decode(&h, 239, &d), FPREP_EPROTO);
	test_rep(&h);
	h.ndim = 3;
	assert_int_equal(test_rep_decode(&h, 240, &d), FPREP_EPROTO);
	test_rep(&h);
	h.dtype = 0;
	assert_int_equal(test_rep_decode(&h, 240, &d), FPREP_EPROTO);
	test_rep(&h);
	h.layout = 3;
	assert_int_equal(test_rep_decode(&h, 240, &d), FPREP_EPROTO);
	test_rep(&h);
	h.output_loc = FPREP_LOC_SHM;
	assert_int_equal(test_rep_decode(&h, 240, &d), FPREP_OK);
	h.output_loc = FPREP_LOC_INLINE;
	h.shape[1] = h.shape[2] = h.shape[3] = UINT32_MAX;
	assert_int_equal(test_rep_decode(&h, 240, &d), FPREP_EPROTO);
	/* INFO carries text, no tensor. */
	test_rep(&h);
	h.kind = FPREP_KIND_INFO;
	h.ndim = 0;
	h.tensor_size = 0;
	h.payload_size = 5;
	assert_int_equal(test_rep_decode(&h, 5, &d), FPREP_OK);
}

CMOCKA_MAIN({
        cmocka_unit_test(pixel_bytes),
        cmocka_unit_test(request_init_defaults),
        cmocka_unit_test(request_round_trip),
        cmocka_unit_test(request_valid_inline),
        cmocka_unit_test(request_truncated),
        cmocka_unit_test(request_magic_version_kind),
        cmocka_unit_test(request_other_kinds),
        cmocka_unit_test(request_bad_enums),
        cmocka_unit_test(request_bad_dims),
        cmocka_unit_test(request_yuv),
        cmocka_unit_test(request_jpeg),
        cmocka_unit_test(request_bad_sizes),
        cmocka_unit_test(request_bad_payload),
        cmocka_unit_test(request_bad_norm),
        cmocka_unit_test(request_u8_norm),
        cmocka_unit_test(request_shm_output),
        cmocka_unit_test(request_shm_reply),
        cmocka_unit_test(doorbell_roundtrip),
        cmocka_unit_test(request_small_msg),
        cmocka_unit_test(request_cuda_output),
        cmocka_unit_test(request_register_cuda),
        cmocka_unit_test(tensor_shape),
        cmocka_unit_test(reply_round_trip),
        cmocka_unit_test(reply_errors),
})
