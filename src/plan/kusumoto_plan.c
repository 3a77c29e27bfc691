/*
 * kusumoto_plan.c - a chain of the lower-set DP (kusumoto.c) and its blocks: the runs
 * at a budget (least memory, then least time unless memory-centric), the walk back from
 * V and the kept nodes, the bound and the overhead.
 */
#include "plan/kusumoto.h"
#include "plan/dp_run.h"
#include "plan/dp_sim.h"

#include <string.h>

static remat_status plan_chain(const struct dag *d, const struct lsets *ls, bool memory_centric,
                               size_t budget, int64_t coarse_at, const struct dp_progress *pg,
                               struct dp_pairs *pairs, double within, struct chain *c,
                               struct dp_result *res, int32_t *sets_out, bool refine);

remat_status kusumoto_plan(const struct dag *d, const struct lsets *ls, bool memory_centric,
                           size_t budget, int64_t coarse_at, const struct dp_progress *pg,
                           struct chain *c, struct dp_result *res)
{
    return plan_chain(d, ls, memory_centric, budget, coarse_at, pg, NULL, 0, c, res, NULL, false);
}

remat_status kusumoto_plan_pairs(const struct dag *d, const struct lsets *ls,
                                 bool memory_centric, size_t budget, int64_t coarse_at,
                                 const struct dp_progress *pg, struct dp_pairs *pairs,
                                 double within, struct chain *c, struct dp_result *res)
{
    return plan_chain(d, ls, memory_centric, budget, coarse_at, pg, pairs,
                      memory_centric ? 0 : within, c, res, NULL, true);
}

remat_status kusumoto_plan_within(const struct dag *d, const struct lsets *ls, size_t budget,
                                  int64_t coarse_at, double within, struct chain *c,
                                  struct dp_result *res)
{
    return plan_chain(d, ls, false, budget, coarse_at, NULL, NULL, within, c, res, NULL, false);
}

/* A time-centric plan whose runs visit at least this many pairs keeps them first
 * (dp_keep_pairs, on two cores): its runs before the Lagrangian search (least memory,
 * dp_bounds, least time, the first deepening), each of which worked every pair out
 * again, then read them, and the search that keeps them finds them kept. GPT-2-1000 at 2%
 * of the way from its least budget to `none`'s peak (12.6 10^6 pairs): the least-memory
 * run 0.17 -> 0.07 s, the whole plan 2.2-2.6 -> 2.0-2.3 s (the runs that visit only the
 * sets holding states read the kept rows whole, a little slower). Below, a run's pairs
 * cost little and the search may end before it would keep them. Pairs the caller kept at
 * a smaller budget (the least budget's search) give up their memory, already touched
 * (dp_pairs_regrow: the new block on it where it can be, otherwise it serves the runs
 * after), and take these in return (kusumoto_plan_pairs): at 2%, 95 MB less memory
 * touched afresh (where the first touch of fresh memory costs 0.1-1 s of system time a
 * command), the command's most resident memory 412 -> 379 MB. */
#define KEEP_FIRST_PAIRS ((int64_t)1 << 20)
/* On the simulator's model (ls->sim) a pair costs far more to work out (about 0.5 us:
 * the block's liveness walk), so far fewer pairs repay keeping them: ResNet-2498 at 2%
 * (397,775 pairs) worked them out four times, 0.2 s each (least memory, dp_bounds, least
 * time, keeping them), and kept first the plan took 1.23-1.44 -> 0.71-0.72 s, its
 * schedule byte for byte the same. */
#define KEEP_FIRST_SIM ((int64_t)1 << 12)

/* The memory-centric run and dp_bounds side by side (they read the kept pairs and write
 * apart: dp_bounds depends only on the budget), two jobs of core_par_run: GPT-2-1000 at
 * 2% of the way from its least budget to `none`'s peak, 0.06 s each. */
struct first_runs {
    struct dp *p;
    int32_t *lb;
    int64_t *room;
    struct core_job_err err;
};

static void first_job(void *ctx, int k)
{
    struct first_runs *w = ctx;

    if (k == 0)
        core_job_err_note(&w->err, dp_run(w->p, DP_MIN_M, NULL, 0));
    else
        dp_bounds(w->p, w->lb, w->room);
}

/*
 * The two-stage search (where a time-centric plan asks for a chain within a fraction of
 * the optimum and would visit more than REFINE_PAIRS pairs of a large family, every
 * pair: below the coarse restriction's wide windows). First the chain over the sets
 * where the boundary's bytes drop (lsets_drops_keep: where the graph narrows, which is
 * where chains cut), then the chain over those and the sets within REFINE_REACH places
 * of the first chain's (by M(L)), which may move each cut a little. Both families'
 * chains are ls's. On GPT-2 of 1,000 layers at 2% of the way from its least budget to
 * `none`'s peak (37,008 sets, 12.6 10^6 pairs), the flat DP's chain cut at 1,003 sets,
 * 1,000 of them drops (of 4,000); the two stages found a chain of the same peak and
 * overhead (docs/planners.md, "Twenty-fifth round"). *done when the second found one.
 */
#define REFINE_PAIRS ((int64_t)1 << 22)
#define REFINE_REACH 8

static int64_t refine_set; /* kusumoto_set_refine's; 0: REFINE_PAIRS, < 0: never */

void kusumoto_set_refine(int64_t min_pairs)
{
    refine_set = min_pairs;
}

static remat_status plan_refined(const struct dag *d, const struct lsets *ls, size_t budget,
                                 const struct dp_progress *pg, double within, struct chain *c,
                                 struct dp_result *res, bool *done)
{
    const remat_allocator *al = d->al;
    size_t n = (size_t)ls->n;
    uint8_t *keep = core_alloc(al, n);
    int32_t *idx = core_alloc(al, n * sizeof *idx), *sets = core_alloc(al, n * sizeof *sets);
    struct lsets fam = {0};
    int32_t k = 0, n_fam = 0;
    remat_status st;

    *done = false;
    if (!keep || !idx || !sets) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
        goto out;
    }
    lsets_drops_keep(d, ls, keep);
    for (int32_t i = 0; i < ls->n; i++)
        if (keep[i])
            idx[k++] = i; /* the first family's set k is ls's idx[k] */
    if ((st = lsets_pick(ls, keep, &fam)) ||
        (st = plan_chain(d, &fam, false, budget, INT64_MAX, pg, NULL, within, c, res, sets,
                         false)) ||
        !res->feasible)
        goto out;
    for (int32_t b = 0; b < c->n_blocks; b++)
        for (int32_t i = idx[sets[b]] - REFINE_REACH; i <= idx[sets[b]] + REFINE_REACH; i++)
            if (i >= 0 && i < ls->n)
                keep[i] = 1;
    lsets_fini(&fam);
    if ((st = lsets_pick(ls, keep, &fam)))
        goto out;
    n_fam = fam.n;
    if ((st = plan_chain(d, &fam, false, budget, INT64_MAX, pg, NULL, within, c, res, NULL,
                         false)))
        goto out;
    *done = res->feasible;
    res->n_sets = n_fam;
out:
    lsets_fini(&fam);
    core_free(al, keep, n);
    core_free(al, idx, n * sizeof *idx);
    core_free(al, sets, n * sizeof *sets);
    return st;
}

static remat_status plan_chain(const struct dag *d, const struct lsets *ls, bool memory_centric,
                               size_t budget, int64_t coarse_at, const struct dp_progress *pg,
                               struct dp_pairs *pairs, double within, struct chain *c,
                               struct dp_result *res, int32_t *sets_out, bool refine)
{
    /* the kept pairs serve a run at budget over ls where every pair is visited */
    bool usable = pairs && pairs->p && budget <= pairs->budget && pairs->n_sets == ls->n;
    struct dp p;
    struct dp_coarse co = {0};
    int32_t set, pt, nb = 0, last = ls->n - 1;
    int32_t *sets = NULL, *lb = NULL;
    int64_t *room = NULL, *lag = NULL, flat = 0;
    double recomputed = 0, total = 0;
    bool grown = false; /* the pairs kept in pairs' memory */
    bool bounded = false; /* lb and room worked out beside the memory-centric run */
    remat_status st;

    memset(res, 0, sizeof *res);
    if ((st = dp_init(&p, d, ls, budget)))
        return st;
    p.pg = pg;
    p.within = within;
    p.stage = "DP: least memory";
    if (coarse_at == 0 ? ls->n > DP_COARSE_MIN_SETS &&
                             (flat = kusumoto_pairs(ls, budget)) >
                                 (memory_centric ? DP_COARSE_PAIRS_MC : DP_COARSE_PAIRS_TC)
                       : kusumoto_pairs(ls, budget) > coarse_at) {
        if (!dp_coarse_init(&co, d, ls, dp_coarse_runs(ls->n))) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
            goto out;
        }
        p.co = &co;
        if (coarse_at == 0 && dp_run_pairs(&p) * DP_COARSE_GAIN > flat)
            p.co = NULL; /* a narrow window: every pair */
    }
    if (refine && !p.co && !usable && !memory_centric && within > 0 && coarse_at == 0 &&
        !ls->sim && ls->by_m && refine_set >= 0 && ls->n > 2 &&
        (flat ? flat : kusumoto_pairs(ls, budget)) > (refine_set ? refine_set : REFINE_PAIRS)) {
        bool done;

        if ((st = plan_refined(d, ls, budget, pg, within, c, res, &done)) || done)
            goto out;
        memset(res, 0, sizeof *res); /* the first family may find none: ls itself then */
    }
    if (!p.co && usable) {
        p.pc = *pairs; /* borrowed: not freed with p */
    } else if (!p.co && !memory_centric
               && dp_run_pairs(&p) >= (ls->sim ? KEEP_FIRST_SIM : KEEP_FIRST_PAIRS)) {
        if (!dp_keep_pairs_in(&p, pairs)) {
            st = dp_stopped(pg) ? REMAT_FAIL(REMAT_ERR_INFEASIBLE, "the DP's run was stopped")
                                : REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
            goto out;
        }
        grown = pairs && !pairs->p; /* the caller's after (in its memory where it had some) */
    }
    /* Memory-centric: the least cached memory at V (then the least overhead), which is
     * the last point of V's Pareto frontier; one state per set finds it exactly, since
     * transitions add the same (t, m) to every state and allow the smaller m first. */
    if (!memory_centric && p.pc.p && !p.co && core_par_threads_with(p.al) > 1) {
        struct first_runs w = {&p, NULL, NULL, {0}};

        lb = core_calloc(p.al, (size_t)ls->n, sizeof *lb);
        room = core_calloc(p.al, (size_t)ls->n, sizeof *room);
        if (!lb || !room) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
            goto out;
        }
        w.lb = lb;
        w.room = room;
        core_par_run(2, 2, first_job, &w);
        bounded = true;
        if ((st = core_job_err_raise(&w.err)))
            goto out;
    } else if ((st = dp_run(&p, DP_MIN_M, NULL, 0))) {
        goto out;
    }
    if (p.fr_n[last] == 0 && p.co) { /* only the flat pairs fit: all of them */
        p.co = NULL;
        if (usable)
            p.pc = *pairs;
        if ((st = dp_run(&p, DP_MIN_M, NULL, 0)))
            goto out;
    }
    if (p.fr_n[last] == 0)
        goto out; /* infeasible */
    if (!memory_centric && (st = bounded ? dp_least_time_bounded(&p, lb, room, &lag)
                                         : dp_least_time(&p, &lb, &room, &lag)))
        goto out;
    res->feasible = true;
    res->n_sets = ls->n;
    res->coarse = p.co != NULL;
    res->near = p.near;
    res->units = p.pts[p.fr_at[last]].t;
    sets = core_calloc(p.al, (size_t)ls->n + 1, sizeof *sets);
    if (!sets) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
        goto out;
    }
    /* Walk back from V: TC takes the least t, MC the least m. */
    set = last;
    pt = p.fr_at[last]; /* MC: the single least-(m, t) state; TC: the frontier's least t */
    while (set > 0) {
        sets[nb++] = set;
        pt = p.pts[pt].parent;
        set = dp_point_set(&p, pt);
    }
    /* sets[nb-1] is L1, sets[0] is V. Blocks, kept nodes and the bound. */
    c->n_blocks = nb;
    for (int32_t b = 0; sets_out && b < nb; b++)
        sets_out[b] = sets[nb - 1 - b];
    {
        size_t cached = 0, sim_m = 0;
        double sim_t = 0;
        int32_t prev = 0;

        for (int32_t b = 1; b <= nb; b++) {
            int32_t j = sets[nb - b];
            size_t bound = cached + 2 * (ls->m[j] - ls->m[prev]) + ls->m_out[j];

            if (ls->sim) {
                double t;
                size_t dm, cb;

                dp_sim_pair_one(ls->sim, prev, j, &t, &dm, &cb);
                bound = sim_m + cb;
                sim_m += dm;
                sim_t += t;
            }
            res->bound = bound > res->bound ? bound : res->bound;
            for (int32_t w = 0; w < ls->words; w++)
                for (uint64_t x = lsets_word(ls, j, w) & ~lsets_word(ls, prev, w); x;
                     x &= x - 1) {
                    int32_t v = 64 * w + __builtin_ctzll(x);

                    c->block[v] = b;
                    c->kept[v] = false;
                }
            for (int32_t k = ls->bd_at[j]; k < ls->bd_at[j + 1]; k++) {
                int32_t v = ls->bd[k];

                if (!lsets_has(ls, prev, v)) {
                    c->kept[v] = true;
                    cached += d->m[v];
                }
            }
            prev = j;
        }
        recomputed = sim_t;
    }
    for (int32_t v = 0; v < d->n; v++) {
        total += d->t[v];
        recomputed += c->kept[v] || ls->sim ? 0 : d->t[v];
    }
    res->overhead = total > 0 ? recomputed / total : 0;
out:
    core_free(p.al, sets, sizeof *sets * ((size_t)ls->n + 1));
    core_free(p.al, lb, sizeof *lb * (size_t)ls->n);
    core_free(p.al, room, sizeof *room * (size_t)ls->n);
    core_free(p.al, lag, sizeof *lag * DP_LAG_ROWS * (size_t)ls->n);
    if (pairs && p.pc.p == pairs->p)
        memset(&p.pc, 0, sizeof p.pc); /* borrowed */
    if (grown && p.pc.p) { /* the pairs at this budget serve every one up to it */
        *pairs = p.pc;
        memset(&p.pc, 0, sizeof p.pc);
    }
    dp_fini(&p);
    if (co.idx)
        dp_coarse_fini(&co);
    return st;
}

