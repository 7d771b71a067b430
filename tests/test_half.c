/*
 * test_half.c - vfi_f32_to_f16 against the compiler's own float -> _Float16 conversion (IEEE
 * round to nearest even): for every sign, exponent and top-10-bit mantissa, the patterns around
 * the rounding point of the 13 bits a half drops (below, at and above the tie), plus a sweep of
 * the whole range and named edge cases (subnormals, ties, overflow, infinities, NaNs); and
 * vfi_f16_to_f32 against the compiler's _Float16 -> float for all 65536 halves.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/half.h"

static uint16_t reference(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t bits;
    memcpy(&bits, &h, sizeof(bits));
    return bits;
}

static float from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static int check_one(uint32_t x)
{
    float f = from_bits(x);
    uint16_t got = vfi_f32_to_f16(f), want = reference(f);
    if (f != f) /* NaN: any NaN of the same sign */
        CHECK_MSG((got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) && (got >> 15) == (want >> 15),
                  "NaN 0x%08x -> 0x%04x", (unsigned)x, got);
    else
        CHECK_MSG(got == want, "0x%08x -> 0x%04x, the compiler says 0x%04x", (unsigned)x, got,
                  want);
    return 1;
}

int main(void)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } named[] = {
        {0x00000000u, 0x0000u}, /* +0 */
        {0x80000000u, 0x8000u}, /* -0 */
        {0x3f800000u, 0x3c00u}, /* 1 */
        {0x477fe000u, 0x7bffu}, /* 65504, the largest half */
        {0x477ff000u, 0x7c00u}, /* 65520: rounds to infinity */
        {0x33800000u, 0x0001u}, /* 2^-24, the smallest subnormal half */
        {0x33000000u, 0x0000u}, /* 2^-25: a tie, to even (0) */
        {0x33400000u, 0x0001u}, /* 1.5 * 2^-25: rounds up */
        {0x7f800000u, 0x7c00u}, /* +inf */
        {0xff800000u, 0xfc00u}, /* -inf */
        {0x3f801000u, 0x3c00u}, /* 1 + 2^-11: a tie, to even */
        {0x3f803000u, 0x3c02u}, /* 1 + 3 * 2^-11: a tie, to even (up) */
    };
    for (size_t i = 0; i < sizeof(named) / sizeof(*named); i++) {
        uint16_t got = vfi_f32_to_f16(from_bits(named[i].in));
        CHECK_MSG(got == named[i].out, "0x%08x -> 0x%04x, expected 0x%04x", named[i].in, got,
                  named[i].out);
    }
    static const uint32_t low[] = {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu};
    long checked = 0;
    for (uint32_t top = 0; top < (1u << 19); top++) { /* sign, exponent, 10 mantissa bits */
        for (size_t k = 0; k < sizeof(low) / sizeof(*low); k++)
            checked += check_one((top << 13) | low[k]);
    }
    for (uint64_t x = 0; x <= UINT32_MAX; x += 4093) /* a prime stride: every low-bit pattern */
        checked += check_one((uint32_t)x);
    for (uint32_t h = 0; h < 0x10000u; h++) {
        _Float16 hf;
        uint16_t bits = (uint16_t)h;
        memcpy(&hf, &bits, sizeof(hf));
        float want = (float)hf, got = vfi_f16_to_f32(bits);
        uint32_t wb, gb;
        memcpy(&wb, &want, sizeof(wb));
        memcpy(&gb, &got, sizeof(gb));
        if (want != want) /* NaN: a NaN of the same sign */
            CHECK_MSG(got != got && (gb >> 31) == (wb >> 31), "NaN 0x%04x -> 0x%08x", h, gb);
        else
            CHECK_MSG(gb == wb, "0x%04x -> 0x%08x, the compiler says 0x%08x", h, gb, wb);
    }
    printf("%ld floats converted as the compiler does, and every half back\n", checked);
    return 0;
}
