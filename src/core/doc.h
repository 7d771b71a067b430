/*
 * doc.h - the JSON documents vidfeat gives about what it found: a record each (a neighbour, a
 * match, a database's summary, an extraction, a search index), built once here so that the
 * command's --json output and vidfeat serve's API say the same (docs/output.md, docs/serve.md).
 *
 * Each builder returns a new object owned by the caller (vfi_json_free, or added to another
 * document), or NULL when out of memory. Strings are copied.
 */
#ifndef VIDFEAT_DOC_H
#define VIDFEAT_DOC_H

#include "core/json.h"
#include "vidfeat.h"

/* {"rank", "similarity", "t", "frame_index", "pts", "path"} */
vf_json *vfi_doc_neighbour(const vf_neighbour *n, int rank);
/* similar's document: {"neighbours": hits, "query": {...}, ["embed_ms",] "search", "search_ms",
 * "index", "candidates", "weights"}. hits (an array of vfi_doc_neighbour) is taken over, also
 * on failure. The query is {"text"} for a text (and "embed_ms" is set), else src's {"stored",
 * "t", "frame_index", "path"}. */
vf_json *vfi_doc_similar(vf_json *hits, const vf_neighbour *src, const char *text,
                         const vf_similar_stats *st);
/* {"a", "a_start", "a_end", "b", "b_start", "b_end", "score", "speed", "frames"} */
vf_json *vfi_doc_match(const vf_match *m);
/* matches' document: {"matches": list, "search", "search_ms", "align_ms", "index", "frames",
 * "flat", "flat_known", "pairs", "weights"}; list is taken over, also on failure. */
vf_json *vfi_doc_matches(vf_json *list, const vf_match_stats *st);
/* info's records: {"database", "engine", "schema", "videos", "models", "done", "failed",
 * "running", "vectors", "pending"}; {"path", "status", "frames", "infer_fps", "model", "layer",
 * "dim", "dtype", "sampling", "weights", "error", "note"}; {"started_at", "host", "device",
 * "device_name", "precision", "batch", "mode", "model", "end_to_end_fps", "infer_fps"};
 * {"path", "model", "layer", "kind", "vectors", "files", "built_at", "host", "present",
 * "problem", "lacks_vectors", "lacks_files", "gone_vectors", "gone_files"}. */
vf_json *vfi_doc_summary(const vf_db_summary *s);
vf_json *vfi_doc_extraction(const vf_db_extraction *e);
vf_json *vfi_doc_bench_run(const vf_db_bench_run *r);
vf_json *vfi_doc_index(const vf_db_index_info *ix);

#endif /* VIDFEAT_DOC_H */
