/*
 * dnn.c - the cuda backend's ops on cuDNN and cuBLAS: convolution and transposed
 * convolution (cuDNN's legacy API; algorithms from its heuristics, deterministic ones
 * only, named and numbered as exec/backend_cuda.c says), batch norm (cuDNN), linear and
 * the batched matrix product (cuBLAS SGEMM, no TF32).
 */
#include "kernels/cuda/cuda.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ convolutions */

/* cuDNN's descriptors of a convolution op (transposed: the convolution it transposes,
 * whose input is our output). */
struct conv {
    cudnnTensorDescriptor_t x, y, b; /* the equivalent convolution's input and output */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cv;
    bool transposed;
};

static void conv_fini(struct conv *v)
{
    if (v->x)
        cudnnDestroyTensorDescriptor(v->x);
    if (v->y)
        cudnnDestroyTensorDescriptor(v->y);
    if (v->b)
        cudnnDestroyTensorDescriptor(v->b);
    if (v->w)
        cudnnDestroyFilterDescriptor(v->w);
    if (v->cv)
        cudnnDestroyConvolutionDescriptor(v->cv);
}

static int or1(int32_t v)
{
    return v > 0 ? v : 1;
}

static remat_status tensor4(cudnnTensorDescriptor_t d, const int64_t *s, int ndim)
{
    remat_status st = REMAT_OK;

    DNN_TRY(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)s[0],
                                       (int)s[1], ndim > 2 ? (int)s[2] : 1,
                                       ndim > 3 ? (int)s[3] : 1));
out:
    return st;
}

static remat_status conv_init(const struct kop *op, struct conv *v)
{
    const remat_attrs *at = op->at;
    const struct ktensor *in = &op->in[0], *out = &op->out;
    int g = or1(at->groups);
    remat_status st = REMAT_OK;

    memset(v, 0, sizeof *v);
    v->transposed = op->type == REMAT_OP_CONV_TRANSPOSE2D;
    if (v->transposed) { /* the convolution from our output back to our input */
        in = &op->out;
        out = &op->in[0];
    }
    DNN_TRY(cudnnCreateTensorDescriptor(&v->x));
    DNN_TRY(cudnnCreateTensorDescriptor(&v->y));
    DNN_TRY(cudnnCreateTensorDescriptor(&v->b));
    DNN_TRY(cudnnCreateFilterDescriptor(&v->w));
    DNN_TRY(cudnnCreateConvolutionDescriptor(&v->cv));
    if ((st = tensor4(v->x, in->shape, 4)) || (st = tensor4(v->y, out->shape, 4)))
        goto out;
    DNN_TRY(cudnnSetTensor4dDescriptor(v->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                       (int)op->out.shape[1], 1, 1));
    /* filter (K, C/g, kh, kw): ours as stored, K the equivalent convolution's outputs */
    DNN_TRY(cudnnSetFilter4dDescriptor(v->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                       (int)op->w.shape[0], (int)op->w.shape[1], at->kh,
                                       at->kw));
    DNN_TRY(cudnnSetConvolution2dDescriptor(v->cv, at->ph, at->pw, or1(at->sh), or1(at->sw),
                                            or1(at->dh), or1(at->dw), CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
    DNN_TRY(cudnnSetConvolutionGroupCount(v->cv, g));
    DNN_TRY(cudnnSetConvolutionMathType(v->cv, CUDNN_FMA_MATH)); /* no TF32 */
out:
    if (st)
        conv_fini(v);
    return st;
}

/* The three kinds of cuDNN convolution call. */
enum { K_FWD, K_DATA, K_FILTER };

/* Deterministic algorithms of one kind, fastest first (cuDNN's heuristics), with their
 * workspace; at most max. */
static remat_status kind_algos(struct cuda_ctx *c, const struct conv *v, int kind, int *ids,
                               size_t *ws, int max, int *n)
{
    remat_status st = REMAT_OK;
    int got = 0;

    *n = 0;
    if (kind == K_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];

        DNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, v->x, v->w, v->cv, v->y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                       p));
        for (int i = 0; i < got && *n < max; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC) {
                ids[*n] = (int)p[i].algo;
                ws[(*n)++] = p[i].memory;
            }
    } else if (kind == K_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];

        DNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            c->dnn, v->w, v->y, v->cv, v->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, p));
        for (int i = 0; i < got && *n < max; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC) {
                ids[*n] = (int)p[i].algo;
                ws[(*n)++] = p[i].memory;
            }
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];

        DNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            c->dnn, v->x, v->y, v->cv, v->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, p));
        for (int i = 0; i < got && *n < max; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC) {
                ids[*n] = (int)p[i].algo;
                ws[(*n)++] = p[i].memory;
            }
    }
    if (*n == 0)
        st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuDNN has no deterministic algorithm for this "
                        "convolution");
out:
    return st;
}

/* The kinds a pass runs: ours forward is the equivalent's forward (transposed: its
 * backward data); ours backward is, for dx, its backward data (transposed: forward), and
 * for dw its backward filter. */
static int pass_kind(bool transposed, bool backward, bool for_w)
{
    if (!backward)
        return transposed ? K_DATA : K_FWD;
    if (for_w)
        return K_FILTER;
    return transposed ? K_FWD : K_DATA;
}

/* The id of cuDNN algorithms a (and f, backward) for op's pass; and back. */
static int32_t encode(bool transposed, bool bwd, int a, int f)
{
    return (transposed ? (bwd ? 80 : 72) : (bwd ? 8 : 0)) + (bwd ? 8 * a + f : a);
}

static bool decode(bool transposed, bool bwd, int32_t id, int *a, int *f)
{
    int32_t base = transposed ? (bwd ? 80 : 72) : (bwd ? 8 : 0), span = bwd ? 64 : 8;

    if (id < base || id >= base + span)
        return false;
    *a = bwd ? (id - base) / 8 : id - base;
    *f = bwd ? (id - base) % 8 : -1;
    return true;
}

int32_t cuda_conv_algos(struct cuda_ctx *c, const struct kop *op, bool bwd, int32_t *ids)
{
    struct conv v;
    int a[8], b[8], na = 0, nb = 0, n = 0;
    size_t wa[8], wb[8];

    if (conv_init(op, &v))
        goto fail;
    if (kind_algos(c, &v, pass_kind(v.transposed, bwd, false), a, wa, 3, &na))
        goto fail;
    if (!bwd) {
        for (int i = 0; i < na; i++)
            ids[n++] = encode(v.transposed, false, a[i], 0);
        conv_fini(&v);
        return n;
    }
    if (kind_algos(c, &v, K_FILTER, b, wb, 3, &nb))
        goto fail;
    /* pairs, the fastest first: by the sum of the two ranks */
    for (int r = 0; r <= 4 && n < KERNELS_MAX_ALGOS; r++)
        for (int i = 0; i < na && n < KERNELS_MAX_ALGOS; i++)
            if (r - i >= 0 && r - i < nb)
                ids[n++] = encode(v.transposed, true, a[i], b[r - i]);
    conv_fini(&v);
    return n;
fail: /* no list: prepare will say why */
    core_clear_error();
    conv_fini(&v);
    ids[0] = encode(op->type == REMAT_OP_CONV_TRANSPOSE2D, bwd, 0, 0);
    return 1;
}

static const char *const fwd_names[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm",
                                        "direct", "fft", "fft_tiling", "winograd",
                                        "winograd_nonfused"};
static const char *const data_names[] = {"0", "1", "fft", "fft_tiling", "winograd",
                                         "winograd_nonfused"};
static const char *const filter_names[] = {"0", "1", "fft", "3", "winograd_nonfused",
                                           "fft_tiling", "6"};

/* The names of the ids (see the file comment). */
const char *cuda_algo_name(int32_t id)
{
    static char names[144][48];
    int a, f;

    if (id < 0 || id >= 144)
        return "?";
    if (!names[id][0]) {
        if (decode(false, false, id, &a, &f))
            snprintf(names[id], sizeof names[0], "%s", fwd_names[a]);
        else if (decode(false, true, id, &a, &f))
            snprintf(names[id], sizeof names[0], "d:%s+f:%s", a < 6 ? data_names[a] : "?",
                     f < 7 ? filter_names[f] : "?");
        else if (decode(true, false, id, &a, &f))
            snprintf(names[id], sizeof names[0], "t:%s", a < 6 ? data_names[a] : "?");
        else if (decode(true, true, id, &a, &f))
            snprintf(names[id], sizeof names[0], "t:%s+f:%s", fwd_names[a],
                     f < 7 ? filter_names[f] : "?");
    }
    return names[id];
}

/* The workspace of kind with cuDNN algorithm a. */
static remat_status kind_ws(struct cuda_ctx *c, const struct conv *v, int kind, int a,
                            size_t *ws)
{
    remat_status st = REMAT_OK;

    if (kind == K_FWD)
        DNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(c->dnn, v->x, v->w, v->cv, v->y,
                                                        (cudnnConvolutionFwdAlgo_t)a, ws));
    else if (kind == K_DATA)
        DNN_TRY(cudnnGetConvolutionBackwardDataWorkspaceSize(
            c->dnn, v->w, v->y, v->cv, v->x, (cudnnConvolutionBwdDataAlgo_t)a, ws));
    else
        DNN_TRY(cudnnGetConvolutionBackwardFilterWorkspaceSize(
            c->dnn, v->x, v->y, v->cv, v->w, (cudnnConvolutionBwdFilterAlgo_t)a, ws));
out:
    return st;
}

const float CU_ONE = 1.0f, CU_ZERO = 0.0f;
#define ONE CU_ONE
#define ZERO CU_ZERO

/* Runs kind with algorithm a: src/dst as the kind reads them. beta 1 accumulates. */
static remat_status run_kind(struct cuda_ctx *c, const struct conv *v, int kind, int a,
                             const void *in0, const void *in1, void *out, const float *beta,
                             void *ws, size_t ws_bytes)
{
    remat_status st = REMAT_OK;

    if (kind == K_FWD) /* in0 = x, in1 = w, out = y */
        DNN_TRY(cudnnConvolutionForward(c->dnn, &ONE, v->x, in0, v->w, in1, v->cv,
                                        (cudnnConvolutionFwdAlgo_t)a, ws, ws_bytes, beta, v->y,
                                        out));
    else if (kind == K_DATA) /* in0 = w, in1 = dy, out = dx */
        DNN_TRY(cudnnConvolutionBackwardData(c->dnn, &ONE, v->w, in0, v->y, in1, v->cv,
                                             (cudnnConvolutionBwdDataAlgo_t)a, ws, ws_bytes,
                                             beta, v->x, out));
    else /* in0 = x, in1 = dy, out = dw */
        DNN_TRY(cudnnConvolutionBackwardFilter(c->dnn, &ONE, v->x, in0, v->y, in1, v->cv,
                                               (cudnnConvolutionBwdFilterAlgo_t)a, ws, ws_bytes,
                                               beta, v->w, out));
out:
    return st;
}

remat_status cuda_scratch(struct cuda_ctx *c, const struct kop *op, size_t need, void **p)
{
    *p = NULL;
    if (!need)
        return REMAT_OK;
    if (op->scratch) {
        if (op->scratch_bytes < need)
            return REMAT_FAIL(REMAT_ERR_ARG, "cuda backend: the step brings %zu bytes of "
                              "scratch where its %s needs %zu", op->scratch_bytes,
                              remat_op_name(op->type), need);
        *p = op->scratch;
        return REMAT_OK;
    }
    if (need > c->own_bytes) {
        if (c->own)
            cudaFree(c->own);
        c->own = NULL;
        c->own_bytes = 0;
        CU_TRY(cudaMalloc((void **)&c->own, need));
        c->own_bytes = need;
    }
    *p = c->own;
    return REMAT_OK;
}

remat_status cuda_conv_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
{
    struct conv v;
    int32_t id = op->algo;
    int a = 0, f = -1;
    int ka = pass_kind(op->type == REMAT_OP_CONV_TRANSPOSE2D, bwd, false);
    size_t wa = 0, wf = 0, need;
    bool want_x = !bwd || op->din[0].data, want_w = bwd && (op->dw.data || op->db.data);
    void *ws;
    remat_status st;

    if (!decode(op->type == REMAT_OP_CONV_TRANSPOSE2D, bwd, id, &a, &f))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuda backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)id);
    if ((st = conv_init(op, &v)))
        return st;
    if ((want_x && (st = kind_ws(c, &v, ka, a, &wa))) ||
        (want_w && op->dw.data && (st = kind_ws(c, &v, K_FILTER, f, &wf))))
        goto out;
    need = wa > wf ? wa : wf;
    c->need = need > c->need ? need : c->need;
    if (c->dry || (st = cuda_scratch(c, op, need, &ws)))
        goto out;
    if (!bwd) {
        if (v.transposed) /* y = the equivalent convolution's dx from dy = x */
            st = run_kind(c, &v, K_DATA, a, op->w.data, op->in[0].data, op->out.data, &ZERO,
                          ws, wa);
        else
            st = run_kind(c, &v, K_FWD, a, op->in[0].data, op->w.data, op->out.data, &ZERO, ws,
                          wa);
        if (!st && op->b.data && cudnnAddTensor(c->dnn, &ONE, v.b, op->b.data, &ONE,
                                                v.transposed ? v.x : v.y, op->out.data) !=
                                     CUDNN_STATUS_SUCCESS)
            st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "CUDA: cudnnAddTensor failed");
        goto out;
    }
    if (op->din[0].data) {
        if (v.transposed) /* dx = the equivalent convolution of dy */
            st = run_kind(c, &v, K_FWD, a, op->dout.data, op->w.data, op->din[0].data, &ONE, ws,
                          wa);
        else
            st = run_kind(c, &v, K_DATA, a, op->w.data, op->dout.data, op->din[0].data, &ONE,
                          ws, wa);
        if (st)
            goto out;
    }
    if (op->dw.data) {
        if (v.transposed) /* the equivalent's input is our dy, its dy our x */
            st = run_kind(c, &v, K_FILTER, f, op->dout.data, op->in[0].data, op->dw.data, &ONE,
                          ws, wf);
        else
            st = run_kind(c, &v, K_FILTER, f, op->in[0].data, op->dout.data, op->dw.data, &ONE,
                          ws, wf);
        if (st)
            goto out;
    }
    if (op->db.data && cudnnConvolutionBackwardBias(c->dnn, &ONE, v.transposed ? v.x : v.y,
                                                    op->dout.data, &ONE, v.b, op->db.data) !=
                           CUDNN_STATUS_SUCCESS)
        st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "CUDA: cudnnConvolutionBackwardBias failed");
out:
    conv_fini(&v);
    return st;
}

/* --------------------------------------------------------------- batch norm */

remat_status cuda_bn_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
{
    cudnnTensorDescriptor_t xd = NULL, pd = NULL;
    const struct ktensor *x = &op->in[0];
    int64_t ch = x->shape[1], n = ktensor_numel(x);
    size_t need = 0;
    const float *mean = op->aux.data, *inv = op->aux.data ? op->aux.data + ch : NULL;
    char *ws = NULL;
    remat_status st = REMAT_OK;

    if (!op->w.data || !op->b.data)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuda backend: batch norm without gamma and "
                          "beta");
    if (bwd) /* a gradient not wanted still needs a place: scratch */
        need = (op->din[0].data ? 0 : (size_t)n * 4) + (op->dw.data ? 0 : (size_t)ch * 4) +
               (op->db.data ? 0 : (size_t)ch * 4);
    c->need = need > c->need ? need : c->need;
    if (c->dry)
        return REMAT_OK;
    if ((st = cuda_scratch(c, op, need, (void **)&ws)))
        return st;
    DNN_TRY(cudnnCreateTensorDescriptor(&xd));
    DNN_TRY(cudnnCreateTensorDescriptor(&pd));
    if ((st = tensor4(xd, x->shape, x->ndim)))
        goto out;
    DNN_TRY(cudnnSetTensor4dDescriptor(pd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)ch, 1, 1));
    if (!bwd) {
        /* a factor of 0 leaves the running statistics as they are (recomputations) */
        DNN_TRY(cudnnBatchNormalizationForwardTraining(
            c->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, xd, x->data, xd, op->out.data, pd,
            op->w.data, op->b.data, op->update_stats ? (double)op->at->momentum : 0.0,
            op->running_mean, op->running_var, (double)op->at->eps, op->aux.data,
            op->aux.data + ch));
    } else {
        float *next = (float *)ws, *dx, *dg, *dbeta;

        dx = op->din[0].data ? op->din[0].data : (next += n, next - n);
        dg = op->dw.data ? op->dw.data : (next += ch, next - ch);
        dbeta = op->db.data ? op->db.data : next;
        /* the parameters' gradients accumulate when both are wanted; one not wanted goes
         * to scratch, where overwriting is as good (cuDNN takes one beta for both) */
        DNN_TRY(cudnnBatchNormalizationBackward(
            c->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, op->din[0].data ? &ONE : &ZERO, &ONE,
            op->dw.data && op->db.data ? &ONE : &ZERO, xd, x->data, xd, op->dout.data, xd, dx,
            pd, op->w.data, dg, dbeta, (double)op->at->eps, mean, inv));
    }
out:
    if (xd)
        cudnnDestroyTensorDescriptor(xd);
    if (pd)
        cudnnDestroyTensorDescriptor(pd);
    return st;
}

/* ------------------------------------------------------------------- linear */

/* Row-major x (N, I), W (O, I), y (N, O) are column-major X (I, N), W (I, O), Y (O, N):
 * Y = W^T X; dX += W dY; dW += X dY^T. */
remat_status cuda_linear_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
{
    int n = (int)op->in[0].shape[0], in = (int)op->w.shape[1], o = (int)op->w.shape[0];
    cu_stream s = (cu_stream)c->stream;

    if (c->dry)
        return REMAT_OK;
    if (!bwd) {
        BLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, o, n, in, &ONE, op->w.data, in,
                             op->in[0].data, in, &ZERO, op->out.data, o));
        if (op->b.data)
            K_TRY(cu_bias_rows(s, op->b.data, op->out.data, n, o));
        return REMAT_OK;
    }
    if (op->din[0].data)
        BLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, o, &ONE, op->w.data, in,
                             op->dout.data, o, &ONE, op->din[0].data, in));
    if (op->dw.data)
        BLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, o, n, &ONE, op->in[0].data,
                             in, op->dout.data, o, &ONE, op->dw.data, in));
    if (op->db.data)
        K_TRY(cu_bias_grad_rows(s, op->dout.data, op->db.data, n, o));
    return REMAT_OK;
}

/* ------------------------------------------------------------------- matmul */

/*
 * One row-major product per batch, P = op(Q) op(R), P (p1, p2), inner the axis summed:
 * Q stored (p1, inner), or with tq (inner, p1); R stored (inner, p2), or with tr (p2,
 * inner); the batches sq, sr, sp floats apart (0: one matrix for all). cuBLAS is
 * column-major, where a row-major X reads as X^T, so it computes P^T = op(R)^T op(Q)^T.
 */
struct rm_gemm {
    bool tq, tr;
    int64_t p1, p2, inner, nb;
    const float *q, *r;
    float *p;
    int64_t sq, sr, sp;
};

static remat_status rm_gemm_run(struct cuda_ctx *c, const struct rm_gemm *g, const float *beta)
{
    int m = (int)g->p2, n = (int)g->p1, k = (int)g->inner;
    int lda = (int)(g->tr ? g->inner : g->p2), ldb = (int)(g->tq ? g->p1 : g->inner);
    cublasOperation_t oa = g->tr ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t ob = g->tq ? CUBLAS_OP_T : CUBLAS_OP_N;

    if (g->p1 > INT_MAX || g->p2 > INT_MAX || g->inner > INT_MAX || g->nb > INT_MAX)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuda backend: a matmul of %lld x %lld x "
                          "%lld (%lld batches) is past cuBLAS's int sizes", (long long)g->p1,
                          (long long)g->p2, (long long)g->inner, (long long)g->nb);
    if (g->nb == 1)
        BLAS_TRY(cublasSgemm(c->blas, oa, ob, m, n, k, &ONE, g->r, lda, g->q, ldb, beta, g->p,
                             m));
    else
        BLAS_TRY(cublasSgemmStridedBatched(c->blas, oa, ob, m, n, k, &ONE, g->r, lda, g->sr,
                                           g->q, ldb, g->sq, beta, g->p, m, g->sp,
                                           (int)g->nb));
    return REMAT_OK;
}


/* y = A B; a shared B under an untransposed A is one product of (nb M, K) by B. */
static remat_status mm_forward(struct cuda_ctx *c, const struct kop *op,
                               const struct kmm *g)
{
    struct rm_gemm r = {.tq = g->ta, .tr = g->tb, .p1 = g->m, .p2 = g->n, .inner = g->k,
                        .nb = g->nb, .q = op->in[0].data, .r = kop_matmul_b(op)->data,
                        .p = op->out.data, .sq = g->sa, .sr = g->sb, .sp = g->sy};

    if (!g->sb && !g->ta) {
        r.p1 *= g->nb;
        r.nb = 1;
    }
    return rm_gemm_run(c, &r, &ZERO);
}

/* dA += dy B^T, or with ta dA^T += B dy^T (folded as the forward when B is shared). */
static remat_status mm_grad_a(struct cuda_ctx *c, const struct kop *op,
                              const struct kmm *g)
{
    struct rm_gemm r = {.tq = false, .tr = !g->tb, .p1 = g->m, .p2 = g->k, .inner = g->n,
                        .nb = g->nb, .q = op->dout.data, .r = kop_matmul_b(op)->data,
                        .p = op->din[0].data, .sq = g->sy, .sr = g->sb, .sp = g->sa};

    if (g->ta) {
        r = (struct rm_gemm){.tq = g->tb, .tr = true, .p1 = g->k, .p2 = g->m, .inner = g->n,
                             .nb = g->nb, .q = kop_matmul_b(op)->data, .r = op->dout.data,
                             .p = op->din[0].data, .sq = g->sb, .sr = g->sy, .sp = g->sa};
    } else if (!g->sb) {
        r.p1 *= g->nb;
        r.nb = 1;
    }
    return rm_gemm_run(c, &r, &ONE);
}

/* dB += A^T dy, or with tb dB^T += dy^T A, per batch. A shared B sums over the batches:
 * under an untransposed A as one product over the nb M rows, else batch by batch onto
 * dB (beta 1, in batch order). */
static remat_status mm_grad_b(struct cuda_ctx *c, const struct kop *op,
                              const struct kmm *g)
{
    struct rm_gemm r = {.tq = !g->ta, .tr = false, .p1 = g->k, .p2 = g->n, .inner = g->m,
                        .nb = g->nb, .q = op->in[0].data, .r = op->dout.data,
                        .p = kop_matmul_db(op)->data, .sq = g->sa, .sr = g->sy, .sp = g->sb};
    remat_status st = REMAT_OK;

    if (g->tb)
        r = (struct rm_gemm){.tq = true, .tr = g->ta, .p1 = g->n, .p2 = g->k, .inner = g->m,
                             .nb = g->nb, .q = op->dout.data, .r = op->in[0].data,
                             .p = kop_matmul_db(op)->data, .sq = g->sy, .sr = g->sa,
                             .sp = g->sb};
    if (g->sb)
        return rm_gemm_run(c, &r, &ONE);
    if (!g->ta) {
        r.inner *= g->nb;
        r.nb = 1;
        return rm_gemm_run(c, &r, &ONE);
    }
    for (int64_t t = 0; t < g->nb && !st; t++) {
        struct rm_gemm one = r;

        one.nb = 1;
        one.q += t * r.sq;
        one.r += t * r.sr;
        st = rm_gemm_run(c, &one, &ONE);
    }
    return st;
}

/* Row-major matrices of ref/matmul.c through cuBLAS: forward y = A B, backward dA and
 * dB accumulated with beta = 1 (B a data input or the op's parameter, kernels.h). */
remat_status cuda_matmul_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
{
    struct kmm g = kop_matmul_geom(op);
    remat_status st = REMAT_OK;

    if (c->dry || g.nb == 0 || g.sy == 0)
        return REMAT_OK;
    if (!bwd)
        return mm_forward(c, op, &g);
    if (!op->dout.data)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuda backend: a matmul backward needs its "
                          "output's gradient (it is no loss)");
    if (op->din[0].data && g.k)
        st = mm_grad_a(c, op, &g);
    if (!st && kop_matmul_db(op)->data && g.k)
        st = mm_grad_b(c, op, &g);
    return st;
}
