/*
 * test_lowerset.c - the families of lower sets of the planners' graph (plan/lowerset.c),
 * against the definitions (DESIGN.md section 4), by brute force: every subset of random
 * DAGs of up to 12 nodes, kept when no edge enters it from outside, against lsets_build
 * (the family, the order by size, M, T, the boundary, M(δ+(L)) + M(δ−(δ+(L)) \ L)) and
 * its cap; the approximate family against {∅, V} and the ancestor closures found by a
 * fixpoint. (The multi-word graphs' families are checked in test_dp.c.)
 *
 * Seed: REMAT_SEED (printed); the test restarts from it, so it can be rerun.
 */
#include "plan_util.h"

/* The exact family's cap: at the count it fits, one below it is refused. */
static void check_cap(const struct dag *d, int32_t count, int gi)
{
    struct lsets ls;
    remat_status st = lsets_build(d, true, count, &ls);

    CHECK(st == REMAT_OK, "graph %d: cap %d = the count refused: %s", gi, count,
          remat_errmsg());
    if (!st)
        lsets_fini(&ls);
    st = lsets_build(d, true, count - 1, &ls);
    CHECK(st == REMAT_ERR_UNSUPPORTED, "graph %d: cap %d below %d sets: %s", gi, count - 1,
          count, remat_status_name(st));
    if (!st)
        lsets_fini(&ls);
}

static void test_lowersets(void)
{
    static struct hg g;
    static bset all[1 << 12], fam[HN + 2];
    int n_graphs = 600, n_sets = 0;

    reseed(1);
    for (int gi = 0; gi < n_graphs; gi++) {
        struct dag d;
        int32_t n_all, n_fam;

        random_small(&g, 12, gi % 3 != 2);
        to_dag(&g, &d);
        n_all = all_lower_small(&g, all);
        n_fam = approx_family(&g, fam);
        n_sets += n_all;
        for (int32_t i = 0; i < n_fam; i++)
            REMAT_ASSERT_TEST(is_lower(&g, &fam[i]));
        if (check_family(&g, &d, true, all, n_all, gi) &&
            check_family(&g, &d, false, fam, n_fam, gi))
            check_cap(&d, n_all, gi);
        dag_fini(&d);
    }
    printf("  %d graphs of 1..12 nodes, %d lower sets\n", n_graphs, n_sets);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    RUN_TIMED(test_lowersets);
    return harness_end();
}
