/*
 * dp_coarse.c - the coarse sets of a family and the fine pairs' reach (dp_coarse.h).
 */
#include "plan/dp_coarse.h"

#include <math.h>

int32_t dp_coarse_runs(int32_t n)
{
    double k = cbrt(2.0 * (double)n * (double)n);

    if (k > n / 2.0)
        k = n / 2.0;
    return k < 1 ? 1 : (int32_t)k;
}

/* M(∂(L_i)): what a chain keeps at L_i. */
static size_t boundary_bytes(const struct dag *d, const struct lsets *ls, int32_t i)
{
    size_t m = 0;

    for (int32_t q = ls->bd_at[i]; q < ls->bd_at[i + 1]; q++)
        m += d->m[ls->bd[q]];
    return m;
}

bool dp_coarse_init(struct dp_coarse *h, const struct dag *d, const struct lsets *ls,
                    int32_t k)
{
    int32_t n = ls->n, run = n / (k > 0 ? k : 1);

    h->al = d->al;
    h->n = n;
    h->k = 0;
    h->idx = core_calloc(h->al, (size_t)n, sizeof *h->idx);
    h->near = core_calloc(h->al, (size_t)n, sizeof *h->near);
    h->is = core_calloc(h->al, (size_t)n, sizeof *h->is);
    if (!h->idx || !h->near || !h->is) {
        dp_coarse_fini(h);
        return false;
    }
    run = run < 2 ? 2 : run;
    h->is[0] = h->is[n - 1] = 1;
    /* in each run of sets 1 .. n - 2, the one of least boundary bytes (the first on a
     * tie) */
    for (int32_t a = 1; a < n - 1; a += run) {
        int32_t best = a, end = a + run < n - 1 ? a + run : n - 1;
        size_t bb = boundary_bytes(d, ls, a);

        for (int32_t i = a + 1; i < end; i++) {
            size_t b = boundary_bytes(d, ls, i);

            if (b < bb) {
                bb = b;
                best = i;
            }
        }
        h->is[best] = 1;
    }
    /* near[j]: the (DP_COARSE_REACH + 1)-th coarse set before j, so that at most
     * DP_COARSE_REACH lie strictly between a fine pair's ends */
    for (int32_t j = 0; j < n; j++) {
        h->near[j] = h->k > DP_COARSE_REACH ? h->idx[h->k - 1 - DP_COARSE_REACH] : 0;
        if (h->is[j])
            h->idx[h->k++] = j;
    }
    return true;
}

void dp_coarse_fini(struct dp_coarse *h)
{
    core_free(h->al, h->idx, sizeof *h->idx * (size_t)h->n);
    core_free(h->al, h->near, sizeof *h->near * (size_t)h->n);
    core_free(h->al, h->is, sizeof *h->is * (size_t)h->n);
    h->idx = h->near = NULL;
    h->is = NULL;
}

int32_t dp_coarse_from(const struct dp_coarse *h, int32_t i)
{
    int32_t lo = 0, hi = h->k;

    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;

        if (h->idx[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
