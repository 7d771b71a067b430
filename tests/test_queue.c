/*
 * test_queue.c - the bounded queue: order, blocking when full, close drains then EOF, cancel
 * wakes every waiter, and a many-producer many-consumer stress run that must deliver every item
 * exactly once (run under TSan in CI).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/queue.h"

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

/* A thread blocked in a queue call: it counts itself in before the call and out after, so the
 * test can see who is still inside. */
typedef struct waiter {
    vf_queue *q;
    int push; /* push item (else pop into got) */
    void *item, *got;
    vf_status rc;
    atomic_int inside; /* 1 from just before the call until it returns */
} waiter;

static void *wait_in_queue(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->inside, 1);
    w->rc = w->push ? vfi_queue_push(w->q, w->item) : vfi_queue_pop(w->q, &w->got);
    atomic_store(&w->inside, 0);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Start n waiters on q; return once all are inside their call and have stayed there 100 ms
 * (so they are really blocked, not just slow to start). */
static void start_waiters(waiter *w, pthread_t *t, int n, vf_queue *queue, int push)
{
    for (int i = 0; i < n; i++) {
        w[i] = (waiter){.q = queue, .push = push, .item = (void *)(intptr_t)(100 + i)};
        atomic_init(&w[i].inside, 0);
        CHECK(pthread_create(&t[i], NULL, wait_in_queue, &w[i]) == 0);
    }
    for (int i = 0; i < n; i++)
        while (!atomic_load(&w[i].inside))
            sleep_ms(1);
    sleep_ms(100);
    for (int i = 0; i < n; i++)
        CHECK_MSG(atomic_load(&w[i].inside),
                  "waiter %d returned at once (status %d) instead of "
                  "blocking",
                  i, (int)w[i].rc);
}

/* Wait up to 5 s for every waiter to return (a waiter never woken fails the test, not hangs it). */
static void join_waiters(waiter *w, pthread_t *t, int n, const char *what)
{
    for (int ms = 0; ms < 5000; ms++) {
        int inside = 0;
        for (int i = 0; i < n; i++)
            inside += atomic_load(&w[i].inside);
        if (!inside)
            break;
        sleep_ms(1);
    }
    for (int i = 0; i < n; i++)
        CHECK_MSG(!atomic_load(&w[i].inside), "%s: waiter %d still blocked after 5 s", what, i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

/* Blocking: a push into a full queue waits until a pop makes room, then lands after the items
 * already there; a pop from an empty queue waits for a push and gets that item. */
static void blocking(void)
{
    waiter w[1];
    pthread_t t[1];
    void *it;
    CHECK_EQ(vfi_queue_create(2, &q), VF_OK);
    CHECK_EQ(vfi_queue_push(q, (void *)1), VF_OK);
    CHECK_EQ(vfi_queue_push(q, (void *)2), VF_OK);
    start_waiters(w, t, 1, q, 1); /* pushes 100: blocked, the queue is full */
    CHECK_EQ(vfi_queue_pop(q, &it), VF_OK);
    CHECK_EQ((intptr_t)it, 1);
    join_waiters(w, t, 1, "push after a pop made room");
    CHECK_EQ(w[0].rc, VF_OK);
    CHECK_EQ(vfi_queue_pop(q, &it), VF_OK);
    CHECK_EQ((intptr_t)it, 2);
    CHECK_EQ(vfi_queue_pop(q, &it), VF_OK);
    CHECK_EQ((intptr_t)it, 100);
    start_waiters(w, t, 1, q, 0); /* pops: blocked, the queue is empty */
    CHECK_EQ(vfi_queue_push(q, (void *)7), VF_OK);
    join_waiters(w, t, 1, "pop after a push");
    CHECK(w[0].rc == VF_OK && (intptr_t)w[0].got == 7);
    vfi_queue_free(&q);
}

/* Cancel wakes every waiter at once - four consumers blocked on an empty queue and four
 * producers on a full one - each with VF_ERR_CANCELLED (producers keep their items), and every
 * later call fails the same way; close wakes blocked consumers with VF_EOF. */
static void cancel_wakes_all(void)
{
    enum { N = 4 };
    waiter pop[N], push[N];
    pthread_t tp[N], tq[N];
    vf_queue *empty, *full;
    CHECK_EQ(vfi_queue_create(2, &empty), VF_OK);
    CHECK_EQ(vfi_queue_create(1, &full), VF_OK);
    CHECK_EQ(vfi_queue_push(full, (void *)1), VF_OK);
    start_waiters(pop, tp, N, empty, 0);
    start_waiters(push, tq, N, full, 1);
    vfi_queue_cancel(empty);
    join_waiters(pop, tp, N, "consumers after cancel");
    vfi_queue_cancel(full);
    join_waiters(push, tq, N, "producers after cancel");
    for (int i = 0; i < N; i++) {
        CHECK_EQ(pop[i].rc, VF_ERR_CANCELLED);
        CHECK_EQ(push[i].rc, VF_ERR_CANCELLED);
    }
    void *it;
    CHECK_EQ(vfi_queue_push(empty, (void *)1), VF_ERR_CANCELLED);
    CHECK_EQ(vfi_queue_pop(full, &it), VF_ERR_CANCELLED);
    vfi_queue_free(&empty);
    vfi_queue_free(&full);

    /* close: blocked consumers of an empty queue all get the end */
    CHECK_EQ(vfi_queue_create(2, &empty), VF_OK);
    start_waiters(pop, tp, N, empty, 0);
    vfi_queue_close(empty);
    join_waiters(pop, tp, N, "consumers after close");
    for (int i = 0; i < N; i++)
        CHECK_EQ(pop[i].rc, VF_EOF);
    vfi_queue_free(&empty);
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

    blocking();
    cancel_wakes_all();

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
    printf("queue: a push into a full queue and a pop from an empty one block until the other "
           "side acts; cancel wakes 4 blocked consumers and 4 blocked producers, close wakes 4 "
           "consumers; %d items through %d producers and %d consumers, each once\n",
           N_ITEMS * N_PRODUCERS, N_PRODUCERS, N_CONSUMERS);
    return 0;
}
