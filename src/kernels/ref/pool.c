/*
 * pool.c - reference max pooling, average pooling and global average pooling.
 *
 * Windows as in PyTorch (dilation 1): output row oh covers input rows from
 * hstart = oh*sh - ph for kh rows; with ceil_mode the last window may run past the input
 * (shape inference keeps its start inside the input or the left padding). Each plane
 * (n, c) is pooled alone.
 *
 * Max pooling pads with -inf: the window is clipped to the input, the first largest
 * value wins (a NaN wins over everything, the last NaN over earlier ones, as PyTorch),
 * and aux holds, as int32, its flat index h*W + w in the input plane. The backward reads
 * only aux and adds dy to dx at that index, in output order.
 *
 * Average pooling divides the sum over the clipped window (double) by, with
 * count_include_pad, the window's area before clipping to the input but after clipping
 * to the padded input (hend = min(hstart + kh, H + ph)), else by the clipped area. Its
 * backward gathers: dx[h, w] gets the sum, in output order, of dy / divisor over the
 * windows that cover (h, w).
 */
#include "kernels/ref/ref.h"

#include <math.h>

struct pgeom {
    int64_t planes, h, w, ho, wo; /* x: (planes, h, w), y: (planes, ho, wo) */
    int32_t kh, kw, sh, sw, ph, pw;
};

/* The geometry of a pooling op; a zero stride reads as the kernel size. */
static struct pgeom pool_geom(const struct kop *op)
{
    const struct ktensor *x = &op->in[0], *y = &op->out;
    const remat_attrs *at = op->at;
    struct pgeom g = {
        .planes = x->shape[0] * x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .ho = y->shape[2], .wo = y->shape[3], .kh = at->kh, .kw = at->kw,
        .sh = at->sh > 0 ? at->sh : at->kh, .sw = at->sw > 0 ? at->sw : at->kw,
        .ph = at->ph, .pw = at->pw,
    };

    REMAT_ASSERT(x->ndim == 4 && y->ndim == 4 && g.kh > 0 && g.kw > 0);
    REMAT_ASSERT(y->shape[0] * y->shape[1] == g.planes);
    return g;
}

/* The larger of a and b. */
static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The smaller of a and b. */
static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Max-pool forward: y = the window maximum, aux = its int32 index h*W + w. */
remat_status ref_max_pool_forward(const struct kop *op)
{
    /* x: (N, C, H, W); y: (N, C, Ho, Wo); aux: int32 (N, C, Ho, Wo) */
    struct pgeom g = pool_geom(op);
    int32_t *arg = (int32_t *)op->aux.data;

    REMAT_ASSERT(g.h * g.w <= INT32_MAX);
    for (int64_t p = 0; p < g.planes; p++) {
        const float *x = op->in[0].data + p * g.h * g.w;
        float *y = op->out.data + p * g.ho * g.wo;
        int32_t *a = arg + p * g.ho * g.wo;

        for (int64_t oh = 0; oh < g.ho; oh++)
            for (int64_t ow = 0; ow < g.wo; ow++) {
                int64_t hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
                int64_t he = min64(hs + g.kh, g.h), we = min64(ws + g.kw, g.w);
                float best = -INFINITY;
                int64_t idx;

                hs = max64(hs, 0);
                ws = max64(ws, 0);
                REMAT_ASSERT(hs < he && ws < we);
                idx = hs * g.w + ws;
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++) {
                        float v = x[h * g.w + w];

                        if (v > best || isnan(v)) {
                            best = v;
                            idx = h * g.w + w;
                        }
                    }
                y[oh * g.wo + ow] = best;
                a[oh * g.wo + ow] = (int32_t)idx;
            }
    }
    return REMAT_OK;
}

/* Max-pool backward: dx[argmax] += dy, from aux alone (x is not read). */
remat_status ref_max_pool_backward(const struct kop *op)
{
    /* aux: int32 (N, C, Ho, Wo); dy: (N, C, Ho, Wo); dx: (N, C, H, W) */
    struct pgeom g = pool_geom(op);
    const int32_t *arg = (const int32_t *)op->aux.data;

    if (!op->din[0].data)
        return REMAT_OK;
    for (int64_t p = 0; p < g.planes; p++) {
        float *dx = op->din[0].data + p * g.h * g.w;

        for (int64_t o = 0; o < g.ho * g.wo; o++) {
            int32_t idx = arg[p * g.ho * g.wo + o];

            REMAT_ASSERT(idx >= 0 && idx < g.h * g.w);
            dx[idx] += ref_dy(&op->dout, p * g.ho * g.wo + o);
        }
    }
    return REMAT_OK;
}

/* An average-pool window clipped to the input, [hs, he) x [ws, we), and its divisor. */
struct awin {
    int64_t hs, he, ws, we;
    double div;
};

/* The window of output (oh, ow), never empty (shape inference sees to that). */
static struct awin avg_window(const struct pgeom *g, int64_t oh, int64_t ow,
                              bool include_pad)
{
    struct awin a;
    int64_t pool;

    a.hs = oh * g->sh - g->ph;
    a.ws = ow * g->sw - g->pw;
    a.he = min64(a.hs + g->kh, g->h + g->ph);
    a.we = min64(a.ws + g->kw, g->w + g->pw);
    pool = (a.he - a.hs) * (a.we - a.ws);
    a.hs = max64(a.hs, 0);
    a.ws = max64(a.ws, 0);
    a.he = min64(a.he, g->h);
    a.we = min64(a.we, g->w);
    REMAT_ASSERT(a.hs < a.he && a.ws < a.we);
    a.div = (double)(include_pad ? pool : (a.he - a.hs) * (a.we - a.ws));
    return a;
}

/* Average-pool forward: y = the window sum / divisor (see the file comment). */
remat_status ref_avg_pool_forward(const struct kop *op)
{
    /* x: (N, C, H, W); y: (N, C, Ho, Wo) */
    struct pgeom g = pool_geom(op);

    for (int64_t p = 0; p < g.planes; p++) {
        const float *x = op->in[0].data + p * g.h * g.w;
        float *y = op->out.data + p * g.ho * g.wo;

        for (int64_t oh = 0; oh < g.ho; oh++)
            for (int64_t ow = 0; ow < g.wo; ow++) {
                struct awin a = avg_window(&g, oh, ow, op->at->count_include_pad);
                double sum = 0;

                for (int64_t h = a.hs; h < a.he; h++)
                    for (int64_t w = a.ws; w < a.we; w++)
                        sum += x[h * g.w + w];
                y[oh * g.wo + ow] = (float)(sum / a.div);
            }
    }
    return REMAT_OK;
}

/* The output rows (or columns) whose windows start at o*s - p and cover input row i:
 * [*lo, *hi], possibly empty. */
static void covering(int64_t i, int32_t k, int32_t s, int32_t p, int64_t n_out, int64_t *lo,
                     int64_t *hi)
{
    int64_t t = i + p - k + 1;

    *lo = t <= 0 ? 0 : (t + s - 1) / s;
    *hi = min64((i + p) / s, n_out - 1);
}

/* Average-pool backward: dx += the sum of dy / divisor over the covering windows.
 * Reads dout and shapes only. */
remat_status ref_avg_pool_backward(const struct kop *op)
{
    /* dy: (N, C, Ho, Wo); dx: (N, C, H, W) */
    struct pgeom g = pool_geom(op);

    if (!op->din[0].data)
        return REMAT_OK;
    for (int64_t p = 0; p < g.planes; p++) {
        float *dx = op->din[0].data + p * g.h * g.w;

        for (int64_t h = 0; h < g.h; h++)
            for (int64_t w = 0; w < g.w; w++) {
                int64_t oh0, oh1, ow0, ow1;
                double acc = 0;

                covering(h, g.kh, g.sh, g.ph, g.ho, &oh0, &oh1);
                covering(w, g.kw, g.sw, g.pw, g.wo, &ow0, &ow1);
                for (int64_t oh = oh0; oh <= oh1; oh++)
                    for (int64_t ow = ow0; ow <= ow1; ow++) {
                        struct awin a = avg_window(&g, oh, ow, op->at->count_include_pad);

                        acc += ref_dy(&op->dout, (p * g.ho + oh) * g.wo + ow) / a.div;
                    }
                dx[h * g.w + w] += (float)acc;
            }
    }
    return REMAT_OK;
}

/* Global average pool forward: y[n, c] = the mean of x[n, c, :, :] (double sum). */
remat_status ref_global_avg_pool_forward(const struct kop *op)
{
    /* x: (N, C, H, W); y: (N, C, 1, 1) */
    const struct ktensor *x = &op->in[0];
    int64_t planes = x->shape[0] * x->shape[1], hw = x->shape[2] * x->shape[3];

    REMAT_ASSERT(x->ndim == 4);
    for (int64_t p = 0; p < planes; p++) {
        double sum = 0;

        for (int64_t s = 0; s < hw; s++)
            sum += x->data[p * hw + s];
        op->out.data[p] = (float)(sum / (double)hw);
    }
    return REMAT_OK;
}

/* Global average pool backward: dx[n, c, h, w] += dy[n, c] / (H*W). Reads dout only. */
remat_status ref_global_avg_pool_backward(const struct kop *op)
{
    /* dy: (N, C, 1, 1); dx: (N, C, H, W) */
    const struct ktensor *x = &op->in[0];
    int64_t planes = x->shape[0] * x->shape[1], hw = x->shape[2] * x->shape[3];
    float *dx = op->din[0].data;

    REMAT_ASSERT(x->ndim == 4);
    if (!dx)
        return REMAT_OK;
    for (int64_t p = 0; p < planes; p++) {
        float g = (float)((double)ref_dy(&op->dout, p) / (double)hw);

        for (int64_t s = 0; s < hw; s++)
            dx[p * hw + s] += g;
    }
    return REMAT_OK;
}
