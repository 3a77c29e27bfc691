/*
 * test_dp_lagrange.c - the Lagrangian bound's search for its multiplier (dp_lagrange,
 * dp_pairs.c) against a brute force that never looks at a multiplier.
 *
 * The answer: every path from ∅ to V over the kept pairs that the bound's passes use
 * (those within the budget and window, into sets from which V can still be reached), as
 * the Pareto frontier of (t, s) per set, s the bytes the bound counts (Σ dm, then the
 * last block's charge), built set by set from V. Over the paths of ∅, the bound at a
 * whole D is ceil((min_p (D t_p + s_p) - B) / D) (0 when not positive); it grows with D
 * up to where the least path's s crosses B and falls after, so its best whole D is next
 * to a meeting of two paths (or an end of the range): the brute force tries them all.
 * dp_lagrange must return that best bound, its D's H at ∅ must be the least D t + s, and
 * the bound must not pass the least t of a path with s <= B (every chain within the
 * budget is one). On random DAGs (both families, three budgets) and GPT-2 of 24 layers.
 *
 * Seed: REMAT_SEED (printed).
 */
#include "plan_util.h"
#include "plan/dp_run.h"

#include <math.h>
#include <string.h>

struct ts {
    int64_t t, s;
};

struct lag_counts {
    int cases, bounded, met; /* met: the best D strictly inside the range */
};

/* f[0 .. *n) Pareto-pruned after adding (t, s) (kept t ascending, s descending). */
static void pareto_add(struct ts **f, int32_t *n, int32_t *cap, struct ts x)
{
    int32_t k = 0, w = 0;

    for (k = 0; k < *n; k++)
        if ((*f)[k].t <= x.t && (*f)[k].s <= x.s)
            return; /* dominated */
    for (k = 0; k < *n; k++)
        if (!(x.t <= (*f)[k].t && x.s <= (*f)[k].s))
            (*f)[w++] = (*f)[k];
    *n = w;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *f = realloc(*f, sizeof **f * (size_t)*cap);
        REMAT_ASSERT_TEST(*f);
    }
    for (k = *n; k > 0 && (*f)[k - 1].t > x.t; k--)
        (*f)[k] = (*f)[k - 1];
    (*f)[k] = x;
    (*n)++;
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
    int64_t *room = NULL, *h = NULL, D = 0, dmax, best = 0, least, at_d, fit_t = INT64_MAX;
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
    f = calloc(n, sizeof *f);
    n_f = calloc(n, sizeof *n_f);
    cap_f = calloc(n, sizeof *cap_f);
    REMAT_ASSERT_TEST(lb && room && h && f && n_f && cap_f);
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
    for (int32_t r = 0; r < n_f[0]; r++)
        if (f[0][r].s <= (int64_t)budget && f[0][r].t < fit_t)
            fit_t = f[0][r].t;
    CHECK(lb0 == best, "graph %d %s B=%zu: bound at the empty set %d, the brute force's best %lld",
          gi, what, budget, lb0, (long long)best);
    CHECK(lb0 <= fit_t, "graph %d %s B=%zu: bound %d above a path within the budget (t %lld)",
          gi, what, budget, lb0, (long long)fit_t);
    if (D > 0) {
        k->bounded++;
        k->met += D > 1 && D < dmax;
        at_d = bound_at(f[0], n_f[0], D, budget, &least);
        CHECK(h[0] == least && at_d == lb0, "graph %d %s B=%zu: at D = %lld, H(empty) %lld and "
              "bound %d; the paths' least %lld and bound %lld", gi, what, budget, (long long)D,
              (long long)h[0], lb0, (long long)least, (long long)at_d);
    }
out:
    for (size_t i = 0; i < n; i++)
        free(f[i]);
    free(f);
    free(n_f);
    free(cap_f);
    free(lb);
    free(room);
    free(h);
    dp_fini(&p);
}

static void test_lagrange_random(void)
{
    static const int div[] = {0, 10, 3};
    struct lag_counts small = {0}, narrow = {0};

    each_random_family_budget(17, 1500, div, 3, check_case, &small, &narrow);
    printf("  up to 12 nodes: %d bounds (%d with a multiplier, %d inside its range); 65..184 "
           "nodes: %d (%d, %d)\n", small.cases, small.bounded, small.met, narrow.cases,
           narrow.bounded, narrow.met);
    CHECK(small.met > 0 && narrow.met > 0, "no bound met two paths inside the range");
}

static void test_lagrange_gpt2(void)
{
    struct lag_counts k = {0};

    each_gpt2_budget(check_case, &k);
    printf("  %d bounds (%d with a multiplier, %d inside its range)\n", k.cases, k.bounded,
           k.met);
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
