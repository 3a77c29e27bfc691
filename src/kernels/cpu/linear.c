/*
 * linear.c - the fully connected layer on oneDNN's inner product, forward and backward.
 *
 * x is read as (N, F) with F = numel / N (oneDNN nc), W (O, F) as oi, b (O), y (N, O).
 * The backward computes dx (backward data) and dW, db (backward weights, db only when
 * wanted) into scratch, each only when wanted, and adds them into the gradients.
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

static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    dnnl_memory_desc_t x, w, b, y;
    dnnl_inner_product_desc_t d;
    remat_status st;

    (void)want;
    if ((st = descs(op, &x, &w, &b, &y, &d)))
        return st;
    return cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 4);
}

remat_status cpu_linear_forward(struct cpu_ctx *c, const struct kop *op)
{
    return cpu_weighted_forward(c, op, build_fwd);
}

/* prim[0]: backward data (W_DX), prim[1]: backward weights (W_DW | W_DB); regions
 * n[0] dx, n[1] dW, n[2] db (-1: none). */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
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

remat_status cpu_linear_backward(struct cpu_ctx *c, const struct kop *op)
{
    return cpu_weighted_backward(c, op, build_bwd);
}
