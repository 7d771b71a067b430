/*
 * main.c - the vidfeat command: the table of subcommands and the dispatch to them. Each
 * subcommand is a cmd_*.c with its own options (options.c marks which) and --help.
 * Exit status: cli.h's EXIT_* (0 all done, 1 some inputs failed, 2 usage, 3 could not start,
 * 130 interrupted). Messages go to stderr as
 * "vidfeat: <what>: <message>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

const cli_command cli_commands[] = {
    {"extract", CMD_EXTRACT, "[extract] [options] FILE|DIR...",
     "features of every frame (or sample) into the database (the default command)", cmd_extract},
    {"info", CMD_INFO, "info DB [--json]", "what a database holds", cmd_info},
    {"similar", CMD_SIMILAR,
     "similar DB --image F | --video V [--at T] | --text T... [-k N] [options]",
     "the stored frames nearest a query frame or words, or where a clip's footage is (no --at)",
     cmd_similar},
    {"matches", CMD_MATCHES, "matches DB [--video V] [--min-duration S] [--json] [options]",
     "reused footage: pairs of files where one shows the other, with the times", cmd_matches},
    {"bench", CMD_BENCH, "bench [options] FILE... | bench --infer-only [options]",
     "frames/s of the pipeline (or the network alone) per device, precision and batch", cmd_bench},
    {"models", CMD_MODELS, "models [options]", "known models, where found, input size, layers",
     cmd_models},
    {"calibrate", CMD_CALIBRATE, "calibrate [options] FILE|DIR...",
     "int8 scales from sample frames of these inputs", cmd_calibrate},
    {"enqueue", CMD_ENQUEUE, "enqueue -o DB [--root DIR] FILE|DIR... | --files-from F",
     "register files as work for queue workers (vidfeat -o DB with no inputs)", cmd_enqueue},
    {"merge", CMD_MERGE, "merge OUT.db IN.db...",
     "the done extractions of several SQLite files in one (each file once)", cmd_merge},
    {"index", CMD_INDEX, "index DB [--model M --layer L] [--kind K] [--index PATH] [--rebuild]",
     "a search index over the stored vectors, for similar (or brought up to date)", cmd_index},
    {"export", CMD_EXPORT, "export DB [--format npy|hdf5|csv] [-o PATH] [--model M --layer L]",
     "the stored vectors as .npy files, one HDF5 file or CSV", cmd_export},
    {"serve", CMD_SERVE, "serve DB [--root DIR] [--bind ADDR] [--port N] [options]",
     "a web page over the database: search, play, reused footage, progress", cmd_serve},
    {"embed", CMD_EMBED, "embed --text T | --image F ... [--model M] [--json | -o OUT.npy]",
     "a CLIP model's embeddings of texts and images, for other systems", cmd_embed},
};
const size_t cli_n_commands = sizeof(cli_commands) / sizeof(cli_commands[0]);

void cli_log(void *user, int level, const char *tag, const char *msg)
{
    (void)user;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    cli_printf(stderr, "vidfeat: %s[%s]: %s\n", level >= 0 && level <= 3 ? names[level] : "?", tag,
               msg);
}

int cli_log_level(const cli *c)
{
    return c->verbosity < 0    ? VF_LOG_ERROR
           : c->verbosity == 0 ? VF_LOG_WARNING
           : c->verbosity == 1 ? VF_LOG_INFO
                               : VF_LOG_DEBUG;
}

/* A first word that is not a command is an input of extract, unless it looks like a mistyped
 * command: no such path, and a bare word (no '/', no '.', not an option). Says so, with the
 * nearest command when one is close. */
static int unknown_command(const char *word)
{
    struct stat st;
    if (word[0] == '-' || strchr(word, '/') || strchr(word, '.') || lstat(word, &st) == 0)
        return 0;
    const char *best = NULL;
    size_t best_d = 3; /* at most two edits away */
    for (size_t i = 0; i < cli_n_commands; i++) {
        size_t d = cli_edit_distance(word, cli_commands[i].name);
        if (d < best_d) {
            best_d = d;
            best = cli_commands[i].name;
        }
    }
    if (best)
        fprintf(stderr, "vidfeat: unknown command '%s' (did you mean '%s'?)\n", word, best);
    else
        fprintf(stderr, "vidfeat: unknown command '%s' (see vidfeat --help)\n", word);
    return 1;
}

/* The commands that build or search a FAISS index run its matrix products on OpenBLAS, which
 * chooses its kernels when it loads and takes a CPU newer than it for an old generic one
 * (search/ann.h): they start again, at once, with OPENBLAS_CORETYPE set to the CPU's kind. */
static void blas_kernels(const cli_command *cmd, char **argv)
{
    if (!(cmd->bit & (CMD_INDEX | CMD_SIMILAR | CMD_MATCHES | CMD_SERVE)))
        return;
    vf_search_restart(argv);
}

/*
 * The network's threads wait for each other at every step. Spinning there (OpenMP's default)
 * is fastest only while nothing else wants the cores; on a shared machine, beside another worker
 * or our own decode thread, a spinning thread holds a core from the thread it waits for (two
 * runs at once on 2 CPUs: 0.73x of one alone spinning, 1.0x waiting passively, which costs
 * nothing alone: docs/benchmarks.md "Shared machines"). libgomp reads its policy once, when it
 * is loaded, from the environment the program started with (libc's initialiser resets the
 * environment after a pre-initialiser could change it), so the command starts itself again
 * with the policy set, unless the user chose one. If that cannot be done it runs as it is.
 */
static void wait_passively(char **argv)
{
    if (getenv("OMP_WAIT_POLICY"))
        return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 || (size_t)n >= sizeof(self) - 1 || setenv("OMP_WAIT_POLICY", "PASSIVE", 0) != 0)
        return;
    self[n] = '\0';
    execv(self, argv);
}

int main(int argc, char **argv)
{
    wait_passively(argv);
    cli c;
    memset(&c, 0, sizeof(c));
    c.cfg = vf_config_default();
    c.runs = 5;
    c.port = -1; /* serve: not given (0 is "any free port") */
    c.out = stdout;
    c.err = stderr;
    if (argc < 2) {
        cli_usage(NULL, 1, stderr);
        return EXIT_USAGE;
    }
    /* The first word is a command, or an input of the default "extract" command. */
    const cli_command *cmd = &cli_commands[0];
    for (size_t i = 0; i < cli_n_commands; i++) {
        if (!strcmp(argv[1], cli_commands[i].name)) {
            cmd = &cli_commands[i];
            c.explicit_cmd = 1;
        }
    }
    if (!c.explicit_cmd && unknown_command(argv[1]))
        return EXIT_USAGE;
    blas_kernels(cmd, argv);
    int shift = c.explicit_cmd, first;
    int rc = cli_parse(cmd, argc - shift, argv + shift, &c, &first);
    if (rc)
        return rc;
    vf_set_log_callback(cli_log, NULL, cli_log_level(&c));
    return cmd->run(&c, argc - shift - first, argv + shift + first);
}
