/*
 * test_metrics.c: the daemon's request counting (service/metrics.c). A
 * reply is counted from the header it was built from, under the kind's
 * name in the protocol's own table: every kind the protocol has gets its
 * label without metrics.c naming it (DOORBELL and REGISTER_CUDA included),
 * a number that is no kind counts as "unknown", and a FRAME's timings feed
 * the duration histogram. The figures are read back through the endpoint,
 * as Prometheus does: GET /metrics on a port of the loopback.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"
#include "metrics.h"
#include "nvml.h"
#include "reply.h"

/* metrics_scrape GETs /metrics from the endpoint; returns the response
 * (headers and body), which the caller frees. */
static char *metrics_scrape(void)
{
	static const char get[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct sockaddr_in a;
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t n;

	assert_non_null(buf);
	assert_true(fd >= 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)fprep__metrics_http_port());
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(write(fd, get, sizeof(get) - 1),
	                 (ssize_t)(sizeof(get) - 1));
	while ((n = read(fd, buf + len, cap - 1 - len)) > 0) {
		len += (size_t)n;
		if (len == cap - 1) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* count_reply counts one reply of kind with status, as the daemon does
 * for a request it answered. */
static void count_reply(uint16_t kind, int status)
{
	fprep_reply_header h;

	fprep__metrics_request(FPREP_REQUEST_HEADER_SIZE);
	fprep__reply_header_simple(&h, kind, 1, status, "", 0, 0);
	fprep__metrics_reply(&h, FPREP_REPLY_HEADER_SIZE, 0);
	fprep__metrics_request_end();
}

/* count_frame counts one FRAME answered with status and the timings t
 * (total, queue, compute, h2d, kernel, d2h; microseconds). */
static void count_frame(int status, const uint32_t t[6])
{
	fprep_reply_header h;

	memset(&h, 0, sizeof(h));
	h.kind = FPREP_KIND_FRAME;
	h.status = (uint32_t)status;
	h.t_total_us = t[0];
	h.t_queue_us = t[1];
	h.t_compute_us = t[2];
	h.t_h2d_us = t[3];
	h.t_kernel_us = t[4];
	h.t_d2h_us = t[5];
	fprep__metrics_request(FPREP_REQUEST_HEADER_SIZE);
	fprep__metrics_reply(&h, FPREP_REPLY_HEADER_SIZE, 0);
	fprep__metrics_request_end();
}

static void test_kinds_from_protocol(void **state)
{
	char line[160], *text;

	(void)state;
	assert_int_equal(fprep__metrics_http_open("127.0.0.1:0", "cpu"), 0);
	assert_true(fprep__metrics_http_port() > 0);
	/* Every kind the protocol has, once; FRAME with its timings. */
	for (unsigned k = 1; k < FPREP_KIND_LIMIT; k++) {
		assert_non_null(fprep_kind_name(k));
		if (k != FPREP_KIND_FRAME)
			count_reply((uint16_t)k, FPREP_OK);
	}
	count_frame(FPREP_OK, (const uint32_t[6]){300, 20, 250, 0, 0, 0});
	/* Numbers that are no kind: unreadable (0) and past the table. */
	count_reply(0, FPREP_EPROTO);
	count_reply(FPREP_KIND_LIMIT, FPREP_EINVAL);
	count_reply(0xffff, FPREP_EINVAL);
	count_reply(FPREP_KIND_DOORBELL, FPREP_EREGION);

	text = metrics_scrape();
	for (unsigned k = 1; k < FPREP_KIND_LIMIT; k++) {
		snprintf(line, sizeof(line),
		         "frameprep_requests_total{kind=\"%s\",status=\"ok\"} "
		         "1\n",
		         fprep_kind_name(k));
		if (strstr(text, line) == NULL)
			fail_msg("no line %s in:\n%s", line, text);
	}
	assert_non_null(strstr(text, "frameprep_requests_total{kind=\"doorbell"
	                             "\",status=\"eregion\"} 1\n"));
	assert_non_null(strstr(text, "frameprep_requests_total{kind=\"unknown"
	                             "\",status=\"eproto\"} 1\n"));
	assert_non_null(strstr(text, "frameprep_requests_total{kind=\"unknown"
	                             "\",status=\"einval\"} 2\n"));
	assert_null(strstr(text, "kind=\"unknown\",status=\"ok\""));
	assert_non_null(strstr(text, "frameprep_request_duration_seconds_count{"
	                             "device=\"cpu\",kind=\"frame\"} 1\n"));
	/* 300 us has a bucket of its own: not in 200 us, in 300 us. */
	assert_non_null(strstr(text,
	                       "frameprep_request_duration_seconds_bucket{"
	                       "device=\"cpu\",kind=\"frame\",le=\"0.0002\"}"
	                       " 0\n"));
	assert_non_null(strstr(text,
	                       "frameprep_request_duration_seconds_bucket{"
	                       "device=\"cpu\",kind=\"frame\",le=\"0.0003\"}"
	                       " 1\n"));
	/* The CPU backend (no lanes) has no copy or kernel series. */
	assert_non_null(strstr(text, "stage=\"queue\""));
	assert_non_null(strstr(text, "stage=\"compute\""));
	assert_null(strstr(text, "stage=\"h2d\""));
	assert_null(strstr(text, "stage=\"kernel\""));
	assert_null(strstr(text, "stage=\"d2h\""));
	free(text);
	fprep__metrics_http_close();
	assert_int_equal(fprep__metrics_http_port(), 0);
}

/* bucket_count returns the cumulative count of the le bucket of the
 * series that starts with prefix (its labels before le) in text. */
static unsigned long bucket_count(const char *text, const char *prefix,
                                  const char *le)
{
	char line[256];
	const char *at;

	snprintf(line, sizeof(line), "%sle=\"%s\"} ", prefix, le);
	at = strstr(text, line);
	if (at == NULL)
		fail_msg("no line %s in:\n%s", line, text);
	return strtoul(at + strlen(line), NULL, 10);
}

static void test_buckets_failed_and_gpu_stages(void **state)
{
	static const struct {
		uint32_t us;
		const char *le_in, *le_below; /* its bucket, the one below */
	} cases[] = {
	        {10, "1e-05", NULL},        {11, "1.5e-05", "1e-05"},
	        {200, "0.0002", "0.00015"}, {300, "0.0003", "0.0002"},
	        {301, "0.0005", "0.0003"},  {760, "0.001", "0.00075"},
	        {1200, "0.0015", "0.001"},  {9000000, "10", "7.5"},
	};
	static const char frame[] = "frameprep_request_failed_duration_seconds_"
	                            "bucket{device=\"cuda:0\",kind=\"frame\",";
	const int dev0 = 0;
	char *text;

	(void)state;
	fprep__metrics_set_lanes(&dev0, 1);
	assert_int_equal(fprep__metrics_http_open("127.0.0.1:0", "cuda:0"), 0);
	/* Failed FRAMEs with their timings: each in its own bucket. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		count_frame(FPREP_ECUDA,
		            (const uint32_t[6]){cases[i].us, 0, 0, 0, 0, 0});
		text = metrics_scrape();
		assert_int_equal(bucket_count(text, frame, cases[i].le_in),
		                 i + 1);
		if (cases[i].le_below != NULL)
			assert_int_equal(
			        bucket_count(text, frame, cases[i].le_below),
			        i);
		free(text);
	}
	/* An error without timing is counted, not timed. */
	count_reply(FPREP_KIND_FRAME, FPREP_EINVAL);
	/* A GPU FRAME answered ok: its copies and kernel have series. */
	count_frame(FPREP_OK, (const uint32_t[6]){400, 20, 200, 100, 50, 100});
	text = metrics_scrape();
	assert_int_equal(bucket_count(text, frame, "+Inf"),
	                 sizeof(cases) / sizeof(cases[0]));
	assert_non_null(strstr(text, "frameprep_requests_total{kind=\"frame\","
	                             "status=\"einval\"} 1\n"));
	assert_int_equal(bucket_count(text,
	                              "frameprep_stage_duration_seconds_bucket{"
	                              "device=\"cuda:0\",lane=\"0\",stage="
	                              "\"kernel\",",
	                              "5e-05"),
	                 1);
	assert_non_null(strstr(text, "stage=\"h2d\""));
	assert_non_null(strstr(text, "stage=\"d2h\""));
	free(text);
	fprep__metrics_http_close();
}

/* NVML (nvml.c): absent (a file that does not exist), turned off, and the
 * fake library (fake_nvml.c): its figures read back, a GPU it does not
 * know refused. The endpoint of a daemon with a GPU lane has no NVML series
 * where NVML is absent, nor where the lane's bus id cannot be had (no
 * GPU, or no CUDA in the build: here). */
static void test_nvml(void **state)
{
	static const char fake_bus[] = "00000000:65:00.0";
	const int dev0 = 0;
	fprep__nvml_gpu g;
	char bus[32], *text;

	(void)state;
	setenv("FPREP_NVML", "/nonexistent/libnvidia-ml.so.1", 1);
	assert_int_equal(fprep__nvml_sample(fake_bus, &g), FPREP_EUNSUPPORTED);
	assert_int_equal(g.util_gpu, -1);
	assert_int_equal(g.mem_total, -1);
	fprep__nvml_close();
	setenv("FPREP_NVML", "off", 1);
	assert_int_equal(fprep__nvml_sample(fake_bus, &g), FPREP_EUNSUPPORTED);
	fprep__nvml_close();

	setenv("FPREP_NVML", FPREP_FAKE_NVML, 1);
	assert_int_equal(fprep__nvml_sample(fake_bus, &g), 0);
	assert_int_equal(g.util_gpu, 37);
	assert_int_equal(g.util_memory, 12);
	assert_int_equal(g.mem_used, 1234567890);
	assert_int_equal(g.mem_total, 80000000000);
	assert_int_equal(fprep__nvml_sample("00000000:01:00.0", &g),
	                 FPREP_EINVAL);
	assert_int_equal(g.util_gpu, -1);
	fprep__nvml_close();

	fprep__metrics_set_lanes(&dev0, 1);
	setenv("FPREP_NVML", "/nonexistent/libnvidia-ml.so.1", 1);
	assert_int_equal(fprep__metrics_http_open("127.0.0.1:0", "cuda:0"), 0);
	text = metrics_scrape();
	assert_non_null(strstr(text, "stage=\"h2d\"")); /* a GPU daemon */
	assert_null(strstr(text, "frameprep_nvml_"));
	free(text);
	fprep__metrics_http_close();
	if (fprep__nvml_bus_id(dev0, bus, sizeof(bus)) != 0) {
		setenv("FPREP_NVML", FPREP_FAKE_NVML, 1);
		assert_int_equal(
		        fprep__metrics_http_open("127.0.0.1:0", "cuda:0"), 0);
		text = metrics_scrape();
		assert_null(strstr(text, "frameprep_nvml_"));
		free(text);
		fprep__metrics_http_close();
	}
	unsetenv("FPREP_NVML");
}

CMOCKA_MAIN({
        cmocka_unit_test(test_kinds_from_protocol),
        cmocka_unit_test(test_buckets_failed_and_gpu_stages),
        cmocka_unit_test(test_nvml),
})
