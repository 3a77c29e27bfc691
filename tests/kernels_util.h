/*
 * kernels_util.h - for the training tests (test_train.c, test_cuda.c): `none`'s schedule
 * given the kernels another plan chose, so that the two can be compared bit for bit.
 */
#ifndef REMAT_TESTS_KERNELS_UTIL_H
#define REMAT_TESTS_KERNELS_UTIL_H

#include "harness.h"

#include "sched/schedule.h"

#include <stdlib.h>

/* none's schedule with the algorithm (and scratch) plan o chose for each op and pass. */
static inline remat_schedule *none_with_kernels_of(const remat_tgraph *tg,
                                                   const remat_schedule *o)
{
    remat_schedule *s = NULL;
    int32_t *algo = calloc(2 * (size_t)tg->n_ops, sizeof *algo);
    size_t *sc = calloc(2 * (size_t)tg->n_ops, sizeof *sc);

    REMAT_ASSERT_TEST(algo && sc && o->algo && remat_plan_none(tg, &s) == REMAT_OK);
    for (size_t i = 0; i < o->n; i++)
        if (o->algo[i] >= 0) {
            size_t j = 2 * (size_t)o->steps[i].id + (o->steps[i].kind == REMAT_STEP_BWD);

            algo[j] = o->algo[i];
            sc[j] = o->scratch[i];
        }
    s->algo = calloc(s->n, sizeof *s->algo);
    s->scratch = calloc(s->n, sizeof *s->scratch);
    REMAT_ASSERT_TEST(s->algo && s->scratch);
    for (size_t i = 0; i < s->n; i++) {
        remat_step t = s->steps[i];
        size_t j = 2 * (size_t)t.id + (t.kind == REMAT_STEP_BWD);
        bool kernel = (t.kind == REMAT_STEP_FWD || t.kind == REMAT_STEP_BWD) &&
                      !tg->ops[t.id].is_view;

        s->algo[i] = kernel ? algo[j] : -1;
        s->scratch[i] = kernel ? sc[j] : 0;
    }
    s->backend = o->backend;
    free(algo);
    free(sc);
    return s;
}

#endif
