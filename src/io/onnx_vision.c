/*
 * onnx_vision.c - the patterns of the image models PyTorch exports today (torchvision's
 * MNASNet, ShuffleNetV2, ConvNeXt, VisionTransformer), read before constant folding:
 *
 *   ReduceMean over height and width   global_avg_pool (then flatten when keepdims 0)
 *   Reshape (N, g, C/g, H, W), Transpose (0, 2, 1, 3, 4), Reshape (N, C, H, W)
 *                                      a channel shuffle: reshape (N, g, C/g, H W),
 *                                      transpose (0, 2, 1, 3), reshape (a copy)
 *   Mul by an initializer (C, 1, 1)    a layer scale: a depthwise 1x1 conv2d without bias
 *                                      whose weight is that initializer
 *   Expand of an initializer (1, 1, D) to (batch, 1, D)
 *                                      a class token: an embedding of one row read at
 *                                      position 0 of every sequence (so its gradient
 *                                      sums over the batch into the initializer)
 *   Add of an initializer (1, S, D)    a position embedding: an embedding of S rows read
 *                                      at positions 0 .. S-1, added
 *   Gather(x, scalar i) of an activation
 *                                      x[:, i] (along the axis): a slice without the axis
 *
 * A node that is none of these is left to the other readers (*done false).
 */
#include "io/onnx_read.h"

#include <string.h>

static remat_status pend(struct rd *r, int pk, int32_t x, float f, const Onnx__TensorProto *t)
{
    return ox_define(r, ox_out_name(r, 0),
                     (struct ent){.kind = E_PEND, .pk = pk, .value = x, .f = f, .t = t});
}

static bool is_pend(const struct ent *e, int pk)
{
    return e && e->kind == E_PEND && e->pk == pk;
}

/* Whether e is a float initializer of the file (a folded or Constant tensor has another
 * name than its entry's). */
static bool is_init(const struct ent *e)
{
    return e && e->kind == E_TENSOR && !e->trans && e->name &&
           !strcmp(ox_tensor_name(e->t), e->name) &&
           ox_dtype_class(ox_tensor_type(e->t)) == OX_F;
}

/* An input's entry without failing (NULL when it is missing or undefined). */
static struct ent *in_ent(const struct rd *r, size_t i)
{
    return i < ox_n_in(r) ? ox_lookup(r, ox_in_name(r, i)) : NULL;
}

/* ------------------------------------------------------------------ spatial mean */

/* ReduceMean over axes 2 and 3 of a 4-d activation: global average pooling. */
static remat_status spatial_mean(struct rd *r, bool *done)
{
    const struct ent *e = in_ent(r, 0);
    int64_t ax[4], xs[4];
    size_t na = 0;
    int32_t x, y;
    bool h = false, w = false;
    remat_status st;

    if (!e || e->kind != E_ACT || ox_shape_of(r, e->value, xs) != 4 ||
        (st = ox_attr_ints_upto(r, "axes", ax, 4, &na)) || na != 2)
        return REMAT_OK;
    for (size_t i = 0; i < na; i++) {
        h |= ax[i] == 2 || ax[i] == -2;
        w |= ax[i] == 3 || ax[i] == -1;
    }
    if (!h || !w)
        return REMAT_OK;
    *done = true;
    x = e->value;
    if (ox_attr_i(r, "keepdims", 1))
        return ox_emit(r, REMAT_OP_GLOBAL_AVG_POOL, &x, 1, NULL, NULL);
    if ((st = ox_emit_as(r, REMAT_OP_GLOBAL_AVG_POOL, &x, 1, NULL, NULL, &y)))
        return st;
    return ox_emit(r, REMAT_OP_FLATTEN, &y, 1, NULL, NULL);
}

/* ------------------------------------------------------------------ channel shuffle */

/* A Reshape's target with 0 (copy, without allowzero) and -1 worked out against the
 * input's shape xs (nd dimensions, numel elements); false when it does not fit. */
static bool target_shape(struct rd *r, const int64_t *xs, int nd, int64_t *v, int n)
{
    int64_t numel = 1, known = 1;
    int neg = -1;

    for (int i = 0; i < nd; i++)
        numel *= xs[i];
    for (int i = 0; i < n; i++) {
        if (v[i] == 0 && !ox_attr_i(r, "allowzero", 0) && i < nd)
            v[i] = xs[i];
        if (v[i] == -1 && neg < 0)
            neg = i;
        else if (v[i] <= 0)
            return false;
        else
            known *= v[i];
    }
    if (neg >= 0)
        v[neg] = known > 0 && numel % known == 0 ? numel / known : -1;
    return neg < 0 ? known == numel : v[neg] > 0;
}

/* The Reshape's constant target (up to 8 values); false when it is not one. */
static bool reshape_target(struct rd *r, int64_t *v, int *n)
{
    const struct ent *t = in_ent(r, 1);

    return t && t->kind == E_TENSOR && !ox_tensor_ints(r, t->t, v, 8, n);
}

/* Reshape (N, C, H, W) to (N, g, C/g, H, W): the first node of a channel shuffle. */
static remat_status shuffle_view(struct rd *r, const struct ent *e, bool *done)
{
    int64_t xs[4], v[8];
    int n;

    if (ox_shape_of(r, e->value, xs) != 4 || !reshape_target(r, v, &n) || n != 5 ||
        !target_shape(r, xs, 4, v, n) || v[0] != xs[0] || v[3] != xs[2] || v[4] != xs[3])
        return REMAT_OK;
    *done = true;
    return pend(r, P_SHUF, e->value, (float)v[1], NULL);
}

/* Reshape of the transposed view back to (N, C, H, W): reshape (N, g, C/g, H W),
 * transpose (0, 2, 1, 3), reshape (N, C, H, W). */
static remat_status shuffle_end(struct rd *r, const struct ent *e, bool *done)
{
    int64_t xs[4], v[8], t5[5], g = (int64_t)e->f;
    remat_attrs at = {.ndim = 4}, tr = {.perm = {0, 2, 1, 3}};
    int32_t x = e->value, y;
    int n;
    remat_status st;

    *done = true;
    ox_shape_of(r, x, xs);
    t5[0] = xs[0];
    t5[1] = xs[1] / g;
    t5[2] = g;
    t5[3] = xs[2];
    t5[4] = xs[3];
    if (!reshape_target(r, v, &n) || n != 4 || !target_shape(r, t5, 5, v, n) ||
        memcmp(v, xs, sizeof xs))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a channel shuffle must end in a "
                            "Reshape back to its input's shape");
    at.shape[0] = xs[0];
    at.shape[1] = g;
    at.shape[2] = xs[1] / g;
    at.shape[3] = xs[2] * xs[3];
    if ((st = ox_emit_as(r, REMAT_OP_RESHAPE, &x, 1, &at, NULL, &y)) ||
        (st = ox_emit_as(r, REMAT_OP_TRANSPOSE, &y, 1, &tr, NULL, &y)))
        return st;
    memcpy(at.shape, xs, sizeof xs);
    return ox_emit(r, REMAT_OP_RESHAPE, &y, 1, &at, NULL);
}

static remat_status shuffle_transpose(struct rd *r, const struct ent *e, bool *done)
{
    int64_t p[8];
    size_t n = 0;
    remat_status st;

    *done = true;
    if ((st = ox_attr_ints_upto(r, "perm", p, 8, &n)))
        return st;
    if (n != 5 || p[0] != 0 || p[1] != 2 || p[2] != 1 || p[3] != 3 || p[4] != 4)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a 5-d transpose other than a channel "
                            "shuffle's (0, 2, 1, 3, 4)");
    return pend(r, P_SHUF_T, e->value, e->f, NULL);
}

/* ------------------------------------------------------------------ parameters */

/* Mul of a 4-d activation by an initializer (C, 1, 1) or (1, C, 1, 1): a depthwise 1x1
 * convolution whose weight is the initializer (ConvNeXt's layer scale). */
static remat_status layer_scale(struct rd *r, bool *done)
{
    const struct ent *a = in_ent(r, 0), *b = in_ent(r, 1), *t;
    int64_t xs[4], d[4];
    remat_attrs at = {.kh = 1, .kw = 1};
    int nd;
    int32_t x;
    remat_status st;

    if (is_init(a)) {
        t = a;
        a = b;
        b = t;
    }
    if (!a || a->kind != E_ACT || !is_init(b) || ox_shape_of(r, a->value, xs) != 4)
        return REMAT_OK;
    nd = ox_tensor_dims(b->t, d, 4);
    if (nd < 3 || d[nd - 3] != xs[1] || d[nd - 2] != 1 || d[nd - 1] != 1 || xs[1] < 2 ||
        (nd == 4 && d[0] != 1))
        return REMAT_OK;
    *done = true;
    at.out_channels = xs[1];
    at.groups = (int32_t)xs[1];
    x = a->value;
    r->base = b->name;
    if ((st = ox_emit(r, REMAT_OP_CONV2D, &x, 1, &at, NULL)))
        return st;
    return ox_keep_weight(r, b->t, "weight", ox_param_numel(r, 0));
}

/* An embedding of initializer t's rows (as a (rows, D) table) read at positions
 * 0 .. rows-1 of each of the batch's sequences: (batch, rows, D). */
static remat_status param_rows(struct rd *r, const Onnx__TensorProto *t, int64_t rows,
                               int64_t width, const char *out, int32_t *v)
{
    remat_attrs at = {.vocab = rows, .out_channels = width};
    int32_t pos = remat_graph_positions(r->g, ox_tensor_name(t), 2, (int64_t[]){r->batch, rows});
    int32_t y;
    remat_status st;

    if (pos < 0)
        return ox_graph_fail(r);
    r->base = ox_tensor_name(t);
    if ((st = ox_emit_as(r, REMAT_OP_EMBEDDING, &pos, 1, &at, out, &y)) ||
        (st = ox_keep_weight(r, t, "weight", ox_param_numel(r, 0))))
        return st;
    if (v)
        *v = y;
    return ox_own_param(r, t, y, 0);
}

/* Expand of an initializer (1, 1, D) over the batch: a class token, pending until an op
 * reads it (ox_vis_bcast). */
static remat_status expand_param(struct rd *r, bool *done)
{
    const struct ent *e = in_ent(r, 0), *s = in_ent(r, 1);
    int64_t d[4], v[4];
    int n;

    if (!is_init(e) || !s || s->kind != E_TENSOR || ox_tensor_dims(e->t, d, 4) != 3 ||
        d[0] != 1 || d[1] != 1 || ox_find_param(r, e->t) || ox_tensor_ints(r, s->t, v, 4, &n) ||
        n != 3 || v[0] != r->batch_file || (v[1] != 1) || (v[2] != 1 && v[2] != d[2]))
        return REMAT_OK;
    *done = true;
    return pend(r, P_BCAST, -1, 0, e->t);
}

remat_status ox_vis_bcast(struct rd *r, struct ent *e, int32_t *v)
{
    const Onnx__TensorProto *t = e->t;
    int64_t d[4];

    ox_tensor_dims(t, d, 4);
    if (ox_find_param(r, t))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "'%s' expanded twice", ox_tensor_name(t));
    return param_rows(r, t, 1, d[2], e->name, v);
}

/* Add of an activation (N, S, D) and an initializer (1, S, D): a position embedding. */
static remat_status position_add(struct rd *r, bool *done)
{
    const struct ent *a = in_ent(r, 0), *b = in_ent(r, 1), *t;
    int64_t xs[4], d[4];
    int32_t ins[2];
    remat_status st;

    if (is_init(a)) {
        t = a;
        a = b;
        b = t;
    }
    if (!a || a->kind != E_ACT || !is_init(b) || ox_shape_of(r, a->value, xs) != 3 ||
        ox_tensor_dims(b->t, d, 4) != 3 || d[0] != 1 || d[1] != xs[1] || d[2] != xs[2])
        return REMAT_OK;
    *done = true;
    if (ox_find_param(r, b->t))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "'%s' added twice", b->name);
    ins[0] = a->value;
    if ((st = param_rows(r, b->t, d[1], d[2], NULL, &ins[1])))
        return st;
    return ox_emit(r, REMAT_OP_ADD, ins, 2, NULL, NULL);
}

/* Gather(x, i) of an activation by one constant index: x's slice i along the axis, the
 * axis dropped (a ViT's class token, x[:, 0]). */
static remat_status pick(struct rd *r, bool *done)
{
    const struct ent *e = in_ent(r, 0), *i = in_ent(r, 1);
    int64_t xs[4], k, d[1], axis = ox_attr_i(r, "axis", 0);
    int nd, n;

    if (!e || e->kind != E_ACT || !i || i->kind != E_TENSOR || ox_tensor_dims(i->t, d, 1) != 0)
        return REMAT_OK;
    *done = true;
    nd = (int)ox_shape_of(r, e->value, xs);
    axis = axis < 0 ? axis + nd : axis;
    if (axis < 0 || axis >= nd || nd < 2 || ox_tensor_ints(r, i->t, &k, 1, &n) || n != 1)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat reads Gather of an activation as "
                            "one index along an axis of a 2-d to 4-d tensor");
    k = k < 0 ? k + xs[axis] : k;
    if (k < 0 || k >= xs[axis])
        return ox_node_fail(r, REMAT_ERR_SHAPE, "index %lld out of %lld", (long long)k,
                            (long long)xs[axis]);
    return ox_slice_axis(r, e->value, (int)axis, k, 1, true, ox_out_name(r, 0));
}

remat_status ox_vis_node(struct rd *r, bool *done)
{
    const char *ty = ox_node_type(r);
    const struct ent *e = in_ent(r, 0);

    *done = false;
    if (!strcmp(ty, "ReduceMean"))
        return spatial_mean(r, done);
    if (!strcmp(ty, "Reshape") && is_pend(e, P_SHUF_T))
        return shuffle_end(r, e, done);
    if (!strcmp(ty, "Reshape") && e && e->kind == E_ACT)
        return shuffle_view(r, e, done);
    if (!strcmp(ty, "Transpose") && is_pend(e, P_SHUF))
        return shuffle_transpose(r, e, done);
    if (!strcmp(ty, "Mul") && ox_n_in(r) == 2)
        return layer_scale(r, done);
    if (!strcmp(ty, "Expand") && ox_n_in(r) == 2)
        return expand_param(r, done);
    if (!strcmp(ty, "Add") && ox_n_in(r) == 2)
        return position_add(r, done);
    if (!strcmp(ty, "Gather") && ox_n_in(r) == 2)
        return pick(r, done);
    return REMAT_OK;
}
