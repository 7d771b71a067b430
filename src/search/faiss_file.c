/*
 * faiss_file.c - FAISS's index file format walked before FAISS reads it (faiss_file.h).
 *
 * The layout is FAISS's (impl/index_read.cpp, the same from 1.7 on for these kinds), in the
 * machine's byte order: an index is a four-character code and its fields; a vector is a 64-bit
 * count and that many elements. The walk follows the kinds vidfeat writes and skips over their
 * arrays, reading only the counts it must add up (an IVF's list lengths).
 */
#include "search/faiss_file.h"

#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define MAX_DEPTH      4 /* id map > transform > IVF > its quantizer is 3 */
#define MAX_TRANSFORMS 8 /* vidfeat makes one (a PCA) */
#define MAX_DIM        65536
#define SQ_KINDS       7 /* ScalarQuantizer's QT_8bit .. QT_6bit */
#define PQ_BITS        8 /* the only codeword size vidfeat makes (and searches quickly) */

typedef struct {
    FILE *f;
    uint64_t left; /* bytes from the position to the end of the file */
    int io;        /* a read failed where the file said there were bytes */
    char why[96];  /* the first thing found wrong */
} walk;

/* What an index's header and body said: enough for the index around it to check. */
typedef struct {
    uint32_t kind; /* its four-character code */
    int32_t d;
    int64_t ntotal;
} node;

static uint32_t code(const char *s)
{
    return (uint32_t)(unsigned char)s[0] | (uint32_t)(unsigned char)s[1] << 8 |
           (uint32_t)(unsigned char)s[2] << 16 | (uint32_t)(unsigned char)s[3] << 24;
}

static int is(uint32_t h, const char *s)
{
    return h == code(s);
}

static int bad(walk *w, const char *why)
{
    if (!w->why[0])
        snprintf(w->why, sizeof(w->why), "%s", why);
    return -1;
}

static int take(walk *w, void *p, size_t n)
{
    if (n > w->left)
        return bad(w, "it ends before its last part");
    if (fread(p, 1, n, w->f) != n) {
        w->io = 1;
        return bad(w, "it could not be read");
    }
    w->left -= n;
    return 0;
}

static int skip(walk *w, uint64_t n)
{
    if (n > w->left)
        return bad(w, "it ends before its last part");
    if (n && fseeko(w->f, (off_t)n, SEEK_CUR) != 0) {
        w->io = 1;
        return bad(w, "it could not be read");
    }
    w->left -= n;
    return 0;
}

static int u64(walk *w, uint64_t *v)
{
    return take(w, v, sizeof(*v));
}

static int i32(walk *w, int32_t *v)
{
    return take(w, v, sizeof(*v));
}

/* A bool: FAISS copies the byte into a C++ bool, where anything but 0 or 1 is undefined. */
static int flag(walk *w)
{
    unsigned char b;
    if (take(w, &b, 1) < 0)
        return -1;
    return b > 1 ? bad(w, "a flag that is neither true nor false") : 0;
}

/* A vector of elements of elem bytes, skipped: its count (*n) must fit in what is left, since
 * FAISS allocates it before reading. */
static int vector(walk *w, uint64_t elem, uint64_t *n)
{
    uint64_t count;
    if (u64(w, &count) < 0)
        return -1;
    if (count > w->left / elem)
        return bad(w, "an array longer than the file");
    if (n)
        *n = count;
    return skip(w, count * elem);
}

/* Index::d, ntotal, two unused counts, is_trained, the metric (L2 or inner product: others are
 * followed by an argument, and vidfeat searches neither). */
static int header(walk *w, node *n)
{
    int32_t metric;
    if (i32(w, &n->d) < 0 || take(w, &n->ntotal, sizeof(n->ntotal)) < 0 || skip(w, 16) < 0 ||
        flag(w) < 0 || i32(w, &metric) < 0)
        return -1;
    if (n->d < 1 || n->d > MAX_DIM || n->ntotal < 0)
        return bad(w, "an index of impossible sizes");
    if (metric != 0 && metric != 1)
        return bad(w, "an index measuring distance in a way vidfeat does not");
    return 0;
}

static int is_flat(uint32_t h)
{
    return is(h, "IxF2") || is(h, "IxFI");
}

/* A linear transform (PCA, random rotation, plain matrix): its parameters, matrix and bias. */
static int transform(walk *w)
{
    uint32_t h;
    int32_t d_in, d_out;
    if (take(w, &h, sizeof(h)) < 0)
        return -1;
    if (is(h, "Pcam") || is(h, "PcAm") || is(h, "PCAm")) {
        /* eigen_power (and epsilon), random_rotation (and the int balanced_bins), the mean,
         * eigenvalues and matrix */
        if (skip(w, is(h, "Pcam") ? 8 : 4) < 0 || flag(w) < 0 ||
            skip(w, is(h, "PCAm") ? 0 : 4) < 0 || vector(w, 4, NULL) < 0 ||
            vector(w, 4, NULL) < 0 || vector(w, 4, NULL) < 0)
            return -1;
    } else if (!is(h, "LTra") && !is(h, "rrot")) {
        return bad(w, "a transform of a kind vidfeat does not make");
    }
    if (flag(w) < 0 || vector(w, 4, NULL) < 0 || vector(w, 4, NULL) < 0 || i32(w, &d_in) < 0 ||
        i32(w, &d_out) < 0 || flag(w) < 0)
        return -1;
    return d_in < 1 || d_in > MAX_DIM || d_out < 1 || d_out > MAX_DIM
               ? bad(w, "a transform of impossible sizes")
               : 0;
}

/* An IVF's lists (ArrayInvertedLists): nlist lengths, either all of them or (index, length)
 * pairs for the lists that hold something, then each list's codes and ids. FAISS sizes every
 * list before reading one: their lengths must add up to no more than the file holds. */
static int lists(walk *w, uint64_t nlist)
{
    uint32_t h, type;
    uint64_t n, code_size, count, total = 0;
    if (take(w, &h, sizeof(h)) < 0 || u64(w, &n) < 0 || u64(w, &code_size) < 0 ||
        take(w, &type, sizeof(type)) < 0 || u64(w, &count) < 0)
        return -1;
    if (!is(h, "ilar") || n != nlist)
        return bad(w, "an IVF index whose lists are not stored with it");
    int sparse = is(type, "sprs");
    if ((!sparse && !is(type, "full")) || count > w->left / 8 ||
        (sparse ? count % 2 != 0 || count / 2 > nlist : count != nlist))
        return bad(w, "an IVF index whose list lengths do not match its lists");
    uint64_t per = code_size + 8; /* a vector's code and id */
    if (code_size > w->left)
        return bad(w, "an IVF index of impossible sizes");
    uint64_t next = 0; /* sparse: the lowest list index the next pair may name */
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len;
        if (sparse) {
            uint64_t at;
            if (u64(w, &at) < 0)
                return -1;
            if (at < next || at >= nlist)
                return bad(w, "an IVF index whose list lengths do not match its lists");
            next = at + 1;
            i++;
        }
        if (u64(w, &len) < 0)
            return -1;
        if (len > w->left / per || (total += len * per) > w->left)
            return bad(w, "an IVF index whose lists are longer than the file");
    }
    return skip(w, total);
}

static int index_at(walk *w, int depth, node *n);

/* What every IVF starts with: its header, the number of lists, nprobe, the quantizer (a flat
 * index of the lists' centroids) and a map from ids to lists. */
static int ivf_header(walk *w, int depth, node *n, uint64_t *nlist)
{
    uint64_t nprobe;
    node q;
    unsigned char map;
    if (header(w, n) < 0 || u64(w, nlist) < 0 || u64(w, &nprobe) < 0 ||
        index_at(w, depth + 1, &q) < 0)
        return -1;
    if (!is_flat(q.kind) || q.d != n->d || (uint64_t)q.ntotal != *nlist || *nlist < 1)
        return bad(w, "an IVF index of inconsistent sizes");
    if (take(w, &map, 1) < 0)
        return -1;
    if (map > 2) /* none, array, hash table */
        return bad(w, "an IVF index with a map of an unknown kind");
    return vector(w, 8, NULL) < 0 || (map == 2 && vector(w, 16, NULL) < 0) ? -1 : 0;
}

/* IVF-PQ's product quantizer: dimension, pieces, bits a piece, codebooks. FAISS divides the
 * dimension by the pieces and sizes the codebooks from the bits before reading them. */
static int product_quantizer(walk *w, int32_t d)
{
    uint64_t pd, m, bits, n;
    if (u64(w, &pd) < 0 || u64(w, &m) < 0 || u64(w, &bits) < 0)
        return -1;
    if (pd != (uint64_t)d || m < 1 || pd % m != 0 || bits != PQ_BITS ||
        pd > w->left / (4u << PQ_BITS))
        return bad(w, "an IVF-PQ index whose codebooks do not match its codes");
    if (vector(w, 4, &n) < 0)
        return -1;
    return n != pd << PQ_BITS ? bad(w, "an IVF-PQ index whose codebooks do not match its codes")
                              : 0;
}

/* IVF-SQ's scalar quantizer: kind, range statistic and its argument, dimension, code size,
 * trained ranges. */
static int scalar_quantizer(walk *w, int32_t d)
{
    int32_t kind, rangestat;
    uint64_t sd, code_size;
    if (i32(w, &kind) < 0 || i32(w, &rangestat) < 0 || skip(w, 4) < 0 || u64(w, &sd) < 0 ||
        u64(w, &code_size) < 0 || vector(w, 4, NULL) < 0)
        return -1;
    return kind < 0 || kind >= SQ_KINDS || sd != (uint64_t)d
               ? bad(w, "an IVF-SQ index whose quantizer does not match its codes")
               : 0;
}

/* One index and what it holds (an id map's, a transform's, an HNSW graph's, an IVF's quantizer
 * inside it), as FAISS's read_index reads it. */
static int index_at(walk *w, int depth, node *n)
{
    uint64_t count, nlist;
    int32_t nt;
    node in;
    if (depth > MAX_DEPTH)
        return bad(w, "indexes nested deeper than vidfeat makes them");
    if (take(w, &n->kind, sizeof(n->kind)) < 0)
        return -1;
    uint32_t h = n->kind;
    if (is_flat(h)) {
        /* the vectors, counted in 4-byte units */
        if (header(w, n) < 0 || vector(w, 4, &count) < 0)
            return -1;
        if ((uint64_t)n->ntotal > count / (uint64_t)n->d ||
            count != (uint64_t)n->ntotal * (uint64_t)n->d)
            return bad(w, "a flat index whose vectors do not fill it");
        return 0;
    }
    if (is(h, "IxMp") || is(h, "IxM2")) {
        if (header(w, n) < 0 || index_at(w, depth + 1, &in) < 0 || vector(w, 8, &count) < 0)
            return -1;
        return count != (uint64_t)n->ntotal ? bad(w, "an id map that does not match its index") : 0;
    }
    if (is(h, "IxPT")) {
        if (header(w, n) < 0 || i32(w, &nt) < 0)
            return -1;
        if (nt < 0 || nt > MAX_TRANSFORMS)
            return bad(w, "more transforms than vidfeat makes");
        for (int32_t i = 0; i < nt; i++)
            if (transform(w) < 0)
                return -1;
        return index_at(w, depth + 1, &in);
    }
    if (is(h, "IHNf")) {
        /* level probabilities, neighbours a level, levels, offsets, neighbours; entry point,
         * top level, efConstruction, efSearch, upper_beam; then the vectors */
        if (header(w, n) < 0 || vector(w, 8, NULL) < 0 || vector(w, 4, NULL) < 0 ||
            vector(w, 4, NULL) < 0 || vector(w, 8, NULL) < 0 || vector(w, 4, NULL) < 0 ||
            skip(w, 20) < 0 || index_at(w, depth + 1, &in) < 0)
            return -1;
        return is_flat(in.kind) ? 0 : bad(w, "an HNSW index whose vectors are not flat");
    }
    if (is(h, "IwFl"))
        return ivf_header(w, depth, n, &nlist) < 0 ? -1 : lists(w, nlist);
    if (is(h, "IwSQ") || is(h, "IwSq")) {
        if (ivf_header(w, depth, n, &nlist) < 0 || scalar_quantizer(w, n->d) < 0 ||
            skip(w, 8) < 0 || (is(h, "IwSq") && flag(w) < 0))
            return -1;
        return lists(w, nlist);
    }
    if (is(h, "IwPQ")) {
        if (ivf_header(w, depth, n, &nlist) < 0 || flag(w) < 0 || skip(w, 8) < 0 ||
            product_quantizer(w, n->d) < 0)
            return -1;
        return lists(w, nlist);
    }
    return bad(w, "an index of a kind vidfeat does not make");
}

vf_status vfi_faiss_file_check(FILE *f, vf_err *err)
{
    off_t start = ftello(f), end = -1;
    if (start < 0 || fseeko(f, 0, SEEK_END) != 0 || (end = ftello(f)) < start ||
        fseeko(f, start, SEEK_SET) != 0)
        return vfi_fail(err, VF_ERR_IO, "the index could not be positioned in its file");
    walk w = {.f = f, .left = (uint64_t)(end - start)};
    node top;
    int rc = index_at(&w, 0, &top);
    if (fseeko(f, start, SEEK_SET) != 0)
        return vfi_fail(err, VF_ERR_IO, "the index could not be positioned in its file");
    if (rc < 0)
        return vfi_fail(err, w.io ? VF_ERR_IO : VF_ERR_INVALID, "not an index vidfeat made: %s",
                        w.why);
    return VF_OK;
}
