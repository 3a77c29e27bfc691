/*
 * planners.h - the planners besides the lower-set DP, behind one entry point, and
 * helpers they share.
 */
#ifndef REMAT_PLANNERS_H
#define REMAT_PLANNERS_H

#include "plan/dag.h"

/* Chen's √n and greedy, SuperNeurons' cost-aware recomputation, the optimal MILP.
 * *budget is the activation budget B (SIZE_MAX / 4: none); strategies that search a
 * budget write it back. */
remat_status planner_other(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                           remat_schedule **out, remat_plan_info *info);
/* The simulated activation peak of a schedule (SIZE_MAX when it is invalid). */
remat_status planner_sim_peak(const remat_tgraph *tg, const remat_schedule *s, size_t *peak);

#endif
