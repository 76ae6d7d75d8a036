/*
 * test_bench_trace.c: frameprep-bench's reading of frameprepd --trace
 * messages: the GPU and CPU forms, the gaps it records, and the messages
 * it refuses (unknown or repeated keys, points out of order, garbage).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "bench_trace.h"

static void test_gpu_form(void **state)
{
	uint64_t us[BENCH_TRACE_POINTS];
	unsigned mask;

	(void)state;
	assert_int_equal(bench_trace_parse("trace us: loop=3 lane=12 "
	                                   "h2d=14-130 kernel=131-139 "
	                                   "d2h=140-232 done=240 seen=251 "
	                                   "sent=258",
	                                   us, &mask),
	                 0);
	assert_int_equal(mask, (1u << BENCH_TRACE_POINTS) - 1);
	assert_int_equal(us[0], 3);
	assert_int_equal(us[2], 14);
	assert_int_equal(us[3], 130);
	assert_int_equal(us[5], 139);
	assert_int_equal(us[7], 232);
	assert_int_equal(us[10], 258);
}

static void test_cpu_form_and_gaps(void **state)
{
	bench_trace *t = bench_trace_alloc();
	uint64_t us[BENCH_TRACE_POINTS];
	unsigned mask;

	(void)state;
	assert_non_null(t);
	assert_int_equal(bench_trace_parse("trace us: loop=5 lane=9 done=90 "
	                                   "seen=95 sent=97",
	                                   us, &mask),
	                 0);
	assert_int_equal(mask, 0x3u | 1u << 8 | 1u << 9 | 1u << 10);
	bench_trace_record(t,
	                   "trace us: loop=5 lane=9 done=90 seen=95 sent=97");
	bench_trace_record(t, "");
	bench_trace_record(t, "trace us: loop=5 lane=4 done=90");
	assert_int_equal(t->traced, 1);
	assert_int_equal(t->missing, 1);
	assert_int_equal(t->bad, 1);
	/* done's gap is from lane, the point before it that was present. */
	assert_int_equal(bench_hist_percentile(&t->gap[8], 50), 81000);
	assert_int_equal(t->gap[2].count, 0);
	free(t);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
	        "trace us: loop=5 lane=3",  /* backwards */
	        "trace us: lane=3 loop=5",  /* out of order */
	        "trace us: loop=1 loop=2",  /* repeated */
	        "trace us: loop=1 queue=2", /* unknown */
	        "trace us: loop=1 h2d=4",   /* half a span */
	        "trace us: loop=1 h2d=9-4", /* span backwards */
	        "trace us: loop=x",         /* not a number */
	        "trace us: loop=1x",        /* trailing junk */
	        "trace us:",                /* nothing */
	};
	uint64_t us[BENCH_TRACE_POINTS];
	unsigned mask;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(bench_trace_parse(bad[i], us, &mask), -1);
	assert_int_equal(bench_trace_parse("device failed", us, &mask), 1);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_gpu_form),
        cmocka_unit_test(test_cpu_form_and_gaps),
        cmocka_unit_test(test_refused),
})
