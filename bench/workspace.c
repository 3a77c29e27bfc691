/*
 * workspace.c - the convolution algorithms of the cpu backend and what choosing them by
 * free memory buys. Prints markdown tables.
 *
 * 1. Ranking: every distinct convolution of ResNet-50 (batch 8, 224x224), forward and
 *    backward, run with each algorithm the backend offers (GEMM, blocked direct,
 *    Winograd) on random data: the median of 3 timed runs after a warm-up, and the
 *    scratch each takes. The backend ranks algorithms without running them
 *    (cpu_conv_algos); the table says how often its first is the measured fastest and
 *    what its order costs against the measured best.
 * 2. Trade-off: ResNet-50 trained (median of 3 steps after a warm-up) under plans that
 *    choose the kernels: `none` at budgets from its peak with every convolution at its
 *    fastest down to its least peak, each convolution at the fastest algorithm whose
 *    scratch fits; with GEMM everywhere (what the backend ran before it had a choice)
 *    and direct everywhere; approx-mc at its least budget, fit and GEMM. Planned peak
 *    (= measured, checked) and step time.
 *
 * usage: bench/workspace [threads (default: 2)] [batch (default: 8)]
 */
#include "bench.h"
#include "exec/backend.h"
#include "graph/graph.h"
#include "kernels/cpu/cpu.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A tensor of value v's shape with random data in [-1, 1). */
static struct ktensor rand_tensor(const remat_graph *g, int32_t v)
{
    const struct gvalue *gv = graph_value(g, v);
    struct ktensor t = {NULL, {0, 0, 0, 0}, gv->ndim};
    int64_t n = graph_numel(gv);

    memcpy(t.shape, gv->shape, sizeof t.shape);
    t.data = aligned_alloc(64, (size_t)(n * 4 + 63) / 64 * 64);
    if (!t.data) {
        fprintf(stderr, "workspace: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        t.data[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return t;
}

/* The median seconds of 3 runs of op's pass with algorithm a after a warm-up; -1 when
 * the algorithm cannot run it. *need: its scratch. */
static double time_algo(const struct backend_ops *be, void *ctx, struct kop *k, bool bwd,
                        int32_t a, size_t *need)
{
    double t[3];
    void *sc = NULL;

    k->algo = a;
    if (be->prepare(ctx, k, bwd, need)) {
        core_clear_error();
        return -1;
    }
    if (*need && !(sc = aligned_alloc(64, (*need + 63) / 64 * 64))) {
        fprintf(stderr, "workspace: out of memory\n");
        exit(1);
    }
    k->scratch = sc;
    k->scratch_bytes = *need;
    for (int r = -1; r < 3; r++) {
        double t0 = now();

        if ((bwd ? be->backward : be->forward)(ctx, k)) {
            fprintf(stderr, "workspace: %s\n", remat_errmsg());
            exit(1);
        }
        if (r >= 0)
            t[r] = now() - t0;
    }
    k->scratch = NULL;
    free(sc);
    qsort(t, 3, sizeof *t, cmp_d);
    return t[1];
}

static void ranking(const remat_graph *g, int threads)
{
    const struct backend_ops *be = backend_cpu();
    remat_train_opts to = remat_train_opts_default();
    void *ctx = NULL;
    char seen[128][96];
    int n_seen = 0, n_cases = 0, n_first_best = 0;
    double t_first = 0, t_best = 0, t_gemm = 0;

    to.backend = REMAT_BACKEND_CPU;
    to.threads = threads;
    if (!be || be->create(&to, &ctx)) {
        printf("cpu backend unavailable\n");
        return;
    }
    printf("### Convolution algorithms, ResNet-50 (each distinct convolution once)\n\n"
           "| convolution | pass | gemm ms (MB) | direct ms (MB) | winograd ms (MB) | ranked "
           "first | measured fastest |\n|---|---|---|---|---|---|---|\n");
    for (size_t o = 0; o < g->ops.n; o++) {
        const struct gop *op = graph_op(g, (int32_t)o);
        const struct gvalue *x, *y;
        char key[96];
        int dup = 0;

        if (op->type != REMAT_OP_CONV2D)
            continue;
        x = graph_value(g, op->in[0]);
        y = graph_value(g, op->out);
        snprintf(key, sizeof key, "%lldx%lldx%lld k%d s%d -> %lld", (long long)x->shape[1],
                 (long long)x->shape[2], (long long)x->shape[3], op->at.kh, op->at.sh,
                 (long long)y->shape[1]);
        for (int i = 0; i < n_seen; i++)
            dup = dup || !strcmp(seen[i], key);
        if (dup || n_seen == 128)
            continue;
        strcpy(seen[n_seen++], key);
        for (int bwd = 0; bwd < 2; bwd++) {
            struct ktensor in = rand_tensor(g, op->in[0]), din = rand_tensor(g, op->in[0]);
            struct kop k = {.type = op->type, .at = &op->at, .n_in = 1, .in = &in,
                            .din = &din, .out = rand_tensor(g, op->out),
                            .w = rand_tensor(g, op->in[1]), .dw = rand_tensor(g, op->in[1]),
                            .dout = rand_tensor(g, op->out)};
            double ms[CPU_N_ALGOS], best = -1;
            size_t need[CPU_N_ALGOS];
            int32_t ids[CPU_N_ALGOS], n = cpu_algos(&k, bwd, ids), fastest = -1, first = -1;

            for (int32_t a = 0; a < CPU_N_ALGOS; a++)
                ms[a] = -1;
            for (int32_t j = 0; j < n; j++) {
                int32_t a = ids[j];

                ms[a] = 1e3 * time_algo(be, ctx, &k, bwd, a, &need[a]);
                if (ms[a] >= 0 && first < 0)
                    first = a;
                if (ms[a] >= 0 && (best < 0 || ms[a] < best)) {
                    best = ms[a];
                    fastest = a;
                }
            }
            printf("| %s | %s |", key, bwd ? "backward" : "forward");
            for (int32_t a = 0; a < CPU_N_ALGOS; a++)
                if (ms[a] >= 0)
                    printf(" %.2f (%.1f) |", ms[a], (double)need[a] / 1048576.0);
                else
                    printf(" - |");
            printf(" %s | %s |\n", cpu_algo_name(first), cpu_algo_name(fastest));
            n_cases++;
            n_first_best += first == fastest;
            t_first += ms[first];
            t_best += best;
            t_gemm += ms[CPU_ALGO_GEMM];
            free(in.data);
            free(din.data);
            free(k.out.data);
            free(k.w.data);
            free(k.dw.data);
            free(k.dout.data);
        }
    }
    printf("\nThe backend's first choice is the measured fastest in %d of %d cases; summed "
           "over the distinct convolutions its first choices take %.1f ms, the measured "
           "fastest %.1f ms (%.3fx), GEMM everywhere %.1f ms (%.2fx the first choices).\n\n",
           n_first_best, n_cases, t_first, t_best, t_first / t_best, t_gemm, t_gemm / t_first);
    be->destroy(ctx);
}

/* Trains under plan options po: planned (= measured) peak and median step. */
static void trade_row(const remat_graph *g, const remat_tgraph *tg, const remat_algos *al,
                      remat_plan_opts po, const char *label, int threads)
{
    remat_train_opts to = remat_train_opts_default();
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    remat_plan_info pi;
    remat_train_stats st;
    double secs[3], loss;

    to.backend = REMAT_BACKEND_CPU;
    to.threads = threads;
    po.algos = al;
    po.max_lower_sets = 20000;
    if (remat_plan(tg, &po, &s, &pi) || remat_trainer_new(g, tg, s, &to, &t) ||
        remat_trainer_step(t, NULL, NULL, &loss)) {
        printf("| %s | failed: %s |\n", label, remat_errmsg());
        remat_trainer_free(t);
        remat_schedule_free(s);
        return;
    }
    for (int k = 0; k < 3; k++) {
        double t0 = now();

        remat_trainer_step(t, NULL, NULL, &loss);
        secs[k] = now() - t0;
    }
    qsort(secs, 3, sizeof *secs, cmp_d);
    remat_trainer_stats(t, &st);
    printf("| %s | %.1f | %s | %d of %d | %.1f | %.3f |\n", label,
           (double)st.planned_peak_bytes / 1048576.0,
           st.measured_peak_bytes == st.planned_peak_bytes ? "yes" : "NO", pi.n_algo_fastest,
           pi.n_algo_choices, (double)st.workspace_bytes / 1048576.0, secs[1]);
    remat_trainer_free(t);
    remat_schedule_free(s);
}

static void tradeoff(const remat_graph *g, const remat_tgraph *tg, int threads)
{
    remat_train_opts to = remat_train_opts_default();
    remat_algos *al = NULL;
    remat_schedule *s = NULL;
    remat_plan_info pi;
    remat_sim_result rn, rm;
    size_t resident = remat_tgraph_resident_bytes(tg);

    to.backend = REMAT_BACKEND_CPU;
    to.threads = threads;
    if (remat_train_algos(g, tg, &to, &al)) {
        printf("kernels: %s\n", remat_errmsg());
        return;
    }
    /* none's peak with the fastest kernels and with the least scratch: budgets between */
    if (remat_plan(tg, &(remat_plan_opts){.algos = al}, &s, NULL) || remat_sim_run(tg, s, &rn)) {
        printf("plan: %s\n", remat_errmsg());
        goto out;
    }
    remat_schedule_free(s);
    s = NULL;
    if (remat_plan(tg, &(remat_plan_opts){.budget_min = true, .algos = al}, &s, &pi) ||
        remat_sim_run(tg, s, &rm)) {
        printf("plan: %s\n", remat_errmsg());
        goto out;
    }
    printf("### Training under plans that choose the kernels, ResNet-50\n\n"
           "The same `none` schedule at budgets from its peak with every convolution at its\n"
           "fastest down to its least peak (each step with its least scratch); then GEMM or\n"
           "direct everywhere, and approx-mc at its least budget.\n\n"
           "| plan | activation peak MiB (scratch included) | measured = planned | "
           "convolution passes at their fastest | largest scratch MiB | step s |\n"
           "|---|---|---|---|---|---|\n");
    for (int k = 4; k >= 0; k--) {
        size_t act = rm.activation_peak_bytes +
                     (size_t)((double)(rn.activation_peak_bytes - rm.activation_peak_bytes) *
                              k / 4.0);
        char label[96];

        snprintf(label, sizeof label, "none, fit, budget %.1f MiB + resident",
                 (double)act / 1048576.0);
        if (k == 0)
            trade_row(g, tg, al, (remat_plan_opts){.budget_min = true}, "none, fit, least budget",
                      threads);
        else
            trade_row(g, tg, al, (remat_plan_opts){.budget_bytes = act + resident}, label,
                      threads);
    }
    trade_row(g, tg, al, (remat_plan_opts){.conv_algo = "gemm"}, "none, gemm everywhere",
              threads);
    trade_row(g, tg, al, (remat_plan_opts){.conv_algo = "direct"}, "none, direct everywhere",
              threads);
    trade_row(g, tg, al, (remat_plan_opts){.strategy = REMAT_STRATEGY_APPROX_MC,
                                           .budget_min = true},
              "approx-mc, fit, least budget", threads);
    trade_row(g, tg, al, (remat_plan_opts){.strategy = REMAT_STRATEGY_APPROX_MC,
                                           .budget_min = true, .conv_algo = "gemm"},
              "approx-mc, gemm everywhere, least budget", threads);
    printf("\n");
out:
    remat_schedule_free(s);
    remat_algos_free(al);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int64_t batch = argc > 2 ? atoll(argv[2]) : 8;
    remat_zoo_opts zo = {.batch = batch, .height = 224, .width = 224};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;

    if (threads < 1 || batch < 1) {
        fprintf(stderr, "usage: workspace [threads] [batch]\n");
        return 2;
    }
    if (remat_zoo_build("resnet50", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        fprintf(stderr, "workspace: %s\n", remat_errmsg());
        return 1;
    }
    printf("ResNet-50, batch %lld, 224x224, cpu backend, %d threads.\n\n", (long long)batch,
           threads);
    ranking(g, threads);
    tradeoff(g, tg, threads);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return 0;
}
