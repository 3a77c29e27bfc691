/*
 * dp_pipe.h - a beam run on two threads, as a pipeline over its sets (dp_pipe.c), for
 * kusumoto.c's dp_run. Private to src/plan.
 */
#ifndef REMAT_DP_PIPE_H
#define REMAT_DP_PIPE_H

#include "plan/dp_relax.h"

struct dp_pipe;

/* The pipeline of p's beam run whose candidates a holds (its bound and per-set bounds);
 * NULL where the run stays on one thread (one core or a caller's allocator, no kept
 * pairs, no team, or out of memory). The caller has room in p's states for the whole run
 * (the helper reads them as they are written). */
struct dp_pipe *dp_pipe_new(struct dp *p, const struct dp_acc *a);
void dp_pipe_free(struct dp_pipe *q); /* NULL: nothing */
/* The team to run the caller's sets (part 0) and dp_pipe_help (part 1) on. */
core_team *dp_pipe_team(const struct dp_pipe *q);
/* The helper's part, until the sets are done or dp_pipe_stop. */
void dp_pipe_help(struct dp_pipe *q);
/* The first set of row j whose pairs the caller relaxes (those before are the helper's);
 * 0: every one. */
int32_t dp_pipe_from(const struct dp_pipe *q, int32_t j);
/* Row j's states from the helper's part into a (after the caller's own pairs); false
 * where the caller must work the row out alone instead (a untouched). */
bool dp_pipe_merge(struct dp_pipe *q, struct dp_acc *a, int32_t j);
/* The caller has finished set j, and its bound is ub. */
void dp_pipe_publish(struct dp_pipe *q, int32_t j, int32_t ub);
/* The caller's sets are done (or failed): the helper returns. */
void dp_pipe_stop(struct dp_pipe *q);
/* The rows whose pairs the helper shared, and of those the ones the caller worked out
 * alone after all (dp_pipe_merge false). */
void dp_pipe_counts(const struct dp_pipe *q, int32_t *piped, int32_t *redone);

#endif
