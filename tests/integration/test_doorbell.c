/*
 * test_doorbell.c: doorbells (protocol.h, "Doorbells") end to end, against
 * real frameprepd daemons (CPU backend) on scratch sockets, with the public
 * client API and with entries written by hand.
 *
 *   frames        fprep_client_doorbell, then 50 FRAME requests of varied
 *                 crops of real photographs, sizes, dtypes and layouts with
 *                 frame and tensor in a region: every tensor equals
 *                 fprep_preprocess_cpu bit for bit, and INFO says the
 *                 daemon took (nearly) all of them from the doorbell
 *   echo          an ECHO through the doorbell is answered OK
 *   raw entries   a header of garbage, a FRAME with inline output and a
 *                 FRAME naming another connection's region, posted by
 *                 hand: each answered in its entry with an error naming
 *                 the problem; then a good FRAME in the entry is served
 *   refusals      DOORBELL on an unknown region, an area past the region's
 *                 end, a misaligned offset, too many entries, ending a
 *                 doorbell that is not there, another connection's region,
 *                 and a daemon run with --max-doorbells 0 (EPERM)
 *   no polling    a daemon with --spin-us 0 never polls: requests still
 *                 succeed, and where the kernel has futex_waitv (INFO
 *                 doorbell_wake) every one is rung and taken from the
 *                 doorbell, a hand-written entry too (its wake word ARMED,
 *                 set RUNG, FUTEX_WAKE); where it has not, every one goes
 *                 through nng
 *   audit         issue 30's doorbell cases: an output over its own
 *                 entry refused once (D5); 64 entries posted at once past
 *                 the connection's bound all answered, the connection
 *                 open (D6); 1 s of rings without a post cost a sleeping
 *                 daemon little CPU (D9)
 *   take-back     clients closed right after a request, or right after
 *                 posting an entry by hand, 20 times; a region with a
 *                 doorbell unregistered while the daemon polls it, with a
 *                 request just posted there; the doorbell count follows
 *                 and the daemon keeps serving
 *   shrunk area   the client truncates the object its doorbell is in: the
 *                 daemon (its SIGBUS guard) lives on, serves other
 *                 connections and drops the doorbell
 *   exit          every daemon stops on SIGTERM with status 0
 *
 * Usage: test_doorbell FRAMEPREPD IMAGE_DIR
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <stb/stb_image.h>

#include "check.h"
#include "client_util.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"
#include "shm_object.h"

/* The daemon that polls: --spin-us at its upper bound (100 ms), so that
 * once woken it polls for a tenth of a second after its last event. */
#define SPIN_US "100000"

/* How long a test waits for what the daemon does on its own. */
#define WAIT_MS 5000

static char url[300];
static const char *exe;
static pid_t daemon_pid; /* the daemon on url */

/* A photograph (or, when it cannot be loaded, seeded noise) as RGB8. */
struct image {
	uint8_t *px;
	int w, h;
	int loaded; /* 1: stbi_image_free, 0: free */
};

static struct image images[4];
static int nimages;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* load_images loads the photographs the frames are cut from; any that is
 * missing is replaced by seeded noise (and counted as a failure). */
static void load_images(const char *dir)
{
	static const char *const names[] = {"astronaut.png", "coffee.png",
	                                    "chelsea.png", "camera.png"};
	uint32_t seed = 12345;

	for (int i = 0; i < 4; i++) {
		struct image *im = &images[nimages++];
		char path[1024];
		int n;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		im->px = stbi_load(path, &im->w, &im->h, &n, 3);
		im->loaded = im->px != NULL;
		CHECK(im->px != NULL, "cannot load %s", path);
		if (im->px != NULL)
			continue;
		im->w = 320;
		im->h = 240;
		im->px = malloc((size_t)im->w * im->h * 3);
		REQUIRE(im->px != NULL);
		for (size_t k = 0; k < (size_t)im->w * im->h * 3; k++) {
			seed = seed * 1103515245u + 12345u;
			im->px[k] = (uint8_t)(seed >> 16);
		}
	}
}

/* alive ends the test when the daemon on url is gone (a crash, or a
 * sanitizer that halted it): what would follow is only waiting for
 * timeouts. */
static void alive(const char *where)
{
	int st;

	if (waitpid(daemon_pid, &st, WNOHANG) != daemon_pid)
		return;
	if (WIFEXITED(st))
		fprintf(stderr, "FAIL frameprepd exited with status %d (%s)\n",
		        WEXITSTATUS(st), where);
	else
		fprintf(stderr, "FAIL frameprepd killed by signal %d (%s)\n",
		        WTERMSIG(st), where);
	exit(1);
}

/* client opens a client on u that waits at most 10 s for a reply, or
 * ends the program. */
static fprep_client *client(const char *u)
{
	fprep_client *c = NULL;

	if (strcmp(u, url) == 0)
		alive("before a connection");
	if (fprep_client_open(&c, u, 10000) != 0) {
		fprintf(stderr, "FAIL connect %s: %s\n", u,
		        fprep_client_last_error(NULL));
		exit(1);
	}
	return c;
}

/* info_num returns INFO's numeric value of key, or -1. */
static long long info_num(fprep_client *c, const char *key)
{
	char buf[64];

	if (daemon_info_value(c, key, buf, sizeof(buf)) != 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

/* info_wait asks INFO on a client of u until key reads want, for up to
 * WAIT_MS; returns the last value read. */
static long long info_wait(const char *u, const char *key, long long want)
{
	fprep_client *c = client(u);
	double t0 = now_ms();
	long long v;

	while ((v = info_num(c, key)) != want && now_ms() - t0 < WAIT_MS)
		daemon_sleep_ms(20);
	fprep_client_close(c);
	return v;
}

/* doorbell_raw sends a DOORBELL for region id, entries and offset;
 * returns the status and the message in msg. */
static int doorbell_raw(fprep_client *c, uint32_t id, uint32_t entries,
                        uint64_t offset, char *msg, size_t msg_size)
{
	fprep_register_request req;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_DOORBELL;
	req.region_id = id;
	req.doorbell_entries = entries;
	req.doorbell_offset = offset;
	return client_register_send(c, &req, NULL, msg, msg_size);
}

/* An object of our own, for what fprep_region_open cannot do: outlive
 * the connection that registered it, or be truncated under the daemon. */
struct object {
	char name[64];
	int fd;
	uint8_t *base;
	size_t size;
};

static void object_make(struct object *o, const char *tag, size_t size)
{
	char tag_db[32];

	snprintf(tag_db, sizeof(tag_db), "db-%s", tag);
	o->size = size;
	o->fd = shm_object_make(o->name, sizeof(o->name), tag_db, size);
	REQUIRE(o->fd >= 0);
	o->base =
	        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
	REQUIRE(o->base != MAP_FAILED);
}

/* object_register sends a REGISTER of o (as client_region.c does);
 * returns the status, the region's id in *id. */
static int object_register(fprep_client *c, const struct object *o,
                           uint32_t *id)
{
	fprep_register_request req;
	char msg[FPREP_MESSAGE_SIZE];
	int st;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER;
	req.region_size = o->size;
	snprintf(req.region_name, sizeof(req.region_name), "%s", o->name);
	st = client_register_send(c, &req, id, msg, sizeof(msg));
	CHECK(st == 0 && *id != 0, "REGISTER %s: %d %s", o->name, st, msg);
	return st;
}

static void object_free(struct object *o)
{
	if (o->base != NULL)
		munmap(o->base, o->size);
	close(o->fd);
	shm_unlink(o->name);
}

/* The words of a doorbell area, read and written as atomics: the daemon
 * reads and writes them from its own process at any time. */
static _Atomic uint32_t *area_polling(uint8_t *area)
{
	return (_Atomic uint32_t *)(void *)area;
}

static _Atomic uint32_t *area_wake(uint8_t *area)
{
	return (_Atomic uint32_t *)(void *)(area + FPREP_DOORBELL_WAKE_AT);
}

static uint8_t *area_entry(uint8_t *area, unsigned k)
{
	return area + FPREP_DOORBELL_HEADER_SIZE +
	       (size_t)k * FPREP_DOORBELL_ENTRY_SIZE;
}

static _Atomic uint32_t *entry_state(uint8_t *area, unsigned k)
{
	return (_Atomic uint32_t *)(void *)area_entry(area, k);
}

static _Atomic uint64_t *entry_reply_id(uint8_t *area, unsigned k)
{
	return (_Atomic uint64_t *)(void *)(area_entry(area, k) +
	                                    FPREP_DOORBELL_REPLY_AT + 8);
}

/* No reply yet: what the test writes into an entry's reply request_id
 * before it posts (a garbage header is answered with request_id 0, so 0
 * cannot say "no reply" here). */
#define NO_REPLY UINT64_MAX

/* entry_post writes the 128-byte header hdr into entry k of area and
 * posts it, as protocol.h says a client does. */
static void entry_post(uint8_t *area, unsigned k, const uint8_t *hdr)
{
	memcpy(area_entry(area, k) + FPREP_DOORBELL_REQUEST_AT, hdr,
	       FPREP_REQUEST_HEADER_SIZE);
	atomic_store_explicit(entry_reply_id(area, k), NO_REPLY,
	                      memory_order_relaxed);
	atomic_store(entry_state(area, k), FPREP_DOORBELL_POSTED);
}

/* wake has the daemon poll: an INFO on c (any event starts its spin),
 * then the area's polling word must read 1. Returns 1 when it does. */
static int wake(fprep_client *c, uint8_t *area)
{
	fprep_result res;
	double t0 = now_ms();

	do {
		if (fprep_client_info(c, &res) == 0)
			fprep_result_fini(&res);
		if (atomic_load(area_polling(area)) == 1)
			return 1;
		daemon_sleep_ms(10);
	} while (now_ms() - t0 < WAIT_MS);
	return 0;
}

/* entry_wait waits up to WAIT_MS for entry k's reply (waking the daemon
 * with INFO on c while the entry is still posted and nobody polls) and
 * decodes it into *rep. Returns 0, or -1 when no reply came, or the
 * decode's error. */
static int entry_wait(fprep_client *c, uint8_t *area, unsigned k,
                      fprep_reply_header *rep)
{
	uint8_t buf[FPREP_REPLY_HEADER_SIZE];
	double t0 = now_ms(), last = t0;

	for (;;) {
		uint64_t v = atomic_load_explicit(entry_reply_id(area, k),
		                                  memory_order_acquire);
		if (v != NO_REPLY)
			break;
		if (now_ms() - t0 > WAIT_MS) {
			alive("no reply in a doorbell entry");
			return -1;
		}
		if (now_ms() - last > 50 &&
		    atomic_load(entry_state(area, k)) ==
		            FPREP_DOORBELL_POSTED &&
		    atomic_load(area_polling(area)) == 0) {
			fprep_result res;
			if (fprep_client_info(c, &res) == 0)
				fprep_result_fini(&res);
			last = now_ms();
		}
		daemon_sleep_ms(1);
	}
	memcpy(buf, area_entry(area, k) + FPREP_DOORBELL_REPLY_AT, sizeof(buf));
	return fprep_reply_decode(buf, sizeof(buf), rep);
}

/* A FRAME request over a crop of a photograph and its CPU reference. */
struct job {
	fprep_request req;
	const uint8_t *frame; /* the crop's first pixel in the image */
	uint64_t tensor;      /* bytes */
	uint8_t *ref;         /* fprep_preprocess_cpu's tensor */
};

/* job_make builds request i of a varied series: crop, format, output
 * size, resize, channel order, dtype and layout change with i. */
static void job_make(struct job *j, int i)
{
	const struct image *im = &images[i % nimages];
	uint32_t shape[4];
	int cw = im->w - (i * 29) % (im->w / 2);
	int ch = im->h - (i * 17) % (im->h / 2);
	int x0 = (i * 13) % (im->w - cw + 1);
	int y0 = (i * 7) % (im->h - ch + 1);

	fprep_request_init(&j->req, i % 2 ? FPREP_PIX_RGB8 : FPREP_PIX_BGR8,
	                   (uint32_t)cw, (uint32_t)ch);
	j->req.src_stride = (uint32_t)im->w * 3;
	j->req.input_size = (uint64_t)j->req.src_stride * (uint64_t)(ch - 1) +
	                    (uint64_t)cw * 3;
	j->req.out_width = 64 + (uint32_t)(i * 37) % 257;
	j->req.out_height = 64 + (uint32_t)(i * 53) % 257;
	j->req.resize =
	        i % 5 == 4 ? FPREP_RESIZE_STRETCH : FPREP_RESIZE_LETTERBOX;
	j->req.channel_order = i % 7 == 6 ? FPREP_ORDER_BGR : FPREP_ORDER_RGB;
	j->req.dtype = (uint8_t)(FPREP_DTYPE_F32 + i % 3);
	j->req.layout = (uint8_t)(FPREP_LAYOUT_NCHW + (i / 3) % 2);
	j->req.pad_value = (float)((i * 41) % 256);
	j->frame = im->px + ((size_t)y0 * (size_t)im->w + (size_t)x0) * 3;
	REQUIRE(fprep_tensor_shape(&j->req, shape, &j->tensor) == 0);
	j->ref = malloc(j->tensor);
	REQUIRE(j->ref != NULL);
	REQUIRE(fprep_preprocess_cpu(&j->req, j->frame, j->ref, j->tensor,
	                             NULL) == 0);
}

/* round_page rounds n up to a multiple of 4096. */
static uint64_t round_page(uint64_t n)
{
	return (n + 4095) / 4096 * 4096;
}

/* jobs_region builds n requests of the series, request k being number
 * first + k * step, and opens a region on c for the largest tensor (at 0)
 * and the largest frame (at the returned offset, *toffp). */
static fprep_region *jobs_region(fprep_client *c, struct job *jobs, int n,
                                 int first, int step, uint64_t *toffp)
{
	uint64_t tmax = 0, fmax = 0;
	fprep_region *r = NULL;

	for (int k = 0; k < n; k++) {
		job_make(&jobs[k], first + k * step);
		if (jobs[k].tensor > tmax)
			tmax = jobs[k].tensor;
		if (jobs[k].req.input_size > fmax)
			fmax = jobs[k].req.input_size;
	}
	*toffp = round_page(tmax);
	REQUIRE(fprep_region_open(&r, c, *toffp + fmax) == 0);
	return r;
}

/* shm_request sends j's request with its frame at toff of region r and
 * its tensor at 0 (capacity toff), through fprep_client_request (so
 * through the doorbell when the daemon polls it), and checks the reply
 * and the tensor. Returns 1 when both are right. */
static int shm_request(fprep_client *c, fprep_region *r, uint64_t toff,
                       struct job *j, const char *what, int i)
{
	uint8_t *base = fprep_region_base(r);
	fprep_result res;
	int err, ok;

	memset(base, 0xee, j->tensor);
	memcpy(base + toff, j->frame, j->req.input_size);
	fprep_request_set_shm(&j->req, r, toff, r, 0, toff);
	err = fprep_client_request(c, &j->req, NULL, &res);
	CHECK(err == 0, "%s %d: %s", what, i, fprep_client_last_error(c));
	if (err) {
		alive(what);
		return 0;
	}
	ok = res.header.status == FPREP_OK &&
	     res.header.output_loc == FPREP_LOC_SHM &&
	     res.header.tensor_size == j->tensor &&
	     res.header.payload_size == 0 &&
	     (res.header.flags & FPREP_REPLY_F_INPUT_RELEASED);
	CHECK(ok, "%s %d: status %s (%s), output_loc %u, tensor %llu of %llu",
	      what, i, fprep_err_name((int)res.header.status),
	      res.header.message, res.header.output_loc,
	      (unsigned long long)res.header.tensor_size,
	      (unsigned long long)j->tensor);
	if (ok) {
		ok = memcmp(base, j->ref, j->tensor) == 0;
		CHECK(ok,
		      "%s %d: %ux%u -> %ux%u dtype %u layout %u: tensor "
		      "differs from fprep_preprocess_cpu",
		      what, i, j->req.src_width, j->req.src_height,
		      j->req.out_width, j->req.out_height, j->req.dtype,
		      j->req.layout);
	}
	fprep_result_fini(&res);
	return ok;
}

/* Cases 1 and 2: FRAME and ECHO requests through the library's doorbell
 * on the polling daemon. */
static void test_frames(void)
{
	enum { N = 50 };
	static struct job jobs[N];
	fprep_client *c = client(url);
	fprep_region *r = NULL;
	uint64_t toff;
	long long before, after, doorbells;
	int good = 0, echo_ok = 0;

	r = jobs_region(c, jobs, N, 0, 1, &toff);
	CHECK(fprep_client_doorbell(c, 1) == 0, "fprep_client_doorbell: %s",
	      fprep_client_last_error(c));
	/* Idempotent: a second call has nothing to do. */
	CHECK(fprep_client_doorbell(c, 1) == 0, "fprep_client_doorbell again");
	before = info_num(c, "doorbell_requests");
	CHECK(before >= 0, "INFO has no doorbell_requests");
	/* Back to back, the references computed beforehand: the daemon keeps
	 * polling between two requests. */
	for (int i = 0; i < N; i++)
		good += shm_request(c, r, toff, &jobs[i], "frame", i);
	after = info_num(c, "doorbell_requests");
	doorbells = info_num(c, "doorbells");
	CHECK(good == N, "frames: %d of %d right", good, N);
	CHECK(after - before >= N - 5,
	      "frames: only %lld of %d requests came through the doorbell",
	      after - before, N);
	CHECK(doorbells == 1, "INFO doorbells: %lld, not 1", doorbells);
	printf("frames: %d of %d FRAME requests through fprep_client_request "
	       "equal to fprep_preprocess_cpu, %lld taken from the doorbell, "
	       "doorbells: %lld\n",
	       good, N, after - before, doorbells);

	/* ECHO: right after an INFO the daemon polls, so these go through
	 * the doorbell too. */
	before = info_num(c, "doorbell_requests");
	for (int i = 0; i < 5; i++) {
		fprep_request req = jobs[0].req;
		fprep_result res;
		req.kind = FPREP_KIND_ECHO;
		fprep_request_set_shm(&req, r, toff, r, 0, toff);
		int err = fprep_client_request(c, &req, NULL, &res);
		CHECK(err == 0 && res.header.status == FPREP_OK &&
		              res.header.kind == FPREP_KIND_ECHO &&
		              res.header.tensor_size == jobs[0].tensor,
		      "echo %d: %s", i,
		      err ? fprep_client_last_error(c) : res.header.message);
		if (err == 0) {
			echo_ok += res.header.status == FPREP_OK;
			fprep_result_fini(&res);
		}
	}
	after = info_num(c, "doorbell_requests");
	CHECK(echo_ok == 5 && after - before >= 1,
	      "echo: %d of 5 OK, %lld through the doorbell", echo_ok,
	      after - before);
	printf("echo: %d of 5 ECHO requests OK, %lld taken from the "
	       "doorbell\n",
	       echo_ok, after - before);

	fprep_region_close(r);
	fprep_client_close(c);
	for (int i = 0; i < N; i++)
		free(jobs[i].ref);
	CHECK(info_wait(url, "doorbells", 0) == 0,
	      "the closed client's doorbell is still counted");
}

/* small_job: a 96x64 crop to 48x48, for the cases that need one good
 * request. */
static void small_job(struct job *j)
{
	const struct image *im = &images[0];
	uint32_t shape[4];

	fprep_request_init(&j->req, FPREP_PIX_RGB8, 96, 64);
	j->req.src_stride = (uint32_t)im->w * 3;
	j->req.input_size = (uint64_t)j->req.src_stride * 63 + 96 * 3;
	j->req.out_width = j->req.out_height = 48;
	j->frame = im->px + ((size_t)100 * (size_t)im->w + 100) * 3;
	REQUIRE(fprep_tensor_shape(&j->req, shape, &j->tensor) == 0);
	j->ref = malloc(j->tensor);
	REQUIRE(j->ref != NULL);
	REQUIRE(fprep_preprocess_cpu(&j->req, j->frame, j->ref, j->tensor,
	                             NULL) == 0);
}

/* Case 3: entries written by hand. Region layout: the area (2 entries) at
 * 0, the tensor at 4096, the frame at 4096 + tensor rounded up. */
static void test_raw_entries(void)
{
	fprep_client *c = client(url), *b = client(url);
	fprep_region *r = NULL, *rb = NULL;
	char msg[FPREP_MESSAGE_SIZE];
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	fprep_reply_header rep;
	struct job j;
	uint64_t toff = 4096, foff;
	fprep_request req;
	uint8_t *area;
	int st, served = 0;

	small_job(&j);
	foff = toff + round_page(j.tensor);
	REQUIRE(fprep_region_open(&r, c, foff + j.req.input_size) == 0);
	REQUIRE(fprep_region_open(&rb, b, 32768 + j.req.input_size) == 0);
	area = fprep_region_base(r);
	st = doorbell_raw(c, fprep_region_id(r), 2, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL with 2 entries: %d %s", st, msg);
	CHECK(wake(c, area), "the daemon does not say it polls (polling 0)");

	/* Entry 0: 128 bytes of garbage (no magic). Answered with an
	 * error, and request_id 0 since none could be read. */
	for (int i = 0; i < FPREP_REQUEST_HEADER_SIZE; i++)
		hdr[i] = (uint8_t)(0xa5 ^ (i * 31));
	entry_post(area, 0, hdr);
	/* Entry 1: input in the region, output inline. */
	req = j.req;
	fprep_request_set_shm(&req, r, foff, NULL, 0, 0);
	req.request_id = 0xd00b0001u;
	fprep_request_encode(&req, hdr);
	entry_post(area, 1, hdr);

	st = entry_wait(c, area, 0, &rep);
	CHECK(st == 0 && rep.status != FPREP_OK && rep.message[0] != '\0' &&
	              rep.request_id == 0,
	      "garbage entry: wait %d, status %s, request_id %llu, '%s'", st,
	      fprep_err_name((int)rep.status),
	      (unsigned long long)rep.request_id, rep.message);
	printf("raw entries: garbage header: %s: %s\n",
	       fprep_err_name((int)rep.status), rep.message);
	st = entry_wait(c, area, 1, &rep);
	CHECK(st == 0 && rep.status == FPREP_EINVAL &&
	              rep.request_id == req.request_id &&
	              strstr(rep.message, "output_loc") != NULL,
	      "inline output entry: wait %d, status %s, request_id %llx, "
	      "'%s'",
	      st, fprep_err_name((int)rep.status),
	      (unsigned long long)rep.request_id, rep.message);
	printf("raw entries: inline output: %s: %s\n",
	       fprep_err_name((int)rep.status), rep.message);

	/* Entry 0 again: frame and tensor in a region of connection b. */
	req = j.req;
	fprep_request_set_shm(&req, rb, 32768, rb, 0, 32768);
	req.request_id = 0xd00b0002u;
	fprep_request_encode(&req, hdr);
	CHECK(wake(c, area), "polling 0 before the foreign region entry");
	entry_post(area, 0, hdr);
	st = entry_wait(c, area, 0, &rep);
	CHECK(st == 0 && rep.status == FPREP_EREGION &&
	              rep.request_id == req.request_id &&
	              rep.message[0] != '\0',
	      "another connection's region: wait %d, status %s, '%s'", st,
	      fprep_err_name((int)rep.status), rep.message);
	printf("raw entries: another connection's region: %s: %s\n",
	       fprep_err_name((int)rep.status), rep.message);

	/* Entry 1 again: a good FRAME, answered in the entry, tensor
	 * exact. */
	memset(area + toff, 0xee, j.tensor);
	memcpy(area + foff, j.frame, j.req.input_size);
	req = j.req;
	fprep_request_set_shm(&req, r, foff, r, toff, foff - toff);
	req.request_id = 0xd00b0003u;
	fprep_request_encode(&req, hdr);
	CHECK(wake(c, area), "polling 0 before the good entry");
	entry_post(area, 1, hdr);
	st = entry_wait(c, area, 1, &rep);
	CHECK(st == 0 && rep.status == FPREP_OK &&
	              rep.request_id == req.request_id &&
	              rep.output_loc == FPREP_LOC_SHM &&
	              rep.tensor_size == j.tensor &&
	              memcmp(area + toff, j.ref, j.tensor) == 0,
	      "good entry: wait %d, status %s, '%s', tensor %s", st,
	      fprep_err_name((int)rep.status), rep.message,
	      memcmp(area + toff, j.ref, j.tensor) ? "differs" : "equal");
	served = st == 0 && rep.status == FPREP_OK;
	daemon_serves(url, "errors in doorbell entries");
	printf("raw entries: a good FRAME in the entry %s, the daemon "
	       "serves\n",
	       served ? "answered OK, tensor exact" : "NOT answered right");

	fprep_region_close(rb);
	fprep_region_close(r);
	fprep_client_close(b);
	fprep_client_close(c);
	free(j.ref);
}

/* Case 4: DOORBELL requests the daemon refuses. */
static void test_refusals(const char *dir)
{
	fprep_client *c = client(url), *b = client(url);
	char msg[FPREP_MESSAGE_SIZE], u[300];
	char *off[] = {"--max-doorbells", "0", NULL};
	fprep_region *r = NULL, *rb = NULL;
	long long doorbells;
	uint32_t id;
	pid_t pid;
	int st;

	REQUIRE(fprep_region_open(&r, c, 4096) == 0);
	REQUIRE(fprep_region_open(&rb, b, 4096) == 0);
	id = fprep_region_id(r);
	st = doorbell_raw(c, id + 1000, 1, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "unknown region: %d %s", st, msg);
	st = doorbell_raw(c, fprep_region_id(rb), 1, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "another connection's region: %d %s", st,
	      msg);
	/* 64 + 512 bytes from 4032 end past 4096. */
	st = doorbell_raw(c, id, 1, 4096 - 64, msg, sizeof(msg));
	CHECK(st != FPREP_OK && st > 0, "area past the end (offset): %d %s", st,
	      msg);
	/* 64 + 8 * 512 bytes from 0 end past 4096. */
	st = doorbell_raw(c, id, 8, 0, msg, sizeof(msg));
	CHECK(st != FPREP_OK && st > 0, "area past the end (entries): %d %s",
	      st, msg);
	st = doorbell_raw(c, id, 1, 32, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL, "offset not a multiple of 64: %d %s", st,
	      msg);
	st = doorbell_raw(c, id, FPREP_DOORBELL_ENTRIES_MAX + 1, 0, msg,
	                  sizeof(msg));
	CHECK(st == FPREP_EINVAL, "%d entries: %d %s",
	      FPREP_DOORBELL_ENTRIES_MAX + 1, st, msg);
	st = doorbell_raw(c, id, 0, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "ending a doorbell that is not there: %d %s",
	      st, msg);
	doorbells = info_num(c, "doorbells");
	CHECK(doorbells == 0, "after refusals, INFO doorbells: %lld",
	      doorbells);
	/* Set up, moved, and ended: then ending it again is refused. */
	st = doorbell_raw(c, id, 1, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL: %d %s", st, msg);
	st = doorbell_raw(c, id, 2, 64 * 10, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL moved: %d %s", st, msg);
	doorbells = info_num(c, "doorbells");
	CHECK(doorbells == 1, "one region, one doorbell: INFO says %lld",
	      doorbells);
	st = doorbell_raw(c, id, 0, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL 0 entries: %d %s", st, msg);
	st = doorbell_raw(c, id, 0, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION, "DOORBELL 0 entries twice: %d %s", st, msg);
	fprep_region_close(rb);
	fprep_region_close(r);
	fprep_client_close(b);
	fprep_client_close(c);
	daemon_serves(url, "DOORBELL refusals");

	/* Doorbells turned off. */
	snprintf(u, sizeof(u), "ipc://%s/off.sock", dir);
	pid = daemon_start(exe, "cpu", u, off);
	c = client(u);
	st = fprep_client_doorbell(c, 1);
	CHECK(st == FPREP_EPERM,
	      "fprep_client_doorbell with --max-doorbells "
	      "0: %s",
	      fprep_err_name(st));
	REQUIRE(fprep_region_open(&r, c, 4096) == 0);
	st = doorbell_raw(c, fprep_region_id(r), 1, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EPERM, "DOORBELL with --max-doorbells 0: %d %s", st,
	      msg);
	printf("refusals: unknown and foreign regions, areas past the end, "
	       "bad offset and entries, no doorbell to end: refused; "
	       "--max-doorbells 0: %s (%s)\n",
	       fprep_err_name(st), msg);
	fprep_region_close(r);
	fprep_client_close(c);
	CHECK(daemon_stop(pid) == 0, "--max-doorbells 0 daemon exit status");
}

/* ring_echo posts an ECHO (request id id) in entry 0 of the doorbell
 * area at the start of region own (frame and tensor after the area) by
 * hand and rings the area's wake word as protocol.h says; returns 1 when
 * the reply came back OK in the entry. */
static int ring_echo(fprep_client *c, fprep_region *own, uint64_t id)
{
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE], *area = fprep_region_base(own);
	fprep_reply_header rep;
	fprep_request req;

	fprep_request_init(&req, FPREP_PIX_BGR8, 8, 8);
	req.kind = FPREP_KIND_ECHO;
	req.out_width = req.out_height = 8; /* 768 bytes of tensor */
	fprep_request_set_shm(&req, own, 1024, own, 2048, 1024);
	req.request_id = id;
	fprep_request_encode(&req, hdr);
	entry_post(area, 0, hdr);
	if (atomic_load(area_polling(area)) == 0 &&
	    (atomic_fetch_or(area_wake(area), FPREP_DOORBELL_WAKE_RUNG) &
	     FPREP_DOORBELL_WAKE_ARMED) != 0)
		syscall(SYS_futex, (uint32_t *)(void *)area_wake(area),
		        FUTEX_WAKE, 1, NULL, NULL, 0);
	if (entry_wait(c, area, 0, &rep) != 0)
		return 0;
	if (rep.status != FPREP_OK || rep.request_id != id)
		printf("rung ECHO %llu: status %s, id %llu: %s\n",
		       (unsigned long long)id, fprep_err_name((int)rep.status),
		       (unsigned long long)rep.request_id, rep.message);
	return rep.status == FPREP_OK && rep.request_id == id;
}

/* Case 5: a daemon that never polls (--spin-us 0). */
static void test_no_polling(const char *dir)
{
	char u[300], msg[FPREP_MESSAGE_SIZE], how[64] = "";
	char *extra[] = {"--spin-us", "0", NULL};
	fprep_region *r = NULL, *own = NULL;
	struct job jobs[10];
	uint64_t toff;
	long long taken, doorbells, rings;
	int good = 0, st, rung;
	pid_t pid;

	snprintf(u, sizeof(u), "ipc://%s/nospin.sock", dir);
	pid = daemon_start(exe, "cpu", u, extra);
	fprep_client *c = client(u);
	CHECK(daemon_info_value(c, "doorbell_wake", how, sizeof(how)) == 0,
	      "INFO has no doorbell_wake");
	rung = strcmp(how, "futex_waitv") == 0;
	r = jobs_region(c, jobs, 10, 1, 3, &toff);
	st = fprep_client_doorbell(c, 1);
	CHECK(st == 0,
	      "fprep_client_doorbell on a daemon that does not poll: "
	      "%s",
	      fprep_err_name(st));
	/* An area of our own: its polling word stays 0, its wake word is
	 * armed where the daemon has a waker. */
	REQUIRE(fprep_region_open(&own, c, 4096) == 0);
	st = doorbell_raw(c, fprep_region_id(own), 1, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL: %d %s", st, msg);
	uint8_t *area = fprep_region_base(own);
	CHECK(atomic_load(area_wake(area)) ==
	              (rung ? FPREP_DOORBELL_WAKE_ARMED : 0),
	      "--spin-us 0, doorbell_wake %s: wake word %u", how,
	      atomic_load(area_wake(area)));
	for (int i = 0; i < 10; i++)
		good += shm_request(c, r, toff, &jobs[i], "no polling", i);
	int echoes = 0;
	if (rung)
		for (int i = 0; i < 5; i++)
			echoes += ring_echo(c, own, 0xbe11u + (uint64_t)i);
	CHECK(atomic_load(area_polling(area)) == 0,
	      "--spin-us 0: the area says the daemon polls");
	taken = info_num(c, "doorbell_requests");
	rings = info_num(c, "doorbell_rings");
	doorbells = info_num(c, "doorbells");
	CHECK(good == 10, "no polling: %d of 10 right", good);
	if (rung) {
		CHECK(echoes == 5, "rung by hand: %d of 5 ECHO answered",
		      echoes);
		CHECK(taken == 15 && rings >= 15,
		      "--spin-us 0, rung: %lld requests from doorbells "
		      "(15), %lld rings",
		      taken, rings);
	} else {
		CHECK(taken == 0, "--spin-us 0: %lld requests from doorbells",
		      taken);
	}
	CHECK(doorbells == 2, "--spin-us 0: INFO doorbells %lld, not 2",
	      doorbells);
	printf("no polling (doorbell_wake %s): %d of 10 requests right, "
	       "%d of 5 rung by hand, doorbell_requests %lld, rings %lld, "
	       "polling word 0\n",
	       how, good, echoes, taken, rings);
	fprep_region_close(own);
	fprep_region_close(r);
	fprep_client_close(c);
	for (int i = 0; i < 10; i++)
		free(jobs[i].ref);
	CHECK(daemon_stop(pid) == 0, "--spin-us 0 daemon exit status");
}

/* daemon_cpu_ms returns the CPU time (user + system) process pid has
 * used, in milliseconds, from /proc. */
static long long daemon_cpu_ms(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	REQUIRE(f != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces */
	REQUIRE(p != NULL);
	/* After ")": state is field 3; utime and stime are 14 and 15. */
	REQUIRE(sscanf(p + 2,
	               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
	               "%llu %llu",
	               &ut, &st) == 2);
	return (long long)((ut + st) * 1000 /
	                   (unsigned long long)sysconf(_SC_CLK_TCK));
}

/* Case 5b: the audit's doorbell cases (issue 30). D5: a request whose
 * tensor would be written over its own doorbell area (it could post
 * itself again and be served for ever) is refused in its entry, once.
 * D6: a legal 64-entry area with all 64 posted at once, past the
 * connection's in-flight bound (16): every one answered OK, and the
 * connection stays open (the daemon used to answer 17, refuse 16 and
 * close it). D9: a client that rings its doorbell without posting, as
 * fast as it can, costs the sleeping daemon little CPU: the doorbell is
 * muted (INFO doorbell_mutes). */
/* rings_cost rings a doorbell of c's daemon (pid, --spin-us spin) for
 * 1 s without posting anything and checks what that cost the daemon: at
 * most 0.1 of a core (the target is 0.05; a ring once cost 0.57 of a core
 * at --spin-us 1000). */
static void rings_cost(fprep_client *c, pid_t pid, const char *spin)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep_region *own = NULL;
	long long cpu0, cpu1, rings, mutes;
	double t0, secs;
	unsigned long sent = 0;
	uint8_t *area;
	int st;

	REQUIRE(fprep_region_open(&own, c, 4096) == 0);
	st = doorbell_raw(c, fprep_region_id(own), 1, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL: %d %s", st, msg);
	area = fprep_region_base(own);
	/* The daemon asleep: past its spin. */
	while (atomic_load(area_polling(area)) != 0)
		usleep(1000);
	cpu0 = daemon_cpu_ms(pid);
	t0 = now_ms();
	while (now_ms() - t0 < 1000) {
		atomic_fetch_or(area_wake(area), FPREP_DOORBELL_WAKE_RUNG);
		syscall(SYS_futex, area_wake(area), FUTEX_WAKE, 1, NULL, NULL,
		        0);
		sent++;
	}
	secs = (now_ms() - t0) / 1000;
	cpu1 = daemon_cpu_ms(pid);
	rings = info_num(c, "doorbell_rings");
	mutes = info_num(c, "doorbell_mutes");
	CHECK(mutes >= 1, "D9: the doorbell was never muted");
	CHECK((double)(cpu1 - cpu0) < 100 * secs,
	      "D9 (--spin-us %s): the daemon used %lld ms of CPU in %.2f s "
	      "of rings",
	      spin, cpu1 - cpu0, secs);
	printf("D9 (--spin-us %s): %lu rings without a post in %.2f s: the "
	       "daemon woke %lld times, muted the doorbell %lld times, used "
	       "%lld ms of CPU (%.3f of a core)\n",
	       spin, sent, secs, rings, mutes, cpu1 - cpu0,
	       (double)(cpu1 - cpu0) / 1000 / secs);
	fprep_region_close(own);
}

static void test_audit(const char *dir)
{
	enum { N = 64 };
	fprep_client *c = client(url);
	char msg[FPREP_MESSAGE_SIZE], u[300], how[64] = "";
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	uint64_t area_len = FPREP_DOORBELL_HEADER_SIZE +
	                    (uint64_t)N * FPREP_DOORBELL_ENTRY_SIZE;
	uint64_t toff = round_page(area_len), foff, tstride;
	fprep_reply_header rep;
	fprep_region *r = NULL;
	fprep_request req;
	long long before, after;
	struct job j;
	uint8_t *area;
	int st, ok = 0, busy = 0;

	small_job(&j);
	tstride = round_page(j.tensor);
	foff = toff + (uint64_t)N * tstride;
	REQUIRE(fprep_region_open(&r, c, foff + j.req.input_size) == 0);
	area = fprep_region_base(r);
	memcpy(area + foff, j.frame, j.req.input_size);
	st = doorbell_raw(c, fprep_region_id(r), N, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL with %d entries: %d %s", N, st, msg);

	/* D5: the tensor at offset 64, over entry 0 itself. */
	before = info_num(c, "doorbell_requests");
	req = j.req;
	fprep_request_set_shm(&req, r, foff, r, FPREP_DOORBELL_HEADER_SIZE,
	                      j.tensor);
	req.request_id = 0xd5u;
	fprep_request_encode(&req, hdr);
	CHECK(wake(c, area), "polling 0 before the overlapping entry");
	entry_post(area, 0, hdr);
	st = entry_wait(c, area, 0, &rep);
	CHECK(st == 0 && rep.status == FPREP_EINVAL &&
	              strstr(rep.message, "doorbell area") != NULL,
	      "D5: output over the area: wait %d, status %s, '%s'", st,
	      fprep_err_name((int)rep.status), rep.message);
	daemon_sleep_ms(200);
	after = info_num(c, "doorbell_requests");
	CHECK(after - before == 1,
	      "D5: %lld requests taken from the area for one post",
	      after - before);
	printf("D5: output over its own doorbell area: %s: %s; taken %lld "
	       "time(s)\n",
	       fprep_err_name((int)rep.status), rep.message, after - before);

	/* D6: all 64 entries posted at once. */
	CHECK(wake(c, area), "polling 0 before the 64 entries");
	for (unsigned k = 0; k < N; k++) {
		req = j.req;
		fprep_request_set_shm(&req, r, foff, r, toff + k * tstride,
		                      tstride);
		req.request_id = 0xd6000u + k;
		fprep_request_encode(&req, hdr);
		entry_post(area, k, hdr);
	}
	for (unsigned k = 0; k < N; k++) {
		st = entry_wait(c, area, k, &rep);
		if (st == 0 && rep.status == FPREP_OK &&
		    rep.request_id == 0xd6000u + k &&
		    memcmp(area + toff + k * tstride, j.ref, j.tensor) == 0)
			ok++;
		else if (st == 0 && rep.status == FPREP_EBUSY)
			busy++;
	}
	CHECK(ok == N, "D6: %d of %d entries answered OK (%d EBUSY)", ok, N,
	      busy);
	CHECK(info_num(c, "doorbells") >= 1,
	      "D6: the connection's doorbell is gone (connection closed?)");
	printf("D6: %d entries posted at once (--max-inflight-per-conn 16): "
	       "%d answered OK, %d EBUSY, the connection open\n",
	       N, ok, busy);
	fprep_region_close(r);
	fprep_client_close(c);
	free(j.ref);

	/* D9: a sleeping daemon rung 1 s long without a post, at each
	 * --spin-us (a ring once started a spin of --spin-us). */
	for (int k = 0; k < 3; k++) {
		static const char *const spins[] = {"0", "1000", "100000"};
		char *extra[] = {"--spin-us", (char *)spins[k], NULL};

		snprintf(u, sizeof(u), "ipc://%s/rings%d.sock", dir, k);
		pid_t pid = daemon_start(exe, "cpu", u, extra);
		c = client(u);
		CHECK(daemon_info_value(c, "doorbell_wake", how, sizeof(how)) ==
		              0,
		      "INFO has no doorbell_wake");
		if (strcmp(how, "futex_waitv") == 0)
			rings_cost(c, pid, spins[k]);
		else
			printf("D9: no waker here (doorbell_wake %s): nothing "
			       "rings\n",
			       how);
		fprep_client_close(c);
		CHECK(daemon_stop(pid) == 0, "rings daemon exit status");
	}
}

/* Case 6: doorbells that go while the daemon polls them. Object layout:
 * round i at i * 128 KiB: its area at +0, tensor at +4096, frame at
 * +32768, so that a request of round i still in flight touches nothing of
 * the next. */
static void test_take_back(void)
{
	enum { ROUNDS = 20, STRIDE = 131072 };
	struct object o;
	struct job j;
	long long base_db, db;
	int lib_ok = 0, lib_n = 0, answered = 0, unanswered = 0, bad = 0;
	char msg[FPREP_MESSAGE_SIZE];

	small_job(&j);
	REQUIRE(4096 + j.tensor <= 32768 && 32768 + j.req.input_size <= STRIDE);
	object_make(&o, "tb", (size_t)ROUNDS * STRIDE);
	base_db = info_wait(url, "doorbells", 0);
	CHECK(base_db == 0, "doorbells before take-back: %lld", base_db);
	for (int i = 0; i < ROUNDS; i++) {
		uint8_t *p = o.base + (size_t)i * STRIDE, *area = p;
		fprep_client *c = client(url);
		fprep_request req = j.req;
		fprep_result res;
		uint32_t id = 0;

		if (object_register(c, &o, &id) != 0) {
			fprep_client_close(c);
			continue;
		}
		memset(p + 4096, 0xee, j.tensor);
		memcpy(p + 32768, j.frame, j.req.input_size);
		req.input_loc = req.output_loc = FPREP_LOC_SHM;
		req.in_region = req.out_region = id;
		req.in_offset = (uint64_t)i * STRIDE + 32768;
		req.out_offset = (uint64_t)i * STRIDE + 4096;
		req.out_capacity = 32768 - 4096;
		if (i % 2 == 0) {
			/* The library's doorbell: one request, then close. */
			CHECK(fprep_client_doorbell(c, 1) == 0,
			      "round %d: doorbell: %s", i,
			      fprep_client_last_error(c));
			int err = fprep_client_request(c, &req, NULL, &res);
			int ok = err == 0 && res.header.status == FPREP_OK &&
			         memcmp(p + 4096, j.ref, j.tensor) == 0;
			CHECK(ok, "round %d: %s", i,
			      err ? fprep_client_last_error(c)
			          : res.header.message);
			if (err == 0)
				fprep_result_fini(&res);
			lib_ok += ok;
			lib_n++;
			fprep_client_close(c);
			continue;
		}
		/* By hand: post, and close the connection at once. */
		int st = doorbell_raw(c, id, 1, (uint64_t)i * STRIDE, msg,
		                      sizeof(msg));
		CHECK(st == 0, "round %d: DOORBELL: %d %s", i, st, msg);
		CHECK(wake(c, area), "round %d: the daemon does not poll", i);
		req.version = FPREP_PROTOCOL_VERSION;
		req.request_id = 0xd00b1000u + (unsigned)i;
		uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
		fprep_request_encode(&req, hdr);
		entry_post(area, 0, hdr);
		fprep_client_close(c);
	}
	/* Every hand-posted entry is either still posted (the daemon let it
	 * go with its connection) or answered in the entry: none taken and
	 * left without a reply. */
	for (int i = 1; i < ROUNDS; i += 2) {
		uint8_t *area = o.base + (size_t)i * STRIDE;
		double t0 = now_ms();
		uint64_t v;
		uint32_t s;

		/* The state first: an entry still posted after its reply id
		 * read NO_REPLY was let go (or is taken later, and then
		 * answered, which is no failure either). */
		for (;;) {
			s = atomic_load(entry_state(area, 0));
			v = atomic_load_explicit(entry_reply_id(area, 0),
			                         memory_order_acquire);
			if (v != NO_REPLY || s == FPREP_DOORBELL_POSTED ||
			    now_ms() - t0 > WAIT_MS)
				break;
			daemon_sleep_ms(5);
		}
		if (v == 0xd00b1000u + (unsigned)i)
			answered++;
		else if (v == NO_REPLY && s == FPREP_DOORBELL_POSTED)
			unanswered++;
		else
			bad++;
		CHECK(v == 0xd00b1000u + (unsigned)i ||
		              (v == NO_REPLY && s == FPREP_DOORBELL_POSTED),
		      "round %d: entry state %u, reply id %llx: taken and "
		      "never answered",
		      i, s, (unsigned long long)v);
	}
	db = info_wait(url, "doorbells", base_db);
	CHECK(db == base_db, "closed connections leave %lld doorbells", db);
	daemon_serves(url, "closing connections with doorbells");
	printf("take-back: %d of %d closed right after a doorbell request "
	       "(all OK), %d closed right after posting: %d answered in the "
	       "entry, %d let go, %d lost; doorbells back to %lld\n",
	       lib_ok, lib_n, ROUNDS - lib_n, answered, unanswered, bad, db);
	CHECK(lib_ok == lib_n, "take-back: %d of %d", lib_ok, lib_n);

	/* UNREGISTER of a region whose doorbell is polled, a request just
	 * posted in it: the UNREGISTER succeeds, the request is answered or
	 * let go, and the doorbell is gone. */
	fprep_client *c = client(url);
	fprep_region *r = NULL;
	fprep_request req = j.req;
	uint8_t hdr[FPREP_REQUEST_HEADER_SIZE];
	uint64_t v;
	uint32_t s;
	int st;

	REQUIRE(fprep_region_open(&r, c, STRIDE) == 0);
	uint8_t *area = fprep_region_base(r);
	st = doorbell_raw(c, fprep_region_id(r), 1, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL: %d %s", st, msg);
	db = info_num(c, "doorbells");
	CHECK(db == base_db + 1, "INFO doorbells %lld, not %lld", db,
	      base_db + 1);
	memcpy(area + 32768, j.frame, j.req.input_size);
	fprep_request_set_shm(&req, r, 32768, r, 4096, 32768 - 4096);
	req.request_id = 0xd00b2000u;
	fprep_request_encode(&req, hdr);
	CHECK(wake(c, area), "the daemon does not poll before UNREGISTER");
	entry_post(area, 0, hdr);
	st = client_unregister(c, fprep_region_id(r), msg, sizeof(msg));
	CHECK(st == 0, "UNREGISTER of a polled region: %d %s", st, msg);
	/* The reply comes once the daemon no longer touches the region. */
	v = atomic_load_explicit(entry_reply_id(area, 0), memory_order_acquire);
	s = atomic_load(entry_state(area, 0));
	CHECK(v == req.request_id ||
	              (v == NO_REPLY && s == FPREP_DOORBELL_POSTED),
	      "after UNREGISTER: entry state %u, reply id %llx", s,
	      (unsigned long long)v);
	db = info_num(c, "doorbells");
	CHECK(db == base_db, "after UNREGISTER, INFO doorbells %lld, not %lld",
	      db, base_db);
	printf("take-back: UNREGISTER of a polled region OK, its posted "
	       "request %s, doorbells %lld\n",
	       v == req.request_id ? "answered" : "let go", db);
	/* Its own UNREGISTER is refused now, which it ignores. */
	fprep_region_close(r);
	fprep_client_close(c);
	daemon_serves(url, "UNREGISTER of a polled region");
	object_free(&o);
	free(j.ref);
}

/* Case 7: the client truncates the object its doorbell is in. */
static void test_shrunk(void)
{
	fprep_client *c = client(url), *other = client(url);
	char msg[FPREP_MESSAGE_SIZE];
	long long base_db, db = -1;
	struct object o;
	uint32_t id = 0;
	double t0;
	int st;

	base_db = info_num(other, "doorbells");
	object_make(&o, "shrunk", 8192);
	REQUIRE(object_register(c, &o, &id) == 0);
	st = doorbell_raw(c, id, 4, 0, msg, sizeof(msg));
	CHECK(st == 0, "DOORBELL: %d %s", st, msg);
	CHECK(wake(c, o.base), "the daemon does not poll the area");
	CHECK(info_num(other, "doorbells") == base_db + 1,
	      "the doorbell is not counted");
	/* Ours goes first: touching it after the truncation would fault
	 * here. */
	munmap(o.base, o.size);
	o.base = NULL;
	CHECK(ftruncate(o.fd, 0) == 0, "ftruncate");
	/* Each INFO wakes the loop, which polls the area and finds it
	 * gone. */
	t0 = now_ms();
	while (now_ms() - t0 < WAIT_MS) {
		db = info_num(other, "doorbells");
		if (db == base_db)
			break;
		daemon_sleep_ms(20);
	}
	CHECK(db == base_db, "the shrunk region's doorbell stays: %lld", db);
	daemon_serves(url, "a shrunk doorbell region");
	st = info_num(c, "doorbells") >= 0;
	CHECK(st, "the shrunk region's connection gets no INFO");
	printf("shrunk area: the daemon serves on, doorbells %lld -> %lld\n",
	       base_db + 1, db);
	fprep_client_close(c);
	fprep_client_close(other);
	object_free(&o);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/fprep-doorbell-XXXXXX";
	char *extra[] = {"--spin-us", SPIN_US, NULL};
	int st;

	daemon_args(argc, argv, 3, "FRAMEPREPD IMAGE_DIR");
	exe = argv[1];
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	REQUIRE(mkdtemp(dir) != NULL);
	load_images(argv[2]);
	snprintf(url, sizeof(url), "ipc://%s/d.sock", dir);
	daemon_pid = daemon_start(exe, "cpu", url, extra);

	test_frames();
	test_raw_entries();
	test_refusals(dir);
	test_no_polling(dir);
	test_audit(dir);
	test_take_back();
	test_shrunk();

	alive("at the end");
	st = daemon_stop(daemon_pid);
	CHECK(st == 0, "daemon exit status %d", st);
	printf("exit: the daemons stopped on SIGTERM, the last with status "
	       "%d\n",
	       st);
	for (int i = 0; i < nimages; i++) {
		if (images[i].loaded)
			stbi_image_free(images[i].px);
		else
			free(images[i].px);
	}
	rmdir(dir);
	/* nng frees closed sockets on its own threads: let them finish. */
	nng_fini();
	printf("%d checks, %d failures\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}
