/*
 * index.c - search index files (index.h): vf_db_index builds one or brings it up to date,
 * vf_db_indexes says how current each recorded one is, vfi_index_* find and search one (the
 * file itself is read and written by index_file.c).
 *
 * Building reads the model row's done extractions from the store (vfi_store_vectors, choosing
 * extractions with its want callback): first which there are and how many vectors each holds,
 * then, for kinds that need training, a sample (every vector when there are few, else the
 * vectors of extractions chosen by a hash of their ids), then the vectors of the extractions the
 * index lacks, added in batches. Extractions the index holds that the database no longer holds
 * done (removed, or redone: a new extraction id) are removed from it, or hidden where the kind
 * cannot remove (HNSW). Vectors go in at unit length: the index's distances then order
 * candidates as cosine similarity does, and vf_db_similar ranks them by their exact cosine.
 */
#define _XOPEN_SOURCE 700 /* gethostname */
#include "pipeline/index.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vidfeat.h"
#include "core/clock.h"
#include "core/digest.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/path.h"
#include "core/vecmath.h"
#include "engine/manifest.h"
#include "search/ann.h"

#define EXT_BITS    32 /* a vector's id: extraction << 32 | frame index */
#define EXACT_UP_TO 50000
#define TRAIN_BYTES (512.0 * 1024 * 1024) /* the training sample's floats at most */
#define TRAIN_MAX   262144
#define BATCH_BYTES (64 * 1024 * 1024) /* vectors added at once */
/* An index file that differs from its record while it is being made again: looked at again
 * every RECORD_WAIT_NS, up to RECORD_TRIES times, when it changed in the last RECENTLY_S. */
#define RECORD_TRIES   40
#define RECORD_WAIT_NS 50000000L
#define RECENTLY_S     10.0
#define HNSW_EF        128
#define PQ_BYTES       64 /* a vector's code in the compact kind: 64 bytes + its 8-byte id */
#define PCA_DIM        256

/* ---- a vector's id ------------------------------------------------------------------------- */

/* Can r be an id (a frame index below 2^32, an extraction below 2^30)? */
static int id_fits(const vf_store_ref *r)
{
    return r->frame_index >= 0 && r->frame_index < (INT64_C(1) << EXT_BITS) && r->extraction >= 0 &&
           r->extraction < (INT64_C(1) << (62 - EXT_BITS));
}

static int64_t ref_id(const vf_store_ref *r)
{
    return r->extraction << EXT_BITS | r->frame_index;
}

static vf_store_ref id_ref(int64_t id)
{
    return (vf_store_ref){id >> EXT_BITS, id & ((INT64_C(1) << EXT_BITS) - 1), 0, 0.0};
}

void vfi_index_unit(const float *v, int dim, float *out)
{
    double s = vfi_dot(v, v, dim);
    double scale = s > 0 ? 1.0 / sqrt(s) : 0.0;
    for (int i = 0; i < dim; i++)
        out[i] = (float)(v[i] * scale);
}

vf_status vfi_index_search(vfi_index *ix, const float *q, int k, int probe,
                           const vf_store_ref *skip, vf_store_ref *refs, int *n, vf_err *err)
{
    *n = 0;
    float *sim = vfi_mallocarray((size_t)k, sizeof(*sim));
    vf_status rc = sim ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0)
        rc = vfi_index_search_many(ix, 1, q, k, probe, refs, sim, err);
    for (int i = 0; rc >= 0 && i < k; i++) { /* in place: the found ones, skip left out */
        if (refs[i].extraction < 0 || (skip && skip->extraction == refs[i].extraction &&
                                       skip->frame_index == refs[i].frame_index))
            continue;
        refs[(*n)++] = refs[i];
    }
    vfi_free(sim);
    return rc;
}

vf_status vfi_index_search_many(vfi_index *ix, int64_t n, const float *q, int k, int probe,
                                vf_store_ref *refs, float *sim, vf_err *err)
{
    int64_t *ids = vfi_mallocarray((size_t)n * (size_t)k, sizeof(*ids));
    float *dist = vfi_mallocarray((size_t)n * (size_t)k, sizeof(*dist));
    vf_status rc = ids && dist ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0)
        rc = vfi_ann_search_many(ix->ann, n, q, k, probe > 0 ? probe : ix->probe, ids, dist, err);
    for (int64_t i = 0; rc >= 0 && i < n * k; i++) {
        refs[i] = (vf_store_ref){-1, -1, 0, 0.0};
        sim[i] = -1.0f;
        if (ids[i] < 0 || !vfi_index_covers(ix, ids[i] >> EXT_BITS))
            continue; /* none, or hidden: gone from the database */
        refs[i] = id_ref(ids[i]);
        sim[i] = 1.0f - 0.5f * dist[i]; /* unit vectors: |a - b|^2 = 2 - 2 cos */
    }
    vfi_free(ids);
    vfi_free(dist);
    return rc;
}

vf_status vfi_index_memory(int dim, int64_t n, const float *vecs, const vf_store_ref *refs,
                           vfi_index **out, vf_err *err)
{
    *out = NULL;
    vfi_index *ix = vfi_calloc(1, sizeof(*ix));
    int64_t *ids = vfi_mallocarray((size_t)(n > 0 ? n : 1), sizeof(*ids));
    vf_status rc = VF_OK;
    if (!ix || !ids || !(ix->path = vfi_strdup("")) || !(ix->kind = vfi_strdup("Flat"))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    ix->dim = dim;
    for (int64_t i = 0; i < n; i++) {
        if (!id_fits(&refs[i])) {
            rc = vfi_fail(err, VF_ERR_INVALID,
                          "frame %lld of extraction %lld is beyond what an index can hold",
                          (long long)refs[i].frame_index, (long long)refs[i].extraction);
            goto done;
        }
        ids[i] = ref_id(&refs[i]);
        if (!i || refs[i].extraction != refs[i - 1].extraction) {
            if (vfi_index_ext_add(ix, refs[i].extraction, 0, 0) < 0) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
        ix->ext[ix->n_ext - 1].vectors++;
    }
    qsort(ix->ext, (size_t)ix->n_ext, sizeof(*ix->ext), vfi_index_ext_cmp);
    if ((rc = vfi_ann_create("Flat", dim, &ix->ann, err)) >= 0 && n > 0)
        rc = vfi_ann_add(ix->ann, n, vecs, ids, err);
done:
    vfi_free(ids);
    if (rc < 0)
        vfi_index_free(&ix);
    *out = ix;
    return rc;
}

/* A database's record of an index file: the one at `want` (NULL: the first whose file is here),
 * with the SHA-256 recorded when it was written. */
typedef struct index_pick {
    const char *want;
    char *path, *sha256; /* NULL: none found, or none recorded */
    int nomem;
} index_pick;

static void pick_index(void *user, const vf_store_index *rec)
{
    index_pick *p = user;
    if (p->path || p->nomem || (p->want ? strcmp(rec->path, p->want) : access(rec->path, F_OK)))
        return;
    p->nomem = !(p->path = vfi_strdup(rec->path)) ||
               (rec->sha256 && !(p->sha256 = vfi_strdup(rec->sha256)));
}

static void pick_clear(index_pick *p)
{
    vfi_free(p->path);
    vfi_free(p->sha256);
}

/* The file at path is the one the database recorded (sha256; NULL: none recorded, as for an
 * index built before schema 8): an index file is untrusted input, and one changed since - an id
 * map pointing elsewhere - would rank the wrong frames. Hashed through the digest cache, so an
 * unchanged file is read once. *changed (when not NULL): the file's status-change time (epoch
 * seconds) when it differs, else left as it was. */
static vf_status check_recorded_at(const char *path, const char *sha256, double *changed,
                                   vf_err *err)
{
    struct stat st;
    if (!sha256)
        return VF_OK;
    int missing = stat(path, &st) != 0;
    if (missing || !S_ISREG(st.st_mode)) /* hashing a FIFO would block */
        return vfi_fail(err, VF_ERR_STORE, "%s: %s", path,
                        missing ? strerror(errno) : "not a regular file");
    char hex[65];
    vf_status rc = vfi_sha256_file_cached(path, hex, err);
    if (rc < 0)
        return rc;
    if (strcmp(hex, sha256) && changed) /* when it was last replaced or written */
        *changed = (double)st.st_ctim.tv_sec + 1e-9 * (double)st.st_ctim.tv_nsec;
    if (strcmp(hex, sha256))
        return vfi_fail(err, VF_ERR_STORE,
                        "%s: not the index the database recorded (its SHA-256 differs: changed "
                        "since it was built)",
                        path);
    return VF_OK;
}

static vf_status check_recorded(const char *path, const char *sha256, vf_err *err)
{
    return check_recorded_at(path, sha256, NULL, err);
}

/* The index to search for row: the one `path` names, else the first the database records for
 * the row whose file is here; *ix NULL: none. One that is there but unusable fails. */
vf_status vfi_index_find(vf_store *s, const vfi_held_model *row, const char *path, vfi_index **ix,
                         vf_err *err)
{
    *ix = NULL;
    index_pick pick;
    vf_status rc;
    for (int tries = 0;; tries++) {
        pick = (index_pick){path, NULL, NULL, 0};
        rc = vfi_store_indexes(s, row->id, pick_index, &pick, err);
        if (rc >= 0 && !pick.nomem && path && !pick.path && !(pick.path = vfi_strdup(path)))
            pick.nomem = 1; /* named, but not recorded: nothing to check it against */
        if (rc >= 0 && pick.nomem)
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        double changed = -1.0;
        if (rc >= 0 && pick.path)
            rc = check_recorded_at(pick.path, pick.sha256, &changed, err);
        /* vidfeat index renames a new file into place a moment before it records it: a file
         * that differs, replaced in the last seconds, is given that moment */
        if (rc >= 0 || changed < 0 || tries >= RECORD_TRIES || vfi_epoch_s() - changed > RECENTLY_S)
            break;
        pick_clear(&pick);
        nanosleep(&(struct timespec){0, RECORD_WAIT_NS}, NULL);
    }
    if (rc >= 0 && pick.path && (rc = vfi_index_open(pick.path, row, 1, ix, err)) >= 0)
        rc = VF_OK;
    if (rc < 0 && rc != VF_ERR_NOMEM && pick.path && !strstr(err->msg, "--exact"))
        snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
                 " (vidfeat index --rebuild makes it anew; --exact searches without it)");
    pick_clear(&pick);
    return rc;
}

/* ---- building ------------------------------------------------------------------------------ */

/* The done extractions of the row, as vfi_store_vectors lists them (no vector read). */
typedef struct listing {
    ext_entry *v;
    int n, cap;
    int64_t vectors;
    int nomem;
} listing;

static void list_ext(listing *l, int64_t extraction, int64_t frames)
{
    ext_entry *e = vfi_grow(l->v, &l->cap, l->n + 1, sizeof(*e));
    if (!e) {
        l->nomem = 1;
        return;
    }
    l->v = e;
    l->v[l->n++] = (ext_entry){extraction, frames, 0};
    l->vectors += frames;
}

static vf_status list_done(vf_store *s, const vfi_held_model *row, listing *l, vf_err *err)
{
    memset(l, 0, sizeof(*l));
    vfi_held_extraction *done = NULL;
    int n = 0;
    int64_t total = 0;
    vf_status rc = vfi_held_extractions(s, row, &done, &n, &total, err);
    for (int i = 0; rc >= 0 && i < n && !l->nomem; i++)
        list_ext(l, done[i].id, done[i].vectors);
    vfi_free(done);
    if (rc >= 0 && l->nomem)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0)
        qsort(l->v, (size_t)l->n, sizeof(*l->v), vfi_index_ext_cmp);
    return rc;
}

static const ext_entry *in_listing(const listing *l, int64_t id)
{
    ext_entry key = {id, 0, 0};
    return l->n ? bsearch(&key, l->v, (size_t)l->n, sizeof(key), vfi_index_ext_cmp) : NULL;
}

/* A hash of an extraction id: which ones a training sample takes. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* One pass over chosen extractions' vectors: a training sample, or the vectors to add. */
typedef struct pass {
    const vfi_held_model *row;
    const listing *want_from; /* the extractions to read (sorted) */
    vfi_index *ix;            /* adding: the index, whose table grows as extractions come */
    uint64_t sample_below;    /* training: extractions whose mix(id) is below this */
    int64_t stride, seen;     /* training: every stride-th vector of those */
    float *buf;               /* batch of unit vectors */
    int64_t *ids;
    int64_t n, cap, total, limit;
    int64_t cur_ext; /* adding: the extraction whose vectors are coming */
    vf_err *err;
    const vf_index_opts *o;
    int64_t done, of;
    vf_status rc;
} pass;

static int want_listed(void *user, int64_t extraction, int64_t frames)
{
    pass *p = user;
    (void)frames;
    if (!in_listing(p->want_from, extraction))
        return 0; /* done after the listing, or not one this pass reads */
    if (p->sample_below && mix((uint64_t)extraction) > p->sample_below)
        return 0;
    return 1;
}

static vf_status flush_batch(pass *p)
{
    if (!p->n || !p->ix)
        return VF_OK;
    vf_status rc = vfi_ann_add(p->ix->ann, p->n, p->buf, p->ids, p->err);
    p->n = 0;
    return rc;
}

static vf_status take_vector(void *user, const vf_store_vector *v)
{
    pass *p = user;
    if (p->o && p->o->progress && (++p->done & 1023) == 0 &&
        p->o->progress(p->o->user, p->done, p->of))
        return vfi_fail(p->err, VF_ERR_CANCELLED, "stopped");
    if (!p->ix) { /* training: every stride-th, up to the limit */
        if (p->seen++ % p->stride || p->n >= p->limit)
            return VF_OK;
        vfi_index_unit(v->vec, p->row->dim, p->buf + p->n * p->row->dim);
        p->n++;
        return VF_OK;
    }
    if (!id_fits(&v->ref))
        return vfi_fail(p->err, VF_ERR_INVALID,
                        "%s: frame %lld of extraction %lld is beyond what an index can hold",
                        v->path, (long long)v->ref.frame_index, (long long)v->ref.extraction);
    if (v->ref.extraction != p->cur_ext) { /* a new extraction: into the table */
        if (vfi_index_ext_add(p->ix, v->ref.extraction, 0, 0) < 0)
            return vfi_fail(p->err, VF_ERR_NOMEM, "out of memory");
        p->cur_ext = v->ref.extraction;
    }
    p->ix->ext[p->ix->n_ext - 1].vectors++;
    vfi_index_unit(v->vec, p->row->dim, p->buf + p->n * p->row->dim);
    p->ids[p->n++] = ref_id(&v->ref);
    p->total++;
    return p->n == p->cap ? flush_batch(p) : VF_OK;
}

int64_t vfi_index_train_size(int64_t n, int dim)
{
    return (int64_t)fmin(fmin((double)n, TRAIN_MAX), TRAIN_BYTES / (4.0 * dim));
}

vf_status vfi_index_choose_kind(const char *kind, int64_t n, int dim, int text, char *out,
                                size_t size, int *probe, vf_err *err)
{
    *probe = 0;
    /* auto: exact while a scan of the index is cheap, then IVF-PQ whatever the memory: with
     * Debian's FAISS (built without SIMD) an IVF over whole vectors searches at 100 ms p50 at a
     * million 1280-d vectors (scripts/bench-index.py), where PQ's codes are read in a few ms;
     * the candidates are ranked by their exact cosine either way. Vectors searched by words are
     * another matter: a text's cosine with the frames that show it is 0.2-0.4 (CLIP's), which
     * PQ's codes blur (recall@10 0.13 at 100,000 frames, scripts/bench-text.py) and HNSW's graph,
     * built for queries among the vectors, does not reach (0.43); 8 bits a value keep it (0.97,
     * a search in 3 ms, a dim-th of the vector's bytes) */
    if (!kind || !strcmp(kind, "auto"))
        kind = n <= EXACT_UP_TO ? "flat" : text ? "ivfsq8" : "ivfpq";
    /* IVF lists: about 4 sqrt(n), a power of two, no more than the training sample can fill
     * (32 vectors a list: ann_faiss.cpp's minimum, which gives 2048-d vectors, whose 512 MB
     * sample holds half as many, as many lists as 1280-d ones: 10,000,000 2048-d vectors in
     * 1,024 lists searched at 101 / 136 ms p50 / p99, in 2,048 at 39 / 52 ms, before a search
     * read its lists' share of the codes rather than nprobe lists; scripts/bench-index.py) */
    int64_t train = vfi_index_train_size(n, dim);
    int64_t nlist = 1;
    while (nlist * 2 <= 4 * sqrt((double)n) && nlist * 2 * 32 <= train && nlist < 65536)
        nlist *= 2;
    if (!strcmp(kind, "flat")) {
        snprintf(out, size, "Flat");
    } else if (!strcmp(kind, "hnsw")) {
        snprintf(out, size, "HNSW32");
        *probe = HNSW_EF;
    } else if (!strcmp(kind, "ivf") || !strcmp(kind, "ivfpq") || !strcmp(kind, "ivfsq8")) {
        if (nlist < 16)
            return vfi_fail(err, VF_ERR_INVALID,
                            "%lld vectors are too few for an IVF index (use flat)", (long long)n);
        if (!strcmp(kind, "ivf")) {
            snprintf(out, size, "IVF%lld,Flat", (long long)nlist);
        } else if (!strcmp(kind, "ivfsq8")) {
            snprintf(out, size, "IVF%lld,SQ8", (long long)nlist);
        } else {
            /* PQ splits the vector evenly, into pieces of at least 4 floats (smaller ones make
             * poor codes and slow training) */
            int d = dim > PCA_DIM ? PCA_DIM : dim, m = d / 4 < PQ_BYTES ? d / 4 : PQ_BYTES;
            while (m > 1 && d % m)
                m--;
            if (m < 1)
                m = 1;
            if (dim > PCA_DIM)
                snprintf(out, size, "PCAR%d,IVF%lld,PQ%d", d, (long long)nlist, m);
            else
                snprintf(out, size, "IVF%lld,PQ%d", (long long)nlist, m);
        }
        *probe = (int)(nlist / 16 < 8 ? 8 : nlist / 16 > 256 ? 256 : nlist / 16);
    } else {
        snprintf(out, size, "%s", kind); /* FAISS's own words */
        *probe = strstr(kind, "IVF") ? 16 : strstr(kind, "HNSW") ? HNSW_EF : 0;
    }
    return VF_OK;
}

/* The index's file beside an SQLite database: DB.MODEL.LAYER.faiss, the names' odd characters
 * made '_'. */
static char *default_path(const char *db, const vfi_held_model *row)
{
    size_t len = strlen(db) + strlen(row->name) + strlen(row->layer) + 16;
    char *p = vfi_malloc(len);
    if (!p)
        return NULL;
    int n = snprintf(p, len, "%s.", db);
    for (int part = 0; part < 2; part++) {
        for (const char *c = part ? row->layer : row->name; *c; c++)
            p[n++] =
                strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *c) && *c
                    ? *c
                    : '_';
        p[n++] = part ? '\0' : '.';
    }
    n--;
    snprintf(p + n, len - (size_t)n, ".faiss");
    char *abs = vfi_path_absolute(p);
    vfi_free(p);
    return abs;
}

/* Is row a CLIP model's image embeddings (a text tower recorded beside them, or its manifest
 * names one), which are searched by words? */
static int searched_by_words(const vf_config *cfg, const vfi_held_model *row)
{
    if (row->text_sha)
        return 1;
    vf_manifest *m = NULL;
    vf_err err = {0};
    int text = vfi_manifest_find(cfg->models_dir, row->name, &m, &err) >= 0 && m->text;
    vfi_manifest_free(&m);
    return text;
}

/* A new index of the kind words for the row, trained (when it needs it) on a sample of the
 * listing's vectors. */
static vf_status new_index(vf_store *s, const vfi_held_model *row, int text, const listing *all,
                           const char *kind, const vf_index_opts *o, vfi_index *ix, double *train_s,
                           vf_err *err)
{
    char words[160];
    vf_status rc = vfi_index_choose_kind(kind, all->vectors, row->dim, text, words, sizeof(words),
                                         &ix->probe, err);
    if (rc < 0)
        return rc;
    if (!(ix->kind = vfi_strdup(words)))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if ((rc = vfi_ann_create(words, row->dim, &ix->ann, err)) < 0)
        return rc;
    if (!vfi_ann_needs_training(ix->ann))
        return VF_OK;
    double t0 = vfi_now_s();
    int64_t limit = vfi_index_train_size(all->vectors, row->dim);
    pass p = {.row = row,
              .want_from = all,
              .limit = limit,
              .err = err,
              .o = o,
              .of = all->vectors,
              .stride = 1};
    /* few vectors: every one read, every stride-th kept; many: the extractions a hash chooses,
     * about twice the vectors needed, every other one kept */
    if (all->vectors > 2 * limit) {
        double share = fmin(1.0, 2.0 * (double)limit / (double)all->vectors);
        p.sample_below = (uint64_t)(share * 18446744073709551615.0);
        p.stride = 2;
    } else {
        p.stride = all->vectors / limit > 1 ? all->vectors / limit : 1;
    }
    if (!(p.buf = vfi_mallocarray((size_t)limit * (size_t)row->dim, sizeof(float))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory for %lld training vectors",
                        (long long)limit);
    rc = vfi_store_vectors(s, row->id, row->f16, row->dim, want_listed, take_vector, &p, err);
    if (rc >= 0 && p.n < 39)
        rc = vfi_fail(err, VF_ERR_INVALID, "%lld vectors are too few to train a %s index",
                      (long long)p.n, words);
    if (rc >= 0)
        rc = vfi_ann_train(ix->ann, p.n, p.buf, err);
    vfi_free(p.buf);
    *train_s = vfi_now_s() - t0;
    return rc;
}

/* Kind names a user gives: the same index whatever their case ("IVF" for FAISS's words). */
static int same_kind(const char *asked, const vfi_index *ix)
{
    if (!asked || !strcmp(asked, "auto"))
        return 1;
    if (!strcmp(asked, "flat"))
        return !strcmp(ix->kind, "Flat");
    if (!strcmp(asked, "hnsw"))
        return !strncmp(ix->kind, "HNSW", 4);
    if (!strcmp(asked, "ivf"))
        return !strncmp(ix->kind, "IVF", 3) && strstr(ix->kind, ",Flat");
    if (!strcmp(asked, "ivfpq"))
        return strstr(ix->kind, "IVF") && strstr(ix->kind, ",PQ");
    return !strcmp(asked, ix->kind);
}

void vf_search_restart(char **argv)
{
    vfi_ann_blas_restart(argv);
}

/* vf_db_index's phases. What the database no longer holds done leaves ix: removed, or hidden
 * where the index cannot remove (counted in rep->removed either way). */
static vf_status drop_gone(vfi_index *ix, const listing *done, vf_index_report *rep, vf_err *err)
{
    for (int64_t i = 0; i < ix->n_ext; i++) {
        ext_entry *e = &ix->ext[i];
        if (in_listing(done, e->id) || (e->flags & FLAG_HIDDEN))
            continue;
        int64_t removed = 0;
        vf_err why;
        vf_status rc = vfi_ann_remove_range(ix->ann, e->id << EXT_BITS, (e->id + 1) << EXT_BITS,
                                            &removed, &why);
        if (rc == VF_ERR_UNSUPPORTED) {
            e->flags |= FLAG_HIDDEN;
            rep->removed += e->vectors;
            continue;
        }
        if (rc < 0)
            return vfi_fail(err, rc, "%s: %s", ix->path, why.msg);
        rep->removed += removed;
        e->vectors = -1; /* dropped below */
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < ix->n_ext; i++)
        if (ix->ext[i].vectors >= 0)
            ix->ext[kept++] = ix->ext[i];
    ix->n_ext = kept;
    return VF_OK;
}

/* The done extractions ix does not hold, their vectors read from s and added (rep->added,
 * rep->add_s). */
static vf_status add_lacking(vf_store *s, const vfi_held_model *row, const listing *done,
                             const vf_index_opts *o, vfi_index *ix, vf_index_report *rep,
                             vf_err *err)
{
    listing lacks = {0};
    for (int64_t i = 0; i < done->n && !lacks.nomem; i++)
        if (!vfi_index_ext_find(ix, done->v[i].id))
            list_ext(&lacks, done->v[i].id, done->v[i].vectors);
    if (lacks.nomem) {
        vfi_free(lacks.v);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    if (!lacks.n)
        return VF_OK;
    double t1 = vfi_now_s();
    int64_t batch = BATCH_BYTES / ((int64_t)row->dim * 4);
    pass p = {.row = row,
              .want_from = &lacks,
              .ix = ix,
              .err = err,
              .o = o,
              .of = lacks.vectors,
              .cap = batch < 1 ? 1 : batch,
              .cur_ext = -1};
    p.buf = vfi_mallocarray((size_t)p.cap * (size_t)row->dim, sizeof(float));
    p.ids = vfi_mallocarray((size_t)p.cap, sizeof(int64_t));
    vf_status rc = p.buf && p.ids ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0)
        rc = vfi_store_vectors(s, row->id, row->f16, row->dim, want_listed, take_vector, &p, err);
    if (rc >= 0)
        rc = flush_batch(&p);
    rep->added = p.total;
    rep->add_s = vfi_now_s() - t1;
    vfi_free(lacks.v);
    vfi_free(p.buf);
    vfi_free(p.ids);
    if (rc >= 0)
        qsort(ix->ext, (size_t)ix->n_ext, sizeof(*ix->ext), vfi_index_ext_cmp);
    return rc;
}

/* ix written whole to its file, then recorded in the database (its reader *s closed first, for
 * the writer), for similar to find; rep gets the path, kind, size and counts. */
static vf_status write_and_record(const char *db_path, vf_store **s, const vfi_held_model *row,
                                  vfi_index *ix, vf_index_report *rep, vf_err *err)
{
    char shown[512];
    vfi_store_display(db_path, shown, sizeof(shown));
    vf_status rc = vfi_index_write(ix, row, ix->path, shown, &rep->bytes, err);
    if (rc < 0)
        return rc;
    char now[32], host[256] = "";
    vfi_now_iso(now, sizeof(now));
    gethostname(host, sizeof(host) - 1);
    char sha[65];
    if ((rc = vfi_sha256_file_cached(ix->path, sha, err)) < 0) /* as written, renamed into place */
        return rc;
    vf_store_index rec = {ix->path, row->id, ix->kind, vfi_index_vectors(ix), vfi_index_files(ix),
                          now,      host,    sha};
    vfi_store_close(s);
    vf_store *w = NULL;
    if ((rc = vfi_store_open(db_path, VF_STORE_WRITE, &w, err)) < 0 ||
        (rc = vfi_store_index_put(w, &rec, err)) < 0) {
        snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
                 " (the index %s is written but not recorded: similar needs --index)", ix->path);
        vfi_store_close(&w);
        return rc;
    }
    vfi_store_close(&w);
    snprintf(rep->path, sizeof(rep->path), "%s", ix->path);
    snprintf(rep->kind, sizeof(rep->kind), "%s", ix->kind);
    rep->vectors = rec.vectors;
    rep->files = rec.files;
    return VF_OK;
}

vf_status vf_db_index(const char *db_path, const vf_config *cfg, const vf_index_opts *o,
                      vf_index_report *out, char *errbuf, size_t errbuf_size)
{
    vf_err err = {0};
    vf_status rc = VF_OK;
    vf_store *s = NULL;
    vfi_held rows = {0};
    const vfi_held_model *row = NULL;
    vfi_index *ix = NULL;
    listing done = {0};
    char *path = NULL;
    vf_index_opts none = {0};
    vf_index_report rep;
    memset(&rep, 0, sizeof(rep));
    double t0 = vfi_now_s();
    if (!o)
        o = &none;
    if (!db_path || !cfg) {
        rc = vfi_fail(&err, VF_ERR_INVALID, "index: a database and a configuration are needed");
        goto done;
    }
    if ((rc = vfi_store_open(db_path, VF_STORE_READ, &s, &err)) < 0 ||
        (rc = vfi_held_read(s, &rows, &err)) < 0 ||
        (rc = vfi_held_choose(&rows, cfg, 0, db_path, &row, &err)) < 0)
        goto done;
    if (o->path)
        path = vfi_path_absolute(o->path);
    else if (!vfi_store_uri_scheme(db_path))
        path = default_path(db_path, row);
    else {
        char shown[512];
        rc = vfi_fail(&err, VF_ERR_INVALID,
                      "%s: name the index file with --index PATH (a PostgreSQL database has no "
                      "directory of its own)",
                      vfi_store_display(db_path, shown, sizeof(shown)));
        goto done;
    }
    if (!path) {
        rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    vfi_index_clear_temporaries(path);
    if ((rc = list_done(s, row, &done, &err)) < 0)
        goto done;
    /* an existing index: kept and brought up to date, unless asked to start over */
    struct stat st;
    if (!o->rebuild && stat(path, &st) == 0) {
        index_pick pick = {path, NULL, NULL, 0};
        if ((rc = vfi_store_indexes(s, row->id, pick_index, &pick, &err)) >= 0)
            rc = pick.nomem ? vfi_fail(&err, VF_ERR_NOMEM, "out of memory")
                            : check_recorded(path, pick.sha256, &err);
        pick_clear(&pick);
        if (rc >= 0)
            rc = vfi_index_open(path, row, 1, &ix, &err);
        if (rc < 0) {
            if (rc != VF_ERR_NOMEM)
                snprintf(err.msg + strlen(err.msg), sizeof(err.msg) - strlen(err.msg), "%s",
                         strstr(err.msg, "--rebuild") ? "" : " (--rebuild makes it anew)");
            goto done;
        }
        if (!same_kind(o->kind, ix)) {
            rc = vfi_fail(&err, VF_ERR_INVALID,
                          "%s: the index is %s, not %s (--rebuild makes it anew as %s)", path,
                          ix->kind, o->kind, o->kind);
            goto done;
        }
    } else {
        if (!done.vectors) {
            rc = vfi_fail(&err, VF_ERR_STORE, "%s: no done vectors of %s %s to index", db_path,
                          row->name, row->layer);
            goto done;
        }
        if (!(ix = vfi_calloc(1, sizeof(*ix))) || !(ix->path = vfi_strdup(path))) {
            rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
            goto done;
        }
        ix->model_id = row->id;
        ix->dim = row->dim;
        rep.created = 1;
        if ((rc = new_index(s, row, searched_by_words(cfg, row), &done, o->kind, o, ix,
                            &rep.train_s, &err)) < 0)
            goto done;
    }
    if ((rc = drop_gone(ix, &done, &rep, &err)) < 0 ||
        (rc = add_lacking(s, row, &done, o, ix, &rep, &err)) < 0 ||
        (rc = write_and_record(db_path, &s, row, ix, &rep, &err)) < 0)
        goto done;
done:
    rep.seconds = vfi_now_s() - t0;
    if (out)
        *out = rep;
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    vfi_free(done.v);
    vfi_free(path);
    vfi_index_free(&ix);
    vfi_held_free(&rows);
    vfi_store_close(&s);
    return rc;
}

/* ---- how current each recorded index is ----------------------------------------------------- */

#define REC_STRINGS 5 /* the strings of a vf_store_index */

typedef struct recorded {
    vf_store_index *v;
    char **strings; /* each record's own copies: path, kind, built_at, host, sha256 */
    int n, cap;
    int nomem;
} recorded;

static void keep_index(void *user, const vf_store_index *ix)
{
    recorded *r = user;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        vf_store_index *v = realloc(r->v, (size_t)cap * sizeof(*v));
        char **s = v ? realloc(r->strings, (size_t)cap * REC_STRINGS * sizeof(*s)) : NULL;
        if (v)
            r->v = v;
        if (!v || !s) {
            r->nomem = 1;
            return;
        }
        r->strings = s;
        r->cap = cap;
    }
    const char *src[REC_STRINGS] = {ix->path, ix->kind, ix->built_at, ix->host, ix->sha256};
    char **dst = r->strings + REC_STRINGS * r->n;
    for (int i = 0; i < REC_STRINGS; i++) {
        dst[i] = src[i] ? vfi_strdup(src[i]) : NULL;
        r->nomem |= src[i] && !dst[i];
    }
    r->v[r->n] = *ix;
    r->v[r->n].path = dst[0];
    r->v[r->n].kind = dst[1];
    r->v[r->n].built_at = dst[2];
    r->v[r->n].host = dst[3];
    r->v[r->n].sha256 = dst[4];
    r->n++;
}

vf_status vf_db_indexes(const char *db_path, void (*index)(void *user, const vf_db_index_info *ix),
                        void *user, char *errbuf, size_t errbuf_size)
{
    vf_err err = {0};
    vf_status rc = VF_OK;
    vf_store *s = NULL;
    vfi_held rows = {0};
    recorded r = {0};
    if (!db_path || !index) {
        rc = vfi_fail(&err, VF_ERR_INVALID, "indexes: a database and a callback are needed");
        goto done;
    }
    if ((rc = vfi_store_open(db_path, VF_STORE_READ, &s, &err)) < 0 ||
        (rc = vfi_held_read(s, &rows, &err)) < 0 ||
        (rc = vfi_store_indexes(s, -1, keep_index, &r, &err)) < 0)
        goto done;
    if (r.nomem) {
        rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < r.n && rc >= 0; i++) {
        const vf_store_index *rec = &r.v[i];
        const vfi_held_model *row = NULL;
        for (int j = 0; j < rows.n; j++)
            if (rows.v[j].id == rec->model_id)
                row = &rows.v[j];
        vf_db_index_info info = {.path = rec->path,
                                 .model = row ? row->name : "?",
                                 .layer = row ? row->layer : "?",
                                 .kind = rec->kind,
                                 .built_at = rec->built_at,
                                 .host = rec->host,
                                 .vectors = rec->vectors,
                                 .files = rec->files};
        vfi_index *ix = NULL;
        listing done = {0};
        vf_err why = {VF_OK, ""};
        if (!row) {
            info.problem = "its model row holds no vectors now";
        } else if (access(rec->path, R_OK) != 0) {
            info.problem = "not on this machine";
        } else if (check_recorded(rec->path, rec->sha256, &why) < 0 ||
                   vfi_index_open(rec->path, row, 0, &ix, &why) < 0) {
            info.present = 1;
            info.problem = why.msg;
        } else if ((rc = list_done(s, row, &done, &err)) >= 0) {
            info.present = 1;
            for (int64_t k = 0; k < done.n; k++) {
                if (!vfi_index_covers(ix, done.v[k].id)) {
                    info.lacks_vectors += done.v[k].vectors;
                    info.lacks_files++;
                }
            }
            for (int64_t k = 0; k < ix->n_ext; k++) {
                if (!(ix->ext[k].flags & FLAG_HIDDEN) && !in_listing(&done, ix->ext[k].id)) {
                    info.gone_vectors += ix->ext[k].vectors;
                    info.gone_files++;
                }
            }
        }
        if (rc >= 0)
            index(user, &info);
        vfi_free(done.v);
        vfi_index_free(&ix);
    }
done:
    for (int i = 0; i < REC_STRINGS * r.n; i++)
        vfi_free(r.strings[i]);
    free(r.strings);
    free(r.v);
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    vfi_held_free(&rows);
    vfi_store_close(&s);
    return rc;
}
