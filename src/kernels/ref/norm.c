/*
 * norm.c - reference batch normalization in training mode, forward and backward.
 *
 * x is (N, C) or (N, C, H, W); per channel c the statistics run over the M = N*H*W
 * values (H = W = 1 for 2-d); channels are independent, so they run on OpenMP's
 * threads (each channel's sums in the same order whatever the thread count: the bits
 * do not depend on it). The forward saves aux = (mean[C], invstd[C]) as floats,
 * with invstd = 1 / sqrt(var + eps) and var the biased batch variance (two passes in
 * double: the mean, then the squared deviations), and normalizes with those stored float
 * values, so that the backward, which reads x and aux only (not y), recomputes exactly
 * the x_hat = (x - mean) * invstd the forward used. gamma (w) and beta (b) may be absent
 * (data NULL): 1 and 0.
 */
#include "kernels/ref/ref.h"

#include <math.h>

struct bngeom {
    int64_t n, c, s; /* x: (n, c, s) with s = H*W, or 1 for 2-d */
};

/* The (n, c, s) view of a 2-d or 4-d input. */
static struct bngeom bn_geom(const struct ktensor *x)
{
    struct bngeom g = {x->shape[0], x->shape[1], 1};

    REMAT_ASSERT(x->ndim == 2 || x->ndim == 4);
    if (x->ndim == 4)
        g.s = x->shape[2] * x->shape[3];
    return g;
}

/*
 * Batch-norm forward: writes y = gamma * (x - mean) * invstd + beta and aux (mean, then
 * invstd). With update_stats, also running_mean and running_var (when not NULL):
 * r = (1 - momentum) r + momentum * batch, the variance unbiased (times M / (M - 1);
 * with M == 1 the biased value, 0, is used).
 */
remat_status ref_batch_norm_forward(const struct kop *op)
{
    /* x, y: (N, C[, H, W]); aux: (2, C); gamma, beta: (C) */
    const float *x = op->in[0].data, *gamma = op->w.data, *beta = op->b.data;
    float *y = op->out.data, *mean = op->aux.data, *invstd = mean + op->in[0].shape[1];
    struct bngeom g = bn_geom(&op->in[0]);
    double eps = op->at->eps > 0 ? op->at->eps : 1e-5;
    double mom = op->at->momentum > 0 ? op->at->momentum : 0.1;
    double m = (double)(g.n * g.s);

#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.s * g.c > 32768)
    for (int64_t c = 0; c < g.c; c++) {
        double sum = 0, sq = 0, mu, var;

        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++)
                sum += x[(n * g.c + c) * g.s + s];
        mu = sum / m;
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                double d = x[(n * g.c + c) * g.s + s] - mu;

                sq += d * d;
            }
        var = sq / m;
        mean[c] = (float)mu;
        invstd[c] = (float)(1.0 / sqrt(var + eps));
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = (n * g.c + c) * g.s + s;
                double xh = ((double)x[i] - mean[c]) * invstd[c];

                y[i] = (float)(xh * (gamma ? gamma[c] : 1.0) + (beta ? beta[c] : 0.0));
            }
        if (op->update_stats && op->running_mean)
            op->running_mean[c] = (float)((1 - mom) * op->running_mean[c] + mom * mu);
        if (op->update_stats && op->running_var)
            op->running_var[c] = (float)((1 - mom) * op->running_var[c] +
                                         mom * (m > 1 ? var * m / (m - 1) : var));
    }
    return REMAT_OK;
}

/*
 * Batch-norm backward, from x and aux (not y): with x_hat recomputed,
 *   dgamma += sum dy * x_hat,  dbeta += sum dy,
 *   dx += gamma * invstd / M * (M dy - sum dy - x_hat * sum dy * x_hat).
 */
remat_status ref_batch_norm_backward(const struct kop *op)
{
    /* x, dx, dy: (N, C[, H, W]); aux: (2, C); gamma, dgamma, dbeta: (C) */
    const float *x = op->in[0].data, *gamma = op->w.data;
    const float *mean = op->aux.data, *invstd = mean + op->in[0].shape[1];
    float *dx = op->din[0].data;
    struct bngeom g = bn_geom(&op->in[0]);
    double m = (double)(g.n * g.s);

#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.s * g.c > 32768)
    for (int64_t c = 0; c < g.c; c++) {
        double sdy = 0, sdyx = 0, k;

        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = (n * g.c + c) * g.s + s;
                double dy = ref_dy(&op->dout, i);

                sdy += dy;
                sdyx += dy * (((double)x[i] - mean[c]) * invstd[c]);
            }
        if (op->dw.data)
            op->dw.data[c] += (float)sdyx;
        if (op->db.data)
            op->db.data[c] += (float)sdy;
        if (!dx)
            continue;
        k = (gamma ? gamma[c] : 1.0) * invstd[c] / m;
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = (n * g.c + c) * g.s + s;
                double xh = ((double)x[i] - mean[c]) * invstd[c];

                dx[i] += (float)(k * (m * ref_dy(&op->dout, i) - sdy - xh * sdyx));
            }
    }
    return REMAT_OK;
}
