/*
 * cmd_models.c - vidfeat models: the known models, where their files are, input size, layers,
 * and whose weights a file found has (official, other file, random weights or unknown).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"

#define MAX_INT(a, b) ((a) > (b) ? (a) : (b))

/* The list as one JSON array on stdout; -1 when it could not be made or written. */
static int print_json(const vf_model_list *list)
{
    vf_json *all = vfi_json_new_array();
    int bad = !all;
    for (size_t i = 0; i < vf_model_list_count(list) && !bad; i++) {
        const vf_model_entry *e = vf_model_list_get(list, i);
        vf_json *m = vfi_json_new_object();
        bad |= vfi_json_push(all, m) < 0;
        bad |= vfi_json_add_str(m, "name", e->name) < 0;
        bad |= vfi_json_add_int(m, "input_size", e->input_size) < 0;
        bad |= vfi_json_add_int(m, "frames", e->frames) < 0; /* a clip model's window, or 0 */
        bad |= vfi_json_add_str(m, "layers", e->layers) < 0;
        bad |= vfi_json_add_str(m, "file", e->file) < 0;
        bad |= vfi_json_add_str(m, "found", e->found) < 0; /* null when not found */
        bad |= vfi_json_add_str(m, "weights", e->found ? vf_weights_str(e->weights) : NULL) < 0;
        bad |= vfi_json_add_str(m, "manifest", e->manifest) < 0;
        bad |= vfi_json_add_str(m, "get", e->get) < 0;
        if (e->sample_rate) { /* an audio model: its sound, and how much of it a vector covers */
            bad |= vfi_json_add_int(m, "sample_rate", e->sample_rate) < 0;
            bad |= vfi_json_add_real(m, "patch_seconds", e->patch_seconds, 4) < 0;
        }
        if (e->text_file) { /* a CLIP model's text tower */
            bad |= vfi_json_add_str(m, "text_file", e->text_file) < 0;
            bad |= vfi_json_add_str(m, "text_found", e->text_found) < 0;
        }
    }
    if (!bad)
        bad = vfi_json_write(stdout, all, 0) < 0;
    vfi_json_free(&all);
    return bad ? -1 : 0;
}

/* A model's input as the table shows it: its side, a clip model's frames x side, or an audio
 * model's seconds a vector at its sample rate ("0.96s@16k"). */
static void size_text(const vf_model_entry *e, char *buf, size_t size)
{
    if (e->sample_rate > 0)
        snprintf(buf, size, "%gs@%gk", e->patch_seconds, e->sample_rate / 1000.0);
    else if (e->frames > 0)
        snprintf(buf, size, "%dx%d", e->frames, e->input_size);
    else
        snprintf(buf, size, "%d", e->input_size);
}

/* A table, its columns as wide as their longest entry: name, input size (a clip model's frames
 * x size), layers, weights and where the file is, or how to get it. */
static void print_table(const vf_model_list *list)
{
    int wn = 4, ws = 4, wl = 6, ww = 7;
    char sz[32];
    for (size_t i = 0; i < vf_model_list_count(list); i++) {
        const vf_model_entry *e = vf_model_list_get(list, i);
        size_text(e, sz, sizeof(sz));
        wn = MAX_INT(wn, (int)strlen(e->name));
        ws = MAX_INT(ws, (int)strlen(sz));
        wl = MAX_INT(wl, (int)strlen(e->layers));
        if (e->found)
            ww = MAX_INT(ww, (int)strlen(vf_weights_str(e->weights)));
    }
    cli_printf(stdout, "%-*s  %*s  %-*s  %-*s  %s\n", wn, "name", ws, "size", wl, "layers", ww,
               "weights", "file (or how to get it)");
    for (size_t i = 0; i < vf_model_list_count(list); i++) {
        const vf_model_entry *e = vf_model_list_get(list, i);
        size_text(e, sz, sizeof(sz));
        if (e->found)
            cli_printf(stdout, "%-*s  %*s  %-*s  %-*s  %s\n", wn, e->name, ws, sz, wl, e->layers,
                       ww, vf_weights_str(e->weights), e->found);
        else
            cli_printf(stdout, "%-*s  %*s  %-*s  %-*s  not found: %s\n", wn, e->name, ws, sz, wl,
                       e->layers, ww, "-", e->get);
        if (e->text_file) /* a CLIP model's text tower, on a line of its own */
            cli_printf(stdout, "%-*s  %*s  %-*s  %-*s  %s\n", wn, "", ws, "", wl, "text tower", ww,
                       "", e->text_found ? e->text_found : "not found: scripts/export-clip.py");
    }
}

int cmd_models(cli *c, int argc, char **argv)
{
    if (argc > 0) {
        cli_printf(stderr, "vidfeat: models: unexpected argument '%s'\n", argv[0]);
        return EXIT_USAGE;
    }
    vf_model_list *list = NULL;
    vf_status rc = vf_model_list_create(c->cfg.models_dir, &list);
    if (rc < 0) {
        cli_printf(stderr, "vidfeat: models: %s\n", vf_status_str(rc));
        return EXIT_FAIL;
    }
    int status = EXIT_OK;
    if (c->json && print_json(list) < 0) {
        cli_printf(stderr, "vidfeat: models: the JSON could not be written\n");
        status = EXIT_FAIL;
    }
    if (!c->json)
        print_table(list);
    char dirs[8192];
    if (c->verbosity > 0 && vf_models_search_path(c->cfg.models_dir, dirs, sizeof(dirs)))
        cli_printf(stderr, "vidfeat: models are looked for in %s (in that order)\n", dirs);
    vf_model_list_free(&list);
    return status;
}
