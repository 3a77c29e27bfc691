/*
 * dag.c - building the planners' graph from the training graph, and lowering a chain
 * of lower sets to a schedule.
 */
#include "plan/dag.h"
#include "sched/schedule.h"

#include <string.h>

void dag_fini(struct dag *d)
{
    const remat_allocator *a = d->al;
    size_t n = (size_t)d->n;

    core_free(a, d->op, sizeof *d->op * (n + 1));
    core_free(a, d->node, sizeof *d->node * (n + 1));
    core_free(a, d->m, sizeof *d->m * (n + 1));
    core_free(a, d->t, sizeof *d->t * (n + 1));
    core_free(a, d->pred_at, sizeof *d->pred_at * (n + 2));
    core_free(a, d->succ_at, sizeof *d->succ_at * (n + 2));
    core_free(a, d->pred, sizeof *d->pred * (d->n_edges + 1));
    core_free(a, d->succ, sizeof *d->succ * (d->n_edges + 1));
    memset(d, 0, sizeof *d);
}

/* Min-heap of op ids, for a deterministic topological order (smallest ready id first). */
static void heap_push(int32_t *h, int32_t *n, int32_t v)
{
    int32_t i = (*n)++;

    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int32_t heap_pop(int32_t *h, int32_t *n)
{
    int32_t top = h[0], v = h[--*n], i = 0;

    for (;;) {
        int32_t c = 2 * i + 1;

        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

/* Forward edges between ops (by op id), deduplicated, as CSR over op ids. */
static remat_status op_edges(const remat_tgraph *tg, const remat_allocator *a, int32_t **at,
                             int32_t **to, size_t *n_edges)
{
    int32_t n = tg->n_ops, k = 0;
    size_t cap = 0;

    for (int32_t w = 0; w < n; w++)
        cap += 2 * (size_t)tg->ops[w].n_in;
    *at = core_calloc(a, (size_t)n + 2, sizeof **at);
    *to = core_calloc(a, cap + 1, sizeof **to);
    *n_edges = cap; /* the caller frees *to with it, on failure too */
    if (!*at || !*to)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the planners' graph");
    for (int32_t w = 0; w < n; w++) {
        const struct top *op = &tg->ops[w];

        (*at)[w] = k;
        for (int32_t i = 0; i < 2 * op->n_in; i++) {
            /* each input's producer, then its buffer's: a view's reader holds the base's
             * buffer too (so that a kept view keeps its base, which owns the bytes) */
            int32_t x = op->in[i / 2], u = i % 2 ? tg->values[tg->values[x].buf].producer
                                                 : tg->values[x].producer;
            bool dup = false;

            if (u < 0)
                continue;
            for (int32_t j = (*at)[w]; j < k; j++)
                dup = dup || (*to)[j] == u;
            if (!dup)
                (*to)[k++] = u;
        }
    }
    (*at)[n] = k;
    return REMAT_OK;
}

remat_status dag_build(const remat_tgraph *tg, struct dag *d)
{
    const remat_allocator *a = tgraph_al(tg);
    int32_t n = tg->n_ops, *in_at = NULL, *in_to = NULL, *indeg = NULL, *heap = NULL;
    int32_t n_heap = 0, done = 0, *cnt = NULL;
    size_t cap = 0, ne;
    remat_status st;

    memset(d, 0, sizeof *d);
    d->al = a;
    d->n = n;
    d->words = bits_words(n);
    if ((st = op_edges(tg, a, &in_at, &in_to, &cap)))
        goto out;
    ne = (size_t)in_at[n];
    d->n_edges = ne;
    d->op = core_calloc(a, (size_t)n + 1, sizeof *d->op);
    d->node = core_calloc(a, (size_t)n + 1, sizeof *d->node);
    d->m = core_calloc(a, (size_t)n + 1, sizeof *d->m);
    d->t = core_calloc(a, (size_t)n + 1, sizeof *d->t);
    d->pred_at = core_calloc(a, (size_t)n + 2, sizeof *d->pred_at);
    d->succ_at = core_calloc(a, (size_t)n + 2, sizeof *d->succ_at);
    d->pred = core_calloc(a, ne + 1, sizeof *d->pred);
    d->succ = core_calloc(a, ne + 1, sizeof *d->succ);
    indeg = core_calloc(a, (size_t)n + 1, sizeof *indeg);
    heap = core_calloc(a, (size_t)n + 1, sizeof *heap);
    cnt = core_calloc(a, (size_t)n + 1, sizeof *cnt);
    if (!d->op || !d->node || !d->m || !d->t || !d->pred_at || !d->succ_at || !d->pred ||
        !d->succ || !indeg || !heap || !cnt) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the planners' graph");
        goto out;
    }
    /* Topological order: Kahn's algorithm, smallest ready op id first. */
    for (int32_t w = 0; w < n; w++)
        indeg[w] = in_at[w + 1] - in_at[w];
    for (size_t e = 0; e < ne; e++)
        cnt[in_to[e]]++; /* out-degree of each op, for the successor lists below */
    {
        /* op -> its successors (CSR by op id), built from the in-edges */
        int32_t *out_at = d->succ_at, *out_to = d->succ, *fill = heap;

        for (int32_t u = 0; u < n; u++)
            out_at[u + 1] = out_at[u] + cnt[u];
        memcpy(fill, out_at, sizeof *fill * (size_t)n);
        for (int32_t w = 0; w < n; w++)
            for (int32_t e = in_at[w]; e < in_at[w + 1]; e++)
                out_to[fill[in_to[e]]++] = w;
    }
    for (int32_t w = 0; w < n; w++)
        if (indeg[w] == 0)
            heap_push(heap, &n_heap, w);
    while (n_heap > 0) {
        int32_t u = heap_pop(heap, &n_heap);

        d->node[u] = done;
        d->op[done++] = u;
        for (int32_t e = d->succ_at[u]; e < d->succ_at[u + 1]; e++)
            if (--indeg[d->succ[e]] == 0)
                heap_push(heap, &n_heap, d->succ[e]);
    }
    if (done != n) {
        st = REMAT_FAIL(REMAT_ERR_INVALID, "the graph has a cycle (%d of %d ops ordered)",
                        done, n);
        goto out;
    }
    /* Renumber to nodes: preds and succs by node, sorted. */
    for (int32_t v = 0; v < n; v++) {
        int32_t w = d->op[v];

        d->pred_at[v + 1] = d->pred_at[v] + (in_at[w + 1] - in_at[w]);
        for (int32_t e = in_at[w], k = d->pred_at[v]; e < in_at[w + 1]; e++)
            d->pred[k++] = d->node[in_to[e]];
    }
    for (int32_t v = 0; v < n; v++) {
        d->succ_at[v + 1] = d->succ_at[v];
        cnt[v] = 0;
    }
    for (int32_t v = 0; v < n; v++)
        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++)
            cnt[d->pred[e]]++;
    for (int32_t v = 0; v < n; v++)
        d->succ_at[v + 1] = d->succ_at[v] + cnt[v];
    memcpy(heap, d->succ_at, sizeof *heap * (size_t)n);
    for (int32_t v = 0; v < n; v++) /* ascending v: each succ list comes out sorted */
        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++)
            d->succ[heap[d->pred[e]]++] = v;
    for (int32_t v = 0; v < n; v++) {
        const struct top *op = &tg->ops[d->op[v]];

        for (int32_t i = 0; i < op->n_out; i++) {
            const struct tvalue *tv = &tg->values[op->out[i]];

            if (tv->buf == op->out[i])
                d->m[v] += tv->bytes;
            d->t[v] += tv->cost;
        }
    }
out:
    core_free(a, in_at, sizeof *in_at * ((size_t)n + 2));
    core_free(a, in_to, sizeof *in_to * (cap + 1));
    core_free(a, indeg, sizeof *indeg * ((size_t)n + 1));
    core_free(a, heap, sizeof *heap * ((size_t)n + 1));
    core_free(a, cnt, sizeof *cnt * ((size_t)n + 1));
    if (st)
        dag_fini(d);
    return st;
}

/* Marks in need[] the non-kept nodes of block b that the backward of block b reads,
 * and, recursively, the non-kept nodes of block b their recomputation reads. */
static remat_status mark_needed(const remat_tgraph *tg, const struct dag *d,
                                const struct chain *c, int32_t b, const int32_t *nodes,
                                int32_t n_nodes, bool *need)
{
    for (int32_t k = 0; k < n_nodes; k++)
        need[nodes[k]] = false;
    for (int32_t k = n_nodes; k-- > 0;) {
        int32_t v = nodes[k];
        const struct top *op = &tg->ops[d->op[v]];

        for (int32_t i = 0; op->has_bwd && i < op->n_saved; i++) {
            int32_t p = tg->values[op->saved[i]].producer;

            if (p >= 0 && !c->kept[d->node[p]] && c->block[d->node[p]] == b)
                need[d->node[p]] = true;
        }
    }
    /* Reverse topological order: a needed node's inputs are visited after it. */
    for (int32_t k = n_nodes; k-- > 0;) {
        int32_t v = nodes[k];

        if (!need[v] || c->kept[v])
            continue;
        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++) {
            int32_t u = d->pred[e];

            if (c->kept[u])
                continue;
            if (c->block[u] != b)
                return REMAT_FAIL(REMAT_ERR_INVALID, "chain: node %d of block %d reads node "
                                  "%d of block %d, which is not kept", v, b, u, c->block[u]);
            need[u] = true;
        }
    }
    return REMAT_OK;
}

remat_status chain_lower(const remat_tgraph *tg, const struct dag *d, const struct chain *c,
                         remat_schedule **out)
{
    const remat_allocator *a = tgraph_al(tg);
    int32_t n = d->n, nb = c->n_blocks, *order = NULL, *start = NULL;
    bool *need = NULL;
    remat_schedule *s = NULL;
    remat_status st;

    *out = NULL;
    order = core_calloc(a, (size_t)n + 1, sizeof *order);
    start = core_calloc(a, (size_t)nb + 2, sizeof *start);
    need = core_calloc(a, (size_t)n + 1, sizeof *need);
    if (!order || !start || !need) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory lowering a plan");
        goto out;
    }
    /* Nodes grouped by block, topological inside each (counting sort). */
    for (int32_t v = 0; v < n; v++) {
        if (c->block[v] < 1 || c->block[v] > nb) {
            st = REMAT_FAIL(REMAT_ERR_INVALID, "chain: node %d has block %d of %d", v,
                            c->block[v], nb);
            goto out;
        }
        start[c->block[v] + 1]++;
    }
    for (int32_t b = 1; b <= nb; b++)
        start[b + 1] += start[b];
    for (int32_t v = 0; v < n; v++)
        order[start[c->block[v]]++] = v;
    for (int32_t b = nb; b >= 1; b--)
        start[b] = start[b - 1];
    start[1] = 0;
    start[nb + 1] = n;

    if ((st = schedule_new(a, &s)))
        goto out;
    for (int32_t k = 0; k < n; k++)
        if ((st = schedule_push(s, REMAT_STEP_FWD, d->op[order[k]])))
            goto out;
    for (int32_t b = nb; b >= 1; b--) {
        const int32_t *nodes = order + start[b];
        int32_t m = start[b + 1] - start[b];

        if ((st = mark_needed(tg, d, c, b, nodes, m, need)))
            goto out;
        for (int32_t k = 0; k < m; k++)
            if (need[nodes[k]] && !c->kept[nodes[k]] &&
                (st = schedule_push(s, REMAT_STEP_FWD, d->op[nodes[k]])))
                goto out;
        for (int32_t k = m; k-- > 0;)
            if (tg->ops[d->op[nodes[k]]].has_bwd &&
                (st = schedule_push(s, REMAT_STEP_BWD, d->op[nodes[k]])))
                goto out;
    }
    st = schedule_liveness(tg, s, out);
out:
    remat_schedule_free(s);
    core_free(a, order, sizeof *order * ((size_t)n + 1));
    core_free(a, start, sizeof *start * ((size_t)nb + 2));
    core_free(a, need, sizeof *need * ((size_t)n + 1));
    return st;
}
