/*
 * lowerset.h - families of lower sets of the planners' graph (a lower set L has no
 * edge from outside L into L), with what the DP of Kusumoto et al. needs of each:
 * M(L), T(L), the boundary ∂(L) (nodes of L with a successor outside L) and
 * M(δ+(L)) + M(δ−(δ+(L)) \ L) (the successors of L, and their other predecessors).
 *
 * The approximate family is {∅, V} and the ancestor closure of every node (at most
 * n + 2 sets); the exact family is every lower set (can be exponential; capped).
 * Sets are sorted by size, so every subset of a set comes before it (except in the
 * authors' depth-first numbering, see LS_EXACT_DFS).
 */
#ifndef REMAT_LOWERSET_H
#define REMAT_LOWERSET_H

#include "plan/dag.h"

/*
 * One set's bits, stored compactly: words [0, full) are all ones, [full, lead) zero,
 * [lead, lead + len) stored at lsets.bits[at ..], and the rest zero. The approximate
 * family of a chain-like graph is mostly prefixes of the node order: GPT-2 with 1,000
 * blocks, 37,008 sets of 579 words, would take 171 MB as dense rows.
 */
struct lrow {
    size_t at;
    int32_t full, lead, len;
};

struct lsets {
    int32_t n;                 /* number of sets */
    int words;                 /* words of a set's row (lsets_row) */
    uint64_t *bits;            /* the stored words of every row (struct lrow) */
    size_t bits_n, bits_cap;
    struct lrow *row;          /* per set */
    int32_t *size;
    size_t *m;                 /* M(L) */
    double *t;                 /* T(L) */
    size_t *m_out;             /* M(δ+(L)) + M(δ−(δ+(L)) \ L) */
    int32_t *bd_at, *bd;       /* boundary nodes, CSR */
    size_t cap, bd_cap;
    bool by_m;                 /* sorted by M(L) (all but LS_EXACT_DFS) */
    int32_t *mx_at, *mx;       /* maximal nodes (no successor in L), CSR */
    size_t mx_cap;
    struct dp_sim *sim;        /* the DP's block model as the simulator charges it
                                  (dp_sim.h, the caller's); NULL: the authors' bound */
    const remat_allocator *al;
};

/* Word w of set i's bits. */
static inline uint64_t lsets_word(const struct lsets *ls, int32_t i, int32_t w)
{
    const struct lrow *r = &ls->row[i];
    uint32_t k = (uint32_t)(w - r->lead); /* past the stored words when w < lead */

    if (w < r->full)
        return ~(uint64_t)0;
    return k < (uint32_t)r->len ? ls->bits[r->at + k] : 0;
}

/* Whether node v is in set i. */
static inline bool lsets_has(const struct lsets *ls, int32_t i, int32_t v)
{
    return lsets_word(ls, i, v >> 6) >> (v & 63) & 1;
}

/* The words past which set i has no node: its row's end. */
static inline int32_t lsets_end(const struct lsets *ls, int32_t i)
{
    const struct lrow *r = &ls->row[i];

    return r->len ? r->lead + r->len : r->full;
}

/* Set i's bits as ls->words dense words into out. */
void lsets_row(const struct lsets *ls, int32_t i, uint64_t *out);

/* L_i ⊆ L_j: a lower set is in another exactly when its maximal nodes are (their
 * ancestors follow); one or a few bit tests instead of a word per 64 nodes. */
static inline bool lsets_subset(const struct lsets *ls, int32_t i, int32_t j)
{
    for (int32_t k = ls->mx_at[i]; k < ls->mx_at[i + 1]; k++)
        if (!lsets_has(ls, j, ls->mx[k]))
            return false;
    return true;
}

enum lsets_family {
    LS_APPROX,     /* ∅, V and every node's ancestor closure */
    LS_APPROX_WALK, /* the same sets, each measured over all its nodes rather than from
                      a subset's quantities: the reference LS_APPROX is tested against */
    LS_EXACT,      /* every lower set */
    /*
     * The lower sets the authors' exact solver can chain: found depth-first from ∅ (a
     * stack; each popped set extended by every addable node in `key` order, new sets
     * pushed and numbered in that order), kept in that numbering up to V, and a
     * transition L -> L' allowed only when L' was numbered after L. Reproduces their
     * figures; misses chains that LS_EXACT finds.
     */
    LS_EXACT_DFS,
};

/* REMAT_ERR_UNSUPPORTED past max_sets (exact families). key (LS_EXACT_DFS; NULL: node
 * order) ranks the nodes. Sets come in an order where a transition goes from a lower
 * index to a higher one; ∅ is first and V last. */
remat_status lsets_build(const struct dag *d, enum lsets_family fam, const int32_t *key,
                         int64_t max_sets, struct lsets *ls);
void lsets_fini(struct lsets *ls);
/*
 * A coarser family for large graphs: of src (sorted by M, without a model), ∅, V and
 * in each run of sets whose M lies between the same two multiples of M(V) / (max_sets
 * - 2) + 1 bytes the one of least boundary bytes (M(∂(L)), what a chain keeps there;
 * ties to the first), so that a DP over it visits at most about max_sets^2 / 2 pairs
 * and still cuts where the graph narrows. Its chains are chains of src.
 */
remat_status lsets_thin(const struct dag *d, const struct lsets *src, int32_t max_sets,
                        struct lsets *out);
/* The sets of src (sorted by M) where the boundary's bytes drop: keep[i] 1 where M(∂(L_i))
 * is below M(∂(L_i-1)), and for ∅ and V. */
void lsets_drops_keep(const struct dag *d, const struct lsets *src, uint8_t *keep);
/* The family of src's sets i with keep[i] (∅ and V among them), in src's order: its
 * chains are chains of src. */
remat_status lsets_pick(const struct lsets *src, const uint8_t *keep, struct lsets *out);

#endif
