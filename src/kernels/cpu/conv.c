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
 * Three algorithms (cpu.h): GEMM reads and writes the NCHW buffers themselves (im2col of
 * our own and oneDNN's matmul primitive, conv_gemm.c; this file's oneDNN GEMM convolution,
 * cpu_conv_onednn_build_fwd and _bwd, is its fallback where oneDNN has no matmul but its
 * GEMM driver's, whose packing buffers are outside the scratch); DIRECT and
 * WINOGRAD let oneDNN choose its blocked layouts (format "any"), and each tensor whose
 * layout differs from its buffer's is reordered into scratch before the primitive (x, W,
 * dy) or out of it after (y). A DIRECT whose oneDNN implementation is not a JIT kernel
 * (a GEMM or reference fallback) is refused: it would be GEMM again. oneDNN does that on
 * small planes (ResNet's 7x7 stride-2 first layer at 4x4 input, whose 3 input channels
 * have no blocked JIT kernel), so the list of algorithms (cpu_conv_algos) leaves out
 * every blocked one oneDNN has no kernel for, asking it without making a primitive:
 * each algorithm listed runs. GEMM runs every convolution and is always listed.
 *
 * The backward computes dx (backward data), dw and db (backward weights, both at once)
 * into scratch, each only when wanted, and adds them into the gradients (on the blocked
 * layouts the reorder back to NCHW adds, with its sum post-op).
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

/* Memory descriptors of g: x, y, w and b (b zeroed when the op has no bias); with any,
 * x, y and w in the layout oneDNN will choose. */
static remat_status mds(const struct cgeo *g, bool bias, bool any, dnnl_memory_desc_t *x,
                        dnnl_memory_desc_t *y, dnnl_memory_desc_t *w, dnnl_memory_desc_t *b)
{
    dnnl_format_tag_t t = any ? dnnl_format_tag_any : dnnl_nchw;
    remat_status st;

    memset(b, 0, sizeof *b);
    if ((st = cpu_md(x, 4, g->src, t)) || (st = cpu_md(y, 4, g->dst, t)) ||
        (st = cpu_md(w, g->wnd, g->wdims, any ? dnnl_format_tag_any : g->wtag)))
        return st;
    return bias ? cpu_md(b, 1, g->bdims, dnnl_a) : REMAT_OK;
}

/* oneDNN's algorithm kind for ours. */
static dnnl_alg_kind_t alg_kind(const struct cgeo *g, int32_t algo)
{
    if (g->transposed)
        return dnnl_deconvolution_direct;
    return algo == CPU_ALGO_WINOGRAD ? dnnl_convolution_winograd : dnnl_convolution_direct;
}

/* The forward descriptor (prop forward_training), the backward's hint too. */
static remat_status fwd_desc(const struct cgeo *g, int32_t algo, const dnnl_memory_desc_t *x,
                             const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *b,
                             const dnnl_memory_desc_t *y, dnnl_convolution_desc_t *d)
{
    remat_status st = REMAT_OK;

    if (g->transposed)
        CPU_TRY(dnnl_dilated_deconvolution_forward_desc_init(
            d, dnnl_forward_training, alg_kind(g, algo), x, w, b, y, g->strides, g->dil,
            g->pl, g->pr));
    else
        CPU_TRY(dnnl_dilated_convolution_forward_desc_init(
            d, dnnl_forward_training, alg_kind(g, algo), x, w, b, y, g->strides, g->dil,
            g->pl, g->pr));
fail:
    return st;
}

/* The backward-data (weights false: x, w, y) or backward-weights (x, w, db, y)
 * descriptor of g with oneDNN algorithm kind ak. */
static remat_status bwd_desc(const struct cgeo *g, dnnl_alg_kind_t ak, bool weights,
                             const dnnl_memory_desc_t *x, const dnnl_memory_desc_t *w,
                             const dnnl_memory_desc_t *db, const dnnl_memory_desc_t *y,
                             dnnl_convolution_desc_t *d)
{
    remat_status st = REMAT_OK;

    if (!weights && g->transposed)
        CPU_TRY(dnnl_dilated_deconvolution_backward_data_desc_init(d, ak, x, w, y, g->strides,
                                                                   g->dil, g->pl, g->pr));
    else if (!weights)
        CPU_TRY(dnnl_dilated_convolution_backward_data_desc_init(d, ak, x, w, y, g->strides,
                                                                 g->dil, g->pl, g->pr));
    else if (g->transposed)
        CPU_TRY(dnnl_dilated_deconvolution_backward_weights_desc_init(
            d, ak, x, w, db, y, g->strides, g->dil, g->pl, g->pr));
    else
        CPU_TRY(dnnl_dilated_convolution_backward_weights_desc_init(d, ak, x, w, db, y, g->strides,
                                                                    g->dil, g->pl, g->pr));
fail:
    return st;
}

remat_status cpu_conv_onednn_build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                                       struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    struct cgeo g = geo(op);
    dnnl_memory_desc_t x, y, w, b;
    dnnl_convolution_desc_t d;
    remat_status st;

    (void)want;
    if ((st = mds(&g, op->b.data != NULL, false, &x, &y, &w, &b)) ||
        (st = fwd_desc(&g, CPU_ALGO_GEMM, &x, &w, &b, &y, &d)))
        return st;
    return cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 4);
}

/* prim[0]: backward data (W_DX), prim[1]: backward weights (W_DW | W_DB); regions
 * n[0] dx, n[1] dw, n[2] db (-1: none). */
remat_status cpu_conv_onednn_build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
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
    if ((st = mds(&g, op->b.data != NULL, false, &x, &y, &w, &b)) ||
        (st = fwd_desc(&g, CPU_ALGO_GEMM, &x, &w, &b, &y, &fd)))
        return st;
    if ((st = cpu_pd_make(c, &fd, NULL, &hint)))
        return st;
    if (want & W_DX) {
        if ((st = bwd_desc(&g, alg_kind(&g, CPU_ALGO_GEMM), false, &x, &w, NULL, &y, &d)) ||
            (st = cpu_prim_make(c, e, &e->prim[0], &d, hint, data_args, 3)))
            goto fail;
        e->n[0] = cpu_region(e, ktensor_numel(&op->in[0]));
    }
    if (want & (W_DW | W_DB)) {
        memset(&db, 0, sizeof db);
        if ((want & W_DB) && (st = cpu_md(&db, 1, g.bdims, dnnl_a)))
            goto fail;
        if ((st = bwd_desc(&g, alg_kind(&g, CPU_ALGO_GEMM), true, &x, &w, &db, &y, &d)) ||
            (st = cpu_prim_make(c, e, &e->prim[1], &d, hint, wei_args, 4)))
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

/* ------------------------------------------------------------- blocked layouts */

/* Tensors a blocked entry may stage: e->n[2t] is t's region (-1: the buffer itself is
 * used), e->n[2t + 1] the reorder into or out of it. T_DYW may share T_DYD's copy. */
enum { T_X, T_W, T_Y, T_DYD, T_DYW, T_DX, T_DW, T_COUNT };
#define N_MAIN0 (2 * T_COUNT)     /* the convolution, or its backward data */
#define N_MAIN1 (2 * T_COUNT + 1) /* backward weights */
#define N_DB (2 * T_COUNT + 2)    /* the bias gradient's region */
#define N_PRIMS (2 * T_COUNT + 3) /* primitives made so far */
#define SHARED (-2)               /* T_DYW: the copy T_DYD made */

/* Stages tensor t, whose buffer is laid out as plain, for a primitive wanting blk: an
 * input (dir 0) gets a region and a reorder into it when the two differ; an output is
 * written to a region and reordered out of it (dir 1, when they differ) or always, the
 * reorder adding into the buffer (dir 2: gradients accumulate). */
static remat_status stage(struct cpu_ctx *c, struct cpu_entry *e, int t,
                          const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *blk,
                          int dir)
{
    struct cpu_prim *p = &e->prim[e->n[N_PRIMS]];

    e->n[2 * t] = e->n[2 * t + 1] = -1;
    if (dir != 2 && dnnl_memory_desc_equal(plain, blk))
        return REMAT_OK;
    REMAT_ASSERT(e->n[N_PRIMS] < CPU_MAX_PRIM);
    e->n[2 * t] = cpu_region(e, (int64_t)((dnnl_memory_desc_get_size(blk) + 3) / 4));
    e->n[2 * t + 1] = e->n[N_PRIMS]++;
    return dir == 0 ? cpu_reorder_make(c, e, p, plain, blk, false)
                    : cpu_reorder_make(c, e, p, blk, plain, dir == 2);
}

/* Makes the primitive of pd (destroyed) the entry's next, its index in slot n. */
static remat_status main_prim(struct cpu_ctx *c, struct cpu_entry *e, int n,
                              dnnl_primitive_desc_t pd, const int *args, int n_args)
{
    REMAT_ASSERT(e->n[N_PRIMS] < CPU_MAX_PRIM);
    e->n[n] = e->n[N_PRIMS]++;
    return cpu_prim_from_pd(c, e, &e->prim[e->n[n]], pd, args, n_args);
}

/* The primitive descriptor of d for algorithm algo; REMAT_ERR_UNSUPPORTED when oneDNN
 * would run DIRECT with a GEMM or reference kernel (see the file comment). */
static remat_status blocked_pd(struct cpu_ctx *c, int32_t algo, const_dnnl_op_desc_t d,
                               const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd)
{
    const char *impl = "";
    remat_status st;

    *pd = NULL;
    if (algo == CPU_ALGO_WINOGRAD && ((const dnnl_convolution_desc_t *)d)->primitive_kind ==
                                         dnnl_deconvolution)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cpu backend: no Winograd kernel for a "
                          "transposed convolution");
    if ((st = cpu_pd_make(c, d, hint, pd))) {
        if (algo == CPU_ALGO_DIRECT)
            return st;
        core_clear_error();
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cpu backend: no Winograd kernel for this "
                          "convolution");
    }
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        impl = "";
    if (algo == CPU_ALGO_DIRECT && (strncmp(impl, "jit", 3) || strstr(impl, "gemm"))) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cpu backend: no direct blocked kernel for "
                          "this convolution (oneDNN offers %s)", impl);
    }
    return REMAT_OK;
}

/* A copy of the layout pd chose for what (an exec argument). */
static dnnl_memory_desc_t chosen(const_dnnl_primitive_desc_t pd, int what)
{
    return *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, what);
}

/* The primitive descriptors of a blocked entry: the forward's (also the backward's
 * hint), backward data's and backward weights' (NULL where not made). */
struct bpds {
    dnnl_primitive_desc_t fwd, data, wei;
};

static void bpds_free(struct bpds *p)
{
    if (p->fwd)
        dnnl_primitive_desc_destroy(p->fwd);
    if (p->data)
        dnnl_primitive_desc_destroy(p->data);
    if (p->wei)
        dnnl_primitive_desc_destroy(p->wei);
    memset(p, 0, sizeof *p);
}

/* The descriptors of op with blocked algorithm algo (formats "any"): the forward's,
 * backward data's when want has W_DX, backward weights' when it has W_DW or W_DB (want
 * 0: the forward alone). REMAT_ERR_UNSUPPORTED when oneDNN has no kernel of algo for
 * one of them (blocked_pd); on failure *p holds nothing. */
static remat_status blocked_pds(struct cpu_ctx *c, const struct kop *op, int32_t algo,
                                unsigned want, struct bpds *p)
{
    struct cgeo g = geo(op);
    dnnl_alg_kind_t ak = alg_kind(&g, algo);
    dnnl_memory_desc_t xa, ya, wa, b, db;
    dnnl_convolution_desc_t d;
    remat_status st;

    memset(p, 0, sizeof *p);
    memset(&db, 0, sizeof db);
    if ((st = mds(&g, op->b.data != NULL, true, &xa, &ya, &wa, &b)) ||
        (st = fwd_desc(&g, algo, &xa, &wa, &b, &ya, &d)) ||
        (st = blocked_pd(c, algo, &d, NULL, &p->fwd)))
        goto fail;
    if ((want & W_DX) && ((st = bwd_desc(&g, ak, false, &xa, &wa, NULL, &ya, &d)) ||
                          (st = blocked_pd(c, algo, &d, p->fwd, &p->data))))
        goto fail;
    if ((want & (W_DW | W_DB)) &&
        (((want & W_DB) && (st = cpu_md(&db, 1, g.bdims, dnnl_a))) ||
         (st = bwd_desc(&g, ak, true, &xa, &wa, &db, &ya, &d)) ||
         (st = blocked_pd(c, algo, &d, p->fwd, &p->wei))))
        goto fail;
    return REMAT_OK;
fail:
    bpds_free(p);
    return st;
}

static remat_status build_fwd_blocked(struct cpu_ctx *c, const struct kop *op, unsigned want,
                                      struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    struct cgeo g = geo(op);
    dnnl_memory_desc_t x, y, w, b, xb, wb, yb;
    struct bpds p;
    remat_status st;

    (void)want;
    e->n[N_PRIMS] = 0;
    if ((st = mds(&g, op->b.data != NULL, false, &x, &y, &w, &b)) ||
        (st = blocked_pds(c, op, op->algo, 0, &p)))
        return st;
    xb = chosen(p.fwd, DNNL_ARG_SRC);
    wb = chosen(p.fwd, DNNL_ARG_WEIGHTS);
    yb = chosen(p.fwd, DNNL_ARG_DST);
    st = main_prim(c, e, N_MAIN0, p.fwd, args, 4);
    p.fwd = NULL;
    if (st || (st = stage(c, e, T_X, &x, &xb, 0)) || (st = stage(c, e, T_W, &w, &wb, 0)))
        return st;
    return stage(c, e, T_Y, &y, &yb, 1);
}

/* The address the primitive reads tensor t from: the buffer at plain, or its staged
 * copy, reordered now. */
static remat_status stage_in(struct cpu_ctx *c, const struct cpu_entry *e, int t, void *plain,
                             void **out)
{
    if (e->n[2 * t] < 0) {
        *out = plain;
        return REMAT_OK;
    }
    *out = cpu_region_ptr(c, e, (int32_t)e->n[2 * t]);
    return cpu_prim_run(c, e, &e->prim[e->n[2 * t + 1]],
                        (const struct cpu_bind[]){{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, *out}},
                        2);
}

/* The address the primitive writes tensor t to. */
static void *stage_out(const struct cpu_ctx *c, const struct cpu_entry *e, int t, void *plain)
{
    return e->n[2 * t] < 0 ? plain : cpu_region_ptr(c, e, (int32_t)e->n[2 * t]);
}

/* Brings tensor t from its staged copy to the buffer at plain (adding for gradients). */
static remat_status unstage(struct cpu_ctx *c, const struct cpu_entry *e, int t, void *plain)
{
    if (e->n[2 * t] < 0)
        return REMAT_OK;
    return cpu_prim_run(c, e, &e->prim[e->n[2 * t + 1]],
                        (const struct cpu_bind[]){
                            {DNNL_ARG_FROM, cpu_region_ptr(c, e, (int32_t)e->n[2 * t])},
                            {DNNL_ARG_TO, plain}},
                        2);
}

static remat_status fwd_blocked(struct cpu_ctx *c, const struct kop *op)
{
    struct cpu_entry *e;
    void *x, *w, *y;
    remat_status st = cpu_entry_get(c, op, CPU_PASS_FWD, 0, build_fwd_blocked, &e);

    if (st || c->dry)
        return st;
    if ((st = stage_in(c, e, T_X, op->in[0].data, &x)) ||
        (st = stage_in(c, e, T_W, op->w.data, &w)))
        return st;
    y = stage_out(c, e, T_Y, op->out.data);
    if ((st = cpu_prim_run(c, e, &e->prim[e->n[N_MAIN0]],
                           (const struct cpu_bind[]){{DNNL_ARG_SRC, x},
                                                     {DNNL_ARG_WEIGHTS, w},
                                                     {DNNL_ARG_BIAS, op->b.data},
                                                     {DNNL_ARG_DST, y}},
                           4)))
        return st;
    return unstage(c, e, T_Y, op->out.data);
}

static remat_status build_bwd_blocked(struct cpu_ctx *c, const struct kop *op, unsigned want,
                                      struct cpu_entry *e)
{
    static const int data_args[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
    static const int wei_args[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS,
                                   DNNL_ARG_DIFF_BIAS};
    struct cgeo g = geo(op);
    dnnl_memory_desc_t x, y, w, b, dyd, wb, dxb, xb, dyw, dwb;
    struct bpds p;
    remat_status st;

    for (int i = 0; i < N_PRIMS; i++)
        e->n[i] = -1;
    e->n[N_PRIMS] = 0;
    if ((st = mds(&g, op->b.data != NULL, false, &x, &y, &w, &b)) ||
        (st = blocked_pds(c, op, op->algo, want, &p)))
        return st;
    if (want & W_DX) {
        dyd = chosen(p.data, DNNL_ARG_DIFF_DST);
        wb = chosen(p.data, DNNL_ARG_WEIGHTS);
        dxb = chosen(p.data, DNNL_ARG_DIFF_SRC);
        st = main_prim(c, e, N_MAIN0, p.data, data_args, 3);
        p.data = NULL;
        if (st || (st = stage(c, e, T_DYD, &y, &dyd, 0)) ||
            (st = stage(c, e, T_W, &w, &wb, 0)) || (st = stage(c, e, T_DX, &x, &dxb, 2)))
            goto fail;
    }
    if (want & (W_DW | W_DB)) {
        xb = chosen(p.wei, DNNL_ARG_SRC);
        dyw = chosen(p.wei, DNNL_ARG_DIFF_DST);
        dwb = chosen(p.wei, DNNL_ARG_DIFF_WEIGHTS);
        st = main_prim(c, e, N_MAIN1, p.wei, wei_args, 4);
        p.wei = NULL;
        if (st || (st = stage(c, e, T_X, &x, &xb, 0)) || (st = stage(c, e, T_DW, &w, &dwb, 2)))
            goto fail;
        if ((want & W_DX) && dnnl_memory_desc_equal(&dyw, &dyd))
            e->n[2 * T_DYW] = SHARED;
        else if ((st = stage(c, e, T_DYW, &y, &dyw, 0)))
            goto fail;
        if (want & W_DB)
            e->n[N_DB] = cpu_region(e, g.bdims[0]);
    }
fail:
    bpds_free(&p);
    return st;
}

/* The gradients op's backward wants (W_DX, W_DW, W_DB). */
static unsigned bwd_want(const struct kop *op)
{
    return (op->din[0].data ? W_DX : 0) | (op->dw.data ? W_DW : 0) | (op->db.data ? W_DB : 0);
}

static remat_status bwd_blocked(struct cpu_ctx *c, const struct kop *op)
{
    unsigned want = bwd_want(op);
    struct cpu_entry *e;
    void *dyd = NULL, *dyw, *w, *x, *dx, *dw, *db;
    remat_status st;

    if (!want)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, want, build_bwd_blocked, &e)) || c->dry)
        return st;
    if (want & W_DX) {
        if ((st = stage_in(c, e, T_DYD, op->dout.data, &dyd)) ||
            (st = stage_in(c, e, T_W, op->w.data, &w)))
            return st;
        dx = stage_out(c, e, T_DX, op->din[0].data);
        if ((st = cpu_prim_run(c, e, &e->prim[e->n[N_MAIN0]],
                               (const struct cpu_bind[]){{DNNL_ARG_DIFF_DST, dyd},
                                                         {DNNL_ARG_WEIGHTS, w},
                                                         {DNNL_ARG_DIFF_SRC, dx}},
                               3)) ||
            (st = unstage(c, e, T_DX, op->din[0].data)))
            return st;
    }
    if (!(want & (W_DW | W_DB)))
        return REMAT_OK;
    if ((st = stage_in(c, e, T_X, op->in[0].data, &x)))
        return st;
    if (e->n[2 * T_DYW] == SHARED)
        dyw = dyd;
    else if ((st = stage_in(c, e, T_DYW, op->dout.data, &dyw)))
        return st;
    dw = stage_out(c, e, T_DW, op->dw.data);
    db = e->n[N_DB] >= 0 ? cpu_region_ptr(c, e, (int32_t)e->n[N_DB]) : NULL;
    if ((st = cpu_prim_run(c, e, &e->prim[e->n[N_MAIN1]],
                           (const struct cpu_bind[]){{DNNL_ARG_SRC, x},
                                                     {DNNL_ARG_DIFF_DST, dyw},
                                                     {DNNL_ARG_DIFF_WEIGHTS, dw},
                                                     {DNNL_ARG_DIFF_BIAS, db}},
                           4)))
        return st;
    if (op->dw.data && (st = unstage(c, e, T_DW, op->dw.data)))
        return st;
    return db ? cpu_accumulate(c, op->db.data, db, op->out.shape[1]) : REMAT_OK;
}

/* Whether cpu_prepare takes blocked algorithm algo for op's forward or backward: a
 * backward with nothing wanted or dout NULL (the reference kernel) always, otherwise
 * when oneDNN has a kernel of algo for every primitive the entry would make
 * (blocked_pds on a context of engine eng alone: no primitive is made). */
static bool blocked_runs(dnnl_engine_t eng, const struct kop *op, bool backward, int32_t algo)
{
    struct cpu_ctx c = {.engine = eng};
    unsigned want = backward ? bwd_want(op) : 0;
    struct bpds p;

    if (backward && (!want || !op->dout.data))
        return true;
    if (blocked_pds(&c, op, algo, want, &p)) {
        core_clear_error();
        return false;
    }
    bpds_free(&p);
    return true;
}

/* ------------------------------------------------------------------- entry points */

const char *cpu_algo_name(int32_t id)
{
    static const char *const names[CPU_N_ALGOS] = {"gemm", "direct", "winograd"};

    return id >= 0 && id < CPU_N_ALGOS ? names[id] : "?";
}

/* The algorithms worth trying on op's forward or backward, fastest first (order[0..n)),
 * whether or not oneDNN has their kernels for it. */
static int32_t conv_order(const struct kop *op, bool backward, int32_t *order)
{
    const remat_attrs *at = op->at;
    bool wino = op->type == REMAT_OP_CONV2D && at->kh == 3 && at->kw == 3 && or1(at->sh) == 1 &&
                or1(at->sw) == 1 && or1(at->dh) == 1 && or1(at->dw) == 1 &&
                or1(at->groups) == 1;
    /* its tiles are 4x4 outputs: on smaller planes most of each tile is waste */
    bool tiles = op->out.shape[2] >= 4 && op->out.shape[3] >= 4;
    int32_t n = 0;

    /* 1x1 on large planes: GEMM reads the NCHW buffers as they are (no column matrix),
     * where the blocked kernels pay for their reorders */
    bool plain = at->kh == 1 && at->kw == 1 && op->out.shape[2] * op->out.shape[3] >= 28 * 28;

    /* The order measured on AVX-512 (bench/workspace): Winograd, then the blocked direct
     * kernels, then GEMM; but GEMM first for 1x1 convolutions on planes of 28x28 or more,
     * and for the backward of a layer with few input channels (the first). */
    if (wino && tiles)
        order[n++] = CPU_ALGO_WINOGRAD;
    if (plain || (backward && op->in[0].shape[1] < 16)) {
        order[n++] = CPU_ALGO_GEMM;
        order[n++] = CPU_ALGO_DIRECT;
    } else {
        order[n++] = CPU_ALGO_DIRECT;
        order[n++] = CPU_ALGO_GEMM;
    }
    if (wino && !tiles)
        order[n++] = CPU_ALGO_WINOGRAD;
    return n;
}

int32_t cpu_conv_algos(const struct kop *op, bool backward, int32_t *ids)
{
    int32_t order[CPU_N_ALGOS], n = conv_order(op, backward, order), k = 0;
    dnnl_engine_t eng = NULL;

    /* an engine of its own: the backend's entry point brings no context (creating a
     * CPU engine allocates one small object) */
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
        eng = NULL; /* GEMM alone */
    for (int32_t i = 0; i < n; i++)
        if (order[i] == CPU_ALGO_GEMM || (eng && blocked_runs(eng, op, backward, order[i])))
            ids[k++] = order[i];
    if (eng)
        dnnl_engine_destroy(eng);
    return k;
}

remat_status cpu_conv_forward(struct cpu_ctx *c, const struct kop *op)
{
    if (op->algo != CPU_ALGO_GEMM)
        return fwd_blocked(c, op);
    return cpu_conv_gemm_forward(c, op);
}

remat_status cpu_conv_backward(struct cpu_ctx *c, const struct kop *op)
{
    if (op->algo != CPU_ALGO_GEMM)
        return bwd_blocked(c, op);
    return cpu_conv_gemm_backward(c, op);
}
