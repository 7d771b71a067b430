/*
 * isa.c - the CPU's vector instructions (cpuid leaves 1, 7 and the brand string; XCR0 for what
 * the operating system saves across switches) under VIDFEAT_ISA's cap (isa.h). No state: each
 * call asks the CPU again (a few hundred cycles), so a cap set by a test before it plans is seen.
 */
#include "core/isa.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* The CPU's level and extensions, as far as the operating system enables their registers. */
static void detect(vf_isa *isa)
{
    unsigned r[4], max = (unsigned)__get_cpuid_max(0, NULL);
    if (max < 7)
        return;
    cpuid(1, 0, r);
    unsigned family = (r[0] >> 8) & 0xf, model = (r[0] >> 4) & 0xf, stepping = r[0] & 0xf;
    if (family == 0xf)
        family += (r[0] >> 20) & 0xff;
    if (family == 6 || family >= 0xf)
        model += ((r[0] >> 16) & 0xf) << 4;
    snprintf(isa->cpu_key, sizeof(isa->cpu_key), "family %u model %u stepping %u", family, model,
             stepping);
    int osxsave = (r[2] >> 27) & 1, fma = (r[2] >> 12) & 1, avx = (r[2] >> 28) & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
    unsigned b7[4], a7[4] = {0, 0, 0, 0};
    cpuid(7, 0, b7);
    if (b7[0] >= 1)
        cpuid(7, 1, a7);
    unsigned ebx = b7[1], ecx = b7[2], edx = b7[3];
    int avx2 = (ebx >> 5) & 1;
    /* F, DQ, CD, BW, VL: what every AVX-512 CPU since Skylake-SP has */
    int avx512 = ((ebx >> 16) & 1) && ((ebx >> 17) & 1) && ((ebx >> 28) & 1) && ((ebx >> 30) & 1) &&
                 ((ebx >> 31) & 1);
    if (ymm && avx && avx2 && fma) {
        isa->cpu_level = VF_ISA_AVX2;
        if ((a7[0] >> 4) & 1)
            isa->cpu_features |= VF_ISA_F_AVX_VNNI;
    }
    if (isa->cpu_level == VF_ISA_AVX2 && zmm && avx512) {
        isa->cpu_level = VF_ISA_AVX512;
        if ((ecx >> 11) & 1)
            isa->cpu_features |= VF_ISA_F_AVX512_VNNI;
        if ((a7[0] >> 5) & 1)
            isa->cpu_features |= VF_ISA_F_AVX512_BF16;
        if (tiles && ((edx >> 24) & 1)) { /* AMX-TILE */
            isa->cpu_level = VF_ISA_AMX;
            if ((edx >> 22) & 1)
                isa->cpu_features |= VF_ISA_F_AMX_BF16;
            if ((edx >> 25) & 1)
                isa->cpu_features |= VF_ISA_F_AMX_INT8;
        }
    }
    unsigned ext = 0, b[12];
    __cpuid(0x80000000u, ext, r[1], r[2], r[3]);
    if (ext >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            cpuid(0x80000002u + i, 0, b + 4 * i);
        char brand[49];
        memcpy(brand, b, 48);
        brand[48] = '\0';
        const char *s = brand + strspn(brand, " ");
        size_t n = strlen(s);
        while (n && s[n - 1] == ' ')
            n--;
        if (n)
            snprintf(isa->cpu, sizeof(isa->cpu), "%.*s", (int)n, s);
    }
}
#else
static void detect(vf_isa *isa)
{
    (void)isa; /* not x86: vidfeat's own kernels run their plain C */
}
#endif

/* The extensions a level may use. */
static unsigned features_of(vf_isa_level level)
{
    switch (level) {
    case VF_ISA_GENERIC:
        return 0;
    case VF_ISA_AVX2:
        return 0; /* AVX-VNNI is left out: the AVX2 path is what a Zen 3 runs */
    case VF_ISA_AVX512:
        return VF_ISA_F_AVX_VNNI | VF_ISA_F_AVX512_VNNI | VF_ISA_F_AVX512_BF16;
    case VF_ISA_AMX:
        break;
    }
    return ~0u;
}

/* oneDNN's own cap (ONEDNN_MAX_CPU_ISA, or DNNL_MAX_CPU_ISA before it), which the CPU backend
 * then runs under whatever vidfeat asks: as a level and the extensions it keeps; 0 when unset
 * or not one of oneDNN's names. */
static int onednn_cap(vf_isa_level *level, unsigned *features)
{
    static const struct {
        const char *name;
        vf_isa_level level;
        unsigned features;
    } caps[] = {
        {"SSE41", VF_ISA_GENERIC, 0},
        {"AVX", VF_ISA_GENERIC, 0},
        {"AVX2", VF_ISA_AVX2, 0},
        {"AVX2_VNNI", VF_ISA_AVX2, VF_ISA_F_AVX_VNNI},
        {"AVX512_CORE", VF_ISA_AVX512, 0},
        {"AVX512_CORE_VNNI", VF_ISA_AVX512, VF_ISA_F_AVX512_VNNI},
        {"AVX512_CORE_BF16", VF_ISA_AVX512, VF_ISA_F_AVX512_VNNI | VF_ISA_F_AVX512_BF16},
    };
    const char *v = getenv("ONEDNN_MAX_CPU_ISA");
    if (!v || !v[0])
        v = getenv("DNNL_MAX_CPU_ISA");
    for (size_t i = 0; v && i < sizeof(caps) / sizeof(caps[0]); i++)
        if (!strcasecmp(v, caps[i].name)) {
            *level = caps[i].level;
            *features = caps[i].features;
            return 1;
        }
    return 0;
}

vf_status vfi_isa_get(vf_isa *out, vf_err *err)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->cpu, sizeof(out->cpu), "unknown CPU");
    detect(out);
    char fms[sizeof(out->cpu_key)]; /* detect's family, model and stepping, when it read them */
    snprintf(fms, sizeof(fms), "%s", out->cpu_key);
    snprintf(out->cpu_key, sizeof(out->cpu_key), "%.62s%s%.31s", out->cpu, fms[0] ? ", " : "", fms);
    out->level = out->cpu_level;
    out->features = out->cpu_features;
    vf_isa_level dl;
    unsigned df;
    if (onednn_cap(&dl, &df)) {
        if (dl < out->level)
            out->level = dl;
        out->features &= df;
        out->cap = "ONEDNN_MAX_CPU_ISA";
    }
    const char *cap = getenv("VIDFEAT_ISA");
    if (!cap || !cap[0] || !strcmp(cap, "native"))
        return VF_OK;
    vf_isa_level level;
    if (!strcmp(cap, "avx2"))
        level = VF_ISA_AVX2;
    else if (!strcmp(cap, "avx512"))
        level = VF_ISA_AVX512;
    else
        return vfi_fail(err, VF_ERR_INVALID,
                        "VIDFEAT_ISA=%.40s: expected avx2, avx512 or native (the default)", cap);
    out->cap = level == VF_ISA_AVX2 ? "VIDFEAT_ISA=avx2" : "VIDFEAT_ISA=avx512";
    if (level < out->level)
        out->level = level;
    out->features &= features_of(out->level);
    return VF_OK;
}

const char *vfi_isa_name(vf_isa_level level)
{
    static const char *const names[] = {"generic", "avx2", "avx512", "amx"};
    return level >= VF_ISA_GENERIC && level <= VF_ISA_AMX ? names[level] : "unknown";
}

void vfi_isa_describe(const vf_isa *isa, char *buf, size_t size)
{
    static const struct {
        unsigned bit;
        const char *name;
    } ext[] = {{VF_ISA_F_AVX_VNNI, "avx-vnni"},
               {VF_ISA_F_AVX512_VNNI, "vnni"},
               {VF_ISA_F_AVX512_BF16, "bf16"},
               {VF_ISA_F_AMX_BF16, "amx-bf16"},
               {VF_ISA_F_AMX_INT8, "amx-int8"}};
    int n = snprintf(buf, size, "%s", vfi_isa_name(isa->level));
    int listed = 0;
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]) && n >= 0 && (size_t)n < size; i++)
        if (isa->features & ext[i].bit)
            n += snprintf(buf + n, size - (size_t)n, "%s%s", listed++ ? ", " : " (", ext[i].name);
    if (listed && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ")");
}

int vfi_isa_has_bf16(const vf_isa *isa)
{
    return (isa->features & (VF_ISA_F_AVX512_BF16 | VF_ISA_F_AMX_BF16)) != 0;
}
