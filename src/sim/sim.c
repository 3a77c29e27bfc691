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
 * and gradients of op outputs); the peak is their maximum, each FWD or BWD counting the
 * scratch its kernel takes (the schedule's choice, algos.c) beside them during its step.
 * The timeline is the live bytes alone. Work: O(steps x touches).
 *
 * The host tier: OFFLOAD b starts copying a live forward value out (b stays on the
 * device and may still be read; FREE b must wait for the copy: WAIT b first); PREFETCH
 * b allocates b on the device again and starts copying it back from the host, and
 * nothing may read b until WAIT b, which also releases the host copy. Every copy must
 * be waited for and every host copy brought back by the end.
 *
 * Time: each FWD or BWD runs for its FLOPs on the compute clock; a copy starts when it
 * is issued or when the copy engine finishes the one before (one engine, issue order)
 * and takes bytes / bandwidth; WAIT moves the compute clock to the copy's end when it
 * is later (a stall). Compute runs at flops while the engine is idle and at
 * flops * (1 - copy_slowdown) while a copy is under way (a copy thread on the compute
 * cores; slowdown 1 stops compute until the copy ends), so the rate is piecewise
 * constant and each step's time is exact: from the compute clock the engine is busy
 * without a gap until its last copy ends (every copy issued so far started no later
 * than the clock or right after the one before), so a step's rate changes at most
 * once, at that end (tick). compute_seconds is the FWD and BWD steps' time, slowed
 * where they overlap copies; total_seconds = compute_seconds + stall_seconds.
 * Slowdown 0 gives every step FLOPs / flops.
 */
#include "sim/sim.h"

#include <string.h>

/* A buffer's host-tier state. */
enum { H_NONE = 0, H_OUT, H_HOST, H_IN };

struct sim {
    const remat_tgraph *tg;
    bool strict;
    bool *live;
    int32_t *fwd_count, *bwd_count, *grad_done;
    int32_t *reads, *makes;
    const struct touch_lists *tl; /* each op's reads and makes, on long walks; or NULL */
    unsigned char *host;      /* per buffer: H_* */
    double *copy_end;         /* per buffer: when its pending copy finishes */
    size_t cur, peak, peak_step, host_cur;
    double recompute, bw, flops, clock, engine;
    double slowdown;          /* the share of flops a copy under way takes, [0, 1] */
    remat_sim_result *res;
    struct sim_instances *rec; /* the instances, when asked for */
    size_t *open, *hopen;      /* per buffer: its open instance + 1 (0: none) */
};

/* Records the start of b's instance (dev or host) at step i. */
static remat_status rec_open(struct sim *m, bool host, int32_t b, size_t i, size_t bytes)
{
    struct sim_instances *r = m->rec;
    size_t *n = host ? &r->n_host : &r->n_dev, cap = host ? r->cap_host : r->cap_dev;

    if (*n == cap)
        return REMAT_FAIL(REMAT_ERR_INVALID, "step %zu: more allocations than the schedule "
                          "frees (a buffer is never freed)", i);
    (host ? r->host : r->dev)[*n] = (struct instance){b, i, i, bytes, 0};
    if (b >= 0)
        (host ? m->hopen : m->open)[b] = ++*n;
    else
        ++*n;
    return REMAT_OK;
}

/* Records the end of b's open instance at step i. */
static void rec_close(struct sim *m, bool host, int32_t b, size_t i)
{
    size_t *open = host ? m->hopen : m->open;

    (host ? m->rec->host : m->rec->dev)[open[b] - 1].last = i;
    open[b] = 0;
}

/* A buffer made live on the device tier at step i. */
static remat_status make_live(struct sim *m, int32_t b, size_t i)
{
    size_t bytes = tgraph_buf_bytes(m->tg, b);

    m->live[b] = true;
    m->cur += bytes;
    return m->rec ? rec_open(m, false, b, i, bytes) : REMAT_OK;
}

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

/* A step's reads and makes: from the lists where the walk has them, else step_touch's
 * answer in m->reads and m->makes. */
static void touch(struct sim *m, remat_step step, const int32_t **reads, int32_t *nr,
                  const int32_t **makes, int32_t *nm)
{
    if (m->tl) {
        touch_get(m->tl, step, reads, nr, makes, nm);
        return;
    }
    step_touch(m->tg, step, m->reads, nr, m->makes, nm);
    *reads = m->reads;
    *makes = m->makes;
}

static remat_status step_fwd(struct sim *m, size_t i, int32_t o)
{
    const remat_tgraph *tg = m->tg;
    const int32_t *reads, *makes;
    remat_status st;
    int32_t nr, nm;

    touch(m, (remat_step){REMAT_STEP_FWD, o}, &reads, &nr, &makes, &nm);
    for (int32_t j = 0; j < nr; j++) {
        if (m->strict && !m->live[reads[j]])
            return bad_buf(m, i, "FWD reads a value that is not live:", reads[j]);
        if (m->host[reads[j]] == H_IN)
            return bad_buf(m, i, "FWD reads a value before its prefetch is waited for:",
                           reads[j]);
    }
    for (int32_t j = 0; j < nm; j++) {
        int32_t b = makes[j];

        if (m->host[b] != H_NONE)
            return bad_buf(m, i, "FWD recomputes a value held on the host tier:", b);
        if (m->live[b]) {
            if (m->strict)
                return bad_buf(m, i, "FWD recomputes a value that is still live:", b);
            continue;
        }
        if ((st = make_live(m, b, i)))
            return st;
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
    const int32_t *reads, *makes;
    remat_status st;
    int32_t nr, nm;

    if (!op->has_bwd)
        return bad(i, "BWD of an op that has no backward");
    if (m->bwd_count[o]++ > 0)
        return bad(i, "BWD runs a second time");
    if (m->strict && m->fwd_count[o] == 0)
        return bad(i, "BWD before the op's forward");
    touch(m, (remat_step){REMAT_STEP_BWD, o}, &reads, &nr, &makes, &nm);
    for (int32_t j = 0; j < nr; j++) {
        if (m->strict && !m->live[reads[j]])
            return bad_buf(m, i, "BWD reads a buffer that is not live:", reads[j]);
        if (m->host[reads[j]] == H_IN)
            return bad_buf(m, i, "BWD reads a value before its prefetch is waited for:",
                           reads[j]);
    }
    for (int32_t j = 0; m->strict && j < op->n_gin; j++) {
        int32_t b = tg->values[op->gin[j]].buf;

        if (m->grad_done[b] != tg->values[b].n_grad_writers)
            return bad_buf(m, i, "BWD reads a gradient before all its contributions:",
                       tgraph_gbuf(tg, op->gin[j]));
    }
    for (int32_t j = 0; j < nm; j++) {
        int32_t b = makes[j];

        if (!m->live[b]) {
            /* Earlier contributions would be lost: the gradient was freed too early. */
            if (m->strict && m->grad_done[b - tg->n_values] > 0)
                return bad_buf(m, i, "BWD adds into a gradient freed before all its "
                               "contributions:", b);
            if ((st = make_live(m, b, i)))
                return st;
        }
    }
    for (int32_t j = 0; j < op->n_gout; j++)
        m->grad_done[tg->values[op->gout[j]].buf]++;
    return REMAT_OK;
}

/* Starts a copy of b on the engine. */
static void copy_start(struct sim *m, int32_t b)
{
    size_t bytes = tgraph_buf_bytes(m->tg, b);
    double t = (double)bytes / m->bw, start = m->clock > m->engine ? m->clock : m->engine;

    m->engine = start + t;
    m->copy_end[b] = m->engine;
    if (m->res) {
        m->res->transfer_bytes += bytes;
        m->res->transfer_seconds += t;
    }
}

static remat_status step_host(struct sim *m, size_t i, remat_step step)
{
    const remat_tgraph *tg = m->tg;
    int32_t b = step.id;

    if (b < 0 || b >= 2 * tg->n_values)
        return bad(i, "bad buffer id");
    switch (step.kind) {
    case REMAT_STEP_OFFLOAD:
        if (b >= tg->n_values || tg->values[b].producer < 0)
            return bad_buf(m, i, "OFFLOAD of a buffer that is not a forward value:", b);
        if (!m->live[b] || m->host[b] != H_NONE)
            return bad_buf(m, i, m->live[b] ? "OFFLOAD of a value already on the host tier:"
                                            : "OFFLOAD of a value that is not live:", b);
        m->host[b] = H_OUT;
        m->host_cur += tgraph_buf_bytes(tg, b);
        copy_start(m, b);
        return m->rec ? rec_open(m, true, b, i, tgraph_buf_bytes(tg, b)) : REMAT_OK;
    case REMAT_STEP_PREFETCH:
        if (m->host[b] != H_HOST || m->live[b])
            return bad_buf(m, i, m->live[b] ? "PREFETCH of a value that is still live:"
                                            : "PREFETCH of a value not held on the host tier:", b);
        m->host[b] = H_IN;
        copy_start(m, b);
        return make_live(m, b, i);
    default: /* WAIT */
        if (m->host[b] != H_OUT && m->host[b] != H_IN)
            return bad_buf(m, i, "WAIT for a buffer with no copy under way:", b);
        if (m->copy_end[b] > m->clock) {
            if (m->res)
                m->res->stall_seconds += m->copy_end[b] - m->clock;
            m->clock = m->copy_end[b];
        }
        if (m->host[b] == H_IN) {
            m->host[b] = H_NONE;
            m->host_cur -= tgraph_buf_bytes(tg, b);
            if (m->rec)
                rec_close(m, true, b, i);
        } else {
            m->host[b] = H_HOST;
        }
    }
    return REMAT_OK;
}

/*
 * The compute time of a FWD or BWD step of w FLOPs starting at the compute clock: at
 * the slowed rate r = flops * (1 - slowdown) while the engine is busy (busy seconds
 * from the clock, sim.c's header says why without a gap), at flops after. Within the
 * busy time when r * busy >= w: w / r; otherwise busy + (w - r * busy) / flops.
 */
static void tick(struct sim *m, remat_step step)
{
    double w = step_flops(m->tg, step), t = w / m->flops, busy = m->engine - m->clock;
    double r = m->flops * (1 - m->slowdown);

    if (m->slowdown > 0 && busy > 0 && w > 0)
        t = r * busy >= w ? w / r : busy + (w - r * busy) / m->flops;
    m->clock += t;
    if (m->res)
        m->res->compute_seconds += t;
}

/* The recorder's arrays: as many device instances as FREE steps and steps with scratch,
 * host instances as OFFLOADs (more allocations than that leave a buffer never freed). */
static remat_status rec_begin(struct sim *m, const remat_schedule *s)
{
    const remat_allocator *a = tgraph_al(m->tg);
    struct sim_instances *r = m->rec;
    size_t nb = 2 * (size_t)m->tg->n_values;

    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < s->n; i++) {
        r->cap_dev += s->steps[i].kind == REMAT_STEP_FREE || (s->scratch && s->scratch[i]);
        r->cap_host += s->steps[i].kind == REMAT_STEP_OFFLOAD;
    }
    r->dev = core_calloc(a, r->cap_dev + 1, sizeof *r->dev);
    r->host = core_calloc(a, r->cap_host + 1, sizeof *r->host);
    m->open = core_calloc(a, nb, sizeof *m->open);
    m->hopen = core_calloc(a, nb, sizeof *m->hopen);
    if (!r->dev || !r->host || !m->open || !m->hopen)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory recording the instances");
    return REMAT_OK;
}

/* After the walk: every instance closed, the recorder's own arrays released. */
static remat_status rec_end(struct sim *m, remat_status st)
{
    const remat_allocator *a = tgraph_al(m->tg);
    size_t nb = 2 * (size_t)m->tg->n_values;

    for (size_t b = 0; b < nb && !st && m->open; b++)
        if (m->open[b])
            st = bad_buf(m, m->rec->dev[m->open[b] - 1].first, "a buffer allocated here is "
                         "never freed:", (int32_t)b);
    core_free(a, m->open, nb * sizeof *m->open);
    core_free(a, m->hopen, nb * sizeof *m->hopen);
    m->rec->peak_bytes = m->peak;
    if (st)
        sim_instances_fini(m->tg, m->rec);
    return st;
}

/* The end of a walk: nothing left on the host tier or in flight, every op run. */
static remat_status walk_end(const struct sim *m, const remat_schedule *s, size_t nb)
{
    const remat_tgraph *tg = m->tg;
    remat_status st = REMAT_OK;

    for (size_t b = 0; b < nb && !st; b++)
        if (m->host[b] != H_NONE)
            st = bad_buf(m, s->n, m->host[b] == H_HOST ? "the schedule ends with a value on "
                         "the host tier that never came back:" : "the schedule ends with a "
                         "copy not waited for:", (int32_t)b);
    for (int32_t p = 0; p < tg->n_ops && !st; p++) {
        if (tg->ops[p].has_bwd && m->bwd_count[p] != 1)
            st = REMAT_FAIL(REMAT_ERR_INVALID, "the schedule never runs the backward of op "
                            "%d (%s)", p, tg->ops[p].type_name);
        else if (m->fwd_count[p] == 0)
            st = REMAT_FAIL(REMAT_ERR_INVALID, "the schedule never runs the forward of op "
                            "%d (%s)", p, tg->ops[p].type_name);
    }
    return st;
}

static remat_status sim_walk(const remat_tgraph *tg, const remat_schedule *s,
                             const remat_sim_opts *o, size_t *live, remat_sim_result *res,
                             struct sim_instances *rec)
{
    const remat_allocator *a = tgraph_al(tg);
    size_t nb = 2 * (size_t)tg->n_values, no = (size_t)tg->n_ops, mt, scratch;
    struct sim m = {.tg = tg, .strict = !s->file_order, .res = res, .rec = rec};
    struct touch_lists tl = {0};
    remat_status st = REMAT_OK;

    if (rec)
        memset(rec, 0, sizeof *rec);

    m.bw = o && o->bandwidth > 0 ? o->bandwidth : REMAT_DEFAULT_BANDWIDTH;
    m.flops = o && o->flops > 0 ? o->flops : REMAT_DEFAULT_FLOPS;
    m.slowdown = o ? o->copy_slowdown : 0;
    mt = (size_t)step_max_touch(tg);
    m.live = core_calloc(a, nb, sizeof *m.live);
    m.fwd_count = core_calloc(a, no, sizeof *m.fwd_count);
    m.bwd_count = core_calloc(a, no, sizeof *m.bwd_count);
    m.grad_done = core_calloc(a, nb, sizeof *m.grad_done);
    m.reads = core_calloc(a, mt, sizeof *m.reads);
    m.makes = core_calloc(a, mt, sizeof *m.makes);
    m.host = core_calloc(a, nb, sizeof *m.host);
    m.copy_end = core_calloc(a, nb, sizeof *m.copy_end);
    if (!m.live || !m.fwd_count || !m.bwd_count || !m.grad_done || !m.reads || !m.makes ||
        !m.host || !m.copy_end) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the simulator");
        goto out;
    }
    if (rec && (st = rec_begin(&m, s)))
        goto out;
    /* a walk several times the graph's length reads each op's lists once */
    if (s->n > 4 * no) {
        if ((st = touch_lists_build(tg, &tl)))
            goto out;
        m.tl = &tl;
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
            tick(&m, step);
            break;
        case REMAT_STEP_FREE:
            if (step.id < 0 || (size_t)step.id >= nb) {
                st = bad(i, "bad buffer id");
            } else if (!m.live[step.id]) {
                st = bad_buf(&m, i, "FREE of a buffer that is not live:", step.id);
            } else if (m.host[step.id] == H_OUT || m.host[step.id] == H_IN) {
                st = bad_buf(&m, i, "FREE of a buffer whose copy is not waited for:", step.id);
            } else {
                m.live[step.id] = false;
                m.cur -= tgraph_buf_bytes(tg, step.id);
                if (rec)
                    rec_close(&m, false, step.id, i);
            }
            break;
        case REMAT_STEP_OFFLOAD:
        case REMAT_STEP_PREFETCH:
        case REMAT_STEP_WAIT:
            st = step_host(&m, i, step);
            break;
        default:
            st = bad(i, "bad step kind");
        }
        if (res && m.host_cur > res->host_peak_bytes)
            res->host_peak_bytes = m.host_cur;
        if (rec && m.host_cur > rec->host_peak_bytes)
            rec->host_peak_bytes = m.host_cur;
        /* a kernel's scratch is held during its step only */
        scratch = s->scratch ? s->scratch[i] : 0;
        if (rec && scratch && !st)
            st = rec_open(&m, false, -1, i, scratch);
        if (res && scratch > res->scratch_peak_bytes)
            res->scratch_peak_bytes = scratch;
        if (m.cur + scratch > m.peak) {
            m.peak = m.cur + scratch;
            m.peak_step = i;
        }
        if (live)
            live[i] = m.cur;
    }
    if (!st)
        st = walk_end(&m, s, nb);
    if (res) {
        res->activation_peak_bytes = m.peak;
        res->peak_step = m.peak_step;
        res->n_steps = s->n;
        res->overhead = m.recompute;
        res->total_seconds = m.clock;
    }
out:
    if (rec)
        st = rec_end(&m, st);
    core_free(a, m.live, nb * sizeof *m.live);
    core_free(a, m.fwd_count, no * sizeof *m.fwd_count);
    core_free(a, m.bwd_count, no * sizeof *m.bwd_count);
    core_free(a, m.grad_done, nb * sizeof *m.grad_done);
    core_free(a, m.reads, mt * sizeof *m.reads);
    core_free(a, m.makes, mt * sizeof *m.makes);
    core_free(a, m.host, nb * sizeof *m.host);
    core_free(a, m.copy_end, nb * sizeof *m.copy_end);
    touch_lists_fini(tg, &tl);
    return st;
}

remat_status touch_lists_build(const remat_tgraph *tg, struct touch_lists *t)
{
    const remat_allocator *a = tgraph_al(tg);
    int32_t mt = step_max_touch(tg), nr, nm;
    int32_t *reads = core_calloc(a, (size_t)mt, sizeof *reads);
    int32_t *makes = core_calloc(a, (size_t)mt, sizeof *makes);
    remat_status st = REMAT_OK;
    size_t q, k;

    *t = (struct touch_lists){.n_slots = 2 * (size_t)tg->n_ops};
    t->off = core_calloc(a, t->n_slots + 1, sizeof *t->off);
    t->n_reads = core_calloc(a, t->n_slots + 1, sizeof *t->n_reads);
    if (!reads || !makes || !t->off || !t->n_reads) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the simulator");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (q = 0, k = 0; q < t->n_slots; q++) {
            remat_step step = {q % 2 ? REMAT_STEP_BWD : REMAT_STEP_FWD, (int32_t)(q / 2)};

            t->off[q] = (int32_t)k;
            if (q % 2 && !tg->ops[q / 2].has_bwd)
                continue;
            step_touch(tg, step, reads, &nr, makes, &nm);
            if (pass) {
                memcpy(t->buf + k, reads, (size_t)nr * sizeof *reads);
                memcpy(t->buf + k + (size_t)nr, makes, (size_t)nm * sizeof *makes);
                t->n_reads[q] = nr;
            }
            k += (size_t)nr + (size_t)nm;
        }
        t->off[q] = (int32_t)k;
        if (!pass && !(t->buf = core_calloc(a, (t->n_buf = k) + 1, sizeof *t->buf))) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the simulator");
            goto out;
        }
    }
out:
    core_free(a, reads, (size_t)mt * sizeof *reads);
    core_free(a, makes, (size_t)mt * sizeof *makes);
    if (st)
        touch_lists_fini(tg, t);
    return st;
}

void touch_lists_fini(const remat_tgraph *tg, struct touch_lists *t)
{
    const remat_allocator *a = tgraph_al(tg);

    core_free(a, t->off, (t->n_slots + 1) * sizeof *t->off);
    core_free(a, t->n_reads, (t->n_slots + 1) * sizeof *t->n_reads);
    core_free(a, t->buf, (t->n_buf + 1) * sizeof *t->buf);
    *t = (struct touch_lists){0};
}

/* The largest bytes one step must hold at once: its reads, what it allocates and the
 * scratch the schedule gave its kernel. */
static remat_status lower_bound(const remat_tgraph *tg, const remat_schedule *s, size_t *out)
{
    const remat_allocator *a = tgraph_al(tg);
    size_t mt = (size_t)step_max_touch(tg), best = 0, n2 = 2 * (size_t)tg->n_ops + 1;
    int32_t *reads = core_calloc(a, mt, sizeof *reads), *makes = core_calloc(a, mt, sizeof *makes);
    size_t *sc = core_calloc(a, n2, sizeof *sc);
    int32_t nr, nm;

    if (!reads || !makes || !sc) {
        core_free(a, reads, mt * sizeof *reads);
        core_free(a, makes, mt * sizeof *makes);
        core_free(a, sc, n2 * sizeof *sc);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the simulator");
    }
    for (size_t i = 0; s->scratch && i < s->n; i++)
        if (s->steps[i].kind == REMAT_STEP_FWD || s->steps[i].kind == REMAT_STEP_BWD)
            sc[2 * (size_t)s->steps[i].id + (s->steps[i].kind == REMAT_STEP_BWD)] = s->scratch[i];
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
            need += sc[2 * (size_t)o + (size_t)k];
            best = need > best ? need : best;
        }
    core_free(a, reads, mt * sizeof *reads);
    core_free(a, makes, mt * sizeof *makes);
    core_free(a, sc, n2 * sizeof *sc);
    *out = best;
    return REMAT_OK;
}

remat_status remat_sim_run(const remat_tgraph *tg, const remat_schedule *s,
                           remat_sim_result *res)
{
    return remat_sim_run_opts(tg, s, NULL, res);
}

remat_status remat_sim_run_opts(const remat_tgraph *tg, const remat_schedule *s,
                                const remat_sim_opts *o, remat_sim_result *res)
{
    double fwd_cost = 0;
    remat_status st;

    if (!tg || !s || !res)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_sim_run needs a graph, a schedule and a result");
    if (o && !(o->copy_slowdown >= 0 && o->copy_slowdown <= 1))
        return REMAT_FAIL(REMAT_ERR_ARG, "copy slowdown %g is not a share in [0, 1]",
                          o->copy_slowdown);
    memset(res, 0, sizeof *res);
    if ((st = sim_walk(tg, s, o, NULL, res, NULL)) || (st = lower_bound(tg, s, &res->lower_bound_bytes)))
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
    return sim_walk(tg, s, NULL, live, NULL, NULL);
}

remat_status sim_seconds_alone(const remat_tgraph *tg, const remat_schedule *s,
                               const remat_sim_opts *o, double *seconds)
{
    const remat_allocator *a = tgraph_al(tg);
    size_t no = (size_t)tg->n_ops;
    double fl = o && o->flops > 0 ? o->flops : REMAT_DEFAULT_FLOPS, clock = 0;
    double *sec = core_calloc(a, 2 * no + 1, sizeof *sec); /* each op's two quotients */
    bool walk = !sec || s->file_order || (o && !(o->copy_slowdown >= 0 && o->copy_slowdown <= 1));
    remat_sim_result r;
    remat_status st;

    for (size_t p = 0; p < no && !walk; p++) {
        sec[2 * p] = tg->ops[p].fwd_flops / fl; /* as tick divides */
        sec[2 * p + 1] = tg->ops[p].bwd_flops / fl;
    }
    for (size_t i = 0; i < s->n && !walk; i++) {
        remat_step x = s->steps[i];

        if (x.kind >= REMAT_STEP_OFFLOAD ||
            (x.kind != REMAT_STEP_FREE && (x.id < 0 || (size_t)x.id >= no)))
            walk = true; /* the walk's own case: copies, or an error to report */
        else if (x.kind != REMAT_STEP_FREE)
            clock += sec[2 * (size_t)x.id + (x.kind == REMAT_STEP_BWD)];
    }
    core_free(a, sec, (2 * no + 1) * sizeof *sec);
    *seconds = clock;
    if (walk) {
        if ((st = remat_sim_run_opts(tg, s, o, &r)))
            return st;
        *seconds = r.total_seconds;
    }
    return REMAT_OK;
}

remat_status sim_instances(const remat_tgraph *tg, const remat_schedule *s,
                           struct sim_instances *out)
{
    return sim_walk(tg, s, NULL, NULL, NULL, out);
}

void sim_instances_fini(const remat_tgraph *tg, struct sim_instances *in)
{
    core_free(tgraph_al(tg), in->dev, sizeof *in->dev * (in->cap_dev + 1));
    core_free(tgraph_al(tg), in->host, sizeof *in->host * (in->cap_host + 1));
    memset(in, 0, sizeof *in);
}
