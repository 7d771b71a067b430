/*
 * test_check - the comparison helpers of check.h, which every numeric test leans on: a value
 * that is not finite anywhere must make the distance INFINITY and the cosine -INFINITY (so
 * every bound fails), and finite inputs must give the textbook numbers.
 */
#include "check.h"

#include <float.h>

int main(void)
{
    const float ref[4] = {1.0f, -2.0f, 4.0f, 0.5f};
    float a[4];

    /* equal arrays: distance 0, cosine 1 */
    CHECK(vf_max_abs_diff(ref, ref, 4) == 0.0);
    CHECK(vf_rel_err(ref, ref, 4) == 0.0);
    CHECK_NEAR(vf_cosine(ref, ref, 4), 1.0, 1e-15);

    /* a known difference: 0.25 at one place, relative to max|ref| = 4 */
    for (int i = 0; i < 4; i++)
        a[i] = ref[i];
    a[3] = 0.75f;
    CHECK_NEAR(vf_max_abs_diff(a, ref, 4), 0.25, 1e-15);
    CHECK_NEAR(vf_rel_err(a, ref, 4), 0.0625, 1e-15);
    /* opposite vectors: cosine -1; orthogonal: 0 */
    for (int i = 0; i < 4; i++)
        a[i] = -ref[i];
    CHECK_NEAR(vf_cosine(a, ref, 4), -1.0, 1e-15);
    const float x[2] = {1.0f, 0.0f}, y[2] = {0.0f, 3.0f}, z[2] = {0.0f, 0.0f};
    CHECK_NEAR(vf_cosine(x, y, 2), 0.0, 1e-15);
    CHECK(vf_cosine(z, z, 2) == 1.0 && vf_cosine(x, z, 2) == 0.0);
    CHECK(vf_rel_err(z, z, 2) == 0.0 && vf_rel_err(x, z, 2) == 1.0); /* absolute when r is 0 */

    /* every non-finite value, at every position, in either argument */
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        for (int pos = 0; pos < 4; pos++) {
            for (int side = 0; side < 2; side++) {
                for (int i = 0; i < 4; i++)
                    a[i] = ref[i];
                a[pos] = bad[k];
                const float *p = side ? ref : a, *q = side ? a : ref;
                CHECK_MSG(isinf(vf_max_abs_diff(p, q, 4)) && vf_max_abs_diff(p, q, 4) > 0,
                          "value %g at %d (side %d): diff %g", bad[k], pos, side,
                          vf_max_abs_diff(p, q, 4));
                CHECK_MSG(isinf(vf_rel_err(p, q, 4)) && vf_rel_err(p, q, 4) > 0,
                          "value %g at %d (side %d): rel %g", bad[k], pos, side,
                          vf_rel_err(p, q, 4));
                CHECK_MSG(vf_cosine(p, q, 4) == -INFINITY, "value %g at %d (side %d): cos %g",
                          bad[k], pos, side, vf_cosine(p, q, 4));
                /* and so the bounds the tests use all fail */
                CHECK(!(vf_rel_err(p, q, 4) <= 1e-4));
                CHECK(!(vf_cosine(p, q, 4) >= 0.999));
                CHECK(fmin(1.0, vf_cosine(p, q, 4)) == -INFINITY);
                CHECK(fmax(0.0, vf_max_abs_diff(p, q, 4)) == INFINITY);
            }
        }
    }
    /* all NaN against all NaN: the case that once scored 0 */
    const float nan4[4] = {NAN, NAN, NAN, NAN};
    CHECK(vf_rel_err(nan4, nan4, 4) == INFINITY);
    CHECK(vf_cosine(nan4, nan4, 4) == -INFINITY);
    /* the largest finite floats are compared in double: no overflow, cosine 1 */
    const float big[2] = {FLT_MAX, -FLT_MAX};
    CHECK_NEAR(vf_cosine(big, big, 2), 1.0, 1e-12);
    CHECK(vf_all_finite(ref, 4) && !vf_all_finite(nan4, 1) && vf_all_finite(nan4, 0));

    /* CHECK_NEAR itself fails on NaN: !(fabs(NaN) <= tol) */
    double n = NAN;
    CHECK(!(fabs(n - 1.0) <= 1e-3));
    printf("check.h: non-finite values give INFINITY / -INFINITY in every position; finite "
           "inputs give the expected distances and cosines\n");
    return 0;
}
