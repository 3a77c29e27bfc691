/*
 * googlenet.c - GoogLeNet (Inception v1) as torchvision builds it: every conv is a
 * BasicConv2d (conv without bias, batch norm with eps 0.001, relu); max-pools use ceil
 * mode; an inception module concatenates four branches: 1x1; 1x1 -> 3x3; 1x1 -> 3x3
 * (torchvision's "5x5" branch has a 3x3 kernel); max-pool 3/1 -> 1x1. Two auxiliary
 * classifiers read inception4a and inception4d; the three losses are summed (the
 * paper's 0.3 weights do not change memory or cost).
 */
#include "models/zoo.h"

#include <stdio.h>

#define BN_EPS 0.001f

/* One inception module's channels, in torchvision's argument order. */
struct inception {
    const char *name;
    int64_t ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj;
};

/* A BasicConv2d named prefix.leaf.conv / .bn / .relu. */
static int32_t basic_conv(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                          int64_t cout, int32_t k, int32_t stride, int32_t pad)
{
    char p[ZOO_NAME_MAX];

    snprintf(p, sizeof p, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", leaf);
    return zoo_conv_bn_relu(g, x, p, cout, k, stride, pad, BN_EPS);
}

/* An inception module: x (N, C, H, W) -> (N, ch1x1 + ch3x3 + ch5x5 + pool_proj, H, W). */
static int32_t inception(remat_graph *g, int32_t x, const struct inception *m)
{
    const char *p = m->name;
    int32_t br[4], y;

    br[0] = basic_conv(g, x, p, "branch1", m->ch1x1, 1, 1, 0);
    y = basic_conv(g, x, p, "branch2.0", m->ch3x3red, 1, 1, 0);
    br[1] = basic_conv(g, y, p, "branch2.1", m->ch3x3, 3, 1, 1);
    y = basic_conv(g, x, p, "branch3.0", m->ch5x5red, 1, 1, 0);
    br[2] = basic_conv(g, y, p, "branch3.1", m->ch5x5, 3, 1, 1);
    y = zoo_pool(g, REMAT_OP_MAX_POOL, x, p, "branch4.0", 3, 1, 1, true);
    br[3] = basic_conv(g, y, p, "branch4.1", m->pool_proj, 1, 1, 0);
    return zoo_opn(g, REMAT_OP_CONCAT, br, 4, p, "cat");
}

/*
 * torchvision's AdaptiveAvgPool2d((4, 4)) as one avg_pool with the same output shape:
 * stride floor(in / 4) and a kernel that reaches the last row (14x14: kernel 5, stride 3,
 * the original paper's pool). Sets *x to the pooled value.
 */
static remat_status aux_pool(remat_graph *g, int32_t *x, const char *p)
{
    remat_attrs at = {0};
    int64_t s[4];

    if (!zoo_shape(g, *x, s))
        return remat_graph_status(g);
    if (s[2] < 4 || s[3] < 4)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "googlenet: '%s' reads a %lldx%lld map, "
                          "smaller than its 4x4 pool (use a larger input)", p,
                          (long long)s[2], (long long)s[3]);
    at.sh = (int32_t)(s[2] / 4);
    at.sw = (int32_t)(s[3] / 4);
    at.kh = (int32_t)(s[2] - 3 * at.sh);
    at.kw = (int32_t)(s[3] - 3 * at.sw);
    *x = zoo_op1(g, REMAT_OP_AVG_POOL, *x, &at, p, "avgpool");
    return REMAT_OK;
}

/* An auxiliary classifier on x (N, C, 14, 14): returns its logits (N, classes) in *x. */
static remat_status aux_head(remat_graph *g, int32_t *x, const char *p, int64_t classes)
{
    remat_status s = aux_pool(g, x, p);
    int32_t y = *x;

    if (s)
        return s;
    y = basic_conv(g, y, p, "conv", 128, 1, 1, 0);
    y = zoo_op1(g, REMAT_OP_FLATTEN, y, NULL, p, "flatten");
    y = zoo_linear(g, y, p, "fc1", 1024, true);
    y = zoo_relu(g, y, p, "relu");
    y = zoo_dropout(g, y, p, "dropout", 0.7f);
    *x = zoo_linear(g, y, p, "fc2", classes, true);
    return REMAT_OK;
}

static const struct inception mods[] = {
    {"inception3a", 64, 96, 128, 16, 32, 32},
    {"inception3b", 128, 128, 192, 32, 96, 64},
    {"inception4a", 192, 96, 208, 16, 48, 64},
    {"inception4b", 160, 112, 224, 24, 64, 64},
    {"inception4c", 128, 128, 256, 24, 64, 64},
    {"inception4d", 112, 144, 288, 32, 64, 64},
    {"inception4e", 256, 160, 320, 32, 128, 128},
    {"inception5a", 256, 160, 320, 32, 128, 128},
    {"inception5b", 384, 192, 384, 48, 128, 128},
};

remat_status zoo_build_googlenet(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    int32_t x = zoo_image(g, c, 3), aux[2] = {-1, -1}, losses[3], labels;
    remat_status s;

    (void)arg;
    x = basic_conv(g, x, NULL, "conv1", 64, 7, 2, 3);
    x = zoo_pool(g, REMAT_OP_MAX_POOL, x, NULL, "maxpool1", 3, 2, 0, true);
    x = basic_conv(g, x, NULL, "conv2", 64, 1, 1, 0);
    x = basic_conv(g, x, NULL, "conv3", 192, 3, 1, 1);
    x = zoo_pool(g, REMAT_OP_MAX_POOL, x, NULL, "maxpool2", 3, 2, 0, true);
    x = inception(g, x, &mods[0]);
    x = inception(g, x, &mods[1]);
    x = zoo_pool(g, REMAT_OP_MAX_POOL, x, NULL, "maxpool3", 3, 2, 0, true);
    x = inception(g, x, &mods[2]);
    if (c->aux) {
        aux[0] = x;
        if ((s = aux_head(g, &aux[0], "aux1", c->classes)))
            return s;
    }
    x = inception(g, x, &mods[3]);
    x = inception(g, x, &mods[4]);
    x = inception(g, x, &mods[5]);
    if (c->aux) {
        aux[1] = x;
        if ((s = aux_head(g, &aux[1], "aux2", c->classes)))
            return s;
    }
    x = inception(g, x, &mods[6]);
    x = zoo_pool(g, REMAT_OP_MAX_POOL, x, NULL, "maxpool4", 2, 2, 0, true);
    x = inception(g, x, &mods[7]);
    x = inception(g, x, &mods[8]);
    x = zoo_pool_flatten(g, x, NULL);
    x = zoo_dropout(g, x, NULL, "dropout", 0.2f);
    x = zoo_linear(g, x, NULL, "fc", c->classes, true);
    if (!c->aux)
        return zoo_class_loss(g, x);
    labels = remat_graph_labels(g, "labels", c->batch);
    losses[0] = zoo_ce_loss(g, x, labels, "loss");
    losses[1] = zoo_ce_loss(g, aux[0], labels, "aux1.loss");
    losses[2] = zoo_ce_loss(g, aux[1], labels, "aux2.loss");
    x = zoo_opn(g, REMAT_OP_SUM_LOSSES, losses, 3, NULL, "total_loss");
    return remat_graph_set_loss(g, x);
}
