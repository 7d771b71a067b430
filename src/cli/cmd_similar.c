/*
 * cmd_similar.c - vidfeat similar: the stored frames nearest a query frame (an image, or a
 * video's frame at a time), as a table or one JSON document; a whole video (no --at) is answered
 * as the files and times that show its footage (cmd_matches.c).
 */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"

typedef struct similar_out {
    vf_json *hits; /* --json: the neighbours so far; NULL for the table */
    int rank;
    int json_failed;
} similar_out;

static void print_neighbour(void *user, const vf_neighbour *n)
{
    similar_out *o = user;
    o->rank++;
    if (!o->hits) {
        printf("%4d  %10.6f  %10.3f  %7lld  %s\n", o->rank, n->similarity, n->t,
               (long long)n->frame_index, n->path);
        return;
    }
    vf_json *h = vfi_json_new_object();
    int bad = vfi_json_push(o->hits, h) < 0;
    bad |= vfi_json_add_int(h, "rank", o->rank) < 0;
    bad |= vfi_json_add_real(h, "similarity", n->similarity, 6) < 0;
    bad |= vfi_json_add_real(h, "t", n->t, 6) < 0;
    bad |= vfi_json_add_int(h, "frame_index", n->frame_index) < 0;
    bad |= vfi_json_add_int(h, "pts", n->pts) < 0;
    bad |= vfi_json_add_str(h, "path", n->path) < 0;
    o->json_failed |= bad;
}

/* {"neighbours": [...], "query": {...}, "search", "search_ms", "index", "candidates"} on
 * stdout; -1 when it could not be made or written. */
static int print_json(similar_out *out, const vf_neighbour *src, const vf_similar_stats *st)
{
    vf_json *doc = vfi_json_new_object(), *q = vfi_json_new_object();
    int bad = out->json_failed;
    bad |= vfi_json_add(doc, "neighbours", out->hits) < 0;
    out->hits = NULL; /* the document has it */
    bad |= vfi_json_add(doc, "query", q) < 0;
    bad |= vfi_json_add_bool(q, "stored", src->stored) < 0;
    bad |= vfi_json_add_real(q, "t", src->t, 6) < 0;
    bad |= vfi_json_add_int(q, "frame_index", src->frame_index) < 0;
    bad |= vfi_json_add_str(q, "path", src->path) < 0;
    bad |= vfi_json_add_str(doc, "search", st->search) < 0;
    bad |= vfi_json_add_real(doc, "search_ms", st->search_ms, 3) < 0;
    bad |= vfi_json_add_str(doc, "index", st->index[0] ? st->index : NULL) < 0;
    bad |= vfi_json_add_int(doc, "candidates", st->candidates) < 0;
    if (!bad)
        bad = vfi_json_write(stdout, doc, 1) < 0;
    vfi_json_free(&doc);
    return bad ? -1 : 0;
}

int cmd_similar(cli *c, int argc, char **argv)
{
    const char *query = c->image ? c->image : c->video;
    if (argc != 1 || !c->image == !c->video || (c->image && c->at_set) || !query[0]) {
        fprintf(stderr, "vidfeat: similar: expected one database and --image FILE or --video FILE "
                        "[--at T]\n");
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
        fprintf(stderr, "vidfeat: %s\n", err);
        /* the query file is the input; the database, the model and the device are the start */
        int query_bad = rc == VF_ERR_DECODE || (rc == VF_ERR_IO && access(query, R_OK) != 0);
        return query_bad ? EXIT_FAIL : EXIT_START;
    }
    if (c->json && print_json(&out, &src, &stats) < 0) {
        fprintf(stderr, "vidfeat: similar: the JSON could not be written\n");
        return EXIT_FAIL;
    }
    if (!c->json && !out.rank)
        printf("no other frames in %s\n", argv[0]);
    if (!c->json && c->verbosity >= 0)
        fprintf(stderr, "vidfeat: query: %s, frame %lld at %.3f s (%s)\n", src.path,
                (long long)src.frame_index, src.t,
                src.stored ? "its vector in the database" : "extracted now");
    if (c->verbosity > 0) {
        if (stats.index[0])
            fprintf(stderr,
                    "vidfeat: search: %s (%s): %lld candidates ranked by exact cosine in %.3f ms\n",
                    stats.search, stats.index, (long long)stats.candidates, stats.search_ms);
        else
            fprintf(stderr, "vidfeat: search: exact (every stored vector read) in %.3f ms\n",
                    stats.search_ms);
    }
    return EXIT_OK;
}
