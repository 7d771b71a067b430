/*
 * confine.c - what an input may read (confine.h; docs/archives.md "What vidfeat reads").
 *
 * The file opened, and what its format refers to only inside the archive. Every file a
 * demuxer opens goes through its context's io_open; ours (confined_open) lets through the
 * input's own address and, through the file protocol (or the crypto protocol over it, for
 * HLS's encrypted segments), files inside the archive, each opened once beneath it following no
 * link (vfi_archive_open) and read by FFmpeg through that descriptor (/proc/self/fd/N), so a
 * link swapped in after the check cannot lead the read out; the input itself is opened so too,
 * when the caller gives an archive, and its checks here read the same descriptor. Inline
 * data: addresses read nothing. Anything else is refused and remembered, so the input fails
 * naming it. The protocol whitelist (copied by FFmpeg into every context a demuxer makes) keeps
 * every other protocol out, also where a nested context has FFmpeg's own io_open.
 *
 * The one demuxer whose nested contexts do not carry io_open is concat: its list is read here
 * first (with FFmpeg's own tokenizer, as the demuxer reads it), each entry must be inside the
 * archive and must not itself be a list of other files (its references would escape us).
 * FFmpeg's "safe" mode (absolute names, "..", protocols) stays on beneath that.
 */
#include "media/confine.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavutil/avstring.h>
#include <libavutil/bprint.h>

#include "core/mem.h"

#define ALLOWED_PROTOCOLS "file,crypto,data"
/* Demuxers that open other files on their own (not through the context's io_open, so beyond
 * the archive's checks: FFmpeg 5.1's DASH reads its segments itself) or run scripts: never used,
 * whatever a file is named or holds. The others are allowed by name (format_allowlist). */
#define REFUSED_FORMATS "dash,imf,avisynth,vapoursynth"
#define CONCAT_MAGIC    "ffconcat version"

static void refuse(vf_confine *c, const char *why, const char *ref)
{
    if (c->refused[0])
        return;
    c->why = why;
    av_strstart(ref, "file:", &ref); /* the protocol is ours (open_confined), not the file's */
    snprintf(c->refused, sizeof(c->refused), "%s", ref);
}

/* Has url a protocol prefix, as FFmpeg's url_find_protocol reads one ("subfile,..." too)? */
static int has_protocol(const char *url)
{
    size_t n = 0;
    while (isalnum((unsigned char)url[n]) || url[n] == '+' || url[n] == '-' || url[n] == '.')
        n++;
    return (n > 0 && url[n] == ':') || av_strstart(url, "subfile,", NULL);
}

/* A descriptor's address made here (file: or crypto+file: over /proc/self/fd/N) opened as
 * FFmpeg's own io_open would, but without its "Opening ... for reading" line, which it writes at
 * info level for every address that is not the input's own name. */
static int open_descriptor(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                           AVDictionary **options)
{
    return avio_open2(pb, url, flags, &s->interrupt_callback, options);
}

static int confined_open(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                         AVDictionary **options)
{
    vf_confine *c = s->opaque;
    if (!c || !c->io_open_default) /* a nested context that did not carry ours: never */
        return AVERROR(EPERM);
    if (!strcmp(url, c->url) && !(flags & AVIO_FLAG_WRITE)) { /* the input: its descriptor */
        if (c->fd < 0)
            return c->io_open_default(s, pb, url, flags, options);
        char own[64];
        snprintf(own, sizeof(own), "file:/proc/self/fd/%d", c->fd);
        return open_descriptor(s, pb, own, flags, options);
    }
    if (av_strstart(url, "data:", NULL) && !(flags & AVIO_FLAG_WRITE))
        return c->io_open_default(s, pb, url, flags, options);
    const char *inner = url, *path = NULL;
    int crypto = av_strstart(url, "crypto+", &inner) || av_strstart(url, "crypto:", &inner);
    if (!av_strstart(inner, "file:", &path))
        path = has_protocol(inner) ? NULL : inner;
    if (!path || flags & AVIO_FLAG_WRITE) {
        refuse(c, "refers to something other than a file", url);
        return AVERROR(EPERM);
    }
    if (!path[0])
        return AVERROR(ENOENT);
    int fd;
    int inside = vfi_archive_open(c->archive, path, O_RDONLY | O_NONBLOCK, &fd);
    if (inside == 0) {
        refuse(c, "refers to a file outside the archive", url);
        return AVERROR(EPERM);
    }
    if (inside < 0 && errno == ELOOP) {
        refuse(c, "refers to a file whose name changed to lead out of the archive", url);
        return AVERROR(EPERM);
    }
    if (inside < 0) /* not there (as FFmpeg would find it), unreadable, out of memory */
        return AVERROR(errno);
    /* FFmpeg reads the descriptor just opened and checked, not a name whose links could be
     * changed before it follows them */
    char open_url[64];
    snprintf(open_url, sizeof(open_url), "%sfile:/proc/self/fd/%d", crypto ? "crypto+" : "", fd);
    int ret = open_descriptor(s, pb, open_url, flags, options);
    close(fd);
    return ret;
}

/* The start of the file open on fd, up to size - 1 bytes, NUL-terminated; 0 when unreadable. */
static size_t fd_head(int fd, char *buf, size_t size)
{
    size_t n = 0;
    while (n < size - 1) {
        ssize_t r = pread(fd, buf + n, size - 1 - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

/* The same of the file at path (O_NONBLOCK: a FIFO named so does not hang the probe). */
static size_t file_head(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    size_t n = fd >= 0 ? fd_head(fd, buf, size) : 0;
    if (fd >= 0)
        close(fd);
    buf[n] = '\0';
    return n;
}

/* What FFmpeg would read a file with, given its first bytes: *score how sure it is. */
static const AVInputFormat *probe_bytes(const char *path, char *head, size_t n, int *score)
{
    AVProbeData pd = {path, (unsigned char *)head, (int)n, NULL};
    *score = 0;
    return av_probe_input_format2(&pd, 1, score);
}

const AVInputFormat *vfi_probe_head(const char *path, int *score)
{
    char head[4096 + AVPROBE_PADDING_SIZE];
    memset(head, 0, sizeof(head));
    return probe_bytes(path, head, file_head(path, head, 4096 + 1), score);
}

/* Would FFmpeg read the file at path as a list of other files? */
static int is_list_of_files(const char *path)
{
    static const char *const lists[] = {"concat", "hls", "dash", "imf"};
    int score;
    const AVInputFormat *f = vfi_probe_head(path, &score);
    for (size_t i = 0; f && i < sizeof(lists) / sizeof(lists[0]); i++)
        if (av_match_name(lists[i], f->name))
            return 1;
    return 0;
}

/* A concat list's entries, each inside the archive and not a list itself; the first that is
 * not is refused (c->refused). Entries are read as the demuxer reads them: a keyword, then
 * FFmpeg's token (quotes and backslashes), names relative to the list's directory. */
static vf_status check_concat_list(vf_confine *c, const char *path, vf_err *err)
{
    int fd = dup(c->fd); /* the list FFmpeg will read, read from the start */
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return VF_OK; /* FFmpeg says why, when it opens it */
    }
    rewind(f);
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    char *line = NULL;
    size_t cap = 0;
    vf_status rc = VF_OK;
    while (rc >= 0 && !c->refused[0] && getline(&line, &cap, f) > 0) {
        const char *cur = line + strspn(line, " \t\r\n");
        if (strncmp(cur, "file", 4) || !strchr(" \t", cur[4]))
            continue;
        cur += 4;
        cur += strspn(cur, " \t");
        char *name = av_get_token(&cur, " \t\r\n");
        char *entry = name && name[0] != '/' ? av_asprintf("%.*s%s", dir_len, path, name) : NULL;
        if (!name || (name[0] != '/' && !entry)) {
            rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        } else if (name[0]) {
            const char *at = entry ? entry : name;
            int inside = vfi_archive_holds(c->archive, at, NULL);
            if (inside < 0)
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            else if (!inside)
                refuse(c, "refers to a file outside the archive", name);
            else if (is_list_of_files(at))
                refuse(c, "lists a playlist or list of other files, which is not read", name);
        }
        av_free(entry);
        av_free(name);
    }
    free(line);
    fclose(f);
    return rc;
}

/* Every demuxer's name but REFUSED_FORMATS', comma-separated, as FFmpeg's format_whitelist
 * takes them (it also passes to the inputs a playlist opens). A new string (av_free), NULL. */
static char *format_allowlist(void)
{
    AVBPrint b;
    av_bprint_init(&b, 0, AV_BPRINT_SIZE_UNLIMITED);
    void *it = NULL;
    const AVInputFormat *f;
    while ((f = av_demuxer_iterate(&it))) {
        if (av_match_list(f->name, REFUSED_FORMATS, ',') > 0)
            continue;
        av_bprintf(&b, "%s%s", b.len ? "," : "", f->name);
    }
    char *s = NULL;
    if (!av_bprint_is_complete(&b) || av_bprint_finalize(&b, &s) < 0)
        return NULL;
    return s;
}

/* The refused demuxer FFmpeg would read the input with, by its content, or NULL. */
static const char *refused_format(const vf_confine *c, const char *path)
{
    char head[4096 + AVPROBE_PADDING_SIZE];
    memset(head, 0, sizeof(head));
    int score;
    const AVInputFormat *f = probe_bytes(path, head, fd_head(c->fd, head, 4096 + 1), &score);
    return f && av_match_list(f->name, REFUSED_FORMATS, ',') > 0 ? f->name : NULL;
}

/* The input opened once, into c->fd, for FFmpeg and the checks here to read: inside the caller's
 * archive (a link swapped in since the caller's check makes it fail), or as the user named it
 * (no archive: nothing to be inside of). 0, or FFmpeg's code having refused it (c->refused). */
static int open_input(vf_confine *c, const char *path, const vf_archive *archive)
{
    int opened = -1;
    if (archive)
        opened = vfi_archive_open(archive, path, O_RDONLY | O_NONBLOCK, &c->fd);
    else if ((c->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) >= 0)
        opened = 1;
    if (opened == 0 || (opened < 0 && errno == ELOOP)) {
        refuse(c,
               opened == 0 ? "is outside the archive"
                           : "changed while it was opened: a link in its name now leads out of "
                             "the archive",
               path);
        return AVERROR(EPERM);
    }
    return opened < 0 ? AVERROR(errno) : 0;
}

int vfi_confine_open(AVFormatContext **fmt, const char *path, const vf_archive *archive,
                     vf_confine *c, vf_err *err)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    if (!*fmt && !(*fmt = avformat_alloc_context()))
        return AVERROR(ENOMEM);
    if ((*fmt)->pb) /* the caller's I/O, also if this returns before FFmpeg would mark it */
        (*fmt)->flags |= AVFMT_FLAG_CUSTOM_IO;
    c->archive = archive;
    if (!archive) {
        const char *slash = strrchr(path, '/');
        char *dir = slash ? av_strndup(path, (size_t)(slash - path) + (slash == path)) : NULL;
        if ((slash && !dir) || vfi_archive_init(&c->own, dir ? dir : ".", 0, err) < 0) {
            av_free(dir);
            return AVERROR(ENOMEM);
        }
        av_free(dir);
        c->archive = &c->own;
    }
    if (!(c->url = av_asprintf("file:%s", path)))
        return AVERROR(ENOMEM);
    int ret = (*fmt)->pb ? 0 : open_input(c, path, archive);
    if (ret < 0)
        return ret;
    char head[sizeof(CONCAT_MAGIC)];
    struct stat st;
    int regular = c->fd >= 0 && fstat(c->fd, &st) == 0 && S_ISREG(st.st_mode);
    if (regular && fd_head(c->fd, head, sizeof(head)) == sizeof(head) - 1 &&
        !strcmp(head, CONCAT_MAGIC) && check_concat_list(c, path, err) < 0)
        return AVERROR(ENOMEM);
    const char *banned = regular ? refused_format(c, path) : NULL;
    if (banned)
        refuse(c,
               "not read: FFmpeg's demuxer for it opens the files it lists beyond vidfeat's "
               "checks (docs/security.md)",
               banned);
    if (c->refused[0])
        return AVERROR(EPERM);
    c->io_open_default = (*fmt)->io_open;
    (*fmt)->io_open = confined_open;
    (*fmt)->opaque = c;
    AVDictionary *opts = NULL;
    char *formats = format_allowlist();
    ret =
        formats ? av_dict_set(&opts, "protocol_whitelist", ALLOWED_PROTOCOLS, 0) : AVERROR(ENOMEM);
    if (ret >= 0)
        ret = av_dict_set(&opts, "format_whitelist", formats, AV_DICT_DONT_STRDUP_VAL);
    else
        av_free(formats);
    if (ret >= 0)
        ret = av_dict_set(&opts, "safe", "1", 0); /* concat's own check, beneath ours */
    if (ret >= 0)
        ret = avformat_open_input(fmt, c->url, NULL, &opts);
    av_dict_free(&opts);
    return ret;
}

void vfi_confine_clear(vf_confine *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    vfi_archive_clear(&c->own);
    av_freep(&c->url);
}

vf_status vfi_confine_check(const vf_confine *c, vf_err *err)
{
    if (!c->refused[0])
        return VF_OK;
    return vfi_fail(err, VF_ERR_DENIED, "%s: %s", c->why, c->refused);
}
