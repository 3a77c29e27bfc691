/*
 * hybrid.c - the keep / recompute / offload planner.
 *
 * Every forward value is kept, recomputed or offloaded. The planner draws the
 * recomputation side from plans it already has: the Kusumoto et al. time-centric chains
 * of the approximate lattice at budgets spread geometrically from the DP's minimum to
 * the peak of `none` (each keeps less and recomputes more than the next; on graphs of
 * thousands of nodes the larger budgets' over a thinned family of lower sets, and past
 * 1,000 nodes each within 0.1% of its optimum where the DP's beam finds one), its
 * memory-centric chain at the minimum, SuperNeurons' speed- and memory-centric keep
 * sets (the latter where it is not quadratic in the depth: MC_MAX_RUNS), keep sets by
 * the cost of a byte, `none` itself, and at a given budget a plan fitted to it
 * (hybrid_fit.c). Each is then given the host tier (offload.c) with every
 * value a candidate: what still passes the budget goes out and back, copies timed to
 * hide behind compute at the given bandwidth. Of the results within the budget, the
 * one of least simulated time (compute, recomputation and copy stalls) wins; ties go
 * to the lower peak. With budget min, the budget is first the least peak any of them
 * reaches with offload. What does not depend on the budget is kept for every attempt of
 * one remat_plan (plan_memo): the bases, each one's time alone (its compute added up,
 * sim_seconds_alone) and least peak (plan_offload_peak, without writing its schedule), so that
 * a base that cannot win is not offloaded and simulated again.
 *
 * A DP chain at a budget above the target is the point: its kept values need not stay
 * on the device, so the DP can keep more and recompute less, and the copies pay for
 * the difference where the compute hides them.
 */
#include "plan/dp_sim.h"
#include "plan/hybrid.h"
#include "plan/kusumoto.h"
#include "plan/offload.h"
#include "sched/schedule.h"
#include "sim/sim.h"

#include <math.h>

#define N_SWEEP 8
/* A sweep's DP visits the pairs of lower sets within its budget's window: past
 * SWEEP_PAIRS of them (graphs of thousands of nodes, at the larger budgets) it runs on
 * the family thinned to SWEEP_SETS sets (lsets_thin): at most about 2 10^6 pairs a run,
 * where the full family's took seconds to minutes (ResNet-2498: 72 s for the sweep).
 * Thinning from 250,000 pairs instead took ResNet-1001's plan at `min` from 1.3 to 0.5 s
 * but made its steps up to 2.7% slower at budgets a little above it (docs/planners.md,
 * "Eighth round"): a plan is trained on for hours, so the threshold stays. */
#define SWEEP_PAIRS 1000000
#define SWEEP_SETS 2048
#define N_RATIO 9
#define MAX_BASE (N_SWEEP + N_RATIO + 5) /* none, 2 keep sets, 2 least-memory chains */
/* SuperNeurons' memory-centric keep set recomputes, before each backward, what it reads
 * back to the nearest kept values: where no value on a long path is kept (the residual
 * stream of GPT-2 or ResNet), that is quadratic in the depth. Past MC_MAX_RUNS forward
 * runs per node it is left out (ResNet-1001: 94 a node; ResNet-2498: 227, 4.4 10^6
 * steps; GPT-2 of 1,000 layers: 490, 3.0 10^7 steps; GPT-2-48: 26, kept): there the
 * slowest base, its least peak with offload far above the least (0.52 GB against
 * 0.013 GB, 1.27 GB against 0.013 GB, 6.7 GB against 0.41 GB), and lowering, timing and
 * offloading it cost more than every other base together (GPT-2-1000: 1.8 of 4.0 s). */
#define MC_MAX_RUNS 64

struct hybrid_bases {
    remat_schedule *s[MAX_BASE];
    int n;
    /* per base, for every budget of one remat_plan: its simulated time without the host
     * tier (what any of its offloaded plans takes at least: copies only add stalls and
     * slow the compute they overlap) and, once a `--budget min` pass has found it, the
     * least peak it reaches with offload (SIZE_MAX: not yet known) */
    double alone[MAX_BASE];
    size_t least[MAX_BASE];
    /* an earlier base with the same steps (the keep sets by ratio often meet), whose
     * figures it shares and whose results it would repeat; -1 where none */
    int dup[MAX_BASE];
    bool timed;
    struct dp_progress pg;     /* while they are made (remat_plan_opts.progress) */
    const remat_allocator *al; /* of this struct */
};

/* Frees the bases and the struct. */
static void drop_bases(struct hybrid_bases *b);

/* Whether a and b are one schedule (all that the host tier and the simulator read). */
static bool same_sched(const remat_schedule *a, const remat_schedule *b)
{
    if (a->n != b->n || a->file_order != b->file_order || a->arena_cap != b->arena_cap ||
        a->held != b->held || a->algo || b->algo || a->scratch || b->scratch)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->steps[i].kind != b->steps[i].kind || a->steps[i].id != b->steps[i].id)
            return false;
    return true;
}

static remat_status add_base(const remat_tgraph *tg, struct hybrid_bases *b, remat_schedule *s)
{
    remat_status st = planner_finish(tg, &s);

    if (st) {
        remat_schedule_free(s);
        return st;
    }
    REMAT_ASSERT(b->n < MAX_BASE);
    if (b->pg.fn) /* the share of the bases made, for a progress line */
        b->pg.fn(b->pg.ud, "hybrid: the plans to start from", (double)(b->n + 1) / MAX_BASE);
    b->least[b->n] = SIZE_MAX;
    b->dup[b->n] = -1;
    for (int i = 0; i < b->n && b->dup[b->n] < 0; i++)
        if (b->dup[i] < 0 && same_sched(b->s[i], s))
            b->dup[b->n] = i;
    b->s[b->n++] = s;
    return REMAT_OK;
}

struct ratio {
    double r;   /* recomputation cost per byte */
    double m;   /* bytes */
};

static int cmp_ratio(const void *a, const void *b)
{
    double x = ((const struct ratio *)a)->r, y = ((const struct ratio *)b)->r;

    return (x > y) - (x < y);
}

/*
 * Keep sets by the cost of a byte: a node whose recomputation costs least per byte it
 * frees goes first (an attention's softmax, its dropout and GELU before the products
 * that feed them), N_RATIO sets dropping the cheapest 20%, 40%, 60% and 80% of the
 * forward bytes, each lowered as SuperNeurons' sets are (speed-centric). They find the
 * rules people write by hand (Megatron's selective recomputation of the attention core)
 * without being told.
 */
static remat_status ratio_bases(const remat_tgraph *tg, const struct dag *d, bool *kept,
                                struct hybrid_bases *b)
{
    struct ratio *r = core_calloc(d->al, (size_t)d->n + 1, sizeof *r);
    double total = 0, acc = 0, cut = -1;
    remat_schedule *s = NULL;
    remat_status st = REMAT_OK;
    int32_t i = 0;

    if (!r)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
    for (int32_t v = 0; v < d->n; v++) {
        r[v].r = d->m[v] ? d->t[v] / (double)d->m[v] : INFINITY;
        r[v].m = (double)d->m[v];
        total += r[v].m;
    }
    qsort(r, (size_t)d->n, sizeof *r, cmp_ratio);
    for (int k = 1; k <= N_RATIO && total > 0; k++) {
        /* the ratio below which the cheapest k / (N_RATIO + 1) of the bytes lie */
        while (i < d->n && acc < total * k / (N_RATIO + 1)) {
            cut = r[i].r;
            acc += r[i++].m;
        }
        for (int32_t v = 0; v < d->n; v++)
            kept[v] = !(d->m[v] && d->t[v] / (double)d->m[v] <= cut);
        if ((st = lower_keep(tg, d, kept, false, &s)) || (st = add_base(tg, b, s)))
            break;
    }
    core_free(d->al, r, sizeof *r * ((size_t)d->n + 1));
    return st;
}

remat_status hybrid_mc_runs(const remat_tgraph *tg, const struct dag *d, const bool *kept,
                            int64_t cap, int64_t *runs)
{
    int32_t *mark = core_calloc(d->al, 2 * ((size_t)d->n + 1), sizeof *mark);
    int32_t *stack = mark + d->n + 1; /* each node once per backward */

    *runs = d->n;
    if (!mark)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
    for (int32_t v = 0; v < d->n; v++)
        mark[v] = -1;
    for (int32_t v = d->n; v-- > 0 && *runs <= cap;) {
        const struct top *op = &tg->ops[d->op[v]];

        for (int32_t i = 0; op->has_bwd && i < op->n_saved; i++) {
            int32_t p = tg->values[tg->values[op->saved[i]].buf].producer, top = 0;

            if (p < 0 || kept[d->node[p]] || mark[d->node[p]] == v)
                continue;
            mark[stack[top++] = d->node[p]] = v; /* v: recomputed since v's backward */
            while (top > 0) {
                int32_t u = stack[--top];

                ++*runs;
                for (int32_t e = d->pred_at[u]; e < d->pred_at[u + 1]; e++)
                    if (!kept[d->pred[e]] && mark[d->pred[e]] != v)
                        mark[stack[top++] = d->pred[e]] = v;
            }
        }
    }
    core_free(d->al, mark, 2 * ((size_t)d->n + 1) * sizeof *mark);
    return REMAT_OK;
}

/* The time-centric chains at N_SWEEP budgets from lo to hi (geometric), each run of the
 * DP a job of its own (core_par_run: they are independent and the slowest, ResNet-2498's
 * sweep 0.55 of 1.0 s), lowered and added in budget order. Past DP_SIM_MAX_NODES nodes
 * the runs above the least budget join long blocks from coarse sets only (dp_coarse.h,
 * coarse_at 1): the same simulated step time on the four graphs measured at five budgets
 * each (docs/planners.md, "Seventeenth round"), the sweep 0.9 -> 0.3 s on ResNet-1001;
 * the run at the least budget, where a narrow window loses plans to the restriction,
 * visits every pair. Past DP_SIM_MAX_NODES too, those runs end with a chain proven within
 * SWEEP_WITHIN of the optimum's overhead where the DP's beam finds one
 * (kusumoto_plan_within): a base is only where offloading starts. */
#define SWEEP_WITHIN 1e-3

struct sweep {
    const struct dag *d;
    const struct lsets *ls[N_SWEEP];
    size_t at[N_SWEEP];
    struct chain c[N_SWEEP];
    struct dp_result res[N_SWEEP];
    struct core_job_err err[N_SWEEP];
};

/* The order the jobs start in: the middle budgets first, which cost most (their
 * frontiers are the widest: GPT-2-1000's fourth of eight took 1.1 s, the others 0.001-0.6
 * s), so that the cheap ones fill in around them on two cores. */
static const int sweep_order[N_SWEEP] = {3, 4, 2, 5, 1, 6, 0, 7};

static bool sweep_coarse = true, sweep_near = true; /* hybrid_set_sweep_coarse, _near */

void hybrid_set_sweep_coarse(bool on)
{
    sweep_coarse = on;
}

void hybrid_set_sweep_near(bool on)
{
    sweep_near = on;
}

static void sweep_job(void *ctx, int k)
{
    struct sweep *w = ctx;
    int j = sweep_order[k];
    bool large = j > 0 && w->d->n > DP_SIM_MAX_NODES;
    int64_t coarse_at = sweep_coarse && large; /* 1 or 0 */

    core_job_err_note(&w->err[j],
                      kusumoto_plan_within(w->d, w->ls[j], w->at[j], coarse_at,
                                           sweep_near && large ? SWEEP_WITHIN : 0, &w->c[j],
                                           &w->res[j]));
}

static remat_status sweep(const remat_tgraph *tg, const struct dag *d, const struct lsets *ls,
                          struct lsets *thin, size_t lo, size_t hi, struct hybrid_bases *b)
{
    struct sweep w = {.d = d};
    size_t nb = (size_t)d->n + 1;
    remat_schedule *s;
    remat_status st = REMAT_OK;

    for (int j = 0; j < N_SWEEP; j++) {
        double f = (double)j / (N_SWEEP - 1);

        w.at[j] = (size_t)((double)lo * pow((double)hi / (double)lo, f));
        w.ls[j] = ls;
        if (ls->n > SWEEP_SETS && kusumoto_pairs(ls, w.at[j]) > SWEEP_PAIRS) {
            if (!thin->n && (st = lsets_thin(d, ls, SWEEP_SETS, thin)))
                goto out;
            w.ls[j] = thin;
        }
        w.c[j].block = core_calloc(d->al, nb, sizeof *w.c[j].block);
        w.c[j].kept = core_calloc(d->al, nb, sizeof *w.c[j].kept);
        if (!w.c[j].block || !w.c[j].kept) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
            goto out;
        }
    }
    core_par_run(N_SWEEP, core_par_threads_with(d->al), sweep_job, &w);
    for (int j = 0; j < N_SWEEP && !st; j++) {
        if (w.err[j].st)
            st = core_job_err_raise(&w.err[j]);
        else if (w.res[j].feasible &&
                 (st = chain_lower(tg, d, &w.c[j], &s)) == REMAT_OK)
            st = add_base(tg, b, s);
    }
out:
    for (int j = 0; j < N_SWEEP; j++) {
        core_free(d->al, w.c[j].block, sizeof *w.c[j].block * nb);
        core_free(d->al, w.c[j].kept, sizeof *w.c[j].kept * nb);
        core_job_err_clear(&w.err[j]);
    }
    return st;
}

/* The plans to start from. */
static remat_status make_bases(const remat_tgraph *tg, struct hybrid_bases *b)
{
    struct dag d;
    struct lsets ls = {0}, ls2 = {0}, thin = {0};
    struct dp_pairs pc = {0};
    struct chain c = {0, NULL, NULL};
    struct dp_result res;
    size_t lo = 0, hi = 0;
    bool *kept = NULL;
    remat_schedule *s = NULL;
    remat_status st;

    if ((st = dag_build(tg, &d)))
        return st;
    c.block = core_calloc(d.al, (size_t)d.n + 1, sizeof *c.block);
    c.kept = core_calloc(d.al, (size_t)d.n + 1, sizeof *c.kept);
    kept = core_calloc(d.al, (size_t)d.n + 1, sizeof *kept);
    if (!c.block || !c.kept || !kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    if ((st = remat_plan_none(tg, &s)) || (st = add_base(tg, b, s)))
        goto out;
    hi = SIZE_MAX;
    if ((st = planner_sim_peak(tg, b->s[0], &hi)))
        goto out;
    for (int32_t v = 0; v < d.n; v++)
        kept[v] = planner_is_checkpoint(&tg->ops[d.op[v]]); /* SuperNeurons' keep sets */
    for (int k = 0; k < 2; k++) {
        int64_t runs = 0, cap = (int64_t)MC_MAX_RUNS * d.n;

        if (k == 1 && (st = hybrid_mc_runs(tg, &d, kept, cap, &runs)))
            goto out;
        if (runs > cap)
            break;
        if ((st = lower_keep(tg, &d, kept, k == 1, &s)) || (st = add_base(tg, b, s)))
            goto out;
    }
    if ((st = ratio_bases(tg, &d, kept, b)))
        goto out;
    /* the DP's chains */
    if ((st = lsets_build(&d, LS_APPROX, NULL, 0, &ls)) ||
        (st = kusumoto_min_budget_pairs(&d, &ls, NULL, &lo, &pc, 0)))
        goto out;
    if ((st = kusumoto_plan_pairs(&d, &ls, true, lo, 0, NULL, &pc, 0, &c, &res)))
        goto out;
    dp_pairs_fini(&pc); /* the sweep's runs are at budgets above theirs */
    if (res.feasible && ((st = chain_lower(tg, &d, &c, &s)) || (st = add_base(tg, b, s))))
        goto out;
    if (hi > lo && lo > 0 && (st = sweep(tg, &d, &ls, &thin, lo, hi, b)))
        goto out;
    /* the least-memory chain again, judged by the simulator's model (dp_sim.h), whose
     * least plan needs less than the paper bound's (the sweep above keeps the faster
     * bound) */
    if (d.n <= DP_SIM_MAX_NODES &&
        ((st = lsets_build(&d, LS_APPROX, NULL, 0, &ls2)) ||
         (st = dp_sim_new(tg, &d, &ls2, &ls2.sim)) ||
         (st = kusumoto_min_budget(&d, &ls2, NULL, &lo)) ||
         (st = kusumoto_plan(&d, &ls2, true, lo, 0, NULL, &c, &res)) ||
         (res.feasible && ((st = chain_lower(tg, &d, &c, &s)) || (st = add_base(tg, b, s))))))
        goto out;
out:
    core_free(d.al, c.block, sizeof *c.block * ((size_t)d.n + 1));
    core_free(d.al, c.kept, sizeof *c.kept * ((size_t)d.n + 1));
    core_free(d.al, kept, sizeof *kept * ((size_t)d.n + 1));
    dp_pairs_fini(&pc);
    dp_sim_free(ls2.sim);
    lsets_fini(&ls2);
    lsets_fini(&thin);
    lsets_fini(&ls);
    dag_fini(&d);
    return st;
}

static void free_bases(struct hybrid_bases *b)
{
    for (int i = 0; i < b->n; i++)
        remat_schedule_free(b->s[i]);
    b->n = 0;
}

/* The least peak base s reaches (every value a candidate for the host tier). */
static remat_status least_peak(const remat_tgraph *tg, const remat_plan_opts *o,
                               const remat_schedule *base, size_t *peak)
{
    *peak = SIZE_MAX;
    if (o->no_offload)
        return planner_sim_peak(tg, base, peak);
    return plan_offload_peak(tg, base, 0, o->bandwidth, o->flops, o->copy_slowdown, peak);
}

/* least_peaks' jobs: base i's least peak, each into its own slot. */
struct least_jobs {
    const remat_tgraph *tg;
    const remat_plan_opts *o;
    struct hybrid_bases *b;
    struct core_job_err err[MAX_BASE];
};

static void least_job(void *ctx, int i)
{
    struct least_jobs *w = ctx;

    if (w->b->least[i] == SIZE_MAX && w->b->dup[i] < 0)
        core_job_err_note(&w->err[i], least_peak(w->tg, w->o, w->b->s[i], &w->b->least[i]));
}

/* Every base's least peak with offload (once a remat_plan): the bases' jobs on the cores
 * (independent: GPT-2-1000's nineteen took 0.21 s in one thread), a base like an earlier
 * one given that one's. */
static remat_status least_peaks(const remat_tgraph *tg, const remat_plan_opts *o,
                                struct hybrid_bases *b)
{
    struct least_jobs w = {tg, o, b, {{0}}};
    remat_status st = REMAT_OK;

    core_par_run(b->n, core_par_threads_with(tgraph_al(tg)), least_job, &w);
    for (int i = 0; i < b->n; i++) {
        if (st) /* the first failure's message stands */
            core_job_err_clear(&w.err[i]);
        else
            st = core_job_err_raise(&w.err[i]);
        if (b->least[i] == SIZE_MAX && b->dup[i] >= 0)
            b->least[i] = b->least[b->dup[i]];
    }
    return st;
}

static void drop_bases(struct hybrid_bases *b)
{
    if (b) {
        free_bases(b);
        core_free(b->al, b, sizeof *b);
    }
}

void hybrid_memo_fini(struct plan_memo *m)
{
    if (m) {
        drop_bases(m->hybrid);
        m->hybrid = NULL;
    }
}

/* The bases, from the memo when it has them (kept there when it is given). */
static remat_status get_bases(const remat_tgraph *tg, const remat_plan_opts *o,
                              struct plan_memo *memo, struct hybrid_bases **b)
{
    remat_status st;

    if (memo && memo->hybrid) {
        *b = memo->hybrid;
        return REMAT_OK;
    }
    if (!(*b = core_calloc(tgraph_al(tg), 1, sizeof **b)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
    (*b)->al = tgraph_al(tg);
    (*b)->pg = (struct dp_progress){o->progress, o->progress_ud, NULL};
    if ((st = make_bases(tg, *b))) {
        drop_bases(*b);
        *b = NULL;
        return st;
    }
    if (memo)
        memo->hybrid = *b;
    return REMAT_OK;
}

remat_status plan_hybrid(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                         remat_schedule **out, remat_plan_info *info, struct plan_memo *memo)
{
    struct hybrid_bases *bp = NULL;
    remat_schedule *fitted = NULL;
    remat_sim_opts so = {o->bandwidth, o->flops, o->copy_slowdown};
    remat_sim_result best = {0}, r;
    remat_plan_info pi = {0};
    remat_status st;
    size_t target = *budget;

    *out = NULL;
    if ((st = get_bases(tg, o, memo, &bp)))
        return st;
    REMAT_ASSERT(bp);
    if (!bp->timed) {
        for (int i = 0; i < bp->n; i++) {
            if (bp->dup[i] >= 0) {
                bp->alone[i] = bp->alone[bp->dup[i]];
                continue;
            }
            if ((st = sim_seconds_alone(tg, bp->s[i], &so, &bp->alone[i])))
                goto out;
        }
        bp->timed = true;
    }
    if (o->budget_min) {
        /* the least peak any base reaches, every value a candidate */
        if ((st = least_peaks(tg, o, bp)))
            goto out;
        target = SIZE_MAX;
        for (int i = 0; i < bp->n; i++)
            target = bp->least[i] < target ? bp->least[i] : target;
        *budget = target;
    }
    /* at a given budget, one more base: a plan fitted to it */
    if (!o->budget_min && target < SIZE_MAX / 4 && (st = hybrid_fit(tg, target, &fitted)))
        goto out;
    for (int i = 0; i <= bp->n; i++) {
        const remat_schedule *base = i < bp->n ? bp->s[i] : fitted;
        remat_schedule *s = NULL;
        size_t t = target;

        if (o->progress)
            o->progress(o->progress_ud, "hybrid: each plan with the host tier",
                        (double)i / (bp->n + 1));
        /* skipped, as they could not win: a base whose least peak passes the target, or
         * that alone takes longer than the best so far (a tie on time could win on peak),
         * or one like an earlier base (its plan, tried or skipped there, would tie the
         * best on time and peak, which loses) */
        if (!base || (i < bp->n && (bp->dup[i] >= 0 ||
                                    (bp->least[i] != SIZE_MAX && bp->least[i] > target) ||
                                    (*out && o->copy_slowdown >= 0 &&
                                     bp->alone[i] > best.total_seconds))))
            continue;
        if (o->no_offload) {
            if ((st = schedule_copy(base, &s)))
                goto out;
            pi.n_offloaded = 0;
            pi.offloaded_bytes = 0;
        } else if ((st = plan_offload(tg, base, NULL, &t, o->bandwidth, o->flops,
                                      o->copy_slowdown, &s, &pi))) {
            goto out;
        }
        if ((st = remat_sim_run_opts(tg, s, &so, &r))) {
            remat_schedule_free(s);
            goto out;
        }
        if (r.activation_peak_bytes > target ||
            (*out && (r.total_seconds > best.total_seconds ||
                      (r.total_seconds == best.total_seconds &&
                       r.activation_peak_bytes >= best.activation_peak_bytes)))) {
            remat_schedule_free(s);
            continue;
        }
        remat_schedule_free(*out);
        *out = s;
        best = r;
        info->n_offloaded = pi.n_offloaded;
        info->offloaded_bytes = pi.offloaded_bytes;
    }
    if (!*out) {
        size_t least = SIZE_MAX;

        /* nothing fits: the least peak reachable, for the message */
        for (int i = 0; i < bp->n && !st; i++) {
            size_t peak = bp->least[i];

            if ((peak != SIZE_MAX || !(st = least_peak(tg, o, bp->s[i], &peak))))
                least = peak < least ? peak : least;
        }
        if (!st)
            info->activation_budget_bytes = least; /* what it needs: plan_fit goes there */
        if (!st)
            st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "hybrid: no plan fits an activation budget "
                            "of %zu bytes; the least peak it reaches is %zu bytes%s", target,
                            least, o->no_offload ? " without offload" : " with offload");
    }
out:
    remat_schedule_free(fitted);
    if (!memo)
        drop_bases(bp);
    return st;
}
