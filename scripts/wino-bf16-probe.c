/*
 * wino-bf16-probe.c - is a bf16 Winograd F(2x2, 3x3) convolution built on oneDNN's AMX matmul
 * faster than oneDNN's direct bf16 convolution on this machine? The measurement behind the
 * README's "Why bf16 has no Winograd"; not part of the library.
 *
 *   gcc -O3 -march=native -fopenmp scripts/wino-bf16-probe.c -o /tmp/wino-probe -ldnnl
 *   OMP_NUM_THREADS=2 /tmp/wino-probe C K HW [CHUNK]      e.g. 512 512 28 32
 *
 * One 3x3, stride 1, pad 1 convolution with ReLU, batch 32, C -> K channels (multiples of 16:
 * the transforms work on 16 channels at a time) on HW x HW images,
 * activations bf16 NHWC, two ways:
 *   direct    oneDNN's convolution (algorithm direct: brgconv on AMX where there is AMX);
 *   winograd  per CHUNK images (default 32): V = B'dB for every 4x4 input tile (f32 arithmetic,
 *             stored bf16 as [16][tiles][C]), 16 matmuls V[i] x U[i] in one batched oneDNN
 *             matmul (U = GgG', bf16, [16][C][K]; products bf16), then Y = relu(A'MA + bias).
 * Prints the best of 3 runs of each, the ratio, and the largest difference between the two
 * outputs relative to the largest output (a wrong transform shows here, not just a slow one).
 * AMX throughput on a shared host moves between runs: run it several times.
 */
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 32

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "wino-bf16-probe: %s failed (%d)\n", #call, (int)s_);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float uniform(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct probe {
    int c, k, hw, chunk;
    int tiles_1d;  /* tiles per image side: ceil(hw / 2) */
    int64_t tiles; /* tiles per chunk */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    uint16_t *x, *y; /* NHWC bf16, batch BATCH */
    float *w, *bias; /* OIHW f32, K */
    uint16_t *v, *m; /* the matmul's source and destination, one chunk */
} probe;

static dnnl_memory_t memory_over(probe *p, const dnnl_memory_desc_t *md, void *data)
{
    dnnl_memory_t mem;
    CHECK(dnnl_memory_create(&mem, md, p->engine, data));
    return mem;
}

/* Reorder f32 user data (layout user) into a new memory of layout want; returns it. */
static dnnl_memory_t reordered(probe *p, const dnnl_memory_desc_t *user, void *data,
                               const dnnl_memory_desc_t *want)
{
    dnnl_memory_t src = memory_over(p, user, data);
    dnnl_memory_t dst = memory_over(p, want, DNNL_MEMORY_ALLOCATE);
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    CHECK(dnnl_reorder_primitive_desc_create(&pd, user, p->engine, want, p->engine, NULL));
    CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    CHECK(dnnl_primitive_execute(prim, p->stream, 2, args));
    CHECK(dnnl_stream_wait(p->stream));
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(src);
    return dst;
}

static double best_of_3(dnnl_primitive_t prim, dnnl_stream_t stream, int n, dnnl_exec_arg_t *a)
{
    double best = INFINITY;
    for (int r = 0; r < 3; r++) {
        double t = omp_get_wtime();
        CHECK(dnnl_primitive_execute(prim, stream, n, a));
        CHECK(dnnl_stream_wait(stream));
        t = omp_get_wtime() - t;
        best = t < best ? t : best;
    }
    return best;
}

/* oneDNN's direct convolution into p->y; seconds per batch. */
static double run_direct(probe *p)
{
    dnnl_dims_t xd = {BATCH, p->c, p->hw, p->hw}, wd = {p->k, p->c, 3, 3}, bd = {p->k};
    dnnl_dims_t yd = {BATCH, p->k, p->hw, p->hw}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t xm, wm, wuser, bm, ym;
    CHECK(dnnl_memory_desc_init_by_tag(&xm, 4, xd, dnnl_bf16, dnnl_acdb));
    CHECK(dnnl_memory_desc_init_by_tag(&ym, 4, yd, dnnl_bf16, dnnl_acdb));
    CHECK(dnnl_memory_desc_init_by_tag(&wm, 4, wd, dnnl_bf16, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wuser, 4, wd, dnnl_f32, dnnl_oihw));
    CHECK(dnnl_memory_desc_init_by_tag(&bm, 1, bd, dnnl_f32, dnnl_a));
    dnnl_convolution_desc_t cd;
    CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                     dnnl_convolution_direct, &xm, &wm, &bm, &ym,
                                                     one, zero, one, one));
    dnnl_post_ops_t po;
    dnnl_primitive_attr_t attr;
    CHECK(dnnl_post_ops_create(&po));
    CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    CHECK(dnnl_primitive_attr_create(&attr));
    CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &cd, attr, p->engine, NULL));
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    dnnl_memory_t w =
        reordered(p, &wuser, p->w, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
    dnnl_memory_t x = memory_over(p, &xm, p->x), y = memory_over(p, &ym, p->y);
    dnnl_memory_t b = memory_over(p, &bm, p->bias);
    dnnl_primitive_t prim;
    CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}};
    double t = best_of_3(prim, p->stream, 4, args);
    printf("direct    %-32s %8.1f ms  %6.0f GFLOP/s\n", impl, t * 1e3,
           2.0 * BATCH * p->hw * p->hw * (double)p->c * p->k * 9 / t / 1e9);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    dnnl_memory_destroy(x);
    dnnl_memory_destroy(y);
    dnnl_memory_destroy(b);
    dnnl_memory_destroy(w);
    return t;
}

/* U[i][c][k] = (G g G')[i] for every filter g = w[k][c], in f32 ([16][C][K]). */
static float *filter_transform(const probe *p)
{
    float *u = malloc(sizeof(float) * 16 * (size_t)p->c * (size_t)p->k);
    for (int k = 0; k < p->k; k++) {
        for (int c = 0; c < p->c; c++) {
            const float *g = p->w + ((size_t)k * p->c + c) * 9;
            float t[4][3]; /* G g */
            for (int j = 0; j < 3; j++) {
                t[0][j] = g[j];
                t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
                t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
                t[3][j] = g[6 + j];
            }
            for (int i = 0; i < 4; i++) { /* (G g) G' */
                float r[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                              0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
                for (int j = 0; j < 4; j++)
                    u[((size_t)(i * 4 + j) * p->c + c) * p->k + k] = r[j];
            }
        }
    }
    return u;
}

/* V for the tiles of images n0 .. n0 + chunk - 1: B' d B per 4x4 tile, 16 channels at a time. */
static void input_transform(const probe *p, int n0)
{
    const int t1 = p->tiles_1d, hw = p->hw, C = p->c;
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < p->tiles; m++) {
        int n = n0 + (int)(m / ((int64_t)t1 * t1)), ty = (int)(m / t1 % t1), tx = (int)(m % t1);
        for (int c0 = 0; c0 < C; c0 += 16) {
            float d[4][4][16], r[4][4][16];
            for (int i = 0; i < 4; i++) {
                for (int j = 0; j < 4; j++) {
                    int yy = 2 * ty - 1 + i, xx = 2 * tx - 1 + j;
                    if (yy < 0 || yy >= hw || xx < 0 || xx >= hw) { /* the padding */
                        memset(d[i][j], 0, sizeof(d[i][j]));
                        continue;
                    }
                    const uint16_t *s = p->x + (((size_t)n * hw + yy) * hw + xx) * C + c0;
                    for (int c = 0; c < 16; c++)
                        d[i][j][c] = from_bf16(s[c]);
                }
            }
            for (int j = 0; j < 4; j++) { /* B' d: rows */
                for (int c = 0; c < 16; c++) {
                    r[0][j][c] = d[0][j][c] - d[2][j][c];
                    r[1][j][c] = d[1][j][c] + d[2][j][c];
                    r[2][j][c] = d[2][j][c] - d[1][j][c];
                    r[3][j][c] = d[1][j][c] - d[3][j][c];
                }
            }
            for (int i = 0; i < 4; i++) { /* (B' d) B: columns */
                float o[4][16];
                for (int c = 0; c < 16; c++) {
                    o[0][c] = r[i][0][c] - r[i][2][c];
                    o[1][c] = r[i][1][c] + r[i][2][c];
                    o[2][c] = r[i][2][c] - r[i][1][c];
                    o[3][c] = r[i][1][c] - r[i][3][c];
                }
                for (int j = 0; j < 4; j++) {
                    uint16_t *dst = p->v + ((size_t)(i * 4 + j) * p->tiles + m) * C + c0;
                    for (int c = 0; c < 16; c++)
                        dst[c] = to_bf16(o[j][c]);
                }
            }
        }
    }
}

/* Y = relu(A' M A + bias) for the tiles of images n0 ..: the outputs inside the image. */
static void output_transform(const probe *p, int n0)
{
    const int t1 = p->tiles_1d, hw = p->hw, K = p->k;
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < p->tiles; m++) {
        int n = n0 + (int)(m / ((int64_t)t1 * t1)), ty = (int)(m / t1 % t1), tx = (int)(m % t1);
        for (int k0 = 0; k0 < K; k0 += 16) {
            float r[2][4][16];
            for (int j = 0; j < 4; j++) { /* A' M: rows */
                float a[4][16];
                for (int i = 0; i < 4; i++) {
                    const uint16_t *s = p->m + ((size_t)(i * 4 + j) * p->tiles + m) * K + k0;
                    for (int k = 0; k < 16; k++)
                        a[i][k] = from_bf16(s[k]);
                }
                for (int k = 0; k < 16; k++) {
                    r[0][j][k] = a[0][k] + a[1][k] + a[2][k];
                    r[1][j][k] = a[1][k] - a[2][k] - a[3][k];
                }
            }
            for (int i = 0; i < 2 && 2 * ty + i < hw; i++) { /* (A' M) A: columns */
                for (int j = 0; j < 2 && 2 * tx + j < hw; j++) {
                    uint16_t *dst = p->y + (((size_t)n * hw + 2 * ty + i) * hw + 2 * tx + j) * K;
                    for (int k = 0; k < 16; k++) {
                        float o = j == 0 ? r[i][0][k] + r[i][1][k] + r[i][2][k]
                                         : r[i][1][k] - r[i][2][k] - r[i][3][k];
                        o += p->bias[k0 + k];
                        dst[k0 + k] = to_bf16(o > 0.0f ? o : 0.0f);
                    }
                }
            }
        }
    }
}

/* The Winograd way into p->y; seconds per batch. */
static double run_winograd(probe *p)
{
    dnnl_dims_t vd = {16, p->tiles, p->c}, ud = {16, p->c, p->k}, md = {16, p->tiles, p->k};
    dnnl_memory_desc_t vm, um, uuser, mm;
    CHECK(dnnl_memory_desc_init_by_tag(&vm, 3, vd, dnnl_bf16, dnnl_abc));
    CHECK(dnnl_memory_desc_init_by_tag(&um, 3, ud, dnnl_bf16, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&uuser, 3, ud, dnnl_f32, dnnl_abc));
    CHECK(dnnl_memory_desc_init_by_tag(&mm, 3, md, dnnl_bf16, dnnl_abc));
    dnnl_matmul_desc_t mdesc;
    CHECK(dnnl_matmul_desc_init(&mdesc, &vm, &um, NULL, &mm));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &mdesc, NULL, p->engine, NULL));
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    float *u_f32 = filter_transform(p);
    dnnl_memory_t u =
        reordered(p, &uuser, u_f32, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
    free(u_f32);
    dnnl_memory_t v = memory_over(p, &vm, p->v), m = memory_over(p, &mm, p->m);
    dnnl_primitive_t prim;
    CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, v}, {DNNL_ARG_WEIGHTS, u}, {DNNL_ARG_DST, m}};
    double best = INFINITY, t_in = 0, t_mm = 0, t_out = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = omp_get_wtime(), a_in = 0, a_mm = 0, a_out = 0;
        for (int n0 = 0; n0 < BATCH; n0 += p->chunk) {
            double t = omp_get_wtime();
            input_transform(p, n0);
            a_in += omp_get_wtime() - t;
            t = omp_get_wtime();
            CHECK(dnnl_primitive_execute(prim, p->stream, 3, args));
            CHECK(dnnl_stream_wait(p->stream));
            a_mm += omp_get_wtime() - t;
            t = omp_get_wtime();
            output_transform(p, n0);
            a_out += omp_get_wtime() - t;
        }
        double total = omp_get_wtime() - t0;
        if (total < best) {
            best = total;
            t_in = a_in, t_mm = a_mm, t_out = a_out;
        }
    }
    printf("winograd  %-32s %8.1f ms  (transform in %.1f, matmul %.1f, transform out %.1f; "
           "chunks of %d images)\n",
           impl, best * 1e3, t_in * 1e3, t_mm * 1e3, t_out * 1e3, p->chunk);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(u);
    dnnl_memory_destroy(v);
    dnnl_memory_destroy(m);
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s C K HW [CHUNK]\n", argv[0]);
        return 2;
    }
    probe p = {.c = atoi(argv[1]),
               .k = atoi(argv[2]),
               .hw = atoi(argv[3]),
               .chunk = argc > 4 ? atoi(argv[4]) : BATCH};
    if (p.c < 16 || p.c % 16 || p.k < 16 || p.k % 16 || p.hw < 1 || p.chunk < 1 ||
        BATCH % p.chunk) {
        fprintf(stderr, "wino-bf16-probe: C and K multiples of 16, HW >= 1, CHUNK dividing %d\n",
                BATCH);
        return 2;
    }
    p.tiles_1d = (p.hw + 1) / 2;
    p.tiles = (int64_t)p.chunk * p.tiles_1d * p.tiles_1d;
    CHECK(dnnl_engine_create(&p.engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&p.stream, p.engine, dnnl_stream_default_flags));
    size_t nx = (size_t)BATCH * p.hw * p.hw * p.c, ny = (size_t)BATCH * p.hw * p.hw * p.k;
    size_t nw = (size_t)p.k * p.c * 9;
    p.x = malloc(nx * 2);
    p.y = malloc(ny * 2);
    p.w = malloc(nw * sizeof(float));
    p.bias = malloc((size_t)p.k * sizeof(float));
    p.v = malloc(16 * (size_t)p.tiles * p.c * 2);
    p.m = malloc(16 * (size_t)p.tiles * p.k * 2);
    uint16_t *y_direct = malloc(ny * 2);
    if (!p.x || !p.y || !p.w || !p.bias || !p.v || !p.m || !y_direct) {
        fprintf(stderr, "wino-bf16-probe: out of memory\n");
        return 1;
    }
    uint64_t seed = 1;
    for (size_t i = 0; i < nx; i++)
        p.x[i] = to_bf16(fmaxf(uniform(&seed), 0.0f)); /* post-ReLU activations */
    float scale = sqrtf(6.0f / (9.0f * (float)p.c));
    for (size_t i = 0; i < nw; i++)
        p.w[i] = scale * uniform(&seed);
    for (int k = 0; k < p.k; k++)
        p.bias[k] = 0.1f * uniform(&seed);
    printf("3x3 convolution, batch %d, %d -> %d channels, %dx%d, bf16, %d threads\n", BATCH, p.c,
           p.k, p.hw, p.hw, omp_get_max_threads());
    double t_direct = run_direct(&p);
    memcpy(y_direct, p.y, ny * 2);
    double t_wino = run_winograd(&p);
    float diff = 0.0f, top = 0.0f;
    for (size_t i = 0; i < ny; i++) {
        diff = fmaxf(diff, fabsf(from_bf16(p.y[i]) - from_bf16(y_direct[i])));
        top = fmaxf(top, fabsf(from_bf16(y_direct[i])));
    }
    printf("winograd / direct time: %.2f (below 1: Winograd faster); max |difference| / max "
           "|output| %.2e\n",
           t_wino / t_direct, top > 0 ? diff / top : diff);
    return 0;
}
