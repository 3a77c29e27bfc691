/*
 * offload.c - the host tier: SuperNeurons' plan and ours (hybrid: keep, recompute or
 * offload each value) on the seven networks of the paper's table, against the lower
 * limit (the largest single step) and against each other at the same budget in the
 * simulator's time model; the time model across bandwidths; and a real run on the cpu
 * backend, where the copy thread's time is measured against the time steps waited.
 * Prints markdown tables.
 */
#include "bench.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const struct net {
    const char *name;
    int64_t batch;
} nets[] = {{"resnet50", 32}, {"resnet152", 32}, {"vgg19", 32}, {"densenet161", 32},
            {"googlenet", 32}, {"unet", 8}, {"pspnet", 1}};

struct res {
    bool ok;
    remat_sim_result r;
    remat_plan_info pi;
};

static struct res run(const remat_tgraph *tg, remat_strategy s, size_t budget, double bw)
{
    remat_plan_opts o = {.strategy = s, .budget_min = budget == 0, .least_peak = budget == 0,
                         .budget_bytes = budget,
                         .bandwidth = bw};
    remat_sim_opts so = {.bandwidth = bw};
    remat_schedule *sched = NULL;
    struct res x = {0};

    x.ok = !remat_plan(tg, &o, &sched, &x.pi) && !remat_sim_run_opts(tg, sched, &so, &x.r);
    remat_schedule_free(sched);
    return x;
}

static double hidden(const remat_sim_result *r)
{
    return r->transfer_seconds > 0 ? 100 * (1 - r->stall_seconds / r->transfer_seconds) : 100;
}

static void zoo_table(void)
{
    int wins = 0;

    printf("### Least peaks and time at superneurons' least budget (time model: 12 GB/s, "
           "10 TFLOP/s)\n\n"
           "Peaks are activation bytes (MB = 10^6) and their ratio to the lower limit; "
           "`none` keeps what the plain backward keeps. The last columns plan both at the "
           "budget of superneurons' least peak and give the simulated step time (compute, "
           "recomputation and copy stalls) and the share of copy time hidden behind compute.\n\n"
           "| network | batch | lower limit MB | none MB | superneurons least MB | hybrid least MB "
           "| superneurons s (hidden) | hybrid s (hidden) | hybrid better |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof nets / sizeof *nets; i++) {
        remat_zoo_opts zo = {.batch = nets[i].batch};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        struct res none, sn, hy, hyb;
        size_t res;

        if (remat_zoo_build(nets[i].name, &zo, NULL, &g) ||
            remat_tgraph_from_graph(g, NULL, &tg)) {
            printf("| %s | failed: %s |\n", nets[i].name, remat_errmsg());
            remat_graph_free(g);
            continue;
        }
        res = remat_tgraph_resident_bytes(tg);
        none = run(tg, REMAT_STRATEGY_NONE, 0, 0);
        sn = run(tg, REMAT_STRATEGY_SUPERNEURONS, 0, 0);
        hy = run(tg, REMAT_STRATEGY_HYBRID, 0, 0);
        hyb = run(tg, REMAT_STRATEGY_HYBRID, sn.r.activation_peak_bytes + res, 0);
        if (none.ok && sn.ok && hy.ok && hyb.ok) {
            double lim = (double)sn.r.lower_bound_bytes;
            bool better = hy.r.activation_peak_bytes < sn.r.activation_peak_bytes ||
                          hyb.r.total_seconds < sn.r.total_seconds;

            wins += better;
            printf("| %s | %lld | %.0f | %.0f (%.2fx) | %.0f (%.2fx) | %.0f (%.2fx) | %.4f (%.0f%%) "
                   "| %.4f (%.0f%%) | %s |\n", nets[i].name, (long long)nets[i].batch, lim / 1e6,
                   (double)none.r.activation_peak_bytes / 1e6,
                   (double)none.r.activation_peak_bytes / lim,
                   (double)sn.r.activation_peak_bytes / 1e6,
                   (double)sn.r.activation_peak_bytes / lim,
                   (double)hy.r.activation_peak_bytes / 1e6,
                   (double)hy.r.activation_peak_bytes / lim, sn.r.total_seconds, hidden(&sn.r),
                   hyb.r.total_seconds, hidden(&hyb.r), better ? "yes" : "no");
        } else {
            printf("| %s | failed: %s |\n", nets[i].name, remat_errmsg());
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
    printf("\nhybrid beats superneurons (lower least peak, or less time at its budget) on "
           "**%d of 7**.\n\n", wins);
}

static void bandwidth_table(void)
{
    static const double bws[] = {1e9, 3e9, 12e9, 25e9, 50e9};
    remat_zoo_opts zo = {.batch = 32};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct res none;

    if (remat_zoo_build("resnet50", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        printf("resnet50: %s\n", remat_errmsg());
        remat_graph_free(g);
        return;
    }
    none = run(tg, REMAT_STRATEGY_NONE, 0, 0);
    printf("### ResNet-50, batch 32: hybrid at 1/4 and 1/2 of none's peak across bandwidths\n\n"
           "Simulated step time against `none` (%.4f s at 10 TFLOP/s), values offloaded and "
           "the share of copy time hidden.\n\n"
           "| bandwidth GB/s | budget | time s | vs none | offloaded | hidden | recompute "
           "overhead |\n|---|---|---|---|---|---|---|\n", none.r.total_seconds);
    for (size_t i = 0; i < sizeof bws / sizeof *bws; i++)
        for (int q = 1; q <= 2; q++) {
            size_t b = none.r.activation_peak_bytes * (size_t)q / 4;
            struct res h = run(tg, REMAT_STRATEGY_HYBRID, b + remat_tgraph_resident_bytes(tg),
                               bws[i]);

            if (h.ok)
                printf("| %.0f | %d/4 | %.4f | %.2fx | %d | %.0f%% | %.3f |\n", bws[i] / 1e9, q,
                       h.r.total_seconds, h.r.total_seconds / none.r.total_seconds,
                       h.pi.n_offloaded, hidden(&h.r), h.r.overhead);
            else
                printf("| %.0f | %d/4 | infeasible | | | | |\n", bws[i] / 1e9, q);
        }
    printf("\n");
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Real steps on the cpu backend: none, and hybrid at its least budget. */
static void cpu_table(int threads)
{
    remat_zoo_opts zo = {.batch = 8, .height = 112, .width = 112};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    static const remat_strategy ss[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_SUPERNEURONS,
                                        REMAT_STRATEGY_HYBRID};

    if (remat_zoo_build("resnet50", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        printf("resnet50: %s\n", remat_errmsg());
        remat_graph_free(g);
        return;
    }
    printf("### ResNet-50, batch 8, 112x112 on the cpu backend (%d threads), each at its "
           "least budget\n\n"
           "Median of 3 steps after a warm-up; the copy thread's time against the time the "
           "steps waited for it (per step), and the device and host-tier peaks, planned = "
           "measured.\n\n"
           "| strategy | step s | device peak MB (measured) | host tier MB (measured) | "
           "copied MB/step | copy s/step | waited s/step | hidden |\n"
           "|---|---|---|---|---|---|---|---|\n", threads);
    for (size_t i = 0; i < sizeof ss / sizeof *ss; i++) {
        remat_plan_opts po = {.strategy = ss[i], .budget_min = ss[i] != REMAT_STRATEGY_NONE};
        remat_train_opts to = remat_train_opts_default();
        remat_schedule *s = NULL;
        remat_trainer *t = NULL;
        remat_algos *al = NULL;
        remat_train_stats st0, st;
        double secs[3], loss, tmp;

        to.backend = REMAT_BACKEND_CPU;
        to.threads = threads;
        if (remat_train_algos(g, tg, &to, &al) || !(po.algos = al) ||
            remat_plan(tg, &po, &s, NULL) || remat_trainer_new(g, tg, s, &to, &t) ||
            remat_trainer_step(t, NULL, NULL, &loss)) {
            printf("| %s | failed: %s |\n", remat_strategy_name(ss[i]), remat_errmsg());
            remat_trainer_free(t);
            remat_schedule_free(s);
            remat_algos_free(al);
            continue;
        }
        remat_trainer_stats(t, &st0);
        for (int k = 0; k < 3; k++) {
            double t0 = now();

            remat_trainer_step(t, NULL, NULL, &loss);
            secs[k] = now() - t0;
        }
        remat_trainer_stats(t, &st);
        for (int a = 0; a < 3; a++)
            for (int b = a + 1; b < 3; b++)
                if (secs[b] < secs[a]) {
                    tmp = secs[a];
                    secs[a] = secs[b];
                    secs[b] = tmp;
                }
        {
            double cp = (st.copy_seconds - st0.copy_seconds) / 3;
            double w = (st.wait_seconds - st0.wait_seconds) / 3;
            char hid[16] = "-";

            if (cp > 0)
                snprintf(hid, sizeof hid, "%.0f%%", 100 * (1 - (w < cp ? w : cp) / cp));
            printf("| %s | %.3f | %.1f (%.1f) | %.1f (%.1f) | %.1f | %.3f | %.3f | %s |\n",
                   remat_strategy_name(ss[i]), secs[1],
                   (double)st.planned_peak_bytes / 1e6, (double)st.measured_peak_bytes / 1e6,
                   (double)st.planned_host_bytes / 1e6, (double)st.measured_host_bytes / 1e6,
                   (double)(st.transfer_bytes - st0.transfer_bytes) / 3e6, cp, w, hid);
        }
        remat_trainer_free(t);
        remat_schedule_free(s);
        remat_algos_free(al);
    }
    printf("\n");
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;

    zoo_table();
    bandwidth_table();
    cpu_table(threads > 0 ? threads : 2);
    return 0;
}
