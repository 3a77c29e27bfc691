/*
 * onnx_tf.c - the transformer's ONNX ops: token embeddings (Gather on a table), linear
 * layers over the last axis (MatMul with a weight, then Add of a bias; built by
 * onnx_linear.c, in parts when a Split or Slices read them so), attention
 * (MatMul of activations, scaled and causally masked Softmax), layer norm (opset 17's
 * op or the decomposed form PyTorch exports), GELU (erf form), and slicing activations
 * (Slice, Split: a crop of a 4-d view).
 *
 * Patterns are read node by node as pending expressions (onnx_read.h's E_PEND): each
 * node of a pattern defines its output as the next stage; the last stage adds the one
 * remat op. A pending expression read by any other op is built where it can stand
 * alone (a linear layer without its bias) or refused with a message naming the pattern.
 */
#include "io/onnx_read.h"

#include <math.h>
#include <string.h>

static remat_status pend(struct rd *r, int pk, int32_t x, float f, bool causal,
                         const Onnx__TensorProto *t, bool trans)
{
    return ox_define(r, ox_out_name(r, 0), (struct ent){.kind = E_PEND, .pk = pk, .value = x,
                                                        .f = f, .causal = causal, .t = t,
                                                        .trans = trans});
}

static bool is_pend(const struct ent *e, int pk)
{
    return e && e->kind == E_PEND && e->pk == pk;
}

bool ox_scalar_of(struct rd *r, const struct ent *e, double *v)
{
    double *p = NULL;
    int64_t n = 0;
    bool ok;

    if (!e || e->kind != E_TENSOR || ox_tensor_numel(e->t) != 1 ||
        ox_tensor_doubles(r, e->t, &p, &n))
        return false;
    ok = n == 1;
    *v = ok ? p[0] : 0;
    core_free(r->a, p, sizeof(double) * (size_t)(n ? n : 1));
    return ok;
}

bool ox_near(double a, double b)
{
    return fabs(a - b) <= 1e-6 * fmax(1, fabs(b));
}

remat_status ox_pend_build(struct rd *r, struct ent *e, int32_t *v)
{
    static const char *const what[] = {
        "", "a product with a constant (or a masked score) outside a softmax",
        "", "a layer-norm pattern", "a layer-norm pattern", "a layer-norm pattern",
        "a layer-norm pattern", "a layer-norm pattern", "a layer-norm pattern",
        "a layer-norm pattern", "a layer-norm pattern without its bias", "a GELU pattern",
        "a GELU pattern", "a GELU pattern", "a GELU pattern", "a GELU pattern",
        "a GELU pattern", "a GELU pattern", "a GELU pattern",
        "a channel shuffle (Reshape, Transpose, Reshape)",
        "a channel shuffle (Reshape, Transpose, Reshape)"};

    if (e->pk == P_LINEAR) {
        const char *out = e->name; /* e moves when the table grows */

        return ox_linear(r, e->value, e->t, e->trans, e->b, 1, &out, v);
    }
    if (e->pk == P_PARTS)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "reads '%s', a linear layer's output "
                            "that remat built in parts for its Split", e->name);
    if (e->pk == P_BCAST)
        return ox_vis_bcast(r, e, v);
    if (e->pk == P_TANH_SQ)
        return ox_act_square(r, e, v);
    if (e->pk == P_HSIG)
        return ox_act_hsig(r, e, v);
    if (e->pk == P_LN_MEAN)
        return ox_act_mean_last(r, e, v);
    return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "reads '%s', part of %s that remat reads only "
                        "whole (docs/onnx.md)", e->name,
                        e->pk > 0 && e->pk < (int)REMAT_ARRAY_LEN(what) ? what[e->pk] : "?");
}

/* A scaled activation's parts: x and its factor (1 for a plain activation). */
static remat_status act_scale(struct rd *r, size_t i, int32_t *x, double *f, bool *causal)
{
    struct ent *e;
    remat_status st = ox_in_ent(r, i, &e);

    *f = 1;
    *causal = false;
    if (st)
        return st;
    if (is_pend(e, P_SCALE)) {
        *x = e->value;
        *f = e->f;
        *causal = e->causal;
        return REMAT_OK;
    }
    return ox_in_act(r, i, x);
}

/* MatMul: by a weight (a linear layer, or a tied parameter), or of two activations. */
static remat_status tf_matmul(struct rd *r)
{
    struct ent *b;
    remat_attrs at = {0};
    int32_t a, bv, ins[2], y;
    double fa, fb;
    bool ca, cb;
    remat_status st;

    if ((st = ox_in_ent(r, 1, &b)) || (st = act_scale(r, 0, &a, &fa, &ca)))
        return st;
    if (ca)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a masked score read by a MatMul");
    if (b->kind == E_TENSOR) {
        const struct owned_param *p = ox_find_param(r, b->t);
        int64_t d[2];

        if (ox_tensor_dims(b->t, d, 2) != 2)
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a MatMul by a constant that is not "
                                "2-d (remat's linear layer takes a 2-d weight)");

        if (!p && fa == 1) /* the bias, if any, comes with the next Add */
            return pend(r, P_LINEAR, a, 1, false, b->t, b->trans);
        if (!p)
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a scaled input of a linear layer");
        bv = remat_graph_param(r->g, p->value, p->k);
        at.trans_b = b->trans;
    } else if ((st = act_scale(r, 1, &bv, &fb, &cb))) {
        return st;
    } else {
        fa *= fb;
    }
    ins[0] = a;
    ins[1] = bv;
    if (fa == 1)
        return ox_emit(r, REMAT_OP_MATMUL, ins, 2, &at, NULL);
    if ((st = ox_emit_as(r, REMAT_OP_MATMUL, ins, 2, &at, NULL, &y)))
        return st;
    return pend(r, P_SCALE, y, (float)fa, false, NULL, false);
}

/* ------------------------------------------------------------------ attention */

/* Whether constant t is true exactly above the diagonal of its last two axes. */
static bool is_upper_mask(struct rd *r, const Onnx__TensorProto *t, bool neg_inf)
{
    int64_t d[8], n = 0;
    double *v = NULL;
    int nd = ox_tensor_dims(t, d, 8);
    bool ok = nd >= 2 && !ox_tensor_doubles(r, t, &v, &n) && d[nd - 1] == d[nd - 2];

    for (int64_t i = 0; ok && i < n; i++) {
        int64_t c = i % d[nd - 1], row = i / d[nd - 1] % d[nd - 2];
        bool masked = neg_inf ? v[i] < -1e30 : v[i] != 0;

        ok = masked == (c > row) && (!neg_inf || masked || v[i] == 0);
    }
    core_free(r->a, v, sizeof(double) * (size_t)(n ? n : 1));
    return ok;
}

/* Where(mask above the diagonal, -inf, scores): the causal mask, kept for the softmax. */
static remat_status tf_where(struct rd *r)
{
    struct ent *c, *a;
    double fill, f;
    int32_t x;
    bool causal;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &c)) || (st = ox_in_ent(r, 1, &a)))
        return st;
    if (c->kind != E_TENSOR || !ox_scalar_of(r, a, &fill) || !(fill < -1e30) ||
        !is_upper_mask(r, c->t, false))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Where as a causal mask: a "
                            "constant condition true above the diagonal, -inf, the scores");
    if ((st = act_scale(r, 2, &x, &f, &causal)))
        return st;
    return pend(r, P_SCALE, x, (float)f, true, NULL, false);
}

static remat_status tf_softmax(struct rd *r)
{
    int64_t xs[4], axis = ox_attr_i(r, "axis", r->opset >= 13 ? -1 : 1);
    remat_attrs at = {0};
    double f;
    int32_t x;
    int nd;
    remat_status st = act_scale(r, 0, &x, &f, &at.causal);

    if (st)
        return st;
    nd = (int)ox_shape_of(r, x, xs);
    if ((axis < 0 ? axis + nd : axis) != nd - 1 || (r->opset < 13 && nd > 2))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "softmax over axis %lld of a %d-d tensor; "
                            "remat's is over the last axis", (long long)axis, nd);
    at.scale = (float)f;
    return ox_emit(r, REMAT_OP_SOFTMAX_LAST, &x, 1, &at, NULL);
}

/* ------------------------------------------------------------------ layer norm, GELU */

static remat_status emit_layer_norm(struct rd *r, int32_t x, float eps,
                                    const Onnx__TensorProto *gamma,
                                    const Onnx__TensorProto *beta)
{
    remat_attrs at = {.eps = eps};
    remat_status st;

    r->base = ox_tensor_name(gamma);
    if ((st = ox_emit(r, REMAT_OP_LAYER_NORM, &x, 1, &at, NULL)) ||
        (st = ox_keep_weight(r, gamma, "weight", ox_param_numel(r, 0))))
        return st;
    return ox_keep_weight(r, beta, "bias", ox_param_numel(r, 1));
}

/* LayerNormalization (opset 17): over the last axis, with scale and bias. */
static remat_status tf_layer_norm(struct rd *r)
{
    const Onnx__TensorProto *g, *b;
    int64_t xs[4];
    int32_t x;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)) || (st = ox_in_tensor(r, 1, false, &g)) ||
        (st = ox_in_tensor(r, 2, true, &b)))
        return st;
    if (ox_attr_i(r, "axis", -1) != -1 && ox_attr_i(r, "axis", -1) != ox_shape_of(r, x, xs) - 1)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "layer norm over more than the last axis");
    if (!b)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a layer norm without a bias");
    if ((st = ox_dead_outputs(r, 1, "layer norm's mean and inverse deviation")))
        return st;
    return emit_layer_norm(r, x, ox_attr_f(r, "epsilon", 1e-5f), g, b);
}

/* The stages of the decomposed layer norm and GELU, one per node type: what an input of
 * stage `from` with a constant c (NAN: none) or activation gives. */
static remat_status ln_reduce_mean(struct rd *r)
{
    struct ent *e;
    int64_t ax[4], xs[4];
    size_t na;
    int32_t x;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &e)) || (st = ox_attr_ints_upto(r, "axes", ax, 4, &na)))
        return st;
    if (is_pend(e, P_LN_SQ) && na == 1)
        return pend(r, P_LN_VAR, e->value, 0, false, NULL, false);
    if ((st = ox_in_act(r, 0, &x)))
        return st;
    if (na != 1 || !ox_attr_i(r, "keepdims", 1) ||
        (ax[0] != -1 && ax[0] != ox_shape_of(r, x, xs) - 1))
        return ox_act_reduce(r, true); /* another mean: reduce_sum scaled */
    return pend(r, P_LN_MEAN, x, 0, false, NULL, false);
}

static remat_status tf_sub(struct rd *r)
{
    struct ent *a, *b;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &a)) || (st = ox_in_ent(r, 1, &b)))
        return st;
    if (a->kind == E_ACT && is_pend(b, P_LN_MEAN) && b->value == a->value)
        return pend(r, P_LN_CENTER, a->value, 0, false, NULL, false);
    return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Sub as x - mean(x) in a layer "
                        "norm");
}

static remat_status tf_pow(struct rd *r)
{
    struct ent *a, *b;
    double p;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &a)) || (st = ox_in_ent(r, 1, &b)))
        return st;
    if (is_pend(a, P_LN_CENTER) && ox_scalar_of(r, b, &p) && p == 2)
        return pend(r, P_LN_SQ, a->value, 0, false, NULL, false);
    return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Pow as (x - mean)^2 in a layer "
                        "norm");
}

static remat_status tf_sqrt(struct rd *r)
{
    struct ent *a;
    remat_status st = ox_in_ent(r, 0, &a);

    if (st)
        return st;
    if (is_pend(a, P_LN_VAREPS))
        return pend(r, P_LN_STD, a->value, a->f, false, NULL, false);
    return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Sqrt as sqrt(var + eps) in a "
                        "layer norm");
}

static remat_status tf_erf(struct rd *r)
{
    struct ent *a;
    remat_status st = ox_in_ent(r, 0, &a);

    if (st)
        return st;
    if (is_pend(a, P_SCALE) && !a->causal && ox_near(a->f, 1 / sqrt(2.0)))
        return pend(r, P_GELU_ERF, a->value, 0, false, NULL, false);
    return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Erf as erf(x / sqrt 2) in a "
                        "GELU");
}

static remat_status emit_gelu(struct rd *r, int32_t x)
{
    return ox_emit(r, REMAT_OP_GELU, &x, 1, &(remat_attrs){.approximate = false}, NULL);
}

/* Add: a linear layer's bias, a layer norm's eps or beta, GELU's 1 + erf; two
 * activations of one shape are the classic reader's (*done false). */
static remat_status tf_add(struct rd *r, bool *done)
{
    struct ent *a, *b, *t;
    double c;
    remat_status st;
    int32_t v;

    if ((st = ox_in_ent(r, 0, &a)) || (st = ox_in_ent(r, 1, &b)))
        return st;
    if (a->kind == E_TENSOR) { /* the constant second */
        t = a;
        a = b;
        b = t;
    }
    *done = true;
    if (is_pend(a, P_LINEAR) && b->kind == E_TENSOR && !a->b &&
        ox_linear_splits(r, ox_out_name(r, 0), a->value, a->t, a->trans, b->t))
        return ox_define(r, ox_out_name(r, 0), (struct ent){.kind = E_PEND, .pk = P_LINEAR,
                                                            .value = a->value, .t = a->t,
                                                            .b = b->t, .trans = a->trans});
    if (is_pend(a, P_LINEAR) && b->kind == E_TENSOR && !a->b) {
        const char *out = ox_out_name(r, 0);

        return ox_linear(r, a->value, a->t, a->trans, b->t, 1, &out, &v);
    }
    if (is_pend(a, P_LN_VAR) && ox_scalar_of(r, b, &c))
        return pend(r, P_LN_VAREPS, a->value, (float)c, false, NULL, false);
    if (is_pend(a, P_LN_GAMMA) && b->kind == E_TENSOR)
        return emit_layer_norm(r, a->value, a->f, a->t, b->t);
    if (is_pend(a, P_GELU_ERF) && ox_scalar_of(r, b, &c) && c == 1)
        return pend(r, P_GELU_ERF1, a->value, 0, false, NULL, false);
    if (is_pend(a, P_SCALE) && !a->causal && b->kind == E_TENSOR && is_upper_mask(r, b->t, true))
        return pend(r, P_SCALE, a->value, a->f, true, NULL, false);
    if (b->kind == E_TENSOR)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "adds constant '%s' to an activation; "
                            "remat reads that as a linear layer's bias, a layer norm's eps or "
                            "beta, GELU's 1 + erf or a causal mask", b->name);
    *done = false;
    return REMAT_OK;
}

/* Mul and Div by a constant (a scale, GELU's 0.5, a layer norm's gamma) or GELU's
 * x (1 + erf); two activations of one shape are the classic reader's. */
static remat_status tf_mul(struct rd *r, bool div, bool *done)
{
    struct ent *a, *b, *t;
    double c;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &a)) || (st = ox_in_ent(r, 1, &b)))
        return st;
    *done = true;
    if (div && is_pend(a, P_LN_CENTER) && is_pend(b, P_LN_STD) && a->value == b->value)
        return pend(r, P_LN_NORM, a->value, b->f, false, NULL, false);
    if (!div && a->kind == E_TENSOR) {
        t = a;
        a = b;
        b = t;
    }
    if (ox_scalar_of(r, b, &c) && c != 0 && a->kind != E_TENSOR) {
        c = div ? 1 / c : c;
        if (is_pend(a, P_GELU_XE) && ox_near(c, 0.5))
            return emit_gelu(r, a->value);
        if (is_pend(a, P_SCALE) && !a->causal)
            return pend(r, P_SCALE, a->value, (float)(a->f * c), false, NULL, false);
        if (a->kind == E_ACT)
            return pend(r, P_SCALE, a->value, (float)c, false, NULL, false);
    }
    if (!div && is_pend(a, P_LN_NORM) && b->kind == E_TENSOR)
        return pend(r, P_LN_GAMMA, a->value, a->f, false, b->t, false);
    if (!div && is_pend(a, P_GELU_ERF1)) {
        t = a;
        a = b;
        b = t;
    }
    if (!div && is_pend(b, P_GELU_ERF1) && a->kind == E_ACT && a->value == b->value)
        return pend(r, P_GELU_XE, a->value, 0, false, NULL, false);
    if (!div && is_pend(b, P_GELU_ERF1) && is_pend(a, P_SCALE) && a->value == b->value &&
        ox_near(a->f, 0.5))
        return emit_gelu(r, a->value);
    if (div || a->kind == E_TENSOR || b->kind == E_TENSOR)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads %s by a constant as a scale "
                            "(before a softmax), GELU's 0.5 or a layer norm's gamma",
                            div ? "Div" : "Mul");
    *done = false;
    return REMAT_OK;
}

/* ------------------------------------------------------------------ embeddings, slices */

/* Whether constant ids hold 0 .. n-1 along their last axis in every row. */
static bool is_positions(struct rd *r, const Onnx__TensorProto *t, int64_t *n_out)
{
    int64_t d[8], n = 0;
    double *v = NULL;
    int nd = ox_tensor_dims(t, d, 8);
    bool ok = nd >= 1 && nd <= 2 && (nd == 1 || d[0] == 1) && !ox_tensor_doubles(r, t, &v, &n);

    for (int64_t i = 0; ok && i < n; i++)
        ok = v[i] == (double)(i % d[nd - 1]);
    *n_out = ok ? d[nd - 1] : 0;
    core_free(r->a, v, sizeof(double) * (size_t)(n ? n : 1));
    return ok;
}

/* Gather(table, ids): an embedding whose table becomes its parameter. Constant ids that
 * count 0 .. n-1 are positions (one row per sequence of the batch, which broadcasting
 * in the Add that follows would give). */
static remat_status tf_gather(struct rd *r)
{
    struct ent *tab, *ids;
    remat_attrs at = {0};
    int64_t d[2], n;
    int32_t x, y;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &tab)) || (st = ox_in_ent(r, 1, &ids)))
        return st;
    if (tab->kind != E_TENSOR || tab->trans || ox_tensor_dims(tab->t, d, 2) != 2 ||
        ox_attr_i(r, "axis", 0) != 0)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Gather as an embedding: rows "
                            "(axis 0) of a 2-d initializer");
    if (ox_find_param(r, tab->t))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "table '%s' is already a parameter",
                            tab->name);
    if (ids->kind == E_TENSOR) {
        if (!is_positions(r, ids->t, &n))
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "constant ids other than positions "
                                "0 .. n-1");
        x = remat_graph_positions(r->g, ids->name, 2, (int64_t[]){r->batch, n});
        if (x < 0)
            return ox_graph_fail(r);
    } else if ((st = ox_in_act(r, 1, &x))) {
        return st;
    }
    at.vocab = d[0];
    at.out_channels = d[1];
    r->base = tab->name;
    if ((st = ox_emit(r, REMAT_OP_EMBEDDING, &x, 1, &at, &y)) ||
        (st = ox_keep_weight(r, tab->t, "weight", ox_param_numel(r, 0))))
        return st;
    return ox_own_param(r, tab->t, y, 0);
}

/* Output `out` as x[..., start:start+len, ...] along axis: a crop of the 4-d view
 * (outer, 1, L, inner), viewed back (with drop and len 1, without that axis). */
remat_status ox_slice_axis(struct rd *r, int32_t x, int axis, int64_t start, int64_t len,
                           bool drop, const char *out)
{
    int64_t xs[4], outer = 1, inner = 1;
    int nd = (int)ox_shape_of(r, x, xs);
    remat_attrs v = {.ndim = 4}, c = {0};
    int32_t h, y;
    remat_status st;

    for (int i = 0; i < nd; i++)
        *(i < axis ? &outer : &inner) *= i == axis ? 1 : xs[i];
    if (start == 0 && len == xs[axis] && !drop)
        return ox_define(r, out, (struct ent){.kind = E_ACT, .value = x});
    v.shape[0] = outer;
    v.shape[1] = 1;
    v.shape[2] = xs[axis];
    v.shape[3] = inner;
    c.out_h = len;
    c.out_w = inner;
    c.offset_h = (int32_t)start;
    r->base = ox_node_name(r);
    if ((st = ox_emit_as(r, REMAT_OP_RESHAPE, &x, 1, &v, NULL, &h)))
        return st;
    r->base = ox_node_name(r);
    if ((st = ox_emit_as(r, REMAT_OP_CROP, &h, 1, &c, NULL, &y)))
        return st;
    v.ndim = nd;
    memcpy(v.shape, xs, sizeof xs);
    v.shape[axis] = len;
    if (drop && nd > 1) {
        v.ndim = nd - 1;
        memmove(v.shape + axis, v.shape + axis + 1, sizeof(int64_t) * (size_t)(nd - 1 - axis));
    }
    r->base = ox_node_name(r);
    return ox_emit_as(r, REMAT_OP_RESHAPE, &y, 1, &v, out, NULL);
}

/* Slice of an activation along one axis with step 1 (constant bounds). */
static remat_status tf_slice(struct rd *r)
{
    const Onnx__TensorProto *t;
    int64_t xs[4], s = 0, e = 0, a = 0, p = 1;
    int n = 0, nd;
    int32_t x;
    bool done;
    remat_status st = ox_linear_split(r, &done);

    if (st || done)
        return st;
    st = ox_in_act(r, 0, &x);

    nd = st ? 0 : (int)ox_shape_of(r, x, xs);
    for (size_t i = 1; i < 5 && !st; i++) {
        int64_t *dst = i == 1 ? &s : i == 2 ? &e : i == 3 ? &a : &p;
        int k = 1;

        if ((st = ox_in_tensor(r, i, i > 2, &t)) || !t || (st = ox_tensor_ints(r, t, dst, 1, &k)))
            continue;
        n += k != 1;
    }
    if (st)
        return st;
    a = a < 0 ? a + nd : a;
    if (n || p != 1 || a < 0 || a >= nd)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat slices an activation along one "
                            "axis with step 1");
    s = s < 0 ? s + xs[a] : s;
    e = e < 0 ? e + xs[a] : e > xs[a] ? xs[a] : e;
    if (s < 0 || s >= e)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "an empty slice");
    return ox_slice_axis(r, x, (int)a, s, e - s, false, ox_out_name(r, 0));
}

/* Split of an activation into parts along an axis (sizes given, or equal). */
static remat_status tf_split(struct rd *r)
{
    const Onnx__TensorProto *t = NULL;
    int64_t xs[4], sz[16], at = 0, axis = ox_attr_i(r, "axis", 0);
    size_t no = ox_n_out(r), ns = 0;
    int n = 0, nd;
    int32_t x;
    bool done;
    remat_status st = ox_linear_split(r, &done);

    if (st || done || (st = ox_in_act(r, 0, &x)))
        return st;
    nd = (int)ox_shape_of(r, x, xs);
    axis = axis < 0 ? axis + nd : axis;
    if (axis < 0 || axis >= nd || no < 1 || no > 16)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "axis %lld, %zu outputs", (long long)axis,
                            no);
    if (r->opset >= 13 && (st = ox_in_tensor(r, 1, true, &t)))
        return st;
    if (t && (st = ox_tensor_ints(r, t, sz, 16, &n)))
        return st;
    if (!t && (st = ox_attr_ints_upto(r, "split", sz, 16, &ns)))
        return st;
    n = t ? n : (int)ns;
    for (size_t i = 0; !n && i < no; i++)
        sz[i] = xs[axis] / (int64_t)no;
    for (size_t i = 0; i < no && !st; i++) {
        if ((n && (size_t)n != no) || sz[i] <= 0 || sz[i] > xs[axis] - at)
            return ox_node_fail(r, REMAT_ERR_SHAPE, "split sizes do not fit %lld",
                                (long long)xs[axis]);
        if (ox_out_name(r, i))
            st = ox_slice_axis(r, x, (int)axis, at, sz[i], false, ox_out_name(r, i));
        at += sz[i];
    }
    return st;
}

/* Cast of an activation: float to float is the identity. */
static remat_status tf_cast(struct rd *r)
{
    int32_t x;
    remat_status st = ox_in_act(r, 0, &x);

    if (st)
        return st;
    if (ox_dtype_class((int)ox_attr_i(r, "to", 1)) != OX_F)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a cast of an activation to integers");
    return ox_define(r, ox_out_name(r, 0), (struct ent){.kind = E_ACT, .value = x});
}

/* ------------------------------------------------------------------ dispatch */

static const char *const tf_types[] = {
    "Gather", "Shape", "Slice", "Split", "Unsqueeze", "Squeeze", "Cast", "Range",
    "ConstantOfShape", "Expand", "Equal", "Less", "Greater", "And", "Or", "Not", "Neg",
    "Where", "Sub", "Div", "Pow", "Sqrt", "Erf", "ReduceMean", "LayerNormalization",
};

bool ox_tf_reads(const char *type)
{
    for (size_t i = 0; i < REMAT_ARRAY_LEN(tf_types); i++)
        if (!strcmp(tf_types[i], type))
            return true;
    return false;
}

/* MatMul and Softmax stay the classic reader's for a 2-d activation times a 2-d
 * initializer and a softmax over the channels. */
static bool classic_matmul(struct rd *r)
{
    const struct ent *a = ox_lookup(r, ox_in_name(r, 0)), *b = ox_lookup(r, ox_in_name(r, 1));
    int64_t s[4];

    return a && b && a->kind == E_ACT && b->kind == E_TENSOR && !b->trans &&
           !ox_find_param(r, b->t) && ox_shape_of(r, a->value, s) == 2;
}

static bool classic_softmax(struct rd *r)
{
    const struct ent *a = ox_lookup(r, ox_in_name(r, 0));
    int64_t s[4];
    int nd = a && a->kind == E_ACT ? (int)ox_shape_of(r, a->value, s) : 0;
    int64_t axis = ox_attr_i(r, "axis", r->opset >= 13 ? -1 : 1);

    return nd == 2 || (nd == 4 && (axis == 1 || axis == -3));
}

remat_status ox_tf_node(struct rd *r, bool *done)
{
    const char *ty = ox_node_type(r);

    *done = true;
    if (!strcmp(ty, "Add"))
        return tf_add(r, done);
    if (!strcmp(ty, "Mul") || !strcmp(ty, "Div"))
        return tf_mul(r, ty[0] == 'D', done);
    if (!strcmp(ty, "MatMul") && !classic_matmul(r))
        return tf_matmul(r);
    if (!strcmp(ty, "Softmax") && !classic_softmax(r))
        return tf_softmax(r);
    if (!strcmp(ty, "Gather"))
        return tf_gather(r);
    if (!strcmp(ty, "Slice"))
        return tf_slice(r);
    if (!strcmp(ty, "Split"))
        return tf_split(r);
    if (!strcmp(ty, "Cast"))
        return tf_cast(r);
    if (!strcmp(ty, "Where"))
        return tf_where(r);
    if (!strcmp(ty, "Sub"))
        return tf_sub(r);
    if (!strcmp(ty, "Pow"))
        return tf_pow(r);
    if (!strcmp(ty, "Sqrt"))
        return tf_sqrt(r);
    if (!strcmp(ty, "Erf"))
        return tf_erf(r);
    if (!strcmp(ty, "ReduceMean"))
        return ln_reduce_mean(r);
    if (!strcmp(ty, "LayerNormalization"))
        return tf_layer_norm(r);
    if (ox_tf_reads(ty))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat folds %s over constants only", ty);
    *done = false;
    return REMAT_OK;
}
