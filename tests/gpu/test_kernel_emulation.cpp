/*
 * test_kernel_emulation.cpp: the GPU kernels' source (kernels/letterbox.cu)
 * compiled as host C++ (kernel_host.h stands in for CUDA) and run thread by
 * thread against the CPU reference, fprep_preprocess_cpu, so the kernels'
 * logic is checked on machines without a GPU. Every source format (YUV with
 * every matrix and range, padded planes and rows), dtype, channel order,
 * layout and resize mode on seeded random frames, in both roundings (the
 * float mode and exact mode, rounding OPENCV, upscaled too); built without
 * fused multiply-adds, the two must agree bit for bit. On a GPU NVRTC
 * contracts, and test_gpu_backend compares the float mode with a tolerance
 * instead (exact mode rounds every step, and must agree there too).
 *
 * Also the row plan (src/backend/row_plan.h), on which a staged transfer
 * copies only the frame rows the kernel reads: for scales whole and not,
 * letterboxed and stretched, every row the plan leaves out is overwritten
 * with other bytes and the kernel must still give the reference's tensor
 * of the intact frame, bit for bit; and the plans of whole-number scales
 * must leave rows out (1/3 of 1080 rows read for 640x640).
 */
#include "kernel_host.h"

#include "letterbox.cu"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "frameprep/frameprep.h"
#include "row_plan.h"
#include "yuv.h"
}

typedef void (*emu_kernel)(fprep_letterbox_args);

/* By rounding, source family and dtype - 1. */
static const emu_kernel emu_kernels[2][4][3] = {
        {{fprep_letterbox_f32, fprep_letterbox_f16, fprep_letterbox_u8},
         {fprep_letterbox_nv12_f32, fprep_letterbox_nv12_f16,
          fprep_letterbox_nv12_u8},
         {fprep_letterbox_i420_f32, fprep_letterbox_i420_f16,
          fprep_letterbox_i420_u8},
         {fprep_letterbox_yuyv_f32, fprep_letterbox_yuyv_f16,
          fprep_letterbox_yuyv_u8}},
        {{fprep_letterbox_exact_f32, fprep_letterbox_exact_f16,
          fprep_letterbox_exact_u8},
         {fprep_letterbox_nv12_exact_f32, fprep_letterbox_nv12_exact_f16,
          fprep_letterbox_nv12_exact_u8},
         {fprep_letterbox_i420_exact_f32, fprep_letterbox_i420_exact_f16,
          fprep_letterbox_i420_exact_u8},
         {fprep_letterbox_yuyv_exact_f32, fprep_letterbox_yuyv_exact_f16,
          fprep_letterbox_yuyv_exact_u8}},
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
			emu_kernels[rq->rounding][family][rq->dtype - 1](a);
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
		       "layout %u resize %u rounding %u %ux%u -> %ux%u\n",
		       rq->src_format, rq->yuv_matrix, rq->yuv_range, rq->dtype,
		       rq->channel_order, rq->layout, rq->resize, rq->rounding,
		       rq->src_width, rq->src_height, rq->out_width,
		       rq->out_height);
	free(frame);
	free(cpu);
	free(emu);
	return bad;
}

/* emu_rows_case runs a w x h frame of format fmt to out_w x out_h (resize
 * mode rs) on the kernel with the rows its plan leaves out overwritten,
 * against the reference of the intact frame. Sets *rows to the rows the
 * plan copies. Returns 1 when they differ. */
static int emu_rows_case(uint16_t fmt, uint32_t w, uint32_t h, uint32_t out_w,
                         uint32_t out_h, uint8_t rs, uint8_t rounding,
                         uint32_t *rows)
{
	fprep_request rq;
	fprep_transform xf;
	fprep__row_plan plan;
	uint32_t shape[4];
	uint64_t bytes;
	int bad;

	uint32_t bpp = fmt == FPREP_PIX_GRAY8   ? 1
	               : fmt == FPREP_PIX_BGRA8 ? 4
	               : fmt == FPREP_PIX_YUYV  ? 2
	                                        : 3;
	int planar = fmt == FPREP_PIX_NV12 || fmt == FPREP_PIX_I420;
	fprep__row_plan chroma;

	emu_layout(&rq, fmt, w, h);
	/* The last row as short as allowed: the plan's copies must stop at
	 * input_size (planar frames end with their chroma planes). */
	if (!planar)
		rq.input_size = (uint64_t)rq.src_stride * (h - 1) + w * bpp;
	rq.out_width = out_w;
	rq.out_height = out_h;
	rq.resize = rs;
	rq.rounding = rounding;
	rq.dtype = FPREP_DTYPE_F32;
	if (fprep_tensor_shape(&rq, shape, &bytes) != 0)
		return 1;
	fprep_transform_compute(&rq, &xf);
	fprep__row_plan_build(&plan, h, xf.resized_h, 0);
	fprep__row_plan_build(&chroma, h, xf.resized_h, 1);
	*rows = plan.rows;

	uint8_t *frame = (uint8_t *)malloc(rq.input_size);
	uint8_t *poisoned = (uint8_t *)malloc(rq.input_size);
	uint8_t *cpu = (uint8_t *)malloc(bytes),
	        *emu = (uint8_t *)malloc(bytes);
	if (frame == NULL || poisoned == NULL || cpu == NULL || emu == NULL)
		return 1;
	for (uint64_t i = 0; i < rq.input_size; i++)
		frame[i] = emu_byte();
	/* What the lane copies (cuda_slot.c, slot_planes): the rows each
	 * plane's plan lists, or the whole frame when neither plan is
	 * selective; every other byte is overwritten. */
	uint8_t *copied = (uint8_t *)calloc(rq.input_size, 1);
	if (copied == NULL)
		return 1;
	struct {
		uint64_t base, stride;
		uint32_t rows;
		const fprep__row_plan *plan;
	} pl[3] = {{0, rq.src_stride, h, &plan},
	           {rq.u_offset, rq.uv_stride, chroma.plane_h, &chroma},
	           {rq.v_offset, rq.uv_stride, chroma.plane_h, &chroma}};
	unsigned np = !planar ? 1 : fmt == FPREP_PIX_NV12 ? 2 : 3;
	if (plan.ngroups == 0 && (!planar || chroma.ngroups == 0))
		memset(copied, 1, rq.input_size);
	for (unsigned k = 0; k < np; k++)
		for (uint32_t y = 0; y < pl[k].rows; y++) {
			if (!fprep__row_plan_has(pl[k].plan, y))
				continue;
			uint64_t lo = pl[k].base + pl[k].stride * y;
			for (uint64_t i = lo;
			     i < lo + pl[k].stride && i < rq.input_size; i++)
				copied[i] = 1;
		}
	for (uint64_t i = 0; i < rq.input_size; i++)
		poisoned[i] = copied[i] ? frame[i] : (uint8_t)(frame[i] ^ 0x5a);
	free(copied);
	bad = fprep_preprocess_cpu(&rq, frame, cpu, bytes, &xf) != 0;
	if (!bad) {
		memset(emu, 0xff, bytes);
		emu_run(&rq, &xf, poisoned, emu);
		bad = memcmp(cpu, emu, bytes) != 0;
	}
	if (bad)
		printf("FAIL: row plan, format %u resize %u rounding %u %ux%u "
		       "-> %ux%u (%u of %u rows, %u groups)\n",
		       fmt, rs, rounding, w, h, out_w, out_h, plan.rows, h,
		       plan.ngroups);
	free(frame);
	free(poisoned);
	free(cpu);
	free(emu);
	return bad;
}

/* emu_copies checks that the copies of plan for rows [y0, y1) move each
 * row of the plan in that range once and no other row, and that no copy
 * of several runs holds the frame's last row. Returns 1 when not. */
static int emu_copies(const fprep__row_plan *plan, uint32_t y0, uint32_t y1)
{
	fprep__row_copy c[FPREP__ROW_COPIES_MAX];
	unsigned n = fprep__row_plan_copies(plan, y0, y1, c);
	uint8_t *seen = (uint8_t *)calloc(plan->plane_h, 1);
	int bad = seen == NULL;

	for (unsigned i = 0; i < n && !bad; i++)
		for (uint32_t k = 0; k < c[i].count; k++)
			for (uint32_t j = 0; j < c[i].len; j++) {
				uint32_t y = c[i].first + k * c[i].pitch + j;

				if (y >= plan->plane_h || seen[y]++ ||
				    (c[i].count > 1 && y == plan->plane_h - 1))
					bad = 1;
			}
	for (uint32_t y = 0; y < plan->plane_h && !bad; y++)
		if (seen[y] !=
		    (y >= y0 && y < y1 && fprep__row_plan_has(plan, y)))
			bad = 1;
	if (bad)
		printf("FAIL: row copies of %u -> %u rows, range [%u, %u)\n",
		       plan->src_h, plan->resized_h, y0, y1);
	free(seen);
	return bad;
}

/* emu_rows checks the row plan on many geometries; returns the failures. */
static int emu_rows(void)
{
	static const uint32_t geo[][4] = {
	        {192, 108, 64, 64},   /* 1080p -> 640x640, scale 3 */
	        {384, 216, 64, 64},   /* 4K -> 640x640, scale 6 */
	        {384, 216, 128, 128}, /* 4K -> 1280x1280, scale 3 */
	        {160, 96, 40, 40},    /* scale 4 */
	        {200, 100, 100, 50},  /* scale 2: every row */
	        {250, 150, 100, 100}, /* scale 2.5 */
	        {190, 107, 64, 64},   /* odd sizes */
	        {128, 300, 64, 64},   /* tall: width-bound */
	        {64, 48, 160, 120},   /* upscale */
	        {333, 77, 50, 50},    /* scale 6.66 */
	        {96, 720, 32, 96},    /* scale 7.5 */
	};
	static const uint16_t fmts[] = {FPREP_PIX_BGR8,  FPREP_PIX_GRAY8,
	                                FPREP_PIX_BGRA8, FPREP_PIX_NV12,
	                                FPREP_PIX_I420,  FPREP_PIX_YUYV};
	int bad = 0, n = 0;
	uint32_t rows;

	for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++)
		for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
			for (uint8_t rs = FPREP_RESIZE_LETTERBOX;
			     rs <= FPREP_RESIZE_STRETCH; rs++) {
				if (fmts[f] >= FPREP_PIX_NV12 &&
				    (geo[g][0] % 2 != 0 || geo[g][1] % 2 != 0))
					continue; /* YUV: even sizes */
				for (uint8_t rd = FPREP_ROUNDING_FLOAT;
				     rd <= FPREP_ROUNDING_OPENCV; rd++) {
					bad += emu_rows_case(
					        fmts[f], geo[g][0], geo[g][1],
					        geo[g][2], geo[g][3], rs, rd,
					        &rows);
					n++;
				}
			}
	/* The copies of every selective plan of frames up to 300 rows (and
	 * of their chroma rows), whole and in bands cut anywhere. */
	int nc = 0, ncbad = 0;
	for (uint32_t h = 2; h <= 300; h++)
		for (uint32_t rh = 1; rh <= h; rh += 1 + rh / 8)
			for (unsigned shift = 0; shift <= 1; shift++) {
				fprep__row_plan plan;
				uint32_t ph;

				fprep__row_plan_build(&plan, h, rh, shift);
				if (plan.ngroups == 0)
					continue;
				ph = plan.plane_h;
				ncbad += emu_copies(&plan, 0, ph);
				for (uint32_t cut = 1; cut < ph;
				     cut += 1 + ph / 13)
					ncbad += emu_copies(&plan, 0, cut) +
					         emu_copies(&plan, cut, ph) +
					         emu_copies(&plan, cut / 2,
					                    cut + 3);
				nc++;
			}
	printf("%d selective plans: their copies move every row read once, "
	       "no other%s\n",
	       nc, ncbad ? ": FAILED" : "");
	bad += ncbad;
	/* Whole-number scales read a fraction of the rows. */
	emu_rows_case(FPREP_PIX_BGR8, 192, 108, 64, 64, FPREP_RESIZE_LETTERBOX,
	              FPREP_ROUNDING_FLOAT, &rows);
	if (rows != 36) {
		printf("FAIL: 108 rows to 36 read %u rows, not 36\n", rows);
		bad++;
	}
	emu_rows_case(FPREP_PIX_BGR8, 384, 216, 64, 64, FPREP_RESIZE_LETTERBOX,
	              FPREP_ROUNDING_FLOAT, &rows);
	if (rows != 72) {
		printf("FAIL: 216 rows to 36 read %u rows, not 72\n", rows);
		bad++;
	}
	fprep__row_plan ch;
	fprep__row_plan_build(&ch, 1080, 360, 1);
	if (ch.ngroups == 0 || ch.rows != 360) {
		printf("FAIL: 1080p NV12 to 640x360 reads %u of 540 chroma "
		       "rows (%u groups), not 360\n",
		       ch.rows, ch.ngroups);
		bad++;
	}
	printf("%d cases: the row plan leaves out only rows the kernels never "
	       "read%s\n",
	       n, bad ? ": FAILED" : "");
	return bad;
}

int main(void)
{
	int n = 0, bad = 0;

	/* Exact mode (rounding 1) also on small frames, letterboxed up (rows
	 * above the first source row's centre keep their fraction) and with a
	 * padding value that rounds. */
	for (uint8_t rd = FPREP_ROUNDING_FLOAT; rd <= FPREP_ROUNDING_OPENCV;
	     rd++)
		for (uint16_t fmt = FPREP_PIX_BGR8; fmt <= FPREP_PIX_YUYV;
		     fmt++)
			for (int v = 0; v < (rd ? 36 : 24); v++) {
				fprep_request rq;
				uint32_t w = 98 + 2 * (v % 5),
				         h = 62 - 2 * (v % 3);

				if (v >= 24)
					w = 22 + 2 * (v % 3),
					h = 14 + 2 * (v % 2);
				emu_layout(&rq, fmt, w, h);
				rq.rounding = rd;
				if (rd && v % 4 == 1)
					rq.pad_value = 100.5f;
				rq.yuv_matrix = (uint8_t)(v % 4);
				rq.yuv_range = (uint8_t)(v / 4 % 2 + 1);
				rq.dtype = (uint8_t)(v % 3 + 1);
				rq.channel_order =
				        fmt == FPREP_PIX_GRAY8 && v % 2
				                ? (uint8_t)FPREP_ORDER_GRAY
				                : (uint8_t)(v / 2 % 2 + 1);
				rq.layout = (uint8_t)(v / 6 % 2 + 1);
				rq.resize = (uint8_t)(v / 12 % 2 + 1);
				rq.out_width = v % 2 ? 77 : 160;
				rq.out_height = v % 2 ? 91 : 33;
				if (rq.dtype != FPREP_DTYPE_U8 && v % 5 == 0) {
					rq.mean[0] = 0.485f,
					rq.mean[1] = 0.456f;
					rq.mean[2] = 0.406f, rq.std[0] = 0.229f;
					rq.std[1] = 0.224f, rq.std[2] = 0.225f;
				}
				bad += emu_case(&rq);
				n++;
			}
	printf("%d cases: kernels (host build) and CPU reference %s\n", n,
	       bad ? "differ" : "agree bit for bit");
	bad += emu_rows();
	return bad != 0;
}
