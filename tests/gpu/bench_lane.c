/*
 * bench_lane.c: what one GPU lane costs, next to what the copy engines
 * allow. Usage: bench_lane IMAGE_DIR (astronaut.png is scaled to 1920x1080,
 * so the bytes are a real photograph's, never zeros).
 *
 * 1. Pinned H2D / D2H bandwidth for the byte counts of a 1080p BGR8 frame
 *    and a 640x640x3 float32 tensor (CUDA events, median of 50 after
 *    warm-up); the H2D of the rows of that frame that the resize to
 *    640x640 reads (row_plan.h: every third row), as the lane copies them;
 *    and 50 frames' H2D and D2H issued at once on two streams, the whole
 *    frame and the rows read (the most the link carries when tensors come
 *    back to host memory).
 * 2. One frame at a time, 1080p BGR8 -> 640x640 letterbox RGB f32 NCHW:
 *    the lane's H2D, kernel, D2H (its own events), the lane's own time
 *    (start to output ready) and submit-to-done wall time, medians and
 *    p99 of 1000 after 30 warm-up, on five paths: payload and tensor in
 * ordinary memory (copied through the slot), input pinned, both pinned (the
 *    shared-memory path: no host copies) with the lane copying every row
 *    (--h2d-rows all) and only the rows read, and both pinned with the lane in
 *    mapped transfer mode (the kernel reads the frame and writes the
 *    tensor through mapped device pointers, as for a registered region
 *    under --transfer mapped: no copies at all); then the last two again
 *    with frame and tensor in shared memory registered as frameprepd
 *    registers a client's region (memfd pages, cudaHostRegister), where
 *    the others use cudaMallocHost. H2D, kernel and D2H have their p99
 *    beside their median.
 * 3. Throughput, 600 frames queued at once, with 2, 3 and 4 slots, on the
 *    same seven paths.
 * 4. The machine's stalls: 1 and then 4 threads poll the clock for a
 *    second each, as the daemon's loop, lane and completion threads poll,
 *    and count the gaps between two consecutive reads (the time a thread
 *    was stopped): how many a second over 10 and 30 us, the longest, and
 *    the share of the second lost. A request crosses such threads, so
 *    this is the part of its p99 that no code of the daemon controls.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <stb_image.h>

#include "gpu/backend_cuda.h"
#include "lane_util.h"
#include "row_plan.h"

#define PROBE_REPS    50
#define LAT_WARM      30
#define LAT_REPS      1000
#define TPUT_FRAMES   600
#define DUPLEX_FRAMES 50
#define DUPLEX_REPS   7
#define STALL_NS      1000000000u
#define STALL_THREADS 4

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* quantile returns the q-quantile of v's n values (sorting them). */
static double quantile(double *v, int n, double q)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[(int)(q * (n - 1) + 0.5)];
}

static double median(double *v, int n)
{
	return quantile(v, n, 0.5);
}

#define CK(call)                                                               \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess) {                                       \
			printf("%s: %s\n", #call, cudaGetErrorName(e_));       \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* h2d_plan issues on s the H2D copies of the rows of a frame (rows stride
 * bytes apart) that plan lists, a 2D copy per group as the lane issues
 * them; or, with plan NULL, the copy of all n bytes. */
static void h2d_plan(void *d, const void *h, size_t n,
                     const fprep__row_plan *plan, size_t stride, cudaStream_t s)
{
	if (plan == NULL) {
		CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
		return;
	}
	for (uint32_t k = 0; k < plan->ngroups; k++) {
		const fprep__row_group *g = &plan->g[k];
		size_t off = g->first * stride;
		size_t pitch = (g->period ? g->period : g->len) * stride;

		CK(cudaMemcpy2DAsync(
		        (char *)d + off, pitch, (const char *)h + off, pitch,
		        g->len * stride, g->count, cudaMemcpyHostToDevice, s));
	}
}

/* probe returns the median microseconds of one pinned copy of n bytes, or
 * of the H2D copies of the rows plan lists (h2d_plan). */
static double probe(size_t n, int h2d, const fprep__row_plan *plan,
                    size_t stride)
{
	void *h, *d;
	cudaStream_t s;
	cudaEvent_t a, b;
	double t[PROBE_REPS];

	CK(cudaMallocHost(&h, n));
	CK(cudaMalloc(&d, n));
	for (size_t i = 0; i < n; i++)
		((unsigned char *)h)[i] = (unsigned char)(i * 31 + (i >> 12));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int r = -5; r < PROBE_REPS; r++) {
		float ms;
		CK(cudaEventRecord(a, s));
		if (h2d)
			h2d_plan(d, h, n, plan, stride, s);
		else
			CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
		CK(cudaEventRecord(b, s));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		if (r >= 0)
			t[r] = ms * 1000.0;
	}
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d));
	CK(cudaFreeHost(h));
	return median(t, PROBE_REPS);
}

/* duplex_rate returns the frames/s of DUPLEX_FRAMES frames' pinned copies
 * issued on two streams at once, n_in bytes H2D on one and n_out bytes D2H
 * on the other (median of DUPLEX_REPS bursts, from the first copy's start
 * to the later stream's end): what the link carries for frames whose
 * tensors come back to host memory while the next frames go in, with no
 * kernel between. */
static double duplex_rate(size_t n_in, size_t n_out,
                          const fprep__row_plan *plan, size_t stride)
{
	void *hi, *ho, *di, *dout;
	cudaStream_t si, so;
	cudaEvent_t a, b, c;
	double t[DUPLEX_REPS];

	CK(cudaMallocHost(&hi, n_in));
	CK(cudaMallocHost(&ho, n_out));
	CK(cudaMalloc(&di, n_in));
	CK(cudaMalloc(&dout, n_out));
	for (size_t i = 0; i < n_in; i++)
		((unsigned char *)hi)[i] = (unsigned char)(i * 31 + (i >> 12));
	CK(cudaMemset(dout, 0x5a, n_out));
	CK(cudaStreamCreateWithFlags(&si, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&so, cudaStreamNonBlocking));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventCreate(&c));
	for (int r = -1; r < DUPLEX_REPS; r++) {
		float mb, mc;
		CK(cudaEventRecord(a, si));
		CK(cudaStreamWaitEvent(so, a, 0));
		for (int f = 0; f < DUPLEX_FRAMES; f++) {
			h2d_plan(di, hi, n_in, plan, stride, si);
			CK(cudaMemcpyAsync(ho, dout, n_out,
			                   cudaMemcpyDeviceToHost, so));
		}
		CK(cudaEventRecord(b, si));
		CK(cudaEventRecord(c, so));
		CK(cudaEventSynchronize(b));
		CK(cudaEventSynchronize(c));
		CK(cudaEventElapsedTime(&mb, a, b));
		CK(cudaEventElapsedTime(&mc, a, c));
		if (r >= 0)
			t[r] = (mb > mc ? mb : mc) * 1000.0;
	}
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	CK(cudaEventDestroy(c));
	CK(cudaStreamDestroy(si));
	CK(cudaStreamDestroy(so));
	CK(cudaFree(di));
	CK(cudaFree(dout));
	CK(cudaFreeHost(hi));
	CK(cudaFreeHost(ho));
	return DUPLEX_FRAMES * 1e6 / median(t, DUPLEX_REPS);
}

typedef struct bench_frame {
	fprep_request rq;
	uint8_t *frame;  /* ordinary memory */
	uint8_t *pinned; /* the same bytes in pinned memory */
	uint8_t *shm;    /* and in registered shared memory (shm_alloc) */
	uint64_t out_bytes;
} bench_frame;

/* shm_alloc returns n bytes of shared memory pinned as frameprepd pins a
 * client's region: a memfd's pages (4 KB, wherever the kernel put them)
 * mapped shared and registered with cudaHostRegister, portable and mapped
 * (fprep__backend_cuda's region OPEN). shm_free undoes it. */
static uint8_t *shm_alloc(size_t n)
{
	int fd = memfd_create("bench_lane", MFD_CLOEXEC);
	uint8_t *p;

	if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
		perror("memfd");
		exit(1);
	}
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 0, n);
	CK(cudaHostRegister(p, n,
	                    cudaHostRegisterPortable | cudaHostRegisterMapped));
	return p;
}

static void shm_free(uint8_t *p, size_t n)
{
	CK(cudaHostUnregister(p));
	munmap(p, n);
}

/* Paths: inline (payload and tensor in ordinary memory, copied through
 * the slot), pinned input, shm (input and output pinned: no host copies,
 * as with registered shared-memory regions), and shm mapped (the same
 * memory read and written by the kernel through its mapping). */
enum {
	PATH_INLINE,
	PATH_PINNED,
	PATH_SHM_ALL,
	PATH_SHM,
	PATH_MAPPED,
	PATH_REG,
	PATH_REG_MAPPED,
	PATHS
};
static const char *const path_names[PATHS] = {
        "inline",         "pinned input",
        "shm, every row", "shm (pinned in+out)",
        "shm mapped",     "memfd registered",
        "memfd mapped"};
/* The paths on registered shared memory (shm_alloc). */
#define PATH_IS_REG(m)    ((m) >= PATH_REG)
#define PATH_IS_MAPPED(m) ((m) == PATH_MAPPED || (m) == PATH_REG_MAPPED)
#define PATH_PINNED_OUT   PATH_SHM_ALL /* the first path with pinned output */

/* bench_region stands for the registered region that holds p (pinned by
 * cudaMallocHost, which maps it for the device): the lane reads its base
 * and mapping. */
static fprep__memreg *bench_region(fprep__memreg *r, uint8_t *p, size_t n)
{
	memset(r, 0, sizeof *r);
	r->kind = FPREP__MEMREG_SHM;
	r->size = n;
	r->base = p;
	r->pinned = 1;
	CK(cudaHostGetDevicePointer((void **)&r->mapped, p, 0));
	return r;
}

/* bench_input: the frame's pinned copy that path mode reads. */
static const uint8_t *bench_input(const bench_frame *bf, int mode)
{
	if (mode == PATH_INLINE)
		return bf->frame;
	return PATH_IS_REG(mode) ? bf->shm : bf->pinned;
}

/* bench_job fills lj for path mode: frame, output and their regions. */
static void bench_job(lane_job *lj, lane_waiter *w, const bench_frame *bf,
                      uint8_t *out, int mode, fprep__memreg *reg)
{
	lane_job_init(lj, w, &bf->rq, bench_input(bf, mode), out,
	              bf->out_bytes);
	lj->job.input_pinned = mode > PATH_INLINE;
	lj->job.output_pinned = mode >= PATH_PINNED_OUT;
	if (PATH_IS_MAPPED(mode)) {
		lj->job.in_region = &reg[0];
		lj->job.out_region = &reg[1];
	}
}

/* bench_open starts a lane of cfg with the transfer mode of path mode;
 * for the mapped path, reg stands for the regions of the frame and of
 * out (4 tensors). */
static fprep__backend *bench_open(const fprep__cuda_config *cfg,
                                  const bench_frame *bf, int mode, uint8_t *out,
                                  fprep__memreg *reg)
{
	fprep__cuda_config c = *cfg;
	fprep__backend *b;

	c.transfer =
	        PATH_IS_MAPPED(mode) ? FPREP__CUDA_MAPPED : FPREP__CUDA_STAGED;
	c.all_rows = mode == PATH_SHM_ALL;
	if (PATH_IS_MAPPED(mode)) {
		bench_region(&reg[0], (uint8_t *)bench_input(bf, mode),
		             bf->rq.input_size);
		bench_region(&reg[1], out, bf->out_bytes * 4);
	}
	if (fprep__backend_cuda_open(&b, &c) != 0)
		exit(1);
	return b;
}

/* bench_out returns an output area of 4 tensors for path mode. */
static uint8_t *bench_out(const bench_frame *bf, int mode)
{
	uint8_t *out = NULL;
	if (PATH_IS_REG(mode))
		out = shm_alloc(bf->out_bytes * 4);
	else if (mode >= PATH_PINNED_OUT)
		CK(cudaMallocHost((void **)&out, bf->out_bytes * 4));
	else
		out = malloc(bf->out_bytes * 4);
	if (out == NULL)
		exit(1);
	memset(out, 0, bf->out_bytes * 4);
	return out;
}

static void bench_out_free(const bench_frame *bf, uint8_t *out, int mode)
{
	if (PATH_IS_REG(mode))
		shm_free(out, bf->out_bytes * 4);
	else if (mode >= PATH_PINNED_OUT)
		CK(cudaFreeHost(out));
	else
		free(out);
}

static void latency(const fprep__cuda_config *cfg, const bench_frame *bf,
                    int mode)
{
	fprep__backend *b;
	lane_waiter w;
	lane_job lj;
	double h2d[LAT_REPS], kern[LAT_REPS], d2h[LAT_REPS], lane[LAT_REPS],
	        wall[LAT_REPS];
	uint8_t *out = bench_out(bf, mode);
	fprep__memreg reg[2];

	b = bench_open(cfg, bf, mode, out, reg);
	lane_waiter_init(&w);
	for (int r = -LAT_WARM; r < LAT_REPS; r++) {
		bench_job(&lj, &w, bf, out, mode, reg);
		unsigned target = lane_count(&w) + 1;
		uint64_t t0 = now_ns();
		if (b->submit(b, &lj.job) != 0)
			exit(1);
		lane_wait(&w, target);
		uint64_t t1 = now_ns();
		if (lj.job.status != FPREP_OK) {
			printf("job failed: %s\n", lj.job.message);
			exit(1);
		}
		if (r < 0)
			continue;
		h2d[r] = lj.job.t_h2d_us;
		kern[r] = lj.job.t_kernel_us;
		d2h[r] = lj.job.t_d2h_us;
		lane[r] = (double)(lj.job.t_end_ns - lj.job.t_start_ns) / 1e3;
		wall[r] = (double)(t1 - t0) / 1e3;
	}
	b->close(b, 1000);
	printf("%-20s %5.0f/%-5.0f %5.0f/%-5.0f %5.0f/%-5.0f %6.1f/%-6.1f "
	       "%6.1f/%-6.1f\n",
	       path_names[mode], median(h2d, LAT_REPS),
	       quantile(h2d, LAT_REPS, 0.99), median(kern, LAT_REPS),
	       quantile(kern, LAT_REPS, 0.99), median(d2h, LAT_REPS),
	       quantile(d2h, LAT_REPS, 0.99), median(lane, LAT_REPS),
	       quantile(lane, LAT_REPS, 0.99), median(wall, LAT_REPS),
	       quantile(wall, LAT_REPS, 0.99));
	bench_out_free(bf, out, mode);
}

static double throughput(const fprep__cuda_config *cfg, const bench_frame *bf,
                         int mode)
{
	static lane_job jobs[TPUT_FRAMES];
	fprep__backend *b;
	lane_waiter w;
	uint8_t *out = bench_out(bf, mode);
	fprep__memreg reg[2];

	b = bench_open(cfg, bf, mode, out, reg);
	lane_waiter_init(&w);
	/* Warm-up. */
	for (int k = 0; k < 8; k++) {
		bench_job(&jobs[k], &w, bf, out + bf->out_bytes * (k % 4), mode,
		          reg);
		b->submit(b, &jobs[k].job);
	}
	lane_wait(&w, 8);
	unsigned base = lane_count(&w);
	uint64_t t0 = now_ns();
	for (int k = 0; k < TPUT_FRAMES; k++) {
		/* Outputs rotate over 4 buffers: the host copy-out is real. */
		bench_job(&jobs[k], &w, bf, out + bf->out_bytes * (k % 4), mode,
		          reg);
		if (b->submit(b, &jobs[k].job) != 0)
			exit(1);
	}
	lane_wait(&w, base + TPUT_FRAMES);
	double s = (double)(now_ns() - t0) / 1e9;
	for (int k = 0; k < TPUT_FRAMES; k++)
		if (jobs[k].job.status != FPREP_OK)
			exit(1);
	b->close(b, 1000);
	bench_out_free(bf, out, mode);
	return TPUT_FRAMES / s;
}

/* stall_probe: one polling thread's gaps between consecutive clock reads. */
typedef struct stall_probe {
	pthread_t t;
	pthread_barrier_t *start;
	uint64_t over10, over30;      /* gaps over 10 and 30 us */
	uint64_t longest_ns, lost_ns; /* the longest gap; sum of those > 2 us */
} stall_probe;

static void *stall_main(void *arg)
{
	stall_probe *p = arg;

	pthread_barrier_wait(p->start);
	uint64_t t0 = now_ns(), prev = t0, t;
	while ((t = now_ns()) - t0 < STALL_NS) {
		uint64_t gap = t - prev;

		prev = t;
		if (gap <= 2000)
			continue;
		p->lost_ns += gap;
		p->over10 += gap > 10000;
		p->over30 += gap > 30000;
		if (gap > p->longest_ns)
			p->longest_ns = gap;
	}
	return NULL;
}

/* stall_report runs 1, then STALL_THREADS, polling threads for STALL_NS and
 * prints what each count of them lost (the worst thread's). */
static void stall_report(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	printf("\nstalls of polling threads (%ld CPUs online): gaps between "
	       "two clock reads, per thread and second\n",
	       cpus);
	printf("%-8s %10s %10s %12s %10s\n", "threads", ">10 us", ">30 us",
	       "longest us", "lost %");
	for (unsigned n = 1; n <= STALL_THREADS; n += STALL_THREADS - 1) {
		stall_probe p[STALL_THREADS];
		pthread_barrier_t start;
		uint64_t o10 = 0, o30 = 0, longest = 0, lost = 0;

		memset(p, 0, sizeof p);
		pthread_barrier_init(&start, NULL, n);
		for (unsigned i = 0; i < n; i++) {
			p[i].start = &start;
			pthread_create(&p[i].t, NULL, stall_main, &p[i]);
		}
		for (unsigned i = 0; i < n; i++) {
			pthread_join(p[i].t, NULL);
			o10 = p[i].over10 > o10 ? p[i].over10 : o10;
			o30 = p[i].over30 > o30 ? p[i].over30 : o30;
			if (p[i].longest_ns > longest)
				longest = p[i].longest_ns;
			lost = p[i].lost_ns > lost ? p[i].lost_ns : lost;
		}
		pthread_barrier_destroy(&start);
		printf("%-8u %10llu %10llu %12.1f %10.3f\n", n,
		       (unsigned long long)o10, (unsigned long long)o30,
		       longest / 1e3, 100.0 * lost / STALL_NS);
	}
}

int main(int argc, char **argv)
{
	char path[1024];
	lane_image im, big = {.w = 1920, .h = 1080};
	bench_frame bf;
	struct cudaDeviceProp prop;
	int c;

	if (fprep__cuda_device_count() == 0) {
		printf("SKIP: no CUDA device\n");
		return 77;
	}
	snprintf(path, sizeof path, "%s/astronaut.png",
	         argc > 1 ? argv[1] : ".");
	im.rgb = stbi_load(path, &im.w, &im.h, &c, 3);
	if (im.rgb == NULL) {
		printf("cannot load %s\n", path);
		return 1;
	}
	big.rgb = malloc((size_t)big.w * big.h * 3);
	for (int y = 0; y < big.h; y++)
		for (int x = 0; x < big.w; x++)
			memcpy(big.rgb + ((size_t)y * big.w + x) * 3,
			       im.rgb + ((size_t)(y * im.h / big.h) * im.w +
			                 (size_t)(x * im.w / big.w)) *
			                        3,
			       3);
	fprep_request_init(&bf.rq, FPREP_PIX_BGR8, 1920, 1080);
	bf.frame = lane_frame_make(&big, FPREP_PIX_BGR8, 0, &bf.rq.src_stride,
	                           &bf.rq.input_size);
	uint32_t shape[4];
	fprep_tensor_shape(&bf.rq, shape, &bf.out_bytes);
	CK(cudaMallocHost((void **)&bf.pinned, bf.rq.input_size));
	memcpy(bf.pinned, bf.frame, bf.rq.input_size);
	bf.shm = shm_alloc(bf.rq.input_size);
	memcpy(bf.shm, bf.frame, bf.rq.input_size);

	CK(cudaGetDeviceProperties(&prop, 0));
	printf("device: %s, sm_%d%d, %d copy engines\n", prop.name, prop.major,
	       prop.minor, prop.asyncEngineCount);

	size_t in_n = bf.rq.input_size, out_n = bf.out_bytes;
	double th = probe(in_n, 1, NULL, 0), td = probe(out_n, 0, NULL, 0);
	printf("\npinned copy probes (median of %d)\n", PROBE_REPS);
	printf("  H2D %9zu bytes (1080p BGR8):        %7.1f us  %5.1f GB/s\n",
	       in_n, th, in_n / th / 1e3);
	printf("  D2H %9zu bytes (640x640x3 f32):     %7.1f us  %5.1f GB/s\n",
	       out_n, td, out_n / td / 1e3);
	fprep__row_plan plan;
	fprep__row_plan_build(&plan, 1080, 360, 0); /* 1080p to 640x360 + pad */
	double tr =
	        plan.ngroups > 0 ? probe(in_n, 1, &plan, bf.rq.src_stride) : th;
	printf("  H2D %9zu bytes (the %u rows read):  %7.1f us  %5.1f GB/s\n",
	       (size_t)plan.rows * bf.rq.src_stride, plan.rows, tr,
	       plan.rows * (double)bf.rq.src_stride / tr / 1e3);
	double dx = duplex_rate(in_n, out_n, NULL, 0);
	printf("  H2D and D2H at once, %d frames:      %7.0f frames/s, "
	       "%.1f GB/s in, %.1f GB/s out\n",
	       DUPLEX_FRAMES, dx, dx * in_n / 1e9, dx * out_n / 1e9);
	double dr = plan.ngroups > 0
	                    ? duplex_rate(in_n, out_n, &plan, bf.rq.src_stride)
	                    : dx;
	printf("  the same with the rows read:           %7.0f frames/s, "
	       "%.1f GB/s in, %.1f GB/s out\n",
	       dr, dr * plan.rows * bf.rq.src_stride / 1e9, dr * out_n / 1e9);

	fprep__cuda_config cfg = {.device = 0,
	                          .slots = 2,
	                          .cache_enabled = 1,
	                          .spin_ns = 1000000};
	printf("\nsingle frame 1080p BGR8 -> 640x640 RGB f32 NCHW letterbox, "
	       "median/p99 of %d (us)\n",
	       LAT_REPS);
	printf("%-20s %11s %11s %11s %13s %13s\n", "path", "H2D", "kernel",
	       "D2H", "lane", "submit->done");
	for (int mode = 0; mode < PATHS; mode++)
		latency(&cfg, &bf, mode);
	printf("  (copy probes: H2D %.1f + D2H %.1f = %.1f us; with the rows "
	       "read, %.1f + %.1f = %.1f us)\n",
	       th, td, th + td, tr, td, tr + td);

	printf("\nthroughput, %d frames queued (frames/s)\n", TPUT_FRAMES);
	printf("%-6s %12s %12s %12s %12s %12s %12s %12s\n", "slots", "inline",
	       "pinned-in", "shm all rows", "shm", "shm mapped", "memfd",
	       "memfd mapped");
	for (unsigned d = 2; d <= 4; d++) {
		cfg.slots = d;
		printf("%-6u", d);
		for (int mode = 0; mode < PATHS; mode++)
			printf(" %12.0f", throughput(&cfg, &bf, mode));
		printf("\n");
	}
	printf("  (H2D probe bound: %.0f frames/s; both directions at once: "
	       "%.0f; with the rows read, both directions: %.0f)\n",
	       1e6 / th, dx, dr);
	printf("allocations by the lanes: %lu\n", fprep__cuda_alloc_count());
	stall_report();
	shm_free(bf.shm, bf.rq.input_size);
	CK(cudaFreeHost(bf.pinned));
	free(bf.frame);
	free(big.rgb);
	stbi_image_free(im.rgb);
	return 0;
}
