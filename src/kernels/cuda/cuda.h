/*
 * cuda.h - the cuda backend's context and what its parts share (exec/backend_cuda.c:
 * context, memory, copies, dispatch; kernels/cuda/dnn.c: cuDNN and cuBLAS ops;
 * kernels/cuda/own.c: the ops on our kernels, cuda_kernels.cu).
 */
#ifndef REMAT_KERNELS_CUDA_H
#define REMAT_KERNELS_CUDA_H

#include "kernels/kernels.h"
#include "kernels/cuda/cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

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

/* REMAT_ERR_UNSUPPORTED with "CUDA: <call>: <message>" at file:line. */
remat_status cu_fail(const char *call, const char *msg, const char *file, int line);

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

extern const float CU_ONE, CU_ZERO;

/* The scratch for this call: the kop's, or the context's own (grown). */
remat_status cuda_scratch(struct cuda_ctx *c, const struct kop *op, size_t need, void **p);

/* dnn.c: convolutions (algorithms, their names, a run or, with c->dry, the scratch in
 * c->need), batch norm, linear. */
int32_t cuda_conv_algos(struct cuda_ctx *c, const struct kop *op, bool bwd, int32_t *ids);
const char *cuda_algo_name(int32_t id);
remat_status cuda_conv_run(struct cuda_ctx *c, const struct kop *op, bool bwd);
remat_status cuda_bn_run(struct cuda_ctx *c, const struct kop *op, bool bwd);
remat_status cuda_linear_run(struct cuda_ctx *c, const struct kop *op, bool bwd);
remat_status cuda_matmul_run(struct cuda_ctx *c, const struct kop *op, bool bwd);

/* own.c: the other ops on our kernels; the scratch they take; whether one exists. */
remat_status cuda_own_fwd(struct cuda_ctx *c, const struct kop *op);
remat_status cuda_own_bwd(struct cuda_ctx *c, const struct kop *op);
size_t cuda_own_need(const struct kop *op, bool bwd);
bool cuda_own_has(remat_op type);

#endif
