/*
 * half.h - IEEE 754 binary16 ("half", f16) and float on the host, bit-exact with the hardware's
 * round-to-nearest-even conversion: the GPU backend converts weights with it, the database
 * stores --dtype f16 vectors with it and reads them back.
 */
#ifndef VIDFEAT_HALF_H
#define VIDFEAT_HALF_H

#include <stdint.h>

/* The binary16 bit pattern nearest to f (ties to even); overflow gives infinity, NaN stays a
 * (quiet) NaN of the same sign. */
uint16_t vfi_f32_to_f16(float f);

/* The float a binary16 bit pattern stands for (exact: every half is a float). */
float vfi_f16_to_f32(uint16_t h);

#endif /* VIDFEAT_HALF_H */
