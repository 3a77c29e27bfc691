/*
 * test_train.c - training under every plan: three steps of SGD from the same seed give
 * the same parameters as `none` (the same FNV checksum of every parameter byte), the
 * measured peak equals the planned one (the arena's and the host tier's: superneurons
 * and hybrid offload at their least budget), and no two live buffers of the arena overlap.
 *
 * Models at reduced sizes so that the reference backend runs them in seconds. Gradients
 * with three or more contributions (GoogLeNet's inception inputs, DenseNet's features)
 * get the same bits because every plan runs their writers in one order
 * (plan_canonical_grads); float addition is not associative, so without it they would
 * differ in the last bits, and training amplifies that within three steps.
 */
#include "harness.h"

#include "exec/exec.h"
#include "kernels_util.h"

struct model {
    const char *name;
    remat_zoo_opts zo;
};

static const struct model models[] = {
    {"resnet18", {.batch = 2, .height = 32, .width = 32, .classes = 10}},
    {"densenet121", {.batch = 2, .height = 32, .width = 32, .classes = 10}},
    {"googlenet", {.batch = 2, .height = 64, .width = 64, .classes = 10}},
    {"unet", {.batch = 2, .height = 188, .width = 188, .base_channels = 4}},
};

/* Trains three steps; returns the trainer (for parameter comparison) or NULL. */
static remat_trainer *train(const remat_graph *g, const remat_tgraph *tg, remat_strategy s,
                            remat_backend_kind be, remat_schedule **sched, const char *model)
{
    remat_plan_opts po = {.strategy = s, .budget_min = true, .max_lower_sets = 20000,
                          .time_limit = 3};
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *t = NULL;
    remat_train_stats st;
    remat_status rc;
    double loss;

    to.backend = be;
    to.threads = 2;
    rc = remat_plan(tg, &po, sched, NULL);
    if (rc == REMAT_ERR_UNSUPPORTED) { /* the exact DP or the MILP on a graph too large */
        printf("  %s %s: not planned (%s)\n", model, remat_strategy_name(s), remat_errmsg());
        return NULL;
    }
    CHECK(rc == REMAT_OK, "%s %s: plan: %s", model, remat_strategy_name(s), remat_errmsg());
    if (rc)
        return NULL;
    rc = remat_trainer_new(g, tg, *sched, &to, &t);
    if (rc == REMAT_ERR_UNSUPPORTED && be != REMAT_BACKEND_REF)
        return NULL;
    CHECK(rc == REMAT_OK, "%s %s: trainer: %s", model, remat_strategy_name(s), remat_errmsg());
    if (rc)
        return NULL;
    for (int i = 0; i < 3; i++)
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    remat_trainer_stats(t, &st);
    /* Planned without the kernels' table, the trainer gives each op its fastest
     * algorithm and counts the scratch: on cpu a convolution network takes some
     * (oneDNN's scratchpads, blocked copies, gradient staging), the reference none. */
    CHECK((be == REMAT_BACKEND_REF) == (st.workspace_bytes == 0), "%s %s %s: %zu bytes of "
          "scratch in the largest step", model, remat_strategy_name(s), remat_backend_name(be),
          st.workspace_bytes);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "%s %s: measured %zu, planned %zu",
          model, remat_strategy_name(s), st.measured_peak_bytes, st.planned_peak_bytes);
    CHECK(st.arena_bytes >= st.planned_peak_bytes, "%s %s: arena %zu below the peak %zu",
          model, remat_strategy_name(s), st.arena_bytes, st.planned_peak_bytes);
    CHECK(layout_check(&t->lay), "%s %s: two live buffers overlap in the arena", model,
          remat_strategy_name(s));
    /* the host tier: what the simulator planned is what the copies held */
    CHECK(st.measured_host_bytes == st.planned_host_bytes, "%s %s: host tier measured %zu, "
          "planned %zu", model, remat_strategy_name(s), st.measured_host_bytes,
          st.planned_host_bytes);
    if (st.transfer_bytes)
        printf("  %s %s %s: %zu bytes to the host tier and back in 3 steps\n", model,
               remat_strategy_name(s), remat_backend_name(be), st.transfer_bytes);
    return t;
}

/* The largest relative difference between two trainers' parameters. */
static double max_rel_diff(const remat_trainer *a, const remat_trainer *b)
{
    double worst = 0;

    for (size_t i = 0; i < a->n_param_floats; i++) {
        double x = a->block[i], y = b->block[i], d = fabs(x - y) / fmax(fabs(y), 1e-6);

        worst = d > worst ? d : worst;
    }
    return worst;
}

/* Under the sanitizers (ten times slower) a subset: one model, three strategies. */
#if defined(__SANITIZE_ADDRESS__)
#define QUICK 1
#else
#define QUICK 0
#endif

static bool in_quick_set(size_t m, int s)
{
    return m == 0 && (s == REMAT_STRATEGY_NONE || s == REMAT_STRATEGY_APPROX_MC ||
                      s == REMAT_STRATEGY_SUPERNEURONS);
}

static void run_backend(remat_backend_kind be)
{
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        remat_schedule *s0 = NULL;
        remat_trainer *t0;
        uint64_t sum0;

        if (QUICK && !in_quick_set(m, REMAT_STRATEGY_NONE))
            continue;
        if (remat_zoo_build(models[m].name, &models[m].zo, NULL, &g) ||
            remat_tgraph_from_graph(g, NULL, &tg)) {
            CHECK(false, "%s: %s", models[m].name, remat_errmsg());
            goto next;
        }
        t0 = train(g, tg, REMAT_STRATEGY_NONE, be, &s0, models[m].name);
        if (!t0) {
            if (be != REMAT_BACKEND_REF)
                SKIP("the %s backend is not in this build", remat_backend_name(be));
            goto next;
        }
        sum0 = remat_trainer_param_checksum(t0);
        for (int s = 1; s < REMAT_STRATEGY_COUNT; s++) {
            remat_schedule *sched = NULL;
            remat_trainer *t;

            if (QUICK && !in_quick_set(m, s))
                continue;
            t = train(g, tg, (remat_strategy)s, be, &sched, models[m].name);
            if (t) {
                uint64_t sum = remat_trainer_param_checksum(t);

                CHECK(sum == sum0, "%s %s: checksum %016llx, none's %016llx (largest relative "
                      "difference %.3g)", models[m].name, remat_strategy_name((remat_strategy)s),
                      (unsigned long long)sum, (unsigned long long)sum0, max_rel_diff(t, t0));
            }
            remat_trainer_free(t);
            remat_schedule_free(sched);
        }
        remat_trainer_free(t0);
    next:
        remat_schedule_free(s0);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

static void test_ref(void)
{
    run_backend(REMAT_BACKEND_REF);
}

static void test_cpu(void)
{
    run_backend(REMAT_BACKEND_CPU);
}

/* The forward hook: once per op and step under a plan that recomputes (never for the
 * recomputations), views excepted, with max pooling's window winners (each inside its
 * input plane) and only there. */
struct hook_count {
    const remat_tgraph *tg;
    int32_t *calls;
    int bad;
};

static void count_hook(void *ud, int32_t op, remat_op type, const float *out,
                       const int32_t *argmax, int64_t numel)
{
    struct hook_count *h = ud;

    h->calls[op]++;
    if ((type == REMAT_OP_MAX_POOL) != (argmax != NULL) || !out || numel <= 0)
        h->bad++;
    for (int64_t i = 0; argmax && i < numel; i++)
        h->bad += argmax[i] < 0 || argmax[i] >= 16 * 16; /* resnet18's pool input at 32x32 */
    for (int64_t i = 0; type == REMAT_OP_RELU && i < numel; i++)
        h->bad += !(out[i] >= 0);
}

static void test_forward_hook(void)
{
    remat_zoo_opts zo = {.batch = 2, .height = 32, .width = 32, .classes = 10};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_APPROX_MC, .budget_min = true};
    remat_train_opts to = remat_train_opts_default();
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    struct hook_count h = {0};
    size_t fwd = 0;
    double loss;

    if (remat_zoo_build("resnet18", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_plan(tg, &po, &s, NULL) || remat_trainer_new(g, tg, s, &to, &t)) {
        CHECK(false, "%s", remat_errmsg());
        goto out;
    }
    for (size_t i = 0; i < remat_schedule_n_steps(s); i++)
        fwd += remat_schedule_steps(s)[i].kind == REMAT_STEP_FWD;
    CHECK(fwd > (size_t)tg->n_ops, "the plan recomputes nothing (%zu forwards)", fwd);
    h.tg = tg;
    h.calls = calloc((size_t)tg->n_ops, sizeof *h.calls);
    REMAT_ASSERT_TEST(h.calls);
    remat_trainer_set_forward_hook(t, count_hook, &h);
    CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    remat_trainer_set_forward_hook(t, NULL, NULL);
    CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    for (int32_t o = 0; o < tg->n_ops; o++)
        CHECK(h.calls[o] == (tg->ops[o].is_view ? 0 : 2), "op %d (%s): %d calls in 2 steps",
              o, tg->ops[o].type_name, h.calls[o]);
    CHECK(h.bad == 0, "%d bad calls", h.bad);
    free(h.calls);
out:
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Trains sched 3 steps on the cpu backend: its checksum, measured == planned checked. */
static uint64_t train3(const remat_graph *g, const remat_tgraph *tg, const remat_schedule *sched,
                       const char *what, size_t *peak)
{
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *t = NULL;
    remat_train_stats st;
    uint64_t sum = 0;
    double loss;

    to.backend = REMAT_BACKEND_CPU;
    to.threads = 2;
    if (remat_trainer_new(g, tg, sched, &to, &t)) {
        CHECK(false, "%s: %s", what, remat_errmsg());
        return 0;
    }
    for (int i = 0; i < 3; i++)
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    remat_trainer_stats(t, &st);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "%s: measured %zu, planned %zu",
          what, st.measured_peak_bytes, st.planned_peak_bytes);
    CHECK(layout_check(&t->lay), "%s: two live buffers overlap", what);
    sum = remat_trainer_param_checksum(t);
    if (peak)
        *peak = st.planned_peak_bytes;
    remat_trainer_free(t);
    return sum;
}

/* ResNet-18 (batch 4, 64x64, 10 classes) and the cpu backend's kernels for it (2
 * threads); false after a failed check, or a skip without the cpu backend. */
static bool cpu_resnet18(remat_graph **g, remat_tgraph **tg, remat_algos **al)
{
    remat_zoo_opts zo = {.batch = 4, .height = 64, .width = 64, .classes = 10};
    remat_train_opts to = remat_train_opts_default();

    to.backend = REMAT_BACKEND_CPU;
    to.threads = 2;
    if (remat_zoo_build("resnet18", &zo, NULL, g) || remat_tgraph_from_graph(*g, NULL, tg)) {
        CHECK(false, "%s", remat_errmsg());
        return false;
    }
    if (remat_train_algos(*g, *tg, &to, al) == REMAT_ERR_UNSUPPORTED) {
        SKIP("the cpu backend is not in this build");
        return false;
    }
    return true;
}

/*
 * Plans given the cpu backend's kernels (ResNet-18, batch 4, 64x64): without a budget
 * every convolution pass gets its fastest algorithm; at approx-mc's least budget some
 * get a slower one whose scratch fits, and the plan stays within its budget, as the
 * trainer measures. Bits: two plans with the same algorithms give the same parameters
 * (approx-mc against none run with approx-mc's choices; both forced to GEMM), so a
 * recomputation reproduces its forward.
 */
static void test_kernels_fit(void)
{
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_algos *al = NULL;
    remat_schedule *fast = NULL, *tight = NULL, *mirror = NULL, *gn = NULL, *gm = NULL;
    remat_plan_info pf, pt, pg;
    remat_sim_result r;
    size_t peak;
    int32_t ids[8];
    size_t sc[8];
    int multi = 0;

    if (!cpu_resnet18(&g, &tg, &al))
        goto out;
    REMAT_ASSERT_TEST(al);
    /* the table: convolutions have several algorithms, each with scratch */
    for (int32_t o = 0; o < tg->n_ops; o++)
        if (remat_algos_choices(al, o, true, ids, sc, 8) >= 2) {
            multi++;
            CHECK(sc[0] > 0 && sc[1] > 0 && ids[0] != ids[1], "op %d: %s %zu, %s %zu", o,
                  remat_algos_name(al, ids[0]), sc[0], remat_algos_name(al, ids[1]), sc[1]);
        }
    CHECK(multi >= 15, "%d backward passes with a choice", multi);

    CHECK_OK(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_NONE, .algos = al},
                        &fast, &pf));
    CHECK(pf.n_algo_choices >= 30 && pf.n_algo_fastest == pf.n_algo_choices,
          "no budget: %d of %d passes at their fastest", pf.n_algo_fastest, pf.n_algo_choices);
    CHECK_OK(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_APPROX_MC,
                                               .budget_min = true, .algos = al},
                        &tight, &pt));
    printf("  approx-mc at its least budget: %d of %d passes at their fastest, %zu bytes kept "
           "free while planning\n", pt.n_algo_fastest, pt.n_algo_choices,
           pt.scratch_reserve_bytes);
    CHECK(pt.n_algo_fastest < pt.n_algo_choices, "the least budget slowed no convolution");
    CHECK(pt.scratch_reserve_bytes > 0, "nothing kept free for the kernels");
    CHECK_OK(remat_sim_run(tg, tight, &r));
    CHECK(r.activation_peak_bytes <= pt.activation_budget_bytes, "peak %zu above %zu",
          r.activation_peak_bytes, pt.activation_budget_bytes);
    if (!fast || !tight)
        goto out;
    train3(g, tg, fast, "none, fastest kernels", &peak);
    {
        uint64_t a = train3(g, tg, tight, "approx-mc, kernels that fit", &peak);
        uint64_t b;

        CHECK(peak <= pt.activation_budget_bytes, "measured %zu above the budget %zu", peak,
              pt.activation_budget_bytes);
        mirror = none_with_kernels_of(tg, tight);
        b = train3(g, tg, mirror, "none with approx-mc's kernels", NULL);
        CHECK(a == b, "approx-mc %016llx, none with its kernels %016llx", (unsigned long long)a,
              (unsigned long long)b);
    }
    /* one algorithm forced: GEMM everywhere, whatever the plan */
    CHECK_OK(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_NONE, .algos = al,
                                               .conv_algo = "gemm"},
                        &gn, &pg));
    for (size_t i = 0; gn && i < gn->n; i++)
        CHECK(gn->algo[i] <= 0, "step %zu: algorithm %s where gemm was forced", i,
              remat_algos_name(al, gn->algo[i]));
    CHECK(pg.n_algo_fastest < pg.n_algo_choices, "GEMM the fastest of %d", pg.n_algo_choices);
    CHECK_OK(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_APPROX_MC,
                                               .budget_min = true, .algos = al,
                                               .conv_algo = "gemm"},
                        &gm, NULL));
    if (gn && gm)
        CHECK(train3(g, tg, gn, "none, gemm", NULL) == train3(g, tg, gm, "approx-mc, gemm", NULL),
              "GEMM under none and approx-mc: different parameters");
    /* misuse: an unknown algorithm; a cpu plan on the ref backend */
    {
        remat_schedule *x = NULL;
        remat_trainer *t = NULL;
        remat_train_opts ro = remat_train_opts_default();

        CHECK(remat_plan(tg, &(remat_plan_opts){.algos = al, .conv_algo = "fft"}, &x, NULL) ==
                  REMAT_ERR_ARG && !x, "an unknown algorithm was planned");
        CHECK(strstr(remat_errmsg(), "gemm, direct, winograd") != NULL, "message: %s",
              remat_errmsg());
        CHECK(remat_plan(tg, &(remat_plan_opts){.conv_algo = "gemm"}, &x, NULL) ==
                  REMAT_ERR_ARG && !x, "an algorithm without a table was planned");
        CHECK(remat_trainer_new(g, tg, fast, &ro, &t) == REMAT_ERR_ARG && !t,
              "a cpu plan ran on the ref backend");
        CHECK(strstr(remat_errmsg(), "cpu backend") != NULL, "message: %s", remat_errmsg());
        core_clear_error();
    }
out:
    remat_schedule_free(fast);
    remat_schedule_free(tight);
    remat_schedule_free(mirror);
    remat_schedule_free(gn);
    remat_schedule_free(gm);
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * --reproducible (ResNet-18, batch 4, 64x64, cpu): every plan, whatever its strategy and
 * budget, runs each convolution pass with its fastest algorithm, fits what it was given,
 * and trains to the same parameters as `none` without a budget; its least budget is at
 * least the default's (the fastest scratch is kept free).
 */
static void test_reproducible(void)
{
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_algos *al = NULL;
    remat_schedule *s = NULL;
    remat_plan_info pi, dflt;
    uint64_t want = 0;
    size_t total_none = 0, least_mc = 0;
    static const struct {
        remat_strategy s;
        int budget; /* 0 none, 1 min, 2 halfway between approx-mc's least and none's */
    } cases[] = {{REMAT_STRATEGY_NONE, 0}, {REMAT_STRATEGY_APPROX_MC, 1},
                 {REMAT_STRATEGY_CHEN_SQRTN, 1}, {REMAT_STRATEGY_HYBRID, 1},
                 {REMAT_STRATEGY_APPROX_TC, 2}, {REMAT_STRATEGY_SUPERNEURONS, 2}};

    if (!cpu_resnet18(&g, &tg, &al))
        goto out;
    CHECK_OK(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_APPROX_MC,
                                               .budget_min = true, .algos = al},
                        &s, &dflt));
    remat_schedule_free(s);
    s = NULL;
    for (size_t c = 0; c < REMAT_ARRAY_LEN(cases); c++) {
        remat_plan_opts po = {.strategy = cases[c].s, .algos = al, .reproducible = true,
                              .host_in_budget = true, .budget_min = cases[c].budget == 1};
        const char *name = remat_strategy_name(cases[c].s);
        uint64_t sum;

        if (cases[c].budget == 2)
            po.budget_bytes = least_mc + (total_none - least_mc) / 2;
        if (remat_plan(tg, &po, &s, &pi)) {
            CHECK(false, "%s: %s", name, remat_errmsg());
            continue;
        }
        if (cases[c].s == REMAT_STRATEGY_NONE)
            total_none = pi.total_bytes;
        if (cases[c].s == REMAT_STRATEGY_APPROX_MC) {
            least_mc = pi.budget_bytes;
            CHECK(least_mc >= dflt.budget_bytes, "reproducible least %zu under the default's "
                  "%zu", least_mc, dflt.budget_bytes);
        }
        CHECK(pi.n_algo_fastest == pi.n_algo_choices && pi.n_algo_choices >= 30,
              "%s: %d of %d passes at their fastest", name, pi.n_algo_fastest,
              pi.n_algo_choices);
        CHECK(!pi.budget_bytes || pi.total_bytes <= pi.budget_bytes, "%s: %zu allocated, "
              "budget %zu", name, pi.total_bytes, pi.budget_bytes);
        sum = train3(g, tg, s, name, NULL);
        if (c == 0)
            want = sum;
        printf("  %-12s budget %zu: %016llx\n", name, pi.budget_bytes, (unsigned long long)sum);
        CHECK(sum == want, "%s: %016llx, none %016llx", name, (unsigned long long)sum,
              (unsigned long long)want);
        remat_schedule_free(s);
        s = NULL;
    }
out:
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * Batch norm over one value per channel is refused when the trainer is made, as PyTorch
 * refuses it ("Expected more than 1 value per channel when training"). ResNet-18 at 7x7:
 * conv1 (7x7/2, pad 3) -> 4x4, the max pool (3x3/2, pad 1) -> 2x2, layer2's first
 * convolution (3x3/2, pad 1) -> 1x1 with 128 channels; at batch 1 its batch norm
 * (layer2.0.bn1) is the first to see one value per channel, at batch 2 each sees two. Planning
 * is not refused (a plan of that graph is still a plan).
 */
static void test_bn_one_value(void)
{
    for (int64_t batch = 1; batch <= 2; batch++) {
        remat_zoo_opts zo = {.batch = batch, .height = 7, .width = 7, .classes = 10};
        remat_train_opts to = remat_train_opts_default();
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        remat_trainer *t = NULL;
        remat_status st;

        if (remat_zoo_build("resnet18", &zo, NULL, &g) ||
            remat_tgraph_from_graph(g, NULL, &tg) || remat_plan_none(tg, &s)) {
            CHECK(false, "batch %lld: %s", (long long)batch, remat_errmsg());
        } else {
            st = remat_trainer_new(g, tg, s, &to, &t);
            if (batch == 1)
                CHECK(st == REMAT_ERR_ARG && strstr(remat_errmsg(), "one value per channel") &&
                          strstr(remat_errmsg(), "'layer2.0.bn1'") &&
                          strstr(remat_errmsg(), "1x128x1x1"),
                      "batch 1: status %d, '%s'", (int)st, remat_errmsg());
            else
                CHECK(st == REMAT_OK, "batch 2: %s", remat_errmsg());
            core_clear_error();
        }
        remat_trainer_free(t);
        remat_schedule_free(s);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/*
 * One backend for the kernels' table and the trainers (remat_backend_*): ResNet-18 b4
 * 64x64 on the cpu backend, planned with approx-mc at its least budget on the table the
 * backend lists, trained 3 steps by two trainers made one after the other on it; both
 * give the checksum of a trainer that makes its own backend from the same options (an
 * independent path), and a trainer asking for another kind of backend is refused.
 */
static void test_backend_once(void)
{
    remat_zoo_opts zo = {.batch = 4, .height = 64, .width = 64, .classes = 10};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_APPROX_MC, .budget_min = true};
    remat_train_opts to = remat_train_opts_default();
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_backend *b = NULL;
    remat_algos *al = NULL;
    remat_schedule *s = NULL;
    uint64_t want, sum[2] = {0, 0};

    to.backend = REMAT_BACKEND_CPU;
    to.threads = 2;
    if (remat_backend_new(&to, &b) == REMAT_ERR_UNSUPPORTED) {
        SKIP("the cpu backend is not in this build");
        return;
    }
    if (remat_zoo_build("resnet18", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_backend_algos(b, g, tg, &al) || !(po.algos = al) || remat_plan(tg, &po, &s, NULL)) {
        CHECK(false, "%s", remat_errmsg());
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        remat_trainer *t = NULL;
        double loss;

        if (remat_trainer_on(b, g, tg, s, &to, &t)) {
            CHECK(false, "trainer %d: %s", k, remat_errmsg());
            continue;
        }
        for (int i = 0; i < 3; i++)
            CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
        sum[k] = remat_trainer_param_checksum(t);
        remat_trainer_free(t);
    }
    want = train3(g, tg, s, "own backend", NULL);
    CHECK(sum[0] == want && sum[1] == want, "on one backend %016llx, %016llx; own %016llx",
          (unsigned long long)sum[0], (unsigned long long)sum[1], (unsigned long long)want);
    {
        remat_train_opts ref = remat_train_opts_default();
        remat_trainer *t = NULL;

        CHECK(remat_trainer_on(b, g, tg, s, &ref, &t) == REMAT_ERR_ARG && !t,
              "a ref trainer on a cpu backend: %s", remat_errmsg());
        core_clear_error();
    }
out:
    remat_schedule_free(s);
    remat_algos_free(al);
    remat_backend_free(b);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * A one-block causal self-attention language model built from the transformer ops:
 * tokens (2, 8) -> embedding (vocab 11, width 6) -> layer_norm -> scores Q K^T (with
 * Q = K = V = the normalized embeddings, 1/sqrt(6) folded into nothing: the op is what is
 * tested) -> causal softmax_last -> P V -> gelu -> matmul by a (6, 11) head (a shared B:
 * a parameter-like input) -> token_ce against next-token ids. Integer ids and targets
 * flow through the graph and the trainer (drawn from the seed, within the vocabulary);
 * every strategy that plans it trains three steps to the bits of none on the reference
 * backend, and the loss falls over ten steps of none.
 */
static remat_graph *tiny_lm(void)
{
    remat_graph *g = NULL;
    int32_t ids, e, n, s, p, a, h, head, y, lab, in[2];

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    ids = remat_graph_tokens(g, "ids", 2, (int64_t[]){2, 8});
    e = remat_graph_add(g, REMAT_OP_EMBEDDING, &ids, 1,
                        &(remat_attrs){.vocab = 11, .out_channels = 6}, "wte");
    n = remat_graph_add(g, REMAT_OP_LAYER_NORM, &e, 1, NULL, "ln");
    in[0] = n;
    in[1] = n;
    s = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true}, "scores");
    p = remat_graph_add(g, REMAT_OP_SOFTMAX_LAST, &s, 1, &(remat_attrs){.causal = true}, "probs");
    in[0] = p;
    a = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, NULL, "attend");
    h = remat_graph_add(g, REMAT_OP_GELU, &a, 1, NULL, "gelu");
    head = remat_graph_input(g, "head", 2, (int64_t[]){6, 11});
    in[0] = h;
    in[1] = head;
    y = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, NULL, "logits3");
    lab = remat_graph_tokens(g, "next", 2, (int64_t[]){2, 8});
    in[0] = y;
    in[1] = lab;
    remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
    CHECK(remat_graph_status(g) == REMAT_OK, "tiny_lm: %s", remat_errmsg());
    return g;
}

static void test_tiny_lm(void)
{
    static const remat_strategy ss[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_APPROX_MC,
                                        REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_EXACT_TC};
    remat_graph *g = tiny_lm();
    remat_tgraph *tg = NULL;
    remat_trainer *base = NULL;
    double first = 0, last = 0;

    if (remat_graph_status(g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "tiny_lm: %s", remat_errmsg());
        remat_graph_free(g);
        return;
    }
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        remat_schedule *sched = NULL;
        remat_trainer *t = train(g, tg, ss[i], REMAT_BACKEND_REF, &sched, "tiny_lm");

        if (t && base)
            CHECK(remat_trainer_param_checksum(t) == remat_trainer_param_checksum(base),
                  "tiny_lm %s: other bits than none", remat_strategy_name(ss[i]));
        if (!base)
            base = t;
        else
            remat_trainer_free(t);
        remat_schedule_free(sched);
    }
    for (int k = 0; base && k < 10; k++) {
        double loss;

        CHECK_OK(remat_trainer_step(base, NULL, NULL, &loss));
        first = k ? first : loss;
        last = loss;
    }
    printf("  tiny_lm: loss %.4f -> %.4f over ten steps\n", first, last);
    CHECK(base && last < first, "tiny_lm: the loss did not fall (%g -> %g)", first, last);
    remat_trainer_free(base);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_backend_once);
    RUN(test_bn_one_value);
    RUN(test_forward_hook);
    RUN(test_kernels_fit);
    RUN(test_reproducible);
    RUN(test_ref);
    RUN(test_cpu);
    RUN(test_tiny_lm);
    return harness_end();
}
