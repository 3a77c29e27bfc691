/*
 * test_adamw.c - the AdamW update (exec/params.c) and its resident state:
 *   hand_worked      two trainer steps on a tiny linear + softmax_ce graph; the test
 *                    reads each step's gradients and applies torch.optim.AdamW's formula
 *                    itself (its own code, float32 in PyTorch's order): bit-equal
 *   against_pytorch  tests/data/adamw.fix (tools/make_adamw_fixture.py): PyTorch's
 *                    AdamW on fixed gradients, 3 steps, 3 settings, within 1e-6 relative
 *   resident         AdamW's resident bytes are SGD's plus 4 bytes per parameter, in the
 *                    training graph and in the trainer's block
 *   refused          a trainer whose optimizer is not its training graph's, bad betas,
 *                    eps or optimizer ids
 */
#include "fixture_util.h"

#include "exec/exec.h"

#define N_BATCH 2
#define N_IN 3
#define N_OUT 4

static const float x_batch[N_BATCH * N_IN] = {0.5f, -1.25f, 2.0f, -0.75f, 0.25f, 1.5f};
static const int32_t y_batch[N_BATCH] = {1, 3};

/* x: (2, 3) -> linear "fc" (4, bias) -> softmax_ce with labels (2). */
static remat_graph *tiny_graph(void)
{
    int64_t shape[2] = {N_BATCH, N_IN};
    remat_attrs lin = {.out_channels = N_OUT, .bias = true};
    remat_graph *g = NULL;
    int32_t x, y, fc, loss;

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    x = remat_graph_input(g, "x", 2, shape);
    y = remat_graph_labels(g, "y", N_BATCH);
    fc = remat_graph_add(g, REMAT_OP_LINEAR, &x, 1, &lin, "fc");
    loss = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, (int32_t[]){fc, y}, 2, NULL, "loss");
    REMAT_ASSERT_TEST(remat_graph_set_loss(g, loss) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_graph_status(g) == REMAT_OK);
    return g;
}

static remat_tgraph *tiny_tgraph(const remat_graph *g, remat_optimizer opt)
{
    remat_tgraph_opts to = {.optimizer = opt};
    remat_tgraph *tg = NULL;

    REMAT_ASSERT_TEST(remat_tgraph_from_graph(g, &to, &tg) == REMAT_OK);
    return tg;
}

static remat_schedule *plan_none(const remat_tgraph *tg)
{
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_schedule *s = NULL;

    REMAT_ASSERT_TEST(remat_plan(tg, &po, &s, NULL) == REMAT_OK);
    return s;
}

/* ------------------------------------------------------------ hand-worked */

/* The test's own AdamW state for one tensor of at most 16 elements. */
struct ref_state {
    float m[16], v[16];
};

/*
 * torch.optim.AdamW, written out here independently of params.c: the scalars in double
 * as Python forms them from the hyperparameters, then per element in float32 in the
 * order of PyTorch's tensor ops (mul_, mul_ + add_, mul_ + addcmul_, sqrt / + eps,
 * addcdiv_). Built with -std=c11 (no contraction), so this is the bits PyTorch's scalar
 * loop gives.
 */
static void ref_adamw(float *w, const float *g, struct ref_state *st, int64_t n, int t,
                      double lr, double wd, double b1, double b2, double eps)
{
    float decay = (float)(1 - lr * wd);
    float step_size = (float)(lr / (1 - pow(b1, t)));
    float bc2 = (float)sqrt(1 - pow(b2, t));

    for (int64_t i = 0; i < n; i++) {
        float denom;

        w[i] = w[i] * decay;
        st->m[i] = st->m[i] * (float)b1 + (float)(1 - b1) * g[i];
        st->v[i] = st->v[i] * (float)b2 + ((float)(1 - b2) * g[i]) * g[i];
        denom = sqrtf(st->v[i]) / bc2 + (float)eps;
        w[i] = w[i] + (-step_size * st->m[i]) / denom; /* addcdiv: value * t1 / t2 */
    }
}

/* Two steps of the trainer against ref_adamw. o's zero betas and eps mean the defaults,
 * which the reference takes as the numbers 0.9, 0.999 and 1e-8 (rounded to float, as
 * the options hold floats). */
static void hand_case(const char *ctx, const remat_train_opts *o)
{
    static const char *const names[2] = {"fc.weight", "fc.bias"};
    const float *inputs[1] = {x_batch};
    remat_graph *g = tiny_graph();
    remat_tgraph *tg = tiny_tgraph(g, REMAT_OPTIMIZER_ADAMW);
    remat_schedule *s = plan_none(tg);
    remat_trainer *t = NULL;
    struct ref_state st[2] = {{{0}, {0}}, {{0}, {0}}};
    double b1 = o->beta1 ? o->beta1 : 0.9f, b2 = o->beta2 ? o->beta2 : 0.999f;
    double eps = o->eps ? o->eps : 1e-8f;

    CHECK_OK(remat_trainer_new(g, tg, s, o, &t));
    for (int step = 1; t && step <= 2; step++) {
        float want[2][16], before[2][16];
        int64_t n[2];
        double loss_g = 0, loss_s = 0;

        CHECK_OK(remat_trainer_gradients(t, inputs, y_batch, &loss_g));
        for (int k = 0; k < 2; k++) {
            float *w, *gr;

            CHECK_OK(remat_trainer_param(t, names[k], &w, &gr, &n[k]));
            REMAT_ASSERT_TEST(n[k] <= 16 && gr);
            memcpy(before[k], w, sizeof(float) * (size_t)n[k]);
            memcpy(want[k], w, sizeof(float) * (size_t)n[k]);
            ref_adamw(want[k], gr, &st[k], n[k], step, o->lr, o->weight_decay, b1, b2, eps);
        }
        CHECK_OK(remat_trainer_step(t, inputs, y_batch, &loss_s));
        CHECK(loss_s == loss_g, "%s step %d: the step's loss %.9g, the gradients' %.9g", ctx,
              step, loss_s, loss_g);
        for (int k = 0; k < 2; k++) {
            float *w;
            int64_t moved = 0;

            CHECK_OK(remat_trainer_param(t, names[k], &w, NULL, NULL));
            for (int64_t i = 0; i < n[k]; i++) {
                CHECK(w[i] == want[k][i], "%s step %d: %s[%lld] = %.9g, by hand %.9g", ctx,
                      step, names[k], (long long)i, w[i], want[k][i]);
                moved += w[i] != before[k][i];
            }
            CHECK(moved == n[k], "%s step %d: %lld of %lld elements of %s moved", ctx, step,
                  (long long)moved, (long long)n[k], names[k]);
        }
    }
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void hand_worked(void)
{
    remat_train_opts o = remat_train_opts_default();

    o.optimizer = REMAT_OPTIMIZER_ADAMW;
    o.lr = 1e-3f; /* PyTorch's defaults, the betas and eps left 0 */
    o.weight_decay = 1e-2f;
    hand_case("defaults", &o);
    o.lr = 0.05f;
    o.weight_decay = 0.1f;
    o.beta1 = 0.8f;
    o.beta2 = 0.95f;
    o.eps = 1e-3f; /* large enough to change the denominators visibly */
    hand_case("custom", &o);
}

/* -------------------------------------------------------- against PyTorch */

#define FIX_MAX_N 64

struct fix_case {
    char name[32];
    remat_train_opts o;
    int n, steps;
};

/* Reads "KEY X1 .. Xn" (KEY "w0", or "g T" / "w T" with T = step) into x; false when
 * the line is not that. */
static bool read_vec(FILE *f, const char *key, int step, float *x, int n)
{
    char k[8];
    int t = step;

    if (fscanf(f, " %7s", k) != 1 || strcmp(k, key))
        return false;
    if (step && (fscanf(f, " %d", &t) != 1 || t != step))
        return false;
    for (int i = 0; i < n; i++)
        if (fscanf(f, " %f", &x[i]) != 1)
            return false;
    return true;
}

/* One case: its header, then w0 and per step g, w; runs AdamW alongside. 1 when a case
 * was read, 0 at the end of the file, -1 on a malformed one. */
static int fix_case(FILE *f, double *worst)
{
    struct fix_case c = {.o = remat_train_opts_default()};
    float w[FIX_MAX_N], m[FIX_MAX_N] = {0}, v[FIX_MAX_N] = {0}, g[FIX_MAX_N], want[FIX_MAX_N];
    int r = fscanf(f, " case %31s lr %f wd %f beta1 %f beta2 %f eps %f n %d steps %d",
                   c.name, &c.o.lr, &c.o.weight_decay, &c.o.beta1, &c.o.beta2, &c.o.eps, &c.n,
                   &c.steps);

    if (r == EOF)
        return 0;
    if (r != 8 || c.n < 1 || c.n > FIX_MAX_N || c.steps < 1 || !read_vec(f, "w0", 0, w, c.n))
        return -1;
    c.o.optimizer = REMAT_OPTIMIZER_ADAMW;
    for (int t = 1; t <= c.steps; t++) {
        struct adamw_coef k = adamw_coef(&c.o, t);
        char what[32];

        if (!read_vec(f, "g", t, g, c.n) || !read_vec(f, "w", t, want, c.n))
            return -1;
        adamw_update(w, g, m, v, (size_t)c.n, &k);
        snprintf(what, sizeof what, "w step %d", t);
        *worst = fmax(*worst, check_vals(c.name, what, w, want, c.n, 1e-6, 0));
    }
    printf("  %s: %d steps of %d elements\n", c.name, c.steps, c.n);
    return 1;
}

/* Skips the '#' comment lines at the top. */
static void skip_comments(FILE *f)
{
    int ch;

    while ((ch = fgetc(f)) == '#')
        while ((ch = fgetc(f)) != EOF && ch != '\n')
            ;
    if (ch != EOF)
        ungetc(ch, f);
}

static void against_pytorch(void)
{
    FILE *f = fopen(DATA_DIR "adamw.fix", "r");
    double worst = 0;
    int n = 0, r;

    if (!f) {
        SKIP("no %s (run from the repository root; /usr/bin/python3 "
             "tools/make_adamw_fixture.py writes it)", DATA_DIR "adamw.fix");
        return;
    }
    skip_comments(f);
    while ((r = fix_case(f, &worst)) > 0)
        n++;
    fclose(f);
    CHECK(r == 0, "%s: case %d is malformed", DATA_DIR "adamw.fix", n + 1);
    CHECK(n >= 3, "%s: %d cases, expected 3", DATA_DIR "adamw.fix", n);
    printf("  worst error / tolerance (1e-6 relative): %.3g\n", worst);
}

/* ---------------------------------------------------------------- resident */

static void resident(void)
{
    remat_graph *g = tiny_graph();
    remat_tgraph *tg[2] = {tiny_tgraph(g, REMAT_OPTIMIZER_SGD),
                           tiny_tgraph(g, REMAT_OPTIMIZER_ADAMW)};
    remat_tgraph_opts bad = {.optimizer = REMAT_OPTIMIZER_COUNT};
    remat_tgraph *none = NULL;
    int64_t np = remat_graph_n_params(g);
    size_t sgd = remat_tgraph_resident_bytes(tg[0]);
    size_t adamw = remat_tgraph_resident_bytes(tg[1]);

    /* by hand: fc has a 4x3 weight and a bias of 4 */
    CHECK_I64(np, N_OUT * N_IN + N_OUT);
    CHECK(adamw - sgd == 4 * (size_t)np, "AdamW %zu - SGD %zu resident bytes = %zu, "
          "expected 4 x %lld parameters", adamw, sgd, adamw - sgd, (long long)np);
    /* SGD: value, gradient, momentum; plus x (2x3 floats) and y (2 int32) */
    CHECK(sgd == (size_t)(3 * np + N_BATCH * N_IN + N_BATCH) * 4, "SGD: %zu resident bytes",
          sgd);
    for (int k = 0; k < 2; k++) {
        remat_train_opts o = remat_train_opts_default();
        remat_schedule *s = plan_none(tg[k]);
        remat_trainer *t = NULL;
        remat_train_stats ts;

        o.optimizer = k ? REMAT_OPTIMIZER_ADAMW : REMAT_OPTIMIZER_SGD;
        CHECK_OK(remat_trainer_new(g, tg[k], s, &o, &t));
        if (t) {
            remat_trainer_stats(t, &ts);
            CHECK(ts.resident_bytes == remat_tgraph_resident_bytes(tg[k]), "%s: the trainer "
                  "holds %zu resident bytes, the training graph counts %zu",
                  k ? "adamw" : "sgd", ts.resident_bytes, remat_tgraph_resident_bytes(tg[k]));
        }
        remat_trainer_free(t);
        remat_schedule_free(s);
    }
    CHECK(remat_tgraph_from_graph(g, &bad, &none) == REMAT_ERR_ARG && !none,
          "an unknown optimizer in remat_tgraph_opts is refused");
    remat_tgraph_free(tg[0]);
    remat_tgraph_free(tg[1]);
    remat_graph_free(g);
}

/* ----------------------------------------------------------------- refused */

/* Expects remat_trainer_new to refuse o on tg with REMAT_ERR_ARG. */
static void expect_refused(const char *what, const remat_graph *g, const remat_tgraph *tg,
                           const remat_schedule *s, const remat_train_opts *o)
{
    remat_trainer *t = (remat_trainer *)&t; /* overwritten with NULL on failure */
    remat_status st = remat_trainer_new(g, tg, s, o, &t);

    CHECK(st == REMAT_ERR_ARG && !t, "%s: %s (%s), expected REMAT_ERR_ARG", what,
          remat_status_name(st), st ? remat_errmsg() : "accepted");
    if (st == REMAT_OK)
        remat_trainer_free(t);
    else if (st == REMAT_ERR_ARG)
        printf("  %s: %s\n", what, remat_errmsg());
}

static void refused(void)
{
    remat_graph *g = tiny_graph();
    remat_tgraph *sgd = tiny_tgraph(g, REMAT_OPTIMIZER_SGD);
    remat_tgraph *adamw = tiny_tgraph(g, REMAT_OPTIMIZER_ADAMW);
    remat_schedule *s_sgd = plan_none(sgd), *s_adamw = plan_none(adamw);
    remat_train_opts o = remat_train_opts_default();

    o.optimizer = REMAT_OPTIMIZER_ADAMW;
    expect_refused("adamw trainer, sgd graph", g, sgd, s_sgd, &o);
    o.optimizer = REMAT_OPTIMIZER_SGD;
    expect_refused("sgd trainer, adamw graph", g, adamw, s_adamw, &o);
    o.optimizer = REMAT_OPTIMIZER_COUNT;
    expect_refused("unknown optimizer", g, adamw, s_adamw, &o);
    o.optimizer = REMAT_OPTIMIZER_ADAMW;
    o.beta2 = 1.0f;
    expect_refused("beta2 1", g, adamw, s_adamw, &o);
    o.beta2 = 0;
    o.beta1 = -0.5f;
    expect_refused("beta1 -0.5", g, adamw, s_adamw, &o);
    o.beta1 = 0;
    o.eps = NAN;
    expect_refused("eps NaN", g, adamw, s_adamw, &o);
    remat_schedule_free(s_sgd);
    remat_schedule_free(s_adamw);
    remat_tgraph_free(sgd);
    remat_tgraph_free(adamw);
    remat_graph_free(g);
}

int main(void)
{
    RUN(hand_worked);
    RUN(against_pytorch);
    RUN(resident);
    RUN(refused);
    return harness_end();
}
