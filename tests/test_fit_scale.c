/*
 * test_fit_scale.c - the budget fit and the packing on the deepest zoo graphs: a plan
 * whose first attempt packs above the budget (the fit lowers its activation budget under
 * the plan's peak), and plans the packer's greedy passes leave above their peaks, mended
 * to them (mem/pack_repair.c).
 */
#include "plan_util.h"

/*
 * A budget that the plan of its first attempt packs a byte above while peaking below its
 * activation budget. ResNet-2498's approx-tc plan at 2% of the way from the least total
 * to `none`'s packs 2,048 bytes above its simulated peak, which the packer's mending does
 * not bring down (GPT-2 of 1,000 layers, whose plans packed 2.7 MB above their peaks,
 * a slot of the forward's temporaries empty under the logits, was the case before the
 * mending). That plan packs to T; at T - 1 the first attempt asks for an activation
 * budget a byte below that plan's arena, gets it back and packs a byte over. The budget
 * fit lowers the activation budget under the plan's peak, so the plan it lands on fits
 * and recomputes less than the least-budget plan. Lowered by the excess alone, the
 * activation budget came back with the same plan for all 40 attempts, and the fit took
 * the least plan.
 */
static void test_fit_slack(void)
{
    remat_plan_opts o = {.strategy = REMAT_STRATEGY_APPROX_TC};
    remat_plan_info least, all, pi;
    remat_sim_result rl, r;
    remat_schedule *s = NULL;
    remat_graph *g = NULL;
    remat_tgraph *tg = zoo_ends("resnet2498", 0, &g, &least, &rl, &all);
    size_t B;

    if (!tg) {
        remat_graph_free(g);
        return;
    }
    o.budget_bytes = least.budget_bytes + (all.total_bytes - least.budget_bytes) / 50;
    CHECK_OK(remat_plan(tg, &o, &s, &pi));
    CHECK_OK(remat_sim_run(tg, s, &r));
    remat_schedule_free(s);
    s = NULL;
    CHECK(pi.arena_bytes > r.activation_peak_bytes + 64, "the plan at %zu bytes packs to "
          "%zu bytes, its peak %zu: no slack to test with", o.budget_bytes, pi.arena_bytes,
          r.activation_peak_bytes);
    B = o.budget_bytes = pi.total_bytes - 1;
    CHECK_OK(remat_plan(tg, &o, &s, &pi));
    CHECK_OK(remat_sim_run(tg, s, &r));
    CHECK(pi.total_bytes <= B, "packed %zu bytes in all within a budget of %zu", pi.total_bytes,
          B);
    CHECK(r.overhead < rl.overhead, "at %zu bytes (the least %zu) the plan recomputes %.6f, "
          "the least plan %.6f", B, least.budget_bytes, r.overhead, rl.overhead);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * GPT-2 of 1,000 layers, approx-tc at 0.5% and 1.2% of the way from its least total to
 * `none`'s: the greedy passes pack these plans 2,719,744 bytes above their simulated peaks
 * (the loss's two 205 MB blocks, docs/planners.md "Twenty-eighth round"), and the
 * mending (pack_repair.c) brings the arena down to the peak, which no packing goes below:
 * so the plans pack at their peaks, within the budget.
 */
static void test_mended_at_peak(void)
{
    static const double at[] = {0.005, 0.012};
    remat_plan_opts o = {.strategy = REMAT_STRATEGY_APPROX_TC};
    remat_plan_info least, all, pi;
    remat_sim_result rl, r;
    remat_graph *g = NULL;
    remat_tgraph *tg = gpt2_ends(1000, &g, &least, &rl, &all);

    if (!tg) {
        remat_graph_free(g);
        return;
    }
    for (size_t k = 0; k < REMAT_ARRAY_LEN(at); k++) {
        remat_schedule *s = NULL;

        o.budget_bytes = least.budget_bytes +
                         (size_t)(at[k] * (double)(all.total_bytes - least.budget_bytes));
        CHECK_OK(remat_plan(tg, &o, &s, &pi));
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK(pi.arena_bytes == r.activation_peak_bytes && pi.total_bytes <= o.budget_bytes,
              "%.1f%%: arena %zu, simulated peak %zu, total %zu of %zu", 100 * at[k],
              pi.arena_bytes, r.activation_peak_bytes, pi.total_bytes, o.budget_bytes);
        printf("  %.1f%%: arena %zu bytes, simulated peak %zu\n", 100 * at[k], pi.arena_bytes,
               r.activation_peak_bytes);
        remat_schedule_free(s);
    }
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN_TIMED(test_fit_slack);
    RUN_TIMED(test_mended_at_peak);
    return harness_end();
}
