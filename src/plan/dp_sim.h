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

/* A pair costs its block's walk, so past DP_SIM_MAX_NODES nodes the planners use the
 * authors' bound (ResNet-1001's least budget, 3,346 nodes, took 1.8 s with the model
 * against 0.05 s; ResNet-2498's, 8,336 nodes, 26 s), but for the DP strategies'
 * approximate family, judged by the model too at the budgets where its pairs' walks
 * number at most DP_SIM_MAX_WORK nodes (kusumoto_sim_work), when the family has at most
 * DP_SIM_MAX_SETS sets and that holds at the authors' bound's least budget (plan_dp.c,
 * struct dp_memo). */
#define DP_SIM_MAX_NODES 1000
#define DP_SIM_MAX_SETS 3500
#define DP_SIM_MAX_WORK ((int64_t)16000000)

/* The model of d (built from tg) over the sets of ls; *out NULL on failure. */
remat_status dp_sim_new(const remat_tgraph *tg, const struct dag *d, const struct lsets *ls,
                        struct dp_sim **out);
void dp_sim_free(struct dp_sim *s);

/* Block L_i -> L_j (L_i ⊊ L_j): *t the forward cost the block recomputes, *dm the
 * growth of the state, *c the block's charge above the state (see above). */
void dp_sim_pair(struct dp_sim *s, int32_t i, int32_t j, double *t, size_t *dm, size_t *c);

#endif
