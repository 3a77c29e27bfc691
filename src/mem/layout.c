/*
 * layout.c - the arena's and the host tier's instances of a schedule, as the simulator
 * records them (sim_instances), given their offsets (pack.c); their load, the most bytes
 * live at one step (layout_load).
 */
#include "mem/layout.h"
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>

void layout_fini(struct layout *lay)
{
    moves_fini(lay->al, &lay->moves);
    core_free(lay->al, lay->pins, sizeof *lay->pins * (lay->n_inst + 1));
    core_free(lay->al, lay->inst, sizeof *lay->inst * (lay->cap_inst + 1));
    core_free(lay->al, lay->host, sizeof *lay->host * (lay->cap_host + 1));
    memset(lay, 0, sizeof *lay);
}

static remat_status find_pins(const remat_schedule *s, struct layout *lay);

/* The instances of a schedule and their pins, not yet placed. */
static remat_status lay_instances(const remat_tgraph *tg, const remat_schedule *s,
                                  size_t align, struct layout *lay)
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
    if ((st = find_pins(s, lay)))
        layout_fini(lay);
    return st;
}

/* Packs the arena (and the host tier). Over PACK_QUICK_MIN instances a packing that
 * would end above give_up is left unfinished (layout_pack_within) and the instances are
 * placed with moves within cap instead (*held set), or where not even that holds them,
 * packed in full. */
static remat_status pack_all(struct layout *lay, size_t give_up, size_t cap, bool *held)
{
    remat_status st = layout_pack_within(lay->al, lay->inst, lay->n_inst, lay->align,
                                         give_up, &lay->arena_bytes);

    *held = false;
    if (st == REMAT_ERR_INFEASIBLE) {
        lay->arena_bytes = SIZE_MAX; /* nothing placed: layout_tighten places them */
        st = layout_tighten(lay, cap);
        *held = !st;
        if (st == REMAT_ERR_INFEASIBLE)
            st = layout_pack(lay->al, lay->inst, lay->n_inst, lay->align, &lay->arena_bytes);
    }
    if (!st)
        st = layout_pack(lay->al, lay->host, lay->n_host, lay->align, &lay->host_bytes);
    return st;
}

remat_status layout_build(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                          struct layout *lay)
{
    size_t cap = s->arena_cap ? s->arena_cap : SIZE_MAX, limit;
    bool held;
    remat_status st;

    if (s->held) /* as remat_plan laid it out (its arena_cap that one's limit) */
        return layout_build_held(tg, s, align, lay, &limit);
    if ((st = lay_instances(tg, s, align, lay)))
        return st;
    if ((st = pack_all(lay, cap, cap, &held)) ||
        (!held && lay->arena_bytes > cap && (st = layout_tighten(lay, cap)) &&
         st != REMAT_ERR_INFEASIBLE)) {
        layout_fini(lay);
        return st;
    }
    return REMAT_OK;
}

remat_status layout_build_held(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                               struct layout *lay, size_t *limit)
{
    size_t load, give_up;
    bool held;
    remat_status st = lay_instances(tg, s, align, lay);

    *limit = 0;
    if (st)
        return st;
    load = layout_load_bytes(lay);
    give_up = load + load / 64;
    *limit = (load + load / 100 + lay->align - 1) / lay->align * lay->align;
    if ((st = pack_all(lay, give_up, *limit, &held)))
        goto fail;
    if (!held && lay->arena_bytes <= give_up)
        *limit = 0;
    else if (!held && (st = layout_tighten(lay, *limit))) {
        if (st != REMAT_ERR_INFEASIBLE)
            goto fail;
        *limit = 0; /* the offsets as packed */
    }
    return REMAT_OK;
fail:
    *limit = 0;
    layout_fini(lay);
    return st;
}

/* The boundaries at which each instance may not move: from an OFFLOAD of its buffer to
 * the WAIT that ends it, and from the PREFETCH that made it to its WAIT. */
static remat_status find_pins(const remat_schedule *s, struct layout *lay)
{
    size_t n = lay->n_inst, next = 0, nb = 0;
    size_t *cur, *since;
    remat_status st = REMAT_OK;

    for (size_t i = 0; i < n; i++)
        nb = lay->inst[i].buf >= 0 && (size_t)lay->inst[i].buf + 1 > nb
                 ? (size_t)lay->inst[i].buf + 1 : nb;
    lay->pins = core_calloc(lay->al, n + 1, sizeof *lay->pins);
    cur = core_calloc(lay->al, 2 * nb + 1, sizeof *cur);
    if (!lay->pins || !cur) {
        core_free(lay->al, cur, sizeof *cur * (2 * nb + 1));
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory laying out");
    }
    since = cur + nb;
    for (size_t i = 0; i < s->n; i++) {
        const remat_step *p = &s->steps[i];
        size_t b = (size_t)p->id;

        for (; next < n && lay->inst[next].first == i; next++)
            if (lay->inst[next].buf >= 0)
                cur[lay->inst[next].buf] = next;
        if (p->kind == REMAT_STEP_OFFLOAD || p->kind == REMAT_STEP_PREFETCH) {
            since[b] = i;
        } else if (p->kind == REMAT_STEP_WAIT && b < nb) {
            struct pin *q = &lay->pins[cur[b]];
            int k = q->hi[0] > q->lo[0]; /* a second range, else the whole life */

            if (k && q->hi[1] > q->lo[1]) {
                q->lo[1] = 0;
                q->hi[1] = SIZE_MAX;
            } else {
                q->lo[k] = since[b];
                q->hi[k] = i;
            }
        }
    }
    core_free(lay->al, cur, sizeof *cur * (2 * nb + 1));
    return st;
}

size_t layout_load_bytes(const struct layout *lay)
{
    size_t load = 0;

    if (layout_load(lay->al, lay->inst, lay->n_inst, lay->align, &load))
        return lay->peak_bytes;
    return load;
}

remat_status layout_tighten(struct layout *lay, size_t cap)
{
    struct instance *copy;
    struct moves mv = {0};
    size_t end, bytes = sizeof *copy * (lay->n_inst + 1);
    remat_status st;

    if (lay->arena_bytes <= cap)
        return REMAT_OK;
    if (!(copy = core_calloc(lay->al, lay->n_inst + 1, sizeof *copy)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory laying out");
    memcpy(copy, lay->inst, sizeof *copy * lay->n_inst);
    st = layout_relocate(lay->al, copy, lay->n_inst, lay->align, cap, lay->pins, &mv, &end);
    if (!st) {
        memcpy(lay->inst, copy, sizeof *copy * lay->n_inst);
        moves_fini(lay->al, &lay->moves);
        lay->moves = mv;
        lay->arena_bytes = end;
    }
    core_free(lay->al, copy, bytes);
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
    return (lay->moves.n ? layout_moves_check(lay->inst, lay->n_inst, &lay->moves, lay->pins,
                                              lay->arena_bytes)
                         : disjoint(lay->inst, lay->n_inst)) &&
           disjoint(lay->host, lay->n_host);
}

/* A step and a size: an instance's start or end for layout_load's sweep. */
struct edge {
    size_t t, size;
};

static int edge_cmp(const void *a, const void *b)
{
    const struct edge *x = a, *y = b;

    return (x->t > y->t) - (x->t < y->t);
}

/* The packer's bound without the packer (pk_index builds its segment tree, 30 MB for
 * GPT-2-1000's 66,000 instances, only to read this from its root): a sweep over the
 * instances' first steps, adding those that start there and removing those that ended
 * before. */
remat_status layout_load(const remat_allocator *al, const struct instance *inst, size_t n,
                         size_t align, size_t *load)
{
    struct edge *st = core_alloc(al, sizeof *st * (2 * n + 1)), *en = st + n;
    size_t live = 0, best = 0, e = 0;

    if (!st)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    for (size_t i = 0; i < n; i++) {
        size_t size = core_align_up(inst[i].bytes, align);

        st[i] = (struct edge){inst[i].first, size};
        en[i] = (struct edge){inst[i].last, size};
    }
    qsort(st, n, sizeof *st, edge_cmp);
    qsort(en, n, sizeof *en, edge_cmp);
    for (size_t k = 0; k < n;) { /* at each distinct first step f: first <= f <= last */
        size_t f = st[k].t;

        for (; k < n && st[k].t == f; k++)
            live += st[k].size;
        for (; e < n && en[e].t < f; e++)
            live -= en[e].size; /* ended before f, so started before it too */
        best = live > best ? live : best;
    }
    core_free(al, st, sizeof *st * (2 * n + 1));
    *load = best;
    return REMAT_OK;
}
