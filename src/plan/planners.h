/*
 * planners.h - the planners besides the lower-set DP, behind one entry point, and
 * helpers they share.
 */
#ifndef REMAT_PLANNERS_H
#define REMAT_PLANNERS_H

#include "plan/algos.h"
#include "plan/dag.h"

/* Chen's √n and greedy, SuperNeurons' cost-aware recomputation, the optimal MILP.
 * *budget is the activation budget B (SIZE_MAX / 4: none); strategies that search a
 * budget write it back. */
remat_status planner_other(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                           remat_schedule **out, remat_plan_info *info);
/*
 * The Checkmate MILP (Jain et al., MLSys 2020) over the planners' graph, solved with
 * CBC within time_limit seconds: the schedule of least recomputation cost whose
 * memory stays within budget (activation bytes). REMAT_ERR_UNSUPPORTED when the graph
 * is too large for it (the message says the limit), REMAT_ERR_INFEASIBLE when no
 * schedule fits. Fills info->optimality_gap (0 when proven optimal) and
 * info->dp_bound_bytes (the MILP's own memory bound).
 */
remat_status plan_optimal(const remat_tgraph *tg, const struct dag *d, size_t budget,
                          double time_limit, remat_schedule **out, remat_plan_info *info);

/* Chen et al. 2016 over single-node cuts: √n segments of equal memory, or greedy
 * segments under a searched threshold (the least overhead under budget, else the
 * least peak). */
remat_status plan_chen(const remat_tgraph *tg, const struct dag *d, bool greedy, size_t budget,
                       remat_schedule **out, remat_plan_info *info);
/* SuperNeurons' cost-aware recomputation: convolution and linear outputs are kept, the
 * rest recomputed from them for the backward, once per segment (speed-centric) or
 * before each backward step (memory-centric); the kept outputs go to the host tier
 * when the plan does not fit (unless o->no_offload). The first of speed-centric,
 * speed-centric with offload, memory-centric with offload that fits the budget, else
 * the one of least peak. The result is finished (planner_finish). */
remat_status plan_superneurons(const remat_tgraph *tg, const struct dag *d,
                               const remat_plan_opts *o, size_t budget, remat_schedule **out,
                               remat_plan_info *info);
/* The hand-written rules (rules.c): blocks (a checkpoint per numbered block, as
 * torch.utils.checkpoint per layer) and selective (Megatron's: the attention core
 * recomputed). REMAT_ERR_UNSUPPORTED when the graph has no such block or core. The
 * result is finished. */
remat_status plan_rules(const remat_tgraph *tg, const struct dag *d, remat_strategy strategy,
                        remat_schedule **out);
/* SuperNeurons' checkpoints: the outputs of convolutions and linear layers. */
bool planner_is_checkpoint(const struct top *op);
/* Lowering from a set of kept nodes: forward everything, then the backward in reverse
 * topological order, recomputing what a step reads from kept (or still cached) values;
 * memory_centric drops the recomputed values after each backward step. */
remat_status lower_keep(const remat_tgraph *tg, const struct dag *d, const bool *kept,
                        bool memory_centric, remat_schedule **out);

/*
 * The host tier (offload.c): forward values of s (a finished plan without host steps)
 * that cand marks (NULL: any) go out to the host between their forward and backward
 * uses when s's peak passes *target: first all of them, then those that still fit come
 * back (kept), then each copy gets as much compute to hide behind as *target allows
 * (the time model: flops FLOP/s, bandwidth bytes/s, a copy under way taking slowdown
 * of the compute, as remat_sim_opts.copy_slowdown). When even all of them out does
 * not bring the peak to *target, *target becomes that least peak. *out is the new
 * schedule (a copy of s when nothing goes out); info (may be NULL) gets the counts.
 */
remat_status plan_offload(const remat_tgraph *tg, const remat_schedule *s, const bool *cand,
                          size_t *target, double bandwidth, double flops, double slowdown,
                          remat_schedule **out, remat_plan_info *info);
/* The last pass of every plan of a trainable graph (plan_canonical_grads), in place;
 * before plan_offload. */
remat_status planner_finish(const remat_tgraph *tg, remat_schedule **s);
/* What a planner may keep between the attempts of one remat_plan (plan.c tries a
 * strategy at several activation budgets): results that do not depend on the budget.
 * Zeroed before the first attempt, released by plan_memo_fini after the last. */
struct plan_memo {
    struct hybrid_bases *hybrid; /* hybrid.c: the plans it starts from */
    struct dp_memo *dp;          /* plan_dp.c: the DP's graph, families and least budget */
};
void plan_memo_fini(struct plan_memo *m);
/* hybrid.c: releases m->hybrid (plan_memo_fini's part). */
void hybrid_memo_fini(struct plan_memo *m);
/* plan_dp.c: releases m->dp (plan_memo_fini's part). */
void dp_memo_fini(struct plan_memo *m);

/* The DP strategies (plan_dp.c): a plan at *budget activation bytes (with
 * o->budget_min, the least, written back), fixed the resident bytes the messages add;
 * memo may be NULL (nothing kept). */
remat_status plan_dp(const remat_tgraph *tg, const remat_plan_opts *o, size_t fixed,
                     size_t *budget, remat_schedule **out, remat_plan_info *info,
                     struct plan_memo *memo);

/* Tests only (not thread-safe): how the DP strategies guess whether a plan of the
 * authors' family leaves room for the model's beside it (plan_dp.c, room_likely): 0 the
 * default, 1 always (so that where no room is left the model's run is stopped), -1
 * never. The plan is the same either way. */
void plan_dp_set_room_guess(int guess);

/* The keep / recompute / offload planner (hybrid.c): see docs/planners.md. memo may be
 * NULL (nothing kept). */
remat_status plan_hybrid(const remat_tgraph *tg, const remat_plan_opts *o, size_t *budget,
                         remat_schedule **out, remat_plan_info *info, struct plan_memo *memo);

/* hybrid_fit.c: a recomputation plan fitted to the activation budget target (values
 * dropped cheapest per byte first, then taken back while they fit); *out NULL when
 * none fits. The result is finished. */
remat_status hybrid_fit(const remat_tgraph *tg, size_t target, remat_schedule **out);

/* The simulated activation peak of a schedule (SIZE_MAX when it is invalid). */
remat_status planner_sim_peak(const remat_tgraph *tg, const remat_schedule *s, size_t *peak);

#endif
