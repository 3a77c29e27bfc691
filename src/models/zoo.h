/*
 * zoo.h - the model zoo's internals: the resolved build options, one builder per model
 * family, and the small layer helpers the builders share (zoo.c).
 *
 * A builder adds a whole network to an empty graph: the input, the labels, every layer
 * with torchvision's module path as its op name ("layer1.0.conv1"), the loss, and marks
 * the loss. Graph calls fail stickily, so a builder checks remat_graph_status() only
 * where it must read a shape; it returns REMAT_OK or a status with the message set.
 * Sizes: up to about 10^4 ops (resnet2498).
 */
#ifndef REMAT_MODELS_ZOO_H
#define REMAT_MODELS_ZOO_H

#include "core/core.h"

/* Longest op name a helper makes; longer names are cut (they stay unique in practice). */
#define ZOO_NAME_MAX 160

/* The options with the model's defaults filled in. */
struct zoo_cfg {
    int64_t batch;
    int64_t height, width;
    int64_t classes;
    bool aux; /* GoogLeNet auxiliary classifiers */
    int64_t base_channels; /* U-Net's first level */
    /* transformers: as remat_zoo_opts, defaults filled in; dropout 0 means none */
    int64_t layers, heads, hidden, seq_len, vocab;
    float dropout;
};

typedef remat_status (*zoo_build_fn)(remat_graph *g, const struct zoo_cfg *c,
                                     const void *arg);

/* A ResNet: basic or bottleneck blocks per stage, and the dilation of each stage's 3x3
 * convs (0 or 1: none; > 1 replaces the stage's stride, as in dilated backbones). */
struct zoo_resnet_arch {
    bool bottleneck;
    int32_t blocks[4];
    int32_t dilation[4];
};

/* A DenseNet: growth rate, channels of the stem, dense layers per block. */
struct zoo_densenet_arch {
    int64_t growth;
    int64_t init;
    int32_t blocks[4];
};

/* A transformer: its defaults (remat_zoo_opts) and its family. GPT-2: a causal decoder
 * with pre-norm blocks, learned positions and the output layer tied to the token
 * embedding; BERT: a bidirectional post-norm encoder with token types and a masked
 * language model head (tied decoder). */
struct zoo_transformer_arch {
    bool bert;
    int64_t layers, heads, hidden, vocab, positions;
};

/* ------------------------------------------------------------------ builders */

/* arg: const struct zoo_resnet_arch * */
remat_status zoo_build_resnet(remat_graph *g, const struct zoo_cfg *c, const void *arg);
/* arg: const int32_t *, the depth: 11, 13, 16 or 19 (torchvision configs A, B, D, E) */
remat_status zoo_build_vgg(remat_graph *g, const struct zoo_cfg *c, const void *arg);
/* arg: const struct zoo_densenet_arch * */
remat_status zoo_build_densenet(remat_graph *g, const struct zoo_cfg *c, const void *arg);
/* arg: unused (NULL) for the four below */
remat_status zoo_build_googlenet(remat_graph *g, const struct zoo_cfg *c, const void *arg);
remat_status zoo_build_unet(remat_graph *g, const struct zoo_cfg *c, const void *arg);
remat_status zoo_build_pspnet(remat_graph *g, const struct zoo_cfg *c, const void *arg);
remat_status zoo_build_mlp(remat_graph *g, const struct zoo_cfg *c, const void *arg);
/* arg: const struct zoo_transformer_arch *; c's transformer fields resolved against it
 * (zoo.c) */
remat_status zoo_build_transformer(remat_graph *g, const struct zoo_cfg *c, const void *arg);

/*
 * The ResNet trunk of torchvision (conv1, bn1, relu, maxpool, layer1..layer4) on the
 * image x: (N, 3, H, W). Returns layer4's output: (N, 512 or 2048, H', W'), or -1 after
 * a graph failure.
 */
int32_t zoo_resnet_trunk(remat_graph *g, int32_t x, const struct zoo_resnet_arch *arch);

/* ------------------------------------------------------------------- helpers */

/* The image input "input": (batch, channels, height, width). */
int32_t zoo_image(remat_graph *g, const struct zoo_cfg *c, int64_t channels);

/* A single-input op named "prefix.leaf" (just "leaf" when prefix is NULL or ""). */
int32_t zoo_op1(remat_graph *g, remat_op op, int32_t x, const remat_attrs *at,
                const char *prefix, const char *leaf);
/* An op over n inputs (add, concat, sum_losses), named as zoo_op1 does. */
int32_t zoo_opn(remat_graph *g, remat_op op, const int32_t *xs, int n, const char *prefix,
                const char *leaf);

/* conv2d: k x k kernel, stride, padding, dilation 1; bias when asked. */
int32_t zoo_conv(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                 int64_t cout, int32_t k, int32_t stride, int32_t pad, bool bias);
/* batch_norm with the given eps (0: 1e-5). */
int32_t zoo_bn(remat_graph *g, int32_t x, const char *prefix, const char *leaf, float eps);
int32_t zoo_relu(remat_graph *g, int32_t x, const char *prefix, const char *leaf);
/* max_pool or avg_pool: k x k window, stride, padding, ceil mode (avg_pool counts the
 * padding, PyTorch's default). */
int32_t zoo_pool(remat_graph *g, remat_op op, int32_t x, const char *prefix,
                 const char *leaf, int32_t k, int32_t stride, int32_t pad, bool ceil);
int32_t zoo_linear(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                   int64_t out, bool bias);
int32_t zoo_dropout(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                    float p);
/* conv (no bias) + batch_norm + relu named prefix.conv, prefix.bn, prefix.relu
 * (torchvision's BasicConv2d). */
int32_t zoo_conv_bn_relu(remat_graph *g, int32_t x, const char *prefix, int64_t cout,
                         int32_t k, int32_t stride, int32_t pad, float eps);

/* Global average pool "avgpool" and "flatten": (N, C, H, W) -> (N, C). */
int32_t zoo_pool_flatten(remat_graph *g, int32_t x, const char *prefix);

/* Shape of a value into shape[4]; false when the graph has failed (x is -1). */
bool zoo_shape(const remat_graph *g, int32_t x, int64_t shape[4]);

/*
 * Adds labels for the rows of the logits (N, K) and softmax_ce "loss"; returns the loss,
 * or -1. labels: an existing labels value, or -1 to create "labels" of N.
 */
int32_t zoo_ce_loss(remat_graph *g, int32_t logits, int32_t labels, const char *name);
/*
 * Per-pixel loss of a segmentation net on logits (N, K, H, W): a reshape to (N*H*W, K)
 * then softmax_ce against N*H*W labels, and marks it as the loss. See zoo.c for why the
 * reshape is only a memory-model stand-in.
 */
remat_status zoo_seg_loss(remat_graph *g, int32_t logits);
/* Adds the classification loss on logits (N, K) and marks it as the loss. */
remat_status zoo_class_loss(remat_graph *g, int32_t logits);

#endif
