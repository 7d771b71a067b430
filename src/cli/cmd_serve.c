/*
 * cmd_serve.c - vidfeat serve: the web page over a database (vf_server_start), until Ctrl-C or
 * SIGTERM. Prints the address to open once listening (with the token, when one is asked).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define DEFAULT_PORT 8765
#define MAX_TOKEN    128

/* The token in path: its first line, without the newline. 0, or EXIT_USAGE having said why. */
static int read_token(const char *path, char *token, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_printf(stderr, "vidfeat: serve: --token-file %s: %s\n", path, strerror(errno));
        return EXIT_USAGE;
    }
    int ok = fgets(token, (int)size, f) != NULL;
    fclose(f);
    token[ok ? strcspn(token, "\r\n") : 0] = '\0';
    if (!token[0]) {
        cli_printf(stderr, "vidfeat: serve: --token-file %s holds no token on its first line\n",
                   path);
        return EXIT_USAGE;
    }
    return 0;
}

int cmd_serve(cli *c, int argc, char **argv)
{
    if (argc != 1) {
        cli_printf(stderr, "vidfeat: serve: expected one database\n");
        return EXIT_USAGE;
    }
    if (!cli_db_exists(argv[0]))
        return EXIT_START;
    char token[MAX_TOKEN + 2] = "";
    if (c->token_file && read_token(c->token_file, token, sizeof(token)))
        return EXIT_USAGE;
    if (c->token_file && c->no_auth) {
        cli_printf(stderr, "vidfeat: serve: --token-file and --no-auth contradict each other\n");
        return EXIT_USAGE;
    }
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* the database's */
    vf_serve_opts o = {.root = c->cfg.root,
                       .bind = c->bind,
                       .port = c->port >= 0 ? c->port : DEFAULT_PORT,
                       .token = token[0] ? token : NULL,
                       .no_auth = c->no_auth,
                       .allow_hosts = c->allow_hosts};
    /* the signals are waited for below, so they must not end the process first */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    vf_server *srv = NULL;
    char err[1024] = "";
    vf_status rc = vf_server_start(argv[0], &cfg, &o, &srv, err, sizeof(err));
    if (rc < 0) {
        cli_printf(stderr, "vidfeat: %s\n", err);
        return rc == VF_ERR_INVALID ? EXIT_USAGE : EXIT_START;
    }
    const char *bind = c->bind ? c->bind : "127.0.0.1";
    int v6 = strchr(bind, ':') != NULL;
    const char *tok = vf_server_token(srv);
    char db[1024];
    /* the address on stdout (a script may read it), the rest on stderr */
    cli_printf(stdout, "http://%s%s%s:%d/%s%s\n", v6 ? "[" : "", bind, v6 ? "]" : "",
               vf_server_port(srv), tok && !c->token_file ? "?token=" : "",
               tok && !c->token_file ? tok : "");
    fflush(stdout);
    if (c->verbosity >= 0)
        cli_printf(stderr, "vidfeat: serving %s%s (Ctrl-C stops)\n",
                   vf_db_display(argv[0], db, sizeof(db)),
                   tok ? "; clients must give the token" : "");
    int sig = 0;
    sigwait(&stop, &sig);
    if (c->verbosity >= 0)
        cli_printf(stderr, "vidfeat: serve: stopping\n");
    vf_server_stop(&srv);
    return EXIT_OK;
}
