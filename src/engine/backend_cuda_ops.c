/*
 * backend_cuda_ops.c - the GPU backend's operators on vidfeat's kernels (cuda_kernels.cu) and
 * cuBLAS's strided batched GEMM: MatMul with its scale, bias, activation and residual sum,
 * LayerNormalization, Slice, Expand, the token-id operators (Lookup, ArgMax, Take), and any
 * elementwise operation, Softmax, Transpose, Gather, Concat or ReduceMean whose tensors cuDNN's
 * steps cannot take (the batch not alone in their first dimension, int64 ids, shapes cuDNN
 * does not broadcast). See backend_cuda_int.h.
 */
#include <stdint.h>
#include <string.h>

#include "engine/backend_cuda_int.h"
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

/* Must node nd run on the kernels: an operator cuDNN has not, or a tensor cuDNN's steps cannot
 * take (its batch not alone in its first dimension, or int64 ids)? */
int vfi_cuda_on_kernels(const cuda_ctx *c, const vf_node *nd)
{
    unsigned flags = vfi_cuda_ops[nd->op].flags;
    if (flags & (CUDA_OP_KERNELS | CUDA_OP_VIEW))
        return !!(flags & CUDA_OP_KERNELS);
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
    const vfi_cuda_op *row = &vfi_cuda_ops[nd->op];
    vf_status rc = VF_OK;
    /* the windowed and channel operators are cuDNN's alone (their tensors are NCHW images) */
    if (!row->kernel)
        return vfi_cuda_unsupported(b, "way to run this operator on a tensor whose batch is not "
                                       "its first dimension alone");
    if (row->check && (rc = row->check(b, nd)) < 0)
        return rc;
    if ((row->flags & CUDA_OP_INDICES) && !c->bad_dev)
        CU(cudaMalloc((void **)&c->bad_dev, sizeof(int)));
    int y;
    TRY(vfi_cuda_new_buf(
        b, BUF_ARENA, (size_t)vfi_value_sample_numel(yv) * (size_t)c->max_batch * elem_size(c, yv),
        &y));
    c->vbuf[nd->output] = y;
    c->vlay[nd->output] = 0;
    cstep *s;
    if (row->flags & CUDA_OP_PER_INPUT) {
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
    if (row->operands)
        row->operands(nd, ops, s);
    else
        s->x2 = ops[1]; /* a second operand (Binary, Take), or none */
    vfi_cuda_seal(c, s);
fail:
    return rc;
}

/* MatMul's operands: a, b, then the bias and the sum when it has them. */
static void matmul_operands(const vf_node *nd, const int *ops, cstep *s)
{
    s->x2 = ops[1];
    s->bias = nd->p.matmul.has_bias ? ops[2] : -1;
    s->x3 = nd->p.matmul.has_sum ? ops[nd->n_inputs - 1] : -1;
}

/* LayerNormalization's (x, scale, bias) and Lookup's (ids, table). */
static void weight_operands(const vf_node *nd, const int *ops, cstep *s)
{
    (void)nd;
    s->w = ops[1];
    s->bias = ops[2];
}

/* What cuBLAS cannot take: a constant first operand, sizes past 32 bits. */
static vf_status matmul_check(vf_backend *b, const vf_node *nd)
{
    cuda_ctx *c = b->ctx;
    const vf_value *av = &c->g->values[nd->inputs[0]], *bv = &c->g->values[nd->inputs[1]];
    int64_t ad[VF_MAX_DIMS];
    vfi_value_dims_at(av, c->max_batch, ad);
    if (!av->is_batched)
        return vfi_cuda_unsupported(b, "MatMul whose first operand is a constant");
    if (vfi_dims_numel(av->rank, ad) > INT32_MAX || vfi_value_numel(bv) > INT32_MAX)
        return vfi_cuda_unsupported(b, "MatMul this large (cuBLAS's sizes are 32-bit)");
    return VF_OK;
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

/* A kernel step's operands at batch n: the input it reads (the step's part of a Concat) and the
 * output, their shapes at n, and the device memory of each operand. */
struct vfi_cuda_kernel_call {
    int n, half;
    const vf_value *xv, *yv;
    int64_t xd[VF_MAX_DIMS], yd[VF_MAX_DIMS], sx[VF_MAX_DIMS]; /* x's and y's dims, x's strides */
    vfk_strided cs; /* a copy into y (its dims and strides set; x's to be set) */
    const void *x, *x2, *x3, *w, *bias;
    void *y;
};

/* Each operator's kernel (vfi_cuda_ops' kernel column). */
static vf_status k_act(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    CU(vfk_act(nd->p.act, k->half, k->x, k->y, (size_t)vfi_dims_numel(k->yv->rank, k->yd),
               c->stream));
fail:
    return rc;
}

/* x op x2 with numpy broadcasting: a BINARY's kind, or PRelu's. */
static vf_status broadcast_op(vf_backend *b, const vf_node *nd, vfi_cuda_kernel_call *k, int op)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    const vf_value *bv = &c->g->values[nd->inputs[1]];
    int64_t bdims[VF_MAX_DIMS];
    vfi_value_dims_at(bv, k->n, bdims);
    vfk_broadcast bc = {.rank = k->yv->rank};
    memcpy(bc.dims, k->yd, sizeof(k->yd));
    vfi_dims_broadcast_strides(k->yv->rank, k->xv->rank, k->xd, bc.ast);
    vfi_dims_broadcast_strides(k->yv->rank, bv->rank, bdims, bc.bst);
    CU(vfk_binary(&bc, op, k->half, k->x, k->x2, k->y, c->stream));
fail:
    return rc;
}

static vf_status k_binary(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    (void)s;
    return broadcast_op(b, nd, k, (int)nd->p.binary);
}

static vf_status k_prelu(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    (void)s;
    return broadcast_op(b, nd, k, VFK_PRELU);
}

static vf_status k_softmax(vf_backend *b, const vf_node *nd, const cstep *s,
                           vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    int64_t outer, len, inner;
    vfi_dims_split(k->xv->rank, k->xd, nd->p.axis, &outer, &len, &inner);
    CU(vfk_softmax(outer, len, inner, k->half, k->x, k->y, c->stream));
fail:
    return rc;
}

/* Transpose, Slice and Expand: a strided copy, x's strides by the operator. */
static vf_status k_copy(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    vfk_strided cs = k->cs;
    int rank = k->yv->rank;
    if (nd->op == VF_OP_TRANSPOSE) {
        for (int i = 0; i < rank; i++)
            cs.xst[i] = k->sx[nd->p.perm[i]];
    } else if (nd->op == VF_OP_SLICE) {
        for (int i = 0; i < rank; i++) {
            cs.xst[i] = k->sx[i] * nd->p.slice.step[i];
            cs.xbase += nd->p.slice.start[i] * k->sx[i];
        }
    } else { /* Expand */
        vfi_dims_broadcast_strides(rank, k->xv->rank, k->xd, cs.xst);
    }
    CU(vfk_copy(&cs, elem_size(c, k->xv), k->x, k->y, c->stream));
fail:
    return rc;
}

/* Gather: each index, its rows of every outer entry. */
static vf_status k_gather(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    const vf_gather_params *p = &nd->p.gather;
    int64_t outer, len, inner;
    vfi_dims_split(k->xv->rank, k->xd, p->axis, &outer, &len, &inner);
    vfk_strided gs = {.rank = 2,
                      .dims = {outer, inner},
                      .xst = {len * inner, 1},
                      .yst = {p->n_indices * inner, 1}};
    for (int j = 0; j < p->n_indices; j++) {
        gs.xbase = p->indices[j] * inner;
        gs.ybase = j * inner;
        CU(vfk_copy(&gs, elem_size(c, k->xv), k->x, k->y, c->stream));
    }
fail:
    return rc;
}

/* Concat: this step's part into its place along the axis. */
static vf_status k_concat(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    int64_t outer, ylen, inner, at = 0;
    vfi_dims_split(k->yv->rank, k->yd, nd->p.axis, &outer, &ylen, &inner);
    for (int i = 0; i < s->part; i++)
        at += c->g->values[nd->inputs[i]].dims[nd->p.axis];
    int64_t len = k->xv->dims[nd->p.axis];
    vfk_strided ps = {.rank = 2,
                      .dims = {outer, len * inner},
                      .xst = {len * inner, 1},
                      .yst = {ylen * inner, 1},
                      .ybase = at * inner};
    CU(vfk_copy(&ps, elem_size(c, k->xv), k->x, k->y, c->stream));
fail:
    return rc;
}

static vf_status k_reduce_mean(vf_backend *b, const vf_node *nd, const cstep *s,
                               vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    vfk_reduce rd = {0};
    for (int i = 0; i < k->xv->rank; i++) {
        if (nd->p.reduce.axes & (1u << i)) {
            rd.rdims[rd.r_rank] = k->xd[i];
            rd.rst[rd.r_rank++] = k->sx[i];
        } else {
            rd.kdims[rd.k_rank] = k->xd[i];
            rd.kst[rd.k_rank++] = k->sx[i];
        }
    }
    CU(vfk_reduce_mean(&rd, k->half, k->x, k->y, c->stream));
fail:
    return rc;
}

static vf_status k_matmul(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    (void)s;
    return matmul_run(b, nd, k->n, k->x, k->x2, k->bias, k->x3, k->y);
}

static vf_status k_layernorm(vf_backend *b, const vf_node *nd, const cstep *s,
                             vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    int axis = nd->p.layernorm.axis;
    CU(vfk_layernorm(vfi_dims_numel(axis, k->xd), vfi_dims_numel(k->xv->rank - axis, k->xd + axis),
                     nd->p.layernorm.epsilon, k->half, k->x, k->w, k->bias, k->y, c->stream));
fail:
    return rc;
}

static vf_status k_lookup(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    const vf_value *tv = &c->g->values[nd->inputs[1]];
    CU(vfk_lookup(k->x, vfi_dims_numel(k->xv->rank, k->xd), k->w, tv->dims[0],
                  vfi_value_numel(tv) / tv->dims[0], k->half, k->y, c->bad_dev, c->stream));
fail:
    return rc;
}

static vf_status k_argmax(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    int64_t outer, len, inner;
    vfi_ids_split(c->g, nd, k->n, &outer, &len, &inner);
    CU(vfk_argmax(k->x, k->xv->dtype == VF_DTYPE_I64 ? 2 : k->half, outer, len, inner, k->y,
                  c->stream));
fail:
    return rc;
}

static vf_status k_take(vf_backend *b, const vf_node *nd, const cstep *s, vfi_cuda_kernel_call *k)
{
    cuda_ctx *c = b->ctx;
    vf_status rc = VF_OK;
    (void)s;
    int64_t outer, len, inner;
    vfi_ids_split(c->g, nd, k->n, &outer, &len, &inner); /* per image */
    CU(vfk_take(k->x, k->x2, k->n, outer, len, inner, elem_size(c, k->xv), k->y, c->bad_dev,
                c->stream));
fail:
    return rc;
}

/* Run an ST_KERNEL step at batch n on its operands' device memory. */
vf_status vfi_cuda_kernel_run(vf_backend *b, const cstep *s, int n, const void *x, const void *x2,
                              const void *x3, const void *w, const void *bias, void *y)
{
    cuda_ctx *c = b->ctx;
    const vf_graph *g = c->g;
    const vf_node *nd = &g->nodes[s->node];
    const vfi_cuda_op *row = &vfi_cuda_ops[nd->op];
    if (!row->kernel)
        return vfi_fail(&b->err, VF_ERR_INTERNAL, "node '%s': %s on the kernels", nd->name,
                        vfi_op_name(nd->op));
    vfi_cuda_kernel_call k = {.n = n,
                              .half = c->es == 2,
                              .xv = &g->values[nd->inputs[s->part]],
                              .yv = &g->values[nd->output],
                              .x = x,
                              .x2 = x2,
                              .x3 = x3,
                              .w = w,
                              .bias = bias,
                              .y = y};
    vfi_value_dims_at(k.xv, n, k.xd);
    vfi_value_dims_at(k.yv, n, k.yd);
    vfi_dims_strides(k.xv->rank, k.xd, k.sx);
    k.cs.rank = k.yv->rank;
    memcpy(k.cs.dims, k.yd, sizeof(k.yd));
    vfi_dims_strides(k.yv->rank, k.yd, k.cs.yst);
    return row->kernel(b, nd, s, &k);
}

/* ---- the operator table ---------------------------------------------------------------------- */

/* What this backend does for each operator: its lowering on cuDNN (backend_cuda_cnn.c), its
 * kernel on vidfeat's kernels (above), the nodes of it cuDNN can take, the kernel step's operands
 * and checks, and how it chooses between them (CUDA_OP_*). An operator with neither is refused
 * when a graph is planned. */
const vfi_cuda_op vfi_cuda_ops[VF_OP_COUNT_] = {
    [VF_OP_CONV] = {.cudnn = vfi_cuda_conv_op, .flags = CUDA_OP_ANY_LAYOUT},
    [VF_OP_FC] = {.cudnn = vfi_cuda_fc_op},
    [VF_OP_ACT] = {.cudnn = vfi_cuda_act_op, .kernel = k_act, .flags = CUDA_OP_ANY_LAYOUT},
    [VF_OP_POOL] = {.cudnn = vfi_cuda_pool_op, .flags = CUDA_OP_ANY_LAYOUT},
    [VF_OP_BINARY] = {.cudnn = vfi_cuda_binary_op, .kernel = k_binary, .flags = CUDA_OP_ANY_LAYOUT},
    [VF_OP_CONCAT] = {.cudnn = vfi_cuda_concat_op,
                      .kernel = k_concat,
                      .flags = CUDA_OP_ANY_LAYOUT | CUDA_OP_PER_INPUT},
    [VF_OP_SOFTMAX] = {.cudnn = vfi_cuda_softmax_op, .kernel = k_softmax},
    [VF_OP_LRN] = {.cudnn = vfi_cuda_lrn_op},
    [VF_OP_PAD] = {.cudnn = vfi_cuda_pad_op},
    [VF_OP_REDUCE_MEAN] = {.cudnn = vfi_cuda_reduce_op, .kernel = k_reduce_mean},
    [VF_OP_TRANSPOSE] = {.cudnn = vfi_cuda_transpose_op, .kernel = k_copy},
    [VF_OP_RESHAPE] = {.cudnn = vfi_cuda_reshape_op, .flags = CUDA_OP_VIEW},
    [VF_OP_GATHER] = {.cudnn = vfi_cuda_gather_op, .kernel = k_gather},
    [VF_OP_POOL3D] = {.cudnn = vfi_cuda_pool3d_op, .supports = vfi_cuda_pool3d_supports},
    [VF_OP_CONV3D] = {.cudnn = vfi_cuda_conv3d_op, .supports = vfi_cuda_conv3d_supports},
    [VF_OP_SLICE] = {.kernel = k_copy, .flags = CUDA_OP_KERNELS},
    [VF_OP_EXPAND] = {.kernel = k_copy, .flags = CUDA_OP_KERNELS},
    [VF_OP_MATMUL] = {.kernel = k_matmul,
                      .operands = matmul_operands,
                      .check = matmul_check,
                      .flags = CUDA_OP_KERNELS},
    [VF_OP_LAYERNORM] = {.kernel = k_layernorm,
                         .operands = weight_operands,
                         .flags = CUDA_OP_KERNELS},
    [VF_OP_LOOKUP] = {.kernel = k_lookup,
                      .operands = weight_operands,
                      .flags = CUDA_OP_KERNELS | CUDA_OP_INDICES},
    [VF_OP_ARGMAX] = {.kernel = k_argmax, .flags = CUDA_OP_KERNELS},
    [VF_OP_TAKE] = {.kernel = k_take, .flags = CUDA_OP_KERNELS | CUDA_OP_INDICES},
    [VF_OP_PRELU] = {.kernel = k_prelu, .flags = CUDA_OP_KERNELS},
};
