/*
 * plan_cache.c - the measured choices of implementation kept between runs (plan_cache.h).
 *
 *   {"vidfeat_plan_cache": 1, "entries": {KEY: {"winner": NAME, "measured": DETAIL}, ...}}
 *
 * Read whole at open; the entries put are kept apart and, at close, merged into the file as it
 * is then (theirs win over the file's for the same key) and written to a temporary file renamed
 * over it (core/path.h), so a reader never sees half a file; writers take turns (flock on
 * PATH.lock), so none loses another's entries. The file is data from elsewhere: at most MAX_BYTES,
 * its keys and names bounded, anything else makes it ignored (and replaced) with one warning.
 */
#include "engine/plan_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"

#define MAX_BYTES   (4 << 20)
#define MAX_ENTRIES 20000
#define MAX_TEXT    512 /* bytes of a key, a winner, a detail */

typedef struct entry {
    char *key, *winner, *detail;
} entry;

struct vfi_plan_cache {
    char *path; /* NULL: kept nowhere */
    entry *have, *put;
    int n_have, cap_have, n_put, cap_put;
};

static void entries_free(entry *e, int n)
{
    for (int i = 0; i < n; i++) {
        vfi_free(e[i].key);
        vfi_free(e[i].winner);
        vfi_free(e[i].detail);
    }
    vfi_free(e);
}

/* Append (key, winner, detail) to *list; -1 when out of memory. */
static int add(entry **list, int *n, int *cap, const char *key, const char *winner,
               const char *detail)
{
    void *grown = vfi_grow(*list, cap, *n + 1, sizeof(entry));
    if (!grown)
        return -1;
    *list = grown;
    entry *e = &(*list)[*n];
    e->key = vfi_strdup(key);
    e->winner = vfi_strdup(winner);
    e->detail = vfi_strdup(detail ? detail : "");
    if (!e->key || !e->winner || !e->detail) {
        vfi_free(e->key);
        vfi_free(e->winner);
        vfi_free(e->detail);
        return -1;
    }
    (*n)++;
    return 0;
}

static int bounded(const char *s)
{
    return s && strlen(s) < MAX_TEXT;
}

typedef struct reading {
    vfi_plan_cache *pc;
    int bad;
} reading;

static int read_entry(void *user, const char *key, const vf_json *v)
{
    reading *r = user;
    const char *winner = vfi_json_is_object(v) ? vfi_json_str(v, "winner", NULL) : NULL;
    const char *detail = vfi_json_is_object(v) ? vfi_json_str(v, "measured", "") : NULL;
    if (!bounded(key) || !bounded(winner) || !bounded(detail) || r->pc->n_have >= MAX_ENTRIES) {
        r->bad = 1;
        return 1;
    }
    if (add(&r->pc->have, &r->pc->n_have, &r->pc->cap_have, key, winner, detail) < 0) {
        r->bad = 2;
        return 1;
    }
    return 0;
}

/* The file's entries into pc->have: 0 (also when there is no file), 1 when it is not ours or
 * damaged (nothing kept of it), -1 out of memory. */
static int load(vfi_plan_cache *pc, vf_err *err)
{
    struct stat st;
    if (stat(pc->path, &st) != 0 && errno == ENOENT)
        return 0;
    vf_json *j = NULL;
    if (vfi_json_load(pc->path, MAX_BYTES, &j, err) < 0)
        return err->code == VF_ERR_NOMEM ? -1 : 1;
    reading r = {pc, 0};
    const vf_json *entries = vfi_json_get(j, "entries");
    if (vfi_json_num(j, "vidfeat_plan_cache", 0) != 1 || !vfi_json_is_object(entries)) {
        r.bad = 1;
        vfi_fail(err, VF_ERR_INVALID, "%s: not a vidfeat plan cache", pc->path);
    } else {
        vfi_json_each(entries, read_entry, &r);
        if (r.bad == 1)
            vfi_fail(err, VF_ERR_INVALID, "%s: an entry that is not a plan cache's", pc->path);
    }
    vfi_json_free(&j);
    if (r.bad) {
        entries_free(pc->have, pc->n_have);
        pc->have = NULL;
        pc->n_have = pc->cap_have = 0;
    }
    return r.bad == 2 ? -1 : r.bad;
}

vfi_plan_cache *vfi_plan_cache_open(void)
{
    vfi_plan_cache *pc = vfi_calloc(1, sizeof(*pc));
    if (!pc)
        return NULL;
    const char *env = getenv("VIDFEAT_PLAN_CACHE");
    if (env && !strcmp(env, "off"))
        return pc;
    pc->path = env && env[0] ? vfi_strdup(env) : vfi_cache_path("plans.json");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int placed = (env && env[0]) || (xdg && xdg[0] == '/') || (home && home[0] == '/');
    if (!pc->path && placed) { /* a place for it, and no memory to name it */
        vfi_free(pc);
        return NULL;
    }
    if (!pc->path) /* no cache directory (no HOME): measured every run */
        return pc;
    vf_err err = {VF_OK, ""};
    int r = load(pc, &err);
    if (r < 0) {
        vfi_plan_cache_close(&pc, &err);
        return NULL;
    }
    if (r > 0 && err.code == VF_ERR_IO) { /* not ours to read (another user's HOME): kept nowhere */
        vfi_log(VF_LOG_INFO, "plans", "%s: not used (%s)", pc->path, err.msg);
        vfi_free(pc->path);
        pc->path = NULL;
    } else if (r > 0) {
        vfi_log(VF_LOG_WARNING, "plans",
                "%s: the plan cache cannot be read (%s): layers are timed again and it is "
                "written anew",
                pc->path, err.msg);
    }
    return pc;
}

const char *vfi_plan_cache_get(const vfi_plan_cache *pc, const char *key)
{
    for (int i = pc ? pc->n_put - 1 : -1; i >= 0; i--)
        if (!strcmp(pc->put[i].key, key))
            return pc->put[i].winner;
    for (int i = pc ? pc->n_have - 1 : -1; i >= 0; i--)
        if (!strcmp(pc->have[i].key, key))
            return pc->have[i].winner;
    return NULL;
}

int vfi_plan_cache_put(vfi_plan_cache *pc, const char *key, const char *winner, const char *detail)
{
    if (!pc || !bounded(key) || !bounded(winner) || (detail && !bounded(detail)))
        return -1;
    return add(&pc->put, &pc->n_put, &pc->cap_put, key, winner, detail);
}

/* The file now (another process may have written it since open) with pc's puts over it. */
static vf_status save(vfi_plan_cache *pc, vf_err *err)
{
    vfi_plan_cache now = {.path = pc->path};
    vf_err why = {VF_OK, ""};
    /* one writer at a time reads, merges and replaces (a lock beside the file: the file itself
     * is replaced, so a lock on it would be on the old one), so no one's choices are lost */
    vfi_make_parent_dirs(pc->path);
    char lock_path[4096];
    int lock = -1;
    if (snprintf(lock_path, sizeof(lock_path), "%s.lock", pc->path) < (int)sizeof(lock_path) &&
        (lock = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644)) >= 0)
        while (flock(lock, LOCK_EX) < 0 && errno == EINTR)
            ;
    vf_status rc = VF_OK;
    vf_json *doc = NULL;
    if (load(&now, &why) < 0) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    doc = vfi_json_new_object();
    vf_json *entries = vfi_json_new_object();
    int bad = vfi_json_add_int(doc, "vidfeat_plan_cache", 1) < 0;
    bad |= vfi_json_add(doc, "entries", entries) < 0; /* taken over, also on failure */
    for (int pass = 0; pass < 2 && !bad; pass++) {
        const entry *list = pass ? pc->put : now.have;
        int n = pass ? pc->n_put : now.n_have;
        for (int i = 0; i < n && !bad; i++) {
            vf_json *o = vfi_json_new_object();
            bad = vfi_json_add_str(o, "winner", list[i].winner) < 0 ||
                  vfi_json_add_str(o, "measured", list[i].detail) < 0 ||
                  vfi_json_add(entries, list[i].key, o) < 0; /* a later one replaces */
        }
    }
    entries_free(now.have, now.n_have);
    FILE *f = NULL;
    char *tmp = NULL;
    if (bad) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    } else if (vfi_replace_open(pc->path, &f, &tmp, &why) < 0) {
        if (why.code == VF_ERR_NOMEM)
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        else /* a directory it may not write: the choices are only not kept */
            vfi_log(VF_LOG_WARNING, "plans", "the plan cache is not kept: %s", why.msg);
    } else {
        vfi_json_write(f, doc, 1); /* a write error shows in ferror(f): the file is not kept */
        if (vfi_replace_close(f, tmp, pc->path, &why) < 0)
            vfi_log(VF_LOG_WARNING, "plans", "the plan cache is not kept: %s", why.msg);
    }
done:
    if (lock >= 0)
        close(lock); /* and its lock with it */
    vfi_json_free(&doc);
    return rc;
}

vf_status vfi_plan_cache_close(vfi_plan_cache **ppc, vf_err *err)
{
    vfi_plan_cache *pc = ppc ? *ppc : NULL;
    if (!pc)
        return VF_OK;
    vf_status rc = pc->path && pc->n_put ? save(pc, err) : VF_OK;
    entries_free(pc->have, pc->n_have);
    entries_free(pc->put, pc->n_put);
    vfi_free(pc->path);
    vfi_free(pc);
    *ppc = NULL;
    return rc;
}
