/*
 * thumbs.h - thumbnails of an archive's frames for the page: the frame at a time, decoded on
 * demand (a seek to the key frame before it, then decoding up to it), made small and upright
 * (picture.h), encoded as JPEG (jpeg.h), and kept in memory up to a bound, the least recently
 * used dropped first. Any thread; at most as many decode at once as the machine has cores, in
 * the order their requests came, and a frame asked for again while it is being made is made once.
 */
#ifndef VIDFEAT_THUMBS_H
#define VIDFEAT_THUMBS_H

#include <stddef.h>
#include <stdint.h>

#include "core/path.h"
#include "core/status.h"

#define VFS_THUMB_SIDE 320 /* pixels of a thumbnail's longer side, at most */

typedef struct vfs_thumbs vfs_thumbs;

/* A cache of at most `bytes` of JPEG, of frames of files inside archive (borrowed for the
 * cache's life): each opened beneath it following no link. */
vf_status vfs_thumbs_create(int64_t bytes, const vf_archive *archive, vfs_thumbs **out,
                            vf_err *err);
/* The frame of the file at path (already checked to be the archive's) shown at t seconds (the
 * first at or after t) as a JPEG: a copy into *jpeg
 * (vfi_free it), *len bytes. VF_ERR_DECODE / VF_ERR_IO naming what failed (a sound without
 * pictures, a damaged file), VF_ERR_NOMEM. */
vf_status vfs_thumbs_get(vfs_thumbs *c, const char *path, double t, uint8_t **jpeg, size_t *len,
                         vf_err *err);
typedef struct vfs_thumbs_counts {
    int64_t made;   /* pictures decoded (or failed) */
    int64_t served; /* requests answered */
    int64_t kept;   /* entries kept now */
    int64_t bytes;  /* what they hold, counted against the bound */
} vfs_thumbs_counts;
void vfs_thumbs_count(vfs_thumbs *c, vfs_thumbs_counts *out);
void vfs_thumbs_free(vfs_thumbs **pc);

#endif /* VIDFEAT_THUMBS_H */
