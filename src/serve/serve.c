/*
 * serve.c - vf_server: the page and its JSON API over one database (docs/serve.md).
 *
 *   GET  /, /app.js, /app.css          the page (assets.h)
 *   GET  /api/search?text=T&k=N        similar --text T --json's document
 *   GET  /api/similar?path=P&t=S&k=N   "more like this": similar --video P --at S (stored only)
 *   POST /api/similar?k=N              an image in the body: similar --image's document
 *   GET  /api/matches[?path=P]         matches --json's document (P: one stored file's)
 *   GET  /api/status                   info's records: summary, failed and unfinished files,
 *                                      indexes
 *   GET  /api/thumb?path=P&t=S         the frame at S as a JPEG (cached)
 *   GET  /api/video?path=P             the file itself, with byte ranges
 *
 * Only files the database holds vectors of and that lie under the root (links resolved) are
 * read; every other URL answers 404 and nothing lists a directory. Each request is shown to the
 * door (admit) before its body is read: only names of this server's (its address, localhost,
 * --allow-host's) are answered, other sites' pages may load the page but not call the API, and
 * off loopback a token is asked (a cookie the page sets from ?token=, or a bearer header),
 * compared in constant time. The
 * database is opened read-only by each request (session.h), so runs writing it are not blocked.
 */
#define _DEFAULT_SOURCE /* realpath, mkdtemp */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/doc.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "pipeline/session.h"
#include "serve/assets.h"
#include "serve/http.h"
#include "serve/thumbs.h"

#define DEFAULT_BIND        "127.0.0.1"
#define DEFAULT_MAX_UPLOAD  (32 << 20)
#define DEFAULT_THUMB_CACHE (64 << 20)
#define MAX_K               1000
#define MAX_LISTED          50 /* failed and unfinished files the status lists */
#define MAX_UPLOADS         4  /* uploads held in memory at once */
#define MAX_CONNECTIONS     256
#define MAX_PER_CLIENT      32 /* a browser opens 6 to 10 at most */
#define TIMEOUT_S           60
#define TOKEN_COOKIE                                                                               \
    "vidfeat_token_" /* and the port: a cookie is scoped to a host,                                \
                      * not its port (RFC 6265 8.5), so two servers                                \
                      * of one machine keep their tokens apart */

static const char *const security_headers[] = {
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' blob:; media-src 'self'; connect-src 'self'; form-action 'none'; "
    "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options: nosniff",
    "Referrer-Policy: no-referrer",
    "Cross-Origin-Resource-Policy: same-origin",
    "X-Frame-Options: DENY",
    NULL};

struct vf_server {
    char bind[64];     /* the address listened on ("localhost" as 127.0.0.1) */
    int bind_any;      /* it is 0.0.0.0 or ::: every address of this machine */
    char *allow_hosts; /* more names answered, comma-separated (--allow-host), or NULL */
    char *db;
    char *db_real;      /* its real path, or NULL */
    char *root;         /* realpath of the root */
    vf_archive archive; /* the root, as files are opened beneath it (path.h) */
    char *token;
    char *upload_dir; /* a private directory for uploaded queries */
    int64_t max_upload;
    vf_config cfg; /* the session's (its strings borrowed from it) */
    vfi_session *session;
    vfs_thumbs *thumbs;
    pthread_mutex_t upload_lock;  /* one uploaded query extracted at a time */
    pthread_mutex_t matches_lock; /* one archive-wide alignment at a time (it holds vectors) */
    vfs_http *http;
};

/* ---- replies ---- */

static void reply_text(vfs_req *r, int status, const char *msg)
{
    vfs_reply(r, status, "text/plain; charset=utf-8", msg, strlen(msg),
              (const char *const[]){"Cache-Control: no-store", NULL});
}

/* doc (taken over, also on failure) as the reply with status; NULL or bad (a member that could
 * not be added): out of memory. */
static void reply_json(vfs_req *r, int status, vf_json *doc, int bad)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = doc && !bad ? open_memstream(&text, &len) : NULL;
    int ok = f && vfi_json_write(f, doc, 0) == 0;
    if (f)
        fclose(f);
    if (ok)
        vfs_reply(r, status, "application/json", text, len,
                  (const char *const[]){"Cache-Control: no-store", NULL});
    else
        reply_text(r, 500, "out of memory\n");
    free(text); /* open_memstream's */
    vfi_json_free(&doc);
}

/* {"error": msg} with status. */
static void reply_error(vfs_req *r, int status, const char *msg)
{
    vf_json *o = vfi_json_new_object();
    reply_json(r, status, o, vfi_json_add_str(o, "error", msg) < 0);
}

/* Every from in msg (of size bytes) said as to, as far as msg has room. */
static void say_as(char *msg, size_t size, const char *from, const char *to)
{
    size_t nf = from ? strlen(from) : 0, nt = strlen(to);
    for (char *at = nf ? strstr(msg, from) : NULL; at; at = strstr(at + nt, from)) {
        size_t rest = strlen(at + nf);
        if ((size_t)(at - msg) + nt + rest >= size)
            return;
        memmove(at + nt, at + nf, rest + 1);
        memcpy(at, to, nt);
    }
}

/* A failed call's message (msg, of size bytes) told to the page: the server's own paths are
 * none of its business, so the database is "the database", the archive's files are named as
 * the page names them (beneath the root) and the private upload directory is not named. */
static void reply_failed(const vf_server *srv, vfs_req *r, int status, char *msg, size_t size)
{
    char root[PATH_MAX + 1];
    snprintf(root, sizeof(root), "%s/", srv->root);
    say_as(msg, size, srv->upload_dir, "the server's upload directory");
    say_as(msg, size, srv->db_real, "the database");
    say_as(msg, size, srv->db, "the database");
    say_as(msg, size, root, "");
    reply_error(r, status, msg);
}

/* The HTTP status of a failed call's status. */
static int http_status(vf_status rc)
{
    switch (rc) {
    case VF_ERR_INVALID:
    case VF_ERR_DECODE:
    case VF_ERR_MODEL:
        return 400;
    case VF_ERR_NOMEM:
        return 503;
    default:
        return 500;
    }
}

/* ---- arguments ---- */

/* k=N (1..MAX_K; absent: def); -1 when malformed. */
static int arg_k(const vfs_req *r, int def)
{
    const char *s = vfs_req_arg(r, "k");
    if (!s)
        return def;
    char *end;
    errno = 0;
    long k = strtol(s, &end, 10);
    return errno || !*s || *end || k < 1 || k > MAX_K ? -1 : (int)k;
}

/* t=S seconds (>= 0, finite; absent: 0); -1 when malformed. */
static double arg_t(const vfs_req *r)
{
    const char *s = vfs_req_arg(r, "t");
    if (!s)
        return 0.0;
    char *end;
    errno = 0;
    double t = strtod(s, &end);
    return errno || !*s || *end || !isfinite(t) || t < 0.0 || t > 1e9 ? -1.0 : t;
}

/* ---- the archive's files ---- */

/* The file the database stores as `path`, when it holds vectors of it and it lies under the
 * root: opened (read-only, not following a last link) into *fd, its size into *size, and its
 * real path into real (PATH_MAX). 404 (or 500) otherwise, replied. */
static int open_archive_file(vf_server *srv, vfs_req *r, const char *path, int *fd, int64_t *size,
                             char *real)
{
    if (!path || !path[0]) {
        reply_error(r, 400, "a path is needed");
        return -1;
    }
    vf_store_ref ref;
    int found = 0;
    vf_err err = {0};
    if (vfi_session_stored(srv->session, path, 0.0, &ref, &found, &err) < 0) {
        reply_failed(srv, r, 500, err.msg, sizeof(err.msg));
        return -1;
    }
    char joined[PATH_MAX];
    int n = path[0] == '/' ? snprintf(joined, sizeof(joined), "%s", path)
                           : snprintf(joined, sizeof(joined), "%s/%s", srv->root, path);
    struct stat st;
    *fd = -1;
    /* opened beneath the root following no link: one swapped in after the name was resolved
     * makes the open fail, so what is read is what was checked (the descriptor, never the name
     * again) */
    if (!found || n < 0 || (size_t)n >= sizeof(joined) ||
        vfi_archive_open(&srv->archive, joined, O_RDONLY | O_NONBLOCK, fd) <= 0 ||
        !realpath(joined, real) || fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (*fd >= 0)
            close(*fd);
        reply_error(r, 404, "no such file in this archive");
        return -1;
    }
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    *size = (int64_t)st.st_size;
    return 0;
}

/* What a browser is told a video is, by its name (it sniffs nothing: nosniff). */
static const char *video_type(const char *path)
{
    static const char *const types[][2] = {{".mp4", "video/mp4"},        {".m4v", "video/mp4"},
                                           {".mov", "video/quicktime"},  {".webm", "video/webm"},
                                           {".mkv", "video/x-matroska"}, {".ogv", "video/ogg"},
                                           {".ogg", "video/ogg"},        {".m4a", "audio/mp4"},
                                           {".mp3", "audio/mpeg"},       {".wav", "audio/wav"}};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        size_t e = strlen(types[i][0]);
        if (n > e && !strcasecmp(path + n - e, types[i][0]))
            return types[i][1];
    }
    return "application/octet-stream";
}

static void api_video(vf_server *srv, vfs_req *r)
{
    int fd;
    int64_t size;
    char real[PATH_MAX];
    if (open_archive_file(srv, r, vfs_req_arg(r, "path"), &fd, &size, real) == 0)
        vfs_reply_file(r, fd, size, video_type(real));
}

static void api_thumb(vf_server *srv, vfs_req *r)
{
    double t = arg_t(r);
    if (t < 0.0) {
        reply_error(r, 400, "t must be seconds >= 0");
        return;
    }
    int fd;
    int64_t size;
    char real[PATH_MAX];
    if (open_archive_file(srv, r, vfs_req_arg(r, "path"), &fd, &size, real) < 0)
        return;
    close(fd); /* the decoder opens it again beneath the root, no link followed (thumbs.h) */
    uint8_t *jpeg = NULL;
    size_t len = 0;
    vf_err err = {0};
    vf_status rc = vfs_thumbs_get(srv->thumbs, real, t, &jpeg, &len, &err);
    if (rc < 0) {
        reply_failed(srv, r, rc == VF_ERR_NOMEM ? 503 : 404, err.msg, sizeof(err.msg));
        return;
    }
    vfs_reply(r, 200, "image/jpeg", jpeg, len,
              (const char *const[]){"Cache-Control: private, max-age=3600", NULL});
    vfi_free(jpeg);
}

/* ---- searches ---- */

typedef struct hits {
    vf_json *list;
    int n, bad;
} hits;

static void on_hit(void *user, const vf_neighbour *n)
{
    hits *h = user;
    h->bad |= vfi_json_push(h->list, vfi_doc_neighbour(n, ++h->n)) < 0;
}

static void api_search(vf_server *srv, vfs_req *r)
{
    const char *text = vfs_req_arg(r, "text");
    int k = arg_k(r, 24);
    char why[256];
    if (!text || k < 0) {
        reply_error(r, 400, !text ? "text is needed" : "k must be 1..1000");
        return;
    }
    if (vf_text_check(text, why, sizeof(why)) < 0) {
        reply_error(r, 400, why);
        return;
    }
    const char *texts[1] = {text};
    vf_similar_stats st;
    vf_similar_query q = {.texts = texts, .n_texts = 1, .k = k, .stats = &st};
    hits h = {vfi_json_new_array(), 0, 0};
    vf_err err = {0};
    vf_status rc = vfi_session_similar(srv->session, &q, 1, on_hit, &h, NULL, &err);
    if (rc < 0) {
        vfi_json_free(&h.list);
        reply_failed(srv, r, http_status(rc), err.msg, sizeof(err.msg));
        return;
    }
    vf_json *doc = vfi_doc_similar(h.list, NULL, text, &st);
    reply_json(r, 200, doc, h.bad);
}

/* The uploaded image written to a new file of the private directory; its name into path. */
static vf_status save_upload(vf_server *srv, const uint8_t *data, size_t len, char *path,
                             size_t size, vf_err *err)
{
    snprintf(path, size, "%s/query-XXXXXX", srv->upload_dir);
    int fd = mkstemp(path);
    if (fd < 0)
        return vfi_fail(err, VF_ERR_IO, "the upload cannot be kept: %s", strerror(errno));
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(path);
            return vfi_fail(err, VF_ERR_IO, "the upload cannot be kept: %s", strerror(e));
        }
        done += (size_t)w;
    }
    close(fd);
    return VF_OK;
}

/* msg with the upload's temporary name said as "the upload" (its name means nothing to the
 * page, and the server's directories are none of its business). */
static void unname_upload(char *msg, const char *upload)
{
    char *at = strstr(msg, upload);
    if (!at)
        return;
    char rest[sizeof(((vf_err *)0)->msg)];
    snprintf(rest, sizeof(rest), "%s", at + strlen(upload));
    snprintf(at, sizeof(((vf_err *)0)->msg) - (size_t)(at - msg), "the upload%s", rest);
}

static void api_similar(vf_server *srv, vfs_req *r)
{
    int k = arg_k(r, 24);
    if (k < 0) {
        reply_error(r, 400, "k must be 1..1000");
        return;
    }
    vf_similar_stats st;
    vf_similar_query q = {.k = k, .stats = &st};
    hits h = {vfi_json_new_array(), 0, 0};
    vf_neighbour src = {0};
    vf_err err = {0};
    vf_status rc;
    char upload[PATH_MAX] = "";
    if (!strcmp(vfs_req_method(r), "POST")) { /* an image: extracted now, as an archive file */
        size_t len;
        const uint8_t *body = vfs_req_body(r, &len);
        if (!len) {
            vfi_json_free(&h.list);
            reply_error(r, 400, "an image is needed in the request's body");
            return;
        }
        rc = save_upload(srv, body, len, upload, sizeof(upload), &err);
        if (rc >= 0) {
            q.image = upload;
            pthread_mutex_lock(&srv->upload_lock);
            rc = vfi_session_similar(srv->session, &q, 0, on_hit, &h, &src, &err);
            pthread_mutex_unlock(&srv->upload_lock);
            unlink(upload);
            src.path = "upload";
            if (rc == VF_ERR_DECODE || rc == VF_ERR_IO) {
                snprintf(err.msg, sizeof(err.msg), "the upload is not a picture vidfeat reads");
            } else if (rc == VF_ERR_DENIED) { /* a playlist or list: the client's mistake */
                rc = VF_ERR_INVALID;
                snprintf(err.msg, sizeof(err.msg),
                         "the upload refers to other files: a picture is needed, not a list");
            } else if (rc < 0) {
                unname_upload(err.msg, upload);
                if (strstr(err.msg, srv->upload_dir)) /* a file beside it: still private */
                    snprintf(err.msg, sizeof(err.msg), "the upload could not be searched");
            }
        }
    } else {
        double t = arg_t(r);
        q.video = vfs_req_arg(r, "path");
        q.at = t;
        if (!q.video || t < 0.0) {
            vfi_json_free(&h.list);
            reply_error(r, 400, "path and t (seconds >= 0) are needed");
            return;
        }
        rc = vfi_session_similar(srv->session, &q, 1, on_hit, &h, &src, &err);
    }
    if (rc < 0) {
        vfi_json_free(&h.list);
        reply_failed(srv, r, rc == VF_ERR_STORE ? 404 : http_status(rc), err.msg, sizeof(err.msg));
        return;
    }
    vf_json *doc = vfi_doc_similar(h.list, &src, NULL, &st);
    reply_json(r, 200, doc, h.bad);
}

static void on_match(void *user, const vf_match *m)
{
    hits *h = user;
    if (h->n++ < MAX_K)
        h->bad |= vfi_json_push(h->list, vfi_doc_match(m)) < 0;
}

static void api_matches(vf_server *srv, vfs_req *r)
{
    const char *path = vfs_req_arg(r, "path");
    vf_err err = {0};
    if (path) { /* only a file the database holds: never one read now */
        vf_store_ref ref;
        int found = 0;
        if (vfi_session_stored(srv->session, path, 0.0, &ref, &found, &err) < 0 || !found) {
            if (found)
                reply_failed(srv, r, 500, err.msg, sizeof(err.msg));
            else
                reply_error(r, 404, "no such file in this archive");
            return;
        }
    }
    vf_match_stats st;
    vf_match_query q = {.video = path, .stats = &st};
    hits h = {vfi_json_new_array(), 0, 0};
    char msg[1024] = "";
    pthread_mutex_lock(&srv->matches_lock);
    vf_status rc = vf_db_matches(srv->db, &srv->cfg, &q, on_match, &h, msg, sizeof(msg));
    pthread_mutex_unlock(&srv->matches_lock);
    if (rc < 0) {
        vfi_json_free(&h.list);
        reply_failed(srv, r, http_status(rc), msg, sizeof(msg));
        return;
    }
    vf_json *doc = vfi_doc_matches(h.list, &st);
    reply_json(r, 200, doc, h.bad);
}

/* ---- the archive's progress ---- */

typedef struct status_doc {
    vf_json *doc, *failed, *running, *indexes;
    int n_failed, n_running, bad;
} status_doc;

static void st_summary(void *user, const vf_db_summary *s)
{
    status_doc *d = user;
    d->bad |= vfi_json_add(d->doc, "summary", vfi_doc_summary(s)) < 0;
}

static void st_extraction(void *user, const vf_db_extraction *e)
{
    status_doc *d = user;
    if (!strcmp(e->status, "failed") && d->n_failed++ < MAX_LISTED)
        d->bad |= vfi_json_push(d->failed, vfi_doc_extraction(e)) < 0;
    else if (!strcmp(e->status, "running") && d->n_running++ < MAX_LISTED)
        d->bad |= vfi_json_push(d->running, vfi_doc_extraction(e)) < 0;
}

static void st_index(void *user, const vf_db_index_info *ix)
{
    status_doc *d = user;
    d->bad |= vfi_json_push(d->indexes, vfi_doc_index(ix)) < 0;
}

static void api_status(vf_server *srv, vfs_req *r)
{
    status_doc d = {vfi_json_new_object(),
                    vfi_json_new_array(),
                    vfi_json_new_array(),
                    vfi_json_new_array(),
                    0,
                    0,
                    0};
    char msg[1024] = "";
    vf_db_visitor v = {&d, st_summary, st_extraction, NULL};
    vf_status rc = vf_db_inspect(srv->db, &v, msg, sizeof(msg));
    if (rc >= 0)
        rc = vf_db_indexes(srv->db, st_index, &d, msg, sizeof(msg));
    if (rc < 0) {
        vfi_json_free(&d.doc);
        vfi_json_free(&d.failed);
        vfi_json_free(&d.running);
        vfi_json_free(&d.indexes);
        reply_failed(srv, r, http_status(rc), msg, sizeof(msg));
        return;
    }
    d.bad |= vfi_json_add(d.doc, "failed", d.failed) < 0;
    d.bad |= vfi_json_add(d.doc, "running", d.running) < 0;
    d.bad |= vfi_json_add(d.doc, "indexes", d.indexes) < 0;
    d.bad |= vfi_json_add_str(d.doc, "model", vfi_session_row(srv->session)->name) < 0;
    d.bad |= vfi_json_add_str(d.doc, "layer", vfi_session_row(srv->session)->layer) < 0;
    reply_json(r, 200, d.doc, d.bad);
}

/* ---- the door ---- */

/* a and b equal, in time that does not depend on where they differ */
static int same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* The name of a Host header's value ("name", "name:port", "[v6]", "[v6]:port") into name: the
 * brackets and port dropped, lower case, without a trailing dot. 0, or -1 when malformed. */
static int host_name(const char *host, char *name, size_t size)
{
    const char *end;
    if (host[0] == '[') { /* an IPv6 literal */
        host++;
        if (!(end = strchr(host, ']')) || (end[1] && end[1] != ':'))
            return -1;
    } else {
        end = strchr(host, ':');
        if (!end)
            end = host + strlen(host);
        else if (strchr(end + 1, ':'))
            return -1;
    }
    const char *port = *end == ']' ? end + 1 : end;
    if (*port == ':' && (!port[1] || strspn(port + 1, "0123456789") != strlen(port + 1)))
        return -1;
    size_t n = (size_t)(end - host);
    if (n && host[n - 1] == '.')
        n--;
    if (!n || n >= size)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)host[i];
        if (!(isalnum(ch) || ch == '.' || ch == '-' || ch == ':' || ch == '_'))
            return -1;
        name[i] = (char)tolower(ch);
    }
    name[n] = '\0';
    return 0;
}

/* An IP address literal's bytes (4 or 16) into addr; 0 when name is not one. */
static int ip_bytes(const char *name, unsigned char addr[16])
{
    if (inet_pton(AF_INET, name, addr) == 1)
        return 4;
    if (inet_pton(AF_INET6, name, addr) == 1)
        return 16;
    return 0;
}

/* Is the name a request is addressed to (its Host header) one this server answers? Its own
 * address (any address of the machine when it listens on all), localhost, and the names given
 * with --allow-host. A page on another site whose name an attacker points at this machine (DNS
 * rebinding) shares the server's origin, so only the name tells it apart. */
static int host_allowed(const vf_server *srv, const char *host)
{
    char name[256];
    if (!host || host_name(host, name, sizeof(name)) < 0)
        return 0;
    if (!strcmp(name, "localhost"))
        return 1;
    unsigned char a[16], b[16];
    int la = ip_bytes(name, a);
    if (la) {
        int lb = ip_bytes(srv->bind, b);
        return srv->bind_any || (la == lb && !memcmp(a, b, (size_t)la));
    }
    for (const char *p = srv->allow_hosts; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n == strlen(name) && !strncasecmp(p, name, n))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Does the Origin a browser sent (if any) name this server as the request reached it? */
static int same_origin(const char *origin, const char *host)
{
    return !origin || (!strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host));
}

/* 1 when the request may go on; else replied (401, or the page's redirect setting the cookie). */
static int admitted(vf_server *srv, vfs_req *r)
{
    if (!srv->token)
        return 1;
    char cookie_name[32];
    snprintf(cookie_name, sizeof(cookie_name), TOKEN_COOKIE "%d", vf_server_port(srv));
    const char *cookie = vfs_req_cookie(r, cookie_name);
    const char *auth = vfs_req_header(r, "Authorization");
    if ((cookie && same_secret(cookie, srv->token)) ||
        (auth && !strncmp(auth, "Bearer ", 7) && same_secret(auth + 7, srv->token)))
        return 1;
    const char *given = vfs_req_arg(r, "token");
    if (given && !strcmp(vfs_req_path(r), "/") && same_secret(given, srv->token)) {
        char cookie_line[256];
        snprintf(cookie_line, sizeof(cookie_line),
                 "Set-Cookie: %s=%s; Path=/; HttpOnly; SameSite=Strict", cookie_name, srv->token);
        const char *extra[] = {cookie_line, "Location: /", "Cache-Control: no-store", NULL};
        vfs_reply(r, 303, "text/plain; charset=utf-8", "", 0, extra);
        return 0;
    }
    reply_text(r, 401,
               "vidfeat serve asks a token here: open the address it printed (…/?token=…)\n");
    return 0;
}

/* The door, shown each request's headers before its body is read (http.h's admit): the name it
 * is addressed to, where it comes from (a cross-origin page may only load the page itself), the
 * method, the token. 1 lets it in; 0 having replied. */
static int admit(void *user, vfs_req *r)
{
    vf_server *srv = user;
    const char *method = vfs_req_method(r), *host = vfs_req_header(r, "Host");
    if (!host_allowed(srv, host)) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "this server answers requests addressed to %s or localhost; vidfeat serve "
                 "--allow-host NAME lets it answer another name of this machine\n",
                 srv->bind_any ? "its addresses" : srv->bind);
        reply_text(r, 403, msg);
        return 0;
    }
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!get && strcmp(method, "POST")) {
        vfs_reply(r, 405, "text/plain; charset=utf-8", "method not allowed\n", 19,
                  (const char *const[]){"Allow: GET, HEAD, POST", NULL});
        return 0;
    }
    if (!(get && vfs_asset_find(vfs_req_path(r))) &&
        !same_origin(vfs_req_header(r, "Origin"), host)) {
        reply_text(r, 403, "requests from other sites' pages are refused\n");
        return 0;
    }
    return admitted(srv, r);
}

static void handle(void *user, vfs_req *r)
{
    vf_server *srv = user;
    const char *method = vfs_req_method(r), *path = vfs_req_path(r);
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    const vfs_asset *a = get ? vfs_asset_find(path) : NULL;
    if (a)
        vfs_reply(r, 200, a->type, a->data, a->len,
                  (const char *const[]){"Cache-Control: no-cache", NULL});
    else if (get && !strcmp(path, "/api/search"))
        api_search(srv, r);
    else if (!strcmp(path, "/api/similar"))
        api_similar(srv, r);
    else if (get && !strcmp(path, "/api/matches"))
        api_matches(srv, r);
    else if (get && !strcmp(path, "/api/status"))
        api_status(srv, r);
    else if (get && !strcmp(path, "/api/thumb"))
        api_thumb(srv, r);
    else if (get && !strcmp(path, "/api/video"))
        api_video(srv, r);
    else
        reply_text(r, 404, "not found\n");
}

/* ---- the server ---- */

/* A random token of 32 hex digits (128 bits). */
static char *make_token(vf_err *err)
{
    unsigned char raw[16];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            vfi_fail(err, VF_ERR_IO, "serve: no random bytes for a token: %s", strerror(errno));
            return NULL;
        }
        got += (size_t)n;
    }
    char *hex = vfi_malloc(2 * sizeof(raw) + 1);
    if (!hex) {
        vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return hex;
}

/* Is bind a loopback address (127.0.0.0/8, ::1)? */
static int loopback_bind(const char *bind)
{
    return !strncmp(bind, "127.", 4) || !strcmp(bind, "::1") || !strcmp(bind, "localhost");
}

vf_status vf_server_start(const char *db, const vf_config *cfg, const vf_serve_opts *o,
                          vf_server **out, char *errbuf, size_t errbuf_size)
{
    vf_err err = {0};
    vf_server *srv = NULL;
    vf_status rc = VF_OK;
    if (out)
        *out = NULL;
    const vf_serve_opts none = {0};
    if (!o)
        o = &none;
    const char *bind = o->bind ? o->bind : DEFAULT_BIND;
    if (!db || !cfg || !out || o->max_upload < 0 || o->thumb_cache < 0) {
        rc = vfi_fail(&err, VF_ERR_INVALID,
                      "serve: a database, a configuration and an out "
                      "pointer are needed");
        goto done;
    }
    for (const char *c = o->token; c && *c; c++)
        if (*c <= ' ' || *c == ';' || *c == ',' || *c == '"' || *c == '\\' || *c > '~') {
            rc = vfi_fail(&err, VF_ERR_INVALID,
                          "serve: a token is printable ASCII without spaces, ';', ',', '\"' "
                          "or '\\'");
            goto done;
        }
    if (o->token && (strlen(o->token) < 16 || strlen(o->token) > 128)) {
        rc = vfi_fail(&err, VF_ERR_INVALID, "serve: a token is 16 to 128 characters");
        goto done;
    }
    if (!(srv = vfi_calloc(1, sizeof(*srv)))) {
        rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    pthread_mutex_init(&srv->upload_lock, NULL);
    pthread_mutex_init(&srv->matches_lock, NULL);
    srv->max_upload = o->max_upload ? o->max_upload : DEFAULT_MAX_UPLOAD;
    const char *root = o->root ? o->root : ".";
    if (!(srv->root = realpath(root, NULL))) {
        rc = vfi_fail(&err, VF_ERR_INVALID, "serve: --root %s: %s", root, strerror(errno));
        goto done;
    }
    struct stat st;
    if (stat(srv->root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = vfi_fail(&err, VF_ERR_INVALID, "serve: --root %s is not a directory", root);
        goto done;
    }
    if ((rc = vfi_archive_init(&srv->archive, srv->root, 0, &err)) < 0)
        goto done;
    if (o->token || (!o->no_auth && !loopback_bind(bind)))
        srv->token = o->token ? vfi_strdup(o->token) : make_token(&err);
    if ((o->token || (!o->no_auth && !loopback_bind(bind))) && !srv->token) {
        rc = err.msg[0] ? VF_ERR_IO : vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/vidfeat-serve-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(dir) || !(srv->upload_dir = vfi_strdup(dir))) {
        rc = vfi_fail(&err, VF_ERR_IO, "serve: no directory for uploads in %s: %s",
                      tmp ? tmp : "/tmp", strerror(errno));
        goto done;
    }
    if (!(srv->db = vfi_strdup(db))) {
        rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    srv->db_real = realpath(db, NULL); /* NULL too when the name is all there is */
    vf_config scfg = *cfg;
    scfg.root = NULL; /* the queries it extracts are uploads, not archive files */
    if ((rc = vfi_session_open(db, &scfg, 0, NULL, &srv->session, &err)) < 0)
        goto done;
    srv->cfg = *vfi_session_config(srv->session);
    if ((rc = vfs_thumbs_create(o->thumb_cache ? o->thumb_cache : DEFAULT_THUMB_CACHE,
                                &srv->archive, &srv->thumbs, &err)) < 0)
        goto done;
    snprintf(srv->bind, sizeof(srv->bind), "%s", strcmp(bind, "localhost") ? bind : DEFAULT_BIND);
    srv->bind_any = !strcmp(srv->bind, "0.0.0.0") || !strcmp(srv->bind, "::");
    if (o->allow_hosts) {
        for (const char *c = o->allow_hosts; *c; c++)
            if (!(isalnum((unsigned char)*c) || *c == '.' || *c == '-' || *c == ',')) {
                rc = vfi_fail(&err, VF_ERR_INVALID,
                              "serve: --allow-host takes host names (letters, digits, '.', '-'), "
                              "comma-separated");
                goto done;
            }
        if (!(srv->allow_hosts = vfi_strdup(o->allow_hosts))) {
            rc = vfi_fail(&err, VF_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    vfs_http_opts ho = {.bind = bind,
                        .port = o->port,
                        .max_body = (size_t)srv->max_upload,
                        .body_path = "/api/similar",
                        .max_bodies = MAX_UPLOADS,
                        .max_connections = MAX_CONNECTIONS,
                        .max_per_client = MAX_PER_CLIENT,
                        .timeout_s = TIMEOUT_S,
                        .headers = security_headers,
                        .admit = admit,
                        .handler = handle,
                        .user = srv};
    if (!strcmp(bind, "localhost"))
        ho.bind = DEFAULT_BIND;
    rc = vfs_http_start(&ho, &srv->http, &err);
done:
    if (rc < 0) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "%s", err.msg);
        vf_server_stop(&srv);
        return rc;
    }
    *out = srv;
    return VF_OK;
}

int vf_server_port(const vf_server *srv)
{
    return srv && srv->http ? vfs_http_port(srv->http) : 0;
}

const char *vf_server_token(const vf_server *srv)
{
    return srv ? srv->token : NULL;
}

void vf_server_stop(vf_server **psrv)
{
    vf_server *srv = psrv ? *psrv : NULL;
    if (!srv)
        return;
    vfs_http_stop(&srv->http);
    vfs_thumbs_free(&srv->thumbs);
    vfi_session_free(&srv->session);
    if (srv->upload_dir)
        rmdir(srv->upload_dir); /* each upload was removed after its query */
    vfi_free(srv->upload_dir);
    vfi_free(srv->token);
    vfi_free(srv->allow_hosts);
    vfi_archive_clear(&srv->archive);
    free(srv->root); /* realpath's */
    vfi_free(srv->db);
    free(srv->db_real);
    pthread_mutex_destroy(&srv->upload_lock);
    pthread_mutex_destroy(&srv->matches_lock);
    vfi_free(srv);
    *psrv = NULL;
}
