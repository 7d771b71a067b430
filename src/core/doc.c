/*
 * doc.c - the JSON records of what vidfeat found (doc.h): one builder per record, shared by the
 * command line and vidfeat serve.
 */
#define _XOPEN_SOURCE 700 /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/doc.h"

/* o when every addition succeeded (bad 0), else NULL with o freed. */
static vf_json *done(vf_json *o, int bad)
{
    if (bad || !o)
        vfi_json_free(&o);
    return o;
}

vf_json *vfi_doc_neighbour(const vf_neighbour *n, int rank)
{
    vf_json *h = vfi_json_new_object();
    int bad = vfi_json_add_int(h, "rank", rank) < 0;
    bad |= vfi_json_add_real(h, "similarity", n->similarity, 6) < 0;
    bad |= vfi_json_add_real(h, "t", n->t, 6) < 0;
    bad |= vfi_json_add_int(h, "frame_index", n->frame_index) < 0;
    bad |= vfi_json_add_int(h, "pts", n->pts) < 0;
    bad |= vfi_json_add_str(h, "path", n->path) < 0;
    return done(h, bad);
}

vf_json *vfi_doc_similar(vf_json *hits, const vf_neighbour *src, const char *text,
                         const vf_similar_stats *st)
{
    vf_json *doc = vfi_json_new_object(), *q = vfi_json_new_object();
    int bad = !hits;
    if (vfi_json_add(doc, "neighbours", hits) < 0) /* taken over either way */
        bad = 1;
    if (vfi_json_add(doc, "query", q) < 0)
        bad = 1;
    if (text) {
        bad |= vfi_json_add_str(q, "text", text) < 0;
        bad |= vfi_json_add_real(doc, "embed_ms", st->embed_ms, 3) < 0;
    } else {
        bad |= vfi_json_add_bool(q, "stored", src->stored) < 0;
        bad |= vfi_json_add_real(q, "t", src->t, 6) < 0;
        bad |= vfi_json_add_int(q, "frame_index", src->frame_index) < 0;
        bad |= vfi_json_add_str(q, "path", src->path) < 0;
    }
    bad |= vfi_json_add_str(doc, "search", st->search) < 0;
    bad |= vfi_json_add_real(doc, "search_ms", st->search_ms, 3) < 0;
    bad |= vfi_json_add_str(doc, "index", st->index[0] ? st->index : NULL) < 0;
    bad |= vfi_json_add_int(doc, "candidates", st->candidates) < 0;
    bad |= vfi_json_add_str(doc, "weights", st->weights[0] ? st->weights : NULL) < 0;
    return done(doc, bad);
}

vf_json *vfi_doc_match(const vf_match *m)
{
    vf_json *j = vfi_json_new_object();
    int bad = vfi_json_add_str(j, "a", m->a) < 0;
    bad |= vfi_json_add_real(j, "a_start", m->a_start, 3) < 0;
    bad |= vfi_json_add_real(j, "a_end", m->a_end, 3) < 0;
    bad |= vfi_json_add_str(j, "b", m->b) < 0;
    bad |= vfi_json_add_real(j, "b_start", m->b_start, 3) < 0;
    bad |= vfi_json_add_real(j, "b_end", m->b_end, 3) < 0;
    bad |= vfi_json_add_real(j, "score", m->score, 6) < 0;
    bad |= vfi_json_add_real(j, "speed", m->speed, 3) < 0;
    bad |= vfi_json_add_int(j, "frames", m->frames) < 0;
    bad |= vfi_json_add_real(j, "a_length", m->a_length, 3) < 0;
    bad |= vfi_json_add_real(j, "b_length", m->b_length, 3) < 0;
    return done(j, bad);
}

vf_json *vfi_doc_matches(vf_json *list, const vf_match_stats *st)
{
    vf_json *doc = vfi_json_new_object();
    int bad = !list;
    if (vfi_json_add(doc, "matches", list) < 0)
        bad = 1;
    bad |= vfi_json_add_str(doc, "search", st->search) < 0;
    bad |= vfi_json_add_real(doc, "search_ms", st->search_ms, 3) < 0;
    bad |= vfi_json_add_real(doc, "align_ms", st->align_ms, 3) < 0;
    bad |= vfi_json_add_str(doc, "index", st->index[0] ? st->index : NULL) < 0;
    bad |= vfi_json_add_int(doc, "frames", st->frames) < 0;
    bad |= vfi_json_add_int(doc, "flat", st->flat) < 0;
    bad |= vfi_json_add_bool(doc, "flat_known", st->flat_known) < 0;
    bad |= vfi_json_add_int(doc, "pairs", st->pairs) < 0;
    bad |= vfi_json_add_str(doc, "weights", st->weights[0] ? st->weights : NULL) < 0;
    return done(doc, bad);
}

vf_json *vfi_doc_summary(const vf_db_summary *s)
{
    vf_json *o = vfi_json_new_object();
    int bad = vfi_json_add_str(o, "database", s->database) < 0;
    bad |= vfi_json_add_str(o, "engine", s->engine) < 0;
    bad |= vfi_json_add_int(o, "schema", s->schema) < 0;
    bad |= vfi_json_add_int(o, "videos", s->videos) < 0;
    bad |= vfi_json_add_int(o, "models", s->models) < 0;
    bad |= vfi_json_add_int(o, "done", s->done) < 0;
    bad |= vfi_json_add_int(o, "failed", s->failed) < 0;
    bad |= vfi_json_add_int(o, "running", s->running) < 0;
    bad |= vfi_json_add_int(o, "vectors", s->vectors) < 0;
    bad |= vfi_json_add_int(o, "pending", s->pending) < 0;
    return done(o, bad);
}

vf_json *vfi_doc_extraction(const vf_db_extraction *e)
{
    vf_json *o = vfi_json_new_object();
    int bad = vfi_json_add_str(o, "path", e->path) < 0;
    bad |= vfi_json_add_str(o, "status", e->status) < 0;
    bad |= vfi_json_add_int(o, "frames", e->frames) < 0;
    bad |= vfi_json_add_real(o, "infer_fps", e->infer_fps, 2) < 0;
    bad |= vfi_json_add_str(o, "model", e->model) < 0;
    bad |= vfi_json_add_str(o, "layer", e->layer) < 0;
    bad |= vfi_json_add_int(o, "dim", e->dim) < 0;
    bad |= vfi_json_add_str(o, "dtype", e->dtype) < 0;
    bad |= vfi_json_add_str(o, "sampling", e->sampling) < 0;
    bad |= vfi_json_add_str(o, "weights", e->weights) < 0; /* null when not known */
    /* the store's one text column: why a file failed, or a done file's note */
    int failed = !strcmp(e->status, "failed");
    bad |= vfi_json_add_str(o, "error", failed ? e->error : NULL) < 0;
    bad |= vfi_json_add_str(o, "note", failed ? NULL : e->error) < 0;
    return done(o, bad);
}

vf_json *vfi_doc_bench_run(const vf_db_bench_run *r)
{
    vf_json *o = vfi_json_new_object();
    int bad = vfi_json_add_str(o, "started_at", r->started_at) < 0;
    bad |= vfi_json_add_str(o, "host", r->host) < 0;
    bad |= vfi_json_add_str(o, "device", r->device) < 0;
    bad |= vfi_json_add_str(o, "device_name", r->device_name) < 0;
    bad |= vfi_json_add_str(o, "precision", r->precision) < 0;
    bad |= vfi_json_add_int(o, "batch", r->batch_size) < 0;
    bad |= vfi_json_add_str(o, "mode", r->mode) < 0;
    bad |= vfi_json_add_str(o, "model", r->model) < 0;
    bad |= vfi_json_add_real(o, "end_to_end_fps", r->end_to_end_fps, 2) < 0;
    bad |= vfi_json_add_real(o, "infer_fps", r->infer_fps, 2) < 0;
    return done(o, bad);
}

vf_json *vfi_doc_index(const vf_db_index_info *ix)
{
    vf_json *v = vfi_json_new_object();
    int bad = vfi_json_add_str(v, "path", ix->path) < 0;
    bad |= vfi_json_add_str(v, "model", ix->model) < 0;
    bad |= vfi_json_add_str(v, "layer", ix->layer) < 0;
    bad |= vfi_json_add_str(v, "kind", ix->kind) < 0;
    bad |= vfi_json_add_int(v, "vectors", ix->vectors) < 0;
    bad |= vfi_json_add_int(v, "files", ix->files) < 0;
    bad |= vfi_json_add_str(v, "built_at", ix->built_at) < 0;
    bad |= vfi_json_add_str(v, "host", ix->host) < 0;
    bad |= vfi_json_add_bool(v, "present", ix->present) < 0;
    bad |= vfi_json_add_str(v, "problem", ix->problem) < 0;
    bad |= vfi_json_add_int(v, "lacks_vectors", ix->lacks_vectors) < 0;
    bad |= vfi_json_add_int(v, "lacks_files", ix->lacks_files) < 0;
    bad |= vfi_json_add_int(v, "gone_vectors", ix->gone_vectors) < 0;
    bad |= vfi_json_add_int(v, "gone_files", ix->gone_files) < 0;
    return done(v, bad);
}

/* ---- the public calls (vidfeat.h): a record's text ---- */

/* o as one line of JSON text (without its newline) in a new string; o freed. */
static char *as_text(vf_json *o)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = o ? open_memstream(&text, &len) : NULL;
    int bad = !f || vfi_json_write(f, o, 0) < 0;
    if (f && fclose(f) != 0)
        bad = 1;
    vfi_json_free(&o);
    if (bad || !text) {
        free(text);
        return NULL;
    }
    if (len && text[len - 1] == '\n')
        text[len - 1] = '\0';
    return text;
}

char *vf_doc_json(vf_doc_kind kind, const void *record, int rank)
{
    if (!record)
        return NULL;
    switch (kind) {
    case VF_DOC_NEIGHBOUR:
        return as_text(vfi_doc_neighbour(record, rank));
    case VF_DOC_MATCH:
        return as_text(vfi_doc_match(record));
    case VF_DOC_SUMMARY:
        return as_text(vfi_doc_summary(record));
    case VF_DOC_EXTRACTION:
        return as_text(vfi_doc_extraction(record));
    case VF_DOC_BENCH_RUN:
        return as_text(vfi_doc_bench_run(record));
    case VF_DOC_INDEX:
        return as_text(vfi_doc_index(record));
    case VF_DOC_MATCHES:
        return as_text(vfi_doc_matches(vfi_json_new_array(), record));
    }
    return NULL;
}

char *vf_doc_similar_json(const vf_neighbour *src, const char *text, const vf_similar_stats *stats)
{
    if (!stats || (!text && !src))
        return NULL;
    return as_text(vfi_doc_similar(vfi_json_new_array(), text ? NULL : src, text, stats));
}

void vf_doc_free(char *text)
{
    free(text); /* open_memstream's */
}
