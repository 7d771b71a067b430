/*
 * digest.c - SHA-256 through OpenSSL's libcrypto (EVP), which uses the CPU's SHA extensions
 * where there are any; a cache of whole-file digests. Any thread.
 *
 * The model file's digest names the model in the database, and VGG19's file is 550 MB. The
 * cache ($XDG_CACHE_HOME/vidfeat/sha256, else ~/.cache/vidfeat/sha256) remembers a digest with
 * the file's device, inode, size, and modification and status-change times in nanoseconds, so
 * that a file is read again only once it has changed. One line a file:
 *     HEX <tab> DEV <tab> INO <tab> SIZE <tab> MTIME_NS <tab> CTIME_NS <tab> PATH
 * rewritten whole after a file was hashed (a temporary file renamed over it) with the newest
 * MAX_ENTRIES lines; a damaged line matches nothing, and a cache that cannot be read or written
 * only costs the hashing.
 */
#include "core/digest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/mem.h"
#include "core/path.h"

#define MAX_ENTRIES 512

static void to_hex(const unsigned char *md, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

void vfi_sha256(const void *data, size_t size, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(data, size, md, &len, EVP_sha256(), NULL) != 1 || len != 32)
        memset(md, 0, 32); /* EVP_Digest fails only without memory: an all-zero digest */
    to_hex(md, hex);
}

/* A digest context, or NULL (then err is filled). */
static EVP_MD_CTX *start(vf_err *err)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(c);
        vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return c;
}

static vf_status finish(EVP_MD_CTX *c, int ok, const char *path, char hex[65], vf_err *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(c, md, &len) == 1 && len == 32;
    EVP_MD_CTX_free(c);
    if (!ok)
        return vfi_fail(err, VF_ERR_IO, "%s: read error", path);
    to_hex(md, hex);
    return VF_OK;
}

vf_status vfi_sha256_file(const char *path, char hex[65], vf_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = vfi_malloc(CHUNK);
    EVP_MD_CTX *c = buf ? start(err) : NULL;
    if (!c) {
        fclose(f);
        vfi_free(buf);
        return buf ? err->code : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    size_t n;
    int ok = 1;
    while (ok && (n = fread(buf, 1, CHUNK, f)) > 0)
        ok = EVP_DigestUpdate(c, buf, n) == 1;
    ok = ok && !ferror(f);
    fclose(f);
    vfi_free(buf);
    return finish(c, ok, path, hex, err);
}

vf_status vfi_sha256_file_sampled(const char *path, char hex[65], vf_err *err)
{
    enum { N_BLOCKS = 64, BLOCK = 4096 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    EVP_MD_CTX *c = start(err);
    if (!c) {
        fclose(f);
        return err->code;
    }
    unsigned char buf[BLOCK];
    int ok = fseeko(f, 0, SEEK_END) == 0;
    off_t size = ok ? ftello(f) : 0;
    ok = ok && size >= 0;
    for (int i = 0; i < 8 && ok; i++) { /* the size, little-endian, first */
        unsigned char byte = (unsigned char)((uint64_t)size >> (8 * i));
        ok = EVP_DigestUpdate(c, &byte, 1) == 1;
    }
    for (int i = 0; i < N_BLOCKS && ok; i++) {
        off_t at = size <= (off_t)N_BLOCKS * BLOCK
                       ? (off_t)i * BLOCK
                       : (off_t)((double)(size - BLOCK) * i / (N_BLOCKS - 1));
        if (at >= size)
            break;
        size_t n = 0;
        ok = fseeko(f, at, SEEK_SET) == 0;
        if (ok)
            n = fread(buf, 1, BLOCK, f);
        ok = ok && !ferror(f) && EVP_DigestUpdate(c, buf, n) == 1;
    }
    fclose(f);
    return finish(c, ok, path, hex, err);
}

/* What the cache records of a file after its digest: "\tDEV\tINO\tSIZE\tMTIME_NS\tCTIME_NS\tPATH\n"
 * (a new string, or NULL when out of memory). */
static char *line_tail(const struct stat *st, const char *name)
{
    int64_t mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    int64_t ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
    size_t len = strlen(name) + 5 * 24;
    char *tail = vfi_malloc(len);
    if (tail)
        snprintf(
            tail, len, "\t%" PRIu64 "\t%" PRIu64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%s\n",
            (uint64_t)st->st_dev, (uint64_t)st->st_ino, (int64_t)st->st_size, mtime, ctime, name);
    return tail;
}

/* Append line (owned) to lines (MAX_ENTRIES slots), dropping the oldest when they are full. */
static void push_line(char **lines, int *n, char *line)
{
    if (*n == MAX_ENTRIES) {
        vfi_free(lines[0]);
        memmove(lines, lines + 1, (MAX_ENTRIES - 1) * sizeof(*lines));
        (*n)--;
    }
    lines[(*n)++] = line;
}

/* The cache's whole lines, the newest MAX_ENTRIES (an array of that many slots, or NULL when
 * out of memory); none when there is no cache. */
static char **read_cache(const char *cache, int *n)
{
    *n = 0;
    char **lines = vfi_calloc(MAX_ENTRIES, sizeof(*lines));
    FILE *f = lines ? fopen(cache, "r") : NULL;
    char line[8192];
    while (f && fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        char *copy = len && line[len - 1] == '\n' ? vfi_strdup(line) : NULL; /* whole lines */
        if (copy)
            push_line(lines, n, copy);
    }
    if (f)
        fclose(f);
    return lines;
}

static void free_lines(char **lines, int n)
{
    for (int i = 0; lines && i < n; i++)
        vfi_free(lines[i]);
    vfi_free(lines);
}

/* Is line the cache's line of the file called name (whatever its digest and stamp)? The path is
 * the last field, after the last tab (names with tabs or newlines are never cached). */
static int names_file(const char *line, const char *name)
{
    const char *tab = strrchr(line, '\t');
    size_t n = strlen(name);
    return tab && !strncmp(tab + 1, name, n) && !strcmp(tab + 1 + n, "\n");
}

vf_status vfi_sha256_file_cached(const char *path, char hex[65], vf_err *err)
{
    struct stat st;
    char *name = vfi_path_absolute(path), *cache = vfi_cache_path("sha256"), *tail = NULL;
    if (name && !strpbrk(name, "\t\n") && cache && stat(path, &st) == 0 && S_ISREG(st.st_mode))
        tail = line_tail(&st, name);
    int n = 0, hit = 0;
    char **lines = tail ? read_cache(cache, &n) : NULL;
    for (int i = 0; i < n && !hit; i++) { /* this file, unchanged: its digest */
        hit = strlen(lines[i]) > 64 && !strcmp(lines[i] + 64, tail) &&
              strspn(lines[i], "0123456789abcdef") == 64;
        if (hit) {
            memcpy(hex, lines[i], 64);
            hex[64] = '\0';
        }
    }
    vf_status rc = hit ? VF_OK : vfi_sha256_file(path, hex, err);
    if (!hit && rc >= 0 && lines) { /* remember it: this file's older line goes */
        int keep = 0;
        for (int i = 0; i < n; i++) {
            if (names_file(lines[i], name))
                vfi_free(lines[i]);
            else
                lines[keep++] = lines[i];
        }
        n = keep;
        size_t len = 64 + strlen(tail) + 1;
        char *line = vfi_malloc(len);
        FILE *f;
        char *tmp;
        vf_err ignored;
        if (line) {
            snprintf(line, len, "%s%s", hex, tail);
            push_line(lines, &n, line);
            vfi_make_parent_dirs(cache);
            if (vfi_replace_open(cache, &f, &tmp, &ignored) >= 0) {
                for (int i = 0; i < n; i++)
                    fputs(lines[i], f);
                vfi_replace_close(f, tmp, cache, &ignored); /* unwritten: only a lost shortcut */
            }
        }
    }
    free_lines(lines, n);
    vfi_free(tail);
    vfi_free(name);
    vfi_free(cache);
    return rc;
}
