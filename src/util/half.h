/*
 * half.h: float -> IEEE binary16 conversion, round to nearest even.
 *
 * The CPU reference writes F16 tensors with this function; the GPU kernels
 * use __float2half_rn, which rounds the same way, so both backends give the
 * same bits for the same float. Header-only so the inner loops can inline it.
 */
#ifndef FPREP_HALF_H
#define FPREP_HALF_H

#include <stdint.h>
#include <string.h>

/* fprep__f32_to_f16 returns the binary16 bit pattern nearest to f (ties to
 * even): values from 65520 up become infinity, values below 2^-24 become
 * subnormals or zero (2^-25 itself rounds to zero), NaN stays a quiet NaN
 * with its sign. */
static inline uint16_t fprep__f32_to_f16(float f)
{
	uint32_t x, ax, sign, m, r, rem, half;
	int shift;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000u;
	ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
		return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
	if (ax >= 0x477ff000u) /* >= 65520 (and infinity) */
		return (uint16_t)(sign | 0x7c00u);
	if (ax >= 0x38800000u) { /* normal half: >= 2^-14 */
		/* Rebias the exponent (127 -> 15) and round the 13 dropped
		 * mantissa bits to nearest even; a carry into the exponent
		 * gives the next power of two, as it should. */
		ax -= 0x38000000u;
		ax += 0xfffu + ((ax >> 13) & 1u);
		return (uint16_t)(sign | (ax >> 13));
	}
	if (ax < 0x33000000u) /* < 2^-25: rounds to zero */
		return (uint16_t)sign;
	/* Subnormal half: value = r * 2^-24. */
	m = (ax & 0x7fffffu) | 0x800000u;
	shift = 126 - (int)(ax >> 23); /* 14..24 */
	r = m >> shift;
	rem = m & ((1u << shift) - 1u);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (r & 1u)))
		r++;
	return (uint16_t)(sign | r);
}

#endif /* FPREP_HALF_H */
