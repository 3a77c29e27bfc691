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
     * the optimizer's state (SGD: momentum; AdamW: first moments, then second moments),
     * then inputs, labels and batch-norm running statistics. */
    float *block;
    size_t block_floats;
    size_t n_param_floats;
    /* The block's parameter part (graph/tgraph.h: tgraph_param_block): values, gradients
     * (grad), the optimizer's state (state: copies of pb.state floats from parameter
     * state_first), the micro-batches' gradient sum (sum) and the reduction's receive
     * buffer (recv); dist.c runs the micro-batches and the reduction. */
    struct tgraph_param_block pb;
    float *grad, *state, *sum, *recv;
    size_t state_first;
    const remat_comm *comm;   /* NULL: one process */
    int32_t rank, ranks, accumulate;
    int64_t micro;            /* micro-batches run in this step so far */
    struct dist_reduce *red;  /* dist.c: the reduction's buckets and their progress */
    uint64_t draw;            /* the number of the micro-batch under way (its data, masks) */
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
    size_t moved_bytes; /* the layout's moves inside the arena, all steps */
    double move_seconds;
    remat_forward_hook hook;
    void *hook_ud;
    const int32_t *const *tokens; /* remat_trainer_step_tokens's entries during its step */
    bool debug;               /* REMAT_DEBUG set: check every allocation for overlaps */
    bool dry;                 /* preparing: tensors get stand-in data */
    /* The operating system's view: the mark taken when the tables were built, before the
     * blocks (the high-water mark reset, the resident set before), and the resident set
     * sampled when remat_trainer_new returned (the peak's fallback where the reset fails,
     * see core/rss.h); the data the tables took from remat_trainer_new's start. */
    struct rss_mark rss;
    size_t rss_sampled;
    size_t rss_tables;
};

/* exec.c: the parts of a trainer that listing or preparing the kernels needs (checks,
 * the backend, b's or its own when NULL, and the per-value and per-op arrays; no
 * schedule, arena or parameters); a dry kop of op's forward or backward (tensors with
 * shapes and stand-in data). */
remat_status trainer_begin(remat_backend *b, const remat_graph *g, const remat_tgraph *tg,
                           const remat_train_opts *o, remat_trainer **out);
void dry_kop(remat_trainer *t, int32_t o, bool backward, struct kop *k);

/* blocks.c: the host tier's region (opts.host_file mapped, else anonymous pages; nothing
 * without offloads); the resident pages of t's blocks in host memory (mincore). */
remat_status trainer_host_tier(remat_trainer *t);
size_t trainer_blocks_resident(const remat_trainer *t);

/* algos.c: the kernels' table of t's graph and backend (every algorithm that runs, or
 * with first_only the fastest that runs, per op and pass). */
remat_status make_algos(remat_trainer *t, bool first_only, remat_algos **out);

/* params.c: the parameters' value ids in the order the block holds them (the graph's,
 * but the row blocks of a split tensor together at its first's place; gvalue.part_of),
 * into order (NULL: only counted); their count */
size_t params_order(const remat_graph *g, int32_t *order);
remat_status params_setup(remat_trainer *t);
void params_init(remat_trainer *t);
/* Refuses (REMAT_ERR_ARG) options the update cannot run: an optimizer other than the
 * training graph's (whose resident bytes count its state), betas outside [0, 1), a
 * negative or NaN eps, lr or weight decay. */
remat_status params_check(const remat_trainer *t);
/* The optimizer's update of parameters [lo, hi) from their gradients (step
 * t->step + 1); the state of parameter i is at i - t->state_first. */
remat_status params_update(remat_trainer *t, size_t lo, size_t hi);

/* dist.c: the options' micro-batches and ranks into t (checked against the training
 * graph's) before params_setup; the end of a micro-batch whose gradients (or failure st)
 * are in place: summed, and at the step's last reduced across ranks and applied. */
remat_status dist_setup(remat_trainer *t);
remat_status dist_micro_done(remat_trainer *t, remat_status st);
/* dist.c: the reduction's buckets (after params_setup; nothing on one rank), freed by
 * dist_free; dist_micro_begin before a micro-batch of remat_trainer_step, and
 * dist_after_step after schedule step i of it: on the step's last micro-batch it starts
 * the buckets whose gradients are final and moves those under way along. */
remat_status dist_buckets_setup(remat_trainer *t);
void dist_free(remat_trainer *t);
void dist_micro_begin(remat_trainer *t);
remat_status dist_after_step(remat_trainer *t, size_t i);
void dist_stats(const remat_trainer *t, remat_train_stats *st);

/* dist_buckets.c (docs/distributed.md): the reduction's buckets. A bucket is floats
 * [lo, hi) of the padded gradients, final after schedule step `ready` (-1: before the
 * first). */
struct dist_bucket {
    size_t lo, hi;
    int64_t ready;
};
/* ready[p]: the last step of s that writes the gradient of the p-th parameter of g (in
 * graph order, the block's), -1 when none does. */
void dist_param_ready(const remat_graph *g, const remat_tgraph *tg, const remat_schedule *s,
                      int64_t *ready);
/* The buckets of np parameters of len[p] floats laid out in order from 0 and padded to
 * `padded` floats (the padding final from the start), at most `bucket` floats each:
 * whole parameters from the last to the first while they fit, a parameter longer than
 * a bucket cut from its end into buckets of `bucket` floats and a rest that starts the
 * next; then sorted by ready step (stable). Into out (NULL: counts only); the count. */
int32_t dist_bucket_plan(const size_t *len, const int64_t *ready, int32_t np, size_t padded,
                         size_t bucket, struct dist_bucket *out);
/* AdamW's scalars for step t (from 1) under o (zero betas and eps: the defaults), and
 * its update of n parameters on the host, in the order params.c states. */
struct adamw_coef adamw_coef(const remat_train_opts *o, int64_t t);
void adamw_update(float *w, const float *g, float *m, float *v, size_t n,
                  const struct adamw_coef *c);

#endif
