/*
 * confine.h - what an input may read (docs/archives.md "What vidfeat reads"): the file opened,
 * and what its format refers to (a playlist's segments, a concat list's entries, an image
 * sequence's other images) only inside the archive; demuxers that open files beyond these checks
 * (DASH, IMF) or run scripts are refused by name and by content. Every input decode.c opens goes
 * through here. Seen by media/'s FFmpeg files only.
 */
#ifndef VIDFEAT_CONFINE_H
#define VIDFEAT_CONFINE_H

#include <libavformat/avformat.h>

#include "core/path.h"
#include "core/status.h"

/* One input's confinement: set up by vfi_confine_open, alive as long as its format context
 * (vfi_confine_clear after closing that). */
typedef struct vf_confine {
    vf_archive own;            /* the file's directory, when no archive was given */
    const vf_archive *archive; /* own or the caller's */
    char *url;                 /* the input's own address: "file:" + path */
    int fd;                    /* the input, opened once (read by FFmpeg as /proc/self/fd/N); -1 */
    char refused[256];         /* the first reference refused, as written; "" none */
    const char *why;           /* what is wrong with it */
    int (*io_open_default)(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                           AVDictionary **options);
} vf_confine;

/* Open path into *fmt (allocated, with pb already set for a pipe, or NULL) under the rule: the
 * archive (NULL: the file's own directory, links not followed out of it) bounds what it may
 * read. The file itself is opened once, inside the archive when one is given (so a link swapped
 * into its name after the caller checked it is refused, not followed), and every check and
 * FFmpeg read that descriptor. Returns FFmpeg's code; a reference refused, before opening or
 * while reading, is in c->refused (vfi_confine_check). */
int vfi_confine_open(AVFormatContext **fmt, const char *path, const vf_archive *archive,
                     vf_confine *c, vf_err *err);
void vfi_confine_clear(vf_confine *c);
/* After opening or reading: the input's reference refused, if any, as its failure
 * (VF_ERR_DENIED naming it). */
vf_status vfi_confine_check(const vf_confine *c, vf_err *err);

/* The demuxer FFmpeg would read path with, judged by its first 4 KiB (and name), or NULL;
 * *score how sure FFmpeg is (AVPROBE_SCORE_MAX: certain). */
const AVInputFormat *vfi_probe_head(const char *path, int *score);

#endif /* VIDFEAT_CONFINE_H */
