/*
 * vgg.c - VGG as torchvision builds it (no batch norm): features = 3x3 convs with bias,
 * each followed by relu, and 2x2 max-pools; avgpool (adaptive, to 7x7); classifier =
 * linear 25088 -> 4096, relu, dropout, 4096 -> 4096, relu, dropout, 4096 -> classes.
 * Op names follow torchvision's indices ("features.0", "classifier.6").
 */
#include "models/zoo.h"

#include <stdio.h>

#define M 0   /* a max-pool in a layer list */
#define END -1

/* torchvision's configurations A, B, D, E: conv output channels, M for a max-pool. */
static const int16_t cfg_a[] = {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, END};
static const int16_t cfg_b[] = {64, 64, M, 128, 128, M, 256, 256, M, 512, 512, M,
                                512, 512, M, END};
static const int16_t cfg_d[] = {64, 64, M, 128, 128, M, 256, 256, 256, M,
                                512, 512, 512, M, 512, 512, 512, M, END};
static const int16_t cfg_e[] = {64, 64, M, 128, 128, M, 256, 256, 256, 256, M,
                                512, 512, 512, 512, M, 512, 512, 512, 512, M, END};

/* The layer list of VGG-depth, or NULL. */
static const int16_t *vgg_cfg(int32_t depth)
{
    switch (depth) {
    case 11:
        return cfg_a;
    case 13:
        return cfg_b;
    case 16:
        return cfg_d;
    case 19:
        return cfg_e;
    }
    return NULL;
}

/* The features: x (N, 3, H, W) -> (N, 512, H/32, W/32). */
static int32_t features(remat_graph *g, int32_t x, const int16_t *cfg)
{
    char leaf[32];
    int idx = 0;

    for (; *cfg != END; cfg++) {
        if (*cfg == M) {
            snprintf(leaf, sizeof leaf, "%d", idx++);
            x = zoo_pool(g, REMAT_OP_MAX_POOL, x, "features", leaf, 2, 2, 0, false);
            continue;
        }
        snprintf(leaf, sizeof leaf, "%d", idx++);
        x = zoo_conv(g, x, "features", leaf, *cfg, 3, 1, 1, true);
        snprintf(leaf, sizeof leaf, "%d", idx++);
        x = zoo_relu(g, x, "features", leaf);
    }
    return x;
}

/* torchvision's AdaptiveAvgPool2d((7, 7)): nothing on a 7x7 map, an even avg_pool on a
 * multiple of 7; other sizes are not supported. */
static remat_status avgpool7(remat_graph *g, int32_t *x)
{
    int64_t s[4];
    remat_attrs at = {0};

    if (!zoo_shape(g, *x, s))
        return remat_graph_status(g);
    if (s[2] == 7 && s[3] == 7)
        return REMAT_OK;
    if (s[2] % 7 || s[3] % 7)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "vgg: the %lldx%lld feature map does not "
                          "pool evenly to 7x7 (use an input size that is a multiple of 224)",
                          (long long)s[2], (long long)s[3]);
    at.kh = (int32_t)(s[2] / 7);
    at.kw = (int32_t)(s[3] / 7);
    *x = zoo_op1(g, REMAT_OP_AVG_POOL, *x, &at, NULL, "avgpool");
    return REMAT_OK;
}

remat_status zoo_build_vgg(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    const int16_t *cfg = vgg_cfg(*(const int32_t *)arg);
    int32_t x = zoo_image(g, c, 3);
    remat_status s;

    REMAT_ASSERT(cfg);
    x = features(g, x, cfg);
    s = avgpool7(g, &x);
    if (s)
        return s;
    x = zoo_op1(g, REMAT_OP_FLATTEN, x, NULL, NULL, "flatten");
    x = zoo_linear(g, x, "classifier", "0", 4096, true);
    x = zoo_relu(g, x, "classifier", "1");
    x = zoo_dropout(g, x, "classifier", "2", 0.5f);
    x = zoo_linear(g, x, "classifier", "3", 4096, true);
    x = zoo_relu(g, x, "classifier", "4");
    x = zoo_dropout(g, x, "classifier", "5", 0.5f);
    x = zoo_linear(g, x, "classifier", "6", c->classes, true);
    return zoo_class_loss(g, x);
}
