/*
 * layout.c - the arena's and the host tier's instances of a schedule, as the simulator
 * records them (sim_instances), given their offsets (pack.c).
 */
#include "mem/layout.h"
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>

void layout_fini(struct layout *lay)
{
    core_free(lay->al, lay->inst, sizeof *lay->inst * (lay->cap_inst + 1));
    core_free(lay->al, lay->host, sizeof *lay->host * (lay->cap_host + 1));
    memset(lay, 0, sizeof *lay);
}

remat_status layout_build(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                          struct layout *lay)
{
    struct sim_instances in;
    remat_status st;

    memset(lay, 0, sizeof *lay);
    lay->al = tgraph_al(tg);
    lay->align = align ? align : 64;
    if ((st = sim_instances(tg, s, &in)))
        return st;
    lay->inst = in.dev;
    lay->n_inst = in.n_dev;
    lay->cap_inst = in.cap_dev;
    lay->host = in.host;
    lay->n_host = in.n_host;
    lay->cap_host = in.cap_host;
    lay->peak_bytes = in.peak_bytes;
    lay->host_peak_bytes = in.host_peak_bytes;
    if ((st = layout_pack(lay->al, lay->inst, lay->n_inst, lay->align, &lay->arena_bytes)) ||
        (st = layout_pack(lay->al, lay->host, lay->n_host, lay->align, &lay->host_bytes)))
        layout_fini(lay);
    return st;
}

double layout_ratio(const struct layout *lay)
{
    return lay->peak_bytes ? (double)lay->arena_bytes / (double)lay->peak_bytes : 1.0;
}

static bool disjoint(const struct instance *inst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const struct instance *a = &inst[i], *b = &inst[j];

            if (a->first <= b->last && b->first <= a->last && a->bytes && b->bytes &&
                a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes)
                return false;
        }
    return true;
}

bool layout_check(const struct layout *lay)
{
    return disjoint(lay->inst, lay->n_inst) && disjoint(lay->host, lay->n_host);
}
