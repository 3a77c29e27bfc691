/*
 * conv.c - reference conv2d and conv_transpose2d, forward and backward.
 *
 * Both ops are the same relation read in two directions. Call A the "image" side and B
 * the "window" side: output position hb of B covers A rows ha = hb*sh - ph + ki*dh for
 * ki in [0, kh) (columns alike), and the weight is (CB, CA/groups, kh, kw) in both ops:
 *   conv2d:           A = x, B = y, weight (Cout, Cin/groups, kh, kw);
 *   conv_transpose2d: A = y, B = x, weight (Cin, Cout/groups, kh, kw) as in PyTorch.
 * So three loops serve both: B from A (conv2d forward, conv_transpose2d's dx), A from B
 * (conv_transpose2d forward, conv2d's dx) and the weight gradient. Each output element
 * is one double sum in the order (channel, ki, kj), then the bias; accumulated outputs
 * get that sum rounded to float added once. Positions that fall in the padding, or
 * between the strides of a transposed convolution, contribute nothing.
 */
#include "kernels/ref/ref.h"

struct cgeom {
    int64_t n, ca, ha, wa; /* A: (n, ca, ha, wa) */
    int64_t cb, hb, wb;    /* B: (n, cb, hb, wb) */
    int64_t cag, cbg;      /* channels per group on each side */
    int32_t kh, kw, sh, sw, ph, pw, dh, dw;
};

/* v, or its default 1 when left 0 (stride, dilation, groups). */
static int32_t or1(int32_t v)
{
    return v > 0 ? v : 1;
}

/* The geometry of op; transposed: A is the output. Attribute zeros read as defaults. */
static struct cgeom geom(const struct kop *op, bool transposed)
{
    const struct ktensor *a = transposed ? &op->out : &op->in[0];
    const struct ktensor *b = transposed ? &op->in[0] : &op->out;
    const remat_attrs *at = op->at;
    int32_t groups = or1(at->groups);
    struct cgeom g = {
        .n = a->shape[0], .ca = a->shape[1], .ha = a->shape[2], .wa = a->shape[3],
        .cb = b->shape[1], .hb = b->shape[2], .wb = b->shape[3],
        .kh = at->kh, .kw = at->kw, .sh = or1(at->sh), .sw = or1(at->sw),
        .ph = at->ph, .pw = at->pw, .dh = or1(at->dh), .dw = or1(at->dw),
    };

    REMAT_ASSERT(a->ndim == 4 && b->ndim == 4 && b->shape[0] == g.n);
    REMAT_ASSERT(g.ca % groups == 0 && g.cb % groups == 0);
    g.cag = g.ca / groups;
    g.cbg = g.cb / groups;
    REMAT_ASSERT(op->w.data && op->w.shape[0] == g.cb && op->w.shape[1] == g.cag &&
                 op->w.shape[2] == g.kh && op->w.shape[3] == g.kw);
    return g;
}

/* p[i], or 1 where p is NULL (an output gradient given as the constant 1). */
static double ld(const float *p, int64_t i)
{
    return p ? (double)p[i] : 1.0;
}

/*
 * B from A: b[n, cb, hb, wb] (=, or += when accumulate) the sum over the group's A
 * channels and the kernel of a[n, ca, hb*sh - ph + ki*dh, ...] * w[cb, ca', ki, kj],
 * plus bias[cb] when bias is not NULL.
 */
static void b_from_a(float *b, const float *a, const float *w, const float *bias,
                     const struct cgeom *g, bool accumulate)
{
    /* b: (N, CB, HB, WB), a: (N, CA, HA, WA), w: (CB, CA/groups, kh, kw) */
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t cb = 0; cb < g->cb; cb++) {
            int64_t ca0 = cb / g->cbg * g->cag;
            float *bp = b + (n * g->cb + cb) * g->hb * g->wb;

            for (int64_t hb = 0; hb < g->hb; hb++)
                for (int64_t wb = 0; wb < g->wb; wb++) {
                    double acc = 0;

                    for (int64_t c = 0; c < g->cag; c++) {
                        int64_t abase = (n * g->ca + ca0 + c) * g->ha;
                        const float *wp = w + (cb * g->cag + c) * g->kh * g->kw;

                        for (int64_t ki = 0; ki < g->kh; ki++) {
                            int64_t ha = hb * g->sh - g->ph + ki * g->dh;

                            if (ha < 0 || ha >= g->ha)
                                continue;
                            for (int64_t kj = 0; kj < g->kw; kj++) {
                                int64_t wa = wb * g->sw - g->pw + kj * g->dw;

                                if (wa < 0 || wa >= g->wa)
                                    continue;
                                acc += ld(a, (abase + ha) * g->wa + wa) *
                                       (double)wp[ki * g->kw + kj];
                            }
                        }
                    }
                    if (bias)
                        acc += (double)bias[cb];
                    if (accumulate)
                        bp[hb * g->wb + wb] += (float)acc;
                    else
                        bp[hb * g->wb + wb] = (float)acc;
                }
        }
}

/*
 * A from B, the adjoint of b_from_a: a[n, ca, ha, wa] (=, or +=) the sum over the
 * group's B channels and the kernel positions with ha = hb*sh - ph + ki*dh (and alike
 * for wa) of b[n, cb, hb, wb] * w[cb, ca', ki, kj], plus bias[ca] when not NULL.
 */
static void a_from_b(float *a, const float *b, const float *w, const float *bias,
                     const struct cgeom *g, bool accumulate)
{
    /* a: (N, CA, HA, WA), b: (N, CB, HB, WB), w: (CB, CA/groups, kh, kw) */
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t ca = 0; ca < g->ca; ca++) {
            int64_t cb0 = ca / g->cag * g->cbg, cl = ca % g->cag;
            float *ap = a + (n * g->ca + ca) * g->ha * g->wa;

            for (int64_t ha = 0; ha < g->ha; ha++)
                for (int64_t wa = 0; wa < g->wa; wa++) {
                    double acc = 0;

                    for (int64_t c = 0; c < g->cbg; c++) {
                        int64_t bbase = (n * g->cb + cb0 + c) * g->hb;
                        const float *wp = w + ((cb0 + c) * g->cag + cl) * g->kh * g->kw;

                        for (int64_t ki = 0; ki < g->kh; ki++) {
                            int64_t t = ha + g->ph - ki * g->dh, hb = t / g->sh;

                            if (t < 0 || t % g->sh || hb >= g->hb)
                                continue;
                            for (int64_t kj = 0; kj < g->kw; kj++) {
                                int64_t u = wa + g->pw - kj * g->dw, wb = u / g->sw;

                                if (u < 0 || u % g->sw || wb >= g->wb)
                                    continue;
                                acc += ld(b, (bbase + hb) * g->wb + wb) *
                                       (double)wp[ki * g->kw + kj];
                            }
                        }
                    }
                    if (bias)
                        acc += (double)bias[ca];
                    if (accumulate)
                        ap[ha * g->wa + wa] += (float)acc;
                    else
                        ap[ha * g->wa + wa] = (float)acc;
                }
        }
}

/*
 * The weight gradient: dw[cb, ca', ki, kj] += the sum over (n, hb, wb) of
 * b[n, cb, hb, wb] * a[n, ca, hb*sh - ph + ki*dh, wb*sw - pw + kj*dw]. Either of a, b
 * may be NULL (the constant 1).
 */
static void weight_grad(float *dw, const float *b, const float *a, const struct cgeom *g)
{
    /* dw: (CB, CA/groups, kh, kw), b: (N, CB, HB, WB), a: (N, CA, HA, WA) */
    for (int64_t cb = 0; cb < g->cb; cb++)
        for (int64_t c = 0; c < g->cag; c++) {
            int64_t ca = cb / g->cbg * g->cag + c;

            for (int64_t ki = 0; ki < g->kh; ki++)
                for (int64_t kj = 0; kj < g->kw; kj++) {
                    double acc = 0;

                    for (int64_t n = 0; n < g->n; n++)
                        for (int64_t hb = 0; hb < g->hb; hb++) {
                            int64_t ha = hb * g->sh - g->ph + ki * g->dh;

                            if (ha < 0 || ha >= g->ha)
                                continue;
                            for (int64_t wb = 0; wb < g->wb; wb++) {
                                int64_t wa = wb * g->sw - g->pw + kj * g->dw;

                                if (wa < 0 || wa >= g->wa)
                                    continue;
                                acc += ld(b, ((n * g->cb + cb) * g->hb + hb) * g->wb + wb) *
                                       ld(a, ((n * g->ca + ca) * g->ha + ha) * g->wa + wa);
                            }
                        }
                    dw[((cb * g->cag + c) * g->kh + ki) * g->kw + kj] += (float)acc;
                }
        }
}

/* db[c] += the sum over (n, s) of dy[n, c, s]; dy may be NULL (the constant 1). */
static void bias_grad(float *db, const float *dy, int64_t n, int64_t c, int64_t hw)
{
    /* db: (C), dy: (N, C, hw) */
    for (int64_t ci = 0; ci < c; ci++) {
        double acc = 0;

        for (int64_t ni = 0; ni < n; ni++)
            for (int64_t s = 0; s < hw; s++)
                acc += ld(dy, (ni * c + ci) * hw + s);
        db[ci] += (float)acc;
    }
}

/* conv2d forward: y = conv(x, w) + b. Reads in[0], w, b; writes out. */
remat_status ref_conv2d_forward(const struct kop *op)
{
    struct cgeom g = geom(op, false);

    b_from_a(op->out.data, op->in[0].data, op->w.data, op->b.data, &g, false);
    return REMAT_OK;
}

/* conv2d backward: dx += conv_transpose(dy, w), dw += dy (*) x, db += sum dy.
 * Reads dout, in[0] (only for dw) and w. */
remat_status ref_conv2d_backward(const struct kop *op)
{
    struct cgeom g = geom(op, false);

    if (op->din[0].data)
        a_from_b(op->din[0].data, op->dout.data, op->w.data, NULL, &g, true);
    if (op->dw.data)
        weight_grad(op->dw.data, op->dout.data, op->in[0].data, &g);
    if (op->db.data)
        bias_grad(op->db.data, op->dout.data, g.n, g.cb, g.hb * g.wb);
    return REMAT_OK;
}

/* conv_transpose2d forward: y = conv_transpose(x, w) + b. Reads in[0], w, b. */
remat_status ref_conv_transpose2d_forward(const struct kop *op)
{
    struct cgeom g = geom(op, true);

    a_from_b(op->out.data, op->in[0].data, op->w.data, op->b.data, &g, false);
    return REMAT_OK;
}

/* conv_transpose2d backward: dx += conv(dy, w), dw += x (*) dy, db += sum dy.
 * Reads dout, in[0] (only for dw) and w. */
remat_status ref_conv_transpose2d_backward(const struct kop *op)
{
    struct cgeom g = geom(op, true);

    if (op->din[0].data)
        b_from_a(op->din[0].data, op->dout.data, op->w.data, NULL, &g, true);
    if (op->dw.data)
        weight_grad(op->dw.data, op->in[0].data, op->dout.data, &g);
    if (op->db.data)
        bias_grad(op->db.data, op->dout.data, g.n, g.ca, g.ha * g.wa);
    return REMAT_OK;
}
