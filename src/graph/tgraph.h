/*
 * tgraph.h - the training graph: every value of the step with its byte size M_v and
 * cost T_v, and every op with what its forward reads and writes and what its backward
 * reads (saved forward values, output gradients) and writes (input gradients).
 *
 * Made by autodiff from a forward graph (autodiff.c) or read from a Chainer graph dump
 * (io/dump.c). Ops are stored in the order the forward pass runs them; the backward
 * pass runs them in reverse. Gradients accumulate (+=): a value read by several ops
 * gets one gradient buffer that each reader's backward adds into, so n_grad_writers
 * counts the contributions.
 *
 * Buffers: a non-view value v owns forward buffer v and gradient buffer n_values + v;
 * a view (flatten, reshape) uses its base's buffers (buf field).
 */
#ifndef REMAT_TGRAPH_H
#define REMAT_TGRAPH_H

#include "graph/graph.h"

struct tvalue {
    size_t bytes;          /* M_v (0 for a view) */
    double cost;           /* T_v: the cost of the op that produces it (0 for aux) */
    int32_t producer;      /* op id, -1 when resident (input, label, param) */
    int32_t buf;           /* owner of the buffer: itself, or a view's base */
    uint8_t kind;          /* enum value_kind */
    bool grad;             /* has a gradient buffer written by some backward */
    int32_t n_grad_writers;/* backward ops that add into its gradient */
    char *name;
};

struct top {
    int32_t type;          /* remat_op, or -1 for a dump's op (type_name says) */
    char *type_name;
    bool has_bwd;          /* the backward runs (some input needs a gradient) */
    bool is_view;
    double fwd_flops, bwd_flops;
    int32_t n_in, n_out, n_saved, n_gin, n_gout;
    int32_t *in;           /* forward inputs, parameters included */
    int32_t *out;          /* forward outputs: the main one first, then aux */
    int32_t *saved;        /* forward values its backward reads */
    int32_t *gin;          /* values whose gradient its backward reads */
    int32_t *gout;         /* values whose gradient its backward writes */
    int32_t file_index;    /* record index in a dump, else the op id */
};

struct remat_tgraph {
    remat_allocator al;
    int32_t n_values, n_ops;
    struct tvalue *values;
    struct top *ops;
    int32_t *ints;         /* every op's id lists, one block */
    size_t n_ints;
    int32_t n_planned;     /* |V|: op outputs that own a buffer */
    int64_t n_params;
    double forward_flops;
    size_t resident_bytes;
    remat_optimizer optimizer; /* whose state resident_bytes counts (tgraph_param_copies) */
    int32_t accumulate, ranks; /* resident_bytes counts their buffers (tgraph_param_block) */
    bool shard_optimizer;
    size_t bucket;         /* the reduction's bucket, in floats (ranks > 1) */
    bool file_order;       /* ops in a dump's record order, which may not be topological */
};

static inline const remat_allocator *tgraph_al(const remat_tgraph *tg)
{
    return tg->al.fn ? &tg->al : NULL;
}

/* Allocates an empty training graph with room for the given counts (all zeroed). */
remat_status tgraph_alloc(const remat_allocator *a, int32_t n_values, int32_t n_ops,
                          size_t n_ints, remat_tgraph **out);
/* Fills n_planned, n_grad_writers and the value costs' derived counts after building. */
void tgraph_finish(remat_tgraph *tg);

/* The resident copies of each parameter under optimizer o: its value, its gradient and
 * the optimizer's state (SGD: the momentum; AdamW: the first and second moments). */
static inline size_t tgraph_param_copies(remat_optimizer o)
{
    return o == REMAT_OPTIMIZER_ADAMW ? 4 : 3;
}

/* The resident block's parameter part (docs/distributed.md), in floats: the values and
 * their gradients padded to ranks equal shards of `shard` floats (padded = ranks * shard;
 * n itself on one rank), the optimizer's state (per copy: a shard when sharded), the sum
 * of the micro-batches' gradients (accumulate > 1) and the reduction's receive buffers
 * (ranks > 1: two slots, each a piece of at most min(shard, bucket) floats from every
 * other rank; bucket: floats per bucket, TGRAPH_BUCKET = 25 MiB when 0). */
#define TGRAPH_BUCKET ((size_t)25 << 18)
struct tgraph_param_block {
    size_t shard, padded, state, sum, bucket, piece, recv, total;
};
static inline struct tgraph_param_block tgraph_param_block(size_t n, remat_optimizer o,
                                                           int32_t accumulate, int32_t ranks,
                                                           bool shard_optimizer, size_t bucket)
{
    struct tgraph_param_block b;
    size_t r = ranks > 1 ? (size_t)ranks : 1;

    b.shard = (n + r - 1) / r;
    b.padded = r * b.shard;
    b.state = shard_optimizer && r > 1 ? b.shard : b.padded;
    b.sum = accumulate > 1 ? b.padded : 0;
    b.bucket = bucket ? bucket : TGRAPH_BUCKET;
    b.piece = r > 1 ? (b.shard < b.bucket ? b.shard : b.bucket) : 0;
    b.recv = 2 * (r - 1) * b.piece;
    b.total = 2 * b.padded + (tgraph_param_copies(o) - 2) * b.state + b.sum + b.recv;
    return b;
}

/* Buffers of a value. */
static inline int32_t tgraph_fbuf(const remat_tgraph *tg, int32_t v)
{
    return tg->values[v].buf;
}
static inline int32_t tgraph_gbuf(const remat_tgraph *tg, int32_t v)
{
    return tg->n_values + tg->values[v].buf;
}
/* True when a value's forward buffer is plan-controlled (an op output, not resident).
 * A view's buffer is its base's: a view of the input batch is resident. */
static inline bool tgraph_is_planned(const remat_tgraph *tg, int32_t v)
{
    return tg->values[tg->values[v].buf].producer >= 0;
}
static inline size_t tgraph_buf_bytes(const remat_tgraph *tg, int32_t buf)
{
    return tg->values[buf < tg->n_values ? buf : buf - tg->n_values].bytes;
}

#endif
