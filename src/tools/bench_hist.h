/*
 * bench_hist.h: the latency histogram of frameprep-bench.
 *
 * A log-linear histogram in the manner of HdrHistogram: values are counted
 * in nanoseconds, exactly below 256 ns and above that in 128 linear
 * sub-buckets per power of two, so every recorded value is known to within
 * 1/128 (0.8 %) of itself. The range is 1 ns .. 100 s (larger values are
 * counted in the top bucket; the exact maximum is kept aside). The memory is
 * fixed (about 31 KiB) and recording is a few integer operations.
 */
#ifndef FRAMEPREP_BENCH_HIST_H
#define FRAMEPREP_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 7
#define BENCH_HIST_MAX_NS   100000000000ull /* 100 s */
/* Exact buckets 0..255, then 128 per power of two from 2^8 up to 2^37. */
#define BENCH_HIST_BUCKETS (256 + (37 - 8) * 128)

/* bench_hist: one histogram. Zero it with bench_hist_init; not thread-safe
 * (each thread records into its own and they are merged at the end). */
typedef struct bench_hist {
	uint64_t count;
	uint64_t min_ns;
	uint64_t max_ns;
	double sum_ns;
	uint64_t buckets[BENCH_HIST_BUCKETS];
} bench_hist;

/* bench_hist_init empties h. */
void bench_hist_init(bench_hist *h);

/* bench_hist_record counts one value of ns nanoseconds (clamped to
 * BENCH_HIST_MAX_NS for the buckets; min and max stay exact). */
void bench_hist_record(bench_hist *h, uint64_t ns);

/* bench_hist_merge adds every count of src into dst. */
void bench_hist_merge(bench_hist *dst, const bench_hist *src);

/* bench_hist_percentile returns the value in nanoseconds at or below which
 * q percent (0..100) of the recorded values lie: the midpoint of the bucket
 * holding that rank, clamped to [min, max]. Returns 0 for an empty
 * histogram. */
uint64_t bench_hist_percentile(const bench_hist *h, double q);

/* bench_hist_mean_ns returns the exact mean in nanoseconds, or 0. */
double bench_hist_mean_ns(const bench_hist *h);

#endif /* FRAMEPREP_BENCH_HIST_H */
