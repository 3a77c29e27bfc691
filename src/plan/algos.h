/*
 * algos.h - the kernels' part of planning (algos.c) and the gradient-order pass
 * (canonical.c): the two passes every planner's schedule goes through after its
 * decisions.
 */
#ifndef REMAT_PLAN_ALGOS_H
#define REMAT_PLAN_ALGOS_H

#include "sched/schedule.h"

/*
 * The kernels' part of planning: the scratch to keep free while planning (the largest,
 * over the ops' passes, of the least scratch among the choices that conv_algo allows),
 * and, once the schedule is made, the choice per op and pass: the fastest allowed one
 * whose scratch fits in cap minus the live bytes at every step that runs it. cap: the
 * activation budget (SIZE_MAX: none; 0: the least peak this schedule can have, each
 * step with its least scratch). Fills s->algo and s->scratch. *fastest and
 * *choices count the passes with more than one choice and those given their fastest.
 */
enum { ALGO_FIT = -1, ALGO_FASTEST = -2 }; /* force: the rules besides an algorithm id */
remat_status algos_allowed(const remat_algos *a, const char *conv_algo, int32_t *force);
size_t algos_reserve(const remat_algos *a, int32_t force);
remat_status algos_choose(const remat_tgraph *tg, const remat_algos *a, int32_t force,
                          size_t cap, remat_schedule *s, int32_t *choices, int32_t *fastest);

/* Delays backward steps so that the writers of every gradient with three or more
 * writers run in descending op id in every plan (the same bits whatever the plan). */
remat_status plan_canonical_grads(const remat_tgraph *tg, const remat_schedule *in,
                                  remat_schedule **out);

#endif
