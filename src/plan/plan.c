/*
 * plan.c - remat_plan: budgets (totals minus resident bytes), the strategy table and
 * the search for the smallest feasible budget.
 */
#include "plan/planners.h"
#include "mem/layout.h"
#include "plan/algos.h"

#include <stdio.h>
#include <string.h>

remat_status planner_sim_peak(const remat_tgraph *tg, const remat_schedule *s, size_t *peak)
{
    remat_sim_result r;
    remat_status st = remat_sim_run(tg, s, &r);

    *peak = st ? SIZE_MAX : r.activation_peak_bytes;
    return st;
}

static bool is_dp(remat_strategy s)
{
    return s == REMAT_STRATEGY_APPROX_TC || s == REMAT_STRATEGY_APPROX_MC ||
           s == REMAT_STRATEGY_EXACT_TC || s == REMAT_STRATEGY_EXACT_MC;
}

/* The last pass of every plan of a graph that can be trained: the same gradient bits
 * from every plan (plan_canonical_grads). Dumps have no kernels to run. */
remat_status planner_finish(const remat_tgraph *tg, remat_schedule **s)
{
    remat_schedule *c = NULL;
    remat_status st;

    if (tg->file_order || !*s)
        return REMAT_OK;
    for (size_t i = 0; i < (*s)->n; i++)
        if ((*s)->steps[i].kind >= REMAT_STEP_OFFLOAD)
            return REMAT_OK; /* host steps are placed on a finished plan (plan_offload) */
    if ((st = plan_canonical_grads(tg, *s, &c)))
        return st;
    remat_schedule_free(*s);
    *s = c;
    return REMAT_OK;
}

void plan_memo_fini(struct plan_memo *m)
{
    if (m) {
        hybrid_memo_fini(m);
        dp_memo_fini(m);
    }
}

/* Chen's and SuperNeurons' planners on the planners' graph. */
static remat_status plan_heuristic(const remat_tgraph *tg, const remat_plan_opts *o,
                                   size_t budget, remat_schedule **out, remat_plan_info *info)
{
    struct dag d;
    remat_status st;

    if ((st = dag_build(tg, &d)))
        return st;
    if (o->strategy == REMAT_STRATEGY_SUPERNEURONS)
        st = plan_superneurons(tg, &d, o, budget, out, info);
    else if (o->strategy == REMAT_STRATEGY_BLOCKS || o->strategy == REMAT_STRATEGY_SELECTIVE)
        st = plan_rules(tg, &d, o->strategy, out);
    else
        st = plan_chen(tg, &d, o->strategy == REMAT_STRATEGY_CHEN_GREEDY, budget, out, info);
    dag_fini(&d);
    return st;
}

/*
 * `optimal` returns the MILP's plan unless another strategy recomputes less within the
 * same activation budget: the MILP's memory model is stricter than the simulator's on
 * some graphs (a backward stage's gradients are all counted at once), so on those its
 * proven optimum is not the simulator's. The plan returned is the best known.
 */
#define OTHERS_DP_MAX_VALUES 400

static remat_status best_of_others(const remat_tgraph *tg, size_t budget, remat_schedule **out,
                                   remat_plan_info *info)
{
    /* Above OTHERS_DP_MAX_VALUES, of the DPs only approx-tc at the budget (the least
     * recomputation they reach there): the exact DPs' families run to tens of thousands
     * of lower sets, and each DP run with the simulator's model takes some 16 s on a
     * random layered graph of 1,000 nodes, where approx-tc recomputes 0.219 of the
     * forward at 0.8 of its peak against the MILP's heuristics' 0.37 in 300 s. */
    bool big = tg->n_values > OTHERS_DP_MAX_VALUES;
    remat_sim_result best;
    remat_status st;

    if ((st = remat_sim_run(tg, *out, &best)))
        return st;
    /* Each strategy at this budget and at its own minimum (which may fit too). */
    for (int k = 0; k < 2 * REMAT_STRATEGY_OPTIMAL; k++) {
        remat_plan_opts o = {.strategy = (remat_strategy)(k / 2), .max_lower_sets = 20000,
                             .budget_min = k % 2 == 1,
                             .budget_bytes = k % 2 ? 0 : budget + tg->resident_bytes};
        remat_schedule *c = NULL;
        remat_sim_result r;

        if (big && o.strategy >= REMAT_STRATEGY_APPROX_TC &&
            o.strategy <= REMAT_STRATEGY_EXACT_MC &&
            (o.strategy != REMAT_STRATEGY_APPROX_TC || o.budget_min))
            continue;
        if (budget >= SIZE_MAX / 4 || remat_plan(tg, &o, &c, NULL) || remat_sim_run(tg, c, &r) ||
            r.activation_peak_bytes > budget || r.overhead >= best.overhead) {
            remat_schedule_free(c);
            continue;
        }
        remat_schedule_free(*out);
        *out = c;
        best = r;
        info->optimality_gap = -1; /* the MILP's plan was not the best: no proven gap */
    }
    core_clear_error();
    return REMAT_OK;
}

/* A planner: decisions at the activation budget *budget (SIZE_MAX / 4: none), or its
 * least peak when o->budget_min (then *budget becomes that peak where it searches). */
typedef remat_status (*planner_fn)(const remat_tgraph *tg, const remat_plan_opts *o,
                                   size_t *budget, remat_schedule **out,
                                   remat_plan_info *info, struct plan_memo *memo);

static remat_status run_none(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                             remat_schedule **out, remat_plan_info *info,
                             struct plan_memo *memo)
{
    return remat_plan_none(tg, out);
}

static remat_status run_dp(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                           remat_schedule **out, remat_plan_info *info,
                             struct plan_memo *memo)
{
    return plan_dp(tg, o, tg->resident_bytes, budget, out, info, memo);
}

static remat_status run_heuristic(const remat_tgraph *tg, const remat_plan_opts *o,
                                  size_t *budget, remat_schedule **out, remat_plan_info *info,
                             struct plan_memo *memo)
{
    /* a budget of 0 makes them take their least-peak variant */
    return plan_heuristic(tg, o, o->budget_min ? 0 : *budget, out, info);
}

static remat_status run_optimal(const remat_tgraph *tg, const remat_plan_opts *o,
                                size_t *budget, remat_schedule **out, remat_plan_info *info,
                             struct plan_memo *memo)
{
    remat_status st = planner_other(tg, o, budget, out, info);

    return st ? st : best_of_others(tg, *budget, out, info);
}

static const planner_fn planners[] = {
    [REMAT_STRATEGY_NONE] = run_none,
    [REMAT_STRATEGY_APPROX_TC] = run_dp,
    [REMAT_STRATEGY_APPROX_MC] = run_dp,
    [REMAT_STRATEGY_EXACT_TC] = run_dp,
    [REMAT_STRATEGY_EXACT_MC] = run_dp,
    [REMAT_STRATEGY_CHEN_SQRTN] = run_heuristic,
    [REMAT_STRATEGY_CHEN_GREEDY] = run_heuristic,
    [REMAT_STRATEGY_SUPERNEURONS] = run_heuristic,
    [REMAT_STRATEGY_OPTIMAL] = run_optimal,
    [REMAT_STRATEGY_HYBRID] = plan_hybrid,
    [REMAT_STRATEGY_BLOCKS] = run_heuristic,
    [REMAT_STRATEGY_SELECTIVE] = run_heuristic,
};
_Static_assert(REMAT_ARRAY_LEN(planners) == REMAT_STRATEGY_COUNT, "a planner per strategy");

/* The last attempt that packed: its finished schedule (the strategy's steps, with the
 * kernels chosen and the arena's limit), the kernels' cap, its simulated peak and the
 * layout's figures. A strategy asked for a little less often gives the same plan (hybrid
 * between its bases, a DP whose chain fits both budgets): that plan is then not given
 * kernels and packed again (GPT-2-1000's hybrid plan: 0.4 s a packing). */
struct last_try {
    remat_schedule *done;
    size_t cap, plan_peak, peak; /* the peak before the kernels' choice and after */
    remat_plan_info info;
};

/* What every attempt shares: the options, the kernels' rule and the time spent. */
struct planning {
    const remat_tgraph *tg;
    remat_plan_opts o;
    struct plan_memo *memo; /* what the planner keeps between attempts */
    int32_t force;         /* the kernels' rule (algos.h) */
    size_t reserve;        /* the largest least scratch of an op under that rule */
    bool least;            /* budget min */
    struct last_try *last; /* NULL: none kept */
};

/* Whether s, as the strategy gave it, is the last attempt's plan at the same cap. */
static bool last_same(const struct planning *p, const remat_schedule *s, size_t cap)
{
    const struct last_try *l = p->last;

    return l && l->done && l->cap == cap && l->done->n == s->n &&
           !memcmp(l->done->steps, s->steps, sizeof *s->steps * s->n);
}

/* Keeps a copy of the finished schedule s as the last attempt (none when out of memory:
 * the next attempt then packs as before). */
static void last_keep(const struct planning *p, const remat_schedule *s, size_t cap,
                      size_t plan_peak, size_t peak, const remat_plan_info *info)
{
    struct last_try *l = p->last;

    if (!l)
        return;
    remat_schedule_free(l->done);
    l->done = NULL;
    if (!schedule_copy(s, &l->done)) {
        l->cap = cap;
        l->plan_peak = plan_peak;
        l->peak = peak;
        l->info = *info;
    }
}

/* The last attempt's result for its plan again, asked at activation budget act (or its
 * least, least): refused when its peak passes act; else its finished schedule in *out
 * (the strategy's copy freed) and the layout's figures in info beside what the strategy
 * filled in. */
static remat_status reuse(const struct planning *p, bool least, size_t act,
                          remat_schedule **out, remat_plan_info *info, size_t *peak_out)
{
    const struct last_try *l = p->last;
    remat_status st;

    remat_schedule_free(*out);
    *out = NULL;
    if (!least && l->plan_peak > act) {
        info->activation_budget_bytes = l->plan_peak;
        return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: the plan's simulated peak of %zu bytes "
                          "is above the activation budget of %zu bytes",
                          remat_strategy_name(p->o.strategy), l->plan_peak, act);
    }
    if ((st = schedule_copy(l->done, out)))
        return st;
    info->n_algo_choices = l->info.n_algo_choices;
    info->n_algo_fastest = l->info.n_algo_fastest;
    info->n_moves = l->info.n_moves;
    info->moved_bytes = l->info.moved_bytes;
    info->arena_bytes = l->info.arena_bytes;
    info->host_arena_bytes = l->info.host_arena_bytes;
    info->total_bytes = l->info.total_bytes;
    info->activation_budget_bytes = least ? l->peak : act;
    info->feasible = true;
    if (peak_out)
        *peak_out = l->peak;
    return REMAT_OK;
}

/*
 * Lays out a plan. With a budget (cap below SIZE_MAX), its arena is held near the bytes
 * live at its busiest step by moving live instances (layout_build_held) where the
 * packer's offsets end more than 1/64 above that load: then within 1% of it. A rule of
 * the plan alone, not of the budget, so that a plan is judged alike wherever it is
 * tried and `--budget min` stays the least total that plan_fit can reach. The limit
 * and the rule go into the schedule (arena_cap, held), so that the trainer's layout packs
 * and moves the same: past PACK_QUICK_MIN instances the full packing could end lower
 * than the greedy passes (GPT-2-200's chen-sqrtn plan: 1,730,322,432 against
 * 1,732,911,104 bytes), and the arena trained in would not be the one planned. No
 * budget (cap SIZE_MAX): nothing moves.
 */
static remat_status lay_out(const remat_tgraph *tg, size_t cap, remat_schedule *s,
                            struct layout *lay)
{
    size_t limit = 0;
    remat_status st;

    s->held = false;
    if (cap == SIZE_MAX)
        return layout_build(tg, s, ARENA_ALIGN, lay);
    if (!(st = layout_build_held(tg, s, ARENA_ALIGN, lay, &limit))) {
        if (limit)
            s->arena_cap = limit;
        s->held = true; /* the trainer's layout the same (layout_build) */
    }
    return st;
}

/* What a block of n bytes takes of the total: n, or its whole pages (with none below
 * one: a backend allocates at least one) when the blocks are pages of host memory. */
static size_t held(const remat_plan_opts *o, size_t n)
{
    return o->whole_pages ? core_pages_held(n) : n;
}

/*
 * One attempt: the strategy at activation budget act (its least peak when least), the
 * kernels chosen within cap bytes (SIZE_MAX: none; 0: each step its least scratch),
 * and the result packed. Fills info (its total_bytes: what training allocates).
 * REMAT_ERR_INFEASIBLE when the strategy's plan passes act.
 */
static remat_status attempt(const struct planning *p, bool least, size_t act, size_t cap,
                            remat_schedule **out, remat_plan_info *info, size_t *peak_out)
{
    const remat_tgraph *tg = p->tg;
    remat_plan_opts o = p->o;
    size_t budget = least ? SIZE_MAX / 4 : act, peak, plan_peak;
    struct layout lay;
    remat_status st;

    memset(info, 0, sizeof *info);
    info->scratch_reserve_bytes = p->reserve;
    o.budget_min = least;
    *out = NULL;
    if ((st = planners[o.strategy](tg, &o, &budget, out, info, p->memo)))
        goto fail;
    if (!is_dp(o.strategy) && (st = planner_finish(tg, out)))
        goto fail;
    if (last_same(p, *out, cap)) /* as packed before */
        return reuse(p, least, act, out, info, peak_out);
    /* every plan is measured by the simulator; a plan above its budget is refused */
    if ((st = planner_sim_peak(tg, *out, &peak)))
        goto fail;
    if (!least && peak > act) {
        info->activation_budget_bytes = peak; /* what it needs */
        st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: the plan's simulated peak of %zu bytes is "
                        "above the activation budget of %zu bytes",
                        remat_strategy_name(o.strategy), peak, act);
        goto fail;
    }
    plan_peak = peak;
    if (o.algos &&
        ((st = algos_choose(tg, o.algos, p->force, least ? 0 : cap, *out,
                            &info->n_algo_choices, &info->n_algo_fastest)) ||
         (st = planner_sim_peak(tg, *out, &peak))))
        goto fail;
    if ((st = lay_out(tg, cap, *out, &lay)))
        goto fail;
    info->n_moves = (int32_t)lay.moves.n;
    info->moved_bytes = lay.moves.bytes;
    info->arena_bytes = lay.arena_bytes;
    info->host_arena_bytes = lay.host_bytes;
    layout_fini(&lay);
    info->activation_budget_bytes = least ? peak : act;
    info->total_bytes = held(&o, info->arena_bytes) + held(&o, tg->resident_bytes) +
                        (o.host_in_budget && info->host_arena_bytes
                             ? held(&o, info->host_arena_bytes) : 0);
    info->feasible = true;
    if (peak_out)
        *peak_out = peak;
    last_keep(p, *out, cap, plan_peak, peak, info);
    return REMAT_OK;
fail:
    remat_schedule_free(*out);
    *out = NULL;
    return st;
}

/*
 * Budget min: the plan of least packed total the strategy reaches, with each step's
 * least scratch; its total is the budget reported, and plan_fit ends with this same
 * search, so it accepts every budget from that total up.
 *
 * The strategy's least-peak plan comes first. Where its arena packs above its peak (the
 * offloading strategies' least plans interleave lifetimes that no offsets pack tightly),
 * a plan allowed more activation bytes may pack into less: activation budgets from the
 * arena down to the peak in LEAST_TRIES steps while each gains, then each best arena
 * less 1/64 while that gains; the least total wins (on a tie, the lower arena / peak).
 */
#define LEAST_TRIES 8
#define LEAST_REFINE 4

struct candidate {
    remat_schedule *s;
    remat_plan_info info;
    size_t peak; /* its simulated peak */
};

static bool better(const struct candidate *x, const struct candidate *best)
{
    if (x->info.total_bytes != best->info.total_bytes)
        return x->info.total_bytes < best->info.total_bytes;
    /* arena / peak, compared without division */
    return (double)x->info.arena_bytes * (double)best->peak <
           (double)best->info.arena_bytes * (double)x->peak;
}

/* Tries the strategy at activation budget a (each step's least scratch) and keeps the
 * result in *best when it is better; false when it was not. */
static bool try_least(const struct planning *p, size_t a, struct candidate *best)
{
    struct candidate c = {0};

    if (attempt(p, false, a, 0, &c.s, &c.info, &c.peak) || !better(&c, best)) {
        remat_schedule_free(c.s);
        return false;
    }
    remat_schedule_free(best->s);
    *best = c;
    return true;
}

static remat_status plan_least(const struct planning *p, size_t *B, remat_schedule **out,
                               remat_plan_info *info)
{
    struct candidate best = {0};
    remat_status st = attempt(p, true, 0, 0, &best.s, &best.info, &best.peak);
    size_t peak = best.peak, arena = best.info.arena_bytes;

    *B = 0;
    *out = NULL;
    if (st) {
        *info = best.info;
        return st;
    }
    if (arena > peak + peak / 64 && !p->o.least_peak) {
        /* from the arena down: a plan allowed nearly the arena packs to about its budget,
         * and less allows less until the packing loses; stop at the first that gains
         * nothing (a strategy whose plans all pack alike costs one attempt) */
        for (int k = LEAST_TRIES - 1; k >= 1; k--)
            if (!try_least(p, peak + (arena - peak) / LEAST_TRIES * (size_t)k, &best))
                break;
        for (int k = 0; k < LEAST_REFINE && best.info.arena_bytes > 64; k++)
            if (!try_least(p, best.info.arena_bytes - best.info.arena_bytes / 64, &best))
                break;
    }
    /* the budget just below the best arena, while the arena passes the peak or the
     * peak passes the planner's own bound: a plan allowed that much may need less (the
     * packing, or a DP whose model misjudged its least plan, which then peaks above the
     * plan it finds at a larger budget) */
    for (int k = 0; k < LEAST_REFINE && !p->o.least_peak &&
                    (best.info.arena_bytes > best.peak ||
                     (best.info.dp_bound_bytes && best.peak > best.info.dp_bound_bytes));
         k++)
        if (!try_least(p, best.info.arena_bytes - 1, &best))
            break;
    *out = best.s;
    *info = best.info;
    *B = info->total_bytes;
    return REMAT_OK;
}

/*
 * The plan whose packed arena and resident bytes fit the total budget B: the strategy
 * plans at an activation budget a, first B minus the resident bytes and the kernels'
 * reserve; a packed result above B lowers a by the excess, and when its simulated
 * peak is the last packed result's, or a less the excess still holds that peak, lowers
 * the peak by the excess (a below a plan's peak is what changes the plan: GPT-2-1000's
 * approx-tc plan at 0.5% of the way from its least budget to `none`'s, 2.7 MB below a
 * and packed 59 KB above B, came back for 40 attempts, after which the least plan was
 * taken, overhead 0.931 in 3.7 s; at 1% and 1.4% it came back once, 0.24 s, before the
 * peak was lowered); a strategy that cannot plan at a raises it to what it needs (else
 * bisection between the two, at most 40 attempts). Last, the strategy's least-peak plan
 * with each step's least scratch, which fits every budget from its own total up: so the
 * total budget min reports is one this accepts.
 */
static remat_status plan_fit(const struct planning *p, size_t B, remat_schedule **out,
                             remat_plan_info *info)
{
    size_t avail = B - p->tg->resident_bytes, lo = 0, hi = avail + 1;
    size_t a = avail > p->reserve ? avail - p->reserve : avail / 2, least, last_peak = 0;
    remat_status st = REMAT_OK;

    for (int k = 0; k < 40 && lo + 1 < hi; k++) {
        size_t next, peak = 0, over, from;

        st = attempt(p, false, a, avail, out, info, &peak);
        if (!st && info->total_bytes <= B)
            return REMAT_OK;
        if (st && st != REMAT_ERR_INFEASIBLE)
            return st;
        if (st) { /* the strategy needs more than a: what it said, or halfway */
            lo = a;
            next = info->activation_budget_bytes;
            if (next <= lo || next >= hi)
                next = lo + (hi - lo) / 2;
        } else { /* packed, it passes B: the excess off a, or off the peak where that
                    is seen again or a less the excess still holds it */
            hi = a;
            remat_schedule_free(*out);
            *out = NULL;
            over = info->total_bytes - B;
            from = peak < a && (peak == last_peak || a - over >= peak) ? peak : a;
            last_peak = peak;
            next = over < from ? from - over : 0;
            if (next <= lo)
                next = lo + (hi - lo) / 2;
        }
        a = next;
    }
    if ((st = plan_least(p, &least, out, info)))
        return st;
    if (least <= B)
        return REMAT_OK;
    remat_schedule_free(*out);
    *out = NULL;
    return REMAT_ERR_INFEASIBLE;
}

/* The refusal of budget B: the smallest total that works, when it can be found. */
static remat_status refuse(const struct planning *p, size_t B)
{
    remat_schedule *s = NULL;
    remat_plan_info info;
    size_t least = 0;
    char why[512];

    snprintf(why, sizeof why, "%s", remat_errmsg());
    if (plan_least(p, &least, &s, &info))
        return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: no plan fits a budget of %zu bytes in "
                          "total (%s)", remat_strategy_name(p->o.strategy), B, why);
    remat_schedule_free(s);
    return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: no plan fits a budget of %zu bytes in total "
                      "(packed arena with the kernels' scratch, plus %zu resident bytes); "
                      "the smallest that fits is %zu bytes", remat_strategy_name(p->o.strategy),
                      B, p->tg->resident_bytes, least);
}

remat_status remat_plan(const remat_tgraph *tg, const remat_plan_opts *o, remat_schedule **out,
                        remat_plan_info *info)
{
    remat_plan_info dummy;
    struct plan_memo memo = {0};
    struct last_try last = {0};
    struct planning p = {tg, {0}, &memo, ALGO_FIT, 0, false, &last};
    size_t B;
    double t0 = core_seconds();
    remat_status st;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the schedule");
    *out = NULL;
    if (!tg)
        return REMAT_FAIL(REMAT_ERR_ARG, "no training graph");
    if (o)
        p.o = *o;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    if ((unsigned)p.o.strategy >= REMAT_STRATEGY_COUNT)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown strategy %d", (int)p.o.strategy);
    if (p.o.algos && (st = algos_allowed(p.o.algos, p.o.conv_algo, &p.force)))
        return st;
    if (!p.o.algos && p.o.conv_algo && strcmp(p.o.conv_algo, "fit"))
        return REMAT_FAIL(REMAT_ERR_ARG, "an algorithm ('%s') needs the backend's kernels "
                          "(remat_plan_opts.algos)", p.o.conv_algo);
    if (p.o.reproducible && p.force == ALGO_FIT)
        p.force = ALGO_FASTEST;
    if (p.o.host_in_budget)
        p.o.no_offload = true; /* the host tier would be the same memory: nothing saved */
    p.reserve = algos_reserve(p.o.algos, p.force);
    B = p.o.budget_bytes;
    if (B && !p.o.budget_min && B <= tg->resident_bytes + p.reserve)
        return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "the budget of %zu bytes does not even hold "
                          "the resident %zu bytes (parameters, their gradients and momentum, "
                          "inputs)%s", B, tg->resident_bytes + p.reserve,
                          p.reserve ? " and the kernels' least scratch" : "");
    if (p.o.budget_min)
        st = plan_least(&p, &B, out, info);
    else if (!B)
        st = attempt(&p, false, SIZE_MAX / 4, SIZE_MAX, out, info, NULL);
    else if ((st = plan_fit(&p, B, out, info)) == REMAT_ERR_INFEASIBLE)
        st = refuse(&p, B);
    plan_memo_fini(&memo);
    remat_schedule_free(last.done);
    info->plan_seconds = core_seconds() - t0;
    if (st)
        return st;
    info->budget_bytes = B;
    info->activation_budget_bytes = B ? B - tg->resident_bytes : 0;
    return REMAT_OK;
}
