/*
 * status.c - status strings and the vf_err helpers. Stateless; any thread.
 */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *vf_status_str(vf_status s)
{
    switch (s) {
    case VF_OK:
        return "ok";
    case VF_EOF:
        return "end of stream";
    case VF_ERR_INVALID:
        return "invalid argument";
    case VF_ERR_NOMEM:
        return "out of memory";
    case VF_ERR_IO:
        return "i/o error";
    case VF_ERR_DECODE:
        return "decode error";
    case VF_ERR_MODEL:
        return "model error";
    case VF_ERR_UNSUPPORTED:
        return "unsupported";
    case VF_ERR_BACKEND:
        return "backend error";
    case VF_ERR_NO_DEVICE:
        return "no usable device";
    case VF_ERR_NOT_BUILT:
        return "not built";
    case VF_ERR_STORE:
        return "database error";
    case VF_ERR_CANCELLED:
        return "cancelled";
    case VF_ERR_INTERNAL:
        return "internal error";
    case VF_ERR_LEASE:
        return "lease lost to another worker";
    case VF_ERR_DENIED:
        return "refused: outside the archive";
    }
    return "unknown status";
}

vf_status vfi_fail(vf_err *err, vf_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

vf_status vfi_err_prefix(vf_err *err, const char *fmt, ...)
{
    char prefix[VF_ERRMSG_SIZE];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    /* Shift the old message right by strlen(prefix) + 2 and put "prefix: " in front. */
    size_t plen = strlen(prefix), mlen = strlen(err->msg), cap = sizeof(err->msg) - 1;
    if (plen + 2 > cap)
        plen = cap - 2;
    if (plen + 2 + mlen > cap)
        mlen = cap - plen - 2;
    memmove(err->msg + plen + 2, err->msg, mlen);
    memcpy(err->msg, prefix, plen);
    err->msg[plen] = ':';
    err->msg[plen + 1] = ' ';
    err->msg[plen + 2 + mlen] = '\0';
    return err->code;
}

void vfi_err_clear(vf_err *err)
{
    err->code = VF_OK;
    err->msg[0] = '\0';
}
