/*
 * cuda_kernels.h - the cuda backend's own kernels (cuda_kernels.cu; seq.cu for layer norm,
 * GELU, softmax_last, embedding and token_ce), for the ops cuDNN and cuBLAS do not run
 * (exec/backend_cuda.c says which run where). Each launcher queues its kernel on stream s
 * and returns cudaGetLastError() as an int (0: queued). Tensors are float32 NCHW in
 * device memory; gradients accumulate (+=), as every kernel of kernels.h. A NULL dy
 * reads as the constant 1. Sums run in a fixed order (one thread per output, or per
 * gathered input element; a row's sums in a fixed tree within a block), so results
 * repeat bit for bit.
 */
#ifndef REMAT_CUDA_KERNELS_H
#define REMAT_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *cu_stream;

/* what: 0 relu, 1 clip(lo, hi), 2 leaky relu(alpha), 3 sigmoid, 4 tanh. The backward reads
 * y. */
int cu_act_fwd(cu_stream s, int what, float a, float b, const float *x, float *y, int64_t n);
int cu_act_bwd(cu_stream s, int what, float a, float b, const float *y, const float *dy,
               float *dx, int64_t n);
/* act.cu: hard sigmoid (swish 0: min(1, max(0, a x + b)), the backward reads y) and hard
 * swish (swish 1, the backward reads x), as the reference's */
int cu_hard_fwd(cu_stream s, int swish, double a, double b, const float *x, float *y,
                int64_t n);
int cu_hard_bwd(cu_stream s, int swish, double a, const float *t, const float *dy, float *dx,
                int64_t n);
/* reduce_sum over 4-d xs (leading 1s added); os: the output's stride per axis, 0 on a
 * summed one; y = scale times the sums */
struct cu_reduce {
    int64_t xs[4], os[4];
    double scale;
};
int cu_reduce_fwd(cu_stream s, struct cu_reduce g, const float *x, float *y, int64_t ny);
int cu_reduce_bwd(cu_stream s, struct cu_reduce g, const float *dy, float *dx, int64_t nx);
int cu_dropout_fwd(cu_stream s, const float *x, float *y, int64_t n, float p, uint64_t key);
int cu_dropout_bwd(cu_stream s, const float *dy, float *dx, int64_t n, float p, uint64_t key);
/* y = a (+ b); y = a * b; dx += dy (* other) */
int cu_add2(cu_stream s, const float *a, const float *b, float *y, int64_t n);
int cu_mul2(cu_stream s, const float *a, const float *b, float *y, int64_t n);
int cu_acc(cu_stream s, const float *dy, const float *other, float *dx, int64_t n);
/* rows x cols blocks: dst[r * dpitch + c] (+)= src[r * spitch + c] */
int cu_copy2d(cu_stream s, const float *src, int64_t spitch, float *dst, int64_t dpitch,
              int64_t rows, int64_t cols, int accumulate);
/* Windows of planes (crop, pad): dst[p, i, j] = src[p, i + oi, j + oj] where that is
 * inside src (hs x ws), else 0; with accumulate dst += it, and nothing outside. */
int cu_window(cu_stream s, const float *src, int64_t hs, int64_t ws, float *dst, int64_t hd,
              int64_t wd, int64_t planes, int64_t oi, int64_t oj, int accumulate);
/* Pooling over planes of h x w into ho x wo, windows as src/kernels/ref/pool.c. */
struct cu_pool {
    int64_t planes, h, w, ho, wo;
    int32_t kh, kw, sh, sw, ph, pw;
    int include_pad;
};
int cu_maxpool_fwd(cu_stream s, struct cu_pool g, const float *x, float *y, int32_t *arg);
int cu_maxpool_bwd(cu_stream s, struct cu_pool g, const int32_t *arg, const float *dy, float *dx);
int cu_avgpool_fwd(cu_stream s, struct cu_pool g, const float *x, float *y);
int cu_avgpool_bwd(cu_stream s, struct cu_pool g, const float *dy, float *dx);
int cu_gap_fwd(cu_stream s, const float *x, float *y, int64_t planes, int64_t hw);
int cu_gap_bwd(cu_stream s, const float *dy, float *dx, int64_t planes, int64_t hw);
/* softmax cross-entropy: loss[0] = mean over rows; prob; *bad (device) set to 1 + the
 * first row whose label is outside [0, k) */
int cu_softmax_ce_fwd(cu_stream s, const float *x, const int32_t *lab, float *prob,
                      float *loss, double *rowloss, int32_t *bad, int64_t n, int64_t k);
int cu_softmax_ce_bwd(cu_stream s, const float *prob, const int32_t *lab, const float *dy,
                      float *dx, int64_t n, int64_t k);
#define CU_MAX_SUM 16
struct cu_ptrs {
    const float *p[CU_MAX_SUM];
};
int cu_sum_scalars(cu_stream s, struct cu_ptrs in, int32_t n_in, float *y);
/* linear: y[r, c] += b[c]; db[c] += sum_r dy[r, c] */
int cu_bias_rows(cu_stream s, const float *b, float *y, int64_t rows, int64_t cols);
int cu_bias_grad_rows(cu_stream s, const float *dy, float *db, int64_t rows, int64_t cols);
/* seq.cu: layer norm over the last axis of x seen as (rows, d); aux = (mean[rows],
 * invstd[rows]); gamma, beta may be NULL (1, 0). The backward reads x and aux and adds
 * into dx, dgamma and dbeta, each skipped when NULL. */
int cu_layer_norm_fwd(cu_stream s, const float *x, const float *gamma, const float *beta,
                      float *y, float *aux, int64_t rows, int64_t d, double eps);
int cu_layer_norm_bwd(cu_stream s, const float *x, const float *gamma, const float *aux,
                      const float *dy, float *dx, float *dgamma, float *dbeta, int64_t rows,
                      int64_t d);
/* seq.cu: GELU, exact (erf) or with approximate the tanh form; the backward reads x. */
int cu_gelu_fwd(cu_stream s, int approximate, const float *x, float *y, int64_t n);
int cu_gelu_bwd(cu_stream s, int approximate, const float *x, const float *dy, float *dx,
                int64_t n);
/* seq.cu: softmax over the last axis of x seen as (rows, n), of scale * x; with causal,
 * row r takes columns j <= r % m (m rows a matrix) and the rest get 0. The backward reads
 * y: dx += scale y (dy - sum dy y). */
int cu_softmax_last_fwd(cu_stream s, const float *x, float *y, int64_t rows, int64_t m,
                        int64_t n, int causal, double scale);
int cu_softmax_last_bwd(cu_stream s, const float *y, const float *dy, float *dx,
                        int64_t rows, int64_t n, double scale);
/* seq.cu: embedding, y[t, :] = w[ids[t], :] for n tokens of a (vocab, d) table; *bad
 * (device, all ones before) gets the least position whose id is outside [0, vocab). The
 * backward adds dy's rows into dw in token order (ids outside the table skipped). */
int cu_embedding_fwd(cu_stream s, const int32_t *ids, const float *w, float *y,
                     unsigned long long *bad, int64_t n, int64_t vocab, int64_t d);
int cu_embedding_bwd(cu_stream s, const int32_t *ids, const float *dy, float *dw, int64_t n,
                     int64_t vocab, int64_t d);
/* seq.cu: token cross-entropy over logits (rows, v) and rows targets, a negative one
 * ignored: loss[0] = the mean over the others (0 when none), prob = softmax; rowloss is
 * rows doubles of scratch; *bad (device, all ones before) gets the least row whose
 * target is >= v. The backward reads prob and the targets; count is one double of
 * scratch. */
int cu_token_ce_fwd(cu_stream s, const float *x, const int32_t *lab, float *prob,
                    float *loss, double *rowloss, unsigned long long *bad, int64_t rows,
                    int64_t v);
int cu_token_ce_bwd(cu_stream s, const float *prob, const int32_t *lab, const float *dy,
                    float *dx, double *count, int64_t rows, int64_t v);
/* SGD as torch.optim.SGD: d = g + wd w; m = mu m + d; w -= lr m */
int cu_sgd(cu_stream s, float *w, const float *g, float *m, int64_t n, float lr, float mu,
           float wd);

#ifdef __cplusplus
}
#endif

#endif
