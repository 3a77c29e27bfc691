/*
 * test_graph.c - the forward graph and autodiff: shape inference, parameter counts,
 * FLOPs, sticky failures, and the training graph's memory figures on a tiny network.
 *
 * Every expected value is worked out by hand in the comment beside it (PyTorch's shape
 * rules, the FLOP formulas of op_table.c, the memory model of docs/design.md section 2).
 */
#include "graph_util.h"

/* ------------------------------------------------------------------ shapes */

static void test_conv_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t x, y;
    int64_t p0;

    /* ResNet stem: 3x224x224, 64 out, k7 s2 p3: floor((224 + 2*3 - 7) / 2) + 1
     * = floor(223 / 2) + 1 = 112. */
    x = input4(g, 1, 3, 224, 224);
    y = add1(g, REMAT_OP_CONV2D, x,
             &(remat_attrs){.out_channels = 64, .kh = 7, .kw = 7, .sh = 2, .sw = 2,
                            .ph = 3, .pw = 3},
             "stem");
    CHECK_SHAPE(g, y, 4, 1, 64, 112, 112);
    /* weight 64 * 3 * 7 * 7 = 9408, no bias */
    CHECK_I64(remat_graph_n_params(g), 9408);

    /* dilation 2, k3, p2: the kernel spans 1 + 2*(3-1) = 5; 20 + 2*2 - 5 + 1 = 20. */
    x = input4(g, 2, 8, 20, 20);
    y = add1(g, REMAT_OP_CONV2D, x,
             &(remat_attrs){.out_channels = 8, .kh = 3, .kw = 3, .ph = 2, .pw = 2, .dh = 2,
                            .dw = 2},
             "dilated");
    CHECK_SHAPE(g, y, 4, 2, 8, 20, 20);

    /* odd input, k3 s2 p1 on 15x9: floor((15 + 2 - 3) / 2) + 1 = 8,
     * floor((9 + 2 - 3) / 2) + 1 = 5. */
    x = input4(g, 1, 2, 15, 9);
    y = add1(g, REMAT_OP_CONV2D, x,
             &(remat_attrs){.out_channels = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
                            .pw = 1, .bias = true},
             "odd");
    CHECK_SHAPE(g, y, 4, 1, 4, 8, 5);

    /* groups 3 on 6 channels, 6 out, k3 on 10x10 -> 8x8; weight 6 * (6/3) * 3 * 3 = 108 */
    p0 = remat_graph_n_params(g);
    x = input4(g, 1, 6, 10, 10);
    y = add1(g, REMAT_OP_CONV2D, x, &(remat_attrs){.out_channels = 6, .kh = 3, .kw = 3,
                                                   .groups = 3}, "grouped");
    CHECK_SHAPE(g, y, 4, 1, 6, 8, 8);
    CHECK_I64(remat_graph_n_params(g) - p0, 108);

    /* conv_transpose2d k2 s2 doubles: (7 - 1)*2 + (2 - 1) + 1 = 14; weight (Cin, Cout, kh, kw)
     * = 8 * 4 * 2 * 2 = 128, bias 4 */
    p0 = remat_graph_n_params(g);
    x = input4(g, 1, 8, 7, 7);
    y = add1(g, REMAT_OP_CONV_TRANSPOSE2D, x,
             &(remat_attrs){.out_channels = 4, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
                            .bias = true},
             "up");
    CHECK_SHAPE(g, y, 4, 1, 4, 14, 14);
    CHECK_I64(remat_graph_n_params(g) - p0, 132);
    /* k3 s2 p1 with output padding 1: (7 - 1)*2 - 2*1 + (3 - 1) + 1 + 1 = 14;
     * without it 13 */
    y = add1(g, REMAT_OP_CONV_TRANSPOSE2D, x,
             &(remat_attrs){.out_channels = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
                            .pw = 1, .out_pad_h = 1, .out_pad_w = 1},
             "up_outpad");
    CHECK_SHAPE(g, y, 4, 1, 4, 14, 14);
    y = add1(g, REMAT_OP_CONV_TRANSPOSE2D, x,
             &(remat_attrs){.out_channels = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
                            .pw = 1},
             "up_nopad");
    CHECK_SHAPE(g, y, 4, 1, 4, 13, 13);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    /* 6 channels do not split into 4 groups */
    g = new_graph();
    x = input4(g, 1, 6, 10, 10);
    y = add1(g, REMAT_OP_CONV2D, x, &(remat_attrs){.out_channels = 8, .kh = 3, .kw = 3,
                                                   .groups = 4}, "my_grouped_conv");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "my_grouped_conv");
    remat_graph_free(g);

    /* a 3x3 kernel on a 2x2 input without padding: 2 - 3 + 1 = 0 rows */
    g = new_graph();
    x = input4(g, 1, 1, 2, 2);
    y = add1(g, REMAT_OP_CONV2D, x, &(remat_attrs){.out_channels = 1, .kh = 3, .kw = 3},
             "too_big_kernel");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "too_big_kernel");
    remat_graph_free(g);

    /* output padding must be below the stride (2) */
    g = new_graph();
    x = input4(g, 1, 1, 4, 4);
    y = add1(g, REMAT_OP_CONV_TRANSPOSE2D, x,
             &(remat_attrs){.out_channels = 1, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
                            .out_pad_h = 2},
             "bad_outpad");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "bad_outpad");
    remat_graph_free(g);

    /* a convolution needs a 4-d input */
    g = new_graph();
    x = remat_graph_input(g, "flat", 2, (int64_t[]){4, 10});
    y = add1(g, REMAT_OP_CONV2D, x, &(remat_attrs){.out_channels = 1, .kh = 1, .kw = 1},
             "conv_on_2d");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "conv_on_2d");
    remat_graph_free(g);
}

static void test_pool_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t x, y, n0;

    /* 112, k3 s2, ceil: ceil((112 - 3) / 2) + 1 = ceil(54.5) + 1 = 56; the last window
     * starts at (56 - 1)*2 = 110 < 112, so it stays. Floor mode: 54 + 1 = 55. */
    x = input4(g, 1, 64, 112, 112);
    n0 = remat_graph_n_values(g);
    y = add1(g, REMAT_OP_MAX_POOL, x,
             &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ceil_mode = true}, "mp");
    CHECK_SHAPE(g, y, 4, 1, 64, 56, 56);
    /* max_pool adds its output and its indices (same shape as the output), no params */
    CHECK_I64(remat_graph_n_values(g) - n0, 2);
    CHECK_SHAPE(g, y + 1, 4, 1, 64, 56, 56);
    y = add1(g, REMAT_OP_MAX_POOL, x, &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2},
             "mp_floor");
    CHECK_SHAPE(g, y, 4, 1, 64, 55, 55);

    /* 14, k3 s1 p1, ceil: (14 + 2 - 3) / 1 + 1 = 14 */
    x = input4(g, 1, 2, 14, 14);
    y = add1(g, REMAT_OP_MAX_POOL, x,
             &(remat_attrs){.kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
                            .ceil_mode = true},
             "mp14");
    CHECK_SHAPE(g, y, 4, 1, 2, 14, 14);

    /* 6, k2 s2 p1, ceil: ceil((6 + 2 - 2) / 2) + 1 = 3 + 1 = 4; last window starts at
     * (4 - 1)*2 = 6, and 6 >= 6 + 1 is false, so 4 stays. */
    x = input4(g, 1, 1, 6, 6);
    y = add1(g, REMAT_OP_MAX_POOL, x,
             &(remat_attrs){.kh = 2, .kw = 2, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                            .ceil_mode = true},
             "mp6");
    CHECK_SHAPE(g, y, 4, 1, 1, 4, 4);

    /* 5, k2 s2 p1, ceil: ceil((5 + 2 - 2) / 2) + 1 = ceil(2.5) + 1 = 4; the last window
     * would start at (4 - 1)*2 = 6 >= 5 + 1 = 6, entirely in the padding: dropped -> 3.
     * (Floor mode gives floor(2.5) + 1 = 3 too.) Width 7: ceil((7+2-2)/2)+1 = 5, last
     * start 8 >= 8: dropped -> 4. */
    x = input4(g, 1, 1, 5, 7);
    y = add1(g, REMAT_OP_MAX_POOL, x,
             &(remat_attrs){.kh = 2, .kw = 2, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                            .ceil_mode = true},
             "mp5");
    CHECK_SHAPE(g, y, 4, 1, 1, 3, 4);

    /* 7, k3 s2 ceil without padding: ceil((7 - 3) / 2) + 1 = 3 (exact) */
    x = input4(g, 1, 1, 7, 8);
    y = add1(g, REMAT_OP_MAX_POOL, x,
             &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ceil_mode = true}, "mp7");
    /* width 8: ceil((8 - 3) / 2) + 1 = ceil(2.5) + 1 = 4; last start 6 < 8 stays */
    CHECK_SHAPE(g, y, 4, 1, 1, 3, 4);

    /* avg_pool k3 s2 p1 on 7x7: floor((7 + 2 - 3) / 2) + 1 = 4; no saved indices */
    x = input4(g, 2, 3, 7, 7);
    n0 = remat_graph_n_values(g);
    y = add1(g, REMAT_OP_AVG_POOL, x,
             &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}, "ap");
    CHECK_SHAPE(g, y, 4, 2, 3, 4, 4);
    CHECK_I64(remat_graph_n_values(g) - n0, 1);
    /* avg_pool k2 with the default stride (= kernel) on 7x7: floor((7 - 2) / 2) + 1 = 3 */
    y = add1(g, REMAT_OP_AVG_POOL, x, &(remat_attrs){.kh = 2, .kw = 2}, "ap2");
    CHECK_SHAPE(g, y, 4, 2, 3, 3, 3);

    /* global average pooling keeps N and C */
    x = input4(g, 2, 5, 7, 3);
    y = add1(g, REMAT_OP_GLOBAL_AVG_POOL, x, NULL, "gap");
    CHECK_SHAPE(g, y, 4, 2, 5, 1, 1);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    /* padding 2 is more than half a 3-wide window */
    g = new_graph();
    x = input4(g, 1, 1, 8, 8);
    y = add1(g, REMAT_OP_MAX_POOL, x, &(remat_attrs){.kh = 3, .kw = 3, .ph = 2, .pw = 2},
             "pool_pad");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "pool_pad");
    remat_graph_free(g);
}

static void test_join_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t a, b, c, y, in[3];

    a = input4(g, 2, 3, 4, 4);
    b = add1(g, REMAT_OP_RELU, a, NULL, "r");
    in[0] = a, in[1] = b, in[2] = a;
    y = remat_graph_add(g, REMAT_OP_ADD, in, 3, NULL, "add3");
    CHECK_SHAPE(g, y, 4, 2, 3, 4, 4);

    /* concat along channels: 3 + 4 + 1 = 8 */
    a = input4(g, 2, 3, 5, 5);
    b = input4(g, 2, 4, 5, 5);
    c = input4(g, 2, 1, 5, 5);
    in[0] = a, in[1] = b, in[2] = c;
    y = remat_graph_add(g, REMAT_OP_CONCAT, in, 3, NULL, "cat");
    CHECK_SHAPE(g, y, 4, 2, 8, 5, 5);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    /* add of (2,3,4,4) and (2,3,4,5) */
    g = new_graph();
    a = input4(g, 2, 3, 4, 4);
    b = input4(g, 2, 3, 4, 5);
    in[0] = a, in[1] = b;
    y = remat_graph_add(g, REMAT_OP_ADD, in, 2, NULL, "add_bad");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "add_bad");
    remat_graph_free(g);

    /* concat of H 5 and H 6 */
    g = new_graph();
    a = input4(g, 2, 3, 5, 5);
    b = input4(g, 2, 3, 6, 5);
    in[0] = a, in[1] = b;
    y = remat_graph_add(g, REMAT_OP_CONCAT, in, 2, NULL, "cat_bad");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "cat_bad");
    remat_graph_free(g);

    /* concat of batch 2 and batch 3 */
    g = new_graph();
    a = input4(g, 2, 3, 5, 5);
    b = input4(g, 3, 3, 5, 5);
    in[0] = a, in[1] = b;
    y = remat_graph_add(g, REMAT_OP_CONCAT, in, 2, NULL, "cat_batch");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "cat_batch");
    remat_graph_free(g);

    /* add takes at least 2 inputs */
    g = new_graph();
    a = input4(g, 2, 3, 5, 5);
    y = remat_graph_add(g, REMAT_OP_ADD, &a, 1, NULL, "add_one");
    CHECK_FAILED(g, y, REMAT_ERR_ARG, "add_one");
    remat_graph_free(g);
}

static void test_linear_view_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t x, y, f;
    int64_t p0;

    /* linear 10 -> 7 with bias on (4, 10): weight 7*10 + bias 7 = 77 */
    x = remat_graph_input(g, "feat", 2, (int64_t[]){4, 10});
    y = add1(g, REMAT_OP_LINEAR, x, &(remat_attrs){.out_channels = 7, .bias = true}, "fc");
    CHECK_SHAPE(g, y, 2, 4, 7);
    CHECK_I64(remat_graph_n_params(g), 77);

    /* flatten (2,3,4,5) -> (2, 60); reshape views add no params */
    p0 = remat_graph_n_params(g);
    x = input4(g, 2, 3, 4, 5);
    f = add1(g, REMAT_OP_FLATTEN, x, NULL, "flat");
    CHECK_SHAPE(g, f, 2, 2, 60);
    /* reshape (6, -1): 120 / 6 = 20 */
    y = add1(g, REMAT_OP_RESHAPE, x, &(remat_attrs){.ndim = 2, .shape = {6, -1}}, "rs");
    CHECK_SHAPE(g, y, 2, 6, 20);
    /* reshape (2, -1, 5): 120 / 10 = 12 */
    y = add1(g, REMAT_OP_RESHAPE, x, &(remat_attrs){.ndim = 3, .shape = {2, -1, 5}}, "rs3");
    CHECK_SHAPE(g, y, 3, 2, 12, 5);
    /* reshape (4, 30) with no free dimension */
    y = add1(g, REMAT_OP_RESHAPE, x, &(remat_attrs){.ndim = 2, .shape = {4, 30}}, "rs4");
    CHECK_SHAPE(g, y, 2, 4, 30);
    CHECK_I64(remat_graph_n_params(g) - p0, 0);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    /* linear on a 4-d input: must flatten first */
    g = new_graph();
    x = input4(g, 2, 3, 4, 4);
    y = add1(g, REMAT_OP_LINEAR, x, &(remat_attrs){.out_channels = 10}, "fc_4d");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "fc_4d");
    remat_graph_free(g);

    /* reshape (7, -1) of 120 elements: 120 % 7 = 1 */
    g = new_graph();
    x = input4(g, 2, 3, 4, 5);
    y = add1(g, REMAT_OP_RESHAPE, x, &(remat_attrs){.ndim = 2, .shape = {7, -1}}, "rs_bad");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "rs_bad");
    remat_graph_free(g);

    /* reshape (5, 5): 25 != 120 */
    g = new_graph();
    x = input4(g, 2, 3, 4, 5);
    y = add1(g, REMAT_OP_RESHAPE, x, &(remat_attrs){.ndim = 2, .shape = {5, 5}}, "rs_25");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "rs_25");
    remat_graph_free(g);
}

static void test_resize_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t x, y;

    x = input4(g, 1, 3, 5, 7);
    y = add1(g, REMAT_OP_UPSAMPLE_BILINEAR, x, &(remat_attrs){.out_h = 10, .out_w = 14},
             "up");
    CHECK_SHAPE(g, y, 4, 1, 3, 10, 14);

    /* crop 4x5 out of 10x9, centred (offsets (10-4)/2 = 3 and (9-5)/2 = 2) */
    x = input4(g, 1, 2, 10, 9);
    y = add1(g, REMAT_OP_CROP, x,
             &(remat_attrs){.out_h = 4, .out_w = 5, .offset_h = -1, .offset_w = -1},
             "crop_c");
    CHECK_SHAPE(g, y, 4, 1, 2, 4, 5);
    /* the window touching the border: offset 6 + 4 = 10 rows, 4 + 5 = 9 columns */
    y = add1(g, REMAT_OP_CROP, x,
             &(remat_attrs){.out_h = 4, .out_w = 5, .offset_h = 6, .offset_w = 4},
             "crop_edge");
    CHECK_SHAPE(g, y, 4, 1, 2, 4, 5);

    /* pad t1 b2 l3 r4: 5 + 1 + 2 = 8 rows, 5 + 3 + 4 = 12 columns */
    x = input4(g, 1, 2, 5, 5);
    y = add1(g, REMAT_OP_PAD, x,
             &(remat_attrs){.pad_t = 1, .pad_b = 2, .pad_l = 3, .pad_r = 4}, "pad");
    CHECK_SHAPE(g, y, 4, 1, 2, 8, 12);
    CHECK_OK(remat_graph_status(g));
    remat_graph_free(g);

    /* crop 11 rows out of 10 */
    g = new_graph();
    x = input4(g, 1, 2, 10, 9);
    y = add1(g, REMAT_OP_CROP, x, &(remat_attrs){.out_h = 11, .out_w = 5}, "crop_big");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "crop_big");
    remat_graph_free(g);

    /* offset 7 + 4 rows = 11 > 10 */
    g = new_graph();
    x = input4(g, 1, 2, 10, 9);
    y = add1(g, REMAT_OP_CROP, x,
             &(remat_attrs){.out_h = 4, .out_w = 5, .offset_h = 7, .offset_w = 0},
             "crop_off");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "crop_off");
    remat_graph_free(g);

    /* upsample without an output size */
    g = new_graph();
    x = input4(g, 1, 2, 10, 9);
    y = add1(g, REMAT_OP_UPSAMPLE_BILINEAR, x, NULL, "up_nosize");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "up_nosize");
    remat_graph_free(g);

    /* negative padding */
    g = new_graph();
    x = input4(g, 1, 2, 10, 9);
    y = add1(g, REMAT_OP_PAD, x, &(remat_attrs){.pad_t = -1}, "pad_neg");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "pad_neg");
    remat_graph_free(g);
}

static void test_loss_shapes(void)
{
    remat_graph *g = new_graph();
    int32_t x, lab, l1, l2, y, in[2], n0;

    x = remat_graph_input(g, "logits", 2, (int64_t[]){4, 10});
    lab = remat_graph_labels(g, "labels", 4);
    CHECK_SHAPE(g, lab, 1, 4);
    in[0] = x, in[1] = lab;
    n0 = remat_graph_n_values(g);
    l1 = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce1");
    CHECK_SHAPE(g, l1, 1, 1);
    /* the loss and the saved probabilities (N, K) = (4, 10) */
    CHECK_I64(remat_graph_n_values(g) - n0, 2);
    CHECK_SHAPE(g, l1 + 1, 2, 4, 10);
    l2 = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce2");
    in[0] = l1, in[1] = l2;
    y = remat_graph_add(g, REMAT_OP_SUM_LOSSES, in, 2, NULL, "total");
    CHECK_SHAPE(g, y, 1, 1);
    CHECK_OK(remat_graph_set_loss(g, y));
    CHECK_OK(remat_graph_status(g));
    /* a loss must be a scalar */
    CHECK(remat_graph_set_loss(g, x) != REMAT_OK, "set_loss accepted a (4, 10) value");
    remat_graph_free(g);

    /* 3 labels for 4 rows */
    g = new_graph();
    x = remat_graph_input(g, "logits", 2, (int64_t[]){4, 10});
    lab = remat_graph_labels(g, "labels", 3);
    in[0] = x, in[1] = lab;
    y = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce_count");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "ce_count");
    remat_graph_free(g);

    /* logits that are not 2-d */
    g = new_graph();
    x = input4(g, 4, 10, 1, 1);
    lab = remat_graph_labels(g, "labels", 4);
    in[0] = x, in[1] = lab;
    y = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce_4d");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "ce_4d");
    remat_graph_free(g);

    /* a float input where the labels go */
    g = new_graph();
    x = remat_graph_input(g, "logits", 2, (int64_t[]){4, 10});
    lab = remat_graph_input(g, "not_labels", 1, (int64_t[]){4});
    in[0] = x, in[1] = lab;
    y = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce_nolabels");
    CHECK_FAILED(g, y, REMAT_ERR_ARG, "ce_nolabels");
    remat_graph_free(g);

    /* sum_losses of a (4, 10) value */
    g = new_graph();
    x = remat_graph_input(g, "logits", 2, (int64_t[]){4, 10});
    lab = remat_graph_labels(g, "labels", 4);
    in[0] = x, in[1] = lab;
    l1 = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce");
    in[0] = l1, in[1] = x;
    y = remat_graph_add(g, REMAT_OP_SUM_LOSSES, in, 2, NULL, "sum_bad");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "sum_bad");
    remat_graph_free(g);
}

/* A failure is sticky: later calls return -1 and the first status stays. */
static void test_sticky_failure(void)
{
    remat_graph *g = new_graph();
    int32_t a, b, y, in[2];
    int32_t n_ops, n_vals;

    a = input4(g, 2, 3, 4, 4);
    b = input4(g, 2, 3, 4, 5);
    in[0] = a, in[1] = b;
    y = remat_graph_add(g, REMAT_OP_ADD, in, 2, NULL, "first_failure");
    CHECK_FAILED(g, y, REMAT_ERR_SHAPE, "first_failure");
    n_ops = remat_graph_n_ops(g);
    n_vals = remat_graph_n_values(g);
    CHECK_I64(n_ops, 0);
    CHECK_I64(n_vals, 2);

    /* a valid op now fails too */
    y = add1(g, REMAT_OP_RELU, a, NULL, "valid_relu");
    CHECK_I64(y, -1);
    CHECK(remat_graph_status(g) == REMAT_ERR_SHAPE, "status %s",
          remat_status_name(remat_graph_status(g)));
    /* an op that would fail differently (bad input id: ARG) keeps the first status */
    y = add1(g, REMAT_OP_RELU, 999, NULL, "bad_id");
    CHECK_I64(y, -1);
    CHECK(remat_graph_status(g) == REMAT_ERR_SHAPE, "status %s",
          remat_status_name(remat_graph_status(g)));
    CHECK_I64(input4(g, 1, 1, 1, 1), -1);
    CHECK_I64(remat_graph_labels(g, "l", 2), -1);
    CHECK(remat_graph_set_loss(g, a) == REMAT_ERR_SHAPE, "set_loss after a failure");
    CHECK_I64(remat_graph_n_ops(g), 0);
    CHECK_I64(remat_graph_n_values(g), 2);
    remat_graph_free(g);
}

/* ------------------------------------------------------- the tiny network */

/*
 * input (2,3,8,8) -> conv 4 out k3 p1 with bias -> batch_norm -> relu -> max_pool k2
 * -> flatten -> linear 10 with bias -> softmax_ce against 2 labels.
 *
 * Value ids (params come before the op's output, the saved extra right after it):
 *   0 x (2,3,8,8)   1 labels (2)
 *   2 conv.weight (4,3,3,3)  3 conv.bias (4)  4 conv out (2,4,8,8)
 *   5 gamma (4)  6 beta (4)  7 bn out (2,4,8,8)  8 bn saved (2,4)
 *   9 relu out (2,4,8,8)
 *   10 pool out (2,4,4,4)  11 pool indices (2,4,4,4)
 *   12 flatten (2,64), a view of 10
 *   13 fc.weight (10,64)  14 fc.bias (10)  15 logits (2,10)
 *   16 loss (1)  17 probs (2,10)
 */
struct tiny {
    remat_graph *g;
    int32_t x, lab, conv, bn, relu, pool, flat, fc, loss;
};

static struct tiny build_tiny(void)
{
    struct tiny t;
    int32_t in[2];

    t.g = new_graph();
    t.x = input4(t.g, 2, 3, 8, 8);
    t.lab = remat_graph_labels(t.g, "labels", 2);
    t.conv = add1(t.g, REMAT_OP_CONV2D, t.x,
                  &(remat_attrs){.out_channels = 4, .kh = 3, .kw = 3, .ph = 1, .pw = 1,
                                 .bias = true},
                  "conv");
    t.bn = add1(t.g, REMAT_OP_BATCH_NORM, t.conv, NULL, "bn");
    t.relu = add1(t.g, REMAT_OP_RELU, t.bn, NULL, "relu");
    t.pool = add1(t.g, REMAT_OP_MAX_POOL, t.relu, &(remat_attrs){.kh = 2, .kw = 2}, "pool");
    t.flat = add1(t.g, REMAT_OP_FLATTEN, t.pool, NULL, "flat");
    t.fc = add1(t.g, REMAT_OP_LINEAR, t.flat, &(remat_attrs){.out_channels = 10, .bias = true},
                "fc");
    in[0] = t.fc, in[1] = t.lab;
    t.loss = remat_graph_add(t.g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce");
    REMAT_ASSERT_TEST(remat_graph_set_loss(t.g, t.loss) == REMAT_OK);
    return t;
}

static void test_tiny_counts(void)
{
    struct tiny t = build_tiny();
    remat_graph *g = t.g;
    double want;

    CHECK_OK(remat_graph_status(g));
    CHECK_I64(t.conv, 4);
    CHECK_I64(t.bn, 7);
    CHECK_I64(t.relu, 9);
    CHECK_I64(t.pool, 10);
    CHECK_I64(t.flat, 12);
    CHECK_I64(t.fc, 15);
    CHECK_I64(t.loss, 16);
    CHECK_I64(remat_graph_n_values(g), 18);
    CHECK_I64(remat_graph_n_ops(g), 7);
    CHECK_SHAPE(g, t.conv, 4, 2, 4, 8, 8);
    CHECK_SHAPE(g, t.bn + 1, 2, 2, 4);      /* saved mean and inverse std */
    CHECK_SHAPE(g, t.pool, 4, 2, 4, 4, 4);
    CHECK_SHAPE(g, t.pool + 1, 4, 2, 4, 4, 4); /* indices */
    CHECK_SHAPE(g, t.flat, 2, 2, 64);       /* 4*4*4 */
    CHECK_SHAPE(g, t.fc, 2, 2, 10);
    CHECK_SHAPE(g, t.loss, 1, 1);
    CHECK_SHAPE(g, t.loss + 1, 2, 2, 10);   /* probabilities */
    CHECK_SHAPE(g, 2, 4, 4, 3, 3, 3);       /* conv.weight */
    CHECK_SHAPE(g, 13, 2, 10, 64);          /* fc.weight */

    /* params: conv 4*3*9 + 4 = 112, bn gamma and beta 2*4 = 8, linear 10*64 + 10 = 650 */
    CHECK_I64(remat_graph_n_params(g), (4 * 3 * 9 + 4) + (2 * 4) + (10 * 64 + 10));
    CHECK_I64(remat_graph_n_params(g), 770);

    /* forward FLOPs:
     *   conv:    2 * numel(out) * (Cin/groups) * kh * kw + numel(out)
     *            = 2 * 512 * 3 * 9 + 512 = 27648 + 512 = 28160
     *   bn:      7 * 512 = 3584
     *   relu:    512
     *   pool:    numel(out) * kh * kw = 128 * 4 = 512
     *   flatten: 0
     *   linear:  2 * numel(out) * in + numel(out) = 2 * 20 * 64 + 20 = 2580
     *   ce:      5 * N * K + N = 5 * 2 * 10 + 2 = 102
     *   total 35450 */
    want = (2.0 * 512 * 3 * 9 + 512) + 7.0 * 512 + 512 + 128.0 * 4 + 0 + (2.0 * 20 * 64 + 20) +
           (5.0 * 2 * 10 + 2);
    CHECK(want == 35450.0, "hand sum %g", want);
    CHECK(remat_graph_forward_flops(g) == 35450.0, "forward flops %g, expected 35450",
          remat_graph_forward_flops(g));
    remat_graph_free(g);
}

/*
 * The tiny network's training graph and its `none` schedule, worked by hand.
 *
 * Buffer sizes (elements * 4 bytes, rounded up to 64):
 *   conv 4, bn 7, relu 9: 512 * 4 = 2048 each; bn saved 8: 8 * 4 = 32 -> 64;
 *   pool 10 and indices 11: 128 * 4 = 512 each; flatten 12: a view, no buffer;
 *   logits 15: 20 * 4 = 80 -> 128; loss 16: 4 -> 64; probs 17: 80 -> 128.
 * Planned values owning a buffer: 4 7 8 9 10 11 15 16 17 -> 9.
 * Gradients: of 4, 7, 9 (2048 each), of 10 (shared with the view 12: 512), of 15 (128);
 * none for the loss (the constant 1), the saved extras, or the input.
 *
 * Backward reads: conv x (resident); bn its input 4 and saved 8; relu its output 9;
 * pool its input 9 and indices 11; linear its input 12 = buffer 10; ce probs 17.
 *
 * Live bytes after each FWD/BWD step (frees run right after each buffer's last use):
 *   FWD conv   +4                 2048
 *   FWD bn     +7 +8              4160            then free 7 (relu bwd reads 9)
 *   FWD relu   +9                 6208 -> 4160
 *   FWD pool   +10 +11            5184
 *   FWD flat                      5184
 *   FWD fc     +15                5312
 *   FWD ce     +16 +17            5504 -> free 15, 16 -> 5312
 *   BWD ce     +g15               5440 -> free 17 -> 5312
 *   BWD fc     +g10               5824 -> free 10, g15 -> 5184
 *   BWD pool   +g9                7232 -> free 11, g10 -> 6208
 *   BWD relu   +g7                8256 -> free 9, g9 -> 4160      <- the peak
 *   BWD bn     +g4                6208 -> free 4, 8, g7 -> 2048
 *   BWD conv                      2048 -> free g4 -> 0
 */
static void test_tiny_autodiff(void)
{
    static const size_t after_op_step[] = {2048, 4160, 6208, 5184, 5184, 5312, 5504,
                                           5440, 5824, 7232, 8256, 6208, 2048};
    struct tiny t = build_tiny();
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;
    size_t live[64], n, k = 0, max = 0;
    const remat_step *st;

    CHECK_OK(remat_tgraph_from_graph(t.g, NULL, &tg));
    if (!tg)
        goto out;
    CHECK_I64(remat_tgraph_n_values(tg), 18);
    CHECK_I64(remat_tgraph_n_ops(tg), 7);
    CHECK_I64(remat_tgraph_n_planned(tg), 9);
    CHECK_I64(remat_tgraph_n_params(tg), 770);
    CHECK(remat_tgraph_forward_flops(tg) == 35450.0, "tgraph flops %g",
          remat_tgraph_forward_flops(tg));

    CHECK_OK(remat_plan_none(tg, &s));
    if (!s)
        goto out;
    CHECK_OK(remat_sim_run(tg, s, &r));
    /* 7 FWD + 6 BWD (flatten has none) + 14 FREE (9 values and 5 gradients) */
    CHECK_I64(r.n_steps, 7 + 6 + 14);
    CHECK_I64(r.activation_peak_bytes, 8256);
    /* live at BWD relu: 9, g9, g7, 4 (2048 each) and 8 (64) */
    CHECK_I64(r.activation_peak_bytes, 4 * 2048 + 64);
    /* 2 * (2048*3 + 64 + 512*2 + 128 + 64 + 128) = 2 * 7552 */
    CHECK_I64(r.naive_bytes, 2 * (2048 * 3 + 64 + 512 * 2 + 128 + 64 + 128));
    /* the largest step: BWD bn reads 4, 8, g7 and writes g4: 2048*3 + 64 */
    CHECK_I64(r.lower_bound_bytes, 2048 * 3 + 64);
    /* resident: 3 * 770 * 4 (params, grads, momentum) + input 384 * 4 + labels 2 * 4
     * + running mean and variance 2 * 4 channels * 4 bytes */
    CHECK_I64(r.resident_bytes, 3 * 770 * 4 + 2 * 3 * 8 * 8 * 4 + 2 * 4 + 4 * 2 * 4);
    CHECK_I64(r.resident_bytes, 10816);
    CHECK(r.overhead == 0, "overhead %g", r.overhead);

    n = remat_schedule_n_steps(s);
    st = remat_schedule_steps(s);
    REMAT_ASSERT_TEST(n <= LEN(live));
    CHECK_OK(remat_sim_timeline(tg, s, live, n));
    for (size_t i = 0; i < n; i++) {
        max = live[i] > max ? live[i] : max;
        if (st[i].kind == REMAT_STEP_FREE)
            continue;
        if (k < LEN(after_op_step))
            CHECK(live[i] == after_op_step[k], "live after step %zu (op step %zu) = %zu, "
                  "expected %zu", i, k, live[i], after_op_step[k]);
        k++;
    }
    CHECK_I64(k, LEN(after_op_step));
    CHECK_I64(max, 8256);
    CHECK_I64(n ? live[n - 1] : 1, 0);
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(t.g);
}

/* Align 256 instead of 64: every buffer rounds up to 256. */
static void test_tiny_align(void)
{
    struct tiny t = build_tiny();
    remat_tgraph_opts o = {.align = 256};
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;

    CHECK_OK(remat_tgraph_from_graph(t.g, &o, &tg));
    if (tg)
        CHECK_OK(remat_plan_none(tg, &s));
    if (s) {
        CHECK_OK(remat_sim_run(tg, s, &r));
        /* the peak holds 4 * 2048 and the bn saved 32 bytes -> 256 */
        CHECK_I64(r.activation_peak_bytes, 4 * 2048 + 256);
        /* 2048*3 + 256 (bn saved) + 512*2 + 256*3 (logits 80, loss 4, probs 80) */
        CHECK_I64(r.naive_bytes, 2 * (2048 * 3 + 256 + 512 * 2 + 256 * 3));
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(t.g);
}

/* A graph with a failure or without a loss does not become a training graph. */
static void test_autodiff_refuses(void)
{
    remat_graph *g = new_graph();
    remat_tgraph *tg = NULL;
    int32_t x = input4(g, 1, 1, 2, 2);

    add1(g, REMAT_OP_RELU, x, NULL, "r");
    CHECK(remat_tgraph_from_graph(g, NULL, &tg) == REMAT_ERR_ARG, "no loss accepted");
    CHECK(tg == NULL, "a training graph without a loss");
    add1(g, REMAT_OP_LINEAR, x, &(remat_attrs){.out_channels = 2}, "fc_4d");
    CHECK(remat_tgraph_from_graph(g, NULL, &tg) == REMAT_ERR_SHAPE, "failed graph accepted");
    CHECK(tg == NULL, "a training graph from a failed graph");
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_conv_shapes);
    RUN(test_pool_shapes);
    RUN(test_join_shapes);
    RUN(test_linear_view_shapes);
    RUN(test_resize_shapes);
    RUN(test_loss_shapes);
    RUN(test_sticky_failure);
    RUN(test_tiny_counts);
    RUN(test_tiny_autodiff);
    RUN(test_tiny_align);
    RUN(test_autodiff_refuses);
    return harness_end();
}
