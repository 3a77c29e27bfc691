/*
 * kernel_util.h - helpers for the kernel tests (test_kernels.c, test_kernels_grad.c): a random stream, one
 * op under test with its tensors (struct tk), value and shape checks, and the generic
 * gradient check.
 *
 * An op under test is built through the graph (remat_graph_add), so that its attributes
 * get their defaults and its output, aux and parameter shapes come from shape inference,
 * exactly as the executor will fill a struct kop; the tensors are then allocated here.
 *
 * The gradient check (tk_grad_check) takes L = sum r * y for a fixed r and compares
 * every element of every gradient the backward gives (inputs, weight, bias) with a
 * fourth-order central difference, (L(-2h) - 8 L(-h) + 8 L(h) - L(2h)) / 12h, in double
 * from four float forward runs (L summed in double); its weights are worked out from the
 * steps actually taken once p +- h, p +- 2h are rounded to float, so that it stays exact
 * for an L linear in p. Around it, it checks
 * that the backward reads only what the op table says (the other forward tensors are
 * handed to it as NULL), that a second backward doubles the gradients, that each
 * gradient comes out the same when it is the only one wanted (the others NULL), and
 * that two forward runs are bit-identical.
 */
#ifndef REMAT_KERNEL_UTIL_H
#define REMAT_KERNEL_UTIL_H

#include "harness.h"
#include "graph/graph.h"
#include "kernels/kernels.h"

/* ------------------------------------------------------------------ random */

static uint64_t rng_state, rng_seed;

static inline uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double urand(double lo, double hi)
{
    return lo + (hi - lo) * (double)(splitmix64() >> 11) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------- op under test */

#define TK_MAX_IN 4

struct shp {
    int ndim;
    int64_t d[4];
};

struct tk {
    struct kop op;
    remat_attrs at; /* as shape inference filled it */
    struct ktensor in[TK_MAX_IN], din[TK_MAX_IN];
    int32_t n_in;
};

/* A zeroed tensor of the given shape (the test stops when out of memory). */
static inline struct ktensor kt_alloc(int ndim, const int64_t *shape)
{
    struct ktensor t = {.ndim = ndim};
    int64_t n;

    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    n = ktensor_numel(&t);
    t.data = calloc((size_t)n, sizeof(float));
    REMAT_ASSERT_TEST(t.data);
    return t;
}

/* Elements of t. */
static inline int64_t kt_n(const struct ktensor *t)
{
    return ktensor_numel(t);
}

/*
 * Builds op `type` over n_in inputs of the given shapes (for softmax_ce the second is
 * the labels, shape (N)) with the given attributes, and allocates, zeroed, its inputs,
 * their gradients, the output, its gradient (dout), aux, parameters and their gradients,
 * and running statistics for batch norm.
 */
static inline void tk_init(struct tk *t, remat_op type, int n_in, const struct shp *shapes,
                           const remat_attrs *at)
{
    remat_graph *g = NULL;
    int32_t ids[TK_MAX_IN], out;
    const struct gop *op;
    int n_params;

    REMAT_ASSERT_TEST(n_in <= TK_MAX_IN && remat_graph_new(NULL, &g) == REMAT_OK);
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n_in; i++)
        ids[i] = type == REMAT_OP_SOFTMAX_CE && i == 1
                     ? remat_graph_labels(g, NULL, shapes[i].d[0])
                 : (type == REMAT_OP_EMBEDDING && i == 0) || (type == REMAT_OP_TOKEN_CE && i == 1)
                     ? remat_graph_tokens(g, NULL, shapes[i].ndim, shapes[i].d)
                     : remat_graph_input(g, NULL, shapes[i].ndim, shapes[i].d);
    out = remat_graph_add(g, type, ids, n_in, at, NULL);
    if (out < 0)
        printf("  graph: %s\n", remat_errmsg());
    REMAT_ASSERT_TEST(out >= 0);
    op = graph_op(g, remat_graph_n_ops(g) - 1);
    t->at = op->at;
    t->n_in = n_in;
    t->op.type = type;
    t->op.at = &t->at;
    t->op.n_in = n_in;
    t->op.in = t->in;
    t->op.din = t->din;
    for (int i = 0; i < n_in; i++) {
        const struct gvalue *v = graph_value(g, ids[i]);

        t->in[i] = kt_alloc(v->ndim, v->shape);
        t->din[i] = kt_alloc(v->ndim, v->shape);
    }
    t->op.out = kt_alloc(graph_value(g, out)->ndim, graph_value(g, out)->shape);
    t->op.dout = kt_alloc(t->op.out.ndim, t->op.out.shape);
    if (op->aux >= 0)
        t->op.aux = kt_alloc(graph_value(g, op->aux)->ndim, graph_value(g, op->aux)->shape);
    n_params = op->n_in - n_in;
    if (n_params >= 1) {
        const struct gvalue *v = graph_value(g, op->in[n_in]);

        t->op.w = kt_alloc(v->ndim, v->shape);
        t->op.dw = kt_alloc(v->ndim, v->shape);
    }
    if (n_params >= 2) {
        const struct gvalue *v = graph_value(g, op->in[n_in + 1]);

        t->op.b = kt_alloc(v->ndim, v->shape);
        t->op.db = kt_alloc(v->ndim, v->shape);
    }
    if (type == REMAT_OP_BATCH_NORM) {
        t->op.running_mean = calloc((size_t)t->op.w.shape[0], sizeof(float));
        t->op.running_var = calloc((size_t)t->op.w.shape[0], sizeof(float));
        REMAT_ASSERT_TEST(t->op.running_mean && t->op.running_var);
    }
    remat_graph_free(g);
}

/* Frees what tk_init allocated (a test may have freed a tensor and left it NULL). */
static inline void tk_fini(struct tk *t)
{
    for (int i = 0; i < t->n_in; i++) {
        free(t->in[i].data);
        free(t->din[i].data);
    }
    free(t->op.out.data);
    free(t->op.dout.data);
    free(t->op.aux.data);
    free(t->op.w.data);
    free(t->op.dw.data);
    free(t->op.b.data);
    free(t->op.db.data);
    free(t->op.running_mean);
    free(t->op.running_var);
}

/* Fills t with uniform values in [lo, hi). */
static inline void fill_uniform(struct ktensor *t, double lo, double hi)
{
    for (int64_t i = 0; i < kt_n(t); i++)
        t->data[i] = (float)urand(lo, hi);
}

/* Fills t with values of magnitude in [lo, hi) and a random sign. */
static inline void fill_away_from_zero(struct ktensor *t, double lo, double hi)
{
    for (int64_t i = 0; i < kt_n(t); i++)
        t->data[i] = (float)(urand(lo, hi) * (splitmix64() & 1 ? 1 : -1));
}

/* Fills t with a random permutation of {0, step, 2 step, ...} minus n step / 2: all
 * values at least step apart. */
static inline void fill_distinct(struct ktensor *t, double step)
{
    int64_t n = kt_n(t);

    for (int64_t i = 0; i < n; i++)
        t->data[i] = (float)((double)i * step - (double)n * step / 2);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix64() % (uint64_t)(i + 1));
        float v = t->data[i];

        t->data[i] = t->data[j];
        t->data[j] = v;
    }
}

/* Copies numel(t) values into t. */
static inline void set_vals(struct ktensor *t, const float *v)
{
    memcpy(t->data, v, sizeof(float) * (size_t)kt_n(t));
}

/* got[0..n) against want within tol, relative to max(1, |want|). */
static inline void check_close(const char *what, const float *got, const double *want,
                               int64_t n, double tol)
{
    int64_t bad = 0, first = -1;

    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * fmax(1, fabs(want[i])))) {
            first = first < 0 ? i : first;
            bad++;
        }
    CHECK(bad == 0, "%s: [%lld] = %.9g, expected %.9g (tol %g); %lld of %lld off", what,
          (long long)first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0,
          tol, (long long)bad, (long long)n);
}

/* Checks t's shape against (a, b, c, d) truncated to ndim. */
static inline void check_shape(const char *what, const struct ktensor *t, int ndim,
                               int64_t a, int64_t b, int64_t c, int64_t d)
{
    const int64_t want[4] = {a, b, c, d};
    bool ok = t->ndim == ndim;

    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == want[i];
    CHECK(ok, "%s: shape (%lld, %lld, %lld, %lld)/%d, expected (%lld, %lld, %lld, %lld)/%d",
          what, (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2],
          (long long)t->shape[3], t->ndim, (long long)a, (long long)b, (long long)c,
          (long long)d, ndim);
}

/* t's kop as the executor may hand it to a backward: the forward tensors the op table
 * says it does not read are NULL (in: room for the inputs it points at). */
static inline struct kop tk_bwd_kop(const struct tk *t, struct ktensor in[TK_MAX_IN])
{
    struct kop op = t->op;
    unsigned reads = op_info(op.type)->bwd_reads;

    memcpy(in, t->in, sizeof(struct ktensor) * TK_MAX_IN);
    op.in = in;
    for (int i = 0; i < t->n_in; i++)
        if (!(i == 0 && (reads & BR_IN0)) && !(i == 1 && (reads & BR_IN1)))
            in[i].data = NULL;
    if (!(reads & BR_OUT))
        op.out.data = NULL;
    if (!(reads & BR_AUX))
        op.aux.data = NULL;
    return op;
}

/* The reference backward of t as the executor may call it (tk_bwd_kop). */
static inline remat_status tk_backward(const struct tk *t)
{
    struct ktensor in[TK_MAX_IN];
    struct kop op = tk_bwd_kop(t, in);

    return ref_backward(&op);
}

/* Gradient slot k: input k (< n_in), the weight (n_in) or the bias (n_in + 1). False
 * when the slot has no parameter or no gradient (softmax_ce's labels, token ids). */
static inline bool tk_slot(struct tk *t, int k, struct ktensor **p, struct ktensor **g)
{
    if (k < t->n_in) {
        *p = &t->in[k];
        *g = &t->din[k];
    } else {
        *p = k == t->n_in ? &t->op.w : &t->op.b;
        *g = k == t->n_in ? &t->op.dw : &t->op.db;
    }
    if (((t->op.type == REMAT_OP_SOFTMAX_CE || t->op.type == REMAT_OP_TOKEN_CE) && k == 1) ||
        (t->op.type == REMAT_OP_EMBEDDING && k == 0)) /* integers: no gradient */
        return false;
    return (*p)->data && (*g)->data;
}

/* Zeroes every gradient t has. */
static inline void tk_zero_grads(struct tk *t)
{
    struct ktensor *p, *g;

    for (int k = 0; k < t->n_in + 2; k++)
        if (tk_slot(t, k, &p, &g))
            memset(g->data, 0, sizeof(float) * (size_t)kt_n(g));
}

/* L = sum r * y after a forward run. */
static inline double tk_loss(struct tk *t, const float *r)
{
    double l = 0;

    REMAT_ASSERT_TEST(ref_forward(&t->op) == REMAT_OK);
    for (int64_t i = 0; i < kt_n(&t->op.out); i++)
        l += (double)r[i] * t->op.out.data[i];
    return l;
}

struct fd_tol {
    double h, rtol, atol; /* step; |fd - grad| <= atol + rtol |fd| */
};

enum fd_dout {
    FD_RANDOM, /* dout = r, uniform in [-1, 1) */
    FD_NULL,   /* dout NULL: r = 1 */
    FD_HALF,   /* dout = r = 0.5 */
};

static const char *const slot_names[] = {"in0", "in1", "in2", "in3", "w", "b"};

/* "in0".."in3", "w" or "b": the name of gradient slot k in messages. */
static inline const char *slot_name(const struct tk *t, int k)
{
    return k < t->n_in ? slot_names[k] : slot_names[TK_MAX_IN + k - t->n_in];
}

/* The weights w[k] of L(d[k]) in the derivative at 0 of the cubic through the four
 * points (d[k], L(d[k])): exact for cubics, so for symmetric d = (-2h, -h, h, 2h) the
 * fourth-order stencil (L(-2h) - 8 L(-h) + 8 L(h) - L(2h)) / 12h. */
static inline void fd_weights(const double d[4], double w[4])
{
    for (int k = 0; k < 4; k++) {
        double den = 1, num = 0;

        for (int j = 0; j < 4; j++)
            if (j != k)
                den *= d[k] - d[j];
        for (int m = 0; m < 4; m++) {
            double prod = 1;

            if (m == k)
                continue;
            for (int j = 0; j < 4; j++)
                if (j != k && j != m)
                    prod *= -d[j];
            num += prod;
        }
        w[k] = num / den;
    }
}

/* Checks one gradient tensor against finite differences; returns the worst
 * |fd - grad| / (atol + rtol |fd|) seen. */
static inline double fd_slot(struct tk *t, const char *name, int k, const float *r,
                             const float *ana, struct fd_tol tol)
{
    static const double steps[4] = {-2, -1, 1, 2};
    struct ktensor *p, *g;
    int64_t bad = 0, worst_i = 0, n;
    double worst = 0, worst_fd = 0, amax = 0;

    tk_slot(t, k, &p, &g);
    n = kt_n(p);
    for (int64_t i = 0; i < n; i++) {
        float orig = p->data[i];
        double d[4], w[4], fd = 0, ratio;

        for (int s = 0; s < 4; s++) {
            p->data[i] = (float)(orig + steps[s] * tol.h);
            d[s] = (double)p->data[i] - orig; /* the step actually taken */
        }
        fd_weights(d, w);
        for (int s = 0; s < 4; s++) {
            p->data[i] = (float)(orig + steps[s] * tol.h);
            fd += w[s] * tk_loss(t, r);
        }
        p->data[i] = orig;
        ratio = fabs(fd - ana[i]) / (tol.atol + tol.rtol * fabs(fd));
        bad += ratio > 1;
        if (ratio > worst) {
            worst = ratio;
            worst_i = i;
            worst_fd = fd;
        }
        amax = fmax(amax, fabs(ana[i]));
    }
    CHECK(bad == 0, "%s: d%s[%lld] = %.7g, finite difference %.7g (h %g, tol %g + %g |fd|);"
          " %lld of %lld off", name, slot_name(t, k), (long long)worst_i, ana[worst_i],
          worst_fd, tol.h, tol.atol, tol.rtol, (long long)bad, (long long)n);
    CHECK(amax > 0, "%s: d%s is all zero: the check would prove nothing", name,
          slot_name(t, k));
    return worst;
}

/*
 * The gradient check of the file comment for the op in t, whose inputs and parameters
 * are set. Prints the worst error ratio per gradient (1 = at the tolerance).
 */
static inline void tk_grad_check(struct tk *t, const char *name, struct fd_tol tol,
                                 enum fd_dout mode)
{
    int64_t n_out = kt_n(&t->op.out);
    float *r = malloc(sizeof(float) * (size_t)n_out), *y1 = malloc(sizeof(float) * (size_t)n_out);
    float *ana[TK_MAX_IN + 2] = {0};
    float *dout = t->op.dout.data;
    struct ktensor *p, *g;
    char line[256];
    int len = 0;

    REMAT_ASSERT_TEST(r && y1);
    for (int64_t i = 0; i < n_out; i++)
        r[i] = mode == FD_RANDOM ? (float)urand(-1, 1) : mode == FD_HALF ? 0.5f : 1.0f;
    memcpy(dout, r, sizeof(float) * (size_t)n_out);
    if (mode == FD_NULL)
        t->op.dout.data = NULL;

    /* determinism, then the analytic gradients */
    CHECK_OK(ref_forward(&t->op));
    memcpy(y1, t->op.out.data, sizeof(float) * (size_t)n_out);
    CHECK_OK(ref_forward(&t->op));
    CHECK(!memcmp(y1, t->op.out.data, sizeof(float) * (size_t)n_out),
          "%s: two forward runs differ", name);
    tk_zero_grads(t);
    CHECK_OK(tk_backward(t));
    for (int k = 0; k < t->n_in + 2; k++)
        if (tk_slot(t, k, &p, &g)) {
            ana[k] = malloc(sizeof(float) * (size_t)kt_n(g));
            REMAT_ASSERT_TEST(ana[k]);
            memcpy(ana[k], g->data, sizeof(float) * (size_t)kt_n(g));
        }

    /* finite differences */
    for (int k = 0; k < t->n_in + 2; k++)
        if (ana[k] && len < 200)
            len += snprintf(line + len, sizeof line - (size_t)len, " d%s %.2g",
                            slot_name(t, k), fd_slot(t, name, k, r, ana[k], tol));
    printf("  %-34s worst error / tolerance:%s\n", name, line);
    CHECK_OK(ref_forward(&t->op)); /* aux back to the unperturbed inputs */

    /* a second backward doubles every gradient */
    CHECK_OK(tk_backward(t));
    for (int k = 0; k < t->n_in + 2; k++) {
        double amax = 0;
        int64_t bad = 0;

        if (!ana[k])
            continue;
        tk_slot(t, k, &p, &g);
        for (int64_t i = 0; i < kt_n(g); i++)
            amax = fmax(amax, fabs(ana[k][i]));
        for (int64_t i = 0; i < kt_n(g); i++)
            bad += fabs(g->data[i] - 2.0 * ana[k][i]) > 1e-6 * (fabs(2.0 * ana[k][i]) + amax);
        CHECK(bad == 0, "%s: a second backward does not double d%s (%lld elements off)",
              name, slot_name(t, k), (long long)bad);
    }

    /* each gradient alone (the others NULL), then none at all */
    for (int k = -1; k < t->n_in + 2; k++) {
        struct ktensor save[TK_MAX_IN + 2];

        if (k >= 0 && !ana[k])
            continue;
        tk_zero_grads(t);
        for (int j = 0; j < t->n_in + 2; j++) {
            tk_slot(t, j, &p, &g);
            save[j] = *g;
            if (j != k)
                g->data = NULL;
        }
        CHECK_OK(tk_backward(t));
        for (int j = 0; j < t->n_in + 2; j++) {
            tk_slot(t, j, &p, &g);
            *g = save[j];
        }
        if (k >= 0) {
            tk_slot(t, k, &p, &g);
            CHECK(!memcmp(g->data, ana[k], sizeof(float) * (size_t)kt_n(g)),
                  "%s: d%s alone differs from d%s with the others", name,
                  slot_name(t, k), slot_name(t, k));
        }
    }
    t->op.dout.data = dout;
    for (int k = 0; k < TK_MAX_IN + 2; k++)
        free(ana[k]);
    free(r);
    free(y1);
}

#endif
