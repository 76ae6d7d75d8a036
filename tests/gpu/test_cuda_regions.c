/*
 * test_cuda_regions.c: CUDA regions end to end on a GPU: a real
 * frameprepd on device 0, a second one on the CPU backend as the
 * reference, and two client processes.
 *
 *   combinations  a producer process (this program run again with
 *                 --producer) holds a real photograph in its own device
 *                 memory, in shared memory and inline; the consumer (this
 *                 process) owns a batch in its device memory and hands its
 *                 IPC handle to the producer, which registers it: every
 *                 input location (inline, shm, cuda) x output location
 *                 (inline, shm, cuda) equals the CPU reference (f32 NCHW
 *                 and u8 NHWC), the CUDA outputs read by the consumer from
 *                 its own memory as soon as the producer has the reply
 *   bad input     a garbage handle, the handle of a freed allocation, of
 *                 an exited process, the wrong device UUID, sizes and
 *                 offsets past the allocation: each a clear error, and a
 *                 normal request succeeds afterwards
 *   leaks         1,000 register / request / unregister cycles on fresh
 *                 allocations, and a client killed (-9) with its regions
 *                 in use: the device memory in use (INFO
 *                 device_memory_used_bytes, from the daemon's
 *                 cudaMemGetInfo) comes back, and no CUDA region is left
 *                 (cuda_regions_alive 0)
 *
 * Usage: test_cuda_regions FRAMEPREPD IMAGE_DIR
 * Exits 77 (skipped) without a GPU. Ends with one PASS/FAIL line.
 */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stb/stb_image.h>

#include "check.h"
#include "client_util.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define CYCLES      1000
#define LEAK_SLACK  (64ull << 20) /* device bytes that may move meanwhile */
#define BATCH_ALIGN 4096u

/* What the consumer tells the producer about its batch. */
struct batch_msg {
	uint8_t handle[FPREP_CUDA_HANDLE_SIZE];
	uint8_t uuid[FPREP_CUDA_UUID_SIZE];
	uint64_t offset; /* of the batch in its allocation */
	uint64_t size;   /* of the batch */
	uint64_t slot;   /* bytes per batch element */
};

/* What the producer tells the consumer after each request: which element
 * of the batch holds a tensor (-1: none), and the end (k = -2). */
struct done_msg {
	int k;
	int config;
};

struct config {
	const char *name;
	uint8_t dtype, layout;
	uint32_t out_w, out_h;
};

static const struct config configs[] = {
        {"f32 NCHW 640x640", FPREP_DTYPE_F32, FPREP_LAYOUT_NCHW, 640, 640},
        {"u8 NHWC 320x256", FPREP_DTYPE_U8, FPREP_LAYOUT_NHWC, 320, 256},
};
#define NCONFIG (int)(sizeof(configs) / sizeof(configs[0]))

static const char *const loc_names[] = {"inline", "shm", "cuda"};

static char url_gpu[256], url_cpu[256];

static int cuda_ok(cudaError_t e, const char *what)
{
	CHECK(e == cudaSuccess, "%s: %s", what, cudaGetErrorName(e));
	return e == cudaSuccess;
}

static void xwrite(int fd, const void *p, size_t n)
{
	REQUIRE(write(fd, p, n) == (ssize_t)n);
}

static int xread(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* first_image finds a photograph in dir. */
static int first_image(const char *dir, char *path, size_t size)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	char best[256] = "";

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		const char *dot = strrchr(de->d_name, '.');
		if (dot == NULL ||
		    (strcmp(dot, ".png") != 0 && strcmp(dot, ".jpg") != 0))
			continue;
		if (best[0] == '\0' || strcmp(de->d_name, best) < 0)
			snprintf(best, sizeof(best), "%s", de->d_name);
	}
	closedir(d);
	if (best[0] == '\0')
		return -1;
	snprintf(path, size, "%s/%s", dir, best);
	return 0;
}

static void make_request(fprep_request *req, int w, int h, int config)
{
	const struct config *c = &configs[config];

	fprep_request_init(req, FPREP_PIX_RGB8, (uint32_t)w, (uint32_t)h);
	req->dtype = c->dtype;
	req->layout = c->layout;
	req->out_width = c->out_w;
	req->out_height = c->out_h;
	if (c->dtype == FPREP_DTYPE_U8)
		req->scale = 1.0f;
}

static uint64_t tensor_bytes(int config)
{
	fprep_request req;
	uint32_t shape[4];
	uint64_t bytes = 0;

	make_request(&req, 64, 64, config);
	fprep_tensor_shape(&req, shape, &bytes);
	return bytes;
}

/* compare counts the elements of got that differ from the CPU reference
 * by more than the GPU tolerance of tests/gpu/test_gpu_backend.c: one
 * pixel step after normalisation for f32, 1 for u8. */
static int compare(const fprep_request *rq, const void *got, const void *ref,
                   uint64_t bytes)
{
	int bad = 0;

	if (rq->dtype == FPREP_DTYPE_F32) {
		double tol = rq->scale / rq->std[0] * 1.0001;
		for (uint64_t i = 0; i < bytes / 4; i++) {
			double d = fabs((double)((const float *)got)[i] -
			                ((const float *)ref)[i]);
			bad += !(d <= tol);
		}
	} else {
		for (uint64_t i = 0; i < bytes; i++)
			bad += abs((int)((const uint8_t *)got)[i] -
			           (int)((const uint8_t *)ref)[i]) > 1;
	}
	return bad;
}

/* reference asks the CPU daemon for the inline tensor of the frame. */
static void *reference(const uint8_t *px, int w, int h, int config)
{
	fprep_client *c = daemon_client(url_cpu);
	fprep_request req;
	fprep_result res;
	void *out = NULL;

	make_request(&req, w, h, config);
	if (fprep_client_request(c, &req, px, &res) == 0) {
		if (res.header.status == 0 &&
		    (out = malloc(res.payload_size)) != NULL)
			memcpy(out, res.payload, res.payload_size);
		fprep_result_fini(&res);
	}
	fprep_client_close(c);
	REQUIRE(out != NULL);
	return out;
}

/* register_raw sends a REGISTER_CUDA as given; returns the status, the
 * region id in *id and the message in msg. */
static int register_raw(fprep_client *c, const uint8_t *handle,
                        const uint8_t *uuid, uint64_t offset, uint64_t size,
                        uint32_t *id, char *msg, size_t msg_size)
{
	return client_register_cuda(c, handle, uuid, offset, size, id, msg,
	                            msg_size);
}

static void unregister_raw(fprep_client *c, uint32_t id)
{
	fprep_register_request req;
	fprep_result res;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_UNREGISTER;
	req.region_id = id;
	if (fprep_client_register(c, &req, &res) == 0) {
		CHECK(res.header.status == 0, "unregister %u: %s", id,
		      res.header.message);
		fprep_result_fini(&res);
	}
}

/* run_producer: the producer process. It holds the frame in its device
 * memory, in shared memory and inline, registers the consumer's batch
 * (handle from fd_in) and sends every combination; inline and shm
 * results it checks itself, CUDA results the consumer checks. */
static int run_producer(const char *image, int fd_in, int fd_out)
{
	struct batch_msg bm;
	struct done_msg dm;
	fprep_client *c = daemon_client(url_gpu);
	fprep_region *cin = NULL, *sin = NULL, *sout = NULL;
	uint8_t *px, *dev = NULL;
	char msg[FPREP_MESSAGE_SIZE];
	uint32_t batch_id = 0;
	int w, h, n, st, k = 0;
	size_t frame;

	REQUIRE(xread(fd_in, &bm, sizeof(bm)) == 0);
	px = stbi_load(image, &w, &h, &n, 3);
	REQUIRE(px != NULL);
	frame = (size_t)w * (size_t)h * 3;
	/* The frame sits 1 KiB into its allocation: the offset travels. */
	if (!cuda_ok(cudaMalloc((void **)&dev, frame + 4096), "cudaMalloc") ||
	    !cuda_ok(cudaMemcpy(dev + 1024, px, frame, cudaMemcpyHostToDevice),
	             "cudaMemcpy") ||
	    !cuda_ok(cudaDeviceSynchronize(), "sync"))
		return 1;
	st = fprep_region_open_cuda(&cin, c, dev + 1024, frame);
	CHECK(st == 0, "producer fprep_region_open_cuda: %s",
	      fprep_client_last_error(c));
	CHECK(fprep_region_open(&sin, c, frame) == 0, "shm input region");
	CHECK(fprep_region_open(&sout, c, 16u << 20) == 0, "shm out region");
	st = register_raw(c, bm.handle, bm.uuid, bm.offset, bm.size, &batch_id,
	                  msg, sizeof(msg));
	CHECK(st == 0, "producer registers the consumer's batch: %s", msg);
	if (cin == NULL || sin == NULL || sout == NULL || batch_id == 0)
		return 1;
	memcpy(fprep_region_base(sin), px, frame);

	for (int cfg = 0; cfg < NCONFIG; cfg++) {
		uint64_t bytes = tensor_bytes(cfg);
		void *ref = reference(px, w, h, cfg);

		for (int il = 0; il < 3; il++)
			for (int ol = 0; ol < 3; ol++, k++) {
				fprep_request req;
				fprep_result res;
				const void *got = NULL;
				int bad;

				make_request(&req, w, h, cfg);
				if (il == FPREP_LOC_SHM) {
					req.input_loc = FPREP_LOC_SHM;
					req.in_region = fprep_region_id(sin);
				} else if (il == FPREP_LOC_CUDA) {
					req.input_loc = FPREP_LOC_CUDA;
					req.in_region = fprep_region_id(cin);
				}
				if (ol == FPREP_LOC_SHM) {
					req.output_loc = FPREP_LOC_SHM;
					req.out_region = fprep_region_id(sout);
					req.out_offset = 4096;
					req.out_capacity = bytes;
				} else if (ol == FPREP_LOC_CUDA) {
					req.output_loc = FPREP_LOC_CUDA;
					req.out_region = batch_id;
					req.out_offset = (uint64_t)k * bm.slot;
					req.out_capacity = bytes;
				}
				st = fprep_client_request(
				        c, &req,
				        il == FPREP_LOC_INLINE ? px : NULL,
				        &res);
				CHECK(st == 0 && res.header.status == 0,
				      "%s in %s out %s: %s", configs[cfg].name,
				      loc_names[il], loc_names[ol],
				      st ? fprep_client_last_error(c)
				         : res.header.message);
				if (st != 0)
					continue;
				CHECK(res.header.output_loc == ol &&
				              res.header.tensor_size == bytes,
				      "reply output_loc %u tensor_size %llu",
				      res.header.output_loc,
				      (unsigned long long)
				              res.header.tensor_size);
				if (res.header.status == 0 &&
				    ol == FPREP_LOC_INLINE)
					got = res.payload;
				if (res.header.status == 0 &&
				    ol == FPREP_LOC_SHM)
					got = (uint8_t *)fprep_region_base(
					              sout) +
					      4096;
				if (got != NULL) {
					bad = compare(&req, got, ref, bytes);
					CHECK(bad == 0,
					      "%s in %s out %s: %d elements "
					      "differ from the CPU reference",
					      configs[cfg].name, loc_names[il],
					      loc_names[ol], bad);
				}
				fprep_result_fini(&res);
				dm.k = ol == FPREP_LOC_CUDA && st == 0 ? k : -1;
				dm.config = cfg;
				xwrite(fd_out, &dm, sizeof(dm));
				if (dm.k >= 0) {
					char ack;
					REQUIRE(xread(fd_in, &ack, 1) == 0);
				}
				printf("  %-18s in %-6s out %-6s %s\n",
				       configs[cfg].name, loc_names[il],
				       loc_names[ol],
				       dm.k >= 0 ? "(checked by the consumer)"
				                 : "checked");
			}
		free(ref);
	}
	dm.k = -2;
	xwrite(fd_out, &dm, sizeof(dm));
	unregister_raw(c, batch_id);
	fprep_region_close(cin);
	fprep_region_close(sin);
	fprep_region_close(sout);
	fprep_client_close(c);
	cudaFree(dev);
	stbi_image_free(px);
	return check_failures ? 1 : 0;
}

/* spawn runs this program again with args (NULL-terminated). */
static pid_t spawn(const char *self, char *const args[])
{
	char *argv[16] = {(char *)self};
	int n = 1;
	pid_t pid;

	for (int i = 0; args[i] != NULL && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		execv(self, argv);
		_exit(127);
	}
	return pid;
}

static void test_combinations(const char *self, const char *image)
{
	int to_prod[2], from_prod[2], st, seen = 0;
	struct cudaDeviceProp prop;
	struct batch_msg bm;
	struct done_msg dm;
	uint8_t *batch = NULL, *host = NULL, *px;
	char a_in[16], a_out[16];
	cudaIpcMemHandle_t h;
	uint64_t slot = 0;
	void *refs[NCONFIG];
	int w, h_px, n;
	pid_t pid;

	for (int c = 0; c < NCONFIG; c++) {
		uint64_t b = tensor_bytes(c);
		b = (b + BATCH_ALIGN - 1) / BATCH_ALIGN * BATCH_ALIGN;
		if (b > slot)
			slot = b;
	}
	memset(&bm, 0, sizeof(bm));
	bm.slot = slot;
	bm.size = slot * 9 * NCONFIG;
	bm.offset = 256; /* the batch starts inside its allocation */
	if (!cuda_ok(cudaMalloc((void **)&batch, bm.size + 4096),
	             "cudaMalloc batch") ||
	    !cuda_ok(cudaMemset(batch, 0xff, bm.size + 4096), "memset") ||
	    !cuda_ok(cudaIpcGetMemHandle(&h, batch), "cudaIpcGetMemHandle") ||
	    !cuda_ok(cudaGetDeviceProperties(&prop, 0), "properties"))
		return;
	memcpy(bm.handle, &h, sizeof(bm.handle));
	memcpy(bm.uuid, prop.uuid.bytes, sizeof(bm.uuid));
	REQUIRE(pipe(to_prod) == 0 && pipe(from_prod) == 0);
	snprintf(a_in, sizeof(a_in), "%d", to_prod[0]);
	snprintf(a_out, sizeof(a_out), "%d", from_prod[1]);
	char *args[] = {"--producer", url_gpu, url_cpu, (char *)image,
	                a_in,         a_out,   NULL};
	pid = spawn(self, args);
	close(to_prod[0]);
	close(from_prod[1]);
	xwrite(to_prod[1], &bm, sizeof(bm));

	px = stbi_load(image, &w, &h_px, &n, 3);
	REQUIRE(px != NULL);
	for (int c = 0; c < NCONFIG; c++)
		refs[c] = reference(px, w, h_px, c);
	host = malloc(slot);
	REQUIRE(host != NULL);
	while (xread(from_prod[0], &dm, sizeof(dm)) == 0 && dm.k != -2) {
		uint64_t bytes = tensor_bytes(dm.config);
		fprep_request rq;
		int bad;

		if (dm.k < 0)
			continue;
		/* The reply arrived: the tensor is complete, no sync. */
		if (cuda_ok(cudaMemcpy(host, batch + bm.offset + dm.k * slot,
		                       bytes, cudaMemcpyDeviceToHost),
		            "read the batch")) {
			make_request(&rq, w, h_px, dm.config);
			bad = compare(&rq, host, refs[dm.config], bytes);
			CHECK(bad == 0,
			      "consumer: %s element %d: %d elements differ "
			      "from the CPU reference",
			      configs[dm.config].name, dm.k, bad);
		}
		seen++;
		xwrite(to_prod[1], "k", 1);
	}
	CHECK(dm.k == -2, "producer ended early");
	CHECK(seen == 3 * NCONFIG, "consumer checked %d CUDA outputs of %d",
	      seen, 3 * NCONFIG);
	close(to_prod[1]);
	close(from_prod[0]);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "producer failed (status %d)", st);
	for (int c = 0; c < NCONFIG; c++)
		free(refs[c]);
	free(host);
	stbi_image_free(px);
	cudaFree(batch);
	printf("combinations: 3 inputs x 3 outputs x %d configs against the "
	       "CPU reference, %d CUDA outputs read by the consumer\n",
	       NCONFIG, seen);
}

/* expect_refused registers as given and checks the error and its
 * sentence; then a normal request must succeed. */
static void expect_refused(fprep_client *c, const char *what,
                           const uint8_t *handle, const uint8_t *uuid,
                           uint64_t offset, uint64_t size, const char *needle)
{
	char msg[FPREP_MESSAGE_SIZE];
	uint32_t id;
	int st;

	st = register_raw(c, handle, uuid, offset, size, &id, msg, sizeof(msg));
	CHECK(st != 0 && st != FPREP_ETRANSPORT && st != FPREP_ETIMEDOUT &&
	              (needle == NULL || strstr(msg, needle) != NULL),
	      "%s: %s (%d) %s", what, fprep_err_name(st), st, msg);
	if (st == 0)
		unregister_raw(c, id);
	printf("  %-28s %s: %s\n", what, fprep_err_name(st), msg);
	daemon_serves(url_gpu, what);
}

/* exited_handle: a child process allocates, hands out its handle and
 * exits; returns the handle of memory that no longer exists. */
static void exited_handle(const char *self, uint8_t *handle)
{
	int fds[2], st;
	char a_out[16];
	pid_t pid;

	REQUIRE(pipe(fds) == 0);
	snprintf(a_out, sizeof(a_out), "%d", fds[1]);
	char *args[] = {"--export-and-exit", a_out, NULL};
	pid = spawn(self, args);
	close(fds[1]);
	memset(handle, 0, FPREP_CUDA_HANDLE_SIZE);
	CHECK(xread(fds[0], handle, FPREP_CUDA_HANDLE_SIZE) == 0,
	      "exporter sent no handle");
	close(fds[0]);
	waitpid(pid, &st, 0);
}

static int run_export_and_exit(int fd)
{
	cudaIpcMemHandle_t h;
	void *p;

	if (cudaMalloc(&p, 1 << 20) != cudaSuccess ||
	    cudaIpcGetMemHandle(&h, p) != cudaSuccess)
		return 1;
	xwrite(fd, &h, sizeof(h));
	return 0; /* the context goes with the process */
}

static void test_bad_input(const char *self)
{
	fprep_client *c = daemon_client(url_gpu);
	struct cudaDeviceProp prop;
	uint8_t handle[64], garbage[64], uuid[16], wrong[16], dead[64];
	cudaIpcMemHandle_t h;
	const size_t alloc = 8u << 20;
	void *p = NULL, *q = NULL;

	if (!cuda_ok(cudaGetDeviceProperties(&prop, 0), "properties") ||
	    !cuda_ok(cudaMalloc(&p, alloc), "cudaMalloc") ||
	    !cuda_ok(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle"))
		return;
	memcpy(handle, &h, sizeof(handle));
	memcpy(uuid, prop.uuid.bytes, sizeof(uuid));
	memcpy(wrong, uuid, sizeof(wrong));
	wrong[15] ^= 0x5a;
	for (int i = 0; i < 64; i++)
		garbage[i] = (uint8_t)(i * 37 + 11);
	printf("bad input:\n");
	expect_refused(c, "garbage handle", garbage, uuid, 0, 4096, NULL);
	expect_refused(c, "wrong device UUID", handle, wrong, 0, 4096,
	               "not the daemon's GPU");
	expect_refused(c, "size past the allocation", handle, uuid, 0,
	               alloc + 1, "exceeds the allocation");
	expect_refused(c, "offset past the allocation", handle, uuid, alloc, 1,
	               "exceeds the allocation");
	expect_refused(c, "offset + size past it", handle, uuid, alloc - 100,
	               4096, "exceeds the allocation");

	/* A freed allocation's handle. */
	if (cuda_ok(cudaMalloc(&q, 1 << 20), "cudaMalloc") &&
	    cuda_ok(cudaIpcGetMemHandle(&h, q), "cudaIpcGetMemHandle")) {
		memcpy(dead, &h, sizeof(dead));
		cudaFree(q);
		expect_refused(c, "handle of a freed allocation", dead, uuid, 0,
		               4096, NULL);
	}
	exited_handle(self, dead);
	expect_refused(c, "handle of an exited process", dead, uuid, 0, 4096,
	               NULL);
	cudaFree(p);
	fprep_client_close(c);
}

/* used_bytes reads the daemon's INFO: device memory in use and CUDA
 * regions not yet closed. */
static int used_bytes(fprep_client *c, uint64_t *used, unsigned *alive)
{
	char val[64];

	if (daemon_info_value(c, "device_memory_used_bytes", val,
	                      sizeof(val)) != 0)
		return -1;
	*used = strtoull(val, NULL, 10);
	if (daemon_info_value(c, "cuda_regions_alive", val, sizeof(val)) != 0)
		return -1;
	*alive = (unsigned)strtoul(val, NULL, 10);
	return 0;
}

/* settle polls INFO until no CUDA region is alive and the memory in use
 * is within LEAK_SLACK of before (up to 20 s); returns the last reading. */
static uint64_t settle(fprep_client *c, uint64_t before, unsigned *alive)
{
	uint64_t used = 0;

	for (int i = 0; i < 400; i++) {
		if (used_bytes(c, &used, alive) != 0)
			return UINT64_MAX;
		if (*alive == 0 && used <= before + LEAK_SLACK)
			break;
		daemon_sleep_ms(50);
	}
	return used;
}

static int one_frame_into(fprep_client *c, fprep_region *r)
{
	static uint8_t px[160 * 120 * 3];
	fprep_request req;
	fprep_result res;
	int st;

	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i * 13 + (i >> 7));
	fprep_request_init(&req, FPREP_PIX_BGR8, 160, 120);
	req.out_width = req.out_height = 128;
	fprep_request_set_regions(&req, NULL, 0, r, 0, 128 * 128 * 3 * 4);
	st = fprep_client_request(c, &req, px, &res);
	if (st == 0) {
		st = (int)res.header.status;
		fprep_result_fini(&res);
	}
	return st;
}

static void test_cycles(void)
{
	fprep_client *c = daemon_client(url_gpu);
	uint64_t before = 0, after;
	unsigned alive = 0;
	int fails = 0;

	/* Warm-up: the first open sets up the daemon's IPC mappings. */
	for (int i = 0; i < CYCLES + 10; i++) {
		fprep_region *r = NULL;
		void *p = NULL;

		if (i == 10)
			REQUIRE(used_bytes(c, &before, &alive) == 0);
		if (cudaMalloc(&p, 2u << 20) != cudaSuccess) {
			fails++;
			continue;
		}
		if (fprep_region_open_cuda(&r, c, p, 2u << 20) != 0 ||
		    one_frame_into(c, r) != 0)
			fails++;
		fprep_region_close(r);
		cudaFree(p);
	}
	CHECK(fails == 0, "%d of %d register/request/unregister cycles failed",
	      fails, CYCLES + 10);
	after = settle(c, before, &alive);
	CHECK(alive == 0 && after <= before + LEAK_SLACK,
	      "after %d cycles: %u CUDA regions alive, device memory in use "
	      "%llu -> %llu bytes",
	      CYCLES, alive, (unsigned long long)before,
	      (unsigned long long)after);
	printf("cycles: %d register/request/unregister, device memory in use "
	       "%.1f -> %.1f MiB, %u regions alive\n",
	       CYCLES, before / 1048576.0, after / 1048576.0, alive);
	fprep_client_close(c);
}

/* run_hold: a client that registers 64 MiB of its device memory and keeps
 * requests writing into it in flight until it is killed. */
static int run_hold(int fd)
{
	fprep_client *c = daemon_client(url_gpu);
	fprep_region *r = NULL;
	void *p = NULL;

	if (cudaMalloc(&p, 64u << 20) != cudaSuccess ||
	    fprep_region_open_cuda(&r, c, p, 64u << 20) != 0)
		return 1;
	xwrite(fd, "r", 1);
	for (;;)
		(void)one_frame_into(c, r);
}

static void test_kill9(const char *self)
{
	fprep_client *c = daemon_client(url_gpu);
	uint64_t before = 0, during = 0, after;
	unsigned alive = 0;
	char a_out[16], ready = 0;
	int fds[2], st;
	pid_t pid;

	REQUIRE(used_bytes(c, &before, &alive) == 0);
	REQUIRE(pipe(fds) == 0);
	snprintf(a_out, sizeof(a_out), "%d", fds[1]);
	char *args[] = {"--hold", url_gpu, a_out, NULL};
	pid = spawn(self, args);
	close(fds[1]);
	CHECK(xread(fds[0], &ready, 1) == 0 && ready == 'r',
	      "holder did not register");
	close(fds[0]);
	daemon_sleep_ms(300); /* requests in flight */
	used_bytes(c, &during, &alive);
	CHECK(alive >= 1, "the holder's region is not alive (%u)", alive);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	after = settle(c, before, &alive);
	CHECK(alive == 0 && after <= before + LEAK_SLACK,
	      "after kill -9: %u CUDA regions alive, device memory in use "
	      "%llu -> %llu bytes",
	      alive, (unsigned long long)before, (unsigned long long)after);
	printf("kill -9: device memory in use %.1f MiB, %.1f while held, "
	       "%.1f after; %u regions alive\n",
	       before / 1048576.0, during / 1048576.0, after / 1048576.0,
	       alive);
	fprep_client_close(c);
	daemon_serves(url_gpu, "kill -9 of a client");
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/fprep-cudareg-XXXXXX";
	char image[512];
	pid_t gpu, cpu;
	int ndev = 0;

	signal(SIGPIPE, SIG_IGN);
	if (argc == 7 && strcmp(argv[1], "--producer") == 0) {
		snprintf(url_gpu, sizeof(url_gpu), "%s", argv[2]);
		snprintf(url_cpu, sizeof(url_cpu), "%s", argv[3]);
		return run_producer(argv[4], atoi(argv[5]), atoi(argv[6]));
	}
	if (argc == 3 && strcmp(argv[1], "--export-and-exit") == 0)
		return run_export_and_exit(atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "--hold") == 0) {
		snprintf(url_gpu, sizeof(url_gpu), "%s", argv[2]);
		return run_hold(atoi(argv[3]));
	}
	daemon_args(argc, argv, 3, "FRAMEPREPD IMAGE_DIR");
	/* The CUDA runtime is first touched here, after no fork: children
	 * are exec'd afresh. */
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("test_cuda_regions: SKIP (no GPU)\n");
		return 77;
	}
	if (first_image(argv[2], image, sizeof(image)) != 0) {
		fprintf(stderr, "FAIL no photograph in %s\n", argv[2]);
		return 1;
	}
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(url_gpu, sizeof(url_gpu), "ipc://%s/gpu.sock", dir);
	snprintf(url_cpu, sizeof(url_cpu), "ipc://%s/cpu.sock", dir);
	gpu = daemon_start(argv[1], "0", url_gpu, NULL);
	cpu = daemon_start(argv[1], "cpu", url_cpu, NULL);
	printf("image: %s\n", image);
	test_combinations(argv[0], image);
	test_bad_input(argv[0]);
	test_cycles();
	test_kill9(argv[0]);
	CHECK(daemon_stop(gpu) == 0, "GPU daemon exit status");
	CHECK(daemon_stop(cpu) == 0, "CPU daemon exit status");
	printf("test_cuda_regions: %s (%d checks, %d failures)\n",
	       check_failures ? "FAIL" : "PASS", check_count, check_failures);
	return check_failures ? 1 : 0;
}
