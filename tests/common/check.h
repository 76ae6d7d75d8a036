/*
 * check.h: checks for the test programs that are not cmocka suites (they
 * drive a daemon, a GPU or threads of their own). CHECK counts a failed
 * condition, prints where and why, and goes on, so one run reports every
 * failure; REQUIRE ends the program when going on makes no sense. The
 * program ends with check_failures ? 1 : 0.
 */
#ifndef FPREP_TESTS_CHECK_H
#define FPREP_TESTS_CHECK_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* check_count, check_failures: checks made and failed so far (any
 * thread). */
static _Atomic int check_count __attribute__((unused));
static _Atomic int check_failures __attribute__((unused));

/* CHECK(cond, fmt, ...): counts the check; if cond is false, counts a
 * failure and prints "FAIL file:line: " and the printf-style message. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		check_count++;                                                 \
		if (!(cond)) {                                                 \
			check_failures++;                                      \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
		}                                                              \
	} while (0)

/* REQUIRE(cond): if cond is false, prints it and exits with status 1. */
#define REQUIRE(cond)                                                          \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__,          \
			        __LINE__, #cond);                              \
			exit(1);                                               \
		}                                                              \
	} while (0)

#endif /* FPREP_TESTS_CHECK_H */
