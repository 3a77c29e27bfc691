/*
 * dp_min_budget.c - the smallest budget at which the lower-set DP finds a chain
 * (kusumoto_min_budget), each step on the memory-centric run's feasibility alone:
 * stepping up, then narrowing. A run that finds a chain also says what that chain needs
 * (dp_chain_need), which may be below the run's budget; the search takes that as its
 * upper end, and so reaches the least budget itself, proven by a run a byte below that
 * finds none (or, should PIN_RUNS such runs not settle it, stops within 1e-5).
 */
#include "plan/dp_run.h"

#include <string.h>

/* The narrowing keeps the pairs usable at hi once hi - lo is at most hi / KEEP_AT, or at
 * once from a thinned family's bound (THIN_FROM): its remaining runs then read those
 * instead of working each out again (GPT-2 of 1,000 layers: 0.022 s a run instead of
 * 0.039 s), and they go on to the plans after the search (kusumoto_min_budget_pairs). */
#define KEEP_AT 8

/* Runs just below hi once hi - lo is within hi / PIN_AT (most chains' needs lie further
 * apart: GPT-2 of 1,000 layers, 0.19% between the least two), at most PIN_RUNS: each
 * that finds a chain lowers hi to its need; one that does not proves hi least. */
#define PIN_AT 256
#define PIN_RUNS 8

/* Families of more than THIN_FROM sets first search the family thinned to at most a
 * THIN_PART-th of its sets (lsets_thin), itself not thinned again: its chains are chains
 * of this one, so its least budget is feasible here and starts the narrowing, with the
 * pairs kept at once. Its least budget lay 0.05% above the family's on GPT-2 of 1,000
 * layers (37,008 sets), 0.5% on ResNet-2498 (8,337), 0.9% on ResNet-1001 (3,347). */
#define THIN_FROM 2048
#define THIN_PART 4

/* One round of the search: one run, or two side by side on two cores (core_par_run).
 * Only feasibility and the chain's need are read, which neither the kept pairs nor the
 * order of the pairs changes; the least budget does not depend on the runs' order, so
 * one core and two find the same. */
struct probe {
    struct dp *p[2];
    size_t at[2];
    int n;
    struct core_job_err err[2];
    bool feasible[2];
    size_t need[2]; /* when feasible: what its chain needs (dp_chain_need) */
};

static void probe_job(void *ctx, int k)
{
    struct probe *w = ctx;
    struct dp *p = w->p[k];

    p->budget = w->at[k];
    w->feasible[k] = !core_job_err_note(&w->err[k], dp_run(p, DP_MIN_M, NULL, 0)) &&
                     p->fr_n[p->ls->n - 1] > 0;
    if (w->feasible[k])
        w->need[k] = dp_chain_need(p);
}

/* Runs w's probes; the first failure's status (its message raised on this thread). */
static remat_status probe_run(struct probe *w)
{
    remat_status st = REMAT_OK;

    core_par_run(w->n, w->n, probe_job, w);
    for (int k = 0; k < w->n; k++) {
        if (w->err[k].st && !st)
            st = core_job_err_raise(&w->err[k]);
        core_job_err_clear(&w->err[k]);
    }
    return st;
}

/* The search's next budget up from an infeasible b: b times 17/12 (about the square root
 * of 2), at most top. Not doubling: a run costs about the pairs within its window, which
 * grow faster than the budget, and a step past the least budget (GPT-2-1000: a run at
 * four times it, 0.3 of the search's 1.0 s) costs more than the cheap runs below it. */
static size_t step_up(size_t b, size_t top)
{
    size_t up = b / 12 * 5 + (b % 12 * 5 + 11) / 12; /* 5b/12 rounded up: at least 1 */

    return b >= top - up ? top : b + up;
}

/* With the simulator's model, whose pairs cost most, a step up at budget b records the
 * pairs it works out (dp_record_pairs) in place of those recorded below it: the runs of
 * the narrowing, all below the feasible step, read them instead of working them out
 * again. Where they would pass DP_PAIRS_MAX (or memory runs out) the step records none
 * and the narrowing works its pairs out as before. */
static void record_at(struct dp *p, size_t b, struct dp_pairs *rec)
{
    dp_pairs_fini(&p->pc);
    p->budget = b;
    p->rec = dp_record_pairs(p, rec) ? rec : NULL;
}

/* The most (m, need) points least_need keeps a set; past it the search narrows by runs. */
#define NEED_POINTS 64

/* A chain's state after a set: the memory carried, the most any block so far needed. */
struct need_pt {
    size_t m, need;
};

/* (m, need) into the frontier f (n points, m ascending, need strictly descending) unless
 * a point is as good in both; the points it beats dropped. False past NEED_POINTS. */
static bool need_insert(struct need_pt *f, int32_t *n, struct need_pt q)
{
    int32_t lo = 0, hi = *n, k;

    while (lo < hi) { /* the first point with m > q.m */
        int32_t mid = (lo + hi) / 2;

        if (f[mid].m <= q.m)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && f[lo - 1].need <= q.need)
        return true; /* as little memory carried and as little needed */
    k = lo;
    while (k > 0 && f[k - 1].m == q.m) /* the same m, more needed: replaced */
        k--;
    hi = lo;
    while (hi < *n && f[hi].need >= q.need) /* more carried, as much needed: beaten */
        hi++;
    if (*n - (hi - k) + 1 > NEED_POINTS)
        return false;
    memmove(f + k + 1, f + hi, sizeof *f * (size_t)(*n - hi));
    f[k] = q;
    *n += 1 - (hi - k);
    return true;
}

/* The least budget over the kept pairs, exactly: the least, over the chains they make,
 * of what a chain needs (the most, over its blocks, of the memory carried in plus the
 * block's charge, and the window the block must fit: dp_chain_need), by one pass over
 * the sets keeping per set the chains not beaten in both the memory they carry and what
 * they need. Every chain whose need is at most the pairs' budget uses kept pairs only,
 * so this is the search's answer when the pairs were kept at a feasible budget. False
 * (*out untouched) when a set holds more than NEED_POINTS such chains, or out of memory. */
static bool least_need(struct dp *p, size_t hi, size_t *out)
{
    const struct lsets *ls = p->ls;
    const struct dp_pairs *pc = &p->pc;
    size_t n = (size_t)ls->n, best = SIZE_MAX;
    struct need_pt *pts = core_alloc(p->al, n * NEED_POINTS * sizeof *pts);
    int32_t *cnt = core_calloc(p->al, n, sizeof *cnt), *lb = core_alloc(p->al, n * sizeof *lb);
    int64_t *room = core_alloc(p->al, n * sizeof *room);
    bool ok = pts && cnt && lb && room;

    /* at hi (a chain's need), the most memory a state may carry and still finish */
    if (ok) {
        p->budget = hi;
        dp_bounds(p, lb, room);
        pts[0] = (struct need_pt){0, 0};
        cnt[0] = 1;
    }
    for (int32_t j = 1; ok && j < ls->n; j++) {
        struct need_pt *f = pts + (size_t)j * NEED_POINTS;

        for (size_t e = pc->at[j]; ok && e < pc->end[j]; e++) {
            const struct dp_pair *q = &pc->p[e];
            const struct need_pt *fi = pts + (size_t)q->i * NEED_POINTS;
            size_t c = dp_pair_charge(pc, ls, e, j), dmv = ls->m[j] - ls->m[q->i];

            dmv = ls->sim ? dmv : 2 * dmv;
            for (int32_t k = 0; ok && k < cnt[q->i]; k++) {
                struct need_pt r = {fi[k].m + q->dm, fi[k].need};

                r.need = fi[k].m + c > r.need ? fi[k].m + c : r.need;
                r.need = dmv > r.need ? dmv : r.need;
                if (r.need <= hi && room[j] >= 0 &&
                    (room[j] == INT64_MAX || r.m <= (size_t)room[j]))
                    ok = need_insert(f, &cnt[j], r);
            }
        }
    }
    for (int32_t k = 0; ok && k < cnt[n - 1]; k++)
        best = pts[(n - 1) * NEED_POINTS + (size_t)k].need < best
                   ? pts[(n - 1) * NEED_POINTS + (size_t)k].need : best;
    if (ok && best != SIZE_MAX)
        *out = best;
    core_free(p->al, pts, n * NEED_POINTS * sizeof *pts);
    core_free(p->al, cnt, n * sizeof *cnt);
    core_free(p->al, lb, n * sizeof *lb);
    core_free(p->al, room, n * sizeof *room);
    return ok && best != SIZE_MAX;
}

static bool bisecting(size_t lo, size_t hi)
{
    return hi - lo > 1 && (double)(hi - lo) > 1e-5 * (double)hi;
}

static remat_status min_budget(const struct dag *d, const struct lsets *ls,
                               const struct dp_progress *pg, size_t *out,
                               struct dp_pairs *pairs, bool may_thin, size_t ub);

/* An upper bound on ls's least budget: a thinned family's (*ub; 0 when ls is small or
 * the simulator's, or may not be thinned). */
static remat_status thin_bound(const struct dag *d, const struct lsets *ls, bool may_thin,
                               size_t *ub)
{
    struct lsets th;
    remat_status st;

    *ub = 0;
    if (!may_thin || ls->n <= THIN_FROM || ls->sim || !ls->by_m)
        return REMAT_OK;
    if ((st = lsets_thin(d, ls, ls->n / THIN_PART, &th)))
        return st;
    st = min_budget(d, &th, NULL, ub, NULL, false, 0);
    lsets_fini(&th);
    return st;
}

remat_status kusumoto_min_budget(const struct dag *d, const struct lsets *ls,
                                 const struct dp_progress *pg, size_t *out)
{
    return min_budget(d, ls, pg, out, NULL, true, 0);
}

remat_status kusumoto_min_budget_pairs(const struct dag *d, const struct lsets *ls,
                                       const struct dp_progress *pg, size_t *out,
                                       struct dp_pairs *pairs, size_t ub)
{
    return min_budget(d, ls, pg, out, pairs, true, ub);
}

remat_status kusumoto_min_budget_bound(const struct dag *d, const struct lsets *ls, size_t *ub)
{
    return thin_bound(d, ls, true, ub);
}

/* ub: the thinned family's least budget when the caller has it (0: worked out here). */
static remat_status min_budget(const struct dag *d, const struct lsets *ls,
                               const struct dp_progress *pg, size_t *out,
                               struct dp_pairs *pairs, bool may_thin, size_t ub)
{
    struct dp p, q;
    struct probe w = {.p = {&p, &q}};
    struct dp_pairs rec;
    size_t lo = 0, top = 2 * ls->m[ls->n - 1] + 1, hi = 1, pinned = 0, least;
    /* a second core, where the allocator allows it and the pairs' model is not the
     * simulator's (dp_sim_pair writes its scratch); under the model, once the pairs are
     * kept (the runs and dp_chain_need read them alone) */
    bool cores = core_par_threads_with(d->al) > 1, two = cores && !ls->sim;
    remat_status st;

    /* The single block {V} needs 2 M(V): feasible at top. Invariant: lo infeasible.
     * Stepping up (step_up) from the largest node's bytes first: a run at budget B costs
     * about the sets within B/2 bytes of each set (first_start), so the small budgets
     * are cheap and the narrowing then runs below 1.42 (or twice, on two cores) times
     * the least budget. */
    for (int32_t v = 0; v < d->n; v++)
        hi = d->m[v] > hi ? d->m[v] : hi;
    if (!ub && (st = thin_bound(d, ls, may_thin, &ub)))
        return st;
    if ((st = dp_init(&p, d, ls, top)))
        return st;
    if (cores && (st = dp_init(&q, d, ls, top))) {
        dp_fini(&p);
        return st;
    }
    p.pg = pg; /* the second run reports nothing: one thread reports */
    p.stage = "DP: the least budget, one step up";
    if (ub)
        hi = ub; /* feasible: no stepping up */
    while (!ub && hi < top) {
        /* beside hi, the next step up (used when hi is infeasible) */
        size_t next = step_up(hi, top);

        w.at[0] = hi;
        w.at[1] = next;
        w.n = two ? 2 : 1;
        if (ls->sim)
            record_at(&p, hi, &rec);
        st = probe_run(&w);
        if (p.rec) {
            p.pc = rec;
            p.rec = NULL;
        }
        if (st)
            break;
        if (w.feasible[0]) {
            hi = w.need[0];
            break;
        }
        lo = hi;
        hi = next;
        if (w.n == 2) {
            if (w.feasible[1]) {
                hi = w.need[1];
                break;
            }
            lo = hi;
            hi = step_up(hi, top);
        }
    }
    if (hi > top)
        hi = top;
    /* Under the model, from the pairs the feasible step recorded: the least budget at
     * once (least_need), confirmed by a run there that finds a chain needing that much
     * and one a byte below that finds none (side by side on two cores); else the
     * narrowing goes on from what the runs found. */
    if (!st && ls->sim && p.pc.p && p.pc.budget >= hi && least_need(&p, hi, &least) &&
        least <= hi && least > lo + 1) {
        two = cores;
        q.pc = p.pc;
        w.at[0] = least;
        w.at[1] = least - 1;
        w.n = two ? 2 : 1;
        if (!(st = probe_run(&w)) && w.n == 1) {
            bool f0 = w.feasible[0];
            size_t n0 = w.need[0];

            w.at[0] = least - 1;
            st = probe_run(&w);
            w.feasible[1] = w.feasible[0];
            w.feasible[0] = f0;
            w.need[0] = n0;
        }
        if (!st && w.feasible[0]) {
            hi = w.need[0] < hi ? w.need[0] : hi;
            if (!w.feasible[1])
                lo = least - 1;
        }
    }
    /* Narrowing: lo infeasible, hi a found chain's need (or top). A feasible run lowers
     * hi to what its chain needs, at most its budget, and so lands on the least budget
     * itself once a run falls between it and the next chain's need. Within hi / PIN_AT,
     * a run just below each new hi (PIN_RUNS at most) proves it least or lowers it
     * again; the other runs split [lo, hi], in thirds on two cores, in halves on one,
     * until the precision when the pins run out. From the thinned family's bound (often
     * the least budget or within 0.1% of it) the pins start at once, and while no
     * infeasible budget is known (lo 0) the other runs step down: hi - hi/64 beside a pin,
     * hi - hi/64 and hi - hi/8 once the pins run out. */
    p.stage = "DP: the least budget, one bisection step";
    for (int pins = 0; !st && hi - lo > 1;) {
        bool pin = hi != pinned && pins < PIN_RUNS && (ub || hi - lo <= hi / PIN_AT);
        bool keep = !p.pc.p && (hi - lo <= hi / KEEP_AT || ub);

        if (!pin && !bisecting(lo, hi))
            break;
        /* the remaining steps read the pairs usable at hi, kept once (shared, read
         * only, by the second run); at a pin, the pin's own run writes them down as it
         * works them out (record_at: every later run is below it), where keeping them
         * first cost two runs' time (GPT-2-1000: 0.22 s, then 0.036 a step) */
        p.budget = hi;
        if (keep && pin && !ls->sim) {
            record_at(&p, hi - 1, &rec);
        } else if (keep && !dp_keep_pairs(&p)) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
            break;
        }
        two = cores && (!ls->sim || p.pc.p);
        if (two)
            q.pc = p.pc;
        w.n = 1;
        if (pin) {
            pins++;
            pinned = hi;
            w.at[0] = hi - 1;
            w.at[1] = lo == 0 && hi >= 64 ? hi - hi / 64 : lo + (hi - 1 - lo) / 2;
            w.n = two && w.at[1] > lo ? 2 : 1;
        } else if (lo == 0 && ub && hi >= 64) {
            w.at[0] = hi - hi / 64;
            w.at[1] = hi - hi / 8;
            w.n = two ? 2 : 1;
        } else if (two && hi - lo >= 3) {
            w.at[0] = lo + (hi - lo) / 3;
            w.at[1] = lo + (hi - lo) / 3 * 2;
            w.n = 2;
        } else {
            w.at[0] = lo + (hi - lo) / 2;
        }
        st = probe_run(&w);
        if (p.rec) {
            p.pc = rec;
            p.rec = NULL;
        }
        if (st)
            break;
        for (int k = 0; k < w.n; k++) {
            if (!w.feasible[k]) {
                lo = w.at[k] > lo ? w.at[k] : lo;
                continue;
            }
            REMAT_ASSERT(w.need[k] <= w.at[k]);
            hi = w.need[k] < hi ? w.need[k] : hi;
        }
        REMAT_ASSERT(lo < hi); /* feasibility grows with the budget */
    }
    if (cores) {
        memset(&q.pc, 0, sizeof q.pc); /* p's, freed with p */
        dp_fini(&q);
    }
    if (pairs) {
        *pairs = p.pc; /* the caller's now */
        memset(&p.pc, 0, sizeof p.pc);
    }
    dp_fini(&p);
    *out = hi;
    return st;
}
