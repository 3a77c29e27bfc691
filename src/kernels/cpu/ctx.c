/*
 * ctx.c - the cpu backend's context: a oneDNN CPU engine and an in-order stream, the
 * OpenMP thread count, the primitive cache and the scratch (cpu.h).
 */
#include "kernels/cpu/cpu.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The first pages of each thread's heap and stack, written once when the context is
 * made: oneDNN mallocs a little inside each execute (its argument maps) on whichever
 * thread runs it, and some kernels' calls go deeper in a worker's stack than anything
 * before; both were otherwise first touched in a trainer's first step, pages past its
 * budget (ResNet-50 b8: a heap page, and 16 KiB of a worker's stack). */
#define WARM_HEAP_BYTES ((size_t)64 << 10)
#define WARM_STACK_BYTES ((size_t)128 << 10)

/* Writes n bytes of the calling thread's stack below this frame. */
static __attribute__((noinline)) void touch_stack(size_t n)
{
    volatile unsigned char *p = __builtin_alloca(n);

    for (size_t i = 0; i < n; i += 512)
        p[i] = (unsigned char)i;
}

/* Loads the kernel library's lazily made parts before any trainer: the OpenMP threads
 * and their stacks and heaps, and oneDNN's GEMM kernels (generated on first use, on
 * whichever thread first calls them) for both transpositions of each operand and both
 * accumulation modes, on every thread. */
static void cpu_warm(int threads)
{
    float a[64 * 64] = {0}, b[64 * 64] = {0};

#pragma omp parallel num_threads(threads)
    {
        float c[64 * 64];
        unsigned char *h = malloc(WARM_HEAP_BYTES);

        for (int k = 0; k < 8; k++)
            dnnl_sgemm(k & 1 ? 'T' : 'N', k & 2 ? 'T' : 'N', 64, 64, 64, 1.0f, a, 64, b, 64,
                       k & 4 ? 1.0f : 0.0f, c, 64);
        if (h)
            memset(h, 1, WARM_HEAP_BYTES);
        free(h);
        touch_stack(WARM_STACK_BYTES);
    }
}

remat_status cpu_ctx_new(int threads, struct cpu_ctx **out)
{
    struct cpu_ctx *c;
    remat_status st = REMAT_OK;

    *out = NULL;
    if (threads < 0)
        return REMAT_FAIL(REMAT_ERR_ARG, "cpu backend: %d threads", threads);
    c = calloc(1, sizeof *c);
    if (!c)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "cpu backend: out of memory");
    c->threads = threads ? threads : omp_get_num_procs();
    {
        const char *bn = getenv("REMAT_CPU_BN");

        c->bn_onednn = bn && !strcmp(bn, "onednn");
    }
    cpu_ctx_threads(c);
    cpu_warm(c->threads);
    c->block4 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) ==
                        dnnl_cpu_isa_avx512_core
                    ? dnnl_nChw16c
                    : dnnl_nChw8c;
    CPU_TRY(dnnl_engine_create(&c->engine, dnnl_cpu, 0));
    CPU_TRY(dnnl_stream_create(&c->stream, c->engine, dnnl_stream_in_order));
    *out = c;
    return REMAT_OK;
fail:
    cpu_ctx_free(c);
    return st;
}

void cpu_ctx_free(struct cpu_ctx *c)
{
    if (!c)
        return;
    cpu_cache_free(c);
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    free(c->scratch);
    free(c);
}

void cpu_ctx_threads(const struct cpu_ctx *c)
{
    omp_set_num_threads(c->threads);
}
