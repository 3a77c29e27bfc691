/*
 * backend.h - a backend is a table of functions plus a context: memory for the arena
 * and the resident blocks, and the forward and backward of each op (kernels.h says what
 * a kernel sees). The executor knows nothing else about it.
 */
#ifndef REMAT_BACKEND_H
#define REMAT_BACKEND_H

#include "kernels/kernels.h"

/* One AdamW step's scalars, derived once on the host from the options and the step t
 * (exec/params.c: adamw_coef) so that every backend applies the same floats. */
struct adamw_coef {
    float decay;            /* 1 - lr wd */
    float beta1, c1;        /* beta1, 1 - beta1 */
    float beta2, c2;        /* beta2, 1 - beta2 */
    float step_size;        /* lr / (1 - beta1^t) */
    float bc2_sqrt;         /* sqrt(1 - beta2^t) */
    float eps;
};

struct backend_ops {
    const char *name;
    remat_status (*create)(const remat_train_opts *o, void **ctx);
    void (*destroy)(void *ctx);
    /* Memory the kernels can address; zeroed. */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p, size_t bytes);
    remat_status (*forward)(void *ctx, const struct kop *op);
    remat_status (*backward)(void *ctx, const struct kop *op);
    /* The algorithms op's forward or backward may run (their ids in ids[0..n), n at
     * most KERNELS_MAX_ALGOS), fastest first; prepare says which can run op. */
    int32_t (*algos)(void *ctx, const struct kop *op, bool backward, int32_t *ids);
    const char *(*algo_name)(int32_t id);
    /* Readies what op's forward or backward will need with algorithm op->algo (its
     * kernels) without touching data: the tensors carry shapes, and non-NULL data
     * exactly where the real call has it. *need: the scratch the call takes (the
     * executor brings it in kop.scratch). REMAT_ERR_UNSUPPORTED when the algorithm
     * cannot run op. */
    remat_status (*prepare)(void *ctx, const struct kop *op, bool backward, size_t *need);
    /* Scratch the backend holds of its own, outside the arena (0 when every kop
     * brings its scratch). */
    size_t (*workspace)(void *ctx);
    /* Zeroes bytes at p (a gradient buffer as it is allocated). */
    void (*zero)(void *ctx, void *p, size_t bytes);
    /* Moves bytes inside the arena from src to dst, which may overlap (as memmove), in
     * order with the kernels; NULL: the executor calls memmove (host memory). */
    void (*move)(void *ctx, void *dst, const void *src, size_t bytes);
    /* The host tier: starts copying n bytes (arena to host or back) and returns a
     * ticket; copy_wait blocks until that copy and every earlier one are done;
     * copy_seconds is the time the copies have taken. */
    uint64_t (*copy_start)(void *ctx, void *dst, const void *src, size_t n);
    void (*copy_wait)(void *ctx, uint64_t ticket);
    double (*copy_seconds)(void *ctx);
    /* A device backend's extras (NULL on the host backends, whose memory the executor
     * reads and writes itself): memory both the host and the kernels address (the
     * resident block: parameters written by the host, updated by the kernels); the host
     * tier's memory, pinned for fast copies, and a mapped file registered as such; a
     * read of device bytes into host memory (the loss, the forward hook); SGD and AdamW
     * on the kernels' side (exec/params.c has the formulas); and a wait for every queued
     * kernel (before the host reads). */
    void *(*alloc_shared)(void *ctx, size_t bytes);
    void (*release_shared)(void *ctx, void *p, size_t bytes);
    void *(*alloc_pinned)(void *ctx, size_t bytes);
    void (*release_pinned)(void *ctx, void *p, size_t bytes);
    remat_status (*read)(void *ctx, void *dst, const void *src, size_t n);
    remat_status (*sgd)(void *ctx, float *w, const float *g, float *m, size_t n, float lr,
                        float mu, float wd);
    remat_status (*adamw)(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                          const struct adamw_coef *c);
    remat_status (*sync)(void *ctx);
};

const struct backend_ops *backend_ref(void);
/* NULL when the library was built without it. */
const struct backend_ops *backend_cpu(void);
const struct backend_ops *backend_cuda(void);

#endif
