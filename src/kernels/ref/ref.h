/*
 * ref.h - the reference backend's op families, behind ref_forward / ref_backward
 * (dispatch.c). One file per family: conv.c, norm.c, act.c, pool.c, elem.c, linear.c,
 * loss.c, seq.c, reduce.c.
 *
 * The reference backend is the specification: plain loops, every sum taken in one fixed
 * order with a double accumulator, float storage, so two runs are bit-identical. Where a
 * backward scatters (max pooling, bilinear upsampling) it adds into the float gradient in
 * the fixed order of the output elements. No kernel allocates memory.
 *
 * Each function takes the whole struct kop (kernels.h states its conventions) and
 * returns REMAT_OK, or a failure status with a message. Attributes left zero are read
 * as their defaults (remat.h), as shape inference fills them, so a kernel called
 * outside a graph behaves as it does inside one.
 */
#ifndef REMAT_KERNELS_REF_H
#define REMAT_KERNELS_REF_H

#include "kernels/kernels.h"

/* dL/dy at flat index i: dout.data == NULL stands for the constant 1 (kernels.h). */
static inline float ref_dy(const struct ktensor *dout, int64_t i)
{
    return dout->data ? dout->data[i] : 1.0f;
}

/* conv.c: conv2d, weight (Cout, Cin/groups, kh, kw); conv_transpose2d, weight
 * (Cin, Cout/groups, kh, kw) as in PyTorch. */
remat_status ref_conv2d_forward(const struct kop *op);
remat_status ref_conv2d_backward(const struct kop *op);
remat_status ref_conv_transpose2d_forward(const struct kop *op);
remat_status ref_conv_transpose2d_backward(const struct kop *op);

/* norm.c: batch norm in training mode on (N, C) or (N, C, H, W). */
remat_status ref_batch_norm_forward(const struct kop *op);
remat_status ref_batch_norm_backward(const struct kop *op);

/* act.c: relu, clip, leaky relu, sigmoid, tanh, hard sigmoid, hard swish, softmax (over
 * axis 1), dropout. reduce.c: reduce_sum (over the axes the output has as 1). */
remat_status ref_reduce_sum_forward(const struct kop *op);
remat_status ref_reduce_sum_backward(const struct kop *op);
remat_status ref_relu_forward(const struct kop *op);
remat_status ref_relu_backward(const struct kop *op);
remat_status ref_clip_forward(const struct kop *op);
remat_status ref_clip_backward(const struct kop *op);
remat_status ref_leaky_relu_forward(const struct kop *op);
remat_status ref_leaky_relu_backward(const struct kop *op);
remat_status ref_sigmoid_forward(const struct kop *op);
remat_status ref_sigmoid_backward(const struct kop *op);
remat_status ref_tanh_forward(const struct kop *op);
remat_status ref_tanh_backward(const struct kop *op);
remat_status ref_hard_sigmoid_forward(const struct kop *op);
remat_status ref_hard_sigmoid_backward(const struct kop *op);
remat_status ref_hard_swish_forward(const struct kop *op);
remat_status ref_hard_swish_backward(const struct kop *op);
remat_status ref_softmax_forward(const struct kop *op);
remat_status ref_softmax_backward(const struct kop *op);
/* elem.c: mul (equal shapes, or (N, C, H, W) by (N, C, 1, 1)). shape.c: transpose. */
remat_status ref_mul_forward(const struct kop *op);
remat_status ref_mul_backward(const struct kop *op);
remat_status ref_transpose_forward(const struct kop *op);
remat_status ref_transpose_backward(const struct kop *op);
remat_status ref_dropout_forward(const struct kop *op);
remat_status ref_dropout_backward(const struct kop *op);

/* pool.c: max pooling (int32 argmax in aux), average pooling, global average pooling. */
remat_status ref_max_pool_forward(const struct kop *op);
remat_status ref_max_pool_backward(const struct kop *op);
remat_status ref_avg_pool_forward(const struct kop *op);
remat_status ref_avg_pool_backward(const struct kop *op);
remat_status ref_global_avg_pool_forward(const struct kop *op);
remat_status ref_global_avg_pool_backward(const struct kop *op);

/* elem.c: add, concat (channels), crop, zero pad, bilinear upsample. */
remat_status ref_add_forward(const struct kop *op);
remat_status ref_add_backward(const struct kop *op);
remat_status ref_concat_forward(const struct kop *op);
remat_status ref_concat_backward(const struct kop *op);
remat_status ref_crop_forward(const struct kop *op);
remat_status ref_crop_backward(const struct kop *op);
remat_status ref_pad_forward(const struct kop *op);
remat_status ref_pad_backward(const struct kop *op);
remat_status ref_upsample_forward(const struct kop *op);
remat_status ref_upsample_backward(const struct kop *op);

/* linear.c: y = x W^T + b, W (out, in). */
remat_status ref_linear_forward(const struct kop *op);
remat_status ref_linear_backward(const struct kop *op);

/* loss.c: softmax cross-entropy (mean over the batch), sum of losses. */
remat_status ref_softmax_ce_forward(const struct kop *op);
remat_status ref_softmax_ce_backward(const struct kop *op);
remat_status ref_token_ce_forward(const struct kop *op);
remat_status ref_token_ce_backward(const struct kop *op);
remat_status ref_sum_losses_forward(const struct kop *op);
remat_status ref_sum_losses_backward(const struct kop *op);

/* seq.c: layer norm over the last axis ((mean, invstd) per row in aux), GELU (exact, or
 * the tanh form with at->approximate). */
remat_status ref_layer_norm_forward(const struct kop *op);
remat_status ref_layer_norm_backward(const struct kop *op);
remat_status ref_gelu_forward(const struct kop *op);
remat_status ref_gelu_backward(const struct kop *op);
/* matmul.c: the batched matrix product (B shared or per batch, either transposed). */
remat_status ref_matmul_forward(const struct kop *op);
remat_status ref_matmul_backward(const struct kop *op);
/* matmul.c too: the softmax over the last axis, causal mask optional (reads y). */
remat_status ref_softmax_last_forward(const struct kop *op);
remat_status ref_softmax_last_backward(const struct kop *op);
/* matmul.c too: the embedding of token ids (refuses an id outside the table). */
remat_status ref_embedding_forward(const struct kop *op);
remat_status ref_embedding_backward(const struct kop *op);

#endif
