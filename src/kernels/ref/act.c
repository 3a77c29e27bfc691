/*
 * act.c - reference activations, forward and backward: relu, clip, leaky relu, sigmoid
 * and tanh (elementwise, any shape; each backward reads its output y only), hard sigmoid
 * (reads y) and hard swish (reads x), softmax over axis 1 of a 2-d or 4-d tensor (in
 * double, the maximum subtracted), dropout.
 *
 * relu's backward reads its output y only (y > 0 exactly where x > 0). Dropout keeps
 * element i when kernel_uniform(key, i) >= p, i the flat index, and scales it by
 * 1 / (1 - p); its backward draws the same mask again from the key and reads nothing
 * else, so a recomputed forward and the backward agree with the first forward.
 */
#include "kernels/ref/ref.h"

#include <math.h>

/* relu forward: y = max(x, 0) (a NaN stays NaN). */
remat_status ref_relu_forward(const struct kop *op)
{
    /* x, y: (numel) */
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] < 0 ? 0.0f : x[i];
    return REMAT_OK;
}

/* relu backward: dx += dy where y > 0. Reads out and dout. The loops add everywhere and
 * keep the sum where y > 0 (a select, no branch, over restrict pointers: the buffers
 * never overlap), so they vectorize; the bits are those of the conditional add. */
remat_status ref_relu_backward(const struct kop *op)
{
    /* y, dy, dx: (numel) */
    const float *restrict y = op->out.data, *restrict dy = op->dout.data;
    float *restrict dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);

    if (!dx)
        return REMAT_OK;
    if (!dy) { /* dy = 1 */
        for (int64_t i = 0; i < n; i++) {
            float s = dx[i] + 1.0f;

            dx[i] = y[i] > 0 ? s : dx[i];
        }
        return REMAT_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        float s = dx[i] + dy[i]; /* computed always, kept where y > 0 */

        dx[i] = y[i] > 0 ? s : dx[i];
    }
    return REMAT_OK;
}

/* clip forward: y = min(max(x, lo), hi) (a NaN stays NaN). */
remat_status ref_clip_forward(const struct kop *op)
{
    /* x, y: (numel) */
    const float *restrict x = op->in[0].data;
    float *restrict y = op->out.data;
    float lo = op->at->clip_min, hi = op->at->clip_max;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    return REMAT_OK;
}

/* clip backward: dx += dy where lo < y < hi (there lo < x < hi too: PyTorch's hardtanh
 * gradient). Reads out and dout; the same select form as relu's. */
remat_status ref_clip_backward(const struct kop *op)
{
    /* y, dy, dx: (numel) */
    const float *restrict y = op->out.data, *restrict dy = op->dout.data;
    float *restrict dx = op->din[0].data;
    float lo = op->at->clip_min, hi = op->at->clip_max;
    int64_t n = ktensor_numel(&op->out);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++) {
        float s = dx[i] + (dy ? dy[i] : 1.0f);

        dx[i] = y[i] > lo && y[i] < hi ? s : dx[i];
    }
    return REMAT_OK;
}

/* leaky relu forward: y = x < 0 ? alpha x : x (a NaN stays NaN, -0 stays -0). */
remat_status ref_leaky_relu_forward(const struct kop *op)
{
    const float *restrict x = op->in[0].data;
    float *restrict y = op->out.data;
    float a = op->at->alpha;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] < 0 ? a * x[i] : x[i];
    return REMAT_OK;
}

/* leaky relu backward: dx += dy where y > 0, alpha dy elsewhere (alpha > 0: y > 0 exactly
 * where x > 0, PyTorch's rule). */
remat_status ref_leaky_relu_backward(const struct kop *op)
{
    const float *restrict y = op->out.data, *restrict dy = op->dout.data;
    float *restrict dx = op->din[0].data;
    float a = op->at->alpha;
    int64_t n = ktensor_numel(&op->out);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++) {
        float g = dy ? dy[i] : 1.0f;

        dx[i] += y[i] > 0 ? g : a * g;
    }
    return REMAT_OK;
}

/* sigmoid forward: y = 1 / (1 + exp(-x)), in double. */
remat_status ref_sigmoid_forward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
    return REMAT_OK;
}

/* sigmoid backward: dx += dy y (1 - y), in double. */
remat_status ref_sigmoid_backward(const struct kop *op)
{
    const float *y = op->out.data;
    float *dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++)
        dx[i] += (float)((double)ref_dy(&op->dout, i) * y[i] * (1.0 - (double)y[i]));
    return REMAT_OK;
}

/* tanh forward: y = tanh(x), in double. */
remat_status ref_tanh_forward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = (float)tanh((double)x[i]);
    return REMAT_OK;
}

/* tanh backward: dx += dy (1 - y^2), in double. */
remat_status ref_tanh_backward(const struct kop *op)
{
    const float *y = op->out.data;
    float *dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++)
        dx[i] += (float)((double)ref_dy(&op->dout, i) * (1.0 - (double)y[i] * y[i]));
    return REMAT_OK;
}

/* The (outer, channels, inner) view of a softmax over axis 1. */
static void softmax_geom(const struct ktensor *t, int64_t *outer, int64_t *c, int64_t *inner)
{
    *outer = t->shape[0];
    *c = t->shape[1];
    *inner = t->ndim == 4 ? t->shape[2] * t->shape[3] : 1;
}

/* softmax forward over axis 1: y = exp(x - max) / sum exp(x - max), in double. */
remat_status ref_softmax_forward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t no, nc, ni;

    softmax_geom(&op->in[0], &no, &nc, &ni);
    for (int64_t o = 0; o < no; o++)
        for (int64_t s = 0; s < ni; s++) {
            const float *xr = x + o * nc * ni + s;
            float *yr = y + o * nc * ni + s;
            double m = xr[0], sum = 0;

            for (int64_t c = 1; c < nc; c++)
                m = xr[c * ni] > m ? xr[c * ni] : m;
            for (int64_t c = 0; c < nc; c++)
                sum += exp((double)xr[c * ni] - m);
            for (int64_t c = 0; c < nc; c++)
                yr[c * ni] = (float)(exp((double)xr[c * ni] - m) / sum);
        }
    return REMAT_OK;
}

/* softmax backward: dx += y (dy - sum_c dy y), in double; reads y. */
remat_status ref_softmax_backward(const struct kop *op)
{
    const float *y = op->out.data;
    float *dx = op->din[0].data;
    int64_t no, nc, ni;

    if (!dx)
        return REMAT_OK;
    softmax_geom(&op->out, &no, &nc, &ni);
    for (int64_t o = 0; o < no; o++)
        for (int64_t s = 0; s < ni; s++) {
            int64_t base = o * nc * ni + s;
            double dot = 0;

            for (int64_t c = 0; c < nc; c++)
                dot += (double)ref_dy(&op->dout, base + c * ni) * y[base + c * ni];
            for (int64_t c = 0; c < nc; c++) {
                int64_t i = base + c * ni;

                dx[i] += (float)((double)y[i] * ((double)ref_dy(&op->dout, i) - dot));
            }
        }
    return REMAT_OK;
}

/* p with its default (remat.h: 0 means 0.5, as shape inference fills it). */
static float drop_p(const remat_attrs *at)
{
    return at->p > 0 ? at->p : 0.5f;
}

/* dropout forward: y[i] = x[i] / (1 - p) where kernel_uniform(key, i) >= p, else 0. */
remat_status ref_dropout_forward(const struct kop *op)
{
    /* x, y: (numel) */
    const float *x = op->in[0].data;
    float *y = op->out.data, p = drop_p(op->at);
    float scale = (float)(1.0 / (1.0 - (double)p));
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = kernel_uniform(op->key, (uint64_t)i) >= p ? x[i] * scale : 0.0f;
    return REMAT_OK;
}

/* dropout backward: dx[i] += dy[i] / (1 - p) on the kept elements. Reads dout only. */
remat_status ref_dropout_backward(const struct kop *op)
{
    /* dy, dx: (numel) */
    float *dx = op->din[0].data, p = drop_p(op->at);
    float scale = (float)(1.0 / (1.0 - (double)p));
    int64_t n = ktensor_numel(&op->in[0]);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++)
        if (kernel_uniform(op->key, (uint64_t)i) >= p)
            dx[i] += ref_dy(&op->dout, i) * scale;
    return REMAT_OK;
}

/* hard_sigmoid's slope and offset: alpha 0 is PyTorch's Hardsigmoid (remat.h). */
static void hard_sigmoid_ab(const remat_attrs *at, double *a, double *b)
{
    *a = at->alpha != 0 ? at->alpha : 1.0 / 6;
    *b = at->alpha != 0 ? at->beta : 0.5;
}

/* hard_sigmoid forward: y = min(1, max(0, alpha x + beta)), in double. */
remat_status ref_hard_sigmoid_forward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t n = ktensor_numel(&op->in[0]);
    double a, b;

    hard_sigmoid_ab(op->at, &a, &b);
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)fmin(1.0, fmax(0.0, a * x[i] + b));
    return REMAT_OK;
}

/* hard_sigmoid backward: dx += alpha dy where 0 < y < 1 (the slope's open interval;
 * an x within rounding of the ends counts where its float y lands). */
remat_status ref_hard_sigmoid_backward(const struct kop *op)
{
    const float *y = op->out.data;
    float *dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);
    double a, b;

    if (!dx)
        return REMAT_OK;
    hard_sigmoid_ab(op->at, &a, &b);
    for (int64_t i = 0; i < n; i++)
        if (y[i] > 0 && y[i] < 1)
            dx[i] += (float)(a * ref_dy(&op->dout, i));
    return REMAT_OK;
}

/* hard_swish forward: y = x min(max(x + 3, 0), 6) / 6, in double (PyTorch's order). */
remat_status ref_hard_swish_forward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t n = ktensor_numel(&op->in[0]);

    for (int64_t i = 0; i < n; i++)
        y[i] = (float)((double)x[i] * fmin(fmax((double)x[i] + 3, 0.0), 6.0) / 6);
    return REMAT_OK;
}

/* hard_swish backward, reading x: dx += dy times 0 below -3, x / 3 + 1/2 up to 3
 * (3 itself included, as PyTorch), 1 above. */
remat_status ref_hard_swish_backward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);

    if (!dx)
        return REMAT_OK;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], d = v < -3 ? 0.0 : v <= 3 ? v / 3 + 0.5 : 1.0;

        dx[i] += (float)(d * ref_dy(&op->dout, i));
    }
    return REMAT_OK;
}
