/*
 * clock.c: the daemon's clock (see clock.h).
 */
#include "clock.h"

#include <time.h>

uint64_t fprep__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
