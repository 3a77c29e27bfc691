/*
 * test_dp_scale.c - the lower-set DP's least-budget search on a large family (plan/
 * dp_min_budget.c): past THIN_FROM sets it starts from a thinned family's bound and keeps
 * its pairs on two threads, and hands the pairs to the plans after it. The answers are
 * the flat DP's own (test_dp.c checks the DP against brute force on small graphs).
 */
#include "plan_util.h"

/*
 * The least budget's search on a family past THIN_FROM sets (GPT-2 of 450 layers: 16,658
 * lower sets), which starts from a thinned family's bound and keeps its pairs on two
 * threads: the memory-centric DP over every pair (coarse_at INT64_MAX) finds a chain at
 * that budget and none a byte below; one thread (a caller's allocator) finds the same.
 * The pairs the search kept, read by kusumoto_plan_pairs at that budget, give the chains
 * (memory- and time-centric) the DP gives working them out.
 */
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
    size_t mb[2] = {0, 0};

    CHECK_OK(remat_zoo_build("gpt2", &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    for (int k = 0; k < 2; k++) {
        d.al = k ? &one : NULL; /* the same blocks: both are malloc's */
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
        CHECK(ls.n > 2048, "%d lower sets: not past THIN_FROM", ls.n);
        CHECK_OK(kusumoto_min_budget_pairs(&d, &ls, NULL, &mb[k], &pc));
        CHECK(pc.p && pc.budget >= mb[k], "no pairs kept at or above %zu", mb[k]);
        if (k == 0) {
            chain_alloc(&c, d.n);
            chain_alloc(&c2, d.n);
            for (int mc = 0; mc < 2; mc++) {
                CHECK_OK(kusumoto_plan(&d, &ls, mc, mb[0], 0, NULL, &c, &at));
                CHECK_OK(kusumoto_plan_pairs(&d, &ls, mc, mb[0], 0, NULL, &pc, &c2, &kept));
                CHECK(at.feasible && kept.feasible && at.bound == kept.bound &&
                      at.overhead == kept.overhead && c.n_blocks == c2.n_blocks &&
                      !memcmp(c.block, c2.block, sizeof *c.block * (size_t)d.n) &&
                      !memcmp(c.kept, c2.kept, sizeof *c.kept * (size_t)d.n),
                      "%s at %zu: with the kept pairs bound %zu overhead %.6f, %d blocks; "
                      "worked out %zu %.6f, %d", mc ? "memory-centric" : "time-centric",
                      mb[0], kept.bound, kept.overhead, c2.n_blocks, at.bound, at.overhead,
                      c.n_blocks);
            }
            chain_free(&c2);
            CHECK_OK(kusumoto_plan(&d, &ls, true, mb[0], INT64_MAX, NULL, &c, &at));
            CHECK_OK(kusumoto_plan(&d, &ls, true, mb[0] - 1, INT64_MAX, NULL, &c, &below));
            CHECK(at.feasible && !below.feasible && at.bound <= mb[0],
                  "least budget %zu: feasible %d (bound %zu), a byte below %d", mb[0],
                  at.feasible, at.bound, below.feasible);
            chain_free(&c);
            printf("  %d lower sets; least budget %zu\n", ls.n, mb[0]);
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

int main(void)
{
    RUN_TIMED(test_search_large);
    return harness_end();
}
