/*
 * grid.cuh - the launch shape every elementwise kernel of the cuda backend shares: blocks
 * of THREADS threads, at most 65535 x 8 blocks (a grid-stride loop covers the rest), and
 * the loop itself (FOR_EACH). Included by the .cu files only.
 */
#ifndef REMAT_KERNELS_CUDA_GRID_CUH
#define REMAT_KERNELS_CUDA_GRID_CUH

#include <stdint.h>

#define THREADS 256

/* Blocks for n elements: at least 1, at most 65535 x 8. */
static inline unsigned blocks(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;

    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

#define FOR_EACH(i, n)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
