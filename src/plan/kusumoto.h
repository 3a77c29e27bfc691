/*
 * kusumoto.h - the lower-set DP (exact and approximate, time- and memory-centric).
 */
#ifndef REMAT_KUSUMOTO_H
#define REMAT_KUSUMOTO_H

#include "plan/dp_pairs.h"

struct dp_result {
    size_t bound;        /* the DP's peak bound: max over blocks of M(i) */
    double overhead;     /* the chain's recomputed T (exact, undiscretized) / T(V) */
    bool feasible;
    bool coarse;         /* its pairs were restricted from coarse to fine (dp_coarse.h) */
    bool near;           /* kusumoto_plan_within: the beam's chain, not the optimum */
    int64_t units;       /* the overhead as the DP counts it: each block's rounded to
                            whole units (kusumoto.c) */
    int32_t n_sets;      /* the sets the chain was chosen over: ls's, or fewer where the
                            two-stage search narrowed them (kusumoto_plan_pairs) */
    bool kept_all;       /* plan_dp: `none`'s plan in the chain's place (no blocks) */
};

/* Where the DP reports how far a pass is (remat_plan_opts.progress; fn may be NULL),
 * and, with stop not NULL, hears from another thread that its plan is no longer wanted:
 * once *stop is set, a run ends at its next set, and the pairs being kept at their next
 * row, the plan failing (dp_stopped). */
struct dp_progress {
    void (*fn)(void *ud, const char *stage, double done);
    void *ud;
    const int *stop;
};

static inline bool dp_stopped(const struct dp_progress *pg)
{
    return pg && pg->stop && __atomic_load_n(pg->stop, __ATOMIC_RELAXED);
}

/* By default kusumoto_plan restricts the pairs from coarse to fine (dp_coarse.h) on
 * families of more than DP_COARSE_MIN_SETS sets when the pairs within the budget's
 * window (kusumoto_pairs) pass DP_COARSE_PAIRS_TC (time-centric: each pair is visited
 * with a frontier in every run of the search) or DP_COARSE_PAIRS_MC (memory-centric:
 * one state a set) and number at least DP_COARSE_GAIN times the restricted ones: a wide
 * window over a large family. Near the least budget the window is narrow (GPT-2 of
 * 1,000 layers: 2.4 times the restricted pairs), and there the restriction loses plans. */
#define DP_COARSE_PAIRS_TC ((int64_t)1 << 22)
#define DP_COARSE_PAIRS_MC ((int64_t)1 << 24)
#define DP_COARSE_GAIN 8
#define DP_COARSE_MIN_SETS 256

/* The chain at activation budget B; c->block and c->kept have d->n entries. coarse_at:
 * the pairs past which the DP restricts them from coarse to fine (0: the default above;
 * INT64_MAX: never, the flat DP); where the restricted pairs find no chain, all of them
 * are tried. */
remat_status kusumoto_plan(const struct dag *d, const struct lsets *ls, bool memory_centric,
                           size_t budget, int64_t coarse_at, const struct dp_progress *pg,
                           struct chain *c, struct dp_result *res);
/* The same, reading the usable pairs from pairs (kept by kusumoto_min_budget_pairs over
 * ls at a budget at or above B; NULL or none kept: worked out) where every pair is
 * visited (not restricted from coarse to fine). The same chain: the kept pairs filtered
 * to B are those a run at B works out, in the same order. Time-centric with within >
 * 0: as kusumoto_plan_within (a chain proven within that fraction of the optimum's
 * overhead where the beam finds one); 0: the optimum. Pairs kept over ls below B are
 * replaced, in their memory, by those a time-centric plan keeps at B (past 2^20 pairs,
 * kusumoto_plan.c), which serve every budget up to B; where pairs holds none, those it
 * keeps go there too (pairs must be initialized, and is the caller's to free). */
remat_status kusumoto_plan_pairs(const struct dag *d, const struct lsets *ls,
                                 bool memory_centric, size_t budget, int64_t coarse_at,
                                 const struct dp_progress *pg, struct dp_pairs *pairs,
                                 double within, struct chain *c, struct dp_result *res);
/* Time-centric, as kusumoto_plan, but ending with a chain whose overhead is proven
 * within `within` (a fraction, in the DP's overhead units) of the optimum's where a beam
 * finds one after the Lagrangian bound (dp_least.c, near_run; res->near set): for plans
 * that only start a search (hybrid's bases). Elsewhere the optimum, as kusumoto_plan. */
remat_status kusumoto_plan_within(const struct dag *d, const struct lsets *ls, size_t budget,
                                  int64_t coarse_at, double within, struct chain *c,
                                  struct dp_result *res);
/* The pairs of lower sets a run at budget B visits (its work: those whose block stays
 * within the window of B). */
int64_t kusumoto_pairs(const struct lsets *ls, size_t budget);
/* What the simulator's model (dp_sim.h) would walk to work out every pair a run over
 * ls's sets visits at budget B, whether or not ls has the model: the sum, over the pairs
 * i < j with M(L_j) - M(L_i) <= B, of |L_j| - |L_i| (the block's nodes where L_i is a
 * subset; the other pairs, which are not walked, count by their difference in size).
 * O(sets). INT64_MAX when ls is not sorted by M(L). */
int64_t kusumoto_sim_work(const struct lsets *ls, size_t budget);
/* The smallest B at which the DP is feasible: a chain's need, proven least by a run a
 * byte below it (or, should the pins run out, within 1e-5 relative; dp_min_budget.c). */
remat_status kusumoto_min_budget(const struct dag *d, const struct lsets *ls,
                                 const struct dp_progress *pg, size_t *out);
/* The same, handing the pairs its search kept to *pairs (the caller's, dp_pairs_fini;
 * pairs->p NULL when it kept none): those usable at a budget at or above *out. ub: what
 * kusumoto_min_budget_bound found, or 0 (then worked out here). */
remat_status kusumoto_min_budget_pairs(const struct dag *d, const struct lsets *ls,
                                       const struct dp_progress *pg, size_t *out,
                                       struct dp_pairs *pairs, size_t ub);
/* An upper bound on ls's least budget at a fraction of the search's cost: the least
 * budget of the family thinned to a quarter of its sets (whose chains are ls's), which
 * the search starts from; *ub 0 where ls is not thinned (at most 2,048 sets, the
 * simulator's model, or not sorted by M(L)). */
remat_status kusumoto_min_budget_bound(const struct dag *d, const struct lsets *ls, size_t *ub);
/* Tests only (not thread-safe): the most states the time-centric DP's first try may
 * hold before the search keeps the pairs and bounds the states by the Lagrangian bound
 * (dp_pairs.h); 0 restores the default (4 a set on average). The chain is the same
 * either way, only the work differs. */
void kusumoto_set_trial(size_t max_pts);
/* Tests only (not thread-safe): the first step of the search's deepening from the
 * Lagrangian bound, in the DP's overhead units; 0 restores the default (dp_least.c).
 * The chain is the same either way. */
void kusumoto_set_first_step(int64_t units);
/* Tests only (not thread-safe): whether the time-centric search bounds the states by
 * further Lagrangian multipliers too (default on; dp_least.c). The chain is the same
 * either way. */
void kusumoto_set_second_bound(bool on);
/* Tests only (not thread-safe): whether the time-centric search's runs lower their bound
 * by finishing their states along the Lagrangian passes' chains (default on;
 * kusumoto.c). The chain is the same either way. */
void kusumoto_set_guides(bool on);
/* Tests and benchmarks only (not thread-safe): the least work (states read) of a set
 * that a frontier run shares with a helper thread (kusumoto.c, core_team); 0 restores
 * the default, -1 keeps every run on one core. The states are the same either way. */
void kusumoto_set_split(int64_t min_work);
/* Tests only (not thread-safe): the pairs past which a time-centric plan asked for a
 * chain within a fraction of the optimum (kusumoto_plan_pairs) searches in two stages
 * (kusumoto_plan.c); 0 restores the default (2^22), -1 never. */
void kusumoto_set_refine(int64_t min_pairs);
/* Tests and benchmarks only (not thread-safe): whether a beam run over kept pairs works
 * as a pipeline on two threads (default on; dp_pipe.c). The states are the same either
 * way. */
void kusumoto_set_pipeline(bool on);

#endif
