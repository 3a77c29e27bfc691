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
 * overhead rounded to the nearest unit. (Units by the family's size instead, fewer on
 * hybrid's thinned family, made GPT-2-1000's sweep 1.65 -> 0.18 s but one ResNet-2498
 * plan 0.6% slower: not taken.)
 *
 * Work: O(sum over pairs L ⊂ L' of (words + |∂(L')| + frontier)). Pairs whose block
 * alone breaks the budget (2 M(L'\L) > B) are skipped before the subset test, and the
 * time-centric frontier keeps only states that can still reach V within the budget
 * and the bound on the optimum (dp_bounds; the search over bounds, with the Lagrangian
 * bound where the frontiers grow, is dp_least.c). Runs at budgets below one whose
 * usable pairs are kept (dp_pairs.h) read those instead of working them out.
 */
#include "plan/kusumoto.h"
#include "plan/dp_run.h"
#include "plan/dp_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    double tb = 0;

    *dm = 0;
    for (int32_t k = ls->bd_at[j]; k < ls->bd_at[j + 1]; k++) {
        int32_t v = ls->bd[k];

        if (!lsets_has(ls, i, v)) {
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
    *c = dp_authors_charge(ls, i, j);
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

/* The usable pairs ending at L_j, i ascending: from the kept ones when there are (those
 * kept at a larger budget filtered to this one), otherwise worked out (pair_block);
 * with p->co, only those it allows (the coarse sets before the fine reach of L_j, when
 * L_j is coarse, then that reach). With live, only those from sets that hold states,
 * tested before the pair's work. */
struct pair_it {
    int32_t j, i;      /* the next i to try (no pairs kept) */
    int32_t ck, s;     /* with p->co: the next coarse set's place, and the fine reach */
    size_t e, end;     /* the next kept pair and the row's end */
    bool live;         /* only pairs from sets that hold states (a run's fr_n) */
};

static void pairs_begin(const struct dp *p, int32_t j, bool live, struct pair_it *it)
{
    int32_t fs = first_start(p, j);

    it->j = j;
    it->live = live;
    it->i = it->s = fs;
    it->ck = 0;
    if (p->co) {
        it->s = it->i = p->co->near[j] > fs ? p->co->near[j] : fs;
        it->ck = p->co->is[j] && fs < it->s ? dp_coarse_from(p->co, fs) : p->co->k;
    }
    if (p->pc.p) {
        size_t lo = p->pc.at[j], hi = p->pc.end[j];

        it->end = hi;
        while (lo < hi) { /* the first kept pair with i >= fs */
            size_t mid = lo + (hi - lo) / 2;

            if (p->pc.p[mid].i < fs)
                lo = mid + 1;
            else
                hi = mid;
        }
        it->e = lo;
    }
}

/* (always inlined: called once a pair, in the DP's inner loops) */
static inline __attribute__((always_inline)) bool
pairs_next(const struct dp *p, struct pair_it *it, int32_t *i, int32_t *dt, size_t *dm, size_t *c)
{
    if (p->pc.p) {
        while (it->e < it->end) {
            size_t e = it->e++;
            const struct dp_pair *q = &p->pc.p[e];
            size_t qc;

            if (it->live && p->fr_n[q->i] == 0)
                continue;
            qc = dp_pair_charge(&p->pc, p->ls, e, it->j);
            if (qc <= p->budget && p->ls->m[it->j] - p->ls->m[q->i] <= window(p)) {
                *i = q->i;
                *dt = q->dt;
                *dm = q->dm;
                *c = qc;
                return true;
            }
        }
        return false;
    }
    if (p->co) /* the coarse sets before the fine reach */
        while (it->ck < p->co->k && p->co->idx[it->ck] < it->s) {
            int32_t k = p->co->idx[it->ck++];

            if ((!it->live || p->fr_n[k] > 0) && pair_block(p, k, it->j, dt, dm, c)) {
                *i = k;
                return true;
            }
        }
    for (int32_t k = it->i; k < it->j; k++) /* locals, kept in registers */
        if ((!it->live || p->fr_n[k] > 0) && pair_block(p, k, it->j, dt, dm, c)) {
            *i = k;
            it->i = k + 1;
            return true;
        }
    it->i = it->j;
    return false;
}

/* The pairs into L_j a run at p's budget visits (kusumoto_pairs, restricted by p->co). */
static int64_t row_pairs(const struct dp *p, int32_t j)
{
    struct pair_it it;
    int64_t n;

    pairs_begin(p, j, false, &it);
    n = j - it.s;
    if (p->co && it.ck < p->co->k)
        n += dp_coarse_from(p->co, it.s) - it.ck;
    return n;
}

int64_t dp_run_pairs(const struct dp *p)
{
    int64_t n = 0;

    for (int32_t j = 1; j < p->ls->n; j++)
        n += row_pairs(p, j);
    return n;
}

/* One part of dp_keep_pairs: the usable pairs of rows j0 .. j1 - 1, written from
 * pc->p[base] on (at most the pairs those rows visit). */
struct keep_part {
    const struct dp *p;
    struct dp_pairs *pc;
    int32_t j0[2], j1[2];
    size_t base[2], n[2]; /* where each part starts, and the pairs it kept */
};

static void keep_job(void *ctx, int k)
{
    struct keep_part *w = ctx;
    struct dp_pairs *pc = w->pc;
    size_t n = w->base[k];

    for (int32_t j = w->j0[k]; j < w->j1[k]; j++) {
        struct pair_it it;
        struct dp_pair q;
        size_t c;

        pc->at[j] = n;
        for (pairs_begin(w->p, j, false, &it); pairs_next(w->p, &it, &q.i, &q.dt, &q.dm, &c);) {
            if (pc->c)
                pc->c[n] = c;
            pc->p[n++] = q;
        }
        pc->end[j] = n;
    }
    w->n[k] = n - w->base[k];
}

/* Keeps the usable pairs of the run's budget (runs at smaller budgets filter them), when
 * they number at most DP_PAIRS_MAX; false only when out of memory. On two cores (the
 * authors' model: the simulator's writes its scratch) the rows are split where half the
 * pairs visited lie on each side, the second half written from its first row's bound on
 * (the room between the halves is never touched). GPT-2 of 1,000 layers at its least
 * budget: 5.9 10^6 pairs. */
bool dp_keep_pairs(struct dp *p)
{
    int64_t n = dp_run_pairs(p), half = 0;
    struct dp_pairs pc = {0};
    struct keep_part w = {p, &pc, {1, 1}, {p->ls->n, p->ls->n}, {0, 0}, {0, 0}};
    int parts = core_par_threads_with(p->al) > 1 && !p->ls->sim ? 2 : 1;

    if (p->pc.p || n > DP_PAIRS_MAX)
        return true;
    if (!dp_pairs_init(&pc, p->al, p->ls->n, (size_t)n, p->ls->sim != NULL))
        return false;
    if (parts == 2) {
        int32_t j = 1;

        while (j < p->ls->n && half < n / 2)
            half += row_pairs(p, j++);
        w.j1[0] = w.j0[1] = j;
        w.base[1] = (size_t)half;
    }
    core_par_run(parts, parts, keep_job, &w);
    pc.n = w.n[0] + w.n[1];
    pc.budget = p->budget;
    p->pc = pc;
    return true;
}

size_t dp_chain_need(const struct dp *p)
{
    size_t need = 0;

    for (int32_t j = p->ls->n - 1; j > 0 && p->fr_n[j] > 0;) {
        const struct point *q = &p->pts[p->fr_at[j]];
        int32_t i = q->parent_set, dt;
        size_t dm, c, at, dmv;

        if (!pair_block(p, i, j, &dt, &dm, &c))
            return p->budget; /* not the run's chain (cannot happen): no tighter */
        /* the state carried in plus the block's charge, and the window it must fit
         * (B/2 or B: pair_block) */
        at = p->pts[p->fr_at[i]].m + c;
        dmv = p->ls->m[j] - p->ls->m[i];
        at = p->ls->sim ? (dmv > at ? dmv : at) : (2 * dmv > at ? 2 * dmv : at);
        need = at > need ? at : need;
        j = i;
    }
    return need;
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
void dp_bounds(const struct dp *p, int32_t *lb, int64_t *room)
{
    const struct lsets *ls = p->ls;
    int64_t B = p->budget > (size_t)INT64_MAX ? INT64_MAX : (int64_t)p->budget;
    struct pair_it it;

    for (int32_t i = 0; i < ls->n; i++) {
        lb[i] = i == ls->n - 1 ? 0 : INT32_MAX;
        room[i] = i == ls->n - 1 ? INT64_MAX : -1;
    }
    /* each L_j's own bounds are final once every pair from it is seen: the pairs are
     * taken by their end, last first */
    for (int32_t j = ls->n - 1; j > 0; j--) {
        int32_t i, dt;
        size_t dm, c;

        if (room[j] < 0)
            continue;
        for (pairs_begin(p, j, false, &it); pairs_next(p, &it, &i, &dt, &dm, &c);) {
            int64_t r = B - (int64_t)c;

            if (lb[j] != INT32_MAX && dt + lb[j] < lb[i])
                lb[i] = dt + lb[j];
            if (room[j] != INT64_MAX)
                r = room[j] - (int64_t)dm < r ? room[j] - (int64_t)dm : r;
            room[i] = r > room[i] ? r : room[i];
        }
    }
}

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

/* A run's candidates at the set under way: the least (m, t) or (t, m) state (one), or
 * the least m per overhead t (best, with its parent) over the overheads t_lo .. t_hi. */
struct dp_acc {
    enum dp_mode mode;
    const int32_t *lb;
    int32_t ub;
    size_t *best;
    int32_t *par_s, *par_p;
    struct point one;
    bool any;
    int32_t t_lo, t_hi;
};

/* DP_MIN_M and DP_MIN_T: the one state of L_i carried to L_j by the block (dt, dm, c)
 * against the set's best so far, one. */
static inline void relax_one(const struct dp *p, enum dp_mode mode, struct point *one, int32_t i,
                             int32_t j, int32_t dt, size_t dm, size_t c)
{
    const struct point *fp = p->pts + p->fr_at[i];
    struct point q = {fp[0].t + dt, i, 0, fp[0].m + dm};

    if (fp[0].m + c > p->budget ||
        (p->room && (p->room[j] < 0 || (p->room[j] != INT64_MAX &&
                                        fp[0].m + dm > (size_t)p->room[j]))))
        return; /* breaks the budget, or can no longer reach V */
    if (mode == DP_MIN_M ? (q.m < one->m || (q.m == one->m && q.t < one->t))
                         : (q.t < one->t || (q.t == one->t && q.m < one->m)))
        *one = q;
}

/* The points k0 .. k1 - 1 of L_i's frontier fp carried to L_j into a's candidates, those
 * whose key D t + m is at most lag_lim when lag; false once one passes lb (t only grows
 * along the frontier: so do all the rest). */
static inline bool relax_run(const struct dp *p, struct dp_acc *a, int32_t i, int32_t j,
                             int32_t dt, size_t dm, const struct point *fp, int32_t k0,
                             int32_t k1, bool lag, int64_t lag_lim)
{
    for (int32_t k = k0; k < k1; k++) {
        int32_t t = fp[k].t + dt;
        size_t m = fp[k].m + dm;

        if (t >= p->n_t)
            t = p->n_t - 1;
        if (a->lb && (a->lb[j] == INT32_MAX || t + a->lb[j] > a->ub))
            return false;
        if (lag && p->lag_d * (int64_t)fp[k].t + (int64_t)fp[k].m > lag_lim)
            continue; /* no chain through it ends within ub (dp_lagrange.c) */
        if (m < a->best[t]) {
            a->best[t] = m;
            a->par_s[t] = i;
            a->par_p[t] = k;
            a->any = true;
            a->t_lo = t < a->t_lo ? t : a->t_lo;
            a->t_hi = t > a->t_hi ? t : a->t_hi;
        }
    }
    return true;
}

/* DP_FRONTIER: the states of L_i carried to L_j by the block (dt, dm, c) into a's
 * candidates. With the Lagrangian bound, 8 points at a time (the 8 or 64 of pts whose
 * least key passes the limit are passed over at once: most are, where the bound prunes
 * at all, ResNet-2498 at its halfway budget 94% of the visits). */
static inline void relax(const struct dp *p, struct dp_acc *a, int32_t i, int32_t j, int32_t dt,
                         size_t dm, size_t c)
{
    const struct point *fp = p->pts + p->fr_at[i];
    size_t base = (size_t)p->fr_at[i];
    int32_t first, cnt = p->fr_n[i];
    bool lag = p->lag && j < p->ls->n - 1;
    int64_t lim = 0;

    if ((first = first_feasible(p, fp, cnt, j, c, dm)) < 0)
        return;
    if (!lag) {
        relax_run(p, a, i, j, dt, dm, fp, first, cnt, false, 0);
        return;
    }
    if (p->lag[j] == INT64_MAX)
        return; /* no chain goes on from L_j */
    /* D t' + m' + H_D(L_j) <= D ub + B, t' and m' at L_j */
    lim = p->lag_d * (int64_t)a->ub + (int64_t)p->budget - p->lag[j] - (int64_t)dm -
          p->lag_d * (int64_t)dt;
    for (int32_t k = first; k < cnt;) {
        size_t g = base + (size_t)k;
        int32_t end8 = (int32_t)((g | 7) + 1 - base);

        if (p->kmin[1][g >> 6] > lim)
            k = (int32_t)((g | 63) + 1 - base);
        else if (p->kmin[0][g >> 3] > lim)
            k = end8;
        else if (!relax_run(p, a, i, j, dt, dm, fp, k, end8 < cnt ? end8 : cnt, true, lim))
            return;
        else
            k = end8;
    }
}

/* Notes the key D t + m of the last point pushed in the least keys of its 8 and 64. */
static bool note_key(struct dp *p)
{
    size_t g = p->n_pts - 1;
    const struct point *q = &p->pts[g];
    int64_t key = p->lag_d * (int64_t)q->t + (int64_t)q->m;

    if ((g >> 3) >= p->cap_kmin) {
        size_t cap = p->cap_kmin ? 2 * p->cap_kmin : 1024;
        int64_t *k0 = core_realloc(p->al, p->kmin[0], sizeof *k0 * p->cap_kmin,
                                   sizeof *k0 * cap);
        int64_t *k1;

        if (!k0)
            return false;
        p->kmin[0] = k0;
        k1 = core_realloc(p->al, p->kmin[1], sizeof *k1 * (p->cap_kmin / 8 + 1),
                          sizeof *k1 * (cap / 8 + 1));
        if (!k1)
            return false;
        p->kmin[1] = k1;
        p->cap_kmin = cap;
    }
    for (int l = 0; l < 2; l++) {
        size_t b = g >> (3 * l + 3);

        if ((g & (((size_t)8 << 3 * l) - 1)) == 0 || p->kmin[l][b] > key)
            p->kmin[l][b] = key;
    }
    return true;
}

/* Set j's states from a's candidates (the frontier: each t whose m is below every
 * smaller t's), resetting best over the range touched. */
static bool close_set(struct dp *p, struct dp_acc *a, int32_t j)
{
    size_t run = SIZE_MAX;

    p->fr_at[j] = (int32_t)p->n_pts;
    p->fr_n[j] = 0;
    if (a->mode != DP_FRONTIER) {
        if (a->one.parent_set < 0)
            return true;
        p->fr_n[j] = 1;
        return push_point(p, a->one);
    }
    for (int32_t t = a->t_lo; a->any && t <= a->t_hi; t++) {
        if (a->best[t] < run) {
            run = a->best[t];
            if (!push_point(p, (struct point){t, a->par_s[t], a->par_p[t], run}) ||
                (p->lag && !note_key(p)))
                return false;
            p->fr_n[j]++;
        }
        a->best[t] = SIZE_MAX;
    }
    return true;
}

/*
 * Runs the DP; the states of V are those of the last set. In DP_FRONTIER mode, with lb
 * and ub given, states that cannot lead to an overhead of at most ub are dropped (and,
 * with p->lag, those whose Lagrangian bound passes ub).
 */
remat_status dp_run(struct dp *p, enum dp_mode mode, const int32_t *lb, int32_t ub)
{
    int32_t n = p->ls->n;
    size_t nt = (size_t)p->n_t + 1;
    struct dp_acc a = {mode, lb, ub, NULL, NULL, NULL, {0}, false, 0, 0};
    remat_status st = REMAT_OK;

    p->n_pts = 0;
    p->capped = false;
    a.best = core_alloc(p->al, nt * sizeof *a.best);
    a.par_s = core_calloc(p->al, nt, sizeof *a.par_s);
    a.par_p = core_calloc(p->al, nt, sizeof *a.par_p);
    if (!a.best || !a.par_s || !a.par_p)
        goto nomem;
    p->fr_at[0] = 0;
    p->fr_n[0] = 1;
    if (!push_point(p, (struct point){0, -1, -1, 0}) || (p->lag && !note_key(p)))
        goto nomem;
    for (size_t q = 0; q < nt; q++)
        a.best[q] = SIZE_MAX; /* and again after each set, over the range it touched */
    for (int32_t j = 1; j < n; j++) {
        struct pair_it it;
        int32_t i, dt;
        size_t dm, c;

        report(p, j, n);
        a.one = (struct point){INT32_MAX, -1, -1, SIZE_MAX};
        a.any = false;
        a.t_lo = INT32_MAX;
        a.t_hi = -1;
        if (mode == DP_FRONTIER)
            for (pairs_begin(p, j, true, &it); pairs_next(p, &it, &i, &dt, &dm, &c);)
                relax(p, &a, i, j, dt, dm, c);
        else if (p->pc.p || p->co)
            for (pairs_begin(p, j, true, &it); pairs_next(p, &it, &i, &dt, &dm, &c);)
                relax_one(p, mode, &a.one, i, j, dt, dm, c);
        else /* the same, without the iterator's cost (the bisection's first runs) */
            for (i = first_start(p, j); i < j; i++)
                if (p->fr_n[i] > 0 && pair_block(p, i, j, &dt, &dm, &c))
                    relax_one(p, mode, &a.one, i, j, dt, dm, c);
        if (!close_set(p, &a, j))
            goto nomem;
        if (p->max_pts && p->n_pts > p->max_pts) {
            p->capped = true; /* the caller tries otherwise */
            p->fr_n[n - 1] = 0;
            break;
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
    core_free(p->al, a.best, sizeof *a.best * nt);
    core_free(p->al, a.par_s, sizeof *a.par_s * nt);
    core_free(p->al, a.par_p, sizeof *a.par_p * nt);
    return st;
}

remat_status dp_init(struct dp *p, const struct dag *d, const struct lsets *ls,
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

void dp_fini(struct dp *p)
{
    core_free(p->al, p->fr_at, sizeof *p->fr_at * (size_t)p->ls->n);
    core_free(p->al, p->fr_n, sizeof *p->fr_n * (size_t)p->ls->n);
    core_free(p->al, p->pts, sizeof *p->pts * p->cap_pts);
    core_free(p->al, p->kmin[0], sizeof *p->kmin[0] * p->cap_kmin);
    core_free(p->al, p->kmin[1], sizeof *p->kmin[1] * (p->cap_kmin ? p->cap_kmin / 8 + 1 : 0));
    dp_pairs_fini(&p->pc);
}

int64_t kusumoto_pairs(const struct lsets *ls, size_t budget)
{
    struct dp p = {.ls = ls, .budget = budget};
    int64_t n = 0;

    for (int32_t j = 1; j < ls->n; j++)
        n += j - first_start(&p, j);
    return n;
}
