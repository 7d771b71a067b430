/*
 * matches.c - vf_db_matches: where footage is reused. Every query frame (one file's, or every
 * stored frame: a self-join) asks the search index for its nearest stored frames; the frames
 * that propose another file are grouped by pair of files, and each pair whose candidates are
 * enough is aligned in time (search/align.h) against the exact vectors, giving the copied
 * segments. Frames that show nothing (what the model gives uniform images: black, white, flat
 * colours) are left out on both sides.
 *
 * Vectors are held in memory as unit vectors in "sets" of files (a file: its extraction, path
 * and a run of frames in frame order): the query's, and the archive's (all of it for a
 * whole-archive search or an exact one; else only the files the candidates name).
 */
#define _XOPEN_SOURCE 700 /* sysconf's pages */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/vecmath.h"
#include "pipeline/held.h"
#include "pipeline/index.h"
#include "pipeline/query.h"
#include "search/align.h"
#include "search/ann.h"
#include "store/store.h"

#define DEFAULT_MIN_DURATION   2.0
#define DEFAULT_MIN_SIMILARITY 0.8
#define FLAT_SIMILARITY        0.9  /* a frame this close to a uniform image shows nothing */
#define NEIGHBOURS             32   /* candidates a query frame proposes */
#define QUERY_BATCH            2048 /* frames searched at once */
#define CANDIDATE_SLACK        0.15 /* an index's estimate may fall this far below the bound */
#define EXACT_SLACK            0.1  /* and a candidate's cosine this far (a line's neighbours) */
#define MIN_CANDIDATES         3    /* a pair with fewer is not aligned */
#define MAX_SEGMENTS           256  /* segments between two files */
#define MIN_PROBE              4    /* IVF lists a self-join probes at least */
#define MEMORY_SHARE           0.6  /* of the machine's memory the vectors may take */

/* ---- sets of files' vectors ------------------------------------------------------------------ */

typedef struct vec_file {
    int64_t ext; /* its extraction (-1: a query file not in the database) */
    char *path;
    int64_t first, n; /* its frames in the set */
} vec_file;

typedef struct vec_set {
    int dim;
    vec_file *f;
    int n_f, cap_f;
    int64_t n, cap;
    float *vec;              /* n x dim, unit length */
    double *t;               /* seconds, ascending within a file */
    int64_t *frame;          /* frame index, ascending within a file */
    unsigned char *flat;     /* shows nothing */
    struct ext_slot *by_ext; /* the files in extraction order */
} vec_set;

typedef struct ext_slot {
    int64_t ext;
    int file;
} ext_slot;

static void set_free(vec_set *v)
{
    for (int i = 0; i < v->n_f; i++)
        vfi_free(v->f[i].path);
    vfi_free(v->f);
    vfi_free(v->vec);
    vfi_free(v->t);
    vfi_free(v->frame);
    vfi_free(v->flat);
    vfi_free(v->by_ext);
    memset(v, 0, sizeof(*v));
}

/* Room for n frames more of dim floats; the arrays are sized once from a listing. */
static vf_status set_reserve(vec_set *v, int64_t n, vf_err *err)
{
    int64_t cap = v->n + n;
    if (cap <= v->cap)
        return VF_OK;
    float *vec = vfi_realloc(v->vec, (size_t)cap * (size_t)v->dim * sizeof(float));
    if (vec)
        v->vec = vec;
    double *t = vfi_realloc(v->t, (size_t)cap * sizeof(double));
    if (t)
        v->t = t;
    int64_t *frame = vfi_realloc(v->frame, (size_t)cap * sizeof(int64_t));
    if (frame)
        v->frame = frame;
    unsigned char *flat = vfi_realloc(v->flat, (size_t)cap);
    if (flat)
        v->flat = flat;
    if (!vec || !t || !frame || !flat)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory for %lld vectors of %d floats",
                        (long long)cap, v->dim);
    v->cap = cap;
    return VF_OK;
}

static vf_status set_add_file(vec_set *v, int64_t ext, const char *path, vf_err *err)
{
    vec_file *f = vfi_grow(v->f, &v->cap_f, v->n_f + 1, sizeof(*f));
    if (!f)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    v->f = f;
    f = &v->f[v->n_f];
    *f = (vec_file){ext, vfi_strdup(path), v->n, 0};
    if (!f->path)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    v->n_f++;
    return VF_OK;
}

/* A frame into the set's last file (room reserved). Times are kept ascending: the pipeline
 * stores them so (docs/output.md); a database written otherwise gets its stragglers moved up. */
static void set_add_frame(vec_set *v, int64_t frame, double t, const float *vec)
{
    vec_file *f = &v->f[v->n_f - 1];
    if (f->n && t < v->t[v->n - 1])
        t = v->t[v->n - 1];
    vfi_index_unit(vec, v->dim, v->vec + v->n * v->dim);
    v->t[v->n] = t;
    v->frame[v->n] = frame;
    v->flat[v->n] = 0;
    v->n++;
    f->n++;
}

static int cmp_slot(const void *x, const void *y)
{
    int64_t a = ((const ext_slot *)x)->ext, b = ((const ext_slot *)y)->ext;
    return a < b ? -1 : a > b;
}

/* The extraction-ordered table of the set's files, for set_find. */
static vf_status set_finish(vec_set *v, vf_err *err)
{
    vfi_free(v->by_ext);
    if (!(v->by_ext = vfi_mallocarray((size_t)v->n_f + 1, sizeof(*v->by_ext))))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < v->n_f; i++)
        v->by_ext[i] = (ext_slot){v->f[i].ext, i};
    qsort(v->by_ext, (size_t)v->n_f, sizeof(*v->by_ext), cmp_slot);
    return VF_OK;
}

/* The file of extraction ext in the set, or NULL. */
static const vec_file *set_find(const vec_set *v, int64_t ext)
{
    int lo = 0, hi = v->n_f;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int64_t e = v->by_ext[mid].ext;
        if (e == ext)
            return &v->f[v->by_ext[mid].file];
        if (e < ext)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The position in the set of file f's frame with frame index `frame`, or -1. */
static int64_t set_frame(const vec_set *v, const vec_file *f, int64_t frame)
{
    int64_t lo = f->first, hi = f->first + f->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v->frame[mid] == frame)
            return mid;
        if (v->frame[mid] < frame)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- reading a row's vectors ----------------------------------------------------------------- */

/* A set of extraction ids, sorted, to read: NULL reads every one. */
typedef struct loading {
    vec_set *set;
    const int64_t *want;
    int n_want;
    int64_t cur;
    vf_err *err;
} loading;

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

static int want_one(void *user, int64_t extraction, int64_t frames)
{
    const loading *l = user;
    (void)frames;
    return !l->want ||
           bsearch(&extraction, l->want, (size_t)l->n_want, sizeof(int64_t), cmp_i64) != NULL;
}

static vf_status take_one(void *user, const vf_store_vector *v)
{
    loading *l = user;
    vf_status rc;
    if (v->ref.extraction != l->cur) {
        if ((rc = set_add_file(l->set, v->ref.extraction, v->path, l->err)) < 0)
            return rc;
        l->cur = v->ref.extraction;
    }
    /* more frames than the listing said (a run writing meanwhile): room for as many again */
    if (l->set->n == l->set->cap &&
        (rc = set_reserve(l->set, l->set->n > 1024 ? l->set->n : 1024, l->err)) < 0)
        return rc;
    set_add_frame(l->set, v->ref.frame_index, v->ref.t, v->vec);
    return VF_OK;
}

/* The vectors of the extractions want names (NULL: every done one of the row) into set, once
 * `copies` copies of them (`frames` vectors) are known to fit in memory. */
static vf_status load(vf_store *s, const vfi_held_model *row, const int64_t *want, int n_want,
                      int64_t frames, int copies, vec_set *set, vf_err *err)
{
    double bytes = (double)frames * row->dim * sizeof(float);
    double phys = vfi_mem_usable();
    if (phys > 0 && copies * bytes > MEMORY_SHARE * phys)
        return vfi_fail(err, VF_ERR_NOMEM,
                        "%lld vectors of %d floats (%.1f GB, %d cop%s) are more than this "
                        "machine's memory (%.1f GB) can hold%s",
                        (long long)frames, row->dim, bytes / 1e9, copies, copies > 1 ? "ies" : "y",
                        phys / 1e9,
                        want ? "" : ": name one file (--video) and build an index (vidfeat index)");
    vf_status rc = set_reserve(set, frames, err);
    loading l = {set, want, n_want, -1, err};
    if (rc >= 0)
        rc = vfi_store_vectors(s, row->id, row->f16, row->dim, want_one, take_one, &l, err);
    if (rc >= 0)
        rc = set_finish(set, err);
    return rc;
}

/* ---- frames that show nothing ---------------------------------------------------------------- */

/* Mark the set's frames within FLAT_SIMILARITY of a uniform image's vector (refs, n_refs of
 * them), and zero vectors, as showing nothing; *flat counts them. The refs are searched as an
 * exact index (FAISS compares a batch of frames with all of them at once). */
static vf_status mark_flat(vec_set *v, const float *refs, int n_refs, int64_t *flat, vf_err *err)
{
    vf_ann *ann = NULL;
    int64_t ids[QUERY_BATCH];
    float dist[QUERY_BATCH];
    vf_status rc = VF_OK;
    if (n_refs && (rc = vfi_ann_create("Flat", v->dim, &ann, err)) >= 0) {
        int64_t *ref_ids = vfi_mallocarray((size_t)n_refs, sizeof(int64_t));
        if (!ref_ids)
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        for (int i = 0; rc >= 0 && i < n_refs; i++)
            ref_ids[i] = i;
        if (rc >= 0)
            rc = vfi_ann_add(ann, n_refs, refs, ref_ids, err);
        vfi_free(ref_ids);
    }
    for (int64_t first = 0; rc >= 0 && first < v->n; first += QUERY_BATCH) {
        int64_t n = v->n - first < QUERY_BATCH ? v->n - first : QUERY_BATCH;
        const float *x = v->vec + first * v->dim;
        if (ann && (rc = vfi_ann_search_many(ann, n, x, 1, 0, ids, dist, err)) < 0)
            break;
        for (int64_t i = 0; i < n; i++) {
            int zero = 1; /* a zero vector (the unit scaling leaves it so): nothing at all */
            for (int j = 0; zero && j < v->dim; j++)
                zero = x[i * v->dim + j] == 0.0f;
            /* unit vectors: |a - b|^2 = 2 - 2 cos */
            int is_flat = zero || (ann && ids[i] >= 0 && 1.0f - 0.5f * dist[i] >= FLAT_SIMILARITY);
            v->flat[first + i] = (unsigned char)is_flat;
            *flat += is_flat;
        }
    }
    vfi_ann_free(&ann);
    return rc;
}

static double cosine(const float *x, const float *y, int dim)
{
    return vfi_dot_f(x, y, dim); /* unit vectors */
}

/* ---- the search --------------------------------------------------------------------------------
 */

/* A frame of one file proposing a frame of another: a (in the query set, or the archive's for a
 * self-join) and b, each by extraction, and b's frame by its index until b's vectors are read. */
typedef struct candidate {
    int64_t a_ext, b_ext;
    int64_t a, b; /* positions in their sets (b: the frame index, until resolved) */
    float sim;
} candidate;

typedef struct candidates {
    candidate *v;
    int64_t n, cap;
} candidates;

static int push_candidate(candidates *c, candidate x)
{
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 4096;
        candidate *v = vfi_realloc(c->v, (size_t)cap * sizeof(*v));
        if (!v)
            return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = x;
    return 0;
}

static int cmp_candidate(const void *x, const void *y)
{
    const candidate *a = x, *b = y;
    if (a->a_ext != b->a_ext)
        return a->a_ext < b->a_ext ? -1 : 1;
    if (a->b_ext != b->b_ext)
        return a->b_ext < b->b_ext ? -1 : 1;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}

/* Every query frame (not flat) of qs searched in ix: what another file proposes, its estimate
 * at least `bound`, into c. Where b's vectors are at hand (bs: the archive's set), b is resolved
 * to its position and the exact cosine must reach exact_bound; else b stays a frame index.
 * self (qs is bs, a self-join): each pair kept as lower extraction -> higher. */
static vf_status search_all(vfi_index *ix, const vec_set *qs, const vec_set *bs, int self,
                            int probe, double bound, double exact_bound, candidates *c, vf_err *err)
{
    int64_t batch = QUERY_BATCH;
    float *q = vfi_mallocarray((size_t)batch * (size_t)qs->dim, sizeof(float));
    int64_t *owner = vfi_mallocarray((size_t)batch, sizeof(int64_t)); /* query positions */
    int *file_of = vfi_mallocarray((size_t)batch, sizeof(int));
    vf_store_ref *refs = vfi_mallocarray((size_t)batch * NEIGHBOURS, sizeof(*refs));
    float *sim = vfi_mallocarray((size_t)batch * NEIGHBOURS, sizeof(float));
    vf_status rc =
        q && owner && file_of && refs && sim ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    int fi = 0;
    for (int64_t pos = 0; rc >= 0 && pos < qs->n;) {
        int64_t n = 0;
        for (; pos < qs->n && n < batch; pos++) { /* the next batch of frames not flat */
            while (pos >= qs->f[fi].first + qs->f[fi].n)
                fi++; /* the set's files hold its frames in order */
            if (qs->flat[pos])
                continue;
            memcpy(q + n * qs->dim, qs->vec + pos * qs->dim, (size_t)qs->dim * sizeof(float));
            owner[n] = pos;
            file_of[n++] = fi;
        }
        if (!n)
            break;
        if ((rc = vfi_index_search_many(ix, n, q, NEIGHBOURS, probe, refs, sim, err)) < 0)
            break;
        for (int64_t i = 0; i < n && rc >= 0; i++) {
            const vec_file *a = &qs->f[file_of[i]];
            for (int j = 0; j < NEIGHBOURS; j++) {
                const vf_store_ref *r = &refs[i * NEIGHBOURS + j];
                float s = sim[i * NEIGHBOURS + j];
                if (r->extraction < 0 || r->extraction == a->ext || s < bound)
                    continue;
                candidate x = {a->ext, r->extraction, owner[i], r->frame_index, s};
                /* b's vector at hand (the archive's set): the exact cosine decides, not the
                 * index's estimate (codes of a PCA's dimensions overestimate it) */
                const vec_file *b = bs ? set_find(bs, r->extraction) : NULL;
                int64_t bpos = b ? set_frame(bs, b, r->frame_index) : -1;
                if (bs && (bpos < 0 || bs->flat[bpos] || !strcmp(a->path, b->path)))
                    continue;
                if (bs) {
                    x.sim = (float)cosine(qs->vec + owner[i] * qs->dim, bs->vec + bpos * qs->dim,
                                          qs->dim);
                    if (x.sim < exact_bound)
                        continue;
                    x.b = bpos;
                }
                if (self && b->ext < a->ext)
                    x = (candidate){b->ext, a->ext, bpos, owner[i], x.sim};
                if (push_candidate(c, x) < 0) {
                    rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                    break;
                }
            }
        }
    }
    vfi_free(q);
    vfi_free(owner);
    vfi_free(file_of);
    vfi_free(refs);
    vfi_free(sim);
    return rc;
}

/* ---- the matches -------------------------------------------------------------------------------
 */

typedef struct match_list {
    vf_match *v;
    int n, cap;
} match_list;

static int cmp_by_score(const void *x, const void *y)
{
    const vf_match *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return strcmp(a->b, b->b);
}

static int cmp_by_place(const void *x, const void *y)
{
    const vf_match *a = x, *b = y;
    int c = strcmp(a->a, b->a);
    if (c)
        return c;
    if (a->a_start != b->a_start)
        return a->a_start < b->a_start ? -1 : 1;
    return strcmp(a->b, b->b);
}

static vfi_align_file align_file(const vec_set *v, const vec_file *f)
{
    return (vfi_align_file){f->n, v->t + f->first, v->vec + f->first * v->dim, v->flat + f->first};
}

/* Align each pair of files the sorted candidates name (a in as, b in bs) and collect their
 * segments. */
static vf_status align_pairs(candidate *c, int64_t n, const vec_set *as, const vec_set *bs,
                             const vfi_align_opts *o, match_list *out, int64_t *pairs, vf_err *err)
{
    vfi_segment *seg = vfi_mallocarray(MAX_SEGMENTS, sizeof(*seg));
    vfi_align_hit *hits = vfi_mallocarray((size_t)n + 1, sizeof(*hits));
    vf_status rc = seg && hits ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0, j; rc >= 0 && i < n; i = j) {
        for (j = i; j < n && c[j].a_ext == c[i].a_ext && c[j].b_ext == c[i].b_ext;)
            j++;
        const vec_file *a = c[i].a_ext < 0 ? &as->f[0] : set_find(as, c[i].a_ext);
        const vec_file *b = set_find(bs, c[i].b_ext);
        if (!a || !b || j - i < MIN_CANDIDATES || !strcmp(a->path, b->path))
            continue;
        int64_t m = 0;
        for (int64_t k = i; k < j; k++)
            if (k == i || c[k].a != c[k - 1].a || c[k].b != c[k - 1].b) /* once each */
                hits[m++] = (vfi_align_hit){c[k].a - a->first, c[k].b - b->first, c[k].sim};
        vfi_align_file fa = align_file(as, a), fb = align_file(bs, b);
        int n_seg = 0;
        (*pairs)++;
        if ((rc = vfi_align(&fa, &fb, hits, m, o, seg, MAX_SEGMENTS, &n_seg, err)) < 0)
            break;
        for (int k = 0; k < n_seg; k++) {
            vf_match *grown = vfi_grow(out->v, &out->cap, out->n + 1, sizeof(*grown));
            if (!grown) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                break;
            }
            out->v = grown;
            out->v[out->n++] = (vf_match){a->path,
                                          b->path,
                                          seg[k].a_start,
                                          seg[k].a_end,
                                          seg[k].b_start,
                                          seg[k].b_end,
                                          seg[k].score,
                                          seg[k].speed,
                                          seg[k].frames,
                                          a->n ? as->t[a->first + a->n - 1] : 0.0,
                                          b->n ? bs->t[b->first + b->n - 1] : 0.0};
        }
    }
    vfi_free(seg);
    vfi_free(hits);
    return rc;
}

/* The distinct b extractions the candidates name, sorted, into *out. */
static vf_status b_files(const candidates *c, int64_t **out, int *n, vf_err *err)
{
    *n = 0;
    *out = vfi_mallocarray((size_t)c->n + 1, sizeof(int64_t));
    if (!*out)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < c->n; i++)
        (*out)[i] = c->v[i].b_ext;
    qsort(*out, (size_t)c->n, sizeof(int64_t), cmp_i64);
    for (int64_t i = 0; i < c->n; i++)
        if (!*n || (*out)[*n - 1] != (*out)[i])
            (*out)[(*n)++] = (*out)[i];
    return VF_OK;
}

/* The query file's frames: its stored vectors when the database holds it, else extracted. */
static vf_status query_set(vf_store *s, const vf_config *cfg, const vfi_held_model *row,
                           const char *video, vec_set *qs, vf_err *err)
{
    float *probe = vfi_mallocarray((size_t)row->dim, sizeof(float));
    vf_store_ref ref;
    int found = 0;
    vf_status rc = probe ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0)
        rc = vfi_store_vector_at(s, row->id, row->f16, video, 0, 0.0, probe, row->dim, &ref, &found,
                                 err);
    vfi_free(probe);
    if (rc < 0)
        return rc;
    if (found) { /* the file's extraction, read back */
        rc = load(s, row, &ref.extraction, 1, 0, 1, qs, err);
        if (rc >= 0 && qs->n_f != 1)
            rc = vfi_fail(err, VF_ERR_STORE, "%s: its vectors are gone from the database", video);
        return rc;
    }
    vfi_query_frames f;
    if ((rc = vfi_query_extract(cfg, row, video, 0.0, 0, &f, err)) < 0)
        return rc;
    if ((rc = set_reserve(qs, f.n, err)) >= 0 && (rc = set_add_file(qs, -1, video, err)) >= 0) {
        for (int64_t i = 0; i < f.n; i++)
            set_add_frame(qs, f.frame_index[i], f.t[i], f.vec + i * f.dim);
        rc = set_finish(qs, err);
    }
    vfi_query_frames_free(&f);
    return rc;
}

/* An exact index in memory of the archive's vectors (arch), beside them: twice their size. */
static vf_status exact_index(const vfi_held_model *row, const vec_set *arch, vfi_index **ix,
                             vf_err *err)
{
    vf_store_ref *ids = vfi_mallocarray((size_t)arch->n + 1, sizeof(*ids));
    if (!ids)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < arch->n_f; i++)
        for (int64_t k = arch->f[i].first; k < arch->f[i].first + arch->f[i].n; k++)
            ids[k] = (vf_store_ref){arch->f[i].ext, arch->frame[k], 0, 0.0};
    vf_status rc = vfi_index_memory(row->dim, arch->n, arch->vec, ids, ix, err);
    vfi_free(ids);
    return rc;
}

/* The candidates' b frames, read as the files they name (b), from their indexes to their
 * positions in b, with exact cosines; those under `least`, or showing nothing, dropped. */
static void exact_b(candidates *c, const vec_set *qs, const vec_set *b, double least)
{
    int64_t kept = 0;
    for (int64_t i = 0; i < c->n; i++) {
        const vec_file *f = set_find(b, c->v[i].b_ext);
        int64_t pos = f ? set_frame(b, f, c->v[i].b) : -1;
        if (pos < 0 || b->flat[pos])
            continue;
        c->v[i].b = pos;
        c->v[i].sim = (float)cosine(qs->vec + c->v[i].a * qs->dim, b->vec + pos * b->dim, b->dim);
        if (c->v[i].sim >= least)
            c->v[kept++] = c->v[i];
    }
    c->n = kept;
}

vf_status vf_db_matches(const char *db_path, const vf_config *cfg, const vf_match_query *q,
                        void (*match)(void *user, const vf_match *m), void *user, char *errbuf,
                        size_t errbuf_size)
{
    vf_err err = {0};
    vf_status rc = VF_OK;
    vf_store *s = NULL;
    vfi_held rows = {0};
    vfi_index *ix = NULL;
    vec_set qs = {0}, arch = {0}, bs = {0};
    vfi_held_extraction *all = NULL; /* the row's done extractions */
    int n_all = 0;
    int64_t all_vectors = 0;
    candidates c = {0};
    match_list out = {0};
    float *refs = NULL;
    int64_t *want = NULL;
    vf_match_stats st;
    memset(&st, 0, sizeof(st));
    snprintf(st.search, sizeof(st.search), "exact");
    if (!db_path || !cfg || !q || !match || q->min_duration < 0 || !isfinite(q->min_duration) ||
        !(q->min_similarity >= 0 && q->min_similarity < 1) || q->probe < 0) {
        rc = vfi_fail(&err, VF_ERR_INVALID,
                      "matches: a database, a match callback, a minimum duration >= 0 and a "
                      "minimum similarity in [0, 1) are needed");
        goto done;
    }
    vfi_align_opts o = {0, q->min_similarity > 0 ? q->min_similarity : DEFAULT_MIN_SIMILARITY,
                        q->min_duration > 0 ? q->min_duration : DEFAULT_MIN_DURATION};
    const vfi_held_model *row = NULL;
    if ((rc = vfi_store_open(db_path, VF_STORE_READ, &s, &err)) < 0 ||
        (rc = vfi_held_read(s, &rows, &err)) < 0 ||
        (rc = vfi_held_choose(&rows, cfg, 0, db_path, &row, &err)) < 0)
        goto done;
    vfi_held_warn_weights(row, db_path);
    snprintf(st.weights, sizeof(st.weights), "%s", row->weights ? row->weights : "");
    o.dim = qs.dim = arch.dim = bs.dim = row->dim;
    if ((rc = vfi_held_extractions(s, row, &all, &n_all, &all_vectors, &err)) < 0)
        goto done;
    /* where the candidates come from: the index file, else an exact index of the archive (in
     * memory beside the archive's vectors: twice their size) */
    if (!q->exact && (rc = vfi_index_find(s, row, q->index, &ix, &err)) < 0)
        goto done;
    if (ix) {
        snprintf(st.search, sizeof(st.search), "index %s", vfi_index_kind(ix));
        snprintf(st.index, sizeof(st.index), "%s", vfi_index_path(ix));
    }
    /* the query: one file, or the whole archive */
    if (q->video)
        rc = query_set(s, cfg, row, q->video, &qs, &err);
    if (rc >= 0 && (!q->video || !ix))
        rc = load(s, row, NULL, 0, all_vectors, ix ? 1 : 2, &arch, &err);
    if (rc < 0)
        goto done;
    if (!ix && (rc = exact_index(row, &arch, &ix, &err)) < 0)
        goto done;
    /* frames that show nothing, by the model's own vectors of uniform images */
    int n_refs = 0;
    vf_err why = {0};
    if (vfi_query_flat_refs(cfg, row, &refs, &n_refs, &why) >= 0) {
        st.flat_known = 1;
    } else {
        vfi_log(VF_LOG_WARNING, "matches",
                "%s: frames that show nothing (black, uniform) count as evidence: telling them "
                "needs the model (--model names its file): %s",
                row->name, why.msg);
    }
    int64_t ignored = 0;
    if ((rc = mark_flat(q->video ? &qs : &arch, refs, n_refs, &st.flat, &err)) < 0 ||
        (q->video && arch.n && (rc = mark_flat(&arch, refs, n_refs, &ignored, &err)) < 0))
        goto done;
    const vec_set *queries = q->video ? &qs : &arch;
    st.frames = queries->n;
    double t0 = vfi_now_s();
    /* a copy's frames are far nearer each other than anything else is: an IVF's nearest lists
     * hold them, and a quarter of the lists a top-10 search probes finds the same copies in a
     * quarter of the time (scripts/bench-matches.py) */
    int probe = q->probe;
    if (!probe && strstr(vfi_index_kind(ix), "IVF") && vfi_index_probe(ix) >= 4 * MIN_PROBE)
        probe = vfi_index_probe(ix) / 4;
    if ((rc = search_all(ix, queries, arch.n ? &arch : NULL, !q->video, probe,
                         o.min_similarity - CANDIDATE_SLACK, o.min_similarity - EXACT_SLACK, &c,
                         &err)) < 0)
        goto done;
    st.search_ms = (vfi_now_s() - t0) * 1e3;
    t0 = vfi_now_s();
    /* b's vectors: the archive's when read, else the files the candidates name */
    const vec_set *b = &arch;
    if (!arch.n && c.n) {
        int n_want = 0;
        if ((rc = b_files(&c, &want, &n_want, &err)) < 0)
            goto done;
        int64_t frames = 0;
        for (int i = 0; i < n_all; i++)
            if (bsearch(&all[i].id, want, (size_t)n_want, sizeof(int64_t), cmp_i64))
                frames += all[i].vectors;
        if ((rc = load(s, row, want, n_want, frames, 1, &bs, &err)) < 0)
            goto done;
        if ((rc = mark_flat(&bs, refs, n_refs, &ignored, &err)) < 0)
            goto done;
        b = &bs;
    }
    if (b == &bs)
        exact_b(&c, &qs, &bs, o.min_similarity - EXACT_SLACK);
    if (c.n > 1) /* none: c.v may be NULL, which qsort may not be given */
        qsort(c.v, (size_t)c.n, sizeof(*c.v), cmp_candidate);
    if ((rc = align_pairs(c.v, c.n, queries, b, &o, &out, &st.pairs, &err)) < 0)
        goto done;
    st.align_ms = (vfi_now_s() - t0) * 1e3;
    if (out.n > 1)
        qsort(out.v, (size_t)out.n, sizeof(*out.v), q->video ? cmp_by_score : cmp_by_place);
    for (int i = 0; i < out.n; i++)
        match(user, &out.v[i]);
    if (q->stats)
        *q->stats = st;
done:
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    vfi_free(out.v);
    vfi_free(c.v);
    vfi_free(refs);
    vfi_free(want);
    vfi_free(all);
    set_free(&qs);
    set_free(&arch);
    set_free(&bs);
    vfi_index_free(&ix);
    vfi_held_free(&rows);
    vfi_store_close(&s);
    return rc;
}
