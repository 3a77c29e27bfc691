/*
 * optim.h - the cuda backend's optimizer kernels (optim.cu) beyond SGD's (cu_sgd in
 * cuda_kernels.h). Each launcher queues its kernel on stream s and returns
 * cudaGetLastError() as an int (0: queued). One thread per parameter element; each
 * element's arithmetic is rounded step by step in the host's order, so the device gives
 * the host's bits.
 */
#ifndef REMAT_CUDA_OPTIM_H
#define REMAT_CUDA_OPTIM_H

#include "kernels/cuda/cuda_kernels.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* AdamW as torch.optim.AdamW, in exec/params.c's order (adamw_update), with its scalars
 * (struct adamw_coef): w: (n) parameters, g: (n) gradients, m, v: (n) moments. */
int cu_adamw(cu_stream s, float *w, const float *g, float *m, float *v, int64_t n,
             float decay, float beta1, float c1, float beta2, float c2, float step_size,
             float bc2_sqrt, float eps);

#ifdef __cplusplus
}
#endif

#endif
