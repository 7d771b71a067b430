/*
 * rank.c - see rank.h.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "store/rank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/vecmath.h"

typedef struct scored {
    double sim;
    vf_store_ref ref;
} scored;

struct vf_rank {
    float *q;
    double qn; /* |q| */
    int dim, k, n;
    scored *best; /* n of k, best first */
};

vf_rank *vfi_rank_create(const float *q, int dim, int k)
{
    vf_rank *r = vfi_calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->dim = dim > 0 ? dim : 0;
    r->k = k > 0 ? k : 1;
    r->q = vfi_mallocarray((size_t)(r->dim ? r->dim : 1), sizeof(float));
    r->best = vfi_mallocarray((size_t)r->k, sizeof(scored));
    if (!r->q || !r->best) {
        vfi_rank_free(&r);
        return NULL;
    }
    memcpy(r->q, q, (size_t)r->dim * sizeof(float));
    r->qn = sqrt(vfi_dot(q, q, r->dim));
    return r;
}

/* Does a rank before b (higher similarity; ties by extraction, then frame)? */
static int ranks_before(const scored *a, const scored *b)
{
    if (a->sim != b->sim)
        return a->sim > b->sim;
    if (a->ref.extraction != b->ref.extraction)
        return a->ref.extraction < b->ref.extraction;
    return a->ref.frame_index < b->ref.frame_index;
}

void vfi_rank_offer(vf_rank *r, const vf_store_ref *ref, const float *v)
{
    double dot = vfi_dot(r->q, v, r->dim), vv = vfi_dot(v, v, r->dim);
    scored c = {r->qn > 0.0 && vv > 0.0 ? dot / (r->qn * sqrt(vv)) : 0.0, *ref};
    if (r->n == r->k && !ranks_before(&c, &r->best[r->k - 1]))
        return;
    int at = r->n < r->k ? r->n++ : r->k - 1; /* insertion into the sorted list */
    while (at > 0 && ranks_before(&c, &r->best[at - 1])) {
        r->best[at] = r->best[at - 1];
        at--;
    }
    r->best[at] = c;
}

int vfi_rank_count(const vf_rank *r)
{
    return r->n;
}

const vf_store_ref *vfi_rank_get(const vf_rank *r, int i, double *similarity)
{
    *similarity = r->best[i].sim;
    return &r->best[i].ref;
}

void vfi_rank_free(vf_rank **pr)
{
    vf_rank *r = pr ? *pr : NULL;
    if (!r)
        return;
    vfi_free(r->q);
    vfi_free(r->best);
    vfi_free(r);
    *pr = NULL;
}

int vfi_rank_same_file(const char *stored, const char *path, const char *name, const char *want)
{
    if ((name && !strcmp(stored, name)) || !strcmp(stored, path))
        return 1;
    if (!want)
        return 0;
    char *real = realpath(stored, NULL);
    int same = real && !strcmp(real, want);
    free(real); /* realpath's allocation */
    return same;
}
