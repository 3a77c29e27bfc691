/*
 * test_par.c - jobs on several threads (core_par_run) and the planner that uses them.
 *
 * - core_par_run: every index runs exactly once, whatever the thread count (1, 2, more
 *   threads than jobs, none), with uneven jobs; each job's result is the one a plain
 *   loop computes. Called inside a job, it runs every index on that job's own thread.
 * - hybrid's sweep of DP chains runs its jobs on threads with the C library's allocator
 *   and in one thread with an allocator of the caller's: on ResNet-1001 (whose sweep
 *   runs on both the full and the thinned family of lower sets) and GPT-2 with 48
 *   layers, at --budget min and at a budget between, the two plans are the same step
 *   for step (at min, the bases' least peaks with offload are jobs too).
 * - core_team_run: 20,000 rounds of two parts, uneven either way and some after the
 *   helper has gone to sleep; after each round both parts' writes are there and each
 *   part ran once. No team starts inside core_par_run's jobs (two at once would take
 *   the cores their jobs share), nor with one core.
 * - A job's failure handed over (core_job_err): jobs on other threads that fail with
 *   their own messages, and some that do not; on the caller's thread each failure is
 *   raised again with its status and its job's message, word for word, and a cleared
 *   or successful one raises nothing.
 * - The DP's least budget (kusumoto_min_budget) runs two budgets a round on two cores
 *   (thirds) and one on one core (halves): on the same two graphs, and on ResNet-2498,
 *   both find the same budget (the allocator of the caller's makes it serial), at which
 *   the memory-centric DP finds a chain, and a byte below which it finds none.
 * - A DP run told to stop (dp_progress.stop, set beforehand): on GPT-2 with 48 layers'
 *   family judged by the simulator's model, a time-centric plan whose pairs are kept,
 *   over pairs kept at a smaller budget (taken over, then dropped: none kept after), and
 *   a memory-centric one (no pairs kept: its first run stops) fail; then a plan over the
 *   dropped pairs is the chain a plan from nothing finds, block for block.
 * - The packer's splits (pack_split.c), whose searches are worked out beforehand as jobs
 *   with the C library's allocator and as the splits meet them with the caller's: on the
 *   instances of hybrid's least-budget plans of DenseNet-121 and ResNet-152, where the
 *   passes and the search end above the load (so the splits run), the same offsets and
 *   end.
 */
#include "harness.h"
#include "core/core.h"
#include "mem/layout.h"
#include "mem/pack_run.h"
#include "plan/dp_sim.h"
#include "plan/kusumoto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

struct jobs {
    atomic_int runs[100];
    uint64_t out[100];
};

/* A few thousand to a million steps of a generator, unevenly: a slow job in the middle
 * lets the other threads take the rest. */
static uint64_t work(int i)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    long steps = i % 17 == 5 ? 1000000 : 3000 + 100 * i;

    for (long k = 0; k < steps; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static void job(void *ctx, int i)
{
    struct jobs *j = ctx;

    atomic_fetch_add(&j->runs[i], 1);
    j->out[i] = work(i);
}

static void test_par_run(void)
{
    static const int threads[] = {1, 2, 3, 8, 64, 0};
    static const int counts[] = {0, 1, 7, 100};
    static struct jobs j;

    CHECK(core_par_threads() >= 1 && core_par_threads() <= 8, "%d", core_par_threads());
    for (size_t a = 0; a < LEN(threads); a++)
        for (size_t b = 0; b < LEN(counts); b++) {
            int n = counts[b];

            for (int i = 0; i < 100; i++) {
                atomic_store(&j.runs[i], 0);
                j.out[i] = 0;
            }
            core_par_run(n, threads[a], job, &j);
            for (int i = 0; i < 100; i++) {
                int r = atomic_load(&j.runs[i]);

                CHECK(r == (i < n), "%d threads, %d jobs: job %d ran %d times", threads[a], n,
                      i, r);
                CHECK(i >= n || j.out[i] == work(i), "%d threads: job %d's result", threads[a],
                      i);
            }
        }
}

#define ROUNDS 20000

struct rounds {
    int r;
    uint64_t out[2][ROUNDS];
    atomic_int ran[2];
};

/* Part k of round r: uneven, the helper's longer in one round of three, the caller's in
 * another. */
static void round_part(void *ctx, int k)
{
    struct rounds *w = ctx;
    int heavy = w->r % 3 == 0 ? 1 : w->r % 3 == 1 ? 0 : -1;

    atomic_fetch_add(&w->ran[k], 1);
    w->out[k][w->r] = work(heavy == k ? 40 : k) ^ (uint64_t)w->r;
}

/* Inside job i of two: four jobs asked on four threads, each noting its thread. */
struct nested {
    pthread_t outer[2], inner[2][4];
};

static void inner_job(void *ctx, int i)
{
    pthread_t *t = ctx;

    t[i] = pthread_self();
}

static void nested_job(void *ctx, int i)
{
    struct nested *w = ctx;

    w->outer[i] = pthread_self();
    core_par_run(4, 4, inner_job, w->inner[i]);
}

static void team_in_job(void *ctx, int i)
{
    core_team **t = ctx;

    t[i] = core_team_start();
}

struct failing {
    struct core_job_err err[16];
};

static void failing_job(void *ctx, int i)
{
    struct failing *f = ctx;

    core_job_err_note(&f->err[i], i % 3 ? REMAT_OK
                                        : REMAT_FAIL(i % 2 ? REMAT_ERR_INFEASIBLE
                                                           : REMAT_ERR_NOMEM,
                                                     "job %d failed on its thread", i));
}

static void test_job_err(void)
{
    struct failing f;
    char want[64];

    memset(&f, 0, sizeof f);
    core_par_run((int)LEN(f.err), 2, failing_job, &f);
    for (int i = 0; i < (int)LEN(f.err); i++) {
        remat_status st;

        core_clear_error();
        if (i == 15) { /* cleared: nothing left to raise */
            core_job_err_clear(&f.err[i]);
            CHECK(core_job_err_raise(&f.err[i]) == REMAT_OK, "job %d raised after clear", i);
            continue;
        }
        st = core_job_err_raise(&f.err[i]);
        snprintf(want, sizeof want, "job %d failed on its thread", i);
        CHECK(st == (i % 3 ? REMAT_OK : i % 2 ? REMAT_ERR_INFEASIBLE : REMAT_ERR_NOMEM),
              "job %d: status %d", i, (int)st);
        CHECK(!st || !strcmp(remat_errmsg(), want), "job %d: message '%s', want '%s'", i,
              remat_errmsg(), want);
        CHECK(!f.err[i].msg && f.err[i].st == REMAT_OK, "job %d: not cleared", i);
    }
}

static void test_team(void)
{
    static struct rounds w;
    core_team *t = core_team_start(), *in_jobs[2] = {NULL, NULL};
    uint64_t want[2] = {work(0), work(1)}, heavy = work(40);

    core_team_stop(NULL);
    if (core_par_threads() < 2) {
        CHECK(!t, "a team on one core");
        printf("  one core: no team\n");
        return;
    }
    CHECK_OR(t != NULL, return, "no team on %d cores", core_par_threads());
    for (w.r = 0; w.r < ROUNDS; w.r++) {
        int heavy_part = w.r % 3 == 0 ? 1 : w.r % 3 == 1 ? 0 : -1;

        if (w.r % 5000 == 4999)
            usleep(20000); /* the helper sleeps: the next round wakes it */
        atomic_store(&w.ran[0], 0);
        atomic_store(&w.ran[1], 0);
        core_team_run(t, round_part, &w);
        for (int k = 0; k < 2; k++) {
            uint64_t x = (heavy_part == k ? heavy : want[k]) ^ (uint64_t)w.r;
            int ran = atomic_load(&w.ran[k]);

            CHECK_OR(ran == 1 && w.out[k][w.r] == x, break, "round %d part %d: ran %d "
                     "times, wrote %llx, want %llx", w.r, k, ran,
                     (unsigned long long)w.out[k][w.r], (unsigned long long)x);
        }
    }
    core_team_stop(t);
    core_par_run(2, 2, team_in_job, in_jobs);
    CHECK(!in_jobs[0] && !in_jobs[1], "a team started inside core_par_run's jobs");
    core_team_stop(in_jobs[0]);
    core_team_stop(in_jobs[1]);
    {
        struct nested nw;
        bool alone = true;

        memset(&nw, 0, sizeof nw);
        core_par_run(2, 2, nested_job, &nw);
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                alone = alone && pthread_equal(nw.inner[i][k], nw.outer[i]);
        CHECK(alone, "core_par_run inside a job ran jobs on other threads");
    }
    printf("  %d rounds on two cores\n", ROUNDS);
}

/* A pass-through allocator: the planner then runs its jobs in one thread. */
static void *plain(void *ud, void *p, size_t old, size_t n)
{
    (void)ud;
    (void)old;
    if (!n) {
        free(p);
        return NULL;
    }
    return realloc(p, n);
}

static remat_schedule *hybrid(const remat_tgraph *tg, size_t budget)
{
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_HYBRID, .budget_bytes = budget,
                          .budget_min = budget == 0};
    remat_schedule *s = NULL;
    remat_plan_info pi;

    CHECK(remat_plan(tg, &po, &s, &pi) == REMAT_OK, "%s", remat_errmsg());
    return s;
}

static void test_hybrid_threads(void)
{
    static const struct {
        const char *net;
        int layers;
    } nets[] = {{"resnet1001", 0}, {"gpt2", 48}};
    const remat_allocator al = {plain, NULL};

    for (size_t k = 0; k < LEN(nets); k++) {
        remat_zoo_opts zo = {.batch = 1, .layers = nets[k].layers};
        remat_graph *g = NULL, *g1 = NULL;
        remat_tgraph *tg = NULL, *tg1 = NULL;
        size_t budget = 0;

        REMAT_ASSERT_TEST(!remat_zoo_build(nets[k].net, &zo, NULL, &g) &&
                          !remat_tgraph_from_graph(g, NULL, &tg) &&
                          !remat_zoo_build(nets[k].net, &zo, &al, &g1) &&
                          !remat_tgraph_from_graph(g1, NULL, &tg1));
        for (int b = 0; b < 2; b++) {
            remat_schedule *x = hybrid(tg, budget), *y = hybrid(tg1, budget);

            CHECK(x && y && remat_schedule_n_steps(x) == remat_schedule_n_steps(y) &&
                      !memcmp(remat_schedule_steps(x), remat_schedule_steps(y),
                              remat_schedule_n_steps(x) * sizeof(remat_step)),
                  "%s: hybrid at %zu bytes differs between threads and one thread",
                  nets[k].net, budget);
            if (x && !b) { /* then halfway from the least total to twice it */
                remat_plan_info pi;
                remat_plan_opts po = {.strategy = REMAT_STRATEGY_HYBRID, .budget_min = true};
                remat_schedule *z = NULL;

                REMAT_ASSERT_TEST(!remat_plan(tg, &po, &z, &pi));
                budget = pi.total_bytes + pi.total_bytes / 2;
                remat_schedule_free(z);
            }
            remat_schedule_free(x);
            remat_schedule_free(y);
        }
        remat_tgraph_free(tg);
        remat_tgraph_free(tg1);
        remat_graph_free(g);
        remat_graph_free(g1);
    }
}

static void test_min_budget_threads(void)
{
    static const struct {
        const char *net;
        int layers;
    } nets[] = {{"resnet1001", 0}, {"gpt2", 48}, {"resnet2498", 0}};
    const remat_allocator al = {plain, NULL};

    for (size_t k = 0; k < LEN(nets); k++) {
        remat_zoo_opts zo = {.batch = 1, .layers = nets[k].layers};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        struct dag d, d1;
        struct lsets ls = {0};
        struct chain c = {0, NULL, NULL};
        struct dp_result res[2];
        size_t par = 0, ser = 0;

        REMAT_ASSERT_TEST(!remat_zoo_build(nets[k].net, &zo, NULL, &g) &&
                          !remat_tgraph_from_graph(g, NULL, &tg) && !dag_build(tg, &d) &&
                          !lsets_build(&d, LS_APPROX, NULL, 0, &ls));
        d1 = d;
        d1.al = &al; /* serial */
        c.block = calloc((size_t)d.n + 1, sizeof *c.block);
        c.kept = calloc((size_t)d.n + 1, sizeof *c.kept);
        REMAT_ASSERT_TEST(c.block && c.kept);
        CHECK(!kusumoto_min_budget(&d, &ls, NULL, &par) &&
                  !kusumoto_min_budget(&d1, &ls, NULL, &ser) && par == ser,
              "%s: least budget %zu on two cores, %zu on one", nets[k].net, par, ser);
        /* the search lands on the least budget itself (its runs just below hi), so the
         * two searches' different paths (thirds on two cores, halves on one) agree */
        CHECK(!kusumoto_plan(&d, &ls, true, par, 0, NULL, &c, &res[0]) &&
                  !kusumoto_plan(&d, &ls, true, par - 1, 0, NULL, &c, &res[1]) &&
                  res[0].feasible && !res[1].feasible,
              "%s: a chain at %zu bytes and none a byte below", nets[k].net, par);
        free(c.block);
        free(c.kept);
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/* Whether two chains over d have the same blocks, kept nodes and overhead. */
static bool same_chain(const struct dag *d, const struct chain *a, const struct dp_result *ra,
                       const struct chain *b, const struct dp_result *rb)
{
    return ra->feasible && rb->feasible && a->n_blocks == b->n_blocks &&
           ra->overhead == rb->overhead &&
           !memcmp(a->block, b->block, sizeof *a->block * (size_t)d->n) &&
           !memcmp(a->kept, b->kept, sizeof *a->kept * (size_t)d->n);
}

static void test_dp_stop(void)
{
    remat_zoo_opts zo = {.batch = 1, .layers = 48};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct dag d;
    struct lsets ls = {0};
    struct chain c[3];
    struct dp_result r[3];
    struct dp_pairs pc = {0};
    int stop = 1;
    struct dp_progress pg = {NULL, NULL, &stop};
    size_t b[2];

    REMAT_ASSERT_TEST(!remat_zoo_build("gpt2", &zo, NULL, &g) &&
                      !remat_tgraph_from_graph(g, NULL, &tg) && !dag_build(tg, &d) &&
                      !lsets_build(&d, LS_APPROX, NULL, 0, &ls) &&
                      !dp_sim_new(tg, &d, &ls, &ls.sim));
    for (int k = 0; k < 3; k++) {
        c[k].block = calloc((size_t)d.n + 1, sizeof *c[k].block);
        c[k].kept = calloc((size_t)d.n + 1, sizeof *c[k].kept);
        REMAT_ASSERT_TEST(c[k].block && c[k].kept);
    }
    b[0] = ls.m[ls.n - 1] / 8;
    b[1] = ls.m[ls.n - 1] / 4;
    CHECK_OK(kusumoto_plan_pairs(&d, &ls, false, b[0], INT64_MAX, NULL, &pc, 0, &c[0], &r[0]));
    CHECK(r[0].feasible && pc.p, "at %zu: feasible %d, pairs kept %d", b[0], r[0].feasible,
          pc.p != NULL);
    CHECK(kusumoto_plan_pairs(&d, &ls, false, b[1], INT64_MAX, &pg, &pc, 0, &c[1], &r[1]) &&
              !pc.p,
          "stopped at %zu: %s, pairs kept %d", b[1], remat_errmsg(), pc.p != NULL);
    CHECK(kusumoto_plan_pairs(&d, &ls, true, b[1], INT64_MAX, &pg, NULL, 0, &c[1], &r[1]) ==
              REMAT_ERR_INFEASIBLE,
          "memory-centric, stopped at %zu: %s", b[1], remat_errmsg());
    CHECK_OK(kusumoto_plan_pairs(&d, &ls, false, b[1], INT64_MAX, NULL, &pc, 0, &c[1], &r[1]));
    CHECK_OK(kusumoto_plan(&d, &ls, false, b[1], INT64_MAX, NULL, &c[2], &r[2]));
    CHECK(same_chain(&d, &c[1], &r[1], &c[2], &r[2]), "at %zu after the stop: %d blocks, "
          "overhead %.6f; from nothing %d, %.6f", b[1], c[1].n_blocks, r[1].overhead,
          c[2].n_blocks, r[2].overhead);
    printf("  stopped at %zu bytes; then %d blocks, overhead %.6f\n", b[1], c[1].n_blocks,
           r[1].overhead);
    for (int k = 0; k < 3; k++) {
        free(c[k].block);
        free(c[k].kept);
    }
    dp_pairs_fini(&pc);
    dp_sim_free(ls.sim);
    lsets_fini(&ls);
    dag_fini(&d);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}
static void test_pack_threads(void)
{
    static const char *nets[] = {"densenet121", "resnet152"};
    const remat_allocator al = {plain, NULL};

    for (size_t k = 0; k < LEN(nets); k++) {
        remat_zoo_opts zo = {.batch = 1};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        struct layout lay = {0};
        struct instance *a = NULL, *b = NULL;
        size_t n, end[2] = {0, 0}, load = 0;

        REMAT_ASSERT_TEST(!remat_zoo_build(nets[k], &zo, NULL, &g) &&
                          !remat_tgraph_from_graph(g, NULL, &tg));
        if (!(s = hybrid(tg, 0)))
            goto next;
        CHECK_OR(!layout_build(tg, s, 64, &lay), goto next, "%s", remat_errmsg());
        n = lay.n_inst;
        a = calloc(n, sizeof *a);
        b = calloc(n, sizeof *b);
        REMAT_ASSERT_TEST(a && b);
        memcpy(a, lay.inst, n * sizeof *a);
        memcpy(b, lay.inst, n * sizeof *b);
        CHECK(!pack_run(NULL, a, n, 64, NULL, &load, 0, NULL, SIZE_MAX) &&
                  !layout_pack(NULL, a, n, 64, &end[0]) && !layout_pack(&al, b, n, 64, &end[1]),
              "%s: %s", nets[k], remat_errmsg());
        CHECK(end[0] > load, "%s: packed to the load %zu: the splits did not run", nets[k], load);
        CHECK(end[0] == end[1], "%s: split on threads to %zu, in one to %zu", nets[k], end[0],
              end[1]);
        for (size_t i = 0; i < n; i++)
            CHECK_OR(a[i].offset == b[i].offset, break, "%s: instance %zu at %zu on threads, "
                     "%zu in one", nets[k], i, a[i].offset, b[i].offset);
    next:
        free(a);
        free(b);
        layout_fini(&lay);
        remat_schedule_free(s);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

int main(void)
{
    RUN(test_par_run);
    RUN(test_job_err);
    RUN(test_team);
    RUN(test_hybrid_threads);
    RUN(test_min_budget_threads);
    RUN(test_dp_stop);
    RUN(test_pack_threads);
    return harness_end();
}
