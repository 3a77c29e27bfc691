/*
 * test_dp_scale.c - the lower-set DP on large graphs: the least-budget search on a large
 * family (plan/dp_min_budget.c; past THIN_FROM sets it starts from a thinned family's
 * bound and keeps its pairs on two threads, and hands the pairs to the plans after it),
 * whose answers are the flat DP's own (test_dp.c checks the DP against brute force on
 * small graphs); and past DP_SIM_MAX_NODES, the simulator's model where its walks are
 * affordable (plan_dp.c, struct dp_memo), against Chen's plans and the authors' bound.
 */
#include "plan_util.h"
#include "plan/dp_run.h"
#include "plan/dp_sim.h"
#include "plan/planners.h"

/*
 * The least budget's search on a family past THIN_FROM sets (GPT-2 of 450 layers: 16,658
 * lower sets), which starts from a thinned family's bound and keeps its pairs on two
 * threads: the memory-centric DP over every pair (coarse_at INT64_MAX) finds a chain at
 * that budget and none a byte below; one thread (a caller's allocator), handed that bound
 * (kusumoto_min_budget_bound) instead of working it out, finds the same. The bound is at
 * least the least budget, and the DP finds a chain there.
 * The pairs the search kept, read by kusumoto_plan_pairs at that budget, give the chains
 * (memory- and time-centric) the DP gives working them out.
 */
/* Whether chains c and e (their results r and q) are the same. */
static bool same_plan(const struct dag *d, const struct chain *c, const struct dp_result *r,
                      const struct chain *e, const struct dp_result *q)
{
    return r->feasible && q->feasible && r->bound == q->bound && r->overhead == q->overhead &&
           c->n_blocks == e->n_blocks &&
           !memcmp(c->block, e->block, sizeof *c->block * (size_t)d->n) &&
           !memcmp(c->kept, e->kept, sizeof *c->kept * (size_t)d->n);
}

/*
 * A time-centric plan past 2^20 pairs at a budget above the kept pairs' (pc, kept at the
 * least budget mb) keeps its own in their memory and hands them back (kusumoto_plan.c):
 * its chain is the one worked out without pairs, pc then holds, row by row, the pairs a
 * fresh dp_keep_pairs keeps at that budget, and they give the same chains at mb as
 * before. c and e: room for chains.
 */
static void pairs_regrown(const struct dag *d, const struct lsets *ls, struct dp_pairs *pc,
                          size_t mb, struct chain *c, struct chain *e)
{
    struct dp_result r, q;
    struct dp p;
    size_t b = mb, before = pc->budget;
    bool rows = true;

    while (kusumoto_pairs(ls, b) < ((int64_t)1 << 21) && b < SIZE_MAX / 4)
        b *= 2;
    CHECK_OK(kusumoto_plan(d, ls, false, b, INT64_MAX, NULL, c, &r));
    CHECK_OK(kusumoto_plan_pairs(d, ls, false, b, INT64_MAX, NULL, pc, 0, e, &q));
    CHECK(same_plan(d, c, &r, e, &q), "at %zu: the chain with the pairs regrown differs", b);
    CHECK(pc->p && pc->budget == b && before < b, "pairs kept at %zu, not regrown at %zu",
          pc->budget, b);
    REMAT_ASSERT_TEST(dp_init(&p, d, ls, b) == REMAT_OK);
    REMAT_ASSERT_TEST(dp_keep_pairs(&p));
    for (int32_t j = 1; rows && j < ls->n; j++) {
        size_t n = p.pc.end[j] - p.pc.at[j];

        rows = n == pc->end[j] - pc->at[j];
        for (size_t k = 0; rows && k < n; k++)
            rows = !memcmp(&p.pc.p[p.pc.at[j] + k], &pc->p[pc->at[j] + k], sizeof *pc->p);
    }
    CHECK(rows && p.pc.n == pc->n, "at %zu: %zu pairs regrown, %zu kept afresh, rows %s", b,
          pc->n, p.pc.n, rows ? "the same" : "differ");
    printf("  pairs regrown from %zu to %zu bytes: %zu\n", before, b, pc->n);
    dp_fini(&p);
    CHECK_OK(kusumoto_plan(d, ls, false, mb, 0, NULL, c, &r));
    CHECK_OK(kusumoto_plan_pairs(d, ls, false, mb, 0, NULL, pc, 0, e, &q));
    CHECK(same_plan(d, c, &r, e, &q), "at %zu: the chain with the regrown pairs differs", mb);
}

static void test_search_large(void)
{
    remat_zoo_opts zo = {.batch = 1, .layers = 450};
    remat_allocator one = {harness_one_thread_alloc, NULL};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct dag d;
    struct lsets ls;
    struct chain c, c2;
    struct dp_result at, below, kept;
    struct dp_pairs pc;
    size_t mb[2] = {0, 0}, ub = 0;

    CHECK_OK(remat_zoo_build("gpt2", &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    for (int k = 0; k < 2; k++) {
        d.al = k ? &one : NULL; /* the same blocks: both are malloc's */
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
        CHECK(ls.n > 2048, "%d lower sets: not past THIN_FROM", ls.n);
        if (k == 1)
            CHECK_OK(kusumoto_min_budget_bound(&d, &ls, &ub));
        CHECK_OK(kusumoto_min_budget_pairs(&d, &ls, NULL, &mb[k], &pc, ub));
        CHECK(pc.p && pc.budget >= mb[k], "no pairs kept at or above %zu", mb[k]);
        if (k == 0) {
            chain_alloc(&c, d.n);
            chain_alloc(&c2, d.n);
            for (int mc = 0; mc < 2; mc++) {
                CHECK_OK(kusumoto_plan(&d, &ls, mc, mb[0], 0, NULL, &c, &at));
                CHECK_OK(kusumoto_plan_pairs(&d, &ls, mc, mb[0], 0, NULL, &pc, 0, &c2, &kept));
                CHECK(at.feasible && kept.feasible && at.bound == kept.bound &&
                      at.overhead == kept.overhead && c.n_blocks == c2.n_blocks &&
                      !memcmp(c.block, c2.block, sizeof *c.block * (size_t)d.n) &&
                      !memcmp(c.kept, c2.kept, sizeof *c.kept * (size_t)d.n),
                      "%s at %zu: with the kept pairs bound %zu overhead %.6f, %d blocks; "
                      "worked out %zu %.6f, %d", mc ? "memory-centric" : "time-centric",
                      mb[0], kept.bound, kept.overhead, c2.n_blocks, at.bound, at.overhead,
                      c.n_blocks);
            }
            pairs_regrown(&d, &ls, &pc, mb[0], &c, &c2);
            chain_free(&c2);
            CHECK_OK(kusumoto_plan(&d, &ls, true, mb[0], INT64_MAX, NULL, &c, &at));
            CHECK_OK(kusumoto_plan(&d, &ls, true, mb[0] - 1, INT64_MAX, NULL, &c, &below));
            CHECK(at.feasible && !below.feasible && at.bound <= mb[0],
                  "least budget %zu: feasible %d (bound %zu), a byte below %d", mb[0],
                  at.feasible, at.bound, below.feasible);
            printf("  %d lower sets; least budget %zu\n", ls.n, mb[0]);
        } else {
            CHECK_OK(kusumoto_plan(&d, &ls, true, ub, INT64_MAX, NULL, &c, &at));
            CHECK(ub >= mb[1] && at.feasible, "the thinned family's bound %zu: below the "
                  "least budget %zu, or no chain there (%d)", ub, mb[1], at.feasible);
            printf("  the thinned family's bound %zu (%+.3f%%)\n", ub,
                   100.0 * ((double)ub / (double)mb[1] - 1));
            chain_free(&c);
        }
        dp_pairs_fini(&pc);
        lsets_fini(&ls);
    }
    d.al = NULL;
    CHECK(mb[0] == mb[1], "least budget on two threads %zu, on one %zu", mb[0], mb[1]);
    dag_fini(&d);
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* kusumoto_sim_work against the sum over every pair of sets whose M lie within the
 * budget of each other, on two zoo graphs' approximate families at budgets from 0 to
 * past 2 M(V). */
static void test_sim_work(void)
{
    const char *nets[] = {"resnet50", "gpt2"};

    for (size_t k = 0; k < sizeof nets / sizeof nets[0]; k++) {
        remat_zoo_opts zo = {.batch = 1, .layers = k ? 4 : 0};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        struct dag d;
        struct lsets ls;

        CHECK_OK(remat_zoo_build(nets[k], &zo, NULL, &g));
        CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
        if (!tg) {
            remat_graph_free(g);
            continue;
        }
        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
        for (int f = 0; f <= 7; f++) {
            size_t mv = ls.m[ls.n - 1], b = f == 0 ? 0 : f == 7 ? 2 * mv + 1 : mv >> (6 - f);
            long long brute = 0;

            for (int32_t j = 1; j < ls.n; j++)
                for (int32_t i = 0; i < j; i++)
                    if (ls.m[j] - ls.m[i] <= b)
                        brute += ls.size[j] - ls.size[i];
            CHECK(kusumoto_sim_work(&ls, b) == brute, "%s, budget %zu: %lld, every pair %lld",
                  nets[k], b, (long long)kusumoto_sim_work(&ls, b), brute);
        }
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/* One plan of tg: its status, activation budget, simulated peak and overhead. */
struct dp_out {
    remat_status st;
    size_t budget, peak;
    double overhead;
    size_t n_steps;
};

static struct dp_out plan_one(const remat_tgraph *tg, remat_strategy s, size_t total,
                              bool authors)
{
    remat_plan_opts o = {.strategy = s, .budget_min = total == 0, .budget_bytes = total,
                         .authors_bound = authors};
    remat_schedule *sc = NULL;
    remat_plan_info pi;
    remat_sim_result r;
    struct dp_out out = {0};

    out.st = remat_plan(tg, &o, &sc, &pi);
    if (!out.st && !(out.st = remat_sim_run(tg, sc, &r))) {
        out.budget = pi.activation_budget_bytes;
        out.peak = r.activation_peak_bytes;
        out.overhead = r.overhead;
        out.n_steps = remat_schedule_n_steps(sc);
    }
    remat_schedule_free(sc);
    return out;
}

/*
 * Graphs past DP_SIM_MAX_NODES, whose approximate family is judged by the simulator's
 * model worked out by rows (dp_sim_row.c) where a run's pairs number at most
 * DP_SIM_MAX_PAIRS: GPT-2 of 48 layers at batch 1 (1,782 nodes; every pair of its family
 * is within the cap) and ResNet-1001 (3,346 nodes; past the cap from some budget on).
 * The DPs' least peaks are at most Chen's (the measure: with the authors' bound
 * alone they were 0.566 GB against chen-greedy's 0.490 on GPT-2-48, 78 MB against 56 on
 * ResNet-1001), and the exact DPs' at most the approximate ones'; a byte below the
 * least budget is refused; at each of Chen's least peaks approx-tc recomputes at most
 * what Chen's plan does; at budgets from it to past where the model stops being
 * affordable every budget gets a plan within it, with at most the recomputation of the
 * authors' bound's plan at that budget, and past that point the authors' bound's plan
 * itself, or, where that plan peaks more than 1/DP_SIM_ROOM_SHARE of the budget below
 * it, a plan that recomputes less (the model's; GPT-2-48: at all four budgets past the
 * reach); within the model's reach, exact-tc's plan recomputes at most what approx-tc's
 * and exact-tc's with the authors' bound do (GPT-2-48).
 */
/* Whether the model no longer plans at budget b (plan_dp.c, fam_at): A the authors'
 * bound's least budget, ls the family with the model. */
static bool past_reach(const struct lsets *ls, size_t A, size_t b)
{
    return kusumoto_pairs(ls, b) > (b > A + A / 10 ? DP_SIM_WIDE_PAIRS : DP_SIM_MAX_PAIRS);
}

static void past_limit(const char *model, int layers, int n_budgets, bool exact)
{
    remat_zoo_opts zo = {.batch = 1, .layers = layers};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct dag d;
    struct lsets ls, au;
    struct dp_out tc, mc, etc, emc, sq, gr, below;
    size_t res, top, all, A = 0;
    int n_past = 0, n_room = 0;

    CHECK_OK(remat_zoo_build(model, &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
    REMAT_ASSERT_TEST(dp_sim_new(tg, &d, &ls, &ls.sim) == REMAT_OK);
    /* the authors' bound's least budget A (plan_dp.c: the model past 1.1 A only while a
     * run's pairs number at most DP_SIM_WIDE_PAIRS) */
    REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &au) == REMAT_OK);
    CHECK_OK(kusumoto_min_budget(&d, &au, NULL, &A));
    lsets_fini(&au);
    CHECK(d.n > DP_SIM_MAX_NODES && dp_sim_rows(ls.sim), "%s: %d nodes, rows %d", model, d.n,
          dp_sim_rows(ls.sim));
    res = remat_tgraph_resident_bytes(tg);
    tc = plan_one(tg, REMAT_STRATEGY_APPROX_TC, 0, false);
    mc = plan_one(tg, REMAT_STRATEGY_APPROX_MC, 0, false);
    etc = exact ? plan_one(tg, REMAT_STRATEGY_EXACT_TC, 0, false) : tc;
    emc = exact ? plan_one(tg, REMAT_STRATEGY_EXACT_MC, 0, false) : mc;
    sq = plan_one(tg, REMAT_STRATEGY_CHEN_SQRTN, 0, false);
    gr = plan_one(tg, REMAT_STRATEGY_CHEN_GREEDY, 0, false);
    CHECK_OR(!tc.st && !mc.st && !etc.st && !emc.st && !sq.st && !gr.st, goto done,
             "%s: a plan at min failed: %s", model, remat_errmsg());
    printf("  %s: least peaks: approx-tc %zu, approx-mc %zu, exact-tc %zu, exact-mc %zu, "
           "chen-sqrtn %zu, chen-greedy %zu\n", model, tc.peak, mc.peak, etc.peak, emc.peak,
           sq.peak, gr.peak);
    CHECK(tc.peak <= sq.peak && tc.peak <= gr.peak && mc.peak <= sq.peak &&
              mc.peak <= gr.peak,
          "%s: the DPs' least peaks %zu (tc), %zu (mc) against Chen's %zu, %zu", model, tc.peak,
          mc.peak, sq.peak, gr.peak);
    /* the exact family holds the approximate one: its least peaks are at most theirs */
    CHECK(etc.peak <= tc.peak && emc.peak <= mc.peak, "%s: exact-tc %zu against approx-tc "
          "%zu, exact-mc %zu against approx-mc %zu", model, etc.peak, tc.peak, emc.peak,
          mc.peak);
    below = plan_one(tg, REMAT_STRATEGY_APPROX_TC, res + tc.budget - 1, false);
    CHECK(below.st == REMAT_ERR_INFEASIBLE, "%s: a byte below the least budget: %s", model,
          remat_status_name(below.st));
    /* at each of Chen's least peaks, approx-tc recomputes at most what Chen's plan does */
    for (int k = 0; k < 2; k++) {
        const struct dp_out *ch = k ? &gr : &sq;
        struct dp_out at = plan_one(tg, REMAT_STRATEGY_APPROX_TC, res + ch->peak, false);

        CHECK(!at.st && at.peak <= ch->peak && at.overhead <= ch->overhead,
              "%s: at %s's peak %zu (overhead %.4f): approx-tc %s, peak %zu, overhead %.4f",
              model, k ? "chen-greedy" : "chen-sqrtn", ch->peak, ch->overhead,
              remat_status_name(at.st), at.peak, at.overhead);
    }
    /* the first budget (doubling from the least) past which the model is not affordable,
     * or (every pair within the cap) twice the least */
    all = 2 * ls.m[ls.n - 1] + 1;
    for (top = 2 * tc.budget; top < all && !past_reach(&ls, A, top); top *= 2)
        ;
    if (top >= all)
        top = 2 * tc.budget;
    for (int k = 0; k <= n_budgets; k++) {
        size_t b = tc.budget + (top + top / 2 - tc.budget) / (size_t)n_budgets * (size_t)k;
        struct dp_out m = plan_one(tg, REMAT_STRATEGY_APPROX_TC, res + b, false);
        struct dp_out a = plan_one(tg, REMAT_STRATEGY_APPROX_TC, res + b, true);
        bool past = past_reach(&ls, A, b), room, same;

        n_past += past;
        CHECK_OR(!m.st && m.peak <= b, continue, "%s, budget %zu: %s, peak %zu", model, b,
                 remat_status_name(m.st), m.peak);
        CHECK(a.st || m.overhead <= a.overhead, "%s, budget %zu: overhead %.4f, the authors' "
              "bound's %.4f", model, b, m.overhead, a.overhead);
        /* past it, the authors' bound's plan, or where that leaves room below b (and the
         * model's pairs are within DP_SIM_MAX_PAIRS) the model's where it recomputes less */
        room = !a.st && a.peak < b - b / DP_SIM_ROOM_SHARE &&
               kusumoto_pairs(&ls, b) <= DP_SIM_MAX_PAIRS;
        same = !a.st && m.peak == a.peak && m.overhead == a.overhead && m.n_steps == a.n_steps;
        n_room += past && room && !same;
        CHECK(!past || same || (room && m.overhead < a.overhead),
              "%s, budget %zu, past the model's reach%s: peak %zu overhead %.4f steps %zu; the "
              "authors' bound's %zu %.4f %zu", model, b, room ? " (room left)" : "", m.peak,
              m.overhead, m.n_steps, a.peak, a.overhead, a.n_steps);
        if (exact && !past && (k == 1 || k == 2)) { /* exact-tc: the better of two plans */
            struct dp_out e = plan_one(tg, REMAT_STRATEGY_EXACT_TC, res + b, false);
            struct dp_out ea = plan_one(tg, REMAT_STRATEGY_EXACT_TC, res + b, true);

            CHECK(!e.st && e.peak <= b && e.overhead <= m.overhead &&
                      (ea.st || e.overhead <= ea.overhead),
                  "%s, budget %zu: exact-tc %s, peak %zu, overhead %.4f; approx-tc %.4f, "
                  "exact-tc with the authors' bound %.4f", model, b, remat_status_name(e.st),
                  e.peak, e.overhead, m.overhead, ea.overhead);
        }
    }
    printf("  %s: %d budgets, %d past the model's reach, %d of them the model's plan\n",
           model, n_budgets + 1, n_past, n_room);
    CHECK(n_past > 0 || top == 2 * tc.budget, "%s: no budget past the reach", model);
done:
    dp_sim_free(ls.sim);
    lsets_fini(&ls);
    dag_fini(&d);
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Past DP_SIM_FAMILY_PAIRS at the authors' least budget the model's family is thinned
 * (GPT-2 of 200 layers: 7,408 sets, 1.2 10^6 pairs; ResNet-2498: 8,337 sets, 2.3 10^6):
 * still the DPs' least peaks at most Chen's (with the authors' bound alone: 0.855
 * against chen-greedy's 0.720 GB, 123 MB against 88.5), each plan within its budget and
 * a byte below refused. */
static void test_model_thinned(void)
{
    static const struct { const char *model; int layers; } nets[] = {{"gpt2", 200},
                                                                      {"resnet2498", 0}};

    for (size_t k = 0; k < sizeof nets / sizeof *nets; k++) {
        remat_zoo_opts zo = {.batch = 1, .layers = nets[k].layers};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        struct dp_out tc, mc, sq, gr, below;

        CHECK_OK(remat_zoo_build(nets[k].model, &zo, NULL, &g));
        CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
        if (tg) {
            tc = plan_one(tg, REMAT_STRATEGY_APPROX_TC, 0, false);
            mc = plan_one(tg, REMAT_STRATEGY_APPROX_MC, 0, false);
            sq = plan_one(tg, REMAT_STRATEGY_CHEN_SQRTN, 0, false);
            gr = plan_one(tg, REMAT_STRATEGY_CHEN_GREEDY, 0, false);
            printf("  %s: least peaks: approx-tc %zu, approx-mc %zu, chen-sqrtn %zu, "
                   "chen-greedy %zu\n", nets[k].model, tc.peak, mc.peak, sq.peak, gr.peak);
            CHECK(!tc.st && !mc.st && !sq.st && !gr.st && tc.peak <= tc.budget &&
                      mc.peak <= mc.budget && tc.peak <= sq.peak && tc.peak <= gr.peak &&
                      mc.peak <= sq.peak && mc.peak <= gr.peak,
                  "%s: approx-tc %zu (budget %zu), approx-mc %zu (%zu), Chen's %zu, %zu",
                  nets[k].model, tc.peak, tc.budget, mc.peak, mc.budget, sq.peak, gr.peak);
            below = plan_one(tg, REMAT_STRATEGY_APPROX_MC,
                             remat_tgraph_resident_bytes(tg) + mc.budget - 1, false);
            CHECK(below.st == REMAT_ERR_INFEASIBLE, "%s: a byte below the least budget: %s",
                  nets[k].model, remat_status_name(below.st));
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/*
 * kusumoto_plan_within (hybrid's sweep): on GPT-2 of 200 layers' approximate family
 * thinned to 2,048 sets (as the sweep's), at budgets from its least to the memory of
 * every value, each chain the beam ends with has an overhead within w of the optimum's
 * (kusumoto_plan) as the DP counts them (res.units: the proof is in those), and its exact
 * overhead within half a unit a block of its count. The beam must have ended some of
 * them (res.near), and at w = 0 the chain is the optimum's, block for block. (A beam of
 * one state a set bounded only by the search's first upper bound ends two of these
 * chains a unit above the optimum, 2.5e-5 of it, which w = 1e-5 refuses.)
 */
static void test_within(void)
{
    const double w = 1e-5;
    remat_zoo_opts zo = {.batch = 1, .layers = 200};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct dag d;
    struct lsets full, ls;
    struct chain c, e;
    size_t least = 0;
    int near = 0;

    CHECK_OK(remat_zoo_build("gpt2", &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &full) == REMAT_OK);
    REMAT_ASSERT_TEST(lsets_thin(&d, &full, 2048, &ls) == REMAT_OK);
    CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &least));
    chain_alloc(&c, d.n);
    chain_alloc(&e, d.n);
    for (int f = 1; f <= 6; f++) {
        size_t b = least + (size_t)((double)(ls.m[ls.n - 1] - least) * f / 8);
        double unit = 1.0 / (8.0 * d.n); /* one unit of overhead, as a fraction of T(V) */
        struct dp_result opt, nr, z;

        CHECK_OK(kusumoto_plan(&d, &ls, false, b, 0, NULL, &e, &opt));
        CHECK_OK(kusumoto_plan_within(&d, &ls, b, 0, w, &c, &nr));
        if (!opt.feasible || !nr.feasible) {
            CHECK(false, "budget %zu: feasible %d, within %d", b, opt.feasible, nr.feasible);
            continue;
        }
        near += nr.near;
        CHECK(!opt.near && (double)nr.units <= (1 + w) * (double)opt.units &&
                  fabs(nr.overhead - (double)nr.units * unit) <= 0.5 * unit * c.n_blocks,
              "budget %zu: overhead %.8f, %lld units (%d blocks, beam %d); the optimum "
              "%.8f, %lld", b, nr.overhead, (long long)nr.units, c.n_blocks, nr.near,
              opt.overhead, (long long)opt.units);
        printf("  budget %zu: optimum %lld units, within %lld%s\n", b, (long long)opt.units,
               (long long)nr.units, nr.near ? " (the beam's)" : "");
        CHECK_OK(kusumoto_plan_within(&d, &ls, b, 0, 0, &c, &z));
        CHECK(!z.near && z.overhead == opt.overhead && c.n_blocks == e.n_blocks &&
                  !memcmp(c.block, e.block, sizeof *c.block * (size_t)d.n),
              "budget %zu, within 0: overhead %.7f, %d blocks; the optimum %.7f, %d", b,
              z.overhead, c.n_blocks, opt.overhead, e.n_blocks);
    }
    CHECK(near > 0, "the beam ended none of the chains");
    chain_free(&c);
    chain_free(&e);
    lsets_fini(&ls);
    lsets_fini(&full);
    dag_fini(&d);
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Whether c is a chain of lower sets of d: every node in a block 1 .. n_blocks, each
 * block holding one, and no node in an earlier block than a predecessor. */
static bool is_chain(const struct dag *d, const struct chain *c)
{
    int32_t *count = calloc((size_t)c->n_blocks + 1, sizeof *count);
    bool ok = count != NULL;

    for (int32_t v = 0; ok && v < d->n; v++) {
        ok = c->block[v] >= 1 && c->block[v] <= c->n_blocks;
        for (int32_t k = d->pred_at[v]; ok && k < d->pred_at[v + 1]; k++)
            ok = c->block[d->pred[k]] <= c->block[v];
        if (ok)
            count[c->block[v]]++;
    }
    for (int32_t b = 1; ok && b <= c->n_blocks; b++)
        ok = count[b] > 0;
    free(count);
    return ok;
}

/*
 * The two-stage search (kusumoto_plan.c, plan_refined; forced here past one pair) on
 * GPT-2 of 200 layers' whole family near its least budget, where the coarse restriction
 * stays off: its chain is a chain of the family's lower sets, chosen among fewer of them
 * than the family holds and more than the drops (lsets_drops_keep); it recomputes no less
 * than the flat DP's optimum (every pair, exact), and within w of the optimum over the
 * drops alone (the first stage's family, which the second holds), and within 2% of the
 * flat optimum (the measure of a fast plan's quality).
 */
static void test_two_stage(void)
{
    const double w = 1e-3;
    remat_zoo_opts zo = {.batch = 1, .layers = 200};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct dag d;
    struct lsets ls, dr;
    struct chain c, e;
    uint8_t *keep;
    size_t least = 0;
    int32_t n_drops = 0;

    CHECK_OK(remat_zoo_build("gpt2", &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
    keep = malloc((size_t)ls.n);
    REMAT_ASSERT_TEST(keep != NULL);
    lsets_drops_keep(&d, &ls, keep);
    for (int32_t i = 0; i < ls.n; i++)
        n_drops += keep[i];
    REMAT_ASSERT_TEST(lsets_pick(&ls, keep, &dr) == REMAT_OK);
    CHECK(dr.n == n_drops && n_drops > 2 && n_drops < ls.n / 2, "%d drops of %d sets", n_drops,
          ls.n);
    CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &least));
    chain_alloc(&c, d.n);
    chain_alloc(&e, d.n);
    kusumoto_set_refine(1);
    for (int f = 1; f <= 3; f++) {
        size_t b = least + (size_t)((double)(ls.m[ls.n - 1] - least) * f / 64);
        struct dp_result opt, two, one;

        CHECK_OK(kusumoto_plan(&d, &ls, false, b, INT64_MAX, NULL, &e, &opt));
        CHECK_OK(kusumoto_plan(&d, &dr, false, b, INT64_MAX, NULL, &e, &one));
        CHECK_OK(kusumoto_plan_pairs(&d, &ls, false, b, 0, NULL, NULL, w, &c, &two));
        if (!opt.feasible || !two.feasible || !one.feasible) {
            CHECK(false, "budget %zu: feasible %d, two stages %d, drops %d", b, opt.feasible,
                  two.feasible, one.feasible);
            continue;
        }
        CHECK(two.n_sets > n_drops && two.n_sets < ls.n && is_chain(&d, &c),
              "budget %zu: chosen among %d sets (%d drops, %d in all), a chain %d", b,
              two.n_sets, n_drops, ls.n, is_chain(&d, &c));
        CHECK(two.units >= opt.units && (double)two.units <= (1 + w) * (double)one.units &&
                  two.overhead <= 1.02 * opt.overhead,
              "budget %zu: %lld units (overhead %.6f); the flat optimum %lld (%.6f), the "
              "drops' %lld", b, (long long)two.units, two.overhead, (long long)opt.units,
              opt.overhead, (long long)one.units);
        printf("  budget %zu: two stages %lld units over %d sets, the flat optimum %lld, the "
               "drops' %lld\n", b, (long long)two.units, two.n_sets, (long long)opt.units,
               (long long)one.units);
    }
    kusumoto_set_refine(0);
    chain_free(&c);
    chain_free(&e);
    free(keep);
    lsets_fini(&dr);
    lsets_fini(&ls);
    dag_fini(&d);
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}


/*
 * Past 1.1 times the authors' least budget, where the model's pairs pass
 * DP_SIM_WIDE_PAIRS, the time-centric plan is the authors' bound's unless that plan
 * leaves room below the budget, where the model's plan is tried too (plan_dp.c,
 * fam_at). GPT-2 of 48 layers at fractions of the way from approx-tc's least total to
 * `none`'s: a plan at a smaller budget fits every larger one, so no plan may recompute
 * more than one at a smaller fraction does (with the authors' bound's plan alone, 15%
 * recomputed 0.351 of the forward where 12% recomputed 0.326; the model's plan at 15%
 * recomputes 0.257), and each recomputes at most what the authors' bound's plan does
 * at its budget.
 */
static void test_model_room(void)
{
    static const double at[] = {0.1, 0.12, 0.15, 0.2, 0.3};
    remat_plan_info least, all;
    remat_sim_result rl;
    double done[REMAT_ARRAY_LEN(at)];
    remat_graph *g = NULL;
    remat_tgraph *tg = gpt2_ends(48, &g, &least, &rl, &all);

    if (!tg) {
        remat_graph_free(g);
        return;
    }
    for (size_t k = 0; k < REMAT_ARRAY_LEN(at); k++) {
        size_t B = least.budget_bytes +
                   (size_t)(at[k] * (double)(all.total_bytes - least.budget_bytes));
        struct dp_out p = plan_one(tg, REMAT_STRATEGY_APPROX_TC, B, false);
        struct dp_out a = plan_one(tg, REMAT_STRATEGY_APPROX_TC, B, true);

        CHECK_OK(p.st);
        CHECK_OK(a.st);
        done[k] = p.overhead;
        printf("  %.0f%%: overhead %.6f (the authors' bound's %.6f)\n", 100 * at[k], p.overhead,
               a.overhead);
        CHECK(p.overhead <= a.overhead, "at %zu bytes: %.6f recomputed, the authors' bound's "
              "plan %.6f", B, p.overhead, a.overhead);
        for (size_t q = 0; q < k; q++)
            CHECK(p.overhead <= done[q], "at %.0f%% %.6f recomputed, at %.0f%% %.6f",
                  100 * at[k], p.overhead, 100 * at[q], done[q]);
    }
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * Where one family's plan follows another's at a budget (past the authors' family's
 * least budget, where the model's family plans; past 1.1 times it, the model's family
 * after the authors' where that plan leaves room), the two are made side by side on two
 * cores (plan_dp.c, fam_pair; where the first plan leaves no room, it stops the second)
 * and one after the other on one (a caller's allocator: core_par_threads_with): the same
 * plan either way. GPT-2 of 48 layers at fractions of the way from approx-tc's least
 * total to `none`'s: approx-tc at 6% and 10% (the model's plan recomputes less: 0.503
 * and 0.384 against 0.612 and 0.492), approx-mc at 6% (the authors' family's plan peaks
 * lower: 0.52 GB against 0.75), exact-tc at 10%, approx-tc at 20% (room: the model's
 * plan, 0.209 against 0.286) and exact-tc at 15% (room, the model's plan). ResNet-1001
 * at 20% and 30%, where the authors' plan leaves no room, with the model's plan beside
 * it (plan_dp_set_room_guess: by default its largest value, a few MB, tells it to plan
 * them one after the other): stopped, and the authors' plan taken.
 */
struct side_case {
    remat_strategy s;
    double at;
};

static void side_by_side(const char *model, int layers, const struct side_case *cases, size_t n)
{
    remat_allocator one = {harness_one_thread_alloc, NULL};
    remat_zoo_opts zo = {.batch = 1, .layers = layers};
    remat_plan_info least, all;
    remat_sim_result rl;
    remat_graph *g[2] = {NULL, NULL};
    remat_tgraph *tg[2] = {zoo_ends(model, layers, &g[0], &least, &rl, &all), NULL};

    if (!tg[0])
        goto out;
    CHECK_OK(remat_zoo_build(model, &zo, &one, &g[1]));
    CHECK_OK(remat_tgraph_from_graph(g[1], NULL, &tg[1]));
    if (!tg[1])
        goto out;
    for (size_t k = 0; k < n; k++) {
        remat_plan_opts o = {.strategy = cases[k].s};
        remat_schedule *s[2] = {NULL, NULL};
        remat_plan_info pi[2];
        remat_sim_result r[2];

        o.budget_bytes = least.budget_bytes +
                         (size_t)(cases[k].at * (double)(all.total_bytes - least.budget_bytes));
        for (int q = 0; q < 2; q++)
            CHECK_OK(remat_plan(tg[q], &o, &s[q], &pi[q]));
        if (s[0] && s[1] && !remat_sim_run(tg[0], s[0], &r[0]) &&
            !remat_sim_run(tg[1], s[1], &r[1])) {
            printf("  %s, %s at %.0f%%: peak %zu, overhead %.6f\n", model,
                   remat_strategy_name(cases[k].s), 100 * cases[k].at,
                   r[0].activation_peak_bytes, r[0].overhead);
            CHECK(harness_same_steps(s[0], s[1]) && pi[0].total_bytes == pi[1].total_bytes &&
                      pi[0].n_dp_sets == pi[1].n_dp_sets,
                  "%s, %s at %zu bytes: two cores %zu steps, peak %zu, overhead %.6f, %lld "
                  "sets; one core %zu steps, %zu, %.6f, %lld", model,
                  remat_strategy_name(cases[k].s), o.budget_bytes,
                  remat_schedule_n_steps(s[0]), r[0].activation_peak_bytes, r[0].overhead,
                  (long long)pi[0].n_dp_sets, remat_schedule_n_steps(s[1]),
                  r[1].activation_peak_bytes, r[1].overhead, (long long)pi[1].n_dp_sets);
        }
        remat_schedule_free(s[0]);
        remat_schedule_free(s[1]);
    }
out:
    for (int k = 0; k < 2; k++) {
        remat_tgraph_free(tg[k]);
        remat_graph_free(g[k]);
    }
}

static void test_families_side_by_side(void)
{
    static const struct side_case gpt[] = {
        {REMAT_STRATEGY_APPROX_TC, 0.06}, {REMAT_STRATEGY_APPROX_TC, 0.1},
        {REMAT_STRATEGY_APPROX_MC, 0.06}, {REMAT_STRATEGY_EXACT_TC, 0.1},
        {REMAT_STRATEGY_APPROX_TC, 0.2},  {REMAT_STRATEGY_EXACT_TC, 0.15}};
    static const struct side_case resnet[] = {{REMAT_STRATEGY_APPROX_TC, 0.2},
                                              {REMAT_STRATEGY_APPROX_TC, 0.3}};

    side_by_side("gpt2", 48, gpt, REMAT_ARRAY_LEN(gpt));
    plan_dp_set_room_guess(1);
    side_by_side("resnet1001", 0, resnet, REMAT_ARRAY_LEN(resnet));
    plan_dp_set_room_guess(0);
}

static void test_model_past_limit(void)
{
    past_limit("gpt2", 48, 6, true);
    past_limit("resnet1001", 0, 4, false);
}

int main(void)
{
    RUN_TIMED(test_search_large);
    RUN_TIMED(test_sim_work);
    RUN_TIMED(test_model_past_limit);
    RUN_TIMED(test_model_thinned);
    RUN_TIMED(test_within);
    RUN_TIMED(test_two_stage);
    RUN_TIMED(test_model_room);
    RUN_TIMED(test_families_side_by_side);
    return harness_end();
}
