/*
 * algos.c - the backend object and the table of its kernels: every op's forward and
 * backward prepared dry with each algorithm the backend lists, the ones that run kept
 * with their scratch (remat_backend_algos, remat_train_algos).
 */
#include "exec/exec.h"
#include "sched/schedule.h"

#include <stdlib.h>

remat_status remat_backend_new(const remat_train_opts *o, remat_backend **out)
{
    remat_train_opts opts = o ? *o : remat_train_opts_default();
    const struct backend_ops *ops = NULL;
    remat_backend *b;
    remat_status st;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the backend");
    *out = NULL;
    if (opts.backend == REMAT_BACKEND_REF)
        ops = backend_ref();
    else if (opts.backend == REMAT_BACKEND_CPU)
        ops = backend_cpu();
    else if (opts.backend == REMAT_BACKEND_CUDA)
        ops = backend_cuda();
    if (!ops)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the %s backend is not in this build",
                          remat_backend_name(opts.backend));
    if (!(b = calloc(1, sizeof *b)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a backend");
    b->ops = ops;
    b->o = opts;
    if ((st = ops->create(&b->o, &b->ctx))) {
        free(b);
        return st;
    }
    *out = b;
    return REMAT_OK;
}

void remat_backend_free(remat_backend *b)
{
    if (!b)
        return;
    b->ops->destroy(b->ctx);
    free(b);
}

/* Lists in a the algorithms of every op's forward and backward that the backend can
 * run, with their scratch (all of them, or with first_only the fastest that runs). */
static remat_status list_algos(remat_trainer *t, bool first_only, remat_algos *a)
{
    const remat_tgraph *tg = t->tg;
    remat_status st = REMAT_OK;
    struct kop k;

    t->dry = true;
    for (int32_t o = 0; o < tg->n_ops && !st; o++)
        for (int pass = 0; pass < 2 && !st; pass++) {
            int32_t ids[KERNELS_MAX_ALGOS], n, n0 = a->n;

            a->first[2 * o + pass] = a->n;
            if (tg->ops[o].is_view || (pass && !tg->ops[o].has_bwd))
                continue;
            dry_kop(t, o, pass, &k);
            n = t->be->algos(t->ctx, &k, pass, ids);
            REMAT_ASSERT(n >= 1 && n <= KERNELS_MAX_ALGOS);
            for (int32_t j = 0; j < n && !st && !(first_only && a->n > n0); j++) {
                size_t need;

                k.algo = ids[j];
                st = t->be->prepare(t->ctx, &k, pass, &need);
                if (st == REMAT_ERR_UNSUPPORTED && (j + 1 < n || a->n > n0)) {
                    /* another may run it, or one listed before already does */
                    core_clear_error();
                    st = REMAT_OK;
                    continue;
                }
                if (!st)
                    st = algos_push(a, ids[j], need);
            }
            if (!st && a->n == n0)
                st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the %s backend cannot run the %s of "
                                "op %d (%s)", t->be->name, pass ? "backward" : "forward",
                                (int)o, tg->ops[o].type_name);
        }
    a->first[2 * tg->n_ops] = a->n;
    t->dry = false;
    return st;
}

/* A table for t's graph and backend (see list_algos). */
remat_status make_algos(remat_trainer *t, bool first_only, remat_algos **out)
{
    const remat_allocator *al = tgraph_al(t->tg);
    remat_algos *a = core_calloc(al, 1, sizeof *a);
    remat_status st;

    *out = NULL;
    if (!a)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory listing the kernels");
    if (al)
        a->al = *al;
    a->backend = t->o.backend;
    a->n_ops = t->tg->n_ops;
    a->name = t->be->algo_name;
    a->first = core_calloc(al, 2 * (size_t)a->n_ops + 1, sizeof *a->first);
    if (!a->first)
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory listing the kernels");
    else
        st = list_algos(t, first_only, a);
    if (st) {
        remat_algos_free(a);
        return st;
    }
    *out = a;
    return REMAT_OK;
}

remat_status remat_backend_algos(remat_backend *b, const remat_graph *g,
                                 const remat_tgraph *tg, remat_algos **out)
{
    remat_trainer *t = NULL;
    remat_status st;

    if (!b || !g || !tg || !out)
        return REMAT_FAIL(REMAT_ERR_ARG, "listing the kernels needs a backend, a graph, its "
                          "training graph and a place for the table");
    *out = NULL;
    if ((st = trainer_begin(b, g, tg, &b->o, &t)))
        return st;
    st = make_algos(t, false, out);
    remat_trainer_free(t);
    return st;
}

remat_status remat_train_algos(const remat_graph *g, const remat_tgraph *tg,
                               const remat_train_opts *o, remat_algos **out)
{
    remat_backend *b = NULL;
    remat_status st;

    if (!g || !tg || !out)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_train_algos needs a graph, its training graph "
                          "and a place for the table");
    *out = NULL;
    if ((st = remat_backend_new(o, &b)))
        return st;
    st = remat_backend_algos(b, g, tg, out);
    remat_backend_free(b);
    return st;
}
