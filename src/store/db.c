/*
 * db.c - the public database calls of vidfeat.h that are the store's alone: describing a
 * database (vidfeat info), registering work (vidfeat enqueue), merging (vidfeat merge).
 */
#include <stdio.h>

#include "core/mem.h"
#include "store/record.h"
#include "store/store.h"
#include "vidfeat.h"

vf_status vf_db_describe(const char *db_path, void (*line)(void *user, const char *text),
                         void *user, char *errbuf, size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    if (!db_path || !line)
        return VF_ERR_INVALID;
    vf_status rc = vfi_store_describe(db_path, line, user, &err);
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
