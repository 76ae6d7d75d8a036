/*
 * bench_elements.c: frameprep-bench's ROIS and BATCH modes. The boxes are
 * a fixed pattern, so runs compare; replies are checked whole against the
 * CPU reference like FRAME replies (bench_input.c).
 */
#include "bench_elements.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* elements_boxes fills n boxes over a w x h frame. */
static void elements_boxes(fprep_element *els, unsigned n, uint32_t w,
                           uint32_t h)
{
	for (unsigned k = 0; k < n; k++) {
		float bw = w / 8.0f + (float)((k * 37) % 97) / 97.0f * w / 5.0f;
		float bh = h / 8.0f + (float)((k * 53) % 89) / 89.0f * h / 5.0f;
		float x = (float)((k * 131) % 101) / 100.0f * (w - bw);
		float y = (float)((k * 71) % 103) / 102.0f * (h - bh);

		if (k % 7 == 3) /* across an edge: padded */
			x = w - bw * 0.5f;
		els[k].type = FPREP_ELEM_BOX;
		els[k].resize = k % 4 == 1 ? FPREP_RESIZE_STRETCH : 0;
		els[k].v[0] = (float)(int)x;
		els[k].v[1] = (float)(int)y;
		els[k].v[2] = (float)(int)bw;
		els[k].v[3] = (float)(int)bh;
	}
}

int bench_elements_setup(bench_input *inputs, size_t n, unsigned rois,
                         unsigned batch)
{
	unsigned count = rois > 0 ? rois : batch;

	for (size_t i = 0; i < n; i++) {
		bench_input *in = &inputs[i];
		uint64_t size = in->req.input_size;

		if (in->req.src_format > FPREP_PIX_GRAY8) {
			fprintf(stderr,
			        "frameprep-bench: --rois and --batch "
			        "take packed formats (bgr8, rgb8, bgra8, "
			        "rgba8, gray8)\n");
			return -1;
		}
		in->els = calloc(count, sizeof(*in->els));
		if (in->els == NULL)
			goto nomem;
		in->req.elements = count;
		if (rois > 0) {
			in->req.kind = FPREP_KIND_ROIS;
			in->req.input_span = size;
			elements_boxes(in->els, count, in->req.src_width,
			               in->req.src_height);
		} else {
			in->req.kind = FPREP_KIND_BATCH;
			in->req.input_span = size * count;
			in->frames = malloc(size * count);
			if (in->frames == NULL)
				goto nomem;
			for (unsigned k = 0; k < count; k++) {
				memcpy(in->frames + size * k, in->pixels, size);
				in->els[k].type = FPREP_ELEM_FRAME;
				in->els[k].offset = size * k;
			}
		}
		if (fprep_tensor_shape(&in->req, in->shape,
		                       &in->tensor_bytes) != FPREP_OK) {
			fprintf(stderr,
			        "frameprep-bench: %s: invalid request\n",
			        in->name);
			return -1;
		}
	}
	return 0;
nomem:
	fprintf(stderr, "frameprep-bench: out of memory for the elements\n");
	return -1;
}

const void *bench_elements_payload(const bench_input *in)
{
	return in->frames != NULL ? in->frames : in->pixels;
}
