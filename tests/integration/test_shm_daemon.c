/*
 * test_shm_daemon.c: the shared-memory path end to end, against a real
 * frameprepd (CPU backend) on a scratch socket, with the public client API.
 *
 *   round trip    real photographs through shared memory equal the inline
 *                 result bit for bit (f32, f16, u8; NCHW and NHWC)
 *   shm reply     the reply also in the output region
 *                 (FPREP_LOC_F_SHM_REPLY), waited for there
 *   async ring    one thread keeps a ring of slots (fprep_ring) in flight
 *                 with fprep_ring_submit; every tensor equals the inline
 *                 one
 *   registration  what REGISTER costs (printed: mapping, and pinning on
 *                 a GPU)
 *   refusals      foreign owner, bad names, out-of-range and overflowing
 *                 offsets, a misaligned f32 output offset, another
 *                 connection's region, unknown ids, the
 *                 region limit, tcp:// -- each answered with an error while
 *                 the daemon keeps serving
 *   shrunk region the client truncates its object: EREGION, daemon alive
 *   kill -9       a killed client's regions leave the daemon's mappings
 *
 * Usage: test_shm_daemon FRAMEPREPD IMAGE_DIR [DEVICE]
 * DEVICE is frameprepd's --device (default cpu; the GPU machine runs it with
 * 0, where shared memory must equal inline bit for bit as well).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stb/stb_image.h>

#include "check.h"
#include "client_util.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"
#include "frameprep/ring.h"
#include "shm_object.h"

static char url[256];
static pid_t daemon_pid;
static const char *device = "cpu";

/* raw_register sends a REGISTER for name/size and returns the reply's
 * status (and region id). */
static int raw_register(fprep_client *c, const char *name, uint64_t size,
                        uint32_t *id, char *msg, size_t msg_size)
{
	fprep_register_request req;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER;
	req.region_size = size;
	snprintf(req.region_name, sizeof(req.region_name), "%s", name);
	return client_register_send(c, &req, id, msg, msg_size);
}

/* frame_status sends req (shm fields set by the caller) and returns the
 * reply's status, the message in msg. */
static int frame_status(fprep_client *c, fprep_request *req, char *msg,
                        size_t msg_size)
{
	fprep_result res;
	int err, status;

	err = fprep_client_request(c, req, NULL, &res);
	if (err)
		return -err;
	status = (int)res.header.status;
	snprintf(msg, msg_size, "%s", res.header.message);
	fprep_result_fini(&res);
	return status;
}

static void test_round_trip(const char *dir)
{
	static const char *const names[] = {"astronaut.png", "coffee.png",
	                                    "camera.png", "chelsea.png"};
	static const uint8_t dtypes[] = {FPREP_DTYPE_F32, FPREP_DTYPE_F16,
	                                 FPREP_DTYPE_U8};
	fprep_client *c = daemon_client(url);
	int cases = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[1024];
		int w, h, n;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		uint8_t *px = stbi_load(path, &w, &h, &n, 3);
		CHECK(px != NULL, "cannot load %s", path);
		if (px == NULL)
			continue;
		for (size_t d = 0; d < sizeof(dtypes); d++) {
			for (int layout = 1; layout <= 2; layout++) {
				fprep_request req;
				fprep_result inl, shm;
				fprep_region *r;
				uint32_t shape[4];
				uint64_t tensor;

				fprep_request_init(&req, FPREP_PIX_RGB8,
				                   (uint32_t)w, (uint32_t)h);
				req.dtype = dtypes[d];
				req.layout = (uint8_t)layout;
				req.out_width = 416;
				req.out_height = 256;
				fprep_tensor_shape(&req, shape, &tensor);
				CHECK(fprep_client_request(c, &req, px, &inl) ==
				                      0 &&
				              inl.header.status == 0,
				      "inline %s", names[i]);
				CHECK(fprep_region_open(
				              &r, c, tensor + req.input_size) ==
				              0,
				      "region: %s", fprep_client_last_error(c));
				uint8_t *base = fprep_region_base(r);
				memset(base, 0xee, tensor);
				memcpy(base + tensor, px, req.input_size);
				fprep_request_set_shm(&req, r, tensor, r, 0,
				                      tensor);
				CHECK(fprep_client_request(c, &req, NULL,
				                           &shm) == 0 &&
				              shm.header.status == 0,
				      "shm %s: %s", names[i],
				      shm.header.message);
				CHECK(shm.header.output_loc == FPREP_LOC_SHM &&
				              shm.header.payload_size == 0 &&
				              shm.header.tensor_size ==
				                      tensor &&
				              (shm.header.flags &
				               FPREP_REPLY_F_INPUT_RELEASED),
				      "shm reply header");
				CHECK(inl.payload_size == tensor &&
				              memcmp(inl.payload, base,
				                     tensor) == 0,
				      "%s dtype %u layout %d: shm tensor "
				      "differs "
				      "from inline",
				      names[i], dtypes[d], layout);
				CHECK(memcmp(shm.header.shape, inl.header.shape,
				             sizeof(shm.header.shape)) == 0 &&
				              shm.header.pad_x ==
				                      inl.header.pad_x &&
				              shm.header.scale_y ==
				                      inl.header.scale_y,
				      "shape/transform differ");
				fprep_result_fini(&inl);
				fprep_result_fini(&shm);
				fprep_region_close(r);
				cases++;
			}
		}
		stbi_image_free(px);
	}
	fprep_client_close(c);
	printf("round trip: %d cases, shared memory == inline bit for bit\n",
	       cases);
}

static double now_ms(void);

/* test_shm_reply: requests that ask for their reply in the output region
 * (FPREP_LOC_F_SHM_REPLY): the tensor equals the inline one, the header
 * in the region is the reply (its id last), requests with and without it
 * alternate on one client, sleeping or polling for the reply
 * (fprep_client_set_spin), and a request the daemon refuses before it
 * resolves the region is still answered at once (through nng). */
static void test_shm_reply(const char *dir)
{
	fprep_client *c = daemon_client(url);
	fprep_request req;
	fprep_result inl, shm;
	fprep_region *r;
	uint64_t tensor, cap, id;
	uint32_t shape[4];
	char path[1024];
	int w, h, n, good = 0;
	double t0;

	snprintf(path, sizeof(path), "%s/%s", dir, "coffee.png");
	uint8_t *px = stbi_load(path, &w, &h, &n, 3);
	CHECK(px != NULL, "cannot load %s", path);
	if (px == NULL) {
		fprep_client_close(c);
		return;
	}
	fprep_request_init(&req, FPREP_PIX_RGB8, (uint32_t)w, (uint32_t)h);
	req.out_width = 320;
	req.out_height = 320;
	fprep_tensor_shape(&req, shape, &tensor);
	CHECK(fprep_client_request(c, &req, px, &inl) == 0 &&
	              inl.header.status == 0,
	      "inline coffee.png");
	cap = tensor + FPREP_REPLY_HEADER_SIZE;
	CHECK(fprep_region_open(&r, c, cap + req.input_size) == 0, "region: %s",
	      fprep_client_last_error(c));
	uint8_t *base = fprep_region_base(r);
	const uint8_t *area = base + cap - FPREP_REPLY_HEADER_SIZE;
	memcpy(base + cap, px, req.input_size);
	for (int i = 0; i < 64; i++) {
		memset(base, 0xee, tensor);
		fprep_request_set_shm(&req, r, cap, r, 0, cap);
		req.shm_reply = (uint8_t)(i % 4 != 3);
		/* The second half polls for its reply before sleeping. */
		fprep_client_set_spin(c, i < 32 ? 0 : 200);
		if (fprep_client_request(c, &req, NULL, &shm) != 0) {
			CHECK(0, "shm_reply request %d: %s", i,
			      fprep_client_last_error(c));
			continue;
		}
		memcpy(&id, area + 8, sizeof(id));
		CHECK(shm.header.status == 0 &&
		              shm.header.tensor_size == tensor &&
		              shm.header.request_id == req.request_id,
		      "shm_reply %d: status %u %s", i, shm.header.status,
		      shm.header.message);
		CHECK(!req.shm_reply || id == req.request_id,
		      "shm_reply %d: the region's header has id %llu, not %llu",
		      i, (unsigned long long)id,
		      (unsigned long long)req.request_id);
		CHECK(memcmp(inl.payload, base, tensor) == 0,
		      "shm_reply %d: tensor differs from inline", i);
		good += shm.header.status == 0 &&
		        memcmp(inl.payload, base, tensor) == 0;
		fprep_result_fini(&shm);
	}
	/* out_capacity without room for the header: refused at decode,
	 * before the region is looked at; the answer comes through nng. */
	fprep_request_set_shm(&req, r, cap, r, 0, tensor + 8);
	req.shm_reply = 1;
	t0 = now_ms();
	CHECK(fprep_client_request(c, &req, NULL, &shm) == 0 &&
	              shm.header.status == FPREP_EINVAL &&
	              strstr(shm.header.message, "SHM_REPLY") != NULL,
	      "short out_capacity: status %u '%s'", shm.header.status,
	      shm.header.message);
	CHECK(now_ms() - t0 < 2000, "the refusal took %.0f ms", now_ms() - t0);
	fprep_result_fini(&shm);
	/* Inline output cannot carry it: refused by the client. */
	fprep_request_set_shm(&req, r, cap, NULL, 0, 0);
	req.shm_reply = 1;
	CHECK(fprep_client_request(c, &req, NULL, &shm) == FPREP_EINVAL,
	      "shm_reply with inline output accepted");
	fprep_result_fini(&inl);
	fprep_region_close(r);
	stbi_image_free(px);
	fprep_client_close(c);
	printf("shm reply: %d of 64 requests equal to inline, their replies "
	       "read from the region\n",
	       good);
}

/* test_shm_reply_pace: a client that sends its next request as soon as
 * its reply is in the region (before nng could have delivered anything)
 * is never taken for one that does not read its replies, even with
 * --max-inflight-per-conn 1 (a connection closed past 2 unanswered): the
 * daemon sends nothing through nng for such a request, so the slot is
 * free once the reply is written. 2000 small frames back to back. */
static void test_shm_reply_pace(const char *exe, const char *dir)
{
	char u[300];
	char *extra[] = {"--max-inflight-per-conn", "1", NULL};
	fprep_request req;
	fprep_result res;
	fprep_region *r;
	uint64_t tensor, cap;
	uint32_t shape[4];
	int ok = 0, n = 2000;
	pid_t pid;

	snprintf(u, sizeof(u), "ipc://%s/pace.sock", dir);
	pid = daemon_start(exe, device, u, extra);
	fprep_client *c = daemon_client(u);
	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = 32;
	req.out_height = 32;
	fprep_tensor_shape(&req, shape, &tensor);
	cap = (tensor + 7) / 8 * 8 + FPREP_REPLY_HEADER_SIZE;
	CHECK(fprep_region_open(&r, c, cap + req.input_size) == 0,
	      "pace region: %s", fprep_client_last_error(c));
	memset((uint8_t *)fprep_region_base(r) + cap, 0x61, req.input_size);
	fprep_client_set_spin(c, 100);
	for (int i = 0; i < n; i++) {
		fprep_request_set_shm(&req, r, cap, r, 0, cap);
		req.shm_reply = 1;
		if (fprep_client_request(c, &req, NULL, &res) != 0) {
			CHECK(0, "pace request %d: %s", i,
			      fprep_client_last_error(c));
			break;
		}
		ok += res.header.status == 0;
		fprep_result_fini(&res);
	}
	CHECK(ok == n, "pace: %d of %d requests answered ok", ok, n);
	/* The asynchronous call cannot wait in the region: refused. */
	fprep_pending *p = NULL;
	CHECK(fprep_client_submit(c, &req, NULL, NULL, NULL, &p) ==
	                      FPREP_EINVAL &&
	              p == NULL,
	      "fprep_client_submit took a request with shm_reply");
	fprep_region_close(r);
	fprep_client_close(c);
	CHECK(daemon_stop(pid) == 0, "pace daemon exit status");
	printf("shm reply pace: %d of %d back-to-back requests answered, "
	       "connection kept\n",
	       ok, n);
}

static void test_async_ring(const char *dir)
{
	enum { SLOTS = 4, FRAMES = 24 };
	fprep_client *c = daemon_client(url);
	fprep_pending *pend[SLOTS] = {0};
	fprep_request req, reqs[SLOTS];
	fprep_result ref, res;
	fprep_ring_config cfg = {0};
	fprep_ring *ring;
	uint32_t shape[4];
	uint64_t tensor;
	char path[1024];
	int w, h, n, ok = 0;
	uint8_t *px;

	snprintf(path, sizeof(path), "%s/%s", dir, "rocket.jpg");
	px = stbi_load(path, &w, &h, &n, 3);
	CHECK(px != NULL, "cannot load %s", path);
	if (px == NULL)
		return;
	fprep_request_init(&req, FPREP_PIX_RGB8, (uint32_t)w, (uint32_t)h);
	fprep_tensor_shape(&req, shape, &tensor);
	CHECK(fprep_client_request(c, &req, px, &ref) == 0, "reference");
	cfg.slots = SLOTS;
	cfg.frame_bytes = req.input_size;
	cfg.tensor_bytes = tensor;
	CHECK(fprep_ring_open(&ring, c, &cfg) == 0, "ring: %s",
	      fprep_client_last_error(c));
	CHECK(fprep_ring_submit(ring, SLOTS, &req, NULL, NULL, &pend[0]) ==
	              FPREP_EINVAL,
	      "slot out of range accepted");
	for (int f = 0; f < FRAMES + SLOTS; f++) {
		unsigned k = (unsigned)f % SLOTS;
		if (pend[k] != NULL) {
			int err = fprep_pending_wait(pend[k], &res);
			int same = memcmp(fprep_ring_tensor(ring, k),
			                  ref.payload, tensor) == 0;
			pend[k] = NULL;
			CHECK(err == 0 && res.header.status == 0 &&
			              res.header.request_id ==
			                      reqs[k].request_id &&
			              (res.header.flags &
			               FPREP_REPLY_F_INPUT_RELEASED),
			      "async reply %d: %s", f,
			      fprep_client_last_error(c));
			CHECK(same, "async slot %u differs", k);
			ok += err == 0 && same;
			fprep_result_fini(&res);
		}
		if (f >= FRAMES)
			continue;
		memset((void *)fprep_ring_tensor(ring, k), 0, tensor);
		memcpy(fprep_ring_frame(ring, k), px, req.input_size);
		reqs[k] = req;
		CHECK(fprep_ring_submit(ring, k, &reqs[k], NULL, NULL,
		                        &pend[k]) == 0,
		      "submit %d", f);
	}
	fprep_result_fini(&ref);
	fprep_ring_close(ring);
	fprep_client_close(c);
	stbi_image_free(px);
	CHECK(ok == FRAMES, "async ring: %d of %d", ok, FRAMES);
	printf("async ring: %d frames over %d slots, all equal to inline\n", ok,
	       SLOTS);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* test_registration_cost prints what registering and unregistering a
 * region costs (the daemon maps it, and on a GPU pins it with
 * cudaHostRegister), median of 3, for a few sizes. */
static void test_registration_cost(void)
{
	static const size_t sizes[] = {1u << 20, 16u << 20, 256u << 20};
	fprep_client *c = daemon_client(url);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double open_ms[3], close_ms[3], t;
		for (int r = 0; r < 3; r++) {
			fprep_region *region;
			t = now_ms();
			int err = fprep_region_open(&region, c, sizes[i]);
			open_ms[r] = now_ms() - t;
			CHECK(err == 0, "region of %zu bytes: %s", sizes[i],
			      fprep_client_last_error(c));
			if (err)
				return;
			t = now_ms();
			fprep_region_close(region);
			close_ms[r] = now_ms() - t;
		}
		for (int r = 0; r < 3; r++)
			for (int q = r + 1; q < 3; q++) {
				if (open_ms[q] < open_ms[r]) {
					t = open_ms[q];
					open_ms[q] = open_ms[r];
					open_ms[r] = t;
				}
				if (close_ms[q] < close_ms[r]) {
					t = close_ms[q];
					close_ms[q] = close_ms[r];
					close_ms[r] = t;
				}
			}
		printf("registration of %4zu MiB: open + REGISTER %.2f ms, "
		       "UNREGISTER + close %.2f ms (median of 3)\n",
		       sizes[i] >> 20, open_ms[1], close_ms[1]);
	}
	fprep_client_close(c);
}

/* make_object creates a shared-memory object of size bytes or ends the
 * program. */
static int make_object(char *name, size_t name_size, const char *tag,
                       size_t size)
{
	int fd = shm_object_make(name, name_size, tag, size);

	if (fd < 0) {
		fprintf(stderr, "shm_open %s: %s\n", name, strerror(errno));
		exit(1);
	}
	return fd;
}

static void test_refusals(void)
{
	fprep_client *a = daemon_client(url), *b = daemon_client(url);
	char name[64], msg[FPREP_MESSAGE_SIZE];
	fprep_request req;
	uint32_t id = 0;
	int fd, st;

	/* Names. */
	st = raw_register(a, "/../etc/passwd", 4096, NULL, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL, "bad name: %d %s", st, msg);
	st = raw_register(a, "/fprep-no-such-object", 4096, NULL, msg,
	                  sizeof(msg));
	CHECK(st == FPREP_EREGION, "missing object: %d %s", st, msg);

	fd = make_object(name, sizeof(name), "r", 1 << 20);
	/* Size bounds. */
	st = raw_register(a, name, 2 << 20, NULL, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL, "larger than the object: %d %s", st, msg);
	st = raw_register(a, name, 0, NULL, msg, sizeof(msg));
	CHECK(st == FPREP_ELIMIT, "size 0: %d %s", st, msg);
	/* Foreign owner: only root can make one. */
	if (geteuid() == 0) {
		CHECK(fchown(fd, 65534, 65534) == 0, "fchown");
		st = raw_register(a, name, 1 << 20, NULL, msg, sizeof(msg));
		CHECK(st == FPREP_EPERM && strstr(msg, "owned by uid"),
		      "foreign owner: %d %s", st, msg);
		CHECK(fchown(fd, 0, 0) == 0, "fchown back");
	} else {
		printf("refusals: foreign owner not checked (needs root to "
		       "chown)\n");
	}
	st = raw_register(a, name, 1 << 20, &id, msg, sizeof(msg));
	CHECK(st == 0 && id != 0, "register: %d %s", st, msg);

	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = req.out_height = 32;
	/* Out of range and overflowing offsets. */
	fprep_request_set_shm(&req, NULL, 0, NULL, 0, 0);
	req.input_loc = FPREP_LOC_SHM;
	req.in_region = id;
	req.in_offset = (1 << 20) - 100;
	st = frame_status(a, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL && strstr(msg, "in_offset"),
	      "offset past the end: %d %s", st, msg);
	req.in_offset = UINT64_MAX - 10;
	st = frame_status(a, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL, "overflowing offset: %d %s", st, msg);
	req.in_offset = 0;
	req.output_loc = FPREP_LOC_SHM;
	req.out_region = id;
	req.out_offset = (1 << 20) - 16;
	req.out_capacity = 32 * 32 * 3 * 4;
	st = frame_status(a, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL && strstr(msg, "out_offset"),
	      "output past the end: %d %s", st, msg);
	req.out_offset = 8192 + 1;
	st = frame_status(a, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL && strstr(msg, "not a multiple of 4"),
	      "misaligned f32 output: %d %s", st, msg);
	req.out_offset = 8192;
	st = frame_status(a, &req, msg, sizeof(msg));
	CHECK(st == 0, "good shm request: %d %s", st, msg);
	/* Another connection's region, and an unknown one. */
	st = frame_status(b, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "other connection's region: %d %s", st, msg);
	req.in_region = req.out_region = id + 1000;
	st = frame_status(a, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "unknown region: %d %s", st, msg);

	/* The client shrinks its object while the daemon uses it. The CPU
	 * backend reads it through the mapping and must refuse; the GPU
	 * backend pinned the pages at registration and its DMA still reaches
	 * them, so it may answer. Either way the daemon lives on. */
	req.in_region = req.out_region = id;
	CHECK(ftruncate(fd, 0) == 0, "ftruncate");
	st = frame_status(a, &req, msg, sizeof(msg));
	if (strcmp(device, "cpu") == 0) {
		CHECK(st == FPREP_EREGION && strstr(msg, "shrank"),
		      "shrunk region: %d %s", st, msg);
		st = frame_status(a, &req, msg, sizeof(msg));
		CHECK(st == FPREP_EREGION, "broken region stays refused: %d %s",
		      st, msg);
	} else {
		CHECK(st == 0 || st == FPREP_EREGION, "shrunk region: %d %s",
		      st, msg);
	}
	daemon_serves(url, "a shrunk region");

	/* UNREGISTER: by another connection, then by the owner, twice. */
	st = client_unregister(b, id, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "unregister by another: %d %s", st, msg);
	st = client_unregister(a, id, msg, sizeof(msg));
	CHECK(st == 0, "unregister: %d %s", st, msg);
	st = client_unregister(a, id, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "unregister twice: %d %s", st, msg);
	close(fd);
	shm_unlink(name);

	/* The per-connection limit (the daemon runs with --max-regions 3). */
	fprep_region *regs[4] = {0};
	for (int i = 0; i < 3; i++)
		CHECK(fprep_region_open(&regs[i], a, 4096) == 0,
		      "region %d: %s", i, fprep_client_last_error(a));
	CHECK(fprep_region_open(&regs[3], a, 4096) == FPREP_ELIMIT,
	      "fourth region: %s", fprep_client_last_error(a));
	for (int i = 0; i < 4; i++)
		fprep_region_close(regs[i]);

	fprep_client_close(a);
	fprep_client_close(b);
	printf("refusals: checked\n");
}

static void test_tcp(const char *exe)
{
	char tcp[64], msg[FPREP_MESSAGE_SIZE], name[64];
	char *extra[] = {"--listen", tcp, NULL};
	fprep_client *c;
	pid_t pid;
	int fd, st;

	snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d",
	         20000 + (int)(getpid() % 20000));
	pid = daemon_start(exe, device, url, extra);
	c = daemon_client(tcp);
	fd = make_object(name, sizeof(name), "t", 4096);
	st = raw_register(c, name, 4096, NULL, msg, sizeof(msg));
	CHECK(st == FPREP_EUNSUPPORTED && strstr(msg, "ipc://"),
	      "tcp register: %d %s", st, msg);
	fprep_client_close(c);
	close(fd);
	shm_unlink(name);
	CHECK(daemon_stop(pid) == 0, "daemon exit status");
	printf("tcp: REGISTER refused\n");
}

/* maps_count counts the daemon's mappings whose path contains needle. */
static int maps_count(pid_t pid, const char *needle)
{
	char path[64], line[1024];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/maps", (long)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static void test_kill9(void)
{
	char needle[64];
	int pfd[2], st, before = -1, after = -1;
	pid_t child;
	char b;

	CHECK(pipe(pfd) == 0, "pipe");
	child = fork();
	if (child == 0) {
		/* A fresh process: nng's threads do not survive fork. */
		char fdarg[16];
		snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
		close(pfd[0]);
		execl("/proc/self/exe", "test_shm_daemon", "--hold", url, fdarg,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &b, 1) == 1, "child registered its regions");
	close(pfd[0]);
	snprintf(needle, sizeof(needle), "/frameprep-%ld-", (long)child);
	before = maps_count(daemon_pid, needle);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	for (int i = 0; i < 100; i++) {
		after = maps_count(daemon_pid, needle);
		if (after == 0)
			break;
		daemon_sleep_ms(20);
	}
	CHECK(before == 2, "daemon maps %d of the child's regions, not 2",
	      before);
	CHECK(after == 0, "after kill -9, %d of the child's mappings remain",
	      after);
	daemon_serves(url, "a killed client");
	printf("kill -9: %d mappings before, %d after\n", before, after);
}

/* check_backend checks that the daemon runs the backend asked for. */
static void check_backend(void)
{
	const char *want = strcmp(device, "cpu") == 0 ? "backend: cpu\n"
	                                              : "backend: cuda\n";
	fprep_client *c = daemon_client(url);
	fprep_result res;

	CHECK(fprep_client_info(c, &res) == 0, "INFO");
	CHECK(res.payload != NULL && strstr(res.payload, want) != NULL,
	      "the daemon does not run the %s", want);
	printf("daemon: %s", want);
	fprep_result_fini(&res);
	fprep_client_close(c);
}

/* hold_regions registers two regions, says so on fd, and waits to be
 * killed (the kill -9 test's client). */
static int hold_regions(const char *u, int fd)
{
	fprep_client *c = daemon_client(u);
	fprep_region *r1, *r2;

	if (fprep_region_open(&r1, c, 1 << 20) != 0 ||
	    fprep_region_open(&r2, c, 1 << 16) != 0)
		return 1;
	if (write(fd, "x", 1) != 1)
		return 1;
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/fprep-shm-XXXXXX";
	char *extra[] = {"--max-regions", "3", NULL};

	if (argc == 4 && strcmp(argv[1], "--hold") == 0)
		return hold_regions(argv[2], atoi(argv[3]));

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: %s FRAMEPREPD IMAGE_DIR [DEVICE]\n",
		        argv[0]);
		return 2;
	}
	if (argc == 4)
		device = argv[3];
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(url, sizeof(url), "ipc://%s/d.sock", dir);
	daemon_pid = daemon_start(argv[1], device, url, extra);
	check_backend();
	test_round_trip(argv[2]);
	test_shm_reply(argv[2]);
	test_shm_reply_pace(argv[1], dir);
	test_async_ring(argv[2]);
	test_registration_cost();
	test_refusals();
	test_kill9();
	CHECK(maps_count(daemon_pid, "/fprep-test-") == 0,
	      "test regions still mapped");
	CHECK(daemon_stop(daemon_pid) == 0, "daemon exit status");
	test_tcp(argv[1]);
	rmdir(dir);
	printf("%d failures\n", check_failures);
	return check_failures ? 1 : 0;
}
