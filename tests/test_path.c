/*
 * test_path.c - vfi_path_absolute, the name a file is recorded under: absolute paths tidied,
 * relative ones joined to the current directory, ".." kept, a relative path left relative (but
 * tidied) when the current directory is gone, NULL for no path and when out of memory; files
 * made for writing never written through a link planted at their name.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/mem.h"
#include "core/path.h"

static void expect_lexical(const char *path, const char *want)
{
    char *got = vfi_path_lexical(path);
    CHECK(got);
    if (strcmp(got, want)) {
        fprintf(stderr, "vfi_path_lexical(\"%s\"): \"%s\", want \"%s\"\n", path, got, want);
        exit(1);
    }
    vfi_free(got);
}

/* The archive's rule on a tree made here: top/in (the archive), top/out, links in and out. */
static void check_archive(const char *top)
{
    char in[PATH_MAX + 16], out[PATH_MAX + 16], p[PATH_MAX + 64], q[PATH_MAX + 64];
    snprintf(in, sizeof(in), "%s/in", top);
    snprintf(out, sizeof(out), "%s/out", top);
    CHECK(mkdir(in, 0755) == 0 && mkdir(out, 0755) == 0);
    snprintf(p, sizeof(p), "%s/file", in);
    fclose(fopen(p, "w"));
    snprintf(p, sizeof(p), "%s/secret", out);
    fclose(fopen(p, "w"));
    snprintf(q, sizeof(q), "%s/away", in);
    CHECK(symlink(p, q) == 0); /* in/away -> out/secret */
    snprintf(q, sizeof(q), "%s/near", in);
    CHECK(symlink("file", q) == 0); /* in/near -> in/file */
    snprintf(q, sizeof(q), "%s/outdir", in);
    CHECK(symlink(out, q) == 0); /* in/outdir -> out */

    vf_archive strict, loose;
    vf_err err;
    CHECK(vfi_archive_init(&strict, in, 0, &err) == VF_OK);
    CHECK(vfi_archive_init(&loose, in, 1, &err) == VF_OK);
    static const struct {
        const char *rel;
        int strict, loose;
    } cases[] = {
        {"in/file", 1, 1},          {"in/near", 1, 1},           {"in/away", 0, 1},
        {"in/outdir/secret", 0, 1}, {"in/../out/secret", 0, 0},  {"out/secret", 0, 0},
        {"in/missing", 1, 1},       {"in/../out/missing", 0, 0}, {"in", 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", top, cases[i].rel);
        char *real = NULL;
        int got = vfi_archive_holds(&strict, p, &real),
            got_loose = vfi_archive_holds(&loose, p, NULL);
        if (got != cases[i].strict || got_loose != cases[i].loose) {
            fprintf(stderr, "%s: inside %d (links out: %d), want %d (%d)\n", cases[i].rel, got,
                    got_loose, cases[i].strict, cases[i].loose);
            exit(1);
        }
        CHECK((real != NULL) == (strstr(cases[i].rel, "missing") == NULL));
        vfi_free(real);
    }
    vfi_archive_clear(&strict);
    vfi_archive_clear(&loose);
    static const char *const made[] = {"in/file", "in/away", "in/near", "in/outdir", "out/secret"};
    for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", top, made[i]);
        CHECK(unlink(p) == 0);
    }
    CHECK(rmdir(in) == 0 && rmdir(out) == 0);
}

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

/* vfi_fopen_new and vfi_replace_open (in the current directory): a link planted at the name
 * written is replaced, never written through; a leftover file is replaced. */
static void check_new_files(void)
{
    FILE *t = fopen("target", "w");
    CHECK(t && fputs("precious\n", t) >= 0 && fclose(t) == 0);
    CHECK(symlink("target", "out.part") == 0);
    CHECK(symlink("/nonexistent_dir/x", "dangling.part") == 0);
    CHECK(mkfifo("fifo.part", 0600) == 0);
    const char *names[] = {"out.part", "dangling.part", "fifo.part"};
    for (int i = 0; i < 3; i++) {
        FILE *f = vfi_fopen_new(names[i], "w");
        CHECK(f && fputs("new\n", f) >= 0 && fclose(f) == 0);
        struct stat st;
        CHECK(lstat(names[i], &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 4);
    }
    char buf[32] = "";
    t = fopen("target", "r");
    CHECK(t && fgets(buf, sizeof(buf), t) && fclose(t) == 0);
    CHECK(!strcmp(buf, "precious\n"));
    /* vfi_replace_open's temporary name, planted: the file written is the real one only */
    char planted[64];
    snprintf(planted, sizeof(planted), "real.tmp%ld", (long)getpid());
    CHECK(symlink("target", planted) == 0);
    FILE *f;
    char *tmp;
    vf_err err;
    CHECK(vfi_replace_open("real", &f, &tmp, &err) == VF_OK);
    CHECK(fputs("replaced\n", f) >= 0);
    CHECK(vfi_replace_close(f, tmp, "real", &err) == VF_OK);
    t = fopen("target", "r");
    CHECK(t && fgets(buf, sizeof(buf), t) && fclose(t) == 0);
    CHECK(!strcmp(buf, "precious\n"));
    struct stat st;
    CHECK(lstat("real", &st) == 0 && S_ISREG(st.st_mode) && lstat(planted, &st) != 0);
    const char *made[] = {"target", "out.part", "dangling.part", "fifo.part", "real"};
    for (int i = 0; i < 5; i++)
        CHECK(unlink(made[i]) == 0);
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
    expect_lexical("/a/../b/c.mp4", "/b/c.mp4");
    expect_lexical("/a/b/../../../c", "/c");
    expect_lexical("/..", "/");
    expect_lexical("/a/..x/./b/..", "/a/..x");
    CHECK(vfi_path_within("/a/b", "/a") && vfi_path_within("/a", "/a") &&
          vfi_path_within("/a/b", "/a/") && vfi_path_within("/x", "/"));
    CHECK(!vfi_path_within("/ab", "/a") && !vfi_path_within("/", "/a"));
    CHECK(vfi_path_has_dotdot("a/../b") && vfi_path_has_dotdot("..") &&
          vfi_path_has_dotdot("/x/.."));
    CHECK(!vfi_path_has_dotdot("a/..b/c") && !vfi_path_has_dotdot("...") &&
          !vfi_path_has_dotdot("/a/b"));

    char dir[] = "/tmp/vidfeat_path_XXXXXX", want[PATH_MAX + 64];
    CHECK(mkdtemp(dir));
    CHECK(chdir(dir) == 0);
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof(cwd))); /* /tmp may itself be a link: what getcwd says counts */
    check_archive(cwd);
    check_new_files();
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
