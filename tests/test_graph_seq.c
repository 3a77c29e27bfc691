/*
 * test_graph_seq.c - the transformer ops in the graph, by hand: layer norm and GELU
 * (shapes, aux, parameters, FLOPs, eps's default, refusals), the batched matrix product
 * and the last-axis softmax (shapes, FLOPs, refusals). Every expected value is worked
 * out in the comment beside it (the formulas of src/graph/op_table_seq.c).
 */
#include "graph_util.h"

/*
 * layer_norm and gelu on x (2, 3, 4): D = 4 (the last axis), R = 24 / 4 = 6 rows.
 * Value ids: gamma and beta come before the output, the saved (mean, inverse std) right
 * after it, so for layer_norm's output ln: gamma ln - 2, beta ln - 1, aux ln + 1.
 *
 * FLOPs (op_table_seq.c), numel = 24:
 *   layer_norm forward  8 per element (mean 1, variance 3, normalize and affine 4)
 *                       = 8 * 24 = 192
 *   layer_norm backward 13 per element (x_hat 2, dy gamma 1, row sums 3, dx 4,
 *                       dgamma and dbeta 3) = 13 * 24 = 312
 *   gelu forward        9 per element (the tanh form's count) = 9 * 24 = 216
 *   gelu backward       11 per element = 11 * 24 = 264
 */
static void test_seq_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t x, ln, ge;
    int64_t p0;
    double f0;

    x = remat_graph_input(g, "x", 3, (int64_t[]){2, 3, 4});
    p0 = remat_graph_n_params(g);
    f0 = remat_graph_forward_flops(g);
    ln = add1(g, REMAT_OP_LAYER_NORM, x, NULL, "ln");
    CHECK_SHAPE(g, ln, 3, 2, 3, 4);
    CHECK_SHAPE(g, ln + 1, 2, 2, 6); /* means and inverse stds of the 6 rows */
    CHECK_SHAPE(g, ln - 2, 1, 4);    /* gamma */
    CHECK_SHAPE(g, ln - 1, 1, 4);    /* beta */
    CHECK_I64(remat_graph_n_params(g) - p0, 4 + 4);
    CHECK(graph_op(g, remat_graph_n_ops(g) - 1)->at.eps == 1e-5f, "eps 0 became %g, "
          "expected 1e-5", (double)graph_op(g, remat_graph_n_ops(g) - 1)->at.eps);
    CHECK(remat_graph_forward_flops(g) - f0 == 192.0, "layer_norm forward flops %g, "
          "expected 8 * 24 = 192", remat_graph_forward_flops(g) - f0);
    CHECK(graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops == 312.0, "layer_norm backward "
          "flops %g, expected 13 * 24 = 312", graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops);

    f0 = remat_graph_forward_flops(g);
    ge = add1(g, REMAT_OP_GELU, ln, NULL, "gelu");
    CHECK_SHAPE(g, ge, 3, 2, 3, 4);
    CHECK_I64(remat_graph_n_params(g) - p0, 8); /* gelu adds none */
    CHECK(remat_graph_forward_flops(g) - f0 == 216.0, "gelu forward flops %g, expected "
          "9 * 24 = 216", remat_graph_forward_flops(g) - f0);
    CHECK(graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops == 264.0, "gelu backward flops "
          "%g, expected 11 * 24 = 264", graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    /* a 1-d input has no rows to normalize */
    g = new_graph();
    x = remat_graph_input(g, "v", 1, (int64_t[]){8});
    ln = add1(g, REMAT_OP_LAYER_NORM, x, NULL, "ln_1d");
    CHECK_FAILED(g, ln, REMAT_ERR_SHAPE, "ln_1d");
    CHECK(strstr(remat_errmsg(), "2 to 4 dimensions") != NULL, "message '%s' does not say "
          "what the input should be", remat_errmsg());
    remat_graph_free(g);

    /* a negative eps */
    g = new_graph();
    x = remat_graph_input(g, "x", 2, (int64_t[]){3, 4});
    ln = add1(g, REMAT_OP_LAYER_NORM, x, &(remat_attrs){.eps = -1e-3f}, "ln_neg_eps");
    CHECK_FAILED(g, ln, REMAT_ERR_SHAPE, "ln_neg_eps");
    CHECK(strstr(remat_errmsg(), "eps >= 0") != NULL, "message '%s' does not name eps",
          remat_errmsg());
    remat_graph_free(g);
}

/*
 * The attention core by hand. Q (2, 3, 4) by K (2, 5, 4) with trans_b: scores (2, 3, 5),
 * forward 2 * 30 * 4 = 240 FLOPs (30 outputs, 4 terms each), backward twice that, 480;
 * A (2, 3, 4) by a shared B (4, 6): (2, 3, 6); A^T of (2, 4, 3) by B (2, 4, 5): (2, 3, 5).
 * softmax_last keeps the shape, 5 and 4 FLOPs an element: 150 and 120 over (2, 3, 5).
 * Refused: inner sizes 4 and 5, a batch axis 2 against 3, a 3-d B under a 4-d A, 1-d
 * scores.
 */
static void test_attention_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t q, k, s, b2, a3, at, p, in[2];
    double f0;

    q = remat_graph_input(g, "q", 3, (int64_t[]){2, 3, 4});
    k = remat_graph_input(g, "k", 3, (int64_t[]){2, 5, 4});
    f0 = remat_graph_forward_flops(g);
    in[0] = q;
    in[1] = k;
    s = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true}, "scores");
    CHECK_SHAPE(g, s, 3, 2, 3, 5);
    CHECK(remat_graph_forward_flops(g) - f0 == 240.0, "matmul forward flops %g, expected 240",
          remat_graph_forward_flops(g) - f0);
    CHECK(graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops == 480.0, "matmul backward flops "
          "%g, expected 480", graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops);
    f0 = remat_graph_forward_flops(g);
    p = add1(g, REMAT_OP_SOFTMAX_LAST, s, &(remat_attrs){.causal = true}, "probs");
    CHECK_SHAPE(g, p, 3, 2, 3, 5);
    CHECK(remat_graph_forward_flops(g) - f0 == 150.0 &&
          graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops == 120.0,
          "softmax_last flops %g and %g, expected 150 and 120", remat_graph_forward_flops(g) - f0,
          graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops);
    b2 = remat_graph_input(g, "w", 2, (int64_t[]){4, 6});
    in[1] = b2;
    CHECK_SHAPE(g, remat_graph_add(g, REMAT_OP_MATMUL, in, 2, NULL, "shared"), 3, 2, 3, 6);
    a3 = remat_graph_input(g, "at", 3, (int64_t[]){2, 4, 3});
    at = remat_graph_input(g, "b", 3, (int64_t[]){2, 4, 5});
    in[0] = a3;
    in[1] = at;
    CHECK_SHAPE(g, remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_a = true},
                                   "a_t"), 3, 2, 3, 5);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    static const struct {
        int na, nb;
        int64_t a[4], b[4];
        const char *name, *says;
    } bad[] = {
        {3, 3, {2, 3, 4}, {2, 5, 6}, "inner", "inner sizes differ"},
        {3, 3, {2, 3, 4}, {3, 4, 5}, "batch", "batch axis 0 differs"},
        {4, 3, {2, 2, 3, 4}, {2, 4, 5}, "ranks", "2-d or have A's 4 dimensions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = new_graph();
        in[0] = remat_graph_input(g, "a", bad[i].na, bad[i].a);
        in[1] = remat_graph_input(g, "b", bad[i].nb, bad[i].b);
        CHECK_FAILED(g, remat_graph_add(g, REMAT_OP_MATMUL, in, 2, NULL, bad[i].name),
                     REMAT_ERR_SHAPE, bad[i].name);
        CHECK(strstr(remat_errmsg(), bad[i].says) != NULL, "%s: message '%s'", bad[i].name,
              remat_errmsg());
        remat_graph_free(g);
    }
    g = new_graph();
    q = remat_graph_input(g, "v", 1, (int64_t[]){8});
    CHECK_FAILED(g, add1(g, REMAT_OP_SOFTMAX_LAST, q, NULL, "sm_1d"), REMAT_ERR_SHAPE, "sm_1d");
    remat_graph_free(g);
}

/* token_ce by hand: logits (2, 3, 5) and targets (2, 3) give a loss (1) and the
 * probabilities (2, 3, 5) in aux; 5 * 30 = 150 FLOPs forward, 2 * 30 = 60 backward.
 * Targets (2, 4) are refused: not the logits' leading shape. */
static void test_token_ce_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t in[2], y;
    double f0;

    in[0] = remat_graph_input(g, "logits", 3, (int64_t[]){2, 3, 5});
    in[1] = remat_graph_tokens(g, "next", 2, (int64_t[]){2, 3});
    f0 = remat_graph_forward_flops(g);
    y = remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss");
    CHECK_SHAPE(g, y, 1, 1);
    CHECK_SHAPE(g, y + 1, 3, 2, 3, 5);
    CHECK(remat_graph_forward_flops(g) - f0 == 150.0 &&
          graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops == 60.0,
          "token_ce flops %g and %g, expected 150 and 60", remat_graph_forward_flops(g) - f0,
          graph_op(g, remat_graph_n_ops(g) - 1)->bwd_flops);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    g = new_graph();
    in[0] = remat_graph_input(g, "logits", 3, (int64_t[]){2, 3, 5});
    in[1] = remat_graph_tokens(g, "next", 2, (int64_t[]){2, 4});
    CHECK_FAILED(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "ce_bad"),
                 REMAT_ERR_SHAPE, "ce_bad");
    CHECK(strstr(remat_errmsg(), "leading shape") != NULL, "message '%s'", remat_errmsg());
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_seq_shapes);
    RUN(test_attention_shapes);
    RUN(test_token_ce_shapes);
    return harness_end();
}
