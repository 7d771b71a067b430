/*
 * turns.c - see turns.h: the line is a list of the waiting threads' own places, each with its
 * own condition, so that handing the room over wakes one thread.
 */
#include "core/turns.h"

struct vf_turn {
    pthread_cond_t go;
    int admitted;
    vf_turn *next;
};

void vfi_turns_init(vf_turns *t, int max)
{
    pthread_mutex_init(&t->lock, NULL);
    t->first = t->last = NULL;
    t->inside = 0;
    t->max = max > 0 ? max : 1;
}

void vfi_turns_destroy(vf_turns *t)
{
    pthread_mutex_destroy(&t->lock);
}

void vfi_turns_enter(vf_turns *t)
{
    pthread_mutex_lock(&t->lock);
    if (!t->first && t->inside < t->max) {
        t->inside++;
        pthread_mutex_unlock(&t->lock);
        return;
    }
    vf_turn me = {.admitted = 0, .next = NULL};
    pthread_cond_init(&me.go, NULL);
    *(t->last ? &t->last->next : &t->first) = &me;
    t->last = &me;
    while (!me.admitted)
        pthread_cond_wait(&me.go, &t->lock);
    pthread_mutex_unlock(&t->lock);
    pthread_cond_destroy(&me.go);
}

void vfi_turns_leave(vf_turns *t)
{
    pthread_mutex_lock(&t->lock);
    vf_turn *next = t->first;
    if (next) { /* the room passes to it: inside stays */
        if (!(t->first = next->next))
            t->last = NULL;
        next->admitted = 1;
        pthread_cond_signal(&next->go);
    } else {
        t->inside--;
    }
    pthread_mutex_unlock(&t->lock);
}

int vfi_turns_waiting(vf_turns *t)
{
    pthread_mutex_lock(&t->lock);
    int n = 0;
    for (const vf_turn *w = t->first; w; w = w->next)
        n++;
    pthread_mutex_unlock(&t->lock);
    return n;
}
