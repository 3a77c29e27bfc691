/*
 * onnx_act.c - the activations and reductions of mobile networks and of GPT-style MLPs,
 * read before the transformer's patterns (onnx_tf.c):
 *
 *   Tanh                                tanh
 *   HardSigmoid (alpha, beta)           hard_sigmoid; with PyTorch's 1/6 and 1/2 and
 *                                       read by Mul with its own input (opset 13's
 *                                       Hardswish): hard_swish
 *   HardSwish                           hard_swish
 *   x * x * x or Pow(x, 3); * 0.044715; + x; * sqrt(2 / pi); Tanh; + 1; * x; * 0.5
 *                                       gelu with approximate (the tanh form): PyTorch's
 *                                       export of F.gelu(x, approximate='tanh'), or the
 *                                       hand-written 0.5 x (1 + tanh(...)) with the 0.5
 *                                       first
 *   ReduceSum, ReduceMean (any axes)    reduce_sum (a mean: scaled by 1 / count), then a
 *                                       reshape view without the axes when keepdims is 0
 *
 * The patterns are pending expressions (onnx_read.h): x * x (P_TANH_SQ) read by anything
 * else is built as a mul, a hard sigmoid (P_HSIG) as itself, a mean over the last axis
 * that no layer norm's Sub reads (P_LN_MEAN) as reduce_sum; the other stages of the
 * tanh GELU are refused when something else reads them (ox_pend_build). A node that is
 * none of these is left to the other readers (*done false).
 */
#include "io/onnx_read.h"

#include <math.h>
#include <string.h>

static remat_status pend(struct rd *r, int pk, int32_t x, float f)
{
    return ox_define(r, ox_out_name(r, 0),
                     (struct ent){.kind = E_PEND, .pk = pk, .value = x, .f = f});
}

static bool is_pend(const struct ent *e, int pk)
{
    return e && e->kind == E_PEND && e->pk == pk;
}

static bool is_act(const struct ent *e)
{
    return e && e->kind == E_ACT;
}


/* input i's entry without failing (NULL when missing or undefined) */
static struct ent *in_ent(const struct rd *r, size_t i)
{
    return i < ox_n_in(r) ? ox_lookup(r, ox_in_name(r, i)) : NULL;
}

static remat_status emit_gelu_tanh(struct rd *r, int32_t x)
{
    return ox_emit(r, REMAT_OP_GELU, &x, 1, &(remat_attrs){.approximate = true}, NULL);
}

/* ------------------------------------------------------------------ hard activations */

static bool is_torch_hsig(float a, float b)
{
    return ox_near(a, 1.0 / 6) && b == 0.5f;
}

static remat_status act_hard_sigmoid(struct rd *r)
{
    float a = ox_attr_f(r, "alpha", 0.2f), b = ox_attr_f(r, "beta", 0.5f);
    int32_t x;
    remat_status st = ox_in_act(r, 0, &x);

    if (st)
        return st;
    if (a == 0) /* remat's alpha 0 means PyTorch's slope */
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "alpha 0 (a constant output)");
    if (is_torch_hsig(a, b))
        return pend(r, P_HSIG, x, 0);
    return ox_emit(r, REMAT_OP_HARD_SIGMOID, &x, 1, &(remat_attrs){.alpha = a, .beta = b},
                   NULL);
}

remat_status ox_act_hsig(struct rd *r, struct ent *e, int32_t *v)
{
    int32_t x = e->value;

    return ox_emit_as(r, REMAT_OP_HARD_SIGMOID, &x, 1, NULL, e->name, v);
}

remat_status ox_act_square(struct rd *r, struct ent *e, int32_t *v)
{
    int32_t ins[2] = {e->value, e->value};

    return ox_emit_as(r, REMAT_OP_MUL, ins, 2, NULL, e->name, v);
}

/* ------------------------------------------------------------------ tanh GELU */

/* Mul: a stage of the tanh GELU, or x * hard_sigmoid(x); *done false otherwise. */
static remat_status act_mul(struct rd *r, bool *done)
{
    struct ent *a = in_ent(r, 0), *b = in_ent(r, 1), *t;
    double c;

    if (!a || !b || ox_n_in(r) != 2)
        return REMAT_OK;
    if (a->kind == E_TENSOR || (is_pend(a, P_SCALE) && !is_act(b))) { /* a constant or
                                                                         0.5 x second */
        t = a;
        a = b;
        b = t;
    }
    if (is_pend(a, P_TANH_SQ) || is_pend(a, P_TANH_T1) || is_pend(a, P_HSIG)) {
        t = a; /* the plain x first */
        a = b;
        b = t;
    }
    *done = true;
    if (is_act(a) && is_act(b) && a->value == b->value)
        return pend(r, P_TANH_SQ, a->value, 1);
    if (is_act(a) && is_pend(b, P_TANH_SQ) && b->value == a->value)
        return pend(r, P_TANH_CUBE, a->value, 1);
    if (is_act(a) && is_pend(b, P_TANH_T1) && b->value == a->value)
        return pend(r, P_TANH_XT, a->value, 0);
    if (is_act(a) && is_pend(b, P_HSIG) && b->value == a->value)
        return ox_emit(r, REMAT_OP_HARD_SWISH, &a->value, 1, NULL, NULL);
    if (is_pend(a, P_SCALE) && !a->causal && ox_near(a->f, 0.5) && is_pend(b, P_TANH_T1) &&
        a->value == b->value)
        return emit_gelu_tanh(r, a->value);
    if (ox_scalar_of(r, b, &c)) {
        if (is_pend(a, P_TANH_CUBE) || is_pend(a, P_TANH_INNER))
            return pend(r, a->pk, a->value, (float)(a->f * c));
        if (is_pend(a, P_TANH_XT) && ox_near(c, 0.5))
            return emit_gelu_tanh(r, a->value);
    }
    *done = false;
    return REMAT_OK;
}

/* Add: x + 0.044715 x^3, or 1 + tanh(...); *done false otherwise. */
static remat_status act_add(struct rd *r, bool *done)
{
    struct ent *a = in_ent(r, 0), *b = in_ent(r, 1), *t;
    double c;

    if (!a || !b || ox_n_in(r) != 2)
        return REMAT_OK;
    if (!is_act(a) && !is_pend(a, P_TANH_T)) {
        t = a;
        a = b;
        b = t;
    }
    *done = true;
    if (is_act(a) && is_pend(b, P_TANH_CUBE) && b->value == a->value && ox_near(b->f, 0.044715))
        return pend(r, P_TANH_INNER, a->value, 1);
    if (is_pend(a, P_TANH_T) && ox_scalar_of(r, b, &c) && c == 1)
        return pend(r, P_TANH_T1, a->value, 0);
    *done = false;
    return REMAT_OK;
}

/* Tanh: GELU's tanh(sqrt(2 / pi) (x + 0.044715 x^3)), or the tanh op. */
static remat_status act_tanh(struct rd *r)
{
    struct ent *e = in_ent(r, 0);
    int32_t x;
    remat_status st;

    if (is_pend(e, P_TANH_INNER) && ox_near(e->f, sqrt(2 / acos(-1.0))))
        return pend(r, P_TANH_T, e->value, 0);
    if ((st = ox_in_act(r, 0, &x)))
        return st;
    return ox_emit(r, REMAT_OP_TANH, &x, 1, NULL, NULL);
}

/* Pow(x, 3) of an activation: GELU's cube; *done false otherwise (a layer norm's ^2). */
static remat_status act_pow(struct rd *r, bool *done)
{
    struct ent *a = in_ent(r, 0), *b = in_ent(r, 1);
    double p;

    if (!is_act(a) || !ox_scalar_of(r, b, &p) || p != 3)
        return REMAT_OK;
    *done = true;
    return pend(r, P_TANH_CUBE, a->value, 1);
}

/* ------------------------------------------------------------------ reductions */

/* The axes of ReduceSum (input 1 from opset 13) or ReduceMean (attribute) as a mask
 * over nd dimensions; *all when none are given. */
static remat_status reduce_axes(struct rd *r, bool mean, int nd, bool *mask, bool *none)
{
    const Onnx__TensorProto *t = NULL;
    int64_t ax[8];
    size_t n = 0;
    int k = 0;
    remat_status st;

    if (!mean && r->opset >= 13) {
        if ((st = ox_in_tensor(r, 1, true, &t)) || (t && (st = ox_tensor_ints(r, t, ax, 8, &k))))
            return st;
        n = t ? (size_t)k : 0;
    } else if ((st = ox_attr_ints_upto(r, "axes", ax, 8, &n))) {
        return st;
    }
    *none = n == 0;
    for (int i = 0; i < nd; i++)
        mask[i] = n == 0;
    for (size_t i = 0; i < n; i++) {
        int64_t a = ax[i] < 0 ? ax[i] + nd : ax[i];

        if (a < 0 || a >= nd)
            return ox_node_fail(r, REMAT_ERR_PARSE, "axis %lld of a %d-d tensor",
                                (long long)ax[i], nd);
        mask[a] = true;
    }
    return REMAT_OK;
}

/* ReduceSum or ReduceMean of an activation over any axes: reduce_sum, scaled by
 * 1 / count for a mean, viewed without the axes when keepdims is 0. */
remat_status ox_act_reduce(struct rd *r, bool mean)
{
    remat_attrs at = {0}, v = {0};
    int64_t xs[4], count = 1;
    bool mask[4], none, keep = ox_attr_i(r, "keepdims", 1) != 0;
    int32_t x, y;
    int nd;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)))
        return st;
    nd = (int)ox_shape_of(r, x, xs);
    if ((st = reduce_axes(r, mean, nd, mask, &none)))
        return st;
    if (none && !mean && ox_attr_i(r, "noop_with_empty_axes", 0))
        return ox_define(r, ox_out_name(r, 0), (struct ent){.kind = E_ACT, .value = x});
    at.ndim = nd;
    for (int i = 0; i < nd; i++) {
        at.shape[i] = mask[i] ? 1 : xs[i];
        count *= mask[i] ? xs[i] : 1;
        if (!mask[i])
            v.shape[v.ndim++] = xs[i];
    }
    at.scale = mean ? (float)(1.0 / (double)count) : 1;
    if (keep)
        return ox_emit(r, REMAT_OP_REDUCE_SUM, &x, 1, &at, NULL);
    if ((st = ox_emit_as(r, REMAT_OP_REDUCE_SUM, &x, 1, &at, NULL, &y)))
        return st;
    if (v.ndim == 0) /* a scalar: remat's values have a dimension */
        v.shape[v.ndim++] = 1;
    r->base = ox_node_name(r);
    return ox_emit_as(r, REMAT_OP_RESHAPE, &y, 1, &v, ox_out_name(r, 0), NULL);
}

/* A mean over the last axis (keepdims) that turned out not to be a layer norm's. */
remat_status ox_act_mean_last(struct rd *r, struct ent *e, int32_t *v)
{
    remat_attrs at = {0};
    int64_t xs[4];
    int nd = (int)ox_shape_of(r, e->value, xs);
    int32_t x = e->value;

    at.ndim = nd;
    memcpy(at.shape, xs, sizeof xs);
    at.shape[nd - 1] = 1;
    at.scale = (float)(1.0 / (double)xs[nd - 1]);
    return ox_emit_as(r, REMAT_OP_REDUCE_SUM, &x, 1, &at, e->name, v);
}

/* ------------------------------------------------------------------ dispatch */

static const char *const act_types[] = {"Tanh", "HardSigmoid", "HardSwish", "ReduceSum"};

bool ox_act_reads(const char *type)
{
    for (size_t i = 0; i < REMAT_ARRAY_LEN(act_types); i++)
        if (!strcmp(act_types[i], type))
            return true;
    return false;
}

remat_status ox_act_node(struct rd *r, bool *done)
{
    const char *ty = ox_node_type(r);
    int32_t x;
    remat_status st;

    *done = false;
    if (!strcmp(ty, "Mul"))
        return act_mul(r, done);
    if (!strcmp(ty, "Add"))
        return act_add(r, done);
    if (!strcmp(ty, "Pow"))
        return act_pow(r, done);
    if (!ox_act_reads(ty))
        return REMAT_OK;
    *done = true;
    if (!strcmp(ty, "Tanh"))
        return act_tanh(r);
    if (!strcmp(ty, "HardSigmoid"))
        return act_hard_sigmoid(r);
    if (!strcmp(ty, "ReduceSum"))
        return ox_act_reduce(r, false);
    if ((st = ox_in_act(r, 0, &x)))
        return st;
    return ox_emit(r, REMAT_OP_HARD_SWISH, &x, 1, NULL, NULL);
}
