/*
 * test_tiny.c - every zoo network at its smallest input, on the cpu backend against the
 * reference. The cpu backend once refused ResNet-18 at 4x4: oneDNN has no blocked direct
 * kernel for its first layer there, and that algorithm ended the layer's list (the
 * executor gives up when the last one listed is refused); src/kernels/cpu/conv.c now
 * lists only what runs, GEMM always.
 *
 * Per network (the zoo's own list: a model missing from the table below fails):
 * 1. The smallest square input that builds with batch 2 (batch norm needs more than one
 *    value per channel): every size from 1 up is built until one does, and that must be
 *    the size worked out by hand in the table.
 * 2. At that size, each convolution and linear layer not seen before (in this network or
 *    an earlier one): GEMM is listed for both its passes, and every algorithm listed for
 *    both gives the reference kernels' output and gradients from the same random
 *    tensors, to the cpu tests' tolerance (T_LIN: rtol 1e-4, atol 1e-5, test_cpu.c).
 * 3. One training step (plan none, remat_trainer_gradients) on each backend from the same
 *    seed and synthetic batch: both run (the cpu backend has a kernel for every layer),
 *    their losses are finite, and the loss and the parameters' gradients are compared
 *    with test_cpu.c's ResNet-18 tolerances: the loss to 1e-4 relative; the gradients to
 *    1e-3 in relative L2 over all of them, and each parameter's largest error to 1e-3 of
 *    its largest gradient, that floored at 1% of the largest over all parameters (a
 *    gradient that is 0 in exact arithmetic is rounding noise on both backends, as
 *    U-Net's final bias over 2 classes). Enforced for the networks without batch norm
 *    (U-Net, MLP), printed for the others: at their smallest inputs their deepest batch
 *    norms see 2 to 8 values per channel, and where those lie within about sqrt(eps) of
 *    each other the normalization multiplies rounding errors by up to 1/sqrt(eps) per
 *    layer. Measured on the reference alone, the input changed in its last bit: ResNet-18
 *    at 1x1 moves its loss by 9% and its gradients by five times their size, ResNet-50
 *    at 1x1 with batch 16 its gradients by 1%, GoogLeNet at 63x63 with batch 8 by 4%
 *    (its max pools also pick between near-equal values); the cpu backend differs from
 *    the reference by as much (test_cpu.c: no tolerance could tell that from a bug).
 *    Step 2 is their check.
 * For VGG-16 (its smallest input is 224, its full size) and PSPNet (41, but its dilated
 * ResNet-101 keeps 6x6 planes through 26 blocks: a minute on the reference kernels) the
 * reference is left out: one training step on the cpu backend alone must run to a
 * finite loss. VGG-19 (VGG-16's layers, more of them), ResNet-1001 and ResNet-2498 (376M and 921M parameters at any input) are
 * left out, with the reason printed.
 *
 * Classes: 10 (U-Net 2, with 4 base channels instead of 64). About 30 s with 2 threads
 * to itself (libgomp's threads spin while they wait: on a machine whose cores are busy
 * OMP_WAIT_POLICY=passive keeps it there). Seed: REMAT_SEED (printed). Networks named on
 * the command line run alone.
 */
#include "cpu_cmp.h"

#include "graph/graph.h"

#define BATCH 2
#define MAX_SIZE 512   /* the largest input tried */
#define MAX_CASES 1024 /* distinct layers over all networks */
#define KEY_LEN 24

struct net {
    const char *name;
    int64_t smallest;     /* worked out by hand */
    int64_t classes, base_channels;
    const char *skip;     /* why steps 2 and 3 are left out, or NULL */
    bool cpu_only;        /* with skip: one cpu step still runs */
};

/* The smallest sizes: ResNets pad every convolution and pool, so 1x1 gives 1x1 planes
 * throughout. VGG: five 2x2 max-pools to a map that pools evenly to 7x7, 224 / 32 = 7.
 * DenseNet: conv0 and pool0 (7x7/2 p3, 3x3/2 p1), then three 2x2 transitions need a
 * map of 8: 29 -> 15 -> 8 -> 4, 2, 1 (28 -> 14 -> 7 -> 3, 1, 0). GoogLeNet: the
 * auxiliary heads' 4x4 pool after conv1 and three ceil-mode 3x3/2 max-pools: 63 -> 32
 * -> 16 -> 8 -> 4 (62 -> 31 -> 15 -> 7 -> 3). U-Net: two valid 3x3 convs and a 2x2 pool
 * per level, then up-levels of a 2x2/2 transposed conv and two valid convs: 188 -> 184,
 * 92 -> 88, 44 -> 40, 20 -> 16, 8 -> bottom 4 -> 8 -> 4 (four times); at 187 the last
 * up-level ends at 0. PSPNet: its 1, 2, 3, 6 bins need a map divisible by 6 at 1/8:
 * 41 -> 21 -> 11 -> 6 (40 -> 20 -> 10 -> 5). MLP: one pixel is one input feature. */
static const struct net nets[] = {
    {"resnet18", 1, 10, 0, NULL, false},
    {"resnet34", 1, 10, 0, NULL, false},
    {"resnet50", 1, 10, 0, NULL, false},
    {"resnet101", 1, 10, 0, NULL, false},
    {"resnet152", 1, 10, 0, NULL, false},
    {"resnet1001", 1, 10, 0, "376M parameters (1.5 GB a copy) at any input", false},
    {"resnet2498", 1, 10, 0, "921M parameters (3.7 GB a copy) at any input", false},
    {"vgg16", 224, 10, 0, "its smallest input is its full size", true},
    {"vgg19", 224, 10, 0, "VGG-16's layers (its cpu step runs above), more of them", false},
    {"densenet121", 29, 10, 0, NULL, false},
    {"densenet161", 29, 10, 0, NULL, false},
    {"googlenet", 63, 10, 0, NULL, false},
    {"unet", 188, 2, 4, NULL, false},
    {"pspnet", 41, 10, 0, "its dilated ResNet-101 keeps 6x6 planes: a minute on the "
                          "reference kernels", true},
    {"mlp", 1, 10, 0, NULL, false},
};

static const struct net *find_net(const char *name)
{
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++)
        if (!strcmp(nets[i].name, name))
            return &nets[i];
    return NULL;
}

static remat_zoo_opts zoo_opts(const struct net *n, int64_t size)
{
    return (remat_zoo_opts){.batch = BATCH, .height = size, .width = size,
                            .classes = n->classes, .base_channels = n->base_channels};
}

/* Step 1: the first size from 1 up whose graph builds (0 when none up to MAX_SIZE), and
 * that graph in *out. */
static int64_t smallest_input(const struct net *n, remat_graph **out)
{
    for (int64_t s = 1; s <= MAX_SIZE; s++) {
        remat_zoo_opts zo = zoo_opts(n, s);
        remat_status st = remat_zoo_build(n->name, &zo, NULL, out);

        if (st == REMAT_OK)
            return s;
        /* a size too small is a shape the network cannot take, nothing else */
        CHECK_OR(st == REMAT_ERR_SHAPE || st == REMAT_ERR_UNSUPPORTED, return 0,
                 "%s at %lld: %s", n->name, (long long)s, remat_errmsg());
        core_clear_error();
    }
    return 0;
}

/* ------------------------------------------------------------- step 2: per layer */

/* The identity of op as a layer: type, input and output shapes, attributes. */
static void layer_key(const remat_graph *g, const struct gop *op, int64_t *k)
{
    const struct gvalue *x = graph_value(g, op->in[0]), *y = graph_value(g, op->out);
    const remat_attrs *a = &op->at;
    int n = 0;

    memset(k, 0, sizeof(int64_t) * KEY_LEN);
    k[n++] = op->type;
    for (int d = 0; d < 4; d++) {
        k[n++] = x->shape[d];
        k[n++] = y->shape[d];
    }
    k[n++] = a->kh, k[n++] = a->kw, k[n++] = a->sh, k[n++] = a->sw, k[n++] = a->ph;
    k[n++] = a->pw, k[n++] = a->dh, k[n++] = a->dw, k[n++] = a->groups;
    k[n++] = a->out_pad_h, k[n++] = a->out_pad_w, k[n++] = a->bias;
    k[n++] = a->out_channels;
    REMAT_ASSERT_TEST(n <= KEY_LEN);
}

/* Whether algorithm a is listed for both passes of the layer (ids: the lists). */
static bool in_both(const int32_t ids[2][CPU_N_ALGOS], const int32_t n[2], int32_t a)
{
    bool f = false, b = false;

    for (int32_t j = 0; j < n[0]; j++)
        f = f || ids[0][j] == a;
    for (int32_t j = 0; j < n[1]; j++)
        b = b || ids[1][j] == a;
    return f && b;
}

/* Step 2 for one layer: GEMM is listed for both passes, and every algorithm listed for
 * both gives the reference kernels' results (T_LIN) from the same random tensors: the
 * forward, then the backward (every gradient, onto zeros) from the reference's output.
 * Returns the algorithms run. */
static int check_layer(const char *net, const remat_graph *g, const struct gop *op)
{
    static const char *const what[] = {"dx", "dw", "db"};
    const struct gvalue *xv = graph_value(g, op->in[0]);
    struct shp x = {xv->ndim, {xv->shape[0], xv->shape[1], xv->shape[2], xv->shape[3]}};
    struct tk t;
    struct ktensor in[TK_MAX_IN], *p, *gr;
    struct kop bwd;
    float *want[3] = {0}, *y;
    int32_t ids[2][CPU_N_ALGOS], n[2];
    int64_t ny;
    int ran = 0;

    tk_init(&t, op->type, 1, &x, &op->at);
    for (int k = 0; k < 3; k++)
        if (tk_slot(&t, k, &p, &gr))
            fill_uniform(p, -1, 1);
    fill_uniform(&t.op.dout, -1, 1);
    bwd = tk_bwd_kop(&t, in);
    n[0] = cpu_algos(&t.op, false, ids[0]);
    n[1] = cpu_algos(&bwd, true, ids[1]);
    CHECK(in_both(ids, n, CPU_ALGO_GEMM), "%s %s: GEMM not listed for both passes", net,
          op->name);
    ny = kt_n(&t.op.out);
    CHECK_OK(ref_forward(&t.op));
    y = dup(t.op.out.data, ny);
    CHECK_OK(ref_backward(&bwd));
    for (int k = 0; k < 3; k++)
        if (tk_slot(&t, k, &p, &gr))
            want[k] = dup(gr->data, kt_n(gr));
    for (int32_t a = 0; a < CPU_N_ALGOS; a++) {
        char name[160];

        if (!in_both(ids, n, a))
            continue;
        snprintf(name, sizeof name, "%s %s %s", net, op->name, cpu_algo_name(a));
        t.op.algo = bwd.algo = a;
        memset(t.op.out.data, 0xff, sizeof(float) * (size_t)ny); /* NaN: all written */
        CHECK_OK(be->forward(ctx, &t.op));
        compare(name, "y", t.op.out.data, y, ny, T_LIN);
        tk_zero_grads(&t);
        CHECK_OK(be->backward(ctx, &bwd));
        for (int k = 0; k < 3; k++)
            if (want[k] && tk_slot(&t, k, &p, &gr))
                compare(name, what[k], gr->data, want[k], kt_n(gr), T_LIN);
        ran++;
    }
    for (int k = 0; k < 3; k++)
        free(want[k]);
    free(y);
    tk_fini(&t);
    return ran;
}

/* Step 2: every convolution and linear layer of g not checked before (in this network
 * or an earlier one). */
static void check_layers(const char *net, const remat_graph *g)
{
    static int64_t keys[MAX_CASES][KEY_LEN];
    static int n_keys;
    int n0 = n_keys, ran = 0;

    for (int32_t o = 0; o < remat_graph_n_ops(g); o++) {
        const struct gop *op = graph_op(g, o);
        bool seen = false;

        if (op->type != REMAT_OP_CONV2D && op->type != REMAT_OP_CONV_TRANSPOSE2D &&
            op->type != REMAT_OP_LINEAR)
            continue;
        REMAT_ASSERT_TEST(n_keys < MAX_CASES);
        layer_key(g, op, keys[n_keys]);
        for (int i = 0; i < n_keys && !seen; i++)
            seen = !memcmp(keys[i], keys[n_keys], sizeof keys[i]);
        if (!seen) {
            ran += check_layer(net, g, op);
            n_keys++;
        }
    }
    printf("  %s: %d layers not seen before, %d cases against the reference kernels\n", net,
           n_keys - n0, ran);
}

/* ---------------------------------------------------------- step 3: one step */

/* A step's loss and every parameter's gradient, concatenated in graph order. */
struct grads {
    double loss;
    float *g;
    int64_t n;
};

/* The step of t on its synthetic batch (the seed's), its gradients gathered into r
 * (false on failure). */
static bool run_step(remat_trainer *t, const remat_graph *g, struct grads *r)
{
    int64_t at = 0;

    CHECK_OR(remat_trainer_gradients(t, NULL, NULL, &r->loss) == REMAT_OK, return false,
             "step: %s", remat_errmsg());
    for (int32_t v = 0; v < remat_graph_n_values(g); v++) {
        const struct gvalue *gv = graph_value(g, v);
        float *grad = NULL;
        int64_t n = 0;

        if (gv->kind != VK_PARAM)
            continue;
        CHECK_OR(remat_trainer_param(t, gv->name, NULL, &grad, &n) == REMAT_OK && grad &&
                     at + n <= r->n,
                 return false, "%s: no gradient", gv->name);
        memcpy(r->g + at, grad, sizeof(float) * (size_t)n);
        at += n;
    }
    CHECK_OR(at == r->n, return false, "%lld gradients of %lld parameters", (long long)at,
             (long long)r->n);
    return true;
}

/* How far b is from a (the reference): the loss's relative error, the gradients'
 * relative L2 error, and the worst parameter's largest error over its floored scale
 * (file comment), that parameter's name in where. */
struct diff {
    double loss, l2, worst;
    const char *where;
};

static struct diff diff_of(const remat_graph *g, const struct grads *a, const struct grads *b)
{
    struct diff d = {fabs(b->loss - a->loss) / fmax(fabs(a->loss), 1e-30), 0, 0, ""};
    double big = 0, e2 = 0, a2 = 0;
    int64_t at = 0;

    for (int64_t i = 0; i < a->n; i++)
        big = fmax(big, fabs(a->g[i]));
    if (!isfinite(big))
        return (struct diff){d.loss, INFINITY, INFINITY, "the reference's overflow"};
    for (int32_t v = 0; v < remat_graph_n_values(g); v++) {
        const struct gvalue *gv = graph_value(g, v);
        int64_t n = graph_numel(gv);
        double emax = 0, amax = 0;

        if (gv->kind != VK_PARAM)
            continue;
        for (int64_t i = at; i < at + n; i++) {
            double e = fabs((double)b->g[i] - a->g[i]);

            e2 += e * e;
            a2 += (double)a->g[i] * a->g[i];
            emax = isfinite(e) ? fmax(emax, e) : INFINITY; /* fmax drops a NaN */
            amax = fmax(amax, fabs(a->g[i]));
        }
        emax /= fmax(fmax(amax, 1e-2 * big), 1e-30);
        if (!(emax <= d.worst)) {
            d.worst = emax;
            d.where = gv->name;
        }
        at += n;
    }
    d.l2 = isfinite(e2) ? sqrt(e2 / fmax(a2, 1e-300)) : INFINITY;
    d.loss = isfinite(d.loss) ? d.loss : INFINITY;
    return d;
}

/* The tolerances (file comment). */
static bool within(const struct diff *d)
{
    return d->loss <= 1e-4 && d->l2 <= 1e-3 && d->worst <= 1e-3;
}

/* A trainer of g on backend kind from the test's seed (plan none: s). */
static remat_trainer *trainer(const remat_graph *g, const remat_tgraph *tg,
                              const remat_schedule *s, remat_backend_kind kind)
{
    remat_train_opts o = remat_train_opts_default();
    remat_trainer *t = NULL;

    o.backend = kind;
    o.threads = 2;
    o.seed = rng_seed;
    CHECK(remat_trainer_new(g, tg, s, &o, &t) == REMAT_OK, "%s trainer: %s",
          remat_backend_name(kind), remat_errmsg());
    return t;
}

/* The fewest values per channel a batch norm of g normalizes (N*H*W); 0 without one. */
static int64_t bn_values(const remat_graph *g)
{
    int64_t least = 0;

    for (int32_t o = 0; o < remat_graph_n_ops(g); o++) {
        const struct gop *op = graph_op(g, o);
        const struct gvalue *x = graph_value(g, op->in[0]);
        int64_t n = x->shape[0] * (x->ndim == 4 ? x->shape[2] * x->shape[3] : 1);

        if (op->type == REMAT_OP_BATCH_NORM && (!least || n < least))
            least = n;
    }
    return least;
}

/* One step of g on the cpu backend alone: it runs, to a finite loss. */
static void cpu_step(const struct net *net, const remat_graph *g)
{
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    double loss = NAN;

    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (tg)
        CHECK_OK(remat_plan_none(tg, &s));
    if (s && (t = trainer(g, tg, s, REMAT_BACKEND_CPU)))
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    CHECK(isfinite(loss), "%s: cpu step loss %g", net->name, loss);
    printf("  %s: one cpu step, loss %.9g (the reference left out: %s)\n", net->name, loss,
           net->skip);
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
}

/* Step 3 on g. */
static void check_step(const struct net *net, const remat_graph *g)
{
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    struct grads ref = {0}, cpu = {0};
    int64_t bn = bn_values(g);
    struct diff d;
    bool ok;

    ref.n = cpu.n = remat_graph_n_params(g);
    ref.g = dup(NULL, ref.n);
    cpu.g = dup(NULL, cpu.n);
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (tg)
        CHECK_OK(remat_plan_none(tg, &s));
    if (!s)
        goto out;
    ok = (t = trainer(g, tg, s, REMAT_BACKEND_REF)) && run_step(t, g, &ref);
    remat_trainer_free(t);
    ok = ok && (t = trainer(g, tg, s, REMAT_BACKEND_CPU)) && run_step(t, g, &cpu);
    remat_trainer_free(t);
    if (!ok)
        goto out;
    CHECK(isfinite(ref.loss) && isfinite(cpu.loss), "%s: loss ref %g, cpu %g", net->name,
          ref.loss, cpu.loss);
    d = diff_of(g, &ref, &cpu);
    printf("  %s: loss ref %.9g, cpu %.9g; cpu - ref: loss %.2g, gradients L2 %.2g, "
           "largest %.2g (%s)\n", net->name, ref.loss, cpu.loss, d.loss, d.l2, d.worst,
           d.where);
    if (!bn)
        CHECK(within(&d), "%s: cpu - ref: loss %.3g, gradients L2 %.3g, largest %.3g (%s)",
              net->name, d.loss, d.l2, d.worst, d.where);
    else
        printf("  %s: not enforced: batch norm over as few as %lld values per channel\n",
               net->name, (long long)bn);
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    free(ref.g);
    free(cpu.g);
}

/* ------------------------------------------------------------------- driver */

static void check_net(const char *name)
{
    const struct net *n = find_net(name);
    remat_graph *g = NULL;
    double t0 = core_seconds();
    int64_t s;

    CHECK_OR(n, return, "%s: not in test_tiny's table (add its smallest input)", name);
    s = smallest_input(n, &g);
    printf("  %s: smallest input %lldx%lld (batch %d)\n", name, (long long)s, (long long)s,
           BATCH);
    CHECK(s == n->smallest, "%s: smallest input %lld, worked out %lld", name, (long long)s,
          (long long)n->smallest);
    if (g && n->skip && n->cpu_only) {
        cpu_step(n, g);
    } else if (g && n->skip) {
        SKIP("%s at %lldx%lld: %s", name, (long long)s, (long long)s, n->skip);
    } else if (g) {
        rng_state = rng_seed;
        check_layers(name, g);
        check_step(n, g);
    }
    remat_graph_free(g);
    printf("  %s: %.1f s\n", name, core_seconds() - t0);
}

/* Whether network name is among argv[1..argc) (all when none is named). */
static bool wanted(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name))
            return true;
    return argc < 2;
}

int main(int argc, char **argv)
{
    (void)cmp_case; /* cpu_cmp.h's fuller comparison (test_cpu_conv.c); here check_layer */
    if (!cpu_cmp_setup())
        return 1;
    for (size_t i = 0; i < remat_zoo_count(); i++) {
        /* the transformers take tokens, not images (test_train_tf.c trains them) */
        if (!wanted(argc, argv, remat_zoo_name(i)) || !strcmp(remat_zoo_name(i), "gpt2") ||
            !strcmp(remat_zoo_name(i), "bert-base"))
            continue;
        h_cur_failed = h_cur_skipped = 0;
        check_net(remat_zoo_name(i));
        if (h_cur_failed)
            h_failed++;
        else if (h_cur_skipped)
            h_skipped++;
        else
            h_passed++;
        printf("%s %s\n", h_cur_failed ? "FAIL" : h_cur_skipped ? "skip" : "ok  ",
               remat_zoo_name(i));
        fflush(stdout);
    }
    be->destroy(ctx);
    return harness_end();
}
