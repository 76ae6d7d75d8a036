/*
 * fuzz_util.h: what the fuzz drivers share (fuzz_driver.c, fuzz_jpeg.c):
 * a seeded generator and the run of one input from an exact-size copy, so
 * that a sanitizer build catches any read past its end. Each driver is one
 * executable with one fuzz target.
 */
#ifndef FPREP_FUZZ_UTIL_H
#define FPREP_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* driver_state: the generator's state; a driver may seed it. */
static uint64_t driver_state = 0x9e3779b97f4a7c15ull;

/* driver_rand returns the next xorshift64* number. */
static inline uint64_t driver_rand(void)
{
	driver_state ^= driver_state >> 12;
	driver_state ^= driver_state << 25;
	driver_state ^= driver_state >> 27;
	return driver_state * 0x2545f4914f6cdd1dull;
}

/* driver_run feeds size bytes of data to the target from an exact-size
 * copy. */
static inline void driver_run(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);

	if (copy == NULL)
		abort();
	memcpy(copy, data, size);
	LLVMFuzzerTestOneInput(copy, size);
	free(copy);
}

#endif /* FPREP_FUZZ_UTIL_H */
