/*
 * test_optimal.c - the `optimal` strategy (plan/optimal.c): the Checkmate MILP solved
 * with CBC (COIN-OR).
 *
 * The oracle is a brute force written here: on graphs of up to 8 forward ops (chains, a
 * diamond, a skip connection, random DAGs from the public API), every subset K of the
 * forward values is kept, and the schedule "forward everything; then for each backward
 * in reverse order, recompute from K what it reads that is not kept" is lowered in two
 * ways (recomputed values dropped after each backward, or cached until their last
 * use), freed by the liveness pass and measured by the simulator. The MILP's schedules
 * are a superset, so at every budget the oracle reaches, plan_optimal must prove an
 * optimum (gap 0) that costs no more than the oracle's best there, its schedule must
 * simulate within the budget, and the retention bound (optimal_lower) must be at most
 * both. Also: no recomputation at a generous budget, some at the smallest, refusal below
 * it and above 2,500 nodes (ResNet-1001), `budget min`'s least-peak plan, out-of-memory
 * handling, the authors' VGG-19 dump within a short time limit, the same plan twice, and
 * a 300-node random layered graph: a plan within the budget and the time limit whose
 * lower bound is at most other strategies' overheads. Seed: REMAT_SEED (printed).
 */
#include "harness.h"
#include "plan/optimal.h"
#include "sched/schedule.h"

#include <stdint.h>

#define MAX_OPS 16

static uint64_t rng_state, seed;
static double last_lower; /* optimal()'s retention bound */
static int n_lower;       /* check_graph's budgets where that bound was above 0 */

static uint64_t urand(uint64_t n)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) % n;
}

/* ------------------------------------------------------------------ graphs */

static remat_graph *new_graph(const remat_allocator *a)
{
    remat_graph *g = NULL;

    REMAT_ASSERT_TEST(remat_graph_new(a, &g) == REMAT_OK && g);
    return g;
}

static int32_t conv(remat_graph *g, int32_t x, int64_t c)
{
    return remat_graph_add(g, REMAT_OP_CONV2D, &x, 1,
                           &(remat_attrs){.out_channels = c, .kh = 1, .kw = 1}, NULL);
}

static int32_t relu(remat_graph *g, int32_t x)
{
    return remat_graph_add(g, REMAT_OP_RELU, &x, 1, NULL, NULL);
}

static int32_t add2(remat_graph *g, int32_t x, int32_t y)
{
    int32_t in[2] = {x, y};

    return remat_graph_add(g, REMAT_OP_ADD, in, 2, NULL, NULL);
}

/* flatten -> linear 3 -> softmax_ce: the loss. */
static void head(remat_graph *g, int32_t x, int32_t lab)
{
    int32_t f = remat_graph_add(g, REMAT_OP_FLATTEN, &x, 1, NULL, NULL), in[2];

    in[0] = remat_graph_add(g, REMAT_OP_LINEAR, &f, 1, &(remat_attrs){.out_channels = 3}, NULL);
    in[1] = lab;
    REMAT_ASSERT_TEST(remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2,
                                                              NULL, NULL)) == REMAT_OK);
}

static int32_t input(remat_graph *g, int64_t c, int32_t *lab)
{
    *lab = remat_graph_labels(g, "labels", 1);
    return remat_graph_input(g, "x", 4, (int64_t[]){1, c, 4, 4});
}

/* conv 4 -> relu -> conv 8 -> relu -> head: 6 forward ops and a view. */
static void build_chain(remat_graph *g)
{
    int32_t lab, x = input(g, 2, &lab);

    head(g, relu(g, conv(g, relu(g, conv(g, x, 4)), 8)), lab);
}

/* conv -> relu b -> relu c; add(b, c) -> head (the diamond of test_sim.c). */
static void build_diamond(remat_graph *g)
{
    int32_t lab, x = input(g, 2, &lab), b = relu(g, conv(g, x, 4));

    head(g, add2(g, b, relu(g, b)), lab);
}

/* A long skip: conv a -> relu -> conv 8 -> conv 4 -> add(a, .) -> head. */
static void build_skip(remat_graph *g)
{
    int32_t lab, x = input(g, 2, &lab), a = conv(g, x, 4);

    head(g, add2(g, a, conv(g, conv(g, relu(g, a), 8), 4)), lab);
}

/* A random DAG of n_body convolutions, ReLUs and adds over (1, C, 4, 4) values, then
 * the head; a body value may be left unread (an op without a backward). */
static void build_random(remat_graph *g, int n_body)
{
    int32_t lab, x = input(g, 2, &lab), vals[MAX_OPS], n = 0;

    vals[n++] = conv(g, x, 2 << urand(3));
    for (int k = 1; k < n_body; k++) {
        int32_t a = vals[urand((uint64_t)n)], b = -1;
        uint64_t kind = urand(3);
        int64_t sa[4], sb[4];

        remat_graph_value_shape(g, a, sa);
        for (int32_t j = 0; j < n && kind == 2; j++) {
            remat_graph_value_shape(g, vals[j], sb);
            if (vals[j] != a && sb[1] == sa[1] && (b < 0 || urand(2)))
                b = vals[j];
        }
        if (kind == 2 && b >= 0)
            vals[n++] = add2(g, a, b);
        else if (kind == 1)
            vals[n++] = relu(g, a);
        else
            vals[n++] = conv(g, a, 2 << urand(3));
    }
    head(g, vals[n - 1], lab);
}

static remat_tgraph *to_tgraph(remat_graph *g)
{
    remat_tgraph *tg = NULL;
    remat_status s = remat_tgraph_from_graph(g, NULL, &tg);

    if (s)
        printf("  autodiff: %s\n", remat_errmsg());
    REMAT_ASSERT_TEST(s == REMAT_OK && tg);
    return tg;
}

/* ------------------------------------------------------------------ oracle */

/* One candidate of the brute force: its simulated peak and overhead. */
struct cand {
    size_t peak;
    double overhead;
};

/* The op that owns the buffer of value v (-1: resident). */
static int32_t owner_op(const remat_tgraph *tg, int32_t v)
{
    return tg->values[tg->values[v].buf].producer;
}

/* Emits the FWDs that make op x's value available (itself and what it reads), unless
 * kept or available already; in topological order (inputs first). */
static void ensure(const remat_tgraph *tg, remat_schedule *s, const bool *kept, bool *avail,
                   int32_t x)
{
    const struct top *op = &tg->ops[x];

    if (kept[x] || avail[x])
        return;
    for (int32_t i = 0; i < op->n_in; i++) {
        int32_t p = owner_op(tg, op->in[i]);

        if (p >= 0)
            ensure(tg, s, kept, avail, p);
    }
    REMAT_ASSERT_TEST(schedule_push(s, REMAT_STEP_FWD, x) == REMAT_OK);
    avail[x] = true;
}

/*
 * The oracle's schedule for the kept ops `kept` (by op id; views count as kept, they
 * take no memory): forward in op order (topological for graphs built with the API),
 * then each backward in reverse op order after recomputing what it reads; with `cache`
 * a recomputed value stays available, else it is dropped after the backward.
 */
static struct cand oracle_run(const remat_tgraph *tg, const bool *kept, bool cache)
{
    remat_schedule *raw = NULL, *s = NULL;
    remat_sim_result r;
    bool avail[MAX_OPS] = {false};
    struct cand c;

    REMAT_ASSERT_TEST(schedule_new(NULL, &raw) == REMAT_OK);
    for (int32_t o = 0; o < tg->n_ops; o++)
        REMAT_ASSERT_TEST(schedule_push(raw, REMAT_STEP_FWD, o) == REMAT_OK);
    for (int32_t o = tg->n_ops; o-- > 0;) {
        const struct top *op = &tg->ops[o];

        if (!op->has_bwd)
            continue;
        if (!cache)
            memset(avail, 0, sizeof avail);
        for (int32_t i = 0; i < op->n_saved; i++) {
            int32_t p = owner_op(tg, op->saved[i]);

            if (p >= 0)
                ensure(tg, raw, kept, avail, p);
        }
        REMAT_ASSERT_TEST(schedule_push(raw, REMAT_STEP_BWD, o) == REMAT_OK);
    }
    REMAT_ASSERT_TEST(schedule_liveness(tg, raw, &s) == REMAT_OK);
    if (remat_sim_run(tg, s, &r) != REMAT_OK) {
        printf("  oracle schedule invalid: %s\n", remat_errmsg());
        REMAT_ASSERT_TEST(0);
    }
    c.peak = r.activation_peak_bytes;
    c.overhead = r.overhead;
    remat_schedule_free(raw);
    remat_schedule_free(s);
    return c;
}

/* Every keep set with both variants: n_out candidates into cands. */
static int oracle_all(const remat_tgraph *tg, struct cand *cands)
{
    int32_t real[MAX_OPS], n_real = 0;
    int n = 0;

    REMAT_ASSERT_TEST(tg->n_ops <= MAX_OPS);
    for (int32_t o = 0; o < tg->n_ops; o++)
        if (!tg->ops[o].is_view)
            real[n_real++] = o;
    for (uint32_t mask = 0; mask < (1u << n_real); mask++) {
        bool kept[MAX_OPS];

        for (int32_t o = 0; o < tg->n_ops; o++)
            kept[o] = tg->ops[o].is_view;
        for (int32_t k = 0; k < n_real; k++)
            kept[real[k]] = mask >> k & 1;
        cands[n++] = oracle_run(tg, kept, false);
        cands[n++] = oracle_run(tg, kept, true);
    }
    return n;
}

/* The least overhead among candidates within budget (-1: none). */
static double oracle_best(const struct cand *c, int n, size_t budget)
{
    double best = -1;

    for (int k = 0; k < n; k++)
        if (c[k].peak <= budget && (best < 0 || c[k].overhead < best))
            best = c[k].overhead;
    return best;
}

/* ------------------------------------------------------------------ checks */

/* plan_optimal at an activation budget; returns its status, fills the simulated result. */
static remat_status optimal(const remat_tgraph *tg, size_t budget, double limit,
                            remat_sim_result *r, remat_plan_info *info)
{
    struct dag d;
    remat_schedule *s = NULL;
    remat_status st;

    memset(info, 0, sizeof *info);
    memset(r, 0, sizeof *r);
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK &&
                      optimal_lower(tg, &d, budget, limit, &last_lower) == REMAT_OK);
    st = plan_optimal(tg, &d, budget, limit, &s, info);
    if (!st) {
        remat_status sim = remat_sim_run(tg, s, r);

        CHECK(sim == REMAT_OK, "the optimal schedule is invalid: %s", remat_errmsg());
    }
    remat_schedule_free(s);
    dag_fini(&d);
    return st;
}

/*
 * The MILP against the oracle on one graph: at the smallest peak the oracle reaches,
 * at every distinct peak above it up to the `none` plan's, and at twice that.
 */
static void check_graph(const char *name, remat_graph *g)
{
    static struct cand cands[2 << MAX_OPS];
    remat_tgraph *tg = to_tgraph(g);
    remat_schedule *none = NULL;
    remat_sim_result r, rn;
    remat_plan_info info;
    size_t min_peak = SIZE_MAX, none_peak, budgets[64];
    int n = oracle_all(tg, cands), n_b = 0;

    REMAT_ASSERT_TEST(remat_plan_none(tg, &none) == REMAT_OK &&
                      remat_sim_run(tg, none, &rn) == REMAT_OK);
    none_peak = rn.activation_peak_bytes;
    remat_schedule_free(none);
    for (int k = 0; k < n; k++)
        min_peak = cands[k].peak < min_peak ? cands[k].peak : min_peak;
    budgets[n_b++] = 2 * none_peak;
    for (int k = 0; k < n && n_b < 63; k++) {
        bool seen = false;

        for (int j = 0; j < n_b; j++)
            seen = seen || budgets[j] == cands[k].peak;
        if (!seen && cands[k].peak <= none_peak)
            budgets[n_b++] = cands[k].peak;
    }
    for (int j = 0; j < n_b; j++) {
        size_t b = budgets[j];
        double best = oracle_best(cands, n, b);
        remat_status st = optimal(tg, b, 30, &r, &info);

        CHECK(st == REMAT_OK, "%s at %zu: %s: %s", name, b, remat_status_name(st), remat_errmsg());
        if (st)
            continue;
        CHECK(r.activation_peak_bytes <= b, "%s: peak %zu above the budget %zu", name,
              r.activation_peak_bytes, b);
        CHECK(info.dp_bound_bytes >= r.activation_peak_bytes && info.dp_bound_bytes <= b,
              "%s at %zu: the MILP's bound %zu, simulated %zu", name, b, info.dp_bound_bytes,
              r.activation_peak_bytes);
        CHECK(r.overhead <= best + 1e-9, "%s at %zu: overhead %.6f above the brute force's "
              "%.6f", name, b, r.overhead, best);
        CHECK(fabs(info.overhead_bound - r.overhead) < 1e-9, "%s: own overhead %.6f, "
              "simulated %.6f", name, info.overhead_bound, r.overhead);
        CHECK(info.optimality_gap == 0, "%s at %zu: gap %g on a tiny graph", name, b,
              info.optimality_gap);
        CHECK(last_lower >= 0 && last_lower <= r.overhead + 1e-9 && last_lower <= best + 1e-9,
              "%s at %zu: retention bound %.6f, optimum %.6f, brute force %.6f", name, b,
              last_lower, r.overhead, best);
        n_lower += last_lower > 1e-9;
        if (b >= none_peak)
            CHECK(r.overhead == 0, "%s at a generous %zu: overhead %.6f", name, b, r.overhead);
    }
    /* At the smallest budget the brute force finds, recomputation is needed when that is
     * below what keeping everything the backward reads takes. */
    if (!optimal(tg, min_peak, 30, &r, &info) && min_peak < none_peak)
        CHECK(r.overhead > 0, "%s at its smallest %zu (none %zu): no recomputation", name,
              min_peak, none_peak);
    remat_tgraph_free(tg);
}

static void test_small_graphs(void)
{
    void (*builders[])(remat_graph *) = {build_chain, build_diamond, build_skip};
    const char *names[] = {"chain", "diamond", "skip"};

    for (size_t k = 0; k < sizeof builders / sizeof *builders; k++) {
        remat_graph *g = new_graph(NULL);

        builders[k](g);
        REMAT_ASSERT_TEST(remat_graph_status(g) == REMAT_OK);
        check_graph(names[k], g);
        remat_graph_free(g);
    }
}

static void test_random_graphs(void)
{
    rng_state = seed ^ 0x5eed;
    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
    for (int k = 0; k < 30; k++) {
        remat_graph *g = new_graph(NULL);
        char name[32];

        build_random(g, 1 + (int)urand(6));
        REMAT_ASSERT_TEST(remat_graph_status(g) == REMAT_OK);
        snprintf(name, sizeof name, "random %d", k);
        check_graph(name, g);
        remat_graph_free(g);
    }
    CHECK(n_lower > 0, "the retention bound was 0 at every budget of every graph");
}

/* Below the smallest feasible budget: refused, with a message. */
static void test_infeasible(void)
{
    remat_graph *g = new_graph(NULL);
    remat_tgraph *tg;
    remat_sim_result r;
    remat_plan_info info;
    remat_status st;

    build_skip(g);
    tg = to_tgraph(g);
    st = optimal(tg, 64, 30, &r, &info);
    CHECK(st == REMAT_ERR_INFEASIBLE, "64 bytes: %s", remat_status_name(st));
    CHECK(strstr(remat_errmsg(), "budget") != NULL, "message: %s", remat_errmsg());
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Through remat_plan: ResNet-1001 (3,346 nodes) is above the size limit of 2,500. */
static void test_too_large(void)
{
    remat_zoo_opts zo = {.batch = 1};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_OPTIMAL, .budget_bytes = (size_t)1 << 40};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_status st;

    CHECK_OK(remat_zoo_build("resnet1001", &zo, NULL, &g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg)
        goto out;
    st = remat_plan(tg, &po, &s, NULL);
    CHECK(st == REMAT_ERR_UNSUPPORTED, "resnet1001: %s", remat_status_name(st));
    CHECK(strstr(remat_errmsg(), "limit of 2500") != NULL, "message: %s", remat_errmsg());
    CHECK(s == NULL, "a schedule came back");
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Through remat_plan with budget min: the least peak of its heuristic solutions, then
 * the least cost there. Not proven minimal, but never below what the oracle can reach
 * and never above the `none` plan; the budget reported is the peak plus the resident. */
static void test_budget_min(void)
{
    static struct cand cands[2 << MAX_OPS];
    void (*builders[])(remat_graph *) = {build_chain, build_diamond, build_skip};

    for (size_t k = 0; k < sizeof builders / sizeof *builders; k++) {
        remat_plan_opts po = {.strategy = REMAT_STRATEGY_OPTIMAL, .budget_min = true};
        remat_graph *g = new_graph(NULL);
        remat_tgraph *tg;
        remat_schedule *s = NULL, *none = NULL;
        remat_plan_info info;
        remat_sim_result r, rn;
        size_t least = SIZE_MAX;

        builders[k](g);
        tg = to_tgraph(g);
        for (int c = 0, n = oracle_all(tg, cands); c < n; c++)
            least = cands[c].peak < least ? cands[c].peak : least;
        REMAT_ASSERT_TEST(remat_plan_none(tg, &none) == REMAT_OK &&
                          remat_sim_run(tg, none, &rn) == REMAT_OK);
        CHECK_OK(remat_plan(tg, &po, &s, &info));
        if (s && remat_sim_run(tg, s, &r) == REMAT_OK) {
            CHECK(r.activation_peak_bytes >= least && r.activation_peak_bytes <=
                  rn.activation_peak_bytes, "graph %zu: peak %zu, oracle's least %zu, none %zu",
                  k, r.activation_peak_bytes, least, rn.activation_peak_bytes);
            CHECK_I64(info.budget_bytes, r.activation_peak_bytes + r.resident_bytes);
        }
        remat_schedule_free(s);
        remat_schedule_free(none);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/* -------------------------------------------------------------- out of memory */

struct failing {
    long count, fail_at, live;
};

static void *fail_alloc(void *ud, void *ptr, size_t old_size, size_t new_size)
{
    struct failing *f = ud;

    (void)old_size;
    if (new_size == 0) {
        f->live -= ptr != NULL;
        free(ptr);
        return NULL;
    }
    if (++f->count == f->fail_at)
        return NULL;
    f->live += ptr == NULL;
    return realloc(ptr, new_size);
}

/* Every allocation of a plan at a tight budget fails once: NOMEM, nothing leaked. */
static void test_oom(void)
{
    static struct cand cands[2 << 8];
    struct failing f = {0, 0, 0};
    remat_allocator a = {fail_alloc, &f};
    remat_graph *g = new_graph(&a);
    remat_tgraph *tg;
    struct dag d;
    size_t budget = SIZE_MAX;
    long base, at;

    build_diamond(g);
    tg = to_tgraph(g);
    for (int k = 0, n = oracle_all(tg, cands); k < n; k++)
        budget = cands[k].peak < budget ? cands[k].peak : budget;
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    base = f.live;
    for (at = 1; at < 100000; at++) {
        remat_schedule *s = NULL;
        remat_plan_info info;
        remat_status st;

        f.count = 0;
        f.fail_at = at;
        st = plan_optimal(tg, &d, budget, 30, &s, &info);
        f.fail_at = 0;
        remat_schedule_free(s);
        if (st == REMAT_OK)
            break;
        CHECK(st == REMAT_ERR_NOMEM, "failing allocation %ld: %s: %s", at,
              remat_status_name(st), remat_errmsg());
        CHECK(s == NULL, "failing allocation %ld: a schedule came back", at);
        CHECK(f.live == base, "failing allocation %ld: %ld blocks leaked", at, f.live - base);
        if (st != REMAT_ERR_NOMEM || f.live != base)
            break;
    }
    CHECK(at > 1 && at < 100000, "%ld allocations", at);
    printf("  %ld allocations, each failed once\n", at - 1);
    dag_fini(&d);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* ---------------------------------------------------------------- the dumps */

/* VGG-19 (46 ops) at 3.4 GB in total, two seconds: a plan within the budget. */
static void test_vgg19_dump(void)
{
    const char *dir = harness_graphs_dir();
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_OPTIMAL, .budget_bytes = 3400000000u,
                          .time_limit = 2};
    remat_plan_info info;
    remat_sim_result r;
    char path[512];

    if (!dir) {
        SKIP("../shared/graphs is absent");
        return;
    }
    snprintf(path, sizeof path, "%s/cg_vgg19.txt", dir);
    CHECK_OK(remat_tgraph_read_dump(path, NULL, NULL, &tg));
    if (!tg)
        return;
    CHECK_OK(remat_plan(tg, &po, &s, &info));
    if (s) {
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK(r.activation_peak_bytes + r.resident_bytes <= po.budget_bytes, "peak %zu",
              r.activation_peak_bytes + r.resident_bytes);
        CHECK(info.optimality_gap >= 0 && info.optimality_gap <= 1, "gap %g",
              info.optimality_gap);
        CHECK(info.plan_seconds < 10, "%.1f s with a limit of 2 s", info.plan_seconds);
        printf("  vgg19 at 3.4 GB: overhead %.4f, gap %.3f, %.1f s\n", r.overhead,
               info.optimality_gap, info.plan_seconds);
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
}

/*
 * `optimal` is never worse than the other planners: at the budget each other strategy
 * reaches (what its plan at its own minimum allocates, packed), the optimal plan fits
 * and recomputes no more than it (both overheads measured by the simulator). The test says where the
 * MILP's own plan lost and another strategy's was returned (plan.c: best_of_others).
 */
static void test_versus_others(void)
{
    int compared = 0;

    rng_state = seed ^ 0x0ddba11;
    for (int k = 0; k < 24; k++) {
        remat_graph *g = new_graph(NULL);
        remat_tgraph *tg;

        build_random(g, 2 + (int)urand(6));
        REMAT_ASSERT_TEST(remat_graph_status(g) == REMAT_OK);
        tg = to_tgraph(g);
        for (int st = REMAT_STRATEGY_NONE; st < REMAT_STRATEGY_OPTIMAL; st++) {
            remat_plan_opts po = {.strategy = (remat_strategy)st, .budget_min = true};
            remat_schedule *s = NULL;
            remat_sim_result ro, rs;
            remat_plan_info io, is;

            if (remat_plan(tg, &po, &s, &is) || remat_sim_run(tg, s, &rs)) {
                remat_schedule_free(s);
                continue; /* a strategy that has no plan here has nothing to compare */
            }
            remat_schedule_free(s);
            {
                remat_plan_opts oo = {.strategy = REMAT_STRATEGY_OPTIMAL, .time_limit = 20,
                                      .budget_bytes = is.budget_bytes};
                remat_schedule *so = NULL;

                memset(&ro, 0, sizeof ro);
                CHECK(remat_plan(tg, &oo, &so, &io) == REMAT_OK && !remat_sim_run(tg, so, &ro),
                      "graph %d: optimal found no plan at %s's peak %zu: %s", k,
                      remat_strategy_name((remat_strategy)st), rs.activation_peak_bytes,
                      remat_errmsg());
                remat_schedule_free(so);
            }
            CHECK(io.total_bytes <= is.budget_bytes, "graph %d: optimal allocates %zu, above "
                  "the budget %zu", k, io.total_bytes, is.budget_bytes);
            CHECK(ro.overhead <= rs.overhead + 1e-9, "graph %d: "
                  "optimal overhead %.4f above %s's %.4f at the same budget", k, ro.overhead,
                  remat_strategy_name((remat_strategy)st), rs.overhead);
            if (io.optimality_gap < 0)
                printf("  graph %d at %s's budget: another strategy beat the MILP's plan\n", k,
                       remat_strategy_name((remat_strategy)st));
            compared++;
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
    printf("  %d plans compared\n", compared);
    CHECK(compared > 50, "only %d comparisons", compared);
}

/* ------------------------------------------------------ above the old limit */

/* plan_optimal on tg; *took gets the seconds it took. */
static remat_status timed_plan(const remat_tgraph *tg, size_t budget, double limit,
                               remat_schedule **s, remat_plan_info *info, double *took)
{
    struct dag d;
    remat_status st;
    double t0 = core_seconds();

    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    memset(info, 0, sizeof *info);
    st = plan_optimal(tg, &d, budget, limit, s, info);
    *took = core_seconds() - t0;
    dag_fini(&d);
    return st;
}

/* A random layered graph of about `nodes` ops over (1, 4, 4, 4) values: layers of 3 to 6
 * nodes, each a convolution or a ReLU of a node of the layer before, or the sum of one
 * of those and a node of any earlier layer (a skip); the head reads the last node. */
static void build_layered(remat_graph *g, int nodes)
{
    int32_t lab, x = input(g, 4, &lab), *v = calloc((size_t)nodes + 1, sizeof *v);
    int n = 1, prev = 0, cur = 1; /* the layer before is v[prev .. cur) */

    REMAT_ASSERT_TEST(v != NULL);
    v[0] = conv(g, x, 4);
    while (n < nodes - 4) {
        int width = 3 + (int)urand(4), start = n;

        for (int k = 0; k < width && n < nodes - 4; k++) {
            int32_t a = v[prev + (int)urand((uint64_t)(cur - prev))];
            uint64_t kind = urand(3);

            v[n++] = kind == 0 ? conv(g, a, 4)
                     : kind == 1 ? relu(g, a)
                                 : add2(g, a, v[(int)urand((uint64_t)cur)]);
        }
        prev = start;
        cur = n;
    }
    head(g, v[n - 1], lab);
    free(v);
}

/* A strategy's plan at its own least budget: its simulated peak and overhead; false
 * when it has none. */
static bool other_least(const remat_tgraph *tg, const char *name, remat_sim_result *r)
{
    remat_plan_opts po = {.strategy = remat_strategy_from_name(name), .budget_min = true};
    remat_schedule *o = NULL;
    bool ok = remat_plan(tg, &po, &o, NULL) == REMAT_OK && remat_sim_run(tg, o, r) == REMAT_OK;

    core_clear_error();
    remat_schedule_free(o);
    return ok;
}

/* A 300-node layered graph, time limit 3 s (the check allows 12 s more: lowering and
 * simulating, under a sanitizer too), at the least of four other strategies' least peaks,
 * where each one's plan is feasible (an upper bound of the optimum). The plan simulates
 * within the budget; its gap comes from a lower bound, overhead x (1 - gap), at most each
 * of those strategies' overheads (so below 1 when it recomputes). */
static void test_layered(void)
{
    static const char *const others[] = {"chen-sqrtn", "chen-greedy", "approx-tc",
                                         "approx-mc"};
    remat_sim_result ro[4], r;
    remat_graph *g = new_graph(NULL);
    remat_tgraph *tg;
    remat_schedule *s = NULL;
    remat_plan_info info;
    size_t budget = SIZE_MAX;
    double took, lower;
    int32_t nodes;
    struct dag d;
    remat_status st;

    build_layered(g, 300);
    tg = to_tgraph(g);
    REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
    nodes = d.n;
    dag_fini(&d);
    CHECK(nodes > 250 && nodes <= 310, "the layered graph has %d nodes", nodes);
    for (int k = 0; k < 4; k++) {
        if (!other_least(tg, others[k], &ro[k]))
            ro[k].activation_peak_bytes = SIZE_MAX;
        budget = ro[k].activation_peak_bytes < budget ? ro[k].activation_peak_bytes : budget;
    }
    CHECK(budget < SIZE_MAX, "no other strategy planned the layered graph");
    if (budget == SIZE_MAX)
        goto out;
    st = timed_plan(tg, budget, 3, &s, &info, &took);
    CHECK(st == REMAT_OK, "layered at %zu: %s: %s", budget, remat_status_name(st),
          remat_errmsg());
    CHECK(took <= 3 + 12, "layered: %.2f s for a limit of 3 s", took);
    if (st || remat_sim_run(tg, s, &r) != REMAT_OK) {
        CHECK(st != REMAT_OK, "the plan is invalid: %s", remat_errmsg());
        goto out;
    }
    CHECK(r.activation_peak_bytes <= budget, "peak %zu above the budget %zu",
          r.activation_peak_bytes, budget);
    CHECK(info.optimality_gap >= 0 && (r.overhead == 0 || info.optimality_gap < 1),
          "overhead %.4f, gap %g: no lower bound", r.overhead, info.optimality_gap);
    lower = r.overhead * (1 - info.optimality_gap);
    printf("  %d nodes at %zu bytes: overhead %.4f, gap %.3f (bound %.4f), %.2f s\n", nodes,
           budget, r.overhead, info.optimality_gap, lower, took);
    for (int k = 0; k < 4; k++) {
        if (ro[k].activation_peak_bytes > budget)
            continue;
        CHECK(lower <= ro[k].overhead + 1e-9, "the bound %.6f is above %s's overhead %.6f",
              lower, others[k], ro[k].overhead);
        printf("  %s: overhead %.4f\n", others[k], ro[k].overhead);
    }
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* The same input twice gives the same plan: CBC runs on one thread with fixed seeds
 * (when it finishes within the limit: one stopped by the clock may stop elsewhere). The
 * random graphs at their smallest budget, proven optimal by branch and cut at once. */
static void test_deterministic(void)
{
    static struct cand cands[2 << MAX_OPS];

    for (int k = 0; k < 6; k++) {
        remat_graph *g = new_graph(NULL);
        remat_tgraph *tg;
        remat_schedule *s[2] = {NULL, NULL};
        remat_plan_info info[2];
        size_t budget = SIZE_MAX;
        double took;

        build_random(g, 6 + k);
        tg = to_tgraph(g);
        for (int q = 0, n = oracle_all(tg, cands); q < n; q++)
            budget = cands[q].peak < budget ? cands[q].peak : budget;
        for (int q = 0; q < 2; q++)
            CHECK_OK(timed_plan(tg, budget, 30, &s[q], &info[q], &took));
        if (s[0] && s[1])
            CHECK(harness_same_steps(s[0], s[1]) && info[0].optimality_gap == info[1].optimality_gap,
                  "graph %d: two plans of the same graph differ", k);
        remat_schedule_free(s[0]);
        remat_schedule_free(s[1]);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 10) : 20240611u;
    RUN(test_small_graphs);
    RUN(test_random_graphs);
    RUN(test_infeasible);
    RUN(test_too_large);
    RUN(test_budget_min);
    RUN(test_oom);
    RUN(test_vgg19_dump);
    RUN(test_versus_others);
    RUN(test_layered);
    RUN(test_deterministic);
    return harness_end();
}
