/*
 * optimal_milp.c - the mixed-integer program of the `optimal` strategy, built as lists
 * (columns, rows, 1-based triplets, struct lp), and its solve: the LP relaxation, then
 * branch and cut under the time limit, both by COIN-OR (optimal_cbc.c). optimal.c has
 * the nodes, the stages and the variables (R, S, F, U; G a constant).
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
 * Sizes: R and S binaries at most ns x nf, fewer after pruning, and built only up to
 * OPT_MAX_CELLS of them (optimal.c): at ResNet-50's 176 nodes 61,000 of them and about
 * 0.16 million columns in all; F and U about (nodes + edges) per stage. The solvers' own
 * allocations aside, everything comes from the graph's allocator.
 */
#include "plan/optimal.h"

#include <float.h>
#include <math.h>

int optimal_lp_col(struct lp *lp, bool integer, double lb, double ub, double obj)
{
    struct lp_col *c = vec_push(&lp->cols);

    if (!c) {
        lp->oom = true;
        return 0;
    }
    *c = (struct lp_col){integer, lb, ub, obj};
    return (int)lp->cols.n;
}

int optimal_lp_row(struct lp *lp, double lb, double ub)
{
    struct lp_row *r = vec_push(&lp->rows);

    if (!r) {
        lp->oom = true;
        return 0;
    }
    *r = (struct lp_row){lb, ub};
    return (int)lp->rows.n;
}

void optimal_lp_nz(struct lp *lp, int i, int j, double v)
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
        bool never = s >= nf && optimal_bwd_reads(o, s - nf, i);
        int f;

        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1] && !never; e++)
            never = o->us[e] > x && optimal_has_r(o, s, o->us[e]) &&
                    optimal_is_fixed(o, s, o->us[e]);
        if (never || o->mk[i] == 0)
            continue;
        f = optimal_lp_col(lp, false, 0, 1, 0);
        if (!optimal_is_fixed(o, s, x)) {
            int r = optimal_lp_row(lp, -DBL_MAX, 0);

            optimal_lp_nz(lp, r, f, 1);
            optimal_lp_nz(lp, r, cr[(size_t)s * nf + x], -1);
        }
        if (optimal_has_s(o, s + 1, i)) {
            int r = optimal_lp_row(lp, -DBL_MAX, 1);

            optimal_lp_nz(lp, r, f, 1);
            optimal_lp_nz(lp, r, cs[(size_t)(s + 1) * nf + i], 1);
        }
        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++) {
            int32_t j = o->us[e];
            int r;

            if (j <= x || !optimal_has_r(o, s, j))
                continue;
            r = optimal_lp_row(lp, -DBL_MAX, 1);
            optimal_lp_nz(lp, r, f, 1);
            optimal_lp_nz(lp, r, cr[(size_t)s * nf + j], 1);
        }
        optimal_lp_nz(lp, row, f, (double)o->mk[i] / unit);
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
            if (optimal_has_r(o, s, i))
                cr[at] = optimal_is_fixed(o, s, i) ? optimal_lp_col(lp, true, 1, 1, 0)
                                          : optimal_lp_col(lp, true, 0, 1, o->t[i] / scale);
            if (optimal_has_s(o, s, i))
                cs[at] = optimal_lp_col(lp, true, 0, 1, 0);
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
                int row = optimal_lp_row(lp, -DBL_MAX, 0);

                REMAT_ASSERT(r[i]);
                optimal_lp_nz(lp, row, r[j], 1);
                optimal_lp_nz(lp, row, r[i], -1);
                optimal_lp_nz(lp, row, sv[i], -1);
            }
        }
        if (s >= nf)
            for (int32_t e = o->br_at[s - nf]; e < o->br_at[s - nf + 1]; e++) {
                int32_t i = o->br[e];
                int row = optimal_lp_row(lp, 1, DBL_MAX);

                REMAT_ASSERT(r[i]);
                optimal_lp_nz(lp, row, r[i], 1);
                optimal_lp_nz(lp, row, sv[i], 1);
            }
        /* What is kept into a stage was there in the stage before. */
        for (int32_t i = 0; s > 0 && i < nf; i++) {
            int row;

            if (!sv[i])
                continue;
            row = optimal_lp_row(lp, -DBL_MAX, 0);
            REMAT_ASSERT(cr[(size_t)(s - 1) * nf + i]);
            optimal_lp_nz(lp, row, sv[i], 1);
            optimal_lp_nz(lp, row, cr[(size_t)(s - 1) * nf + i], -1);
            optimal_lp_nz(lp, row, cs[(size_t)(s - 1) * nf + i], -1);
        }
        /* Memory at each position: the forward nodes that may run, then the backward. */
        for (int32_t x = 0; x <= nf; x++) {
            bool bwd = x == nf;
            double cap;
            int u, row;

            if (bwd ? s < nf : !r[x])
                continue;
            cap = (budget - (double)optimal_grad_at(o, s, bwd)) / unit;
            u = optimal_lp_col(lp, false, -DBL_MAX, cap, 0);
            row = optimal_lp_row(lp, 0, 0);
            optimal_lp_nz(lp, row, u, 1);
            if (prev < 0) {
                for (int32_t i = 0; i < nf; i++)
                    optimal_lp_nz(lp, row, sv[i], -(double)o->mk[i] / unit);
            } else {
                optimal_lp_nz(lp, row, u_prev, -1);
                optimal_lp_nz(lp, row, r[prev], (double)(o->m[prev] - o->mk[prev]) / unit);
                lp_frees(o, lp, cr, cs, s, prev, row, unit);
            }
            if (!bwd)
                optimal_lp_nz(lp, row, r[x], -(double)o->m[x] / unit);
            prev = x;
            u_prev = u;
        }
    }
}

/* Fills x (columns from 1) with the solution in R and S, as CBC's first incumbent; the
 * other columns keep what they hold (CBC computes the continuous ones). */
static void to_columns(const struct opt *o, const int *cr, const int *cs, const bool *R,
                       const bool *S, double *x)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;

    for (size_t q = 0; q < cells; q++) {
        if (cr[q])
            x[cr[q]] = R[q];
        if (cs[q])
            x[cs[q]] = S[q];
    }
}

/* R and S from the columns x (from 1), trimmed. */
static void from_columns(const struct opt *o, const int *cr, const int *cs, const double *x,
                         bool *R, bool *S)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;

    for (size_t q = 0; q < cells; q++) {
        R[q] = cr[q] && x[cr[q]] > 0.5;
        S[q] = cs[q] && x[cs[q]] > 0.5;
    }
    optimal_trim(o, R, S);
}

static remat_status no_fit(const struct best *b)
{
    return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "optimal: no schedule fits the activation budget "
                      "of %zu bytes", b->budget);
}

/* Branch and cut from b's best (when found); its outcome into R, S and *sv. */
static remat_status branch(struct opt *o, struct best *b, const struct lp *lp, const int *cr,
                           const int *cs, double t_end, double *x, bool *R, bool *S,
                           struct solve *sv)
{
    double bound = -DBL_MAX;
    bool found = false, oom = false;
    enum lp_end end;

    if (b->found)
        to_columns(o, cr, cs, b->R, b->S, x);
    end = optimal_branch(o, lp, b->found ? x : NULL, t_end, x, &found, &bound, &oom);
    if (oom)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory solving the optimal MILP");
    sv->bound = fmax(sv->bound, bound);
    if (found) {
        from_columns(o, cr, cs, x, R, S);
        sv->found = true;
        sv->proven = end == LP_DONE;
        return REMAT_OK;
    }
    if (end == LP_INFEASIBLE || end == LP_DONE)
        return no_fit(b);
    if (end == LP_FAILED)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "optimal: CBC gave up on the MILP "
                          "(numerical trouble)");
    return REMAT_OK; /* out of time: nothing found */
}

void optimal_lp_init(struct lp *lp, const remat_allocator *a)
{
    vec_init(&lp->cols, sizeof(struct lp_col), a);
    vec_init(&lp->rows, sizeof(struct lp_row), a);
    vec_init(&lp->ia, sizeof(int), a);
    vec_init(&lp->ja, sizeof(int), a);
    vec_init(&lp->ar, sizeof(double), a);
    lp->oom = !vec_push(&lp->ia) || !vec_push(&lp->ja) || !vec_push(&lp->ar);
}

void optimal_lp_fini(struct lp *lp)
{
    vec_fini(&lp->cols);
    vec_fini(&lp->rows);
    vec_fini(&lp->ia);
    vec_fini(&lp->ja);
    vec_fini(&lp->ar);
}

remat_status optimal_solve(struct opt *o, struct best *b, double budget, double unit,
                           double t_end, bool *R, bool *S, struct solve *sv)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;
    int *cr = optimal_take(o, cells, sizeof *cr), *cs = optimal_take(o, cells, sizeof *cs);
    struct lp lp = {.oom = false};
    double *x = NULL, relax = 0, scale = o->fwd_cost > 0 ? o->fwd_cost : 1;
    remat_status st = REMAT_OK;
    bool oom = false;
    enum lp_end end;

    *sv = (struct solve){false, false, b->lower};
    optimal_lp_init(&lp, o->a);
    lp.oom = lp.oom || !cr || !cs;
    if (!lp.oom)
        lp_build(o, &lp, budget, unit, cr, cs);
    x = lp.oom ? NULL : optimal_take(o, lp.cols.n, sizeof *x);
    if (!x) {
        optimal_lp_fini(&lp);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the optimal MILP");
    }
    if (core_seconds() >= t_end || (b->found && b->cost / scale <= sv->bound + 1e-9))
        goto out; /* building took the time left (nothing found), or b is proven */
    /* The LP relaxation: its bound, and its kept values rounded into solutions. */
    end = optimal_relax(o, &lp, t_end, x, &relax, &oom);
    if (oom)
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory solving the optimal MILP");
    else if (end == LP_INFEASIBLE)
        st = no_fit(b);
    else if (end == LP_FAILED)
        st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "optimal: Clp gave up on the LP relaxation "
                        "(numerical trouble)");
    if (st || end != LP_DONE) /* out of time: nothing found */
        goto out;
    sv->bound = fmax(sv->bound, relax);
    optimal_round(o, b, cs, x);
    if (b->found && b->cost / scale <= sv->bound + 1e-9)
        goto out; /* the relaxation proves the heuristic optimal */
    st = branch(o, b, &lp, cr, cs, t_end, x, R, S, sv);
out:
    optimal_lp_fini(&lp);
    return st;
}
