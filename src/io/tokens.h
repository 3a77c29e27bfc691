/*
 * tokens.h - what a trainer does with a graph's int32 values (io/tokens.c), shared by the
 * public list (remat_graph_token_values) and the executor's batch loading.
 */
#ifndef REMAT_IO_TOKENS_H
#define REMAT_IO_TOKENS_H

#include "graph/graph.h"

/* The role of int32 value v of g, the bound on its entries (0 .. *vocab - 1; 2 when no op
 * reads it; for positions the size of the last axis) and the op giving that bound (-1
 * when none). Scans every op: O(ops). */
remat_token_role tokens_role(const remat_graph *g, int32_t v, int64_t *vocab, int32_t *reader);

/* Checks the entries of remat_trainer_step_tokens against their values' vocabularies:
 * REMAT_ERR_ARG naming the value, the index and the reading op for the first outside. */
remat_status tokens_check(const remat_graph *g, const int32_t *const *tokens);

#endif
