/*
 * cmd_similar.c - vidfeat similar: the stored frames nearest a query frame (an image, or a
 * video's frame at a time) or texts (--text, a CLIP model's), as a table or JSON (a document a
 * query: one line each); a whole video (no --at) is answered as the files and times that show
 * its footage (cmd_matches.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/doc.h"

/* --at further than this from the query frame found is said (seconds) */
#define AT_NOTE_S 0.5

typedef struct similar_out {
    vf_json *hits; /* --json: the neighbours so far; NULL for the table */
    int rank;
    int json_failed;
    vf_json **text_hits; /* texts with --json: each one's neighbours */
    int *text_rank;      /* texts: hits so far of each */
    const char *const *texts;
} similar_out;

static void print_neighbour(void *user, const vf_neighbour *n)
{
    similar_out *o = user;
    if (o->texts) { /* each text's hits after its own heading */
        if (!o->text_rank[n->query]++ && !o->text_hits)
            cli_printf(stdout, n->query ? "\ntext: %s\n" : "text: %s\n", o->texts[n->query]);
        o->rank = o->text_rank[n->query] - 1;
        if (o->text_hits)
            o->hits = o->text_hits[n->query];
    }
    o->rank++;
    if (!o->hits) {
        if (o->rank == 1)
            cli_printf(stdout, "%4s  %10s  %10s  %7s  %s\n", "rank", "similarity", "t (s)", "frame",
                       "path");
        cli_printf(stdout, "%4d  %10.6f  %10.3f  %7lld  %s\n", o->rank, n->similarity, n->t,
                   (long long)n->frame_index, n->path);
        return;
    }
    o->json_failed |= vfi_json_push(o->hits, vfi_doc_neighbour(n, o->rank)) < 0;
}

/* {"neighbours": [...], "query": {...}, "search", "search_ms", "index", "candidates",
 * "weights"} on stdout (a text's query is {"text"}, and "embed_ms" the time the texts took to
 * embed); -1 when it could not be made or written. */
static int print_json(similar_out *out, const vf_neighbour *src, const char *text,
                      const vf_similar_stats *st)
{
    vf_json *doc = vfi_doc_similar(out->hits, src, text, st);
    out->hits = NULL; /* the document has it */
    int bad = out->json_failed || !doc;
    if (!bad) /* a text's document on one line: several texts are JSON lines */
        bad = vfi_json_write(stdout, doc, text ? 0 : 1) < 0;
    vfi_json_free(&doc);
    return bad ? -1 : 0;
}

static void print_search_line(const vf_similar_stats *st)
{
    if (st->index[0])
        cli_printf(stderr,
                   "vidfeat: search: %s (%s): %lld candidates ranked by exact cosine in %.3f ms\n",
                   st->search, st->index, (long long)st->candidates, st->search_ms);
    else
        cli_printf(stderr, "vidfeat: search: exact (every stored vector read) in %.3f ms\n",
                   st->search_ms);
}

/* similar DB --text T...: each text's neighbours, as a table after its heading or a JSON line. */
static int similar_texts(cli *c, const char *db)
{
    for (int i = 0; i < c->n_texts; i++)
        if (cli_bad_text("similar", c->texts[i], i))
            return EXIT_USAGE;
    if (cli_single_values(c))
        return EXIT_USAGE;
    if (!cli_db_exists(db))
        return EXIT_START;
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* the database's */
    int n = c->n_texts;
    vf_similar_stats *stats = calloc((size_t)n, sizeof(*stats));
    similar_out out = {.texts = c->texts, .text_rank = calloc((size_t)n, sizeof(int))};
    if (c->json && (out.text_hits = calloc((size_t)n, sizeof(vf_json *))))
        for (int i = 0; i < n; i++)
            out.json_failed |= !(out.text_hits[i] = vfi_json_new_array());
    int status = EXIT_OK;
    if (!stats || !out.text_rank || (c->json && !out.text_hits)) {
        cli_printf(stderr, "vidfeat: similar: out of memory\n");
        status = EXIT_FAIL;
        goto done;
    }
    vf_similar_query q = {.k = c->top,
                          .exact = c->exact,
                          .probe = c->probe,
                          .index = c->index,
                          .stats = stats,
                          .texts = c->texts,
                          .n_texts = n};
    char err[1024] = "";
    vf_status rc = vf_db_similar(db, &cfg, &q, print_neighbour, &out, NULL, err, sizeof(err));
    if (rc < 0) {
        cli_printf(stderr, "vidfeat: %s\n", err);
        status = rc == VF_ERR_INVALID ? EXIT_USAGE : EXIT_START;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (c->json) {
            out.hits = out.text_hits[i];
            out.text_hits[i] = NULL; /* the document takes it */
            if (print_json(&out, NULL, c->texts[i], &stats[i]) < 0) {
                cli_printf(stderr, "vidfeat: similar: the JSON could not be written\n");
                status = EXIT_FAIL;
                goto done;
            }
        } else if (!out.text_rank[i]) {
            cli_printf(stdout, i ? "\ntext: %s\nno frames in %s\n" : "text: %s\nno frames in %s\n",
                       c->texts[i], db);
        }
        if (c->verbosity > 0)
            print_search_line(&stats[i]);
    }
    if (c->verbosity > 0)
        cli_printf(stderr, "vidfeat: %d text%s embedded in %.1f ms\n", n, n == 1 ? "" : "s",
                   stats[0].embed_ms);
done:
    for (int i = 0; out.text_hits && i < n; i++)
        vfi_json_free(&out.text_hits[i]);
    free(out.text_hits);
    free(out.text_rank);
    free(stats);
    return status;
}

int cmd_similar(cli *c, int argc, char **argv)
{
    const char *query = c->image ? c->image : c->video;
    int n_images = c->n_queries - c->n_texts;
    if (argc == 1 && c->n_texts && !c->image && !c->video && !c->at_set)
        return similar_texts(c, argv[0]);
    if (argc != 1 || !c->image == !c->video || (c->image && c->at_set) || !query[0] ||
        n_images > 1 || c->n_texts) {
        cli_printf(stderr, "vidfeat: similar: expected one database and --image FILE, --video FILE "
                           "[--at T | --audio-at T] or --text TEXT...\n");
        return EXIT_USAGE;
    }
    if (c->video && !c->at_set) /* a whole clip: where its footage is */
        return cli_matches(c, argv[0], c->video);
    if (cli_single_values(c))
        return EXIT_USAGE;
    if (!cli_db_exists(argv[0]))
        return EXIT_START;
    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* the database's */
    vf_similar_stats stats;
    vf_similar_query q = {.image = c->image,
                          .video = c->video,
                          .at = c->at,
                          .sound = c->at_sound,
                          .k = c->top,
                          .exact = c->exact,
                          .probe = c->probe,
                          .index = c->index,
                          .stats = &stats};
    similar_out out = {0};
    if (c->json && !(out.hits = vfi_json_new_array()))
        out.json_failed = 1;
    vf_neighbour src;
    char err[1024] = "";
    vf_status rc = vf_db_similar(argv[0], &cfg, &q, print_neighbour, &out, &src, err, sizeof(err));
    if (rc < 0) {
        vfi_json_free(&out.hits);
        cli_printf(stderr, "vidfeat: %s\n", err);
        /* the query file is the input; the database, the model and the device are the start */
        int query_bad = rc == VF_ERR_DECODE || (rc == VF_ERR_IO && access(query, R_OK) != 0);
        return query_bad ? EXIT_FAIL : EXIT_START;
    }
    if (c->json && print_json(&out, &src, NULL, &stats) < 0) {
        cli_printf(stderr, "vidfeat: similar: the JSON could not be written\n");
        return EXIT_FAIL;
    }
    if (!c->json && !out.rank)
        cli_printf(stdout, "no other frames in %s\n", argv[0]);
    if (!c->json && c->verbosity >= 0)
        cli_printf(stderr, "vidfeat: query: %s, frame %lld at %.3f s (%s)\n", src.path,
                   (long long)src.frame_index, src.t,
                   src.stored ? "its vector in the database" : "extracted now");
    /* a time past the end (or between sparse stored frames) answers with the nearest frame */
    if (c->video && c->verbosity >= 0 && fabs(src.t - c->at) > AT_NOTE_S)
        cli_printf(stderr, "vidfeat: --at %g s: the nearest %s of %s is at %.3f s\n", c->at,
                   src.stored ? "stored frame" : "frame", src.path, src.t);
    if (c->verbosity > 0)
        print_search_line(&stats);
    return EXIT_OK;
}
