/*
 * test_onnx.c - the ONNX loader and the passes: every malformed or unsupported model in
 * tests/data/bad fails with the status and message listed in EXPECTED.tsv (never a crash), and
 * the passes produce the graphs they promise (BatchNorm folded, activations fused, inverse
 * transposes cancelled, zero padding folded, nothing after the feature layer kept).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "engine/onnx.h"
#include "engine/passes.h"

static vf_status status_by_name(const char *name)
{
    static const struct {
        const char *name;
        vf_status code;
    } table[] = {{"VF_ERR_MODEL", VF_ERR_MODEL},
                 {"VF_ERR_UNSUPPORTED", VF_ERR_UNSUPPORTED},
                 {"VF_ERR_IO", VF_ERR_IO},
                 {"VF_ERR_INVALID", VF_ERR_INVALID}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (!strcmp(name, table[i].name))
            return table[i].code;
    }
    CHECK_MSG(0, "unknown status %s", name);
    return VF_OK;
}

static void bad_models(void)
{
    char path[1024], line[1024];
    snprintf(path, sizeof(path), "%s/bad/EXPECTED.tsv", VF_TEST_DATA_DIR);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "cannot open %s", path);
    int n = 0;
    char listed[64][256];
    while (fgets(line, sizeof(line), f)) {
        char file[256], code[64], frag[512];
        if (line[0] == '#')
            continue;
        CHECK(n < 64);
        CHECK(sscanf(line, "%255[^\t]\t%63[^\t]\t%511[^\n]", file, code, frag) == 3);
        snprintf(path, sizeof(path), "%s/bad/%s", VF_TEST_DATA_DIR, file);
        vf_graph *g = NULL;
        vf_err err = {0};
        vf_status rc = vfi_onnx_load(path, NULL, &g, &err);
        CHECK_MSG(rc == status_by_name(code), "%s: got %s (%s), want %s", file, vf_status_str(rc),
                  err.msg, code);
        CHECK_MSG(strstr(err.msg, frag), "%s: message '%s' lacks '%s'", file, err.msg, frag);
        CHECK_MSG(strstr(err.msg, file), "%s: message '%s' does not name the file", file, err.msg);
        CHECK(g == NULL);
        printf("%-24s %s: %s\n", file, vf_status_str(rc), err.msg);
        snprintf(listed[n++], sizeof(listed[0]), "%s", file);
    }
    fclose(f);
    CHECK(n >= 15);
    /* every file in the directory has its row: a malformed model added without one would
     * otherwise never be loaded */
    snprintf(path, sizeof(path), "%s/bad", VF_TEST_DATA_DIR);
    DIR *d = opendir(path);
    CHECK_MSG(d, "cannot list %s", path);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "EXPECTED.tsv"))
            continue;
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = !strcmp(listed[i], e->d_name);
        CHECK_MSG(found, "bad/%s has no row in EXPECTED.tsv", e->d_name);
        files++;
    }
    closedir(d);
    CHECK_EQ(files, n);
}

static int count_op(const vf_graph *g, vf_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static vf_graph *load(const char *name)
{
    char path[1024];
    vf_err err = {0};
    vf_graph *g = NULL;
    snprintf(path, sizeof(path), "%s/ops/%s.onnx", VF_TEST_DATA_DIR, name);
    CHECK_OK(vfi_onnx_load(path, NULL, &g, &err), err.msg);
    return g;
}

static void optimize(vf_graph *g, int out)
{
    vf_err err = {0};
    int pooled;
    CHECK_OK(vfi_pass_set_output(g, out, 0, &pooled, &err), err.msg);
    CHECK_OK(vfi_pass_optimize(g, &err), err.msg);
}

static void passes(void)
{
    /* Conv -> BatchNormalization -> Relu: one conv with the relu fused. */
    vf_graph *g = load("conv_bn_relu");
    CHECK_EQ(count_op(g, VF_OP_CONV), 2); /* the BN arrives as a depthwise 1x1 conv */
    optimize(g, g->output);
    CHECK_EQ(count_op(g, VF_OP_CONV), 1);
    CHECK_EQ(count_op(g, VF_OP_ACT), 0);
    CHECK_EQ(g->nodes[0].p.conv.act.kind, VF_ACT_RELU);
    vfi_graph_free(&g);

    /* NHWC input: the engine's NCHW input, the model's transpose and ours cancel out. */
    g = load("nhwc_transpose");
    CHECK_EQ(g->values[g->input].dims[1], 3);
    CHECK_EQ(g->values[g->input].dims[2], 8);
    optimize(g, g->output);
    CHECK_EQ(count_op(g, VF_OP_TRANSPOSE), 0);
    vfi_graph_free(&g);

    /* Zero padding before a conv is folded into it; a 0.5 pad stays. */
    g = load("pads");
    CHECK_EQ(count_op(g, VF_OP_PAD), 2);
    optimize(g, g->output);
    CHECK_EQ(count_op(g, VF_OP_PAD), 1);
    vfi_graph_free(&g);

    /* Cutting at an inner tensor removes everything after it. */
    g = load("depthwise_relu6");
    int n_before = g->n_nodes;
    int inner = g->nodes[0].output; /* the depthwise conv */
    optimize(g, inner);
    CHECK(g->n_nodes < n_before);
    CHECK_EQ(count_op(g, VF_OP_CONV), 1);
    vfi_graph_free(&g);

    /* A fixed-batch-1 export with Reshape(1, -1) still has a batch dimension. */
    g = load("fixed_batch");
    CHECK(g->values[g->output].is_batched);
    CHECK_EQ(g->values[g->output].rank, 2);
    vfi_graph_free(&g);

    /* The shape subgraph of x.view(x.size(0), -1) folds to one reshape. */
    g = load("shape_reshape");
    CHECK_EQ(g->n_nodes, 2);
    CHECK_EQ(count_op(g, VF_OP_RESHAPE), 1);
    vfi_graph_free(&g);
}

/* A file exported with a fixed input plane runs at another size with its shapes inferred again,
 * or fails naming the node that only fits the exported size. */
static void other_input_size(void)
{
    char path[1024];
    vf_err err = {0};
    vf_graph *g = NULL;
    vf_onnx_opts opts = {.input_size = 64};
    snprintf(path, sizeof(path), "%s/tiny_cnn.onnx", VF_MODELS_DIR); /* fixed at 32 */
    CHECK_OK(vfi_onnx_load(path, &opts, &g, &err), err.msg);
    CHECK_EQ(g->values[g->input].dims[2], 64);
    CHECK_EQ(g->values[g->input].dims[3], 64);
    CHECK_EQ(vfi_value_sample_numel(&g->values[g->output]), 10);
    for (int i = 0; i < g->n_nodes; i++) {
        const vf_value *v = &g->values[g->nodes[i].output];
        if (g->nodes[i].op == VF_OP_CONV && v->dims[1] == 8)
            CHECK_EQ(v->dims[2], 32); /* the stride-2 conv: 64 -> 32, not 16 */
    }
    vfi_graph_free(&g);

    /* The NHWC input's plane is its second and third dimension. */
    snprintf(path, sizeof(path), "%s/ops/nhwc_transpose.onnx", VF_TEST_DATA_DIR);
    opts.input_size = 12;
    CHECK_OK(vfi_onnx_load(path, &opts, &g, &err), err.msg);
    CHECK_EQ(g->values[g->input].dims[2], 12);
    vfi_graph_free(&g);

    /* A flatten of the 5x5 plane into a Gemm of 100 inputs: 7x7 gives 196. */
    snprintf(path, sizeof(path), "%s/ops/gemm_matmul.onnx", VF_TEST_DATA_DIR);
    opts.input_size = 7;
    vf_status rc = vfi_onnx_load(path, &opts, &g, &err);
    CHECK(rc < 0 && !g);
    CHECK(strstr(err.msg, "node '"));
    CHECK(strstr(err.msg, "Gemm"));
    CHECK(strstr(err.msg, "fixed 5x5 input and cannot run at 7x7"));
    printf("gemm_matmul at 7x7: %s\n", err.msg);
}

/* "pool" and "logits" by the graph's structure, whatever the tensors are called. */
static void layers_by_structure(void)
{
    char path[1024];
    vf_err err = {0};
    vf_graph *g = NULL;
    snprintf(path, sizeof(path), "%s/tiny_cnn.onnx", VF_MODELS_DIR);
    CHECK_OK(vfi_onnx_load(path, NULL, &g, &err), err.msg);
    CHECK_EQ(vfi_graph_layer_by_structure(g, "logits"), g->output);
    int pool = vfi_graph_layer_by_structure(g, "pool");
    CHECK(pool >= 0);
    CHECK_EQ(g->values[pool].rank, 4);
    CHECK_EQ(g->values[pool].dims[1], 16);
    CHECK_EQ(g->values[pool].dims[2], 1);
    CHECK_EQ(vfi_graph_layer_by_structure(g, "features"), -1);
    vfi_graph_free(&g);

    /* Gemm, Relu, MatMul: the MatMul is the last; no average pool feeds it. */
    g = load("gemm_matmul");
    CHECK_EQ(vfi_graph_layer_by_structure(g, "logits"), g->output);
    CHECK_EQ(vfi_graph_layer_by_structure(g, "pool"), -1);
    vfi_graph_free(&g);

    /* No fully connected node at all. */
    g = load("global_pools");
    CHECK_EQ(vfi_graph_layer_by_structure(g, "logits"), -1);
    CHECK_EQ(vfi_graph_layer_by_structure(g, "pool"), -1);
    vfi_graph_free(&g);
}

static void memory_input(void)
{
    /* Truncating a valid model at every 7th byte never crashes and always fails cleanly. */
    char path[1024];
    snprintf(path, sizeof(path), "%s/tiny_cnn.onnx", VF_MODELS_DIR);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    static unsigned char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    CHECK(n > 1000 && n < sizeof(buf));
    int failures = 0;
    for (size_t len = 0; len < n; len += 7) {
        vf_graph *g = NULL;
        vf_err err = {0};
        vf_status rc = vfi_onnx_load_mem(buf, len, NULL, NULL, &g, &err);
        CHECK(rc < 0 ? g == NULL : g != NULL);
        failures += rc < 0;
        vfi_graph_free(&g);
    }
    CHECK(failures > 0);
    vf_graph *g = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_onnx_load_mem(buf, n, NULL, NULL, &g, &err), err.msg);
    vfi_graph_free(&g);
    printf("truncations of tiny_cnn.onnx: %d of %zu rejected cleanly\n", failures, n / 7 + 1);
}

/* Copy file src to dst (the test's own files). */
static void copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        CHECK(fwrite(buf, 1, n, out) == n);
    CHECK(fclose(in) == 0 && fclose(out) == 0);
}

/* External data planted by someone who can write the model's directory: the weights file
 * replaced by a link to a file outside (long enough to be read as weights), a FIFO (reading
 * would block for ever), a link to /dev/zero, a link into a directory outside, a short file.
 * Each is one VF_ERR_MODEL naming why; the file itself loads. */
static void hostile_external_data(void)
{
    char dir[] = "/tmp/vidfeat_extdata_XXXXXX", model[4200], weights[4200], src[4200];
    CHECK(mkdtemp(dir));
    snprintf(src, sizeof(src), "%s/ops/external_data.onnx", VF_TEST_DATA_DIR);
    snprintf(model, sizeof(model), "%s/external_data.onnx", dir);
    copy_file(src, model);
    snprintf(src, sizeof(src), "%s/ops/external_data.weights", VF_TEST_DATA_DIR);
    snprintf(weights, sizeof(weights), "%s/external_data.weights", dir);
    char outside[4200];
    snprintf(outside, sizeof(outside), "%s.outside", dir);
    copy_file(src, outside);
    vf_graph *g = NULL;
    vf_err err;
    struct {
        const char *what, *want;
    } cases[] = {{"link outside", "a symbolic link"},
                 {"fifo", "not a regular file"},
                 {"/dev/zero", "a symbolic link"},
                 {"short", "shorter than"},
                 {"copy", NULL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unlink(weights);
        if (!strcmp(cases[i].what, "link outside"))
            CHECK(symlink(outside, weights) == 0);
        else if (!strcmp(cases[i].what, "fifo"))
            CHECK(mkfifo(weights, 0600) == 0);
        else if (!strcmp(cases[i].what, "/dev/zero"))
            CHECK(symlink("/dev/zero", weights) == 0);
        else if (!strcmp(cases[i].what, "short")) {
            FILE *f = fopen(weights, "wb");
            CHECK(f && fputs("tiny", f) >= 0 && fclose(f) == 0);
        } else
            copy_file(src, weights);
        vf_status rc = vfi_onnx_load(model, NULL, &g, &err);
        if (!cases[i].want) {
            CHECK_OK(rc, err.msg);
            vfi_graph_free(&g);
            continue;
        }
        if (rc != VF_ERR_MODEL || !strstr(err.msg, cases[i].want)) {
            fprintf(stderr, "%s: status %d, message '%s', want '%s'\n", cases[i].what, rc, err.msg,
                    cases[i].want);
            exit(1);
        }
    }
    unlink(weights);
    unlink(outside);
    CHECK(unlink(model) == 0 && rmdir(dir) == 0);
}

int main(void)
{
    hostile_external_data();
    bad_models();
    passes();
    other_input_size();
    layers_by_structure();
    memory_input();
    return 0;
}
