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
 * Kernels (kernels/cuda/dnn.c and own.c, dispatched here): convolution and transposed
 * convolution on cuDNN's legacy convolution API,
 * batch norm on cuDNN's (mean and inverse std saved in aux, as kernels.h asks), linear and
 * matmul on cuBLAS SGEMM; activations, dropout (the same counter-based draws as the other
 * backends), add, mul, concat, crop, pad, pooling, global average pooling, the losses,
 * layer norm, GELU, softmax_last, embedding and token_ce on our kernels. Upsampling,
 * softmax and transpose have no kernel here yet (REMAT_ERR_UNSUPPORTED names them).
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
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

remat_status cu_fail(const char *call, const char *msg, const char *file, int line)
{
    return core_fail(REMAT_ERR_UNSUPPORTED, file, line, "CUDA: %s: %s", call, msg);
}

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

/* A move inside the arena on the kernels' stream: overlapping regions are copied in
 * pieces no longer than the distance moved, in the order that reads each piece before
 * it is overwritten (cudaMemcpy leaves overlapping copies undefined). */
static void be_move(void *ctx, void *dst, const void *src, size_t bytes)
{
    cudaStream_t st = ((struct cuda_ctx *)ctx)->stream;
    char *d = dst;
    const char *s = src;
    size_t gap = d < s ? (size_t)(s - d) : (size_t)(d - s);

    if (!bytes || d == s)
        return;
    if (gap >= bytes) {
        cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, st);
        return;
    }
    for (size_t done = 0; done < bytes; done += gap) {
        size_t n = bytes - done < gap ? bytes - done : gap;
        size_t at = d < s ? done : bytes - done - n; /* down: from the bottom; up: the top */

        cudaMemcpyAsync(d + at, s + at, n, cudaMemcpyDeviceToDevice, st);
    }
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

static remat_status be_adamw(void *ctx, float *w, const float *g, float *m, float *v,
                             size_t n, const struct adamw_coef *c)
{
    K_TRY(cu_adamw((cu_stream)((struct cuda_ctx *)ctx)->stream, w, g, m, v, (int64_t)n,
                   c->decay, c->beta1, c->c1, c->beta2, c->c2, c->step_size, c->bc2_sqrt,
                   c->eps));
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

/* ----------------------------------------------------------------- dispatch */

static bool is_conv(const struct kop *op)
{
    return op->type == REMAT_OP_CONV2D || op->type == REMAT_OP_CONV_TRANSPOSE2D;
}

static remat_status run(struct cuda_ctx *c, const struct kop *op, bool bwd)
{
    size_t need;

    if (is_conv(op))
        return cuda_conv_run(c, op, bwd);
    if (op->algo != 0)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cuda backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)op->algo);
    if (op->type == REMAT_OP_BATCH_NORM)
        return cuda_bn_run(c, op, bwd);
    if (op->type == REMAT_OP_LINEAR)
        return cuda_linear_run(c, op, bwd);
    if (op->type == REMAT_OP_MATMUL)
        return cuda_matmul_run(c, op, bwd);
    need = cuda_own_need(op, bwd);
    c->need = need > c->need ? need : c->need;
    if (c->dry) /* the kernel exists? */
        return cuda_own_has(op->type) ? REMAT_OK
                                      : REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend has "
                                                   "no %s kernel yet", remat_op_name(op->type));
    if (need && (!op->scratch || op->scratch_bytes < need))
        return REMAT_FAIL(REMAT_ERR_ARG, "cuda backend: %s needs %zu bytes of scratch from its "
                          "step", remat_op_name(op->type), need);
    return bwd ? cuda_own_bwd(c, op) : cuda_own_fwd(c, op);
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
    return cuda_conv_algos(ctx, op, backward, ids);
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
    .algo_name = cuda_algo_name,
    .prepare = be_prepare,
    .workspace = be_workspace,
    .zero = be_zero,
    .move = be_move,
    .copy_start = be_copy_start,
    .copy_wait = be_copy_wait,
    .copy_seconds = be_copy_seconds,
    .alloc_shared = be_alloc_shared,
    .release_shared = be_release,
    .alloc_pinned = be_alloc_pinned,
    .release_pinned = be_release_pinned,
    .read = be_read,
    .sgd = be_sgd,
    .adamw = be_adamw,
    .sync = be_sync,
};

const struct backend_ops *backend_cuda(void)
{
    return &cuda_ops;
}
