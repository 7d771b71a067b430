/*
 * turns.h - room for at most `max` threads at once, given in the order they asked: a thread
 * that asks waits behind every thread that asked before it, however the scheduler wakes them.
 * A plain mutex (or a semaphore) lets a thread that just arrived pass threads that have waited
 * for long, which under load is what makes the slowest requests of a server slow. A leaving
 * thread hands its room to the first in line and wakes that one alone.
 */
#ifndef VIDFEAT_TURNS_H
#define VIDFEAT_TURNS_H

#include <pthread.h>

typedef struct vf_turn vf_turn; /* a waiting thread's place in line (on its stack) */

typedef struct vf_turns {
    pthread_mutex_t lock;
    vf_turn *first, *last; /* the line */
    int inside, max;
} vf_turns;

void vfi_turns_init(vf_turns *t, int max);
void vfi_turns_destroy(vf_turns *t);
/* Wait for this thread's turn and go in. */
void vfi_turns_enter(vf_turns *t);
/* Leave, making room for the next in line. */
void vfi_turns_leave(vf_turns *t);
/* How many threads wait in line now. */
int vfi_turns_waiting(vf_turns *t);

#endif /* VIDFEAT_TURNS_H */
