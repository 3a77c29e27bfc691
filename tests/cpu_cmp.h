/*
 * cpu_cmp.h - the cpu backend's tests (test_cpu.c, test_cpu_conv.c): the comparison of
 * one op on the cpu backend against the reference kernels (cmp_case: the file comment of
 * test_cpu.c says what it checks and with which tolerances), the context and the seed.
 */
#ifndef REMAT_TESTS_CPU_CMP_H
#define REMAT_TESTS_CPU_CMP_H

#include "kernel_util.h"
#include "exec/backend.h"
#include "exec/exec.h"
#include "kernels/cpu/cpu.h"

#define S1(a) {1, {a, 0, 0, 0}}
#define S2(a, b) {2, {a, b, 0, 0}}
#define S4(a, b, c, d) {4, {a, b, c, d}}

struct tol {
    double rtol, atol;
};

static const struct tol EXACT = {0, 0};
static const struct tol T_LIN = {1e-4, 1e-5};
static const struct tol T_POOL __attribute__((unused)) = {1e-5, 1e-6};

enum fill { F_UNIFORM, F_DISTINCT, F_LABELS };

static const struct backend_ops *be;
static void *ctx; /* a cpu context, 2 threads */
static int32_t algo; /* the algorithm cmp_case runs convolutions with */

static int64_t n_prims(void)
{
    return ((const struct cpu_ctx *)ctx)->n_primitives;
}

/* got[0..n) against want (see the file comment); exact compares bits. */
static void compare(const char *name, const char *what, const float *got, const float *want,
                    int64_t n, struct tol tol)
{
    double amax = 1, worst = 0;
    int64_t bad = 0, first = -1;

    if (tol.rtol == 0 && tol.atol == 0) {
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[i], sizeof(float))) {
                first = first < 0 ? i : first;
                bad++;
            }
    } else {
        for (int64_t i = 0; i < n; i++)
            amax = fmax(amax, fabs(want[i]));
        for (int64_t i = 0; i < n; i++) {
            double err = fabs((double)got[i] - want[i]),
                   lim = tol.rtol * fabs(want[i]) + tol.atol * amax;

            worst = fmax(worst, err / lim);
            if (!(err <= lim)) {
                first = first < 0 ? i : first;
                bad++;
            }
        }
    }
    CHECK(bad == 0, "%s: %s[%lld] = %.9g, reference %.9g (rtol %g, atol %g); %lld of %lld off",
          name, what, (long long)first, first >= 0 ? got[first] : 0.0,
          first >= 0 ? want[first] : 0.0, tol.rtol, tol.atol, (long long)bad, (long long)n);
    if (tol.rtol > 0)
        printf("  %-40s %-8s worst error / tolerance %.2g\n", name, what, worst);
}

/* A copy of n floats (the test stops when out of memory). */
static float *dup(const float *p, int64_t n)
{
    float *q = malloc(sizeof(float) * (size_t)(n ? n : 1));

    REMAT_ASSERT_TEST(q);
    if (p)
        memcpy(q, p, sizeof(float) * (size_t)n);
    return q;
}

/* The backward of t on the reference (cpu false) or the cpu backend, with the forward
 * tensors the op table says it does not read handed over as NULL. */
static remat_status bwd(const struct tk *t, bool cpu)
{
    struct ktensor in[TK_MAX_IN];
    struct kop op = tk_bwd_kop(t, in);

    return cpu ? be->backward(ctx, &op) : ref_backward(&op);
}

/* Sets every gradient of t to g0[k]. */
static void set_grads(struct tk *t, float *const *g0)
{
    struct ktensor *p, *g;

    for (int k = 0; k < t->n_in + 2; k++)
        if (tk_slot(t, k, &p, &g))
            memcpy(g->data, g0[k], sizeof(float) * (size_t)kt_n(g));
}

/*
 * The comparison of the file comment for one op: ftol for the forward (output, aux,
 * running statistics), btol for the gradients. dout_null: the backward gets the
 * constant 1 as dout.
 */
static void cmp_case(const char *name, remat_op type, int n_in, const struct shp *shapes,
                     const remat_attrs *at, enum fill fill, struct tol ftol, struct tol btol,
                     bool dout_null)
{
    struct tk t;
    struct ktensor *p, *g;
    float *g0[TK_MAX_IN + 2] = {0}, *gr[TK_MAX_IN + 2] = {0}, *gc[TK_MAX_IN + 2] = {0};
    float *yr, *auxr = NULL, *yc, *auxc = NULL, *rm0 = NULL, *rv0 = NULL, *rmr = NULL,
          *rvr = NULL, *dout;
    int64_t ny, naux, nc = 0, np;
    bool int_aux = type == REMAT_OP_MAX_POOL;

    tk_init(&t, type, n_in, shapes, at);
    t.op.algo = algo;
    for (int i = 0; i < n_in; i++) {
        if (fill == F_LABELS && i == 1) {
            for (int64_t j = 0; j < kt_n(&t.in[1]); j++)
                ((int32_t *)t.in[1].data)[j] =
                    (int32_t)(splitmix64() % (uint64_t)t.in[0].shape[1]);
        } else if (fill == F_DISTINCT) {
            fill_distinct(&t.in[i], 0.01);
        } else {
            fill_uniform(&t.in[i], -1, 1);
        }
    }
    if (t.op.w.data)
        fill_uniform(&t.op.w, -1, 1);
    if (t.op.b.data)
        fill_uniform(&t.op.b, -1, 1);
    fill_uniform(&t.op.dout, -1, 1);
    t.op.key = 0x5eedull;
    ny = kt_n(&t.op.out);
    naux = t.op.aux.data ? kt_n(&t.op.aux) : 0;
    if (t.op.running_mean) {
        nc = t.op.w.shape[0];
        for (int64_t c = 0; c < nc; c++) {
            t.op.running_mean[c] = (float)urand(-1, 1);
            t.op.running_var[c] = (float)urand(0.5, 2);
        }
        rm0 = dup(t.op.running_mean, nc);
        rv0 = dup(t.op.running_var, nc);
        t.op.update_stats = true;
    }

    /* forward: the reference, then the cpu backend from the same running statistics */
    CHECK_OK(ref_forward(&t.op));
    yr = dup(t.op.out.data, ny);
    if (naux)
        auxr = dup(t.op.aux.data, naux);
    if (nc) {
        rmr = dup(t.op.running_mean, nc);
        rvr = dup(t.op.running_var, nc);
        memcpy(t.op.running_mean, rm0, sizeof(float) * (size_t)nc);
        memcpy(t.op.running_var, rv0, sizeof(float) * (size_t)nc);
    }
    memset(t.op.out.data, 0xff, sizeof(float) * (size_t)ny); /* NaN: every element written */
    if (naux)
        memset(t.op.aux.data, 0xff, sizeof(float) * (size_t)naux);
    CHECK_OK(be->forward(ctx, &t.op));
    compare(name, "y", t.op.out.data, yr, ny, ftol);
    if (naux)
        compare(name, "aux", t.op.aux.data, auxr, naux, int_aux ? EXACT : ftol);
    if (nc) {
        compare(name, "run_mean", t.op.running_mean, rmr, nc, ftol);
        compare(name, "run_var", t.op.running_var, rvr, nc, ftol);
        memcpy(t.op.running_mean, rm0, sizeof(float) * (size_t)nc);
        memcpy(t.op.running_var, rv0, sizeof(float) * (size_t)nc);
    }

    /* a second forward: bit-identical, no new primitive */
    yc = dup(t.op.out.data, ny);
    if (naux)
        auxc = dup(t.op.aux.data, naux);
    np = n_prims();
    CHECK_OK(be->forward(ctx, &t.op));
    compare(name, "y again", t.op.out.data, yc, ny, EXACT);
    if (naux)
        compare(name, "aux again", t.op.aux.data, auxc, naux, EXACT);
    if (nc) {
        compare(name, "run_mean again", t.op.running_mean, rmr, nc, ftol);
        t.op.update_stats = false;
        memcpy(rm0, t.op.running_mean, sizeof(float) * (size_t)nc);
        CHECK_OK(be->forward(ctx, &t.op));
        compare(name, "run_mean without update_stats", t.op.running_mean, rm0, nc, EXACT);
    }
    CHECK(n_prims() == np, "%s: the second forward made %lld primitives", name,
          (long long)(n_prims() - np));

    /* backward, from the reference forward's tensors, onto random starting gradients */
    memcpy(t.op.out.data, yr, sizeof(float) * (size_t)ny);
    if (naux)
        memcpy(t.op.aux.data, auxr, sizeof(float) * (size_t)naux);
    dout = t.op.dout.data;
    if (dout_null)
        t.op.dout.data = NULL;
    for (int k = 0; k < t.n_in + 2; k++)
        if (tk_slot(&t, k, &p, &g)) {
            fill_uniform(g, -1, 1);
            g0[k] = dup(g->data, kt_n(g));
        }
    CHECK_OK(bwd(&t, false));
    for (int k = 0; k < t.n_in + 2; k++)
        if (g0[k]) {
            tk_slot(&t, k, &p, &g);
            gr[k] = dup(g->data, kt_n(g));
        }
    set_grads(&t, g0);
    CHECK_OK(bwd(&t, true));
    for (int k = 0; k < t.n_in + 2; k++)
        if (g0[k]) {
            char what[32];

            tk_slot(&t, k, &p, &g);
            snprintf(what, sizeof what, "d%d", k);
            compare(name, k < t.n_in ? what : k == t.n_in ? "dw" : "db", g->data, gr[k],
                    kt_n(g), btol);
            gc[k] = dup(g->data, kt_n(g));
        }

    /* again: bit-identical, no new primitive */
    np = n_prims();
    set_grads(&t, g0);
    CHECK_OK(bwd(&t, true));
    for (int k = 0; k < t.n_in + 2; k++)
        if (g0[k]) {
            tk_slot(&t, k, &p, &g);
            compare(name, "grad again", g->data, gc[k], kt_n(g), EXACT);
        }
    CHECK(n_prims() == np, "%s: the second backward made %lld primitives", name,
          (long long)(n_prims() - np));

    /* each gradient alone, the others NULL (skipped), then none */
    for (int k = -1; k < t.n_in + 2; k++) {
        struct ktensor save[TK_MAX_IN + 2];

        if (k >= 0 && !g0[k])
            continue;
        set_grads(&t, g0);
        for (int j = 0; j < t.n_in + 2; j++) {
            tk_slot(&t, j, &p, &g);
            save[j] = *g;
            if (j != k)
                g->data = NULL;
        }
        CHECK_OK(bwd(&t, true));
        for (int j = 0; j < t.n_in + 2; j++) {
            tk_slot(&t, j, &p, &g);
            *g = save[j];
        }
        if (k >= 0) {
            tk_slot(&t, k, &p, &g);
            compare(name, "alone", g->data, gc[k], kt_n(g), btol);
        }
    }

    t.op.dout.data = dout;
    for (int k = 0; k < TK_MAX_IN + 2; k++) {
        free(g0[k]);
        free(gr[k]);
        free(gc[k]);
    }
    free(yr);
    free(yc);
    free(auxr);
    free(auxc);
    free(rm0);
    free(rv0);
    free(rmr);
    free(rvr);
    tk_fini(&t);
}

/* The cpu context (2 threads) and the seed, from REMAT_SEED; false when the backend
 * cannot start (printed). */
static inline bool cpu_cmp_setup(void)
{
    const char *env = getenv("REMAT_SEED");
    remat_train_opts o = remat_train_opts_default();

    rng_seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    printf("seed %llu (REMAT_SEED to change)\n", (unsigned long long)rng_seed);
    be = backend_cpu();
    REMAT_ASSERT_TEST(be && !strcmp(be->name, "cpu"));
    o.threads = 2;
    if (be->create(&o, &ctx) != REMAT_OK) {
        printf("cpu backend: %s\n", remat_errmsg());
        return false;
    }
    return true;
}

#endif
