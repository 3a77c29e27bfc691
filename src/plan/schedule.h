/*
 * schedule.h - the schedule: a flat array of steps (FWD op, BWD op, FREE buffer, ...),
 * what each step touches, and the liveness pass that places every FREE right after the
 * last step that uses the buffer.
 */
#ifndef REMAT_SCHEDULE_H
#define REMAT_SCHEDULE_H

#include "graph/tgraph.h"

struct remat_schedule {
    remat_allocator al;
    remat_step *steps;
    size_t n, cap;
    bool file_order;    /* replays a dump's record order: checked leniently (sim.c) */
};

remat_status schedule_new(const remat_allocator *a, remat_schedule **out);
remat_status schedule_push(remat_schedule *s, remat_step_kind kind, int32_t id);
remat_status schedule_copy(const remat_schedule *s, remat_schedule **out);

/*
 * The plan-controlled buffers a FWD or BWD step touches: reads[] (inputs it needs
 * live) and makes[] (buffers it allocates when they are not live: a FWD's outputs, a
 * BWD's input gradients, which it accumulates into). Each list holds distinct buffers.
 * The caller passes arrays of at least step_max_touch(tg) entries.
 */
int32_t step_max_touch(const remat_tgraph *tg);
/* The FLOPs a step computes: its op's forward or backward; 0 for the other kinds. */
double step_flops(const remat_tgraph *tg, remat_step st);
void step_touch(const remat_tgraph *tg, remat_step st, int32_t *reads, int32_t *n_reads,
                int32_t *makes, int32_t *n_makes);

/* Rewrites `in` with its FREE steps removed and one FREE placed right after the last
 * use of each buffer instance (a FWD of a live value starts a new instance). */
remat_status plan_liveness(const remat_tgraph *tg, const remat_schedule *in,
                           remat_schedule **out);

/* Delays backward steps so that the writers of every gradient with three or more
 * writers run in descending op id in every plan (the same bits whatever the plan). */
remat_status plan_canonical_grads(const remat_tgraph *tg, const remat_schedule *in,
                                  remat_schedule **out);

#endif
