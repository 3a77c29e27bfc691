/*
 * exec.h - the trainer's state, shared by the executor (exec.c) and the parameter code
 * (params.c: initialisation, SGD, checksum, files).
 */
#ifndef REMAT_EXEC_H
#define REMAT_EXEC_H

#include "core/rss.h"
#include "exec/backend.h"
#include "graph/tgraph.h"
#include "mem/layout.h"

/* A backend's functions, its context and the options it was made with. */
struct remat_backend {
    const struct backend_ops *ops;
    void *ctx;
    remat_train_opts o;
};

struct remat_trainer {
    const remat_graph *g;
    const remat_tgraph *tg;
    const remat_schedule *s;  /* the schedule run: the caller's, or own */
    remat_schedule *own;      /* the caller's with the kernels chosen, when it had none */
    remat_train_opts o;
    remat_backend *backend;   /* the caller's, or own_backend */
    bool own_backend;
    const struct backend_ops *be; /* backend->ops and ->ctx */
    void *ctx;
    struct layout lay;
    char *arena;
    /* Resident storage: one block holding every parameter, then their gradients, then
     * momentum, then inputs, labels and batch-norm running statistics. */
    float *block;
    size_t block_floats;
    size_t n_param_floats;
    float **vdata;            /* per value: resident storage, NULL for planned values */
    float **vgrad;            /* per value: parameter gradients */
    float **run_mean, **run_var; /* per op: batch-norm running statistics */
    /* Step state, allocated once. */
    size_t *cur_off;          /* per buffer: offset of its live instance */
    bool *live;
    int32_t *fwd_count;       /* per op, this step */
    struct ktensor *kin, *kdin;
    int32_t max_in;
    int32_t *reads, *makes;
    size_t live_bytes, measured_peak; /* arena bytes live now, and the most this step */
    size_t activation_peak;   /* the simulator's peak of the schedule */
    size_t workspace;         /* the most scratch one step takes */
    int64_t step;
    /* The host tier: one region laid out like the arena (lay.host), in memory or mapped
     * from opts.host_file. */
    char *host;
    bool host_mapped;
    size_t *host_off;         /* per buffer: offset of its host instance */
    uint64_t *ticket;         /* per buffer: its copy under way */
    unsigned char *host_state; /* per buffer: 0 none, 1 going out, 2 on the host, 3 coming back */
    size_t host_live, measured_host, transfer_bytes;
    double wait_seconds;
    remat_forward_hook hook;
    void *hook_ud;
    bool debug;               /* REMAT_DEBUG set: check every allocation for overlaps */
    bool dry;                 /* preparing: tensors get stand-in data */
    /* The operating system's view: the mark taken as remat_trainer_new began (the
     * high-water mark reset, the resident set before), and the resident set sampled when
     * it returned (the peak's fallback where the reset fails, see core/rss.h). */
    struct rss_mark rss;
    size_t rss_sampled;
};

/* exec.c: the parts of a trainer that listing or preparing the kernels needs (checks,
 * the backend, b's or its own when NULL, and the per-value and per-op arrays; no
 * schedule, arena or parameters); a dry kop of op's forward or backward (tensors with
 * shapes and stand-in data). */
remat_status trainer_begin(remat_backend *b, const remat_graph *g, const remat_tgraph *tg,
                           const remat_train_opts *o, remat_trainer **out);
void dry_kop(remat_trainer *t, int32_t o, bool backward, struct kop *k);

/* algos.c: the kernels' table of t's graph and backend (every algorithm that runs, or
 * with first_only the fastest that runs, per op and pass). */
remat_status make_algos(remat_trainer *t, bool first_only, remat_algos **out);

/* params.c */
remat_status params_setup(remat_trainer *t);
void params_init(remat_trainer *t);
void params_sgd(remat_trainer *t);

#endif
