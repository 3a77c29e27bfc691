/*
 * optimal.c - the `optimal` strategy: the mixed-integer program of Checkmate (Jain et
 * al., MLSys 2020) over the forward and backward steps of the planners' graph, solved
 * with COIN-OR's Clp and CBC, then lowered to a schedule. This file holds the nodes and
 * what each reads (opt_init), the MILP's own memory accounting of a solution, its
 * lowering, and plan_optimal; the MILP's constraints and its solve are in
 * optimal_milp.c, the hand-off to the solvers in optimal_cbc.c, the solutions found
 * outside them in optimal_heur.c, the retention bound in optimal_bound.c, what they
 * share in optimal.h.
 *
 * Nodes. The forward nodes are the dag's nodes that are not views, 0 .. nf-1 in its
 * topological order. A view takes no memory: its FWD runs once, right after the first
 * FWD of the node that owns its buffer, and whoever reads a view reads that owner. The
 * backward nodes are the ops with a backward, in reverse topological order: nb of them.
 * Stages s = 0 .. ns-1, ns = nf + nb: stage s < nf brings forward node s, stage nf + k
 * runs backward node k. In a stage, forward nodes run in topological order, then the
 * stage's backward (position "bwd").
 *
 * Variables (binary unless said):
 *   R[s][i]   forward node i runs in stage s (i <= s in forward stages; R[s][s] = 1);
 *   S[s][i]   node i's value is live entering stage s (i < s);
 *   F[s][i][p] (continuous in [0, 1]) node i's value is freed right after position p of
 *             stage s, where p is i itself or a forward or backward that reads i;
 *   U[s][p]   (continuous) live forward-value bytes at position p of stage s.
 * Backward nodes are constants, not variables: each runs once, at the end of its own
 * stage, in a fixed order, so every gradient buffer lives over a fixed interval of
 * stages and G[s][p], the gradient bytes live at a position, is a constant.
 *
 * The constraints and the objective (the recomputation overhead): optimal_milp.c.
 *
 *
 * Memory model against the simulator (sim.c, the judge). M_i is the bytes of node i's
 * outputs, Mk_i the part that some step reads, Mt_i = M_i - Mk_i the part nothing reads,
 * which the liveness pass frees right after the FWD. U is measured after a step and
 * before the frees that follow it, as the simulator measures. G[s][p] at a recomputation
 * of stage nf+k: the gradients written by an earlier backward and read by this one or a
 * later one; at the backward itself, also those it writes. The lowering emits, per
 * stage, the FWD of each i with R[s][i] = 1 in topological order (skipping one whose
 * value is still kept, S[s][i] = 1), then the stage's BWD; the liveness pass frees each
 * buffer after its last use, never later than F does. So the simulated peak is at most
 * the MILP's max U + G (lower when one output of a node dies before its siblings, or a
 * kept value is not read again). Both are checked: the solution's own bound
 * (dp_bound_bytes) is recomputed exactly in bytes, and the schedule is simulated; a
 * solution that the solver's tolerances let above the budget is dropped for the best
 * heuristic one, or, when there is none, solved again under a budget lowered by the
 * excess.
 *
 * Pruning: last[i], the last stage that can need node i (its backward readers and,
 * through its forward readers, theirs); R and S after it are fixed at 0 (not created).
 *
 * Solving, within the time limit:
 *  1. Keeping everything that is read later, recomputing nothing: when that fits it is
 *     optimal (no cost) and no MILP is built.
 *  2. The retention relaxation (optimal_bound.c): a program over the gaps between each
 *     node's uses (keep it over a gap, or pay for it once per gap) whose optimum,
 *     by CBC in a second or so even at a thousand nodes, bounds the MILP's from below;
 *     its keep set is the first heuristic solution. At most a tenth of the time limit.
 *  3. Heuristic solutions (optimal_heur.c), each a point of the MILP measured by the
 *     same accounting: keep sets (the retention relaxation's, the nodes dearest to
 *     recompute per byte, every k-th node), the rest recomputed when a backward needs it
 *     and dropped after it or cached; then a local search over each node's choice (keep,
 *     drop, cache) and swaps of kept nodes, for a quarter of the time left, or for all
 *     of it when no MILP is built (below). When the best meets the bound, it is optimal.
 *  4. The MILP, when it has at most OPT_MAX_CELLS R and S binaries (and the time left
 *     is worth it, OPT_CELLS_PER_S): its LP relaxation
 *     (Clp's dual simplex, optimal_cbc.c): its bound, and its S rounded at several
 *     thresholds and completed into solutions (Checkmate's two-phase rounding); then
 *     branch and cut (CBC: one thread, fixed seeds) for the rest of the time, the best
 *     solution so far handed to it as a MIP start.
 *  The plan is the solver's solution when it is better, else the best heuristic one;
 *  optimality_gap is (cost - best lower bound) / cost, the bound the larger of the
 *  retention relaxation's and CBC's (or Clp's); 1 when no bound was reached, 0 when
 *  proven.
 * A budget of 0 (remat_plan's budget min) plans at the least MILP peak among the keep
 * sets of step 3 with recomputed values dropped: the least-peak plan found, not a proven
 * minimum, then the least cost at that peak.
 *
 * Sizes: at most 2,500 dag nodes (OPT_MAX_NODES): the heuristics measure each candidate
 * in O(ns x nf + ns x edges) and hold six ns x nf arrays of bools (12 MB at 1,000
 * nodes). The MILP is built only up to OPT_MAX_CELLS (250,000) R and S binaries: above
 * that its LP relaxation alone does not finish within minutes. Measured (2 cores,
 * loaded): ResNet-50 at batch 32 (176 nodes, 61,000 R and S binaries; 155,000 columns,
 * 256,000 rows, 0.7 million nonzeros in all): the relaxation did not finish in 600 s by
 * Clp's dual simplex, nor in 300 s by its presolve and initial solve, so there the plan
 * and the gap come from steps 2 and 3. Clp's barrier (tried outside this code) settled
 * at a primal objective of 0.1196 (dual 0.1215) in 116 iterations, about 5 minutes,
 * then stopped dually infeasible, its crossover unfinished minutes later: below the
 * retention bound's 0.1293, so even solved the relaxation would not raise the bound, and
 * CBC's branching would start from it. ResNet-152
 * (516 nodes): 1.35 million columns, 2.2 million rows, 1.4 GB; a 1,000-node layered
 * graph: 2 million R and S binaries, no MILP; its retention relaxation 0.8 s.
 * Everything but the solver's own allocations comes from the graph's allocator.
 */
#include "plan/optimal.h"
#include "sched/schedule.h"

#include <math.h>
#include <string.h>

#define OPT_MAX_NODES 2500    /* dag nodes; see "Sizes" above */
#define OPT_MAX_CELLS 250000  /* R and S binaries above which no MILP is built */
/* Nor is one built with less time left than its binaries / OPT_CELLS_PER_S seconds:
 * building and loading it alone took about 1 s per 76,000 binaries (2 cores, loaded),
 * and its relaxation no less; the heuristics get the time instead. */
#define OPT_CELLS_PER_S 25000.0
#define OPT_TRIES 3

struct block {
    void *p;
    size_t bytes;
};

void *optimal_take(struct opt *o, size_t n, size_t size)
{
    struct block *b;
    size_t bytes;
    void *p;

    if (!core_mul_size(n + 1, size, &bytes))
        return NULL;
    p = core_calloc(o->a, n + 1, size);
    if (!p)
        return NULL;
    b = vec_push(&o->blocks);
    if (!b) {
        core_free(o->a, p, bytes);
        return NULL;
    }
    b->p = p;
    b->bytes = bytes;
    return p;
}

static void opt_fini(struct opt *o)
{
    for (size_t i = 0; i < o->blocks.n; i++) {
        struct block *b = VEC_AT(&o->blocks, struct block, i);

        core_free(o->a, b->p, b->bytes);
    }
    vec_fini(&o->blocks);
}

/* The forward node that owns forward buffer b (a planned value's own buffer). */
static int32_t owner(const struct opt *o, const int32_t *fnode, int32_t b)
{
    int32_t p = o->tg->values[b].producer;

    REMAT_ASSERT(p >= 0 && fnode[o->d->node[p]] >= 0);
    return fnode[o->d->node[p]];
}

/* Appends x to list[at .. *n) unless it is there. */
static void add_once(int32_t *list, int32_t at, int32_t *n, int32_t x)
{
    for (int32_t k = at; k < *n; k++)
        if (list[k] == x)
            return;
    list[(*n)++] = x;
}

/* Forward and backward nodes, what each reads, the gradient bytes per backward stage,
 * and last[]. */
static remat_status opt_init(struct opt *o, const remat_tgraph *tg, const struct dag *d)
{
    int32_t n = d->n, nv = tg->n_values, mt = step_max_touch(tg), nr, nm, nf = 0, nb = 0;
    int32_t *fnode, *reads, *makes, *gfirst, *glast, k;
    size_t cap_rd = 1, cap_br = 1;
    bool *is_read;

    memset(o, 0, sizeof *o);
    o->tg = tg;
    o->d = d;
    o->a = tgraph_al(tg);
    vec_init(&o->blocks, sizeof(struct block), o->a);
    for (int32_t w = 0; w < tg->n_ops; w++) {
        cap_rd += (size_t)tg->ops[w].n_in;
        cap_br += (size_t)tg->ops[w].n_saved;
        nb += tg->ops[w].has_bwd;
        nf += !tg->ops[w].is_view;
    }
    o->nf = nf;
    o->nb = nb;
    o->ns = nf + nb;
    fnode = optimal_take(o, (size_t)n, sizeof *fnode);
    reads = optimal_take(o, (size_t)mt, sizeof *reads);
    makes = optimal_take(o, (size_t)mt, sizeof *makes);
    gfirst = optimal_take(o, (size_t)nv, sizeof *gfirst);
    glast = optimal_take(o, (size_t)nv, sizeof *glast);
    is_read = optimal_take(o, (size_t)nv, sizeof *is_read);
    o->fop = optimal_take(o, (size_t)nf, sizeof *o->fop);
    o->anchor = optimal_take(o, (size_t)n, sizeof *o->anchor);
    o->m = optimal_take(o, (size_t)nf, sizeof *o->m);
    o->mk = optimal_take(o, (size_t)nf, sizeof *o->mk);
    o->t = optimal_take(o, (size_t)nf, sizeof *o->t);
    o->rd_at = optimal_take(o, (size_t)nf + 1, sizeof *o->rd_at);
    o->rd = optimal_take(o, cap_rd, sizeof *o->rd);
    o->us_at = optimal_take(o, (size_t)nf + 1, sizeof *o->us_at);
    o->us = optimal_take(o, cap_rd, sizeof *o->us);
    o->bop = optimal_take(o, (size_t)nb, sizeof *o->bop);
    o->br_at = optimal_take(o, (size_t)nb + 1, sizeof *o->br_at);
    o->br = optimal_take(o, cap_br, sizeof *o->br);
    o->last = optimal_take(o, (size_t)nf, sizeof *o->last);
    o->last_use = optimal_take(o, (size_t)nf, sizeof *o->last_use);
    o->g_rec = optimal_take(o, (size_t)nb, sizeof *o->g_rec);
    o->g_bwd = optimal_take(o, (size_t)nb, sizeof *o->g_bwd);
    if (!fnode || !reads || !makes || !gfirst || !glast || !is_read || !o->fop ||
        !o->anchor || !o->m || !o->mk || !o->t || !o->rd_at || !o->rd || !o->us_at ||
        !o->us || !o->bop || !o->br_at || !o->br || !o->last || !o->last_use || !o->g_rec ||
        !o->g_bwd)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");

    for (int32_t v = 0, i = 0; v < n; v++)
        fnode[v] = tg->ops[d->op[v]].is_view ? -1 : i++;
    /* What each FWD reads, by owner; which buffers any step reads. */
    for (int32_t v = 0, i = 0; v < n; v++) {
        step_touch(tg, (remat_step){REMAT_STEP_FWD, d->op[v]}, reads, &nr, makes, &nm);
        for (int32_t j = 0; j < nr; j++)
            is_read[reads[j]] = true;
        if (fnode[v] < 0) {
            o->anchor[v] = nr > 0 ? owner(o, fnode, reads[0]) : -1;
            continue;
        }
        o->fop[i] = d->op[v];
        o->m[i] = d->m[v];
        o->t[i] = d->t[v];
        o->rd_at[i + 1] = o->rd_at[i];
        for (int32_t j = 0; j < nr; j++)
            add_once(o->rd, o->rd_at[i], &o->rd_at[i + 1], owner(o, fnode, reads[j]));
        i++;
    }
    /* Backward nodes in reverse topological order: their reads, their gradients. */
    for (int32_t w = 0; w < nv; w++)
        gfirst[w] = glast[w] = -1;
    k = 0;
    for (int32_t v = n; v-- > 0;) {
        if (!tg->ops[d->op[v]].has_bwd)
            continue;
        o->bop[k] = d->op[v];
        step_touch(tg, (remat_step){REMAT_STEP_BWD, d->op[v]}, reads, &nr, makes, &nm);
        o->br_at[k + 1] = o->br_at[k];
        for (int32_t j = 0; j < nr; j++) {
            if (reads[j] < nv) {
                is_read[reads[j]] = true;
                add_once(o->br, o->br_at[k], &o->br_at[k + 1], owner(o, fnode, reads[j]));
            }
        }
        for (int32_t j = 0; j < nr + nm; j++) {
            int32_t b = j < nr ? reads[j] : makes[j - nr];

            if (b >= nv) {
                if (gfirst[b - nv] < 0)
                    gfirst[b - nv] = k;
                glast[b - nv] = k;
            }
        }
        k++;
    }
    for (int32_t b = 0; b < nv; b++)
        for (k = gfirst[b]; k >= 0 && k <= glast[b]; k++) {
            size_t bytes = tgraph_buf_bytes(tg, nv + b);

            o->g_bwd[k] += bytes;
            if (k > gfirst[b])
                o->g_rec[k] += bytes;
        }
    /* The part of each node's outputs that some step reads. */
    for (int32_t i = 0; i < nf; i++) {
        const struct top *op = &tg->ops[o->fop[i]];

        for (int32_t j = 0; j < op->n_out; j++)
            if (tg->values[op->out[j]].buf == op->out[j] && is_read[op->out[j]])
                o->mk[i] += tg->values[op->out[j]].bytes;
        REMAT_ASSERT(o->mk[i] <= o->m[i]);
    }
    /* Readers (CSR by counting), last[] and last_use[]. */
    for (int32_t e = 0; e < o->rd_at[nf]; e++)
        o->us_at[o->rd[e] + 1]++;
    for (int32_t i = 0; i < nf; i++)
        o->us_at[i + 1] += o->us_at[i];
    memcpy(fnode, o->us_at, sizeof *fnode * (size_t)nf); /* fill pointers */
    for (int32_t j = 0; j < nf; j++)
        for (int32_t e = o->rd_at[j]; e < o->rd_at[j + 1]; e++)
            o->us[fnode[o->rd[e]]++] = j;
    for (int32_t i = 0; i < nf; i++)
        o->last[i] = o->last_use[i] = i;
    for (k = 0; k < nb; k++)
        for (int32_t e = o->br_at[k]; e < o->br_at[k + 1]; e++) {
            o->last[o->br[e]] = nf + k;
            o->last_use[o->br[e]] = nf + k;
        }
    for (int32_t j = nf; j-- > 0;)
        for (int32_t e = o->rd_at[j]; e < o->rd_at[j + 1]; e++) {
            int32_t i = o->rd[e];

            o->last[i] = o->last[i] > o->last[j] ? o->last[i] : o->last[j];
            o->last_use[i] = o->last_use[i] > j ? o->last_use[i] : j;
        }
    for (int32_t v = 0; v < nv; v++)
        if (tgraph_is_planned(tg, v))
            o->fwd_cost += tg->values[v].cost;
    return REMAT_OK;
}

/* Whether node i's value dies right after forward position x (x < 0: the backward) of
 * stage s: no later reader in the stage and not kept into the next. */
static bool dies_after(const struct opt *o, const bool *R, const bool *S, int32_t s, int32_t i,
                       int32_t x)
{
    int32_t nf = o->nf;

    if (s + 1 < o->ns && S[(size_t)(s + 1) * nf + i])
        return false;
    if (x < 0)
        return true;
    if (s >= nf && optimal_bwd_reads(o, s - nf, i))
        return false;
    for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++)
        if (o->us[e] > x && R[(size_t)s * nf + o->us[e]])
            return false;
    return true;
}

size_t optimal_account(const struct opt *o, const bool *R, const bool *S)
{
    int32_t nf = o->nf;
    size_t peak = 0;

    for (int32_t s = 0; s < o->ns; s++) {
        const bool *r = R + (size_t)s * nf, *sv = S + (size_t)s * nf;
        size_t live = 0;

        for (int32_t i = 0; i < nf; i++) {
            if (sv[i] && (s == 0 || (!R[(size_t)(s - 1) * nf + i] && !S[(size_t)(s - 1) * nf + i])))
                return SIZE_MAX;
            live += sv[i] ? o->mk[i] : 0;
        }
        for (int32_t x = 0; x < nf; x++) {
            size_t need;

            if (!r[x])
                continue;
            for (int32_t e = o->rd_at[x]; e < o->rd_at[x + 1]; e++)
                if (!r[o->rd[e]] && !sv[o->rd[e]])
                    return SIZE_MAX;
            live += o->m[x];
            need = live + optimal_grad_at(o, s, false);
            peak = need > peak ? need : peak;
            live -= o->m[x] - o->mk[x];
            if (o->mk[x] > 0 && dies_after(o, R, S, s, x, x))
                live -= o->mk[x];
            for (int32_t e = o->rd_at[x]; e < o->rd_at[x + 1]; e++)
                if (dies_after(o, R, S, s, o->rd[e], x))
                    live -= o->mk[o->rd[e]];
        }
        if (s >= nf) {
            int32_t k = s - nf;

            for (int32_t e = o->br_at[k]; e < o->br_at[k + 1]; e++)
                if (!r[o->br[e]] && !sv[o->br[e]])
                    return SIZE_MAX;
            peak = live + o->g_bwd[k] > peak ? live + o->g_bwd[k] : peak;
        }
    }
    return peak;
}

/* The schedule of a solution, through the liveness pass; *recomputed gets the cost of
 * the FWDs that run again. */
static remat_status opt_lower(const struct opt *o, const bool *R, const bool *S,
                              remat_schedule **out, double *recomputed)
{
    const remat_tgraph *tg = o->tg;
    const struct dag *d = o->d;
    int32_t nf = o->nf;
    remat_schedule *s = NULL;
    remat_status st;

    *recomputed = 0;
    if ((st = schedule_new(o->a, &s)))
        return st;
    for (int32_t v = 0; v < d->n; v++)
        if (tg->ops[d->op[v]].is_view && o->anchor[v] < 0 &&
            (st = schedule_push(s, REMAT_STEP_FWD, d->op[v])))
            goto out;
    for (int32_t t = 0; t < o->ns; t++) {
        for (int32_t i = 0; i < nf; i++) {
            if (!R[(size_t)t * nf + i] || S[(size_t)t * nf + i])
                continue;
            if ((st = schedule_push(s, REMAT_STEP_FWD, o->fop[i])))
                goto out;
            if (!optimal_is_fixed(o, t, i)) {
                *recomputed += o->t[i];
                continue;
            }
            for (int32_t v = 0; v < d->n; v++)
                if (tg->ops[d->op[v]].is_view && o->anchor[v] == i &&
                    (st = schedule_push(s, REMAT_STEP_FWD, d->op[v])))
                    goto out;
        }
        if (t >= nf && (st = schedule_push(s, REMAT_STEP_BWD, o->bop[t - nf])))
            goto out;
    }
    st = schedule_liveness(tg, s, out);
out:
    remat_schedule_free(s);
    return st;
}

/* Lowers a solution and measures it: its own bound and its simulated peak. A solution
 * that breaks a dependency (the solver's tolerances) gets *bound = SIZE_MAX and no schedule. */
static remat_status try_solution(const struct opt *o, const bool *R, const bool *S,
                                 remat_schedule **out, size_t *bound, size_t *peak,
                                 double *recomputed)
{
    remat_status st;

    *out = NULL;
    *peak = *bound = optimal_account(o, R, S);
    if (*bound == SIZE_MAX)
        return REMAT_OK;
    if ((st = opt_lower(o, R, S, out, recomputed)))
        return st;
    if ((st = planner_sim_peak(o->tg, *out, peak))) {
        remat_schedule_free(*out);
        *out = NULL;
    }
    return st;
}

/* The number of R and S binaries of the MILP, after pruning. */
static size_t milp_cells(const struct opt *o)
{
    size_t n = 0;

    for (int32_t s = 0; s < o->ns; s++)
        for (int32_t i = 0; i < o->nf; i++)
            n += (size_t)optimal_has_r(o, s, i) + (size_t)optimal_has_s(o, s, i);
    return n;
}

/* The arrays of plan_optimal, from o's allocations. */
static remat_status opt_arrays(struct opt *o, struct best *b, bool **R, bool **S,
                               int32_t **order, bool **keep)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf, nf = (size_t)o->nf;

    *R = optimal_take(o, cells, sizeof **R);
    *S = optimal_take(o, cells, sizeof **S);
    *order = optimal_take(o, nf, sizeof **order);
    *keep = optimal_take(o, nf, sizeof **keep);
    b->R = optimal_take(o, cells, sizeof *b->R);
    b->S = optimal_take(o, cells, sizeof *b->S);
    b->rc = optimal_take(o, cells, sizeof *b->rc);
    b->sc = optimal_take(o, cells, sizeof *b->sc);
    b->cache = optimal_take(o, nf, sizeof *b->cache);
    b->mode = optimal_take(o, nf, sizeof *b->mode);
    b->best_mode = optimal_take(o, nf, sizeof *b->best_mode);
    if (!*R || !*S || !*order || !*keep || !b->R || !b->S || !b->rc || !b->sc || !b->cache ||
        !b->mode || !b->best_mode)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
    return REMAT_OK;
}

/*
 * Steps 2 and 3 of "Solving": the retention bound into b->lower (at most a tenth of the
 * time left), then the heuristic solutions into b, its keep set first. *milp says
 * whether the MILP follows: the search then leaves it three quarters of the time left.
 */
static remat_status first_solutions(struct opt *o, struct best *b, int32_t *order, bool *keep,
                                    double budget, double unit, double t_end, bool *milp)
{
    size_t n = milp_cells(o);
    bool kept = false, oom = false;

    b->lower = optimal_retention(o, budget, unit,
                                 core_seconds() + 0.1 * (t_end - core_seconds()), keep, &kept,
                                 &oom);
    if (oom)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
    *milp = n <= OPT_MAX_CELLS && t_end - core_seconds() >= (double)n / OPT_CELLS_PER_S;
    if (kept)
        optimal_offer_keep(o, b, keep);
    optimal_search(o, b, order,
                   core_seconds() + (*milp ? 0.25 : 0.95) * (t_end - core_seconds()));
    return REMAT_OK;
}

remat_status plan_optimal(const remat_tgraph *tg, const struct dag *d, size_t budget,
                          double time_limit, remat_schedule **out, remat_plan_info *info)
{
    double t_end = core_seconds() + time_limit, unit = 1, milp_budget = (double)budget + 0.5;
    double recomputed = 0, overhead, scale;
    struct opt o;
    struct best b = {.budget = budget, .lower = -1};
    struct solve sv = {false, false, -1};
    size_t cells, bound = 0, peak = 0, g_max = 0, worst = 0;
    int32_t *order;
    bool *R, *S, *keep, milp = false;
    remat_status st;

    *out = NULL;
    if (d->n > OPT_MAX_NODES)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "optimal: its heuristics grow as nodes x "
                          "stages; %d nodes is above its limit of %d", d->n, OPT_MAX_NODES);
    if ((st = opt_init(&o, tg, d)) || (st = opt_arrays(&o, &b, &R, &S, &order, &keep)))
        goto out;
    cells = (size_t)o.ns * (size_t)o.nf;
    scale = o.fwd_cost > 0 ? o.fwd_cost : 1;
    if (budget == 0) {
        optimal_order(&o, order);
        budget = b.budget = optimal_least_peak(&o, &b, order,
                                               core_seconds() + 0.25 * time_limit);
        milp_budget = (double)budget + 0.5;
    }
    for (int32_t k = 0; k < o.nb; k++)
        g_max = o.g_bwd[k] > g_max ? o.g_bwd[k] : g_max;
    if (g_max > budget) {
        st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: the gradients alone need %zu bytes, "
                        "above the activation budget of %zu bytes", g_max, budget);
        goto out;
    }
    /* Keeping what is read later, recomputing nothing: optimal when it fits. */
    for (int32_t s = 0; s < o.ns; s++)
        for (int32_t i = 0; i < o.nf; i++) {
            R[(size_t)s * o.nf + i] = optimal_is_fixed(&o, s, i);
            S[(size_t)s * o.nf + i] = i < s && s <= o.last_use[i];
        }
    if ((st = try_solution(&o, R, S, out, &bound, &peak, &recomputed)))
        goto out;
    if (peak <= budget) {
        sv.proven = true;
        goto done;
    }
    remat_schedule_free(*out);
    *out = NULL;
    while (unit * 2048 < (double)budget)
        unit *= 2;
    if ((st = first_solutions(&o, &b, order, keep, milp_budget, unit, t_end, &milp)))
        goto out;
    for (int tries = 0; milp && tries < OPT_TRIES && core_seconds() < t_end &&
         !(b.found && b.cost / scale <= b.lower + 1e-9); tries++) {
        worst = 0;
        if ((st = optimal_solve(&o, &b, milp_budget, unit, t_end, R, S, &sv)) || !sv.found)
            break;
        if ((st = try_solution(&o, R, S, out, &bound, &peak, &recomputed)))
            goto out;
        worst = bound > peak ? bound : peak;
        if (worst <= budget && (!b.found || optimal_cost(&o, R) <= b.cost))
            goto done;
        remat_schedule_free(*out);
        *out = NULL;
        sv.found = false;
        if (b.found || worst == SIZE_MAX)
            break;
        /* the solver's tolerances let it above the budget: lower it by the excess. */
        milp_budget -= (double)(worst - budget) + 1e-6 * (double)budget + 1;
    }
    if (!b.found) {
        if (st)
            goto out;
        st = !milp
                 ? REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: no schedule within the "
                              "activation budget of %zu bytes found in %.0f s (heuristics only: "
                              "%zu binaries are too many for a MILP in that time; raise the "
                              "time limit or the budget)", budget, time_limit, milp_cells(&o))
             : worst == SIZE_MAX
                 ? REMAT_FAIL(REMAT_ERR_INVALID, "optimal: the solver's solution breaks a "
                              "dependency (its numerical tolerances)")
             : worst > budget
                 ? REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: the MILP's schedules stay "
                              "above the activation budget of %zu bytes (%zu bytes after %d "
                              "tries)", budget, worst, OPT_TRIES)
                 : REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: the time limit of %.0f s was "
                              "reached before the MILP found a schedule within the "
                              "activation budget of %zu bytes (raise the time limit or the "
                              "budget)", time_limit, budget);
        goto out;
    }
    if (st == REMAT_ERR_NOMEM)
        goto out;
    /* the solver found nothing better in time (or failed): the best heuristic solution. */
    memcpy(R, b.R, sizeof *R * cells);
    memcpy(S, b.S, sizeof *S * cells);
    sv.bound = fmax(sv.bound, b.lower);
    sv.proven = sv.bound >= 0 && b.cost / scale <= sv.bound + 1e-9;
    if ((st = try_solution(&o, R, S, out, &bound, &peak, &recomputed)))
        goto out;
    if (peak > bound || bound > budget) {
        st = REMAT_FAIL(REMAT_ERR_INVALID, "optimal: a plan simulates at %zu bytes, its "
                        "bound is %zu, the activation budget %zu (a bug in its memory "
                        "model)", peak, bound, budget);
        goto out;
    }
done:
    overhead = o.fwd_cost > 0 ? recomputed / o.fwd_cost : 0;
    info->optimality_gap = sv.proven || overhead <= 0 ? 0
                           : sv.bound < 0 ? 1 : fmax(0, (overhead - sv.bound) / overhead);
    info->dp_bound_bytes = bound;
    info->overhead_bound = overhead;
out:
    if (st) {
        remat_schedule_free(*out);
        *out = NULL;
    }
    opt_fini(&o);
    return st;
}

remat_status optimal_lower(const remat_tgraph *tg, const struct dag *d, size_t budget,
                           double time_limit, double *lower)
{
    double unit = 1;
    struct opt o;
    bool *keep, found = false, oom = false;
    remat_status st;

    *lower = -1;
    if (d->n > OPT_MAX_NODES)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "optimal: %d nodes is above its limit of %d",
                          d->n, OPT_MAX_NODES);
    if ((st = opt_init(&o, tg, d)))
        goto out;
    if (!(keep = optimal_take(&o, (size_t)o.nf, sizeof *keep))) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
        goto out;
    }
    while (unit * 2048 < (double)budget)
        unit *= 2;
    *lower = optimal_retention(&o, (double)budget + 0.5, unit, core_seconds() + time_limit,
                               keep, &found, &oom);
    if (oom)
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
out:
    opt_fini(&o);
    return st;
}
