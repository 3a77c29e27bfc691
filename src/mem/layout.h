/*
 * layout.h - offsets in one arena for every plan-controlled buffer instance of a
 * schedule, so that no two instances that are live at the same time overlap, and the
 * host tier's the same way.
 *
 * The instances are the simulator's (sim/sim.h: one allocation of a buffer each, from
 * the step that allocates it to the FREE that releases it; a buffer recomputed three
 * times has three, which may sit at different offsets; a kernel's scratch lives during
 * its step); the layout gives them offsets (pack.h) and the executor replays them in
 * order. The arena's size is the highest end, at least the largest sum of aligned sizes
 * live at one step (layout_load), which it usually meets.
 */
#ifndef REMAT_LAYOUT_H
#define REMAT_LAYOUT_H

#include "mem/pack.h"
#include "mem/relocate.h"
#include "sched/schedule.h"


struct layout {
    struct instance *inst;  /* in allocation order */
    size_t n_inst, cap_inst;
    size_t arena_bytes;     /* the highest end of any instance */
    size_t peak_bytes;      /* the largest sum of live instances (the simulator's peak) */
    struct instance *host;  /* host-tier instances, in OFFLOAD order */
    size_t n_host, cap_host;
    size_t host_bytes;      /* the host tier's size */
    size_t host_peak_bytes; /* the largest sum of live host instances */
    size_t align;
    struct moves moves;     /* where the arena was held within the schedule's arena_cap
                               by moving live instances (relocate.h); none otherwise */
    struct pin *pins;       /* per instance, when an asynchronous copy holds it */
    const remat_allocator *al;
};

/* arena_bytes / peak_bytes (1 for an empty layout): the fragmentation. */
double layout_ratio(const struct layout *lay);

/* Lays out a valid schedule (REMAT_ERR_INVALID if a step touches a dead buffer). Where
 * the schedule has an arena_cap and the packed offsets end above it, live instances
 * move to keep within it (layout_tighten), when they can. A schedule remat_plan laid out
 * under a budget (held) is laid out as it was: layout_build_held. */
remat_status layout_build(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                          struct layout *lay);
/*
 * Lays out a valid schedule holding its arena near the load (layout_load_bytes): where
 * the packed offsets end more than 1/64 above it, instances move to keep within the
 * load plus 1%, rounded up to align (*limit, the arena_cap the schedule then needs; 0
 * when none is needed, or the moves cannot keep within it and the offsets stay as
 * packed). The schedule's own arena_cap is not read. Over PACK_QUICK_MIN instances the
 * packing stops once it passes load + 1/64 and the moves place every instance.
 */
remat_status layout_build_held(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                               struct layout *lay, size_t *limit);
/* Holds a built layout's arena within cap bytes by moving instances (none are moved when
 * the offsets already end within cap): REMAT_ERR_INFEASIBLE (no message) when it
 * cannot, the layout unchanged. */
remat_status layout_tighten(struct layout *lay, size_t cap);
/* The largest sum of aligned device instances live at one step: no arena is smaller. */
size_t layout_load_bytes(const struct layout *lay);
void layout_fini(struct layout *lay);
/* True when no two instances with overlapping lifetimes overlap, in the arena and on
 * the host tier. */
bool layout_check(const struct layout *lay);

#endif
