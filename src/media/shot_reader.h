/*
 * shot_reader.h - every decoded frame of a stream, for the shot detector (shots.h): scaled to
 * VF_SHOTS_WIDTH columns (fewer when narrower; the height in proportion, the coded size's, as
 * PySceneDetect reads frames) of packed BGR by libswscale's bilinear filter, one scaler kept for
 * the stream (made again if the frames change size or format). Rotation and aspect are left: a
 * shot's score is the same on a turned picture. Used by decode.c.
 */
#ifndef VIDFEAT_SHOT_READER_H
#define VIDFEAT_SHOT_READER_H

#include <stdint.h>

#include "core/status.h"
#include "media/shots.h"

typedef struct vf_shot_reader vf_shot_reader;

/* The frame av (an AVFrame in system memory), number index at t seconds, into *pr's detector,
 * made at the first frame (*pr NULL) with options o. VF_ERR_DECODE (a picture that cannot be
 * converted), VF_ERR_NOMEM. */
vf_status vfi_shot_reader_push(vf_shot_reader **pr, const vf_shot_opts *o, const void *av,
                               int64_t index, double t, vf_err *err);
/* The shots of the frames pushed, the last ending at t_end (vfi_shots_finish); r may be NULL
 * (no frame pushed: none). Borrowed until vfi_shot_reader_free. */
vf_status vfi_shot_reader_finish(vf_shot_reader *r, double t_end, const vf_shot **shots, int *n,
                                 vf_err *err);
void vfi_shot_reader_free(vf_shot_reader **pr);

#endif /* VIDFEAT_SHOT_READER_H */
