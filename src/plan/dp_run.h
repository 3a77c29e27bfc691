/*
 * dp_run.h - the lower-set DP's state and runs (kusumoto.c), shared with its
 * time-centric search (dp_least.c). Private to src/plan.
 */
#ifndef REMAT_DP_RUN_H
#define REMAT_DP_RUN_H

#include "plan/dp_coarse.h"
#include "plan/dp_pairs.h"
#include "plan/kusumoto.h"

/* A state: overhead t, cached memory m, and the state it came from (its index in pts,
 * -1 for ∅'s; dp_point_set gives its set). 16 bytes: the frontier runs stream through
 * the states' t and m, and took 24 with the parent's set and place apart. */
struct point {
    size_t m;
    int32_t t;
    int32_t parent;
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
    int64_t *kmin[2];            /* with lag: the least D t + m of each 8 (64) points of
                                    pts, so that relax skips them at once */
    size_t cap_kmin;             /* entries of kmin[0] (kmin[1]: an eighth) */
    const remat_allocator *al;
    const struct dp_progress *pg;
    const char *stage;           /* the pass under way, for pg */
    const int64_t *room;         /* per set (may be NULL): the most cached memory from
                                    which V can still be reached; -1 none (dp_bounds) */
    struct dp_pairs pc;          /* the usable pairs, kept (pc.p NULL: none kept) */
    struct dp_pairs *rec;        /* NULL, or a DP_MIN_M run without kept pairs writes
                                    there the usable pairs of each set from its first
                                    set holding a state on (dp_record_pairs) */
    const struct dp_coarse *co;  /* NULL, or the pairs restricted from coarse to fine */
    const int64_t *lag;          /* per set (may be NULL): the peak bound P_D (dp_pairs.h) */
    int64_t lag_d;               /* its D, bytes per unit of overhead */
    const int64_t *lagx[DP_LAG_EXTRA]; /* with lag: P at further multipliers lag_dx,
                                    which every state passes too (dp_least.c); n_lagx */
    int64_t lag_dx[DP_LAG_EXTRA];
    int n_lagx;
    struct dp_guides gd;         /* with lag: chains to finish states with (gd.n of them) */
    int32_t run_ub;              /* the last run's bound as given */
    int32_t ub_found;            /* a frontier run's least overhead of a state finished
                                    by a guide (INT32_MAX: none); the run's bound drops
                                    to it */
    double within;               /* > 0: dp_least_time may end with a chain whose overhead
                                    is proven within this fraction of the optimum's */
    int32_t beam;                /* > 0: a frontier run keeps at most this many states
                                    a set (beam_trim) */
    int64_t *beam_key;           /* the beam's scratch: n_t + 1 keys */
    bool near;                   /* the last dp_least_time ended with the beam's chain */
    size_t max_pts;              /* a run stops (capped) past this many states; 0: none */
    bool capped;
    size_t n_split;              /* the last run's sets shared with a helper thread */
    int32_t n_piped, n_redone;   /* a beam run on two threads (dp_pipe.c): its sets
                                    whose pairs the helper shared, and those worked out
                                    alone after all */
};

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

/*
 * Runs the DP; the states of V are those of the last set. In DP_FRONTIER mode, with lb
 * and ub given, states that cannot lead to an overhead of at most ub are dropped (and,
 * with p->lag, those whose Lagrangian bound passes ub); with p->max_pts, the run stops
 * (p->capped) once it holds more states.
 */
remat_status dp_run(struct dp *p, enum dp_mode mode, const int32_t *lb, int32_t ub);
/* Per set, lb: the least overhead still to come, and room: the most cached memory from
 * which V can still be reached (-1: none), at p's budget. */
void dp_bounds(const struct dp *p, int32_t *lb, int64_t *room);
/* Keeps the usable pairs of p's budget in p->pc (runs at smaller budgets filter them)
 * when they number at most DP_PAIRS_MAX; false only when out of memory. */
bool dp_keep_pairs(struct dp *p);
/* The same in old's memory where it holds pairs over the same sets and model (the
 * memory it touched reused; old emptied, its pairs dropped, even when out of memory);
 * otherwise as dp_keep_pairs, old untouched. */
bool dp_keep_pairs_in(struct dp *p, struct dp_pairs *old);
/* Room in rec for the pairs a DP_MIN_M run at p's budget records (p->rec: every pair
 * from a set of L_j's row that holds a state on, usable at the budget), when they
 * number at most DP_PAIRS_MAX (false otherwise, or out of memory). Runs at p's budget
 * or below need no other pairs: a set that holds a state at a budget holds one at every
 * larger one, so the first such set of a row comes no later. After the run, rec holds
 * them as dp_keep_pairs would keep them for those runs. */
bool dp_record_pairs(struct dp *p, struct dp_pairs *rec);
/* After a DP_MIN_M run that reached V: the least budget at which its chain fits (the
 * most any of its blocks needs, memory carried in included), at most p->budget. A run
 * at that budget finds a chain too, since every block of this one still fits. */
size_t dp_chain_need(const struct dp *p);
/* Time-centric, after the memory-centric run (p's states): the run whose states at V
 * hold the least overhead (dp_least.c). *lb, *room (n sets each) and *lag (DP_LAG_ROWS
 * n: P at p->lag_d, then at each of p->lag_dx) are the caller's to free. */
remat_status dp_least_time(struct dp *p, int32_t **lb, int64_t **room, int64_t **lag);
/* The same with lb and room (n sets each, the caller's) already dp_bounds' at p's budget
 * (which does not depend on the memory-centric run: kusumoto_plan.c works them out beside
 * it). */
remat_status dp_least_time_bounded(struct dp *p, int32_t *lb, int64_t *room, int64_t **lag);

/* The set whose frontier holds pts[idx], after a run that reached V (every set's fr_at
 * then ascends with the sets, and each set's points lie in its own range). */
int32_t dp_point_set(const struct dp *p, int32_t idx);

/* The pairs a run at p's budget visits (with p->co, those it allows). */
int64_t dp_run_pairs(const struct dp *p);

/* A DP over ls at budget (kusumoto.c); dp_fini frees what it and its runs hold. */
remat_status dp_init(struct dp *p, const struct dag *d, const struct lsets *ls, size_t budget);
void dp_fini(struct dp *p);

#endif
