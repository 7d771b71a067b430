/*
 * http.h - an HTTP server on libmicrohttpd, the only file that sees it: a thread per connection
 * (a handler may take its time: a search, a thumbnail's decoding) up to a bound on connections,
 * a request body read into memory up to a bound, and replies from memory or from an open file
 * (one byte range: HTTP range requests, so that a browser can seek in a video).
 *
 * A request is first shown to admit (its headers only: the door, where a refusal costs no body),
 * then to the handler, once, on the connection's thread, with the whole body; the handler must
 * reply (vfs_reply_*) before it returns (else the server answers 500). Every reply carries the
 * server's fixed headers (vfs_http_opts.headers).
 */
#ifndef VIDFEAT_HTTP_H
#define VIDFEAT_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct vfs_http vfs_http;
typedef struct vfs_req vfs_req;

typedef struct vfs_http_opts {
    const char *bind; /* an IPv4 or IPv6 address ("127.0.0.1", "::1", "0.0.0.0") */
    int port;         /* 0: any free port (vfs_http_port says which) */
    size_t max_body;  /* a larger request body is refused (413) without being read */
    /* the one path whose requests may have a body (others' are refused, 413, unread), and how
     * many such bodies may be read into memory at once (more: 503 until one is done) */
    const char *body_path;
    int max_bodies;
    int max_connections;
    int max_per_client; /* connections from one address at once (0: no limit) */
    int timeout_s;      /* an idle connection is closed after this (a body's: sooner) */
    /* "Name: value" lines added to every reply (security headers); borrowed for the server's
     * life, NULL-terminated */
    const char *const *headers;
    /* (optional) called once a request's headers are in, before its body is read: 1 lets it
     * go on to the handler; 0 means it has replied (a refusal), and the body is never read */
    int (*admit)(void *user, vfs_req *r);
    void (*handler)(void *user, vfs_req *r);
    void *user;
} vfs_http_opts;

/* Listen and serve on threads of its own; VF_ERR_IO naming the address when it cannot bind. */
vf_status vfs_http_start(const vfs_http_opts *o, vfs_http **out, vf_err *err);
int vfs_http_port(const vfs_http *h);
/* Stop listening, finish the requests running, close every connection. */
void vfs_http_stop(vfs_http **ph);

/* ---- a request (borrowed during the handler) ---- */
const char *vfs_req_method(const vfs_req *r);
/* The path, percent-decoded by the server, without the query string. */
const char *vfs_req_path(const vfs_req *r);
/* A query argument, decoded (NULL when absent); a header (case-insensitive); a cookie. */
const char *vfs_req_arg(const vfs_req *r, const char *name);
const char *vfs_req_header(const vfs_req *r, const char *name);
const char *vfs_req_cookie(const vfs_req *r, const char *name);
/* The body (may be NULL when empty) and its length. */
const uint8_t *vfs_req_body(const vfs_req *r, size_t *len);

/* ---- replies: one per request; extra (may be NULL) is NULL-terminated "Name: value" ---- */
/* status with len bytes of data (copied) of type. */
void vfs_reply(vfs_req *r, int status, const char *type, const void *data, size_t len,
               const char *const *extra);
/* The file open on fd (taken over: closed when sent) of size bytes, of type: whole (200), or the
 * one byte range the request's Range header asks (206, or 416 when it is past the end). */
void vfs_reply_file(vfs_req *r, int fd, int64_t size, const char *type);

#endif /* VIDFEAT_HTTP_H */
