/*
 * test_error.c: names and descriptions of enum fprep_err (src/error.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"

static void every_code(void **state)
{
	int n = 0;

	(void)state;
#define TEST_ERR(name, num, text)                                              \
	assert_int_equal(FPREP_##name, num);                                   \
	assert_string_equal(fprep_err_name(num), #name);                       \
	assert_string_equal(fprep_strerror(num), text);                        \
	n++;
	FPREP_ERRNO_MAP(TEST_ERR)
#undef TEST_ERR
	assert_int_equal(n, 21);
	assert_string_equal(fprep_err_name(FPREP_OK), "OK");
	assert_string_equal(fprep_err_name(FPREP_ELIMIT), "ELIMIT");
	assert_string_equal(fprep_strerror(FPREP_ETIMEDOUT), "timed out");
	assert_string_equal(fprep_err_name(FPREP_EMISMATCH), "EMISMATCH");
	assert_string_equal(fprep_err_name(FPREP_EBITSTREAM), "EBITSTREAM");
}

static void unknown_code(void **state)
{
	static const int bad[] = {-1, 21, 22, 1000, INT32_MIN, INT32_MAX};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_string_equal(fprep_err_name(bad[i]), "UNKNOWN");
		assert_string_equal(fprep_strerror(bad[i]), "unknown error");
	}
}

CMOCKA_MAIN({
        cmocka_unit_test(every_code),
        cmocka_unit_test(unknown_code),
})
