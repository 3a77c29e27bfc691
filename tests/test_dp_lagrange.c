/*
 * test_dp_lagrange.c - the Lagrangian bound (dp_lagrange, dp_pairs.c): its search for the
 * multiplier against a brute force that never looks at a multiplier, and the states'
 * bound at the multiplier found against a forward enumeration of every chain.
 *
 * The search: every path from ∅ to V over the kept pairs that the bound's passes use
 * (those within the budget and window, into sets from which V can still be reached), as
 * the Pareto frontier of (t, s) per set, s the bytes the sum bound counts (Σ dm, then the
 * last block's charge), built set by set from V. Over the paths of ∅, the sum bound at a
 * whole D is ceil((min_p (D t_p + s_p) - B) / D) (0 when not positive); it grows with D
 * up to where the least path's s crosses B and falls after, so its best whole D is next
 * to a meeting of two paths (or an end of the range): the brute force tries them all,
 * and dp_lagrange's D must reach that best.
 *
 * The states' bound at that D (the peak bound P_D, dp_pairs.h) against a forward
 * enumeration from a set: a chain's value is max over its blocks k of D T_k + S_k + c_k
 * (T_k the overhead up to and with block k, S_k the growth before it), each set's labels
 * (D T + S, value) kept Pareto-minimal (the later blocks' values need no more of a chain
 * so far), so H_D(L) must equal the least value at V, from ∅ and from a sample of sets;
 * the same for the two further D that dp_lagrange_peaks computes in the same pass
 * (dp_least.c's D + D/20 and D - D/5), from ∅ and the middle set. dp_lagrange's own row
 * is the sum bound at its D: its least path's D t + s.
 * dp_lagrange's bound at ∅ must be the larger of the two bounds, and at most the least
 * overhead of a chain within the budget (by a forward enumeration of (t, m) that drops a
 * block breaking the budget). On random DAGs (both families, three budgets) and GPT-2 of
 * 24 layers; the peak bound must pass the sum bound somewhere.
 *
 * Seed: REMAT_SEED (printed).
 */
#include "plan_util.h"
#include "plan/dp_run.h"

#include <math.h>
#include <string.h>

/* A point of a Pareto frontier: a path's (t, s) from a set to V, or a forward label (see
 * forward_least). */
struct ts {
    int64_t t, s;
};

struct lag_counts {
    int cases, bounded, met; /* met: the best D strictly inside the range */
    int higher;              /* the peak bound above the sum bound at ∅ */
};

/* l[0 .. *n) Pareto-minimal after adding x (t ascending, s descending). */
static void pareto_add(struct ts **l, int32_t *n, int32_t *cap, struct ts x)
{
    int32_t lo = 0, hi = *n, end;

    while (lo < hi) { /* the first label with u > x.t, or u == x.t and v >= x.s */
        int32_t mid = lo + (hi - lo) / 2;

        if ((*l)[mid].t < x.t || ((*l)[mid].t == x.t && (*l)[mid].s < x.s))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && (*l)[lo - 1].s <= x.s)
        return; /* the label before it has u <= x.t and the least v of those */
    for (end = lo; end < *n && (*l)[end].s >= x.s; end++)
        ; /* u >= x.t and v >= x.s: dominated by x */
    if (end == lo && *n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *l = realloc(*l, sizeof **l * (size_t)*cap);
        REMAT_ASSERT_TEST(*l);
    }
    memmove(*l + lo + 1, *l + end, sizeof **l * (size_t)(*n - end));
    (*l)[lo] = x;
    *n += 1 - (end - lo);
}

/*
 * From set j0 forward over the usable pairs (as the passes filter them): with D > 0, the
 * least peak value D T_k + S_k + c_k (largest over a chain's blocks) of a chain to V, by
 * labels (t, s) = (D T + S, the largest value so far): D T + S is all that the later
 * blocks' values need of a chain so far (a block adds D dt + dm to it, and its value is
 * D T + S + D dt + c). With D = 0, the least overhead of a chain whose every block fits,
 * S_k + c_k <= B, by labels (t, m). INT64_MAX when no chain reaches V.
 */
static int64_t forward_least(const struct dp *p, const struct lsets *ls, size_t budget,
                             const int64_t *room, int64_t D, int32_t j0)
{
    int32_t n = ls->n, last = n - 1;
    struct ts **l = calloc((size_t)n, sizeof *l);
    int32_t *nl = calloc((size_t)n, sizeof *nl), *cap = calloc((size_t)n, sizeof *cap);
    int64_t best = INT64_MAX;

    REMAT_ASSERT_TEST(l && nl && cap);
    pareto_add(&l[j0], &nl[j0], &cap[j0], (struct ts){0, 0});
    for (int32_t j = j0 + 1; j < n; j++) {
        if (room[j] < 0)
            continue;
        for (size_t e = p->pc.at[j]; e < p->pc.end[j]; e++) {
            const struct dp_pair *q = &p->pc.p[e];
            size_t c = dp_pair_charge(&p->pc, ls, e, j);

            if (q->i < j0 || c > budget || ls->m[j] - ls->m[q->i] > window(p))
                continue;
            for (int32_t r = 0; r < nl[q->i]; r++) {
                struct ts a = l[q->i][r], x;

                if (D > 0) {
                    int64_t v = a.t + D * q->dt + (int64_t)c;

                    x = (struct ts){a.t + D * q->dt + (int64_t)q->dm, v > a.s ? v : a.s};
                } else if (a.s + (int64_t)c > (int64_t)budget) {
                    continue; /* the block breaks the budget */
                } else {
                    x = (struct ts){a.t + q->dt, a.s + (int64_t)q->dm};
                }
                pareto_add(&l[j], &nl[j], &cap[j], x);
            }
        }
    }
    for (int32_t r = 0; r < nl[last]; r++) {
        int64_t v = D > 0 ? l[last][r].s : l[last][r].t;

        best = v < best ? v : best;
    }
    for (int32_t j = 0; j < n; j++)
        free(l[j]);
    free(l);
    free(nl);
    free(cap);
    return best;
}

/* The bound at D over the paths p[0 .. n). */
static int64_t bound_at(const struct ts *p, int32_t n, int64_t D, size_t B, int64_t *least)
{
    int64_t lo = INT64_MAX, num;

    for (int32_t k = 0; k < n; k++)
        lo = D * p[k].t + p[k].s < lo ? D * p[k].t + p[k].s : lo;
    *least = lo;
    num = lo - (int64_t)B;
    return num > 0 ? (num + D - 1) / D : 0;
}

static void check_case(const struct dag *d, const struct lsets *ls, size_t budget,
                       const char *what, int gi, void *ctx)
{
    struct lag_counts *k = ctx;
    struct dp p;
    int32_t last = ls->n - 1, *lb = NULL, *n_f = NULL, *cap_f = NULL, lb0 = 0, ub = INT32_MAX;
    int64_t *room = NULL, *h = NULL, *hx = NULL, D = 0, dmax, best = 0, least, at_d;
    int64_t fit_t = INT64_MAX;
    struct ts **f = NULL;
    size_t n = (size_t)ls->n;

    REMAT_ASSERT_TEST(dp_init(&p, d, ls, budget) == REMAT_OK);
    CHECK_OK(dp_run(&p, DP_MIN_M, NULL, 0));
    if (p.fr_n[last] == 0) {
        dp_fini(&p);
        return;
    }
    lb = calloc(n, sizeof *lb);
    room = calloc(n, sizeof *room);
    h = calloc(n, sizeof *h);
    hx = calloc(2 * n, sizeof *hx);
    f = calloc(n, sizeof *f);
    n_f = calloc(n, sizeof *n_f);
    cap_f = calloc(n, sizeof *cap_f);
    REMAT_ASSERT_TEST(lb && room && h && hx && f && n_f && cap_f);
    dp_bounds(&p, lb, room);
    p.room = room;
    if (!dp_keep_pairs(&p) || !p.pc.p)
        goto out; /* too many pairs to keep: no bound */
    REMAT_ASSERT_TEST(dp_lagrange(&p.pc, ls, budget, window(&p), room, p.n_t, h, &D, &lb0, &ub,
                                  NULL));
    /* the paths, from V down */
    for (int32_t j = last; j > 0; j--) {
        if (room[j] < 0 || (j != last && n_f[j] == 0))
            continue;
        for (size_t e = p.pc.at[j]; e < p.pc.end[j]; e++) {
            const struct dp_pair *q = &p.pc.p[e];
            size_t c = dp_pair_charge(&p.pc, ls, e, j);

            if (c > budget || ls->m[j] - ls->m[q->i] > window(&p))
                continue;
            if (j == last)
                pareto_add(&f[q->i], &n_f[q->i], &cap_f[q->i], (struct ts){q->dt, (int64_t)c});
            else
                for (int32_t r = 0; r < n_f[j]; r++)
                    pareto_add(&f[q->i], &n_f[q->i], &cap_f[q->i],
                               (struct ts){q->dt + f[j][r].t, (int64_t)q->dm + f[j][r].s});
        }
    }
    k->cases++;
    CHECK_OR(n_f[0] > 0, goto out, "graph %d %s B=%zu: no path from the empty set", gi, what,
             budget);
    dmax = DP_LAG_MAX / p.n_t - 1;
    best = bound_at(f[0], n_f[0], 1, budget, &least); /* the ends, then every meeting */
    at_d = bound_at(f[0], n_f[0], dmax, budget, &least);
    best = at_d > best ? at_d : best;
    for (int32_t a = 0; a < n_f[0]; a++)
        for (int32_t b = 0; b < n_f[0]; b++) {
            const struct ts *pa = &f[0][a], *pb = &f[0][b];
            int64_t at;

            if (!(pa->s > (int64_t)budget && pb->s <= (int64_t)budget && pb->t > pa->t))
                continue;
            at = (int64_t)floor((double)(pa->s - pb->s) / (double)(pb->t - pa->t));
            for (int64_t x = at; x <= at + 1; x++)
                if (x >= 1 && x <= dmax) {
                    int64_t v = bound_at(f[0], n_f[0], x, budget, &least);

                    best = v > best ? v : best;
                }
        }
    fit_t = forward_least(&p, ls, budget, room, 0, 0);
    if (D > 0) {
        int64_t at_h = bound_at(f[0], n_f[0], D, budget, &least), pk, num;
        /* the peak bound at D and, in the same pass, at two further D (dp_least.c's) */
        int64_t dd[3] = {D, D + D / 20, D - D / 5}, *rows[3] = {h, hx, hx + n};
        int kk = dd[2] > 0 ? 3 : 2, lb_h = lb0;

        CHECK(h[0] == least && lb_h == at_h, "graph %d %s B=%zu: at D = %lld the sum bound "
              "H(empty) %lld and its bound %d; the paths' least %lld, bound %lld", gi, what,
              budget, (long long)D, (long long)h[0], lb_h, (long long)least, (long long)at_h);
        REMAT_ASSERT_TEST(dp_lagrange_peaks(&p.pc, ls, budget, window(&p), room, p.n_t, kk, dd,
                                            rows, &lb0, &ub, NULL));
        CHECK(dd[0] == D, "graph %d %s B=%zu: D moved from %lld to %lld", gi, what, budget,
              (long long)D, (long long)dd[0]);
        k->bounded++;
        k->met += D > 1 && D < dmax;
        CHECK(at_h == best, "graph %d %s B=%zu: the sum bound at D = %lld is %lld, the brute "
              "force's best %lld", gi, what, budget, (long long)D, (long long)at_h,
              (long long)best);
        pk = forward_least(&p, ls, budget, room, D, 0);
        CHECK(h[0] == pk && pk >= least, "graph %d %s B=%zu: at D = %lld, H(empty) %lld; the "
              "chains' least peak value %lld, least sum %lld", gi, what, budget, (long long)D,
              (long long)h[0], (long long)pk, (long long)least);
        num = pk - (int64_t)budget;
        at_d = num > 0 ? (num + D - 1) / D : 0;
        best = at_d > best ? at_d : best;
        k->higher += at_d > at_h;
        for (int32_t q = 1; q < 4; q++) { /* and from a sample of sets */
            int32_t j = (int32_t)((int64_t)last * q / 4);
            int64_t v = room[j] < 0 ? INT64_MAX : forward_least(&p, ls, budget, room, D, j);

            CHECK(room[j] < 0 || h[j] == v, "graph %d %s B=%zu: at D = %lld, H(L_%d) %lld; the "
                  "chains' least peak value %lld", gi, what, budget, (long long)D, j,
                  (long long)h[j], (long long)v);
        }
        for (int e = 1; e < kk; e++) /* the further lanes, from ∅ and the middle set */
            for (int32_t q = 0; q < 4; q += 2) {
                int32_t j = (int32_t)((int64_t)last * q / 4);
                int64_t v = room[j] < 0 ? INT64_MAX
                                        : forward_least(&p, ls, budget, room, dd[e], j);

                CHECK(room[j] < 0 || rows[e][j] == v, "graph %d %s B=%zu: lane %d at D = %lld, "
                      "P(L_%d) %lld; the chains' least peak value %lld", gi, what, budget, e,
                      (long long)dd[e], j, (long long)rows[e][j], (long long)v);
            }
    }
    CHECK(lb0 == best, "graph %d %s B=%zu: bound at the empty set %d, the brute force's best %lld",
          gi, what, budget, lb0, (long long)best);
    CHECK(fit_t == INT64_MAX || lb0 <= fit_t, "graph %d %s B=%zu: bound %d above a chain "
          "within the budget (t %lld)", gi, what, budget, lb0, (long long)fit_t);
out:
    for (size_t i = 0; i < n; i++)
        free(f[i]);
    free(f);
    free(n_f);
    free(cap_f);
    free(lb);
    free(room);
    free(h);
    free(hx);
    dp_fini(&p);
}

static void test_lagrange_random(void)
{
    static const int div[] = {0, 10, 3};
    struct lag_counts small = {0}, narrow = {0};

    each_random_family_budget(17, 1500, div, 3, check_case, &small, &narrow);
    printf("  up to 12 nodes: %d bounds (%d with a multiplier, %d inside its range, %d raised "
           "by the peak); 65..184 nodes: %d (%d, %d, %d)\n", small.cases, small.bounded,
           small.met, small.higher, narrow.cases, narrow.bounded, narrow.met, narrow.higher);
    CHECK(small.met > 0 && narrow.met > 0, "no bound met two paths inside the range");
    CHECK(small.higher + narrow.higher > 0, "the peak bound never passed the sum bound");
}

static void test_lagrange_gpt2(void)
{
    struct lag_counts k = {0};

    each_gpt2_budget(check_case, &k);
    printf("  %d bounds (%d with a multiplier, %d inside its range, %d raised by the peak)\n",
           k.cases, k.bounded, k.met, k.higher);
    CHECK(k.met == k.cases, "GPT-2: a bound at an end of the multipliers' range");
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20261202u;
    RUN_TIMED(test_lagrange_random);
    RUN_TIMED(test_lagrange_gpt2);
    return harness_end();
}
