/*
 * vecmath.h - the vector arithmetic search needs, written once: dot products (and so squared
 * norms) of float vectors. Header-only: each is a loop the compiler should see where it is used.
 */
#ifndef VIDFEAT_VECMATH_H
#define VIDFEAT_VECMATH_H

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
