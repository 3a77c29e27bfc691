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
 *
 * Softmax over the last axis and token cross-entropy (ref/matmul.c, ref/loss.c): one
 * block per row, as layer norm (the row's maximum, then its sum of exponentials in
 * double in a fixed tree). The loss's mean and the count of targets that count come
 * from one block adding the rows in a fixed tree. Embedding: a gather forward; its
 * backward gives lane l of each column the tokens whose id is l modulo EMB_LANES, in
 * token order, so each table row is written by one thread in the reference's order
 * (the same bits as ref/matmul.c, no atomics). Ids or targets outside the table set a
 * device flag to the least bad position (atomicMin: the same whatever the order).
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

/* --------------------------------------------------------------- softmax_last */

/* The largest of every thread's v (exact: no order matters); every thread gets it. */
__device__ static double block_max(double v, double *sh)
{
    unsigned t = threadIdx.x;

    sh[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (t < s && sh[t + s] > sh[t])
            sh[t] = sh[t + s];
        __syncthreads();
    }
    v = sh[0];
    __syncthreads();
    return v;
}

/* Per row r of n: the first w columns (causal: w = r % m + 1, at most n) get
 * exp(s (x - max)) / sum, the others 0. */
__global__ static void k_sm_fwd(const float *x, float *y, int64_t rows, int64_t m, int64_t n,
                                int causal, double sc)
{
    __shared__ double sh[LN_MAX];

    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * n;
        int64_t w = causal && r % m + 1 < n ? r % m + 1 : n;
        double mx = -INFINITY, part = 0, sum;

        for (int64_t k = threadIdx.x; k < w; k += blockDim.x)
            mx = (double)xr[k] > mx ? (double)xr[k] : mx;
        mx = block_max(mx, sh);
        for (int64_t k = threadIdx.x; k < w; k += blockDim.x)
            part += exp(sc * ((double)xr[k] - mx));
        sum = block_sum(part, sh);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            y[r * n + k] = k < w ? (float)(exp(sc * ((double)xr[k] - mx)) / sum) : 0.0f;
    }
}

/* Per row: dx += s y (dy - sum_k dy y). */
__global__ static void k_sm_bwd(const float *y, const float *dy, float *dx, int64_t rows,
                                int64_t n, double sc)
{
    __shared__ double sh[LN_MAX];

    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        double part = 0, dot;

        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            part += (dy ? (double)dy[r * n + k] : 1.0) * y[r * n + k];
        dot = block_sum(part, sh);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            int64_t i = r * n + k;

            dx[i] += (float)(sc * (double)y[i] * ((dy ? (double)dy[i] : 1.0) - dot));
        }
    }
}

extern "C" int cu_softmax_last_fwd(cu_stream s, const float *x, float *y, int64_t rows,
                                   int64_t m, int64_t n, int causal, double scale)
{
    k_sm_fwd<<<grid_for(rows, 1), ln_threads(n), 0, s>>>(x, y, rows, m, n, causal, scale);
    return (int)cudaGetLastError();
}

extern "C" int cu_softmax_last_bwd(cu_stream s, const float *y, const float *dy, float *dx,
                                   int64_t rows, int64_t n, double scale)
{
    k_sm_bwd<<<grid_for(rows, 1), ln_threads(n), 0, s>>>(y, dy, dx, rows, n, scale);
    return (int)cudaGetLastError();
}

/* ------------------------------------------------------------------ embedding */

#define EMB_COLS 32  /* backward: columns per block */
#define EMB_ROWS 8   /* backward: lanes per block */
#define EMB_LANES 64 /* backward: lanes per column (a multiple of EMB_ROWS) */

/* y[t, j] = w[id_t, j]; a bad id gives 0 and flags its position. */
__global__ static void k_emb_fwd(const int32_t *ids, const float *w, float *y,
                                 unsigned long long *bad, int64_t n, int64_t vocab, int64_t d)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * d;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / d, j = i % d, id = ids[t];

        if (id < 0 || id >= vocab) {
            y[i] = 0.0f;
            if (j == 0)
                atomicMin(bad, (unsigned long long)t);
        } else {
            y[i] = w[id * d + j];
        }
    }
}

/* dw[id_t, j] += dy[t, j] for the tokens of this thread's lane, in token order; bad ids
 * are skipped (the forward refused them). */
__global__ static void k_emb_bwd(const int32_t *ids, const float *dy, float *dw, int64_t n,
                                 int64_t vocab, int64_t d)
{
    int64_t j = (int64_t)blockIdx.x * EMB_COLS + threadIdx.x;
    int64_t lane = (int64_t)blockIdx.y * EMB_ROWS + threadIdx.y;

    if (j >= d)
        return;
    for (int64_t t = 0; t < n; t++) {
        int64_t id = ids[t];

        if (id >= 0 && id < vocab && id % EMB_LANES == lane)
            dw[id * d + j] += dy ? dy[t * d + j] : 1.0f;
    }
}

extern "C" int cu_embedding_fwd(cu_stream s, const int32_t *ids, const float *w, float *y,
                                unsigned long long *bad, int64_t n, int64_t vocab, int64_t d)
{
    k_emb_fwd<<<grid_for(n * d, THREADS), THREADS, 0, s>>>(ids, w, y, bad, n, vocab, d);
    return (int)cudaGetLastError();
}

extern "C" int cu_embedding_bwd(cu_stream s, const int32_t *ids, const float *dy, float *dw,
                                int64_t n, int64_t vocab, int64_t d)
{
    dim3 grid((unsigned)((d + EMB_COLS - 1) / EMB_COLS), EMB_LANES / EMB_ROWS);

    if (n == 0 || d == 0) /* nothing to add (and no empty grid) */
        return (int)cudaGetLastError();
    k_emb_bwd<<<grid, dim3(EMB_COLS, EMB_ROWS), 0, s>>>(ids, dy, dw, n, vocab, d);
    return (int)cudaGetLastError();
}

/* ------------------------------------------------------------------- token_ce */

#define CE_THREADS 256 /* the one block of the loss's mean and the count */

/* Per row: prob = softmax(x), rowloss = log sum exp(x - max) - (x[l] - max) for a
 * target l in [0, v), 0 for an ignored one (negative); a target >= v flags its row. */
__global__ static void k_tce_rows(const float *x, const int32_t *lab, float *prob,
                                  double *rowloss, unsigned long long *bad, int64_t rows,
                                  int64_t v)
{
    __shared__ double sh[LN_MAX];

    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * v;
        int64_t l = lab[r];
        double mx = -INFINITY, part = 0, sum;

        for (int64_t k = threadIdx.x; k < v; k += blockDim.x)
            mx = (double)xr[k] > mx ? (double)xr[k] : mx;
        mx = block_max(mx, sh);
        for (int64_t k = threadIdx.x; k < v; k += blockDim.x)
            part += exp((double)xr[k] - mx);
        sum = block_sum(part, sh);
        for (int64_t k = threadIdx.x; k < v; k += blockDim.x)
            prob[r * v + k] = (float)(exp((double)xr[k] - mx) / sum);
        if (threadIdx.x == 0) {
            rowloss[r] = l >= 0 && l < v ? log(sum) - ((double)xr[l] - mx) : 0.0;
            if (l >= v)
                atomicMin(bad, (unsigned long long)r);
        }
    }
}

/* One block: the number of targets in [0, v) (*count) and, with rowloss, the mean of
 * their losses (*loss; 0 when none counts). */
__global__ static void k_tce_mean(const double *rowloss, const int32_t *lab, float *loss,
                                  double *count, int64_t rows, int64_t v)
{
    __shared__ double sh[CE_THREADS];
    double total = 0, cnt = 0;

    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        if (rowloss)
            total += rowloss[r];
        cnt += lab[r] >= 0 && lab[r] < v;
    }
    total = block_sum(total, sh);
    cnt = block_sum(cnt, sh);
    if (threadIdx.x == 0) {
        if (loss)
            loss[0] = cnt > 0 ? (float)(total / cnt) : 0.0f;
        if (count)
            count[0] = cnt;
    }
}

/* dx[r, k] += (p - [k == l_r]) g / count for the rows that count, g = dy[0] (1: NULL). */
__global__ static void k_tce_bwd(const float *prob, const int32_t *lab, const float *dy,
                                 float *dx, const double *count, int64_t rows, int64_t v)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * v;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / v, k = i % v, l = lab[r];
        double g = (dy ? (double)dy[0] : 1.0) / count[0];

        if (l >= 0 && l < v)
            dx[i] += (float)(((double)prob[i] - (k == l)) * g);
    }
}

extern "C" int cu_token_ce_fwd(cu_stream s, const float *x, const int32_t *lab, float *prob,
                               float *loss, double *rowloss, unsigned long long *bad,
                               int64_t rows, int64_t v)
{
    k_tce_rows<<<grid_for(rows, 1), ln_threads(v), 0, s>>>(x, lab, prob, rowloss, bad, rows, v);
    k_tce_mean<<<1, CE_THREADS, 0, s>>>(rowloss, lab, loss, NULL, rows, v);
    return (int)cudaGetLastError();
}

extern "C" int cu_token_ce_bwd(cu_stream s, const float *prob, const int32_t *lab,
                               const float *dy, float *dx, double *count, int64_t rows,
                               int64_t v)
{
    k_tce_mean<<<1, CE_THREADS, 0, s>>>(NULL, lab, NULL, count, rows, v);
    k_tce_bwd<<<grid_for(rows * v, THREADS), THREADS, 0, s>>>(prob, lab, dy, dx, count, rows,
                                                              v);
    return (int)cudaGetLastError();
}
