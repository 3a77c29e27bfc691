/*
 * others.c - dispatch to the planners besides the lower-set DP.
 */
#include "plan/planners.h"

/* The optimal MILP on the planners' graph; with budget min, a budget of 0 makes it
 * plan at the least peak of its heuristic solutions. */
static remat_status run_optimal(const remat_tgraph *tg, const remat_plan_opts *o,
                                size_t budget, remat_schedule **out, remat_plan_info *info)
{
    struct dag d;
    remat_status st;

    if ((st = dag_build(tg, &d)))
        return st;
    st = plan_optimal(tg, &d, o->budget_min ? 0 : budget,
                      o->time_limit > 0 ? o->time_limit : 60, out, info);
    dag_fini(&d);
    return st;
}

remat_status planner_other(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                           remat_schedule **out, remat_plan_info *info)
{
    if (o->strategy == REMAT_STRATEGY_OPTIMAL)
        return run_optimal(tg, o, *budget, out, info);
    (void)tg;
    (void)budget;
    (void)out;
    (void)info;
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "strategy %s is not built yet",
                      remat_strategy_name(o->strategy));
}
