/*
 * dist.c - micro-batches and data-parallel training (docs/distributed.md).
 *
 * A step is M = ranks * accumulate micro-batches; exec.c computes each one's gradient
 * from zeroed gradients. A rank with accumulate K > 1 sums its K in order into t->sum:
 * sum = g_0, then sum = sum + g_k. On one rank the step's last call divides,
 * g = sum / K, and updates.
 *
 * On N ranks the parameters (padded) are N shards of pb.shard floats and rank s owns
 * shard s. The reduction moves buckets (dist_buckets.c: ranges of the gradients, in one
 * order on every rank), each as soon as its gradients are final: during the step's
 * last micro-batch, exec.c calls dist_after_step after every schedule step, which starts
 * the buckets made final (when one of the two receive slots is free) and tests those
 * under way, since MPI moves data only inside its calls. A bucket's start adds the last
 * micro-batch's gradients into the sum (K > 1) and sends every rank its shard's part
 * (comm->exchange moves bytes only); when the pieces are in, rank s adds the N pieces of
 * its part in rank order, p_0 + p_1, then + p_2 ..., and divides by M, into its shard of
 * the gradients, and (unsharded) starts gathering the bucket's reduced parts to every
 * rank. p_r is rank r's gradient (its sum when K > 1), so at K = 1 the order is one
 * process's with accumulate N, bit for bit, whenever the pieces arrive. After the
 * backward the ranks agree, the rest is finished (blocking), and either every rank
 * updates every parameter with its own full optimizer state, or (shard_optimizer, ZeRO
 * stage 1) rank s updates its shard with the 1/N of the state it keeps and the
 * parameters are gathered. The updates are elementwise, so both give the same bits.
 *
 * Every call first agrees on the ranks' status, so that a failure anywhere stops every
 * rank at the same call with a message naming the rank, instead of leaving the others
 * waiting in a collective; a failed rank still starts and finishes the step's buckets
 * (their sums are dropped), so that no transfer is left half made. The receive slots
 * and the sum sit in the resident block, counted by the training graph
 * (tgraph_param_block); nothing is allocated per step. Cost per step on each rank:
 * 2 (N - 1) / N of the parameters sent, plus N - 1 adds and one division per parameter
 * of its shard.
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
              !c->gather || !c->test || !c->agree))
        return REMAT_FAIL(REMAT_ERR_ARG, "a comm needs a rank in [0, size), not %d of %d, "
                          "and its exchange, gather, test and agree calls", (int)c->rank,
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

/* The reduction's state: the buckets in the order every rank starts them, the
 * transfers' names, and how far this step's reduction got (each a prefix: buckets
 * started, exchanged and summed, gathered). The count and displacement arrays hold one
 * entry per rank; src the pieces of the bucket being summed. */
struct dist_reduce {
    struct dist_bucket *bk;
    int32_t n, started, summed, gathered;
    int32_t *xreq, *greq;
    size_t *cnt, *sdis, *rcnt, *rdis;
    const float **src;
    bool live;          /* this micro-batch's backward starts buckets */
    double wait;        /* seconds blocked finishing the reductions after the backward */
};

static size_t red_bytes(int32_t n, int32_t ranks)
{
    return sizeof(struct dist_reduce) + (size_t)n * (sizeof(struct dist_bucket) +
                                                     2 * sizeof(int32_t)) +
           (size_t)ranks * (4 * sizeof(size_t) + sizeof(float *));
}

void dist_free(remat_trainer *t)
{
    if (t->red)
        core_free(tgraph_al(t->tg), t->red, red_bytes(t->red->n, t->ranks));
    t->red = NULL;
}

remat_status dist_buckets_setup(remat_trainer *t)
{
    const remat_allocator *a = tgraph_al(t->tg);
    size_t nv = t->g->values.n, np, *len;
    int64_t *ready, *pready;
    int32_t *order;
    struct dist_reduce *r;
    char *at;
    int32_t n;

    if (!t->comm)
        return REMAT_OK;
    ready = core_calloc(a, nv, sizeof *ready);
    len = core_calloc(a, nv, sizeof *len);
    pready = core_calloc(a, nv, sizeof *pready);
    order = core_calloc(a, nv, sizeof *order);
    if (!ready || !len || !pready || !order) {
        core_free(a, ready, nv * sizeof *ready);
        core_free(a, len, nv * sizeof *len);
        core_free(a, pready, nv * sizeof *pready);
        core_free(a, order, nv * sizeof *order);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory for the reduction's buckets");
    }
    dist_param_ready(t->g, t->tg, t->s, ready);
    np = params_order(t->g, order); /* the block's order */
    for (size_t i = 0; i < np; i++) {
        len[i] = (size_t)graph_numel(graph_value(t->g, order[i]));
        pready[i] = ready[order[i]];
    }
    n = dist_bucket_plan(len, pready, (int32_t)np, t->pb.padded, t->pb.bucket, NULL);
    r = core_calloc(a, 1, red_bytes(n, t->ranks));
    if (r) {
        at = (char *)(r + 1);
        r->bk = (struct dist_bucket *)at;
        at += sizeof *r->bk * (size_t)n;
        r->cnt = (size_t *)at;
        r->sdis = r->cnt + t->ranks;
        r->rcnt = r->sdis + t->ranks;
        r->rdis = r->rcnt + t->ranks;
        r->src = (const float **)(r->rdis + t->ranks);
        r->xreq = (int32_t *)(r->src + t->ranks);
        r->greq = r->xreq + n;
        r->n = dist_bucket_plan(len, pready, (int32_t)np, t->pb.padded, t->pb.bucket, r->bk);
    }
    core_free(a, ready, nv * sizeof *ready);
    core_free(a, len, nv * sizeof *len);
    core_free(a, pready, nv * sizeof *pready);
    core_free(a, order, nv * sizeof *order);
    if (!r)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory for the reduction's buckets");
    t->red = r;
    return REMAT_OK;
}

static remat_status sync(remat_trainer *t)
{
    return t->be->sync ? t->be->sync(t->ctx) : REMAT_OK;
}

/* Shard j's part of bucket b: [*lo, *lo + *len). */
static void part(const remat_trainer *t, const struct dist_bucket *b, int32_t j, size_t *lo,
                 size_t *len)
{
    size_t s0 = (size_t)j * t->pb.shard, s1 = s0 + t->pb.shard;
    size_t a = b->lo > s0 ? b->lo : s0, e = b->hi < s1 ? b->hi : s1;

    *lo = a;
    *len = e > a ? e - a : 0;
}

/* The receive slot of bucket k: the piece of rank i (not this one) at slot + idx * piece. */
static float *slot(const remat_trainer *t, int32_t k)
{
    return t->recv + (size_t)(k % 2) * (size_t)(t->ranks - 1) * t->pb.piece;
}

/* Starts the next bucket: the sum of the micro-batches first (K > 1), then each rank's
 * part to its owner; this rank's own part stays where it is. */
static remat_status start_bucket(remat_trainer *t)
{
    struct dist_reduce *r = t->red;
    const struct dist_bucket *b = &r->bk[r->started];
    const float *p = t->accumulate > 1 ? t->sum : t->grad;
    size_t mine, mlen;
    remat_status st;

    if ((st = sync(t))) /* a device's kernels wrote the gradients */
        return st;
    if (t->accumulate > 1)
        for (size_t e = b->lo; e < b->hi; e++)
            t->sum[e] += t->grad[e];
    part(t, b, t->rank, &mine, &mlen);
    for (int32_t j = 0; j < t->ranks; j++) {
        part(t, b, j, &r->sdis[j], &r->cnt[j]);
        r->rcnt[j] = j == t->rank ? 0 : mlen;
        r->rdis[j] = j == t->rank ? 0 : (size_t)(j < t->rank ? j : j - 1) * t->pb.piece;
    }
    r->cnt[t->rank] = 0;
    st = t->comm->exchange(t->comm->ud, p, r->cnt, r->sdis, slot(t, r->started), r->rcnt,
                           r->rdis, &r->xreq[r->started]);
    r->started++;
    return st;
}

/* Bucket r->summed's pieces are in: this rank's part summed in rank order, divided by M,
 * into its gradients, then (unsharded) gathered to every rank. */
static remat_status sum_bucket(remat_trainer *t)
{
    struct dist_reduce *r = t->red;
    const struct dist_bucket *b = &r->bk[r->summed];
    const float *p = t->accumulate > 1 ? t->sum : t->grad, *in = slot(t, r->summed);
    float m = (float)(t->ranks * t->accumulate), acc[256];
    size_t mine, mlen;
    int32_t k = r->summed++;

    part(t, b, t->rank, &mine, &mlen);
    for (int32_t i = 0; i < t->ranks; i++)
        r->src[i] = i == t->rank ? p + mine
                                 : in + (size_t)(i < t->rank ? i : i - 1) * t->pb.piece;
    for (size_t at = 0; at < mlen; at += 256) { /* may write over this rank's own piece */
        size_t len = mlen - at < 256 ? mlen - at : 256;

        memcpy(acc, r->src[0] + at, sizeof(float) * len);
        for (int32_t i = 1; i < t->ranks; i++)
            for (size_t e = 0; e < len; e++)
                acc[e] += r->src[i][at + e];
        for (size_t e = 0; e < len; e++)
            t->grad[mine + at + e] = acc[e] / m;
    }
    if (t->tg->shard_optimizer)
        return REMAT_OK;
    for (int32_t j = 0; j < t->ranks; j++)
        part(t, b, j, &r->sdis[j], &r->cnt[j]);
    return t->comm->gather(t->comm->ud, t->grad, r->cnt, r->sdis, &r->greq[k]);
}

/* Moves the reduction along after schedule step `step`: starts the buckets final by
 * then in order while a receive slot is free, sums those whose pieces are in, and
 * notes the gathers done. block: waits until every bucket is summed and gathered. */
static remat_status advance(remat_trainer *t, int64_t step, bool block)
{
    struct dist_reduce *r = t->red;
    const remat_comm *c = t->comm;
    remat_status st = REMAT_OK;
    bool done;

    for (;;) {
        while (!st && r->started < r->n && r->started < r->summed + 2 &&
               r->bk[r->started].ready <= step)
            st = start_bucket(t);
        if (st || r->summed == r->started)
            break;
        if ((st = c->test(c->ud, r->xreq[r->summed], block, &done)) || !done)
            break;
        st = sum_bucket(t);
    }
    if (t->tg->shard_optimizer)
        r->gathered = r->summed;
    while (!st && r->gathered < r->summed) {
        if ((st = c->test(c->ud, r->greq[r->gathered], block, &done)) || !done)
            break;
        r->gathered++;
    }
    return st;
}

void dist_micro_begin(remat_trainer *t)
{
    if (t->red)
        t->red->live = !t->o.reduce_after && t->micro == t->accumulate - 1;
}

remat_status dist_after_step(remat_trainer *t, size_t i)
{
    if (!t->red || !t->red->live)
        return REMAT_OK;
    return advance(t, (int64_t)i, false);
}

/* The step's reduction finished after the backward (every bucket, on failure too: the
 * other ranks' transfers need this rank's), its wait timed, then the update. */
static remat_status reduce_update(remat_trainer *t, remat_status failed)
{
    struct dist_reduce *r = t->red;
    size_t S = t->pb.shard, lo = (size_t)t->rank * S, hi = lo + S, n = t->n_param_floats;
    double t0 = core_seconds();
    remat_status st;
    bool done;

    st = advance(t, INT64_MAX, true);
    REMAT_ASSERT(st || r->gathered == r->n);
    r->started = r->summed = r->gathered = 0;
    r->live = false;
    if (failed || st)
        return failed ? failed : st;
    r->wait += core_seconds() - t0;
    hi = hi < n ? hi : n;
    if (!t->tg->shard_optimizer)
        return params_update(t, 0, n);
    if ((st = params_update(t, lo, hi)) || (st = sync(t)))
        return st;
    for (int32_t j = 0; j < t->ranks; j++) {
        r->cnt[j] = S;
        r->sdis[j] = (size_t)j * S;
    }
    if ((st = t->comm->gather(t->comm->ud, t->block, r->cnt, r->sdis, &r->greq[0])))
        return st;
    return t->comm->test(t->comm->ud, r->greq[0], true, &done);
}

remat_status dist_micro_done(remat_trainer *t, remat_status st)
{
    size_t n = t->n_param_floats;
    bool last = t->micro + 1 >= t->accumulate;

    if (t->comm)
        st = agree(t, st);
    if (t->comm && last)
        st = reduce_update(t, st); /* the last micro-batch's sum is added per bucket */
    if (st) {
        t->micro = 0; /* the step is abandoned */
        return st;
    }
    if (t->accumulate > 1 && t->micro == 0)
        memcpy(t->sum, t->grad, sizeof(float) * n);
    else if (t->accumulate > 1 && !(t->comm && last))
        for (size_t i = 0; i < n; i++)
            t->sum[i] += t->grad[i];
    if (++t->micro < t->accumulate)
        return REMAT_OK;
    t->micro = 0;
    if (!t->comm) {
        if (t->accumulate > 1) {
            for (size_t i = 0; i < n; i++)
                t->grad[i] = t->sum[i] / (float)t->accumulate;
        }
        if ((st = params_update(t, 0, n)))
            return st;
    }
    t->step++;
    return sync(t);
}

void dist_stats(const remat_trainer *t, remat_train_stats *st)
{
    st->reduce_wait_seconds = t->red ? t->red->wait : 0;
    st->reduce_buckets = t->red ? t->red->n : 0;
}
