/*
 * cmd_matches.c - vidfeat matches: reused footage between the files of a database (or between one
 * clip and the database's files), as a table or one JSON document. similar --video without --at
 * answers through it too.
 */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"

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
    vf_json *j = vfi_json_new_object();
    int bad = vfi_json_push(o->list, j) < 0;
    bad |= vfi_json_add_str(j, "a", m->a) < 0;
    bad |= vfi_json_add_real(j, "a_start", m->a_start, 3) < 0;
    bad |= vfi_json_add_real(j, "a_end", m->a_end, 3) < 0;
    bad |= vfi_json_add_str(j, "b", m->b) < 0;
    bad |= vfi_json_add_real(j, "b_start", m->b_start, 3) < 0;
    bad |= vfi_json_add_real(j, "b_end", m->b_end, 3) < 0;
    bad |= vfi_json_add_real(j, "score", m->score, 6) < 0;
    bad |= vfi_json_add_real(j, "speed", m->speed, 3) < 0;
    bad |= vfi_json_add_int(j, "frames", m->frames) < 0;
    o->json_failed |= bad;
}

/* {"matches": [...], "search", "search_ms", "align_ms", "index", "frames", "flat",
 * "flat_known", "pairs", "weights"} on stdout; -1 when it could not be made or written. */
static int print_json(matches_out *out, const vf_match_stats *st)
{
    vf_json *doc = vfi_json_new_object();
    int bad = out->json_failed;
    bad |= vfi_json_add(doc, "matches", out->list) < 0;
    out->list = NULL; /* the document has it */
    bad |= vfi_json_add_str(doc, "search", st->search) < 0;
    bad |= vfi_json_add_real(doc, "search_ms", st->search_ms, 3) < 0;
    bad |= vfi_json_add_real(doc, "align_ms", st->align_ms, 3) < 0;
    bad |= vfi_json_add_str(doc, "index", st->index[0] ? st->index : NULL) < 0;
    bad |= vfi_json_add_int(doc, "frames", st->frames) < 0;
    bad |= vfi_json_add_int(doc, "flat", st->flat) < 0;
    bad |= vfi_json_add_bool(doc, "flat_known", st->flat_known) < 0;
    bad |= vfi_json_add_int(doc, "pairs", st->pairs) < 0;
    bad |= vfi_json_add_str(doc, "weights", st->weights[0] ? st->weights : NULL) < 0;
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
