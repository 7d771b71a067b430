/*
 * cmd_extract.c - vidfeat [extract]: every frame (or the sampled ones) of the inputs through the
 * network into the database; with a database and no inputs, of the files queued in it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The sound's run beside the pictures': its own cli (the pictures' options less their frame
 * sampling), its lines and documents into buffers. */
typedef struct sound_run {
    cli c;
    const path_list *inputs;
    char *out, *err; /* the buffers */
    size_t out_len, err_len;
    int status;
} sound_run;

static void *run_sound(void *arg)
{
    sound_run *s = arg;
    s->status = cli_run_pipeline(&s->c, s->inputs, EXIT_OK);
    return NULL;
}

/* The run's models: --model's (or the default), or --audio's alone, or both: the pictures' and
 * the sound's extractions of the same inputs at the same time, each its own (the sound decoded
 * once, on its own pass; the frame sampling options are the pictures'). The sound's network runs
 * on one thread: beside the pictures' it fills the time their run leaves the CPUs idle (decoding,
 * waiting for the store) instead of adding its own. What the sound's run says is shown after the
 * pictures' run ends, as if it had run then. */
static int run_models(cli *c, const path_list *inputs, int status)
{
    if (!c->audio || !c->model_set) {
        if (c->audio) {
            c->cfg.model = c->audio;
            c->audio_run = 1;
        }
        return cli_run_pipeline(c, inputs, status);
    }
    sound_run s = {.c = *c, .inputs = inputs, .status = EXIT_OK};
    s.c.cfg.model = c->audio;
    s.c.cfg.layer = NULL;
    s.c.cfg.sample_fps = s.c.cfg.start = s.c.cfg.duration = 0.0;
    s.c.cfg.every = s.c.cfg.keyframes = s.c.cfg.window = s.c.cfg.window_stride = 0;
    s.c.cfg.hwdec = NULL;
    s.c.cfg.n_threads = 1;
    s.c.audio_run = 1;
    if (s.c.progress == PROGRESS_BAR || (s.c.progress == PROGRESS_AUTO && isatty(STDERR_FILENO)))
        s.c.progress = PROGRESS_LINES; /* one bar on the terminal: the pictures' */
    s.c.out = open_memstream(&s.out, &s.out_len);
    s.c.err = open_memstream(&s.err, &s.err_len);
    pthread_t t;
    int running = s.c.out && s.c.err && pthread_create(&t, NULL, run_sound, &s) == 0;
    status = cli_run_pipeline(c, inputs, status);
    if (running)
        pthread_join(t, NULL);
    if (s.c.out)
        fclose(s.c.out);
    if (s.c.err)
        fclose(s.c.err);
    if (running) { /* what the sound's run said, after the pictures' */
        fwrite(s.out, 1, s.out_len, stdout);
        fflush(stdout);
        fwrite(s.err, 1, s.err_len, stderr);
    }
    free(s.out);
    free(s.err);
    if (!running && status != EXIT_INTERRUPTED) { /* no buffers or thread: after the pictures' */
        s.c.out = stdout;
        s.c.err = stderr;
        s.status = cli_run_pipeline(&s.c, inputs, EXIT_OK);
    }
    return s.status > status ? s.status : status;
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
