/*
 * cmd_info.c - vidfeat info: what a database holds.
 */
#include <stdio.h>

#include "cli/cli.h"

static void print_line(void *user, const char *text)
{
    (void)user;
    printf("%s\n", text);
}

int cmd_info(cli *c, int argc, char **argv)
{
    (void)c;
    if (argc != 1) {
        fprintf(stderr, "vidfeat: info: expected one database file\n");
        return EXIT_USAGE;
    }
    char err[1024] = "";
    if (!cli_db_exists(argv[0]))
        return EXIT_START;
    if (vf_db_describe(argv[0], print_line, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "vidfeat: %s\n", err);
        return EXIT_START;
    }
    return EXIT_OK;
}
