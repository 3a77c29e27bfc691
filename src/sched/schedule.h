/*
 * schedule.h - the schedule: a flat array of steps (FWD op, BWD op, FREE buffer, ...),
 * what each step touches, and the liveness pass that places every FREE right after the
 * last step that uses the buffer.
 */
#ifndef REMAT_SCHEDULE_H
#define REMAT_SCHEDULE_H

#include "graph/tgraph.h"

/* Every buffer instance's offset and size in the arena are multiples of this. */
#define ARENA_ALIGN 64

struct remat_schedule {
    remat_allocator al;
    remat_step *steps;
    size_t n, cap;
    bool file_order;    /* replays a dump's record order: checked leniently (sim.c) */
    /* The device arena's limit in bytes, 0 for none: where the packed offsets end above
     * it, the layout moves live instances to keep within it (mem/layout.h); remat_plan
     * sets it to what the budget leaves the arena. */
    size_t arena_cap;
    /* remat_plan laid it out under a budget (layout_build_held: its arena held near the
     * load, past PACK_QUICK_MIN instances by the packer's greedy passes alone), and so
     * does every layout of it (layout_build), the trainer's included: the arena trained
     * in is the one planned. */
    bool held;
    /* The kernels' algorithms (algos_choose): per step the algorithm and its scratch
     * (-1 and 0 where none), for the backend named; NULL until chosen. */
    int32_t *algo;
    size_t *scratch;
    remat_backend_kind backend;
};

/* A backend's kernels (remat.h, remat_train_algos): the choices of op o's pass p
 * (0 forward, 1 backward) are id[k] and scratch[k] for k in [first[2o+p],
 * first[2o+p+1]), fastest first. */
struct remat_algos {
    remat_allocator al;
    remat_backend_kind backend;
    int32_t n_ops;
    int32_t *first;         /* 2 n_ops + 1 */
    int32_t *id;
    size_t *scratch;
    int32_t n, cap;
    const char *(*name)(int32_t id);
};

#define ALGO_MAX_IDS 160 /* a backend's algorithm ids are below this */

/* Appends a choice of op o's pass (in order: every pass of op 0 first, ...); the caller
 * sets first[]. */
remat_status algos_push(remat_algos *a, int32_t id, size_t scratch);

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
remat_status schedule_liveness(const remat_tgraph *tg, const remat_schedule *in,
                           remat_schedule **out);

#endif
