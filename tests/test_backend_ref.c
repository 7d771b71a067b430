/*
 * test_backend_ref.c - the reference backend against PyTorch's outputs (goldens computed by
 * scripts/make_test_models.py), for every operator case, with and without the graph passes:
 * the oracle is not grading itself, and the passes (BatchNorm folding, activation fusion, pad
 * folding, transpose cancelling) must not change the function.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_cases.h"

#define TOL 1e-5

/* A backend that lacks an operator refuses a graph using it when the graph is planned, naming
 * the node and the operator, before building anything: the reference backend's table with a
 * supports() that refuses Pool3D. */
static vf_status no_pool3d(vf_backend *b, const vf_graph *g, const vf_node *nd, vf_err *err)
{
    (void)b, (void)g, (void)err;
    return nd->op == VF_OP_POOL3D ? VF_ERR_UNSUPPORTED : VF_OK;
}

static void refused_when_planned(void)
{
    vf_backend_ops ops = vfi_backend_ref;
    ops.supports = no_pool3d;
    vf_backend b = {.ops = &ops};
    vf_graph *g = op_graph_load("pools3d", 1);
    CHECK_EQ(vfi_backend_check_ops(&b, g), VF_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(b.err.msg, "Pool3D is not in the ref backend") && strstr(b.err.msg, "node '"),
              "%s", b.err.msg);
    printf("refused when planned: %s\n", b.err.msg);
    CHECK_EQ(vfi_backend_check_ops(&(vf_backend){.ops = &vfi_backend_ref}, g), VF_OK);
    vfi_graph_free(&g);
}

int main(void)
{
    refused_when_planned();
    int seen[VF_OP_COUNT_] = {0}; /* every operator of op_list.h is in some case's graph */
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
            for (int k = 0; k < g->n_nodes; k++)
                seen[g->nodes[k].op] = 1;
            free(y);
            vfi_graph_free(&g);
        }
        op_golden_free(&gold);
    }
    /* so that each backend's test, which runs every case, fails on an operator its table lacks */
    for (int op = 0; op < VF_OP_COUNT_; op++)
        CHECK_MSG(seen[op], "no operator case holds %s: add one (tests/op_cases.c)",
                  vfi_op_name((vf_op)op));
    printf("every one of the %d operators is in a case\n", (int)VF_OP_COUNT_);
    return 0;
}
