/*
 * kusumoto.c - the lower-set dynamic program of Kusumoto et al. (NeurIPS 2019).
 *
 * A strategy is a chain ∅ = L0 ⊊ L1 ⊊ … ⊊ Lk = V of lower sets; block Vi = Li \ Li-1.
 * The forward keeps Vi ∩ ∂(Li); the backward recomputes the rest of each block. The
 * state (L, t) holds the least cached memory m of a chain ending at L with overhead t;
 * a transition L -> L' adds t += T((L'\L) \ ∂(L')) and m += M(∂(L') \ L), allowed when
 * m + 2 M(L'\L) + M(δ+(L')) + M(δ−(δ+(L')) \ L') <= B. Sets are visited smallest first
 * and each keeps its Pareto frontier of (t, m) (t ascending, m strictly descending);
 * time-centric takes the least t at V, memory-centric the least m (the largest t on
 * the frontier).
 *
 * Overheads are integers: T itself when every T_v is a whole number and T(V) <= 64 |V|
 * (Kusumoto's costs), otherwise T scaled so that T(V) becomes 8 |V| and each block's
 * overhead rounded to the nearest unit. (Units by the family's size instead, fewer on
 * hybrid's thinned family, made GPT-2-1000's sweep 1.65 -> 0.18 s but one ResNet-2498
 * plan 0.6% slower: not taken.)
 *
 * Work: O(sum over pairs L ⊂ L' of (words + |∂(L')| + frontier)). Pairs whose block
 * alone breaks the budget (2 M(L'\L) > B) are skipped before the subset test, and the
 * time-centric frontier keeps only states that can still reach V within the budget
 * and the bound on the optimum (dp_bounds; the search over bounds, with the Lagrangian
 * bound where the frontiers grow, is dp_least.c). Runs at budgets below one whose
 * usable pairs are kept (dp_pairs.h) read those instead of working them out.
 */
#include "plan/kusumoto.h"
#include "plan/dp_pipe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reports pass progress after lower set j of n: the pairs done grow as j^2; at most a
 * hundred calls a pass. */
static void report(const struct dp *p, int32_t j, int32_t n)
{
    double f = (double)j * j / ((double)n * n), g = (double)(j - 1) * (j - 1) / ((double)n * n);

    if (p->pg && p->pg->fn && (int)(100 * f) != (int)(100 * g))
        p->pg->fn(p->pg->ud, p->stage, f);
}

static int64_t split_min_set; /* kusumoto_set_split's; 0: SPLIT_MIN, < 0: no team */

void kusumoto_set_split(int64_t min_work)
{
    split_min_set = min_work;
}

static bool pipe_set = true; /* kusumoto_set_pipeline's */

void kusumoto_set_pipeline(bool on)
{
    pipe_set = on;
}

/* Room for cap states in pts; false when out of memory. */
static bool grow_pts(struct dp *p, size_t cap)
{
    struct point *np = core_realloc(p->al, p->pts, sizeof *np * p->cap_pts, sizeof *np * cap);

    if (!np)
        return false;
    p->pts = np;
    p->cap_pts = cap;
    return true;
}

/* Room for the keys of cap groups of 8 states (and of their groups of 64); false when
 * out of memory. */
static bool grow_kmin(struct dp *p, size_t cap)
{
    int64_t *k0 = core_realloc(p->al, p->kmin[0], sizeof *k0 * p->cap_kmin, sizeof *k0 * cap);
    int64_t *k1;

    if (!k0)
        return false;
    p->kmin[0] = k0;
    k1 = core_realloc(p->al, p->kmin[1], sizeof *k1 * (p->cap_kmin / 8 + 1),
                      sizeof *k1 * (cap / 8 + 1));
    if (!k1)
        return false;
    p->kmin[1] = k1;
    p->cap_kmin = cap;
    return true;
}

static bool push_point(struct dp *p, struct point pt)
{
    if (p->n_pts == p->cap_pts && !grow_pts(p, p->cap_pts ? 2 * p->cap_pts : 4096))
        return false;
    p->pts[p->n_pts++] = pt;
    return true;
}

/* Notes the key D t + m of the last point pushed in the least keys of its 8 and 64. */
static bool note_key(struct dp *p)
{
    size_t g = p->n_pts - 1;
    const struct point *q = &p->pts[g];
    int64_t key = p->lag_d * (int64_t)q->t + (int64_t)q->m;

    if ((g >> 3) >= p->cap_kmin && !grow_kmin(p, p->cap_kmin ? 2 * p->cap_kmin : 1024))
        return false;
    for (int l = 0; l < 2; l++) {
        size_t b = g >> (3 * l + 3);

        if ((g & (((size_t)8 << 3 * l) - 1)) == 0 || p->kmin[l][b] > key)
            __atomic_store_n(&p->kmin[l][b], key, __ATOMIC_RELAXED); /* kmin_at */
    }
    return true;
}

/* The frontier of a's candidates (each t whose m is below every smaller t's), pushed
 * to pts when out is NULL, else written to out (*n_out points); best is reset over the
 * range touched. False only when out of memory. */
static bool close_range(struct dp *p, struct dp_acc *a, struct point *out, size_t *n_out)
{
    size_t run = SIZE_MAX, n = 0;

    for (int32_t t = a->t_lo; a->any && t <= a->t_hi; t++) {
        if (a->best[t] < run) {
            struct point q = {a->best[t], t, a->par[t]};

            run = q.m;
            if (out)
                out[n] = q;
            else if (!push_point(p, q) || (p->lag && !note_key(p)))
                return false;
            n++;
        }
        a->best[t] = SIZE_MAX;
    }
    *n_out = n;
    return true;
}

/* Set j's states from a's candidates: its frontier, or its one state (DP_MIN_*). */
static bool close_set(struct dp *p, struct dp_acc *a, int32_t j)
{
    size_t n = 0;

    p->fr_at[j] = (int32_t)p->n_pts;
    p->fr_n[j] = 0;
    if (a->mode != DP_FRONTIER) {
        if (a->one.parent < 0)
            return true;
        p->fr_n[j] = 1;
        return push_point(p, a->one);
    }
    if (!close_range(p, a, NULL, &n))
        return false;
    p->fr_n[j] = (int32_t)n;
    return true;
}

/*
 * A frontier run's upper bound from its own states: each guide (dp_pairs.h) finishes the
 * first state of set j's frontier whose memory leaves room for the rest of the guide's
 * chain (m descends along the frontier, so those that fit are a suffix, and the first of
 * them has the least overhead). A chain so found is one of the DP's, so the optimum is at
 * most its overhead, and the run's bound drops to it: the states kept after that are
 * still the unpruned DP's that pass the (lower) bound, a superset of those on the best
 * chain, which is found the same. On GPT-2 of 1,000 layers at a tenth of the way from
 * its least budget to `none`'s peak, the search's first run starts 256 units above the
 * Lagrangian bound (the optimum is 60 above it); after 22% of the sets its bound is 100
 * above, and its last run holds 22.4 10^6 states instead of 38.6 10^6. A run that fails
 * still tells the search a chain's overhead, which its next bound does not pass.
 */
static void finish_states(struct dp *p, struct dp_acc *acc, int n_acc, int32_t j)
{
    const struct point *fp = p->pts + p->fr_at[j];
    int32_t cnt = p->fr_n[j];

    for (int g = 0; g < p->gd.n && cnt > 0; g++) {
        size_t off = (size_t)g * (size_t)p->gd.n_sets + (size_t)j, need = p->gd.need[off];
        int32_t sdt = p->gd.sdt[off], lo = 0, hi = cnt;

        if (sdt == INT32_MAX || need > p->budget)
            continue;
        while (lo < hi) { /* the first point with m + need <= B */
            int32_t mid = lo + (hi - lo) / 2;

            if (fp[mid].m <= p->budget - need)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo < cnt && (int64_t)fp[lo].t + sdt < p->ub_found)
            p->ub_found = fp[lo].t + sdt;
    }
    for (int k = 0; k < n_acc; k++)
        if (p->ub_found < acc[k].ub)
            acc[k].ub = p->ub_found;
}

/*
 * A frontier run on two cores (core_team): a set's candidates are cut at an overhead
 * t_mid. Each part visits every usable pair in the same order but only the states that
 * land on its side of t_mid, into the same best[] (the sides do not overlap), and takes
 * its side's frontier (close_range); joined, the upper side's points count only below
 * the lower side's least m. So the states are one core's. t_mid is the weighted median
 * of the pairs' middle states, weighted by their frontiers' sizes. A set whose pairs read
 * fewer than SPLIT_MIN states runs on the caller's core alone: handing a set over costs
 * a few microseconds. Only runs over kept pairs share sets: the search's Lagrangian
 * runs, the large ones (working a pair out with the simulator's model writes its
 * scratch, and working them out twice would cost more than the run); and the team is
 * only for the C library's allocator, as core_par_run.
 */
#define SPLIT_MIN 4096

struct t_weight {
    int32_t t, w;
};

struct dp_split {
    struct dp *p;
    core_team *team;       /* NULL: none (tried: none will be) */
    bool tried;
    struct dp_acc part[2]; /* part[0] is the run's own accumulator */
    struct point *out[2];  /* each side's frontier, at most n_t + 1 points */
    size_t n_out[2];
    struct t_weight *tw;   /* the pairs' middle states */
    size_t cap_tw;
    double rate;           /* seconds per unit of estimated work (note_cost); 0: none */
    int32_t j;
};

static int64_t split_min(void)
{
    return split_min_set > 0 ? split_min_set : SPLIT_MIN;
}

static int tw_cmp(const void *x, const void *y)
{
    const struct t_weight *a = x, *b = y;

    return (a->t > b->t) - (a->t < b->t);
}

static void split_part(void *ctx, int k)
{
    struct dp_split *s = ctx;
    struct pair_it it;
    int32_t i, dt;
    size_t dm, c;

    for (pairs_begin(s->p, s->j, true, &it); pairs_next(s->p, &it, &i, &dt, &dm, &c);)
        relax(s->p, &s->part[k], i, s->j, dt, dm, c);
    close_range(s->p, &s->part[k], s->out[k], &s->n_out[k]); /* writes out: cannot fail */
}

/*
 * Whether a set is worth sharing, before split_at reads its pairs once more to find
 * t_mid: its estimated work est (the kept pairs into it times the states a set holds so
 * far) at the seconds per unit the run's sets have taken (note_cost) must pass
 * SHARE_SECONDS. The work alone did not tell: ResNet-1001's halfway run, whose frontiers
 * the Lagrangian test mostly skips, was a third slower with every set past SPLIT_MIN
 * shared, while GPT-2-1000's at a tenth of the way lost its gain with four times
 * SPLIT_MIN. With kusumoto_set_split, the work alone decides (tests).
 */
#define SHARE_SECONDS 1e-4

static bool worth_sharing(const struct dp_split *s, int64_t est)
{
    if (split_min_set > 0 || est < SPLIT_MIN)
        return est >= split_min();
    return s->rate == 0 || (double)est * s->rate >= SHARE_SECONDS;
}

/* A set of estimated work est took secs (shared: about 1.5 times as long on one core,
 * as measured here): the run's seconds per unit, an average over the last few sets. */
static void note_cost(struct dp_split *s, int64_t est, double secs, bool shared)
{
    double r = secs * (shared ? 1.5 : 1) / (double)est;

    s->rate = s->rate == 0 ? r : s->rate + (r - s->rate) / 8;
}

/* *t_mid: where set j's candidates are cut in two of about equal work; 0 when the set
 * reads fewer than SPLIT_MIN states or no team runs. False only when out of memory. */
static bool split_at(struct dp_split *s, int32_t j, int32_t *t_mid)
{
    const struct dp *p = s->p;
    struct pair_it it;
    int32_t i, dt;
    size_t dm, c, n = 0;
    int64_t work = 0, acc = 0;

    *t_mid = 0;
    for (pairs_begin(p, j, true, &it); pairs_next(p, &it, &i, &dt, &dm, &c);) {
        if (n == s->cap_tw) {
            size_t cap = s->cap_tw ? 2 * s->cap_tw : 256;
            struct t_weight *nw = core_realloc(p->al, s->tw, sizeof *nw * s->cap_tw,
                                               sizeof *nw * cap);

            if (!nw)
                return false;
            s->tw = nw;
            s->cap_tw = cap;
        }
        s->tw[n++] = (struct t_weight){p->pts[p->fr_at[i] + p->fr_n[i] / 2].t + dt,
                                       p->fr_n[i]};
        work += p->fr_n[i];
    }
    if (work < split_min())
        return true;
    if (!s->tried) {
        size_t nt = (size_t)p->n_t + 1;

        s->tried = true;
        if (!(s->team = core_team_start()))
            return true;
        s->out[0] = core_alloc(p->al, nt * sizeof *s->out[0]);
        s->out[1] = core_alloc(p->al, nt * sizeof *s->out[1]);
        if (!s->out[0] || !s->out[1])
            return false;
    }
    if (!s->team)
        return true;
    qsort(s->tw, n, sizeof *s->tw, tw_cmp);
    for (size_t e = 0; e < n && !*t_mid; e++)
        if (2 * (acc += s->tw[e].w) >= work)
            *t_mid = s->tw[e].t;
    /* overheads clamped to the last unit all on the upper side */
    *t_mid = *t_mid > p->n_t - 2 ? p->n_t - 2 : *t_mid;
    return true;
}

/* Set j's frontier on two cores, cut at t_mid (split_at); false when out of memory. */
static bool split_set(struct dp_split *s, int32_t j, int32_t t_mid)
{
    struct dp *p = s->p;
    size_t last = SIZE_MAX;

    s->j = j;
    s->part[1].any = false;
    s->part[1].t_lo = INT32_MAX;
    s->part[1].t_hi = -1;
    s->part[0].win_hi = t_mid;
    s->part[1].win_lo = t_mid;
    core_team_run(s->team, split_part, s);
    p->n_split++;
    s->part[0].win_hi = INT32_MAX;
    p->fr_at[j] = (int32_t)p->n_pts;
    p->fr_n[j] = 0;
    for (int k = 0; k < 2; k++)
        for (size_t e = 0; e < s->n_out[k]; e++) {
            if (s->out[k][e].m >= last)
                continue; /* the lower side's least m passes it */
            last = s->out[k][e].m;
            if (!push_point(p, s->out[k][e]) || (p->lag && !note_key(p)))
                return false;
            p->fr_n[j]++;
        }
    return true;
}

/* DP_MIN_M or DP_MIN_T without kept pairs, recording (p->rec): the usable pairs into L_j
 * from the first set holding a state on, written down as dp_keep_pairs keeps them, and
 * those from sets holding one relaxed. */
static void record_row(struct dp *p, enum dp_mode mode, struct point *one, int32_t j)
{
    struct dp_pairs *r = p->rec;
    int32_t i = first_start(p, j), dt;
    size_t dm, c;

    while (i < j && p->fr_n[i] == 0)
        i++;
    r->at[j] = r->n;
    for (; i < j; i++) {
        if (!pair_block(p, i, j, &dt, &dm, &c))
            continue;
        if (r->c)
            r->c[r->n] = c;
        r->p[r->n++] = (struct dp_pair){i, dt, dm};
        if (p->fr_n[i] > 0)
            relax_one(p, mode, one, i, j, dt, dm, c);
    }
    r->end[j] = r->n;
}

/* The k-th least (from 0) of key[0 .. n), which it reorders (Hoare's selection). */
static int64_t select_key(int64_t *key, int32_t n, int32_t k)
{
    int32_t lo = 0, hi = n - 1;

    while (lo < hi) {
        int64_t pv = key[lo + (hi - lo) / 2];
        int32_t a = lo, b = hi;

        while (a <= b) {
            while (key[a] < pv)
                a++;
            while (key[b] > pv)
                b--;
            if (a <= b) {
                int64_t x = key[a];

                key[a++] = key[b];
                key[b--] = x;
            }
        }
        if (k <= b)
            hi = b;
        else if (k >= a)
            lo = a;
        else
            return key[k];
    }
    return key[k];
}

/* The beam (dp_least.c): set j's frontier cut to its p->beam states of least D t + m
 * (the Lagrangian length so far; on a tie, the least t) and its state of least m; the
 * rest dropped. The frontier is the last pushed, so it is rewritten in place and its keys
 * noted again (a group of 8 or 64 that began before it keeps a least key that may be a
 * dropped state's: lower, so it skips less, never more). */
static bool beam_trim(struct dp *p, int32_t j)
{
    const struct point *fp = p->pts + p->fr_at[j];
    int32_t cnt = p->fr_n[j], keep = 0, ties = 0;
    int64_t D = p->lag_d, thr;

    if (cnt <= p->beam)
        return true;
    for (int32_t k = 0; k < cnt; k++)
        p->beam_key[k] = D * (int64_t)fp[k].t + (int64_t)fp[k].m;
    thr = select_key(p->beam_key, cnt, p->beam - 1);
    for (int32_t k = 0; k < p->beam; k++) /* the ties within the beam: the first of them */
        ties += p->beam_key[k] == thr;
    p->n_pts = (size_t)p->fr_at[j];
    for (int32_t k = 0; k < cnt; k++) {
        int64_t key = D * (int64_t)fp[k].t + (int64_t)fp[k].m;

        if (!(key < thr || (key == thr && ties-- > 0) || k == cnt - 1))
            continue;
        p->pts[p->n_pts++] = fp[k]; /* k >= the slot written: nothing unread is lost */
        if (!note_key(p))
            return false;
        keep++;
    }
    p->fr_n[j] = keep;
    return true;
}

/*
 * Runs the DP; the states of V are those of the last set. In DP_FRONTIER mode, with lb
 * and ub given, states that cannot lead to an overhead of at most ub are dropped (and,
 * with p->lag, those whose Lagrangian bound passes ub).
 */
/* What run_sets reads and writes besides p: its mode, its accumulators (sp.part[0] the
 * run's own), the prefix count of sets holding states, and the pipeline (NULL: one
 * thread). */
struct run {
    struct dp *p;
    enum dp_mode mode;
    struct dp_split sp;
    int32_t *live;
    struct dp_pipe *pipe;
    remat_status st;
};

/* Set j's candidates from its pairs in a frontier run (into a; with r->pipe, those
 * from the sets before dp_pipe_from's the helper's). */
static void frontier_row(struct run *r, struct dp_acc *a, int32_t j)
{
    struct dp *p = r->p;
    struct pair_it it;
    int32_t i, dt, from = r->pipe ? dp_pipe_from(r->pipe, j) : 0;
    size_t dm, c;

    for (pairs_begin_from(p, j, from, true, &it); pairs_next(p, &it, &i, &dt, &dm, &c);)
        relax(p, a, i, j, dt, dm, c);
    if (from == 0 || dp_pipe_merge(r->pipe, a, j))
        return;
    for (int32_t t = a->t_lo; a->any && t <= a->t_hi; t++) /* alone after all */
        a->best[t] = SIZE_MAX;
    a->any = false;
    a->t_lo = INT32_MAX;
    a->t_hi = -1;
    for (pairs_begin(p, j, true, &it); pairs_next(p, &it, &i, &dt, &dm, &c);)
        relax(p, a, i, j, dt, dm, c);
}

/* The run's sets after ∅ (dp_run). */
static remat_status run_sets(struct run *r)
{
    struct dp *p = r->p;
    struct dp_split *sp = &r->sp;
    struct dp_acc *a = &sp->part[0];
    enum dp_mode mode = r->mode;
    int32_t n = p->ls->n, *live = r->live;

    for (int32_t j = 1; j < n; j++) {
        struct pair_it it;
        int32_t i, dt, t_mid = 0;
        size_t dm, c;
        int64_t est = 0;
        double t0 = 0;
        bool none = !p->rec && live[j] == live[first_start(p, j)];

        report(p, j, n);
        if (dp_stopped(p->pg))
            return REMAT_FAIL(REMAT_ERR_INFEASIBLE, "the DP's run was stopped");
        a->one = (struct point){SIZE_MAX, INT32_MAX, -1};
        a->any = false;
        a->t_lo = INT32_MAX;
        a->t_hi = -1;
        if (!none && (!sp->tried || sp->team)) {
            est = (int64_t)(p->pc.end[j] - p->pc.at[j]) * (int64_t)(p->n_pts / (size_t)j);
            t0 = core_seconds();
            if (worth_sharing(sp, est) && !split_at(sp, j, &t_mid))
                goto nomem;
            if (t_mid > 0 && !split_set(sp, j, t_mid))
                goto nomem;
        }
        if (t_mid == 0) { /* else split_set made the set's states */
            if (none)
                ; /* no state to carry */
            else if (mode == DP_FRONTIER)
                frontier_row(r, a, j);
            else if (p->pc.p || p->co)
                for (pairs_begin(p, j, true, &it); pairs_next(p, &it, &i, &dt, &dm, &c);)
                    relax_one(p, mode, &a->one, i, j, dt, dm, c);
            else if (p->rec) /* the same, writing down the row from its first state */
                record_row(p, mode, &a->one, j);
            else /* the same, without the iterator's cost (the bisection's first runs) */
                for (i = first_start(p, j); i < j; i++)
                    if (p->fr_n[i] > 0 && pair_block(p, i, j, &dt, &dm, &c))
                        relax_one(p, mode, &a->one, i, j, dt, dm, c);
            if (!close_set(p, a, j))
                goto nomem;
        }
        if (mode == DP_FRONTIER && p->beam > 0 && j < n - 1 && !beam_trim(p, j))
            goto nomem;
        if (mode == DP_FRONTIER && p->gd.n > 0)
            finish_states(p, sp->part, 2, j);
        live[j + 1] = live[j] + (p->fr_n[j] > 0);
        if (r->pipe)
            dp_pipe_publish(r->pipe, j, a->ub);
        if (est > 0)
            note_cost(sp, est, core_seconds() - t0, t_mid > 0);
        if (p->max_pts && p->n_pts > p->max_pts) {
            p->capped = true; /* the caller tries otherwise */
            p->fr_n[n - 1] = 0;
            break;
        }
        if (p->n_pts > (size_t)INT32_MAX / 2)
            return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the DP's frontiers grew past 10^9 points");
    }
    return REMAT_OK;
nomem:
    return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
}

/* core_team's parts of a pipelined run: the sets, and the helper's. */
static void run_part(void *ctx, int part)
{
    struct run *r = ctx;

    if (part == 0) {
        r->st = run_sets(r);
        dp_pipe_stop(r->pipe);
    } else {
        dp_pipe_help(r->pipe);
    }
}

/* Room for cap states in p (and their keys' groups), so that pushing them does not move
 * pts (a pipelined run's helper reads it meanwhile); false when out of memory. */
static bool reserve_pts(struct dp *p, size_t cap)
{
    return (cap <= p->cap_pts || grow_pts(p, cap)) &&
           (cap / 8 + 1 <= p->cap_kmin || grow_kmin(p, cap / 8 + 1));
}

/*
 * Runs the DP; the states of V are those of the last set. In DP_FRONTIER mode, with lb
 * and ub given, states that cannot lead to an overhead of at most ub are dropped (and,
 * with p->lag, those whose Lagrangian bound passes ub).
 */
remat_status dp_run(struct dp *p, enum dp_mode mode, const int32_t *lb, int32_t ub)
{
    int32_t n = p->ls->n;
    size_t nt = (size_t)p->n_t + 1;
    struct run r = {p, mode, {.p = p}, NULL, NULL, REMAT_OK};
    struct dp_split *sp = &r.sp;
    struct dp_acc *a = &sp->part[0];
    remat_status st = REMAT_OK;
    /* live[j]: the sets before L_j that hold a state. A set whose pairs all start from
     * sets that hold none gets none: its pairs are not read (the sparse runs, least time
     * and the first deepening, hold states in a few of the sets, and a beam run's
     * Lagrangian test leaves many empty: GPT-2-1000 at 2% of the way from its least
     * budget to `none`'s peak, the first deepening 0.031 -> 0.004 s, the beam 0.93 ->
     * 0.63-0.79 s). Not with p->rec, which writes every row down. */
    int32_t *live = NULL;

    *a = (struct dp_acc){mode, lb, ub, NULL, NULL, {0}, false, 0, 0, 0, INT32_MAX};
    p->n_split = 0;
    p->n_piped = p->n_redone = 0;
    p->ub_found = INT32_MAX;
    p->run_ub = ub;
    sp->tried = mode != DP_FRONTIER || !p->pc.p || split_min_set < 0 ||
                core_par_threads_with(p->al) < 2;
    p->n_pts = 0;
    p->capped = false;
    a->best = core_alloc(p->al, nt * sizeof *a->best);
    a->par = core_calloc(p->al, nt, sizeof *a->par);
    live = r.live = core_alloc(p->al, ((size_t)n + 1) * sizeof *live);
    if (!a->best || !a->par || !live)
        goto nomem;
    live[0] = 0;
    live[1] = 1; /* ∅ */
    for (size_t q = 0; q < nt; q++)
        a->best[q] = SIZE_MAX; /* and again after each set, over the range it touched */
    sp->part[1] = *a; /* the same best[] and par[]: the sides do not overlap */
    p->fr_at[0] = 0;
    p->fr_n[0] = 1;
    if (!push_point(p, (struct point){0, 0, -1}) || (p->lag && !note_key(p)))
        goto nomem;
    /* a beam run on two threads: at most beam + 1 states a set, and one set's whole
     * frontier before its trim */
    if (mode == DP_FRONTIER && p->beam > 0 && pipe_set && !sp->tried &&
        reserve_pts(p, (size_t)(p->beam + 1) * (size_t)n + nt + 1) &&
        (r.pipe = dp_pipe_new(p, a))) {
        sp->tried = true; /* the team is the pipeline's */
        core_team_run(dp_pipe_team(r.pipe), run_part, &r);
        st = r.st;
        dp_pipe_counts(r.pipe, &p->n_piped, &p->n_redone);
        dp_pipe_free(r.pipe);
        goto out;
    }
    st = run_sets(&r);
    goto out;
nomem:
    st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
out:
    core_team_stop(sp->team);
    core_free(p->al, a->best, sizeof *a->best * nt);
    core_free(p->al, a->par, sizeof *a->par * nt);
    core_free(p->al, live, sizeof *live * ((size_t)n + 1));
    core_free(p->al, sp->out[0], sizeof *sp->out[0] * nt);
    core_free(p->al, sp->out[1], sizeof *sp->out[1] * nt);
    core_free(p->al, sp->tw, sizeof *sp->tw * sp->cap_tw);
    return st;
}

remat_status dp_init(struct dp *p, const struct dag *d, const struct lsets *ls,
                            size_t budget)
{
    double total = 0;
    bool integral = true;

    memset(p, 0, sizeof *p);
    p->d = d;
    p->ls = ls;
    p->al = d->al;
    p->budget = budget;
    for (int32_t v = 0; v < d->n; v++) {
        total += d->t[v];
        integral = integral && d->t[v] == floor(d->t[v]) && d->t[v] >= 0;
    }
    if (integral && total <= 64.0 * d->n) {
        p->scale = 1;
    } else {
        p->scale = total > 0 ? 8.0 * d->n / total : 1;
        total = 8.0 * d->n;
    }
    p->n_t = (int32_t)(total * p->scale) + 2;
    if (p->scale != 1)
        p->n_t = (int32_t)total + 2;
    p->fr_at = core_calloc(p->al, (size_t)ls->n, sizeof *p->fr_at);
    p->fr_n = core_calloc(p->al, (size_t)ls->n, sizeof *p->fr_n);
    if (!p->fr_at || !p->fr_n) {
        core_free(p->al, p->fr_at, sizeof *p->fr_at * (size_t)ls->n);
        core_free(p->al, p->fr_n, sizeof *p->fr_n * (size_t)ls->n);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the lower-set DP");
    }
    return REMAT_OK;
}

void dp_fini(struct dp *p)
{
    core_free(p->al, p->fr_at, sizeof *p->fr_at * (size_t)p->ls->n);
    core_free(p->al, p->fr_n, sizeof *p->fr_n * (size_t)p->ls->n);
    core_free(p->al, p->pts, sizeof *p->pts * p->cap_pts);
    core_free(p->al, p->kmin[0], sizeof *p->kmin[0] * p->cap_kmin);
    core_free(p->al, p->kmin[1], sizeof *p->kmin[1] * (p->cap_kmin ? p->cap_kmin / 8 + 1 : 0));
    dp_pairs_fini(&p->pc);
    if (p->gd.sdt)
        dp_guides_fini(&p->gd);
}
