/*
 * superneurons.c - cost-aware recomputation (Wang et al., PPoPP 2018) and the lowering
 * from a set of kept nodes that it uses.
 *
 * Outputs of the expensive ops (convolutions, linear layers) are checkpoints kept from
 * the forward pass; everything else is freed after its forward use and recomputed from
 * the nearest checkpoints when a backward step reads it. Speed-centric keeps each
 * recomputed value until its last reader (one recomputation per segment);
 * memory-centric recomputes before every backward step that needs it, so only one
 * step's worth is alive. When speed-centric does not fit the budget, the kept outputs go
 * to the host tier between their forward and backward uses (offload.c), as far as
 * needed; when that does not fit either, memory-centric with offload.
 */
#include "plan/planners.h"
#include "sched/schedule.h"

#include <string.h>

struct keep_lower {
    const remat_tgraph *tg;
    const struct dag *d;
    const bool *kept;
    bool *cached;        /* recomputed and still available */
    int32_t *stack;
    remat_schedule *s;
};

/* Makes node v available: kept, cached, or recomputed after its inputs (iteratively,
 * inputs first). */
static remat_status ensure(struct keep_lower *k, int32_t v0)
{
    const struct dag *d = k->d;
    int32_t top = 0;
    remat_status st;

    if (k->kept[v0] || k->cached[v0])
        return REMAT_OK;
    k->stack[top++] = v0;
    while (top > 0) {
        int32_t v = k->stack[top - 1];
        bool ready = true;

        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++) {
            int32_t u = d->pred[e];

            if (!k->kept[u] && !k->cached[u]) {
                k->stack[top++] = u; /* each node is pushed at most once per pending path */
                ready = false;
                break;
            }
        }
        if (!ready)
            continue;
        top--;
        if (k->cached[v])
            continue;
        if ((st = schedule_push(k->s, REMAT_STEP_FWD, d->op[v])))
            return st;
        k->cached[v] = true;
    }
    return REMAT_OK;
}

remat_status lower_keep(const remat_tgraph *tg, const struct dag *d, const bool *kept,
                        bool memory_centric, remat_schedule **out)
{
    const remat_allocator *a = tgraph_al(tg);
    struct keep_lower k = {tg, d, kept, NULL, NULL, NULL};
    remat_status st;

    *out = NULL;
    k.cached = core_calloc(a, (size_t)d->n + 1, sizeof *k.cached);
    k.stack = core_calloc(a, (size_t)d->n + 1, sizeof *k.stack);
    if (!k.cached || !k.stack) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory lowering a plan");
        goto out;
    }
    if ((st = schedule_new(a, &k.s)))
        goto out;
    for (int32_t v = 0; v < d->n; v++)
        if ((st = schedule_push(k.s, REMAT_STEP_FWD, d->op[v])))
            goto out;
    for (int32_t v = d->n; v-- > 0;) {
        const struct top *op = &tg->ops[d->op[v]];

        if (!op->has_bwd)
            continue;
        for (int32_t i = 0; i < op->n_saved; i++) {
            int32_t p = tg->values[tg->values[op->saved[i]].buf].producer;

            if (p >= 0 && (st = ensure(&k, d->node[p])))
                goto out;
        }
        if ((st = schedule_push(k.s, REMAT_STEP_BWD, d->op[v])))
            goto out;
        if (memory_centric)
            memset(k.cached, 0, sizeof *k.cached * (size_t)d->n);
    }
    st = schedule_liveness(tg, k.s, out);
out:
    remat_schedule_free(k.s);
    core_free(a, k.cached, sizeof *k.cached * ((size_t)d->n + 1));
    core_free(a, k.stack, sizeof *k.stack * ((size_t)d->n + 1));
    return st;
}

bool planner_is_checkpoint(const struct top *op)
{
    if (op->type >= 0)
        return op->type == REMAT_OP_CONV2D || op->type == REMAT_OP_CONV_TRANSPOSE2D ||
               op->type == REMAT_OP_LINEAR;
    return !strncmp(op->type_name, "Conv", 4) || !strncmp(op->type_name, "Deconv", 6) ||
           !strncmp(op->type_name, "Linear", 6);
}

remat_status plan_superneurons(const remat_tgraph *tg, const struct dag *d,
                               const remat_plan_opts *o, size_t budget, remat_schedule **out,
                               remat_plan_info *info)
{
    const remat_allocator *a = tgraph_al(tg);
    bool *kept = core_calloc(a, (size_t)d->n + 1, sizeof *kept);
    bool *cand = core_calloc(a, (size_t)tg->n_values + 1, sizeof *cand);
    size_t best_peak = SIZE_MAX;
    remat_plan_info pi = {0};
    remat_status st = REMAT_OK;

    *out = NULL;
    if (!kept || !cand) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    for (int32_t v = 0; v < d->n; v++) {
        const struct top *op = &tg->ops[d->op[v]];

        kept[v] = planner_is_checkpoint(op);
        for (int32_t j = 0; j < op->n_out && kept[v]; j++)
            cand[tg->values[op->out[j]].buf] = true;
    }
    /* speed-centric, speed-centric with offload, memory-centric with offload */
    for (int k = 0; k < 3 && best_peak > budget; k++) {
        remat_schedule *s = NULL, *so = NULL;
        size_t peak, target = budget;

        if (k == 1 && o->no_offload)
            continue;
        if ((st = lower_keep(tg, d, kept, k == 2, &s)) || (st = planner_finish(tg, &s))) {
            remat_schedule_free(s);
            break;
        }
        if (k > 0 && !o->no_offload) {
            st = plan_offload(tg, s, cand, &target, o->bandwidth, o->flops, o->copy_slowdown,
                              &so, &pi);
            remat_schedule_free(s);
            s = so;
            if (st)
                break;
        }
        if ((st = planner_sim_peak(tg, s, &peak))) {
            remat_schedule_free(s);
            break;
        }
        if (peak < best_peak) {
            remat_schedule_free(*out);
            *out = s;
            best_peak = peak;
            if (info) {
                info->n_offloaded = k ? pi.n_offloaded : 0;
                info->offloaded_bytes = k ? pi.offloaded_bytes : 0;
            }
        } else {
            remat_schedule_free(s);
        }
    }
out:
    if (st) {
        remat_schedule_free(*out);
        *out = NULL;
    }
    core_free(a, kept, sizeof *kept * ((size_t)d->n + 1));
    core_free(a, cand, sizeof *cand * ((size_t)tg->n_values + 1));
    return st;
}
