/*
 * example.c - using libvidfeat without a database: extract features of the files given on the
 * command line and print, for each frame, its time and the first values of its vector.
 *
 *   build/samples/vidfeat_example MODEL.onnx|NAME FILE...
 */
#include <stdio.h>

#include "vidfeat.h"

static int on_batch(void *user, const vf_batch_view *b)
{
    (void)user;
    for (int i = 0; i < b->n; i++) {
        const float *v = b->features + (size_t)i * b->dim;
        printf("%s t=%.3f frame=%lld [%g, %g, ...] (%d values)\n", b->path, b->t[i],
               (long long)b->frame_index[i], v[0], b->dim > 1 ? v[1] : 0.0, b->dim);
    }
    return 0; /* non-zero would stop the run */
}

static void on_file(void *user, int file, const vf_file_result *r)
{
    (void)user;
    (void)file;
    if (r->status < 0)
        fprintf(stderr, "%s: %s\n", r->path, r->error);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL FILE...\n", argv[0]);
        return 2;
    }
    vf_config cfg = vf_config_default();
    cfg.model = argv[1];
    cfg.batch_size = 8;
    cfg.sample_fps = 2.0; /* two frames per second */
    vf_pipeline *p = NULL;
    if (vf_pipeline_create(&cfg, &p) < 0) {
        fprintf(stderr, "%s\n", vf_pipeline_errmsg(p));
        vf_pipeline_free(&p);
        return 1;
    }
    vf_run_hooks hooks = {NULL, NULL, on_file, on_batch};
    vf_status rc = vf_pipeline_run(p, (const char *const *)argv + 2, argc - 2, &hooks);
    if (rc < 0)
        fprintf(stderr, "%s\n", vf_pipeline_errmsg(p));
    vf_pipeline_free(&p);
    return rc < 0;
}
