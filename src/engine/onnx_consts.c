/*
 * onnx_consts.c - loading the ONNX operators that make constants: Shape (the batch size kept as
 * its stand-in, VF_DIM_BATCH), Constant, ConstantOfShape (over the batch: an Expand), Cast, and
 * Identity and Dropout (another name for their input). Handlers of onnx.c's table, on
 * onnx_handlers.h's API.
 */
#include <string.h>

#include "core/mem.h"
#include "engine/onnx_handlers.h"

vf_status vfi_onnx_shape(vfi_onnx_loader *L)
{
    int x;
    const vf_onnx_ramp *r = vfi_onnx_ramp_input(L, 0);
    /* i x mult + k[i] has the shape of k */
    vf_status rc = r && r->base >= 0 ? VF_OK : vfi_onnx_input(L, 0, &x);
    if (r && r->base >= 0)
        x = r->base;
    if (rc < 0)
        return rc;
    if (x < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    const vf_value *xv = vfi_onnx_value(L, x);
    int64_t start = vfi_onnx_attr_int(L, "start", 0), end = vfi_onnx_attr_int(L, "end", xv->rank);
    if (start < 0)
        start += xv->rank;
    if (end < 0)
        end += xv->rank;
    start = start < 0 ? 0 : start > xv->rank ? xv->rank : start;
    end = end < start ? start : end > xv->rank ? xv->rank : end;
    int64_t n = end - start;
    int64_t *data = vfi_onnx_alloc(n, VF_DTYPE_I64);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        int d = (int)(start + i);
        data[i] =
            (xv->is_batched && d == xv->batch_axis) ? vfi_dim_batch(xv->dims[d]) : xv->dims[d];
    }
    return vfi_onnx_add_const(L, 0, VF_DTYPE_I64, 1, &n, data);
}

vf_status vfi_onnx_constant(vfi_onnx_loader *L)
{
    vf_dtype dt = VF_DTYPE_F32;
    int rank = 0;
    int64_t dims[VF_MAX_DIMS];
    void *data = NULL;
    vf_status rc =
        vfi_onnx_attr_value(L, NULL, vfi_onnx_output_name(L, 0), &dt, &rank, dims, &data);
    if (rc < 0)
        return rc;
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "no supported value attribute");
    return vfi_onnx_add_const(L, 0, dt, rank, dims, data);
}

vf_status vfi_onnx_constant_of_shape(vfi_onnx_loader *L)
{
    int64_t dims[VF_MAX_DIMS];
    int n;
    vf_status rc = vfi_onnx_const_ints(L, 0, dims, VF_MAX_DIMS, &n);
    if (rc < 0)
        return rc;
    int batch_at = -1; /* a shape holding the batch size: a constant for every image */
    for (int i = 0; i < n; i++) {
        if (vfi_dim_batch_multiple(dims[i]) && batch_at < 0) {
            batch_at = i;
            dims[i] = vfi_dim_batch_multiple(dims[i]);
        } else if (dims[i] < 0 || dims[i] > VF_MAX_DIM) {
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "shape entry %lld", (long long)dims[i]);
        }
    }
    if (vfi_dims_numel(n, dims) > VF_MAX_DIM)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "a constant of %lld elements",
                             (long long)vfi_dims_numel(n, dims));
    /* The fill value: a one-element tensor attribute, float 0 by default. */
    vf_dtype dt = VF_DTYPE_F32;
    float fv = 0.0f;
    int64_t iv = 0;
    int64_t vd[VF_MAX_DIMS];
    int vr = 0;
    void *v = NULL;
    rc = vfi_onnx_attr_value(L, "value", "value", &dt, &vr, vd, &v);
    if (rc < 0)
        return rc;
    if (v) {
        if (vfi_dims_numel(vr, vd) != 1) {
            vfi_free(v);
            return vfi_onnx_fail(L, VF_ERR_MODEL, "value must hold one element");
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
    void *data = vfi_onnx_alloc(count, dt);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < count; i++) {
        if (dt == VF_DTYPE_F32)
            ((float *)data)[i] = fv;
        else
            ((int64_t *)data)[i] = iv;
    }
    if (batch_at < 0)
        return vfi_onnx_add_const(L, 0, dt, n, dims, data);
    if (dt != VF_DTYPE_F32) {
        vfi_free(data);
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "an integer tensor over the batch");
    }
    int fill;
    rc = vfi_onnx_add_named_const(L, "vidfeat_fill", dt, n, one, data, &fill);
    if (rc < 0)
        return rc;
    vf_value t;
    memset(&t, 0, sizeof(t));
    t.rank = n;
    memcpy(t.dims, dims, sizeof(t.dims));
    t.batch_axis = batch_at;
    t.batch_outer = 1;
    return vfi_onnx_add_node(L, VF_OP_EXPAND, &fill, 1, &t, 0);
}

vf_status vfi_onnx_cast(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    int64_t to = vfi_onnx_attr_int(L, "to", 0);
    const vf_value *xv = vfi_onnx_value(L, x);
    /* booleans are int64 0 and 1 here (constants only) */
    int to_bool = to == VF_ONNX_DT_BOOL;
    vf_dtype dt = (to == VF_ONNX_DT_FLOAT || to == VF_ONNX_DT_DOUBLE || to == VF_ONNX_DT_FLOAT16)
                      ? VF_DTYPE_F32
                  : (to == VF_ONNX_DT_INT64 || to == VF_ONNX_DT_INT32 || to == VF_ONNX_DT_BOOL)
                      ? VF_DTYPE_I64
                      : (vf_dtype)-1;
    if ((int)dt < 0)
        return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "cast to type %lld", (long long)to);
    if (!xv->data) {
        if (dt != VF_DTYPE_F32)
            return vfi_onnx_fail(L, VF_ERR_UNSUPPORTED, "casting an activation to an integer type");
        return vfi_onnx_add_alias(L, 0, x);
    }
    int64_t n = vfi_value_numel(xv);
    void *data = vfi_onnx_alloc(n, dt);
    if (!data)
        return vfi_onnx_fail(L, VF_ERR_NOMEM, "out of memory");
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
    return vfi_onnx_add_const(L, 0, dt, xv->rank, xv->dims, data);
}

vf_status vfi_onnx_alias(vfi_onnx_loader *L)
{
    int x;
    vf_status rc = vfi_onnx_input(L, 0, &x);
    if (rc < 0)
        return rc;
    if (x < 0)
        return vfi_onnx_fail(L, VF_ERR_MODEL, "missing input");
    return vfi_onnx_add_alias(L, 0, x);
}
