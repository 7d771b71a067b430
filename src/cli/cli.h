/*
 * cli.h - what the vidfeat command's files share: the parsed command line and a few output
 * helpers (main.c), the bench command (bench.c) and the chart it draws (plot.c).
 */
#ifndef VIDFEAT_CLI_H
#define VIDFEAT_CLI_H

#include <stddef.h>

#include "vidfeat.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

#define MAX_LIST 16

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
    const char *image, *video; /* similar's query */
    double at;
    int at_set, top;
} cli;

/* Monotonic seconds. */
double cli_now_s(void);
/* s as a JSON string literal on stdout. */
void cli_json_string(const char *s);
/* s escaped for a JSON string into buf (truncated to size); returns buf. */
const char *cli_jesc(const char *s, char *buf, size_t size);

/* vidfeat bench (bench.c). */
int cli_bench(cli *c, int argc, char **argv);

#endif /* VIDFEAT_CLI_H */
