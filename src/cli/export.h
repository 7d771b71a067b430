/*
 * export.h - vidfeat export's writers, one per format (cmd_export.c: npy and csv;
 * export_hdf5.c: HDF5, the only file that sees libhdf5). cmd_export.c reads the vectors back
 * (vf_db_read_vectors) and hands each file's to the writer in chunks: begin, rows..., end.
 *
 * A writer prints one line "vidfeat: PATH: reason" for a failure and returns -1; what it
 * writes goes to a temporary name first and is renamed into place when whole, so a failed or
 * interrupted export leaves no half-written file under a real name.
 */
#ifndef VIDFEAT_EXPORT_H
#define VIDFEAT_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "vidfeat.h"

/* One file's vectors (one extraction: a file and a sampling). */
typedef struct export_video {
    const char *name; /* unique in the export: the file's base name, without its extension */
    const char *path; /* as recorded */
    const char *sampling;
    int64_t frames; /* the vectors that follow */
    /* its shots (--shots; NULL and 0: none), borrowed during begin only */
    const vf_db_shot *shots;
    int n_shots;
} export_video;

typedef struct export_writer export_writer;

typedef struct export_ops {
    const char *format;
    /* Start writing to out for the vectors of model m (read from db); *w owns what it opened. */
    int (*open)(export_writer **w, const char *out, const vf_db_model *m, const char *db);
    int (*begin)(export_writer *w, const export_video *v);
    /* n vectors of v: frame_index[n], t[n], t_end[n] (NaN for frames; a clip model's
     * (m->frames > 0) windows' end times, which the writer adds), vecs[n x m->dim] */
    int (*rows)(export_writer *w, const export_video *v, int n, const int64_t *frame_index,
                const double *t, const double *t_end, const float *vecs);
    int (*end)(export_writer *w, const export_video *v);
    /* Finish (ok: put the output in place; else remove what is unfinished) and free w. */
    int (*close)(export_writer *w, int ok);
} export_ops;

extern const export_ops export_npy, export_csv, export_hdf5;

/* NumPy's .npy header (format 1.0) for rows x dim values of type descr ("<f4"), dim 0: a
 * vector of rows; -1 on a write error. Also embed's -o. */
int export_npy_header(FILE *f, const char *descr, int64_t rows, int dim);

#endif /* VIDFEAT_EXPORT_H */
