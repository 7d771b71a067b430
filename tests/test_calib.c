/*
 * test_calib.c - int8 calibration files: the file format (calib.c) round trip and its checks,
 * the model fingerprint, where the API reads and writes the file (beside the model, the cache
 * when that fails, an explicit path, none), when it calibrates again (another model file,
 * other preprocessing, a damaged file, recalibrate), and, on MobileNetV2 and a real clip
 * through the pipeline, that scales read from a file give exactly the int8 features the
 * calibrating run gave once it had quantized.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/calib.h"
#include "check.h"
#include "engine/graph.h"
#include "engine/onnx.h"
#include "core/digest.h"
#include "vidfeat.h"

#define TINY VF_MODELS_DIR "/tiny_cnn.onnx"

static char tmp_root[] = "/tmp/vidfeat-calib-XXXXXX";

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f);
    fputs(text, f);
    CHECK(fclose(f) == 0);
}

static char *read_text(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* ---- the file format ------------------------------------------------------------------- */

static void test_format(void)
{
    vf_err err;
    vf_graph *g = NULL;
    vf_onnx_opts oo = {0};
    CHECK_OK(vfi_onnx_load(TINY, &oo, &g, &err), err.msg);
    float *ranges = calloc((size_t)g->n_values, sizeof(float));
    int n_act = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (v == g->input || g->values[v].producer >= 0) {
            ranges[v] = 1.0f / 3.0f * (float)(v + 1); /* not exact in decimal */
            n_act++;
        }
    }
    const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
    char fp[65];
    CHECK_OK(vfi_sha256_file_sampled(TINY, fp, &err), err.msg);
    vf_calib *c = vfi_calib_create(fp, 32, mean, std);
    CHECK(c);
    /* a tensor of another layer's graph, with characters JSON must escape */
    c->names = malloc(sizeof(char *));
    c->ranges = malloc(sizeof(float));
    c->names[0] = strdup("other \"layer\"\\\t/x");
    c->ranges[0] = 7.5f;
    c->n_ranges = 1;
    CHECK_OK(vfi_calib_update(c, g, ranges, 12), "update");
    CHECK_EQ(c->n_ranges, 1 + n_act);
    char path[256];
    snprintf(path, sizeof(path), "%s/format.int8", tmp_root);
    CHECK_OK(vfi_calib_write(c, "tiny \"cnn\"", path, &err), err.msg);

    vf_calib *back = NULL;
    CHECK_OK(vfi_calib_read(path, &back, &err), err.msg);
    CHECK(vfi_calib_same_source(back, c));
    CHECK_EQ(back->images, 12);
    CHECK_EQ(back->n_ranges, c->n_ranges);
    CHECK(!strcmp(back->names[0], c->names[0]));
    float *got = NULL;
    CHECK_OK(vfi_calib_ranges(back, g, &got, &err), err.msg);
    for (int v = 0; v < g->n_values; v++)
        CHECK_MSG(got[v] == ranges[v], "value %d: %.9g vs %.9g", v, got[v], ranges[v]);
    free(got);

    /* updating keeps the other layer's range and replaces this graph's */
    ranges[g->output] = 99.0f;
    CHECK_OK(vfi_calib_update(back, g, ranges, 40), "update");
    CHECK_EQ(back->n_ranges, c->n_ranges);
    CHECK(back->ranges[0] == 7.5f);
    CHECK_OK(vfi_calib_ranges(back, g, &got, &err), err.msg);
    CHECK(got[g->output] == 99.0f);
    free(got);

    /* another source: model file, input size or normalisation */
    vf_calib *other = vfi_calib_create(fp, 32, mean, std);
    CHECK(vfi_calib_same_source(other, c));
    other->std[1] += 0.01f;
    CHECK(!vfi_calib_same_source(other, c));
    other->std[1] = std[1];
    other->input_size = 64;
    CHECK(!vfi_calib_same_source(other, c));
    other->input_size = 32;
    other->fingerprint[0] = other->fingerprint[0] == 'a' ? 'b' : 'a';
    CHECK(!vfi_calib_same_source(other, c));
    /* a file without this graph's tensors names the first one missing */
    CHECK_EQ(vfi_calib_ranges(other, g, &got, &err), VF_ERR_MODEL);
    CHECK(got == NULL);
    CHECK(strstr(err.msg, "no range for the tensor '"));
    vfi_calib_free(&other);

    /* damaged files */
    static const char *const bad[] = {
        "not json",
        "{\"vidfeat_manifest\": 1}",
        "{\"vidfeat_int8_calibration\": 2, \"ranges\": {}}",
        "{\"vidfeat_int8_calibration\": 1, \"model_fingerprint\": \"ab\", \"input_size\": 32,"
        " \"mean\": [0,0,0], \"std\": [1,1,1], \"images\": 1, \"ranges\": {}}",
        "{\"vidfeat_int8_calibration\": 1, \"model_fingerprint\": "
        "\"0000000000000000000000000000000000000000000000000000000000000000\", \"input_size\": 32,"
        " \"mean\": [0,0,0], \"std\": [1,1,1], \"images\": 1, \"ranges\": {\"x\": -1}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_text(path, bad[i]);
        vf_calib *x = NULL;
        CHECK_EQ(vfi_calib_read(path, &x, &err), VF_ERR_MODEL);
        CHECK(x == NULL);
        CHECK_MSG(strstr(err.msg, path), "%s", err.msg);
    }
    snprintf(path, sizeof(path), "%s/none.int8", tmp_root);
    vf_calib *x = NULL;
    CHECK_EQ(vfi_calib_read(path, &x, &err), VF_ERR_IO);
    /* a write that cannot happen leaves nothing behind */
    snprintf(path, sizeof(path), "%s/no/such/dir/x.int8", tmp_root);
    CHECK_EQ(vfi_calib_write(c, "tiny", path, &err), VF_ERR_IO);

    vfi_calib_free(&c);
    vfi_calib_free(&back);
    free(ranges);
    vfi_graph_free(&g);
    printf("calibration file: round trip exact, damaged files refused\n");
}

static void test_fingerprint(void)
{
    vf_err err;
    char a[65], b[65], path[256];
    snprintf(path, sizeof(path), "%s/fp.bin", tmp_root);
    /* small files: all of it counts */
    write_text(path, "0123456789");
    CHECK_OK(vfi_sha256_file_sampled(path, a, &err), err.msg);
    write_text(path, "0123456788");
    CHECK_OK(vfi_sha256_file_sampled(path, b, &err), err.msg);
    CHECK(strcmp(a, b));
    /* large files: a change inside a sampled block, or in the size */
    enum { SIZE = 8 << 20 };
    char *data = calloc(SIZE + 1, 1);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, SIZE, f) == SIZE && fclose(f) == 0);
    CHECK_OK(vfi_sha256_file_sampled(path, a, &err), err.msg);
    data[SIZE - 1] = 1; /* the last block is always sampled */
    f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, SIZE, f) == SIZE && fclose(f) == 0);
    CHECK_OK(vfi_sha256_file_sampled(path, b, &err), err.msg);
    CHECK(strcmp(a, b));
    f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, SIZE + 1, f) == SIZE + 1 && fclose(f) == 0);
    CHECK_OK(vfi_sha256_file_sampled(path, a, &err), err.msg);
    CHECK(strcmp(a, b));
    free(data);
    CHECK_EQ(vfi_sha256_file_sampled("/no/such/file", a, &err), VF_ERR_IO);
}

/* ---- where the API reads and writes it (the tiny model) --------------------------------- */

/* An int8 extractor on model, run on two images; returns its info's calibration file (a copy,
 * "" for none) and frame count. */
static void run_tiny(const char *model, const char *scales, int recalibrate, float std0, char *used,
                     size_t used_size, int64_t *frames_at_create, int64_t *frames)
{
    vf_config cfg = vf_config_default();
    cfg.model = model;
    cfg.backend = "cpu";
    cfg.precision = VF_PRECISION_INT8;
    cfg.batch_size = 2;
    cfg.calibration_frames = 2;
    cfg.int8_scales = scales;
    cfg.recalibrate = recalibrate;
    if (std0 > 0) {
        cfg.std[0] = std0;
        cfg.std[1] = cfg.std[2] = 1.0f;
    }
    vf_extractor *ex = NULL;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    vf_model_info info;
    vf_extractor_info(ex, &info);
    *frames_at_create = info.calibration_frames;
    float in[2 * 3 * 32 * 32], out[2 * 10];
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
        in[i] = (float)((i * 7919) % 255) / 255.0f;
    CHECK_OK(vf_extractor_infer(ex, in, 2, out), vf_extractor_errmsg(ex));
    vf_extractor_info(ex, &info);
    *frames = info.calibration_frames;
    snprintf(used, used_size, "%s", info.int8_scales ? info.int8_scales : "");
    vf_extractor_free(&ex);
}

static void test_locations(void)
{
    char dir[256], model[300], beside[320], cache[300], used[1024];
    int64_t at_create, frames;
    snprintf(dir, sizeof(dir), "%s/models", tmp_root);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(model, sizeof(model), "%s/m.onnx", dir);
    snprintf(beside, sizeof(beside), "%s.int8", model);
    vf_copy_file(TINY, model);

    /* none yet: calibrates, saves beside the model */
    run_tiny(model, NULL, 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 0);
    CHECK_EQ(frames, 2);
    CHECK_MSG(!strcmp(used, beside), "%s", used);
    CHECK(strstr(read_text(beside), "\"images\": 2"));
    /* then read from there */
    run_tiny(model, NULL, 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 2);
    CHECK(!strcmp(used, beside));
    /* other preprocessing: calibrates again and replaces it */
    run_tiny(model, NULL, 0, 2.0f, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 0);
    vf_calib *saved = NULL;
    vf_err rerr;
    CHECK(vfi_calib_read(beside, &saved, &rerr) >= 0);
    CHECK(saved && saved->std[0] == 2.0f && saved->std[1] == 1.0f && saved->std[2] == 1.0f);
    vfi_calib_free(&saved);
    /* another model file (the fingerprint differs): same */
    char *text = read_text(beside);
    char *fp = strstr(text, "\"model_fingerprint\": \"");
    CHECK(fp);
    fp += strlen("\"model_fingerprint\": \"");
    *fp = *fp == '0' ? '1' : '0';
    write_text(beside, text);
    run_tiny(model, NULL, 0, 2.0f, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 0);
    run_tiny(model, NULL, 0, 2.0f, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 2); /* rewritten right */
    /* damaged: a warning, calibrates, rewrites */
    write_text(beside, "{\"vidfeat_int8_calibration\": 1, \"ranges\": ");
    run_tiny(model, NULL, 0, 2.0f, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 0);
    run_tiny(model, NULL, 0, 2.0f, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 2);
    /* recalibrate ignores a good file */
    run_tiny(model, NULL, 1, 2.0f, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 0);
    CHECK_EQ(frames, 2);

    /* "" : no file, read or written */
    CHECK(unlink(beside) == 0);
    run_tiny(model, "", 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(frames, 2); /* calibrated all the same */
    CHECK(!strcmp(used, ""));
    CHECK(!exists(beside));

    /* an explicit file */
    char explicit_path[300];
    snprintf(explicit_path, sizeof(explicit_path), "%s/mine.int8", tmp_root);
    run_tiny(model, explicit_path, 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK(!strcmp(used, explicit_path));
    CHECK(exists(explicit_path) && !exists(beside));
    run_tiny(model, explicit_path, 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 2);

    /* beside the model cannot be written (a directory has its name; root ignores
     * permissions): the user's cache, found there next time */
    CHECK(mkdir(beside, 0755) == 0);
    snprintf(cache, sizeof(cache), "%s/cache", tmp_root);
    CHECK(setenv("XDG_CACHE_HOME", cache, 1) == 0);
    run_tiny(model, NULL, 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 0);
    char prefix[320];
    snprintf(prefix, sizeof(prefix), "%s/vidfeat/m.onnx-", cache);
    CHECK_MSG(!strncmp(used, prefix, strlen(prefix)), "%s", used);
    CHECK(exists(used));
    run_tiny(model, NULL, 0, 0, used, sizeof(used), &at_create, &frames);
    CHECK_EQ(at_create, 2);
    CHECK(!strncmp(used, prefix, strlen(prefix)));
    printf("calibration file: beside the model, cache, explicit, none; recalibrated when stale\n");
}

/* ---- MobileNetV2 through the pipeline: the file gives the calibrating run's int8 --------- */

#define CLIP_FRAMES 24
#define CALIB_BATCH 8

typedef struct collected {
    int dim;
    int n;
    float *vec; /* CLIP_FRAMES x dim, by frame order */
} collected;

static int on_batch(void *user, const vf_batch_view *b)
{
    collected *c = user;
    c->dim = b->dim;
    if (!c->vec)
        c->vec = calloc((size_t)CLIP_FRAMES * b->dim, sizeof(float));
    CHECK(c->vec && c->n + b->n <= CLIP_FRAMES);
    memcpy(c->vec + (size_t)c->n * b->dim, b->features, (size_t)b->n * b->dim * sizeof(float));
    c->n += b->n;
    return 0;
}

/* Extract the first CLIP_FRAMES frames of clip; *info: the pipeline's after the run, its
 * int8_scales copied to used (the strings go with the pipeline). */
static void run_clip(const char *model, const char *clip, vf_precision prec, const char *scales,
                     int64_t calib_frames, collected *out, vf_model_info *info, char used[1024])
{
    vf_config cfg = vf_config_default();
    cfg.model = model;
    cfg.backend = "cpu";
    cfg.precision = prec;
    cfg.batch_size = CALIB_BATCH;
    cfg.max_frames = CLIP_FRAMES;
    cfg.int8_scales = scales;
    cfg.calibration_frames = calib_frames;
    vf_pipeline *p = NULL;
    CHECK_OK(vf_pipeline_create(&cfg, &p), vf_pipeline_errmsg(p));
    memset(out, 0, sizeof(*out));
    vf_run_hooks hooks = {out, NULL, NULL, on_batch};
    const char *paths[1] = {clip};
    CHECK_OK(vf_pipeline_run(p, paths, 1, &hooks), vf_pipeline_errmsg(p));
    CHECK_EQ(out->n, CLIP_FRAMES);
    CHECK_OK(vf_pipeline_info(p, info), "info");
    snprintf(used, 1024, "%s", info->int8_scales ? info->int8_scales : "");
    vf_pipeline_free(&p);
}

static double min_cosine(const float *a, const float *b, int from, int to, int dim)
{
    double worst = 1.0;
    for (int i = from; i < to; i++) {
        double c = vf_cosine(a + (size_t)i * dim, b + (size_t)i * dim, dim);
        worst = c < worst ? c : worst;
    }
    return worst;
}

static int test_mobilenet(void)
{
    const char *model = VF_SHARED_DIR "/models/mobilenet_v2_1.0_224.onnx";
    const char *clip = VF_SHARED_DIR "/videos/h264_720p_bigbuckbunny.mp4";
    if (!exists(model) || !exists(clip)) {
        printf("SKIP MobileNetV2 part: %s or %s missing\n", model, clip);
        return 0;
    }
    char scales[300];
    snprintf(scales, sizeof(scales), "%s/mobilenet.int8", tmp_root);
    collected f32, cal, fromfile, late;
    vf_model_info info;
    char used[1024];
    run_clip(model, clip, VF_PRECISION_F32, NULL, 0, &f32, &info, used);

    /* calibrating on the first batch: that batch is f32, the rest int8; saved once quantized */
    run_clip(model, clip, VF_PRECISION_INT8, scales, CALIB_BATCH, &cal, &info, used);
    int dim = cal.dim;
    CHECK(!strcmp(used, scales));
    CHECK_EQ(info.calibration_frames, CALIB_BATCH);
    CHECK(vf_rel_err(cal.vec, f32.vec, CALIB_BATCH * dim) <= 1e-5);
    double cos_int8 = min_cosine(cal.vec, f32.vec, CALIB_BATCH, CLIP_FRAMES, dim);
    CHECK_MSG(cos_int8 >= 0.99 && cos_int8 < 0.99999, "cosine %.6f", cos_int8);

    /* from the file: int8 from the first frame, and exactly the calibrating run's int8 */
    run_clip(model, clip, VF_PRECISION_INT8, scales, 0, &fromfile, &info, used);
    CHECK_EQ(info.calibration_frames, CALIB_BATCH);
    CHECK(memcmp(fromfile.vec + (size_t)CALIB_BATCH * dim, cal.vec + (size_t)CALIB_BATCH * dim,
                 (size_t)(CLIP_FRAMES - CALIB_BATCH) * dim * sizeof(float)) == 0);
    CHECK(min_cosine(fromfile.vec, f32.vec, 0, CLIP_FRAMES, dim) >= 0.99);
    CHECK(vf_rel_err(fromfile.vec, f32.vec, CALIB_BATCH * dim) > 1e-4); /* not f32 */

    /* asking for more frames than the run has: f32 throughout, the ranges saved at its end */
    CHECK(unlink(scales) == 0);
    run_clip(model, clip, VF_PRECISION_INT8, scales, 1000, &late, &info, used);
    CHECK(vf_rel_err(late.vec, f32.vec, CLIP_FRAMES * dim) <= 1e-5);
    CHECK_EQ(info.calibration_frames, CLIP_FRAMES);
    CHECK(strstr(read_text(scales), "\"images\": 24"));
    printf("MobileNetV2 int8: first batch f32 exact, then cosine >= %.4f; scales from the file "
           "give the same vectors bit for bit\n",
           cos_int8);
    free(f32.vec);
    free(cal.vec);
    free(fromfile.vec);
    free(late.vec);
    return 1;
}

int main(void)
{
    CHECK(mkdtemp(tmp_root));
    test_format();
    test_fingerprint();
    test_locations();
    int ran = test_mobilenet();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_root);
    CHECK(system(cmd) == 0);
    return ran ? 0 : 77;
}
