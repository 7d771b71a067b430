/*
 * backend_cuda_ops.c - the GPU backend's operators on vidfeat's kernels (cuda_kernels.cu) and
 * cuBLAS's strided batched GEMM: MatMul with its scale, bias, activation and residual sum,
 * LayerNormalization, Slice, Expand, the token-id operators (Lookup, ArgMax, Take), and any
 * elementwise operation, Softmax, Transpose, Gather, Concat or ReduceMean whose tensors cuDNN's
 * steps cannot take (the batch not alone in their first dimension, int64 ids, shapes cuDNN
 * does not broadcast). See backend_cuda.h.
 */
#include <stdint.h>
#include <string.h>

#include "engine/backend_cuda.h"
#include "engine/cuda_kernels.h"
#include "engine/ids_ops.h"

/* The transformers' and text towers' operators, and any operator whose tensors do not hold the
 * batch as their first dimension alone, run as one ST_KERNEL step a node (a Concat: one a part)
 * on cuda_kernels.cu's kernels and cuBLAS's strided batched GEMM. Their tensors are dense and
 * row-major (NCHW), so a tensor's shape at batch n is the graph's (vfi_value_dims_at), worked
 * out when the step runs, as the reference backend does. */

/* Bytes per element of a value's buffer: int64 ids, or the activation type. */
static size_t elem_size(const cuda_ctx *c, const vf_value *v)
{
    return v->dtype == VF_DTYPE_I64 ? sizeof(int64_t) : c->es;
}

/* The operators vidfeat's kernels run (vfi_cuda_kernel_run's cases). */
static const unsigned char kernel_ops[VF_OP_COUNT_] = {
    [VF_OP_ACT] = 1,         [VF_OP_BINARY] = 1, [VF_OP_SOFTMAX] = 1,   [VF_OP_TRANSPOSE] = 1,
    [VF_OP_SLICE] = 1,       [VF_OP_EXPAND] = 1, [VF_OP_GATHER] = 1,    [VF_OP_CONCAT] = 1,
    [VF_OP_REDUCE_MEAN] = 1, [VF_OP_MATMUL] = 1, [VF_OP_LAYERNORM] = 1, [VF_OP_LOOKUP] = 1,
    [VF_OP_ARGMAX] = 1,      [VF_OP_TAKE] = 1,
};

int vfi_cuda_kernel_supports(const vf_node *nd)
{
    return (unsigned)nd->op < VF_OP_COUNT_ && kernel_ops[nd->op];
}

/* Must node nd run on the kernels: an operator cuDNN has not, or a tensor cuDNN's steps cannot
 * take (its batch not alone in its first dimension, or int64 ids)? */
int vfi_cuda_on_kernels(const cuda_ctx *c, const vf_node *nd)
{
    switch (nd->op) {
    case VF_OP_MATMUL:
    case VF_OP_LAYERNORM:
    case VF_OP_SLICE:
    case VF_OP_EXPAND:
    case VF_OP_LOOKUP:
    case VF_OP_ARGMAX:
    case VF_OP_TAKE:
        return 1;
    case VF_OP_RESHAPE: /* a view of any tensor */
        return 0;
    default:
        break;
    }
    for (int i = 0; i <= nd->n_inputs; i++) {
        const vf_value *v = &c->g->values[i < nd->n_inputs ? nd->inputs[i] : nd->output];
        if (v->is_batched && (!vfi_value_batch_first(v) || v->dtype != VF_DTYPE_F32))
            return 1;
    }
    return 0;
}

/* The buffer of operand vi, dense NCHW: an activation's (copied out of NHWC if need be) or a
 * constant uploaded in the activation type. */
static vf_status kernel_operand(vf_backend *b, int vi, int *buf)
{
    cuda_ctx *c = b->ctx;
    const vf_value *v = &c->g->values[vi];
    if (!v->is_batched)
        return vfi_cuda_upload_value(b, vi, 0, buf);
    vf_status rc = vfi_cuda_to_layout(b, vi, 0);
    *buf = c->vbuf[vi];
    return rc;
}

vf_status vfi_cuda_kernel_op(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_value *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    /* the windowed and channel operators are cuDNN's alone (their tensors are NCHW images) */
    if (nd->op == VF_OP_CONV || nd->op == VF_OP_FC || nd->op == VF_OP_POOL || nd->op == VF_OP_LRN ||
        nd->op == VF_OP_PAD || nd->op == VF_OP_RESHAPE || nd->op == VF_OP_POOL3D)
        return vfi_cuda_unsupported(b, "way to run this operator on a tensor whose batch is not "
                                       "its first dimension alone");
    if (nd->op == VF_OP_MATMUL) {
        const vf_value *av = &g->values[nd->inputs[0]], *bv = &g->values[nd->inputs[1]];
        int64_t ad[VF_MAX_DIMS];
        vfi_value_dims_at(av, c->max_batch, ad);
        if (!av->is_batched)
            return vfi_cuda_unsupported(b, "MatMul whose first operand is a constant");
        if (vfi_dims_numel(av->rank, ad) > INT32_MAX || vfi_value_numel(bv) > INT32_MAX)
            return vfi_cuda_unsupported(b, "MatMul this large (cuBLAS's sizes are 32-bit)");
    }
    if (nd->op == VF_OP_LOOKUP || nd->op == VF_OP_TAKE) {
        if (!c->bad_dev)
            CU(cudaMalloc((void **)&c->bad_dev, sizeof(int)));
    }
    int y;
    TRY(vfi_cuda_new_buf(
        b, BUF_ARENA, (size_t)vfi_value_sample_numel(yv) * (size_t)c->max_batch * elem_size(c, yv),
        &y));
    c->vbuf[nd->output] = y;
    c->vlay[nd->output] = 0;
    step *s;
    if (nd->op == VF_OP_CONCAT) {
        for (int i = 0; i < nd->n_inputs; i++) {
            int x;
            TRY(kernel_operand(b, nd->inputs[i], &x));
            TRY(vfi_cuda_new_step(b, ST_KERNEL, x, y, &s));
            s->part = i;
            vfi_cuda_seal(c, s);
        }
        return VF_OK;
    }
    int ops[4] = {-1, -1, -1, -1};
    for (int i = 0; i < nd->n_inputs && i < 4; i++)
        TRY(kernel_operand(b, nd->inputs[i], &ops[i]));
    TRY(vfi_cuda_new_step(b, ST_KERNEL, ops[0], y, &s));
    switch (nd->op) {
    case VF_OP_MATMUL: /* a, b, then the bias and the sum when it has them */
        s->x2 = ops[1];
        s->bias = nd->p.matmul.has_bias ? ops[2] : -1;
        s->x3 = nd->p.matmul.has_sum ? ops[nd->n_inputs - 1] : -1;
        break;
    case VF_OP_LAYERNORM: /* x, scale, bias */
    case VF_OP_LOOKUP:    /* ids, table */
        s->w = ops[1];
        s->bias = ops[2];
        break;
    default: /* a second operand (Binary, Take) */
        s->x2 = ops[1];
        break;
    }
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* MatMul: y [..., M, N] = scale (a [..., M, K] b) by cuBLAS (column-major: y^T = b^T a^T, the
 * same memory), one product per leading index when b is an activation or a constant
 * [..., K, N], one product of all rows when b is a constant [K, N]; then bias, activation and
 * sum by the epilogue kernel. */
static vf_status matmul_run(vf_backend *b, const vf_node *nd, int n, const void *a, const void *bm,
                            const void *bias, const void *sum, void *y)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_matmul_params *p = &nd->p.matmul;
    vf_status rc = VF_OK;
    int64_t lead, M, K, N, b_mats;
    vfi_matmul_dims(g, nd, n, &lead, &M, &K, &N, &b_mats);
    cudaDataType_t dt = c->es == 2 ? CUDA_R_16F : CUDA_R_32F;
    cublasComputeType_t ct =
        c->precision == VF_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float alpha = p->scale, beta = 0.0f;
    /* b's matrices in turn against each run of b_mats products (a constant [..., K, N] is
     * read again for every index of a's first leading dimensions) */
    size_t es = (size_t)c->es;
    int64_t runs = b_mats == lead || b_mats == 1 ? 1 : lead / b_mats;
    int64_t per_run = runs == 1 ? lead : b_mats;
    for (int64_t r = 0; r < runs; r++) {
        const char *ar = (const char *)a + (size_t)(r * per_run * M * K) * es;
        char *yr = (char *)y + (size_t)(r * per_run * M * N) * es;
        BL(cublasGemmStridedBatchedEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K,
                                      &alpha, bm, dt, (int)N, b_mats > 1 ? (long long)(K * N) : 0,
                                      ar, dt, (int)K, (long long)(M * K), &beta, yr, dt, (int)N,
                                      (long long)(M * N), (int)per_run, ct, CUBLAS_GEMM_DEFAULT));
    }
    if (p->has_bias || p->has_sum || p->act.kind != VF_ACT_NONE)
        CU(vfk_epilogue(lead * M, N, bias, p->act, sum, c->es == 2, y, c->stream));
fail:
    return rc;
}

/* Run an ST_KERNEL step at batch n on its operands' device memory. */
vf_status vfi_cuda_kernel_run(vf_backend *b, const step *s, int n, const void *x, const void *x2,
                              const void *x3, const void *w, const void *bias, void *y)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_node *nd = &g->nodes[s->node];
    const vf_value *xv = &g->values[nd->inputs[s->part]], *yv = &g->values[nd->output];
    vf_status rc = VF_OK;
    int half = c->es == 2;
    int64_t xd[VF_MAX_DIMS], yd[VF_MAX_DIMS], sx[VF_MAX_DIMS], outer, len, inner;
    vfi_value_dims_at(xv, n, xd);
    vfi_value_dims_at(yv, n, yd);
    vfi_dims_strides(xv->rank, xd, sx);
    vfk_strided cs = {.rank = yv->rank};
    memcpy(cs.dims, yd, sizeof(yd));
    vfi_dims_strides(yv->rank, yd, cs.yst);
    switch (nd->op) {
    case VF_OP_ACT:
        CU(vfk_act(nd->p.act, half, x, y, (size_t)vfi_dims_numel(yv->rank, yd), c->stream));
        break;
    case VF_OP_BINARY: {
        const vf_value *bv = &g->values[nd->inputs[1]];
        int64_t bdims[VF_MAX_DIMS];
        vfi_value_dims_at(bv, n, bdims);
        vfk_broadcast bc = {.rank = yv->rank};
        memcpy(bc.dims, yd, sizeof(yd));
        vfi_dims_broadcast_strides(yv->rank, xv->rank, xd, bc.ast);
        vfi_dims_broadcast_strides(yv->rank, bv->rank, bdims, bc.bst);
        CU(vfk_binary(&bc, (int)nd->p.binary, half, x, x2, y, c->stream));
        break;
    }
    case VF_OP_SOFTMAX:
        vfi_dims_split(xv->rank, xd, nd->p.axis, &outer, &len, &inner);
        CU(vfk_softmax(outer, len, inner, half, x, y, c->stream));
        break;
    case VF_OP_TRANSPOSE:
        for (int i = 0; i < yv->rank; i++)
            cs.xst[i] = sx[nd->p.perm[i]];
        CU(vfk_copy(&cs, elem_size(c, xv), x, y, c->stream));
        break;
    case VF_OP_SLICE:
        for (int i = 0; i < yv->rank; i++) {
            cs.xst[i] = sx[i] * nd->p.slice.step[i];
            cs.xbase += nd->p.slice.start[i] * sx[i];
        }
        CU(vfk_copy(&cs, elem_size(c, xv), x, y, c->stream));
        break;
    case VF_OP_EXPAND:
        vfi_dims_broadcast_strides(yv->rank, xv->rank, xd, cs.xst);
        CU(vfk_copy(&cs, elem_size(c, xv), x, y, c->stream));
        break;
    case VF_OP_GATHER: { /* each index: its rows of every outer entry */
        const vf_gather_params *p = &nd->p.gather;
        vfi_dims_split(xv->rank, xd, p->axis, &outer, &len, &inner);
        vfk_strided gs = {.rank = 2,
                          .dims = {outer, inner},
                          .xst = {len * inner, 1},
                          .yst = {p->n_indices * inner, 1}};
        for (int j = 0; j < p->n_indices; j++) {
            gs.xbase = p->indices[j] * inner;
            gs.ybase = j * inner;
            CU(vfk_copy(&gs, elem_size(c, xv), x, y, c->stream));
        }
        break;
    }
    case VF_OP_CONCAT: { /* this step's part into its place along the axis */
        int64_t ylen, at = 0;
        vfi_dims_split(yv->rank, yd, nd->p.axis, &outer, &ylen, &inner);
        for (int i = 0; i < s->part; i++)
            at += g->values[nd->inputs[i]].dims[nd->p.axis];
        len = xv->dims[nd->p.axis];
        vfk_strided ps = {.rank = 2,
                          .dims = {outer, len * inner},
                          .xst = {len * inner, 1},
                          .yst = {ylen * inner, 1},
                          .ybase = at * inner};
        CU(vfk_copy(&ps, elem_size(c, xv), x, y, c->stream));
        break;
    }
    case VF_OP_REDUCE_MEAN: {
        vfk_reduce rd = {0};
        for (int i = 0; i < xv->rank; i++) {
            if (nd->p.reduce.axes & (1u << i)) {
                rd.rdims[rd.r_rank] = xd[i];
                rd.rst[rd.r_rank++] = sx[i];
            } else {
                rd.kdims[rd.k_rank] = xd[i];
                rd.kst[rd.k_rank++] = sx[i];
            }
        }
        CU(vfk_reduce_mean(&rd, half, x, y, c->stream));
        break;
    }
    case VF_OP_MATMUL:
        TRY(matmul_run(b, nd, n, x, x2, bias, x3, y));
        break;
    case VF_OP_LAYERNORM: {
        int axis = nd->p.layernorm.axis;
        CU(vfk_layernorm(vfi_dims_numel(axis, xd), vfi_dims_numel(xv->rank - axis, xd + axis),
                         nd->p.layernorm.epsilon, half, x, w, bias, y, c->stream));
        break;
    }
    case VF_OP_LOOKUP: {
        const vf_value *tv = &g->values[nd->inputs[1]];
        CU(vfk_lookup(x, vfi_dims_numel(xv->rank, xd), w, tv->dims[0],
                      vfi_value_numel(tv) / tv->dims[0], half, y, c->bad_dev, c->stream));
        break;
    }
    case VF_OP_ARGMAX:
        vfi_ids_split(g, nd, n, &outer, &len, &inner);
        CU(vfk_argmax(x, xv->dtype == VF_DTYPE_I64 ? 2 : half, outer, len, inner, y, c->stream));
        break;
    case VF_OP_TAKE:
        vfi_ids_split(g, nd, n, &outer, &len, &inner); /* per image */
        CU(vfk_take(x, x2, n, outer, len, inner, elem_size(c, xv), y, c->bad_dev, c->stream));
        break;
    default:
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "node '%s': %s on the kernels", nd->name,
                        vfi_op_name(nd->op));
    }
fail:
    return rc;
}
