/*
 * dist.c - micro-batches and data-parallel training (docs/distributed.md).
 *
 * A step is M = ranks * accumulate micro-batches; exec.c computes each one's gradient
 * from zeroed gradients. A rank with accumulate K > 1 sums its K in order into t->sum:
 * sum = g_0, then sum = sum + g_k. On one rank the step's last call divides,
 * g = sum / K, and updates.
 *
 * On N ranks the parameters (padded) are N shards of pb.shard floats and rank s owns
 * shard s. The step's last call reduces in buckets of at most pb.bucket floats: every
 * rank sends its piece of shard s to rank s (comm->exchange moves bytes only), and rank
 * s adds the N pieces it receives in rank order, p_0 + p_1, then + p_2 ..., and divides
 * by M, into its shard of the gradients. p_r is rank r's gradient (its sum when K > 1),
 * so at K = 1 the order is one process's with accumulate N, bit for bit. Then either
 * the gradient shards are gathered and every rank updates every parameter with its own
 * full optimizer state, or (shard_optimizer, ZeRO stage 1) rank s updates its shard with
 * the 1/N of the state it keeps and the parameters are gathered. The updates are
 * elementwise, so both give the same bits.
 *
 * Every call first agrees on the ranks' status, so that a failure anywhere stops every
 * rank at the same call with a message naming the rank, instead of leaving the others
 * waiting in a collective. The receive buffer and the sum sit in the resident block,
 * counted by the training graph (tgraph_param_block); nothing is allocated per step.
 * Cost per step on each rank: 2 (N - 1) / N of the parameters sent, plus N - 1 adds and
 * one division per parameter of its shard.
 */
#include "exec/exec.h"

#include <string.h>

remat_status dist_setup(remat_trainer *t)
{
    const remat_comm *c = t->o.comm;
    int32_t k = t->o.accumulate > 1 ? t->o.accumulate : 1, n = c ? c->size : 1;
    bool shard = t->o.shard_optimizer && n > 1;

    if (t->o.accumulate < 0)
        return REMAT_FAIL(REMAT_ERR_ARG, "accumulate is %d micro-batches per step",
                          (int)t->o.accumulate);
    if (c && (c->size < 1 || c->rank < 0 || c->rank >= c->size || !c->exchange ||
              !c->gather || !c->agree))
        return REMAT_FAIL(REMAT_ERR_ARG, "a comm needs a rank in [0, size), not %d of %d, "
                          "and its exchange, gather and agree calls", (int)c->rank,
                          (int)c->size);
    if (k != t->tg->accumulate || n != t->tg->ranks || shard != t->tg->shard_optimizer)
        return REMAT_FAIL(REMAT_ERR_ARG, "the trainer runs %d micro-batches on %d ranks%s "
                          "but the training graph counts the resident bytes of %d on %d%s; "
                          "make it with remat_tgraph_opts accumulate, ranks and "
                          "shard_optimizer as the trainer's", (int)k, (int)n,
                          shard ? ", optimizer sharded," : "", (int)t->tg->accumulate,
                          (int)t->tg->ranks, t->tg->shard_optimizer ? ", sharded" : "");
    t->comm = n > 1 ? c : NULL;
    t->rank = n > 1 ? c->rank : 0;
    t->ranks = n;
    t->accumulate = k;
    return REMAT_OK;
}

int64_t remat_trainer_micro(const remat_trainer *t)
{
    if (!t)
        return 0;
    return t->step * t->ranks * t->accumulate + t->rank * t->accumulate + t->micro;
}

/* Every rank's status: st itself when this rank failed, else a failure naming the
 * lowest rank that did (with its status), else REMAT_OK. */
static remat_status agree(remat_trainer *t, remat_status st)
{
    int32_t failed = -1;
    remat_status theirs = REMAT_OK, cs;

    cs = t->comm->agree(t->comm->ud, st, &failed, &theirs);
    if (st || cs)
        return st ? st : cs;
    if (failed < 0)
        return REMAT_OK;
    return REMAT_FAIL(theirs ? theirs : REMAT_ERR_IO, "rank %d of %d failed in step %lld "
                      "(its own message says why); every rank stops", (int)failed,
                      (int)t->ranks, (long long)t->step + 1);
}

/* Rank order, per element: out = ((in_0 + in_1) + ...) / m over n pieces of len floats
 * at in + i * len (m == 1: no division). */
static void sum_pieces(float *out, const float *in, size_t len, int32_t n, float m)
{
    memcpy(out, in, sizeof(float) * len);
    for (int32_t r = 1; r < n; r++)
        for (size_t e = 0; e < len; e++)
            out[e] += in[(size_t)r * len + e];
    if (m != 1)
        for (size_t e = 0; e < len; e++)
            out[e] /= m;
}

static remat_status sync(remat_trainer *t)
{
    return t->be->sync ? t->be->sync(t->ctx) : REMAT_OK;
}

/* The step's reduction across ranks and the update (see the top of the file). */
static remat_status reduce_update(remat_trainer *t)
{
    const remat_comm *c = t->comm;
    size_t S = t->pb.shard, lo = (size_t)t->rank * S, hi = lo + S, n = t->n_param_floats;
    const float *p = t->accumulate > 1 ? t->sum : t->grad;
    float m = (float)(t->ranks * t->accumulate);
    remat_status st = REMAT_OK;

    for (size_t at = 0; at < S && !st; at += t->pb.bucket) {
        size_t len = S - at < t->pb.bucket ? S - at : t->pb.bucket;

        if (!(st = c->exchange(c->ud, p + at, S, t->recv, len)))
            sum_pieces(t->grad + lo + at, t->recv, len, t->ranks, m);
    }
    hi = hi < n ? hi : n;
    if (st)
        return st;
    if (t->tg->shard_optimizer) {
        if ((st = params_update(t, lo, hi)) || (st = sync(t)))
            return st;
        return c->gather(c->ud, t->block, S);
    }
    if ((st = c->gather(c->ud, t->grad, S)))
        return st;
    return params_update(t, 0, n);
}

remat_status dist_micro_done(remat_trainer *t, remat_status st)
{
    size_t n = t->n_param_floats;

    if (t->comm)
        st = agree(t, st);
    if (st) {
        t->micro = 0; /* the step is abandoned */
        return st;
    }
    if (t->accumulate > 1 && t->micro == 0)
        memcpy(t->sum, t->grad, sizeof(float) * n);
    else if (t->accumulate > 1)
        for (size_t i = 0; i < n; i++)
            t->sum[i] += t->grad[i];
    if (++t->micro < t->accumulate)
        return REMAT_OK;
    t->micro = 0;
    if (t->comm) {
        st = reduce_update(t);
    } else {
        if (t->accumulate > 1)
            sum_pieces(t->grad, t->sum, n, 1, (float)t->accumulate);
        st = params_update(t, 0, n);
    }
    if (st)
        return st;
    t->step++;
    return sync(t);
}
