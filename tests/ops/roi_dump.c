/*
 * roi_dump: runs fprep_preprocess_elements_cpu (the CPU reference of ROIS
 * and BATCH requests) on raw frames and writes the (N, C, H, W) or (N, H,
 * W, C) tensor as a .npy file, so that compare_roi.py can check each
 * element against OpenCV.
 *
 *   roi_dump [options] RAW OUT.npy
 *
 *   --src FMT WxH       RAW holds frames of this format (bgr8, rgb8,
 *                       bgra8, rgba8, gray8) and size, unpadded rows
 *   --size WxH          tensor size (default 224x224)
 *   --dtype u8|f32      (default u8)
 *   --order rgb|bgr|gray  (default bgr)
 *   --layout nchw|nhwc  (default nchw)
 *   --resize letterbox|stretch  the request's (default letterbox)
 *   --pad V             pad value (default 114)
 *   --box X,Y,W,H[,R]   a BOX element (R: 0 the request's, 1 letterbox,
 *                       2 stretch); repeatable
 *   --affine M00,M01,M02,M10,M11,M12  an AFFINE element; repeatable
 *   --frames N          a BATCH of the N frames RAW holds, one after
 *                       another (no --box or --affine)
 *
 * One line per element goes to stdout:
 *   K resized=WxH pad=X,Y scale=SX,SY origin=OX,OY
 * Exit status 0, 1 when the op refused (its error printed), 2 on usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "npy.h"

#define ROI_DUMP_MAX 4096

static const char *const roi_formats[] = {NULL,    "bgr8",  "rgb8",
                                          "bgra8", "rgba8", "gray8"};

static int roi_usage(const char *why)
{
	fprintf(stderr, "roi_dump: %s (see the source's comment)\n", why);
	return 2;
}

static int roi_floats(const char *s, float *v, int min, int max)
{
	char *end;
	int n = 0;

	while (n < max) {
		v[n++] = strtof(s, &end);
		if (end == s)
			return -1;
		if (*end == '\0')
			break;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
	return n >= min ? n : -1;
}

static int roi_size(const char *s, uint32_t *w, uint32_t *h)
{
	return sscanf(s, "%ux%u", w, h) == 2 && *w > 0 && *h > 0 ? 0 : -1;
}

static uint8_t *roi_load(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 ||
	    fseek(f, 0, SEEK_SET) != 0 || (buf = malloc((size_t)n)) == NULL ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	} else {
		*len = (size_t)n;
	}
	if (f != NULL)
		fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	static fprep_element el[ROI_DUMP_MAX];
	fprep_element_xf *xfs = NULL;
	fprep_request req;
	uint32_t n = 0, frames = 0, w = 0, h = 0, shape[4];
	uint64_t bytes;
	uint16_t fmt = 0;
	uint8_t *raw = NULL, *tensor = NULL;
	size_t len = 0;
	int i, rc = 1;
	const char *descr;

	fprep_request_init(&req, FPREP_PIX_BGR8, 1, 1);
	req.out_width = req.out_height = 224;
	req.dtype = FPREP_DTYPE_U8;
	req.channel_order = FPREP_ORDER_BGR;
	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i++) {
		const char *o = argv[i], *v = argv[++i];

		if (strcmp(o, "--src") == 0 && i + 1 < argc) {
			for (fmt = 1; fmt <= FPREP_PIX_GRAY8; fmt++)
				if (strcmp(v, roi_formats[fmt]) == 0)
					break;
			if (fmt > FPREP_PIX_GRAY8 ||
			    roi_size(argv[++i], &w, &h) != 0)
				return roi_usage("--src FMT WxH");
		} else if (strcmp(o, "--size") == 0) {
			if (roi_size(v, &req.out_width, &req.out_height) != 0)
				return roi_usage("--size WxH");
		} else if (strcmp(o, "--dtype") == 0) {
			req.dtype = strcmp(v, "f32") == 0 ? FPREP_DTYPE_F32
			                                  : FPREP_DTYPE_U8;
		} else if (strcmp(o, "--order") == 0) {
			req.channel_order =
			        strcmp(v, "rgb") == 0    ? FPREP_ORDER_RGB
			        : strcmp(v, "gray") == 0 ? FPREP_ORDER_GRAY
			                                 : FPREP_ORDER_BGR;
		} else if (strcmp(o, "--layout") == 0) {
			req.layout = strcmp(v, "nhwc") == 0 ? FPREP_LAYOUT_NHWC
			                                    : FPREP_LAYOUT_NCHW;
		} else if (strcmp(o, "--resize") == 0) {
			req.resize = strcmp(v, "stretch") == 0
			                     ? FPREP_RESIZE_STRETCH
			                     : FPREP_RESIZE_LETTERBOX;
		} else if (strcmp(o, "--pad") == 0) {
			req.pad_value = strtof(v, NULL);
		} else if (strcmp(o, "--box") == 0 && n < ROI_DUMP_MAX) {
			float f[5] = {0};
			int k = roi_floats(v, f, 4, 5);

			if (k < 0)
				return roi_usage("--box X,Y,W,H[,R]");
			el[n].type = FPREP_ELEM_BOX;
			el[n].resize = (uint8_t)f[4];
			memcpy(el[n++].v, f, 4 * sizeof(float));
		} else if (strcmp(o, "--affine") == 0 && n < ROI_DUMP_MAX) {
			el[n].type = FPREP_ELEM_AFFINE;
			if (roi_floats(v, el[n++].v, 6, 6) < 0)
				return roi_usage("--affine M00,...,M12");
		} else if (strcmp(o, "--frames") == 0) {
			frames = (uint32_t)strtoul(v, NULL, 10);
		} else {
			return roi_usage(o);
		}
	}
	if (i + 2 != argc || fmt == 0 || (n == 0) == (frames == 0) ||
	    frames > ROI_DUMP_MAX)
		return roi_usage("RAW OUT.npy, --src, and boxes or --frames");
	{
		uint8_t order = req.channel_order, dtype = req.dtype;
		uint8_t layout = req.layout, resize = req.resize;
		uint32_t ow = req.out_width, oh = req.out_height;
		float pad = req.pad_value;

		fprep_request_init(&req, fmt, w, h);
		req.channel_order = order, req.dtype = dtype;
		req.layout = layout, req.resize = resize;
		req.out_width = ow, req.out_height = oh;
		req.pad_value = pad;
		if (dtype == FPREP_DTYPE_U8)
			req.scale = 1.0f;
	}
	req.kind = frames > 0 ? FPREP_KIND_BATCH : FPREP_KIND_ROIS;
	req.input_span = req.input_size;
	if (frames > 0) {
		for (n = 0; n < frames; n++) {
			el[n].type = FPREP_ELEM_FRAME;
			el[n].offset = n * req.input_size;
		}
		req.input_span = frames * req.input_size;
	}
	req.elements = n;
	raw = roi_load(argv[i], &len);
	if (raw == NULL || len != req.input_span) {
		fprintf(stderr, "roi_dump: %s: not %llu bytes\n", argv[i],
		        (unsigned long long)req.input_span);
		goto out;
	}
	if (fprep_tensor_shape(&req, shape, &bytes) != FPREP_OK ||
	    (tensor = malloc(bytes)) == NULL ||
	    (xfs = calloc(n, sizeof(*xfs))) == NULL) {
		fprintf(stderr, "roi_dump: bad request or out of memory\n");
		goto out;
	}
	rc = fprep_preprocess_elements_cpu(&req, el, raw, tensor, bytes, xfs);
	if (rc != FPREP_OK) {
		fprintf(stderr, "roi_dump: %s\n", fprep_strerror(rc));
		rc = 1;
		goto out;
	}
	descr = req.dtype == FPREP_DTYPE_U8 ? "|u1" : "<f4";
	if (fprep_npy_write(argv[i + 1], descr, shape, 4, tensor, bytes) != 0) {
		perror(argv[i + 1]);
		rc = 1;
		goto out;
	}
	for (uint32_t k = 0; k < n; k++)
		printf("%u resized=%ux%u pad=%u,%u scale=%.9g,%.9g "
		       "origin=%.9g,%.9g\n",
		       k, xfs[k].resized_w, xfs[k].resized_h, xfs[k].pad_x,
		       xfs[k].pad_y, (double)xfs[k].scale_x,
		       (double)xfs[k].scale_y, (double)xfs[k].origin_x,
		       (double)xfs[k].origin_y);
out:
	free(raw);
	free(tensor);
	free(xfs);
	return rc;
}
