/*
 * jpeg.c - JPEG encoding (jpeg.h) by TurboJPEG: 4:2:0, the file copied into vidfeat's memory.
 */
#include <string.h>

#include <turbojpeg.h>

#include "core/mem.h"
#include "serve/jpeg.h"

vf_status vfs_jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **jpeg,
                          size_t *len, vf_err *err)
{
    *jpeg = NULL;
    *len = 0;
    tjhandle tj = tjInitCompress();
    if (!tj)
        return vfi_fail(err, VF_ERR_NOMEM, "JPEG: %s", tjGetErrorStr2(NULL));
    unsigned char *buf = NULL;
    unsigned long size = 0;
    vf_status rc = VF_OK;
    if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, quality,
                    TJFLAG_ACCURATEDCT) != 0)
        rc = vfi_fail(err, VF_ERR_INVALID, "JPEG: %s", tjGetErrorStr2(tj));
    else if (!(*jpeg = vfi_malloc(size)))
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    else {
        memcpy(*jpeg, buf, size);
        *len = size;
    }
    tjFree(buf);
    tjDestroy(tj);
    return rc;
}
