/*
 * onnx_fold.c - constant folding at import: a node whose inputs are all constants
 * (initializers, Constant nodes, earlier folded results) is computed here and its output
 * becomes a constant, as are Shape's outputs (shapes are fixed). Exporters compute
 * reshape targets (Shape, Gather, Unsqueeze, Concat), attention masks (Slice of a
 * buffer, Equal, Cast) and position ids (Range, or a Constant) this way; folding leaves
 * the activations' ops only.
 *
 * Values are held as doubles (exact for the integers of shapes and ids), of up to 8
 * dimensions and 2^28 elements, with numpy broadcasting for the elementwise ops. A
 * Transpose of a 2-d constant only flips a flag (the weight of a linear layer stays
 * its initializer, and its gradient goes there).
 */
#include "io/onnx_read.h"

#include <math.h>
#include <string.h>

#define NDMAX 8

struct cv {
    int dt;             /* OX_F, OX_I, OX_B */
    int nd;
    int64_t d[NDMAX];
    int64_t n;
    double *v;
};

static void cv_free(struct rd *r, struct cv *c)
{
    core_free(r->a, c->v, sizeof(double) * (size_t)(c->n ? c->n : 1));
    c->v = NULL;
}

static remat_status cv_alloc(struct rd *r, struct cv *c)
{
    c->n = 1;
    for (int i = 0; i < c->nd; i++)
        if (c->d[i] < 0 || !core_mul_i64(c->n, c->d[i], &c->n) || c->n > ((int64_t)1 << 28))
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a folded constant of more than "
                                "2^28 values");
    c->v = core_calloc(r->a, (size_t)(c->n ? c->n : 1), sizeof(double));
    return c->v ? REMAT_OK : REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
}

/* Input i's constant (transposed when its entry says so). */
static remat_status cv_get(struct rd *r, size_t i, struct cv *c)
{
    const Onnx__TensorProto *t;
    remat_status st;

    memset(c, 0, sizeof *c);
    if ((st = ox_in_tensor(r, i, false, &t)))
        return st;
    c->nd = ox_tensor_dims(t, c->d, NDMAX);
    if (c->nd < 0)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a constant of more than %d dimensions",
                            NDMAX);
    c->dt = ox_dtype_class(ox_tensor_type(t));
    return ox_tensor_doubles(r, t, &c->v, &c->n);
}

/* Defines output i as c (then freed). */
static remat_status cv_put(struct rd *r, size_t i, struct cv *c)
{
    const Onnx__TensorProto *t = NULL;
    remat_status st = ox_make_tensor(r, c->dt, c->nd, c->d, c->v, &t);

    cv_free(r, c);
    return st ? st : ox_define(r, ox_out_name(r, i), (struct ent){.kind = E_TENSOR, .t = t});
}

static int64_t axis_of(int64_t a, int nd)
{
    return a < 0 ? a + nd : a;
}

/* An integer list from input i (absent: *n = 0). */
static remat_status ints_in(struct rd *r, size_t i, int64_t *v, int max, int *n)
{
    const Onnx__TensorProto *t;
    remat_status st;

    *n = 0;
    if (!ox_in_name(r, i))
        return REMAT_OK;
    if ((st = ox_in_tensor(r, i, false, &t)))
        return st;
    return ox_tensor_ints(r, t, v, max, n);
}

/* ------------------------------------------------------------------ elementwise */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_EQ, B_LT, B_GT, B_AND, B_OR, B_WHERE };

static double bin(int op, double a, double b, int dt)
{
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return dt == OX_F ? a / b : b != 0 ? trunc(a / b) : 0;
    case B_POW: return pow(a, b);
    case B_EQ: return a == b;
    case B_LT: return a < b;
    case B_GT: return a > b;
    case B_AND: return a != 0 && b != 0;
    default: return a != 0 || b != 0;
    }
}

/* The offset in c of output index oi (numpy broadcasting, c right-aligned). */
static int64_t bidx(const struct cv *c, const int64_t *oi, int ond)
{
    int64_t off = 0;

    for (int k = 0; k < c->nd; k++) {
        int64_t dk = c->d[k], ik = oi[ond - c->nd + k];

        off = off * dk + (dk == 1 ? 0 : ik);
    }
    return off;
}

static remat_status broadcast_shape(struct rd *r, const struct cv *in, int n, struct cv *o)
{
    o->nd = 0;
    for (int i = 0; i < n; i++)
        o->nd = in[i].nd > o->nd ? in[i].nd : o->nd;
    for (int k = 0; k < o->nd; k++) {
        o->d[k] = 1;
        for (int i = 0; i < n; i++) {
            int j = k - (o->nd - in[i].nd);
            int64_t dj = j >= 0 ? in[i].d[j] : 1;

            if (dj != 1 && o->d[k] != 1 && dj != o->d[k])
                return ox_node_fail(r, REMAT_ERR_SHAPE, "constants that do not broadcast");
            if (dj != 1)
                o->d[k] = dj;
        }
    }
    return cv_alloc(r, o);
}

static remat_status fold_elementwise(struct rd *r, int op)
{
    struct cv in[3] = {{0}}, o = {0};
    int n = op == B_WHERE ? 3 : 2;
    int64_t oi[NDMAX];
    remat_status st = REMAT_OK;

    for (int i = 0; i < n && !st; i++)
        st = cv_get(r, (size_t)i, &in[i]);
    if (!st)
        st = broadcast_shape(r, in, n, &o);
    if (st)
        goto out;
    o.dt = op >= B_EQ && op <= B_OR ? OX_B : op == B_WHERE ? in[1].dt : in[0].dt;
    for (int64_t e = 0; e < o.n; e++) {
        int64_t rem = e;

        for (int k = o.nd - 1; k >= 0; k--) {
            oi[k] = rem % o.d[k];
            rem /= o.d[k];
        }
        if (op == B_WHERE)
            o.v[e] = in[0].v[bidx(&in[0], oi, o.nd)] != 0 ? in[1].v[bidx(&in[1], oi, o.nd)]
                                                         : in[2].v[bidx(&in[2], oi, o.nd)];
        else
            o.v[e] = bin(op, in[0].v[bidx(&in[0], oi, o.nd)], in[1].v[bidx(&in[1], oi, o.nd)],
                         o.dt);
    }
    st = cv_put(r, 0, &o);
out:
    for (int i = 0; i < n; i++)
        cv_free(r, &in[i]);
    cv_free(r, &o);
    return st;
}

/* Unary ops and Cast: the same shape. */
static remat_status fold_unary(struct rd *r, const char *ty)
{
    struct cv c;
    remat_status st = cv_get(r, 0, &c);
    int to = !strcmp(ty, "Cast") ? ox_dtype_class((int)ox_attr_i(r, "to", 1)) : c.dt;

    if (st) {
        cv_free(r, &c);
        return st;
    }
    for (int64_t i = 0; i < c.n; i++) {
        double x = c.v[i];

        x = !strcmp(ty, "Sqrt") ? sqrt(x) : !strcmp(ty, "Neg") ? -x
            : !strcmp(ty, "Not") ? x == 0 : x;
        c.v[i] = to == OX_F ? (double)(float)x : to == OX_I ? trunc(x) : x != 0;
    }
    c.dt = !strcmp(ty, "Not") ? OX_B : to;
    return cv_put(r, 0, &c);
}

/* ------------------------------------------------------------------ shapes */

/* Copies x's data into o, of the same count (Reshape, Unsqueeze, Squeeze). */
static remat_status reshaped(struct rd *r, struct cv *x, struct cv *o)
{
    remat_status st = cv_alloc(r, o);

    if (!st && o->n != x->n)
        st = ox_node_fail(r, REMAT_ERR_SHAPE, "a reshape of %lld values into %lld",
                          (long long)x->n, (long long)o->n);
    if (!st)
        memcpy(o->v, x->v, sizeof(double) * (size_t)x->n);
    o->dt = x->dt;
    cv_free(r, x);
    if (st) {
        cv_free(r, o);
        return st;
    }
    return cv_put(r, 0, o);
}

static remat_status fold_reshape(struct rd *r, const char *ty)
{
    struct cv x, o = {0};
    int64_t s[NDMAX], ax[NDMAX];
    int ns = 0;
    size_t na = 0;
    remat_status st = cv_get(r, 0, &x);

    if (!st && !strcmp(ty, "Reshape"))
        st = ints_in(r, 1, s, NDMAX, &ns);
    else if (!st && r->opset >= 13)
        st = ints_in(r, 1, ax, NDMAX, &ns), na = (size_t)ns;
    else if (!st)
        st = ox_attr_ints_upto(r, "axes", ax, NDMAX, &na);
    if (st) {
        cv_free(r, &x);
        return st;
    }
    if (!strcmp(ty, "Reshape")) {
        int64_t known = 1, neg = -1;

        o.nd = ns;
        for (int i = 0; i < ns; i++) {
            o.d[i] = s[i] == 0 && i < x.nd ? x.d[i] : s[i];
            if (o.d[i] < 0)
                neg = i;
            else
                known *= o.d[i] ? o.d[i] : 1;
        }
        if (neg >= 0)
            o.d[neg] = known ? x.n / known : 0;
    } else if (!strcmp(ty, "Unsqueeze")) {
        o.nd = x.nd + (int)na;
        for (int i = 0, j = 0; i < o.nd && o.nd <= NDMAX; i++) {
            bool ins = false;

            for (size_t k = 0; k < na; k++)
                ins = ins || axis_of(ax[k], o.nd) == i;
            o.d[i] = ins ? 1 : x.d[j++];
        }
    } else { /* Squeeze */
        for (int i = 0; i < x.nd; i++) {
            bool drop = !na && x.d[i] == 1;

            for (size_t k = 0; k < na; k++)
                drop = drop || axis_of(ax[k], x.nd) == i;
            if (!drop)
                o.d[o.nd++] = x.d[i];
        }
    }
    if (o.nd > NDMAX) {
        cv_free(r, &x);
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "more than %d dimensions", NDMAX);
    }
    return reshaped(r, &x, &o);
}

/* Gather along axis: data.d[:axis] + idx.d + data.d[axis+1:]. */
static remat_status fold_gather(struct rd *r)
{
    struct cv x, ix = {0}, o = {0};
    int64_t ax, outer = 1, inner = 1;
    remat_status st = cv_get(r, 0, &x);

    if (!st)
        st = cv_get(r, 1, &ix);
    if (st)
        goto out;
    ax = axis_of(ox_attr_i(r, "axis", 0), x.nd);
    if (ax < 0 || ax >= x.nd || x.nd + ix.nd - 1 > NDMAX) {
        st = ox_node_fail(r, REMAT_ERR_PARSE, "axis %lld", (long long)ax);
        goto out;
    }
    for (int i = 0; i < ax; i++) {
        o.d[o.nd++] = x.d[i];
        outer *= x.d[i];
    }
    for (int i = 0; i < ix.nd; i++)
        o.d[o.nd++] = ix.d[i];
    for (int i = (int)ax + 1; i < x.nd; i++)
        inner *= o.d[o.nd++] = x.d[i];
    o.dt = x.dt;
    if ((st = cv_alloc(r, &o)))
        goto out;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < ix.n; j++) {
            double dv = ix.v[j]; /* in range before the cast: a cast past int64 is undefined */
            int64_t k;

            if (!(dv >= -(double)x.d[ax] && dv < (double)x.d[ax])) {
                st = ox_node_fail(r, REMAT_ERR_PARSE, "index %g out of range", dv);
                goto out;
            }
            k = (int64_t)dv < 0 ? (int64_t)dv + x.d[ax] : (int64_t)dv;
            memcpy(o.v + (a * ix.n + j) * inner, x.v + (a * x.d[ax] + k) * inner,
                   sizeof(double) * (size_t)inner);
        }
    st = cv_put(r, 0, &o);
out:
    cv_free(r, &x);
    cv_free(r, &ix);
    cv_free(r, &o);
    return st;
}

/* Slice with constant starts, ends, axes and steps (ONNX's clamping). */
static remat_status fold_slice(struct rd *r)
{
    struct cv x, o = {0};
    int64_t st_[NDMAX], en[NDMAX], ax[NDMAX], sp[NDMAX], b[NDMAX], step[NDMAX], oi[NDMAX];
    int ns, ne, na, np;
    remat_status st = cv_get(r, 0, &x);

    if (st || (st = ints_in(r, 1, st_, NDMAX, &ns)) || (st = ints_in(r, 2, en, NDMAX, &ne)) ||
        (st = ints_in(r, 3, ax, NDMAX, &na)) || (st = ints_in(r, 4, sp, NDMAX, &np)))
        goto out;
    if (ns != ne || (na && na != ns) || (np && np != ns)) {
        st = ox_node_fail(r, REMAT_ERR_PARSE, "starts, ends, axes and steps disagree");
        goto out;
    }
    o.nd = x.nd;
    for (int k = 0; k < x.nd; k++) {
        o.d[k] = x.d[k];
        b[k] = 0;
        step[k] = 1;
    }
    for (int i = 0; i < ns; i++) {
        int64_t a = axis_of(na ? ax[i] : i, x.nd), dim, s0, e0, sv = np ? sp[i] : 1;

        if (a < 0 || a >= x.nd || sv == 0) {
            st = ox_node_fail(r, REMAT_ERR_PARSE, "slice axis %lld or step 0", (long long)a);
            goto out;
        }
        dim = x.d[a];
        s0 = st_[i] < 0 ? st_[i] + dim : st_[i];
        e0 = en[i] < 0 ? en[i] + dim : en[i];
        s0 = sv > 0 ? (s0 < 0 ? 0 : s0 > dim ? dim : s0) : (s0 < 0 ? -1 : s0 > dim - 1 ? dim - 1 : s0);
        e0 = sv > 0 ? (e0 < 0 ? 0 : e0 > dim ? dim : e0) : (e0 < -1 ? -1 : e0 > dim - 1 ? dim - 1 : e0);
        o.d[a] = sv > 0 ? (e0 > s0 ? (e0 - s0 + sv - 1) / sv : 0)
                        : (s0 > e0 ? (s0 - e0 - sv - 1) / -sv : 0);
        b[a] = s0;
        step[a] = sv;
    }
    o.dt = x.dt;
    if ((st = cv_alloc(r, &o)))
        goto out;
    for (int64_t e = 0; e < o.n; e++) {
        int64_t rem = e, off = 0;

        for (int k = o.nd - 1; k >= 0; k--) {
            oi[k] = rem % o.d[k];
            rem /= o.d[k];
        }
        for (int k = 0; k < o.nd; k++)
            off = off * x.d[k] + b[k] + oi[k] * step[k];
        o.v[e] = x.v[off];
    }
    st = cv_put(r, 0, &o);
out:
    cv_free(r, &x);
    cv_free(r, &o);
    return st;
}

/* Whether a and b have the same dimensions but axis ax (the same rank given). */
static bool same_but(const struct cv *a, const struct cv *b, int ax)
{
    for (int k = 0; k < a->nd; k++)
        if (k != ax && a->d[k] != b->d[k])
            return false;
    return true;
}

static remat_status fold_concat(struct rd *r)
{
    struct cv x, o = {0};
    int64_t ax = ox_attr_i(r, "axis", 0), outer = 1, at = 0;
    size_t n = ox_n_in(r);
    remat_status st = REMAT_OK;

    for (size_t i = 0; i < n && !st; i++) { /* the output's shape first */
        if ((st = cv_get(r, i, &x)))
            break;
        if (!i) {
            o = x;
            o.v = NULL;
            ax = axis_of(ax, x.nd);
            if (ax >= 0 && ax < x.nd)
                o.d[ax] = 0;
        }
        if (ax < 0 || ax >= x.nd || x.nd != o.nd || !same_but(&x, &o, (int)ax))
            st = ox_node_fail(r, REMAT_ERR_SHAPE, "constants that do not concatenate");
        else
            o.d[ax] += x.d[ax];
        cv_free(r, &x);
    }
    if (st || (st = cv_alloc(r, &o)))
        goto out;
    for (int k = 0; k < ax; k++)
        outer *= o.d[k];
    for (size_t i = 0; i < n && !st; i++) {
        int64_t w;

        if ((st = cv_get(r, i, &x)))
            break;
        w = outer ? x.n / outer : 0;
        for (int64_t a = 0; a < outer; a++)
            memcpy(o.v + a * (o.n / outer) + at, x.v + a * w, sizeof(double) * (size_t)w);
        at += w;
        cv_free(r, &x);
    }
    if (!st)
        return cv_put(r, 0, &o);
out:
    cv_free(r, &o);
    return st;
}

/* Range, ConstantOfShape, Expand: new constants of a computed size. */
static remat_status fold_make(struct rd *r, const char *ty)
{
    struct cv x = {0}, o = {0}, in[2] = {{0}};
    int64_t s[NDMAX], oi[NDMAX];
    int ns = 0;
    remat_status st;

    if (!strcmp(ty, "Range")) {
        if ((st = cv_get(r, 0, &in[0])) || (st = cv_get(r, 1, &in[1])) || (st = cv_get(r, 2, &x)))
            goto out;
        o.nd = 1;
        o.dt = in[0].dt;
        o.d[0] = x.v[0] ? (int64_t)fmax(ceil((in[1].v[0] - in[0].v[0]) / x.v[0]), 0) : 0;
        if (!(st = cv_alloc(r, &o)))
            for (int64_t i = 0; i < o.n; i++)
                o.v[i] = in[0].v[0] + (double)i * x.v[0];
    } else if (!strcmp(ty, "ConstantOfShape")) {
        const Onnx__TensorProto *t = ox_attr_tensor(r, "value");
        double *v = NULL;
        int64_t n = 0;

        if ((st = ints_in(r, 0, s, NDMAX, &ns)))
            goto out;
        o.nd = ns;
        memcpy(o.d, s, sizeof(int64_t) * (size_t)ns);
        o.dt = t ? ox_dtype_class(ox_tensor_type(t)) : OX_F;
        if ((t && (st = ox_tensor_doubles(r, t, &v, &n))) || (st = cv_alloc(r, &o)))
            goto out;
        for (int64_t i = 0; i < o.n; i++)
            o.v[i] = n ? v[0] : 0;
        core_free(r->a, v, sizeof(double) * (size_t)(n ? n : 1));
    } else { /* Expand: x broadcast with the shape */
        if ((st = cv_get(r, 0, &in[0])) || (st = ints_in(r, 1, s, NDMAX, &ns)))
            goto out;
        in[1].nd = ns;
        memcpy(in[1].d, s, sizeof(int64_t) * (size_t)ns);
        if ((st = broadcast_shape(r, in, 2, &o)))
            goto out;
        o.dt = in[0].dt;
        for (int64_t e = 0; e < o.n; e++) {
            int64_t rem = e;

            for (int k = o.nd - 1; k >= 0; k--) {
                oi[k] = rem % o.d[k];
                rem /= o.d[k];
            }
            o.v[e] = in[0].v[bidx(&in[0], oi, o.nd)];
        }
    }
    if (!st)
        st = cv_put(r, 0, &o);
out:
    cv_free(r, &x);
    cv_free(r, &o);
    cv_free(r, &in[0]);
    cv_free(r, &in[1]);
    return st;
}

/* Transpose: a 2-d constant flips its flag (no copy); others are permuted. */
static remat_status fold_transpose(struct rd *r)
{
    struct ent *e;
    struct cv x, o = {0};
    int64_t perm[NDMAX], oi[NDMAX];
    size_t np;
    remat_status st;
    int64_t d[NDMAX];

    if ((st = ox_in_ent(r, 0, &e)) || (st = ox_attr_ints_upto(r, "perm", perm, NDMAX, &np)))
        return st;
    if (ox_tensor_dims(e->t, d, NDMAX) == 2 && (!np || (perm[0] == 1 && perm[1] == 0))) {
        struct ent t = *e;

        t.trans = !e->trans;
        return ox_define(r, ox_out_name(r, 0), t);
    }
    if ((st = cv_get(r, 0, &x)))
        return st;
    o.nd = x.nd;
    o.dt = x.dt;
    for (int k = 0; k < x.nd; k++) {
        bool seen = false; /* a repeated axis would leave another unread */

        perm[k] = np ? perm[k] : x.nd - 1 - k;
        for (int j = 0; j < k; j++)
            seen = seen || perm[j] == perm[k];
        if (perm[k] < 0 || perm[k] >= x.nd || seen || (np && np != (size_t)x.nd)) {
            cv_free(r, &x);
            return ox_node_fail(r, REMAT_ERR_PARSE, "perm does not match the dimensions");
        }
        o.d[k] = x.d[perm[k]];
    }
    if (!(st = cv_alloc(r, &o)))
        for (int64_t i = 0; i < o.n; i++) {
            int64_t rem = i, off = 0, xi[NDMAX];

            for (int k = o.nd - 1; k >= 0; k--) {
                oi[k] = rem % o.d[k];
                rem /= o.d[k];
            }
            for (int k = 0; k < o.nd; k++)
                xi[perm[k]] = oi[k];
            for (int k = 0; k < x.nd; k++)
                off = off * x.d[k] + xi[k];
            o.v[i] = x.v[off];
        }
    cv_free(r, &x);
    return st ? st : cv_put(r, 0, &o);
}

/* Shape of an activation or a constant, from start to end (opset 15). */
static remat_status fold_shape(struct rd *r)
{
    struct ent *e;
    struct cv o = {.dt = OX_I, .nd = 1};
    int64_t s[NDMAX], lo, hi;
    int nd;
    int32_t v;
    remat_status st;

    if ((st = ox_in_ent(r, 0, &e)))
        return st;
    if (e->kind == E_TENSOR) {
        nd = ox_tensor_dims(e->t, s, NDMAX);
        if (nd == 2 && e->trans) {
            int64_t t = s[0];

            s[0] = s[1];
            s[1] = t;
        }
    } else {
        if ((st = ox_in_act(r, 0, &v)))
            return st;
        nd = (int)ox_shape_of(r, v, s);
    }
    lo = axis_of(ox_attr_i(r, "start", 0), nd);
    hi = axis_of(ox_attr_i(r, "end", nd), nd);
    lo = lo < 0 ? 0 : lo > nd ? nd : lo;
    hi = hi < lo ? lo : hi > nd ? nd : hi;
    o.d[0] = hi - lo;
    if ((st = cv_alloc(r, &o)))
        return st;
    for (int64_t i = 0; i < o.n; i++)
        o.v[i] = (double)s[lo + i];
    return cv_put(r, 0, &o);
}

static const char *const fold_types[] = {
    "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Cast", "Range",
    "ConstantOfShape", "Expand", "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less",
    "Greater", "And", "Or", "Where", "Sqrt", "Neg", "Not", "Identity", "Transpose",
};

/* Whether every input given is a constant. */
static bool all_const(const struct rd *r)
{
    for (size_t i = 0; i < ox_n_in(r); i++) {
        const struct ent *e = ox_lookup(r, ox_in_name(r, i));

        if (ox_in_name(r, i) && (!e || e->kind != E_TENSOR))
            return false;
    }
    return true;
}

/* A Gather of rows of a float table is an embedding (onnx_tf.c), even over constant ids
 * (positions): the table is a parameter. */
static bool is_embedding(const struct rd *r)
{
    const struct ent *e = ox_lookup(r, ox_in_name(r, 0));
    int64_t d[NDMAX];

    return !strcmp(ox_node_type(r), "Gather") && e && e->kind == E_TENSOR &&
           ox_dtype_class(ox_tensor_type(e->t)) == OX_F && ox_tensor_dims(e->t, d, NDMAX) == 2;
}

remat_status ox_fold(struct rd *r, bool *done)
{
    static const char *const bins[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less",
                                       "Greater", "And", "Or", "Where"};
    const char *ty = ox_node_type(r);
    bool known = false;

    *done = false;
    if (!strcmp(ty, "Shape"))
        return *done = true, fold_shape(r);
    for (size_t i = 0; i < REMAT_ARRAY_LEN(fold_types) && !known; i++)
        known = !strcmp(ty, fold_types[i]);
    if (!known || !all_const(r) || !ox_n_in(r) || is_embedding(r))
        return REMAT_OK;
    *done = true;
    for (int i = 0; i < (int)REMAT_ARRAY_LEN(bins); i++)
        if (!strcmp(ty, bins[i]))
            return fold_elementwise(r, i);
    if (!strcmp(ty, "Gather"))
        return fold_gather(r);
    if (!strcmp(ty, "Slice"))
        return fold_slice(r);
    if (!strcmp(ty, "Concat"))
        return fold_concat(r);
    if (!strcmp(ty, "Transpose"))
        return fold_transpose(r);
    if (!strcmp(ty, "Reshape") || !strcmp(ty, "Unsqueeze") || !strcmp(ty, "Squeeze"))
        return fold_reshape(r, ty);
    if (!strcmp(ty, "Range") || !strcmp(ty, "ConstantOfShape") || !strcmp(ty, "Expand"))
        return fold_make(r, ty);
    return fold_unary(r, ty); /* Cast, Sqrt, Neg, Not, Identity */
}
