/*
 * test_fixtures_models.c - the trainer against PyTorch, on every tiny model of
 * tests/data/models.fix (fixture_util.h has the format and the tolerance): each model is
 * built here with the graph API under the names tools/make_fixtures.py gives its
 * parameters, planned with `none` and with approx-tc, approx-mc and chen-greedy at their
 * smallest budget, run by a ref-backend trainer loaded from <model>_init.prm: the loss
 * and every parameter gradient of one training-mode forward and backward, then (a fresh
 * trainer) the parameters and batch-norm running statistics after one SGD step (lr 0.1,
 * momentum 0.9, weight decay 1e-4) against <model>_step.prm; and load then save gives
 * back _init.prm bit for bit.
 */
#include "fixture_util.h"
#include "graph/graph.h"

#include <unistd.h>

/* ------------------------------------------------------------------- models */

/* Builders: the ops and names of tools/make_fixtures.py's models. */

static int32_t conv(remat_graph *g, int32_t x, const char *name, int64_t cout, int k, int s,
                    int p, bool bias)
{
    remat_attrs at = {.out_channels = cout, .kh = k, .kw = k, .sh = s, .sw = s, .ph = p,
                      .pw = p, .bias = bias};

    return remat_graph_add(g, REMAT_OP_CONV2D, &x, 1, &at, name);
}

static int32_t op1(remat_graph *g, remat_op type, int32_t x, const remat_attrs *at,
                   const char *name)
{
    return remat_graph_add(g, type, &x, 1, at, name);
}

static int32_t linear(remat_graph *g, int32_t x, const char *name, int64_t out, bool bias)
{
    return op1(g, REMAT_OP_LINEAR, x, &(remat_attrs){.out_channels = out, .bias = bias}, name);
}

static int32_t ce(remat_graph *g, int32_t logits, int32_t labels, const char *name)
{
    return remat_graph_add(g, REMAT_OP_SOFTMAX_CE, (const int32_t[]){logits, labels}, 2, NULL,
                           name);
}

/* global average pool, flatten, linear: the classifier head */
static int32_t head(remat_graph *g, int32_t x, const char *fc, int64_t classes, const char *gap,
                    const char *flat)
{
    x = op1(g, REMAT_OP_GLOBAL_AVG_POOL, x, NULL, gap);
    x = op1(g, REMAT_OP_FLATTEN, x, NULL, flat);
    return linear(g, x, fc, classes, true);
}

static int32_t input4(remat_graph *g, const char *name, int64_t n, int64_t c, int64_t h,
                      int64_t w)
{
    return remat_graph_input(g, name, 4, (const int64_t[]){n, c, h, w});
}

/* conv-bn-relu-maxpool-conv-bn + residual add-relu-global avg pool-flatten-linear-ce */
static int32_t build_resnet(remat_graph *g)
{
    int32_t x = input4(g, "x", 4, 3, 8, 8), y = remat_graph_labels(g, "labels", 4), h, p, r;

    h = conv(g, x, "conv1", 8, 3, 1, 1, false);
    h = op1(g, REMAT_OP_BATCH_NORM, h, NULL, "bn1");
    h = op1(g, REMAT_OP_RELU, h, NULL, "relu1");
    p = op1(g, REMAT_OP_MAX_POOL, h, &(remat_attrs){.kh = 2, .kw = 2}, "pool1");
    r = conv(g, p, "conv2", 8, 3, 1, 1, true);
    r = op1(g, REMAT_OP_BATCH_NORM, r, NULL, "bn2");
    h = remat_graph_add(g, REMAT_OP_ADD, (const int32_t[]){r, p}, 2, NULL, "add");
    h = op1(g, REMAT_OP_RELU, h, NULL, "relu2");
    h = head(g, h, "fc", 5, "gap", "flat");
    return ce(g, h, y, "loss");
}

/* stem; 1x1 / 1x1-3x3 / avgpool (padding excluded)-1x1 / maxpool branches concatenated;
 * max pool with ceil_mode; bn-relu; global pool, linear, ce */
static int32_t build_inception(remat_graph *g)
{
    int32_t x = input4(g, "x", 2, 4, 10, 10), y = remat_graph_labels(g, "labels", 2);
    int32_t s, b[4], h;

    s = op1(g, REMAT_OP_RELU, conv(g, x, "stem", 6, 3, 1, 1, true), NULL, "stem_relu");
    b[0] = op1(g, REMAT_OP_RELU, conv(g, s, "b1", 4, 1, 1, 0, true), NULL, "b1_relu");
    b[1] = op1(g, REMAT_OP_RELU, conv(g, s, "b2a", 3, 1, 1, 0, true), NULL, "b2a_relu");
    b[1] = op1(g, REMAT_OP_RELU, conv(g, b[1], "b2b", 4, 3, 1, 1, true), NULL, "b2b_relu");
    b[2] = op1(g, REMAT_OP_AVG_POOL, s,
               &(remat_attrs){.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1}, "b3pool");
    b[2] = conv(g, b[2], "b3", 3, 1, 1, 0, true);
    b[3] = op1(g, REMAT_OP_MAX_POOL, s,
               &(remat_attrs){.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1}, "b4pool");
    h = remat_graph_add(g, REMAT_OP_CONCAT, b, 4, NULL, "cat");
    h = op1(g, REMAT_OP_MAX_POOL, h,
            &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ceil_mode = true}, "pool");
    h = op1(g, REMAT_OP_BATCH_NORM, h, NULL, "bn");
    h = op1(g, REMAT_OP_RELU, h, NULL, "relu");
    h = head(g, h, "fc", 4, "gap", "flat");
    return ce(g, h, y, "loss");
}

/* conv-bn-relu, max pool, conv-relu, conv_transpose, centre crop of the skip, concat,
 * conv-relu, pad, bilinear upsample, 1x1 conv, bilinear upsample (align_corners), global
 * pool, linear, ce */
static int32_t build_unet(remat_graph *g)
{
    int32_t x = input4(g, "x", 2, 3, 12, 12), y = remat_graph_labels(g, "labels", 2);
    int32_t e1, h, c;

    e1 = conv(g, x, "enc1", 4, 3, 1, 0, true);
    e1 = op1(g, REMAT_OP_BATCH_NORM, e1, NULL, "enc1_bn");
    e1 = op1(g, REMAT_OP_RELU, e1, NULL, "enc1_relu");
    h = op1(g, REMAT_OP_MAX_POOL, e1, &(remat_attrs){.kh = 2, .kw = 2}, "down");
    h = op1(g, REMAT_OP_RELU, conv(g, h, "enc2", 8, 3, 1, 0, true), NULL, "enc2_relu");
    h = op1(g, REMAT_OP_CONV_TRANSPOSE2D, h,
            &(remat_attrs){.out_channels = 4, .kh = 2, .kw = 2, .sh = 2, .sw = 2, .bias = true},
            "up");
    c = op1(g, REMAT_OP_CROP, e1,
            &(remat_attrs){.out_h = 6, .out_w = 6, .offset_h = -1, .offset_w = -1}, "crop");
    h = remat_graph_add(g, REMAT_OP_CONCAT, (const int32_t[]){h, c}, 2, NULL, "cat");
    h = op1(g, REMAT_OP_RELU, conv(g, h, "dec", 4, 3, 1, 0, true), NULL, "dec_relu");
    h = op1(g, REMAT_OP_PAD, h, &(remat_attrs){.pad_t = 1, .pad_b = 0, .pad_l = 2, .pad_r = 1},
            "pad");
    h = op1(g, REMAT_OP_UPSAMPLE_BILINEAR, h, &(remat_attrs){.out_h = 9, .out_w = 11}, "ups");
    h = conv(g, h, "head", 3, 1, 1, 0, true);
    h = op1(g, REMAT_OP_UPSAMPLE_BILINEAR, h,
            &(remat_attrs){.out_h = 6, .out_w = 6, .align_corners = true}, "ups2");
    h = head(g, h, "fc", 3, "gap", "flat");
    return ce(g, h, y, "loss");
}

/* two inputs, a conv each, added; head 1: global pool, linear, ce (4 classes); head 2:
 * avg pool, flatten, linear, 2-d bn, relu, linear, ce (3 classes); losses summed */
static int32_t build_twohead(remat_graph *g)
{
    int32_t a = input4(g, "a", 3, 3, 6, 6), b = input4(g, "b", 3, 2, 6, 6);
    int32_t y = remat_graph_labels(g, "labels", 3), h, h1, h2, l1, l2;

    h = conv(g, a, "ca", 4, 3, 1, 1, false);
    h = op1(g, REMAT_OP_BATCH_NORM, h, NULL, "ca_bn");
    h = op1(g, REMAT_OP_RELU, h, NULL, "ca_relu");
    h = remat_graph_add(g, REMAT_OP_ADD, (const int32_t[]){h, conv(g, b, "cb", 4, 1, 1, 0, true)},
                        2, NULL, "add");
    h1 = head(g, h, "h1fc", 4, "h1gap", "h1flat");
    l1 = ce(g, h1, y, "l1");
    h2 = op1(g, REMAT_OP_AVG_POOL, h, &(remat_attrs){.kh = 2, .kw = 2}, "h2pool");
    h2 = op1(g, REMAT_OP_FLATTEN, h2, NULL, "h2flat");
    h2 = linear(g, h2, "h2fc", 6, false);
    h2 = op1(g, REMAT_OP_BATCH_NORM, h2, NULL, "h2bn");
    h2 = op1(g, REMAT_OP_RELU, h2, NULL, "h2relu");
    h2 = linear(g, h2, "h2out", 3, true);
    l2 = ce(g, h2, y, "l2");
    return remat_graph_add(g, REMAT_OP_SUM_LOSSES, (const int32_t[]){l1, l2}, 2, NULL, "loss");
}

static const struct {
    const char *name;
    int32_t (*build)(remat_graph *g); /* returns the loss value */
} models[] = {
    {"resnet", build_resnet},
    {"inception", build_inception},
    {"unet", build_unet},
    {"twohead", build_twohead},
};

static const remat_strategy strategies[] = {
    REMAT_STRATEGY_NONE, REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC,
    REMAT_STRATEGY_CHEN_GREEDY,
};

/* Everything one model's runs share. */
struct mrun {
    const char *name;
    const struct group *fx;          /* its models.fix group */
    struct group init, step;         /* _init.prm, _step.prm */
    const float *inputs[8];
    const int32_t *labels;
    remat_graph *g;
    remat_tgraph *tg;
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);

    return a >= b && !strcmp(s + a - b, suffix);
}

/* The graph's inputs against the fixture's input0..: count and shapes; fills inputs. */
static bool bind_inputs(struct mrun *m)
{
    int k = 0;

    for (int32_t v = 0; v < remat_graph_n_values(m->g); v++) {
        const struct gvalue *gv = graph_value(m->g, v);
        const struct rec *r;
        char key[16];
        bool ok;

        if (gv->kind == VK_LABEL) {
            r = find_rec(m->fx, "labels");
            ok = r && r->dtype == DT_I32 && r->n == gv->shape[0];
            CHECK(ok, "%s: the fixture's labels do not fit '%s'", m->name, gv->name);
            if (!ok)
                return false;
            m->labels = r->data;
        }
        if (gv->kind != VK_INPUT)
            continue;
        snprintf(key, sizeof key, "input%d", k);
        r = find_rec(m->fx, key);
        ok = r && r->dtype == DT_F32 && r->ndim == gv->ndim && k < 8;
        for (int d = 0; ok && d < r->ndim; d++)
            ok = r->dims[d] == gv->shape[d];
        CHECK(ok, "%s: graph input %d ('%s') does not match the fixture's %s", m->name, k,
              gv->name, key);
        if (!ok)
            return false;
        m->inputs[k++] = r->data;
    }
    {
        char key[16];

        snprintf(key, sizeof key, "input%d", k);
        CHECK(!find_rec(m->fx, key) && m->labels, "%s: the fixture has more inputs than the "
              "graph, or no labels", m->name);
    }
    return !h_cur_failed;
}

/* A trainer for schedule s, SGD as in the fixtures, parameters from _init.prm. */
static remat_trainer *new_trainer(struct mrun *m, const remat_schedule *s, const char *what)
{
    remat_train_opts o = remat_train_opts_default();
    remat_trainer *t = NULL;
    char path[256];

    o.backend = REMAT_BACKEND_REF;
    o.lr = 0.1f;
    o.momentum = 0.9f;
    o.weight_decay = 1e-4f;
    snprintf(path, sizeof path, DATA_DIR "%s_init.prm", m->name);
    CHECK_OK(remat_trainer_new(m->g, m->tg, s, &o, &t));
    if (t && remat_trainer_load(t, path) != REMAT_OK) {
        CHECK(false, "%s (%s): loading %s: %s", m->name, what, path, remat_errmsg());
        remat_trainer_free(t);
        t = NULL;
    }
    return t;
}

/* Saves the trainer's parameters and statistics to a temporary file and reads them. */
static bool saved_params(remat_trainer *t, struct group *out)
{
    char path[] = "/tmp/remat_fixtures_XXXXXX";
    int fd = mkstemp(path);
    bool ok;

    memset(out, 0, sizeof *out);
    REMAT_ASSERT_TEST(fd >= 0);
    close(fd);
    ok = remat_trainer_save(t, path) == REMAT_OK;
    CHECK(ok, "remat_trainer_save: %s", remat_errmsg());
    ok = ok && read_prm(path, out);
    unlink(path);
    return ok;
}

/* Loss and gradients of one forward and backward under schedule s. */
static double check_gradients(struct mrun *m, const remat_schedule *s, const char *ctx)
{
    remat_trainer *t = new_trainer(m, s, ctx);
    const float *want_loss = find_f32(m->fx, "loss", NULL);
    double loss = 0, worst = 0;
    int64_t n_grads = 0, n_params = 0;
    float lf;

    if (!t)
        return INFINITY;
    CHECK_OK(remat_trainer_gradients(t, m->inputs, m->labels, &loss));
    lf = (float)loss;
    REMAT_ASSERT_TEST(want_loss);
    worst = check_fx(ctx, "loss", &lf, want_loss, 1);
    for (uint32_t i = 0; i < m->fx->n; i++) {
        const struct rec *r = &m->fx->r[i];
        float *data, *grad;
        int64_t n = 0;

        if (strncmp(r->name, "grad.", 5))
            continue;
        n_grads++;
        if (remat_trainer_param(t, r->name + 5, &data, &grad, &n) != REMAT_OK) {
            CHECK(false, "%s: no parameter '%s' in remat: %s", ctx, r->name + 5, remat_errmsg());
            continue;
        }
        CHECK(grad && n == r->n, "%s: '%s' has %lld elements and %s gradient, PyTorch %lld",
              ctx, r->name + 5, (long long)n, grad ? "a" : "no", (long long)r->n);
        if (grad && n == r->n)
            worst = fmax(worst, check_fx(ctx, r->name, grad, r->data, n));
    }
    for (int32_t v = 0; v < remat_graph_n_values(m->g); v++)
        n_params += graph_value(m->g, v)->kind == VK_PARAM;
    CHECK(n_grads == n_params, "%s: the graph has %lld parameters, the fixture %lld gradients",
          ctx, (long long)n_params, (long long)n_grads);
    remat_trainer_free(t);
    return worst;
}

/* Parameters and running statistics after one SGD step under schedule s. */
static double check_step(struct mrun *m, const remat_schedule *s, const char *ctx)
{
    remat_trainer *t = new_trainer(m, s, ctx);
    struct group saved;
    double loss = 0, worst = 0;

    if (!t)
        return INFINITY;
    CHECK_OK(remat_trainer_step(t, m->inputs, m->labels, &loss));
    if (!saved_params(t, &saved)) {
        remat_trainer_free(t);
        return INFINITY;
    }
    CHECK(saved.n == m->step.n, "%s: remat saves %u records, PyTorch's file has %u", ctx,
          saved.n, m->step.n);
    for (uint32_t i = 0; i < m->step.n; i++) {
        const struct rec *want = &m->step.r[i], *got;
        float *data = NULL;
        int64_t n = 0;
        char what[300];

        snprintf(what, sizeof what, "%s after the step", want->name);
        if (ends_with(want->name, ".running_mean") || ends_with(want->name, ".running_var")) {
            got = find_rec(&saved, want->name);
            CHECK(got && got->n == want->n, "%s: remat saved no '%s' of %lld", ctx, want->name,
                  (long long)want->n);
            if (got && got->n == want->n)
                worst = fmax(worst, check_fx(ctx, what, got->data, want->data, want->n));
        } else if (remat_trainer_param(t, want->name, &data, NULL, &n) == REMAT_OK &&
                   n == want->n) {
            worst = fmax(worst, check_fx(ctx, what, data, want->data, n));
        } else {
            CHECK(false, "%s: remat has no parameter '%s' of %lld", ctx, want->name,
                  (long long)want->n);
        }
    }
    group_fini(&saved);
    remat_trainer_free(t);
    return worst;
}

/* remat_trainer_load then remat_trainer_save gives back _init.prm's records bit for bit
 * (in remat's own order). */
static void check_round_trip(struct mrun *m, const remat_schedule *s)
{
    remat_trainer *t = new_trainer(m, s, "round trip");
    struct group saved;

    if (!t)
        return;
    if (saved_params(t, &saved)) {
        CHECK(saved.n == m->init.n, "%s: saved %u records, loaded %u", m->name, saved.n,
              m->init.n);
        for (uint32_t i = 0; i < m->init.n; i++) {
            const struct rec *want = &m->init.r[i], *got = find_rec(&saved, want->name);
            bool same = got && got->n == want->n && got->ndim == want->ndim &&
                        !memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)want->ndim) &&
                        !memcmp(got->data, want->data, sizeof(float) * (size_t)want->n);

            CHECK(same, "%s: '%s' does not survive load and save", m->name, want->name);
        }
    }
    group_fini(&saved);
    remat_trainer_free(t);
}

static void run_model(const struct group *fx)
{
    struct mrun m = {.name = group_name(fx), .fx = fx};
    int32_t (*build)(remat_graph *) = NULL;
    char path[256];
    int was = case_begin();

    for (size_t i = 0; i < REMAT_ARRAY_LEN(models); i++)
        if (!strcmp(models[i].name, m.name))
            build = models[i].build;
    CHECK(build, "models.fix has a model '%s' this test does not build", m.name);
    if (!build)
        goto out;
    snprintf(path, sizeof path, DATA_DIR "%s_init.prm", m.name);
    CHECK(read_prm(path, &m.init), "%s: no initial parameters", m.name);
    snprintf(path, sizeof path, DATA_DIR "%s_step.prm", m.name);
    CHECK(read_prm(path, &m.step), "%s: no parameters after the step", m.name);
    CHECK_OK(remat_graph_new(NULL, &m.g));
    if (h_cur_failed)
        goto out;
    CHECK_OK(remat_graph_set_loss(m.g, build(m.g)));
    CHECK_OK(remat_tgraph_from_graph(m.g, NULL, &m.tg));
    if (h_cur_failed || !bind_inputs(&m))
        goto out;

    for (size_t k = 0; k < REMAT_ARRAY_LEN(strategies); k++) {
        remat_plan_opts po = {.strategy = strategies[k],
                              .budget_min = strategies[k] != REMAT_STRATEGY_NONE};
        remat_schedule *s = NULL;
        remat_sim_result sr;
        char ctx[96];
        double wg, ws;

        snprintf(ctx, sizeof ctx, "%s/%s", m.name, remat_strategy_name(strategies[k]));
        if (remat_plan(m.tg, &po, &s, NULL) != REMAT_OK) {
            CHECK(false, "%s: remat_plan: %s", ctx, remat_errmsg());
            continue;
        }
        CHECK_OK(remat_sim_run(m.tg, s, &sr));
        if (k == 0)
            check_round_trip(&m, s);
        wg = check_gradients(&m, s, ctx);
        ws = check_step(&m, s, ctx);
        printf("  %-22s peak %6zu B, overhead %.2f; worst error / tolerance: gradients "
               "%.3g, step %.3g\n", ctx, sr.activation_peak_bytes, sr.overhead, wg, ws);
        remat_schedule_free(s);
    }
out:
    remat_tgraph_free(m.tg);
    remat_graph_free(m.g);
    group_fini(&m.init);
    group_fini(&m.step);
    case_end(was);
}

static void test_models(void)
{
    struct fix fx;

    CHECK(read_fix(DATA_DIR "models.fix", &fx), "no model fixtures");
    for (uint32_t i = 0; i < fx.n; i++)
        run_model(&fx.g[i]);
    CHECK(fx.n >= REMAT_ARRAY_LEN(models), "models.fix has %u models, this test builds %zu",
          fx.n, REMAT_ARRAY_LEN(models));
    fix_fini(&fx);
}

int main(void)
{
    RUN(test_models);
    return harness_end();
}
