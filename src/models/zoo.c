/*
 * zoo.c - the model zoo: a table of named models (with each one's default input size
 * and classes, and its builder), the names that describe a ResNet by depth or by block
 * counts (resnetD, resnet-a-b-c-d), and the layer helpers the builders share.
 *
 * The table is small and fixed (17 rows), so look-ups are linear.
 */
#include "models/zoo.h"

#include <string.h>

/* The most bottleneck blocks a parsed ResNet may have: resnet2498 has 832; 20,000 is
 * about 200,000 ops, the most that builds in reasonable time and memory. */
#define ZOO_MAX_BLOCKS 20000

struct zoo_entry {
    const char *name;
    const char *desc;
    zoo_build_fn build;
    const void *arg;
    int64_t height, width, classes; /* defaults */
};

static const struct zoo_resnet_arch arch_resnet18 = {false, {2, 2, 2, 2}, {0}};
static const struct zoo_resnet_arch arch_resnet34 = {false, {3, 4, 6, 3}, {0}};
static const struct zoo_resnet_arch arch_resnet50 = {true, {3, 4, 6, 3}, {0}};
static const struct zoo_resnet_arch arch_resnet101 = {true, {3, 4, 23, 3}, {0}};
static const struct zoo_resnet_arch arch_resnet152 = {true, {3, 8, 36, 3}, {0}};
static const struct zoo_resnet_arch arch_resnet1001 = {true, {3, 8, 319, 3}, {0}};
static const struct zoo_resnet_arch arch_resnet2498 = {true, {6, 32, 788, 6}, {0}};
static const int32_t vgg_depth16 = 16, vgg_depth19 = 19;
static const struct zoo_densenet_arch arch_densenet121 = {32, 64, {6, 12, 24, 16}};
static const struct zoo_densenet_arch arch_densenet161 = {48, 96, {6, 12, 36, 24}};

static const struct zoo_transformer_arch arch_gpt2 = {false, 12, 12, 768, 50257, 1024};
static const struct zoo_transformer_arch arch_bert = {true, 12, 12, 768, 30522, 512};

#define RESNET(n, d, a) {n, d, zoo_build_resnet, a, 224, 224, 1000}
static const struct zoo_entry entries[] = {
    RESNET("resnet18", "ResNet-18 (He et al. 2016), torchvision layout", &arch_resnet18),
    RESNET("resnet34", "ResNet-34 (He et al. 2016), torchvision layout", &arch_resnet34),
    RESNET("resnet50", "ResNet-50 (He et al. 2016), torchvision layout (v1.5)",
           &arch_resnet50),
    RESNET("resnet101", "ResNet-101 (He et al. 2016), torchvision layout (v1.5)",
           &arch_resnet101),
    RESNET("resnet152", "ResNet-152 (He et al. 2016), torchvision layout (v1.5)",
           &arch_resnet152),
    RESNET("resnet1001", "ResNet-1001: ImageNet bottleneck ResNet, blocks (3, 8, 319, 3)",
           &arch_resnet1001),
    RESNET("resnet2498", "ResNet-2498 (SuperNeurons): bottleneck blocks (6, 32, 788, 6)",
           &arch_resnet2498),
    {"vgg16", "VGG-16 (Simonyan and Zisserman 2015), torchvision layout", zoo_build_vgg,
     &vgg_depth16, 224, 224, 1000},
    {"vgg19", "VGG-19 (Simonyan and Zisserman 2015), torchvision layout", zoo_build_vgg,
     &vgg_depth19, 224, 224, 1000},
    {"densenet121", "DenseNet-121 (Huang et al. 2017), torchvision layout",
     zoo_build_densenet, &arch_densenet121, 224, 224, 1000},
    {"densenet161", "DenseNet-161 (Huang et al. 2017), torchvision layout",
     zoo_build_densenet, &arch_densenet161, 224, 224, 1000},
    {"googlenet", "GoogLeNet (Szegedy et al. 2015), torchvision layout with BN and aux heads",
     zoo_build_googlenet, NULL, 224, 224, 1000},
    {"unet", "U-Net (Ronneberger et al. 2015): 572x572 grey input, valid convs, 2 classes",
     zoo_build_unet, NULL, 572, 572, 2},
    {"pspnet", "PSPNet (Zhao et al. 2017): dilated ResNet-101, pyramid pooling, 713x713, "
     "VOC 21 classes", zoo_build_pspnet, NULL, 713, 713, 21},
    {"mlp", "MLP 784-512-512-10 on flattened 28x28 images (MNIST)", zoo_build_mlp, NULL,
     28, 28, 10},
    {"gpt2", "GPT-2 (Radford et al. 2019), small: 12 layers, 768 wide, 12 heads, 1024 "
     "tokens, vocabulary 50257, tied output layer", zoo_build_transformer, &arch_gpt2, 0, 0,
     0},
    {"bert-base", "BERT-base (Devlin et al. 2019) masked LM: 12 layers, 768 wide, 12 heads, "
     "512 tokens, vocabulary 30522, tied decoder", zoo_build_transformer, &arch_bert, 0, 0,
     0},
};

size_t remat_zoo_count(void)
{
    return REMAT_ARRAY_LEN(entries);
}

const char *remat_zoo_name(size_t i)
{
    return i < REMAT_ARRAY_LEN(entries) ? entries[i].name : NULL;
}

const char *remat_zoo_describe(size_t i)
{
    return i < REMAT_ARRAY_LEN(entries) ? entries[i].desc : NULL;
}

/* ----------------------------------------------------------- ResNet names */

/* The decimal s[0..len): digits only, no leading zero, at most max; -1 otherwise. */
static int64_t parse_count(const char *s, size_t len, int64_t max)
{
    int64_t v = 0;

    if (len == 0 || (s[0] == '0' && len > 1))
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
        if (v > max)
            return -1;
    }
    return v;
}

/* resnetD: (D - 2) / 3 bottleneck blocks; false when D names no such ResNet. */
static bool resnet_by_depth(const char *digits, struct zoo_resnet_arch *arch)
{
    int64_t d = parse_count(digits, strlen(digits), 3 * (int64_t)ZOO_MAX_BLOCKS + 2), n;

    if (d < 0 || (d - 2) % 3 != 0)
        return false;
    switch (d) {
    case 50:
        *arch = arch_resnet50;
        return true;
    case 101:
        *arch = arch_resnet101;
        return true;
    case 152:
        *arch = arch_resnet152;
        return true;
    case 2498:
        *arch = arch_resnet2498;
        return true;
    }
    n = (d - 2) / 3;
    if (n < 15) /* stage 3 needs at least one block */
        return false;
    *arch = (struct zoo_resnet_arch){true, {3, 8, (int32_t)(n - 14), 3}, {0}};
    return true;
}

/* resnet-a-b-c-d: bottleneck block counts per stage, each at least 1. */
static bool resnet_by_blocks(const char *s, struct zoo_resnet_arch *arch)
{
    int64_t total = 0;

    *arch = (struct zoo_resnet_arch){.bottleneck = true};
    for (int i = 0; i < 4; i++) {
        const char *end = strchr(s, '-');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        int64_t b = parse_count(s, len, ZOO_MAX_BLOCKS);

        if (b < 1 || (i < 3) != (end != NULL))
            return false;
        total += b;
        arch->blocks[i] = (int32_t)b;
        s = end ? end + 1 : s + len;
    }
    return total <= ZOO_MAX_BLOCKS;
}

/* Reports an unknown name with the list of valid ones. */
static remat_status unknown_model(const char *name)
{
    char list[512];
    size_t k = 0;

    list[0] = '\0';
    for (size_t i = 0; i < REMAT_ARRAY_LEN(entries) && k < sizeof list; i++) {
        int n = snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", entries[i].name);

        if (n < 0)
            break;
        k += (size_t)n;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED,
                      "unknown model '%s'; valid names: %s, resnetD for a depth D with "
                      "(D - 2) %% 3 == 0 and D >= 47 (or 50), resnet-a-b-c-d with bottleneck "
                      "block counts a, b, c, d >= 1 (at most %d blocks)",
                      name, list, ZOO_MAX_BLOCKS);
}

/* ----------------------------------------------------------------- options */

/* A transformer's options against its defaults (arch), or their absence elsewhere. */
static remat_status resolve_transformer(const struct zoo_entry *e, const remat_zoo_opts *o,
                                        struct zoo_cfg *c)
{
    const struct zoo_transformer_arch *t = e->build == zoo_build_transformer ? e->arg : NULL;
    int64_t v[5] = {o->layers, o->heads, o->hidden, o->seq_len, o->vocab};
    static const char *const names[5] = {"layers", "heads", "hidden", "seq_len", "vocab"};

    for (int i = 0; i < 5; i++)
        if (v[i] < 0 || v[i] > (1 << 24) || (v[i] && !t))
            return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': %s %lld %s", e->name, names[i],
                              (long long)v[i], t ? "is out of range (0: the default)"
                              : "applies to transformers only (gpt2, bert-base)");
    if (t && (o->height || o->width || o->classes || o->base_channels || o->aux))
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': the image options (input size, "
                          "classes, base channels, aux) do not apply to a transformer",
                          e->name);
    if (!t)
        return o->dropout != 0 ? REMAT_FAIL(REMAT_ERR_ARG, "model '%s': dropout applies to "
                                            "transformers only", e->name) : REMAT_OK;
    c->layers = o->layers ? o->layers : t->layers;
    c->heads = o->heads ? o->heads : t->heads;
    c->hidden = o->hidden ? o->hidden : t->hidden;
    c->seq_len = o->seq_len ? o->seq_len : t->positions;
    c->vocab = o->vocab ? o->vocab : t->vocab;
    c->dropout = o->dropout == 0 ? 0.1f : o->dropout < 0 ? 0.0f : o->dropout;
    if (!(c->dropout < 1))
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': dropout %g must be below 1", e->name,
                          (double)o->dropout);
    if (c->hidden % c->heads)
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': the width %lld is not a multiple of "
                          "the %lld heads", e->name, (long long)c->hidden,
                          (long long)c->heads);
    if (c->seq_len > t->positions)
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': sequences of %lld tokens; its position "
                          "table has %lld", e->name, (long long)c->seq_len,
                          (long long)t->positions);
    return REMAT_OK;
}

/* Fills *c from the caller's options (NULL: all defaults) and the model's defaults. */
static remat_status resolve_opts(const struct zoo_entry *e, const remat_zoo_opts *o,
                                 struct zoo_cfg *c)
{
    static const remat_zoo_opts none;

    if (!o)
        o = &none;
    if (o->batch < 0 || o->height < 0 || o->width < 0 || o->classes < 0)
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': batch (%lld), height (%lld), width "
                          "(%lld) and classes (%lld) must not be negative (0: default)",
                          e->name, (long long)o->batch, (long long)o->height,
                          (long long)o->width, (long long)o->classes);
    if (o->base_channels < 0 || o->base_channels > (1 << 20))
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': base_channels %lld is out of range "
                          "(0: default)", e->name, (long long)o->base_channels);
    if (o->aux < -1 || o->aux > 1)
        return REMAT_FAIL(REMAT_ERR_ARG, "model '%s': aux is %d; use 1 (on), -1 (off) or 0 "
                          "(default: on)", e->name, o->aux);
    c->batch = o->batch ? o->batch : 1;
    c->height = o->height ? o->height : e->height;
    c->width = o->width ? o->width : e->width;
    c->classes = o->classes ? o->classes : e->classes;
    c->aux = o->aux != -1;
    c->base_channels = o->base_channels ? o->base_channels : 64;
    return resolve_transformer(e, o, c);
}

remat_status remat_zoo_build(const char *name, const remat_zoo_opts *o,
                             const remat_allocator *a, remat_graph **out)
{
    const struct zoo_entry *e = NULL;
    struct zoo_entry parsed;
    struct zoo_resnet_arch arch;
    struct zoo_cfg c;
    remat_graph *g;
    remat_status s;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_zoo_build: out is NULL");
    *out = NULL;
    if (!name)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_zoo_build: no model name");
    for (size_t i = 0; i < REMAT_ARRAY_LEN(entries) && !e; i++)
        if (strcmp(name, entries[i].name) == 0)
            e = &entries[i];
    if (!e) {
        bool ok = false;

        if (strncmp(name, "resnet-", 7) == 0)
            ok = resnet_by_blocks(name + 7, &arch);
        else if (strncmp(name, "resnet", 6) == 0)
            ok = resnet_by_depth(name + 6, &arch);
        if (!ok)
            return unknown_model(name);
        parsed = (struct zoo_entry)RESNET(name, "", &arch);
        e = &parsed;
    }
    s = resolve_opts(e, o, &c);
    if (s)
        return s;
    s = remat_graph_new(a, &g);
    if (s)
        return s;
    s = e->build(g, &c, e->arg);
    if (s == REMAT_OK)
        s = remat_graph_status(g);
    if (s) {
        remat_graph_free(g);
        return s;
    }
    *out = g;
    return REMAT_OK;
}

/* ------------------------------------------------------------------ helpers */

/* "prefix.leaf", or "leaf" without a prefix, into buf[ZOO_NAME_MAX]. */
static const char *join(char *buf, const char *prefix, const char *leaf)
{
    if (prefix && *prefix)
        snprintf(buf, ZOO_NAME_MAX, "%s.%s", prefix, leaf);
    else
        snprintf(buf, ZOO_NAME_MAX, "%s", leaf);
    return buf;
}

int32_t zoo_image(remat_graph *g, const struct zoo_cfg *c, int64_t channels)
{
    int64_t shape[4] = {c->batch, channels, c->height, c->width};

    return remat_graph_input(g, "input", 4, shape);
}

int32_t zoo_op1(remat_graph *g, remat_op op, int32_t x, const remat_attrs *at,
                const char *prefix, const char *leaf)
{
    char buf[ZOO_NAME_MAX];

    return remat_graph_add(g, op, &x, 1, at, join(buf, prefix, leaf));
}

int32_t zoo_opn(remat_graph *g, remat_op op, const int32_t *xs, int n, const char *prefix,
                const char *leaf)
{
    char buf[ZOO_NAME_MAX];

    return remat_graph_add(g, op, xs, n, NULL, join(buf, prefix, leaf));
}

int32_t zoo_conv(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                 int64_t cout, int32_t k, int32_t stride, int32_t pad, bool bias)
{
    remat_attrs at = {.out_channels = cout, .kh = k, .kw = k, .sh = stride, .sw = stride,
                      .ph = pad, .pw = pad, .bias = bias};

    return zoo_op1(g, REMAT_OP_CONV2D, x, &at, prefix, leaf);
}

int32_t zoo_bn(remat_graph *g, int32_t x, const char *prefix, const char *leaf, float eps)
{
    remat_attrs at = {.eps = eps};

    return zoo_op1(g, REMAT_OP_BATCH_NORM, x, &at, prefix, leaf);
}

int32_t zoo_relu(remat_graph *g, int32_t x, const char *prefix, const char *leaf)
{
    return zoo_op1(g, REMAT_OP_RELU, x, NULL, prefix, leaf);
}

int32_t zoo_pool(remat_graph *g, remat_op op, int32_t x, const char *prefix,
                 const char *leaf, int32_t k, int32_t stride, int32_t pad, bool ceil)
{
    remat_attrs at = {.kh = k, .kw = k, .sh = stride, .sw = stride, .ph = pad, .pw = pad,
                      .ceil_mode = ceil, .count_include_pad = op == REMAT_OP_AVG_POOL};

    return zoo_op1(g, op, x, &at, prefix, leaf);
}

int32_t zoo_linear(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                   int64_t out, bool bias)
{
    remat_attrs at = {.out_channels = out, .bias = bias};

    return zoo_op1(g, REMAT_OP_LINEAR, x, &at, prefix, leaf);
}

int32_t zoo_dropout(remat_graph *g, int32_t x, const char *prefix, const char *leaf,
                    float p)
{
    remat_attrs at = {.p = p};

    return zoo_op1(g, REMAT_OP_DROPOUT, x, &at, prefix, leaf);
}

int32_t zoo_conv_bn_relu(remat_graph *g, int32_t x, const char *prefix, int64_t cout,
                         int32_t k, int32_t stride, int32_t pad, float eps)
{
    x = zoo_conv(g, x, prefix, "conv", cout, k, stride, pad, false);
    x = zoo_bn(g, x, prefix, "bn", eps);
    return zoo_relu(g, x, prefix, "relu");
}

int32_t zoo_pool_flatten(remat_graph *g, int32_t x, const char *prefix)
{
    x = zoo_op1(g, REMAT_OP_GLOBAL_AVG_POOL, x, NULL, prefix, "avgpool");
    return zoo_op1(g, REMAT_OP_FLATTEN, x, NULL, prefix, "flatten");
}

bool zoo_shape(const remat_graph *g, int32_t x, int64_t shape[4])
{
    return remat_graph_status(g) == REMAT_OK && remat_graph_value_shape(g, x, shape) >= 0;
}

int32_t zoo_ce_loss(remat_graph *g, int32_t logits, int32_t labels, const char *name)
{
    int64_t shape[4];
    int32_t ins[2];

    if (!zoo_shape(g, logits, shape))
        return -1;
    if (labels < 0)
        labels = remat_graph_labels(g, "labels", shape[0]);
    ins[0] = logits;
    ins[1] = labels;
    return remat_graph_add(g, REMAT_OP_SOFTMAX_CE, ins, 2, NULL, name);
}

remat_status zoo_class_loss(remat_graph *g, int32_t logits)
{
    return remat_graph_set_loss(g, zoo_ce_loss(g, logits, -1, "loss"));
}

/*
 * The per-pixel loss. softmax_ce takes (rows, K) logits, so the (N, K, H, W) logits are
 * reshaped to (N*H*W, K) as a view. In NCHW memory that view's rows are not the pixels'
 * class vectors (that would need a permute to NHWC first), so this is a stand-in for
 * the memory model only: the byte sizes and op costs are those of a per-pixel loss over
 * N*H*W labels, which is what planning needs.
 */
remat_status zoo_seg_loss(remat_graph *g, int32_t logits)
{
    remat_attrs at = {.ndim = 2};
    int64_t shape[4];
    int32_t flat;

    if (!zoo_shape(g, logits, shape))
        return remat_graph_status(g);
    at.shape[0] = -1;
    at.shape[1] = shape[1];
    flat = zoo_op1(g, REMAT_OP_RESHAPE, logits, &at, NULL, "logits_per_pixel");
    return remat_graph_set_loss(g, zoo_ce_loss(g, flat, -1, "loss"));
}
