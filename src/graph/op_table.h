/*
 * op_table.h - what op_table.c shares with op_table_seq.c: the shape helpers and the
 * rows of the sequence-model ops (layer norm, GELU) that op_table_seq.c defines.
 *
 * The functions follow struct op_info's infer and flops contracts (graph.h).
 */
#ifndef REMAT_GRAPH_OP_TABLE_H
#define REMAT_GRAPH_OP_TABLE_H

#include "graph/graph.h"

#include <string.h>

/* SHAPE_FAIL(fmt, name, args...): the format's first %s is the op's name. */
#define SHAPE_FAIL(...) REMAT_FAIL(REMAT_ERR_SHAPE, "op '%s': " __VA_ARGS__)

/* Sets v to an ndim-d float32 shape (a, b, c, d), the unused dimensions 0. */
static inline void set_shape(struct gvalue *v, int ndim, int64_t a, int64_t b, int64_t c,
                             int64_t d)
{
    int64_t s[4] = {a, b, c, d};

    v->ndim = ndim;
    for (int i = 0; i < 4; i++)
        v->shape[i] = i < ndim ? s[i] : 0;
    v->elem_bytes = 4;
}

/* Gives dst src's shape, as float32. */
static inline void copy_shape(struct gvalue *dst, const struct gvalue *src)
{
    dst->ndim = src->ndim;
    memcpy(dst->shape, src->shape, sizeof dst->shape);
    dst->elem_bytes = 4;
}

/* op_table_seq.c: layer_norm over the last axis, with gamma and beta of its size and
 * (mean, inverse std) per row in aux; gelu, elementwise. */
remat_status graph_infer_layer_norm(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                    struct gvalue *out, struct gvalue *aux, int *n_params,
                                    struct gvalue *params, const char *name);
double graph_flops_layer_norm(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                              const struct gvalue *out, bool backward);
double graph_flops_gelu(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                        const struct gvalue *out, bool backward);
remat_status graph_infer_matmul(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                struct gvalue *out, struct gvalue *aux, int *n_params,
                                struct gvalue *params, const char *name);
double graph_flops_matmul(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                          const struct gvalue *out, bool backward);
remat_status graph_infer_softmax_last(const struct gvalue *const *in, int n_in,
                                      remat_attrs *at, struct gvalue *out, struct gvalue *aux,
                                      int *n_params, struct gvalue *params, const char *name);
double graph_flops_softmax_last(const struct gvalue *const *in, int n_in,
                                const remat_attrs *at, const struct gvalue *out, bool backward);
remat_status graph_infer_embedding(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                   struct gvalue *out, struct gvalue *aux, int *n_params,
                                   struct gvalue *params, const char *name);
double graph_flops_embedding(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                             const struct gvalue *out, bool backward);
remat_status graph_infer_token_ce(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                  struct gvalue *out, struct gvalue *aux, int *n_params,
                                  struct gvalue *params, const char *name);
double graph_flops_token_ce(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward);

/* op_table_act.c: hard_sigmoid (hard_swish: infer_same), their FLOPs; reduce_sum. */
remat_status graph_infer_hard_sigmoid(const struct gvalue *const *in, int n_in,
                                      remat_attrs *at, struct gvalue *out, struct gvalue *aux,
                                      int *n_params, struct gvalue *params, const char *name);
double graph_flops_hard_act(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                            const struct gvalue *out, bool backward);
remat_status graph_infer_reduce_sum(const struct gvalue *const *in, int n_in, remat_attrs *at,
                                    struct gvalue *out, struct gvalue *aux, int *n_params,
                                    struct gvalue *params, const char *name);
double graph_flops_reduce_sum(const struct gvalue *const *in, int n_in, const remat_attrs *at,
                              const struct gvalue *out, bool backward);
#endif
