/*
 * test_host_copy.c: the GPU lane's parallel host copy (host_copy.h), which
 * needs no GPU: every size (below, at and between chunk boundaries) copies
 * exactly, from several threads at once, and a pool without workers copies
 * on the caller; copies of spaced rows (fprep__copy_rows, the rows of a
 * frame the resize reads) copy those rows and leave the gaps untouched.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "gpu/host_copy.h"

#define BIG (9u * 1024u * 1024u + 123u)

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static void check_sizes(fprep__copy_pool *p, unsigned seed)
{
	static const size_t sizes[] = {
	        0, 1, 4095, 512 * 1024, 1024 * 1024 + 1, 6220800, 4915200, BIG};
	uint8_t *src = malloc(BIG), *dst = malloc(BIG + 16);

	assert_non_null(src);
	assert_non_null(dst);
	fill(src, BIG, seed);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		memset(dst, 0xab, BIG + 16);
		fprep__copy(p, dst, src, sizes[i]);
		assert_memory_equal(dst, src, sizes[i]);
		for (size_t j = sizes[i]; j < sizes[i] + 16; j++)
			assert_int_equal(dst[j], 0xab); /* nothing past n */
	}
	free(src);
	free(dst);
}

static void test_sizes(void **state)
{
	(void)state;
	for (unsigned t = 0; t <= 4; t += 2) {
		fprep__copy_pool *p = NULL;
		assert_int_equal(fprep__copy_pool_open(&p, t), 0);
		check_sizes(p, t);
		fprep__copy_pool_close(p);
	}
}

static void test_rows(void **state)
{
	static const size_t shapes[][3] = {
	        /* width, pitch, rows */
	        {5760, 3 * 5760, 360},       /* 1080p BGR8, every third row */
	        {2 * 11520, 6 * 11520, 360}, /* 4K BGR8, rows 6k+2, 6k+3 */
	        {7, 9, 1000},
	        {4096, 4096, 700}, /* no gaps */
	        {100, 300, 1},
	        {1, 1, 0},
	};
	(void)state;
	for (unsigned t = 0; t <= 4; t += 2) {
		fprep__copy_pool *p = NULL;
		assert_int_equal(fprep__copy_pool_open(&p, t), 0);
		for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
			size_t w = shapes[i][0], pitch = shapes[i][1];
			size_t rows = shapes[i][2], n = pitch * rows + 16;
			uint8_t *src = malloc(n), *dst = malloc(n);

			assert_non_null(src);
			assert_non_null(dst);
			fill(src, n, (unsigned)i + t);
			memset(dst, 0xab, n);
			fprep__copy_rows(p, dst, src, w, pitch, rows);
			for (size_t j = 0; j < n; j++) {
				int in_row = j < pitch * rows && j % pitch < w;
				assert_int_equal(dst[j],
				                 in_row ? src[j] : 0xab);
			}
			free(src);
			free(dst);
		}
		fprep__copy_pool_close(p);
	}
}

static fprep__copy_pool *shared_pool;

static void *copier(void *arg)
{
	for (int r = 0; r < 4; r++)
		check_sizes(shared_pool, (unsigned)(uintptr_t)arg + r);
	return NULL;
}

static void test_concurrent_callers(void **state)
{
	(void)state;
	pthread_t th[3];
	assert_int_equal(fprep__copy_pool_open(&shared_pool, 3), 0);
	for (uintptr_t i = 0; i < 3; i++)
		assert_int_equal(
		        pthread_create(&th[i], NULL, copier, (void *)(i * 10)),
		        0);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	fprep__copy_pool_close(shared_pool);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_concurrent_callers),
})
