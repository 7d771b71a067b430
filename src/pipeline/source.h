/*
 * source.h - where the pipeline's work comes from: a source hands out work items (files), and
 * is told how each ended. Today the list of paths a run is given (vfi_list_source); a source
 * that claims items from a shared database has the same three calls.
 *
 * Threads: next() may be called by several decode lanes at once; done() and failed() come from
 * the pipeline's store thread, in the order the files finish. An item belongs to its source:
 * it stays valid until the source is freed, and the pipeline does not touch it after done() or
 * failed(). An item handed out but not yet begun when a run stops is told neither: a source
 * that hands items to many workers must take such items back itself (a lease that expires).
 */
#ifndef VIDFEAT_SOURCE_H
#define VIDFEAT_SOURCE_H

#include "core/status.h"
#include "store/record.h"

/* One unit of work: a file, and what the pipeline keeps about it. */
typedef struct vf_work {
    int index;         /* the caller's number for it (vf_batch_view.file, file_done's file) */
    const char *path;  /* the path to open (borrowed from the source) */
    vf_record_file id; /* the name it is recorded under */
    int skip;          /* already done: reported as skipped, not decoded */
} vf_work;

typedef struct vf_source vf_source;

typedef struct vf_source_ops {
    /* The next item into *out: VF_OK, VF_EOF when there are no more, < 0 when the source failed
     * (err says why; the run stops). */
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

/* Decide whether an item is already done (may set w->skip); < 0 fails the source's creation. */
typedef vf_status (*vf_source_check)(void *user, vf_work *w, vf_err *err);

/* A source over paths[0..n) (borrowed: they must outlive it), handing them out in order, each
 * once. With named, each item gets the name it is recorded under (record.h) when the source is
 * made - the current directory of the run's start; without, id.name stays NULL (nothing is
 * recorded). Each is checked with check (NULL: none) in the calling thread. */
vf_status vfi_list_source_create(const char *const *paths, int n, int named, vf_source_check check,
                                 void *user, vf_source **out, vf_err *err);

/* Accepts NULL and *ps == NULL; sets *ps to NULL. */
void vfi_source_free(vf_source **ps);

#endif /* VIDFEAT_SOURCE_H */
