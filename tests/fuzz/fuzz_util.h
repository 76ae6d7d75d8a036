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

/* driver_mutations runs count random variations of a seed of size bytes:
 * one to four edits each, at offsets below window (where the parser
 * looks): a bit flipped, a byte set to one of the nspecial special bytes,
 * with fields set a 16-bit field (a size or a length) set at random, or
 * the length changed (up to size + 64; the bytes past the seed are zero). */
static inline void driver_mutations(const uint8_t *seed, size_t size,
                                    size_t window, int count,
                                    const uint8_t *special, size_t nspecial,
                                    int fields)
{
	size_t cap = size + 64;
	uint8_t *buf = malloc(cap);

	if (buf == NULL)
		abort();
	if (window > size)
		window = size;
	for (int i = 0; i < count && window > 0; i++) {
		size_t len = size;
		int edits = 1 + (int)(driver_rand() % 4);

		memcpy(buf, seed, size);
		memset(buf + size, 0, cap - size);
		for (int e = 0; e < edits; e++) {
			uint64_t r = driver_rand();
			size_t at = (r >> 8) % window;

			switch (r % (fields ? 5 : 4)) {
			case 0:
			case 1:
				buf[at] ^= (uint8_t)(1u << ((r >> 40) % 8));
				break;
			case 2:
				buf[at] = special[(r >> 40) % nspecial];
				break;
			case 3:
				len = (size_t)((r >> 40) % cap);
				break;
			case 4:
				if (at + 1 < size) {
					buf[at] = (uint8_t)(r >> 40);
					buf[at + 1] = (uint8_t)(r >> 48);
				}
				break;
			}
		}
		driver_run(buf, len);
	}
	free(buf);
}

#endif /* FPREP_FUZZ_UTIL_H */
