/*
 * assets.h - the page's files (src/serve/web/), compiled into the library by the build
 * (cmake/embed.cmake), so that a server needs nothing installed beside it and serves nothing
 * from the disk but the archive's videos.
 */
#ifndef VIDFEAT_ASSETS_H
#define VIDFEAT_ASSETS_H

#include <stddef.h>

typedef struct vfs_asset {
    const char *path; /* "/", "/app.js", ... */
    const char *type; /* its Content-Type */
    const unsigned char *data;
    size_t len;
} vfs_asset;

/* The asset served at path, or NULL. */
const vfs_asset *vfs_asset_find(const char *path);

#endif /* VIDFEAT_ASSETS_H */
