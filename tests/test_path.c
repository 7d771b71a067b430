/*
 * test_path.c - vfi_path_absolute, the name a file is recorded under: absolute paths tidied,
 * relative ones joined to the current directory, ".." kept, a relative path left relative (but
 * tidied) when the current directory is gone, NULL for no path and when out of memory.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/mem.h"
#include "core/path.h"

static void expect(const char *path, const char *want)
{
    char *got = vfi_path_absolute(path);
    CHECK(got);
    if (strcmp(got, want)) {
        fprintf(stderr, "vfi_path_absolute(\"%s\"): \"%s\", want \"%s\"\n", path, got, want);
        exit(1);
    }
    vfi_free(got);
}

int main(void)
{
    expect("/a/b/c.mp4", "/a/b/c.mp4");
    expect("/a//b/./c.mp4", "/a/b/c.mp4");
    expect("//a/b/", "/a/b");
    expect("/", "/");
    expect("//./", "/");
    expect("/a/../b/c.mp4", "/a/../b/c.mp4"); /* ".." is not resolved */
    expect("/a/.hidden/..x/c", "/a/.hidden/..x/c");

    char dir[] = "/tmp/vidfeat_path_XXXXXX", want[PATH_MAX + 64];
    CHECK(mkdtemp(dir));
    CHECK(chdir(dir) == 0);
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof(cwd))); /* /tmp may itself be a link: what getcwd says counts */
    snprintf(want, sizeof(want), "%s/clip.mp4", cwd);
    expect("clip.mp4", want);
    expect("./clip.mp4", want);
    expect(".//clip.mp4", want);
    snprintf(want, sizeof(want), "%s/sub/clip.mp4", cwd);
    expect("sub//./clip.mp4", want);
    snprintf(want, sizeof(want), "%s/../clip.mp4", cwd);
    expect("../clip.mp4", want);
    expect(".", cwd);

    CHECK(vfi_path_absolute("") == NULL);
    CHECK(vfi_path_absolute(NULL) == NULL);
    if (vfi_mem_fail_after(0) >= 0) { /* the current directory's buffer, then the result's */
        for (long n = 1; n <= 2; n++) {
            vfi_mem_fail_after(n);
            char *got = vfi_path_absolute("clip.mp4");
            vfi_mem_fail_after(0);
            CHECK(got == NULL);
        }
    }

    /* the current directory removed under us: relative names stay relative, tidied */
    CHECK(rmdir(dir) == 0);
    expect("a//./b.mp4", "a/b.mp4");
    expect("./", ".");
    expect("/x//y", "/x/y");
    CHECK(chdir("/") == 0);
    printf("ok\n");
    return 0;
}
