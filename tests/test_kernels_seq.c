/*
 * test_kernels_seq.c - the reference kernels of the transformer ops (src/kernels/ref/
 * seq.c and matmul.c) against hand-worked values: layer norm (values, aux, the backward's
 * three gradients with accumulation), GELU in both forms and its backward, the batched
 * matrix product with either operand transposed and a shared B, the last-axis softmax
 * with and without its causal mask, and the embedding (rows, the table's gradient,
 * an id outside the table). Each op is built through the graph (kernel_util.h), so its
 * shapes come from shape inference. The finite differences are in test_kernels_grad.c,
 * PyTorch's values in test_fixtures_ops.c.
 */
#include "kernel_util.h"

#define S2(a, b) {2, {a, b, 0, 0}}
#define S4(a, b, c, d) {4, {a, b, c, d}}

/* Hand-worked values are exact in float or worked out in double: 1e-6 relative. */
#define HAND_TOL 1e-6

/*
 * Layer norm by hand. The row x = (1, 2, 3, 4): mean 10 / 4 = 2.5; deviations (-1.5,
 * -0.5, 0.5, 1.5), squares (2.25, 0.25, 0.25, 2.25), sum 5, biased variance 5 / 4 = 1.25;
 * invstd = 1 / sqrt(1.25) = 0.894427191 (eps 1e-12: as good as 0, since 0 means the
 * default); y = deviations * invstd = (-1.341640786, -0.447213595, 0.447213595,
 * 1.341640786). With gamma = 1 and dy = 1 (dout NULL), the backward's dx is
 * invstd / 4 * (4 * 1 - sum 1 - x_hat * sum x_hat) = invstd / 4 * (4 - 4 - 0) = 0,
 * dgamma = x_hat and dbeta = 1.
 */
static void test_layer_norm_hand(void)
{
    const float x[8] = {1, 2, 3, 4, 2, 2, 2, 2}, gamma[4] = {2, -1, 0.5f, 1};
    const float beta[4] = {0.5f, 0, -1, 2}, ones[4] = {1, 1, 1, 1};
    const double xh[4] = {-1.341640786, -0.447213595, 0.447213595, 1.341640786};
    struct shp s2 = S2(1, 4), s3 = {3, {1, 2, 4, 0}};
    double is, want[8];
    float *dout;
    struct tk t;

    tk_init(&t, REMAT_OP_LAYER_NORM, 1, &s2, &(remat_attrs){.eps = 1e-12f});
    check_shape("ln params", &t.op.w, 1, 4, 0, 0, 0);
    check_shape("ln aux", &t.op.aux, 2, 2, 1, 0, 0);
    set_vals(&t.in[0], x);
    set_vals(&t.op.w, ones); /* beta stays 0 */
    CHECK_OK(ref_forward(&t.op));
    check_close("ln 2-d y", t.op.out.data, xh, 4, HAND_TOL);
    check_close("ln 2-d aux", t.op.aux.data, (const double[]){2.5, 0.894427191}, 2, HAND_TOL);
    for (int i = 0; i < 4; i++)
        t.din[0].data[i] = 0.25f; /* accumulated into: stays 0.25 */
    dout = t.op.dout.data;
    t.op.dout.data = NULL;
    CHECK_OK(tk_backward(&t));
    t.op.dout.data = dout;
    check_close("ln dx", t.din[0].data, (const double[]){0.25, 0.25, 0.25, 0.25}, 4, HAND_TOL);
    check_close("ln dgamma", t.op.dw.data, xh, 4, HAND_TOL);
    check_close("ln dbeta", t.op.db.data, (const double[]){1, 1, 1, 1}, 4, HAND_TOL);
    tk_fini(&t);

    /* (1, 2, 4), default eps 1e-5, gamma and beta: row 0 as above with invstd
     * 1 / sqrt(1.25 + 1e-5), y = x_hat * gamma + beta; row 1 is constant, so x_hat = 0
     * and y = beta, with invstd 1 / sqrt(0 + 1e-5) = 316.227766 */
    tk_init(&t, REMAT_OP_LAYER_NORM, 1, &s3, NULL);
    set_vals(&t.in[0], x);
    set_vals(&t.op.w, gamma);
    set_vals(&t.op.b, beta);
    CHECK_OK(ref_forward(&t.op));
    check_shape("ln 3-d y", &t.op.out, 3, 1, 2, 4, 0);
    is = 1 / sqrt(1.25 + 1e-5);
    for (int i = 0; i < 8; i++)
        want[i] = i < 4 ? (x[i] - 2.5) * is * gamma[i] + beta[i] : beta[i - 4];
    check_close("ln 3-d y", t.op.out.data, want, 8, HAND_TOL);
    check_close("ln 3-d aux", t.op.aux.data, (const double[]){2.5, 2, is, 316.227766}, 4,
                HAND_TOL);
    tk_fini(&t);
}

/*
 * GELU by hand: exact x Phi(x) with Phi(1) = 0.8413447461 and Phi(2) = 0.9772498681:
 * gelu(0, 1, -1, 2) = (0, 0.8413447461, -(1 - 0.8413447461) = -0.1586552539,
 * 1.9544997361). The tanh form at +-1: u = sqrt(2 / pi) * 1.044715 = 0.8335620, tanh u =
 * 0.6823839812, y = 0.5 (1 + 0.6823839812) = 0.8411919906, and at -1, -0.5 (1 - t) =
 * -0.1588080094. Exact derivative Phi(x) + x phi(x), phi(1) = exp(-1/2) / sqrt(2 pi) =
 * 0.2419707245: at 0, 0.5; at 1, 1.0833154706; at -1, 0.1586552539 - 0.2419707245 =
 * -0.0833154706.
 */
static void test_gelu_hand(void)
{
    struct shp s4 = S2(1, 4), s2 = S2(1, 2), s3 = S2(1, 3);
    struct tk t;

    tk_init(&t, REMAT_OP_GELU, 1, &s4, NULL);
    set_vals(&t.in[0], (const float[]){0, 1, -1, 2});
    CHECK_OK(ref_forward(&t.op));
    check_close("gelu y", t.op.out.data,
                (const double[]){0, 0.8413447461, -0.1586552539, 1.9544997361}, 4, HAND_TOL);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_GELU, 1, &s2, &(remat_attrs){.approximate = true});
    set_vals(&t.in[0], (const float[]){1, -1});
    CHECK_OK(ref_forward(&t.op));
    check_close("gelu tanh y", t.op.out.data, (const double[]){0.8411919906, -0.1588080094}, 2,
                HAND_TOL);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_GELU, 1, &s3, NULL);
    set_vals(&t.in[0], (const float[]){0, 1, -1});
    set_vals(&t.op.dout, (const float[]){1, 1, 2});
    t.din[0].data[2] = 1; /* accumulated into: 1 + 2 * -0.0833154706 */
    CHECK_OK(tk_backward(&t));
    check_close("gelu dx", t.din[0].data, (const double[]){0.5, 1.0833154706, 0.8333690588}, 3,
                HAND_TOL);
    tk_fini(&t);
}

/*
 * Hand-worked matmul. A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]]:
 *   A B   = [[1*5 + 2*7, 1*6 + 2*8], [3*5 + 4*7, 3*6 + 4*8]] = [[19, 22], [43, 50]];
 *   A B^T = [[1*5 + 2*6, 1*7 + 2*8], [3*5 + 4*6, 3*7 + 4*8]] = [[17, 23], [39, 53]];
 *   A^T B = [[1*5 + 3*7, 1*6 + 3*8], [2*5 + 4*7, 2*6 + 4*8]] = [[26, 30], [38, 44]].
 * Two batches sharing B: the second A = -A gives -(A B). Backward of A B with dy = 1:
 * dA(i, k) = sum_j B(k, j) = (11, 15) per row, dB(k, j) = sum_i A(i, k) = (4, 6) per
 * column, added to what the gradients held (0.5).
 */
static void test_matmul_hand(void)
{
    struct shp s[2] = {S2(2, 2), S2(2, 2)}, sb[2] = {{3, {2, 2, 2, 0}}, S2(2, 2)};
    static const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    struct tk t;

    for (int v = 0; v < 3; v++) {
        static const double want[3][4] = {{19, 22, 43, 50}, {17, 23, 39, 53}, {26, 30, 38, 44}};

        tk_init(&t, REMAT_OP_MATMUL, 2, s, &(remat_attrs){.trans_a = v == 2, .trans_b = v == 1});
        set_vals(&t.in[0], a);
        set_vals(&t.in[1], b);
        CHECK_OK(ref_forward(&t.op));
        check_close(v == 0 ? "matmul A B" : v == 1 ? "matmul A B^T" : "matmul A^T B",
                    t.op.out.data, want[v], 4, 0);
        if (v == 0) {
            for (int i = 0; i < 4; i++) {
                t.op.dout.data[i] = 1;
                t.op.din[0].data[i] = t.op.din[1].data[i] = 0.5f;
            }
            CHECK_OK(ref_backward(&t.op));
            check_close("matmul dA", t.op.din[0].data, (const double[]){11.5, 15.5, 11.5, 15.5},
                        4, 0);
            check_close("matmul dB", t.op.din[1].data, (const double[]){4.5, 4.5, 6.5, 6.5}, 4,
                        0);
        }
        tk_fini(&t);
    }
    tk_init(&t, REMAT_OP_MATMUL, 2, sb, NULL);
    set_vals(&t.in[0], (const float[]){1, 2, 3, 4, -1, -2, -3, -4});
    set_vals(&t.in[1], b);
    CHECK_OK(ref_forward(&t.op));
    check_close("matmul shared B", t.op.out.data,
                (const double[]){19, 22, 43, 50, -19, -22, -43, -50}, 8, 0);
    tk_fini(&t);
}

/*
 * Hand-worked softmax over the last axis. Row (1, 2, 3): exp(-2), exp(-1), 1 over their
 * sum 1.5032147: (0.0900306, 0.2447285, 0.6652410). Causal on a 3x3 matrix of equal
 * logits: row 0 sees column 0 only (1, 0, 0), row 1 columns 0-1 (1/2, 1/2, 0), row 2
 * all three (1/3 each). Backward with dy = (1, 0, 0) on the causal row 1, y = (1/2, 1/2,
 * 0): dot = 1/2, dx = y (dy - dot) = (1/4, -1/4, 0), added to 0.5.
 */
static void test_softmax_last_hand(void)
{
    struct shp s1 = S2(1, 3), s3 = {3, {1, 3, 3, 0}};
    struct tk t;

    tk_init(&t, REMAT_OP_SOFTMAX_LAST, 1, &s1, NULL);
    set_vals(&t.in[0], (const float[]){1, 2, 3});
    CHECK_OK(ref_forward(&t.op));
    check_close("softmax_last row", t.op.out.data,
                (const double[]){0.0900306, 0.2447285, 0.6652410}, 3, 1e-6);
    tk_fini(&t);

    /* scale 0.5: softmax(0.5, 1, 1.5) = exp(-1), exp(-1/2), 1 over 1.9744101; with
     * dy = (1, 0, 0), dx = 0.5 y (dy - y0) */
    tk_init(&t, REMAT_OP_SOFTMAX_LAST, 1, &s1, &(remat_attrs){.scale = 0.5f});
    set_vals(&t.in[0], (const float[]){1, 2, 3});
    CHECK_OK(ref_forward(&t.op));
    check_close("softmax_last scaled", t.op.out.data,
                (const double[]){0.1863237, 0.3071959, 0.5064804}, 3, 1e-6);
    for (int i = 0; i < 3; i++) {
        t.op.dout.data[i] = i == 0 ? 1.0f : 0.0f;
        t.op.din[0].data[i] = 0;
    }
    CHECK_OK(ref_backward(&t.op));
    check_close("softmax_last scaled dx", t.op.din[0].data,
                (const double[]){0.0758036, -0.0286189, -0.0471847}, 3, 1e-6);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_SOFTMAX_LAST, 1, &s3, &(remat_attrs){.causal = true});
    set_vals(&t.in[0], (const float[]){4, 4, 4, 4, 4, 4, 4, 4, 4});
    CHECK_OK(ref_forward(&t.op));
    check_close("softmax_last causal", t.op.out.data,
                (const double[]){1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 9, 1e-7);
    for (int i = 0; i < 9; i++) {
        t.op.dout.data[i] = i == 3 ? 1.0f : 0.0f;
        t.op.din[0].data[i] = 0.5f;
    }
    CHECK_OK(ref_backward(&t.op));
    check_close("softmax_last causal dx", t.op.din[0].data,
                (const double[]){0.5, 0.5, 0.5, 0.75, 0.25, 0.5, 0.5, 0.5, 0.5}, 9, 1e-7);
    tk_fini(&t);
}

/*
 * Hand-worked embedding. Table W (3, 2) = [[1, 2], [3, 4], [5, 6]], ids [[1, 0], [2, 1]]:
 * y = [[[3, 4], [1, 2]], [[5, 6], [3, 4]]]. Backward with dy = 1 and the table's gradient
 * at 0.5: row 0 is used once (1.5), row 1 twice (2.5), row 2 once (1.5). An id of 3 is
 * refused with its position.
 */
static void test_embedding_hand(void)
{
    struct shp s = S2(2, 2);
    struct tk t;

    tk_init(&t, REMAT_OP_EMBEDDING, 1, &s, &(remat_attrs){.vocab = 3, .out_channels = 2});
    CHECK(t.op.w.ndim == 2 && t.op.w.shape[0] == 3 && t.op.w.shape[1] == 2,
          "table shape %lldx%lld", (long long)t.op.w.shape[0], (long long)t.op.w.shape[1]);
    set_vals(&t.op.w, (const float[]){1, 2, 3, 4, 5, 6});
    memcpy(t.in[0].data, (const int32_t[]){1, 0, 2, 1}, 4 * sizeof(int32_t));
    CHECK_OK(ref_forward(&t.op));
    check_close("embedding y", t.op.out.data, (const double[]){3, 4, 1, 2, 5, 6, 3, 4}, 8, 0);
    for (int i = 0; i < 8; i++)
        t.op.dout.data[i] = 1;
    for (int i = 0; i < 6; i++)
        t.op.dw.data[i] = 0.5f;
    CHECK_OK(ref_backward(&t.op));
    check_close("embedding dW", t.op.dw.data, (const double[]){1.5, 1.5, 2.5, 2.5, 1.5, 1.5}, 6,
                0);
    ((int32_t *)t.in[0].data)[2] = 3;
    CHECK(ref_forward(&t.op) == REMAT_ERR_ARG && strstr(remat_errmsg(), "token id 3 at position 2"),
          "an id outside the table: %s", remat_errmsg());
    tk_fini(&t);
}

/*
 * Hand-worked token_ce: logits (1, 2, 2) = [[0, 0], [3, 1]], targets [1, -1]. Row 0
 * counts: -log softmax([0, 0])[1] = log 2 = 0.6931472; row 1 is ignored, so the loss is
 * log 2 (the mean over one row). Backward with dout NULL: row 0 gets p - onehot =
 * (0.5, -0.5) over one counted row, row 1 nothing. Every target ignored: loss 0.
 */
static void test_token_ce_hand(void)
{
    struct shp s[2] = {{3, {1, 2, 2, 0}}, S2(1, 2)};
    struct tk t;

    tk_init(&t, REMAT_OP_TOKEN_CE, 2, s, NULL);
    set_vals(&t.in[0], (const float[]){0, 0, 3, 1});
    memcpy(t.in[1].data, (const int32_t[]){1, -1}, 2 * sizeof(int32_t));
    CHECK_OK(ref_forward(&t.op));
    check_close("token_ce loss", t.op.out.data, (const double[]){0.6931472}, 1, HAND_TOL);
    free(t.op.dout.data);
    t.op.dout.data = NULL; /* the constant 1 */
    CHECK_OK(ref_backward(&t.op));
    check_close("token_ce dx", t.din[0].data, (const double[]){0.5, -0.5, 0, 0}, 4, HAND_TOL);
    memcpy(t.in[1].data, (const int32_t[]){-1, -1}, 2 * sizeof(int32_t));
    CHECK_OK(ref_forward(&t.op));
    check_close("token_ce all ignored", t.op.out.data, (const double[]){0}, 1, 0);
    ((int32_t *)t.in[1].data)[0] = 2;
    CHECK(ref_forward(&t.op) == REMAT_ERR_ARG && strstr(remat_errmsg(), "label 2 of position 0"),
          "a target outside the vocabulary: %s", remat_errmsg());
    tk_fini(&t);
}

int main(void)
{
    (void)rng_seed; /* no draws here: every value is written out */
    RUN(test_layer_norm_hand);
    RUN(test_gelu_hand);
    RUN(test_matmul_hand);
    RUN(test_softmax_last_hand);
    RUN(test_embedding_hand);
    RUN(test_token_ce_hand);
    return harness_end();
}
