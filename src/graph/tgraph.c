/*
 * tgraph.c - allocation, release and read-only queries of the training graph.
 */
#include "graph/tgraph.h"

#include <string.h>

remat_status tgraph_alloc(const remat_allocator *a, int32_t n_values, int32_t n_ops,
                          size_t n_ints, remat_tgraph **out)
{
    remat_tgraph *tg;

    *out = NULL;
    tg = core_calloc(a, 1, sizeof *tg);
    if (!tg)
        goto nomem;
    if (a)
        tg->al = *a;
    tg->values = core_calloc(a, (size_t)n_values, sizeof *tg->values);
    tg->ops = core_calloc(a, (size_t)n_ops, sizeof *tg->ops);
    tg->ints = core_calloc(a, n_ints, sizeof *tg->ints);
    tg->n_values = n_values;
    tg->n_ops = n_ops;
    tg->n_ints = n_ints;
    if (!tg->values || !tg->ops || !tg->ints) {
        remat_tgraph_free(tg);
        goto nomem;
    }
    *out = tg;
    return REMAT_OK;
nomem:
    return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a training graph of %d "
                      "values and %d ops", n_values, n_ops);
}

void remat_tgraph_free(remat_tgraph *tg)
{
    remat_allocator al;
    const remat_allocator *a;

    if (!tg)
        return;
    al = tg->al;
    a = al.fn ? &al : NULL;
    if (tg->values)
        for (int32_t i = 0; i < tg->n_values; i++)
            core_strfree(a, tg->values[i].name);
    if (tg->ops)
        for (int32_t i = 0; i < tg->n_ops; i++)
            core_strfree(a, tg->ops[i].type_name);
    core_free(a, tg->values, sizeof *tg->values * (size_t)tg->n_values);
    core_free(a, tg->ops, sizeof *tg->ops * (size_t)tg->n_ops);
    core_free(a, tg->ints, sizeof *tg->ints * tg->n_ints);
    core_free(a, tg, sizeof *tg);
}

void tgraph_finish(remat_tgraph *tg)
{
    tg->n_planned = 0;
    for (int32_t v = 0; v < tg->n_values; v++) {
        tg->values[v].n_grad_writers = 0;
        if (tgraph_is_planned(tg, v) && tg->values[v].buf == v)
            tg->n_planned++;
    }
    for (int32_t o = 0; o < tg->n_ops; o++) {
        const struct top *op = &tg->ops[o];

        if (!op->has_bwd)
            continue;
        for (int32_t i = 0; i < op->n_gout; i++)
            tg->values[tg->values[op->gout[i]].buf].n_grad_writers++;
    }
}

int32_t remat_tgraph_n_values(const remat_tgraph *tg)
{
    return tg->n_values;
}

int32_t remat_tgraph_n_planned(const remat_tgraph *tg)
{
    return tg->n_planned;
}

int32_t remat_tgraph_n_ops(const remat_tgraph *tg)
{
    return tg->n_ops;
}

int64_t remat_tgraph_n_params(const remat_tgraph *tg)
{
    return tg->n_params;
}

size_t remat_tgraph_resident_bytes(const remat_tgraph *tg)
{
    return tg->resident_bytes;
}

double remat_tgraph_forward_flops(const remat_tgraph *tg)
{
    return tg->forward_flops;
}

bool remat_tgraph_is_file_order(const remat_tgraph *tg)
{
    return tg->file_order;
}

const char *remat_buffer_name(const remat_tgraph *tg, int32_t buf, char *tmp, size_t n)
{
    if (!tg || buf < 0 || buf >= 2 * tg->n_values)
        snprintf(tmp, n, "?%d", buf);
    else if (buf < tg->n_values)
        snprintf(tmp, n, "%s", tg->values[buf].name ? tg->values[buf].name : "?");
    else
        snprintf(tmp, n, "grad(%s)", tg->values[buf - tg->n_values].name
                                       ? tg->values[buf - tg->n_values].name : "?");
    return tmp;
}
