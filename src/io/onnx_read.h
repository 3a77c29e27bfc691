/*
 * onnx_read.h - the ONNX reader's state and helpers, shared by the model reader
 * (onnx.c) and the op mappings (onnx_ops.c). Internal.
 *
 * Every name of the graph maps to an entry: an activation (a remat value), a constant
 * tensor (an initializer or a Constant node's value) or an output remat does not
 * produce. Helpers that fail return a status with a message naming the file, the node,
 * its type and the opset (ox_node_fail).
 */
#ifndef REMAT_IO_ONNX_READ_H
#define REMAT_IO_ONNX_READ_H

#include "core/core.h"
#include "graph/graph.h"
#include "io/onnx.h"
#include "onnx.pb-c.h"

enum ent_kind { E_ACT = 1, E_TENSOR, E_DEAD };

struct ent {
    const char *name;            /* NULL: empty slot */
    int kind;
    int32_t value;               /* E_ACT: the remat value */
    const Onnx__TensorProto *t;  /* E_TENSOR: an initializer or a Constant's value */
    const char *why;             /* E_DEAD: what produced it */
};

struct rd {
    const char *label;
    const remat_allocator *a;
    int opset;
    remat_graph *g;
    remat_onnx_weights *w;
    struct ent *tab;
    size_t cap, used;
    const Onnx__NodeProto *node; /* the node being read, for messages */
    size_t node_i;
    int64_t batch_file, batch;   /* the input's first dimension in the file, and wanted */
    bool no_loss;
    char **names;                /* op names given so far (unique) */
    size_t n_names, cap_names;
};

/* names */
struct ent *ox_lookup(const struct rd *r, const char *name);
remat_status ox_define(struct rd *r, const char *name, struct ent e);

/* failures about the current node: "<file>: node i 'name' (Type, opset N): <message>" */
remat_status ox_node_fail(const struct rd *r, remat_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
remat_status ox_graph_fail(const struct rd *r);

/* tensors: counts (-1 on overflow), float data (copied, checked against the dims), small
 * integer, boolean and scalar constants */
int64_t ox_tensor_numel(const Onnx__TensorProto *t);
remat_status ox_tensor_floats(const struct rd *r, const Onnx__TensorProto *t, float **out,
                              int64_t *n_out);
remat_status ox_tensor_ints(const struct rd *r, const Onnx__TensorProto *t, int64_t *v,
                            int max, int *n_out);
remat_status ox_tensor_bool(const struct rd *r, const Onnx__TensorProto *t, bool *v);
remat_status ox_tensor_scalar(const struct rd *r, const Onnx__TensorProto *t, float *v);

/* the current node's inputs: as an activation, or as a constant (NULL when optional and
 * absent) */
const char *ox_in_name(const struct rd *r, size_t i);
remat_status ox_in_act(const struct rd *r, size_t i, int32_t *v);
remat_status ox_in_tensor(const struct rd *r, size_t i, bool optional,
                          const Onnx__TensorProto **t);

/* the current node's attributes (defaults when absent) */
const Onnx__AttributeProto *ox_attr(const struct rd *r, const char *name);
int64_t ox_attr_i(const struct rd *r, const char *name, int64_t dflt);
float ox_attr_f(const struct rd *r, const char *name, float dflt);
remat_status ox_attr_ints(const struct rd *r, const char *name, int64_t *v, size_t n,
                          bool *given);
bool ox_attr_str_is(const struct rd *r, const char *name, const char *want, const char *dflt);

/* building: a unique op name, adding an op (the node's first output becomes its value),
 * keeping a parameter's starting value, shapes, outputs remat does not produce, a 2-d
 * window (kernel, strides, symmetric pads, dilations; auto_pad SAME worked out) */
remat_status ox_op_name(struct rd *r, char *buf, size_t n);
remat_status ox_emit(struct rd *r, remat_op op, const int32_t *ins, int n,
                     const remat_attrs *at, int32_t *out);
remat_status ox_keep_weight(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                            int64_t want);
int64_t ox_param_numel(const struct rd *r, int k);
int64_t ox_shape_of(const struct rd *r, int32_t v, int64_t s[4]);
remat_status ox_dead_outputs(struct rd *r, size_t first, const char *why);
remat_status ox_window(struct rd *r, int32_t x, int64_t kh, int64_t kw, remat_attrs *at);

/* onnx_ops.c: the current node into remat ops */
remat_status ox_read_node(struct rd *r);
/* Whether remat reads nodes of this domain and op type (onnx_ops.c's table). */
bool ox_reads(const char *domain, const char *type);
/* REMAT_ERR_UNSUPPORTED listing every op type of gp that remat does not read (with its
 * count and first node), else REMAT_OK: checked before any node is read. */
remat_status ox_check_coverage(const struct rd *r, const Onnx__GraphProto *gp);

#endif
