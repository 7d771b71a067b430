/*
 * jpeg.h - an RGB picture as a JPEG file in memory, through libjpeg-turbo's TurboJPEG (the only
 * file that sees it).
 */
#ifndef VIDFEAT_JPEG_H
#define VIDFEAT_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* w x h pixels of 3 bytes (rows unpadded) at quality 1..100 into *jpeg (vfi_free it), *len
 * bytes. VF_ERR_INVALID (a size TurboJPEG refuses), VF_ERR_NOMEM. */
vf_status vfs_jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **jpeg,
                          size_t *len, vf_err *err);

#endif /* VIDFEAT_JPEG_H */
