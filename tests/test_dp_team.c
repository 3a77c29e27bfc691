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
 * then GPT-2 of 24 layers with the sets of some work shared. Then the beam run as a
 * pipeline on two threads (dp_pipe.c) against the same on one (test_pipeline). On a
 * machine with one core no team starts and the runs are one core's: the test says so
 * and checks only the states.
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

/* Whether the last runs of a (one core) and b (two) hold the same states, point for
 * point, and the same range per set (the difference reported). */
static bool same_runs(const struct dp *a, const struct dp *b, int gi, const char *what,
                      size_t budget)
{
    bool ok = true;

    CHECK_OR(a->n_pts == b->n_pts, ok = false, "graph %d %s B=%zu: %zu states on one "
             "core, %zu on two", gi, what, budget, a->n_pts, b->n_pts);
    for (int32_t j = 0; ok && j < a->ls->n; j++)
        CHECK_OR(a->fr_at[j] == b->fr_at[j] && a->fr_n[j] == b->fr_n[j], ok = false,
                 "graph %d %s B=%zu: set %d holds [%d, +%d) on one core, [%d, +%d) "
                 "on two", gi, what, budget, j, a->fr_at[j], a->fr_n[j], b->fr_at[j],
                 b->fr_n[j]);
    for (size_t q = 0; ok && q < a->n_pts; q++)
        CHECK_OR(a->pts[q].t == b->pts[q].t && a->pts[q].m == b->pts[q].m &&
                 a->pts[q].parent == b->pts[q].parent, ok = false,
                 "graph %d %s B=%zu: state %zu (t %d, m %zu, from %d) on one core, "
                 "(t %d, m %zu, from %d) on two", gi, what, budget, q, a->pts[q].t,
                 a->pts[q].m, a->pts[q].parent, b->pts[q].t, b->pts[q].m,
                 b->pts[q].parent);
    return ok;
}

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
        k->split += run[1].n_split;
        k->states += run[0].n_pts;
        ok = same_runs(&run[0], &run[1], gi, what, budget);
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

/*
 * The beam run as a pipeline on two threads (dp_pipe.c) against the same run on one
 * (kusumoto_set_pipeline(false)): GPT-2 of 200 layers on its approximate family (7,408
 * sets, whose rows reach past the pipeline's least span), the search asked for a chain
 * within 0.1% of the optimum, at 1.05, 1.2, 1.5, 2 and 3 times its least budget. The
 * same states, point for point, in the run the search ends with; the pipeline must have
 * handed rows over (else it checked nothing) and the beam must have ended some search.
 */
static void test_pipeline(void)
{
    remat_zoo_opts zo = {.batch = 1, .layers = 200};
    static const double at[] = {1.05, 1.2, 1.5, 2, 3};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct dag d;
    struct lsets ls;
    size_t least = 0;
    int32_t piped = 0, redone = 0, near = 0;

    CHECK_OK(remat_zoo_build("gpt2", &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
    CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &least));
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        size_t budget = (size_t)(at[k] * (double)least);
        struct dp run[2];
        int32_t *lb[2] = {NULL, NULL};
        int64_t *room[2] = {NULL, NULL}, *lag[2] = {NULL, NULL};
        bool reached = true;

        for (int w = 0; w < 2; w++) {
            kusumoto_set_pipeline(w == 1);
            REMAT_ASSERT_TEST(dp_init(&run[w], &d, &ls, budget) == REMAT_OK);
            run[w].within = 1e-3;
            CHECK_OK(dp_run(&run[w], DP_MIN_M, NULL, 0));
            reached = reached && run[w].fr_n[ls.n - 1] > 0;
            if (reached)
                CHECK_OK(dp_least_time(&run[w], &lb[w], &room[w], &lag[w]));
        }
        kusumoto_set_pipeline(true);
        CHECK(reached, "GPT-2-200 at %zu: no chain", budget);
        if (reached) {
            CHECK(run[0].near == run[1].near, "GPT-2-200 at %zu: the beam's chain %d on one "
                  "thread, %d on two", budget, (int)run[0].near, (int)run[1].near);
            same_runs(&run[0], &run[1], 0, "GPT-2-200", budget);
            piped += run[1].n_piped;
            redone += run[1].n_redone;
            near += run[1].near;
        }
        for (int w = 0; w < 2; w++) {
            core_free(d.al, lb[w], sizeof *lb[w] * (size_t)ls.n);
            core_free(d.al, room[w], sizeof *room[w] * (size_t)ls.n);
            core_free(d.al, lag[w], sizeof *lag[w] * DP_LAG_ROWS * (size_t)ls.n);
            dp_fini(&run[w]);
        }
    }
    printf("  %d sets, least budget %zu: %d rows handed over, %d worked out again, %d "
           "searches ended by the beam%s\n", ls.n, least, piped, redone, near,
           core_par_threads() < 2 ? " (one core: no pipeline)" : "");
    CHECK(core_par_threads() < 2 || piped > 0, "no row was handed over");
    CHECK(near > 0, "no search ended with the beam");
    lsets_fini(&ls);
    dag_fini(&d);
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20261129u;
    RUN_TIMED(test_team_random);
    RUN_TIMED(test_team_gpt2);
    RUN_TIMED(test_pipeline);
    return harness_end();
}
