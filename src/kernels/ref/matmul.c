/*
 * matmul.c - the reference batched matrix product: y = A B per batch, A (..., M, K),
 * B (..., K, N) or B (K, N) shared by every batch, either read transposed (its last two
 * axes swapped) when trans_a / trans_b say so. Every sum runs over k (or over the
 * batches and rows for a shared B's gradient) in index order in double: two runs give
 * the same bits, whatever the plan.
 */
#include "kernels/ref/ref.h"

/* The sizes of one product and the strides between batches. */
struct mm {
    int64_t nb, m, k, n;
    int64_t sa, sb, sy; /* elements between batches; sb 0: B shared */
    bool ta, tb;
};

static struct mm mm_of(const struct kop *op)
{
    const struct ktensor *a = &op->in[0], *b = &op->in[1];
    struct mm g;

    g.ta = op->at->trans_a;
    g.tb = op->at->trans_b;
    g.m = a->shape[a->ndim - (g.ta ? 1 : 2)];
    g.k = a->shape[a->ndim - (g.ta ? 2 : 1)];
    g.n = b->shape[b->ndim - (g.tb ? 2 : 1)];
    g.sa = g.m * g.k;
    g.sy = g.m * g.n;
    g.sb = b->ndim == 2 ? 0 : g.k * g.n;
    g.nb = ktensor_numel(&op->out) / (g.sy ? g.sy : 1);
    return g;
}

/* Offsets of A's (i, k) and B's (k, j) within one batch. */
static inline int64_t a_at(const struct mm *g, int64_t i, int64_t k)
{
    return g->ta ? k * g->m + i : i * g->k + k;
}

static inline int64_t b_at(const struct mm *g, int64_t k, int64_t j)
{
    return g->tb ? j * g->k + k : k * g->n + j;
}

/* y[i, j] = sum_k A(i, k) B(k, j). */
remat_status ref_matmul_forward(const struct kop *op)
{
    struct mm g = mm_of(op);

    for (int64_t t = 0; t < g.nb; t++) {
        const float *a = op->in[0].data + t * g.sa, *b = op->in[1].data + t * g.sb;
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
static void grad_a(const struct kop *op, const struct mm *g)
{
    for (int64_t t = 0; t < g->nb; t++) {
        const float *b = op->in[1].data + t * g->sb;
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
static void grad_b(const struct kop *op, const struct mm *g)
{
    int64_t nb_out = g->sb ? g->nb : 1, nb_in = g->sb ? 1 : g->nb;

    for (int64_t u = 0; u < nb_out; u++) {
        float *db = op->din[1].data + u * g->sb;

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
    struct mm g = mm_of(op);

    if (op->din[0].data)
        grad_a(op, &g);
    if (op->din[1].data)
        grad_b(op, &g);
    return REMAT_OK;
}
