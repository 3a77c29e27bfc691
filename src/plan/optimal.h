/*
 * optimal.h - what the three files of the `optimal` strategy share: the MILP's nodes and
 * stages (struct opt, built by optimal.c), the best heuristic solution (struct best),
 * the outcome of a solve (struct solve), the MILP as lists (struct lp), and the
 * functions each file gives the others. optimal.c describes the formulation;
 * optimal_milp.c builds the MILP and drives its solve; optimal_cbc.c hands it to COIN-OR's
 * Clp (the LP relaxation) and CBC (branch and cut); optimal_heur.c finds solutions
 * outside the solver.
 *
 * A solution is two arrays of ns x nf bools, R[s * nf + i] (forward node i runs in stage
 * s) and S[s * nf + i] (node i's value is live entering stage s); every array of struct
 * opt and struct best comes from optimal_take and lives until plan_optimal returns.
 */
#ifndef REMAT_PLAN_OPTIMAL_H
#define REMAT_PLAN_OPTIMAL_H

#include "plan/planners.h"


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

/* The best solution found so far that fits, and scratch for candidates. */
struct best {
    bool *R, *S, *rc, *sc, *cache;
    uint8_t *mode, *best_mode;  /* per node: the candidate's, the best one's */
    bool found;
    double cost;
    size_t budget;
    size_t peak;                /* the last candidate's MILP peak */
    double lower;               /* a lower bound on the overhead found outside CBC, -1: none */
};

/* The outcome of a solve. */
struct solve {
    bool found;          /* R and S hold the solver's solution */
    bool proven;         /* ... proven optimal */
    double bound;        /* a lower bound on the overhead, -1: none */
};

/* The MILP as lists: columns (numbered from 1), rows (from 1), and the matrix as
 * triplets (row ia, column ja, value ar; entry 0 unused). A bound of +-DBL_MAX is none. */
struct lp_col {
    bool integer;
    double lb, ub, obj;
};

struct lp_row {
    double lb, ub;
};

struct lp {
    vec cols, rows, ia, ja, ar;
    bool oom;
};

/* What a solver call ended with. */
enum lp_end {
    LP_DONE,         /* solved: optimal (the LP) or proven optimal (the MILP) */
    LP_INFEASIBLE,   /* proven to have no solution */
    LP_STOPPED,      /* the time limit stopped it */
    LP_FAILED        /* the solver gave up (numerical trouble) */
};

/* Whether the MILP has R[s][i], S[s][i]; whether R[s][i] is fixed at 1. */
static inline bool optimal_has_r(const struct opt *o, int32_t s, int32_t i)
{
    return (s >= o->nf || i <= s) && s <= o->last[i];
}

static inline bool optimal_has_s(const struct opt *o, int32_t s, int32_t i)
{
    return i < s && s < o->ns && s <= o->last[i];
}

static inline bool optimal_is_fixed(const struct opt *o, int32_t s, int32_t i)
{
    return s < o->nf && i == s;
}

/* Gradient bytes live at a forward position (bwd false) or the backward of stage s. */
static inline size_t optimal_grad_at(const struct opt *o, int32_t s, bool bwd)
{
    if (s < o->nf)
        return 0;
    return bwd ? o->g_bwd[s - o->nf] : o->g_rec[s - o->nf];
}

/* Whether backward node k reads forward node i. */
static inline bool optimal_bwd_reads(const struct opt *o, int32_t k, int32_t i)
{
    for (int32_t e = o->br_at[k]; e < o->br_at[k + 1]; e++)
        if (o->br[e] == i)
            return true;
    return false;
}

/* ---------------------------------------------------------------- optimal.c */

/* A zeroed array of n items from the graph's allocator, released by opt_fini; NULL when
 * out of memory. */
void *optimal_take(struct opt *o, size_t n, size_t size);

/*
 * The MILP's own peak of a solution in bytes (max of U + G with every F at its
 * largest), or SIZE_MAX when the solution breaks a dependency.
 */
size_t optimal_account(const struct opt *o, const bool *R, const bool *S);

/*
 * The retention bound alone (optimal_bound.c) of graph tg under an activation budget of
 * `budget` bytes, by CBC for at most time_limit seconds: *lower gets it (-1: none
 * reached, or no solution fits). For tests: every plan's overhead is at least *lower.
 */
remat_status optimal_lower(const remat_tgraph *tg, const struct dag *d, size_t budget,
                           double time_limit, double *lower);

/* ----------------------------------------------------------- optimal_heur.c */

/*
 * Drops what a solution computes or keeps without a use: a recomputation that nothing
 * later in its stage reads and that is not kept, a kept value that its stage does not
 * read and does not hand on. Never raises the cost or the memory.
 */
void optimal_trim(const struct opt *o, bool *R, bool *S);

/* The recomputation cost of a solution: T of every FWD but each stage's own. */
double optimal_cost(const struct opt *o, const bool *R);

/* The forward nodes by T / Mk, the dearest to recompute per byte first. */
void optimal_order(const struct opt *o, int32_t *order);

/*
 * Solutions outside the MILP solver, for its first incumbent: keep sets of the nodes
 * dearest to recompute per byte (every prefix) and of every k-th node, the others
 * dropped or cached; then, from the best, a local search that changes one node's mode
 * or swaps a kept node for another, until nothing improves or t_end (the keep sets
 * also stop at t_end, after the first two of each kind; above 300 nodes only those near
 * where they stop fitting, found by bisection, and swaps of nodes at most 8 apart in
 * topological order). The best that fits
 * b->budget is in b. order gets optimal_order's.
 */
void optimal_search(const struct opt *o, struct best *b, int32_t *order, double t_end);

/* Offers the keep set keep[] (kept nodes M_KEEP), the others dropped after the
 * backward that needs them, then cached. */
void optimal_offer_keep(const struct opt *o, struct best *b, const bool *keep);

/* The least MILP peak among the heuristics' starting solutions (every keep set of
 * optimal_search, recomputed values dropped; those left at t_end, after the first two,
 * are skipped): the budget of the least-peak mode. order is optimal_order's. Sets
 * b->budget to 0, so b keeps no solution. */
size_t optimal_least_peak(const struct opt *o, struct best *b, const int32_t *order,
                          double t_end);

/*
 * Checkmate's two-phase rounding: the kept values of the LP relaxation (x[cs[q]], the
 * relaxation's value of the column of S cell q; cs[q] 0: no column), rounded at several
 * thresholds, each completed into a solution (values recomputed for a backward dropped
 * after it, or cached) and offered to b.
 */
void optimal_round(const struct opt *o, struct best *b, const int *cs, const double *x);

/* ------------------------------------------------------------ optimal_cbc.c */

/*
 * The LP relaxation of lp by Clp's dual simplex, stopped at t_end: on LP_DONE, x[1 ..
 * cols] gets its values and *obj its objective. Sets *oom when out of memory.
 */
enum lp_end optimal_relax(struct opt *o, const struct lp *lp, double t_end, double *x,
                          double *obj, bool *oom);

/*
 * The MILP lp by CBC until t_end: one thread, fixed seeds, no output. start (NULL:
 * none) is a first incumbent, its integer columns' values x[1 .. cols] (the continuous
 * ones CBC computes). On return *found says whether x holds a solution (CBC's best),
 * *bound the best lower bound CBC proved (-DBL_MAX: none). Sets *oom when out of
 * memory.
 */
enum lp_end optimal_branch(struct opt *o, const struct lp *lp, const double *start,
                           double t_end, double *x, bool *found, double *bound, bool *oom);

/* ---------------------------------------------------------- optimal_bound.c */

/*
 * The retention relaxation's lower bound on the overhead under `budget` bytes (units of
 * `unit`), by CBC until t_end; -1 when none was reached (or the relaxation has no
 * solution). keep[i] gets whether its best solution keeps node i over every gap between
 * its uses, from its stage to its last use (*found: it has one). Sets *oom when out of
 * memory.
 */
double optimal_retention(struct opt *o, double budget, double unit, double t_end, bool *keep,
                         bool *found, bool *oom);

/* ----------------------------------------------------------- optimal_milp.c */

/* The lists of a MILP: init (entry 0 of the triplets pushed; lp->oom when out of
 * memory), a column or a row (its number from 1; 0 and lp->oom when out of memory), a
 * coefficient (none when i or j is 0), fini. */
void optimal_lp_init(struct lp *lp, const remat_allocator *a);
int optimal_lp_col(struct lp *lp, bool integer, double lb, double ub, double obj);
int optimal_lp_row(struct lp *lp, double lb, double ub);
void optimal_lp_nz(struct lp *lp, int i, int j, double v);
void optimal_lp_fini(struct lp *lp);

/*
 * Solves the MILP under `budget` bytes (coefficients in units of `unit` bytes) until
 * t_end. The LP relaxation comes first: its bound goes to sv->bound, its kept values
 * are rounded into solutions offered to b (optimal_round), and b's best becomes CBC's
 * first incumbent, or the answer when it meets the bound. Then branch and cut. On
 * REMAT_OK, *sv says what was found (with sv->found, R and S hold CBC's solution,
 * trimmed); no solution within the time limit is REMAT_OK with nothing found.
 */
remat_status optimal_solve(struct opt *o, struct best *b, double budget, double unit,
                           double t_end, bool *R, bool *S, struct solve *sv);

#endif
