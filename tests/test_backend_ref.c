/*
 * test_backend_ref.c - the reference backend against PyTorch's outputs (goldens computed by
 * scripts/make_test_models.py), for every operator case, with and without the graph passes:
 * the oracle is not grading itself, and the passes (BatchNorm folding, activation fusion, pad
 * folding, transpose cancelling) must not change the function.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "op_cases.h"

#define TOL 1e-5

int main(void)
{
    for (int i = 0; op_case_names[i]; i++) {
        const char *name = op_case_names[i];
        op_golden gold;
        op_golden_load(name, &gold);
        for (int optimize = 0; optimize < 2; optimize++) {
            vf_graph *g = op_graph_load(name, optimize);
            CHECK_EQ(vfi_value_sample_numel(&g->values[g->output]) * gold.batch,
                     (long long)gold.y_count);
            float *y = op_run("ref", VF_PRECISION_F32, g, gold.batch, gold.x, gold.batch);
            double e = vf_rel_err(y, gold.y, gold.y_count);
            CHECK_MSG(e <= TOL, "%s (%s): relative error %.3g vs PyTorch", name,
                      optimize ? "optimized" : "as loaded", e);
            printf("%-18s %-9s %d nodes  rel err %.2e\n", name, optimize ? "optimized" : "loaded",
                   g->n_nodes, e);
            free(y);
            vfi_graph_free(&g);
        }
        op_golden_free(&gold);
    }
    return 0;
}
