/*
 * test_kernels_grad.c - every differentiable op's reference backward (src/kernels/ref)
 * against central finite differences (fourth order, in double), every element of every
 * gradient (kernel_util.h: tk_grad_check), with the tolerances stated below; around
 * each, the backward reading only what the op table says (the rest handed over as
 * NULL), accumulation (a second call doubles), each gradient alone with the others NULL,
 * and two forward runs bit-identical. Every op is built through the graph, so its
 * attributes get their defaults and its shapes come from shape inference.
 *
 * Seed: REMAT_SEED (printed); each test restarts from it, so one can be rerun.
 */
#include "kernel_util.h"

#define S1(a) {1, {a, 0, 0, 0}}
#define S2(a, b) {2, {a, b, 0, 0}}
#define S4(a, b, c, d) {4, {a, b, c, d}}

enum fill {
    FILL_UNIFORM,  /* everything uniform in [-1, 1) */
    FILL_AWAY,     /* inputs of magnitude [0.1, 1): no relu kink within h */
    FILL_DISTINCT, /* inputs 0.1 apart: no max-pool tie within h */
    FILL_LABELS,   /* logits in [-2, 2), random labels */
};

/* One gradient check (kernel_util.h) of op type over inputs of shapes s. */
static void grad_case(const char *name, remat_op type, int n_in, const struct shp *s,
                      const remat_attrs *at, enum fill fill, struct fd_tol tol,
                      enum fd_dout mode)
{
    struct tk t;

    tk_init(&t, type, n_in, s, at);
    for (int i = 0; i < n_in; i++)
        if (fill == FILL_AWAY)
            fill_away_from_zero(&t.in[i], 0.1, 1);
        else if (fill == FILL_DISTINCT)
            fill_distinct(&t.in[i], 0.1);
        else if (fill == FILL_LABELS && i == 0)
            fill_uniform(&t.in[i], -2, 2);
        else if (fill != FILL_LABELS)
            fill_uniform(&t.in[i], -1, 1);
    if (fill == FILL_LABELS)
        for (int64_t n = 0; n < t.in[0].shape[0]; n++)
            ((int32_t *)t.in[1].data)[n] = (int32_t)(splitmix64() % (uint64_t)t.in[0].shape[1]);
    if (t.op.w.data && (type == REMAT_OP_BATCH_NORM || type == REMAT_OP_LAYER_NORM))
        fill_uniform(&t.op.w, 0.5, 1.5); /* gamma */
    else if (t.op.w.data)
        fill_uniform(&t.op.w, -1, 1);
    if (t.op.b.data)
        fill_uniform(&t.op.b, -1, 1);
    tk_grad_check(&t, name, tol, mode);
    tk_fini(&t);
}

/*
 * Tolerances, |fd - grad| <= atol + rtol |fd|, for the fourth-order difference of
 * kernel_util.h (steps +-h, +-2h). The ops linear in each perturbed tensor have no
 * truncation error, only the float rounding of the outputs a perturbation moves (about
 * 1e-7 |y| each, divided by h), so they take a large step: h 0.25, rtol 1e-4, atol 1e-5.
 * ReLU and max pooling are linear only between kinks and ties: h 1e-2, so 2h stays below
 * the 0.1 that inputs keep from 0 (relu) or from each other (max pool); same tolerance.
 * Batch norm, layer norm, GELU and softmax are smooth: h 2e-2 (truncation of order h^4), rtol 1e-3, atol
 * 1e-4. Over seeds 1..800 the worst error was 0.17 of its tolerance (conv2d dW and db,
 * batch-norm dx); a bias gradient off by 0.1% fails the linear tolerance.
 */
static const struct fd_tol TOL_LIN = {0.25, 1e-4, 1e-5};
static const struct fd_tol TOL_PW = {1e-2, 1e-4, 1e-5};
static const struct fd_tol TOL_SMOOTH = {2e-2, 1e-3, 1e-4};

static void test_grad_conv(void)
{
    struct shp x1 = S4(2, 4, 5, 6), x2 = S4(1, 3, 4, 4), x3 = S4(2, 4, 3, 4),
               x4 = S4(1, 2, 3, 3);

    rng_state = rng_seed;
    grad_case("conv2d s(2,1) p1 d(1,2) g2 bias", REMAT_OP_CONV2D, 1, &x1,
              &(remat_attrs){.out_channels = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1,
                             .pw = 1, .dh = 1, .dw = 2, .groups = 2, .bias = true},
              FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("conv2d k3 p1", REMAT_OP_CONV2D, 1, &x2,
              &(remat_attrs){.out_channels = 2, .kh = 3, .kw = 3, .ph = 1, .pw = 1},
              FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("conv_t s(2,3) p(1,0) op(1,2) d(2,1) g2", REMAT_OP_CONV_TRANSPOSE2D, 1, &x3,
              &(remat_attrs){.out_channels = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 3, .ph = 1,
                             .out_pad_h = 1, .out_pad_w = 2, .dh = 2, .dw = 1, .groups = 2,
                             .bias = true},
              FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("conv_t k2 s2", REMAT_OP_CONV_TRANSPOSE2D, 1, &x4,
              &(remat_attrs){.out_channels = 3, .kh = 2, .kw = 2, .sh = 2, .sw = 2},
              FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("linear bias", REMAT_OP_LINEAR, 1, &(struct shp)S2(3, 5),
              &(remat_attrs){.out_channels = 4, .bias = true}, FILL_UNIFORM, TOL_LIN,
              FD_RANDOM);
}

/* The attention core: the batched matrix product (plain, per-batch and shared B, each
 * operand transposed, 4-d; linear in each input: TOL_LIN), then the last-axis softmax. */
static void test_grad_matmul(void)
{
    static const struct {
        const char *name;
        struct shp s[2];
        bool ta, tb;
    } c[] = {
        {"matmul 2-d", {S2(3, 4), S2(4, 5)}, false, false},
        {"matmul batched", {{3, {2, 3, 4, 0}}, {3, {2, 4, 5, 0}}}, false, false},
        {"matmul shared B", {{3, {3, 2, 4, 0}}, S2(4, 5)}, false, false},
        {"matmul A^T", {{3, {2, 4, 3, 0}}, {3, {2, 4, 5, 0}}}, true, false},
        {"matmul B^T (scores)", {{3, {2, 3, 4, 0}}, {3, {2, 5, 4, 0}}}, false, true},
        {"matmul A^T B^T shared", {{3, {2, 4, 3, 0}}, S2(5, 4)}, true, true},
        {"matmul 4-d", {S4(2, 2, 3, 4), S4(2, 2, 4, 3)}, false, false},
    };

    rng_state = rng_seed;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        grad_case(c[i].name, REMAT_OP_MATMUL, 2, c[i].s,
                  &(remat_attrs){.trans_a = c[i].ta, .trans_b = c[i].tb}, FILL_UNIFORM,
                  TOL_LIN, FD_RANDOM);
    /* the softmax over the last axis: plain, causal square and causal wider than tall */
    grad_case("softmax_last 2-d", REMAT_OP_SOFTMAX_LAST, 1, &(struct shp)S2(3, 5), NULL,
              FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
    grad_case("softmax_last causal 4-d", REMAT_OP_SOFTMAX_LAST, 1,
              &(struct shp)S4(2, 2, 3, 3), &(remat_attrs){.causal = true}, FILL_UNIFORM,
              TOL_SMOOTH, FD_RANDOM);
    grad_case("softmax_last causal scaled", REMAT_OP_SOFTMAX_LAST, 1,
              &(struct shp)S4(2, 2, 4, 4), &(remat_attrs){.causal = true, .scale = 0.35f},
              FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
    grad_case("softmax_last causal 3x5", REMAT_OP_SOFTMAX_LAST, 1,
              &(struct shp){3, {2, 3, 5, 0}}, &(remat_attrs){.causal = true}, FILL_UNIFORM,
              TOL_SMOOTH, FD_RANDOM);
}

/* The embedding's table gradient against finite differences, ids drawn in [0, 5) with
 * repeats (rows hit twice accumulate); linear in the table (TOL_LIN). */
static void test_grad_embedding(void)
{
    struct shp s = {2, {3, 4, 0, 0}};
    struct tk t;

    rng_state = rng_seed;
    tk_init(&t, REMAT_OP_EMBEDDING, 1, &s, &(remat_attrs){.vocab = 5, .out_channels = 3});
    for (int i = 0; i < 12; i++)
        ((int32_t *)t.in[0].data)[i] = (int32_t)(splitmix64() % 5);
    fill_uniform(&t.op.w, -1, 1);
    tk_grad_check(&t, "embedding", TOL_LIN, FD_RANDOM);
    tk_fini(&t);
}

/* token_ce's logits gradient against finite differences: (2, 3, 4) logits, targets
 * drawn in [0, 4) with two ignored (-1), dout 1 and random. */
static void test_grad_token_ce(void)
{
    struct shp s[2] = {{3, {2, 3, 4, 0}}, S2(2, 3)};
    static const enum fd_dout modes[] = {FD_NULL, FD_RANDOM};
    struct tk t;

    rng_state = rng_seed;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        tk_init(&t, REMAT_OP_TOKEN_CE, 2, s, NULL);
        fill_uniform(&t.in[0], -2, 2);
        for (int i = 0; i < 6; i++)
            ((int32_t *)t.in[1].data)[i] = i == 1 || i == 5 ? -1 : (int32_t)(splitmix64() % 4);
        tk_grad_check(&t, m ? "token_ce dout random" : "token_ce dout NULL", TOL_SMOOTH,
                      modes[m]);
        tk_fini(&t);
    }
}

static void test_grad_norm_act(void)
{
    struct shp x1 = S4(3, 2, 2, 3), x2 = S2(5, 3), x3 = S4(2, 3, 4, 5);

    rng_state = rng_seed;
    grad_case("batch_norm 4-d", REMAT_OP_BATCH_NORM, 1, &x1, NULL, FILL_UNIFORM, TOL_SMOOTH,
              FD_RANDOM);
    grad_case("batch_norm 2-d eps 0.1", REMAT_OP_BATCH_NORM, 1, &x2,
              &(remat_attrs){.eps = 0.1f}, FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
    grad_case("layer_norm 2-d", REMAT_OP_LAYER_NORM, 1, &x2, NULL, FILL_UNIFORM, TOL_SMOOTH,
              FD_RANDOM);
    grad_case("layer_norm 3-d eps 0.1", REMAT_OP_LAYER_NORM, 1, &(struct shp){3, {2, 3, 4, 0}},
              &(remat_attrs){.eps = 0.1f}, FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
    grad_case("layer_norm 4-d", REMAT_OP_LAYER_NORM, 1, &x1, NULL, FILL_UNIFORM, TOL_SMOOTH,
              FD_RANDOM);
    grad_case("layer_norm 2-d dout NULL", REMAT_OP_LAYER_NORM, 1, &x2, NULL, FILL_UNIFORM,
              TOL_SMOOTH, FD_NULL);
    grad_case("gelu", REMAT_OP_GELU, 1, &x3, NULL, FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
    grad_case("gelu tanh", REMAT_OP_GELU, 1, &x3, &(remat_attrs){.approximate = true},
              FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
    grad_case("relu", REMAT_OP_RELU, 1, &x3, NULL, FILL_AWAY, TOL_PW, FD_RANDOM);
    /* inputs of magnitude >= 0.1: never within h of -2 or 0.05 */
    grad_case("clip [-2, 0.05]", REMAT_OP_CLIP, 1, &x3,
              &(remat_attrs){.clip_min = -2, .clip_max = 0.05f}, FILL_AWAY, TOL_PW, FD_RANDOM);
}

static void test_grad_pool(void)
{
    struct shp x1 = S4(2, 2, 5, 5), x2 = S4(2, 1, 4, 6), x3 = S4(2, 3, 3, 4);
    remat_attrs k3 = {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil_mode = true};
    remat_attrs k3i = k3, k2 = {.kh = 2, .kw = 3, .sh = 1, .sw = 2};

    rng_state = rng_seed;
    k3i.count_include_pad = true;
    grad_case("max_pool k3 s2 p1 ceil", REMAT_OP_MAX_POOL, 1, &x1, &k3, FILL_DISTINCT,
              TOL_PW, FD_RANDOM);
    grad_case("max_pool k(2,3) s(1,2)", REMAT_OP_MAX_POOL, 1, &x2, &k2, FILL_DISTINCT,
              TOL_PW, FD_RANDOM);
    grad_case("avg_pool k3 s2 p1 ceil", REMAT_OP_AVG_POOL, 1, &x1, &k3, FILL_UNIFORM, TOL_LIN,
              FD_RANDOM);
    grad_case("avg_pool k3 s2 p1 ceil include pad", REMAT_OP_AVG_POOL, 1, &x1, &k3i,
              FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("avg_pool k(2,3) s(1,2)", REMAT_OP_AVG_POOL, 1, &x2, &k2, FILL_UNIFORM, TOL_LIN,
              FD_RANDOM);
    grad_case("global_avg_pool", REMAT_OP_GLOBAL_AVG_POOL, 1, &x3, NULL, FILL_UNIFORM,
              TOL_LIN, FD_RANDOM);
}

static void test_grad_elem(void)
{
    struct shp add[3] = {S4(2, 3, 2, 2), S4(2, 3, 2, 2), S4(2, 3, 2, 2)};
    struct shp cat[3] = {S4(2, 1, 2, 3), S4(2, 2, 2, 3), S4(2, 3, 2, 3)};
    struct shp cat2[2] = {S2(3, 2), S2(3, 4)}, x1 = S4(2, 2, 5, 6), x2 = S4(2, 2, 3, 3);
    struct shp x3 = S4(1, 2, 3, 5), x4 = S4(1, 1, 4, 4);

    rng_state = rng_seed;
    grad_case("add of 3", REMAT_OP_ADD, 3, add, NULL, FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("concat of 3", REMAT_OP_CONCAT, 3, cat, NULL, FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("concat 2-d", REMAT_OP_CONCAT, 2, cat2, NULL, FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("crop 3x4 at (1, 2)", REMAT_OP_CROP, 1, &x1,
              &(remat_attrs){.out_h = 3, .out_w = 4, .offset_h = 1, .offset_w = 2},
              FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("pad (1, 2, 0, 3)", REMAT_OP_PAD, 1, &x2,
              &(remat_attrs){.pad_t = 1, .pad_b = 2, .pad_r = 3}, FILL_UNIFORM, TOL_LIN,
              FD_RANDOM);
    grad_case("upsample 3x5->7x4", REMAT_OP_UPSAMPLE_BILINEAR, 1, &x3,
              &(remat_attrs){.out_h = 7, .out_w = 4}, FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    grad_case("upsample 3x5->7x4 align_corners", REMAT_OP_UPSAMPLE_BILINEAR, 1, &x3,
              &(remat_attrs){.out_h = 7, .out_w = 4, .align_corners = true}, FILL_UNIFORM,
              TOL_LIN, FD_RANDOM);
    grad_case("upsample 4x4->8x8", REMAT_OP_UPSAMPLE_BILINEAR, 1, &x4,
              &(remat_attrs){.out_h = 8, .out_w = 8}, FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    {
        struct shp mul[2] = {S4(2, 3, 2, 2), S4(2, 3, 2, 2)}, mulb[2] = {S4(2, 3, 2, 3),
                                                                        S4(2, 3, 1, 1)};
        struct shp sm2 = S2(3, 5), sm4 = S4(2, 4, 2, 3), t4 = S4(2, 3, 4, 5), t3 = S4(2, 3, 4, 1);

        grad_case("mul", REMAT_OP_MUL, 2, mul, NULL, FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
        grad_case("mul by (N, C, 1, 1)", REMAT_OP_MUL, 2, mulb, NULL, FILL_UNIFORM, TOL_SMOOTH,
                  FD_RANDOM);
        grad_case("sigmoid", REMAT_OP_SIGMOID, 1, &t4, NULL, FILL_UNIFORM, TOL_SMOOTH,
                  FD_RANDOM);
        grad_case("tanh", REMAT_OP_TANH, 1, &t4, NULL, FILL_UNIFORM, TOL_SMOOTH, FD_RANDOM);
        /* hard_sigmoid's slope (x in [-1, 1): inside -3 .. 3), and (x + 0.05) / 1.1 flat
         * below its kink at -0.05, which FILL_AWAY's inputs keep away from (the other,
         * 1.05, is past them); hard_swish's curved middle; reduce_sum over axes 1 and
         * 3, scaled */
        grad_case("hard_sigmoid", REMAT_OP_HARD_SIGMOID, 1, &t4, NULL, FILL_UNIFORM, TOL_PW,
                  FD_RANDOM);
        grad_case("hard_sigmoid (x + 0.05) / 1.1", REMAT_OP_HARD_SIGMOID, 1, &t4,
                  &(remat_attrs){.alpha = (float)(1 / 1.1), .beta = (float)(0.05 / 1.1)},
                  FILL_AWAY, TOL_PW, FD_RANDOM);
        grad_case("hard_swish", REMAT_OP_HARD_SWISH, 1, &t4, NULL, FILL_UNIFORM, TOL_SMOOTH,
                  FD_RANDOM);
        grad_case("reduce_sum axes 1, 3 scaled", REMAT_OP_REDUCE_SUM, 1, &t4,
                  &(remat_attrs){.ndim = 4, .shape = {2, 1, 4, 1}, .scale = 0.25f},
                  FILL_UNIFORM, TOL_LIN, FD_RANDOM);
        grad_case("reduce_sum axis 0 of 3-d", REMAT_OP_REDUCE_SUM, 1, &(struct shp){3, {3, 4, 5, 0}},
                  &(remat_attrs){.ndim = 3, .shape = {1, 4, 5}}, FILL_UNIFORM, TOL_LIN,
                  FD_RANDOM);
        grad_case("softmax 2-d", REMAT_OP_SOFTMAX, 1, &sm2, NULL, FILL_UNIFORM, TOL_SMOOTH,
                  FD_RANDOM);
        grad_case("softmax 4-d (over channels)", REMAT_OP_SOFTMAX, 1, &sm4, NULL, FILL_UNIFORM,
                  TOL_SMOOTH, FD_RANDOM);
        grad_case("leaky_relu 0.2", REMAT_OP_LEAKY_RELU, 1, &t4,
                  &(remat_attrs){.alpha = 0.2f}, FILL_AWAY, TOL_PW, FD_RANDOM);
        grad_case("transpose (0, 2, 3, 1)", REMAT_OP_TRANSPOSE, 1, &t4,
                  &(remat_attrs){.perm = {0, 2, 3, 1}}, FILL_UNIFORM, TOL_LIN, FD_RANDOM);
        grad_case("transpose reversed (default)", REMAT_OP_TRANSPOSE, 1, &t3, NULL,
                  FILL_UNIFORM, TOL_LIN, FD_RANDOM);
    }
}

static void test_grad_loss(void)
{
    struct shp sm[2] = {S2(4, 5), S1(4)}, sl[3] = {S1(1), S1(1), S1(1)};

    rng_state = rng_seed;
    grad_case("softmax_ce dout NULL", REMAT_OP_SOFTMAX_CE, 2, sm, NULL, FILL_LABELS, TOL_SMOOTH,
              FD_NULL);
    grad_case("softmax_ce dout 0.5", REMAT_OP_SOFTMAX_CE, 2, sm, NULL, FILL_LABELS, TOL_SMOOTH,
              FD_HALF);
    grad_case("softmax_ce dout random", REMAT_OP_SOFTMAX_CE, 2, sm, NULL, FILL_LABELS, TOL_SMOOTH,
              FD_RANDOM);
    grad_case("sum_losses dout NULL", REMAT_OP_SUM_LOSSES, 3, sl, NULL, FILL_UNIFORM, TOL_LIN,
              FD_NULL);
    grad_case("sum_losses dout 0.5", REMAT_OP_SUM_LOSSES, 3, sl, NULL, FILL_UNIFORM, TOL_LIN,
              FD_HALF);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    rng_seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    printf("seed %llu (REMAT_SEED to change)\n", (unsigned long long)rng_seed);
    RUN(test_grad_conv);
    RUN(test_grad_norm_act);
    RUN(test_grad_matmul);
    RUN(test_grad_embedding);
    RUN(test_grad_token_ce);
    RUN(test_grad_pool);
    RUN(test_grad_elem);
    RUN(test_grad_loss);
    return harness_end();
}
