/*
 * backend_ref.c - the reference backend: host memory and the plain-loop kernels.
 */
#include "exec/backend.h"

#include <stdlib.h>
#include <string.h>

/* The context: the time the host tier's copies took (they run synchronously here). */
struct ref_ctx {
    double copy_seconds;
};

static remat_status ref_create(const remat_train_opts *o, void **ctx)
{
    (void)o;
    *ctx = calloc(1, sizeof(struct ref_ctx));
    return *ctx ? REMAT_OK : REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a backend");
}

static void ref_destroy(void *ctx)
{
    free(ctx);
}

/* The arena and the resident block: whole pages, zeroed by the system (core.h). */
static void *ref_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return core_pages_alloc(bytes ? bytes : 64);
}

static void ref_release(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    core_pages_free(p, bytes ? bytes : 64);
}

static remat_status ref_fwd(void *ctx, const struct kop *op)
{
    (void)ctx;
    return ref_forward(op);
}

static remat_status ref_bwd(void *ctx, const struct kop *op)
{
    (void)ctx;
    return ref_backward(op);
}

/* One algorithm per op: the reference loops. */
static int32_t ref_algos(void *ctx, const struct kop *op, bool backward, int32_t *ids)
{
    (void)ctx;
    (void)op;
    (void)backward;
    ids[0] = 0;
    return 1;
}

static const char *ref_algo_name(int32_t id)
{
    return id == 0 ? "reference" : "?";
}

static remat_status ref_prepare(void *ctx, const struct kop *op, bool backward, size_t *need)
{
    (void)ctx;
    (void)backward;
    *need = 0; /* the reference kernels need no scratch */
    if (op->algo != 0)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "ref backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)op->algo);
    return REMAT_OK;
}

static size_t ref_workspace(void *ctx)
{
    (void)ctx;
    return 0;
}

static void ref_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    memset(p, 0, bytes);
}

/* A copy done before it returns: every ticket is already done. */
static uint64_t ref_copy_start(void *ctx, void *dst, const void *src, size_t n)
{
    double t0 = core_seconds();

    memcpy(dst, src, n);
    ((struct ref_ctx *)ctx)->copy_seconds += core_seconds() - t0;
    return 0;
}

static void ref_copy_wait(void *ctx, uint64_t ticket)
{
    (void)ctx;
    (void)ticket;
}

static double ref_copy_seconds(void *ctx)
{
    return ((struct ref_ctx *)ctx)->copy_seconds;
}

static const struct backend_ops ref_ops = {
    .name = "ref",
    .create = ref_create,
    .destroy = ref_destroy,
    .alloc = ref_alloc,
    .release = ref_release,
    .forward = ref_fwd,
    .backward = ref_bwd,
    .algos = ref_algos,
    .algo_name = ref_algo_name,
    .prepare = ref_prepare,
    .workspace = ref_workspace,
    .zero = ref_zero,
    .copy_start = ref_copy_start,
    .copy_wait = ref_copy_wait,
    .copy_seconds = ref_copy_seconds,
};

const struct backend_ops *backend_ref(void)
{
    return &ref_ops;
}

#ifndef REMAT_CUDA
/* Built without CUDA (make CUDA=1 builds exec/backend_cuda.c). */
const struct backend_ops *backend_cuda(void)
{
    return NULL;
}
#endif
