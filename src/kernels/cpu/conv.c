/*
 * conv.c - conv2d and conv_transpose2d on oneDNN, forward and backward.
 *
 * Tensors stay in their NCHW buffers (plain oneDNN formats, no reorders). conv2d is
 * oneDNN's convolution with weights (Cout, Cin/groups, kh, kw) read as oihw, or goihw
 * split per group. conv_transpose2d is oneDNN's deconvolution, whose weights are
 * (Cout, Cin) per group: our PyTorch-layout weight (Cin, Cout/groups, kh, kw) is the
 * same memory read as iohw (giohw per group), so no copy is made. Dilation is PyTorch's
 * minus one. Padding: conv2d pads ph on both sides as PyTorch does (rows past the last
 * whole window are never read); conv_transpose2d pads ph - out_pad on the right, which
 * is what makes oneDNN's output size the PyTorch one (Ho = (Hi-1) sh - 2 ph +
 * dh (kh-1) + out_pad + 1), the extra rows getting the bias only; that padding is
 * negative when out_pad > ph, which oneDNN accepts (tests/test_cpu.c checks it).
 *
 * The backward computes dx (backward data), dw and db (backward weights, both at once)
 * into scratch, each only when wanted, and adds them into the gradients.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

struct cgeo {
    bool transposed;
    int64_t src[4], dst[4], wdims[5], bdims[1];
    int wnd;
    dnnl_format_tag_t wtag;
    dnnl_dims_t strides, dil, pl, pr;
};

/* v, or 1 when left 0 (stride, dilation, groups). */
static int64_t or1(int32_t v)
{
    return v > 0 ? v : 1;
}

/* The oneDNN view of op (see the file comment). */
static struct cgeo geo(const struct kop *op)
{
    const remat_attrs *at = op->at;
    struct cgeo g = {.transposed = op->type == REMAT_OP_CONV_TRANSPOSE2D};
    int64_t groups = or1(at->groups), cin = op->in[0].shape[1], cout = op->out.shape[1];

    REMAT_ASSERT(op->in[0].ndim == 4 && op->out.ndim == 4 && op->w.ndim == 4);
    for (int i = 0; i < 4; i++) {
        g.src[i] = op->in[0].shape[i];
        g.dst[i] = op->out.shape[i];
    }
    g.bdims[0] = cout;
    if (groups == 1) {
        g.wnd = 4;
        g.wdims[0] = cout;
        g.wdims[1] = cin;
        g.wtag = g.transposed ? dnnl_iohw : dnnl_oihw;
    } else {
        g.wnd = 5;
        g.wdims[0] = groups;
        g.wdims[1] = cout / groups;
        g.wdims[2] = cin / groups;
        g.wtag = g.transposed ? dnnl_giohw : dnnl_goihw;
    }
    g.wdims[g.wnd - 2] = at->kh;
    g.wdims[g.wnd - 1] = at->kw;
    g.strides[0] = or1(at->sh);
    g.strides[1] = or1(at->sw);
    g.dil[0] = or1(at->dh) - 1;
    g.dil[1] = or1(at->dw) - 1;
    g.pl[0] = at->ph;
    g.pl[1] = at->pw;
    g.pr[0] = at->ph - (g.transposed ? at->out_pad_h : 0);
    g.pr[1] = at->pw - (g.transposed ? at->out_pad_w : 0);
    return g;
}

/* Memory descriptors of g: x, y, w and b (b zeroed when the op has no bias). */
static remat_status mds(const struct cgeo *g, bool bias, dnnl_memory_desc_t *x,
                        dnnl_memory_desc_t *y, dnnl_memory_desc_t *w, dnnl_memory_desc_t *b)
{
    remat_status st;

    memset(b, 0, sizeof *b);
    if ((st = cpu_md(x, 4, g->src, dnnl_nchw)) || (st = cpu_md(y, 4, g->dst, dnnl_nchw)) ||
        (st = cpu_md(w, g->wnd, g->wdims, g->wtag)))
        return st;
    return bias ? cpu_md(b, 1, g->bdims, dnnl_a) : REMAT_OK;
}

/* The forward descriptor (prop forward_training), the backward's hint too. */
static remat_status fwd_desc(const struct cgeo *g, const dnnl_memory_desc_t *x,
                             const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *b,
                             const dnnl_memory_desc_t *y, dnnl_convolution_desc_t *d)
{
    remat_status st = REMAT_OK;

    if (g->transposed)
        CPU_TRY(dnnl_dilated_deconvolution_forward_desc_init(
            d, dnnl_forward_training, dnnl_deconvolution_direct, x, w, b, y, g->strides,
            g->dil, g->pl, g->pr));
    else
        CPU_TRY(dnnl_dilated_convolution_forward_desc_init(
            d, dnnl_forward_training, dnnl_convolution_direct, x, w, b, y, g->strides,
            g->dil, g->pl, g->pr));
fail:
    return st;
}

static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    struct cgeo g = geo(op);
    dnnl_memory_desc_t x, y, w, b;
    dnnl_convolution_desc_t d;
    remat_status st;

    (void)want;
    if ((st = mds(&g, op->b.data != NULL, &x, &y, &w, &b)) ||
        (st = fwd_desc(&g, &x, &w, &b, &y, &d)))
        return st;
    return cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 4);
}

remat_status cpu_conv_forward(struct cpu_ctx *c, const struct kop *op)
{
    return cpu_weighted_forward(c, op, build_fwd);
}

/* prim[0]: backward data (W_DX), prim[1]: backward weights (W_DW | W_DB); regions
 * n[0] dx, n[1] dw, n[2] db (-1: none). */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int data_args[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
    static const int wei_args[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS,
                                   DNNL_ARG_DIFF_BIAS};
    struct cgeo g = geo(op);
    dnnl_memory_desc_t x, y, w, b, db;
    dnnl_convolution_desc_t fd, d;
    dnnl_primitive_desc_t hint = NULL;
    remat_status st;

    e->n[0] = e->n[1] = e->n[2] = -1;
    if ((st = mds(&g, op->b.data != NULL, &x, &y, &w, &b)) ||
        (st = fwd_desc(&g, &x, &w, &b, &y, &fd)))
        return st;
    if ((st = cpu_pd_make(c, &fd, NULL, &hint)))
        return st;
    if (want & W_DX) {
        if (g.transposed)
            CPU_TRY(dnnl_dilated_deconvolution_backward_data_desc_init(
                &d, dnnl_deconvolution_direct, &x, &w, &y, g.strides, g.dil, g.pl, g.pr));
        else
            CPU_TRY(dnnl_dilated_convolution_backward_data_desc_init(
                &d, dnnl_convolution_direct, &x, &w, &y, g.strides, g.dil, g.pl, g.pr));
        if ((st = cpu_prim_make(c, e, &e->prim[0], &d, hint, data_args, 3)))
            goto fail;
        e->n[0] = cpu_region(e, ktensor_numel(&op->in[0]));
    }
    if (want & (W_DW | W_DB)) {
        memset(&db, 0, sizeof db);
        if ((want & W_DB) && (st = cpu_md(&db, 1, g.bdims, dnnl_a)))
            goto fail;
        if (g.transposed)
            CPU_TRY(dnnl_dilated_deconvolution_backward_weights_desc_init(
                &d, dnnl_deconvolution_direct, &x, &w, &db, &y, g.strides, g.dil, g.pl,
                g.pr));
        else
            CPU_TRY(dnnl_dilated_convolution_backward_weights_desc_init(
                &d, dnnl_convolution_direct, &x, &w, &db, &y, g.strides, g.dil, g.pl, g.pr));
        if ((st = cpu_prim_make(c, e, &e->prim[1], &d, hint, wei_args, 4)))
            goto fail;
        e->n[1] = cpu_region(e, ktensor_numel(&op->w));
        if (want & W_DB)
            e->n[2] = cpu_region(e, g.bdims[0]);
    }
fail:
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return st;
}

remat_status cpu_conv_backward(struct cpu_ctx *c, const struct kop *op)
{
    return cpu_weighted_backward(c, op, build_bwd);
}
