/*
 * make_index_corpus.c - writes one small index of each kind vidfeat makes (vfi_ann_*, as
 * vidfeat index makes them) into DIR: the seeds of fuzz_index, and the files test_ann damages.
 * usage: make_index_corpus DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/ann.h"

#define DIM 16
#define N   400

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_index_corpus DIR\n");
        return 2;
    }
    static const char *const kinds[][2] = {{"Flat", "flat"},
                                           {"HNSW8", "hnsw"},
                                           {"IVF4,Flat", "ivf_flat"},
                                           {"IVF4,SQ8", "ivf_sq8"},
                                           {"PCAR8,IVF4,PQ4", "pca_ivf_pq"}};
    float *x = malloc(sizeof(float) * N * DIM);
    int64_t *ids = malloc(sizeof(int64_t) * N);
    if (!x || !ids)
        return 1;
    unsigned s = 7;
    for (int i = 0; i < N * DIM; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < N; i++)
        ids[i] = 5000 + i;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        vf_ann *a = NULL;
        vf_err err = {0};
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.faiss", argv[1], kinds[k][1]);
        FILE *f = NULL;
        if (vfi_ann_create(kinds[k][0], DIM, &a, &err) != VF_OK ||
            (vfi_ann_needs_training(a) && vfi_ann_train(a, N, x, &err) != VF_OK) ||
            vfi_ann_add(a, N, x, ids, &err) != VF_OK || !(f = fopen(path, "wb")) ||
            vfi_ann_write(a, f, &err) != VF_OK || fclose(f) != 0) {
            fprintf(stderr, "make_index_corpus: %s: %s\n", kinds[k][0], err.msg);
            return 1;
        }
        vfi_ann_free(&a);
    }
    free(x);
    free(ids);
    return 0;
}
