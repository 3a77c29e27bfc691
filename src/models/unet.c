/*
 * unet.c - U-Net (Ronneberger et al. 2015) as in the paper: one grey input channel at
 * 572x572, unpadded 3x3 convs with bias and relu (no batch norm). The contracting path
 * doubles the channels 64 -> 1024 with a 2x2 max-pool between levels; the expanding path
 * up-samples with a 2x2 stride-2 transposed conv that halves the channels, crops the
 * skip connection (centred) to the up-sampled size, concatenates [skip, up] and applies
 * two 3x3 convs; a final 1x1 conv gives the class scores: (N, 2, 388, 388) at 572.
 */
#include "models/zoo.h"

#include <stdio.h>

#define LEVELS 4 /* pooling steps; the bottom level has 64 << LEVELS channels */

/* Two valid 3x3 convs with relu: x (N, C, H, W) -> (N, cout, H - 4, W - 4). */
static int32_t double_conv(remat_graph *g, int32_t x, const char *p, int64_t cout)
{
    x = zoo_conv(g, x, p, "conv1", cout, 3, 1, 0, true);
    x = zoo_relu(g, x, p, "relu1");
    x = zoo_conv(g, x, p, "conv2", cout, 3, 1, 0, true);
    return zoo_relu(g, x, p, "relu2");
}

/* One expanding level: up-samples x to cout channels, joins the cropped skip and
 * applies the double conv. Returns the output, or -1 after a failure. */
static int32_t up_level(remat_graph *g, int32_t x, int32_t skip, const char *p, int64_t cout)
{
    remat_attrs up = {.out_channels = cout, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
                      .bias = true};
    remat_attrs crop = {.offset_h = -1, .offset_w = -1};
    int64_t us[4], ss[4];
    int32_t ins[2];

    x = zoo_op1(g, REMAT_OP_CONV_TRANSPOSE2D, x, &up, p, "upconv");
    if (!zoo_shape(g, x, us) || !zoo_shape(g, skip, ss))
        return -1;
    if (ss[2] != us[2] || ss[3] != us[3]) {
        crop.out_h = us[2];
        crop.out_w = us[3];
        skip = zoo_op1(g, REMAT_OP_CROP, skip, &crop, p, "crop");
    }
    ins[0] = skip;
    ins[1] = x;
    x = zoo_opn(g, REMAT_OP_CONCAT, ins, 2, p, "cat");
    return double_conv(g, x, p, cout);
}

remat_status zoo_build_unet(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    int32_t x = zoo_image(g, c, 1), skips[LEVELS];
    char p[ZOO_NAME_MAX];

    (void)arg;
    for (int l = 0; l < LEVELS; l++) {
        snprintf(p, sizeof p, "down%d", l + 1);
        skips[l] = x = double_conv(g, x, p, c->base_channels << l);
        x = zoo_pool(g, REMAT_OP_MAX_POOL, x, p, "pool", 2, 2, 0, false);
    }
    x = double_conv(g, x, "bottom", c->base_channels << LEVELS);
    for (int l = LEVELS - 1; l >= 0; l--) {
        snprintf(p, sizeof p, "up%d", l + 1);
        x = up_level(g, x, skips[l], p, c->base_channels << l);
    }
    x = zoo_conv(g, x, NULL, "final", c->classes, 1, 1, 0, true);
    return zoo_seg_loss(g, x);
}
