/*
 * act.cu - the cuda backend's hard sigmoid, hard swish and reduce_sum (cuda_kernels.h),
 * the reference's arithmetic (src/kernels/ref/act.c, reduce.c) in double: one thread
 * per element (reduce_sum's forward: per output element, its box in row-major order).
 */
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/grid.cuh"

#include <cuda_runtime.h>
#include <math.h>

/* swish 0: hard sigmoid alpha x + beta clipped to [0, 1]; 1: hard swish */
__global__ static void k_hard_fwd(int swish, double a, double b, const float *x, float *y,
                                  int64_t n)
{
    FOR_EACH(i, n) {
        double v = x[i];

        y[i] = swish ? (float)(v * fmin(fmax(v + 3, 0.0), 6.0) / 6)
                     : (float)fmin(1.0, fmax(0.0, a * v + b));
    }
}

/* hard sigmoid reads y (t), hard swish x (t) */
__global__ static void k_hard_bwd(int swish, double a, const float *t, const float *dy,
                                  float *dx, int64_t n)
{
    FOR_EACH(i, n) {
        double g = dy ? dy[i] : 1.0f, v = t[i];

        if (swish)
            dx[i] += (float)((v < -3 ? 0.0 : v <= 3 ? v / 3 + 0.5 : 1.0) * g);
        else if (t[i] > 0 && t[i] < 1)
            dx[i] += (float)(a * g);
    }
}

extern "C" int cu_hard_fwd(cu_stream s, int swish, double a, double b, const float *x,
                           float *y, int64_t n)
{
    k_hard_fwd<<<blocks(n), THREADS, 0, s>>>(swish, a, b, x, y, n);
    return (int)cudaGetLastError();
}

extern "C" int cu_hard_bwd(cu_stream s, int swish, double a, const float *t, const float *dy,
                           float *dx, int64_t n)
{
    k_hard_bwd<<<blocks(n), THREADS, 0, s>>>(swish, a, t, dy, dx, n);
    return (int)cudaGetLastError();
}

__global__ static void k_reduce_fwd(struct cu_reduce g, const float *x, float *y, int64_t ny)
{
    FOR_EACH(j, ny) {
        int64_t lo[4], hi[4], r = j;
        double s = 0;

        for (int i = 3; i >= 0; i--) {
            int64_t n = g.os[i] ? g.xs[i] : 1;

            lo[i] = g.os[i] ? r % n : 0;
            hi[i] = g.os[i] ? lo[i] + 1 : g.xs[i];
            r /= n;
        }
        for (int64_t a0 = lo[0]; a0 < hi[0]; a0++)
            for (int64_t a1 = lo[1]; a1 < hi[1]; a1++)
                for (int64_t a2 = lo[2]; a2 < hi[2]; a2++)
                    for (int64_t a3 = lo[3]; a3 < hi[3]; a3++)
                        s += x[((a0 * g.xs[1] + a1) * g.xs[2] + a2) * g.xs[3] + a3];
        y[j] = (float)(s * g.scale);
    }
}

__global__ static void k_reduce_bwd(struct cu_reduce g, const float *dy, float *dx, int64_t nx)
{
    FOR_EACH(i, nx) {
        int64_t r = i, o = 0;

        for (int k = 3; k >= 0; k--) {
            o += r % g.xs[k] * g.os[k];
            r /= g.xs[k];
        }
        dx[i] += (float)(g.scale * (dy ? dy[o] : 1.0f));
    }
}

extern "C" int cu_reduce_fwd(cu_stream s, struct cu_reduce g, const float *x, float *y,
                             int64_t ny)
{
    k_reduce_fwd<<<blocks(ny), THREADS, 0, s>>>(g, x, y, ny);
    return (int)cudaGetLastError();
}

extern "C" int cu_reduce_bwd(cu_stream s, struct cu_reduce g, const float *dy, float *dx,
                             int64_t nx)
{
    k_reduce_bwd<<<blocks(nx), THREADS, 0, s>>>(g, dy, dx, nx);
    return (int)cudaGetLastError();
}
