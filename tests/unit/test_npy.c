/*
 * test_npy.c: the .npy writer of the tools (src/tools/npy.c).
 *
 * Without arguments it checks the bytes of written files against the
 * format 1.0 specification. With `--write DIR` it writes the arrays that
 * check_npy.py then loads with NumPy.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npy.h"

/* A 1x3x2x2 float32 tensor holding 0, 0.5, 1, ... and a 5-element u8. */
static float test_f32[12];
static const uint32_t test_f32_shape[4] = {1, 3, 2, 2};
static const uint8_t test_u8[5] = {0, 1, 127, 128, 255};
static const uint32_t test_u8_shape[1] = {5};

static void test_fill(void)
{
	for (int i = 0; i < 12; i++)
		test_f32[i] = 0.5f * (float)i;
}

static int test_write(const char *dir)
{
	char path[4096];

	test_fill();
	snprintf(path, sizeof(path), "%s/f32.npy", dir);
	if (fprep_npy_write(path, "<f4", test_f32_shape, 4, test_f32,
	                    sizeof(test_f32)) != 0)
		return 1;
	snprintf(path, sizeof(path), "%s/u8.npy", dir);
	if (fprep_npy_write(path, "|u1", test_u8_shape, 1, test_u8,
	                    sizeof(test_u8)) != 0)
		return 1;
	return 0;
}

/* test_read reads a whole file into a malloc'd buffer. */
static uint8_t *test_read(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = malloc(1 << 16);

	assert_non_null(f);
	assert_non_null(buf);
	*size = fread(buf, 1, 1 << 16, f);
	fclose(f);
	return buf;
}

/* test_check checks the file at path: magic, version, header length
 * aligning the data to 64 bytes, the dict text, and the data. */
static void test_check(const char *path, const char *dict, const void *data,
                       size_t data_size)
{
	size_t size, hlen;
	uint8_t *buf = test_read(path, &size);

	assert_true(size > 10);
	assert_memory_equal(buf, "\x93NUMPY\x01\x00", 8);
	hlen = buf[8] | (size_t)buf[9] << 8;
	assert_int_equal((10 + hlen) % 64, 0);
	assert_int_equal(size, 10 + hlen + data_size);
	assert_int_equal(buf[10 + hlen - 1], '\n');
	assert_memory_equal(buf + 10, dict, strlen(dict));
	for (size_t i = 10 + strlen(dict); i < 10 + hlen - 1; i++)
		assert_int_equal(buf[i], ' ');
	assert_memory_equal(buf + 10 + hlen, data, data_size);
	free(buf);
}

static void header_bytes(void **state)
{
	char dir[] = "/tmp/fprep-npy-XXXXXX";
	char path[64];

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(test_write(dir), 0);
	snprintf(path, sizeof(path), "%s/f32.npy", dir);
	test_check(path,
	           "{'descr': '<f4', 'fortran_order': False, "
	           "'shape': (1, 3, 2, 2), }",
	           test_f32, sizeof(test_f32));
	remove(path);
	snprintf(path, sizeof(path), "%s/u8.npy", dir);
	test_check(path,
	           "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }",
	           test_u8, sizeof(test_u8));
	remove(path);
	remove(dir);
}

static void bad_arguments(void **state)
{
	uint32_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};

	(void)state;
	errno = 0;
	assert_int_equal(fprep_npy_write("/tmp/x.npy", "<f4", shape, 0, "", 0),
	                 -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(fprep_npy_write("/tmp/x.npy", "<f4", shape, 9, "", 0),
	                 -1);
	assert_int_equal(fprep_npy_write("/tmp/x.npy",
	                                 "a-descr-that-is-far-too-long", shape,
	                                 1, "", 0),
	                 -1);
	errno = 0;
	assert_int_equal(fprep_npy_write("/nonexistent-dir/x.npy", "|u1", shape,
	                                 1, "a", 1),
	                 -1);
	assert_int_equal(errno, ENOENT);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(header_bytes),
	        cmocka_unit_test(bad_arguments),
	};

	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return test_write(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
