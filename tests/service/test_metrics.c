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

#include "frameprep/frameprep.h"
#include "metrics.h"
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
	a.sin_port = htons((uint16_t)fprep__metrics_port());
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

static void test_kinds_from_protocol(void **state)
{
	fprep_reply_header h;
	char line[160], *text;

	(void)state;
	assert_int_equal(fprep__metrics_open("127.0.0.1:0", "cpu"), 0);
	assert_true(fprep__metrics_port() > 0);
	/* Every kind the protocol has, once; FRAME with its timings. */
	for (unsigned k = 1; k < FPREP_KIND_LIMIT; k++) {
		assert_non_null(fprep_kind_name(k));
		if (k != FPREP_KIND_FRAME)
			count_reply((uint16_t)k, FPREP_OK);
	}
	memset(&h, 0, sizeof(h));
	h.kind = FPREP_KIND_FRAME;
	h.status = FPREP_OK;
	h.t_total_us = 300;
	h.t_queue_us = 20;
	h.t_compute_us = 250;
	fprep__metrics_request(FPREP_REQUEST_HEADER_SIZE);
	fprep__metrics_reply(&h, FPREP_REPLY_HEADER_SIZE, 0);
	fprep__metrics_request_end();
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
	free(text);
	fprep__metrics_close();
	assert_int_equal(fprep__metrics_port(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kinds_from_protocol),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
