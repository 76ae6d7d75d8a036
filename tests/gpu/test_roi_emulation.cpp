/*
 * test_roi_emulation.cpp: the ROI kernels (kernels/roi.cu) compiled as host
 * C++ (kernel_host.h stands in for CUDA) and run thread by thread, element
 * by element, against the CPU reference fprep_preprocess_elements_cpu, so
 * that the kernels' logic is checked where there is no GPU. ROIS (boxes
 * inside, across the edges, outside, fractional, per-box stretch; affine
 * maps) and BATCH (frames at offsets with gaps), every packed format,
 * dtype, channel order and layout, on seeded random frames; built without
 * fused multiply-adds, the two must agree bit for bit. On a GPU NVRTC
 * contracts: test_roi_gpu compares with a tolerance there.
 */
#include "kernel_host.h"

#include "roi.cu"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "frameprep/frameprep.h"
#include "ops.h"
}

static uint64_t emu_seed = 27;

static uint8_t emu_byte(void)
{
	emu_seed = emu_seed * 6364136223846793005ull + 1442695040888963407ull;
	return (uint8_t)(emu_seed >> 56);
}

typedef void (*emu_kernel)(fprep_roi_args);
static const emu_kernel emu_kernels[3] = {fprep_roi_f32, fprep_roi_f16,
                                          fprep_roi_u8};

/* emu_run runs the kernel of rq's n elements on input into out. */
static void emu_run(const fprep_request *rq, const fprep_element *els,
                    unsigned n, const uint8_t *input, void *out)
{
	fprep_roi_elem *e = (fprep_roi_elem *)calloc(n, sizeof(*e));
	fprep_roi_args a;

	for (unsigned k = 0; k < n; k++)
		fprep__roi_plan(rq, &els[k], &e[k]);
	fprep__roi_args(rq, &a);
	a.src = input;
	a.dst = out;
	a.elems = e;
	for (unsigned k = 0; k < n; k++)
		for (unsigned y = 0; y < rq->out_height; y++)
			for (unsigned x = 0; x < rq->out_width; x++) {
				blockIdx.x = x;
				blockIdx.y = y;
				blockIdx.z = k;
				emu_kernels[rq->dtype - 1](a);
			}
	free(e);
}

static int emu_fail;

/* emu_case compares the kernel with the reference for one request. */
static void emu_case(fprep_request *rq, const fprep_element *els, unsigned n,
                     const uint8_t *input, const char *what)
{
	uint32_t shape[4];
	uint64_t bytes;

	rq->elements = n;
	if (fprep_tensor_shape(rq, shape, &bytes) != FPREP_OK) {
		printf("FAIL %s: no shape\n", what);
		emu_fail++;
		return;
	}
	uint8_t *want = (uint8_t *)malloc(bytes);
	uint8_t *got = (uint8_t *)malloc(bytes);
	memset(got, 0xa5, bytes);
	int rc = fprep_preprocess_elements_cpu(rq, els, input, want, bytes,
	                                       NULL);
	emu_run(rq, els, n, input, got);
	if (rc != FPREP_OK || memcmp(want, got, bytes) != 0) {
		uint64_t i = 0;
		while (rc == FPREP_OK && i < bytes && want[i] == got[i])
			i++;
		printf("FAIL %s: rc %d, first difference at byte %llu\n", what,
		       rc, (unsigned long long)i);
		emu_fail++;
	}
	free(want);
	free(got);
}

int main(void)
{
	static const uint16_t formats[] = {FPREP_PIX_BGR8, FPREP_PIX_RGB8,
	                                   FPREP_PIX_BGRA8, FPREP_PIX_RGBA8,
	                                   FPREP_PIX_GRAY8};
	const unsigned w = 67, h = 45, nframes = 3;
	fprep_element rois[7] = {
	        {FPREP_ELEM_BOX, 0, {3, 4, 40, 30, 0, 0}, 0},
	        {FPREP_ELEM_BOX,
	         FPREP_RESIZE_STRETCH,
	         {-10, -5, 30, 20, 0, 0},
	         0},
	        {FPREP_ELEM_BOX, 0, {50.5f, 30.25f, 30.75f, 22.5f, 0, 0}, 0},
	        {FPREP_ELEM_BOX, 0, {100, 100, 8, 8, 0, 0}, 0},
	        {FPREP_ELEM_BOX, 0, {6, 7, 1, 1, 0, 0}, 0},
	        {FPREP_ELEM_AFFINE, 0, {0.8f, -0.6f, 30, 0.6f, 0.8f, -4}, 0},
	        {FPREP_ELEM_AFFINE, 0, {-1.3f, 0.1f, 70, 0.2f, 1.7f, 3}, 0},
	};
	fprep_element frames[3];
	unsigned cases = 0;

	for (unsigned f = 0; f < 5; f++) {
		fprep_request rq;
		uint8_t *input;

		fprep_request_init(&rq, formats[f], w, h);
		rq.src_stride += 5; /* padded rows */
		rq.input_size = (uint64_t)rq.src_stride * h;
		/* BATCH: frames with a gap between them. */
		uint64_t span = (rq.input_size + 100) * nframes;
		input = (uint8_t *)malloc(span);
		for (uint64_t i = 0; i < span; i++)
			input[i] = emu_byte();
		for (unsigned k = 0; k < nframes; k++) {
			memset(&frames[k], 0, sizeof frames[k]);
			frames[k].type = FPREP_ELEM_FRAME;
			frames[k].offset =
			        (rq.input_size + 100) * (nframes - 1 - k);
		}
		for (int dt = FPREP_DTYPE_F32; dt <= FPREP_DTYPE_U8; dt++)
			for (int order = FPREP_ORDER_RGB;
			     order <= FPREP_ORDER_GRAY; order++)
				for (int lay = FPREP_LAYOUT_NCHW;
				     lay <= FPREP_LAYOUT_NHWC; lay++) {
					char what[128];

					if (order == FPREP_ORDER_GRAY &&
					    formats[f] != FPREP_PIX_GRAY8)
						continue;
					rq.dtype = (uint8_t)dt;
					rq.channel_order = (uint8_t)order;
					rq.layout = (uint8_t)lay;
					rq.out_width = 23;
					rq.out_height = 17;
					if (dt != FPREP_DTYPE_U8) {
						rq.mean[0] = 0.1f;
						rq.std[2] = 0.7f;
					} else {
						rq.mean[0] = 0.0f;
						rq.std[2] = 1.0f;
					}
					rq.pad_value = 114.0f;
					rq.kind = FPREP_KIND_ROIS;
					rq.input_span = rq.input_size;
					snprintf(what, sizeof what,
					         "ROIS format %u dtype %d "
					         "order %d "
					         "layout %d",
					         formats[f], dt, order, lay);
					emu_case(&rq, rois, 7, input, what);
					rq.kind = FPREP_KIND_BATCH;
					rq.resize = FPREP_RESIZE_STRETCH;
					rq.input_span = span;
					snprintf(what, sizeof what,
					         "BATCH format %u dtype %d "
					         "order %d "
					         "layout %d",
					         formats[f], dt, order, lay);
					emu_case(&rq, frames, nframes, input,
					         what);
					rq.resize = FPREP_RESIZE_LETTERBOX;
					cases += 2;
				}
		free(input);
	}
	printf("%u cases (7 ROIs or 3 frames each), %d failed\n", cases,
	       emu_fail);
	return emu_fail != 0;
}
