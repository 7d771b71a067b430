/*
 * shots.h - shot boundaries (cuts) found while decoding, by the content score of PySceneDetect's
 * ContentDetector (docs/shots.md): every decoded frame, made small and converted to HSV as
 * OpenCV's 8-bit conversion does, is compared with the one before it; the mean absolute
 * difference of hue, saturation and value, weighted (1, 1, 1 by default) and divided by the sum
 * of the weights, is the frame's score. A frame whose score reaches the threshold starts a new
 * shot, unless the previous cut is fewer than min_frames frames before it; cuts closer than that
 * are merged as the detector's "merge" flash filter does: a run of high scores (a flash, a fast
 * montage) becomes one cut at its last high frame, once min_frames quiet frames follow it and it
 * spans at least min_frames frames itself.
 *
 * Plain C over packed BGR pictures (decode.c makes them from the decoded frames); no FFmpeg here.
 * Memory: two pictures of the small size, and the shots found (a few dozen bytes each).
 */
#ifndef VIDFEAT_SHOTS_H
#define VIDFEAT_SHOTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The pictures the score is taken on: this wide (fewer when the video is narrower), their height
 * in proportion (PySceneDetect's automatic downscale to 256 columns). */
#define VF_SHOTS_WIDTH 256

#define VF_SHOTS_DEFAULT_THRESHOLD  27.0
#define VF_SHOTS_DEFAULT_MIN_FRAMES 15

typedef struct vf_shot_opts {
    double threshold;  /* a frame scoring this or more is a cut; <= 0: the default, 27 */
    int min_frames;    /* the shortest shot, in frames; 0: the default, 15; < 0: no minimum */
    double weights[3]; /* hue, saturation, value; all 0: 1, 1, 1 */
} vf_shot_opts;

/* One shot: frames first..last (numbers in presentation order), from the first frame's time to
 * the time of the frame after its last (the next shot's start; for the last shot, the end of its
 * last frame), in seconds on the decoder's timeline. */
typedef struct vf_shot {
    int64_t first, last;
    double start, end;
} vf_shot;

typedef struct vf_shots vf_shots;

/* A detector for pictures of w x h (VF_ERR_NOMEM, VF_ERR_INVALID for a bad size or option). */
vf_status vfi_shots_new(const vf_shot_opts *o, int w, int h, vf_shots **out, vf_err *err);
/* The next decoded frame: number index, at t seconds, as packed BGR rows of w x 3 bytes each,
 * stride bytes apart. Frames come in presentation order, each once. VF_ERR_NOMEM. */
vf_status vfi_shots_push(vf_shots *d, const uint8_t *bgr, ptrdiff_t stride, int64_t index, double t,
                         vf_err *err);
/* The score of the last frame pushed (0 for the first), for tests and statistics. */
double vfi_shots_score(const vf_shots *d);
/* After the last frame, which ends at t_end: the shots, in order, covering every frame pushed
 * (none when none was). Borrowed until vfi_shots_free; *n their count. VF_ERR_NOMEM. */
vf_status vfi_shots_finish(vf_shots *d, double t_end, const vf_shot **shots, int *n, vf_err *err);
void vfi_shots_free(vf_shots **pd);

/* Packed BGR to OpenCV's 8-bit HSV (hue 0..179 in steps of 2 degrees, saturation and value
 * 0..255), n pixels, into three planes: the conversion the score is taken on. */
void vfi_shots_bgr_to_hsv(const uint8_t *bgr, int n, uint8_t *h, uint8_t *s, uint8_t *v);

#endif /* VIDFEAT_SHOTS_H */
