/*
 * algos.c - the kernels' algorithms in a plan: what planning keeps free for them, and
 * the choice made once the schedule is known (the table itself: sched/algos.c).
 *
 * The choice is one per op and pass, not per step: a recomputed forward must give the
 * first forward's bits, and two algorithms round differently. For each op and pass it is
 * the fastest allowed algorithm whose scratch fits in cap - live(i) at every step i that
 * runs it, live(i) being the simulator's live bytes at the step (its inputs and outputs
 * included). Planning kept the largest least scratch free, so every step has a choice;
 * the peak with the scratch is at most cap.
 */
#include "plan/algos.h"

#include <string.h>

remat_status algos_allowed(const remat_algos *a, const char *conv_algo, int32_t *force)
{
    *force = -1;
    if (!conv_algo || !strcmp(conv_algo, "fit"))
        return REMAT_OK;
    char names[256] = "fit";
    size_t len = strlen(names);

    for (int32_t id = 0; a && a->name && id < ALGO_MAX_IDS; id++) {
        const char *nm = a->name(id);

        if (!strcmp(nm, conv_algo)) {
            *force = id;
            return REMAT_OK;
        }
        if (strcmp(nm, "?") && len + strlen(nm) + 3 < sizeof names) {
            memcpy(names + len, ", ", 2);
            memcpy(names + len + 2, nm, strlen(nm) + 1);
            len += strlen(nm) + 2;
        }
    }
    return REMAT_FAIL(REMAT_ERR_ARG, "the %s backend has no algorithm '%s' (it has: %s)",
                      remat_backend_name(a ? a->backend : REMAT_BACKEND_REF), conv_algo, names);
}

/* The choices of (op, pass) that force allows: all (ALGO_FIT), its fastest
 * (ALGO_FASTEST), or the forced one when the op has it. [*k0, *k1) in the table. */
static void allowed(const remat_algos *a, int32_t op, int pass, int32_t force, int32_t *k0,
                    int32_t *k1)
{
    *k0 = a->first[2 * op + pass];
    *k1 = a->first[2 * op + pass + 1];
    if (force == ALGO_FASTEST && *k1 > *k0)
        *k1 = *k0 + 1;
    if (force < 0)
        return;
    for (int32_t k = *k0; k < *k1; k++)
        if (a->id[k] == force) {
            *k0 = k;
            *k1 = k + 1;
            return;
        }
}

size_t algos_reserve(const remat_algos *a, int32_t force)
{
    size_t r = 0;

    for (int32_t o = 0; a && o < a->n_ops; o++)
        for (int pass = 0; pass < 2; pass++) {
            int32_t k0, k1;
            size_t least = SIZE_MAX;

            allowed(a, o, pass, force, &k0, &k1);
            for (int32_t k = k0; k < k1; k++)
                least = a->scratch[k] < least ? a->scratch[k] : least;
            if (k1 > k0 && least > r)
                r = least;
        }
    return r;
}

remat_status algos_choose(const remat_tgraph *tg, const remat_algos *a, int32_t force,
                          size_t cap, remat_schedule *s, int32_t *choices, int32_t *fastest)
{
    const remat_allocator *al = s->al.fn ? &s->al : NULL;
    size_t *live = NULL, *room = NULL, n2 = 2 * (size_t)tg->n_ops, ns = s->n ? s->n : 1;
    remat_status st = REMAT_OK;

    *choices = *fastest = 0;
    if (a->n_ops != tg->n_ops)
        return REMAT_FAIL(REMAT_ERR_ARG, "the kernels' table was made for another graph "
                          "(%d ops, this one has %d)", (int)a->n_ops, (int)tg->n_ops);
    REMAT_ASSERT(!s->algo);
    live = core_calloc(al, ns, sizeof *live);
    room = core_calloc(al, n2 + 1, sizeof *room);
    s->algo = core_calloc(al, ns, sizeof *s->algo);
    s->scratch = core_calloc(al, ns, sizeof *s->scratch);
    if (!live || !room || !s->algo || !s->scratch) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory choosing the kernels");
        goto out;
    }
    if ((st = remat_sim_timeline(tg, s, live, s->n)))
        goto out;
    if (cap == 0) { /* the least peak: each step with its least scratch */
        for (size_t i = 0; i < s->n; i++) {
            remat_step t = s->steps[i];
            int32_t k0, k1;
            size_t least = 0;

            if (t.kind == REMAT_STEP_FWD || t.kind == REMAT_STEP_BWD) {
                allowed(a, t.id, t.kind == REMAT_STEP_BWD, force, &k0, &k1);
                least = k1 > k0 ? SIZE_MAX : 0;
                for (int32_t k = k0; k < k1; k++)
                    least = a->scratch[k] < least ? a->scratch[k] : least;
            }
            cap = live[i] + least > cap ? live[i] + least : cap;
        }
    }
    /* the room every (op, pass) has at its tightest step */
    for (size_t i = 0; i < n2; i++)
        room[i] = cap;
    for (size_t i = 0; i < s->n; i++) {
        remat_step t = s->steps[i];
        size_t r, j;

        if (t.kind != REMAT_STEP_FWD && t.kind != REMAT_STEP_BWD)
            continue;
        j = 2 * (size_t)t.id + (t.kind == REMAT_STEP_BWD);
        r = cap > live[i] ? cap - live[i] : 0;
        room[j] = r < room[j] ? r : room[j];
    }
    for (size_t i = 0; i < s->n; i++) {
        remat_step t = s->steps[i];
        int32_t k0, k1, pick = -1, pass = t.kind == REMAT_STEP_BWD;

        s->algo[i] = -1;
        if (t.kind != REMAT_STEP_FWD && t.kind != REMAT_STEP_BWD)
            continue;
        allowed(a, t.id, pass, force, &k0, &k1);
        for (int32_t k = k0; k < k1 && pick < 0; k++)
            if (a->scratch[k] <= room[2 * (size_t)t.id + (size_t)pass])
                pick = k;
        for (int32_t k = k0; k < k1 && pick < 0; k++) /* none fits: the least (refused by
                                                         the caller's peak check) */
            if (pick < 0 || a->scratch[k] < a->scratch[pick])
                pick = k;
        if (pick < 0)
            continue; /* a view: no kernel */
        s->algo[i] = a->id[pick];
        s->scratch[i] = a->scratch[pick];
    }
    /* count per op and pass, at its first step (room[] is reused: 1 once counted) */
    memset(room, 0, sizeof *room * (n2 + 1));
    for (size_t i = 0; i < s->n; i++) {
        remat_step t = s->steps[i];
        size_t j = 2 * (size_t)t.id + (t.kind == REMAT_STEP_BWD);

        if ((t.kind != REMAT_STEP_FWD && t.kind != REMAT_STEP_BWD) || room[j] ||
            a->first[j + 1] - a->first[j] < 2)
            continue;
        room[j] = 1;
        (*choices)++;
        *fastest += s->algo[i] == a->id[a->first[j]];
    }
    s->backend = a->backend;
out:
    core_free(al, live, sizeof *live * ns);
    core_free(al, room, sizeof *room * (n2 + 1));
    if (st) {
        core_free(al, s->algo, sizeof *s->algo * ns);
        core_free(al, s->scratch, sizeof *s->scratch * ns);
        s->algo = NULL;
        s->scratch = NULL;
    }
    return st;
}
