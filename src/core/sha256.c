/*
 * sha256.c - SHA-256 written from FIPS 180-4. Stateless functions; any thread.
 *
 * Two block functions with the same result: portable C, and the x86 SHA extensions (SHA-NI:
 * Intel since Ice Lake / Goldmont, AMD since Zen), chosen per hash by CPUID. The model file is
 * hashed on every database run, and VGG19's is 550 MB: 5 s of portable C on this project's
 * machine, a fraction of a second with SHA-NI.
 */
#include "core/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define VF_HAVE_SHANI_CODE 1
#endif

#include "core/mem.h"

/* Runs nblocks 64-byte blocks through the compression function, updating h. */
typedef void (*sha_blocks_fn)(uint32_t h[8], const uint8_t *p, size_t nblocks);

typedef struct sha_ctx {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
    sha_blocks_fn blocks;
} sha_ctx;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress(uint32_t hs[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = hs[0], b = hs[1], cc = hs[2], d = hs[3], e = hs[4], f = hs[5], g = hs[6],
             h = hs[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = b;
        b = a;
        a = t1 + t2;
    }
    hs[0] += a;
    hs[1] += b;
    hs[2] += cc;
    hs[3] += d;
    hs[4] += e;
    hs[5] += f;
    hs[6] += g;
    hs[7] += h;
}

static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
    for (size_t i = 0; i < nblocks; i++)
        compress(h, p + 64 * i);
}

#ifdef VF_HAVE_SHANI_CODE
/* SHA-NI keeps the eight state words as two vectors, {A,B,E,F} and {C,D,G,H} (highest lane
 * first); each sha256rnds2 does two rounds and returns the new ABEF, and the old ABEF is the new
 * CDGH, so four rounds are two calls with the vectors' roles swapped. Message words are scheduled
 * four at a time: sha256msg1 adds sigma0(W[t-15]) to W[t-16], W[t-7] comes from an alignr of the
 * two newest vectors, and sha256msg2 adds sigma1(W[t-2]). */
__attribute__((target("sha,sse4.1"))) static void blocks_shani(uint32_t h[8], const uint8_t *p,
                                                               size_t nblocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xb1); /* b a d c */
    __m128i hgfe = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1b); /* h g f e */
    __m128i abef = _mm_alignr_epi8(dcba, hgfe, 8);
    __m128i cdgh = _mm_blend_epi16(hgfe, dcba, 0xf0);
    for (size_t blk = 0; blk < nblocks; blk++, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w[4];
        for (int i = 0; i < 4; i++)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
        for (int g = 0; g < 16; g++) {
            __m128i wk = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk); /* now ABEF one step on */
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0e));
            if (g < 12) { /* the words of group g + 4 replace those of group g */
                __m128i x = _mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));
                w[g & 3] = _mm_sha256msg2_epu32(x, w[(g + 3) & 3]);
            }
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1b); /* a b e f, lowest lane first */
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xb1); /* g h c d */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xf0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

static int cpu_has_shani(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 29))) /* leaf 7: EBX.SHA */
        return 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)); /* leaf 1: ECX.SSE4.1 */
}
#endif

static void sha_init(sha_ctx *c, int portable)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof(h0));
    c->bytes = 0;
    c->fill = 0;
    c->blocks = blocks_portable;
#ifdef VF_HAVE_SHANI_CODE
    if (!portable && cpu_has_shani())
        c->blocks = blocks_shani;
#else
    (void)portable;
#endif
}

static void sha_update(sha_ctx *c, const uint8_t *p, size_t n)
{
    c->bytes += n;
    while (n) {
        if (c->fill == 0 && n >= 64) {
            c->blocks(c->h, p, n / 64);
            p += n / 64 * 64;
            n %= 64;
            continue;
        }
        size_t take = 64 - c->fill < n ? 64 - c->fill : n;
        memcpy(c->block + c->fill, p, take);
        c->fill += take;
        p += take;
        n -= take;
        if (c->fill == 64) {
            c->blocks(c->h, c->block, 1);
            c->fill = 0;
        }
    }
}

static void sha_final(sha_ctx *c, char hex[65])
{
    uint64_t bits = c->bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (c->fill < 56 ? 56 : 120) - c->fill;
    for (int i = 0; i < 8; i++)
        pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(c, pad, padlen + 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

static void sha256_mem(const void *data, size_t size, char hex[65], int portable)
{
    sha_ctx c;
    sha_init(&c, portable);
    sha_update(&c, data, size);
    sha_final(&c, hex);
}

void vfi_sha256(const void *data, size_t size, char hex[65])
{
    sha256_mem(data, size, hex, 0);
}

void vfi_sha256_portable(const void *data, size_t size, char hex[65])
{
    sha256_mem(data, size, hex, 1);
}

vf_status vfi_sha256_file(const char *path, char hex[65], vf_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = vfi_malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    sha_ctx c;
    sha_init(&c, 0);
    size_t n;
    while ((n = fread(buf, 1, CHUNK, f)) > 0)
        sha_update(&c, buf, n);
    int bad = ferror(f);
    fclose(f);
    vfi_free(buf);
    if (bad)
        return vfi_fail(err, VF_ERR_IO, "%s: read error", path);
    sha_final(&c, hex);
    return VF_OK;
}

vf_status vfi_sha256_file_sampled(const char *path, char hex[65], vf_err *err)
{
    enum { N_BLOCKS = 64, BLOCK = 4096 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    uint8_t buf[BLOCK];
    sha_ctx c;
    sha_init(&c, 0);
    int bad = fseeko(f, 0, SEEK_END) != 0;
    off_t size = bad ? 0 : ftello(f);
    bad = bad || size < 0;
    for (int i = 0; i < 8 && !bad; i++) {
        uint8_t byte = (uint8_t)((uint64_t)size >> (8 * i));
        sha_update(&c, &byte, 1);
    }
    for (int i = 0; i < N_BLOCKS && !bad; i++) {
        off_t at = size <= (off_t)N_BLOCKS * BLOCK
                       ? (off_t)i * BLOCK
                       : (off_t)((double)(size - BLOCK) * i / (N_BLOCKS - 1));
        if (at >= size)
            break;
        size_t n = 0;
        bad = fseeko(f, at, SEEK_SET) != 0;
        if (!bad)
            n = fread(buf, 1, BLOCK, f);
        bad = bad || ferror(f);
        sha_update(&c, buf, n);
    }
    fclose(f);
    if (bad)
        return vfi_fail(err, VF_ERR_IO, "%s: read error", path);
    sha_final(&c, hex);
    return VF_OK;
}
