/*
 * clock.h: the daemon's clock.
 */
#ifndef FPREP_CLOCK_H
#define FPREP_CLOCK_H

#include <stdint.h>

/* fprep__now_ns returns CLOCK_MONOTONIC in nanoseconds. Any thread. */
uint64_t fprep__now_ns(void);

#endif /* FPREP_CLOCK_H */
