/*
 * test_kernels.c - the reference backend (src/kernels/ref), every op forward and
 * backward, against independent answers (the finite differences are in
 * test_kernels_grad.c):
 *  - hand-worked small cases for every op's forward (values worked out on paper and
 *    written here), and for the backward where a scatter or a mask makes it worth it;
 *  - every op built through the graph, so its attributes get their defaults and its
 *    output, aux and parameter shapes come from shape inference; the hand-worked cases
 *    check those shapes too;
 *  - dropout's mask against kernel_uniform, its determinism per key and its kept
 *    fraction; batch norm's running statistics by hand with update_stats on and off;
 *  - views and unknown op types, and softmax_ce's refusal of a bad label.
 * The transformer ops' hand-worked cases are in test_kernels_seq.c.
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it, so one can be rerun.
 */
#include "kernel_util.h"

#define S1(a) {1, {a, 0, 0, 0}}
#define S2(a, b) {2, {a, b, 0, 0}}
#define S4(a, b, c, d) {4, {a, b, c, d}}

/* Hand-worked values are exact in float or worked out in double: 1e-6 relative. */
#define HAND_TOL 1e-6

/* Runs the forward of a one-input op on x and checks the output against want. */
static void hand_forward(const char *what, remat_op type, struct shp xs, const float *x,
                         const remat_attrs *at, const float *w, const float *b,
                         struct shp ys, const double *want)
{
    struct tk t;

    tk_init(&t, type, 1, &xs, at);
    set_vals(&t.in[0], x);
    if (w)
        set_vals(&t.op.w, w);
    if (b)
        set_vals(&t.op.b, b);
    CHECK_OK(ref_forward(&t.op));
    check_shape(what, &t.op.out, ys.ndim, ys.d[0], ys.d[1], ys.d[2], ys.d[3]);
    if (kt_n(&t.op.out) == ys.d[0] * ys.d[1] * (ys.ndim > 2 ? ys.d[2] * ys.d[3] : 1))
        check_close(what, t.op.out.data, want, kt_n(&t.op.out), HAND_TOL);
    tk_fini(&t);
}

/* ----------------------------------------------------------- hand-worked */

static const float iota9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const float iota16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void test_conv_hand(void)
{
    const float w4[4] = {1, 2, 3, 4}, ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const float x2[2] = {2, 3}, wg[2] = {5, 7}, wf[4] = {5, 6, 7, 8}, half = 0.5f;

    /* conv2d: y[i][j] = sum w[a][b] x[i+a][j+b] (+ 0.5): 1+4+12+20 = 37 ... */
    hand_forward("conv2d k2", REMAT_OP_CONV2D, (struct shp)S4(1, 1, 3, 3), iota9,
                 &(remat_attrs){.out_channels = 1, .kh = 2, .kw = 2, .bias = true}, w4,
                 &half, (struct shp)S4(1, 1, 2, 2), (const double[]){37.5, 47.5, 67.5, 77.5});
    /* k3, stride 2, pad 1, ones: the 2x2 corners of the input, 1+2+4+5 = 12 ... */
    hand_forward("conv2d k3 s2 p1", REMAT_OP_CONV2D, (struct shp)S4(1, 1, 3, 3), iota9,
                 &(remat_attrs){.out_channels = 1, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
                                .ph = 1, .pw = 1}, ones9, NULL,
                 (struct shp)S4(1, 1, 2, 2), (const double[]){12, 16, 24, 28});
    /* dilation 2: the corners 1, 3, 7, 9 against 1, 2, 3, 4: 1 + 6 + 21 + 36 */
    hand_forward("conv2d dilation 2", REMAT_OP_CONV2D, (struct shp)S4(1, 1, 3, 3), iota9,
                 &(remat_attrs){.out_channels = 1, .kh = 2, .kw = 2, .dh = 2, .dw = 2}, w4,
                 NULL, (struct shp)S4(1, 1, 1, 1), (const double[]){64});
    /* groups 2: each channel by its own weight, (2*5, 3*7) */
    hand_forward("conv2d groups 2", REMAT_OP_CONV2D, (struct shp)S4(1, 2, 1, 1), x2,
                 &(remat_attrs){.out_channels = 2, .kh = 1, .kw = 1, .groups = 2}, wg, NULL,
                 (struct shp)S4(1, 2, 1, 1), (const double[]){10, 21});
    /* groups 1, weight (Cout, Cin): (2*5 + 3*6, 2*7 + 3*8) */
    hand_forward("conv2d 2->2", REMAT_OP_CONV2D, (struct shp)S4(1, 2, 1, 1), x2,
                 &(remat_attrs){.out_channels = 2, .kh = 1, .kw = 1}, wf, NULL,
                 (struct shp)S4(1, 2, 1, 1), (const double[]){28, 38});

    /* conv_transpose2d: y[i][j] = sum x[a][b] w[i-a][j-b] */
    hand_forward("conv_t k2", REMAT_OP_CONV_TRANSPOSE2D, (struct shp)S4(1, 1, 2, 2), w4,
                 &(remat_attrs){.out_channels = 1, .kh = 2, .kw = 2}, w4, NULL,
                 (struct shp)S4(1, 1, 3, 3),
                 (const double[]){1, 4, 4, 6, 20, 16, 9, 24, 16});
    /* pad 1 removes a border of that: the centre 20 */
    hand_forward("conv_t k2 p1", REMAT_OP_CONV_TRANSPOSE2D, (struct shp)S4(1, 1, 2, 2), w4,
                 &(remat_attrs){.out_channels = 1, .kh = 2, .kw = 2, .ph = 1, .pw = 1}, w4,
                 NULL, (struct shp)S4(1, 1, 1, 1), (const double[]){20});
    /* stride 2, ones: each input a 2x2 block; output padding 1 adds a row and a column
     * that only the bias reaches */
    hand_forward("conv_t s2 out_pad 1", REMAT_OP_CONV_TRANSPOSE2D,
                 (struct shp)S4(1, 1, 2, 2), w4,
                 &(remat_attrs){.out_channels = 1, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
                                .out_pad_h = 1, .out_pad_w = 1, .bias = true},
                 ones9, &half, (struct shp)S4(1, 1, 5, 5),
                 (const double[]){1.5, 1.5, 2.5, 2.5, .5, 1.5, 1.5, 2.5, 2.5, .5,
                                  3.5, 3.5, 4.5, 4.5, .5, 3.5, 3.5, 4.5, 4.5, .5,
                                  .5, .5, .5, .5, .5});
    /* weight (Cin, Cout): y[co] = sum_ci x[ci] w[ci][co] = (2*5 + 3*7, 2*6 + 3*8) */
    hand_forward("conv_t 2->2", REMAT_OP_CONV_TRANSPOSE2D, (struct shp)S4(1, 2, 1, 1), x2,
                 &(remat_attrs){.out_channels = 2, .kh = 1, .kw = 1}, wf, NULL,
                 (struct shp)S4(1, 2, 1, 1), (const double[]){31, 36});
    hand_forward("conv_t groups 2", REMAT_OP_CONV_TRANSPOSE2D, (struct shp)S4(1, 2, 1, 1), x2,
                 &(remat_attrs){.out_channels = 2, .kh = 1, .kw = 1, .groups = 2}, wg, NULL,
                 (struct shp)S4(1, 2, 1, 1), (const double[]){10, 21});
    /* dilation (1, 2), kernel (1, 2) = (1, 10): x[j] lands at j and j + 2 */
    hand_forward("conv_t dilation", REMAT_OP_CONV_TRANSPOSE2D, (struct shp)S4(1, 1, 1, 2),
                 (const float[]){1, 2},
                 &(remat_attrs){.out_channels = 1, .kh = 1, .kw = 2, .dw = 2},
                 (const float[]){1, 10}, NULL, (struct shp)S4(1, 1, 1, 4),
                 (const double[]){1, 2, 10, 20});
}

static void test_bn_hand(void)
{
    /* (2, 2, 1, 2): channel 0 holds 1, 3 | 5, 7 (mean 4, var 5), channel 1 is all 2 */
    const float x[8] = {1, 3, 2, 2, 5, 7, 2, 2}, gamma[2] = {2, 1}, beta[2] = {0.5f, -1};
    const float x2[6] = {1, -1, 2, 0, 3, 4}; /* (3, 2): {1, 2, 3} and {-1, 0, 4} */
    double is0 = 1 / sqrt(5 + 1e-5), is1 = 1 / sqrt(1e-5), want[8];
    float stats[4];
    struct shp s = S4(2, 2, 1, 2), s2 = S2(3, 2);
    struct tk t;

    tk_init(&t, REMAT_OP_BATCH_NORM, 1, &s, NULL);
    set_vals(&t.in[0], x);
    set_vals(&t.op.w, gamma);
    set_vals(&t.op.b, beta);
    t.op.running_var[0] = t.op.running_var[1] = 1;
    t.op.update_stats = true;
    CHECK_OK(ref_forward(&t.op));
    for (int i = 0; i < 8; i++)
        want[i] = (i / 2) % 2 == 0 ? 2 * (x[i] - 4) * is0 + 0.5 : -1;
    check_close("bn 4-d y", t.op.out.data, want, 8, HAND_TOL);
    check_close("bn 4-d aux", t.op.aux.data, (const double[]){4, 2, is0, is1}, 4, HAND_TOL);
    /* momentum 0.1: mean 0.1 * (4, 2); var 0.9 + 0.1 * (5 * 4/3, 0) */
    check_close("bn running mean", t.op.running_mean, (const double[]){0.4, 0.2}, 2, HAND_TOL);
    check_close("bn running var", t.op.running_var, (const double[]){0.9 + 2.0 / 3, 0.9}, 2,
                HAND_TOL);
    memcpy(stats, t.op.running_mean, sizeof(float) * 2);
    memcpy(stats + 2, t.op.running_var, sizeof(float) * 2);
    t.op.update_stats = false;
    CHECK_OK(ref_forward(&t.op));
    CHECK(!memcmp(stats, t.op.running_mean, sizeof(float) * 2) &&
          !memcmp(stats + 2, t.op.running_var, sizeof(float) * 2),
          "bn: update_stats false changed the running statistics");
    tk_fini(&t);

    /* 2-d, momentum 0.5, no gamma and beta (read as 1 and 0): var {2/3, 14/3},
     * unbiased {1, 7} */
    tk_init(&t, REMAT_OP_BATCH_NORM, 1, &s2, &(remat_attrs){.momentum = 0.5f});
    set_vals(&t.in[0], x2);
    free(t.op.w.data);
    free(t.op.b.data);
    t.op.w.data = t.op.b.data = NULL;
    t.op.update_stats = true;
    CHECK_OK(ref_forward(&t.op));
    is0 = 1 / sqrt(2.0 / 3 + 1e-5);
    is1 = 1 / sqrt(14.0 / 3 + 1e-5);
    check_close("bn 2-d y", t.op.out.data,
                (const double[]){-is0, -2 * is1, 0, -is1, is0, 3 * is1}, 6, HAND_TOL);
    check_close("bn 2-d running mean", t.op.running_mean, (const double[]){1, 0.5}, 2, HAND_TOL);
    check_close("bn 2-d running var", t.op.running_var, (const double[]){0.5, 3.5}, 2, HAND_TOL);
    tk_fini(&t);
}

static void test_relu_hand(void)
{
    struct shp s = S2(1, 4);
    struct tk t;

    tk_init(&t, REMAT_OP_RELU, 1, &s, NULL);
    set_vals(&t.in[0], (const float[]){-1, 0, 2, -0.5f});
    CHECK_OK(ref_forward(&t.op));
    check_close("relu y", t.op.out.data, (const double[]){0, 0, 2, 0}, 4, 0);
    set_vals(&t.op.dout, (const float[]){1, 2, 3, 4});
    set_vals(&t.din[0], (const float[]){10, 10, 10, 10});
    CHECK_OK(tk_backward(&t));
    check_close("relu dx (accumulated onto 10)", t.din[0].data,
                (const double[]){10, 10, 13, 10}, 4, 0);
    tk_fini(&t);
}

/* clip with the default range, [0, 6] (ReLU6): values below, inside, above, at a bound. */
static void test_clip_hand(void)
{
    struct shp s = S2(1, 5);
    struct tk t;

    tk_init(&t, REMAT_OP_CLIP, 1, &s, NULL);
    REMAT_ASSERT_TEST(t.op.at->clip_min == 0 && t.op.at->clip_max == 6);
    set_vals(&t.in[0], (const float[]){-1, 3, 7, 6, 0.5f});
    CHECK_OK(ref_forward(&t.op));
    check_close("clip y", t.op.out.data, (const double[]){0, 3, 6, 6, 0.5}, 5, 0);
    set_vals(&t.op.dout, (const float[]){1, 2, 3, 4, 5});
    set_vals(&t.din[0], (const float[]){10, 10, 10, 10, 10});
    CHECK_OK(tk_backward(&t));
    check_close("clip dx (accumulated onto 10; none at a bound)", t.din[0].data,
                (const double[]){10, 12, 10, 10, 15}, 5, 0);
    tk_fini(&t);
}

/* Max pooling on a (1, 1, h, w) input: y and the int32 argmax. */
static void hand_maxpool(const char *what, struct shp xs, const float *x, const remat_attrs *at,
                         int64_t ho, int64_t wo, const double *want, const int32_t *want_idx)
{
    struct tk t;

    tk_init(&t, REMAT_OP_MAX_POOL, 1, &xs, at);
    set_vals(&t.in[0], x);
    CHECK_OK(ref_forward(&t.op));
    check_shape(what, &t.op.out, 4, 1, 1, ho, wo);
    check_shape(what, &t.op.aux, 4, 1, 1, ho, wo);
    if (kt_n(&t.op.out) == ho * wo) {
        const int32_t *idx = (const int32_t *)t.op.aux.data;

        check_close(what, t.op.out.data, want, ho * wo, 0);
        for (int64_t i = 0; i < ho * wo; i++)
            CHECK(idx[i] == want_idx[i], "%s: argmax[%lld] = %d, expected %d", what,
                  (long long)i, idx[i], want_idx[i]);
    }
    tk_fini(&t);
}

static void test_pool_hand(void)
{
    const float x4[16] = {1, 5, 2, 0, 3, 4, 8, 7, 9, 0, 1, 1, 2, 6, 1, 3};
    const float neg9[9] = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
    const float peak[9] = {1, 2, 3, 4, 9, 5, 6, 7, 8}, sevens[4] = {7, 7, 7, 7};
    remat_attrs k2 = {.kh = 2, .kw = 2}, k2c = {.kh = 2, .kw = 2, .ceil_mode = true};
    remat_attrs k3p = {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
    remat_attrs k3pc = k3p, k3pi = k3p, k3pci;
    struct shp s = S4(1, 1, 3, 3), s2 = S4(1, 1, 2, 2), s4 = S4(1, 1, 4, 4);
    struct tk t;

    hand_maxpool("maxpool k2", s4, x4, &k2, 2, 2, (const double[]){5, 8, 9, 3},
                 (const int32_t[]){1, 6, 8, 15});
    /* -inf padding: with zero padding every output would be 0 */
    hand_maxpool("maxpool k3 s2 p1", s, neg9, &k3p, 2, 2, (const double[]){-1, -2, -4, -5},
                 (const int32_t[]){0, 1, 3, 4});
    hand_maxpool("maxpool ceil", s, iota9, &k2c, 2, 2, (const double[]){5, 6, 8, 9},
                 (const int32_t[]){4, 5, 7, 8});
    hand_maxpool("maxpool floor", s, iota9, &k2, 1, 1, (const double[]){5},
                 (const int32_t[]){4});
    hand_maxpool("maxpool ties: first wins", s2, sevens, &k2, 1, 1, (const double[]){7},
                 (const int32_t[]){0});

    /* backward: overlapping 2x2 windows (stride 1) all won by the centre */
    tk_init(&t, REMAT_OP_MAX_POOL, 1, &s, &(remat_attrs){.kh = 2, .kw = 2, .sh = 1, .sw = 1});
    set_vals(&t.in[0], peak);
    CHECK_OK(ref_forward(&t.op));
    set_vals(&t.op.dout, (const float[]){1, 2, 3, 4});
    CHECK_OK(tk_backward(&t));
    check_close("maxpool dx", t.din[0].data, (const double[]){0, 0, 0, 0, 10, 0, 0, 0, 0}, 9,
                0);
    tk_fini(&t);

    /* avg pool k3 s1 p1 on 2x2: every window holds the whole input (sum 10) in a 3x3 */
    hand_forward("avgpool include pad", REMAT_OP_AVG_POOL, s2, iota9,
                 &(remat_attrs){.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
                                .count_include_pad = true},
                 NULL, NULL, (struct shp)S4(1, 1, 2, 2),
                 (const double[]){10.0 / 9, 10.0 / 9, 10.0 / 9, 10.0 / 9});
    hand_forward("avgpool exclude pad", REMAT_OP_AVG_POOL, s2, iota9,
                 &(remat_attrs){.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1},
                 NULL, NULL, (struct shp)S4(1, 1, 2, 2), (const double[]){2.5, 2.5, 2.5, 2.5});
    /* ceil mode without padding: the clipped windows divide by what they hold */
    hand_forward("avgpool ceil", REMAT_OP_AVG_POOL, s, iota9, &k2c, NULL, NULL,
                 (struct shp)S4(1, 1, 2, 2), (const double[]){3, 4.5, 7.5, 9});
    /* 4x4 k3 s2 p1 ceil: rows {0,1}, {1,2,3}, {3} of pool sizes 3, 3, 2 (the last capped
     * at H + ph); sums 14 30 12 / 57 99 36 / 27 45 16 */
    k3pc.ceil_mode = true;
    k3pci = k3pc;
    k3pci.count_include_pad = true;
    hand_forward("avgpool 4x4 ceil exclude", REMAT_OP_AVG_POOL, s4, iota16, &k3pc, NULL,
                 NULL, (struct shp)S4(1, 1, 3, 3),
                 (const double[]){3.5, 5, 6, 9.5, 11, 12, 13.5, 15, 16});
    hand_forward("avgpool 4x4 ceil include", REMAT_OP_AVG_POOL, s4, iota16, &k3pci, NULL,
                 NULL, (struct shp)S4(1, 1, 3, 3),
                 (const double[]){14.0 / 9, 30.0 / 9, 2, 57.0 / 9, 11, 6, 4.5, 7.5, 4});
    k3pi.count_include_pad = true;
    hand_forward("avgpool 3x3 k3 s2 p1 include", REMAT_OP_AVG_POOL, s, iota9, &k3pi, NULL,
                 NULL, (struct shp)S4(1, 1, 2, 2),
                 (const double[]){12.0 / 9, 16.0 / 9, 24.0 / 9, 28.0 / 9});

    /* avg pool backward, dy = 1: each input is in all four windows: 4/9, or 4 * 1/4 */
    for (int inc = 0; inc < 2; inc++) {
        tk_init(&t, REMAT_OP_AVG_POOL, 1, &s2,
                &(remat_attrs){.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
                               .count_include_pad = inc});
        set_vals(&t.op.dout, (const float[]){1, 1, 1, 1});
        CHECK_OK(tk_backward(&t));
        check_close(inc ? "avgpool dx include" : "avgpool dx exclude", t.din[0].data,
                    inc ? (const double[]){4.0 / 9, 4.0 / 9, 4.0 / 9, 4.0 / 9}
                        : (const double[]){1, 1, 1, 1}, 4, HAND_TOL);
        tk_fini(&t);
    }

    /* global average pool: means 2.5 and 1; backward dy / 4 */
    hand_forward("gap", REMAT_OP_GLOBAL_AVG_POOL, (struct shp)S4(1, 2, 2, 2),
                 (const float[]){1, 2, 3, 4, -1, -1, 0, 6}, NULL, NULL, NULL,
                 (struct shp)S4(1, 2, 1, 1), (const double[]){2.5, 1});
    tk_init(&t, REMAT_OP_GLOBAL_AVG_POOL, 1, &(struct shp)S4(1, 2, 2, 2), NULL);
    set_vals(&t.op.dout, (const float[]){1, 2});
    CHECK_OK(tk_backward(&t));
    check_close("gap dx", t.din[0].data, (const double[]){.25, .25, .25, .25, .5, .5, .5, .5},
                8, 0);
    tk_fini(&t);
}

static void test_elem_hand(void)
{
    struct shp s3[3] = {S2(1, 3), S2(1, 3), S2(1, 3)}, sc[2] = {S4(2, 1, 1, 1), S4(2, 2, 1, 1)};
    struct shp s4 = S4(1, 1, 4, 4), s2 = S4(1, 1, 2, 2);
    struct tk t;

    tk_init(&t, REMAT_OP_ADD, 3, s3, NULL);
    set_vals(&t.in[0], (const float[]){1, 2, 3});
    set_vals(&t.in[1], (const float[]){10, 20, 30});
    set_vals(&t.in[2], (const float[]){.5f, .25f, .125f});
    CHECK_OK(ref_forward(&t.op));
    check_close("add y", t.op.out.data, (const double[]){11.5, 22.25, 33.125}, 3, 0);
    set_vals(&t.op.dout, (const float[]){1, 2, 3});
    set_vals(&t.din[2], (const float[]){1, 1, 1});
    free(t.din[1].data);
    t.din[1].data = NULL; /* not wanted */
    CHECK_OK(tk_backward(&t));
    check_close("add din0", t.din[0].data, (const double[]){1, 2, 3}, 3, 0);
    check_close("add din2 (onto 1)", t.din[2].data, (const double[]){2, 3, 4}, 3, 0);
    tk_fini(&t);

    /* concat of (2, 1) and (2, 2) channels: per sample a then b */
    tk_init(&t, REMAT_OP_CONCAT, 2, sc, NULL);
    set_vals(&t.in[0], (const float[]){1, 2});
    set_vals(&t.in[1], (const float[]){3, 4, 5, 6});
    CHECK_OK(ref_forward(&t.op));
    check_shape("concat", &t.op.out, 4, 2, 3, 1, 1);
    check_close("concat y", t.op.out.data, (const double[]){1, 3, 4, 2, 5, 6}, 6, 0);
    set_vals(&t.op.dout, (const float[]){10, 11, 12, 13, 14, 15});
    CHECK_OK(tk_backward(&t));
    check_close("concat din0", t.din[0].data, (const double[]){10, 13}, 2, 0);
    check_close("concat din1", t.din[1].data, (const double[]){11, 12, 14, 15}, 4, 0);
    tk_fini(&t);

    /* crop 2x2 out of 1..16 at (1, 2), and centred (offset -1: (1, 1)) */
    hand_forward("crop at (1, 2)", REMAT_OP_CROP, s4, iota16,
                 &(remat_attrs){.out_h = 2, .out_w = 2, .offset_h = 1, .offset_w = 2}, NULL,
                 NULL, (struct shp)S4(1, 1, 2, 2), (const double[]){7, 8, 11, 12});
    tk_init(&t, REMAT_OP_CROP, 1, &s4,
            &(remat_attrs){.out_h = 2, .out_w = 2, .offset_h = -1, .offset_w = -1});
    set_vals(&t.in[0], iota16);
    CHECK(t.at.offset_h == 1 && t.at.offset_w == 1, "crop: graph resolved (%d, %d)",
          t.at.offset_h, t.at.offset_w);
    t.at.offset_h = t.at.offset_w = -1; /* the kernel resolves it the same way */
    CHECK_OK(ref_forward(&t.op));
    check_close("crop centred", t.op.out.data, (const double[]){6, 7, 10, 11}, 4, 0);
    set_vals(&t.op.dout, (const float[]){1, 2, 3, 4});
    CHECK_OK(tk_backward(&t));
    check_close("crop dx", t.din[0].data,
                (const double[]){0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0}, 16, 0);
    tk_fini(&t);

    /* pad top 1, right 2 */
    hand_forward("pad", REMAT_OP_PAD, s2, iota9, &(remat_attrs){.pad_t = 1, .pad_r = 2}, NULL,
                 NULL, (struct shp)S4(1, 1, 3, 4),
                 (const double[]){0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0});
    tk_init(&t, REMAT_OP_PAD, 1, &s2, &(remat_attrs){.pad_t = 1, .pad_r = 2});
    for (int i = 0; i < 12; i++)
        t.op.dout.data[i] = (float)(i + 1);
    CHECK_OK(tk_backward(&t));
    check_close("pad dx", t.din[0].data, (const double[]){5, 6, 9, 10}, 4, 0);
    tk_fini(&t);
}

static void test_upsample_hand(void)
{
    struct shp s2 = S4(1, 1, 2, 2);
    double t3 = 1.0 / 3;
    struct tk t;

    /* align_corners false: along an axis 2 -> 4 gives a, .75a+.25b, .25a+.75b, b */
    hand_forward("upsample 2->4", REMAT_OP_UPSAMPLE_BILINEAR, s2, iota9,
                 &(remat_attrs){.out_h = 4, .out_w = 4}, NULL, NULL,
                 (struct shp)S4(1, 1, 4, 4),
                 (const double[]){1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5,
                                  2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
    /* align_corners true: a, (2a+b)/3, (a+2b)/3, b */
    hand_forward("upsample 2->4 align_corners", REMAT_OP_UPSAMPLE_BILINEAR, s2, iota9,
                 &(remat_attrs){.out_h = 4, .out_w = 4, .align_corners = true}, NULL, NULL,
                 (struct shp)S4(1, 1, 4, 4),
                 (const double[]){1, 4 * t3, 5 * t3, 2, 5 * t3, 2, 7 * t3, 8 * t3,
                                  7 * t3, 8 * t3, 3, 10 * t3, 3, 10 * t3, 11 * t3, 4});
    /* to 1x1: the centre (0.5, 0.5) blends all four; with align_corners the corner */
    hand_forward("upsample 2->1", REMAT_OP_UPSAMPLE_BILINEAR, s2, iota9,
                 &(remat_attrs){.out_h = 1, .out_w = 1}, NULL, NULL,
                 (struct shp)S4(1, 1, 1, 1), (const double[]){2.5});
    hand_forward("upsample 2->1 align_corners", REMAT_OP_UPSAMPLE_BILINEAR, s2, iota9,
                 &(remat_attrs){.out_h = 1, .out_w = 1, .align_corners = true}, NULL, NULL,
                 (struct shp)S4(1, 1, 1, 1), (const double[]){1});
    /* 3 -> 2 (align false): src = 0.25, 1.75: (0.75 x0 + 0.25 x1, 0.25 x1 + 0.75 x2) */
    hand_forward("upsample 1x3->1x2", REMAT_OP_UPSAMPLE_BILINEAR, (struct shp)S4(1, 1, 1, 3),
                 (const float[]){0, 4, 8}, &(remat_attrs){.out_h = 1, .out_w = 2}, NULL, NULL,
                 (struct shp)S4(1, 1, 1, 2), (const double[]){1, 7});

    /* backward of output (1, 1) alone: weights .75 / .25 on each axis */
    tk_init(&t, REMAT_OP_UPSAMPLE_BILINEAR, 1, &s2, &(remat_attrs){.out_h = 4, .out_w = 4});
    t.op.dout.data[5] = 1;
    CHECK_OK(tk_backward(&t));
    check_close("upsample dx", t.din[0].data, (const double[]){.5625, .1875, .1875, .0625}, 4,
                0);
    tk_fini(&t);
}

static void test_linear_hand(void)
{
    struct shp s = S2(2, 2);
    struct tk t;

    tk_init(&t, REMAT_OP_LINEAR, 1, &s, &(remat_attrs){.out_channels = 3, .bias = true});
    check_shape("linear weight", &t.op.w, 2, 3, 2, 0, 0);
    set_vals(&t.in[0], (const float[]){1, 2, -1, .5f});
    set_vals(&t.op.w, (const float[]){1, 0, 0, 1, 1, 1});
    set_vals(&t.op.b, (const float[]){.5f, 0, -1});
    CHECK_OK(ref_forward(&t.op));
    check_close("linear y", t.op.out.data, (const double[]){1.5, 2, 2, -.5, .5, -1.5}, 6, 0);
    set_vals(&t.op.dout, (const float[]){1, 0, 0, 0, 0, 1});
    CHECK_OK(tk_backward(&t));
    check_close("linear dx", t.din[0].data, (const double[]){1, 0, 1, 1}, 4, 0);
    check_close("linear dw", t.op.dw.data, (const double[]){1, 2, 0, 0, -1, .5}, 6, 0);
    check_close("linear db", t.op.db.data, (const double[]){1, 0, 1}, 3, 0);
    tk_fini(&t);
}

static void test_loss_hand(void)
{
    struct shp s[2] = {S2(3, 3), S1(3)}, sl[3] = {S1(1), S1(1), S1(1)};
    double z = 1 + exp(-1.0) + exp(-2.0), loss = (log(3.0) + log(z) + 0) / 3, want[9];
    double p[9] = {1.0 / 3, 1.0 / 3, 1.0 / 3, exp(-2.0) / z, exp(-1.0) / z, 1 / z, 1, 0, 0};
    const int32_t lab[3] = {1, 2, 0};
    float *dout;
    struct tk t;

    /* rows (0, 0, 0) label 1: log 3; (1, 2, 3) label 2: log(1 + 1/e + 1/e^2);
     * (1000, 0, 0) label 0: 0, which overflows without the max subtraction */
    tk_init(&t, REMAT_OP_SOFTMAX_CE, 2, s, NULL);
    set_vals(&t.in[0], (const float[]){0, 0, 0, 1, 2, 3, 1000, 0, 0});
    memcpy(t.in[1].data, lab, sizeof lab);
    CHECK_OK(ref_forward(&t.op));
    check_shape("softmax_ce", &t.op.out, 1, 1, 0, 0, 0);
    check_shape("softmax_ce aux", &t.op.aux, 2, 3, 3, 0, 0);
    check_close("softmax_ce loss", t.op.out.data, &loss, 1, HAND_TOL);
    check_close("softmax_ce probabilities", t.op.aux.data, p, 9, HAND_TOL);
    dout = t.op.dout.data;
    for (int half = 0; half < 2; half++) {
        double g = half ? 0.5 : 1;

        for (int i = 0; i < 9; i++)
            want[i] = (p[i] - (i % 3 == lab[i / 3])) * g / 3;
        memset(t.din[0].data, 0, sizeof(float) * 9);
        dout[0] = 0.5f;
        t.op.dout.data = half ? dout : NULL; /* NULL: the constant 1 */
        CHECK_OK(tk_backward(&t));
        check_close(half ? "softmax_ce dx, dout 0.5" : "softmax_ce dx, dout NULL",
                    t.din[0].data, want, 9, HAND_TOL);
    }
    t.op.dout.data = dout;

    /* a label outside [0, K) is refused, not read past */
    ((int32_t *)t.in[1].data)[1] = 3;
    CHECK(ref_forward(&t.op) == REMAT_ERR_ARG, "softmax_ce: label 3 of 3 classes accepted");
    CHECK(strstr(remat_errmsg(), "label 3"), "softmax_ce: message '%s'", remat_errmsg());
    ((int32_t *)t.in[1].data)[1] = -1;
    CHECK(tk_backward(&t) == REMAT_ERR_ARG, "softmax_ce: label -1 accepted by the backward");
    tk_fini(&t);

    /* sum_losses: 1.5 + 2.25 - 0.75; backward adds g to each wanted input */
    tk_init(&t, REMAT_OP_SUM_LOSSES, 3, sl, NULL);
    t.in[0].data[0] = 1.5f;
    t.in[1].data[0] = 2.25f;
    t.in[2].data[0] = -.75f;
    CHECK_OK(ref_forward(&t.op));
    check_close("sum_losses", t.op.out.data, (const double[]){3}, 1, 0);
    dout = t.op.dout.data;
    t.op.dout.data = NULL;
    free(t.din[1].data);
    t.din[1].data = NULL;
    CHECK_OK(tk_backward(&t));
    t.op.dout.data = dout;
    dout[0] = 0.5f;
    CHECK_OK(tk_backward(&t));
    check_close("sum_losses din0", t.din[0].data, (const double[]){1.5}, 1, 0);
    check_close("sum_losses din2", t.din[2].data, (const double[]){1.5}, 1, 0);
    tk_fini(&t);
}

/* Kept elements of dropout's output, counted; mismatches against the mask from
 * kernel_uniform(key, i) >= p, and against the value x / (1 - p), counted in *bad. */
static int64_t dropout_kept(const struct tk *t, uint64_t key, double p, int64_t *bad)
{
    int64_t n = kt_n(&t->op.out), kept = 0;

    *bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool keep = kernel_uniform(key, (uint64_t)i) >= (float)p;
        double want = keep ? t->in[0].data[i] / (1 - p) : 0;

        kept += t->op.out.data[i] != 0;
        *bad += keep != (t->op.out.data[i] != 0) ||
                fabs(t->op.out.data[i] - want) > 1e-6 * fabs(want);
    }
    return kept;
}

static void test_dropout(void)
{
    const int64_t n = 100000;
    struct shp s = S2(100, 1000), s_small = S2(4, 250);
    struct tk t, u;
    int64_t bad, kept, differ = 0;
    uint64_t key;
    float *y1;

    rng_state = rng_seed;
    key = splitmix64();
    /* kept fraction: binomial(n, 0.7), sd sqrt(0.21 / n) = 0.00145; the bound 0.01 is
     * 6.9 sd */
    tk_init(&t, REMAT_OP_DROPOUT, 1, &s, &(remat_attrs){.p = 0.3f});
    fill_away_from_zero(&t.in[0], 0.5, 2);
    t.op.key = key;
    CHECK_OK(ref_forward(&t.op));
    kept = dropout_kept(&t, key, 0.3, &bad);
    CHECK(bad == 0, "dropout: %lld elements disagree with kernel_uniform >= p, x / (1-p)",
          (long long)bad);
    CHECK(fabs((double)kept / (double)n - 0.7) < 0.01, "dropout p 0.3: kept %lld of %lld",
          (long long)kept, (long long)n);

    /* the same key gives the same output bit for bit; the next key another mask: each
     * element differs with probability 2 p (1 - p) = 0.42, so n/4 is far below */
    y1 = malloc(sizeof(float) * (size_t)n);
    REMAT_ASSERT_TEST(y1);
    memcpy(y1, t.op.out.data, sizeof(float) * (size_t)n);
    CHECK_OK(ref_forward(&t.op));
    CHECK(!memcmp(y1, t.op.out.data, sizeof(float) * (size_t)n), "dropout: same key differs");
    t.op.key = key + 1;
    CHECK_OK(ref_forward(&t.op));
    for (int64_t i = 0; i < n; i++)
        differ += (y1[i] != 0) != (t.op.out.data[i] != 0);
    CHECK(differ > n / 4, "dropout: keys %llu and +1 differ in only %lld of %lld elements",
          (unsigned long long)key, (long long)differ, (long long)n);
    free(y1);

    /* backward: dx += dy * mask / (1 - p), without x or y (NULL), accumulating */
    t.op.key = key;
    fill_uniform(&t.op.dout, -1, 1);
    for (int64_t i = 0; i < n; i++)
        t.din[0].data[i] = 1;
    CHECK_OK(tk_backward(&t));
    bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool keep = kernel_uniform(key, (uint64_t)i) >= 0.3f;
        double want = 1 + (keep ? t.op.dout.data[i] / 0.7 : 0);

        bad += fabs(t.din[0].data[i] - want) > 1e-6;
    }
    CHECK(bad == 0, "dropout dx: %lld elements differ from 1 + dy mask / (1 - p)",
          (long long)bad);
    tk_fini(&t);

    /* p left 0 is the default 0.5: 1000 elements, sd 0.0158, bound 0.08 (5 sd) */
    tk_init(&u, REMAT_OP_DROPOUT, 1, &s_small, NULL);
    CHECK(u.at.p == 0.5f, "dropout: default p %g", (double)u.at.p);
    fill_away_from_zero(&u.in[0], 0.5, 2);
    u.op.key = key;
    CHECK_OK(ref_forward(&u.op));
    kept = dropout_kept(&u, key, 0.5, &bad);
    CHECK(bad == 0 && fabs((double)kept / 1000 - 0.5) < 0.08,
          "dropout p 0.5: kept %lld of 1000, %lld wrong", (long long)kept, (long long)bad);
    tk_fini(&u);
}

static void test_views_unknown(void)
{
    struct shp s = S4(2, 3, 2, 2);
    struct tk t;
    struct kop bad;

    /* views: nothing computed, nothing written */
    for (int r = 0; r < 2; r++) {
        tk_init(&t, r ? REMAT_OP_RESHAPE : REMAT_OP_FLATTEN, 1, &s,
                &(remat_attrs){.ndim = 2, .shape = {4, -1}});
        for (int64_t i = 0; i < kt_n(&t.op.out); i++)
            t.op.out.data[i] = t.din[0].data[i] = 7;
        CHECK_OK(ref_forward(&t.op));
        CHECK_OK(ref_backward(&t.op));
        CHECK(t.op.out.data[0] == 7 && t.din[0].data[23] == 7, "%s wrote its tensors",
              r ? "reshape" : "flatten");
        tk_fini(&t);
    }
    memset(&bad, 0, sizeof bad);
    bad.type = REMAT_OP_COUNT;
    CHECK(ref_forward(&bad) == REMAT_ERR_UNSUPPORTED, "unknown op: forward accepted");
    CHECK(strstr(remat_errmsg(), "forward for op"), "unknown op: message '%s'", remat_errmsg());
    bad.type = (remat_op)77;
    CHECK(ref_backward(&bad) == REMAT_ERR_UNSUPPORTED, "unknown op: backward accepted");
    CHECK(strstr(remat_errmsg(), "(77)"), "unknown op: message '%s'", remat_errmsg());
}

/* Hand-worked: transpose (1, 2, 3) -> perm (2, 0, 1), softmax of equal logits, mul by a
 * per-channel factor, leaky relu, sigmoid and tanh at known points. */
static void test_misc_hand(void)
{
    struct shp s3 = {3, {1, 2, 3, 0}}, s2 = S2(1, 3), m[2] = {S4(1, 2, 1, 2), S4(1, 2, 1, 1)};
    struct shp s4 = S2(1, 3);
    struct tk t;

    tk_init(&t, REMAT_OP_TRANSPOSE, 1, &s3, &(remat_attrs){.perm = {2, 0, 1}});
    set_vals(&t.in[0], (const float[]){0, 1, 2, 3, 4, 5}); /* x[0][i][j] = 3 i + j */
    CHECK_OK(ref_forward(&t.op));
    /* y[j][0][i] = x[0][i][j]: shape (3, 1, 2) */
    check_close("transpose y", t.op.out.data, (const double[]){0, 3, 1, 4, 2, 5}, 6, 0);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_SOFTMAX, 1, &s2, NULL);
    set_vals(&t.in[0], (const float[]){7, 7, 7});
    CHECK_OK(ref_forward(&t.op));
    check_close("softmax of equal logits", t.op.out.data,
                (const double[]){1.0 / 3, 1.0 / 3, 1.0 / 3}, 3, 1e-7);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_MUL, 2, m, NULL);
    set_vals(&t.in[0], (const float[]){1, 2, 3, 4});
    set_vals(&t.in[1], (const float[]){10, -1});
    CHECK_OK(ref_forward(&t.op));
    check_close("mul by channel", t.op.out.data, (const double[]){10, 20, -3, -4}, 4, 0);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_LEAKY_RELU, 1, &s4, NULL); /* default slope 0.01 */
    set_vals(&t.in[0], (const float[]){-2, 0, 3});
    CHECK_OK(ref_forward(&t.op));
    check_close("leaky_relu y", t.op.out.data, (const double[]){-0.02, 0, 3}, 3, 1e-7);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_SIGMOID, 1, &s4, NULL);
    set_vals(&t.in[0], (const float[]){0, 100, -100});
    CHECK_OK(ref_forward(&t.op));
    check_close("sigmoid y", t.op.out.data, (const double[]){0.5, 1, 0}, 3, 1e-7);
    tk_fini(&t);

    /* tanh(1) = (e^2 - 1) / (e^2 + 1) = 0.761594156; odd; saturates at 1 */
    tk_init(&t, REMAT_OP_TANH, 1, &(struct shp)S2(1, 4), NULL);
    set_vals(&t.in[0], (const float[]){0, 1, -1, -30});
    CHECK_OK(ref_forward(&t.op));
    check_close("tanh y", t.op.out.data, (const double[]){0, 0.761594156, -0.761594156, -1}, 4,
                1e-7);
    tk_fini(&t);
}

/* The mobile activations at points worked by hand, on each side of their kinks:
 * hard_sigmoid (default: relu6(x + 3) / 6; ONNX's example: 0.5 x + 0.6) and
 * hard_swish x relu6(x + 3) / 6, whose slope is 0, x / 3 + 1/2, 1. */
static void test_hard_hand(void)
{
    struct shp s6 = S2(1, 6);
    struct tk t;

    tk_init(&t, REMAT_OP_HARD_SIGMOID, 1, &s6, NULL);
    set_vals(&t.in[0], (const float[]){-4, -3, 0, 1.5f, 3, 4});
    CHECK_OK(ref_forward(&t.op));
    check_close("hard_sigmoid y", t.op.out.data, (const double[]){0, 0, 0.5, 0.75, 1, 1}, 6,
                1e-7);
    set_vals(&t.op.dout, (const float[]){6, 6, 6, 12, 6, 6});
    set_vals(&t.din[0], (const float[]){1, 1, 1, 1, 1, 1});
    CHECK_OK(tk_backward(&t));
    check_close("hard_sigmoid dx (onto 1)", t.din[0].data, (const double[]){1, 1, 2, 3, 1, 1},
                6, 1e-6);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_HARD_SIGMOID, 1, &s6, &(remat_attrs){.alpha = 0.5f, .beta = 0.6f});
    set_vals(&t.in[0], (const float[]){-2, -1, 0, 0.5f, 1, 2});
    CHECK_OK(ref_forward(&t.op));
    check_close("hard_sigmoid 0.5 x + 0.6", t.op.out.data,
                (const double[]){0, 0.1, 0.6, 0.85, 1, 1}, 6, 1e-7);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_HARD_SWISH, 1, &s6, NULL);
    set_vals(&t.in[0], (const float[]){-4, -1.5f, 0, 1.5f, 2.25f, 4});
    CHECK_OK(ref_forward(&t.op));
    check_close("hard_swish y", t.op.out.data,
                (const double[]){0, -0.375, 0, 1.125, 1.96875, 4}, 6, 1e-7);
    set_vals(&t.op.dout, (const float[]){2, 2, 2, 2, 2, 2});
    CHECK_OK(tk_backward(&t));
    check_close("hard_swish dx", t.din[0].data, (const double[]){0, 0, 1, 2, 2.5, 2}, 6, 1e-6);
    tk_fini(&t);
}

/* reduce_sum of 1 .. 12 as (3, 2, 2): over axis 1 (pairs 2 apart), scaled by 1/2 (a
 * mean); over axes 0 and 2; and its backward, each input getting its output's dy. */
static void test_reduce_hand(void)
{
    struct shp s = {3, {3, 2, 2, 0}};
    float x[12];
    struct tk t;

    for (int i = 0; i < 12; i++)
        x[i] = (float)(i + 1);
    tk_init(&t, REMAT_OP_REDUCE_SUM, 1, &s,
            &(remat_attrs){.ndim = 3, .shape = {3, 1, 2}, .scale = 0.5f});
    set_vals(&t.in[0], x);
    CHECK_OK(ref_forward(&t.op));
    check_close("reduce mean axis 1", t.op.out.data, (const double[]){2, 3, 6, 7, 10, 11}, 6,
                0);
    set_vals(&t.op.dout, (const float[]){2, 4, 6, 8, 10, 12});
    CHECK_OK(tk_backward(&t));
    check_close("reduce mean axis 1 dx", t.din[0].data,
                (const double[]){1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6}, 12, 0);
    tk_fini(&t);

    tk_init(&t, REMAT_OP_REDUCE_SUM, 1, &s, &(remat_attrs){.ndim = 3, .shape = {1, 2, 1}});
    set_vals(&t.in[0], x);
    CHECK_OK(ref_forward(&t.op));
    /* rows 0: 1 2 5 6 9 10, rows 1: 3 4 7 8 11 12 */
    check_close("reduce sum axes 0, 2", t.op.out.data, (const double[]){33, 45}, 2, 0);
    tk_fini(&t);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    rng_seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    printf("seed %llu (REMAT_SEED to change)\n", (unsigned long long)rng_seed);
    RUN(test_conv_hand);
    RUN(test_bn_hand);
    RUN(test_relu_hand);
    RUN(test_clip_hand);
    RUN(test_misc_hand);
    RUN(test_hard_hand);
    RUN(test_reduce_hand);
    RUN(test_pool_hand);
    RUN(test_elem_hand);
    RUN(test_upsample_hand);
    RUN(test_linear_hand);
    RUN(test_loss_hand);
    RUN(test_dropout);
    RUN(test_views_unknown);
    return harness_end();
}
