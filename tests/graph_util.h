/*
 * graph_util.h - what the graph tests share: a new graph, one-input ops, and checks of a
 * value's shape and of a failed call's status and message.
 */
#ifndef REMAT_TEST_GRAPH_UTIL_H
#define REMAT_TEST_GRAPH_UTIL_H

#include "harness.h"

#include "graph/graph.h" /* an op's backward FLOPs and its attributes with defaults */

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Checks a value's shape against (d0, ..., d{ndim-1}). */
#define CHECK_SHAPE(g, v, nd, ...)                                                       \
    do {                                                                                 \
        const int64_t want_[] = {__VA_ARGS__};                                           \
        int64_t got_[4] = {0, 0, 0, 0};                                                  \
        int n_ = remat_graph_value_shape((g), (v), got_);                                \
        CHECK_I64(n_, (nd));                                                             \
        for (int i_ = 0; i_ < (nd) && i_ < 4; i_++)                                      \
            CHECK(got_[i_] == want_[i_], "value %d dim %d = %lld, expected %lld",        \
                  (int)(v), i_, (long long)got_[i_], (long long)want_[i_]);              \
    } while (0)

/* Checks that the last call failed with status st and a message that names `name`. */
#define CHECK_FAILED(g, id, st, name)                                                    \
    do {                                                                                 \
        CHECK_I64((id), -1);                                                             \
        CHECK(remat_graph_status(g) == (st), "status %s, expected %s",                   \
              remat_status_name(remat_graph_status(g)), remat_status_name(st));          \
        CHECK(strstr(remat_errmsg(), (name)) != NULL, "message '%s' does not name '%s'", \
              remat_errmsg(), (name));                                                   \
    } while (0)

static inline remat_graph *new_graph(void)
{
    remat_graph *g = NULL;
    remat_status s = remat_graph_new(NULL, &g);

    REMAT_ASSERT_TEST(s == REMAT_OK && g);
    return g;
}

static inline int32_t input4(remat_graph *g, int64_t n, int64_t c, int64_t h, int64_t w)
{
    int64_t shape[4] = {n, c, h, w};

    return remat_graph_input(g, "x", 4, shape);
}

static inline int32_t add1(remat_graph *g, remat_op op, int32_t x, const remat_attrs *at,
                           const char *name)
{
    return remat_graph_add(g, op, &x, 1, at, name);
}

#endif
