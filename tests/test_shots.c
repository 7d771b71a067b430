/*
 * test_shots.c - the cut detector (media/shots.c): its fixed-point HSV against the conversion's
 * definition in floating point on every grey and on random colours (within one step, as
 * OpenCV's own two paths differ); scores of known pictures; the merge filter's rules, frame by
 * frame (a cut at once when the last is far enough, a burst of cuts merged into one at its end,
 * a minimum of none); the shots' frames and times; bad sizes and options refused.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "media/shots.h"

/* The definition: V = max, S = 255 (V - min) / V, H = the hue in degrees / 2, rounded. */
static void hsv_float(int b, int g, int r, int *h, int *s, int *v)
{
    int mx = b > g ? b : g, mn = b < g ? b : g;
    mx = r > mx ? r : mx;
    mn = r < mn ? r : mn;
    double d = mx - mn, hue = 0.0;
    if (d > 0)
        hue = mx == r   ? 60.0 * (g - b) / d
              : mx == g ? 120.0 + 60.0 * (b - r) / d
                        : 240.0 + 60.0 * (r - g) / d;
    if (hue < 0)
        hue += 360.0;
    *h = (int)lrint(hue / 2.0) % 180;
    *s = mx ? (int)lrint(255.0 * d / mx) : 0;
    *v = mx;
}

static void hsv_matches_definition(void)
{
    uint8_t px[3], h, s, v;
    int worst = 0;
    srand(7);
    for (int i = 0; i < 200000; i++) {
        for (int c = 0; c < 3; c++)
            px[c] = (uint8_t)(i < 256 ? i : rand() % 256); /* every grey, then colours */
        vfi_shots_bgr_to_hsv(px, 1, &h, &s, &v);
        int fh, fs, fv;
        hsv_float(px[0], px[1], px[2], &fh, &fs, &fv);
        int dh = abs(h - fh);
        dh = dh > 90 ? 180 - dh : dh; /* hue wraps */
        CHECK(h < 180);
        CHECK_EQ(v, fv);
        worst = dh > worst ? dh : worst;
        worst = abs(s - fs) > worst ? abs(s - fs) : worst;
    }
    CHECK_MSG(worst <= 1, "fixed-point HSV %d steps from the definition", worst);
    /* pure colours land where the definition puts them */
    const uint8_t red[3] = {0, 0, 255}, green[3] = {0, 255, 0}, blue[3] = {255, 0, 0};
    vfi_shots_bgr_to_hsv(red, 1, &h, &s, &v);
    CHECK(h == 0 && s == 255 && v == 255);
    vfi_shots_bgr_to_hsv(green, 1, &h, &s, &v);
    CHECK(h == 60 && s == 255 && v == 255);
    vfi_shots_bgr_to_hsv(blue, 1, &h, &s, &v);
    CHECK(h == 120 && s == 255 && v == 255);
}

#define W 8
#define H 4

/* A picture of one colour into pic (W x H BGR). */
static void fill(uint8_t *pic, int b, int g, int r)
{
    for (int i = 0; i < W * H; i++) {
        pic[3 * i] = (uint8_t)b;
        pic[3 * i + 1] = (uint8_t)g;
        pic[3 * i + 2] = (uint8_t)r;
    }
}

/* Frames of the colours seq[0..n) (0 grey, 1 white, 2 red, 3 blue) at 25 fps; the shots. */
static int detect(const vf_shot_opts *o, const int *seq, int n, vf_shot *out, int max)
{
    vf_shots *d;
    vf_err err;
    CHECK(vfi_shots_new(o, W, H, &d, &err) == VF_OK);
    uint8_t pic[W * H * 3];
    static const int colours[4][3] = {{128, 128, 128}, {255, 255, 255}, {0, 0, 200}, {200, 0, 0}};
    for (int i = 0; i < n; i++) {
        const int *c = colours[seq[i]];
        fill(pic, c[0], c[1], c[2]);
        CHECK(vfi_shots_push(d, pic, 3 * W, i, i / 25.0, &err) == VF_OK);
    }
    const vf_shot *shots;
    int got;
    CHECK(vfi_shots_finish(d, n / 25.0, &shots, &got, &err) == VF_OK);
    CHECK(got <= max);
    memcpy(out, shots, (size_t)got * sizeof(*shots));
    vfi_shots_free(&d);
    CHECK(d == NULL);
    return got;
}

static void scores_and_cuts(void)
{
    vf_shots *d;
    vf_err err;
    CHECK(vfi_shots_new(NULL, W, H, &d, &err) == VF_OK);
    uint8_t pic[W * H * 3];
    fill(pic, 128, 128, 128);
    CHECK(vfi_shots_push(d, pic, 3 * W, 0, 0.0, &err) == VF_OK);
    CHECK(vfi_shots_score(d) == 0.0);
    /* grey (0, 0, 128) to red (0, 255, 200): (0 + 255 + 72) / 3 */
    fill(pic, 0, 0, 200);
    CHECK(vfi_shots_push(d, pic, 3 * W, 1, 0.04, &err) == VF_OK);
    CHECK_NEAR(vfi_shots_score(d), (0.0 + 255.0 + 72.0) / 3.0, 1e-12);
    vfi_shots_free(&d);

    vf_shot s[8];
    int seq[80];
    /* grey 30, red 30, blue 20: cuts at 30 and 60 */
    for (int i = 0; i < 80; i++)
        seq[i] = i < 30 ? 0 : i < 60 ? 2 : 3;
    int n = detect(NULL, seq, 80, s, 8);
    CHECK_EQ(n, 3);
    CHECK(s[0].first == 0 && s[0].last == 29 && s[1].first == 30 && s[1].last == 59);
    CHECK(s[2].first == 60 && s[2].last == 79);
    CHECK_NEAR(s[1].start, 30 / 25.0, 1e-12);
    CHECK_NEAR(s[1].end, 60 / 25.0, 1e-12);
    CHECK_NEAR(s[2].end, 80 / 25.0, 1e-12);

    /* a cut 5 frames after the last one is too close: with the default 15, red 30..34 then blue,
     * the first cut (30) stands and the second (35) merges into it (the burst from 35 is shorter
     * than 15 frames); with a minimum of none both stand */
    for (int i = 0; i < 80; i++)
        seq[i] = i < 30 ? 0 : i < 35 ? 2 : 3;
    n = detect(NULL, seq, 80, s, 8);
    CHECK_EQ(n, 2);
    CHECK_EQ(s[1].first, 30);
    vf_shot_opts none = {.min_frames = -1};
    n = detect(&none, seq, 80, s, 8);
    CHECK_EQ(n, 3);
    CHECK(s[1].first == 30 && s[2].first == 35);

    /* a burst (cuts every 3 frames from 30 to 48, after a first cut at 20): merged into one at
     * its last high frame once 15 quiet frames follow, the burst being 15 frames or longer */
    for (int i = 0; i < 80; i++)
        seq[i] = i < 20 ? 0 : i < 30 ? 3 : i > 48 ? 2 : ((i - 30) / 3) % 2 ? 3 : 2;
    n = detect(NULL, seq, 80, s, 8);
    CHECK_EQ(n, 3);
    CHECK(s[1].first == 20 && s[2].first == 48);

    /* a still picture: one shot */
    memset(seq, 0, sizeof(seq));
    n = detect(NULL, seq, 80, s, 8);
    CHECK(n == 1 && s[0].first == 0 && s[0].last == 79);
}

static void refused(void)
{
    vf_shots *d;
    vf_err err;
    CHECK(vfi_shots_new(NULL, 0, 10, &d, &err) == VF_ERR_INVALID && d == NULL);
    CHECK(vfi_shots_new(NULL, 100000, 10, &d, &err) == VF_ERR_INVALID);
    vf_shot_opts nan = {.weights = {NAN, 1, 1}};
    CHECK(vfi_shots_new(&nan, 8, 8, &d, &err) == VF_ERR_INVALID);
    /* nothing pushed: no shot */
    CHECK(vfi_shots_new(NULL, 8, 8, &d, &err) == VF_OK);
    const vf_shot *shots = (const vf_shot *)&err;
    int n = -1;
    CHECK(vfi_shots_finish(d, 1.0, &shots, &n, &err) == VF_OK && n == 0 && shots == NULL);
    vfi_shots_free(&d);
    vfi_shots_free(&d);
    vfi_shots_free(NULL);
}

int main(void)
{
    hsv_matches_definition();
    scores_and_cuts();
    refused();
    return 0;
}
