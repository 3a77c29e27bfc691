/*
 * dist.h - the remat command under an MPI launcher (mpirun -np N remat train ...):
 * MPI started only when the environment says a launcher started this process, the
 * trainer's comm (remat_comm: moves bytes, no arithmetic) over MPI_COMM_WORLD, and the
 * command's own agreements (setup failures, losses, checksums). Built with MPI when
 * mpi.h is found (Makefile: REMAT_MPI); without it a launched remat says so and stops.
 * The library (libremat) never needs MPI: only the remat program links it.
 */
#ifndef REMAT_DIST_H
#define REMAT_DIST_H

#include "remat.h"

#include <stdbool.h>

struct cli_dist {
    remat_comm comm;   /* rank 0 of 1 when not launched by MPI */
    bool started;      /* MPI_Init was called (MPI_Finalize is due) */
    struct mpi_reqs *mpi; /* mpi.c: the reduction's communicators and transfers */
};

/* True when an MPI launcher started this process (Open MPI, PMI or PMIx variables). */
bool dist_launched(void);
/* Starts MPI when launched (else rank 0 of 1). 0, or an exit code after printing why
 * not (a launched remat built without MPI). */
int dist_begin(struct cli_dist *d);
void dist_end(struct cli_dist *d);
/* Every rank's exit code rc: the lowest rank whose rc is not 0 (*their its rc), or -1. */
int dist_agree_rc(struct cli_dist *d, int rc, int *their);
/* The sum of every rank's v, in rank order (the same on every rank). */
double dist_sum(struct cli_dist *d, double v);
/* Every rank's v, into out[0 .. size). */
void dist_gather_u64(struct cli_dist *d, uint64_t v, uint64_t *out);
/* --bucket: bytes with a unit, at least one float's 4, into o->bucket_bytes; false
 * after printing why not. */
bool dist_parse_bucket(const char *opt, const char *s, remat_tgraph_opts *o);
/* Stops every rank at once with exit code rc (after this one printed why). */
void dist_abort(struct cli_dist *d, int rc);

#endif
