/*
 * optimal_bound.c - a lower bound on the `optimal` MILP's overhead from a much smaller
 * program, the retention relaxation, whose solution also seeds the heuristics.
 *
 * Node i's use stages are u_0 = i (its own) < u_1 < ... < u_m = last_use[i]: the stages
 * of its forward readers (each runs in its own stage) and of its backward readers. Gap
 * a is the stages (u_{a-1}, u_a]; say it is bridged when i is kept over all of it:
 * S[s][i] = 1 for every s in it. A gap that is not bridged makes i run again inside
 * it: at its last stage s with S[s][i] = 0, i is read (s = u_a, a reader that always
 * runs) or handed on (S[s+1][i] = 1), so R[s][i] = 1 with s != i, costing T_i; the gaps
 * are disjoint, so each costs its own T_i. And at a position p of stage s, the MILP's
 * U + G counts at least: every bridged gap that holds s strictly inside (kept into s and
 * into s + 1, so live all through s), whatever p reads (mk each, kept or recomputed),
 * the output of a forward p (M_p), and the stage's gradients G. So with y_ia = 1 for a
 * bridged gap, every solution of the MILP gives a solution of
 *
 *   minimize  sum_{i, a} T_i (1 - y_ia) / forward cost
 *   s.t.      sum_{(i, a) : u_{a-1} < s < u_a} Mk_i y_ia
 *                               <= budget - G(p) - M_p - sum_{reads(p)} Mk_i
 *             for p = each stage's own forward node, and each backward; y binary,
 *
 * of no higher objective, and any lower bound of this program (CBC's) bounds the MILP.
 * A gap with no stage inside is bridged at no cost (no column). Tying a node's gaps
 * together (x_i: all bridged, costing T_i once when not) gives the weaker program over
 * nodes that this one replaced: its optimum is never above the tied one's (ResNet-50 b32
 * at the approx-mc least budget: both 0.1293; a 1,000-node layered graph at 0.8 of its
 * peak: 0.0243 against 0.0230).
 * It has a column per gap and at most ns rows (fewer: a row that every gap fits is
 * dropped) against the MILP's O(ns x nf), so CBC closes it in seconds at a thousand
 * nodes. It ignores what recomputations hold in memory and that a value may run again
 * more than once within a gap (a recomputation that needs it), so it is tight where
 * each dropped value runs again once (chains, generous budgets) and loose near the least
 * budget: on ResNet-50 at the approx-mc least budget, the best plan found (0.4988)
 * recomputes values 0.1655 of the forward cost once and three times that in all. Its
 * optimal y, taken as a keep set (a node whose gaps are all bridged), is a good first
 * heuristic solution (optimal_search).
 *
 * Sizes: a column per gap (at most nodes + edges + backward reads), at most ns rows,
 * sum_i (last_use[i] - i) nonzeros at most (about a million on a 1,000-node graph whose
 * values live into the backward).
 */
#include "plan/optimal.h"

#include <float.h>

/* The row of position p (a forward stage's own node, or a backward stage's BWD): the
 * capacity left for retained nodes, in units; mark[] gets what p reads (the caller clears
 * it). */
static double row_cap(const struct opt *o, int32_t s, double budget, double unit, bool *mark)
{
    const int32_t *at = s < o->nf ? o->rd_at + s : o->br_at + (s - o->nf);
    const int32_t *list = s < o->nf ? o->rd : o->br;
    double cap = budget - (s < o->nf ? (double)o->m[s] : (double)o->g_bwd[s - o->nf]);

    for (int32_t e = at[0]; e < at[1]; e++) {
        mark[list[e]] = true;
        cap -= (double)o->mk[list[e]];
    }
    return cap / unit;
}

static void row_clear(const struct opt *o, int32_t s, bool *mark)
{
    const int32_t *at = s < o->nf ? o->rd_at + s : o->br_at + (s - o->nf);
    const int32_t *list = s < o->nf ? o->rd : o->br;

    for (int32_t e = at[0]; e < at[1]; e++)
        mark[list[e]] = false;
}

/* Each node's use stages, ascending and distinct, as CSR (ua, u): its own stage, its
 * forward readers' stages, its backward readers' stages. False when out of memory. */
static bool use_stages(struct opt *o, int32_t **ua, int32_t **u)
{
    int32_t nf = o->nf, *cnt = optimal_take(o, (size_t)nf + 1, sizeof *cnt);
    size_t total = (size_t)nf + (size_t)o->us_at[nf] + (size_t)o->br_at[o->nb];

    *ua = optimal_take(o, (size_t)nf + 1, sizeof **ua);
    *u = optimal_take(o, total, sizeof **u);
    if (!cnt || !*ua || !*u)
        return false;
    for (int32_t i = 0; i < nf; i++)
        cnt[i] = 1 + o->us_at[i + 1] - o->us_at[i];
    for (int32_t e = 0; e < o->br_at[o->nb]; e++)
        cnt[o->br[e]]++;
    for (int32_t i = 0; i < nf; i++) {
        (*ua)[i + 1] = (*ua)[i] + cnt[i];
        cnt[i] = (*ua)[i];
        (*u)[cnt[i]++] = i;
        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++)
            (*u)[cnt[i]++] = o->us[e];
    }
    for (int32_t k = 0; k < o->nb; k++) /* backward stages ascend with k */
        for (int32_t e = o->br_at[k]; e < o->br_at[k + 1]; e++)
            (*u)[cnt[o->br[e]]++] = nf + k;
    return true;
}

/* The column of the gap that holds stage s strictly inside for node i (0: none): at[i]
 * is the first of i's use stages at or after the stages before s, moved on here. */
static int gap_col(const int32_t *ua, const int32_t *u, const int *gcol, int32_t *at,
                   int32_t i, int32_t s)
{
    while (at[i] < ua[i + 1] && u[at[i]] < s)
        at[i]++;
    return at[i] < ua[i + 1] && u[at[i]] > s ? gcol[at[i]] : 0;
}

/* Builds the program: gcol[q] the column of the gap that ends at use q (0: none, kept at
 * no cost); *fixed the objective's constant. False when some row cannot hold even with
 * nothing kept (no solution of the MILP at this budget). */
static bool build(struct opt *o, struct lp *lp, double budget, double unit, const int32_t *ua,
                  const int32_t *u, int *gcol, bool *mark, double *fixed)
{
    double scale = o->fwd_cost > 0 ? o->fwd_cost : 1;
    int32_t *at = optimal_take(o, (size_t)o->nf, sizeof *at);

    *fixed = 0;
    if (!at) {
        lp->oom = true;
        return true;
    }
    for (int32_t i = 0; i < o->nf; i++) {
        at[i] = ua[i];
        gcol[ua[i]] = 0;
        for (int32_t q = ua[i] + 1; q < ua[i + 1]; q++) {
            gcol[q] = 0;
            if (u[q] - u[q - 1] >= 2 && o->mk[i] > 0 && o->t[i] > 0) {
                gcol[q] = optimal_lp_col(lp, true, 0, 1, -o->t[i] / scale);
                *fixed += o->t[i] / scale;
            }
        }
    }
    for (int32_t s = 0; s < o->ns && !lp->oom; s++) {
        double cap = row_cap(o, s, budget, unit, mark), all = 0;
        int32_t top = s < o->nf ? s : o->nf;
        int row = 0;

        row_clear(o, s, mark);
        if (cap < 0)
            return false;
        for (int32_t i = 0; i < top; i++)
            if (gap_col(ua, u, gcol, at, i, s))
                all += (double)o->mk[i] / unit;
        if (all <= cap)
            continue; /* every kept gap fits here: no row */
        row = optimal_lp_row(lp, -DBL_MAX, cap);
        for (int32_t i = 0; i < top; i++) {
            int c = gap_col(ua, u, gcol, at, i, s);

            if (c)
                optimal_lp_nz(lp, row, c, (double)o->mk[i] / unit);
        }
    }
    return true;
}

double optimal_retention(struct opt *o, double budget, double unit, double t_end, bool *keep,
                         bool *found, bool *oom)
{
    int32_t *ua = NULL, *u = NULL;
    int *col = NULL;
    bool *mark = optimal_take(o, (size_t)o->nf, sizeof *mark);
    struct lp lp;
    double fixed = 0, bound = -DBL_MAX, *x = NULL, lower = -1;
    enum lp_end end;

    *found = false;
    optimal_lp_init(&lp, o->a);
    if (!mark || lp.oom || !use_stages(o, &ua, &u) ||
        !(col = optimal_take(o, (size_t)ua[o->nf], sizeof *col))) {
        *oom = true;
        goto out;
    }
    if (!build(o, &lp, budget, unit, ua, u, col, mark, &fixed) || lp.oom) {
        *oom = lp.oom;
        goto out;
    }
    for (int32_t i = 0; i < o->nf; i++)
        keep[i] = o->t[i] > 0; /* a node that costs nothing to run again is not kept */
    if (lp.rows.n == 0) { /* everything retained fits: the bound is 0 */
        *found = true;
        lower = 0;
        goto out;
    }
    if (!(x = optimal_take(o, lp.cols.n, sizeof *x))) {
        *oom = true;
        goto out;
    }
    end = optimal_branch(o, &lp, NULL, t_end, x, found, &bound, oom);
    if (*oom || end == LP_INFEASIBLE || end == LP_FAILED || bound <= -DBL_MAX)
        goto out;
    lower = fixed + bound > 0 ? fixed + bound : 0;
    for (int32_t i = 0; *found && i < o->nf; i++) {
        keep[i] = o->t[i] > 0;
        for (int32_t q = ua[i] + 1; q < ua[i + 1]; q++)
            keep[i] = keep[i] && (!col[q] || x[col[q]] > 0.5);
    }
out:
    optimal_lp_fini(&lp);
    return lower;
}
