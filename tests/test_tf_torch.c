/*
 * test_tf_torch.c - the zoo's transformers against PyTorch: a reduced GPT-2 and a
 * two-layer BERT encoder (tools/make_tf_fixture.py writes the models in plain PyTorch,
 * computes in float64 and records tests/data/tf_grads.fix; its docstring has the format).
 *
 * - Gradients: each model built by remat_zoo_build with the fixture's configuration and
 *   no dropout, planned with `none`, on the ref backend and on the cpu backend (two
 *   threads; skipped where it is not built); the fixture's float32 weights copied in by
 *   name, its tokens fed by name through remat_trainer_gradients_tokens. Every parameter
 *   of the graph must be in the fixture with its shape, and every fixture parameter in
 *   the graph. Tolerances: the loss within 1e-5 relative; each parameter's gradient
 *   within 1e-4 norm-relative, ||g_remat - g_torch|| / ||g_torch|| (remat computes in
 *   float32: its rounding is about 1e-6 of a norm; a missed term of a gradient is of the
 *   order of the whole), and the whole gradient (all parameters as one vector) within
 *   1e-4 of its norm. The key biases' gradients are 0 in exact arithmetic (softmax
 *   ignores a constant added to a row of scores; PyTorch's are about 1e-17): theirs is
 *   taken relative to the whole gradient's norm. The worst error per model is printed.
 *   As a control, one weight nudged by 1e-2 must make the comparison fail.
 * - Plans: under none, blocks, selective, approx-mc and hybrid (least budgets, the
 *   backend's kernels fixed per op so that every plan trains to the same bits), three
 *   AdamW steps from the fixture's weights and tokens: the first loss as the fixture's,
 *   the parameters bit-identical to none's (remat_trainer_param_checksum), and the
 *   measured activation peak equal to the planned one, on ref and on cpu.
 *
 * Paths are relative to the repository root; without the fixture the tests are skipped.
 */
#include "harness.h"

#include "graph/graph.h"

#define FIX_PATH "tests/data/tf_grads.fix"
#define LOSS_TOL 1e-5
#define GRAD_TOL 1e-4
#define ZERO_FRAC 1e-9
#define MAX_TOKENS 8

/* ------------------------------------------------------------ the fixture */

struct tf_shape {
    char *name;
    int ndim;
    int64_t dims[4];
    int64_t n; /* elements */
};

struct tf_token {
    struct tf_shape s;
    int32_t *data;
};

struct tf_param {
    struct tf_shape s;
    float *w;     /* the weights, float32 */
    double *grad; /* PyTorch's float64 gradient */
};

struct tf_model {
    char *name;
    int64_t cfg[6]; /* batch, layers, heads, hidden, seq_len, vocab */
    double loss;
    uint32_t n_tok, n_par;
    struct tf_token *tok;
    struct tf_param *par;
};

struct tf_fix {
    uint32_t n;
    struct tf_model *m;
};

static struct tf_fix fx;
static bool fx_read, fx_ok;

static bool rd(FILE *f, void *p, size_t n)
{
    return fread(p, 1, n, f) == n;
}

/* A string: u32 length (1 to 255), its bytes. */
static bool rd_str(FILE *f, char **s)
{
    uint32_t len;

    return rd(f, &len, 4) && len > 0 && len < 256 && (*s = calloc(len + 1, 1)) &&
           rd(f, *s, len);
}

/* A name and a shape of 1 to 4 dimensions, each 1 to 2^20, at most 2^22 elements. */
static bool rd_shape(FILE *f, struct tf_shape *s)
{
    uint32_t nd;

    if (!rd_str(f, &s->name) || !rd(f, &nd, 4) || nd < 1 || nd > 4 ||
        !rd(f, s->dims, 8 * (size_t)nd))
        return false;
    s->ndim = (int)nd;
    s->n = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if (s->dims[d] < 1 || s->dims[d] > (1 << 20))
            return false;
        s->n *= s->dims[d];
    }
    return s->n <= (1 << 22);
}

static bool rd_model(FILE *f, struct tf_model *m)
{
    if (!rd_str(f, &m->name) || !rd(f, m->cfg, sizeof m->cfg) || !rd(f, &m->loss, 8) ||
        !rd(f, &m->n_tok, 4) || m->n_tok > MAX_TOKENS ||
        !(m->tok = calloc(m->n_tok ? m->n_tok : 1, sizeof *m->tok)))
        return false;
    for (uint32_t i = 0; i < m->n_tok; i++) {
        struct tf_token *t = &m->tok[i];

        if (!rd_shape(f, &t->s) || !(t->data = malloc(sizeof *t->data * (size_t)t->s.n)) ||
            !rd(f, t->data, sizeof *t->data * (size_t)t->s.n))
            return false;
    }
    if (!rd(f, &m->n_par, 4) || m->n_par > 10000 ||
        !(m->par = calloc(m->n_par ? m->n_par : 1, sizeof *m->par)))
        return false;
    for (uint32_t i = 0; i < m->n_par; i++) {
        struct tf_param *p = &m->par[i];

        if (!rd_shape(f, &p->s) || !(p->w = malloc(sizeof *p->w * (size_t)p->s.n)) ||
            !(p->grad = malloc(sizeof *p->grad * (size_t)p->s.n)) ||
            !rd(f, p->w, sizeof *p->w * (size_t)p->s.n) ||
            !rd(f, p->grad, sizeof *p->grad * (size_t)p->s.n))
            return false;
    }
    return true;
}

static void fix_free(void)
{
    for (uint32_t i = 0; fx.m && i < fx.n; i++) {
        struct tf_model *m = &fx.m[i];

        for (uint32_t k = 0; m->tok && k < m->n_tok; k++) {
            free(m->tok[k].s.name);
            free(m->tok[k].data);
        }
        for (uint32_t k = 0; m->par && k < m->n_par; k++) {
            free(m->par[k].s.name);
            free(m->par[k].w);
            free(m->par[k].grad);
        }
        free(m->tok);
        free(m->par);
        free(m->name);
    }
    free(fx.m);
    memset(&fx, 0, sizeof fx);
}

/* Reads the fixture once; false when it is missing (message printed) or malformed
 * (a failure). */
static bool fix_load(void)
{
    FILE *f;
    char magic[8];
    uint32_t version, n;
    bool ok;

    if (fx_read)
        return fx_ok;
    fx_read = true;
    if (!(f = fopen(FIX_PATH, "rb")))
        return false;
    ok = rd(f, magic, 8) && !memcmp(magic, "REMATTFG", 8) && rd(f, &version, 4) &&
         version == 1 && rd(f, &n, 4) && n > 0 && n < 16 && (fx.m = calloc(n, sizeof *fx.m));
    for (uint32_t i = 0; ok && i < n; i++) {
        fx.n = i + 1;
        ok = rd_model(f, &fx.m[i]);
    }
    ok = ok && fgetc(f) == EOF;
    fclose(f);
    REMAT_ASSERT_TEST(ok); /* a malformed fixture: regenerate it */
    fx_ok = ok;
    return ok;
}

/* The fixture's model by zoo name; NULL (the test skipped or failed) when absent. */
static const struct tf_model *fix_model(const char *name)
{
    if (!fix_load()) {
        SKIP("no %s (run /usr/bin/python3 tools/make_tf_fixture.py)", FIX_PATH);
        return NULL;
    }
    for (uint32_t i = 0; i < fx.n; i++)
        if (!strcmp(fx.m[i].name, name))
            return &fx.m[i];
    CHECK(false, "%s: no model '%s'", FIX_PATH, name);
    return NULL;
}

static const struct tf_param *fix_param(const struct tf_model *m, const char *name)
{
    for (uint32_t i = 0; i < m->n_par; i++)
        if (!strcmp(m->par[i].s.name, name))
            return &m->par[i];
    return NULL;
}

/* ------------------------------------------------------ remat's side */

static remat_status build(const struct tf_model *m, remat_optimizer opt, remat_graph **g,
                          remat_tgraph **tg)
{
    remat_zoo_opts zo = {.batch = m->cfg[0], .layers = m->cfg[1], .heads = m->cfg[2],
                         .hidden = m->cfg[3], .seq_len = m->cfg[4], .vocab = m->cfg[5],
                         .dropout = -1};
    remat_tgraph_opts to = {.optimizer = opt};
    remat_status st = remat_zoo_build(m->name, &zo, NULL, g);

    return st ? st : remat_tgraph_from_graph(*g, &to, tg);
}

/* Every parameter of g is in the fixture with its shape, and every fixture parameter
 * in g. */
static bool names_match(const remat_graph *g, const struct tf_model *m, const char *ctx)
{
    uint32_t n_graph = 0;
    bool ok = true;

    for (int32_t v = 0; v < remat_graph_n_values(g); v++) {
        const struct gvalue *gv = graph_value(g, v);
        const struct tf_param *p;

        if (gv->kind != VK_PARAM)
            continue;
        n_graph++;
        p = fix_param(m, gv->name);
        CHECK_OR(p, ok = false; continue, "%s: parameter '%s' is not in the fixture", ctx,
                 gv->name);
        CHECK_OR(p->s.ndim == gv->ndim &&
                     !memcmp(p->s.dims, gv->shape, sizeof(int64_t) * (size_t)gv->ndim),
                 ok = false, "%s: '%s' has another shape in the fixture", ctx, gv->name);
    }
    /* the fixture's names are distinct (a Python dict's keys) */
    CHECK_OR(n_graph == m->n_par, ok = false, "%s: the graph has %u parameters, the fixture "
             "%u", ctx, n_graph, m->n_par);
    return ok;
}

/* The fixture's token arrays in g's order, matched by name; positions must hold
 * 0 .. n-1 (what remat fills in). */
static bool token_arrays(const remat_graph *g, const struct tf_model *m,
                         const int32_t *arrays[MAX_TOKENS], const char *ctx)
{
    remat_token_value tv[MAX_TOKENS];
    int32_t n = remat_graph_token_values(g, tv, MAX_TOKENS);
    bool ok = n == (int32_t)m->n_tok;

    CHECK(ok, "%s: %d token values in the graph, %u in the fixture", ctx, n, m->n_tok);
    for (int32_t i = 0; ok && i < n; i++) {
        const struct tf_token *t = NULL;
        int64_t shape[4], numel = 1;
        int nd = remat_graph_value_shape(g, tv[i].value, shape);

        for (uint32_t k = 0; k < m->n_tok; k++)
            t = !strcmp(m->tok[k].s.name, tv[i].name) ? &m->tok[k] : t;
        for (int d = 0; d < nd; d++)
            numel *= shape[d];
        CHECK_OR(t && t->s.n == numel, ok = false, "%s: token value '%s' missing from the "
                 "fixture or of another size", ctx, tv[i].name);
        for (int64_t k = 0; ok && tv[i].role == REMAT_TOKEN_POSITIONS && k < numel; k++)
            CHECK_OR(t->data[k] == (int32_t)(k % shape[nd - 1]), ok = false, "%s: %s[%lld] "
                     "= %d", ctx, tv[i].name, (long long)k, (int)t->data[k]);
        arrays[i] = ok ? t->data : NULL;
    }
    return ok;
}

/* Copies every fixture weight into t by name. */
static bool load_weights(remat_trainer *t, const struct tf_model *m, const char *ctx)
{
    for (uint32_t i = 0; i < m->n_par; i++) {
        const struct tf_param *p = &m->par[i];
        float *data;
        int64_t n = 0;

        CHECK_OR(remat_trainer_param(t, p->s.name, &data, NULL, &n) == REMAT_OK &&
                     n == p->s.n,
                 return false, "%s: '%s': %s (%lld elements)", ctx, p->s.name, remat_errmsg(),
                 (long long)n);
        memcpy(data, p->w, sizeof *data * (size_t)n);
    }
    return true;
}

/* The training options: backend b (cpu: two threads), AdamW at lr 1e-3 when asked. */
static remat_train_opts train_opts(remat_backend_kind b, bool adamw)
{
    remat_train_opts o = remat_train_opts_default();

    o.backend = b;
    o.threads = 2;
    if (adamw) {
        o.optimizer = REMAT_OPTIMIZER_ADAMW;
        o.lr = 1e-3f;
    }
    return o;
}

/* A trainer of s on o's backend; false with the test skipped when the backend is not
 * in this build. */
static bool make_trainer(const remat_graph *g, const remat_tgraph *tg,
                         const remat_schedule *s, const remat_train_opts *o,
                         remat_trainer **t, const char *ctx)
{
    remat_status st = remat_trainer_new(g, tg, s, o, t);

    if (st == REMAT_ERR_UNSUPPORTED && o->backend != REMAT_BACKEND_REF) {
        SKIP("%s: %s", ctx, remat_errmsg());
        return false;
    }
    CHECK(st == REMAT_OK, "%s: %s", ctx, remat_errmsg());
    return st == REMAT_OK;
}

/* ------------------------------------------------------------ gradients */

/* The norm of PyTorch's whole gradient (every parameter's entries in one vector). */
static double fix_grad_norm(const struct tf_model *m)
{
    double sum = 0;

    for (uint32_t i = 0; i < m->n_par; i++)
        for (int64_t k = 0; k < m->par[i].s.n; k++)
            sum += m->par[i].grad[k] * m->par[i].grad[k];
    return sqrt(sum);
}

/* The worst norm-relative gradient error over the parameters, checking each against
 * GRAD_TOL when check is set; its name in *worst_name, the whole gradient's error in
 * *whole. A parameter whose gradient is 0 in exact arithmetic (PyTorch's norm below
 * ZERO_FRAC of the whole's: the key bias, since softmax ignores a constant added to a
 * row of scores) has its error taken relative to the whole gradient's norm. */
static double grad_errors(remat_trainer *t, const struct tf_model *m, const char *ctx,
                          bool check, const char **worst_name, double *whole)
{
    double worst = 0, total = fix_grad_norm(m), all = 0;

    for (uint32_t i = 0; i < m->n_par; i++) {
        const struct tf_param *p = &m->par[i];
        float *grad = NULL;
        double diff = 0, norm = 0, err;

        if (remat_trainer_param(t, p->s.name, NULL, &grad, NULL) || !grad) {
            CHECK(false, "%s: no gradient of '%s'", ctx, p->s.name);
            continue;
        }
        for (int64_t k = 0; k < p->s.n; k++) {
            double d = (double)grad[k] - p->grad[k];

            diff += d * d;
            norm += p->grad[k] * p->grad[k];
        }
        all += diff;
        norm = sqrt(norm);
        err = sqrt(diff) / (norm > ZERO_FRAC * total ? norm : total);
        if (check)
            CHECK(err <= GRAD_TOL, "%s: '%s': gradient error %.3e (norm-relative; PyTorch's "
                  "norm %.4g)", ctx, p->s.name, err, norm);
        if (!(err <= worst)) { /* NaN is the worst */
            worst = err;
            *worst_name = p->s.name;
        }
    }
    *whole = sqrt(all) / total;
    return worst;
}

/* One weight nudged by 1e-2 must show in the gradients: the comparison can fail. */
static void control(remat_trainer *t, const struct tf_model *m, const int32_t **arrays,
                    const char *ctx)
{
    const struct tf_param *p = &m->par[m->n_par - 1];
    const char *name = "";
    float *data;
    double loss, err, whole;

    REMAT_ASSERT_TEST(remat_trainer_param(t, p->s.name, &data, NULL, NULL) == REMAT_OK);
    data[0] += 1e-2f;
    CHECK_OK(remat_trainer_gradients_tokens(t, arrays, &loss));
    err = grad_errors(t, m, ctx, false, &name, &whole);
    data[0] = p->w[0];
    printf("  %s: control, %s[0] + 0.01: worst error %.2e (%s)\n", ctx, p->s.name, err, name);
    CHECK(err > GRAD_TOL, "%s: a nudged weight went unnoticed (%.2e)", ctx, err);
}

static void grads_case(const char *model, remat_backend_kind b)
{
    const struct tf_model *m = fix_model(model);
    remat_train_opts o = train_opts(b, false);
    const int32_t *arrays[MAX_TOKENS] = {NULL};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    const char *worst_name = "";
    char ctx[64];
    double loss = 0, worst, whole;

    snprintf(ctx, sizeof ctx, "%s on %s", model, remat_backend_name(b));
    if (!m)
        return;
    if (build(m, REMAT_OPTIMIZER_SGD, &g, &tg) || remat_plan_none(tg, &s)) {
        CHECK(false, "%s: %s", ctx, remat_errmsg());
        goto out;
    }
    if (!names_match(g, m, ctx) || !token_arrays(g, m, arrays, ctx) ||
        !make_trainer(g, tg, s, &o, &t, ctx) || !load_weights(t, m, ctx))
        goto out;
    CHECK_OK(remat_trainer_gradients_tokens(t, arrays, &loss));
    CHECK(fabs(loss - m->loss) <= LOSS_TOL * fabs(m->loss), "%s: loss %.9g, PyTorch %.9g",
          ctx, loss, m->loss);
    worst = grad_errors(t, m, ctx, true, &worst_name, &whole);
    CHECK(whole <= GRAD_TOL, "%s: whole gradient error %.3e", ctx, whole);
    printf("  %s: loss %.7f (PyTorch %.7f, relative error %.1e); gradient error: whole "
           "%.2e, worst of %u parameters %.2e (%s)\n", ctx, loss, m->loss,
           fabs(loss - m->loss) / m->loss, whole, m->n_par, worst, worst_name);
    control(t, m, arrays, ctx);
out:
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* ---------------------------------------------------------------- plans */

/* Three AdamW steps of m under strategy strat; the trainer, or NULL after a failure. */
static remat_trainer *train3(const remat_graph *g, const remat_tgraph *tg,
                             const struct tf_model *m, const remat_algos *algos,
                             remat_strategy strat, const remat_train_opts *o,
                             remat_schedule **s, const char *ctx)
{
    remat_plan_opts po = {.strategy = strat, .budget_min = true, .algos = algos,
                          .reproducible = true};
    const int32_t *arrays[MAX_TOKENS] = {NULL};
    remat_trainer *t = NULL;
    remat_train_stats st;
    double loss;

    if (remat_plan(tg, &po, s, NULL)) {
        CHECK(false, "%s %s: %s", ctx, remat_strategy_name(strat), remat_errmsg());
        return NULL;
    }
    if (!token_arrays(g, m, arrays, ctx) || !make_trainer(g, tg, *s, o, &t, ctx) ||
        !load_weights(t, m, ctx)) {
        remat_trainer_free(t);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        CHECK_OK(remat_trainer_step_tokens(t, arrays, &loss));
        if (i == 0)
            CHECK(fabs(loss - m->loss) <= LOSS_TOL * fabs(m->loss), "%s %s: first loss %.9g, "
                  "PyTorch %.9g", ctx, remat_strategy_name(strat), loss, m->loss);
    }
    remat_trainer_stats(t, &st);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "%s %s: measured peak %zu, "
          "planned %zu", ctx, remat_strategy_name(strat), st.measured_peak_bytes,
          st.planned_peak_bytes);
    printf("  %s %-9s peak %7zu bytes, checksum %016" PRIx64 "\n", ctx,
           remat_strategy_name(strat), st.planned_peak_bytes, remat_trainer_param_checksum(t));
    return t;
}

static void plans_case(const char *model, remat_backend_kind b)
{
    static const remat_strategy ss[] = {
        REMAT_STRATEGY_NONE, REMAT_STRATEGY_BLOCKS, REMAT_STRATEGY_SELECTIVE,
        REMAT_STRATEGY_APPROX_MC, REMAT_STRATEGY_HYBRID,
    };
    const struct tf_model *m = fix_model(model);
    remat_train_opts o = train_opts(b, true);
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_algos *algos = NULL;
    uint64_t base = 0;
    remat_status st;
    char ctx[64];

    snprintf(ctx, sizeof ctx, "%s on %s", model, remat_backend_name(b));
    if (!m)
        return;
    if (build(m, REMAT_OPTIMIZER_ADAMW, &g, &tg)) {
        CHECK(false, "%s: %s", ctx, remat_errmsg());
        goto out;
    }
    if ((st = remat_train_algos(g, tg, &o, &algos))) {
        if (st == REMAT_ERR_UNSUPPORTED && b != REMAT_BACKEND_REF)
            SKIP("%s: %s", ctx, remat_errmsg());
        else
            CHECK(false, "%s: %s", ctx, remat_errmsg());
        goto out;
    }
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        remat_schedule *s = NULL;
        remat_trainer *t = train3(g, tg, m, algos, ss[i], &o, &s, ctx);

        if (t && i == 0)
            base = remat_trainer_param_checksum(t);
        else if (t)
            CHECK(remat_trainer_param_checksum(t) == base, "%s %s: other parameter bits than "
                  "none's", ctx, remat_strategy_name(ss[i]));
        remat_trainer_free(t);
        remat_schedule_free(s);
    }
out:
    remat_algos_free(algos);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void test_gpt2_grads_ref(void)
{
    grads_case("gpt2", REMAT_BACKEND_REF);
}

static void test_bert_grads_ref(void)
{
    grads_case("bert-base", REMAT_BACKEND_REF);
}

static void test_gpt2_grads_cpu(void)
{
    grads_case("gpt2", REMAT_BACKEND_CPU);
}

static void test_bert_grads_cpu(void)
{
    grads_case("bert-base", REMAT_BACKEND_CPU);
}

static void test_gpt2_plans_ref(void)
{
    plans_case("gpt2", REMAT_BACKEND_REF);
}

static void test_bert_plans_ref(void)
{
    plans_case("bert-base", REMAT_BACKEND_REF);
}

static void test_gpt2_plans_cpu(void)
{
    plans_case("gpt2", REMAT_BACKEND_CPU);
}

static void test_bert_plans_cpu(void)
{
    plans_case("bert-base", REMAT_BACKEND_CPU);
}

int main(void)
{
    RUN(test_gpt2_grads_ref);
    RUN(test_bert_grads_ref);
    RUN(test_gpt2_grads_cpu);
    RUN(test_bert_grads_cpu);
    RUN(test_gpt2_plans_ref);
    RUN(test_bert_plans_ref);
    RUN(test_gpt2_plans_cpu);
    RUN(test_bert_plans_cpu);
    fix_free();
    return harness_end();
}
