/*
 * thumbs.c - the thumbnail cache (thumbs.h). Entries are keyed by path and time (to the
 * millisecond) in a chained hash table and kept on a list from the most to the least recently
 * used, so a look-up and a drop cost the same at any size. An entry is being made, made (its
 * JPEG) or failed (its message: the same file fails the same way again). A request for an entry
 * being made waits for it rather than decoding the same frame again; requests that must decode
 * take turns (turns.h), so none waits behind later ones.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/cpus.h"
#include "core/mem.h"
#include "core/strmap.h"
#include "core/turns.h"
#include "media/decode.h"
#include "media/picture.h"
#include "serve/jpeg.h"
#include "serve/thumbs.h"

#define JPEG_QUALITY 85
#define STALL_S      10.0 /* a file that decodes nothing for this long fails */
#define ENTRY_BYTES  8192 /* a thumbnail's usual size: how many buckets a bound calls for */

enum { MAKING, MADE, FAILED };

typedef struct entry {
    char *path;
    int64_t ms;
    uint64_t hash;
    int state;
    uint8_t *data;               /* MADE: the JPEG; FAILED: the message (a string) */
    size_t len;                  /* of data */
    vf_status failure;           /* FAILED: its status */
    struct entry *chain;         /* the next in its bucket */
    struct entry *newer, *older; /* the use list; MAKING entries are not on it */
} entry;

struct vfs_thumbs {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* an entry made or failed */
    entry **bucket;
    size_t n_buckets;       /* a power of two */
    entry *newest, *oldest; /* the use list */
    int64_t max_bytes;
    vfs_thumbs_counts counts;
    vf_turns decoders;         /* as many decode at once as there are cores, in the order asked */
    const vf_archive *archive; /* what a decoder may read (borrowed) */
};

vf_status vfs_thumbs_create(int64_t bytes, const vf_archive *archive, vfs_thumbs **out, vf_err *err)
{
    vfs_thumbs *c = vfi_calloc(1, sizeof(*c));
    size_t n = 64;
    while (n < (1u << 20) && (int64_t)n * ENTRY_BYTES < bytes)
        n *= 2;
    if (c)
        c->bucket = vfi_calloc(n, sizeof(*c->bucket));
    if (!c || !c->bucket) {
        vfi_free(c);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->n_buckets = n;
    c->max_bytes = bytes;
    c->archive = archive;
    vf_cpu_budget b;
    vfi_cpu_budget(&b);
    vfi_turns_init(&c->decoders, b.cpus);
    *out = c;
    return VF_OK;
}

static void entry_free(entry *e)
{
    vfi_free(e->path);
    vfi_free(e->data);
    vfi_free(e);
}

void vfs_thumbs_free(vfs_thumbs **pc)
{
    vfs_thumbs *c = *pc;
    if (!c)
        return;
    for (size_t i = 0; i < c->n_buckets; i++)
        for (entry *e = c->bucket[i], *next; e; e = next) {
            next = e->chain;
            entry_free(e);
        }
    vfi_free(c->bucket);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->changed);
    vfi_turns_destroy(&c->decoders);
    vfi_free(c);
    *pc = NULL;
}

void vfs_thumbs_count(vfs_thumbs *c, vfs_thumbs_counts *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->counts;
    pthread_mutex_unlock(&c->lock);
}

static uint64_t key_hash(const char *path, int64_t ms)
{
    return vfi_hash_str(path) ^ ((uint64_t)ms * 0x9e3779b97f4a7c15u);
}

static entry *find(const vfs_thumbs *c, const char *path, int64_t ms, uint64_t hash)
{
    for (entry *e = c->bucket[hash & (c->n_buckets - 1)]; e; e = e->chain)
        if (e->hash == hash && e->ms == ms && !strcmp(e->path, path))
            return e;
    return NULL;
}

static void unchain(vfs_thumbs *c, const entry *e)
{
    entry **p = &c->bucket[e->hash & (c->n_buckets - 1)];
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
}

static void unlist(vfs_thumbs *c, entry *e)
{
    *(e->newer ? &e->newer->older : &c->newest) = e->older;
    *(e->older ? &e->older->newer : &c->oldest) = e->newer;
    e->newer = e->older = NULL;
}

static void list_newest(vfs_thumbs *c, entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    *(c->newest ? &c->newest->newer : &c->oldest) = e;
    c->newest = e;
}

static int64_t entry_bytes(const entry *e)
{
    return (int64_t)(e->len + strlen(e->path) + sizeof(*e));
}

/* Drop the least recently used entries until the kept ones fit the bound. Locked. */
static void shrink(vfs_thumbs *c)
{
    while (c->oldest && c->counts.bytes > c->max_bytes) {
        entry *e = c->oldest;
        unlist(c, e);
        unchain(c, e);
        c->counts.bytes -= entry_bytes(e);
        c->counts.kept--;
        entry_free(e);
    }
}

/* Decode the frame at t and make its JPEG; a failure's line names the file. */
static vf_status make(const vf_archive *archive, const char *path, double t, uint8_t **jpeg,
                      size_t *len, vf_err *err)
{
    vf_sampling s = {.start = t, .max_frames = 1};
    /* the file opened inside the archive, following no link (confine.h): one swapped in since
     * the server's check fails the decode instead of showing a frame of what it leads to */
    vf_decode_opts o = {.threads = 1, .stall_timeout = STALL_S, .archive = archive};
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
    if (rc < 0 && !strstr(err->msg, path)) {
        vf_err bare = *err; /* the decoder's lines leave the file to their caller */
        rc = vfi_fail(err, rc, "%s: %s", path, bare.msg);
    }
    return rc;
}

/* A made or failed entry's answer: a copy of its JPEG, or its failure. Locked. */
static vf_status answer(vfs_thumbs *c, entry *e, uint8_t **jpeg, size_t *len, vf_err *err)
{
    unlist(c, e);
    list_newest(c, e);
    c->counts.served++;
    if (e->state == FAILED)
        return vfi_fail(err, e->failure, "%s", (const char *)e->data);
    if (!(*jpeg = vfi_malloc(e->len)))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    memcpy(*jpeg, e->data, e->len);
    *len = e->len;
    return VF_OK;
}

/* Make the entry's picture: decoded unlocked when a decoder's turn comes, then the entry made
 * or failed and kept, and the requests waiting for it woken. Entered and left locked. */
static vf_status make_entry(vfs_thumbs *c, entry *e, uint8_t **jpeg, size_t *len, vf_err *err)
{
    pthread_mutex_unlock(&c->lock);
    vf_err mine = {0};
    vfi_turns_enter(&c->decoders);
    vf_status rc = make(c->archive, e->path, (double)e->ms / 1000.0, jpeg, len, &mine);
    vfi_turns_leave(&c->decoders);
    size_t kept = rc >= 0 ? *len : strlen(mine.msg) + 1;
    uint8_t *copy = vfi_malloc(kept);
    if (copy)
        memcpy(copy, rc >= 0 ? (const void *)*jpeg : (const void *)mine.msg, kept);
    pthread_mutex_lock(&c->lock);
    c->counts.made++;
    c->counts.served++;
    /* a failure that may not last (the file missing, unreadable, or its name changed under
     * the decoder: a link swapped in) is answered, not kept for later requests */
    int passing = rc == VF_ERR_IO || rc == VF_ERR_DENIED || rc == VF_ERR_NOMEM;
    if (!copy || passing) {
        vfi_free(copy);
        unchain(c, e); /* (or out of memory for the kept copy) */
        entry_free(e);
    } else {
        e->state = rc >= 0 ? MADE : FAILED;
        e->data = copy;
        e->len = kept;
        e->failure = rc;
        list_newest(c, e);
        c->counts.bytes += entry_bytes(e);
        c->counts.kept++;
        shrink(c);
    }
    pthread_cond_broadcast(&c->changed);
    if (rc < 0 && err)
        *err = mine;
    return rc;
}

vf_status vfs_thumbs_get(vfs_thumbs *c, const char *path, double t, uint8_t **jpeg, size_t *len,
                         vf_err *err)
{
    *jpeg = NULL;
    *len = 0;
    int64_t ms = (int64_t)llround(t * 1000.0);
    uint64_t hash = key_hash(path, ms);
    pthread_mutex_lock(&c->lock);
    entry *e;
    while ((e = find(c, path, ms, hash)) && e->state == MAKING)
        pthread_cond_wait(&c->changed, &c->lock); /* another request is making it */
    vf_status rc;
    if (e)
        rc = answer(c, e, jpeg, len, err);
    else if (!(e = vfi_calloc(1, sizeof(*e))) || !(e->path = vfi_strdup(path))) {
        vfi_free(e);
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    } else {
        e->ms = ms;
        e->hash = hash;
        e->state = MAKING;
        entry **b = &c->bucket[hash & (c->n_buckets - 1)];
        e->chain = *b;
        *b = e; /* found from now on: requests for it wait for it */
        rc = make_entry(c, e, jpeg, len, err);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}
