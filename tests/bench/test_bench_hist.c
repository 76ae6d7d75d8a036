/*
 * test_bench_hist.c: the latency histogram of frameprep-bench.
 *
 * Percentiles are checked against the exact order statistics of the same
 * values (sorted), which must lie within the promised 1 % relative error,
 * over the whole 1 us .. 100 s range; merging must equal recording into one.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "bench_hist.h"

#define N 200000

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* exact_percentile: the smallest value with at least q % at or below. */
static uint64_t exact_percentile(const uint64_t *v, size_t n, double q)
{
	size_t rank = (size_t)((q / 100.0) * (double)n + 0.999999999);

	if (rank < 1)
		rank = 1;
	return v[rank - 1];
}

static void check_within(uint64_t got, uint64_t want)
{
	double err = got > want ? (double)(got - want) : (double)(want - got);

	if (err > 0.01 * (double)want + 1) {
		print_error("got %llu, want %llu\n", (unsigned long long)got,
		            (unsigned long long)want);
		fail();
	}
}

static void test_percentiles_log_uniform(void **state)
{
	static uint64_t v[N];
	static bench_hist h;
	static const double qs[] = {1, 10, 50, 90, 99, 99.9, 99.99};
	uint64_t s = 88172645463325252ull;
	size_t i, k;

	(void)state;
	bench_hist_init(&h);
	for (i = 0; i < N; i++) {
		/* log-uniform over 1 us .. 100 s */
		double u = (double)(rng(&s) >> 11) / 9007199254740992.0;

		v[i] = (uint64_t)(1000.0 * pow(1e8, u));
		bench_hist_record(&h, v[i]);
	}
	qsort(v, N, sizeof(v[0]), cmp_u64);
	assert_int_equal(h.count, N);
	assert_int_equal(h.min_ns, v[0]);
	assert_int_equal(h.max_ns, v[N - 1]);
	for (k = 0; k < sizeof(qs) / sizeof(qs[0]); k++)
		check_within(bench_hist_percentile(&h, qs[k]),
		             exact_percentile(v, N, qs[k]));
	assert_int_equal(bench_hist_percentile(&h, 100), v[N - 1]);
	assert_int_equal(bench_hist_percentile(&h, 0), v[0]);
}

static void test_small_values_exact(void **state)
{
	bench_hist h;
	uint64_t i;

	(void)state;
	bench_hist_init(&h);
	assert_int_equal(bench_hist_percentile(&h, 50), 0);
	for (i = 1; i <= 200; i++)
		bench_hist_record(&h, i);
	assert_int_equal(bench_hist_percentile(&h, 50), 100);
	assert_int_equal(bench_hist_percentile(&h, 99), 198);
	assert_true(bench_hist_mean_ns(&h) > 100.49 &&
	            bench_hist_mean_ns(&h) < 100.51);
}

static void test_clamp_and_merge(void **state)
{
	static bench_hist a, b, all;
	uint64_t s = 12345, x;
	unsigned i;

	(void)state;
	bench_hist_init(&a);
	bench_hist_init(&b);
	bench_hist_init(&all);
	for (i = 0; i < 10000; i++) {
		x = rng(&s) % 50000000ull;
		bench_hist_record(i % 2 ? &a : &b, x);
		bench_hist_record(&all, x);
	}
	/* Beyond 100 s: counted in the top bucket, max stays exact. */
	bench_hist_record(&a, 500000000000ull);
	bench_hist_record(&all, 500000000000ull);
	bench_hist_merge(&a, &b);
	assert_memory_equal(&a, &all, sizeof(a));
	assert_int_equal(bench_hist_percentile(&a, 100), 500000000000ull);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_percentiles_log_uniform),
        cmocka_unit_test(test_small_values_exact),
        cmocka_unit_test(test_clamp_and_merge),
})
