/*
 * fuzz_onnx.c - libFuzzer target over the ONNX loader and the graph passes: any byte string must
 * load or fail with a status, never crash, hang or leak. Built with clang when VIDFEAT_FUZZ=ON;
 * replay.c runs the committed corpus through the same entry point under gcc in ctest.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "engine/onnx.h"
#include "engine/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet_logs();
    vf_graph *g = NULL;
    vf_err err = {0};
    vf_onnx_opts opts = {32};
    if (vfi_onnx_load_mem(data, size, NULL, &opts, &g, &err) == VF_OK) {
        int pooled;
        if (vfi_pass_set_output(g, g->output, 1, &pooled, &err) == VF_OK)
            vfi_pass_optimize(g, &err);
    }
    vfi_graph_free(&g);
    return 0;
}
