/*
 * loss.c - reference softmax cross-entropy and the sum of losses, forward and backward.
 *
 * softmax_ce: logits (N, K) in in[0], labels in in[1] (N int32 values in the float
 * buffer), output the mean over the batch of -log softmax(x_n)[label_n], a (1) tensor;
 * aux keeps the (N, K) probabilities, which with the labels are all its backward reads.
 * Each row subtracts its maximum before exponentiating; sums are doubles in increasing
 * k, then n.
 */
#include "kernels/ref/ref.h"

#include <math.h>

/* Label n, or a failure when it is not a class in [0, k). */
static remat_status label_at(const struct kop *op, int64_t n, int64_t k, int32_t *out)
{
    const int32_t *labels = (const int32_t *)op->in[1].data;

    *out = labels[n];
    if (*out < 0 || *out >= k)
        return REMAT_FAIL(REMAT_ERR_ARG, "softmax_ce: label %d of sample %lld is not a "
                          "class in [0, %lld)", (int)*out, (long long)n, (long long)k);
    return REMAT_OK;
}

/* softmax_ce forward: out[0] = mean_n (log sum_k exp(x[n,k] - m_n) - (x[n,y_n] - m_n)),
 * aux = softmax(x). REMAT_ERR_ARG for a label outside [0, K). */
remat_status ref_softmax_ce_forward(const struct kop *op)
{
    /* x: (N, K); labels: int32 (N); aux: (N, K); y: (1) */
    const float *x = op->in[0].data;
    float *prob = op->aux.data;
    int64_t nb = op->in[0].shape[0], k = op->in[0].shape[1];
    double total = 0;

    REMAT_ASSERT(op->in[0].ndim == 2 && ktensor_numel(&op->in[1]) == nb);
    for (int64_t n = 0; n < nb; n++) {
        const float *row = x + n * k;
        double mx = row[0], sum = 0, lse;
        int32_t lab;
        remat_status s = label_at(op, n, k, &lab);

        if (s)
            return s;
        for (int64_t j = 1; j < k; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j < k; j++)
            sum += exp((double)row[j] - mx);
        lse = log(sum);
        for (int64_t j = 0; j < k; j++)
            prob[n * k + j] = (float)(exp((double)row[j] - mx) / sum);
        total += lse - ((double)row[lab] - mx);
    }
    op->out.data[0] = (float)(total / (double)nb);
    return REMAT_OK;
}

/* softmax_ce backward: dx[n, k] += (p[n, k] - [k == y_n]) * g / N with g = dout[0]
 * (1 when dout is NULL). Reads aux and the labels only. */
remat_status ref_softmax_ce_backward(const struct kop *op)
{
    /* aux: (N, K); labels: int32 (N); dx: (N, K) */
    const float *prob = op->aux.data;
    float *dx = op->din[0].data;
    int64_t nb = op->aux.shape[0], k = op->aux.shape[1];
    double g = ref_dy(&op->dout, 0) / (double)nb;

    if (!dx)
        return REMAT_OK;
    for (int64_t n = 0; n < nb; n++) {
        int32_t lab;
        remat_status s = label_at(op, n, k, &lab);

        if (s)
            return s;
        for (int64_t j = 0; j < k; j++)
            dx[n * k + j] += (float)(((double)prob[n * k + j] - (j == lab)) * g);
    }
    return REMAT_OK;
}

/* sum_losses forward: out[0] = in[0][0] + in[1][0] + ... (double). */
remat_status ref_sum_losses_forward(const struct kop *op)
{
    double acc = 0;

    for (int32_t i = 0; i < op->n_in; i++)
        acc += op->in[i].data[0];
    op->out.data[0] = (float)acc;
    return REMAT_OK;
}

/* sum_losses backward: din[i][0] += g, g = dout[0] (1 when NULL). Reads nothing else. */
remat_status ref_sum_losses_backward(const struct kop *op)
{
    for (int32_t i = 0; i < op->n_in; i++)
        if (op->din[i].data)
            op->din[i].data[0] += ref_dy(&op->dout, 0);
    return REMAT_OK;
}
