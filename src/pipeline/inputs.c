/*
 * inputs.c - what a run's arguments name (vf_inputs_collect): files as they are, directories
 * walked for media in name order (each real directory and file once, links followed; media
 * recognised by probing), lists of files, a shard of them, all inside --root's archive when it
 * is given; and the name a file is recorded under (vf_input_name). The command and the Python
 * package take their inputs through here alike.
 */
#define _POSIX_C_SOURCE 200809L /* getdelim */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "core/strmap.h"
#include "media/probe.h"
#include "store/record.h"

enum { TAKEN = 0, SAID = 1 }; /* an input taken; a problem with one said (the run goes on) */

typedef struct path_list {
    char **items;
    int n, cap;
} path_list;

static int add_path(path_list *l, const char *path)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **items = realloc(l->items, (size_t)cap * sizeof(char *));
        if (!items)
            return -1;
        l->items = items;
        l->cap = cap;
    }
    if (!(l->items[l->n] = strdup(path)))
        return -1;
    l->n++;
    return 0;
}

/* Each real directory is walked once and each real file taken once, across all inputs: a
 * symbolic link to a directory above (again -> .) would otherwise repeat a tree, or never end,
 * and a file named twice (or reached by two links) be extracted twice. Keyed by device and
 * inode; kind 'd' or 'f'. 1 when first seen, 0 when seen before, -1 out of memory. */
static int first_visit(vf_strmap *seen, char kind, const struct stat *st)
{
    char key[64];
    snprintf(key, sizeof(key), "%c%llx:%llx", kind, (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino);
    if (vfi_strmap_get(seen, key, 0))
        return 0;
    return vfi_strmap_put(seen, key, 1) < 0 ? -1 : 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What a walk of the inputs shares: the directories and files already taken, the archive
 * (--root) or NULL, and the caller's options (whether files passed over are named, where lines
 * go). */
typedef struct walker {
    vf_strmap *seen;
    const vf_archive *archive;
    const vf_inputs_opts *o;
} walker;

/* One line about an input, to the caller's say() or the log. */
__attribute__((format(printf, 2, 3))) static void say(const walker *w, const char *fmt, ...)
{
    char line[4352];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (w->o->say)
        w->o->say(w->o->user, line);
    else
        vfi_log(VF_LOG_WARNING, "inputs", "%s", line);
}

/* Media files under dir, recursively, in name order; media is recognised by probing. Links
 * are followed, each real directory and file once (first_visit). Media that will not give
 * frames (cut short, sound only, ...) is listed too, for the run to fail with its line; files
 * that are not media are passed over (named with -v). With archive (--root), an entry that
 * leads out of it is neither walked nor probed (read): it is listed, for the run to refuse
 * with its line (docs/archives.md "What vidfeat reads"). */
static int walk(path_list *l, const walker *w, const char *dir, int depth)
{
    vf_strmap *seen = w->seen;
    const vf_archive *archive = w->archive;
    DIR *d = opendir(dir);
    if (!d) {
        say(w, "%s: cannot read directory", dir);
        return 1;
    }
    path_list here = {0};
    struct dirent *e;
    int failed = 0;
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/"; /* "dir/" on the line */
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s%s%s", dir, sep, e->d_name) >= (int)sizeof(path))
            continue;
        if (add_path(&here, path) < 0)
            failed = 1;
    }
    closedir(d);
    qsort(here.items, (size_t)here.n, sizeof(char *), cmp_str);
    for (int i = 0; i < here.n; i++) {
        struct stat st;
        if (stat(here.items[i], &st) != 0)
            continue;
        int inside = archive ? vfi_archive_holds(archive, here.items[i], NULL) : 1;
        if (inside <= 0) {
            failed |= inside < 0 || add_path(l, here.items[i]) < 0;
            free(here.items[i]);
            continue;
        }
        /* Zero-byte files are kept so that they are reported as failed: in an archive they
         * are broken media far more often than anything else. */
        int first = S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)
                        ? first_visit(seen, S_ISDIR(st.st_mode) ? 'd' : 'f', &st)
                        : 0;
        if (first < 0)
            failed = 1;
        else if (first && S_ISDIR(st.st_mode) && depth < 64)
            failed |= walk(l, w, here.items[i], depth + 1);
        else if (first && S_ISREG(st.st_mode) &&
                 (st.st_size == 0 ||
                  vfi_decode_probe(here.items[i], archive) != VF_PROBE_NOT_MEDIA))
            failed |= add_path(l, here.items[i]) < 0;
        else if (first && w->o->verbose > 0)
            say(w, "%s: not media: passed over", here.items[i]);
        free(here.items[i]);
    }
    free(here.items);
    return failed;
}

/* One input: a file as it is, a directory walked. TAKEN, SAID (a problem said), -1 out of
 * memory. */
static int add_input(path_list *inputs, const walker *w, const char *path)
{
    vf_strmap *seen = w->seen;
    const vf_archive *archive = w->archive;
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        int before = inputs->n, status = TAKEN;
        int first = first_visit(seen, 'd', &st);
        if (first < 0)
            return -1;
        if (!first) /* named twice, or inside a tree already walked */
            return TAKEN;
        int inside = archive ? vfi_archive_holds(archive, path, NULL) : 1;
        if (inside <= 0) /* refused by the run, with its line */
            return inside < 0 || add_path(inputs, path) < 0 ? -1 : TAKEN;
        if (walk(inputs, w, path, 0))
            status = SAID;
        if (inputs->n == before) {
            say(w, "%s: no media files in this directory", path);
            status = SAID;
        }
        return status;
    }
    if (exists && S_ISREG(st.st_mode)) {
        int first = first_visit(seen, 'f', &st);
        if (first <= 0)
            return first; /* the same file already taken: once */
    }
    return add_path(inputs, path) < 0 ? -1 : TAKEN; /* anything else fails with its line */
}

/* --files-from: one path a line (or NUL-separated), "-" for stdin; empty entries skipped. */
static int read_files_from(const char *name, int nul, path_list *inputs, const walker *w)
{
    FILE *f = strcmp(name, "-") ? fopen(name, "rb") : stdin;
    if (!f) {
        say(w, "%s: cannot read the list of files", name);
        return SAID;
    }
    int status = TAKEN;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (status >= 0 && (len = getdelim(&line, &cap, nul ? '\0' : '\n', f)) > 0) {
        if (line[len - 1] == (nul ? '\0' : '\n'))
            line[--len] = '\0';
        if (!nul && len && line[len - 1] == '\r') /* a list written on Windows */
            line[--len] = '\0';
        if (len == 0)
            continue;
        int r = add_input(inputs, w, line);
        status = r < 0 ? r : status == TAKEN ? r : status;
    }
    if (ferror(f)) {
        say(w, "%s: error reading the list of files", name);
        status = SAID;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return status;
}

/* Keep the inputs of shard k of n: split by the path relative to root (the name the database
 * knows, the same on every machine), else by the path as given. -1 when out of memory. */
static int keep_shard(path_list *inputs, int k, int n, const char *root)
{
    char *abs_root = root ? vfi_record_root(root) : NULL;
    if (root && !abs_root)
        return -1;
    int kept = 0;
    for (int i = 0; i < inputs->n; i++) {
        vf_record_file f;
        vf_err err = {VF_OK, ""};
        const char *key = inputs->items[i];
        int named = abs_root && vfi_record_file_init_root(&f, key, abs_root, &err) >= 0;
        if (named && f.name)
            key = f.name;
        int mine = vfi_hash_str(key) % (uint64_t)n == (uint64_t)k;
        if (named)
            vfi_record_file_clear(&f);
        if (mine)
            inputs->items[kept++] = inputs->items[i];
        else
            free(inputs->items[i]);
    }
    inputs->n = kept;
    vfi_free(abs_root);
    return 0;
}

vf_status vf_inputs_collect(const char *const *args, int n_args, const vf_inputs_opts *opts,
                            char ***paths, int *n_paths, int *failed)
{
    static const vf_inputs_opts none = {0};
    const vf_inputs_opts *o = opts ? opts : &none;
    path_list inputs = {0};
    int status = TAKEN;
    vf_strmap *seen = NULL;
    vf_archive root = {0}, *archive = NULL; /* what a walk may enter and probe */
    vf_err err;
    *paths = NULL;
    *n_paths = 0;
    *failed = 0;
    if (vfi_strmap_create(&seen) < 0)
        status = -1;
    if (status >= 0 && o->root) {
        char *abs_root = vfi_record_root(o->root);
        if (!abs_root || vfi_archive_init(&root, abs_root, o->follow_links_outside, &err) < 0)
            status = -1;
        vfi_free(abs_root);
        archive = &root;
    }
    walker w = {seen, archive, o};
    for (int i = 0; i < n_args && status >= 0; i++) {
        int r = add_input(&inputs, &w, args[i]);
        status = r < 0 ? r : status == TAKEN ? r : status;
    }
    if (status >= 0 && o->files_from) {
        int r = read_files_from(o->files_from, o->nul_separated, &inputs, &w);
        status = r < 0 ? r : status == TAKEN ? r : status;
    }
    vfi_archive_clear(&root);
    vfi_strmap_free(&seen);
    if (status >= 0 && o->shard_n > 0 && keep_shard(&inputs, o->shard_k, o->shard_n, o->root) < 0)
        status = -1;
    if (status < 0) {
        vf_inputs_free(inputs.items, inputs.n);
        return VF_ERR_NOMEM;
    }
    *paths = inputs.items;
    *n_paths = inputs.n;
    *failed = status == SAID;
    return VF_OK;
}

void vf_inputs_free(char **paths, int n)
{
    for (int i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}

vf_status vf_input_name(const char *path, const char *root, char *buf, size_t size, char *errbuf,
                        size_t errsize)
{
    vf_err err = {VF_OK, ""};
    vf_record_file f = {0};
    char *abs_root = root ? vfi_record_root(root) : NULL;
    vf_status rc = root && !abs_root ? vfi_fail(&err, VF_ERR_NOMEM, "out of memory")
                   : abs_root        ? vfi_record_file_init_root(&f, path, abs_root, &err)
                                     : vfi_record_file_init(&f, path);
    if (rc == VF_ERR_NOMEM && !err.msg[0])
        vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
    if (rc >= 0) {
        const char *name = vfi_record_name(&f) ? vfi_record_name(&f) : "";
        if (!buf || (size_t)snprintf(buf, size, "%s", name) >= size)
            rc = vfi_fail(&err, VF_ERR_INVALID, "%s: a name longer than %zu bytes", path, size);
        vfi_record_file_clear(&f);
    }
    vfi_free(abs_root);
    if (rc < 0 && errbuf && errsize)
        snprintf(errbuf, errsize, "%s", err.msg);
    return rc;
}
