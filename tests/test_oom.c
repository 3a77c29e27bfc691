/*
 * test_oom.c - allocation failures: an allocator that fails the N-th allocation, for
 * every N until the work succeeds, over building zoo models, autodiff, planning,
 * simulation and reading a graph dump. Each failure must come back as
 * REMAT_ERR_NOMEM, and nothing may leak (every block is tracked with its size, which
 * must also match what the library says when it frees it).
 */
#include "harness.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

struct failing {
    long count, fail_at; /* fail the fail_at-th allocation (1-based); 0: never */
    long live_blocks;
    long size_mismatches;
};

#define HDR 16

static void *fail_alloc(void *ud, void *ptr, size_t old_size, size_t new_size)
{
    struct failing *f = ud;
    char *base = ptr ? (char *)ptr - HDR : NULL;

    if (base && *(size_t *)base != old_size)
        f->size_mismatches++;
    if (new_size == 0) {
        if (base) {
            f->live_blocks--;
            free(base);
        }
        return NULL;
    }
    if (++f->count == f->fail_at)
        return NULL;
    base = realloc(base, new_size + HDR);
    if (!base)
        return NULL;
    if (!ptr)
        f->live_blocks++;
    *(size_t *)base = new_size;
    return base + HDR;
}

typedef remat_status (*work_fn)(const remat_allocator *a, const void *arg);

static remat_status zoo_work(const remat_allocator *a, const void *arg)
{
    remat_zoo_opts o = {.batch = 2};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;
    remat_status st;

    if (!(st = remat_zoo_build(arg, &o, a, &g)) && !(st = remat_tgraph_from_graph(g, NULL, &tg)) &&
        !(st = remat_plan_none(tg, &s)))
        st = remat_sim_run(tg, s, &r);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return st;
}

/* The offloading planners at their least budget, then the simulator. */
static remat_status offload_work(const remat_allocator *a, const void *arg)
{
    remat_zoo_opts o = {.batch = 2, .height = 32, .width = 32};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;
    remat_status st;

    if (!(st = remat_zoo_build(arg, &o, a, &g)) && !(st = remat_tgraph_from_graph(g, NULL, &tg)))
        for (int k = 0; k < 2 && !st; k++) {
            remat_plan_opts po = {.strategy = k ? REMAT_STRATEGY_HYBRID
                                                : REMAT_STRATEGY_SUPERNEURONS,
                                  .budget_min = true};

            if (!(st = remat_plan(tg, &po, &s, NULL)))
                st = remat_sim_run(tg, s, &r);
            remat_schedule_free(s);
            s = NULL;
        }
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return st;
}

static remat_status dump_work(const remat_allocator *a, const void *arg)
{
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;
    remat_status st;

    if (!(st = remat_tgraph_read_dump(arg, NULL, a, &tg)) && !(st = remat_plan_none(tg, &s)))
        st = remat_sim_run(tg, s, &r);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    return st;
}

/* Runs work with the N-th allocation failing for N = 1, 2, ... until it succeeds. */
static void oom_loop(const char *what, work_fn work, const void *arg)
{
    long n, bad_status = 0, leaks = 0, mismatches = 0;

    for (n = 1;; n++) {
        struct failing f = {.fail_at = n};
        remat_allocator a = {fail_alloc, &f};
        remat_status st = work(&a, arg);

        leaks += f.live_blocks != 0;
        mismatches += f.size_mismatches;
        if (st == REMAT_OK)
            break;
        if (st != REMAT_ERR_NOMEM && bad_status++ < 3)
            printf("  %s: failing allocation %ld gave %s: %s\n", what, n,
                   remat_status_name(st), remat_errmsg());
        if (n > 2000000)
            break;
    }
    printf("  %s: %ld allocations failed one by one\n", what, n - 1);
    CHECK(n > 1, "%s allocates", what);
    CHECK(n <= 2000000, "%s never succeeded", what);
    CHECK(bad_status == 0, "%s: %ld failures reported another status", what, bad_status);
    CHECK(leaks == 0, "%s: %ld runs leaked", what, leaks);
    CHECK(mismatches == 0, "%s: %ld frees gave a wrong size", what, mismatches);
}

static void test_oom_zoo(void)
{
    oom_loop("mlp", zoo_work, "mlp");
    oom_loop("resnet18", zoo_work, "resnet18");
    oom_loop("googlenet", zoo_work, "googlenet");
    oom_loop("unet", zoo_work, "unet");
    oom_loop("resnet18 offload plans", offload_work, "resnet18");
}

static void test_oom_dump(void)
{
    const char *dir = harness_graphs_dir();
    char path[512];

    if (!dir) {
        SKIP("../shared/graphs/kusumoto is absent");
        return;
    }
    snprintf(path, sizeof path, "%s/cg_googlenet.txt", dir);
    oom_loop("cg_googlenet.txt", dump_work, path);
}

int main(void)
{
    RUN(test_oom_zoo);
    RUN(test_oom_dump);
    return harness_end();
}
