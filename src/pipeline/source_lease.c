/*
 * source_lease.c - work claimed from a shared database, one file at a time (source.h).
 *
 * The source has its own connection to the database (the pipeline's store thread owns the
 * other), used under its lock by next() (decode lanes), done()/failed() (the store thread) and
 * the heartbeat thread, which renews the held leases every third of their length. The writes of
 * a claimed file are fenced by its lease (store.h), so a worker that was paused past its lease
 * is refused and drops the file.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/owner.h"
#include "pipeline/source.h"

enum stage { HANDING_SKIPS, CLAIMING, REPORTING, FINISHED };

typedef struct lease_source {
    vf_source base; /* first: what the pipeline hands around */
    vf_store *store;
    char *root;
    char *sampling, *precision;
    char owner[VF_OWNER_SIZE];
    vf_store_work work;
    const atomic_int *cancel;

    pthread_mutex_t lock;
    enum stage stage;
    /* a list worker's items, by index; a queue worker's items, made per claim */
    vf_work *items;
    int n;
    unsigned char *settled; /* handed out (list worker) */
    int *of_offer;          /* the item of each offered file (the store numbers by offer) */
    int n_offered;
    int cursor;     /* the next index to look at while handing skips or reporting */
    char **fails;   /* a failed item's line, owned (list worker, by index) */
    vf_work **made; /* a queue worker's items, owned */
    int n_made, cap_made;
    vf_work **held; /* the items handed out with a claim and not yet ended */
    int n_held, cap_held;
    int64_t *ids; /* the heartbeat's: the held items' lease ids */
    int cap_ids;

    pthread_t beat;
    int beating;
    int stopping;
    pthread_cond_t wake;
} lease_source;

static int add_held(lease_source *l, vf_work *w)
{
    vf_work **h = vfi_grow(l->held, &l->cap_held, l->n_held + 1, sizeof(*h));
    if (!h)
        return -1;
    l->held = h;
    l->held[l->n_held++] = w;
    return 0;
}

static void drop_held(lease_source *l, vf_work *w)
{
    for (int i = 0; i < l->n_held; i++)
        if (l->held[i] == w) {
            l->held[i] = l->held[--l->n_held];
            return;
        }
}

/* Renew the held leases every third of a lease until told to stop. */
static void *heartbeat(void *arg)
{
    lease_source *l = arg;
    double every = l->work.lease_s / 3.0;
    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double t = (double)until.tv_sec + until.tv_nsec * 1e-9 + every;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
        int rc = 0;
        while (!l->stopping && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&l->wake, &l->lock, &until);
        if (l->stopping)
            break;
        if (!l->n_held)
            continue;
        vf_err err = {VF_OK, ""};
        int64_t *ids = vfi_grow(l->ids, &l->cap_ids, l->n_held, sizeof(*ids));
        if (ids) {
            l->ids = ids;
            for (int i = 0; i < l->n_held; i++)
                ids[i] = l->held[i]->lease.id;
        }
        if (!ids || vfi_store_renew(l->store, &l->work, ids, l->n_held, &err) < 0)
            vfi_log(VF_LOG_WARNING, "lease", "renewing leases: %s",
                    ids ? err.msg : "out of memory");
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* A queue worker's new item for a claimed name. */
static vf_work *make_item(lease_source *l, char *name, vf_err *err)
{
    vf_work **m = vfi_grow(l->made, &l->cap_made, l->n_made + 1, sizeof(*m));
    if (!m) {
        vfi_free(name);
        vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    l->made = m;
    vf_work *w = vfi_calloc(1, sizeof(*w));
    char *path = vfi_record_locate(name, l->root);
    if (!w || !path) {
        vfi_free(w);
        vfi_free(path);
        vfi_free(name);
        vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    w->index = l->n_made;
    w->path = w->id.path = path;
    w->id.name = name; /* owned by the item from here */
    l->made[l->n_made++] = w;
    return w;
}

/* A queue worker's claimed file that the resume rule finds done already (it was queued again):
 * its lease ends done and it is handed out as skipped. */
static vf_status check_claimed(lease_source *l, vf_work *w, vf_err *err)
{
    struct stat st;
    if (l->work.force || stat(w->path, &st) != 0)
        return VF_OK;
    vf_store_file f = {w->id.name, st.st_size, vfi_record_mtime(&st)};
    int done = 0;
    vf_status rc =
        vfi_store_is_done(l->store, &f, l->work.model_id, l->sampling, l->precision, &done, err);
    if (rc >= 0 && done) {
        rc = vfi_store_release(l->store, &w->lease, 1, err);
        w->skip = 1;
        w->lease = (vf_store_lease){0, 0};
    }
    return rc;
}

static void note_state(void *user, int offer, const char *state, const char *error)
{
    lease_source *l = user;
    if (offer < 0 || offer >= l->n_offered)
        return;
    int i = l->of_offer[offer];
    if (l->settled[i] || strcmp(state, "failed") || l->fails[i])
        return;
    l->fails[i] = vfi_strdup(error && *error ? error : "failed (by another worker)");
}

static vf_status lease_next(vf_source *src, vf_work **out, vf_err *err)
{
    lease_source *l = (lease_source *)src;
    vf_status rc = VF_OK;
    pthread_mutex_lock(&l->lock);
    while (rc >= 0) {
        if (l->cancel && atomic_load(l->cancel)) {
            rc = VF_EOF;
            break;
        }
        /* each branch hands out an item, answers, or moves to the next stage */
        if (l->stage == HANDING_SKIPS) {
            while (l->cursor < l->n && !l->items[l->cursor].skip)
                l->cursor++;
            if (l->cursor < l->n) {
                l->settled[l->cursor] = 1;
                *out = &l->items[l->cursor++];
                break;
            }
            l->stage = CLAIMING;
            l->cursor = 0;
        } else if (l->stage == CLAIMING) {
            vf_store_claim c;
            if ((rc = vfi_store_claim(l->store, &l->work, &c, err)) < 0)
                break;
            if (c.kind == VF_CLAIM_WAIT) { /* the caller asks again a little later */
                rc = VF_SOURCE_WAIT;
                break;
            }
            if (c.kind == VF_CLAIM_NONE) {
                l->stage = REPORTING;
                if (l->items)
                    rc = vfi_store_work_states(l->store, &l->work, note_state, l, err);
                continue;
            }
            vf_work *w;
            if (l->items) {
                vfi_free(c.name);
                if (c.index < 0 || c.index >= l->n_offered) {
                    rc = vfi_fail(err, VF_ERR_INTERNAL, "a claim outside the offered files");
                    break;
                }
                w = &l->items[l->of_offer[c.index]];
                l->settled[w->index] = 1;
            } else if (!(w = make_item(l, c.name, err))) {
                rc = VF_ERR_NOMEM;
                break;
            }
            if (c.kind == VF_CLAIM_GAVE_UP) {
                /* the line is the item's: in fails[] for a list's, freed with a made one */
                char *line = vfi_strdup(c.error);
                if (!line) {
                    rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                    break;
                }
                if (l->items) {
                    vfi_free(l->fails[w->index]);
                    l->fails[w->index] = line;
                }
                w->fail = line;
                *out = w;
                break;
            }
            w->lease = c.lease;
            if (!l->items && (rc = check_claimed(l, w, err)) < 0)
                break;
            if (w->lease.id && add_held(l, w) < 0) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                break;
            }
            *out = w;
            break;
        } else if (l->stage == REPORTING) {
            /* the list's files this worker did not claim: others finished or failed them */
            while (l->cursor < l->n && l->settled[l->cursor])
                l->cursor++;
            if (l->cursor >= l->n) {
                l->stage = FINISHED;
                continue;
            }
            vf_work *w = &l->items[l->cursor];
            l->settled[l->cursor++] = 1;
            if (l->fails[w->index])
                w->fail = l->fails[w->index];
            else
                w->skip = 1;
            *out = w;
            break;
        } else {
            rc = VF_EOF;
            break;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

static vf_status lease_done(vf_source *src, vf_work *w, vf_err *err)
{
    (void)err;
    lease_source *l = (lease_source *)src;
    pthread_mutex_lock(&l->lock);
    drop_held(l, w); /* finish ended the lease with the extraction */
    pthread_mutex_unlock(&l->lock);
    return VF_OK;
}

static vf_status lease_failed(vf_source *src, vf_work *w, vf_status status, const char *error,
                              vf_err *err)
{
    (void)error;
    lease_source *l = (lease_source *)src;
    vf_status rc = VF_OK;
    pthread_mutex_lock(&l->lock);
    drop_held(l, w);
    /* stopped before the end: given back at once (a failure was recorded by finish; a lost
     * lease is the new holder's) */
    if (status == VF_ERR_CANCELLED && w->lease.id)
        rc = vfi_store_release(l->store, &w->lease, 0, err);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

static void lease_free(vf_source *src)
{
    lease_source *l = (lease_source *)src;
    if (l->beating) {
        pthread_mutex_lock(&l->lock);
        l->stopping = 1;
        pthread_cond_signal(&l->wake);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->beat, NULL);
    }
    /* items handed out but never begun or finished go back to the pool */
    for (int i = 0; l->store && i < l->n_held; i++) {
        vf_err ignore;
        vfi_store_release(l->store, &l->held[i]->lease, 0, &ignore);
    }
    vfi_store_close(&l->store);
    for (int i = 0; i < l->n; i++) {
        vfi_record_file_clear(&l->items[i].id);
        if (l->fails)
            vfi_free(l->fails[i]);
    }
    for (int i = 0; i < l->n_made; i++) {
        vf_work *w = l->made[i];
        vfi_record_file_clear(&w->id);
        vfi_free((char *)w->path);
        vfi_free((char *)w->fail); /* a made item's line is its own */
        vfi_free(w);
    }
    vfi_free(l->of_offer);
    vfi_free(l->made);
    vfi_free(l->fails);
    vfi_free(l->items);
    vfi_free(l->settled);
    vfi_free(l->held);
    vfi_free(l->ids);
    vfi_free(l->root);
    vfi_free(l->sampling);
    vfi_free(l->precision);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->wake);
    vfi_free(l);
}

static const vf_source_ops lease_ops = {lease_next, lease_done, lease_failed, lease_free};

/* The list's files: named, stat-ed and offered; the done ones marked to be handed out first,
 * the ones that cannot be named (not under the root) to be reported failed. */
static vf_status offer_list(lease_source *l, const char *const *paths, int n, vf_err *err)
{
    vf_store_offer *offers = vfi_calloc((size_t)n + 1, sizeof(*offers));
    unsigned char *done = vfi_calloc((size_t)n + 1, 1);
    l->items = vfi_calloc((size_t)n + 1, sizeof(vf_work));
    l->settled = vfi_calloc((size_t)n + 1, 1);
    l->fails = vfi_calloc((size_t)n + 1, sizeof(char *));
    l->of_offer = vfi_calloc((size_t)n + 1, sizeof(int));
    vf_status rc = VF_OK;
    if (!offers || !done || !l->items || !l->settled || !l->fails || !l->of_offer)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    for (; rc >= 0 && l->n < n; l->n++) {
        vf_work *w = &l->items[l->n];
        w->index = l->n;
        w->path = paths[l->n];
        vf_err why = {VF_OK, ""};
        vf_status r = vfi_record_file_init_root(&w->id, paths[l->n], l->root, &why);
        if (r == VF_ERR_NOMEM) {
            rc = vfi_fail(err, r, "out of memory");
            break;
        }
        w->id.path = paths[l->n];
        if (r < 0 || !w->id.name) { /* reported with its line after the claims */
            if (!(l->fails[l->n] = vfi_strdup(r < 0 ? why.msg : "an empty path")))
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            continue;
        }
        struct stat st;
        int ok = stat(w->path, &st) == 0;
        offers[l->n_offered] =
            (vf_store_offer){w->id.name, strcmp(w->id.name, w->path) ? w->path : NULL,
                             ok ? (int64_t)st.st_size : -1, ok ? vfi_record_mtime(&st) : -1.0};
        l->of_offer[l->n_offered++] = l->n;
    }
    if (rc >= 0)
        rc = vfi_store_offer(l->store, &l->work, offers, l->n_offered, done, err);
    for (int i = 0; rc >= 0 && i < l->n_offered; i++)
        l->items[l->of_offer[i]].skip = done[i];
    vfi_free(offers);
    vfi_free(done);
    return rc;
}

vf_status vfi_lease_source_create(const vf_lease_opts *o, const char *const *paths, int n,
                                  vf_source **out, vf_err *err)
{
    *out = NULL;
    lease_source *l = vfi_calloc(1, sizeof(*l));
    if (!l)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    l->base = (vf_source){&lease_ops, paths ? n : -1};
    l->cancel = o->cancel;
    vfi_owner_self(l->owner, sizeof(l->owner));
    vf_status rc = VF_OK;
    if ((o->root && !(l->root = vfi_strdup(o->root))) || !(l->sampling = vfi_strdup(o->sampling)) ||
        !(l->precision = vfi_strdup(o->precision))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    l->work = (vf_store_work){o->model_id, l->sampling,     l->precision, l->owner,
                              o->lease_s,  o->max_attempts, o->force,     -1.0};
    TRY(vfi_store_open(o->target, VF_STORE_WRITE, &l->store, err));
    if (paths) /* a list: what ended before now and is not done by the rule is work again */
        TRY(vfi_store_clock(l->store, &l->work.since, err));
    TRY(paths ? offer_list(l, paths, n, err)
              : vfi_store_offer(l->store, &l->work, NULL, 0, NULL, err));
    if (pthread_create(&l->beat, NULL, heartbeat, l) != 0) {
        rc = vfi_fail(err, VF_ERR_INTERNAL, "cannot start the lease heartbeat");
        goto fail;
    }
    l->beating = 1;
    *out = &l->base;
    return VF_OK;
fail:
    lease_free(&l->base);
    return rc;
}
