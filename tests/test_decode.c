/*
 * test_decode.c - decoding and sampling on the committed sample clips: frame counts, true
 * timestamps, every sampling mode, rotation, and the error statuses for missing, truncated,
 * audio-only and non-media files.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "media/decode.h"
#include "media/probe.h"

#define CLIP VF_SAMPLES_DIR "/testsrc_64x48.mp4"

/* Decode with a sampling; fill t[] (up to max) and return the count. */
static int run(const char *path, vf_sampling s, double *t, int64_t *index, int max)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_decoder_open(path, &s, NULL, &d, &err), err.msg);
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    int n = 0;
    vf_status rc;
    while ((rc = vfi_decoder_next(d, &f, &err)) == VF_OK) {
        CHECK(n < max);
        t[n] = f.t;
        index[n] = f.index;
        n++;
    }
    CHECK_MSG(rc == VF_EOF, "%s: %s", path, err.msg);
    vfi_frame_destroy(&f);
    vfi_decoder_free(&d);
    return n;
}

static vf_status open_status(const char *path, char *msg, size_t size)
{
    vf_decoder *d = NULL;
    vf_err err = {0};
    vf_sampling s = {0};
    vf_status rc = vfi_decoder_open(path, &s, NULL, &d, &err);
    snprintf(msg, size, "%s", err.msg);
    vfi_decoder_free(&d);
    return rc;
}

int main(void)
{
    double t[64];
    int64_t idx[64];
    vf_sampling all = {0};

    int n = run(CLIP, all, t, idx, 64);
    CHECK_EQ(n, 20);
    for (int i = 0; i < n; i++) {
        CHECK_NEAR(t[i], i * 0.1, 1e-6);
        CHECK_EQ(idx[i], i);
    }

    vf_sampling every = {0};
    every.every = 3;
    n = run(CLIP, every, t, idx, 64);
    CHECK_EQ(n, 7);
    CHECK_EQ(idx[1], 3);
    CHECK_EQ(idx[6], 18);

    vf_sampling fps = {0};
    fps.fps = 2.0;
    n = run(CLIP, fps, t, idx, 64);
    CHECK_EQ(n, 4);
    for (int i = 0; i < n; i++)
        CHECK_NEAR(t[i], i * 0.5, 1e-6);

    vf_sampling key = {0};
    key.keyframes = 1;
    n = run(CLIP, key, t, idx, 64);
    CHECK_EQ(n, 4);
    for (int i = 0; i < n; i++) {
        CHECK_NEAR(t[i], i * 0.5, 1e-6);
        CHECK_EQ(idx[i], 5 * i);
    }

    vf_sampling window = {0};
    window.start = 0.75;
    window.duration = 0.5;
    n = run(CLIP, window, t, idx, 64);
    CHECK_EQ(n, 5); /* 0.8, 0.9, 1.0, 1.1, 1.2 */
    CHECK_NEAR(t[0], 0.8, 1e-6);
    CHECK_EQ(idx[0], 8);
    CHECK_NEAR(t[4], 1.2, 1e-6);

    /* Sparse sampling seeks; with one key frame the seeks cannot move forward, and the
     * decoder must fall back to reading through instead of looping. */
    vf_sampling sparse = {0};
    sparse.fps = 0.2;
    n = run(VF_SAMPLES_DIR "/one_gop_12s.mp4", sparse, t, idx, 64);
    CHECK_EQ(n, 3);
    for (int i = 0; i < n; i++)
        CHECK_NEAR(t[i], 5.0 * i, 1e-6);
    sparse.fps = 0.1;
    CHECK_EQ(run(VF_SAMPLES_DIR "/one_gop_12s.mp4", sparse, t, idx, 64), 2);

    vf_sampling cap = {0};
    cap.max_frames = 3;
    CHECK_EQ(run(CLIP, cap, t, idx, 64), 3);

    /* metadata */
    vf_decoder *d = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_decoder_open(VF_SAMPLES_DIR "/rotated90_64x48.mp4", &all, NULL, &d, &err),
             err.msg);
    const vf_video_meta *m = vfi_decoder_meta(d);
    CHECK_EQ(m->width, 64);
    CHECK_EQ(m->height, 48);
    CHECK_EQ(m->rotation, 270); /* display matrix 90 counter-clockwise = 270 clockwise */
    CHECK(!strcmp(m->codec, "h264"));
    CHECK_NEAR(m->frame_rate, 10.0, 1e-9);
    vfi_decoder_free(&d);

    /* truncated: the frames before the cut, then the end, with a note (as FFmpeg's command
     * line, which decodes them and ends without an error; threaded or not) */
    for (int threads = 0; threads <= 1; threads++) {
        vf_decode_opts o = {.threads = threads};
        CHECK_OK(vfi_decoder_open(VF_SAMPLES_DIR "/truncated.mp4", &all, &o, &d, &err), err.msg);
        vf_frame f;
        CHECK_EQ(vfi_frame_init(&f), VF_OK);
        int got = 0;
        vf_status rc;
        while ((rc = vfi_decoder_next(d, &f, &err)) == VF_OK)
            got++;
        CHECK_MSG(rc == VF_EOF, "truncated clip ended with %s: %s", vf_status_str(rc), err.msg);
        CHECK_EQ(got, 5);
        CHECK_MSG(!strcmp(vfi_decoder_note(d), "partial: 5 of 20 frames the index promises"),
                  "note: %s", vfi_decoder_note(d));
        vfi_frame_destroy(&f);
        vfi_decoder_free(&d);
    }
    CHECK_OK(vfi_decoder_open(CLIP, &all, NULL, &d, &err), err.msg);
    vf_frame f;
    CHECK_EQ(vfi_frame_init(&f), VF_OK);
    while (vfi_decoder_next(d, &f, &err) == VF_OK)
        ;
    CHECK(!strcmp(vfi_decoder_note(d), "")); /* a whole file has none */
    vfi_frame_destroy(&f);
    vfi_decoder_free(&d);

    char msg[512];
    CHECK_EQ(open_status("/nonexistent/clip.mp4", msg, sizeof(msg)), VF_ERR_IO);
    CHECK_EQ(open_status(VF_SAMPLES_DIR "/audio_only.m4a", msg, sizeof(msg)), VF_ERR_DECODE);
    CHECK(strstr(msg, "no video stream"));
    CHECK_EQ(open_status(VF_SAMPLES_DIR "/README.md", msg, sizeof(msg)), VF_ERR_DECODE);
    CHECK(vfi_decode_probe(CLIP, NULL) == VF_PROBE_VIDEO);
    /* sound only: media, but no frames (a walk names it) */
    CHECK(vfi_decode_probe(VF_SAMPLES_DIR "/audio_only.m4a", NULL) == VF_PROBE_BROKEN);
    CHECK(vfi_decode_probe(VF_SAMPLES_DIR "/README.md", NULL) == VF_PROBE_NOT_MEDIA);
    printf("decode: counts, timestamps, sampling modes, rotation and errors as expected\n");
    return 0;
}
