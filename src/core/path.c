/*
 * path.c - absolute, lexically tidied file names; the cache directory (see path.h).
 */
#define _GNU_SOURCE /* realpath, dladdr */
#include "core/path.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/mem.h"

/* The current directory into *dir (NULL when it cannot be read); -1 when out of memory. */
static int current_dir(char **dir)
{
    *dir = NULL;
    for (size_t size = 256; size <= 1 << 20; size *= 2) {
        char *buf = vfi_malloc(size);
        if (!buf)
            return -1;
        if (getcwd(buf, size)) {
            *dir = buf;
            return 0;
        }
        vfi_free(buf);
        if (errno != ERANGE)
            return 0;
    }
    return 0;
}

char *vfi_path_absolute(const char *path)
{
    if (!path || !*path)
        return NULL;
    char *cwd = NULL;
    if (path[0] != '/' && current_dir(&cwd) < 0)
        return NULL;
    int absolute = path[0] == '/' || cwd != NULL;
    size_t base = cwd ? strlen(cwd) : 0, len = strlen(path);
    /* the result is never longer than cwd + "/" + path */
    char *out = vfi_malloc(base + len + 2);
    if (!out) {
        vfi_free(cwd);
        return NULL;
    }
    size_t n = 0;
    for (int part = 0; part < 2; part++) {
        const char *s = part == 0 ? cwd : path;
        while (s && *s) {
            while (*s == '/')
                s++;
            size_t k = strcspn(s, "/");
            if (k > 0 && !(k == 1 && s[0] == '.')) {
                if (n > 0 || absolute)
                    out[n++] = '/';
                memcpy(out + n, s, k);
                n += k;
            }
            s += k;
        }
    }
    if (n == 0)
        out[n++] = absolute ? '/' : '.';
    out[n] = '\0';
    vfi_free(cwd);
    return out;
}

char *vfi_path_lexical(const char *path)
{
    char *out = vfi_path_absolute(path);
    if (!out || out[0] != '/')
        return out;
    /* out is tidied: components between single slashes, no "." */
    size_t n = 0;
    for (const char *s = out; *s;) {
        s++; /* the slash */
        size_t k = strcspn(s, "/");
        if (k == 2 && s[0] == '.' && s[1] == '.') {
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--; /* the slash before the dropped component */
        } else {
            out[n++] = '/';
            memmove(out + n, s, k);
            n += k;
        }
        s += k;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return out;
}

int vfi_path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 0 && dir[n - 1] == '/')
        n--; /* "/" itself: n = 0, everything absolute is under it */
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

int vfi_path_has_dotdot(const char *path)
{
    for (const char *s = path; *s;) {
        size_t k = strcspn(s, "/");
        if (k == 2 && s[0] == '.' && s[1] == '.')
            return 1;
        s += k;
        s += *s == '/';
    }
    return 0;
}

vf_status vfi_archive_init(vf_archive *a, const char *dir, int links_outside, vf_err *err)
{
    memset(a, 0, sizeof(*a));
    a->links_outside = links_outside;
    a->lexical = vfi_path_lexical(dir);
    char *real = realpath(dir, NULL); /* malloc's: copied into ours */
    if (real) {
        a->real = vfi_strdup(real);
        free(real);
    }
    if (!a->lexical || (real && !a->real)) {
        vfi_archive_clear(a);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    return VF_OK;
}

void vfi_archive_clear(vf_archive *a)
{
    vfi_free(a->lexical);
    vfi_free(a->real);
    a->lexical = a->real = NULL;
}

int vfi_archive_holds(const vf_archive *a, const char *path, char **real)
{
    if (real)
        *real = NULL;
    char *lexical = vfi_path_lexical(path);
    if (!lexical)
        return -1;
    int written_inside = vfi_path_within(lexical, a->lexical);
    vfi_free(lexical);
    char *resolved = realpath(path, NULL);
    int inside = resolved ? (a->real && vfi_path_within(resolved, a->real)) ||
                                (a->links_outside && written_inside)
                          : written_inside;
    if (resolved && real && !(*real = vfi_strdup(resolved))) {
        free(resolved);
        return -1;
    }
    free(resolved);
    return inside;
}

/* rel (relative, no ".." or "." components, no empty ones) opened beneath the directory dfd
 * without following any link, one component at a time: openat2's RESOLVE_BENEATH and
 * RESOLVE_NO_SYMLINKS where the kernel has them (Linux 5.6), else a walk of openat with
 * O_NOFOLLOW. -1 with errno (ELOOP: a component is a link). */
static int open_no_links(int dfd, const char *rel, int flags)
{
#ifdef SYS_openat2
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOCTTY),
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) /* EPERM: a filter that forbids it */
        return (int)fd;
#endif
    int cur = dfd;
    const char *p = rel;
    for (;;) {
        size_t n = strcspn(p, "/");
        char name[NAME_MAX + 1];
        if (n == 0 || n > NAME_MAX || (n == 1 && p[0] == '.') ||
            (n == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dfd)
                close(cur);
            errno = EINVAL;
            return -1;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        int last = p[n] == '\0';
        int next = openat(cur, name,
                          last ? flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY
                               : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (cur != dfd)
            close(cur);
        if (next < 0) {
            errno = e;
            return -1;
        }
        if (last)
            return next;
        cur = next;
        p += n + 1;
    }
}

int vfi_archive_open(const vf_archive *a, const char *path, int flags, int *fd)
{
    *fd = -1;
    char *real = NULL;
    int inside = vfi_archive_holds(a, path, &real);
    if (inside <= 0) {
        vfi_free(real);
        if (inside < 0)
            errno = ENOMEM;
        return inside;
    }
    if (!real) {
        errno = ENOENT;
        return -1;
    }
    int rc = -1;
    size_t root_len = a->real ? strlen(a->real) : 0;
    if (a->real && vfi_path_within(real, a->real)) {
        /* the name just resolved, opened beneath the archive with no link followed: a link
         * swapped in since the check fails the open instead of leading out */
        const char *rel = real + root_len; /* "" (the directory itself), or "/a/b" */
        if (*rel == '/')
            rel++;
        int dfd = open(a->real, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            *fd = *rel ? open_no_links(dfd, rel, flags) : openat(dfd, ".", flags | O_CLOEXEC);
            int e = errno;
            close(dfd);
            errno = e;
        }
    } else { /* outside, through a link the user let lead out (links_outside) */
        *fd = open(real, flags | O_CLOEXEC | O_NOCTTY);
    }
    if (*fd >= 0)
        rc = 1;
    int e = errno;
    vfi_free(real);
    errno = e;
    return rc;
}

char *vfi_cache_path(const char *name)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    const char *root = xdg && *xdg == '/' ? xdg : home && *home == '/' ? home : NULL;
    if (!root || !name)
        return NULL;
    size_t len = strlen(root) + strlen(name) + sizeof("/.cache/vidfeat/");
    char *p = vfi_malloc(len);
    if (p)
        snprintf(p, len, "%s%s/vidfeat/%s", root, root == xdg ? "" : "/.cache", name);
    return p;
}

void vfi_make_parent_dirs(const char *path)
{
    char *d = vfi_strdup(path);
    for (char *q = d ? d + 1 : NULL; q && *q; q++) {
        if (*q == '/') {
            *q = '\0';
            mkdir(d, 0755); /* EEXIST is fine; other failures show when the file is written */
            *q = '/';
        }
    }
    vfi_free(d);
}

int vfi_open_new(const char *path)
{
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path, flags, 0644);
    if (fd < 0 && errno == EEXIST && unlink(path) == 0) /* a leftover, or a planted link */
        fd = open(path, flags, 0644);
    return fd;
}

FILE *vfi_fopen_new(const char *path, const char *mode)
{
    int fd = vfi_open_new(path);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, mode);
    if (!f) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
    }
    return f;
}

FILE *vfi_fopen_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f)
        close(fd);
    return f;
}

vf_status vfi_replace_open(const char *path, FILE **f, char **tmp, vf_err *err)
{
    size_t len = strlen(path) + 32;
    *f = NULL;
    *tmp = vfi_malloc(len);
    if (!*tmp)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    snprintf(*tmp, len, "%s.tmp%ld", path, (long)getpid());
    *f = vfi_fopen_new(*tmp, "wb");
    if (!*f) {
        vf_status rc = vfi_fail(err, VF_ERR_IO, "%s: %s", *tmp, strerror(errno));
        vfi_free(*tmp);
        *tmp = NULL;
        return rc;
    }
    return VF_OK;
}

vf_status vfi_replace_close(FILE *f, char *tmp, const char *path, vf_err *err)
{
    int bad = ferror(f);
    bad = fclose(f) != 0 || bad;
    int saved_errno = errno;
    vf_status rc = VF_OK;
    if (bad || rename(tmp, path) != 0) {
        rc = vfi_fail(err, VF_ERR_IO, "%s: %s", bad ? tmp : path,
                      strerror(bad ? saved_errno : errno));
        remove(tmp);
    }
    vfi_free(tmp);
    return rc;
}

/* The file vidfeat's code runs from (libvidfeat.so, or the program holding libvidfeat.a),
 * resolved; a string from libc's malloc (free), or NULL when it cannot be told. */
static char *code_file(void)
{
    Dl_info info;
    if (!dladdr((void *)code_file, &info) || !info.dli_fname || !info.dli_fname[0])
        return NULL;
    return realpath(info.dli_fname, NULL);
}

int vfi_running_under(const char *dir)
{
    char *object = code_file(), *under = realpath(dir, NULL);
    size_t n = under ? strlen(under) : 0;
    int inside = object && under && !strncmp(object, under, n) && object[n] == '/';
    free(object);
    free(under);
    return inside;
}

int vfi_installed_path(const char *rel_lib, const char *rel_bin, char *buf, size_t size)
{
    if (size)
        buf[0] = '\0';
    /* libc's own allocations only: a place to look that cannot be made is no failure (the
     * caller looks elsewhere), so it must not consume the allocation hook of vfi_malloc */
    char *object = code_file();
    if (!object)
        return 0;
    char *program = realpath("/proc/self/exe", NULL);
    char joined[PATH_MAX], resolved[PATH_MAX];
    int ok = 0;
    const char *rel = program && !strcmp(object, program) ? rel_bin : rel_lib;
    char *slash = strrchr(object, '/');
    if (slash)
        *slash = '\0';
    int len = snprintf(joined, sizeof(joined), "%s/%s", object, rel);
    /* the directory as it is now; one that does not exist is no place to look */
    if (len > 0 && (size_t)len < sizeof(joined) && realpath(joined, resolved) &&
        strlen(resolved) < size) {
        strcpy(buf, resolved);
        ok = 1;
    }
    free(object);
    free(program);
    return ok;
}
