/*
 * cmocka_main.h: the main of a cmocka test program, so that a test file
 * only lists its tests. Include after <cmocka.h>.
 */
#ifndef FPREP_TESTS_CMOCKA_MAIN_H
#define FPREP_TESTS_CMOCKA_MAIN_H

/* CMOCKA_MAIN({...}) defines main: it runs the tests of the braced list
 * (cmocka_unit_test entries and the like) as one group, without group
 * set-up, and exits with the number that failed. */
#define CMOCKA_MAIN(...)                                                       \
	int main(void)                                                         \
	{                                                                      \
		const struct CMUnitTest tests[] = __VA_ARGS__;                 \
		return cmocka_run_group_tests(tests, NULL, NULL);              \
	}

#endif /* FPREP_TESTS_CMOCKA_MAIN_H */
