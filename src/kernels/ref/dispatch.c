/*
 * dispatch.c - the reference backend's two entry points: a switch on the op type.
 *
 * Flatten and reshape are views: the executor gives their output the input's buffer
 * (and their output gradient the input gradient's), so there is nothing to compute and
 * both entry points return REMAT_OK for them without touching any tensor.
 */
#include "kernels/ref/ref.h"

/* Runs the forward of op: writes op->out (and op->aux where the op has one).
 * REMAT_ERR_UNSUPPORTED for a type outside REMAT_OPS. */
remat_status ref_forward(const struct kop *op)
{
    switch (op->type) {
    case REMAT_OP_CONV2D:
        return ref_conv2d_forward(op);
    case REMAT_OP_CONV_TRANSPOSE2D:
        return ref_conv_transpose2d_forward(op);
    case REMAT_OP_BATCH_NORM:
        return ref_batch_norm_forward(op);
    case REMAT_OP_RELU:
        return ref_relu_forward(op);
    case REMAT_OP_MAX_POOL:
        return ref_max_pool_forward(op);
    case REMAT_OP_AVG_POOL:
        return ref_avg_pool_forward(op);
    case REMAT_OP_GLOBAL_AVG_POOL:
        return ref_global_avg_pool_forward(op);
    case REMAT_OP_ADD:
        return ref_add_forward(op);
    case REMAT_OP_CONCAT:
        return ref_concat_forward(op);
    case REMAT_OP_LINEAR:
        return ref_linear_forward(op);
    case REMAT_OP_FLATTEN:
    case REMAT_OP_RESHAPE:
        return REMAT_OK; /* views: the executor shares the buffer */
    case REMAT_OP_DROPOUT:
        return ref_dropout_forward(op);
    case REMAT_OP_UPSAMPLE_BILINEAR:
        return ref_upsample_forward(op);
    case REMAT_OP_CROP:
        return ref_crop_forward(op);
    case REMAT_OP_PAD:
        return ref_pad_forward(op);
    case REMAT_OP_SOFTMAX_CE:
        return ref_softmax_ce_forward(op);
    case REMAT_OP_TOKEN_CE:
        return ref_token_ce_forward(op);
    case REMAT_OP_SUM_LOSSES:
        return ref_sum_losses_forward(op);
    case REMAT_OP_CLIP:
        return ref_clip_forward(op);
    case REMAT_OP_LEAKY_RELU:
        return ref_leaky_relu_forward(op);
    case REMAT_OP_SIGMOID:
        return ref_sigmoid_forward(op);
    case REMAT_OP_TANH:
        return ref_tanh_forward(op);
    case REMAT_OP_HARD_SIGMOID:
        return ref_hard_sigmoid_forward(op);
    case REMAT_OP_HARD_SWISH:
        return ref_hard_swish_forward(op);
    case REMAT_OP_REDUCE_SUM:
        return ref_reduce_sum_forward(op);
    case REMAT_OP_MUL:
        return ref_mul_forward(op);
    case REMAT_OP_SOFTMAX:
        return ref_softmax_forward(op);
    case REMAT_OP_TRANSPOSE:
        return ref_transpose_forward(op);
    case REMAT_OP_LAYER_NORM:
        return ref_layer_norm_forward(op);
    case REMAT_OP_GELU:
        return ref_gelu_forward(op);
    case REMAT_OP_MATMUL:
        return ref_matmul_forward(op);
    case REMAT_OP_SOFTMAX_LAST:
        return ref_softmax_last_forward(op);
    case REMAT_OP_EMBEDDING:
        return ref_embedding_forward(op);
    case REMAT_OP_COUNT:
        break;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "reference backend: no forward for op %s (%d)",
                      remat_op_name(op->type), (int)op->type);
}

/* Runs the backward of op: adds into the wanted din[i], dw and db (kernels.h).
 * REMAT_ERR_UNSUPPORTED for a type outside REMAT_OPS. */
remat_status ref_backward(const struct kop *op)
{
    switch (op->type) {
    case REMAT_OP_CONV2D:
        return ref_conv2d_backward(op);
    case REMAT_OP_CONV_TRANSPOSE2D:
        return ref_conv_transpose2d_backward(op);
    case REMAT_OP_BATCH_NORM:
        return ref_batch_norm_backward(op);
    case REMAT_OP_RELU:
        return ref_relu_backward(op);
    case REMAT_OP_MAX_POOL:
        return ref_max_pool_backward(op);
    case REMAT_OP_AVG_POOL:
        return ref_avg_pool_backward(op);
    case REMAT_OP_GLOBAL_AVG_POOL:
        return ref_global_avg_pool_backward(op);
    case REMAT_OP_ADD:
        return ref_add_backward(op);
    case REMAT_OP_CONCAT:
        return ref_concat_backward(op);
    case REMAT_OP_LINEAR:
        return ref_linear_backward(op);
    case REMAT_OP_FLATTEN:
    case REMAT_OP_RESHAPE:
        return REMAT_OK; /* views: the gradient buffer is shared too */
    case REMAT_OP_DROPOUT:
        return ref_dropout_backward(op);
    case REMAT_OP_UPSAMPLE_BILINEAR:
        return ref_upsample_backward(op);
    case REMAT_OP_CROP:
        return ref_crop_backward(op);
    case REMAT_OP_PAD:
        return ref_pad_backward(op);
    case REMAT_OP_SOFTMAX_CE:
        return ref_softmax_ce_backward(op);
    case REMAT_OP_TOKEN_CE:
        return ref_token_ce_backward(op);
    case REMAT_OP_SUM_LOSSES:
        return ref_sum_losses_backward(op);
    case REMAT_OP_CLIP:
        return ref_clip_backward(op);
    case REMAT_OP_LEAKY_RELU:
        return ref_leaky_relu_backward(op);
    case REMAT_OP_SIGMOID:
        return ref_sigmoid_backward(op);
    case REMAT_OP_TANH:
        return ref_tanh_backward(op);
    case REMAT_OP_HARD_SIGMOID:
        return ref_hard_sigmoid_backward(op);
    case REMAT_OP_HARD_SWISH:
        return ref_hard_swish_backward(op);
    case REMAT_OP_REDUCE_SUM:
        return ref_reduce_sum_backward(op);
    case REMAT_OP_MUL:
        return ref_mul_backward(op);
    case REMAT_OP_SOFTMAX:
        return ref_softmax_backward(op);
    case REMAT_OP_TRANSPOSE:
        return ref_transpose_backward(op);
    case REMAT_OP_LAYER_NORM:
        return ref_layer_norm_backward(op);
    case REMAT_OP_GELU:
        return ref_gelu_backward(op);
    case REMAT_OP_MATMUL:
        return ref_matmul_backward(op);
    case REMAT_OP_SOFTMAX_LAST:
        return ref_softmax_last_backward(op);
    case REMAT_OP_EMBEDDING:
        return ref_embedding_backward(op);
    case REMAT_OP_COUNT:
        break;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED,
                      "reference backend: no backward for op %s (%d)",
                      remat_op_name(op->type), (int)op->type);
}
