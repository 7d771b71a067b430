/*
 * arena.h - packing activation buffers into one allocation by lifetime, for every backend.
 *
 * Each buffer is alive from the step that first touches it to the step that last does. Buffers
 * whose lifetimes never overlap may share addresses, so the arena ends up close to the peak of
 * simultaneously live activations rather than their sum.
 */
#ifndef VIDFEAT_ARENA_H
#define VIDFEAT_ARENA_H

#include <stddef.h>

#include "core/status.h"

typedef struct vfi_arena_item {
    size_t size;     /* bytes */
    int first, last; /* steps that touch it (inclusive) */
    size_t offset;   /* out: where it lives in the arena, a multiple of the alignment */
} vfi_arena_item;

/* Place the items: largest first, each at the lowest aligned offset that overlaps no placed
 * item alive at the same time. *total receives the arena size. VF_ERR_NOMEM only. */
vf_status vfi_arena_place(vfi_arena_item *items, int n, size_t align, size_t *total);

#endif /* VIDFEAT_ARENA_H */
