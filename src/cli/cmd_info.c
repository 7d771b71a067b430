/*
 * cmd_info.c - vidfeat info: what a database holds, as text or (--json) as one JSON document:
 *
 *   {"summary": {"database", "engine", "schema", "videos", "models", "done", "failed",
 *                "running", "vectors", "pending"},
 *    "extractions": [{"path", "status", "frames", "infer_fps", "model", "layer", "dim", "dtype",
 *                     "sampling", "weights", "error", "note"}, ...],
 *    "benchmark_runs": [{"started_at", "host", "device", "device_name", "precision", "batch",
 *                        "mode", "model", "end_to_end_fps", "infer_fps"}, ...],
 *    "indexes": [{"path", "model", "layer", "kind", "vectors", "files", "built_at", "host",
 *                 "present", "problem", "lacks_vectors", "lacks_files", "gone_vectors",
 *                 "gone_files"}, ...]}
 *
 * (--summary: the summary and the indexes only, for archives of millions of files.)
 * written as the records come (an element per line), so memory does not grow with the archive.
 * "error" is why a file failed, "note" what a done file has to say (partial: ...); null when
 * there is none.
 * Names that are not UTF-8 are escaped losslessly (json.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/doc.h"

static void print_line(void *user, const char *text)
{
    (void)user;
    cli_printf(stdout, "%s\n", text);
}

/* The document being written to stdout; bad once something could not be made or written. */
typedef struct info_json {
    int extractions, runs; /* elements written so far */
    int bad;
} info_json;

/* Write one element (taken over) after its separator. */
static void put(info_json *j, vf_json *v, const char *sep)
{
    if (!j->bad && v && fputs(sep, stdout) != EOF)
        j->bad = vfi_json_write(stdout, v, 0) < 0;
    else
        j->bad = 1;
    vfi_json_free(&v);
}

static void json_summary(void *user, const vf_db_summary *s)
{
    info_json *j = user;
    vf_json *o = vfi_doc_summary(s);
    put(j, o, "{\"summary\": ");
}

static void json_extraction(void *user, const vf_db_extraction *e)
{
    info_json *j = user;
    vf_json *o = vfi_doc_extraction(e);
    put(j, o, j->extractions++ ? ", " : ", \"extractions\": [\n");
}

static void json_run(void *user, const vf_db_bench_run *r)
{
    info_json *j = user;
    vf_json *o = vfi_doc_bench_run(r);
    if (!j->runs++ && !j->extractions && fputs(", \"extractions\": [\n", stdout) == EOF)
        j->bad = 1;
    put(j, o, j->runs > 1 ? ", " : "], \"benchmark_runs\": [\n");
}

/* The lists that had no elements, and their closing brackets (summary only: none). */
static void json_lists_end(info_json *j, int summary_only)
{
    const char *tail = summary_only     ? ""
                       : j->runs        ? "]"
                       : j->extractions ? "], \"benchmark_runs\": []"
                                        : ", \"extractions\": [], \"benchmark_runs\": []";
    if (fputs(tail, stdout) == EOF)
        j->bad = 1;
}

/* ---- the search indexes (vf_db_indexes) ---- */

typedef struct index_out {
    info_json *j; /* NULL: text */
    int n;
} index_out;

static void show_index(void *user, const vf_db_index_info *ix)
{
    index_out *o = user;
    if (!o->j) {
        cli_printf(
            stdout,
            "index %s: %s, %lld vector%s of %lld extraction%s (%s %s, built %s on %s): ", ix->path,
            ix->kind, (long long)ix->vectors, cli_s(ix->vectors), (long long)ix->files,
            cli_s(ix->files), ix->model, ix->layer, ix->built_at, ix->host ? ix->host : "?");
        if (ix->problem)
            cli_printf(stdout, "%s\n", ix->problem);
        else if (!ix->lacks_vectors && !ix->gone_vectors)
            cli_printf(stdout, "current\n");
        else
            cli_printf(stdout,
                       "lacks %lld vector%s of %lld extraction%s, holds %lld of %lld extraction%s "
                       "no longer done (vidfeat index brings it up to date)\n",
                       (long long)ix->lacks_vectors, cli_s(ix->lacks_vectors),
                       (long long)ix->lacks_files, cli_s(ix->lacks_files),
                       (long long)ix->gone_vectors, (long long)ix->gone_files,
                       cli_s(ix->gone_files));
        o->n++;
        return;
    }
    vf_json *v = vfi_doc_index(ix);
    put(o->j, v, o->n++ ? ", " : "");
}

static void text_summary(void *user, const vf_db_summary *s)
{
    (void)user;
    cli_printf(stdout, "database %s (schema %d, %s)\n", s->database, s->schema, s->engine);
    cli_printf(
        stdout,
        "%lld video%s, %lld model%s, extractions: %lld done, %lld failed, %lld unfinished; %lld "
        "vector%s",
        (long long)s->videos, cli_s(s->videos), (long long)s->models, cli_s(s->models),
        (long long)s->done, (long long)s->failed, (long long)s->running, (long long)s->vectors,
        cli_s(s->vectors));
    if (s->pending) /* queued files no worker has started */
        cli_printf(stdout, "; %lld queued, not started", (long long)s->pending);
    cli_printf(stdout, "\n");
}

int cmd_info(cli *c, int argc, char **argv)
{
    if (argc != 1) {
        cli_printf(stderr, "vidfeat: info: expected one database file\n");
        return EXIT_USAGE;
    }
    char err[1024] = "";
    if (!cli_db_exists(argv[0]))
        return EXIT_START;
    if (!c->json) {
        vf_db_visitor sv = {NULL, text_summary, NULL, NULL};
        if ((c->summary ? vf_db_inspect(argv[0], &sv, err, sizeof(err))
                        : vf_db_describe(argv[0], print_line, NULL, err, sizeof(err))) < 0) {
            cli_printf(stderr, "vidfeat: %s\n", err);
            return EXIT_START;
        }
        index_out o = {NULL, 0};
        if (vf_db_indexes(argv[0], show_index, &o, err, sizeof(err)) < 0) {
            cli_printf(stderr, "vidfeat: %s\n", err);
            return EXIT_START;
        }
        return EXIT_OK;
    }
    info_json j = {0, 0, 0};
    vf_db_visitor v = {&j, json_summary, c->summary ? NULL : json_extraction,
                       c->summary ? NULL : json_run};
    if (vf_db_inspect(argv[0], &v, err, sizeof(err)) < 0) {
        cli_printf(stderr, "vidfeat: %s\n", err);
        return EXIT_START;
    }
    json_lists_end(&j, c->summary);
    index_out o = {&j, 0};
    if (!j.bad && fputs(", \"indexes\": [", stdout) == EOF)
        j.bad = 1;
    if (vf_db_indexes(argv[0], show_index, &o, err, sizeof(err)) < 0) {
        cli_printf(stderr, "vidfeat: %s\n", err);
        return EXIT_START;
    }
    if (fputs("]}\n", stdout) == EOF || fflush(stdout) == EOF || j.bad) {
        cli_printf(stderr, "vidfeat: info: the JSON could not be written\n");
        return EXIT_FAIL;
    }
    return EXIT_OK;
}
