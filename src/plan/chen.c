/*
 * chen.c - Chen et al. 2016 ("Training deep nets with sublinear memory cost") over
 * single-node cuts: the lower sets (ancestor closures) whose boundary is one node. The
 * chain keeps those cuts; each segment between them is recomputed in the backward.
 *
 * √n: the candidates, by memory, cut into ⌊√#⌋ segments of equal memory. Greedy: walk
 * the candidates and cut each time the segment's memory passes a threshold b; b is
 * searched over a geometric grid (the least overhead whose simulated peak fits the
 * budget; with no budget, the least peak).
 */
#include "plan/lowerset.h"
#include "plan/planners.h"

#include <math.h>
#include <string.h>

/* Candidates: indices of approximate-family sets with a one-node boundary, nested
 * (each contains the previous), by size. */
static int32_t candidates(const struct lsets *ls, int32_t *cand)
{
    int32_t n = 0;

    for (int32_t i = 1; i + 1 < ls->n; i++) {
        if (ls->bd_at[i + 1] - ls->bd_at[i] != 1)
            continue;
        if (n > 0 && !lsets_subset(ls, cand[n - 1], i))
            continue; /* a side branch's cut: not on the main chain */
        cand[n++] = i;
    }
    return n;
}

/* The chain that cuts at the chosen candidates (and ends at V). */
static remat_status lower_cuts(const remat_tgraph *tg, const struct dag *d,
                               const struct lsets *ls, const int32_t *cuts, int32_t n_cuts,
                               remat_schedule **out, int32_t *n_blocks)
{
    const remat_allocator *a = d->al;
    struct chain c = {0, NULL, NULL};
    remat_status st;

    c.block = core_calloc(a, (size_t)d->n + 1, sizeof *c.block);
    c.kept = core_calloc(a, (size_t)d->n + 1, sizeof *c.kept);
    if (!c.block || !c.kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    for (int32_t k = 0; k <= n_cuts; k++) {
        int32_t j = k < n_cuts ? cuts[k] : ls->n - 1;

        for (int32_t w = 0; w < lsets_end(ls, j); w++)
            for (uint64_t x = lsets_word(ls, j, w); x; x &= x - 1) {
                int32_t v = 64 * w + __builtin_ctzll(x);

                if (c.block[v] == 0)
                    c.block[v] = k + 1;
            }
        for (int32_t q = ls->bd_at[j]; q < ls->bd_at[j + 1]; q++)
            if (c.block[ls->bd[q]] == k + 1)
                c.kept[ls->bd[q]] = true;
    }
    c.n_blocks = n_cuts + 1;
    *n_blocks = c.n_blocks;
    st = chain_lower(tg, d, &c, out);
out:
    core_free(a, c.block, sizeof *c.block * ((size_t)d->n + 1));
    core_free(a, c.kept, sizeof *c.kept * ((size_t)d->n + 1));
    return st;
}

/* Greedy cuts for threshold b: cut at a candidate when the memory since the last cut
 * passes b. */
static int32_t greedy_cuts(const struct lsets *ls, const int32_t *cand, int32_t n, double b,
                           int32_t *cuts)
{
    int32_t k = 0;
    size_t last = 0;

    for (int32_t i = 0; i < n; i++)
        if ((double)(ls->m[cand[i]] - last) > b) {
            cuts[k++] = cand[i];
            last = ls->m[cand[i]];
        }
    return k;
}

static int32_t sqrtn_cuts(const struct lsets *ls, const int32_t *cand, int32_t n, int32_t *cuts)
{
    int32_t segs = (int32_t)floor(sqrt((double)n)), k = 0, i = 0;
    double total = (double)ls->m[ls->n - 1];

    for (int32_t s = 1; s < segs; s++) {
        double target = total * s / segs;

        while (i < n && (double)ls->m[cand[i]] < target)
            i++;
        if (i == n)
            break;
        /* the candidate nearest the target, after the previous cut */
        if (i > 0 && (k == 0 || cand[i - 1] != cuts[k - 1]) &&
            target - (double)ls->m[cand[i - 1]] < (double)ls->m[cand[i]] - target)
            cuts[k++] = cand[i - 1];
        else
            cuts[k++] = cand[i++];
    }
    return k;
}

remat_status plan_chen(const remat_tgraph *tg, const struct dag *d, bool greedy, size_t budget,
                       remat_schedule **out, remat_plan_info *info)
{
    const remat_allocator *a = d->al;
    struct lsets ls;
    int32_t *cand = NULL, *cuts = NULL, n_cand, n_cuts, n_blocks = 0;
    remat_status st;

    *out = NULL;
    if ((st = lsets_build(d, LS_APPROX, NULL, 0, &ls)))
        return st;
    info->n_lower_sets = ls.n;
    cand = core_calloc(a, (size_t)ls.n + 1, sizeof *cand);
    cuts = core_calloc(a, (size_t)ls.n + 1, sizeof *cuts);
    if (!cand || !cuts) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    n_cand = candidates(&ls, cand);
    if (!greedy) {
        n_cuts = sqrtn_cuts(&ls, cand, n_cand, cuts);
        st = lower_cuts(tg, d, &ls, cuts, n_cuts, out, &n_blocks);
        goto out;
    }
    {
        /* Thresholds from the largest node to the whole graph, 48 steps per decade. */
        size_t best_peak = SIZE_MAX, lo = 1;
        double best_ovh = INFINITY, hi = (double)ls.m[ls.n - 1];
        bool best_fits = false;

        for (int32_t v = 0; v < d->n; v++)
            lo = d->m[v] > lo ? d->m[v] : lo;
        for (double b = (double)lo; b <= hi * 1.0001; b *= 1.05) {
            remat_schedule *s = NULL;
            remat_sim_result r;
            bool fits, better;
            int32_t nb;

            n_cuts = greedy_cuts(&ls, cand, n_cand, b, cuts);
            if ((st = lower_cuts(tg, d, &ls, cuts, n_cuts, &s, &nb)) ||
                (st = remat_sim_run(tg, s, &r))) {
                remat_schedule_free(s);
                goto out;
            }
            fits = r.activation_peak_bytes <= budget;
            if (budget >= SIZE_MAX / 4)
                better = r.activation_peak_bytes < best_peak;
            else if (fits)
                better = !best_fits || r.overhead < best_ovh ||
                         (r.overhead == best_ovh && r.activation_peak_bytes < best_peak);
            else
                better = !best_fits && r.activation_peak_bytes < best_peak;
            if (better) {
                remat_schedule_free(*out);
                *out = s;
                best_fits = fits;
                best_ovh = r.overhead;
                best_peak = r.activation_peak_bytes;
                n_blocks = nb;
            } else {
                remat_schedule_free(s);
            }
        }
    }
out:
    info->n_blocks = n_blocks;
    core_free(a, cand, sizeof *cand * ((size_t)ls.n + 1));
    core_free(a, cuts, sizeof *cuts * ((size_t)ls.n + 1));
    lsets_fini(&ls);
    if (st) {
        remat_schedule_free(*out);
        *out = NULL;
    }
    return st;
}
