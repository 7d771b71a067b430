/*
 * cmd_enqueue.c - vidfeat enqueue: register files as work in a database, for workers that a
 * scheduler starts with no inputs (vidfeat -o DB [--root R]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/path.h"

/* Under --root, the inputs whose file lies outside it through a link are left out, each with a
 * line (workers would refuse them): docs/archives.md "What vidfeat reads". EXIT_OK, EXIT_FAIL (some
 * left out), -1 out of memory. */
static int keep_inside_root(const cli *c, path_list *inputs)
{
    if (!c->cfg.root || c->cfg.follow_links_outside)
        return EXIT_OK;
    char root[4096], why[256];
    if (vf_input_name(c->cfg.root, NULL, root, sizeof(root), why, sizeof(why)) < 0)
        return -1;
    for (size_t n = strlen(root); n > 1 && root[n - 1] == '/';) /* as records name it */
        root[--n] = '\0';
    vf_archive a;
    vf_err err;
    if (vfi_archive_init(&a, root, 0, &err) < 0)
        return -1;
    int status = EXIT_OK, kept = 0;
    for (int i = 0; i < inputs->n; i++) {
        int inside = status >= 0 ? vfi_archive_holds(&a, inputs->items[i], NULL) : 1;
        if (inside < 0)
            status = -1;
        if (inside) {
            inputs->items[kept++] = inputs->items[i];
            continue;
        }
        cli_printf(stderr,
                   "vidfeat: %s: leads outside --root %s through a symbolic link: not queued "
                   "(--follow-links-outside allows it)\n",
                   inputs->items[i], root);
        free(inputs->items[i]);
        status = EXIT_FAIL;
    }
    inputs->n = kept;
    vfi_archive_clear(&a);
    return status;
}

int cmd_enqueue(cli *c, int argc, char **argv)
{
    if (!c->db_set) {
        cli_printf(stderr, "vidfeat: enqueue: name the database with -o FILE|URI\n");
        return EXIT_USAGE;
    }
    if (argc < 1 && !c->files_from) {
        cli_printf(stderr, "vidfeat: enqueue: no input files (FILE|DIR... or --files-from)\n");
        return EXIT_USAGE;
    }
    path_list inputs = {0};
    int status = cli_collect_inputs(c, argc, argv, &inputs);
    int kept = keep_inside_root(c, &inputs);
    if (kept < 0) {
        cli_printf(stderr, "vidfeat: out of memory\n");
        cli_free_paths(&inputs);
        return EXIT_FAIL;
    }
    if (kept != EXIT_OK)
        status = kept;
    char err[1024] = "";
    if (vf_db_enqueue(c->cfg.db_path, c->cfg.root, (const char *const *)inputs.items, inputs.n, err,
                      sizeof(err)) < 0) {
        cli_printf(stderr, "vidfeat: %s\n", err);
        status = EXIT_START;
    } else if (c->verbosity >= 0) {
        cli_printf(stderr, "vidfeat: %d file%s queued\n", inputs.n, inputs.n == 1 ? "" : "s");
    }
    cli_free_paths(&inputs);
    return status;
}
