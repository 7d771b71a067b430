/*
 * export_hdf5.c - vidfeat export --format hdf5, the only file that sees libhdf5: one HDF5 file,
 * a group per file (its export name) holding `features` [frames, dim] float32, `t` [frames]
 * float64 (seconds), `frame_index` [frames] int64 and, for a clip model's windows, `t_end`
 * [frames] float64 (each window's last frame's seconds), with the attributes path, sampling, model,
 * layer, model_sha256 and preprocessing; the file's root has model, layer, model_sha256,
 * preprocessing, dim and the database. Written to OUT.part and renamed when whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "cli/export.h"
#include "core/mem.h"

struct export_writer {
    char *out, *tmp;
    hid_t file, group, features, t, frame_index, t_end;
    int64_t row; /* the next row of the current file's datasets */
    int dim;
    int windows; /* a clip model's: t_end too */
    char *sha, *prep, *name, *layer;
};

/* A variable-length UTF-8 string attribute (h5py reads it as str; bytes that are not UTF-8
 * come back as surrogate escapes, as os.fsdecode makes them). */
static int put_str(hid_t obj, const char *key, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR), attr = -1;
    int rc = -1;
    if (type >= 0 && space >= 0 && H5Tset_size(type, H5T_VARIABLE) >= 0 &&
        H5Tset_cset(type, H5T_CSET_UTF8) >= 0 &&
        (attr = H5Acreate2(obj, key, type, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
        H5Awrite(attr, type, &value) >= 0)
        rc = 0;
    if (attr >= 0)
        H5Aclose(attr);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return rc;
}

static int put_int(hid_t obj, const char *key, int64_t value)
{
    hid_t space = H5Screate(H5S_SCALAR), attr = -1;
    int rc = -1;
    if (space >= 0 &&
        (attr = H5Acreate2(obj, key, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
        H5Awrite(attr, H5T_NATIVE_INT64, &value) >= 0)
        rc = 0;
    if (attr >= 0)
        H5Aclose(attr);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}

static hid_t make_dataset(hid_t group, const char *name, hid_t type, int rank, int64_t rows,
                          int dim)
{
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)dim};
    hid_t space = H5Screate_simple(rank, dims, NULL);
    if (space < 0)
        return -1;
    hid_t ds = H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(space);
    return ds;
}

/* Rows [row, row + n) of a dataset of rank 1 or 2 from buf. */
static int write_rows(hid_t ds, hid_t mem_type, int rank, int64_t row, int n, int dim,
                      const void *buf)
{
    hsize_t start[2] = {(hsize_t)row, 0}, count[2] = {(hsize_t)n, (hsize_t)dim};
    hid_t file_space = H5Dget_space(ds), mem_space = H5Screate_simple(rank, count, NULL);
    int rc = -1;
    if (file_space >= 0 && mem_space >= 0 &&
        H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
        H5Dwrite(ds, mem_type, mem_space, file_space, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (mem_space >= 0)
        H5Sclose(mem_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    return rc;
}

static void close_group(export_writer *w)
{
    hid_t *ids[] = {&w->features, &w->t, &w->frame_index, &w->t_end};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        if (*ids[i] >= 0)
            H5Dclose(*ids[i]);
        *ids[i] = -1;
    }
    if (w->group >= 0)
        H5Gclose(w->group);
    w->group = -1;
}

static void writer_free(export_writer *w)
{
    vfi_free(w->out);
    vfi_free(w->tmp);
    vfi_free(w->sha);
    vfi_free(w->prep);
    vfi_free(w->name);
    vfi_free(w->layer);
    vfi_free(w);
}

static int fail(export_writer *w, const char *what)
{
    fprintf(stderr, "vidfeat: %s: HDF5 could not %s\n", w->out, what);
    return -1;
}

static int h5_open(export_writer **pw, const char *out, const vf_db_model *m, const char *db)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our one line instead of HDF5's error stack */
    export_writer *w = vfi_calloc(1, sizeof(*w));
    size_t n = strlen(out) + 8;
    if (!w || !(w->out = vfi_strdup(out)) || !(w->tmp = vfi_malloc(n)) ||
        !(w->sha = vfi_strdup(m->file_sha256)) || !(w->prep = vfi_strdup(m->preprocessing)) ||
        !(w->name = vfi_strdup(m->name)) || !(w->layer = vfi_strdup(m->layer))) {
        if (w)
            writer_free(w);
        fprintf(stderr, "vidfeat: export: out of memory\n");
        return -1;
    }
    snprintf(w->tmp, n, "%s.part", out);
    w->dim = m->dim;
    w->windows = m->frames > 0;
    w->group = w->features = w->t = w->frame_index = w->t_end = -1;
    /* created exclusively, so never through a link planted at the temporary name */
    if (unlink(w->tmp) != 0 && errno != ENOENT) {
        fprintf(stderr, "vidfeat: %s: cannot replace it: %s\n", w->tmp, strerror(errno));
        writer_free(w);
        return -1;
    }
    w->file = H5Fcreate(w->tmp, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        fprintf(stderr, "vidfeat: %s: cannot create it: %s\n", out,
                errno ? strerror(errno) : "HDF5 error");
        writer_free(w);
        return -1;
    }
    if (put_str(w->file, "model", m->name) < 0 || put_str(w->file, "layer", m->layer) < 0 ||
        put_str(w->file, "model_sha256", m->file_sha256) < 0 ||
        put_str(w->file, "preprocessing", m->preprocessing) < 0 ||
        put_int(w->file, "dim", m->dim) < 0 || put_str(w->file, "database", db) < 0 ||
        put_str(w->file, "vidfeat_version", vf_version()) < 0) {
        H5Fclose(w->file);
        unlink(w->tmp);
        int rc = fail(w, "write the file's attributes");
        writer_free(w);
        return rc;
    }
    *pw = w;
    return 0;
}

static int h5_begin(export_writer *w, const export_video *v)
{
    w->group = H5Gcreate2(w->file, v->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (w->group < 0)
        return fail(w, "make a group");
    w->features = make_dataset(w->group, "features", H5T_IEEE_F32LE, 2, v->frames, w->dim);
    w->t = make_dataset(w->group, "t", H5T_IEEE_F64LE, 1, v->frames, 0);
    w->frame_index = make_dataset(w->group, "frame_index", H5T_STD_I64LE, 1, v->frames, 0);
    if (w->windows)
        w->t_end = make_dataset(w->group, "t_end", H5T_IEEE_F64LE, 1, v->frames, 0);
    if (w->features < 0 || w->t < 0 || w->frame_index < 0 || (w->windows && w->t_end < 0))
        return fail(w, "make the datasets");
    if (put_str(w->group, "path", v->path) < 0 || put_str(w->group, "sampling", v->sampling) < 0 ||
        put_str(w->group, "model", w->name) < 0 || put_str(w->group, "layer", w->layer) < 0 ||
        put_str(w->group, "model_sha256", w->sha) < 0 ||
        put_str(w->group, "preprocessing", w->prep) < 0)
        return fail(w, "write a group's attributes");
    if (v->n_shots) { /* shots: [n, 4] float64, first frame, last frame, start, end */
        double *rows = vfi_mallocarray((size_t)v->n_shots, 4 * sizeof(double));
        hid_t ds = rows ? make_dataset(w->group, "shots", H5T_IEEE_F64LE, 2, v->n_shots, 4) : -1;
        for (int i = 0; rows && i < v->n_shots; i++) {
            const vf_db_shot *s = &v->shots[i];
            double *r = rows + 4 * i;
            r[0] = (double)s->first_frame;
            r[1] = (double)s->last_frame;
            r[2] = s->start;
            r[3] = s->end;
        }
        int bad = ds < 0 || write_rows(ds, H5T_NATIVE_DOUBLE, 2, 0, v->n_shots, 4, rows) < 0 ||
                  put_str(ds, "columns", "first_frame,last_frame,start,end") < 0;
        if (ds >= 0)
            H5Dclose(ds);
        vfi_free(rows);
        if (bad)
            return fail(w, "write the shots");
    }
    w->row = 0;
    return 0;
}

static int h5_rows(export_writer *w, const export_video *v, int n, const int64_t *frame_index,
                   const double *t, const double *t_end, const float *vecs)
{
    (void)v;
    if (write_rows(w->features, H5T_NATIVE_FLOAT, 2, w->row, n, w->dim, vecs) < 0 ||
        write_rows(w->t, H5T_NATIVE_DOUBLE, 1, w->row, n, 0, t) < 0 ||
        write_rows(w->frame_index, H5T_NATIVE_INT64, 1, w->row, n, 0, frame_index) < 0 ||
        (w->windows && write_rows(w->t_end, H5T_NATIVE_DOUBLE, 1, w->row, n, 0, t_end) < 0))
        return fail(w, "write the vectors (a full disk?)");
    w->row += n;
    return 0;
}

static int h5_end(export_writer *w, const export_video *v)
{
    (void)v;
    close_group(w);
    return 0;
}

static int h5_close(export_writer *w, int ok)
{
    close_group(w);
    int rc = 0;
    if (H5Fclose(w->file) < 0) {
        if (ok)
            fail(w, "finish the file (a full disk?)");
        ok = 0;
    }
    if (ok && rename(w->tmp, w->out) != 0) {
        fprintf(stderr, "vidfeat: %s: %s\n", w->out, strerror(errno));
        ok = 0;
    }
    if (!ok) {
        unlink(w->tmp);
        rc = -1;
    }
    writer_free(w);
    return rc;
}

const export_ops export_hdf5 = {"hdf5", h5_open, h5_begin, h5_rows, h5_end, h5_close};
