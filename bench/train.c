/*
 * train.c - training speed: remat's cpu backend against PyTorch 1.13 on ResNet-50
 * (batch 8, 224x224, the same thread count, median step time after warm-up), measured
 * in the same run as a ratio; then every strategy's step time relative to `none` and
 * its measured peak. Prints markdown tables.
 *
 * usage: bench/train [threads (default: 2)] [steps (default: 5)]
 */
#include "bench.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct run {
    bool ok;
    double median;
    size_t planned, measured, arena;
};

/* Plans and trains `steps` steps after one warm-up step; the median step time. */
static struct run remat_run(const remat_tgraph *tg, const remat_graph *g, remat_strategy s,
                            remat_backend_kind be, int threads, int steps)
{
    remat_plan_opts po = {.strategy = s, .budget_min = true, .max_lower_sets = 20000,
                          .time_limit = 30};
    remat_train_opts to = remat_train_opts_default();
    remat_schedule *sched = NULL;
    remat_trainer *t = NULL;
    remat_algos *al = NULL;
    struct run r = {0};
    double times[64], loss;
    remat_train_stats st;

    to.backend = be;
    to.threads = threads;
    /* the backend's kernels: chosen by the plan, their scratch in its peak */
    if (remat_train_algos(g, tg, &to, &al) || !(po.algos = al) ||
        remat_plan(tg, &po, &sched, NULL) || remat_trainer_new(g, tg, sched, &to, &t) ||
        remat_trainer_step(t, NULL, NULL, &loss)) {
        fprintf(stderr, "train: %s: %s\n", remat_strategy_name(s), remat_errmsg());
        goto out;
    }
    for (int i = 0; i < steps; i++) {
        double t0 = now();

        if (remat_trainer_step(t, NULL, NULL, &loss))
            goto out;
        times[i] = now() - t0;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_d);
    remat_trainer_stats(t, &st);
    r.ok = true;
    r.median = times[steps / 2];
    r.planned = st.planned_peak_bytes;
    r.measured = st.measured_peak_bytes;
    r.arena = st.arena_bytes;
out:
    remat_trainer_free(t);
    remat_schedule_free(sched);
    remat_algos_free(al);
    return r;
}

static double torch_run(const char *model, int batch, int size, int threads, int steps)
{
    char cmd[512], line[256];
    double sec = 0;
    FILE *p;

    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/bench_torch.py %s %d %d %d %d 1 2>&1",
             model, batch, size, threads, steps);
    p = popen(cmd, "r");
    if (!p)
        return 0;
    while (fgets(line, sizeof line, p))
        if (!strncmp(line, "median_seconds=", 15))
            sec = atof(line + 15);
    pclose(p);
    return sec;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2, steps = argc > 2 ? atoi(argv[2]) : 5;
    remat_zoo_opts zo = {.batch = 8};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    struct run none;
    double torch_s;

    if (steps < 1 || steps > 64 || threads < 1)
        return fprintf(stderr, "usage: train [threads] [steps 1..64]\n"), 2;
    if (remat_zoo_build("resnet50", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        fprintf(stderr, "train: %s\n", remat_errmsg());
        return 1;
    }
    none = remat_run(tg, g, REMAT_STRATEGY_NONE, REMAT_BACKEND_CPU, threads, steps);
    torch_s = torch_run("resnet50", 8, 224, threads, steps);
    printf("### ResNet-50, batch 8, 224x224, %d threads: remat cpu against PyTorch 1.13\n\n"
           "Median of %d steps after one warm-up step, both measured in this run.\n\n"
           "| | step s | images/s |\n|---|---|---|\n", threads, steps);
    if (none.ok)
        printf("| remat cpu (none) | %.3f | %.2f |\n", none.median, 8 / none.median);
    if (torch_s > 0)
        printf("| PyTorch 1.13 | %.3f | %.2f |\n", torch_s, 8 / torch_s);
    else
        printf("| PyTorch 1.13 | not available (/usr/bin/python3 with torch) | |\n");
    if (none.ok && torch_s > 0)
        printf("\nremat / PyTorch images/s: **%.2f**\n", torch_s / none.median);
    printf("\n### Every strategy on the cpu backend (same model and batch)\n\n"
           "| strategy | step s | vs none | planned peak MB | measured peak MB | arena MB |\n"
           "|---|---|---|---|---|---|\n");
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++) {
        struct run r = s == 0 ? none
                              : remat_run(tg, g, (remat_strategy)s, REMAT_BACKEND_CPU, threads,
                                          steps);

        if (!r.ok) {
            printf("| %s | not planned: %s | | | | |\n", remat_strategy_name((remat_strategy)s),
                   remat_errmsg());
            continue;
        }
        printf("| %s | %.3f | %.2fx | %.1f | %.1f | %.1f |\n",
               remat_strategy_name((remat_strategy)s), r.median, r.median / none.median,
               (double)r.planned / 1e6, (double)r.measured / 1e6, (double)r.arena / 1e6);
        fflush(stdout);
    }
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return 0;
}
