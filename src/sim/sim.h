/*
 * sim.h - what the simulator gives the layers above it beyond remat.h's results: every
 * buffer instance of a schedule's walk, the one definition of the schedule's memory
 * that the layout packs and the executor replays.
 */
#ifndef REMAT_SIM_H
#define REMAT_SIM_H

#include "mem/pack.h"
#include "sched/schedule.h"

/*
 * The instances of a valid schedule, in allocation order, offsets 0. Device tier: a
 * FWD's outputs and a BWD's first write of a gradient (a gradient written again stays
 * one instance), a PREFETCH's value, each from its step to the FREE that releases it;
 * a FWD or BWD whose kernel takes scratch (the schedule's choice) gets an instance of
 * buffer -1 for its step alone, after the step's own. Host tier: from an OFFLOAD to
 * the WAIT that ends the PREFETCH bringing the value back. The peaks are the simulator's
 * (activation_peak_bytes and host_peak_bytes of remat_sim_result).
 */
struct sim_instances {
    struct instance *dev, *host;
    size_t n_dev, n_host, cap_dev, cap_host;
    size_t peak_bytes, host_peak_bytes;
};

/* The instances of s (REMAT_ERR_INVALID for an invalid schedule or a buffer never
 * freed); free them with sim_instances_fini. */
remat_status sim_instances(const remat_tgraph *tg, const remat_schedule *s,
                           struct sim_instances *out);
void sim_instances_fini(const remat_tgraph *tg, struct sim_instances *in);

/*
 * The simulated time of s where it has no host steps (then the time of its compute at
 * o's flops, each FWD and BWD step's FLOPs / flops added in order as the walk adds them:
 * remat_sim_run_opts's total_seconds to the bit) without the walk's checks; a schedule
 * with copies, replayed in file order or naming a bad op gets the walk itself.
 */
remat_status sim_seconds_alone(const remat_tgraph *tg, const remat_schedule *s,
                               const remat_sim_opts *o, double *seconds);

/* step_touch's answers for every op's FWD and BWD (an op without a backward: none), for
 * walks of schedules much longer than the graph: slot 2 op + (BWD), its reads at
 * buf[off[q] .. off[q] + n_reads[q]) and its makes from there to off[q + 1]. */
struct touch_lists {
    int32_t *off, *n_reads, *buf;
    size_t n_slots, n_buf;
};

remat_status touch_lists_build(const remat_tgraph *tg, struct touch_lists *t);
void touch_lists_fini(const remat_tgraph *tg, struct touch_lists *t);

/* step (FWD or BWD)'s reads and makes, from t. */
static inline void touch_get(const struct touch_lists *t, remat_step step, const int32_t **reads,
                             int32_t *n_reads, const int32_t **makes, int32_t *n_makes)
{
    size_t q = 2 * (size_t)step.id + (step.kind == REMAT_STEP_BWD);

    *reads = t->buf + t->off[q];
    *n_reads = t->n_reads[q];
    *makes = *reads + *n_reads;
    *n_makes = t->off[q + 1] - t->off[q] - *n_reads;
}

#endif
