/*
 * index_file.c - a search index file (index.h says its format): the index object as it is kept
 * in memory, read from its file (every count and order checked: the file may be damaged or
 * crafted) and written to it whole, and the temporary files of builds that died cleared.
 * index.c builds, brings up to date and searches them.
 */
#define _XOPEN_SOURCE 700 /* fsync, fileno */
#include "pipeline/index_file.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vidfeat.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/path.h"

#define MAGIC      "VFINDEX\n"
#define FORMAT     1
#define MAX_HEADER (1 << 20)

static int put_u64(FILE *f, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return fwrite(b, 1, 8, f) == 8 ? 0 : -1;
}

static int put_u32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int get_u64(FILE *f, uint64_t *v)
{
    unsigned char b[8];
    if (fread(b, 1, 8, f) != 8)
        return -1;
    *v = 0;
    for (int i = 7; i >= 0; i--)
        *v = *v << 8 | b[i];
    return 0;
}

static int get_u32(FILE *f, uint32_t *v)
{
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4)
        return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

int vfi_index_ext_cmp(const void *a, const void *b)
{
    int64_t x = ((const ext_entry *)a)->id, y = ((const ext_entry *)b)->id;
    return x < y ? -1 : x > y;
}

ext_entry *vfi_index_ext_find(const vfi_index *ix, int64_t id)
{
    ext_entry key = {id, 0, 0};
    return ix->n_ext ? bsearch(&key, ix->ext, (size_t)ix->n_ext, sizeof(key), vfi_index_ext_cmp)
                     : NULL;
}

int vfi_index_ext_add(vfi_index *ix, int64_t id, int64_t vectors, int64_t flags)
{
    ext_entry *e = vfi_grow(ix->ext, &ix->cap_ext, ix->n_ext + 1, sizeof(*e));
    if (!e)
        return -1;
    ix->ext = e;
    ix->ext[ix->n_ext++] = (ext_entry){id, vectors, flags};
    return 0;
}

void vfi_index_free(vfi_index **pix)
{
    vfi_index *ix = pix ? *pix : NULL;
    if (!ix)
        return;
    vfi_ann_free(&ix->ann);
    vfi_free(ix->ext);
    vfi_free(ix->kind);
    vfi_free(ix->path);
    vfi_free(ix);
    *pix = NULL;
}

const char *vfi_index_path(const vfi_index *ix)
{
    return ix->path;
}

int vfi_index_probe(const vfi_index *ix)
{
    return ix->probe;
}

const char *vfi_index_kind(const vfi_index *ix)
{
    return ix->kind;
}

int64_t vfi_index_covers(const vfi_index *ix, int64_t ext)
{
    const ext_entry *e = vfi_index_ext_find(ix, ext);
    return e && !(e->flags & FLAG_HIDDEN) ? e->vectors : 0;
}

int64_t vfi_index_vectors(const vfi_index *ix)
{
    int64_t n = 0;
    for (int64_t i = 0; i < ix->n_ext; i++)
        n += ix->ext[i].flags & FLAG_HIDDEN ? 0 : ix->ext[i].vectors;
    return n;
}

int64_t vfi_index_files(const vfi_index *ix)
{
    int64_t n = 0;
    for (int64_t i = 0; i < ix->n_ext; i++)
        n += !(ix->ext[i].flags & FLAG_HIDDEN);
    return n;
}

/* The ANN index's ids against the table of what it covers: each must be of an extraction the
 * table holds, as many of each as the table says, so that what a search answers is a row the
 * index covers, never nothing because the file said so. */
typedef struct id_check {
    const vfi_index *ix;
    int64_t *count; /* per table entry: its ids seen */
} id_check;

static int check_id(void *user, int64_t id)
{
    id_check *c = user;
    const ext_entry *e = vfi_index_ext_find(c->ix, id >> 32);
    if (!e)
        return 1;
    int64_t *n = &c->count[e - c->ix->ext];
    return ++*n > e->vectors;
}

/* 0 when every id is of an extraction the table covers, as many as it says; 1 when not; -1 out
 * of memory. */
static int ids_outside(const vfi_index *ix)
{
    id_check c = {ix, vfi_calloc((size_t)ix->n_ext + 1, sizeof(int64_t))};
    if (!c.count)
        return -1;
    int rc = vfi_ann_each_id(ix->ann, check_id, &c);
    for (int i = 0; !rc && i < ix->n_ext; i++)
        rc = c.count[i] != ix->ext[i].vectors;
    vfi_free(c.count);
    return rc;
}

/* Does the header describe the model row `row`? (The row's id, file, layer, size, dtype and
 * preprocessing: an index copied beside another database, or of another layer, does not.) */
static vf_status check_model(const vf_json *m, const vfi_held_model *row, const char *path,
                             vf_err *err)
{
    const char *what = NULL;
    if (!m || !vfi_json_is_object(m))
        what = "no model";
    else if ((int64_t)vfi_json_num(m, "id", -1) != row->id)
        what = "another model row";
    else if (strcmp(vfi_json_str(m, "file_sha256", ""), row->sha))
        what = "another model file";
    else if (strcmp(vfi_json_str(m, "layer", ""), row->layer))
        what = "another layer";
    else if ((int)vfi_json_num(m, "dim", -1) != row->dim)
        what = "another vector size";
    else if (strcmp(vfi_json_str(m, "dtype", ""), row->f16 ? "float16" : "float32") ||
             strcmp(vfi_json_str(m, "preprocessing", ""), row->prep))
        what = "another model row";
    if (!what)
        return VF_OK;
    return vfi_fail(err, VF_ERR_INVALID,
                    "%s: an index of %s (%s %s), not of this database's %s %s (vidfeat index "
                    "--rebuild makes it anew)",
                    path, what, m ? vfi_json_str(m, "name", "?") : "?",
                    m ? vfi_json_str(m, "layer", "?") : "?", row->name, row->layer);
}

vf_status vfi_index_open(const char *path, const vfi_held_model *row, int with_ann, vfi_index **out,
                         vf_err *err)
{
    *out = NULL;
    vf_status rc = VF_OK;
    vf_json *head = NULL;
    char *text = NULL;
    vfi_index *ix = vfi_calloc(1, sizeof(*ix));
    if (!ix || !(ix->path = vfi_strdup(path))) {
        vfi_free(ix);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    FILE *f = vfi_fopen_regular(path); /* a path a database names: a FIFO would block */
    if (!f) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s", path,
                      errno == EINVAL ? "not a regular file" : strerror(errno));
        goto fail;
    }
    char magic[8];
    uint32_t format = 0, len = 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MAGIC, 8)) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: not a vidfeat index", path);
        goto fail;
    }
    if (get_u32(f, &format) < 0 || format != FORMAT || get_u32(f, &len) < 0 || len > MAX_HEADER) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: %s", path,
                      format > FORMAT ? "an index made by a newer vidfeat" : "a damaged index");
        goto fail;
    }
    if (!(text = vfi_malloc(len + 1))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    vf_err jerr;
    if (fread(text, 1, len, f) != len || vfi_json_parse(text, len, &head, &jerr) < 0 ||
        !vfi_json_is_object(head)) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: a damaged index (its header)", path);
        goto fail;
    }
    if ((rc = check_model(vfi_json_get(head, "model"), row, path, err)) < 0)
        goto fail;
    ix->model_id = row->id;
    ix->dim = row->dim;
    ix->probe = (int)vfi_json_num(head, "probe", 0);
    if (!(ix->kind = vfi_strdup(vfi_json_str(head, "kind", "")))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    uint64_t n = 0;
    struct stat st;
    if (get_u64(f, &n) < 0 || fstat(fileno(f), &st) != 0 || n > (uint64_t)st.st_size / 24) {
        rc = vfi_fail(err, VF_ERR_STORE, "%s: a damaged index (what it covers)", path);
        goto fail;
    }
    int64_t held = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id, vectors, flags;
        if (get_u64(f, &id) < 0 || get_u64(f, &vectors) < 0 || get_u64(f, &flags) < 0 ||
            (i && (int64_t)id <= ix->ext[i - 1].id) || (int64_t)vectors < 0) {
            rc = vfi_fail(err, VF_ERR_STORE, "%s: a damaged index (what it covers)", path);
            goto fail;
        }
        if (vfi_index_ext_add(ix, (int64_t)id, (int64_t)vectors, (int64_t)flags) < 0) {
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            goto fail;
        }
        held += (int64_t)vectors;
    }
    if (with_ann) {
        vf_err why;
        if (vfi_ann_read(f, &ix->ann, &why) < 0) {
            rc = vfi_fail(err, why.code == VF_ERR_NOMEM ? VF_ERR_NOMEM : VF_ERR_STORE,
                          "%s: a damaged index (%s)", path, why.msg);
            goto fail;
        }
        if (vfi_ann_count(ix->ann) != held) {
            rc = vfi_fail(err, VF_ERR_STORE,
                          "%s: a damaged index (it holds %lld vectors, its table says %lld)", path,
                          (long long)vfi_ann_count(ix->ann), (long long)held);
            goto fail;
        }
        int outside = ids_outside(ix);
        if (outside) {
            rc = outside < 0 ? vfi_fail(err, VF_ERR_NOMEM, "out of memory")
                             : vfi_fail(err, VF_ERR_STORE,
                                        "%s: a damaged index (its vectors name rows it does not "
                                        "cover); vidfeat index builds it again",
                                        path);
            goto fail;
        }
    }
    fclose(f);
    vfi_free(text);
    vfi_json_free(&head);
    *out = ix;
    return VF_OK;
fail:
    if (f)
        fclose(f);
    vfi_free(text);
    vfi_json_free(&head);
    vfi_index_free(&ix);
    return rc;
}

/* A header as JSON text into a new string (*len bytes). */
static char *header_text(const vfi_index *ix, const vfi_held_model *row, const char *database,
                         int64_t vectors, int64_t files, size_t *len)
{
    vf_json *h = vfi_json_new_object(), *m = vfi_json_new_object();
    char now[32];
    vfi_now_iso(now, sizeof(now));
    int bad = vfi_json_add(h, "model", m) < 0;
    bad |= vfi_json_add_int(m, "id", row->id) < 0;
    bad |= vfi_json_add_str(m, "name", row->name) < 0;
    bad |= vfi_json_add_str(m, "file_sha256", row->sha) < 0;
    bad |= vfi_json_add_str(m, "layer", row->layer) < 0;
    bad |= vfi_json_add_int(m, "dim", row->dim) < 0;
    bad |= vfi_json_add_str(m, "dtype", row->f16 ? "float16" : "float32") < 0;
    bad |= vfi_json_add_str(m, "preprocessing", row->prep) < 0;
    bad |= vfi_json_add_str(h, "kind", ix->kind) < 0;
    bad |= vfi_json_add_int(h, "probe", ix->probe) < 0;
    bad |= vfi_json_add_int(h, "vectors", vectors) < 0;
    bad |= vfi_json_add_int(h, "files", files) < 0;
    bad |= vfi_json_add_str(h, "database", database) < 0;
    bad |= vfi_json_add_str(h, "built_at", now) < 0;
    bad |= vfi_json_add_str(h, "vidfeat_version", vf_version()) < 0;
    char *text = NULL;
    FILE *f = bad ? NULL : open_memstream(&text, len);
    if (f) {
        bad = vfi_json_write(f, h, 0) < 0;
        bad |= fclose(f) != 0;
    }
    vfi_json_free(&h);
    if (bad || !f) {
        free(text); /* open_memstream's */
        return NULL;
    }
    char *out = vfi_malloc(*len + 1);
    if (out)
        memcpy(out, text, *len + 1);
    free(text);
    return out;
}

vf_status vfi_index_write(const vfi_index *ix, const vfi_held_model *row, const char *path,
                          const char *database, int64_t *bytes, vf_err *err)
{
    size_t len = 0;
    char *head = header_text(ix, row, database, vfi_index_vectors(ix), vfi_index_files(ix), &len);
    if (!head)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    FILE *f = NULL;
    char *tmp = NULL;
    vf_status rc = vfi_replace_open(path, &f, &tmp, err);
    if (rc < 0) {
        vfi_free(head);
        return rc;
    }
    int bad = fwrite(MAGIC, 1, 8, f) != 8 || put_u32(f, FORMAT) < 0 ||
              put_u32(f, (uint32_t)len) < 0 || fwrite(head, 1, len, f) != len ||
              put_u64(f, (uint64_t)ix->n_ext) < 0;
    for (int64_t i = 0; !bad && i < ix->n_ext; i++)
        bad = put_u64(f, (uint64_t)ix->ext[i].id) < 0 ||
              put_u64(f, (uint64_t)ix->ext[i].vectors) < 0 ||
              put_u64(f, (uint64_t)ix->ext[i].flags) < 0;
    vfi_free(head);
    vf_err why = {VF_OK, ""};
    if (!bad && vfi_ann_write(ix->ann, f, &why) < 0)
        bad = 1;
    if (!bad)
        bad = fflush(f) != 0 || fsync(fileno(f)) != 0; /* whole on disk before it is renamed */
    if (bad) {
        int e = errno;
        fclose(f);
        remove(tmp);
        vfi_free(tmp);
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, why.msg[0] ? why.msg : strerror(e));
    }
    *bytes = ftell(f);
    return vfi_replace_close(f, tmp, path, err);
}

void vfi_index_clear_temporaries(const char *path)
{
    char *dir = vfi_strdup(path);
    if (!dir)
        return;
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (slash)
        slash[slash == dir] = '\0';
    DIR *d = opendir(slash ? dir : ".");
    size_t blen = strlen(base);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *tail = e->d_name + blen;
        if (strncmp(e->d_name, base, blen) || strncmp(tail, ".tmp", 4) || !tail[4] ||
            strspn(tail + 4, "0123456789") != strlen(tail + 4))
            continue;
        long pid = strtol(tail + 4, NULL, 10);
        if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
            char *stale = vfi_malloc(strlen(dir) + strlen(e->d_name) + 2);
            if (stale) {
                sprintf(stale, "%s/%s", slash ? dir : ".", e->d_name);
                remove(stale);
            }
            vfi_free(stale);
        }
    }
    if (d)
        closedir(d);
    vfi_free(dir);
}
