/*
 * cli.h - what the vidfeat command's files share: the subcommands (each in its own cmd_*.c, with
 * its options and help), the parsed command line (options.c), the inputs named on it
 * (inputs.c), a pipeline run with its progress and summary (run.c), and the bench chart
 * (plot.c). The command line is the top layer: it may use every folder of src/.
 */
#ifndef VIDFEAT_CLI_H
#define VIDFEAT_CLI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "vidfeat.h"

/* The exit status scripts act on (docs/commands.md "Exit status"): every input done; some inputs
 * failed (the others are done); a usage error (nothing was done); the run could not start (the
 * model, the database or the device); interrupted by Ctrl-C or SIGTERM (what was written is kept).
 */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_START = 3, EXIT_INTERRUPTED = 130 };

/* The subcommands, as bits: which of them take an option. */
enum {
    CMD_EXTRACT = 1 << 0,
    CMD_CALIBRATE = 1 << 1,
    CMD_BENCH = 1 << 2,
    CMD_SIMILAR = 1 << 3,
    CMD_INFO = 1 << 4,
    CMD_MODELS = 1 << 5,
    CMD_ENQUEUE = 1 << 6,
    CMD_MERGE = 1 << 7,
    CMD_EXPORT = 1 << 8,
    CMD_INDEX = 1 << 9,
    CMD_MATCHES = 1 << 10,
    CMD_EMBED = 1 << 11,
    CMD_SERVE = 1 << 12,
};

#define MAX_LIST 16
/* --text and --image queries on one command line (similar, embed) */
#define MAX_QUERIES 1024

/* One query of embed: a text or an image file, in command-line order. */
typedef struct cli_query {
    int is_text;
    const char *s;
} cli_query;

/* What a run shows as it goes (--progress): auto is a bar on a terminal, lines elsewhere. */
enum { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_LINES, PROGRESS_JSON, PROGRESS_NONE };

typedef struct cli {
    vf_config cfg;
    int db_set;
    int batches[MAX_LIST]; /* --batch 1,8,32 (bench); batches[0] is cfg.batch_size */
    int n_batches;
    vf_precision precisions[MAX_LIST];
    int n_precisions;
    int all_devices; /* bench --device all */
    int infer_only;
    int runs;
    int images;
    int json;
    const char *plot;          /* bench --plot FILE */
    int verbosity;             /* -1 quiet, 0 default, 1 info, 2 debug */
    int calibrate;             /* the calibrate command */
    int model_set;             /* --model given (similar: else the database's model) */
    const char *audio;         /* --audio's model, or NULL */
    int audio_run;             /* the pipeline being run is the audio model's */
    const char *image, *video; /* similar's query */
    double at;
    int at_set, top;
    int at_sound; /* --audio-at: at is into --video's soundtrack, the database's sound searched */
    /* Where a run (cli_run_pipeline) writes its lines (err) and documents (out): stderr and
     * stdout, or buffers (the sound's run beside the pictures', shown after them). */
    FILE *out, *err;
    int explicit_cmd;       /* the command was named (else extract, the default) */
    const char *files_from; /* --files-from FILE|- */
    int nul_separated;      /* -0: --files-from's paths end with NUL, not newline */
    int shard_k, shard_n;   /* --shard K/N: only the inputs of shard K (0 <= K < N); n 0: all */
    int queue;              /* extract: no inputs, work through the database's queue */
    int progress;           /* PROGRESS_*; cli_run_pipeline resolves auto */
    const char *format;     /* export --format */
    const char *output;     /* export -o */
    const char *kind;       /* index --kind */
    const char *index;      /* index and similar: --index PATH */
    int rebuild;            /* index --rebuild */
    int exact;              /* similar --exact */
    int probe;              /* similar --probe N */
    int summary;            /* info --summary */
    double min_duration;    /* matches, similar --video without --at: --min-duration S */
    double min_similarity;  /* and --min-similarity C */
    const char *texts[MAX_QUERIES]; /* similar, embed: --text, in order */
    int n_texts;
    cli_query queries[MAX_QUERIES]; /* embed: --text and --image, in order */
    int n_queries;
    const char *bind;        /* serve --bind ADDR */
    int port;                /* serve --port N; -1: not given (0: any free port) */
    const char *token_file;  /* serve --token-file F */
    int no_auth;             /* serve --no-auth */
    const char *allow_hosts; /* serve --allow-host NAMES */
} cli;

/* One subcommand: its name, the bit its options are marked with, what its --help shows, and
 * the function that runs it with the arguments left after the options. */
typedef struct cli_command {
    const char *name;
    unsigned bit;
    const char *synopsis; /* "info DB" */
    const char *summary;  /* one line */
    int (*run)(cli *c, int argc, char **argv);
} cli_command;

/* The commands, in the order --help lists them (main.c). */
extern const cli_command cli_commands[];
extern const size_t cli_n_commands;

/* Text output (text.c): fprintf whose %s arguments have their control characters
 * escaped as `ls -b` shows them (a path holding a newline or ESC cannot forge a line or drive
 * the terminal); the format's own characters are written as they are. */
__attribute__((format(printf, 2, 3))) int cli_printf(FILE *f, const char *fmt, ...);
int cli_vprintf(FILE *f, const char *fmt, va_list ap);
/* Levenshtein distance of two short words (0 when equal; words over 31 characters: 99), for
 * "did you mean" (options.c). */
size_t cli_edit_distance(const char *a, const char *b);
/* s with its control characters escaped into out (truncated to size); the full length. */
size_t cli_escape(char *out, size_t size, const char *s);
/* "s" unless n is 1: "%lld frame%s", n, cli_s(n). */
static inline const char *cli_s(long long n)
{
    return n == 1 ? "" : "s";
}

int cmd_extract(cli *c, int argc, char **argv);
int cmd_calibrate(cli *c, int argc, char **argv);
int cmd_info(cli *c, int argc, char **argv);
int cmd_similar(cli *c, int argc, char **argv);
int cmd_models(cli *c, int argc, char **argv);
int cmd_bench(cli *c, int argc, char **argv);
int cmd_enqueue(cli *c, int argc, char **argv);
int cmd_merge(cli *c, int argc, char **argv);
int cmd_export(cli *c, int argc, char **argv);
int cmd_index(cli *c, int argc, char **argv);
int cmd_matches(cli *c, int argc, char **argv);
int cmd_embed(cli *c, int argc, char **argv);
int cmd_serve(cli *c, int argc, char **argv);

/* ---- cmd_embed.c -------------------------------------------------------------------------- */

/* A --text that can be no query: not UTF-8, or nothing but white space. Says why on stderr
 * (naming the command and the text's position) and returns 1; else 0. */
int cli_bad_text(const char *cmd, const char *text, int index);

/* ---- cmd_matches.c ------------------------------------------------------------------------ */

/* vf_db_matches for the command line (matches, and similar --video without --at): the matches
 * as a table or one JSON document, -v's search line; the exit status. */
int cli_matches(cli *c, const char *db, const char *video);

/* ---- options.c ---------------------------------------------------------------------------- */

/* Parse the options of cmd (argv[0] is the command's name or the program's); the arguments
 * left start at argv[*first]. --help prints cmd's help and exits 0, --version the build's.
 * Returns 0, or EXIT_USAGE after printing one line why (an option of another command names
 * the commands it is for). */
int cli_parse(const cli_command *cmd, int argc, char **argv, cli *c, int *first);

/* The library's log lines on stderr ("vidfeat: warning[tag]: message"), and the level -q / -v
 * ask for. */
void cli_log(void *user, int level, const char *tag, const char *msg);
int cli_log_level(const cli *c);
/* cmd's synopsis and options, its own first; cmd NULL: the commands, and unless brief,
 * extract's options. */
void cli_usage(const cli_command *cmd, int brief, FILE *f);

/* ---- inputs.c ----------------------------------------------------------------------------- */

typedef struct path_list {
    char **items;
    int n, cap;
} path_list;

/* The inputs named on the command line, then those of --files-from, into *inputs, directories
 * walked (sorted, recursive) for media files; with --shard, only the shard's. EXIT_OK, or
 * EXIT_FAIL when some could not be listed (the others are there). */
int cli_collect_inputs(const cli *c, int argc, char **argv, path_list *inputs);
void cli_free_paths(path_list *l);
/* Does the database named on the command line exist (a file path; a URI is left to the
 * store)? Says so on stderr when not. */
int cli_db_exists(const char *target);
/* One warning line when the database's name holds a password: other users of the machine see
 * command lines (ps, /proc). */
void cli_warn_password(const char *target);

/* ---- run.c -------------------------------------------------------------------------------- */

/* The pipeline with c->cfg over inputs: a line per failed file (per file on a terminal), the
 * summary (--json: one document on stdout), Ctrl-C and SIGTERM turned into a clean stop.
 * status: cli_collect_inputs' result, kept when the run does not fail. */
int cli_run_pipeline(cli *c, const path_list *inputs, int status);

/* Ctrl-C and SIGTERM from now on set a flag instead of ending the process, for a command to
 * stop cleanly (the pipeline's run, export); cli_interrupted() reads it. */
void cli_catch_interrupts(void);
int cli_interrupted(void);

/* Lists of --batch / --precision are bench's alone: EXIT_USAGE (said) when given elsewhere. */
int cli_single_values(const cli *c);

#endif /* VIDFEAT_CLI_H */
