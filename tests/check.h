/*
 * check.h - the test harness: a few macros, no framework. A failed check prints
 * "file:line: expression" (and detail) and exits 1; SKIP exits 77, which ctest reports as
 * skipped.
 */
#ifndef VIDFEAT_CHECK_H
#define VIDFEAT_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, __LINE__,  \
                    #a, #b, a_, b_);                                                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tol))) {                                                           \
            fprintf(stderr, "%s:%d: CHECK_NEAR(%s, %s, %s) failed: %.9g vs %.9g\n", __FILE__,      \
                    __LINE__, #a, #b, #tol, a_, b_);                                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* A vf_status expression that must be >= 0; msg_expr gives the detail on failure. */
#define CHECK_OK(expr, msg_expr)                                                                   \
    do {                                                                                           \
        int rc_ = (int)(expr);                                                                     \
        if (rc_ < 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #expr,               \
                    vf_status_str((vf_status)rc_), (msg_expr));                                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define SKIP(...)                                                                                  \
    do {                                                                                           \
        fflush(stdout); /* what the test printed first, before the reason, not into it */          \
        fprintf(stderr, "skipped: ");                                                              \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(77);                                                                                  \
    } while (0)

/* The comparisons below never let a broken output look close: any value that is not finite
 * (NaN, +-inf) in either array makes the distance INFINITY and the cosine -INFINITY. (A plain
 * `d > worst` loop skips NaN, and fmax/fmin drop it, which is how an all-NaN output once had
 * error 0.) test_check holds them to this. */
static inline int vf_all_finite(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}

/* max |a - r| over n values; INFINITY when any value is not finite. */
static inline double vf_max_abs_diff(const float *a, const float *r, size_t n)
{
    if (!vf_all_finite(a, n) || !vf_all_finite(r, n))
        return INFINITY;
    double diff = 0.0;
    for (size_t i = 0; i < n; i++)
        diff = fmax(diff, fabs((double)a[i] - r[i]));
    return diff;
}

/* Relative error of a against reference r: max|a - r| / max|r| (max|a - r| when r is all 0);
 * INFINITY when any value is not finite. */
static inline double vf_rel_err(const float *a, const float *r, size_t n)
{
    double diff = vf_max_abs_diff(a, r, n), mag = 0.0;
    if (isinf(diff))
        return INFINITY;
    for (size_t i = 0; i < n; i++)
        mag = fmax(mag, fabs((double)r[i]));
    return mag > 0.0 ? diff / mag : diff;
}

/* Cosine similarity (1 when both are all 0, 0 when one is); -INFINITY when any value is not
 * finite, so every `>= bound` check fails on it and fmin keeps it. */
static inline double vf_cosine(const float *a, const float *b, size_t n)
{
    if (!vf_all_finite(a, n) || !vf_all_finite(b, n))
        return -INFINITY;
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (!(aa > 0.0 && bb > 0.0))
        return aa == bb ? 1.0 : 0.0;
    double c = ab / sqrt(aa * bb);
    return isfinite(c) ? c : -INFINITY; /* squares past double's range */
}

/* Copy a file (test fixtures into a scratch directory); any failure fails the test. */
static inline void vf_copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CHECK(in && out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        CHECK(fwrite(buf, 1, n, out) == n);
    fclose(in);
    CHECK(fclose(out) == 0);
}

#endif /* VIDFEAT_CHECK_H */
