/*
 * conv_gemm.c - the GEMM convolution (CPU_ALGO_GEMM): conv2d and conv_transpose2d as
 * column matrices of our own (im2col, col2im: threaded loops) and products on oneDNN's
 * matmul primitive, forward and backward.
 *
 * Geometry as the reference (ref/conv.c): the "image" side A and the "window" side B,
 * output position hb of B covering A rows hb sh - ph + ki dh (columns alike), the weight
 * (CB, CA/groups, kh, kw) in both ops; conv2d: A = x, B = y; conv_transpose2d: A = y,
 * B = x. Per group g (G groups), with K = CA/G kh kw and P = HB WB, the column matrix
 * of an image of A is col (G, K, P) (im2col: row (ca, ki, kj), column (hb, wb); zero
 * where the window reads padding), W is (G, CB/G, K) as stored, and B[n] is (G, CB/G, P)
 * as stored. Three products, each one matmul primitive over the groups:
 *   B from A:  B[n] = W col[n]          conv2d forward; conv_transpose2d's dx (adding)
 *   A from B:  col[n] = W^T B[n]        conv_transpose2d forward, conv2d's dx: col2im
 *                                       adds the columns back into the image
 *   weights:   dW += B[n] col[n]^T      col from A's value (x, or conv_transpose2d's dy)
 * The first two run on nb images at once (a batch axis, W broadcast): the whole batch
 * when a 1x1 window, stride 1 and no padding (planes of one size) need no column matrix,
 * an image of A being its own (G, K, P) and the products reading or writing the buffers
 * themselves; otherwise the most images dividing the batch whose columns fit in
 * COL_BATCH_BYTES (one on ResNet-50's 56x56 planes, all 8 on its 7x7 ones): fewer and
 * larger loops and products. The weight gradient adds into dW with the matmul's sum
 * post-op, block after block, so the sum over the batch runs in a fixed order: conv2d's
 * with columns puts a block's images side by side (col (G, K, nb P), dy copied to (G,
 * CB/G, nb P)), one product of inner dimension nb P; the others add image after image.
 * conv_transpose2d's backward makes the columns of dy once, for dx and dW both. Biases:
 * y += b after the forward's products (col2im starts from b), db += the sums of dy per
 * channel in double (bias_grad).
 *
 * Scratch: the columns of nb images (none for the 1x1 case above) and conv2d's copy of
 * dy, then the products' scratchpads, all in the op's scratch (cpu_prepare counts
 * them): 7.55 MiB at most on ResNet-50 at batch 8 where oneDNN's GEMM convolution took
 * 86 MiB (per-thread weight gradients). Why not oneDNN's GEMM convolution: its GEMM
 * driver mallocs its packing buffers outside any scratchpad, so outside the plan (a
 * ResNet-50 step grew 3.5 MB beyond arena and resident under --conv-algo gemm). It
 * stays as the fallback (conv.c) where oneDNN has no matmul implementation but the GEMM
 * driver's (cpu_matmul_pd: a CPU without AVX-512); that path's buffers are outside the
 * plan.
 *
 * Determinism: im2col copies; col2im adds each channel's columns in a fixed order (ki,
 * kj, hb, wb) on one thread; each product's partition is a function of the shapes and
 * the thread count; bias_grad sums in order. The same bits at a fixed thread count.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

/* The entry's slots (n[0..2] are the fallback's regions, cpu_weighted_backward). */
enum {
    N_OWN = 8, /* 1: products of our own; 0: oneDNN's GEMM convolution (the fallback) */
    N_COL,     /* the column matrix's region, -1 none */
    N_DYT,     /* conv2d's weight gradient over nbw > 1 images: dy's copy, (G, CB/G, nbw P) */
};

struct gg {
    bool transposed, direct;   /* direct: the image is its own column matrix */
    int64_t n, ca, ha, wa;     /* A: (n, ca, ha, wa) */
    int64_t cb, hb, wb;        /* B: (n, cb, hb, wb) */
    int64_t groups, cag, cbg;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t k, p, pa;          /* K = cag kh kw, P = hb wb, PA = ha wa */
    int64_t nb;                /* images per execution of the B from A and A from B
                                  products (and im2col, col2im) */
    int64_t nbw;               /* images per weight-gradient product: conv2d's columns
                                  nb (their inner dimension nb P), else 1 */
};

/* The column matrices of several images are made at once (nb: the most images dividing
 * the batch whose columns, and in conv2d's backward dy's copy, fit in this many bytes):
 * fewer, larger products and loops. */
#define COL_BATCH_BYTES ((int64_t)8 << 20)

static int64_t or1(int32_t v)
{
    return v > 0 ? v : 1;
}

/* The geometry of op's forward or backward. */
static struct gg geom(const struct kop *op, bool backward)
{
    const remat_attrs *at = op->at;
    bool t = op->type == REMAT_OP_CONV_TRANSPOSE2D;
    const struct ktensor *a = t ? &op->out : &op->in[0], *b = t ? &op->in[0] : &op->out;
    struct gg g = {.transposed = t, .n = a->shape[0], .ca = a->shape[1], .ha = a->shape[2],
                   .wa = a->shape[3], .cb = b->shape[1], .hb = b->shape[2], .wb = b->shape[3],
                   .groups = or1(at->groups), .kh = at->kh, .kw = at->kw, .sh = or1(at->sh),
                   .sw = or1(at->sw), .ph = at->ph, .pw = at->pw, .dh = or1(at->dh),
                   .dw = or1(at->dw)};
    int64_t per;

    REMAT_ASSERT(a->ndim == 4 && b->ndim == 4 && op->w.ndim == 4);
    g.cag = g.ca / g.groups;
    g.cbg = g.cb / g.groups;
    g.k = g.cag * g.kh * g.kw;
    g.p = g.hb * g.wb;
    g.pa = g.ha * g.wa;
    g.direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
               g.ha == g.hb && g.wa == g.wb;
    /* an image's scratch: its columns (and dy's copy) */
    per = (g.ca * g.kh * g.kw + (backward && !t ? g.cb : 0)) * g.p * (int64_t)sizeof(float);
    g.nb = g.direct ? g.n : 1;
    for (int64_t d = 2; !g.direct && d <= g.n; d++)
        if (g.n % d == 0 && d * per <= COL_BATCH_BYTES)
            g.nb = d;
    g.nbw = !t && !g.direct ? g.nb : 1;
    return g;
}

/* ------------------------------------------------------------------ loops */

/* The window positions wb in [0, nb) whose column wb s + off lies in [0, n): [*lo, *hi). */
static void inside(int64_t off, int64_t s, int64_t n, int64_t nb, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s, h = off < n ? (n - 1 - off) / s + 1 : 0;

    *lo = l < nb ? l : nb;
    *hi = h < *lo ? *lo : h < nb ? h : nb;
}

/* col = the columns of nb images a (nb, CA, HA, WA): (nb, CA kh kw, P), or with inner
 * (CA kh kw, nb, P) (row after row, the images' columns side by side). */
static void im2col(const struct cpu_ctx *c, const struct gg *g, float *col, const float *a,
                   bool inner)
{
    int64_t rows = g->ca * g->kh * g->kw;

#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads)
#endif
    for (int64_t r = 0; r < g->nb * rows; r++) {
        int64_t kj = r % g->kw, ki = r / g->kw % g->kh, ca = r / (g->kh * g->kw);
        int64_t off = kj * g->dw - g->pw, lo, hi;
        const float *ap = a + ca * g->pa; /* ca counts the images' channels on */
        float *cp = col + (inner ? r % rows * g->nb + r / rows : r) * g->p;

        inside(off, g->sw, g->wa, g->wb, &lo, &hi);
        for (int64_t hb = 0; hb < g->hb; hb++, cp += g->wb) {
            int64_t ha = hb * g->sh - g->ph + ki * g->dh;
            const float *row;

            if (ha < 0 || ha >= g->ha) {
                memset(cp, 0, sizeof(float) * (size_t)g->wb);
                continue;
            }
            row = ap + ha * g->wa;
            for (int64_t wb = 0; wb < lo; wb++)
                cp[wb] = 0;
            if (g->sw == 1)
                memcpy(cp + lo, row + lo + off, sizeof(float) * (size_t)(hi - lo));
            else
                for (int64_t wb = lo; wb < hi; wb++)
                    cp[wb] = row[wb * g->sw + off];
            for (int64_t wb = hi; wb < g->wb; wb++)
                cp[wb] = 0;
        }
    }
    (void)c;
}

/* a (nb, CA, HA, WA) += the columns col (nb, CA kh kw, P) put back, nb images; with
 * set, a = bias (0 where NULL) + them. Each channel on one thread, in the order (ki, kj,
 * hb, wb). */
static void col2im(const struct cpu_ctx *c, const struct gg *g, float *a, const float *col,
                   const float *bias, bool set)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads)
#endif
    for (int64_t ca = 0; ca < g->nb * g->ca; ca++) { /* the images' channels on */
        float *ap = a + ca * g->pa;

        if (set)
            for (int64_t i = 0; i < g->pa; i++)
                ap[i] = bias ? bias[ca % g->ca] : 0.0f;
        for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++) {
                const float *cp = col + ((ca * g->kh + ki) * g->kw + kj) * g->p;
                int64_t off = kj * g->dw - g->pw, lo, hi;

                inside(off, g->sw, g->wa, g->wb, &lo, &hi);
                for (int64_t hb = 0; hb < g->hb; hb++) {
                    int64_t ha = hb * g->sh - g->ph + ki * g->dh;

                    if (ha < 0 || ha >= g->ha)
                        continue;
                    for (int64_t wb = lo; wb < hi; wb++)
                        ap[ha * g->wa + wb * g->sw + off] += cp[hb * g->wb + wb];
                }
            }
    }
    (void)c;
}

/* t (CB, nb, P) = dy's nb images (nb, CB, P): each channel's planes side by side. */
static void dy_rows(const struct cpu_ctx *c, const struct gg *g, float *t, const float *dy)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads)
#endif
    for (int64_t r = 0; r < g->cb * g->nb; r++)
        memcpy(t + r * g->p, dy + (r % g->nb * g->cb + r / g->nb) * g->p,
               sizeof(float) * (size_t)g->p);
    (void)c;
}

/* y[i, ch, :] += b[ch] over n images of ch channels of plane floats. */
static void add_bias(const struct cpu_ctx *c, float *y, const float *b, int64_t n,
                     int64_t ch, int64_t plane)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads)
#endif
    for (int64_t i = 0; i < n * ch; i++) {
        float *p = y + i * plane, v = b[i % ch];

        for (int64_t j = 0; j < plane; j++)
            p[j] += v;
    }
    (void)c;
}

/* db[ch] += the sum of dy[i, ch, :] over the n images, in order, in double; each channel
 * on one thread. */
static void bias_grad(const struct cpu_ctx *c, float *db, const float *dy, int64_t n,
                      int64_t ch, int64_t plane)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(c->threads)
#endif
    for (int64_t k = 0; k < ch; k++) {
        double acc = 0;

        for (int64_t i = 0; i < n; i++) {
            const float *p = dy + (i * ch + k) * plane;

            for (int64_t j = 0; j < plane; j++)
                acc += p[j];
        }
        db[k] += (float)acc;
    }
    (void)c;
}

/* ------------------------------------------------------------------ products */

enum { PR_BFA, PR_AFB, PR_W };

/* A descriptor of ni images (1: one, or one matrix for all images) of g matrices (rows,
 * cols) at strides (sg, sr, sc) in elements, the images apart by g sg (contiguous). */
static remat_status md4(dnnl_memory_desc_t *md, int64_t ni, int64_t g, int64_t rows,
                        int64_t cols, int64_t sg, int64_t sr, int64_t sc)
{
    dnnl_dims_t d = {ni, g, rows, cols}, s = {g * sg, sg, sr, sc};
    remat_status st = REMAT_OK;

    CPU_TRY(dnnl_memory_desc_init_by_strides(md, 4, d, dnnl_f32, s));
fail:
    return st;
}

/* The primitive descriptor of product pr (the file comment), adding into its destination
 * with acc: B from A and A from B over nb images (W broadcast), the weights' over nbw
 * (their columns side by side); *pd NULL when oneDNN has no implementation of ours. */
static remat_status prod_pd(struct cpu_ctx *c, const struct gg *g, int pr, bool acc,
                            dnnl_primitive_desc_t *pd)
{
    int64_t G = g->groups, m = g->cbg, k = g->k, p = g->p, nb = g->nb, q = g->nbw * p;
    dnnl_memory_desc_t s, w, d;
    remat_status st;

    *pd = NULL;
    if (pr == PR_BFA) { /* (m, k) x (k, p) */
        if ((st = md4(&s, 1, G, m, k, m * k, k, 1)) ||
            (st = md4(&w, nb, G, k, p, k * p, p, 1)) ||
            (st = md4(&d, nb, G, m, p, m * p, p, 1)))
            return st;
    } else if (pr == PR_AFB) { /* (k, m) x (m, p): W read transposed */
        if ((st = md4(&s, 1, G, k, m, m * k, 1, k)) ||
            (st = md4(&w, nb, G, m, p, m * p, p, 1)) ||
            (st = md4(&d, nb, G, k, p, k * p, p, 1)))
            return st;
    } else { /* (m, q) x (q, k), q = nbw p: the columns read transposed */
        if ((st = md4(&s, 1, G, m, q, m * q, q, 1)) ||
            (st = md4(&w, 1, G, q, k, k * q, 1, q)) || (st = md4(&d, 1, G, m, k, m * k, k, 1)))
            return st;
    }
    return cpu_matmul_pd(c, &s, &w, NULL, &d, acc, pd);
}

/* Runs prim[i] of e (a product): dst = (+=) src x wei. */
static remat_status prod_run(struct cpu_ctx *c, const struct cpu_entry *e, int i,
                             const float *src, const float *wei, float *dst)
{
    const struct cpu_bind b[] = {{DNNL_ARG_SRC, (void *)(uintptr_t)src},
                                 {DNNL_ARG_WEIGHTS, (void *)(uintptr_t)wei},
                                 {DNNL_ARG_DST, dst}};

    return cpu_prim_run(c, e, &e->prim[i], b, 3);
}

/* Makes prim[i] of e from pd (destroyed; NULL: nothing). */
static remat_status prod_make(struct cpu_ctx *c, struct cpu_entry *e, int i,
                              dnnl_primitive_desc_t pd)
{
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};

    return pd ? cpu_prim_from_pd(c, e, &e->prim[i], pd, args, 3) : REMAT_OK;
}

/* ------------------------------------------------------------------ forward */

/* The forward entry: prim[0] B from A (conv2d) or A from B (conv_transpose2d), the
 * column region; or, where oneDNN has no such product, the fallback's (N_OWN 0). */
static remat_status build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    struct gg g = geom(op, false);
    dnnl_primitive_desc_t pd;
    remat_status st;

    e->n[N_OWN] = 0;
    e->n[N_COL] = -1;
    if ((st = prod_pd(c, &g, g.transposed ? PR_AFB : PR_BFA, false, &pd)))
        return st;
    if (!pd) {
        c->n_conv_fallback++;
        return cpu_conv_onednn_build_fwd(c, op, want, e);
    }
    e->n[N_OWN] = 1;
    if (!g.direct)
        e->n[N_COL] = cpu_region(e, g.nb * g.groups * g.k * g.p);
    return prod_make(c, e, 0, pd);
}

remat_status cpu_conv_gemm_forward(struct cpu_ctx *c, const struct kop *op)
{
    struct cpu_entry *e;
    struct gg g = geom(op, false);
    const float *x = op->in[0].data, *w = op->w.data, *b = op->b.data;
    float *y = op->out.data, *col;
    remat_status st;

    if ((st = cpu_entry_get(c, op, CPU_PASS_FWD, 0, build_fwd, &e)) || c->dry)
        return st;
    if (!e->n[N_OWN])
        return cpu_weighted_forward(c, op, build_fwd);
    col = e->n[N_COL] >= 0 ? cpu_region_ptr(c, e, (int32_t)e->n[N_COL]) : NULL;
    for (int64_t i = 0; i < g.n; i += g.nb) { /* nb images at a time */
        const float *a = x + i * g.ca * g.pa, *bi = x + i * g.cb * g.p;

        if (!g.transposed) { /* y[i] = W col(x[i]) */
            if (col)
                im2col(c, &g, col, a, false);
            if ((st = prod_run(c, e, 0, w, col ? col : a, y + i * g.cb * g.p)))
                return st;
        } else if (col) { /* y[i] = b + col2im(W^T x[i]) */
            if ((st = prod_run(c, e, 0, w, bi, col)))
                return st;
            col2im(c, &g, y + i * g.ca * g.pa, col, b, true);
        } else if ((st = prod_run(c, e, 0, w, bi, y + i * g.ca * g.pa))) {
            return st;
        }
    }
    if (b && (!g.transposed || !col))
        add_bias(c, y, b, g.n, op->out.shape[1], op->out.shape[2] * op->out.shape[3]);
    return REMAT_OK;
}

/* ------------------------------------------------------------------ backward */

/* The backward entry: prim[0] dx (conv2d: A from B, adding when direct; conv_transpose2d:
 * B from A, adding), prim[1] dW (adding), each when wanted, the column region when
 * either is; or the fallback's entry (N_OWN 0) where oneDNN lacks one of them. */
static remat_status build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    struct gg g = geom(op, true);
    dnnl_primitive_desc_t pdx = NULL, pdw = NULL;
    remat_status st;

    e->n[N_OWN] = 0;
    e->n[N_COL] = e->n[N_DYT] = -1;
    e->n[0] = e->n[1] = e->n[2] = -1;
    if ((want & W_DX) && (st = prod_pd(c, &g, g.transposed ? PR_BFA : PR_AFB,
                                       g.transposed || g.direct, &pdx)))
        return st;
    if ((want & W_DW) && (st = prod_pd(c, &g, PR_W, true, &pdw)))
        goto fail;
    if (((want & W_DX) && !pdx) || ((want & W_DW) && !pdw)) {
        c->n_conv_fallback++;
        st = cpu_conv_onednn_build_bwd(c, op, want, e);
        goto fail;
    }
    e->n[N_OWN] = 1;
    if (!g.direct && (want & (W_DX | W_DW)))
        e->n[N_COL] = cpu_region(e, g.nb * g.groups * g.k * g.p);
    if (g.nbw > 1 && (want & W_DW))
        e->n[N_DYT] = cpu_region(e, g.nbw * g.cb * g.p);
    st = prod_make(c, e, 0, pdx);
    pdx = NULL; /* destroyed there */
    if (!st)
        st = prod_make(c, e, 1, pdw);
    pdw = NULL;
fail:
    if (pdx)
        dnnl_primitive_desc_destroy(pdx);
    if (pdw)
        dnnl_primitive_desc_destroy(pdw);
    return st;
}

/* dx and dW of nb images from image i on (see the file comment): av is the A side's
 * value (x, or conv_transpose2d's dy), bv the B side's (dy, or x); dW adds image after
 * image in order, or (nbw > 1) the nb images in one product of inner dimension nb P. */
static remat_status bwd_images(struct cpu_ctx *c, const struct cpu_entry *e,
                               const struct gg *g, const struct kop *op, int64_t i)
{
    const float *w = op->w.data, *dy = op->dout.data, *x = op->in[0].data;
    const float *av = g->transposed ? dy : x, *bv = g->transposed ? x : dy;
    float *dx = op->din[0].data, *dw = op->dw.data;
    float *col = e->n[N_COL] >= 0 ? cpu_region_ptr(c, e, (int32_t)e->n[N_COL]) : NULL;
    const float *ai = av ? av + i * g->ca * g->pa : NULL, *cola = col ? col : ai;
    remat_status st;

    if (dw && g->nbw > 1) { /* conv2d: columns (CA kh kw, nb, P), dy (CB, nb, P) */
        float *dyt = cpu_region_ptr(c, e, (int32_t)e->n[N_DYT]);

        im2col(c, g, col, ai, true);
        dy_rows(c, g, dyt, dy + i * g->cb * g->p);
        if ((st = prod_run(c, e, 1, dyt, col, dw)))
            return st;
    } else if (dw || (dx && g->transposed)) {
        if (col)
            im2col(c, g, col, ai, false);
        if (dx && g->transposed &&
            (st = prod_run(c, e, 0, w, cola, dx + i * g->cb * g->p)))
            return st;
        for (int64_t j = 0; dw && j < g->nb; j++)
            if ((st = prod_run(c, e, 1, bv + (i + j) * g->cb * g->p,
                               cola + j * g->groups * g->k * g->p, dw)))
                return st;
    }
    if (dx && !g->transposed) { /* dx += col2im(W^T dy) */
        float *dxi = dx + i * g->ca * g->pa;

        if ((st = prod_run(c, e, 0, w, dy + i * g->cb * g->p, col ? col : dxi)))
            return st;
        if (col)
            col2im(c, g, dxi, col, NULL, false);
    }
    return REMAT_OK;
}

remat_status cpu_conv_gemm_backward(struct cpu_ctx *c, const struct kop *op)
{
    unsigned want = (op->din[0].data ? W_DX : 0) | (op->dw.data ? W_DW : 0) |
                    (op->db.data ? W_DB : 0);
    struct cpu_entry *e;
    struct gg g = geom(op, true);
    remat_status st;

    if (!want)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, want, build_bwd, &e)))
        return st;
    if (!e->n[N_OWN]) /* the fallback: finds the same entry */
        return cpu_weighted_backward(c, op, build_bwd);
    if (c->dry)
        return REMAT_OK;
    if (want & (W_DX | W_DW))
        for (int64_t i = 0; i < g.n; i += g.nb)
            if ((st = bwd_images(c, e, &g, op, i)))
                return st;
    if (want & W_DB)
        bias_grad(c, op->db.data, op->dout.data, g.n, op->out.shape[1],
                  op->out.shape[2] * op->out.shape[3]);
    return REMAT_OK;
}
