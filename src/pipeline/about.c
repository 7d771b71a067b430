/*
 * about.c - what this build of the library has: its backends (and their libraries' versions),
 * whether CUDA is in, the decoding and database libraries. Here, on top, because it asks every
 * layer below.
 */
#include <stdio.h>
#include <string.h>

#include "engine/backend.h"
#include "media/decode.h"
#include "store/store.h"
#include "vidfeat.h"

int vf_has_feature(const char *name)
{
    const vf_backend_entry *list;
    size_t n = vfi_backend_list(&list);
    if (!name)
        return 0;
    if (!strcmp(name, "bf16"))
        return 1; /* the dnnl backend is always built */
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
    char av[256], stores[256];
    vfi_decode_versions(av, sizeof(av));
    if (len < size)
        snprintf(buf + len, size - len, "cuda: %s\ndecode: %s\nstores: %s\n",
                 vf_has_feature("cuda") ? "yes" : "no", av,
                 vfi_store_versions(stores, sizeof(stores)));
    return buf;
}
