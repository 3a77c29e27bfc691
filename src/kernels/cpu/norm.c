/*
 * norm.c - batch normalization in training mode on oneDNN, forward and backward.
 *
 * oneDNN's batch norm on plain NCHW (its ncsp implementation) is slow, about ten times
 * its JIT implementation on blocked layouts, so a 4-d x is reordered into the context's
 * blocked layout (nChw16c on AVX-512) in scratch, normalized there in place, and y
 * reordered back; the backward reorders x and dy in, works in place on dy's copy, and
 * reorders dx back with a sum post-op, which is the accumulation (dx += ...). A 2-d x
 * (N, C) is nc in both (the reorders copy).
 *
 * Both passes use scale and shift (dnnl_use_scale | dnnl_use_shift); an absent gamma or
 * beta is a vector of ones or zeros in scratch. The forward lets oneDNN write the batch
 * mean into aux and the biased variance into scratch, then keeps the contract's
 * aux = (mean, invstd) with invstd = 1 / sqrt(var + eps) (double, rounded to float), and
 * updates the running statistics as the reference does (unbiased variance, momentum).
 * The backward gives oneDNN the variance back, var = 1 / invstd^2 - eps, so it
 * normalizes with the invstd the forward saved; dgamma and dbeta come out in scratch and
 * are added into the wanted gradients.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>

#define BN_FLAGS (dnnl_use_scale | dnnl_use_shift)

/* Scratch regions of both passes' entries (cpu_region hands them out in this order). */
enum { R_ONES, R_ZEROS, R_VAR, R_XB, R_DYB, R_DGAMMA, R_DBETA };

static double bn_eps(const struct kop *op)
{
    return op->at->eps > 0 ? op->at->eps : 1e-5;
}

/* x's descriptor as it is (nc or nchw) and the one oneDNN works in. */
static remat_status data_mds(const struct cpu_ctx *c, const struct kop *op,
                             dnnl_memory_desc_t *user, dnnl_memory_desc_t *work)
{
    const struct ktensor *x = &op->in[0];
    bool four = x->ndim == 4;
    remat_status st;

    REMAT_ASSERT(x->ndim == 2 || four);
    if ((st = cpu_md(user, x->ndim, x->shape, four ? dnnl_nchw : dnnl_nc)))
        return st;
    return cpu_md(work, x->ndim, x->shape, four ? c->block4 : dnnl_nc);
}

static remat_status fwd_desc(const struct kop *op, const dnnl_memory_desc_t *md,
                             dnnl_batch_normalization_desc_t *d)
{
    remat_status st = REMAT_OK;

    CPU_TRY(dnnl_batch_normalization_forward_desc_init(d, dnnl_forward_training, md,
                                                       (float)bn_eps(op), BN_FLAGS));
fail:
    return st;
}

/* The regions up to R_XB (backward: up to R_DBETA). */
static void regions(const struct kop *op, const dnnl_memory_desc_t *work, bool backward,
                    struct cpu_entry *e)
{
    int64_t ch = op->in[0].shape[1];
    int64_t nw = (int64_t)(dnnl_memory_desc_get_size(work) / sizeof(float));

    cpu_region(e, ch);
    cpu_region(e, ch);
    cpu_region(e, ch);
    cpu_region(e, nw);
    if (backward) {
        cpu_region(e, nw);
        cpu_region(e, ch);
        cpu_region(e, ch);
    }
}

/* prim[0]: the forward, in place on xb; prim[1]: x -> xb; prim[2]: xb -> y. */
static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                               DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    dnnl_memory_desc_t user, work;
    dnnl_batch_normalization_desc_t d;
    remat_status st;

    (void)want;
    if ((st = data_mds(c, op, &user, &work)) || (st = fwd_desc(op, &work, &d)))
        return st;
    regions(op, &work, false, e);
    if ((st = cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 6)) ||
        (st = cpu_reorder_make(c, e, &e->prim[1], &user, &work, false)))
        return st;
    return cpu_reorder_make(c, e, &e->prim[2], &work, &user, false);
}

/* gamma and beta, or ones and zeros written into the entry's regions. */
static void scale_shift(struct cpu_ctx *c, const struct kop *op, const struct cpu_entry *e,
                        float **scale, float **shift)
{
    int64_t ch = op->in[0].shape[1];

    *scale = op->w.data;
    *shift = op->b.data;
    if (!*scale) {
        *scale = cpu_region_ptr(c, e, R_ONES);
        for (int64_t i = 0; i < ch; i++)
            (*scale)[i] = 1;
    }
    if (!*shift) {
        *shift = cpu_region_ptr(c, e, R_ZEROS);
        for (int64_t i = 0; i < ch; i++)
            (*shift)[i] = 0;
    }
}

/* Runs the reorder p from `from` to `to`. */
static remat_status reorder(struct cpu_ctx *c, const struct cpu_entry *e,
                            const struct cpu_prim *p, float *from, float *to)
{
    return cpu_prim_run(c, e, p,
                        (const struct cpu_bind[]){{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}},
                        2);
}

remat_status cpu_bn_forward(struct cpu_ctx *c, const struct kop *op)
{
    const struct ktensor *x = &op->in[0];
    int64_t ch = x->shape[1], m = ktensor_numel(x) / ch;
    double eps = bn_eps(op), mom = op->at->momentum > 0 ? op->at->momentum : 0.1;
    float *mean = op->aux.data, *invstd = mean + ch, *var, *xb, *scale, *shift;
    struct cpu_entry *e;
    remat_status st;

    if ((st = cpu_entry_get(c, op, CPU_PASS_FWD, 0, build_fwd, &e)))
        return st;
    if (c->dry)
        return REMAT_OK;
    var = cpu_region_ptr(c, e, R_VAR);
    xb = cpu_region_ptr(c, e, R_XB);
    scale_shift(c, op, e, &scale, &shift);
    if ((st = reorder(c, e, &e->prim[1], x->data, xb)))
        return st;
    st = cpu_prim_run(c, e, &e->prim[0],
                      (const struct cpu_bind[]){{DNNL_ARG_SRC, xb},
                                                {DNNL_ARG_DST, xb},
                                                {DNNL_ARG_SCALE, scale},
                                                {DNNL_ARG_SHIFT, shift},
                                                {DNNL_ARG_MEAN, mean},
                                                {DNNL_ARG_VARIANCE, var}},
                      6);
    if (st || (st = reorder(c, e, &e->prim[2], xb, op->out.data)))
        return st;
    for (int64_t i = 0; i < ch; i++) {
        invstd[i] = (float)(1.0 / sqrt((double)var[i] + eps));
        if (op->update_stats && op->running_mean)
            op->running_mean[i] = (float)((1 - mom) * op->running_mean[i] + mom * mean[i]);
        if (op->update_stats && op->running_var)
            op->running_var[i] = (float)((1 - mom) * op->running_var[i] +
                                         mom * (m > 1 ? var[i] * (double)m / (double)(m - 1)
                                                      : var[i]));
    }
    return REMAT_OK;
}

/* prim[0]: the backward, in place on dyb; prim[1]: x -> xb; prim[2]: dy -> dyb;
 * prim[3]: dx += dyb. */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE,
                               DNNL_ARG_DIFF_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                               DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
    dnnl_memory_desc_t user, work;
    dnnl_batch_normalization_desc_t fd, d;
    dnnl_primitive_desc_t hint = NULL;
    remat_status st;

    (void)want;
    if ((st = data_mds(c, op, &user, &work)) || (st = fwd_desc(op, &work, &fd)) ||
        (st = cpu_pd_make(c, &fd, NULL, &hint)))
        return st;
    CPU_TRY(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, &work, &work,
                                                        (float)bn_eps(op), BN_FLAGS));
    regions(op, &work, true, e);
    if ((st = cpu_prim_make(c, e, &e->prim[0], &d, hint, args, 9)) ||
        (st = cpu_reorder_make(c, e, &e->prim[1], &user, &work, false)) ||
        (st = cpu_reorder_make(c, e, &e->prim[2], &user, &work, false)))
        goto fail;
    st = cpu_reorder_make(c, e, &e->prim[3], &work, &user, true);
fail:
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return st;
}

remat_status cpu_bn_backward(struct cpu_ctx *c, const struct kop *op)
{
    const struct ktensor *x = &op->in[0];
    int64_t ch = x->shape[1];
    const float *invstd = op->aux.data + ch;
    float *var, *xb, *dyb, *scale, *shift, *dgamma, *dbeta;
    double eps = bn_eps(op);
    struct cpu_entry *e;
    remat_status st;

    if (!op->din[0].data && !op->dw.data && !op->db.data)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, 0, build_bwd, &e)))
        return st;
    if (c->dry)
        return REMAT_OK;
    var = cpu_region_ptr(c, e, R_VAR);
    xb = cpu_region_ptr(c, e, R_XB);
    dyb = cpu_region_ptr(c, e, R_DYB);
    dgamma = cpu_region_ptr(c, e, R_DGAMMA);
    dbeta = cpu_region_ptr(c, e, R_DBETA);
    for (int64_t i = 0; i < ch; i++)
        var[i] = (float)(1.0 / ((double)invstd[i] * invstd[i]) - eps);
    scale_shift(c, op, e, &scale, &shift);
    if ((st = reorder(c, e, &e->prim[1], x->data, xb)) ||
        (st = reorder(c, e, &e->prim[2], op->dout.data, dyb)))
        return st;
    st = cpu_prim_run(c, e, &e->prim[0],
                      (const struct cpu_bind[]){{DNNL_ARG_SRC, xb},
                                                {DNNL_ARG_MEAN, op->aux.data},
                                                {DNNL_ARG_VARIANCE, var},
                                                {DNNL_ARG_DIFF_DST, dyb},
                                                {DNNL_ARG_SCALE, scale},
                                                {DNNL_ARG_SHIFT, shift},
                                                {DNNL_ARG_DIFF_SRC, dyb},
                                                {DNNL_ARG_DIFF_SCALE, dgamma},
                                                {DNNL_ARG_DIFF_SHIFT, dbeta}},
                      9);
    if (st)
        return st;
    if (op->din[0].data && (st = reorder(c, e, &e->prim[3], dyb, op->din[0].data)))
        return st;
    if (op->dw.data && (st = cpu_accumulate(c, op->dw.data, dgamma, ch)))
        return st;
    if (op->db.data && (st = cpu_accumulate(c, op->db.data, dbeta, ch)))
        return st;
    return REMAT_OK;
}
