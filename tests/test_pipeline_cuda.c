/*
 * test_pipeline_cuda.c - the pipeline on the GPU: frames converted on the device (planes staged
 * through pinned memory, or NVDEC's frames read where they are) into batch inputs in device
 * memory, run from there, several files at once. Every file's frame numbers, timestamps and
 * outcome equal the reference pipeline's (reference conversion, reference network) and its
 * vectors are within 1e-4 relative, with CPU decoding and with NVDEC (where this FFmpeg and GPU
 * have it). Exits 77 (skipped) without a usable CUDA GPU.
 * Usage: test_pipeline_cuda [VIDEOS_DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rows_capture.h"
#include "vidfeat.h"

#define TOL 1e-4

static vf_config config(const char *backend, int decoders, const char *hwdec)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.backend = backend;
    cfg.batch_size = 4;
    cfg.max_frames = 24;
    cfg.convert_threads = 3;
    cfg.decoders = decoders;
    cfg.hwdec = hwdec;
    return cfg;
}

/* Can this configuration open here? 0 when its device is missing (said why), fails otherwise. */
static int opens(const vf_config *cfg)
{
    vf_pipeline *p = NULL;
    vf_status rc = vf_pipeline_create(cfg, &p);
    if (rc == VF_ERR_NO_DEVICE || rc == VF_ERR_NOT_BUILT) {
        printf("%s%s%s: not here (%s)\n", cfg->backend, cfg->hwdec ? " + hwdec " : "",
               cfg->hwdec ? cfg->hwdec : "", vf_pipeline_errmsg(p));
        vf_pipeline_free(&p);
        return 0;
    }
    CHECK_OK(rc, vf_pipeline_errmsg(p));
    vf_pipeline_free(&p);
    return 1;
}

/* Each file of got against the reference run; returns the worst relative error. */
static double compare(const capture *want, const capture *got, const char *const *paths, int n)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        const file_rows *a = &want->f[i], *b = &got->f[i];
        CHECK_MSG(b->reported, "%s: no outcome", paths[i]);
        CHECK_MSG(b->status == a->status, "%s: status %d, reference %d", paths[i], b->status,
                  a->status);
        CHECK_EQ(b->frames, a->frames);
        CHECK_EQ(b->n, a->n);
        for (int k = 0; k < a->n; k++) {
            CHECK_EQ(b->index[k], a->index[k]);
            CHECK(b->t[k] == a->t[k]);
            double e = vf_rel_err(b->vec[k], a->vec[k], CAP_DIM);
            CHECK_MSG(e <= TOL, "%s row %d: relative error %.3g", paths[i], k, e);
            worst = e > worst ? e : worst;
        }
    }
    return worst;
}

int main(int argc, char **argv)
{
    const char *videos = argc > 1 ? argv[1] : VF_SHARED_DIR "/videos";
    vf_config gpu = config("cuda", 2, NULL);
    if (!opens(&gpu))
        return 77;
    const char *names[] = {"h264_640x480_asl_again.mkv", "phone_rotated180_ipad2.mov",
                           "hevc_640x360_aac.mp4",       "vp9_480p_bigbuckbunny_1s.webm",
                           "mpeg4asp_megamind.avi",      "av1_320x180.ivf"};
    static char shared[6][1024];
    const char *paths[CAP_MAX_FILES] = {VF_SAMPLES_DIR "/testsrc_64x48.mp4",
                                        VF_SAMPLES_DIR "/rotated90_64x48.mp4",
                                        VF_SAMPLES_DIR "/truncated.mp4"};
    int n = 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        snprintf(shared[i], sizeof(shared[i]), "%s/%s", videos, names[i]);
        if (access(shared[i], R_OK) == 0)
            paths[n++] = shared[i];
    }
    static capture want, got;
    vf_config ref = config("ref", 1, NULL);
    CHECK_EQ(cap_run(&ref, paths, n, &want, 0), VF_OK);

    CHECK_EQ(cap_run(&gpu, paths, n, &got, 0), VF_OK);
    printf("GPU conversion, 2 files at once: %d files, worst relative error %.2e\n", n,
           compare(&want, &got, paths, n));
    vf_config one = config("cuda", 1, NULL);
    one.convert_threads = 1;
    CHECK_EQ(cap_run(&one, paths, n, &got, 0), VF_OK);
    printf("GPU conversion, one file and one worker at a time: worst relative error %.2e\n",
           compare(&want, &got, paths, n));

    vf_config nvdec = config("cuda", 3, "cuda");
    if (opens(&nvdec)) {
        CHECK_EQ(cap_run(&nvdec, paths, n, &got, 0), VF_OK);
        int on_device = 0;
        for (int i = 0; i < n; i++)
            on_device += !strcmp(got.f[i].hwdec, "cuda");
        CHECK_MSG(on_device > 0, "no file was decoded by NVDEC");
        printf("NVDEC frames converted on the device: %d of %d files decoded there, worst "
               "relative error %.2e\n",
               on_device, n, compare(&want, &got, paths, n));
    }
    printf("pipeline on the GPU: the reference pipeline's frames and vectors\n");
    return 0;
}
