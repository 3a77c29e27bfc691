/*
 * shape.c - reference transpose: output dimension i is input dimension perm[i] (up to
 * 4 dimensions); the backward adds each output gradient back at its input position.
 */
#include "kernels/ref/ref.h"

/* The input's flat index of every output element, walked in output order. */
static void walk(const struct kop *op, float *dst, const float *src, bool backward)
{
    const struct ktensor *x = &op->in[0];
    int nd = x->ndim;
    int64_t istride[4] = {1, 1, 1, 1}, oshape[4] = {1, 1, 1, 1}, ostride[4], idx[4] = {0};
    int64_t n = ktensor_numel(x);

    for (int d = nd - 2; d >= 0; d--)
        istride[d] = istride[d + 1] * x->shape[d + 1];
    for (int d = 0; d < nd; d++) {
        oshape[d] = x->shape[op->at->perm[d]];
        ostride[d] = istride[op->at->perm[d]]; /* input stride of output dim d */
    }
    for (int64_t o = 0; o < n; o++) {
        int64_t i = 0;

        for (int d = 0; d < nd; d++)
            i += idx[d] * ostride[d];
        if (backward)
            dst[i] += src[o];
        else
            dst[o] = src[i];
        for (int d = nd - 1; d >= 0; d--) { /* next output index */
            if (++idx[d] < oshape[d])
                break;
            idx[d] = 0;
        }
    }
}

remat_status ref_transpose_forward(const struct kop *op)
{
    walk(op, op->out.data, op->in[0].data, false);
    return REMAT_OK;
}

remat_status ref_transpose_backward(const struct kop *op)
{
    if (!op->din[0].data)
        return REMAT_OK;
    if (!op->dout.data)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "transpose: a backward without dy");
    walk(op, op->din[0].data, op->dout.data, true);
    return REMAT_OK;
}
