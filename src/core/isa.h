/*
 * isa.h - which vector instructions this CPU has and which vidfeat may use: the CPU's own
 * (cpuid, and the operating system's consent in XCR0), capped by the environment variable
 * VIDFEAT_ISA so that the lesser paths can be built, tested and measured on any machine:
 *
 *   VIDFEAT_ISA=avx2     AVX2 and FMA, nothing of AVX-512 or AMX (what AMD Zen 2/3 and Intel
 *                        desktops since Alder Lake have)
 *   VIDFEAT_ISA=avx512   AVX-512 with its VNNI and BF16 extensions, no AMX
 *   VIDFEAT_ISA=native   everything the CPU has (also when unset)
 *
 * The CPU backend hands the cap to oneDNN too (backend_dnnl.c); oneDNN's own cap,
 * ONEDNN_MAX_CPU_ISA, is obeyed here as well, so every kernel of vidfeat's own dispatches on
 * what this says and agrees with oneDNN's. Any thread; reads the CPU and the environment afresh.
 */
#ifndef VIDFEAT_ISA_H
#define VIDFEAT_ISA_H

#include <stddef.h>

#include "core/status.h"

/* Levels, each including the ones before. */
typedef enum vf_isa_level {
    VF_ISA_GENERIC = 0, /* plain C: no AVX2 + FMA */
    VF_ISA_AVX2,        /* AVX2 + FMA */
    VF_ISA_AVX512,      /* AVX-512 F, CD, BW, DQ, VL */
    VF_ISA_AMX,         /* AMX tiles (bf16, int8) */
} vf_isa_level;

/* Extensions beside the levels (vf_isa.features). */
enum {
    VF_ISA_F_AVX_VNNI = 1 << 0,    /* AVX-VNNI (256-bit int8 dot products) */
    VF_ISA_F_AVX512_VNNI = 1 << 1, /* AVX512-VNNI */
    VF_ISA_F_AVX512_BF16 = 1 << 2, /* AVX512-BF16 */
    VF_ISA_F_AMX_BF16 = 1 << 3,
    VF_ISA_F_AMX_INT8 = 1 << 4,
};

typedef struct vf_isa {
    vf_isa_level level;     /* what may be used: the CPU's, capped */
    unsigned features;      /* VF_ISA_F_* that may be used (those above the cap removed) */
    vf_isa_level cpu_level; /* what the CPU has */
    unsigned cpu_features;
    /* what capped it: "VIDFEAT_ISA=avx2", "VIDFEAT_ISA=avx512", "ONEDNN_MAX_CPU_ISA" (oneDNN's
     * own variable, which the CPU backend obeys too); NULL when nothing did */
    const char *cap;
    char cpu[64]; /* the CPU's model name (cpuid's brand string), or "unknown CPU" */
    /* the name with its family, model and stepping ("AMD EPYC, family 25 model 1 stepping 1"):
     * what a measured choice is kept under (a virtual machine's brand string can name several
     * generations alike) */
    char cpu_key[96];
} vf_isa;

/* This CPU's instructions under VIDFEAT_ISA's cap. VF_ERR_INVALID when VIDFEAT_ISA holds
 * something other than avx2, avx512 or native (*out is then the CPU's, uncapped). */
vf_status vfi_isa_get(vf_isa *out, vf_err *err);

/* A level's name as VIDFEAT_ISA spells it ("generic", "avx2", "avx512", "amx"). */
const char *vfi_isa_name(vf_isa_level level);

/* "avx512 (vnni, bf16)": the level and extensions that may be used, into buf. */
void vfi_isa_describe(const vf_isa *isa, char *buf, size_t size);

/* Can bf16 arithmetic run at hardware speed: AVX512-BF16 or AMX among what may be used? */
int vfi_isa_has_bf16(const vf_isa *isa);

#endif /* VIDFEAT_ISA_H */
