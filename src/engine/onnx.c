/*
 * onnx.c - loads an ONNX model into a vf_graph. The only file that includes the protobuf-c code
 * generated from the system's onnx.proto. Single-threaded; owns nothing after it returns.
 *
 * Every byte of the file is untrusted. Before protobuf-c sees the file, a walk over the wire
 * format checks the framing and bounds message nesting (protobuf-c's own unpacker recurses
 * without limit). Afterwards every count, dimension, size and name is checked before it is used:
 * tensor sizes against VF_MAX_NUMEL, data lengths against the declared shape, names against the
 * values defined so far, and the node list is sorted topologically so cycles and dangling names
 * are reported rather than followed.
 *
 * Conversion walks the nodes in topological order. Shape arithmetic (Shape, Gather, Concat,
 * Unsqueeze, ... on constants) is evaluated here, with the batch size kept symbolic
 * (VF_DIM_BATCH), so that models exported with a fixed batch of 1, or computing a flatten from
 * x.size(0), run at any batch size. Identity and Dropout become aliases. Initializers are turned
 * into graph constants only when a node uses them; a FLOAT initializer's raw bytes are taken over
 * from the decoded message rather than copied.
 */
#include "engine/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/half.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "onnx.pb-c.h"
#include "core/strmap.h"
#include "engine/onnx_ops.h"

/* ONNX TensorProto.DataType values we read. */
enum {
    DT_FLOAT = 1,
    DT_UINT8 = 2,
    DT_INT8 = 3,
    DT_INT32 = 6,
    DT_INT64 = 7,
    DT_BOOL = 9,
    DT_FLOAT16 = 10,
    DT_DOUBLE = 11,
};

typedef struct loader {
    vf_graph *g;
    Onnx__GraphProto *gp;
    vf_strmap *inits;     /* initializer name -> index in gp->initializer */
    const char *base_dir; /* for external data; NULL: forbidden */
    int64_t opset;        /* default-domain opset version */
    int input_size;
    int64_t fixed_hw[2]; /* the file's fixed input plane when run at another size, else 0 */
    vf_err *err;
    const Onnx__NodeProto *node; /* the node being converted, for messages */
    vf_strmap *ramp_names;       /* numbers of the images (vf_onnx_ramp): name -> index */
    vf_onnx_ramp *ramps;
    int n_ramps, cap_ramps;
} loader;

/* ---- protobuf-c allocator through mem.c --------------------------------------------------- */

/* allocator_data points to an int set when an allocation fails, so that a failed unpack can be
 * told apart from a malformed file. */
static void *pb_alloc(void *data, size_t size)
{
    void *p = vfi_malloc(size);
    if (!p)
        *(int *)data = 1;
    return p;
}

static void pb_free(void *data, void *ptr)
{
    (void)data;
    vfi_free(ptr);
}

/* ---- wire-format pre-check ------------------------------------------------------------------- */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Walk one message's fields; descend into known sub-messages up to VF_ONNX_MAX_DEPTH. */
static vf_status check_wire(const uint8_t *p, const uint8_t *end,
                            const ProtobufCMessageDescriptor *desc, int depth, vf_err *err)
{
    if (depth > VF_ONNX_MAX_DEPTH)
        return vfi_fail(err, VF_ERR_MODEL, "messages nested deeper than %d levels",
                        VF_ONNX_MAX_DEPTH);
    while (p < end) {
        uint64_t tag, len;
        if (read_varint(&p, end, &tag) < 0)
            return vfi_fail(err, VF_ERR_MODEL, "truncated or malformed protobuf (bad tag)");
        unsigned field = (unsigned)(tag >> 3);
        switch (tag & 7) {
        case 0:
            if (read_varint(&p, end, &len) < 0)
                return vfi_fail(err, VF_ERR_MODEL, "truncated protobuf (varint)");
            break;
        case 1:
            if (end - p < 8)
                return vfi_fail(err, VF_ERR_MODEL, "truncated protobuf (fixed64)");
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return vfi_fail(err, VF_ERR_MODEL, "truncated protobuf (fixed32)");
            p += 4;
            break;
        case 2: {
            if (read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p))
                return vfi_fail(err, VF_ERR_MODEL,
                                "truncated protobuf: a field claims more bytes than the file has");
            const ProtobufCFieldDescriptor *f =
                desc ? protobuf_c_message_descriptor_get_field(desc, field) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                vf_status rc = check_wire(p, p + len, f->descriptor, depth + 1, err);
                if (rc < 0)
                    return rc;
            }
            p += len;
            break;
        }
        default:
            return vfi_fail(err, VF_ERR_MODEL, "malformed protobuf (wire type %u)",
                            (unsigned)(tag & 7));
        }
        if (field == 0)
            return vfi_fail(err, VF_ERR_MODEL, "malformed protobuf (field 0)");
    }
    return VF_OK;
}

/* ---- small helpers --------------------------------------------------------------------------- */

static const char *node_label(const loader *L)
{
    const Onnx__NodeProto *n = L->node;
    if (!n)
        return "?";
    if (n->name && *n->name)
        return n->name;
    return n->n_output > 0 && n->output[0] ? n->output[0] : "?";
}

#define NFAIL(L, code, fmt, ...)                                                                   \
    vfi_fail((L)->err, code, "node '%s' (%s): " fmt, node_label(L), (L)->node->op_type,            \
             ##__VA_ARGS__)

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
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return vfi_fail(L->err, errno == ELOOP ? VF_ERR_MODEL : VF_ERR_IO,
                        "%s: %s (external data of '%s')", path,
                        errno == ELOOP ? "a symbolic link: external data must be a regular file "
                                         "in the model's directory"
                                       : strerror(errno),
                        tensor);
    struct stat st;
    vf_archive dir;
    int inside = -1;
    if (vfi_archive_init(&dir, L->base_dir, 0, L->err) == VF_OK) {
        inside = vfi_archive_holds(&dir, path, NULL); /* links in its path resolved */
        vfi_archive_clear(&dir);
    }
    vf_status rc = VF_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = vfi_fail(L->err, VF_ERR_MODEL, "%s: not a regular file (external data of '%s')", path,
                      tensor);
    else if (inside <= 0)
        rc = vfi_fail(L->err, VF_ERR_MODEL,
                      "%s: leaves the model's directory through a link (external data of '%s')",
                      path, tensor);
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
    size_t in_size;
    switch (dt) {
    case DT_FLOAT:
    case DT_INT32:
        in_size = 4;
        break;
    case DT_INT64:
    case DT_DOUBLE:
        in_size = 8;
        break;
    case DT_FLOAT16:
        in_size = 2;
        break;
    case DT_UINT8:
    case DT_INT8:
    case DT_BOOL:
        in_size = 1;
        break;
    default:
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "tensor '%s' has unsupported data type %d",
                        name, dt);
    }
    vf_dtype dtype =
        (dt == DT_FLOAT || dt == DT_FLOAT16 || dt == DT_DOUBLE) ? VF_DTYPE_F32 : VF_DTYPE_I64;
    size_t want = (size_t)n * in_size;
    *dtype_out = dtype;
    *rank_out = rank;
    int external =
        t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;

    /* Fast path: FLOAT raw bytes become the constant's storage without a copy. */
    if (dt == DT_FLOAT && !external && t->has_raw_data && t->raw_data.len == want && want &&
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
    size_t have = 0;
    if (!raw) {
        switch (dt) {
        case DT_FLOAT:
            have = t->n_float_data;
            break;
        case DT_DOUBLE:
            have = t->n_double_data;
            break;
        case DT_INT64:
            have = t->n_int64_data;
            break;
        default:
            have = t->n_int32_data;
            break;
        }
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
    float *f = data;
    int64_t *q = data;
    for (int64_t i = 0; i < n; i++) {
        if (raw) {
            const uint8_t *src = raw + (size_t)i * in_size;
            switch (dt) {
            case DT_FLOAT:
                memcpy(&f[i], src, 4);
                break;
            case DT_DOUBLE: {
                double d;
                memcpy(&d, src, 8);
                f[i] = (float)d;
                break;
            }
            case DT_FLOAT16: {
                uint16_t h;
                memcpy(&h, src, 2);
                f[i] = vfi_f16_to_f32(h);
                break;
            }
            case DT_INT64:
                memcpy(&q[i], src, 8);
                break;
            case DT_INT32: {
                int32_t v;
                memcpy(&v, src, 4);
                q[i] = v;
                break;
            }
            case DT_INT8:
                q[i] = (int8_t)src[0];
                break;
            default:
                q[i] = src[0];
                break;
            }
        } else {
            switch (dt) {
            case DT_FLOAT:
                f[i] = t->float_data[i];
                break;
            case DT_DOUBLE:
                f[i] = (float)t->double_data[i];
                break;
            case DT_FLOAT16:
                f[i] = vfi_f16_to_f32((uint16_t)t->int32_data[i]);
                break;
            case DT_INT64:
                q[i] = t->int64_data[i];
                break;
            default:
                q[i] = t->int32_data[i];
                break;
            }
        }
    }
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

static const char *out_name(const loader *L)
{
    return L->node->n_output > 0 ? L->node->output[0] : NULL;
}

static vf_status normalize_axis(loader *L, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return NFAIL(L, VF_ERR_MODEL, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return VF_OK;
}

/* ---- node conversion ------------------------------------------------------------------------- */

static vf_status add_node(loader *L, vf_op op, const int *inputs, int n_inputs, const void *params)
{
    int out;
    return vfi_graph_add_node(L->g, op, node_label(L), inputs, n_inputs, params, out_name(L), &out,
                              L->err);
}

static vf_status act_node(loader *L, vf_act_kind kind, float alpha, float beta)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    vf_act a = {kind, alpha, beta};
    return add_node(L, VF_OP_ACT, &x, 1, &a);
}

static vf_status clip_node(loader *L)
{
    float lo = -FLT_MAX, hi = FLT_MAX;
    if (L->opset < 11) {
        lo = attr_float(L->node, "min", lo);
        hi = attr_float(L->node, "max", hi);
    } else {
        for (size_t i = 1; i < 3; i++) {
            int idx;
            vf_status rc = input_at(L, i, &idx);
            if (rc < 0)
                return rc;
            if (idx < 0)
                continue;
            const vf_value *v = val(L, idx);
            if (!v->data || v->dtype != VF_DTYPE_F32 || vfi_value_numel(v) != 1)
                return NFAIL(L, VF_ERR_UNSUPPORTED, "min/max must be constant scalars");
            *(i == 1 ? &lo : &hi) = *(const float *)v->data;
        }
    }
    if (lo == 0.0f && hi == FLT_MAX)
        return act_node(L, VF_ACT_RELU, 0.0f, 0.0f);
    return act_node(L, VF_ACT_CLIP, lo, hi);
}

static vf_status binary_node(loader *L, int op)
{
    if (vfi_onnx_ramp_input(L, 0) || vfi_onnx_ramp_input(L, 1))
        return vfi_onnx_ramp_binary(L, op == 'a'   ? VF_BIN_ADD
                                       : op == 's' ? VF_BIN_SUB
                                       : op == 'm' ? VF_BIN_MUL
                                                   : VF_BIN_DIV);
    int a, b;
    vf_status rc = input_at(L, 0, &a);
    if (rc >= 0)
        rc = input_at(L, 1, &b);
    if (rc < 0)
        return rc;
    if (a < 0 || b < 0)
        return NFAIL(L, VF_ERR_MODEL, "missing input");
    if (val(L, a)->data && val(L, b)->data)
        return vfi_onnx_fold_binary(L, val(L, a), val(L, b), op);
    static const vf_binary_kind kinds[128] = {
        ['a'] = VF_BIN_ADD, ['s'] = VF_BIN_SUB, ['m'] = VF_BIN_MUL, ['d'] = VF_BIN_DIV};
    vf_binary_kind kind = kinds[op];
    if (val(L, a)->data) {
        /* c - x and 1 / x of a scalar c: elementwise functions of x */
        const vf_value *av = val(L, a);
        float c =
            av->dtype == VF_DTYPE_F32 && vfi_value_numel(av) == 1 ? *(const float *)av->data : NAN;
        vf_act act = {kind == VF_BIN_SUB ? VF_ACT_LINEAR : VF_ACT_RECIPROCAL, -1.0f, c};
        if ((kind == VF_BIN_SUB && !isnan(c)) || (kind == VF_BIN_DIV && c == 1.0f))
            return add_node(L, VF_OP_ACT, &b, 1, &act);
        if (kind == VF_BIN_SUB || kind == VF_BIN_DIV)
            return NFAIL(L, VF_ERR_UNSUPPORTED, "a constant first operand");
        int t = a;
        a = b;
        b = t;
    }
    int in[2] = {a, b};
    return add_node(L, VF_OP_BINARY, in, 2, &kind);
}

/* Reshape of an activation to `target` resolved against the input (0: copy, -1: infer, an
 * element standing for a multiple of the batch: where the batch goes). The batch lands in the
 * entry standing for it; without one, in the -1 entry, or, where the images are outermost, in
 * the first entry (a file exported with a fixed batch of 1). The graph checks that the images
 * keep their place in memory. */
static vf_status reshape_to(loader *L, int x, int rank, const int64_t *target, int allow_zero)
{
    const vf_value *xv = val(L, x);
    if (rank < 1 || rank > VF_MAX_DIMS)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "reshape to rank %d", rank);
    vf_value t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    t.batch_axis = -1;
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        int64_t d = target[i], m = vfi_dim_batch_multiple(d);
        if (m) {
            if (t.batch_axis >= 0)
                return NFAIL(L, VF_ERR_UNSUPPORTED, "the batch size in two dimensions");
            t.batch_axis = i;
            d = m;
        } else if (d == 0 && !allow_zero) {
            if (i >= xv->rank)
                return NFAIL(L, VF_ERR_MODEL, "0 in shape beyond the input rank");
            d = xv->dims[i];
            if (i == xv->batch_axis) {
                if (t.batch_axis >= 0)
                    return NFAIL(L, VF_ERR_UNSUPPORTED, "the batch size in two dimensions");
                t.batch_axis = i;
            }
        } else if (d == -1) {
            if (infer_at >= 0)
                return NFAIL(L, VF_ERR_MODEL, "more than one -1 in shape");
            infer_at = i;
            continue;
        } else if (d < 1 || d > VF_MAX_DIM) {
            return NFAIL(L, VF_ERR_MODEL, "invalid shape entry %lld", (long long)d);
        }
        if (d > 0 && known > VF_MAX_NUMEL / d)
            return NFAIL(L, VF_ERR_MODEL, "shape of more than %lld elements",
                         (long long)VF_MAX_NUMEL);
        t.dims[i] = d;
        known *= d;
    }
    int64_t total = vfi_value_sample_numel(xv); /* per image */
    int first_is_batch = t.batch_axis < 0 && xv->batch_axis == 0 && xv->batch_outer == 1 &&
                         infer_at != 0 && target[0] == 1;
    if (infer_at >= 0) {
        if (known == 0 || total % known)
            return NFAIL(L, VF_ERR_MODEL, "cannot infer -1 in shape");
        t.dims[infer_at] = total / known;
        if (t.batch_axis < 0 && !first_is_batch)
            t.batch_axis = infer_at;
    }
    if (t.batch_axis < 0) {
        if (!first_is_batch)
            return NFAIL(L, VF_ERR_UNSUPPORTED,
                         "a fixed shape where the batch cannot be placed (a file traced with a "
                         "fixed batch: export it with a dynamic batch axis)");
        t.batch_axis = 0;
    }
    /* where the images sit in the batch's dimension: after as many entries as before */
    int64_t outer = vfi_value_outer_entries(xv), before = 1;
    for (int i = 0; i < t.batch_axis; i++)
        before *= t.dims[i];
    if (outer % before || t.dims[t.batch_axis] % (outer / before))
        return NFAIL(L, VF_ERR_UNSUPPORTED,
                     "reshape mixes the batch into other dimensions (the images would not stay "
                     "whole)");
    t.batch_outer = outer / before;
    return add_node(L, VF_OP_RESHAPE, &x, 1, &t);
}

static vf_status reshape_node(loader *L)
{
    int x;
    int64_t shape[VF_MAX_DIMS];
    int n;
    vf_status rc = input_at(L, 0, &x);
    if (rc >= 0)
        rc = const_ints(L, 1, shape, VF_MAX_DIMS, &n);
    if (rc < 0)
        return rc;
    if (x < 0)
        return NFAIL(L, VF_ERR_MODEL, "missing input");
    int allow_zero = attr_int(L->node, "allowzero", 0) != 0;
    if (val(L, x)->data) {
        const vf_value *xv = val(L, x);
        int64_t dims[VF_MAX_DIMS], known = 1;
        int infer_at = -1;
        for (int i = 0; i < n; i++) {
            dims[i] = shape[i] == 0 && !allow_zero && i < xv->rank ? xv->dims[i] : shape[i];
            if (dims[i] == -1)
                infer_at = i;
            else if (dims[i] < 0 || (dims[i] > 0 && known > VF_MAX_NUMEL / dims[i]))
                return NFAIL(L, VF_ERR_MODEL, "invalid shape entry");
            else
                known *= dims[i];
        }
        if (infer_at >= 0)
            dims[infer_at] = known ? vfi_value_numel(xv) / known : 0;
        return vfi_onnx_fold_reshape(L, xv, n, dims);
    }
    return reshape_to(L, x, n, shape, allow_zero);
}

static vf_status flatten_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = val(L, x);
    int axis;
    rc = normalize_axis(L, attr_int(L->node, "axis", 1), xv->rank + 1, &axis);
    if (rc < 0)
        return rc;
    int64_t dims[2] = {vfi_dims_numel(axis, xv->dims),
                       vfi_dims_numel(xv->rank - axis, xv->dims + axis)};
    if (xv->data)
        return vfi_onnx_fold_reshape(L, xv, 2, dims);
    /* the part holding the batch stands for its multiple of it */
    int64_t target[2] = {dims[0], dims[1]};
    target[xv->batch_axis < axis ? 0 : 1] = vfi_dim_batch(dims[xv->batch_axis < axis ? 0 : 1]);
    return reshape_to(L, x, 2, target, 0);
}

/* Squeeze (sign -1) or Unsqueeze (sign +1). */
static vf_status squeeze_node(loader *L, int unsqueeze)
{
    int x;
    int64_t axes[VF_MAX_DIMS];
    int n_axes = -1;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    if (L->opset >= 13 && L->node->n_input > 1 && *L->node->input[1]) {
        rc = const_ints(L, 1, axes, VF_MAX_DIMS, &n_axes);
        if (rc < 0)
            return rc;
    } else {
        n_axes = attr_ints(L->node, "axes", axes, VF_MAX_DIMS);
        if (n_axes == -2)
            return NFAIL(L, VF_ERR_UNSUPPORTED, "too many axes");
    }
    const vf_value *xv = val(L, x);
    int out_rank = unsqueeze ? xv->rank + (n_axes > 0 ? n_axes : 0) : xv->rank;
    if (unsqueeze && n_axes < 1)
        return NFAIL(L, VF_ERR_MODEL, "unsqueeze without axes");
    if (out_rank > VF_MAX_DIMS)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "rank %d", out_rank);
    uint32_t mask = 0;
    for (int i = 0; i < n_axes; i++) {
        int a = 0;
        rc = normalize_axis(L, axes[i], out_rank, &a);
        if (rc < 0)
            return rc;
        mask |= 1u << a;
    }
    int64_t dims[VF_MAX_DIMS];
    int r = 0;
    if (unsqueeze) {
        int j = 0;
        for (int i = 0; i < out_rank; i++)
            dims[r++] = (mask & (1u << i)) ? 1 : xv->dims[j++];
    } else {
        for (int i = 0; i < xv->rank; i++) {
            int drop = n_axes < 0 ? (xv->dims[i] == 1 && !(xv->is_batched && i == xv->batch_axis))
                                  : (int)((mask >> i) & 1u);
            if (drop && xv->dims[i] != 1)
                return NFAIL(L, VF_ERR_MODEL, "squeezing a dimension of size %lld",
                             (long long)xv->dims[i]);
            if (!drop)
                dims[r++] = xv->dims[i];
        }
    }
    if (xv->data)
        return vfi_onnx_fold_reshape(L, xv, r, dims);
    /* where the batch's dimension lands */
    int at = xv->batch_axis;
    if (unsqueeze) {
        for (int i = 0, j = 0; i < out_rank; i++) {
            if (mask & (1u << i))
                continue;
            if (j++ == xv->batch_axis)
                at = i;
        }
    } else {
        if (mask & (1u << xv->batch_axis))
            return NFAIL(L, VF_ERR_UNSUPPORTED, "squeezing the batch dimension");
        for (int i = 0; i < xv->batch_axis; i++)
            at -= n_axes < 0 ? (xv->dims[i] == 1) : (int)((mask >> i) & 1u);
    }
    dims[at] = vfi_dim_batch(dims[at]);
    return reshape_to(L, x, r, dims, 0);
}

static vf_status transpose_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = val(L, x);
    int64_t perm64[VF_MAX_DIMS];
    int n = attr_ints(L->node, "perm", perm64, VF_MAX_DIMS);
    int perm[VF_MAX_DIMS];
    if (n == -1) {
        n = xv->rank;
        for (int i = 0; i < n; i++)
            perm64[i] = n - 1 - i;
    }
    if (n != xv->rank)
        return NFAIL(L, VF_ERR_MODEL, "perm has %d entries for rank %d", n, xv->rank);
    uint32_t seen = 0;
    for (int i = 0; i < n; i++) {
        if (perm64[i] < 0 || perm64[i] >= n || (seen & (1u << perm64[i])))
            return NFAIL(L, VF_ERR_MODEL, "invalid perm");
        seen |= 1u << perm64[i];
        perm[i] = (int)perm64[i];
    }
    if (xv->data)
        return vfi_onnx_fold_transpose(L, xv, perm);
    vf_node tmp;
    memcpy(tmp.p.perm, perm, sizeof(perm));
    return add_node(L, VF_OP_TRANSPOSE, &x, 1, tmp.p.perm);
}

static vf_status gather_node(loader *L)
{
    if (vfi_onnx_ramp_input(L, 1))
        return vfi_onnx_take(L);
    int x, ii;
    vf_status rc = input_at(L, 0, &x);
    if (rc >= 0)
        rc = input_at(L, 1, &ii);
    if (rc < 0)
        return rc;
    if (x < 0 || ii < 0)
        return NFAIL(L, VF_ERR_MODEL, "missing input");
    const vf_value *xv = val(L, x), *iv = val(L, ii);
    int axis;
    rc = normalize_axis(L, attr_int(L->node, "axis", 0), xv->rank, &axis);
    if (rc < 0)
        return rc;
    if (xv->data && !iv->data) { /* rows of a table by token ids: an embedding */
        if (axis != 0 || xv->dtype != VF_DTYPE_F32)
            return NFAIL(L, VF_ERR_UNSUPPORTED, "a lookup of a constant along axis %d", axis);
        int in[2] = {ii, x};
        return add_node(L, VF_OP_LOOKUP, in, 2, NULL);
    }
    if (!iv->data || iv->dtype != VF_DTYPE_I64)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "indices must be a constant");
    if (xv->data)
        return vfi_onnx_fold_gather(L, xv, iv, axis);
    if (iv->rank > 1)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "indices of rank %d on an activation", iv->rank);
    vf_gather_params p;
    p.axis = axis;
    p.scalar = iv->rank == 0;
    int64_t n = vfi_value_numel(iv);
    if (n < 1 || n > VF_MAX_DIM)
        return NFAIL(L, VF_ERR_MODEL, "gather with %lld indices", (long long)n);
    p.n_indices = (int)n;
    p.indices = vfi_mallocarray((size_t)n, sizeof(int64_t));
    if (!p.indices)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        int64_t k = ((const int64_t *)iv->data)[i];
        p.indices[i] = k < 0 ? k + xv->dims[axis] : k;
    }
    int out;
    rc =
        vfi_graph_add_node(L->g, VF_OP_GATHER, node_label(L), &x, 1, &p, out_name(L), &out, L->err);
    if (rc < 0 && vfi_graph_find(L->g, out_name(L)) < 0)
        vfi_free(p.indices); /* the node was not created */
    return rc;
}

/* Constants concatenated with activations (a file exported with a fixed batch of 1 joins
 * ViT's class token, [1, 1, 768], to the patches): the same for every image, so each is
 * expanded over the batch as the activations hold it. */
static vf_status expand_constants(loader *L, int *in, int n)
{
    /* the activations' batch placement, copied: adding a node may move the values */
    vf_value act;
    memset(&act, 0, sizeof(act));
    for (int i = 0; i < n; i++) {
        if (!val(L, in[i])->data) {
            act = *val(L, in[i]);
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        const vf_value *c = val(L, in[i]);
        if (!c->data)
            continue;
        if (c->rank != act.rank || c->dims[act.batch_axis] != 1)
            return NFAIL(L, VF_ERR_UNSUPPORTED,
                         "constant '%s' joined to activations differs along the batch's dimension",
                         c->name);
        vf_value t = *c;
        t.dims[act.batch_axis] = act.dims[act.batch_axis];
        t.batch_axis = act.batch_axis;
        t.batch_outer = act.batch_outer;
        char name[600];
        snprintf(name, sizeof(name), "%s/vidfeat_expand_%d", out_name(L), i);
        int src = in[i];
        vf_status rc =
            vfi_graph_add_node(L->g, VF_OP_EXPAND, name, &src, 1, &t, name, &in[i], L->err);
        if (rc < 0)
            return rc;
    }
    return VF_OK;
}

static vf_status concat_node(loader *L)
{
    const Onnx__NodeProto *n = L->node;
    if (n->n_input < 1 || n->n_input > 4096)
        return NFAIL(L, VF_ERR_MODEL, "concat of %zu inputs", n->n_input);
    int *in = vfi_mallocarray(n->n_input, sizeof(int));
    if (!in)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    int consts = 0;
    vf_status rc = VF_OK;
    for (size_t i = 0; i < n->n_input && rc >= 0; i++) {
        rc = input_at(L, i, &in[i]);
        if (rc >= 0 && in[i] < 0)
            rc = NFAIL(L, VF_ERR_MODEL, "empty input name");
        if (rc >= 0)
            consts += val(L, in[i])->data != NULL;
    }
    if (rc >= 0) {
        int rank = val(L, in[0])->rank, axis;
        rc = normalize_axis(L, attr_int(n, "axis", 0), rank, &axis);
        if (rc >= 0 && consts == (int)n->n_input)
            rc = vfi_onnx_fold_concat(L, axis, rank);
        else if (rc >= 0 && consts)
            rc = expand_constants(L, in, (int)n->n_input);
        if (rc >= 0 && consts < (int)n->n_input)
            rc = add_node(L, VF_OP_CONCAT, in, (int)n->n_input, &axis);
    }
    vfi_free(in);
    return rc;
}

static vf_status softmax_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    int rank = val(L, x)->rank, axis;
    rc = normalize_axis(L, attr_int(L->node, "axis", L->opset < 13 ? 1 : -1), rank, &axis);
    if (rc < 0)
        return rc;
    if (L->opset < 13 && axis != rank - 1)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "opset < 13 softmax over several axes");
    return add_node(L, VF_OP_SOFTMAX, &x, 1, &axis);
}

static vf_status lrn_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    int64_t size = attr_int(L->node, "size", 0);
    if (size < 1 || size > 1024)
        return NFAIL(L, VF_ERR_MODEL, "invalid size");
    vf_lrn_params p = {(int)size, attr_float(L->node, "alpha", 1e-4f),
                       attr_float(L->node, "beta", 0.75f), attr_float(L->node, "bias", 1.0f)};
    return add_node(L, VF_OP_LRN, &x, 1, &p);
}

static vf_status pad_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    if (!attr_str_is(L->node, "mode", "constant", 1))
        return NFAIL(L, VF_ERR_UNSUPPORTED, "only constant padding is supported");
    int rank = val(L, x)->rank;
    int64_t pads[2 * VF_MAX_DIMS];
    int n;
    vf_pad_params p;
    memset(&p, 0, sizeof(p));
    if (L->opset < 11) {
        n = attr_ints(L->node, "pads", pads, 2 * VF_MAX_DIMS);
        p.value = attr_float(L->node, "value", 0.0f);
    } else {
        rc = const_ints(L, 1, pads, 2 * VF_MAX_DIMS, &n);
        if (rc < 0)
            return rc;
        int vi;
        rc = input_at(L, 2, &vi);
        if (rc < 0)
            return rc;
        if (vi >= 0) {
            const vf_value *v = val(L, vi);
            if (!v->data || v->dtype != VF_DTYPE_F32 || vfi_value_numel(v) != 1)
                return NFAIL(L, VF_ERR_UNSUPPORTED, "constant_value must be a float scalar");
            p.value = *(const float *)v->data;
        }
        if (L->node->n_input > 3 && *L->node->input[3])
            return NFAIL(L, VF_ERR_UNSUPPORTED, "the axes input");
    }
    if (n != 2 * rank)
        return NFAIL(L, VF_ERR_MODEL, "pads has %d entries for rank %d", n, rank);
    for (int i = 0; i < rank; i++) {
        p.begin[i] = pads[i];
        p.end[i] = pads[rank + i];
    }
    return add_node(L, VF_OP_PAD, &x, 1, &p);
}

static vf_status reduce_mean_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    int64_t axes[VF_MAX_DIMS];
    int n;
    if (L->opset >= 18) {
        n = 0;
        if (L->node->n_input > 1 && *L->node->input[1]) {
            rc = const_ints(L, 1, axes, VF_MAX_DIMS, &n);
            if (rc < 0)
                return rc;
        }
    } else {
        n = attr_ints(L->node, "axes", axes, VF_MAX_DIMS);
        if (n == -2)
            return NFAIL(L, VF_ERR_MODEL, "too many axes");
    }
    int rank = val(L, x)->rank;
    vf_node tmp;
    tmp.p.reduce.axes = 0;
    tmp.p.reduce.keepdims = attr_int(L->node, "keepdims", 1) != 0;
    if (n <= 0)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "reducing over every axis (including the batch)");
    for (int i = 0; i < n; i++) {
        int a = 0;
        rc = normalize_axis(L, axes[i], rank, &a);
        if (rc < 0)
            return rc;
        tmp.p.reduce.axes |= 1u << a;
    }
    return add_node(L, VF_OP_REDUCE_MEAN, &x, 1, &tmp.p.reduce);
}

static vf_status shape_node(loader *L)
{
    int x;
    const vf_onnx_ramp *r = vfi_onnx_ramp_input(L, 0);
    /* i x mult + k[i] has the shape of k */
    vf_status rc = r && r->base >= 0 ? VF_OK : input_at(L, 0, &x);
    if (r && r->base >= 0)
        x = r->base;
    if (rc < 0)
        return rc;
    if (x < 0)
        return NFAIL(L, VF_ERR_MODEL, "missing input");
    const vf_value *xv = val(L, x);
    int64_t start = attr_int(L->node, "start", 0), end = attr_int(L->node, "end", xv->rank);
    if (start < 0)
        start += xv->rank;
    if (end < 0)
        end += xv->rank;
    start = start < 0 ? 0 : start > xv->rank ? xv->rank : start;
    end = end < start ? start : end > xv->rank ? xv->rank : end;
    int64_t n = end - start;
    int64_t *data = alloc_elems(n, VF_DTYPE_I64);
    if (!data)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        int d = (int)(start + i);
        data[i] =
            (xv->is_batched && d == xv->batch_axis) ? vfi_dim_batch(xv->dims[d]) : xv->dims[d];
    }
    int out;
    return add_const(L, out_name(L), VF_DTYPE_I64, 1, &n, data, &out);
}

static vf_status constant_node(loader *L)
{
    const Onnx__NodeProto *n = L->node;
    int out;
    for (size_t i = 0; i < n->n_attribute; i++) {
        Onnx__AttributeProto *a = n->attribute[i];
        if (!a->name)
            continue;
        if (strcmp(a->name, "value") == 0 && a->t)
            return tensor_to_const(L, a->t, out_name(L), &out);
        int is_float = strcmp(a->name, "value_float") == 0 && a->has_f;
        int is_int = strcmp(a->name, "value_int") == 0 && a->has_i;
        int is_floats = strcmp(a->name, "value_floats") == 0;
        int is_ints = strcmp(a->name, "value_ints") == 0;
        if (!(is_float || is_int || is_floats || is_ints))
            continue;
        int64_t cnt = is_floats ? (int64_t)a->n_floats : is_ints ? (int64_t)a->n_ints : 1;
        vf_dtype dt = (is_float || is_floats) ? VF_DTYPE_F32 : VF_DTYPE_I64;
        void *data = alloc_elems(cnt, dt);
        if (!data)
            return NFAIL(L, VF_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < cnt; k++) {
            if (dt == VF_DTYPE_F32)
                ((float *)data)[k] = is_floats ? a->floats[k] : a->f;
            else
                ((int64_t *)data)[k] = is_ints ? a->ints[k] : a->i;
        }
        return add_const(L, out_name(L), dt, (is_floats || is_ints) ? 1 : 0, &cnt, data, &out);
    }
    return NFAIL(L, VF_ERR_UNSUPPORTED, "no supported value attribute");
}

static vf_status cast_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    int64_t to = attr_int(L->node, "to", 0);
    const vf_value *xv = val(L, x);
    /* booleans are int64 0 and 1 here (constants only) */
    int to_bool = to == DT_BOOL;
    vf_dtype dt = (to == DT_FLOAT || to == DT_DOUBLE || to == DT_FLOAT16) ? VF_DTYPE_F32
                  : (to == DT_INT64 || to == DT_INT32 || to == DT_BOOL)   ? VF_DTYPE_I64
                                                                          : (vf_dtype)-1;
    if ((int)dt < 0)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "cast to type %lld", (long long)to);
    if (!xv->data) {
        if (dt != VF_DTYPE_F32)
            return NFAIL(L, VF_ERR_UNSUPPORTED, "casting an activation to an integer type");
        return vfi_graph_add_alias(L->g, out_name(L), x, L->err);
    }
    int64_t n = vfi_value_numel(xv);
    void *data = alloc_elems(n, dt);
    if (!data)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (dt == xv->dtype)
            memcpy((char *)data + i * vfi_dtype_size(dt),
                   (const char *)xv->data + i * vfi_dtype_size(dt), vfi_dtype_size(dt));
        else if (dt == VF_DTYPE_F32)
            ((float *)data)[i] = (float)((const int64_t *)xv->data)[i];
        else
            ((int64_t *)data)[i] = (int64_t)((const float *)xv->data)[i];
        if (to_bool)
            ((int64_t *)data)[i] = xv->dtype == VF_DTYPE_F32 ? ((const float *)xv->data)[i] != 0.0f
                                                             : ((const int64_t *)xv->data)[i] != 0;
    }
    int out;
    return add_const(L, out_name(L), dt, xv->rank, xv->dims, data, &out);
}

/* Slice of a constant (shape arithmetic: shape[2:], pads reversed with step -1, ...). */
static vf_status slice_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    const vf_value *xv = val(L, x);
    int rank = xv->rank;
    int64_t starts[VF_MAX_DIMS], ends[VF_MAX_DIMS], axes[VF_MAX_DIMS], steps[VF_MAX_DIMS];
    int ns = -1, ne = -1, na = -1, nst = -1;
    if (L->opset < 10) {
        ns = attr_ints(L->node, "starts", starts, VF_MAX_DIMS);
        ne = attr_ints(L->node, "ends", ends, VF_MAX_DIMS);
        na = attr_ints(L->node, "axes", axes, VF_MAX_DIMS);
    } else {
        rc = const_ints(L, 1, starts, VF_MAX_DIMS, &ns);
        if (rc >= 0)
            rc = const_ints(L, 2, ends, VF_MAX_DIMS, &ne);
        if (rc >= 0 && L->node->n_input > 3 && *L->node->input[3])
            rc = const_ints(L, 3, axes, VF_MAX_DIMS, &na);
        if (rc >= 0 && L->node->n_input > 4 && *L->node->input[4])
            rc = const_ints(L, 4, steps, VF_MAX_DIMS, &nst);
        if (rc < 0)
            return rc;
    }
    if (ns < 1 || ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return NFAIL(L, VF_ERR_MODEL, "starts/ends/axes/steps do not match");
    /* Per dimension: first index, step and count (whole dimension by default). */
    int64_t first[VF_MAX_DIMS], step[VF_MAX_DIMS], dims[VF_MAX_DIMS];
    for (int d = 0; d < rank; d++) {
        first[d] = 0;
        step[d] = 1;
        dims[d] = xv->dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int a = i;
        if (na >= 0) {
            rc = normalize_axis(L, axes[i], rank, &a);
            if (rc < 0)
                return rc;
        }
        int64_t len = xv->dims[a], st = nst >= 0 ? steps[i] : 1, b = starts[i], e = ends[i];
        if (st == 0)
            return NFAIL(L, VF_ERR_MODEL, "slice step 0");
        /* a step longer than the dimension takes one element at most: the same as len + 1,
         * which keeps the arithmetic below in range */
        st = st > len + 1 ? len + 1 : st < -(len + 1) ? -(len + 1) : st;
        b = b < 0 ? b + len : b;
        e = e < 0 ? e + len : e;
        if (st > 0) {
            b = b < 0 ? 0 : b > len ? len : b;
            e = e < 0 ? 0 : e > len ? len : e;
        } else {
            b = b < 0 ? -1 : b > len - 1 ? len - 1 : b;
            e = e < -1 ? -1 : e > len - 1 ? len - 1 : e;
        }
        int64_t count = st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st);
        first[a] = b;
        step[a] = st;
        dims[a] = count > 0 ? count : 0;
    }
    if (!xv->data)
        return vfi_onnx_slice_activation(L, x, first, step, dims);
    int64_t n = vfi_dims_numel(rank, dims), src_strides[VF_MAX_DIMS];
    vfi_onnx_strides(rank, xv->dims, src_strides);
    size_t es = vfi_dtype_size(xv->dtype);
    uint8_t *data = alloc_elems(n, xv->dtype);
    if (!data)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    int64_t idx[VF_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++)
            off += (first[d] + idx[d] * step[d]) * src_strides[d];
        memcpy(data + k * es, (const uint8_t *)xv->data + off * es, es);
        vfi_dims_next(rank, dims, idx);
    }
    int out;
    return add_const(L, out_name(L), xv->dtype, rank, dims, data, &out);
}

static vf_status constant_of_shape_node(loader *L)
{
    int64_t dims[VF_MAX_DIMS];
    int n;
    vf_status rc = const_ints(L, 0, dims, VF_MAX_DIMS, &n);
    if (rc < 0)
        return rc;
    int batch_at = -1; /* a shape holding the batch size: a constant for every image */
    for (int i = 0; i < n; i++) {
        if (vfi_dim_batch_multiple(dims[i]) && batch_at < 0) {
            batch_at = i;
            dims[i] = vfi_dim_batch_multiple(dims[i]);
        } else if (dims[i] < 0 || dims[i] > VF_MAX_DIM) {
            return NFAIL(L, VF_ERR_UNSUPPORTED, "shape entry %lld", (long long)dims[i]);
        }
    }
    if (vfi_dims_numel(n, dims) > VF_MAX_DIM)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "a constant of %lld elements",
                     (long long)vfi_dims_numel(n, dims));
    /* The fill value: a one-element tensor attribute, float 0 by default. */
    vf_dtype dt = VF_DTYPE_F32;
    float fv = 0.0f;
    int64_t iv = 0;
    const Onnx__AttributeProto *a = find_attr(L->node, "value");
    if (a && a->t) {
        int64_t vd[VF_MAX_DIMS];
        int vr = 0;
        void *v = NULL;
        rc = tensor_decode(L, a->t, "value", &dt, &vr, vd, &v);
        if (rc < 0)
            return rc;
        if (vfi_dims_numel(vr, vd) != 1) {
            vfi_free(v);
            return NFAIL(L, VF_ERR_MODEL, "value must hold one element");
        }
        if (dt == VF_DTYPE_F32)
            fv = *(const float *)v;
        else
            iv = *(const int64_t *)v;
        vfi_free(v);
    }
    /* over the batch: the values of one image's share (1 in the batch's dimension) */
    int64_t one[VF_MAX_DIMS];
    for (int i = 0; i < n; i++)
        one[i] = i == batch_at ? 1 : dims[i];
    int64_t count = vfi_dims_numel(n, one);
    void *data = alloc_elems(count, dt);
    if (!data)
        return NFAIL(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < count; i++) {
        if (dt == VF_DTYPE_F32)
            ((float *)data)[i] = fv;
        else
            ((int64_t *)data)[i] = iv;
    }
    int out;
    if (batch_at < 0)
        return add_const(L, out_name(L), dt, n, dims, data, &out);
    if (dt != VF_DTYPE_F32) {
        vfi_free(data);
        return NFAIL(L, VF_ERR_UNSUPPORTED, "an integer tensor over the batch");
    }
    char name[600];
    snprintf(name, sizeof(name), "%s/vidfeat_fill", out_name(L));
    int fill;
    rc = add_const(L, name, dt, n, one, data, &fill);
    if (rc < 0)
        return rc;
    vf_value t;
    memset(&t, 0, sizeof(t));
    t.rank = n;
    memcpy(t.dims, dims, sizeof(t.dims));
    t.batch_axis = batch_at;
    t.batch_outer = 1;
    return add_node(L, VF_OP_EXPAND, &fill, 1, &t);
}

static vf_status alias_node(loader *L)
{
    int x;
    vf_status rc = input_at(L, 0, &x);
    if (rc < 0)
        return rc;
    if (x < 0)
        return NFAIL(L, VF_ERR_MODEL, "missing input");
    return vfi_graph_add_alias(L->g, out_name(L), x, L->err);
}

/* ---- what operator families in other files see (onnx_ops.h) ------------------------------- */

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
    return vfi_graph_add_node(L->g, op, node_label(L), inputs, n_inputs, params, name, &idx,
                              L->err);
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

/* Operators with parameters of their own, as handlers of the table below. */
static vf_status relu_node(loader *L)
{
    return act_node(L, VF_ACT_RELU, 0.0f, 0.0f);
}
static vf_status leaky_relu_node(loader *L)
{
    return act_node(L, VF_ACT_RELU, attr_float(L->node, "alpha", 0.01f), 0.0f);
}
static vf_status sigmoid_node(loader *L)
{
    return act_node(L, VF_ACT_SIGMOID, 0.0f, 0.0f);
}
static vf_status tanh_node(loader *L)
{
    return act_node(L, VF_ACT_TANH, 0.0f, 0.0f);
}
static vf_status hard_sigmoid_node(loader *L)
{
    return act_node(L, VF_ACT_HARD_SIGMOID, attr_float(L->node, "alpha", 0.2f),
                    attr_float(L->node, "beta", 0.5f));
}
static vf_status hard_swish_node(loader *L)
{
    return act_node(L, VF_ACT_HARD_SWISH, 0.0f, 0.0f);
}
static vf_status add_op_node(loader *L)
{
    if (!strcmp(L->node->op_type, "Sum") && L->node->n_input != 2)
        return NFAIL(L, VF_ERR_UNSUPPORTED, "Sum of %zu inputs", L->node->n_input);
    return binary_node(L, 'a');
}
static vf_status sub_node(loader *L)
{
    return binary_node(L, 's');
}
static vf_status mul_node(loader *L)
{
    return binary_node(L, 'm');
}
static vf_status div_node(loader *L)
{
    return binary_node(L, 'd');
}
static vf_status unsqueeze_node(loader *L)
{
    return squeeze_node(L, 1);
}
static vf_status squeeze_only_node(loader *L)
{
    return squeeze_node(L, 0);
}

/* The ONNX operators vidfeat loads (default domain), each with its handler: the next operator is
 * one entry here and its handler. */
typedef struct onnx_op {
    const char *name;
    vf_status (*load)(loader *L);
} onnx_op;

static const onnx_op onnx_ops[] = {
    {"Add", add_op_node},
    {"ArgMax", vfi_onnx_argmax},
    {"AveragePool", vfi_onnx_average_pool},
    {"BatchNormalization", vfi_onnx_batchnorm},
    {"Cast", cast_node},
    {"Clip", clip_node},
    {"Concat", concat_node},
    {"Constant", constant_node},
    {"ConstantOfShape", constant_of_shape_node},
    {"Conv", vfi_onnx_conv},
    {"Div", div_node},
    {"Dropout", alias_node},
    {"Equal", vfi_onnx_equal},
    {"Erf", vfi_onnx_erf},
    {"Exp", vfi_onnx_exp},
    {"Expand", vfi_onnx_expand},
    {"Flatten", flatten_node},
    {"Gather", gather_node},
    {"Gemm", vfi_onnx_gemm},
    {"GlobalAveragePool", vfi_onnx_global_average_pool},
    {"GlobalMaxPool", vfi_onnx_global_max_pool},
    {"HardSigmoid", hard_sigmoid_node},
    {"HardSwish", hard_swish_node},
    {"Identity", alias_node},
    {"LRN", lrn_node},
    {"LayerNormalization", vfi_onnx_layernorm},
    {"LeakyRelu", leaky_relu_node},
    {"MatMul", vfi_onnx_matmul},
    {"MaxPool", vfi_onnx_max_pool},
    {"Mod", vfi_onnx_mod},
    {"Mul", mul_node},
    {"Neg", vfi_onnx_neg},
    {"Not", vfi_onnx_not},
    {"Pad", pad_node},
    {"Pow", vfi_onnx_pow},
    {"Range", vfi_onnx_range},
    {"Reciprocal", vfi_onnx_reciprocal},
    {"ReduceMean", reduce_mean_node},
    {"Relu", relu_node},
    {"Reshape", reshape_node},
    {"ScatterND", vfi_onnx_scatter_nd},
    {"Shape", shape_node},
    {"Sigmoid", sigmoid_node},
    {"Slice", slice_node},
    {"Softmax", softmax_node},
    {"Split", vfi_onnx_split},
    {"Sqrt", vfi_onnx_sqrt},
    {"Squeeze", squeeze_only_node},
    {"Sub", sub_node},
    {"Sum", add_op_node},
    {"Tanh", tanh_node},
    {"Transpose", transpose_node},
    {"Unsqueeze", unsqueeze_node},
    {"Where", vfi_onnx_where},
};

/* The table's entry for a node, or NULL when vidfeat does not load its operator. */
static const onnx_op *find_op(const Onnx__NodeProto *n)
{
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
        return NULL;
    const char *op = n->op_type ? n->op_type : "";
    for (size_t i = 0; i < sizeof(onnx_ops) / sizeof(onnx_ops[0]); i++) {
        if (!strcmp(onnx_ops[i].name, op))
            return &onnx_ops[i];
    }
    return NULL;
}

static vf_status convert_node(loader *L)
{
    const Onnx__NodeProto *n = L->node;
    const char *op = n->op_type ? n->op_type : "";
    if (n->n_output < 1 || !n->output[0] || !*n->output[0])
        return NFAIL(L, VF_ERR_MODEL, "node has no output");
    /* Every op but Constant reads its first input; the handlers rely on it being there. */
    if (strcmp(op, "Constant") != 0 && (n->n_input < 1 || !n->input[0] || !*n->input[0]))
        return NFAIL(L, VF_ERR_MODEL, "the first input is missing");
    const onnx_op *e = find_op(n);
    if (!e)
        return n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0
                   ? NFAIL(L, VF_ERR_UNSUPPORTED, "operator domain '%s' is not supported",
                           n->domain)
                   : NFAIL(L, VF_ERR_UNSUPPORTED, "unsupported operator '%s'", op);
    return e->load(L);
}

/* Before any node is converted: every operator the table lacks, named at once with the first
 * node using it and how many others do ("unsupported operators: Erf (node '/mlp/Erf' and 11
 * others), LayerNormalization (node '/ln_1/LayerNormalization' and 24 others)"), so that a model
 * needing several is not refused one operator at a time. */
/* The domain of a node's operator as a prefix ("" for the default domain). */
static const char *op_domain(const Onnx__NodeProto *n)
{
    return n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "";
}

static int same_op(const Onnx__NodeProto *m, const char *op, const char *dom)
{
    return m->op_type && !strcmp(m->op_type, op) && !strcmp(op_domain(m), dom);
}

static vf_status check_operators(loader *L)
{
    Onnx__GraphProto *gp = L->gp;
    size_t kinds = 0, listed = 0, len = 0;
    char *msg = L->err->msg;
    const size_t cap = sizeof(L->err->msg), tail = 32; /* room for ", and N more" */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (find_op(n))
            continue;
        const char *op = n->op_type ? n->op_type : "", *dom = op_domain(n);
        int first = 1; /* each operator is named at its first node */
        for (size_t j = 0; j < i && first; j++)
            first = !same_op(gp->node[j], op, dom);
        if (!first)
            continue;
        size_t others = 0;
        for (size_t j = i + 1; j < gp->n_node; j++)
            others += (size_t)same_op(gp->node[j], op, dom);
        kinds++;
        char piece[VF_ERRMSG_SIZE];
        L->node = n;
        int plen = others
                       ? snprintf(piece, sizeof(piece), "%s%s%s (node '%s' and %zu other%s)", dom,
                                  *dom ? "." : "", op, node_label(L), others, others > 1 ? "s" : "")
                       : snprintf(piece, sizeof(piece), "%s%s%s (node '%s')", dom, *dom ? "." : "",
                                  op, node_label(L));
        if (kinds == 1)
            len = (size_t)snprintf(msg, cap, "unsupported operators: ");
        if (listed == kinds - 1 && plen > 0 && len + 2 + (size_t)plen + tail < cap) {
            len += (size_t)snprintf(msg + len, cap - len, "%s%s", listed ? ", " : "", piece);
            listed++;
        }
    }
    L->node = NULL;
    if (!kinds)
        return VF_OK;
    if (listed < kinds)
        snprintf(msg + len, cap - len, ", and %zu more", kinds - listed);
    L->err->code = VF_ERR_UNSUPPORTED;
    return VF_ERR_UNSUPPORTED;
}

/* ---- graph-level steps ----------------------------------------------------------------------- */

/* Order the nodes so that every input is produced before it is used (Kahn). */
static vf_status sort_nodes(loader *L, size_t **order_out)
{
    Onnx__GraphProto *gp = L->gp;
    size_t n = gp->n_node;
    vf_status rc = VF_OK;
    vf_strmap *producer = NULL;
    size_t *order = vfi_mallocarray(n ? n : 1, sizeof(size_t));
    size_t *pending = vfi_calloc(n ? n : 1, sizeof(size_t));
    size_t *queue = vfi_mallocarray(n ? n : 1, sizeof(size_t));
    size_t *edge_start = vfi_calloc(n + 1, sizeof(size_t));
    size_t *edges = NULL;
    size_t n_edges = 0, head = 0, tail = 0, done = 0;
    if (!order || !pending || !queue || !edge_start || vfi_strmap_create(&producer) < 0) {
        rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        for (size_t j = 0; j < nd->n_output; j++) {
            if (!nd->output[j] || !*nd->output[j])
                continue;
            vf_status put = vfi_strmap_put(producer, nd->output[j], (int)i);
            if (put == VF_ERR_INVALID) {
                rc = vfi_fail(L->err, VF_ERR_MODEL, "tensor '%s' is produced twice", nd->output[j]);
                goto fail;
            }
            if (put < 0) {
                rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
                goto fail;
            }
        }
        if (nd->n_input > SIZE_MAX / 2 - n_edges) {
            rc = vfi_fail(L->err, VF_ERR_MODEL, "too many edges");
            goto fail;
        }
        n_edges += nd->n_input;
    }
    /* Edges producer -> consumer, grouped by producer (CSR). */
    edges = vfi_mallocarray(n_edges ? n_edges : 1, sizeof(size_t));
    if (!edges) {
        rc = vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        for (size_t j = 0; j < nd->n_input; j++) {
            int p = nd->input[j] && *nd->input[j] ? vfi_strmap_get(producer, nd->input[j], -1) : -1;
            if (p >= 0) {
                edge_start[p + 1]++;
                pending[i]++;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        edge_start[i + 1] += edge_start[i];
    {
        size_t *fill = queue; /* reuse as a cursor array before the queue is needed */
        for (size_t i = 0; i < n; i++)
            fill[i] = edge_start[i];
        for (size_t i = 0; i < n; i++) {
            const Onnx__NodeProto *nd = gp->node[i];
            for (size_t j = 0; j < nd->n_input; j++) {
                int p =
                    nd->input[j] && *nd->input[j] ? vfi_strmap_get(producer, nd->input[j], -1) : -1;
                if (p >= 0)
                    edges[fill[p]++] = i;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (pending[i] == 0)
            queue[tail++] = i;
    }
    while (head < tail) {
        size_t i = queue[head++];
        order[done++] = i;
        for (size_t e = edge_start[i]; e < edge_start[i + 1]; e++) {
            if (--pending[edges[e]] == 0)
                queue[tail++] = edges[e];
        }
    }
    if (done != n) {
        for (size_t i = 0; i < n; i++) {
            if (pending[i]) {
                const Onnx__NodeProto *nd = gp->node[i];
                rc = vfi_fail(L->err, VF_ERR_MODEL, "the graph has a cycle through node '%s'",
                              nd->name && *nd->name ? nd->name
                              : nd->n_output        ? nd->output[0]
                                                    : "?");
                break;
            }
        }
        goto fail;
    }
    *order_out = order;
    order = NULL;
fail:
    vfi_free(order);
    vfi_free(pending);
    vfi_free(queue);
    vfi_free(edge_start);
    vfi_free(edges);
    vfi_strmap_free(&producer);
    return rc;
}

/* Find the image input (the one graph input that is not an initializer) and add it. */
/* A text tower's input: token ids [N, context]. */
static vf_status add_ids_input(loader *L, const char *name, const Onnx__TensorShapeProto *sh)
{
    if (sh->n_dim != 2)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' of token ids has rank %zu ([N, context] is expected)", name,
                        sh->n_dim);
    const Onnx__TensorShapeProto__Dimension *dim = sh->dim[1];
    if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
        dim->dim_value < 1 || dim->dim_value > VF_MAX_DIM)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' of token ids has no fixed context length", name);
    int64_t dims[2] = {1, dim->dim_value};
    int idx;
    return vfi_graph_add_input(L->g, name, VF_DTYPE_I64, 2, dims, &idx, L->err);
}

static vf_status add_image_input(loader *L)
{
    Onnx__GraphProto *gp = L->gp;
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *v = gp->input[i];
        if (!v->name || vfi_strmap_get(L->inits, v->name, -1) >= 0)
            continue;
        if (in)
            return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                            "the model has more than one input ('%s' and '%s')", in->name, v->name);
        in = v;
    }
    if (!in)
        return vfi_fail(L->err, VF_ERR_MODEL, "the model has no input");
    const Onnx__TypeProto *tp = in->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->shape)
        return vfi_fail(L->err, VF_ERR_MODEL, "input '%s' has no tensor shape", in->name);
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    if (tp->tensor_type->elem_type == DT_INT64)
        return add_ids_input(L, in->name, sh);
    if (tp->tensor_type->elem_type != DT_FLOAT)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' is neither float32 (images) nor int64 (token ids)", in->name);
    if (sh->n_dim != 4)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED,
                        "input '%s' has rank %zu (an image batch [N, C, H, W] or [N, H, W, C] "
                        "is expected)",
                        in->name, sh->n_dim);
    int64_t d[4];
    for (int i = 0; i < 4; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = sh->dim[i];
        d[i] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                   ? dim->dim_value
                   : -1;
    }
    /* NHWC when the last dimension holds the colours and the second does not. */
    int nhwc = (d[3] == 3 || d[3] == 1) && d[1] != 3 && d[1] != 1;
    int64_t c = nhwc ? d[3] : d[1];
    int64_t *hw = nhwc ? &d[1] : &d[2];
    if (c < 1)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "input '%s' has a dynamic channel count",
                        in->name);
    for (int i = 0; i < 2; i++) {
        if (hw[i] < 1) {
            if (L->input_size < 1)
                return vfi_fail(L->err, VF_ERR_INVALID,
                                "input '%s' has a dynamic size: give the input size "
                                "(--input-size)",
                                in->name);
            hw[i] = L->input_size;
        } else if (L->input_size > 0 && hw[i] != L->input_size) {
            /* Exported with a fixed plane (the zoo's Inception v3 at 224): run it at the size
             * asked for; every shape after the input is inferred again from it, and a node
             * whose constants only fit the exported size fails, named (convert_graph). */
            L->fixed_hw[0] = hw[0];
            L->fixed_hw[1] = hw[1];
        }
    }
    if (L->fixed_hw[0]) {
        vfi_log(VF_LOG_INFO, "onnx", "input '%s' is fixed at %lldx%lld in the file; run at %dx%d",
                in->name, (long long)L->fixed_hw[0], (long long)L->fixed_hw[1], L->input_size,
                L->input_size);
        hw[0] = hw[1] = L->input_size;
    }
    int64_t nchw[4] = {1, c, hw[0], hw[1]};
    int idx;
    if (!nhwc)
        return vfi_graph_add_input(L->g, in->name, VF_DTYPE_F32, 4, nchw, &idx, L->err);
    /* Keep the engine's input planar: NCHW in, one transpose to the model's NHWC. */
    vf_status rc =
        vfi_graph_add_input(L->g, "vidfeat_input_nchw", VF_DTYPE_F32, 4, nchw, &idx, L->err);
    if (rc < 0)
        return rc;
    vf_node tmp;
    int perm[VF_MAX_DIMS] = {0, 2, 3, 1};
    memcpy(tmp.p.perm, perm, sizeof(perm));
    int out;
    return vfi_graph_add_node(L->g, VF_OP_TRANSPOSE, "vidfeat_to_nhwc", &idx, 1, tmp.p.perm,
                              in->name, &out, L->err);
}

static vf_status convert_graph(loader *L)
{
    Onnx__GraphProto *gp = L->gp;
    vf_status rc = vfi_strmap_create(&L->inits);
    if (rc < 0)
        return vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
    if (gp->n_initializer > INT_MAX || gp->n_node > INT_MAX)
        return vfi_fail(L->err, VF_ERR_MODEL, "too many nodes or initializers");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const char *name = gp->initializer[i]->name;
        if (!name || !*name)
            return vfi_fail(L->err, VF_ERR_MODEL, "an initializer has no name");
        rc = vfi_strmap_put(L->inits, name, (int)i);
        if (rc == VF_ERR_INVALID)
            return vfi_fail(L->err, VF_ERR_MODEL, "initializer '%s' is defined twice", name);
        if (rc < 0)
            return vfi_fail(L->err, VF_ERR_NOMEM, "out of memory");
    }
    rc = check_operators(L);
    if (rc >= 0)
        rc = add_image_input(L);
    if (rc < 0)
        return rc;

    size_t *order = NULL;
    rc = sort_nodes(L, &order);
    if (rc < 0)
        return rc;
    for (size_t k = 0; k < gp->n_node && rc >= 0; k++) {
        L->node = gp->node[order[k]];
        rc = convert_node(L);
    }
    vfi_free(order);
    L->node = NULL;
    if (rc < 0 && L->fixed_hw[0] && rc != VF_ERR_NOMEM) {
        /* Most likely a shape the exporter wrote down for its own size (a flatten feeding a
         * Gemm, a Reshape of constants): say so after the node's own message. */
        size_t len = strlen(L->err->msg);
        snprintf(L->err->msg + len, sizeof(L->err->msg) - len,
                 " (the model was exported for a fixed %lldx%lld input and cannot run at %dx%d)",
                 (long long)L->fixed_hw[0], (long long)L->fixed_hw[1], L->input_size,
                 L->input_size);
    }
    if (rc < 0)
        return rc;

    if (gp->n_output < 1 || !gp->output[0]->name)
        return vfi_fail(L->err, VF_ERR_MODEL, "the model has no output");
    int out = vfi_graph_find(L->g, gp->output[0]->name);
    if (out < 0)
        return vfi_fail(L->err, VF_ERR_MODEL, "output '%s' is not produced by any node",
                        gp->output[0]->name);
    if (!L->g->values[out].is_batched)
        return vfi_fail(L->err, VF_ERR_UNSUPPORTED, "output '%s' does not depend on the input",
                        gp->output[0]->name);
    L->g->output = out;
    return VF_OK;
}

vf_status vfi_onnx_load_mem(const void *data, size_t size, const char *base_dir,
                            const vf_onnx_opts *opts, vf_graph **out, vf_err *err)
{
    int alloc_failed = 0;
    ProtobufCAllocator alloc = {pb_alloc, pb_free, &alloc_failed};
    Onnx__ModelProto *model = NULL;
    loader L;
    memset(&L, 0, sizeof(L));
    L.err = err;
    L.base_dir = base_dir;
    L.input_size = opts ? opts->input_size : 0;

    if (size == 0)
        return vfi_fail(err, VF_ERR_MODEL, "empty file");
    if (size > VF_ONNX_MAX_FILE)
        return vfi_fail(err, VF_ERR_MODEL, "larger than 2 GiB (not a protobuf model)");
    vf_status rc =
        check_wire(data, (const uint8_t *)data + size, &onnx__model_proto__descriptor, 0, err);
    if (rc < 0)
        return rc;
    model = onnx__model_proto__unpack(&alloc, size, data);
    if (!model && alloc_failed)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory decoding the model");
    if (!model)
        return vfi_fail(err, VF_ERR_MODEL, "not an ONNX model (protobuf decoding failed)");
    if (!model->graph) {
        rc = vfi_fail(err, VF_ERR_MODEL, "not an ONNX model (no graph)");
        goto fail;
    }
    L.opset = -1;
    for (size_t i = 0; i < model->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = model->opset_import[i];
        if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            L.opset = o->version;
    }
    if (L.opset < 0)
        L.opset = 1; /* IR version 3 and earlier */
    if (L.opset > 22)
        vfi_log(VF_LOG_WARNING, "onnx", "opset %lld is newer than the 22 this loader knows",
                (long long)L.opset);
    L.gp = model->graph;
    rc = vfi_graph_create(&L.g);
    if (rc < 0) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    rc = convert_graph(&L);
    if (rc < 0)
        goto fail;
    *out = L.g;
    L.g = NULL;
fail:
    vfi_graph_free(&L.g);
    vfi_strmap_free(&L.inits);
    vfi_strmap_free(&L.ramp_names);
    vfi_free(L.ramps);
    if (model)
        onnx__model_proto__free_unpacked(model, &alloc);
    return rc;
}

/* A varint from f; -1 at the end of the file or on a malformed one. */
static int read_varint_file(FILE *f, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        int c = getc(f);
        if (c == EOF)
            return -1;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* One metadata_props entry (StringStringEntryProto: key = 1, value = 2): value into buf when
 * its key is `key`. 1 when it was, 0 when not, -1 when malformed. */
static int match_entry(const uint8_t *p, const uint8_t *end, const char *key, char *buf,
                       size_t size)
{
    const uint8_t *k = NULL, *v = NULL;
    uint64_t klen = 0, vlen = 0;
    while (p < end) {
        uint64_t tag, len;
        if (read_varint(&p, end, &tag) < 0 || (tag & 7) != 2 || read_varint(&p, end, &len) < 0 ||
            len > (uint64_t)(end - p))
            return -1;
        if (tag >> 3 == 1) {
            k = p;
            klen = len;
        } else if (tag >> 3 == 2) {
            v = p;
            vlen = len;
        }
        p += len;
    }
    if (!k || klen != strlen(key) || memcmp(k, key, klen) != 0)
        return 0;
    size_t n = v ? (size_t)(vlen < size - 1 ? vlen : size - 1) : 0;
    if (n)
        memcpy(buf, v, n);
    buf[n] = '\0';
    return 1;
}

vf_status vfi_onnx_metadata(const char *path, const char *key, char *buf, size_t size, vf_err *err)
{
    enum { MODEL_METADATA_PROPS = 14, MAX_ENTRY = 1 << 16 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    vf_status rc = VF_EOF;
    uint8_t *entry = NULL;
    uint64_t tag;
    buf[0] = '\0';
    while (rc == VF_EOF && read_varint_file(f, &tag) == 0) {
        uint64_t len = 0;
        int wire = (int)(tag & 7), bad = 0;
        if (wire == 0)
            bad = read_varint_file(f, &len) < 0;
        else if (wire == 1 || wire == 5)
            bad = fseeko(f, wire == 1 ? 8 : 4, SEEK_CUR) != 0;
        else if (wire != 2 || read_varint_file(f, &len) < 0 || len > VF_ONNX_MAX_FILE)
            bad = 1;
        if (!bad && wire == 2 && tag >> 3 == MODEL_METADATA_PROPS && len <= MAX_ENTRY) {
            entry = vfi_malloc(len ? len : 1);
            if (!entry) {
                rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
                break;
            }
            int m = fread(entry, 1, len, f) == len ? match_entry(entry, entry + len, key, buf, size)
                                                   : -1;
            vfi_free(entry);
            entry = NULL;
            bad = m < 0;
            if (m > 0)
                rc = VF_OK;
        } else if (!bad && wire == 2) {
            bad = fseeko(f, (off_t)len, SEEK_CUR) != 0;
        }
        if (bad)
            rc = vfi_fail(err, VF_ERR_MODEL, "%s: not an ONNX model (malformed protobuf)", path);
    }
    fclose(f);
    return rc;
}

vf_status vfi_onnx_load(const char *path, const vf_onnx_opts *opts, vf_graph **out, vf_err *err)
{
    vf_status rc = VF_OK;
    uint8_t *buf = NULL;
    char *dir = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return vfi_fail(err, VF_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = vfi_fail(err, VF_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    if ((uint64_t)st.st_size > VF_ONNX_MAX_FILE) {
        rc = vfi_fail(err, VF_ERR_MODEL, "%s: larger than 2 GiB (not a protobuf model)", path);
        goto fail;
    }
    size_t size = (size_t)st.st_size;
    buf = vfi_malloc(size ? size : 1);
    if (!buf) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (fread(buf, 1, size, f) != size) {
        rc = vfi_fail(err, VF_ERR_IO, "%s: read failed", path);
        goto fail;
    }
    fclose(f);
    f = NULL;
    dir = vfi_strdup(path);
    if (!dir) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    rc = vfi_onnx_load_mem(buf, size, dir, opts, out, err);
    if (rc < 0)
        vfi_err_prefix(err, "%s", path);
fail:
    if (f)
        fclose(f);
    vfi_free(buf);
    vfi_free(dir);
    return rc;
}
