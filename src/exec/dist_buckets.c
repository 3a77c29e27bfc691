/*
 * dist_buckets.c - the buckets of the reduction across ranks (docs/distributed.md).
 *
 * A parameter's gradient is final after the last BWD step of the schedule whose op
 * reads the parameter (each such backward adds into it). The gradients lie in the
 * resident block in graph order, and a backward pass finishes them roughly from the
 * last to the first, so buckets are cut from the block's end: whole parameters while
 * they fit in `bucket` floats, a parameter longer than a bucket into buckets of its own
 * from its end. Their order is the block's from its end, the same on every rank
 * whatever its schedule (ranks that planned with different time models still pair
 * their buckets); the schedule only says when each may start (its ready step).
 */
#include "exec/exec.h"

void dist_param_ready(const remat_graph *g, const remat_tgraph *tg, const remat_schedule *s,
                      int64_t *ready)
{
    for (size_t v = 0; v < g->values.n; v++)
        ready[v] = -1;
    for (size_t i = 0; i < s->n; i++) {
        const struct gop *op;

        if (s->steps[i].kind != REMAT_STEP_BWD)
            continue;
        op = graph_op(g, s->steps[i].id);
        for (int32_t k = 0; k < op->n_in; k++) {
            int32_t v = op->in[k];

            if (graph_value(g, v)->kind == VK_PARAM && tg->values[v].grad)
                ready[v] = (int64_t)i;
        }
    }
}

/* Emits bucket b (when out is given); the count after it. */
static int32_t emit(struct dist_bucket *out, int32_t nb, struct dist_bucket b)
{
    if (out)
        out[nb] = b;
    return nb + 1;
}

/* Floats [lo, hi) final after step ready join the buckets below cur (cur->lo == hi). */
static int32_t add(struct dist_bucket *out, int32_t nb, struct dist_bucket *cur, size_t lo,
                   size_t hi, int64_t ready, size_t bucket)
{
    if (hi == lo)
        return nb;
    if (cur->hi > cur->lo && cur->hi - cur->lo + (hi - lo) > bucket) {
        nb = emit(out, nb, *cur);
        *cur = (struct dist_bucket){hi, hi, -1};
    }
    while (hi - lo > bucket) { /* longer than a bucket: cut from its end */
        nb = emit(out, nb, (struct dist_bucket){hi - bucket, hi, ready});
        hi -= bucket;
        *cur = (struct dist_bucket){hi, hi, -1};
    }
    cur->lo = lo;
    cur->ready = ready > cur->ready ? ready : cur->ready;
    return nb;
}

int32_t dist_bucket_plan(const size_t *len, const int64_t *ready, int32_t np, size_t padded,
                         size_t bucket, struct dist_bucket *out)
{
    struct dist_bucket cur = {padded, padded, -1};
    size_t end = 0;
    int32_t nb = 0;

    for (int32_t p = 0; p < np; p++)
        end += len[p];
    REMAT_ASSERT(end <= padded && bucket > 0);
    nb = add(out, nb, &cur, end, padded, -1, bucket); /* the padding: zeros */
    for (int32_t p = np - 1; p >= 0; p--) {
        nb = add(out, nb, &cur, end - len[p], end, ready[p], bucket);
        end -= len[p];
    }
    if (cur.hi > cur.lo)
        nb = emit(out, nb, cur);
    return nb;
}
