/*
 * arena.c - first-fit placement of buffers by lifetime (see arena.h).
 */
#include "core/arena.h"

#include "core/mem.h"

static size_t round_up(size_t v, size_t align)
{
    return (v + align - 1) / align * align;
}

vf_status vfi_arena_place(vfi_arena_item *items, int n, size_t align, size_t *total)
{
    *total = 0;
    if (n <= 0)
        return VF_OK;
    int *order = vfi_mallocarray((size_t)n, sizeof(int));
    if (!order)
        return VF_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        order[i] = i;
    /* insertion sort by size, descending (a few hundred buffers) */
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i;
        while (j > 0 && items[order[j - 1]].size < items[v].size) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    for (int k = 0; k < n; k++) {
        vfi_arena_item *d = &items[order[k]];
        size_t size = round_up(d->size, align), at = 0;
        int moved = 1;
        while (moved) {
            moved = 0;
            for (int j = 0; j < k; j++) {
                const vfi_arena_item *o = &items[order[j]];
                if (o->last < d->first || d->last < o->first)
                    continue; /* never alive together */
                size_t osize = round_up(o->size, align);
                if (at < o->offset + osize && o->offset < at + size) {
                    at = o->offset + osize;
                    moved = 1;
                }
            }
        }
        d->offset = at;
        if (at + size > *total)
            *total = at + size;
    }
    vfi_free(order);
    return VF_OK;
}
