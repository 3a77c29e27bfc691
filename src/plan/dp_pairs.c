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
 * of the unpruned one that pass. Work: one pass over the kept pairs per step of the
 * search (at most LAG_STEPS; the two D around a meeting in one pass), and one for the
 * peak bound at the D found and the further ones together.
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

bool dp_pairs_regrow(struct dp_pairs *pc, struct dp_pairs *old, size_t cap)
{
    const remat_allocator *al = old->al;
    bool with_c = old->c != NULL;
    struct dp_pair *np;
    size_t *nc = NULL;

    cap = cap ? cap : 1;
    if (cap > old->cap) {
        /* Grown, its pairs dropped: freed, then taken anew, with no copy of what the
         * memory held (realloc moves the block where it cannot grow in place: GPT-2-1000
         * at 2% of the way from its least budget to `none`'s peak, a copy of 96 MB on
         * one core, 0.05 s, before the two cores write the pairs; at the heap's top the
         * freed block joins the top and the new one starts where it did). */
        core_free(al, old->p, sizeof *old->p * old->cap);
        core_free(al, old->c, sizeof *old->c * old->cap);
        old->p = core_alloc(al, sizeof *np * cap);
        old->c = with_c ? core_alloc(al, sizeof *nc * cap) : NULL;
        old->cap = cap;
        if (!old->p || (with_c && !old->c)) {
            dp_pairs_fini(old);
            return false;
        }
        np = old->p;
        nc = old->c;
    } else { /* cut in place */
        if (!(np = core_realloc(al, old->p, sizeof *np * old->cap, sizeof *np * cap))) {
            dp_pairs_fini(old);
            return false;
        }
        old->p = np;
        if (with_c && !(nc = core_realloc(al, old->c, sizeof *nc * old->cap, sizeof *nc * cap))) {
            core_free(al, old->p, sizeof *old->p * cap);
            old->p = NULL;
            dp_pairs_fini(old);
            return false;
        }
    }
    *pc = *old;
    memset(old, 0, sizeof *old);
    pc->c = nc;
    pc->cap = cap;
    pc->n = 0;
    memset(pc->at, 0, sizeof *pc->at * ((size_t)pc->n_sets + 1));
    memset(pc->end, 0, sizeof *pc->end * ((size_t)pc->n_sets + 1));
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

/* The lanes one pass computes at once: the search's two D (dp_lagrange) or the peak
 * bound at the D found and at the further ones (dp_lagrange_peaks). The pass reads each
 * kept pair once for all its lanes; on two cores each core takes a part of the lanes
 * (GPT-2-1000 at 2% of the way from its least budget to `none`'s peak: 12.6 10^6 pairs
 * a pass). */
#define LAG_LANES (1 + DP_LAG_EXTRA)

/* Per lane and set, the pair that continues its least chain (for the walk from ∅): the
 * set it goes on to (-1: none) and the pair's index. */
struct lag_next {
    int32_t *to[LAG_LANES];
    size_t *pe[LAG_LANES];
    int k;
};

/* A chain from ∅ to V as the bound's least path has it. */
struct lag_path {
    int64_t t;      /* Σ dt */
    int64_t s;      /* Σ dm (all blocks but the last) + c (the last) */
    bool fits;      /* m + c <= B at every block */
};

/* One pass over the usable pairs for the K lanes D[0 .. K): H_D (peak: P_D; dp_pairs.h)
 * into h[lane], the pairs that continue the least chains into to[lane], pe[lane]. K and
 * withc (the pairs carry their charges: pc->c) constants in each call (lag_job), so that
 * the lanes' loop unrolls; what the pairs into L_j share is read once (the rows written
 * are int64, which may alias the sets' sizes for the compiler). */
static inline __attribute__((always_inline)) void
lag_scan(const struct dp_pairs *pc, const struct lsets *ls, size_t B, size_t window,
         const int64_t *room, const int64_t *Din, const int K, const bool withc, bool peak,
         int64_t *const *hin, int32_t *const *toin, size_t *const *pein)
{
    int32_t last = ls->n - 1;
    const size_t *m = ls->m;
    int64_t D[3], *h[3];
    int32_t *to[3];
    size_t *pe[3];

    for (int k = 0; k < K; k++) {
        D[k] = Din[k];
        h[k] = hin[k];
        to[k] = toin[k];
        pe[k] = pein[k];
        for (int32_t i = 0; i < ls->n; i++) {
            h[k][i] = INT64_MAX;
            to[k][i] = -1;
        }
    }
    for (int32_t j = last; j > 0; j--) {
        int64_t hj[3];
        size_t mj = m[j], cj = ls->m_out[j], e0 = pc->at[j], e1 = pc->end[j];
        const struct dp_pair *p = pc->p;
        const size_t *cc = pc->c;
        bool at_last = j == last;

        /* no chain from L_j to V: the same at every D */
        if (room[j] < 0 || (!at_last && h[0][j] == INT64_MAX))
            continue;
        for (int k = 0; k < K; k++)
            hj[k] = at_last ? 0 : h[k][j]; /* (not read at V, where it is INT64_MAX) */
        dp_pairs_prefetch_row(pc, j - 1); /* the next row, read last first */
        for (size_t e = e0; e < e1; e++) {
            int32_t i = p[e].i;
            int64_t dt = p[e].dt, dm = (int64_t)p[e].dm;
            size_t mi = m[i], c = withc ? cc[e] : 2 * (mj - mi) + cj; /* dp_pair_charge */

            if (c > B || mj - mi > window)
                continue;
            for (int k = 0; k < K; k++) {
                int64_t v;

                if (at_last || (peak && (int64_t)c > dm + hj[k]))
                    v = D[k] * dt + (int64_t)c; /* the block's own peak passes the rest's */
                else
                    v = D[k] * dt + dm + hj[k];
                if (v < h[k][i]) {
                    h[k][i] = v;
                    to[k][i] = j;
                    pe[k][i] = e;
                }
            }
        }
    }
}

/* A pass's lanes, split between the jobs: job g takes lanes at[g] .. at[g + 1] - 1. */
struct lag_work {
    const struct dp_pairs *pc;
    const struct lsets *ls;
    size_t B, window;
    const int64_t *room, *D;
    bool peak;
    int64_t *const *h;
    const struct lag_next *nx;
    int at[3];
};

/* lag_scan for n lanes from l, each case with its constants */
#define LAG_SCAN(n, withc)                                                                  \
    lag_scan(w->pc, w->ls, w->B, w->window, w->room, w->D + l, n, withc, w->peak, w->h + l, \
             w->nx->to + l, w->nx->pe + l)

static void lag_job(void *ctx, int g)
{
    const struct lag_work *w = ctx;
    int l = w->at[g], n = w->at[g + 1] - l;
    bool withc = w->pc->c != NULL;

    _Static_assert(LAG_LANES == 3, "a job takes one to three lanes");
    if (n == 1 && withc)
        LAG_SCAN(1, true);
    else if (n == 1)
        LAG_SCAN(1, false);
    else if (n == 2 && withc)
        LAG_SCAN(2, true);
    else if (n == 2)
        LAG_SCAN(2, false);
    else if (n == 3 && withc)
        LAG_SCAN(3, true);
    else if (n == 3)
        LAG_SCAN(3, false);
}

#undef LAG_SCAN

/* The nx->k lanes' H_D (peak: P_D) into h[lane] and their least chains from ∅ into
 * r[lane]: one job, or two with the lanes split, on cores of their own. */
static void lag_pass(const struct dp_pairs *pc, const struct lsets *ls, size_t B, size_t window,
                     const int64_t *room, const int64_t *D, bool peak, int64_t *const *h,
                     const struct lag_next *nx, struct lag_path *r)
{
    int32_t last = ls->n - 1;
    int K = nx->k, jobs = K > 1 && core_par_threads_with(pc->al) > 1 ? 2 : 1;
    struct lag_work w = {pc, ls, B, window, room, D, peak, h, nx, {0, K, K}};

    if (jobs == 2)
        w.at[1] = (K + 1) / 2;
    core_par_run(jobs, jobs, lag_job, &w);
    for (int k = 0; k < K; k++) {
        size_t m = 0;

        r[k] = (struct lag_path){0, 0, true};
        for (int32_t i = 0, to; i != last && (to = nx->to[k][i]) >= 0; i = to) {
            size_t e = nx->pe[k][i], c = dp_pair_charge(pc, ls, e, to);

            r[k].t += pc->p[e].dt;
            r[k].s += (int64_t)(to == last ? c : pc->p[e].dm);
            r[k].fits = r[k].fits && m + c <= B;
            m += pc->p[e].dm;
        }
    }
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

/* Lane k's least paths of the last pass (nx) as a guide: the sets from the last down,
 * each after the set its path goes on to. */
static void guide_add(struct dp_guides *g, const struct dp_pairs *pc, const struct lsets *ls,
                      const struct lag_next *nx, int k)
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
        size_t e = nx->pe[k][i], c;
        int32_t to = nx->to[k][i], dt;

        sdt[i] = INT32_MAX;
        need[i] = SIZE_MAX;
        if (to < 0 || sdt[to] == INT32_MAX)
            continue;
        dt = pc->p[e].dt;
        c = dp_pair_charge(pc, ls, e, to);
        if ((int64_t)sdt[to] + dt >= INT32_MAX)
            continue;
        sdt[i] = sdt[to] + dt;
        need[i] = to == last ? c : pc->p[e].dm + need[to] > c ? pc->p[e].dm + need[to] : c;
    }
}

/* What a pass of k lanes over n sets writes, besides the rows: false when out of memory. */
static bool lag_alloc(const remat_allocator *al, struct lag_next *nx, size_t n, int k)
{
    bool ok = true;

    memset(nx, 0, sizeof *nx);
    nx->k = k;
    for (int e = 0; e < k; e++) {
        nx->to[e] = core_alloc(al, n * sizeof *nx->to[e]);
        nx->pe[e] = core_alloc(al, n * sizeof *nx->pe[e]);
        ok = ok && nx->to[e] && nx->pe[e];
    }
    return ok;
}

static void lag_release(const remat_allocator *al, struct lag_next *nx, size_t n)
{
    for (int e = 0; e < LAG_LANES; e++) {
        core_free(al, nx->to[e], sizeof *nx->to[e] * n);
        core_free(al, nx->pe[e], sizeof *nx->pe[e] * n);
    }
}

/* dp_lagrange's search: what each pass reads and writes, the best bound at ∅ so far
 * (its D into *d, its H into h) and the passes made. */
struct lag_search {
    const struct dp_pairs *pc;
    const struct lsets *ls;
    size_t budget, window;
    const int64_t *room;
    int64_t *row[2], *h, *d, best;
    int32_t *ub;
    struct dp_guides *g;
    struct lag_next nx;
    int passes;
};

/* One pass at the k (1 or 2) D of D[]: each one's least path into r[], its bound at ∅
 * kept when the best so far, its path as a guide and as ub where it fits; ok[] false
 * where no chain goes on from ∅. */
static void lag_try(struct lag_search *w, const int64_t *D, int k, struct lag_path *r, bool *ok)
{
    w->nx.k = k;
    lag_pass(w->pc, w->ls, w->budget, w->window, w->room, D, false, w->row, &w->nx, r);
    w->passes++;
    for (int e = 0; e < k; e++) {
        int64_t num, v;

        if (r[e].fits && r[e].t < *w->ub)
            *w->ub = (int32_t)r[e].t;
        guide_add(w->g, w->pc, w->ls, &w->nx, e);
        if (!(ok[e] = w->row[e][0] != INT64_MAX))
            continue; /* no chain (room[0] >= 0 says there is one: not met) */
        num = w->row[e][0] - (int64_t)w->budget;
        v = num > 0 ? (num + D[e] - 1) / D[e] : 0;
        if (v > w->best) {
            w->best = v;
            *w->d = D[e];
            memcpy(w->h, w->row[e], sizeof *w->h * (size_t)w->ls->n);
        }
    }
}

/*
 * The bound at ∅ for D is min over paths p of t_p + (s_p - B)/D: a path with s_p > B
 * gives less as D grows, one with s_p <= B more, so the bound is largest where the
 * least path's s crosses B, where two paths a (s > B) and b (s <= B) meet: D = (s_a -
 * s_b) / (t_b - t_a). The search (after Handler and Zang, 1980) starts from the least-time
 * path (the largest D) and the least-bytes one (D = 1), in one pass, and tries the two
 * whole D around the meeting of the two paths known on either side, both in one pass; a
 * path below both there takes the place of one (the first D's, where both are). When
 * none is below at either, the bound is largest between those two D (it is below a's
 * line on one side and b's on the other), so the better of them is the best whole D. At
 * most LAG_STEPS passes: GPT-2-1000 at the budget halfway to `none`'s peak 6 where bisection
 * on log D took 12, its bound at ∅ 45,972 units against 45,970.
 */
bool dp_lagrange(const struct dp_pairs *pc, const struct lsets *ls, size_t budget,
                 size_t window, const int64_t *room, int32_t n_t, int64_t *h, int64_t *d,
                 int32_t *lb0, int32_t *ub, struct dp_guides *g)
{
    size_t n = (size_t)ls->n;
    struct lag_search w = {pc, ls, budget, window, room, {NULL, NULL}, h, d, -1, ub, g,
                           {{NULL}, {NULL}, 0}, 0};
    struct lag_path a, b, r[2];
    int64_t da, db, D[2];
    bool ok, moved = true, fine[2];

    *d = 0;
    *lb0 = 0;
    if (!pc->p || budget > (size_t)DP_LAG_MAX || ls->m[ls->n - 1] > (size_t)DP_LAG_MAX ||
        n_t <= 0 || room[0] < 0 || DP_LAG_MAX / n_t < 3)
        return true;
    w.row[0] = core_alloc(pc->al, n * sizeof *w.row[0]);
    w.row[1] = core_alloc(pc->al, n * sizeof *w.row[1]);
    if (!(ok = lag_alloc(pc->al, &w.nx, n, 2) && w.row[0] && w.row[1]))
        goto out;
    da = DP_LAG_MAX / n_t - 1;
    db = 1;
    D[0] = da;
    D[1] = db;
    lag_try(&w, D, 2, r, fine);
    a = r[0];
    b = r[1];
    if (!fine[0] || a.s <= (int64_t)budget || !fine[1] || b.s > (int64_t)budget)
        goto done; /* the least-time path fits, or no path does */
    while (moved && b.t > a.t) {
        int64_t at = (int64_t)floor((double)(a.s - b.s) / (double)(b.t - a.t));
        int k = 0;

        moved = false;
        for (int64_t x = at; x <= at + 1; x++)
            if (x > db && x < da) /* else tried: its least path is b or a */
                D[k++] = x;
        if (k == 0 || w.passes == LAG_STEPS)
            goto done;
        lag_try(&w, D, k, r, fine);
        for (int e = 0; e < k && !moved; e++) {
            if (!fine[e])
                goto done;
            if (D[e] * r[e].t + r[e].s < D[e] * a.t + a.s &&
                D[e] * r[e].t + r[e].s < D[e] * b.t + b.s) {
                moved = true; /* below both: it takes the place of one */
                if (r[e].s > (int64_t)budget) {
                    a = r[e];
                    da = D[e];
                } else {
                    b = r[e];
                    db = D[e];
                }
            }
        }
    }
done:
    *lb0 = w.best > INT32_MAX ? INT32_MAX : (int32_t)(w.best < 0 ? 0 : w.best);
out:
    lag_release(pc->al, &w.nx, n);
    core_free(pc->al, w.row[0], n * sizeof *w.row[0]);
    core_free(pc->al, w.row[1], n * sizeof *w.row[1]);
    return ok;
}

bool dp_lagrange_peaks(const struct dp_pairs *pc, const struct lsets *ls, size_t budget,
                       size_t window, const int64_t *room, int32_t n_t, int k, int64_t *d,
                       int64_t *const *h, int32_t *lb0, int32_t *ub, struct dp_guides *g)
{
    size_t n = (size_t)ls->n;
    struct lag_next nx;
    struct lag_path r[LAG_LANES];
    int64_t dmax = DP_LAG_MAX / (n_t > 0 ? n_t : 1) - 1, num;
    bool ok;

    REMAT_ASSERT(k >= 1 && k <= LAG_LANES && d[0] > 0);
    if (!(ok = lag_alloc(pc->al, &nx, n, k)))
        goto out;
    for (int e = 0; e < k; e++)
        d[e] = d[e] > dmax ? dmax : d[e];
    lag_pass(pc, ls, budget, window, room, d, true, h, &nx, r);
    for (int e = 0; e < k; e++) {
        if (r[e].fits && r[e].t < *ub)
            *ub = (int32_t)r[e].t;
        guide_add(g, pc, ls, &nx, e);
    }
    num = h[0][0] - (int64_t)budget;
    if (h[0][0] != INT64_MAX && num > 0 && (num + d[0] - 1) / d[0] > *lb0)
        *lb0 = (num + d[0] - 1) / d[0] > INT32_MAX ? INT32_MAX : (int32_t)((num + d[0] - 1) / d[0]);
out:
    lag_release(pc->al, &nx, n);
    return ok;
}
