/*
 * pool.c - average pooling on oneDNN, forward and backward.
 *
 * oneDNN's avg_exclude_padding divides by the window clipped to the input, as the
 * reference does without count_include_pad. avg_include_padding divides by kh * kw,
 * which is the reference's divisor (the window clipped to the padded input, H + ph) as
 * long as no window runs past the right padding; with ceil_mode the last window may, so
 * that case stays on the reference kernels (cpu_can_avg_pool). ceil_mode's longer
 * output is oneDNN's with extra right padding pr = (Ho - 1) sh + kh - H - ph.
 *
 * Max pooling stays on the reference kernels: the contract keeps an int32 argmax per
 * output in aux, and oneDNN's workspace is its own.
 */
#include "kernels/cpu/cpu.h"

struct pgeo {
    int64_t src[4], dst[4];
    dnnl_dims_t kernel, strides, dil, pl, pr;
};

static struct pgeo geo(const struct kop *op)
{
    const remat_attrs *at = op->at;
    struct pgeo g = {.kernel = {at->kh, at->kw},
                     .strides = {at->sh > 0 ? at->sh : at->kh, at->sw > 0 ? at->sw : at->kw},
                     .pl = {at->ph, at->pw}};

    REMAT_ASSERT(op->in[0].ndim == 4 && op->out.ndim == 4);
    for (int i = 0; i < 4; i++) {
        g.src[i] = op->in[0].shape[i];
        g.dst[i] = op->out.shape[i];
    }
    for (int i = 0; i < 2; i++) {
        int64_t in = g.src[2 + i], out = g.dst[2 + i];

        g.pr[i] = g.pl[i];
        if ((in + 2 * g.pl[i] - g.kernel[i]) / g.strides[i] + 1 != out)
            g.pr[i] = (out - 1) * g.strides[i] + g.kernel[i] - in - g.pl[i];
    }
    return g;
}

bool cpu_can_avg_pool(const struct kop *op)
{
    struct pgeo g = geo(op);

    for (int i = 0; i < 2; i++)
        if (g.pr[i] < 0 || g.pr[i] >= g.kernel[i] || g.pl[i] >= g.kernel[i] ||
            (op->at->count_include_pad && g.pr[i] > g.pl[i]))
            return false;
    return true;
}

static dnnl_alg_kind_t alg(const struct kop *op)
{
    return op->at->count_include_pad ? dnnl_pooling_avg_include_padding
                                     : dnnl_pooling_avg_exclude_padding;
}

/* Descriptors of x and y and the forward descriptor. */
static remat_status descs(const struct kop *op, dnnl_memory_desc_t *x, dnnl_memory_desc_t *y,
                          dnnl_pooling_v2_desc_t *fd)
{
    struct pgeo g = geo(op);
    remat_status st;

    if ((st = cpu_md(x, 4, g.src, dnnl_nchw)) || (st = cpu_md(y, 4, g.dst, dnnl_nchw)))
        return st;
    CPU_TRY(dnnl_pooling_v2_forward_desc_init(fd, dnnl_forward_training, alg(op), x, y,
                                              g.strides, g.kernel, g.dil, g.pl, g.pr));
fail:
    return st;
}

static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    dnnl_memory_desc_t x, y;
    dnnl_pooling_v2_desc_t d;
    remat_status st;

    (void)want;
    if ((st = descs(op, &x, &y, &d)))
        return st;
    return cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 2);
}

remat_status cpu_avg_pool_forward(struct cpu_ctx *c, const struct kop *op)
{
    struct cpu_entry *e;
    remat_status st = cpu_entry_get(c, op, CPU_PASS_FWD, 0, build_fwd, &e);

    if (st || c->dry) /* cpu_prepare: the entry is made */
        return st;
    return cpu_prim_run(c, e, &e->prim[0],
                        (const struct cpu_bind[]){{DNNL_ARG_SRC, op->in[0].data},
                                                  {DNNL_ARG_DST, op->out.data}},
                        2);
}

/* prim[0]: the backward; region 0: dx. */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC};
    struct pgeo g = geo(op);
    dnnl_memory_desc_t x, y;
    dnnl_pooling_v2_desc_t fd, d;
    dnnl_primitive_desc_t hint = NULL;
    remat_status st;

    (void)want;
    if ((st = descs(op, &x, &y, &fd)) || (st = cpu_pd_make(c, &fd, NULL, &hint)))
        return st;
    CPU_TRY(dnnl_pooling_v2_backward_desc_init(&d, alg(op), &x, &y, g.strides, g.kernel,
                                               g.dil, g.pl, g.pr));
    cpu_region(e, ktensor_numel(&op->in[0]));
    st = cpu_prim_make(c, e, &e->prim[0], &d, hint, args, 2);
fail:
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return st;
}

remat_status cpu_avg_pool_backward(struct cpu_ctx *c, const struct kop *op)
{
    struct cpu_entry *e;
    float *dx;
    remat_status st;

    if (!op->din[0].data)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, 0, build_bwd, &e)))
        return st;
    if (c->dry)
        return REMAT_OK;
    dx = cpu_region_ptr(c, e, 0);
    st = cpu_prim_run(c, e, &e->prim[0],
                      (const struct cpu_bind[]){{DNNL_ARG_DIFF_DST, op->dout.data},
                                                {DNNL_ARG_DIFF_SRC, dx}},
                      2);
    return st ? st : cpu_accumulate(c, op->din[0].data, dx, ktensor_numel(&op->in[0]));
}
