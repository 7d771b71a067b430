/*
 * onnx_node.c - the node being converted, as operator handlers see it (onnx_handlers.h): its inputs
 * (initializers decoded into graph constants when first used, external data read from inside the
 * model's directory only), attributes, outputs, node-named failures, and adding graph nodes and
 * constants. Every handler is on this API; only this file and onnx.c see protobuf-c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/half.h"
#include "core/mem.h"
#include "core/path.h"
#include "engine/onnx_loader.h"

/* ---- small helpers --------------------------------------------------------------------------- */

const char *vfi_onnx_node_label(const loader *L)
{
    const Onnx__NodeProto *n = L->node;
    if (!n)
        return "?";
    if (n->name && *n->name)
        return n->name;
    return n->n_output > 0 && n->output[0] ? n->output[0] : "?";
}

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++) {
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    }
    return NULL;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = find_attr(n, name);
    return a && a->has_i ? a->i : def;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float def)
{
    const Onnx__AttributeProto *a = find_attr(n, name);
    return a && a->has_f ? a->f : def;
}

/* Copy an ints attribute into out[max]; returns the count, -1 if absent, -2 if too long. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = find_attr(n, name);
    if (!a)
        return -1;
    if (a->n_ints > (size_t)max)
        return -2;
    for (size_t i = 0; i < a->n_ints; i++)
        out[i] = a->ints[i];
    return (int)a->n_ints;
}

static int attr_str_is(const Onnx__NodeProto *n, const char *name, const char *value, int def_match)
{
    const Onnx__AttributeProto *a = find_attr(n, name);
    if (!a || !a->has_s)
        return def_match;
    size_t len = strlen(value);
    return a->s.len == len && memcmp(a->s.data, value, len) == 0;
}

/* Add a constant; on failure the data is freed here. */
static vf_status add_const(loader *L, const char *name, vf_dtype dtype, int rank,
                           const int64_t *dims, void *data, int *out)
{
    vf_status rc = vfi_graph_add_const(L->g, name, dtype, rank, dims, data, out, L->err);
    if (rc < 0)
        vfi_free(data);
    return rc;
}

/* Allocate a constant buffer of numel elements; dims already checked by the caller. */
static void *alloc_elems(int64_t numel, vf_dtype dtype)
{
    if (numel < 0 || numel > VF_MAX_NUMEL)
        return NULL;
    return vfi_aligned_alloc(VF_TENSOR_ALIGN, (size_t)(numel ? numel : 1) * vfi_dtype_size(dtype));
}

/* ---- external data --------------------------------------------------------------------------- */

/*
 * Open an external data file: a regular file inside the model's directory (what it resolves to,
 * links in its path included; a link as the file itself is refused outright), at least `need`
 * bytes long - so a link to /etc/passwd, a FIFO (which would block reading) or /dev/zero (which
 * would read for ever) is one error naming it.
 */
static vf_status open_external(loader *L, const char *path, uint64_t need, const char *tensor,
                               FILE **out)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return vfi_fail(L->err, VF_ERR_MODEL,
                        "%s: a symbolic link: external data must be a regular file in the model's "
                        "directory (external data of '%s')",
                        path, tensor);
    /* opened inside the model's directory following no link (path.h), so the file checked is
     * the one read, whatever is swapped into its name meanwhile */
    vf_archive dir;
    int fd = -1, inside = -1;
    if (vfi_archive_init(&dir, L->base_dir, 0, L->err) < 0)
        return VF_ERR_NOMEM;
    inside = vfi_archive_open(&dir, path, O_RDONLY | O_NONBLOCK, &fd);
    int e = errno;
    vfi_archive_clear(&dir);
    if (inside == 0 || (inside < 0 && e == ELOOP))
        return vfi_fail(L->err, VF_ERR_MODEL,
                        "%s: leaves the model's directory through a link (external data of '%s')",
                        path, tensor);
    if (inside < 0)
        return vfi_fail(L->err, e == ENOMEM ? VF_ERR_NOMEM : VF_ERR_IO,
                        "%s: %s (external data of '%s')", path, strerror(e), tensor);
    vf_status rc = VF_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = vfi_fail(L->err, VF_ERR_MODEL, "%s: not a regular file (external data of '%s')", path,
                      tensor);
    else if ((uint64_t)st.st_size < need)
        rc = vfi_fail(L->err, VF_ERR_MODEL, "%s: %lld bytes, shorter than the %llu that '%s' needs",
                      path, (long long)st.st_size, (unsigned long long)need, tensor);
    else if (!(*out = fdopen(fd, "rb")))
        rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory reading '%s'", path);
    if (rc < 0)
        close(fd);
    return rc;
}

static vf_status read_external(loader *L, const Onnx__TensorProto *t, size_t want, void **out)
{
    const char *location = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value)
            continue;
        if (strcmp(e->key, "location") == 0)
            location = e->value;
        else if (strcmp(e->key, "offset") == 0)
            offset = strtoll(e->value, NULL, 10);
        else if (strcmp(e->key, "length") == 0)
            length = strtoll(e->value, NULL, 10);
    }
    if (!location || !*location)
        return vfi_fail(L->err, VF_ERR_MODEL, "initializer '%s': external data without a location",
                        t->name);
    if (!L->base_dir)
        return vfi_fail(L->err, VF_ERR_MODEL, "initializer '%s': external data is not allowed here",
                        t->name);
    if (location[0] == '/' || strstr(location, ".."))
        return vfi_fail(L->err, VF_ERR_MODEL,
                        "initializer '%s': external data location '%s' leaves the model's "
                        "directory",
                        t->name, location);
    if (offset < 0 || (length >= 0 && (size_t)length != want))
        return vfi_fail(L->err, VF_ERR_MODEL,
                        "initializer '%s': external data offset/length do not match its shape",
                        t->name);
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", L->base_dir, location) >= (int)sizeof(path))
        return vfi_fail(L->err, VF_ERR_MODEL, "initializer '%s': path too long", t->name);
    FILE *f = NULL;
    vf_status rc = open_external(L, path, (uint64_t)offset + want, t->name, &f);
    if (rc < 0)
        return rc;
    void *buf = vfi_aligned_alloc(VF_TENSOR_ALIGN, want ? want : 1);
    if (!buf) {
        rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory reading '%s'", path);
    } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(buf, 1, want, f) != want) {
        rc = vfi_fail(L->err, VF_ERR_MODEL,
                      "%s: shorter than the %zu bytes at offset %lld that "
                      "'%s' needs",
                      path, want, offset, t->name);
    }
    fclose(f);
    if (rc < 0) {
        vfi_free(buf);
        return rc;
    }
    *out = buf;
    return VF_OK;
}

/* ---- initializers ---------------------------------------------------------------------------- */

/* Bytes an element of ONNX data type dt takes in raw data; 0 for a type not read here. */
static size_t elem_size(int dt)
{
    switch (dt) {
    case VF_ONNX_DT_FLOAT:
    case VF_ONNX_DT_INT32:
        return 4;
    case VF_ONNX_DT_INT64:
    case VF_ONNX_DT_DOUBLE:
        return 8;
    case VF_ONNX_DT_FLOAT16:
        return 2;
    case VF_ONNX_DT_UINT8:
    case VF_ONNX_DT_INT8:
    case VF_ONNX_DT_BOOL:
        return 1;
    default:
        return 0;
    }
}

/* n elements of type dt from raw bytes (elem_size each, little-endian) into data: float32 for
 * the floating types, int64 for the others. */
static void from_bytes(int dt, const uint8_t *raw, int64_t n, void *data)
{
    float *f = data;
    int64_t *q = data;
    size_t in_size = elem_size(dt);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *src = raw + (size_t)i * in_size;
        switch (dt) {
        case VF_ONNX_DT_FLOAT:
            memcpy(&f[i], src, 4);
            break;
        case VF_ONNX_DT_DOUBLE: {
            double d;
            memcpy(&d, src, 8);
            f[i] = (float)d;
            break;
        }
        case VF_ONNX_DT_FLOAT16: {
            uint16_t h;
            memcpy(&h, src, 2);
            f[i] = vfi_f16_to_f32(h);
            break;
        }
        case VF_ONNX_DT_INT64:
            memcpy(&q[i], src, 8);
            break;
        case VF_ONNX_DT_INT32: {
            int32_t v;
            memcpy(&v, src, 4);
            q[i] = v;
            break;
        }
        case VF_ONNX_DT_INT8:
            q[i] = (int8_t)src[0];
            break;
        default:
            q[i] = src[0];
            break;
        }
    }
}

/* The same from the message's typed fields (counted against n by the caller). */
static void from_typed(int dt, const Onnx__TensorProto *t, int64_t n, void *data)
{
    float *f = data;
    int64_t *q = data;
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case VF_ONNX_DT_FLOAT:
            f[i] = t->float_data[i];
            break;
        case VF_ONNX_DT_DOUBLE:
            f[i] = (float)t->double_data[i];
            break;
        case VF_ONNX_DT_FLOAT16:
            f[i] = vfi_f16_to_f32((uint16_t)t->int32_data[i]);
            break;
        case VF_ONNX_DT_INT64:
            q[i] = t->int64_data[i];
            break;
        default:
            q[i] = t->int32_data[i];
            break;
        }
    }
}

/* Decode a TensorProto into a new buffer (float32 or int64) with its rank and dims. A FLOAT
 * tensor's raw bytes are taken over from the message instead of copied. `name` is for messages. */
static vf_status tensor_decode(loader *L, Onnx__TensorProto *t, const char *name,
                               vf_dtype *dtype_out, int *rank_out, int64_t *dims, void **data_out)
{
    if (t->n_dims > VF_MAX_DIMS)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "tensor '%s' has rank %zu", name, t->n_dims);
    int rank = (int)t->n_dims;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        dims[i] = t->dims[i];
        if (dims[i] < 0 || dims[i] > VF_MAX_DIM || (dims[i] && n > VF_MAX_NUMEL / dims[i]))
            return vfi_fail(L->err, VF_ERR_MODEL, "tensor '%s' has invalid dimensions", name);
        n *= dims[i];
    }
    int dt = t->has_data_type ? t->data_type : 0;
    size_t in_size = elem_size(dt);
    if (!in_size)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "tensor '%s' has unsupported data type %d",
                        name, dt);
    vf_dtype dtype = (dt == VF_ONNX_DT_FLOAT || dt == VF_ONNX_DT_FLOAT16 || dt == VF_ONNX_DT_DOUBLE)
                         ? VF_DTYPE_F32
                         : VF_DTYPE_I64;
    size_t want = (size_t)n * in_size;
    *dtype_out = dtype;
    *rank_out = rank;
    int external =
        t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;

    /* Fast path: FLOAT raw bytes become the constant's storage without a copy. */
    if (dt == VF_ONNX_DT_FLOAT && !external && t->has_raw_data && t->raw_data.len == want && want &&
        ((uintptr_t)t->raw_data.data % 4) == 0) {
        *data_out = t->raw_data.data;
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
        t->has_raw_data = 0;
        return VF_OK;
    }

    void *owned = NULL;
    const uint8_t *raw = NULL;
    vf_status rc;
    if (external) {
        rc = read_external(L, t, want, &owned);
        if (rc < 0)
            return rc;
        raw = owned;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != want)
            return vfi_fail(L->err, VF_ERR_MODEL,
                            "tensor '%s': %zu bytes of data for %lld elements of %zu bytes", name,
                            t->raw_data.len, (long long)n, in_size);
        raw = t->raw_data.data;
    }

    /* Typed values are counted before anything is allocated: a declared shape alone must
     * not make the loader ask for gigabytes. */
    if (!raw) {
        size_t have = dt == VF_ONNX_DT_FLOAT    ? t->n_float_data
                      : dt == VF_ONNX_DT_DOUBLE ? t->n_double_data
                      : dt == VF_ONNX_DT_INT64  ? t->n_int64_data
                                                : t->n_int32_data;
        if (have != (size_t)n)
            return vfi_fail(L->err, VF_ERR_MODEL,
                            "tensor '%s': %zu values stored for %lld elements", name, have,
                            (long long)n);
    }
    void *data = alloc_elems(n, dtype);
    if (!data) {
        vfi_free(owned);
        return vfi_fail(L->err, VF_ERR_NOMEM, "out of memory for tensor '%s'", name);
    }
    if (raw)
        from_bytes(dt, raw, n, data);
    else
        from_typed(dt, t, n, data);
    vfi_free(owned);
    *data_out = data;
    return VF_OK;
}

/* Convert a TensorProto into a graph constant named `name`. */
static vf_status tensor_to_const(loader *L, Onnx__TensorProto *t, const char *name, int *out)
{
    int64_t dims[VF_MAX_DIMS];
    vf_dtype dtype = VF_DTYPE_F32;
    int rank = 0;
    void *data = NULL;
    vf_status rc = tensor_decode(L, t, name, &dtype, &rank, dims, &data);
    if (rc < 0)
        return rc;
    return add_const(L, name, dtype, rank, dims, data, out);
}

/* Resolve a node input name to a value index; -1 for an absent optional input. */
static vf_status get_value(loader *L, const char *name, int *out)
{
    *out = -1;
    if (!name || !*name)
        return VF_OK;
    int idx = vfi_graph_find(L->g, name);
    if (idx >= 0) {
        *out = idx;
        return VF_OK;
    }
    int ii = vfi_strmap_get(L->inits, name, -1);
    if (ii >= 0)
        return tensor_to_const(L, L->gp->initializer[ii], name, out);
    if (L->ramp_names && vfi_strmap_get(L->ramp_names, name, -1) >= 0)
        return NFAIL(L, VF_ERR_UNSUPPORTED,
                     "'%s' numbers the images of the batch (a Range over the batch size), "
                     "which is only taken as x[arange(N), k] (each image's row k)",
                     name);
    return NFAIL(L, VF_ERR_MODEL, "input '%s' is not defined", name);
}

static vf_status input_at(loader *L, size_t i, int *out)
{
    *out = -1;
    if (i >= L->node->n_input)
        return VF_OK;
    return get_value(L, L->node->input[i], out);
}

static vf_value *val(loader *L, int idx)
{
    return &L->g->values[idx];
}

/* A required constant input of the given dtype. */
static vf_status const_input(loader *L, size_t i, vf_dtype dtype, const vf_value **out)
{
    int idx;
    vf_status rc = input_at(L, i, &idx);
    if (rc < 0)
        return rc;
    if (idx < 0)
        return NFAIL(L, VF_ERR_MODEL, "input %zu is missing", i);
    const vf_value *v = val(L, idx);
    if (!v->data)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "input '%s' must be a constant", v->name);
    if (v->dtype != dtype)
        return NFAIL(L, VF_ERR_MODEL, "input '%s' has the wrong type", v->name);
    *out = v;
    return VF_OK;
}

/* Read a constant int64 list (for shapes, axes, pads). */
static vf_status const_ints(loader *L, size_t i, int64_t *out, int max, int *n)
{
    const vf_value *v;
    vf_status rc = const_input(L, i, VF_DTYPE_I64, &v);
    if (rc < 0)
        return rc;
    int64_t count = vfi_value_numel(v);
    if (v->rank > 1 || count > max)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "'%s' has %lld entries (at most %d)", v->name,
                     (long long)count, max);
    memcpy(out, v->data, (size_t)count * sizeof(int64_t));
    *n = (int)count;
    return VF_OK;
}

static vf_status normalize_axis(loader *L, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return NFAIL(L, VF_ERR_MODEL, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return VF_OK;
}

/* ---- the API of operator handlers (onnx_handlers.h)
 * ------------------------------------------------
 */

int64_t vfi_onnx_opset(const vfi_onnx_loader *L)
{
    return L->opset;
}

size_t vfi_onnx_n_inputs(const vfi_onnx_loader *L)
{
    return L->node->n_input;
}

size_t vfi_onnx_n_outputs(const vfi_onnx_loader *L)
{
    return L->node->n_output;
}

const char *vfi_onnx_output_name(const vfi_onnx_loader *L, size_t i)
{
    return i < L->node->n_output && L->node->output[i] ? L->node->output[i] : "";
}

vf_status vfi_onnx_input(vfi_onnx_loader *L, size_t i, int *out)
{
    return input_at(L, i, out);
}

vf_value *vfi_onnx_value(vfi_onnx_loader *L, int idx)
{
    return val(L, idx);
}

int64_t vfi_onnx_attr_int(const vfi_onnx_loader *L, const char *name, int64_t def)
{
    return attr_int(L->node, name, def);
}

float vfi_onnx_attr_float(const vfi_onnx_loader *L, const char *name, float def)
{
    return attr_float(L->node, name, def);
}

int vfi_onnx_attr_ints(const vfi_onnx_loader *L, const char *name, int64_t *out, int max)
{
    return attr_ints(L->node, name, out, max);
}

vf_status vfi_onnx_const_ints(vfi_onnx_loader *L, size_t i, int64_t *out, int max, int *n)
{
    return const_ints(L, i, out, max, n);
}

vf_status vfi_onnx_axis(vfi_onnx_loader *L, int64_t axis, int rank, int *out)
{
    return normalize_axis(L, axis, rank, out);
}

vf_status vfi_onnx_fail(vfi_onnx_loader *L, vf_status code, const char *fmt, ...)
{
    char detail[VF_ERRMSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return NFAIL(L, code, "%s", detail);
}

vf_status vfi_onnx_add_node(vfi_onnx_loader *L, vf_op op, const int *inputs, int n_inputs,
                            const void *params, size_t out)
{
    const char *name = vfi_onnx_output_name(L, out);
    if (!*name)
        return NFAIL(L, VF_ERR_MODEL, "output %zu has no name", out);
    int idx;
    vf_status rc = vfi_graph_add_node(L->g, op, vfi_onnx_node_label(L), inputs, n_inputs, params,
                                      name, &idx, L->err);
    const vf_op_desc *d = vfi_op_desc(op);
    if (rc < 0 && d && (d->flags & VF_OPF_OWNS_INDICES) && vfi_graph_find(L->g, name) < 0)
        vfi_free(((const vf_gather_params *)params)->indices); /* the node was not made */
    return rc;
}

vf_status vfi_onnx_add_const(vfi_onnx_loader *L, size_t out, vf_dtype dtype, int rank,
                             const int64_t *dims, void *data)
{
    const char *name = vfi_onnx_output_name(L, out);
    if (!*name) {
        vfi_free(data);
        return NFAIL(L, VF_ERR_MODEL, "output %zu has no name", out);
    }
    int idx;
    return add_const(L, name, dtype, rank, dims, data, &idx);
}

const vf_onnx_ramp *vfi_onnx_ramp_input(vfi_onnx_loader *L, size_t i)
{
    if (!L->ramp_names || i >= L->node->n_input || !L->node->input[i])
        return NULL;
    int k = vfi_strmap_get(L->ramp_names, L->node->input[i], -1);
    return k >= 0 ? &L->ramps[k] : NULL;
}

vf_status vfi_onnx_add_ramp(vfi_onnx_loader *L, size_t out, vf_onnx_ramp r)
{
    const char *name = vfi_onnx_output_name(L, out);
    if (!*name)
        return NFAIL(L, VF_ERR_MODEL, "output %zu has no name", out);
    if (vfi_graph_find(L->g, name) >= 0 || vfi_strmap_get(L->inits, name, -1) >= 0)
        return NFAIL(L, VF_ERR_MODEL, "'%s' is defined twice", name);
    if (!L->ramp_names && vfi_strmap_create(&L->ramp_names) < 0)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    vf_onnx_ramp *grown = vfi_grow(L->ramps, &L->cap_ramps, L->n_ramps + 1, sizeof(*grown));
    if (!grown)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    L->ramps = grown;
    vf_status rc = vfi_strmap_put(L->ramp_names, name, L->n_ramps);
    if (rc == VF_ERR_INVALID)
        return NFAIL(L, VF_ERR_MODEL, "'%s' is defined twice", name);
    if (rc < 0)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    L->ramps[L->n_ramps++] = r;
    return VF_OK;
}

vf_status vfi_onnx_add_named_const(vfi_onnx_loader *L, const char *suffix, vf_dtype dtype, int rank,
                                   const int64_t *dims, void *data, int *out)
{
    char name[600];
    snprintf(name, sizeof(name), "%s/%s", vfi_onnx_output_name(L, 0), suffix);
    return add_const(L, name, dtype, rank, dims, data, out);
}

vf_status vfi_onnx_const_input(vfi_onnx_loader *L, size_t i, vf_dtype dtype, const vf_value **out)
{
    return const_input(L, i, dtype, out);
}

int vfi_onnx_attr_str_is(const vfi_onnx_loader *L, const char *name, const char *value,
                         int def_match)
{
    return attr_str_is(L->node, name, value, def_match);
}

vf_status vfi_onnx_add_alias(vfi_onnx_loader *L, size_t out, int idx)
{
    const char *name = vfi_onnx_output_name(L, out);
    if (!*name)
        return NFAIL(L, VF_ERR_MODEL, "output %zu has no name", out);
    return vfi_graph_add_alias(L->g, name, idx, L->err);
}

int vfi_onnx_has_input(const vfi_onnx_loader *L, size_t i)
{
    return i < L->node->n_input && L->node->input[i] && *L->node->input[i];
}

const char *vfi_onnx_op_type(const vfi_onnx_loader *L)
{
    return L->node->op_type ? L->node->op_type : "";
}

void *vfi_onnx_alloc(int64_t numel, vf_dtype dtype)
{
    return alloc_elems(numel, dtype);
}

vf_status vfi_onnx_add_named_node(vfi_onnx_loader *L, vf_op op, const char *suffix,
                                  const int *inputs, int n_inputs, const void *params, int *out)
{
    char name[600];
    snprintf(name, sizeof(name), "%s/%s", vfi_onnx_output_name(L, 0), suffix);
    return vfi_graph_add_node(L->g, op, name, inputs, n_inputs, params, name, out, L->err);
}

vf_status vfi_onnx_attr_value(vfi_onnx_loader *L, const char *only, const char *label,
                              vf_dtype *dtype, int *rank, int64_t *dims, void **data)
{
    const Onnx__NodeProto *n = L->node;
    *data = NULL;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (!a->name || (only && strcmp(a->name, only) != 0))
            continue;
        if (strcmp(a->name, "value") == 0 && a->t)
            return tensor_decode(L, a->t, label, dtype, rank, dims, data);
        int is_float = strcmp(a->name, "value_float") == 0 && a->has_f;
        int is_int = strcmp(a->name, "value_int") == 0 && a->has_i;
        int is_floats = strcmp(a->name, "value_floats") == 0;
        int is_ints = strcmp(a->name, "value_ints") == 0;
        if (!(is_float || is_int || is_floats || is_ints))
            continue;
        int64_t cnt = is_floats ? (int64_t)a->n_floats : is_ints ? (int64_t)a->n_ints : 1;
        vf_dtype dt = (is_float || is_floats) ? VF_DTYPE_F32 : VF_DTYPE_I64;
        void *d = alloc_elems(cnt, dt);
        if (!d)
            return NFAIL(L, VF_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < cnt; k++) {
            if (dt == VF_DTYPE_F32)
                ((float *)d)[k] = is_floats ? a->floats[k] : a->f;
            else
                ((int64_t *)d)[k] = is_ints ? a->ints[k] : a->i;
        }
        *dtype = dt;
        *rank = (is_floats || is_ints) ? 1 : 0;
        dims[0] = cnt;
        *data = d;
        return VF_OK;
    }
    return VF_OK;
}
