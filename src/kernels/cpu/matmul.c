/*
 * matmul.c - the batched matrix product on oneDNN's GEMM (dnnl_sgemm), forward and
 * backward, for the transformer's projections and attention.
 *
 * Shapes as the reference (ref/matmul.c): A (..., M, K), B (..., K, N) with the same
 * leading axes, or B 2-d (K, N) shared by every batch (also when B is a parameter: tied
 * weights, kop_matmul_b), either read transposed. Every product is one dnnl_sgemm on
 * row-major matrices, the transposes its 'T' flags on the stored layouts:
 * - a shared B with A not transposed folds the batches into the rows: one GEMM of
 *   (nb M, K) x (K, N) forward, one for dA, and one for dB = A^T dY whose inner
 *   dimension nb M sums over the batches as well;
 * - otherwise one GEMM per batch, the batches split across the context's threads
 *   (each GEMM on one thread: oneDNN runs sequentially inside a parallel region) when
 *   they are small or share out evenly (attention's per-head products: 450 GFLOP/s
 *   for (96, 1024, 64) x (96, 64, 1024), where one GEMM after the other on both
 *   threads drops to tens of GFLOP/s for some of the backward's transposes and suffers
 *   more from a busy core), else one after the other on all the threads. A shared B's
 *   dB under a transposed A runs its batches in order (they add into one matrix).
 * Gradients accumulate with beta = 1: dnnl_sgemm adds A B into the destination.
 *
 * Scratch: none (oneDNN's GEMM packs into buffers of its own). Cost: 2 M N K flops per
 * batch and pass; about 460 GFLOP/s for GPT-2's projections on 2 AVX-512 cores.
 * Determinism: which GEMMs run, and on how many threads each, is a function of the
 * shapes and the context's thread count alone, and oneDNN's GEMM partitions its work
 * by the same: two runs give the same bits.
 */
#include "kernels/cpu/cpu.h"

#include <omp.h>
#include <string.h>

/* A batch's product at most this many multiply-adds splits the batches across the
 * threads (one GEMM each) even when they share out unevenly. */
#define MM_SPLIT_MAX ((int64_t)1 << 24)

/* One product per batch: c[t] = op(a[t]) op(b[t]) + beta c[t], t < nb; strides
 * between batches in elements (0: the same matrix for every batch). */
struct gemm {
    char ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    const float *a, *b;
    float *c;
    int64_t sa, sb, sc, nb;
    float beta;
};

static dnnl_status_t gemm_one(const struct gemm *g, int64_t t)
{
    return dnnl_sgemm(g->ta, g->tb, g->m, g->n, g->k, 1.0f, g->a + t * g->sa, g->lda,
                      g->b + t * g->sb, g->ldb, g->beta, g->c + t * g->sc, g->ldc);
}

/* True when g's batches run on one thread each (see the file comment): they write
 * apart, and either each is small or they share out evenly among the threads. */
static bool gemm_split(const struct cpu_ctx *c, const struct gemm *g)
{
    int64_t t = c->threads;

    if (t < 2 || g->nb < 2 || g->sc == 0)
        return false;
    return g->m * g->n * g->k <= MM_SPLIT_MAX || g->nb % t == 0 || g->nb >= 8 * t;
}

/* Runs g's nb products. */
static remat_status gemm_run(const struct cpu_ctx *c, const struct gemm *g)
{
    remat_status st = REMAT_OK;
    int bad = 0;

    if (g->m == 0 || g->n == 0 || g->nb == 0)
        return REMAT_OK;
    if (gemm_split(c, g)) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads) reduction(| : bad)
#endif
        for (int64_t t = 0; t < g->nb; t++)
            bad |= gemm_one(g, t) != dnnl_success;
        CPU_TRY(bad ? dnnl_invalid_arguments : dnnl_success);
        return REMAT_OK;
    }
    for (int64_t t = 0; t < g->nb; t++)
        CPU_TRY(gemm_one(g, t));
fail:
    return st;
}

/* The sizes of op's products (as ref/matmul.c). */
struct mmg {
    int64_t nb, m, k, n;
    int64_t sa, sb, sy; /* elements between batches; sb 0: B shared */
    bool ta, tb;
    int64_t lda, ldb;   /* the row strides of A and B as stored */
};

static struct mmg mmg_of(const struct kop *op)
{
    struct kmm k = kop_matmul_geom(op);

    return (struct mmg){k.nb, k.m, k.k, k.n, k.sa, k.sb, k.sy, k.ta, k.tb,
                        k.ta ? k.m : k.k, k.tb ? k.k : k.n};
}

/* True when the batches fold into the rows of one product (shared B, A as stored). */
static bool folds(const struct mmg *g)
{
    return g->sb == 0 && !g->ta;
}

/* y = op(A) op(B) per batch. */
remat_status cpu_matmul_forward(struct cpu_ctx *c, const struct kop *op)
{
    /* A: (nb, M, K) or (nb, K, M); B: (nb, K, N), (nb, N, K) or 2-d; y: (nb, M, N) */
    struct mmg g = mmg_of(op);
    struct gemm m = {g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, g.lda, g.ldb, g.n,
                     op->in[0].data, kop_matmul_b(op)->data, op->out.data,
                     g.sa, g.sb, g.sy, g.nb, 0.0f};

    if (c->dry)
        return REMAT_OK;
    if (g.k == 0) {
        memset(op->out.data, 0, sizeof(float) * (size_t)ktensor_numel(&op->out));
        return REMAT_OK;
    }
    if (folds(&g)) {
        m.m = g.nb * g.m;
        m.nb = 1;
    }
    return gemm_run(c, &m);
}

/* dA += dY op(B)^T (A as stored), or dA += op(B) dY^T (A stored transposed). */
static remat_status grad_a(const struct cpu_ctx *c, const struct kop *op, const struct mmg *g)
{
    const float *b = kop_matmul_b(op)->data, *dy = op->dout.data;
    float *da = op->din[0].data;
    struct gemm m;

    if (!g->ta) {
        /* (M, N) x (N, K) */
        m = (struct gemm){'N', g->tb ? 'N' : 'T', g->m, g->k, g->n, g->n, g->ldb, g->k,
                          dy, b, da, g->sy, g->sb, g->sa, g->nb, 1.0f};
        if (folds(g)) {
            m.m = g->nb * g->m;
            m.nb = 1;
        }
    } else {
        /* (K, N) x (N, M) */
        m = (struct gemm){g->tb ? 'T' : 'N', 'T', g->k, g->m, g->n, g->ldb, g->n, g->m,
                          b, dy, da, g->sb, g->sy, g->sa, g->nb, 1.0f};
    }
    return gemm_run(c, &m);
}

/* dB += op(A)^T dY (B as stored), or dB += dY^T op(A) (B stored transposed); a shared
 * B sums over the batches. */
static remat_status grad_b(const struct cpu_ctx *c, const struct kop *op, const struct mmg *g)
{
    const float *a = op->in[0].data, *dy = op->dout.data;
    float *db = kop_matmul_db(op)->data;
    struct gemm m;

    if (!g->tb)
        /* (K, M) x (M, N) */
        m = (struct gemm){g->ta ? 'N' : 'T', 'N', g->k, g->n, g->m, g->lda, g->n, g->n,
                          a, dy, db, g->sa, g->sy, g->sb, g->nb, 1.0f};
    else
        /* (N, M) x (M, K) */
        m = (struct gemm){'T', g->ta ? 'T' : 'N', g->n, g->k, g->m, g->n, g->lda, g->k,
                          dy, a, db, g->sy, g->sa, g->sb, g->nb, 1.0f};
    if (folds(g)) {
        m.k = g->nb * g->m; /* the inner dimension runs over every batch's rows */
        m.nb = 1;
    }
    return gemm_run(c, &m);
}

remat_status cpu_matmul_backward(struct cpu_ctx *c, const struct kop *op)
{
    struct mmg g = mmg_of(op);
    remat_status st;

    if (c->dry || g.k == 0)
        return REMAT_OK;
    if (op->din[0].data && (st = grad_a(c, op, &g)))
        return st;
    if (kop_matmul_db(op)->data && (st = grad_b(c, op, &g)))
        return st;
    return REMAT_OK;
}
