/*
 * db.c - the public database calls of vidfeat.h that are the store's alone: what a database
 * holds (vidfeat info: as records, and as lines of text), registering work (vidfeat enqueue),
 * merging (vidfeat merge).
 */
#include <stdio.h>
#include <string.h>

#include "core/mem.h"
#include "core/path.h"
#include "store/record.h"
#include "store/store.h"
#include "vidfeat.h"

vf_status vf_db_inspect(const char *db_path, const vf_db_visitor *visitor, char *errbuf,
                        size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    if (!db_path || !visitor)
        return VF_ERR_INVALID;
    vf_status rc = vfi_store_inspect(db_path, visitor, &err);
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    return rc;
}

/* vf_db_describe: the records as lines of text */
typedef struct describer {
    void (*line)(void *user, const char *text);
    void *user;
    int runs; /* benchmark runs listed so far */
} describer;

static void describe_summary(void *user, const vf_db_summary *s)
{
    describer *d = user;
    char buf[1024];
    snprintf(buf, sizeof(buf), "database %s (schema %d, %s)", s->database, s->schema, s->engine);
    d->line(d->user, buf);
    snprintf(buf, sizeof(buf),
             "%lld video%s, %lld model%s, extractions: %lld done, %lld failed, %lld unfinished; "
             "%lld vector%s",
             (long long)s->videos, s->videos == 1 ? "" : "s", (long long)s->models,
             s->models == 1 ? "" : "s", (long long)s->done, (long long)s->failed,
             (long long)s->running, (long long)s->vectors, s->vectors == 1 ? "" : "s");
    if (s->pending) /* queued files no worker has started */
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "; %lld queued, not started",
                 (long long)s->pending);
    d->line(d->user, buf);
    d->line(d->user, "status   frames  infer/s  model (layer, dim, dtype, sampling)  path");
}

static void describe_extraction(void *user, const vf_db_extraction *e)
{
    describer *d = user;
    char buf[1024 + 4096];
    snprintf(buf, sizeof(buf), "%-7s %7lld  %7.1f  %s (%s, %d, %s, %s%s%s)  %s%s%s", e->status,
             (long long)e->frames, e->infer_fps, e->model, e->layer, e->dim, e->dtype, e->sampling,
             e->weights ? ", " : "", e->weights ? e->weights : "", e->path, e->error ? ": " : "",
             e->error ? e->error : "");
    d->line(d->user, buf);
}

static void describe_run(void *user, const vf_db_bench_run *r)
{
    describer *d = user;
    char buf[1024];
    if (!d->runs++)
        d->line(d->user, "benchmark runs: when  host  device  precision  batch  mode  model  "
                         "end-to-end/s  infer/s  device name");
    snprintf(buf, sizeof(buf), "%s  %s  %s  %s  %d  %s  %s  %.2f  %.2f  %s", r->started_at,
             r->host ? r->host : "-", r->device, r->precision, r->batch_size, r->mode, r->model,
             r->end_to_end_fps, r->infer_fps, r->device_name);
    d->line(d->user, buf);
}

vf_status vf_db_describe(const char *db_path, void (*line)(void *user, const char *text),
                         void *user, char *errbuf, size_t errbuf_size)
{
    if (!line)
        return VF_ERR_INVALID;
    describer d = {line, user, 0};
    vf_db_visitor v = {&d, describe_summary, describe_extraction, describe_run};
    return vf_db_inspect(db_path, &v, errbuf, errbuf_size);
}

const char *vf_db_display(const char *db, char *buf, size_t size)
{
    return vfi_store_display(db ? db : "", buf, size);
}

int vf_db_has_password(const char *db)
{
    return db && vfi_store_has_password(db);
}

int vf_db_is_server(const char *db)
{
    return db && vfi_store_uri_scheme(db) > 0;
}

vf_status vf_db_add_bench(const char *db_path, const vf_bench_record *r, char *errbuf,
                          size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    if (!db_path || !r)
        return VF_ERR_INVALID;
    vf_store *s = NULL;
    vf_status rc = vfi_store_open(db_path, VF_STORE_WRITE, &s, &err);
    if (rc >= 0)
        rc = vfi_store_add_run(s, r, vf_version(), &err);
    vfi_store_close(&s);
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    return rc;
}

vf_status vf_db_enqueue(const char *db_path, const char *root, const char *const *paths,
                        int n_paths, char *errbuf, size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    if (!db_path || (!paths && n_paths) || n_paths < 0)
        return VF_ERR_INVALID;
    vf_status rc = VF_OK;
    vf_store *s = NULL;
    char *abs_root = root ? vfi_record_root(root) : NULL;
    vf_record_file *files = vfi_calloc((size_t)n_paths + 1, sizeof(*files));
    const char **names = vfi_calloc((size_t)n_paths + 1, sizeof(*names));
    int named = 0;
    if (!files || !names || (root && !abs_root)) {
        rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* every name first: a file outside the root registers nothing */
    for (; named < n_paths; named++) {
        TRY(vfi_record_file_init_root(&files[named], paths[named], abs_root, &err));
        if (!files[named].name) {
            rc = vfi_fail(&err, VF_ERR_INVALID, "an empty path");
            goto fail;
        }
        if (abs_root && vfi_path_has_dotdot(files[named].name)) { /* workers would refuse it */
            rc = vfi_fail(&err, VF_ERR_DENIED, "%s: a '..' in a name under --root %s", paths[named],
                          abs_root);
            named++;
            goto fail;
        }
        names[named] = files[named].name;
    }
    TRY(vfi_store_open(db_path, VF_STORE_WRITE, &s, &err));
    TRY(vfi_store_enqueue(s, names, n_paths, &err));
fail:
out:
    vfi_store_close(&s);
    for (int i = 0; i < named; i++)
        vfi_record_file_clear(&files[i]);
    vfi_free(files);
    vfi_free(names);
    vfi_free(abs_root);
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    return rc;
}

vf_status vf_db_merge(const char *out_path, const char *in_path,
                      void (*conflict)(void *user, const char *path, const char *sampling),
                      void *user, int64_t *merged, char *errbuf, size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    int64_t ignore;
    if (!merged)
        merged = &ignore;
    *merged = 0;
    if (!out_path || !in_path)
        return VF_ERR_INVALID;
    vf_store *s = NULL;
    vf_status rc = vfi_store_open(out_path, VF_STORE_WRITE, &s, &err);
    if (rc >= 0)
        rc = vfi_store_merge(s, in_path, conflict, user, merged, &err);
    vfi_store_close(&s);
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    return rc;
}
