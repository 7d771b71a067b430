/*
 * http.c - the HTTP server (http.h) on libmicrohttpd: its own polling thread and a thread per
 * connection, bodies gathered into memory up to the bound, replies with the fixed headers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/log.h"
#include "core/mem.h"
#include "serve/http.h"

struct vfs_http {
    struct MHD_Daemon *daemon;
    vfs_http_opts o;
    int port;
    atomic_int bodies; /* bodies being read or held now */
};

struct vfs_req {
    const vfs_http *h;
    struct MHD_Connection *c;
    const char *method, *path;
    uint8_t *body;
    size_t len, cap;
    size_t announced;  /* the body's Content-Length (0: none said) */
    double body_until; /* when the body must be in (a monotonic time), once it is being read */
    int counted;       /* one of h->bodies */
    int replied;
    enum MHD_Result result;
};

const char *vfs_req_method(const vfs_req *r)
{
    return r->method;
}

const char *vfs_req_path(const vfs_req *r)
{
    return r->path;
}

const char *vfs_req_arg(const vfs_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name);
}

const char *vfs_req_header(const vfs_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name);
}

const char *vfs_req_cookie(const vfs_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->c, MHD_COOKIE_KIND, name);
}

const uint8_t *vfs_req_body(const vfs_req *r, size_t *len)
{
    *len = r->len;
    return r->body;
}

/* Add "Name: value" lines to a response; -1 when one is malformed or cannot be added. */
static int add_headers(struct MHD_Response *resp, const char *const *lines)
{
    for (size_t i = 0; lines && lines[i]; i++) {
        const char *colon = strchr(lines[i], ':');
        char name[128];
        if (!colon || (size_t)(colon - lines[i]) >= sizeof(name))
            return -1;
        memcpy(name, lines[i], (size_t)(colon - lines[i]));
        name[colon - lines[i]] = '\0';
        const char *value = colon + 1;
        while (*value == ' ')
            value++;
        if (MHD_add_response_header(resp, name, value) != MHD_YES)
            return -1;
    }
    return 0;
}

static void queue(vfs_req *r, int status, struct MHD_Response *resp, const char *type,
                  const char *const *extra)
{
    if (r->replied) {
        if (resp)
            MHD_destroy_response(resp);
        return;
    }
    r->replied = 1;
    if (!resp || add_headers(resp, r->h->o.headers) < 0 || add_headers(resp, extra) < 0 ||
        (type && MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES)) {
        r->result = MHD_NO; /* the connection is closed: better than a reply without headers */
    } else {
        r->result = MHD_queue_response(r->c, (unsigned)status, resp);
    }
    if (resp)
        MHD_destroy_response(resp);
}

void vfs_reply(vfs_req *r, int status, const char *type, const void *data, size_t len,
               const char *const *extra)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)data, MHD_RESPMEM_MUST_COPY);
    queue(r, status, resp, type, extra);
}

/* The one range "bytes=A-B", "bytes=A-" or "bytes=-N" of a file of size bytes: 1 with *from and
 * *n set; 0 when there is none (or several ranges: the whole file is sent); -1 when it is
 * unsatisfiable. */
static int parse_range(const char *h, int64_t size, int64_t *from, int64_t *n)
{
    if (!h || strncmp(h, "bytes=", 6) || strchr(h, ','))
        return 0;
    const char *p = h + 6;
    char *end;
    if (*p == '-') { /* the last N bytes */
        errno = 0;
        long long last = strtoll(p + 1, &end, 10);
        if (errno || *end || end == p + 1 || last <= 0)
            return last == 0 && !errno && !*end && end != p + 1 ? -1 : 0;
        if (size == 0)
            return -1;
        *n = last < size ? last : size;
        *from = size - *n;
        return 1;
    }
    errno = 0;
    long long a = strtoll(p, &end, 10);
    if (errno || end == p || *end != '-' || a < 0)
        return 0;
    p = end + 1;
    long long b = size - 1;
    if (*p) {
        b = strtoll(p, &end, 10);
        if (errno || *end || b < a)
            return 0;
    }
    if (a >= size)
        return -1;
    if (b >= size)
        b = size - 1;
    *from = a;
    *n = b - a + 1;
    return 1;
}

void vfs_reply_file(vfs_req *r, int fd, int64_t size, const char *type)
{
    int64_t from = 0, n = size;
    int ranged = parse_range(vfs_req_header(r, MHD_HTTP_HEADER_RANGE), size, &from, &n);
    char range[96];
    const char *extra[] = {"Accept-Ranges: bytes", range, NULL};
    if (ranged < 0) {
        close(fd);
        snprintf(range, sizeof(range), "Content-Range: bytes */%" PRId64, size);
        vfs_reply(r, MHD_HTTP_RANGE_NOT_SATISFIABLE, "text/plain; charset=utf-8", "", 0, extra);
        return;
    }
    if (ranged)
        snprintf(range, sizeof(range), "Content-Range: bytes %" PRId64 "-%" PRId64 "/%" PRId64,
                 from, from + n - 1, size);
    else
        extra[1] = NULL;
    struct MHD_Response *resp =
        MHD_create_response_from_fd_at_offset64((uint64_t)n, fd, (uint64_t)from);
    if (!resp)
        close(fd);
    queue(r, ranged ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, resp, type, extra);
}

/* A body must come at BODY_RATE bytes a second after a grace of BODY_GRACE_S, and with no pause
 * longer than BODY_IDLE_S (the connection's idle timeout is reset by every byte: a client
 * trickling a byte now and then would hold an upload's slot for ever). */
#define BODY_RATE    (64 << 10)
#define BODY_GRACE_S 5.0
#define BODY_IDLE_S  10

typedef struct framing {
    int lengths, lengths_differ, encodings;
    const char *length;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        f->lengths_differ |= f->length && strcmp(f->length, value ? value : "");
        f->length = value ? value : "";
        f->lengths++;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->encodings++;
    }
    return MHD_YES;
}

/* Is the request's framing ambiguous (RFC 9112 6.3): a Content-Length said twice, or with a
 * Transfer-Encoding? Such a request is refused and its connection closed, never read on: two
 * readers of it (a proxy in front, this server) could cut it into different requests. */
static int ambiguous(struct MHD_Connection *c)
{
    framing f = {0, 0, 0, NULL};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    return f.lengths > 1 || (f.lengths && f.encodings) || f.encodings > 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    vfs_http *h = cls;
    vfs_req *r = *con_cls;
    if (!r) { /* the headers are in: the body (if any) comes in the next calls */
        if (!(r = vfi_calloc(1, sizeof(*r))))
            return MHD_NO;
        *r = (vfs_req){.h = h, .c = c, .method = method, .path = url, .result = MHD_YES};
        *con_cls = r;
        if (ambiguous(c)) {
            static const char msg[] = "a request's length must be said once, one way\n";
            vfs_reply(r, MHD_HTTP_BAD_REQUEST, "text/plain; charset=utf-8", msg, sizeof(msg) - 1,
                      (const char *const[]){"Connection: close", NULL});
            return r->result;
        }
        if (h->o.admit && !h->o.admit(h->o.user, r)) { /* refused before any body is read */
            if (!r->replied)
                vfs_reply(r, MHD_HTTP_FORBIDDEN, "text/plain; charset=utf-8", "forbidden\n", 10,
                          NULL);
            return r->result;
        }
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        unsigned long long length = cl ? strtoull(cl, NULL, 10) : 0;
        int has_body = length > 0 || te;
        if (has_body && (strcmp(url, h->o.body_path) || length > h->o.max_body)) {
            char msg[128]; /* refused before it is read */
            int len = snprintf(msg, sizeof(msg), "a request body is at most %zu bytes, to %s\n",
                               h->o.max_body, h->o.body_path);
            vfs_reply(r, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain; charset=utf-8", msg, (size_t)len,
                      NULL);
            return r->result;
        }
        if (has_body) {
            r->announced = (size_t)length;
            r->body_until = now_s() + BODY_GRACE_S + (double)length / BODY_RATE;
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)BODY_IDLE_S);
            r->counted = 1;
            if (atomic_fetch_add(&h->bodies, 1) >= h->o.max_bodies) {
                static const char busy[] = "busy: too many uploads at once, try again\n";
                vfs_reply(r, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", busy,
                          sizeof(busy) - 1, (const char *const[]){"Retry-After: 1", NULL});
                return r->result;
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->replied)
            return MHD_YES;
        if (now_s() > r->body_until) { /* slower than BODY_RATE: its slot goes to another */
            static const char slow[] = "the body came too slowly\n";
            vfs_reply(r, MHD_HTTP_REQUEST_TIMEOUT, "text/plain; charset=utf-8", slow,
                      sizeof(slow) - 1, (const char *const[]){"Connection: close", NULL});
            return r->result;
        }
        if (n > h->o.max_body - r->len) { /* a body without a length, or longer than it said */
            vfs_reply(r, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain; charset=utf-8",
                      "request body too large\n", 23, NULL);
            return r->result;
        }
        if (r->len + n > r->cap) {
            size_t cap = r->cap ? r->cap : 65536;
            while (cap < r->len + n)
                cap *= 2;
            uint8_t *nb = vfi_realloc(r->body, cap);
            if (!nb)
                return MHD_NO;
            r->body = nb;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload_data, n);
        r->len += n;
        return MHD_YES;
    }
    if (!r->replied)
        h->o.handler(h->o.user, r);
    if (!r->replied)
        vfs_reply(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", "no reply\n", 9,
                  NULL);
    return r->result;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c, (void)toe;
    vfs_http *h = cls;
    vfs_req *r = *con_cls;
    if (r) {
        if (r->counted)
            atomic_fetch_sub(&h->bodies, 1);
        vfi_free(r->body);
        vfi_free(r);
    }
    *con_cls = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    vfi_log(VF_LOG_DEBUG, "serve", "%s", msg);
}

vf_status vfs_http_start(const vfs_http_opts *o, vfs_http **out, vf_err *err)
{
    *out = NULL;
    struct sockaddr_in in4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)o->port)};
    const struct sockaddr *sa;
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (o->port < 0 || o->port > 65535)
        return vfi_fail(err, VF_ERR_INVALID, "serve: port %d is not 0..65535", o->port);
    if (inet_pton(AF_INET, o->bind, &in4.sin_addr) == 1) {
        sa = (const struct sockaddr *)&in4;
    } else if (inet_pton(AF_INET6, o->bind, &in6.sin6_addr) == 1) {
        sa = (const struct sockaddr *)&in6;
        flags |= MHD_USE_IPv6;
    } else {
        return vfi_fail(err, VF_ERR_INVALID,
                        "serve: --bind %s is not an IPv4 or IPv6 address (such as 127.0.0.1)",
                        o->bind);
    }
    vfs_http *h = vfi_calloc(1, sizeof(*h));
    if (!h)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    h->o = *o;
    errno = 0;
    h->daemon = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h,
                                 MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)o->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                 (unsigned)o->max_per_client, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned)o->timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                                 h, MHD_OPTION_EXTERNAL_LOGGER, on_log, h, MHD_OPTION_END);
    if (!h->daemon) {
        int e = errno;
        vfi_free(h);
        return vfi_fail(err, VF_ERR_IO, "serve: cannot listen on %s port %d%s%s", o->bind, o->port,
                        e ? ": " : "", e ? strerror(e) : "");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : o->port;
    *out = h;
    return VF_OK;
}

int vfs_http_port(const vfs_http *h)
{
    return h->port;
}

void vfs_http_stop(vfs_http **ph)
{
    vfs_http *h = *ph;
    if (!h)
        return;
    MHD_stop_daemon(h->daemon);
    vfi_free(h);
    *ph = NULL;
}
