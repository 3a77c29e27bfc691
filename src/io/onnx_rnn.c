/*
 * onnx_rnn.c - ONNX's LSTM and GRU (as PyTorch exports nn.LSTM and nn.GRU) unrolled at
 * import into remat's gate ops, one set per time step, so that backpropagation through
 * time is planned like any other graph. For X (T, N, I), hidden size H and G gates
 * (LSTM: i o f c; GRU: z r h):
 *
 *   W, R                   embeddings of their G H rows read at 0 .. G H - 1: each
 *                          parameter as one activation that every step's matmul reads
 *   Wb, Rb                 embeddings of one row read by each of the N sequences:
 *                          (N, G H), added at every step
 *   step t                 a crop of X's rows of step t (X viewed (1, 1, T N, I)),
 *                          x_t W^T and h_{t-1} R^T (matmul), the adds, a crop per gate,
 *                          sigmoid and tanh, mul and add (GRU's 1 - z: hard_sigmoid with
 *                          slope -1 and offset 1; its candidate r (h R_h^T + Rb_h) as
 *                          PyTorch has it, linear_before_reset 1, or with 0, ONNX's
 *                          default, (r h) R_h^T + Rb_h, R_h a crop of R's rows)
 *   Y (T, D, N, H)         the steps' h concatenated (D directions); Y_h and Y_c the
 *                          last of each
 *   Squeeze                of an activation (PyTorch's, of Y): a reshape
 *
 * The input product is taken step by step, not as one (T N, I) by (I, G H) product, so
 * that nothing of a step outlives it but h and c: a planner can drop a step's
 * activations and recompute them from its checkpointed state (one product's result and
 * gradient would live through the whole forward and backward; docs/onnx.md has the
 * figures). A step is about 17 ops, whose crops copy (N, I) and (N, H) blocks; the
 * sequence is capped at 1024 steps (the ops' unique names cost a scan each).
 *
 * Parameters: each of a direction's W, R, Wb and Rb is its own parameter, the
 * initializer PyTorch exported (weight_ih_l0, ...: "<initializer>.weight") with its
 * gate blocks in PyTorch's order, found by onnx_rnn_src.c; the crops read each gate
 * from its block, so the gradients are PyTorch's, in its layout.
 *
 * Directions: forward, reverse (steps from the last to the first) and bidirectional
 * (both, over the same X: Y (T, 2, N, H) interleaves the steps' h of both; Y_h and Y_c
 * hold each direction's last). Also read here, as PyTorch emits them around RNNs:
 * Squeeze of an activation (a reshape) and Concat of activations on axis 0 (each
 * viewed (1, rows, rest), concatenated on axis 1: a multi-layer RNN's h_n and c_n).
 *
 * Refused with the node and the attribute or input named: activations other than the
 * defaults, clip, input_forget, layout 1, sequence_lens, peepholes, initial states
 * other than zeros.
 */
#include "io/onnx_rnn.h"

#include <stdio.h>
#include <string.h>

#define MAX_STEPS 1024

/* ------------------------------------------------------------------ building */

static remat_status emit(struct rd *r, const struct rnn *q, int t, const char *what,
                         remat_op op, const int32_t *ins, int n, const remat_attrs *at,
                         int32_t *out)
{
    char nm[300];

    if (t >= 0)
        snprintf(nm, sizeof nm, "%s/t%d/%s", q->base, t, what);
    else
        snprintf(nm, sizeof nm, "%s/%s", q->base, what);
    r->base = nm;
    return ox_emit_as(r, op, ins, n, at, NULL, out);
}

static remat_status view(struct rd *r, const struct rnn *q, const char *what, int32_t x,
                         int nd, const int64_t *shape, int32_t *y)
{
    remat_attrs at = {.ndim = nd};

    memcpy(at.shape, shape, sizeof(int64_t) * (size_t)nd);
    return emit(r, q, -1, what, REMAT_OP_RESHAPE, &x, 1, &at, y);
}

/* rows row .. row + rows, columns col .. col + cols of x (1, 1, R, C): a copy */
static remat_status crop(struct rd *r, const struct rnn *q, int t, const char *what,
                         int32_t x, int64_t row, int64_t rows, int64_t col, int64_t cols,
                         int32_t *y)
{
    remat_attrs at = {.out_h = rows, .out_w = cols, .offset_h = (int32_t)row,
                      .offset_w = (int32_t)col};

    return emit(r, q, t, what, REMAT_OP_CROP, &x, 1, &at, y);
}

/* Role k's parameter (rows, width) as an activation: an embedding of its rows (an op
 * named after it, holding <name>.weight) read at positions (n, rows), 0 .. rows - 1 in
 * each of n rows; viewed as shape. */
static remat_status param_rows(struct rd *r, const struct rnn *q, int k, int64_t n,
                               int64_t rows, int64_t width, int nd, const int64_t *shape,
                               int32_t *y)
{
    static const char *const role[N_ROLES] = {"W", "R", "Wb", "Rb"};
    const struct rnn_src *s = &q->s[k];
    remat_attrs at = {.vocab = rows, .out_channels = width};
    char nm[220];
    int32_t pos, e;
    remat_status st;

    snprintf(nm, sizeof nm, "%s/positions", s->name);
    pos = remat_graph_positions(r->g, nm, 2, (int64_t[]){n, rows});
    if (pos < 0)
        return ox_graph_fail(r);
    snprintf(nm, sizeof nm, "%s.weight", s->name);
    r->base = nm;
    if ((st = ox_emit_as(r, REMAT_OP_EMBEDDING, &pos, 1, &at, NULL, &e)) ||
        (st = ox_keep_weight(r, s->t, "weight", ox_param_numel(r, 0))) ||
        (st = ox_own_param(r, s->t, e, 0)))
        return st;
    return view(r, q, role[k], e, nd, shape, y);
}

/* W, R, and the biases over the batch. */
static remat_status shared_ops(struct rd *r, struct rnn *q)
{
    int64_t gh = q->ng * q->H;
    remat_status st;

    if ((st = param_rows(r, q, R_W, 1, gh, q->I, 2, (int64_t[]){gh, q->I}, &q->ww)) ||
        (st = param_rows(r, q, R_R, 1, gh, q->H, 2, (int64_t[]){gh, q->H}, &q->rw)))
        return st;
    if (!q->bias)
        return REMAT_OK;
    if ((st = param_rows(r, q, R_WB, q->N, 1, gh, 4, (int64_t[]){1, 1, q->N, gh}, &q->bih)))
        return st;
    return param_rows(r, q, R_RB, q->N, 1, gh, 4, (int64_t[]){1, 1, q->N, gh}, &q->bhh);
}

/* GRU with linear_before_reset 0: R's candidate block R_h and its bias Rb_h, apart. */
static remat_status gru_h_block(struct rd *r, struct rnn *q)
{
    int64_t H = q->H, at = q->s[R_W].perm[2] * H;
    int32_t r4, c;
    remat_status st;

    if ((st = view(r, q, "R4", q->rw, 4, (int64_t[]){1, 1, q->ng * H, H}, &r4)) ||
        (st = crop(r, q, -1, "R_h", r4, at, H, 0, H, &c)) ||
        (st = view(r, q, "R_h2", c, 2, (int64_t[]){H, H}, &q->rhw)))
        return st;
    return q->bias ? crop(r, q, -1, "Rb_h", q->bhh, 0, q->N, at, H, &q->rbh) : REMAT_OK;
}

/* ONNX gate k of pre (1, 1, N, G H), through op (sigmoid or tanh; crop alone when
 * op is REMAT_OP_COUNT). */
static remat_status gate(struct rd *r, const struct rnn *q, int t, const char *what,
                         int32_t pre, int k, remat_op op, int32_t *y)
{
    char nm[32];
    int32_t g;
    remat_status st;

    snprintf(nm, sizeof nm, "%s_pre", what);
    if ((st = crop(r, q, t, op == REMAT_OP_COUNT ? what : nm, pre, 0, q->N,
                   q->s[R_W].perm[k] * q->H, q->H, &g)))
        return st;
    if (op == REMAT_OP_COUNT) {
        *y = g;
        return REMAT_OK;
    }
    return emit(r, q, t, what, op, &g, 1, NULL, y);
}

/* Step t's x_t W^T plus Wb (and with with_rb, Rb and h R^T) in *x_part; h R^T (h the
 * previous step's) in *hr, -1 at the direction's first step (h 0). */
static remat_status step_sum(struct rd *r, const struct rnn *q, int t, bool first, int32_t h,
                             bool with_rb, int32_t *x_part, int32_t *hr)
{
    remat_attrs mm = {.trans_b = true};
    int32_t ins[4], xt[2] = {-1, q->ww};
    int k = 0;
    remat_status st;

    *hr = -1;
    if ((st = crop(r, q, t, "x", q->x4, (int64_t)t * q->N, q->N, 0, q->I, &xt[0])) ||
        (st = emit(r, q, t, "xw", REMAT_OP_MATMUL, xt, 2, &mm, &ins[k++])))
        return st;
    if (q->bias)
        ins[k++] = q->bih;
    if (q->bias && with_rb)
        ins[k++] = q->bhh;
    if (!first) {
        int32_t hh[2] = {h, q->rw};

        if ((st = emit(r, q, t, "hr", REMAT_OP_MATMUL, hh, 2, &mm, hr)))
            return st;
    }
    if (with_rb && *hr >= 0)
        ins[k++] = *hr;
    if (k == 1) {
        *x_part = ins[0];
        return REMAT_OK;
    }
    return emit(r, q, t, "sum", REMAT_OP_ADD, ins, k, NULL, x_part);
}

/* c_t = f c_{t-1} + i g, h_t = o tanh(c_t) (ONNX gates i o f c). */
static remat_status lstm_step(struct rd *r, const struct rnn *q, int t, bool first, int32_t *h,
                              int32_t *c)
{
    int32_t pre, hr, g[4], ig, fc, tc, ins[2];
    remat_status st;

    if ((st = step_sum(r, q, t, first, *h, true, &pre, &hr)) ||
        (st = gate(r, q, t, "i", pre, 0, REMAT_OP_SIGMOID, &g[0])) ||
        (st = gate(r, q, t, "o", pre, 1, REMAT_OP_SIGMOID, &g[1])) ||
        (st = gate(r, q, t, "f", pre, 2, REMAT_OP_SIGMOID, &g[2])) ||
        (st = gate(r, q, t, "g", pre, 3, REMAT_OP_TANH, &g[3])) ||
        (st = emit(r, q, t, "ig", REMAT_OP_MUL, (int32_t[]){g[0], g[3]}, 2, NULL, &ig)))
        return st;
    if (!first) {
        if ((st = emit(r, q, t, "fc", REMAT_OP_MUL, (int32_t[]){g[2], *c}, 2, NULL, &fc)))
            return st;
        ins[0] = fc;
        ins[1] = ig;
        if ((st = emit(r, q, t, "c", REMAT_OP_ADD, ins, 2, NULL, &ig)))
            return st;
    }
    *c = ig;
    if ((st = emit(r, q, t, "tanh_c", REMAT_OP_TANH, c, 1, NULL, &tc)))
        return st;
    return emit(r, q, t, "h", REMAT_OP_MUL, (int32_t[]){g[1], tc}, 2, NULL, h);
}

/* The candidate's pre-activation nx (x W_h^T + Wb_h) plus, with linear_before_reset 1,
 * r (h R_h^T + Rb_h) (rec: h R^T + Rb, -1 when 0), or with 0, (r h) R_h^T + Rb_h. */
static remat_status gru_candidate(struct rd *r, const struct rnn *q, int t, bool first,
                                  int32_t h, int32_t rr, int32_t rec, int32_t *nx)
{
    remat_attrs mm = {.trans_b = true};
    int32_t nh = q->lbr ? -1 : q->rbh, m;
    remat_status st;

    if (q->lbr && rec >= 0 &&
        ((st = gate(r, q, t, "n_h", rec, 2, REMAT_OP_COUNT, &nh)) ||
         (st = emit(r, q, t, "rn", REMAT_OP_MUL, (int32_t[]){rr, nh}, 2, NULL, &nh))))
        return st;
    if (!q->lbr && !first) {
        if ((st = emit(r, q, t, "rh", REMAT_OP_MUL, (int32_t[]){rr, h}, 2, NULL, &m)) ||
            (st = emit(r, q, t, "rh_r", REMAT_OP_MATMUL, (int32_t[]){m, q->rhw}, 2, &mm, &m)))
            return st;
        if (nh >= 0 &&
            (st = emit(r, q, t, "rh_rb", REMAT_OP_ADD, (int32_t[]){m, nh}, 2, NULL, &m)))
            return st;
        nh = m;
    }
    if (nh < 0)
        return REMAT_OK;
    return emit(r, q, t, "n_pre", REMAT_OP_ADD, (int32_t[]){*nx, nh}, 2, NULL, nx);
}

/* PyTorch's GRU (linear_before_reset 1), ONNX gates z r h:
 * z, r = sigmoid(x W^T + Wb + h R^T + Rb), n = tanh(x W_h^T + Wb_h + r (h R_h^T + Rb_h)),
 * h_t = (1 - z) n + z h_{t-1}. */
static remat_status gru_step(struct rd *r, const struct rnn *q, int t, bool first, int32_t *h)
{
    remat_attrs one_minus = {.alpha = -1, .beta = 1};
    int32_t xp, hr, rec = -1, zr, z, rr, nx, n, omz, y;
    remat_status st;

    if ((st = step_sum(r, q, t, first, *h, false, &xp, &hr)))
        return st;
    if (hr >= 0 && q->bias)
        st = emit(r, q, t, "hr_b", REMAT_OP_ADD, (int32_t[]){hr, q->bhh}, 2, NULL, &rec);
    else
        rec = hr >= 0 ? hr : q->bias ? q->bhh : -1;
    if (st)
        return st;
    zr = xp;
    if (rec >= 0 && (st = emit(r, q, t, "zr", REMAT_OP_ADD, (int32_t[]){xp, rec}, 2, NULL, &zr)))
        return st;
    if ((st = gate(r, q, t, "z", zr, 0, REMAT_OP_SIGMOID, &z)) ||
        (st = gate(r, q, t, "r", zr, 1, REMAT_OP_SIGMOID, &rr)) ||
        (st = gate(r, q, t, "n_x", xp, 2, REMAT_OP_COUNT, &nx)))
        return st;
    if ((st = gru_candidate(r, q, t, first, *h, rr, rec, &nx)) ||
        (st = emit(r, q, t, "n", REMAT_OP_TANH, &nx, 1, NULL, &n)) ||
        (st = emit(r, q, t, "1-z", REMAT_OP_HARD_SIGMOID, &z, 1, &one_minus, &omz)) ||
        (st = emit(r, q, t, first ? "h" : "zn", REMAT_OP_MUL, (int32_t[]){omz, n}, 2, NULL,
                   &y)))
        return st;
    if (first) {
        *h = y;
        return REMAT_OK;
    }
    if ((st = emit(r, q, t, "zh", REMAT_OP_MUL, (int32_t[]){z, *h}, 2, NULL, &z)))
        return st;
    return emit(r, q, t, "h", REMAT_OP_ADD, (int32_t[]){y, z}, 2, NULL, h);
}

/* vals (n of shape (1, 1, N, H)) concatenated on axis 1 and viewed as shape (nd
 * dimensions), as the node's output k when it is there. */
static remat_status stack(struct rd *r, const struct rnn *q, size_t k, const char *what,
                          const int32_t *vals, int n, int nd, const int64_t *shape)
{
    char nm[40];
    int32_t y = vals[0], v;
    remat_status st;

    if (!ox_out_name(r, k))
        return REMAT_OK;
    snprintf(nm, sizeof nm, "%s_steps", what);
    if ((n > 1 && (st = emit(r, q, -1, nm, REMAT_OP_CONCAT, vals, n, NULL, &y))) ||
        (st = view(r, q, what, y, nd, shape, &v)))
        return st;
    return ox_define(r, ox_out_name(r, k), (struct ent){.kind = E_ACT, .value = v});
}

/* Y (T, n_dir, N, H): each step's h of each direction; Y_h, Y_c (n_dir, N, H): each
 * direction's last h and c. hs holds T values per direction. */
static remat_status outputs(struct rd *r, const struct rnn *q, const int32_t *hs,
                            const int32_t *h_last, const int32_t *c_last)
{
    int nd = q->n_dir, T = (int)q->T;
    int32_t *y = core_alloc(r->a, sizeof *y * (size_t)(nd * T));
    int64_t ys[4] = {T, nd, q->N, q->H}, ls[3] = {nd, q->N, q->H};
    remat_status st;

    if (!y)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    for (int t = 0; t < T; t++)
        for (int d = 0; d < nd; d++)
            y[t * nd + d] = hs[d * T + t];
    if (!(st = stack(r, q, 0, "Y", y, nd * T, 4, ys)) &&
        !(st = stack(r, q, 1, "Y_h", h_last, nd, 3, ls)) && !q->gru)
        st = stack(r, q, 2, "Y_c", c_last, nd, 3, ls);
    core_free(r->a, y, sizeof *y * (size_t)(nd * T));
    return st;
}

/* Direction q: its parameters' ops, then its steps (hs: the T values of h by time). */
static remat_status unroll(struct rd *r, struct rnn *q, int32_t *hs, int32_t *h_last,
                           int32_t *c_last)
{
    int32_t h = -1, c = -1;
    remat_status st = shared_ops(r, q);

    if (!st && q->gru && !q->lbr)
        st = gru_h_block(r, q);
    for (int k = 0; k < q->T && !st; k++) {
        int t = q->back ? (int)q->T - 1 - k : k;

        st = q->gru ? gru_step(r, q, t, k == 0, &h) : lstm_step(r, q, t, k == 0, &h, &c);
        hs[t] = h;
    }
    *h_last = h;
    *c_last = c;
    return st;
}

/* ------------------------------------------------------------------ the node */

static remat_status check_attrs(struct rd *r, struct rnn *q)
{
    bool fwd = ox_attr_str_is(r, "direction", "forward", "forward");
    bool rev = ox_attr_str_is(r, "direction", "reverse", "forward");
    bool bi = ox_attr_str_is(r, "direction", "bidirectional", "forward");
    const char *bad = !fwd && !rev && !bi                           ? "direction"
                      : !ox_rnn_default_acts(r, q->gru, bi ? 2 : 1) ? "activations"
                      : ox_attr(r, "activation_alpha")              ? "activation_alpha"
                      : ox_attr(r, "activation_beta")               ? "activation_beta"
                      : ox_attr(r, "clip")                          ? "clip"
                      : ox_attr_i(r, "input_forget", 0)             ? "input_forget"
                      : ox_attr_i(r, "layout", 0)                   ? "layout"
                                                                    : NULL;

    if (bad)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "attribute %s: remat unrolls %s with "
                            "the default activations, no clip, input_forget 0 and layout 0 "
                            "(PyTorch's)", bad, q->gru ? "GRUs" : "LSTMs");
    q->n_dir = bi ? 2 : 1;
    q->back = rev;
    q->lbr = ox_attr_i(r, "linear_before_reset", 0) != 0;
    q->H = ox_attr_i(r, "hidden_size", 0);
    if (q->H <= 0 || q->H > (1 << 20))
        return ox_node_fail(r, REMAT_ERR_PARSE, "attribute hidden_size %lld", (long long)q->H);
    return REMAT_OK;
}

/* initial_h or initial_c: absent, or a constant of zeros (PyTorch's default state). */
static remat_status zero_state(struct rd *r, size_t i)
{
    struct ent *e;
    double *v = NULL;
    int64_t n = 0;
    bool zero = true;
    remat_status st;

    if (!ox_in_name(r, i))
        return REMAT_OK;
    if ((st = ox_in_ent(r, i, &e)))
        return st;
    if (e->kind == E_TENSOR && (st = ox_tensor_doubles(r, e->t, &v, &n)))
        return st;
    for (int64_t k = 0; k < n && zero; k++)
        zero = v[k] == 0;
    if (v)
        core_free(r->a, v, sizeof(double) * (size_t)(n ? n : 1));
    if (e->kind != E_TENSOR || !zero)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu (%s): remat unrolls from a "
                            "zero state (call the module without an initial state)", i,
                            i == 5 ? "initial_h" : "initial_c");
    return REMAT_OK;
}

/* The node's X, checked, as (1, 1, T N, I) in q (T, N, I set). */
static remat_status read_x(struct rd *r, struct rnn *q)
{
    int64_t xs[4];
    int32_t x;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)))
        return st;
    if (ox_shape_of(r, x, xs) != 3)
        return ox_node_fail(r, REMAT_ERR_SHAPE, "input X must be 3-d (sequence, batch, "
                            "features)");
    q->T = xs[0];
    q->N = xs[1];
    q->I = xs[2];
    if (q->T > MAX_STEPS || q->T * q->N > INT32_MAX)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "%lld steps of batch %lld: remat unrolls "
                            "at most %d steps", (long long)q->T, (long long)q->N, MAX_STEPS);
    if (ox_in_name(r, 4) || ox_in_name(r, 7))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "input %s: remat unrolls whole sequences "
                            "without peepholes", ox_in_name(r, 4) ? "sequence_lens" : "P");
    if (ox_node_name(r)[0])
        snprintf(q->node, sizeof q->node, "%s", ox_node_name(r));
    else
        snprintf(q->node, sizeof q->node, "%s_%zu", ox_node_type(r), r->node_i);
    snprintf(q->base, sizeof q->base, "%s", q->node);
    return view(r, q, "X", x, 4, (int64_t[]){1, 1, q->T * q->N, q->I}, &q->x4);
}

remat_status ox_rnn_read(struct rd *r, int gru)
{
    struct rnn q = {.gru = gru != 0, .ng = gru ? 3 : 4, .bih = -1, .bhh = -1, .rbh = -1};
    int32_t *hs, last[4];
    remat_status st;

    if ((st = check_attrs(r, &q)) || (st = read_x(r, &q)) || (st = zero_state(r, 5)) ||
        (!q.gru && (st = zero_state(r, 6))))
        return st;
    if (!(hs = core_alloc(r->a, sizeof *hs * (size_t)(2 * q.T))))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    for (int d = 0; d < q.n_dir && !st; d++) {
        struct rnn qd = q;

        qd.di = d;
        qd.back = q.back || d == 1;
        if (d == 1)
            snprintf(qd.base, sizeof qd.base, "%s_reverse", q.node);
        if (!(st = ox_rnn_sources(r, &qd)))
            st = unroll(r, &qd, hs + d * q.T, &last[d], &last[2 + d]);
    }
    if (!st)
        st = outputs(r, &q, hs, last, last + 2);
    core_free(r->a, hs, sizeof *hs * (size_t)(2 * q.T));
    return st;
}

/* ------------------------------------------------------------------ Squeeze */

/* Squeeze of an activation: a reshape without the given axes of size 1 (all of them
 * when none are given), as PyTorch emits on an RNN's Y (T, 1, N, H). */
static remat_status squeeze(struct rd *r, int32_t x)
{
    const Onnx__TensorProto *t = NULL;
    remat_attrs at = {0};
    int64_t xs[4], ax[4];
    bool drop[4] = {false, false, false, false};
    int nd = (int)ox_shape_of(r, x, xs), n = 0;
    size_t na = 0;
    remat_status st;

    if (r->opset >= 13) {
        if ((st = ox_in_tensor(r, 1, true, &t)) || (t && (st = ox_tensor_ints(r, t, ax, 4, &n))))
            return st;
        na = (size_t)n;
    } else if ((st = ox_attr_ints_upto(r, "axes", ax, 4, &na))) {
        return st;
    }
    for (int i = 0; i < nd; i++)
        drop[i] = !na && xs[i] == 1;
    for (size_t k = 0; k < na; k++) {
        int64_t a = ax[k] < 0 ? ax[k] + nd : ax[k];

        if (a < 0 || a >= nd || xs[a] != 1)
            return ox_node_fail(r, REMAT_ERR_SHAPE, "axis %lld is not of size 1",
                                (long long)ax[k]);
        drop[a] = true;
    }
    for (int i = 0; i < nd; i++)
        if (!drop[i])
            at.shape[at.ndim++] = xs[i];
    if (at.ndim == 0)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a squeeze to a scalar");
    r->base = ox_node_name(r);
    return ox_emit(r, REMAT_OP_RESHAPE, &x, 1, &at, NULL);
}

/* Concat on axis 0 of activations of equal trailing dimensions: each viewed (1, rows,
 * rest), concatenated on axis 1, viewed back (a multi-layer RNN's h_n and c_n). */
static remat_status concat0(struct rd *r)
{
    int32_t ins[64];
    int64_t s0[4], si[4], rows = 0, rest = 1;
    size_t n = ox_n_in(r);
    int nd = 0;
    remat_attrs at = {.ndim = 3};
    int32_t y;
    remat_status st;

    if (n < 1 || n > 64)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "%zu inputs (1 to 64)", n);
    for (size_t i = 0; i < n; i++) {
        if ((st = ox_in_act(r, i, &ins[i])))
            return st;
        nd = (int)ox_shape_of(r, ins[i], i ? si : s0);
        if (i && (nd != (int)ox_shape_of(r, ins[0], s0) ||
                  memcmp(si + 1, s0 + 1, sizeof(int64_t) * (size_t)(nd - 1))))
            return ox_node_fail(r, REMAT_ERR_SHAPE, "input %zu's shape differs from input "
                                "0's past axis 0", i);
        rows += i ? si[0] : s0[0];
    }
    for (int k = 1; k < nd; k++)
        rest *= s0[k];
    for (size_t i = 0; i < n; i++) {
        ox_shape_of(r, ins[i], si);
        at.shape[0] = 1;
        at.shape[1] = si[0];
        at.shape[2] = rest;
        r->base = ox_node_name(r);
        if ((st = ox_emit_as(r, REMAT_OP_RESHAPE, &ins[i], 1, &at, NULL, &ins[i])))
            return st;
    }
    r->base = ox_node_name(r);
    if ((st = ox_emit_as(r, REMAT_OP_CONCAT, ins, (int)n, NULL, NULL, &y)))
        return st;
    at.ndim = nd;
    memcpy(at.shape, s0, sizeof s0);
    at.shape[0] = rows;
    r->base = ox_node_name(r);
    return ox_emit(r, REMAT_OP_RESHAPE, &y, 1, &at, NULL);
}

/* Whether the node is a Concat on axis 0 of activations only. */
static bool is_concat0(const struct rd *r)
{
    int64_t s[4];
    const struct ent *e;
    int nd;

    if (strcmp(ox_node_type(r), "Concat") || !ox_in_name(r, 0) ||
        !(e = ox_lookup(r, ox_in_name(r, 0))) || e->kind != E_ACT)
        return false;
    nd = (int)ox_shape_of(r, e->value, s);
    if (ox_attr_i(r, "axis", 1) != 0 && ox_attr_i(r, "axis", 1) != -nd)
        return false;
    for (size_t i = 1; i < ox_n_in(r); i++)
        if (!ox_in_name(r, i) || !(e = ox_lookup(r, ox_in_name(r, i))) || e->kind != E_ACT)
            return false;
    return true;
}

remat_status ox_rnn_node(struct rd *r, bool *done)
{
    const char *ty = ox_node_type(r);
    const struct ent *e = ox_in_name(r, 0) ? ox_lookup(r, ox_in_name(r, 0)) : NULL;
    bool any = false, sq;

    for (size_t i = 0; i < ox_n_out(r); i++)
        any |= ox_out_name(r, i) != NULL;
    sq = !strcmp(ty, "Squeeze") && e && e->kind == E_ACT;
    *done = any && (!strcmp(ty, "LSTM") || !strcmp(ty, "GRU") ||
                    (ox_out_name(r, 0) && (sq || is_concat0(r))));
    if (!*done)
        return REMAT_OK;
    if (ty[0] == 'L' || ty[0] == 'G')
        return ox_rnn_read(r, ty[0] == 'G');
    return sq ? squeeze(r, e->value) : concat0(r);
}
