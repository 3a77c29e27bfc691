/*
 * elem.c - reference add, concat, crop, pad and bilinear upsampling, forward and
 * backward. None of their backwards reads a forward tensor: only dy and the shapes.
 *
 * add sums its n inputs in input order (double); concat joins (N, C_i, ...) inputs
 * along the channels; crop takes the (out_h, out_w) window at (offset_h, offset_w) (an
 * offset of -1, not yet resolved, reads as centred, as shape inference resolves it); pad
 * adds pad_t, pad_b rows and pad_l, pad_r columns of zeros.
 *
 * Bilinear upsampling follows PyTorch's upsample_bilinear2d without explicit scales:
 *   align_corners: src = dst * (in - 1) / (out - 1)   (0 when out == 1),
 *   otherwise:     src = max((dst + 0.5) * in / out - 0.5, 0),
 * i0 = floor(src), i1 = min(i0 + 1, in - 1), lambda = src - i0, and
 * y = (1-lh)((1-lw) x00 + lw x01) + lh((1-lw) x10 + lw x11), in double. The backward
 * scatters dy times the same four weights into dx, in output order.
 */
#include "kernels/ref/ref.h"

/* add forward: y = in[0] + in[1] + ... in that order (double). */
remat_status ref_add_forward(const struct kop *op)
{
    /* in[i], y: (numel) */
    int64_t n = ktensor_numel(&op->out);

    for (int64_t j = 0; j < n; j++) {
        double acc = 0;

        for (int32_t i = 0; i < op->n_in; i++)
            acc += op->in[i].data[j];
        op->out.data[j] = (float)acc;
    }
    return REMAT_OK;
}

/* add backward: din[i] += dy for every wanted input. */
remat_status ref_add_backward(const struct kop *op)
{
    /* dy, din[i]: (numel) */
    int64_t n = ktensor_numel(&op->out);

    for (int32_t i = 0; i < op->n_in; i++) {
        float *dx = op->din[i].data;

        if (!dx)
            continue;
        for (int64_t j = 0; j < n; j++)
            dx[j] += ref_dy(&op->dout, j);
    }
    return REMAT_OK;
}

/* mul: the second input's index for element i of the first (equal shapes, or a
 * (N, C, 1, 1) second against a (N, C, H, W) first: one value per plane). */
static int64_t mul_j(const struct kop *op, int64_t i)
{
    const struct ktensor *a = &op->in[0], *b = &op->in[1];

    if (ktensor_numel(b) == ktensor_numel(a))
        return i;
    return i / (a->shape[2] * a->shape[3]);
}

/* mul forward: y = a b. */
remat_status ref_mul_forward(const struct kop *op)
{
    const float *a = op->in[0].data, *b = op->in[1].data;
    int64_t n = ktensor_numel(&op->out);

    for (int64_t i = 0; i < n; i++)
        op->out.data[i] = a[i] * b[mul_j(op, i)];
    return REMAT_OK;
}

/* mul backward: da += dy b; db += dy a, summed in double over each plane when b is
 * broadcast (in element order). */
remat_status ref_mul_backward(const struct kop *op)
{
    const float *a = op->in[0].data, *b = op->in[1].data;
    float *da = op->din[0].data, *db = op->din[1].data;
    int64_t n = ktensor_numel(&op->out), nb = ktensor_numel(&op->in[1]);

    if (da)
        for (int64_t i = 0; i < n; i++)
            da[i] += (float)((double)ref_dy(&op->dout, i) * b[mul_j(op, i)]);
    if (db && nb == n) {
        for (int64_t i = 0; i < n; i++)
            db[i] += (float)((double)ref_dy(&op->dout, i) * a[i]);
    } else if (db) {
        int64_t plane = n / nb;

        for (int64_t j = 0; j < nb; j++) {
            double acc = 0;

            for (int64_t k = 0; k < plane; k++)
                acc += (double)ref_dy(&op->dout, j * plane + k) * a[j * plane + k];
            db[j] += (float)acc;
        }
    }
    return REMAT_OK;
}

/* Elements after the channel axis: 1 for 2-d, H*W for 4-d. */
static int64_t inner_size(const struct ktensor *t)
{
    int64_t s = 1;

    for (int i = 2; i < t->ndim; i++)
        s *= t->shape[i];
    return s;
}

/* concat forward: y[n, c0 + c, ...] = in[i][n, c, ...], c0 the channels before input i. */
remat_status ref_concat_forward(const struct kop *op)
{
    /* in[i]: (N, C_i[, H, W]); y: (N, sum C_i[, H, W]) */
    int64_t nb = op->out.shape[0], ctot = op->out.shape[1], inner = inner_size(&op->out);
    int64_t c0 = 0;

    for (int32_t i = 0; i < op->n_in; i++) {
        int64_t ci = op->in[i].shape[1], len = ci * inner;

        for (int64_t n = 0; n < nb; n++)
            for (int64_t j = 0; j < len; j++)
                op->out.data[(n * ctot + c0) * inner + j] = op->in[i].data[n * len + j];
        c0 += ci;
    }
    REMAT_ASSERT(c0 == ctot);
    return REMAT_OK;
}

/* concat backward: din[i] += its channel slice of dy. */
remat_status ref_concat_backward(const struct kop *op)
{
    /* dy: (N, sum C_i[, H, W]); din[i]: (N, C_i[, H, W]) */
    int64_t nb = op->out.shape[0], ctot = op->out.shape[1], inner = inner_size(&op->out);
    int64_t c0 = 0;

    for (int32_t i = 0; i < op->n_in; i++) {
        int64_t ci = op->in[i].shape[1], len = ci * inner;
        float *dx = op->din[i].data;

        for (int64_t n = 0; dx && n < nb; n++)
            for (int64_t j = 0; j < len; j++)
                dx[n * len + j] += ref_dy(&op->dout, (n * ctot + c0) * inner + j);
        c0 += ci;
    }
    return REMAT_OK;
}

/* The crop window's top-left corner, -1 read as centred. */
static void crop_origin(const struct kop *op, int64_t *oh, int64_t *ow)
{
    const struct ktensor *x = &op->in[0], *y = &op->out;

    *oh = op->at->offset_h >= 0 ? op->at->offset_h : (x->shape[2] - y->shape[2]) / 2;
    *ow = op->at->offset_w >= 0 ? op->at->offset_w : (x->shape[3] - y->shape[3]) / 2;
    REMAT_ASSERT(*oh + y->shape[2] <= x->shape[2] && *ow + y->shape[3] <= x->shape[3]);
}

/* crop forward: y[n, c, h, w] = x[n, c, offset_h + h, offset_w + w]. */
remat_status ref_crop_forward(const struct kop *op)
{
    /* x: (N, C, H, W); y: (N, C, out_h, out_w) */
    const struct ktensor *x = &op->in[0], *y = &op->out;
    int64_t planes = y->shape[0] * y->shape[1], ho = y->shape[2], wo = y->shape[3];
    int64_t h0, w0;

    crop_origin(op, &h0, &w0);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t h = 0; h < ho; h++)
            for (int64_t w = 0; w < wo; w++)
                y->data[(p * ho + h) * wo + w] =
                    x->data[(p * x->shape[2] + h0 + h) * x->shape[3] + w0 + w];
    return REMAT_OK;
}

/* crop backward: dx[n, c, offset_h + h, offset_w + w] += dy[n, c, h, w]. */
remat_status ref_crop_backward(const struct kop *op)
{
    /* dy: (N, C, out_h, out_w); dx: (N, C, H, W) */
    const struct ktensor *x = &op->in[0], *y = &op->out;
    int64_t planes = y->shape[0] * y->shape[1], ho = y->shape[2], wo = y->shape[3];
    float *dx = op->din[0].data;
    int64_t h0, w0;

    crop_origin(op, &h0, &w0);
    for (int64_t p = 0; dx && p < planes; p++)
        for (int64_t h = 0; h < ho; h++)
            for (int64_t w = 0; w < wo; w++)
                dx[(p * x->shape[2] + h0 + h) * x->shape[3] + w0 + w] +=
                    ref_dy(&op->dout, (p * ho + h) * wo + w);
    return REMAT_OK;
}

/* pad forward: y = x surrounded by pad_t, pad_b rows and pad_l, pad_r columns of 0. */
remat_status ref_pad_forward(const struct kop *op)
{
    /* x: (N, C, H, W); y: (N, C, H + pad_t + pad_b, W + pad_l + pad_r) */
    const struct ktensor *x = &op->in[0], *y = &op->out;
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t ho = y->shape[2], wo = y->shape[3], t = op->at->pad_t, l = op->at->pad_l;

    REMAT_ASSERT(ho == h + t + op->at->pad_b && wo == w + l + op->at->pad_r);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < ho; i++)
            for (int64_t j = 0; j < wo; j++) {
                bool in = i >= t && i < t + h && j >= l && j < l + w;

                y->data[(p * ho + i) * wo + j] =
                    in ? x->data[(p * h + i - t) * w + j - l] : 0.0f;
            }
    return REMAT_OK;
}

/* pad backward: dx += the interior of dy. */
remat_status ref_pad_backward(const struct kop *op)
{
    /* dy: (N, C, Ho, Wo); dx: (N, C, H, W) */
    const struct ktensor *x = &op->in[0], *y = &op->out;
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t ho = y->shape[2], wo = y->shape[3], t = op->at->pad_t, l = op->at->pad_l;
    float *dx = op->din[0].data;

    for (int64_t p = 0; dx && p < planes; p++)
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < w; j++)
                dx[(p * h + i) * w + j] += ref_dy(&op->dout, (p * ho + i + t) * wo + j + l);
    return REMAT_OK;
}

/* One output coordinate's two source indices and the weight of the second. */
struct lerp {
    int64_t i0, i1;
    double lambda;
};

/* The source indices and weight of output coordinate dst along an axis in -> out. */
static struct lerp lerp_at(int64_t dst, int64_t in, int64_t out, bool align_corners)
{
    struct lerp r;
    double src;

    if (align_corners)
        src = out > 1 ? (double)dst * (double)(in - 1) / (double)(out - 1) : 0.0;
    else
        src = ((double)dst + 0.5) * (double)in / (double)out - 0.5;
    if (src < 0)
        src = 0;
    r.i0 = (int64_t)src; /* floor: src >= 0 */
    if (r.i0 > in - 1)
        r.i0 = in - 1;
    r.i1 = r.i0 + 1 < in ? r.i0 + 1 : in - 1;
    r.lambda = src - (double)r.i0;
    return r;
}

/* Bilinear upsample forward to (out_h, out_w) = out's shape (see the file comment). */
remat_status ref_upsample_forward(const struct kop *op)
{
    /* x: (N, C, H, W); y: (N, C, Ho, Wo) */
    const struct ktensor *x = &op->in[0], *y = &op->out;
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t ho = y->shape[2], wo = y->shape[3];
    bool ac = op->at->align_corners;

    REMAT_ASSERT(x->ndim == 4 && y->ndim == 4);
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x->data + p * h * w;

        for (int64_t i = 0; i < ho; i++) {
            struct lerp a = lerp_at(i, h, ho, ac);

            for (int64_t j = 0; j < wo; j++) {
                struct lerp b = lerp_at(j, w, wo, ac);
                const float *r0 = xp + a.i0 * w, *r1 = xp + a.i1 * w;
                double top = (1 - b.lambda) * r0[b.i0] + b.lambda * r0[b.i1];
                double bot = (1 - b.lambda) * r1[b.i0] + b.lambda * r1[b.i1];

                y->data[(p * ho + i) * wo + j] =
                    (float)((1 - a.lambda) * top + a.lambda * bot);
            }
        }
    }
    return REMAT_OK;
}

/* Bilinear upsample backward: scatters dy with the four forward weights into dx. */
remat_status ref_upsample_backward(const struct kop *op)
{
    /* dy: (N, C, Ho, Wo); dx: (N, C, H, W) */
    const struct ktensor *x = &op->in[0], *y = &op->out;
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t ho = y->shape[2], wo = y->shape[3];
    bool ac = op->at->align_corners;

    if (!op->din[0].data)
        return REMAT_OK;
    for (int64_t p = 0; p < planes; p++) {
        float *dx = op->din[0].data + p * h * w;

        for (int64_t i = 0; i < ho; i++) {
            struct lerp a = lerp_at(i, h, ho, ac);

            for (int64_t j = 0; j < wo; j++) {
                struct lerp b = lerp_at(j, w, wo, ac);
                double g = ref_dy(&op->dout, (p * ho + i) * wo + j);

                dx[a.i0 * w + b.i0] += (float)(g * (1 - a.lambda) * (1 - b.lambda));
                dx[a.i0 * w + b.i1] += (float)(g * (1 - a.lambda) * b.lambda);
                dx[a.i1 * w + b.i0] += (float)(g * a.lambda * (1 - b.lambda));
                dx[a.i1 * w + b.i1] += (float)(g * a.lambda * b.lambda);
            }
        }
    }
    return REMAT_OK;
}
