/*
 * relocate.h - an arena within a given size by moving live buffers: where no fixed
 * offsets pack a schedule's instances into the bytes it may have (pack.h ends above
 * them), a sweep over the steps places each instance when it is allocated and, when no
 * gap holds it, moves live instances out of its way (a copy inside the arena, done
 * before the step runs), or slides them down against each other as a last resort.
 * The moves are part of the layout: the executor replays them, the plan counts their
 * bytes.
 */
#ifndef REMAT_RELOCATE_H
#define REMAT_RELOCATE_H

#include "mem/pack.h"

/* One move, applied before step `step` runs, in the order listed: the live instance
 * inst goes from offset `from` to `to` (bytes: its size). The regions may overlap (a
 * slide down): the copy must behave as memmove. waits: the instance is pinned then, and
 * the executor first waits for its copy to or from the host tier. */
struct move {
    size_t step;
    size_t inst;
    size_t from, to;
    size_t bytes;
    bool waits;
};

/* When an instance is pinned: at a boundary t (before step t) with lo[k] < t <= hi[k]
 * for k = 0, 1 (lo = hi: no range), an asynchronous copy reads or writes it; moving it
 * then means waiting for that copy first. */
struct pin {
    size_t lo[2], hi[2];
};

struct moves {
    struct move *m;
    size_t n, cap;
    size_t bytes; /* their sum */
    size_t waits; /* moves that wait for a copy first */
};

/*
 * Offsets for n instances (in allocation order: first non-decreasing) within cap bytes
 * (a multiple of align), with moves where needed; pins: one per instance, or NULL.
 * REMAT_ERR_INFEASIBLE (no message) when the sweep cannot keep within cap (only when
 * more bytes than cap are live at one step); then inst
 * and mv are as they were. On success each instance's offset is where it is allocated,
 * mv holds the moves (freed with moves_fini) and *end the highest end reached.
 * Deterministic.
 */
remat_status layout_relocate(const remat_allocator *al, struct instance *inst, size_t n,
                             size_t align, size_t cap, const struct pin *pins,
                             struct moves *mv, size_t *end);
void moves_fini(const remat_allocator *al, struct moves *mv);

/* True when the instances with their moves never overlap while live, every move takes
 * a live instance from where it is, no copy overwrites another live instance's bytes,
 * a pinned instance's move says it waits, and nothing passes cap; a check for the
 * tests (a sweep, independent of layout_relocate's bookkeeping). */
bool layout_moves_check(const struct instance *inst, size_t n, const struct moves *mv,
                        const struct pin *pins, size_t cap);

#endif
