/*
 * bench_report.h: results of frameprep-bench runs and their outputs (the
 * table on stdout, JSON, CSV and a gnuplot PNG of latency vs throughput).
 */
#ifndef FRAMEPREP_BENCH_REPORT_H
#define FRAMEPREP_BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "bench_hist.h"

#define BENCH_ERR_SLOTS 32 /* enum fprep_err values counted one by one */

/* bench_result: one measured run (one point of a sweep). Counters cover
 * the measured window; failures (wrong, timeouts, lost, errors) also count
 * those seen during warm-up, since any of them fails the run. */
typedef struct bench_result {
	int open_loop;        /* 0: closed loop, 1: open loop */
	unsigned concurrency; /* streams (closed) or connection pool (open) */
	double rate;          /* open loop: intended frames/s */
	int echo;             /* 1: ECHO kind (transport only) */
	double elapsed_s;     /* measured window */
	uint64_t warmup_sent;
	uint64_t sent;
	uint64_t ok;
	uint64_t wrong;    /* bad shape/dtype/size/content, mismatched id */
	uint64_t timeouts; /* no reply within --timeout */
	uint64_t lost;     /* sent but the connection failed before a reply */
	uint64_t errors[BENCH_ERR_SLOTS]; /* server status != OK, by code */
	uint64_t verified;                /* replies compared with the CPU */
	uint64_t dropped; /* open loop: arrivals never sent (overload) */
	uint64_t in_bytes;
	uint64_t out_bytes;
	double srv_sum_us[6]; /* queue, compute, h2d, kernel, d2h, total */
	bench_hist hist;      /* latency of ok replies */
	double ceiling_fps;   /* ECHO frames/s at the same load, 0: none */
	double cpu_us;        /* daemon CPU time per request (warm-up
	                         included), us; < 0: unknown */
	double cpu_cores;     /* daemon CPU time / wall time; < 0: unknown */
	double ceiling_p50_us;
} bench_result;

/* bench_report: what the outputs say besides the runs. */
typedef struct bench_report {
	const char *url;
	const char *backend; /* from INFO, or "unknown" */
	const char *device;
	const char *server_info; /* INFO text, or "" */
	const char *input;       /* description of the frames */
	const char *request;     /* description of the tensor asked for */
	unsigned inputs;
	double pcie_gbps; /* --pcie-gbps, 0: not given */
	const bench_result *runs;
	unsigned nruns;
} bench_report;

/* bench_result_fail_count returns every failure of r: wrong, timeouts,
 * lost and error replies. */
uint64_t bench_result_fail_count(const bench_result *r);

/* bench_report_table prints the human-readable results to out. */
void bench_report_table(FILE *out, const bench_report *rep);

/* bench_report_json, bench_report_csv and bench_report_plot write rep to
 * path. They return 0, or -1 after printing the reason to stderr.
 * bench_report_plot runs gnuplot (it must be on PATH) and needs at least
 * one run. */
int bench_report_json(const char *path, const bench_report *rep);
int bench_report_csv(const char *path, const bench_report *rep);
int bench_report_plot(const char *path, const bench_report *rep);

#endif /* FRAMEPREP_BENCH_REPORT_H */
