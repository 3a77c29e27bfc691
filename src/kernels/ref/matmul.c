/*
 * matmul.c - the transformer's reference kernels beside layer norm and GELU (seq.c).
 * The embedding: row id of the table per token id (ids outside the table refused), its
 * backward adding each token's gradient row into the table in token order. The batched
 * matrix product: y = A B per batch, A (..., M, K),
 * B (..., K, N) or B (K, N) shared by every batch, either read transposed (its last two
 * axes swapped) when trans_a / trans_b say so. Every sum runs over k (or over the
 * batches and rows for a shared B's gradient) in index order in double: two runs give
 * the same bits, whatever the plan. The softmax over the last axis, each row of each
 * matrix (the last two axes) on its own, in double, of the input times the scale; with
 * causal, row i takes columns
 * j <= i and the rest of the row is 0 (so its backward adds 0 there).
 */
#include "kernels/ref/ref.h"

#include <math.h>
#include <string.h>

/* Offsets of A's (i, k) and B's (k, j) within one batch. */
static inline int64_t a_at(const struct kmm *g, int64_t i, int64_t k)
{
    return g->ta ? k * g->m + i : i * g->k + k;
}

static inline int64_t b_at(const struct kmm *g, int64_t k, int64_t j)
{
    return g->tb ? j * g->k + k : k * g->n + j;
}

/* y[i, j] = sum_k A(i, k) B(k, j). */
remat_status ref_matmul_forward(const struct kop *op)
{
    struct kmm g = kop_matmul_geom(op);

    for (int64_t t = 0; t < g.nb; t++) {
        const float *a = op->in[0].data + t * g.sa, *b = kop_matmul_b(op)->data + t * g.sb;
        float *y = op->out.data + t * g.sy;

        for (int64_t i = 0; i < g.m; i++)
            for (int64_t j = 0; j < g.n; j++) {
                double acc = 0;

                for (int64_t k = 0; k < g.k; k++)
                    acc += (double)a[a_at(&g, i, k)] * b[b_at(&g, k, j)];
                y[i * g.n + j] = (float)acc;
            }
    }
    return REMAT_OK;
}

/* dA(i, k) += sum_j dy(i, j) B(k, j), batch by batch. */
static void grad_a(const struct kop *op, const struct kmm *g)
{
    for (int64_t t = 0; t < g->nb; t++) {
        const float *b = kop_matmul_b(op)->data + t * g->sb;
        float *da = op->din[0].data + t * g->sa;

        for (int64_t i = 0; i < g->m; i++)
            for (int64_t k = 0; k < g->k; k++) {
                double acc = 0;

                for (int64_t j = 0; j < g->n; j++)
                    acc += (double)ref_dy(&op->dout, t * g->sy + i * g->n + j) *
                           b[b_at(g, k, j)];
                da[a_at(g, i, k)] += (float)acc;
            }
    }
}

/* dB(k, j) += sum_i A(i, k) dy(i, j), per batch; a shared B sums over the batches too
 * (batch by batch, then the rows, in order). */
static void grad_b(const struct kop *op, const struct kmm *g)
{
    int64_t nb_out = g->sb ? g->nb : 1, nb_in = g->sb ? 1 : g->nb;

    for (int64_t u = 0; u < nb_out; u++) {
        float *db = kop_matmul_db(op)->data + u * g->sb;

        for (int64_t k = 0; k < g->k; k++)
            for (int64_t j = 0; j < g->n; j++) {
                double acc = 0;

                for (int64_t v = 0; v < nb_in; v++) {
                    int64_t t = u + v; /* one of the two is 0 */
                    const float *a = op->in[0].data + t * g->sa;

                    for (int64_t i = 0; i < g->m; i++)
                        acc += (double)a[a_at(g, i, k)] *
                               ref_dy(&op->dout, t * g->sy + i * g->n + j);
                }
                db[b_at(g, k, j)] += (float)acc;
            }
    }
}

remat_status ref_matmul_backward(const struct kop *op)
{
    struct kmm g = kop_matmul_geom(op);

    if (op->din[0].data)
        grad_a(op, &g);
    if (kop_matmul_db(op)->data)
        grad_b(op, &g);
    return REMAT_OK;
}

/* Rows of the last axis (n each) and, for the causal mask, rows per matrix (m). */
static void rows_of(const struct ktensor *t, int64_t *rows, int64_t *m, int64_t *n)
{
    *n = t->shape[t->ndim - 1];
    *m = t->shape[t->ndim - 2];
    *rows = ktensor_numel(t) / *n;
}

/* The softmax's scale (attr 0: 1). */
static double sm_scale(const struct kop *op)
{
    return op->at->scale != 0 ? (double)op->at->scale : 1.0;
}

/* y = exp(s (x - max)) / sum exp(s (x - max)) over the row's first w columns, 0 past
 * them (s > 0, the scale). */
remat_status ref_softmax_last_forward(const struct kop *op)
{
    double s = sm_scale(op);
    int64_t rows, m, n;

    rows_of(&op->in[0], &rows, &m, &n);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = op->in[0].data + r * n;
        float *y = op->out.data + r * n;
        int64_t w = op->at->causal && r % m + 1 < n ? r % m + 1 : n;
        double mx = x[0], sum = 0;

        for (int64_t j = 1; j < w; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < w; j++)
            sum += exp(s * ((double)x[j] - mx));
        for (int64_t j = 0; j < n; j++)
            y[j] = j < w ? (float)(exp(s * ((double)x[j] - mx)) / sum) : 0.0f;
    }
    return REMAT_OK;
}

/* dx += s y (dy - sum_j dy y), per row, in double; reads y (0 where masked). */
remat_status ref_softmax_last_backward(const struct kop *op)
{
    float *dx = op->din[0].data;
    double s = sm_scale(op);
    int64_t rows, m, n;

    if (!dx)
        return REMAT_OK;
    rows_of(&op->out, &rows, &m, &n);
    for (int64_t r = 0; r < rows; r++) {
        const float *y = op->out.data + r * n;
        double dot = 0;

        for (int64_t j = 0; j < n; j++)
            dot += (double)ref_dy(&op->dout, r * n + j) * y[j];
        for (int64_t j = 0; j < n; j++)
            dx[r * n + j] +=
                (float)(s * (double)y[j] * ((double)ref_dy(&op->dout, r * n + j) - dot));
    }
    return REMAT_OK;
}

/* y[t, :] = W[id_t, :]; an id outside [0, vocab) is refused. */
remat_status ref_embedding_forward(const struct kop *op)
{
    const int32_t *ids = (const int32_t *)op->in[0].data;
    int64_t n = ktensor_numel(&op->in[0]), d = op->w.shape[1], v = op->w.shape[0];

    for (int64_t t = 0; t < n; t++) {
        if (ids[t] < 0 || ids[t] >= v)
            return REMAT_FAIL(REMAT_ERR_ARG, "embedding: token id %d at position %lld is "
                              "outside the vocabulary of %lld", (int)ids[t], (long long)t,
                              (long long)v);
        memcpy(op->out.data + t * d, op->w.data + (int64_t)ids[t] * d, sizeof(float) * (size_t)d);
    }
    return REMAT_OK;
}

/* dW[id_t, :] += dy[t, :], tokens in order (the same bits every run; no input gradient:
 * ids are integers). */
remat_status ref_embedding_backward(const struct kop *op)
{
    const int32_t *ids = (const int32_t *)op->in[0].data;
    int64_t n = ktensor_numel(&op->in[0]), d = op->w.shape[1], v = op->w.shape[0];

    if (!op->dw.data)
        return REMAT_OK;
    for (int64_t t = 0; t < n; t++) {
        float *row;

        if (ids[t] < 0 || ids[t] >= v)
            return REMAT_FAIL(REMAT_ERR_ARG, "embedding: token id %d at position %lld is "
                              "outside the vocabulary of %lld", (int)ids[t], (long long)t,
                              (long long)v);
        row = op->dw.data + (int64_t)ids[t] * d;
        for (int64_t j = 0; j < d; j++)
            row[j] += ref_dy(&op->dout, t * d + j);
    }
    return REMAT_OK;
}
