/*
 * cmd_extract.c - vidfeat [extract]: every frame (or the sampled ones) of the inputs through the
 * network into the database; with a database and no inputs, of the files queued in it.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* Every input is missing. */
static int none_exist(const path_list *inputs)
{
    struct stat st;
    for (int i = 0; i < inputs->n; i++)
        if (stat(inputs->items[i], &st) == 0 || errno != ENOENT)
            return 0;
    return 1;
}

/* The run's models: --model's (or the default), or --audio's alone, or both: the pictures'
 * extraction, then the sound's of the same inputs (its own pass: the sound decoded once, its
 * own extraction in the same database; the frame sampling options are the pictures'). */
static int run_models(cli *c, const path_list *inputs, int status)
{
    if (!c->audio || !c->model_set) {
        if (c->audio) {
            c->cfg.model = c->audio;
            c->audio_run = 1;
        }
        return cli_run_pipeline(c, inputs, status);
    }
    status = cli_run_pipeline(c, inputs, status);
    if (status == EXIT_INTERRUPTED || status == EXIT_USAGE || status == EXIT_START)
        return status;
    vf_config pictures = c->cfg;
    c->cfg.model = c->audio;
    c->cfg.layer = NULL;
    c->cfg.sample_fps = c->cfg.start = c->cfg.duration = 0.0;
    c->cfg.every = c->cfg.keyframes = c->cfg.window = c->cfg.window_stride = 0;
    c->cfg.hwdec = NULL;
    c->audio_run = 1;
    int sound = cli_run_pipeline(c, inputs, EXIT_OK);
    c->cfg = pictures;
    c->audio_run = 0;
    return sound > status ? sound : status;
}

int cmd_extract(cli *c, int argc, char **argv)
{
    if (cli_single_values(c))
        return EXIT_USAGE;
    if (c->cfg.calibration_frames && c->cfg.precision != VF_PRECISION_INT8) {
        fprintf(stderr, "vidfeat: --frames is for calibrate and --precision int8\n");
        return EXIT_USAGE;
    }
    /* no inputs with a database named: a worker over what is queued there (vidfeat enqueue) */
    int queue = argc < 1 && !c->files_from;
    if (queue && !c->db_set) {
        fprintf(stderr, "vidfeat: no input files (try --help)\n");
        return EXIT_USAGE;
    }
    if (queue && c->audio && c->model_set) {
        fprintf(stderr, "vidfeat: a queue worker runs one model: --model or --audio\n");
        return EXIT_USAGE;
    }
    if (queue && c->shard_n) {
        fprintf(stderr, "vidfeat: --shard splits inputs; a queue worker has none\n");
        return EXIT_USAGE;
    }
    if (!c->db_set)
        c->cfg.db_path = "vidfeat.db";
    path_list inputs = {0};
    int status = queue ? EXIT_OK : cli_collect_inputs(c, argc, argv, &inputs);
    c->queue = queue;
    /* nothing named exists (a typo, an unmounted archive) or nothing was found (said): told
     * without loading the model or creating the database; --json and JSON progress still get
     * their documents */
    if (!queue && !c->json && c->progress != PROGRESS_JSON &&
        (inputs.n ? none_exist(&inputs) : status != EXIT_OK)) {
        for (int i = 0; i < inputs.n; i++)
            cli_printf(stderr, "vidfeat: %s: No such file or directory\n", inputs.items[i]);
        cli_free_paths(&inputs);
        return EXIT_FAIL;
    }
    status = run_models(c, &inputs, status);
    cli_free_paths(&inputs);
    return status;
}
