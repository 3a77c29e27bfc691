/*
 * dp_pairs.c - the DP's kept pairs and its Lagrangian bound (dp_pairs.h).
 *
 * The bound is a shortest path over the pairs, taken by their end, last first (H_D(L_j)
 * is final once every pair from L_j is seen), with D t + bytes as the length: integers,
 * so that the tests are exact. The sum bound never puts a state's key below its
 * parent's (H_D(L_i) <= D dt + dm + H_D(L_j)); the peak bound may, where the block's own
 * peak passes the rest's (P_D(L_i) <= D dt + c), but then the parent's key is at most
 * D t' + m + c <= D ub + B for a child within ub whose block fits. Either way a state
 * passes only if its parent does, and the DP that prunes by it keeps exactly the states
 * of the unpruned one that pass. Work: one pass over the kept pairs per D tried
 * (LAG_STEPS), and one for the peak bound at the D found.
 */
#include "plan/dp_pairs.h"

#include <math.h>
#include <string.h>

/* The most values of D tried (dp_lagrange). */
#define LAG_STEPS 12

bool dp_pairs_init(struct dp_pairs *pc, const remat_allocator *al, int32_t n_sets, size_t cap,
                   bool with_c)
{
    memset(pc, 0, sizeof *pc);
    pc->al = al;
    pc->n_sets = n_sets;
    pc->cap = cap ? cap : 1;
    pc->at = core_calloc(al, (size_t)n_sets + 1, sizeof *pc->at);
    pc->end = core_calloc(al, (size_t)n_sets + 1, sizeof *pc->end);
    pc->p = core_alloc(al, pc->cap * sizeof *pc->p);
    pc->c = with_c ? core_alloc(al, pc->cap * sizeof *pc->c) : NULL;
    if (!pc->at || !pc->end || !pc->p || (with_c && !pc->c)) {
        dp_pairs_fini(pc);
        return false;
    }
    core_hint_huge(pc->p, pc->cap * sizeof *pc->p);
    core_hint_huge(pc->c, pc->cap * sizeof *pc->c);
    return true;
}

void dp_pairs_fini(struct dp_pairs *pc)
{
    /* al NULL is the C library's allocator; core_free passes over NULL blocks */
    core_free(pc->al, pc->at, sizeof *pc->at * ((size_t)pc->n_sets + 1));
    core_free(pc->al, pc->end, sizeof *pc->end * ((size_t)pc->n_sets + 1));
    core_free(pc->al, pc->p, sizeof *pc->p * pc->cap);
    core_free(pc->al, pc->c, sizeof *pc->c * pc->cap);
    memset(pc, 0, sizeof *pc);
}

/* Per set, the pair that continues its least chain (for the walk from ∅). */
struct lag_next {
    int32_t *to, *dt;
    size_t *dm, *c;
};

/* A chain from ∅ to V as the bound's least path has it. */
struct lag_path {
    int64_t t;      /* Σ dt */
    int64_t s;      /* Σ dm (all blocks but the last) + c (the last) */
    bool fits;      /* m + c <= B at every block */
};

/* H_D (peak: P_D; dp_pairs.h) into h, by one pass over the usable pairs; the least chain
 * from ∅. */
static struct lag_path lag_pass(const struct dp_pairs *pc, const struct lsets *ls, size_t B,
                                size_t window, const int64_t *room, int64_t D, bool peak,
                                int64_t *h, const struct lag_next *nx)
{
    int32_t last = ls->n - 1;
    struct lag_path r = {0, 0, true};
    size_t m = 0;

    for (int32_t i = 0; i < ls->n; i++) {
        h[i] = INT64_MAX;
        nx->to[i] = -1;
    }
    for (int32_t j = last; j > 0; j--) {
        if (room[j] < 0 || (j != last && h[j] == INT64_MAX))
            continue;
        for (size_t e = pc->at[j]; e < pc->end[j]; e++) {
            const struct dp_pair *q = &pc->p[e];
            size_t c = dp_pair_charge(pc, ls, e, j);
            int64_t v;

            if (c > B || ls->m[j] - ls->m[q->i] > window)
                continue;
            if (j == last || (peak && (int64_t)c > (int64_t)q->dm + h[j]))
                v = D * q->dt + (int64_t)c; /* the block's own peak passes the rest's */
            else
                v = D * q->dt + (int64_t)q->dm + h[j];
            if (v < h[q->i]) {
                h[q->i] = v;
                nx->to[q->i] = j;
                nx->dt[q->i] = q->dt;
                nx->dm[q->i] = q->dm;
                nx->c[q->i] = c;
            }
        }
    }
    for (int32_t i = 0; i != last && nx->to[i] >= 0; i = nx->to[i]) {
        r.t += nx->dt[i];
        r.s += (int64_t)(nx->to[i] == last ? nx->c[i] : nx->dm[i]);
        r.fits = r.fits && m + nx->c[i] <= B;
        m += nx->dm[i];
    }
    return r;
}

bool dp_guides_init(struct dp_guides *g, const remat_allocator *al, int32_t n_sets)
{
    size_t n = (size_t)DP_GUIDES_MAX * (size_t)n_sets;

    memset(g, 0, sizeof *g);
    g->al = al;
    g->n_sets = n_sets;
    g->sdt = core_alloc(al, n * sizeof *g->sdt);
    g->need = core_alloc(al, n * sizeof *g->need);
    if (!g->sdt || !g->need) {
        dp_guides_fini(g);
        return false;
    }
    return true;
}

void dp_guides_fini(struct dp_guides *g)
{
    size_t n = (size_t)DP_GUIDES_MAX * (size_t)g->n_sets;

    core_free(g->al, g->sdt, n * sizeof *g->sdt);
    core_free(g->al, g->need, n * sizeof *g->need);
    memset(g, 0, sizeof *g);
}

/* The least paths of the last pass (nx) as a guide: the sets from the last down, each
 * after the set its path goes on to. */
static void guide_add(struct dp_guides *g, const struct lsets *ls, const struct lag_next *nx)
{
    int32_t last = ls->n - 1;
    int32_t *sdt;
    size_t *need;

    if (!g || !g->sdt || g->n == DP_GUIDES_MAX)
        return;
    sdt = g->sdt + (size_t)g->n * (size_t)g->n_sets;
    need = g->need + (size_t)g->n * (size_t)g->n_sets;
    g->n++;
    sdt[last] = 0;
    need[last] = 0;
    for (int32_t i = last; i-- > 0;) {
        int32_t to = nx->to[i];

        sdt[i] = INT32_MAX;
        need[i] = SIZE_MAX;
        if (to < 0 || sdt[to] == INT32_MAX || (int64_t)sdt[to] + nx->dt[i] >= INT32_MAX)
            continue;
        sdt[i] = sdt[to] + nx->dt[i];
        need[i] = to == last ? nx->c[i]
                  : nx->dm[i] + need[to] > nx->c[i] ? nx->dm[i] + need[to] : nx->c[i];
    }
}

static bool lag_alloc(const remat_allocator *al, struct lag_next *nx, int64_t **hh, size_t n)
{
    nx->to = core_calloc(al, n, sizeof *nx->to);
    nx->dt = core_calloc(al, n, sizeof *nx->dt);
    nx->dm = core_calloc(al, n, sizeof *nx->dm);
    nx->c = core_calloc(al, n, sizeof *nx->c);
    *hh = core_calloc(al, n, sizeof **hh);
    return nx->to && nx->dt && nx->dm && nx->c && *hh;
}

static void lag_release(const remat_allocator *al, struct lag_next *nx, int64_t *hh, size_t n)
{
    core_free(al, nx->to, sizeof *nx->to * n);
    core_free(al, nx->dt, sizeof *nx->dt * n);
    core_free(al, nx->dm, sizeof *nx->dm * n);
    core_free(al, nx->c, sizeof *nx->c * n);
    core_free(al, hh, sizeof *hh * n);
}

/* dp_lagrange's search: what each pass reads and writes, the best bound at ∅ so far
 * (its D into *d, its H into h) and the passes made. */
struct lag_search {
    const struct dp_pairs *pc;
    const struct lsets *ls;
    size_t budget, window;
    const int64_t *room;
    int64_t *hh, *h, *d, best;
    int32_t *ub;
    struct dp_guides *g;
    struct lag_next nx;
    int passes;
};

/* The pass at D: its least path into *r, its bound at ∅ kept when the best so far, the
 * path as a guide and as ub where it fits; false when no chain goes on from ∅. */
static bool lag_try(struct lag_search *w, int64_t D, struct lag_path *r)
{
    int64_t num, v;

    *r = lag_pass(w->pc, w->ls, w->budget, w->window, w->room, D, false, w->hh, &w->nx);
    w->passes++;
    if (r->fits && r->t < *w->ub)
        *w->ub = (int32_t)r->t;
    guide_add(w->g, w->ls, &w->nx);
    if (w->hh[0] == INT64_MAX)
        return false; /* no chain (room[0] >= 0 says there is one: not met) */
    num = w->hh[0] - (int64_t)w->budget;
    v = num > 0 ? (num + D - 1) / D : 0;
    if (v > w->best) {
        w->best = v;
        *w->d = D;
        memcpy(w->h, w->hh, sizeof *w->h * (size_t)w->ls->n);
    }
    return true;
}

/*
 * The bound at ∅ for D is min over paths p of t_p + (s_p - B)/D: a path with s_p > B
 * gives less as D grows, one with s_p <= B more, so the bound is largest where the
 * least path's s crosses B, where two paths a (s > B) and b (s <= B) meet: D = (s_a -
 * s_b) / (t_b - t_a). The search (after Handler and Zang, 1980) starts from the least-time
 * path (the largest D) and the least-bytes one (D = 1), and tries the two whole D around
 * the meeting of the two paths known on either side; a path below both there takes the
 * place of one. When none is below at either, the bound is largest between those two D
 * (it is below a's line on one side and b's on the other), so the better of them is the
 * best whole D. At most LAG_STEPS passes: GPT-2-1000 at the budget halfway to `none`'s
 * peak 6 where bisection on log D took 12, its bound at ∅ 45,972 units against 45,970.
 */
bool dp_lagrange(const struct dp_pairs *pc, const struct lsets *ls, size_t budget,
                 size_t window, const int64_t *room, int32_t n_t, int64_t *h, int64_t *d,
                 int32_t *lb0, int32_t *ub, struct dp_guides *g)
{
    size_t n = (size_t)ls->n;
    struct lag_search w = {pc, ls, budget, window, room, NULL, h, d, -1, ub, g, {0}, 0};
    struct lag_path a, b, r;
    int64_t da, db;
    bool ok, moved = true;

    *d = 0;
    *lb0 = 0;
    if (!pc->p || budget > (size_t)DP_LAG_MAX || ls->m[ls->n - 1] > (size_t)DP_LAG_MAX ||
        n_t <= 0 || room[0] < 0 || DP_LAG_MAX / n_t < 3)
        return true;
    if (!(ok = lag_alloc(pc->al, &w.nx, &w.hh, n)))
        goto out;
    da = DP_LAG_MAX / n_t - 1;
    db = 1;
    if (!lag_try(&w, da, &a) || a.s <= (int64_t)budget || !lag_try(&w, db, &b) ||
        b.s > (int64_t)budget)
        goto done; /* the least-time path fits, or no path does */
    while (moved && b.t > a.t) {
        int64_t at = (int64_t)floor((double)(a.s - b.s) / (double)(b.t - a.t));

        moved = false;
        for (int64_t D = at; D <= at + 1 && !moved; D++) {
            if (D <= db || D >= da)
                continue; /* tried: its least path is b or a */
            if (w.passes == LAG_STEPS || !lag_try(&w, D, &r))
                goto done;
            if (D * r.t + r.s < D * a.t + a.s && D * r.t + r.s < D * b.t + b.s) {
                moved = true; /* below both: it takes the place of one */
                if (r.s > (int64_t)budget) {
                    a = r;
                    da = D;
                } else {
                    b = r;
                    db = D;
                }
            }
        }
    }
done:
    if (*d > 0) { /* the states' bound at the D found: P_D, at least H_D */
        int64_t num;

        r = lag_pass(pc, ls, budget, window, room, *d, true, h, &w.nx);
        if (r.fits && r.t < *ub)
            *ub = (int32_t)r.t;
        guide_add(g, ls, &w.nx);
        num = h[0] - (int64_t)budget;
        if (num > 0 && (num + *d - 1) / *d > w.best)
            w.best = (num + *d - 1) / *d;
    }
    *lb0 = w.best > INT32_MAX ? INT32_MAX : (int32_t)(w.best < 0 ? 0 : w.best);
out:
    lag_release(pc->al, &w.nx, w.hh, n);
    return ok;
}

bool dp_lagrange_at(const struct dp_pairs *pc, const struct lsets *ls, size_t budget,
                    size_t window, const int64_t *room, int32_t n_t, int64_t *d, int64_t *h,
                    int32_t *ub, struct dp_guides *g)
{
    size_t n = (size_t)ls->n;
    struct lag_next nx;
    int64_t *hh = NULL;
    bool ok = lag_alloc(pc->al, &nx, &hh, n);

    if (*d > DP_LAG_MAX / (n_t > 0 ? n_t : 1) - 1)
        *d = DP_LAG_MAX / (n_t > 0 ? n_t : 1) - 1;
    if (ok) {
        struct lag_path r = lag_pass(pc, ls, budget, window, room, *d, true, h, &nx);

        if (r.fits && r.t < *ub)
            *ub = (int32_t)r.t;
        guide_add(g, ls, &nx);
    }
    lag_release(pc->al, &nx, hh, n);
    return ok;
}
