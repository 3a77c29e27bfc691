/*
 * backend_cpu.c - the cpu backend: host memory and oneDNN 2.x kernels (src/kernels/cpu;
 * cpu.h says what runs on oneDNN and what on the reference kernels, how primitives are
 * cached and how threads are set).
 *
 * threads (remat_train_opts.threads, 0: all processors) is the OpenMP thread count
 * oneDNN runs with; Debian's oneDNN is built on OpenMP, so the backend sets it with
 * omp_set_num_threads on the thread that calls it. The trainer prepares every op when
 * it is made (cpu_prepare) with the algorithms its schedule chose: the oneDNN primitives
 * exist before the first step, and each step brings its scratch, a one-step instance of
 * the arena whose size the plan counted.
 */
#include "exec/backend.h"
#include "exec/copier.h"
#include "kernels/cpu/cpu.h"

#include <string.h>

static remat_status be_create(const remat_train_opts *o, void **ctx)
{
    struct cpu_ctx *c;
    remat_status st = cpu_ctx_new(o ? o->threads : 0, &c);

    *ctx = NULL;
    if (st)
        return st;
    if ((st = copier_new(NULL, &c->copier))) {
        cpu_ctx_free(c);
        return st;
    }
    *ctx = c;
    return REMAT_OK;
}

static void be_destroy(void *ctx)
{
    struct cpu_ctx *c = ctx;

    if (c)
        copier_free(c->copier);
    cpu_ctx_free(c);
}

/* The arena and the resident block: whole pages, zeroed by the system (core.h). */
static void *be_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return core_pages_alloc(bytes ? bytes : 64);
}

static void be_release(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    core_pages_free(p, bytes ? bytes : 64);
}

static remat_status be_forward(void *ctx, const struct kop *op)
{
    return cpu_forward(ctx, op);
}

static remat_status be_backward(void *ctx, const struct kop *op)
{
    return cpu_backward(ctx, op);
}

static int32_t be_algos(void *ctx, const struct kop *op, bool backward, int32_t *ids)
{
    (void)ctx;
    return cpu_algos(op, backward, ids);
}

static remat_status be_prepare(void *ctx, const struct kop *op, bool backward, size_t *need)
{
    return cpu_prepare(ctx, op, backward, need);
}

static size_t be_workspace(void *ctx)
{
    return ((const struct cpu_ctx *)ctx)->scratch_bytes;
}

static void be_zero(void *ctx, void *p, size_t bytes)
{
    cpu_zero(ctx, p, bytes);
}

/* The host tier's copies run on the copy thread, beside the kernels' threads. */
static uint64_t be_copy_start(void *ctx, void *dst, const void *src, size_t n)
{
    return copier_start(((struct cpu_ctx *)ctx)->copier, dst, src, n);
}

static void be_copy_wait(void *ctx, uint64_t ticket)
{
    copier_wait(((struct cpu_ctx *)ctx)->copier, ticket);
}

static double be_copy_seconds(void *ctx)
{
    return copier_seconds(((struct cpu_ctx *)ctx)->copier);
}

static const struct backend_ops cpu_ops = {
    .name = "cpu",
    .create = be_create,
    .destroy = be_destroy,
    .alloc = be_alloc,
    .release = be_release,
    .forward = be_forward,
    .backward = be_backward,
    .algos = be_algos,
    .algo_name = cpu_algo_name,
    .prepare = be_prepare,
    .workspace = be_workspace,
    .zero = be_zero,
    .copy_start = be_copy_start,
    .copy_wait = be_copy_wait,
    .copy_seconds = be_copy_seconds,
};

const struct backend_ops *backend_cpu(void)
{
    return &cpu_ops;
}
