/*
 * test_gpu_backend.c: the GPU lane against the CPU reference
 * (fprep_preprocess_cpu) on real photographs, plus the lane's promises: no
 * allocation in steady state, H2D of one frame overlapping the D2H of the
 * one before, ECHO and bad jobs answered, a clean close with jobs in
 * flight, and random frames of which the lane copies only the rows the
 * resize reads (check_rows). Usage: test_gpu_backend IMAGE_DIR [MAX_IMAGES].
 * Exits 77 without a GPU. The equality cases run once more in each transfer
 * mode that FPREP_TRANSFER names (comma-separated staged, mapped, auto; default
 * "mapped"), with the lane's trace on: stage times in order; in mapped
 * mode also a frame and tensor in a mapped pinned "region".
 *
 * Tolerances. F32: one source LSB after normalisation, scale / std[c]
 * (1/255 with the YOLO convention). The GPU evaluates the same formula in
 * float32, but NVRTC contracts a*b+c into fused multiply-adds and the
 * interpolation may group its products differently, so the two backends
 * can round differently; a reference that works in OpenCV's fixed point
 * differs by up to about half an LSB, and an integer pixel rounding
 * boundary by one. F16: the F32 tolerance plus one float16 ulp of the
 * value (both sides round the float32 result to nearest even, so their
 * float32 difference can move the result by one ulp). U8: 1 (a pixel that
 * lands on .5 may round either way). YUV sources (NV12, I420, YUYV, every
 * matrix and range, padded planes) take the same bounds: both backends
 * convert each pixel to the same RGB8 value (no fused multiply-add in that
 * step), then resize as for RGB8.
 *
 * Exact mode (rounding OPENCV): no tolerance. The GPU's tensor must equal
 * the CPU's in every bit, every format, dtype, layout and transfer mode,
 * and for frames of which only the rows read are copied (exact_cases,
 * check_rows' odd frames).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <stb_image.h>
#include <turbojpeg.h>

#include "check.h"
#include "gpu/backend_cuda.h"
#include "lane_util.h"

#define MAX_IMAGES 8

static const char *const fmt_names[] = {
        "", "BGR8", "RGB8", "BGRA8", "RGBA8", "GRAY8", "NV12", "I420", "YUYV"};
static const char *const dtype_names[] = {"", "f32", "f16", "u8"};

/* With trace on, check_case checks each job's device stage times. */
static int trace_on;

/* Largest difference seen, by pixel format and dtype (f32/f16 in tensor
 * units, u8 in LSB), float mode; exact-mode cases and the elements of
 * theirs that differed. */
static double max_diff[9][4];
static int exact_cases_run;
static long exact_elements_off;

static float f16_to_f32(uint16_t h)
{
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float v;
	if (e == 0)
		v = ldexpf((float)m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float)(m | 0x400), (int)e - 25);
	return (h & 0x8000) ? -v : v;
}

static float f16_ulp(float v)
{
	int e;
	v = fabsf(v);
	if (v < ldexpf(1.0f, -14))
		return ldexpf(1.0f, -24);
	frexpf(v, &e); /* v = f * 2^e, f in [0.5, 1) */
	return ldexpf(1.0f, e - 11);
}

static int load_images(const char *dir, lane_image *ims)
{
	static const char *const names[] = {
	        "astronaut.png",         "coffee.png",
	        "chelsea.png",           "rocket.jpg",
	        "motorcycle_left.png",   "camera.png",
	        "hubble_deep_field.jpg",
	};
	int n = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char path[1024];
		int c;
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		uint8_t *px = stbi_load(path, &ims[n].w, &ims[n].h, &c, 3);
		if (px == NULL)
			continue;
		snprintf(ims[n].name, sizeof ims[n].name, "%s", names[i]);
		ims[n].rgb = px;
		n++;
	}
	return n;
}

/* run_one submits one job and waits for it. */
static void run_one(fprep__backend *b, lane_waiter *w, lane_job *lj)
{
	unsigned target = lane_count(w) + 1;
	CHECK(b->submit(b, &lj->job) == 0, "submit refused");
	lane_wait(w, target);
}

/* compare checks the GPU tensor against the CPU one; returns the largest
 * difference (in the units of the dtype) or -1 on a violation. */
static double compare(const fprep_request *rq, const void *gpu, const void *cpu,
                      uint64_t bytes, int *bad)
{
	double worst = 0;
	unsigned nch = rq->channel_order == FPREP_ORDER_GRAY ? 1 : 3;
	unsigned esize = rq->dtype == FPREP_DTYPE_F32   ? 4
	                 : rq->dtype == FPREP_DTYPE_F16 ? 2
	                                                : 1;
	uint64_t n = bytes / esize;
	int exact = rq->rounding == FPREP_ROUNDING_OPENCV;

	*bad = 0;
	for (uint64_t i = 0; i < n; i++) {
		unsigned c = rq->layout == FPREP_LAYOUT_NCHW
		                     ? (unsigned)(i / ((uint64_t)rq->out_width *
		                                       rq->out_height))
		                     : (unsigned)(i % nch);
		double tol = rq->scale / rq->std[c] * 1.0001, d;
		if (rq->dtype == FPREP_DTYPE_F32) {
			float g = ((const float *)gpu)[i];
			float r = ((const float *)cpu)[i];
			d = fabs((double)g - r);
		} else if (rq->dtype == FPREP_DTYPE_F16) {
			float g = f16_to_f32(((const uint16_t *)gpu)[i]);
			float r = f16_to_f32(((const uint16_t *)cpu)[i]);
			d = fabs((double)g - r);
			tol += f16_ulp(r);
		} else {
			d = abs((int)((const uint8_t *)gpu)[i] -
			        (int)((const uint8_t *)cpu)[i]);
			tol = 1;
		}
		/* Exact mode: the same bits (NaN, an unwritten element,
		 * fails the float mode's test). */
		if (exact ? memcmp((const uint8_t *)gpu + i * esize,
		                   (const uint8_t *)cpu + i * esize, esize) != 0
		          : !(d <= tol)) {
			if (*bad < 3)
				printf("  element %llu: diff %g > %g\n",
				       (unsigned long long)i, d,
				       exact ? 0.0 : tol);
			(*bad)++;
		}
		if (d > worst)
			worst = d;
	}
	return worst;
}

typedef struct case_spec {
	uint16_t fmt;
	uint8_t order, dtype, layout, resize;
	uint32_t out_w, out_h;
	int imagenet; /* ImageNet mean/std instead of the YOLO defaults */
	uint32_t extra_stride;
	uint8_t matrix, range; /* YUV sources */
	uint8_t rounding;      /* enum fprep_rounding */
} case_spec;

/* yuv_frame_make makes a YUV frame of format fmt from im (cropped to even
 * sizes) and sets rq's source fields: BT.601-like integer luma and chroma
 * from each block's first pixel, rows padded by extra bytes and chroma
 * planes placed after gaps, every padding byte filled, so a kernel that
 * reads outside the planes shows. Returns a malloc'ed buffer. */
static uint8_t *yuv_frame_make(const lane_image *im, uint16_t fmt,
                               uint32_t extra, fprep_request *rq)
{
	uint32_t w = (uint32_t)im->w & ~1u, h = (uint32_t)im->h;
	uint32_t crow, ch, x, y;
	uint64_t size;
	uint8_t *f;

	if (fmt != FPREP_PIX_YUYV)
		h &= ~1u;
	rq->src_format = fmt;
	rq->src_width = w;
	rq->src_height = h;
	rq->src_stride = w * fprep_pixel_bytes(fmt) + extra;
	crow = fmt == FPREP_PIX_NV12 ? w : w / 2;
	ch = h / 2;
	rq->uv_stride = (uint16_t)(fmt == FPREP_PIX_YUYV ? 0 : crow + extra);
	rq->u_offset = fmt == FPREP_PIX_YUYV
	                       ? 0
	                       : rq->src_stride * (h + 8) + 3 * extra;
	rq->v_offset = fmt == FPREP_PIX_I420
	                       ? rq->u_offset + rq->uv_stride * ch + 64
	                       : 0;
	size = fmt == FPREP_PIX_YUYV ? (uint64_t)rq->src_stride * h
	                             : (uint64_t)(rq->v_offset ? rq->v_offset
	                                                       : rq->u_offset) +
	                                       (uint64_t)rq->uv_stride * ch;
	rq->input_size = size;
	f = malloc(size);
	if (f == NULL)
		return NULL;
	for (uint64_t i = 0; i < size; i++)
		f[i] = (uint8_t)(0xc3 ^ i);
	for (y = 0; y < h; y++)
		for (x = 0; x < w; x++) {
			const uint8_t *p =
			        im->rgb + ((size_t)y * im->w + (x & ~1u)) * 3;
			const uint8_t *q =
			        im->rgb + ((size_t)y * im->w + x) * 3;
			int yy = (66 * q[0] + 129 * q[1] + 25 * q[2] + 4224) >>
			         8;
			int u = (-38 * p[0] - 74 * p[1] + 112 * p[2] + 32896) >>
			        8;
			int v = (112 * p[0] - 94 * p[1] - 18 * p[2] + 32896) >>
			        8;
			uint8_t *row = f + (size_t)y * rq->src_stride;
			size_t c = (size_t)(y / 2) * rq->uv_stride;

			if (fmt == FPREP_PIX_YUYV) {
				row[2 * x] = (uint8_t)yy;
				row[4 * (x / 2) + 1] = (uint8_t)u;
				row[4 * (x / 2) + 3] = (uint8_t)v;
				continue;
			}
			row[x] = (uint8_t)yy;
			if (y % 2 != 0 || x % 2 != 0)
				continue;
			if (fmt == FPREP_PIX_NV12) {
				f[rq->u_offset + c + x] = (uint8_t)u;
				f[rq->u_offset + c + x + 1] = (uint8_t)v;
			} else {
				f[rq->u_offset + c + x / 2] = (uint8_t)u;
				f[rq->v_offset + c + x / 2] = (uint8_t)v;
			}
		}
	return f;
}

/* check_case runs one request on both backends and compares. */
static void check_case(fprep__backend *b, lane_waiter *w, const lane_image *im,
                       const case_spec *cs)
{
	static const float mean[3] = {0.485f, 0.456f, 0.406f};
	static const float sd[3] = {0.229f, 0.224f, 0.225f};
	fprep_request rq;
	uint32_t shape[4];
	uint64_t bytes = 0;
	fprep_transform xf;
	lane_job lj;
	int bad = 0;

	fprep_request_init(&rq, cs->fmt, (uint32_t)im->w, (uint32_t)im->h);
	uint8_t *frame =
	        cs->fmt >= FPREP_PIX_NV12
	                ? yuv_frame_make(im, cs->fmt, cs->extra_stride, &rq)
	                : lane_frame_make(im, cs->fmt, cs->extra_stride,
	                                  &rq.src_stride, &rq.input_size);
	rq.yuv_matrix = cs->matrix;
	rq.yuv_range = cs->range;
	rq.channel_order = cs->order;
	rq.dtype = cs->dtype;
	rq.layout = cs->layout;
	rq.resize = cs->resize;
	rq.rounding = cs->rounding;
	rq.out_width = cs->out_w;
	rq.out_height = cs->out_h;
	if (cs->imagenet && cs->dtype != FPREP_DTYPE_U8) {
		memcpy(rq.mean, mean, sizeof mean);
		memcpy(rq.std, sd, sizeof sd);
	}
	CHECK(fprep_tensor_shape(&rq, shape, &bytes) == 0, "tensor shape");
	uint8_t *cpu = malloc(bytes), *gpu = malloc(bytes);
	CHECK(frame && cpu && gpu, "out of memory");
	CHECK(fprep_preprocess_cpu(&rq, frame, cpu, bytes, &xf) == 0,
	      "CPU reference refused the request");
	memset(gpu, 0xff, bytes); /* NaN: unwritten elements show */
	lane_job_init(&lj, w, &rq, frame, gpu, bytes);
	lj.job.trace = trace_on;
	run_one(b, w, &lj);
	CHECK(lj.calls == 1, "done called %u times", lj.calls);
	if (trace_on && lj.job.status == FPREP_OK) {
		uint64_t prev = lj.job.t_start_ns;
		for (int i = 0; i < FPREP__STAGE_COUNT; i++) {
			CHECK(lj.job.t_stage_ns[i] >= prev,
			      "trace: stage %d at %llu before %llu", i,
			      (unsigned long long)lj.job.t_stage_ns[i],
			      (unsigned long long)prev);
			prev = lj.job.t_stage_ns[i];
		}
		CHECK(prev <= lj.job.t_end_ns, "trace: d2h ends after done");
	}
	CHECK(lj.job.status == FPREP_OK, "%s: status %d: %s", im->name,
	      lj.job.status, lj.job.message);
	CHECK(memcmp(&lj.job.xf, &xf, sizeof xf) == 0,
	      "transform differs from the CPU's");
	if (lj.job.status == FPREP_OK) {
		double d = compare(&rq, gpu, cpu, bytes, &bad);
		CHECK(bad == 0,
		      "%s %s (matrix %u range %u) %s->%s %s %s %ux%u%s: %d "
		      "elements off (max %g)",
		      im->name, fmt_names[cs->fmt], cs->matrix, cs->range,
		      cs->order == FPREP_ORDER_RGB   ? "RGB"
		      : cs->order == FPREP_ORDER_BGR ? "BGR"
		                                     : "GRAY",
		      dtype_names[cs->dtype],
		      cs->layout == FPREP_LAYOUT_NCHW ? "NCHW" : "NHWC",
		      cs->resize == FPREP_RESIZE_LETTERBOX ? "letterbox"
		                                           : "stretch",
		      cs->out_w, cs->out_h, cs->rounding ? " exact" : "", bad,
		      d);
		if (cs->rounding) {
			exact_cases_run++;
			exact_elements_off += bad;
		} else if (d > max_diff[cs->fmt][cs->dtype]) {
			max_diff[cs->fmt][cs->dtype] = d;
		}
	}
	free(frame);
	free(cpu);
	free(gpu);
}

/* all_cases runs every format x dtype x layout x resize on every image;
 * returns the number of cases. */
static int all_cases(fprep__backend *b, lane_waiter *w, const lane_image *ims,
                     int nims)
{
	int n = 0;
	for (int i = 0; i < nims; i++)
		for (uint16_t fmt = FPREP_PIX_BGR8; fmt <= FPREP_PIX_YUYV;
		     fmt++)
			for (uint8_t dt = FPREP_DTYPE_F32; dt <= FPREP_DTYPE_U8;
			     dt++)
				for (int v = 0; v < 4; v++) {
					case_spec cs = {
					        .fmt = fmt,
					        .dtype = dt,
					        .layout =
					                v & 1 ? FPREP_LAYOUT_NHWC
					                      : FPREP_LAYOUT_NCHW,
					        .resize =
					                v & 2 ? FPREP_RESIZE_STRETCH
					                      : FPREP_RESIZE_LETTERBOX,
					        .out_w = v & 2 ? 416 : 640,
					        .out_h = v & 2 ? 256 : 640,
					        .imagenet = (i + v) & 1,
					        .extra_stride =
					                (uint32_t)(v * 5),
					        .matrix =
					                (uint8_t)((i + v) % 4),
					        .range =
					                (uint8_t)((v >> 1) + 1),
					};
					if (fmt == FPREP_PIX_GRAY8)
						cs.order =
						        v & 1 ? FPREP_ORDER_GRAY
						              : FPREP_ORDER_RGB;
					else
						cs.order =
						        (i + v) & 1
						                ? FPREP_ORDER_BGR
						                : FPREP_ORDER_RGB;
					check_case(b, w, &ims[i], &cs);
					n++;
				}
	return n;
}

/* Overlap: stamps of a burst, recorded by the probe. */
#define BURST 48
static fprep__cuda_stamps burst_stamps[BURST];

static void burst_probe(void *arg, const fprep__job *job,
                        const fprep__cuda_stamps *s)
{
	(void)arg;
	size_t k = (size_t)(uintptr_t)((const lane_job *)job)->job.data;
	if (k < BURST)
		burst_stamps[k] = *s;
}

/* scale_image scales im to w x h (nearest), so large frames carry the
 * bytes of a real photograph. */
static lane_image scale_image(const lane_image *im, int w, int h)
{
	lane_image big = {.w = w, .h = h};
	snprintf(big.name, sizeof big.name, "%.40s@%dx%d", im->name, w, h);
	big.rgb = malloc((size_t)w * h * 3);
	for (int y = 0; big.rgb && y < h; y++)
		for (int x = 0; x < w; x++)
			memcpy(big.rgb + ((size_t)y * w + x) * 3,
			       im->rgb + ((size_t)(y * im->h / h) * im->w +
			                  (size_t)(x * im->w / w)) *
			                         3,
			       3);
	return big;
}

/* exact_cases runs exact mode (rounding OPENCV) on every image in every
 * format and dtype, letterboxed to 640x640 (NCHW, ImageNet normalisation
 * on every other image) and stretched to 416x256 (NHWC), and the first
 * image scaled to 1920x1080, 1280x720 (down) and 320x240 (up) into
 * 640x640 in BGR8 and NV12; returns the number of cases. */
static int exact_cases(fprep__backend *b, lane_waiter *w, const lane_image *ims,
                       int nims)
{
	static const int sizes[][2] = {{1920, 1080}, {1280, 720}, {320, 240}};
	int n = 0;

	/* Image i, format, dtype, and v: letterbox NCHW or stretch NHWC. */
	for (int k = 0; k < nims * 8 * 3 * 2; k++) {
		int i = k / 48, v = k % 2;
		uint16_t fmt = (uint16_t)(FPREP_PIX_BGR8 + k / 6 % 8);
		uint8_t order = fmt == FPREP_PIX_GRAY8 && v ? FPREP_ORDER_GRAY
		                : (i + v) & 1               ? FPREP_ORDER_BGR
		                                            : FPREP_ORDER_RGB;
		case_spec cs = {.fmt = fmt,
		                .order = order,
		                .dtype = (uint8_t)(FPREP_DTYPE_F32 + k / 2 % 3),
		                .layout = v ? FPREP_LAYOUT_NHWC
		                            : FPREP_LAYOUT_NCHW,
		                .resize = v ? FPREP_RESIZE_STRETCH
		                            : FPREP_RESIZE_LETTERBOX,
		                .out_w = v ? 416 : 640,
		                .out_h = v ? 256 : 640,
		                .imagenet = i & 1,
		                .extra_stride = (uint32_t)(3 * v),
		                .matrix = (uint8_t)(i % 4),
		                .range = (uint8_t)(v + 1),
		                .rounding = FPREP_ROUNDING_OPENCV};
		check_case(b, w, &ims[i], &cs);
		n++;
	}
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		lane_image im = scale_image(&ims[0], sizes[k][0], sizes[k][1]);

		for (uint8_t dt = FPREP_DTYPE_F32; dt <= FPREP_DTYPE_U8; dt++)
			for (int yuv = 0; yuv < 2; yuv++) {
				case_spec cs = {
				        .fmt = yuv ? FPREP_PIX_NV12
				                   : FPREP_PIX_BGR8,
				        .order = FPREP_ORDER_RGB,
				        .dtype = dt,
				        .layout = FPREP_LAYOUT_NCHW,
				        .resize = FPREP_RESIZE_LETTERBOX,
				        .out_w = 640,
				        .out_h = 640,
				        .rounding = FPREP_ROUNDING_OPENCV};
				check_case(b, w, &im, &cs);
				n++;
			}
		free(im.rgb);
	}
	return n;
}

/* check_burst queues BURST 1080p frames at once. pinned: input and output
 * in page-locked memory (the shared-memory path: no host copies), where
 * frame k+1's H2D must start before frame k's D2H ends; otherwise the
 * inline path, whose overlap is only reported (its host copies can take
 * longer than the GPU's work). Every tensor must equal the CPU's. */
static void check_burst(fprep__backend *b, lane_waiter *w, const lane_image *im,
                        uint16_t fmt, int pinned)
{
	static lane_job jobs[BURST];
	fprep_request rq;
	uint32_t shape[4];
	uint64_t bytes;
	uint8_t *frame, *out, *cpu;
	int overlaps = 0, bad = 0;

	fprep_request_init(&rq, fmt, (uint32_t)im->w, (uint32_t)im->h);
	frame = fmt >= FPREP_PIX_NV12
	                ? yuv_frame_make(im, fmt, 0, &rq)
	                : lane_frame_make(im, fmt, 0, &rq.src_stride,
	                                  &rq.input_size);
	fprep_tensor_shape(&rq, shape, &bytes);
	cpu = malloc(bytes);
	CHECK(frame && cpu, "out of memory");
	CHECK(fprep_preprocess_cpu(&rq, frame, cpu, bytes, NULL) == 0, "cpu");
	if (pinned) {
		uint8_t *pf = NULL;
		CHECK(cudaMallocHost((void **)&pf, rq.input_size) ==
		                      cudaSuccess &&
		              cudaMallocHost((void **)&out, bytes * BURST) ==
		                      cudaSuccess,
		      "cudaMallocHost");
		memcpy(pf, frame, rq.input_size);
		free(frame);
		frame = pf;
	} else {
		out = malloc(bytes * BURST);
	}
	fprep__backend_cuda_set_probe(b, burst_probe, NULL);
	unsigned target = lane_count(w) + BURST;
	for (int k = 0; k < BURST; k++) {
		lane_job_init(&jobs[k], w, &rq, frame, out + bytes * k, bytes);
		jobs[k].job.input_pinned = pinned;
		jobs[k].job.output_pinned = pinned;
		jobs[k].job.data = (void *)(uintptr_t)k;
		CHECK(b->submit(b, &jobs[k].job) == 0, "submit");
	}
	lane_wait(w, target);
	fprep__backend_cuda_set_probe(b, NULL, NULL);
	for (int k = 0; k < BURST; k++)
		CHECK(jobs[k].job.status == FPREP_OK, "burst job %d: %s", k,
		      jobs[k].job.message);
	for (int k = 0; k + 1 < BURST; k++)
		if (burst_stamps[k + 1].h2d_start < burst_stamps[k].d2h_end)
			overlaps++;
	const fprep__cuda_stamps *m = &burst_stamps[BURST / 2];
	double t0 = m->h2d_start;
	double span =
	        burst_stamps[BURST - 1].d2h_end - burst_stamps[0].h2d_start;
	printf("burst %s %s, %llu bytes a frame: frame k+1's H2D began before "
	       "frame k's D2H ended in "
	       "%d of %d pairs; %.0f frames/s on the device timeline\n"
	       "  frame %d: H2D 0-%.1f us, kernel %.1f-%.1f, D2H %.1f-%.1f; "
	       "frame %d: H2D from %.1f\n",
	       fmt_names[fmt], pinned ? "pinned in+out (shm path)" : "inline",
	       (unsigned long long)rq.input_size, overlaps, BURST - 1,
	       (BURST - 1) / span * 1e6, BURST / 2, m->h2d_end - t0,
	       m->kernel_start - t0, m->kernel_end - t0, m->d2h_start - t0,
	       m->d2h_end - t0, BURST / 2 + 1,
	       burst_stamps[BURST / 2 + 1].h2d_start - t0);
	if (pinned)
		CHECK(overlaps >= (BURST - 1) / 2, "too little overlap: %d",
		      overlaps);
	for (int k = 0; k < BURST; k++) {
		compare(&rq, out + bytes * k, cpu, bytes, &bad);
		CHECK(bad == 0, "burst frame %d differs from the CPU", k);
	}
	if (pinned) {
		cudaFreeHost(frame);
		cudaFreeHost(out);
	} else {
		free(frame);
		free(out);
	}
	free(cpu);
}

/* check_rows runs frames whose resize reads a fraction of their rows, of
 * which a staged lane copies only those (row_plan.h): 1080p and 4K to
 * 640x640 and 4K to 1280x1280 (every third row), 1280x960 stretched to
 * 320x240 (half), in BGR8, BGRA8 and GRAY8, and 1080p and 4K NV12, I420
 * and YUYV (luma and chroma rows). The frames are random, each unlike the
 * last, so a row the kernel read but the lane did not copy (the previous
 * frame's, left in a slot) would show against the CPU reference: RUNS
 * frames one at a time (a staged lane bands interleaved ones), then, for
 * interleaved frames, RUNS at once (no bands, the slots busy). Returns
 * the number of frames. */
static int check_rows(fprep__backend *b, lane_waiter *w)
{
	enum { RUNS = 6 };
	static const struct {
		int w, h;
		uint16_t fmt;
		uint32_t ow, oh;
		uint8_t resize;
	} g[] = {
	        {1920, 1080, FPREP_PIX_BGR8, 640, 640, FPREP_RESIZE_LETTERBOX},
	        {3840, 2160, FPREP_PIX_BGR8, 640, 640, FPREP_RESIZE_LETTERBOX},
	        {3840, 2160, FPREP_PIX_BGRA8, 1280, 1280,
	         FPREP_RESIZE_LETTERBOX},
	        {1280, 960, FPREP_PIX_GRAY8, 320, 240, FPREP_RESIZE_STRETCH},
	        {1920, 1080, FPREP_PIX_NV12, 640, 640, FPREP_RESIZE_LETTERBOX},
	        {3840, 2160, FPREP_PIX_I420, 640, 640, FPREP_RESIZE_LETTERBOX},
	        {1920, 1080, FPREP_PIX_YUYV, 640, 640, FPREP_RESIZE_LETTERBOX},
	};
	static lane_job jobs[RUNS];
	uint32_t seed = 12345;
	int n = 0;

	for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
		uint8_t *frames[RUNS], *outs[RUNS], *cpus[RUNS];
		fprep_request rqs[RUNS];
		uint64_t bytes = 0;

		int yuv = g[i].fmt >= FPREP_PIX_NV12;

		for (int k = 0; k < (yuv ? RUNS : 2 * RUNS); k++) {
			lane_image im = {.w = g[i].w, .h = g[i].h};
			size_t npx = (size_t)im.w * im.h * 3;
			fprep_request *rq = &rqs[k % RUNS];
			uint32_t shape[4];

			snprintf(im.name, sizeof im.name, "random %dx%d #%d",
			         im.w, im.h, k);
			im.rgb = malloc(npx);
			CHECK(im.rgb != NULL, "out of memory");
			for (size_t j = 0; im.rgb && j < npx; j++) {
				seed = seed * 1664525u + 1013904223u;
				im.rgb[j] = (uint8_t)(seed >> 24);
			}
			if (k < RUNS) { /* one at a time */
				case_spec cs = {
				        .fmt = g[i].fmt,
				        .order = g[i].fmt == FPREP_PIX_GRAY8
				                         ? FPREP_ORDER_GRAY
				                         : FPREP_ORDER_RGB,
				        .dtype = FPREP_DTYPE_F32,
				        .layout = FPREP_LAYOUT_NCHW,
				        .resize = g[i].resize,
				        .out_w = g[i].ow,
				        .out_h = g[i].oh,
				        .extra_stride = (uint32_t)(4 * k),
				        .matrix = (uint8_t)(k % 4),
				        .range = (uint8_t)(k % 2 + 1),
				        .rounding = (uint8_t)(k % 2)};
				check_case(b, w, &im, &cs);
				free(im.rgb);
				n++;
				continue;
			}
			fprep_request_init(rq, g[i].fmt, (uint32_t)im.w,
			                   (uint32_t)im.h);
			frames[k - RUNS] = lane_frame_make(&im, g[i].fmt, 0,
			                                   &rq->src_stride,
			                                   &rq->input_size);
			free(im.rgb);
			rq->channel_order = g[i].fmt == FPREP_PIX_GRAY8
			                            ? FPREP_ORDER_GRAY
			                            : FPREP_ORDER_RGB;
			rq->resize = g[i].resize;
			rq->rounding = (uint8_t)(k % 2);
			rq->out_width = g[i].ow;
			rq->out_height = g[i].oh;
			fprep_tensor_shape(rq, shape, &bytes);
			outs[k - RUNS] = malloc(bytes);
			cpus[k - RUNS] = malloc(bytes);
			CHECK(frames[k - RUNS] && outs[k - RUNS] &&
			              cpus[k - RUNS],
			      "out of memory");
			CHECK(fprep_preprocess_cpu(rq, frames[k - RUNS],
			                           cpus[k - RUNS], bytes,
			                           NULL) == 0,
			      "cpu");
		}
		if (yuv)
			continue;
		/* RUNS at once. */
		unsigned target = lane_count(w) + RUNS;
		for (int k = 0; k < RUNS; k++) {
			lane_job_init(&jobs[k], w, &rqs[k], frames[k], outs[k],
			              bytes);
			CHECK(b->submit(b, &jobs[k].job) == 0, "submit");
		}
		lane_wait(w, target);
		for (int k = 0; k < RUNS; k++) {
			int bad = 0;

			CHECK(jobs[k].job.status == FPREP_OK, "rows job %d: %s",
			      k, jobs[k].job.message);
			compare(&rqs[k], outs[k], cpus[k], bytes, &bad);
			CHECK(bad == 0,
			      "%dx%d -> %ux%u, frame %d of a burst "
			      "differs from the CPU",
			      g[i].w, g[i].h, g[i].ow, g[i].oh, k);
			free(frames[k]);
			free(outs[k]);
			free(cpus[k]);
			n++;
		}
	}
	return n;
}

/* check_mapped_region runs one 1080p frame read from, and its tensor
 * written to, pinned memory standing for a registered region (base, and
 * its device address in mapped), as the daemon hands a lane a job on a
 * shared-memory region; must_map: no copy may run (MAPPED mode). */
static void check_mapped_region(fprep__backend *b, lane_waiter *w,
                                const lane_image *im, int must_map)
{
	fprep_request rq;
	uint32_t shape[4];
	uint64_t bytes = 0;
	uint8_t *frame, *host = NULL, *dev = NULL, *cpu;
	fprep__memreg reg;
	lane_job lj;
	int bad = 0;

	fprep_request_init(&rq, FPREP_PIX_BGR8, (uint32_t)im->w,
	                   (uint32_t)im->h);
	frame = lane_frame_make(im, FPREP_PIX_BGR8, 0, &rq.src_stride,
	                        &rq.input_size);
	CHECK(fprep_tensor_shape(&rq, shape, &bytes) == 0, "tensor shape");
	cpu = malloc(bytes);
	CHECK(frame && cpu, "out of memory");
	CHECK(fprep_preprocess_cpu(&rq, frame, cpu, bytes, NULL) == 0, "cpu");
	size_t in_cap = (rq.input_size + 4095) & ~(size_t)4095;
	CHECK(cudaHostAlloc((void **)&host, in_cap + bytes,
	                    cudaHostAllocMapped | cudaHostAllocPortable) ==
	                      cudaSuccess &&
	              cudaHostGetDevicePointer((void **)&dev, host, 0) ==
	                      cudaSuccess,
	      "mapped pinned memory");
	if (host == NULL || dev == NULL)
		goto out;
	memcpy(host, frame, rq.input_size);
	memset(host + in_cap, 0xff, bytes);
	memset(&reg, 0, sizeof reg);
	reg.kind = FPREP__MEMREG_SHM;
	reg.size = in_cap + bytes;
	reg.base = host;
	reg.pinned = 1;
	reg.mapped = dev;
	lane_job_init(&lj, w, &rq, host, host + in_cap, bytes);
	lj.job.input_pinned = lj.job.output_pinned = 1;
	lj.job.in_region = lj.job.out_region = &reg;
	run_one(b, w, &lj);
	CHECK(lj.job.status == FPREP_OK, "mapped region: %s", lj.job.message);
	compare(&rq, host + in_cap, cpu, bytes, &bad);
	CHECK(bad == 0, "mapped region: %d elements off", bad);
	/* MAPPED never copies; AUTO may stage when it sees another slot of
	 * the lane still held, so only its result is checked. Two events
	 * recorded back to back on a stream are a few microseconds apart; a
	 * copy of the 6.2 MB frame takes over 100 us on any PCIe link. */
	CHECK(!must_map || lj.job.t_h2d_us < 40,
	      "mapped region: %u us between the H2D events (a copy ran?)",
	      lj.job.t_h2d_us);
	printf("mapped region: 1080p BGR8 -> 640x640 f32 kernel %u us, %s\n",
	       lj.job.t_kernel_us, bad ? "DIFFERS" : "equal to the CPU");
out:
	if (host != NULL)
		cudaFreeHost(host);
	free(frame);
	free(cpu);
}

/* check_echo_and_bad: ECHO does no work but computes the transform; a job
 * whose request went bad after it was planned is answered with EINVAL, and
 * INFO is not a job. */
static void check_echo_and_bad(fprep__backend *b, lane_waiter *w,
                               const lane_image *im)
{
	fprep_request rq;
	uint32_t shape[4];
	uint64_t bytes;
	fprep_transform xf;
	lane_job lj;

	fprep_request_init(&rq, FPREP_PIX_RGB8, (uint32_t)im->w,
	                   (uint32_t)im->h);
	fprep_tensor_shape(&rq, shape, &bytes);
	uint8_t *out = malloc(bytes);
	fprep_transform_compute(&rq, &xf);
	rq.kind = FPREP_KIND_ECHO;
	lane_job_init(&lj, w, &rq, im->rgb, out, bytes);
	run_one(b, w, &lj);
	CHECK(lj.calls == 1 && lj.job.status == FPREP_OK, "echo: %s",
	      lj.job.message);
	CHECK(memcmp(&lj.job.xf, &xf, sizeof xf) == 0, "echo transform");

	/* A job whose request went bad after it was planned (the plan is the
	 * loop's; the lane still refuses a dtype it has no kernel for). */
	rq.kind = FPREP_KIND_FRAME;
	lane_job_init(&lj, w, &rq, im->rgb, out, bytes);
	lj.job.req.dtype = 0;
	run_one(b, w, &lj);
	CHECK(lj.calls == 1 && lj.job.status == FPREP_EINVAL,
	      "bad dtype: status %d", lj.job.status);
	CHECK(lj.job.fatal == 0, "a bad dtype is not fatal");

	rq.kind = FPREP_KIND_INFO;
	lane_job_init(&lj, w, &rq, im->rgb, out, bytes);
	CHECK(b->submit(b, &lj.job) == FPREP_EINVAL, "INFO is not a job");
	free(out);
}

/* check_jpeg sends im as a JPEG (libjpeg-turbo, quality 90, 4:2:0) in
 * each channel order: the lane decodes it into its staging slot, and the
 * tensor must equal the CPU reference of libjpeg-turbo's decode within the
 * usual tolerance, with the decoded size and the transform of that frame;
 * a truncated JPEG is refused (EINVAL, not fatal) and the next one still
 * decodes. */
static void check_jpeg(fprep__backend *b, lane_waiter *w, const lane_image *im)
{
	static const fprep_limits lim = {.max_width = 8192,
	                                 .max_height = 8192,
	                                 .max_frame_bytes = 1u << 28,
	                                 .max_out_width = 2048,
	                                 .max_out_height = 2048,
	                                 .max_tensor_bytes = 1u << 28,
	                                 .max_elements = 64,
	                                 .max_batch_bytes = 1u << 30};
	static const uint8_t orders[] = {FPREP_ORDER_RGB, FPREP_ORDER_BGR,
	                                 FPREP_ORDER_GRAY};
	tjhandle tc = tjInitCompress(), td = tjInitDecompress();
	unsigned char *jpg = NULL;
	unsigned long jsize = 0;
	fprep_request rq, raw;
	uint32_t shape[4];
	uint64_t bytes = 0;
	fprep_transform xf;
	lane_job lj;
	int bad = 0;

	CHECK(tc && td &&
	              tjCompress2(tc, im->rgb, im->w, 0, im->h, TJPF_RGB, &jpg,
	                          &jsize, TJSAMP_420, 90, 0) == 0,
	      "JPEG: libjpeg-turbo could not encode %s", im->name);
	for (size_t i = 0; jpg != NULL && i < sizeof orders; i++) {
		fprep_request_init(&rq, FPREP_PIX_JPEG, 0, 0);
		rq.input_size = jsize;
		rq.channel_order = orders[i];
		raw = rq;
		raw.src_format = orders[i] == FPREP_ORDER_GRAY ? FPREP_PIX_GRAY8
		                 : orders[i] == FPREP_ORDER_BGR
		                         ? FPREP_PIX_BGR8
		                         : FPREP_PIX_RGB8;
		raw.src_width = (uint32_t)im->w;
		raw.src_height = (uint32_t)im->h;
		raw.src_stride =
		        raw.src_width * fprep_pixel_bytes(raw.src_format);
		raw.input_size = (uint64_t)raw.src_stride * raw.src_height;
		CHECK(fprep_tensor_shape(&rq, shape, &bytes) == 0, "shape");
		uint8_t *px = malloc(raw.input_size), *cpu = malloc(bytes),
		        *gpu = malloc(bytes);
		CHECK(px && cpu && gpu, "out of memory");
		CHECK(tjDecompress2(
		              td, jpg, jsize, px, im->w, (int)raw.src_stride,
		              im->h,
		              raw.src_format == FPREP_PIX_GRAY8  ? TJPF_GRAY
		              : raw.src_format == FPREP_PIX_BGR8 ? TJPF_BGR
		                                                 : TJPF_RGB,
		              0) == 0,
		      "JPEG: libjpeg-turbo could not decode");
		CHECK(fprep_preprocess_cpu(&raw, px, cpu, bytes, &xf) == 0,
		      "JPEG: CPU reference refused");
		lane_job_init(&lj, w, &rq, jpg, gpu, bytes);
		lj.job.limits = &lim;
		run_one(b, w, &lj);
		CHECK(lj.calls == 1 && lj.job.status == FPREP_OK,
		      "JPEG %s order %u: status %d: %s", im->name, orders[i],
		      lj.job.status, lj.job.message);
		if (lj.job.status == FPREP_OK) {
			CHECK(lj.job.decoded_width == im->w &&
			              lj.job.decoded_height == im->h,
			      "JPEG: decoded %ux%u", lj.job.decoded_width,
			      lj.job.decoded_height);
			CHECK(memcmp(&lj.job.xf, &xf, sizeof xf) == 0,
			      "JPEG: transform differs from the CPU's");
			double d = compare(&raw, gpu, cpu, bytes, &bad);
			CHECK(bad == 0,
			      "JPEG %s order %u: %d elements off "
			      "(max %g)",
			      im->name, orders[i], bad, d);
		}
		/* Truncated: refused, and the lane goes on. */
		rq.input_size = jsize / 2;
		lane_job_init(&lj, w, &rq, jpg, gpu, bytes);
		lj.job.limits = &lim;
		run_one(b, w, &lj);
		CHECK(lj.job.status == FPREP_EINVAL && lj.job.fatal == 0,
		      "truncated JPEG: status %d fatal %d: %s", lj.job.status,
		      lj.job.fatal, lj.job.message);
		free(px);
		free(cpu);
		free(gpu);
	}
	printf("JPEG %s %ux%u (%lu bytes): decoded on the lane, RGB/BGR/GRAY "
	       "%s\n",
	       im->name, im->w, im->h, jsize, bad ? "FAIL" : "equal the CPU's");
	tjFree(jpg);
	tjDestroy(tc);
	tjDestroy(td);
}

/* check_close_in_flight closes a lane with a burst queued: every done runs
 * exactly once, with OK or ESHUTDOWN. */
static void check_close_in_flight(const fprep__cuda_config *cfg,
                                  const lane_image *im, int timeout_ms)
{
	enum { N = 40 };
	static lane_job jobs[N];
	fprep__backend *b = NULL;
	lane_waiter w;
	fprep_request rq;
	uint32_t shape[4];
	uint64_t bytes;
	int ok = 0, shut = 0;

	lane_waiter_init(&w);
	CHECK(fprep__backend_cuda_open(&b, cfg) == 0, "reopen");
	if (b == NULL)
		return;
	fprep_request_init(&rq, FPREP_PIX_BGR8, (uint32_t)im->w,
	                   (uint32_t)im->h);
	uint8_t *frame = lane_frame_make(im, FPREP_PIX_BGR8, 0, &rq.src_stride,
	                                 &rq.input_size);
	fprep_tensor_shape(&rq, shape, &bytes);
	uint8_t *out = malloc(bytes * N);
	for (int k = 0; k < N; k++) {
		lane_job_init(&jobs[k], &w, &rq, frame, out + bytes * k, bytes);
		CHECK(b->submit(b, &jobs[k].job) == 0, "submit");
	}
	b->close(b, timeout_ms);
	for (int k = 0; k < N; k++) {
		CHECK(jobs[k].calls == 1, "job %d: done called %u times", k,
		      jobs[k].calls);
		ok += jobs[k].job.status == FPREP_OK;
		shut += jobs[k].job.status == FPREP_ESHUTDOWN;
	}
	CHECK(ok + shut == N, "close: %d OK + %d ESHUTDOWN of %d", ok, shut, N);
	printf("close(%d ms) with %d jobs queued: %d completed, %d ESHUTDOWN\n",
	       timeout_ms, N, ok, shut);
	free(frame);
	free(out);
}

int main(int argc, char **argv)
{
	lane_image ims[MAX_IMAGES];
	fprep__backend *b = NULL;
	lane_waiter w;
	char cache[] = "/tmp/fprep-gpu-cache-XXXXXX";
	int ndev = fprep__cuda_device_count();

	if (ndev == 0) {
		printf("SKIP: no CUDA device (no driver or no GPU): the GPU "
		       "backend test needs one\n");
		return 77;
	}
	const char *dir = argc > 1 ? argv[1] : getenv("FPREP_IMAGES");
	int nims = dir ? load_images(dir, ims) : 0;
	if (argc > 2 && atoi(argv[2]) > 0 && atoi(argv[2]) < nims)
		nims = atoi(argv[2]);
	if (nims < 2) {
		printf("FAIL: need the test photographs (astronaut.png, ...) "
		       "in "
		       "%s\n",
		       dir ? dir : "(no directory given)");
		return 1;
	}
	if (mkdtemp(cache) == NULL)
		return 1;
	fprep__cuda_config cfg = {.device = 0,
	                          .slots = 3,
	                          .cache_dir = cache,
	                          .cache_enabled = 1};
	lane_waiter_init(&w);
	CHECK(fprep__backend_cuda_open(&b, &cfg) == 0, "open");
	if (b == NULL)
		return 1;
	char info[1024] = "";
	b->info(b, info, sizeof info);
	printf("%s", info);

	/* Pass 1 (warm-up, grows the slots to the largest frame), pass 2
	 * must allocate nothing. */
	int ncases = all_cases(b, &w, ims, nims);
	ncases += exact_cases(b, &w, ims, nims);
	lane_image big = scale_image(&ims[0], 1920, 1080);
	check_burst(b, &w, &big, FPREP_PIX_BGR8, 0);
	check_burst(b, &w, &big, FPREP_PIX_BGR8, 1);
	check_burst(b, &w, &big, FPREP_PIX_NV12, 1);
	/* A frame and tensor larger than the initial staging grow a slot. */
	unsigned long allocs = fprep__cuda_alloc_count();
	lane_image huge = scale_image(&ims[1], 2560, 1600);
	case_spec hc = {.fmt = FPREP_PIX_RGBA8,
	                .order = FPREP_ORDER_RGB,
	                .dtype = FPREP_DTYPE_F32,
	                .layout = FPREP_LAYOUT_NCHW,
	                .resize = FPREP_RESIZE_LETTERBOX,
	                .out_w = 1280,
	                .out_h = 1280};
	check_case(b, &w, &huge, &hc);
	ncases++;
	CHECK(fprep__cuda_alloc_count() > allocs,
	      "a larger frame did not grow the staging slot");
	free(huge.rgb);
	ncases += check_rows(b, &w);
	allocs = fprep__cuda_alloc_count();
	memset(max_diff, 0, sizeof max_diff);
	ncases += all_cases(b, &w, ims, nims);
	ncases += exact_cases(b, &w, ims, nims);
	check_burst(b, &w, &big, FPREP_PIX_BGR8, 0);
	check_burst(b, &w, &big, FPREP_PIX_BGR8, 1);
	check_burst(b, &w, &big, FPREP_PIX_NV12, 1);
	check_echo_and_bad(b, &w, &ims[0]);
	CHECK(fprep__cuda_alloc_count() == allocs,
	      "allocations after warm-up: %lu -> %lu", allocs,
	      fprep__cuda_alloc_count());
	printf("allocations: %lu at warm-up, %lu after %d more requests\n",
	       allocs, fprep__cuda_alloc_count(), ncases / 2 + 3 * BURST + 2);
	check_jpeg(b, &w, &ims[0]);
	b->close(b, 5000);

	/* Warm cache: the second open compiles nothing. */
	check_close_in_flight(&cfg, &big, 5000);
	check_close_in_flight(&cfg, &big, 0);

	/* The equality cases again in each transfer mode asked for. */
	const char *modes = getenv("FPREP_TRANSFER");
	char mlist[64];
	snprintf(mlist, sizeof mlist, "%s", modes ? modes : "mapped");
	for (char *save = NULL, *m = strtok_r(mlist, ",", &save); m != NULL;
	     m = strtok_r(NULL, ",", &save)) {
		fprep__cuda_config mc = cfg;
		mc.transfer = strcmp(m, "mapped") == 0 ? FPREP__CUDA_MAPPED
		              : strcmp(m, "auto") == 0 ? FPREP__CUDA_AUTO
		                                       : FPREP__CUDA_STAGED;
		mc.trace = 1;
		mc.spin_ns = 1000000; /* the daemon's default: threads poll */
		trace_on = 1;
		int before = check_failures;
		CHECK(fprep__backend_cuda_open(&b, &mc) == 0, "open %s", m);
		if (b == NULL)
			break;
		int n = all_cases(b, &w, ims, nims);
		n += exact_cases(b, &w, ims, nims);
		n += check_rows(b, &w);
		ncases += n;
		if (mc.transfer != FPREP__CUDA_STAGED)
			check_mapped_region(b, &w, &big,
			                    mc.transfer == FPREP__CUDA_MAPPED);
		check_burst(b, &w, &big, FPREP_PIX_BGR8, 1);
		b->close(b, 5000);
		trace_on = 0;
		printf("transfer %s: %d cases, %s\n", m, n,
		       check_failures == before ? "PASS" : "FAIL");
	}

	printf("\nlargest |GPU - CPU| by source format and dtype "
	       "(f32/f16: tensor units, u8: LSB), %d images:\n",
	       nims);
	printf("%-6s %10s %10s %6s\n", "format", "f32", "f16", "u8");
	for (int f = FPREP_PIX_BGR8; f <= FPREP_PIX_YUYV; f++)
		printf("%-6s %10.3g %10.3g %6g\n", fmt_names[f],
		       max_diff[f][FPREP_DTYPE_F32],
		       max_diff[f][FPREP_DTYPE_F16],
		       max_diff[f][FPREP_DTYPE_U8]);
	printf("\nexact mode (rounding opencv): %d cases, %ld elements differ "
	       "from the CPU reference (must be 0)\n",
	       exact_cases_run, exact_elements_off);
	printf("\n%d cases, %d checks, %d failed\n", ncases, check_count,
	       check_failures);
	free(big.rgb);
	for (int i = 0; i < nims; i++)
		stbi_image_free(ims[i].rgb);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
	if (system(cmd) != 0)
		printf("could not remove %s\n", cache);
	return check_failures ? 1 : 0;
}
