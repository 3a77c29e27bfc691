/*
 * split.c - the reference kernels of per-sample ops run on the context's threads, the
 * batch split into one contiguous slice per thread.
 *
 * An op is per-sample when sample n of its outputs (and of its input gradients) depends
 * on sample n of its inputs alone: relu, clip, leaky relu, sigmoid, gelu, mul, softmax
 * (over axis 1), the poolings, add, concat, crop, pad and bilinear upsampling. Each
 * thread runs the reference kernel on a kop whose tensors are its slice (shape[0] = the
 * slice's samples, data advanced to its first sample), so the arithmetic per element is
 * the reference's, in the same order, and the bits do not depend on the thread count.
 * Dropout is not split: its mask counter is the element's index in the whole tensor.
 * Layer norm is not split either: every sample adds into the shared dgamma and dbeta.
 * An op whose tensors do not all lead with the batch, or a batch of one, runs on the
 * calling thread. cpu_zero clears gradient buffers the same way, in one slice per thread.
 */
#include "kernels/cpu/cpu.h"

#include <omp.h>
#include <string.h>

bool cpu_per_sample(const struct kop *op)
{
    switch (op->type) {
    case REMAT_OP_RELU:
    case REMAT_OP_CLIP:
    case REMAT_OP_LEAKY_RELU:
    case REMAT_OP_SIGMOID:
    case REMAT_OP_TANH:
    case REMAT_OP_HARD_SIGMOID:
    case REMAT_OP_HARD_SWISH:
    case REMAT_OP_GELU:
    case REMAT_OP_MUL:
    case REMAT_OP_SOFTMAX:
    case REMAT_OP_MAX_POOL:
    case REMAT_OP_AVG_POOL:
    case REMAT_OP_GLOBAL_AVG_POOL:
    case REMAT_OP_ADD:
    case REMAT_OP_CONCAT:
    case REMAT_OP_CROP:
    case REMAT_OP_PAD:
    case REMAT_OP_UPSAMPLE_BILINEAR:
        return true;
    default:
        return false;
    }
}

/* t restricted to samples [n0, n0 + len) of a batch of n (data NULL stays NULL; a
 * tensor without dimensions, absent, stays as it is). */
static struct ktensor slice(const struct ktensor *t, int64_t n, int64_t n0, int64_t len)
{
    struct ktensor s = *t;

    if (t->ndim >= 1) {
        s.shape[0] = len;
        if (t->data)
            s.data = t->data + n0 * (ktensor_numel(t) / n);
    }
    return s;
}

static bool leads(const struct ktensor *t, int64_t n)
{
    return t->ndim < 1 || t->shape[0] == n;
}

/* Every tensor the kop has leads with the batch of n samples. */
static bool batch_leads(const struct kop *op, int64_t n)
{
    if (!leads(&op->out, n) || !leads(&op->aux, n) || !leads(&op->dout, n))
        return false;
    for (int32_t i = 0; i < op->n_in; i++)
        if (!leads(&op->in[i], n) || (op->din && !leads(&op->din[i], n)))
            return false;
    return true;
}

remat_status cpu_split_run(const struct cpu_ctx *c, const struct kop *op, bool backward)
{
    int64_t n = op->out.ndim > 0 ? op->out.shape[0] : 1;
    int parts = c->threads < n ? c->threads : (int)n;
    remat_status st = REMAT_OK;

    if (parts <= 1 || op->n_in > KOP_MAX_INPUTS || !batch_leads(op, n))
        return backward ? ref_backward(op) : ref_forward(op);
#pragma omp parallel for num_threads(parts) schedule(static, 1)
    for (int p = 0; p < parts; p++) {
        int64_t n0 = n * p / parts, len = n * (p + 1) / parts - n0;
        struct ktensor in[KOP_MAX_INPUTS], din[KOP_MAX_INPUTS];
        struct kop k = *op;
        remat_status s;

        for (int32_t i = 0; i < op->n_in; i++) {
            in[i] = slice(&op->in[i], n, n0, len);
            if (op->din)
                din[i] = slice(&op->din[i], n, n0, len);
        }
        k.in = in;
        k.din = op->din ? din : NULL;
        k.out = slice(&op->out, n, n0, len);
        k.aux = slice(&op->aux, n, n0, len);
        k.dout = slice(&op->dout, n, n0, len);
        s = backward ? ref_backward(&k) : ref_forward(&k);
        if (s) {
#pragma omp critical(remat_split)
            st = s;
        }
    }
    /* The message of a failure is the worker's: run it again here to report it. */
    if (st)
        st = backward ? ref_backward(op) : ref_forward(op);
    return st;
}

void cpu_zero(const struct cpu_ctx *c, void *p, size_t bytes)
{
    int parts = bytes < ((size_t)1 << 20) ? 1 : c->threads;

    if (parts <= 1) {
        memset(p, 0, bytes);
        return;
    }
#pragma omp parallel for num_threads(parts) schedule(static, 1)
    for (int k = 0; k < parts; k++) {
        size_t a = bytes * (size_t)k / (size_t)parts, b = bytes * (size_t)(k + 1) / (size_t)parts;

        memset((char *)p + a, 0, b - a);
    }
}
