/*
 * test_roi_gpu: ROIS and BATCH jobs on a GPU lane against the CPU
 * reference (fprep_preprocess_elements_cpu), element by element.
 *
 * First, with or without a GPU, kernels/roi.cu (the embedded source) must
 * compile with NVRTC for sm_90 (the named headers as the lane passes
 * them). Then, on GPU 0: a photograph (astronaut.png from the image
 * directory, scaled to 1920x1080 BGR8) with 64 boxes (inside, across the
 * edges, outside, fractional, half of them stretched) and 4 affine maps,
 * into (68, 3, 224, 224) F32, F16 and U8, NCHW and NHWC; and a BATCH of 16
 * frames of 640x480 (crops of the photograph at different places, at
 * offsets with gaps) into (16, 3, 224, 224). Inline and pinned inputs and
 * outputs, as the daemon hands them, and device memory (CUDA regions: the
 * output alone, then input and output; no D2H). Tolerance: NVRTC contracts
 * multiply- adds, so U8 within 1, F32 within 1/255 + 1e-6 of the reference, F16
 * that plus one f16 step; the transform-free checks (shape, size) exact.
 *
 * Run: test_roi_gpu IMAGE_DIR. Exits 77 (after the NVRTC check) without a
 * GPU; prints "ok" lines and "roi_gpu: N cases, 0 failed" on success.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <stb/stb_image.h>

#include "backend.h"
#include "gpu/backend_cuda.h"
#include "gpu/kernel_cache.h"
#include "ops.h"

static int roi_failed;

#define ROI_CHECK(cond, ...)                                                   \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL: " __VA_ARGS__);                          \
			printf("\n");                                          \
			roi_failed++;                                          \
		}                                                              \
	} while (0)

/* roi_nvrtc compiles the embedded roi.cu for sm_90. */
static int roi_nvrtc(void)
{
	const char *text = NULL;
	void *cubin = NULL;
	size_t size = 0;
	double ms = 0;
	char msg[256] = "";

	for (const fprep__kernel_source *k = fprep__kernel_sources;
	     k->name != NULL; k++)
		if (strcmp(k->name, "roi.cu") == 0)
			text = k->text;
	if (text == NULL) {
		printf("FAIL: roi.cu is not embedded\n");
		return -1;
	}
	if (fprep__nvrtc_compile("roi.cu", text, fprep__kernel_headers, 90,
	                         NULL, 0, &cubin, &size, &ms, msg,
	                         sizeof msg) != 0) {
		printf("FAIL: NVRTC: roi.cu: %s\n", msg);
		return -1;
	}
	printf("ok NVRTC: roi.cu for sm_90, %zu bytes, %.0f ms\n", size, ms);
	free(cubin);
	return 0;
}

typedef struct roi_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
} roi_wait;

static roi_wait roi_w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                         0};

static void roi_done(fprep__job *job)
{
	(void)job;
	pthread_mutex_lock(&roi_w.mu);
	roi_w.done++;
	pthread_cond_broadcast(&roi_w.cv);
	pthread_mutex_unlock(&roi_w.mu);
}

/* roi_half decodes an IEEE binary16. */
static float roi_half(uint16_t h)
{
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float v = e == 0    ? ldexpf((float)m, -24)
	          : e == 31 ? (m ? NAN : INFINITY)
	                    : ldexpf((float)(m | 0x400), (int)e - 25);

	return (h & 0x8000) ? -v : v;
}

/* roi_compare compares got with want (bytes of req's tensor). */
static int roi_compare(const fprep_request *req, const uint8_t *got,
                       const uint8_t *want, uint64_t bytes, double *worst)
{
	uint64_t n = bytes / (req->dtype == FPREP_DTYPE_F32   ? 4
	                      : req->dtype == FPREP_DTYPE_F16 ? 2
	                                                      : 1);
	double tol = req->dtype == FPREP_DTYPE_U8 ? 1.0 : 1.0 / 255 + 1e-6;

	*worst = 0;
	for (uint64_t i = 0; i < n; i++) {
		double a, b, t = tol;

		if (req->dtype == FPREP_DTYPE_U8) {
			a = got[i], b = want[i];
		} else if (req->dtype == FPREP_DTYPE_F32) {
			float x, y;

			memcpy(&x, got + 4 * i, 4);
			memcpy(&y, want + 4 * i, 4);
			a = x, b = y;
		} else {
			uint16_t x, y;

			memcpy(&x, got + 2 * i, 2);
			memcpy(&y, want + 2 * i, 2);
			a = roi_half(x), b = roi_half(y);
			t += fabs(b) / 1024 + 1e-7;
		}
		if (!(fabs(a - b) <= t))
			return (int)(i % 1000000000) + 1;
		if (fabs(a - b) > *worst)
			*worst = fabs(a - b);
	}
	return 0;
}

/* Where roi_run puts a job's input and output: heap memory (an inline
 * request), pinned host memory (shared-memory regions), or device memory
 * (CUDA regions: the output alone, or both). */
enum { ROI_HEAP, ROI_PINNED, ROI_DEV_OUT, ROI_DEV };

/* roi_alloc allocates n bytes where `where` says (dev: device memory). */
static int roi_alloc(uint8_t **p, size_t n, int where, int dev)
{
	if (dev)
		return cudaMalloc((void **)p, n) == cudaSuccess ? 0 : -1;
	if (where != ROI_HEAP)
		return cudaMallocHost((void **)p, n) == cudaSuccess ? 0 : -1;
	*p = malloc(n);
	return *p != NULL ? 0 : -1;
}

static void roi_free(uint8_t *p, int where, int dev)
{
	if (dev)
		cudaFree(p);
	else if (where != ROI_HEAP)
		cudaFreeHost(p);
	else
		free(p);
}

/* roi_run runs one job of req's elements on the lane, its input and output
 * where `where` says, and compares it with the CPU reference. */
static void roi_run(fprep__backend *b, fprep_request *req,
                    const fprep_element *els, const uint8_t *input, int where,
                    const char *what)
{
	uint8_t table[FPREP_TABLE_HEADER_SIZE + 128 * FPREP_ELEMENT_SIZE];
	uint8_t xfs[128 * FPREP_ELEMENT_XF_SIZE];
	fprep_element_xf xf;
	fprep__job job;
	uint8_t *in = NULL, *out = NULL, *got, *want;
	int in_dev = where == ROI_DEV, out_dev = where >= ROI_DEV_OUT;
	double worst;
	int bad;

	memset(&job, 0, sizeof job);
	job.req = *req;
	if (fprep__job_plan(&job) != 0) {
		ROI_CHECK(0, "%s: plan", what);
		return;
	}
	fprep_elements_encode(els, req->elements, table);
	/* The transforms, as the daemon's loop carries them (backend.h). */
	for (uint32_t k = 0; k < req->elements; k++) {
		fprep_element_transform(req, &els[k], &xf);
		fprep_element_xf_encode(&xf, xfs + k * FPREP_ELEMENT_XF_SIZE);
	}
	want = malloc(job.output_size);
	got = malloc(job.output_size);
	if (want == NULL || got == NULL ||
	    roi_alloc(&in, req->input_span, where, in_dev) ||
	    roi_alloc(&out, job.output_size, where, out_dev)) {
		ROI_CHECK(0, "%s: no memory", what);
		goto out;
	}
	if (in_dev) {
		ROI_CHECK(cudaMemcpy(in, input, req->input_span,
		                     cudaMemcpyHostToDevice) == cudaSuccess,
		          "%s: cudaMemcpy in", what);
	} else {
		memcpy(in, input, req->input_span);
	}
	if (out_dev)
		ROI_CHECK(cudaMemset(out, 0xa5, job.output_size) == cudaSuccess,
		          "%s: cudaMemset", what);
	else
		memset(out, 0xa5, job.output_size);
	job.input = in;
	job.output = out;
	job.table = table;
	job.xfs = xfs;
	job.input_pinned = where != ROI_HEAP && !in_dev;
	job.output_pinned = where == ROI_PINNED;
	job.input_device = in_dev;
	job.output_device = out_dev;
	job.done = roi_done;
	pthread_mutex_lock(&roi_w.mu);
	int before = roi_w.done;
	pthread_mutex_unlock(&roi_w.mu);
	ROI_CHECK(b->submit(b, &job) == 0, "%s: submit", what);
	pthread_mutex_lock(&roi_w.mu);
	while (roi_w.done == before)
		pthread_cond_wait(&roi_w.cv, &roi_w.mu);
	pthread_mutex_unlock(&roi_w.mu);
	ROI_CHECK(job.status == FPREP_OK, "%s: status %d: %s", what, job.status,
	          job.message);
	ROI_CHECK(fprep_preprocess_elements_cpu(req, els, input, want,
	                                        job.output_size, NULL) == 0,
	          "%s: reference", what);
	if (out_dev) {
		ROI_CHECK(cudaMemcpy(got, out, job.output_size,
		                     cudaMemcpyDeviceToHost) == cudaSuccess,
		          "%s: cudaMemcpy out", what);
		ROI_CHECK(job.t_d2h_us <= 5,
		          "%s: %u us of D2H into device "
		          "memory",
		          what, job.t_d2h_us);
	} else {
		memcpy(got, out, job.output_size);
	}
	bad = roi_compare(req, got, want, job.output_size, &worst);
	ROI_CHECK(bad == 0, "%s: value %d differs from the reference", what,
	          bad - 1);
	if (bad == 0 && job.status == FPREP_OK)
		printf("ok %s: %u elements, max diff %.3g, h2d %u us, kernel "
		       "%u us, d2h %u us\n",
		       what, req->elements, worst, job.t_h2d_us,
		       job.t_kernel_us, job.t_d2h_us);
out:
	if (in != NULL)
		roi_free(in, where, in_dev);
	if (out != NULL)
		roi_free(out, where, out_dev);
	free(want);
	free(got);
}

int main(int argc, char **argv)
{
	static fprep_element els[68], frames[16];
	fprep__backend *b = NULL;
	char cache[] = "/tmp/fprep-roi-cache-XXXXXX", path[4096];
	int w, h, comp, cases = 0;

	if (roi_nvrtc() != 0)
		return 1;
	if (fprep__cuda_device_count() == 0) {
		printf("SKIP: no CUDA device (no driver or no GPU): the ROI "
		       "lane test needs one\n");
		return 77;
	}
	snprintf(path, sizeof path, "%s/astronaut.png",
	         argc > 1 ? argv[1] : ".");
	uint8_t *rgb = stbi_load(path, &w, &h, &comp, 3);
	if (rgb == NULL || mkdtemp(cache) == NULL) {
		printf("FAIL: %s: cannot load the photograph\n", path);
		return 1;
	}
	/* 1920x1080 BGR8, nearest-neighbour from the photograph. */
	uint32_t fw = 1920, fh = 1080;
	uint8_t *frame = malloc((size_t)fw * fh * 3);
	for (uint32_t y = 0; y < fh; y++)
		for (uint32_t x = 0; x < fw; x++)
			for (int c = 0; c < 3; c++)
				frame[((size_t)y * fw + x) * 3 + c] =
				        rgb[((size_t)(y * h / fh) * w +
				             x * w / fw) *
				                    3 +
				            2 - c];
	fprep__cuda_config cfg = {.device = 0,
	                          .slots = 3,
	                          .cache_dir = cache,
	                          .cache_enabled = 1};
	if (fprep__backend_cuda_open(&b, &cfg) != 0 || b == NULL) {
		printf("FAIL: open the CUDA backend\n");
		return 1;
	}
	for (unsigned k = 0; k < 64; k++) {
		float bw = 40 + (float)((k * 37) % 97) * 4;
		float bh = 30 + (float)((k * 53) % 89) * 3;

		els[k].type = FPREP_ELEM_BOX;
		els[k].resize = k % 2 ? FPREP_RESIZE_STRETCH : 0;
		els[k].v[0] = (float)((k * 131) % 101) / 100.0f * (fw - bw) +
		              (k % 5 == 0 ? 0.5f : 0.0f);
		els[k].v[1] = (float)((k * 71) % 103) / 102.0f * (fh - bh);
		els[k].v[2] = bw;
		els[k].v[3] = bh;
		if (k % 9 == 4)
			els[k].v[0] = fw - bw / 2; /* across the edge */
		if (k == 63)
			els[k].v[0] = -500; /* outside */
	}
	for (unsigned k = 64; k < 68; k++) {
		float a = 0.3f * (float)k, s = 1.5f + 0.5f * (float)(k - 64);

		els[k].type = FPREP_ELEM_AFFINE;
		els[k].v[0] = s * cosf(a), els[k].v[1] = -s * sinf(a);
		els[k].v[2] = 900, els[k].v[3] = s * sinf(a);
		els[k].v[4] = s * cosf(a), els[k].v[5] = 400;
	}
	for (int dt = FPREP_DTYPE_F32; dt <= FPREP_DTYPE_U8; dt++)
		for (int lay = FPREP_LAYOUT_NCHW; lay <= FPREP_LAYOUT_NHWC;
		     lay++) {
			fprep_request req;
			char what[96];

			fprep_request_init(&req, FPREP_PIX_BGR8, fw, fh);
			req.kind = FPREP_KIND_ROIS;
			req.out_width = req.out_height = 224;
			req.dtype = (uint8_t)dt;
			req.layout = (uint8_t)lay;
			req.elements = 68;
			req.input_span = req.input_size;
			snprintf(what, sizeof what,
			         "ROIS 1080p dtype %d layout %d", dt, lay);
			roi_run(b, &req, els, frame,
			        lay == FPREP_LAYOUT_NCHW ? ROI_PINNED
			                                 : ROI_HEAP,
			        what);
			cases++;
		}
	/* A CUDA region's output (the frame pinned: a shared-memory region),
	 * then both in device memory: no D2H, the kernel reads and writes
	 * them in place. */
	for (int where = ROI_DEV_OUT; where <= ROI_DEV; where++) {
		fprep_request req;

		fprep_request_init(&req, FPREP_PIX_BGR8, fw, fh);
		req.kind = FPREP_KIND_ROIS;
		req.out_width = req.out_height = 224;
		req.elements = 68;
		req.input_span = req.input_size;
		roi_run(b, &req, els, frame, where,
		        where == ROI_DEV
		                ? "ROIS 1080p f32, CUDA in and out"
		                : "ROIS 1080p f32, pinned in, CUDA out");
		cases++;
	}
	/* BATCH: 16 crops of 640x480 at offsets with gaps. */
	{
		fprep_request req;
		uint64_t size = 640 * 480 * 3, step = size + 4096;
		uint8_t *batch = malloc(step * 16);

		fprep_request_init(&req, FPREP_PIX_BGR8, 640, 480);
		for (unsigned k = 0; k < 16; k++) {
			for (uint32_t y = 0; y < 480; y++)
				memcpy(batch + step * k + (size_t)y * 640 * 3,
				       frame + ((size_t)(y + 37 * k) * fw +
				                80 * k) *
				                       3,
				       640 * 3);
			frames[k].type = FPREP_ELEM_FRAME;
			frames[k].offset = step * k;
		}
		req.kind = FPREP_KIND_BATCH;
		req.out_width = req.out_height = 224;
		req.elements = 16;
		req.input_span = step * 15 + size;
		roi_run(b, &req, frames, batch, ROI_HEAP,
		        "BATCH 16 x 640x480 f32");
		roi_run(b, &req, frames, batch, ROI_PINNED,
		        "BATCH 16 x 640x480 f32 pinned");
		roi_run(b, &req, frames, batch, ROI_DEV_OUT,
		        "BATCH 16 x 640x480 f32 pinned in, CUDA out");
		roi_run(b, &req, frames, batch, ROI_DEV,
		        "BATCH 16 x 640x480 f32 CUDA in and out");
		cases += 4;
		free(batch);
	}
	b->close(b, 5000);
	free(frame);
	stbi_image_free(rgb);
	printf("roi_gpu: %d cases, %d failed\n", cases, roi_failed);
	return roi_failed != 0;
}
