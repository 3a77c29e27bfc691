/*
 * test_cpu_seq.c - the cpu backend's transformer kernels (src/kernels/cpu/matmul.c,
 * seq.c: matmul, layer norm, softmax_last, gelu) against the reference kernels, which
 * are the specification (test_kernels_seq.c checks those against hand-worked values
 * and finite differences).
 *
 * Per op and shape, on random data (tests/cpu_cmp.h, cmp_case): the forward's output
 * (and layer norm's aux); the backward's every gradient, accumulated onto a random
 * non-zero starting value (so += is checked), each alone with the others NULL; two runs
 * bit-identical. matmul: batched 2-d to 4-d, either or both transposed, a shared 2-d B,
 * B as a parameter (tied weights: w and dw), sizes 1, 3, 17, 64 and the products large
 * enough to take each path (batches folded into rows, split across the threads, or one
 * GEMM each on all of them), inner dimensions long enough to run in chunks; the same
 * bits again from buffers at other addresses.
 * gelu, exact and tanh, also on a wide range of inputs. Then a small transformer
 * trained on the cpu backend under `none`, `chen-sqrtn` and `approx-mc`: the same
 * parameter bits under each plan, and losses near the reference backend's.
 *
 * Tolerances: |cpu - ref| <= rtol |ref| + atol max(1, max |ref| over the tensor), and
 *   matmul: rtol 1e-5, atol 2e-6 (float GEMM sums against the reference's double ones),
 *     and the error's 2-norm within 1e-6 of the reference's;
 *   layer norm: exact (the reference's arithmetic, rows on threads);
 *   softmax_last: rtol 1e-5, atol 1e-6 (a float exp of our own, float sums);
 *   gelu: rtol 1e-5, atol 1e-6 (a float erf of our own, absolute error 1.5e-7);
 *   the trained model's losses against the reference backend's: 1e-4 relative.
 * Seed: REMAT_SEED (printed).
 */
#include "cpu_cmp.h"

#include "exec/exec.h"

static const struct tol T_MM = {1e-5, 2e-6};
static const struct tol T_SM = {1e-5, 1e-6};

#define S3(a, b, c) {3, {a, b, c, 0}}

/* ||got - want|| / ||want|| <= 1e-6 (2-norms in double). */
static void norm_check(const char *name, const char *what, const float *got,
                       const float *want, int64_t n)
{
    double e = 0, w = 0;

    for (int64_t i = 0; i < n; i++) {
        e += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += (double)want[i] * want[i];
    }
    CHECK(sqrt(e) <= 1e-6 * sqrt(w) + 1e-30, "%s: %s relative error norm %.3g", name, what,
          w > 0 ? sqrt(e / w) : sqrt(e));
}

/* ------------------------------------------------------------------ matmul */

/* A, B shapes for (nb dims, M, K, N) with the given transposes; B 2-d when shared. */
static void mm_shapes(struct shp s[2], int nbd, const int64_t *lead, int64_t m, int64_t k,
                      int64_t n, bool ta, bool tb, bool shared)
{
    s[0].ndim = nbd + 2;
    s[1].ndim = shared ? 2 : nbd + 2;
    for (int i = 0; i < nbd; i++)
        s[0].d[i] = s[1].d[i] = lead[i];
    s[0].d[nbd] = ta ? k : m;
    s[0].d[nbd + 1] = ta ? m : k;
    s[1].d[s[1].ndim - 2] = tb ? n : k;
    s[1].d[s[1].ndim - 1] = tb ? k : n;
}

/* Every transpose pair of one (lead, M, K, N), B per batch and (with batches) shared. */
static void mm_cases(int nbd, const int64_t *lead, int64_t m, int64_t k, int64_t n)
{
    for (int sh = 0; sh < (nbd ? 2 : 1); sh++)
        for (int v = 0; v < 4; v++) {
            bool ta = v & 1, tb = v & 2;
            struct shp s[2];
            char name[96];

            mm_shapes(s, nbd, lead, m, k, n, ta, tb, sh);
            snprintf(name, sizeof name, "matmul %lldx(%lld,%lld,%lld)%s%s%s",
                     (long long)(nbd ? lead[0] * (nbd > 1 ? lead[1] : 1) : 1), (long long)m,
                     (long long)k, (long long)n, ta ? " A^T" : "", tb ? " B^T" : "",
                     sh ? " shared B" : "");
            cmp_case(name, REMAT_OP_MATMUL, 2, s, &(remat_attrs){.trans_a = ta, .trans_b = tb},
                     F_UNIFORM, T_MM, T_MM, false);
        }
}

static void test_matmul_small(void)
{
    static const int64_t sz[][3] = {{1, 1, 1}, {3, 17, 1}, {1, 3, 17}, {17, 1, 3},
                                    {17, 64, 3}, {64, 3, 17}, {5, 7, 9}};
    int64_t l1[1] = {3}, l2[2] = {2, 3}, one[1] = {1};

    rng_state = rng_seed;
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        mm_cases(0, NULL, sz[i][0], sz[i][1], sz[i][2]);
        mm_cases(1, l1, sz[i][0], sz[i][1], sz[i][2]);
    }
    mm_cases(2, l2, 17, 3, 64);
    mm_cases(1, one, 3, 17, 5);
}

/* Products large enough that the batches split across the threads (64^3 each), or that
 * each runs on all of them (above MM_SPLIT_MAX), or fold into a large one. */
static void test_matmul_large(void)
{
    int64_t l1[1] = {4}, l2[2] = {2, 2}, l3[1] = {2};

    rng_state = rng_seed + 1;
    mm_cases(1, l1, 64, 64, 64);
    mm_cases(2, l2, 128, 64, 96);
    mm_cases(1, l3, 256, 300, 260); /* 2e7 multiply-adds a batch */
    /* inner dimensions beyond 4096, which run in chunks of 2048 and a shorter last one:
     * the forward's, dA's (N) and a shared B's dB (the batches' rows, 2 x 2100) */
    mm_cases(1, l3, 3, 8197, 5);
    mm_cases(1, l3, 3, 5, 8197);
    mm_cases(1, l3, 2100, 3, 4);
}

/* B as a parameter (tied weights): n_in 1, B in w, its gradient in dw; the cpu
 * backend's forward and backward against the reference's, gradients accumulated onto
 * random values. */
static void mm_param_case(const char *name, const struct shp s[2], bool ta, bool tb)
{
    struct tk t;
    struct kop op;
    float *yr, *dar, *dbr, *da0, *db0;
    int64_t ny, na, nbw;

    tk_init(&t, REMAT_OP_MATMUL, 2, s, &(remat_attrs){.trans_a = ta, .trans_b = tb});
    fill_uniform(&t.in[0], -1, 1);
    fill_uniform(&t.in[1], -1, 1);
    fill_uniform(&t.op.dout, -1, 1);
    fill_uniform(&t.din[0], -1, 1);
    fill_uniform(&t.din[1], -1, 1);
    op = t.op;
    op.n_in = 1;
    op.w = t.in[1];
    op.dw = t.din[1];
    ny = kt_n(&op.out);
    na = kt_n(&t.in[0]);
    nbw = kt_n(&op.w);
    da0 = dup(t.din[0].data, na);
    db0 = dup(t.din[1].data, nbw);
    CHECK_OK(ref_forward(&op));
    yr = dup(op.out.data, ny);
    CHECK_OK(ref_backward(&op));
    dar = dup(t.din[0].data, na);
    dbr = dup(t.din[1].data, nbw);
    memset(op.out.data, 0xff, sizeof(float) * (size_t)ny);
    memcpy(t.din[0].data, da0, sizeof(float) * (size_t)na);
    memcpy(t.din[1].data, db0, sizeof(float) * (size_t)nbw);
    CHECK_OK(be->forward(ctx, &op));
    CHECK_OK(be->backward(ctx, &op));
    compare(name, "y", op.out.data, yr, ny, T_MM);
    compare(name, "dA", t.din[0].data, dar, na, T_MM);
    compare(name, "dW", t.din[1].data, dbr, nbw, T_MM);
    norm_check(name, "dW", t.din[1].data, dbr, nbw);
    free(yr);
    free(dar);
    free(dbr);
    free(da0);
    free(db0);
    tk_fini(&t);
}

static void test_matmul_param(void)
{
    int64_t lead[2] = {2, 3};

    rng_state = rng_seed + 2;
    for (int v = 0; v < 4; v++) {
        bool ta = v & 1, tb = v & 2;
        struct shp s[2];
        char name[64];

        mm_shapes(s, 2, lead, 17, 24, 11, ta, tb, true);
        snprintf(name, sizeof name, "matmul tied W%s%s", ta ? " A^T" : "", tb ? " W^T" : "");
        mm_param_case(name, s, ta, tb);
        mm_shapes(s, 0, lead, 9, 64, 50, ta, tb, true);
        snprintf(name, sizeof name, "matmul tied W 2-d%s%s", ta ? " A^T" : "", tb ? " W^T" : "");
        mm_param_case(name, s, ta, tb);
    }
}

/* The 2-norm of the error on a large folded product (the elementwise check's atol
 * scales with the largest value; this one does not), and the same bits again from
 * buffers at other addresses (a recomputation's value lands elsewhere in the arena). */
static void test_matmul_bits(void)
{
    struct shp s[2] = {S3(4, 96, 200), S2(200, 130)};
    struct tk t;
    float *yr, *y1, *da1, *a2, *y2, *da2;
    int64_t ny, na;

    rng_state = rng_seed + 3;
    tk_init(&t, REMAT_OP_MATMUL, 2, s, NULL);
    fill_uniform(&t.in[0], -1, 1);
    fill_uniform(&t.in[1], -1, 1);
    fill_uniform(&t.op.dout, -1, 1);
    ny = kt_n(&t.op.out);
    na = kt_n(&t.in[0]);
    CHECK_OK(ref_forward(&t.op));
    yr = dup(t.op.out.data, ny);
    CHECK_OK(be->forward(ctx, &t.op));
    norm_check("matmul (4, 96, 200) x (200, 130)", "y", t.op.out.data, yr, ny);
    y1 = dup(t.op.out.data, ny);
    CHECK_OK(be->backward(ctx, &t.op));
    da1 = dup(t.din[0].data, na);

    /* A, y and dA 4 floats (16 bytes) further on */
    a2 = malloc(sizeof(float) * (size_t)(na + 4));
    y2 = calloc((size_t)(ny + 4), sizeof(float));
    da2 = calloc((size_t)(na + 4), sizeof(float));
    REMAT_ASSERT_TEST(a2 && y2 && da2);
    memcpy(a2 + 4, t.in[0].data, sizeof(float) * (size_t)na);
    {
        struct ktensor in[2] = {t.in[0], t.in[1]}, din[2] = {t.din[0], t.din[1]};
        struct kop op = t.op;

        in[0].data = a2 + 4;
        din[0].data = da2 + 4;
        din[1].data = NULL;
        op.in = in;
        op.din = din;
        op.out.data = y2 + 4;
        CHECK_OK(be->forward(ctx, &op));
        CHECK_OK(be->backward(ctx, &op));
    }
    compare("matmul at other addresses", "y", y2 + 4, y1, ny, EXACT);
    compare("matmul at other addresses", "dA", da2 + 4, da1, na, EXACT);
    free(a2);
    free(y2);
    free(da2);
    free(yr);
    free(y1);
    free(da1);
    tk_fini(&t);
}

/* ------------------------------------------------------------------ layer norm */

static void test_layer_norm(void)
{
    struct shp s[] = {S2(5, 17), S3(2, 3, 64), S3(4, 8, 768), S2(3, 1), {4, {2, 2, 3, 130}}};
    const char *names[] = {"layer_norm (5, 17)", "layer_norm (2, 3, 64)",
                           "layer_norm (4, 8, 768), threaded", "layer_norm (3, 1)",
                           "layer_norm (2, 2, 3, 130) eps 0.1"};

    rng_state = rng_seed + 4;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        cmp_case(names[i], REMAT_OP_LAYER_NORM, 1, &s[i],
                 i == 4 ? &(remat_attrs){.eps = 0.1f} : NULL, F_UNIFORM, EXACT, EXACT, false);
}

/* ------------------------------------------------------------------ softmax_last */

static void test_softmax_last(void)
{
    static const struct {
        const char *name;
        struct shp s;
        bool causal;
        float scale;
    } cs[] = {
        {"softmax_last (3, 17)", S2(3, 17), false, 0},
        {"softmax_last (1, 1)", S2(1, 1), false, 0},
        {"softmax_last (2, 3, 5, 7) causal", {4, {2, 3, 5, 7}}, true, 0},
        {"softmax_last (2, 7, 5) causal", S3(2, 7, 5), true, 0},
        {"softmax_last (2, 4, 64, 64) causal scale 0.125", {4, {2, 4, 64, 64}}, true, 0.125f},
        {"softmax_last (3, 33, 1000) scale 3", S3(3, 33, 1000), false, 3},
    };

    rng_state = rng_seed + 5;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        cmp_case(cs[i].name, REMAT_OP_SOFTMAX_LAST, 1, &cs[i].s,
                 &(remat_attrs){.causal = cs[i].causal, .scale = cs[i].scale}, F_UNIFORM, T_SM,
                 T_SM, false);
}

/* Large and special inputs: a row's large spread (exp underflows to 0), -inf (0), a
 * NaN (its row NaN, as the reference). */
static void test_softmax_special(void)
{
    struct shp s = S2(4, 40);
    struct tk t;
    float yr[160];

    tk_init(&t, REMAT_OP_SOFTMAX_LAST, 1, &s, &(remat_attrs){.scale = 2});
    rng_state = rng_seed + 6;
    fill_uniform(&t.in[0], -60, 60);
    t.in[0].data[5] = -INFINITY;
    t.in[0].data[47] = NAN;
    t.in[0].data[80] = 0;   /* row 2 sorted far below its max: exp(-2 * 100) */
    t.in[0].data[81] = 100;
    CHECK_OK(ref_forward(&t.op));
    memcpy(yr, t.op.out.data, sizeof yr);
    CHECK_OK(be->forward(ctx, &t.op));
    for (int i = 0; i < 160; i++) {
        float g = t.op.out.data[i];

        if (i >= 40 && i < 80)
            CHECK(isnan(g), "softmax_last special: y[%d] = %g, not NaN", i, g);
        else
            CHECK(fabs(g - yr[i]) <= 1e-5 * fabs(yr[i]) + 1e-7, "softmax_last special: "
                  "y[%d] = %.9g, reference %.9g", i, g, yr[i]);
    }
    CHECK(t.op.out.data[5] == 0 && t.op.out.data[80] == 0, "softmax_last special: %g, %g",
          t.op.out.data[5], t.op.out.data[80]);
    tk_fini(&t);
}

/* ------------------------------------------------------------------------ gelu */

/* Random inputs in [-1, 1] (cmp_case), then a wide range, [-12, 12], where the
 * exponentials under- and overflow, against the reference. */
static void test_gelu(void)
{
    struct shp s1 = S3(2, 5, 17), s2 = S2(64, 3072);

    rng_state = rng_seed + 7;
    for (int a = 0; a < 2; a++) {
        remat_attrs at = {.approximate = a == 1};
        struct tk t;
        float *yr, *dxr, *g0;
        int64_t n;
        const char *name = a ? "gelu tanh, wide" : "gelu erf, wide";

        cmp_case(a ? "gelu tanh (2, 5, 17)" : "gelu erf (2, 5, 17)", REMAT_OP_GELU, 1, &s1, &at,
                 F_UNIFORM, T_SM, T_SM, false);
        cmp_case(a ? "gelu tanh (64, 3072)" : "gelu erf (64, 3072)", REMAT_OP_GELU, 1, &s2, &at,
                 F_UNIFORM, T_SM, T_SM, false);
        tk_init(&t, REMAT_OP_GELU, 1, &s1, &at);
        n = kt_n(&t.in[0]);
        fill_uniform(&t.in[0], -12, 12);
        fill_uniform(&t.op.dout, -1, 1);
        fill_uniform(&t.din[0], -1, 1);
        g0 = dup(t.din[0].data, n);
        CHECK_OK(ref_forward(&t.op));
        CHECK_OK(ref_backward(&t.op));
        yr = dup(t.op.out.data, n);
        dxr = dup(t.din[0].data, n);
        memcpy(t.din[0].data, g0, sizeof(float) * (size_t)n);
        CHECK_OK(be->forward(ctx, &t.op));
        CHECK_OK(be->backward(ctx, &t.op));
        compare(name, "y", t.op.out.data, yr, n, T_SM);
        compare(name, "dx", t.din[0].data, dxr, n, T_SM);
        free(yr);
        free(dxr);
        free(g0);
        tk_fini(&t);
    }
}

/* ------------------------------------------------------------------ training */

/* A one-block transformer language model: embedding, layer norm, causal attention over
 * 4-d heads (the scores scaled), a GELU MLP, a final layer norm, and logits through the
 * embedding's table (tied: a parameter B, transposed, shared by the batches). The linear
 * layers take 2-d (tokens, features) views. */
static remat_graph *tiny_gpt(void)
{
    remat_graph *g = NULL;
    int32_t ids, e, e2, n, q, qh, s, p, a, at, r, m1, m2, h, y, lab, in[2];
    int64_t b = 2, t = 16, d = 32, heads = 2, v = 37;

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    ids = remat_graph_tokens(g, "ids", 2, (int64_t[]){b, t});
    e = remat_graph_add(g, REMAT_OP_EMBEDDING, &ids, 1,
                        &(remat_attrs){.vocab = v, .out_channels = d}, "wte");
    e2 = remat_graph_add(g, REMAT_OP_RESHAPE, &e, 1,
                         &(remat_attrs){.ndim = 2, .shape = {b * t, d}}, "tokens");
    n = remat_graph_add(g, REMAT_OP_LAYER_NORM, &e2, 1, NULL, "ln1");
    q = remat_graph_add(g, REMAT_OP_LINEAR, &n, 1, &(remat_attrs){.out_channels = d}, "q");
    qh = remat_graph_add(g, REMAT_OP_RESHAPE, &q, 1,
                         &(remat_attrs){.ndim = 4, .shape = {b, heads, t, d / heads}}, "qh");
    in[0] = in[1] = qh;
    s = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true}, "scores");
    p = remat_graph_add(g, REMAT_OP_SOFTMAX_LAST, &s, 1,
                        &(remat_attrs){.causal = true, .scale = 0.25f}, "probs");
    in[0] = p;
    a = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, NULL, "attend");
    at = remat_graph_add(g, REMAT_OP_RESHAPE, &a, 1,
                         &(remat_attrs){.ndim = 2, .shape = {b * t, d}}, "merge");
    in[0] = at;
    in[1] = e2;
    r = remat_graph_add(g, REMAT_OP_ADD, in, 2, NULL, "res");
    m1 = remat_graph_add(g, REMAT_OP_LINEAR, &r, 1, &(remat_attrs){.out_channels = 4 * d},
                         "fc");
    m2 = remat_graph_add(g, REMAT_OP_GELU, &m1, 1, NULL, "gelu");
    h = remat_graph_add(g, REMAT_OP_LINEAR, &m2, 1, &(remat_attrs){.out_channels = d}, "proj");
    h = remat_graph_add(g, REMAT_OP_LAYER_NORM, &h, 1, NULL, "lnf");
    h = remat_graph_add(g, REMAT_OP_RESHAPE, &h, 1,
                        &(remat_attrs){.ndim = 3, .shape = {b, t, d}}, "seq");
    in[0] = h;
    in[1] = remat_graph_param(g, e, 0);
    y = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true}, "logits");
    lab = remat_graph_tokens(g, "next", 2, (int64_t[]){b, t});
    in[0] = y;
    in[1] = lab;
    remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
    CHECK(remat_graph_status(g) == REMAT_OK, "tiny_gpt: %s", remat_errmsg());
    return g;
}

/* Plans g under s at its least budget and trains three steps on backend kind; the
 * trainer, its losses in loss[3], or NULL. */
static remat_trainer *train3(const remat_graph *g, const remat_tgraph *tg, remat_strategy s,
                             remat_backend_kind kind, double loss[3])
{
    remat_plan_opts po = {.strategy = s, .budget_min = true, .time_limit = 3};
    remat_train_opts to = remat_train_opts_default();
    remat_schedule *sched = NULL;
    remat_trainer *t = NULL;
    remat_status rc;

    to.backend = kind;
    to.threads = 2;
    rc = remat_plan(tg, &po, &sched, NULL);
    CHECK(rc == REMAT_OK, "tiny_gpt %s: plan: %s", remat_strategy_name(s), remat_errmsg());
    if (rc == REMAT_OK)
        rc = remat_trainer_new(g, tg, sched, &to, &t);
    CHECK(rc == REMAT_OK, "tiny_gpt %s: trainer: %s", remat_strategy_name(s), remat_errmsg());
    for (int i = 0; t && i < 3; i++)
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss[i]));
    remat_schedule_free(sched);
    return t;
}

static void test_train(void)
{
    static const remat_strategy ss[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_CHEN_SQRTN,
                                        REMAT_STRATEGY_APPROX_MC};
    remat_graph *g = tiny_gpt();
    remat_tgraph *tg = NULL;
    remat_trainer *base = NULL, *ref;
    double lb[3] = {0}, lr[3] = {0}, l[3];

    if (remat_graph_status(g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "tiny_gpt: %s", remat_errmsg());
        remat_graph_free(g);
        return;
    }
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        remat_trainer *t = train3(g, tg, ss[i], REMAT_BACKEND_CPU, i ? l : lb);

        if (t && base) {
            CHECK(remat_trainer_param_checksum(t) == remat_trainer_param_checksum(base),
                  "tiny_gpt %s: other parameter bits than none", remat_strategy_name(ss[i]));
            CHECK(!memcmp(l, lb, sizeof l), "tiny_gpt %s: other losses than none",
                  remat_strategy_name(ss[i]));
        }
        if (!base)
            base = t;
        else
            remat_trainer_free(t);
    }
    ref = train3(g, tg, REMAT_STRATEGY_NONE, REMAT_BACKEND_REF, lr);
    for (int i = 0; i < 3; i++)
        CHECK(fabs(lb[i] - lr[i]) <= 1e-4 * fabs(lr[i]), "tiny_gpt step %d: loss %.9g on cpu, "
              "%.9g on the reference", i, lb[i], lr[i]);
    printf("  tiny_gpt: losses %.6f %.6f %.6f (cpu), %.6f %.6f %.6f (reference)\n", lb[0],
           lb[1], lb[2], lr[0], lr[1], lr[2]);
    CHECK(lb[2] < lb[0], "tiny_gpt: the loss did not fall (%g -> %g)", lb[0], lb[2]);
    remat_trainer_free(ref);
    remat_trainer_free(base);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    if (!cpu_cmp_setup())
        return 1;
    RUN(test_matmul_small);
    RUN(test_matmul_large);
    RUN(test_matmul_param);
    RUN(test_matmul_bits);
    RUN(test_layer_norm);
    RUN(test_softmax_last);
    RUN(test_softmax_special);
    RUN(test_gelu);
    RUN(test_train);
    be->destroy(ctx);
    return harness_end();
}
