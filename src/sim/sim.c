/*
 * sim.c - the simulator: walks a schedule with the memory model of docs/design.md,
 * checks that it is valid and measures it.
 *
 * Valid: every buffer a step reads is live; a FWD does not recompute a value that is
 * still live; a BWD runs once, after every backward that adds into the gradient it
 * reads, and does not add into a gradient freed after an earlier contribution; every
 * op with a backward has run it by the end; a FREE frees a live buffer.
 * The `none` replay of a dump in its file's record order (not a topological order) is
 * checked leniently: reads of buffers not yet live and gradient order are not errors.
 *
 * Memory: after each step, the live bytes of plan-controlled buffers (forward values
 * and gradients of op outputs); the peak is their maximum. Work: O(steps x touches).
 */
#include "plan/schedule.h"

#include <string.h>

struct sim {
    const remat_tgraph *tg;
    bool strict;
    bool *live;
    int32_t *fwd_count, *bwd_count, *grad_done;
    int32_t *reads, *makes;
    size_t cur, peak, peak_step;
    double recompute;
};

static remat_status bad(size_t i, const char *what)
{
    return REMAT_FAIL(REMAT_ERR_INVALID, "step %zu: %s", i, what);
}

static remat_status bad_buf(const struct sim *m, size_t i, const char *what, int32_t buf)
{
    char tmp[256];

    return REMAT_FAIL(REMAT_ERR_INVALID, "step %zu: %s '%s'", i, what,
                      remat_buffer_name(m->tg, buf, tmp, sizeof tmp));
}

static remat_status step_fwd(struct sim *m, size_t i, int32_t o)
{
    const remat_tgraph *tg = m->tg;
    int32_t nr, nm;

    step_touch(tg, (remat_step){REMAT_STEP_FWD, o}, m->reads, &nr, m->makes, &nm);
    for (int32_t j = 0; j < nr; j++)
        if (m->strict && !m->live[m->reads[j]])
            return bad_buf(m, i, "FWD reads a value that is not live:", m->reads[j]);
    for (int32_t j = 0; j < nm; j++) {
        int32_t b = m->makes[j];

        if (m->live[b]) {
            if (m->strict)
                return bad_buf(m, i, "FWD recomputes a value that is still live:", b);
            continue;
        }
        m->live[b] = true;
        m->cur += tgraph_buf_bytes(tg, b);
    }
    if (m->fwd_count[o]++ > 0)
        for (int32_t j = 0; j < tg->ops[o].n_out; j++)
            m->recompute += tg->values[tg->ops[o].out[j]].cost;
    return REMAT_OK;
}

static remat_status step_bwd(struct sim *m, size_t i, int32_t o)
{
    const remat_tgraph *tg = m->tg;
    const struct top *op = &tg->ops[o];
    int32_t nr, nm;

    if (!op->has_bwd)
        return bad(i, "BWD of an op that has no backward");
    if (m->bwd_count[o]++ > 0)
        return bad(i, "BWD runs a second time");
    if (m->strict && m->fwd_count[o] == 0)
        return bad(i, "BWD before the op's forward");
    step_touch(tg, (remat_step){REMAT_STEP_BWD, o}, m->reads, &nr, m->makes, &nm);
    for (int32_t j = 0; j < nr; j++)
        if (m->strict && !m->live[m->reads[j]])
            return bad_buf(m, i, "BWD reads a buffer that is not live:", m->reads[j]);
    for (int32_t j = 0; m->strict && j < op->n_gin; j++) {
        int32_t b = tg->values[op->gin[j]].buf;

        if (m->grad_done[b] != tg->values[b].n_grad_writers)
            return bad_buf(m, i, "BWD reads a gradient before all its contributions:",
                       tgraph_gbuf(tg, op->gin[j]));
    }
    for (int32_t j = 0; j < nm; j++) {
        int32_t b = m->makes[j];

        if (!m->live[b]) {
            /* Earlier contributions would be lost: the gradient was freed too early. */
            if (m->strict && m->grad_done[b - tg->n_values] > 0)
                return bad_buf(m, i, "BWD adds into a gradient freed before all its "
                               "contributions:", b);
            m->live[b] = true;
            m->cur += tgraph_buf_bytes(tg, b);
        }
    }
    for (int32_t j = 0; j < op->n_gout; j++)
        m->grad_done[tg->values[op->gout[j]].buf]++;
    return REMAT_OK;
}

static remat_status sim_walk(const remat_tgraph *tg, const remat_schedule *s, size_t *live,
                             remat_sim_result *res)
{
    const remat_allocator *a = tgraph_al(tg);
    size_t nb = 2 * (size_t)tg->n_values, no = (size_t)tg->n_ops, mt;
    struct sim m = {.tg = tg, .strict = !s->file_order};
    remat_status st = REMAT_OK;

    mt = (size_t)step_max_touch(tg);
    m.live = core_calloc(a, nb, sizeof *m.live);
    m.fwd_count = core_calloc(a, no, sizeof *m.fwd_count);
    m.bwd_count = core_calloc(a, no, sizeof *m.bwd_count);
    m.grad_done = core_calloc(a, nb, sizeof *m.grad_done);
    m.reads = core_calloc(a, mt, sizeof *m.reads);
    m.makes = core_calloc(a, mt, sizeof *m.makes);
    if (!m.live || !m.fwd_count || !m.bwd_count || !m.grad_done || !m.reads || !m.makes) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the simulator");
        goto out;
    }
    for (size_t i = 0; i < s->n && !st; i++) {
        remat_step step = s->steps[i];

        switch (step.kind) {
        case REMAT_STEP_FWD:
        case REMAT_STEP_BWD:
            if (step.id < 0 || step.id >= tg->n_ops) {
                st = bad(i, "bad op id");
                break;
            }
            st = step.kind == REMAT_STEP_FWD ? step_fwd(&m, i, step.id)
                                             : step_bwd(&m, i, step.id);
            break;
        case REMAT_STEP_FREE:
            if (step.id < 0 || (size_t)step.id >= nb) {
                st = bad(i, "bad buffer id");
            } else if (!m.live[step.id]) {
                st = bad_buf(&m, i, "FREE of a buffer that is not live:", step.id);
            } else {
                m.live[step.id] = false;
                m.cur -= tgraph_buf_bytes(tg, step.id);
            }
            break;
        default:
            st = bad(i, "bad step kind (offload is not supported yet)");
        }
        if (m.cur > m.peak) {
            m.peak = m.cur;
            m.peak_step = i;
        }
        if (live)
            live[i] = m.cur;
    }
    for (int32_t o = 0; o < tg->n_ops && !st; o++) {
        if (tg->ops[o].has_bwd && m.bwd_count[o] != 1)
            st = REMAT_FAIL(REMAT_ERR_INVALID, "the schedule never runs the backward of op "
                            "%d (%s)", o, tg->ops[o].type_name);
        else if (m.fwd_count[o] == 0)
            st = REMAT_FAIL(REMAT_ERR_INVALID, "the schedule never runs the forward of op "
                            "%d (%s)", o, tg->ops[o].type_name);
    }
    if (res) {
        res->activation_peak_bytes = m.peak;
        res->peak_step = m.peak_step;
        res->n_steps = s->n;
        res->overhead = m.recompute;
    }
out:
    core_free(a, m.live, nb * sizeof *m.live);
    core_free(a, m.fwd_count, no * sizeof *m.fwd_count);
    core_free(a, m.bwd_count, no * sizeof *m.bwd_count);
    core_free(a, m.grad_done, nb * sizeof *m.grad_done);
    core_free(a, m.reads, mt * sizeof *m.reads);
    core_free(a, m.makes, mt * sizeof *m.makes);
    return st;
}

/* The largest bytes one step must hold at once: its reads and what it allocates. */
static remat_status lower_bound(const remat_tgraph *tg, size_t *out)
{
    const remat_allocator *a = tgraph_al(tg);
    size_t mt = (size_t)step_max_touch(tg), best = 0;
    int32_t *reads = core_calloc(a, mt, sizeof *reads), *makes = core_calloc(a, mt, sizeof *makes);
    int32_t nr, nm;

    if (!reads || !makes) {
        core_free(a, reads, mt * sizeof *reads);
        core_free(a, makes, mt * sizeof *makes);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the simulator");
    }
    for (int32_t o = 0; o < tg->n_ops; o++)
        for (int k = 0; k < 2; k++) {
            remat_step st = {k ? REMAT_STEP_BWD : REMAT_STEP_FWD, o};
            size_t need = 0;

            if (k && !tg->ops[o].has_bwd)
                continue;
            step_touch(tg, st, reads, &nr, makes, &nm);
            for (int32_t j = 0; j < nr; j++)
                need += tgraph_buf_bytes(tg, reads[j]);
            for (int32_t j = 0; j < nm; j++) {
                bool dup = false;

                for (int32_t q = 0; q < nr; q++)
                    dup = dup || reads[q] == makes[j];
                need += dup ? 0 : tgraph_buf_bytes(tg, makes[j]);
            }
            best = need > best ? need : best;
        }
    core_free(a, reads, mt * sizeof *reads);
    core_free(a, makes, mt * sizeof *makes);
    *out = best;
    return REMAT_OK;
}

remat_status remat_sim_run(const remat_tgraph *tg, const remat_schedule *s,
                           remat_sim_result *res)
{
    double fwd_cost = 0;
    remat_status st;

    if (!tg || !s || !res)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_sim_run needs a graph, a schedule and a result");
    memset(res, 0, sizeof *res);
    if ((st = sim_walk(tg, s, NULL, res)) || (st = lower_bound(tg, &res->lower_bound_bytes)))
        return st;
    for (int32_t v = 0; v < tg->n_values; v++) {
        const struct tvalue *tv = &tg->values[v];

        res->naive_all_bytes += 2 * tv->bytes;
        if (!tgraph_is_planned(tg, v))
            continue;
        fwd_cost += tv->cost;
        if (tv->buf == v)
            res->naive_bytes += 2 * tv->bytes; /* 2 M(V): each value with its gradient */
    }
    res->overhead = fwd_cost > 0 ? res->overhead / fwd_cost : 0;
    res->resident_bytes = tg->resident_bytes;
    return REMAT_OK;
}

remat_status remat_sim_timeline(const remat_tgraph *tg, const remat_schedule *s, size_t *live,
                                size_t n)
{
    if (!tg || !s || !live || n < s->n)
        return REMAT_FAIL(REMAT_ERR_ARG, "the timeline needs room for %zu steps",
                          s ? s->n : 0);
    return sim_walk(tg, s, live, NULL);
}
