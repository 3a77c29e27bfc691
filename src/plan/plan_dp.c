/*
 * plan_dp.c - the DP strategies (approx-tc, approx-mc, exact-tc, exact-mc) inside
 * remat_plan: the graph and its families of lower sets, kept between the attempts of one
 * remat_plan (struct dp_memo), the choice of a family and model per budget, the least
 * budget, and the search for a plan whose simulated peak fits the budget.
 */
#include "plan/kusumoto.h"
#include "plan/dp_sim.h"
#include "plan/planners.h"

#include <math.h>
#include <string.h>

/* What plan_dp asks of each DP run. */
struct dp_ask {
    bool mc;        /* memory-centric */
    bool none_too;  /* not the authors' figures: `none`'s plan where it fits and the
                       simulator finds it better (none_instead) */
    int64_t coarse; /* kusumoto_plan's coarse_at */
    const struct dp_progress *pg;
    double within;  /* time-centric: kusumoto_plan_pairs' within (dp_within) */
};

/* remat_plan_opts.dp_within's default: past DP_SIM_MAX_NODES planned values, a chain
 * proven within a thousandth of the family's least recomputation (the beam, dp_least.c):
 * GPT-2 of 1,000 layers at 2% of the way from its least budget to `none`'s peak plans in
 * 2.6 s instead of 7.2 (the beam's own gain, measured before the twenty-first round's
 * other changes), and at five budgets from 2% to 70% the beam's chain had the least
 * overhead itself (docs/planners.md, "Twenty-first round"). */
#define DP_WITHIN_LARGE 1e-3

/* The fraction a time-centric chain is asked to be within (remat_plan_opts.dp_within)
 * on graph d. */
static double ask_within(const remat_plan_opts *o, const struct dag *d)
{
    if (o->dp_within < 0)
        return 0;
    if (o->dp_within > 0)
        return o->dp_within;
    return d->n > DP_SIM_MAX_NODES ? DP_WITHIN_LARGE : 0;
}

/* The DP's chain at budget B, lowered (*out stays NULL when infeasible). */
static remat_status plan_dp_at(const remat_tgraph *tg, const struct dag *d,
                               const struct lsets *ls, struct dp_pairs *pairs,
                               const struct dp_ask *q, size_t budget, struct chain *c,
                               struct dp_result *res, remat_schedule **out)
{
    remat_status st;

    *out = NULL;
    if ((st = kusumoto_plan_pairs(d, ls, q->mc, budget, q->coarse, q->pg, pairs, q->within, c,
                                  res)) ||
        !res->feasible)
        return st;
    if ((st = chain_lower(tg, d, c, out)))
        return st;
    return planner_finish(tg, out);
}

/* A family of lower sets with its model, the least budget of its DP once found (0
 * until asked), an upper bound on it found before (ub: kusumoto_min_budget_bound; 0
 * until asked or where there is none), and the pairs that search kept (at min_b or
 * above), or those a plan at a larger budget kept in their place (kusumoto_plan_pairs),
 * for the plans at budgets up to theirs. */
struct dp_fam {
    struct lsets ls;
    size_t min_b, ub;
    struct dp_pairs pc;
};

/*
 * What the DP strategies keep between the attempts of one remat_plan (plan_memo): the
 * graph and its family f, judged by the simulator's model on graphs of up to
 * DP_SIM_MAX_NODES nodes and by the authors' bound past them. Past them, the approximate
 * family is built with the model (sm) where planning over it at A is affordable
 * (sim_affordable: its pairs worked out by rows, or walked on graphs the rows are not
 * exact for), A an upper bound on f's least budget L (fam_upper: 0.05% above L on GPT-2
 * of 1,000 layers, 0.5% on ResNet-2498), so that a plan at a budget well above L does not
 * search L (GPT-2-1000: 0.4-0.5 s of one core, where the bound costs 0.04; f_passed reads
 * A where it settles a comparison with L). A plan at a budget B where sm still is
 * affordable uses sm (f when sm finds no chain; for the exact strategies, whose f is
 * every lower set, the better of the two plans in the simulator), above that f. With the
 * rows, past 1.1 L f first, then sm as well while a run's pairs stay within
 * DP_SIM_WIDE_PAIRS or, up to DP_SIM_MAX_PAIRS, where f's plan leaves room (below): the
 * better of the two in the simulator. sm serves every budget up to L and f every budget
 * from L, so a plan is found at every budget from the least of the two families' least
 * budgets up. None of it depends on the budget.
 */
struct dp_memo {
    struct dag d;
    struct dp_fam f, sm; /* sm.ls.sim NULL: no second family */
    bool exact;          /* f is the exact family */
    size_t saved;        /* none_instead: the bytes every backward reads (0: not yet) */
    size_t largest;      /* room_likely: the largest value's bytes (0: not yet) */
    bool none_tried;     /* none's plan made (none, none_sim), or its making failed */
    remat_schedule *none;
    remat_sim_result none_sim;
};

static void dp_fam_fini(struct dp_fam *f)
{
    dp_pairs_fini(&f->pc);
    dp_sim_free(f->ls.sim);
    lsets_fini(&f->ls);
}

static void dp_memo_free(struct dp_memo *m)
{
    if (m) {
        const remat_allocator *a = m->d.al;

        dp_fam_fini(&m->f);
        dp_fam_fini(&m->sm);
        remat_schedule_free(m->none);
        dag_fini(&m->d);
        core_free(a, m, sizeof *m);
    }
}

/* The least budget of fam's DP, found once. */
static remat_status fam_min_budget(const struct dp_memo *m, struct dp_fam *fam,
                                   const struct dp_progress *pg, size_t *out)
{
    remat_status st = REMAT_OK;

    if (!fam->min_b) {
        dp_pairs_fini(&fam->pc); /* any a plan kept (kusumoto_plan_pairs): the search's now */
        st = kusumoto_min_budget_pairs(&m->d, &fam->ls, pg, &fam->min_b, &fam->pc, fam->ub);
    }
    *out = fam->min_b;
    return st;
}

/* An upper bound on the least budget of fam's DP: ub, found once, or the least budget
 * itself where it is known or there is no ub. */
static remat_status fam_upper(const struct dp_memo *m, struct dp_fam *fam,
                              const struct dp_progress *pg, size_t *out)
{
    remat_status st;

    if (!fam->min_b && !fam->ub && (st = kusumoto_min_budget_bound(&m->d, &fam->ls, &fam->ub)))
        return st;
    if (fam->min_b || !fam->ub)
        return fam_min_budget(m, fam, pg, out);
    *out = fam->ub;
    return REMAT_OK;
}

static bool passes(size_t budget, size_t least, bool tenth)
{
    return tenth ? budget > least + least / 10 : budget >= least;
}

/* Whether B is at least f's least budget L (tenth: more than 1.1 L), from f's upper
 * bound where that settles it, else from L, searched then. */
static remat_status f_passed(struct dp_memo *m, const struct dp_progress *pg, size_t budget,
                             bool tenth, bool *out)
{
    size_t least;
    remat_status st;

    if ((*out = passes(budget, m->f.min_b ? m->f.min_b : m->f.ub, tenth)) || m->f.min_b)
        return REMAT_OK;
    if ((st = fam_min_budget(m, &m->f, pg, &least)))
        return st;
    *out = passes(budget, least, tenth);
    return REMAT_OK;
}

/* Whether planning over ls with the simulator's model at budget B is within its cap
 * (dp_sim.h): with the rows, the pairs a run works out; otherwise the walks' nodes. */
static bool sim_affordable(const struct lsets *ls, size_t budget)
{
    return dp_sim_rows(ls->sim) ? kusumoto_pairs(ls, budget) <= DP_SIM_MAX_PAIRS
                                : ls->n <= DP_SIM_MAX_SETS &&
                                      kusumoto_sim_work(ls, budget) <= DP_SIM_MAX_WORK;
}

/* The family of a plan at budget B (struct dp_memo); *then: sm after f where f's plan
 * leaves room (above). */
static remat_status fam_at(struct dp_memo *m, const struct dp_progress *pg, size_t budget,
                           struct dp_fam **out, bool *then)
{
    const struct lsets *ls = &m->sm.ls;
    bool wide = false;
    int64_t pairs;
    remat_status st;

    *out = &m->f;
    *then = false;
    if (!ls->sim)
        return REMAT_OK;
    if (dp_sim_rows(ls->sim) && (st = f_passed(m, pg, budget, true, &wide)))
        return st;
    if (!wide) {
        *out = sim_affordable(ls, budget) ? &m->sm : &m->f;
        return REMAT_OK;
    }
    pairs = kusumoto_pairs(ls, budget);
    if (pairs <= DP_SIM_WIDE_PAIRS)
        *out = &m->sm;
    else
        *then = pairs <= DP_SIM_MAX_PAIRS;
    return REMAT_OK;
}

/* m->sm where it is affordable (struct dp_memo), after m->f judged by the authors'
 * bound (past DP_SIM_MAX_NODES; the caller checks the options). A family whose pairs at
 * A pass DP_SIM_FAMILY_PAIRS is thinned to about that many first (lsets_thin: its chains
 * are chains of the family, and the pairs within a window grow about as the square of
 * its sets), for the rows; where the graph is not one they are exact for, the whole
 * family with the walks' cap. */
static remat_status sim_family(const remat_tgraph *tg, struct dp_memo *m,
                               const struct dp_progress *pg)
{
    struct lsets th;
    size_t least;
    int64_t pairs;
    int32_t keep;
    bool thinned = false;
    remat_status st;

    if (m->d.n <= DP_SIM_MAX_NODES)
        return REMAT_OK;
    if ((st = fam_upper(m, &m->f, pg, &least)) ||
        (st = lsets_build(&m->d, LS_APPROX, NULL, 0, &m->sm.ls)))
        goto drop;
    /* the pairs within a window of A bytes, as a run under the model visits them (its
     * window is the budget, the authors' bound's half of it) */
    pairs = kusumoto_pairs(&m->sm.ls, least > SIZE_MAX / 2 ? SIZE_MAX : 2 * least);
    if (pairs > DP_SIM_FAMILY_PAIRS) {
        keep = (int32_t)(m->sm.ls.n * sqrt((double)DP_SIM_FAMILY_PAIRS / (double)pairs) * 0.9);
        if (keep < 3 || (st = lsets_thin(&m->d, &m->sm.ls, keep, &th)))
            goto drop;
        lsets_fini(&m->sm.ls);
        m->sm.ls = th;
        thinned = true;
    }
    if ((st = dp_sim_new(tg, &m->d, &m->sm.ls, &m->sm.ls.sim)))
        goto drop;
    if (dp_sim_rows(m->sm.ls.sim) ? sim_affordable(&m->sm.ls, least)
                                  : !thinned && sim_affordable(&m->sm.ls, least))
        return REMAT_OK;
drop:
    dp_fam_fini(&m->sm);
    memset(&m->sm, 0, sizeof m->sm);
    return st;
}

void dp_memo_fini(struct plan_memo *m)
{
    dp_memo_free(m->dp);
    m->dp = NULL;
}

/* The graph and lower sets of the DP strategies (from the memo when it has them; kept
 * there when memo is given). */
static remat_status dp_setup(const remat_tgraph *tg, const remat_plan_opts *o,
                             const struct dp_progress *pg, struct plan_memo *memo,
                             struct dp_memo **out)
{
    bool exact = o->strategy == REMAT_STRATEGY_EXACT_TC || o->strategy == REMAT_STRATEGY_EXACT_MC;
    struct dp_memo *m;
    int32_t *key = NULL;
    remat_status st;

    if (memo && memo->dp) {
        *out = memo->dp;
        return REMAT_OK;
    }
    *out = NULL;
    if (!(m = core_calloc(tgraph_al(tg), 1, sizeof *m)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
    if ((st = dag_build(tg, &m->d))) {
        core_free(tgraph_al(tg), m, sizeof *m);
        return st;
    }
    if (exact && o->authors_lattice) {
        /* The authors number values by their id in the file; our value ids are those. */
        key = core_calloc(m->d.al, (size_t)m->d.n + 1, sizeof *key);
        if (!key) {
            dp_memo_free(m);
            return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        }
        for (int32_t v = 0; v < m->d.n; v++)
            key[v] = tg->ops[m->d.op[v]].out[0];
    }
    st = lsets_build(&m->d, !exact ? LS_APPROX : o->authors_lattice ? LS_EXACT_DFS : LS_EXACT,
                     key, o->max_lower_sets ? o->max_lower_sets : 100000, &m->f.ls);
    core_free(m->d.al, key, sizeof *key * ((size_t)m->d.n + 1));
    if (!st && !o->authors_bound && m->d.n <= DP_SIM_MAX_NODES)
        st = dp_sim_new(tg, &m->d, &m->f.ls, &m->f.ls.sim);
    m->exact = exact;
    if (!st && !o->authors_bound && !o->authors_lattice)
        st = sim_family(tg, m, pg);
    if (st) {
        dp_memo_free(m);
        return st;
    }
    if (memo)
        memo->dp = m;
    *out = m;
    return REMAT_OK;
}

/* The DP's least budget: of both families where there are two (struct dp_memo). */
static remat_status dp_min_budget(struct dp_memo *m, const struct dp_progress *pg, size_t *out)
{
    size_t least;
    remat_status st = fam_min_budget(m, &m->f, pg, out);

    if (!st && m->sm.ls.sim && !(st = fam_min_budget(m, &m->sm, pg, &least)) && least < *out)
        *out = least;
    return st;
}

/* Whether plan a is better than plan b for the DP's aim (time-centric: less
 * recomputation, then the lower peak; memory-centric: the lower peak, then less). */
static bool sim_better(const remat_sim_result *a, const remat_sim_result *b, bool mc)
{
    if (mc)
        return a->activation_peak_bytes < b->activation_peak_bytes ||
               (a->activation_peak_bytes == b->activation_peak_bytes && a->overhead < b->overhead);
    return a->overhead < b->overhead ||
           (a->overhead == b->overhead && a->activation_peak_bytes < b->activation_peak_bytes);
}

/* fam's plan at B in place of the other family's (c, res, *out) where the simulator
 * finds it better (struct dp_memo). f's after sm's: the exact family's, or the
 * approximate family's by the authors' bound, whose memory-centric plans at large
 * budgets can simulate below the model's (GPT-2-48 halfway to `none`: 1.49 GB against
 * 2.84, recomputing less) and time-centric ones recompute less where the bound and the
 * simulator part. sm's after f's (room): only where f's plan peaks more than
 * 1/DP_SIM_ROOM_SHARE of B below B (fam_at). */
static remat_status fam_instead(const remat_tgraph *tg, struct dp_memo *m, struct dp_fam *fam,
                                bool room, const struct dp_ask *q, size_t budget,
                                struct chain *c, struct dp_result *res, remat_schedule **out)
{
    size_t n = (size_t)m->d.n + 1;
    struct chain e = {0, core_calloc(m->d.al, n, sizeof *e.block),
                      core_calloc(m->d.al, n, sizeof *e.kept)};
    struct dp_result er;
    remat_schedule *s = NULL;
    remat_sim_result a, b;
    remat_status st;

    if (!e.block || !e.kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    if ((st = remat_sim_run(tg, *out, &b)) ||
        (room && b.activation_peak_bytes >= budget - budget / DP_SIM_ROOM_SHARE) ||
        (st = plan_dp_at(tg, &m->d, &fam->ls, &fam->pc, q, budget, &e, &er, &s)) ||
        !er.feasible || (st = remat_sim_run(tg, s, &a)))
        goto out;
    if (sim_better(&a, &b, q->mc)) {
        remat_schedule_free(*out);
        *out = s;
        s = NULL;
        *res = er;
        c->n_blocks = e.n_blocks;
        memcpy(c->block, e.block, sizeof *e.block * n);
        memcpy(c->kept, e.kept, sizeof *e.kept * n);
    }
out:
    remat_schedule_free(s);
    core_free(m->d.al, e.block, sizeof *e.block * n);
    core_free(m->d.al, e.kept, sizeof *e.kept * n);
    return st;
}

/* Both families' plans at one budget, side by side (fam_pair): job k plans fam[k] with
 * ask[k] and simulates the plan; with room, job 0 stops job 1 (stop, through ask[1]'s
 * progress) where its own plan leaves no room below the budget (fam_instead). */
struct fam_jobs {
    const remat_tgraph *tg;
    const struct dag *d;
    struct dp_fam *fam[2];
    struct dp_ask ask[2];
    struct dp_progress quiet; /* job 1's: no reports, and the stop */
    size_t budget;
    bool room;
    int stop;
    struct chain c[2];
    struct dp_result res[2];
    remat_schedule *s[2];
    remat_sim_result sim[2];
    struct core_job_err err[2];
};

static void fam_job(void *ctx, int k)
{
    struct fam_jobs *w = ctx;
    remat_status st = plan_dp_at(w->tg, w->d, &w->fam[k]->ls, &w->fam[k]->pc, &w->ask[k],
                                 w->budget, &w->c[k], &w->res[k], &w->s[k]);

    if (!st && w->res[k].feasible)
        st = remat_sim_run(w->tg, w->s[k], &w->sim[k]);
    if (k == 0 && w->room &&
        (st || !w->res[0].feasible ||
         w->sim[0].activation_peak_bytes >= w->budget - w->budget / DP_SIM_ROOM_SHARE))
        __atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
    core_job_err_note(&w->err[k], st);
}

/*
 * Two families' plans at B, each on a core of its own, where dp_chain_at would plan one
 * after the other: without room, sm's and f's (f's where sm finds no chain or the
 * simulator finds f's better, else sm's); with room, f's and sm's, sm's only where f's
 * plan leaves room (fam_instead) and the simulator finds sm's better, job 0 stopping
 * sm's run where it does not. Into c, res, *out: the choice of the two in turn. A run
 * gains little from the second core (whole plans with both cores, then with one:
 * approx-tc on GPT-2 of 1,000 layers at 3% and 10% of the way from its least total to
 * `none`'s, 1.28 and 0.44 s against 1.40 and 0.57; ResNet-2498 at 3%, 1.08 against
 * 1.11), so the two runs side by side save most of the shorter one, the same plans:
 * without room, ResNet-2498 at 3% 1.05 -> 0.75 s, GPT-2-1000 at 1.2% 1.88 -> 1.54 s;
 * with room, GPT-2-1000 at 1.6%, 2% and 3% 1.27, 0.83, 1.32 -> 0.91, 0.66, 0.81 s. Where
 * f's plan leaves no room, the plan is f's run on one core and a stopped one beside it
 * (ResNet-1001 at 20% and 30%, side by side: 0.13, 0.38 -> 0.17, 0.47 s; unstopped,
 * sm's runs would take 0.6-0.8 s there, and ResNet-2498's up to 1.4 s), so dp_chain_at
 * plans these side by side only where room_likely guesses room. Only job 0 reports
 * progress (the two would interleave); inside a job the run's own parallel parts run
 * on its one core (core_par_run, the team).
 */
static remat_status fam_pair(const remat_tgraph *tg, struct dp_memo *m, const struct dp_ask *q,
                             size_t budget, bool room, struct chain *c, struct dp_result *res,
                             remat_schedule **out)
{
    size_t n = (size_t)m->d.n + 1;
    struct fam_jobs w = {.tg = tg, .d = &m->d, .ask = {*q, *q}, .budget = budget, .room = room};
    bool second;
    remat_status st, st1;

    w.fam[0] = room ? &m->f : &m->sm;
    w.fam[1] = room ? &m->sm : &m->f;
    w.quiet.stop = &w.stop;
    w.ask[1].pg = &w.quiet;
    w.c[0] = *c;
    w.c[1] = (struct chain){0, core_calloc(m->d.al, n, sizeof *c->block),
                            core_calloc(m->d.al, n, sizeof *c->kept)};
    if (!w.c[1].block || !w.c[1].kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    core_par_run(2, 2, fam_job, &w);
    st = core_job_err_raise(&w.err[0]);
    if (w.stop) /* its plan not wanted, and perhaps stopped */
        core_job_err_clear(&w.err[1]);
    st1 = core_job_err_raise(&w.err[1]);
    if (st || (st = st1))
        goto out;
    c->n_blocks = w.c[0].n_blocks;
    second = !w.stop && w.res[1].feasible &&
             (!w.res[0].feasible || sim_better(&w.sim[1], &w.sim[0], q->mc));
    *res = w.res[second];
    *out = w.s[second];
    w.s[second] = NULL;
    if (second) {
        c->n_blocks = w.c[1].n_blocks;
        memcpy(c->block, w.c[1].block, sizeof *c->block * n);
        memcpy(c->kept, w.c[1].kept, sizeof *c->kept * n);
    }
out:
    remat_schedule_free(w.s[0]);
    remat_schedule_free(w.s[1]);
    core_free(m->d.al, w.c[1].block, sizeof *c->block * n);
    core_free(m->d.al, w.c[1].kept, sizeof *c->kept * n);
    return st;
}

static int room_guess; /* plan_dp_set_room_guess' */

void plan_dp_set_room_guess(int guess)
{
    room_guess = guess;
}

/*
 * Whether f's plan at B is likely to leave room (fam_instead), so that sm's is planned
 * beside it (fam_pair) rather than after it where it does: the largest value passes
 * B/DP_SIM_ROOM_SHARE. Only how the two are run depends on it, not the plan. Beside it,
 * f's run has one core where it would have two, so it pays where no room is left
 * (GPT-2-1000 approx-tc at 5% of the way from its least total to `none`'s: 0.64 -> 0.97
 * s, ResNet-2498 at 10% 0.29 -> 0.35), and gains where there is (at 3%: 1.32 -> 0.81).
 * The authors' bound charges a block's values twice, so its plans' slack is about a
 * transformer's logits (206 MB on GPT-2): with this test, GPT-2-1000's budgets from
 * 1.6% to 3% run side by side (room), from 4% one after the other (none), and a
 * ResNet's largest value at batch 1 (a few MB) passes 1/32 of its budget only near its
 * least budget.
 */
static bool room_likely(struct dp_memo *m, size_t budget)
{
    if (room_guess)
        return room_guess > 0;
    if (!m->largest)
        for (int32_t v = 0; v < m->d.n; v++)
            m->largest = m->d.m[v] > m->largest ? m->d.m[v] : m->largest;
    return m->largest > budget / DP_SIM_ROOM_SHARE;
}

/* The DP's chain at budget B over the family of B (fam_at), or over f where that finds
 * none (and f's where the simulator finds it better: every budget for the exact
 * strategies, from f's least budget for the approximate ones; sm's after f's where
 * fam_at says so; each pair planned side by side where there are two cores, fam_pair);
 * lowered (*out stays NULL when infeasible). */
static remat_status dp_chain_at(const remat_tgraph *tg, struct dp_memo *m,
                                const struct dp_ask *q, size_t budget, struct chain *c,
                                struct dp_result *res, remat_schedule **out)
{
    struct dp_fam *fam;
    bool past = m->exact, then, two = core_par_threads_with(m->d.al) > 1;
    remat_status st;

    *out = NULL;
    if ((st = fam_at(m, q->pg, budget, &fam, &then)))
        return st;
    if (fam == &m->f) {
        if (then && !q->mc && two && room_likely(m, budget))
            return fam_pair(tg, m, q, budget, true, c, res, out);
        if ((st = plan_dp_at(tg, &m->d, &fam->ls, &fam->pc, q, budget, c, res, out)))
            return st;
        return then && !q->mc && res->feasible
                   ? fam_instead(tg, m, &m->sm, true, q, budget, c, res, out) : REMAT_OK;
    }
    if (!past && (st = f_passed(m, q->pg, budget, false, &past)))
        return st;
    if (past && two)
        return fam_pair(tg, m, q, budget, false, c, res, out);
    if ((st = plan_dp_at(tg, &m->d, &fam->ls, &fam->pc, q, budget, c, res, out)))
        return st;
    if (!res->feasible)
        return plan_dp_at(tg, &m->d, &m->f.ls, &m->f.pc, q, budget, c, res, out);
    return past ? fam_instead(tg, m, &m->f, false, q, budget, c, res, out) : REMAT_OK;
}

/* The activation bytes that backward steps read: under `none` every one of them is live
 * between the last forward and the first backward, so none's peak is at least this. */
static remat_status saved_bytes(const remat_tgraph *tg, const remat_allocator *al, size_t *out)
{
    uint8_t *seen = core_calloc(al, (size_t)tg->n_values, 1);

    *out = 0;
    if (!seen)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
    for (int32_t o = 0; o < tg->n_ops; o++)
        for (int32_t q = 0; tg->ops[o].has_bwd && q < tg->ops[o].n_saved; q++) {
            int32_t b = tg->values[tg->ops[o].saved[q]].buf;

            if (b >= 0 && !seen[b] && tg->values[b].producer >= 0) {
                seen[b] = 1;
                *out += tg->values[b].bytes;
            }
        }
    core_free(al, seen, (size_t)tg->n_values);
    *out += !*out; /* worked out: never 0 */
    return REMAT_OK;
}

/*
 * A time-centric plan at a budget where `none`'s plan fits: that plan recomputes
 * nothing, and the lower-set chains may not reach it (the approximate family's sets are
 * ancestor closures, never nested across parallel branches such as a downsampling
 * shortcut or attention's query, key and value, so no chain of them keeps both; and
 * with FLOP costs each block's overhead is rounded to whole units of T(V) / (8 |V|),
 * where cheap recomputation counts 0 and the tie goes to less memory). With 900 GB,
 * approx-tc recomputed 0.094 of the forward on ResNet-50 at batch 32, 0.102 on GPT-2,
 * 0.122 on BERT-base and 0.200 on GoogLeNet at batch 32. A memory-centric plan there
 * can be no better than none's: approx-mc took the chain of one block (the least
 * memory kept), which recomputed the whole forward at none's very peak. So none's plan
 * replaces the chain (c, res, *out) where it fits B and the simulator finds it better
 * for the DP's aim (sim_better: time-centric, less recomputation, then the lower peak;
 * memory-centric, the lower peak, then less recomputation). Made once per remat_plan,
 * and only where B holds what the backward reads.
 */
static remat_status none_instead(const remat_tgraph *tg, struct dp_memo *m,
                                 const struct dp_ask *q, size_t budget, struct chain *c,
                                 struct dp_result *res, remat_schedule **out)
{
    remat_schedule *s = NULL;
    remat_sim_result b;
    remat_status st;

    if (!m->saved && (st = saved_bytes(tg, m->d.al, &m->saved)))
        return st;
    if (budget < m->saved)
        return REMAT_OK;
    if (!m->none_tried) {
        m->none_tried = true;
        if ((st = remat_plan_none(tg, &m->none)) || (st = planner_finish(tg, &m->none)) ||
            (st = remat_sim_run(tg, m->none, &m->none_sim))) {
            remat_schedule_free(m->none);
            m->none = NULL;
            return st;
        }
    }
    if (!m->none || m->none_sim.activation_peak_bytes > budget)
        return REMAT_OK;
    if (*out && ((st = remat_sim_run(tg, *out, &b)) || !sim_better(&m->none_sim, &b, q->mc)))
        return st;
    if ((st = schedule_copy(m->none, &s)))
        return st;
    remat_schedule_free(*out);
    *out = s;
    *res = (struct dp_result){.feasible = true, .kept_all = true};
    c->n_blocks = 0;
    return REMAT_OK;
}

/* The DP's plan at budget B (dp_chain_at), or `none`'s where that is better
 * (none_instead). */
static remat_status dp_plan_at(const remat_tgraph *tg, struct dp_memo *m, const struct dp_ask *q,
                               size_t budget, struct chain *c, struct dp_result *res,
                               remat_schedule **out)
{
    remat_status st = dp_chain_at(tg, m, q, budget, c, res, out);

    if (st || !q->none_too)
        return st;
    return none_instead(tg, m, q, budget, c, res, out);
}

/* The DP strategies: the graph and the lower sets built once (dp_setup), then plan (and
 * search the minimum budget when asked or when the budget is infeasible). */
remat_status plan_dp(const remat_tgraph *tg, const remat_plan_opts *o, size_t fixed,
                     size_t *budget, remat_schedule **out, remat_plan_info *info,
                     struct plan_memo *memo)
{
    struct dp_memo *dm = NULL;
    struct chain c = {0, NULL, NULL};
    struct dp_result res;
    struct dp_progress pg = {o->progress, o->progress_ud, NULL};
    struct dp_ask q = {o->strategy == REMAT_STRATEGY_APPROX_MC ||
                           o->strategy == REMAT_STRATEGY_EXACT_MC,
                       false, o->coarse_pairs < 0 ? INT64_MAX : o->coarse_pairs, &pg, 0};
    size_t peak;
    remat_status st;

    if ((st = dp_setup(tg, o, &pg, memo, &dm)))
        return st;
    REMAT_ASSERT(dm);
    q.within = ask_within(o, &dm->d);
    q.none_too = !o->authors_bound && !o->authors_lattice;
    info->n_lower_sets = dm->f.ls.n;
    c.block = core_calloc(dm->d.al, (size_t)dm->d.n + 1, sizeof *c.block);
    c.kept = core_calloc(dm->d.al, (size_t)dm->d.n + 1, sizeof *c.kept);
    if (!c.block || !c.kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    if (o->budget_min && (st = dp_min_budget(dm, &pg, budget)))
        goto out;
    if ((st = dp_plan_at(tg, dm, &q, *budget, &c, &res, out)))
        goto out;
    if (!res.feasible) {
        size_t min_b = 0, sim = SIZE_MAX;

        /* The DP's bound is looser than the simulator: its least-bound plan may still
         * fit the budget when simulated, and then it is the plan (the budget fit would
         * otherwise come back for it with a larger budget). */
        if (!(st = dp_min_budget(dm, &pg, &min_b)) &&
            !(st = dp_plan_at(tg, dm, &q, min_b, &c, &res, out)) &&
            res.feasible &&
            !(st = planner_sim_peak(tg, *out, &sim)) && sim <= *budget)
            goto fits;
        remat_schedule_free(*out);
        *out = NULL;
        if (!st)
            st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "%s: no plan fits an activation budget of "
                            "%zu bytes; the smallest that fits is %zu bytes (%zu in total "
                            "with the resident bytes and workspace, %zu)",
                            remat_strategy_name(o->strategy), *budget,
                            sim < min_b ? sim : min_b, (sim < min_b ? sim : min_b) + fixed,
                            fixed);
        goto out;
    }
fits:
    /*
     * The DP's bound counts each block's own gradients but not the gradients that later
     * blocks have already written into earlier ones (skip connections, views), so on
     * some graphs the simulated peak passes it. At the minimum budget the budget becomes
     * the simulated peak; at a given budget, the DP is asked for plans at smaller
     * budgets (bisection) until one's simulated peak fits.
     */
    info->dp_bound_bytes = res.bound;
    info->n_blocks = c.n_blocks;
    info->n_dp_sets = res.n_sets;
    info->overhead_bound = res.overhead;
    info->dp_within = res.near ? q.within : 0;
    info->kept_all = res.kept_all;
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

            if ((st = dp_plan_at(tg, dm, &q, mid, &c, &res, &s)))
                break;
            if (res.feasible && !(st = planner_sim_peak(tg, s, &peak)) && peak <= target) {
                remat_schedule_free(fit);
                fit = s;
                lo = mid;
                info->dp_bound_bytes = res.bound;
                info->n_blocks = c.n_blocks;
                info->n_dp_sets = res.n_sets;
                info->overhead_bound = res.overhead;
                info->dp_within = res.near ? q.within : 0;
                info->kept_all = res.kept_all;
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
            if (!(st = dp_min_budget(dm, &pg, &min_b)) &&
                !(st = dp_plan_at(tg, dm, &q, min_b, &c, &res, &fit)) &&
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
    core_free(dm->d.al, c.block, sizeof *c.block * ((size_t)dm->d.n + 1));
    core_free(dm->d.al, c.kept, sizeof *c.kept * ((size_t)dm->d.n + 1));
    if (!memo)
        dp_memo_free(dm);
    return st;
}
