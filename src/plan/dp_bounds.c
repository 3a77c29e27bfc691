/*
 * dp_bounds.c - what the lower-set DP's runs (kusumoto.c) read besides their states:
 * the pairs a run visits and those kept for a search, the per-set bounds lb and room,
 * and, after a run, the budget its chain needs and the set of a state.
 */
#include "plan/dp_iter.h"

/* The pairs into L_j a run at p's budget visits (kusumoto_pairs, restricted by p->co). */
static int64_t row_pairs(const struct dp *p, int32_t j)
{
    struct pair_it it;
    int64_t n;

    pairs_begin(p, j, false, &it);
    n = j - it.s;
    if (p->co && it.ck < p->co->k)
        n += dp_coarse_from(p->co, it.s) - it.ck;
    return n;
}

int64_t dp_run_pairs(const struct dp *p)
{
    int64_t n = 0;

    for (int32_t j = 1; j < p->ls->n; j++)
        n += row_pairs(p, j);
    return n;
}

/* One part of dp_keep_pairs: the usable pairs of rows j0 .. j1 - 1, written from
 * pc->p[base] on (at most the pairs those rows visit). */
struct keep_part {
    const struct dp *p;
    struct dp_pairs *pc;
    int32_t j0[2], j1[2];
    size_t base[2], n[2]; /* where each part starts, and the pairs it kept */
    bool stopped[2];      /* dp_stopped before its last row */
};

static void keep_job(void *ctx, int k)
{
    struct keep_part *w = ctx;
    struct dp_pairs *pc = w->pc;
    size_t n = w->base[k];

    for (int32_t j = w->j0[k]; j < w->j1[k]; j++) {
        struct pair_it it;
        struct dp_pair q;
        size_t c;

        if (dp_stopped(w->p->pg)) {
            w->stopped[k] = true;
            break;
        }
        pc->at[j] = n;
        for (pairs_begin(w->p, j, false, &it); pairs_next(w->p, &it, &q.i, &q.dt, &q.dm, &c);) {
            if (pc->c)
                pc->c[n] = c;
            pc->p[n++] = q;
        }
        pc->end[j] = n;
    }
    w->n[k] = n - w->base[k];
}

/* Keeps the usable pairs of the run's budget (runs at smaller budgets filter them), when
 * they number at most DP_PAIRS_MAX; false when out of memory or stopped (dp_stopped:
 * old's pairs, taken over, are then gone too). On two cores (the authors' model: the
 * simulator's writes its scratch) the rows are split where half the pairs visited lie
 * on each side, the second half written from its first row's bound on (the room
 * between the halves is never touched). GPT-2 of 1,000 layers at its least budget: 5.9
 * 10^6 pairs. */
static bool keep_pairs(struct dp *p, struct dp_pairs *old)
{
    int64_t n = dp_run_pairs(p), half = 0;
    struct dp_pairs pc = {0};
    struct keep_part w = {p, &pc, {1, 1}, {p->ls->n, p->ls->n}, {0, 0}, {0, 0}, {0, 0}};
    int parts = core_par_threads_with(p->al) > 1 && !p->ls->sim ? 2 : 1;

    if (p->pc.p || n > DP_PAIRS_MAX)
        return true;
    if (old && old->p && old->n_sets == p->ls->n && (old->c != NULL) == (p->ls->sim != NULL)) {
        if (!dp_pairs_regrow(&pc, old, (size_t)n))
            return false;
    } else if (!dp_pairs_init(&pc, p->al, p->ls->n, (size_t)n, p->ls->sim != NULL)) {
        return false;
    }
    if (parts == 2) {
        int32_t j = 1;

        while (j < p->ls->n && half < n / 2)
            half += row_pairs(p, j++);
        w.j1[0] = w.j0[1] = j;
        w.base[1] = (size_t)half;
    }
    core_par_run(parts, parts, keep_job, &w);
    if (w.stopped[0] || w.stopped[1]) { /* old went into pc: neither holds pairs now */
        dp_pairs_fini(&pc);
        return false;
    }
    pc.n = w.n[0] + w.n[1];
    pc.budget = p->budget;
    p->pc = pc;
    return true;
}

bool dp_keep_pairs(struct dp *p)
{
    return keep_pairs(p, NULL);
}

bool dp_keep_pairs_in(struct dp *p, struct dp_pairs *old)
{
    return keep_pairs(p, old);
}

bool dp_record_pairs(struct dp *p, struct dp_pairs *rec)
{
    int64_t n = dp_run_pairs(p);

    if (p->pc.p || p->co || n > DP_PAIRS_MAX)
        return false;
    if (!dp_pairs_init(rec, p->al, p->ls->n, (size_t)n, p->ls->sim != NULL))
        return false;
    rec->budget = p->budget;
    return true;
}

int32_t dp_point_set(const struct dp *p, int32_t idx)
{
    int32_t lo = 0, hi = p->ls->n - 1;

    while (lo < hi) { /* the last set whose frontier starts at or before idx */
        int32_t mid = lo + (hi - lo + 1) / 2;

        if (p->fr_at[mid] <= idx)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The charge of the kept pair (i, j) into *c (the rows ascend in i); false when not
 * kept. */
static bool kept_charge(const struct dp *p, int32_t i, int32_t j, size_t *c)
{
    size_t lo = p->pc.at[j], hi = p->pc.end[j];

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (p->pc.p[mid].i < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->pc.end[j] || p->pc.p[lo].i != i)
        return false;
    *c = dp_pair_charge(&p->pc, p->ls, lo, j);
    return true;
}

size_t dp_chain_need(const struct dp *p)
{
    size_t need = 0;

    for (int32_t j = p->ls->n - 1; j > 0 && p->fr_n[j] > 0;) {
        const struct point *q = &p->pts[p->fr_at[j]];
        int32_t i = dp_point_set(p, q->parent), dt;
        size_t dm, c, at, dmv;

        /* from the kept pairs when there are (then the model's scratch is not touched,
         * and runs may share the pairs on two threads) */
        if (!(p->pc.p && kept_charge(p, i, j, &c)) && !pair_block_at(p, i, j, true, &dt, &dm, &c))
            return p->budget; /* not the run's chain (cannot happen): no tighter */
        /* the state carried in plus the block's charge, and the window it must fit
         * (B/2 or B: pair_block) */
        at = p->pts[p->fr_at[i]].m + c;
        dmv = p->ls->m[j] - p->ls->m[i];
        at = p->ls->sim ? (dmv > at ? dmv : at) : (2 * dmv > at ? 2 * dmv : at);
        need = at > need ? at : need;
        j = i;
    }
    return need;
}

/*
 * lb[i]: the least overhead from L_i to V over transitions whose block fits the budget
 * (memory carried over ignored), so t + lb[i] bounds every chain through (L_i, t).
 * room[i]: the most cached memory m a state at L_i may carry and still reach V (-1:
 * none may), the largest over its transitions to L_j of min(B - c, room[j] - dm); a
 * state above it is dead, and so is everything it leads to (m only grows), so the
 * frontier pass skips it without changing the states that reach V. Both in one pass
 * over the pairs, backwards.
 */
void dp_bounds(const struct dp *p, int32_t *lb, int64_t *room)
{
    const struct lsets *ls = p->ls;
    int64_t B = p->budget > (size_t)INT64_MAX ? INT64_MAX : (int64_t)p->budget;
    struct pair_it it;

    for (int32_t i = 0; i < ls->n; i++) {
        lb[i] = i == ls->n - 1 ? 0 : INT32_MAX;
        room[i] = i == ls->n - 1 ? INT64_MAX : -1;
    }
    /* each L_j's own bounds are final once every pair from it is seen: the pairs are
     * taken by their end, last first */
    for (int32_t j = ls->n - 1; j > 0; j--) {
        int32_t i, dt;
        size_t dm, c;

        if (room[j] < 0)
            continue;
        if (p->pc.p)
            dp_pairs_prefetch_row(&p->pc, j - 1); /* the next row, read last first */
        for (pairs_begin(p, j, false, &it); pairs_next(p, &it, &i, &dt, &dm, &c);) {
            int64_t r = B - (int64_t)c;

            if (lb[j] != INT32_MAX && dt + lb[j] < lb[i])
                lb[i] = dt + lb[j];
            if (room[j] != INT64_MAX)
                r = room[j] - (int64_t)dm < r ? room[j] - (int64_t)dm : r;
            room[i] = r > room[i] ? r : room[i];
        }
    }
}

int64_t kusumoto_pairs(const struct lsets *ls, size_t budget)
{
    struct dp p = {.ls = ls, .budget = budget};
    int64_t n = 0;

    for (int32_t j = 1; j < ls->n; j++)
        n += j - first_start(&p, j);
    return n;
}

int64_t kusumoto_sim_work(const struct lsets *ls, size_t budget)
{
    int64_t work = 0, below = 0; /* below: the sizes of sets fs .. j - 1 */
    int32_t fs = 0;

    if (!ls->by_m)
        return INT64_MAX;
    /* the pairs into L_j are the sets from the first whose M is within B of M(L_j), a
     * start that only moves up with j (the sets ascend in M) */
    for (int32_t j = 1; j < ls->n; j++) {
        below += ls->size[j - 1];
        while (fs < j && ls->m[j] - ls->m[fs] > budget)
            below -= ls->size[fs++];
        work += (int64_t)(j - fs) * ls->size[j] - below;
    }
    return work;
}
