/*
 * test_jpeg_gpu.c: JPEG frames on a GPU lane against the CPU reference
 * (libjpeg-turbo's decode, as the CPU daemon and cv2.imdecode decode, then
 * fprep_preprocess_cpu), on real photographs encoded by libjpeg-turbo at
 * quality 90 in 4:2:0, 4:2:2, 4:4:4 and grayscale, at their own sizes and
 * scaled to 1920x1080.
 *
 * Usage: test_jpeg_gpu IMAGE_DIR. First, everywhere, the choice of decoder
 * (fprep__jpeg_sequential: which files a JPEG engine may take) on those
 * files and on progressive, truncated, 12-bit, arithmetic-coded and
 * corrupted ones; then, with a GPU (else exit 77):
 *   - each photograph, sampling and channel order (RGB, BGR, GRAY) through
 *     the lane, f32 NCHW 640x640 letterbox: the largest and the mean
 *     |GPU - CPU| in source levels (LSB) are printed per sampling; bounds:
 *     where the lane decodes with nvJPEG's engine (INFO says "hardware
 *     engine"), max <= 2 LSB and mean <= 0.05 LSB (the bar,
 *     cv2.imdecode being libjpeg-turbo); where it decodes with
 *     libjpeg-turbo on its CPU decoders (FPREP_NVJPEG=off, or no engine),
 *     max <= 1 LSB (the same pixels: the kernel's rounding only);
 *   - a progressive JPEG (never the engine's) within 1 LSB in either mode;
 *   - truncated and corrupt files refused with FPREP_EINVAL, not fatal,
 *     the lane serving on;
 *   - a burst of 48 frames queued at once (batches, the decoder pool),
 *     every tensor checked;
 *   - the rate at 1, 8, 16, 32 and 64 in flight, each with INFO's
 *     jpeg_timing figures over that run (where the frames' time went: the
 *     wait for a decoder, header checks, the engine's batches, their mean
 *     size, gather and time in nvjpegDecodeBatched, libjpeg-turbo, the
 *     wait for the lane, the lane after it), at 1 in flight also the lone
 *     frames' (jpeg_timing_lone), every frame sent counted, and batches
 *     made where the engine decodes (none, and every frame by
 *     libjpeg-turbo, where not).
 * Exits 1 on any failed check.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stb_image.h>
#include <turbojpeg.h>

#include "check.h"
#include "gpu/backend_cuda.h"
#include "jpeg.h"
#include "lane_util.h"

#define MAX_IMAGES 8
#define BURST      48

static const fprep_limits limits = {.max_width = 8192,
                                    .max_height = 8192,
                                    .max_frame_bytes = 1u << 28,
                                    .max_out_width = 2048,
                                    .max_out_height = 2048,
                                    .max_tensor_bytes = 1u << 28};

static const int samplings[] = {TJSAMP_420, TJSAMP_422, TJSAMP_444,
                                TJSAMP_GRAY};
static const char *const sampling_names[] = {"4:2:0", "4:2:2", "4:4:4", "gray"};

/* A JPEG made here, with what the CPU reference makes of it per order. */
typedef struct jpeg_case {
	char name[96];
	unsigned char *jpg;
	unsigned long size;
	int w, h;
	int sampling; /* index in samplings */
} jpeg_case;

/* Per sampling: the largest difference and the sum and count for the
 * mean (LSB), over every photograph and order. */
static double worst[4], sum[4];
static unsigned long long count[4];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* photo_name: scandir's filter, the photographs' files. */
static int photo_name(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 4 && (strcmp(d->d_name + n - 4, ".png") == 0 ||
	                 strcmp(d->d_name + n - 4, ".jpg") == 0);
}

/* load_images loads up to MAX_IMAGES photographs of dir (by name, those
 * at least 256 pixels a side) as RGB8. */
static int load_images(const char *dir, lane_image *ims)
{
	struct dirent **names = NULL;
	int n = 0, k = scandir(dir, &names, photo_name, alphasort);

	for (int i = 0; i < k; i++) {
		char path[1024];
		int c, w = 0, h = 0;
		uint8_t *px = NULL;

		snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
		if (n < MAX_IMAGES &&
		    (px = stbi_load(path, &w, &h, &c, 3)) != NULL && w >= 256 &&
		    h >= 256) {
			ims[n] = (lane_image){.w = w, .h = h, .rgb = px};
			snprintf(ims[n].name, sizeof ims[n].name, "%.63s",
			         names[i]->d_name);
			n++;
		} else if (px != NULL) {
			stbi_image_free(px);
		}
		free(names[i]);
	}
	free(names);
	return n;
}

/* scale_image scales im to w x h (bilinear), a photograph's detail at a
 * camera's size. */
static lane_image scale_image(const lane_image *im, int w, int h)
{
	lane_image big = {.w = w, .h = h};
	snprintf(big.name, sizeof big.name, "%.40s@%dx%d", im->name, w, h);
	big.rgb = malloc((size_t)w * h * 3);
	for (int y = 0; big.rgb && y < h; y++) {
		double fy = (y + 0.5) * im->h / h - 0.5;
		int y0 = fy < 0 ? 0 : (int)fy;
		int y1 = y0 + 1 < im->h ? y0 + 1 : y0;
		double ay = fy < 0 ? 0 : fy - y0;
		for (int x = 0; x < w; x++) {
			double fx = (x + 0.5) * im->w / w - 0.5;
			int x0 = fx < 0 ? 0 : (int)fx;
			int x1 = x0 + 1 < im->w ? x0 + 1 : x0;
			double ax = fx < 0 ? 0 : fx - x0;
			for (int c = 0; c < 3; c++) {
				const uint8_t *p = im->rgb;
				double v =
				        (1 - ay) *
				                ((1 - ax) *
				                         p[((size_t)y0 * im->w +
				                            x0) * 3 +
				                           c] +
				                 ax * p[((size_t)y0 * im->w +
				                         x1) * 3 +
				                        c]) +
				        ay * ((1 - ax) * p[((size_t)y1 * im->w +
				                            x0) * 3 +
				                           c] +
				              ax * p[((size_t)y1 * im->w + x1) *
				                             3 +
				                     c]);
				big.rgb[((size_t)y * w + x) * 3 + c] =
				        (uint8_t)(v + 0.5);
			}
		}
	}
	return big;
}

static unsigned char *encode(const lane_image *im, int sampling, int flags,
                             unsigned long *size)
{
	tjhandle tc = tjInitCompress();
	unsigned char *jpg = NULL;

	*size = 0;
	if (tc == NULL || tjCompress2(tc, im->rgb, im->w, 0, im->h, TJPF_RGB,
	                              &jpg, size, sampling, 90, flags) != 0) {
		tjFree(jpg);
		jpg = NULL;
	}
	if (tc != NULL)
		tjDestroy(tc);
	return jpg;
}

/* check_choice checks fprep__jpeg_sequential, which chooses the decoder:
 * libjpeg-turbo's baseline files (any sampling) are the engine's; the
 * others are not. Needs no GPU. */
static void check_choice(const lane_image *im)
{
	unsigned long n = 0;
	unsigned char *jpg;

	for (size_t i = 0; i < 4; i++) {
		jpg = encode(im, samplings[i], 0, &n);
		REQUIRE(jpg != NULL);
		CHECK(fprep__jpeg_sequential(jpg, n) == 1,
		      "baseline %s: not sequential", sampling_names[i]);
		/* Bytes after the EOI (some cameras pad) are fine. */
		unsigned char *pad = malloc(n + 16);
		REQUIRE(pad != NULL);
		memcpy(pad, jpg, n);
		memset(pad + n, 0, 16);
		CHECK(fprep__jpeg_sequential(pad, n + 16) == 1,
		      "baseline %s with padding: not sequential",
		      sampling_names[i]);
		free(pad);
		CHECK(fprep__jpeg_sequential(jpg, n / 2) == 0,
		      "truncated %s taken as whole", sampling_names[i]);
		CHECK(fprep__jpeg_sequential(jpg, n - 2) == 0,
		      "%s without its EOI taken as whole", sampling_names[i]);
		/* The SOF0 rewritten: 12-bit samples, arithmetic coding. */
		unsigned char *sof = NULL;
		for (unsigned long k = 2; k + 1 < n; k++)
			if (jpg[k] == 0xFF && jpg[k + 1] == 0xC0) {
				sof = jpg + k;
				break;
			}
		REQUIRE(sof != NULL);
		sof[4] = 12;
		CHECK(fprep__jpeg_sequential(jpg, n) == 0, "12-bit taken");
		sof[4] = 8;
		sof[1] = 0xC9;
		CHECK(fprep__jpeg_sequential(jpg, n) == 0, "arithmetic taken");
		sof[1] = 0xC0;
		/* A marker in the middle of the entropy-coded data. */
		jpg[n - n / 4] = 0xFF;
		jpg[n - n / 4 + 1] = 0xC4;
		CHECK(fprep__jpeg_sequential(jpg, n) == 0,
		      "stray marker in the scan taken");
		tjFree(jpg);
	}
	jpg = encode(im, TJSAMP_420, TJFLAG_PROGRESSIVE, &n);
	REQUIRE(jpg != NULL);
	CHECK(fprep__jpeg_sequential(jpg, n) == 0, "progressive taken");
	tjFree(jpg);
	CHECK(fprep__jpeg_sequential((const uint8_t *)"\xFF\xD8\xFF\xD9", 4) ==
	              0,
	      "no frame taken");
}

/* reference makes the CPU tensor of c's JPEG for rq (a JPEG request):
 * libjpeg-turbo's decode with the daemon's flags, then the CPU ops.
 * Returns a malloc'ed tensor. */
static float *reference(const jpeg_case *c, const fprep_request *rq,
                        uint64_t bytes)
{
	tjhandle td = tjInitDecompress();
	fprep_request raw = *rq;
	fprep_transform xf;
	uint8_t *px;
	float *t = malloc(bytes);

	raw.src_format = rq->channel_order == FPREP_ORDER_GRAY ? FPREP_PIX_GRAY8
	                 : rq->channel_order == FPREP_ORDER_BGR
	                         ? FPREP_PIX_BGR8
	                         : FPREP_PIX_RGB8;
	raw.src_width = (uint32_t)c->w;
	raw.src_height = (uint32_t)c->h;
	raw.src_stride = raw.src_width * fprep_pixel_bytes(raw.src_format);
	raw.input_size = (uint64_t)raw.src_stride * raw.src_height;
	px = malloc(raw.input_size);
	REQUIRE(td != NULL && px != NULL && t != NULL);
	REQUIRE(tjDecompress2(td, c->jpg, c->size, px, c->w,
	                      (int)raw.src_stride, c->h,
	                      raw.src_format == FPREP_PIX_GRAY8  ? TJPF_GRAY
	                      : raw.src_format == FPREP_PIX_BGR8 ? TJPF_BGR
	                                                         : TJPF_RGB,
	                      TJFLAG_STOPONWARNING) == 0);
	REQUIRE(fprep_preprocess_cpu(&raw, px, t, bytes, &xf) == 0);
	free(px);
	tjDestroy(td);
	return t;
}

static void jpeg_request(fprep_request *rq, const jpeg_case *c, uint8_t order)
{
	fprep_request_init(rq, FPREP_PIX_JPEG, 0, 0);
	rq->input_size = c->size;
	rq->channel_order = order;
}

/* diff_lsb compares two f32 tensors (YOLO scale: 1/255 a level) and
 * returns the largest difference in levels, adding to *sum. */
static double diff_lsb(const float *a, const float *b, uint64_t n,
                       double *sum_out)
{
	double m = 0, s = 0;
	for (uint64_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) * 255.0;
		if (!(d <= 1e9)) /* NaN: an unwritten element */
			d = 1e9;
		s += d;
		if (d > m)
			m = d;
	}
	*sum_out = s;
	return m;
}

/* check_job checks a finished JPEG job's tensor against the reference;
 * bound: the largest difference allowed (LSB). */
static void check_job(const jpeg_case *c, lane_job *lj, const float *gpu,
                      uint64_t bytes, double bound, int stats)
{
	fprep_request rq = lj->job.req; /* rewritten as the decoded frame's */
	fprep_request jr;
	double s;

	CHECK(lj->calls == 1 && lj->job.status == FPREP_OK, "%s: status %d: %s",
	      c->name, lj->job.status, lj->job.message);
	if (lj->job.status != FPREP_OK)
		return;
	CHECK(lj->job.decoded_width == c->w && lj->job.decoded_height == c->h,
	      "%s: decoded %ux%u", c->name, lj->job.decoded_width,
	      lj->job.decoded_height);
	jpeg_request(&jr, c, rq.channel_order);
	float *cpu = reference(c, &jr, bytes);
	double m = diff_lsb(gpu, cpu, bytes / 4, &s);
	CHECK(m <= bound, "%s order %u: max |GPU - CPU| %.3f LSB > %.1f",
	      c->name, rq.channel_order, m, bound);
	if (stats) {
		if (m > worst[c->sampling])
			worst[c->sampling] = m;
		sum[c->sampling] += s;
		count[c->sampling] += bytes / 4;
	}
	free(cpu);
}

/* run_case sends c in each channel order, one at a time. */
static void run_case(fprep__backend *b, lane_waiter *w, const jpeg_case *c,
                     double bound)
{
	static const uint8_t orders[] = {FPREP_ORDER_RGB, FPREP_ORDER_BGR,
	                                 FPREP_ORDER_GRAY};
	for (size_t i = 0; i < sizeof orders; i++) {
		fprep_request rq;
		uint32_t shape[4];
		uint64_t bytes = 0;
		lane_job lj;

		jpeg_request(&rq, c, orders[i]);
		REQUIRE(fprep_tensor_shape(&rq, shape, &bytes) == 0);
		float *gpu = malloc(bytes);
		REQUIRE(gpu != NULL);
		lane_job_init(&lj, w, &rq, c->jpg, (uint8_t *)gpu, bytes);
		lj.job.limits = &limits;
		unsigned target = lane_count(w) + 1;
		CHECK(b->submit(b, &lj.job) == 0, "submit refused");
		lane_wait(w, target);
		check_job(c, &lj, gpu, bytes, bound, 1);
		free(gpu);
	}
}

/* check_refused sends a broken JPEG: refused with EINVAL, not fatal. */
static void check_refused(fprep__backend *b, lane_waiter *w,
                          const unsigned char *jpg, unsigned long n,
                          const char *what)
{
	fprep_request rq;
	uint32_t shape[4];
	uint64_t bytes = 0;
	lane_job lj;

	fprep_request_init(&rq, FPREP_PIX_JPEG, 0, 0);
	rq.input_size = n;
	REQUIRE(fprep_tensor_shape(&rq, shape, &bytes) == 0);
	float *out = malloc(bytes);
	REQUIRE(out != NULL);
	lane_job_init(&lj, w, &rq, jpg, (uint8_t *)out, bytes);
	lj.job.limits = &limits;
	unsigned target = lane_count(w) + 1;
	CHECK(b->submit(b, &lj.job) == 0, "submit refused");
	lane_wait(w, target);
	CHECK(lj.job.status == FPREP_EINVAL && lj.job.fatal == 0,
	      "%s: status %d fatal %d: %s", what, lj.job.status, lj.job.fatal,
	      lj.job.message);
	printf("%s: refused: %s\n", what, lj.job.message);
	free(out);
}

/* check_burst queues BURST JPEG frames of cases at once (several
 * samplings and orders: batches form, the decoders run side by side) and
 * checks every tensor. */
static void check_burst(fprep__backend *b, lane_waiter *w,
                        const jpeg_case *cases, int ncases, double bound)
{
	static lane_job jobs[BURST];
	static float *out[BURST];
	uint32_t shape[4];
	uint64_t bytes = 0;
	fprep_request rq;

	unsigned target = lane_count(w) + BURST;
	for (int i = 0; i < BURST; i++) {
		const jpeg_case *c = &cases[i % ncases];
		jpeg_request(&rq, c,
		             i % 7 == 6 ? FPREP_ORDER_BGR : FPREP_ORDER_RGB);
		REQUIRE(fprep_tensor_shape(&rq, shape, &bytes) == 0);
		out[i] = malloc(bytes);
		REQUIRE(out[i] != NULL);
		lane_job_init(&jobs[i], w, &rq, c->jpg, (uint8_t *)out[i],
		              bytes);
		jobs[i].job.limits = &limits;
		CHECK(b->submit(b, &jobs[i].job) == 0, "submit refused");
	}
	lane_wait(w, target);
	for (int i = 0; i < BURST; i++) {
		check_job(&cases[i % ncases], &jobs[i], out[i], bytes, bound,
		          0);
		free(out[i]);
	}
	printf("burst of %d JPEG frames queued at once: checked\n", BURST);
}

/* jpeg_timing: INFO's jpeg_timing figures as sums (a mean times its
 * count), so two readings give the figures of what ran between them. */
typedef struct jpeg_timing {
	double frames, queue, parse, batches, batch_frames, gather, call,
	        cpu_frames, cpu, back, back_sum, done, lane, total;
} jpeg_timing;

/* timing_read reads b's INFO line key ("jpeg_timing: " or
 * "jpeg_timing_lone: ") into *t; 0, or -1 when there is none. */
static int timing_read(fprep__backend *b, const char *key, jpeg_timing *t)
{
	char info[4096] = "";
	double queue, parse, mean_batch, gather, call, call_pf, sync, cpu, back,
	        lane, total;

	b->info(b, info, sizeof info);
	const char *jt = strstr(info, key);
	if (jt == NULL ||
	    sscanf(jt + strlen(key),
	           "frames=%lf queue_us=%lf parse_us=%lf "
	           "batches=%lf mean_batch=%lf gather_us=%lf call_us=%lf "
	           "call_us_per_frame=%lf sync_us=%lf cpu_frames=%lf "
	           "cpu_us=%lf back=%lf back_us=%lf lane_us=%lf total_us=%lf",
	           &t->frames, &queue, &parse, &t->batches, &mean_batch,
	           &gather, &call, &call_pf, &sync, &t->cpu_frames, &cpu,
	           &t->back, &back, &lane, &total) != 15)
		return -1;
	(void)call_pf, (void)sync;
	t->queue = queue * t->frames;
	t->parse = parse * t->frames;
	t->batch_frames = mean_batch * t->batches;
	t->gather = gather * t->batches;
	t->call = call * t->batches;
	t->cpu = cpu * t->cpu_frames;
	t->back_sum = back * t->back;
	/* Answered frames: back counts them too (none failed here). */
	t->done = t->back;
	t->lane = lane * t->done;
	t->total = total * t->done;
	return 0;
}

/* timing_print prints where the frames between readings a and z spent
 * host time, in microseconds. */
static void timing_print(const jpeg_timing *a, const jpeg_timing *z)
{
	double f = z->frames - a->frames, bt = z->batches - a->batches,
	       c = z->cpu_frames - a->cpu_frames, bk = z->back - a->back;

	printf("  per frame: wait for a decoder %.1f us, header checks %.1f "
	       "us, back to the lane %.1f us, the lane after it %.1f us, "
	       "in the lane %.1f us; engine: %.0f batches, mean %.2f "
	       "frames, gathered %.1f us, %.1f us in nvjpegDecodeBatched "
	       "each; libjpeg-turbo: %.0f frames, %.1f us each\n",
	       f > 0 ? (z->queue - a->queue) / f : 0,
	       f > 0 ? (z->parse - a->parse) / f : 0,
	       bk > 0 ? (z->back_sum - a->back_sum) / bk : 0,
	       bk > 0 ? (z->lane - a->lane) / bk : 0,
	       bk > 0 ? (z->total - a->total) / bk : 0, bt,
	       bt > 0 ? (z->batch_frames - a->batch_frames) / bt : 0,
	       bt > 0 ? (z->gather - a->gather) / bt : 0,
	       bt > 0 ? (z->call - a->call) / bt : 0, c,
	       c > 0 ? (z->cpu - a->cpu) / c : 0);
}

/* wait_job waits for lj's done (read under the waiter's lock, so lj may
 * be reused at once). */
static void wait_job(lane_waiter *w, lane_job *lj)
{
	pthread_mutex_lock(&w->mu);
	while (lj->calls == 0)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

/* rate sends n frames of c keeping depth in flight (each finished job
 * goes again); returns frames/s. */
static double rate(fprep__backend *b, lane_waiter *w, const jpeg_case *c, int n,
                   int depth)
{
	static lane_job jobs[64];
	static float *out[64];
	uint32_t shape[4];
	uint64_t bytes = 0;
	fprep_request rq;

	jpeg_request(&rq, c, FPREP_ORDER_RGB);
	REQUIRE(depth <= 64 && depth <= n &&
	        fprep_tensor_shape(&rq, shape, &bytes) == 0);
	for (int i = 0; i < depth; i++)
		REQUIRE((out[i] = malloc(bytes)) != NULL);
	double t0 = now_s();
	for (int sent = 0; sent < n + depth; sent++) {
		int k = sent % depth;
		if (sent >= depth) {
			wait_job(w, &jobs[k]);
			CHECK(jobs[k].job.status == FPREP_OK,
			      "rate: status %d: %s", jobs[k].job.status,
			      jobs[k].job.message);
		}
		if (sent >= n)
			continue;
		lane_job_init(&jobs[k], w, &rq, c->jpg, (uint8_t *)out[k],
		              bytes);
		jobs[k].job.limits = &limits;
		CHECK(b->submit(b, &jobs[k].job) == 0, "submit refused");
	}
	double fps = n / (now_s() - t0);
	for (int i = 0; i < depth; i++)
		free(out[i]);
	return fps;
}

int main(int argc, char **argv)
{
	lane_image ims[MAX_IMAGES];
	jpeg_case cases[MAX_IMAGES * 5 * 4];
	int ncases = 0;
	fprep__backend *b = NULL;
	lane_waiter w;

	const char *dir = argc > 1 ? argv[1] : getenv("FPREP_IMAGES");
	int nims = dir ? load_images(dir, ims) : 0;
	if (nims < 2) {
		printf("FAIL: need the test photographs (astronaut.png, ...) "
		       "in %s\n",
		       dir ? dir : "(no directory given)");
		return 1;
	}
	check_choice(&ims[0]);
	printf("decoder choice (fprep__jpeg_sequential): %d checks, %d "
	       "failed\n",
	       check_count, check_failures);
	if (fprep__cuda_device_count() == 0) {
		printf("SKIP: no CUDA device (no driver or no GPU): the JPEG "
		       "lane test needs one\n");
		for (int i = 0; i < nims; i++) /* LeakSanitizer: all freed */
			stbi_image_free(ims[i].rgb);
		return check_failures ? 1 : 77;
	}
	fprep__cuda_config cfg = {.device = 0,
	                          .slots = 4,
	                          .cache_enabled = 0, /* compile, keep none */
	                          .transfer = FPREP__CUDA_AUTO,
	                          .spin_ns = 1000000,
	                          /* The engine where there is one
	                           * (FPREP_NVJPEG=off: libjpeg-turbo). */
	                          .jpeg_engine = 1};
	lane_waiter_init(&w);
	REQUIRE(fprep__backend_cuda_open(&b, &cfg) == 0);
	char info[4096] = "";
	b->info(b, info, sizeof info);
	const char *dec = strstr(info, "jpeg_decoder: ");
	int engine = dec != NULL && strstr(dec, "hardware engine") != NULL;
	printf("%.*s", dec ? (int)strcspn(dec, "\n") + 1 : 0, dec ? dec : "");
	/* Where the engine decodes, the bar; else the same pixels
	 * as the reference, the kernel's rounding only. */
	double bound = engine ? 2.0 : 1.0;

	lane_image big = scale_image(&ims[0], 1920, 1080);
	lane_image *srcs[MAX_IMAGES + 1];
	int nsrc = 0;
	srcs[nsrc++] = &big;
	for (int i = 0; i < nims; i++)
		srcs[nsrc++] = &ims[i];
	for (int i = 0; i < nsrc; i++)
		for (int k = 0; k < 4; k++) {
			jpeg_case *c = &cases[ncases];
			c->jpg = encode(srcs[i], samplings[k], 0, &c->size);
			REQUIRE(c->jpg != NULL);
			c->w = srcs[i]->w;
			c->h = srcs[i]->h;
			c->sampling = k;
			snprintf(c->name, sizeof c->name, "%s q90 %s",
			         srcs[i]->name, sampling_names[k]);
			ncases++;
		}
	for (int i = 0; i < ncases; i++)
		run_case(b, &w, &cases[i], bound);
	printf("\n|GPU - CPU reference| in levels (LSB), f32 640x640, %d "
	       "photographs (and one at 1920x1080), RGB/BGR/GRAY, q90, "
	       "decoded by %s:\n",
	       nims, engine ? "nvJPEG's hardware engine" : "libjpeg-turbo");
	printf("%-6s %8s %10s\n", "sampling", "max", "mean");
	for (int k = 0; k < 4; k++) {
		double mean = count[k] ? sum[k] / (double)count[k] : 0;
		printf("%-8s %8.3f %10.5f\n", sampling_names[k], worst[k],
		       mean);
		CHECK(mean <= (engine ? 0.05 : 0.01),
		      "%s: mean |GPU - CPU| %.4f LSB", sampling_names[k], mean);
	}

	/* Who decoded them: the engine every one where it is (the files
	 * are baseline), libjpeg-turbo every one otherwise. */
	unsigned long by_engine = 0, by_cpu = 0;
	info[0] = '\0'; /* info appends to what buf holds */
	b->info(b, info, sizeof info);
	const char *fr = strstr(info, "jpeg_frames: ");
	CHECK(fr != NULL && sscanf(fr, "jpeg_frames: %lu by the engine, %lu",
	                           &by_engine, &by_cpu) == 2,
	      "INFO has no jpeg_frames line");
	printf("%.*s", fr ? (int)strcspn(fr, "\n") + 1 : 0, fr ? fr : "");
	CHECK(engine ? by_engine == (unsigned long)ncases * 3 && by_cpu == 0
	             : by_engine == 0 && by_cpu == (unsigned long)ncases * 3,
	      "%lu frames by the engine, %lu by libjpeg-turbo, of %d",
	      by_engine, by_cpu, ncases * 3);

	/* Progressive: libjpeg-turbo decodes it in any mode. */
	jpeg_case prog = cases[0];
	prog.jpg = encode(&big, TJSAMP_420, TJFLAG_PROGRESSIVE, &prog.size);
	REQUIRE(prog.jpg != NULL);
	snprintf(prog.name, sizeof prog.name, "%s q90 progressive", big.name);
	run_case(b, &w, &prog, 1.0);
	printf("progressive JPEG: within 1 LSB of the CPU's\n");

	/* Broken files: a named refusal, and the lane serves on. */
	check_refused(b, &w, cases[0].jpg, cases[0].size / 2, "truncated");
	unsigned char *bad = malloc(cases[0].size);
	REQUIRE(bad != NULL);
	memcpy(bad, cases[0].jpg, cases[0].size);
	bad[cases[0].size / 2] = 0xFF;
	bad[cases[0].size / 2 + 1] = 0xC4; /* a DHT inside the scan */
	check_refused(b, &w, bad, cases[0].size, "stray marker in the scan");
	free(bad);
	run_case(b, &w, &cases[1], bound);

	check_burst(b, &w, cases, ncases, bound);
	rate(b, &w, &cases[0], 64, 16); /* warm-up */
	/* The rate at 1 to 64 in flight, and where each frame's time went
	 * (the jpeg_timing figures over that run alone; at 1 in flight
	 * also the lone frames'). */
	static const int depths[] = {1, 8, 16, 32, 64};
	jpeg_timing t0 = {0}, t1 = {0}, l0 = {0}, l1 = {0};
	CHECK(timing_read(b, "jpeg_timing: ", &t0) == 0,
	      "INFO has no jpeg_timing line");
	CHECK(timing_read(b, "jpeg_timing_lone: ", &l0) == 0,
	      "INFO has no jpeg_timing_lone line");
	for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
		int n = depths[i] == 1 ? 200 : 400;
		double fps = rate(b, &w, &cases[0], n, depths[i]);
		CHECK(timing_read(b, "jpeg_timing: ", &t1) == 0,
		      "INFO has no jpeg_timing line");
		printf("JPEG 1080p q90 4:2:0 (%lu bytes) -> 640x640 f32, %d in "
		       "flight: %.0f frames/s (%s)\n",
		       cases[0].size, depths[i], fps,
		       engine ? "nvJPEG hardware engine"
		              : "libjpeg-turbo CPU decoders");
		timing_print(&t0, &t1);
		if (depths[i] == 1) {
			CHECK(timing_read(b, "jpeg_timing_lone: ", &l1) == 0,
			      "INFO has no jpeg_timing_lone line");
			printf("  frames alone (%.0f of %d):\n",
			       l1.frames - l0.frames, n);
			timing_print(&l0, &l1);
		}
		CHECK(t1.frames - t0.frames == n,
		      "jpeg_timing: %.0f frames of %d sent",
		      t1.frames - t0.frames, n);
		CHECK(engine ? t1.batches > t0.batches
		             : t1.batches == 0 &&
		                       t1.cpu_frames - t0.cpu_frames == n,
		      "jpeg_timing: %.0f engine batches, %.0f libjpeg-turbo "
		      "frames (%s)",
		      t1.batches - t0.batches, t1.cpu_frames - t0.cpu_frames,
		      engine ? "engine" : "no engine");
		t0 = t1;
	}
	/* Every frame sent went through a decoder: the cases and the
	 * progressive file in 3 orders, 2 broken files, cases[1] again, the
	 * burst, the warm-up and the runs. */
	double sent = ncases * 3 + 3 + 2 + 3 + BURST + 64 + 200 + 400 * 4;
	CHECK(t1.frames == sent, "jpeg_timing: %.0f frames of %.0f sent",
	      t1.frames, sent);
	info[0] = '\0';
	b->info(b, info, sizeof info);
	for (const char *key = "jpeg_timing: "; key != NULL;
	     key = strcmp(key, "jpeg_timing: ") == 0 ? "jpeg_timing_lone: "
	                                             : NULL) {
		const char *jt = strstr(info, key);
		printf("%.*s", jt ? (int)strcspn(jt, "\n") + 1 : 0,
		       jt ? jt : "");
	}
	b->close(b, 5000);

	for (int i = 0; i < ncases; i++)
		tjFree(cases[i].jpg);
	tjFree(prog.jpg);
	free(big.rgb);
	for (int i = 0; i < nims; i++)
		stbi_image_free(ims[i].rgb);
	printf("\n%d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}
