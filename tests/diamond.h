/*
 * diamond.h - the simulator tests' hand-worked graph (test_sim.c, test_algos.c): a
 * diamond with a flatten view, a linear layer and a loss, its `none` schedule with the
 * live bytes after each step worked by hand, and the macros of hand-built schedules.
 */
#ifndef REMAT_TESTS_DIAMOND_H
#define REMAT_TESTS_DIAMOND_H

#include "sim_util.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Steps of hand-built schedules: FW(op), BW(op), FR(buffer). */
#define FW(op) {REMAT_STEP_FWD, (op)}
#define BW(op) {REMAT_STEP_BWD, (op)}
#define FR(buf) {REMAT_STEP_FREE, (buf)}
#define OF(buf) {REMAT_STEP_OFFLOAD, (buf)}
#define PF(buf) {REMAT_STEP_PREFETCH, (buf)}
#define WT(buf) {REMAT_STEP_WAIT, (buf)}

/* ------------------------------------------------------------- the diamond */

/*
 * x (1,2,4,4) -> conv 4 out k1 (no bias) = a -> relu = b -> relu = c; add(b, c) = d
 * -> flatten -> linear 3 (no bias) -> softmax_ce against 1 label.
 *
 * b is read by two ops (relu c and add): its gradient has two contributions.
 *
 * Value ids: 0 x, 1 labels, 2 conv.weight, 3 a, 4 b, 5 c, 6 d, 7 flatten (view of 6),
 * 8 fc.weight, 9 logits, 10 loss, 11 probs; n_values = 12, so gradient buffers are
 * 12 + v: g(a) 15, g(b) 16, g(c) 17, g(d) 18 (= g(7)), g(logits) 21.
 * Op ids: 0 conv, 1 relu b, 2 relu c, 3 add, 4 flatten, 5 linear, 6 softmax_ce.
 *
 * Sizes: a, b, c, d: 64 elements * 4 = 256 bytes; logits (1,3) 12 -> 64, loss 4 -> 64,
 * probs 12 -> 64. Backward reads: conv x (resident); relu its output; add nothing;
 * linear its input (buffer 6); softmax_ce probs.
 */
enum { D_A = 3, D_B, D_C, D_D, D_FLAT, D_W, D_LOGITS, D_LOSS, D_PROBS, D_NV };
enum { G_A = D_NV + D_A, G_B = D_NV + D_B, G_C = D_NV + D_C, G_D = D_NV + D_D,
       G_LOGITS = D_NV + D_LOGITS };

static inline remat_graph *build_diamond(void)
{
    remat_graph *g = new_graph();
    int32_t x, lab, a, b, c, d, f, l, loss, in[2];

    x = remat_graph_input(g, "x", 4, (int64_t[]){1, 2, 4, 4});
    lab = remat_graph_labels(g, "labels", 1);
    a = remat_graph_add(g, REMAT_OP_CONV2D, &x, 1,
                        &(remat_attrs){.out_channels = 4, .kh = 1, .kw = 1}, "a");
    b = remat_graph_add(g, REMAT_OP_RELU, &a, 1, NULL, "b");
    c = remat_graph_add(g, REMAT_OP_RELU, &b, 1, NULL, "c");
    in[0] = b, in[1] = c;
    d = remat_graph_add(g, REMAT_OP_ADD, in, 2, NULL, "d");
    f = remat_graph_add(g, REMAT_OP_FLATTEN, &d, 1, NULL, "flat");
    l = remat_graph_add(g, REMAT_OP_LINEAR, &f, 1, &(remat_attrs){.out_channels = 3}, "fc");
    in[0] = l, in[1] = lab;
    loss = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce");
    REMAT_ASSERT_TEST(a == D_A && b == D_B && c == D_C && d == D_D && f == D_FLAT &&
                      l == D_LOGITS && loss == D_LOSS && remat_graph_n_values(g) == D_NV);
    REMAT_ASSERT_TEST(remat_graph_set_loss(g, loss) == REMAT_OK);
    return g;
}

/* The diamond's forward, no frees, and a full backward in reverse order. */
static const remat_step diamond_nofree[] __attribute__((unused)) = {
    FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6), BW(6), BW(5), BW(3), BW(2), BW(1), BW(0),
};

/*
 * The `none` schedule of the diamond, worked by hand: each buffer freed after the
 * last step that reads or writes it. Live bytes after each step on the right.
 */
static const remat_step diamond_none[] = {
    FW(0),                   /* +a                    256 */
    FW(1), FR(D_A),           /* +b 512, a last read   256 */
    FW(2),                   /* +c                    512 */
    FW(3),                   /* +d                    768 */
    FW(4),                   /* view                  768 */
    FW(5),                   /* +logits               832 */
    FW(6), FR(D_LOGITS), FR(D_LOSS), /* +loss +probs 960 -> 832 */
    BW(6), FR(D_PROBS),       /* +g(logits) 896 ->     832 */
    BW(5), FR(D_D), FR(G_LOGITS), /* +g(d) 1088 ->      768 */
    BW(3), FR(G_D),           /* +g(b) +g(c) 1280 ->  1024 */
    BW(2), FR(D_C), FR(G_C),   /* g(b) live 1024 ->     512 */
    BW(1), FR(D_B), FR(G_B),   /* +g(a) 768 ->          256 */
    BW(0), FR(G_A),           /* 256 ->                  0 */
};

#endif
