/*
 * queue.h - a bounded blocking queue of pointers, the only way pipeline stages talk. It knows
 * nothing about what it carries. Modelled on FFmpeg's fftools thread_queue: close from the
 * producer drains normally; cancel from anyone wakes every waiter and fails all further calls.
 */
#ifndef VIDFEAT_QUEUE_H
#define VIDFEAT_QUEUE_H

#include <stddef.h>

#include "vidfeat.h"

typedef struct vf_queue vf_queue;

vf_status vfi_queue_create(size_t capacity, vf_queue **out);
void vfi_queue_free(vf_queue **pq);
/* Blocks while full. VF_OK: the queue now owns item. VF_ERR_CANCELLED (cancelled) or
 * VF_ERR_INVALID (closed): the caller still owns it. */
vf_status vfi_queue_push(vf_queue *q, void *item);
/* Blocks while empty. VF_OK: *item is the caller's. VF_EOF: closed and drained.
 * VF_ERR_CANCELLED: the pipeline is stopping. */
vf_status vfi_queue_pop(vf_queue *q, void **item);
/* Producer: no more items; consumers get VF_EOF once the queue is drained. */
void vfi_queue_close(vf_queue *q);
/* Anyone, any thread: wake all waiters; pushes and pops fail with VF_ERR_CANCELLED from now on.
 * Items still inside stay there (the owner of the pools frees them). */
void vfi_queue_cancel(vf_queue *q);

#endif /* VIDFEAT_QUEUE_H */
