/*
 * onnx_cnn.c - the operators of convolutional networks: Conv (a window read from kernel_shape,
 * strides, dilations, pads and auto_pad), MaxPool, AveragePool and the global pools (of images;
 * of clips [N, C, T, H, W] as Pool3D), Gemm and MatMul
 * with constant weights as a fully connected layer (MatMul of activations as it is), and
 * BatchNormalization as a depthwise 1x1 convolution the passes fold into the one before. Handlers
 * of onnx.c's table, through the loader's interface (onnx_handlers.h).
 */
#include <math.h>
#include <string.h>

#include "core/mem.h"
#include "engine/onnx_handlers.h"

/* Storage for n floats (at least one), or NULL. */
static float *floats(int64_t n)
{
    return vfi_mallocarray((size_t)(n > 0 ? n : 1), sizeof(float));
}

/* A window over n spatial axes from the node's attributes (kernel_shape, or the weights' last n
 * dimensions; strides, dilations, pads as begins then ends, auto_pad) into the arrays given. */
static vf_status read_axes(vfi_onnx_loader *L, int n, const vf_value *weights, int *kernel,
                           int *stride, int *dilation, int *pads, vf_auto_pad *auto_pad)
{
    int64_t v[6];
    int got = vfi_onnx_attr_ints(L, "kernel_shape", v, n);
    if (got == -1 && weights) {
        for (int i = 0; i < n; i++)
            v[i] = weights->dims[2 + i];
        got = n;
    }
    if (got != n)
        return n == 2 ? vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "only 2-D kernels are supported")
                      : vfi_onnx_fail(L, VF_ERR_UNSUPPORTED,
                                      "a kernel_shape of %d entries "
                                      "for a %d-D window",
                                      got, n);
    for (int i = 0; i < n; i++) {
        if (v[i] < 1 || v[i] > VF_MAX_DIM)
            return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid kernel_shape");
        kernel[i] = (int)v[i];
    }
    static const char *const names[2] = {"strides", "dilations"};
    int *dst[2] = {stride, dilation};
    for (int k = 0; k < 2; k++) {
        got = vfi_onnx_attr_ints(L, names[k], v, n);
        for (int i = 0; i < n; i++) {
            if (got == -1) {
                dst[k][i] = 1;
                continue;
            }
            if (got != n || v[i] < 1 || v[i] > VF_MAX_DIM)
                return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid %s", names[k]);
            dst[k][i] = (int)v[i];
        }
    }
    got = vfi_onnx_attr_ints(L, "pads", v, 2 * n);
    if (got == 2 * n) {
        for (int i = 0; i < 2 * n; i++) {
            if (v[i] < 0 || v[i] > VF_MAX_DIM)
                return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid pads");
            pads[i] = (int)v[i];
        }
    } else if (got != -1) {
        return vfi_onnx_fail(L, VF_ERR_MODEL, "pads must have %d entries for a %d-D window", 2 * n,
                             n);
    }
    if (vfi_onnx_attr_str_is(L, "auto_pad", "SAME_UPPER", 0))
        *auto_pad = VF_PAD_SAME_UPPER;
    else if (vfi_onnx_attr_str_is(L, "auto_pad", "SAME_LOWER", 0))
        *auto_pad = VF_PAD_SAME_LOWER;
    else if (vfi_onnx_attr_str_is(L, "auto_pad", "VALID", 0))
        *auto_pad = VF_PAD_VALID;
    else if (!vfi_onnx_attr_str_is(L, "auto_pad", "NOTSET", 1))
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "unknown auto_pad");
    return VF_OK;
}

static vf_status read_window(vfi_onnx_loader *L, vf_window *w, const vf_value *weights)
{
    memset(w, 0, sizeof(*w));
    return read_axes(L, 2, weights, w->kernel, w->stride, w->dilation, w->pads, &w->auto_pad);
}

/* Over a clip [N, C, T, H, W] with weights [OC, IC / group, KT, KH, KW]: CONV3D. */
static vf_status conv3d_node(vfi_onnx_loader *L, const int *in, const vf_value *w)
{
    vf_conv3d_params p;
    memset(&p, 0, sizeof(p));
    vf_status rc = read_axes(L, 3, w, p.kernel, p.stride, p.dilation, p.pads, &p.auto_pad);
    if (rc < 0)
        return rc;
    int64_t group = vfi_onnx_attr_int(L, "group", 1);
    if (group < 1 || group > VF_MAX_DIM)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid group");
    p.group = (int)group;
    return vfi_onnx_add_node(L, VF_OP_CONV3D, in, in[2] >= 0 ? 3 : 2, &p, 0);
}

vf_status vfi_onnx_conv(vfi_onnx_loader *L)
{
    int in[3];
    for (int i = 0; i < 3; i++) {
        vf_status rc = vfi_onnx_input(L, (size_t)i, &in[i]);
        if (rc < 0)
            return rc;
    }
    if (in[0] < 0 || in[1] < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    const vf_value *w = vfi_onnx_value(L, in[1]);
    if (w->rank == 5 && w->data && vfi_onnx_value(L, in[0])->rank == 5)
        return conv3d_node(L, in, w);
    if (w->rank != 4 || !w->data)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "weights must be a constant 4-D tensor");
    vf_conv_params p;
    memset(&p, 0, sizeof(p));
    vf_status rc = read_window(L, &p.win, w);
    if (rc < 0)
        return rc;
    int64_t group = vfi_onnx_attr_int(L, "group", 1);
    if (group < 1 || group > VF_MAX_DIM)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "invalid group");
    p.group = (int)group;
    return vfi_onnx_add_node(L, VF_OP_CONV, in, in[2] >= 0 ? 3 : 2, &p, 0);
}

/* The attributes windowed pools share, besides the window. */
static vf_status pool_attrs(vfi_onnx_loader *L, int *ceil_mode, int *count_include_pad)
{
    *ceil_mode = vfi_onnx_attr_int(L, "ceil_mode", 0) != 0;
    *count_include_pad = vfi_onnx_attr_int(L, "count_include_pad", 0) != 0;
    if (vfi_onnx_attr_int(L, "storage_order", 0) != 0)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "storage_order 1");
    return VF_OK;
}

/* Over a clip [N, C, T, H, W]: POOL3D. */
static vf_status pool3d_node(vfi_onnx_loader *L, int x, vf_pool_kind kind, int global)
{
    vf_pool3d_params p;
    memset(&p, 0, sizeof(p));
    p.kind = kind;
    p.global = global;
    if (!global) {
        vf_status rc = read_axes(L, 3, NULL, p.kernel, p.stride, p.dilation, p.pads, &p.auto_pad);
        if (rc >= 0)
            rc = pool_attrs(L, &p.ceil_mode, &p.count_include_pad);
        if (rc < 0)
            return rc;
    }
    return vfi_onnx_add_node(L, VF_OP_POOL3D, &x, 1, &p, 0);
}

static vf_status pool_node(vfi_onnx_loader *L, vf_pool_kind kind, int global)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    if (vfi_onnx_value(L, x)->rank == 5)
        return pool3d_node(L, x, kind, global);
    vf_pool_params p;
    memset(&p, 0, sizeof(p));
    p.kind = kind;
    p.global = global;
    if (!global) {
        rc = read_window(L, &p.win, NULL);
        if (rc >= 0)
            rc = pool_attrs(L, &p.ceil_mode, &p.count_include_pad);
        if (rc < 0)
            return rc;
    }
    return vfi_onnx_add_node(L, VF_OP_POOL, &x, 1, &p, 0);
}

/* Gemm / MatMul with constant weights -> FC. */
static vf_status fc_node(vfi_onnx_loader *L, int is_matmul)
{
    int a, b, c = -1;
    vf_status rc = vfi_onnx_input(L, 0, &a);
    if (rc >= 0)
        rc = vfi_onnx_input(L, 1, &b);
    if (rc >= 0 && !is_matmul)
        rc = vfi_onnx_input(L, 2, &c);
    if (rc < 0)
        return rc;
    if (a < 0 || b < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    const vf_value *B = vfi_onnx_value(L, b), *A = vfi_onnx_value(L, a);
    /* MatMul of N-D activations, or of two: as it is (attention, a transformer's linear
     * layers over tokens); a plain [N, K] x [K, M] is a fully connected layer */
    if (is_matmul && A->is_batched && (!B->data || A->rank != 2 || !vfi_value_batch_first(A))) {
        if (A->data)
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "the first operand must be an activation");
        int in[2] = {a, b};
        vf_matmul_params mp = {1.0f, 0, 0, {VF_ACT_NONE, 0.0f, 0.0f}};
        return vfi_onnx_add_node(L, VF_OP_MATMUL, in, 2, &mp, 0);
    }
    if (!B->data || B->rank != 2 || B->dtype != VF_DTYPE_F32)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED,
                             "the second operand must be a constant 2-D matrix");
    if (!vfi_onnx_value(L, a)->is_batched)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "the first operand must be the activation");
    int trans_b = is_matmul ? 0 : vfi_onnx_attr_int(L, "transB", 0) != 0;
    float alpha = is_matmul ? 1.0f : vfi_onnx_attr_float(L, "alpha", 1.0f);
    float beta = is_matmul ? 1.0f : vfi_onnx_attr_float(L, "beta", 1.0f);
    if (!is_matmul && vfi_onnx_attr_int(L, "transA", 0) != 0)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "transA");
    int64_t oc = trans_b ? B->dims[0] : B->dims[1];
    int64_t ic = trans_b ? B->dims[1] : B->dims[0];
    float *w = floats(oc * ic);
    if (!w)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    const float *src = B->data;
    for (int64_t o = 0; o < oc; o++) {
        for (int64_t i = 0; i < ic; i++)
            w[o * ic + i] = alpha * (trans_b ? src[o * ic + i] : src[i * oc + o]);
    }
    int64_t wd[2] = {oc, ic};
    int in[3];
    rc = vfi_onnx_add_named_const(L, "vidfeat_weight", VF_DTYPE_F32, 2, wd, w, &in[1]);
    if (rc < 0)
        return rc;
    in[0] = a;
    int n_in = 2;
    if (c >= 0) {
        const vf_value *C = vfi_onnx_value(L, c);
        int64_t cn = vfi_value_numel(C);
        if (!C->data || C->dtype != VF_DTYPE_F32 || (cn != oc && cn != 1))
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED,
                                 "bias must be a constant of %lld or 1 values", (long long)oc);
        float *bias = floats(oc);
        if (!bias)
            return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
        for (int64_t o = 0; o < oc; o++)
            bias[o] = beta * ((const float *)C->data)[cn == 1 ? 0 : o];
        rc = vfi_onnx_add_named_const(L, "vidfeat_bias", VF_DTYPE_F32, 1, &oc, bias, &in[2]);
        if (rc < 0)
            return rc;
        n_in = 3;
    }
    vf_fc_params p = {{VF_ACT_NONE, 0, 0}};
    return vfi_onnx_add_node(L, VF_OP_FC, in, n_in, &p, 0);
}

/* BatchNormalization (inference) -> depthwise 1x1 conv; passes fold it into a preceding conv. */
vf_status vfi_onnx_batchnorm(vfi_onnx_loader *L)
{
    int x;
    const vf_value *sc, *bi, *mean, *var;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc >= 0)
        rc = vfi_onnx_const_input(L, 1, VF_DTYPE_F32, &sc);
    if (rc >= 0)
        rc = vfi_onnx_const_input(L, 2, VF_DTYPE_F32, &bi);
    if (rc >= 0)
        rc = vfi_onnx_const_input(L, 3, VF_DTYPE_F32, &mean);
    if (rc >= 0)
        rc = vfi_onnx_const_input(L, 4, VF_DTYPE_F32, &var);
    if (rc < 0)
        return rc;
    int rank = x < 0 ? 0 : vfi_onnx_value(L, x)->rank;
    if (rank != 4 && rank != 5)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED,
                             "only 4-D and 5-D BatchNormalization is supported");
    int64_t c = vfi_onnx_value(L, x)->dims[1];
    if (vfi_value_numel(sc) != c || vfi_value_numel(bi) != c || vfi_value_numel(mean) != c ||
        vfi_value_numel(var) != c)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "parameters do not have %lld channels", (long long)c);
    double eps = vfi_onnx_attr_float(L, "epsilon", 1e-5f);
    float *w = floats(c);
    float *b = floats(c);
    if (!w || !b) {
        vfi_free(w);
        vfi_free(b);
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    }
    const float *s = sc->data, *bb = bi->data, *m = mean->data, *v = var->data;
    for (int64_t i = 0; i < c; i++) {
        if (!(v[i] + eps > 0)) {
            vfi_free(w);
            vfi_free(b);
            return vfi_onnx_fail(L, VF_ERR_MODEL, "variance + epsilon is not positive");
        }
        double a = s[i] / sqrt((double)v[i] + eps);
        w[i] = (float)a;
        b[i] = (float)(bb[i] - m[i] * a);
    }
    int in[3] = {x, -1, -1};
    int64_t wd[5] = {c, 1, 1, 1, 1};
    rc = vfi_onnx_add_named_const(L, "vidfeat_bn_scale", VF_DTYPE_F32, rank, wd, w, &in[1]);
    if (rc < 0) {
        vfi_free(b);
        return rc;
    }
    rc = vfi_onnx_add_named_const(L, "vidfeat_bn_shift", VF_DTYPE_F32, 1, &c, b, &in[2]);
    if (rc < 0)
        return rc;
    if (rank == 5) { /* over a clip: a depthwise 1x1x1 Conv3D */
        vf_conv3d_params p3;
        memset(&p3, 0, sizeof(p3));
        for (int a = 0; a < 3; a++)
            p3.kernel[a] = p3.stride[a] = p3.dilation[a] = 1;
        p3.group = (int)c;
        return vfi_onnx_add_node(L, VF_OP_CONV3D, in, 3, &p3, 0);
    }
    vf_conv_params p;
    memset(&p, 0, sizeof(p));
    p.win.kernel[0] = p.win.kernel[1] = 1;
    p.win.stride[0] = p.win.stride[1] = 1;
    p.win.dilation[0] = p.win.dilation[1] = 1;
    p.group = (int)c;
    return vfi_onnx_add_node(L, VF_OP_CONV, in, 3, &p, 0);
}

vf_status vfi_onnx_max_pool(vfi_onnx_loader *L)
{
    return pool_node(L, VF_POOL_MAX, 0);
}
vf_status vfi_onnx_average_pool(vfi_onnx_loader *L)
{
    return pool_node(L, VF_POOL_AVG, 0);
}
vf_status vfi_onnx_global_average_pool(vfi_onnx_loader *L)
{
    return pool_node(L, VF_POOL_AVG, 1);
}
vf_status vfi_onnx_global_max_pool(vfi_onnx_loader *L)
{
    return pool_node(L, VF_POOL_MAX, 1);
}
vf_status vfi_onnx_gemm(vfi_onnx_loader *L)
{
    return fc_node(L, 0);
}
vf_status vfi_onnx_matmul(vfi_onnx_loader *L)
{
    return fc_node(L, 1);
}
