/*
 * fuzz_manifest.c - libFuzzer target over the model manifest reader (models/NAME.json): any
 * bytes load or fail with a status and a message, never crash, hang or leak.
 */
#include "fuzz_common.h"
#include "engine/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".json");
    if (!path)
        return 0;
    vf_manifest *m = NULL;
    vf_err err = {0};
    if (vfi_manifest_load(path, &m, &err) == VF_OK)
        vfi_manifest_free(&m);
    else if (!err.msg[0])
        abort(); /* a failure must say why */
    return 0;
}
