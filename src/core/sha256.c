/*
 * sha256.c - SHA-256 through OpenSSL's libcrypto (EVP), which uses the CPU's SHA extensions
 * where there are any; a cache of whole-file digests. Any thread.
 *
 * The model file's digest names the model in the database, and VGG19's file is 550 MB. The
 * cache ($XDG_CACHE_HOME/vidfeat/sha256, else ~/.cache/vidfeat/sha256) remembers a digest with
 * the file's device, inode, size, and modification and status-change times in nanoseconds, so
 * that a file is read again only once it has changed. One line a file:
 *     HEX <tab> DEV <tab> INO <tab> SIZE <tab> MTIME_NS <tab> CTIME_NS <tab> PATH
 * rewritten whole (a temporary file renamed over it) with the newest MAX_ENTRIES lines; a
 * damaged line is skipped, and a cache that cannot be read or written only costs the hashing.
 */
#include "core/sha256.h"

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

/* The identity of a file's contents as the cache records it (after the digest). */
static int stamp(const struct stat *st, char *buf, size_t size)
{
    int64_t mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    int64_t ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
    return snprintf(buf, size, "%" PRIu64 "\t%" PRIu64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64,
                    (uint64_t)st->st_dev, (uint64_t)st->st_ino, (int64_t)st->st_size, mtime, ctime);
}

/* The cache's lines (owned, NULL-terminated array of owned strings), or NULL. */
static char **read_cache(const char *cache, int *n)
{
    *n = 0;
    FILE *f = fopen(cache, "r");
    if (!f)
        return NULL;
    char **lines = vfi_calloc(MAX_ENTRIES + 1, sizeof(*lines));
    char line[8192];
    while (lines && fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n')
            continue;            /* cut short, or longer than any path we write */
        if (*n == MAX_ENTRIES) { /* keep the newest: drop the oldest */
            vfi_free(lines[0]);
            memmove(lines, lines + 1, (MAX_ENTRIES - 1) * sizeof(*lines));
            (*n)--;
        }
        lines[*n] = vfi_strdup(line);
        if (lines[*n])
            (*n)++;
    }
    fclose(f);
    return lines;
}

static void free_lines(char **lines, int n)
{
    for (int i = 0; lines && i < n; i++)
        vfi_free(lines[i]);
    vfi_free(lines);
}

vf_status vfi_sha256_file_cached(const char *path, char hex[65], vf_err *err)
{
    struct stat st;
    char *name = vfi_path_absolute(path), *cache = vfi_cache_path("sha256");
    char key[256];
    if (!name || strpbrk(name, "\t\n") || stat(path, &st) != 0 || !S_ISREG(st.st_mode) || !cache) {
        vfi_free(name);
        vfi_free(cache);
        return vfi_sha256_file(path, hex, err); /* no cache to consult: its error, if any */
    }
    stamp(&st, key, sizeof(key));
    int n;
    char **lines = read_cache(cache, &n);
    size_t name_len = strlen(name), key_len = strlen(key);
    int keep = 0;
    vf_status rc = VF_ERR_IO;
    for (int i = 0; i < n; i++) {
        char *l = lines[i], *tab = strchr(l, '\t');
        size_t len = strlen(l) - 1; /* without the newline */
        int this_file = tab && len == 65 + key_len + 1 + name_len &&
                        !memcmp(l + len - name_len, name, name_len) &&
                        l[len - name_len - 1] == '\t';
        if (this_file && tab == l + 64 && !memcmp(tab + 1, key, key_len) && rc < 0) {
            memcpy(hex, l, 64);
            hex[64] = '\0';
            rc = strspn(hex, "0123456789abcdef") == 64 ? VF_OK : VF_ERR_IO;
        }
        if (this_file) /* an older stamp of this file goes; the line is written anew */
            vfi_free(lines[i]);
        else
            lines[keep++] = l;
    }
    n = keep;
    if (rc < 0)
        rc = vfi_sha256_file(path, hex, err);
    if (rc >= 0 && (lines || (lines = vfi_calloc(MAX_ENTRIES + 1, sizeof(*lines))))) {
        size_t len = 64 + 1 + key_len + 1 + name_len + 2;
        char *line = vfi_malloc(len);
        if (line) {
            snprintf(line, len, "%s\t%s\t%s\n", hex, key, name);
            if (n == MAX_ENTRIES) {
                vfi_free(lines[0]);
                memmove(lines, lines + 1, (MAX_ENTRIES - 1) * sizeof(*lines));
                n--;
            }
            lines[n++] = line;
            /* a temporary file renamed over the cache: a reader sees the old or the new */
            size_t tl = strlen(cache) + 32;
            char *tmp = vfi_malloc(tl);
            FILE *f = NULL;
            if (tmp) {
                snprintf(tmp, tl, "%s.%ld", cache, (long)getpid());
                vfi_make_parent_dirs(tmp);
                f = fopen(tmp, "w");
            }
            int ok = f != NULL;
            for (int i = 0; ok && i < n; i++)
                ok = fputs(lines[i], f) >= 0;
            if (f)
                ok = fclose(f) == 0 && ok;
            if (tmp && (!ok || rename(tmp, cache) != 0))
                unlink(tmp);
            vfi_free(tmp);
        }
    }
    free_lines(lines, n);
    vfi_free(name);
    vfi_free(cache);
    return rc;
}
