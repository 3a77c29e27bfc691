/*
 * optimal.c - the `optimal` strategy: the mixed-integer program of Checkmate (Jain et
 * al., MLSys 2020) over the forward and backward steps of the planners' graph, solved
 * with GLPK, then lowered to a schedule.
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
 * Constraints:
 *   R[s][j] <= R[s][i] + S[s][i]      for each node i whose value the forward of j reads;
 *   R[s][i] + S[s][i] >= 1            for each node i the backward of stage s reads;
 *   S[s+1][i] <= R[s][i] + S[s][i];
 *   F[s][i][p] <= R[s][p], F[s][i][p] <= 1 - S[s+1][i], and F[s][i][p] <= 1 - R[s][j]
 *             for every reader j of i after p in the stage (Checkmate's FREE, its
 *             product of factors linearized; F can be 1 only at i's last use in the
 *             stage, and as it only lowers U the optimum takes it there, so it need not
 *             be integer);
 *   U[s][p0] = sum_i Mk_i S[s][i] + M_p0 R[s][p0]                     (first position);
 *   U[s][p]  = U[s][p'] - sum_i Mk_i F[s][i][p'] - Mt_p' R[s][p'] + M_p R[s][p]
 *                                                      (p' the position before p);
 *   U[s][p] + G[s][p] <= budget.
 * Objective: minimize sum over s, i != s of T_i R[s][i], divided by the forward cost:
 * the recomputation overhead.
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
 * solution that GLPK's tolerances let above the budget is dropped for the best
 * heuristic one, or, when there is none, solved again under a budget lowered by the
 * excess.
 *
 * Pruning: last[i], the last stage that can need node i (its backward readers and,
 * through its forward readers, theirs); R and S after it are fixed at 0 (not created).
 *
 * Solving, within the time limit:
 *  1. Keeping everything that is read later, recomputing nothing: when that fits it is
 *     optimal (no cost) and no MILP is built.
 *  2. Heuristic solutions, each a point of the MILP measured by the same accounting:
 *     keep sets (the nodes dearest to recompute per byte, every k-th node), the rest
 *     recomputed when a backward needs it and dropped after it or cached; then a local
 *     search over each node's choice (keep, drop, cache) and swaps of kept nodes, for at
 *     most a quarter of the time limit.
 *  3. The LP relaxation (dual simplex): its bound, and its S rounded at several
 *     thresholds and completed into solutions (Checkmate's two-phase rounding). When
 *     the best solution meets the bound, it is optimal.
 *  4. Branch and bound (glp_intopt) for the rest of the time, the best solution so far
 *     handed to GLPK as its first incumbent at the first heuristic callback. GLPK's
 *     presolver is off: it renumbers the columns, and the incumbent could not be given.
 *  The plan is GLPK's solution when it is better, else the best heuristic one;
 *  optimality_gap is (cost - best lower bound) / cost, 1 when no bound was reached
 *  (the relaxation alone can take minutes above ~100 nodes), 0 when proven.
 * A budget of 0 (remat_plan's budget min) plans at the least MILP peak among the keep
 * sets of step 2 with recomputed values dropped: the least-peak plan found, not a proven
 * minimum, then the least cost at that peak.
 *
 * Sizes: at most 200 dag nodes, so nf, nb <= 200 and ns <= 400: under 80,000 R and S
 * binaries, and F and U about (nodes + edges) per stage. Everything but GLPK's own
 * allocations comes from the graph's allocator.
 */
#include "plan/planners.h"
#include "plan/schedule.h"

#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <time.h>

#define OPT_MAX_NODES 200
#define OPT_TRIES 3

struct opt {
    const remat_tgraph *tg;
    const struct dag *d;
    const remat_allocator *a;
    int32_t nf, nb, ns;
    int32_t *fop;            /* forward node -> op */
    int32_t *anchor;         /* dag node of a view -> forward node it follows, -1: first */
    size_t *m, *mk;          /* bytes its FWD makes; the part some step reads */
    double *t;               /* T */
    int32_t *rd_at, *rd;     /* forward node -> forward nodes its FWD reads (CSR) */
    int32_t *us_at, *us;     /* forward node -> forward nodes whose FWD reads it */
    int32_t *bop;            /* backward node -> op */
    int32_t *br_at, *br;     /* backward node -> forward nodes its BWD reads */
    int32_t *last;           /* forward node -> the last stage that can need it */
    int32_t *last_use;       /* forward node -> its last reader's stage (no recompute) */
    size_t *g_rec, *g_bwd;   /* backward node -> gradient bytes at its recomputations, at it */
    double fwd_cost;         /* the simulator's forward cost */
    vec blocks;              /* struct block: every allocation above, freed in opt_fini */
};

struct block {
    void *p;
    size_t bytes;
};

static double seconds_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A zeroed array of n items from the graph's allocator, released by opt_fini. */
static void *take(struct opt *o, size_t n, size_t size)
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

static bool bwd_reads(const struct opt *o, int32_t k, int32_t i)
{
    for (int32_t e = o->br_at[k]; e < o->br_at[k + 1]; e++)
        if (o->br[e] == i)
            return true;
    return false;
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
    fnode = take(o, (size_t)n, sizeof *fnode);
    reads = take(o, (size_t)mt, sizeof *reads);
    makes = take(o, (size_t)mt, sizeof *makes);
    gfirst = take(o, (size_t)nv, sizeof *gfirst);
    glast = take(o, (size_t)nv, sizeof *glast);
    is_read = take(o, (size_t)nv, sizeof *is_read);
    o->fop = take(o, (size_t)nf, sizeof *o->fop);
    o->anchor = take(o, (size_t)n, sizeof *o->anchor);
    o->m = take(o, (size_t)nf, sizeof *o->m);
    o->mk = take(o, (size_t)nf, sizeof *o->mk);
    o->t = take(o, (size_t)nf, sizeof *o->t);
    o->rd_at = take(o, (size_t)nf + 1, sizeof *o->rd_at);
    o->rd = take(o, cap_rd, sizeof *o->rd);
    o->us_at = take(o, (size_t)nf + 1, sizeof *o->us_at);
    o->us = take(o, cap_rd, sizeof *o->us);
    o->bop = take(o, (size_t)nb, sizeof *o->bop);
    o->br_at = take(o, (size_t)nb + 1, sizeof *o->br_at);
    o->br = take(o, cap_br, sizeof *o->br);
    o->last = take(o, (size_t)nf, sizeof *o->last);
    o->last_use = take(o, (size_t)nf, sizeof *o->last_use);
    o->g_rec = take(o, (size_t)nb, sizeof *o->g_rec);
    o->g_bwd = take(o, (size_t)nb, sizeof *o->g_bwd);
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

/* Whether the MILP has R[s][i], S[s][i]; whether R[s][i] is fixed at 1. */
static bool has_r(const struct opt *o, int32_t s, int32_t i)
{
    return (s >= o->nf || i <= s) && s <= o->last[i];
}

static bool has_s(const struct opt *o, int32_t s, int32_t i)
{
    return i < s && s < o->ns && s <= o->last[i];
}

static bool fixed_r(const struct opt *o, int32_t s, int32_t i)
{
    return s < o->nf && i == s;
}

/* Gradient bytes live at a forward position (bwd false) or the backward of stage s. */
static size_t grad_at(const struct opt *o, int32_t s, bool bwd)
{
    if (s < o->nf)
        return 0;
    return bwd ? o->g_bwd[s - o->nf] : o->g_rec[s - o->nf];
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
    if (s >= nf && bwd_reads(o, s - nf, i))
        return false;
    for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++)
        if (o->us[e] > x && R[(size_t)s * nf + o->us[e]])
            return false;
    return true;
}

/*
 * The MILP's own peak of a solution in bytes (max of U + G with every F at its
 * largest), or SIZE_MAX when the solution breaks a dependency.
 */
static size_t opt_account(const struct opt *o, const bool *R, const bool *S)
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
            need = live + grad_at(o, s, false);
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
            if (!fixed_r(o, t, i)) {
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
    st = plan_liveness(tg, s, out);
out:
    remat_schedule_free(s);
    return st;
}

/* ------------------------------------------------------------- heuristics */

/*
 * Drops what a solution computes or keeps without a use: a recomputation that nothing
 * later in its stage reads and that is not kept, a kept value that its stage does not
 * read and does not hand on. Never raises the cost or the memory.
 */
static void opt_trim(const struct opt *o, bool *R, bool *S)
{
    int32_t nf = o->nf;

    for (int32_t s = o->ns; s-- > 0;) {
        bool *r = R + (size_t)s * nf, *sv = S + (size_t)s * nf;
        const bool *nx = s + 1 < o->ns ? S + (size_t)(s + 1) * nf : NULL;

        for (int32_t i = nf; i-- > 0;) {
            bool used = (nx && nx[i]) || (s >= nf && bwd_reads(o, s - nf, i));

            for (int32_t e = o->us_at[i]; e < o->us_at[i + 1] && !used; e++)
                used = r[o->us[e]];
            if (r[i] && !fixed_r(o, s, i) && !used)
                r[i] = false;
            if (sv[i] && !used)
                sv[i] = false;
        }
    }
}

/*
 * Turns wishes of kept values (S, which it completes) into a solution: each stage runs
 * its own node or backward, what it must hand on to the next stage and is not already
 * kept, and whatever those read that is not kept. A node i with cache[i] that a
 * backward stage recomputes is also kept for later stages (cache NULL: none). Then
 * opt_trim.
 */
static void opt_complete(const struct opt *o, bool *R, bool *S, const bool *cache)
{
    int32_t nf = o->nf;

    memset(R, 0, sizeof *R * (size_t)o->ns * (size_t)nf);
    for (int32_t s = 0; s < o->ns; s++) {
        bool *r = R + (size_t)s * nf, *sv = S + (size_t)s * nf;
        bool *nx = s + 1 < o->ns ? S + (size_t)(s + 1) * nf : NULL;

        if (s < nf)
            r[s] = true;
        else
            for (int32_t e = o->br_at[s - nf]; e < o->br_at[s - nf + 1]; e++)
                r[o->br[e]] = !sv[o->br[e]];
        for (int32_t i = 0; nx && i < nf; i++)
            r[i] = r[i] || (nx[i] && !sv[i]);
        for (int32_t j = nf; j-- > 0;)
            for (int32_t e = o->rd_at[j]; r[j] && e < o->rd_at[j + 1]; e++)
                r[o->rd[e]] = r[o->rd[e]] || !sv[o->rd[e]];
        for (int32_t i = 0; cache && nx && i < nf; i++)
            nx[i] = nx[i] || (r[i] && cache[i] && has_s(o, s + 1, i));
    }
    opt_trim(o, R, S);
}

static double opt_cost(const struct opt *o, const bool *R)
{
    double c = 0;

    for (int32_t s = 0; s < o->ns; s++)
        for (int32_t i = 0; i < o->nf; i++)
            c += R[(size_t)s * o->nf + i] && !fixed_r(o, s, i) ? o->t[i] : 0;
    return c;
}

/* What a heuristic does with a node's value after the forward pass. */
enum { M_DROP, M_KEEP, M_CACHE, M_COUNT };

/* The best solution found so far that fits, and scratch for candidates. */
struct best {
    bool *R, *S, *rc, *sc, *cache;
    uint8_t *mode, *best_mode;  /* per node: the candidate's, the best one's */
    bool found;
    double cost;
    size_t budget;
    size_t peak;                /* the last candidate's MILP peak */
};

/* Completes the wishes in b->sc and keeps the result when it fits and costs less. */
static bool offer(const struct opt *o, struct best *b, const bool *cache)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;
    double c;

    opt_complete(o, b->rc, b->sc, cache);
    b->peak = opt_account(o, b->rc, b->sc);
    if (b->peak > b->budget)
        return false;
    c = opt_cost(o, b->rc);
    if (b->found && c >= b->cost)
        return false;
    memcpy(b->R, b->rc, sizeof *b->R * cells);
    memcpy(b->S, b->sc, sizeof *b->S * cells);
    b->cost = c;
    b->found = true;
    return true;
}

/* The solution of the modes in b->mode: a value is kept while forward readers need it;
 * after that, until its last reader (M_KEEP), or recomputed when needed and then
 * dropped after the stage (M_DROP) or kept for later ones (M_CACHE). */
static bool offer_modes(const struct opt *o, struct best *b)
{
    for (int32_t i = 0; i < o->nf; i++)
        b->cache[i] = b->mode[i] == M_CACHE;
    for (int32_t s = 0; s < o->ns; s++)
        for (int32_t i = 0; i < o->nf; i++) {
            bool fwd = false;

            for (int32_t e = o->us_at[i]; e < o->us_at[i + 1] && !fwd; e++)
                fwd = o->us[e] >= s;
            b->sc[(size_t)s * o->nf + i] =
                has_s(o, s, i) && (fwd || (b->mode[i] == M_KEEP && s <= o->last_use[i]));
        }
    if (!offer(o, b, b->cache))
        return false;
    memcpy(b->best_mode, b->mode, sizeof *b->mode * (size_t)o->nf);
    return true;
}

/* The forward nodes by T / Mk, the dearest to recompute per byte first. */
static void opt_order(const struct opt *o, int32_t *order)
{
    for (int32_t i = 0; i < o->nf; i++)
        order[i] = i;
    for (int32_t i = 1; i < o->nf; i++) /* insertion sort */
        for (int32_t j = i; j > 0; j--) {
            int32_t x = order[j - 1], y = order[j];
            double rx = o->t[x] / (double)(o->mk[x] + 1), ry = o->t[y] / (double)(o->mk[y] + 1);

            if (rx >= ry)
                break;
            order[j - 1] = y;
            order[j] = x;
        }
}

/*
 * Solutions outside the MILP solver, for its first incumbent: keep sets of the nodes
 * dearest to recompute per byte (every prefix) and of every k-th node, the others
 * dropped or cached; then, from the best, a local search that changes one node's mode
 * or swaps a kept node for another, until nothing improves or t_end.
 */
static void opt_heuristics(const struct opt *o, struct best *b, int32_t *order, double t_end)
{
    int32_t nf = o->nf;
    bool better = true;

    opt_order(o, order);
    for (uint8_t rest = M_DROP; rest <= M_CACHE; rest += M_CACHE - M_DROP) {
        memset(b->mode, rest, sizeof *b->mode * (size_t)nf);
        for (int32_t q = 0; q <= nf; q++) {
            if (q > 0)
                b->mode[order[q - 1]] = M_KEEP;
            offer_modes(o, b);
        }
        for (int32_t k = 2; k <= nf; k++) {
            for (int32_t i = 0; i < nf; i++)
                b->mode[i] = i % k == k - 1 ? M_KEEP : rest;
            offer_modes(o, b);
        }
    }
    while (b->found && better && seconds_now() < t_end) {
        better = false;
        for (int32_t q = 0; q < nf && seconds_now() < t_end; q++) {
            int32_t i = order[q];
            uint8_t was = b->best_mode[i];

            for (uint8_t m = 0; m < M_COUNT && b->best_mode[i] == was; m++) {
                memcpy(b->mode, b->best_mode, sizeof *b->mode * (size_t)nf);
                b->mode[i] = m;
                better = (m != was && offer_modes(o, b)) || better;
            }
            for (int32_t j = 0; j < nf && was != M_KEEP && b->best_mode[i] == was; j++) {
                if (b->best_mode[j] != M_KEEP)
                    continue;
                memcpy(b->mode, b->best_mode, sizeof *b->mode * (size_t)nf);
                b->mode[i] = M_KEEP; /* swap */
                b->mode[j] = was;
                better = offer_modes(o, b) || better;
            }
        }
    }
}

/* The least MILP peak among the heuristics' starting solutions (every keep set of
 * opt_heuristics, recomputed values dropped): the budget of the least-peak mode. */
static size_t opt_least_peak(const struct opt *o, struct best *b, const int32_t *order)
{
    size_t least = SIZE_MAX;

    b->budget = 0; /* offer_modes completes the solution, and keeps none */
    for (int32_t f = 0; f <= 2 * o->nf; f++) {
        memset(b->mode, M_DROP, sizeof *b->mode * (size_t)o->nf);
        for (int32_t q = 0; q < f && f <= o->nf; q++) /* a prefix of order */
            b->mode[order[q]] = M_KEEP;
        for (int32_t i = 0, k = f - o->nf + 1; f > o->nf && i < o->nf; i++) /* every k-th */
            b->mode[i] = i % k == k - 1 ? M_KEEP : M_DROP;
        offer_modes(o, b);
        least = b->peak < least ? b->peak : least;
    }
    return least;
}

/* ----------------------------------------------------------------- the MILP */

struct lp_col {
    int kind, type;
    double lb, ub, obj;
};

struct lp_row {
    int type;
    double lb, ub;
};

/* The MILP as lists, handed to GLPK at once: columns, rows, and 1-based triplets. */
struct lp {
    vec cols, rows, ia, ja, ar;
    bool oom;
};

static int lp_col(struct lp *lp, int kind, int type, double lb, double ub, double obj)
{
    struct lp_col *c = vec_push(&lp->cols);

    if (!c) {
        lp->oom = true;
        return 0;
    }
    *c = (struct lp_col){kind, type, lb, ub, obj};
    return (int)lp->cols.n;
}

static int lp_row(struct lp *lp, int type, double lb, double ub)
{
    struct lp_row *r = vec_push(&lp->rows);

    if (!r) {
        lp->oom = true;
        return 0;
    }
    *r = (struct lp_row){type, lb, ub};
    return (int)lp->rows.n;
}

/* Adds coefficient v of column j in row i (both distinct per row by construction). */
static void lp_nz(struct lp *lp, int i, int j, double v)
{
    int *pi, *pj;
    double *pv;

    if (lp->oom || i == 0 || j == 0 || v == 0)
        return;
    pi = vec_push(&lp->ia);
    pj = vec_push(&lp->ja);
    pv = vec_push(&lp->ar);
    if (!pi || !pj || !pv) {
        lp->oom = true;
        return;
    }
    *pi = i;
    *pj = j;
    *pv = v;
}

/* The frees after forward position x of stage s (the backward is always last): for x
 * and each value x reads, unless a reader that always runs comes later, an F column,
 * its bounds, and Mk F in row `row`. */
static void lp_frees(const struct opt *o, struct lp *lp, const int *cr, const int *cs,
                     int32_t s, int32_t x, int row, double unit)
{
    int32_t nf = o->nf;

    for (int32_t c = o->rd_at[x] - 1; c < o->rd_at[x + 1]; c++) {
        int32_t i = c < o->rd_at[x] ? x : o->rd[c];
        bool never = s >= nf && bwd_reads(o, s - nf, i);
        int f;

        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1] && !never; e++)
            never = o->us[e] > x && has_r(o, s, o->us[e]) && fixed_r(o, s, o->us[e]);
        if (never || o->mk[i] == 0)
            continue;
        f = lp_col(lp, GLP_CV, GLP_DB, 0, 1, 0);
        if (!fixed_r(o, s, x)) {
            int r = lp_row(lp, GLP_UP, 0, 0);

            lp_nz(lp, r, f, 1);
            lp_nz(lp, r, cr[(size_t)s * nf + x], -1);
        }
        if (has_s(o, s + 1, i)) {
            int r = lp_row(lp, GLP_UP, 0, 1);

            lp_nz(lp, r, f, 1);
            lp_nz(lp, r, cs[(size_t)(s + 1) * nf + i], 1);
        }
        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++) {
            int32_t j = o->us[e];
            int r;

            if (j <= x || !has_r(o, s, j))
                continue;
            r = lp_row(lp, GLP_UP, 0, 1);
            lp_nz(lp, r, f, 1);
            lp_nz(lp, r, cr[(size_t)s * nf + j], 1);
        }
        lp_nz(lp, row, f, (double)o->mk[i] / unit);
    }
}

/* Builds the MILP for an activation budget of `budget` bytes in units of `unit`;
 * cr / cs get the column of each R[s][i] / S[s][i] (0: none). */
static void lp_build(const struct opt *o, struct lp *lp, double budget, double unit, int *cr,
                     int *cs)
{
    int32_t nf = o->nf, ns = o->ns;
    double scale = o->fwd_cost > 0 ? o->fwd_cost : 1;

    for (int32_t s = 0; s < ns; s++)
        for (int32_t i = 0; i < nf; i++) {
            size_t at = (size_t)s * nf + i;

            cr[at] = cs[at] = 0;
            if (has_r(o, s, i))
                cr[at] = fixed_r(o, s, i) ? lp_col(lp, GLP_IV, GLP_FX, 1, 1, 0)
                                          : lp_col(lp, GLP_IV, GLP_DB, 0, 1, o->t[i] / scale);
            if (has_s(o, s, i))
                cs[at] = lp_col(lp, GLP_IV, GLP_DB, 0, 1, 0);
        }
    if (lp->oom)
        return;
    for (int32_t s = 0; s < ns; s++) {
        const int *r = cr + (size_t)s * nf, *sv = cs + (size_t)s * nf;
        int32_t prev = -1; /* the forward position before, -1: none */
        int u_prev = 0;

        /* Dependencies. */
        for (int32_t j = 0; j < nf; j++) {
            if (!r[j])
                continue;
            for (int32_t e = o->rd_at[j]; e < o->rd_at[j + 1]; e++) {
                int32_t i = o->rd[e];
                int row = lp_row(lp, GLP_UP, 0, 0);

                REMAT_ASSERT(r[i]);
                lp_nz(lp, row, r[j], 1);
                lp_nz(lp, row, r[i], -1);
                lp_nz(lp, row, sv[i], -1);
            }
        }
        if (s >= nf)
            for (int32_t e = o->br_at[s - nf]; e < o->br_at[s - nf + 1]; e++) {
                int32_t i = o->br[e];
                int row = lp_row(lp, GLP_LO, 1, 0);

                REMAT_ASSERT(r[i]);
                lp_nz(lp, row, r[i], 1);
                lp_nz(lp, row, sv[i], 1);
            }
        /* What is kept into a stage was there in the stage before. */
        for (int32_t i = 0; s > 0 && i < nf; i++) {
            int row;

            if (!sv[i])
                continue;
            row = lp_row(lp, GLP_UP, 0, 0);
            REMAT_ASSERT(cr[(size_t)(s - 1) * nf + i]);
            lp_nz(lp, row, sv[i], 1);
            lp_nz(lp, row, cr[(size_t)(s - 1) * nf + i], -1);
            lp_nz(lp, row, cs[(size_t)(s - 1) * nf + i], -1);
        }
        /* Memory at each position: the forward nodes that may run, then the backward. */
        for (int32_t x = 0; x <= nf; x++) {
            bool bwd = x == nf;
            double cap;
            int u, row;

            if (bwd ? s < nf : !r[x])
                continue;
            cap = (budget - (double)grad_at(o, s, bwd)) / unit;
            u = lp_col(lp, GLP_CV, GLP_UP, 0, cap, 0);
            row = lp_row(lp, GLP_FX, 0, 0);
            lp_nz(lp, row, u, 1);
            if (prev < 0) {
                for (int32_t i = 0; i < nf; i++)
                    lp_nz(lp, row, sv[i], -(double)o->mk[i] / unit);
            } else {
                lp_nz(lp, row, u_prev, -1);
                lp_nz(lp, row, r[prev], (double)(o->m[prev] - o->mk[prev]) / unit);
                lp_frees(o, lp, cr, cs, s, prev, row, unit);
            }
            if (!bwd)
                lp_nz(lp, row, r[x], -(double)o->m[x] / unit);
            prev = x;
            u_prev = u;
        }
    }
}

struct cb_state {
    const double *x;     /* the incumbent to hand over at the first heuristic call */
    double bound;        /* the best lower bound on the overhead seen */
    double t_end;
};

static void on_tree(glp_tree *tree, void *info)
{
    struct cb_state *cs = info;
    int p;

    if (glp_ios_reason(tree) == GLP_IHEUR && cs->x) {
        glp_ios_heur_sol(tree, cs->x);
        cs->x = NULL;
    }
    if (glp_ios_reason(tree) == GLP_ISELECT && (p = glp_ios_best_node(tree)) > 0 &&
        glp_ios_node_bound(tree, p) > cs->bound)
        cs->bound = glp_ios_node_bound(tree, p);
    if (seconds_now() > cs->t_end)
        glp_ios_terminate(tree);
}

/* The MILP of lp_build as a GLPK problem, scaled. */
static glp_prob *lp_glpk(const struct lp *lp)
{
    glp_prob *P = glp_create_prob();

    glp_set_obj_dir(P, GLP_MIN);
    if (lp->cols.n)
        glp_add_cols(P, (int)lp->cols.n);
    if (lp->rows.n)
        glp_add_rows(P, (int)lp->rows.n);
    for (size_t j = 0; j < lp->cols.n; j++) {
        const struct lp_col *c = VEC_AT(&lp->cols, struct lp_col, j);

        glp_set_col_kind(P, (int)j + 1, c->kind);
        glp_set_col_bnds(P, (int)j + 1, c->type, c->lb, c->ub);
        glp_set_obj_coef(P, (int)j + 1, c->obj);
    }
    for (size_t i = 0; i < lp->rows.n; i++) {
        const struct lp_row *r = VEC_AT(&lp->rows, struct lp_row, i);

        glp_set_row_bnds(P, (int)i + 1, r->type, r->lb, r->ub);
    }
    if (lp->ia.n > 1)
        glp_load_matrix(P, (int)lp->ia.n - 1, lp->ia.data, lp->ja.data, lp->ar.data);
    glp_scale_prob(P, GLP_SF_AUTO);
    return P;
}

static int ms_left(double t_end)
{
    double ms = (t_end - seconds_now()) * 1000;

    return ms >= INT_MAX ? INT_MAX : ms > 1 ? (int)ms : 1;
}

/* The outcome of a solve. */
struct solve {
    bool found;          /* R and S hold GLPK's solution */
    bool proven;         /* ... proven optimal */
    double bound;        /* a lower bound on the overhead, -1: none */
};

/*
 * Solves the MILP under `budget` bytes until t_end. The LP relaxation comes first: its
 * kept values, rounded at several thresholds, are offered to b (Checkmate's two-phase
 * rounding), and b's best becomes GLPK's first incumbent. Then branch and bound
 * (GLPK's presolver is off: it renumbers columns, and the incumbent could not be
 * given). On REMAT_OK, *sv says what was found; no solution within the time limit is
 * REMAT_OK with nothing found.
 */
static remat_status lp_solve(struct opt *o, struct best *b, double budget, double unit,
                             double t_end, bool *R, bool *S, struct solve *sv)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;
    int *cr = take(o, cells, sizeof *cr), *cs = take(o, cells, sizeof *cs);
    struct lp lp = {.oom = false};
    struct cb_state cbs = {NULL, 0, t_end};
    double *x = NULL, scale = o->fwd_cost > 0 ? o->fwd_cost : 1;
    glp_prob *P = NULL;
    glp_smcp smcp;
    glp_iocp parm;
    remat_status st = REMAT_OK;
    int ret, mst, term = -1;

    *sv = (struct solve){false, false, -1};
    vec_init(&lp.cols, sizeof(struct lp_col), o->a);
    vec_init(&lp.rows, sizeof(struct lp_row), o->a);
    vec_init(&lp.ia, sizeof(int), o->a);
    vec_init(&lp.ja, sizeof(int), o->a);
    vec_init(&lp.ar, sizeof(double), o->a);
    if (!cr || !cs || !vec_push(&lp.ia) || !vec_push(&lp.ja) || !vec_push(&lp.ar)) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
        goto out;
    }
    lp_build(o, &lp, budget, unit, cr, cs);
    x = lp.oom ? NULL : take(o, lp.cols.n, sizeof *x);
    if (!x) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
        goto out;
    }
    term = glp_term_out(GLP_OFF); /* the library never prints */
    P = lp_glpk(&lp);

    /* The LP relaxation, by the dual simplex (much faster here than the primal). */
    glp_init_smcp(&smcp);
    smcp.msg_lev = GLP_MSG_OFF;
    smcp.meth = GLP_DUALP;
    smcp.tm_lim = ms_left(t_end);
    ret = glp_simplex(P, &smcp);
    if (ret == 0 && glp_get_status(P) == GLP_NOFEAS) {
        st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: no schedule fits the activation "
                        "budget of %zu bytes", b->budget);
        goto out;
    }
    if (ret == GLP_ETMLIM || (ret == 0 && glp_get_status(P) != GLP_OPT))
        goto out; /* out of time: nothing found */
    if (ret != 0) {
        st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "optimal: GLPK failed on the LP relaxation "
                        "(glp_simplex returned %d)", ret);
        goto out;
    }
    sv->bound = cbs.bound = glp_get_obj_val(P);
    for (int32_t i = 0; i < o->nf; i++)
        b->cache[i] = true;
    for (int k = 0; k < 20; k++) {
        for (size_t q = 0; q < cells; q++)
            b->sc[q] = cs[q] && glp_get_col_prim(P, cs[q]) >= 0.05 * (k / 2) + 0.01;
        offer(o, b, k % 2 ? b->cache : NULL);
    }
    if (b->found && b->cost / scale <= sv->bound + 1e-9)
        goto out; /* the relaxation proves the heuristic optimal */
    if (b->found) {
        for (size_t q = 0; q < cells; q++) {
            if (cr[q])
                x[cr[q]] = b->R[q];
            if (cs[q])
                x[cs[q]] = b->S[q];
        }
        cbs.x = x; /* F and U stay 0: GLPK reads only the objective of a given solution */
    }
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_OFF;
    parm.tm_lim = ms_left(t_end);
    parm.fp_heur = b->found ? GLP_OFF : GLP_ON;
    parm.cb_func = on_tree;
    parm.cb_info = &cbs;
    ret = glp_intopt(P, &parm);
    mst = glp_mip_status(P);
    if (mst == GLP_OPT || mst == GLP_FEAS) {
        for (size_t q = 0; q < cells; q++) {
            R[q] = cr[q] && glp_mip_col_val(P, cr[q]) > 0.5;
            S[q] = cs[q] && glp_mip_col_val(P, cs[q]) > 0.5;
        }
        opt_trim(o, R, S);
        sv->found = true;
        sv->proven = mst == GLP_OPT && ret == 0;
        sv->bound = cbs.bound;
    } else if (ret == 0 || ret == GLP_ENOPFS || mst == GLP_NOFEAS) {
        st = REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: no schedule fits the activation "
                        "budget of %zu bytes", b->budget);
    } else if (ret != GLP_ETMLIM && ret != GLP_ESTOP) {
        st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "optimal: GLPK failed on the MILP (glp_intopt "
                        "returned %d)", ret);
    }
out:
    if (P)
        glp_delete_prob(P);
    if (term >= 0)
        glp_term_out(term);
    vec_fini(&lp.cols);
    vec_fini(&lp.rows);
    vec_fini(&lp.ia);
    vec_fini(&lp.ja);
    vec_fini(&lp.ar);
    return st;
}

/* ------------------------------------------------------------------ the plan */

/* Lowers a solution and measures it: its own bound and its simulated peak. A solution
 * that breaks a dependency (GLPK's tolerances) gets *bound = SIZE_MAX and no schedule. */
static remat_status try_solution(const struct opt *o, const bool *R, const bool *S,
                                 remat_schedule **out, size_t *bound, size_t *peak,
                                 double *recomputed)
{
    remat_status st;

    *out = NULL;
    *peak = *bound = opt_account(o, R, S);
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

/* The arrays of plan_optimal, from o's allocations. */
static remat_status opt_arrays(struct opt *o, struct best *b, bool **R, bool **S,
                               int32_t **order)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf, nf = (size_t)o->nf;

    *R = take(o, cells, sizeof **R);
    *S = take(o, cells, sizeof **S);
    *order = take(o, nf, sizeof **order);
    b->R = take(o, cells, sizeof *b->R);
    b->S = take(o, cells, sizeof *b->S);
    b->rc = take(o, cells, sizeof *b->rc);
    b->sc = take(o, cells, sizeof *b->sc);
    b->cache = take(o, nf, sizeof *b->cache);
    b->mode = take(o, nf, sizeof *b->mode);
    b->best_mode = take(o, nf, sizeof *b->best_mode);
    if (!*R || !*S || !*order || !b->R || !b->S || !b->rc || !b->sc || !b->cache || !b->mode ||
        !b->best_mode)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
    return REMAT_OK;
}

remat_status plan_optimal(const remat_tgraph *tg, const struct dag *d, size_t budget,
                          double time_limit, remat_schedule **out, remat_plan_info *info)
{
    double t_end = seconds_now() + time_limit, unit = 1, milp_budget = (double)budget + 0.5;
    double recomputed = 0, overhead;
    struct opt o;
    struct best b = {.budget = budget};
    struct solve sv = {false, false, -1};
    size_t cells, bound = 0, peak = 0, g_max = 0, worst = 0;
    int32_t *order;
    bool *R, *S;
    remat_status st;

    *out = NULL;
    if (d->n > OPT_MAX_NODES)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the optimal MILP has O(n^2) binaries; %d "
                          "nodes is above its limit of %d", d->n, OPT_MAX_NODES);
    if ((st = opt_init(&o, tg, d)) || (st = opt_arrays(&o, &b, &R, &S, &order)))
        goto out;
    cells = (size_t)o.ns * (size_t)o.nf;
    if (budget == 0) {
        opt_order(&o, order);
        budget = b.budget = opt_least_peak(&o, &b, order);
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
            R[(size_t)s * o.nf + i] = fixed_r(&o, s, i);
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
    opt_heuristics(&o, &b, order, seconds_now() + 0.25 * time_limit);
    while (unit * 2048 < (double)budget)
        unit *= 2;
    for (int tries = 0; tries < OPT_TRIES; tries++) {
        worst = 0;
        if ((st = lp_solve(&o, &b, milp_budget, unit, t_end, R, S, &sv)) || !sv.found)
            break;
        if ((st = try_solution(&o, R, S, out, &bound, &peak, &recomputed)))
            goto out;
        worst = bound > peak ? bound : peak;
        if (worst <= budget && (!b.found || opt_cost(&o, R) <= b.cost))
            goto done;
        remat_schedule_free(*out);
        *out = NULL;
        sv.found = false;
        if (b.found || worst == SIZE_MAX)
            break;
        /* GLPK's tolerances let it above the budget: lower it by the excess. */
        milp_budget -= (double)(worst - budget) + 1e-6 * (double)budget + 1;
    }
    if (!b.found) {
        if (st)
            goto out;
        st = worst == SIZE_MAX
                 ? REMAT_FAIL(REMAT_ERR_INVALID, "optimal: GLPK's solution breaks a "
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
    /* GLPK found nothing better in time (or failed): the best heuristic solution. */
    memcpy(R, b.R, sizeof *R * cells);
    memcpy(S, b.S, sizeof *S * cells);
    sv.proven = sv.bound >= 0 && b.cost / (o.fwd_cost > 0 ? o.fwd_cost : 1) <= sv.bound + 1e-9;
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
