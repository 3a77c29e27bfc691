/*
 * linear.c - reference fully connected layer, y = x W^T + b, forward and backward.
 *
 * x is (N, F) (any input is read as N rows of numel / N features, so a flattened view
 * works as it is), W is (out, F) as in PyTorch, b is (out) or absent. Every sum is a
 * double over the inner index in increasing order.
 */
#include "kernels/ref/ref.h"

struct lgeom {
    int64_t n, f, o; /* x: (n, f), W: (o, f), y: (n, o) */
};

/* The sizes of op, the weight checked against the input's features. */
static struct lgeom lin_geom(const struct kop *op)
{
    struct lgeom g = {op->in[0].shape[0], 0, op->w.shape[0]};

    g.f = ktensor_numel(&op->in[0]) / g.n;
    REMAT_ASSERT(op->w.ndim == 2 && op->w.shape[1] == g.f);
    REMAT_ASSERT(ktensor_numel(&op->out) == g.n * g.o);
    return g;
}

/* linear forward: y[n, o] = sum_f x[n, f] W[o, f] + b[o]. */
remat_status ref_linear_forward(const struct kop *op)
{
    /* x: (N, F); W: (O, F); b: (O); y: (N, O) */
    struct lgeom g = lin_geom(op);
    const float *x = op->in[0].data, *w = op->w.data, *b = op->b.data;

    for (int64_t n = 0; n < g.n; n++)
        for (int64_t o = 0; o < g.o; o++) {
            double acc = 0;

            for (int64_t f = 0; f < g.f; f++)
                acc += (double)x[n * g.f + f] * w[o * g.f + f];
            if (b)
                acc += b[o];
            op->out.data[n * g.o + o] = (float)acc;
        }
    return REMAT_OK;
}

/* linear backward: dx += dy W, dW += dy^T x, db += sum_n dy. Reads dout, in[0] (for dW)
 * and W (for dx). */
remat_status ref_linear_backward(const struct kop *op)
{
    /* dy: (N, O); x, dx: (N, F); W, dW: (O, F); db: (O) */
    struct lgeom g = lin_geom(op);
    const float *x = op->in[0].data, *w = op->w.data;
    float *dx = op->din[0].data;

    for (int64_t n = 0; dx && n < g.n; n++)
        for (int64_t f = 0; f < g.f; f++) {
            double acc = 0;

            for (int64_t o = 0; o < g.o; o++)
                acc += (double)ref_dy(&op->dout, n * g.o + o) * w[o * g.f + f];
            dx[n * g.f + f] += (float)acc;
        }
    for (int64_t o = 0; op->dw.data && o < g.o; o++)
        for (int64_t f = 0; f < g.f; f++) {
            double acc = 0;

            for (int64_t n = 0; n < g.n; n++)
                acc += (double)ref_dy(&op->dout, n * g.o + o) * x[n * g.f + f];
            op->dw.data[o * g.f + f] += (float)acc;
        }
    for (int64_t o = 0; op->db.data && o < g.o; o++) {
        double acc = 0;

        for (int64_t n = 0; n < g.n; n++)
            acc += ref_dy(&op->dout, n * g.o + o);
        op->db.data[o] += (float)acc;
    }
    return REMAT_OK;
}
