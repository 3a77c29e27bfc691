/*
 * dag.h - the graph the planners reason about: one node per op of the training graph
 * (its owned outputs are the node's value: M = their bytes, T = their cost), an edge
 * u -> w when w's forward reads an output of u, nodes numbered in a topological order.
 *
 * Sizes: up to ~10^4 nodes (the 2,500-layer ResNet); edges in CSR arrays.
 */
#ifndef REMAT_DAG_H
#define REMAT_DAG_H

#include "core/bitset.h"
#include "graph/tgraph.h"

struct dag {
    int32_t n;
    int words;                 /* bitset words for n nodes */
    int32_t *op;               /* node -> op id */
    int32_t *node;             /* op id -> node */
    size_t *m;                 /* M of each node */
    double *t;                 /* T of each node */
    int32_t *pred_at, *pred;   /* CSR: preds of v are pred[pred_at[v] .. pred_at[v+1]) */
    int32_t *succ_at, *succ;
    size_t n_edges;
    const remat_allocator *al;
};

remat_status dag_build(const remat_tgraph *tg, struct dag *d);
void dag_fini(struct dag *d);

/* A chain of lower sets, as the block index of every node (1..n_blocks, in the order
 * the blocks are computed) plus, per node, whether it is kept after the forward pass
 * (in the boundary of its block's lower set). */
struct chain {
    int32_t n_blocks;
    int32_t *block;            /* node -> block */
    bool *kept;                /* node -> in ∂(L_i) of its block */
};

/* Lowers a chain to a schedule: forward block by block, then for each block from the
 * last: recompute its non-kept nodes that its backward needs, run its backward in
 * reverse topological order; then the liveness pass. */
remat_status chain_lower(const remat_tgraph *tg, const struct dag *d, const struct chain *c,
                         remat_schedule **out);

#endif
