/*
 * test_turns.c - core/turns.h: threads that queued one after another go in in that order, one
 * at a time with room for one; never more than two at a time with room for two; leaving hands
 * the room over and the line ends empty.
 */
#include <pthread.h>
#include <sched.h>

#include "check.h"
#include "core/turns.h"

#define N 12

typedef struct shared {
    vf_turns t;
    pthread_mutex_t lock;
    int order[N], n_in, inside, most_inside;
} shared;

typedef struct arg {
    shared *s;
    int id;
} arg;

static void *run(void *p)
{
    arg *a = p;
    shared *s = a->s;
    vfi_turns_enter(&s->t);
    pthread_mutex_lock(&s->lock);
    s->order[s->n_in++] = a->id;
    if (++s->inside > s->most_inside)
        s->most_inside = s->inside;
    pthread_mutex_unlock(&s->lock);
    sched_yield();
    pthread_mutex_lock(&s->lock);
    s->inside--;
    pthread_mutex_unlock(&s->lock);
    vfi_turns_leave(&s->t);
    return NULL;
}

static void in_order(int room)
{
    shared s = {.n_in = 0};
    vfi_turns_init(&s.t, room);
    pthread_mutex_init(&s.lock, NULL);
    for (int i = 0; i < room; i++)
        vfi_turns_enter(&s.t); /* the room full: every thread below queues */
    pthread_t th[N];
    arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (arg){&s, i};
        CHECK_EQ(pthread_create(&th[i], NULL, run, &a[i]), 0);
        for (int spins = 0; vfi_turns_waiting(&s.t) < i + 1; spins++) {
            CHECK(spins < 10000000);
            sched_yield();
        }
    }
    for (int i = 0; i < room; i++)
        vfi_turns_leave(&s.t);
    for (int i = 0; i < N; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    /* With room for one, the order they went in is the order they noted; with room for more, a
     * thread let in may note it after threads let in later have come and gone. */
    for (int i = 0; room == 1 && i < N; i++)
        CHECK_MSG(s.order[i] == i, "%d went in %dth", s.order[i], i);
    CHECK(s.most_inside >= 1 && s.most_inside <= room);
    CHECK_EQ(s.t.inside, 0);
    CHECK(!s.t.first && !s.t.last);
    pthread_mutex_destroy(&s.lock);
    vfi_turns_destroy(&s.t);
}

int main(void)
{
    in_order(1);
    in_order(2);
    puts("test_turns: ok");
    return 0;
}
