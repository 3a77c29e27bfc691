/*
 * test_dp_prune.c - the time-centric search's two prunings that come with the
 * Lagrangian bound (dp_least.c, kusumoto.c): further multipliers every state must pass
 * too, and runs whose bound drops to the overhead of a chain they finish along the
 * Lagrangian passes' least paths (the guides).
 *
 * The answer is the search without either (kusumoto_set_second_bound(false),
 * kusumoto_set_guides(false)), itself checked against the brute force in test_dp.
 * With either or both, the search must end at the same overhead with the same chain
 * (set by set from V); and its last run's frontiers must be subsets of those of a run
 * without them at the bound that run started from (the answer's search, run once more
 * at that bound), set by set: both prunings only drop states that no chain within the
 * bound passes through, and the guides only lower the bound. On random DAGs of up to 12
 * nodes and of 65..184 nodes, both families, three budgets, the first try capped or
 * not; then GPT-2 of 24 layers. The test fails if the guides never lowered a run's bound
 * or the further multipliers never removed a state: then it would check nothing.
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it.
 */
#include "plan_util.h"
#include "plan/dp_run.h"

#include <string.h>

/* The most lower sets of an exact family tried (its pairs grow as their square). */
#define EXACT_MAX 1500

struct prune_counts {
    int runs, infeasible, guided, fewer, exact; /* exact: guides met the optimum */
    size_t states[2]; /* in the answer's last runs, in the pruned ones (both on) */
};

/* One search with the prunings set by w (bit 0: the second multiplier, bit 1: guides);
 * false when V is not reached. */
static bool search(struct dp *p, const struct dag *d, const struct lsets *ls, size_t budget,
                   int w, int32_t **lb, int64_t **room, int64_t **lag)
{
    int32_t last = ls->n - 1;
    bool reached;

    kusumoto_set_second_bound(w & 1);
    kusumoto_set_guides(w & 2);
    REMAT_ASSERT_TEST(dp_init(p, d, ls, budget) == REMAT_OK);
    CHECK_OK(dp_run(p, DP_MIN_M, NULL, 0));
    reached = p->fr_n[last] > 0;
    if (reached)
        CHECK_OK(dp_least_time(p, lb, room, lag));
    kusumoto_set_second_bound(true);
    kusumoto_set_guides(true);
    return reached;
}

/* Whether the chains from V of a and b (their least-overhead states) are the same. */
static bool same_chain(const struct dp *a, const struct dp *b)
{
    int32_t last = a->ls->n - 1, pa = a->fr_at[last], pb = b->fr_at[last];

    if (a->pts[pa].t != b->pts[pb].t || a->pts[pa].m != b->pts[pb].m)
        return false;
    while (pa >= 0 && pb >= 0) {
        if (dp_point_set(a, pa) != dp_point_set(b, pb) || a->pts[pa].t != b->pts[pb].t ||
            a->pts[pa].m != b->pts[pb].m)
            return false;
        pa = a->pts[pa].parent;
        pb = b->pts[pb].parent;
    }
    return pa < 0 && pb < 0;
}

/* Whether every state of b's set j is one of a's (both frontiers: t ascending). */
static bool subset(const struct dp *a, const struct dp *b, int32_t j)
{
    const struct point *fa = a->pts + a->fr_at[j], *fb = b->pts + b->fr_at[j];
    int32_t k = 0;

    for (int32_t e = 0; e < b->fr_n[j]; e++) {
        while (k < a->fr_n[j] && fa[k].t < fb[e].t)
            k++;
        if (k == a->fr_n[j] || fa[k].t != fb[e].t || fa[k].m != fb[e].m)
            return false;
    }
    return true;
}

/* The answer (w = 0) against each pruning and both (w = 1, 2, 3). */
static void check_budget(const struct dag *d, const struct lsets *ls, size_t budget,
                         const char *what, int gi, struct prune_counts *k)
{
    struct dp run[4];
    int32_t *lb[4] = {NULL}, last = ls->n - 1;
    int64_t *room[4] = {NULL}, *lag[4] = {NULL};
    bool reached[4];

    for (int w = 0; w < 4; w++)
        reached[w] = search(&run[w], d, ls, budget, w, &lb[w], &room[w], &lag[w]);
    k->runs++;
    k->infeasible += !reached[0];
    if (reached[0] && reached[3]) {
        k->states[0] += run[0].n_pts;
        k->states[1] += run[3].n_pts;
    }
    for (int w = 1; w < 4; w++) {
        struct dp *a = &run[0];
        const struct dp *b = &run[w];
        bool ok = true;

        CHECK_OR(reached[w] == reached[0], continue, "graph %d %s B=%zu: V reached %d "
                 "without the prunings, %d with (%d)", gi, what, budget, (int)reached[0],
                 (int)reached[w], w);
        if (!reached[0])
            continue;
        CHECK_OR(same_chain(a, b), ok = false, "graph %d %s B=%zu: overhead %d without the "
                 "prunings, %d with (%d), or another chain", gi, what, budget,
                 a->pts[a->fr_at[last]].t, b->pts[b->fr_at[last]].t, w);
        /* a guide's chain is one of the DP's: never below the optimum */
        CHECK_OR(b->ub_found >= b->pts[b->fr_at[last]].t, ok = false, "graph %d %s B=%zu: "
                 "a guide finished a chain of overhead %d, below the optimum %d (%d)", gi,
                 what, budget, b->ub_found, b->pts[b->fr_at[last]].t, w);
        if (a->lag) /* else no Lagrangian run: the searches' last runs are the same */
            CHECK_OK(dp_run(a, DP_FRONTIER, lb[0], b->run_ub));
        CHECK_OR(!ok || same_chain(a, b), ok = false, "graph %d %s B=%zu: another chain "
                 "without the prunings at the bound %d (%d)", gi, what, budget, b->run_ub, w);
        for (int32_t j = 0; ok && j < ls->n; j++)
            CHECK_OR(subset(a, b, j), ok = false, "graph %d %s B=%zu: set %d holds a state "
                     "with the prunings (%d) that the search without them does not", gi,
                     what, budget, j, w);
        k->fewer += w == 1 && b->n_pts < a->n_pts;
        k->guided += w == 2 && b->ub_found < INT32_MAX;
        k->exact += w == 2 && b->ub_found == b->pts[b->fr_at[last]].t;
    }
    for (int w = 0; w < 4; w++) {
        core_free(d->al, lb[w], sizeof *lb[w] * (size_t)ls->n);
        core_free(d->al, room[w], sizeof *room[w] * (size_t)ls->n);
        core_free(d->al, lag[w], sizeof *lag[w] * DP_LAG_ROWS * (size_t)ls->n);
        dp_fini(&run[w]);
    }
}

static void check_one(const struct dag *d, const struct lsets *ls, size_t budget,
                      const char *what, int gi, void *ctx)
{
    check_budget(d, ls, budget, what, gi, ctx);
}

static void report(const char *what, const struct prune_counts *k)
{
    printf("  %s: %d searches (%d infeasible), %zu states in the last runs without the "
           "prunings, %zu with; the second multiplier removed states in %d, the guides "
           "lowered the bound in %d (to the optimum in %d)\n", what, k->runs, k->infeasible,
           k->states[0], k->states[1], k->fewer, k->guided, k->exact);
    CHECK(k->fewer > 0, "%s: the second multiplier never removed a state", what);
    CHECK(k->guided > 0, "%s: no guide finished a state", what);
}

/* Both families of each graph at the least budget and a tenth and a third of the way
 * to M(V). */
static void test_prune_random(void)
{
    static const int div[] = {0, 10, 3};
    struct prune_counts small = {0}, narrow = {0};

    each_random_family_budget(11, EXACT_MAX, div, 3, check_one, &small, &narrow);
    printf("  up to 12 nodes: %d searches (%d infeasible), %zu states in the last runs "
           "without the prunings, %zu with\n", small.runs, small.infeasible, small.states[0],
           small.states[1]);
    report("65..184 nodes", &narrow);
}

/* GPT-2 of 24 layers on its approximate family, a tenth and a third of the way from the
 * least budget to M(V), through the Lagrangian runs (the first try capped). */
static void test_prune_gpt2(void)
{
    struct prune_counts k = {0};

    each_gpt2_budget(check_one, &k);
    report("GPT-2, 24 layers", &k);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20261129u;
    RUN_TIMED(test_prune_random);
    RUN_TIMED(test_prune_gpt2);
    return harness_end();
}
