/*
 * linear.c - the fully connected layer on oneDNN's matmul primitive, forward and
 * backward.
 *
 * x is read as (N, F) with F = numel / N, W (O, F), b (O), y (N, O): y = x W^T + b, one
 * matmul whose weights are W read transposed (strides (1, F)) and whose bias is b. The
 * backward adds with the matmul's sum post-op (dst = product + dst, one rounding):
 * dx += dy W and dW += dy^T x (dy read transposed), each only when wanted; db += the
 * column sums of dy, a threaded loop of our own (bias_grad). The products' scratch is
 * their oneDNN scratchpads alone, which the cache places in the op's scratch.
 *
 * Why not the inner product primitive: its one fast implementation here ("x64:gemm:jit")
 * runs oneDNN's GEMM driver, which mallocs its packing buffers (about 3 MB for a GPT-2
 * projection) outside the plan's budget; the matmul primitive's brgemm takes them as a
 * scratchpad. Where oneDNN offers no matmul but the GEMM driver's (cpu_matmul_pd: a CPU
 * without AVX-512) an entry falls back to the inner product, as before, computing each
 * gradient into scratch regions and adding it (cpu_weighted_backward); that path's
 * packing buffers are outside the plan.
 *
 * Determinism: each primitive's partition of the work depends on the shapes and the
 * thread count only; bias_grad sums each column over the rows in order, in double.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

/* Descriptors of x, W, b (zeroed without bias), y, and the forward descriptor. */
static remat_status descs(const struct kop *op, dnnl_memory_desc_t *x, dnnl_memory_desc_t *w,
                          dnnl_memory_desc_t *b, dnnl_memory_desc_t *y,
                          dnnl_inner_product_desc_t *fd)
{
    int64_t n = op->in[0].shape[0], o = op->w.shape[0];
    int64_t xd[2] = {n, ktensor_numel(&op->in[0]) / n}, wd[2] = {o, xd[1]}, yd[2] = {n, o};
    remat_status st;

    REMAT_ASSERT(op->w.ndim == 2 && op->w.shape[1] == xd[1]);
    memset(b, 0, sizeof *b);
    if ((st = cpu_md(x, 2, xd, dnnl_nc)) || (st = cpu_md(w, 2, wd, dnnl_oi)) ||
        (st = cpu_md(y, 2, yd, dnnl_nc)) || (op->b.data && (st = cpu_md(b, 1, &o, dnnl_a))))
        return st;
    CPU_TRY(dnnl_inner_product_forward_desc_init(fd, dnnl_forward_training, x, w, b, y));
fail:
    return st;
}

/* The inner product forward (the fallback): prim[0]. */
static remat_status ip_fwd(struct cpu_ctx *c, const struct kop *op, struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    dnnl_memory_desc_t x, w, b, y;
    dnnl_inner_product_desc_t d;
    remat_status st;

    if ((st = descs(op, &x, &w, &b, &y, &d)))
        return st;
    return cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 4);
}

/* The inner product backward (the fallback): prim[0] backward data (W_DX), prim[1]
 * backward weights (W_DW | W_DB); regions n[0] dx, n[1] dW, n[2] db (-1: none). */
static remat_status ip_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                           struct cpu_entry *e)
{
    static const int data_args[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
    static const int wei_args[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS,
                                   DNNL_ARG_DIFF_BIAS};
    dnnl_memory_desc_t x, w, b, y, db;
    dnnl_inner_product_desc_t fd, d;
    dnnl_primitive_desc_t hint = NULL;
    int64_t o = op->w.shape[0];
    remat_status st;

    e->n[0] = e->n[1] = e->n[2] = -1;
    if ((st = descs(op, &x, &w, &b, &y, &fd)) || (st = cpu_pd_make(c, &fd, NULL, &hint)))
        return st;
    if (want & W_DX) {
        CPU_TRY(dnnl_inner_product_backward_data_desc_init(&d, &x, &w, &y));
        if ((st = cpu_prim_make(c, e, &e->prim[0], &d, hint, data_args, 3)))
            goto fail;
        e->n[0] = cpu_region(e, ktensor_numel(&op->in[0]));
    }
    if (want & (W_DW | W_DB)) {
        memset(&db, 0, sizeof db);
        if ((want & W_DB) && (st = cpu_md(&db, 1, &o, dnnl_a)))
            goto fail;
        CPU_TRY(dnnl_inner_product_backward_weights_desc_init(&d, &x, &w, &db, &y));
        if ((st = cpu_prim_make(c, e, &e->prim[1], &d, hint, wei_args, 4)))
            goto fail;
        e->n[1] = cpu_region(e, ktensor_numel(&op->w));
        if (want & W_DB)
            e->n[2] = cpu_region(e, o);
    }
fail:
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return st;
}

/* A 2-d descriptor of a (rows, cols) matrix stored row-major, or transposed (stored
 * (cols, rows)). */
static remat_status mat_md(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, bool t)
{
    dnnl_dims_t d = {rows, cols}, str = {t ? 1 : cols, t ? rows : 1};
    remat_status st = REMAT_OK;

    CPU_TRY(dnnl_memory_desc_init_by_strides(md, 2, d, dnnl_f32, str));
fail:
    return st;
}

/* The forward entry: prim[0] y = x W^T + b on the matmul primitive (n[3] 1), or on the
 * inner product (n[3] 0). */
static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    int64_t n = op->in[0].shape[0], f = ktensor_numel(&op->in[0]) / n, o = op->w.shape[0];
    dnnl_memory_desc_t x, wt, b, y;
    dnnl_primitive_desc_t pd;
    remat_status st;

    (void)want;
    REMAT_ASSERT(op->w.ndim == 2 && op->w.shape[1] == f);
    if ((st = mat_md(&x, n, f, false)) || (st = mat_md(&wt, f, o, true)) ||
        (st = mat_md(&b, 1, o, false)) || (st = mat_md(&y, n, o, false)) ||
        (st = cpu_matmul_pd(c, &x, &wt, op->b.data ? &b : NULL, &y, false, &pd)))
        return st;
    e->n[3] = pd != NULL;
    return pd ? cpu_prim_from_pd(c, e, &e->prim[0], pd, args, 4) : ip_fwd(c, op, e);
}

remat_status cpu_linear_forward(struct cpu_ctx *c, const struct kop *op)
{
    return cpu_weighted_forward(c, op, build_fwd);
}

/* The backward entry: on the matmul primitive (n[3] 1) prim[0] dx += dy W (W_DX),
 * prim[1] dW += dy^T x (W_DW); db needs no primitive. When either product has no
 * implementation but the GEMM driver's, the whole entry is the inner product's (n[3]
 * 0, ip_bwd). */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    int64_t n = op->in[0].shape[0], f = ktensor_numel(&op->in[0]) / n, o = op->w.shape[0];
    dnnl_memory_desc_t dy, dyt, w, x, dx, dw;
    dnnl_primitive_desc_t pdx = NULL, pdw = NULL;
    remat_status st;

    if ((st = mat_md(&dy, n, o, false)) || (st = mat_md(&dyt, o, n, true)) ||
        (st = mat_md(&w, o, f, false)) || (st = mat_md(&x, n, f, false)) ||
        (st = mat_md(&dx, n, f, false)) || (st = mat_md(&dw, o, f, false)))
        return st;
    if ((want & W_DX) && (st = cpu_matmul_pd(c, &dy, &w, NULL, &dx, true, &pdx)))
        goto fail;
    if ((want & W_DW) && (st = cpu_matmul_pd(c, &dyt, &x, NULL, &dw, true, &pdw)))
        goto fail;
    e->n[3] = (!(want & W_DX) || pdx) && (!(want & W_DW) || pdw);
    if (!e->n[3]) {
        st = ip_bwd(c, op, want, e);
        goto fail;
    }
    if (pdx) {
        st = cpu_prim_from_pd(c, e, &e->prim[0], pdx, args, 3);
        pdx = NULL; /* destroyed there */
        if (st)
            goto fail;
    }
    if (pdw) {
        st = cpu_prim_from_pd(c, e, &e->prim[1], pdw, args, 3);
        pdw = NULL;
    }
fail:
    if (pdx)
        dnnl_primitive_desc_destroy(pdx);
    if (pdw)
        dnnl_primitive_desc_destroy(pdw);
    return st;
}

/* Columns of dy one bias_grad task sums: its double sums stay in registers and L1. */
#define DB_COLS 64

/* db[j] += sum_i dy[i, j] over the n rows, in order, in double; column blocks on the
 * context's threads (the bits do not depend on how many). */
static void bias_grad(const struct cpu_ctx *c, float *db, const float *dy, int64_t n,
                      int64_t o)
{
    /* dy: (N, O); db: (O) */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads)
#endif
    for (int64_t j0 = 0; j0 < o; j0 += DB_COLS) {
        int64_t nj = o - j0 < DB_COLS ? o - j0 : DB_COLS;
        double acc[DB_COLS] = {0};

        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < nj; j++)
                acc[j] += dy[i * o + j0 + j];
        for (int64_t j = 0; j < nj; j++)
            db[j0 + j] += (float)acc[j];
    }
}

remat_status cpu_linear_backward(struct cpu_ctx *c, const struct kop *op)
{
    unsigned want = (op->din[0].data ? W_DX : 0) | (op->dw.data ? W_DW : 0) |
                    (op->db.data ? W_DB : 0);
    int64_t n = op->in[0].shape[0];
    struct cpu_entry *e;
    remat_status st;

    if (!want)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, want, build_bwd, &e)))
        return st;
    if (!e->n[3]) /* the inner product: finds the same entry */
        return cpu_weighted_backward(c, op, build_bwd);
    if (c->dry)
        return REMAT_OK;
    if ((want & W_DX) &&
        (st = cpu_prim_run(c, e, &e->prim[0],
                           (const struct cpu_bind[]){{DNNL_ARG_SRC, op->dout.data},
                                                     {DNNL_ARG_WEIGHTS, op->w.data},
                                                     {DNNL_ARG_DST, op->din[0].data}},
                           3)))
        return st;
    if ((want & W_DW) &&
        (st = cpu_prim_run(c, e, &e->prim[1],
                           (const struct cpu_bind[]){{DNNL_ARG_SRC, op->dout.data},
                                                     {DNNL_ARG_WEIGHTS, op->in[0].data},
                                                     {DNNL_ARG_DST, op->dw.data}},
                           3)))
        return st;
    if (want & W_DB)
        bias_grad(c, op->db.data, op->dout.data, n, op->w.shape[0]);
    return REMAT_OK;
}
