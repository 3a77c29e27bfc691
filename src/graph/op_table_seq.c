/*
 * op_table_seq.c - shape inference and FLOPs of the ops that transformers add to the
 * convolutional set: layer normalization over the last axis, GELU, the batched
 * matrix product, the softmax over the last axis (causal mask optional), the
 * embedding of token ids and the token-level cross-entropy. Their rows are in op_table.c's table; op_table.h declares them.
 *
 * Layer norm on x of shape (..., D) treats x as R = numel / D rows of D values: each
 * row gets its own mean and inverse std, kept in aux as (2, R) (all the means, then all
 * the inverse stds), and the parameters gamma and beta have shape (D), shared by every
 * row (PyTorch's nn.LayerNorm(D)).
 */
#include "graph/op_table.h"

#include <string.h>

remat_status graph_infer_layer_norm(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                    struct gvalue *out, struct gvalue *aux, int *n_params,
                                    struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];
    int64_t d;

    (void)n_in;
    if (x->ndim < 2)
        return SHAPE_FAIL("expects an input of 2 to 4 dimensions (rows over the last "
                          "axis), got %d-d", name, x->ndim);
    if (!(at->eps >= 0))
        return SHAPE_FAIL("needs eps >= 0, got %g", name, (double)at->eps);
    at->eps = at->eps > 0 ? at->eps : 1e-5f;
    d = x->shape[x->ndim - 1];
    if (d <= 0)
        return SHAPE_FAIL("normalizes over an empty last axis", name);
    copy_shape(out, x);
    set_shape(aux, 2, 2, graph_numel(x) / d, 0, 0); /* mean and inverse std per row */
    set_shape(&params[0], 1, d, 0, 0, 0);           /* gamma */
    set_shape(&params[1], 1, d, 0, 0, 0);           /* beta */
    *n_params = 2;
    return REMAT_OK;
}

/* Per element, forward: the mean (1 add), the variance (subtract, square, add: 3), the
 * normalization and affine map (subtract, 2 multiplies, add: 4), 8 in all. Backward:
 * x_hat again (2), dy * gamma (1), the two row sums (3), dx (4) and the dgamma and dbeta
 * sums (3), 13 in all. */
double graph_flops_layer_norm(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                              const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 13.0 : 8.0) * (double)graph_numel(out);
}

/* Per element, counting erf, tanh and exp as one each. Forward, the tanh form (the
 * larger): x^3 (2), the polynomial (2), the scale (1), tanh (1), 1 + t (1), times x / 2
 * (2): 9. Backward: Phi (or the tanh form's 0.5 (1 + t)) and the density term (about 9),
 * times dy and the accumulation (2): 11. */
double graph_flops_gelu(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                        const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 11.0 : 9.0) * (double)graph_numel(out);
}

/*
 * matmul: A (..., M, K) times B (..., K, N), batch by batch over the leading axes (equal
 * in A and B), or B 2-d (K, N) shared by every batch; trans_a / trans_b read A or B
 * with its last two axes swapped, so A is (..., K, M) then (and B (..., N, K)).
 */
remat_status graph_infer_matmul(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                struct gvalue *out, struct gvalue *aux, int *n_params,
                                struct gvalue *params, const char *name)
{
    const struct gvalue *a = in[0], *b = in[1];
    int64_t m, ka, kb, n;

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if (a->ndim < 2 || b->ndim < 2)
        return SHAPE_FAIL("multiplies matrices: inputs of 2 to 4 dimensions, got %d-d and "
                          "%d-d", name, a->ndim, b->ndim);
    if (b->ndim != 2 && b->ndim != a->ndim)
        return SHAPE_FAIL("B must be 2-d or have A's %d dimensions, got %d-d", name, a->ndim,
                          b->ndim);
    for (int i = 0; b->ndim > 2 && i < a->ndim - 2; i++)
        if (a->shape[i] != b->shape[i])
            return SHAPE_FAIL("batch axis %d differs: %lld in A, %lld in B", name, i,
                              (long long)a->shape[i], (long long)b->shape[i]);
    m = a->shape[a->ndim - (at->trans_a ? 1 : 2)];
    ka = a->shape[a->ndim - (at->trans_a ? 2 : 1)];
    kb = b->shape[b->ndim - (at->trans_b ? 1 : 2)];
    n = b->shape[b->ndim - (at->trans_b ? 2 : 1)];
    if (ka != kb)
        return SHAPE_FAIL("inner sizes differ: A gives %lld, B %lld", name, (long long)ka,
                          (long long)kb);
    copy_shape(out, a);
    out->shape[a->ndim - 2] = m;
    out->shape[a->ndim - 1] = n;
    return REMAT_OK;
}

/* 2 M N K per batch forward (a multiply and an add per term); the backward forms dA
 * (M K N terms) and dB (K N M terms): twice that. */
double graph_flops_matmul(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                          const struct gvalue *out, bool backward)
{
    const struct gvalue *a = in[0];
    double k = (double)a->shape[a->ndim - (at->trans_a ? 2 : 1)];

    (void)n_in;
    return (backward ? 4.0 : 2.0) * (double)graph_numel(out) * k;
}

remat_status graph_infer_softmax_last(const struct gvalue *const *in, int n_in,
                                      remat_attrs *at, struct gvalue *out, struct gvalue *aux,
                                      int *n_params, struct gvalue *params, const char *name)
{
    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if (!(at->scale >= 0) || at->scale > 1e30f)
        return SHAPE_FAIL("needs a scale > 0 (0: 1), got %g", name, (double)at->scale);
    if (in[0]->ndim < 2)
        return SHAPE_FAIL("takes rows over the last axis: 2 to 4 dimensions, got %d-d", name,
                          in[0]->ndim);
    copy_shape(out, in[0]);
    return REMAT_OK;
}

/* As the channel softmax: per element the max, exp, sum and divide forward (5), the dot
 * and the difference times y backward (4); a causal mask only lowers it. */
double graph_flops_softmax_last(const struct gvalue *const *in, int n_in,
                                const remat_attrs *at, const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 4.0 : 5.0) * (double)graph_numel(out);
}

remat_status graph_infer_embedding(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                   struct gvalue *out, struct gvalue *aux, int *n_params,
                                   struct gvalue *params, const char *name)
{
    const struct gvalue *ids = in[0];

    (void)n_in;
    (void)aux;
    if (at->vocab <= 0 || at->out_channels <= 0)
        return SHAPE_FAIL("needs a vocabulary and a width (vocab %lld, out_channels %lld)",
                          name, (long long)at->vocab, (long long)at->out_channels);
    if (ids->ndim > 3)
        return SHAPE_FAIL("takes token ids of 1 to 3 dimensions, got %d-d", name, ids->ndim);
    copy_shape(out, ids);
    out->ndim = ids->ndim + 1;
    out->shape[ids->ndim] = at->out_channels;
    set_shape(&params[0], 2, at->vocab, at->out_channels, 0, 0); /* the table */
    *n_params = 1;
    return REMAT_OK;
}

/* A copy per output element forward, an add per element into the table backward. */
double graph_flops_embedding(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                             const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    (void)backward;
    return (double)graph_numel(out);
}

remat_status graph_infer_token_ce(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0], *y = in[1];

    (void)n_in;
    (void)at;
    (void)n_params;
    (void)params;
    if (x->ndim < 2 || x->ndim > 3)
        return SHAPE_FAIL("expects logits (..., V) of 2 or 3 dimensions, got %d-d", name,
                          x->ndim);
    if (y->ndim != x->ndim - 1 || memcmp(y->shape, x->shape, sizeof(int64_t) * (size_t)y->ndim))
        return SHAPE_FAIL("its targets must have the logits' leading shape", name);
    set_shape(out, 1, 1, 0, 0, 0);
    copy_shape(aux, x); /* the probabilities */
    return REMAT_OK;
}

/* As softmax_ce: the row max, exp, sum and log, about 5 an element forward; p - onehot
 * scaled, 2 backward. */
double graph_flops_token_ce(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    double n = (double)graph_numel(in[0]);

    (void)n_in;
    (void)at;
    (void)out;
    return backward ? 2 * n : 5 * n;
}
