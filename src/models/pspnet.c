/*
 * pspnet.c - PSPNet (Zhao et al. 2017) on a dilated ResNet-101: torchvision's resnet101
 * trunk with layer3 at dilation 2 and layer4 at dilation 4 (stride 1), so the features
 * are 1/8 of the input: (N, 2048, 90, 90) at 713x713. The pyramid pooling module pools
 * them to 1x1, 2x2, 3x3 and 6x6 bins, reduces each to 512 channels (conv1x1, BN, relu),
 * up-samples back and concatenates [features, 4 branches] (4096 channels); the head is
 * conv3x3 to 512, BN, relu, dropout 0.1, conv1x1 to the classes, up-sampled to the input
 * size. The auxiliary head on layer3 is left out.
 */
#include "models/zoo.h"

#include <stdio.h>

#define PPM_CH 512

static const int32_t bins[] = {1, 2, 3, 6};

/* Bilinear resize of x to h x w (align_corners, as the reference code does). */
static int32_t upsample(remat_graph *g, int32_t x, const char *p, const char *leaf,
                        int64_t h, int64_t w)
{
    remat_attrs at = {.out_h = h, .out_w = w, .align_corners = true};

    return zoo_op1(g, REMAT_OP_UPSAMPLE_BILINEAR, x, &at, p, leaf);
}

/* The pyramid pooling module on f (N, C, h, w): returns (N, C + 4 * 512, h, w). The bins
 * must divide the map (the adaptive pools are then plain avg_pools). */
static remat_status ppm(remat_graph *g, int32_t *f)
{
    int32_t br[1 + REMAT_ARRAY_LEN(bins)];
    remat_attrs at = {0};
    char p[ZOO_NAME_MAX];
    int64_t s[4];

    if (!zoo_shape(g, *f, s))
        return remat_graph_status(g);
    br[0] = *f;
    for (size_t i = 0; i < REMAT_ARRAY_LEN(bins); i++) {
        int32_t y;

        if (s[2] % bins[i] || s[3] % bins[i])
            return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "pspnet: the %lldx%lld feature map "
                              "does not split into %dx%d bins (the features are 1/8 of the "
                              "input after rounding; 713 and 473 work)", (long long)s[2],
                              (long long)s[3], bins[i], bins[i]);
        snprintf(p, sizeof p, "ppm.features.%zu", i);
        at.kh = (int32_t)(s[2] / bins[i]);
        at.kw = (int32_t)(s[3] / bins[i]);
        y = zoo_op1(g, REMAT_OP_AVG_POOL, *f, &at, p, "0");
        y = zoo_conv(g, y, p, "1", PPM_CH, 1, 1, 0, false);
        y = zoo_bn(g, y, p, "2", 0);
        y = zoo_relu(g, y, p, "3");
        br[i + 1] = upsample(g, y, p, "up", s[2], s[3]);
    }
    *f = zoo_opn(g, REMAT_OP_CONCAT, br, (int)REMAT_ARRAY_LEN(br), "ppm", "cat");
    return REMAT_OK;
}

remat_status zoo_build_pspnet(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    static const struct zoo_resnet_arch backbone = {true, {3, 4, 23, 3}, {1, 1, 2, 4}};
    int32_t x = zoo_image(g, c, 3);
    remat_status s;

    (void)arg;
    x = zoo_resnet_trunk(g, x, &backbone);
    s = ppm(g, &x);
    if (s)
        return s;
    x = zoo_conv(g, x, "cls", "0", PPM_CH, 3, 1, 1, false);
    x = zoo_bn(g, x, "cls", "1", 0);
    x = zoo_relu(g, x, "cls", "2");
    x = zoo_dropout(g, x, "cls", "3", 0.1f);
    x = zoo_conv(g, x, "cls", "4", c->classes, 1, 1, 0, true);
    x = upsample(g, x, NULL, "upsample", c->height, c->width);
    return zoo_seg_loss(g, x);
}
