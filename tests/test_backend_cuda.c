/*
 * test_backend_cuda.c - the CUDA backend against the reference backend on every operator case,
 * and against the oneDNN backend on the real MobileNetV2 (argv[1], when present): f32 within
 * 1e-4 relative at batch 1, at the full batch and at a short batch (descriptors re-set for n);
 * tf32 and f16 with cosine >= 0.999 per image, in each layout the tensor-core precisions can
 * take: NHWC where the channels suit (the default), NHWC everywhere and NCHW everywhere
 * (VIDFEAT_CUDA_NHWC=all and =0), so the layout copies between them are covered too.
 *
 * Without a usable GPU it checks that the backend says so (VF_ERR_NO_DEVICE with the runtime's
 * reason, also through "gpu" and the public API) and exits 77, which ctest reports as skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_cases.h"
#include "vidfeat.h"

#define F32_TOL     1e-4
#define LOW_MIN_COS 0.999

/* The runs at a lower precision, each with its VIDFEAT_CUDA_NHWC (NULL: unset). */
static const struct {
    const char *name;
    vf_precision prec;
    const char *nhwc;
} low_runs[] = {
    {"tf32", VF_PRECISION_TF32, NULL},       {"f16", VF_PRECISION_F16, NULL},
    {"tf32 NHWC", VF_PRECISION_TF32, "all"}, {"f16 NHWC", VF_PRECISION_F16, "all"},
    {"f16 NCHW", VF_PRECISION_F16, "0"},
};
#define N_LOW (int)(sizeof(low_runs) / sizeof(*low_runs))

static void set_layout(int run)
{
    if (low_runs[run].nhwc)
        CHECK(setenv("VIDFEAT_CUDA_NHWC", low_runs[run].nhwc, 1) == 0);
    else
        CHECK(unsetenv("VIDFEAT_CUDA_NHWC") == 0);
}

static double min_cosine(const float *a, const float *r, int n, size_t per)
{
    double m = 1.0;
    for (int k = 0; k < n; k++) {
        double c = vf_cosine(a + k * per, r + k * per, per);
        m = c < m ? c : m;
    }
    return m;
}

static void skip_without_gpu(void)
{
    vf_err err = {0};
    vf_backend *b = NULL;
    vf_backend_opts opts = {.precision = VF_PRECISION_F32};
    vf_status rc = vfi_backend_open("cuda", &opts, &b, &err);
    if (rc >= 0) {
        vfi_backend_free(&b);
        return;
    }
    CHECK_EQ(rc, VF_ERR_NO_DEVICE);
    CHECK(err.msg[0] != '\0');
    /* the same answer by the other name, and through the public API */
    CHECK_EQ(vfi_backend_open("gpu", &opts, &b, &err), VF_ERR_NO_DEVICE);
    CHECK(b == NULL);
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = "cuda";
    vf_extractor *ex = NULL;
    CHECK_EQ(vf_extractor_create(&cfg, &ex), VF_ERR_NO_DEVICE);
    printf("no GPU: %s\n", vf_extractor_errmsg(ex));
    vf_extractor_free(&ex);
    exit(77);
}

static void op_cases(void)
{
    for (int i = 0; op_case_names[i]; i++) {
        const char *name = op_case_names[i];
        op_golden gold;
        op_golden_load(name, &gold);
        vf_graph *g = op_graph_load(name, 1);
        if (!op_backend_runs("cuda", g, name)) { /* refused when planned, naming the node */
            vfi_graph_free(&g);
            op_golden_free(&gold);
            continue;
        }
        int n = gold.batch;
        size_t per = gold.y_count / (size_t)n;
        float *ref = op_run("ref", VF_PRECISION_F32, g, n, gold.x, n);
        float *b1 = op_run("cuda", VF_PRECISION_F32, g, 1, gold.x, n);
        float *bn = op_run("cuda", VF_PRECISION_F32, g, n, gold.x, n);
        float *part = op_run("cuda", VF_PRECISION_F32, g, n + 3, gold.x, n);
        double e1 = vf_rel_err(b1, ref, gold.y_count), en = vf_rel_err(bn, ref, gold.y_count);
        double ep = vf_rel_err(part, ref, gold.y_count);
        printf("%-18s f32 rel err %.2e / %.2e / %.2e; cosine", name, e1, en, ep);
        CHECK_MSG(e1 <= F32_TOL, "%s: batch 1 relative error %.3g", name, e1);
        CHECK_MSG(en <= F32_TOL, "%s: batch %d relative error %.3g", name, n, en);
        CHECK_MSG(ep <= F32_TOL, "%s: short batch relative error %.3g", name, ep);
        for (int r = 0; r < N_LOW; r++) {
            set_layout(r);
            float *low = op_run("cuda", low_runs[r].prec, g, n, gold.x, n);
            double cos = min_cosine(low, ref, n, per);
            printf(" %s %.6f", low_runs[r].name, cos);
            CHECK_MSG(cos >= LOW_MIN_COS, "%s: %s cosine %.5f", name, low_runs[r].name, cos);
            free(low);
        }
        CHECK(unsetenv("VIDFEAT_CUDA_NHWC") == 0);
        printf("\n");
        free(ref);
        free(b1);
        free(bn);
        free(part);
        vfi_graph_free(&g);
        op_golden_free(&gold);
    }
}

static float *extract(const char *model, const char *backend, vf_precision prec, int batch,
                      const float *x, int n, int dim)
{
    vf_config cfg = vf_config_default();
    cfg.model = model;
    cfg.backend = backend;
    cfg.precision = prec;
    cfg.batch_size = batch;
    vf_extractor *ex = NULL;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    float *y = malloc((size_t)n * (size_t)dim * sizeof(float));
    CHECK(y);
    CHECK_OK(vf_extractor_infer(ex, x, n, y), vf_extractor_errmsg(ex));
    vf_extractor_free(&ex);
    return y;
}

/* The real MobileNetV2 (depthwise convolutions, ReLU6, residual adds, global pooling) on the
 * GPU against the CPU backend, which the conformance test holds to ONNX Runtime. */
static void whole_network(const char *model)
{
    vf_config cfg = vf_config_default();
    cfg.model = model;
    cfg.backend = "ref";
    vf_extractor *ex = NULL;
    if (vf_extractor_create(&cfg, &ex) < 0) {
        printf("whole network: %s not usable here, skipped (%s)\n", model, vf_extractor_errmsg(ex));
        vf_extractor_free(&ex);
        return;
    }
    vf_model_info info;
    CHECK_OK(vf_extractor_info(ex, &info), vf_extractor_errmsg(ex));
    vf_extractor_free(&ex);
    const int n = 6;
    size_t in_per = (size_t)3 * (size_t)info.input_size * (size_t)info.input_size;
    float *x = malloc((size_t)n * in_per * sizeof(float));
    CHECK(x);
    unsigned s = 12345u;
    for (size_t i = 0; i < (size_t)n * in_per; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 9) & 0xffff) / 65536.0f * 4.0f - 2.0f; /* normalised-pixel range */
    }
    int dim = info.feature_dim;
    float *cpu = extract(model, "cpu", VF_PRECISION_F32, 4, x, n, dim);
    float *f32 = extract(model, "cuda", VF_PRECISION_F32, 4, x, n, dim); /* 4 + short 2 */
    double e = vf_rel_err(f32, cpu, (size_t)n * (size_t)dim);
    printf("%s: f32 rel err %.2e vs the CPU; cosine", info.name, e);
    CHECK_MSG(e <= F32_TOL, "whole network f32 relative error %.3g", e);
    for (int r = 0; r < N_LOW; r++) {
        set_layout(r);
        float *low = extract(model, "cuda", low_runs[r].prec, 8, x, n, dim);
        double cos = min_cosine(low, cpu, n, (size_t)dim);
        printf(" %s %.6f", low_runs[r].name, cos);
        CHECK_MSG(cos >= LOW_MIN_COS, "whole network %s cosine %.5f", low_runs[r].name, cos);
        free(low);
    }
    CHECK(unsetenv("VIDFEAT_CUDA_NHWC") == 0);
    printf("\n");
    free(x);
    free(cpu);
    free(f32);
}

int main(int argc, char **argv)
{
    skip_without_gpu();
    op_cases();
    if (argc > 1)
        whole_network(argv[1]);
    return 0;
}
