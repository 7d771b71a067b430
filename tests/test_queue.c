/*
 * test_queue.c - the bounded queue: order, blocking when full, close drains then EOF, cancel
 * wakes every waiter, and a many-producer many-consumer stress run that must deliver every item
 * exactly once (run under TSan in CI).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "queue.h"

#define N_ITEMS     20000
#define N_PRODUCERS 3
#define N_CONSUMERS 3

static vf_queue *q;
static int seen[N_ITEMS * N_PRODUCERS];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void *producer(void *arg)
{
    intptr_t base = (intptr_t)arg * N_ITEMS;
    for (intptr_t i = 0; i < N_ITEMS; i++)
        CHECK(vfi_queue_push(q, (void *)(base + i + 1)) == VF_OK);
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    void *it;
    while (vfi_queue_pop(q, &it) == VF_OK) {
        pthread_mutex_lock(&seen_lock);
        seen[(intptr_t)it - 1]++;
        pthread_mutex_unlock(&seen_lock);
    }
    return NULL;
}

static void *blocked_pop(void *arg)
{
    void *it;
    *(vf_status *)arg = vfi_queue_pop(q, &it);
    return NULL;
}

int main(void)
{
    void *it;
    /* order and close */
    CHECK_EQ(vfi_queue_create(3, &q), VF_OK);
    for (intptr_t i = 1; i <= 3; i++)
        CHECK_EQ(vfi_queue_push(q, (void *)i), VF_OK);
    vfi_queue_close(q);
    CHECK_EQ(vfi_queue_push(q, (void *)4), VF_ERR_INVALID);
    for (intptr_t i = 1; i <= 3; i++) {
        CHECK_EQ(vfi_queue_pop(q, &it), VF_OK);
        CHECK_EQ((intptr_t)it, i);
    }
    CHECK_EQ(vfi_queue_pop(q, &it), VF_EOF);
    vfi_queue_free(&q);
    CHECK(q == NULL);

    /* cancel wakes a blocked consumer */
    CHECK_EQ(vfi_queue_create(2, &q), VF_OK);
    vf_status got = VF_OK;
    pthread_t t;
    pthread_create(&t, NULL, blocked_pop, &got);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    vfi_queue_cancel(q);
    pthread_join(t, NULL);
    CHECK_EQ(got, VF_ERR_CANCELLED);
    CHECK_EQ(vfi_queue_push(q, (void *)1), VF_ERR_CANCELLED);
    vfi_queue_free(&q);

    /* stress */
    CHECK_EQ(vfi_queue_create(7, &q), VF_OK);
    pthread_t prod[N_PRODUCERS], cons[N_CONSUMERS];
    for (intptr_t i = 0; i < N_CONSUMERS; i++)
        pthread_create(&cons[i], NULL, consumer, NULL);
    for (intptr_t i = 0; i < N_PRODUCERS; i++)
        pthread_create(&prod[i], NULL, producer, (void *)i);
    for (int i = 0; i < N_PRODUCERS; i++)
        pthread_join(prod[i], NULL);
    vfi_queue_close(q);
    for (int i = 0; i < N_CONSUMERS; i++)
        pthread_join(cons[i], NULL);
    for (int i = 0; i < N_ITEMS * N_PRODUCERS; i++)
        CHECK_MSG(seen[i] == 1, "item %d seen %d times", i, seen[i]);
    vfi_queue_free(&q);
    printf("queue: %d items through %d producers and %d consumers, each once\n",
           N_ITEMS * N_PRODUCERS, N_PRODUCERS, N_CONSUMERS);
    return 0;
}
