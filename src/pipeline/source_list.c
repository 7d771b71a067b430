/*
 * source_list.c - the static list of files a run without a database is given, as a work source
 * (source.h): nothing is recorded, so the items carry no names.
 */
#include <stdatomic.h>

#include "core/mem.h"
#include "pipeline/source.h"

typedef struct list_source {
    vf_source base; /* first: what the pipeline hands around */
    vf_work *items;
    int n;
    atomic_int next; /* the next item handed out */
} list_source;

static vf_status list_next(vf_source *src, vf_work **out, vf_err *err)
{
    (void)err;
    list_source *l = (list_source *)src;
    int i = atomic_fetch_add(&l->next, 1);
    if (i >= l->n) {
        atomic_store(&l->next, l->n); /* never wraps however often it is asked */
        return VF_EOF;
    }
    *out = &l->items[i];
    return VF_OK;
}

/* The run's caller learns each outcome through its hooks; the list keeps nothing more. */
static vf_status list_done(vf_source *src, vf_work *w, vf_err *err)
{
    (void)src, (void)w, (void)err;
    return VF_OK;
}

static vf_status list_failed(vf_source *src, vf_work *w, vf_status status, const char *error,
                             vf_err *err)
{
    (void)src, (void)w, (void)status, (void)error, (void)err;
    return VF_OK;
}

static void list_free(vf_source *src)
{
    list_source *l = (list_source *)src;
    vfi_free(l->items);
    vfi_free(l);
}

static const vf_source_ops list_ops = {list_next, list_done, list_failed, list_free};

vf_status vfi_list_source_create(const char *const *paths, int n, vf_source **out, vf_err *err)
{
    *out = NULL;
    list_source *l = vfi_calloc(1, sizeof(*l));
    if (!l || !(l->items = vfi_calloc((size_t)n + 1, sizeof(vf_work)))) {
        vfi_free(l);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    l->base = (vf_source){&list_ops, n};
    atomic_init(&l->next, 0);
    for (; l->n < n; l->n++) {
        vf_work *w = &l->items[l->n];
        w->index = l->n;
        w->path = w->id.path = paths[l->n];
    }
    *out = &l->base;
    return VF_OK;
}

void vfi_source_free(vf_source **ps)
{
    if (ps && *ps) {
        (*ps)->ops->free(*ps);
        *ps = NULL;
    }
}
