/*
 * algos.c - the kernels' table a backend fills (which algorithms each op's forward and
 * backward can run, fastest first, and the scratch each takes) and its queries; the
 * planners choose from it (plan/algos.c), the executor runs what the schedule names.
 */
#include "sched/schedule.h"

remat_status algos_push(remat_algos *a, int32_t id, size_t scratch)
{
    const remat_allocator *al = a->al.fn ? &a->al : NULL;

    if (a->n == a->cap) {
        int32_t cap = a->cap ? 2 * a->cap : 256;
        int32_t *ids = core_realloc(al, a->id, sizeof *ids * (size_t)a->cap,
                                    sizeof *ids * (size_t)cap);
        size_t *sc;

        if (!ids)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory listing the kernels");
        a->id = ids;
        sc = core_realloc(al, a->scratch, sizeof *sc * (size_t)a->cap, sizeof *sc * (size_t)cap);
        if (!sc)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory listing the kernels");
        a->scratch = sc;
        a->cap = cap;
    }
    a->id[a->n] = id;
    a->scratch[a->n++] = scratch;
    return REMAT_OK;
}

void remat_algos_free(remat_algos *a)
{
    remat_allocator al;
    const remat_allocator *p;

    if (!a)
        return;
    al = a->al;
    p = al.fn ? &al : NULL;
    core_free(p, a->first, sizeof *a->first * (2 * (size_t)a->n_ops + 1));
    core_free(p, a->id, sizeof *a->id * (size_t)a->cap);
    core_free(p, a->scratch, sizeof *a->scratch * (size_t)a->cap);
    core_free(p, a, sizeof *a);
}

const char *remat_algos_name(const remat_algos *a, int32_t id)
{
    return a && a->name && id >= 0 ? a->name(id) : "?";
}

int32_t remat_algos_choices(const remat_algos *a, int32_t op, bool backward, int32_t *ids,
                            size_t *scratch, int32_t max)
{
    int32_t k0, n;

    if (!a || op < 0 || op >= a->n_ops)
        return 0;
    k0 = a->first[2 * op + backward];
    n = a->first[2 * op + backward + 1] - k0;
    for (int32_t k = 0; k < n && k < max; k++) {
        if (ids)
            ids[k] = a->id[k0 + k];
        if (scratch)
            scratch[k] = a->scratch[k0 + k];
    }
    return n;
}

int32_t remat_schedule_step_algo(const remat_schedule *s, size_t i, size_t *scratch)
{
    if (scratch)
        *scratch = s && s->algo && i < s->n ? s->scratch[i] : 0;
    return s && s->algo && i < s->n ? s->algo[i] : -1;
}
