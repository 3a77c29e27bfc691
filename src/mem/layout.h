/*
 * layout.h - offsets in one arena for every plan-controlled buffer instance of a
 * schedule, so that no two instances that are live at the same time overlap.
 *
 * An instance is one allocation of a buffer: from the step that allocates it (a FWD's
 * output, a BWD's first write of a gradient) to the FREE that releases it. A buffer
 * recomputed three times has three instances, which may sit at different offsets.
 * Offsets are assigned greedily by decreasing size, each at the lowest address that
 * does not collide with an already placed instance whose lifetime overlaps (best known
 * simple heuristic for this strip-packing problem); the arena's size is the highest end.
 * A PREFETCH allocates an instance like a FWD. A FWD or BWD whose kernel takes scratch
 * (the schedule's choice) gets an instance of buffer -1 living during that step only,
 * after the step's own. The host tier is laid out the same way:
 * a host instance lives from an OFFLOAD to the WAIT that ends the PREFETCH bringing the
 * value back.
 */
#ifndef REMAT_LAYOUT_H
#define REMAT_LAYOUT_H

#include "plan/schedule.h"

struct instance {
    int32_t buf;           /* -1: a step's scratch */
    size_t first, last;    /* steps: allocated at first, freed after last */
    size_t bytes;
    size_t offset;
};

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
    const remat_allocator *al;
};

/* Lays out a valid schedule (REMAT_ERR_INVALID if a step touches a dead buffer). */
remat_status layout_build(const remat_tgraph *tg, const remat_schedule *s, size_t align,
                          struct layout *lay);
void layout_fini(struct layout *lay);
/* True when no two instances with overlapping lifetimes overlap, in the arena and on
 * the host tier. */
bool layout_check(const struct layout *lay);

#endif
