/*
 * cmd_index.c - vidfeat index: a search index over a database's vectors of one model and layer
 * (vf_db_index), built or brought up to date, said in one line (or one JSON object).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"

typedef struct index_progress {
    int tty;
    int shown;
} index_progress;

static int on_progress(void *user, int64_t done, int64_t total)
{
    index_progress *p = user;
    if (p->tty && total > 0) {
        cli_printf(stderr, "\rvidfeat: indexing: %lld of %lld vectors read (%d%%)", (long long)done,
                   (long long)total, (int)(100.0 * (double)done / (double)total));
        p->shown = 1;
    }
    return cli_interrupted();
}

static int print_json(const vf_index_report *r)
{
    vf_json *doc = vfi_json_new_object();
    int bad = vfi_json_add_str(doc, "index", r->path) < 0;
    bad |= vfi_json_add_str(doc, "kind", r->kind) < 0;
    bad |= vfi_json_add_bool(doc, "created", r->created) < 0;
    bad |= vfi_json_add_int(doc, "vectors", r->vectors) < 0;
    bad |= vfi_json_add_int(doc, "files", r->files) < 0;
    bad |= vfi_json_add_int(doc, "added", r->added) < 0;
    bad |= vfi_json_add_int(doc, "removed", r->removed) < 0;
    bad |= vfi_json_add_int(doc, "bytes", r->bytes) < 0;
    bad |= vfi_json_add_real(doc, "train_s", r->train_s, 3) < 0;
    bad |= vfi_json_add_real(doc, "add_s", r->add_s, 3) < 0;
    bad |= vfi_json_add_real(doc, "seconds", r->seconds, 3) < 0;
    bad |= vfi_json_add_real(doc, "vectors_per_s", r->add_s > 0 ? (double)r->added / r->add_s : 0.0,
                             0) < 0;
    if (!bad)
        bad = vfi_json_write(stdout, doc, 0) < 0;
    vfi_json_free(&doc);
    return bad ? -1 : 0;
}

int cmd_index(cli *c, int argc, char **argv)
{
    if (argc != 1) {
        cli_printf(stderr, "vidfeat: index: expected one database (see vidfeat index --help)\n");
        return EXIT_USAGE;
    }
    if (!cli_db_exists(argv[0]))
        return EXIT_START;
    cli_catch_interrupts();
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* the database's */
    index_progress prog = {isatty(STDERR_FILENO) && c->verbosity >= 0, 0};
    vf_index_opts o = {c->kind, c->index, c->rebuild, on_progress, &prog};
    vf_index_report r;
    char err[1024] = "";
    vf_status rc = vf_db_index(argv[0], &cfg, &o, &r, err, sizeof(err));
    if (prog.shown)
        cli_printf(stderr, "\r\033[K");
    if (cli_interrupted() || rc == VF_ERR_CANCELLED) {
        cli_printf(stderr, "vidfeat: index: interrupted (nothing written)\n");
        return EXIT_INTERRUPTED;
    }
    if (rc < 0) {
        cli_printf(stderr, "vidfeat: %s\n", err);
        return rc == VF_ERR_NOMEM ? EXIT_FAIL : EXIT_START;
    }
    if (c->json && print_json(&r) < 0) {
        cli_printf(stderr, "vidfeat: index: the JSON could not be written\n");
        return EXIT_FAIL;
    }
    if (c->verbosity >= 0)
        cli_printf(stderr,
                   "vidfeat: %s: %s %s, %lld vector%s of %lld extraction%s (%lld added, %lld "
                   "removed) in %.1f s, %.1f MB\n",
                   r.path, r.created ? "built" : "brought up to date:", r.kind,
                   (long long)r.vectors, cli_s(r.vectors), (long long)r.files, cli_s(r.files),
                   (long long)r.added, (long long)r.removed, r.seconds, (double)r.bytes / 1e6);
    return EXIT_OK;
}
