/*
 * dp_pairs.h - the lower-set DP's usable pairs, kept for the runs of one search, and a
 * Lagrangian lower bound on the overhead still to come from a state.
 *
 * A pair L_i ⊊ L_j is usable at budget B when its block fits the window and its charge
 * c is at most B (kusumoto.c, pair_block). Its quantities do not depend on B, so the
 * pairs usable at the largest budget of a search are worked out once (a subset test and
 * a walk of L_j's boundary each, or the simulator's model) and every run at that budget
 * or below filters them. Rows by L_j, i ascending, as the DP visits them. 16 bytes a
 * pair with the authors' model, whose charge is worked out again from the sets' M
 * (dp_authors_charge), 24 with the simulator's; kept only up to DP_PAIRS_MAX pairs
 * (ResNet-2498 at the budget halfway to `none`'s peak: 9.8 10^6 pairs, 157 MB; GPT-2
 * of 1,000 layers at its least budget: 6.2 10^6 pairs, 99 MB instead of 148).
 *
 * The bound (dp_lagrange): a chain from a state (t, m) at L to V fits when m + need <= B,
 * need the most any of its blocks needs above m (the growth before the block and its
 * charge c). So for D > 0 bytes per unit of overhead, a state whose chain goes on to V
 * with overhead t_V has
 *   D t_V >= D t + m + H_D(L) - B
 * for any H_D(L) at most D Σ dt + need over the chains from L to V. States with
 * D t + m + H_D(L) > D ub + B cannot end within ub. The sum bound, the least over the
 * chains of D Σ dt + Σ dm (all blocks but the last) + c (the last), is linear in D along
 * a chain, and D is chosen to make its bound at ∅ largest (the dual of the budget
 * constraint). At that D the states are tested against the peak bound P_D: the least
 * over the chains of the largest, over their blocks, of D (Σ dt up to and with the block)
 * + (Σ dm before it) + c, which the pass computes as D dt + max(c, dm + P_D(L')) over the
 * first blocks (P_D(V) = 0). It lies between the two: a block's term is at most
 * D Σ dt + need, and the last block's term is the sum bound's. It counts a block inside
 * the chain whose own peak passes what the rest needs (GPT-2 of 1,000 layers at a tenth
 * of the way from its least budget to `none`'s peak: the run at the optimum holds 8.3 10^6
 * states instead of 25.0 10^6). Both keep a parent's key at most its child's where the
 * block fits within ub, so a state passes only if its parent does. Any D > 0 gives a
 * valid bound, and the DP tests a state against further ones as well (dp_least.c): the
 * best D at ∅ is not the best for every state.
 */
#ifndef REMAT_DP_PAIRS_H
#define REMAT_DP_PAIRS_H

#include "plan/lowerset.h"

struct dp_pair {
    int32_t i, dt;   /* from L_i; the block's overhead (in the DP's units) */
    size_t dm;       /* growth of the state */
};

struct dp_pairs {
    size_t *at, *end;     /* n_sets each: pairs into L_j are p[at[j] .. end[j]) (the rows
                             in order, with room left between the halves written on two
                             threads: dp_keep_pairs) */
    struct dp_pair *p;    /* NULL: none kept */
    size_t *c;            /* per pair its charge above the state (the simulator's model);
                             NULL with the authors' model (dp_pair_charge) */
    size_t n, cap;
    int32_t n_sets;
    size_t budget;        /* the budget they were kept at (runs use them at or below it) */
    const remat_allocator *al;
};

/* The most pairs kept (16 or 24 bytes each). */
#define DP_PAIRS_MAX ((int64_t)1 << 24)

/* The charge of the block L_j \ L_i above the state carried into it in the authors'
 * model: twice its nodes' bytes (forward, then backward with its gradients) and the
 * boundary's that the block's backward reads, M(δ+(L_j)) + M(δ−(δ+(L_j)) \ L_j). */
static inline size_t dp_authors_charge(const struct lsets *ls, int32_t i, int32_t j)
{
    return 2 * (ls->m[j] - ls->m[i]) + ls->m_out[j];
}

/* Kept pair e, into L_j: its charge. */
static inline size_t dp_pair_charge(const struct dp_pairs *pc, const struct lsets *ls,
                                    size_t e, int32_t j)
{
    return pc->c ? pc->c[e] : dp_authors_charge(ls, pc->p[e].i, j);
}

/* Asks for the kept pairs into L_j ahead of their use. The passes that read the rows
 * last first, each forward (dp_bounds, the Lagrangian passes), call it for the next
 * row, which the hardware's prefetch does not follow (a Lagrangian pass over
 * GPT-2-1000's 3.4 10^6 pairs: 24 -> 9 ms). */
static inline void dp_pairs_prefetch_row(const struct dp_pairs *pc, int32_t j)
{
    for (size_t e = pc->at[j]; e < pc->end[j]; e += 64 / sizeof *pc->p)
        __builtin_prefetch(pc->p + e);
    for (size_t e = pc->at[j]; pc->c && e < pc->end[j]; e += 64 / sizeof *pc->c)
        __builtin_prefetch(pc->c + e);
}

/* Room for cap pairs over n_sets sets; with_c: their charges too (the simulator's
 * model). False when out of memory. */
bool dp_pairs_init(struct dp_pairs *pc, const remat_allocator *al, int32_t n_sets, size_t cap,
                   bool with_c);
void dp_pairs_fini(struct dp_pairs *pc);
/* Room for cap pairs in place of old's (those kept there are dropped: a cut is made in
 * place, a growth frees old's block first, so that the new one starts on its pages,
 * already touched, where it lay at the heap's top), over old's sets and with its charges
 * where it has them: into pc, old emptied. False when out of memory, old freed. */
bool dp_pairs_regrow(struct dp_pairs *pc, struct dp_pairs *old, size_t cap);

/* Chains from each set to V with which a run may finish its states (the Lagrangian
 * passes' least paths, one guide per D tried): for guide g and set j, the overhead of
 * the rest of its chain, sdt[g * n_sets + j] (INT32_MAX: none), and the most memory the
 * rest needs above the state carried into it, need[g * n_sets + j]: the largest, over
 * its blocks, of the growth before the block and the block's charge. A state (t, m) at
 * L_j finishes within the budget B when m + need <= B, with overhead t + sdt. */
#define DP_GUIDES_MAX 16

struct dp_guides {
    int n;
    int32_t n_sets;
    int32_t *sdt;
    size_t *need;
    const remat_allocator *al;
};

bool dp_guides_init(struct dp_guides *g, const remat_allocator *al, int32_t n_sets);
void dp_guides_fini(struct dp_guides *g);

/* The Lagrangian multipliers after the first whose bound every state passes too
 * (dp_least.c), and the rows of the bounds that dp_least_time returns. */
#define DP_LAG_EXTRA 2
#define DP_LAG_ROWS (1 + DP_LAG_EXTRA)

/* Sizes past which D t + bytes could pass int64 (2^59 each): no bound; D at most
 * DP_LAG_MAX / n_t - 1 for overheads below n_t. */
#define DP_LAG_MAX ((int64_t)1 << 59)

/* The Lagrangian bound of a run at budget B (window: the largest M(L_j) - M(L_i) of a
 * usable block; room as kusumoto.c's dp_bounds, -1 where V cannot be reached): the whole
 * D of the sum bound's largest bound at ∅ (dp_pairs.c: the search over D) into *d (0: no
 * bound, the sizes are past what int64 holds), the sum bound H_D there into h (n_sets
 * entries; INT64_MAX where no chain goes on) and that bound at ∅, rounded up, into *lb0.
 * *ub is lowered to the overhead of every chain met that fits B; each D's least paths are
 * added to g (when not NULL, up to DP_GUIDES_MAX). False only when out of memory. */
bool dp_lagrange(const struct dp_pairs *pc, const struct lsets *ls, size_t budget,
                 size_t window, const int64_t *room, int32_t n_t, int64_t *h, int64_t *d,
                 int32_t *lb0, int32_t *ub, struct dp_guides *g);
/* The peak bound P_D at the k (1 .. 1 + DP_LAG_EXTRA) D of d[] (each > 0; lowered to the
 * largest D that dp_lagrange tries for n_t, so that D t + bytes stays within int64) into
 * h[0 .. k), in one pass over the pairs; *lb0 raised to P's bound at ∅ at d[0] where that
 * is larger, *ub lowered and the paths added to g as dp_lagrange does. False only when
 * out of memory. */
bool dp_lagrange_peaks(const struct dp_pairs *pc, const struct lsets *ls, size_t budget,
                       size_t window, const int64_t *room, int32_t n_t, int k, int64_t *d,
                       int64_t *const *h, int32_t *lb0, int32_t *ub, struct dp_guides *g);

#endif
