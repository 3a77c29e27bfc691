/*
 * plan.c - remat_plan: budgets (totals minus resident bytes), the strategy table and
 * the search for the smallest feasible budget.
 */
#include "plan/kusumoto.h"
#include "plan/planners.h"
#include "plan/schedule.h"

#include <string.h>

static const char *const names[] = {
#define REMAT_X_NAME(e, s) s,
    REMAT_STRATEGIES(REMAT_X_NAME)
#undef REMAT_X_NAME
};
_Static_assert(REMAT_ARRAY_LEN(names) == REMAT_STRATEGY_COUNT, "strategy names");

const char *remat_strategy_name(remat_strategy s)
{
    return (unsigned)s < REMAT_STRATEGY_COUNT ? names[s] : "unknown";
}

remat_strategy remat_strategy_from_name(const char *name)
{
    for (int i = 0; name && i < REMAT_STRATEGY_COUNT; i++)
        if (!strcmp(name, names[i]))
            return (remat_strategy)i;
    return REMAT_STRATEGY_COUNT;
}

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

/* The DP's chain at budget B, lowered (*out stays NULL when infeasible). */
static remat_status plan_dp_at(const remat_tgraph *tg, const struct dag *d,
                               const struct lsets *ls, bool mc, size_t budget, struct chain *c,
                               struct dp_result *res, remat_schedule **out)
{
    remat_status st;

    *out = NULL;
    if ((st = kusumoto_plan(d, ls, mc, budget, c, res)) || !res->feasible)
        return st;
    if ((st = chain_lower(tg, d, c, out)))
        return st;
    return planner_finish(tg, out);
}

/* The DP strategies: build the graph and the lower sets once, then plan (and search
 * the minimum budget when asked or when the budget is infeasible). */
static remat_status plan_dp(const remat_tgraph *tg, const remat_plan_opts *o, size_t fixed,
                            size_t *budget, remat_schedule **out, remat_plan_info *info)
{
    bool exact = o->strategy == REMAT_STRATEGY_EXACT_TC || o->strategy == REMAT_STRATEGY_EXACT_MC;
    bool mc = o->strategy == REMAT_STRATEGY_APPROX_MC || o->strategy == REMAT_STRATEGY_EXACT_MC;
    struct dag d;
    struct lsets ls;
    struct chain c = {0, NULL, NULL};
    struct dp_result res;
    size_t peak;
    int32_t *key = NULL;
    remat_status st;

    if ((st = dag_build(tg, &d)))
        return st;
    if (exact && o->authors_lattice) {
        /* The authors number values by their id in the file; our value ids are those. */
        key = core_calloc(d.al, (size_t)d.n + 1, sizeof *key);
        if (!key) {
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
            goto out_dag;
        }
        for (int32_t v = 0; v < d.n; v++)
            key[v] = tg->ops[d.op[v]].out[0];
    }
    st = lsets_build(&d, !exact ? LS_APPROX : o->authors_lattice ? LS_EXACT_DFS : LS_EXACT,
                     key, o->max_lower_sets ? o->max_lower_sets : 100000, &ls);
    core_free(d.al, key, sizeof *key * ((size_t)d.n + 1));
    if (st)
        goto out_dag;
    info->n_lower_sets = ls.n;
    c.block = core_calloc(d.al, (size_t)d.n + 1, sizeof *c.block);
    c.kept = core_calloc(d.al, (size_t)d.n + 1, sizeof *c.kept);
    if (!c.block || !c.kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    if (o->budget_min && (st = kusumoto_min_budget(&d, &ls, budget)))
        goto out;
    if ((st = plan_dp_at(tg, &d, &ls, mc, *budget, &c, &res, out)))
        goto out;
    if (!res.feasible) {
        size_t min_b = 0;

        if (!(st = kusumoto_min_budget(&d, &ls, &min_b)))
            st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: no plan fits an activation budget of "
                            "%zu bytes; the smallest that fits is %zu bytes (%zu in total "
                            "with the resident bytes and workspace, %zu)",
                            remat_strategy_name(o->strategy), *budget, min_b,
                            min_b + fixed, fixed);
        goto out;
    }
    /*
     * The DP's bound counts each block's own gradients but not the gradients that later
     * blocks have already written into earlier ones (skip connections, views), so on
     * some graphs the simulated peak passes it. At the minimum budget the budget becomes
     * the simulated peak; at a given budget, the DP is asked for plans at smaller
     * budgets (bisection) until one's simulated peak fits.
     */
    info->dp_bound_bytes = res.bound;
    info->n_blocks = c.n_blocks;
    info->overhead_bound = res.overhead;
    if ((st = planner_sim_peak(tg, *out, &peak)))
        goto out;
    if (peak > *budget && o->budget_min) {
        *budget = peak;
    } else if (peak > *budget) {
        size_t lo = 0, hi = *budget, target = *budget;
        remat_schedule *fit = NULL;

        while (hi - lo > 1 && (double)(hi - lo) > 1e-4 * (double)hi) {
            size_t mid = lo + (hi - lo) / 2;
            remat_schedule *s = NULL;

            if ((st = plan_dp_at(tg, &d, &ls, mc, mid, &c, &res, &s)))
                break;
            if (res.feasible && !(st = planner_sim_peak(tg, s, &peak)) && peak <= target) {
                remat_schedule_free(fit);
                fit = s;
                lo = mid;
                info->dp_bound_bytes = res.bound;
                info->n_blocks = c.n_blocks;
                info->overhead_bound = res.overhead;
            } else {
                remat_schedule_free(s);
                hi = mid;
            }
            if (st)
                break;
        }
        if (!st && !fit) {
            size_t min_b = 0;

            /* The smallest budget that works: the simulated peak at the DP's minimum. */
            if (!(st = kusumoto_min_budget(&d, &ls, &min_b)) &&
                !(st = plan_dp_at(tg, &d, &ls, mc, min_b, &c, &res, &fit)) &&
                !(st = planner_sim_peak(tg, fit, &peak)))
                st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: no plan's simulated peak fits an "
                                "activation budget of %zu bytes; the smallest that fits is "
                                "%zu bytes (%zu in total with the resident bytes and "
                                "workspace, %zu)", remat_strategy_name(o->strategy), target,
                                peak > min_b ? peak : min_b,
                                (peak > min_b ? peak : min_b) + fixed,
                                fixed);
            remat_schedule_free(fit);
            fit = NULL;
        }
        remat_schedule_free(*out);
        *out = fit;
    }
out:
    core_free(d.al, c.block, sizeof *c.block * ((size_t)d.n + 1));
    core_free(d.al, c.kept, sizeof *c.kept * ((size_t)d.n + 1));
    lsets_fini(&ls);
out_dag:
    dag_fini(&d);
    return st;
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
static remat_status best_of_others(const remat_tgraph *tg, size_t budget, remat_schedule **out,
                                   remat_plan_info *info)
{
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

remat_status remat_plan(const remat_tgraph *tg, const remat_plan_opts *o, remat_schedule **out,
                        remat_plan_info *info)
{
    remat_plan_info dummy;
    remat_plan_opts opts = {0};
    size_t budget, peak, fixed, reserve;
    int32_t force = -1;
    double t0 = core_seconds();
    remat_status st;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the schedule");
    *out = NULL;
    if (!tg)
        return REMAT_FAIL(REMAT_ERR_ARG, "no training graph");
    if (o)
        opts = *o;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    if ((unsigned)opts.strategy >= REMAT_STRATEGY_COUNT)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown strategy %d", (int)opts.strategy);
    if (opts.algos && (st = algos_allowed(opts.algos, opts.conv_algo, &force)))
        return st;
    if (!opts.algos && opts.conv_algo && strcmp(opts.conv_algo, "fit"))
        return REMAT_FAIL(REMAT_ERR_ARG, "an algorithm ('%s') needs the backend's kernels "
                          "(remat_plan_opts.algos)", opts.conv_algo);
    /* Bytes outside the planners' control: the resident bytes and the scratch kept free
     * for the kernels. */
    reserve = info->scratch_reserve_bytes = algos_reserve(opts.algos, force);
    fixed = tg->resident_bytes + reserve;
    if (opts.budget_bytes && !opts.budget_min && opts.budget_bytes <= fixed)
        return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "the budget of %zu bytes does not even hold "
                          "the resident %zu bytes (parameters, their gradients and momentum, "
                          "inputs)%s", opts.budget_bytes, fixed,
                          reserve ? " and the kernels' least scratch" : "");
    budget = opts.budget_bytes && !opts.budget_min ? opts.budget_bytes - fixed : SIZE_MAX / 4;
    switch (opts.strategy) {
    case REMAT_STRATEGY_NONE:
        st = remat_plan_none(tg, out);
        break;
    case REMAT_STRATEGY_APPROX_TC:
    case REMAT_STRATEGY_APPROX_MC:
    case REMAT_STRATEGY_EXACT_TC:
    case REMAT_STRATEGY_EXACT_MC:
        st = plan_dp(tg, &opts, fixed, &budget, out, info);
        break;
    case REMAT_STRATEGY_CHEN_SQRTN:
    case REMAT_STRATEGY_CHEN_GREEDY:
    case REMAT_STRATEGY_SUPERNEURONS:
        /* With budget min, a budget of 0 makes them take their least-peak variant. */
        st = plan_heuristic(tg, &opts, opts.budget_min ? 0 : budget, out, info);
        break;
    case REMAT_STRATEGY_HYBRID:
        st = plan_hybrid(tg, &opts, &budget, out, info);
        break;
    default:
        st = planner_other(tg, &opts, &budget, out, info);
        if (!st && opts.strategy == REMAT_STRATEGY_OPTIMAL)
            st = best_of_others(tg, budget, out, info);
        break;
    }
    if (st)
        goto fail;
    if (!is_dp(opts.strategy) && (st = planner_finish(tg, out)))
        goto fail;
    /* Every plan is measured by the simulator; a plan above its budget is refused. */
    if ((st = planner_sim_peak(tg, *out, &peak)))
        goto fail;
    if (opts.budget_min && budget >= SIZE_MAX / 4)
        budget = peak; /* strategies without a budget search: their peak is their minimum */
    if (peak > budget) {
        st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: the plan's simulated peak of %zu bytes is "
                        "above the activation budget of %zu bytes (the smallest budget for "
                        "this strategy is %zu bytes in total)", remat_strategy_name(opts.strategy),
                        peak, budget, peak + fixed);
        goto fail;
    }
    if (opts.algos) {
        /* the kernels last: the room the reserve kept, and what the schedule left free;
         * with the least budget, the least peak this schedule can have */
        size_t cap = opts.budget_min ? 0 : budget >= SIZE_MAX / 4 ? SIZE_MAX : budget + reserve;

        if ((st = algos_choose(tg, opts.algos, force, cap, *out, &info->n_algo_choices,
                               &info->n_algo_fastest)) ||
            (st = planner_sim_peak(tg, *out, &peak)))
            goto fail;
        REMAT_ASSERT(cap == 0 || peak <= cap);
        budget = opts.budget_min ? peak : cap == SIZE_MAX ? budget : cap;
        fixed = tg->resident_bytes;
    }
    info->activation_budget_bytes = budget;
    info->budget_bytes = budget >= SIZE_MAX / 4 ? 0 : budget + fixed;
    info->feasible = true;
    info->plan_seconds = core_seconds() - t0;
    return REMAT_OK;
fail:
    remat_schedule_free(*out);
    *out = NULL;
    info->plan_seconds = core_seconds() - t0;
    return st;
}
