/*
 * op_table.c - per op: arity, shape inference, FLOPs and what the backward reads.
 *
 * The rows follow REMAT_OPS; a _Static_assert keeps them in step. FLOP formulas (whole
 * batch; a multiply-add counts 2) are listed in docs/design.md and checked by hand in
 * tests/test_graph.c. The sequence-model ops' functions (layer norm, GELU) live in
 * op_table_seq.c.
 */
#include "graph/op_table.h"

#include <string.h>

int64_t graph_numel(const struct gvalue *v)
{
    int64_t n = 1;

    for (int i = 0; i < v->ndim; i++)
        n *= v->shape[i];
    return n;
}

static remat_status need_4d(const struct gvalue *x, const char *name)
{
    if (x->ndim != 4)
        return SHAPE_FAIL("expects a 4-d (N, C, H, W) input, got %d-d", name, x->ndim);
    return REMAT_OK;
}

/* Output extent of a sliding window; ceil mode as in PyTorch (the last window must
 * start inside the input or the left padding). */
static int64_t window_out(int64_t in, int32_t k, int32_t s, int32_t p, int32_t d, bool ceil)
{
    int64_t span = in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1;
    int64_t o;

    if (span < 0)
        return 0;
    o = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (o - 1) * s >= in + p)
        o--;
    return o;
}

/* --------------------------------------------------------------- convolution */

static remat_status infer_conv(const struct gvalue *const *in, int n_in, remat_attrs *at,
                               struct gvalue *out, struct gvalue *aux, int *n_params,
                               struct gvalue *params, const char *name, bool transposed)
{
    const struct gvalue *x = in[0];
    int64_t c, cout = at->out_channels, ho, wo;
    remat_status s;

    (void)n_in;
    (void)aux;
    if ((s = need_4d(x, name)))
        return s;
    c = x->shape[1];
    at->sh = at->sh ? at->sh : 1;
    at->sw = at->sw ? at->sw : 1;
    at->dh = at->dh ? at->dh : 1;
    at->dw = at->dw ? at->dw : 1;
    at->groups = at->groups ? at->groups : 1;
    if (cout <= 0 || at->kh <= 0 || at->kw <= 0 || at->sh < 0 || at->sw < 0 || at->ph < 0 ||
        at->pw < 0 || at->dh < 0 || at->dw < 0 || at->groups < 0)
        return SHAPE_FAIL("needs out_channels > 0, a kernel > 0 and non-negative "
                          "stride, padding and dilation", name);
    if (c % at->groups || cout % at->groups)
        return SHAPE_FAIL("channels %lld in and %lld out are not divisible by %d "
                          "groups", name, (long long)c, (long long)cout, at->groups);
    if (!transposed) {
        ho = window_out(x->shape[2], at->kh, at->sh, at->ph, at->dh, false);
        wo = window_out(x->shape[3], at->kw, at->sw, at->pw, at->dw, false);
    } else {
        if (at->out_pad_h < 0 || at->out_pad_w < 0 || at->out_pad_h >= at->sh ||
            at->out_pad_w >= at->sw)
            return SHAPE_FAIL("output padding must be below the stride", name);
        ho = (x->shape[2] - 1) * at->sh - 2 * at->ph + (int64_t)at->dh * (at->kh - 1) +
             at->out_pad_h + 1;
        wo = (x->shape[3] - 1) * at->sw - 2 * at->pw + (int64_t)at->dw * (at->kw - 1) +
             at->out_pad_w + 1;
    }
    if (ho <= 0 || wo <= 0)
        return SHAPE_FAIL("a %dx%d kernel does not fit the %lldx%lld input", name,
                          at->kh, at->kw, (long long)x->shape[2], (long long)x->shape[3]);
    set_shape(out, 4, x->shape[0], cout, ho, wo);
    if (!transposed)
        set_shape(&params[0], 4, cout, c / at->groups, at->kh, at->kw);
    else
        set_shape(&params[0], 4, c, cout / at->groups, at->kh, at->kw);
    *n_params = 1;
    if (at->bias) {
        set_shape(&params[1], 1, cout, 0, 0, 0);
        *n_params = 2;
    }
    return REMAT_OK;
}

static remat_status infer_conv2d(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                 struct gvalue *out, struct gvalue *aux, int *n_params,
                                 struct gvalue *params, const char *name)
{
    return infer_conv(in, n_in, at, out, aux, n_params, params, name, false);
}

static remat_status infer_convt(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                struct gvalue *out, struct gvalue *aux, int *n_params,
                                struct gvalue *params, const char *name)
{
    return infer_conv(in, n_in, at, out, aux, n_params, params, name, true);
}

/* mac: 2 * multiply-adds; forward mac (+ bias), backward 2 mac (+ bias gradient). */
static double mac_flops(double mac, double bias, bool backward)
{
    return backward ? 2 * mac + bias : mac + bias;
}

static double flops_conv2d(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                           const struct gvalue *out, bool backward)
{
    double mac = 2.0 * (double)graph_numel(out) * (double)(in[0]->shape[1] / at->groups) *
                 at->kh * at->kw;

    (void)n_in;
    return mac_flops(mac, at->bias ? (double)graph_numel(out) : 0, backward);
}

static double flops_convt(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                          const struct gvalue *out, bool backward)
{
    double mac = 2.0 * (double)graph_numel(in[0]) *
                 (double)(at->out_channels / at->groups) * at->kh * at->kw;

    (void)n_in;
    return mac_flops(mac, at->bias ? (double)graph_numel(out) : 0, backward);
}

/* ---------------------------------------------------------------- elementwise */

static remat_status infer_same(const struct gvalue *const *in, int n_in, remat_attrs *at,
                               struct gvalue *out, struct gvalue *aux, int *n_params,
                               struct gvalue *params, const char *name)
{
    (void)n_in;
    (void)at;
    (void)aux;
    (void)n_params;
    (void)params;
    (void)name;
    copy_shape(out, in[0]);
    return REMAT_OK;
}

static remat_status infer_bn(const struct gvalue *const *in, int n_in, remat_attrs *at,
                             struct gvalue *out, struct gvalue *aux, int *n_params,
                             struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];

    (void)n_in;
    if (x->ndim != 4 && x->ndim != 2)
        return SHAPE_FAIL("expects a 2-d or 4-d input, got %d-d", name, x->ndim);
    if (at->eps < 0 || at->momentum < 0 || at->momentum > 1)
        return SHAPE_FAIL("needs eps >= 0 and momentum in [0, 1]", name);
    at->eps = at->eps > 0 ? at->eps : 1e-5f;
    at->momentum = at->momentum > 0 ? at->momentum : 0.1f;
    copy_shape(out, x);
    set_shape(aux, 2, 2, x->shape[1], 0, 0); /* mean and inverse std per channel */
    set_shape(&params[0], 1, x->shape[1], 0, 0, 0);
    set_shape(&params[1], 1, x->shape[1], 0, 0, 0);
    *n_params = 2;
    return REMAT_OK;
}

static double flops_bn(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                       const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 9.0 : 7.0) * (double)graph_numel(out);
}

static double flops_relu(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                         const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    (void)backward;
    return (double)graph_numel(out);
}

static remat_status infer_clip(const struct gvalue *const *in, int n_in, remat_attrs *at,
                               struct gvalue *out, struct gvalue *aux, int *n_params,
                               struct gvalue *params, const char *name)
{
    if (at->clip_min == 0 && at->clip_max == 0)
        at->clip_max = 6; /* ReLU6 */
    if (!(at->clip_min < at->clip_max))
        return SHAPE_FAIL("clip needs min < max, got [%g, %g]", name, (double)at->clip_min,
                          (double)at->clip_max);
    return infer_same(in, n_in, at, out, aux, n_params, params, name);
}

static remat_status infer_leaky(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                struct gvalue *out, struct gvalue *aux, int *n_params,
                                struct gvalue *params, const char *name)
{
    if (at->alpha == 0)
        at->alpha = 0.01f;
    if (!(at->alpha > 0))
        return SHAPE_FAIL("leaky_relu needs a slope > 0 (its backward reads y), got %g", name,
                          (double)at->alpha);
    return infer_same(in, n_in, at, out, aux, n_params, params, name);
}

/* mul: the same shapes, or the second (N, C, 1, 1) against a (N, C, H, W) first. */
static remat_status infer_mul(const struct gvalue *const *in, int n_in, remat_attrs *at,
                              struct gvalue *out, struct gvalue *aux, int *n_params,
                              struct gvalue *params, const char *name)
{
    const struct gvalue *a = in[0], *b = in[1];
    bool same = a->ndim == b->ndim, chan = a->ndim == 4 && b->ndim == 4;

    for (int i = 0; i < a->ndim && i < 4; i++)
        same = same && a->shape[i] == b->shape[i];
    chan = chan && b->shape[0] == a->shape[0] && b->shape[1] == a->shape[1] &&
           b->shape[2] == 1 && b->shape[3] == 1;
    if (!same && !chan)
        return SHAPE_FAIL("multiplies equal shapes or (N, C, H, W) by (N, C, 1, 1)", name);
    return infer_same(in, n_in, at, out, aux, n_params, params, name);
}

/* softmax over the channel axis (1) of a 2-d or 4-d input */
static remat_status infer_softmax(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name)
{
    if (in[0]->ndim != 2 && in[0]->ndim != 4)
        return SHAPE_FAIL("softmax takes a 2-d or 4-d input (over axis 1), got %d-d", name,
                          in[0]->ndim);
    return infer_same(in, n_in, at, out, aux, n_params, params, name);
}

static remat_status infer_transpose(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                    struct gvalue *out, struct gvalue *aux, int *n_params,
                                    struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];
    bool zero = true, seen[4] = {false, false, false, false};

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    for (int i = 0; i < 4; i++)
        zero = zero && at->perm[i] == 0;
    if (zero)
        for (int i = 0; i < x->ndim; i++)
            at->perm[i] = x->ndim - 1 - i;
    out->ndim = x->ndim;
    for (int i = 0; i < 4; i++) {
        if (i >= x->ndim) {
            if (at->perm[i])
                return SHAPE_FAIL("perm has more entries than the input's %d dimensions", name,
                                  x->ndim);
            out->shape[i] = 0;
            continue;
        }
        if (at->perm[i] < 0 || at->perm[i] >= x->ndim || seen[at->perm[i]])
            return SHAPE_FAIL("perm is not a permutation of the %d dimensions", name, x->ndim);
        seen[at->perm[i]] = true;
        out->shape[i] = x->shape[at->perm[i]];
    }
    return REMAT_OK;
}

/* sigmoid and tanh: one exponential and a few operations an element */
static double flops_sigmoid(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 3.0 : 4.0) * (double)graph_numel(out);
}

static double flops_softmax(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 4.0 : 5.0) * (double)graph_numel(out);
}

static double flops_dropout(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    (void)backward;
    return 2 * flops_relu(in, n_in, at, out, false);
}

static remat_status infer_dropout(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name)
{
    if (at->p < 0 || at->p >= 1)
        return SHAPE_FAIL("dropout probability %g is not in [0, 1)", name,
                          (double)at->p);
    at->p = at->p > 0 ? at->p : 0.5f;
    return infer_same(in, n_in, at, out, aux, n_params, params, name);
}

/* ------------------------------------------------------------------- pooling */

static remat_status infer_pool(const struct gvalue *const *in, int n_in, remat_attrs *at,
                               struct gvalue *out, struct gvalue *aux, int *n_params,
                               struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];
    int64_t ho, wo;
    remat_status s;

    (void)n_in;
    (void)n_params;
    (void)params;
    if ((s = need_4d(x, name)))
        return s;
    at->sh = at->sh ? at->sh : at->kh;
    at->sw = at->sw ? at->sw : at->kw;
    if (at->kh <= 0 || at->kw <= 0 || at->sh < 0 || at->sw < 0 || at->ph < 0 || at->pw < 0)
        return SHAPE_FAIL("needs a kernel > 0 and non-negative stride and padding",
                          name);
    if (at->ph > at->kh / 2 || at->pw > at->kw / 2)
        return SHAPE_FAIL("padding %dx%d is more than half the %dx%d kernel", name,
                          at->ph, at->pw, at->kh, at->kw);
    ho = window_out(x->shape[2], at->kh, at->sh, at->ph, 1, at->ceil_mode);
    wo = window_out(x->shape[3], at->kw, at->sw, at->pw, 1, at->ceil_mode);
    if (ho <= 0 || wo <= 0)
        return SHAPE_FAIL("a %dx%d window does not fit the %lldx%lld input", name,
                          at->kh, at->kw, (long long)x->shape[2], (long long)x->shape[3]);
    set_shape(out, 4, x->shape[0], x->shape[1], ho, wo);
    if (aux)
        set_shape(aux, 4, x->shape[0], x->shape[1], ho, wo); /* argmax indices, int32 */
    return REMAT_OK;
}

static remat_status infer_avgpool(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name)
{
    (void)aux;
    return infer_pool(in, n_in, at, out, NULL, n_params, params, name);
}

static double flops_maxpool(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    (void)n_in;
    if (backward)
        return (double)graph_numel(out) + (double)graph_numel(in[0]);
    return (double)graph_numel(out) * at->kh * at->kw;
}

static double flops_avgpool(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)backward;
    return (double)graph_numel(out) * at->kh * at->kw;
}

static remat_status infer_gap(const struct gvalue *const *in, int n_in, remat_attrs *at,
                              struct gvalue *out, struct gvalue *aux, int *n_params,
                              struct gvalue *params, const char *name)
{
    remat_status s;

    (void)n_in;
    (void)at;
    (void)aux;
    (void)n_params;
    (void)params;
    if ((s = need_4d(in[0], name)))
        return s;
    set_shape(out, 4, in[0]->shape[0], in[0]->shape[1], 1, 1);
    return REMAT_OK;
}

static double flops_in(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                       const struct gvalue *out, bool backward)
{
    (void)n_in;
    (void)at;
    (void)out;
    (void)backward;
    return (double)graph_numel(in[0]);
}

/* ------------------------------------------------------------- add, concat */

static bool same_shape(const struct gvalue *a, const struct gvalue *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

static void shape_str(const struct gvalue *v, char *buf, size_t n)
{
    int k = snprintf(buf, n, "(");

    for (int i = 0; i < v->ndim && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, i ? ", %lld" : "%lld", (long long)v->shape[i]);
    if (k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ")");
}

static remat_status infer_add(const struct gvalue *const *in, int n_in, remat_attrs *at,
                              struct gvalue *out, struct gvalue *aux, int *n_params,
                              struct gvalue *params, const char *name)
{
    char a[96], b[96];

    for (int i = 1; i < n_in; i++)
        if (!same_shape(in[0], in[i])) {
            shape_str(in[0], a, sizeof a);
            shape_str(in[i], b, sizeof b);
            return SHAPE_FAIL("input %d has shape %s but input 0 has %s", name, i, b,
                              a);
        }
    return infer_same(in, n_in, at, out, aux, n_params, params, name);
}

static double flops_add(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                        const struct gvalue *out, bool backward)
{
    (void)in;
    (void)at;
    return (double)graph_numel(out) * (backward ? n_in : n_in - 1);
}

static remat_status infer_concat(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                 struct gvalue *out, struct gvalue *aux, int *n_params,
                                 struct gvalue *params, const char *name)
{
    int64_t c = 0;

    (void)at;
    (void)aux;
    (void)n_params;
    (void)params;
    for (int i = 0; i < n_in; i++) {
        const struct gvalue *v = in[i];
        bool ok = v->ndim == in[0]->ndim && v->ndim >= 2 && v->shape[0] == in[0]->shape[0];

        for (int d = 2; ok && d < v->ndim; d++)
            ok = v->shape[d] == in[0]->shape[d];
        if (!ok) {
            char a[96], b[96];

            shape_str(in[0], a, sizeof a);
            shape_str(v, b, sizeof b);
            return SHAPE_FAIL("input %d has shape %s, which does not concatenate "
                              "along channels with %s", name, i, b, a);
        }
        c += v->shape[1];
    }
    copy_shape(out, in[0]);
    out->shape[1] = c;
    return REMAT_OK;
}

static double flops_out(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                        const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    (void)backward;
    return (double)graph_numel(out);
}

/* -------------------------------------------------------------------- linear */

static remat_status infer_linear(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                 struct gvalue *out, struct gvalue *aux, int *n_params,
                                 struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];

    (void)n_in;
    (void)aux;
    if (x->ndim != 2)
        return SHAPE_FAIL("expects a 2-d (N, features) input, got %d-d (flatten "
                          "first)", name, x->ndim);
    if (at->out_channels <= 0)
        return SHAPE_FAIL("needs out_channels > 0", name);
    set_shape(out, 2, x->shape[0], at->out_channels, 0, 0);
    set_shape(&params[0], 2, at->out_channels, x->shape[1], 0, 0);
    *n_params = 1;
    if (at->bias) {
        set_shape(&params[1], 1, at->out_channels, 0, 0, 0);
        *n_params = 2;
    }
    return REMAT_OK;
}

static double flops_linear(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                           const struct gvalue *out, bool backward)
{
    double mac = 2.0 * (double)graph_numel(out) * (double)in[0]->shape[1];

    (void)n_in;
    return mac_flops(mac, at->bias ? (double)graph_numel(out) : 0, backward);
}

/* --------------------------------------------------------------------- views */

static remat_status infer_flatten(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name)
{
    (void)n_in;
    (void)at;
    (void)aux;
    (void)n_params;
    (void)params;
    (void)name;
    set_shape(out, 2, in[0]->shape[0], graph_numel(in[0]) / in[0]->shape[0], 0, 0);
    return REMAT_OK;
}

static remat_status infer_reshape(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name)
{
    int64_t known = 1, total = graph_numel(in[0]);
    int free_dim = -1;

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if (at->ndim < 1 || at->ndim > 4)
        return SHAPE_FAIL("needs 1 to 4 target dimensions, got %d", name, at->ndim);
    for (int i = 0; i < at->ndim; i++) {
        if (at->shape[i] == -1 && free_dim < 0)
            free_dim = i;
        else if (at->shape[i] <= 0 || !core_mul_i64(known, at->shape[i], &known))
            return SHAPE_FAIL("bad target dimension %lld", name,
                              (long long)at->shape[i]);
    }
    out->ndim = at->ndim;
    for (int i = 0; i < 4; i++)
        out->shape[i] = i < at->ndim ? at->shape[i] : 0;
    if (free_dim >= 0) {
        if (total % known)
            return SHAPE_FAIL("%lld elements do not divide into the target shape",
                              name, (long long)total);
        out->shape[free_dim] = total / known;
    } else if (known != total) {
        return SHAPE_FAIL("%lld elements cannot be reshaped into %lld", name,
                          (long long)total, (long long)known);
    }
    out->elem_bytes = 4;
    return REMAT_OK;
}

static double flops_zero(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                         const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    (void)out;
    (void)backward;
    return 0;
}

/* ------------------------------------------------------- resize, crop, pad */

static remat_status infer_upsample(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                   struct gvalue *out, struct gvalue *aux, int *n_params,
                                   struct gvalue *params, const char *name)
{
    remat_status s;

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if ((s = need_4d(in[0], name)))
        return s;
    if (at->out_h <= 0 || at->out_w <= 0)
        return SHAPE_FAIL("needs an output size out_h, out_w > 0", name);
    set_shape(out, 4, in[0]->shape[0], in[0]->shape[1], at->out_h, at->out_w);
    return REMAT_OK;
}

static double flops_upsample(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                             const struct gvalue *out, bool backward)
{
    (void)in;
    (void)n_in;
    (void)at;
    return (backward ? 8.0 : 7.0) * (double)graph_numel(out);
}

static remat_status infer_crop(const struct gvalue *const *in, int n_in, remat_attrs *at,
                               struct gvalue *out, struct gvalue *aux, int *n_params,
                               struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];
    remat_status s;

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if ((s = need_4d(x, name)))
        return s;
    if (at->out_h <= 0 || at->out_w <= 0 || at->out_h > x->shape[2] || at->out_w > x->shape[3])
        return SHAPE_FAIL("cannot crop %lldx%lld out of %lldx%lld", name,
                          (long long)at->out_h, (long long)at->out_w,
                          (long long)x->shape[2], (long long)x->shape[3]);
    if (at->offset_h < 0)
        at->offset_h = (int32_t)((x->shape[2] - at->out_h) / 2);
    if (at->offset_w < 0)
        at->offset_w = (int32_t)((x->shape[3] - at->out_w) / 2);
    if (at->offset_h + at->out_h > x->shape[2] || at->offset_w + at->out_w > x->shape[3])
        return SHAPE_FAIL("crop window at (%d, %d) leaves the input", name,
                          at->offset_h, at->offset_w);
    set_shape(out, 4, x->shape[0], x->shape[1], at->out_h, at->out_w);
    return REMAT_OK;
}

static remat_status infer_pad(const struct gvalue *const *in, int n_in, remat_attrs *at,
                              struct gvalue *out, struct gvalue *aux, int *n_params,
                              struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0];
    remat_status s;

    (void)n_in;
    (void)aux;
    (void)n_params;
    (void)params;
    if ((s = need_4d(x, name)))
        return s;
    if (at->pad_t < 0 || at->pad_b < 0 || at->pad_l < 0 || at->pad_r < 0)
        return SHAPE_FAIL("padding must be non-negative", name);
    set_shape(out, 4, x->shape[0], x->shape[1], x->shape[2] + at->pad_t + at->pad_b,
              x->shape[3] + at->pad_l + at->pad_r);
    return REMAT_OK;
}

static double flops_pad(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                        const struct gvalue *out, bool backward)
{
    (void)n_in;
    (void)at;
    return (double)graph_numel(backward ? in[0] : out);
}

/* --------------------------------------------------------------------- losses */

static remat_status infer_softmax_ce(const struct gvalue *const *in, int n_in,
                                     remat_attrs *at, struct gvalue *out, struct gvalue *aux,
                                     int *n_params, struct gvalue *params, const char *name)
{
    const struct gvalue *x = in[0], *y = in[1];

    (void)n_in;
    (void)at;
    (void)n_params;
    (void)params;
    if (x->ndim != 2)
        return SHAPE_FAIL("expects 2-d logits (N, K), got %d-d", name, x->ndim);
    if (y->kind != VK_LABEL || y->ndim != 1 || y->shape[0] != x->shape[0])
        return SHAPE_FAIL("the second input must be %lld labels", name,
                          (long long)x->shape[0]);
    set_shape(out, 1, 1, 0, 0, 0);
    set_shape(aux, 2, x->shape[0], x->shape[1], 0, 0); /* probabilities */
    return REMAT_OK;
}

static double flops_softmax_ce(const struct gvalue *const *in, int n_in,
                               const remat_attrs *at, const struct gvalue *out, bool backward)
{
    double nk = (double)graph_numel(in[0]);

    (void)n_in;
    (void)at;
    (void)out;
    return backward ? 2 * nk : 5 * nk + (double)in[0]->shape[0];
}

static remat_status infer_sum_losses(const struct gvalue *const *in, int n_in,
                                     remat_attrs *at, struct gvalue *out, struct gvalue *aux,
                                     int *n_params, struct gvalue *params, const char *name)
{
    (void)at;
    (void)aux;
    (void)n_params;
    (void)params;
    for (int i = 0; i < n_in; i++)
        if (graph_numel(in[i]) != 1)
            return SHAPE_FAIL("input %d is not a scalar loss", name, i);
    set_shape(out, 1, 1, 0, 0, 0);
    return REMAT_OK;
}

static double flops_sum_losses(const struct gvalue *const *in, int n_in,
                               const remat_attrs *at, const struct gvalue *out, bool backward)
{
    (void)in;
    (void)at;
    (void)out;
    return backward ? n_in : n_in - 1;
}

/* --------------------------------------------------------------------- table */

#define MANY 1 << 20
static const struct op_info table[] = {
    [REMAT_OP_CONV2D] = {1, 1, false, false, BR_IN0, infer_conv2d, flops_conv2d},
    [REMAT_OP_CONV_TRANSPOSE2D] = {1, 1, false, false, BR_IN0,
                                   infer_convt, flops_convt},
    [REMAT_OP_BATCH_NORM] = {1, 1, false, true, BR_IN0 | BR_AUX, infer_bn,
                             flops_bn},
    [REMAT_OP_RELU] = {1, 1, false, false, BR_OUT, infer_same, flops_relu},
    [REMAT_OP_MAX_POOL] = {1, 1, false, true, BR_IN0 | BR_AUX, infer_pool,
                           flops_maxpool},
    [REMAT_OP_AVG_POOL] = {1, 1, false, false, 0, infer_avgpool, flops_avgpool},
    [REMAT_OP_GLOBAL_AVG_POOL] = {1, 1, false, false, 0, infer_gap,
                                  flops_in},
    [REMAT_OP_ADD] = {2, MANY, false, false, 0, infer_add, flops_add},
    [REMAT_OP_CONCAT] = {1, MANY, false, false, 0, infer_concat, flops_out},
    [REMAT_OP_LINEAR] = {1, 1, false, false, BR_IN0, infer_linear, flops_linear},
    [REMAT_OP_FLATTEN] = {1, 1, true, false, 0, infer_flatten, flops_zero},
    [REMAT_OP_RESHAPE] = {1, 1, true, false, 0, infer_reshape, flops_zero},
    [REMAT_OP_DROPOUT] = {1, 1, false, false, 0, infer_dropout, flops_dropout},
    [REMAT_OP_UPSAMPLE_BILINEAR] = {1, 1, false, false, 0,
                                    infer_upsample, flops_upsample},
    [REMAT_OP_CROP] = {1, 1, false, false, 0, infer_crop, flops_out},
    [REMAT_OP_PAD] = {1, 1, false, false, 0, infer_pad, flops_pad},
    [REMAT_OP_SOFTMAX_CE] = {2, 2, false, true, BR_IN1 | BR_AUX,
                             infer_softmax_ce, flops_softmax_ce},
    [REMAT_OP_SUM_LOSSES] = {1, MANY, false, false, 0, infer_sum_losses,
                             flops_sum_losses},
    [REMAT_OP_CLIP] = {1, 1, false, false, BR_OUT, infer_clip, flops_relu},
    [REMAT_OP_LEAKY_RELU] = {1, 1, false, false, BR_OUT, infer_leaky,
                             flops_relu},
    [REMAT_OP_SIGMOID] = {1, 1, false, false, BR_OUT, infer_same, flops_sigmoid},
    [REMAT_OP_TANH] = {1, 1, false, false, BR_OUT, infer_same, flops_sigmoid},
    [REMAT_OP_HARD_SIGMOID] = {1, 1, false, false, BR_OUT, graph_infer_hard_sigmoid,
                               graph_flops_hard_act},
    [REMAT_OP_HARD_SWISH] = {1, 1, false, false, BR_IN0, infer_same, graph_flops_hard_act},
    [REMAT_OP_REDUCE_SUM] = {1, 1, false, false, 0, graph_infer_reduce_sum,
                             graph_flops_reduce_sum},
    [REMAT_OP_MUL] = {2, 2, false, false, BR_IN0 | BR_IN1, infer_mul, flops_add},
    [REMAT_OP_SOFTMAX] = {1, 1, false, false, BR_OUT, infer_softmax, flops_softmax},
    [REMAT_OP_TRANSPOSE] = {1, 1, false, false, 0, infer_transpose, flops_out},
    [REMAT_OP_LAYER_NORM] = {1, 1, false, true, BR_IN0 | BR_AUX, graph_infer_layer_norm,
                             graph_flops_layer_norm},
    [REMAT_OP_GELU] = {1, 1, false, false, BR_IN0, infer_same, graph_flops_gelu},
    [REMAT_OP_MATMUL] = {2, 2, false, false, BR_IN0 | BR_IN1, graph_infer_matmul,
                         graph_flops_matmul},
    [REMAT_OP_SOFTMAX_LAST] = {1, 1, false, false, BR_OUT, graph_infer_softmax_last,
                               graph_flops_softmax_last},
    [REMAT_OP_EMBEDDING] = {1, 1, false, false, BR_IN0, graph_infer_embedding,
                            graph_flops_embedding},
    [REMAT_OP_TOKEN_CE] = {2, 2, false, true, BR_IN1 | BR_AUX, graph_infer_token_ce,
                           graph_flops_token_ce},
};
_Static_assert(REMAT_ARRAY_LEN(table) == REMAT_OP_COUNT, "op table matches REMAT_OPS");

const struct op_info *op_info(remat_op op)
{
    REMAT_ASSERT((unsigned)op < REMAT_OP_COUNT);
    return &table[op];
}
