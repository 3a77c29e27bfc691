/*
 * dp_coarse.h - the lower-set DP's pairs restricted from coarse to fine, for families
 * whose pairs within the budget's window number in the millions and more.
 *
 * Of the family (sorted by M), ∅, V and, in each run of about n / k consecutive sets,
 * the one of least boundary bytes M(∂(L)) (where the graph narrows: on a residual
 * network or a transformer, the closure of a node of the residual stream, which every
 * other closure contains or is contained in) are the coarse sets. A block L_i -> L_j is
 * then considered when at most DP_COARSE_REACH coarse sets lie strictly between i and
 * j, or when both are coarse. A longer block between fine sets passes coarse sets c
 * with L_i ⊆ c ⊆ L_j (where the graph narrows, they do): the chain through one keeps
 * its boundary too (a few bytes there) and its two blocks recompute no more than the
 * one. What this loses against every pair (the flat DP, remat_plan_opts.coarse_pairs
 * -1) is measured in docs/planners.md ("Seventh round"): where the default restricts
 * (GPT-2 of 1,000 layers above its least budget) the same or a lower peak and overhead;
 * forced onto smaller graphs and tight budgets it can lose (GPT-2 of 1,000 layers at its
 * least budget: a 7.7% higher peak), which is why the default waits for a wide window
 * on a large family (kusumoto.h).
 *
 * Pairs into a fine set: at most the sets of its DP_COARSE_REACH + 1 runs before it;
 * into a coarse set, those and the coarse sets of the window. With k about the cube
 * root of 2 n^2, a few times n^(4/3) pairs in all (GPT-2 of 1,000 layers, 37,008 sets:
 * 3.7 10^6, where the window of its halfway budget holds 2.1 10^8).
 */
#ifndef REMAT_DP_COARSE_H
#define REMAT_DP_COARSE_H

#include "plan/lowerset.h"

#define DP_COARSE_REACH 3

struct dp_coarse {
    int32_t n, k;     /* sets; coarse sets */
    int32_t *idx;     /* the coarse sets, ascending */
    int32_t *near;    /* per set j: the least i of a fine pair into j (at most
                         DP_COARSE_REACH coarse sets strictly between i and j) */
    uint8_t *is;      /* per set: coarse */
    const remat_allocator *al;
};

/* The coarse sets of ls (sorted by M) for k runs (at least 2 sets each); false only
 * when out of memory. */
bool dp_coarse_init(struct dp_coarse *h, const struct dag *d, const struct lsets *ls,
                    int32_t k);
void dp_coarse_fini(struct dp_coarse *h);
/* The number of coarse runs for a family of n sets: about the cube root of 2 n^2. */
int32_t dp_coarse_runs(int32_t n);

/* Whether the DP considers the block L_i -> L_j (i < j). */
static inline bool dp_coarse_allows(const struct dp_coarse *h, int32_t i, int32_t j)
{
    return i >= h->near[j] || (h->is[i] && h->is[j]);
}

/* The first coarse set at or after index i: its place in idx (k when none). */
int32_t dp_coarse_from(const struct dp_coarse *h, int32_t i);

#endif
