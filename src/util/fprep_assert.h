/*
 * fprep_assert.h: FPREP__ASSERT, for what only a programmer can get wrong (a
 * slot in a state it cannot be in, a second reply to one request, a region
 * used after its last use ended, a loop-thread field touched from another
 * thread). Never for bytes from a peer, sizes, exhausted memory or a
 * failed call: those are errors, returned and answered.
 *
 * Like nng's NNI_ASSERT, the checks are compiled in Debug builds (no
 * NDEBUG: the sanitizer builds of tests/run-all.sh are Debug) and out of
 * Release ones, where the condition is not evaluated. A failed check
 * writes the condition, file and line to stderr and aborts.
 * FPREP__ASSERTS is 1 where the checks are compiled in (tests skip what
 * needs them otherwise).
 */
#ifndef FPREP_UTIL_FPREP_ASSERT_H
#define FPREP_UTIL_FPREP_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#ifndef NDEBUG
#define FPREP__ASSERTS 1
#else
#define FPREP__ASSERTS 0
#endif

/* fprep__assert_fail reports a failed FPREP__ASSERT and aborts. */
__attribute__((noreturn, cold)) static inline void
fprep__assert_fail(const char *cond, const char *file, int line)
{
	fprintf(stderr, "frameprep: %s:%d: assertion failed: %s\n", file, line,
	        cond);
	fflush(stderr);
	abort();
}

#if FPREP__ASSERTS
#define FPREP__ASSERT(x)                                                       \
	((x) ? (void)0 : fprep__assert_fail(#x, __FILE__, __LINE__))
#else
#define FPREP__ASSERT(x) ((void)0)
#endif

#endif /* FPREP_UTIL_FPREP_ASSERT_H */
