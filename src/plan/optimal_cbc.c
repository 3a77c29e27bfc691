/*
 * optimal_cbc.c - the `optimal` MILP handed to COIN-OR: the LP relaxation to Clp's dual
 * simplex, the MILP to CBC's branch and cut. optimal_milp.c builds the model as lists
 * (struct lp); here it is turned column by column (the layout both solvers load), loaded
 * and solved, and the solution read back by column number.
 *
 * CBC runs with one thread, fixed random seeds and elapsed (not processor) time, so that
 * the same model gives the same answer whenever it finishes within the time limit; its
 * output is off (the library never prints). A first incumbent is handed over as a MIP
 * start: the values of the integer columns only, CBC completes the continuous ones by
 * an LP with the integers fixed.
 *
 * Sizes: the column-major copy is as large as the triplets (about 12 bytes a nonzero)
 * and is freed as soon as the solver has loaded it. Clp and CBC copy the model again
 * and their allocations do not come from the graph's allocator; out of memory inside
 * them ends the process (a C++ exception).
 *
 * CBC's branch and cut runs in a child process (cbc_solve_apart): CBC 2.10 can
 * dereference NULL in CglPreProcess::postProcess when its time limit ends the
 * preprocessing early (U-Net's MILP at a limit of about 2 s, one run in a few), which
 * would end the whole program. A child that dies, or outlives the time limit by
 * CBC_GRACE seconds (and is killed), reads as a solve stopped without a solution.
 */
#include "plan/optimal.h"

#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>
#include <errno.h>
#include <float.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Seconds a solve may run past its time limit before its process is killed (CBC's
 * limit is checked between its phases, and cleanup follows it). */
#define CBC_GRACE 30.0

/* The model column by column, rows and columns from 0, as the solvers load it. */
struct csc {
    int ncols, nrows;
    size_t nz;
    CoinBigIndex *start;
    int *index;
    double *value, *clb, *cub, *obj, *rlb, *rub;
};

static void csc_free(const remat_allocator *a, struct csc *m)
{
    size_t nc = (size_t)m->ncols, nr = (size_t)m->nrows;

    core_free(a, m->start, (nc + 1) * sizeof *m->start);
    core_free(a, m->index, (m->nz + 1) * sizeof *m->index);
    core_free(a, m->value, (m->nz + 1) * sizeof *m->value);
    core_free(a, m->clb, (nc + 1) * sizeof *m->clb);
    core_free(a, m->cub, (nc + 1) * sizeof *m->cub);
    core_free(a, m->obj, (nc + 1) * sizeof *m->obj);
    core_free(a, m->rlb, (nr + 1) * sizeof *m->rlb);
    core_free(a, m->rub, (nr + 1) * sizeof *m->rub);
}

/* The bounds and the objective, copied from the lists. */
static void csc_bounds(const struct lp *lp, struct csc *m)
{
    for (int j = 0; j < m->ncols; j++) {
        const struct lp_col *c = VEC_AT(&lp->cols, struct lp_col, (size_t)j);

        m->clb[j] = c->lb;
        m->cub[j] = c->ub;
        m->obj[j] = c->obj;
    }
    for (int i = 0; i < m->nrows; i++) {
        const struct lp_row *r = VEC_AT(&lp->rows, struct lp_row, (size_t)i);

        m->rlb[i] = r->lb;
        m->rub[i] = r->ub;
    }
}

/* The triplets sorted by column (a counting sort); false when out of memory. */
static bool csc_build(const remat_allocator *a, const struct lp *lp, struct csc *m)
{
    const int *ia = lp->ia.data, *ja = lp->ja.data;
    const double *ar = lp->ar.data;
    size_t nc, nr;

    *m = (struct csc){.ncols = (int)lp->cols.n, .nrows = (int)lp->rows.n, .nz = lp->ia.n - 1};
    nc = (size_t)m->ncols;
    nr = (size_t)m->nrows;
    m->start = core_calloc(a, nc + 1, sizeof *m->start);
    m->index = core_calloc(a, m->nz + 1, sizeof *m->index);
    m->value = core_calloc(a, m->nz + 1, sizeof *m->value);
    m->clb = core_calloc(a, nc + 1, sizeof *m->clb);
    m->cub = core_calloc(a, nc + 1, sizeof *m->cub);
    m->obj = core_calloc(a, nc + 1, sizeof *m->obj);
    m->rlb = core_calloc(a, nr + 1, sizeof *m->rlb);
    m->rub = core_calloc(a, nr + 1, sizeof *m->rub);
    if (!m->start || !m->index || !m->value || !m->clb || !m->cub || !m->obj || !m->rlb ||
        !m->rub) {
        csc_free(a, m);
        return false;
    }
    for (size_t e = 1; e <= m->nz; e++) /* column j (from 1) counts into start[j] */
        m->start[ja[e]]++;
    for (size_t j = 0; j < nc; j++)
        m->start[j + 1] += m->start[j];
    /* Each column filled from its end (start[j + 1], the end of column j, counts down to
     * its beginning), then start shifted by one: start[j] is where column j begins. */
    for (size_t e = m->nz; e >= 1; e--) {
        CoinBigIndex k = --m->start[ja[e]];

        m->index[k] = ia[e] - 1;
        m->value[k] = ar[e];
    }
    for (size_t j = 0; j < nc; j++)
        m->start[j] = m->start[j + 1];
    m->start[nc] = (CoinBigIndex)m->nz;
    csc_bounds(lp, m);
    return true;
}

static double seconds_left(double t_end)
{
    double left = t_end - core_seconds();

    return left > 0.01 ? left : 0.01;
}

/*
 * Clp's dual simplex until it ends or t_end. Clp's own time limit counts processor
 * time, which runs slower than the clock on a busy machine, so the simplex runs in
 * slices of iterations, each resuming from the basis the last one left, the clock read
 * between them; a slice is sized to take about a tenth of a second, and none starts
 * when the last one took longer than the time left (Clp's processor time limit stays
 * on as well): without that, ResNet-50's relaxation on a loaded machine ended 9 s past
 * a limit of 60 s.
 */
static void dual_until(Clp_Simplex *P, double t_end)
{
    int slice = 1000;

    for (;;) {
        double t0 = core_seconds(), took;

        Clp_setMaximumIterations(P, Clp_numberIterations(P) + slice);
        Clp_setMaximumSeconds(P, seconds_left(t_end));
        Clp_dual(P, 0);
        took = core_seconds() - t0;
        if (Clp_status(P) != 3 || core_seconds() + took >= t_end)
            return; /* done, or the next slice would end past t_end */
        if (took < 0.05 && slice < 1000000)
            slice *= 2;
        else if (took > 0.2 && slice > 100)
            slice /= 2;
    }
}

enum lp_end optimal_relax(struct opt *o, const struct lp *lp, double t_end, double *x,
                          double *obj, bool *oom)
{
    struct csc m;
    Clp_Simplex *P;
    enum lp_end end = LP_FAILED;

    if (!csc_build(o->a, lp, &m)) {
        *oom = true;
        return LP_FAILED;
    }
    P = Clp_newModel();
    Clp_setLogLevel(P, 0);
    Clp_loadProblem(P, m.ncols, m.nrows, m.start, m.index, m.value, m.clb, m.cub, m.obj, m.rlb,
                    m.rub);
    csc_free(o->a, &m);
    Clp_setMaximumSeconds(P, seconds_left(t_end));
    dual_until(P, t_end);
    switch (Clp_status(P)) {
    case 0: {
        const double *sol = Clp_getColSolution(P);

        for (int j = 0; j < m.ncols; j++)
            x[j + 1] = sol[j];
        *obj = Clp_objectiveValue(P);
        end = LP_DONE;
        break;
    }
    case 1:
        end = LP_INFEASIBLE;
        break;
    case 3:
        end = LP_STOPPED;
        break;
    default:
        break;
    }
    Clp_deleteModel(P);
    return end;
}

/* One thread, fixed seeds, no output, elapsed time until t_end. */
static void cbc_settings(Cbc_Model *M, double t_end)
{
    char secs[32];

    snprintf(secs, sizeof secs, "%.3f", seconds_left(t_end));
    Cbc_setLogLevel(M, 0);
    Cbc_setParameter(M, "log", "0");
    Cbc_setParameter(M, "slog", "0");
    Cbc_setParameter(M, "threads", "0");
    Cbc_setParameter(M, "randomSeed", "1");
    Cbc_setParameter(M, "randomCbcSeed", "1");
    Cbc_setParameter(M, "timeMode", "elapsed");
    Cbc_setParameter(M, "sec", secs);
}

/* The integer columns of x (from 1) as CBC's MIP start; false when out of memory. */
static bool cbc_start(const remat_allocator *a, const struct lp *lp, Cbc_Model *M,
                      const double *x)
{
    size_t nc = lp->cols.n;
    int *idx = core_calloc(a, nc + 1, sizeof *idx), n = 0;
    double *val = core_calloc(a, nc + 1, sizeof *val);

    if (idx && val) {
        for (size_t j = 0; j < nc; j++)
            if (VEC_AT(&lp->cols, struct lp_col, j)->integer) {
                idx[n] = (int)j;
                val[n++] = x[j + 1];
            }
        Cbc_setMIPStartI(M, n, idx, val);
    }
    core_free(a, idx, (nc + 1) * sizeof *idx);
    core_free(a, val, (nc + 1) * sizeof *val);
    return idx && val;
}

/* How CBC's solve ended. */
static enum lp_end cbc_end(Cbc_Model *M)
{
    if (Cbc_isProvenOptimal(M))
        return LP_DONE;
    if (Cbc_isProvenInfeasible(M))
        return LP_INFEASIBLE;
    if (Cbc_isAbandoned(M))
        return LP_FAILED;
    return LP_STOPPED;
}

/* What a solve sends back from its child: how it ended, its bound, whether ncols values
 * of its best solution follow. */
struct cbc_head {
    int end, found;
    double bound;
};

/* Writes n bytes to fd; false on error. */
static bool write_all(int fd, const void *buf, size_t n)
{
    const char *b = buf;

    while (n) {
        ssize_t k = write(fd, b, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

/* Reads n bytes from fd until t_kill (core_seconds); false on error, end of file or
 * time out. */
static bool read_all(int fd, void *buf, size_t n, double t_kill)
{
    char *b = buf;

    while (n) {
        double left = t_kill - core_seconds();
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, left <= 0 ? 0 : left > 3600 ? 3600000 : (int)(left * 1000) + 1);
        ssize_t k;

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false; /* an error, or the time is up */
        k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

/* The child's end on a fault: CBC 2.10's NULL dereference in CglPreProcess::postProcess
 * (below) ends it at once, without a core file or, under the sanitizers, their report on
 * the stderr the child shares with the parent (`remat compare ... --time-limit 2` of
 * tests/cli.sh printed one now and then); the parent reads no solution. */
static void child_fault(int sig)
{
    (void)sig;
    _exit(3);
}

/* The child's side: solves, sends the head and the solution, ends without the parent's
 * exit handlers or buffered output. */
static void cbc_child(Cbc_Model *M, int ncols, int fd)
{
    struct sigaction sa;
    const double *sol;
    struct cbc_head h;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = child_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    Cbc_solve(M);
    h.end = cbc_end(M);
    sol = Cbc_bestSolution(M);
    h.found = sol != NULL;
    h.bound = h.end == LP_DONE && h.found ? Cbc_getObjValue(M) : Cbc_getBestPossibleObjValue(M);
    _exit(write_all(fd, &h, sizeof h) &&
                  (!sol || write_all(fd, sol, sizeof *sol * (size_t)ncols))
              ? 0
              : 1);
}

/* Cbc_solve(M) in a child process; its solution into sol (ncols values) when *found.
 * Where no child can be made, in this process. */
static enum lp_end cbc_solve_apart(Cbc_Model *M, int ncols, double t_end, double *sol,
                                   bool *found, double *bound)
{
    struct cbc_head h = {LP_STOPPED, 0, -DBL_MAX};
    int fd[2] = {-1, -1}, status = 0;
    pid_t pid = -1;
    bool ok;

    if (pipe(fd) == 0 && (pid = fork()) < 0) {
        close(fd[0]);
        close(fd[1]);
    }
    if (pid >= 0) {
        if (pid == 0) {
            close(fd[0]);
            cbc_child(M, ncols, fd[1]);
        }
        close(fd[1]);
        ok = read_all(fd[0], &h, sizeof h, t_end + CBC_GRACE) &&
             (!h.found || read_all(fd[0], sol, sizeof *sol * (size_t)ncols, t_end + CBC_GRACE));
        close(fd[0]);
        if (!ok)
            kill(pid, SIGKILL); /* stopped past its time, or already dead */
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            *found = false;
            *bound = -DBL_MAX;
            return LP_STOPPED;
        }
        *found = h.found;
        *bound = h.bound;
        return (enum lp_end)h.end;
    }
    Cbc_solve(M); /* no pipe or no child */
    h.end = cbc_end(M);
    if (Cbc_bestSolution(M)) {
        memcpy(sol, Cbc_bestSolution(M), sizeof *sol * (size_t)ncols);
        *found = true;
    }
    *bound = h.end == LP_DONE && *found ? Cbc_getObjValue(M) : Cbc_getBestPossibleObjValue(M);
    return (enum lp_end)h.end;
}

enum lp_end optimal_branch(struct opt *o, const struct lp *lp, const double *start,
                           double t_end, double *x, bool *found, double *bound, bool *oom)
{
    struct csc m;
    Cbc_Model *M;
    double *sol;
    enum lp_end end;

    *found = false;
    *bound = -DBL_MAX;
    if (!csc_build(o->a, lp, &m)) {
        *oom = true;
        return LP_FAILED;
    }
    M = Cbc_newModel();
    Cbc_loadProblem(M, m.ncols, m.nrows, m.start, m.index, m.value, m.clb, m.cub, m.obj, m.rlb,
                    m.rub);
    csc_free(o->a, &m);
    for (int j = 0; j < m.ncols; j++)
        if (VEC_AT(&lp->cols, struct lp_col, (size_t)j)->integer)
            Cbc_setInteger(M, j);
    cbc_settings(M, t_end);
    if (start && !cbc_start(o->a, lp, M, start)) {
        Cbc_deleteModel(M);
        *oom = true;
        return LP_FAILED;
    }
    if (!(sol = core_alloc(o->a, sizeof *sol * ((size_t)m.ncols + 1)))) {
        Cbc_deleteModel(M);
        *oom = true;
        return LP_FAILED;
    }
    end = cbc_solve_apart(M, m.ncols, t_end, sol, found, bound);
    if (*found)
        for (int j = 0; j < m.ncols; j++)
            x[j + 1] = sol[j];
    core_free(o->a, sol, sizeof *sol * ((size_t)m.ncols + 1));
    Cbc_deleteModel(M);
    return end;
}
