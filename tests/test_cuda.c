/*
 * test_cuda.c - the cuda backend (make test-cuda; built in every build, it reports
 * skipped where the library has no cuda backend or the machine no GPU).
 *
 * 1. Gradients against the reference backend: ResNet-18, DenseNet-121 and GoogLeNet
 *    (batch 2, 64x64: convolution, batch norm, ReLU, both poolings, global average
 *    pooling, add, concat, linear, dropout, the losses), plan none, one
 *    remat_trainer_gradients from the same seed and batch on each: the loss within 1e-4
 *    relative, the whole gradient within 1e-3 relative L2 and each element within 1e-3
 *    of the largest.
 * 2. Three training steps under every strategy, planned with the cuda backend's kernels
 *    (cuDNN's deterministic algorithms, chosen by free memory): parameters bit-identical
 *    to `none` run with the same algorithms, measured peak equal to the planned one
 *    (arena high-water mark, the steps' workspace included), host tier too.
 */
#include "harness.h"

#include "exec/exec.h"
#include "kernels_util.h"

#include <math.h>

static const char *const models[] = {"resnet18", "densenet121", "googlenet"};

/* A cuda trainer for s, or NULL (skipped: no backend or no GPU). */
static remat_trainer *cuda_trainer(const remat_graph *g, const remat_tgraph *tg,
                                   const remat_schedule *s, bool *skip)
{
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *t = NULL;
    remat_status st;

    to.backend = REMAT_BACKEND_CUDA;
    st = remat_trainer_new(g, tg, s, &to, &t);
    *skip = st == REMAT_ERR_UNSUPPORTED;
    if (st && !*skip)
        CHECK(false, "cuda trainer: %s", remat_errmsg());
    return t;
}

static void test_gradients(void)
{
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        remat_zoo_opts zo = {.batch = 2, .height = 64, .width = 64, .classes = 10};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        remat_trainer *tc = NULL, *tr = NULL;
        remat_train_opts ro = remat_train_opts_default();
        double lc, lr, d2 = 0, w2 = 0, dmax = 0, wmax = 0;
        bool skip;

        if (remat_zoo_build(models[m], &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
            remat_plan_none(tg, &s)) {
            CHECK(false, "%s: %s", models[m], remat_errmsg());
            goto next;
        }
        tc = cuda_trainer(g, tg, s, &skip);
        if (skip) {
            SKIP("%s", remat_errmsg());
            goto next;
        }
        if (!tc)
            goto next;
        CHECK_OK(remat_trainer_new(g, tg, s, &ro, &tr));
        if (!tr)
            goto next;
        CHECK_OK(remat_trainer_gradients(tc, NULL, NULL, &lc));
        CHECK_OK(remat_trainer_gradients(tr, NULL, NULL, &lr));
        CHECK(fabs(lc - lr) <= 1e-4 * fabs(lr), "%s: loss cuda %.9g, ref %.9g", models[m], lc, lr);
        for (size_t i = 0; i < tr->n_param_floats; i++) {
            double want = tr->block[tr->n_param_floats + i];
            double d = tc->block[tc->n_param_floats + i] - want;

            d2 += d * d;
            w2 += want * want;
            dmax = fmax(dmax, fabs(d));
            wmax = fmax(wmax, fabs(want));
        }
        printf("  %s: loss %.7f / %.7f, gradient relative L2 error %.2g, largest %.2g of max\n",
               models[m], lc, lr, sqrt(d2 / w2), dmax / wmax);
        CHECK(sqrt(d2 / w2) <= 1e-3 && dmax <= 1e-3 * wmax, "%s: gradients differ: %.3g, %.3g",
              models[m], sqrt(d2 / w2), dmax / wmax);
    next:
        remat_trainer_free(tc);
        remat_trainer_free(tr);
        remat_schedule_free(s);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/* Three steps of sched: checksum; measured == planned (device and host tier). */
static uint64_t three_steps(const remat_graph *g, const remat_tgraph *tg,
                            const remat_schedule *sched, const char *what)
{
    remat_train_stats st;
    remat_trainer *t;
    uint64_t sum;
    double loss;
    bool skip;

    t = cuda_trainer(g, tg, sched, &skip);
    if (!t)
        return 0;
    for (int i = 0; i < 3; i++)
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    remat_trainer_stats(t, &st);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "%s: measured %zu, planned %zu", what,
          st.measured_peak_bytes, st.planned_peak_bytes);
    CHECK(st.measured_host_bytes == st.planned_host_bytes, "%s: host tier measured %zu, planned "
          "%zu", what, st.measured_host_bytes, st.planned_host_bytes);
    sum = remat_trainer_param_checksum(t);
    remat_trainer_free(t);
    return sum;
}

static void test_strategies(void)
{
    remat_zoo_opts zo = {.batch = 4, .height = 64, .width = 64, .classes = 10};
    remat_train_opts to = remat_train_opts_default();
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_algos *al = NULL;
    remat_status st;

    to.backend = REMAT_BACKEND_CUDA;
    if (remat_zoo_build("resnet18", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "%s", remat_errmsg());
        goto out;
    }
    st = remat_train_algos(g, tg, &to, &al);
    if (st == REMAT_ERR_UNSUPPORTED) {
        SKIP("%s", remat_errmsg());
        goto out;
    }
    CHECK_OK(st);
    for (int s = 1; al && s < REMAT_STRATEGY_COUNT; s++) {
        remat_plan_opts po = {.strategy = (remat_strategy)s, .budget_min = true, .algos = al,
                              .max_lower_sets = 20000, .time_limit = 3};
        remat_schedule *sched = NULL, *mirror = NULL;

        if (remat_plan(tg, &po, &sched, NULL)) {
            printf("  %s: not planned (%s)\n", remat_strategy_name((remat_strategy)s),
                   remat_errmsg());
            continue;
        }
        /* none with this plan's algorithms: the same kernels, so the same bits */
        mirror = none_with_kernels_of(tg, sched);
        CHECK(three_steps(g, tg, sched, remat_strategy_name((remat_strategy)s)) ==
                  three_steps(g, tg, mirror, "none with the same kernels"),
              "%s: parameters differ from none's with the same kernels",
              remat_strategy_name((remat_strategy)s));
        remat_schedule_free(mirror);
        remat_schedule_free(sched);
    }
out:
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_gradients);
    RUN(test_strategies);
    return harness_end();
}
