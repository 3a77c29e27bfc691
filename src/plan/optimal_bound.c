/*
 * optimal_bound.c - a lower bound on the `optimal` MILP's overhead from a much smaller
 * program, the retention relaxation, whose solution also seeds the heuristics.
 *
 * Say node i is retained when its value is kept from its own stage to its last use
 * without a break: S[s][i] = 1 for every stage i < s <= last_use[i]. A node that is not
 * retained runs again at least once: at the last stage s of that interval with S[s][i]
 * = 0 it is read (s = last_use[i]) or handed on (S[s+1][i] = 1), so R[s][i] = 1 with s
 * != i, costing T_i. And at a position p of stage s, the MILP's U + G counts at least:
 * every retained node whose interval holds s (kept into s + 1, so never freed in s; or s
 * is its last use, and it is read at p), whatever p reads (mk each, kept or recomputed),
 * the output of a forward p (M_p), and the stage's gradients G. So with x_i = 1 for a
 * retained node, every solution of the MILP gives a solution of
 *
 *   minimize  sum_i T_i (1 - x_i) / forward cost
 *   s.t.      sum_{i in A(p) \ reads(p)} Mk_i x_i <= budget - G(p) - M_p - sum_{reads(p)} Mk_i
 *             for p = each stage's own forward node, and each backward,
 *             A(p) = {i : i < s <= last_use[i]}, x binary,
 *
 * of no higher objective, and any lower bound of this program (CBC's) bounds the MILP.
 * It has nf binaries and at most ns rows (fewer: a row that all of A(p) fits is dropped)
 * against the MILP's O(ns x nf), so CBC closes it in seconds at a thousand nodes. It
 * ignores what recomputations hold in memory and that a value may run again more than
 * once, so it is tight where each dropped value runs again once (chains, generous
 * budgets) and loose near the least budget. Its optimal x, taken as a keep set, is a
 * good first heuristic solution (optimal_search).
 *
 * Sizes: nf columns, at most ns rows, sum_i (last_use[i] - i) nonzeros at most (about
 * a million on a 1,000-node graph whose values live into the backward).
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

/* Builds the program: col[i] the column of x_i (0: none, x_i = 1 at no cost); *fixed
 * the objective's constant. False when some row cannot hold even with nothing
 * retained (no solution of the MILP at this budget). */
static bool build(const struct opt *o, struct lp *lp, double budget, double unit, int *col,
                  bool *mark, double *fixed)
{
    double scale = o->fwd_cost > 0 ? o->fwd_cost : 1;

    *fixed = 0;
    for (int32_t i = 0; i < o->nf; i++) {
        col[i] = 0;
        if (o->last_use[i] > i && o->mk[i] > 0 && o->t[i] > 0) {
            col[i] = optimal_lp_col(lp, true, 0, 1, -o->t[i] / scale);
            *fixed += o->t[i] / scale;
        }
    }
    for (int32_t s = 0; s < o->ns && !lp->oom; s++) {
        double cap = row_cap(o, s, budget, unit, mark), all = 0;
        int32_t top = s < o->nf ? s : o->nf;
        int row;

        for (int32_t i = 0; i < top; i++)
            if (col[i] && !mark[i] && o->last_use[i] >= s)
                all += (double)o->mk[i] / unit;
        if (cap < 0) {
            row_clear(o, s, mark);
            return false;
        }
        if (all > cap) { /* else every retained node fits here: no row */
            row = optimal_lp_row(lp, -DBL_MAX, cap);
            for (int32_t i = 0; i < top; i++)
                if (col[i] && !mark[i] && o->last_use[i] >= s)
                    optimal_lp_nz(lp, row, col[i], (double)o->mk[i] / unit);
        }
        row_clear(o, s, mark);
    }
    return true;
}

double optimal_retention(struct opt *o, double budget, double unit, double t_end, bool *keep,
                         bool *found, bool *oom)
{
    int *col = optimal_take(o, (size_t)o->nf, sizeof *col);
    bool *mark = optimal_take(o, (size_t)o->nf, sizeof *mark);
    struct lp lp;
    double fixed = 0, bound = -DBL_MAX, *x = NULL, lower = -1;
    enum lp_end end;

    *found = false;
    optimal_lp_init(&lp, o->a);
    if (!col || !mark || lp.oom) {
        *oom = true;
        goto out;
    }
    if (!build(o, &lp, budget, unit, col, mark, &fixed) || lp.oom) {
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
    for (int32_t i = 0; *found && i < o->nf; i++)
        keep[i] = col[i] ? x[col[i]] > 0.5 : o->t[i] > 0;
out:
    optimal_lp_fini(&lp);
    return lower;
}
