/*
 * offload.c - the host tier in a plan: which forward values go out to the host between
 * their forward and backward uses, and where their copies start and end.
 *
 * A candidate is a forward value with one instance in the schedule whose reads fall
 * on both sides of the first backward step, with room between them: r1 its last read
 * before the backward begins (or its forward), r2 its first read after. Offloading it
 * inserts, after base step r1, OFFLOAD; after step x >= r1, WAIT and FREE; after step
 * z <= r2 - 1, PREFETCH; after step r2 - 1, WAIT. On the device it is then absent
 * from the states after steps x+1 .. z-1 (the gap; z >= x + 2).
 *
 * The pass works on the base schedule's timeline of live bytes, lowered by each gap:
 * 1. every candidate offloaded with the widest gap (x = r1, z = r2 - 1): the least
 *    peak this schedule can reach by offloading; with no budget it becomes the target;
 * 2. the cache: candidates taken back (kept on the device) while the peak stays within
 *    the target, the first needed in the backward first (their copies are the hardest
 *    to hide);
 * 3. each remaining gap narrowed, as far as the target allows, until the copy fits
 *    into the compute around it: WAIT and FREE later until the copy out (started when
 *    the engine is free) has had time; PREFETCH earlier until the copy back (planned
 *    backwards from its reader, latest first) has.
 * The timeline counts a prefetched value as live from the end of step z, so the
 * result's simulated peak never exceeds it. From step 2 on it is a segment tree
 * (maxtree.h): a gap is tested and taken back, or narrowed to where the clock, the gap
 * or the target stops it, in O(log n) steps instead of a walk over its steps (the
 * clock, which never decreases, is searched in halves). Same gaps as the walks.
 * plan_offload_peak (offload.h) runs the same pass and reads the peak of the schedule
 * it would write off the final timeline (pass_peak), without writing or walking it.
 */
#include "plan/maxtree.h"
#include "plan/offload.h"
#include "plan/planners.h"
#include "sched/schedule.h"
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>

struct cand {
    int32_t buf;
    size_t bytes;
    size_t r1, r2;    /* last forward-phase read, first backward-phase read */
    size_t x, z;      /* FREE after x, PREFETCH after z */
    bool off;
};

struct pass {
    const remat_tgraph *tg;
    const remat_schedule *s;
    size_t n;
    size_t *live;     /* base live bytes after each step, minus the gaps */
    struct maxtree lt; /* live, from step 2 on (taken back and narrowed in it) */
    double *clock;    /* compute time at the end of each step */
    bool mono;        /* clock never decreases (searched in halves; else walked) */
    struct cand *c;
    int32_t nc;
};

/* Finds the candidates: one pass records allocations, reads and the first BWD. */
static remat_status find_cands(struct pass *p, const bool *cand)
{
    const remat_tgraph *tg = p->tg;
    const remat_allocator *a = tgraph_al(tg);
    int32_t nv = tg->n_values, mt = step_max_touch(tg), nr, nm;
    int32_t *reads = core_calloc(a, (size_t)mt, sizeof *reads);
    int32_t *makes = core_calloc(a, (size_t)mt, sizeof *makes);
    struct touch_lists tl = {0};
    int32_t *allocs = core_calloc(a, (size_t)nv + 1, sizeof *allocs);
    size_t *r1 = core_calloc(a, (size_t)nv + 1, sizeof *r1);
    size_t *r2 = core_calloc(a, (size_t)nv + 1, sizeof *r2);
    size_t first_bwd = p->n;
    remat_status st = REMAT_OK;

    p->c = core_calloc(a, (size_t)nv + 1, sizeof *p->c);
    if (!reads || !makes || !allocs || !r1 || !r2 || !p->c) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
        goto out;
    }
    /* a schedule several times the graph's length reads each op's lists once */
    if (p->n > 4 * (size_t)tg->n_ops && (st = touch_lists_build(tg, &tl)))
        goto out;
    for (size_t i = 0; i < p->n; i++)
        if (p->s->steps[i].kind == REMAT_STEP_BWD) {
            first_bwd = i;
            break;
        }
    for (int32_t b = 0; b < nv; b++)
        r2[b] = SIZE_MAX;
    for (size_t i = 0; i < p->n; i++) {
        remat_step step = p->s->steps[i];
        const int32_t *rd = reads, *mk = makes;

        if (step.kind != REMAT_STEP_FWD && step.kind != REMAT_STEP_BWD)
            continue;
        if (tl.off)
            touch_get(&tl, step, &rd, &nr, &mk, &nm);
        else
            step_touch(tg, step, reads, &nr, makes, &nm);
        for (int32_t j = 0; j < nm; j++)
            if (mk[j] < nv) {
                allocs[mk[j]]++;
                r1[mk[j]] = i;
            }
        for (int32_t j = 0; j < nr; j++) {
            int32_t b = rd[j];

            if (b >= nv)
                continue;
            if (i < first_bwd)
                r1[b] = i;
            else if (r2[b] == SIZE_MAX)
                r2[b] = i;
        }
    }
    for (int32_t b = 0; b < nv; b++) {
        if (allocs[b] != 1 || r2[b] == SIZE_MAX || r1[b] >= first_bwd || r2[b] < r1[b] + 3 ||
            tg->values[b].producer < 0 || !tg->values[b].bytes || (cand && !cand[b]))
            continue;
        p->c[p->nc++] = (struct cand){b, tg->values[b].bytes, r1[b], r2[b], r1[b], r2[b] - 1,
                                      true};
    }
out:
    touch_lists_fini(tg, &tl);
    core_free(a, reads, sizeof *reads * (size_t)mt);
    core_free(a, makes, sizeof *makes * (size_t)mt);
    core_free(a, allocs, sizeof *allocs * ((size_t)nv + 1));
    core_free(a, r1, sizeof *r1 * ((size_t)nv + 1));
    core_free(a, r2, sizeof *r2 * ((size_t)nv + 1));
    return st;
}

/* Every candidate's widest gap out at once (step 1): as gap_add on each, in one pass
 * over differences instead of a walk over each gap (10^4 gaps of 10^4 steps). */
static remat_status gaps_out(struct pass *p)
{
    const remat_allocator *a = tgraph_al(p->tg);
    int64_t *dif = core_calloc(a, p->n + 1, sizeof *dif), run = 0;

    if (!dif)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
    for (int32_t i = 0; i < p->nc; i++)
        if (p->c[i].x + 1 < p->c[i].z) {
            dif[p->c[i].x + 1] += (int64_t)p->c[i].bytes;
            dif[p->c[i].z] -= (int64_t)p->c[i].bytes;
        }
    for (size_t k = 0; k < p->n; k++)
        p->live[k] -= (size_t)(run += dif[k]);
    core_free(a, dif, sizeof *dif * (p->n + 1));
    return REMAT_OK;
}

static size_t peak_of(const struct pass *p)
{
    size_t m = 0;

    for (size_t k = 0; k < p->n; k++)
        m = p->live[k] > m ? p->live[k] : m;
    return m;
}

static int by_r1_desc(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;

    if (a->r1 != b->r1)
        return a->r1 > b->r1 ? -1 : 1;
    return a->buf < b->buf ? -1 : a->buf > b->buf;
}

static int by_r2_desc(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;

    if (a->r2 != b->r2)
        return a->r2 > b->r2 ? -1 : 1;
    return a->buf < b->buf ? -1 : a->buf > b->buf;
}

/* The first step j >= x whose clock is not below end (n where none). */
static size_t clock_reaches(const struct pass *p, size_t x, double end)
{
    size_t lo = x, hi = p->n;

    if (!p->mono) {
        while (x < p->n && p->clock[x] < end)
            x++;
        return x;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (p->clock[mid] < end)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The last step j <= z whose clock is not above start (SIZE_MAX where none). */
static size_t clock_within(const struct pass *p, size_t z, double start)
{
    size_t lo = 0, hi = z + 1;

    if (!p->mono) {
        for (; z != SIZE_MAX && p->clock[z] > start; z--)
            ;
        return z;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (p->clock[mid] > start)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo - 1;
}

/* Copy out: FREE moves later, one step at a time, while the clock is below end, the gap
 * keeps two steps and the step it gives back stays within target; as a walk would. */
static void widen_x(struct pass *p, struct cand *c, size_t target, double end)
{
    size_t stop = clock_reaches(p, c->x, end), k;

    stop = stop < c->z - 2 ? stop : c->z - 2;
    if (stop <= c->x)
        return;
    k = c->bytes > target ? c->x + 1
                          : maxtree_first_above(&p->lt, c->x + 1, stop + 1, target - c->bytes);
    stop = k != MAXTREE_NONE && k - 1 < stop ? k - 1 : stop;
    maxtree_add(&p->lt, c->x + 1, stop + 1, c->bytes);
    c->x = stop;
}

/* Copy back: PREFETCH moves earlier while the clock is above start, the gap keeps two
 * steps and the step given back stays within target. */
static void widen_z(struct pass *p, struct cand *c, size_t target, double start)
{
    size_t stop = clock_within(p, c->z, start), k;

    stop = stop != SIZE_MAX && stop > c->x + 2 ? stop : c->x + 2;
    if (stop >= c->z)
        return;
    k = c->bytes > target ? c->z - 1
                          : maxtree_last_above(&p->lt, stop - 1, c->z, target - c->bytes);
    stop = k != MAXTREE_NONE && k + 1 > stop ? k + 1 : stop;
    maxtree_add(&p->lt, stop, c->z, c->bytes);
    c->z = stop;
}

/* Narrows every gap (step 3). Candidates come sorted by r1 descending. Times are on the
 * clock of compute at full speed: a copy of t seconds lets (1 - slowdown) t of it pass
 * (the compute cores' share a copy under way leaves them, as the simulator models it),
 * so with slowdown 1 no compute hides a copy and every gap stays at its widest. */
static void narrow(struct pass *p, size_t target, double bw, double slowdown)
{
    double engine = 0, keep = 1 - slowdown;

    /* Copies out, in issue order (r1 ascending). */
    for (int32_t i = p->nc; i-- > 0;) {
        struct cand *c = &p->c[i];
        double start, end;

        if (!c->off)
            continue;
        start = p->clock[c->r1] > engine ? p->clock[c->r1] : engine;
        end = start + keep * (double)c->bytes / bw;
        engine = end;
        widen_x(p, c, target, end);
    }
    /* Copies back, planned from the last needed to the first. */
    qsort(p->c, (size_t)p->nc, sizeof *p->c, by_r2_desc);
    engine = p->clock[p->n - 1] + 1;
    for (int32_t i = 0; i < p->nc; i++) {
        struct cand *c = &p->c[i];
        double need, start;

        if (!c->off)
            continue;
        need = p->clock[c->r2 - 1] < engine ? p->clock[c->r2 - 1] : engine;
        start = need - keep * (double)c->bytes / bw;
        engine = start;
        widen_z(p, c, target, start);
    }
}

struct event {
    size_t after;   /* base step */
    int order;      /* OFFLOAD, WAIT+FREE, PREFETCH, WAIT */
    int32_t buf;
};

static int by_event(const void *x, const void *y)
{
    const struct event *a = x, *b = y;

    if (a->after != b->after)
        return a->after < b->after ? -1 : 1;
    if (a->order != b->order)
        return a->order - b->order;
    return a->buf < b->buf ? -1 : a->buf > b->buf;
}

static remat_status emit(const struct pass *p, remat_schedule **out)
{
    const remat_allocator *a = tgraph_al(p->tg);
    size_t ne = 0, e = 0;
    struct event *ev = core_calloc(a, 4 * (size_t)p->nc + 1, sizeof *ev);
    remat_schedule *s = NULL;
    remat_status st;

    if (!ev)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
    for (int32_t i = 0; i < p->nc; i++) {
        const struct cand *c = &p->c[i];

        if (!c->off)
            continue;
        ev[ne++] = (struct event){c->r1, 0, c->buf};
        ev[ne++] = (struct event){c->x, 1, c->buf};
        ev[ne++] = (struct event){c->z, 2, c->buf};
        ev[ne++] = (struct event){c->r2 - 1, 3, c->buf};
    }
    qsort(ev, ne, sizeof *ev, by_event);
    if ((st = schedule_new(a, &s)))
        goto out;
    s->file_order = p->s->file_order;
    for (size_t i = 0; i < p->n && !st; i++) {
        st = schedule_push(s, p->s->steps[i].kind, p->s->steps[i].id);
        for (; e < ne && ev[e].after == i && !st; e++) {
            static const remat_step_kind kind[] = {REMAT_STEP_OFFLOAD, REMAT_STEP_WAIT,
                                                   REMAT_STEP_PREFETCH, REMAT_STEP_WAIT};

            st = schedule_push(s, kind[ev[e].order], ev[e].buf);
            if (!st && ev[e].order == 1)
                st = schedule_push(s, REMAT_STEP_FREE, ev[e].buf);
        }
    }
    if (!st) {
        *out = s;
        s = NULL;
    }
out:
    remat_schedule_free(s);
    core_free(a, ev, sizeof *ev * (4 * (size_t)p->nc + 1));
    return st;
}

/* The clock (step 3's): each step's FLOPs / fl added up; on a schedule several times the
 * graph's length, each op's two quotients are taken once (the same doubles). */
static remat_status clock_fill(struct pass *p, double fl)
{
    const remat_tgraph *tg = p->tg;
    size_t no = (size_t)tg->n_ops, ns = p->n > 4 * no ? 2 * no : 0;
    double *sec = ns ? core_calloc(tgraph_al(tg), ns, sizeof *sec) : NULL;

    if (ns && !sec)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
    for (size_t o = 0; o < ns / 2; o++) {
        sec[2 * o] = tg->ops[o].fwd_flops / fl;
        sec[2 * o + 1] = tg->ops[o].bwd_flops / fl;
    }
    p->mono = true;
    for (size_t i = 0; i < p->n; i++) {
        remat_step st = p->s->steps[i];
        double dt = !sec ? step_flops(tg, st) / fl
                  : st.kind == REMAT_STEP_FWD ? sec[2 * (size_t)st.id]
                  : st.kind == REMAT_STEP_BWD ? sec[2 * (size_t)st.id + 1] : 0 / fl;

        p->clock[i] = (i ? p->clock[i - 1] : 0) + dt;
        p->mono = p->mono && (!i || p->clock[i] >= p->clock[i - 1]);
    }
    core_free(tgraph_al(tg), sec, ns * sizeof *sec);
    return REMAT_OK;
}

/* Steps 1-3 on p (its schedule and n set): the timeline, the candidates, and where
 * the base needs more than *target (then *target rises to the least it reaches when
 * that is more), their gaps. */
static remat_status pass_run(struct pass *p, const bool *cand, size_t *target, double bw,
                             double fl, double slowdown)
{
    const remat_allocator *a = tgraph_al(p->tg);
    remat_status st;
    size_t peak;

    p->live = core_calloc(a, p->n, sizeof *p->live);
    p->clock = core_calloc(a, p->n, sizeof *p->clock);
    if (!p->live || !p->clock)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
    if ((st = remat_sim_timeline(p->tg, p->s, p->live, p->n)))
        return st;
    /* a dump replayed in its file's order (not topological) has no forward/backward
     * boundary to offload across: it is kept as it is */
    if (!p->s->file_order && (st = find_cands(p, cand)))
        return st;
    peak = peak_of(p);
    if (peak <= *target || !p->nc) {
        for (int32_t i = 0; i < p->nc; i++)
            p->c[i].off = false;
        return REMAT_OK;
    }
    if ((st = clock_fill(p, fl)))
        return st;
    qsort(p->c, (size_t)p->nc, sizeof *p->c, by_r1_desc);
    if ((st = gaps_out(p)))
        return st;
    peak = peak_of(p);
    if (peak > *target)
        *target = peak; /* the least this schedule reaches: the caller compares */
    if ((st = maxtree_init(&p->lt, a, p->live, p->n)))
        return st;
    for (int32_t i = 0; i < p->nc; i++) {
        struct cand *c = &p->c[i];

        if (c->x + 1 >= c->z || maxtree_max(&p->lt, c->x + 1, c->z) + c->bytes <= *target) {
            maxtree_add(&p->lt, c->x + 1, c->z, c->bytes);
            c->off = false;
        }
    }
    narrow(p, *target, bw, slowdown);
    return REMAT_OK;
}

static void pass_fini(struct pass *p)
{
    const remat_allocator *a = tgraph_al(p->tg);

    if (p->lt.mx)
        maxtree_fini(&p->lt);
    core_free(a, p->live, sizeof *p->live * p->n);
    core_free(a, p->clock, sizeof *p->clock * p->n);
    core_free(a, p->c, sizeof *p->c * ((size_t)p->tg->n_values + 1));
}

remat_status plan_offload(const remat_tgraph *tg, const remat_schedule *s, const bool *cand,
                          size_t *target, double bandwidth, double flops, double slowdown,
                          remat_schedule **out, remat_plan_info *info)
{
    struct pass p = {.tg = tg, .s = s, .n = s->n};
    remat_status st;

    *out = NULL;
    if (!s->n)
        return REMAT_FAIL(REMAT_ERR_ARG, "an empty schedule");
    if ((st = pass_run(&p, cand, target, bandwidth > 0 ? bandwidth : REMAT_DEFAULT_BANDWIDTH,
                       flops > 0 ? flops : REMAT_DEFAULT_FLOPS, slowdown)))
        goto out;
    if (info) {
        info->n_offloaded = 0;
        info->offloaded_bytes = 0;
        for (int32_t i = 0; i < p.nc; i++)
            if (p.c[i].off) {
                info->n_offloaded++;
                info->offloaded_bytes += p.c[i].bytes;
            }
    }
    st = emit(&p, out);
out:
    pass_fini(&p);
    return st;
}

struct at_step {
    size_t k, bytes;
};

static int by_step(const void *x, const void *y)
{
    const struct at_step *a = x, *b = y;

    return (a->k > b->k) - (a->k < b->k);
}

/* The simulated peak of what emit would write, from the timeline: after base step k the
 * emitted walk holds live[k] less what is prefetched after k (PREFETCH after z), then
 * drops what is freed after k (WAIT and FREE after x), then takes back the prefetched:
 * its largest there is live[k] less the smaller of the two. */
static remat_status pass_peak(struct pass *p, size_t *peak)
{
    const remat_allocator *a = tgraph_al(p->tg);
    struct at_step *f = core_calloc(a, 2 * (size_t)p->nc + 1, sizeof *f), *g;
    size_t nf = 0, ng = 0, i = 0, j = 0;

    if (!f)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
    if (p->lt.mx)
        maxtree_flush(&p->lt);
    for (int32_t c = 0; c < p->nc; c++)
        if (p->c[c].off)
            f[nf++] = (struct at_step){p->c[c].x, p->c[c].bytes};
    g = f + nf;
    for (int32_t c = 0; c < p->nc; c++)
        if (p->c[c].off)
            g[ng++] = (struct at_step){p->c[c].z, p->c[c].bytes};
    qsort(f, nf, sizeof *f, by_step);
    qsort(g, ng, sizeof *g, by_step);
    while (i < nf && j < ng) { /* the steps with both: live[k] less the smaller sum */
        size_t k = f[i].k < g[j].k ? f[i].k : g[j].k, fb = 0, gb = 0;

        for (; i < nf && f[i].k == k; i++)
            fb += f[i].bytes;
        for (; j < ng && g[j].k == k; j++)
            gb += g[j].bytes;
        p->live[k] -= fb < gb ? fb : gb;
    }
    *peak = peak_of(p);
    core_free(a, f, sizeof *f * (2 * (size_t)p->nc + 1));
    return REMAT_OK;
}

remat_status plan_offload_peak(const remat_tgraph *tg, const remat_schedule *s, size_t target,
                               double bandwidth, double flops, double slowdown, size_t *peak)
{
    struct pass p = {.tg = tg, .s = s, .n = s->n};
    remat_status st;

    *peak = SIZE_MAX;
    if (!s->n)
        return REMAT_FAIL(REMAT_ERR_ARG, "an empty schedule");
    if (!(st = pass_run(&p, NULL, &target, bandwidth > 0 ? bandwidth : REMAT_DEFAULT_BANDWIDTH,
                        flops > 0 ? flops : REMAT_DEFAULT_FLOPS, slowdown)))
        st = pass_peak(&p, peak);
    pass_fini(&p);
    return st;
}
