/*
 * transformer.c - the planners on transformers against the rules people apply by hand:
 * GPT-2 small (12 layers, 768 wide, sequence 1024, batch 4, AdamW's state resident) and
 * the reduced GPT-2 of the issue (6 layers, 384 wide, 6 heads, sequence 256, batch 4).
 * Per strategy at its least budget: the activation peak, the recomputed FLOPs over the
 * forward's (the overhead) and the simulated step time over none's (time model at its
 * defaults: 10 TFLOP/s, 12 GB/s). Then the planners at the budget of Megatron's
 * selective rule and at 20% of none's activation peak; and the reduced GPT-2 trained for
 * real on the cpu backend under every strategy (measured step time and peaks). Prints
 * markdown tables.
 */
#include "bench.h"
#include "remat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct run {
    bool ok;
    remat_sim_result r;
    size_t total;
};

/* s at total budget `budget` (0: its least); ok false when it does not fit. */
static struct run plan(const remat_tgraph *tg, remat_strategy s, size_t budget)
{
    remat_plan_opts o = {.strategy = s, .budget_min = budget == 0, .budget_bytes = budget,
                         .max_lower_sets = 100000};
    remat_schedule *sch = NULL;
    remat_plan_info pi;
    struct run out = {false, {0}, 0};

    if (!remat_plan(tg, &o, &sch, &pi) && !remat_sim_run(tg, sch, &out.r)) {
        out.ok = true;
        out.total = pi.total_bytes;
    }
    remat_schedule_free(sch);
    return out;
}

static void row(const char *name, const struct run *x, const struct run *none)
{
    if (!x->ok) {
        printf("| %s | does not fit | | | |\n", name);
        return;
    }
    printf("| %s | %.3f | %.3f | %.3f | %.3f |\n", name, (double)x->total / 1e9,
           (double)x->r.activation_peak_bytes / 1e9, x->r.overhead,
           x->r.total_seconds / none->r.total_seconds);
}

static const remat_strategy all[] = {
    REMAT_STRATEGY_NONE, REMAT_STRATEGY_BLOCKS, REMAT_STRATEGY_SELECTIVE,
    REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC, REMAT_STRATEGY_EXACT_TC,
    REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_CHEN_GREEDY, REMAT_STRATEGY_SUPERNEURONS,
    REMAT_STRATEGY_HYBRID,
};
static const remat_strategy planners[] = {
    REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_EXACT_TC, REMAT_STRATEGY_CHEN_GREEDY,
    REMAT_STRATEGY_HYBRID,
};

static void at_budget(const remat_tgraph *tg, const char *what, size_t budget,
                      const struct run *none)
{
    printf("\nAt %s: a total of %.3f GB.\n\n| strategy | total GB | activation peak GB | "
           "overhead | time / none |\n|---|---|---|---|---|\n", what, (double)budget / 1e9);
    for (size_t i = 0; i < sizeof planners / sizeof planners[0]; i++) {
        struct run x = plan(tg, planners[i], budget);

        row(remat_strategy_name(planners[i]), &x, none);
    }
}

static int model(const char *title, const remat_zoo_opts *zo)
{
    remat_tgraph_opts to = {.optimizer = REMAT_OPTIMIZER_ADAMW};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct run none, sel;
    double t0 = now();

    if (remat_zoo_build("gpt2", zo, NULL, &g) || remat_tgraph_from_graph(g, &to, &tg)) {
        fprintf(stderr, "transformer: %s: %s\n", title, remat_errmsg());
        remat_graph_free(g);
        return 1;
    }
    printf("### %s\n\n%lld parameters, %d planned values, resident %.3f GB (AdamW). GB = "
           "10^9 bytes; *overhead*: recomputed FLOPs / forward FLOPs; *time / none*: "
           "simulated step time over none's.\n\n| strategy | total GB | activation peak "
           "GB | overhead | time / none |\n|---|---|---|---|---|\n", title,
           (long long)remat_graph_n_params(g), remat_tgraph_n_planned(tg),
           (double)remat_tgraph_resident_bytes(tg) / 1e9);
    none = plan(tg, REMAT_STRATEGY_NONE, 0);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        struct run x = i ? plan(tg, all[i], 0) : none;

        row(remat_strategy_name(all[i]), &x, &none);
    }
    sel = plan(tg, REMAT_STRATEGY_SELECTIVE, 0);
    if (sel.ok && none.ok) {
        at_budget(tg, "Megatron's selective budget", sel.total, &none);
        at_budget(tg, "20% of none's activation peak",
                  none.r.activation_peak_bytes / 5 + remat_tgraph_resident_bytes(tg), &none);
    }
    printf("\n(%.1f s to build and plan all of the above)\n\n", now() - t0);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return 0;
}

/* Median of three measured steps of s at its least budget on the cpu backend (2
 * threads), after one step to warm up; NAN when it fails. Fills *planned and
 * *measured with the peaks. */
static double measured_step(const remat_graph *g, const remat_tgraph *tg, remat_strategy s,
                            size_t *planned, size_t *measured)
{
    remat_train_opts to = remat_train_opts_default();
    remat_plan_opts po = {.strategy = s, .budget_min = true, .max_lower_sets = 100000};
    remat_schedule *sch = NULL;
    remat_trainer *t = NULL;
    remat_train_stats st;
    double times[3], loss, med = NAN;

    to.backend = REMAT_BACKEND_CPU;
    to.threads = 2;
    to.optimizer = REMAT_OPTIMIZER_ADAMW;
    to.lr = 1e-3f;
    to.weight_decay = 0.01f;
    if (remat_plan(tg, &po, &sch, NULL) || remat_trainer_new(g, tg, sch, &to, &t) ||
        remat_trainer_step(t, NULL, NULL, &loss))
        goto out;
    for (int i = 0; i < 3; i++) {
        double t0 = now();

        if (remat_trainer_step(t, NULL, NULL, &loss))
            goto out;
        times[i] = now() - t0;
    }
    qsort(times, 3, sizeof *times, cmp_d);
    med = times[1];
    remat_trainer_stats(t, &st);
    *planned = st.planned_peak_bytes;
    *measured = st.measured_peak_bytes;
out:
    if (isnan(med))
        fprintf(stderr, "transformer: %s: %s\n", remat_strategy_name(s), remat_errmsg());
    remat_trainer_free(t);
    remat_schedule_free(sch);
    return med;
}

/* The reduced GPT-2 trained for real under every strategy on the cpu backend. */
static int measured(const remat_zoo_opts *zo)
{
    remat_tgraph_opts to = {.optimizer = REMAT_OPTIMIZER_ADAMW};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    double base = NAN;

    if (remat_zoo_build("gpt2", zo, NULL, &g) || remat_tgraph_from_graph(g, &to, &tg)) {
        fprintf(stderr, "transformer: %s\n", remat_errmsg());
        remat_graph_free(g);
        return 1;
    }
    printf("### Reduced GPT-2 measured on the cpu backend (2 threads, AdamW)\n\nEach strategy "
           "at its least budget; the median of three steps after one to warm up. *ms / "
           "none*: the measured step over none's.\n\n| strategy | planned peak GB | "
           "measured peak GB | step ms | ms / none |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        size_t planned = 0, meas = 0;
        double ms = 1e3 * measured_step(g, tg, all[i], &planned, &meas);

        base = i == 0 ? ms : base;
        printf("| %s | %.3f | %.3f | %.0f | %.3f |\n", remat_strategy_name(all[i]),
               (double)planned / 1e9, (double)meas / 1e9, ms, ms / base);
    }
    printf("\n");
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return 0;
}

int main(void)
{
    remat_zoo_opts small = {.batch = 4};
    remat_zoo_opts reduced = {.batch = 4, .layers = 6, .heads = 6, .hidden = 384,
                              .seq_len = 256};

    reduced.dropout = -1; /* measured below without dropout: the same work in every plan */
    return model("GPT-2 small, batch 4, sequence 1024", &small) |
           model("Reduced GPT-2 (6 layers, 384 wide, 6 heads), batch 4, sequence 256",
                 &reduced) | measured(&reduced);
}
