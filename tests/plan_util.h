/*
 * plan_util.h - helpers shared by the lower-set and DP tests (test_lowerset.c,
 * test_dp.c, test_plan.c, test_plan_zoo.c): CHECK_OR, a seeded random stream, small
 * DAGs as bitsets (struct hg, up to HN nodes) with random generators and their
 * conversion to the planners' struct dag, lower sets and their M, T, boundary and
 * M(δ+(L)) + M(δ−(δ+(L)) \ L) worked out from the definitions, check_family (lsets_build
 * against an expected family), RUN_TIMED, and zoo_ends (a zoo graph's least and `none`
 * plans, for test_dp_scale.c and test_fit_scale.c). Each test program includes this header
 * once; a broken fixture stops the program (REMAT_ASSERT_TEST), it is not a test
 * failure.
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it (reseed), so one can be
 * rerun.
 */
#ifndef REMAT_PLAN_UTIL_H
#define REMAT_PLAN_UTIL_H

#include "harness.h"
#include "plan/kusumoto.h"

#include <stdint.h>
#include <time.h>


/* ------------------------------------------------------------------ random */

static uint64_t rng_state, seed;

static inline uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t urand(uint64_t n)
{
    return splitmix64() % n;
}

static inline void reseed(uint64_t salt)
{
    rng_state = seed ^ (salt * 0xd1b54a32d192ed03ull);
    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
}

/* ------------------------------------------------------- sets and graphs */

#define HN 192 /* nodes of a hand-built graph */
#define HW 3   /* words of a set */

typedef struct bset {
    uint64_t w[HW];
} bset;

/* Set i of a family as a bset (its row, lsets_row). */
static inline bset ls_set(const struct lsets *ls, int32_t i)
{
    bset b;

    REMAT_ASSERT_TEST(ls->words <= HW);
    memset(&b, 0, sizeof b);
    lsets_row(ls, i, b.w);
    return b;
}

static inline bool bs_has(const bset *s, int32_t v)
{
    return (s->w[v >> 6] >> (v & 63)) & 1;
}

static inline void bs_add(bset *s, int32_t v)
{
    s->w[v >> 6] |= (uint64_t)1 << (v & 63);
}

static inline void bs_del(bset *s, int32_t v)
{
    s->w[v >> 6] &= ~((uint64_t)1 << (v & 63));
}

static inline bool bs_sub(const bset *a, const bset *b)
{
    for (int i = 0; i < HW; i++)
        if (a->w[i] & ~b->w[i])
            return false;
    return true;
}

static inline bool bs_eq(const bset *a, const bset *b)
{
    return !memcmp(a, b, sizeof *a);
}

static inline int32_t bs_count(const bset *s)
{
    int32_t c = 0;

    for (int i = 0; i < HW; i++)
        c += __builtin_popcountll(s->w[i]);
    return c;
}

static inline int bs_cmp(const void *x, const void *y)
{
    const bset *a = x, *b = y;

    for (int i = HW; i-- > 0;)
        if (a->w[i] != b->w[i])
            return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}

static inline bool bs_in(const bset *s, const bset *sorted, int32_t n)
{
    return bsearch(s, sorted, (size_t)n, sizeof *s, bs_cmp) != NULL;
}

/* A DAG as predecessor and successor sets, nodes in a topological order. */
struct hg {
    int32_t n;
    bset pm[HN], sm[HN];
    size_t m[HN];
    double t[HN];
    bool int_t; /* every T_v a whole number */
};

static inline void hg_reset(struct hg *g, int32_t n)
{
    REMAT_ASSERT_TEST(n >= 1 && n <= HN);
    memset(g, 0, sizeof *g);
    g->n = n;
    g->int_t = true;
}

static inline void hg_edge(struct hg *g, int32_t u, int32_t v)
{
    REMAT_ASSERT_TEST(u >= 0 && u < v && v < g->n);
    bs_add(&g->pm[v], u);
    bs_add(&g->sm[u], v);
}

/* Byte sizes with ties and zeros, small and large; T integral (1; 1 or 10 as in
 * Kusumoto's costs; 0..10) or fractional. */
static inline void hg_weights(struct hg *g, bool int_t)
{
    int mm = (int)urand(4), tm = (int)urand(3);

    for (int32_t v = 0; v < g->n; v++) {
        switch (mm) {
        case 0:
            g->m[v] = urand(21);
            break;
        case 1:
            g->m[v] = 1 + urand(1000);
            break;
        case 2:
            g->m[v] = 64 * (1 + urand(4096));
            break;
        default:
            g->m[v] = urand(10) ? 1000000 + urand(1000000000) : 0;
            break;
        }
        if (!int_t)
            g->t[v] = 0.01 + (double)urand(1000) / 97.0;
        else
            g->t[v] = tm == 0 ? 1 : tm == 1 ? (urand(4) ? 1 : 10) : (double)urand(11);
    }
    g->int_t = int_t;
}

/* Up to nmax nodes, every forward pair an edge with one of a few densities. */
static inline void random_small(struct hg *g, int32_t nmax, bool int_t)
{
    static const int dens[] = {10, 25, 45, 70, 90};
    int32_t n = 1 + (int32_t)urand((uint64_t)nmax);
    int p = dens[urand(5)];

    hg_reset(g, n);
    for (int32_t v = 1; v < n; v++)
        for (int32_t u = 0; u < v; u++)
            if ((int)urand(100) < p)
                hg_edge(g, u, v);
    hg_weights(g, int_t);
}

/* 65..184 nodes on one to three interleaved paths, a few edges across: a few hundred to
 * a few tens of thousands of lower sets, two or three bitset words. */
static inline void random_narrow(struct hg *g)
{
    int32_t k = 1 + (int32_t)urand(3), last[3] = {-1, -1, -1}, n;

    n = 65 + (int32_t)urand(k == 1 ? 120 : k == 2 ? 60 : 20);
    hg_reset(g, n);
    for (int32_t v = 0; v < n; v++) {
        int32_t c = (int32_t)urand((uint64_t)k);

        if (last[c] >= 0)
            hg_edge(g, last[c], v);
        if (v > 0 && urand(100) < 8) {
            int32_t u = (int32_t)urand((uint64_t)v);

            if (u != last[c])
                hg_edge(g, u, v);
        }
        last[c] = v;
    }
    hg_weights(g, true);
}

/* A chain's arrays for n nodes (chain_free frees them). */
static inline void chain_alloc(struct chain *c, int32_t n)
{
    c->n_blocks = 0;
    c->block = calloc((size_t)n + 1, sizeof *c->block);
    c->kept = calloc((size_t)n + 1, sizeof *c->kept);
    REMAT_ASSERT_TEST(c->block && c->kept);
}

static inline void chain_free(struct chain *c)
{
    free(c->block);
    free(c->kept);
}

/* The library's planners' graph, filled by hand (freed by dag_fini: NULL allocator). */
static inline void to_dag(const struct hg *g, struct dag *d)
{
    int32_t n = g->n, k;
    size_t ne = 0;

    memset(d, 0, sizeof *d);
    for (int32_t v = 0; v < n; v++)
        ne += (size_t)bs_count(&g->pm[v]);
    d->n = n;
    d->words = (n + 63) / 64;
    d->n_edges = ne;
    d->al = NULL;
    d->op = calloc((size_t)n + 1, sizeof *d->op);
    d->node = calloc((size_t)n + 1, sizeof *d->node);
    d->m = calloc((size_t)n + 1, sizeof *d->m);
    d->t = calloc((size_t)n + 1, sizeof *d->t);
    d->pred_at = calloc((size_t)n + 2, sizeof *d->pred_at);
    d->succ_at = calloc((size_t)n + 2, sizeof *d->succ_at);
    d->pred = calloc(ne + 1, sizeof *d->pred);
    d->succ = calloc(ne + 1, sizeof *d->succ);
    REMAT_ASSERT_TEST(d->op && d->node && d->m && d->t && d->pred_at && d->succ_at && d->pred &&
                      d->succ);
    k = 0;
    for (int32_t v = 0; v < n; v++) {
        d->op[v] = d->node[v] = v;
        d->m[v] = g->m[v];
        d->t[v] = g->t[v];
        d->pred_at[v] = k;
        for (int32_t u = 0; u < n; u++)
            if (bs_has(&g->pm[v], u))
                d->pred[k++] = u;
    }
    d->pred_at[n] = k;
    k = 0;
    for (int32_t u = 0; u < n; u++) {
        d->succ_at[u] = k;
        for (int32_t v = 0; v < n; v++)
            if (bs_has(&g->sm[u], v))
                d->succ[k++] = v;
    }
    d->succ_at[n] = k;
}

/* ------------------------------------------ lower sets from the definitions */

struct sinfo {
    bset s, bd;       /* the set, its boundary */
    int32_t size;
    size_t m, m_out;  /* M(L), M(δ+(L)) + M(δ−(δ+(L)) \ L) */
    double t;
    bool approx;      /* in the approximate family */
};

static inline bool is_lower(const struct hg *g, const bset *s)
{
    for (int32_t v = 0; v < g->n; v++)
        if (bs_has(s, v) && !bs_sub(&g->pm[v], s))
            return false;
    return true;
}

static inline void set_info(const struct hg *g, const bset *s, struct sinfo *o)
{
    bset out = {{0}}, outp = {{0}};

    memset(o, 0, sizeof *o);
    o->s = *s;
    for (int32_t v = 0; v < g->n; v++) {
        if (!bs_has(s, v))
            continue;
        o->size++;
        o->m += g->m[v];
        o->t += g->t[v];
        if (!bs_sub(&g->sm[v], s))
            bs_add(&o->bd, v); /* a successor outside */
        for (int i = 0; i < HW; i++)
            out.w[i] |= g->sm[v].w[i];
    }
    for (int i = 0; i < HW; i++)
        out.w[i] &= ~s->w[i]; /* δ+(L) */
    for (int32_t w = 0; w < g->n; w++) {
        if (!bs_has(&out, w))
            continue;
        o->m_out += g->m[w];
        for (int i = 0; i < HW; i++)
            outp.w[i] |= g->pm[w].w[i];
    }
    for (int i = 0; i < HW; i++)
        outp.w[i] &= ~s->w[i]; /* δ−(δ+(L)) \ L, members of δ+(L) included */
    for (int32_t u = 0; u < g->n; u++)
        if (bs_has(&outp, u))
            o->m_out += g->m[u];
}

/* v and every node with a path to v, grown to a fixpoint. */
static inline bset ancestors(const struct hg *g, int32_t v)
{
    bset a = {{0}};
    bool grew = true;

    bs_add(&a, v);
    while (grew) {
        grew = false;
        for (int32_t u = 0; u < g->n; u++)
            if (bs_has(&a, u) && !bs_sub(&g->pm[u], &a)) {
                for (int i = 0; i < HW; i++)
                    a.w[i] |= g->pm[u].w[i];
                grew = true;
            }
    }
    return a;
}

static inline int32_t sort_unique(bset *s, int32_t n)
{
    int32_t k = 0;

    qsort(s, (size_t)n, sizeof *s, bs_cmp);
    for (int32_t i = 0; i < n; i++)
        if (k == 0 || !bs_eq(&s[k - 1], &s[i]))
            s[k++] = s[i];
    return k;
}

/* {∅, V} and the ancestor closure of every node, sorted; out has room for n + 2. */
static inline int32_t approx_family(const struct hg *g, bset *out)
{
    bset full = {{0}};
    int32_t k = 0;

    out[k++] = full;
    for (int32_t v = 0; v < g->n; v++) {
        bs_add(&full, v);
        out[k++] = ancestors(g, v);
    }
    out[k++] = full;
    return sort_unique(out, k);
}

/* Every lower set of a small graph: all 2^n subsets filtered. */
static inline int32_t all_lower_small(const struct hg *g, bset *out)
{
    int32_t k = 0;

    REMAT_ASSERT_TEST(g->n <= 12);
    for (uint64_t mask = 0; mask < ((uint64_t)1 << g->n); mask++) {
        bset s = {{mask}};

        if (is_lower(g, &s))
            out[k++] = s;
    }
    return k;
}

/* Every lower set by deciding the nodes in order (v may join only when its
 * predecessors have); counts past cap without storing. */
static inline void enum_lower(const struct hg *g, int32_t v, bset *cur, bset *out, int32_t cap,
                              int32_t *n_out)
{
    if (*n_out > cap)
        return;
    if (v == g->n) {
        if (*n_out < cap)
            out[*n_out] = *cur;
        (*n_out)++;
        return;
    }
    enum_lower(g, v + 1, cur, out, cap, n_out);
    if (bs_sub(&g->pm[v], cur)) {
        bs_add(cur, v);
        enum_lower(g, v + 1, cur, out, cap, n_out);
        bs_del(cur, v);
    }
}

/* ---------------------------------------------------- checking lsets_build */

/*
 * lsets_build(exact) against want[0..n_want) (sorted by bs_cmp): the same family, sizes
 * in order, and every set's M, T, boundary and m_out recomputed. False after the first
 * mismatch, which is reported.
 */
static inline bool check_family(const struct hg *g, const struct dag *d, bool exact,
                                const bset *want, int32_t n_want, int gi)
{
    const char *fam = exact ? "exact" : "approx";
    struct lsets ls;
    bset *got = NULL;
    bool ok = false;
    remat_status st = lsets_build(d, exact ? LS_EXACT : LS_APPROX, NULL, (int64_t)1 << 30, &ls);

    CHECK_OR(st == REMAT_OK, return false, "graph %d %s: %s", gi, fam, remat_errmsg());
    CHECK_OR(ls.n == n_want, goto out, "graph %d (%d nodes) %s: %d sets, expected %d", gi,
             g->n, fam, ls.n, n_want);
    CHECK_OR(ls.words == (g->n + 63) / 64, goto out, "graph %d: %d words", gi, ls.words);
    got = calloc((size_t)ls.n + 1, sizeof *got);
    REMAT_ASSERT_TEST(got);
    CHECK_OR(ls.bd_at[0] == 0, goto out, "graph %d: bd_at[0] = %d", gi, ls.bd_at[0]);
    for (int32_t i = 0; i < ls.n; i++) {
        struct sinfo si;
        bset bd = {{0}};

        got[i] = ls_set(&ls, i);
        for (int32_t v = g->n; v < 64 * ls.words; v++)
            CHECK_OR(!bs_has(&got[i], v), goto out, "graph %d %s set %d: bit %d past n", gi,
                     fam, i, v);
        set_info(g, &got[i], &si);
        CHECK_OR(ls.size[i] == si.size, goto out, "graph %d %s set %d: size %d, expected %d",
                 gi, fam, i, ls.size[i], si.size);
        CHECK_OR(ls.m[i] == si.m, goto out, "graph %d %s set %d: M %zu, expected %zu", gi, fam,
                 i, ls.m[i], si.m);
        /* ordered by M, then size (the DP's windows rely on it); so no strict superset
         * comes before its subset */
        CHECK_OR(i == 0 || ls.m[i - 1] < ls.m[i] ||
                 (ls.m[i - 1] == ls.m[i] && ls.size[i - 1] <= ls.size[i]), goto out,
                 "graph %d %s: set %d (M %zu, size %d) after M %zu, size %d", gi, fam, i,
                 ls.m[i], ls.size[i], ls.m[i - 1], ls.size[i - 1]);
        CHECK_OR(ls.by_m, goto out, "graph %d %s: not marked as sorted by M", gi, fam);
        CHECK_OR(fabs(ls.t[i] - si.t) <= 1e-9 * (1 + si.t), goto out,
                 "graph %d %s set %d: T %.17g, expected %.17g", gi, fam, i, ls.t[i], si.t);
        CHECK_OR(ls.m_out[i] == si.m_out, goto out,
                 "graph %d %s set %d: m_out %zu, expected %zu", gi, fam, i, ls.m_out[i],
                 si.m_out);
        CHECK_OR(ls.bd_at[i + 1] >= ls.bd_at[i], goto out, "graph %d: bd_at", gi);
        /* the subset test through the maximal nodes against the bitsets' own (every
         * pair of up to 128 sets, the first 128 against the rest beyond) */
        for (int32_t j = 0; j < ls.n && (i < 128 || j < 128); j++)
            CHECK_OR(lsets_subset(&ls, i, j) == bits_subset(got[i].w, ls_set(&ls, j).w, HW),
                     goto out,
                     "graph %d %s: sets %d and %d: lsets_subset says %d", gi, fam, i, j,
                     (int)lsets_subset(&ls, i, j));
        for (int32_t k = ls.bd_at[i]; k < ls.bd_at[i + 1]; k++) {
            int32_t v = ls.bd[k];

            CHECK_OR(v >= 0 && v < g->n && !bs_has(&bd, v), goto out,
                     "graph %d %s set %d: boundary entry %d bad or repeated", gi, fam, i, v);
            bs_add(&bd, v);
        }
        CHECK_OR(bs_eq(&bd, &si.bd), goto out,
                 "graph %d %s set %d: boundary of %d nodes, expected %d", gi, fam, i,
                 bs_count(&bd), bs_count(&si.bd));
    }
    qsort(got, (size_t)ls.n, sizeof *got, bs_cmp);
    for (int32_t i = 0; i < ls.n; i++)
        CHECK_OR(bs_eq(&got[i], &want[i]), goto out,
                 "graph %d %s: the %d-th set (in sorted order) is not the expected one", gi,
                 fam, i);
    ok = true;
out:
    free(got);
    lsets_fini(&ls);
    return ok;
}

/* A zoo network's training graph, its DAG and approximate family (a fixture: the
 * program stops when they cannot be built); zoo_family_fini frees them. */
struct zoo_family {
    remat_graph *g;
    remat_tgraph *tg;
    struct dag d;
    struct lsets ls;
};

static inline void zoo_family_build(struct zoo_family *z, const char *net,
                                    const remat_zoo_opts *zo)
{
    memset(z, 0, sizeof *z);
    REMAT_ASSERT_TEST(remat_zoo_build(net, zo, NULL, &z->g) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_tgraph_from_graph(z->g, NULL, &z->tg) == REMAT_OK && z->tg);
    REMAT_ASSERT_TEST(dag_build(z->tg, &z->d) == REMAT_OK);
    REMAT_ASSERT_TEST(lsets_build(&z->d, LS_APPROX, NULL, 0, &z->ls) == REMAT_OK);
}

static inline void zoo_family_fini(struct zoo_family *z)
{
    lsets_fini(&z->ls);
    dag_fini(&z->d);
    remat_tgraph_free(z->tg);
    remat_graph_free(z->g);
}

/* A check of the time-centric search on one family at one budget. */
typedef void (*family_budget_fn)(const struct dag *d, const struct lsets *ls, size_t budget,
                                 const char *what, int gi, void *ctx);

/*
 * fn on both families of g's DAG d (the exact one only with at most exact_max lower
 * sets), at the budgets lo + (M - lo) / div[b] for the n_div divisors given (0: lo
 * itself), lo the least budget and M twice the nodes' bytes, each with the search's
 * first try capped at one state (kusumoto_set_trial(1): its Lagrangian runs) and not.
 */
static inline void each_family_budget(const struct hg *g, const struct dag *d, int gi,
                                      int32_t exact_max, const int *div, int n_div,
                                      family_budget_fn fn, void *ctx)
{
    for (int fi = 0; fi < 2; fi++) {
        struct lsets ls;
        size_t lo = 0, all = 0;
        const char *what = fi ? "approx" : "exact";

        if (lsets_build(d, fi ? LS_APPROX : LS_EXACT, NULL, exact_max, &ls))
            continue; /* too many lower sets for the exact family */
        for (int32_t v = 0; v < g->n; v++)
            all += 2 * g->m[v];
        CHECK_OK(kusumoto_min_budget(d, &ls, NULL, &lo));
        for (int b = 0; b < n_div; b++)
            for (int cap = 0; cap < 2; cap++) {
                size_t budget = lo + (div[b] > 0 && all > lo ? (all - lo) / (size_t)div[b] : 0);

                kusumoto_set_trial(cap ? 1 : 0);
                fn(d, &ls, budget, what, gi, ctx);
                kusumoto_set_trial(0);
            }
        lsets_fini(&ls);
    }
}

/* each_family_budget on 300 random DAGs of up to 12 nodes (every fourth with costs that
 * are not whole numbers) with ctx_small, then on 12 of 65..184 nodes with ctx_narrow,
 * from seed salt. */
static inline void each_random_family_budget(uint64_t salt, int32_t exact_max, const int *div,
                                             int n_div, family_budget_fn fn, void *ctx_small,
                                             void *ctx_narrow)
{
    static struct hg g;

    reseed(salt);
    for (int gi = 0; gi < 300 + 12; gi++) {
        struct dag d;

        if (gi < 300)
            random_small(&g, 12, gi % 4 != 3);
        else
            random_narrow(&g);
        to_dag(&g, &d);
        each_family_budget(&g, &d, gi < 300 ? gi : gi - 300, exact_max, div, n_div, fn,
                           gi < 300 ? ctx_small : ctx_narrow);
        dag_fini(&d);
    }
}

/* fn on GPT-2 of 24 layers (batch 1) on its approximate family, a tenth and a third of
 * the way from the least budget to M(V), with the search's first try capped at one state
 * (to its Lagrangian runs); what is "gpt2-24" and gi the fraction's index. */
static inline void each_gpt2_budget(family_budget_fn fn, void *ctx)
{
    remat_zoo_opts zo = {.batch = 1, .layers = 24};
    struct zoo_family z;
    size_t lo = 0, all;

    zoo_family_build(&z, "gpt2", &zo);
    CHECK_OK(kusumoto_min_budget(&z.d, &z.ls, NULL, &lo));
    all = z.ls.m[z.ls.n - 1];
    kusumoto_set_trial(1);
    for (int f = 0; f < 2; f++)
        fn(&z.d, &z.ls, lo + (all - lo) / (f ? 3 : 10), "gpt2-24", f, ctx);
    kusumoto_set_trial(0);
    zoo_family_fini(&z);
}

static inline double seconds(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* RUN, then the seconds it took. */
#define RUN_TIMED(fn)                                                                    \
    do {                                                                                 \
        double t0_ = seconds();                                                          \
        RUN(fn);                                                                         \
        printf("  (%.2f s)\n", seconds() - t0_);                                         \
    } while (0)

/* ------------------------------------------------------------- zoo plans */

/* The zoo's `model` of `layers` layers (0: its own) at batch 1 (*g its graph; NULL when
 * it cannot be built), with approx-tc's least-budget plan (*least, *rl: that plan
 * simulated) and `none`'s (*all). */
static inline remat_tgraph *zoo_ends(const char *model, int layers, remat_graph **g,
                                     remat_plan_info *least, remat_sim_result *rl,
                                     remat_plan_info *all)
{
    remat_zoo_opts zo = {.batch = 1, .layers = layers};
    remat_plan_opts o = {.strategy = REMAT_STRATEGY_APPROX_TC, .budget_min = true};
    remat_plan_opts none = {.strategy = REMAT_STRATEGY_NONE};
    remat_schedule *s = NULL;
    remat_tgraph *tg = NULL;

    *g = NULL;
    CHECK_OK(remat_zoo_build(model, &zo, NULL, g));
    CHECK_OK(remat_tgraph_from_graph(*g, NULL, &tg));
    if (!tg)
        return NULL;
    CHECK_OK(remat_plan(tg, &o, &s, least));
    CHECK_OK(remat_sim_run(tg, s, rl));
    remat_schedule_free(s);
    s = NULL;
    CHECK_OK(remat_plan(tg, &none, &s, all));
    remat_schedule_free(s);
    return tg;
}

static inline remat_tgraph *gpt2_ends(int layers, remat_graph **g, remat_plan_info *least,
                                      remat_sim_result *rl, remat_plan_info *all)
{
    return zoo_ends("gpt2", layers, g, least, rl, all);
}

#endif
