/*
 * dispatch.c - the cpu backend's two entry points: oneDNN for the families cpu.h lists,
 * the reference kernels for everything else, and for what oneDNN cannot match exactly:
 * - relu: every oneDNN 2.6 relu (relu, relu_use_dst_for_bwd, clip; AVX2 and AVX-512 JIT)
 *   turns a NaN x into 0 and -0 into +0, and its backward passes dy where y is NaN and
 *   makes a NaN dy where y <= 0 a NaN dx, where the contract keeps NaNs where they are
 *   (a diverging run would hide them). relu is memory bound anyway: the reference's one
 *   fused loop per pass moves less memory than oneDNN's backward plus the accumulation.
 * - max pooling: the contract keeps an int32 argmax per output in aux (h*W + w), where
 *   oneDNN keeps a workspace of its own layout.
 * - a backward whose dout is NULL, the constant 1 (only losses see it);
 * - average pooling whose last ceil_mode window runs past the padding with
 *   count_include_pad (pool.c).
 * Global average pooling, add, concat, crop, pad, upsampling, dropout and the losses are
 * cheap or data movement and run on the reference kernels too; the per-sample ones among
 * all these (relu, pooling, add, concat, crop, pad, upsampling) with the batch split
 * across the threads (split.c).
 */
#include "kernels/cpu/cpu.h"

/* True for batch norm on the layouts norm.c handles (2-d or 4-d). */
static bool bn_ok(const struct kop *op)
{
    return op->in[0].ndim == 2 || op->in[0].ndim == 4;
}

/* Only convolutions have more than one algorithm. */
static bool is_conv(const struct kop *op)
{
    return op->type == REMAT_OP_CONV2D || op->type == REMAT_OP_CONV_TRANSPOSE2D;
}

/* The reference kernels (need no scratch: nothing to prepare), per-sample ops on the
 * context's threads (split.c). */
static remat_status ref_fwd(const struct cpu_ctx *c, const struct kop *op)
{
    if (c->dry)
        return REMAT_OK;
    return cpu_per_sample(op) ? cpu_split_run(c, op, false) : ref_forward(op);
}

static remat_status ref_bwd(const struct cpu_ctx *c, const struct kop *op)
{
    if (c->dry)
        return REMAT_OK;
    return cpu_per_sample(op) ? cpu_split_run(c, op, true) : ref_backward(op);
}

remat_status cpu_forward(struct cpu_ctx *c, const struct kop *op)
{
    if (op->algo != 0 && !is_conv(op))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cpu backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)op->algo);
    cpu_ctx_threads(c);
    switch (op->type) {
    case REMAT_OP_CONV2D:
    case REMAT_OP_CONV_TRANSPOSE2D:
        return cpu_conv_forward(c, op);
    case REMAT_OP_BATCH_NORM:
        return c->bn_onednn && bn_ok(op) ? cpu_bn_forward(c, op) : ref_fwd(c, op);
    case REMAT_OP_AVG_POOL:
        return cpu_can_avg_pool(op) ? cpu_avg_pool_forward(c, op) : ref_fwd(c, op);
    case REMAT_OP_LINEAR:
        return cpu_linear_forward(c, op);
    case REMAT_OP_MATMUL:
        return cpu_matmul_forward(c, op);
    case REMAT_OP_LAYER_NORM:
        return cpu_layer_norm_forward(c, op);
    case REMAT_OP_SOFTMAX_LAST:
        return cpu_softmax_last_forward(c, op);
    case REMAT_OP_GELU:
        return cpu_gelu_forward(c, op);
    default:
        return ref_fwd(c, op);
    }
}

remat_status cpu_backward(struct cpu_ctx *c, const struct kop *op)
{
    if (op->algo != 0 && !is_conv(op))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cpu backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)op->algo);
    cpu_ctx_threads(c);
    if (!op->dout.data) /* the constant 1: only the losses see it */
        return ref_bwd(c, op);
    switch (op->type) {
    case REMAT_OP_CONV2D:
    case REMAT_OP_CONV_TRANSPOSE2D:
        return cpu_conv_backward(c, op);
    case REMAT_OP_BATCH_NORM:
        return c->bn_onednn && bn_ok(op) ? cpu_bn_backward(c, op) : ref_bwd(c, op);
    case REMAT_OP_AVG_POOL:
        return cpu_can_avg_pool(op) ? cpu_avg_pool_backward(c, op) : ref_bwd(c, op);
    case REMAT_OP_LINEAR:
        return cpu_linear_backward(c, op);
    case REMAT_OP_MATMUL:
        return cpu_matmul_backward(c, op);
    case REMAT_OP_LAYER_NORM:
        return cpu_layer_norm_backward(c, op);
    case REMAT_OP_SOFTMAX_LAST:
        return cpu_softmax_last_backward(c, op);
    case REMAT_OP_GELU:
        return cpu_gelu_backward(c, op);
    default:
        return ref_bwd(c, op);
    }
}

int32_t cpu_algos(const struct kop *op, bool backward, int32_t *ids)
{
    if (!is_conv(op)) {
        ids[0] = 0;
        return 1;
    }
    return cpu_conv_algos(op, backward, ids);
}

remat_status cpu_prepare(struct cpu_ctx *c, const struct kop *op, bool backward, size_t *need)
{
    remat_status st;

    *need = 0;
    if (op->algo < 0 || op->algo >= (is_conv(op) ? CPU_N_ALGOS : 1))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "cpu backend: %s has no algorithm %d",
                          remat_op_name(op->type), (int)op->algo);
    c->dry = true;
    c->need = 0;
    st = backward ? cpu_backward(c, op) : cpu_forward(c, op);
    c->dry = false;
    *need = c->need;
    return st;
}
