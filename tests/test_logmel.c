/*
 * test_logmel.c - the audio front end (media/logmel.h) against references written in numpy from
 * each model's published algorithm (tests/python/logmel_refs.py: VGGish's mel_features, PANNs'
 * torchlibrosa, the latter also checked there against torchaudio), on sounds made with ffmpeg:
 * a sweep, white and pink noise, silence, a clipped tone and a sound shorter than a few frames.
 * Each value within 1e-4 of the reference (relative, or absolute below 1); as many frames as the
 * reference; the same floats whether the samples come at once or a few at a time. Then the
 * front ends a manifest may not state, each refused saying why.
 *
 * usage: test_logmel DIR   (DIR/cases.tsv from logmel_refs.py; exit 77 without it)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/manifest.h"
#include "media/logmel.h"

#define TOLERANCE 1e-4

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    void *buf = malloc((size_t)n + 1);
    CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* All frames of x through a front end for cfg, pushed chunk samples at a time (0: at once);
 * *frames of them. */
static float *run(const vf_logmel_cfg *cfg, const float *x, int64_t n, int64_t chunk,
                  int64_t *frames)
{
    vf_logmel *m = NULL;
    vf_err err;
    CHECK(vfi_logmel_new(cfg, &m, &err) == VF_OK);
    int64_t cap = vfi_logmel_count(cfg, n) + 1, got = 0;
    float *out = malloc(sizeof(float) * (size_t)(cap * cfg->n_mels));
    CHECK(out);
    if (chunk <= 0)
        chunk = n > 0 ? n : 1;
    for (int64_t at = 0; at < n; at += chunk) {
        CHECK(vfi_logmel_push(m, x + at, n - at < chunk ? n - at : chunk, &err) == VF_OK);
        while (got < cap && vfi_logmel_next(m, out + got * cfg->n_mels))
            got++;
    }
    vfi_logmel_end(m);
    while (got < cap && vfi_logmel_next(m, out + got * cfg->n_mels))
        got++;
    vfi_logmel_free(&m);
    *frames = got;
    return out;
}

static void against_references(const char *dir)
{
    char path[4096], line[4096 * 3 + 64];
    snprintf(path, sizeof(path), "%s/cases.tsv", dir);
    FILE *cases = fopen(path, "r");
    CHECK(cases);
    int n_cases = 0;
    double worst_all = 0;
    while (fgets(line, sizeof(line), cases)) {
        char manifest[4096], wav[4096], refpath[4096];
        long long samples, ref_frames;
        CHECK(sscanf(line, "%4095s %4095s %4095s %lld %lld", manifest, wav, refpath, &samples,
                     &ref_frames) == 5);
        vf_manifest *man = NULL;
        vf_err err;
        CHECK(vfi_manifest_load(manifest, &man, &err) == VF_OK && man->audio);
        const vf_logmel_cfg *cfg = &man->audio->front;
        size_t xlen, rlen;
        float *x = slurp(wav, &xlen);
        double *ref = slurp(refpath, &rlen);
        CHECK(xlen == (size_t)samples * sizeof(float));
        CHECK(rlen == (size_t)ref_frames * (size_t)cfg->n_mels * sizeof(double));
        CHECK(vfi_logmel_count(cfg, samples) == ref_frames);
        int64_t frames;
        float *all = run(cfg, x, samples, 0, &frames);
        CHECK(frames == ref_frames);
        double worst = 0;
        for (int64_t i = 0; i < frames * cfg->n_mels; i++) {
            double gap = fabs(all[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
            worst = fmax(worst, gap);
        }
        CHECK(worst <= TOLERANCE);
        /* a few samples at a time, and chunks not dividing the hop: the same floats */
        static const int64_t chunks[] = {1, 7, 160, 4097};
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            int64_t f2;
            float *part = run(cfg, x, samples, chunks[c], &f2);
            CHECK(f2 == frames && !memcmp(part, all, sizeof(float) * (size_t)(f2 * cfg->n_mels)));
            free(part);
        }
        const char *base = strrchr(refpath, '/');
        printf("%s: %lld samples at %d Hz, %lld frames, worst %.2e\n", base ? base + 1 : refpath,
               samples, cfg->sample_rate, (long long)frames, worst);
        worst_all = fmax(worst_all, worst);
        n_cases++;
        free(all);
        free(x);
        free(ref);
        vfi_manifest_free(&man);
    }
    fclose(cases);
    CHECK(n_cases > 0);
    printf("ok %d sounds: every value within %.0e of the reference (worst %.2e), as many frames, "
           "the same streamed in any chunks\n",
           n_cases, TOLERANCE, worst_all);
}

static void refused(void)
{
    const vf_logmel_cfg good = {.sample_rate = 16000,
                                .window = 400,
                                .hop = 160,
                                .n_fft = 512,
                                .power = 1,
                                .n_mels = 64,
                                .fmin = 125,
                                .fmax = 7500,
                                .scale = VF_MEL_HTK,
                                .triangles_in_mel = 1,
                                .log = VF_MEL_LN_OFFSET,
                                .log_offset = 0.01};
    CHECK(!*vfi_logmel_check(&good));
    static const struct {
        const char *what;
        int field;
        double value;
    } bad[] = {
        {"an odd FFT", 0, 511},
        {"a window past the FFT", 1, 600},
        {"no hop", 2, 0},
        {"power 3", 3, 3},
        {"no bands", 4, 0},
        {"fmax past Nyquist", 5, 9000},
        {"fmin above fmax", 6, 8000},
        {"a zero log offset", 7, 0},
        {"centred, window < FFT", 8, 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        vf_logmel_cfg c = good;
        switch (bad[i].field) {
        case 0:
            c.n_fft = (int)bad[i].value;
            break;
        case 1:
            c.window = (int)bad[i].value;
            break;
        case 2:
            c.hop = (int)bad[i].value;
            break;
        case 3:
            c.power = (int)bad[i].value;
            break;
        case 4:
            c.n_mels = (int)bad[i].value;
            break;
        case 5:
            c.fmax = bad[i].value;
            break;
        case 6:
            c.fmin = bad[i].value;
            break;
        case 7:
            c.log_offset = bad[i].value;
            break;
        default:
            c.center = 1;
            break;
        }
        const char *why = vfi_logmel_check(&c);
        vf_logmel *m = NULL;
        vf_err err;
        CHECK(*why && vfi_logmel_new(&c, &m, &err) == VF_ERR_INVALID && !m);
        printf("%s: %s\n", bad[i].what, err.msg);
    }
    /* too short for one frame: none, whole frames only (VGGish) or reflected (centred) */
    vf_logmel_cfg centred = good;
    centred.window = centred.n_fft = 512;
    centred.center = 1;
    CHECK(vfi_logmel_count(&good, 399) == 0 && vfi_logmel_count(&good, 400) == 1);
    CHECK(vfi_logmel_count(&centred, 256) == 0 && vfi_logmel_count(&centred, 257) == 2);
    printf("ok front ends outside what is computed are refused, saying why\n");
}

int main(int argc, char **argv)
{
    refused();
    char path[4096];
    FILE *f = NULL;
    if (argc > 1) {
        snprintf(path, sizeof(path), "%s/cases.tsv", argv[1]);
        f = fopen(path, "r");
    }
    if (!f) {
        printf("SKIP: no references (tests/python/logmel_refs.py makes them: numpy, ffmpeg)\n");
        return 77;
    }
    fclose(f);
    against_references(argv[1]);
    return 0;
}
