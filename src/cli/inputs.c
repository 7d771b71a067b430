/*
 * inputs.c - what the command line names: its files, directories, lists and shard through the
 * library's vf_inputs_collect (the Python package takes them the same way), and databases.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

void cli_free_paths(path_list *l)
{
    vf_inputs_free(l->items, l->n);
    memset(l, 0, sizeof(*l));
}

static void say_line(void *user, const char *line)
{
    (void)user;
    cli_printf(stderr, "vidfeat: %s\n", line);
}

int cli_collect_inputs(const cli *c, int argc, char **argv, path_list *inputs)
{
    vf_inputs_opts o = {
        .root = c->cfg.root,
        .follow_links_outside = c->cfg.follow_links_outside,
        .files_from = c->files_from,
        .nul_separated = c->nul_separated,
        .shard_k = c->shard_k,
        .shard_n = c->shard_n,
        .verbose = c->verbosity > 0,
        .say = say_line,
    };
    int failed = 0;
    if (vf_inputs_collect((const char *const *)argv, argc, &o, &inputs->items, &inputs->n,
                          &failed) < 0) {
        cli_printf(stderr, "vidfeat: out of memory\n");
        return EXIT_FAIL;
    }
    inputs->cap = inputs->n;
    return failed ? EXIT_FAIL : EXIT_OK;
}

void cli_warn_password(const char *target)
{
    if (!vf_db_has_password(target))
        return;
    char shown[512];
    cli_printf(stderr,
               "vidfeat: warning: %s: a password on the command line can be read by other users of "
               "this machine (ps): put it in ~/.pgpass (or the file PGPASSFILE names) or a "
               "service file (PGSERVICEFILE, ?service=NAME) instead\n",
               vf_db_display(target, shown, sizeof(shown)));
}

int cli_db_exists(const char *path)
{
    cli_warn_password(path);
    struct stat st;
    if (vf_db_is_server(path) || stat(path, &st) == 0)
        return 1;
    cli_printf(stderr, "vidfeat: %s: no such database\n", path);
    return 0;
}
