/*
 * reduce.c - reference reduce_sum: the input (up to 4-d) summed over the axes where the
 * output's shape has 1 and the input's does not, times scale (a mean: 1 / count).
 *
 * Each output element sums its inputs in row-major order with a double accumulator;
 * the backward adds scale dy of an input's output element to each input's gradient.
 * Both read the two shapes only, padded to 4-d with leading 1s.
 */
#include "kernels/ref/ref.h"

/* t's shape as 4-d, leading 1s added; each stride of the output (0 on a summed axis). */
static void geom(const struct ktensor *x, const struct ktensor *y, int64_t xs[4],
                 int64_t ostride[4])
{
    int64_t ys[4], s = 1;
    int k = 4 - x->ndim;

    for (int i = 0; i < 4; i++) {
        xs[i] = i < k ? 1 : x->shape[i - k];
        ys[i] = i < k ? 1 : y->shape[i - k];
    }
    for (int i = 3; i >= 0; i--) {
        ostride[i] = ys[i] == xs[i] ? s : 0;
        s *= ys[i];
    }
}

/* the output index o of each input element i, visiting the input in row-major order */
#define FOR_EACH_IN(xs, os, i, o)                                                        \
    for (int64_t a0 = 0, i = 0; a0 < xs[0]; a0++)                                        \
        for (int64_t a1 = 0; a1 < xs[1]; a1++)                                           \
            for (int64_t a2 = 0; a2 < xs[2]; a2++)                                       \
                for (int64_t a3 = 0, o = a0 * os[0] + a1 * os[1] + a2 * os[2]; a3 < xs[3]; \
                     a3++, i++, o += os[3])

remat_status ref_reduce_sum_forward(const struct kop *op)
{
    const float *x = op->in[0].data;
    float *y = op->out.data;
    int64_t xs[4], os[4], is[4], lo[4], hi[4], ny = ktensor_numel(&op->out);
    double scale = op->at->scale != 0 ? op->at->scale : 1.0;

    geom(&op->in[0], &op->out, xs, os);
    is[3] = 1;
    for (int i = 2; i >= 0; i--)
        is[i] = is[i + 1] * xs[i + 1];
    /* output j's box of inputs: its own index on a kept axis, all of a summed one;
     * visited in row-major order */
    for (int64_t j = 0; j < ny; j++) {
        double s = 0;
        int64_t r = j;

        for (int i = 3; i >= 0; i--) {
            int64_t n = os[i] ? xs[i] : 1;

            lo[i] = os[i] ? r % n : 0;
            hi[i] = os[i] ? lo[i] + 1 : xs[i];
            r /= n;
        }
        for (int64_t a0 = lo[0]; a0 < hi[0]; a0++)
            for (int64_t a1 = lo[1]; a1 < hi[1]; a1++)
                for (int64_t a2 = lo[2]; a2 < hi[2]; a2++)
                    for (int64_t a3 = lo[3]; a3 < hi[3]; a3++)
                        s += x[a0 * is[0] + a1 * is[1] + a2 * is[2] + a3];
        y[j] = (float)(s * scale);
    }
    return REMAT_OK;
}

remat_status ref_reduce_sum_backward(const struct kop *op)
{
    float *dx = op->din[0].data;
    int64_t xs[4], os[4];
    double scale = op->at->scale != 0 ? op->at->scale : 1.0;

    if (!dx)
        return REMAT_OK;
    geom(&op->in[0], &op->out, xs, os);
    FOR_EACH_IN(xs, os, i, o)
        dx[i] += (float)(scale * ref_dy(&op->dout, o));
    return REMAT_OK;
}
