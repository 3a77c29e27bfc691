/*
 * none.c - the `none` strategy, the baseline every reduction is measured against:
 * forward in op order, backward in reverse, nothing recomputed; the liveness pass then
 * frees each buffer after its last use, so what stays is what the backward reads.
 */
#include "sched/schedule.h"

remat_status remat_plan_none(const remat_tgraph *tg, remat_schedule **out)
{
    remat_schedule *s = NULL;
    remat_status st;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the schedule");
    *out = NULL;
    if (!tg)
        return REMAT_FAIL(REMAT_ERR_ARG, "no training graph");
    if ((st = schedule_new(tgraph_al(tg), &s)))
        return st;
    s->file_order = tg->file_order; /* a dump's records, replayed as the file gives them */
    for (int32_t o = 0; o < tg->n_ops; o++)
        if ((st = schedule_push(s, REMAT_STEP_FWD, o)))
            goto out;
    for (int32_t o = tg->n_ops; o-- > 0;)
        if (tg->ops[o].has_bwd && (st = schedule_push(s, REMAT_STEP_BWD, o)))
            goto out;
    st = schedule_liveness(tg, s, out);
out:
    remat_schedule_free(s);
    return st;
}
