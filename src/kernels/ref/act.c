/*
 * act.c - reference relu, clip and dropout, forward and backward (elementwise, any
 * shape).
 *
 * relu's backward reads its output y only (y > 0 exactly where x > 0). Dropout keeps
 * element i when kernel_uniform(key, i) >= p, i the flat index, and scales it by
 * 1 / (1 - p); its backward draws the same mask again from the key and reads nothing
 * else, so a recomputed forward and the backward agree with the first forward.
 */
#include "kernels/ref/ref.h"

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
