/*
 * seq.c - the cpu backend's layer normalization, softmax over the last axis and GELU,
 * forward and backward, as OpenMP loops of our own (the matrix product is matmul.c).
 *
 * Layer norm: every row's arithmetic is the reference's (ref/seq.c), in the same order
 * and precision (double sums in index order, aux = the R float means then the R float
 * inverse stds), with the rows split across the context's threads; its dgamma and dbeta
 * sum over the rows in order too, the columns split into blocks of LN_COLS that each
 * thread walks row by row (the reference walks one column at a time down every row,
 * which misses the cache on every element). So the bits are the reference's whatever
 * the thread count, and a plan mixing the two backends stays consistent.
 *
 * Softmax over the last axis (attention's scores): float arithmetic with an exponential
 * of our own that the compiler vectorizes (ln_exp below, within 2 ulp of expf), where
 * the reference takes a double exp per element (tens of cycles each: for GPT-2's
 * (8, 12, 1024, 1024) scores, seconds per layer). y = exp(s (x - max)) / sum over the
 * row's first w columns (w = i + 1 for row i of a matrix under causal, else all), 0
 * past them; backward dx += s y (dy - sum dy y). Rows split across the threads; each
 * row's sums run in one fixed (vectorized) order, so two runs give the same bits.
 * Differs from the reference by a few float ulps.
 *
 * GELU (exact or tanh form): float, elementwise, with an erf of our own (Abramowitz and
 * Stegun 7.1.26, absolute error 1.5e-7) on ln_exp, where the reference takes a double
 * erf per element; chunks of elements on the threads. For GPT-2's (8, 1024, 3072) MLP
 * activations on 2 cores: 15 ms forward and 12 ms backward, against 80 and 170 ms.
 * The softmax and GELU loops have an AVX-512 clone (SEQ_CLONES) chosen at load time.
 *
 * Threads: without -fopenmp (the Makefile gives it to this file) the loops run on the
 * calling thread, with the same bits.
 */
#include "kernels/cpu/cpu.h"
#include "kernels/ln_row.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#define SEQ_PRAGMA(x) _Pragma(#x)
#define SEQ_FOR(c) SEQ_PRAGMA(omp parallel for schedule(static) num_threads((c)->threads))
#define SEQ_SIMD_SUM(v) SEQ_PRAGMA(omp simd reduction(+ : v))
#define SEQ_SIMD_MAX(v) SEQ_PRAGMA(omp simd reduction(max : v))
#else
#define SEQ_FOR(c)
#define SEQ_SIMD_SUM(v)
#define SEQ_SIMD_MAX(v)
#endif

/* The elementwise loops also in an AVX-512 clone, picked at load time where the
 * processor has it (the build targets baseline x86-64, SSE2). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEQ_CLONES __attribute__((target_clones("avx512f", "default")))
#else
#define SEQ_CLONES
#endif

/* Columns of one block of the parameter gradients' walk. */
#define LN_COLS 64

/* ------------------------------------------------------------------ layer norm */

/* Rows of length d in x (the last axis), and the number of rows. */
static void ln_rows(const struct ktensor *x, int64_t *rows, int64_t *d)
{
    REMAT_ASSERT(x->ndim >= 2 && x->ndim <= 4);
    *d = x->shape[x->ndim - 1];
    *rows = *d ? ktensor_numel(x) / *d : 0;
}

/* y = (x - mean) * invstd * gamma + beta per row; aux = (mean[R], invstd[R]). */
remat_status cpu_layer_norm_forward(struct cpu_ctx *c, const struct kop *op)
{
    /* x, y: (R, D) seen flat; aux: (2, R); gamma, beta: (D) */
    const float *x = op->in[0].data, *gamma = op->w.data, *beta = op->b.data;
    float *y = op->out.data, *mean = op->aux.data;
    double eps = op->at->eps > 0 ? op->at->eps : 1e-5;
    int64_t rows, d;

    if (c->dry)
        return REMAT_OK;
    ln_rows(&op->in[0], &rows, &d);
    SEQ_FOR(c)
    for (int64_t r = 0; r < rows; r++)
        ln_row_fwd(x + r * d, y + r * d, &mean[r], &mean[rows + r], d, gamma, beta, eps);
    return REMAT_OK;
}

/* dgamma[k0..k1) += sum over rows of dy x_hat, dbeta[k0..k1) += sum of dy: the rows in
 * order per column, as the reference, a block of columns at a time. */
static void ln_param_block(const struct kop *op, int64_t rows, int64_t d, int64_t k0,
                           int64_t k1)
{
    const float *x = op->in[0].data, *dy = op->dout.data, *mean = op->aux.data;
    const float *invstd = mean + rows;
    double sg[LN_COLS] = {0}, sb[LN_COLS] = {0};
    int64_t w = k1 - k0;

    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d + k0, *dr = dy ? dy + r * d + k0 : NULL;
        double mn = mean[r], is = invstd[r];

        for (int64_t j = 0; j < w; j++) {
            double g = dr ? dr[j] : 1.0;

            sg[j] += g * (((double)xr[j] - mn) * is);
            sb[j] += g;
        }
    }
    for (int64_t j = 0; j < w; j++) {
        if (op->dw.data)
            op->dw.data[k0 + j] += (float)sg[j];
        if (op->db.data)
            op->db.data[k0 + j] += (float)sb[j];
    }
}

/* Layer-norm backward from x and aux (ref/seq.c says the formulas). */
remat_status cpu_layer_norm_backward(struct cpu_ctx *c, const struct kop *op)
{
    /* x, dx, dy: (R, D) seen flat; aux: (2, R); gamma, dgamma, dbeta: (D) */
    const float *x = op->in[0].data, *dy = op->dout.data, *mean = op->aux.data;
    float *dx = op->din[0].data;
    int64_t rows, d, nblk;

    if (c->dry)
        return REMAT_OK;
    ln_rows(&op->in[0], &rows, &d);
    nblk = (d + LN_COLS - 1) / LN_COLS;
    if (op->dw.data || op->db.data) {
        SEQ_FOR(c)
        for (int64_t b = 0; b < nblk; b++)
            ln_param_block(op, rows, d, b * LN_COLS,
                           (b + 1) * LN_COLS < d ? (b + 1) * LN_COLS : d);
    }
    if (!dx)
        return REMAT_OK;
    SEQ_FOR(c)
    for (int64_t r = 0; r < rows; r++)
        ln_row_bwd(x + r * d, dy ? dy + r * d : NULL, dx + r * d, mean[r], mean[rows + r], d,
                   op->w.data);
    return REMAT_OK;
}

/* --------------------------------------------------------------- softmax_last */

/*
 * exp(t) in float for t <= 88, 0 below -87 (the reference's float would be a denormal
 * under 1.2e-38 there): t = n ln 2 + r with n = round(t / ln 2) (the 1.5 * 2^23 trick,
 * which also leaves n in the low bits), |r| <= ln 2 / 2 by a two-part ln 2, exp(r) by
 * its Taylor polynomial to r^7 (error below 2e-9), times 2^n built in the exponent bits.
 * Branch-free so that loops over it vectorize; a NaN t gives NaN (so a NaN anywhere in
 * a row makes the row's sum, and every y of it, NaN, as in the reference).
 */
static inline float ln_exp(float t)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float z, n, r, p, two_n;
    uint32_t bits;

    t = t > 88.0f ? 88.0f : t;
    z = t * 1.44269504088896341f + magic;
    n = z - magic;
    r = t - n * 0.693145751953125f;     /* ln 2, high part (exact in n * it) */
    r = r - n * 1.428606820309417e-06f; /* ln 2, the rest */
    p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    memcpy(&bits, &z, sizeof bits);
    bits = (bits - 0x4b400000u + 127u) << 23;
    memcpy(&two_n, &bits, sizeof two_n);
    return t < -87.0f ? 0.0f : p * two_n;
}

/* The softmax's scale (attr 0: 1). */
static float sm_scale(const struct kop *op)
{
    return op->at->scale != 0 ? op->at->scale : 1.0f;
}

/* One row: y[0..w) = exp(s (x - max)) / sum, y[w..n) = 0. */
SEQ_CLONES static void sm_row_fwd(const float *x, float *y, int64_t w, int64_t n, float s)
{
    float mx = x[0], sum = 0, inv;

    SEQ_SIMD_MAX(mx)
    for (int64_t j = 1; j < w; j++)
        mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < w; j++)
        y[j] = ln_exp(s * (x[j] - mx));
    SEQ_SIMD_SUM(sum)
    for (int64_t j = 0; j < w; j++)
        sum += y[j];
    inv = 1.0f / sum;
    for (int64_t j = 0; j < w; j++)
        y[j] *= inv;
    for (int64_t j = w; j < n; j++)
        y[j] = 0.0f;
}

/* Rows of the last axis (n each) and rows per matrix (m), for the causal mask. */
static void sm_rows(const struct ktensor *t, int64_t *rows, int64_t *m, int64_t *n)
{
    *n = t->shape[t->ndim - 1];
    *m = t->shape[t->ndim - 2];
    *rows = *n ? ktensor_numel(t) / *n : 0;
}

remat_status cpu_softmax_last_forward(struct cpu_ctx *c, const struct kop *op)
{
    /* x, y: (rows, n), rows = (..., m) */
    const float *x = op->in[0].data;
    float *y = op->out.data, s = sm_scale(op);
    bool causal = op->at->causal;
    int64_t rows, m, n;

    if (c->dry)
        return REMAT_OK;
    sm_rows(&op->in[0], &rows, &m, &n);
    SEQ_FOR(c)
    for (int64_t r = 0; r < rows; r++)
        sm_row_fwd(x + r * n, y + r * n, causal && r % m + 1 < n ? r % m + 1 : n, n, s);
    return REMAT_OK;
}

/* One row: dx += s y (dy - sum dy y) (the masked columns have y = 0: they add 0). */
SEQ_CLONES static void sm_row_bwd(const float *y, const float *dy, float *dx, int64_t n, float s)
{
    double dot = 0;
    float fd;

    SEQ_SIMD_SUM(dot)
    for (int64_t j = 0; j < n; j++)
        dot += (double)dy[j] * y[j];
    fd = (float)dot;
    for (int64_t j = 0; j < n; j++)
        dx[j] += s * y[j] * (dy[j] - fd);
}

remat_status cpu_softmax_last_backward(struct cpu_ctx *c, const struct kop *op)
{
    /* y, dy, dx: (rows, n) */
    const float *y = op->out.data, *dy = op->dout.data;
    float *dx = op->din[0].data, s = sm_scale(op);
    int64_t rows, m, n;

    if (c->dry || !dx)
        return REMAT_OK;
    REMAT_ASSERT(dy); /* the dispatcher sends dout NULL to the reference */
    sm_rows(&op->out, &rows, &m, &n);
    SEQ_FOR(c)
    for (int64_t r = 0; r < rows; r++)
        sm_row_bwd(y + r * n, dy + r * n, dx + r * n, n, s);
    return REMAT_OK;
}

/* ----------------------------------------------------------------------- gelu */

#define GELU_INV_SQRT_2 0.70710678118654752f
#define GELU_INV_SQRT_2PI 0.39894228040143268f
#define GELU_SQRT_2_PI 0.79788456080286536f
#define GELU_CUBIC 0.044715f

/*
 * 1 + erf(z) and exp(-z^2) (in *e), in float: Abramowitz and Stegun 7.1.26,
 * erfc(|z|) = t (a1 + t (a2 + ... a5)) exp(-z^2) with t = 1 / (1 + p |z|), absolute
 * error below 1.5e-7; 1 + erf(z) is erfc(-z) = 2 - erfc(|z|) for z >= 0, erfc(|z|)
 * below (so no cancellation where GELU is small).
 */
static inline float gelu_one_erf(float z, float *e)
{
    float a = z < 0 ? -z : z, t = 1.0f / (1.0f + 0.3275911f * a), q;

    *e = ln_exp(-z * z);
    q = t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    q *= *e;
    return z < 0 ? q : 2.0f - q;
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1) (exp saturates at 88: +-1 beyond). */
static inline float gelu_tanh(float u)
{
    return 1.0f - 2.0f / (ln_exp(2.0f * u) + 1.0f);
}

/* y = gelu(x) for one element (ref/seq.c's formulas, in float). */
static inline float gelu_f(float x, bool approximate)
{
    float e;

    if (approximate)
        return 0.5f * x * (1.0f + gelu_tanh(GELU_SQRT_2_PI * (x + GELU_CUBIC * x * x * x)));
    return 0.5f * x * gelu_one_erf(x * GELU_INV_SQRT_2, &e);
}

/* dy/dx for one element: Phi(x) + x phi(x), or the tanh form's derivative. */
static inline float gelu_grad_f(float x, bool approximate)
{
    float e, t;

    if (approximate) {
        t = gelu_tanh(GELU_SQRT_2_PI * (x + GELU_CUBIC * x * x * x));
        return 0.5f * (1.0f + t) +
               0.5f * x * (1.0f - t * t) * GELU_SQRT_2_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
    }
    t = gelu_one_erf(x * GELU_INV_SQRT_2, &e);
    return 0.5f * t + x * GELU_INV_SQRT_2PI * e;
}

/* Elements per parallel chunk of the elementwise loops. */
#define GELU_CHUNK 4096

/* y[0..n) = gelu(x), one loop per form so that each vectorizes. */
SEQ_CLONES static void gelu_fwd_chunk(const float *x, float *y, int64_t n, bool approximate)
{
    if (approximate)
        for (int64_t i = 0; i < n; i++)
            y[i] = gelu_f(x[i], true);
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = gelu_f(x[i], false);
}

/* dx[0..n) += dy * gelu'(x), likewise. */
SEQ_CLONES static void gelu_bwd_chunk(const float *x, const float *dy, float *dx, int64_t n,
                           bool approximate)
{
    if (approximate)
        for (int64_t i = 0; i < n; i++)
            dx[i] += dy[i] * gelu_grad_f(x[i], true);
    else
        for (int64_t i = 0; i < n; i++)
            dx[i] += dy[i] * gelu_grad_f(x[i], false);
}

remat_status cpu_gelu_forward(struct cpu_ctx *c, const struct kop *op)
{
    /* x, y: (numel) */
    const float *x = op->in[0].data;
    float *y = op->out.data;
    bool approximate = op->at->approximate;
    int64_t n = ktensor_numel(&op->in[0]), nc = (n + GELU_CHUNK - 1) / GELU_CHUNK;

    if (c->dry)
        return REMAT_OK;
    SEQ_FOR(c)
    for (int64_t b = 0; b < nc; b++) {
        int64_t i0 = b * GELU_CHUNK, len = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;

        gelu_fwd_chunk(x + i0, y + i0, len, approximate);
    }
    return REMAT_OK;
}

/* dx += dy * gelu'(x). Reads in[0] and dout. */
remat_status cpu_gelu_backward(struct cpu_ctx *c, const struct kop *op)
{
    /* x, dy, dx: (numel) */
    const float *x = op->in[0].data, *dy = op->dout.data;
    float *dx = op->din[0].data;
    bool approximate = op->at->approximate;
    int64_t n = ktensor_numel(&op->in[0]), nc = (n + GELU_CHUNK - 1) / GELU_CHUNK;

    if (c->dry || !dx)
        return REMAT_OK;
    REMAT_ASSERT(dy); /* the dispatcher sends dout NULL to the reference */
    SEQ_FOR(c)
    for (int64_t b = 0; b < nc; b++) {
        int64_t i0 = b * GELU_CHUNK, len = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;

        gelu_bwd_chunk(x + i0, dy + i0, dx + i0, len, approximate);
    }
    return REMAT_OK;
}
