/*
 * bench_hist.c: log-linear latency histogram for frameprep-bench.
 *
 * The design is HdrHistogram's, cut down to one fixed precision: a value v
 * below 256 has its own bucket; above, with m the index of its highest set
 * bit, it falls in bucket 256 + (m - 8) * 128 + (v >> (m - 7)) - 128, so
 * each bucket of row m spans 2^(m - 7) ns, at most 1/128 of its values.
 */
#include "bench_hist.h"

#include <string.h>

static unsigned hist_index(uint64_t v)
{
	unsigned m;

	if (v > BENCH_HIST_MAX_NS)
		v = BENCH_HIST_MAX_NS;
	if (v < 256)
		return (unsigned)v;
	m = 63u - (unsigned)__builtin_clzll(v);
	return 256u + (m - 8u) * 128u +
	       (unsigned)(v >> (m - BENCH_HIST_SUB_BITS)) - 128u;
}

/* hist_bucket_low and hist_bucket_width give the range a bucket covers. */
static uint64_t hist_bucket_low(unsigned i)
{
	unsigned row, sub;

	if (i < 256)
		return i;
	row = (i - 256u) / 128u + 8u;
	sub = (i - 256u) % 128u + 128u;
	return (uint64_t)sub << (row - BENCH_HIST_SUB_BITS);
}

static uint64_t hist_bucket_width(unsigned i)
{
	if (i < 256)
		return 1;
	return 1ull << ((i - 256u) / 128u + 8u - BENCH_HIST_SUB_BITS);
}

void bench_hist_init(bench_hist *h)
{
	memset(h, 0, sizeof(*h));
}

void bench_hist_record(bench_hist *h, uint64_t ns)
{
	if (h->count == 0 || ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->count++;
	h->sum_ns += (double)ns;
	h->buckets[hist_index(ns)]++;
}

void bench_hist_merge(bench_hist *dst, const bench_hist *src)
{
	unsigned i;

	if (src->count == 0)
		return;
	if (dst->count == 0 || src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	for (i = 0; i < BENCH_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
}

uint64_t bench_hist_percentile(const bench_hist *h, double q)
{
	uint64_t rank, seen = 0, v;
	unsigned i;

	if (h->count == 0)
		return 0;
	if (q <= 0)
		return h->min_ns;
	if (q >= 100)
		return h->max_ns;
	/* The smallest rank r (1-based) with r >= q% of count. */
	rank = (uint64_t)((q / 100.0) * (double)h->count + 0.999999999);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank)
			break;
	}
	if (i == BENCH_HIST_BUCKETS)
		return h->max_ns;
	v = hist_bucket_low(i) + hist_bucket_width(i) / 2;
	if (v < h->min_ns)
		v = h->min_ns;
	if (v > h->max_ns)
		v = h->max_ns;
	return v;
}

double bench_hist_mean_ns(const bench_hist *h)
{
	return h->count ? h->sum_ns / (double)h->count : 0.0;
}
