/*
 * test_ops.c: unit tests of the CPU preprocessing (ops_cpu.c, half.h):
 * the letterbox transform, hand-computed bilinear values, normalisation per
 * channel, F16 rounding, equivalences between source formats, row bands,
 * exact mode (rounding OPENCV) on values cv2.resize gave, and rejection of
 * bad requests. compare_opencv.py and compare_exact.py check the same op
 * against OpenCV on real photographs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"
#include "half.h"
#include "ops.h"
#include "test_limits.h"

static uint32_t t_bpp(uint16_t format)
{
	return format == FPREP_PIX_GRAY8                                ? 1
	       : format == FPREP_PIX_BGRA8 || format == FPREP_PIX_RGBA8 ? 4
	                                                                : 3;
}

/* t_request fills a FRAME request with the YOLO defaults. */
static void t_request(fprep_request *r, uint16_t format, uint32_t w, uint32_t h,
                      uint32_t ow, uint32_t oh)
{
	fprep_request_init(r, format, w, h);
	r->src_stride = w * t_bpp(format);
	r->input_size = (uint64_t)r->src_stride * h;
	r->out_width = ow;
	r->out_height = oh;
	if (format == FPREP_PIX_GRAY8)
		r->channel_order = FPREP_ORDER_GRAY;
}

static size_t t_tensor_size(const fprep_request *r)
{
	size_t e = r->dtype == FPREP_DTYPE_F32   ? 4
	           : r->dtype == FPREP_DTYPE_F16 ? 2
	                                         : 1;

	return (size_t)r->out_width * r->out_height * e *
	       (r->channel_order == FPREP_ORDER_GRAY ? 1 : 3);
}

/* t_run runs the op into a new tensor filled with poison first. */
static uint8_t *t_run(const fprep_request *r, const void *frame, int poison,
                      fprep_transform *xf)
{
	size_t n = t_tensor_size(r);
	uint8_t *t = malloc(n);

	assert_non_null(t);
	memset(t, poison, n);
	assert_int_equal(fprep_preprocess_cpu(r, frame, t, n, xf), FPREP_OK);
	return t;
}

/* t_image returns w x h pixels of a deterministic pseudo-random pattern. */
static uint8_t *t_image(uint32_t w, uint32_t h, uint32_t bpp, uint32_t seed)
{
	size_t n = (size_t)w * h * bpp, i;
	uint8_t *p = malloc(n ? n : 1);

	assert_non_null(p);
	for (i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (uint8_t)(seed >> 24);
	}
	return p;
}

static void t_xf(uint32_t w, uint32_t h, uint32_t ow, uint32_t oh,
                 uint8_t resize, uint32_t rw, uint32_t rh, uint32_t px,
                 uint32_t py)
{
	fprep_request r;
	fprep_transform xf;

	t_request(&r, FPREP_PIX_BGR8, w, h, ow, oh);
	r.resize = resize;
	fprep_transform_compute(&r, &xf);
	assert_int_equal(xf.resized_w, rw);
	assert_int_equal(xf.resized_h, rh);
	assert_int_equal(xf.pad_x, px);
	assert_int_equal(xf.pad_y, py);
	assert_float_equal(xf.scale_x, (double)rw / w, 1e-6);
	assert_float_equal(xf.scale_y, (double)rh / h, 1e-6);
}

static void test_transform(void **state)
{
	(void)state;
	t_xf(1920, 1080, 640, 640, FPREP_RESIZE_LETTERBOX, 640, 360, 0, 140);
	t_xf(1080, 1920, 640, 640, FPREP_RESIZE_LETTERBOX, 360, 640, 140, 0);
	t_xf(512, 512, 640, 640, FPREP_RESIZE_LETTERBOX, 640, 640, 0, 0);
	t_xf(100, 50, 640, 640, FPREP_RESIZE_LETTERBOX, 640, 320, 0, 160);
	t_xf(640, 640, 640, 640, FPREP_RESIZE_LETTERBOX, 640, 640, 0, 0);
	t_xf(1, 1, 640, 480, FPREP_RESIZE_LETTERBOX, 480, 480, 80, 0);
	t_xf(1, 1, 1, 1, FPREP_RESIZE_LETTERBOX, 1, 1, 0, 0);
	/* Non-square output, odd slack: dw = 1.5 -> left = round(1.4) = 1. */
	t_xf(5, 10, 8, 10, FPREP_RESIZE_LETTERBOX, 5, 10, 1, 0);
	/* Ties in the resized size round to even: 5 * 0.5 = 2.5 -> 2,
	 * 7 * 0.5 = 3.5 -> 4. */
	t_xf(4, 5, 2, 100, FPREP_RESIZE_LETTERBOX, 2, 2, 0, 49);
	t_xf(4, 7, 2, 100, FPREP_RESIZE_LETTERBOX, 2, 4, 0, 48);
	/* A resized size that would round to 0 is clamped to 1. */
	t_xf(1000, 1, 10, 10, FPREP_RESIZE_LETTERBOX, 10, 1, 0, 4);
	t_xf(1920, 1080, 640, 640, FPREP_RESIZE_STRETCH, 640, 640, 0, 0);
	t_xf(3, 7, 333, 517, FPREP_RESIZE_STRETCH, 333, 517, 0, 0);
}

/* Hand-computed OpenCV INTER_LINEAR values: a 2x1 gray row [0, 255]
 * stretched to 4x1 samples x = -0.25 (clamped), 0.25, 0.75, 1.25 (clamped):
 * 0, 63.75, 191.25, 255. */
static void test_bilinear_values(void **state)
{
	static const uint8_t src[2] = {0, 255};
	fprep_request r;
	uint8_t *t;
	float *f;

	(void)state;
	t_request(&r, FPREP_PIX_GRAY8, 2, 1, 4, 1);
	r.resize = FPREP_RESIZE_STRETCH;
	r.dtype = FPREP_DTYPE_U8;
	t = t_run(&r, src, 0xcd, NULL);
	assert_int_equal(t[0], 0);
	assert_int_equal(t[1], 64);
	assert_int_equal(t[2], 191);
	assert_int_equal(t[3], 255);
	free(t);

	r.dtype = FPREP_DTYPE_F32;
	r.scale = 1.0f;
	f = (float *)t_run(&r, src, 0xcd, NULL);
	assert_float_equal(f[0], 0.0, 1e-4);
	assert_float_equal(f[1], 63.75, 1e-4);
	assert_float_equal(f[2], 191.25, 1e-4);
	assert_float_equal(f[3], 255.0, 1e-4);
	free(f);
}

/* A 1x1 source fills the resized area with its colour; identity keeps
 * every pixel. */
static void test_degenerate_sizes(void **state)
{
	static const uint8_t px[3] = {10, 20, 30}; /* B, G, R */
	fprep_request r;
	fprep_transform xf;
	uint8_t *t, *img;
	uint32_t x, y, c;

	(void)state;
	t_request(&r, FPREP_PIX_BGR8, 1, 1, 7, 5);
	r.dtype = FPREP_DTYPE_U8;
	t = t_run(&r, px, 0xcd, &xf);
	assert_int_equal(xf.resized_w, 5);
	assert_int_equal(xf.pad_x, 1);
	for (y = 0; y < 5; y++)
		for (x = 0; x < 7; x++)
			for (c = 0; c < 3; c++)
				assert_int_equal(t[c * 35 + y * 7 + x],
				                 x < 1 || x >= 6 ? 114
				                                 : px[2 - c]);
	free(t);

	img = t_image(37, 23, 3, 1);
	t_request(&r, FPREP_PIX_RGB8, 37, 23, 37, 23);
	r.dtype = FPREP_DTYPE_U8;
	r.layout = FPREP_LAYOUT_NHWC;
	t = t_run(&r, img, 0xcd, NULL);
	assert_memory_equal(t, img, 37 * 23 * 3);
	free(t);
	free(img);
}

/* Every byte is written: two runs over different poison give the same
 * tensor, for every dtype, layout and resize mode. */
static void test_every_byte_written(void **state)
{
	static const uint8_t dtypes[] = {FPREP_DTYPE_F32, FPREP_DTYPE_F16,
	                                 FPREP_DTYPE_U8};
	fprep_request r;
	uint8_t *img = t_image(61, 29, 4, 2), *a, *b;
	int d, l, m;

	(void)state;
	for (d = 0; d < 3; d++)
		for (l = FPREP_LAYOUT_NCHW; l <= FPREP_LAYOUT_NHWC; l++)
			for (m = FPREP_RESIZE_LETTERBOX;
			     m <= FPREP_RESIZE_STRETCH; m++) {
				t_request(&r, FPREP_PIX_BGRA8, 61, 29, 50, 43);
				r.dtype = dtypes[d];
				r.layout = (uint8_t)l;
				r.resize = (uint8_t)m;
				a = t_run(&r, img, 0x00, NULL);
				b = t_run(&r, img, 0xff, NULL);
				assert_memory_equal(a, b, t_tensor_size(&r));
				free(a);
				free(b);
			}
	free(img);
}

/* Mean and std apply per tensor channel, in the tensor's channel order. */
static void test_normalisation(void **state)
{
	uint8_t img[4 * 2 * 3];
	fprep_request r;
	fprep_transform xf;
	float *t, want, pad;
	uint32_t i, x, y, c, idx;
	int l;

	(void)state;
	for (i = 0; i < 8; i++) /* BGR = 10, 20, 30 */
		img[i * 3] = 10, img[i * 3 + 1] = 20, img[i * 3 + 2] = 30;
	for (l = FPREP_LAYOUT_NCHW; l <= FPREP_LAYOUT_NHWC; l++) {
		t_request(&r, FPREP_PIX_BGR8, 4, 2, 8, 8);
		r.layout = (uint8_t)l;
		r.scale = 0.5f;
		r.mean[0] = 1.0f, r.mean[1] = 2.0f, r.mean[2] = 3.0f;
		r.std[0] = 2.0f, r.std[1] = 4.0f, r.std[2] = 8.0f;
		t = (float *)t_run(&r, img, 0xcd, &xf);
		assert_int_equal(xf.pad_y, 2);
		for (c = 0; c < 3; c++) {
			/* Tensor channel 0 is R (30), 2 is B (10). */
			want = ((30.0f - 10.0f * c) * 0.5f - r.mean[c]) /
			       r.std[c];
			pad = (114.0f * 0.5f - r.mean[c]) / r.std[c];
			for (y = 0; y < 8; y++)
				for (x = 0; x < 8; x++) {
					idx = l == FPREP_LAYOUT_NCHW
					              ? c * 64 + y * 8 + x
					              : (y * 8 + x) * 3 + c;
					assert_float_equal(
					        t[idx],
					        y < 2 || y >= 6 ? pad : want,
					        1e-5);
				}
		}
		free(t);
	}
}

static void t_f16(float f, uint16_t bits)
{
	assert_int_equal(fprep__f32_to_f16(f), bits);
}

static void test_f16_bits(void **state)
{
	uint16_t h;

	(void)state;
	t_f16(0.0f, 0x0000);
	t_f16(-0.0f, 0x8000);
	t_f16(1.0f, 0x3c00);
	t_f16(-2.0f, 0xc000);
	t_f16(0.1f, 0x2e66);
	t_f16(1.0f / 3.0f, 0x3555);
	t_f16(114.0f / 255.0f, 0x3727);
	t_f16(65504.0f, 0x7bff);
	t_f16(65519.0f, 0x7bff);
	t_f16(65520.0f, 0x7c00); /* tie between 65504 and 65536: to inf */
	t_f16(1e10f, 0x7c00);
	t_f16(-1e10f, 0xfc00);
	t_f16(INFINITY, 0x7c00);
	t_f16(-INFINITY, 0xfc00);
	t_f16(ldexpf(1.0f, -14), 0x0400);        /* smallest normal */
	t_f16(ldexpf(1.0f, -24), 0x0001);        /* smallest subnormal */
	t_f16(ldexpf(1.0f, -25), 0x0000);        /* tie: to even, 0 */
	t_f16(ldexpf(1.5f, -25), 0x0001);        /* above the tie */
	t_f16(ldexpf(3.0f, -25), 0x0002);        /* 1.5 ulp: to 2 */
	t_f16(ldexpf(5.0f, -25), 0x0002);        /* 2.5 ulp: to 2 */
	t_f16(ldexpf(1023.5f, -24), 0x0400);     /* rounds up to normal */
	t_f16(1.0f + ldexpf(1.0f, -11), 0x3c00); /* tie: to even */
	t_f16(1.0f + ldexpf(3.0f, -11), 0x3c02); /* tie: to even */
	t_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20), 0x3c01);
	t_f16(ldexpf(1.0f, -30), 0x0000);
	t_f16(-ldexpf(1.0f, -24), 0x8001);
	h = fprep__f32_to_f16(NAN);
	assert_int_equal(h & 0x7c00, 0x7c00);
	assert_int_not_equal(h & 0x03ff, 0);
}

/* The op's F16 tensors: overflow to infinity and subnormals reach the
 * tensor. */
static void test_f16_tensor(void **state)
{
	static const uint8_t px[1] = {255};
	fprep_request r;
	uint16_t *t;

	(void)state;
	t_request(&r, FPREP_PIX_GRAY8, 1, 1, 1, 1);
	r.dtype = FPREP_DTYPE_F16;
	t = (uint16_t *)t_run(&r, px, 0xcd, NULL);
	assert_int_equal(t[0], 0x3c00); /* 255 / 255 */
	free(t);
	r.scale = 1000.0f;
	t = (uint16_t *)t_run(&r, px, 0xcd, NULL);
	assert_int_equal(t[0], 0x7c00); /* 255000: infinity */
	free(t);
	r.scale = 1.0f;
	r.std[0] = 255.0f * 65536.0f; /* 2^-16: subnormal 0x0100 */
	t = (uint16_t *)t_run(&r, px, 0xcd, NULL);
	assert_int_equal(t[0], 0x0100);
	free(t);
}

/* t_same runs two requests over two frames and expects equal tensors. */
static void t_same(const fprep_request *ra, const void *fa,
                   const fprep_request *rb, const void *fb)
{
	uint8_t *a = t_run(ra, fa, 0x11, NULL), *b = t_run(rb, fb, 0x22, NULL);

	assert_int_equal(t_tensor_size(ra), t_tensor_size(rb));
	assert_memory_equal(a, b, t_tensor_size(ra));
	free(a);
	free(b);
}

static void test_format_equivalence(void **state)
{
	const uint32_t w = 53, h = 31, pad = 7;
	uint8_t *bgr = t_image(w, h, 3, 3), *rgb = t_image(w, h, 3, 0);
	uint8_t *bgra = t_image(w, h, 4, 4), *rgba = t_image(w, h, 4, 5);
	uint8_t *strided = t_image(w * 3 + pad, h, 1, 6);
	uint8_t *gray = t_image(w, h, 1, 7), *planes;
	fprep_request a, b;
	size_t i, plane;
	int order;

	(void)state;
	for (i = 0; i < (size_t)w * h; i++) {
		const uint8_t *s = bgr + i * 3;

		rgb[i * 3] = s[2], rgb[i * 3 + 1] = s[1], rgb[i * 3 + 2] = s[0];
		memcpy(bgra + i * 4, s, 3);           /* alpha random */
		memcpy(rgba + i * 4, rgb + i * 3, 3); /* alpha random */
		memcpy(strided + (i / w) * (w * 3 + pad) + (i % w) * 3, s, 3);
	}
	for (order = FPREP_ORDER_RGB; order <= FPREP_ORDER_BGR; order++) {
		t_request(&a, FPREP_PIX_BGR8, w, h, 96, 64);
		a.channel_order = (uint8_t)order;
		b = a;
		b.src_format = FPREP_PIX_RGB8;
		t_same(&a, bgr, &b, rgb);
		b = a;
		b.src_format = FPREP_PIX_BGRA8;
		b.src_stride = w * 4;
		b.input_size = (uint64_t)w * 4 * h;
		t_same(&a, bgr, &b, bgra);
		b.src_format = FPREP_PIX_RGBA8;
		t_same(&a, bgr, &b, rgba);
		b = a;
		b.src_stride = w * 3 + pad;
		b.input_size = (uint64_t)b.src_stride * (h - 1) + w * 3;
		t_same(&a, bgr, &b, strided);
	}

	/* GRAY8 into RGB: three equal planes, each the GRAY tensor. */
	t_request(&a, FPREP_PIX_GRAY8, w, h, 96, 64);
	a.dtype = FPREP_DTYPE_U8;
	b = a;
	b.channel_order = FPREP_ORDER_RGB;
	planes = t_run(&b, gray, 0x33, NULL);
	plane = 96 * 64;
	assert_memory_equal(planes, planes + plane, plane);
	assert_memory_equal(planes, planes + 2 * plane, plane);
	b.channel_order = FPREP_ORDER_GRAY;
	free(planes);
	planes = t_run(&b, gray, 0x44, NULL);
	free(planes);

	free(bgr);
	free(rgb);
	free(bgra);
	free(rgba);
	free(strided);
	free(gray);
}

/* Row bands written separately equal the whole tensor. */
static void test_row_bands(void **state)
{
	static const uint32_t cut[] = {0, 1, 100, 101, 333, 640};
	uint8_t *img = t_image(300, 200, 3, 8), *whole, *bands;
	fprep_request r;
	fprep_transform xf;
	size_t n;
	int i, l;

	(void)state;
	for (l = FPREP_LAYOUT_NCHW; l <= FPREP_LAYOUT_NHWC; l++) {
		t_request(&r, FPREP_PIX_BGR8, 300, 200, 640, 640);
		r.layout = (uint8_t)l;
		n = t_tensor_size(&r);
		whole = t_run(&r, img, 0x55, &xf);
		bands = malloc(n);
		assert_non_null(bands);
		memset(bands, 0x66, n);
		for (i = 5; i > 0; i--)
			assert_int_equal(
			        fprep__preprocess_cpu_rows(&r, img, bands, &xf,
			                                   cut[i - 1], cut[i]),
			        FPREP_OK);
		assert_memory_equal(whole, bands, n);
		free(whole);
		free(bands);
	}
	free(img);
}

/* Exact mode: the uint8 pixels cv2.resize(INTER_LINEAR) gives (OpenCV 4.6)
 * for a 3x3 gray image stretched to 5x4, where the float mode rounds 97.5
 * and 80.6 the other way; the padding's 100.5 rounded half to even, as
 * cv2.copyMakeBorder's value; F32 the same pixels normalised. */
static void test_exact_mode(void **state)
{
	static const uint8_t src[9] = {0, 255, 7, 128, 3, 250, 77, 200, 1};
	static const uint8_t cv[20] = {0,   102, 255, 106, 7,  80, 87,
	                               97,  134, 159, 109, 96, 77, 125,
	                               157, 77,  126, 200, 81, 1};
	fprep_request r;
	uint8_t *t, *f;
	float *t32;
	int i;

	(void)state;
	t_request(&r, FPREP_PIX_GRAY8, 3, 3, 5, 4);
	r.resize = FPREP_RESIZE_STRETCH;
	r.dtype = FPREP_DTYPE_U8;
	r.rounding = FPREP_ROUNDING_OPENCV;
	t = t_run(&r, src, 0xa5, NULL);
	assert_memory_equal(t, cv, sizeof(cv));
	r.rounding = FPREP_ROUNDING_FLOAT;
	f = t_run(&r, src, 0xa5, NULL);
	assert_int_equal(f[7], 98);  /* 97.5 */
	assert_int_equal(f[18], 81); /* 80.6: the same either way */
	assert_memory_not_equal(f, cv, sizeof(cv));
	free(f);
	free(t);

	r.dtype = FPREP_DTYPE_F32;
	r.rounding = FPREP_ROUNDING_OPENCV;
	t32 = (float *)t_run(&r, src, 0xa5, NULL);
	for (i = 0; i < 20; i++)
		assert_true(t32[i] == (float)cv[i] * (1.0f / 255.0f));
	free(t32);

	/* Letterbox 3x3 -> 3x5: one row of padding above and below. */
	t_request(&r, FPREP_PIX_GRAY8, 3, 3, 3, 5);
	r.dtype = FPREP_DTYPE_U8;
	r.pad_value = 100.5f;
	r.rounding = FPREP_ROUNDING_OPENCV;
	t = t_run(&r, src, 0xa5, NULL);
	assert_int_equal(t[0], 100);
	assert_int_equal(t[14], 100);
	assert_memory_equal(t + 3, src, sizeof(src));
	free(t);
	r.rounding = FPREP_ROUNDING_FLOAT;
	t = t_run(&r, src, 0xa5, NULL);
	assert_int_equal(t[0], 101);
	free(t);
}

/* The rounding travels in bits 4-7 of the wire's resize byte. */
static void test_rounding_wire(void **state)
{
	const fprep_limits lim = test_no_limits;
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];
	char msg[FPREP_MESSAGE_SIZE];
	fprep_request r, d;

	(void)state;
	t_request(&r, FPREP_PIX_BGR8, 16, 16, 4, 4);
	r.input_loc = FPREP_LOC_SHM;
	r.resize = FPREP_RESIZE_STRETCH;
	r.rounding = FPREP_ROUNDING_OPENCV;
	fprep_request_encode(&r, buf);
	assert_int_equal(buf[40], 0x12);
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &lim, &d, msg,
	                                      sizeof(msg)),
	                 FPREP_OK);
	assert_int_equal(d.resize, FPREP_RESIZE_STRETCH);
	assert_int_equal(d.rounding, FPREP_ROUNDING_OPENCV);
	r.rounding = FPREP_ROUNDING_FLOAT;
	fprep_request_encode(&r, buf);
	assert_int_equal(buf[40], FPREP_RESIZE_STRETCH);
	buf[40] = 0x51; /* rounding 5, LETTERBOX */
	assert_int_equal(fprep_request_decode(buf, sizeof(buf), &lim, &d, msg,
	                                      sizeof(msg)),
	                 FPREP_EINVAL);
	assert_string_equal(msg, "rounding 5 is not a rounding mode (0..1)");
}

static void test_rejects(void **state)
{
	uint8_t img[16 * 16 * 4], out[64];
	fprep_request r, b;
	size_t n;

	(void)state;
	memset(img, 1, sizeof(img));
	t_request(&r, FPREP_PIX_BGR8, 16, 16, 4, 4);
	n = t_tensor_size(&r);
	assert_true(n <= sizeof(out) * 4);
	assert_int_equal(fprep__preprocess_check(&r, n), FPREP_OK);
	assert_int_equal(fprep_preprocess_cpu(&r, img, out, n - 1, NULL),
	                 FPREP_EINVAL);
	assert_int_equal(fprep_preprocess_cpu(&r, img, out, n + 1, NULL),
	                 FPREP_EINVAL);
	assert_int_equal(fprep_preprocess_cpu(&r, img, out, 0, NULL),
	                 FPREP_EINVAL);
#define T_BAD(field, value)                                                    \
	do {                                                                   \
		b = r;                                                         \
		b.field = value;                                               \
		assert_int_equal(fprep__preprocess_check(&b, n),               \
		                 FPREP_EINVAL);                                \
	} while (0)
	T_BAD(src_format, 0);
	T_BAD(src_format, 9);
	T_BAD(channel_order, FPREP_ORDER_GRAY); /* from a colour source */
	T_BAD(channel_order, 4);
	T_BAD(dtype, 0);
	T_BAD(layout, 3);
	T_BAD(resize, 0);
	T_BAD(rounding, 2);
	T_BAD(src_width, 0);
	T_BAD(src_height, 0);
	T_BAD(out_width, 0);
	T_BAD(src_stride, 16 * 3 - 1);
	T_BAD(input_size, 16 * 16 * 3 - 1);
	T_BAD(std[1], 0.0f);
	T_BAD(std[2], -1.0f);
	T_BAD(mean[0], NAN);
	T_BAD(scale, INFINITY);
	T_BAD(pad_value, NAN);
	/* The decoder's checks, which the ops share. */
	T_BAD(pad_value, 300.0f);
	T_BAD(input_loc, 3);
	T_BAD(output_loc, 3);
	T_BAD(output_loc, FPREP_LOC_SHM);  /* out_capacity 0 < tensor */
	T_BAD(output_loc, FPREP_LOC_CUDA); /* the same */
#undef T_BAD
}

/* One validator: a request built in memory is judged by the checks that
 * judge one from the wire, with the same error and the same sentence. */
static void test_one_validator(void **state)
{
	const fprep_limits lim = test_no_limits;
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE + 16 * 16 * 3];
	char m1[FPREP_MESSAGE_SIZE], m2[FPREP_MESSAGE_SIZE];
	fprep_request r, b, d;
	int e1, e2, cases = 0;

	(void)state;
	t_request(&r, FPREP_PIX_BGR8, 16, 16, 4, 4);
	assert_int_equal(fprep__request_check(&r, m2, sizeof(m2)), FPREP_OK);
#define T_SAME(field, value)                                                   \
	do {                                                                   \
		b = r;                                                         \
		b.field = value;                                               \
		memset(buf, 0, sizeof(buf));                                   \
		fprep_request_encode(&b, buf);                                 \
		e1 = fprep_request_decode(buf, sizeof(buf), &lim, &d, m1,      \
		                          sizeof(m1));                         \
		e2 = fprep__request_check(&b, m2, sizeof(m2));                 \
		assert_int_not_equal(e1, FPREP_OK);                            \
		assert_int_equal(e1, e2);                                      \
		assert_string_equal(m1, m2);                                   \
		cases++;                                                       \
	} while (0)
	T_SAME(src_format, 10);
	T_SAME(channel_order, FPREP_ORDER_GRAY);
	T_SAME(dtype, 7);
	T_SAME(layout, 0);
	T_SAME(resize, 3);
	T_SAME(rounding, 2);
	T_SAME(src_width, 0);
	T_SAME(out_height, 0);
	T_SAME(src_stride, 47);
	T_SAME(input_size, 100);
	T_SAME(pad_value, -1.0f);
	T_SAME(scale, NAN);
	T_SAME(std[2], 0.0f);
	T_SAME(output_loc, 5);
#undef T_SAME
	assert_int_equal(cases, 14);

	/* A valid JPEG request: the daemon decodes it first; the op, which
	 * takes pixels, refuses it. */
	float tensor[4 * 4 * 3];
	b = r;
	b.src_format = FPREP_PIX_JPEG;
	b.src_width = b.src_height = 0;
	b.input_size = 100;
	uint32_t shape[4];
	uint64_t tb = 0;
	assert_int_equal(fprep__request_check(&b, m2, sizeof(m2)), FPREP_OK);
	assert_int_equal(fprep_tensor_shape(&b, shape, &tb), FPREP_OK);
	assert_true(tb == sizeof(tensor));
	assert_int_equal(
	        fprep_preprocess_cpu(&b, buf, tensor, sizeof(tensor), NULL),
	        FPREP_EINVAL);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_transform),
        cmocka_unit_test(test_bilinear_values),
        cmocka_unit_test(test_degenerate_sizes),
        cmocka_unit_test(test_every_byte_written),
        cmocka_unit_test(test_normalisation),
        cmocka_unit_test(test_f16_bits),
        cmocka_unit_test(test_f16_tensor),
        cmocka_unit_test(test_format_equivalence),
        cmocka_unit_test(test_row_bands),
        cmocka_unit_test(test_exact_mode),
        cmocka_unit_test(test_rounding_wire),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_one_validator),
})
