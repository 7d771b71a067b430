/*
 * fuzz_calib.c - libFuzzer target over the int8 calibration-file reader (MODEL.onnx.int8): any
 * bytes load or fail with a status and a message, never crash, hang or leak; a file that loads
 * is written back and must read again to the same ranges.
 */
#include <math.h>

#include "engine/calib.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".int8");
    if (!path)
        return 0;
    vf_calib *c = NULL, *again = NULL;
    vf_err err = {0};
    if (vfi_calib_read(path, &c, &err) != VF_OK) {
        if (!err.msg[0])
            abort(); /* a failure must say why */
        return 0;
    }
    /* round trip: what was read is written and read back the same */
    if (vfi_calib_write(c, "fuzz", path, &err) == VF_OK &&
        vfi_calib_read(path, &again, &err) == VF_OK) {
        if (again->n_ranges != c->n_ranges || !vfi_calib_same_source(c, again))
            abort();
        for (int i = 0; i < c->n_ranges; i++)
            if (strcmp(again->names[i], c->names[i]) ||
                (again->ranges[i] != c->ranges[i] && !(isnan(c->ranges[i]))))
                abort();
    }
    vfi_calib_free(&again);
    vfi_calib_free(&c);
    return 0;
}
