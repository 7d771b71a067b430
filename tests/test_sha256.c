/*
 * test_sha256.c - sha256.c: the FIPS 180-4 example messages; file digests (read in pieces)
 * equal to the memory digest and to coreutils' sha256sum; the digest cache: a file read once is
 * answered from the cache while unchanged, read again once touched or rewritten, and a damaged
 * or unwritable cache costs nothing but the hashing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/digest.h"

#define CHECK_HEX(got, want) CHECK_MSG(!strcmp((got), (want)), "got %s, want %s", (got), (want))

static void both(const void *data, size_t size, const char *want)
{
    char a[65];
    vfi_sha256(data, size, a);
    CHECK_HEX(a, want);
}

/* The cache's line for path: its digest into hex and 1, or 0 when it has none. */
static int cached_line(const char *cache, const char *path, char hex[65])
{
    FILE *f = fopen(cache, "r");
    char line[8192];
    int found = 0;
    while (f && fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        if (n > strlen(path) + 1 && line[n - 1] == '\n' &&
            !strncmp(line + n - 1 - strlen(path), path, strlen(path))) {
            memcpy(hex, line, 64);
            hex[64] = '\0';
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* The digest cache, in a scratch $XDG_CACHE_HOME. */
static void cache(const char *file, const char *want)
{
    char home[] = "/tmp/vidfeat_sha_cache_XXXXXX", cache_file[1100], got[65], hex[65];
    CHECK(mkdtemp(home));
    setenv("XDG_CACHE_HOME", home, 1);
    snprintf(cache_file, sizeof(cache_file), "%s/vidfeat/sha256", home);
    vf_err err = {0};
    CHECK_OK(vfi_sha256_file_cached(file, got, &err), err.msg); /* read, remembered */
    CHECK_HEX(got, want);
    CHECK(cached_line(cache_file, file, hex));
    CHECK_HEX(hex, want);
    /* the answer comes from the cache while the file is unchanged: a planted digest shows it */
    const char *planted = "00000000000000000000000000000000000000000000000000000000c0ffee00";
    char cmd[2400];
    snprintf(cmd, sizeof(cmd), "sed -i 's/^%s/%s/' '%s'", want, planted, cache_file);
    CHECK(system(cmd) == 0);
    CHECK_OK(vfi_sha256_file_cached(file, got, &err), err.msg);
    CHECK_HEX(got, planted);
    /* touched (a new modification time): read again, the line replaced */
    struct timespec times[2] = {{0, UTIME_OMIT}, {1234567890, 5}};
    CHECK(utimensat(AT_FDCWD, file, times, 0) == 0);
    CHECK_OK(vfi_sha256_file_cached(file, got, &err), err.msg);
    CHECK_HEX(got, want);
    CHECK(cached_line(cache_file, file, hex));
    CHECK_HEX(hex, want);
    /* a damaged cache is passed over and rewritten */
    FILE *f = fopen(cache_file, "w");
    CHECK(f);
    fputs("garbage\tline\nno newline at the end", f);
    fclose(f);
    CHECK_OK(vfi_sha256_file_cached(file, got, &err), err.msg);
    CHECK_HEX(got, want);
    /* no cache directory to be had: hashed all the same */
    setenv("XDG_CACHE_HOME", "/proc/vidfeat_no_such_dir", 1);
    unsetenv("HOME");
    CHECK_OK(vfi_sha256_file_cached(file, got, &err), err.msg);
    CHECK_HEX(got, want);
    CHECK_EQ(vfi_sha256_file_cached("/nonexistent/model.onnx", got, &err), VF_ERR_IO);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    /* FIPS 180-4 / NIST example values */
    both("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    both("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    both(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    enum { MILLION = 1000000 };
    static uint8_t buf[MILLION + 3];
    memset(buf, 'a', MILLION);
    both(buf, MILLION, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    /* pseudo-random bytes for the file below */
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
    /* Files: read in 1 MiB pieces, so 3 MiB + 17 bytes crosses piece and block boundaries. */
    char path[] = "/tmp/vidfeat_test_sha256_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    size_t size = (3u << 20) + 17;
    static uint8_t big[(3u << 20) + 17];
    for (size_t i = 0; i < size; i++)
        big[i] = buf[i % MILLION] ^ (uint8_t)(i >> 20);
    CHECK_EQ(write(fd, big, size), (long long)size);
    close(fd);
    char got[65], want[65];
    vf_err err = {0};
    CHECK_OK(vfi_sha256_file(path, got, &err), err.msg);
    vfi_sha256(big, size, want);
    CHECK_HEX(got, want);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "sha256sum %s 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    char line[256] = "";
    int have = p && fgets(line, sizeof(line), p) && strlen(line) >= 64;
    if (p)
        pclose(p);
    CHECK_MSG(have, "sha256sum (coreutils) did not run");
    line[64] = '\0';
    CHECK_HEX(got, line);
    CHECK_EQ(vfi_sha256_file("/nonexistent/model.onnx", got, &err), VF_ERR_IO);
    CHECK(strstr(err.msg, "/nonexistent/model.onnx"));
    cache(path, want);
    unlink(path);
    printf("test_sha256: ok\n");
    return 0;
}
