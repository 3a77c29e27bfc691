/*
 * test_plan_zoo.c - the DP strategies of remat_plan on real networks (the random graphs
 * and the hand-worked ones: test_plan.c):
 *  - the zoo (resnet18, googlenet) at the least budget: below none's peak, within the
 *    budget, every backward run as often as none runs it;
 *  - budgets where `none`'s plan fits (ResNet-50 at batch 32, GPT-2): no DP recomputes
 *    more than none's plan, which recomputes nothing;
 *  - when ../shared/graphs is there, the authors' approximate minimum budgets of
 *    ResNet-50 and VGG-19 and their exact ones of ResNet-50 and U-Net;
 *  - progress reports while planning.
 */
#include "plan_util.h"

static void zoo_model(const char *model, const remat_zoo_opts *zo)
{
    static const remat_strategy strat[] = {REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *none = NULL;
    remat_sim_result rn;
    int32_t n_ops;
    int *bwd_none;

    CHECK_OR(remat_zoo_build(model, zo, NULL, &g) == REMAT_OK, return, "%s: %s", model,
             remat_errmsg());
    REMAT_ASSERT_TEST(remat_tgraph_from_graph(g, NULL, &tg) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_NONE}, &none,
                                 NULL) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_sim_run(tg, none, &rn) == REMAT_OK);
    n_ops = remat_tgraph_n_ops(tg);
    bwd_none = calloc((size_t)n_ops, sizeof *bwd_none);
    REMAT_ASSERT_TEST(bwd_none);
    for (size_t i = 0; i < remat_schedule_n_steps(none); i++)
        if (remat_schedule_steps(none)[i].kind == REMAT_STEP_BWD)
            bwd_none[remat_schedule_steps(none)[i].id]++;
    for (int si = 0; si < 2; si++) {
        remat_plan_opts o = {.strategy = strat[si], .budget_min = true};
        remat_plan_info info;
        remat_schedule *s = NULL;
        remat_sim_result r;
        int *bwd = calloc((size_t)n_ops, sizeof *bwd);

        REMAT_ASSERT_TEST(bwd);
        CHECK_OK(remat_plan(tg, &o, &s, &info));
        if (s && remat_sim_run(tg, s, &r) == REMAT_OK) {
            printf("  %s %s: peak %zu (none %zu), min B %zu, %d blocks, overhead %.3f\n",
                   model, remat_strategy_name(strat[si]), r.activation_peak_bytes,
                   rn.activation_peak_bytes, info.activation_budget_bytes, info.n_blocks,
                   r.overhead);
            CHECK(r.activation_peak_bytes < rn.activation_peak_bytes, "%s %s: peak %zu, none "
                  "%zu", model, remat_strategy_name(strat[si]), r.activation_peak_bytes,
                  rn.activation_peak_bytes);
            CHECK(r.activation_peak_bytes <= info.activation_budget_bytes, "%s: peak %zu above "
                  "%zu", model, r.activation_peak_bytes, info.activation_budget_bytes);
            for (size_t i = 0; i < remat_schedule_n_steps(s); i++)
                if (remat_schedule_steps(s)[i].kind == REMAT_STEP_BWD)
                    bwd[remat_schedule_steps(s)[i].id]++;
            for (int32_t o2 = 0; o2 < n_ops; o2++)
                CHECK_OR(bwd[o2] == bwd_none[o2], break, "%s %s: op %d has %d BWD, none %d",
                         model, remat_strategy_name(strat[si]), o2, bwd[o2], bwd_none[o2]);
        } else {
            CHECK(false, "%s %s: no valid schedule: %s", model, remat_strategy_name(strat[si]),
                  remat_errmsg());
        }
        free(bwd);
        remat_schedule_free(s);
    }
    free(bwd_none);
    remat_schedule_free(none);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void test_zoo(void)
{
    zoo_model("resnet18", &(remat_zoo_opts){.batch = 2});
    zoo_model("googlenet", &(remat_zoo_opts){.batch = 2, .aux = 1});
}

/*
 * At a budget `none`'s plan fits (its own packed total), that plan recomputes nothing,
 * so a time-centric DP may not recompute either: approx-tc and exact-tc on ResNet-50 at
 * batch 32 (a downsampling shortcut beside each stage's first block) and GPT-2 (query,
 * key and value side by side) give a plan within the budget with no recomputation
 * (before, approx-tc recomputed 0.094 and 0.102 of the forward there: its lower sets
 * never keep both of two parallel branches). approx-mc at twice that peaks below none's
 * plan or recomputes nothing (before, it took the chain of one block, which recomputed
 * the whole forward at none's very peak). A byte of activations below none's
 * simulated peak the DPs' own chains come back, and so does the authors' bound's
 * (`--authors-bound`, which reproduces their figures).
 */
static void dp_generous(const char *net, const remat_zoo_opts *zo)
{
    static const remat_strategy tc[2] = {REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_EXACT_TC};
    remat_plan_opts no = {.strategy = REMAT_STRATEGY_NONE};
    remat_plan_info ni, pi;
    remat_sim_result nr, r;
    remat_schedule *s = NULL;
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;

    CHECK_OK(remat_zoo_build(net, zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg) {
        remat_graph_free(g);
        return;
    }
    CHECK_OK(remat_plan(tg, &no, &s, &ni));
    CHECK_OK(remat_sim_run(tg, s, &nr));
    remat_schedule_free(s);
    CHECK(nr.overhead == 0, "%s: none recomputes %.6f", net, nr.overhead);
    for (int k = 0; k < 6; k++) {
        remat_plan_opts o = {.strategy = k < 4 ? tc[k % 2] : REMAT_STRATEGY_APPROX_MC,
                             .budget_bytes = ni.total_bytes, .authors_bound = k == 5};
        bool below = k == 2 || k == 3;

        if (below) /* a byte of activations below none's simulated peak */
            o.budget_bytes = remat_tgraph_resident_bytes(tg) + nr.activation_peak_bytes - 1;
        if (k == 4) /* where a block of everything fits */
            o.budget_bytes = 2 * ni.total_bytes;
        s = NULL;
        CHECK_OK(remat_plan(tg, &o, &s, &pi));
        CHECK_OK(remat_sim_run(tg, s, &r));
        remat_schedule_free(s);
        CHECK(pi.total_bytes <= o.budget_bytes, "%s %s: %zu bytes in all, the budget %zu", net,
              remat_strategy_name(o.strategy), pi.total_bytes, o.budget_bytes);
        if (k < 2)
            CHECK(r.overhead == 0 && pi.kept_all && pi.n_blocks == 0,
                  "%s %s at none's total %zu: recomputes %.6f, kept_all %d, %d blocks", net,
                  remat_strategy_name(o.strategy), o.budget_bytes, r.overhead, pi.kept_all,
                  pi.n_blocks);
        else if (k == 4)
            CHECK(r.activation_peak_bytes < nr.activation_peak_bytes || r.overhead == 0,
                  "%s approx-mc at twice none's total: peak %zu (none's %zu), recomputes %.6f", net,
                  r.activation_peak_bytes, nr.activation_peak_bytes, r.overhead);
        else
            CHECK(!pi.kept_all && pi.n_blocks > 0, "%s %s%s%s: none's plan", net,
                  remat_strategy_name(o.strategy), below ? " below none's peak" : "",
                  o.authors_bound ? " (the authors' bound)" : "");
    }
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void test_dp_generous(void)
{
    dp_generous("resnet50", &(remat_zoo_opts){.batch = 32});
    dp_generous("gpt2", &(remat_zoo_opts){.batch = 1});
}

/* The authors' approximate and exact minimum budgets (their solver;
 * ../shared/graphs/README.md). */
static void test_authors(void)
{
    static const struct {
        const char *file;
        double bytes;
    } want[] = {{"cg_resnet50.txt", 1310300253.0}, {"cg_vgg19.txt", 2107110823.0}},
      exact[] = {{"cg_resnet50.txt", 1284744337.0}, {"cg_unet.txt", 5717742155.0}};
    const char *dir = harness_graphs_dir();

    if (!dir) {
        SKIP("no ../shared/graphs/kusumoto");
        return;
    }
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[600];
        remat_tgraph *tg = NULL;
        struct dag d;
        struct lsets ls;
        size_t b = 0;

        snprintf(path, sizeof path, "%s/%s", dir, want[i].file);
        CHECK_OR(remat_tgraph_read_dump(path, NULL, NULL, &tg) == REMAT_OK, continue, "%s: %s",
                 path, remat_errmsg());
        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
        CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &b));
        printf("  %s: approx min budget %zu, the authors' %.0f (%+.3f%%)\n", want[i].file, b,
               want[i].bytes, 100 * ((double)b / want[i].bytes - 1));
        CHECK(fabs((double)b / want[i].bytes - 1) <= 0.01, "%s: %zu, the authors' %.0f",
              want[i].file, b, want[i].bytes);
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
    }
    /* The exact DP: with the authors' lattice (their depth-first numbering) it finds
     * their minimum; over every lower set, no more than that. */
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        char path[600];
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        remat_plan_info pa, pf;
        remat_plan_opts o = {.strategy = REMAT_STRATEGY_EXACT_MC, .budget_min = true,
                             .authors_lattice = true, .authors_bound = true};

        snprintf(path, sizeof path, "%s/%s", dir, exact[i].file);
        CHECK_OR(remat_tgraph_read_dump(path, NULL, NULL, &tg) == REMAT_OK, continue, "%s: %s",
                 path, remat_errmsg());
        CHECK_OK(remat_plan(tg, &o, &s, &pa));
        remat_schedule_free(s);
        o.authors_lattice = false;
        CHECK_OK(remat_plan(tg, &o, &s, &pf));
        remat_schedule_free(s);
        /* the authors' figure is their DP's bound at its least budget */
        printf("  %s: exact min bound %zu (authors' lattice: %zu, %d sets), the authors' "
               "%.0f (%+.3f%%)\n", exact[i].file, pf.dp_bound_bytes,
               pa.dp_bound_bytes, (int)pa.n_lower_sets, exact[i].bytes,
               100 * ((double)pa.dp_bound_bytes / exact[i].bytes - 1));
        CHECK(fabs((double)pa.dp_bound_bytes / exact[i].bytes - 1) <= 0.01,
              "%s: %zu, the authors' %.0f", exact[i].file, pa.dp_bound_bytes,
              exact[i].bytes);
        CHECK(pf.dp_bound_bytes <= pa.dp_bound_bytes, "%s: full %zu > %zu",
              exact[i].file, pf.dp_bound_bytes, pa.dp_bound_bytes);
        remat_tgraph_free(tg);
    }
}

/* What the planner reported (remat_plan_opts.progress). */
struct reports {
    int calls, stages, bad;
    char stage[96];
    double last;
};

static void record(void *ud, const char *stage, double done)
{
    struct reports *r = ud;

    r->calls++;
    r->bad += !(done >= 0 && done <= 1);
    if (strcmp(stage, r->stage)) {
        r->stages++;
        snprintf(r->stage, sizeof r->stage, "%s", stage);
    } else {
        r->bad += done < r->last && done > 0.05; /* a pass goes forward (or starts again) */
    }
    r->last = done;
}

/*
 * Progress while planning: approx-tc at its least budget on ResNet-18 (batch 8) reports
 * the DP's passes (the least-budget bisection, least memory, least time, the frontier):
 * at least three stages, more calls than stages, every fraction in [0, 1], each pass
 * going forward, and the plan is the one made without a callback.
 */
static void test_progress(void)
{
    remat_zoo_opts zo = {.batch = 8};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *a = NULL, *b = NULL;
    remat_plan_info pa, pb;
    struct reports r = {0};

    if (remat_zoo_build("resnet18", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "%s", remat_errmsg());
        goto out;
    }
    {
        remat_plan_opts po = {.strategy = REMAT_STRATEGY_APPROX_TC, .budget_min = true};

        CHECK_OK(remat_plan(tg, &po, &a, &pa));
        po.progress = record;
        po.progress_ud = &r;
        CHECK_OK(remat_plan(tg, &po, &b, &pb));
    }
    printf("  %d calls over %d stages, the last '%s'\n", r.calls, r.stages, r.stage);
    CHECK(r.stages >= 3 && r.calls > r.stages && r.bad == 0, "%d calls, %d stages, %d bad",
          r.calls, r.stages, r.bad);
    CHECK(a && b && remat_schedule_n_steps(a) == remat_schedule_n_steps(b) &&
              pa.budget_bytes == pb.budget_bytes &&
              !memcmp(remat_schedule_steps(a), remat_schedule_steps(b),
                      remat_schedule_n_steps(a) * sizeof(remat_step)),
          "the plan changed with a progress callback");
out:
    remat_schedule_free(a);
    remat_schedule_free(b);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN_TIMED(test_zoo);
    RUN_TIMED(test_dp_generous);
    RUN_TIMED(test_authors);
    RUN_TIMED(test_progress);
    return harness_end();
}
