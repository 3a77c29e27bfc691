/*
 * test_cuda.c - the cuda backend (make test-cuda; built in every build, it reports
 * skipped where the library has no cuda backend or the machine no GPU).
 *
 * 1. Gradients against the reference backend: ResNet-18, DenseNet-121 and GoogLeNet
 *    (batch 2, 64x64: convolution, batch norm, ReLU, both poolings, global average
 *    pooling, add, concat, linear, dropout, the losses), plan none, one
 *    remat_trainer_gradients from the same seed and batch on each: the loss within 1e-4
 *    relative, the whole gradient within 1e-3 relative L2 and each element within 1e-3
 *    of the largest.
 * 0. Every op with a CUDA kernel, forward and backward, against the reference kernels on
 *    the same data (in managed memory, which both read): convolutions under every
 *    algorithm cuDNN offers them, with the scratch prepare reports; outputs within 1e-4
 *    relative (plus 1e-5 of the largest), max pooling's winners exactly, gradients
 *    accumulated onto random starting values within the same bounds; layer norm and
 *    GELU run twice give the same bits. The transformer's ops too: matmul batched, with
 *    A or B transposed, with a shared 2-d B and with B the op's parameter (tied
 *    weights); softmax_last causal and scaled, rows past 256 columns; embedding with
 *    repeated ids (its table's gradient equal to the reference's bit for bit: both add
 *    in token order) and an id past the table refused with its position; token_ce with
 *    ignored (negative) targets, its gradient from dout NULL (the loss) and from a
 *    given dout, a target past the vocabulary refused with its position.
 * 2. Three training steps under every strategy, planned with the cuda backend's kernels
 *    (cuDNN's deterministic algorithms, chosen by free memory): parameters bit-identical
 *    to `none` run with the same algorithms, measured peak equal to the planned one
 *    (arena high-water mark, the steps' workspace included), host tier too.
 */
#include "harness.h"

#include "exec/exec.h"
#include "kernel_util.h"
#include "kernels_util.h"

#include <math.h>

static const char *const models[] = {"resnet18", "densenet121", "googlenet"};

/* A cuda trainer for s, or NULL (skipped: no backend or no GPU). */
static remat_trainer *cuda_trainer(const remat_graph *g, const remat_tgraph *tg,
                                   const remat_schedule *s, bool *skip)
{
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *t = NULL;
    remat_status st;

    to.backend = REMAT_BACKEND_CUDA;
    st = remat_trainer_new(g, tg, s, &to, &t);
    *skip = st == REMAT_ERR_UNSUPPORTED;
    if (st && !*skip)
        CHECK(false, "cuda trainer: %s", remat_errmsg());
    return t;
}


/* ------------------------------------------------------------------ per op */

#define S1(a) {1, {a, 0, 0, 0}}
#define S2(a, b) {2, {a, b, 0, 0}}
#define S3(a, b, c) {3, {a, b, c, 0}}
#define S4(a, b, c, d) {4, {a, b, c, d}}

static const struct backend_ops *cu_be;
static void *cu_ctx;

/* Moves t's buffer into shared (managed) memory, contents kept. */
static void share(struct ktensor *t, size_t elem)
{
    size_t bytes = (size_t)kt_n(t) * elem;
    void *p;

    if (!t->data)
        return;
    p = cu_be->alloc_shared(cu_ctx, bytes);
    REMAT_ASSERT_TEST(p);
    memcpy(p, t->data, bytes);
    free(t->data);
    t->data = p;
}

static void share_floats(float **p, int64_t n)
{
    struct ktensor t = {*p, {n, 0, 0, 0}, 1};

    share(&t, sizeof(float));
    *p = t.data;
}

/* Moves every tensor of t (inputs, their gradients, the output and its gradient, aux, the
 * parameters and theirs) into shared memory; unshare releases them. */
static void share_tk(struct tk *t)
{
    struct ktensor *all[] = {&t->op.out, &t->op.dout, &t->op.aux, &t->op.w, &t->op.dw,
                             &t->op.b, &t->op.db};

    for (int i = 0; i < t->n_in; i++) {
        share(&t->in[i], 4);
        share(&t->din[i], 4);
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        share(all[i], 4);
}

/* Releases what share moved; the rest as tk_fini. */
static void unshare(struct tk *t)
{
    struct ktensor *all[] = {&t->op.out, &t->op.dout, &t->op.aux, &t->op.w, &t->op.dw,
                             &t->op.b, &t->op.db};

    for (int i = 0; i < t->n_in; i++) {
        cu_be->release_shared(cu_ctx, t->in[i].data, 0);
        cu_be->release_shared(cu_ctx, t->din[i].data, 0);
        t->in[i].data = t->din[i].data = NULL;
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i]->data)
            cu_be->release_shared(cu_ctx, all[i]->data, 0);
        all[i]->data = NULL;
    }
    if (t->op.running_mean) {
        cu_be->release_shared(cu_ctx, t->op.running_mean, 0);
        cu_be->release_shared(cu_ctx, t->op.running_var, 0);
        t->op.running_mean = t->op.running_var = NULL;
    }
    tk_fini(t);
}

static void close_to(const char *name, const char *what, const float *got, const float *want,
                     int64_t n)
{
    double amax = 0;
    int64_t bad = 0, first = -1;

    for (int64_t i = 0; i < n; i++)
        amax = fmax(amax, fabs(want[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-4 * fabs(want[i]) + 1e-5 * fmax(1, amax))) {
            bad++;
            first = first < 0 ? i : first;
        }
    CHECK(bad == 0, "%s: %s[%lld] = %.9g, reference %.9g; %lld of %lld off", name, what,
          (long long)first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0,
          (long long)bad, (long long)n);
}

static float *copy_of(const float *p, int64_t n)
{
    float *q = malloc(sizeof(float) * (size_t)(n ? n : 1));

    REMAT_ASSERT_TEST(q);
    memcpy(q, p, sizeof(float) * (size_t)n);
    return q;
}

/* op_case's variants: a matmul's B (2-d) turned into the op's parameter; the backward
 * given dout NULL (the constant 1 of a loss). */
enum { CASE_B_PARAM = 1, CASE_DY_NULL = 2 };

/* Makes t's second input (a matmul's 2-d B) its parameter: n_in 1, B and dB in w, dw. */
static void b_to_param(struct tk *t)
{
    t->op.w = t->in[1];
    t->op.dw = t->din[1];
    memset(&t->in[1], 0, sizeof t->in[1]);
    memset(&t->din[1], 0, sizeof t->din[1]);
    t->n_in = t->op.n_in = 1;
}

/* Random inputs: uniform in [-1, 1), and for the integer ones softmax_ce's labels in
 * [0, K), embedding ids in [0, vocab) and token_ce's targets in [-V/2, V) (a third of
 * them negative: ignored). */
static void fill_case(struct tk *t)
{
    remat_op type = t->op.type;

    for (int i = 0; i < t->n_in; i++) {
        int32_t *ids = (int32_t *)t->in[i].data;
        int64_t lo = 0, hi;

        if (type == REMAT_OP_SOFTMAX_CE && i == 1)
            hi = t->in[0].shape[1];
        else if (type == REMAT_OP_EMBEDDING && i == 0)
            hi = t->op.w.shape[0];
        else if (type == REMAT_OP_TOKEN_CE && i == 1)
            hi = t->in[0].shape[t->in[0].ndim - 1], lo = -hi / 2;
        else {
            fill_uniform(&t->in[i], -1, 1);
            continue;
        }
        for (int64_t j = 0; j < kt_n(&t->in[i]); j++)
            ids[j] = (int32_t)(lo + (int64_t)(splitmix64() % (uint64_t)(hi - lo)));
    }
}

/* One op: the reference, then the cuda backend with algorithm algo, forward and
 * backward from the same starting values (flags: CASE_*). */
static void op_case(const char *name, remat_op type, int n_in, const struct shp *shapes,
                    const remat_attrs *at, int32_t algo, bool backward_alg, unsigned flags)
{
    struct tk t;
    struct ktensor in[TK_MAX_IN], *p, *g;
    struct kop k;
    float *yr, *auxr = NULL, *g0[TK_MAX_IN + 2] = {0}, *gr[TK_MAX_IN + 2] = {0};
    int64_t ny, naux;
    size_t need = 0;
    void *sc = NULL;

    rng_state = rng_seed;
    tk_init(&t, type, n_in, shapes, at);
    if (flags & CASE_B_PARAM)
        b_to_param(&t);
    fill_case(&t);
    if (t.op.w.data)
        fill_uniform(&t.op.w, -1, 1);
    if (t.op.b.data)
        fill_uniform(&t.op.b, -1, 1);
    fill_uniform(&t.op.dout, -1, 1);
    t.op.key = 0x5eedull;
    t.op.update_stats = true;
    share_tk(&t);
    if (t.op.running_mean) {
        share_floats(&t.op.running_mean, t.op.w.shape[0]);
        share_floats(&t.op.running_var, t.op.w.shape[0]);
    }
    ny = kt_n(&t.op.out);
    naux = t.op.aux.data ? kt_n(&t.op.aux) : 0;

    /* forward */
    t.op.algo = backward_alg ? 0 : algo;
    if (type == REMAT_OP_CONV2D || type == REMAT_OP_CONV_TRANSPOSE2D) {
        int32_t ids[KERNELS_MAX_ALGOS];

        if (backward_alg) /* a forward algorithm for the backward cases: the first */
            cu_be->algos(cu_ctx, &t.op, false, ids), t.op.algo = ids[0];
    }
    CHECK_OK(ref_forward(&t.op));
    yr = copy_of(t.op.out.data, ny);
    if (naux)
        auxr = copy_of(t.op.aux.data, naux);
    CHECK_OK(cu_be->prepare(cu_ctx, &t.op, false, &need));
    if (need)
        REMAT_ASSERT_TEST((sc = cu_be->alloc(cu_ctx, need)));
    t.op.scratch = sc;
    t.op.scratch_bytes = need;
    t.op.update_stats = false; /* the reference updated them once */
    CHECK_OK(cu_be->forward(cu_ctx, &t.op));
    CHECK_OK(cu_be->sync(cu_ctx));
    close_to(name, "y", t.op.out.data, yr, ny);
    if (naux && type == REMAT_OP_MAX_POOL)
        CHECK(!memcmp(t.op.aux.data, auxr, sizeof(int32_t) * (size_t)naux),
              "%s: max pooling's winners differ", name);
    else if (naux)
        close_to(name, "aux", t.op.aux.data, auxr, naux);
    if (sc)
        cu_be->release(cu_ctx, sc, need);
    sc = NULL;

    /* backward, from the reference's forward tensors, onto random starting gradients */
    memcpy(t.op.out.data, yr, sizeof(float) * (size_t)ny);
    if (naux)
        memcpy(t.op.aux.data, auxr, sizeof(float) * (size_t)naux);
    for (int q = 0; q < t.n_in + 2; q++)
        if (tk_slot(&t, q, &p, &g)) {
            fill_uniform(g, -1, 1);
            g0[q] = copy_of(g->data, kt_n(g));
        }
    k = tk_bwd_kop(&t, in);
    k.algo = algo;
    if (flags & CASE_DY_NULL)
        k.dout.data = NULL;
    if (!backward_alg && (type == REMAT_OP_CONV2D || type == REMAT_OP_CONV_TRANSPOSE2D)) {
        int32_t ids[KERNELS_MAX_ALGOS];

        cu_be->algos(cu_ctx, &k, true, ids);
        k.algo = ids[0];
    }
    CHECK_OK(ref_backward(&k));
    for (int q = 0; q < t.n_in + 2; q++)
        if (g0[q]) {
            tk_slot(&t, q, &p, &g);
            gr[q] = copy_of(g->data, kt_n(g));
            memcpy(g->data, g0[q], sizeof(float) * (size_t)kt_n(g));
        }
    CHECK_OK(cu_be->prepare(cu_ctx, &k, true, &need));
    if (need)
        REMAT_ASSERT_TEST((sc = cu_be->alloc(cu_ctx, need)));
    k.scratch = sc;
    k.scratch_bytes = need;
    CHECK_OK(cu_be->backward(cu_ctx, &k));
    CHECK_OK(cu_be->sync(cu_ctx));
    for (int q = 0; q < t.n_in + 2; q++)
        if (g0[q]) {
            tk_slot(&t, q, &p, &g);
            close_to(name, q < t.n_in ? "dx" : q == t.n_in ? "dw" : "db", g->data, gr[q],
                     kt_n(g));
            if (type == REMAT_OP_EMBEDDING)
                CHECK(!memcmp(g->data, gr[q], sizeof(float) * (size_t)kt_n(g)),
                      "%s: the table's gradient differs from the reference's bits", name);
        }
    if (sc)
        cu_be->release(cu_ctx, sc, need);
    for (int q = 0; q < TK_MAX_IN + 2; q++) {
        free(g0[q]);
        free(gr[q]);
    }
    free(yr);
    free(auxr);
    unshare(&t);
}

/* op_case under every algorithm the backend lists for the op (convolutions), forward
 * ones and backward ones. */
static void op_cases(const char *name, remat_op type, int n_in, const struct shp *shapes,
                     const remat_attrs *at)
{
    struct tk t;
    int32_t ids[KERNELS_MAX_ALGOS], n;
    struct ktensor in[TK_MAX_IN];
    struct kop k;
    char label[128];

    if (type != REMAT_OP_CONV2D && type != REMAT_OP_CONV_TRANSPOSE2D) {
        op_case(name, type, n_in, shapes, at, 0, false, 0);
        return;
    }
    tk_init(&t, type, n_in, shapes, at);
    n = cu_be->algos(cu_ctx, &t.op, false, ids);
    for (int32_t i = 0; i < n; i++) {
        snprintf(label, sizeof label, "%s [%s]", name, cu_be->algo_name(ids[i]));
        op_case(label, type, n_in, shapes, at, ids[i], false, 0);
    }
    k = tk_bwd_kop(&t, in);
    n = cu_be->algos(cu_ctx, &k, true, ids);
    for (int32_t i = 0; i < n; i++) {
        snprintf(label, sizeof label, "%s [%s]", name, cu_be->algo_name(ids[i]));
        op_case(label, type, n_in, shapes, at, ids[i], true, 0);
    }
    tk_fini(&t);
}

/* The bits of every tensor a one-input op's forward and backward write, gradients from
 * zero: out, aux, dx, dw, db (the absent ones skipped). */
static float *run_bits(struct tk *t, int64_t *n)
{
    struct ktensor in[TK_MAX_IN], *all[] = {&t->op.out, &t->op.aux, &t->din[0], &t->op.dw,
                                            &t->op.db};
    struct kop k;
    float *bits;

    *n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) {
            memset(all[i]->data, 0, sizeof(float) * (size_t)kt_n(all[i]));
            *n += kt_n(all[i]);
        }
    CHECK_OK(cu_be->forward(cu_ctx, &t->op));
    k = tk_bwd_kop(t, in);
    CHECK_OK(cu_be->backward(cu_ctx, &k));
    CHECK_OK(cu_be->sync(cu_ctx));
    REMAT_ASSERT_TEST((bits = malloc(sizeof(float) * (size_t)(*n ? *n : 1))));
    *n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) {
            memcpy(bits + *n, all[i]->data, sizeof(float) * (size_t)kt_n(all[i]));
            *n += kt_n(all[i]);
        }
    return bits;
}

/* A one-input op run twice on the same data gives the same bits (layer norm's row sums
 * are block reductions: their order must not depend on the run). */
static void same_bits_twice(const char *name, remat_op type, const struct shp *shape,
                            const remat_attrs *at)
{
    struct tk t;
    float *a, *b;
    int64_t na, nb;

    rng_state = rng_seed;
    tk_init(&t, type, 1, shape, at);
    fill_uniform(&t.in[0], -1, 1);
    fill_uniform(&t.op.dout, -1, 1);
    if (t.op.w.data)
        fill_uniform(&t.op.w, -1, 1);
    if (t.op.b.data)
        fill_uniform(&t.op.b, -1, 1);
    share_tk(&t);
    a = run_bits(&t, &na);
    b = run_bits(&t, &nb);
    CHECK(na == nb && !memcmp(a, b, sizeof(float) * (size_t)na), "%s: two runs differ", name);
    free(a);
    free(b);
    unshare(&t);
}

/* An embedding id (token_ce target) past the table at position 2, and a negative id (a
 * target past it) at 4: the forward refuses with REMAT_ERR_ARG naming the first. */
static void refused(const char *name, remat_op type, int n_in, const struct shp *shapes,
                    const remat_attrs *at, const char *want)
{
    struct tk t;
    bool emb = type == REMAT_OP_EMBEDDING;
    int32_t *ids, bound;
    size_t need = 0;
    void *sc = NULL;
    remat_status st;

    rng_state = rng_seed;
    tk_init(&t, type, n_in, shapes, at);
    fill_case(&t);
    if (t.op.w.data)
        fill_uniform(&t.op.w, -1, 1);
    ids = (int32_t *)t.in[emb ? 0 : 1].data;
    bound = (int32_t)(emb ? t.op.w.shape[0] : t.in[0].shape[t.in[0].ndim - 1]);
    ids[2] = bound;
    ids[4] = emb ? -5 : bound + 3;
    share_tk(&t);
    CHECK_OK(cu_be->prepare(cu_ctx, &t.op, false, &need));
    if (need)
        REMAT_ASSERT_TEST((sc = cu_be->alloc(cu_ctx, need)));
    t.op.scratch = sc;
    t.op.scratch_bytes = need;
    st = cu_be->forward(cu_ctx, &t.op);
    CHECK(st == REMAT_ERR_ARG && strstr(remat_errmsg(), want), "%s: status %d, \"%s\"", name,
          (int)st, remat_errmsg());
    core_clear_error();
    if (sc)
        cu_be->release(cu_ctx, sc, need);
    unshare(&t);
}

/* The transformer's ops against the reference (op_case), and their refusals. */
static void seq_cases(void)
{
    const struct shp a4 = S4(2, 3, 4, 5), b4 = S4(2, 3, 5, 6), a4t = S4(2, 3, 5, 4),
                     b4t = S4(2, 3, 6, 5), a3 = S3(3, 33, 64), b2 = S2(64, 17), b2t = S2(17, 64),
                     a3t = S3(3, 64, 33);
    struct shp mm[2] = {a4, b4}, mm_ta[2] = {a4t, b4}, mm_tb[2] = {a4, b4t},
               mm_tab[2] = {a4t, b4t}, sh[2] = {a3, b2}, sh_ta[2] = {a3t, b2},
               sh_tb[2] = {a3, b2t}, flat[2] = {S2(33, 64), b2t};
    const struct shp sm4 = S4(2, 3, 5, 5), sm_wide = S3(1, 300, 300), sm_rect = S2(4, 6),
                     ids = S2(3, 7), ids_long = S2(4, 50);
    struct shp ce3[2] = {S3(2, 5, 11), S2(2, 5)}, ce2[2] = {S2(6, 300), S1(6)};

    op_cases("matmul batched", REMAT_OP_MATMUL, 2, mm, NULL);
    op_cases("matmul A^T", REMAT_OP_MATMUL, 2, mm_ta, &(remat_attrs){.trans_a = true});
    op_cases("matmul B^T", REMAT_OP_MATMUL, 2, mm_tb, &(remat_attrs){.trans_b = true});
    op_cases("matmul A^T B^T", REMAT_OP_MATMUL, 2, mm_tab,
             &(remat_attrs){.trans_a = true, .trans_b = true});
    op_cases("matmul shared B", REMAT_OP_MATMUL, 2, sh, NULL);
    op_cases("matmul shared B, A^T", REMAT_OP_MATMUL, 2, sh_ta, &(remat_attrs){.trans_a = true});
    op_cases("matmul shared B^T", REMAT_OP_MATMUL, 2, sh_tb, &(remat_attrs){.trans_b = true});
    op_case("matmul param B", REMAT_OP_MATMUL, 2, sh, NULL, 0, false, CASE_B_PARAM);
    op_case("matmul param B^T (tied)", REMAT_OP_MATMUL, 2, sh_tb,
            &(remat_attrs){.trans_b = true}, 0, false, CASE_B_PARAM);
    op_case("matmul param B, A^T", REMAT_OP_MATMUL, 2, sh_ta, &(remat_attrs){.trans_a = true}, 0,
            false, CASE_B_PARAM);
    op_case("matmul 2-d param B^T", REMAT_OP_MATMUL, 2, flat, &(remat_attrs){.trans_b = true},
            0, false, CASE_B_PARAM);
    op_cases("softmax_last", REMAT_OP_SOFTMAX_LAST, 1, &sm4, NULL);
    op_cases("softmax_last causal scale 0.35", REMAT_OP_SOFTMAX_LAST, 1, &sm4,
             &(remat_attrs){.causal = true, .scale = 0.35f});
    op_cases("softmax_last causal 4x6", REMAT_OP_SOFTMAX_LAST, 1, &sm_rect,
             &(remat_attrs){.causal = true});
    op_cases("softmax_last causal wide scale 0.125", REMAT_OP_SOFTMAX_LAST, 1, &sm_wide,
             &(remat_attrs){.causal = true, .scale = 0.125f});
    same_bits_twice("softmax_last causal wide", REMAT_OP_SOFTMAX_LAST, &sm_wide,
                    &(remat_attrs){.causal = true, .scale = 0.125f});
    op_cases("embedding vocab 5", REMAT_OP_EMBEDDING, 1, &ids,
             &(remat_attrs){.vocab = 5, .out_channels = 6});
    op_cases("embedding vocab 150 d 70", REMAT_OP_EMBEDDING, 1, &ids_long,
             &(remat_attrs){.vocab = 150, .out_channels = 70});
    op_cases("token_ce 3-d", REMAT_OP_TOKEN_CE, 2, ce3, NULL);
    op_case("token_ce 3-d dout NULL", REMAT_OP_TOKEN_CE, 2, ce3, NULL, 0, false, CASE_DY_NULL);
    op_cases("token_ce vocab 300", REMAT_OP_TOKEN_CE, 2, ce2, NULL);
    refused("embedding id past the table", REMAT_OP_EMBEDDING, 1, &ids,
            &(remat_attrs){.vocab = 5, .out_channels = 6}, "token id 5 at position 2");
    refused("token_ce target past the vocabulary", REMAT_OP_TOKEN_CE, 2, ce3, NULL,
            "label 11 of position 2");
}

static void test_ops(void)
{
    remat_train_opts o = remat_train_opts_default();
    const struct shp x4 = S4(2, 16, 9, 11), x3 = S4(3, 3, 8, 8), xs = S4(2, 6, 7, 6),
                     x2 = S2(5, 10), lab = S1(5), xb = S4(4, 8, 5, 6),
                     xl = S3(2, 3, 700);
    struct shp two[2] = {x4, x4}, three[3] = {x4, x4, x4}, cat[2] = {x4, S4(2, 5, 9, 11)},
               ce[2] = {x2, lab};

    cu_be = backend_cuda();
    o.backend = REMAT_BACKEND_CUDA;
    if (!cu_be || cu_be->create(&o, &cu_ctx)) {
        SKIP("%s", cu_be ? remat_errmsg() : "the cuda backend is not in this build");
        core_clear_error();
        return;
    }
    op_cases("conv2d k3 p1 bias", REMAT_OP_CONV2D, 1, &x4,
             &(remat_attrs){.out_channels = 8, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .bias = true});
    op_cases("conv2d k1 s2", REMAT_OP_CONV2D, 1, &x3,
             &(remat_attrs){.out_channels = 7, .kh = 1, .kw = 1, .sh = 2, .sw = 2});
    op_cases("conv2d k3 d2 g2", REMAT_OP_CONV2D, 1, &x4,
             &(remat_attrs){.out_channels = 8, .kh = 3, .kw = 3, .ph = 2, .pw = 2, .dh = 2,
                            .dw = 2, .groups = 2});
    op_cases("conv_t k3 s2 p1 out_pad 1", REMAT_OP_CONV_TRANSPOSE2D, 1, &xs,
             &(remat_attrs){.out_channels = 5, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
                            .pw = 1, .out_pad_h = 1, .out_pad_w = 1, .bias = true});
    op_cases("batch_norm 4-d", REMAT_OP_BATCH_NORM, 1, &xb, NULL);
    op_cases("batch_norm 2-d", REMAT_OP_BATCH_NORM, 1, &x2, NULL);
    op_cases("relu", REMAT_OP_RELU, 1, &x4, NULL);
    op_cases("clip", REMAT_OP_CLIP, 1, &x4, &(remat_attrs){.clip_min = -0.5f, .clip_max = 0.5f});
    op_cases("leaky_relu", REMAT_OP_LEAKY_RELU, 1, &x4, &(remat_attrs){.alpha = 0.1f});
    op_cases("sigmoid", REMAT_OP_SIGMOID, 1, &x4, NULL);
    op_cases("tanh", REMAT_OP_TANH, 1, &x4, NULL);
    op_cases("hard_sigmoid", REMAT_OP_HARD_SIGMOID, 1, &x4, NULL);
    op_cases("hard_sigmoid 0.5 x + 0.6", REMAT_OP_HARD_SIGMOID, 1, &x4,
             &(remat_attrs){.alpha = 0.5f, .beta = 0.6f});
    op_cases("hard_swish", REMAT_OP_HARD_SWISH, 1, &x4, NULL);
    op_cases("reduce_sum axes 1, 3", REMAT_OP_REDUCE_SUM, 1, &x4,
             &(remat_attrs){.ndim = 4, .shape = {2, 1, 9, 1}, .scale = 0.5f});
    op_cases("gelu", REMAT_OP_GELU, 1, &x4, NULL);
    op_cases("gelu tanh", REMAT_OP_GELU, 1, &x4, &(remat_attrs){.approximate = true});
    /* rows of 11 (one pass per thread), 10 and 700 (several per thread) */
    op_cases("layer_norm 4-d", REMAT_OP_LAYER_NORM, 1, &x4, NULL);
    op_cases("layer_norm 2-d eps 0.1", REMAT_OP_LAYER_NORM, 1, &x2, &(remat_attrs){.eps = 0.1f});
    op_cases("layer_norm 3-d wide", REMAT_OP_LAYER_NORM, 1, &xl, NULL);
    same_bits_twice("layer_norm 3-d wide", REMAT_OP_LAYER_NORM, &xl, NULL);
    same_bits_twice("gelu", REMAT_OP_GELU, &x4, NULL);
    op_cases("dropout", REMAT_OP_DROPOUT, 1, &x4, &(remat_attrs){.p = 0.3f});
    op_cases("add 2", REMAT_OP_ADD, 2, two, NULL);
    op_cases("add 3", REMAT_OP_ADD, 3, three, NULL);
    op_cases("mul", REMAT_OP_MUL, 2, two, NULL);
    op_cases("concat", REMAT_OP_CONCAT, 2, cat, NULL);
    op_cases("crop centred", REMAT_OP_CROP, 1, &x4, &(remat_attrs){.out_h = 5, .out_w = 6,
                                                                  .offset_h = -1, .offset_w = -1});
    op_cases("crop at (1, 3)", REMAT_OP_CROP, 1, &x4, &(remat_attrs){.out_h = 4, .out_w = 5,
                                                                   .offset_h = 1, .offset_w = 3});
    op_cases("pad (1, 2, 0, 3)", REMAT_OP_PAD, 1, &x4, &(remat_attrs){.pad_t = 1, .pad_b = 2,
                                                                     .pad_l = 0, .pad_r = 3});
    op_cases("max_pool k3 s2 p1", REMAT_OP_MAX_POOL, 1, &x4,
             &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1});
    op_cases("avg_pool k3 s2 p1 ceil", REMAT_OP_AVG_POOL, 1, &x4,
             &(remat_attrs){.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                            .ceil_mode = true, .count_include_pad = true});
    op_cases("global_avg_pool", REMAT_OP_GLOBAL_AVG_POOL, 1, &x4, NULL);
    op_cases("linear bias", REMAT_OP_LINEAR, 1, &x2,
             &(remat_attrs){.out_channels = 7, .bias = true});
    op_cases("softmax_ce", REMAT_OP_SOFTMAX_CE, 2, ce, NULL);
    seq_cases();
    cu_be->destroy(cu_ctx);
    cu_ctx = NULL;
}

static void test_gradients(void)
{
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        remat_zoo_opts zo = {.batch = 2, .height = 64, .width = 64, .classes = 10};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        remat_trainer *tc = NULL, *tr = NULL;
        remat_train_opts ro = remat_train_opts_default();
        double lc, lr, d2 = 0, w2 = 0, dmax = 0, wmax = 0;
        bool skip;

        if (remat_zoo_build(models[m], &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
            remat_plan_none(tg, &s)) {
            CHECK(false, "%s: %s", models[m], remat_errmsg());
            goto next;
        }
        tc = cuda_trainer(g, tg, s, &skip);
        if (skip) {
            SKIP("%s", remat_errmsg());
            goto next;
        }
        if (!tc)
            goto next;
        CHECK_OK(remat_trainer_new(g, tg, s, &ro, &tr));
        if (!tr)
            goto next;
        CHECK_OK(remat_trainer_gradients(tc, NULL, NULL, &lc));
        CHECK_OK(remat_trainer_gradients(tr, NULL, NULL, &lr));
        CHECK(fabs(lc - lr) <= 1e-4 * fabs(lr), "%s: loss cuda %.9g, ref %.9g", models[m], lc, lr);
        for (size_t i = 0; i < tr->n_param_floats; i++) {
            double want = tr->block[tr->n_param_floats + i];
            double d = tc->block[tc->n_param_floats + i] - want;

            d2 += d * d;
            w2 += want * want;
            dmax = fmax(dmax, fabs(d));
            wmax = fmax(wmax, fabs(want));
        }
        printf("  %s: loss %.7f / %.7f, gradient relative L2 error %.2g, largest %.2g of max\n",
               models[m], lc, lr, sqrt(d2 / w2), dmax / wmax);
        CHECK(sqrt(d2 / w2) <= 1e-3 && dmax <= 1e-3 * wmax, "%s: gradients differ: %.3g, %.3g",
              models[m], sqrt(d2 / w2), dmax / wmax);
    next:
        remat_trainer_free(tc);
        remat_trainer_free(tr);
        remat_schedule_free(s);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

/* Three steps of sched: checksum; measured == planned (device and host tier). */
static uint64_t three_steps(const remat_graph *g, const remat_tgraph *tg,
                            const remat_schedule *sched, const char *what)
{
    remat_train_stats st;
    remat_trainer *t;
    uint64_t sum;
    double loss;
    bool skip;

    t = cuda_trainer(g, tg, sched, &skip);
    if (!t)
        return 0;
    for (int i = 0; i < 3; i++)
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    remat_trainer_stats(t, &st);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "%s: measured %zu, planned %zu", what,
          st.measured_peak_bytes, st.planned_peak_bytes);
    CHECK(st.measured_host_bytes == st.planned_host_bytes, "%s: host tier measured %zu, planned "
          "%zu", what, st.measured_host_bytes, st.planned_host_bytes);
    sum = remat_trainer_param_checksum(t);
    remat_trainer_free(t);
    return sum;
}

static void test_strategies(void)
{
    remat_zoo_opts zo = {.batch = 4, .height = 64, .width = 64, .classes = 10};
    remat_train_opts to = remat_train_opts_default();
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_algos *al = NULL;
    remat_status st;

    to.backend = REMAT_BACKEND_CUDA;
    if (remat_zoo_build("resnet18", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "%s", remat_errmsg());
        goto out;
    }
    st = remat_train_algos(g, tg, &to, &al);
    if (st == REMAT_ERR_UNSUPPORTED) {
        SKIP("%s", remat_errmsg());
        goto out;
    }
    CHECK_OK(st);
    for (int s = 1; al && s < REMAT_STRATEGY_COUNT; s++) {
        remat_plan_opts po = {.strategy = (remat_strategy)s, .budget_min = true, .algos = al,
                              .max_lower_sets = 20000, .time_limit = 3};
        remat_schedule *sched = NULL, *mirror = NULL;

        if (remat_plan(tg, &po, &sched, NULL)) {
            printf("  %s: not planned (%s)\n", remat_strategy_name((remat_strategy)s),
                   remat_errmsg());
            continue;
        }
        /* none with this plan's algorithms: the same kernels, so the same bits */
        mirror = none_with_kernels_of(tg, sched);
        CHECK(three_steps(g, tg, sched, remat_strategy_name((remat_strategy)s)) ==
                  three_steps(g, tg, mirror, "none with the same kernels"),
              "%s: parameters differ from none's with the same kernels",
              remat_strategy_name((remat_strategy)s));
        remat_schedule_free(mirror);
        remat_schedule_free(sched);
    }
out:
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    rng_seed = 20240611u;
    RUN(test_ops);
    RUN(test_gradients);
    RUN(test_strategies);
    return harness_end();
}
