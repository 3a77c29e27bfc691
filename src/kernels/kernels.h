/*
 * kernels.h - what a kernel sees: pointers, shapes and attributes, never the graph.
 *
 * Every op of the op table has a forward and a backward, in one file per op family
 * (src/kernels/ref/ for the reference backend, src/kernels/cpu/ for oneDNN). The
 * executor fills a struct kop per step from the arena and calls the backend.
 *
 * Conventions, said once for every kernel:
 * - Tensors are float32, NCHW (or (N, F) for 2-d), contiguous.
 * - Gradients ACCUMULATE: a backward adds (+=) into din[i], dw and db. The executor zeroes
 *   a gradient buffer when it first allocates it, so a value read by several ops gets the
 *   sum of their contributions. A din[i] whose data is NULL is not wanted: skip it.
 * - dout.data == NULL means the gradient of the output is the constant 1 (the loss).
 * - Forward kernels write every element of out (and aux where the op has one).
 * - Shapes: every ktensor carries its shape even when its data is NULL; kernels read
 *   shapes from in[i], out, aux and w (gradients have their value's shape).
 * - Kernels return REMAT_OK, REMAT_ERR_UNSUPPORTED for an op they do not have, or
 *   REMAT_ERR_ARG for bad data they can see (a label outside [0, K)).
 * - The backward of an op reads only what the op table says it reads (op_table.c:
 *   BR_IN0, BR_IN1, BR_OUT, BR_AUX): the other forward tensors may be dead and their
 *   data pointers NULL.
 * - Saved extras (aux): batch norm, 2*C floats, the batch mean then the inverse std;
 *   max pooling, int32 argmax per output element (the flat index h*W+w of the winner in
 *   its input plane); softmax cross-entropy, the (N, K) probabilities; layer norm, 2*R
 *   floats for its R rows (the last axis normalized), the row means then inverse stds.
 * - Dropout keeps an element when a counter-based uniform draw u(key, i) >= p and scales
 *   it by 1/(1-p); key is given per op and step, so a recomputation draws the same mask
 *   (kernel_uniform below is the generator).
 * - Batch norm in training mode normalizes with the batch statistics (biased variance);
 *   when update_stats is set it also updates running_mean and running_var (unbiased
 *   variance) with momentum: r = (1 - momentum) r + momentum * batch. The executor sets
 *   update_stats only on the first forward of a step, never on a recomputation.
 */
#ifndef REMAT_KERNELS_H
#define REMAT_KERNELS_H

#include "core/core.h"

/* The most algorithms one op's forward or backward offers (backend.h: algos). */
#define KERNELS_MAX_ALGOS 8

struct ktensor {
    float *data;
    int64_t shape[4];
    int32_t ndim;
};

#define KOP_MAX_INPUTS 64

struct kop {
    remat_op type;
    const remat_attrs *at;        /* with defaults filled in (graph.c) */
    int32_t n_in;                 /* data inputs (parameters apart) */
    const struct ktensor *in;     /* n_in data inputs; for softmax_ce in[1] is the labels */
    struct ktensor out;           /* y */
    struct ktensor aux;           /* saved extras, when the op has them */
    struct ktensor w, b;          /* weight and bias, or gamma and beta (data NULL: none) */
    struct ktensor dw, db;        /* their gradients (accumulated) */
    struct ktensor dout;          /* dL/dy (data NULL: the constant 1) */
    const struct ktensor *din;    /* n_in gradients of the inputs (data NULL: not wanted) */
    float *running_mean, *running_var; /* batch norm, C each */
    bool update_stats;
    uint64_t key;                 /* dropout: the per-(seed, step, op) key */
    int32_t algo;                 /* the backend's algorithm for this op and pass (its ids;
                                     0: the family's default) */
    void *scratch;                /* scratch of scratch_bytes for the step, in the arena;
                                     NULL: the backend uses scratch of its own */
    size_t scratch_bytes;
};

/* A matmul's B and its gradient: the second data input, or the weight when B is a
 * parameter (tied weights: n_in is 1 and w, dw carry it). */
static inline const struct ktensor *kop_matmul_b(const struct kop *op)
{
    return op->n_in > 1 ? &op->in[1] : &op->w;
}
static inline const struct ktensor *kop_matmul_db(const struct kop *op)
{
    return op->n_in > 1 ? &op->din[1] : &op->dw;
}

static inline int64_t ktensor_numel(const struct ktensor *t)
{
    int64_t n = 1;

    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* A matmul's sizes: nb batches of A (M, K) (stored (K, M) with ta) times B (K, N)
 * (stored (N, K) with tb); sa, sb, sy the elements between batches (sb 0: one B for
 * every batch). Every backend reads the op through this. */
struct kmm {
    int64_t nb, m, k, n, sa, sb, sy;
    bool ta, tb;
};

static inline struct kmm kop_matmul_geom(const struct kop *op)
{
    const struct ktensor *a = &op->in[0], *b = kop_matmul_b(op);
    struct kmm g;

    g.ta = op->at->trans_a;
    g.tb = op->at->trans_b;
    g.m = a->shape[a->ndim - (g.ta ? 1 : 2)];
    g.k = a->shape[a->ndim - (g.ta ? 2 : 1)];
    g.n = b->shape[b->ndim - (g.tb ? 2 : 1)];
    g.sa = g.m * g.k;
    g.sy = g.m * g.n;
    g.sb = b->ndim == 2 ? 0 : g.k * g.n;
    g.nb = g.sy ? ktensor_numel(&op->out) / g.sy : 0;
    return g;
}

/* A uniform draw in [0, 1) from (key, counter): splitmix64 of the pair, 24 bits. */
static inline float kernel_uniform(uint64_t key, uint64_t i)
{
    uint64_t z = key + 0x9e3779b97f4a7c15ull * (i + 1);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* The reference backend: plain loops in a fixed summation order, the specification every
 * other backend is tested against. */
remat_status ref_forward(const struct kop *op);
remat_status ref_backward(const struct kop *op);

#endif
