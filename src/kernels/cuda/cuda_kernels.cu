/*
 * cuda_kernels.cu - the cuda backend's own kernels (cuda_kernels.h). One thread per
 * output element (or per input element for the gathering backwards), grid-stride loops.
 */
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/grid.cuh"

#include <cuda_runtime.h>
#include <math.h>

/* kernel_uniform of kernels.h: splitmix64 of (key, i), 24 bits */
__device__ static float uniform(uint64_t key, uint64_t i)
{
    uint64_t z = key + 0x9e3779b97f4a7c15ull * (i + 1);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

__global__ static void k_act_fwd(int what, float a, float b, const float *x, float *y, int64_t n)
{
    FOR_EACH(i, n) {
        float v = x[i];

        switch (what) {
        case 0: y[i] = v < 0 ? 0.0f : v; break;
        case 1: y[i] = v < a ? a : v > b ? b : v; break;
        case 2: y[i] = v < 0 ? a * v : v; break;
        case 3: y[i] = (float)(1.0 / (1.0 + exp(-(double)v))); break;
        default: y[i] = (float)tanh((double)v); break;
        }
    }
}

__global__ static void k_act_bwd(int what, float a, float b, const float *y, const float *dy,
                                 float *dx, int64_t n)
{
    FOR_EACH(i, n) {
        float g = dy ? dy[i] : 1.0f, v = y[i];

        switch (what) {
        case 0: if (v > 0) dx[i] += g; break;
        case 1: if (v > a && v < b) dx[i] += g; break;
        case 2: dx[i] += v > 0 ? g : a * g; break;
        case 3: dx[i] += g * v * (1.0f - v); break;
        default: dx[i] += (float)((double)g * (1.0 - (double)v * v)); break;
        }
    }
}

extern "C" int cu_act_fwd(cu_stream s, int what, float a, float b, const float *x, float *y,
                          int64_t n)
{
    k_act_fwd<<<blocks(n), THREADS, 0, s>>>(what, a, b, x, y, n);
    return (int)cudaGetLastError();
}

extern "C" int cu_act_bwd(cu_stream s, int what, float a, float b, const float *y,
                          const float *dy, float *dx, int64_t n)
{
    k_act_bwd<<<blocks(n), THREADS, 0, s>>>(what, a, b, y, dy, dx, n);
    return (int)cudaGetLastError();
}

__global__ static void k_dropout_fwd(const float *x, float *y, int64_t n, float p, float scale,
                                     uint64_t key)
{
    FOR_EACH(i, n) y[i] = uniform(key, (uint64_t)i) >= p ? x[i] * scale : 0.0f;
}

__global__ static void k_dropout_bwd(const float *dy, float *dx, int64_t n, float p,
                                     float scale, uint64_t key)
{
    FOR_EACH(i, n) if (uniform(key, (uint64_t)i) >= p) dx[i] += (dy ? dy[i] : 1.0f) * scale;
}

extern "C" int cu_dropout_fwd(cu_stream s, const float *x, float *y, int64_t n, float p,
                              uint64_t key)
{
    k_dropout_fwd<<<blocks(n), THREADS, 0, s>>>(x, y, n, p, (float)(1.0 / (1.0 - (double)p)),
                                                key);
    return (int)cudaGetLastError();
}

extern "C" int cu_dropout_bwd(cu_stream s, const float *dy, float *dx, int64_t n, float p,
                              uint64_t key)
{
    k_dropout_bwd<<<blocks(n), THREADS, 0, s>>>(dy, dx, n, p, (float)(1.0 / (1.0 - (double)p)),
                                                key);
    return (int)cudaGetLastError();
}

__global__ static void k_add2(const float *a, const float *b, float *y, int64_t n)
{
    FOR_EACH(i, n) y[i] = b ? a[i] + b[i] : a[i];
}

__global__ static void k_mul2(const float *a, const float *b, float *y, int64_t n)
{
    FOR_EACH(i, n) y[i] = a[i] * b[i];
}

__global__ static void k_acc(const float *dy, const float *other, float *dx, int64_t n)
{
    FOR_EACH(i, n) {
        float g = dy ? dy[i] : 1.0f;

        dx[i] += other ? g * other[i] : g;
    }
}

extern "C" int cu_add2(cu_stream s, const float *a, const float *b, float *y, int64_t n)
{
    k_add2<<<blocks(n), THREADS, 0, s>>>(a, b, y, n);
    return (int)cudaGetLastError();
}

extern "C" int cu_mul2(cu_stream s, const float *a, const float *b, float *y, int64_t n)
{
    k_mul2<<<blocks(n), THREADS, 0, s>>>(a, b, y, n);
    return (int)cudaGetLastError();
}

extern "C" int cu_acc(cu_stream s, const float *dy, const float *other, float *dx, int64_t n)
{
    k_acc<<<blocks(n), THREADS, 0, s>>>(dy, other, dx, n);
    return (int)cudaGetLastError();
}

__global__ static void k_copy2d(const float *src, int64_t sp, float *dst, int64_t dp,
                                int64_t rows, int64_t cols, int acc)
{
    FOR_EACH(i, rows * cols) {
        int64_t r = i / cols, c = i % cols;

        if (acc)
            dst[r * dp + c] += src[r * sp + c];
        else
            dst[r * dp + c] = src[r * sp + c];
    }
}

extern "C" int cu_copy2d(cu_stream s, const float *src, int64_t spitch, float *dst,
                         int64_t dpitch, int64_t rows, int64_t cols, int accumulate)
{
    k_copy2d<<<blocks(rows * cols), THREADS, 0, s>>>(src, spitch, dst, dpitch, rows, cols,
                                                     accumulate);
    return (int)cudaGetLastError();
}

__global__ static void k_window(const float *src, int64_t hs, int64_t ws, float *dst,
                                int64_t hd, int64_t wd, int64_t planes, int64_t oi, int64_t oj,
                                int acc)
{
    FOR_EACH(i, planes * hd * wd) {
        int64_t p = i / (hd * wd), q = i % (hd * wd), r = q / wd + oi, c = q % wd + oj;
        bool in = r >= 0 && r < hs && c >= 0 && c < ws;

        if (acc && in)
            dst[i] += src[(p * hs + r) * ws + c];
        else if (!acc)
            dst[i] = in ? src[(p * hs + r) * ws + c] : 0.0f;
    }
}

extern "C" int cu_window(cu_stream s, const float *src, int64_t hs, int64_t ws, float *dst,
                         int64_t hd, int64_t wd, int64_t planes, int64_t oi, int64_t oj,
                         int accumulate)
{
    k_window<<<blocks(planes * hd * wd), THREADS, 0, s>>>(src, hs, ws, dst, hd, wd, planes, oi,
                                                          oj, accumulate);
    return (int)cudaGetLastError();
}

/* ---------------------------------------------------------------- pooling */

__device__ static int64_t dmax(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ static int64_t dmin(int64_t a, int64_t b) { return a < b ? a : b; }

__global__ static void k_maxpool_fwd(struct cu_pool g, const float *x, float *y, int32_t *arg)
{
    FOR_EACH(i, g.planes * g.ho * g.wo) {
        int64_t p = i / (g.ho * g.wo), o = i % (g.ho * g.wo), oh = o / g.wo, ow = o % g.wo;
        int64_t hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
        int64_t he = dmin(hs + g.kh, g.h), we = dmin(ws + g.kw, g.w), idx;
        const float *xp = x + p * g.h * g.w;
        float best = -INFINITY;

        hs = dmax(hs, 0);
        ws = dmax(ws, 0);
        idx = hs * g.w + ws;
        for (int64_t h = hs; h < he; h++)
            for (int64_t w = ws; w < we; w++) {
                float v = xp[h * g.w + w];

                if (v > best || isnan(v)) {
                    best = v;
                    idx = h * g.w + w;
                }
            }
        y[i] = best;
        arg[i] = (int32_t)idx;
    }
}

/* The output rows whose windows start at o*s - p and cover input row i: [lo, hi]. */
__device__ static void covering(int64_t i, int32_t k, int32_t s, int32_t p, int64_t n_out,
                                int64_t *lo, int64_t *hi)
{
    int64_t a = i + p - k + 1;

    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = dmin((i + p) / s, n_out - 1);
}

/* gathered: each input element sums, in output order, what its windows send it */
__global__ static void k_maxpool_bwd(struct cu_pool g, const int32_t *arg, const float *dy,
                                     float *dx)
{
    FOR_EACH(i, g.planes * g.h * g.w) {
        int64_t p = i / (g.h * g.w), q = i % (g.h * g.w), h = q / g.w, w = q % g.w;
        int64_t h0, h1, w0, w1;
        float acc = dx[i];

        covering(h, g.kh, g.sh, g.ph, g.ho, &h0, &h1);
        covering(w, g.kw, g.sw, g.pw, g.wo, &w0, &w1);
        for (int64_t oh = h0; oh <= h1; oh++)
            for (int64_t ow = w0; ow <= w1; ow++) {
                int64_t o = p * g.ho * g.wo + oh * g.wo + ow;

                if (arg[o] == q)
                    acc += dy ? dy[o] : 1.0f;
            }
        dx[i] = acc;
    }
}

/* the window of output (oh, ow) and its divisor, as ref/pool.c's avg_window */
__device__ static double avg_win(const struct cu_pool *g, int64_t oh, int64_t ow, int64_t *hs,
                                 int64_t *he, int64_t *ws, int64_t *we)
{
    int64_t pool;

    *hs = oh * g->sh - g->ph;
    *ws = ow * g->sw - g->pw;
    *he = dmin(*hs + g->kh, g->h + g->ph);
    *we = dmin(*ws + g->kw, g->w + g->pw);
    pool = (*he - *hs) * (*we - *ws);
    *hs = dmax(*hs, 0);
    *ws = dmax(*ws, 0);
    *he = dmin(*he, g->h);
    *we = dmin(*we, g->w);
    return (double)(g->include_pad ? pool : (*he - *hs) * (*we - *ws));
}

__global__ static void k_avgpool_fwd(struct cu_pool g, const float *x, float *y)
{
    FOR_EACH(i, g.planes * g.ho * g.wo) {
        int64_t p = i / (g.ho * g.wo), o = i % (g.ho * g.wo), hs, he, ws, we;
        double div = avg_win(&g, o / g.wo, o % g.wo, &hs, &he, &ws, &we), sum = 0;
        const float *xp = x + p * g.h * g.w;

        for (int64_t h = hs; h < he; h++)
            for (int64_t w = ws; w < we; w++)
                sum += xp[h * g.w + w];
        y[i] = (float)(sum / div);
    }
}

__global__ static void k_avgpool_bwd(struct cu_pool g, const float *dy, float *dx)
{
    FOR_EACH(i, g.planes * g.h * g.w) {
        int64_t p = i / (g.h * g.w), q = i % (g.h * g.w), h = q / g.w, w = q % g.w;
        int64_t h0, h1, w0, w1;
        float acc = dx[i];

        covering(h, g.kh, g.sh, g.ph, g.ho, &h0, &h1);
        covering(w, g.kw, g.sw, g.pw, g.wo, &w0, &w1);
        for (int64_t oh = h0; oh <= h1; oh++)
            for (int64_t ow = w0; ow <= w1; ow++) {
                int64_t hs, he, ws, we, o = p * g.ho * g.wo + oh * g.wo + ow;
                double div = avg_win(&g, oh, ow, &hs, &he, &ws, &we);

                if (h >= hs && h < he && w >= ws && w < we)
                    acc += (float)((dy ? dy[o] : 1.0f) / div);
            }
        dx[i] = acc;
    }
}

extern "C" int cu_maxpool_fwd(cu_stream s, struct cu_pool g, const float *x, float *y,
                              int32_t *arg)
{
    k_maxpool_fwd<<<blocks(g.planes * g.ho * g.wo), THREADS, 0, s>>>(g, x, y, arg);
    return (int)cudaGetLastError();
}

extern "C" int cu_maxpool_bwd(cu_stream s, struct cu_pool g, const int32_t *arg, const float *dy,
                              float *dx)
{
    k_maxpool_bwd<<<blocks(g.planes * g.h * g.w), THREADS, 0, s>>>(g, arg, dy, dx);
    return (int)cudaGetLastError();
}

extern "C" int cu_avgpool_fwd(cu_stream s, struct cu_pool g, const float *x, float *y)
{
    k_avgpool_fwd<<<blocks(g.planes * g.ho * g.wo), THREADS, 0, s>>>(g, x, y);
    return (int)cudaGetLastError();
}

extern "C" int cu_avgpool_bwd(cu_stream s, struct cu_pool g, const float *dy, float *dx)
{
    k_avgpool_bwd<<<blocks(g.planes * g.h * g.w), THREADS, 0, s>>>(g, dy, dx);
    return (int)cudaGetLastError();
}

__global__ static void k_gap_fwd(const float *x, float *y, int64_t planes, int64_t hw)
{
    FOR_EACH(p, planes) {
        double sum = 0;

        for (int64_t i = 0; i < hw; i++)
            sum += x[p * hw + i];
        y[p] = (float)(sum / (double)hw);
    }
}

__global__ static void k_gap_bwd(const float *dy, float *dx, int64_t planes, int64_t hw)
{
    FOR_EACH(i, planes * hw) dx[i] += (float)((dy ? dy[i / hw] : 1.0f) / (double)hw);
}

extern "C" int cu_gap_fwd(cu_stream s, const float *x, float *y, int64_t planes, int64_t hw)
{
    k_gap_fwd<<<blocks(planes), THREADS, 0, s>>>(x, y, planes, hw);
    return (int)cudaGetLastError();
}

extern "C" int cu_gap_bwd(cu_stream s, const float *dy, float *dx, int64_t planes, int64_t hw)
{
    k_gap_bwd<<<blocks(planes * hw), THREADS, 0, s>>>(dy, dx, planes, hw);
    return (int)cudaGetLastError();
}

/* ------------------------------------------------------------------ losses */

__global__ static void k_ce_rows(const float *x, const int32_t *lab, float *prob,
                                 double *rowloss, int32_t *bad, int64_t n, int64_t k)
{
    FOR_EACH(r, n) {
        const float *row = x + r * k;
        double mx = row[0], sum = 0;
        int32_t l = lab[r];

        if (l < 0 || l >= k) {
            atomicCAS(bad, 0, (int32_t)r + 1);
            rowloss[r] = 0;
            continue;
        }
        for (int64_t j = 1; j < k; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j < k; j++)
            sum += exp((double)row[j] - mx);
        for (int64_t j = 0; j < k; j++)
            prob[r * k + j] = (float)(exp((double)row[j] - mx) / sum);
        rowloss[r] = log(sum) - ((double)row[l] - mx);
    }
}

__global__ static void k_ce_mean(const double *rowloss, float *loss, int64_t n)
{
    double total = 0;

    for (int64_t r = 0; r < n; r++)
        total += rowloss[r];
    loss[0] = (float)(total / (double)n);
}

extern "C" int cu_softmax_ce_fwd(cu_stream s, const float *x, const int32_t *lab, float *prob,
                                 float *loss, double *rowloss, int32_t *bad, int64_t n, int64_t k)
{
    k_ce_rows<<<blocks(n), THREADS, 0, s>>>(x, lab, prob, rowloss, bad, n, k);
    k_ce_mean<<<1, 1, 0, s>>>(rowloss, loss, n);
    return (int)cudaGetLastError();
}

__global__ static void k_ce_bwd(const float *prob, const int32_t *lab, const float *dy,
                                float *dx, int64_t n, int64_t k)
{
    FOR_EACH(i, n * k) {
        int64_t r = i / k, j = i % k;
        double g = (dy ? dy[0] : 1.0f) / (double)n;

        dx[i] += (float)(((double)prob[i] - (j == lab[r])) * g);
    }
}

extern "C" int cu_softmax_ce_bwd(cu_stream s, const float *prob, const int32_t *lab,
                                 const float *dy, float *dx, int64_t n, int64_t k)
{
    k_ce_bwd<<<blocks(n * k), THREADS, 0, s>>>(prob, lab, dy, dx, n, k);
    return (int)cudaGetLastError();
}

__global__ static void k_sum_scalars(struct cu_ptrs in, int32_t n_in, float *y)
{
    double acc = 0;

    for (int32_t i = 0; i < n_in; i++)
        acc += in.p[i][0];
    y[0] = (float)acc;
}

extern "C" int cu_sum_scalars(cu_stream s, struct cu_ptrs in, int32_t n_in, float *y)
{
    k_sum_scalars<<<1, 1, 0, s>>>(in, n_in, y);
    return (int)cudaGetLastError();
}

/* ------------------------------------------------------------ linear, SGD */

__global__ static void k_bias_rows(const float *b, float *y, int64_t rows, int64_t cols)
{
    FOR_EACH(i, rows * cols) y[i] += b[i % cols];
}

__global__ static void k_bias_grad_rows(const float *dy, float *db, int64_t rows, int64_t cols)
{
    FOR_EACH(c, cols) {
        double sum = 0;

        for (int64_t r = 0; r < rows; r++)
            sum += dy[r * cols + c];
        db[c] += (float)sum;
    }
}

extern "C" int cu_bias_rows(cu_stream s, const float *b, float *y, int64_t rows, int64_t cols)
{
    k_bias_rows<<<blocks(rows * cols), THREADS, 0, s>>>(b, y, rows, cols);
    return (int)cudaGetLastError();
}

extern "C" int cu_bias_grad_rows(cu_stream s, const float *dy, float *db, int64_t rows,
                                 int64_t cols)
{
    k_bias_grad_rows<<<blocks(cols), THREADS, 0, s>>>(dy, db, rows, cols);
    return (int)cudaGetLastError();
}

__global__ static void k_sgd(float *w, const float *g, float *m, int64_t n, float lr, float mu,
                             float wd)
{
    FOR_EACH(i, n) {
        float d = g[i] + wd * w[i];

        m[i] = mu * m[i] + d;
        w[i] -= lr * m[i];
    }
}

extern "C" int cu_sgd(cu_stream s, float *w, const float *g, float *m, int64_t n, float lr,
                      float mu, float wd)
{
    k_sgd<<<blocks(n), THREADS, 0, s>>>(w, g, m, n, lr, mu, wd);
    return (int)cudaGetLastError();
}
