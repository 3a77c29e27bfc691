/*
 * test_lowerset.c - the families of lower sets of the planners' graph (plan/lowerset.c),
 * against the definitions (DESIGN.md section 4), by brute force: every subset of random
 * DAGs of up to 12 nodes, kept when no edge enters it from outside, against lsets_build
 * (the family, the order by M and size, M, T, the boundary, M(δ+(L)) + M(δ−(δ+(L)) \ L)) and
 * its cap; the approximate family against {∅, V} and the ancestor closures found by a
 * fixpoint, and on graphs of up to 192 nodes against closures found depth-first, in
 * the same order, with every quantity. (test_dp.c checks both families on narrow
 * multi-word graphs as well.)
 *
 * Seed: REMAT_SEED (printed); the test restarts from it, so it can be rerun.
 */
#include "plan_util.h"

/* The exact family's cap: at the count it fits, one below it is refused. */
static void check_cap(const struct dag *d, int32_t count, int gi)
{
    struct lsets ls;
    remat_status st = lsets_build(d, LS_EXACT, NULL, count, &ls);

    CHECK(st == REMAT_OK, "graph %d: cap %d = the count refused: %s", gi, count,
          remat_errmsg());
    if (!st)
        lsets_fini(&ls);
    st = lsets_build(d, LS_EXACT, NULL, count - 1, &ls);
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

/* The authors' depth-first numbering (LS_EXACT_DFS), worked by hand on three nodes
 * with no edges, in node order and in reverse key order; on random DAGs, its sets are
 * lower sets of the full family, ∅ first, V last, no set twice, and the DP's minimum
 * budget over it is never below the full family's. */
static void test_dfs(void)
{
    static const uint64_t fwd[] = {0, 1, 2, 4, 5, 6, 7}, rev[] = {0, 4, 2, 1, 5, 3, 7};
    static const int32_t key_rev[] = {2, 1, 0};
    static struct hg g;
    static bset all[1 << 12];
    struct dag d;
    struct lsets ls;

    hg_reset(&g, 3);
    hg_weights(&g, true);
    to_dag(&g, &d);
    for (int k = 0; k < 2; k++) {
        const uint64_t *want = k ? rev : fwd;

        REMAT_ASSERT_TEST(lsets_build(&d, LS_EXACT_DFS, k ? key_rev : NULL, 100, &ls) ==
                          REMAT_OK);
        CHECK(ls.n == 7, "3 free nodes, key %d: %d sets, want 7", k, ls.n);
        for (int32_t i = 0; i < ls.n && i < 7; i++)
            CHECK(ls_set(&ls, i).w[0] == want[i], "key %d: set %d is %#llx, want %#llx", k, i,
                  (unsigned long long)ls_set(&ls, i).w[0], (unsigned long long)want[i]);
        lsets_fini(&ls);
    }
    dag_fini(&d);

    reseed(7);
    for (int gi = 0; gi < 300; gi++) {
        struct lsets full;
        int32_t n_all;
        size_t b_dfs = 0, b_full = 0;

        random_small(&g, 12, true);
        to_dag(&g, &d);
        n_all = all_lower_small(&g, all);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_EXACT_DFS, NULL, 1 << 20, &ls) == REMAT_OK);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_EXACT, NULL, 1 << 20, &full) == REMAT_OK);
        CHECK(ls.n >= 2 && ls.n <= n_all, "graph %d: %d sets of %d", gi, ls.n, n_all);
        CHECK(ls.size[0] == 0 && ls.size[ls.n - 1] == g.n, "graph %d: not from ∅ to V", gi);
        for (int32_t i = 0; i < ls.n; i++) {
            bset s = ls_set(&ls, i);

            CHECK_OR(bs_in(&s, all, n_all), break, "graph %d: set %d is not lower", gi, i);
            for (int32_t j = 0; j < i; j++)
                CHECK_OR(memcmp(s.w, ls_set(&ls, j).w, sizeof s.w), break,
                         "graph %d: sets %d and %d equal", gi, j, i);
        }
        CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &b_dfs));
        CHECK_OK(kusumoto_min_budget(&d, &full, NULL, &b_full));
        CHECK(b_dfs >= b_full, "graph %d: depth-first family's minimum %zu below the full "
              "family's %zu", gi, b_dfs, b_full);
        lsets_fini(&full);
        lsets_fini(&ls);
        dag_fini(&d);
    }
}

/* Two measurements of one family equal, field by field (the lists in node order). */
static bool same_family(const struct lsets *a, const struct lsets *b, int gi)
{
    bool ok = a->n == b->n && a->words == b->words;

    for (int32_t i = 0; ok && i < a->n; i++) {
        ok = !memcmp(ls_set(a, i).w, ls_set(b, i).w, sizeof(bset)) &&
             a->size[i] == b->size[i] && a->m[i] == b->m[i] && a->t[i] == b->t[i] &&
             a->m_out[i] == b->m_out[i] && a->bd_at[i + 1] == b->bd_at[i + 1] &&
             a->mx_at[i + 1] == b->mx_at[i + 1];
        for (int32_t k = a->bd_at[i]; ok && k < a->bd_at[i + 1]; k++)
            ok = a->bd[k] == b->bd[k];
        for (int32_t k = a->mx_at[i]; ok && k < a->mx_at[i + 1]; k++)
            ok = a->mx[k] == b->mx[k];
        CHECK(ok, "graph %d: set %d: measured from its base, it differs from the full walk",
              gi, i);
    }
    CHECK(a->n == b->n, "graph %d: %d sets against %d", gi, a->n, b->n);
    return ok;
}

/*
 * The approximate family measured incrementally (each closure from its largest
 * predecessor's: LS_APPROX) against every set walked in full (LS_APPROX_WALK, the
 * former measurement, itself checked against the definitions above): the same sets,
 * numbers and lists, on narrow multi-word graphs (one to three paths, as networks) and
 * dense random ones of up to 192 nodes, integral T (the incremental sums) and
 * fractional (where LS_APPROX walks in full, so that T keeps its last bits).
 */
static void test_incremental(void)
{
    static struct hg g;
    int n_graphs = 400;
    int64_t n_sets = 0;

    reseed(3);
    for (int gi = 0; gi < n_graphs; gi++) {
        struct dag d;
        struct lsets a, b;

        if (gi % 2)
            random_narrow(&g);
        else
            random_small(&g, HN, gi % 4 != 2);
        to_dag(&g, &d);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &a) == REMAT_OK);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX_WALK, NULL, 0, &b) == REMAT_OK);
        same_family(&a, &b, gi);
        n_sets += a.n;
        lsets_fini(&a);
        lsets_fini(&b);
        dag_fini(&d);
    }
    printf("  %d graphs of up to %d nodes, %lld sets\n", n_graphs, HN, (long long)n_sets);
}

/* One set of the reference approximate family: its nodes, creation index (∅ 0, node
 * v's closure v + 1, V n + 1) and sort keys. */
struct ref_set {
    bset s;
    int32_t idx, size;
    size_t m;
};

static int ref_cmp(const void *x, const void *y)
{
    const struct ref_set *a = x, *b = y;

    if (a->m != b->m)
        return a->m < b->m ? -1 : 1;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Node v's ancestor closure by a depth-first search over its predecessors. */
static bset closure_dfs(const struct hg *g, int32_t v)
{
    bset s = {{0}};
    int32_t stack[HN], top = 0;

    bs_add(&s, v);
    stack[top++] = v;
    while (top > 0) {
        int32_t x = stack[--top];

        for (int32_t u = 0; u < x; u++)
            if (bs_has(&g->pm[x], u) && !bs_has(&s, u)) {
                bs_add(&s, u);
                stack[top++] = u;
            }
    }
    return s;
}

/* The approximate family worked out plainly: ∅, every closure, V unless a closure is V,
 * sorted by M, size and creation index (the order lsets_build documents). */
static int32_t ref_family(const struct hg *g, struct ref_set *out, bool *v_dup)
{
    bset all = {{0}};
    int32_t k = 0;

    *v_dup = false;
    for (int32_t v = 0; v < g->n; v++)
        bs_add(&all, v);
    out[k++] = (struct ref_set){{{0}}, 0, 0, 0};
    for (int32_t v = 0; v < g->n; v++) {
        out[k] = (struct ref_set){closure_dfs(g, v), v + 1, 0, 0};
        *v_dup = *v_dup || bs_eq(&out[k].s, &all);
        k++;
    }
    if (!*v_dup)
        out[k++] = (struct ref_set){all, g->n + 1, 0, 0};
    for (int32_t i = 0; i < k; i++) {
        out[i].size = bs_count(&out[i].s);
        for (int32_t v = 0; v < g->n; v++)
            out[i].m += bs_has(&out[i].s, v) ? g->m[v] : 0;
    }
    qsort(out, (size_t)k, sizeof *out, ref_cmp);
    return k;
}

/* Set i of ls against ref: bits, size, M, T, m_out (set_info), and the boundary and
 * maximal lists in node order. T exactly: integral costs sum exactly in any order, and
 * fractional ones are summed over the set in node order, as set_info does. */
static bool same_as_ref(const struct hg *g, const struct lsets *ls, int32_t i,
                        const struct ref_set *r)
{
    bset b = ls_set(ls, i);
    struct sinfo si;
    int32_t nb = ls->bd_at[i], nx = ls->mx_at[i];
    bool ok = ls->size[i] == r->size && ls->m[i] == r->m;

    for (int k = 0; k < HW; k++)
        ok = ok && b.w[k] == r->s.w[k];
    if (!ok)
        return false;
    set_info(g, &r->s, &si);
    if (ls->t[i] != si.t || ls->m_out[i] != si.m_out)
        return false;
    for (int32_t v = 0; v < g->n; v++) {
        bset in_l;

        if (!bs_has(&r->s, v))
            continue;
        if (bs_has(&si.bd, v) && (nb >= ls->bd_at[i + 1] || ls->bd[nb++] != v))
            return false;
        for (int k = 0; k < HW; k++)
            in_l.w[k] = g->sm[v].w[k] & r->s.w[k];
        if (bs_count(&in_l) == 0 && (nx >= ls->mx_at[i + 1] || ls->mx[nx++] != v))
            return false;
    }
    return nb == ls->bd_at[i + 1] && nx == ls->mx_at[i + 1];
}

/*
 * The approximate family (built in place, without a hash table) against ref_family on
 * random DAGs of up to 192 nodes (one to three bitset words; narrow and dense, integral
 * and fractional T), both families LS_APPROX and LS_APPROX_WALK: the same sets in the
 * same order, with every quantity from the definitions. Both cases of V are met: a
 * closure that is V (V then left out) and none.
 */
static void test_approx_reference(void)
{
    static struct hg g;
    static struct ref_set ref[HN + 2];
    int n_graphs = 300, n_dup = 0;

    reseed(5);
    for (int gi = 0; gi < n_graphs; gi++) {
        struct dag d;
        bool v_dup;
        int32_t n_ref;

        if (gi % 2)
            random_narrow(&g);
        else
            random_small(&g, HN, gi % 4 != 2);
        to_dag(&g, &d);
        n_ref = ref_family(&g, ref, &v_dup);
        n_dup += v_dup;
        for (int f = 0; f < 2; f++) {
            enum lsets_family fam = f ? LS_APPROX_WALK : LS_APPROX;
            struct lsets ls;

            REMAT_ASSERT_TEST(lsets_build(&d, fam, NULL, 0, &ls) == REMAT_OK);
            CHECK(ls.n == n_ref && ls.by_m && ls.words == (g.n + 63) / 64 && ls.bd_at[0] == 0 &&
                  ls.mx_at[0] == 0, "graph %d (%d nodes) family %d: %d sets, expected %d", gi,
                  g.n, f, ls.n, n_ref);
            for (int32_t i = 0; ls.n == n_ref && i < ls.n; i++)
                CHECK_OR(same_as_ref(&g, &ls, i, &ref[i]), break,
                         "graph %d (%d nodes) family %d: set %d (M %zu, size %d) differs from "
                         "the reference (M %zu, size %d)", gi, g.n, f, i, ls.m[i], ls.size[i],
                         ref[i].m, ref[i].size);
            lsets_fini(&ls);
        }
        dag_fini(&d);
    }
    CHECK(n_dup > 0 && n_dup < n_graphs, "V a closure in %d of %d graphs: a case unmet", n_dup,
          n_graphs);
    printf("  %d graphs of up to %d nodes, V a closure in %d\n", n_graphs, HN, n_dup);
}

/*
 * The compact rows (struct lrow) of a hand-built 192-node graph: a chain 0 -> ... -> 139,
 * nodes 140..189 without edges, 190 after 139 and 170, 191 after 5. Each set is the
 * closure of its highest node (or ∅, or V), checked bit by bit against closures found by
 * a walk over the predecessors, and the rows' shapes against the hand-worked ones:
 * closure(139) is two full words and one stored, {170} a zero word then one stored,
 * closure(191) three stored words with a zero one inside, ∅ none, V three full words.
 * Stored in all: 138 words for the chain (none where a closure ends a word: 63, 127),
 * 50 for the lone nodes, 1 for 190, 3 for 191: 192 words, where dense rows take 582.
 */
static void test_compact_rows(void)
{
    static struct hg g;
    static bset want[HN];
    struct dag d;
    struct lsets ls;
    struct { int32_t top, full, lead, len; } shape[] = {
        {139, 2, 2, 1}, {63, 1, 3, 0}, {170, 0, 2, 1}, {190, 2, 2, 1}, {191, 0, 0, 3},
    };
    int checked = 0;

    hg_reset(&g, HN);
    for (int32_t v = 1; v < 140; v++)
        hg_edge(&g, v - 1, v);
    hg_edge(&g, 139, 190);
    hg_edge(&g, 170, 190);
    hg_edge(&g, 5, 191);
    for (int32_t v = 0; v < HN; v++) {
        g.m[v] = 1;
        g.t[v] = 1;
    }
    g.int_t = true;
    for (int32_t v = 0; v < HN; v++) { /* closures: v and its predecessors' closures */
        bs_add(&want[v], v);
        for (int32_t u = 0; u < v; u++)
            if (bs_has(&g.pm[v], u))
                for (int k = 0; k < HW; k++)
                    want[v].w[k] |= want[u].w[k];
    }
    to_dag(&g, &d);
    REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
    CHECK(ls.n == HN + 2 && ls.words == 3, "%d sets of %d words, want %d of 3", ls.n, ls.words,
          HN + 2);
    CHECK(ls.bits_n == 192, "%zu words stored, want 192 (hand-worked)", ls.bits_n);
    for (int32_t i = 0; i < ls.n; i++) {
        bset got = ls_set(&ls, i), ref = {{0}};
        int32_t top = -1;

        for (int32_t v = 0; v < HN; v++)
            top = bs_has(&got, v) ? v : top;
        if (ls.size[i] == HN)
            for (int32_t v = 0; v < HN; v++)
                bs_add(&ref, v);
        else if (top >= 0)
            ref = want[top];
        CHECK_OR(!memcmp(&got, &ref, sizeof got), break,
                 "set %d (size %d, top node %d) is not the closure", i, ls.size[i], top);
        for (int32_t v = 0; v < HN; v++)
            CHECK_OR(lsets_has(&ls, i, v) == bs_has(&ref, v), goto out,
                     "set %d: lsets_has(%d) wrong", i, v);
        for (int k = 0; k < HW; k++)
            CHECK_OR(lsets_word(&ls, i, k) == ref.w[k], goto out, "set %d: word %d wrong", i,
                     k);
        if (top < 0 || ls.size[i] == HN) {
            int32_t full = top < 0 ? 0 : 3;

            CHECK(ls.row[i].full == full && ls.row[i].len == 0 && lsets_end(&ls, i) == full,
                  "%s: full %d, %d stored, want %d and 0", top < 0 ? "∅" : "V",
                  ls.row[i].full, ls.row[i].len, full);
            checked++;
        }
        for (size_t k = 0; k < sizeof shape / sizeof *shape; k++)
            if (shape[k].top == top && ls.size[i] != HN) {
                CHECK(ls.row[i].full == shape[k].full && ls.row[i].lead == shape[k].lead &&
                      ls.row[i].len == shape[k].len, "closure(%d): full %d lead %d len %d, "
                      "want %d %d %d", top, ls.row[i].full, ls.row[i].lead, ls.row[i].len,
                      shape[k].full, shape[k].lead, shape[k].len);
                checked++;
            }
    }
    CHECK(checked == 7, "%d of the 7 hand-worked rows met", checked);
out:
    lsets_fini(&ls);
    dag_fini(&d);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    RUN_TIMED(test_lowersets);
    RUN_TIMED(test_dfs);
    RUN_TIMED(test_incremental);
    RUN_TIMED(test_approx_reference);
    RUN_TIMED(test_compact_rows);
    return harness_end();
}
