/*
 * test_kernel_emulation.cpp: the GPU kernels' source (kernels/letterbox.cu)
 * compiled as host C++ (kernel_host.h stands in for CUDA) and run thread by
 * thread against the CPU reference, fprep_preprocess_cpu, so the kernels'
 * logic is checked on machines without a GPU. Every source format (YUV with
 * every matrix and range, padded planes and rows), dtype, channel order,
 * layout and resize mode on seeded random frames; built without fused
 * multiply-adds, the two must agree bit for bit. On a GPU NVRTC contracts,
 * and test_gpu_backend compares with a tolerance instead.
 */
#include "kernel_host.h"

#include "letterbox.cu"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "frameprep/frameprep.h"
#include "yuv.h"
}

typedef void (*emu_kernel)(fprep_letterbox_args);

static const emu_kernel emu_kernels[4][3] = {
        {fprep_letterbox_f32, fprep_letterbox_f16, fprep_letterbox_u8},
        {fprep_letterbox_nv12_f32, fprep_letterbox_nv12_f16,
         fprep_letterbox_nv12_u8},
        {fprep_letterbox_i420_f32, fprep_letterbox_i420_f16,
         fprep_letterbox_i420_u8},
        {fprep_letterbox_yuyv_f32, fprep_letterbox_yuyv_f16,
         fprep_letterbox_yuyv_u8},
};

static uint64_t emu_seed = 1;

static uint8_t emu_byte(void)
{
	emu_seed = emu_seed * 6364136223846793005ull + 1442695040888963407ull;
	return (uint8_t)(emu_seed >> 56);
}

/* emu_layout gives rq (a w x h frame of format fmt) padded rows and, for
 * NV12 and I420, chroma planes after gaps. */
static void emu_layout(fprep_request *rq, uint16_t fmt, uint32_t w, uint32_t h)
{
	fprep_request_init(rq, fmt, w, h);
	rq->src_stride += 7;
	rq->input_size = (uint64_t)rq->src_stride * h;
	if (fmt != FPREP_PIX_NV12 && fmt != FPREP_PIX_I420)
		return;
	rq->uv_stride = (uint16_t)(rq->uv_stride + 3);
	rq->u_offset = rq->src_stride * (h + 2);
	rq->v_offset = fmt == FPREP_PIX_I420
	                       ? rq->u_offset + rq->uv_stride * (h / 2) + 5
	                       : 0;
	rq->input_size =
	        (uint64_t)(rq->v_offset ? rq->v_offset : rq->u_offset) +
	        (uint64_t)rq->uv_stride * (h / 2);
}

/* emu_run runs the kernel of rq on frame into out, every thread. */
static void emu_run(const fprep_request *rq, const fprep_transform *xf,
                    const uint8_t *frame, void *out)
{
	fprep_letterbox_args a;
	fprep__yuv_coefs k;
	int family = rq->src_format >= FPREP_PIX_NV12
	                     ? rq->src_format - FPREP_PIX_GRAY8
	                     : 0;

	memset(&a, 0, sizeof a);
	a.src = frame;
	a.dst = out;
	a.src_w = rq->src_width;
	a.src_h = rq->src_height;
	a.src_stride = rq->src_stride;
	a.src_format = rq->src_format;
	a.out_w = rq->out_width;
	a.out_h = rq->out_height;
	a.resized_w = xf->resized_w;
	a.resized_h = xf->resized_h;
	a.pad_x = xf->pad_x;
	a.pad_y = xf->pad_y;
	a.channel_order = rq->channel_order;
	a.layout = rq->layout;
	a.pad_value = rq->pad_value;
	a.scale = rq->scale;
	memcpy(a.mean, rq->mean, sizeof a.mean);
	memcpy(a.std, rq->std, sizeof a.std);
	if (family != 0 &&
	    fprep__yuv_coefs_get(rq->yuv_matrix, rq->yuv_range, &k) == 0) {
		memcpy(a.yuv, &k, sizeof a.yuv);
		a.uv_stride = rq->uv_stride;
		a.u_offset = rq->u_offset;
		a.v_offset = rq->v_offset;
	}
	for (unsigned int y = 0; y < a.out_h; y++)
		for (unsigned int x = 0; x < a.out_w; x++) {
			blockIdx.x = x;
			blockIdx.y = y;
			emu_kernels[family][rq->dtype - 1](a);
		}
}

/* emu_case compares one request on both sides; returns 1 when they
 * differ. */
static int emu_case(fprep_request *rq)
{
	uint32_t shape[4];
	uint64_t bytes;
	fprep_transform xf;
	uint8_t *frame, *cpu, *emu;
	int bad;

	if (fprep_tensor_shape(rq, shape, &bytes) != 0)
		return 1;
	frame = (uint8_t *)malloc(rq->input_size);
	cpu = (uint8_t *)malloc(bytes);
	emu = (uint8_t *)malloc(bytes);
	if (frame == NULL || cpu == NULL || emu == NULL)
		return 1;
	for (uint64_t i = 0; i < rq->input_size; i++)
		frame[i] = emu_byte();
	memset(emu, 0xff, bytes);
	bad = fprep_preprocess_cpu(rq, frame, cpu, bytes, &xf) != 0;
	if (!bad) {
		emu_run(rq, &xf, frame, emu);
		bad = memcmp(cpu, emu, bytes) != 0;
	}
	if (bad)
		printf("FAIL: format %u matrix %u range %u dtype %u order %u "
		       "layout %u resize %u %ux%u -> %ux%u\n",
		       rq->src_format, rq->yuv_matrix, rq->yuv_range, rq->dtype,
		       rq->channel_order, rq->layout, rq->resize, rq->src_width,
		       rq->src_height, rq->out_width, rq->out_height);
	free(frame);
	free(cpu);
	free(emu);
	return bad;
}

int main(void)
{
	int n = 0, bad = 0;

	for (uint16_t fmt = FPREP_PIX_BGR8; fmt <= FPREP_PIX_YUYV; fmt++)
		for (int v = 0; v < 24; v++) {
			fprep_request rq;
			uint32_t w = 98 + 2 * (v % 5), h = 62 - 2 * (v % 3);

			emu_layout(&rq, fmt, w, h);
			rq.yuv_matrix = (uint8_t)(v % 4);
			rq.yuv_range = (uint8_t)(v / 4 % 2 + 1);
			rq.dtype = (uint8_t)(v % 3 + 1);
			rq.channel_order = fmt == FPREP_PIX_GRAY8 && v % 2
			                           ? (uint8_t)FPREP_ORDER_GRAY
			                           : (uint8_t)(v / 2 % 2 + 1);
			rq.layout = (uint8_t)(v / 6 % 2 + 1);
			rq.resize = (uint8_t)(v / 12 + 1);
			rq.out_width = v % 2 ? 77 : 160;
			rq.out_height = v % 2 ? 91 : 33;
			if (rq.dtype != FPREP_DTYPE_U8 && v % 5 == 0) {
				rq.mean[0] = 0.485f, rq.mean[1] = 0.456f;
				rq.mean[2] = 0.406f, rq.std[0] = 0.229f;
				rq.std[1] = 0.224f, rq.std[2] = 0.225f;
			}
			bad += emu_case(&rq);
			n++;
		}
	printf("%d cases: kernels (host build) and CPU reference %s\n", n,
	       bad ? "differ" : "agree bit for bit");
	return bad != 0;
}
