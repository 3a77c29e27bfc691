/*
 * own.c - the cuda backend's ops on our own kernels (cuda_kernels.cu, seq.cu):
 * activations, dropout, add, mul, concat, crop, pad, the poolings, the losses, layer norm
 * and GELU, and the transformer's softmax_last, embedding and token_ce (seq_fwd, seq_bwd).
 */
#include "kernels/cuda/cuda.h"

/* -------------------------------------------------------------- own kernels */

static struct cu_pool pool_geom(const struct kop *op)
{
    const remat_attrs *at = op->at;
    struct cu_pool g = {
        .planes = op->in[0].shape[0] * op->in[0].shape[1], .h = op->in[0].shape[2],
        .w = op->in[0].shape[3], .ho = op->out.shape[2], .wo = op->out.shape[3],
        .kh = at->kh, .kw = at->kw, .sh = at->sh > 0 ? at->sh : at->kh,
        .sw = at->sw > 0 ? at->sw : at->kw, .ph = at->ph, .pw = at->pw,
        .include_pad = at->count_include_pad,
    };
    return g;
}

/* as ref/act.c: 0 means 0.5 */
static float drop_p(const remat_attrs *at)
{
    return at->p > 0 ? at->p : 0.5f;
}

/* crop's window origin, as ref/elem.c (a negative offset: centred) */
static void crop_origin(const struct kop *op, int64_t *oh, int64_t *ow)
{
    const struct ktensor *x = &op->in[0], *y = &op->out;

    *oh = op->at->offset_h >= 0 ? op->at->offset_h : (x->shape[2] - y->shape[2]) / 2;
    *ow = op->at->offset_w >= 0 ? op->at->offset_w : (x->shape[3] - y->shape[3]) / 2;
}

/* layer norm's rows: x seen as (numel / d, d), d its last axis (op_table_seq.c) */
static int64_t ln_width(const struct kop *op)
{
    return op->in[0].shape[op->in[0].ndim - 1];
}

/* as ref/seq.c: 0 means 1e-5 */
static double ln_eps(const remat_attrs *at)
{
    return at->eps > 0 ? at->eps : 1e-5;
}

/* ------------------------------------------------------- transformer ops */

/* softmax_last's scale, as ref/matmul.c: 0 means 1 */
static double sm_scale(const remat_attrs *at)
{
    return at->scale != 0 ? (double)at->scale : 1.0;
}

/* The least bad position a kernel flagged in the all-ones word at flag (ULLONG_MAX:
 * none), after the stream has run it. */
static remat_status read_flag(struct cuda_ctx *c, const void *flag, unsigned long long *bad)
{
    CU_TRY(cudaMemcpyAsync(bad, flag, sizeof *bad, cudaMemcpyDeviceToHost, c->stream));
    CU_TRY(cudaStreamSynchronize(c->stream));
    return REMAT_OK;
}

/* embedding forward: the gather, then a token id outside the table refused by position */
static remat_status embedding_fwd(struct cuda_ctx *c, const struct kop *op)
{
    const int32_t *ids = (const int32_t *)op->in[0].data;
    int64_t n = ktensor_numel(&op->in[0]), vocab = op->w.shape[0], d = op->w.shape[1];
    unsigned long long bad = 0;
    int32_t id = 0;
    remat_status st;

    K_TRY(cudaMemsetAsync(op->scratch, 0xff, sizeof bad, c->stream));
    K_TRY(cu_embedding_fwd((cu_stream)c->stream, ids, op->w.data, op->out.data,
                           (unsigned long long *)op->scratch, n, vocab, d));
    if ((st = read_flag(c, op->scratch, &bad)) || bad == ~0ull)
        return st;
    CU_TRY(cudaMemcpy(&id, ids + bad, sizeof id, cudaMemcpyDefault));
    return REMAT_FAIL(REMAT_ERR_ARG, "embedding: token id %d at position %lld is outside the "
                      "vocabulary of %lld", (int)id, (long long)bad, (long long)vocab);
}

/* token_ce forward: scratch = the flag (64 bytes), then a double per row */
static remat_status token_ce_fwd(struct cuda_ctx *c, const struct kop *op)
{
    const int32_t *lab = (const int32_t *)op->in[1].data;
    int64_t v = op->in[0].shape[op->in[0].ndim - 1], rows = ktensor_numel(&op->in[0]) / v;
    unsigned long long bad = 0;
    int32_t l = 0;
    char *ws = op->scratch;
    remat_status st;

    K_TRY(cudaMemsetAsync(ws, 0xff, sizeof bad, c->stream));
    K_TRY(cu_token_ce_fwd((cu_stream)c->stream, op->in[0].data, lab, op->aux.data, op->out.data,
                          (double *)(ws + 64), (unsigned long long *)ws, rows, v));
    if ((st = read_flag(c, ws, &bad)) || bad == ~0ull)
        return st;
    CU_TRY(cudaMemcpy(&l, lab + bad, sizeof l, cudaMemcpyDefault));
    return REMAT_FAIL(REMAT_ERR_ARG, "token_ce: label %d of position %lld is not a class in "
                      "[0, %lld)", (int)l, (long long)bad, (long long)v);
}

/* softmax_last, embedding and token_ce forward */
static remat_status seq_fwd(struct cuda_ctx *c, const struct kop *op)
{
    const struct ktensor *x = &op->in[0];

    switch (op->type) {
    case REMAT_OP_SOFTMAX_LAST: {
        int64_t n = x->shape[x->ndim - 1];

        K_TRY(cu_softmax_last_fwd((cu_stream)c->stream, x->data, op->out.data,
                                  ktensor_numel(x) / n, x->shape[x->ndim - 2], n,
                                  op->at->causal, sm_scale(op->at)));
        return REMAT_OK;
    }
    case REMAT_OP_EMBEDDING:
        return embedding_fwd(c, op);
    default:
        return token_ce_fwd(c, op);
    }
}

/* their backwards: softmax_last reads y, embedding the ids (its table's gradient only),
 * token_ce the probabilities and the targets (scratch: the count of those that count) */
static remat_status seq_bwd(struct cuda_ctx *c, const struct kop *op)
{
    cu_stream s = (cu_stream)c->stream;
    const struct ktensor *y = &op->out;

    switch (op->type) {
    case REMAT_OP_SOFTMAX_LAST: {
        int64_t n = y->shape[y->ndim - 1];

        if (op->din[0].data)
            K_TRY(cu_softmax_last_bwd(s, y->data, op->dout.data, op->din[0].data,
                                      ktensor_numel(y) / n, n, sm_scale(op->at)));
        return REMAT_OK;
    }
    case REMAT_OP_EMBEDDING:
        if (op->dw.data)
            K_TRY(cu_embedding_bwd(s, (const int32_t *)op->in[0].data, op->dout.data,
                                   op->dw.data, ktensor_numel(&op->in[0]), op->w.shape[0],
                                   op->w.shape[1]));
        return REMAT_OK;
    default: {
        int64_t v = op->aux.shape[op->aux.ndim - 1];

        if (op->din[0].data)
            K_TRY(cu_token_ce_bwd(s, op->aux.data, (const int32_t *)op->in[1].data,
                                  op->dout.data, op->din[0].data, (double *)op->scratch,
                                  ktensor_numel(&op->aux) / v, v));
        return REMAT_OK;
    }
    }
}

/* hard_sigmoid's slope and offset, alpha 0 meaning PyTorch's (remat.h) */
static double hs_alpha(const remat_attrs *at)
{
    return at->alpha != 0 ? at->alpha : 1.0 / 6;
}

static double hs_beta(const remat_attrs *at)
{
    return at->alpha != 0 ? at->beta : 0.5;
}

/* reduce_sum's shapes as 4-d (leading 1s) and the output's strides, 0 where summed */
static struct cu_reduce reduce_geom(const struct kop *op)
{
    struct cu_reduce g = {.scale = op->at->scale != 0 ? op->at->scale : 1.0};
    int64_t ys[4], st = 1;
    int k = 4 - op->in[0].ndim;

    for (int i = 0; i < 4; i++) {
        g.xs[i] = i < k ? 1 : op->in[0].shape[i - k];
        ys[i] = i < k ? 1 : op->out.shape[i - k];
    }
    for (int i = 3; i >= 0; i--) {
        g.os[i] = ys[i] == g.xs[i] ? st : 0;
        st *= ys[i];
    }
    return g;
}

/* ---------------------------------------------------------------- dispatch */

/* An elementwise activation as cu_act_fwd/bwd take it (cuda_kernels.h): its code and
 * its two parameters (clip's bounds, leaky relu's slope). */
struct act {
    int what;
    float a, b;
};

static struct act act_of(const struct kop *op)
{
    switch (op->type) {
    case REMAT_OP_RELU:
        return (struct act){0, 0, 0};
    case REMAT_OP_CLIP:
        return (struct act){1, op->at->clip_min, op->at->clip_max};
    case REMAT_OP_LEAKY_RELU:
        return (struct act){2, op->at->alpha, 0};
    case REMAT_OP_SIGMOID:
        return (struct act){3, 0, 0};
    default:
        return (struct act){4, 0, 0}; /* tanh */
    }
}

remat_status cuda_own_fwd(struct cuda_ctx *c, const struct kop *op)
{
    cu_stream s = (cu_stream)c->stream;
    const remat_attrs *at = op->at;
    int64_t n = ktensor_numel(&op->out);

    switch (op->type) {
    case REMAT_OP_SOFTMAX_LAST:
    case REMAT_OP_EMBEDDING:
    case REMAT_OP_TOKEN_CE:
        return seq_fwd(c, op);
    case REMAT_OP_RELU:
    case REMAT_OP_CLIP:
    case REMAT_OP_LEAKY_RELU:
    case REMAT_OP_SIGMOID:
    case REMAT_OP_TANH: {
        struct act a = act_of(op);

        K_TRY(cu_act_fwd(s, a.what, a.a, a.b, op->in[0].data, op->out.data, n));
        return REMAT_OK;
    }
    case REMAT_OP_HARD_SIGMOID:
    case REMAT_OP_HARD_SWISH:
        K_TRY(cu_hard_fwd(s, op->type == REMAT_OP_HARD_SWISH, hs_alpha(at), hs_beta(at),
                          op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_REDUCE_SUM:
        K_TRY(cu_reduce_fwd(s, reduce_geom(op), op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_GELU:
        K_TRY(cu_gelu_fwd(s, at->approximate, op->in[0].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_LAYER_NORM: {
        int64_t d = ln_width(op);

        K_TRY(cu_layer_norm_fwd(s, op->in[0].data, op->w.data, op->b.data, op->out.data,
                                op->aux.data, n / d, d, ln_eps(at)));
        return REMAT_OK;
    }
    case REMAT_OP_DROPOUT:
        K_TRY(cu_dropout_fwd(s, op->in[0].data, op->out.data, n, drop_p(at), op->key));
        return REMAT_OK;
    case REMAT_OP_ADD:
        K_TRY(cu_add2(s, op->in[0].data, op->n_in > 1 ? op->in[1].data : NULL, op->out.data, n));
        for (int32_t i = 2; i < op->n_in; i++)
            K_TRY(cu_acc(s, op->in[i].data, NULL, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_MUL:
        K_TRY(cu_mul2(s, op->in[0].data, op->in[1].data, op->out.data, n));
        return REMAT_OK;
    case REMAT_OP_CONCAT: {
        int64_t hw = n / (op->out.shape[0] * op->out.shape[1]), c0 = 0;

        for (int32_t i = 0; i < op->n_in; i++) {
            int64_t ci = op->in[i].shape[1];

            K_TRY(cu_copy2d(s, op->in[i].data, ci * hw, op->out.data + c0 * hw,
                            op->out.shape[1] * hw, op->out.shape[0], ci * hw, 0));
            c0 += ci;
        }
        return REMAT_OK;
    }
    case REMAT_OP_CROP: {
        int64_t oh, ow;

        crop_origin(op, &oh, &ow);
        K_TRY(cu_window(s, op->in[0].data, op->in[0].shape[2], op->in[0].shape[3], op->out.data,
                        op->out.shape[2], op->out.shape[3],
                        op->out.shape[0] * op->out.shape[1], oh, ow, 0));
        return REMAT_OK;
    }
    case REMAT_OP_PAD:
        K_TRY(cu_window(s, op->in[0].data, op->in[0].shape[2], op->in[0].shape[3], op->out.data,
                        op->out.shape[2], op->out.shape[3], op->out.shape[0] * op->out.shape[1],
                        -(int64_t)at->pad_t, -(int64_t)at->pad_l, 0));
        return REMAT_OK;
    case REMAT_OP_MAX_POOL:
        K_TRY(cu_maxpool_fwd(s, pool_geom(op), op->in[0].data, op->out.data,
                             (int32_t *)op->aux.data));
        return REMAT_OK;
    case REMAT_OP_AVG_POOL:
        K_TRY(cu_avgpool_fwd(s, pool_geom(op), op->in[0].data, op->out.data));
        return REMAT_OK;
    case REMAT_OP_GLOBAL_AVG_POOL:
        K_TRY(cu_gap_fwd(s, op->in[0].data, op->out.data, op->in[0].shape[0] * op->in[0].shape[1],
                         op->in[0].shape[2] * op->in[0].shape[3]));
        return REMAT_OK;
    case REMAT_OP_SOFTMAX_CE: {
        int64_t rows = op->in[0].shape[0], k = op->in[0].shape[1];
        char *ws = op->scratch;
        int32_t bad = 0;

        K_TRY(cudaMemsetAsync(ws, 0, 64, c->stream));
        K_TRY(cu_softmax_ce_fwd(s, op->in[0].data, (const int32_t *)op->in[1].data, op->aux.data,
                                op->out.data, (double *)(ws + 64), (int32_t *)ws, rows, k));
        CU_TRY(cudaMemcpyAsync(&bad, ws, sizeof bad, cudaMemcpyDeviceToHost, c->stream));
        CU_TRY(cudaStreamSynchronize(c->stream));
        if (bad)
            return REMAT_FAIL(REMAT_ERR_ARG, "softmax_ce: the label of sample %d is not a class "
                              "in [0, %lld)", bad - 1, (long long)k);
        return REMAT_OK;
    }
    case REMAT_OP_SUM_LOSSES: {
        struct cu_ptrs p;

        if (op->n_in > CU_MAX_SUM)
            break;
        for (int32_t i = 0; i < op->n_in; i++)
            p.p[i] = op->in[i].data;
        K_TRY(cu_sum_scalars(s, p, op->n_in, op->out.data));
        return REMAT_OK;
    }
    default:
        break;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend has no %s kernel yet",
                      remat_op_name(op->type));
}

/* concat's backward: each input's channels of dy added into its gradient. */
static remat_status concat_bwd(cu_stream s, const struct kop *op, const float *dy, int64_t n)
{
    int64_t hw = n / (op->out.shape[0] * op->out.shape[1]), c0 = 0;

    for (int32_t i = 0; i < op->n_in; i++) {
        int64_t ci = op->in[i].shape[1];

        if (op->din[i].data)
            K_TRY(cu_copy2d(s, dy + c0 * hw, op->out.shape[1] * hw, op->din[i].data, ci * hw,
                            op->out.shape[0], ci * hw, 1));
        c0 += ci;
    }
    return REMAT_OK;
}

remat_status cuda_own_bwd(struct cuda_ctx *c, const struct kop *op)
{
    cu_stream s = (cu_stream)c->stream;
    const remat_attrs *at = op->at;
    const float *dy = op->dout.data;
    float *dx = op->din[0].data;
    int64_t n = ktensor_numel(&op->out);

    switch (op->type) {
    case REMAT_OP_SOFTMAX_LAST:
    case REMAT_OP_EMBEDDING:
    case REMAT_OP_TOKEN_CE:
        return seq_bwd(c, op);
    case REMAT_OP_RELU:
    case REMAT_OP_CLIP:
    case REMAT_OP_LEAKY_RELU:
    case REMAT_OP_SIGMOID:
    case REMAT_OP_TANH: {
        struct act a = act_of(op);

        if (dx)
            K_TRY(cu_act_bwd(s, a.what, a.a, a.b, op->out.data, dy, dx, n));
        return REMAT_OK;
    }
    case REMAT_OP_DROPOUT:
        if (dx)
            K_TRY(cu_dropout_bwd(s, dy, dx, n, drop_p(at), op->key));
        return REMAT_OK;
    case REMAT_OP_HARD_SIGMOID:
    case REMAT_OP_HARD_SWISH: {
        bool swish = op->type == REMAT_OP_HARD_SWISH;

        if (dx)
            K_TRY(cu_hard_bwd(s, swish, hs_alpha(at), swish ? op->in[0].data : op->out.data, dy,
                              dx, n));
        return REMAT_OK;
    }
    case REMAT_OP_REDUCE_SUM:
        if (dx)
            K_TRY(cu_reduce_bwd(s, reduce_geom(op), dy, dx, ktensor_numel(&op->in[0])));
        return REMAT_OK;
    case REMAT_OP_GELU:
        if (dx)
            K_TRY(cu_gelu_bwd(s, at->approximate, op->in[0].data, dy, dx, n));
        return REMAT_OK;
    case REMAT_OP_LAYER_NORM: {
        int64_t d = ln_width(op);

        if (dx || op->dw.data || op->db.data)
            K_TRY(cu_layer_norm_bwd(s, op->in[0].data, op->w.data, op->aux.data, dy, dx,
                                    op->dw.data, op->db.data, n / d, d));
        return REMAT_OK;
    }
    case REMAT_OP_ADD:
        for (int32_t i = 0; i < op->n_in; i++)
            if (op->din[i].data)
                K_TRY(cu_acc(s, dy, NULL, op->din[i].data, n));
        return REMAT_OK;
    case REMAT_OP_MUL:
        for (int32_t i = 0; i < 2; i++)
            if (op->din[i].data)
                K_TRY(cu_acc(s, dy, op->in[1 - i].data, op->din[i].data, n));
        return REMAT_OK;
    case REMAT_OP_CONCAT:
        if (!dy)
            break;
        return concat_bwd(s, op, dy, n);
    case REMAT_OP_CROP: { /* dx[oh + h, ow + w] += dy[h, w] */
        int64_t oh, ow;

        if (!dx || !dy)
            break;
        crop_origin(op, &oh, &ow);
        K_TRY(cu_window(s, dy, op->out.shape[2], op->out.shape[3], dx, op->in[0].shape[2],
                        op->in[0].shape[3], op->out.shape[0] * op->out.shape[1], -oh, -ow, 1));
        return REMAT_OK;
    }
    case REMAT_OP_PAD: /* dx += dy's interior */
        if (!dx || !dy)
            break;
        K_TRY(cu_window(s, dy, op->out.shape[2], op->out.shape[3], dx, op->in[0].shape[2],
                        op->in[0].shape[3], op->out.shape[0] * op->out.shape[1], at->pad_t,
                        at->pad_l, 1));
        return REMAT_OK;
    case REMAT_OP_MAX_POOL:
        if (dx)
            K_TRY(cu_maxpool_bwd(s, pool_geom(op), (const int32_t *)op->aux.data, dy, dx));
        return REMAT_OK;
    case REMAT_OP_AVG_POOL:
        if (dx)
            K_TRY(cu_avgpool_bwd(s, pool_geom(op), dy, dx));
        return REMAT_OK;
    case REMAT_OP_GLOBAL_AVG_POOL:
        if (dx)
            K_TRY(cu_gap_bwd(s, dy, dx, op->din[0].shape[0] * op->din[0].shape[1],
                             op->din[0].shape[2] * op->din[0].shape[3]));
        return REMAT_OK;
    case REMAT_OP_SOFTMAX_CE:
        if (dx)
            K_TRY(cu_softmax_ce_bwd(s, op->aux.data, (const int32_t *)op->in[1].data, dy, dx,
                                    op->aux.shape[0], op->aux.shape[1]));
        return REMAT_OK;
    case REMAT_OP_SUM_LOSSES:
        for (int32_t i = 0; i < op->n_in; i++)
            if (op->din[i].data)
                K_TRY(cu_acc(s, dy, NULL, op->din[i].data, 1));
        return REMAT_OK;
    default:
        break;
    }
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the cuda backend has no %s backward kernel yet",
                      remat_op_name(op->type));
}

/* The scratch our own kernels take: softmax_ce's and token_ce's forward, a flag and a
 * double per row; token_ce's backward, the count of its targets; embedding's forward, a
 * flag. */
size_t cuda_own_need(const struct kop *op, bool bwd)
{
    if (op->type == REMAT_OP_SOFTMAX_CE && !bwd)
        return 64 + 8 * (size_t)op->in[0].shape[0];
    if (op->type == REMAT_OP_TOKEN_CE)
        return bwd ? 64 : 64 + 8 * (size_t)ktensor_numel(&op->in[1]);
    if (op->type == REMAT_OP_EMBEDDING && !bwd)
        return 64;
    return 0;
}

bool cuda_own_has(remat_op type)
{
    static const remat_op have[] = {
        REMAT_OP_RELU, REMAT_OP_CLIP, REMAT_OP_LEAKY_RELU, REMAT_OP_SIGMOID, REMAT_OP_TANH,
        REMAT_OP_DROPOUT, REMAT_OP_ADD, REMAT_OP_MUL, REMAT_OP_CONCAT, REMAT_OP_CROP, REMAT_OP_PAD,
        REMAT_OP_MAX_POOL, REMAT_OP_AVG_POOL, REMAT_OP_GLOBAL_AVG_POOL, REMAT_OP_SOFTMAX_CE,
        REMAT_OP_SUM_LOSSES, REMAT_OP_FLATTEN, REMAT_OP_RESHAPE, REMAT_OP_LAYER_NORM,
        REMAT_OP_GELU, REMAT_OP_SOFTMAX_LAST, REMAT_OP_EMBEDDING, REMAT_OP_TOKEN_CE,
        REMAT_OP_HARD_SIGMOID, REMAT_OP_HARD_SWISH, REMAT_OP_REDUCE_SUM,
    };

    for (size_t i = 0; i < sizeof have / sizeof have[0]; i++)
        if (have[i] == type)
            return true;
    return false;
}
