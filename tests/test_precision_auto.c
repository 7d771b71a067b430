/*
 * test_precision_auto.c - --precision auto (VF_PRECISION_AUTO) through the public API: f32 on
 * the reference backend and where the CPU, under its cap, has no bf16 instructions; where it has
 * them, a model whose bf16 features lose the picture (tests/data/ops/bf16_cancel.onnx: bf16
 * between two convolutions that add 1000 and take it away) keeps f32 and says why, and the
 * choice is kept in the plan cache, where the next extractor finds it and follows it (an entry
 * changed by hand is obeyed: the cache is the record every worker agrees on).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "vidfeat.h"

static vf_extractor *open_auto(const char *model, const char *backend, vf_model_info *info)
{
    vf_config cfg = vf_config_default();
    cfg.model = model;
    cfg.backend = backend;
    cfg.batch_size = 2;
    cfg.precision = VF_PRECISION_AUTO;
    vf_extractor *ex = NULL;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    CHECK_OK(vf_extractor_info(ex, info), "info");
    CHECK_MSG(info->precision == VF_PRECISION_F32 || info->precision == VF_PRECISION_BF16,
              "auto gave %s", vf_precision_str(info->precision));
    CHECK(info->precision_why && *info->precision_why);
    printf("%s on %s: %s\n", strrchr(model, '/') + 1, info->backend, info->precision_why);
    return ex;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "no plan cache at %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* Every "winner" of an auto entry in the cache becomes `to`. */
static void rewrite_winners(const char *path, const char *to)
{
    char *text = slurp(path), out[1 << 16];
    size_t o = 0;
    for (char *p = text; *p && o < sizeof(out) - 16;) {
        char *w = strstr(p, "\"winner\": \"");
        if (!w) {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", p);
            break;
        }
        w += strlen("\"winner\": \"");
        char *e = strchr(w, '"');
        CHECK(e);
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%.*s%s", (int)(w - p), p, to);
        p = e;
    }
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(out, f) >= 0 && fclose(f) == 0);
}

/* The child: under VIDFEAT_ISA=avx2 auto runs f32 and says why. */
static int capped(void)
{
    vf_model_info info;
    vf_extractor *ex = open_auto(VF_MODELS_DIR "/tiny_cnn.onnx", "cpu", &info);
    CHECK(info.precision == VF_PRECISION_F32 && strstr(info.precision_why, "no bf16"));
    vf_extractor_free(&ex);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--capped"))
        return capped();
    char dir[] = "/tmp/vidfeat_auto_XXXXXX", path[256];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/plans.json", dir);
    setenv("VIDFEAT_PLAN_CACHE", path, 1);
    const char *tiny = VF_MODELS_DIR "/tiny_cnn.onnx";
    const char *cancel = VF_TEST_DATA_DIR "/ops/bf16_cancel.onnx";
    vf_model_info info;

    vf_extractor *ex = open_auto(tiny, "ref", &info); /* the reference backend runs f32 alone */
    CHECK(info.precision == VF_PRECISION_F32 && strstr(info.precision_why, "ref"));
    vf_extractor_free(&ex);

    /* a precision asked for is not explained */
    vf_config cfg = vf_config_default();
    cfg.model = tiny;
    cfg.batch_size = 2;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    CHECK_OK(vf_extractor_info(ex, &info), "info");
    CHECK(info.precision == VF_PRECISION_F32 && !info.precision_why);
    vf_extractor_free(&ex);
    vf_precision p;
    CHECK(vf_precision_parse("AUTO", &p) == VF_OK && p == VF_PRECISION_AUTO);
    CHECK(!strcmp(vf_precision_str(VF_PRECISION_AUTO), "auto"));

    /* capped to AVX2: no bf16 instructions, f32 without a measure. oneDNN takes its cap once
     * a process, before its first kernel: this program again, capped from the start. */
    fflush(stdout);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        setenv("VIDFEAT_ISA", "avx2", 1);
        execl(argv[0], argv[0], "--capped", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    if (!vf_has_feature("bf16"))
        SKIP("the measure: this CPU, under its ISA cap, has no AVX512-BF16 or AMX (f32 and the "
             "reference backend checked)");

    /* bf16 loses the cancelling model's picture: f32, measured and kept */
    ex = open_auto(cancel, "cpu", &info);
    CHECK_MSG(info.precision == VF_PRECISION_F32 && strstr(info.precision_why, "below 0.999"), "%s",
              info.precision_why);
    float x[2 * 3 * 8 * 8], y[2 * 192], want[2 * 192];
    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    CHECK_OK(vf_extractor_infer(ex, x, 2, y), vf_extractor_errmsg(ex));
    vf_extractor_free(&ex);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        want[i] = x[i]; /* the picture itself, flattened (f32 keeps it to 6e-5 at 1000) */
    CHECK_MSG(vf_rel_err(y, want, 2 * 192) <= 1e-4, "auto's f32 lost the picture: %g",
              vf_rel_err(y, want, 2 * 192));
    CHECK(strstr(slurp(path), "precision auto") && strstr(slurp(path), "below 0.999"));

    /* the tiny CNN: whichever was measured, the next extractor reads it back */
    ex = open_auto(tiny, "cpu", &info);
    vf_precision first = info.precision;
    vf_extractor_free(&ex);
    ex = open_auto(tiny, "cpu", &info);
    CHECK(info.precision == first && strstr(info.precision_why, "measured before"));
    vf_extractor_free(&ex);

    /* an entry changed by hand is followed */
    rewrite_winners(path, "bf16");
    ex = open_auto(tiny, "cpu", &info);
    CHECK_MSG(info.precision == VF_PRECISION_BF16, "the cache said bf16; got %s",
              vf_precision_str(info.precision));
    float img[2 * 3 * 32 * 32], feat[2 * 10];
    for (size_t i = 0; i < sizeof(img) / sizeof(img[0]); i++)
        img[i] = (float)((i * 13) % 29) / 14.0f - 1.0f;
    CHECK_OK(vf_extractor_infer(ex, img, 2, feat), vf_extractor_errmsg(ex));
    vf_extractor_free(&ex);
    rewrite_winners(path, "f32");
    ex = open_auto(tiny, "cpu", &info);
    CHECK(info.precision == VF_PRECISION_F32);
    vf_extractor_free(&ex);
    printf("ok auto's choice kept, read back and followed\n");

    unlink(path);
    char lock[300];
    snprintf(lock, sizeof(lock), "%s.lock", path);
    unlink(lock);
    rmdir(dir);
    return 0;
}
