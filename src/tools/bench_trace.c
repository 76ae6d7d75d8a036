/*
 * bench_trace.c: the --trace table and the daemon's CPU time
 * (bench_trace.h).
 */
#include "bench_trace.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const trace_keys[] = {"loop", "lane", "h2d",  "kernel",
                                         "d2h",  "done", "seen", "sent"};
/* The point of each key's (first) figure; h2d, kernel, d2h have two. */
static const int trace_first[] = {0, 1, 2, 4, 6, 8, 9, 10};
static const char *const trace_names[BENCH_TRACE_POINTS] = {
        "loop (nng -> loop)", "lane (loop -> backend)",
        "h2d start",          "h2d end",
        "kernel start",       "kernel end",
        "d2h start",          "d2h end",
        "done (completion)",  "seen (completion -> loop)",
        "sent (loop -> nng)"};

bench_trace *bench_trace_alloc(void)
{
	bench_trace *t = calloc(1, sizeof(*t));

	for (int i = 0; t != NULL && i < BENCH_TRACE_POINTS; i++) {
		bench_hist_init(&t->at[i]);
		bench_hist_init(&t->gap[i]);
	}
	return t;
}

int bench_trace_parse(const char *msg, uint64_t us[BENCH_TRACE_POINTS],
                      unsigned *mask)
{
	const char *p = msg;
	uint64_t last = 0;
	size_t k = 0;

	*mask = 0;
	if (strncmp(p, "trace us:", 9) != 0)
		return 1;
	p += 9;
	while (*p != '\0') {
		char *end;
		size_t n;

		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		for (; k < sizeof(trace_keys) / sizeof(trace_keys[0]); k++) {
			n = strlen(trace_keys[k]);
			if (strncmp(p, trace_keys[k], n) == 0 && p[n] == '=')
				break;
		}
		if (k == sizeof(trace_keys) / sizeof(trace_keys[0]))
			return -1; /* unknown, repeated or out of order */
		p += strlen(trace_keys[k]) + 1;
		int pt = trace_first[k];
		int two = pt >= 2 && pt <= 6;
		for (int j = 0; j <= two; j++) {
			if (*p < '0' || *p > '9')
				return -1;
			uint64_t v = strtoull(p, &end, 10);
			if (v < last)
				return -1;
			us[pt + j] = last = v;
			*mask |= 1u << (pt + j);
			p = end;
			if (j == 0 && two) {
				if (*p != '-')
					return -1;
				p++;
			}
		}
		if (*p != ' ' && *p != '\0')
			return -1;
		k++;
	}
	return *mask == 0 ? -1 : 0;
}

void bench_trace_record(bench_trace *t, const char *msg)
{
	uint64_t us[BENCH_TRACE_POINTS], prev = 0;
	unsigned mask;
	int rc = bench_trace_parse(msg, us, &mask);

	if (rc > 0) {
		t->missing++;
		return;
	}
	if (rc < 0) {
		t->bad++;
		return;
	}
	t->traced++;
	for (int i = 0; i < BENCH_TRACE_POINTS; i++) {
		if (!(mask & (1u << i)))
			continue;
		bench_hist_record(&t->at[i], us[i] * 1000);
		bench_hist_record(&t->gap[i], (us[i] - prev) * 1000);
		prev = us[i];
	}
}

void bench_trace_merge(bench_trace *dst, const bench_trace *src)
{
	dst->traced += src->traced;
	dst->missing += src->missing;
	dst->bad += src->bad;
	for (int i = 0; i < BENCH_TRACE_POINTS; i++) {
		bench_hist_merge(&dst->at[i], &src->at[i]);
		bench_hist_merge(&dst->gap[i], &src->gap[i]);
	}
}

void bench_trace_print(FILE *out, const char *label, const bench_trace *t)
{
	fprintf(out,
	        "\ntrace %s: %llu replies traced, %llu without a trace, %llu "
	        "malformed\n",
	        label, (unsigned long long)t->traced,
	        (unsigned long long)t->missing, (unsigned long long)t->bad);
	if (t->traced == 0)
		return;
	fprintf(out, "| stage | at p50 us | at p99 us | gap p50 us | gap p99 "
	             "us |\n| --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < BENCH_TRACE_POINTS; i++) {
		if (t->at[i].count == 0)
			continue;
		fprintf(out, "| %s | %.1f | %.1f | %.1f | %.1f |\n",
		        trace_names[i],
		        (double)bench_hist_percentile(&t->at[i], 50) / 1000.0,
		        (double)bench_hist_percentile(&t->at[i], 99) / 1000.0,
		        (double)bench_hist_percentile(&t->gap[i], 50) / 1000.0,
		        (double)bench_hist_percentile(&t->gap[i], 99) / 1000.0);
	}
}

int bench_cpu_us(long pid, uint64_t *us)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	long tck = sysconf(_SC_CLK_TCK);
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* pid (comm) state ...: comm may hold spaces; fields 14 and 15 are
	 * utime and stime, in clock ticks. */
	p = strrchr(buf, ')');
	if (strstr(buf, "(frameprepd)") == NULL || p == NULL || tck <= 0)
		return -1;
	if (sscanf(p + 2,
	           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
	           &st) != 2)
		return -1;
	*us = (ut + st) * 1000000ull / (unsigned long long)tck;
	return 0;
}
