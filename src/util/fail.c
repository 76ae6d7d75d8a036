/*
 * fail.c: the explanation of a refusal (see fail.h).
 */
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

int fprep__fail(char *msg, size_t msg_size, int err, const char *fmt, ...)
{
	va_list ap;

	if (msg != NULL && msg_size > 0) {
		va_start(ap, fmt);
		vsnprintf(msg, msg_size, fmt, ap);
		va_end(ap);
	}
	return err;
}
