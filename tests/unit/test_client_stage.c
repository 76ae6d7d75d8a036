/*
 * test_client_stage.c: fprep_client_request stages an inline frame through
 * shared memory on an ipc:// daemon (client_stage.c), against a real
 * frameprepd on the CPU backend: the tensor equals the one sent inline
 * (staging off) byte for byte, the result views a shared-memory stage
 * (/proc/self/maps says so) and holds it, five results held at once
 * leave the fifth inline, a result outlives its client, a larger frame
 * gets a larger stage, ECHO and error replies read as inline ones, a
 * tcp:// client stays inline, and on a daemon that allows one region per
 * connection the caller's own region takes the stage's place (the frames
 * then go inline).
 *
 * Usage: test_client_stage FRAMEPREPD
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define HELD 5

/* in_stage says whether p lies in a mapping of a frameprep shared-memory
 * object of this process. */
static int in_stage(const void *p)
{
	char line[512];
	unsigned long lo, hi, a = (unsigned long)(uintptr_t)p;
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo &&
		    a < hi) {
			found = strstr(line, "/dev/shm/frameprep-") != NULL;
			break;
		}
	fclose(f);
	return found;
}

static uint8_t *frame_alloc(uint32_t w, uint32_t h, unsigned seed)
{
	uint8_t *px = malloc((size_t)w * h * 3);

	REQUIRE(px != NULL);
	for (size_t i = 0; i < (size_t)w * h * 3; i++)
		px[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
	return px;
}

static void request_init(fprep_request *req, uint32_t w, uint32_t h,
                         uint16_t kind)
{
	fprep_request_init(req, FPREP_PIX_BGR8, w, h);
	req->kind = kind;
	req->out_width = 160;
	req->out_height = 128;
}

/* check_same checks that a staged result reads as the inline one. */
static void check_same(const fprep_result *s, const fprep_result *i,
                       const char *what)
{
	CHECK(s->header.status == FPREP_OK && i->header.status == FPREP_OK,
	      "%s: status %u / %u", what, s->header.status, i->header.status);
	CHECK(s->header.output_loc == FPREP_LOC_INLINE, "%s: output_loc %u",
	      what, s->header.output_loc);
	CHECK(s->payload_size == i->payload_size &&
	              s->header.payload_size == i->header.payload_size &&
	              s->header.tensor_size == i->header.tensor_size &&
	              s->payload_size == s->header.tensor_size,
	      "%s: sizes %zu / %zu", what, s->payload_size, i->payload_size);
	CHECK(memcmp(s->header.shape, i->header.shape,
	             sizeof(s->header.shape)) == 0 &&
	              s->header.scale_x == i->header.scale_x &&
	              s->header.pad_x == i->header.pad_x,
	      "%s: shape or transform differ", what);
	CHECK(s->payload_size == i->payload_size &&
	              memcmp(s->payload, i->payload, s->payload_size) == 0,
	      "%s: tensors differ", what);
}

int main(int argc, char **argv)
{
	char sock[64], ipc[96], tcp[64], extra_url[64];
	fprep_client *staged, *inl, *c;
	fprep_result held[HELD], ref, r;
	fprep_request req;
	uint8_t *small, *big;
	pid_t pid;
	int err, i;

	daemon_args(argc, argv, 2, "FRAMEPREPD");
	daemon_socket(sock, sizeof(sock), ipc, sizeof(ipc), "stage");
	snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%ld",
	         20000 + (long)getpid() % 20000);
	snprintf(extra_url, sizeof(extra_url), "%s", tcp);
	char *extra[] = {"--listen", extra_url, NULL};
	pid = daemon_start(argv[1], "cpu", ipc, extra);
	staged = daemon_client(ipc);
	inl = daemon_client(ipc);
	fprep_client_set_staging(inl, 0);
	small = frame_alloc(320, 240, 1);
	big = frame_alloc(1280, 720, 2);

	/* One frame: staged equals inline, and views a stage. */
	request_init(&req, 320, 240, FPREP_KIND_FRAME);
	REQUIRE(fprep_client_request(inl, &req, small, &ref) == 0);
	CHECK(!in_stage(ref.payload), "staging off, yet a stage");
	err = fprep_client_request(staged, &req, small, &r);
	CHECK(err == 0, "staged request: %s", fprep_client_last_error(staged));
	if (err == 0) {
		CHECK(in_stage(r.payload), "the tensor is not in a stage");
		check_same(&r, &ref, "320x240");
		fprep_result_fini(&r);
	}

	/* Results held: four stages, the fifth inline, all right. */
	for (i = 0; i < HELD; i++) {
		request_init(&req, 320, 240, FPREP_KIND_FRAME);
		err = fprep_client_request(staged, &req, small, &held[i]);
		CHECK(err == 0, "held %d: %s", i,
		      fprep_client_last_error(staged));
		if (err != 0)
			memset(&held[i], 0, sizeof(held[i]));
	}
	for (i = 0; i < HELD; i++) {
		if (held[i].priv == NULL)
			continue;
		CHECK(in_stage(held[i].payload) == (i < HELD - 1),
		      "result %d: %s a stage", i,
		      i < HELD - 1 ? "not in" : "in");
		check_same(&held[i], &ref, "a held result");
	}
	for (i = 0; i < HELD; i++)
		fprep_result_fini(&held[i]);
	request_init(&req, 320, 240, FPREP_KIND_FRAME);
	if (fprep_client_request(staged, &req, small, &r) == 0) {
		CHECK(in_stage(r.payload), "released stages not used again");
		fprep_result_fini(&r);
	}
	fprep_result_fini(&ref);

	/* A larger frame: a larger stage. ECHO likewise. */
	request_init(&req, 1280, 720, FPREP_KIND_FRAME);
	REQUIRE(fprep_client_request(inl, &req, big, &ref) == 0);
	err = fprep_client_request(staged, &req, big, &r);
	CHECK(err == 0, "1280x720: %s", fprep_client_last_error(staged));
	if (err == 0) {
		CHECK(in_stage(r.payload), "1280x720 not staged");
		check_same(&r, &ref, "1280x720");
		fprep_result_fini(&r);
	}
	fprep_result_fini(&ref);
	request_init(&req, 1280, 720, FPREP_KIND_ECHO);
	REQUIRE(fprep_client_request(inl, &req, big, &ref) == 0);
	err = fprep_client_request(staged, &req, big, &r);
	CHECK(err == 0 && r.header.status == FPREP_OK &&
	              r.payload_size == ref.payload_size &&
	              r.header.output_loc == FPREP_LOC_INLINE,
	      "ECHO staged: %s", fprep_client_last_error(staged));
	if (err == 0)
		fprep_result_fini(&r);
	fprep_result_fini(&ref);

	/* An error reply reads as inline's; the next request is served. */
	request_init(&req, 320, 240, FPREP_KIND_FRAME);
	req.mean[0] = 0.5f;
	req.std[0] = 0.0f; /* division by zero: refused */
	err = fprep_client_request(staged, &req, small, &r);
	CHECK(err == 0 && r.header.status == FPREP_EINVAL &&
	              r.payload_size == 0,
	      "a bad request: err %d status %u", err, r.header.status);
	printf("a bad request, staged: %s: %s\n",
	       fprep_err_name((int)r.header.status), r.header.message);
	if (err == 0)
		fprep_result_fini(&r);

	/* Through the doorbell (the daemon sleeps: rung), the same. */
	c = daemon_client(ipc);
	err = fprep_client_doorbell(c, 1);
	CHECK(err == 0, "doorbell: %s", fprep_client_last_error(c));
	request_init(&req, 320, 240, FPREP_KIND_FRAME);
	REQUIRE(fprep_client_request(inl, &req, small, &ref) == 0);
	err = fprep_client_request(c, &req, small, &r);
	CHECK(err == 0, "staged with a doorbell: %s",
	      fprep_client_last_error(c));
	if (err == 0) {
		CHECK(in_stage(r.payload), "with a doorbell: not staged");
		check_same(&r, &ref, "with a doorbell");
		fprep_result_fini(&r);
	}
	fprep_result_fini(&ref);
	fprep_client_close(c);

	/* A result outlives its client. */
	request_init(&req, 320, 240, FPREP_KIND_FRAME);
	REQUIRE(fprep_client_request(inl, &req, small, &ref) == 0);
	err = fprep_client_request(staged, &req, small, &r);
	CHECK(err == 0, "before close: %s", fprep_client_last_error(staged));
	fprep_client_close(staged);
	if (err == 0) {
		check_same(&r, &ref, "after its client closed");
		fprep_result_fini(&r);
	}

	/* tcp:// stays inline. */
	c = daemon_client(tcp);
	err = fprep_client_request(c, &req, small, &r);
	CHECK(err == 0, "tcp: %s", fprep_client_last_error(c));
	if (err == 0) {
		CHECK(!in_stage(r.payload), "tcp:// staged");
		check_same(&r, &ref, "tcp");
		fprep_result_fini(&r);
	}
	fprep_result_fini(&ref);
	fprep_client_close(c);
	fprep_client_close(inl);

	CHECK(daemon_stop(pid) == 0, "daemon exit status");

	/* One region per connection: the caller's region comes first. */
	{
		char *one[] = {"--max-regions", "1", NULL};
		fprep_region *region = NULL;

		pid = daemon_start(argv[1], "cpu", ipc, one);
		c = daemon_client(ipc);
		inl = daemon_client(ipc);
		fprep_client_set_staging(inl, 0);
		request_init(&req, 320, 240, FPREP_KIND_FRAME);
		REQUIRE(fprep_client_request(inl, &req, small, &ref) == 0);
		err = fprep_client_request(c, &req, small, &r);
		CHECK(err == 0 && in_stage(r.payload),
		      "--max-regions 1: the first frame not staged");
		if (err == 0)
			fprep_result_fini(&r);
		err = fprep_region_open(&region, c, 4096);
		CHECK(err == 0, "--max-regions 1: the caller's region: %s",
		      fprep_client_last_error(c));
		err = fprep_client_request(c, &req, small, &r);
		CHECK(err == 0, "--max-regions 1, region open: %s",
		      fprep_client_last_error(c));
		if (err == 0) {
			CHECK(!in_stage(r.payload), "a stage past the limit");
			check_same(&r, &ref, "--max-regions 1, inline");
			fprep_result_fini(&r);
		}
		fprep_result_fini(&ref);
		fprep_region_close(region);
		fprep_client_close(c);
		fprep_client_close(inl);
		CHECK(daemon_stop(pid) == 0, "daemon exit status");
	}
	free(small);
	free(big);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}
