/*
 * baseline.c - the `none` baseline against keeping everything: for the paper's seven
 * networks from the zoo (at the paper's batch and input sizes) and the authors' seven
 * graph dumps, the activation peak of `none`, its ratio to 2 M(V) (nothing ever
 * freed), the largest single step's need, and the time to build, plan and simulate.
 * Prints a markdown table.
 */
#include "bench.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int row(const char *label, remat_tgraph *tg, double t0)
{
    remat_schedule *s = NULL;
    remat_sim_result r;

    if (remat_plan_none(tg, &s) || remat_sim_run(tg, s, &r)) {
        fprintf(stderr, "baseline: %s: %s\n", label, remat_errmsg());
        remat_schedule_free(s);
        return 1;
    }
    printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.1f |\n", label,
           remat_tgraph_n_planned(tg), (double)r.naive_bytes / 1e9,
           (double)r.activation_peak_bytes / 1e9, (double)r.activation_peak_bytes /
           (double)r.naive_bytes, (double)r.lower_bound_bytes / 1e9,
           (double)r.activation_peak_bytes / (double)r.lower_bound_bytes, (now() - t0) * 1e3);
    remat_schedule_free(s);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int64_t batch;
    } zoo[] = {{"resnet50", 32}, {"resnet152", 32}, {"vgg19", 32}, {"densenet161", 32},
               {"googlenet", 32}, {"unet", 8}, {"pspnet", 1}};
    static const char *const dumps[] = {"cg_resnet50.txt", "cg_resnet152.txt", "cg_vgg19.txt",
                                        "cg_densenet.txt", "cg_googlenet.txt", "cg_unet.txt",
                                        "cg_pspnet.txt"};
    const char *dir = argc > 1 ? argv[1] : getenv("REMAT_GRAPHS");
    int rc = 0;

    if (!dir)
        dir = "../shared/graphs/kusumoto";
    printf("### The `none` baseline\n\nGB = 10^9 bytes. *naive* keeps every forward value and "
           "its gradient (2 M(V)); *lower* is the largest single step's need; *ms* builds, "
           "plans and simulates.\n\n");
    printf("| model | V | naive GB | none GB | none/naive | lower GB | none/lower | ms |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        remat_zoo_opts o = {.batch = zoo[i].batch};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        char label[64];
        double t0 = now();

        snprintf(label, sizeof label, "%s (zoo, batch %lld)", zoo[i].name,
                 (long long)zoo[i].batch);
        if (remat_zoo_build(zoo[i].name, &o, NULL, &g) ||
            remat_tgraph_from_graph(g, NULL, &tg)) {
            fprintf(stderr, "baseline: %s: %s\n", zoo[i].name, remat_errmsg());
            rc = 1;
        } else {
            rc |= row(label, tg, t0);
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
    for (size_t i = 0; i < sizeof dumps / sizeof dumps[0]; i++) {
        char path[1024];
        remat_tgraph *tg = NULL;
        double t0 = now();

        snprintf(path, sizeof path, "%s/%s", dir, dumps[i]);
        if (remat_tgraph_read_dump(path, NULL, NULL, &tg)) {
            printf("| %s | skipped: %s | | | | | | |\n", dumps[i], remat_errmsg());
            continue;
        }
        rc |= row(dumps[i], tg, t0);
        remat_tgraph_free(tg);
    }
    return rc;
}
