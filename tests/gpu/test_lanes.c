/*
 * test_lanes.c: two GPU lanes on one device in one daemon (frameprepd
 * --device 0 --lanes 2). 1080p BGR8 frames -> 640x640 f32, inline and
 * over shared memory, four in flight at a time, must equal the CPU
 * reference (fprep_preprocess_cpu) within the GPU tolerance of
 * tests/gpu/test_gpu_backend.c; INFO must list both lanes on the same
 * device, in service, each having run jobs, and the metrics endpoint must
 * count kernels under lane="0" and lane="1" of device="cuda:0".
 *
 * Usage: test_lanes FRAMEPREPD IMAGE_DIR. Exits 77 (skipped) without a
 * GPU. Ends with one PASS/FAIL line.
 */
#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stb/stb_image.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define W        1920
#define H        1080
#define ROUNDS   8 /* of four frames in flight, per path */
#define INFLIGHT 4

/* lanes_frame makes a 1080p BGR8 frame: the photograph scaled (nearest)
 * when it loads, else a gradient. */
static uint8_t *lanes_frame(const char *dir)
{
	char path[1024];
	int w = 0, h = 0, n;
	uint8_t *px, *f = malloc((size_t)W * H * 3);

	REQUIRE(f != NULL);
	snprintf(path, sizeof(path), "%s/astronaut.png", dir);
	px = stbi_load(path, &w, &h, &n, 3);
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++) {
			uint8_t *o = f + ((size_t)y * W + (size_t)x) * 3;

			if (px != NULL) {
				const uint8_t *i =
				        px + ((size_t)(y * h / H) * (size_t)w +
				              (size_t)(x * w / W)) *
				                     3;
				o[0] = i[2]; /* RGB -> BGR */
				o[1] = i[1];
				o[2] = i[0];
			} else {
				o[0] = (uint8_t)x;
				o[1] = (uint8_t)y;
				o[2] = (uint8_t)(x + y);
			}
		}
	printf("frame: %s\n", px != NULL ? path : "gradient");
	stbi_image_free(px);
	return f;
}

/* lanes_bad counts the elements of got off the reference by more than
 * one pixel step after normalisation. */
static int lanes_bad(const fprep_request *rq, const float *got,
                     const float *ref, uint64_t bytes)
{
	double tol = rq->scale / rq->std[0] * 1.0001;
	int bad = 0;

	for (uint64_t i = 0; i < bytes / 4; i++)
		bad += !(fabs((double)got[i] - ref[i]) <= tol);
	return bad;
}

/* lanes_run sends ROUNDS x INFLIGHT frames, inline or each into its own
 * slot of a shared-memory region, and compares every tensor. */
static void lanes_run(fprep_client *c, const uint8_t *frame, const float *ref,
                      uint64_t tensor, int shm)
{
	fprep_request req[INFLIGHT];
	fprep_pending *p[INFLIGHT];
	fprep_region *r = NULL;
	uint64_t slot = tensor + (uint64_t)W * H * 3;
	uint8_t *base = NULL;
	int served = 0;

	if (shm) {
		REQUIRE(fprep_region_open(&r, c, slot * INFLIGHT) == 0);
		base = fprep_region_base(r);
		for (int k = 0; k < INFLIGHT; k++)
			memcpy(base + slot * (uint64_t)k + tensor, frame,
			       (size_t)W * H * 3);
	}
	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < INFLIGHT; k++) {
			fprep_request_init(&req[k], FPREP_PIX_BGR8, W, H);
			req[k].out_width = req[k].out_height = 640;
			if (shm) {
				memset(base + slot * (uint64_t)k, 0xee, tensor);
				fprep_request_set_shm(
				        &req[k], r, slot * (uint64_t)k + tensor,
				        r, slot * (uint64_t)k, tensor);
			}
			REQUIRE(fprep_client_submit(c, &req[k],
			                            shm ? NULL : frame, NULL,
			                            NULL, &p[k]) == 0);
		}
		for (int k = 0; k < INFLIGHT; k++) {
			fprep_result res;
			const float *got;

			if (fprep_pending_wait(p[k], &res) != 0) {
				CHECK(0, "%s frame: %s", shm ? "shm" : "inline",
				      fprep_client_last_error(c));
				continue;
			}
			CHECK(res.header.status == 0, "%s frame: %s",
			      shm ? "shm" : "inline", res.header.message);
			got = shm ? (const float *)(base + slot * (uint64_t)k)
			          : res.payload;
			if (res.header.status == 0) {
				int bad = lanes_bad(&req[k], got, ref, tensor);

				CHECK(bad == 0,
				      "%s frame: %d elements off the CPU "
				      "reference",
				      shm ? "shm" : "inline", bad);
				served++;
			}
			fprep_result_fini(&res);
		}
	}
	if (r != NULL)
		fprep_region_close(r);
	printf("%s: %d frames equal to the CPU reference\n",
	       shm ? "shared memory" : "inline", served);
}

/* lanes_check_info checks INFO's lane lines: two lanes on device 0, both
 * in service and both with jobs. */
static void lanes_check_info(fprep_client *c)
{
	char v[512], key[16];
	long jobs[2] = {0, 0};

	CHECK(daemon_info_value(c, "lanes", v, sizeof(v)) == 0 &&
	              strcmp(v, "2") == 0,
	      "INFO lanes: 2");
	CHECK(daemon_info_value(c, "lanes_in_service", v, sizeof(v)) == 0 &&
	              strcmp(v, "2") == 0,
	      "INFO lanes_in_service: 2");
	for (int k = 0; k < 2; k++) {
		const char *j;

		snprintf(key, sizeof(key), "lane_%d", k);
		if (daemon_info_value(c, key, v, sizeof(v)) != 0) {
			CHECK(0, "INFO has no %s line", key);
			continue;
		}
		printf("%s: %s\n", key, v);
		CHECK(strncmp(v, "device=0 uuid=GPU-", 18) == 0 &&
		              strstr(v, " in_service=1 ") != NULL,
		      "%s: device 0, in service", key);
		j = strstr(v, " jobs=");
		jobs[k] = j != NULL ? atol(j + 6) : 0;
		CHECK(jobs[k] > 0, "%s ran no job", key);
	}
	printf("jobs per lane: %ld and %ld\n", jobs[0], jobs[1]);
}

/* lanes_free_port returns a TCP port of 127.0.0.1 free a moment ago. */
static int lanes_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	REQUIRE(port != 0);
	return port;
}

/* lanes_check_metrics scrapes http://127.0.0.1:port/metrics and checks
 * that each lane counted kernels under its own labels. */
static void lanes_check_metrics(int port)
{
	static char text[1 << 20];
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET};
	size_t n = 0;
	ssize_t r;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
		CHECK(0, "cannot reach the metrics endpoint on port %d", port);
		if (fd >= 0)
			close(fd);
		return;
	}
	while (n < sizeof(text) - 1 &&
	       (r = read(fd, text + n, sizeof(text) - 1 - n)) > 0)
		n += (size_t)r;
	text[n] = '\0';
	close(fd);
	CHECK(strstr(text, "frameprep_gpu_lanes_in_service{device=\"cuda:0\"} "
	                   "2\n") != NULL,
	      "metrics: two lanes in service");
	for (int k = 0; k < 2; k++) {
		char key[160];
		const char *p;
		long count = 0;

		snprintf(key, sizeof(key),
		         "frameprep_stage_duration_seconds_count{device=\"cuda:"
		         "0\",lane=\"%d\",stage=\"kernel\"} ",
		         k);
		p = strstr(text, key);
		if (p != NULL)
			count = atol(p + strlen(key));
		printf("metrics lane %d: %ld kernels\n", k, count);
		CHECK(count > 0, "metrics: no kernel counted for lane %d", k);
	}
}

int main(int argc, char **argv)
{
	char metrics[32];
	char *extra[] = {
	        "--lanes", "2", "--max-inflight", "64", "--metrics-listen",
	        metrics,   NULL};
	char dir[] = "/tmp/fprep-lanes-XXXXXX", url[256];
	int port;
	fprep_request req;
	uint32_t shape[4];
	uint64_t tensor = 0;
	uint8_t *frame;
	float *ref;
	fprep_client *c;
	pid_t pid;
	int ndev = 0;

	daemon_args(argc, argv, 3, "FRAMEPREPD IMAGE_DIR");
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("test_lanes: SKIP (no GPU)\n");
		return 77;
	}
	REQUIRE(mkdtemp(dir) != NULL);
	port = lanes_free_port();
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", port);
	snprintf(url, sizeof(url), "ipc://%s/fp.sock", dir);
	frame = lanes_frame(argv[2]);
	fprep_request_init(&req, FPREP_PIX_BGR8, W, H);
	req.out_width = req.out_height = 640;
	REQUIRE(fprep_tensor_shape(&req, shape, &tensor) == 0);
	ref = malloc(tensor);
	REQUIRE(ref != NULL);
	REQUIRE(fprep_preprocess_cpu(&req, frame, ref, tensor, NULL) == 0);

	pid = daemon_start(argv[1], "0", url, extra);
	c = daemon_client(url);
	lanes_run(c, frame, ref, tensor, 0);
	lanes_run(c, frame, ref, tensor, 1);
	lanes_check_info(c);
	lanes_check_metrics(port);
	fprep_client_close(c);
	CHECK(daemon_stop(pid) == 0, "daemon exit status");
	rmdir(dir);
	free(ref);
	free(frame);
	printf("test_lanes: %s (%d checks, %d failures)\n",
	       check_failures ? "FAIL" : "PASS", check_count, check_failures);
	return check_failures ? 1 : 0;
}
