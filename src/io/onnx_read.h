/*
 * onnx_read.h - the ONNX reader's state and helpers, shared by the model reader
 * (onnx.c), the graph-building helpers (onnx_build.c), the op mappings (onnx_ops.c),
 * constant folding (onnx_fold.c), the transformer patterns (onnx_tf.c) and linear layers
 * (onnx_linear.c). Internal.
 *
 * Every name of the graph maps to an entry: an activation (a remat value), a constant
 * tensor (an initializer, a Constant node's value, or a tensor folded at import), an
 * output remat does not produce, or a pending expression: part of a pattern that
 * becomes one remat op once its last node is read (a decomposed layer norm, an erf
 * GELU, a linear layer waiting for its bias or for the Split that reads it in parts,
 * attention scores waiting for their softmax). Helpers that fail return a status with a message naming the file, the node,
 * its type and the opset (ox_node_fail).
 *
 * Only onnx.c, onnx_ops.c and onnx_rnn_src.c (which walks earlier nodes) see protobuf-c's
 * structs (onnx.pb-c.h, generated at build time); the other files reach nodes and
 * tensors through the accessors below (onnx_linear.c looks ahead with ox_visit).
 */
#ifndef REMAT_IO_ONNX_READ_H
#define REMAT_IO_ONNX_READ_H

#include "core/core.h"
#include "graph/graph.h"
#include "io/onnx.h"

/* the same typedefs as onnx.pb-c.h's (C11 allows the repetition) */
typedef struct Onnx__TensorProto Onnx__TensorProto;
typedef struct Onnx__NodeProto Onnx__NodeProto;
typedef struct Onnx__GraphProto Onnx__GraphProto;
typedef struct Onnx__AttributeProto Onnx__AttributeProto;

enum ent_kind { E_ACT = 1, E_TENSOR, E_DEAD, E_PEND };

/* pending expressions of x (E_PEND), in the order their patterns build them */
enum pend_kind {
    P_SCALE = 1,  /* f * x, or with causal the scores masked above the diagonal */
    P_LINEAR,     /* x times weight w (and bias b), waiting for a bias or for the Split
                     or Slices that read it in parts (onnx_linear.c) */
    P_LN_MEAN,    /* ReduceMean(x, last axis) */
    P_LN_CENTER,  /* x - mean */
    P_LN_SQ,      /* (x - mean)^2 */
    P_LN_VAR,     /* mean of that */
    P_LN_VAREPS,  /* var + eps (f) */
    P_LN_STD,     /* sqrt(var + eps) */
    P_LN_NORM,    /* (x - mean) / std */
    P_LN_GAMMA,   /* that times gamma (w) */
    P_GELU_ERF,   /* erf(x / sqrt 2) */
    P_GELU_ERF1,  /* 1 + erf(x / sqrt 2) */
    P_GELU_XE,    /* x (1 + erf(x / sqrt 2)) */
    P_TANH_CUBE,  /* f x^3 */
    P_TANH_INNER, /* x + 0.044715 x^3, then times sqrt(2 / pi) (f counts the factor) */
    P_TANH_T,     /* tanh(that) */
    P_TANH_T1,    /* 1 + tanh */
    P_TANH_XT,    /* x (1 + tanh) */
    P_SHUF,       /* x (N, C, H, W) viewed (N, g, C/g, H, W), g in f */
    P_SHUF_T,     /* that with axes 1 and 2 swapped */
    P_BCAST,      /* initializer t (1, 1, D) expanded to (batch, 1, D) (a class token) */
    P_TANH_SQ,    /* x * x (a mul when read by anything else) */
    P_HSIG,       /* hard_sigmoid(x) with PyTorch's 1/6 and 1/2 (x times it: hard_swish) */
    P_PARTS,      /* a linear layer built in parts, its readers' outputs defined (value:
                     the first part) */
};

struct ent {
    const char *name;            /* NULL: empty slot */
    int kind;
    int32_t value;               /* E_ACT: the remat value; E_PEND: x */
    const Onnx__TensorProto *t;  /* E_TENSOR: an initializer, a Constant's or a folded
                                    value; E_PEND: a weight (P_LINEAR, P_LN_GAMMA) */
    const Onnx__TensorProto *b;  /* P_LINEAR: the bias, or NULL */
    bool trans;                  /* E_TENSOR: t transposed (2-d, not copied); P_LINEAR: w
                                    is (out, in) as remat's (else (in, out), transposed
                                    when kept) */
    const char *why;             /* E_DEAD: what produced it */
    int pk;                      /* E_PEND: enum pend_kind */
    float f;                     /* P_SCALE: the factor; P_LN_*: eps */
    bool causal;                 /* P_SCALE */
};

/* an initializer that became a parameter: the op's output and the parameter's index */
struct owned_param {
    const Onnx__TensorProto *t;
    int32_t value;
    int k;
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
    bool has_tokens;             /* an integer input became token ids */
    char **names;                /* op names given so far (unique) */
    size_t n_names, cap_names;
    const char *base;            /* the next op's name comes from this initializer */
    Onnx__TensorProto **made;    /* tensors folded at import (freed with the reader) */
    size_t n_made, cap_made;
    struct onnx_cover *cover;    /* --check's report, or NULL */
    struct owned_param *params;  /* initializers already parameters (tied weights) */
    size_t n_params, cap_params;
    const Onnx__GraphProto *gp;  /* the graph (onnx_rnn.c traces a weight to its source) */
};

/* names */
struct ent *ox_lookup(const struct rd *r, const char *name);
remat_status ox_define(struct rd *r, const char *name, struct ent e);

/* failures about the current node: "<file>: node i 'name' (Type, opset N): <message>" */
remat_status ox_node_fail(const struct rd *r, remat_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
remat_status ox_graph_fail(const struct rd *r);

/* the current node */
const char *ox_node_type(const struct rd *r);
const char *ox_node_name(const struct rd *r); /* "" when it has none */
size_t ox_n_in(const struct rd *r);
size_t ox_n_out(const struct rd *r);
const char *ox_out_name(const struct rd *r, size_t i); /* NULL when absent */
/* Looking ahead: the graph's node count; ox_visit points the accessors above and below
 * (node, inputs, attributes) at node i, returning the index to visit back (the node
 * being read, which failures name); whether name is a graph output. */
size_t ox_n_nodes(const struct rd *r);
size_t ox_visit(struct rd *r, size_t i);
bool ox_is_output(const struct rd *r, const char *name);

/* tensors: counts (-1 on overflow), float data (copied, checked against the dims), small
 * integer, boolean and scalar constants */
int64_t ox_tensor_numel(const Onnx__TensorProto *t);
const char *ox_tensor_name(const Onnx__TensorProto *t);
int ox_tensor_dims(const Onnx__TensorProto *t, int64_t *dims, int max); /* -1: > max */
int ox_tensor_type(const Onnx__TensorProto *t);
remat_status ox_tensor_floats(const struct rd *r, const Onnx__TensorProto *t, float **out,
                              int64_t *n_out);
remat_status ox_tensor_ints(const struct rd *r, const Onnx__TensorProto *t, int64_t *v,
                            int max, int *n_out);
remat_status ox_tensor_bool(const struct rd *r, const Onnx__TensorProto *t, bool *v);
remat_status ox_tensor_scalar(const struct rd *r, const Onnx__TensorProto *t, float *v);
/* The only value of constant e (false when e is not a constant of one element). */
bool ox_scalar_of(struct rd *r, const struct ent *e, double *v);
/* Two float32 constants of an export equal within their rounding (relative 1e-6). */
bool ox_near(double a, double b);
/* Any numeric tensor's values as doubles (*out allocated, n values; freed by the caller
 * with core_free(r->a, *out, sizeof(double) * (n ? n : 1))). */
remat_status ox_tensor_doubles(const struct rd *r, const Onnx__TensorProto *t, double **out,
                               int64_t *n);
/* A tensor the reader makes (float32, int64 or bool by dtype: OX_F, OX_I, OX_B) from n
 * doubles; freed with the reader. */
enum { OX_F = 1, OX_I, OX_B };
remat_status ox_make_tensor(struct rd *r, int dtype, int ndim, const int64_t *dims,
                            const double *v, const Onnx__TensorProto **out);
/* The data type's class: OX_F for floating types, OX_B for bool, else OX_I. */
int ox_dtype_class(int onnx_type);

/* the current node's inputs: as an activation (a pending expression is built first
 * when it can stand alone), or as a constant (NULL when optional and absent) */
const char *ox_in_name(const struct rd *r, size_t i);
remat_status ox_in_act(struct rd *r, size_t i, int32_t *v);
remat_status ox_in_tensor(struct rd *r, size_t i, bool optional, const Onnx__TensorProto **t);
/* input i's entry (NULL with a failure when it is missing or undefined) */
remat_status ox_in_ent(const struct rd *r, size_t i, struct ent **e);

/* the current node's attributes (defaults when absent) */
const Onnx__AttributeProto *ox_attr(const struct rd *r, const char *name);
int64_t ox_attr_i(const struct rd *r, const char *name, int64_t dflt);
float ox_attr_f(const struct rd *r, const char *name, float dflt);
remat_status ox_attr_ints(const struct rd *r, const char *name, int64_t *v, size_t n,
                          bool *given);
/* an ints attribute of up to max values (*n = 0 when absent) */
remat_status ox_attr_ints_upto(const struct rd *r, const char *name, int64_t *v, size_t max,
                               size_t *n);
/* a tensor attribute (ConstantOfShape's value), NULL when absent */
const Onnx__TensorProto *ox_attr_tensor(const struct rd *r, const char *name);
bool ox_attr_str_is(const struct rd *r, const char *name, const char *want, const char *dflt);

/* building (onnx_build.c): a unique op name, adding an op (the node's first output
 * becomes its value; ox_emit_as: the given output name, NULL for none), keeping a
 * parameter's starting value, shapes, outputs remat does not produce, a 2-d window
 * (kernel, strides, symmetric pads, dilations; auto_pad SAME worked out) */
remat_status ox_op_name(struct rd *r, char *buf, size_t n);
remat_status ox_emit(struct rd *r, remat_op op, const int32_t *ins, int n,
                     const remat_attrs *at, int32_t *out);
remat_status ox_emit_as(struct rd *r, remat_op op, const int32_t *ins, int n,
                        const remat_attrs *at, const char *out_name, int32_t *out);
remat_status ox_keep_weight(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                            int64_t want);
/* the same from a 2-d tensor transposed */
remat_status ox_keep_weight_t(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                              int64_t want);
int64_t ox_param_numel(const struct rd *r, int k);
int64_t ox_shape_of(const struct rd *r, int32_t v, int64_t s[4]);
remat_status ox_dead_outputs(struct rd *r, size_t first, const char *why);
remat_status ox_window(struct rd *r, int32_t x, int64_t kh, int64_t kw, remat_attrs *at);
/* the op that already holds initializer t as its parameter (tied weights) */
remat_status ox_own_param(struct rd *r, const Onnx__TensorProto *t, int32_t value, int k);
const struct owned_param *ox_find_param(const struct rd *r, const Onnx__TensorProto *t);

/* onnx_ops.c: the current node into remat ops */
remat_status ox_read_node(struct rd *r);
/* Whether remat reads nodes of this domain and op type (onnx_ops.c's and onnx_tf.c's
 * tables). */
bool ox_reads(const char *domain, const char *type);
/* REMAT_ERR_UNSUPPORTED listing every op type of gp that remat does not read (with its
 * count and first node), else REMAT_OK: checked before any node is read. */
remat_status ox_check_coverage(const struct rd *r, const Onnx__GraphProto *gp);
void ox_coverage(const Onnx__GraphProto *gp, struct onnx_cover *c);

/* onnx_fold.c: a node whose inputs are all constants, computed at import (*done false
 * when its type does not fold); Shape of an activation */
remat_status ox_fold(struct rd *r, bool *done);

/* onnx_tf.c: the transformer ops and patterns. ox_tf_node reads the node when its type
 * or inputs are the transformer's (*done false: the classic reader takes it);
 * ox_tf_reads says whether a type is one of them; ox_pend_build turns a pending
 * expression into an activation, or refuses. */
remat_status ox_tf_node(struct rd *r, bool *done);
bool ox_tf_reads(const char *type);
remat_status ox_pend_build(struct rd *r, struct ent *e, int32_t *v);
/* x[..., start:start+len, ...] along axis as `out` (drop: without that axis, len 1) */
remat_status ox_slice_axis(struct rd *r, int32_t x, int axis, int64_t start, int64_t len,
                           bool drop, const char *out);

/* onnx_linear.c: linear layers over x's last axis and their split into parts.
 * ox_linear adds y = x W^T (+ b) as k layers of out / k features each (k = 1: one
 * layer; a 3-d or 4-d x through a (rows, K) view per layer), part j defining
 * out_names[j] (NULL or "": nothing), *out part 0's value; with k > 1 the parameters
 * are one split tensor each (gvalue.part_of) named by part 0's. ox_linear_splits says
 * whether the layer whose output is `name` is read only by a Split or Slices into
 * equal parts (it then waits as P_LINEAR); ox_linear_split reads the current Split or
 * Slice of such a layer (or of its parts: P_PARTS) and sets *done, else leaves the
 * node to the others. */
remat_status ox_linear(struct rd *r, int32_t x, const Onnx__TensorProto *w, bool w_is_out_in,
                       const Onnx__TensorProto *b, int k, const char *const *out_names,
                       int32_t *out);
bool ox_linear_splits(struct rd *r, const char *name, int32_t x, const Onnx__TensorProto *w,
                      bool w_is_out_in, const Onnx__TensorProto *b);
remat_status ox_linear_split(struct rd *r, bool *done);

/* onnx_vision.c: the image models' patterns (spatial means, channel shuffles, layer
 * scales, class tokens and position embeddings, a token picked by Gather); read before
 * folding (*done false: the other readers take the node). ox_vis_bcast builds a
 * P_BCAST as an activation. */
remat_status ox_vis_node(struct rd *r, bool *done);
remat_status ox_vis_bcast(struct rd *r, struct ent *e, int32_t *v);

/* onnx_rnn.c: LSTM and GRU unrolled over the sequence into gate ops (ox_rnn_read, gru 0
 * or 1), and what PyTorch emits around them: Squeeze of an activation (a reshape),
 * Concat of activations on axis 0. ox_rnn_node reads those before any other reader (an
 * RNN's Y may be absent when Y_h is there); *done false: the others take the node. */
remat_status ox_rnn_read(struct rd *r, int gru);
remat_status ox_rnn_node(struct rd *r, bool *done);

/* onnx_act.c: tanh, the hard activations, the tanh-form GELU and reductions over any
 * axes; read after folding, before onnx_tf.c (*done false: the others take the node).
 * ox_act_reduce reads the current ReduceSum or ReduceMean node; ox_act_square,
 * ox_act_hsig and ox_act_mean_last build a P_TANH_SQ, P_HSIG or P_LN_MEAN read by
 * another op. */
remat_status ox_act_node(struct rd *r, bool *done);
bool ox_act_reads(const char *type);
remat_status ox_act_reduce(struct rd *r, bool mean);
remat_status ox_act_square(struct rd *r, struct ent *e, int32_t *v);
remat_status ox_act_hsig(struct rd *r, struct ent *e, int32_t *v);
remat_status ox_act_mean_last(struct rd *r, struct ent *e, int32_t *v);

#endif
