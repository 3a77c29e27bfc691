/*
 * backend_cuda.c - the cuda backend (make CUDA=1): device memory, cuDNN 9 and cuBLAS,
 * and the own kernels of kernels/cuda/cuda_kernels.cu.
 *
 * Memory: the arena is one cudaMalloc (the executor never reads it: the loss and the
 * forward hook go through read); the resident block (parameters, gradients, momentum,
 * inputs, labels, running statistics) is managed memory, written by the host (initial
 * values, batches) and updated by the kernels (SGD runs on the device); the host tier is
 * pinned (cudaHostAlloc; a --host-file mapping is registered). Every kernel runs on one
 * compute stream; the host tier's copies run on a second stream, ordered by events: a
 * copy out starts after the kernels queued before it, and WAIT makes the compute stream
 * wait for the copy's event (the host does not block).
 *
 * Kernels: convolution and transposed convolution on cuDNN's legacy convolution API,
 * batch norm on cuDNN's (mean and inverse std saved in aux, as kernels.h asks), linear on
 * cuBLAS SGEMM; activations, dropout (the same counter-based draws as the other
 * backends), add, mul, concat, crop, pad, pooling, global average pooling and the losses
 * on our kernels. Upsampling, softmax and transpose have no kernel here yet
 * (REMAT_ERR_UNSUPPORTED names them).
 *
 * Convolution algorithms: cuDNN's own heuristics list them fastest first
 * (cudnnGetConvolution*Algorithm_v7) with their workspace; only deterministic ones are
 * offered, so that every plan gives the same bits. Ids: a convolution's forward is its
 * cuDNN forward algorithm (0-7), its backward a pair (data, filter), 8 + 8 data + filter
 * (the two run one after the other in the same scratch); a transposed convolution's
 * forward is a backward-data algorithm, 72 + data, its backward a pair (forward,
 * filter), 80 + 8 forward + filter. The plan chooses among them by free memory as
 * for the cpu backend (plan/algos.c). Gradients accumulate through cuDNN's beta = 1.
 *
 * Errors: every CUDA, cuDNN and cuBLAS call is checked; a failure is
 * REMAT_ERR_UNSUPPORTED with the call and the library's message.
 */
#include "exec/backend.h"
#include "kernels/cuda/cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TICKETS 1024 /* a ring of copy events: waiting on a reused slot waits for a
                            later copy on the same in-order stream, so it stays correct */

struct cuda_ctx {
    int device;
    cudaStream_t stream, copy;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    cudaEvent_t before[MAX_TICKETS], done[MAX_TICKETS], begin[MAX_TICKETS];
    uint64_t issued, timed;           /* copies started; those whose time is summed */
    double copy_seconds;
    char *own;                        /* scratch for kops that bring none */
    size_t own_bytes;
    size_t need;                      /* prepare: the scratch of the call */
    bool dry;
};

static remat_status cu_fail(const char *call, const char *msg, const char *file, int line)
{
    return core_fail(REMAT_ERR_UNSUPPORTED, file, line, "CUDA: %s: %s", call, msg);
}

#define CU_TRY(call)                                                                     \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess)                                                           \
            return cu_fail(#call, cudaGetErrorString(e_), __FILE__, __LINE__);           \
    } while (0)
#define DNN_TRY(call)                                                                    \
    do {                                                                                 \
        cudnnStatus_t e_ = (call);                                                       \
        if (e_ != CUDNN_STATUS_SUCCESS) {                                                \
            st = cu_fail(#call, cudnnGetErrorString(e_), __FILE__, __LINE__);            \
            goto out;                                                                    \
        }                                                                                \
    } while (0)
#define BLAS_TRY(call)                                                                   \
    do {                                                                                 \
        cublasStatus_t e_ = (call);                                                      \
        if (e_ != CUBLAS_STATUS_SUCCESS)                                                 \
            return cu_fail(#call, cublasGetStatusString(e_), __FILE__, __LINE__);        \
    } while (0)
/* our kernels' launchers return cudaGetLastError() */
#define K_TRY(call) CU_TRY((cudaError_t)(call))

/* ------------------------------------------------------------------ context */

static void ctx_free(struct cuda_ctx *c)
{
    if (!c)
        return;
    for (int i = 0; i < MAX_TICKETS; i++) {
        if (c->before[i])
            cudaEventDestroy(c->before[i]);
        if (c->begin[i])
            cudaEventDestroy(c->begin[i]);
        if (c->done[i])
            cudaEventDestroy(c->done[i]);
    }
    if (c->own)
        cudaFree(c->own);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->dnn)
        cudnnDestroy(c->dnn);
    if (c->copy)
        cudaStreamDestroy(c->copy);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

static remat_status ctx_init(struct cuda_ctx *c)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend found no CUDA device");
    CU_TRY(cudaSetDevice(c->device));
    CU_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CU_TRY(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    if (cudnnCreate(&c->dnn) != CUDNN_STATUS_SUCCESS)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "CUDA: cudnnCreate failed");
    if (cudnnSetStream(c->dnn, c->stream) != CUDNN_STATUS_SUCCESS)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "CUDA: cudnnSetStream failed");
    BLAS_TRY(cublasCreate(&c->blas));
    BLAS_TRY(cublasSetStream(c->blas, c->stream));
    BLAS_TRY(cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH)); /* float32, no TF32 */
    for (int i = 0; i < MAX_TICKETS; i++) {
        CU_TRY(cudaEventCreateWithFlags(&c->before[i], cudaEventDisableTiming));
        CU_TRY(cudaEventCreate(&c->begin[i]));
        CU_TRY(cudaEventCreate(&c->done[i]));
    }
    return REMAT_OK;
}

static remat_status be_create(const remat_train_opts *o, void **ctx)
{
    struct cuda_ctx *c = calloc(1, sizeof *c);
    remat_status st;

    (void)o;
    *ctx = NULL;
    if (!c)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a backend");
    if ((st = ctx_init(c))) {
        ctx_free(c);
        return st;
    }
    *ctx = c;
    return REMAT_OK;
}

static void be_destroy(void *ctx)
{
    struct cuda_ctx *c = ctx;

    if (c)
        cudaStreamSynchronize(c->stream);
    ctx_free(c);
}

/* ------------------------------------------------------------------- memory */

static void *be_alloc(void *ctx, size_t bytes)
{
    void *p = NULL;

    (void)ctx;
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess)
        return NULL;
    if (cudaMemset(p, 0, bytes ? bytes : 256) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void be_release(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    cudaFree(p);
}

static void *be_alloc_shared(void *ctx, size_t bytes)
{
    void *p = NULL;

    (void)ctx;
    if (cudaMallocManaged(&p, bytes ? bytes : 256, cudaMemAttachGlobal) != cudaSuccess)
        return NULL;
    memset(p, 0, bytes ? bytes : 256);
    return p;
}

static void *be_alloc_pinned(void *ctx, size_t bytes)
{
    void *p = NULL;

    (void)ctx;
    return cudaHostAlloc(&p, bytes ? bytes : 256, cudaHostAllocDefault) == cudaSuccess ? p
                                                                                    : NULL;
}

static void be_release_pinned(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    cudaFreeHost(p);
}

static void be_zero(void *ctx, void *p, size_t bytes)
{
    cudaMemsetAsync(p, 0, bytes, ((struct cuda_ctx *)ctx)->stream);
}

static remat_status be_read(void *ctx, void *dst, const void *src, size_t n)
{
    struct cuda_ctx *c = ctx;

    CU_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->stream));
    CU_TRY(cudaStreamSynchronize(c->stream));
    return REMAT_OK;
}

static remat_status be_sync(void *ctx)
{
    CU_TRY(cudaStreamSynchronize(((struct cuda_ctx *)ctx)->stream));
    return REMAT_OK;
}

static remat_status be_sgd(void *ctx, float *w, const float *g, float *m, size_t n, float lr,
                           float mu, float wd)
{
    K_TRY(cu_sgd((cu_stream)((struct cuda_ctx *)ctx)->stream, w, g, m, (int64_t)n, lr, mu, wd));
    return REMAT_OK;
}

/* The host tier: the copy stream starts after the kernels queued so far (an event),
 * and each copy's end is the ticket's event. */
static uint64_t be_copy_start(void *ctx, void *dst, const void *src, size_t n)
{
    struct cuda_ctx *c = ctx;
    uint64_t t = c->issued++;
    int k = (int)(t % MAX_TICKETS);

    if (t >= c->timed + MAX_TICKETS) { /* the ring is full: sum the oldest's time */
        float ms = 0;

        cudaEventSynchronize(c->done[c->timed % MAX_TICKETS]);
        cudaEventElapsedTime(&ms, c->begin[c->timed % MAX_TICKETS],
                             c->done[c->timed % MAX_TICKETS]);
        c->copy_seconds += ms / 1e3;
        c->timed++;
    }
    cudaEventRecord(c->before[k], c->stream);
    cudaStreamWaitEvent(c->copy, c->before[k], 0);
    cudaEventRecord(c->begin[k], c->copy);
    cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->copy);
    cudaEventRecord(c->done[k], c->copy);
    return t;
}

/* WAIT: the kernels queued from now on wait for the copy (and every earlier one). */
static void be_copy_wait(void *ctx, uint64_t ticket)
{
    struct cuda_ctx *c = ctx;

    cudaStreamWaitEvent(c->stream, c->done[ticket % MAX_TICKETS], 0);
}

static double be_copy_seconds(void *ctx)
{
    struct cuda_ctx *c = ctx;

    for (; c->timed < c->issued; c->timed++) {
        float ms = 0;
        int k = (int)(c->timed % MAX_TICKETS);

        cudaEventSynchronize(c->done[k]);
        cudaEventElapsedTime(&ms, c->begin[k], c->done[k]);
        c->copy_seconds += ms / 1e3;
    }
    return c->copy_seconds;
}

static size_t be_workspace(void *ctx)
{
    return ((const struct cuda_ctx *)ctx)->own_bytes;
}

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

static int32_t conv_algos(struct cuda_ctx *c, const struct kop *op, bool bwd, int32_t *ids)
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
    for (int r = 0; r <= 4 && n < BACKEND_MAX_ALGOS; r++)
        for (int i = 0; i < na && n < BACKEND_MAX_ALGOS; i++)
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
static const char *be_algo_name(int32_t id)
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

static const float ONE = 1.0f, ZERO = 0.0f;

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

/* The scratch for this call: the kop's, or the context's own (grown). */
static remat_status scratch(struct cuda_ctx *c, const struct kop *op, size_t need, void **p)
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

static remat_status conv_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
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
    if (c->dry || (st = scratch(c, op, need, &ws)))
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

static remat_status bn_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
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
    if ((st = scratch(c, op, need, (void **)&ws)))
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
static remat_status linear_run(struct cuda_ctx *c, const struct kop *op, bool bwd)
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

/* -------------------------------------------------------------- own kernels */

static struct cu_pool pool_geom(const struct kop *op)
{
    const remat_attrs *at = op->at;
    struct cu_pool g = {
        .planes = op->in[0].shape[0] * op->in[0].shape[1], .h = op->in[0].shape[2],
        .w = op->in[0].shape[3], .ho = op->out.shape[2], .wo = op->out.shape[3],
        .kh = at->kh, .kw = at->kw, .sh = at->sh > 0 ? at->sh : at->kh,
        .sw = at->sw > 0 ? at->sw : at->kw, .ph = at->ph, .pw = at->pw,
        .include_pad = at->count_include_pad,
    };
    return g;
}

/* as ref/act.c: 0 means 0.5 */
static float drop_p(const remat_attrs *at)
{
    return at->p > 0 ? at->p : 0.5f;
}

/* crop's window origin, as ref/elem.c (a negative offset: centred) */
static void crop_origin(const struct kop *op, int64_t *oh, int64_t *ow)
{
    const struct ktensor *x = &op->in[0], *y = &op->out;

    *oh = op->at->offset_h >= 0 ? op->at->offset_h : (x->shape[2] - y->shape[2]) / 2;
    *ow = op->at->offset_w >= 0 ? op->at->offset_w : (x->shape[3] - y->shape[3]) / 2;
}

static remat_status own_fwd(struct cuda_ctx *c, const struct kop *op)
{
    cu_stream s = (cu_stream)c->stream;
    const remat_attrs *at = op->at;
    int64_t n = ktensor_numel(&op->out);

    switch (op->type) {
    case REMAT_OP_RELU:
        K_TRY(cu_act_fwd(s, 0, 0, 0, op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_CLIP:
        K_TRY(cu_act_fwd(s, 1, at->clip_min, at->clip_max, op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_LEAKY_RELU:
        K_TRY(cu_act_fwd(s, 2, at->alpha, 0, op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_SIGMOID:
        K_TRY(cu_act_fwd(s, 3, 0, 0, op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_DROPOUT:
        K_TRY(cu_dropout_fwd(s, op->in[0].data, op->out.data, n, drop_p(at), op->key));
        return REMAT_OK;
    case REMAT_OP_ADD:
        K_TRY(cu_add2(s, op->in[0].data, op->n_in > 1 ? op->in[1].data : NULL, op->out.data, n));
        for (int32_t i = 2; i < op->n_in; i++)
            K_TRY(cu_acc(s, op->in[i].data, NULL, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_MUL:
        K_TRY(cu_mul2(s, op->in[0].data, op->in[1].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_CONCAT: {
        int64_t hw = n / (op->out.shape[0] * op->out.shape[1]), c0 = 0;

        for (int32_t i = 0; i < op->n_in; i++) {
            int64_t ci = op->in[i].shape[1];

            K_TRY(cu_copy2d(s, op->in[i].data, ci * hw, op->out.data + c0 * hw,
                            op->out.shape[1] * hw, op->out.shape[0], ci * hw, 0));
            c0 += ci;
        }
        return REMAT_OK;
    }
    case REMAT_OP_CROP: {
        int64_t oh, ow;

        crop_origin(op, &oh, &ow);
        K_TRY(cu_window(s, op->in[0].data, op->in[0].shape[2], op->in[0].shape[3], op->out.data,
                        op->out.shape[2], op->out.shape[3],
                        op->out.shape[0] * op->out.shape[1], oh, ow, 0));
        return REMAT_OK;
    }
    case REMAT_OP_PAD:
        K_TRY(cu_window(s, op->in[0].data, op->in[0].shape[2], op->in[0].shape[3], op->out.data,
                        op->out.shape[2], op->out.shape[3], op->out.shape[0] * op->out.shape[1],
                        -(int64_t)at->pad_t, -(int64_t)at->pad_l, 0));
        return REMAT_OK;
    case REMAT_OP_MAX_POOL:
        K_TRY(cu_maxpool_fwd(s, pool_geom(op), op->in[0].data, op->out.data,
                             (int32_t *)op->aux.data));
        return REMAT_OK;
    case REMAT_OP_AVG_POOL:
        K_TRY(cu_avgpool_fwd(s, pool_geom(op), op->in[0].data, op->out.data));
        return REMAT_OK;
    case REMAT_OP_GLOBAL_AVG_POOL:
        K_TRY(cu_gap_fwd(s, op->in[0].data, op->out.data, op->in[0].shape[0] * op->in[0].shape[1],
                         op->in[0].shape[2] * op->in[0].shape[3]));
        return REMAT_OK;
    case REMAT_OP_SOFTMAX_CE: {
        int64_t rows = op->in[0].shape[0], k = op->in[0].shape[1];
        char *ws = op->scratch;
        int32_t bad = 0;

        K_TRY(cudaMemsetAsync(ws, 0, 64, c->stream));
        K_TRY(cu_softmax_ce_fwd(s, op->in[0].data, (const int32_t *)op->in[1].data, op->aux.data,
                                op->out.data, (double *)(ws + 64), (int32_t *)ws, rows, k));
        CU_TRY(cudaMemcpyAsync(&bad, ws, sizeof bad, cudaMemcpyDeviceToHost, c->stream));
        CU_TRY(cudaStreamSynchronize(c->stream));
        if (bad)
            return REMAT_FAIL(REMAT_ERR_ARG, "softmax_ce: the label of sample %d is not a class "
                              "in [0, %lld)", bad - 1, (long long)k);
        return REMAT_OK;
    }
    case REMAT_OP_SUM_LOSSES: {
        struct cu_ptrs p;

        if (op->n_in > CU_MAX_SUM)
            break;
        for (int32_t i = 0; i < op->n_in; i++)
            p.p[i] = op->in[i].data;
        K_TRY(cu_sum_scalars(s, p, op->n_in, op->out.data));
        return REMAT_OK;
    }
    default:
        break;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend has no %s kernel yet",
                      remat_op_name(op->type));
}

static remat_status own_bwd(struct cuda_ctx *c, const struct kop *op)
{
    cu_stream s = (cu_stream)c->stream;
    const remat_attrs *at = op->at;
    const float *dy = op->dout.data;
    float *dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);

    switch (op->type) {
    case REMAT_OP_RELU:
    case REMAT_OP_CLIP:
    case REMAT_OP_LEAKY_RELU:
    case REMAT_OP_SIGMOID: {
        int what = op->type == REMAT_OP_RELU ? 0 : op->type == REMAT_OP_CLIP ? 1
                   : op->type == REMAT_OP_LEAKY_RELU ? 2 : 3;

        if (dx)
            K_TRY(cu_act_bwd(s, what, what == 2 ? at->alpha : at->clip_min, at->clip_max, op->out.data, dy,
                             dx, n));
        return REMAT_OK;
    }
    case REMAT_OP_DROPOUT:
        if (dx)
            K_TRY(cu_dropout_bwd(s, dy, dx, n, drop_p(at), op->key));
        return REMAT_OK;
    case REMAT_OP_ADD:
        for (int32_t i = 0; i < op->n_in; i++)
            if (op->din[i].data)
                K_TRY(cu_acc(s, dy, NULL, op->din[i].data, n));
        return REMAT_OK;
    case REMAT_OP_MUL:
        for (int32_t i = 0; i < 2; i++)
            if (op->din[i].data)
                K_TRY(cu_acc(s, dy, op->in[1 - i].data, op->din[i].data, n));
        return REMAT_OK;
    case REMAT_OP_CONCAT: {
        int64_t hw = n / (op->out.shape[0] * op->out.shape[1]), c0 = 0;

        if (!dy)
            break;
        for (int32_t i = 0; i < op->n_in; i++) {
            int64_t ci = op->in[i].shape[1];

            if (op->din[i].data)
                K_TRY(cu_copy2d(s, dy + c0 * hw, op->out.shape[1] * hw, op->din[i].data, ci * hw,
                                op->out.shape[0], ci * hw, 1));
            c0 += ci;
        }
        return REMAT_OK;
    }
    case REMAT_OP_CROP: { /* dx[oh + h, ow + w] += dy[h, w] */
        int64_t oh, ow;

        if (!dx || !dy)
            break;
        crop_origin(op, &oh, &ow);
        K_TRY(cu_window(s, dy, op->out.shape[2], op->out.shape[3], dx, op->in[0].shape[2],
                        op->in[0].shape[3], op->out.shape[0] * op->out.shape[1], -oh, -ow, 1));
        return REMAT_OK;
    }
    case REMAT_OP_PAD: /* dx += dy's interior */
        if (!dx || !dy)
            break;
        K_TRY(cu_window(s, dy, op->out.shape[2], op->out.shape[3], dx, op->in[0].shape[2],
                        op->in[0].shape[3], op->out.shape[0] * op->out.shape[1], at->pad_t,
                        at->pad_l, 1));
        return REMAT_OK;
    case REMAT_OP_MAX_POOL:
        if (dx)
            K_TRY(cu_maxpool_bwd(s, pool_geom(op), (const int32_t *)op->aux.data, dy, dx));
        return REMAT_OK;
    case REMAT_OP_AVG_POOL:
        if (dx)
            K_TRY(cu_avgpool_bwd(s, pool_geom(op), dy, dx));
        return REMAT_OK;
    case REMAT_OP_GLOBAL_AVG_POOL:
        if (dx)
            K_TRY(cu_gap_bwd(s, dy, dx, op->din[0].shape[0] * op->din[0].shape[1],
                             op->din[0].shape[2] * op->din[0].shape[3]));
        return REMAT_OK;
    case REMAT_OP_SOFTMAX_CE:
        if (dx)
            K_TRY(cu_softmax_ce_bwd(s, op->aux.data, (const int32_t *)op->in[1].data, dy, dx,
                                    op->aux.shape[0], op->aux.shape[1]));
        return REMAT_OK;
    case REMAT_OP_SUM_LOSSES:
        for (int32_t i = 0; i < op->n_in; i++)
            if (op->din[i].data)
                K_TRY(cu_acc(s, dy, NULL, op->din[i].data, 1));
        return REMAT_OK;
    default:
        break;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend has no %s backward kernel yet",
                      remat_op_name(op->type));
}

/* The scratch our own kernels take: softmax_ce's forward, a flag and a double per row. */
static size_t own_need(const struct kop *op, bool bwd)
{
    if (op->type == REMAT_OP_SOFTMAX_CE && !bwd)
        return 64 + 8 * (size_t)op->in[0].shape[0];
    return 0;
}

/* ----------------------------------------------------------------- dispatch */

static bool is_conv(const struct kop *op)
{
    return op->type == REMAT_OP_CONV2D || op->type == REMAT_OP_CONV_TRANSPOSE2D;
}

static remat_status run(struct cuda_ctx *c, const struct kop *op, bool bwd)
{
    size_t need;

    if (is_conv(op))
        return conv_run(c, op, bwd);
    if (op->algo != 0)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuda backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)op->algo);
    if (op->type == REMAT_OP_BATCH_NORM)
        return bn_run(c, op, bwd);
    if (op->type == REMAT_OP_LINEAR)
        return linear_run(c, op, bwd);
    need = own_need(op, bwd);
    c->need = need > c->need ? need : c->need;
    if (c->dry) { /* the kernel exists? */
        static const remat_op have[] = {
            REMAT_OP_RELU, REMAT_OP_CLIP, REMAT_OP_LEAKY_RELU, REMAT_OP_SIGMOID,
            REMAT_OP_DROPOUT, REMAT_OP_ADD, REMAT_OP_MUL, REMAT_OP_CONCAT, REMAT_OP_CROP,
            REMAT_OP_PAD, REMAT_OP_MAX_POOL,
            REMAT_OP_AVG_POOL, REMAT_OP_GLOBAL_AVG_POOL, REMAT_OP_SOFTMAX_CE,
            REMAT_OP_SUM_LOSSES, REMAT_OP_FLATTEN, REMAT_OP_RESHAPE,
        };

        for (size_t i = 0; i < sizeof have / sizeof have[0]; i++)
            if (have[i] == op->type)
                return REMAT_OK;
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend has no %s kernel yet",
                          remat_op_name(op->type));
    }
    if (need && (!op->scratch || op->scratch_bytes < need))
        return REMAT_FAIL(REMAT_ERR_ARG, "cuda backend: %s needs %zu bytes of scratch from its "
                          "step", remat_op_name(op->type), need);
    return bwd ? own_bwd(c, op) : own_fwd(c, op);
}

static remat_status be_forward(void *ctx, const struct kop *op)
{
    return run(ctx, op, false);
}

static remat_status be_backward(void *ctx, const struct kop *op)
{
    return run(ctx, op, true);
}

static int32_t be_algos(void *ctx, const struct kop *op, bool backward, int32_t *ids)
{
    if (!is_conv(op)) {
        ids[0] = 0;
        return 1;
    }
    return conv_algos(ctx, op, backward, ids);
}

static remat_status be_prepare(void *ctx, const struct kop *op, bool backward, size_t *need)
{
    struct cuda_ctx *c = ctx;
    remat_status st;

    c->dry = true;
    c->need = 0;
    st = run(c, op, backward);
    c->dry = false;
    *need = c->need;
    return st;
}

static const struct backend_ops cuda_ops = {
    .name = "cuda",
    .create = be_create,
    .destroy = be_destroy,
    .alloc = be_alloc,
    .release = be_release,
    .forward = be_forward,
    .backward = be_backward,
    .algos = be_algos,
    .algo_name = be_algo_name,
    .prepare = be_prepare,
    .workspace = be_workspace,
    .zero = be_zero,
    .copy_start = be_copy_start,
    .copy_wait = be_copy_wait,
    .copy_seconds = be_copy_seconds,
    .alloc_shared = be_alloc_shared,
    .release_shared = be_release,
    .alloc_pinned = be_alloc_pinned,
    .release_pinned = be_release_pinned,
    .read = be_read,
    .sgd = be_sgd,
    .sync = be_sync,
};

const struct backend_ops *backend_cuda(void)
{
    return &cuda_ops;
}
