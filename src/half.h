/*
 * half.h - IEEE 754 binary16 ("half", f16) from float on the host, bit-exact with the hardware's
 * round-to-nearest-even conversion: the GPU backend converts weights once with it.
 */
#ifndef VIDFEAT_HALF_H
#define VIDFEAT_HALF_H

#include <stdint.h>

/* The binary16 bit pattern nearest to f (ties to even); overflow gives infinity, NaN stays a
 * (quiet) NaN of the same sign. */
uint16_t vfi_f32_to_f16(float f);

#endif /* VIDFEAT_HALF_H */
