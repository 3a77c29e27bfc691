/*
 * densenet.c - DenseNet-BC as torchvision builds it: features.conv0 7x7/2 (no bias),
 * norm0, relu0, pool0 (max 3/2 pad 1); four dense blocks joined by transitions
 * (norm, relu, conv1x1 to half the channels, avg-pool 2/2); norm5, relu, global average
 * pool, classifier. A dense layer reads the concatenation of every earlier feature map
 * of its block and adds `growth` channels: norm1, relu1, conv1 (1x1 to bn_size * growth),
 * norm2, relu2, conv2 (3x3 to growth). torchvision's drop rate is 0: no dropout.
 *
 * The concatenations are explicit ops ("...denselayerK.cat"), as in torchvision's
 * memory-hungry (non-checkpointed) forward.
 */
#include "models/zoo.h"

#include <stdio.h>

#define BN_SIZE 4
#define MAX_LAYERS 128 /* dense layers per block; torchvision's largest has 48 */

/* One dense layer on the block's features so far (n of them): returns its output
 * (N, growth, H, W). */
static int32_t dense_layer(remat_graph *g, const int32_t *feats, int n, const char *p,
                           int64_t growth)
{
    int32_t x = n == 1 ? feats[0] : zoo_opn(g, REMAT_OP_CONCAT, feats, n, p, "cat");

    x = zoo_bn(g, x, p, "norm1", 0);
    x = zoo_relu(g, x, p, "relu1");
    x = zoo_conv(g, x, p, "conv1", BN_SIZE * growth, 1, 1, 0, false);
    x = zoo_bn(g, x, p, "norm2", 0);
    x = zoo_relu(g, x, p, "relu2");
    return zoo_conv(g, x, p, "conv2", growth, 3, 1, 1, false);
}

/* Dense block b (1-based) of n_layers on x: returns the concatenation of x and every
 * layer's output. */
static int32_t dense_block(remat_graph *g, int32_t x, int b, int32_t n_layers,
                           int64_t growth)
{
    int32_t feats[MAX_LAYERS + 1];
    char p[ZOO_NAME_MAX];
    int n = 1;

    REMAT_ASSERT(n_layers >= 1 && n_layers <= MAX_LAYERS);
    feats[0] = x;
    for (int l = 1; l <= n_layers; l++) {
        snprintf(p, sizeof p, "features.denseblock%d.denselayer%d", b, l);
        feats[n] = dense_layer(g, feats, n, p, growth);
        n++;
    }
    snprintf(p, sizeof p, "features.denseblock%d", b);
    return zoo_opn(g, REMAT_OP_CONCAT, feats, n, p, "cat");
}

/* Transition b (1-based): x (N, C, H, W) -> (N, cout, H/2, W/2). */
static int32_t transition(remat_graph *g, int32_t x, int b, int64_t cout)
{
    char p[ZOO_NAME_MAX];

    snprintf(p, sizeof p, "features.transition%d", b);
    x = zoo_bn(g, x, p, "norm", 0);
    x = zoo_relu(g, x, p, "relu");
    x = zoo_conv(g, x, p, "conv", cout, 1, 1, 0, false);
    return zoo_pool(g, REMAT_OP_AVG_POOL, x, p, "pool", 2, 2, 0, false);
}

remat_status zoo_build_densenet(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    const struct zoo_densenet_arch *arch = arg;
    int64_t nf = arch->init;
    int32_t x = zoo_image(g, c, 3);

    x = zoo_conv(g, x, "features", "conv0", arch->init, 7, 2, 3, false);
    x = zoo_bn(g, x, "features", "norm0", 0);
    x = zoo_relu(g, x, "features", "relu0");
    x = zoo_pool(g, REMAT_OP_MAX_POOL, x, "features", "pool0", 3, 2, 1, false);
    for (int b = 0; b < 4; b++) {
        x = dense_block(g, x, b + 1, arch->blocks[b], arch->growth);
        nf += arch->blocks[b] * arch->growth;
        if (b < 3) {
            nf /= 2;
            x = transition(g, x, b + 1, nf);
        }
    }
    x = zoo_bn(g, x, "features", "norm5", 0);
    x = zoo_relu(g, x, NULL, "relu");
    x = zoo_pool_flatten(g, x, NULL);
    x = zoo_linear(g, x, NULL, "classifier", c->classes, true);
    return zoo_class_loss(g, x);
}
