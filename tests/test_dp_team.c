/*
 * test_dp_team.c - the lower-set DP's frontier runs with each set shared between the
 * caller and a helper thread (kusumoto.c: the candidates cut at an overhead, each side
 * on its own core, the sides' frontiers joined) against the same runs on one core.
 *
 * The answer is the one-core run's: the time-centric search (dp_least_time, its first
 * tries, the Lagrangian bound and the deepening) must end with the same states, point
 * for point (overhead, memory and parent), and the same range per set. On random DAGs
 * of up to 12 nodes and of 65..184 nodes, both families, at the least budget, a third
 * of the way to keeping everything and at keeping everything, with every set shared
 * (kusumoto_set_split(1)) and the search's first try capped (kusumoto_set_trial) or
 * not (only runs over kept pairs share sets: the capped searches' Lagrangian runs);
 * then GPT-2 of 24 layers with the sets of some work shared. On a machine with one
 * core no team starts and the runs are one core's: the test says so and checks only
 * the states.
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it.
 */
#include "plan_util.h"
#include "plan/dp_run.h"

#include <string.h>

/* The most lower sets of an exact family tried (its pairs grow as their square). */
#define EXACT_MAX 1500

struct team_counts {
    int runs, infeasible;
    size_t split, states;
};

/* The search's states at budget: on one core, then with sets of at least split states
 * read shared. False when they differ (reported). */
static bool same_states(const struct dag *d, const struct lsets *ls, size_t budget,
                        int64_t split, const char *what, int gi, struct team_counts *k)
{
    struct dp run[2];
    int32_t *lb[2] = {NULL, NULL};
    int64_t *room[2] = {NULL, NULL}, *lag[2] = {NULL, NULL};
    bool reached[2] = {false, false}, ok = true;
    int32_t last = ls->n - 1;

    for (int w = 0; w < 2; w++) {
        struct dp *p = &run[w];

        kusumoto_set_split(w ? split : -1);
        REMAT_ASSERT_TEST(dp_init(p, d, ls, budget) == REMAT_OK);
        CHECK_OK(dp_run(p, DP_MIN_M, NULL, 0));
        reached[w] = p->fr_n[last] > 0;
        if (reached[w])
            CHECK_OK(dp_least_time(p, &lb[w], &room[w], &lag[w]));
    }
    kusumoto_set_split(0);
    k->runs++;
    CHECK_OR(reached[0] == reached[1], ok = false, "graph %d %s B=%zu: V reached %d on one "
             "core, %d shared", gi, what, budget, (int)reached[0], (int)reached[1]);
    if (ok && !reached[0])
        k->infeasible++;
    if (ok && reached[0]) {
        const struct dp *a = &run[0], *b = &run[1];

        k->split += b->n_split;
        k->states += a->n_pts;
        CHECK_OR(a->n_pts == b->n_pts, ok = false, "graph %d %s B=%zu: %zu states on one "
                 "core, %zu shared", gi, what, budget, a->n_pts, b->n_pts);
        for (int32_t j = 0; ok && j < ls->n; j++)
            CHECK_OR(a->fr_at[j] == b->fr_at[j] && a->fr_n[j] == b->fr_n[j], ok = false,
                     "graph %d %s B=%zu: set %d holds [%d, +%d) on one core, [%d, +%d) "
                     "shared", gi, what, budget, j, a->fr_at[j], a->fr_n[j], b->fr_at[j],
                     b->fr_n[j]);
        for (size_t q = 0; ok && q < a->n_pts; q++)
            CHECK_OR(a->pts[q].t == b->pts[q].t && a->pts[q].m == b->pts[q].m &&
                     a->pts[q].parent == b->pts[q].parent, ok = false,
                     "graph %d %s B=%zu: state %zu (t %d, m %zu, from %d) on one core, "
                     "(t %d, m %zu, from %d) shared", gi, what, budget, q, a->pts[q].t,
                     a->pts[q].m, a->pts[q].parent, b->pts[q].t, b->pts[q].m,
                     b->pts[q].parent);
    }
    for (int w = 0; w < 2; w++) {
        core_free(d->al, lb[w], sizeof *lb[w] * (size_t)ls->n);
        core_free(d->al, room[w], sizeof *room[w] * (size_t)ls->n);
        core_free(d->al, lag[w], sizeof *lag[w] * DP_LAG_ROWS * (size_t)ls->n);
        dp_fini(&run[w]);
    }
    return ok;
}

static void check_one(const struct dag *d, const struct lsets *ls, size_t budget,
                      const char *what, int gi, void *ctx)
{
    same_states(d, ls, budget, 1, what, gi, ctx);
}

static void check_gpt2_one(const struct dag *d, const struct lsets *ls, size_t budget,
                           const char *what, int gi, void *ctx)
{
    same_states(d, ls, budget, 1024, what, gi, ctx);
}

static void report(const char *what, const struct team_counts *k)
{
    printf("  %s: %d searches (%d infeasible), %zu states in their last runs, %zu sets "
           "shared%s\n", what, k->runs, k->infeasible, k->states, k->split,
           core_par_threads() < 2 ? " (one core: no team)" : "");
    CHECK(core_par_threads() < 2 || k->split > 0, "%s: no set was shared", what);
}

/* Both families of each graph at the least budget, a third of the way to M(V) and M(V). */
static void test_team_random(void)
{
    static const int div[] = {0, 3, 1};
    struct team_counts small = {0, 0, 0, 0}, narrow = {0, 0, 0, 0};

    each_random_family_budget(7, EXACT_MAX, div, 3, check_one, &small, &narrow);
    report("up to 12 nodes", &small);
    report("65..184 nodes", &narrow);
}

/* GPT-2 of 24 layers on its approximate family, a tenth and a third of the way from
 * the least budget to M(V), the sets whose estimated work reaches 1,024 states shared
 * (by default 4,096 and the sets' measured cost, which a test cannot repeat). */
static void test_team_gpt2(void)
{
    struct team_counts k = {0, 0, 0, 0};

    each_gpt2_budget(check_gpt2_one, &k); /* the Lagrangian runs, which read kept pairs */
    report("GPT-2, 24 layers", &k);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20261129u;
    RUN_TIMED(test_team_random);
    RUN_TIMED(test_team_gpt2);
    return harness_end();
}
