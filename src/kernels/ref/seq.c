/*
 * seq.c - reference kernels of the sequence-model ops, forward and backward: layer
 * normalization over the last axis and GELU (exact or tanh form).
 *
 * Layer norm sees x, of any shape (..., D), as R = numel / D rows of D values. Per row
 * the forward takes the mean and the biased variance in double (two passes: the mean,
 * then the squared deviations, each summed in index order), saves aux = (mean[R],
 * invstd[R]) as floats with invstd = 1 / sqrt(var + eps), and normalizes with those
 * stored floats, so that the backward, which reads x and aux (not y), recomputes exactly
 * the x_hat = (x - mean) * invstd the forward used: y = x_hat * gamma + beta. gamma (w)
 * and beta (b) have shape (D) and may be absent (data NULL): 1 and 0, as in norm.c.
 *
 * GELU is elementwise, in double per element: y = x * Phi(x), Phi the standard normal
 * CDF, 0.5 (1 + erf(x / sqrt 2)); with the approximate attribute, the tanh form
 * y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Its backward reads x only.
 *
 * Every sum runs in a fixed order on the calling thread: two runs are bit-identical.
 */
#include "kernels/ln_row.h"
#include "kernels/ref/ref.h"

#include <math.h>

/* ------------------------------------------------------------------ layer norm */

/* Rows of length d in x: the last axis, and the number of rows. */
static void ln_rows(const struct ktensor *x, int64_t *rows, int64_t *d)
{
    REMAT_ASSERT(x->ndim >= 2 && x->ndim <= 4);
    *d = x->shape[x->ndim - 1];
    *rows = ktensor_numel(x) / *d;
}

/*
 * Layer-norm forward: per row, mean = sum x / D, var = sum (x - mean)^2 / D (biased, as
 * PyTorch), invstd = 1 / sqrt(var + eps); y = (x - mean) * invstd * gamma + beta.
 * Writes out and aux (the R means, then the R inverse stds).
 */
remat_status ref_layer_norm_forward(const struct kop *op)
{
    /* x, y: (R, D) seen flat; aux: (2, R); gamma, beta: (D) */
    const float *x = op->in[0].data, *gamma = op->w.data, *beta = op->b.data;
    float *y = op->out.data, *mean = op->aux.data;
    double eps = op->at->eps > 0 ? op->at->eps : 1e-5;
    int64_t rows, d;

    ln_rows(&op->in[0], &rows, &d);
    for (int64_t r = 0; r < rows; r++)
        ln_row_fwd(x + r * d, y + r * d, &mean[r], &mean[rows + r], d, gamma, beta, eps);
    return REMAT_OK;
}

/* dgamma[k] += sum over rows of dy * x_hat, dbeta[k] += sum over rows of dy: one column
 * at a time, the rows in order (a strided walk; the reference needs no scratch). */
static void ln_param_grads(const struct kop *op, int64_t rows, int64_t d)
{
    const float *x = op->in[0].data, *dy = op->dout.data, *mean = op->aux.data;
    const float *invstd = mean + rows;

    for (int64_t k = 0; k < d; k++) {
        double sg = 0, sb = 0;

        for (int64_t r = 0; r < rows; r++) {
            double g = dy ? dy[r * d + k] : 1.0;

            sg += g * (((double)x[r * d + k] - mean[r]) * invstd[r]);
            sb += g;
        }
        if (op->dw.data)
            op->dw.data[k] += (float)sg;
        if (op->db.data)
            op->db.data[k] += (float)sb;
    }
}

/*
 * Layer-norm backward, from x and aux (not y). With g = dy * gamma and x_hat recomputed,
 * per row (sums over its D elements):
 *   dx += invstd / D * (D g - sum g - x_hat * sum g x_hat),
 * the gradient of the normalization (the mean and the variance both depend on every x of
 * the row); dgamma += sum dy x_hat and dbeta += sum dy over the rows.
 */
remat_status ref_layer_norm_backward(const struct kop *op)
{
    /* x, dx, dy: (R, D) seen flat; aux: (2, R); gamma, dgamma, dbeta: (D) */
    const float *x = op->in[0].data, *gamma = op->w.data, *dy = op->dout.data;
    const float *mean = op->aux.data;
    float *dx = op->din[0].data;
    int64_t rows, d;

    ln_rows(&op->in[0], &rows, &d);
    if (op->dw.data || op->db.data)
        ln_param_grads(op, rows, d);
    if (!dx)
        return REMAT_OK;
    for (int64_t r = 0; r < rows; r++)
        ln_row_bwd(x + r * d, dy ? dy + r * d : NULL, dx + r * d, mean[r], mean[rows + r], d,
                   gamma);
    return REMAT_OK;
}

/* ------------------------------------------------------------------------ gelu */

#define GELU_SQRT_2_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_INV_SQRT_2 0.70710678118654752440 /* 1 / sqrt(2) */
#define GELU_INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */
#define GELU_CUBIC 0.044715

/* y(x): exact x Phi(x), or the tanh form. */
static double gelu(double x, bool approximate)
{
    if (approximate)
        return 0.5 * x * (1.0 + tanh(GELU_SQRT_2_PI * (x + GELU_CUBIC * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * GELU_INV_SQRT_2));
}

/* dy/dx: exact, Phi(x) + x phi(x) with phi the normal density exp(-x^2 / 2) / sqrt(2 pi);
 * tanh form, with u = sqrt(2 / pi) (x + 0.044715 x^3) and t = tanh u,
 * 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2). */
static double gelu_grad(double x, bool approximate)
{
    if (approximate) {
        double t = tanh(GELU_SQRT_2_PI * (x + GELU_CUBIC * x * x * x));

        return 0.5 * (1.0 + t) +
               0.5 * x * (1.0 - t * t) * GELU_SQRT_2_PI * (1.0 + 3.0 * GELU_CUBIC * x * x);
    }
    return 0.5 * (1.0 + erf(x * GELU_INV_SQRT_2)) + x * GELU_INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* gelu forward: y = gelu(x), elementwise, any shape. */
remat_status ref_gelu_forward(const struct kop *op)
{
    /* x, y: (numel) */
    const float *x = op->in[0].data;
    float *y = op->out.data;
    bool approximate = op->at->approximate;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = (float)gelu(x[i], approximate);
    return REMAT_OK;
}

/* gelu backward: dx += dy * gelu'(x). Reads in[0] and dout. */
remat_status ref_gelu_backward(const struct kop *op)
{
    /* x, dy, dx: (numel) */
    const float *x = op->in[0].data, *dy = op->dout.data;
    float *dx = op->din[0].data;
    bool approximate = op->at->approximate;
    int64_t n = ktensor_numel(&op->in[0]);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++)
        dx[i] += (float)((dy ? dy[i] : 1.0) * gelu_grad(x[i], approximate));
    return REMAT_OK;
}
