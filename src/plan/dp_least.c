/*
 * dp_least.c - the time-centric search of the lower-set DP (kusumoto.c): the least
 * overhead at V within the budget, by runs whose frontiers keep only the states that
 * can still reach it.
 *
 * Upper bounds: feasible chains (the memory-centric one, the greedy least-(t, m) one,
 * the Lagrangian bound's least paths that fit, and the chains a run finishes along those
 * paths, its guides: kusumoto.c, which lowers the run's own bound with them). Lower
 * bounds per state: lb (dp_bounds), then, when the first tries at lb alone grow past a
 * few states a set, the Lagrangian bound over the kept pairs (dp_pairs.h) at two
 * multipliers. Every run's bound is an integer overhead at or above the optimum's or the
 * run finds nothing; the chain found is the same at any bound at or above the optimum.
 */
#include "plan/dp_run.h"

/* The states a set may hold on average in the first tries at lb alone, before the search
 * keeps the pairs and bounds the states by dp_lagrange too: those tries cost little when
 * they stay small (ResNet-1001's hybrid sweep), and a capped one is lost work. */
#define TRIAL_PTS 4

/* Runs that visit at least this many pairs skip those tries (unless kusumoto_set_trial
 * asks for them): on the scale bench's graphs (bench/planners --scale) every try of such
 * a run was capped, ResNet-1001's, ResNet-2498's and GPT-2-1000's alike (GPT-2-1000 at
 * 2% of the way from its least budget to `none`'s peak: 0.07 s lost). The chain is the
 * same either way. */
#define TRIAL_PAIRS_MAX ((int64_t)1 << 20)

static size_t trial_max; /* kusumoto_set_trial's; 0: TRIAL_PTS a set */

void kusumoto_set_trial(size_t max_pts)
{
    trial_max = max_pts;
}

/*
 * Further Lagrangian bounds, at D (1 + 1/LAG_DIV[0]) and D (1 - 1/LAG_DIV[1]): the D of
 * the best bound at ∅ is not every state's best, and a state must pass them all. With
 * the sum bound alone (dp_pairs.h), on GPT-2 of 1,000 layers at a tenth of the way from
 * its least budget to `none`'s peak, the run at the optimum held 29.3 10^6 states with
 * the one bound, 15.8 10^6 with a second at D + 0.7%, 14.8 10^6 at D + 5% (14.6 10^6 with
 * four more, at D + 2%, 5%, 10%, 20%), and a second D below the first cut almost
 * nothing there. With the peak bound, a D below matters at looser budgets: at 30% of the
 * way the run at the optimum held 20.2 10^6 states with D and D + 5%, 12.3, 12.2, 12.1
 * 10^6 with a third at D - 10%, 20%, 30%; at 70%, 11.2 10^6 and 7.97, 7.89, 7.85 10^6
 * (GPT-2 of 200 layers at 30%: 1.19 -> 0.24 10^6; ResNet-2498 halfway: 1.79 -> 0.74
 * 10^6), and never more. All the bounds are consistent (a state passes only if its parent
 * does) and none prunes a state that a lower one passes, so the states kept are the
 * unpruned DP's that pass them all, and the chain is the same.
 */
static const int LAG_DIV[DP_LAG_EXTRA] = {20, -5};

static bool lag_second = true; /* kusumoto_set_second_bound's: the further bounds */

void kusumoto_set_second_bound(bool on)
{
    lag_second = on;
}

static bool guides_on = true; /* kusumoto_set_guides' */

void kusumoto_set_guides(bool on)
{
    guides_on = on;
}

/*
 * The Lagrangian deepening's first step above lo, in overhead units: (ub - lo)/16, at
 * most FIRST_STEP nodes of average forward cost. On the deep graphs' full families at
 * 10%, 25%, 50% and 75% of the way from the least budget to `none`'s peak, the optimum
 * lay 0-183 units (0-23 average nodes) above lo while (ub - lo)/16 reached 3,891: GPT-2
 * of 1,000 layers at 10% held 6.6 10^7 states, 26 s, for an optimum 60 units above lo.
 * A smaller first bound only saves work when the optimum is below it: that is the
 * deepening's bet, which the cap limits.
 */
#define FIRST_STEP 32

static int64_t first_step_set; /* kusumoto_set_first_step's; 0: first_step's rule */

void kusumoto_set_first_step(int64_t units)
{
    first_step_set = units;
}

static int64_t first_step(const struct dp *p, int64_t spread)
{
    int64_t cap = FIRST_STEP * (int64_t)p->n_t / (p->d->n > 0 ? p->d->n : 1);
    int64_t s = spread / 16 < cap ? spread / 16 : cap;

    if (first_step_set > 0)
        return first_step_set;
    return s > 0 ? s : 1;
}

/*
 * The beam, where a chain within a fraction of the optimum serves (p->within: hybrid's
 * sweep, whose chains are bases to offload from): a frontier run whose sets keep only
 * their BEAM states of least Lagrangian length D t + m (and the least m), bounded by lo
 * (1 + within). A chain it finds is within that of the optimum, since lo bounds the
 * optimum from below; the search then ends with it (p->near). On the thinned family of
 * hybrid's sweep on GPT-2 of 1,000 layers, at four budgets halfway to `none`: 66,000
 * states instead of 0.9-4.2 10^6, 0.01-0.024 s instead of 0.04-0.36 s a run, overheads
 * 0.001-0.026% above the optimum's. p->near: the beam found its chain, which p's states
 * hold; otherwise the search goes on. A set's states cost the beam about its run's time
 * each: on GPT-2-1000 at 2% of the way from its least budget to `none`'s peak a beam of
 * 32 carried 173 10^6 states (0.74 s), one of 24 (0.56 s) found a chain of the same
 * overhead and peak there and at 10%, 30%, 50% and 70%, as at every row of
 * `bench/planners --scale`; one of 20 ended 0.009% higher in peak at 50%, one of 16
 * found no chain within 0.1% there (the exact search then ran: 1.8 s).
 */
#define BEAM 24

static remat_status near_run(struct dp *p, const int32_t *lb, int32_t lo, int32_t ub)
{
    int32_t last = p->ls->n - 1;
    double bound = (double)lo * (1 + p->within);
    size_t nk = (size_t)p->n_t + 1;
    remat_status st;

    if (bound >= ub)
        return REMAT_OK; /* the search's own bound is as tight */
    if (!(p->beam_key = core_alloc(p->al, nk * sizeof *p->beam_key)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    p->beam = BEAM;
    p->stage = "DP: the time-memory frontier, a beam";
    st = dp_run(p, DP_FRONTIER, lb, (int32_t)bound);
    p->beam = 0;
    core_free(p->al, p->beam_key, nk * sizeof *p->beam_key);
    p->beam_key = NULL;
    p->near = !st && p->fr_n[last] > 0;
    return st;
}

/* The least overhead at V: p's states are the memory-centric run's (an upper bound). */
remat_status dp_least_time(struct dp *p, int32_t **lb, int64_t **room, int64_t **lag)
{
    *lb = core_calloc(p->al, (size_t)p->ls->n, sizeof **lb);
    *room = core_calloc(p->al, (size_t)p->ls->n, sizeof **room);
    if (!*lb || !*room)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    dp_bounds(p, *lb, *room);
    return dp_least_time_bounded(p, *lb, *room, lag);
}

remat_status dp_least_time_bounded(struct dp *p, int32_t *lb, int64_t *room, int64_t **lag)
{
    const struct lsets *ls = p->ls;
    int32_t last = ls->n - 1, ub = p->pts[p->fr_at[last]].t, lo, lag_lb = 0;
    remat_status st;

    *lag = core_calloc(p->al, DP_LAG_ROWS * (size_t)ls->n, sizeof **lag);
    if (!*lag)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    p->room = room;
    /* the greedy least-(t, m) chain among the states that can still reach V: it always
     * does, so ub is never left at the memory-centric chain's */
    p->stage = "DP: least time";
    if ((st = dp_run(p, DP_MIN_T, NULL, 0)))
        return st;
    if (p->fr_n[last] > 0 && p->pts[p->fr_at[last]].t < ub)
        ub = p->pts[p->fr_at[last]].t;
    /* first the deepening of lb alone (the bound fourfold from lb(∅), then ub), while
     * its frontiers stay at a few states a set: cheaper than the Lagrangian passes */
    p->stage = "DP: the time-memory frontier, one deepening";
    p->max_pts = trial_max ? trial_max : (size_t)TRIAL_PTS * (size_t)ls->n;
    p->capped = !trial_max && dp_run_pairs(p) >= TRIAL_PAIRS_MAX;
    for (int32_t guess = lb[0] > 0 ? lb[0] : 1; !p->capped;
         guess = guess > ub / 16 ? ub : 4 * guess) {
        if ((st = dp_run(p, DP_FRONTIER, lb, guess < ub ? guess : ub)) || p->capped)
            break;
        if (p->fr_n[last] > 0)
            break;
        REMAT_ASSERT(guess < ub);
    }
    p->max_pts = 0;
    if (st || !p->capped)
        return st;
    if (!dp_keep_pairs(p) || !dp_guides_init(&p->gd, p->al, ls->n))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    if (!dp_lagrange(&p->pc, ls, p->budget, window(p), room, p->n_t, *lag, &p->lag_d,
                     &lag_lb, &ub, guides_on ? &p->gd : NULL))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    p->lag = p->lag_d > 0 ? *lag : NULL;
    p->n_lagx = 0;
    if (p->lag) { /* the peak bound at D and at the further D, in one pass */
        int64_t dd[DP_LAG_ROWS] = {p->lag_d}, *rows[DP_LAG_ROWS] = {*lag};
        int k = 1;

        for (int e = 0; lag_second && e < DP_LAG_EXTRA; e++) {
            int64_t dx = p->lag_d + p->lag_d / LAG_DIV[e];

            if (dx == p->lag_d || dx <= 0)
                continue; /* D too small to move by the fraction */
            dd[k] = dx;
            rows[k] = *lag + (size_t)k * (size_t)ls->n;
            k++;
        }
        if (!dp_lagrange_peaks(&p->pc, ls, p->budget, window(p), room, p->n_t, k, dd, rows,
                               &lag_lb, &ub, guides_on ? &p->gd : NULL))
            return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
        for (int e = 1; e < k; e++) {
            p->lagx[p->n_lagx] = rows[e];
            p->lag_dx[p->n_lagx++] = dd[e];
        }
    }
    lo = lb[0] > lag_lb ? lb[0] : lag_lb;
    if (p->within > 0 && p->lag && ((st = near_run(p, lb, lo, ub)) || p->near))
        return st;
    /*
     * Deepening from lo: a run costs about the states within its bound, and near lo
     * these saturate (ResNet-2498 at its halfway budget: 3.2 10^6 states at lo + 36,
     * 5.5 10^6 at lo + 144, 8 10^6 at lo + 2,223), so a run that fails just below the
     * optimum costs nearly as much as the one that finds it. The optimum was 1-16% of
     * ub - lo above lo (3-5% mostly), so the first bound is lo + (ub - lo)/16, then
     * fourfold, then ub; but at most FIRST_STEP average nodes' overhead above lo, where
     * ub is far (below). Every bound at or above the optimum gives the same chain: the
     * states kept are those of the unbounded frontiers that pass each test (the tests
     * never pass a state whose parent failed).
     */
    for (int64_t step = first_step(p, ub - lo);; step *= 4) {
        int32_t guess = step > (ub - lo) / 4 ? ub : lo + (int32_t)step;

        if ((st = dp_run(p, DP_FRONTIER, lb, guess)))
            return st;
        if (p->fr_n[last] > 0)
            return REMAT_OK;
        REMAT_ASSERT(guess < ub && p->ub_found > guess);
        ub = p->ub_found < ub ? p->ub_found : ub;
    }
}
