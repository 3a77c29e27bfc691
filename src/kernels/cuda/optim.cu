/*
 * optim.cu - the cuda backend's AdamW kernel (optim.h): one thread per element, grid-
 * stride loop. Every operation is an explicitly rounded intrinsic (__fmul_rn,
 * __fadd_rn, __fdiv_rn, __fsqrt_rn), so that nvcc fuses nothing and the result is the
 * host's adamw_update (exec/params.c) bit for bit.
 */
#include "kernels/cuda/optim.h"
#include "kernels/cuda/grid.cuh"

#include <cuda_runtime.h>

__global__ static void k_adamw(float *w, const float *g, float *m, float *v, int64_t n,
                               float decay, float beta1, float c1, float beta2, float c2,
                               float step_size, float bc2_sqrt, float eps)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float x = __fmul_rn(w[i], decay), gi = g[i], mi, vi, d;

        mi = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(c1, gi));
        vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(c2, gi), gi));
        d = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        m[i] = mi;
        v[i] = vi;
        w[i] = __fsub_rn(x, __fdiv_rn(__fmul_rn(step_size, mi), d));
    }
}

extern "C" int cu_adamw(cu_stream s, float *w, const float *g, float *m, float *v, int64_t n,
                        float decay, float beta1, float c1, float beta2, float c2,
                        float step_size, float bc2_sqrt, float eps)
{
    k_adamw<<<blocks(n), THREADS, 0, s>>>(w, g, m, v, n, decay, beta1, c1, beta2, c2,
                                          step_size, bc2_sqrt, eps);
    return (int)cudaGetLastError();
}
