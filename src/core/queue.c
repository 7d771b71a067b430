/*
 * queue.c - one mutex and two condition variables around a ring of pointers. Any thread.
 */
#include "core/queue.h"

#include <pthread.h>

#include "core/mem.h"

struct vf_queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    void **ring;
    size_t capacity, head, count;
    int closed, cancelled;
};

vf_status vfi_queue_create(size_t capacity, vf_queue **out)
{
    if (capacity < 1)
        return VF_ERR_INVALID;
    vf_queue *q = vfi_calloc(1, sizeof(*q));
    if (!q)
        return VF_ERR_NOMEM;
    q->ring = vfi_mallocarray(capacity, sizeof(void *));
    if (!q->ring) {
        vfi_free(q);
        return VF_ERR_NOMEM;
    }
    q->capacity = capacity;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    *out = q;
    return VF_OK;
}

void vfi_queue_free(vf_queue **pq)
{
    vf_queue *q = pq ? *pq : NULL;
    if (!q)
        return;
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    vfi_free(q->ring);
    vfi_free(q);
    *pq = NULL;
}

vf_status vfi_queue_push(vf_queue *q, void *item)
{
    vf_status rc = VF_OK;
    pthread_mutex_lock(&q->lock);
    while (q->count == q->capacity && !q->cancelled && !q->closed)
        pthread_cond_wait(&q->not_full, &q->lock);
    if (q->cancelled) {
        rc = VF_ERR_CANCELLED;
    } else if (q->closed) {
        rc = VF_ERR_INVALID;
    } else {
        q->ring[(q->head + q->count) % q->capacity] = item;
        q->count++;
        pthread_cond_signal(&q->not_empty);
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

vf_status vfi_queue_pop(vf_queue *q, void **item)
{
    vf_status rc = VF_OK;
    pthread_mutex_lock(&q->lock);
    while (q->count == 0 && !q->cancelled && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->lock);
    if (q->cancelled) {
        rc = VF_ERR_CANCELLED;
    } else if (q->count == 0) {
        rc = VF_EOF;
    } else {
        *item = q->ring[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

void vfi_queue_close(vf_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}

void vfi_queue_cancel(vf_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->cancelled = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}
