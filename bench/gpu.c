/*
 * gpu.c - the cuda backend against PyTorch on the same GPU (tools/bench_torch_gpu.py,
 * run with the machine's python3, which must have PyTorch with CUDA). Prints markdown
 * tables; on a machine without a GPU (or a build without CUDA=1) it says so and stops.
 *
 * 1. Speed: ResNet-50, batch 64, 224x224: median step of remat `none` (each convolution
 *    at cuDNN's fastest deterministic algorithm) against PyTorch's, as images/s and their
 *    ratio.
 * 2. Peak memory, ResNet-50 batch 64: each strategy's measured peak (resident bytes, the
 *    arena's high-water mark with the kernels' workspace; equal to the plan's) against
 *    torch.cuda.max_memory_allocated without and with torch.utils.checkpoint (4
 *    segments).
 * 3. The largest batch of ResNet-50 under a 12 GiB cap: remat none, approx-mc and hybrid
 *    (offloading to pinned host memory) found by bisection on the plan and confirmed by a
 *    step; PyTorch's by bisection on its max_memory_allocated (plain, checkpointed).
 * 4. The deepest ResNet (3, 8, k, 3) in 12 GiB at batch 16: remat's strategies (as `remat
 *    depth`), PyTorch's plain ResNet of the same family by bisection.
 *
 * usage: bench/gpu [python (default: python3)]
 */
#include "bench.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAP ((size_t)12 << 30)

static const char *python = "python3";
static char args_buf[256];

/* Runs the PyTorch peer with args; the value of key in its output (-1: none). */
static double torch_value(const char *args, const char *key)
{
    char cmd[512], line[256];
    double v = -1;
    size_t kl = strlen(key);
    FILE *p;

    snprintf(cmd, sizeof cmd, "%s tools/bench_torch_gpu.py %s 2>/dev/null", python, args);
    p = popen(cmd, "r");
    if (!p)
        return -1;
    while (fgets(line, sizeof line, p))
        if (!strncmp(line, key, kl) && line[kl] == '=')
            v = atof(line + kl + 1);
    pclose(p);
    return v;
}

struct run {
    bool ok;
    double step;
    size_t peak; /* resident + measured arena peak */
};

/* Plans model at batch with strategy s (budget: 0 none, else the cap; least: the
 * strategy's least budget) and trains steps steps after a warm-up on the cuda backend. */
static struct run remat_run(const char *model, int64_t batch, remat_strategy s, size_t budget,
                            bool least, int steps)
{
    remat_zoo_opts zo = {.batch = batch, .height = 224, .width = 224};
    remat_train_opts to = remat_train_opts_default();
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_algos *al = NULL;
    remat_schedule *sc = NULL;
    remat_trainer *t = NULL;
    remat_train_stats st;
    struct run r = {0};
    double loss, t0, secs[16];

    to.backend = REMAT_BACKEND_CUDA;
    if (remat_zoo_build(model, &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_train_algos(g, tg, &to, &al))
        goto out;
    {
        remat_plan_opts po = {.strategy = s, .budget_bytes = budget, .budget_min = least,
                              .algos = al, .max_lower_sets = 20000, .time_limit = 20};

        if (remat_plan(tg, &po, &sc, NULL) || remat_trainer_new(g, tg, sc, &to, &t) ||
            remat_trainer_step(t, NULL, NULL, &loss))
            goto out;
    }
    steps = steps < 16 ? steps : 16;
    for (int i = 0; i < steps; i++) {
        t0 = now();
        if (remat_trainer_step(t, NULL, NULL, &loss))
            goto out;
        secs[i] = now() - t0;
    }
    qsort(secs, (size_t)steps, sizeof *secs, cmp_d);
    remat_trainer_stats(t, &st);
    r.ok = st.measured_peak_bytes == st.planned_peak_bytes;
    r.step = steps ? secs[steps / 2] : 0; /* the median, as PyTorch's */
    r.peak = st.resident_bytes + st.measured_peak_bytes;
out:
    if (!r.ok)
        fprintf(stderr, "gpu: %s batch %lld %s: %s\n", model, (long long)batch,
                remat_strategy_name(s), remat_errmsg());
    remat_trainer_free(t);
    remat_schedule_free(sc);
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return r;
}

/* The largest batch whose plan under strategy s fits the cap (bisection on planning,
 * then one real step at the batch found). */
static int64_t max_batch(remat_strategy s)
{
    int64_t lo = 0, hi = 1;

    for (;;) {
        struct run r = remat_run("resnet50", hi, s, CAP, false, 0);

        if (!r.ok || r.peak > CAP)
            break;
        lo = hi;
        hi *= 2;
        if (hi > 65536)
            break;
    }
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        struct run r = remat_run("resnet50", mid, s, CAP, false, 0);

        if (r.ok && r.peak <= CAP)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int main(int argc, char **argv)
{
    static const remat_strategy strategies[] = {
        REMAT_STRATEGY_NONE, REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC,
        REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_SUPERNEURONS, REMAT_STRATEGY_HYBRID,
    };
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *probe = NULL;
    remat_zoo_opts zo = {.batch = 1, .height = 32, .width = 32, .classes = 10};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_status st;

    if (argc > 1)
        python = argv[1];
    to.backend = REMAT_BACKEND_CUDA;
    if (remat_zoo_build("resnet18", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_plan_none(tg, &s)) {
        fprintf(stderr, "gpu: %s\n", remat_errmsg());
        return 1;
    }
    st = remat_trainer_new(g, tg, s, &to, &probe);
    remat_trainer_free(probe);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    if (st) {
        printf("Skipped: %s.\n\n", remat_errmsg());
        return 0;
    }

    {
        struct run r = remat_run("resnet50", 64, REMAT_STRATEGY_NONE, 0, false, 10);
        double torch = torch_value("speed resnet50 64 224 10", "median_seconds");

        printf("### Speed, ResNet-50, batch 64, 224x224\n\n| | images/s |\n|---|---|\n");
        printf("| remat none | %.1f |\n| PyTorch | %.1f |\n| ratio | %.3f |\n\n",
               r.ok ? 64 / r.step : 0.0, torch > 0 ? 64 / torch : 0.0,
               r.ok && torch > 0 ? torch / r.step : 0.0);
    }
    {
        double plain = torch_value("peak resnet50 64 224 0", "max_memory_allocated");
        double ckpt = torch_value("peak resnet50 64 224 4", "max_memory_allocated");

        printf("### Peak memory, ResNet-50, batch 64 (GiB; remat: resident + measured arena "
               "peak, = planned)\n\n| | peak GiB | vs PyTorch |\n|---|---|---|\n");
        printf("| PyTorch | %.2f | 1.00 |\n| PyTorch, checkpoint_sequential (4) | %.2f | %.2f |\n",
               plain / (1 << 30), ckpt / (1 << 30), ckpt / plain);
        for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
            /* each at its least budget */
            struct run r = remat_run("resnet50", 64, strategies[i], 0,
                                     strategies[i] != REMAT_STRATEGY_NONE, 0);

            printf("| remat %s | %.2f | %.2f |\n", remat_strategy_name(strategies[i]),
                   (double)r.peak / (1 << 30), (double)r.peak / plain);
        }
        printf("\n");
    }
    {
        char args[128];
        double torch, torch_ck;

        snprintf(args, sizeof args, "maxbatch resnet50 224 %zu 0", CAP);
        torch = torch_value(args, "max_batch");
        snprintf(args, sizeof args, "maxbatch resnet50 224 %zu 4", CAP);
        torch_ck = torch_value(args, "max_batch");
        printf("### Largest batch, ResNet-50 224x224, 12 GiB\n\n| | batch | vs PyTorch |\n"
               "|---|---|---|\n| PyTorch | %.0f | 1.00 |\n| PyTorch, checkpointed | %.0f | %.2f |\n",
               torch, torch_ck, torch > 0 ? torch_ck / torch : 0.0);
        for (int i = 0; i < 3; i++) {
            remat_strategy s3[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_APPROX_MC,
                                   REMAT_STRATEGY_HYBRID};
            int64_t b = max_batch(s3[i]);

            printf("| remat %s | %lld | %.2f |\n", remat_strategy_name(s3[i]), (long long)b,
                   torch > 0 ? (double)b / torch : 0.0);
        }
        printf("\n");
    }
    {
        char cmd[1024], line[512];
        const char *slash = strrchr(argv[0], '/');
        double torch;
        FILE *p;

        snprintf(args_buf, sizeof args_buf, "maxdepth 16 224 %zu", CAP);
        torch = torch_value(args_buf, "max_depth");
        printf("### The deepest ResNet (3, 8, k, 3) in 12 GiB, batch 16, 224x224\n\n"
               "PyTorch (plain, torchvision's ResNet with bottleneck blocks [3, 8, k, 3]): "
               "depth %.0f.\n\n```\n", torch);
        fflush(stdout);
        snprintf(cmd, sizeof cmd, "%.*s/../remat depth --budget 12GiB --batch 16 "
                 "--backend cuda 2>&1", slash ? (int)(slash - argv[0]) : 1,
                 slash ? argv[0] : ".");
        p = popen(cmd, "r");
        while (p && fgets(line, sizeof line, p))
            fputs(line, stdout);
        if (p)
            pclose(p);
        printf("```\n\n");
    }
    return 0;
}
