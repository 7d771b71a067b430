/*
 * test_sha256.c - sha256.c: the FIPS 180-4 example messages, the SHA-NI block function against
 * the portable one on every length and alignment around the block size, and file hashes
 * against coreutils' sha256sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/sha256.h"

#define CHECK_HEX(got, want) CHECK_MSG(!strcmp((got), (want)), "got %s, want %s", (got), (want))

static void both(const void *data, size_t size, const char *want)
{
    char a[65], b[65];
    vfi_sha256(data, size, a);
    vfi_sha256_portable(data, size, b);
    CHECK_HEX(a, want);
    CHECK_HEX(b, want);
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

    /* Pseudo-random data: every length up to four blocks and around the padding boundary
     * (55/56/63/64 bytes mod 64), at four alignments; the two block functions must agree. */
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 4; off++)
        for (size_t n = 0; n <= 260; n++) {
            char a[65], b[65];
            vfi_sha256(buf + off, n, a);
            vfi_sha256_portable(buf + off, n, b);
            CHECK_MSG(!strcmp(a, b), "length %zu offset %zu: %s vs %s", n, off, a, b);
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
    vfi_sha256_portable(big, size, want);
    CHECK_HEX(got, want);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "sha256sum %s 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    char line[256] = "";
    int have = p && fgets(line, sizeof(line), p) && strlen(line) >= 64;
    if (p)
        pclose(p);
    if (have) { /* coreutils is on every Debian; say so when it is not */
        line[64] = '\0';
        CHECK_HEX(got, line);
    } else {
        printf("  sha256sum not found: file hash checked against the portable code only\n");
    }
    CHECK_EQ(vfi_sha256_file("/nonexistent/model.onnx", got, &err), VF_ERR_IO);
    CHECK(strstr(err.msg, "/nonexistent/model.onnx"));
    unlink(path);
    printf("test_sha256: ok\n");
    return 0;
}
