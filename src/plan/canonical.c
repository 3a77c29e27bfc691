/*
 * canonical.c - the gradient-order pass: the same gradient bits from every plan.
 */
#include "plan/algos.h"

#include <stdlib.h>
#include <string.h>

/*
 * Gradients with three or more writers: float addition is not associative, so the
 * order in which their writers' backwards run decides the bits. This pass delays
 * backward steps (never advances any step) so that the writers of each such gradient
 * run in one canonical order, descending op id, in every plan. That order is a valid
 * backward order on its own (op ids are topological), so the delays always end.
 */
remat_status plan_canonical_grads(const remat_tgraph *tg, const remat_schedule *in,
                                  remat_schedule **out)
{
    const remat_allocator *a = tgraph_al(tg);
    size_t nv = (size_t)tg->n_values, n_pend = 0;
    int32_t *done = core_calloc(a, nv + 1, sizeof *done);     /* writers run, per value */
    int32_t *pend = core_calloc(a, in->n + 1, sizeof *pend);  /* deferred BWD op ids */
    int32_t *wr_at = core_calloc(a, nv + 2, sizeof *wr_at);   /* writers of each value, */
    int32_t *wr = NULL;                                       /* descending op id (CSR) */
    size_t n_wr = 0;
    remat_schedule *s = NULL, *tmp = NULL;
    remat_status st;

    *out = NULL;
    for (int32_t o = 0; o < tg->n_ops; o++)
        n_wr += tg->ops[o].has_bwd ? (size_t)tg->ops[o].n_gout : 0;
    wr = core_calloc(a, n_wr + 1, sizeof *wr);
    if (!done || !pend || !wr_at || !wr) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory ordering gradients");
        goto out;
    }
    for (int32_t v = 0; v < tg->n_values; v++)
        wr_at[v + 1] = wr_at[v] + tg->values[v].n_grad_writers;
    for (int32_t o = tg->n_ops; o-- > 0;) /* descending op id */
        for (int32_t j = 0; tg->ops[o].has_bwd && j < tg->ops[o].n_gout; j++) {
            int32_t b = tg->values[tg->ops[o].gout[j]].buf;

            wr[wr_at[b] + done[b]++] = o;
        }
    memset(done, 0, sizeof *done * (nv + 1));
    if ((st = schedule_new(a, &tmp)))
        goto out;
    tmp->file_order = in->file_order;
    for (size_t i = 0; i <= in->n; i++) {
        bool progress = true;

        if (i < in->n) {
            remat_step step = in->steps[i];

            if (step.kind == REMAT_STEP_FREE)
                continue;
            if (step.kind != REMAT_STEP_BWD) {
                if ((st = schedule_push(tmp, step.kind, step.id)))
                    goto out;
                continue;
            }
            pend[n_pend++] = step.id;
        }
        /* Emit every deferred backward that may run now, repeatedly, in their order. */
        while (progress) {
            progress = false;
            for (size_t k = 0; k < n_pend; k++) {
                const struct top *op = &tg->ops[pend[k]];
                bool ready = true;

                for (int32_t j = 0; ready && j < op->n_gin; j++) {
                    const struct tvalue *v = &tg->values[tg->values[op->gin[j]].buf];

                    ready = done[tg->values[op->gin[j]].buf] == v->n_grad_writers;
                }
                /* A writer of a 3+-writer gradient waits for every writer with a larger
                 * op id: it must be the next of the descending list. */
                for (int32_t j = 0; ready && j < op->n_gout; j++) {
                    int32_t b = tg->values[op->gout[j]].buf;

                    if (tg->values[b].n_grad_writers >= 3)
                        ready = wr[wr_at[b] + done[b]] == pend[k];
                }
                if (!ready)
                    continue;
                if ((st = schedule_push(tmp, REMAT_STEP_BWD, pend[k])))
                    goto out;
                for (int32_t j = 0; j < op->n_gout; j++)
                    done[tg->values[op->gout[j]].buf]++;
                memmove(pend + k, pend + k + 1, sizeof *pend * (n_pend - k - 1));
                n_pend--;
                progress = true;
                break;
            }
        }
    }
    REMAT_ASSERT(n_pend == 0);
    st = schedule_liveness(tg, tmp, &s);
    if (!st)
        *out = s;
out:
    remat_schedule_free(tmp);
    core_free(a, done, sizeof *done * (nv + 1));
    core_free(a, pend, sizeof *pend * (in->n + 1));
    core_free(a, wr_at, sizeof *wr_at * (nv + 2));
    core_free(a, wr, sizeof *wr * (n_wr + 1));
    return st;
}
