/*
 * dp_relax.h - a frontier run's candidates at the set under way, and the states of an
 * earlier set carried to it by one pair (kusumoto.c; its runs on two cores, dp_pipe.c).
 * Private to src/plan.
 */
#ifndef REMAT_DP_RELAX_H
#define REMAT_DP_RELAX_H

#include "plan/dp_iter.h"

/* kmin[l][b] (dp_run.h), which the run's other thread may be lowering (dp_pipe.c): any
 * value read is at most the least key of the states it reads it for. */
static inline int64_t kmin_at(const struct dp *p, int l, size_t b)
{
    return __atomic_load_n(&p->kmin[l][b], __ATOMIC_RELAXED);
}

/* The first point of set i's frontier fp (cnt points, m descending) that a block to set
 * j (cost c at its peak, dm kept) leaves within the budget and able to reach V: the
 * feasible points are a suffix. -1 when j can no longer be passed through. */
static inline int32_t first_feasible(const struct dp *p, const struct point *fp, int32_t cnt,
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

/* A run's candidates at the set under way: the least (m, t) or (t, m) state (one), or
 * the least m per overhead t (best, with its parent) over the overheads t_lo .. t_hi. */
struct dp_acc {
    enum dp_mode mode;
    const int32_t *lb;
    int32_t ub;
    size_t *best;
    int32_t *par;      /* per t: the candidate's parent state (its index in pts) */
    struct point one;
    bool any;
    int32_t t_lo, t_hi;
    int32_t win_lo, win_hi; /* DP_FRONTIER: only candidates with win_lo <= t < win_hi */
};

/* DP_MIN_M and DP_MIN_T: the one state of L_i carried to L_j by the block (dt, dm, c)
 * against the set's best so far, one. */
static inline void relax_one(const struct dp *p, enum dp_mode mode, struct point *one, int32_t i,
                             int32_t j, int32_t dt, size_t dm, size_t c)
{
    const struct point *fp = p->pts + p->fr_at[i];
    struct point q = {fp[0].m + dm, fp[0].t + dt, p->fr_at[i]};

    if (fp[0].m + c > p->budget ||
        (p->room && (p->room[j] < 0 || (p->room[j] != INT64_MAX &&
                                        fp[0].m + dm > (size_t)p->room[j]))))
        return; /* breaks the budget, or can no longer reach V */
    if (mode == DP_MIN_M ? (q.m < one->m || (q.m == one->m && q.t < one->t))
                         : (q.t < one->t || (q.t == one->t && q.m < one->m)))
        *one = q;
}

/* The Lagrangian tests' limits on a state (t, m) of L_i carried to L_j: D t + m at most
 * lim[0], and at each further multiplier Dx[e] (dp_least.c), Dx[e] t + m at most
 * lim[1 + e]. */
struct lag_lim {
    int64_t lim[DP_LAG_ROWS];
};

/* The points k0 .. k1 - 1 of L_i's frontier fp carried to L_j into a's candidates, those
 * within ll's limits when lag (the first nx further multipliers' too). The caller has cut
 * the points past the bound ub - lb (relax); with clamp, overheads past the last unit are
 * counted there. */
static inline __attribute__((always_inline)) void
relax_run(const struct dp *p, struct dp_acc *a, int32_t dt, size_t dm, const struct point *fp,
          int32_t k0, int32_t k1, bool lag, int nx, struct lag_lim ll, bool clamp)
{
    size_t *best = a->best;
    int32_t *par = a->par, base = (int32_t)(fp - p->pts), last = p->n_t - 1;
    int64_t D = p->lag_d, D1 = p->lag_dx[0], D2 = p->lag_dx[1];

    for (int32_t k = k0; k < k1; k++) {
        int32_t t = fp[k].t + dt;
        size_t m = fp[k].m + dm;

        if (clamp && t > last)
            t = last;
        if (lag && D * (int64_t)fp[k].t + (int64_t)fp[k].m > ll.lim[0])
            continue; /* no chain through it ends within ub (dp_pairs.h) */
        if (nx > 0 && D1 * (int64_t)fp[k].t + (int64_t)fp[k].m > ll.lim[1])
            continue;
        if (nx > 1 && D2 * (int64_t)fp[k].t + (int64_t)fp[k].m > ll.lim[2])
            continue;
        if (m < best[t]) {
            best[t] = m;
            par[t] = base + k;
            a->any = true;
            a->t_lo = t < a->t_lo ? t : a->t_lo;
            a->t_hi = t > a->t_hi ? t : a->t_hi;
        }
    }
}

/* relax_run with clamp and the further multipliers' count constants in each call, so
 * that the loop has no test it does not need */
static inline __attribute__((always_inline)) void
relax_range(const struct dp *p, struct dp_acc *a, int32_t dt, size_t dm, const struct point *fp,
            int32_t k0, int32_t k1, bool lag, struct lag_lim ll, bool clamp)
{
    int nx = lag ? p->n_lagx : 0;

    _Static_assert(DP_LAG_EXTRA == 2, "relax_run tests two further multipliers");
    if (clamp && nx == 2)
        relax_run(p, a, dt, dm, fp, k0, k1, lag, 2, ll, true);
    else if (clamp && nx == 1)
        relax_run(p, a, dt, dm, fp, k0, k1, lag, 1, ll, true);
    else if (clamp)
        relax_run(p, a, dt, dm, fp, k0, k1, lag, 0, ll, true);
    else if (nx == 2)
        relax_run(p, a, dt, dm, fp, k0, k1, lag, 2, ll, false);
    else if (nx == 1)
        relax_run(p, a, dt, dm, fp, k0, k1, lag, 1, ll, false);
    else
        relax_run(p, a, dt, dm, fp, k0, k1, lag, 0, ll, false);
}

/* The first of fp[lo .. hi) (t ascending) whose t is past t_max; hi when none. */
static inline int32_t first_past(const struct point *fp, int32_t lo, int32_t hi, int64_t t_max)
{
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;

        if (fp[mid].t <= t_max)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* DP_FRONTIER: the states of L_i carried to L_j by the block (dt, dm, c) into a's
 * candidates. The states whose t + lb(L_j) passes ub are a suffix (t grows along the
 * frontier), cut before the loop. With the Lagrangian bound, 8 points at a time (the 8
 * or 64 of pts whose least key passes the limit are passed over at once: most are,
 * where the bound prunes at all, ResNet-2498 at its halfway budget 94% of the visits). */
static inline void relax(const struct dp *p, struct dp_acc *a, int32_t i, int32_t j, int32_t dt,
                         size_t dm, size_t c)
{
    const struct point *fp = p->pts + p->fr_at[i];
    size_t base = (size_t)p->fr_at[i];
    int32_t first, cnt = p->fr_n[i];
    bool lag = p->lag && j < p->ls->n - 1, clamp = true;
    int64_t t_max = INT64_MAX; /* t' = t + dt at most t_max */
    struct lag_lim ll = {{0}};

    if ((first = first_feasible(p, fp, cnt, j, c, dm)) < 0)
        return;
    if (a->lb) {
        if (a->lb[j] == INT32_MAX)
            return;
        t_max = (int64_t)a->ub - a->lb[j];
    }
    if (a->win_hi != INT32_MAX && a->win_hi - 1 < t_max)
        t_max = a->win_hi - 1;
    if (t_max < p->n_t - 1) { /* else every t', clamped, is at most t_max */
        cnt = first_past(fp, first, cnt, t_max - dt);
        clamp = false;
    }
    if (a->win_lo > 0)
        first = first_past(fp, first, cnt, (int64_t)a->win_lo - 1 - dt);
    if (!lag) {
        relax_range(p, a, dt, dm, fp, first, cnt, false, ll, clamp);
        return;
    }
    if (p->lag[j] == INT64_MAX)
        return; /* no chain goes on from L_j (at any D) */
    /* D t' + m' + H_D(L_j) <= D ub + B, t' and m' at L_j; the same at each further D */
    ll.lim[0] = p->lag_d * ((int64_t)a->ub - dt) + (int64_t)p->budget - p->lag[j] - (int64_t)dm;
    for (int e = 0; e < p->n_lagx; e++)
        ll.lim[1 + e] = p->lag_dx[e] * ((int64_t)a->ub - dt) + (int64_t)p->budget -
                        p->lagx[e][j] - (int64_t)dm;
    for (int32_t k = first; k < cnt;) {
        size_t g = base + (size_t)k;
        int32_t end8 = (int32_t)((g | 7) + 1 - base);

        if (kmin_at(p, 1, g >> 6) > ll.lim[0]) {
            k = (int32_t)((g | 63) + 1 - base);
            continue;
        }
        if (kmin_at(p, 0, g >> 3) <= ll.lim[0])
            relax_range(p, a, dt, dm, fp, k, end8 < cnt ? end8 : cnt, true, ll, clamp);
        k = end8;
    }
}

#endif
