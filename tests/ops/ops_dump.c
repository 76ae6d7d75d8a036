/*
 * ops_dump: runs fprep_preprocess_cpu on one frame and writes the tensor as
 * a .npy file, so that scripts can compare it with other implementations
 * (compare_opencv.py compares it with OpenCV).
 *
 *   ops_dump [options] INPUT OUT.npy
 *   ops_dump --batch      one "[options] INPUT OUT.npy" per line of stdin
 *
 * INPUT is an image file read with stb_image (as RGB8, or GRAY8 when it has
 * one channel), or with --raw FMT WxH[+STRIDE] a file of raw pixel rows.
 * --rounding opencv|float picks the rounding (exact mode: opencv).
 * YUV formats (nv12, i420, yuyv) take --matrix bt601|bt709|bt2020,
 * --range limited|full and --planes UOFF,VOFF,UVSTRIDE,SIZE (the plane
 * offsets, chroma stride and frame bytes; default: unpadded planes).
 * For each frame one line goes to stdout:
 *   OUT.npy resized=WxH pad=X,Y scale=SX,SY
 * With --bench N the op runs N more times; the mean and best times are
 * printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stb_image.h>

#include "frameprep/frameprep.h"
#include "npy.h"
#include "test_limits.h"
#include "yuv.h"

struct dump_args {
	fprep_request req;
	const char *input;
	const char *output;
	int raw;
	int planes;       /* --planes given */
	uint16_t convert; /* image input converted to this format, or 0 */
	int bench;
};

static const char *const dump_formats[] = {NULL,    "bgr8",  "rgb8",
                                           "bgra8", "rgba8", "gray8",
                                           "nv12",  "i420",  "yuyv"};
#define DUMP_NFORMATS 9

static int dump_lookup(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 1; i < n; i++)
		if (names[i] != NULL && strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

static int dump_floats(const char *s, float *v, int n)
{
	char *end;
	int i;

	for (i = 0; i < n; i++) {
		v[i] = strtof(s, &end);
		if (end == s || (i < n - 1 && *end != ',') ||
		    (i == n - 1 && *end != '\0'))
			return -1;
		s = end + 1;
	}
	return 0;
}

static int dump_parse(int argc, char **argv, struct dump_args *a)
{
	static const char *const resizes[] = {NULL, "letterbox", "stretch"};
	static const char *const orders[] = {NULL, "rgb", "bgr", "gray"};
	static const char *const dtypes[] = {NULL, "f32", "f16", "u8"};
	static const char *const layouts[] = {NULL, "nchw", "nhwc"};
	static const char *const matrices[] = {NULL, "bt601", "bt709",
	                                       "bt2020"};
	static const char *const ranges[] = {NULL, "limited", "full"};
	static const char *const roundings[] = {"float", "opencv"};
	unsigned long long size;
	unsigned uv_stride;
	fprep_request *r = &a->req;
	int i, v, pos = 0;

	memset(a, 0, sizeof(*a));
	/* The defaults; the source is set below. */
	fprep_request_init(r, 0, 0, 0);
	for (i = 0; i < argc; i++) {
		const char *o = argv[i], *n = i + 1 < argc ? argv[i + 1] : NULL;

		if (o[0] != '-') {
			if (pos == 0)
				a->input = o;
			else if (pos == 1)
				a->output = o;
			else
				return -1;
			pos++;
			continue;
		}
		if (n == NULL)
			return -1;
		i++;
		if (strcmp(o, "--size") == 0) {
			if (sscanf(n, "%ux%u", &r->out_width, &r->out_height) !=
			    2)
				return -1;
		} else if (strcmp(o, "--resize") == 0) {
			if ((v = dump_lookup(n, resizes, 3)) < 0)
				return -1;
			r->resize = (uint8_t)v;
		} else if (strcmp(o, "--rounding") == 0) {
			if (strcmp(n, roundings[0]) == 0)
				r->rounding = FPREP_ROUNDING_FLOAT;
			else if (strcmp(n, roundings[1]) == 0)
				r->rounding = FPREP_ROUNDING_OPENCV;
			else
				return -1;
		} else if (strcmp(o, "--order") == 0) {
			if ((v = dump_lookup(n, orders, 4)) < 0)
				return -1;
			r->channel_order = (uint8_t)v;
		} else if (strcmp(o, "--dtype") == 0) {
			if ((v = dump_lookup(n, dtypes, 4)) < 0)
				return -1;
			r->dtype = (uint8_t)v;
		} else if (strcmp(o, "--layout") == 0) {
			if ((v = dump_lookup(n, layouts, 3)) < 0)
				return -1;
			r->layout = (uint8_t)v;
		} else if (strcmp(o, "--pad") == 0) {
			if (dump_floats(n, &r->pad_value, 1))
				return -1;
		} else if (strcmp(o, "--scale") == 0) {
			if (dump_floats(n, &r->scale, 1))
				return -1;
		} else if (strcmp(o, "--mean") == 0) {
			if (dump_floats(n, r->mean, 3))
				return -1;
		} else if (strcmp(o, "--std") == 0) {
			if (dump_floats(n, r->std, 3))
				return -1;
		} else if (strcmp(o, "--convert") == 0) {
			if ((v = dump_lookup(n, dump_formats, DUMP_NFORMATS)) <
			    0)
				return -1;
			a->convert = (uint16_t)v;
		} else if (strcmp(o, "--matrix") == 0) {
			if ((v = dump_lookup(n, matrices, 4)) < 0)
				return -1;
			r->yuv_matrix = (uint8_t)v;
		} else if (strcmp(o, "--range") == 0) {
			if ((v = dump_lookup(n, ranges, 3)) < 0)
				return -1;
			r->yuv_range = (uint8_t)v;
		} else if (strcmp(o, "--planes") == 0) {
			if (sscanf(n, "%u,%u,%u,%llu", &r->u_offset,
			           &r->v_offset, &uv_stride, &size) != 4 ||
			    uv_stride > UINT16_MAX)
				return -1;
			r->uv_stride = (uint16_t)uv_stride;
			r->input_size = size;
			a->planes = 1;
		} else if (strcmp(o, "--bench") == 0) {
			a->bench = atoi(n);
		} else if (strcmp(o, "--raw") == 0) {
			if (i + 1 >= argc)
				return -1;
			if ((v = dump_lookup(n, dump_formats, DUMP_NFORMATS)) <
			    0)
				return -1;
			r->src_format = (uint16_t)v;
			r->src_stride = 0;
			if (sscanf(argv[++i], "%ux%u+%u", &r->src_width,
			           &r->src_height, &r->src_stride) < 2)
				return -1;
			a->raw = 1;
		} else {
			return -1;
		}
	}
	return pos == 2 ? 0 : -1;
}

/* dump_load_raw reads the raw frame the request describes. */
static uint8_t *dump_load_raw(struct dump_args *a)
{
	fprep_request *r = &a->req;
	uint8_t *buf;
	FILE *f;

	if (r->src_stride == 0)
		r->src_stride = r->src_width * fprep_pixel_bytes(r->src_format);
	if (!a->planes) {
		fprep_request d;

		fprep_request_init(&d, r->src_format, r->src_width,
		                   r->src_height);
		d.src_stride = r->src_stride;
		d.input_size = (uint64_t)r->src_stride * r->src_height;
		fprep__yuv_default_planes(&d);
		r->u_offset = d.u_offset;
		r->v_offset = d.v_offset;
		r->uv_stride = d.uv_stride;
		r->input_size = d.input_size;
	}
	f = fopen(a->input, "rb");
	if (f == NULL)
		return NULL;
	buf = malloc(r->input_size ? r->input_size : 1);
	if (buf != NULL && fread(buf, 1, r->input_size, f) != r->input_size) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* dump_load_image decodes an image file and converts it to a->convert
 * (default RGB8, or GRAY8 for one-channel images). */
static uint8_t *dump_load_image(struct dump_args *a)
{
	fprep_request *r = &a->req;
	int w, h, n, i;
	uint8_t *rgb, *out;
	uint32_t bpp;

	if (stbi_info(a->input, &w, &h, &n) == 0)
		return NULL;
	if (a->convert == 0)
		a->convert = n == 1 ? FPREP_PIX_GRAY8 : FPREP_PIX_RGB8;
	rgb = stbi_load(a->input, &w, &h, &n, 3);
	if (rgb == NULL)
		return NULL;
	bpp = fprep_pixel_bytes(a->convert);
	out = malloc((size_t)w * h * bpp);
	for (i = 0; out != NULL && i < w * h; i++) {
		const uint8_t *s = rgb + (size_t)i * 3;
		uint8_t *d = out + (size_t)i * bpp;

		switch (a->convert) {
		case FPREP_PIX_GRAY8:
			/* ITU-R 601 luma, as OpenCV's COLOR_RGB2GRAY. */
			d[0] = (uint8_t)((s[0] * 299 + s[1] * 587 + s[2] * 114 +
			                  500) /
			                 1000);
			break;
		case FPREP_PIX_BGR8:
		case FPREP_PIX_BGRA8:
			d[0] = s[2], d[1] = s[1], d[2] = s[0];
			break;
		default:
			d[0] = s[0], d[1] = s[1], d[2] = s[2];
			break;
		}
		if (bpp == 4)
			d[3] = 255;
	}
	stbi_image_free(rgb);
	r->src_format = a->convert;
	r->src_width = (uint32_t)w;
	r->src_height = (uint32_t)h;
	r->src_stride = (uint32_t)w * bpp;
	r->input_size = (uint64_t)r->src_stride * r->src_height;
	return out;
}

/* dump_write_npy writes the tensor as a .npy file. */
static int dump_write_npy(const char *path, const fprep_request *r,
                          const void *data, size_t size)
{
	static const char *const descr[] = {NULL, "<f4", "<f2", "|u1"};
	uint32_t shape[4];
	uint64_t bytes;

	if (fprep_tensor_shape(r, shape, &bytes) != FPREP_OK || bytes != size)
		return -1;
	return fprep_npy_write(path, descr[r->dtype], shape, 4, data, size);
}

/* dump_validate runs the daemon's validation (fprep_request_decode) on
 * the request, as shared-memory input, and prints its refusal. */
static int dump_validate(const fprep_request *r)
{
	uint8_t head[FPREP_REQUEST_HEADER_SIZE];
	fprep_limits lim = test_no_limits;
	fprep_request shm = *r, back;
	char msg[FPREP_MESSAGE_SIZE];

	shm.input_loc = FPREP_LOC_SHM;
	fprep_request_encode(&shm, head);
	if (fprep_request_decode(head, sizeof(head), &lim, &back, msg,
	                         sizeof(msg)) != FPREP_OK) {
		fprintf(stderr, "ops_dump: request refused: %s\n", msg);
		return -1;
	}
	return 0;
}

static double dump_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int dump_one(int argc, char **argv)
{
	struct dump_args a;
	fprep_transform xf;
	uint8_t *frame = NULL, *tensor = NULL;
	uint32_t shape[4];
	uint64_t bytes;
	size_t size;
	int rc = 1, i;
	double t0;

	if (dump_parse(argc, argv, &a) != 0) {
		fprintf(stderr, "ops_dump: bad arguments (see the source)\n");
		return 2;
	}
	frame = a.raw ? dump_load_raw(&a) : dump_load_image(&a);
	if (frame == NULL) {
		fprintf(stderr, "ops_dump: cannot read %s\n", a.input);
		goto out;
	}
	if (fprep_tensor_shape(&a.req, shape, &bytes) != FPREP_OK) {
		fprintf(stderr, "ops_dump: invalid tensor\n");
		goto out;
	}
	if (dump_validate(&a.req) != 0)
		goto out;
	size = (size_t)bytes;
	tensor = malloc(size);
	if (tensor == NULL)
		goto out;
	rc = fprep_preprocess_cpu(&a.req, frame, tensor, size, &xf);
	if (rc != FPREP_OK) {
		fprintf(stderr, "ops_dump: fprep_preprocess_cpu: %d\n", rc);
		goto out;
	}
	if (a.bench > 0) {
		double best = 1e30, sum = 0, t;

		for (i = 0; i < a.bench; i++) {
			t0 = dump_now();
			fprep_preprocess_cpu(&a.req, frame, tensor, size, NULL);
			t = dump_now() - t0;
			sum += t;
			best = t < best ? t : best;
		}
		printf("bench: %.3f ms per frame, best %.3f ms (%d runs)\n",
		       sum * 1e3 / a.bench, best * 1e3, a.bench);
	}
	if (dump_write_npy(a.output, &a.req, tensor, size) != 0) {
		fprintf(stderr, "ops_dump: cannot write %s: %s\n", a.output,
		        strerror(errno));
		rc = 1;
		goto out;
	}
	printf("%s resized=%ux%u pad=%u,%u scale=%.9g,%.9g\n", a.output,
	       xf.resized_w, xf.resized_h, xf.pad_x, xf.pad_y,
	       (double)xf.scale_x, (double)xf.scale_y);
out:
	free(tensor);
	free(frame);
	return rc == 0 ? 0 : 1;
}

static int dump_batch(void)
{
	char line[4096], *argv[64], *tok, *save;
	int argc, rc = 0;

	while (fgets(line, sizeof(line), stdin) != NULL) {
		argc = 0;
		for (tok = strtok_r(line, " \t\n", &save);
		     tok != NULL && argc < 64;
		     tok = strtok_r(NULL, " \t\n", &save))
			argv[argc++] = tok;
		if (argc == 0)
			continue;
		if (dump_one(argc, argv) != 0)
			rc = 1;
		fflush(stdout);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--batch") == 0)
		return dump_batch();
	return dump_one(argc - 1, argv + 1);
}
