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
 * no later node may read. The one graph output is the logits; a softmax cross-entropy
 * against labels becomes the loss, as for the zoo's classifiers.
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

/* ------------------------------------------------------------------ reader state */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

struct ent *ox_lookup(const struct rd *r, const char *name)
{
    size_t k;

    if (!r->cap || !name)
        return NULL;
    k = hash_str(name) & (r->cap - 1);
    while (r->tab[k].name) {
        if (!strcmp(r->tab[k].name, name))
            return &r->tab[k];
        k = (k + 1) & (r->cap - 1);
    }
    return NULL;
}

/* Defines name (a later definition replaces an earlier one, as in a graph that reuses a
 * name; ONNX forbids it but nothing is lost by taking the last). */
remat_status ox_define(struct rd *r, const char *name, struct ent e)
{
    struct ent *x;
    size_t k;

    if (!name || !*name)
        return REMAT_OK; /* an optional output left out */
    if ((x = ox_lookup(r, name))) {
        *x = e;
        x->name = name;
        return REMAT_OK;
    }
    if (2 * (r->used + 1) > r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        struct ent *t = core_calloc(r->a, cap, sizeof *t);

        if (!t)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        for (size_t i = 0; i < r->cap; i++)
            if (r->tab[i].name) {
                k = hash_str(r->tab[i].name) & (cap - 1);
                while (t[k].name)
                    k = (k + 1) & (cap - 1);
                t[k] = r->tab[i];
            }
        core_free(r->a, r->tab, sizeof *r->tab * r->cap);
        r->tab = t;
        r->cap = cap;
    }
    k = hash_str(name) & (r->cap - 1);
    while (r->tab[k].name)
        k = (k + 1) & (r->cap - 1);
    r->tab[k] = e;
    r->tab[k].name = name;
    r->used++;
    return REMAT_OK;
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

/* Input i as an activation (a remat value). */
remat_status ox_in_act(const struct rd *r, size_t i, int32_t *v)
{
    const char *nm = ox_in_name(r, i);
    const struct ent *e = ox_lookup(r, nm);

    if (!nm)
        return ox_node_fail(r, REMAT_ERR_PARSE, "input %zu is missing", i);
    if (!e)
        return ox_node_fail(r, REMAT_ERR_PARSE, "reads '%s', which no earlier node, initializer "
                         "or graph input defines (a dangling name, or nodes out of "
                         "topological order)", nm);
    if (e->kind == E_DEAD)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "reads '%s', %s, which remat does not "
                         "produce", nm, e->why);
    if (e->kind != E_ACT)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu ('%s') is a constant where "
                         "remat needs an activation", i, nm);
    *v = e->value;
    return REMAT_OK;
}

/* Input i as a constant tensor (NULL when the optional input is absent). */
remat_status ox_in_tensor(const struct rd *r, size_t i, bool optional,
                              const Onnx__TensorProto **t)
{
    const char *nm = ox_in_name(r, i);
    const struct ent *e = ox_lookup(r, nm);

    *t = NULL;
    if (!nm) {
        if (optional)
            return REMAT_OK;
        return ox_node_fail(r, REMAT_ERR_PARSE, "input %zu is missing", i);
    }
    if (!e)
        return ox_node_fail(r, REMAT_ERR_PARSE, "reads '%s', which no earlier node, initializer "
                         "or graph input defines", nm);
    if (e->kind != E_TENSOR)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu ('%s') must be an initializer "
                         "or a constant", i, nm);
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

bool ox_attr_str_is(const struct rd *r, const char *name, const char *want,
                        const char *dflt)
{
    const Onnx__AttributeProto *a = ox_attr(r, name);

    if (!a || !a->has_s)
        return !strcmp(dflt, want);
    return a->s.len == strlen(want) && !memcmp(a->s.data, want, a->s.len);
}

/* ------------------------------------------------------------------ building */

/* A unique op name: the prefix of the node's first weight initializer ("a.b.weight"
 * gives "a.b"), else the node's name, else its type and index. */
remat_status ox_op_name(struct rd *r, char *buf, size_t n)
{
    const char *w = ox_in_name(r, 1);
    const struct ent *e = ox_lookup(r, w);
    const char *dot = w ? strrchr(w, '.') : NULL;
    int k = 1;

    char base[200];

    if (e && e->kind == E_TENSOR && dot && dot > w)
        snprintf(base, sizeof base, "%.*s", (int)(dot - w), w);
    else if (r->node->name && *r->node->name)
        snprintf(base, sizeof base, "%s", r->node->name);
    else
        snprintf(base, sizeof base, "%s_%zu", r->node->op_type, r->node_i);
    snprintf(buf, n, "%s", base);
    for (;;) { /* unique: base, base#2, base#3, ... */
        bool taken = false;

        for (size_t i = 0; i < r->n_names && !taken; i++)
            taken = !strcmp(r->names[i], buf);
        if (!taken)
            break;
        snprintf(buf, n, "%s#%d", base, ++k);
    }
    if (r->n_names == r->cap_names) {
        size_t cap = r->cap_names ? 2 * r->cap_names : 64;
        char **nn = core_realloc(r->a, r->names, sizeof *nn * r->cap_names, sizeof *nn * cap);

        if (!nn)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        r->names = nn;
        r->cap_names = cap;
    }
    if (!(r->names[r->n_names] = core_strdup(r->a, buf)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    r->n_names++;
    return REMAT_OK;
}

/* Adds op with the given activation inputs; defines the node's first output. */
remat_status ox_emit(struct rd *r, remat_op op, const int32_t *ins, int n,
                         const remat_attrs *at, int32_t *out)
{
    char name[256];
    remat_status st;
    int32_t v;

    if ((st = ox_op_name(r, name, sizeof name)))
        return st;
    v = remat_graph_add(r->g, op, ins, n, at, name);
    if (v < 0)
        return ox_graph_fail(r);
    if (out)
        *out = v;
    return ox_define(r, r->node->output[0], (struct ent){.kind = E_ACT, .value = v});
}

/* Records the starting value of parameter "<op>.<leaf>" from tensor t, whose element
 * count must be want (the parameter remat made). */
remat_status ox_keep_weight(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                                int64_t want)
{
    remat_onnx_weights *w = r->w;
    char name[300];
    float *data = NULL;
    int64_t n = 0;
    remat_status st;

    if (!t)
        return REMAT_OK;
    if ((st = ox_tensor_floats(r, t, &data, &n)))
        return st;
    if (n != want) {
        core_free(r->a, data, sizeof(float) * (size_t)(n ? n : 1));
        return ox_node_fail(r, REMAT_ERR_SHAPE, "'%s' has %lld values; the op needs %lld",
                         t->name ? t->name : "", (long long)n, (long long)want);
    }
    snprintf(name, sizeof name, "%s.%s", r->names[r->n_names - 1], leaf);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        struct wrec *nw = core_realloc(r->a, w->w, sizeof *nw * w->cap, sizeof *nw * cap);

        if (!nw)
            goto nomem;
        w->w = nw;
        w->cap = cap;
    }
    w->w[w->n].data = data;
    w->w[w->n].n = n;
    if (!(w->w[w->n].name = core_strdup(r->a, name)))
        goto nomem;
    w->n++;
    return REMAT_OK;
nomem:
    core_free(r->a, data, sizeof(float) * (size_t)(n ? n : 1));
    return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
}

/* The element count of parameter k (0: weight or gamma, 1: bias or beta) of the op just
 * added, or of its channels (k = -1: batch norm's running statistics). */
int64_t ox_param_numel(const struct rd *r, int k)
{
    const struct gop *op = graph_op(r->g, (int32_t)r->g->ops.n - 1);
    int32_t n_data = op->n_in, v;

    if (k < 0)
        return graph_value(r->g, op->in[0])->shape[1];
    while (n_data > 0 && graph_value(r->g, op->in[n_data - 1])->kind == VK_PARAM)
        n_data--;
    v = n_data + k < op->n_in ? op->in[n_data + k] : -1;
    return v >= 0 ? graph_numel(graph_value(r->g, v)) : -1;
}

int64_t ox_shape_of(const struct rd *r, int32_t v, int64_t s[4])
{
    return remat_graph_value_shape(r->g, v, s);
}

/* Marks outputs from index first on as produced by nothing remat keeps. */
remat_status ox_dead_outputs(struct rd *r, size_t first, const char *why)
{
    remat_status st = REMAT_OK;

    for (size_t i = first; i < r->node->n_output && !st; i++)
        st = ox_define(r, r->node->output[i], (struct ent){.kind = E_DEAD, .why = why});
    return st;
}

/* kernel_shape, strides, pads (symmetric), dilations into at, from a 2-d op; with
 * auto_pad SAME_* the padding is worked out from the input's spatial size. */
remat_status ox_window(struct rd *r, int32_t x, int64_t kh, int64_t kw, remat_attrs *at)
{
    int64_t k[2] = {kh, kw}, s[2] = {1, 1}, p[4] = {0, 0, 0, 0}, d[2] = {1, 1}, xs[4];
    bool gk, gs, gp, gd;
    remat_status st;

    if ((st = ox_attr_ints(r, "kernel_shape", k, 2, &gk)) || (st = ox_attr_ints(r, "strides", s, 2, &gs)) ||
        (st = ox_attr_ints(r, "pads", p, 4, &gp)) || (st = ox_attr_ints(r, "dilations", d, 2, &gd)))
        return st;
    if (k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0 || d[0] <= 0 || d[1] <= 0)
        return ox_node_fail(r, REMAT_ERR_PARSE, "kernel, stride and dilation must be positive");
    if (ox_attr_str_is(r, "auto_pad", "SAME_UPPER", "NOTSET") ||
        ox_attr_str_is(r, "auto_pad", "SAME_LOWER", "NOTSET")) {
        if (ox_shape_of(r, x, xs) != 4)
            return ox_node_fail(r, REMAT_ERR_SHAPE, "auto_pad needs a 4-d input");
        for (int i = 0; i < 2; i++) {
            int64_t o = (xs[2 + i] + s[i] - 1) / s[i];
            int64_t tot = (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - xs[2 + i];

            tot = tot > 0 ? tot : 0;
            p[i] = p[i + 2] = tot / 2;
            if (tot % 2)
                return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "auto_pad SAME with an odd total "
                                 "padding (%lld) is asymmetric; remat pads symmetrically",
                                 (long long)tot);
        }
    } else if (!ox_attr_str_is(r, "auto_pad", "NOTSET", "NOTSET") &&
               !ox_attr_str_is(r, "auto_pad", "VALID", "NOTSET")) {
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "unknown auto_pad");
    }
    if (p[0] != p[2] || p[1] != p[3])
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "asymmetric pads [%lld, %lld, %lld, %lld]; "
                         "remat pads both sides alike", (long long)p[0], (long long)p[1],
                         (long long)p[2], (long long)p[3]);
    if (p[0] < 0 || p[1] < 0)
        return ox_node_fail(r, REMAT_ERR_PARSE, "negative pads");
    at->kh = (int32_t)k[0];
    at->kw = (int32_t)k[1];
    at->sh = (int32_t)s[0];
    at->sw = (int32_t)s[1];
    at->ph = (int32_t)p[0];
    at->pw = (int32_t)p[1];
    at->dh = (int32_t)d[0];
    at->dw = (int32_t)d[1];
    return REMAT_OK;
}

/* ------------------------------------------------------------------ the model */

/* One data input: float, 1 to 4 dimensions of known size (a symbolic first one is the
 * batch); the first input's first dimension is the batch that --batch replaces. */
static remat_status read_one_input(struct rd *r, const Onnx__ValueInfoProto *in, bool first)
{
    int64_t shape[4];
    int nd;
    int32_t v;

    if (!in->name || !*in->name)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: an input has no name", r->label);
    if (!in->type || in->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !in->type->tensor_type || !in->type->tensor_type->shape ||
        in->type->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: input '%s' is not a float tensor of "
                          "known rank", r->label, in->name);
    nd = (int)in->type->tensor_type->shape->n_dim;
    if (nd < 1 || nd > 4)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: input '%s' has %d dimensions (1 to 4 "
                          "expected)", r->label, in->name, nd);
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
    v = remat_graph_input(r->g, in->name, nd, shape);
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

static remat_status read_model(struct rd *r, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    const struct ent *out;
    remat_status st;

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
    if (!out || out->kind != E_ACT)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: the output '%s' is not computed by the graph",
                          r->label, gp->output[0]->name);
    if (!r->no_loss) {
        int64_t s[4];

        if (ox_shape_of(r, out->value, s) != 2)
            return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: the output '%s' is not 2-d (batch, "
                              "classes) logits", r->label, gp->output[0]->name);
    }
    r->w->output = out->value;
    if (r->no_loss)
        return REMAT_OK;
    if ((st = zoo_class_loss(r->g, out->value)))
        return REMAT_FAIL(st, "%s: adding the loss: %s", r->label, remat_errmsg());
    return REMAT_OK;
}

remat_status remat_onnx_read_buffer(const void *data, size_t n, const char *label,
                                    const remat_onnx_opts *o, const remat_allocator *a,
                                    remat_graph **graph, remat_onnx_weights **weights)
{
    struct rd r = {.label = label ? label : "ONNX model", .a = a};
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
    remat_graph_free(r.g);
    remat_onnx_weights_free(r.w);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

remat_status remat_onnx_read(const char *path, const remat_onnx_opts *o,
                             const remat_allocator *a, remat_graph **graph,
                             remat_onnx_weights **weights)
{
    FILE *f;
    long size;
    void *buf = NULL;
    struct stat sb;
    remat_status st;

    if (!path)
        return REMAT_FAIL(REMAT_ERR_ARG, "no file name");
    f = fopen(path, "rb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!fstat(fileno(f), &sb) && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_IO, "%s: is a directory", path);
    }
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_IO, "cannot read '%s'", path);
    }
    if ((size_t)size > ONNX_MAX_BYTES) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: %ld bytes; ONNX files stop at 2 GiB",
                          path, size);
    }
    buf = core_alloc(a, (size_t)size + 1);
    if (!buf) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory reading %ld bytes", path, size);
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        core_free(a, buf, (size_t)size + 1);
        return REMAT_FAIL(REMAT_ERR_IO, "cannot read '%s'", path);
    }
    fclose(f);
    st = remat_onnx_read_buffer(buf, (size_t)size, path, o, a, graph, weights);
    core_free(a, buf, (size_t)size + 1);
    return st;
}
