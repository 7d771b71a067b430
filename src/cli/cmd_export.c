/*
 * cmd_export.c - vidfeat export DB [--format npy|hdf5|csv] [-o PATH] [--model M --layer L]: the
 * stored vectors of one model and layer as files other tools read. npy: per file NAME.npy
 * [frames, dim] float32 and NAME_t.npy (seconds), with index.json naming each file's path and
 * sampling; hdf5 (export_hdf5.c): one file, a group per file; csv: a row per frame. The npy and
 * csv writers are here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/export.h"
#include "core/json.h"
#include "core/path.h"
#include "core/mem.h"
#include "core/strmap.h"

#define CHUNK 256 /* vectors handed to a writer at once */

/* ---- names ---------------------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] < 0x80             ? 1
               : (s[0] & 0xe0) == 0xc0 ? 2
               : (s[0] & 0xf0) == 0xe0 ? 3
               : (s[0] & 0xf8) == 0xf0 ? 4
                                       : 0;
    if (n == 2 && s[0] < 0xc2)
        return 0; /* overlong */
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* The base name of path without its extension: where it starts, and its length in *len. */
static const char *stem(const char *path, size_t *len)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    *len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return base;
}

/* A file's export name into buf: its base name without the extension, control characters and
 * bytes that are not UTF-8 made '_' (HDF5 names and file names other tools open are text), and
 * a suffix _2, _3, ... when taken (`used` remembers every name given). */
static int unique_name(const char *path, vf_strmap *used, char *buf, size_t size)
{
    size_t len;
    const char *base = stem(path, &len);
    if (len > size - 16)
        len = size - 16;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_len((const unsigned char *)base + i);
        if (n == 0 || i + n > len || (unsigned char)base[i] < 0x20 || base[i] == 0x7f) {
            buf[o++] = '_';
            i++;
        } else {
            memcpy(buf + o, base + i, n);
            o += n;
            i += n;
        }
    }
    if (o == 0)
        o = (size_t)snprintf(buf, size, "video");
    buf[o] = '\0';
    for (int k = 2; vfi_strmap_get(used, buf, 0); k++)
        snprintf(buf + o, size - o, "_%d", k);
    return vfi_strmap_put(used, buf, 1) < 0 ? -1 : 0;
}

/* ---- npy ------------------------------------------------------------------------------------ */

/* NumPy's format 1.0: magic, version, a little-endian header length, a Python dict literal padded
 * with spaces to a multiple of 64 bytes, then the data in C order. */
int export_npy_header(FILE *f, const char *descr, int64_t rows, int dim)
{
    char dict[128], shape[64];
    if (dim > 0)
        snprintf(shape, sizeof(shape), "(%lld, %d)", (long long)rows, dim);
    else
        snprintf(shape, sizeof(shape), "(%lld,)", (long long)rows);
    int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
    unsigned hlen = (unsigned)((size_t)n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, hlen & 0xff, hlen >> 8};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)n, f) != (size_t)n)
        return -1;
    for (size_t i = 0; i < pad; i++)
        if (fputc(' ', f) == EOF)
            return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

static int little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* npy: the files of one video, NAME.npy, NAME_t.npy and (a clip model's windows) NAME_t_end.npy */
#define NPY_FILES 3

struct export_writer {
    char *out;                 /* the output's path (npy: a directory) */
    char *tmp;                 /* csv, hdf5: the file being written */
    FILE *f;                   /* csv: the file */
    FILE *npy[NPY_FILES];      /* npy: the video's files being written */
    char *vec_path[NPY_FILES]; /* npy: their names while written, then their real names */
    char *real_path[NPY_FILES];
    int n_npy;      /* npy: 2, or 3 with windows' end times */
    vf_json *index; /* npy: index.json's entries */
    int dim, to_stdout;
    int windows; /* a clip model's: t_end is written too */
};

static void writer_free(export_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < NPY_FILES; i++) {
        vfi_free(w->vec_path[i]);
        vfi_free(w->real_path[i]);
    }
    vfi_free(w->out);
    vfi_free(w->tmp);
    vfi_json_free(&w->index);
    vfi_free(w);
}

static int npy_open(export_writer **pw, const char *out, const vf_db_model *m, const char *db)
{
    (void)db;
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        cli_printf(stderr, "vidfeat: %s: cannot make the directory: %s\n", out, strerror(errno));
        return -1;
    }
    export_writer *w = vfi_calloc(1, sizeof(*w));
    if (!w || !(w->out = vfi_strdup(out)) || !(w->index = vfi_json_new_array())) {
        writer_free(w);
        cli_printf(stderr, "vidfeat: export: out of memory\n");
        return -1;
    }
    w->dim = m->dim;
    w->windows = m->frames > 0;
    w->n_npy = w->windows ? 3 : 2;
    *pw = w;
    return 0;
}

static char *join(const char *dir, const char *name, const char *suffix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = vfi_malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

static int npy_begin(export_writer *w, const export_video *v)
{
    static const char *const suffix[NPY_FILES] = {".npy", "_t.npy", "_t_end.npy"};
    const char *f8 = little_endian() ? "<f8" : ">f8";
    const char *descr[NPY_FILES] = {little_endian() ? "<f4" : ">f4", f8, f8};
    for (int i = 0; i < w->n_npy; i++) {
        char tmp_suffix[32];
        snprintf(tmp_suffix, sizeof(tmp_suffix), "%s.part", suffix[i]);
        vfi_free(w->vec_path[i]);
        vfi_free(w->real_path[i]);
        w->vec_path[i] = join(w->out, v->name, tmp_suffix);
        w->real_path[i] = join(w->out, v->name, suffix[i]);
        if (!w->vec_path[i] || !w->real_path[i]) {
            cli_printf(stderr, "vidfeat: export: out of memory\n");
            return -1;
        }
        if (!(w->npy[i] = vfi_fopen_new(w->vec_path[i], "wb")) ||
            export_npy_header(w->npy[i], descr[i], v->frames, i == 0 ? w->dim : 0) < 0) {
            cli_printf(stderr, "vidfeat: %s: %s\n", w->vec_path[i], strerror(errno));
            return -1;
        }
    }
    vf_json *e = vfi_json_new_object();
    int bad = !e;
    bad |= vfi_json_add_str(e, "name", v->name) < 0;
    bad |= vfi_json_add_str(e, "path", v->path) < 0;
    bad |= vfi_json_add_str(e, "sampling", v->sampling) < 0;
    bad |= vfi_json_add_int(e, "frames", v->frames) < 0;
    if (v->n_shots) { /* [first frame, last frame, start, end] each */
        vf_json *shots = vfi_json_new_array();
        bad |= !shots || vfi_json_add(e, "shots", shots) < 0;
        for (int i = 0; !bad && i < v->n_shots; i++) {
            vf_json *one = vfi_json_new_array();
            bad |= !one || vfi_json_push(shots, one) < 0;
            bad |= !bad && (vfi_json_push_int(one, v->shots[i].first_frame) < 0 ||
                            vfi_json_push_int(one, v->shots[i].last_frame) < 0 ||
                            vfi_json_push_real(one, v->shots[i].start, 9) < 0 ||
                            vfi_json_push_real(one, v->shots[i].end, 9) < 0);
        }
    }
    if (bad || vfi_json_push(w->index, e) < 0) {
        cli_printf(stderr, "vidfeat: export: out of memory\n");
        return -1;
    }
    return 0;
}

static int npy_rows(export_writer *w, const export_video *v, int n, const int64_t *frame_index,
                    const double *t, const double *t_end, const float *vecs)
{
    (void)v;
    (void)frame_index;
    const void *data[NPY_FILES] = {vecs, t, t_end};
    size_t size[NPY_FILES] = {sizeof(float) * (size_t)w->dim, sizeof(double), sizeof(double)};
    for (int i = 0; i < w->n_npy; i++) {
        if (fwrite(data[i], size[i], (size_t)n, w->npy[i]) != (size_t)n) {
            cli_printf(stderr, "vidfeat: %s: %s\n", w->vec_path[i], strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Close the file being written; whole (ok): under its real name, else removed. */
static int finish_file(FILE **f, const char *tmp, const char *real, int ok)
{
    if (!*f)
        return 0;
    int bad = ferror(*f) | (fclose(*f) != 0);
    *f = NULL;
    if (ok && !bad && rename(tmp, real) == 0)
        return 0;
    if (ok)
        cli_printf(stderr, "vidfeat: %s: %s\n", real, strerror(errno ? errno : EIO));
    unlink(tmp);
    return -1;
}

static int npy_end(export_writer *w, const export_video *v)
{
    (void)v;
    int rc = 0;
    for (int i = 0; i < w->n_npy; i++)
        rc |= finish_file(&w->npy[i], w->vec_path[i], w->real_path[i], rc == 0);
    return rc ? -1 : 0;
}

static int npy_close(export_writer *w, int ok)
{
    for (int i = 0; i < w->n_npy; i++)
        finish_file(&w->npy[i], w->vec_path[i], w->real_path[i], 0);
    int rc = 0;
    if (ok) {
        char *tmp = join(w->out, "index.json", ".part"), *real = join(w->out, "index.json", "");
        FILE *f = tmp ? vfi_fopen_new(tmp, "w") : NULL;
        if (!f || vfi_json_write(f, w->index, 2) < 0) {
            cli_printf(stderr, "vidfeat: %s: %s\n", tmp ? tmp : "index.json", strerror(errno));
            rc = -1;
        }
        if (f)
            rc |= finish_file(&f, tmp, real, rc == 0);
        vfi_free(tmp);
        vfi_free(real);
    }
    writer_free(w);
    return rc;
}

const export_ops export_npy = {"npy", npy_open, npy_begin, npy_rows, npy_end, npy_close};

/* ---- csv ------------------------------------------------------------------------------------ */

/* RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int csv_open(export_writer **pw, const char *out, const vf_db_model *m, const char *db)
{
    (void)db;
    export_writer *w = vfi_calloc(1, sizeof(*w));
    if (!w || !(w->out = vfi_strdup(out))) {
        writer_free(w);
        cli_printf(stderr, "vidfeat: export: out of memory\n");
        return -1;
    }
    w->dim = m->dim;
    w->windows = m->frames > 0;
    w->to_stdout = !strcmp(out, "-");
    if (w->to_stdout) {
        w->f = stdout;
    } else {
        size_t n = strlen(out) + 8;
        if ((w->tmp = vfi_malloc(n)))
            snprintf(w->tmp, n, "%s.part", out);
        if (!w->tmp || !(w->f = vfi_fopen_new(w->tmp, "w"))) {
            cli_printf(stderr, "vidfeat: %s: %s\n", out,
                       w->tmp ? strerror(errno) : "out of memory");
            writer_free(w);
            return -1;
        }
    }
    fputs(w->windows ? "path,sampling,frame_index,t,t_end" : "path,sampling,frame_index,t", w->f);
    for (int i = 0; i < m->dim; i++)
        fprintf(w->f, ",f%d", i);
    fputc('\n', w->f);
    *pw = w;
    return 0;
}

static int csv_begin(export_writer *w, const export_video *v)
{
    (void)w;
    (void)v;
    return 0;
}

static int csv_rows(export_writer *w, const export_video *v, int n, const int64_t *frame_index,
                    const double *t, const double *t_end, const float *vecs)
{
    for (int r = 0; r < n; r++) {
        csv_field(w->f, v->path);
        fputc(',', w->f);
        csv_field(w->f, v->sampling);
        fprintf(w->f, ",%lld,%.17g", (long long)frame_index[r], t[r]);
        if (w->windows)
            fprintf(w->f, ",%.17g", t_end[r]);
        for (int i = 0; i < w->dim; i++) /* 9 digits: every float32 reads back exactly */
            fprintf(w->f, ",%.9g", (double)vecs[(size_t)r * (size_t)w->dim + (size_t)i]);
        fputc('\n', w->f);
    }
    if (ferror(w->f)) {
        cli_printf(stderr, "vidfeat: %s: %s\n", w->out, strerror(errno));
        return -1;
    }
    return 0;
}

static int csv_close(export_writer *w, int ok)
{
    int rc = 0;
    if (w->to_stdout)
        rc = fflush(stdout) != 0 || ferror(stdout) ? -1 : 0;
    else
        rc = finish_file(&w->f, w->tmp, w->out, ok);
    writer_free(w);
    return rc;
}

const export_ops export_csv = {"csv", csv_open, csv_begin, csv_rows, csv_begin, csv_close};

/* ---- the command ---------------------------------------------------------------------------- */

/* What reading the database hands over, gathered into chunks for the writer. */
typedef struct export_run {
    const export_ops *ops;
    export_writer *w;
    const char *out, *db;
    vf_strmap *used;
    int dim, failed;
    char name[256];
    char *path, *sampling;
    int64_t left; /* vectors of the current file still to come */
    export_video video;
    int n;
    int64_t frame_index[CHUNK];
    double t[CHUNK], t_end[CHUNK];
    float *vecs; /* CHUNK x dim */
    int64_t files, vectors;
} export_run;

static int on_model(void *user, const vf_db_model *m)
{
    export_run *r = user;
    r->dim = m->dim;
    if (!(r->vecs = vfi_mallocarray((size_t)CHUNK * (size_t)m->dim, sizeof(float)))) {
        cli_printf(stderr, "vidfeat: export: out of memory\n");
        return 1;
    }
    if (r->ops->open(&r->w, r->out, m, r->db) < 0)
        return 1;
    if (m->f16)
        cli_printf(stderr, "vidfeat: %s: the vectors were stored as float16; written as float32\n",
                   r->db);
    return 0;
}

static int flush(export_run *r)
{
    int rc =
        r->n ? r->ops->rows(r->w, &r->video, r->n, r->frame_index, r->t, r->t_end, r->vecs) : 0;
    r->vectors += r->n;
    r->n = 0;
    return rc;
}

static int on_vector(void *user, const vf_db_vector *v)
{
    export_run *r = user;
    if (cli_interrupted())
        return 1;
    if (r->left == 0) { /* the first vector of a file */
        vfi_free(r->path);
        vfi_free(r->sampling);
        r->path = vfi_strdup(v->path);
        r->sampling = vfi_strdup(v->sampling);
        if (!r->path || !r->sampling || unique_name(v->path, r->used, r->name, sizeof(r->name))) {
            cli_printf(stderr, "vidfeat: export: out of memory\n");
            return 1;
        }
        r->video = (export_video){r->name, r->path, r->sampling, v->frames, v->shots, v->n_shots};
        r->left = v->frames;
        if (r->ops->begin(r->w, &r->video) < 0)
            return 1;
        r->video.shots = NULL; /* v's, gone after this call */
        r->video.n_shots = 0;
        r->files++;
    }
    r->frame_index[r->n] = v->frame_index;
    r->t[r->n] = v->t;
    r->t_end[r->n] = v->t_end;
    memcpy(r->vecs + (size_t)r->n * (size_t)r->dim, v->vec, sizeof(float) * (size_t)r->dim);
    r->n++;
    r->left--;
    if ((r->n == CHUNK || r->left == 0) && flush(r) < 0)
        return 1;
    if (r->left == 0 && r->ops->end(r->w, &r->video) < 0)
        return 1;
    return 0;
}

/* The format --format names, else the one -o's extension suggests, else npy. */
static const export_ops *choose_format(const char *format, const char *out)
{
    static const export_ops *const all[] = {&export_npy, &export_hdf5, &export_csv};
    if (format) {
        if (!strcmp(format, "h5"))
            format = "hdf5";
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
            if (!strcmp(format, all[i]->format))
                return all[i];
        return NULL;
    }
    const char *dot = out ? strrchr(out, '.') : NULL;
    if (dot && (!strcmp(dot, ".h5") || !strcmp(dot, ".hdf5")))
        return &export_hdf5;
    if (dot && !strcmp(dot, ".csv"))
        return &export_csv;
    return &export_npy;
}

/* npy: DB's name without its extension + "_npy" (a directory); hdf5: + ".h5"; csv: stdout. */
static char *default_output(const char *db, const export_ops *ops)
{
    if (ops == &export_csv)
        return vfi_strdup("-");
    size_t len;
    const char *base = stem(strstr(db, "://") ? "vidfeat" : db, &len);
    const char *suffix = ops == &export_npy ? "_npy" : ".h5";
    char *out = vfi_malloc(len + 8);
    if (out)
        snprintf(out, len + 8, "%.*s%s", (int)len, base, suffix);
    return out;
}

int cmd_export(cli *c, int argc, char **argv)
{
    if (argc != 1) {
        cli_printf(stderr, "vidfeat: export: expected one database (see vidfeat export --help)\n");
        return EXIT_USAGE;
    }
    const export_ops *ops = choose_format(c->format, c->output);
    if (!ops) {
        cli_printf(stderr, "vidfeat: --format: expected npy, hdf5 or csv, not '%s'\n", c->format);
        return EXIT_USAGE;
    }
    if (!cli_db_exists(argv[0]))
        return EXIT_START;
    char *out = c->output ? vfi_strdup(c->output) : default_output(argv[0], ops);
    export_run r = {.ops = ops, .out = out, .db = argv[0]};
    int status = EXIT_OK;
    if (!out || vfi_strmap_create(&r.used) < 0) {
        cli_printf(stderr, "vidfeat: export: out of memory\n");
        vfi_free(out);
        return EXIT_FAIL;
    }
    cli_catch_interrupts();

    vf_config cfg = c->cfg;
    if (!c->model_set)
        cfg.model = NULL; /* any model: the database's, when it holds one */
    char err[1024] = "";
    vf_status rc = vf_db_read_vectors(argv[0], &cfg, on_model, on_vector, &r, err, sizeof(err));
    if (rc < 0 && rc != VF_ERR_CANCELLED)
        cli_printf(stderr, "vidfeat: %s\n", err);
    int ok = rc >= 0 && r.left == 0;
    if (r.w && ops->close(r.w, ok) < 0)
        ok = 0;
    if (cli_interrupted())
        status = EXIT_INTERRUPTED;
    else if (!r.w && rc < 0 && rc != VF_ERR_CANCELLED)
        status = EXIT_START; /* the database could not be read, or holds nothing to export */
    else if (!ok)
        status = EXIT_FAIL;
    if (status == EXIT_OK && c->verbosity >= 0 && strcmp(out, "-"))
        cli_printf(stderr, "vidfeat: %lld vector%s of %lld file%s written to %s (%s)\n",
                   (long long)r.vectors, cli_s(r.vectors), (long long)r.files, cli_s(r.files), out,
                   ops->format);
    vfi_free(r.vecs);
    vfi_free(r.path);
    vfi_free(r.sampling);
    vfi_strmap_free(&r.used);
    vfi_free(out);
    return status;
}
