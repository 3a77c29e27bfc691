/*
 * onnx_rnn_src.c - where an LSTM's or GRU's W, R and B come from (onnx_rnn.h).
 *
 * PyTorch exports them as Unsqueeze (axis 0; for two directions, a Concat of two) of a
 * Concat of Slices of its own weight_ih_l0, weight_hh_l0, bias_ih_l0 and bias_hh_l0
 * (their gate blocks i f g o, or r z n, reordered into ONNX's i o f c, or z r h), all
 * folded to constants before the RNN node is read. This file walks back from the
 * node's inputs through those nodes (so it sees protobuf-c's structs) to the rows of
 * the initializers: each of a direction's four roles that comes whole from one
 * initializer of G H rows takes that initializer as its parameter, with the block
 * that holds each ONNX gate. A role that does not trace so (an exporter's folded
 * constant, or W, R and B written as they are) takes the node's input itself, in
 * ONNX's order: "<initializer or node>.W" (.R, and B's halves .Wb and .Rb; "_reverse"
 * appended for the second direction), sliced out when there are two directions.
 */
#include "io/onnx_rnn.h"
#include "onnx.pb-c.h"

#include <stdio.h>
#include <string.h>

#define MAX_SEGS 32

/* rows lo .. lo + n (axis 0) of initializer t */
struct seg {
    const Onnx__TensorProto *t;
    int64_t lo, n;
};

/* ------------------------------------------------------------------ tracing */

static const Onnx__NodeProto *producer(const struct rd *r, const char *name)
{
    for (size_t i = r->node_i; i-- > 0;) {
        const Onnx__NodeProto *nd = r->gp->node[i];

        for (size_t k = 0; k < nd->n_output; k++)
            if (nd->output[k] && !strcmp(nd->output[k], name))
                return nd;
    }
    return NULL;
}

/* Input i of nd as one constant integer, dflt when absent. */
static bool const_int(const struct rd *r, const Onnx__NodeProto *nd, size_t i, int64_t dflt,
                      int64_t *v)
{
    const struct ent *e;
    int n = 0;

    *v = dflt;
    if (i >= nd->n_input || !nd->input[i] || !*nd->input[i])
        return true;
    e = ox_lookup(r, nd->input[i]);
    return e && e->kind == E_TENSOR && !e->trans && !ox_tensor_ints(r, e->t, v, 1, &n) &&
           n == 1;
}

static int64_t node_attr_i(const Onnx__NodeProto *nd, const char *name, int64_t dflt)
{
    for (size_t i = 0; i < nd->n_attribute; i++)
        if (nd->attribute[i]->name && !strcmp(nd->attribute[i]->name, name))
            return nd->attribute[i]->i;
    return dflt;
}

static bool trace(const struct rd *r, const char *name, int depth, struct seg *sg, int *n);

/* Slice(data, starts, ends, axes 0, steps 1) of traced rows. */
static bool trace_slice(const struct rd *r, const Onnx__NodeProto *p, int depth, struct seg *sg,
                        int *n)
{
    struct seg in[MAX_SEGS];
    int64_t s, e, ax, step, rows = 0, at = 0;
    int m = 0;

    if (p->n_input < 3 || !const_int(r, p, 1, 0, &s) || !const_int(r, p, 2, 0, &e) ||
        !const_int(r, p, 3, 0, &ax) || !const_int(r, p, 4, 1, &step) || ax != 0 || step != 1 ||
        !trace(r, p->input[0], depth + 1, in, &m))
        return false;
    for (int i = 0; i < m; i++)
        rows += in[i].n;
    s = s < 0 ? s + rows : s;
    e = e < 0 ? e + rows : e;
    s = s < 0 ? 0 : s > rows ? rows : s;
    e = e < s ? s : e > rows ? rows : e;
    for (int i = 0; i < m; at += in[i++].n) {
        int64_t lo = s > at ? s : at, hi = e < at + in[i].n ? e : at + in[i].n;

        if (lo >= hi)
            continue;
        if (*n >= MAX_SEGS)
            return false;
        sg[(*n)++] = (struct seg){in[i].t, in[i].lo + lo - at, hi - lo};
    }
    return true;
}

/* Appends the rows (axis 0) of constant name to sg as rows of initializers; false when
 * they do not come from initializers through Slice and Concat on axis 0 (and Identity). */
static bool trace(const struct rd *r, const char *name, int depth, struct seg *sg, int *n)
{
    const struct ent *e = ox_lookup(r, name);
    const Onnx__NodeProto *p;
    int64_t d[8];

    if (!e || e->kind != E_TENSOR || e->trans || depth > 8 || *n >= MAX_SEGS)
        return false;
    if (!strcmp(ox_tensor_name(e->t), name)) { /* an initializer */
        if (ox_tensor_dims(e->t, d, 8) < 1 || ox_dtype_class(ox_tensor_type(e->t)) != OX_F)
            return false;
        sg[(*n)++] = (struct seg){e->t, 0, d[0]};
        return true;
    }
    if (!(p = producer(r, name)) || !p->op_type || p->n_input < 1)
        return false;
    if (!strcmp(p->op_type, "Identity"))
        return trace(r, p->input[0], depth + 1, sg, n);
    if (!strcmp(p->op_type, "Slice"))
        return trace_slice(r, p, depth, sg, n);
    if (strcmp(p->op_type, "Concat") || node_attr_i(p, "axis", -1) != 0)
        return false;
    for (size_t i = 0; i < p->n_input; i++)
        if (!trace(r, p->input[i], depth + 1, sg, n))
            return false;
    return true;
}

/* The rows of direction q->di of an RNN input (n_dir, rows, ...): PyTorch's Unsqueeze
 * (axis 0) of them, for two directions one of the two inputs of a Concat (axis 0). */
static bool trace_input(const struct rd *r, const struct rnn *q, size_t i, struct seg *sg,
                        int *n)
{
    const Onnx__NodeProto *p = producer(r, ox_in_name(r, i));
    int64_t ax = -1;

    *n = 0;
    if (q->n_dir == 2) {
        if (!p || !p->op_type || strcmp(p->op_type, "Concat") || p->n_input != 2 ||
            node_attr_i(p, "axis", -1) != 0)
            return false;
        p = producer(r, p->input[q->di]);
    }
    if (!p || !p->op_type || strcmp(p->op_type, "Unsqueeze") || p->n_input < 1)
        return false;
    if (p->n_input >= 2) {
        if (!const_int(r, p, 1, -1, &ax))
            return false;
    } else {
        for (size_t k = 0; k < p->n_attribute; k++)
            if (p->attribute[k]->name && !strcmp(p->attribute[k]->name, "axes") &&
                p->attribute[k]->n_ints == 1)
                ax = p->attribute[k]->ints[0];
    }
    return ax == 0 && trace(r, p->input[0], 0, sg, n);
}

/* A role whose G gates are rows lo .. lo + G H of the traced segments: one initializer
 * of G H rows (nd dimensions) holding each gate in one of its blocks. */
static bool role_from(const struct seg *sg, int n, int64_t lo, const struct rnn *q, int nd,
                      struct rnn_src *s)
{
    int64_t d[4], H = q->H;
    bool seen[4] = {false, false, false, false};

    for (int k = 0; k < q->ng; k++) {
        int64_t row = lo + k * H, at = 0, srow;
        int j = 0;

        while (j < n && at + sg[j].n <= row)
            at += sg[j++].n;
        if (j == n || row + H > at + sg[j].n || (k && sg[j].t != s->t))
            return false;
        s->t = sg[j].t;
        srow = sg[j].lo + row - at;
        if (srow % H || srow / H >= q->ng || seen[srow / H])
            return false;
        seen[srow / H] = true;
        s->perm[k] = (int)(srow / H);
    }
    return ox_tensor_dims(s->t, d, 4) == nd && d[0] == q->ng * H;
}

/* ------------------------------------------------------------------ parameters */

/* An untraced role: "<initializer>.<role>" (the node's input), or "<node>.<role>". */
static void untraced_name(const struct rd *r, const struct rnn *q, size_t in, const char *role,
                          struct rnn_src *s)
{
    const struct ent *e = ox_lookup(r, ox_in_name(r, in));
    bool init = e && e->kind == E_TENSOR && !strcmp(ox_tensor_name(e->t), ox_in_name(r, in));

    snprintf(s->name, sizeof s->name, "%.180s.%s%s", init ? ox_in_name(r, in) : q->node, role,
             q->di ? "_reverse" : "");
    for (int k = 0; k < 4; k++)
        s->perm[k] = k;
}

/* rows (times cols) values of tensor t from value lo on, as a new tensor (rows, cols),
 * or (rows) when cols is 0. */
static remat_status part(struct rd *r, const Onnx__TensorProto *t, int64_t lo, int64_t rows,
                         int64_t cols, const Onnx__TensorProto **out)
{
    int64_t dims[2] = {rows, cols}, n = 0;
    double *v = NULL;
    remat_status st = ox_tensor_doubles(r, t, &v, &n);

    if (!st)
        st = ox_make_tensor(r, OX_F, cols ? 2 : 1, dims, v + lo, out);
    if (v)
        core_free(r->a, v, sizeof(double) * (size_t)(n ? n : 1));
    return st;
}

/* W (input 1) or R (input 2), (n_dir, G H, cols). */
static remat_status weight_src(struct rd *r, struct rnn *q, size_t in, int64_t cols,
                               struct rnn_src *s)
{
    const Onnx__TensorProto *t;
    struct seg sg[MAX_SEGS];
    int64_t d[4], gh = q->ng * q->H;
    int n = 0;
    remat_status st;

    if ((st = ox_in_tensor(r, in, false, &t)))
        return st;
    if (ox_tensor_dims(t, d, 4) != 3 || d[0] != q->n_dir || d[1] != gh || d[2] != cols)
        return ox_node_fail(r, REMAT_ERR_SHAPE, "input %s must be (%d, %lld, %lld)",
                            in == 1 ? "W" : "R", q->n_dir, (long long)gh, (long long)cols);
    if (trace_input(r, q, in, sg, &n) && role_from(sg, n, 0, q, 2, s)) {
        snprintf(s->name, sizeof s->name, "%s", ox_tensor_name(s->t));
        return REMAT_OK;
    }
    untraced_name(r, q, in, in == 1 ? "W" : "R", s);
    s->t = t;
    return q->n_dir == 1 ? REMAT_OK : part(r, t, q->di * gh * cols, gh, cols, &s->t);
}

/* B (input 3): Wb and Rb, each an initializer, or else B's halves as they are. */
static remat_status bias_src(struct rd *r, struct rnn *q)
{
    const Onnx__TensorProto *b;
    struct seg sg[MAX_SEGS];
    int64_t gh = q->ng * q->H, d[4];
    int m = 0;
    remat_status st;

    if ((st = ox_in_tensor(r, 3, true, &b)) || !b)
        return st;
    q->bias = true;
    if (ox_tensor_dims(b, d, 4) != 2 || d[0] != q->n_dir || d[1] != 2 * gh)
        return ox_node_fail(r, REMAT_ERR_SHAPE, "input B must be (%d, %lld)", q->n_dir,
                            (long long)(2 * gh));
    if (trace_input(r, q, 3, sg, &m) && role_from(sg, m, 0, q, 1, &q->s[R_WB]) &&
        role_from(sg, m, gh, q, 1, &q->s[R_RB])) {
        snprintf(q->s[R_WB].name, sizeof q->s[R_WB].name, "%s", ox_tensor_name(q->s[R_WB].t));
        snprintf(q->s[R_RB].name, sizeof q->s[R_RB].name, "%s", ox_tensor_name(q->s[R_RB].t));
        return REMAT_OK;
    }
    untraced_name(r, q, 3, "Wb", &q->s[R_WB]);
    untraced_name(r, q, 3, "Rb", &q->s[R_RB]);
    if ((st = part(r, b, q->di * 2 * gh, gh, 0, &q->s[R_WB].t)))
        return st;
    return part(r, b, q->di * 2 * gh + gh, gh, 0, &q->s[R_RB].t);
}

remat_status ox_rnn_sources(struct rd *r, struct rnn *q)
{
    remat_status st;

    if ((st = weight_src(r, q, 1, q->I, &q->s[R_W])) ||
        (st = weight_src(r, q, 2, q->H, &q->s[R_R])) || (st = bias_src(r, q)))
        return st;
    for (int k = 0; k < N_ROLES; k++) {
        if (k >= R_WB && !q->bias)
            continue;
        if (memcmp(q->s[k].perm, q->s[R_W].perm, sizeof(int) * (size_t)q->ng))
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "W, R and B hold their gates in "
                                "different orders ('%s' and '%s')", q->s[R_W].name,
                                q->s[k].name);
        if (ox_find_param(r, q->s[k].t))
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "'%s' is already the parameter of "
                                "another op", q->s[k].name);
    }
    return REMAT_OK;
}

bool ox_rnn_default_acts(const struct rd *r, bool gru, int n_dir)
{
    static const char *const want[3] = {"Sigmoid", "Tanh", "Tanh"};
    const Onnx__AttributeProto *a = ox_attr(r, "activations");
    size_t per = gru ? 2 : 3;

    if (!a)
        return true;
    if (a->n_strings != per * (size_t)n_dir)
        return false;
    for (size_t i = 0; i < a->n_strings; i++)
        if (a->strings[i].len != strlen(want[i % per]) ||
            memcmp(a->strings[i].data, want[i % per], a->strings[i].len))
            return false;
    return true;
}
