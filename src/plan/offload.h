/*
 * offload.h - what offload.c gives beside plan_offload (planners.h): the peak of the
 * schedule it would write (the least peak a schedule reaches with the host tier, as
 * hybrid asks for each of its bases), without writing it.
 */
#ifndef REMAT_OFFLOAD_H
#define REMAT_OFFLOAD_H

#include "plan/planners.h"

/*
 * The simulated activation peak of plan_offload's schedule for s with every value a
 * candidate, at target (0: the least peak s reaches with the host tier), worked out from
 * the pass's own timeline: the same figure as simulating that schedule, at the cost of
 * the pass alone. *peak is SIZE_MAX on an error (an invalid s among them).
 */
remat_status plan_offload_peak(const remat_tgraph *tg, const remat_schedule *s, size_t target,
                               double bandwidth, double flops, double slowdown, size_t *peak);

#endif
