/*
 * bench_hosts.c: the machine's ceiling for frames when several GPUs copy at
 * once. Usage: bench_hosts [SECONDS] (default 2 per row).
 *
 * The daemon moves, per 1080p frame, 6,220,800 bytes host to device (a BGR8
 * frame) and 4,915,200 bytes back (a 640x640x3 float32 tensor), and its
 * clients write the frame into shared memory and read the tensor out of it.
 * This program measures what the host allows of that, with no daemon:
 *
 * 1. Each GPU alone: one thread, two streams, a frame's H2D and a tensor's
 *    D2H issued back to back (8 of each in flight), pinned host buffers
 *    (cudaHostAlloc, portable), for SECONDS: frames/s and GB/s each way.
 * 2. The first 1, 2, 4, ... and then all GPUs at once, the same copies on
 *    each: the aggregate, and its ratio to the sum of the GPUs alone. GPUs
 *    behind one PCIe switch uplink, or a host bridge, share its bandwidth
 *    and show it here.
 *    Each count of GPUs runs six ways: whole frames both ways; the bytes
 *    of the rows a 640x640 letterbox reads (a third of the frame's rows)
 *    in and whole tensors out, once as one contiguous copy and once as
 *    frameprepd's row plan copies them (one 2D copy of every third row),
 *    the daemon's own traffic; H2D alone; D2H alone; and the daemon's traffic
 *    with the clients' host traffic beside it: for each GPU one thread
 *    writes frames into a buffer and reads tensors out of another (memcpy,
 *    the bytes a client moves per frame), as fast as it can. The frames/s
 *    the copies keep then is the ceiling a daemon with clients on the same
 *    host can reach.
 * 3. The daemon's traffic from and to other host memory: shared memory
 *    pinned as frameprepd pins a client's region (memfd pages registered
 *    with cudaHostRegister), with 4 KB pages and with MADV_HUGEPAGE; and
 *    16 such frames and tensors a GPU used in turn, as 16 streams with a
 *    region each make the daemon use them. One buffer a GPU stays in the
 *    processor's last-level cache, which DMA reaches (DDIO on Intel);
 *    16 do not, and that row is the ceiling a saturated daemon meets (on
 *    a 4x H200 machine of 2026-11-26: 0.50 of four times one GPU, against
 *    0.90 with one buffer a GPU).
 * Each GPU's PCI address and NUMA node (sysfs) are printed, so a ratio
 * below one can be read against the topology (`nvidia-smi topo -m`).
 * Exit status 0 when it ran, 77 with a message where there is no GPU.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define FRAME_BYTES  ((size_t)1920 * 1080 * 3)
#define TENSOR_BYTES ((size_t)640 * 640 * 3 * 4)
#define ROW_BYTES    ((size_t)1920 * 3)
#define ROWS_READ    360 /* every third row, from row 1 */
#define ROWS_BYTES   (ROW_BYTES * ROWS_READ)
#define DEPTH        8
#define MAX_GPUS     16

/* The kinds of pinned host memory a row copies from and to. */
enum { MEM_HOSTALLOC, MEM_SHM, MEM_SHM_THP, MEM_SHM_RING, MEMS };
static const char *const mem_names[MEMS] = {
        "cudaHostAlloc", "shm 4 KB pages, registered",
        "shm MADV_HUGEPAGE, registered",
        "shm registered, 16 frames and tensors in turn"};
/* MEM_SHM_RING: a GPU's copies go to and from RING frames and tensors in
 * turn, as frameprepd's do for 16 streams each with its own region. */
#define RING 16

#define CK(call)                                                               \
	do {                                                                   \
		cudaError_t ck_e = (call);                                     \
		if (ck_e != cudaSuccess) {                                     \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, \
			        #call, cudaGetErrorName(ck_e));                \
			exit(1);                                               \
		}                                                              \
	} while (0)

typedef struct gpu_side {
	int device;
	void *h_in, *h_out, *d_out;     /* this row's host memory */
	void *m_in[MEMS], *m_out[MEMS]; /* each kind of host memory */
	uint8_t *d_in;
	cudaStream_t s_in, s_out;
	cudaEvent_t ev_in[DEPTH], ev_out[DEPTH];
	uint64_t frames; /* the last row's count */
} gpu_side;

typedef struct host_side {
	uint8_t *src, *frame, *tensor, *dst;
	uint64_t frames;
} host_side;

static gpu_side gpus[MAX_GPUS];
static host_side hosts[MAX_GPUS];
static atomic_int running;
static size_t h2d_bytes, d2h_bytes; /* per frame, this row's */
static int h2d_strided; /* the rows read as one 2D copy, as the lane does */
static int ring;        /* copies in turn to and from RING buffers */
static pthread_barrier_t start;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + (i >> 12) + seed);
}

/* host_alloc returns n bytes of pinned host memory of a kind: from
 * cudaHostAlloc, or shared memory pinned as frameprepd pins a client's
 * region (a memfd's pages mapped shared, cudaHostRegister portable and
 * mapped), with or without MADV_HUGEPAGE (effective where
 * /sys/kernel/mm/transparent_hugepage/shmem_enabled allows it). */
static void *host_alloc(size_t n, int kind)
{
	void *p;
	int fd;

	if (kind == MEM_HOSTALLOC) {
		CK(cudaHostAlloc(&p, n, cudaHostAllocPortable));
		return p;
	}
	fd = memfd_create("bench_hosts", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
		perror("bench_hosts: memfd");
		exit(1);
	}
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("bench_hosts: mmap");
		exit(1);
	}
	if (kind == MEM_SHM_THP)
		(void)madvise(p, n, MADV_HUGEPAGE);
	memset(p, 0, n);
	CK(cudaHostRegister(p, n,
	                    cudaHostRegisterPortable | cudaHostRegisterMapped));
	return p;
}

static void host_free(void *p, size_t n, int kind)
{
	if (kind == MEM_HOSTALLOC) {
		CK(cudaFreeHost(p));
		return;
	}
	CK(cudaHostUnregister(p));
	munmap(p, n);
}

static void gpu_open(gpu_side *g, int device)
{
	g->device = device;
	CK(cudaSetDevice(device));
	for (int m = 0; m < MEMS; m++) {
		size_t k = m == MEM_SHM_RING ? RING : 1;
		g->m_in[m] = host_alloc(k * FRAME_BYTES, m);
		g->m_out[m] = host_alloc(k * TENSOR_BYTES, m);
	}
	g->h_in = g->m_in[MEM_HOSTALLOC];
	g->h_out = g->m_out[MEM_HOSTALLOC];
	CK(cudaMalloc((void **)&g->d_in, FRAME_BYTES));
	CK(cudaMalloc(&g->d_out, TENSOR_BYTES));
	for (int m = 0; m < MEMS; m++)
		fill(g->m_in[m], (m == MEM_SHM_RING ? RING : 1) * FRAME_BYTES,
		     (unsigned)device);
	CK(cudaMemset(g->d_out, 0x5a, TENSOR_BYTES));
	CK(cudaStreamCreateWithFlags(&g->s_in, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&g->s_out, cudaStreamNonBlocking));
	for (int k = 0; k < DEPTH; k++) {
		CK(cudaEventCreateWithFlags(&g->ev_in[k],
		                            cudaEventDisableTiming));
		CK(cudaEventCreateWithFlags(&g->ev_out[k],
		                            cudaEventDisableTiming));
	}
}

static void gpu_close(gpu_side *g)
{
	CK(cudaSetDevice(g->device));
	for (int k = 0; k < DEPTH; k++) {
		CK(cudaEventDestroy(g->ev_in[k]));
		CK(cudaEventDestroy(g->ev_out[k]));
	}
	CK(cudaStreamDestroy(g->s_in));
	CK(cudaStreamDestroy(g->s_out));
	CK(cudaFree(g->d_in));
	CK(cudaFree(g->d_out));
	for (int m = 0; m < MEMS; m++) {
		size_t k = m == MEM_SHM_RING ? RING : 1;
		host_free(g->m_in[m], k * FRAME_BYTES, m);
		host_free(g->m_out[m], k * TENSOR_BYTES, m);
	}
}

/* gpu_main keeps DEPTH frames' copies in flight on its GPU until running
 * drops to 0, counting the frames whose H2D and D2H both ended. */
static void *gpu_main(void *arg)
{
	gpu_side *g = arg;
	uint64_t issued = 0, done = 0;

	CK(cudaSetDevice(g->device));
	pthread_barrier_wait(&start);
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		int k = (int)(issued % DEPTH);
		if (issued - done == DEPTH) {
			CK(cudaEventSynchronize(g->ev_in[k]));
			CK(cudaEventSynchronize(g->ev_out[k]));
			done++;
		}
		size_t turn = ring ? issued % RING : 0;
		const uint8_t *h_in =
		        (const uint8_t *)g->h_in + turn * FRAME_BYTES;
		uint8_t *h_out = (uint8_t *)g->h_out + turn * TENSOR_BYTES;
		if (h2d_strided)
			CK(cudaMemcpy2DAsync(g->d_in + ROW_BYTES, 3 * ROW_BYTES,
			                     h_in + ROW_BYTES, 3 * ROW_BYTES,
			                     ROW_BYTES, ROWS_READ,
			                     cudaMemcpyHostToDevice, g->s_in));
		else if (h2d_bytes)
			CK(cudaMemcpyAsync(g->d_in, h_in, h2d_bytes,
			                   cudaMemcpyHostToDevice, g->s_in));
		CK(cudaEventRecord(g->ev_in[k], g->s_in));
		if (d2h_bytes)
			CK(cudaMemcpyAsync(h_out, g->d_out, d2h_bytes,
			                   cudaMemcpyDeviceToHost, g->s_out));
		CK(cudaEventRecord(g->ev_out[k], g->s_out));
		issued++;
	}
	CK(cudaStreamSynchronize(g->s_in));
	CK(cudaStreamSynchronize(g->s_out));
	g->frames = issued;
	return NULL;
}

/* host_main moves a client's bytes per frame (a frame written into shared
 * memory, a tensor read out of it) until running drops to 0. */
static void *host_main(void *arg)
{
	host_side *h = arg;
	uint64_t n = 0;

	pthread_barrier_wait(&start);
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		memcpy(h->frame, h->src, FRAME_BYTES);
		memcpy(h->dst, h->tensor, TENSOR_BYTES);
		n++;
	}
	h->frames = n;
	return NULL;
}

/* run_row copies on the first ngpu GPUs (and moves host bytes beside them
 * when with_host) for secs; returns the GPUs' aggregate frames/s and sets
 * *host_fps to the host threads' aggregate. */
static double run_row(int ngpu, int with_host, double secs, double *host_fps)
{
	pthread_t tg[MAX_GPUS], th[MAX_GPUS];
	int nh = with_host ? ngpu : 0;
	double t0, t1;
	uint64_t frames = 0, hframes = 0;

	pthread_barrier_init(&start, NULL, (unsigned)(ngpu + nh + 1));
	atomic_store(&running, 1);
	for (int i = 0; i < ngpu; i++)
		pthread_create(&tg[i], NULL, gpu_main, &gpus[i]);
	for (int i = 0; i < nh; i++)
		pthread_create(&th[i], NULL, host_main, &hosts[i]);
	pthread_barrier_wait(&start);
	t0 = now_s();
	while (now_s() - t0 < secs) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&running, 0);
	for (int i = 0; i < ngpu; i++) {
		pthread_join(tg[i], NULL);
		frames += gpus[i].frames;
	}
	for (int i = 0; i < nh; i++) {
		pthread_join(th[i], NULL);
		hframes += hosts[i].frames;
	}
	t1 = now_s();
	pthread_barrier_destroy(&start);
	if (host_fps)
		*host_fps = hframes / (t1 - t0);
	return frames / (t1 - t0);
}

/* The ways each count of GPUs runs (the opening comment, 2.). */
#define WAYS 10
static const struct {
	const char *name;
	size_t h2d, d2h;
	int strided, host, mem;
} ways[WAYS] = {
        {"whole frame in, tensor out", FRAME_BYTES, TENSOR_BYTES, 0, 0, 0},
        {"rows read in (contiguous), tensor out", ROWS_BYTES, TENSOR_BYTES, 0,
         0, 0},
        {"rows read in (2D, as the lane), tensor out", ROWS_BYTES, TENSOR_BYTES,
         1, 0, 0},
        {"H2D alone (whole frame)", FRAME_BYTES, 0, 0, 0, 0},
        {"D2H alone (tensor)", 0, TENSOR_BYTES, 0, 0, 0},
        {"rows read in (2D), tensor out, clients' memcpy", ROWS_BYTES,
         TENSOR_BYTES, 1, 1, 0},
        {"rows read in (2D), tensor out", ROWS_BYTES, TENSOR_BYTES, 1, 0,
         MEM_SHM},
        {"rows read in (2D), tensor out", ROWS_BYTES, TENSOR_BYTES, 1, 0,
         MEM_SHM_THP},
        {"rows read in (2D), tensor out", ROWS_BYTES, TENSOR_BYTES, 1, 0,
         MEM_SHM_RING},
        {"whole frame in, tensor out", FRAME_BYTES, TENSOR_BYTES, 0, 0,
         MEM_SHM_RING},
};

static void print_topology(int n)
{
	for (int i = 0; i < n; i++) {
		char bus[32] = "?", path[128], node[16] = "?";
		FILE *f;
		if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) {
			for (char *c = bus; *c; c++)
				if (*c >= 'A' && *c <= 'F')
					*c = (char)(*c - 'A' + 'a');
			snprintf(path, sizeof path,
			         "/sys/bus/pci/devices/%s/numa_node", bus);
			if ((f = fopen(path, "r"))) {
				if (!fgets(node, sizeof node, f))
					strcpy(node, "?");
				node[strcspn(node, "\n")] = 0;
				fclose(f);
			}
		}
		printf("GPU %d: pci %s numa_node %s\n", i, bus, node);
	}
	{
		char line[128] = "?";
		FILE *f = fopen(
		        "/sys/kernel/mm/transparent_hugepage/shmem_enabled",
		        "r");
		if (f) {
			if (!fgets(line, sizeof line, f))
				strcpy(line, "?");
			fclose(f);
		}
		line[strcspn(line, "\n")] = 0;
		printf("transparent_hugepage/shmem_enabled: %s\n", line);
	}
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	double alone[MAX_GPUS], sum_alone = 0, one[WAYS] = {0};
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		fprintf(stderr, "bench_hosts: no CUDA device: skipped\n");
		return 77;
	}
	if (n > MAX_GPUS)
		n = MAX_GPUS;
	if (secs <= 0)
		secs = 2.0;
	print_topology(n);
	for (int i = 0; i < n; i++) {
		gpu_open(&gpus[i], i);
		hosts[i].src = malloc(FRAME_BYTES);
		hosts[i].frame = malloc(FRAME_BYTES);
		hosts[i].tensor = malloc(TENSOR_BYTES);
		hosts[i].dst = malloc(TENSOR_BYTES);
		if (!hosts[i].src || !hosts[i].frame || !hosts[i].tensor ||
		    !hosts[i].dst) {
			fprintf(stderr, "bench_hosts: out of memory\n");
			return 1;
		}
		fill(hosts[i].src, FRAME_BYTES, 7);
		fill(hosts[i].tensor, TENSOR_BYTES, 9);
		memset(hosts[i].frame, 0, FRAME_BYTES);
		memset(hosts[i].dst, 0, TENSOR_BYTES);
	}
	/* Each GPU alone: one device's copies, the others idle. */
	h2d_bytes = FRAME_BYTES;
	d2h_bytes = TENSOR_BYTES;
	for (int i = 0; i < n; i++) {
		gpu_side keep = gpus[0];
		gpus[0] = gpus[i];
		alone[i] = run_row(1, 0, secs, NULL);
		gpus[i] = gpus[0];
		gpus[0] = keep;
		sum_alone += alone[i];
		printf("alone GPU %d: %.0f frames/s (H2D %.1f GB/s + D2H %.1f "
		       "GB/s)\n",
		       i, alone[i], alone[i] * FRAME_BYTES / 1e9,
		       alone[i] * TENSOR_BYTES / 1e9);
	}
	printf("\n| GPUs | copies | frames/s | GB/s H2D + D2H | "
	       "vs GPUs x one GPU | host threads' frames/s |\n");
	printf("| --- | --- | --- | --- | --- | --- |\n");
	for (int g = 1; g <= n; g = g < n && g * 2 > n ? n : g * 2) {
		for (int w = 0; w < WAYS; w++) {
			double hf = 0, f;
			h2d_bytes = ways[w].h2d;
			d2h_bytes = ways[w].d2h;
			h2d_strided = ways[w].strided;
			ring = ways[w].mem == MEM_SHM_RING;
			for (int i = 0; i < g; i++) {
				gpus[i].h_in = gpus[i].m_in[ways[w].mem];
				gpus[i].h_out = gpus[i].m_out[ways[w].mem];
			}
			f = run_row(g, ways[w].host, secs, &hf);
			if (g == 1)
				one[w] = f;
			printf("| %d | %s, %s | %.0f | %.1f + %.1f | %.2f | "
			       "%.0f "
			       "|\n",
			       g, ways[w].name, mem_names[ways[w].mem], f,
			       f * h2d_bytes / 1e9, f * d2h_bytes / 1e9,
			       f / (g * one[w]), hf);
		}
		if (g == n)
			break;
	}
	printf("\nsum of the GPUs alone: %.0f frames/s\n", sum_alone);
	for (int i = 0; i < n; i++) {
		gpu_close(&gpus[i]);
		free(hosts[i].src);
		free(hosts[i].frame);
		free(hosts[i].tensor);
		free(hosts[i].dst);
	}
	return 0;
}
