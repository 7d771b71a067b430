/*
 * registry.c - the kinds of store compiled in, and the one a database's name picks.
 */
#include <stdio.h>
#include <string.h>

#include "store/store.h"
#include "store/store_pg.h"
#include "store/store_sqlite.h"

/* Asked in order; SQLite takes what none before it claims. */
static const vf_store_ops *const kinds[] = {&vfi_store_pg, &vfi_store_sqlite};

const vf_store_ops *vfi_store_kind(const char *target, vf_err *err)
{
    if (!target || !target[0]) {
        vfi_fail(err, VF_ERR_INVALID, "no database named");
        return NULL;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (kinds[i]->claims(target))
            return kinds[i];
    }
    size_t scheme = vfi_store_uri_scheme(target);
    vfi_fail(err, VF_ERR_NOT_BUILT,
             "%.*s: no store for %.*s:// databases in this build (a file path means SQLite)",
             (int)(scheme ? scheme + 3 : strlen(target)), target, (int)scheme, target);
    return NULL;
}

const char *vfi_store_display(const char *target, char *buf, size_t size)
{
    vf_err ignore;
    const vf_store_ops *kind = target ? vfi_store_kind(target, &ignore) : NULL;
    if (kind)
        kind->display(target, buf, size);
    else
        snprintf(buf, size, "%s", target ? target : "");
    return buf;
}

int vfi_store_has_password(const char *target)
{
    vf_err ignore;
    const vf_store_ops *kind = target ? vfi_store_kind(target, &ignore) : NULL;
    return kind && kind->has_password ? kind->has_password(target) : 0;
}

vf_status vfi_store_open(const char *target, vf_store_mode mode, vf_store **out, vf_err *err)
{
    *out = NULL;
    const vf_store_ops *kind = vfi_store_kind(target, err);
    return kind ? kind->open(target, mode, out, err) : err->code;
}

void vfi_store_close(vf_store **ps)
{
    if (ps && *ps) {
        (*ps)->ops->close(*ps);
        *ps = NULL;
    }
}

vf_status vfi_store_inspect(const char *target, const vf_db_visitor *v, vf_err *err)
{
    const vf_store_ops *kind = vfi_store_kind(target, err);
    return kind ? kind->inspect(target, v, err) : err->code;
}

const char *vfi_store_versions(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && n < size; i++) {
        char version[64];
        kinds[i]->version(version, sizeof(version));
        n += (size_t)snprintf(buf + n, size - n, "%s%s %s", i ? ", " : "", kinds[i]->name, version);
    }
    return buf;
}
