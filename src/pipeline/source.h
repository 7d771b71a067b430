/*
 * source.h - where the pipeline's work comes from: a source hands out work items (files), and
 * is told how each ended. Two kinds: the list of paths a run without a database is given
 * (source_list.c), and files claimed one at a time from a database that many workers share
 * (source_lease.c).
 *
 * Threads: next() may be called by several decode lanes at once; done() and failed() come from
 * the pipeline's store thread, in the order the files finish. An item belongs to its source:
 * it stays valid until the source is freed, and the pipeline does not touch it after done() or
 * failed(). An item handed out but not yet begun when a run stops is told neither: the leased
 * source gives such items back when it is freed (and a lease expires if the process dies).
 */
#ifndef VIDFEAT_SOURCE_H
#define VIDFEAT_SOURCE_H

#include <stdatomic.h>

#include "core/status.h"
#include "store/record.h"
#include "store/store.h"

/* One unit of work: a file, and what the pipeline keeps about it. */
typedef struct vf_work {
    int index;            /* the caller's number for it (vf_batch_view.file, file_done's file) */
    const char *path;     /* the path to open (borrowed from the source) */
    vf_record_file id;    /* the name it is recorded under */
    int skip;             /* already done: reported as skipped, not decoded */
    const char *fail;     /* not NULL: reported failed with this line, not decoded */
    vf_store_lease lease; /* the claim that fences its writes (id 0: none) */
} vf_work;

typedef struct vf_source vf_source;

/* next(): nothing to hand out now, but there may be later (other workers hold files that may
 * come back): ask again soon. */
#define VF_SOURCE_WAIT 2

typedef struct vf_source_ops {
    /* The next item into *out: VF_OK, VF_SOURCE_WAIT, VF_EOF when there are no more, < 0 when
     * the source failed (err says why; the run stops). */
    vf_status (*next)(vf_source *src, vf_work **out, vf_err *err);
    /* The item's vectors are all stored and its extraction is marked done. */
    vf_status (*done)(vf_source *src, vf_work *w, vf_err *err);
    /* The item failed (status < 0 and one line), or was stopped (VF_ERR_CANCELLED) before it
     * was finished. Failing to record it is fatal (< 0, err). */
    vf_status (*failed)(vf_source *src, vf_work *w, vf_status status, const char *error,
                        vf_err *err);
    void (*free)(vf_source *src);
} vf_source_ops;

/* Each kind of source's handle begins with this. */
struct vf_source {
    const vf_source_ops *ops;
    int size_hint; /* items it will hand out, when known; else -1 */
};

/* A source over paths[0..n) (borrowed: they must outlive it), handing them out in order, each
 * once, for a run that records nothing (id.name stays NULL). */
vf_status vfi_list_source_create(const char *const *paths, int n, vf_source **out, vf_err *err);

/* How the leased source works (vfi_lease_source_create). */
typedef struct vf_lease_opts {
    const char *target; /* the database (-o): the source opens its own connection */
    int64_t model_id;
    const char *sampling, *precision;
    const char *root; /* names are relative to this absolute directory (NULL: absolute) */
    double lease_s;   /* > 0 */
    int max_attempts; /* >= 1 */
    int force;
    const atomic_int *cancel; /* set: stop waiting for other workers */
} vf_lease_opts;

/* A source that claims its items one at a time from the database o->target (store.h's leased
 * work), renewing the leases it holds on its own thread. With paths (borrowed, n of them), it
 * works through those files: the ones already done are handed out first as skipped, the rest as
 * claimed, and when none is left to claim it waits while other workers hold some, then hands
 * out those others finished (skipped) or failed. With paths NULL it works through every queued
 * file of its model and sampling. Items it still holds when freed are given back. */
vf_status vfi_lease_source_create(const vf_lease_opts *o, const char *const *paths, int n,
                                  vf_source **out, vf_err *err);

/* Accepts NULL and *ps == NULL; sets *ps to NULL. */
void vfi_source_free(vf_source **ps);

#endif /* VIDFEAT_SOURCE_H */
