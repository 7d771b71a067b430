/*
 * op_cases.c - see op_cases.h.
 */
#include "op_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/onnx.h"
#include "engine/passes.h"

const char *const op_case_names[] = {
    "activations",
    "binary",
    "bn_standalone",
    "concat_softmax",
    "conv_bn_relu",
    "conv_grouped",
    "conv_relu",
    "depthwise_relu6",
    "external_data",
    "fixed_batch",
    "gemm_matmul",
    "global_pools",
    "lrn",
    "nhwc_transpose",
    "pads",
    "pools",
    "pools3d",
    "conv3d",
    "conv3d_bn",
    "conv3d_bn_relu",
    "same_upper",
    "shape_reshape",
    "squeeze_unsqueeze",
    "transform_input",
    "vit_tiny",
    "swin_tiny",
    "convnext_tiny",
    "transformer_ops",
    "vit_patch14",
    "matmul_per_index",
    "conv_wino",
    "prelu",
    "text_tiny",
    NULL,
};

static float *read_block(FILE *f, int *rank, long *dims, size_t *count)
{
    char line[256];
    CHECK(fgets(line, sizeof(line), f));
    CHECK(strncmp(line, "shape", 5) == 0);
    *rank = 0;
    *count = 1;
    char *p = line + 5, *end;
    for (long d; (d = strtol(p, &end, 10)), end != p; p = end) {
        CHECK(*rank < 6);
        dims[(*rank)++] = d;
        *count *= (size_t)d;
    }
    float *v = malloc(*count * sizeof(float));
    CHECK(v);
    for (size_t i = 0; i < *count; i++)
        CHECK(fscanf(f, "%f", &v[i]) == 1);
    int c = fgetc(f); /* the newline after the last value */
    (void)c;
    return v;
}

void op_golden_load(const char *name, op_golden *g)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/ops/%s.txt", VF_GOLDEN_DIR, name);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "cannot open %s", path);
    memset(g, 0, sizeof(*g));
    g->x = read_block(f, &g->x_rank, g->x_dims, &g->x_count);
    g->y = read_block(f, &g->y_rank, g->y_dims, &g->y_count);
    g->batch = (int)g->x_dims[0];
    fclose(f);
}

void op_golden_free(op_golden *g)
{
    free(g->x);
    free(g->y);
}

vf_graph *op_graph_load(const char *name, int optimize)
{
    char path[1024];
    vf_err err = {0};
    vf_graph *g = NULL;
    int pooled;
    snprintf(path, sizeof(path), "%s/ops/%s.onnx", VF_TEST_DATA_DIR, name);
    CHECK_OK(vfi_onnx_load(path, NULL, &g, &err), err.msg);
    CHECK_OK(vfi_pass_set_output(g, g->output, 0, &pooled, &err), err.msg);
    if (optimize)
        CHECK_OK(vfi_pass_optimize(g, &err), err.msg);
    return g;
}

int op_backend_runs(const char *backend, const vf_graph *g, const char *name)
{
    vf_err err = {0};
    vf_backend *b = NULL;
    vf_backend_opts opts = {.precision = VF_PRECISION_F32};
    CHECK_OK(vfi_backend_open(backend, &opts, &b, &err), err.msg);
    vf_status rc = vfi_backend_check_ops(b, g);
    if (rc < 0)
        printf("%-18s not on %s: %s\n", name, backend, b->err.msg);
    vfi_backend_free(&b);
    return rc >= 0;
}

float *op_run(const char *backend, vf_precision prec, vf_graph *g, int max_batch, const float *x,
              int n)
{
    return op_run_described(backend, prec, g, max_batch, x, n, NULL, 0);
}

float *op_run_described(const char *backend, vf_precision prec, vf_graph *g, int max_batch,
                        const float *x, int n, char *plan, size_t plan_size)
{
    vf_err err = {0};
    vf_backend *b = NULL;
    vf_backend_opts opts = {.precision = prec};
    CHECK_OK(vfi_backend_open(backend, &opts, &b, &err), err.msg);
    CHECK_OK(b->ops->prepare(b, g, max_batch), b->err.msg);
    size_t in_per = (size_t)vfi_value_sample_numel(&g->values[g->input]);
    size_t out_per = (size_t)vfi_value_sample_numel(&g->values[g->output]);
    float *y = calloc((size_t)n * out_per, sizeof(float));
    CHECK(y);
    /* a text tower's input is token ids: the golden holds them as floats */
    int64_t *ids = NULL;
    if (g->values[g->input].dtype == VF_DTYPE_I64) {
        CHECK((ids = malloc((size_t)n * in_per * sizeof(int64_t))));
        for (size_t i = 0; i < (size_t)n * in_per; i++)
            ids[i] = (int64_t)x[i];
    }
    for (int done = 0; done < n; done += max_batch) {
        int count = n - done < max_batch ? n - done : max_batch;
        const void *in = ids ? (const void *)(ids + done * in_per) : x + done * in_per;
        CHECK_OK(b->ops->run(b, in, y + done * out_per, count), b->err.msg);
    }
    free(ids);
    if (plan) {
        const char *d = b->ops->describe ? b->ops->describe(b) : NULL;
        snprintf(plan, plan_size, "%s", d ? d : "");
    }
    vfi_backend_free(&b);
    return y;
}
