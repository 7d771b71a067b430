/*
 * cmd_matches.c - vidfeat matches: reused footage between the files of a database (or between one
 * clip and the database's files), as a table or one JSON document. similar --video without --at
 * answers through it too.
 */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/doc.h"

typedef struct matches_out {
    vf_json *list; /* --json: the matches so far; NULL for the table */
    int n, limit;  /* limit 0: all */
    int json_failed;
} matches_out;

static void print_match(void *user, const vf_match *m)
{
    matches_out *o = user;
    if (o->limit && o->n >= o->limit)
        return;
    o->n++;
    if (!o->list) {
        cli_printf(stdout,
                   "%8.3f %8.3f  %s\n%8.3f %8.3f  %s\n  score %.4f, %lld frame%s, speed %.2f\n\n",
                   m->a_start, m->a_end, m->a, m->b_start, m->b_end, m->b, m->score,
                   (long long)m->frames, cli_s(m->frames), m->speed);
        return;
    }
    o->json_failed |= vfi_json_push(o->list, vfi_doc_match(m)) < 0;
}

/* {"matches": [...], "search", "search_ms", "align_ms", "index", "frames", "flat",
 * "flat_known", "pairs", "weights"} on stdout; -1 when it could not be made or written. */
static int print_json(matches_out *out, const vf_match_stats *st)
{
    vf_json *doc = vfi_doc_matches(out->list, st);
    out->list = NULL; /* the document has it */
    int bad = out->json_failed || !doc;
    if (!bad)
        bad = vfi_json_write(stdout, doc, 1) < 0;
    vfi_json_free(&doc);
    return bad ? -1 : 0;
}

int cli_matches(cli *c, const char *db, const char *video)
{
    if (cli_single_values(c))
        return EXIT_USAGE;
    if (!cli_db_exists(db))
        return EXIT_START;
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* the database's */
    vf_match_stats st;
    vf_match_query q = {.video = video,
                        .min_duration = c->min_duration,
                        .min_similarity = c->min_similarity,
                        .exact = c->exact,
                        .probe = c->probe,
                        .index = c->index,
                        .stats = &st};
    matches_out out = {.limit = c->top};
    if (c->json && !(out.list = vfi_json_new_array()))
        out.json_failed = 1;
    char err[1024] = "";
    vf_status rc = vf_db_matches(db, &cfg, &q, print_match, &out, err, sizeof(err));
    if (rc < 0) {
        vfi_json_free(&out.list);
        cli_printf(stderr, "vidfeat: %s\n", err);
        /* the query file is the input; the database, the model and the device are the start */
        int query_bad = video && (rc == VF_ERR_DECODE || (rc == VF_ERR_IO && access(video, R_OK)));
        return query_bad ? EXIT_FAIL : EXIT_START;
    }
    if (c->json && print_json(&out, &st) < 0) {
        cli_printf(stderr, "vidfeat: matches: the JSON could not be written\n");
        return EXIT_FAIL;
    }
    if (!c->json && !out.n)
        cli_printf(stdout, "no reused footage found%s%s\n", video ? " of " : "",
                   video ? video : "");
    if (c->verbosity > 0)
        cli_printf(stderr,
                   "vidfeat: search: %s%s%s: %lld frames (%lld show nothing%s) in %.1f ms; %lld "
                   "pairs of files aligned in %.1f ms\n",
                   st.search, st.index[0] ? " " : "", st.index, (long long)st.frames,
                   (long long)st.flat, st.flat_known ? "" : ": not told, the model is not here",
                   st.search_ms, (long long)st.pairs, st.align_ms);
    return EXIT_OK;
}

int cmd_matches(cli *c, int argc, char **argv)
{
    if (argc != 1 || (c->video && !c->video[0])) {
        cli_printf(stderr, "vidfeat: matches: expected one database [--video FILE]\n");
        return EXIT_USAGE;
    }
    return cli_matches(c, argv[0], c->video);
}
