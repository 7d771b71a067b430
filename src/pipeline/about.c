/*
 * about.c - what this build of the library has: its backends (and their libraries' versions),
 * whether CUDA is in, the decoding, database, search (FAISS) and text (ICU) libraries. Here, on
 * top, because it asks every layer below.
 */
#include <stdio.h>
#include <string.h>

#include "core/isa.h"
#include "engine/backend.h"
#include "media/decode.h"
#include "search/ann.h"
#include "store/store.h"
#include "text/unicode.h"
#include "vidfeat.h"

int vf_has_feature(const char *name)
{
    const vf_backend_entry *list;
    size_t n = vfi_backend_list(&list);
    if (!name)
        return 0;
    if (!strcmp(name, "bf16")) { /* the dnnl backend is always built: does the CPU run it? */
        vf_isa isa;
        vf_err err = {VF_OK, ""};
        return vfi_isa_get(&isa, &err) == VF_OK && vfi_isa_has_bf16(&isa);
    }
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(list[i].name, name))
            return 1; /* built (a module may still not load here) */
    }
    return 0;
}

char *vf_build_info(char *buf, size_t size)
{
    const vf_backend_entry *list;
    size_t n = vfi_backend_list(&list), len = 0;
    if (!buf || !size)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++) {
        char lib[512];
        vfi_backend_library_version(&list[i], lib, sizeof(lib));
        len += (size_t)snprintf(buf + len, size - len, "backend %s: %s (%s%s)\n", list[i].name,
                                list[i].ops ? list[i].ops->description : list[i].description,
                                list[i].ops ? "" : "run-time module: ", lib);
    }
    char av[256], stores[256], cpu[256] = "", ann[64], uni[96];
    vfi_decode_versions(av, sizeof(av));
    vfi_ann_version(ann, sizeof(ann));
    vfi_unicode_version(uni, sizeof(uni));
    vf_isa isa;
    vf_err err = {VF_OK, ""};
    if (vfi_isa_get(&isa, &err) < 0) {
        snprintf(cpu, sizeof(cpu), "%.200s", err.msg);
    } else {
        char desc[96];
        vfi_isa_describe(&isa, desc, sizeof(desc));
        snprintf(cpu, sizeof(cpu), "%s, %s%s%s", isa.cpu, desc, isa.cap ? ", capped by " : "",
                 isa.cap ? isa.cap : "");
    }
    if (len < size)
        snprintf(
            buf + len, size - len,
            "cuda: %s\ncpu: %s\nbf16: %s\ndecode: %s\nstores: %s\nsearch: %s\ntext: Unicode %s\n",
            vf_has_feature("cuda") ? "yes" : "no", cpu,
            vf_has_feature("bf16") ? "yes" : "no (neither AVX512-BF16 nor AMX may be used)", av,
            vfi_store_versions(stores, sizeof(stores)), ann, uni);
    return buf;
}
