/*
 * layout.c - instances from a schedule walk, then offsets by decreasing size.
 *
 * Work: O(k log k + k·c) for k instances, where c is the number of placed instances
 * whose lifetime overlaps the one being placed (found by scanning the placed list);
 * about 10^3 instances for ResNet-50, 10^4-10^5 for the deepest networks.
 */
#include "mem/layout.h"

#include <stdlib.h>
#include <string.h>

void layout_fini(struct layout *lay)
{
    core_free(lay->al, lay->inst, sizeof *lay->inst * (lay->cap_inst + 1));
    core_free(lay->al, lay->host, sizeof *lay->host * (lay->cap_host + 1));
    memset(lay, 0, sizeof *lay);
}

/* Walks the schedule, recording each instance's lifetime. */
static remat_status instances(const remat_tgraph *tg, const remat_schedule *s,
                              struct layout *lay)
{
    const remat_allocator *a = lay->al;
    int32_t nb = 2 * tg->n_values, m = step_max_touch(tg), nr, nm;
    int64_t *open = core_calloc(a, (size_t)nb, sizeof *open); /* instance index, -1 none */
    int32_t *reads = core_calloc(a, (size_t)m, sizeof *reads);
    int32_t *makes = core_calloc(a, (size_t)m, sizeof *makes);
    size_t cap = 0, live = 0;
    remat_status st = REMAT_OK;

    for (size_t i = 0; i < s->n; i++)
        cap += s->steps[i].kind == REMAT_STEP_FREE || (s->scratch && s->scratch[i] > 0);
    lay->inst = core_calloc(a, cap + 1, sizeof *lay->inst);
    lay->cap_inst = cap;
    if (!open || !reads || !makes || !lay->inst) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory laying out the arena");
        goto out;
    }
    for (int32_t b = 0; b < nb; b++)
        open[b] = -1;
    for (size_t i = 0; i < s->n && !st; i++) {
        remat_step step = s->steps[i];

        if (step.kind == REMAT_STEP_FREE) {
            int64_t k = step.id >= 0 && step.id < nb ? open[step.id] : -1;

            if (k < 0) {
                st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: step %zu frees a buffer that is "
                                "not live", i);
                break;
            }
            lay->inst[k].last = i;
            live -= lay->inst[k].bytes;
            open[step.id] = -1;
            continue;
        }
        if (step.kind == REMAT_STEP_PREFETCH) {
            nm = 1;
            makes[0] = step.id;
        } else if (step.kind == REMAT_STEP_FWD || step.kind == REMAT_STEP_BWD) {
            step_touch(tg, step, reads, &nr, makes, &nm);
        } else {
            continue;
        }
        for (int32_t j = 0; j < nm; j++) {
            int32_t b = makes[j];

            if (b < 0 || b >= nb) {
                st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: step %zu: bad buffer id", i);
                break;
            }
            if (open[b] >= 0)
                continue; /* a gradient written again */
            if (lay->n_inst == cap) {
                st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: a buffer is never freed");
                break;
            }
            lay->inst[lay->n_inst] = (struct instance){b, i, i, tgraph_buf_bytes(tg, b), 0};
            live += lay->inst[lay->n_inst].bytes;
            open[b] = (int64_t)lay->n_inst++;
        }
        if (live > lay->peak_bytes)
            lay->peak_bytes = live;
        if (!st && s->scratch && s->scratch[i] > 0) { /* the kernel's, for this step only */
            if (lay->n_inst == cap) {
                st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: a buffer is never freed");
                break;
            }
            lay->inst[lay->n_inst++] = (struct instance){-1, i, i, s->scratch[i], 0};
            if (live + s->scratch[i] > lay->peak_bytes)
                lay->peak_bytes = live + s->scratch[i];
        }
    }
    for (int32_t b = 0; b < nb && !st; b++)
        if (open[b] >= 0)
            st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: buffer %d is never freed", b);
out:
    core_free(a, open, sizeof *open * (size_t)nb);
    core_free(a, reads, sizeof *reads * (size_t)m);
    core_free(a, makes, sizeof *makes * (size_t)m);
    return st;
}

/* The host tier's instances: OFFLOAD to the WAIT that ends the PREFETCH. */
static remat_status host_instances(const remat_tgraph *tg, const remat_schedule *s,
                                   struct layout *lay)
{
    const remat_allocator *a = lay->al;
    int32_t nb = 2 * tg->n_values;
    int64_t *open = core_calloc(a, (size_t)nb, sizeof *open);
    bool *back = core_calloc(a, (size_t)nb, sizeof *back); /* its PREFETCH has run */
    size_t n = 0, live = 0;
    remat_status st = REMAT_OK;

    for (size_t i = 0; i < s->n; i++)
        n += s->steps[i].kind == REMAT_STEP_OFFLOAD;
    lay->host = core_calloc(a, n + 1, sizeof *lay->host);
    lay->cap_host = n;
    if (!open || !back || !lay->host) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory laying out the host tier");
        goto out;
    }
    for (int32_t b = 0; b < nb; b++)
        open[b] = -1;
    for (size_t i = 0; i < s->n && !st; i++) {
        remat_step step = s->steps[i];
        int32_t b = step.id;

        if (step.kind < REMAT_STEP_OFFLOAD || step.kind > REMAT_STEP_WAIT)
            continue;
        if (b < 0 || b >= nb) {
            st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: step %zu: bad buffer id", i);
        } else if (step.kind == REMAT_STEP_OFFLOAD) {
            if (open[b] >= 0) {
                st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: step %zu offloads a buffer "
                                "already on the host tier", i);
                break;
            }
            lay->host[lay->n_host] = (struct instance){b, i, i, tgraph_buf_bytes(tg, b), 0};
            live += lay->host[lay->n_host].bytes;
            open[b] = (int64_t)lay->n_host++;
            back[b] = false;
        } else if (open[b] < 0) {
            st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: step %zu: a copy of a buffer not "
                            "on the host tier", i);
        } else if (step.kind == REMAT_STEP_PREFETCH) {
            back[b] = true;
        } else if (back[b]) { /* the WAIT that ends the prefetch */
            lay->host[open[b]].last = i;
            live -= lay->host[open[b]].bytes;
            open[b] = -1;
        }
        if (live > lay->host_peak_bytes)
            lay->host_peak_bytes = live;
    }
    for (int32_t b = 0; b < nb && !st; b++)
        if (open[b] >= 0)
            st = REMAT_FAIL(REMAT_ERR_INVALID, "layout: buffer %d never comes back from the "
                            "host tier", b);
out:
    core_free(a, open, sizeof *open * (size_t)nb);
    core_free(a, back, sizeof *back * (size_t)nb);
    return st;
}

static const struct instance *sort_inst;

static int by_size(const void *x, const void *y)
{
    const struct instance *a = &sort_inst[*(const size_t *)x];
    const struct instance *b = &sort_inst[*(const size_t *)y];

    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->buf < b->buf ? -1 : a->buf > b->buf;
}

static int by_offset(const void *x, const void *y)
{
    const struct instance *a = *(const struct instance *const *)x;
    const struct instance *b = *(const struct instance *const *)y;

    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static bool overlap_time(const struct instance *a, const struct instance *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* Offsets for n instances: by decreasing size, each at the lowest gap among the placed
 * instances whose lifetimes overlap it. *end gets the highest end. */
static remat_status place(const remat_allocator *al, struct instance *inst, size_t n,
                          size_t align, size_t *end)
{
    size_t *order = core_calloc(al, n + 1, sizeof *order), n_placed = 0;
    const struct instance **placed = core_calloc(al, n + 1, sizeof *placed);
    const struct instance **conf = core_calloc(al, n + 1, sizeof *conf);
    remat_status st = REMAT_OK;

    *end = 0;
    if (!order || !placed || !conf) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory laying out the arena");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    sort_inst = inst;
    qsort(order, n, sizeof *order, by_size);
    for (size_t k = 0; k < n; k++) {
        struct instance *in = &inst[order[k]];
        size_t n_conf = 0, off = 0, bytes = core_align_up(in->bytes, align);

        for (size_t j = 0; j < n_placed; j++)
            if (overlap_time(in, placed[j]))
                conf[n_conf++] = placed[j];
        qsort(conf, n_conf, sizeof *conf, by_offset);
        /* The lowest gap between conflicting instances that holds this one. */
        for (size_t j = 0; j < n_conf; j++) {
            size_t e = conf[j]->offset + core_align_up(conf[j]->bytes, align);

            if (conf[j]->offset >= off + bytes)
                break;
            if (e > off)
                off = e;
        }
        in->offset = off;
        if (off + bytes > *end)
            *end = off + bytes;
        placed[n_placed++] = in;
    }
out:
    core_free(al, order, sizeof *order * (n + 1));
    core_free(al, placed, sizeof *placed * (n + 1));
    core_free(al, conf, sizeof *conf * (n + 1));
    return st;
}

remat_status layout_build(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                          struct layout *lay)
{
    remat_status st;

    memset(lay, 0, sizeof *lay);
    lay->al = tgraph_al(tg);
    lay->align = align ? align : 64;
    if ((st = instances(tg, s, lay)) || (st = host_instances(tg, s, lay)) ||
        (st = place(lay->al, lay->inst, lay->n_inst, lay->align, &lay->arena_bytes)) ||
        (st = place(lay->al, lay->host, lay->n_host, lay->align, &lay->host_bytes)))
        layout_fini(lay);
    return st;
}

static bool disjoint(const struct instance *inst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const struct instance *a = &inst[i], *b = &inst[j];

            if (overlap_time(a, b) && a->bytes && b->bytes && a->offset < b->offset + b->bytes &&
                b->offset < a->offset + a->bytes)
                return false;
        }
    return true;
}

bool layout_check(const struct layout *lay)
{
    return disjoint(lay->inst, lay->n_inst) && disjoint(lay->host, lay->n_host);
}
