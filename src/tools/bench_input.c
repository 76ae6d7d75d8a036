/*
 * bench_input.c: frames for frameprep-bench and the check of each tensor
 * against the CPU reference.
 *
 * Images are decoded once with stb_image (and, with --frame-size, resized
 * with stb_image_resize so a small photo can stand in for a camera frame);
 * synthetic frames are seeded pseudo-random pixels, so a wrong resize or
 * channel order shows up in the comparison, which zeros would hide. With
 * --format jpeg a file is sent as it is and the reference decodes it with
 * libjpeg-turbo, as the daemon does.
 */
#include "bench_input.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <turbojpeg.h>

#include "tool_yuv.h"

uint64_t bench_splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* input_finish fills in the request and the expected shape of in, whose
 * pixels are set. */
static int input_finish(const bench_frame_spec *spec, bench_input *in,
                        uint32_t w, uint32_t h)
{
	fprep_request *req = &in->req;
	int err;

	fprep_request planes;

	/* fprep_request_init lays out the (unpadded) planes. */
	fprep_request_init(&planes, spec->format, w, h);
	*req = spec->tmpl;
	req->kind = FPREP_KIND_FRAME;
	req->src_format = spec->format;
	req->src_width = w;
	req->src_height = h;
	req->src_stride = planes.src_stride;
	req->input_size = planes.input_size;
	req->uv_stride = planes.uv_stride;
	req->u_offset = planes.u_offset;
	req->v_offset = planes.v_offset;
	req->input_loc = FPREP_LOC_INLINE;
	req->output_loc = FPREP_LOC_INLINE;
	err = fprep_tensor_shape(req, in->shape, &in->tensor_bytes);
	if (err) {
		fprintf(stderr,
		        "frameprep-bench: %s: the request is invalid (%s): "
		        "check --size, --dtype, --order and --format\n",
		        in->name, fprep_err_name(err));
		return -1;
	}
	pthread_mutex_init(&in->ref_lock, NULL);
	atomic_init(&in->replies, 0);
	return 0;
}

static int input_synthetic(const bench_frame_spec *spec, bench_input *in)
{
	uint64_t s = spec->seed, n, i, r = 0;
	fprep_request sized;

	fprep_request_init(&sized, spec->format, spec->synth_w, spec->synth_h);
	n = sized.input_size;
	in->pixels = malloc(n);
	if (!in->pixels) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (i % 8 == 0)
			r = bench_splitmix64(&s);
		in->pixels[i] = (uint8_t)(r >> (8 * (i % 8)));
	}
	snprintf(in->name, sizeof(in->name), "synthetic %ux%u seed %llu",
	         spec->synth_w, spec->synth_h, (unsigned long long)spec->seed);
	return input_finish(spec, in, spec->synth_w, spec->synth_h);
}

/* input_jpeg reads path's bytes into in, to be sent as a JPEG frame (size
 * 0x0 on the wire: the daemon reads it). Returns 0, or -1 with *why set. */
static int input_jpeg(const bench_frame_spec *spec, const char *path,
                      bench_input *in, const char **why)
{
	FILE *f = fopen(path, "rb");
	long size = -1;

	if (spec->frame_w) {
		*why = "--frame-size cannot resize a JPEG sent as it is";
		goto fail;
	}
	if (f != NULL && fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (f == NULL || size < 4 || fseek(f, 0, SEEK_SET) != 0) {
		*why = f == NULL ? strerror(errno) : "not a JPEG (too short)";
		goto fail;
	}
	in->pixels = malloc((size_t)size);
	if (in->pixels == NULL ||
	    fread(in->pixels, 1, (size_t)size, f) != (size_t)size) {
		*why = "cannot read the file";
		goto fail;
	}
	fclose(f);
	f = NULL;
	if (in->pixels[0] != 0xff || in->pixels[1] != 0xd8) {
		*why = "not a JPEG (no SOI marker)";
		goto fail;
	}
	snprintf(in->name, sizeof(in->name), "%s", path);
	if (input_finish(spec, in, 0, 0)) {
		*why = "invalid request";
		goto fail;
	}
	in->req.input_size = (uint64_t)size;
	return 0;
fail:
	if (f != NULL)
		fclose(f);
	free(in->pixels);
	in->pixels = NULL;
	return -1;
}

/* input_jpeg_reference decodes in's JPEG with libjpeg-turbo (the flags
 * the daemon uses) and computes the CPU reference of that frame into
 * in->ref. Returns 0 or an enum fprep_err. */
static int input_jpeg_reference(bench_input *in)
{
	tjhandle tj = tjInitDecompress();
	fprep_request raw = in->req;
	int w = 0, h = 0, sub, cs, pf = TJPF_RGB, rc = FPREP_EINVAL;
	uint32_t bpp = 3;
	uint8_t *px = NULL;

	if (tj == NULL)
		return FPREP_ENOMEM;
	if (tjDecompressHeader3(tj, in->pixels,
	                        (unsigned long)in->req.input_size, &w, &h, &sub,
	                        &cs) != 0)
		goto out;
	raw.src_format = FPREP_PIX_RGB8;
	if (in->req.channel_order == FPREP_ORDER_GRAY) {
		raw.src_format = FPREP_PIX_GRAY8;
		pf = TJPF_GRAY;
		bpp = 1;
	} else if (in->req.channel_order == FPREP_ORDER_BGR) {
		raw.src_format = FPREP_PIX_BGR8;
		pf = TJPF_BGR;
	}
	raw.src_width = (uint32_t)w;
	raw.src_height = (uint32_t)h;
	raw.src_stride = (uint32_t)w * bpp;
	raw.input_size = (uint64_t)raw.src_stride * (uint32_t)h;
	px = malloc(raw.input_size);
	rc = FPREP_ENOMEM;
	if (px == NULL)
		goto out;
	rc = FPREP_EINVAL;
	if (tjDecompress2(tj, in->pixels, (unsigned long)in->req.input_size, px,
	                  w, (int)raw.src_stride, h, pf,
	                  TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0)
		goto out;
	rc = fprep_preprocess_cpu(&raw, px, in->ref, in->tensor_bytes, NULL);
out:
	free(px);
	tjDestroy(tj);
	return rc;
}

/* input_image decodes path into in. Returns 0, or -1 with *why set. */
static int input_image(const bench_frame_spec *spec, const char *path,
                       bench_input *in, const char **why)
{
	int w, h, n, want, yuv;
	uint8_t *px, *sized;
	uint64_t i, count;

	if (spec->format == FPREP_PIX_JPEG)
		return input_jpeg(spec, path, in, why);
	yuv = spec->format >= FPREP_PIX_NV12;
	want = yuv ? 3 : (int)fprep_pixel_bytes(spec->format);
	px = stbi_load(path, &w, &h, &n, want);
	if (!px) {
		*why = stbi_failure_reason();
		return -1;
	}
	if (spec->frame_w &&
	    ((uint32_t)w != spec->frame_w || (uint32_t)h != spec->frame_h)) {
		sized = malloc((size_t)spec->frame_w * spec->frame_h * want);
		if (!sized ||
		    !stbir_resize_uint8(px, w, h, 0, sized, (int)spec->frame_w,
		                        (int)spec->frame_h, 0, want)) {
			free(sized);
			stbi_image_free(px);
			*why = "cannot resize";
			return -1;
		}
		stbi_image_free(px);
		px = sized;
		w = (int)spec->frame_w;
		h = (int)spec->frame_h;
	} else {
		/* Own the pixels with malloc so one free fits all inputs. */
		sized = malloc((size_t)w * h * want);
		if (!sized) {
			stbi_image_free(px);
			*why = "out of memory";
			return -1;
		}
		memcpy(sized, px, (size_t)w * h * want);
		stbi_image_free(px);
		px = sized;
	}
	if (spec->format == FPREP_PIX_BGR8 || spec->format == FPREP_PIX_BGRA8) {
		count = (uint64_t)w * h;
		for (i = 0; i < count; i++) {
			uint8_t t = px[i * want];

			px[i * want] = px[i * want + 2];
			px[i * want + 2] = t;
		}
	}
	if (yuv) {
		/* Even sizes: the last odd column (and row) are dropped. */
		uint64_t size;
		int ew = w & ~1,
		    eh = spec->format == FPREP_PIX_YUYV ? h : h & ~1;

		for (int y = 1; y < eh && ew != w; y++)
			memmove(px + (size_t)y * ew * 3, px + (size_t)y * w * 3,
			        (size_t)ew * 3);
		sized = ew && eh ? tool_rgb_to_yuv(px, (uint32_t)ew,
		                                   (uint32_t)eh, spec->format,
		                                   spec->tmpl.yuv_matrix,
		                                   spec->tmpl.yuv_range, &size)
		                 : NULL;
		free(px);
		if (!sized) {
			*why = "too small or out of memory";
			return -1;
		}
		px = sized;
		w = ew;
		h = eh;
	}
	in->pixels = px;
	snprintf(in->name, sizeof(in->name), "%s", path);
	if (input_finish(spec, in, (uint32_t)w, (uint32_t)h)) {
		*why = "invalid request";
		return -1;
	}
	return 0;
}

static int input_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* input_list_dir returns the sorted regular-file names of dir. */
static char **input_list_dir(const char *dir, size_t *countp)
{
	DIR *d;
	struct dirent *e;
	char **names = NULL, **grown;
	size_t n = 0, cap = 0;

	d = opendir(dir);
	if (!d)
		return NULL;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			grown = realloc(names, cap * sizeof(*names));
			if (!grown)
				break;
			names = grown;
		}
		names[n] = strdup(e->d_name);
		if (names[n])
			n++;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), input_name_cmp);
	*countp = n;
	return names;
}

static int input_load_dir(const bench_frame_spec *spec, bench_input **inputsp,
                          size_t *countp)
{
	char **names, path[4096];
	size_t n = 0, i, got = 0;
	bench_input *inputs = NULL;
	const char *why;
	int rc = -1;

	names = input_list_dir(spec->image_dir, &n);
	if (!names) {
		fprintf(stderr, "frameprep-bench: --image-dir %s: %s\n",
		        spec->image_dir, n ? "out of memory" : strerror(errno));
		return -1;
	}
	inputs = calloc(n ? n : 1, sizeof(*inputs));
	if (!inputs)
		goto out;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", spec->image_dir,
		         names[i]);
		if (input_image(spec, path, &inputs[got], &why) == 0)
			got++;
		else
			fprintf(stderr, "frameprep-bench: skipping %s: %s\n",
			        path, why);
	}
	if (got == 0) {
		fprintf(stderr, "frameprep-bench: no image in %s\n",
		        spec->image_dir);
		free(inputs);
		inputs = NULL;
		goto out;
	}
	*inputsp = inputs;
	*countp = got;
	rc = 0;
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int bench_inputs_load(const bench_frame_spec *spec, bench_input **inputsp,
                      size_t *countp)
{
	bench_input *in;
	const char *why = "";

	if (spec->image_dir)
		return input_load_dir(spec, inputsp, countp);
	in = calloc(1, sizeof(*in));
	if (!in) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return -1;
	}
	if (spec->image) {
		if (input_image(spec, spec->image, in, &why)) {
			fprintf(stderr, "frameprep-bench: %s: %s\n",
			        spec->image, why);
			free(in->pixels);
			free(in);
			return -1;
		}
	} else if (input_synthetic(spec, in)) {
		free(in->pixels);
		free(in);
		return -1;
	}
	*inputsp = in;
	*countp = 1;
	return 0;
}

void bench_inputs_free(bench_input *inputs, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++) {
		free(inputs[i].pixels);
		free(inputs[i].ref);
		free(inputs[i].els);
		free(inputs[i].frames);
		pthread_mutex_destroy(&inputs[i].ref_lock);
	}
	free(inputs);
}

/* input_half_to_float decodes an IEEE binary16. */
static float input_half_to_float(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	float m = (float)(h & 0x3ff), v;

	if (e == 0)
		v = ldexpf(m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf(m + 1024.0f, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* input_half_ulp returns the spacing of binary16 values around |v|. */
static float input_half_ulp(float v)
{
	int e;

	v = fabsf(v);
	if (v < ldexpf(1.0f, -14))
		return ldexpf(1.0f, -24);
	frexpf(v, &e); /* v = f * 2^e with f in [0.5, 1) */
	return ldexpf(1.0f, e - 11);
}

/* input_reference returns the CPU reference tensor of in, computing it on
 * first use. */
static const void *input_reference(bench_input *in, int *errp)
{
	const void *ref;

	pthread_mutex_lock(&in->ref_lock);
	if (!in->ref && !in->ref_err) {
		in->ref = malloc(in->tensor_bytes);
		if (!in->ref)
			in->ref_err = FPREP_ENOMEM;
		else if (in->els != NULL)
			in->ref_err = fprep_preprocess_elements_cpu(
			        &in->req, in->els,
			        in->frames != NULL ? in->frames : in->pixels,
			        in->ref, in->tensor_bytes, NULL);
		else if (in->req.src_format == FPREP_PIX_JPEG)
			in->ref_err = input_jpeg_reference(in);
		else
			in->ref_err = fprep_preprocess_cpu(
			        &in->req, in->pixels, in->ref, in->tensor_bytes,
			        NULL);
	}
	ref = in->ref_err ? NULL : in->ref;
	*errp = in->ref_err;
	pthread_mutex_unlock(&in->ref_lock);
	return ref;
}

/* input_channel returns the tensor channel of element i. */
static unsigned input_channel(const bench_input *in, uint64_t i)
{
	if (in->req.layout == FPREP_LAYOUT_NHWC)
		return (unsigned)(i % in->shape[3]);
	return (unsigned)(i / ((uint64_t)in->shape[2] * in->shape[3]) %
	                  in->shape[1]);
}

/* input_element reads element i of a float tensor t: IEEE binary16 when
 * f16, else binary32. */
static float input_element(const void *t, uint64_t i, int f16)
{
	uint16_t h;
	float f;

	if (f16) {
		memcpy(&h, (const char *)t + 2 * i, 2);
		return input_half_to_float(h);
	}
	memcpy(&f, (const char *)t + 4 * i, 4);
	return f;
}

int bench_compare(bench_input *in, const void *tensor, char *msg,
                  size_t msg_size)
{
	const void *ref;
	uint64_t n, i;
	float tol[3], got, want, lim;
	unsigned c;
	int err, f16;

	ref = input_reference(in, &err);
	if (!ref) {
		snprintf(msg, msg_size, "CPU reference failed: %s",
		         fprep_strerror(err));
		return err;
	}
	for (c = 0; c < 3; c++)
		tol[c] = fabsf(in->req.scale / in->req.std[c]) + 1e-6f;
	switch (in->req.dtype) {
	case FPREP_DTYPE_U8:
		n = in->tensor_bytes;
		for (i = 0; i < n; i++) {
			int a = ((const uint8_t *)tensor)[i];
			int b = ((const uint8_t *)ref)[i];

			if (abs(a - b) > 1) {
				snprintf(msg, msg_size,
				         "u8 element %llu is %d, reference %d "
				         "(tolerance 1)",
				         (unsigned long long)i, a, b);
				return FPREP_EMISMATCH;
			}
		}
		return FPREP_OK;
	default: /* F32 and F16 */
		f16 = in->req.dtype == FPREP_DTYPE_F16;
		n = in->tensor_bytes / (f16 ? 2 : 4);
		for (i = 0; i < n; i++) {
			got = input_element(tensor, i, f16);
			want = input_element(ref, i, f16);
			c = input_channel(in, i);
			lim = tol[c < 3 ? c : 0];
			if (f16)
				lim += input_half_ulp(want);
			if (!(fabsf(got - want) <= lim)) {
				snprintf(msg, msg_size,
				         "%s element %llu is %g, reference %g "
				         "(tolerance %g)",
				         f16 ? "f16" : "f32",
				         (unsigned long long)i, got, want, lim);
				return FPREP_EMISMATCH;
			}
		}
		return FPREP_OK;
	}
}
