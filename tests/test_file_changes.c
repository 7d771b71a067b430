/*
 * test_file_changes.c - a file that changes under the pipeline while it is being read: cut to
 * 40% (the decoder would see a clean end: it must fail with the frames so far kept, not be
 * marked done), grown by an append (more is coming: fail, so a later run redoes it), and removed
 * (read whole through the open descriptor: done with every frame). The next file is done each
 * time. argv[1]: the shared videos directory (skips, 77, without its 30 s VP8 clip).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "vidfeat.h"

enum action { CUT, GROW, REMOVE };

typedef struct state {
    const char *path;
    enum action action;
    int acted;
    vf_status status[2];
    int64_t frames[2];
    char error[2][512];
} state;

static int on_progress(void *user, int file, const char *path, int64_t done, int64_t expected)
{
    state *s = user;
    (void)path;
    (void)done;
    (void)expected;
    if (file != 0 || s->acted++)
        return 0;
    struct stat st;
    CHECK(stat(s->path, &st) == 0);
    if (s->action == CUT) {
        CHECK(truncate(s->path, st.st_size * 2 / 5) == 0);
    } else if (s->action == GROW) {
        FILE *f = fopen(s->path, "ab");
        CHECK(f);
        CHECK(fwrite("more to come", 1, 12, f) == 12);
        fclose(f);
    } else {
        CHECK(unlink(s->path) == 0);
    }
    return 0;
}

static void on_file(void *user, int file, const vf_file_result *r)
{
    state *s = user;
    CHECK(file >= 0 && file < 2);
    s->status[file] = r->status;
    s->frames[file] = r->frames;
    snprintf(s->error[file], sizeof(s->error[file]), "%s", r->error ? r->error : "");
}

static void run_case(const char *dir, const char *clip, enum action action, const char *name)
{
    char copy[1024];
    snprintf(copy, sizeof(copy), "%s/%s.webm", dir, name);
    vf_copy_file(clip, copy);
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    /* oneDNN, so frames are converted by swscale: the reference backend's per-pixel conversion
     * of 2160 frames of 720p takes most of the test's time limit in the sanitizer build. */
    cfg.backend = "dnnl";
    cfg.batch_size = 4;
    cfg.queue_depth = 1; /* the decoder stays a few frames ahead of the hook */
    state s = {.path = copy, .action = action};
    vf_pipeline *p = NULL;
    CHECK_OK(vf_pipeline_create(&cfg, &p), vf_pipeline_errmsg(p));
    const char *paths[] = {copy, VF_SAMPLES_DIR "/testsrc_64x48.mp4"};
    vf_run_hooks hooks = {&s, on_progress, on_file, NULL};
    CHECK_OK(vf_pipeline_run(p, paths, 2, &hooks), vf_pipeline_errmsg(p));
    vf_pipeline_free(&p);
    printf("%-7s %s: status %s, %lld frames%s%s\n", name, copy, vf_status_str(s.status[0]),
           (long long)s.frames[0], s.error[0][0] ? ": " : "", s.error[0]);
    CHECK(s.acted);
    if (action == REMOVE) {
        CHECK_EQ(s.status[0], VF_OK);
        CHECK_EQ(s.frames[0], 720); /* every frame of the 30 s clip at 24 fps */
    } else {
        CHECK_EQ(s.status[0], VF_ERR_DECODE);
        CHECK(strstr(s.error[0], action == CUT ? "shrank" : "changed"));
        CHECK(s.frames[0] > 0 && (action == GROW || s.frames[0] < 720));
    }
    CHECK_EQ(s.status[1], VF_OK);
    CHECK_EQ(s.frames[1], 20);
    unlink(copy);
}

int main(int argc, char **argv)
{
    char clip[1024];
    snprintf(clip, sizeof(clip), "%s/vp8_720p_bigbuckbunny_30s.webm", argc > 1 ? argv[1] : ".");
    if (access(clip, R_OK) != 0) {
        printf("skip: %s not found\n", clip);
        return 77;
    }
    char dir[] = "/tmp/vidfeat_changes_XXXXXX";
    CHECK(mkdtemp(dir));
    run_case(dir, clip, CUT, "cut");
    run_case(dir, clip, GROW, "grown");
    run_case(dir, clip, REMOVE, "removed");
    rmdir(dir);
    return 0;
}
