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

/* Sums over channel c of an (n, c, s) tensor in double, in a fixed order: four partial
 * sums over consecutive elements of each plane (element k into lane k % 4), added
 * lane by lane, the lanes then combined as (l0 + l1) + (l2 + l3). With sq, sums
 * (x - mu)^2; with dy, sums dy and dy (x - mu) invstd into *s1. Independent lanes let
 * the compiler vectorize; the order is the same on every run and thread count. */
static void bn_sums(const struct bngeom *g, int64_t c, const float *x, const float *dy,
                    double mu, double invstd, bool sq, double *s0, double *s1)
{
    double a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};

    for (int64_t n = 0; n < g->n; n++) {
        const float *xp = x + (n * g->c + c) * g->s, *dp = dy ? dy + (n * g->c + c) * g->s : NULL;
        int64_t k = 0;

        for (; k + 4 <= g->s; k += 4)
            for (int l = 0; l < 4; l++) {
                double v = (double)xp[k + l] - mu;

                if (dp) {
                    a[l] += dp[k + l];
                    b[l] += (double)dp[k + l] * (v * invstd);
                } else {
                    a[l] += sq ? v * v : xp[k + l];
                }
            }
        for (; k < g->s; k++) {
            double v = (double)xp[k] - mu;

            if (dp) {
                a[k & 3] += dp[k];
                b[k & 3] += (double)dp[k] * (v * invstd);
            } else {
                a[k & 3] += sq ? v * v : xp[k];
            }
        }
    }
    *s0 = (a[0] + a[1]) + (a[2] + a[3]);
    if (s1)
        *s1 = (b[0] + b[1]) + (b[2] + b[3]);
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
        double sum, sq, mu, var, gm = gamma ? gamma[c] : 1.0, bt = beta ? beta[c] : 0.0, mn, is;

        bn_sums(&g, c, x, NULL, 0, 0, false, &sum, NULL);
        mu = sum / m;
        bn_sums(&g, c, x, NULL, mu, 0, true, &sq, NULL);
        var = sq / m;
        mean[c] = (float)mu;
        invstd[c] = (float)(1.0 / sqrt(var + eps));
        mn = mean[c];
        is = invstd[c];
        for (int64_t n = 0; n < g.n; n++) {
            const float *xp = x + (n * g.c + c) * g.s;
            float *yp = y + (n * g.c + c) * g.s;

            for (int64_t k = 0; k < g.s; k++)
                yp[k] = (float)((((double)xp[k] - mn) * is) * gm + bt);
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
        double sdy, sdyx, k, mn = mean[c], is = invstd[c];

        if (op->dout.data) {
            bn_sums(&g, c, x, op->dout.data, mn, is, false, &sdy, &sdyx);
        } else { /* dy = 1: sum dy = M, sum x_hat */
            bn_sums(&g, c, x, NULL, mn, 0, false, &sdyx, NULL);
            sdy = m;
            sdyx = (sdyx - m * mn) * is;
        }
        if (op->dw.data)
            op->dw.data[c] += (float)sdyx;
        if (op->db.data)
            op->db.data[c] += (float)sdy;
        if (!dx)
            continue;
        k = (gamma ? gamma[c] : 1.0) * is / m;
        for (int64_t n = 0; n < g.n; n++) {
            int64_t base = (n * g.c + c) * g.s;
            const float *xp = x + base, *dp = op->dout.data ? op->dout.data + base : NULL;
            float *dxp = dx + base;

            for (int64_t j = 0; j < g.s; j++) {
                double xh = ((double)xp[j] - mn) * is;

                dxp[j] += (float)(k * (m * (dp ? (double)dp[j] : 1.0) - sdy - xh * sdyx));
            }
        }
    }
    return REMAT_OK;
}
