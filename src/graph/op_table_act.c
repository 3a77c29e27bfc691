/*
 * op_table_act.c - the rows of the mobile networks' activations (hard_sigmoid,
 * hard_swish) and of reduce_sum: shape inference and FLOPs (struct op_info's contracts,
 * graph.h). FLOPs count the arithmetic of each element: hard_sigmoid a multiply-add and
 * two comparisons, hard_swish those and a multiply; reduce_sum one add per input
 * element either way (the backward spreads each output's gradient back).
 */
#include "graph/op_table.h"

remat_status graph_infer_hard_sigmoid(const struct gvalue *const *in, int n_in,
                                      remat_attrs *at, struct gvalue *out, struct gvalue *aux,
                                      int *n_params, struct gvalue *params, const char *name)
{
    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if (at->alpha == 0) { /* PyTorch's Hardsigmoid: relu6(x + 3) / 6 */
        at->alpha = 1.0f / 6;
        at->beta = 0.5f;
    }
    if (!(at->alpha > -1e30f && at->alpha < 1e30f && at->beta > -1e30f && at->beta < 1e30f))
        return SHAPE_FAIL("hard_sigmoid needs finite alpha and beta, got %g and %g", name,
                          (double)at->alpha, (double)at->beta);
    copy_shape(out, in[0]);
    return REMAT_OK;
}

double graph_flops_hard_act(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    (void)backward;
    return 4.0 * (double)graph_numel(out);
}

remat_status graph_infer_reduce_sum(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                    struct gvalue *out, struct gvalue *aux, int *n_params,
                                    struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if (at->ndim != x->ndim)
        return SHAPE_FAIL("reduce_sum's shape has %d dimensions for a %d-d input", name,
                          at->ndim, x->ndim);
    for (int i = 0; i < x->ndim; i++)
        if (at->shape[i] != x->shape[i] && at->shape[i] != 1)
            return SHAPE_FAIL("reduce_sum keeps axis %d (%lld) or sums it to 1, not %lld", name,
                              i, (long long)x->shape[i], (long long)at->shape[i]);
    if (at->scale == 0)
        at->scale = 1;
    if (!(at->scale > -1e30f && at->scale < 1e30f))
        return SHAPE_FAIL("reduce_sum needs a finite scale", name);
    copy_shape(out, x);
    memcpy(out->shape, at->shape, sizeof out->shape);
    return REMAT_OK;
}

double graph_flops_reduce_sum(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                              const struct gvalue *out, bool backward)
{
    (void)n_in;
    (void)at;
    (void)out;
    (void)backward;
    return (double)graph_numel(in[0]);
}
