/*
 * dp_sim.h - the lower-set DP's memory model of a block as the simulator charges it
 * (docs/planners.md, "The simulator's model"): what chain_lower runs for the block
 * (the forward of its nodes; later its recomputation of what its backward reads, then
 * its backward), with every buffer freed after its last use as the liveness pass does.
 *
 * The DP's state at a lower set L is m: the bytes of the kept values of L that stay
 * live through the backward of every later block (those read by a backward step of a
 * block inside L). Per pair L_i ⊂ L_j (block V' = L_j \ L_i) the model gives the
 * block's recomputed cost, the growth of m and c, the most the block adds to m at one
 * step of its forward or of its backward: a chain fits B when m + c <= B at every
 * block. Where the lowering's choices depend on blocks before L_i (a value of L_i
 * whose only readers are forwards of L_i that are not recomputed), the model counts
 * the value as live: it never charges less than the simulator.
 *
 * Work per pair: the block's nodes and edges, plus ∂(L_i)'s values.
 */
#ifndef REMAT_DP_SIM_H
#define REMAT_DP_SIM_H

#include "plan/lowerset.h"

struct dp_sim;

/* A pair costs its block's walk, or on large graphs a part of its row's (dp_sim_row.c),
 * so past DP_SIM_MAX_NODES nodes the planners use the authors' bound, but for the DP
 * strategies' approximate family, judged by the model too at the budgets where a run's
 * pairs number at most DP_SIM_MAX_PAIRS when worked out by rows (about 0.3 us each here;
 * ResNet-2498 at its least budget, 1.3 10^6 pairs, 0.4 s a pass), or where its walks
 * visit at most DP_SIM_MAX_WORK nodes when the graph is not one the rows are exact for
 * (then in a family of at most DP_SIM_MAX_SETS sets, whose pairs are memoized); when
 * that holds at the authors' bound's least budget (plan_dp.c, struct dp_memo). */
#define DP_SIM_MAX_NODES 1000
#define DP_SIM_MAX_PAIRS ((int64_t)2500000)
/* The model's family is thinned (plan_dp.c) where its pairs at A pass this: ResNet-2498
 * (2.3 10^6 pairs) to 3,717 of its 8,337 sets, its least peak 71,591,936 -> 71,598,080
 * B and about 1.0 -> 0.4 s; GPT-2 of 1,000 layers (1.2 10^7) to 5,313 of 37,008 sets,
 * the same least peak as the whole family's (1,167,138,816 B, which took 5.5 s). */
#define DP_SIM_FAMILY_PAIRS ((int64_t)600000)
/* Past 1.1 times the authors' least budget, the model plans where a run's pairs number at
 * most this (GPT-2-48 up to about twice that budget, recomputing 0.26 against the
 * authors' bound's 0.36 there; ResNet-1001 and ResNet-2498 not, where the two plans are
 * within 2% or the same and the model's search took 1-4 s). */
#define DP_SIM_WIDE_PAIRS ((int64_t)400000)
/*
 * Past 1.1 times the authors' least budget, where the model's pairs at B pass
 * DP_SIM_WIDE_PAIRS but not DP_SIM_MAX_PAIRS, a time-centric plan is the authors'
 * bound's, and the model's too where that plan peaks more than 1/DP_SIM_ROOM_SHARE of B
 * below B in the simulator (the better of the two; plan_dp.c, fam_at): the bound left
 * room that the model may spend on keeping more. On the transformers it does (fractions
 * of the way from approx-tc's least total to `none`'s: GPT-2-1000 at 2%, the bound's
 * plan 5% below B, overhead 0.806 -> 0.709; GPT-2-48 at 20%, 24% below, 0.286 -> 0.209;
 * BERT-base-40 at 30%, 8% below, 0.239 -> 0.192). On the ResNets the bound's plans peak
 * within 1% of B, and the model's were the same or within 1.2% (ResNet-2498 at 5% and
 * 10%: the same, in 0.6-0.9 s against 0.2-0.3). Memory-centric plans peak far below B
 * by design: the bound's plan stands (docs/planners.md, "Twenty-sixth round").
 */
#define DP_SIM_ROOM_SHARE 32
#define DP_SIM_MAX_SETS 3500
#define DP_SIM_MAX_WORK ((int64_t)16000000)

/* The model of d (built from tg) over the sets of ls; *out NULL on failure. */
remat_status dp_sim_new(const remat_tgraph *tg, const struct dag *d, const struct lsets *ls,
                        struct dp_sim **out);
void dp_sim_free(struct dp_sim *s);

/* Block L_i -> L_j (L_i ⊊ L_j): *t the forward cost the block recomputes, *dm the
 * growth of the state, *c the block's charge above the state (see above). */
void dp_sim_pair(struct dp_sim *s, int32_t i, int32_t j, double *t, size_t *dm, size_t *c);

/* The same for one pair alone (a chain's blocks): walked where the rows do not hold it,
 * rather than working out its row. */
void dp_sim_pair_one(struct dp_sim *s, int32_t i, int32_t j, double *t, size_t *dm, size_t *c);

/* Whether dp_sim_pair works out a pair with its whole row (dp_sim_row.c: every pair into
 * L_j at once, the same numbers in far less time on large graphs) or walks it alone; on
 * by default past DP_SIM_MAX_NODES. Returns whether it is on (never on a graph the rows
 * are not exact for). */
bool dp_sim_set_rows(struct dp_sim *s, bool on);
bool dp_sim_rows(const struct dp_sim *s);

#endif
