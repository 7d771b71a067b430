/*
 * stages.c - what every stage of a pipeline run calls (stages.h): stopping the run, the events
 * that carry a file's beginning and end between the stages, the tokens of no_overlap, the helper
 * threads' priority.
 */
#include <stdlib.h>
#include <sys/resource.h>

#include "core/mem.h"
#include "pipeline/stages.h"

/* Record the first fatal error and stop every stage. Under the lock, which make_run and
 * free_run hold while they create and detach the queues: vf_pipeline_cancel may come from
 * another thread at any moment, a run's setup and teardown included. */
void vfi_pl_stop(vf_pipeline *p, vf_status code, const char *msg)
{
    pthread_mutex_lock(&p->lock);
    if (p->stop_reason == VF_OK) {
        p->stop_reason = code;
        vfi_fail(&p->err, code, "%s", msg);
    }
    atomic_store(&p->cancel, 1);
    vf_queue *qs[] = {p->q_batches, p->q_done, p->q_free_batches, p->q_tokens, p->q_jobs};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        if (qs[i])
            vfi_queue_cancel(qs[i]);
    }
    for (int i = 0; p->lanes && i < p->n_lanes; i++) {
        if (p->lanes[i].q_frames)
            vfi_queue_cancel(p->lanes[i].q_frames);
        if (p->lanes[i].q_free_frames)
            vfi_queue_cancel(p->lanes[i].q_free_frames);
    }
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_lock(&p->conv_lock); /* the convert thread may wait for its workers */
    pthread_cond_broadcast(&p->conv_done);
    pthread_mutex_unlock(&p->conv_lock);
}

event_item *vfi_pl_new_event(vf_pipeline *p, enum item_kind kind, vf_work *w)
{
    event_item *e = vfi_calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->hdr.kind = kind;
    e->hdr.work = w;
    pthread_mutex_lock(&p->lock);
    e->next = p->events;
    if (p->events)
        p->events->prev = e;
    p->events = e;
    pthread_mutex_unlock(&p->lock);
    return e;
}

void vfi_pl_free_event(vf_pipeline *p, event_item *e)
{
    pthread_mutex_lock(&p->lock);
    if (e->prev)
        e->prev->next = e->next;
    else
        p->events = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&p->lock);
    vfi_free(e->shots);
    vfi_free(e);
}

/* no_overlap: frames that left the pipeline (stored or dropped) let the decoder go on. */
void vfi_pl_give_tokens(vf_pipeline *p, int n)
{
    for (int i = 0; p->q_tokens && i < n; i++)
        vfi_queue_push(p->q_tokens, p); /* cannot block: at most batch_size are out */
}

/* Decode, convert and store need a few percent of the CPU that inference needs; on a machine
 * with few cores, each slice they take from an inference thread stalls the whole thread team at
 * its next barrier. Running them at a lower priority lets inference keep its cores and gives
 * them the gaps (Linux: nice is per thread, and the codec's own threads inherit it). */
#define HELPER_NICE 10

void vfi_pl_lower_priority(void)
{
#ifdef __linux__
    const char *env = getenv("VIDFEAT_HELPER_NICE");
    int nice = env ? atoi(env) : HELPER_NICE;
    if (nice > 0)
        setpriority(PRIO_PROCESS, 0, nice); /* Linux: the calling thread only */
#endif
}
