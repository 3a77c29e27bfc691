/*
 * matmul.c - the batched matrix product on oneDNN's matmul primitive, forward and
 * backward, for the transformer's projections and attention.
 *
 * Shapes as the reference (ref/matmul.c): A (..., M, K), B (..., K, N) with the same
 * leading axes, or B 2-d (K, N) shared by every batch (also when B is a parameter: tied
 * weights, kop_matmul_b), either read transposed. Each product (the forward's y, the
 * backward's dA and dB) is described as a row-major GEMM over nb batches (struct gemm:
 * the transposes its 'T' flags on the stored layouts) and made into one oneDNN matmul
 * of 3-d tensors (batch, rows, columns) whose strides say the transposes; a matrix
 * shared by the batches is a batch axis of 1, which oneDNN broadcasts:
 * - a shared B with A not transposed folds the batches into the rows: one product of
 *   (nb M, K) x (K, N) forward, one for dA, and one for dB = A^T dY whose inner
 *   dimension nb M sums over the batches as well;
 * - otherwise one batched product; a shared B's dB under a transposed A runs the
 *   batches one after the other into the one matrix.
 * Gradients accumulate through the sum post-op: dst = A B + dst, one rounding. An inner
 * dimension longer than 4096 runs in chunks of 2048 in order, each adding into the
 * destination (prod_make says why).
 *
 * Why the matmul primitive and not dnnl_sgemm: the GEMM driver mallocs its own packing
 * buffers (31 MB for GPT-2's tied output projection at batch 4), outside the plan's
 * budget; the matmul primitive's brgemm implementation takes its scratch as a user
 * scratchpad, which the cache places in the op's scratch (cpu_prepare counts it: 200 KB
 * for that projection). Where oneDNN offers no such implementation (a CPU without
 * AVX-512, cpu_matmul_pd) the product runs on dnnl_sgemm as before, and that path's
 * packing buffers are outside the plan: its batches split across the context's threads
 * (each GEMM on one thread) when they are small or share out evenly, else one GEMM
 * after the other on all the threads.
 *
 * Cost: 2 M N K flops per batch and pass. Determinism: the primitive, its partition of
 * the work and the order of its sums are functions of the shapes and the context's
 * thread count alone (and so is the fallback's), whatever the buffers' addresses: two
 * runs give the same bits, under any plan.
 */
#include "kernels/cpu/cpu.h"

#include <omp.h>
#include <string.h>

/* The fallback on dnnl_sgemm: a batch's product at most this many multiply-adds
 * splits the batches across the threads (one GEMM each) even when they share out
 * unevenly. */
#define MM_SPLIT_MAX ((int64_t)1 << 24)

/* One product per batch: c[t] = op(a[t]) op(b[t]) + beta c[t], t < nb; strides
 * between batches in elements (0: the same matrix for every batch); beta 0 or 1. */
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

/* Runs g's nb products on dnnl_sgemm (the fallback). */
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
static struct gemm fwd_gemm(const struct kop *op, const struct mmg *g)
{
    /* A: (nb, M, K) or (nb, K, M); B: (nb, K, N), (nb, N, K) or 2-d; y: (nb, M, N) */
    struct gemm m = {g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m, g->n, g->k, g->lda, g->ldb,
                     g->n, op->in[0].data, kop_matmul_b(op)->data, op->out.data,
                     g->sa, g->sb, g->sy, g->nb, 0.0f};

    if (folds(g)) {
        m.m = g->nb * g->m;
        m.nb = 1;
    }
    return m;
}

/* dA += dY op(B)^T (A as stored), or dA += op(B) dY^T (A stored transposed). */
static struct gemm grad_a_gemm(const struct kop *op, const struct mmg *g)
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
    return m;
}

/* dB += op(A)^T dY (B as stored), or dB += dY^T op(A) (B stored transposed); a shared
 * B sums over the batches. */
static struct gemm grad_b_gemm(const struct kop *op, const struct mmg *g)
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
    return m;
}

/* Batches of one execution of g's primitive: all of them, or one at a time when they
 * add into one matrix (sc 0), which oneDNN's dst cannot broadcast. */
static int64_t gemm_batch(const struct gemm *g)
{
    return g->sc ? g->nb : 1;
}

/* A 3-d descriptor of nb matrices (rows, cols), row stride ld, transposed ('T': the
 * stored matrix is (cols, rows)), s elements apart (0: one matrix for all). A batch
 * axis of 1 gets the stride of a whole matrix: brgemm refuses a smaller one (a folded
 * product's s is one batch's, less than its rows). */
static remat_status mat_md(dnnl_memory_desc_t *md, int64_t nb, int64_t rows, int64_t cols,
                           char t, int64_t ld, int64_t s)
{
    dnnl_dims_t d = {s && nb > 1 ? nb : 1, rows, cols};
    dnnl_dims_t str = {d[0] > 1 ? s : rows * cols, t == 'T' ? 1 : ld, t == 'T' ? ld : 1};
    remat_status st = REMAT_OK;

    CPU_TRY(dnnl_memory_desc_init_by_strides(md, 3, d, dnnl_f32, str));
fail:
    return st;
}

/* The inner dimension of one execution: a product whose inner dimension is longer
 * than MM_K_SPLIT runs in chunks of MM_KC (the last one shorter), each adding into the
 * destination. brgemm keeps a block of B for a block of rows across the whole inner
 * dimension, so a long one (GPT-2's tied output projection's dA: 50,257) streams all of B
 * once per block of rows; in chunks a chunk of B stays in cache across the rows. dA
 * there, 1024 x 50,257 by 50,257 x 384 on 2 threads: 250 ms of CPU time in one piece,
 * 163 ms in chunks of 2048 (dnnl_sgemm 165 to 183 ms). */
#define MM_KC 2048
#define MM_K_SPLIT 4096

static int64_t gemm_kc(const struct gemm *g)
{
    return g->k > MM_K_SPLIT ? MM_KC : g->k;
}

/* Makes p: g's product over an inner dimension of k (a chunk of g->k), adding into the
 * destination with acc. *found false when oneDNN has no implementation but the GEMM
 * driver's (p untouched). */
static remat_status chunk_make(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                               const struct gemm *g, int64_t k, bool acc, bool *found)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    int64_t nb = gemm_batch(g);
    dnnl_memory_desc_t a, b, y;
    dnnl_primitive_desc_t pd;
    remat_status st;

    if ((st = mat_md(&a, nb, g->m, k, g->ta, g->lda, g->sa)) ||
        (st = mat_md(&b, nb, k, g->n, g->tb, g->ldb, g->sb)) ||
        (st = mat_md(&y, nb, g->m, g->n, 'N', g->ldc, g->sc)) ||
        (st = cpu_matmul_pd(c, &a, &b, NULL, &y, acc, &pd)))
        return st;
    *found = pd != NULL;
    return pd ? cpu_prim_from_pd(c, e, p, pd, args, 3) : REMAT_OK;
}

/* Makes product i of e for g: prim[i] over an inner dimension of gemm_kc(g), and
 * prim[i + 2] over the last, shorter chunk where there is one. e->n[i] 1 on the matmul
 * primitive, 0 on the fallback (no implementation but the GEMM driver's), -1 nothing to
 * compute. Chunks add into the destination (a forward's is zeroed first). */
static remat_status prod_make(struct cpu_ctx *c, struct cpu_entry *e, int i,
                              const struct gemm *g)
{
    int64_t kc = gemm_kc(g), rest = g->k % kc;
    bool acc = g->beta != 0.0f || kc < g->k, found = false, found2 = true;
    remat_status st;

    REMAT_ASSERT(i + 2 < CPU_MAX_PRIM);
    e->n[i] = -1;
    if (g->m == 0 || g->n == 0 || g->nb == 0 || g->k == 0)
        return REMAT_OK;
    if ((st = chunk_make(c, e, &e->prim[i], g, kc, acc, &found)))
        return st;
    if (found && rest && (st = chunk_make(c, e, &e->prim[i + 2], g, rest, acc, &found2)))
        return st;
    e->n[i] = found && found2;
    return REMAT_OK;
}

/* Runs product i of e: the batches in one execution, or one after the other; each in
 * its chunks of the inner dimension, in order. */
static remat_status prod_run(struct cpu_ctx *c, const struct cpu_entry *e, int i,
                             const struct gemm *g)
{
    int64_t kc = gemm_kc(g);
    /* elements between two chunks of A and of B */
    int64_t ca = kc * (g->ta == 'T' ? g->lda : 1), cb = kc * (g->tb == 'T' ? 1 : g->ldb);
    remat_status st;

    if (e->n[i] < 0)
        return REMAT_OK;
    if (e->n[i] == 0)
        return gemm_run(c, g);
    if (g->beta == 0.0f && kc < g->k)
        cpu_zero(c, g->c, sizeof(float) * (size_t)(gemm_batch(g) * g->m * g->ldc));
    for (int64_t t = 0; t < (g->sc ? 1 : g->nb); t++)
        for (int64_t j = 0; j * kc < g->k; j++) {
            const struct cpu_bind b[] = {
                {DNNL_ARG_SRC, (void *)(uintptr_t)(g->a + t * g->sa + j * ca)},
                {DNNL_ARG_WEIGHTS, (void *)(uintptr_t)(g->b + t * g->sb + j * cb)},
                {DNNL_ARG_DST, g->c}};

            if ((st = cpu_prim_run(c, e, &e->prim[(j + 1) * kc <= g->k ? i : i + 2], b, 3)))
                return st;
        }
    return REMAT_OK;
}

/* The forward entry: prim[0] makes y (n[0]). */
static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    struct mmg g = mmg_of(op);
    struct gemm m = fwd_gemm(op, &g);

    (void)want;
    return prod_make(c, e, 0, &m);
}

remat_status cpu_matmul_forward(struct cpu_ctx *c, const struct kop *op)
{
    struct mmg g = mmg_of(op);
    struct gemm m = fwd_gemm(op, &g);
    struct cpu_entry *e;
    remat_status st;

    if (g.k == 0) {
        if (!c->dry)
            memset(op->out.data, 0, sizeof(float) * (size_t)ktensor_numel(&op->out));
        return REMAT_OK;
    }
    if ((st = cpu_entry_get(c, op, CPU_PASS_FWD, 0, build_fwd, &e)) || c->dry)
        return st;
    return prod_run(c, e, 0, &m);
}

/* The backward entry: prim[0] adds into dA (W_DX), prim[1] into dB (W_DW); n[0], n[1]
 * as prod_make says (-1 also when not wanted). */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    struct mmg g = mmg_of(op);
    struct gemm da = grad_a_gemm(op, &g), db = grad_b_gemm(op, &g);
    remat_status st;

    e->n[0] = e->n[1] = -1;
    if ((want & W_DX) && (st = prod_make(c, e, 0, &da)))
        return st;
    if ((want & W_DW) && (st = prod_make(c, e, 1, &db)))
        return st;
    return REMAT_OK;
}

remat_status cpu_matmul_backward(struct cpu_ctx *c, const struct kop *op)
{
    struct mmg g = mmg_of(op);
    unsigned want = (op->din[0].data ? W_DX : 0) | (kop_matmul_db(op)->data ? W_DW : 0);
    struct gemm da = grad_a_gemm(op, &g), db = grad_b_gemm(op, &g);
    struct cpu_entry *e;
    remat_status st;

    if (!want || g.k == 0)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, want, build_bwd, &e)) || c->dry)
        return st;
    if ((want & W_DX) && (st = prod_run(c, e, 0, &da)))
        return st;
    if ((want & W_DW) && (st = prod_run(c, e, 1, &db)))
        return st;
    return REMAT_OK;
}
