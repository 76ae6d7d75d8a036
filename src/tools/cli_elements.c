/*
 * cli_elements.c: the frameprep CLI's `crops` and `batch` commands, which
 * send one ROIS or one BATCH request (fprep_client_elements) and print
 * the (N, C, H, W) tensor's shape and each element's transform, and can
 * save the tensor as .npy.
 *
 *   frameprep crops IMAGE --boxes BOXES.json [options]
 *   frameprep batch IMAGE... [options]
 *
 * BOXES.json is a JSON array (parsed with Jansson, Debian's libjansson)
 * whose items are [x, y, w, h] (a box, source pixels), {"box": [x, y, w,
 * h], "resize": "letterbox"|"stretch"} (a box with its own resize), or
 * {"affine": [m00, m01, m02, m10, m11, m12]} (source <- tensor, as
 * cv2.warpAffine with WARP_INVERSE_MAP). The images of a batch must have
 * one size. Exit status as the other commands: 0 ok, 1 refused by the
 * daemon or its limits, 2 usage, 3 transport or file error.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <frameprep/frameprep.h>
#include <jansson.h>
#include <stb/stb_image.h>

#include "cli_elements.h"
#include "npy.h"
#include "tool_options.h"

enum { EL_EXIT_SERVER = 1, EL_EXIT_USAGE = 2, EL_EXIT_IO = 3 };

enum {
	EL_OPT_BOXES = TOOL_OPT_END,
};

static const struct option el_options[] = {
        TOOL_PREPROCESS_OPTIONS,
        {"socket", required_argument, NULL, TOOL_OPT_SOCKET},
        {"timeout", required_argument, NULL, TOOL_OPT_TIMEOUT},
        {"boxes", required_argument, NULL, EL_OPT_BOXES},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

/* el_spec: what the user asked for. */
struct el_spec {
	struct tool_preprocess pre;
	struct tool_connect conn;
	const char *boxes;
	int crops; /* the command is crops (else batch) */
};

static void el_usage(FILE *f, const char *cmd)
{
	if (strcmp(cmd, "crops") == 0)
		fprintf(f, "usage: frameprep crops IMAGE --boxes BOXES.json "
		           "[options]\n"
		           "  one request: the boxes (or affine maps) of "
		           "IMAGE, into one (N, C, H, W) tensor\n"
		           "  BOXES.json: [[x, y, w, h], {\"box\": [x, y, w, "
		           "h], \"resize\": \"stretch\"},\n"
		           "               {\"affine\": [m00, m01, m02, m10, "
		           "m11, m12]}, ...]\n");
	else
		fprintf(f, "usage: frameprep batch IMAGE... [options]\n"
		           "  one request: the images (one size), each "
		           "letterboxed, into one (N, C, H, W) tensor\n");
	fprintf(f, "\noptions (default in brackets):\n"
	           "  --socket URL      daemon URL (as frameprep send)\n"
	           "  --timeout MS      bounds the connect and the request "
	           "[30000]\n"
	           "  -o, --output FILE save the tensor as .npy [not "
	           "saved]\n");
	tool_preprocess_usage(f, 2, 20);
	fprintf(f, "  -h, --help        this text\n");
}

/* el_own applies --boxes, the one option of crops and batch's own. */
static int el_own(void *arg, int opt, const char *value)
{
	struct el_spec *spec = arg;

	if (opt != EL_OPT_BOXES)
		return 1;
	spec->boxes = value;
	return spec->crops ? 0 : -1;
}

/* el_numbers reads an array of exactly n numbers into v. */
static int el_numbers(const json_t *a, float *v, size_t n)
{
	if (!json_is_array(a) || json_array_size(a) != n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const json_t *x = json_array_get(a, i);

		if (!json_is_number(x))
			return -1;
		v[i] = (float)json_number_value(x);
	}
	return 0;
}

/* el_item reads one item of BOXES.json into *el. */
static int el_item(const json_t *it, fprep_element *el)
{
	const json_t *box, *resize;

	memset(el, 0, sizeof(*el));
	el->type = FPREP_ELEM_BOX;
	if (json_is_array(it))
		return el_numbers(it, el->v, 4);
	if (!json_is_object(it))
		return -1;
	if (json_object_get(it, "affine") != NULL) {
		el->type = FPREP_ELEM_AFFINE;
		return el_numbers(json_object_get(it, "affine"), el->v, 6);
	}
	box = json_object_get(it, "box");
	resize = json_object_get(it, "resize");
	if (resize != NULL) {
		el->resize = json_is_string(resize)
		                     ? (uint8_t)tool_lookup(
		                               TOOL_RESIZE,
		                               json_string_value(resize))
		                     : 0;
		if (el->resize == 0)
			return -1;
	}
	return el_numbers(box, el->v, 4);
}

/* el_load_boxes reads BOXES.json; returns the elements (free them) and
 * their count in *n, or NULL after printing why. */
static fprep_element *el_load_boxes(const char *path, uint32_t *n)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	fprep_element *els = NULL;
	size_t i, count;

	if (root == NULL) {
		fprintf(stderr, "frameprep crops: %s:%d: %s\n", path, jerr.line,
		        jerr.text);
		return NULL;
	}
	count = json_is_array(root) ? json_array_size(root) : 0;
	if (count == 0 || count > FPREP_ELEMENTS_MAX) {
		fprintf(stderr,
		        "frameprep crops: %s: a JSON array of 1 to %d boxes "
		        "expected\n",
		        path, FPREP_ELEMENTS_MAX);
		goto out;
	}
	els = calloc(count, sizeof(*els));
	if (els == NULL)
		goto out;
	for (i = 0; i < count; i++)
		if (el_item(json_array_get(root, i), &els[i]) != 0) {
			fprintf(stderr,
			        "frameprep crops: %s: item %zu is not [x, y, "
			        "w, "
			        "h], {\"box\": [x, y, w, h], \"resize\": ...} "
			        "or {\"affine\": [6 numbers]}\n",
			        path, i);
			free(els);
			els = NULL;
			goto out;
		}
	*n = (uint32_t)count;
out:
	json_decref(root);
	return els;
}

/* el_image: one decoded image (RGB8, or GRAY8 when it has one channel or
 * the tensor is GRAY). */
struct el_image {
	uint8_t *pixels;
	uint32_t width, height;
	uint16_t format;
};

static int el_load(const char *path, const struct el_spec *spec,
                   struct el_image *img)
{
	int w, h, comp, want;

	if (!stbi_info(path, &w, &h, &comp)) {
		fprintf(stderr, "frameprep: %s: %s\n", path,
		        stbi_failure_reason());
		return -1;
	}
	want = comp <= 2 || spec->pre.order == FPREP_ORDER_GRAY ? 1 : 3;
	img->pixels = stbi_load(path, &w, &h, &comp, want);
	if (img->pixels == NULL) {
		fprintf(stderr, "frameprep: %s: %s\n", path,
		        stbi_failure_reason());
		return -1;
	}
	img->width = (uint32_t)w;
	img->height = (uint32_t)h;
	img->format = want == 1 ? FPREP_PIX_GRAY8 : FPREP_PIX_RGB8;
	return 0;
}

/* el_print prints the reply and saves its tensor; returns the exit
 * status. */
static int el_print(const fprep_result *res, const char *out)
{
	const fprep_reply_header *h = &res->header;
	fprep_element_xf xf;

	if (h->status != FPREP_OK) {
		printf("status    %s (%s): %s\n",
		       fprep_err_name((int)h->status),
		       fprep_strerror((int)h->status), h->message);
		return EL_EXIT_SERVER;
	}
	printf("tensor    (%u, %u, %u, %u) %s, %" PRIu64 " bytes\n",
	       h->shape[0], h->shape[1], h->shape[2], h->shape[3],
	       tool_name(TOOL_DTYPE, h->dtype), h->tensor_size);
	printf("time      %u us total, %u us compute\n", h->t_total_us,
	       h->t_compute_us);
	for (uint32_t k = 0; k < h->shape[0]; k++) {
		if (fprep_result_element_xf(res, k, &xf) != FPREP_OK)
			return EL_EXIT_IO;
		if (xf.scale_x == 0.0f) {
			printf("element %u  affine\n", k);
			continue;
		}
		printf("element %u  origin %g,%g resized %ux%u pad %u,%u "
		       "scale %.6g,%.6g\n",
		       k, (double)xf.origin_x, (double)xf.origin_y,
		       xf.resized_w, xf.resized_h, xf.pad_x, xf.pad_y,
		       (double)xf.scale_x, (double)xf.scale_y);
	}
	if (out == NULL)
		return 0;
	if (fprep_npy_write(out, fprep_dtype_typestr(h->dtype), h->shape, 4,
	                    res->payload, (size_t)h->tensor_size) != 0) {
		perror(out);
		return EL_EXIT_IO;
	}
	printf("wrote     %s\n", out);
	return 0;
}

/* el_send sends the request and prints its reply; returns the exit
 * status. */
static int el_send(const struct el_spec *spec, fprep_request *req,
                   const fprep_element *els, uint32_t n, const void *payload)
{
	fprep_client *c;
	fprep_result res;
	int err, ret;

	err = fprep_client_open(&c, spec->conn.url, spec->conn.timeout_ms);
	if (err) {
		fprintf(stderr, "frameprep: %s: %s\n", fprep_err_name(err),
		        fprep_client_last_error(NULL));
		return EL_EXIT_IO;
	}
	tool_preprocess_apply(&spec->pre, req);
	err = fprep_client_elements(c, req, els, n, payload, &res);
	if (err) {
		fprintf(stderr, "frameprep: %s: %s\n", fprep_err_name(err),
		        fprep_client_last_error(c));
		fprep_client_close(c);
		return err == FPREP_EINVAL || err == FPREP_ELIMIT
		               ? EL_EXIT_SERVER
		               : EL_EXIT_IO;
	}
	ret = el_print(&res, spec->conn.out);
	fprep_result_fini(&res);
	fprep_client_close(c);
	return ret;
}

static int el_crops(const struct el_spec *spec, const char *path)
{
	struct el_image img;
	fprep_element *els;
	fprep_request req;
	uint32_t n = 0;
	int ret;

	if (spec->boxes == NULL) {
		fprintf(stderr, "frameprep crops: --boxes BOXES.json is "
		                "required\n");
		return EL_EXIT_USAGE;
	}
	els = el_load_boxes(spec->boxes, &n);
	if (els == NULL)
		return EL_EXIT_USAGE;
	if (el_load(path, spec, &img) != 0) {
		free(els);
		return EL_EXIT_IO;
	}
	fprep_request_init(&req, img.format, img.width, img.height);
	req.kind = FPREP_KIND_ROIS;
	printf("sent      ROIS: %u elements of %s (%ux%u)\n", n, path,
	       img.width, img.height);
	ret = el_send(spec, &req, els, n, img.pixels);
	stbi_image_free(img.pixels);
	free(els);
	return ret;
}

static int el_batch(const struct el_spec *spec, char **paths, uint32_t n)
{
	fprep_element *els = calloc(n, sizeof(*els));
	struct el_image img;
	fprep_request req;
	uint8_t *frames = NULL;
	uint64_t size = 0;
	int ret = EL_EXIT_IO;

	for (uint32_t k = 0; els != NULL && k < n; k++) {
		if (el_load(paths[k], spec, &img) != 0)
			goto out;
		if (k == 0) {
			fprep_request_init(&req, img.format, img.width,
			                   img.height);
			size = req.input_size;
			frames = malloc(size * n);
		} else if (img.width != req.src_width ||
		           img.height != req.src_height ||
		           img.format != req.src_format) {
			fprintf(stderr,
			        "frameprep batch: %s is %ux%u, not %ux%u as "
			        "%s\n",
			        paths[k], img.width, img.height, req.src_width,
			        req.src_height, paths[0]);
			stbi_image_free(img.pixels);
			ret = EL_EXIT_USAGE;
			goto out;
		}
		if (frames != NULL)
			memcpy(frames + size * k, img.pixels, size);
		stbi_image_free(img.pixels);
		els[k].type = FPREP_ELEM_FRAME;
		els[k].offset = size * k;
	}
	if (els == NULL || frames == NULL) {
		fprintf(stderr, "frameprep batch: out of memory\n");
		goto out;
	}
	req.kind = FPREP_KIND_BATCH;
	printf("sent      BATCH: %u frames of %ux%u\n", n, req.src_width,
	       req.src_height);
	ret = el_send(spec, &req, els, n, frames);
out:
	free(frames);
	free(els);
	return ret;
}

int tool_elements_main(const char *cmd, int argc, char **argv)
{
	struct el_spec spec;
	int first;

	memset(&spec, 0, sizeof(spec));
	spec.crops = strcmp(cmd, "crops") == 0;
	first = tool_cli_parse(cmd, argc, argv, el_options, &spec.conn,
	                       &spec.pre, el_own, &spec);
	if (first == -2) {
		el_usage(stdout, cmd);
		return 0;
	}
	if (first < 0 || first >= argc ||
	    (strcmp(cmd, "crops") == 0 && argc - first != 1) ||
	    argc - first > FPREP_ELEMENTS_MAX) {
		el_usage(stderr, cmd);
		return EL_EXIT_USAGE;
	}
	if (strcmp(cmd, "crops") == 0)
		return el_crops(&spec, argv[first]);
	return el_batch(&spec, argv + first, (uint32_t)(argc - first));
}
