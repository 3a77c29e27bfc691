/*
 * test_dp_sim.c - the DP's memory model of a block (plan/dp_sim.c) against the
 * simulator, by brute force over chains:
 *  - random small training graphs (linear, relu, gelu, add with fan-out, a loss over
 *    every dangling value), random chains of lower sets from the exact family; each
 *    chain's peak by the model (max over blocks of m + c, m growing by dm) against the
 *    simulated peak of the chain lowered by chain_lower: never below it, and equal on
 *    at least 4 in 5 (1,008 of 1,200 at seed 0); its recomputed cost equal to the
 *    simulator's overhead;
 *  - kusumoto_min_budget with the model: the memory-centric plan at that budget is
 *    simulated within it, and no sampled chain's model peak is below it;
 *  - the family hybrid's sweep thins on large graphs (lsets_thin) against its
 *    definition, kusumoto_pairs against a count (test_thin).
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it.
 */
#include "plan_util.h"
#include "plan/dp_sim.h"
#include "sim_util.h"

#include <math.h>
#include <stdlib.h>

/* A random graph of n_ops hidden ops on (2, w) activations, a loss over its leaves. */
static remat_tgraph *random_tgraph(int n_ops)
{
    static const int64_t widths[] = {8, 16, 24};
    remat_graph *g = new_graph();
    int32_t v[64], used[64], lab, x, loss = -1;
    int64_t w[64];
    int n = 0;

    x = remat_graph_input(g, "x", 2, (int64_t[]){2, 8});
    lab = remat_graph_labels(g, "labels", 2);
    w[0] = widths[urand(3)];
    v[n] = remat_graph_add(g, REMAT_OP_LINEAR, &x, 1, &(remat_attrs){.out_channels = w[0]}, NULL);
    used[n++] = 0;
    for (int k = 1; k < n_ops; k++) {
        int a = (int)urand((uint64_t)n), b = (int)urand((uint64_t)n), r = (int)urand(4);
        int32_t in[2] = {v[a], v[b]};

        if (r == 3 && (a == b || w[a] != w[b]))
            r = 0;
        w[n] = r == 0 ? widths[urand(3)] : w[a];
        if (r == 0)
            v[n] = remat_graph_add(g, REMAT_OP_LINEAR, in, 1,
                                   &(remat_attrs){.out_channels = w[n]}, NULL);
        else
            v[n] = remat_graph_add(g, r == 1 ? REMAT_OP_RELU : r == 2 ? REMAT_OP_GELU
                                                                       : REMAT_OP_ADD,
                                   in, r == 3 ? 2 : 1, NULL, NULL);
        used[a] = 1;
        used[b] = used[b] || r == 3;
        used[n++] = 0;
    }
    for (int k = 0; k < n; k++) {
        int32_t h, in[2];

        if (used[k])
            continue;
        h = remat_graph_add(g, REMAT_OP_LINEAR, &v[k], 1, &(remat_attrs){.out_channels = 4},
                            NULL);
        in[0] = h, in[1] = lab;
        h = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, NULL);
        if (loss >= 0) {
            in[0] = loss, in[1] = h;
            h = remat_graph_add(g, REMAT_OP_SUM_LOSSES, in, 2, NULL, NULL);
        }
        loss = h;
    }
    REMAT_ASSERT_TEST(loss >= 0 && remat_graph_set_loss(g, loss) == REMAT_OK);
    {
        remat_tgraph *tg = to_tgraph(g, REMAT_COST_FLOPS);

        remat_graph_free(g);
        return tg;
    }
}

/* A random chain ∅ ⊊ … ⊊ V through ls (set indices in sets[], count returned). */
static int32_t random_chain(const struct lsets *ls, int32_t *sets, int32_t *cand)
{
    int32_t cur = 0, k = 0;

    while (cur != ls->n - 1) {
        int32_t nc = 0;

        for (int32_t j = cur + 1; j < ls->n; j++)
            if (ls->size[j] > ls->size[cur] && lsets_subset(ls, cur, j))
                cand[nc++] = j;
        REMAT_ASSERT_TEST(nc > 0);
        /* V itself less often, so that chains have several blocks */
        cur = cand[urand((uint64_t)nc)];
        if (cur == ls->n - 1 && nc > 1 && urand(2))
            cur = cand[urand((uint64_t)nc)];
        sets[k++] = cur;
    }
    return k;
}

/* The chain's blocks and kept nodes (as kusumoto_plan marks them) and its model peak
 * and recomputed cost. */
static size_t chain_model(struct dp_sim *sm, const struct dag *d, const struct lsets *ls,
                          const int32_t *sets, int32_t nb, struct chain *c, double *t)
{
    size_t m = 0, peak = 0;
    int32_t prev = 0;

    *t = 0;
    c->n_blocks = nb;
    for (int32_t b = 0; b < nb; b++) {
        int32_t j = sets[b];
        size_t dm, cb;
        double tb;

        dp_sim_pair(sm, prev, j, &tb, &dm, &cb);
        peak = m + cb > peak ? m + cb : peak;
        m += dm;
        *t += tb;
        for (int32_t v = 0; v < d->n; v++)
            if (lsets_has(ls, j, v) && !lsets_has(ls, prev, v)) {
                c->block[v] = b + 1;
                c->kept[v] = false;
                for (int32_t e = d->succ_at[v]; e < d->succ_at[v + 1]; e++)
                    c->kept[v] = c->kept[v] || !lsets_has(ls, j, d->succ[e]);
            }
        prev = j;
    }
    return peak;
}

static void test_model_vs_sim(void)
{
    int n_chains = 0, n_equal = 0, n_graphs = 0;

    reseed(1);
    for (int gi = 0; gi < 60; gi++) {
        remat_tgraph *tg = random_tgraph(3 + (int)urand(7));
        struct dag d;
        struct lsets ls;
        struct dp_sim *sm = NULL;
        struct chain c;
        int32_t *sets, *cand;
        double total = 0;

        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        if (lsets_build(&d, LS_EXACT, NULL, 4000, &ls)) {
            dag_fini(&d);
            remat_tgraph_free(tg);
            continue;
        }
        n_graphs++;
        REMAT_ASSERT_TEST(dp_sim_new(tg, &d, &ls, &sm) == REMAT_OK);
        sets = calloc((size_t)ls.n + 1, sizeof *sets);
        cand = calloc((size_t)ls.n + 1, sizeof *cand);
        c.block = calloc((size_t)d.n + 1, sizeof *c.block);
        c.kept = calloc((size_t)d.n + 1, sizeof *c.kept);
        REMAT_ASSERT_TEST(sets && cand && c.block && c.kept);
        for (int32_t v = 0; v < d.n; v++)
            total += d.t[v];
        for (int ci = 0; ci < 20; ci++) {
            int32_t nb = random_chain(&ls, sets, cand);
            double t;
            size_t model = chain_model(sm, &d, &ls, sets, nb, &c, &t);
            remat_schedule *s = NULL;
            remat_sim_result r;

            CHECK_OR(chain_lower(tg, &d, &c, &s) == REMAT_OK &&
                     remat_sim_run(tg, s, &r) == REMAT_OK, { remat_schedule_free(s); continue; },
                     "graph %d chain %d: %s", gi, ci, remat_errmsg());
            n_chains++;
            n_equal += model == r.activation_peak_bytes;
            CHECK(model >= r.activation_peak_bytes, "graph %d chain %d (%d blocks): model "
                  "%zu below the simulated %zu", gi, ci, nb, model, r.activation_peak_bytes);
            CHECK(fabs(t / total - r.overhead) <= 1e-9, "graph %d chain %d: recomputed "
                  "%.6f, simulated %.6f", gi, ci, t / total, r.overhead);
            remat_schedule_free(s);
        }
        free(sets);
        free(cand);
        free(c.block);
        free(c.kept);
        dp_sim_free(sm);
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
    }
    printf("  %d graphs, %d chains: the model equals the simulated peak on %d\n", n_graphs,
           n_chains, n_equal);
    CHECK(n_chains >= 600, "only %d chains", n_chains);
    CHECK(n_equal >= n_chains * 4 / 5, "the model is exact on only %d of %d chains",
          n_equal, n_chains);
}

/* The DP's least budget under the model: its plan fits it when simulated, and no
 * sampled chain's model peak is below it. */
static void test_min_budget(void)
{
    reseed(2);
    for (int gi = 0; gi < 30; gi++) {
        remat_tgraph *tg = random_tgraph(3 + (int)urand(7));
        struct dag d;
        struct lsets ls;
        struct chain c;
        struct dp_result res;
        size_t mb = 0, least = SIZE_MAX;
        remat_schedule *s = NULL;
        remat_sim_result r;
        int32_t *sets, *cand;

        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        if (lsets_build(&d, LS_EXACT, NULL, 4000, &ls)) {
            dag_fini(&d);
            remat_tgraph_free(tg);
            continue;
        }
        REMAT_ASSERT_TEST(dp_sim_new(tg, &d, &ls, &ls.sim) == REMAT_OK);
        sets = calloc((size_t)ls.n + 1, sizeof *sets);
        cand = calloc((size_t)ls.n + 1, sizeof *cand);
        c.block = calloc((size_t)d.n + 1, sizeof *c.block);
        c.kept = calloc((size_t)d.n + 1, sizeof *c.kept);
        REMAT_ASSERT_TEST(sets && cand && c.block && c.kept);
        for (int ci = 0; ci < 200; ci++) {
            int32_t nb = random_chain(&ls, sets, cand);
            double t;
            size_t model = chain_model(ls.sim, &d, &ls, sets, nb, &c, &t);

            least = model < least ? model : least;
        }
        CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &mb));
        CHECK(mb <= least + least / 100000 + 1, "graph %d: least budget %zu above a "
              "sampled chain's %zu", gi, mb, least);
        CHECK_OK(kusumoto_plan(&d, &ls, true, mb, INT64_MAX, NULL, &c, &res));
        CHECK(res.feasible && res.bound <= mb, "graph %d: bound %zu at budget %zu", gi,
              res.bound, mb);
        if (res.feasible && chain_lower(tg, &d, &c, &s) == REMAT_OK &&
            remat_sim_run(tg, s, &r) == REMAT_OK)
            CHECK(r.activation_peak_bytes <= res.bound, "graph %d: simulated %zu above the "
                  "model's %zu", gi, r.activation_peak_bytes, res.bound);
        else
            CHECK(false, "graph %d: the plan did not lower: %s", gi, remat_errmsg());
        remat_schedule_free(s);
        free(sets);
        free(cand);
        free(c.block);
        free(c.kept);
        dp_sim_free(ls.sim);
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
    }
}

/* The least, over the chains from L_cur to V, of what a chain needs (the most, over its
 * blocks, of the memory carried in plus the block's charge, and the block's bytes: the
 * window), given what the chain so far needs and carries; by depth-first search, cut
 * where the need reaches the best found. */
static void least_chain(struct dp_sim *sm, const struct lsets *ls, int32_t cur, size_t m,
                        size_t need, size_t *best)
{
    if (need >= *best)
        return;
    if (cur == ls->n - 1) {
        *best = need;
        return;
    }
    for (int32_t j = cur + 1; j < ls->n; j++) {
        double t;
        size_t dm, c, nd;

        if (ls->size[j] <= ls->size[cur] || !lsets_subset(ls, cur, j))
            continue;
        dp_sim_pair(sm, cur, j, &t, &dm, &c);
        nd = m + c > need ? m + c : need;
        nd = ls->m[j] - ls->m[cur] > nd ? ls->m[j] - ls->m[cur] : nd;
        least_chain(sm, ls, j, m + dm, nd, best);
    }
}

/* kusumoto_min_budget under the model (the step up recording its pairs, the least need
 * over them, the runs that confirm it) against every chain of the exact family. */
static void test_min_budget_exact(void)
{
    int n_graphs = 0;

    reseed(4);
    for (int gi = 0; gi < 80; gi++) {
        remat_tgraph *tg = random_tgraph(3 + (int)urand(6));
        struct dag d;
        struct lsets ls;
        size_t mb = 0, best = SIZE_MAX;

        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        if (lsets_build(&d, LS_EXACT, NULL, 120, &ls)) {
            dag_fini(&d);
            remat_tgraph_free(tg);
            continue;
        }
        n_graphs++;
        REMAT_ASSERT_TEST(dp_sim_new(tg, &d, &ls, &ls.sim) == REMAT_OK);
        least_chain(ls.sim, &ls, 0, 0, 0, &best);
        CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &mb));
        CHECK(mb == best, "graph %d (%d sets): least budget %zu, every chain's least need %zu",
              gi, ls.n, mb, best);
        dp_sim_free(ls.sim);
        lsets_fini(&ls);
        dag_fini(&d);
        remat_tgraph_free(tg);
    }
    printf("  %d graphs: the least budget is the least chain's need\n", n_graphs);
    CHECK(n_graphs >= 40, "only %d graphs", n_graphs);
}

/* ------------------------------------- the sweep's thinned family (lsets_thin) */

/*
 * lsets_thin on random narrow graphs (65..184 nodes, their approximate family), to 4..24
 * sets, against the definition worked out here: ∅ first and V last; every set of the
 * result one of the family's, with its M, T, m_out, size and list lengths as the family
 * has them; and of each run of sets whose M falls
 * between the same two multiples of M(V) / (max - 2) + 1, exactly the first of least
 * boundary bytes. kusumoto_pairs against a count of the pairs i < j with M(L_j) -
 * M(L_i) <= B / 2; kusumoto_min_budget over the thinned family never below the full
 * family's (a chain of the thinned family is one of the family).
 */
static void test_thin(void)
{
    static bset fam[HN + 2];
    static struct hg g;
    int graphs = 0, sets = 0;

    reseed(17);
    for (int it = 0; it < 40; it++) {
        struct dag d;
        struct lsets ls, th;
        int32_t max = 4 + (int32_t)urand(21), nf, k = 1;
        size_t step, lo_full = 0, lo_thin = 0;

        random_narrow(&g);
        to_dag(&g, &d);
        nf = approx_family(&g, fam);
        REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK && ls.n == nf);
        CHECK_OK(lsets_thin(&d, &ls, max, &th));
        step = ls.m[ls.n - 1] / (size_t)(max - 2) + 1;
        CHECK(th.n >= 2 && th.size[0] == 0 && th.size[th.n - 1] == g.n,
              "graph %d: %d sets, first of %d nodes, last of %d", it, th.n, th.size[0],
              th.size[th.n - 1]);
        /* the runs of the family, in order: each contributes its least-cut set */
        for (int32_t i = 1; i < ls.n - 1 && k < th.n; ) {
            int32_t e = i, best = i;
            size_t bb = SIZE_MAX;

            while (e < ls.n - 1 && ls.m[e] / step == ls.m[i] / step)
                e++;
            for (int32_t q = i; q < e; q++) {
                struct sinfo si;
                bset b;
                size_t cut = 0;

                b = ls_set(&ls, q);
                set_info(&g, &b, &si);
                for (int32_t v = 0; v < g.n; v++)
                    cut += bs_has(&si.bd, v) ? g.m[v] : 0;
                if (cut < bb) {
                    bb = cut;
                    best = q;
                }
            }
            CHECK(!memcmp(ls_set(&th, k).w, ls_set(&ls, best).w, sizeof(bset)) &&
                  th.m[k] == ls.m[best] && th.t[k] == ls.t[best] &&
                  th.m_out[k] == ls.m_out[best] && th.size[k] == ls.size[best] &&
                  th.bd_at[k + 1] - th.bd_at[k] == ls.bd_at[best + 1] - ls.bd_at[best] &&
                  th.mx_at[k + 1] - th.mx_at[k] == ls.mx_at[best + 1] - ls.mx_at[best],
                  "graph %d: thinned set %d is not the family's set %d (its run's least "
                  "cut, %zu bytes)", it, k, best, bb);
            k++;
            i = e;
        }
        CHECK(k == th.n - 1, "graph %d: %d thinned sets, %d runs", it, th.n, k - 1);
        for (int r = 0; r < 3; r++) {
            size_t B = ls.m[ls.n - 1] * (size_t)(1 + r) / 2;
            int64_t want = 0;

            for (int32_t j = 1; j < ls.n; j++)
                for (int32_t i = 0; i < j; i++)
                    want += ls.m[j] - ls.m[i] <= B / 2;
            CHECK(kusumoto_pairs(&ls, B) == want, "graph %d: %lld pairs at %zu, counted %lld",
                  it, (long long)kusumoto_pairs(&ls, B), B, (long long)want);
        }
        CHECK_OK(kusumoto_min_budget(&d, &ls, NULL, &lo_full));
        CHECK_OK(kusumoto_min_budget(&d, &th, NULL, &lo_thin));
        CHECK((double)lo_thin >= (double)lo_full * (1 - 2e-5),
              "graph %d: the thinned family needs %zu, the family %zu", it, lo_thin, lo_full);
        graphs++;
        sets += th.n;
        lsets_fini(&th);
        lsets_fini(&ls);
        dag_fini(&d);
    }
    printf("  %d graphs, %d thinned sets\n", graphs, sets);
}

/* ------------------------------------------ the rows (dp_sim_row.c) against the walk */

/* Every pair (L_i ⊊ L_j) of ls by the rows and by the walk of each pair alone: the same
 * numbers, to the byte and the bit. Pairs visited j ascending and, within a row, i
 * ascending from a start drawn at random (a row starts where its first call asks).
 * Returns the pairs compared. */
static int64_t rows_vs_walk(const remat_tgraph *tg, const struct dag *d, const struct lsets *ls,
                            const char *what)
{
    struct dp_sim *wk = NULL, *rw = NULL;
    int64_t n = 0, bad = 0;

    REMAT_ASSERT_TEST(dp_sim_new(tg, d, ls, &wk) == REMAT_OK &&
                      dp_sim_new(tg, d, ls, &rw) == REMAT_OK);
    dp_sim_set_rows(wk, false);
    CHECK(dp_sim_set_rows(rw, true), "%s: the rows are not exact for this graph", what);
    for (int32_t j = 1; j < ls->n && bad < 5; j++) {
        int32_t lo = (int32_t)urand((uint64_t)(j < 150 ? j : 150));

        lo = j - 1 - lo; /* within 150 sets below L_j: on large graphs its reach at the
                            least budgets (ResNet-1001: 100 to 160 sets) */

        for (int32_t i = lo; i < j; i++) {
            double t0, t1;
            size_t dm0, dm1, c0, c1;

            if (ls->size[i] >= ls->size[j] || !lsets_subset(ls, i, j))
                continue;
            dp_sim_pair(wk, i, j, &t0, &dm0, &c0);
            dp_sim_pair(rw, i, j, &t1, &dm1, &c1);
            n++;
            if (t0 != t1 || dm0 != dm1 || c0 != c1) {
                bad++;
                CHECK(false, "%s: pair (%d, %d): the rows give t %.17g dm %zu c %zu, the "
                      "walk %.17g %zu %zu", what, i, j, t1, dm1, c1, t0, dm0, c0);
            }
        }
    }
    dp_sim_free(wk);
    dp_sim_free(rw);
    return n;
}

static void test_rows(void)
{
    static const struct { const char *model; int layers, batch; } zoo[] = {
        {"resnet50", 0, 2}, {"googlenet", 0, 1}, {"densenet121", 0, 1}, {"unet", 0, 1},
        {"gpt2", 2, 1}, {"gpt2", 12, 1}, {"bert-base", 2, 1}, {"resnet1001", 0, 1},
        {"resnet2498", 0, 1},
    };
    int64_t total = 0;

    reseed(3);
    for (int gi = 0; gi < 40; gi++) { /* random graphs, their exact families */
        remat_tgraph *tg = random_tgraph(3 + (int)urand(7));
        struct dag d;
        struct lsets ls;

        REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
        if (!lsets_build(&d, LS_EXACT, NULL, 4000, &ls)) {
            total += rows_vs_walk(tg, &d, &ls, "random graph");
            lsets_fini(&ls);
        }
        dag_fini(&d);
        remat_tgraph_free(tg);
    }
    for (size_t k = 0; k < sizeof zoo / sizeof *zoo; k++) {
        remat_zoo_opts zo = {.batch = zoo[k].batch, .layers = zoo[k].layers};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        struct dag d;
        struct lsets ls;

        CHECK_OK(remat_zoo_build(zoo[k].model, &zo, NULL, &g));
        CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
        if (tg) {
            REMAT_ASSERT_TEST(dag_build(tg, &d) == REMAT_OK);
            REMAT_ASSERT_TEST(lsets_build(&d, LS_APPROX, NULL, 0, &ls) == REMAT_OK);
            total += rows_vs_walk(tg, &d, &ls, zoo[k].model);
            lsets_fini(&ls);
            dag_fini(&d);
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
    printf("  %lld pairs: the rows equal the walk\n", (long long)total);
}

int main(void)
{
    RUN_TIMED(test_model_vs_sim);
    RUN_TIMED(test_min_budget);
    RUN_TIMED(test_min_budget_exact);
    RUN_TIMED(test_thin);
    RUN_TIMED(test_rows);
    return harness_end();
}
