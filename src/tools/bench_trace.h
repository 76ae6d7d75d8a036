/*
 * bench_trace.h: frameprep-bench --trace (the stage times frameprepd
 * --trace writes into each reply's message, see protocol.h) and the
 * daemon's CPU time per request (/proc/PID/stat of a local daemon).
 */
#ifndef FRAMEPREP_BENCH_TRACE_H
#define FRAMEPREP_BENCH_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "bench_hist.h"

/* The trace's points in order: loop, lane, h2d start and end, kernel start
 * and end, d2h start and end, done, seen, sent. */
#define BENCH_TRACE_POINTS 11

/* bench_trace: the traces of one run: for each point, its time since
 * receipt and the gap from the point before it (the hand-off), both in
 * histograms of nanoseconds. Not thread-safe: one per stream, merged. */
typedef struct bench_trace {
	uint64_t traced;  /* replies with a trace */
	uint64_t missing; /* successful replies without one */
	uint64_t bad;     /* traces that did not parse or went backwards */
	bench_hist at[BENCH_TRACE_POINTS];
	bench_hist gap[BENCH_TRACE_POINTS];
} bench_trace;

/* bench_trace_alloc returns an empty bench_trace (free() it), or NULL. */
bench_trace *bench_trace_alloc(void);

/* bench_trace_parse reads the text of a reply's message into us[] (the
 * microseconds of each point) and *mask (bit i: point i present). Returns
 * 0, 1 when the message holds no trace, -1 when it is malformed or a point
 * comes before the one preceding it. */
int bench_trace_parse(const char *msg, uint64_t us[BENCH_TRACE_POINTS],
                      unsigned *mask);

/* bench_trace_record counts the trace in msg, a successful reply's
 * message. */
void bench_trace_record(bench_trace *t, const char *msg);

/* bench_trace_merge adds src's counts into dst. */
void bench_trace_merge(bench_trace *dst, const bench_trace *src);

/* bench_trace_print prints the table of medians and p99 of t, headed by
 * label. */
void bench_trace_print(FILE *out, const char *label, const bench_trace *t);

/* bench_cpu_us reads utime + stime of process pid from /proc/PID/stat
 * into *us (microseconds). Returns 0, or -1 when it cannot be read or the
 * process is not named frameprepd (another PID namespace or host). */
int bench_cpu_us(long pid, uint64_t *us);

#endif /* FRAMEPREP_BENCH_TRACE_H */
