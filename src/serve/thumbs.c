/*
 * thumbs.c - the thumbnail cache (thumbs.h): entries keyed by path and time (to the
 * millisecond), in a list searched linearly (a cache of 64 MiB holds a few thousand), each
 * stamped when last used.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/cpus.h"
#include "core/mem.h"
#include "media/decode.h"
#include "media/picture.h"
#include "serve/jpeg.h"
#include "serve/thumbs.h"

#define JPEG_QUALITY 85
#define STALL_S      10.0 /* a file that decodes nothing for this long fails */

typedef struct entry {
    char *path;
    int64_t ms;
    uint8_t *jpeg;
    size_t len;
    uint64_t used;
} entry;

struct vfs_thumbs {
    pthread_mutex_t lock;
    pthread_cond_t slot; /* signalled when a decode ends */
    entry *v;
    int n, cap;
    int64_t bytes, max_bytes;
    uint64_t clock;
    int decoding, max_decoding;
};

vf_status vfs_thumbs_create(int64_t bytes, vfs_thumbs **out, vf_err *err)
{
    vfs_thumbs *c = vfi_calloc(1, sizeof(*c));
    if (!c)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->slot, NULL);
    c->max_bytes = bytes;
    vf_cpu_budget b;
    vfi_cpu_budget(&b);
    c->max_decoding = b.cpus;
    *out = c;
    return VF_OK;
}

void vfs_thumbs_free(vfs_thumbs **pc)
{
    vfs_thumbs *c = *pc;
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        vfi_free(c->v[i].path);
        vfi_free(c->v[i].jpeg);
    }
    vfi_free(c->v);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->slot);
    vfi_free(c);
    *pc = NULL;
}

/* A copy of the cached picture into *jpeg: 1 found, 0 not, -1 out of memory. Locked. */
static int lookup(vfs_thumbs *c, const char *path, int64_t ms, uint8_t **jpeg, size_t *len)
{
    for (int i = 0; i < c->n; i++)
        if (c->v[i].ms == ms && !strcmp(c->v[i].path, path)) {
            c->v[i].used = ++c->clock;
            if (!(*jpeg = vfi_malloc(c->v[i].len)))
                return -1;
            memcpy(*jpeg, c->v[i].jpeg, c->v[i].len);
            *len = c->v[i].len;
            return 1;
        }
    return 0;
}

/* Keep a copy of the picture, dropping the least recently used ones to stay within the bound.
 * Locked; nothing kept when out of memory (it is a cache). */
static void keep(vfs_thumbs *c, const char *path, int64_t ms, const uint8_t *jpeg, size_t len)
{
    if ((int64_t)len > c->max_bytes)
        return;
    while (c->n && c->bytes + (int64_t)len > c->max_bytes) {
        int old = 0;
        for (int i = 1; i < c->n; i++)
            if (c->v[i].used < c->v[old].used)
                old = i;
        c->bytes -= (int64_t)c->v[old].len;
        vfi_free(c->v[old].path);
        vfi_free(c->v[old].jpeg);
        c->v[old] = c->v[--c->n];
    }
    entry e = {vfi_strdup(path), ms, vfi_malloc(len), len, ++c->clock};
    entry *v = e.path && e.jpeg ? vfi_grow(c->v, &c->cap, c->n + 1, sizeof(*v)) : NULL;
    if (!v) {
        vfi_free(e.path);
        vfi_free(e.jpeg);
        return;
    }
    memcpy(e.jpeg, jpeg, len);
    c->v = v;
    c->v[c->n++] = e;
    c->bytes += (int64_t)len;
}

/* Decode the frame at t and make its JPEG. */
static vf_status make(const char *path, double t, uint8_t **jpeg, size_t *len, vf_err *err)
{
    vf_sampling s = {.start = t, .max_frames = 1};
    vf_decode_opts o = {.threads = 1, .stall_timeout = STALL_S};
    vf_decoder *d = NULL;
    vf_frame f = {0};
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    vf_status rc = vfi_frame_init(&f);
    if (rc < 0)
        return vfi_fail(err, rc, "out of memory");
    rc = vfi_decoder_open(path, &s, &o, &d, err);
    if (rc >= 0) {
        rc = vfi_decoder_next(d, &f, err);
        if (rc == VF_EOF)
            rc = vfi_fail(err, VF_ERR_DECODE, "%s: no frame at %.3f s or after", path, t);
    }
    if (rc >= 0)
        rc = vfi_picture_rgb(&f, vfi_decoder_meta(d)->rotation, VFS_THUMB_SIDE, &rgb, &w, &h, err);
    if (rc >= 0)
        rc = vfs_jpeg_encode(rgb, w, h, JPEG_QUALITY, jpeg, len, err);
    vfi_free(rgb);
    vfi_frame_destroy(&f);
    vfi_decoder_free(&d);
    return rc;
}

vf_status vfs_thumbs_get(vfs_thumbs *c, const char *path, double t, uint8_t **jpeg, size_t *len,
                         vf_err *err)
{
    *jpeg = NULL;
    *len = 0;
    int64_t ms = (int64_t)llround(t * 1000.0);
    pthread_mutex_lock(&c->lock);
    int hit = lookup(c, path, ms, jpeg, len);
    while (!hit && c->decoding >= c->max_decoding)
        pthread_cond_wait(&c->slot, &c->lock);
    if (!hit)
        c->decoding++;
    pthread_mutex_unlock(&c->lock);
    if (hit)
        return hit > 0 ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    vf_status rc = make(path, (double)ms / 1000.0, jpeg, len, err);
    pthread_mutex_lock(&c->lock);
    c->decoding--;
    pthread_cond_signal(&c->slot);
    if (rc >= 0)
        keep(c, path, ms, *jpeg, *len);
    pthread_mutex_unlock(&c->lock);
    return rc;
}
