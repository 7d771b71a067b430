/*
 * db.c - the public database calls of vidfeat.h that are the store's alone: describing a
 * database (vidfeat info) and adding a benchmark record (vidfeat bench -o).
 */
#include <stdio.h>

#include "store/store_sqlite.h"
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

vf_status vf_db_add_run(const char *db_path, const vf_bench_record *run, char *errbuf,
                        size_t errbuf_size)
{
    vf_err err = {VF_OK, ""};
    if (!db_path || !run || !run->device || !run->model || !run->precision || !run->mode)
        return VF_ERR_INVALID;
    vf_store *s = NULL;
    vf_status rc = vfi_store_open(db_path, &s, &err);
    if (rc >= 0)
        rc = vfi_store_add_run(s, run, vf_version(), &err);
    vfi_store_close(&s);
    if (rc < 0 && errbuf && errbuf_size)
        snprintf(errbuf, errbuf_size, "%s", err.msg);
    return rc;
}
