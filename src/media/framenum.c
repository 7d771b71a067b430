/*
 * framenum.c - frame numbers in presentation order from the packets read (see framenum.h).
 *
 * The pending times are kept sorted in one array: packets arrive nearly in presentation order
 * (only a reordering window apart), so an insertion moves a few entries, and numbering a frame
 * is a binary search followed by dropping a prefix (advancing head).
 */
#include "media/framenum.h"

#include <string.h>

#include "core/mem.h"

void vfi_framenum_init(vf_framenum *l)
{
    memset(l, 0, sizeof(*l));
}

void vfi_framenum_clear(vf_framenum *l)
{
    vfi_free(l->times);
    vfi_framenum_init(l);
}

/* Entries of times[head .. head + n) before pts (strictly, or at or before it when incl). */
static size_t count_before(const vf_framenum *l, int64_t pts, int incl)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t v = l->times[l->head + mid];
        if (v < pts || (incl && v == pts))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for one more entry at the end of the window. */
static vf_status make_room(vf_framenum *l)
{
    if (l->n >= FRAMENUM_MAX_PENDING) { /* the earliest is taken as before every later frame */
        l->head++;
        l->n--;
        l->behind++;
    }
    if (l->head + l->n < l->cap)
        return VF_OK;
    if (l->head > 0 && l->n <= l->cap / 2) { /* slide the window back instead of growing */
        memmove(l->times, l->times + l->head, l->n * sizeof(*l->times));
        l->head = 0;
        return VF_OK;
    }
    size_t cap = l->cap ? l->cap * 2 : 64;
    int64_t *t = vfi_mallocarray(cap, sizeof(*t));
    if (!t)
        return VF_ERR_NOMEM;
    if (l->n)
        memcpy(t, l->times + l->head, l->n * sizeof(*t));
    vfi_free(l->times);
    l->times = t;
    l->cap = cap;
    l->head = 0;
    return VF_OK;
}

vf_status vfi_framenum_add(vf_framenum *l, int64_t pts)
{
    vf_status rc = make_room(l);
    if (rc < 0)
        return rc;
    int64_t *w = l->times + l->head;
    size_t at = l->n;
    while (at > 0 && w[at - 1] > pts) /* a few steps back at most: a reordering window */
        at--;
    memmove(w + at + 1, w + at, (l->n - at) * sizeof(*w));
    w[at] = pts;
    l->n++;
    l->packets++;
    return VF_OK;
}

void vfi_framenum_skip(vf_framenum *l, int64_t n)
{
    l->behind += n;
    l->packets += n;
}

int64_t vfi_framenum_number(vf_framenum *l, int64_t pts)
{
    int64_t number = l->behind + (int64_t)count_before(l, pts, 0);
    size_t done = count_before(l, pts, 1);
    l->behind += (int64_t)done;
    l->head += done;
    l->n -= done;
    return number;
}
