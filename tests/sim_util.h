/*
 * sim_util.h - helpers shared by the simulator tests (test_sim.c, test_sim_random.c):
 * a schedule from an array of steps, an empty graph, and a graph's training graph.
 * Each test program includes this header once; a broken fixture stops the program
 * (REMAT_ASSERT_TEST), it is not a test failure.
 */
#ifndef REMAT_SIM_UTIL_H
#define REMAT_SIM_UTIL_H

#include "harness.h"
#include "sched/schedule.h"

/* A schedule holding st[0..n) in order, built with the internal schedule_push. */
static inline remat_schedule *make_schedule(const remat_step *st, size_t n)
{
    remat_schedule *s = NULL;

    REMAT_ASSERT_TEST(schedule_new(NULL, &s) == REMAT_OK);
    for (size_t i = 0; i < n; i++)
        REMAT_ASSERT_TEST(schedule_push(s, st[i].kind, st[i].id) == REMAT_OK);
    return s;
}

/* A new, empty graph. */
static inline remat_graph *new_graph(void)
{
    remat_graph *g = NULL;

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK && g);
    return g;
}

/* The training graph of g under the given cost model; prints autodiff's message if
 * that fails. */
static inline remat_tgraph *to_tgraph(remat_graph *g, remat_cost cost)
{
    remat_tgraph_opts o = {.cost = cost};
    remat_tgraph *tg = NULL;
    remat_status s = remat_tgraph_from_graph(g, &o, &tg);

    if (s)
        printf("  autodiff: %s\n", remat_errmsg());
    REMAT_ASSERT_TEST(s == REMAT_OK && tg);
    return tg;
}

#endif
