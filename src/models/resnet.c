/*
 * resnet.c - ResNets as torchvision builds them (v1.5: a bottleneck's stride sits on its
 * 3x3 conv): conv1 7x7/2, bn1, relu, maxpool 3/2, four stages of basic or bottleneck
 * blocks with 64, 128, 256, 512 planes, global average pool, fc. Convs have no bias and
 * each is followed by batch norm; a block whose shape changes gets a downsample
 * conv1x1(stride) + batch norm on its shortcut.
 *
 * The trunk also serves dilated backbones (PSPNet): a stage with dilation d > 1 keeps
 * its resolution (stride 1, downsample stride 1) and its 3x3 convs get dilation and
 * padding d.
 */
#include "models/zoo.h"

#include <stdio.h>

/* 3x3 conv, no bias, with stride and dilation (padding = dilation keeps the size). */
static int32_t conv3x3(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                       int64_t cout, int32_t stride, int32_t dil)
{
    remat_attrs at = {.out_channels = cout, .kh = 3, .kw = 3, .sh = stride, .sw = stride,
                      .ph = dil, .pw = dil, .dh = dil, .dw = dil};

    return zoo_op1(g, REMAT_OP_CONV2D, x, &at, prefix, leaf);
}

/* The shortcut: x itself, or downsample.0 (conv1x1, stride) + downsample.1 (bn) when
 * the block changes the shape. Added after the residual branch, as torchvision's
 * forward runs it. */
static int32_t shortcut(remat_graph *g, int32_t x, const char *p, int64_t cin,
                        int64_t cout, int32_t stride)
{
    if (stride == 1 && cin == cout)
        return x;
    x = zoo_conv(g, x, p, "downsample.0", cout, 1, stride, 0, false);
    return zoo_bn(g, x, p, "downsample.1", 0);
}

/* Adds the residual and the shortcut ("add") and applies the final relu (leaf). */
static int32_t merge(remat_graph *g, int32_t y, int32_t sc, const char *p, const char *leaf)
{
    int32_t ins[2] = {y, sc};

    y = zoo_opn(g, REMAT_OP_ADD, ins, 2, p, "add");
    return zoo_relu(g, y, p, leaf);
}

/* BasicBlock: x (N, cin, H, W) -> (N, planes, H/stride, W/stride). */
static int32_t basic_block(remat_graph *g, int32_t x, const char *p, int64_t cin,
                           int64_t planes, int32_t stride, int32_t dil)
{
    int32_t y;

    y = conv3x3(g, x, p, "conv1", planes, stride, dil);
    y = zoo_bn(g, y, p, "bn1", 0);
    y = zoo_relu(g, y, p, "relu1");
    y = conv3x3(g, y, p, "conv2", planes, 1, dil);
    y = zoo_bn(g, y, p, "bn2", 0);
    return merge(g, y, shortcut(g, x, p, cin, planes, stride), p, "relu2");
}

/* Bottleneck: x (N, cin, H, W) -> (N, 4 planes, H/stride, W/stride). */
static int32_t bottleneck(remat_graph *g, int32_t x, const char *p, int64_t cin,
                          int64_t planes, int32_t stride, int32_t dil)
{
    int32_t y;

    y = zoo_conv(g, x, p, "conv1", planes, 1, 1, 0, false);
    y = zoo_bn(g, y, p, "bn1", 0);
    y = zoo_relu(g, y, p, "relu1");
    y = conv3x3(g, y, p, "conv2", planes, stride, dil);
    y = zoo_bn(g, y, p, "bn2", 0);
    y = zoo_relu(g, y, p, "relu2");
    y = zoo_conv(g, y, p, "conv3", 4 * planes, 1, 1, 0, false);
    y = zoo_bn(g, y, p, "bn3", 0);
    return merge(g, y, shortcut(g, x, p, cin, 4 * planes, stride), p, "relu3");
}

int32_t zoo_resnet_trunk(remat_graph *g, int32_t x, const struct zoo_resnet_arch *arch)
{
    int64_t cin = 64, expansion = arch->bottleneck ? 4 : 1;
    char p[ZOO_NAME_MAX];

    x = zoo_conv(g, x, NULL, "conv1", 64, 7, 2, 3, false);
    x = zoo_bn(g, x, NULL, "bn1", 0);
    x = zoo_relu(g, x, NULL, "relu");
    x = zoo_pool(g, REMAT_OP_MAX_POOL, x, NULL, "maxpool", 3, 2, 1, false);
    for (int s = 0; s < 4; s++) {
        int64_t planes = (int64_t)64 << s;
        int32_t dil = arch->dilation[s] > 1 ? arch->dilation[s] : 1;
        int32_t stride = s == 0 || dil > 1 ? 1 : 2;

        REMAT_ASSERT(arch->blocks[s] >= 1);
        for (int32_t b = 0; b < arch->blocks[s]; b++) {
            snprintf(p, sizeof p, "layer%d.%d", s + 1, (int)b);
            if (arch->bottleneck)
                x = bottleneck(g, x, p, cin, planes, b ? 1 : stride, dil);
            else
                x = basic_block(g, x, p, cin, planes, b ? 1 : stride, dil);
            cin = planes * expansion;
        }
    }
    return x;
}

remat_status zoo_build_resnet(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    int32_t x = zoo_image(g, c, 3);

    x = zoo_resnet_trunk(g, x, arg);
    x = zoo_pool_flatten(g, x, NULL);
    x = zoo_linear(g, x, NULL, "fc", c->classes, true);
    return zoo_class_loss(g, x);
}
