/*
 * optimal_milp.c - the mixed-integer program of the `optimal` strategy, built as lists
 * (columns, rows, 1-based triplets), handed to GLPK at once and solved: the LP
 * relaxation, then branch and bound under the time limit. optimal.c has the nodes, the
 * stages and the variables (R, S, F, U; G a constant).
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
 * Sizes: under 80,000 R and S binaries (ns <= 400 stages, nf <= 200 forward nodes), and
 * F and U about (nodes + edges) per stage. GLPK's own allocations aside, everything
 * comes from the graph's allocator.
 */
#include "plan/optimal.h"

#include <glpk.h>
#include <limits.h>

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
        bool never = s >= nf && optimal_bwd_reads(o, s - nf, i);
        int f;

        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1] && !never; e++)
            never = o->us[e] > x && optimal_has_r(o, s, o->us[e]) &&
                    optimal_is_fixed(o, s, o->us[e]);
        if (never || o->mk[i] == 0)
            continue;
        f = lp_col(lp, GLP_CV, GLP_DB, 0, 1, 0);
        if (!optimal_is_fixed(o, s, x)) {
            int r = lp_row(lp, GLP_UP, 0, 0);

            lp_nz(lp, r, f, 1);
            lp_nz(lp, r, cr[(size_t)s * nf + x], -1);
        }
        if (optimal_has_s(o, s + 1, i)) {
            int r = lp_row(lp, GLP_UP, 0, 1);

            lp_nz(lp, r, f, 1);
            lp_nz(lp, r, cs[(size_t)(s + 1) * nf + i], 1);
        }
        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++) {
            int32_t j = o->us[e];
            int r;

            if (j <= x || !optimal_has_r(o, s, j))
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
            if (optimal_has_r(o, s, i))
                cr[at] = optimal_is_fixed(o, s, i) ? lp_col(lp, GLP_IV, GLP_FX, 1, 1, 0)
                                          : lp_col(lp, GLP_IV, GLP_DB, 0, 1, o->t[i] / scale);
            if (optimal_has_s(o, s, i))
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
            cap = (budget - (double)optimal_grad_at(o, s, bwd)) / unit;
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
    if (core_seconds() > cs->t_end)
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
    double ms = (t_end - core_seconds()) * 1000;

    return ms >= INT_MAX ? INT_MAX : ms > 1 ? (int)ms : 1;
}

remat_status optimal_solve(struct opt *o, struct best *b, double budget, double unit,
                           double t_end, bool *R, bool *S, struct solve *sv)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;
    int *cr = optimal_take(o, cells, sizeof *cr), *cs = optimal_take(o, cells, sizeof *cs);
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
    x = lp.oom ? NULL : optimal_take(o, lp.cols.n, sizeof *x);
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
    for (size_t q = 0; q < cells; q++) /* the relaxation's S, until x is the incumbent */
        if (cs[q])
            x[cs[q]] = glp_get_col_prim(P, cs[q]);
    optimal_round(o, b, cs, x);
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
        optimal_trim(o, R, S);
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
