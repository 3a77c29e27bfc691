/*
 * test_plan.c - the lower-set DP of Kusumoto et al. (plan/lowerset.c, plan/kusumoto.c)
 * and the DP strategies of remat_plan.
 *
 * Every expected answer is worked out here from DESIGN.md section 4, by brute force:
 *  - lower sets: every subset of random DAGs of up to 12 nodes, kept when no edge enters
 *    it from outside, against lsets_build (the family, the order by size, M, T, the
 *    boundary, M(δ+(L)) + M(δ−(δ+(L)) \ L)) and its cap; the approximate family against
 *    {∅, V} and the ancestor closures found by a fixpoint; on 65..184-node graphs (two
 *    and three bitset words) a backtracking enumeration stands in for the subsets;
 *  - the DP: every chain ∅ = L0 ⊊ … ⊊ Lk = V, by a depth-first search, with its bound
 *    max M(i), its overhead and its cached memory; kusumoto_min_budget and kusumoto_plan
 *    (time- and memory-centric) at budgets around the minimum against them, on the exact
 *    and the approximate family; the returned chain is measured again here. On the
 *    multi-word graphs a Pareto DP written here stands in for the enumeration;
 *  - remat_plan: random graphs from the public API, `none` and the four DP strategies at
 *    the minimum and at explicit budgets: the simulator accepts the schedule, its peak is
 *    under the budget, every backward runs once, a live-bytes walk written here gives the
 *    same peak, budgets below the minimum are refused;
 *  - two hand-worked graphs (a view; a big early value read by a late block) on which
 *    the bound M(i) is below what the lowered schedule holds: remat_plan's minimum budget
 *    must still come with a schedule within it;
 *  - the zoo (resnet18, googlenet) and, when ../shared/graphs is there, the authors'
 *    approximate minimum budgets of ResNet-50 and VGG-19.
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it, so one can be rerun.
 */
#include "harness.h"
#include "plan/kusumoto.h"

#include <stdint.h>
#include <time.h>

/* CHECK, then `on_fail` (return, goto, break, continue of the enclosing loop) when it
 * failed: one report per graph. An if-else, so that break and continue reach the loop. */
#define CHECK_OR(cond, on_fail, ...)                                                     \
    if (!(cond)) {                                                                       \
        CHECK(cond, __VA_ARGS__);                                                        \
        on_fail;                                                                         \
    } else                                                                               \
        (void)0

/* ------------------------------------------------------------------ random */

static uint64_t rng_state, seed;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static uint64_t urand(uint64_t n)
{
    return splitmix64() % n;
}

static void reseed(uint64_t salt)
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

static bool bs_has(const bset *s, int32_t v)
{
    return (s->w[v >> 6] >> (v & 63)) & 1;
}

static void bs_add(bset *s, int32_t v)
{
    s->w[v >> 6] |= (uint64_t)1 << (v & 63);
}

static void bs_del(bset *s, int32_t v)
{
    s->w[v >> 6] &= ~((uint64_t)1 << (v & 63));
}

static bool bs_sub(const bset *a, const bset *b)
{
    for (int i = 0; i < HW; i++)
        if (a->w[i] & ~b->w[i])
            return false;
    return true;
}

static bool bs_eq(const bset *a, const bset *b)
{
    return !memcmp(a, b, sizeof *a);
}

static int32_t bs_count(const bset *s)
{
    int32_t c = 0;

    for (int i = 0; i < HW; i++)
        c += __builtin_popcountll(s->w[i]);
    return c;
}

static int bs_cmp(const void *x, const void *y)
{
    const bset *a = x, *b = y;

    for (int i = HW; i-- > 0;)
        if (a->w[i] != b->w[i])
            return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}

static bool bs_in(const bset *s, const bset *sorted, int32_t n)
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

static void hg_reset(struct hg *g, int32_t n)
{
    REMAT_ASSERT_TEST(n >= 1 && n <= HN);
    memset(g, 0, sizeof *g);
    g->n = n;
    g->int_t = true;
}

static void hg_edge(struct hg *g, int32_t u, int32_t v)
{
    REMAT_ASSERT_TEST(u >= 0 && u < v && v < g->n);
    bs_add(&g->pm[v], u);
    bs_add(&g->sm[u], v);
}

/* Byte sizes with ties and zeros, small and large; T integral (1; 1 or 10 as in
 * Kusumoto's costs; 0..10) or fractional. */
static void hg_weights(struct hg *g, bool int_t)
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
static void random_small(struct hg *g, int32_t nmax, bool int_t)
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
static void random_narrow(struct hg *g)
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

/* The library's planners' graph, filled by hand (freed by dag_fini: NULL allocator). */
static void to_dag(const struct hg *g, struct dag *d)
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

static bool is_lower(const struct hg *g, const bset *s)
{
    for (int32_t v = 0; v < g->n; v++)
        if (bs_has(s, v) && !bs_sub(&g->pm[v], s))
            return false;
    return true;
}

static void set_info(const struct hg *g, const bset *s, struct sinfo *o)
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
static bset ancestors(const struct hg *g, int32_t v)
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

static int32_t sort_unique(bset *s, int32_t n)
{
    int32_t k = 0;

    qsort(s, (size_t)n, sizeof *s, bs_cmp);
    for (int32_t i = 0; i < n; i++)
        if (k == 0 || !bs_eq(&s[k - 1], &s[i]))
            s[k++] = s[i];
    return k;
}

/* {∅, V} and the ancestor closure of every node, sorted; out has room for n + 2. */
static int32_t approx_family(const struct hg *g, bset *out)
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
static int32_t all_lower_small(const struct hg *g, bset *out)
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
static void enum_lower(const struct hg *g, int32_t v, bset *cur, bset *out, int32_t cap,
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
static bool check_family(const struct hg *g, const struct dag *d, bool exact, const bset *want,
                         int32_t n_want, int gi)
{
    const char *fam = exact ? "exact" : "approx";
    struct lsets ls;
    bset *got = NULL;
    bool ok = false;
    remat_status st = lsets_build(d, exact, (int64_t)1 << 30, &ls);

    CHECK_OR(st == REMAT_OK, return false, "graph %d %s: %s", gi, fam, remat_errmsg());
    CHECK_OR(ls.n == n_want, goto out, "graph %d (%d nodes) %s: %d sets, expected %d", gi,
             g->n, fam, ls.n, n_want);
    CHECK_OR(ls.words == (g->n + 63) / 64, goto out, "graph %d: %d words", gi, ls.words);
    got = calloc((size_t)ls.n + 1, sizeof *got);
    REMAT_ASSERT_TEST(got);
    CHECK_OR(ls.bd_at[0] == 0, goto out, "graph %d: bd_at[0] = %d", gi, ls.bd_at[0]);
    for (int32_t i = 0; i < ls.n; i++) {
        const uint64_t *b = lsets_bits(&ls, i);
        struct sinfo si;
        bset bd = {{0}};

        for (int k = 0; k < ls.words; k++)
            got[i].w[k] = b[k];
        for (int32_t v = g->n; v < 64 * ls.words; v++)
            CHECK_OR(!bs_has(&got[i], v), goto out, "graph %d %s set %d: bit %d past n", gi,
                     fam, i, v);
        set_info(g, &got[i], &si);
        CHECK_OR(ls.size[i] == si.size, goto out, "graph %d %s set %d: size %d, expected %d",
                 gi, fam, i, ls.size[i], si.size);
        CHECK_OR(i == 0 || ls.size[i - 1] <= ls.size[i], goto out,
                 "graph %d %s: set %d (size %d) after size %d", gi, fam, i, ls.size[i],
                 ls.size[i - 1]);
        CHECK_OR(ls.m[i] == si.m, goto out, "graph %d %s set %d: M %zu, expected %zu", gi, fam,
                 i, ls.m[i], si.m);
        CHECK_OR(fabs(ls.t[i] - si.t) <= 1e-9 * (1 + si.t), goto out,
                 "graph %d %s set %d: T %.17g, expected %.17g", gi, fam, i, ls.t[i], si.t);
        CHECK_OR(ls.m_out[i] == si.m_out, goto out,
                 "graph %d %s set %d: m_out %zu, expected %zu", gi, fam, i, ls.m_out[i],
                 si.m_out);
        CHECK_OR(ls.bd_at[i + 1] >= ls.bd_at[i], goto out, "graph %d: bd_at", gi);
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

static void chain_alloc(struct chain *c, int32_t n)
{
    c->n_blocks = 0;
    c->block = calloc((size_t)n + 1, sizeof *c->block);
    c->kept = calloc((size_t)n + 1, sizeof *c->kept);
    REMAT_ASSERT_TEST(c->block && c->kept);
}

static void chain_free(struct chain *c)
{
    free(c->block);
    free(c->kept);
}

/*
 * kusumoto_plan at one budget, time- and memory-centric, against the best chains: the
 * verdict, the chain itself (measured by chain_eval), its bound and overhead as
 * reported, and its optimality.
 */
static void check_plan_at(const struct hg *g, const struct dag *d, const struct lsets *ls,
                          const struct best *want, size_t budget, const bset *fam,
                          int32_t n_fam, const char *what, int gi, struct dp_counts *k)
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
        remat_status st = kusumoto_plan(d, ls, mc, budget, &c, &res);

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
    CHECK_OK(kusumoto_min_budget(d, ls, &hi));
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

        check_plan_at(g, d, ls, &want, budgets[i], fam, n_fam, what, gi, k);
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
        if (lsets_build(&d, true, 1 << 20, &ls_e)) {
            CHECK(false, "graph %d: %s", gi, remat_errmsg());
            dag_fini(&d);
            continue;
        }
        if (lsets_build(&d, false, 0, &ls_a)) {
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

/*
 * Over sets (all the lower sets, sorted by size): with min_bound, the least max M(i)
 * over all chains (returned in *x); else, at the budget, the least overhead (*x) and the
 * least cached memory (*c) with the least overhead among those (*t_at_c). False when no
 * chain fits.
 */
static bool pareto_dp(const struct hg *g, const struct sinfo *sets, int32_t n, bool min_bound,
                      size_t budget, double *x, size_t *c, double *t_at_c)
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

#define NARROW_CAP 40000
#define NARROW_DP 400

/* Lower sets of 65..184-node graphs (several words), and the DP on those with at most
 * NARROW_DP lower sets against pareto_dp over them. */
static void test_multiword(void)
{
    static struct hg g;
    static bset all[NARROW_CAP], fam[HN + 2];
    static struct sinfo si[NARROW_DP];
    struct dp_counts k = {0, 0, 0};
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
            REMAT_ASSERT_TEST(pareto_dp(&g, si, n_sets, true, 0, &x, &c, &t_at_c));
            lo = (size_t)x;
            if (lsets_build(&d, !fi, 1 << 20, &ls)) {
                CHECK(false, "graph %d: %s", gi, remat_errmsg());
                continue;
            }
            CHECK_OK(kusumoto_min_budget(&d, &ls, &hi));
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

                want.feasible = pareto_dp(&g, si, n_sets, false, budgets[i], &want.min_t,
                                          &want.min_c, &want.t_at_min_c);
                check_plan_at(&g, &d, &ls, &want, budgets[i], fi ? fam : NULL, n_fam,
                              fi ? "approx" : "exact", gi, &k);
            }
            lsets_fini(&ls);
        }
        dag_fini(&d);
    }
    printf("  %d graphs of 65..184 nodes (%d of 2 words, %d of 3; %d skipped: over %d lower "
           "sets); %d DP families; %d plans (%d feasible, %d infeasible)\n", n_graphs,
           words[2], words[3], n_skip, NARROW_CAP, n_dp, k.n_plans, k.n_feasible,
           k.n_infeasible);
    CHECK(n_graphs >= 30 && n_dp >= 40 && k.n_infeasible > 10, "too few cases");
}

/* --------------------------------------------- remat_plan on real graphs */

#define PV 600
#define PO 96

struct pop {
    remat_op type;
    int n_in;
    int32_t in[3];
    int32_t out, aux; /* aux -1 when none */
    bool params;
};

/* A random forward graph built with the public API, and what the walk needs of it. */
struct pg {
    remat_graph *g;
    int32_t n_values, n_ops, loss;
    uint8_t kind[PV];      /* 0 resident (input, labels, parameter), 1 op output, 2 aux */
    int32_t base[PV];      /* the value whose buffer it uses */
    size_t bytes[PV];      /* numel * 4 rounded up to 64 */
    struct pop op[PO];
    bool dep[PV], reach[PV], needs[PV], has_bwd[PO];
};

struct pc {
    int32_t id;
    int64_t s[4];
};

static int32_t pg_add(struct pg *p, remat_op type, const int32_t *in, int n_in,
                      const remat_attrs *at, bool params)
{
    int32_t before = remat_graph_n_values(p->g), out, after;
    struct pop *op;

    REMAT_ASSERT_TEST(p->n_ops < PO && before + 8 < PV && n_in <= 3);
    out = remat_graph_add(p->g, type, in, n_in, at, NULL);
    if (out < 0)
        printf("  adding %s: %s\n", remat_op_name(type), remat_errmsg());
    REMAT_ASSERT_TEST(out >= 0);
    after = remat_graph_n_values(p->g);
    REMAT_ASSERT_TEST((after == out + 1 || after == out + 2) && (before < out) == params);
    for (int32_t v = before; v < out; v++) {
        p->kind[v] = 0;
        p->base[v] = v;
    }
    op = &p->op[p->n_ops++];
    op->type = type;
    op->n_in = n_in;
    memcpy(op->in, in, sizeof *in * (size_t)n_in);
    op->out = out;
    op->aux = after == out + 2 ? out + 1 : -1;
    op->params = params;
    p->kind[out] = 1;
    p->base[out] = type == REMAT_OP_FLATTEN ? p->base[in[0]] : out;
    if (op->aux >= 0) {
        p->kind[op->aux] = 2;
        p->base[op->aux] = op->aux;
    }
    p->n_values = after;
    return out;
}

static struct pc pg_cand(const struct pg *p, int32_t id)
{
    struct pc c = {id, {0, 0, 0, 0}};

    REMAT_ASSERT_TEST(remat_graph_value_shape(p->g, id, c.s) == 4);
    return c;
}

/* flatten (4-d), linear, softmax_ce; returns the loss. */
static int32_t pg_head(struct pg *p, int32_t x, int32_t labels)
{
    int32_t in[2];
    int64_t s[4];

    if (remat_graph_value_shape(p->g, x, s) == 4)
        x = pg_add(p, REMAT_OP_FLATTEN, &x, 1, NULL, false);
    x = pg_add(p, REMAT_OP_LINEAR, &x, 1,
               &(remat_attrs){.out_channels = 1 + (int64_t)urand(5), .bias = urand(2)}, true);
    in[0] = x, in[1] = labels;
    return pg_add(p, REMAT_OP_SOFTMAX_CE, in, 2, NULL, false);
}

static size_t round64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* relu, batch norm, dropout, pooling, convolutions, add and concat over one input, then
 * one or two classifier heads. */
static void pg_build(struct pg *p, int max_body)
{
    struct pc c[PO];
    int nc = 1, n_body = 1 + (int)urand((uint64_t)max_body);
    int64_t n = 1 + (int64_t)urand(3), shape[4];
    int32_t labels, loss, in[3];

    memset(p, 0, sizeof *p);
    REMAT_ASSERT_TEST(remat_graph_new(NULL, &p->g) == REMAT_OK);
    shape[0] = n, shape[1] = 1 + (int64_t)urand(4), shape[2] = 1 + (int64_t)urand(6),
    shape[3] = 1 + (int64_t)urand(6);
    in[0] = remat_graph_input(p->g, "x", 4, shape);
    labels = remat_graph_labels(p->g, "labels", n);
    REMAT_ASSERT_TEST(in[0] == 0 && labels == 1);
    p->base[0] = 0, p->base[1] = 1;
    p->n_values = 2;
    c[0] = pg_cand(p, 0);
    for (int i = 0; i < n_body; i++) {
        const struct pc *v = urand(4) ? &c[nc - 1 - (int)urand(nc < 3 ? (uint64_t)nc : 3)]
                                      : &c[urand((uint64_t)nc)];
        int32_t id = -1, same[PO];
        int ns = 0, k;

        switch (urand(10)) {
        case 0:
            id = pg_add(p, REMAT_OP_RELU, &v->id, 1, NULL, false);
            break;
        case 1:
            id = pg_add(p, REMAT_OP_BATCH_NORM, &v->id, 1, NULL, true);
            break;
        case 2:
            id = pg_add(p, REMAT_OP_DROPOUT, &v->id, 1, NULL, false);
            break;
        case 3:
            if (v->s[2] >= 2 && v->s[3] >= 2)
                id = pg_add(p, urand(2) ? REMAT_OP_MAX_POOL : REMAT_OP_AVG_POOL, &v->id, 1,
                            &(remat_attrs){.kh = 2, .kw = 2}, false);
            else
                id = pg_add(p, REMAT_OP_MAX_POOL, &v->id, 1, &(remat_attrs){.kh = 1, .kw = 1},
                            false);
            break;
        case 4:
        case 5: {
            int kk = urand(2) ? 3 : 1;

            id = pg_add(p, REMAT_OP_CONV2D, &v->id, 1,
                        &(remat_attrs){.out_channels = 1 + (int64_t)urand(6), .kh = kk,
                                       .kw = kk, .ph = kk / 2, .pw = kk / 2, .bias = urand(2)},
                        true);
            break;
        }
        case 6:
        case 7: /* add of 2-3 values of v's shape */
            for (int j = 0; j < nc; j++)
                if (!memcmp(c[j].s, v->s, sizeof v->s))
                    same[ns++] = c[j].id;
            k = 2 + (int)urand(2);
            for (int j = 0; j < k; j++)
                in[j] = j == 0 ? v->id : same[urand((uint64_t)ns)];
            id = pg_add(p, REMAT_OP_ADD, in, k, NULL, false);
            break;
        default: /* concat of 2-3 values with v's N, H, W */
            for (int j = 0; j < nc; j++)
                if (c[j].s[0] == v->s[0] && c[j].s[2] == v->s[2] && c[j].s[3] == v->s[3])
                    same[ns++] = c[j].id;
            k = 2 + (int)urand(2);
            for (int j = 0; j < k; j++)
                in[j] = same[urand((uint64_t)ns)];
            id = pg_add(p, REMAT_OP_CONCAT, in, k, NULL, false);
            break;
        }
        c[nc++] = pg_cand(p, id);
    }
    loss = pg_head(p, urand(2) ? c[nc - 1].id : c[urand((uint64_t)nc)].id, labels);
    if (urand(3) == 0) {
        in[0] = loss;
        in[1] = pg_head(p, c[urand((uint64_t)nc)].id, labels);
        loss = pg_add(p, REMAT_OP_SUM_LOSSES, in, 2, NULL, false);
    }
    REMAT_ASSERT_TEST(remat_graph_set_loss(p->g, loss) == REMAT_OK);
    p->loss = loss;
    for (int32_t v = 0; v < p->n_values; v++) {
        int64_t s[4], numel = 1;
        int nd = remat_graph_value_shape(p->g, v, s);

        REMAT_ASSERT_TEST(nd >= 1);
        for (int i = 0; i < nd; i++)
            numel *= s[i];
        p->bytes[v] = p->base[v] == v ? round64((size_t)numel * 4) : 0;
    }
    /* a value needs a gradient when it depends on a parameter and the loss on it; an op
     * has a backward when it reaches the loss and has parameters or such an input */
    for (int32_t o = 0; o < p->n_ops; o++) {
        const struct pop *op = &p->op[o];

        p->dep[op->out] = op->params;
        for (int i = 0; i < op->n_in; i++)
            p->dep[op->out] = p->dep[op->out] || p->dep[op->in[i]];
    }
    p->reach[p->loss] = true;
    for (int32_t o = p->n_ops; o-- > 0;)
        if (p->reach[p->op[o].out])
            for (int i = 0; i < p->op[o].n_in; i++)
                p->reach[p->op[o].in[i]] = true;
    for (int32_t v = 0; v < p->n_values; v++)
        p->needs[v] = p->kind[v] == 1 && p->dep[v] && p->reach[v] && v != p->loss;
    for (int32_t o = 0; o < p->n_ops; o++) {
        const struct pop *op = &p->op[o];
        bool any = op->params;

        for (int i = 0; i < op->n_in; i++)
            any = any || p->needs[op->in[i]];
        p->has_bwd[o] = op->type != REMAT_OP_FLATTEN && p->reach[op->out] && any;
    }
}

static size_t pg_buf_bytes(const struct pg *p, int32_t b)
{
    return p->bytes[b < p->n_values ? b : b - p->n_values];
}

/*
 * The live bytes of a schedule walked here: FWD allocates the op's output and saved aux
 * value (a view nothing), BWD the gradients of its inputs that need one and are not
 * live yet, FREE releases. False (why says) on a FWD of a live value, a FREE of a dead
 * buffer, another kind of step, or bytes left at the end.
 */
static bool pg_walk(const struct pg *p, const remat_schedule *s, size_t *peak, char *why,
                    size_t n_why)
{
    static bool live[2 * PV];
    const remat_step *st = remat_schedule_steps(s);
    size_t n = remat_schedule_n_steps(s), cur = 0;

    memset(live, 0, sizeof live);
    *peak = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = st[i].id;

        if (st[i].kind == REMAT_STEP_FREE) {
            if (id < 0 || id >= 2 * p->n_values || !live[id]) {
                snprintf(why, n_why, "step %zu: FREE of buffer %d, not live", i, id);
                return false;
            }
            live[id] = false;
            cur -= pg_buf_bytes(p, id);
            continue;
        }
        if ((st[i].kind != REMAT_STEP_FWD && st[i].kind != REMAT_STEP_BWD) || id < 0 ||
            id >= p->n_ops) {
            snprintf(why, n_why, "step %zu: kind %d id %d", i, (int)st[i].kind, id);
            return false;
        }
        if (st[i].kind == REMAT_STEP_FWD) {
            const struct pop *op = &p->op[id];
            int32_t make[2] = {op->out, op->aux};

            for (int j = 0; j < 2 && op->type != REMAT_OP_FLATTEN; j++) {
                if (make[j] < 0)
                    continue;
                if (live[make[j]]) {
                    snprintf(why, n_why, "step %zu: FWD of op %d, value %d live", i, id,
                             make[j]);
                    return false;
                }
                live[make[j]] = true;
                cur += pg_buf_bytes(p, make[j]);
            }
        } else {
            for (int j = 0; j < p->op[id].n_in; j++) {
                int32_t v = p->op[id].in[j], b = p->n_values + p->base[v];

                if (p->needs[v] && !live[b]) {
                    live[b] = true;
                    cur += pg_buf_bytes(p, b);
                }
            }
        }
        *peak = cur > *peak ? cur : *peak;
    }
    if (cur != 0) {
        snprintf(why, n_why, "%zu bytes live at the end", cur);
        return false;
    }
    return true;
}

struct plan_counts {
    int n_plans, n_refused, n_unsupported;
};

/*
 * remat_plan at a total budget (or the minimum); when it succeeds, the schedule against
 * the simulator and the walk. Returns the status; *info and *peak filled on success.
 */
static remat_status plan_check(const struct pg *p, const remat_tgraph *tg, remat_strategy sg,
                               size_t total, bool min, remat_plan_info *info, size_t *peak,
                               int gi, struct plan_counts *k)
{
    remat_plan_opts o = {.strategy = sg, .budget_bytes = total, .budget_min = min,
                         .max_lower_sets = 1500};
    const char *name = remat_strategy_name(sg);
    remat_schedule *s = NULL;
    remat_sim_result r;
    const remat_step *st;
    size_t n, wpeak;
    int bwd[PO], fwd[PO];
    char why[160] = "";
    remat_status rc = remat_plan(tg, &o, &s, info);

    if (rc)
        return rc;
    k->n_plans++;
    CHECK_OR(remat_sim_run(tg, s, &r) == REMAT_OK, goto out, "graph %d %s: simulator: %s", gi,
             name, remat_errmsg());
    *peak = r.activation_peak_bytes;
    CHECK(info->feasible, "graph %d %s: info.feasible false", gi, name);
    CHECK(r.activation_peak_bytes <= info->activation_budget_bytes,
          "graph %d %s: peak %zu above the budget %zu", gi, name, r.activation_peak_bytes,
          info->activation_budget_bytes);
    /* The DP's bound is the paper's formula, which leaves out gradients that later
     * blocks write into earlier ones; remat_plan judges plans by the simulator instead
     * (test_bound_cases), so no peak <= bound check here. */
    CHECK(pg_walk(p, s, &wpeak, why, sizeof why), "graph %d %s: walk: %s", gi, name, why);
    CHECK(wpeak == r.activation_peak_bytes, "graph %d %s: peak %zu, walk %zu", gi, name,
          r.activation_peak_bytes, wpeak);
    st = remat_schedule_steps(s);
    n = remat_schedule_n_steps(s);
    memset(bwd, 0, sizeof bwd);
    memset(fwd, 0, sizeof fwd);
    for (size_t i = 0; i < n; i++)
        if (st[i].kind != REMAT_STEP_FREE && st[i].id >= 0 && st[i].id < p->n_ops)
            (st[i].kind == REMAT_STEP_BWD ? bwd : fwd)[st[i].id]++;
    for (int32_t o2 = 0; o2 < p->n_ops; o2++) {
        CHECK(bwd[o2] == (p->has_bwd[o2] ? 1 : 0), "graph %d %s: op %d (%s) has %d BWD, "
              "expected %d", gi, name, o2, remat_op_name(p->op[o2].type), bwd[o2],
              (int)p->has_bwd[o2]);
        CHECK(fwd[o2] >= 1, "graph %d %s: op %d never runs forward", gi, name, o2);
    }
out:
    remat_schedule_free(s);
    return REMAT_OK;
}

/* A refusal: REMAT_ERR_INFEASIBLE whose message names the smallest budget. */
static void check_refused(const remat_tgraph *tg, remat_strategy sg, size_t total, int gi,
                          struct plan_counts *k)
{
    remat_plan_opts o = {.strategy = sg, .budget_bytes = total, .max_lower_sets = 1500};
    remat_schedule *s = NULL;
    remat_plan_info info;
    remat_status rc = remat_plan(tg, &o, &s, &info);

    k->n_refused++;
    CHECK(rc == REMAT_ERR_INFEASIBLE && !s && strstr(remat_errmsg(), "smallest"),
          "graph %d %s at %zu bytes: %s (%s)", gi, remat_strategy_name(sg), total,
          remat_status_name(rc), remat_errmsg());
    remat_schedule_free(s);
}

static void test_remat_plan(void)
{
    static const remat_strategy strat[] = {
        REMAT_STRATEGY_NONE, REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC,
        REMAT_STRATEGY_EXACT_TC, REMAT_STRATEGY_EXACT_MC,
    };
    static struct pg p;
    struct plan_counts k = {0, 0, 0};
    int n_graphs = 120;

    reseed(4);
    for (int gi = 0; gi < n_graphs; gi++) {
        remat_tgraph_opts to = {.cost = gi % 4 == 3 ? REMAT_COST_FLOPS : REMAT_COST_KUSUMOTO};
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        remat_sim_result r;
        size_t resident, none_peak, min_b[5] = {0}, peak;
        double ovh[5] = {0};
        bool have[5] = {false};

        pg_build(&p, 18);
        REMAT_ASSERT_TEST(remat_tgraph_from_graph(p.g, &to, &tg) == REMAT_OK);
        REMAT_ASSERT_TEST(remat_plan_none(tg, &s) == REMAT_OK);
        REMAT_ASSERT_TEST(remat_sim_run(tg, s, &r) == REMAT_OK);
        remat_schedule_free(s);
        resident = r.resident_bytes;
        none_peak = r.activation_peak_bytes;
        for (int si = 0; si < 5; si++) {
            remat_strategy sg = strat[si];
            const char *name = remat_strategy_name(sg);
            remat_plan_info info;
            remat_status rc = plan_check(&p, tg, sg, 0, true, &info, &peak, gi, &k);
            size_t b;

            if (rc == REMAT_ERR_UNSUPPORTED && (sg == REMAT_STRATEGY_EXACT_TC ||
                                                sg == REMAT_STRATEGY_EXACT_MC)) {
                k.n_unsupported++;
                continue;
            }
            CHECK_OR(rc == REMAT_OK, continue, "graph %d %s at the minimum: %s", gi, name,
                     remat_errmsg());
            b = info.activation_budget_bytes;
            have[si] = true;
            min_b[si] = b;
            CHECK(info.budget_bytes == b + resident, "graph %d %s: total %zu, B %zu + resident "
                  "%zu", gi, name, info.budget_bytes, b, resident);
            if (sg == REMAT_STRATEGY_NONE)
                CHECK(b == none_peak, "graph %d none: min budget %zu, peak %zu", gi, b,
                      none_peak);
            /* explicit totals at and above the minimum */
            {
                size_t half = none_peak > b ? (none_peak - b) / 2 : 0;
                size_t totals[4] = {resident + b, resident + b + half, resident + none_peak,
                                    resident + 2 * none_peak + 64};

                for (int i = 0; i < 4; i++) {
                    if (totals[i] < resident + b)
                        continue;
                    rc = plan_check(&p, tg, sg, totals[i], false, &info, &peak, gi, &k);
                    CHECK_OR(rc == REMAT_OK, continue, "graph %d %s at %zu (minimum %zu): %s",
                             gi, name, totals[i], resident + b, remat_errmsg());
                    CHECK(info.activation_budget_bytes == totals[i] - resident &&
                          info.budget_bytes == totals[i], "graph %d %s: budget %zu/%zu, asked "
                          "%zu", gi, name, info.activation_budget_bytes, info.budget_bytes,
                          totals[i]);
                    if (i == 0)
                        ovh[si] = info.overhead_bound;
                }
            }
            /* below the minimum: one byte of activations; the minimum less one byte when
             * the bisection is exact there (below 10^5 bytes) */
            check_refused(tg, sg, resident + 1, gi, &k);
            if (b >= 2 && (b <= 100000 || sg == REMAT_STRATEGY_NONE))
                check_refused(tg, sg, resident + b - 1, gi, &k);
        }
        /* the exact family contains the approximate one */
        for (int si = 1; si < 3; si++)
            if (have[si] && have[si + 2])
                CHECK(min_b[si + 2] <= min_b[si], "graph %d: %s min %zu above %s min %zu", gi,
                      remat_strategy_name(strat[si + 2]), min_b[si + 2],
                      remat_strategy_name(strat[si]), min_b[si]);
        /* at its minimum budget, time-centric recomputes no more than memory-centric */
        if (to.cost == REMAT_COST_KUSUMOTO)
            for (int si = 1; si < 5; si += 2)
                if (have[si] && have[si + 1] && min_b[si] == min_b[si + 1])
                    CHECK(ovh[si] <= ovh[si + 1] + 1e-12, "graph %d: %s overhead %g above %s "
                          "%g", gi, remat_strategy_name(strat[si]), ovh[si],
                          remat_strategy_name(strat[si + 1]), ovh[si + 1]);
        remat_tgraph_free(tg);
        remat_graph_free(p.g);
    }
    printf("  %d graphs: %d plans checked, %d refusals, %d exact plans over the lower-set cap\n",
           n_graphs, k.n_plans, k.n_refused, k.n_unsupported);
    CHECK(k.n_plans > 15 * n_graphs, "only %d plans", k.n_plans);
}

/*
 * Two graphs on which the DP's bound M(i) is below what the lowered schedule holds, so
 * the minimum budget must come from somewhere else than the bound alone.
 *
 * 1. x (1,1,6,5) -> conv 4 k1 = a (480 -> 512 B) -> flatten (a view of a) -> linear 5
 *    = fc (64 B) -> softmax_ce (loss 64 + probs 64). Nodes a 512, flat 0, fc 64, ce 128.
 *    By hand: the block holding a has 2 M(Vi) >= 1024, and {a}, V reaches it (1024 + 0;
 *    512 + 2 (0 + 64 + 128) = 896), so kusumoto_min_budget is 1024. But BWD linear
 *    reads a and g(fc) and writes g(flat), which is a's gradient buffer: 512 + 64 + 512 =
 *    1088 bytes at once in any schedule.
 * 2. No view: x (2,8) -> linear 48 = a (384 B) -> linear 32 = b (256) -> linear 3 = c
 *    -> ce1; a -> linear 3 = e -> ce2; sum_losses. The chain {a}, {b, c}, {e, ce1, ce2,
 *    sum} has bound 384 + 2 (256 + 64) + M(δ+) (128 + 64) = 1216 at its second block,
 *    but BWD e (third block) already wrote g(a), so BWD c holds a, g(a), b, g(c), g(b):
 *    384 + 384 + 256 + 64 + 256 = 1344.
 * remat_plan with budget_min must still return a schedule within the budget it reports.
 */
static void test_bound_cases(void)
{
    for (int gi = 0; gi < 2; gi++) {
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        remat_tgraph_opts to = {.cost = REMAT_COST_KUSUMOTO};
        int32_t x, lab, a, b, c, e, in[2], l1, l2;

        REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
        if (gi == 0) {
            x = remat_graph_input(g, "x", 4, (int64_t[]){1, 1, 6, 5});
            lab = remat_graph_labels(g, "labels", 1);
            a = remat_graph_add(g, REMAT_OP_CONV2D, &x, 1,
                                &(remat_attrs){.out_channels = 4, .kh = 1, .kw = 1}, "a");
            b = remat_graph_add(g, REMAT_OP_FLATTEN, &a, 1, NULL, "flat");
            c = remat_graph_add(g, REMAT_OP_LINEAR, &b, 1, &(remat_attrs){.out_channels = 5},
                                "fc");
            in[0] = c, in[1] = lab;
            l1 = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce");
        } else {
            x = remat_graph_input(g, "x", 2, (int64_t[]){2, 8});
            lab = remat_graph_labels(g, "labels", 2);
            a = remat_graph_add(g, REMAT_OP_LINEAR, &x, 1, &(remat_attrs){.out_channels = 48},
                                "a");
            b = remat_graph_add(g, REMAT_OP_LINEAR, &a, 1, &(remat_attrs){.out_channels = 32},
                                "b");
            c = remat_graph_add(g, REMAT_OP_LINEAR, &b, 1, &(remat_attrs){.out_channels = 3},
                                "c");
            in[0] = c, in[1] = lab;
            l1 = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce1");
            e = remat_graph_add(g, REMAT_OP_LINEAR, &a, 1, &(remat_attrs){.out_channels = 3},
                                "e");
            in[0] = e, in[1] = lab;
            l2 = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce2");
            in[0] = l1, in[1] = l2;
            l1 = remat_graph_add(g, REMAT_OP_SUM_LOSSES, in, 2, NULL, "loss");
        }
        REMAT_ASSERT_TEST(l1 >= 0 && remat_graph_set_loss(g, l1) == REMAT_OK);
        REMAT_ASSERT_TEST(remat_tgraph_from_graph(g, &to, &tg) == REMAT_OK);
        if (gi == 0) {
            struct dag d;
            struct lsets ls;
            size_t mb = 0;

            REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
            REMAT_ASSERT_TEST(lsets_build(&d, true, 100, &ls) == REMAT_OK);
            CHECK_OK(kusumoto_min_budget(&d, &ls, &mb));
            CHECK_I64(mb, 1024);
            lsets_fini(&ls);
            dag_fini(&d);
        }
        for (int sg = REMAT_STRATEGY_APPROX_TC; sg <= REMAT_STRATEGY_EXACT_MC; sg++) {
            remat_plan_opts o = {.strategy = (remat_strategy)sg, .budget_min = true};
            remat_schedule *s = NULL;
            remat_plan_info info;
            remat_sim_result r;
            remat_status rc = remat_plan(tg, &o, &s, &info);

            CHECK(rc == REMAT_OK, "graph %d %s at its minimum budget: %s", gi + 1,
                  remat_strategy_name((remat_strategy)sg), remat_errmsg());
            if (!rc && remat_sim_run(tg, s, &r) == REMAT_OK) {
                CHECK(r.activation_peak_bytes <= info.activation_budget_bytes, "graph %d: "
                      "peak %zu above %zu", gi + 1, r.activation_peak_bytes,
                      info.activation_budget_bytes);
                if (gi == 0)
                    CHECK(info.activation_budget_bytes >= 1088, "graph 1: budget %zu below "
                          "the 1088 bytes of BWD linear", info.activation_budget_bytes);
            }
            remat_schedule_free(s);
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/* ---------------------------------------------------------------- the zoo */

static void zoo_model(const char *model, const remat_zoo_opts *zo)
{
    static const remat_strategy strat[] = {REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *none = NULL;
    remat_sim_result rn;
    int32_t n_ops;
    int *bwd_none;

    CHECK_OR(remat_zoo_build(model, zo, NULL, &g) == REMAT_OK, return, "%s: %s", model,
             remat_errmsg());
    REMAT_ASSERT_TEST(remat_tgraph_from_graph(g, NULL, &tg) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_NONE}, &none,
                                 NULL) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_sim_run(tg, none, &rn) == REMAT_OK);
    n_ops = remat_tgraph_n_ops(tg);
    bwd_none = calloc((size_t)n_ops, sizeof *bwd_none);
    REMAT_ASSERT_TEST(bwd_none);
    for (size_t i = 0; i < remat_schedule_n_steps(none); i++)
        if (remat_schedule_steps(none)[i].kind == REMAT_STEP_BWD)
            bwd_none[remat_schedule_steps(none)[i].id]++;
    for (int si = 0; si < 2; si++) {
        remat_plan_opts o = {.strategy = strat[si], .budget_min = true};
        remat_plan_info info;
        remat_schedule *s = NULL;
        remat_sim_result r;
        int *bwd = calloc((size_t)n_ops, sizeof *bwd);

        REMAT_ASSERT_TEST(bwd);
        CHECK_OK(remat_plan(tg, &o, &s, &info));
        if (s && remat_sim_run(tg, s, &r) == REMAT_OK) {
            printf("  %s %s: peak %zu (none %zu), min B %zu, %d blocks, overhead %.3f\n",
                   model, remat_strategy_name(strat[si]), r.activation_peak_bytes,
                   rn.activation_peak_bytes, info.activation_budget_bytes, info.n_blocks,
                   r.overhead);
            CHECK(r.activation_peak_bytes < rn.activation_peak_bytes, "%s %s: peak %zu, none "
                  "%zu", model, remat_strategy_name(strat[si]), r.activation_peak_bytes,
                  rn.activation_peak_bytes);
            CHECK(r.activation_peak_bytes <= info.activation_budget_bytes, "%s: peak %zu above "
                  "%zu", model, r.activation_peak_bytes, info.activation_budget_bytes);
            for (size_t i = 0; i < remat_schedule_n_steps(s); i++)
                if (remat_schedule_steps(s)[i].kind == REMAT_STEP_BWD)
                    bwd[remat_schedule_steps(s)[i].id]++;
            for (int32_t o2 = 0; o2 < n_ops; o2++)
                CHECK_OR(bwd[o2] == bwd_none[o2], break, "%s %s: op %d has %d BWD, none %d",
                         model, remat_strategy_name(strat[si]), o2, bwd[o2], bwd_none[o2]);
        } else {
            CHECK(false, "%s %s: no valid schedule: %s", model, remat_strategy_name(strat[si]),
                  remat_errmsg());
        }
        free(bwd);
        remat_schedule_free(s);
    }
    free(bwd_none);
    remat_schedule_free(none);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void test_zoo(void)
{
    zoo_model("resnet18", &(remat_zoo_opts){.batch = 2});
    zoo_model("googlenet", &(remat_zoo_opts){.batch = 2, .aux = 1});
}

/* The authors' approximate minimum budgets (their solver; ../shared/graphs/README.md). */
static void test_authors(void)
{
    static const struct {
        const char *file;
        double bytes;
    } want[] = {{"cg_resnet50.txt", 1310300253.0}, {"cg_vgg19.txt", 2107110823.0}};
    const char *dir = harness_graphs_dir();

    if (!dir) {
        SKIP("no ../shared/graphs/kusumoto");
        return;
    }
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[600];
        remat_tgraph *tg = NULL;
        struct dag d;
        struct lsets ls;
        size_t b = 0;

        snprintf(path, sizeof path, "%s/%s", dir, want[i].file);
        CHECK_OR(remat_tgraph_read_dump(path, NULL, NULL, &tg) == REMAT_OK, continue, "%s: %s",
                 path, remat_errmsg());
        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        REMAT_ASSERT_TEST(lsets_build(&d, false, 0, &ls) == REMAT_OK);
        CHECK_OK(kusumoto_min_budget(&d, &ls, &b));
        printf("  %s: approx min budget %zu, the authors' %.0f (%+.3f%%)\n", want[i].file, b,
               want[i].bytes, 100 * ((double)b / want[i].bytes - 1));
        CHECK(fabs((double)b / want[i].bytes - 1) <= 0.01, "%s: %zu, the authors' %.0f",
              want[i].file, b, want[i].bytes);
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
    }
}

static double seconds(void)
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

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    RUN_TIMED(test_lowersets);
    RUN_TIMED(test_dp_brute);
    RUN_TIMED(test_multiword);
    RUN_TIMED(test_remat_plan);
    RUN_TIMED(test_bound_cases);
    RUN_TIMED(test_zoo);
    RUN_TIMED(test_authors);
    return harness_end();
}
