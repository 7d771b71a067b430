/*
 * test_alloc_fail.c - walks allocation failures through model loading and compilation: the N-th
 * allocation fails for N = 1, 2, ... until creation succeeds. Every failure must come back as a
 * status (never a crash), and under AddressSanitizer nothing may leak.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/mem.h"
#include "vidfeat.h"

static int walk(const char *backend)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = backend;
    cfg.batch_size = 2;
    for (long n = 1;; n++) {
        vfi_mem_fail_after(n);
        vf_extractor *ex = NULL;
        vf_status rc = vf_extractor_create(&cfg, &ex);
        long counted = vfi_mem_fail_after(0);
        if (rc >= 0) {
            float x[2 * 3 * 32 * 32] = {0}, y[20];
            CHECK_OK(vf_extractor_infer(ex, x, 2, y), vf_extractor_errmsg(ex));
            vf_extractor_free(&ex);
            CHECK(counted < n); /* success means the failing allocation was never reached */
            printf("%s: %ld allocation failure points, all handled\n", backend, n - 1);
            return (int)(n - 1);
        }
        CHECK_MSG(rc == VF_ERR_NOMEM, "%s: allocation %ld failed, got %s: %s", backend, n,
                  vf_status_str(rc), ex ? vf_extractor_errmsg(ex) : "");
        vf_extractor_free(&ex);
        CHECK(n < 100000);
    }
}

int main(void)
{
    if (vfi_mem_fail_after(0) < 0)
        SKIP("built without VF_TEST_HOOKS");
    CHECK(walk("ref") > 10);
    CHECK(walk("cpu") > 10);
    return 0;
}
