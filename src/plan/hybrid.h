/*
 * hybrid.h - what hybrid.c gives beside plan_hybrid (planners.h), for its tests.
 */
#ifndef REMAT_HYBRID_H
#define REMAT_HYBRID_H

#include "plan/dag.h"
#include "plan/planners.h"

/*
 * The forward steps lower_keep(tg, d, kept, memory-centric) runs (*runs), counted as it
 * runs them without lowering: the forward, then before each backward every node its
 * saved values need that is neither kept nor recomputed since the last backward. The
 * count stops once it passes cap (then *runs > cap, not the whole count).
 */
remat_status hybrid_mc_runs(const remat_tgraph *tg, const struct dag *d, const bool *kept,
                            int64_t cap, int64_t *runs);

/* Whether hybrid's sweep (hybrid.c) restricts its runs above the least budget from coarse
 * to fine past DP_SIM_MAX_NODES nodes (the default, true) or visits every pair (false:
 * the flat sweep it is judged by, for tests). Not thread-safe: set it before planning. */
void hybrid_set_sweep_coarse(bool on);
/* Whether those runs end with a chain proven within a tenth of a percent of the optimum's
 * overhead where the DP's beam finds one (the default, true; kusumoto_plan_within) or
 * always with the optimum (false, for tests). Not thread-safe either. */
void hybrid_set_sweep_near(bool on);

#endif
