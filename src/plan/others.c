/*
 * others.c - dispatch to the planners besides the lower-set DP.
 */
#include "plan/planners.h"

remat_status planner_other(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                           remat_schedule **out, remat_plan_info *info)
{
    (void)tg;
    (void)budget;
    (void)out;
    (void)info;
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "strategy %s is not built yet",
                      remat_strategy_name(o->strategy));
}
