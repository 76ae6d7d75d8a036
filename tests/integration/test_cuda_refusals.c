/*
 * test_cuda_refusals.c: what a daemon without a GPU (CPU backend) answers
 * to CUDA regions, through the public client API, each refusal followed
 * by a normal request that must still succeed:
 *
 *   cpu backend   REGISTER_CUDA: EUNSUPPORTED naming the GPU backend
 *   garbage       region_size 0, cuda_offset + size past 2^64: EINVAL;
 *                 a FRAME naming an unknown CUDA region, or a shm region
 *                 as CUDA: EREGION; an unknown location: EINVAL
 *   limit         --max-cuda-regions 0: ELIMIT
 *   disabled      --allow-cuda-regions=false: EPERM, and INFO says so
 *   tcp://        EUNSUPPORTED naming ipc://
 *   client        fprep_region_open_cuda on host memory: an error with a
 *                 sentence (no driver here, or not device memory)
 *
 * Usage: test_cuda_refusals FRAMEPREPD
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "client_util.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

static char url[256];

/* register_cuda sends a REGISTER_CUDA with a made-up handle; returns the
 * status and copies the reply's message. */
static int register_cuda(fprep_client *c, uint64_t size, uint64_t offset,
                         char *msg, size_t msg_size)
{
	return client_register_made_up(c, offset, size, msg, msg_size);
}

/* frame_status sends a 64x48 frame request as req says (no payload for a
 * region input) and returns the status, the message in msg. */
static int frame_status(fprep_client *c, fprep_request *req, char *msg,
                        size_t msg_size)
{
	static uint8_t px[64 * 48 * 3];
	fprep_result res;
	int err;

	err = fprep_client_request(
	        c, req, req->input_loc == FPREP_LOC_INLINE ? px : NULL, &res);
	return client_outcome(c, err, &res, msg, msg_size);
}

static void test_cpu_backend(void)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep_client *c = daemon_client(url);
	int st;

	st = register_cuda(c, 4096, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EUNSUPPORTED && strstr(msg, "GPU backend"),
	      "cpu backend REGISTER_CUDA: %s (%d) %s", fprep_err_name(st), st,
	      msg);
	printf("cpu backend: %s: %s\n", fprep_err_name(st), msg);
	fprep_client_close(c);
	daemon_serves(url, "REGISTER_CUDA on the cpu backend");
}

static void test_garbage(void)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep_client *c = daemon_client(url);
	fprep_region *shm = NULL;
	fprep_request req;
	int st;

	st = register_cuda(c, 0, 0, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL && strstr(msg, "region_size is 0"),
	      "size 0: %s %s", fprep_err_name(st), msg);
	st = register_cuda(c, 4096, UINT64_MAX - 100, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL && strstr(msg, "overflows"),
	      "offset overflow: %s %s", fprep_err_name(st), msg);

	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = req.out_height = 32;
	req.input_loc = FPREP_LOC_CUDA;
	req.in_region = 77;
	st = frame_status(c, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION && strstr(msg, "in_region 77"),
	      "unknown CUDA input region: %s %s", fprep_err_name(st), msg);

	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = req.out_height = 32;
	req.output_loc = FPREP_LOC_CUDA;
	req.out_region = 78;
	req.out_capacity = 32 * 32 * 3 * 4;
	st = frame_status(c, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EREGION && strstr(msg, "out_region 78"),
	      "unknown CUDA output region: %s %s", fprep_err_name(st), msg);

	/* A shared-memory region named as a CUDA one. */
	st = fprep_region_open(&shm, c, 1 << 16);
	CHECK(st == 0, "shm region: %s", fprep_client_last_error(c));
	if (st == 0) {
		fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
		req.out_width = req.out_height = 32;
		fprep_request_set_regions(&req, shm, 0, NULL, 0, 0);
		CHECK(req.input_loc == FPREP_LOC_SHM, "set_regions: loc %u",
		      req.input_loc);
		req.input_loc = FPREP_LOC_CUDA;
		st = frame_status(c, &req, msg, sizeof(msg));
		CHECK(st == FPREP_EREGION &&
		              strstr(msg, "is a shared-memory region"),
		      "shm region as CUDA: %s %s", fprep_err_name(st), msg);
		fprep_region_close(shm);
	}

	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = req.out_height = 32;
	req.output_loc = 3;
	st = frame_status(c, &req, msg, sizeof(msg));
	CHECK(st == FPREP_EINVAL && strstr(msg, "output_loc 3"),
	      "location 3: %s %s", fprep_err_name(st), msg);
	fprep_client_close(c);
	daemon_serves(url, "garbage CUDA fields");
	printf("garbage: refused\n");
}

static void test_client_api(void)
{
	static uint8_t host[4096];
	fprep_client *c = daemon_client(url);
	fprep_region *r = (fprep_region *)1;
	int st;

	st = fprep_region_open_cuda(&r, c, host, sizeof(host));
	CHECK(st == FPREP_EUNSUPPORTED || st == FPREP_EINVAL,
	      "fprep_region_open_cuda on host memory: %s", fprep_err_name(st));
	CHECK(r == NULL, "no region on failure");
	CHECK(fprep_client_last_error(c)[0] != '\0', "a sentence says why");
	printf("client: %s: %s\n", fprep_err_name(st),
	       fprep_client_last_error(c));
	fprep_client_close(c);
}

/* test_with runs a daemon with extra arguments on u and checks that
 * REGISTER_CUDA is refused with want and a message holding needle. */
static void test_with(const char *exe, const char *u, char *const extra[],
                      int want, const char *needle, const char *what)
{
	char msg[FPREP_MESSAGE_SIZE], val[64];
	fprep_client *c;
	pid_t pid;
	int st;

	pid = daemon_start(exe, "cpu", u, extra);
	c = daemon_client(u);
	st = register_cuda(c, 4096, 0, msg, sizeof(msg));
	CHECK(st == want && strstr(msg, needle), "%s: %s (%d) %s", what,
	      fprep_err_name(st), st, msg);
	if (want == FPREP_EPERM)
		CHECK(daemon_info_value(c, "allow_cuda_regions", val,
		                        sizeof(val)) == 0 &&
		              strcmp(val, "false") == 0,
		      "INFO allow_cuda_regions: %s", val);
	printf("%s: %s: %s\n", what, fprep_err_name(st), msg);
	fprep_client_close(c);
	daemon_serves(u, what);
	CHECK(daemon_stop(pid) == 0, "%s: daemon exit status", what);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/fprep-cudaref-XXXXXX";
	char url2[300], tcp[64];
	char *off[] = {"--allow-cuda-regions=false", NULL};
	char *zero[] = {"--max-cuda-regions", "0", NULL};
	char *tcp_extra[] = {NULL};
	pid_t pid;

	daemon_args(argc, argv, 2, "FRAMEPREPD");
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(url, sizeof(url), "ipc://%s/d.sock", dir);
	pid = daemon_start(argv[1], "cpu", url, NULL);
	test_cpu_backend();
	test_garbage();
	test_client_api();
	CHECK(daemon_stop(pid) == 0, "daemon exit status");

	snprintf(url2, sizeof(url2), "ipc://%s/off.sock", dir);
	test_with(argv[1], url2, off, FPREP_EPERM, "allow-cuda-regions",
	          "disabled");
	snprintf(url2, sizeof(url2), "ipc://%s/zero.sock", dir);
	test_with(argv[1], url2, zero, FPREP_ELIMIT, "max-cuda-regions",
	          "limit 0");
	snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d",
	         20000 + (int)(getpid() % 20000));
	test_with(argv[1], tcp, tcp_extra, FPREP_EUNSUPPORTED, "ipc://",
	          "tcp://");
	snprintf(url2, sizeof(url2), "%s/d.sock", dir);
	unlink(url2);
	rmdir(dir);
	printf("test_cuda_refusals: %s (%d checks, %d failures)\n",
	       check_failures ? "FAIL" : "PASS", check_count, check_failures);
	return check_failures ? 1 : 0;
}
