/*
 * fail.h: the explanation of a refusal, written once where it is found.
 */
#ifndef FPREP_UTIL_FAIL_H
#define FPREP_UTIL_FAIL_H

#include <stddef.h>

/* fprep__fail writes the printf-style explanation fmt, ... into msg
 * (msg_size bytes, always NUL-terminated; nothing when msg is NULL or
 * msg_size 0) and returns err, so that a check reads
 * "return fprep__fail(msg, size, FPREP_EINVAL, "...", ...);". Any
 * thread. */
int fprep__fail(char *msg, size_t msg_size, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

#endif /* FPREP_UTIL_FAIL_H */
