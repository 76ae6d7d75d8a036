/*
 * bench_report.c: turns frameprep-bench results into a table, JSON, CSV and
 * a PNG plot of p50/p99 latency against throughput (drawn by gnuplot,
 * driven through a pipe with a generated script and inline data).
 */
#include "bench_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frameprep/frameprep.h"

static const char *const report_srv_names[6] = {
        "queue", "compute", "h2d", "kernel", "d2h", "total",
};

/* Percentiles reported, with their labels. */
static const double report_q[5] = {50, 90, 99, 99.9, 100};
static const char *const report_q_names[5] = {"p50", "p90", "p99", "p99.9",
                                              "max"};

uint64_t bench_result_fail_count(const bench_result *r)
{
	uint64_t n = r->wrong + r->timeouts + r->lost;
	unsigned i;

	for (i = 0; i < BENCH_ERR_SLOTS; i++)
		n += r->errors[i];
	return n;
}

static double report_fps(const bench_result *r)
{
	return r->elapsed_s > 0 ? (double)r->ok / r->elapsed_s : 0;
}

static double report_gbps(const bench_result *r, uint64_t bytes)
{
	return r->elapsed_s > 0 ? (double)bytes / r->elapsed_s / 1e9 : 0;
}

static double report_us(const bench_result *r, double q)
{
	return (double)bench_hist_percentile(&r->hist, q) / 1000.0;
}

static double report_srv_us(const bench_result *r, unsigned k)
{
	return r->ok ? r->srv_sum_us[k] / (double)r->ok : 0;
}

/* report_transport_us: mean client latency minus mean server total. */
static double report_transport_us(const bench_result *r)
{
	return bench_hist_mean_ns(&r->hist) / 1000.0 - report_srv_us(r, 5);
}

static void report_point(char *buf, size_t size, const bench_result *r)
{
	if (r->open_loop)
		snprintf(buf, size, "%.0f/s", r->rate);
	else
		snprintf(buf, size, "c=%u", r->concurrency);
}

/* report_notes prints point's lines below the tables for run r: the
 * daemon's CPU, the ceilings, arrivals dropped and failures. */
static void report_notes(FILE *out, const bench_report *rep,
                         const bench_result *r, const char *point)
{
	if (r->cpu_us >= 0)
		fprintf(out,
		        "%s: daemon CPU %.1f us per request (%.2f cores)\n",
		        point, r->cpu_us, r->cpu_cores);
	if (r->ceiling_fps > 0)
		fprintf(out,
		        "%s: transport ceiling (ECHO, same load) %.1f "
		        "frames/s, p50 %.0f us; achieved %.1f%% of it\n",
		        point, r->ceiling_fps, r->ceiling_p50_us,
		        100.0 * report_fps(r) / r->ceiling_fps);
	if (rep->pcie_gbps > 0 && r->in_bytes && r->ok) {
		double per =
		        (double)(r->in_bytes > r->out_bytes ? r->in_bytes
		                                            : r->out_bytes) /
		        (double)r->ok;
		double cap = rep->pcie_gbps * 1e9 / per;

		fprintf(out,
		        "%s: PCIe ceiling %.1f GB/s per direction = %.1f "
		        "frames/s; achieved %.1f%% of it\n",
		        point, rep->pcie_gbps, cap,
		        100.0 * report_fps(r) / cap);
	}
	if (r->dropped)
		fprintf(out,
		        "%s: overloaded, %llu arrivals were never sent (the "
		        "latencies above understate the queueing)\n",
		        point, (unsigned long long)r->dropped);
	if (bench_result_fail_count(r)) {
		fprintf(out,
		        "%s: FAILURES: wrong %llu, timeouts %llu, lost %llu",
		        point, (unsigned long long)r->wrong,
		        (unsigned long long)r->timeouts,
		        (unsigned long long)r->lost);
		for (unsigned k = 0; k < BENCH_ERR_SLOTS; k++)
			if (r->errors[k])
				fprintf(out, ", %s %llu",
				        fprep_err_name((int)k),
				        (unsigned long long)r->errors[k]);
		fprintf(out, "\n");
	}
}

void bench_report_table(FILE *out, const bench_report *rep)
{
	const bench_result *r;
	char point[32];
	unsigned i, k;

	fprintf(out, "frameprep-bench %s  server %s  backend %s%s%s\n",
	        FPREP_VERSION_STRING, rep->url, rep->backend,
	        rep->device[0] ? "  device " : "", rep->device);
	fprintf(out, "frames: %s (%u input%s)\ntensor: %s\n", rep->input,
	        rep->inputs, rep->inputs == 1 ? "" : "s", rep->request);
	fprintf(out, "\n%-9s %9s %8s %8s %9s %9s %9s %9s %9s %8s %6s\n", "load",
	        "frames/s", "in GB/s", "out GB/s", "p50 us", "p90 us", "p99 us",
	        "p99.9 us", "max us", "ok", "fail");
	for (i = 0; i < rep->nruns; i++) {
		r = &rep->runs[i];
		report_point(point, sizeof(point), r);
		fprintf(out,
		        "%-9s %9.1f %8.3f %8.3f %9.0f %9.0f %9.0f %9.0f "
		        "%9.0f %8llu %6llu\n",
		        point, report_fps(r), report_gbps(r, r->in_bytes),
		        report_gbps(r, r->out_bytes), report_us(r, 50),
		        report_us(r, 90), report_us(r, 99), report_us(r, 99.9),
		        report_us(r, 100), (unsigned long long)r->ok,
		        (unsigned long long)bench_result_fail_count(r));
	}
	fprintf(out, "\nserver time per frame, mean us (transport = client "
	             "latency - server total):\n");
	fprintf(out, "%-9s %8s %8s %8s %8s %8s %8s %9s\n", "load", "queue",
	        "compute", "h2d", "kernel", "d2h", "total", "transport");
	for (i = 0; i < rep->nruns; i++) {
		r = &rep->runs[i];
		report_point(point, sizeof(point), r);
		fprintf(out, "%-9s", point);
		for (k = 0; k < 6; k++)
			fprintf(out, " %8.1f", report_srv_us(r, k));
		fprintf(out, " %9.1f\n", report_transport_us(r));
	}
	for (i = 0; i < rep->nruns; i++) {
		report_point(point, sizeof(point), &rep->runs[i]);
		report_notes(out, rep, &rep->runs[i], point);
	}
	if (rep->pcie_gbps <= 0 && strcmp(rep->backend, "cuda") == 0)
		fprintf(out, "PCIe ceiling: not given; measure it on this "
		             "machine (the pinned copy probes of "
		             "tests/gpu/bench_lane, BENCHMARKS.md \"PCIe "
		             "ceiling\") and pass --pcie-gbps\n");
}

/* report_json_string writes s as a JSON string. */
static void report_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* report_close finishes a file written with stdio, reporting errors. */
static int report_close(FILE *f, const char *path)
{
	int bad = ferror(f);

	if (fclose(f) != 0 || bad) {
		fprintf(stderr, "frameprep-bench: writing %s failed\n", path);
		return -1;
	}
	return 0;
}

static FILE *report_open(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fprintf(stderr, "frameprep-bench: %s: %s\n", path,
		        strerror(errno));
	return f;
}

int bench_report_json(const char *path, const bench_report *rep)
{
	const bench_result *r;
	FILE *f;
	unsigned i, k;

	f = report_open(path);
	if (!f)
		return -1;
	fprintf(f, "{\n  \"tool\": \"frameprep-bench\",\n  \"version\": ");
	report_json_string(f, FPREP_VERSION_STRING);
	fprintf(f, ",\n  \"url\": ");
	report_json_string(f, rep->url);
	fprintf(f, ",\n  \"backend\": ");
	report_json_string(f, rep->backend);
	fprintf(f, ",\n  \"device\": ");
	report_json_string(f, rep->device);
	fprintf(f, ",\n  \"server_info\": ");
	report_json_string(f, rep->server_info);
	fprintf(f, ",\n  \"input\": ");
	report_json_string(f, rep->input);
	fprintf(f, ",\n  \"inputs\": %u,\n  \"request\": ", rep->inputs);
	report_json_string(f, rep->request);
	fprintf(f, ",\n  \"pcie_gbps\": %g,\n  \"runs\": [", rep->pcie_gbps);
	for (i = 0; i < rep->nruns; i++) {
		r = &rep->runs[i];
		fprintf(f,
		        "%s\n    {\"mode\": \"%s\", \"kind\": \"%s\", "
		        "\"concurrency\": %u, \"rate\": %g,\n"
		        "     \"elapsed_s\": %.6f, \"warmup_sent\": %llu, "
		        "\"sent\": %llu, \"ok\": %llu, \"verified\": %llu,\n"
		        "     \"wrong\": %llu, \"timeouts\": %llu, \"lost\": "
		        "%llu, \"dropped\": %llu, \"errors\": {",
		        i ? "," : "", r->open_loop ? "open" : "closed",
		        r->echo ? "echo" : "frame", r->concurrency, r->rate,
		        r->elapsed_s, (unsigned long long)r->warmup_sent,
		        (unsigned long long)r->sent, (unsigned long long)r->ok,
		        (unsigned long long)r->verified,
		        (unsigned long long)r->wrong,
		        (unsigned long long)r->timeouts,
		        (unsigned long long)r->lost,
		        (unsigned long long)r->dropped);
		/* Every named error code but OK, so the keys are stable. */
		for (k = 1; k < BENCH_ERR_SLOTS; k++)
			if (strcmp(fprep_err_name((int)k), "UNKNOWN") != 0)
				fprintf(f, "%s\"%s\": %llu", k > 1 ? ", " : "",
				        fprep_err_name((int)k),
				        (unsigned long long)r->errors[k]);
		fprintf(f,
		        "},\n     \"frames_per_s\": %.3f, \"in_gbps\": %.6f, "
		        "\"out_gbps\": %.6f,\n     \"latency_us\": {",
		        report_fps(r), report_gbps(r, r->in_bytes),
		        report_gbps(r, r->out_bytes));
		for (k = 0; k < 5; k++)
			fprintf(f, "\"%s\": %.3f, ", report_q_names[k],
			        report_us(r, report_q[k]));
		fprintf(f,
		        "\"mean\": %.3f, \"min\": %.3f},\n     "
		        "\"server_us\": {",
		        bench_hist_mean_ns(&r->hist) / 1000.0,
		        (double)r->hist.min_ns / 1000.0);
		for (k = 0; k < 6; k++)
			fprintf(f, "\"%s\": %.3f, ", report_srv_names[k],
			        report_srv_us(r, k));
		fprintf(f,
		        "\"transport\": %.3f},\n     "
		        "\"daemon_cpu_us_per_request\": "
		        "%.3f,\n     \"ceiling_fps\": %.3f, "
		        "\"ceiling_p50_us\": %.3f, \"ceiling_ratio\": %.6f}",
		        report_transport_us(r), r->cpu_us, r->ceiling_fps,
		        r->ceiling_p50_us,
		        r->ceiling_fps > 0 ? report_fps(r) / r->ceiling_fps
		                           : 0.0);
	}
	fprintf(f, "\n  ]\n}\n");
	return report_close(f, path);
}

int bench_report_csv(const char *path, const bench_report *rep)
{
	const bench_result *r;
	uint64_t errs;
	FILE *f;
	unsigned i, k;

	f = report_open(path);
	if (!f)
		return -1;
	fprintf(f, "mode,kind,concurrency,rate,elapsed_s,sent,ok,wrong,"
	           "timeouts,lost,errors,dropped,frames_per_s,in_gbps,"
	           "out_gbps,p50_us,p90_us,p99_us,p999_us,max_us,mean_us");
	for (k = 0; k < 6; k++)
		fprintf(f, ",srv_%s_us", report_srv_names[k]);
	fprintf(f, ",transport_us,ceiling_fps,ceiling_ratio\n");
	for (i = 0; i < rep->nruns; i++) {
		r = &rep->runs[i];
		errs = bench_result_fail_count(r) - r->wrong - r->timeouts -
		       r->lost;
		fprintf(f,
		        "%s,%s,%u,%g,%.6f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
		        "%.3f,%.6f,%.6f",
		        r->open_loop ? "open" : "closed",
		        r->echo ? "echo" : "frame", r->concurrency, r->rate,
		        r->elapsed_s, (unsigned long long)r->sent,
		        (unsigned long long)r->ok, (unsigned long long)r->wrong,
		        (unsigned long long)r->timeouts,
		        (unsigned long long)r->lost, (unsigned long long)errs,
		        (unsigned long long)r->dropped, report_fps(r),
		        report_gbps(r, r->in_bytes),
		        report_gbps(r, r->out_bytes));
		for (k = 0; k < 5; k++)
			fprintf(f, ",%.3f", report_us(r, report_q[k]));
		fprintf(f, ",%.3f", bench_hist_mean_ns(&r->hist) / 1000.0);
		for (k = 0; k < 6; k++)
			fprintf(f, ",%.3f", report_srv_us(r, k));
		fprintf(f, ",%.3f,%.3f,%.6f\n", report_transport_us(r),
		        r->ceiling_fps,
		        r->ceiling_fps > 0 ? report_fps(r) / r->ceiling_fps
		                           : 0.0);
	}
	return report_close(f, path);
}

/* report_find_gnuplot tells whether gnuplot is an executable on PATH. */
static int report_find_gnuplot(void)
{
	const char *path = getenv("PATH");
	char dir[4096];
	const char *p, *end;
	size_t len;

	if (!path)
		path = "/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		len = (size_t)(end - p);
		if (len == 0 || len + sizeof("/gnuplot") > sizeof(dir))
			continue;
		memcpy(dir, p, len);
		memcpy(dir + len, "/gnuplot", sizeof("/gnuplot"));
		if (access(dir, X_OK) == 0)
			return 1;
	}
	return 0;
}

/* report_plot_series writes the inline data of one line: throughput and
 * the q-th percentile latency in milliseconds, then gnuplot's "e". */
static void report_plot_series(FILE *g, const bench_report *rep, double q)
{
	char point[32];
	unsigned i;

	for (i = 0; i < rep->nruns; i++) {
		report_point(point, sizeof(point), &rep->runs[i]);
		fprintf(g, "%.3f %.6f \"%s\"\n", report_fps(&rep->runs[i]),
		        report_us(&rep->runs[i], q) / 1000.0, point);
	}
	fprintf(g, "e\n");
}

int bench_report_plot(const char *path, const bench_report *rep)
{
	FILE *g;
	int status;
	const char *s;

	if (rep->nruns == 0) {
		fprintf(stderr, "frameprep-bench: --plot: no run to plot\n");
		return -1;
	}
	if (!report_find_gnuplot()) {
		fprintf(stderr,
		        "frameprep-bench: --plot %s: gnuplot is not on PATH "
		        "(install gnuplot-nox); the plot was not drawn\n",
		        path);
		return -1;
	}
	g = popen("gnuplot", "w");
	if (!g) {
		fprintf(stderr, "frameprep-bench: cannot run gnuplot: %s\n",
		        strerror(errno));
		return -1;
	}
	fprintf(g, "set terminal pngcairo size 1000,640 noenhanced\n"
	           "set output '");
	for (s = path; *s; s++) /* gnuplot single quotes: '' is a quote */
		fputs(*s == '\'' ? "''" : (char[]){*s, 0}, g);
	fprintf(g,
	        "'\nset title 'frameprep-bench: latency vs throughput "
	        "(%s, backend %s)'\n",
	        rep->runs[0].open_loop ? "open loop" : "closed loop",
	        rep->backend);
	fprintf(g, "set xlabel 'throughput (frames/s)'\n"
	           "set ylabel 'latency (ms)'\nset logscale y\n"
	           "set grid\nset key outside top center horizontal\n"
	           "plot '-' using 1:2 with linespoints pt 7 title 'p50', "
	           "'-' using 1:2:3 with labels offset 0,1 notitle, "
	           "'-' using 1:2 with linespoints pt 5 title 'p99'\n");
	report_plot_series(g, rep, 50);
	report_plot_series(g, rep, 50);
	report_plot_series(g, rep, 99);
	status = pclose(g);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    access(path, F_OK) != 0) {
		fprintf(stderr, "frameprep-bench: gnuplot failed to draw %s\n",
		        path);
		return -1;
	}
	return 0;
}
