/*
 * cmd_merge.c - vidfeat merge OUT.db IN.db...: the per-task SQLite files of a cluster run
 * without a database server (--shard K/N), merged into one; each file once, conflicts said.
 */
#include <stdio.h>
#include <sys/stat.h>

#include "cli/cli.h"

typedef struct merge_ctx {
    const char *in;
    int conflicts;
} merge_ctx;

static void on_conflict(void *user, const char *path, const char *sampling)
{
    merge_ctx *m = user;
    m->conflicts++;
    cli_printf(stderr, "vidfeat: %s: %s (%s) is done in both with other vectors; kept the first\n",
               m->in, path, sampling);
}

int cmd_merge(cli *c, int argc, char **argv)
{
    if (argc < 2) {
        cli_printf(stderr, "vidfeat: merge: expected OUT.db and at least one IN.db\n");
        return EXIT_USAGE;
    }
    int status = EXIT_OK, conflicts = 0;
    long long total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            cli_printf(stderr, "vidfeat: %s: no such database\n", argv[i]);
            status = EXIT_FAIL;
            continue;
        }
        merge_ctx m = {argv[i], 0};
        int64_t merged = 0;
        char err[1024] = "";
        if (vf_db_merge(argv[0], argv[i], on_conflict, &m, &merged, err, sizeof(err)) < 0) {
            cli_printf(stderr, "vidfeat: %s\n", err);
            status = EXIT_FAIL;
            continue;
        }
        total += merged;
        conflicts += m.conflicts;
    }
    if (conflicts)
        status = EXIT_FAIL;
    if (c->verbosity >= 0)
        cli_printf(stderr, "vidfeat: %lld extractions merged into %s, %d conflict%s\n", total,
                   argv[0], conflicts, conflicts == 1 ? "" : "s");
    return status;
}
