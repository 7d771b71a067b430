/*
 * status.h - the error record every module fills, and vfi_fail() to fill it.
 */
#ifndef VIDFEAT_STATUS_H
#define VIDFEAT_STATUS_H

#include "vidfeat.h"

#define VF_ERRMSG_SIZE 512

/* Detail of a failure: the status and one line of text naming what failed. */
typedef struct vf_err {
    vf_status code;
    char msg[VF_ERRMSG_SIZE];
} vf_err;

/* Format the message into err (when err is not NULL) and return code, so that a failure reads as
 * `return vfi_fail(err, VF_ERR_IO, "%s: %s", path, why);`. Long messages are truncated. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
vf_status
vfi_fail(vf_err *err, vf_status code, const char *fmt, ...);

/* Prefix an existing message with "what: " (for context added by a caller); returns err->code. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
vf_status
vfi_err_prefix(vf_err *err, const char *fmt, ...);

/* Reset to VF_OK with an empty message. */
void vfi_err_clear(vf_err *err);

/* For functions with a `vf_status rc` and a `fail:` label that releases what they hold: run
 * call, keep its status in rc and jump to fail when it is a failure. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((rc = (call)) < 0)                                                                     \
            goto fail;                                                                             \
    } while (0)

#endif /* VIDFEAT_STATUS_H */
