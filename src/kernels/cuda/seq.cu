/*
 * seq.cu - the cuda backend's kernels for the sequence-model ops (cuda_kernels.h): layer
 * normalization over the last axis and GELU, under the contract of src/kernels/ref/seq.c
 * (what each pass reads and writes, aux = (mean[R], invstd[R]) as floats, gradients
 * accumulated with +=, a NULL dy read as 1, NULL gamma and beta read as 1 and 0).
 *
 * Layer norm: one block per row (blocks stride over the rows when there are more rows
 * than blocks). Each thread sums its strided share of the row in double, in index order;
 * the block then adds the threads' partial sums in a fixed tree (halving strides in
 * shared memory). The block size depends on D alone, so two runs on the same shape add
 * the same numbers in the same order and give the same bits. dgamma and dbeta come from
 * a second kernel: per column, LN_LANES lanes each sum every LN_LANES-th row in order,
 * and the lanes are added in lane order. No atomics anywhere.
 *
 * GELU: one thread per element, grid-stride, in double as the reference (and the
 * sigmoid of cuda_kernels.cu) computes it.
 */
#include "kernels/cuda/cuda_kernels.h"

#include <cuda_runtime.h>
#include <math.h>

#define THREADS 256   /* elementwise kernels */
#define LN_MAX 256    /* the most threads per row (a power of two) */
#define LN_COLS 32    /* parameter gradients: columns per block */
#define LN_LANES 8    /* parameter gradients: row lanes per column */
#define MAX_GRID (65535 * 8)

/* Blocks for n items at per items a block, at least 1 and at most MAX_GRID. */
static unsigned grid_for(int64_t n, int64_t per)
{
    int64_t b = (n + per - 1) / per;

    return (unsigned)(b < 1 ? 1 : b > MAX_GRID ? MAX_GRID : b);
}

/* Threads per row for rows of d: the least power of two >= d, from 32 to LN_MAX. */
static unsigned ln_threads(int64_t d)
{
    unsigned t = 32;

    while (t < LN_MAX && t < d)
        t *= 2;
    return t;
}

/* ------------------------------------------------------------------ layer norm */

/* The sum of every thread's v, added in a fixed tree order; every thread gets it.
 * sh holds blockDim.x doubles; blockDim.x is a power of two. */
__device__ static double block_sum(double v, double *sh)
{
    unsigned t = threadIdx.x;

    sh[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (t < s)
            sh[t] += sh[t + s];
        __syncthreads();
    }
    v = sh[0];
    __syncthreads(); /* sh is free for the next call */
    return v;
}

/* g = dy * gamma at (r, k), NULLs read as 1 */
__device__ static double ln_g(const float *dy, const float *gamma, int64_t r, int64_t d,
                              int64_t k)
{
    return (dy ? dy[r * d + k] : 1.0) * (gamma ? gamma[k] : 1.0);
}

/* Per row: mean and biased variance in double, aux = (mean, invstd) as floats, and y
 * from those stored floats (so the backward recomputes the same x_hat). */
__global__ static void k_ln_fwd(const float *x, const float *gamma, const float *beta,
                                float *y, float *mean, float *invstd, int64_t rows,
                                int64_t d, double eps)
{
    __shared__ double sh[LN_MAX];

    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        double part = 0, mu, mn, is;

        for (int64_t k = threadIdx.x; k < d; k += blockDim.x)
            part += xr[k];
        mu = block_sum(part, sh) / (double)d;
        part = 0;
        for (int64_t k = threadIdx.x; k < d; k += blockDim.x)
            part += ((double)xr[k] - mu) * ((double)xr[k] - mu);
        mn = (float)mu;
        is = (float)(1.0 / sqrt(block_sum(part, sh) / (double)d + eps));
        if (threadIdx.x == 0) {
            mean[r] = (float)mn;
            invstd[r] = (float)is;
        }
        for (int64_t k = threadIdx.x; k < d; k += blockDim.x)
            y[r * d + k] = (float)((((double)xr[k] - mn) * is) * (gamma ? gamma[k] : 1.0) +
                                   (beta ? beta[k] : 0.0));
    }
}

/* Per row: dx += invstd / D * (D g - sum g - x_hat * sum g x_hat), g = dy * gamma. */
__global__ static void k_ln_bwd_dx(const float *x, const float *gamma, const float *mean,
                                   const float *invstd, const float *dy, float *dx,
                                   int64_t rows, int64_t d)
{
    __shared__ double sh[LN_MAX];

    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        double mn = mean[r], is = invstd[r], p1 = 0, p2 = 0, s1, s2;

        for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
            double g = ln_g(dy, gamma, r, d, k);

            p1 += g;
            p2 += g * (((double)xr[k] - mn) * is);
        }
        s1 = block_sum(p1, sh);
        s2 = block_sum(p2, sh);
        for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
            double g = ln_g(dy, gamma, r, d, k), xh = ((double)xr[k] - mn) * is;

            dx[r * d + k] += (float)(is / (double)d * ((double)d * g - s1 - xh * s2));
        }
    }
}

/* dgamma[k] += sum_r dy x_hat, dbeta[k] += sum_r dy. Block (LN_COLS, LN_LANES): lane ty
 * sums rows ty, ty + LN_LANES, ... of column k in order; lane 0 adds the lanes in order. */
__global__ static void k_ln_bwd_params(const float *x, const float *mean, const float *invstd,
                                       const float *dy, float *dgamma, float *dbeta,
                                       int64_t rows, int64_t d)
{
    __shared__ double sg[LN_LANES][LN_COLS], sb[LN_LANES][LN_COLS];
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    int64_t k = (int64_t)blockIdx.x * LN_COLS + tx;
    double g_sum = 0, b_sum = 0;

    if (k < d)
        for (int64_t r = ty; r < rows; r += LN_LANES) {
            double g = dy ? dy[r * d + k] : 1.0;

            g_sum += g * (((double)x[r * d + k] - mean[r]) * invstd[r]);
            b_sum += g;
        }
    sg[ty][tx] = g_sum;
    sb[ty][tx] = b_sum;
    __syncthreads();
    if (ty != 0 || k >= d)
        return;
    for (unsigned l = 1; l < LN_LANES; l++) {
        g_sum += sg[l][tx];
        b_sum += sb[l][tx];
    }
    if (dgamma)
        dgamma[k] += (float)g_sum;
    if (dbeta)
        dbeta[k] += (float)b_sum;
}

extern "C" int cu_layer_norm_fwd(cu_stream s, const float *x, const float *gamma,
                                 const float *beta, float *y, float *aux, int64_t rows,
                                 int64_t d, double eps)
{
    k_ln_fwd<<<grid_for(rows, 1), ln_threads(d), 0, s>>>(x, gamma, beta, y, aux, aux + rows,
                                                          rows, d, eps);
    return (int)cudaGetLastError();
}

extern "C" int cu_layer_norm_bwd(cu_stream s, const float *x, const float *gamma,
                                 const float *aux, const float *dy, float *dx, float *dgamma,
                                 float *dbeta, int64_t rows, int64_t d)
{
    if (dgamma || dbeta)
        k_ln_bwd_params<<<(unsigned)((d + LN_COLS - 1) / LN_COLS), dim3(LN_COLS, LN_LANES), 0,
                          s>>>(x, aux, aux + rows, dy, dgamma, dbeta, rows, d);
    if (dx)
        k_ln_bwd_dx<<<grid_for(rows, 1), ln_threads(d), 0, s>>>(x, gamma, aux, aux + rows, dy,
                                                                 dx, rows, d);
    return (int)cudaGetLastError();
}

/* ------------------------------------------------------------------------ gelu */

#define GELU_SQRT_2_PI 0.79788456080286535588    /* sqrt(2 / pi) */
#define GELU_INV_SQRT_2 0.70710678118654752440   /* 1 / sqrt(2) */
#define GELU_INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */
#define GELU_CUBIC 0.044715

/* y(x): exact 0.5 x (1 + erf(x / sqrt 2)), or 0.5 x (1 + tanh(sqrt(2 / pi) (x + c x^3))) */
__device__ static double gelu(double x, int approximate)
{
    if (approximate)
        return 0.5 * x * (1.0 + tanh(GELU_SQRT_2_PI * (x + GELU_CUBIC * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * GELU_INV_SQRT_2));
}

/* dy/dx: exact Phi(x) + x phi(x); the tanh form's derivative, t = tanh(u) */
__device__ static double gelu_grad(double x, int approximate)
{
    if (approximate) {
        double t = tanh(GELU_SQRT_2_PI * (x + GELU_CUBIC * x * x * x));

        return 0.5 * (1.0 + t) +
               0.5 * x * (1.0 - t * t) * GELU_SQRT_2_PI * (1.0 + 3.0 * GELU_CUBIC * x * x);
    }
    return 0.5 * (1.0 + erf(x * GELU_INV_SQRT_2)) + x * GELU_INV_SQRT_2PI * exp(-0.5 * x * x);
}

__global__ static void k_gelu_fwd(int approximate, const float *x, float *y, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (float)gelu(x[i], approximate);
}

__global__ static void k_gelu_bwd(int approximate, const float *x, const float *dy, float *dx,
                                  int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] += (float)((dy ? dy[i] : 1.0) * gelu_grad(x[i], approximate));
}

extern "C" int cu_gelu_fwd(cu_stream s, int approximate, const float *x, float *y, int64_t n)
{
    k_gelu_fwd<<<grid_for(n, THREADS), THREADS, 0, s>>>(approximate, x, y, n);
    return (int)cudaGetLastError();
}

extern "C" int cu_gelu_bwd(cu_stream s, int approximate, const float *x, const float *dy,
                           float *dx, int64_t n)
{
    k_gelu_bwd<<<grid_for(n, THREADS), THREADS, 0, s>>>(approximate, x, dy, dx, n);
    return (int)cudaGetLastError();
}
