/*
 * db.c - the public database call of vidfeat.h that is the store's alone: describing a database
 * (vidfeat info).
 */
#include <stdio.h>

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
