/*
 * ln_row.h - one row of layer normalization, forward and the input's gradient, in the
 * arithmetic every host backend uses (ref/seq.c says the formulas), so that the cpu
 * backend's rows, run on its threads, give the reference's bits.
 */
#ifndef REMAT_KERNELS_LN_ROW_H
#define REMAT_KERNELS_LN_ROW_H

#include <math.h>
#include <stdint.h>

/* One row of the forward: mean, inverse std and y = (x - mean) invstd gamma + beta. */
static inline void ln_row_fwd(const float *xr, float *yr, float *mean, float *invstd,
                              int64_t d, const float *gamma, const float *beta, double eps)
{
    double sum = 0, sq = 0, mu, mn, is;

    for (int64_t k = 0; k < d; k++)
        sum += xr[k];
    mu = sum / (double)d;
    for (int64_t k = 0; k < d; k++)
        sq += ((double)xr[k] - mu) * ((double)xr[k] - mu);
    *mean = (float)mu;
    *invstd = (float)(1.0 / sqrt(sq / (double)d + eps));
    mn = *mean;
    is = *invstd;
    for (int64_t k = 0; k < d; k++)
        yr[k] = (float)((((double)xr[k] - mn) * is) * (gamma ? gamma[k] : 1.0) +
                        (beta ? beta[k] : 0.0));
}

/* One row of dx += invstd / D (D g - sum g - x_hat sum g x_hat), g = dy gamma. */
static inline void ln_row_bwd(const float *xr, const float *dyr, float *dxr, double mn,
                              double is, int64_t d, const float *gamma)
{
    double s1 = 0, s2 = 0;

    for (int64_t k = 0; k < d; k++) {
        double g = (dyr ? dyr[k] : 1.0) * (gamma ? gamma[k] : 1.0);

        s1 += g;
        s2 += g * (((double)xr[k] - mn) * is);
    }
    for (int64_t k = 0; k < d; k++) {
        double g = (dyr ? dyr[k] : 1.0) * (gamma ? gamma[k] : 1.0);
        double xh = ((double)xr[k] - mn) * is;

        dxr[k] += (float)(is / (double)d * ((double)d * g - s1 - xh * s2));
    }
}

#endif
