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

int main(void)
{
    RUN(test_forward_hook);
    RUN(test_ref);
    RUN(test_cpu);
    return harness_end();
}
