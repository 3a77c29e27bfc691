/*
 * onnx.c - reading an ONNX model (protobuf, decoded by the protobuf-c code generated
 * from onnx.proto at build time) into a remat graph plus the starting values of its
 * parameters and batch-norm running statistics.
 *
 * The nodes are taken in file order, which ONNX requires to be topological: a node that
 * reads a name no earlier node, initializer or graph input defines is an error (this
 * also rejects cycles). Every name maps to one of: an activation (a remat value), an
 * initializer or a Constant node's tensor (read by the ops that take constant inputs:
 * Reshape's shape, Pad's pads, Clip's bounds, Resize's sizes), or an output remat does
 * not produce (batch norm's running statistics in training mode, dropout's mask), which
 * no later node may read, or a pending part of a pattern (onnx_tf.c). Inputs are float
 * tensors or int64/int32 token ids (a tokens value). The one graph output is the logits:
 * (batch, classes) get a softmax cross-entropy against labels, as for the zoo's
 * classifiers; (batch, seq, vocab) a token cross-entropy against target tokens.
 *
 * Ops and their mapping: onnx_ops.c and docs/onnx.md. Parameters are named after their
 * initializers' prefix ("layer1.0.conv1.weight" names the op "layer1.0.conv1"), so the
 * names of a PyTorch export carry over to remat_trainer_param and parameter files.
 *
 * Hostile files: the file is read whole (at most 2 GiB, protobuf's own limit) and
 * decoded by protobuf-c, whose allocations are bounded by the bytes it decodes; every
 * tensor's element count is checked against its data before it is copied, and every
 * shape goes through the graph builder's checks.
 */
#include "io/onnx_read.h"
#include "models/zoo.h"
#include "onnx.pb-c.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define ONNX_MAX_BYTES ((size_t)1 << 31)
#define OPSET_MIN 11
#define OPSET_MAX 17

/* ------------------------------------------------------------------ weights */

static const remat_allocator *w_al(const remat_onnx_weights *w)
{
    return w->al.fn ? &w->al : NULL;
}

void remat_onnx_weights_free(remat_onnx_weights *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++) {
        core_strfree(w_al(w), w->w[i].name);
        core_free(w_al(w), w->w[i].data, sizeof(float) * (size_t)w->w[i].n);
    }
    core_free(w_al(w), w->w, sizeof *w->w * w->cap);
    core_free(w_al(w), w, sizeof *w);
}

/* REMAT_FAIL(code) with "<file>: node i 'name' (Type, opset N): <message>". */
remat_status ox_node_fail(const struct rd *r, remat_status code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return REMAT_FAIL(code, "%s: node %zu '%s' (%s, opset %d): %s", r->label, r->node_i,
                      r->node->name && *r->node->name ? r->node->name : "",
                      r->node->op_type ? r->node->op_type : "?", r->opset, msg);
}

/* The graph builder's failure (sticky), said about the current node. */
remat_status ox_graph_fail(const struct rd *r)
{
    char msg[512];

    snprintf(msg, sizeof msg, "%s", remat_errmsg());
    return ox_node_fail(r, remat_graph_status(r->g), "%s", msg);
}

/* ------------------------------------------------------------------ the node */

const char *ox_node_type(const struct rd *r)
{
    return r->node->op_type ? r->node->op_type : "";
}

const char *ox_node_name(const struct rd *r)
{
    return r->node->name ? r->node->name : "";
}

size_t ox_n_in(const struct rd *r)
{
    return r->node->n_input;
}

size_t ox_n_out(const struct rd *r)
{
    return r->node->n_output;
}

const char *ox_out_name(const struct rd *r, size_t i)
{
    return i < r->node->n_output && r->node->output[i] && *r->node->output[i]
               ? r->node->output[i] : NULL;
}

size_t ox_n_nodes(const struct rd *r)
{
    return r->gp ? r->gp->n_node : 0;
}

size_t ox_visit(struct rd *r, size_t i)
{
    size_t was = r->node_i;

    r->node = r->gp->node[i];
    r->node_i = i;
    return was;
}

bool ox_is_output(const struct rd *r, const char *name)
{
    for (size_t i = 0; r->gp && i < r->gp->n_output; i++)
        if (r->gp->output[i]->name && !strcmp(r->gp->output[i]->name, name))
            return true;
    return false;
}

/* ------------------------------------------------------------------ tensors */

/* The element count of t's dims (-1 when a dim is negative or the count overflows). */
int64_t ox_tensor_numel(const Onnx__TensorProto *t)
{
    int64_t n = 1;

    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !core_mul_i64(n, t->dims[i], &n) || n > ((int64_t)1 << 40))
            return -1;
    return n;
}

const char *ox_tensor_name(const Onnx__TensorProto *t)
{
    return t->name ? t->name : "";
}

int ox_tensor_type(const Onnx__TensorProto *t)
{
    return t->data_type;
}

int ox_tensor_dims(const Onnx__TensorProto *t, int64_t *dims, int max)
{
    if (t->n_dims > (size_t)max)
        return -1;
    for (size_t i = 0; i < t->n_dims; i++)
        dims[i] = t->dims[i];
    return (int)t->n_dims;
}

int ox_dtype_class(int ty)
{
    switch (ty) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        return OX_F;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return OX_B;
    default:
        return OX_I;
    }
}

/* Element i of t's raw data as a double (size and kind by data type). */
static double raw_at(const Onnx__TensorProto *t, int64_t i, size_t es)
{
    const uint8_t *p = t->raw_data.data + (size_t)i * es;
    union { float f; double d; int64_t l; int32_t w; int16_t h; int8_t b; uint8_t u; } x;

    memcpy(&x, p, es);
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return x.f;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return x.d;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return (double)x.l;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return x.w;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return x.h;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return x.b;
    default: return x.u; /* uint8, bool */
    }
}

static size_t elem_size(int ty)
{
    switch (ty) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    default: return 0;
    }
}

remat_status ox_tensor_doubles(const struct rd *r, const Onnx__TensorProto *t, double **out,
                               int64_t *n_out)
{
    int64_t n = ox_tensor_numel(t);
    size_t es = elem_size(t->data_type), typed;
    bool f = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
         d = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE,
         l = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    double *v;

    *out = NULL;
    if (!es)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "constant '%s' has data type %d",
                            ox_tensor_name(t), (int)t->data_type);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "tensor '%s' keeps its data in an "
                            "external file", ox_tensor_name(t));
    typed = f ? t->n_float_data : d ? t->n_double_data : l ? t->n_int64_data : t->n_int32_data;
    if (n < 0 || n > ((int64_t)1 << 28) ||
        (t->has_raw_data ? t->raw_data.len != (size_t)n * es : typed != (size_t)n))
        return ox_node_fail(r, REMAT_ERR_PARSE, "tensor '%s': its dims and its data disagree",
                            ox_tensor_name(t));
    if (!(v = core_alloc(r->a, sizeof(double) * (size_t)(n ? n : 1))))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    for (int64_t i = 0; i < n; i++)
        v[i] = t->has_raw_data ? raw_at(t, i, es) : f ? t->float_data[i]
               : d ? t->double_data[i] : l ? (double)t->int64_data[i] : t->int32_data[i];
    *out = v;
    *n_out = n;
    return REMAT_OK;
}

remat_status ox_make_tensor(struct rd *r, int dtype, int ndim, const int64_t *dims,
                            const double *v, const Onnx__TensorProto **out)
{
    Onnx__TensorProto *t;
    int64_t n = 1;
    size_t es = dtype == OX_F ? 4 : dtype == OX_I ? 8 : 1;

    for (int i = 0; i < ndim; i++)
        if (dims[i] < 0 || !core_mul_i64(n, dims[i], &n) || n > ((int64_t)1 << 28))
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a folded constant of more than "
                                "2^28 values");
    if (r->n_made == r->cap_made) {
        size_t cap = r->cap_made ? 2 * r->cap_made : 64;
        Onnx__TensorProto **m = core_realloc(r->a, r->made, sizeof *m * r->cap_made,
                                             sizeof *m * cap);

        if (!m)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        r->made = m;
        r->cap_made = cap;
    }
    if (!(t = core_calloc(r->a, 1, sizeof *t)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    onnx__tensor_proto__init(t);
    r->made[r->n_made++] = t;
    t->dims = core_calloc(r->a, (size_t)(ndim ? ndim : 1), sizeof *t->dims);
    t->raw_data.data = core_calloc(r->a, 1, (size_t)n * es > 8 ? (size_t)n * es : 8);
    if (!t->dims || !t->raw_data.data)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    t->n_dims = (size_t)ndim;
    memcpy(t->dims, dims, sizeof *dims * (size_t)ndim);
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)n * es;
    t->has_data_type = 1;
    t->data_type = dtype == OX_F ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
                   : dtype == OX_I ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64
                                   : ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    for (int64_t i = 0; i < n; i++) {
        float f = (float)v[i];
        /* folded integers out of int64's range (a division by 0, NaN) saturate, as the
         * cast would be undefined */
        int64_t l = !(v[i] > -9.2e18) ? (v[i] < 0 ? INT64_MIN : 0)
                    : v[i] < 9.2e18 ? (int64_t)v[i] : INT64_MAX;

        if (dtype == OX_F)
            memcpy(t->raw_data.data + 4 * i, &f, 4);
        else if (dtype == OX_I)
            memcpy(t->raw_data.data + 8 * i, &l, 8);
        else
            t->raw_data.data[i] = v[i] != 0;
    }
    *out = t;
    return REMAT_OK;
}

static void free_made(struct rd *r)
{
    for (size_t i = 0; i < r->n_made; i++) {
        Onnx__TensorProto *t = r->made[i];

        core_free(r->a, t->raw_data.data, t->raw_data.len > 8 ? t->raw_data.len : 8);
        core_free(r->a, t->dims, sizeof *t->dims * (t->n_dims ? t->n_dims : 1));
        core_free(r->a, t, sizeof *t);
    }
    core_free(r->a, r->made, sizeof *r->made * r->cap_made);
    core_free(r->a, r->params, sizeof *r->params * r->cap_params);
}

/* Copies a float tensor's values (float_data or raw_data, checked against its dims). */
remat_status ox_tensor_floats(const struct rd *r, const Onnx__TensorProto *t, float **out,
                                  int64_t *n_out)
{
    int64_t n = ox_tensor_numel(t);
    float *p;

    *out = NULL;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "tensor '%s' has data type %d; remat "
                         "trains float32", t->name ? t->name : "", (int)t->data_type);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "tensor '%s' keeps its data in an "
                         "external file", t->name ? t->name : "");
    if (n < 0 || (t->has_raw_data ? t->raw_data.len != (size_t)n * 4
                                  : t->n_float_data != (size_t)n))
        return ox_node_fail(r, REMAT_ERR_PARSE, "tensor '%s': its dims and its data disagree",
                         t->name ? t->name : "");
    p = core_alloc(r->a, sizeof(float) * (size_t)(n ? n : 1));
    if (!p)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory reading '%s'", r->label, t->name);
    if (n && t->has_raw_data)
        memcpy(p, t->raw_data.data, (size_t)n * 4); /* little-endian, as ONNX stores it */
    else if (n)
        memcpy(p, t->float_data, (size_t)n * 4);
    *out = p;
    *n_out = n;
    return REMAT_OK;
}

/* A small integer tensor (int64 or int32; shapes, pads, axes) into v[0..max). */
remat_status ox_tensor_ints(const struct rd *r, const Onnx__TensorProto *t, int64_t *v,
                                int max, int *n_out)
{
    int64_t n = ox_tensor_numel(t);

    if (n < 0 || n > max)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "constant '%s' has %lld values, at most "
                         "%d expected", t->name ? t->name : "", (long long)n, max);
    for (int64_t i = 0; i < n; i++) {
        if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && t->has_raw_data &&
            t->raw_data.len == (size_t)n * 8)
            memcpy(&v[i], t->raw_data.data + 8 * i, 8);
        else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
                 t->n_int64_data == (size_t)n)
            v[i] = t->int64_data[i];
        else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && t->has_raw_data &&
                 t->raw_data.len == (size_t)n * 4) {
            int32_t x;

            memcpy(&x, t->raw_data.data + 4 * i, 4);
            v[i] = x;
        } else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 &&
                   t->n_int32_data == (size_t)n)
            v[i] = t->int32_data[i];
        else
            return ox_node_fail(r, REMAT_ERR_PARSE, "constant '%s' is not an integer tensor "
                             "whose data matches its dims", t->name ? t->name : "");
    }
    *n_out = (int)n;
    return REMAT_OK;
}

/* A boolean scalar constant (Dropout's training_mode). */
remat_status ox_tensor_bool(const struct rd *r, const Onnx__TensorProto *t, bool *v)
{
    if (ox_tensor_numel(t) != 1)
        return ox_node_fail(r, REMAT_ERR_PARSE, "'%s' should be a scalar", t->name ? t->name : "");
    if (t->has_raw_data && t->raw_data.len >= 1)
        *v = t->raw_data.data[0] != 0;
    else if (t->n_int32_data == 1)
        *v = t->int32_data[0] != 0;
    else if (t->n_int64_data == 1)
        *v = t->int64_data[0] != 0;
    else
        return ox_node_fail(r, REMAT_ERR_PARSE, "'%s' has no value", t->name ? t->name : "");
    return REMAT_OK;
}

/* One float from a scalar constant (Clip's bounds, Dropout's ratio). */
remat_status ox_tensor_scalar(const struct rd *r, const Onnx__TensorProto *t, float *v)
{
    float *p = NULL;
    int64_t n = 0;
    remat_status st = ox_tensor_floats(r, t, &p, &n);

    if (!st && n != 1)
        st = ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "'%s' should be a scalar", t->name);
    if (!st)
        *v = p[0];
    core_free(r->a, p, sizeof(float) * (size_t)(n ? n : 1));
    return st;
}

/* ------------------------------------------------------------------ node inputs */

const char *ox_in_name(const struct rd *r, size_t i)
{
    return i < r->node->n_input && r->node->input[i] && *r->node->input[i] ? r->node->input[i]
                                                                           : NULL;
}

/* Input i's entry. */
remat_status ox_in_ent(const struct rd *r, size_t i, struct ent **e)
{
    const char *nm = ox_in_name(r, i);

    *e = NULL;
    if (!nm)
        return ox_node_fail(r, REMAT_ERR_PARSE, "input %zu is missing", i);
    if (!(*e = ox_lookup(r, nm)))
        return ox_node_fail(r, REMAT_ERR_PARSE, "reads '%s', which no earlier node, initializer "
                            "or graph input defines (a dangling name, or nodes out of "
                            "topological order)", nm);
    if ((*e)->kind == E_DEAD)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "reads '%s', %s, which remat does not "
                            "produce", nm, (*e)->why);
    return REMAT_OK;
}

/* Input i as an activation (a remat value; a pending expression is built first). */
remat_status ox_in_act(struct rd *r, size_t i, int32_t *v)
{
    struct ent *e;
    remat_status st = ox_in_ent(r, i, &e);

    if (st)
        return st;
    if (e->kind == E_PEND)
        return ox_pend_build(r, e, v);
    if (e->kind != E_ACT)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu ('%s') is a constant where "
                            "remat needs an activation", i, e->name);
    *v = e->value;
    return REMAT_OK;
}

/* The transposed copy of a 2-d constant that a Transpose left as a flag. */
static remat_status untranspose(struct rd *r, struct ent *e)
{
    double *v = NULL, *q = NULL;
    int64_t n = 0, d[2];
    remat_status st;

    if (ox_tensor_dims(e->t, d, 2) != 2)
        return ox_node_fail(r, REMAT_ERR_SHAPE, "a transposed constant that is not 2-d");
    if ((st = ox_tensor_doubles(r, e->t, &v, &n)))
        return st;
    if (!(q = core_alloc(r->a, sizeof(double) * (size_t)(n ? n : 1)))) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        goto out;
    }
    for (int64_t i = 0; i < d[0]; i++)
        for (int64_t j = 0; j < d[1]; j++)
            q[j * d[0] + i] = v[i * d[1] + j];
    st = ox_make_tensor(r, ox_dtype_class(e->t->data_type), 2, (int64_t[]){d[1], d[0]}, q,
                        &e->t);
    e->trans = false;
out:
    core_free(r->a, v, sizeof(double) * (size_t)(n ? n : 1));
    core_free(r->a, q, sizeof(double) * (size_t)(n ? n : 1));
    return st;
}

/* Input i as a constant tensor (NULL when the optional input is absent). */
remat_status ox_in_tensor(struct rd *r, size_t i, bool optional, const Onnx__TensorProto **t)
{
    struct ent *e;
    remat_status st;

    *t = NULL;
    if (!ox_in_name(r, i) && optional)
        return REMAT_OK;
    if ((st = ox_in_ent(r, i, &e)))
        return st;
    if (e->kind != E_TENSOR)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu ('%s') must be an initializer "
                            "or a constant", i, e->name);
    if (e->trans && (st = untranspose(r, e)))
        return st;
    *t = e->t;
    return REMAT_OK;
}

/* ------------------------------------------------------------------ attributes */

const Onnx__AttributeProto *ox_attr(const struct rd *r, const char *name)
{
    for (size_t i = 0; i < r->node->n_attribute; i++)
        if (r->node->attribute[i]->name && !strcmp(r->node->attribute[i]->name, name))
            return r->node->attribute[i];
    return NULL;
}

int64_t ox_attr_i(const struct rd *r, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    return a && a->has_i ? a->i : dflt;
}

float ox_attr_f(const struct rd *r, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    return a && a->has_f ? a->f : dflt;
}

/* An ints attribute of exactly n values into v (absent: false, v untouched). */
remat_status ox_attr_ints(const struct rd *r, const char *name, int64_t *v, size_t n,
                              bool *given)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    *given = false;
    if (!a)
        return REMAT_OK;
    if (a->n_ints != n)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "attribute %s has %zu values; remat "
                         "handles 2-d ops (%zu)", name, a->n_ints, n);
    for (size_t i = 0; i < n; i++) {
        if (a->ints[i] < -(1 << 20) || a->ints[i] > (1 << 20))
            return ox_node_fail(r, REMAT_ERR_PARSE, "attribute %s value %lld is out of range",
                             name, (long long)a->ints[i]);
        v[i] = a->ints[i];
    }
    *given = true;
    return REMAT_OK;
}

remat_status ox_attr_ints_upto(const struct rd *r, const char *name, int64_t *v, size_t max,
                               size_t *n)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    *n = 0;
    if (!a)
        return REMAT_OK;
    if (a->n_ints > max)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "attribute %s has %zu values (at most "
                            "%zu)", name, a->n_ints, max);
    for (size_t i = 0; i < a->n_ints; i++)
        v[i] = a->ints[i];
    *n = a->n_ints;
    return REMAT_OK;
}

const Onnx__TensorProto *ox_attr_tensor(const struct rd *r, const char *name)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    return a ? a->t : NULL;
}

bool ox_attr_str_is(const struct rd *r, const char *name, const char *want,
                        const char *dflt)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    if (!a || !a->has_s)
        return !strcmp(dflt, want);
    return a->s.len == strlen(want) && !memcmp(a->s.data, want, a->s.len);
}

/* ------------------------------------------------------------------ the model */

/* One data input: float, 1 to 4 dimensions of known size (a symbolic first one is the
 * batch); the first input's first dimension is the batch that --batch replaces. */
static remat_status read_one_input(struct rd *r, const Onnx__ValueInfoProto *in, bool first)
{
    int64_t shape[4];
    int nd, ty;
    int32_t v;
    bool ids;

    if (!in->name || !*in->name)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: an input has no name", r->label);
    ty = in->type && in->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
         in->type->tensor_type && in->type->tensor_type->shape
             ? in->type->tensor_type->elem_type : -1;
    ids = ty == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || ty == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    if (ty != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && !ids)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: input '%s' is not a float tensor (or "
                          "int64/int32 token ids) of known rank", r->label, in->name);
    nd = (int)in->type->tensor_type->shape->n_dim;
    if (nd < 1 || nd > (ids ? 3 : 4))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: input '%s' has %d dimensions (1 to %d "
                          "expected)", r->label, in->name, nd, ids ? 3 : 4);
    for (int i = 0; i < nd; i++) {
        const Onnx__TensorShapeProto__Dimension *d = in->type->tensor_type->shape->dim[i];
        bool known = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;

        if (!known && i > 0)
            return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: input '%s' dimension %d is "
                              "symbolic; remat needs its size", r->label, in->name, i);
        shape[i] = known ? d->dim_value : r->batch_file > 0 ? r->batch_file : 1;
        if (shape[i] <= 0 || shape[i] > ((int64_t)1 << 31))
            return REMAT_FAIL(REMAT_ERR_PARSE, "%s: input '%s' dimension %d is %lld", r->label,
                              in->name, i, (long long)shape[i]);
    }
    if (first) {
        r->batch_file = shape[0];
        r->batch = r->batch > 0 ? r->batch : shape[0];
    }
    if (shape[0] == r->batch_file)
        shape[0] = r->batch;
    r->has_tokens = r->has_tokens || ids;
    v = ids ? remat_graph_tokens(r->g, in->name, nd, shape)
            : remat_graph_input(r->g, in->name, nd, shape);
    if (v < 0)
        return REMAT_FAIL(remat_graph_status(r->g), "%s: input '%s': %s", r->label, in->name,
                          remat_errmsg());
    return ox_define(r, in->name, (struct ent){.kind = E_ACT, .value = v});
}

/* The graph's data inputs, those that are not initializers (at least one). */
static remat_status read_input(struct rd *r, const Onnx__GraphProto *gp)
{
    remat_status st;
    int n = 0;

    for (size_t i = 0; i < gp->n_input; i++) {
        const struct ent *e = ox_lookup(r, gp->input[i]->name);

        if (e && e->kind == E_TENSOR)
            continue; /* an initializer listed as an input (older exports) */
        if ((st = read_one_input(r, gp->input[i], n++ == 0)))
            return st;
    }
    if (!n)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: the graph has no input", r->label);
    return REMAT_OK;
}

/* The loss on the logits: (batch, classes) get a softmax cross-entropy against labels;
 * (batch, seq, vocab) a token cross-entropy against target tokens of shape (batch, seq),
 * a new int32 value "targets" (a language model's next tokens). */
static remat_status add_loss(struct rd *r, int32_t logits, const char *name)
{
    int64_t s[4];
    int nd = (int)ox_shape_of(r, logits, s);
    remat_status st;
    int32_t ins[2], loss;

    if (nd == 2) {
        if ((st = zoo_class_loss(r->g, logits)))
            return REMAT_FAIL(st, "%s: adding the loss: %s", r->label, remat_errmsg());
        return REMAT_OK;
    }
    if (nd != 3)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: the output '%s' has %d dimensions; remat "
                          "trains (batch, classes) or (batch, seq, vocab) logits", r->label,
                          name, nd);
    ins[0] = logits;
    ins[1] = remat_graph_tokens(r->g, "targets", 2, s);
    loss = remat_graph_add(r->g, REMAT_OP_TOKEN_CE, ins, 2, NULL, "loss");
    if (loss < 0 || (st = remat_graph_set_loss(r->g, loss)))
        return REMAT_FAIL(remat_graph_status(r->g), "%s: adding the loss: %s", r->label,
                          remat_errmsg());
    return REMAT_OK;
}

static remat_status read_model(struct rd *r, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    struct ent *out;
    remat_status st;
    int32_t v;

    r->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;

        if (!d || !*d || !strcmp(d, "ai.onnx"))
            r->opset = (int)m->opset_import[i]->version;
    }
    if (r->opset < 0)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: no opset for the default domain", r->label);
    if (r->opset < OPSET_MIN || r->opset > OPSET_MAX)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: opset %d; remat reads opsets %d to %d "
                          "(export with opset_version in that range)", r->label, r->opset,
                          OPSET_MIN, OPSET_MAX);
    if (!gp)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: no graph", r->label);
    if (r->cover) {
        r->cover->opset = r->opset;
        ox_coverage(gp, r->cover);
    }
    if ((st = ox_check_coverage(r, gp)))
        return st;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];

        if (!t->name || !*t->name)
            return REMAT_FAIL(REMAT_ERR_PARSE, "%s: initializer %zu has no name", r->label, i);
        if ((st = ox_define(r, t->name, (struct ent){.kind = E_TENSOR, .t = t})))
            return st;
    }
    if ((st = read_input(r, gp)))
        return st;
    r->gp = gp;
    for (size_t i = 0; i < gp->n_node; i++) {
        r->node = gp->node[i];
        r->node_i = i;
        if ((st = ox_read_node(r)))
            return st;
    }
    if (gp->n_output != 1 || !gp->output[0]->name)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: %zu graph outputs; remat trains one, "
                          "the logits", r->label, gp->n_output);
    out = ox_lookup(r, gp->output[0]->name);
    if (out && out->kind == E_PEND && (st = ox_pend_build(r, out, &v)))
        return st;
    if (!out || out->kind != E_ACT)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: the output '%s' is not computed by the graph",
                          r->label, gp->output[0]->name);
    r->w->output = out->value;
    return r->no_loss ? REMAT_OK : add_loss(r, out->value, gp->output[0]->name);
}

remat_status remat_onnx_read_buffer(const void *data, size_t n, const char *label,
                                    const remat_onnx_opts *o, const remat_allocator *a,
                                    remat_graph **graph, remat_onnx_weights **weights)
{
    return onnx_read_mem(data, n, label, o, a, graph, weights, NULL);
}

remat_status onnx_read_mem(const void *data, size_t n, const char *label,
                           const remat_onnx_opts *o, const remat_allocator *a,
                           remat_graph **graph, remat_onnx_weights **weights,
                           struct onnx_cover *c)
{
    struct rd r = {.label = label ? label : "ONNX model", .a = a, .cover = c};
    Onnx__ModelProto *m = NULL;
    remat_status st;

    if (!graph || !weights)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the graph or the weights");
    *graph = NULL;
    *weights = NULL;
    if (!data && n)
        return REMAT_FAIL(REMAT_ERR_ARG, "no data");
    if (!n)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: empty file", r.label);
    if (n > ONNX_MAX_BYTES)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: %zu bytes; ONNX files stop at 2 GiB",
                          r.label, n);
    r.batch = o && o->batch > 0 ? o->batch : 0;
    r.no_loss = o && o->no_loss;
    m = onnx__model_proto__unpack(NULL, n, data);
    if (!m)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: not an ONNX model (the protobuf does not "
                          "decode)", r.label);
    r.w = core_calloc(a, 1, sizeof *r.w);
    if (!r.w) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r.label);
        goto out;
    }
    if (a)
        r.w->al = *a;
    if ((st = remat_graph_new(a, &r.g)))
        goto out;
    if ((st = read_model(&r, m)))
        goto out;
    if ((st = remat_graph_status(r.g)))
        goto out;
    *graph = r.g;
    *weights = r.w;
    r.g = NULL;
    r.w = NULL;
out:
    for (size_t i = 0; i < r.n_names; i++)
        core_strfree(a, r.names[i]);
    core_free(a, r.names, sizeof *r.names * r.cap_names);
    core_free(a, r.tab, sizeof *r.tab * r.cap);
    free_made(&r);
    remat_graph_free(r.g);
    remat_onnx_weights_free(r.w);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}
