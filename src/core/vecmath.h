/*
 * vecmath.h - the vector arithmetic search needs, written once: dot products (and so squared
 * norms) of float vectors; and how a hot loop is built for several vector extensions.
 * Header-only: each is a loop the compiler should see where it is used.
 */
#ifndef VIDFEAT_VECMATH_H
#define VIDFEAT_VECMATH_H

/* A hot loop built for AVX-512 and AVX2 too and chosen when the program loads (GCC on x86-64
 * Linux). Not under the sanitizers: their builds run the resolver before the sanitizer's
 * runtime is up (ThreadSanitizer then crashes at load), and they check the plain loop alike. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define VF_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VF_VECTOR_CLONES
#endif

/* x . y over dim floats, summed in double (exact enough to rank near-equal cosines). */
static inline double vfi_dot(const float *x, const float *y, int dim)
{
    double s = 0;
    for (int i = 0; i < dim; i++)
        s += (double)x[i] * y[i];
    return s;
}

/* x . y summed in float: for unit vectors, where dim terms of at most 1 lose nothing that
 * matters and the loop vectorises. */
static inline float vfi_dot_f(const float *x, const float *y, int dim)
{
    float s = 0;
    for (int i = 0; i < dim; i++)
        s += x[i] * y[i];
    return s;
}

#endif /* VIDFEAT_VECMATH_H */
