/*
 * onnx_linear.c - linear layers over an activation's last axis (a MatMul by an
 * initializer and the Add of its bias, or a Gemm), and a linear layer read in parts.
 *
 * A layer whose output feeds only a Split, or only Slices, into k >= 2 equal contiguous
 * blocks of its output features (a fused attention projection split into q, k and v)
 * becomes k linear layers, one per block, each with the matching rows of the weight
 * (out, in) and of the bias: the graph the zoo's gpt2 builds (three (D, D) layers), no
 * copies of the blocks. The weight stays one tensor to the user: the k weights (and
 * biases) are parameters laid out side by side in the trainer's block (gvalue.part_of),
 * and the first one's name, the initializer's ("blocks.0.attn.weight"), names the whole
 * tensor, its starting value, gradient and saved record; the others are named after
 * their ops ("blocks.0.attn#2.weight"). Only an initializer that nothing else reads (a
 * weight tied elsewhere stays whole) is split.
 *
 * Whether a layer splits is known only from the nodes that read its output, which may
 * come after constants not read yet, so this file looks ahead in the graph (ox_visit):
 * the layer waits as a pending expression (P_LINEAR) for its
 * reader, which builds it in parts (ox_linear_split) or whole (ox_pend_build). Sizes: a
 * look-ahead scans every node's inputs once per linear layer (10^3 nodes at most in the
 * models of docs/onnx.md).
 */
#include "io/onnx_read.h"

#include <string.h>

#define MAX_PARTS 16

/* part of a layer's output features: start .. start + len, read as `out` */
struct part {
    const char *out;
    int64_t start, len;
};

/* ------------------------------------------------------------------ building */

/* Notes that the parameters of the linear layer whose output is y are part j of the
 * split tensors whose first parts are first[0] (weights) and first[1] (biases). */
static void join_parts(struct rd *r, int32_t y, int j, int32_t first[2])
{
    for (int i = 0; i < 2; i++) {
        int32_t p = remat_graph_param(r->g, y, i);

        if (p < 0)
            continue;
        if (j == 0)
            first[i] = p;
        graph_value(r->g, p)->part_of = first[i];
    }
}

remat_status ox_linear(struct rd *r, int32_t x, const Onnx__TensorProto *w, bool w_is_out_in,
                       const Onnx__TensorProto *b, int k, const char *const *out_names,
                       int32_t *out)
{
    int64_t xs[4], wd[2], rows = 1;
    int nd = (int)ox_shape_of(r, x, xs);
    remat_attrs at = {0}, v = {.ndim = 2}, back = {0};
    int32_t h = x, y, first[2] = {-1, -1};
    remat_status st;

    if (ox_tensor_dims(w, wd, 2) != 2 || nd < 2)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a linear layer needs a 2-d weight and "
                            "an input of 2 to 4 dimensions");
    if (wd[w_is_out_in ? 1 : 0] != xs[nd - 1])
        return ox_node_fail(r, REMAT_ERR_SHAPE, "weight '%s' does not take %lld features",
                            ox_tensor_name(w), (long long)xs[nd - 1]);
    at.out_channels = wd[w_is_out_in ? 0 : 1];
    at.bias = b != NULL;
    if (b && ox_tensor_numel(b) != at.out_channels)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a bias of %lld values for %lld outputs",
                            (long long)ox_tensor_numel(b), (long long)at.out_channels);
    REMAT_ASSERT(k >= 1 && at.out_channels % k == 0);
    at.out_channels /= k;
    for (int i = 0; i < nd - 1; i++)
        rows *= xs[i];
    v.shape[0] = rows;
    v.shape[1] = xs[nd - 1];
    back.ndim = nd;
    memcpy(back.shape, xs, sizeof xs);
    back.shape[nd - 1] = at.out_channels;
    for (int j = 0; j < k; j++) {
        if (nd > 2 && (st = ox_emit_as(r, REMAT_OP_RESHAPE, &x, 1, &v, NULL, &h)))
            return st;
        r->base = ox_tensor_name(w);
        if ((st = ox_emit_as(r, REMAT_OP_LINEAR, &h, 1, &at, nd > 2 ? NULL : out_names[j], &y)))
            return st;
        if (j == 0 && /* the whole initializer, named by the first part */
            ((st = (w_is_out_in ? ox_keep_weight : ox_keep_weight_t)(
                  r, w, "weight", ox_param_numel(r, 0) * k)) ||
             (st = ox_keep_weight(r, b, "bias", ox_param_numel(r, 1) * k))))
            return st;
        if (k > 1)
            join_parts(r, y, j, first);
        else if ((st = ox_own_param(r, w, y, 0)))
            return st;
        if (nd > 2 && (st = ox_emit_as(r, REMAT_OP_RESHAPE, &y, 1, &back, out_names[j], &y)))
            return st;
        if (j == 0)
            *out = y;
    }
    return REMAT_OK;
}

/* ------------------------------------------------------------------ looking ahead */

static bool is_name(const char *a, const char *b)
{
    return a && b && !strcmp(a, b);
}

/* How many inputs of the graph's nodes read name (a graph output counts as one, with
 * index -1); the first max readers' node indices into idx. */
static size_t readers(struct rd *r, const char *name, int64_t *idx, size_t max)
{
    size_t n = 0, here = r->node_i;

    for (size_t i = 0; i < ox_n_nodes(r); i++) {
        ox_visit(r, i);
        for (size_t k = 0; k < ox_n_in(r); k++)
            if (is_name(ox_in_name(r, k), name) && n++ < max)
                idx[n - 1] = (int64_t)i;
    }
    ox_visit(r, here);
    if (ox_is_output(r, name) && n++ < max)
        idx[n - 1] = -1;
    return n;
}

/* Node i's type, or "" (a graph output, i = -1). */
static bool is_type(struct rd *r, int64_t i, const char *type)
{
    size_t was;
    bool is;

    if (i < 0)
        return false;
    was = ox_visit(r, (size_t)i);
    is = !strcmp(ox_node_type(r), type);
    ox_visit(r, was);
    return is;
}

/* Whether constant t is read by one node only (directly, or through one Transpose or
 * Identity of it read once): nothing ties another op to it. t must be what its own name
 * defines (an initializer or a Constant's value, not a tensor folded from one). */
static bool read_once(struct rd *r, const Onnx__TensorProto *t)
{
    const struct ent *e = t ? ox_lookup(r, ox_tensor_name(t)) : NULL;
    int64_t i;
    size_t was;
    const char *out;

    if (!t)
        return true;
    if (!e || e->kind != E_TENSOR || e->t != t || readers(r, ox_tensor_name(t), &i, 1) != 1)
        return false;
    if (!is_type(r, i, "Transpose") && !is_type(r, i, "Identity"))
        return i >= 0;
    was = ox_visit(r, (size_t)i);
    out = ox_n_out(r) == 1 ? ox_out_name(r, 0) : NULL;
    ox_visit(r, was);
    return out && readers(r, out, &i, 1) == 1 && i >= 0;
}

/* The integers of constant `name`: an initializer or constant read already, or the
 * value of a Constant node not read yet. */
static bool const_ints(struct rd *r, const char *name, int64_t *v, int max, int *n)
{
    const struct ent *e = ox_lookup(r, name);
    const Onnx__TensorProto *t = e && e->kind == E_TENSOR && !e->trans ? e->t : NULL;
    size_t here = r->node_i;

    for (size_t i = 0; !e && !t && i < ox_n_nodes(r); i++) {
        ox_visit(r, i);
        if (!strcmp(ox_node_type(r), "Constant") && is_name(ox_out_name(r, 0), name))
            t = ox_attr_tensor(r, "value");
    }
    ox_visit(r, here);
    return t && !ox_tensor_ints(r, t, v, max, n);
}

/* The parts that the node being visited, a Split, cuts from `name` (input 0) along the
 * last of nd_x axes, of out features: its outputs in order. */
static bool split_parts(struct rd *r, const char *name, int nd_x, int64_t out, struct part *p,
                        size_t *k)
{
    int64_t sz[MAX_PARTS], axis = ox_attr_i(r, "axis", 0), at = 0;
    const char *sizes = ox_in_name(r, 1);
    size_t ns = 0;
    int n = 0;

    *k = ox_n_out(r);
    if (!is_name(ox_in_name(r, 0), name) || *k < 2 || *k > MAX_PARTS ||
        (axis < 0 ? axis + nd_x : axis) != nd_x - 1)
        return false;
    if (sizes ? !const_ints(r, sizes, sz, MAX_PARTS, &n)
              : ox_attr_ints_upto(r, "split", sz, MAX_PARTS, &ns) != REMAT_OK)
        return false;
    n = sizes ? n : (int)ns;
    if (n && (size_t)n != *k)
        return false;
    for (size_t i = 0; i < *k; i++) {
        p[i] = (struct part){ox_out_name(r, i), at, n ? sz[i] : out / (int64_t)*k};
        if (p[i].len < 0 || p[i].len > out - at) /* a file's sizes: never past out */
            return false;
        at += p[i].len;
    }
    return true;
}

/* The part that the node being visited, a Slice, cuts from `name` along the last of nd_x
 * axes (constant bounds, step 1), of out features. */
static bool slice_part(struct rd *r, const char *name, int nd_x, int64_t out, struct part *p)
{
    int64_t v[4] = {0, 0, 0, 1}; /* starts, ends, axes, steps */
    int n;

    if (ox_n_in(r) < 3 || !is_name(ox_in_name(r, 0), name))
        return false;
    for (size_t i = 1; i < 5; i++)
        if (ox_in_name(r, i) && (!const_ints(r, ox_in_name(r, i), &v[i - 1], 1, &n) || n != 1))
            return false;
    if ((v[2] < 0 ? v[2] + nd_x : v[2]) != nd_x - 1 || v[3] != 1)
        return false;
    for (int i = 0; i < 2; i++) {
        v[i] = v[i] < 0 ? v[i] + out : v[i];
        v[i] = v[i] < 0 ? 0 : v[i] > out ? out : v[i];
    }
    *p = (struct part){ox_out_name(r, 0), v[0], v[1] - v[0]};
    return true;
}

/* The parts of node i (a Split: all of them; a Slice: one) into p, their count in *k. */
static bool node_parts(struct rd *r, int64_t i, bool split, const char *name, int nd_x,
                       int64_t out, struct part *p, size_t *k)
{
    size_t was;
    bool ok;

    if (i < 0)
        return false;
    was = ox_visit(r, (size_t)i);
    *k = 1;
    ok = !strcmp(ox_node_type(r), split ? "Split" : "Slice") &&
         (split ? split_parts(r, name, nd_x, out, p, k) : slice_part(r, name, nd_x, out, p));
    ox_visit(r, was);
    return ok;
}

/* k >= 2 when the readers of `name`, a linear layer's output of out features over the
 * last of nd_x axes, are one Split or only Slices into k equal contiguous parts that
 * cover the features once (p: the parts in order); 0 otherwise. */
static int split_of(struct rd *r, const char *name, int nd_x, int64_t out, struct part *p)
{
    int64_t idx[MAX_PARTS];
    size_t n = readers(r, name, idx, MAX_PARTS), k = n, one;

    if (n < 1 || n > MAX_PARTS || out <= 0)
        return 0;
    if (n == 1 && is_type(r, idx[0], "Split")) {
        if (!node_parts(r, idx[0], true, name, nd_x, out, p, &k))
            return 0;
    } else {
        for (size_t i = 0; i < n; i++)
            if (!node_parts(r, idx[i], false, name, nd_x, out, &p[i], &one))
                return 0;
    }
    for (size_t i = 1; i < k; i++) /* by start (insertion sort of at most 16) */
        for (size_t j = i; j > 0 && p[j].start < p[j - 1].start; j--) {
            struct part t = p[j];

            p[j] = p[j - 1];
            p[j - 1] = t;
        }
    if (k < 2 || out % (int64_t)k || p[0].len != out / (int64_t)k)
        return 0;
    for (size_t i = 0; i < k; i++) /* each len is out / k, so no product overflows */
        if (p[i].len != p[0].len || p[i].start != (int64_t)i * p[0].len)
            return 0;
    return (int)k;
}

/* The parts of the linear layer of x by w (b) whose output is name; 0: not split. */
static int linear_parts(struct rd *r, const char *name, int32_t x, const Onnx__TensorProto *w,
                        bool w_is_out_in, const Onnx__TensorProto *b, struct part *p)
{
    int64_t xs[4], wd[2];
    int nd = (int)ox_shape_of(r, x, xs);

    if (!name || !r->gp || nd < 2 || ox_tensor_dims(w, wd, 2) != 2 || !read_once(r, w) ||
        !read_once(r, b))
        return 0;
    return split_of(r, name, nd, wd[w_is_out_in ? 0 : 1], p);
}

bool ox_linear_splits(struct rd *r, const char *name, int32_t x, const Onnx__TensorProto *w,
                      bool w_is_out_in, const Onnx__TensorProto *b)
{
    struct part p[MAX_PARTS];

    return linear_parts(r, name, x, w, w_is_out_in, b, p) > 0;
}

remat_status ox_linear_split(struct rd *r, bool *done)
{
    struct ent *e = ox_lookup(r, ox_in_name(r, 0)), lin;
    struct part p[MAX_PARTS];
    const char *names[MAX_PARTS];
    int k;
    int32_t y;
    remat_status st;

    *done = false;
    if (e && e->kind == E_PEND && e->pk == P_PARTS) { /* a later Slice: defined already */
        *done = true;
        return ox_lookup(r, ox_out_name(r, 0)) ? REMAT_OK
                   : ox_node_fail(r, REMAT_ERR_PARSE, "a part of a split linear layer that "
                                  "was not defined");
    }
    if (!e || e->kind != E_PEND || e->pk != P_LINEAR)
        return REMAT_OK;
    lin = *e; /* e moves when the table grows */
    if (!(k = linear_parts(r, lin.name, lin.value, lin.t, lin.trans, lin.b, p)))
        return REMAT_OK;
    *done = true;
    for (int j = 0; j < k; j++)
        names[j] = p[j].out;
    if ((st = ox_linear(r, lin.value, lin.t, lin.trans, lin.b, k, names, &y)))
        return st;
    return ox_define(r, lin.name, (struct ent){.kind = E_PEND, .pk = P_PARTS, .value = y});
}
