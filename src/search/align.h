/*
 * align.h - reuse detection between two files: frame matches aligned in time into copied
 * segments. Single frames prove little (two dark rooms, two talking heads look alike); a copy
 * shows as a line of matches, b's time = speed x a's time + offset, along which most frames of a
 * stretch find their counterpart in b. Pure C over unit vectors: no store, no index.
 *
 * The candidates (frame pairs proposed by a nearest-neighbour search) only say where to look: a
 * vote over speeds and offsets picks the line with most evidence, then every frame of a along
 * it is compared exactly with b's frames at the time the line gives, and runs of frames that
 * match become segments. Lines are looked for again without the candidates a line took, so a
 * clip b shows twice gives two segments.
 */
#ifndef VIDFEAT_ALIGN_H
#define VIDFEAT_ALIGN_H

#include <stdint.h>

#include "core/status.h"

/* One file's frames: n of them, at t (seconds, ascending), dim-float unit vectors. flat (may
 * be NULL) marks frames that are no evidence (dark, uniform): never matched. */
typedef struct vfi_align_file {
    int64_t n;
    const double *t;
    const float *vec;
    const unsigned char *flat;
} vfi_align_file;

/* A candidate: frame a of the first file looks like frame b of the second (sim: the search's
 * estimate of their cosine). */
typedef struct vfi_align_hit {
    int64_t a, b;
    float sim;
} vfi_align_hit;

typedef struct vfi_align_opts {
    int dim;
    double min_similarity; /* a frame matches when its cosine with b's frame is at least this */
    double min_duration;   /* seconds of a a segment must span */
} vfi_align_opts;

/* A copied segment: a's [a_start, a_end] shows b's [b_start, b_end] (seconds, the matched
 * frames' times); score: the mean cosine of its matched frames; speed: b's seconds per a's;
 * frames: a's frames that matched. */
typedef struct vfi_segment {
    double a_start, a_end, b_start, b_end;
    double score, speed;
    int64_t frames;
} vfi_segment;

/* The segments a and b share, from the n candidates hits (reordered: the array is the
 * function's to use), into out (at most max_out, the longest kept), *n_out of them, in a's
 * time order. VF_ERR_NOMEM. */
vf_status vfi_align(const vfi_align_file *a, const vfi_align_file *b, vfi_align_hit *hits,
                    int64_t n, const vfi_align_opts *o, vfi_segment *out, int max_out, int *n_out,
                    vf_err *err);

#endif /* VIDFEAT_ALIGN_H */
