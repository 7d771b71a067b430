/*
 * options.c - the command line's options: one table says each option's argument, help text, the
 * commands that take it and what its value does (a field of the cli set and checked, or a
 * function of its own); it drives getopt_long, one loop that applies every option, every
 * command's --help, and the one-line error for an option given to a command it is not for. A
 * new option is an enum value and a row; the man page must name it (docs_commands checks).
 */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

enum opt_id {
    OPT_MODEL = 'm',
    OPT_HELP = 'h',
    OPT_QUIET = 'q',
    OPT_VERBOSE = 'v',
    OPT_MODELS_DIR = 256,
    OPT_AUDIO,
    OPT_LAYER,
    OPT_DEVICE,
    OPT_BACKEND,
    OPT_GPU,
    OPT_BATCH,
    OPT_PRECISION,
    OPT_THREADS,
    OPT_INPUT_SIZE,
    OPT_MEAN,
    OPT_STD,
    OPT_INFER_ONLY,
    OPT_RUNS,
    OPT_IMAGES,
    OPT_JSON,
    OPT_PLOT,
    OPT_VERSION,
    OPT_DB = 'o',
    OPT_FPS = 300,
    OPT_EVERY,
    OPT_KEYFRAMES,
    OPT_START,
    OPT_DURATION,
    OPT_MAX_FRAMES,
    OPT_WINDOW,
    OPT_WINDOW_STRIDE,
    OPT_SHOTS,
    OPT_SHOT_THRESHOLD,
    OPT_SHOT_MIN_FRAMES,
    OPT_MAX_PIXELS,
    OPT_MAX_STREAMS,
    OPT_MAX_DURATION,
    OPT_FORCE,
    OPT_DTYPE,
    OPT_QUEUE_DEPTH,
    OPT_DECODE_THREADS,
    OPT_HWDEC,
    OPT_CONVERT_THREADS,
    OPT_DECODERS,
    OPT_STALL_TIMEOUT,
    OPT_INT8_SCALES,
    OPT_FRAMES,
    OPT_IMAGE,
    OPT_VIDEO,
    OPT_AT,
    OPT_AUDIO_AT,
    OPT_TOP = 'k',
    OPT_NUL = '0',
    OPT_ROOT = 400,
    OPT_LINKS_OUTSIDE,
    OPT_LEASE,
    OPT_MAX_ATTEMPTS,
    OPT_FILES_FROM,
    OPT_SHARD,
    OPT_PROGRESS,
    OPT_FORMAT,
    OPT_OUTPUT,
    OPT_KIND,
    OPT_INDEX,
    OPT_REBUILD,
    OPT_EXACT,
    OPT_PROBE,
    OPT_SUMMARY,
    OPT_MIN_DURATION,
    OPT_MIN_SIMILARITY,
    OPT_TEXT,
    OPT_BIND,
    OPT_PORT,
    OPT_TOKEN_FILE,
    OPT_NO_AUTH,
    OPT_ALLOW_HOST,
};

/* Which commands take an option. */
#define RUNS (CMD_EXTRACT | CMD_CALIBRATE | CMD_BENCH) /* those that run the pipeline */
#define NETS                                                                                       \
    (RUNS | CMD_SIMILAR | CMD_MATCHES | CMD_EMBED | CMD_SERVE) /* those that open a network */
#define ALL   (NETS | CMD_INFO | CMD_MODELS | CMD_ENQUEUE | CMD_MERGE | CMD_EXPORT | CMD_INDEX)
#define CLIPS (RUNS | CMD_SIMILAR | CMD_MATCHES) /* those that sample a file's frames */

/* An option's help where it means something else to some commands. */
typedef struct cmd_help {
    unsigned cmds; /* CMD_* bits; 0 ends a list */
    const char *help;
} cmd_help;

/* What an option's value does to the cli: sets a field (off, a byte offset in cli) as the kind
 * says, checked against lo..hi, and marks another (sets: offset + 1; 0 none); or a function of
 * its own does what a field cannot (a list, a choice between words, two fields at once). */
typedef enum {
    ARG_FLAG,   /* int = 1 */
    ARG_COUNT,  /* int++ */
    ARG_STR,    /* const char * = the argument (borrowed from argv) */
    ARG_INT,    /* int in lo..hi */
    ARG_NUM,    /* double >= 0 (> 0 when lo is 1), at most hi */
    ARG_TIME,   /* double: a time in FFmpeg's forms, >= 0 */
    ARG_CUSTOM, /* custom() */
} arg_kind;

typedef struct opt_def opt_def;
/* 0, or EXIT_USAGE having said why. */
typedef int (*opt_fn)(cli *c, const cli_command *cmd, const opt_def *o, const char *a);

struct opt_def {
    const char *name;
    int id;
    const char *arg; /* NULL: a flag */
    unsigned cmds;   /* CMD_* bits */
    const char *help;
    const cmd_help *per_cmd; /* NULL, or what it says for those commands instead of help */
    arg_kind kind;
    size_t off;
    double lo, hi;
    size_t sets;
    opt_fn custom;
};

#define PER_CMD(...)    ((const cmd_help[]){__VA_ARGS__, {0, NULL}})
#define OFF(f)          offsetof(cli, f)
#define STR(f)          ARG_STR, OFF(f), 0, 0, 0, NULL
#define STR_SETS(f, s)  ARG_STR, OFF(f), 0, 0, OFF(s) + 1, NULL
#define FLAG(f)         ARG_FLAG, OFF(f), 0, 0, 0, NULL
#define COUNT(f)        ARG_COUNT, OFF(f), 0, 0, 0, NULL
#define INT(f, lo, hi)  ARG_INT, OFF(f), lo, hi, 0, NULL
#define NUM(f, lo, hi)  ARG_NUM, OFF(f), lo, hi, 0, NULL
#define TIME(f)         ARG_TIME, OFF(f), 0, 0, 0, NULL
#define TIME_SETS(f, s) ARG_TIME, OFF(f), 0, 0, OFF(s) + 1, NULL
#define CUSTOM(fn)      ARG_CUSTOM, 0, 0, 0, 0, fn

static int opt_shard(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_lease(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_max_frames(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_dtype(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_max_pixels(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_max_duration(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_device(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_gpu(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_audio(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_audio_at(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_list(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_frames(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_triple(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_query(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_probe(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_progress(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_quiet(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_version(cli *c, const cli_command *cmd, const opt_def *o, const char *a);
static int opt_help(cli *c, const cli_command *cmd, const opt_def *o, const char *a);

static const opt_def options[] = {
    {"db", OPT_DB, "FILE|URI", CMD_EXTRACT | CMD_CALIBRATE | CMD_BENCH | CMD_ENQUEUE,
     "the database: a file (SQLite) or postgresql://... (default ./vidfeat.db)",
     PER_CMD({CMD_CALIBRATE | CMD_BENCH | CMD_ENQUEUE,
              "the database: a file (SQLite) or postgresql://..."}),
     STR_SETS(cfg.db_path, db_set)},
    {"output", OPT_OUTPUT, "PATH", CMD_EXPORT | CMD_EMBED,
     "npy: a directory (default DB_npy/); hdf5: a file (DB.h5); csv: a file or - (stdout)",
     PER_CMD({CMD_EMBED, "an .npy file of the embeddings (default: printed)"}), STR(output)},
    {"format", OPT_FORMAT, "npy|hdf5|csv", CMD_EXPORT,
     "what to write (default: from -o's extension, .h5/.hdf5 or .csv, else npy)", NULL,
     STR(format)},
    {"root", OPT_ROOT, "DIR", CMD_EXTRACT | CMD_ENQUEUE | CMD_SERVE,
     "record files by their path under DIR (machines mounting an archive elsewhere agree)",
     PER_CMD({CMD_SERVE, "serve only files under DIR (default: the current directory); "
                         "recorded relative paths are under it"}),
     STR(cfg.root)},
    {"bind", OPT_BIND, "ADDR", CMD_SERVE,
     "listen on ADDR (default 127.0.0.1: this machine only; others need the token)", NULL,
     STR(bind)},
    {"port", OPT_PORT, "N", CMD_SERVE, "listen on port N (default 8765; 0: any free port)", NULL,
     INT(port, 0, 65535)},
    {"token-file", OPT_TOKEN_FILE, "FILE", CMD_SERVE,
     "the token clients must give, read from FILE (default: made at random, printed once)", NULL,
     STR(token_file)},
    {"allow-host", OPT_ALLOW_HOST, "NAME[,NAME...]", CMD_SERVE,
     "also answer requests addressed to these names of this machine (default: its address and "
     "localhost only)",
     NULL, STR(allow_hosts)},
    {"no-auth", OPT_NO_AUTH, NULL, CMD_SERVE,
     "ask no token even off loopback (anyone reaching the port can search and watch)", NULL,
     FLAG(no_auth)},
    {"follow-links-outside", OPT_LINKS_OUTSIDE, NULL, CMD_EXTRACT | CMD_ENQUEUE,
     "with --root: read files through symbolic links that lead out of DIR (refused by default)",
     NULL, FLAG(cfg.follow_links_outside)},
    {"files-from", OPT_FILES_FROM, "FILE|-", CMD_EXTRACT | CMD_ENQUEUE | CMD_CALIBRATE,
     "also the paths in FILE (- for stdin), one a line", NULL, STR(files_from)},
    {"null", OPT_NUL, NULL, CMD_EXTRACT | CMD_ENQUEUE | CMD_CALIBRATE,
     "--files-from's paths end with NUL (find -print0), not a newline", NULL, FLAG(nul_separated)},
    {"shard", OPT_SHARD, "K/N", CMD_EXTRACT | CMD_ENQUEUE,
     "only the inputs of shard K of N (0 <= K < N), split by path", NULL, CUSTOM(opt_shard)},
    {"lease", OPT_LEASE, "S", CMD_EXTRACT,
     "hold a claimed file S seconds, renewed while working (default 60)", NULL, CUSTOM(opt_lease)},
    {"max-attempts", OPT_MAX_ATTEMPTS, "N", CMD_EXTRACT,
     "fail a file whose worker died N times in a row (default 3)", NULL,
     INT(cfg.max_attempts, 1, 1000)},
    {"fps", OPT_FPS, "R", CLIPS, "sample at most R frames per second, by presentation time", NULL,
     NUM(cfg.sample_fps, 1, 1e9)},
    {"every", OPT_EVERY, "N", CLIPS, "keep every Nth decoded frame", NULL,
     INT(cfg.every, 1, 1000000)},
    {"keyframes", OPT_KEYFRAMES, NULL, RUNS, "only key frames (the others are not decoded)", NULL,
     FLAG(cfg.keyframes)},
    {"start", OPT_START, "T", RUNS, "start T into each file (seconds, 1:30 or 01:02:03.5)", NULL,
     TIME(cfg.start)},
    {"duration", OPT_DURATION, "D", RUNS, "cover D after the start (as --start)", NULL,
     TIME(cfg.duration)},
    {"max-frames", OPT_MAX_FRAMES, "N", RUNS, "at most N frames per file", NULL,
     CUSTOM(opt_max_frames)},
    {"window", OPT_WINDOW, "N", RUNS,
     "a clip model's sampled frames per vector (the model's; given, it must agree)", NULL,
     INT(cfg.window, 1, 4096)},
    {"window-stride", OPT_WINDOW_STRIDE, "S", RUNS,
     "sampled frames from one window's start to the next (default: the window, no overlap)", NULL,
     INT(cfg.window_stride, 1, 1000000)},
    {"shots", OPT_SHOTS, NULL, CMD_EXTRACT,
     "find each file's shots (cuts by content, every frame decoded) and store them", NULL,
     FLAG(cfg.shots)},
    {"shot-threshold", OPT_SHOT_THRESHOLD, "T", CMD_EXTRACT,
     "--shots: a frame whose content score reaches T starts a shot (default 27)", NULL,
     NUM(cfg.shot_threshold, 1, 255)},
    {"shot-min-frames", OPT_SHOT_MIN_FRAMES, "N", CMD_EXTRACT,
     "--shots: the shortest shot, in frames; closer cuts merge (default 15)", NULL,
     INT(cfg.shot_min_frames, 1, 1000000)},
    {"force", OPT_FORCE, NULL, CMD_EXTRACT, "redo files the database already has", NULL,
     FLAG(cfg.force)},
    {"dtype", OPT_DTYPE, "f32|f16", CMD_EXTRACT | CMD_BENCH, "how vectors are stored (default f32)",
     NULL, CUSTOM(opt_dtype)},
    {"queue-depth", OPT_QUEUE_DEPTH, "N", RUNS, "batches in flight between stages (default 2)",
     NULL, INT(cfg.queue_depth, 1, 64)},
    {"decode-threads", OPT_DECODE_THREADS, "N", NETS, "codec threads per file (default automatic)",
     NULL, INT(cfg.decode_threads, 0, 64)},
    {"hwdec", OPT_HWDEC, "none|cuda", NETS, "decode on this device where it can (cuda: NVDEC)",
     NULL, STR(cfg.hwdec)},
    {"convert-threads", OPT_CONVERT_THREADS, "N", RUNS,
     "frames converted at once (default 1 with a CPU network, cores/2 up to 8 with a GPU)", NULL,
     INT(cfg.convert_threads, 1, 64)},
    {"decoders", OPT_DECODERS, "N", RUNS,
     "files decoded at once (default 1 with a CPU network, 4 with a GPU)", NULL,
     INT(cfg.decoders, 1, 16)},
    {"stall-timeout", OPT_STALL_TIMEOUT, "S", NETS,
     "give up a file with no frame for S s (60; 0 = never)", NULL, NUM(cfg.stall_timeout, 0, 1e6)},
    {"max-pixels", OPT_MAX_PIXELS, "N", NETS,
     "fail a video whose frames have more than N pixels (default 40000000; 8K is 35 million)", NULL,
     CUSTOM(opt_max_pixels)},
    {"max-streams", OPT_MAX_STREAMS, "N", NETS,
     "fail a file with more than N streams, before probing them (default 64)", NULL,
     INT(cfg.max_streams, 1, 1000000)},
    {"max-duration", OPT_MAX_DURATION, "D", NETS,
     "fail a file whose picture or sound runs past D (as --start; default an hour plus an hour "
     "per MB of the file; 0: no bound)",
     NULL, CUSTOM(opt_max_duration)},
    {"model", OPT_MODEL, "NAME|FILE", NETS | CMD_EXPORT | CMD_INDEX,
     "model name (see `vidfeat models`) or ONNX file", NULL, STR_SETS(cfg.model, model_set)},
    {"audio", OPT_AUDIO, "NAME|FILE", CMD_EXTRACT,
     "an audio model: a vector per patch of each file's sound (vggish, panns_cnn14); beside "
     "--model, side by side with it",
     NULL, CUSTOM(opt_audio)},
    {"models-dir", OPT_MODELS_DIR, "DIR", NETS | CMD_MODELS,
     "look for manifests and ONNX files here first", NULL, STR(cfg.models_dir)},
    {"layer", OPT_LAYER, "NAME", NETS | CMD_EXPORT | CMD_INDEX,
     "feature layer (manifest name or any tensor name)", NULL, STR(cfg.layer)},
    {"device", OPT_DEVICE, "cpu|gpu|auto", NETS,
     "where to run the network (default auto; bench also all)", NULL, CUSTOM(opt_device)},
    {"backend", OPT_BACKEND, "NAME", NETS, "backend by name: auto, dnnl (= cpu), ref, cuda", NULL,
     STR(cfg.backend)},
    {"gpu", OPT_GPU, NULL, NETS, "same as --device gpu", NULL, CUSTOM(opt_gpu)},
    {"batch", OPT_BATCH, "N", RUNS, "images per forward pass (default 32)", NULL, CUSTOM(opt_list)},
    {"precision", OPT_PRECISION, "f32|bf16|int8|f16|tf32|auto", NETS,
     "arithmetic precision (default f32; f16, tf32 on the GPU; auto: bf16 where faster, as good)",
     NULL, CUSTOM(opt_list)},
    {"threads", OPT_THREADS, "N", NETS, "compute threads (default: all cores)", NULL,
     INT(cfg.n_threads, 0, 1024)},
    {"int8-scales", OPT_INT8_SCALES, "FILE", NETS,
     "int8 calibration file (default MODEL.onnx.int8 beside the model, else ~/.cache/vidfeat)",
     NULL, STR(cfg.int8_scales)},
    {"frames", OPT_FRAMES, "N", CMD_EXTRACT | CMD_CALIBRATE,
     "int8: frames to calibrate on when no scales are found (default 32, or a batch)",
     PER_CMD({CMD_CALIBRATE, "frames to calibrate on, from all the inputs (default 256)"}),
     CUSTOM(opt_frames)},
    {"input-size", OPT_INPUT_SIZE, "S", NETS, "network input is S x S (plain ONNX files)", NULL,
     INT(cfg.input_size, 1, 8192)},
    {"mean", OPT_MEAN, "R,G,B", NETS, "per-channel mean in pixel units 0..255 (plain ONNX files)",
     NULL, CUSTOM(opt_triple)},
    {"std", OPT_STD, "R,G,B", NETS, "per-channel std in pixel units (plain ONNX files)", NULL,
     CUSTOM(opt_triple)},
    {"infer-only", OPT_INFER_ONLY, NULL, CMD_BENCH, "time the network alone on synthetic images",
     NULL, FLAG(infer_only)},
    {"runs", OPT_RUNS, "N", CMD_BENCH, "timed runs (default 5; the median is reported)", NULL,
     INT(runs, 1, 1000)},
    {"images", OPT_IMAGES, "N", CMD_BENCH, "images per timed run (default max(32, batch))", NULL,
     INT(images, 1, 1000000)},
    {"plot", OPT_PLOT, "FILE.svg", CMD_BENCH, "draw frames/s by device, batch and precision", NULL,
     STR(plot)},
    {"image", OPT_IMAGE, "FILE", CMD_SIMILAR | CMD_EMBED, "frames like this image",
     PER_CMD({CMD_EMBED, "this image's embedding (repeatable)"}), CUSTOM(opt_query)},
    {"text", OPT_TEXT, "TEXT", CMD_SIMILAR | CMD_EMBED,
     "frames that show these words (a CLIP model; repeatable, each a query of its own)",
     PER_CMD({CMD_EMBED, "this text's embedding (repeatable)"}), CUSTOM(opt_query)},
    {"video", OPT_VIDEO, "FILE", CMD_SIMILAR | CMD_MATCHES,
     "frames like this video's frame at --at, or (no --at) where its footage is",
     PER_CMD({CMD_MATCHES, "only this file's footage"}), STR(video)},
    {"at", OPT_AT, "T", CMD_SIMILAR, "time into --video (as --start)", NULL, TIME_SETS(at, at_set)},
    {"audio-at", OPT_AUDIO_AT, "T", CMD_SIMILAR,
     "sound like --video's at T: the database's vectors of sound searched (an audio model's)", NULL,
     CUSTOM(opt_audio_at)},
    {"top", OPT_TOP, "N", CMD_SIMILAR | CMD_MATCHES,
     "how many to list (default 10 frames; a whole clip's matches: all)",
     PER_CMD({CMD_MATCHES, "how many matches to list (default all)"}), INT(top, 1, 100000)},
    {"min-duration", OPT_MIN_DURATION, "S", CMD_SIMILAR | CMD_MATCHES,
     "a whole clip: footage shared for at least S seconds (default 2)",
     PER_CMD({CMD_MATCHES, "footage shared for at least S seconds (default 2)"}),
     TIME(min_duration)},
    {"min-similarity", OPT_MIN_SIMILARITY, "C", CMD_SIMILAR | CMD_MATCHES,
     "a whole clip: a frame's cosine with its counterpart at least C (default 0.8)",
     PER_CMD({CMD_MATCHES, "a frame's cosine with its counterpart at least C (default 0.8)"}),
     NUM(min_similarity, 0, 0.999)},
    {"exact", OPT_EXACT, NULL, CMD_SIMILAR | CMD_MATCHES,
     "read every stored vector, even where an index is", NULL, FLAG(exact)},
    {"probe", OPT_PROBE, "N", CMD_SIMILAR | CMD_MATCHES,
     "how much of the index to look at: IVF lists (their share of the codes) or HNSW candidates "
     "(default: the index's)",
     NULL, CUSTOM(opt_probe)},
    {"index", OPT_INDEX, "PATH", CMD_SIMILAR | CMD_MATCHES | CMD_INDEX,
     "the index file to search (default: the one the database records)",
     PER_CMD({CMD_INDEX, "the index file (default: beside an SQLite database)"}), STR(index)},
    {"kind", OPT_KIND, "auto|flat|hnsw|ivf|ivfsq8|ivfpq|FAISS", CMD_INDEX,
     "what kind of index (default auto: by the vectors' number and this machine's memory)", NULL,
     STR(kind)},
    {"rebuild", OPT_REBUILD, NULL, CMD_INDEX, "start over instead of adding what is new", NULL,
     FLAG(rebuild)},
    {"summary", OPT_SUMMARY, NULL, CMD_INFO, "counts and indexes only, not every file", NULL,
     FLAG(summary)},
    {"json", OPT_JSON, NULL,
     RUNS | CMD_SIMILAR | CMD_MATCHES | CMD_MODELS | CMD_INFO | CMD_INDEX | CMD_EMBED,
     "machine-readable output", NULL, FLAG(json)},
    {"progress", OPT_PROGRESS, "auto|bar|lines|json|none", CMD_EXTRACT | CMD_CALIBRATE,
     "as files finish: a bar (terminal), a line each, a JSON line each on stdout, or nothing", NULL,
     CUSTOM(opt_progress)},
    {"quiet", OPT_QUIET, NULL, ALL, "only errors on stderr", NULL, CUSTOM(opt_quiet)},
    {"verbose", OPT_VERBOSE, NULL, ALL, "more detail on stderr (repeat for debug)", NULL,
     COUNT(verbosity)},
    {"version", OPT_VERSION, NULL, ALL, "print version, backends and library versions", NULL,
     CUSTOM(opt_version)},
    {"help", OPT_HELP, NULL, ALL, "this help", NULL, CUSTOM(opt_help)},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* A short letter that stands for another option in some commands: -o is export's --output
 * (where it writes), everyone else's --db. */
static const struct {
    int letter, id;
    unsigned cmds;
} aliases[] = {{'o', OPT_OUTPUT, CMD_EXPORT | CMD_EMBED}};
#define N_ALIASES (sizeof(aliases) / sizeof(aliases[0]))

/* "--name ARG" or "-x, --name ARG" */
static void option_left(const opt_def *o, char *buf, size_t size)
{
    int letter = o->id < 256 ? o->id : 0;
    for (size_t i = 0; i < N_ALIASES; i++)
        letter = aliases[i].id == o->id ? aliases[i].letter : letter;
    if (letter)
        snprintf(buf, size, "-%c, --%s%s%s", letter, o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
    else
        snprintf(buf, size, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* What option o says in cmd's help. */
static const char *option_help(const opt_def *o, const cli_command *cmd)
{
    for (const cmd_help *h = o->per_cmd; h && h->cmds; h++)
        if (h->cmds & cmd->bit)
            return h->help;
    return o->help;
}

/* cmd's options: its own, or those it shares with extract (the model, decoding, output);
 * returns how many. */
static int print_options(const cli_command *cmd, int shared, FILE *f)
{
    int n = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *o = &options[i];
        if (!(o->cmds & cmd->bit) || !!(o->cmds & CMD_EXTRACT) != shared)
            continue;
        char left[48];
        option_left(o, left, sizeof(left));
        if (f)
            fprintf(f, "  %-34s %s\n", left, option_help(o, cmd));
        n++;
    }
    return n;
}

void cli_usage(const cli_command *cmd, int brief, FILE *f)
{
    const cli_command *extract = &cli_commands[0], *listed = NULL; /* after the commands */
    if (cmd) {
        fprintf(f, "usage: vidfeat %s\n\n%s\n", cmd->synopsis, cmd->summary);
    } else {
        fprintf(f, "usage: vidfeat [extract] [options] FILE|DIR...\n"
                   "       vidfeat COMMAND [options] ...\n\ncommands:\n");
        for (size_t i = 0; i < cli_n_commands; i++)
            fprintf(f, "  %-10s %s\n", cli_commands[i].name, cli_commands[i].summary);
        if (brief) {
            fprintf(f, "\n`vidfeat --help`: extract's options; `vidfeat COMMAND --help`: a "
                       "command's\n");
            return;
        }
        fprintf(f, "\n`vidfeat COMMAND --help` shows a command's options; extract's (the default "
                   "command's) are:\n");
        cmd = listed = extract;
    }
    if (cmd->bit == CMD_EXTRACT) {
        if (cmd != listed)
            fprintf(f, "\noptions:\n");
        print_options(cmd, 1, f);
    } else {
        if (print_options(cmd, 0, NULL) > 0) {
            fprintf(f, "\noptions:\n");
            print_options(cmd, 0, f);
        }
        fprintf(f, "\noptions shared with extract:\n");
        print_options(cmd, 1, f);
    }
    fprintf(f, "\nexit status: 0 all done, 1 some inputs failed, 2 usage error, 3 could not start "
               "(model, database, device), 130 interrupted\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* An integer option in lo..hi; prints the usage message and returns -1 otherwise. */
static int int_option(const char *name, const char *a, int lo, int hi, int *out)
{
    if (parse_int(a, lo, hi, out) == 0)
        return 0;
    fprintf(stderr, "vidfeat: --%s: expected %d..%d, not '%s'\n", name, lo, hi, a);
    return -1;
}

/* A number of seconds or a rate: >= 0 (> 0 with positive), at most max. */
static int number_option(const char *name, const char *a, int positive, double max, double *out)
{
    char *end;
    double v = strtod(a, &end);
    if (*a && !*end && v >= 0 && v <= max && (!positive || v > 0)) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "vidfeat: --%s: expected a %snumber, not '%s'\n", name,
            positive ? "positive " : "", a);
    return -1;
}

/* A time in FFmpeg's forms (90, 1:30, 01:02:03.5), >= 0; prints why and returns -1 otherwise. */
static int time_option(const char *name, const char *a, double *out)
{
    double v;
    if (vf_parse_time(a, &v) < 0) {
        fprintf(stderr, "vidfeat: --%s: expected a time (90, 1:30, 01:02:03.5), not '%s'\n", name,
                a);
        return -1;
    }
    if (v < 0) {
        fprintf(stderr, "vidfeat: --%s: must be >= 0, not '%s'\n", name, a);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_triple(const char *s, float *out)
{
    char *end;
    for (int i = 0; i < 3; i++) {
        out[i] = strtof(s, &end);
        if (end == s || (i < 2 && *end != ',') || (i == 2 && *end))
            return -1;
        s = end + 1;
    }
    return 0;
}

/* The commands an option is for, as words: "bench", "extract and calibrate". */
static void command_names(unsigned cmds, char *buf, size_t size)
{
    size_t n = 0, left = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < cli_n_commands; i++)
        left += (cmds & cli_commands[i].bit) != 0;
    for (size_t i = 0; i < cli_n_commands && n < size; i++) {
        if (!(cmds & cli_commands[i].bit))
            continue;
        left--;
        n += (size_t)snprintf(buf + n, size - n, "%s%s", cli_commands[i].name,
                              left > 1    ? ", "
                              : left == 1 ? " and "
                                          : "");
    }
}

/* Levenshtein distance of two short words (0 when equal; capped by the buffer: words of up
 * to 31 characters). */
size_t cli_edit_distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b), row[32];
    if (na > 31 || nb > 31)
        return 99;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The option of cmd nearest to the unknown one given as `arg` ("--modle" or "--modle=x"), at
 * most two edits away, or NULL. */
static const char *nearest_option(const cli_command *cmd, const char *arg)
{
    char word[32];
    if (strncmp(arg, "--", 2))
        return NULL;
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        size_t d = (options[i].cmds & cmd->bit) ? cli_edit_distance(word, options[i].name) : 99;
        if (d < best_d) {
            best_d = d;
            best = options[i].name;
        }
    }
    return best;
}

/* ---- what each option does -------------------------------------------------------------- */

/* Option o given with argument a (NULL for a flag): the field the table names set, or its own
 * function run. 0, or -1 having said why. */
static int apply(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    char *field = (char *)c + o->off;
    int rc = 0;
    switch (o->kind) {
    case ARG_FLAG:
        *(int *)field = 1;
        break;
    case ARG_COUNT:
        (*(int *)field)++;
        break;
    case ARG_STR:
        *(const char **)field = a;
        break;
    case ARG_INT:
        rc = int_option(o->name, a, (int)o->lo, (int)o->hi, (int *)field);
        break;
    case ARG_NUM:
        rc = number_option(o->name, a, o->lo > 0, o->hi, (double *)field);
        break;
    case ARG_TIME:
        rc = time_option(o->name, a, (double *)field);
        break;
    case ARG_CUSTOM:
        rc = o->custom(c, cmd, o, a) == 0 ? 0 : -1;
        break;
    }
    if (rc == 0 && o->sets)
        *(int *)((char *)c + o->sets - 1) = 1;
    return rc;
}

static int opt_shard(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    int k, n, used = 0;
    if (sscanf(a, "%d/%d%n", &k, &n, &used) != 2 || a[used] || n < 1 || k < 0 || k >= n) {
        fprintf(stderr, "vidfeat: --shard: expected K/N with 0 <= K < N, not '%s'\n", a);
        return EXIT_USAGE;
    }
    c->shard_k = k;
    c->shard_n = n;
    return 0;
}

static int opt_lease(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    if (number_option("lease", a, 1, 86400, &c->cfg.lease_s) < 0)
        return EXIT_USAGE;
    if (c->cfg.lease_s < 1) {
        fprintf(stderr, "vidfeat: --lease: at least 1 second, not '%s'\n", a);
        return EXIT_USAGE;
    }
    return 0;
}

static int opt_max_frames(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    int v;
    if (parse_int(a, 1, 2000000000, &v) < 0) {
        fprintf(stderr, "vidfeat: --max-frames: expected a positive count, not '%s'\n", a);
        return EXIT_USAGE;
    }
    c->cfg.max_frames = v;
    return 0;
}

static int opt_dtype(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    if (strcmp(a, "f32") && strcmp(a, "f16")) {
        fprintf(stderr, "vidfeat: --dtype: expected f32 or f16, not '%s'\n", a);
        return EXIT_USAGE;
    }
    c->cfg.store_f16 = !strcmp(a, "f16");
    return 0;
}

static int opt_max_pixels(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    double v;
    if (number_option("max-pixels", a, 1, 1e12, &v) < 0)
        return EXIT_USAGE;
    c->cfg.max_pixels = (int64_t)v;
    return 0;
}

static int opt_max_duration(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    double v;
    if (time_option("max-duration", a, &v) < 0)
        return EXIT_USAGE;
    c->cfg.max_duration = v > 0.0 ? v : -1.0; /* 0: no bound */
    return 0;
}

static int opt_device(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)o;
    if (strcmp(a, "cpu") && strcmp(a, "gpu") && strcmp(a, "auto") && strcmp(a, "all")) {
        fprintf(stderr, "vidfeat: --device: expected cpu, gpu or auto, not '%s'\n", a);
        return EXIT_USAGE;
    }
    c->all_devices = !strcmp(a, "all");
    if (c->all_devices && cmd->bit != CMD_BENCH) {
        fprintf(stderr, "vidfeat: --device all is for bench\n");
        return EXIT_USAGE;
    }
    c->cfg.backend = c->all_devices ? NULL : a;
    return 0;
}

/* --audio: an audio model, run alone or after --model's (cmd_extract.c). */
static int opt_audio(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    c->audio = a;
    return 0;
}

static int opt_audio_at(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd;
    if (time_option(o->name, a, &c->at) < 0)
        return EXIT_USAGE;
    c->at_set = c->at_sound = 1;
    return 0;
}

static int opt_gpu(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o, (void)a;
    c->cfg.backend = "gpu";
    return 0;
}

/* --batch and --precision: a comma-separated list (bench compares them; everything else takes
 * one, the first). */
static int opt_list(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd;
    int batch = o->id == OPT_BATCH;
    char item[64];
    const char *q = a;
    int *n = batch ? &c->n_batches : &c->n_precisions;
    *n = 0;
    while (*q) {
        size_t len = strcspn(q, ",");
        if (len == 0 || len >= sizeof(item) || *n == MAX_LIST) {
            fprintf(stderr, "vidfeat: --%s: bad list '%s'\n", o->name, a);
            return EXIT_USAGE;
        }
        memcpy(item, q, len);
        item[len] = '\0';
        if (batch && parse_int(item, 1, 4096, &c->batches[*n]) < 0) {
            fprintf(stderr, "vidfeat: --batch: expected 1..4096, not '%s'\n", item);
            return EXIT_USAGE;
        }
        if (!batch && vf_precision_parse(item, &c->precisions[*n]) < 0) {
            fprintf(stderr,
                    "vidfeat: --precision: expected f32, bf16, int8, f16, tf32 or auto, not '%s'\n",
                    item);
            return EXIT_USAGE;
        }
        (*n)++;
        q += len + (q[len] == ',');
    }
    if (*n == 0) {
        fprintf(stderr, "vidfeat: --%s: empty\n", o->name);
        return EXIT_USAGE;
    }
    if (batch)
        c->cfg.batch_size = c->batches[0];
    else
        c->cfg.precision = c->precisions[0];
    return 0;
}

static int opt_frames(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    int v;
    if (int_option("frames", a, 1, 1000000, &v) < 0)
        return EXIT_USAGE;
    c->cfg.calibration_frames = v;
    return 0;
}

/* --mean and --std: R,G,B */
static int opt_triple(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd;
    if (parse_triple(a, o->id == OPT_MEAN ? c->cfg.mean : c->cfg.std) < 0) {
        fprintf(stderr, "vidfeat: --%s: expected three numbers R,G,B, not '%s'\n", o->name, a);
        return EXIT_USAGE;
    }
    return 0;
}

/* --image and --text: queries, in the order given */
static int opt_query(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd;
    if (c->n_queries == MAX_QUERIES) {
        fprintf(stderr, "vidfeat: at most %d --text and --image queries\n", MAX_QUERIES);
        return EXIT_USAGE;
    }
    int text = o->id == OPT_TEXT;
    c->queries[c->n_queries++] = (cli_query){text, a};
    if (text)
        c->texts[c->n_texts++] = a;
    else
        c->image = a;
    return 0;
}

static int opt_probe(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    double v;
    if (number_option("probe", a, 1, 1 << 20, &v) < 0)
        return EXIT_USAGE;
    c->probe = (int)v;
    return 0;
}

static int opt_progress(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o;
    static const char *const modes[] = {"auto", "bar", "lines", "json", "none"};
    c->progress = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(a, modes[i]))
            c->progress = i;
    if (c->progress < 0) {
        fprintf(stderr, "vidfeat: --progress: expected auto, bar, lines, json or none, not '%s'\n",
                a);
        return EXIT_USAGE;
    }
    return 0;
}

static int opt_quiet(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)cmd, (void)o, (void)a;
    c->verbosity = -1;
    return 0;
}

static int opt_version(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)c, (void)cmd, (void)o, (void)a;
    char info[1024];
    printf("vidfeat %s\n%s", vf_version(), vf_build_info(info, sizeof(info)));
    exit(EXIT_OK);
}

static int opt_help(cli *c, const cli_command *cmd, const opt_def *o, const char *a)
{
    (void)o, (void)a;
    cli_usage(c->explicit_cmd ? cmd : NULL, 0, stdout);
    exit(EXIT_OK);
}

/* ---- parsing ------------------------------------------------------------------------------ */

int cli_parse(const cli_command *cmd, int argc, char **argv, cli *c, int *first)
{
    struct option longopts[N_OPTIONS + 1];
    char shortopts[64];
    size_t ns = 0;
    shortopts[ns++] = ':'; /* a missing argument is told apart from an unknown option */
    for (size_t i = 0; i < N_OPTIONS; i++) {
        longopts[i].name = options[i].name;
        longopts[i].has_arg = options[i].arg ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = options[i].id;
        if (options[i].id < 256) {
            shortopts[ns++] = (char)options[i].id;
            if (options[i].arg)
                shortopts[ns++] = ':';
        }
    }
    shortopts[ns] = '\0';
    memset(&longopts[N_OPTIONS], 0, sizeof(longopts[0]));

    int id, index;
    optind = 1;
    opterr = 0; /* one line of ours instead of getopt's */
    while ((index = -1, id = getopt_long(argc, argv, shortopts, longopts, &index)) != -1) {
        const char *a = optarg;
        for (size_t i = 0; i < N_ALIASES && index < 0; i++) /* a short letter given */
            if (aliases[i].letter == id && (aliases[i].cmds & cmd->bit))
                id = aliases[i].id;
        if (id == '?' || id == ':') {
            const char *near = id == '?' ? nearest_option(cmd, argv[optind - 1]) : NULL;
            if (near)
                fprintf(stderr, "vidfeat: %s: unknown option '%s' (did you mean '--%s'?)\n",
                        cmd->name, argv[optind - 1], near);
            else
                fprintf(stderr, "vidfeat: %s: %s '%s' (see vidfeat %s --help)\n", cmd->name,
                        id == ':' ? "a value is missing after" : "unknown option", argv[optind - 1],
                        cmd->name);
            return EXIT_USAGE;
        }
        const opt_def *o = NULL;
        for (size_t i = 0; i < N_OPTIONS && !o; i++)
            o = options[i].id == id ? &options[i] : NULL;
        if (o && !(o->cmds & cmd->bit)) {
            char names[128];
            command_names(o->cmds, names, sizeof(names));
            fprintf(stderr, "vidfeat: --%s is for %s, not %s (see vidfeat %s --help)\n", o->name,
                    names, cmd->name, cmd->name);
            return EXIT_USAGE;
        }
        if (!o) {
            fprintf(stderr, "vidfeat: option %d has no handler\n", id); /* a vidfeat bug */
            return EXIT_USAGE;
        }
        if (apply(c, cmd, o, a) != 0)
            return EXIT_USAGE;
    }
    /* each of these chooses the frames kept; together one would silently win */
    int samplings = (c->cfg.sample_fps > 0) + (c->cfg.every > 1) + (c->cfg.keyframes != 0);
    if (samplings > 1) {
        fprintf(stderr, "vidfeat: --fps, --every and --keyframes each choose the frames kept: give "
                        "one of them\n");
        return EXIT_USAGE;
    }
    if (c->cfg.shots && c->cfg.keyframes) {
        fprintf(stderr, "vidfeat: --shots looks at every frame and --keyframes decodes key frames "
                        "only: sample with --fps or --every instead\n");
        return EXIT_USAGE;
    }
    if (!c->cfg.shots && (c->cfg.shot_threshold > 0 || c->cfg.shot_min_frames > 0)) {
        fprintf(stderr, "vidfeat: --shot-threshold and --shot-min-frames tune --shots: add it\n");
        return EXIT_USAGE;
    }
    /* f16 and tf32 exist only on the GPU: without asking for it, say so rather than try */
    const char *dev = c->cfg.backend;
    int gpu = c->all_devices || (dev && (!strcmp(dev, "gpu") || !strcmp(dev, "cuda")));
    for (int i = 0; i < c->n_precisions && !gpu; i++) {
        vf_precision p = c->precisions[i];
        if (p == VF_PRECISION_F16 || p == VF_PRECISION_TF32) {
            fprintf(stderr,
                    "vidfeat: --precision %s runs on the GPU: add --gpu (the CPU runs f32, bf16 "
                    "or int8)\n",
                    vf_precision_str(p));
            return EXIT_USAGE;
        }
    }
    if (c->cfg.std[0] == 0.0f && (c->cfg.mean[0] || c->cfg.mean[1] || c->cfg.mean[2])) {
        fprintf(stderr, "vidfeat: --mean needs --std as well\n");
        return EXIT_USAGE;
    }
    if (c->db_set)
        cli_warn_password(c->cfg.db_path);
    *first = optind;
    return 0;
}
