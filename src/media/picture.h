/*
 * picture.h - a decoded frame as a small 8-bit RGB picture, upright and in its display aspect,
 * for people to look at (vidfeat serve's thumbnails). Scaled by libswscale (its area filter:
 * a thumbnail wants no aliasing, not yuvconv's exactness).
 */
#ifndef VIDFEAT_PICTURE_H
#define VIDFEAT_PICTURE_H

#include <stdint.h>

#include "core/status.h"
#include "media/decode.h"

/* f (a picture in system memory) turned by rotation degrees clockwise (0, 90, 180, 270) and
 * scaled to fit max_side x max_side, its sample aspect ratio honoured: *w x *h pixels of 3
 * bytes, rows unpadded, into *rgb (vfi_free it). VF_ERR_DECODE when the frame cannot be
 * converted, VF_ERR_NOMEM. */
vf_status vfi_picture_rgb(const vf_frame *f, int rotation, int max_side, uint8_t **rgb, int *w,
                          int *h, vf_err *err);

#endif /* VIDFEAT_PICTURE_H */
