/*
 * loss.c - reference softmax cross-entropy and the sum of losses, forward and backward.
 *
 * softmax_ce: logits (N, K) in in[0], labels in in[1] (N int32 values in the float
 * buffer), output the mean over the batch of -log softmax(x_n)[label_n], a (1) tensor;
 * aux keeps the (N, K) probabilities, which with the labels are all its backward reads.
 * token_ce: the same over logits (..., V) and int32 targets of the leading shape (a
 * language model's next tokens), a negative target ignored (PyTorch's ignore_index),
 * the mean over the targets that count (0 when none does).
 * Each row subtracts its maximum before exponentiating; sums are doubles in increasing
 * k, then n (rows run on OpenMP's threads, their terms summed in row order).
 */
#include "kernels/ref/ref.h"

#include <math.h>

/* Label n: a class in [0, k), or with tokens a negative id (ignored: -1 into *out);
 * else a failure naming the op. */
static remat_status label_at(const struct kop *op, int64_t n, int64_t k, bool tokens,
                             int32_t *out)
{
    const int32_t *labels = (const int32_t *)op->in[1].data;

    *out = labels[n];
    if (tokens && *out < 0) {
        *out = -1;
        return REMAT_OK;
    }
    if (*out < 0 || *out >= k)
        return REMAT_FAIL(REMAT_ERR_ARG, "%s: label %d of %s %lld is not a class in [0, %lld)",
                          tokens ? "token_ce" : "softmax_ce", (int)*out,
                          tokens ? "position" : "sample", (long long)n, (long long)k);
    return REMAT_OK;
}

/* The rows (every axis but the last) and the classes (the last). */
static void ce_geom(const struct ktensor *x, int64_t *rows, int64_t *k)
{
    *k = x->shape[x->ndim - 1];
    *rows = ktensor_numel(x) / *k;
}

/* The rows whose label counts (all of them but the ignored tokens); REMAT_ERR_ARG for
 * a bad label. */
static remat_status ce_count(const struct kop *op, int64_t rows, int64_t k, bool tokens,
                             int64_t *count)
{
    *count = 0;
    for (int64_t n = 0; n < rows; n++) {
        int32_t lab;
        remat_status s = label_at(op, n, k, tokens, &lab);

        if (s)
            return s;
        *count += lab >= 0;
    }
    return REMAT_OK;
}

/* Rows per block of the forward: their terms are summed in row order after the block's
 * rows ran on OpenMP's threads (the same bits as one thread). */
#define CE_BLOCK 1024

/* Row n of the forward: aux = softmax(x), and its term of the loss (0 when ignored). */
static double ce_row(const struct kop *op, int64_t n, int64_t k, bool tokens)
{
    const float *row = op->in[0].data + n * k;
    float *prob = op->aux.data + n * k;
    double mx = row[0], sum = 0;
    int32_t lab;

    label_at(op, n, k, tokens, &lab);
    for (int64_t j = 1; j < k; j++)
        mx = row[j] > mx ? row[j] : mx;
    for (int64_t j = 0; j < k; j++)
        sum += exp((double)row[j] - mx);
    for (int64_t j = 0; j < k; j++)
        prob[j] = (float)(exp((double)row[j] - mx) / sum);
    return lab >= 0 ? log(sum) - ((double)row[lab] - mx) : 0;
}

/* Forward of both: out[0] = mean over the counted rows of
 * log sum_k exp(x[n,k] - m_n) - (x[n,y_n] - m_n) (0 when none counts), aux = softmax(x). */
static remat_status ce_forward(const struct kop *op, bool tokens)
{
    int64_t rows, k, count;
    double total = 0, part[CE_BLOCK];
    remat_status s;

    ce_geom(&op->in[0], &rows, &k);
    REMAT_ASSERT(ktensor_numel(&op->in[1]) == rows);
    if ((s = ce_count(op, rows, k, tokens, &count)))
        return s;
    for (int64_t b = 0; b < rows; b += CE_BLOCK) {
        int64_t m = rows - b < CE_BLOCK ? rows - b : CE_BLOCK;

#pragma omp parallel for schedule(static) if (m * k > 65536)
        for (int64_t i = 0; i < m; i++)
            part[i] = ce_row(op, b + i, k, tokens);
        for (int64_t i = 0; i < m; i++)
            total += part[i];
    }
    op->out.data[0] = count ? (float)(total / (double)count) : 0.0f;
    return REMAT_OK;
}

/* Backward of both: dx[n, k] += (p[n, k] - [k == y_n]) * g / count for the counted rows
 * (g = dout[0], 1 when dout is NULL); nothing for the ignored. Reads aux and the labels. */
static remat_status ce_backward(const struct kop *op, bool tokens)
{
    const float *prob = op->aux.data;
    float *dx = op->din[0].data;
    int64_t rows, k, count;
    double g;
    remat_status s;

    if (!dx)
        return REMAT_OK;
    ce_geom(&op->aux, &rows, &k);
    if ((s = ce_count(op, rows, k, tokens, &count)) || !count)
        return s;
    g = ref_dy(&op->dout, 0) / (double)count;
    for (int64_t n = 0; n < rows; n++) {
        int32_t lab;

        label_at(op, n, k, tokens, &lab);
        for (int64_t j = 0; lab >= 0 && j < k; j++)
            dx[n * k + j] += (float)(((double)prob[n * k + j] - (j == lab)) * g);
    }
    return REMAT_OK;
}

/* softmax_ce: logits (N, K), labels (N), every label a class. */
remat_status ref_softmax_ce_forward(const struct kop *op)
{
    return ce_forward(op, false);
}

remat_status ref_softmax_ce_backward(const struct kop *op)
{
    return ce_backward(op, false);
}

/* token_ce: logits (..., V), token targets of the leading shape, negative ones ignored. */
remat_status ref_token_ce_forward(const struct kop *op)
{
    return ce_forward(op, true);
}

remat_status ref_token_ce_backward(const struct kop *op)
{
    return ce_backward(op, true);
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
