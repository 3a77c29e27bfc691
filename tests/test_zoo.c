/*
 * test_zoo.c - the model zoo against independent answers: torchvision's published
 * parameter counts, output shapes worked out by hand from the papers' layer tables,
 * layer counts of the deep ResNets, ResNet-18's forward FLOPs summed from a hand-written
 * layer table, the rejection of bad names and options, and every allocation failure of a
 * few builds (no leak, REMAT_ERR_NOMEM, *out NULL).
 *
 * Shapes are looked up by op name through the graph's internal op list (graph/graph.h).
 */
#include "harness.h"

#include "graph/graph.h"

/* ------------------------------------------------------------------ helpers */

/* Builds name with batch n (and defaults elsewhere); NULL on failure (a failed check). */
static remat_graph *build(const char *name, int64_t batch)
{
    remat_zoo_opts o = {.batch = batch};
    remat_graph *g = NULL;

    CHECK_OK(remat_zoo_build(name, &o, NULL, &g));
    CHECK(g != NULL || remat_errmsg()[0], "%s: no graph", name);
    return g;
}

/* The op named name, or NULL. */
static const struct gop *find_op(const remat_graph *g, const char *name)
{
    for (int32_t i = 0; i < remat_graph_n_ops(g); i++)
        if (strcmp(graph_op(g, i)->name, name) == 0)
            return graph_op(g, i);
    return NULL;
}

/* The value named name (an input, labels, a param or an op output), or -1. */
static int32_t find_value(const remat_graph *g, const char *name)
{
    for (int32_t i = 0; i < remat_graph_n_values(g); i++)
        if (strcmp(graph_value(g, i)->name, name) == 0)
            return i;
    return -1;
}

/* Checks that op `name` of g exists and outputs the shape (a, b, c, d) (ndim values). */
static void check_shape(const remat_graph *g, const char *name, int ndim, int64_t a,
                        int64_t b, int64_t c, int64_t d)
{
    const struct gop *op = find_op(g, name);
    int64_t want[4] = {a, b, c, d}, got[4];
    int n;

    CHECK(op != NULL, "no op named '%s'", name);
    if (!op)
        return;
    n = remat_graph_value_shape(g, op->out, got);
    CHECK(n == ndim, "'%s': ndim %d, expected %d", name, n, ndim);
    for (int i = 0; i < ndim && i < n; i++)
        CHECK(got[i] == want[i], "'%s': dim %d is %lld, expected %lld", name, i,
              (long long)got[i], (long long)want[i]);
}

/* Number of ops of a type (and, when sub is not NULL, whose name contains sub). */
static int count_ops(const remat_graph *g, remat_op type, const char *sub)
{
    int n = 0;

    for (int32_t i = 0; i < remat_graph_n_ops(g); i++) {
        const struct gop *op = graph_op(g, i);

        n += op->type == type && (!sub || strstr(op->name, sub));
    }
    return n;
}

/* Number of ops whose names start with prefix and end with suffix. */
static int count_named(const remat_graph *g, const char *prefix, const char *suffix)
{
    size_t lp = strlen(prefix), ls = strlen(suffix);
    int n = 0;

    for (int32_t i = 0; i < remat_graph_n_ops(g); i++) {
        const char *s = graph_op(g, i)->name;
        size_t l = strlen(s);

        n += l >= lp + ls && strncmp(s, prefix, lp) == 0 && strcmp(s + l - ls, suffix) == 0;
    }
    return n;
}

/* Checks that g's loss is a scalar made by the op named loss_op. */
static void check_loss(const remat_graph *g, const char *loss_op)
{
    const struct gop *op = find_op(g, loss_op);
    int64_t s[4];

    CHECK(op != NULL && g->loss == op->out, "the loss is not '%s'", loss_op);
    CHECK(remat_graph_value_shape(g, g->loss, s) == 1 && s[0] == 1, "the loss is not (1)");
}

/* ------------------------------------------------------------- the registry */

static void test_registry(void)
{
    static const char *const names[] = {
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnet1001",
        "resnet2498", "vgg16", "vgg19", "densenet121", "densenet161", "googlenet", "unet",
        "pspnet", "mlp", "gpt2", "bert-base",
    };
    size_t n = sizeof names / sizeof names[0];

    CHECK_I64(remat_zoo_count(), n);
    for (size_t i = 0; i < n && i < remat_zoo_count(); i++) {
        const char *d = remat_zoo_describe(i);

        CHECK(remat_zoo_name(i) && strcmp(remat_zoo_name(i), names[i]) == 0,
              "name %zu is '%s', expected '%s'", i, remat_zoo_name(i), names[i]);
        CHECK(d && strlen(d) > 10 && !strchr(d, '\n'), "model %zu: bad description", i);
    }
    CHECK(remat_zoo_name(n) == NULL, "a name past the end");
    CHECK(remat_zoo_describe(n) == NULL, "a description past the end");
}

/* Every listed model builds with its defaults, its op names are unique and its loss is
 * a scalar. */
static void test_all_build(void)
{
    for (size_t i = 0; i < remat_zoo_count(); i++) {
        const char *name = remat_zoo_name(i);
        remat_graph *g = NULL;
        remat_status s = remat_zoo_build(name, NULL, NULL, &g);
        int dup = 0;

        CHECK(s == REMAT_OK && g, "%s: %s: %s", name, remat_status_name(s), remat_errmsg());
        if (!g)
            continue;
        CHECK_OK(remat_graph_status(g));
        CHECK(g->loss >= 0, "%s: no loss", name);
        /* unique op names (quadratic, but the largest listed net has ~8,000 ops and is
           checked only on its first 2,000) */
        for (int32_t a = 0; a < remat_graph_n_ops(g) && a < 2000 && !dup; a++)
            for (int32_t b = a + 1; b < remat_graph_n_ops(g) && b < 2000 && !dup; b++)
                dup = strcmp(graph_op(g, a)->name, graph_op(g, b)->name) == 0;
        CHECK(!dup, "%s: two ops share a name", name);
        remat_graph_free(g);
    }
}

/* ----------------------------------------------------------- parameter counts */

/* U-Net's parameters worked out from the paper's layer list: 3x3 convs with bias per
 * level, the 2x2 up-convs, the final 1x1 conv (1 input channel, 2 classes). */
static int64_t unet_params(void)
{
    int64_t n = 0, cin = 1;

    for (int l = 0; l < 5; l++) { /* contracting path and bottom */
        int64_t c = (int64_t)64 << l;

        n += cin * c * 9 + c + c * c * 9 + c;
        cin = c;
    }
    for (int l = 3; l >= 0; l--) { /* expanding path */
        int64_t c = (int64_t)64 << l;

        n += 2 * c * c * 4 + c;              /* up-conv 2c -> c, 2x2 */
        n += 2 * c * c * 9 + c + c * c * 9 + c; /* after the concat: 2c -> c -> c */
    }
    return n + 64 * 2 + 2;
}

static void test_param_counts(void)
{
    static const struct {
        const char *name;
        int64_t params; /* torchvision's count (models' documentation), or by hand */
    } want[] = {
        {"resnet18", 11689512},   {"resnet34", 21797672},     {"resnet50", 25557032},
        {"resnet101", 44549160},  {"resnet152", 60192808},    {"vgg16", 138357544},
        {"vgg19", 143667240},     {"densenet121", 7978856},   {"densenet161", 28681000},
        {"googlenet", 13004888},  {"resnet-3-4-6-3", 25557032},
        {"resnet-3-4-23-3", 44549160}, {"resnet-3-8-36-3", 60192808},
        /* mlp: (784 + 1) 512 + (512 + 1) 512 + (512 + 1) 10 */
        {"mlp", 785 * 512 + 513 * 512 + 513 * 10},
    };
    /* PSPNet: resnet101 without its fc; 4 pyramid branches (conv 2048 -> 512, BN); the
       head conv3x3 4096 -> 512, BN, conv1x1 512 -> 21 with bias. */
    int64_t psp = 44549160 - (2048 * 1000 + 1000) + 4 * (2048 * 512 + 2 * 512) +
                  4096 * 512 * 9 + 2 * 512 + 512 * 21 + 21;
    remat_zoo_opts o = {.aux = 1};
    remat_graph *g;

    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!(g = build(want[i].name, 1)))
            continue;
        CHECK(remat_graph_n_params(g) == want[i].params, "%s: %lld parameters, expected %lld",
              want[i].name, (long long)remat_graph_n_params(g), (long long)want[i].params);
        remat_graph_free(g);
    }
    if ((g = build("unet", 1))) {
        CHECK_I64(remat_graph_n_params(g), unet_params());
        CHECK_I64(unet_params(), 31030658); /* the usual quoted figure */
        remat_graph_free(g);
    }
    if ((g = build("pspnet", 1))) {
        CHECK_I64(remat_graph_n_params(g), psp);
        remat_graph_free(g);
    }
    g = NULL;
    CHECK_OK(remat_zoo_build("googlenet", &o, NULL, &g));
    CHECK_I64(g ? remat_graph_n_params(g) : -1, 13004888);
    remat_graph_free(g);
    g = NULL;
    o.aux = -1;
    CHECK_OK(remat_zoo_build("googlenet", &o, NULL, &g));
    CHECK_I64(g ? remat_graph_n_params(g) : -1, 6624904);
    remat_graph_free(g);
    /* 10 classes: the fc loses 2048 * 990 weights and 990 biases */
    g = NULL;
    o = (remat_zoo_opts){.classes = 10};
    CHECK_OK(remat_zoo_build("resnet50", &o, NULL, &g));
    CHECK_I64(g ? remat_graph_n_params(g) : -1, 25557032 - 2049 * 990);
    remat_graph_free(g);
}

/* ------------------------------------------------------------------- shapes */

static void test_shapes_classifiers(void)
{
    remat_graph *g;

    if ((g = build("resnet50", 4))) {
        check_shape(g, "maxpool", 4, 4, 64, 56, 56);
        check_shape(g, "layer1.2.relu3", 4, 4, 256, 56, 56);
        check_shape(g, "layer2.0.conv2", 4, 4, 128, 28, 28); /* v1.5: stride on the 3x3 */
        check_shape(g, "layer2.0.conv1", 4, 4, 128, 56, 56);
        check_shape(g, "layer4.2.relu3", 4, 4, 2048, 7, 7);
        check_shape(g, "fc", 2, 4, 1000, 0, 0);
        check_loss(g, "loss");
        remat_graph_free(g);
    }
    if ((g = build("vgg16", 2))) {
        check_shape(g, "features.30", 4, 2, 512, 7, 7);
        CHECK(find_op(g, "avgpool") == NULL, "vgg16 at 224 has an avgpool");
        check_shape(g, "classifier.0", 2, 2, 4096, 0, 0);
        check_shape(g, "classifier.6", 2, 2, 1000, 0, 0);
        remat_graph_free(g);
    }
    if ((g = build("vgg19", 1))) {
        check_shape(g, "features.36", 4, 1, 512, 7, 7);
        CHECK_I64(count_ops(g, REMAT_OP_CONV2D, NULL), 16);
        remat_graph_free(g);
    }
    if ((g = build("densenet121", 2))) {
        check_shape(g, "features.pool0", 4, 2, 64, 56, 56);
        check_shape(g, "features.denseblock1.cat", 4, 2, 256, 56, 56); /* 64 + 6 * 32 */
        check_shape(g, "features.transition1.pool", 4, 2, 128, 28, 28);
        check_shape(g, "features.norm5", 4, 2, 1024, 7, 7);
        check_shape(g, "classifier", 2, 2, 1000, 0, 0);
        CHECK_I64(count_ops(g, REMAT_OP_CONV2D, NULL), 120); /* + classifier = 121 */
        remat_graph_free(g);
    }
    if ((g = build("densenet161", 1))) {
        check_shape(g, "features.denseblock3.denselayer36.conv2", 4, 1, 48, 14, 14);
        check_shape(g, "features.norm5", 4, 1, 2208, 7, 7);
        remat_graph_free(g);
    }
    if ((g = build("mlp", 3))) {
        int32_t in = find_value(g, "input");
        int64_t s[4];

        CHECK(remat_graph_value_shape(g, in, s) == 2 && s[0] == 3 && s[1] == 784,
              "mlp input is not (3, 784)");
        check_shape(g, "fc1", 2, 3, 512, 0, 0);
        check_shape(g, "fc3", 2, 3, 10, 0, 0);
        remat_graph_free(g);
    }
}

static void test_shapes_googlenet(void)
{
    remat_zoo_opts o = {.batch = 2, .aux = -1};
    remat_graph *g = build("googlenet", 2);
    const struct gop *op;

    if (g) {
        check_shape(g, "maxpool1", 4, 2, 64, 56, 56); /* ceil mode: 112 -> 56 */
        check_shape(g, "maxpool2", 4, 2, 192, 28, 28);
        check_shape(g, "inception3b.cat", 4, 2, 480, 28, 28);
        check_shape(g, "inception4a.cat", 4, 2, 512, 14, 14);
        check_shape(g, "aux1.avgpool", 4, 2, 512, 4, 4);
        check_shape(g, "aux1.conv.conv", 4, 2, 128, 4, 4);
        check_shape(g, "aux2.avgpool", 4, 2, 528, 4, 4);
        check_shape(g, "aux2.fc2", 2, 2, 1000, 0, 0);
        check_shape(g, "maxpool4", 4, 2, 832, 7, 7);
        check_shape(g, "inception5b.cat", 4, 2, 1024, 7, 7);
        check_shape(g, "fc", 2, 2, 1000, 0, 0);
        op = find_op(g, "total_loss");
        CHECK(op && op->type == REMAT_OP_SUM_LOSSES && op->n_in == 3, "no 3-way loss sum");
        check_loss(g, "total_loss");
        CHECK_I64(count_ops(g, REMAT_OP_SOFTMAX_CE, NULL), 3);
        remat_graph_free(g);
    }
    g = NULL;
    CHECK_OK(remat_zoo_build("googlenet", &o, NULL, &g));
    if (g) {
        CHECK(find_op(g, "aux1.fc2") == NULL && find_op(g, "aux2.conv.conv") == NULL,
              "aux heads present with aux = -1");
        CHECK_I64(count_ops(g, REMAT_OP_SOFTMAX_CE, NULL), 1);
        check_loss(g, "loss");
        remat_graph_free(g);
    }
}

static void test_shapes_segmentation(void)
{
    remat_graph *g;
    int64_t s[4];

    if ((g = build("unet", 2))) {
        check_shape(g, "down1.relu2", 4, 2, 64, 568, 568);
        check_shape(g, "down4.pool", 4, 2, 512, 32, 32);
        check_shape(g, "bottom.relu2", 4, 2, 1024, 28, 28);
        check_shape(g, "up4.upconv", 4, 2, 512, 56, 56);
        check_shape(g, "up4.crop", 4, 2, 512, 56, 56); /* 64x64 cropped */
        check_shape(g, "up4.cat", 4, 2, 1024, 56, 56);
        check_shape(g, "up1.crop", 4, 2, 64, 392, 392);
        check_shape(g, "final", 4, 2, 2, 388, 388);
        check_shape(g, "logits_per_pixel", 2, 2 * 388 * 388, 2, 0, 0);
        CHECK(remat_graph_value_shape(g, find_value(g, "labels"), s) == 1 &&
              s[0] == 2 * 388 * 388, "unet labels are not N * 388 * 388");
        check_loss(g, "loss");
        remat_graph_free(g);
    }
    if ((g = build("pspnet", 1))) {
        check_shape(g, "maxpool", 4, 1, 64, 179, 179);
        check_shape(g, "layer2.0.relu3", 4, 1, 512, 90, 90);
        check_shape(g, "layer3.22.relu3", 4, 1, 1024, 90, 90);
        check_shape(g, "layer4.2.relu3", 4, 1, 2048, 90, 90);
        check_shape(g, "ppm.features.3.0", 4, 1, 2048, 6, 6);
        check_shape(g, "ppm.features.0.up", 4, 1, 512, 90, 90);
        check_shape(g, "ppm.cat", 4, 1, 4096, 90, 90);
        check_shape(g, "cls.4", 4, 1, 21, 90, 90);
        check_shape(g, "upsample", 4, 1, 21, 713, 713);
        CHECK(remat_graph_value_shape(g, find_value(g, "labels"), s) == 1 &&
              s[0] == 713 * 713, "pspnet labels are not 713 * 713");
        /* dilated stages keep stride 1 and pad = dilation on their 3x3 convs */
        CHECK(find_op(g, "layer4.1.conv2") && find_op(g, "layer4.1.conv2")->at.dh == 4 &&
              find_op(g, "layer4.1.conv2")->at.ph == 4, "layer4 is not dilated by 4");
        remat_graph_free(g);
    }
}

/* ------------------------------------------------------------ deep ResNets */

/* Checks the blocks per stage (counted by their "add" ops) and the conv count. */
static void check_resnet(const char *name, int a, int b, int c, int d)
{
    int want[4] = {a, b, c, d}, blocks = a + b + c + d;
    remat_graph *g = build(name, 1);
    char prefix[32];

    if (!g)
        return;
    for (int s = 0; s < 4; s++) {
        snprintf(prefix, sizeof prefix, "layer%d.", s + 1);
        CHECK(count_named(g, prefix, ".add") == want[s], "%s: stage %d has %d blocks, "
              "expected %d", name, s + 1, count_named(g, prefix, ".add"), want[s]);
    }
    /* 3 per bottleneck, a downsample per stage, the stem conv */
    CHECK_I64(count_ops(g, REMAT_OP_CONV2D, NULL), 3 * blocks + 4 + 1);
    CHECK_I64(count_ops(g, REMAT_OP_CONV2D, "downsample"), 4);
    CHECK_I64(count_ops(g, REMAT_OP_LINEAR, NULL), 1);
    check_shape(g, "fc", 2, 1, 1000, 0, 0);
    remat_graph_free(g);
}

static void test_resnet_depths(void)
{
    remat_graph *g;

    /* 2498 weighted layers: 3 * 832 convs + conv1 + fc (downsamples not counted) */
    check_resnet("resnet2498", 6, 32, 788, 6);
    CHECK_I64((6 + 32 + 788 + 6) * 3 + 2, 2498);
    check_resnet("resnet1001", 3, 8, 319, 3);
    CHECK_I64(3 + 8 + 319 + 3, 333);
    check_resnet("resnet200", 3, 8, 52, 3); /* (200 - 2) / 3 = 66 blocks */
    check_resnet("resnet47", 3, 8, 1, 3);   /* the smallest resnetD: 15 blocks */
    check_resnet("resnet50", 3, 4, 6, 3);
    check_resnet("resnet101", 3, 4, 23, 3);
    check_resnet("resnet152", 3, 8, 36, 3);
    check_resnet("resnet-1-2-3-4", 1, 2, 3, 4);
    /* basic blocks: 2 convs each, downsamples on stages 2-4 only */
    if ((g = build("resnet18", 1))) {
        CHECK_I64(count_ops(g, REMAT_OP_CONV2D, NULL), 2 * 8 + 3 + 1);
        CHECK_I64(count_ops(g, REMAT_OP_CONV2D, "downsample"), 3);
        remat_graph_free(g);
    }
}

/* --------------------------------------------------------------------- FLOPs */

/* conv (no bias) + its batch norm: 2 numel(out) Cin k^2 + 7 numel(out). */
static double conv_bn(int64_t n, int64_t cin, int64_t cout, int64_t k, int64_t h)
{
    double out = (double)(n * cout * h * h);

    return 2 * out * (double)(cin * k * k) + 7 * out;
}

/* ResNet-18's forward FLOPs from its layer table (torchvision, 224x224), with the op
 * table's formulas; every term is an integer below 2^53, so the sum is exact. */
static double resnet18_flops(int64_t n)
{
    static const struct {
        int64_t cin, cout, h; /* h: output side */
    } blocks[] = {
        {64, 64, 56},   {64, 64, 56},   {64, 128, 28},  {128, 128, 28},
        {128, 256, 14}, {256, 256, 14}, {256, 512, 7},  {512, 512, 7},
    };
    double f = 0;

    f += conv_bn(n, 3, 64, 7, 112) + (double)(n * 64 * 112 * 112); /* conv1 bn1 relu */
    f += (double)(n * 64 * 56 * 56 * 9);                           /* maxpool 3x3 */
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        int64_t ci = blocks[i].cin, co = blocks[i].cout, h = blocks[i].h;
        double out = (double)(n * co * h * h);

        f += conv_bn(n, ci, co, 3, h) + out;  /* conv1 bn1 relu */
        f += conv_bn(n, co, co, 3, h);        /* conv2 bn2 */
        if (ci != co)
            f += conv_bn(n, ci, co, 1, h);    /* downsample */
        f += out + out;                       /* add, relu */
    }
    f += (double)(n * 512 * 7 * 7);                  /* global average pool */
    f += (double)(2 * n * 512 * 1000 + n * 1000);    /* fc */
    f += (double)(5 * n * 1000 + n);                 /* softmax_ce */
    return f;
}

static void test_flops(void)
{
    for (int64_t n = 1; n <= 3; n += 2) {
        remat_graph *g = build("resnet18", n);

        if (!g)
            continue;
        /* tolerance 0: both sides are exact integer sums */
        CHECK(remat_graph_forward_flops(g) == resnet18_flops(n),
              "resnet18 batch %lld: %.0f FLOPs, expected %.0f", (long long)n,
              remat_graph_forward_flops(g), resnet18_flops(n));
        remat_graph_free(g);
    }
}

/* ------------------------------------------------------------------ failures */

/* Checks that building name with o fails with want, a message and *out NULL. */
static void check_fails(const char *name, const remat_zoo_opts *o, remat_status want)
{
    remat_graph *g = (remat_graph *)&g; /* anything but NULL */
    remat_status s = remat_zoo_build(name, o, NULL, &g);

    CHECK(s == want, "'%s': %s, expected %s", name ? name : "(null)", remat_status_name(s),
          remat_status_name(want));
    CHECK(g == NULL, "'%s': *out not NULL after a failure", name ? name : "(null)");
    CHECK(remat_errmsg()[0] != '\0', "'%s': no message", name ? name : "(null)");
    if (s == REMAT_OK)
        remat_graph_free(g);
}

static void test_bad_names(void)
{
    static const char *const bad[] = {
        "resnet51", "nosuchnet", "resnet-0-1-1-1", "resnet", "resnet-1-1-1", "resnet-1-1-1-1-",
        "resnet-1-1-1-1-1", "resnet-1--1-1", "resnet-a-1-1-1", "resnet050", "resnet44",
        "resnet26", "resnet+50", "", "RESNET50", "vgg11", "resnet99999999999999999999",
        "resnet-20000-1-1-1",
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_fails(bad[i], NULL, REMAT_ERR_UNSUPPORTED);
    /* the message names the model and the valid ones */
    check_fails("resnet51", NULL, REMAT_ERR_UNSUPPORTED);
    CHECK(strstr(remat_errmsg(), "resnet51") && strstr(remat_errmsg(), "densenet161"),
          "message: %s", remat_errmsg());
    check_fails(NULL, NULL, REMAT_ERR_ARG);
    CHECK(remat_zoo_build("mlp", NULL, NULL, NULL) == REMAT_ERR_ARG, "out NULL accepted");
}

static void test_bad_opts(void)
{
    check_fails("resnet50", &(remat_zoo_opts){.batch = -1}, REMAT_ERR_ARG);
    check_fails("resnet50", &(remat_zoo_opts){.height = -224}, REMAT_ERR_ARG);
    check_fails("vgg16", &(remat_zoo_opts){.width = -1}, REMAT_ERR_ARG);
    check_fails("mlp", &(remat_zoo_opts){.classes = -10}, REMAT_ERR_ARG);
    check_fails("googlenet", &(remat_zoo_opts){.aux = 2}, REMAT_ERR_ARG);
    check_fails("googlenet", &(remat_zoo_opts){.aux = -2}, REMAT_ERR_ARG);
    /* sizes the architectures cannot take */
    check_fails("vgg16", &(remat_zoo_opts){.height = 100, .width = 100},
                REMAT_ERR_UNSUPPORTED);                  /* 3x3 features */
    check_fails("pspnet", &(remat_zoo_opts){.height = 500, .width = 500},
                REMAT_ERR_UNSUPPORTED);                  /* 63x63 features */
    check_fails("unet", &(remat_zoo_opts){.height = 100, .width = 100},
                REMAT_ERR_SHAPE);                        /* 2x2 under the bottom convs */
    check_fails("resnet50", &(remat_zoo_opts){.batch = (int64_t)1 << 40}, REMAT_ERR_ARG);
    check_fails("mlp", &(remat_zoo_opts){.height = INT64_MAX, .width = 2}, REMAT_ERR_ARG);
}

/*
 * The transformers. GPT-2 small's published count, 124,439,808 (the output layer tied to
 * wte). Both families by hand: per block 12 D^2 + 13 D (query, key, value, output
 * projection: 4 (D^2 + D); the MLP D -> 4D -> D: 8 D^2 + 5 D; two layer norms: 4 D);
 * GPT-2 adds V D + P D (token and position tables) and the final norm 2 D; BERT adds V D
 * + P D + 2 D (token types) + 2 D (embedding norm) and its MLM transform D^2 + D + 2 D.
 * bert-base: 109,483,776, which is Hugging Face's BertForMaskedLM (109,514,298) without
 * the decoder's bias (30,522). Shapes: the scores (B, H, S, S), the logits (B, S, V).
 */
static int64_t tf_count(bool bert, int64_t l, int64_t d, int64_t v, int64_t p)
{
    int64_t blocks = l * (12 * d * d + 13 * d);

    return bert ? v * d + p * d + 4 * d + blocks + d * d + 3 * d
                : v * d + p * d + blocks + 2 * d;
}

static void test_transformers(void)
{
    remat_zoo_opts small = {.batch = 3, .layers = 3, .heads = 4, .hidden = 32, .seq_len = 10,
                            .vocab = 50};
    remat_graph *g = NULL;

    CHECK_OK(remat_zoo_build("gpt2", NULL, NULL, &g));
    CHECK_I64(remat_graph_n_params(g), 124439808);
    CHECK_I64(remat_graph_n_params(g), tf_count(false, 12, 768, 50257, 1024));
    check_shape(g, "lm_head", 3, 1, 1024, 50257, 0);
    check_shape(g, "h.11.attn.scores", 4, 1, 12, 1024, 1024);
    remat_graph_free(g);
    CHECK_OK(remat_zoo_build("bert-base", NULL, NULL, &g));
    CHECK_I64(remat_graph_n_params(g), 109483776);
    CHECK_I64(remat_graph_n_params(g), tf_count(true, 12, 768, 30522, 512));
    check_shape(g, "cls.predictions.decoder", 3, 1, 512, 30522, 0);
    remat_graph_free(g);
    CHECK_OK(remat_zoo_build("gpt2", &small, NULL, &g));
    CHECK_I64(remat_graph_n_params(g), tf_count(false, 3, 32, 50, 1024));
    check_shape(g, "h.2.attn.softmax", 4, 3, 4, 10, 10);
    check_shape(g, "h.2.mlp.c_fc", 2, 30, 128, 0, 0);
    CHECK_I64(count_ops(g, REMAT_OP_DROPOUT, NULL), 1 + 3 * 3); /* embeddings, 3 per block */
    check_loss(g, "loss");
    remat_graph_free(g);
    small.dropout = -1;
    CHECK_OK(remat_zoo_build("bert-base", &small, NULL, &g));
    CHECK_I64(remat_graph_n_params(g), tf_count(true, 3, 32, 50, 512));
    CHECK_I64(count_ops(g, REMAT_OP_DROPOUT, NULL), 0);
    CHECK_I64(count_ops(g, REMAT_OP_SOFTMAX_LAST, NULL), 3);
    remat_graph_free(g);
    check_fails("gpt2", &(remat_zoo_opts){.hidden = 100, .heads = 12}, REMAT_ERR_ARG);
    check_fails("gpt2", &(remat_zoo_opts){.seq_len = 1025}, REMAT_ERR_ARG);
    check_fails("bert-base", &(remat_zoo_opts){.seq_len = 513}, REMAT_ERR_ARG);
    check_fails("gpt2", &(remat_zoo_opts){.dropout = 1}, REMAT_ERR_ARG);
    check_fails("gpt2", &(remat_zoo_opts){.height = 224}, REMAT_ERR_ARG);
    check_fails("resnet18", &(remat_zoo_opts){.layers = 2}, REMAT_ERR_ARG);
    check_fails("resnet18", &(remat_zoo_opts){.dropout = 0.5f}, REMAT_ERR_ARG);
}

/* Other sizes that do work. */
static void test_other_sizes(void)
{
    remat_graph *g = NULL;

    CHECK_OK(remat_zoo_build("vgg16", &(remat_zoo_opts){.height = 448, .width = 448}, NULL,
                             &g));
    if (g) {
        check_shape(g, "avgpool", 4, 1, 512, 7, 7); /* 14x14 pooled 2x2 */
        CHECK_I64(remat_graph_n_params(g), 138357544);
        remat_graph_free(g);
    }
    g = NULL;
    CHECK_OK(remat_zoo_build("pspnet", &(remat_zoo_opts){.height = 473, .width = 473}, NULL,
                             &g));
    if (g) {
        check_shape(g, "ppm.cat", 4, 1, 4096, 60, 60);
        check_shape(g, "upsample", 4, 1, 21, 473, 473);
        remat_graph_free(g);
    }
    g = NULL;
    CHECK_OK(remat_zoo_build("mlp", &(remat_zoo_opts){.height = 32, .width = 32, .batch = 5},
                             NULL, &g));
    if (g) {
        check_shape(g, "fc1", 2, 5, 512, 0, 0);
        CHECK_I64(remat_graph_n_params(g), 1025 * 512 + 513 * 512 + 513 * 10);
        remat_graph_free(g);
    }
}

/* ---------------------------------------------------------- allocation failures */

struct failing {
    long calls, fail_at; /* the fail_at-th allocation (1-based) fails */
    long long live;      /* bytes held */
};

static void *failing_fn(void *ud, void *ptr, size_t old, size_t n)
{
    struct failing *f = ud;
    void *p;

    if (n == 0) {
        f->live -= (long long)old;
        free(ptr);
        return NULL;
    }
    if (++f->calls == f->fail_at)
        return NULL;
    p = realloc(ptr, n);
    if (p)
        f->live += (long long)n - (long long)old;
    return p;
}

/* Fails each allocation of a build in turn: every run returns REMAT_ERR_NOMEM with
 * *out NULL and holds no memory afterwards, until one succeeds. */
static void check_alloc_failures(const char *name, const remat_zoo_opts *o)
{
    struct failing f = {0};
    remat_allocator a = {failing_fn, &f};
    remat_status s = REMAT_ERR_NOMEM;
    long i;

    for (i = 1; s == REMAT_ERR_NOMEM && i < 100000; i++) {
        remat_graph *g = (remat_graph *)&f;

        f = (struct failing){.fail_at = i};
        s = remat_zoo_build(name, o, &a, &g);
        if (s == REMAT_ERR_NOMEM) {
            CHECK(g == NULL, "%s: failing allocation %ld: *out not NULL", name, i);
            CHECK(f.live == 0, "%s: failing allocation %ld: %lld bytes leaked", name, i,
                  f.live);
        } else {
            CHECK(s == REMAT_OK, "%s: failing allocation %ld: %s", name, i,
                  remat_status_name(s));
            remat_graph_free(g);
            CHECK(f.live == 0, "%s: %lld bytes held after free", name, f.live);
        }
        if (h_cur_failed)
            break;
    }
    CHECK(s == REMAT_OK && i > 10, "%s: %ld attempts", name, i);
}

static void test_alloc_failures(void)
{
    check_alloc_failures("mlp", NULL);
    check_alloc_failures("googlenet", NULL);
    check_alloc_failures("unet", &(remat_zoo_opts){.height = 188, .width = 188});
    check_alloc_failures("densenet121", NULL);
}

int main(void)
{
    RUN(test_registry);
    RUN(test_all_build);
    RUN(test_param_counts);
    RUN(test_shapes_classifiers);
    RUN(test_shapes_googlenet);
    RUN(test_shapes_segmentation);
    RUN(test_resnet_depths);
    RUN(test_flops);
    RUN(test_bad_names);
    RUN(test_bad_opts);
    RUN(test_other_sizes);
    RUN(test_transformers);
    RUN(test_alloc_failures);
    return harness_end();
}
