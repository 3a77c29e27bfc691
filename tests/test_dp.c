/*
 * test_dp.c - the lower-set DP of Kusumoto et al. (plan/kusumoto.c) against answers
 * worked out here from DESIGN.md section 4, by brute force:
 *  - every chain ∅ = L0 ⊊ … ⊊ Lk = V of random DAGs of up to 12 nodes, by a depth-first
 *    search, with its bound max M(i), its overhead and its cached memory;
 *    kusumoto_min_budget and kusumoto_plan (time- and memory-centric) at budgets around
 *    the minimum against them, on the exact and the approximate family; the returned
 *    chain is measured again here, and the time-centric one is found again with the
 *    first try capped (kusumoto_set_trial: kept pairs, the Lagrangian bound, deepening
 *    from it) and must be the same;
 *  - on 65..184-node graphs (two and three bitset words): their lower sets by a
 *    backtracking enumeration against lsets_build, and a Pareto DP written here in place
 *    of the chain enumeration.
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it, so one can be rerun.
 */
#include "plan_util.h"
#include "plan/dp_coarse.h"

/* ------------------------------------------------- chains, by brute force */

#define SMAXL 300        /* lower sets of a graph whose chains are enumerated */
#define DFS_CAP 200000.0  /* chain prefixes enumerated per graph */

struct triple {
    size_t bound, cached; /* max_i M(i); Σ_i M(Vi ∩ ∂(Li)) */
    double t;             /* Σ_i T(Vi \ ∂(Li)) */
};

/* The lattice of a graph's lower sets and every chain through it. */
struct bf {
    const struct hg *g;
    int32_t n_sets;
    struct sinfo set[SMAXL];          /* by size: ∅ first, V last */
    int32_t at[SMAXL + 1], to[SMAXL * SMAXL / 2 + SMAXL]; /* strict supersets, CSR */
    size_t e_m[SMAXL * SMAXL / 2 + SMAXL], e_c[SMAXL * SMAXL / 2 + SMAXL];
    double e_t[SMAXL * SMAXL / 2 + SMAXL];
    struct triple *tr;
    size_t n_tr, cap_tr;
};

static int cmp_sinfo(const void *x, const void *y)
{
    const struct sinfo *a = x, *b = y;

    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return bs_cmp(&a->s, &b->s);
}

/* sets: every lower set of g; fam: the approximate family (sorted). */
static void bf_setup(struct bf *b, const struct hg *g, const bset *sets, int32_t n,
                     const bset *fam, int32_t n_fam)
{
    int32_t k = 0;

    REMAT_ASSERT_TEST(n <= SMAXL);
    b->g = g;
    b->n_sets = n;
    for (int32_t i = 0; i < n; i++) {
        set_info(g, &sets[i], &b->set[i]);
        b->set[i].approx = bs_in(&sets[i], fam, n_fam);
    }
    qsort(b->set, (size_t)n, sizeof *b->set, cmp_sinfo);
    REMAT_ASSERT_TEST(b->set[0].size == 0 && b->set[n - 1].size == g->n);
    for (int32_t i = 0; i < n; i++) {
        b->at[i] = k;
        for (int32_t j = i + 1; j < n; j++) {
            const struct sinfo *li = &b->set[i], *lj = &b->set[j];

            if (li->size == lj->size || !bs_sub(&li->s, &lj->s))
                continue;
            REMAT_ASSERT_TEST(k < (int32_t)(sizeof b->to / sizeof b->to[0]));
            b->to[k] = j;
            b->e_m[k] = b->e_c[k] = 0;
            b->e_t[k] = 0;
            for (int32_t v = 0; v < g->n; v++) {
                if (!bs_has(&lj->s, v) || bs_has(&li->s, v))
                    continue; /* v in the block Lj \ Li */
                b->e_m[k] += g->m[v];
                if (bs_has(&lj->bd, v))
                    b->e_c[k] += g->m[v];
                else
                    b->e_t[k] += g->t[v];
            }
            k++;
        }
    }
    b->at[n] = k;
}

/* Chain prefixes from ∅ (the search's nodes), over the approximate family or all. */
static double bf_count(const struct bf *b, bool approx_only)
{
    double cnt[SMAXL], total = 0;

    memset(cnt, 0, sizeof cnt);
    cnt[0] = 1;
    for (int32_t i = 0; i < b->n_sets; i++) {
        total += cnt[i];
        for (int32_t e = b->at[i]; e < b->at[i + 1]; e++)
            if (!approx_only || b->set[b->to[e]].approx)
                cnt[b->to[e]] += cnt[i];
    }
    return total;
}

static void bf_dfs(struct bf *b, int32_t i, bool approx_only, size_t cached, size_t bound,
                   double t)
{
    if (i == b->n_sets - 1) {
        if (b->n_tr == b->cap_tr) {
            b->cap_tr = b->cap_tr ? 2 * b->cap_tr : 1024;
            b->tr = realloc(b->tr, sizeof *b->tr * b->cap_tr);
            REMAT_ASSERT_TEST(b->tr);
        }
        b->tr[b->n_tr++] = (struct triple){bound, cached, t};
        return;
    }
    for (int32_t e = b->at[i]; e < b->at[i + 1]; e++) {
        int32_t j = b->to[e];
        size_t mi;

        if (approx_only && !b->set[j].approx)
            continue;
        /* M(i) = cached before + 2 M(Vi) + M(δ+(Li)) + M(δ−(δ+(Li)) \ Li) */
        mi = cached + 2 * b->e_m[e] + b->set[j].m_out;
        bf_dfs(b, j, approx_only, cached + b->e_c[e], mi > bound ? mi : bound, t + b->e_t[e]);
    }
}

static void bf_chains(struct bf *b, bool approx_only)
{
    b->n_tr = 0;
    bf_dfs(b, 0, approx_only, 0, 0, 0);
}

struct best {
    bool feasible;
    double min_t;        /* least overhead of a chain within the budget */
    size_t min_c;        /* least cached memory of one */
    double t_at_min_c;   /* and the least overhead among those */
};

static struct best bf_best(const struct triple *tr, size_t n, size_t budget)
{
    struct best r = {false, INFINITY, SIZE_MAX, INFINITY};

    for (size_t k = 0; k < n; k++) {
        if (tr[k].bound > budget)
            continue;
        r.feasible = true;
        r.min_t = tr[k].t < r.min_t ? tr[k].t : r.min_t;
        if (tr[k].cached < r.min_c || (tr[k].cached == r.min_c && tr[k].t < r.t_at_min_c)) {
            r.min_c = tr[k].cached;
            r.t_at_min_c = tr[k].t;
        }
    }
    return r;
}

/* --------------------------------------------- a returned chain, measured */

struct cinfo {
    bool ok;
    char why[160];
    size_t bound, cached;
    double t;
};

/*
 * The chain of c measured from the definitions: blocks 1..n_blocks, none empty, every
 * prefix L_b a lower set (and in fam when fam is given), kept[v] exactly when v is in
 * ∂(L_block(v)); its bound, cached memory and overhead.
 */
static struct cinfo chain_eval(const struct hg *g, const struct chain *c, const bset *fam,
                               int32_t n_fam)
{
    struct cinfo r;
    bset l = {{0}};
    int32_t nb = c->n_blocks;

    memset(&r, 0, sizeof r);
    if (nb < 1 || nb > g->n) {
        snprintf(r.why, sizeof r.why, "%d blocks for %d nodes", nb, g->n);
        return r;
    }
    for (int32_t v = 0; v < g->n; v++)
        if (c->block[v] < 1 || c->block[v] > nb) {
            snprintf(r.why, sizeof r.why, "node %d in block %d of %d", v, c->block[v], nb);
            return r;
        }
    for (int32_t b = 1; b <= nb; b++) {
        struct sinfo si;
        size_t mb = 0, mi;
        int32_t nv = 0;

        for (int32_t v = 0; v < g->n; v++)
            if (c->block[v] == b) {
                bs_add(&l, v);
                mb += g->m[v];
                nv++;
            }
        if (nv == 0) {
            snprintf(r.why, sizeof r.why, "block %d of %d is empty", b, nb);
            return r;
        }
        if (!is_lower(g, &l)) {
            snprintf(r.why, sizeof r.why, "L_%d is not a lower set", b);
            return r;
        }
        if (fam && !bs_in(&l, fam, n_fam)) {
            snprintf(r.why, sizeof r.why, "L_%d is not in the approximate family", b);
            return r;
        }
        set_info(g, &l, &si);
        mi = r.cached + 2 * mb + si.m_out;
        r.bound = mi > r.bound ? mi : r.bound;
        for (int32_t v = 0; v < g->n; v++) {
            if (c->block[v] != b)
                continue;
            if (c->kept[v] != bs_has(&si.bd, v)) {
                snprintf(r.why, sizeof r.why, "node %d of block %d: kept %d, in ∂(L) %d", v, b,
                         (int)c->kept[v], (int)bs_has(&si.bd, v));
                return r;
            }
            if (c->kept[v])
                r.cached += g->m[v];
            else
                r.t += g->t[v];
        }
    }
    r.ok = true;
    return r;
}

/* ------------------------------------------------- the DP against chains */

struct dp_counts {
    int n_plans, n_feasible, n_infeasible;
};

/*
 * The time-centric chain again with the first try capped at one state (kusumoto_set_trial),
 * so that the search keeps the pairs, bounds the states by the Lagrangian bound and
 * deepens from it, first from its own first step, then from one unit above the bound
 * (kusumoto_set_first_step: runs that fail below the optimum, then one at or above it):
 * the same chain as the search without the cap each time.
 */
static void check_same_chain(const struct dag *d, const struct lsets *ls, size_t budget,
                             int64_t coarse_at, const struct chain *want, const char *what,
                             int gi)
{
    struct chain c;
    struct dp_result res;
    remat_status st;

    chain_alloc(&c, d->n);
    for (int64_t step = 0; step < 2; step++) {
        kusumoto_set_trial(1);
        kusumoto_set_first_step(step);
        st = kusumoto_plan(d, ls, false, budget, coarse_at, NULL, &c, &res);
        kusumoto_set_trial(0);
        kusumoto_set_first_step(0);
        CHECK_OR(st == REMAT_OK && res.feasible, break, "graph %d %s-tc B=%zu, capped, "
                 "first step %lld: %s", gi, what, budget, (long long)step,
                 st ? remat_errmsg() : "infeasible");
        CHECK_OR(c.n_blocks == want->n_blocks, break, "graph %d %s-tc B=%zu, capped, first "
                 "step %lld: %d blocks, uncapped %d", gi, what, budget, (long long)step,
                 c.n_blocks, want->n_blocks);
        for (int32_t v = 0; v < d->n; v++)
            CHECK_OR(c.block[v] == want->block[v] && c.kept[v] == want->kept[v], break,
                     "graph %d %s-tc B=%zu, capped, first step %lld: node %d in block %d "
                     "(kept %d), uncapped %d (%d)", gi, what, budget, (long long)step, v,
                     c.block[v], (int)c.kept[v], want->block[v], (int)want->kept[v]);
    }
    chain_free(&c);
}

/*
 * kusumoto_plan at one budget, time- and memory-centric, against the best chains: the
 * verdict, the chain itself (measured by chain_eval), its bound and overhead as
 * reported, and its optimality.
 */
static void check_plan_at(const struct hg *g, const struct dag *d, const struct lsets *ls,
                          const struct best *want, size_t budget, int64_t coarse_at,
                          const bset *fam, int32_t n_fam, const char *what, int gi,
                          struct dp_counts *k)
{
    double tv = 0;
    struct chain c;

    for (int32_t v = 0; v < g->n; v++)
        tv += g->t[v];
    chain_alloc(&c, g->n);
    for (int mc = 0; mc < 2; mc++) {
        const char *how = mc ? "mc" : "tc";
        struct dp_result res;
        struct cinfo ci;
        remat_status st = kusumoto_plan(d, ls, mc, budget, coarse_at, NULL, &c, &res);

        k->n_plans++;
        CHECK_OR(st == REMAT_OK, break, "graph %d %s-%s B=%zu: %s", gi, what, how, budget,
                 remat_errmsg());
        CHECK_OR(res.feasible == want->feasible, break,
                 "graph %d (%d nodes) %s-%s B=%zu: feasible %d, brute force %d", gi, g->n,
                 what, how, budget, (int)res.feasible, (int)want->feasible);
        if (!res.feasible) {
            k->n_infeasible++;
            continue;
        }
        k->n_feasible++;
        ci = chain_eval(g, &c, fam, n_fam);
        CHECK_OR(ci.ok, break, "graph %d %s-%s B=%zu: bad chain: %s", gi, what, how, budget,
                 ci.why);
        CHECK(ci.bound <= budget, "graph %d %s-%s: chain bound %zu above B=%zu", gi, what, how,
              ci.bound, budget);
        CHECK(res.bound == ci.bound, "graph %d %s-%s B=%zu: res.bound %zu, the chain's %zu",
              gi, what, how, budget, res.bound, ci.bound);
        CHECK(fabs(res.overhead - (tv > 0 ? ci.t / tv : 0)) <= 1e-12,
              "graph %d %s-%s: overhead %.17g, the chain's %.17g / %.17g", gi, what, how,
              res.overhead, ci.t, tv);
        if (!mc)
            check_same_chain(d, ls, budget, coarse_at, &c, what, gi);
        if (!mc && g->int_t)
            CHECK(ci.t == want->min_t, "graph %d (%d nodes) %s-tc B=%zu: overhead %g, least "
                  "%g", gi, g->n, what, budget, ci.t, want->min_t);
        /* rounded overheads: each block's within half a unit of T(V) / (8 n) */
        if (!mc && !g->int_t)
            CHECK(ci.t <= want->min_t + tv / 8 + 1e-9, "graph %d %s-tc B=%zu: overhead %g, "
                  "least %g (T(V) %g)", gi, what, budget, ci.t, want->min_t, tv);
        if (mc) {
            CHECK(ci.cached == want->min_c, "graph %d (%d nodes) %s-mc B=%zu: cached %zu, "
                  "least %zu", gi, g->n, what, budget, ci.cached, want->min_c);
            if (g->int_t && ci.cached == want->min_c)
                CHECK(ci.t == want->t_at_min_c, "graph %d %s-mc B=%zu: overhead %g, least at "
                      "the least cached %g", gi, what, budget, ci.t, want->t_at_min_c);
        }
    }
    chain_free(&c);
}

/*
 * kusumoto_min_budget against the least bound over the chains tr[0..n_tr) (of the
 * family of ls), then kusumoto_plan at budgets around it. Returns the DP's minimum.
 */
static size_t check_dp(const struct hg *g, const struct dag *d, const struct lsets *ls,
                       const struct triple *tr, size_t n_tr, const bset *fam, int32_t n_fam,
                       const char *what, int gi, struct dp_counts *k)
{
    size_t lo = SIZE_MAX, hi = 0, mv = 0, budgets[12];
    int nb = 0;

    REMAT_ASSERT_TEST(n_tr > 0);
    for (size_t i = 0; i < n_tr; i++)
        lo = tr[i].bound < lo ? tr[i].bound : lo;
    for (int32_t v = 0; v < g->n; v++)
        mv += 2 * g->m[v];
    CHECK_OK(kusumoto_min_budget(d, ls, NULL, &hi));
    /* bisection to within 1e-5 relative; below 10^5 bytes that is to the byte */
    CHECK(lo <= hi && (double)hi <= (double)lo * (1 + 1e-5) + 1,
          "graph %d (%d nodes) %s: min budget %zu, brute force %zu", gi, g->n, what, hi, lo);
    if (hi <= 100000 && lo > 0)
        CHECK(hi == lo, "graph %d %s: min budget %zu, brute force %zu", gi, what, hi, lo);
    budgets[nb++] = lo;
    if (lo > 0)
        budgets[nb++] = lo - 1;
    budgets[nb++] = mv;
    budgets[nb++] = lo + (mv - lo) / 2;
    budgets[nb++] = lo + urand(mv - lo + 1);
    for (int i = 0; i < 2; i++) {
        size_t b = tr[urand(n_tr)].bound;

        budgets[nb++] = b;
        if (b > 0)
            budgets[nb++] = b - 1;
    }
    budgets[nb++] = SIZE_MAX / 4; /* remat_plan's "no limit" */
    for (int i = 0; i < nb; i++) {
        struct best want = bf_best(tr, n_tr, budgets[i]);

        check_plan_at(g, d, ls, &want, budgets[i], INT64_MAX, fam, n_fam, what, gi, k);
    }
    return hi;
}

static void test_dp_brute(void)
{
    static struct hg g;
    static struct bf b;
    static bset all[1 << 12], fam[HN + 2];
    struct dp_counts k = {0, 0, 0};
    int tested = 0, n_frac = 0, skipped = 0, gi;
    size_t n_chains = 0, n_chains_a = 0;

    reseed(2);
    for (gi = 0; tested < 700 && gi < 5000; gi++) {
        struct dag d;
        struct lsets ls_e, ls_a;
        int32_t n_all, n_fam;
        size_t hi_e, hi_a, lo_e = SIZE_MAX;
        bool int_t = gi % 4 != 3;

        random_small(&g, 12, int_t);
        n_all = all_lower_small(&g, all);
        if (n_all > SMAXL) {
            skipped++;
            continue;
        }
        n_fam = approx_family(&g, fam);
        bf_setup(&b, &g, all, n_all, fam, n_fam);
        if (bf_count(&b, false) > DFS_CAP) {
            skipped++;
            continue;
        }
        tested++;
        n_frac += !int_t;
        to_dag(&g, &d);
        if (lsets_build(&d, LS_EXACT, NULL, 1 << 20, &ls_e)) {
            CHECK(false, "graph %d: %s", gi, remat_errmsg());
            dag_fini(&d);
            continue;
        }
        if (lsets_build(&d, LS_APPROX, NULL, 0, &ls_a)) {
            CHECK(false, "graph %d: %s", gi, remat_errmsg());
            lsets_fini(&ls_e);
            dag_fini(&d);
            continue;
        }
        bf_chains(&b, false);
        n_chains += b.n_tr;
        for (size_t i = 0; i < b.n_tr; i++)
            lo_e = b.tr[i].bound < lo_e ? b.tr[i].bound : lo_e;
        hi_e = check_dp(&g, &d, &ls_e, b.tr, b.n_tr, NULL, 0, "exact", gi, &k);
        bf_chains(&b, true);
        n_chains_a += b.n_tr;
        hi_a = check_dp(&g, &d, &ls_a, b.tr, b.n_tr, fam, n_fam, "approx", gi, &k);
        /* the approximate family is a subfamily: never a smaller minimum */
        CHECK(hi_a >= hi_e, "graph %d: approx min budget %zu below exact %zu", gi, hi_a, hi_e);
        lsets_fini(&ls_a);
        lsets_fini(&ls_e);
        dag_fini(&d);
    }
    free(b.tr);
    b.tr = NULL;
    b.n_tr = b.cap_tr = 0;
    printf("  %d graphs of 1..12 nodes (%d with fractional T; %d skipped: over %d lower sets "
           "or %.0f chain prefixes); %zu exact and %zu approximate chains; %d plans (%d "
           "feasible, %d infeasible)\n", tested, n_frac, skipped, SMAXL, DFS_CAP, n_chains,
           n_chains_a, k.n_plans, k.n_feasible, k.n_infeasible);
    CHECK(tested >= 600 && k.n_infeasible > 100 && k.n_feasible > 1000,
          "too few cases: %d graphs, %d feasible, %d infeasible plans", tested, k.n_feasible,
          k.n_infeasible);
}

/* -------------------------------------------- multi-word graphs, Pareto DP */

#define NARROW_CAP 40000
#define NARROW_DP 400

struct pp {
    size_t c;   /* cached memory so far */
    double x;   /* the running bound, or the overhead */
};

struct pfront {
    struct pp *p;
    int32_t n, cap;
};

/* Adds (c, x) unless a point has both no larger, dropping the points it beats. The
 * front is sorted by c ascending, x strictly descending. */
static void pf_add(struct pfront *f, size_t c, double x)
{
    int32_t lo = 0, hi = f->n, end;

    while (lo < hi) { /* the first point with a larger c */
        int32_t mid = (lo + hi) / 2;

        if (f->p[mid].c <= c)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && f->p[lo - 1].x <= x)
        return; /* the point with the largest c' <= c has the least x among those */
    if (lo > 0 && f->p[lo - 1].c == c)
        lo--; /* same c, larger x: replaced */
    for (end = lo; end < f->n && f->p[end].x >= x; end++)
        ;
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 8;
        f->p = realloc(f->p, sizeof *f->p * (size_t)f->cap);
        REMAT_ASSERT_TEST(f->p);
    }
    /* points [lo, end) have c' >= c and x' >= x: replace them by (c, x) */
    memmove(f->p + lo + 1, f->p + end, sizeof *f->p * (size_t)(f->n - end));
    f->n -= end - lo - 1;
    f->p[lo] = (struct pp){c, x};
}

/* The pairs the coarse-to-fine DP considers (dp_coarse.h), on sets sorted here by size:
 * each set's place in the family lsets_build sorted (ls), and the coarse sets of it. */
struct restrict_to {
    const struct dp_coarse *co;
    int32_t at[NARROW_DP];
};

/*
 * Over sets (all the lower sets, sorted by size): with min_bound, the least max M(i)
 * over all chains (returned in *x); else, at the budget, the least overhead (*x) and the
 * least cached memory (*c) with the least overhead among those (*t_at_c). False when no
 * chain fits. With r, only the blocks the coarse-to-fine DP considers.
 */
static bool pareto_dp(const struct hg *g, const struct sinfo *sets, int32_t n, bool min_bound,
                      size_t budget, const struct restrict_to *r, double *x, size_t *c,
                      double *t_at_c)
{
    struct pfront *f = calloc((size_t)n, sizeof *f);
    const struct pfront *last;
    bool any;

    REMAT_ASSERT_TEST(f);
    pf_add(&f[0], 0, 0);
    for (int32_t j = 1; j < n; j++)
        for (int32_t i = 0; i < j; i++) {
            size_t mb = 0, dc = 0, mi;
            double dt = 0;

            if (f[i].n == 0 || sets[i].size >= sets[j].size || !bs_sub(&sets[i].s, &sets[j].s))
                continue;
            if (r && !dp_coarse_allows(r->co, r->at[i], r->at[j]))
                continue;
            for (int32_t v = 0; v < g->n; v++) {
                if (!bs_has(&sets[j].s, v) || bs_has(&sets[i].s, v))
                    continue;
                mb += g->m[v];
                if (bs_has(&sets[j].bd, v))
                    dc += g->m[v];
                else
                    dt += g->t[v];
            }
            for (int32_t q = 0; q < f[i].n; q++) {
                const struct pp p = f[i].p[q];

                mi = p.c + 2 * mb + sets[j].m_out;
                if (min_bound)
                    pf_add(&f[j], p.c + dc, p.x > (double)mi ? p.x : (double)mi);
                else if (mi <= budget)
                    pf_add(&f[j], p.c + dc, p.x + dt);
            }
        }
    last = &f[n - 1];
    any = last->n > 0;
    *x = INFINITY;
    *c = SIZE_MAX;
    *t_at_c = INFINITY;
    for (int32_t q = 0; q < last->n; q++) {
        *x = last->p[q].x < *x ? last->p[q].x : *x;
        if (last->p[q].c < *c || (last->p[q].c == *c && last->p[q].x < *t_at_c)) {
            *c = last->p[q].c;
            *t_at_c = last->p[q].x;
        }
    }
    for (int32_t j = 0; j < n; j++)
        free(f[j].p);
    free(f);
    return any;
}

/*
 * The DP with its pairs restricted from coarse to fine (forced: coarse_at 1) against
 * pareto_dp over the same pairs, found here from the family's order and the coarse sets
 * (dp_coarse_init, whose choice is not what is tested; the pairs it allows are); where
 * they hold no chain, the DP plans over every pair, so the answer is want's.
 */
static void check_coarse(const struct hg *g, const struct dag *d, const struct lsets *ls,
                         const struct sinfo *si, int32_t n_sets, size_t budget,
                         const struct best *want, const bset *fam, int32_t n_fam, int gi,
                         struct dp_counts *k)
{
    static struct restrict_to r;
    struct dp_coarse co;
    struct best w;

    REMAT_ASSERT_TEST(ls->n == n_sets && dp_coarse_init(&co, d, ls, dp_coarse_runs(ls->n)));
    r.co = &co;
    for (int32_t i = 0; i < n_sets; i++) { /* the sets of ls are those of si, by bits */
        r.at[i] = -1;
        for (int32_t q = 0; q < ls->n && r.at[i] < 0; q++)
            if (!memcmp(ls_set(ls, q).w, si[i].s.w, sizeof(bset)))
                r.at[i] = q;
        REMAT_ASSERT_TEST(r.at[i] >= 0);
    }
    w.feasible = pareto_dp(g, si, n_sets, false, budget, &r, &w.min_t, &w.min_c,
                           &w.t_at_min_c);
    check_plan_at(g, d, ls, w.feasible ? &w : want, budget, 1, fam, n_fam, "coarse", gi, k);
    dp_coarse_fini(&co);
}

/* Lower sets of 65..184-node graphs (several words), and the DP on those with at most
 * NARROW_DP lower sets against pareto_dp over them (and over the pairs the coarse-to-
 * fine restriction allows, check_coarse). */
static void test_multiword(void)
{
    static struct hg g;
    static bset all[NARROW_CAP], fam[HN + 2];
    static struct sinfo si[NARROW_DP];
    struct dp_counts k = {0, 0, 0}, kc = {0, 0, 0};
    int n_graphs = 0, n_dp = 0, n_skip = 0, words[4] = {0};

    reseed(3);
    for (int gi = 0; n_graphs < 40 && gi < 400; gi++) {
        struct dag d;
        bset cur = {{0}};
        int32_t n_all = 0, n_fam;

        random_narrow(&g);
        enum_lower(&g, 0, &cur, all, NARROW_CAP, &n_all);
        if (n_all > NARROW_CAP) {
            n_skip++;
            continue;
        }
        n_graphs++;
        words[(g.n + 63) / 64]++;
        n_all = sort_unique(all, n_all);
        n_fam = approx_family(&g, fam);
        to_dag(&g, &d);
        if (!check_family(&g, &d, true, all, n_all, gi) ||
            !check_family(&g, &d, false, fam, n_fam, gi)) {
            dag_fini(&d);
            continue;
        }
        for (int fi = 0; fi < 2; fi++) {
            /* fi 0: every lower set; 1: the approximate family */
            const bset *sets = fi ? fam : all;
            int32_t n_sets = fi ? n_fam : n_all;
            struct lsets ls;
            double x, t_at_c;
            size_t c, lo, hi = 0, mv = 0, budgets[4];

            if (n_sets > NARROW_DP)
                continue;
            n_dp++;
            for (int32_t i = 0; i < n_sets; i++)
                set_info(&g, &sets[i], &si[i]);
            qsort(si, (size_t)n_sets, sizeof *si, cmp_sinfo);
            REMAT_ASSERT_TEST(pareto_dp(&g, si, n_sets, true, 0, NULL, &x, &c, &t_at_c));
            lo = (size_t)x;
            if (lsets_build(&d, fi ? LS_APPROX : LS_EXACT, NULL, 1 << 20, &ls)) {
                CHECK(false, "graph %d: %s", gi, remat_errmsg());
                continue;
            }
            CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &hi));
            CHECK(lo <= hi && (double)hi <= (double)lo * (1 + 1e-5) + 1,
                  "graph %d (%d nodes) %s: min budget %zu, Pareto DP %zu", gi, g.n,
                  fi ? "approx" : "exact", hi, lo);
            for (int32_t v = 0; v < g.n; v++)
                mv += 2 * g.m[v];
            budgets[0] = lo;
            budgets[1] = lo > 0 ? lo - 1 : 0;
            budgets[2] = lo + (mv - lo) / 3;
            budgets[3] = mv;
            for (int i = 0; i < 4; i++) {
                struct best want;

                want.feasible = pareto_dp(&g, si, n_sets, false, budgets[i], NULL, &want.min_t,
                                          &want.min_c, &want.t_at_min_c);
                check_plan_at(&g, &d, &ls, &want, budgets[i], INT64_MAX, fi ? fam : NULL,
                              n_fam, fi ? "approx" : "exact", gi, &k);
                if (fi)
                    check_coarse(&g, &d, &ls, si, n_sets, budgets[i], &want, fam, n_fam, gi,
                                 &kc);
            }
            lsets_fini(&ls);
        }
        dag_fini(&d);
    }
    printf("  %d graphs of 65..184 nodes (%d of 2 words, %d of 3; %d skipped: over %d lower "
           "sets); %d DP families; %d plans (%d feasible, %d infeasible); coarse to fine: "
           "%d plans (%d feasible)\n", n_graphs, words[2], words[3], n_skip, NARROW_CAP,
           n_dp, k.n_plans, k.n_feasible, k.n_infeasible, kc.n_plans, kc.n_feasible);
    CHECK(n_graphs >= 30 && n_dp >= 40 && k.n_infeasible > 10 && kc.n_feasible > 100,
          "too few cases");
}

/*
 * The default's choice of pairs (coarse_at 0) on GPT-2 of 150 layers (5,558 lower
 * sets): flat at the least budget (a narrow window), restricted at a wide one (half of M(V): past 2^22 pairs and 8 times the restricted
 * ones) and there within the budget, within 2% of the flat DP's overhead; never with
 * coarse_at INT64_MAX.
 */
static void test_coarse_default(void)
{
    remat_zoo_opts zo = {.batch = 1, .layers = 150};
    struct zoo_family z;
    struct chain c;
    struct dp_result lo, wide, flat;
    size_t mb = 0, B;

    zoo_family_build(&z, "gpt2", &zo);
    chain_alloc(&c, z.d.n);
    B = z.ls.m[z.ls.n - 1] / 2;
    CHECK_OK(kusumoto_min_budget(&z.d, &z.ls, NULL, &mb));
    CHECK_OK(kusumoto_plan(&z.d, &z.ls, false, mb, 0, NULL, &c, &lo));
    CHECK(lo.feasible && !lo.coarse, "least budget %zu: feasible %d, restricted %d", mb,
          lo.feasible, lo.coarse);
    CHECK_OK(kusumoto_plan(&z.d, &z.ls, false, B, INT64_MAX, NULL, &c, &flat));
    CHECK_OK(kusumoto_plan(&z.d, &z.ls, false, B, 0, NULL, &c, &wide));
    CHECK(flat.feasible && !flat.coarse && wide.feasible && wide.coarse,
          "budget %zu: flat %d/%d, default %d/%d", B, flat.feasible, flat.coarse,
          wide.feasible, wide.coarse);
    CHECK(wide.bound <= B && wide.overhead <= flat.overhead * 1.02,
          "budget %zu: bound %zu, overhead %.6f against the flat DP's %.6f", B, wide.bound,
          wide.overhead, flat.overhead);
    printf("  %d lower sets; least budget %zu (flat); at %zu restricted: overhead %.6f, "
           "flat %.6f\n", z.ls.n, mb, B, wide.overhead, flat.overhead);
    chain_free(&c);
    zoo_family_fini(&z);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    RUN_TIMED(test_dp_brute);
    RUN_TIMED(test_multiword);
    RUN_TIMED(test_coarse_default);
    return harness_end();
}
