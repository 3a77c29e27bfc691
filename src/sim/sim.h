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

#endif
