/*
 * dp_iter.h - the lower-set DP's usable pairs (kusumoto.c): a pair's block quantities
 * and the iterator over the pairs ending at a set, shared by the runs (kusumoto.c) and
 * what prepares them (dp_bounds.c). Private to src/plan.
 */
#ifndef REMAT_DP_ITER_H
#define REMAT_DP_ITER_H

#include "plan/dp_run.h"
#include "plan/dp_sim.h"

static inline double block_t(const struct dp *p, int32_t i, int32_t j, size_t *dm, size_t *dmv)
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
static inline int32_t quantize(const struct dp *p, double t)
{
    double x = t * p->scale + 0.5;

    return x < 0 ? 0 : (int32_t)x;
}

/* Block quantities of the pair (i, j); false when the block alone breaks the budget
 * or L_i is not a subset of L_j. one: a pair alone (a chain's), not one of a run's
 * (dp_sim_pair_one). */
static inline bool pair_block_at(const struct dp *p, int32_t i, int32_t j, bool one, int32_t *dt,
                                 size_t *dm, size_t *c)
{
    const struct lsets *ls = p->ls;
    size_t dmv = ls->m[j] - ls->m[i];

    if (ls->size[i] >= ls->size[j] || dmv > window(p) || !lsets_subset(ls, i, j))
        return false;
    if (ls->sim) {
        double t;

        (one ? dp_sim_pair_one : dp_sim_pair)(ls->sim, i, j, &t, dm, c);
        *dt = quantize(p, t);
        return *c <= p->budget;
    }
    *dt = quantize(p, block_t(p, i, j, dm, &dmv));
    *c = dp_authors_charge(ls, i, j);
    return *c <= p->budget;
}

static inline bool pair_block(const struct dp *p, int32_t i, int32_t j, int32_t *dt, size_t *dm,
                              size_t *c)
{
    return pair_block_at(p, i, j, false, dt, dm, c);
}

/* The first set a block ending at L_j can start from: with the sets sorted by M(L)
 * (lsets.by_m), those with M(L_j) - M(L_i) <= B/2 are a contiguous run before j and
 * the rest break the budget alone (pair_block); otherwise 0. */
static inline int32_t first_start(const struct dp *p, int32_t j)
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

static inline void pairs_begin_from(const struct dp *p, int32_t j, int32_t from, bool live,
                                    struct pair_it *it);

static inline void pairs_begin(const struct dp *p, int32_t j, bool live, struct pair_it *it)
{
    pairs_begin_from(p, j, 0, live, it);
}

/* The same from L_from on (with kept pairs; 0: from the first start). */
static inline void pairs_begin_from(const struct dp *p, int32_t j, int32_t from, bool live,
                                    struct pair_it *it)
{
    int32_t fs = first_start(p, j);

    fs = from > fs ? from : fs;
    it->j = j;
    it->e = it->end = 0;
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

#endif
