/*
 * graph.h - the forward graph: values (tensors with NCHW shapes) and the ops that
 * produce them, in the order they were added (which is a topological order: an op may
 * only read values that exist).
 *
 * Sizes: a zoo model has up to a few tens of thousands of values (the 2,500-layer
 * ResNet: about 10^4 ops). Values and ops live in growable arrays owned by the graph;
 * names and input lists in the graph's string/int pools.
 */
#ifndef REMAT_GRAPH_H
#define REMAT_GRAPH_H

#include "core/core.h"

enum value_kind {
    VK_ACT = 0, /* produced by an op: an activation (or a view of one) */
    VK_AUX,     /* produced by an op beside its output and read only by its backward:
                   batch-norm mean and inverse std, max-pool indices, softmax probs */
    VK_INPUT,   /* the input batch */
    VK_LABEL,   /* class labels, int32 */
    VK_PARAM,   /* a trainable parameter */
    VK_COUNT
};

struct gvalue {
    int64_t shape[4];
    int32_t ndim;
    uint8_t kind;       /* enum value_kind */
    uint8_t elem_bytes; /* 4: float32 or int32 */
    bool positions;     /* VK_LABEL: token positions, 0 .. n-1 along the last axis */
    int32_t producer;   /* op id, -1 for inputs, labels and params */
    int32_t view_of;    /* the value whose buffer this one shares, -1 if its own */
    int32_t part_of;    /* VK_PARAM: the first of the parameters that are the row blocks of
                           one tensor (an ONNX initializer split into linear layers), in
                           value order, laid out together; that one's name names the whole
                           (exec/params.c); -1 if none */
    char *name;
};

struct gop {
    remat_op type;
    int32_t n_in;
    int32_t *in;   /* data inputs first, then parameters (weight, bias, gamma, beta) */
    int32_t out;   /* main output */
    int32_t aux;   /* saved extra (VK_AUX) or -1 */
    remat_attrs at; /* with defaults filled in */
    double fwd_flops, bwd_flops; /* whole batch */
    char *name;
};

struct remat_graph {
    remat_allocator al; /* copy of the caller's; fn == NULL means malloc */
    vec values;         /* struct gvalue */
    vec ops;            /* struct gop */
    int32_t loss;
    remat_status err;   /* sticky first failure */
    int64_t bn_state;   /* running mean and variance scalars (resident, not trainable) */
};

static inline struct gvalue *graph_value(const remat_graph *g, int32_t id)
{
    return VEC_AT(&g->values, struct gvalue, id);
}
static inline struct gop *graph_op(const remat_graph *g, int32_t id)
{
    return VEC_AT(&g->ops, struct gop, id);
}
static inline const remat_allocator *graph_al(const remat_graph *g)
{
    return g->al.fn ? &g->al : NULL;
}

int64_t graph_numel(const struct gvalue *v);

/* The op table: one row per op, in REMAT_OPS order (op_table.c). */
enum bwd_reads {
    BR_IN0 = 1u << 0,  /* the first input (x) */
    BR_IN1 = 1u << 1,  /* the second input (labels for softmax_ce) */
    BR_OUT = 1u << 2,  /* the output y */
    BR_AUX = 1u << 3,  /* the saved extra */
};

struct op_info {
    int32_t min_in, max_in;   /* data inputs (parameters are added by the op) */
    bool is_view;             /* output shares the input's buffer */
    bool has_aux;
    unsigned bwd_reads;       /* enum bwd_reads */
    /* Fills defaults into *at, checks the inputs and writes the output shape (and the
     * aux shape when has_aux) and the parameter shapes; returns REMAT_ERR_SHAPE with a
     * message naming the op on a mismatch. */
    remat_status (*infer)(const struct gvalue *const *in, int n_in, remat_attrs *at,
                          struct gvalue *out, struct gvalue *aux, int *n_params,
                          struct gvalue *params, const char *name);
    /* FLOPs of the forward and the backward for the whole batch. */
    double (*flops)(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                    const struct gvalue *out, bool backward);
};

const struct op_info *op_info(remat_op op);


double graph_op_flops(const remat_graph *g, const struct gop *op, bool backward);
#endif
