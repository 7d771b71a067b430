/*
 * ann_faiss.cpp - ann.h by FAISS's C++ API (Debian's static libfaiss). Every call catches what
 * FAISS throws and turns it into a status with FAISS's reason: no exception leaves this file.
 */
/* vidfeat's C headers, with C linkage (ann.h declares its own calls so) */
extern "C" {
#include "core/log.h"
#include "core/mem.h"
#include "core/status.h"
#include "core/vecmath.h"
}
#include "search/ann.h"
#include "search/faiss_file.h"

#include <dlfcn.h>
#include <unistd.h>
#include <omp.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <faiss/AutoTune.h>
#include <faiss/IVFlib.h>
#include <faiss/Index.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <faiss/utils/Heap.h>

typedef faiss::Index::idx_t idx_t;

struct vf_ann {
    faiss::Index *index; /* owned */
    int64_t codes_read;  /* by the last search: vfi_ann_codes_read */
};

/* FAISS's exception message is long (it names its source file): its first line. */
static vf_status caught(vf_err *err, vf_status code, const char *what, const std::exception &e)
{
    std::string msg = e.what();
    const faiss::FaissException *fe = dynamic_cast<const faiss::FaissException *>(&e);
    if (fe)
        msg = fe->msg;
    size_t nl = msg.find('\n');
    if (nl != std::string::npos)
        msg.resize(nl);
    /* "Error in F at FILE:LINE: Error: 'COND' failed: WHY": WHY, without FAISS's source */
    size_t at = msg.rfind("failed: ");
    if (at != std::string::npos)
        msg = msg.substr(at + 8);
    else if ((at = msg.rfind("Error: ")) != std::string::npos)
        msg = msg.substr(at + 7);
    else if (msg.compare(0, 9, "Error in ") == 0 && (at = msg.find(": ")) != std::string::npos)
        msg = msg.substr(at + 2);
    if (msg.find("read error") != std::string::npos)
        msg = "cut short or damaged";
    return vfi_fail(err, code, "%s: %s", what, msg.c_str());
}

/* FAISS parallelises with OpenMP and calls BLAS inside and between its parallel regions; an
 * OpenBLAS built with its own threads then spins against OpenMP's (measured on 2 cores: an
 * IVF-PQ build 54 s -> 18 s and a search 2.4 s -> 0.1 s with BLAS on one thread; giving BLAS
 * every core while training made IVF-Flat's training faster but IVF-PQ's twice as slow). So
 * BLAS runs on the calling thread, unless OPENBLAS_NUM_THREADS says otherwise. Found by name:
 * BLAS is whichever libblas the system gives (the call is OpenBLAS's; other BLAS libraries lack
 * it and are left alone). Process-wide, as OpenBLAS's setting is. */
static void quiet_blas_threads()
{
    if (getenv("OPENBLAS_NUM_THREADS"))
        return;
    typedef void (*set_threads_fn)(int);
    set_threads_fn set = (set_threads_fn)dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (set)
        set(1);
}

/* OpenBLAS chooses its kernels when it loads, by the CPU's model number; Debian 12's (0.3.21)
 * does not know CPUs newer than it (an Emerald Rapids Xeon, family 6 model 207) and takes them
 * for a Prescott: SSE3 kernels where the CPU has AVX-512, every FAISS training and encoding
 * twice as slow (measured: 300,000 x 1280 indexed in 117 s, in 54 s with OPENBLAS_CORETYPE =
 * SkylakeX). Its documented cure is that variable, read when it loads: this says which value
 * fits, so that the command can start again with it and others can be told. */
extern "C" const char *vfi_ann_blas_coretype(void)
{
    if (getenv("OPENBLAS_CORETYPE"))
        return nullptr; /* chosen already */
    typedef char *(*corename_fn)(void);
    corename_fn corename = (corename_fn)dlsym(RTLD_DEFAULT, "openblas_get_corename");
    if (!corename || !corename())
        return nullptr; /* not OpenBLAS */
    const char *now = corename();
    /* the cores it falls back to for a CPU it does not know */
    if (strcmp(now, "Prescott") && strcmp(now, "Core2") && strcmp(now, "Nehalem") &&
        strcmp(now, "Sandybridge"))
        return nullptr;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return strcmp(now, "Sandybridge") ? "Haswell" : nullptr;
#endif
    return nullptr;
}

extern "C" void vfi_ann_blas_restart(char **argv)
{
    const char *core = vfi_ann_blas_coretype();
    if (!core || setenv("OPENBLAS_CORETYPE", core, 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* could not start again: on as it is */
}

/* The index beneath an id map or a transform, where the kind is told. */
static const faiss::Index *innermost(const faiss::Index *ix)
{
    for (;;) {
        if (const faiss::IndexIDMap *m = dynamic_cast<const faiss::IndexIDMap *>(ix))
            ix = m->index;
        else if (const faiss::IndexPreTransform *t =
                     dynamic_cast<const faiss::IndexPreTransform *>(ix))
            ix = t->index;
        else
            return ix;
    }
}

/* The IVF of index, itself or behind transforms (*t: those, or NULL), whose vectors are then the
 * ones the chain makes; NULL for other kinds (an id map over an IVF included: its ids are not the
 * IVF's). */
static faiss::IndexIVF *ivf_behind_transforms(faiss::Index *index, faiss::IndexPreTransform **t)
{
    *t = dynamic_cast<faiss::IndexPreTransform *>(index);
    return dynamic_cast<faiss::IndexIVF *>(*t ? (*t)->index : index);
}

vf_status vfi_ann_create(const char *description, int dim, vf_ann **out, vf_err *err)
{
    *out = nullptr;
    if (const char *core = vfi_ann_blas_coretype())
        vfi_log(VF_LOG_WARNING, "blas",
                "the system's OpenBLAS does not know this CPU and runs its generic kernels: "
                "start with OPENBLAS_CORETYPE=%s in the environment for about twice the "
                "indexing speed (the vidfeat command does)",
                core);
    if (!description || dim < 1)
        return vfi_fail(err, VF_ERR_INVALID, "an index needs a description and a dimension");
    faiss::Index *ix = nullptr;
    quiet_blas_threads();
    try {
        ix = faiss::index_factory(dim, description, faiss::METRIC_L2);
        /* polysemous training (codes ordered for Hamming filtering, which vidfeat never uses)
         * is most of an IVF-PQ's training time */
        faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(ix);
        if (faiss::IndexIVFPQ *pq = dynamic_cast<faiss::IndexIVFPQ *>(ivf)) {
            pq->do_polysemous_training = false;
            /* the codebooks: 10 iterations on 64 points a centroid (FAISS: 25 on 256) */
            pq->pq.cp.niter = 10;
            pq->pq.cp.max_points_per_centroid = 64;
        }
        /* the lists' centroids: 10 k-means iterations instead of 25 (2.5x faster training; the
         * lists move little after 10, and vidfeat ranks candidates exactly anyway) */
        if (ivf) {
            ivf->cp.niter = 10;
            /* as few as 32 training vectors a list (FAISS warns below 39), so that a 2048-d
             * archive, whose sample holds half as many vectors as a 1280-d one, gets as many
             * lists (vfi_index_choose_kind) */
            ivf->cp.min_points_per_centroid = 32;
        }
        /* a PCA's covariance from 20 points a dimension (FAISS: up to 1,000), plenty for the
         * leading 256 directions and 4x faster on a large sample */
        if (faiss::IndexPreTransform *t = dynamic_cast<faiss::IndexPreTransform *>(ix))
            for (faiss::VectorTransform *vt : t->chain)
                if (faiss::PCAMatrix *pca = dynamic_cast<faiss::PCAMatrix *>(vt))
                    pca->max_points_per_d = 20;
        /* the caller's ids: kinds that keep none (flat, HNSW) are given a map */
        if (!faiss::ivflib::try_extract_index_ivf(ix) && !dynamic_cast<faiss::IndexIDMap *>(ix)) {
            faiss::IndexIDMap *m = new faiss::IndexIDMap(ix);
            m->own_fields = true;
            ix = m;
        }
    } catch (const std::exception &e) {
        delete ix;
        return caught(err, VF_ERR_INVALID, description, e);
    }
    vf_ann *a = (vf_ann *)vfi_calloc(1, sizeof(*a));
    if (!a) {
        delete ix;
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    a->index = ix;
    a->codes_read = -1;
    *out = a;
    return VF_OK;
}

void vfi_ann_free(vf_ann **pa)
{
    if (!pa || !*pa)
        return;
    delete (*pa)->index;
    vfi_free(*pa);
    *pa = nullptr;
}

int vfi_ann_needs_training(const vf_ann *a)
{
    return !a->index->is_trained;
}

/* A product quantiser's codebooks also stored transposed, which FAISS encodes with in a loop over
 * the codebook (vectorised) instead of a call per codeword: with PQ64 on 256 floats (4-float
 * pieces) encoding was two thirds of adding to an IVF-PQ index (measured on 2 cores of an AMD
 * EPYC, 300,000 x 1280-d). Not in the file FAISS writes: made again after training and reading. */
static void transpose_codebooks(faiss::Index *ix)
{
    faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(ix);
    if (faiss::IndexIVFPQ *pq = dynamic_cast<faiss::IndexIVFPQ *>(ivf))
        if (pq->is_trained)
            pq->pq.sync_transposed_centroids();
}

vf_status vfi_ann_train(vf_ann *a, int64_t n, const float *x, vf_err *err)
{
    try {
        a->index->train(n, x);
        transpose_codebooks(a->index);
    } catch (const std::exception &e) {
        return caught(err, VF_ERR_INVALID, "training the index", e);
    }
    return VF_OK;
}

/* The nearest of a product quantiser's 256 codewords to each piece of each of n vectors x (n x
 * M * dsub floats), written as codes[i * stride + m]. The codebooks as FAISS keeps them
 * transposed (ct: dsub x M x 256), so that a piece's 256 distances are one loop the compiler
 * vectorises; built for AVX-512 and AVX2 beside the plain version, the CPU choosing at run time.
 * Debian's FAISS is built without SIMD: its loop for this (fvec_L2sqr_ny_nearest_y_transposed)
 * runs scalar, a third of the time adding to an IVF-PQ index (perf, 300,000 x 1280-d). The same
 * nearest codeword, up to the rounding of a tie. */
VF_VECTOR_CLONES static void pq_encode(const float *ct, size_t M, size_t dsub, const float *x,
                                       size_t n, uint8_t *codes, size_t stride)
{
    const size_t K = 256;
    float dis[256];
    for (size_t i = 0; i < n; i++) {
        const float *xi = x + i * M * dsub;
        for (size_t m = 0; m < M; m++) {
            for (size_t k = 0; k < K; k++)
                dis[k] = 0.0f;
            for (size_t j = 0; j < dsub; j++) {
                const float v = xi[m * dsub + j], *c = ct + (j * M + m) * K;
                for (size_t k = 0; k < K; k++) {
                    float d = v - c[k];
                    dis[k] += d * d;
                }
            }
            /* the smallest, the first of equals: 16 lanes at a time, then across the lanes */
            float bm[16];
            int32_t bi[16];
            for (int l = 0; l < 16; l++) {
                bm[l] = dis[l];
                bi[l] = l;
            }
            for (size_t k = 16; k < K; k += 16) {
                for (int l = 0; l < 16; l++) {
                    float dk = dis[k + (size_t)l];
                    int lt = dk < bm[l];
                    bm[l] = lt ? dk : bm[l];
                    bi[l] = lt ? (int32_t)k + l : bi[l];
                }
            }
            int best = 0;
            for (int l = 1; l < 16; l++)
                if (bm[l] < bm[best] || (bm[l] == bm[best] && bi[l] < bi[best]))
                    best = l;
            codes[i * stride + m] = (uint8_t)bi[best];
        }
    }
}

/* Adding to an IVF-PQ index of 8-bit codes over residuals (what "auto" makes), with the codes
 * made by pq_encode: the vectors through the index's transforms, assigned to their lists, their
 * residuals encoded, then added as the index's standalone codes (list number and code), which
 * is what add_with_ids stores. false (nothing done) for any other index. */
static bool add_ivfpq(faiss::Index *index, idx_t n, const float *x, const idx_t *ids)
{
    faiss::IndexPreTransform *t;
    faiss::IndexIVFPQ *ivf = dynamic_cast<faiss::IndexIVFPQ *>(ivf_behind_transforms(index, &t));
    if (!ivf || !ivf->by_residual || ivf->pq.nbits != 8 || ivf->metric_type != faiss::METRIC_L2 ||
        ivf->pq.transposed_centroids.empty() || n < 1)
        return false;
    const float *xt = t ? t->apply_chain(n, x) : x;
    std::unique_ptr<const float[]> owned(xt != x ? xt : nullptr);
    size_t d = (size_t)ivf->d, M = ivf->pq.M, cs = ivf->pq.code_size;
    size_t coarse = ivf->coarse_code_size(), stride = coarse + cs;
    std::vector<idx_t> lists((size_t)n);
    ivf->quantizer->assign(n, xt, lists.data());
    for (idx_t l : lists)
        if (l < 0)
            return false; /* a vector no list takes (not finite): FAISS's own path skips it */
    std::vector<float> residuals((size_t)n * d);
    ivf->quantizer->compute_residual_n(n, xt, residuals.data(), lists.data());
    std::vector<uint8_t> codes((size_t)n * stride);
    for (idx_t i = 0; i < n; i++)
        ivf->encode_listno(lists[(size_t)i], codes.data() + (size_t)i * stride);
    pq_encode(ivf->pq.transposed_centroids.data(), M, ivf->pq.dsub, residuals.data(), (size_t)n,
              codes.data() + coarse, stride);
    ivf->add_sa_codes(n, codes.data(), ids);
    if (t)
        t->ntotal = ivf->ntotal;
    return true;
}

vf_status vfi_ann_add(vf_ann *a, int64_t n, const float *x, const int64_t *ids, vf_err *err)
{
    vf_status rc = VF_OK;
    try {
        static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS ids are 64-bit");
        if (!add_ivfpq(a->index, n, x, reinterpret_cast<const idx_t *>(ids)))
            a->index->add_with_ids(n, x, reinterpret_cast<const idx_t *>(ids));
    } catch (const std::bad_alloc &) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory adding to the index");
    } catch (const std::exception &e) {
        rc = caught(err, VF_ERR_INVALID, "adding to the index", e);
    }
    return rc;
}

vf_status vfi_ann_remove_range(vf_ann *a, int64_t lo, int64_t hi, int64_t *removed, vf_err *err)
{
    if (removed)
        *removed = 0;
    if (dynamic_cast<const faiss::IndexHNSW *>(innermost(a->index)))
        return vfi_fail(err, VF_ERR_UNSUPPORTED, "an HNSW index cannot remove vectors");
    try {
        faiss::IDSelectorRange range(lo, hi);
        size_t n = a->index->remove_ids(range);
        if (removed)
            *removed = (int64_t)n;
    } catch (const std::exception &e) {
        return caught(err, VF_ERR_UNSUPPORTED, "removing from the index", e);
    }
    return VF_OK;
}

const char *vfi_ann_probe_name(const vf_ann *a)
{
    const faiss::Index *in = innermost(a->index);
    if (dynamic_cast<const faiss::IndexHNSW *>(in))
        return "efSearch";
    if (faiss::ivflib::try_extract_index_ivf(const_cast<faiss::Index *>(a->index)))
        return "nprobe";
    return nullptr;
}

/* ---- IVF-PQ lists scanned by vidfeat ---------------------------------------------------------
 *
 * For the IVF-PQ "auto" makes (8-bit codes of residuals, L2, FAISS's precomputed table of kind 1)
 * a list is scanned here: FAISS's generic build (Debian's: no SIMD) scans a code through a decoder
 * object at about 2.6 cycles a table lookup, which was 45% of a "more like this" search at a
 * million vectors (perf: PCAR256,IVF2048,PQ64, 128 lists probed). The arithmetic is FAISS's
 * (IndexIVFPQ.cpp, precompute_list_tables_L2 with use_precomputed_table 1): a code's distance
 * is the query's distance to the list's centroid plus, for each piece m, table[m][code[m]], where
 * table = the list's precomputed 2<centroid, codeword> + |codeword|^2 less 2<query, codeword>.
 * Only the order of the sums differs (four running sums), so distances may differ from FAISS's
 * in the last bits; vidfeat ranks the candidates again by their exact cosines anyway. */

/* ip[m][k] = <x's piece m, codeword k of piece m>, ct the codebooks transposed (dsub x M x 256). */
VF_VECTOR_CLONES static void piece_products(const float *ct, size_t M, size_t dsub, const float *x,
                                            float *ip)
{
    const size_t K = 256;
    for (size_t i = 0; i < M * K; i++)
        ip[i] = 0.0f;
    for (size_t m = 0; m < M; m++)
        for (size_t j = 0; j < dsub; j++) {
            const float v = x[m * dsub + j], *c = ct + (j * M + m) * K;
            float *o = ip + m * K;
            for (size_t k = 0; k < K; k++)
                o[k] += v * c[k];
        }
}

/* A list's table: its precomputed terms less twice the query's products. */
VF_VECTOR_CLONES static void list_table(const float *pre, const float *ip, size_t n, float *table)
{
    for (size_t i = 0; i < n; i++)
        table[i] = pre[i] - 2.0f * ip[i];
}

/* The n codes (M bytes each) of a list into the max-heap of the k nearest (dist, ids): each code's
 * distance dis0 + the sum of its pieces' table entries. */
static void scan_list(const float *table, size_t M, float dis0, const uint8_t *codes,
                      const idx_t *list_ids, size_t n, idx_t k, float *dist, idx_t *ids)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *c = codes + i * M;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        size_t m = 0;
        for (; m + 4 <= M; m += 4) {
            s0 += table[m * 256 + c[m]];
            s1 += table[(m + 1) * 256 + c[m + 1]];
            s2 += table[(m + 2) * 256 + c[m + 2]];
            s3 += table[(m + 3) * 256 + c[m + 3]];
        }
        for (; m < M; m++)
            s0 += table[m * 256 + c[m]];
        const float d = dis0 + ((s0 + s1) + (s2 + s3));
        if (d < dist[0])
            faiss::maxheap_replace_top(k, dist, ids, d, list_ids[i]);
    }
}

/* One query's lists (keys and coarse: nprobe of them, -1 skipped) from the j0-th, every step-th,
 * into its heap (dist, ids: k, a max-heap); ip its piece products. Codes read. */
static int64_t scan_lists(const faiss::IndexIVFPQ *pq, const float *ip, const idx_t *keys,
                          const float *coarse, size_t nprobe, size_t j0, size_t step, idx_t k,
                          float *dist, idx_t *ids)
{
    const size_t M = pq->pq.M, T = M * 256;
    std::vector<float> table(T);
    int64_t read = 0;
    for (size_t j = j0; j < nprobe; j += step) {
        const idx_t key = keys[j];
        if (key < 0 || (size_t)key >= pq->nlist)
            continue;
        const size_t len = pq->invlists->list_size((size_t)key);
        if (!len)
            continue;
        list_table(pq->precomputed_table.data() + (size_t)key * T, ip, T, table.data());
        faiss::InvertedLists::ScopedCodes codes(pq->invlists, (size_t)key);
        faiss::InvertedLists::ScopedIds list_ids(pq->invlists, (size_t)key);
        scan_list(table.data(), M, coarse[j], codes.get(), list_ids.get(), len, k, dist, ids);
        read += (int64_t)len;
    }
    return read;
}

/* One query x's nearest k into dist and ids (nearest first) from its lists (keys and coarse:
 * nprobe of them); split: the lists shared among the threads, a heap each, merged. Codes read. */
static int64_t scan_query(const faiss::IndexIVFPQ *pq, const float *x, const idx_t *keys,
                          const float *coarse, size_t nprobe, idx_t k, bool split, float *dist,
                          idx_t *ids)
{
    const size_t M = pq->pq.M;
    std::vector<float> ip(M * 256);
    piece_products(pq->pq.transposed_centroids.data(), M, pq->pq.dsub, x, ip.data());
    faiss::maxheap_heapify(k, dist, ids);
    int64_t read = 0;
    if (!split) {
        read = scan_lists(pq, ip.data(), keys, coarse, nprobe, 0, 1, k, dist, ids);
    } else {
#pragma omp parallel reduction(+ : read)
        {
            const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
            std::vector<float> hd((size_t)k);
            std::vector<idx_t> hi((size_t)k);
            faiss::maxheap_heapify(k, hd.data(), hi.data());
            read = scan_lists(pq, ip.data(), keys, coarse, nprobe, t, nt, k, hd.data(), hi.data());
#pragma omp critical
            for (idx_t i = 0; i < k; i++)
                if (hi[(size_t)i] >= 0 && hd[(size_t)i] < dist[0])
                    faiss::maxheap_replace_top(k, dist, ids, hd[(size_t)i], hi[(size_t)i]);
        }
    }
    faiss::maxheap_reorder(k, dist, ids);
    return read;
}

/* search_preassigned's work for an IVF-PQ of the kind above: keys and coarse (n x nprobe; a key
 * of -1 is skipped) the lists of each query xt, their centroids' distances; into dist and ids
 * (n x k, nearest first). The queries shared out among the threads, or, fewer queries than
 * threads, each query's lists. false (nothing done) for any other IVF. */
static bool scan_ivfpq(const faiss::IndexIVF *ivf, idx_t n, const float *xt, idx_t k, size_t nprobe,
                       const idx_t *keys, const float *coarse, float *dist, idx_t *ids,
                       int64_t *codes_read)
{
    const faiss::IndexIVFPQ *pq = dynamic_cast<const faiss::IndexIVFPQ *>(ivf);
    if (!pq || !pq->by_residual || pq->metric_type != faiss::METRIC_L2 || pq->pq.nbits != 8 ||
        pq->use_precomputed_table != 1 || pq->pq.transposed_centroids.empty() ||
        pq->pq.code_size != pq->pq.M || pq->polysemous_ht != 0 ||
        pq->precomputed_table.size() != ivf->nlist * pq->pq.M * 256)
        return false;
    const size_t d = (size_t)ivf->d;
    int64_t read = 0;
    if (n >= omp_get_max_threads()) {
#pragma omp parallel for reduction(+ : read)
        for (idx_t q = 0; q < n; q++)
            read += scan_query(pq, xt + (size_t)q * d, keys + (size_t)q * nprobe,
                               coarse + (size_t)q * nprobe, nprobe, k, false, dist + q * k,
                               ids + q * k);
    } else { /* not inside a parallel region: a nested team is made anew each time */
        for (idx_t q = 0; q < n; q++)
            read +=
                scan_query(pq, xt + (size_t)q * d, keys + (size_t)q * nprobe,
                           coarse + (size_t)q * nprobe, nprobe, k, true, dist + q * k, ids + q * k);
    }
    *codes_read = read;
    return true;
}

/* An IVF search that reads about as many codes as its nprobe lists would if the lists were of
 * equal length: each query's nearest lists, nearest first, until they hold nprobe x ntotal /
 * nlist codes (the list that reaches it included), at most nprobe lists. k-means leaves lists of
 * very unequal lengths, and a query falls most often where the lists are long: 10,000,000 2048-d
 * vectors in 2,048 lists (scripts/bench-index.py), 128 lists probed held 1,765,000 codes, 2.8x
 * their share, searched in 27.3 / 35.7 ms p50 / p99; read so, 655,000 codes, 12.7 / 17.6 ms, the
 * same recall@10 (0.988). The lists cut are the farthest of those probed. false (nothing done)
 * for a kind that is not an IVF, directly or behind transforms. */
static bool search_ivf_budget(faiss::Index *index, idx_t n, const float *q, idx_t k, float *dist,
                              idx_t *ids, int64_t *codes_read, bool own_scan)
{
    faiss::IndexPreTransform *t;
    faiss::IndexIVF *ivf = ivf_behind_transforms(index, &t);
    if (!ivf || ivf->nlist < 1 || ivf->ntotal < 1)
        return false;
    size_t nprobe = ivf->nprobe < ivf->nlist ? ivf->nprobe : ivf->nlist;
    if (nprobe < 1)
        nprobe = 1;
    const float *xt = t ? t->apply_chain(n, q) : q;
    std::unique_ptr<const float[]> owned(xt != q ? xt : nullptr);
    std::vector<idx_t> keys((size_t)n * nprobe);
    std::vector<float> coarse((size_t)n * nprobe);
    ivf->quantizer->search(n, xt, (idx_t)nprobe, coarse.data(), keys.data());
    const double budget = (double)nprobe * (double)ivf->ntotal / (double)ivf->nlist;
    for (idx_t i = 0; i < n; i++) {
        double held = 0;
        for (size_t j = 0; j < nprobe; j++) {
            idx_t &key = keys[(size_t)i * nprobe + j];
            if (key < 0)
                continue;
            if (held >= budget)
                key = -1; /* FAISS skips a list numbered -1 */
            else
                held += (double)ivf->invlists->list_size((size_t)key);
        }
    }
    if (own_scan &&
        scan_ivfpq(ivf, n, xt, k, nprobe, keys.data(), coarse.data(), dist, ids, codes_read))
        return true;
    faiss::IndexIVFStats stats;
    ivf->search_preassigned(n, xt, k, keys.data(), coarse.data(), dist, ids, false, nullptr,
                            &stats);
    *codes_read = (int64_t)stats.ndis;
    return true;
}

vf_status vfi_ann_search(vf_ann *a, const float *q, int k, int probe, int64_t *ids, float *dist,
                         vf_err *err)
{
    return vfi_ann_search_many(a, 1, q, k, probe, ids, dist, err);
}

static vf_status search_many(vf_ann *a, int64_t n, const float *q, int k, int probe, int64_t *ids,
                             float *dist, bool own_scan, vf_err *err)
{
    try {
        const char *name = vfi_ann_probe_name(a);
        if (probe > 0 && name)
            faiss::ParameterSpace().set_index_parameter(a->index, name, probe);
        /* an IVF shares its threads out by query (mode 3: FAISS's default, 0, shares them only
         * in IndexIVF::search, and search_preassigned, which search_ivf_budget calls, then runs
         * on one thread); fewer queries than threads (similar's one frame) share the probed lists
         * instead: 1.7x faster for one query on 2 cores (3.3 -> 1.95 ms at 200,000 x 1280-d,
         * nprobe 128, AMD EPYC) */
        if (faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(a->index))
            ivf->parallel_mode = n < omp_get_max_threads() ? 1 : 3;
        idx_t *labels = reinterpret_cast<idx_t *>(ids);
        a->codes_read = -1;
        if (!search_ivf_budget(a->index, (idx_t)n, q, k, dist, labels, &a->codes_read, own_scan)) {
            a->index->search((idx_t)n, q, k, dist, labels);
            if (!name) /* exact: every vector */
                a->codes_read = n * (int64_t)a->index->ntotal;
        }
    } catch (const std::bad_alloc &) {
        return vfi_fail(err, VF_ERR_NOMEM, "searching the index: out of memory");
    } catch (const std::exception &e) {
        return caught(err, VF_ERR_INVALID, "searching the index", e);
    }
    return VF_OK;
}

vf_status vfi_ann_search_many(vf_ann *a, int64_t n, const float *q, int k, int probe, int64_t *ids,
                              float *dist, vf_err *err)
{
    return search_many(a, n, q, k, probe, ids, dist, true, err);
}

vf_status vfi_ann_search_many_faiss(vf_ann *a, int64_t n, const float *q, int k, int probe,
                                    int64_t *ids, float *dist, vf_err *err)
{
    return search_many(a, n, q, k, probe, ids, dist, false, err);
}

int64_t vfi_ann_codes_read(const vf_ann *a)
{
    return a->codes_read;
}

int64_t vfi_ann_count(const vf_ann *a)
{
    return (int64_t)a->index->ntotal;
}

int vfi_ann_dim(const vf_ann *a)
{
    return a->index->d;
}

vf_status vfi_ann_write(const vf_ann *a, FILE *f, vf_err *err)
{
    try {
        faiss::write_index(a->index, f);
    } catch (const std::exception &e) {
        return caught(err, VF_ERR_IO, "writing the index", e);
    }
    return VF_OK;
}

/*
 * An index file is untrusted input (docs/security.md): FAISS checks the sizes it reads but not
 * what the structures say of each other, and a search follows them (HNSW's neighbour lists and
 * levels, an IVF's lists) as they are. Only the kinds vidfeat makes are accepted, and every
 * relation a search relies on is checked: "" when it holds, else what is wrong.
 */
/* L2 or inner product (read as the int the file holds: another value is not a MetricType) */
static bool known_metric(const faiss::Index *ix)
{
    int m;
    std::memcpy(&m, &ix->metric_type, sizeof(m));
    return m == faiss::METRIC_L2 || m == faiss::METRIC_INNER_PRODUCT;
}

static const char *check_flat(const faiss::Index *ix)
{
    if (!known_metric(ix))
        return "an index measuring distance in a way vidfeat does not";
    const faiss::IndexFlat *f = dynamic_cast<const faiss::IndexFlat *>(ix);
    if (!f || f->code_size != (size_t)f->d * sizeof(float))
        return "a flat index of another kind";
    if (f->codes.size() != (size_t)f->ntotal * f->code_size)
        return "a flat index whose vectors do not fill it";
    return "";
}

static const char *check_hnsw(const faiss::IndexHNSW *h)
{
    const faiss::HNSW &g = h->hnsw;
    size_t n = (size_t)h->ntotal;
    if (!h->storage || h->storage->d != h->d || (size_t)h->storage->ntotal != n ||
        *check_flat(h->storage))
        return "an HNSW index whose vectors do not match its graph";
    const std::vector<int> &cum = g.cum_nneighbor_per_level;
    if (cum.empty() || cum[0] != 0 || g.levels.size() != n || g.offsets.size() != n + 1 ||
        g.offsets[0] != 0 || g.efSearch < 1 || g.efSearch > (1 << 20))
        return "an HNSW graph of inconsistent sizes";
    for (size_t l = 1; l < cum.size(); l++)
        if (cum[l] < cum[l - 1])
            return "an HNSW graph of inconsistent sizes";
    int top = 0;
    for (size_t i = 0; i < n; i++) {
        int lv = g.levels[i];
        if (lv < 1 || (size_t)lv >= cum.size() ||
            g.offsets[i + 1] - g.offsets[i] != (size_t)cum[lv] || g.offsets[i + 1] < g.offsets[i])
            return "an HNSW graph whose levels do not match its neighbour lists";
        top = lv > top ? lv : top;
    }
    if (g.neighbors.size() != g.offsets[n])
        return "an HNSW graph whose neighbour lists do not fill it";
    for (faiss::HNSW::storage_idx_t v : g.neighbors)
        if (v < -1 || (v >= 0 && (size_t)v >= n))
            return "an HNSW graph with a neighbour out of range";
    if (n == 0 ? g.entry_point != -1
               : g.entry_point < 0 || (size_t)g.entry_point >= n || g.max_level != top - 1 ||
                     g.levels[g.entry_point] - 1 != g.max_level)
        return "an HNSW graph whose entry point is not one of its nodes at its top level";
    return "";
}

/* A bool as a file set it: FAISS reads the byte as it is, and loading a bool that holds anything
 * but 0 or 1 is undefined. The byte, read as a byte (1 or 0 for a sound flag). */
static unsigned bool_byte(const bool &b)
{
    unsigned char v;
    memcpy(&v, &b, 1);
    return v;
}

static const char *check_ivf(const faiss::IndexIVF *ivf)
{
    const faiss::ArrayInvertedLists *lists =
        dynamic_cast<const faiss::ArrayInvertedLists *>(ivf->invlists);
    if (!lists || !ivf->quantizer || lists->nlist != ivf->nlist ||
        lists->code_size != ivf->code_size || lists->codes.size() != ivf->nlist ||
        lists->ids.size() != ivf->nlist || ivf->quantizer->d != ivf->d ||
        (size_t)ivf->quantizer->ntotal != ivf->nlist || *check_flat(ivf->quantizer) ||
        !known_metric(ivf) || ivf->quantizer->metric_type != ivf->metric_type || ivf->nprobe < 1 ||
        ivf->nprobe > ivf->nlist)
        return "an IVF index of inconsistent sizes";
    size_t total = 0;
    for (size_t l = 0; l < ivf->nlist; l++) {
        if (lists->codes[l].size() != lists->ids[l].size() * ivf->code_size)
            return "an IVF list whose codes do not match its ids";
        for (idx_t id : lists->ids[l])
            if (id < 0)
                return "an IVF list holding a negative id (vidfeat's ids are not)";
        total += lists->ids[l].size();
    }
    if (total != (size_t)ivf->ntotal)
        return "an IVF index whose lists do not hold its vectors";
    if (const faiss::IndexIVFPQ *pq = dynamic_cast<const faiss::IndexIVFPQ *>(ivf)) {
        if (bool_byte(pq->by_residual) > 1)
            return "an IVF-PQ index with a flag that is neither true nor false";
        const faiss::ProductQuantizer &q = pq->pq;
        if (q.M < 1 || q.nbits != 8 || q.ksub != 256 || q.dsub * q.M != (size_t)ivf->d ||
            q.code_size != q.M || ivf->code_size != q.code_size ||
            q.centroids.size() != q.M * q.ksub * q.dsub)
            return "an IVF-PQ index whose codebooks do not match its codes";
    } else if (const faiss::IndexIVFScalarQuantizer *sq =
                   dynamic_cast<const faiss::IndexIVFScalarQuantizer *>(ivf)) {
        if (sq->sq.qtype != faiss::ScalarQuantizer::QT_8bit || sq->sq.d != (size_t)ivf->d ||
            sq->sq.code_size != (size_t)ivf->d || ivf->code_size != (size_t)ivf->d ||
            sq->sq.trained.size() != 2 * (size_t)ivf->d)
            return "an IVF-SQ8 index whose quantizer does not match its codes";
    } else if (!dynamic_cast<const faiss::IndexIVFFlat *>(ivf) ||
               ivf->code_size != (size_t)ivf->d * sizeof(float)) {
        return "an IVF index of a kind vidfeat does not make";
    }
    return "";
}

static const char *check_index(const faiss::Index *ix, int depth)
{
    if (!ix || ix->d < 1 || ix->d > (1 << 16) || ix->ntotal < 0 || depth > 4)
        return "an index of impossible sizes";
    if (bool_byte(ix->is_trained) > 1)
        return "an index with a flag that is neither true nor false";
    /* FAISS's scanners throw for other metrics, inside parallel regions: the process ends */
    if (!known_metric(ix))
        return "an index measuring distance in a way vidfeat does not";
    if (const faiss::IndexIDMap *m = dynamic_cast<const faiss::IndexIDMap *>(ix)) {
        if (!m->index || m->index->d != m->d || m->index->ntotal != m->ntotal ||
            m->id_map.size() != (size_t)m->ntotal)
            return "an id map that does not match its index";
        for (idx_t id : m->id_map)
            if (id < 0)
                return "an id map holding a negative id (vidfeat's ids are not)";
        return check_index(m->index, depth + 1);
    }
    if (const faiss::IndexPreTransform *t = dynamic_cast<const faiss::IndexPreTransform *>(ix)) {
        int d = t->d;
        for (const faiss::VectorTransform *vt : t->chain) {
            const faiss::LinearTransform *lt = dynamic_cast<const faiss::LinearTransform *>(vt);
            if (lt && (bool_byte(lt->is_trained) > 1 || bool_byte(lt->have_bias) > 1))
                return "a transform with a flag that is neither true nor false";
            if (!lt || lt->d_in != d || lt->d_out < 1 || !lt->is_trained ||
                lt->A.size() != (size_t)lt->d_in * lt->d_out ||
                ((lt->have_bias || !lt->b.empty()) && lt->b.size() != (size_t)lt->d_out))
                return "a transform whose matrix does not match its sizes";
            d = lt->d_out;
        }
        if (!t->index || t->index->d != d || t->index->ntotal != t->ntotal)
            return "a transform that does not match its index";
        return check_index(t->index, depth + 1);
    }
    if (const faiss::IndexHNSW *h = dynamic_cast<const faiss::IndexHNSW *>(ix))
        return check_hnsw(h);
    if (const faiss::IndexIVF *ivf = dynamic_cast<const faiss::IndexIVF *>(ix))
        return check_ivf(ivf);
    if (dynamic_cast<const faiss::IndexFlat *>(ix))
        return check_flat(ix);
    return "an index of a kind vidfeat does not make";
}

/* The ids ix answers with, each given to fn in turn (the first nonzero it returns ends the
 * walk): an id map's, an IVF's lists', else the positions 0..ntotal-1 (flat, HNSW). */
static int ids_of(const faiss::Index *ix, int (*fn)(void *, int64_t), void *user)
{
    if (const faiss::IndexIDMap *m = dynamic_cast<const faiss::IndexIDMap *>(ix)) {
        for (idx_t id : m->id_map)
            if (int rc = fn(user, (int64_t)id))
                return rc;
        return 0;
    }
    if (const faiss::IndexPreTransform *t = dynamic_cast<const faiss::IndexPreTransform *>(ix))
        return ids_of(t->index, fn, user);
    if (const faiss::IndexIVF *ivf = dynamic_cast<const faiss::IndexIVF *>(ix)) {
        const faiss::ArrayInvertedLists *lists =
            dynamic_cast<const faiss::ArrayInvertedLists *>(ivf->invlists);
        for (size_t l = 0; lists && l < lists->nlist; l++)
            for (idx_t id : lists->ids[l])
                if (int rc = fn(user, (int64_t)id))
                    return rc;
        return 0;
    }
    for (idx_t i = 0; i < ix->ntotal; i++)
        if (int rc = fn(user, (int64_t)i))
            return rc;
    return 0;
}

int vfi_ann_each_id(const vf_ann *a, int (*fn)(void *user, int64_t id), void *user)
{
    return ids_of(a->index, fn, user);
}

vf_status vfi_ann_read(FILE *f, vf_ann **out, vf_err *err)
{
    *out = nullptr;
    /* the structure first: FAISS's reader trusts the sizes it reads */
    if (vf_status rc = vfi_faiss_file_check(f, err))
        return rc;
    faiss::Index *ix = nullptr;
    quiet_blas_threads();
    try {
        /* IVF-PQ's table of precomputed distances is made after the checks, from what they
         * checked (FAISS would make it while reading, from sizes not yet checked) */
        ix = faiss::read_index(f, faiss::IO_FLAG_SKIP_PRECOMPUTE_TABLE);
        const char *why = check_index(ix, 0);
        if (*why) {
            delete ix;
            return vfi_fail(err, VF_ERR_INVALID, "not an index vidfeat made: %s", why);
        }
        faiss::IndexIVFPQ *pq =
            dynamic_cast<faiss::IndexIVFPQ *>(faiss::ivflib::try_extract_index_ivf(ix));
        if (pq && pq->is_trained && pq->by_residual)
            pq->precompute_table();
        transpose_codebooks(ix);
    } catch (const std::bad_alloc &) {
        return vfi_fail(err, VF_ERR_INVALID, "not an index FAISS can read (a size beyond memory)");
    } catch (const std::exception &e) {
        return caught(err, VF_ERR_INVALID, "not an index FAISS can read", e);
    }
    vf_ann *a = (vf_ann *)vfi_calloc(1, sizeof(*a));
    if (!a) {
        delete ix;
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    a->index = ix;
    a->codes_read = -1;
    *out = a;
    return VF_OK;
}

void vfi_ann_version(char *buf, size_t size)
{
    snprintf(buf, size, "FAISS %d.%d.%d", FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR,
             FAISS_VERSION_PATCH);
}
