/*
 * fuzz_index.c - libFuzzer target over the search index reader (vfi_ann_read, FAISS's format
 * behind vidfeat's checks): any bytes load or fail with a status and a message; an index that
 * loads answers searches (every probe setting its kind has) without a crash, a hang or a leak,
 * its ids -1 or ones it holds. Seeds: make_index_corpus writes one index of each kind vidfeat
 * makes (Flat, HNSW, IVF-Flat, IVF-SQ8, PCA + IVF-PQ).
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "search/ann.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef VF_FUZZ_ALLOC_LIMIT
void fuzz_alloc_limit(size_t bytes); /* fuzz_alloc.cpp: the libFuzzer build's operator new */
#else
static void fuzz_alloc_limit(size_t bytes)
{
    (void)bytes;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet_logs();
    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f)
        return 0;
    vf_ann *a = NULL;
    vf_err err = {0};
    fuzz_alloc_limit((size_t)16 << 20); /* a damaged size: bad_alloc, as without the memory */
    vf_status rc = vfi_ann_read(f, &a, &err);
    fuzz_alloc_limit(0);
    fclose(f);
    if (rc != VF_OK) {
        if (!err.msg[0] || a)
            abort(); /* a failure must say why, and leave nothing */
        return 0;
    }
    int dim = vfi_ann_dim(a);
    float *q = calloc((size_t)dim, sizeof(float));
    if (q) {
        for (int i = 0; i < dim; i++)
            q[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
        int64_t ids[8];
        float dist[8];
        for (int probe = 1; probe <= 64; probe *= 8)
            if (vfi_ann_search(a, q, 8, probe, ids, dist, &err) == VF_OK)
                for (int k = 0; k < 8; k++)
                    if (ids[k] < -1)
                        abort();
        free(q);
    }
    vfi_ann_free(&a);
    return 0;
}
