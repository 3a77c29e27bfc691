/*
 * kusumoto.c - the lower-set dynamic program of Kusumoto et al. (NeurIPS 2019).
 *
 * A strategy is a chain ∅ = L0 ⊊ L1 ⊊ … ⊊ Lk = V of lower sets; block Vi = Li \ Li-1.
 * The forward keeps Vi ∩ ∂(Li); the backward recomputes the rest of each block. The
 * state (L, t) holds the least cached memory m of a chain ending at L with overhead t;
 * a transition L -> L' adds t += T((L'\L) \ ∂(L')) and m += M(∂(L') \ L), allowed when
 * m + 2 M(L'\L) + M(δ+(L')) + M(δ−(δ+(L')) \ L') <= B. Sets are visited smallest first
 * and each keeps its Pareto frontier of (t, m) (t ascending, m strictly descending);
 * time-centric takes the least t at V, memory-centric the least m (the largest t on
 * the frontier).
 *
 * Overheads are integers: T itself when every T_v is a whole number and T(V) <= 64 |V|
 * (Kusumoto's costs), otherwise T scaled so that T(V) becomes 8 |V| and each block's
 * overhead rounded to the nearest unit.
 *
 * Work: O(sum over pairs L ⊂ L' of (words + |∂(L')| + frontier)). Pairs whose block
 * alone breaks the budget (2 M(L'\L) > B) are skipped before the subset test, and the
 * time-centric frontier keeps only states that can still reach V within the budget
 * and the bound on the optimum (dp_bounds).
 */
#include "plan/kusumoto.h"
#include "plan/dp_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct point {
    int32_t t;
    int32_t parent_set, parent_pt;
    size_t m;
};

struct dp {
    const struct dag *d;
    const struct lsets *ls;
    size_t budget;
    double scale;
    int32_t n_t;                 /* overhead values 0 .. n_t - 1 */
    int32_t *fr_at, *fr_n;       /* frontier of set i: pts[fr_at[i] .. + fr_n[i]) */
    struct point *pts;
    size_t n_pts, cap_pts;
    const remat_allocator *al;
    const struct dp_progress *pg;
    const char *stage;           /* the pass under way, for pg */
    const int64_t *room;         /* per set (may be NULL): the most cached memory from
                                    which V can still be reached; -1 none (dp_bounds) */
};

/* Reports pass progress after lower set j of n: the pairs done grow as j^2; at most a
 * hundred calls a pass. */
static void report(const struct dp *p, int32_t j, int32_t n)
{
    double f = (double)j * j / ((double)n * n), g = (double)(j - 1) * (j - 1) / ((double)n * n);

    if (p->pg && p->pg->fn && (int)(100 * f) != (int)(100 * g))
        p->pg->fn(p->pg->ud, p->stage, f);
}

static double block_t(const struct dp *p, int32_t i, int32_t j, size_t *dm, size_t *dmv)
{
    const struct lsets *ls = p->ls;
    const uint64_t *bi = lsets_bits(ls, i);
    double tb = 0;

    *dm = 0;
    for (int32_t k = ls->bd_at[j]; k < ls->bd_at[j + 1]; k++) {
        int32_t v = ls->bd[k];

        if (!bits_has(bi, v)) {
            *dm += p->d->m[v];
            tb += p->d->t[v];
        }
    }
    *dmv = ls->m[j] - ls->m[i];
    return ls->t[j] - ls->t[i] - tb; /* T(V' \ ∂(L')) */
}

/* The nearest whole overhead, at least 0: floor(x) as the conversion's truncation,
 * which is the same for x >= 0 (without libm's call, once per pair). */
static int32_t quantize(const struct dp *p, double t)
{
    double x = t * p->scale + 0.5;

    return x < 0 ? 0 : (int32_t)x;
}

static bool push_point(struct dp *p, struct point pt)
{
    if (p->n_pts == p->cap_pts) {
        size_t cap = p->cap_pts ? 2 * p->cap_pts : 4096;
        struct point *np = core_realloc(p->al, p->pts, sizeof *np * p->cap_pts,
                                        sizeof *np * cap);

        if (!np)
            return false;
        p->pts = np;
        p->cap_pts = cap;
    }
    p->pts[p->n_pts++] = pt;
    return true;
}

enum dp_mode {
    DP_FRONTIER, /* the Pareto frontier of (t, m) per set: time-centric */
    DP_MIN_M,    /* one state per set, least (m, t): memory-centric and feasibility */
    DP_MIN_T,    /* one state per set, least (t, m): a quick time-centric upper bound */
};

/* The most bytes a block may add to its lower set: the authors' bound charges twice
 * them (2 M(L'\L)), so B/2; the simulator's model charges at least the block's largest
 * recomputation, and blocks of more than B bytes are not considered. */
static inline size_t window(const struct dp *p)
{
    return p->ls->sim ? p->budget : p->budget / 2;
}

/* Block quantities of the pair (i, j); false when the block alone breaks the budget
 * or L_i is not a subset of L_j. */
static inline bool pair_block(const struct dp *p, int32_t i, int32_t j, int32_t *dt, size_t *dm,
                              size_t *c)
{
    const struct lsets *ls = p->ls;
    size_t dmv = ls->m[j] - ls->m[i];

    if (ls->size[i] >= ls->size[j] || dmv > window(p) || !lsets_subset(ls, i, j))
        return false;
    if (ls->sim) {
        double t;

        dp_sim_pair(ls->sim, i, j, &t, dm, c);
        *dt = quantize(p, t);
        return *c <= p->budget;
    }
    *dt = quantize(p, block_t(p, i, j, dm, &dmv));
    *c = 2 * dmv + ls->m_out[j];
    return *c <= p->budget;
}

/* The first set a block ending at L_j can start from: with the sets sorted by M(L)
 * (lsets.by_m), those with M(L_j) - M(L_i) <= B/2 are a contiguous run before j and
 * the rest break the budget alone (pair_block); otherwise 0. */
static int32_t first_start(const struct dp *p, int32_t j)
{
    const struct lsets *ls = p->ls;
    size_t half = window(p);
    int32_t lo = 0, hi = j;

    if (!ls->by_m || ls->m[j] <= half)
        return 0;
    while (lo < hi) { /* the first i with m[i] >= m[j] - half */
        int32_t mid = lo + (hi - lo) / 2;

        if (ls->m[mid] < ls->m[j] - half)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * lb[i]: the least overhead from L_i to V over transitions whose block fits the budget
 * (memory carried over ignored), so t + lb[i] bounds every chain through (L_i, t).
 * room[i]: the most cached memory m a state at L_i may carry and still reach V (-1:
 * none may), the largest over its transitions to L_j of min(B - c, room[j] - dm); a
 * state above it is dead, and so is everything it leads to (m only grows), so the
 * frontier pass skips it without changing the states that reach V. Both in one pass
 * over the pairs, backwards.
 */
static void dp_bounds(const struct dp *p, int32_t *lb, int64_t *room)
{
    const struct lsets *ls = p->ls;
    int64_t B = p->budget > (size_t)INT64_MAX ? INT64_MAX : (int64_t)p->budget;

    for (int32_t i = ls->n - 1; i >= 0; i--) {
        lb[i] = i == ls->n - 1 ? 0 : INT32_MAX;
        room[i] = i == ls->n - 1 ? INT64_MAX : -1;
        for (int32_t j = i + 1; j < ls->n && i < ls->n - 1; j++) {
            int32_t dt;
            size_t dm, c;
            int64_t r;

            if (ls->by_m && ls->m[j] - ls->m[i] > window(p))
                break; /* and every later j: M only grows */
            if (room[j] < 0 || !pair_block(p, i, j, &dt, &dm, &c))
                continue;
            if (lb[j] != INT32_MAX && dt + lb[j] < lb[i])
                lb[i] = dt + lb[j];
            r = B - (int64_t)c;
            if (room[j] != INT64_MAX)
                r = room[j] - (int64_t)dm < r ? room[j] - (int64_t)dm : r;
            room[i] = r > room[i] ? r : room[i];
        }
    }
}

/*
 * Runs the DP; the states of V are those of the last set. In DP_FRONTIER mode, with lb
 * and ub given, states that cannot lead to an overhead of at most ub are dropped.
 */
/* The first point of set i's frontier fp (cnt points, m descending) that a block to set
 * j (cost c at its peak, dm kept) leaves within the budget and able to reach V: the
 * feasible points are a suffix. -1 when j can no longer be passed through. */
static int32_t first_feasible(const struct dp *p, const struct point *fp, int32_t cnt,
                              int32_t j, size_t c, size_t dm)
{
    int32_t lo = 0, hi = cnt;
    size_t lim = p->budget - c;

    if (p->room) {
        if (p->room[j] < 0 || (p->room[j] != INT64_MAX && (size_t)p->room[j] < dm))
            return -1;
        if (p->room[j] != INT64_MAX && (size_t)p->room[j] - dm < lim)
            lim = (size_t)p->room[j] - dm;
    }
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;

        if (fp[mid].m <= lim)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static remat_status dp_run(struct dp *p, enum dp_mode mode, const int32_t *lb, int32_t ub)
{
    const struct lsets *ls = p->ls;
    int32_t n = ls->n;
    size_t *best = NULL;
    int32_t *par_s = NULL, *par_p = NULL;
    size_t nt = (size_t)p->n_t + 1;
    remat_status st = REMAT_OK;

    p->n_pts = 0;
    best = core_calloc(p->al, nt, sizeof *best);
    par_s = core_calloc(p->al, nt, sizeof *par_s);
    par_p = core_calloc(p->al, nt, sizeof *par_p);
    if (!best || !par_s || !par_p)
        goto nomem;
    p->fr_at[0] = 0;
    p->fr_n[0] = 1;
    if (!push_point(p, (struct point){0, -1, -1, 0}))
        goto nomem;
    for (size_t q = 0; q < nt; q++)
        best[q] = SIZE_MAX; /* and again after each set, over the range it touched */
    for (int32_t j = 1; j < n; j++) {
        struct point one = {INT32_MAX, -1, -1, SIZE_MAX};
        bool any = false;
        int32_t t_lo = INT32_MAX, t_hi = -1; /* the overheads this set's frontier touched */

        report(p, j, n);
        for (int32_t i = first_start(p, j); i < j; i++) {
            const struct point *fp;
            int32_t dt, first, cnt = p->fr_n[i];
            size_t dm, c;

            if (cnt == 0 || !pair_block(p, i, j, &dt, &dm, &c))
                continue;
            fp = p->pts + p->fr_at[i];
            if (mode != DP_FRONTIER) {
                struct point q = {fp[0].t + dt, i, 0, fp[0].m + dm};

                if (fp[0].m + c > p->budget ||
                    (p->room && (p->room[j] < 0 || (p->room[j] != INT64_MAX &&
                                                    fp[0].m + dm > (size_t)p->room[j]))))
                    continue; /* breaks the budget, or can no longer reach V */
                if (mode == DP_MIN_M ? (q.m < one.m || (q.m == one.m && q.t < one.t))
                                     : (q.t < one.t || (q.t == one.t && q.m < one.m)))
                    one = q;
                continue;
            }
            if ((first = first_feasible(p, fp, cnt, j, c, dm)) < 0)
                continue;
            for (int32_t k = first; k < cnt; k++) {
                int32_t t = fp[k].t + dt;
                size_t m = fp[k].m + dm;

                if (t >= p->n_t)
                    t = p->n_t - 1;
                if (lb && (lb[j] == INT32_MAX || t + lb[j] > ub))
                    break; /* t only grows along the frontier */
                if (m < best[t]) {
                    best[t] = m;
                    par_s[t] = i;
                    par_p[t] = k;
                    any = true;
                    t_lo = t < t_lo ? t : t_lo;
                    t_hi = t > t_hi ? t : t_hi;
                }
            }
        }
        p->fr_at[j] = (int32_t)p->n_pts;
        p->fr_n[j] = 0;
        if (mode != DP_FRONTIER) {
            if (one.parent_set >= 0) {
                if (!push_point(p, one))
                    goto nomem;
                p->fr_n[j] = 1;
            }
            continue;
        }
        if (!any)
            continue;
        {
            size_t run = SIZE_MAX;

            for (int32_t t = t_lo; t <= t_hi; t++) {
                if (best[t] < run) {
                    run = best[t];
                    if (!push_point(p, (struct point){t, par_s[t], par_p[t], run}))
                        goto nomem;
                    p->fr_n[j]++;
                }
                best[t] = SIZE_MAX;
            }
        }
        if (p->n_pts > (size_t)INT32_MAX / 2) {
            st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the DP's frontiers grew past 10^9 points");
            goto out;
        }
    }
    goto out;
nomem:
    st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
out:
    core_free(p->al, best, sizeof *best * nt);
    core_free(p->al, par_s, sizeof *par_s * nt);
    core_free(p->al, par_p, sizeof *par_p * nt);
    return st;
}

static remat_status dp_init(struct dp *p, const struct dag *d, const struct lsets *ls,
                            size_t budget)
{
    double total = 0;
    bool integral = true;

    memset(p, 0, sizeof *p);
    p->d = d;
    p->ls = ls;
    p->al = d->al;
    p->budget = budget;
    for (int32_t v = 0; v < d->n; v++) {
        total += d->t[v];
        integral = integral && d->t[v] == floor(d->t[v]) && d->t[v] >= 0;
    }
    if (integral && total <= 64.0 * d->n) {
        p->scale = 1;
    } else {
        p->scale = total > 0 ? 8.0 * d->n / total : 1;
        total = 8.0 * d->n;
    }
    p->n_t = (int32_t)(total * p->scale) + 2;
    if (p->scale != 1)
        p->n_t = (int32_t)total + 2;
    p->fr_at = core_calloc(p->al, (size_t)ls->n, sizeof *p->fr_at);
    p->fr_n = core_calloc(p->al, (size_t)ls->n, sizeof *p->fr_n);
    if (!p->fr_at || !p->fr_n) {
        core_free(p->al, p->fr_at, sizeof *p->fr_at * (size_t)ls->n);
        core_free(p->al, p->fr_n, sizeof *p->fr_n * (size_t)ls->n);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    }
    return REMAT_OK;
}

static void dp_fini(struct dp *p)
{
    core_free(p->al, p->fr_at, sizeof *p->fr_at * (size_t)p->ls->n);
    core_free(p->al, p->fr_n, sizeof *p->fr_n * (size_t)p->ls->n);
    core_free(p->al, p->pts, sizeof *p->pts * p->cap_pts);
}

remat_status kusumoto_min_budget(const struct dag *d, const struct lsets *ls,
                                 const struct dp_progress *pg, size_t *out)
{
    struct dp p;
    size_t lo = 0, top = 2 * ls->m[ls->n - 1] + 1, hi = 1;
    remat_status st;

    /* The single block {V} needs 2 M(V): feasible at top. Invariant: lo infeasible.
     * Doubling from the largest node's bytes first: a run at budget B costs about the
     * sets within B/2 bytes of each set (first_start), so the small budgets are cheap
     * and the bisection then runs below twice the least budget. */
    for (int32_t v = 0; v < d->n; v++)
        hi = d->m[v] > hi ? d->m[v] : hi;
    if ((st = dp_init(&p, d, ls, top)))
        return st;
    p.pg = pg;
    p.stage = "DP: the least budget, one doubling step";
    for (; hi < top; hi = hi > top / 2 ? top : 2 * hi) {
        p.budget = hi;
        if ((st = dp_run(&p, DP_MIN_M, NULL, 0)))
            break;
        if (p.fr_n[ls->n - 1] > 0)
            break;
        lo = hi;
    }
    if (hi > top)
        hi = top;
    p.stage = "DP: the least budget, one bisection step";
    while (!st && hi - lo > 1 && (double)(hi - lo) > 1e-5 * (double)hi) {
        size_t mid = lo + (hi - lo) / 2;

        p.budget = mid;
        if ((st = dp_run(&p, DP_MIN_M, NULL, 0)))
            break;
        if (p.fr_n[ls->n - 1] > 0)
            hi = mid;
        else
            lo = mid;
    }
    dp_fini(&p);
    *out = hi;
    return st;
}

remat_status kusumoto_plan(const struct dag *d, const struct lsets *ls, bool memory_centric,
                           size_t budget, const struct dp_progress *pg, struct chain *c,
                           struct dp_result *res)
{
    struct dp p;
    int32_t set, pt, nb = 0, last = ls->n - 1;
    int32_t *sets = NULL, *lb = NULL;
    int64_t *room = NULL;
    double recomputed = 0, total = 0;
    remat_status st;

    memset(res, 0, sizeof *res);
    if ((st = dp_init(&p, d, ls, budget)))
        return st;
    p.pg = pg;
    p.stage = "DP: least memory";
    /* Memory-centric: the least cached memory at V (then the least overhead), which is
     * the last point of V's Pareto frontier; one state per set finds it exactly, since
     * transitions add the same (t, m) to every state and allow the smaller m first. */
    if ((st = dp_run(&p, DP_MIN_M, NULL, 0)))
        goto out;
    if (p.fr_n[last] == 0)
        goto out; /* infeasible */
    if (!memory_centric) {
        /* Time-centric: bound the least overhead from above by two feasible chains (the
         * memory-centric one and the greedy least-(t, m) one) and from below per set, so
         * the frontier keeps only states that can still reach the optimum. */
        int32_t ub = p.pts[p.fr_at[last]].t;

        lb = core_calloc(p.al, (size_t)ls->n, sizeof *lb);
        room = core_calloc(p.al, (size_t)ls->n, sizeof *room);
        if (!lb || !room) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
            goto out;
        }
        dp_bounds(&p, lb, room);
        p.room = room;
        /* the greedy least-(t, m) chain among the states that can still reach V: it
         * always does, so ub is never left at the memory-centric chain's */
        p.stage = "DP: least time";
        if ((st = dp_run(&p, DP_MIN_T, NULL, 0)))
            goto out;
        if (p.fr_n[last] > 0 && p.pts[p.fr_at[last]].t < ub)
            ub = p.pts[p.fr_at[last]].t;
        /* Deepening: a small bound prunes hard, and a run costs about its bound; so the
         * bound grows fourfold while that stays under a quarter of ub, then jumps to ub,
         * where a chain surely fits (at most 4/3 of one run at ub when the optimum is
         * near ub, as at the least budget; little when it is far below). Every bound at
         * or above the optimum gives the same chain: the states kept are a prefix in t
         * of each unbounded frontier. */
        p.stage = "DP: the time-memory frontier, one deepening";
        for (int32_t guess = lb[0] > 0 ? lb[0] : 1;; guess = guess > ub / 16 ? ub : 4 * guess) {
            if ((st = dp_run(&p, DP_FRONTIER, lb, guess < ub ? guess : ub)))
                goto out;
            if (p.fr_n[last] > 0)
                break;
            REMAT_ASSERT(guess < ub);
        }
    }
    res->feasible = true;
    sets = core_calloc(p.al, (size_t)ls->n + 1, sizeof *sets);
    if (!sets) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
        goto out;
    }
    /* Walk back from V: TC takes the least t, MC the least m. */
    set = last;
    pt = 0; /* MC: the single least-(m, t) state; TC: the frontier's least t */
    while (set > 0) {
        const struct point *q = &p.pts[p.fr_at[set] + pt];

        sets[nb++] = set;
        set = q->parent_set;
        pt = q->parent_pt;
    }
    /* sets[nb-1] is L1, sets[0] is V. Blocks, kept nodes and the bound. */
    c->n_blocks = nb;
    {
        size_t cached = 0, sim_m = 0;
        double sim_t = 0;
        int32_t prev = 0;

        for (int32_t b = 1; b <= nb; b++) {
            int32_t j = sets[nb - b];
            const uint64_t *bp = lsets_bits(ls, prev), *bj = lsets_bits(ls, j);
            size_t bound = cached + 2 * (ls->m[j] - ls->m[prev]) + ls->m_out[j];

            if (ls->sim) {
                double t;
                size_t dm, cb;

                dp_sim_pair(ls->sim, prev, j, &t, &dm, &cb);
                bound = sim_m + cb;
                sim_m += dm;
                sim_t += t;
            }
            res->bound = bound > res->bound ? bound : res->bound;
            for (int32_t v = 0; v < d->n; v++)
                if (bits_has(bj, v) && !bits_has(bp, v)) {
                    c->block[v] = b;
                    c->kept[v] = false;
                }
            for (int32_t k = ls->bd_at[j]; k < ls->bd_at[j + 1]; k++) {
                int32_t v = ls->bd[k];

                if (!bits_has(bp, v)) {
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
    dp_fini(&p);
    return st;
}

int64_t kusumoto_pairs(const struct lsets *ls, size_t budget)
{
    struct dp p = {.ls = ls, .budget = budget};
    int64_t n = 0;

    for (int32_t j = 1; j < ls->n; j++)
        n += j - first_start(&p, j);
    return n;
}
