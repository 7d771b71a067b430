/*
 * cmd_embed.c - vidfeat embed --text T | --image F ... [--model M] [--json | -o OUT.npy]: a
 * model's embeddings for other systems, in command-line order: texts through a CLIP model's text
 * tower, images (a picture, or a video's first frame) through its image tower (or any model's
 * layer, for --image alone). Without --json or -o, a line of floats each (9 significant digits:
 * a float32 reads back exactly); --json: {"model", "dim", "embeddings": [{"text", "ids",
 * "truncated", "embedding"} | {"image", "t", "frame_index", "embedding"}]}; -o: one float32 .npy
 * [n, dim]. Embeddings are as the towers give them, not normalised.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/export.h"
#include "core/json.h"
#include "core/path.h"

#define DEFAULT_MODEL "clip_vit_b32"

int cli_bad_text(const char *cmd, const char *text, int index)
{
    char why[256];
    if (vf_text_check(text, why, sizeof(why)) >= 0)
        return 0;
    cli_printf(stderr, "vidfeat: %s: --text %d %s\n", cmd, index + 1, why);
    return 1;
}

/* What embed makes: an embedding a query, and for texts their ids. */
typedef struct embedded {
    int dim, context;
    float *vec;   /* n_queries x dim */
    int64_t *ids; /* n_queries x context (texts' rows) */
    int *n_ids, *truncated;
    double *t;            /* images: the frame's time */
    int64_t *frame_index; /* images: the frame's number */
    int *got;             /* images: a vector arrived */
    int *image_of;        /* run file -> query */
    int failures;         /* images that could not be read */
} embedded;

static int capture_image(void *user, const vf_batch_view *b)
{
    embedded *e = user;
    int qi = e->image_of[b->file];
    if (b->n < 1 || e->got[qi] || b->dim != e->dim)
        return 0;
    memcpy(e->vec + (size_t)qi * (size_t)e->dim, b->features, (size_t)e->dim * sizeof(float));
    e->t[qi] = b->t[0];
    e->frame_index[qi] = b->frame_index[0];
    e->got[qi] = 1;
    return 0;
}

static void image_done(void *user, int file, const vf_file_result *r)
{
    (void)file;
    embedded *e = user;
    if (r->status < 0) {
        cli_printf(stderr, "vidfeat: %s: %s\n", r->path, r->error);
        e->failures++;
    }
}

/* The texts' embeddings (and ids) into e. EXIT_OK or why not. */
static int embed_texts(cli *c, embedded *e, vf_text_encoder *te)
{
    for (int i = 0; i < c->n_queries; i++) {
        if (!c->queries[i].is_text)
            continue;
        int64_t *ids = e->ids + (size_t)i * (size_t)e->context;
        if (vf_text_tokenize(te, c->queries[i].s, ids, &e->n_ids[i], &e->truncated[i]) < 0 ||
            vf_text_encode_ids(te, ids, 1, e->vec + (size_t)i * (size_t)e->dim) < 0) {
            cli_printf(stderr, "vidfeat: embed: %s\n", vf_text_encoder_errmsg(te));
            return EXIT_FAIL;
        }
    }
    return EXIT_OK;
}

/* The images' embeddings into e: each file's first frame, through one pipeline run. */
static int embed_images(cli *c, embedded *e, vf_pipeline *p, int n_images)
{
    const char **paths = calloc((size_t)n_images, sizeof(char *));
    if (!paths)
        return EXIT_FAIL;
    for (int i = 0, k = 0; i < c->n_queries; i++)
        if (!c->queries[i].is_text) {
            e->image_of[k] = i;
            paths[k++] = c->queries[i].s;
        }
    vf_run_hooks hooks = {.user = e, .file_done = image_done, .batch = capture_image};
    vf_status rc = vf_pipeline_run(p, paths, n_images, &hooks);
    free(paths);
    if (rc < 0) {
        cli_printf(stderr, "vidfeat: embed: %s\n", vf_pipeline_errmsg(p));
        return rc == VF_ERR_CANCELLED ? EXIT_INTERRUPTED : EXIT_FAIL;
    }
    for (int i = 0; i < c->n_queries; i++)
        if (!c->queries[i].is_text && !e->got[i] && !e->failures) {
            cli_printf(stderr, "vidfeat: %s: no frame\n", c->queries[i].s);
            e->failures++;
        }
    return e->failures ? EXIT_FAIL : EXIT_OK;
}

static int write_json(cli *c, const embedded *e, const char *model)
{
    vf_json *doc = vfi_json_new_object(), *list = vfi_json_new_array();
    int bad = !doc || !list;
    bad |= vfi_json_add_str(doc, "model", model) < 0;
    bad |= vfi_json_add_int(doc, "dim", e->dim) < 0;
    bad |= vfi_json_add(doc, "embeddings", list) < 0;
    for (int i = 0; !bad && i < c->n_queries; i++) {
        vf_json *item = vfi_json_new_object(), *vec = vfi_json_new_array();
        bad |= vfi_json_push(list, item) < 0;
        if (c->queries[i].is_text) {
            vf_json *ids = vfi_json_new_array();
            bad |= vfi_json_add_str(item, "text", c->queries[i].s) < 0;
            bad |= vfi_json_add(item, "ids", ids) < 0;
            for (int k = 0; !bad && k < e->n_ids[i]; k++)
                bad |= vfi_json_push_int(ids, e->ids[(size_t)i * (size_t)e->context + k]) < 0;
            bad |= vfi_json_add_bool(item, "truncated", e->truncated[i]) < 0;
        } else {
            bad |= vfi_json_add_str(item, "image", c->queries[i].s) < 0;
            bad |= vfi_json_add_real(item, "t", e->t[i], 6) < 0;
            bad |= vfi_json_add_int(item, "frame_index", e->frame_index[i]) < 0;
        }
        bad |= vfi_json_add(item, "embedding", vec) < 0;
        for (int k = 0; !bad && k < e->dim; k++)
            bad |= vfi_json_push_float(vec, e->vec[(size_t)i * (size_t)e->dim + k]) < 0;
    }
    if (!bad)
        bad = vfi_json_write(stdout, doc, 0) < 0;
    vfi_json_free(&doc);
    if (bad)
        cli_printf(stderr, "vidfeat: embed: the JSON could not be written\n");
    return bad ? EXIT_FAIL : EXIT_OK;
}

/* One float32 .npy [n, dim], written under a temporary name and renamed when whole. */
static int write_npy(const char *path, const embedded *e, int n)
{
    size_t len = strlen(path);
    char *part = malloc(len + 6);
    if (!part)
        return EXIT_FAIL;
    snprintf(part, len + 6, "%s.part", path);
    FILE *f = vfi_fopen_new(part, "wb");
    int bad = !f || export_npy_header(f, "<f4", n, e->dim) < 0;
    for (int i = 0; !bad && i < n * e->dim; i++) {
        float v = e->vec[i];
        unsigned char b[4];
        uint32_t u;
        memcpy(&u, &v, 4);
        for (int k = 0; k < 4; k++)
            b[k] = (unsigned char)(u >> (8 * k));
        bad = fwrite(b, 1, 4, f) != 4;
    }
    if (f && fclose(f) != 0)
        bad = 1;
    if (!bad && rename(part, path) != 0)
        bad = 1;
    if (bad) {
        perror(path);
        remove(part);
    }
    free(part);
    return bad ? EXIT_FAIL : EXIT_OK;
}

int cmd_embed(cli *c, int argc, char **argv)
{
    (void)argv;
    int n_texts = c->n_texts, n_images = c->n_queries - c->n_texts;
    if (argc != 0 || c->n_queries == 0 || (c->json && c->output)) {
        cli_printf(stderr, "vidfeat: embed: expected --text TEXT and --image FILE (any number), "
                           "and --json or -o OUT.npy (not both)\n");
        return EXIT_USAGE;
    }
    for (int i = 0; i < c->n_texts; i++)
        if (cli_bad_text("embed", c->texts[i], i))
            return EXIT_USAGE;
    if (cli_single_values(c))
        return EXIT_USAGE;
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = DEFAULT_MODEL;
    vf_text_encoder *te = NULL;
    vf_pipeline *p = NULL;
    embedded e = {0};
    int status = EXIT_OK;
    if (n_texts) {
        if (vf_text_encoder_create(&cfg, &te) < 0) {
            cli_printf(stderr, "vidfeat: %s\n", te ? vf_text_encoder_errmsg(te) : "out of memory");
            status = EXIT_START;
            goto done;
        }
        vf_text_info ti;
        vf_text_encoder_info(te, &ti);
        e.dim = ti.dim;
        e.context = ti.context;
    }
    if (n_images) {
        vf_config pc = cfg;
        pc.db_path = NULL;
        pc.max_frames = 1;
        pc.batch_size = 1;
        if (vf_pipeline_create(&pc, &p) < 0) {
            cli_printf(stderr, "vidfeat: %s\n", p ? vf_pipeline_errmsg(p) : "out of memory");
            status = EXIT_START;
            goto done;
        }
        vf_model_info mi;
        vf_pipeline_info(p, &mi);
        if (n_texts && mi.feature_dim != e.dim) {
            cli_printf(
                stderr,
                "vidfeat: embed: %s's layer %s gives %d values, its text tower %d: texts and "
                "images are embedded together only in a CLIP model's shared space\n",
                mi.name, mi.layer, mi.feature_dim, e.dim);
            status = EXIT_USAGE;
            goto done;
        }
        e.dim = mi.feature_dim;
    }
    size_t n = (size_t)c->n_queries;
    e.vec = calloc(n * (size_t)e.dim, sizeof(float));
    e.ids = calloc(n * (size_t)(e.context ? e.context : 1), sizeof(int64_t));
    e.n_ids = calloc(n, sizeof(int));
    e.truncated = calloc(n, sizeof(int));
    e.t = calloc(n, sizeof(double));
    e.frame_index = calloc(n, sizeof(int64_t));
    e.got = calloc(n, sizeof(int));
    e.image_of = calloc(n, sizeof(int));
    if (!e.vec || !e.ids || !e.n_ids || !e.truncated || !e.t || !e.frame_index || !e.got ||
        !e.image_of) {
        cli_printf(stderr, "vidfeat: embed: out of memory\n");
        status = EXIT_FAIL;
        goto done;
    }
    if (n_texts && (status = embed_texts(c, &e, te)) != EXIT_OK)
        goto done;
    if (n_images) {
        cli_catch_interrupts();
        if ((status = embed_images(c, &e, p, n_images)) != EXIT_OK)
            goto done;
    }
    const char *model = cfg.model;
    if (c->json) {
        status = write_json(c, &e, model);
    } else if (c->output) {
        status = write_npy(c->output, &e, (int)n);
    } else {
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < e.dim; k++)
                cli_printf(stdout, "%.9g%c", e.vec[i * (size_t)e.dim + (size_t)k],
                           k + 1 < e.dim ? ' ' : '\n');
    }
    if (status == EXIT_OK && c->verbosity > 0)
        cli_printf(stderr, "vidfeat: embed: %d text%s and %d image%s by %s, %d values each\n",
                   n_texts, n_texts == 1 ? "" : "s", n_images, n_images == 1 ? "" : "s", model,
                   e.dim);
done:
    free(e.vec);
    free(e.ids);
    free(e.n_ids);
    free(e.truncated);
    free(e.t);
    free(e.frame_index);
    free(e.got);
    free(e.image_of);
    vf_pipeline_free(&p);
    vf_text_encoder_free(&te);
    return status;
}
