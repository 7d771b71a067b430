/*
 * cmd_enqueue.c - vidfeat enqueue: register files as work in a database, for workers that a
 * scheduler starts with no inputs (vidfeat -o DB [--root R]).
 */
#include <stdio.h>

#include "cli/cli.h"

int cmd_enqueue(cli *c, int argc, char **argv)
{
    if (!c->db_set) {
        fprintf(stderr, "vidfeat: enqueue: name the database with -o FILE|URI\n");
        return EXIT_USAGE;
    }
    if (argc < 1 && !c->files_from) {
        fprintf(stderr, "vidfeat: enqueue: no input files (FILE|DIR... or --files-from)\n");
        return EXIT_USAGE;
    }
    path_list inputs = {0};
    int status = cli_collect_inputs(c, argc, argv, &inputs);
    char err[1024] = "";
    if (vf_db_enqueue(c->cfg.db_path, c->cfg.root, (const char *const *)inputs.items, inputs.n, err,
                      sizeof(err)) < 0) {
        fprintf(stderr, "vidfeat: %s\n", err);
        status = EXIT_START;
    } else if (c->verbosity >= 0) {
        fprintf(stderr, "vidfeat: %d file%s queued\n", inputs.n, inputs.n == 1 ? "" : "s");
    }
    cli_free_paths(&inputs);
    return status;
}
