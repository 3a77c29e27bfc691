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
 * Ops and their mapping: docs/onnx.md. Parameters are named after their initializers'
 * prefix ("layer1.0.conv1.weight" names the op "layer1.0.conv1"), so the names of a
 * PyTorch export carry over to remat_trainer_param and parameter files.
 *
 * Hostile files: the file is read whole (at most 2 GiB, protobuf's own limit) and
 * decoded by protobuf-c, whose allocations are bounded by the bytes it decodes; every
 * tensor's element count is checked against its data before it is copied, and every
 * shape goes through the graph builder's checks.
 */
#include "core/core.h"
#include "graph/graph.h"
#include "models/zoo.h"
#include "io/onnx.h"
#include "onnx.pb-c.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static struct ent *lookup(const struct rd *r, const char *name)
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
static remat_status define(struct rd *r, const char *name, struct ent e)
{
    struct ent *x;
    size_t k;

    if (!name || !*name)
        return REMAT_OK; /* an optional output left out */
    if ((x = lookup(r, name))) {
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
static remat_status node_fail(const struct rd *r, remat_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static remat_status node_fail(const struct rd *r, remat_status code, const char *fmt, ...)
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
static remat_status graph_fail(const struct rd *r)
{
    char msg[512];

    snprintf(msg, sizeof msg, "%s", remat_errmsg());
    return node_fail(r, remat_graph_status(r->g), "%s", msg);
}

/* ------------------------------------------------------------------ tensors */

/* The element count of t's dims (-1 when a dim is negative or the count overflows). */
static int64_t tensor_numel(const Onnx__TensorProto *t)
{
    int64_t n = 1;

    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !core_mul_i64(n, t->dims[i], &n) || n > ((int64_t)1 << 40))
            return -1;
    return n;
}

/* Copies a float tensor's values (float_data or raw_data, checked against its dims). */
static remat_status tensor_floats(const struct rd *r, const Onnx__TensorProto *t, float **out,
                                  int64_t *n_out)
{
    int64_t n = tensor_numel(t);
    float *p;

    *out = NULL;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "tensor '%s' has data type %d; remat "
                         "trains float32", t->name ? t->name : "", (int)t->data_type);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "tensor '%s' keeps its data in an "
                         "external file", t->name ? t->name : "");
    if (n < 0 || (t->has_raw_data ? t->raw_data.len != (size_t)n * 4
                                  : t->n_float_data != (size_t)n))
        return node_fail(r, REMAT_ERR_PARSE, "tensor '%s': its dims and its data disagree",
                         t->name ? t->name : "");
    p = core_alloc(r->a, sizeof(float) * (size_t)(n ? n : 1));
    if (!p)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory reading '%s'", r->label, t->name);
    if (t->has_raw_data)
        memcpy(p, t->raw_data.data, (size_t)n * 4); /* little-endian, as ONNX stores it */
    else
        memcpy(p, t->float_data, (size_t)n * 4);
    *out = p;
    *n_out = n;
    return REMAT_OK;
}

/* A small integer tensor (int64 or int32; shapes, pads, axes) into v[0..max). */
static remat_status tensor_ints(const struct rd *r, const Onnx__TensorProto *t, int64_t *v,
                                int max, int *n_out)
{
    int64_t n = tensor_numel(t);

    if (n < 0 || n > max)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "constant '%s' has %lld values, at most "
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
            return node_fail(r, REMAT_ERR_PARSE, "constant '%s' is not an integer tensor "
                             "whose data matches its dims", t->name ? t->name : "");
    }
    *n_out = (int)n;
    return REMAT_OK;
}

/* A boolean scalar constant (Dropout's training_mode). */
static remat_status tensor_bool(const struct rd *r, const Onnx__TensorProto *t, bool *v)
{
    if (tensor_numel(t) != 1)
        return node_fail(r, REMAT_ERR_PARSE, "'%s' should be a scalar", t->name ? t->name : "");
    if (t->has_raw_data && t->raw_data.len >= 1)
        *v = t->raw_data.data[0] != 0;
    else if (t->n_int32_data == 1)
        *v = t->int32_data[0] != 0;
    else if (t->n_int64_data == 1)
        *v = t->int64_data[0] != 0;
    else
        return node_fail(r, REMAT_ERR_PARSE, "'%s' has no value", t->name ? t->name : "");
    return REMAT_OK;
}

/* One float from a scalar constant (Clip's bounds, Dropout's ratio). */
static remat_status tensor_scalar(const struct rd *r, const Onnx__TensorProto *t, float *v)
{
    float *p = NULL;
    int64_t n = 0;
    remat_status st = tensor_floats(r, t, &p, &n);

    if (!st && n != 1)
        st = node_fail(r, REMAT_ERR_UNSUPPORTED, "'%s' should be a scalar", t->name);
    if (!st)
        *v = p[0];
    core_free(r->a, p, sizeof(float) * (size_t)(n ? n : 1));
    return st;
}

/* ------------------------------------------------------------------ node inputs */

static const char *in_name(const struct rd *r, size_t i)
{
    return i < r->node->n_input && r->node->input[i] && *r->node->input[i] ? r->node->input[i]
                                                                           : NULL;
}

/* Input i as an activation (a remat value). */
static remat_status in_act(const struct rd *r, size_t i, int32_t *v)
{
    const char *nm = in_name(r, i);
    const struct ent *e = lookup(r, nm);

    if (!nm)
        return node_fail(r, REMAT_ERR_PARSE, "input %zu is missing", i);
    if (!e)
        return node_fail(r, REMAT_ERR_PARSE, "reads '%s', which no earlier node, initializer "
                         "or graph input defines (a dangling name, or nodes out of "
                         "topological order)", nm);
    if (e->kind == E_DEAD)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "reads '%s', %s, which remat does not "
                         "produce", nm, e->why);
    if (e->kind != E_ACT)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu ('%s') is a constant where "
                         "remat needs an activation", i, nm);
    *v = e->value;
    return REMAT_OK;
}

/* Input i as a constant tensor (NULL when the optional input is absent). */
static remat_status in_tensor(const struct rd *r, size_t i, bool optional,
                              const Onnx__TensorProto **t)
{
    const char *nm = in_name(r, i);
    const struct ent *e = lookup(r, nm);

    *t = NULL;
    if (!nm) {
        if (optional)
            return REMAT_OK;
        return node_fail(r, REMAT_ERR_PARSE, "input %zu is missing", i);
    }
    if (!e)
        return node_fail(r, REMAT_ERR_PARSE, "reads '%s', which no earlier node, initializer "
                         "or graph input defines", nm);
    if (e->kind != E_TENSOR)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "input %zu ('%s') must be an initializer "
                         "or a constant", i, nm);
    *t = e->t;
    return REMAT_OK;
}

/* ------------------------------------------------------------------ attributes */

static const Onnx__AttributeProto *attr(const struct rd *r, const char *name)
{
    for (size_t i = 0; i < r->node->n_attribute; i++)
        if (r->node->attribute[i]->name && !strcmp(r->node->attribute[i]->name, name))
            return r->node->attribute[i];
    return NULL;
}

static int64_t attr_i(const struct rd *r, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(r, name);

    return a && a->has_i ? a->i : dflt;
}

static float attr_f(const struct rd *r, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = attr(r, name);

    return a && a->has_f ? a->f : dflt;
}

/* An ints attribute of exactly n values into v (absent: false, v untouched). */
static remat_status attr_ints(const struct rd *r, const char *name, int64_t *v, size_t n,
                              bool *given)
{
    const Onnx__AttributeProto *a = attr(r, name);

    *given = false;
    if (!a)
        return REMAT_OK;
    if (a->n_ints != n)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "attribute %s has %zu values; remat "
                         "handles 2-d ops (%zu)", name, a->n_ints, n);
    for (size_t i = 0; i < n; i++) {
        if (a->ints[i] < -(1 << 20) || a->ints[i] > (1 << 20))
            return node_fail(r, REMAT_ERR_PARSE, "attribute %s value %lld is out of range",
                             name, (long long)a->ints[i]);
        v[i] = a->ints[i];
    }
    *given = true;
    return REMAT_OK;
}

static bool attr_str_is(const struct rd *r, const char *name, const char *want,
                        const char *dflt)
{
    const Onnx__AttributeProto *a = attr(r, name);

    if (!a || !a->has_s)
        return !strcmp(dflt, want);
    return a->s.len == strlen(want) && !memcmp(a->s.data, want, a->s.len);
}

/* ------------------------------------------------------------------ building */

/* A unique op name: the prefix of the node's first weight initializer ("a.b.weight"
 * gives "a.b"), else the node's name, else its type and index. */
static remat_status op_name(struct rd *r, char *buf, size_t n)
{
    const char *w = in_name(r, 1);
    const struct ent *e = lookup(r, w);
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
static remat_status emit(struct rd *r, remat_op op, const int32_t *ins, int n,
                         const remat_attrs *at, int32_t *out)
{
    char name[256];
    remat_status st;
    int32_t v;

    if ((st = op_name(r, name, sizeof name)))
        return st;
    v = remat_graph_add(r->g, op, ins, n, at, name);
    if (v < 0)
        return graph_fail(r);
    if (out)
        *out = v;
    return define(r, r->node->output[0], (struct ent){.kind = E_ACT, .value = v});
}

/* Records the starting value of parameter "<op>.<leaf>" from tensor t, whose element
 * count must be want (the parameter remat made). */
static remat_status keep_weight(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                                int64_t want)
{
    remat_onnx_weights *w = r->w;
    char name[300];
    float *data = NULL;
    int64_t n = 0;
    remat_status st;

    if (!t)
        return REMAT_OK;
    if ((st = tensor_floats(r, t, &data, &n)))
        return st;
    if (n != want) {
        core_free(r->a, data, sizeof(float) * (size_t)(n ? n : 1));
        return node_fail(r, REMAT_ERR_SHAPE, "'%s' has %lld values; the op needs %lld",
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
static int64_t param_numel(const struct rd *r, int k)
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

static int64_t shape_of(const struct rd *r, int32_t v, int64_t s[4])
{
    return remat_graph_value_shape(r->g, v, s);
}

/* Marks outputs from index first on as produced by nothing remat keeps. */
static remat_status dead_outputs(struct rd *r, size_t first, const char *why)
{
    remat_status st = REMAT_OK;

    for (size_t i = first; i < r->node->n_output && !st; i++)
        st = define(r, r->node->output[i], (struct ent){.kind = E_DEAD, .why = why});
    return st;
}

/* kernel_shape, strides, pads (symmetric), dilations into at, from a 2-d op; with
 * auto_pad SAME_* the padding is worked out from the input's spatial size. */
static remat_status window(struct rd *r, int32_t x, int64_t kh, int64_t kw, remat_attrs *at)
{
    int64_t k[2] = {kh, kw}, s[2] = {1, 1}, p[4] = {0, 0, 0, 0}, d[2] = {1, 1}, xs[4];
    bool gk, gs, gp, gd;
    remat_status st;

    if ((st = attr_ints(r, "kernel_shape", k, 2, &gk)) || (st = attr_ints(r, "strides", s, 2, &gs)) ||
        (st = attr_ints(r, "pads", p, 4, &gp)) || (st = attr_ints(r, "dilations", d, 2, &gd)))
        return st;
    if (k[0] <= 0 || k[1] <= 0 || s[0] <= 0 || s[1] <= 0 || d[0] <= 0 || d[1] <= 0)
        return node_fail(r, REMAT_ERR_PARSE, "kernel, stride and dilation must be positive");
    if (attr_str_is(r, "auto_pad", "SAME_UPPER", "NOTSET") ||
        attr_str_is(r, "auto_pad", "SAME_LOWER", "NOTSET")) {
        if (shape_of(r, x, xs) != 4)
            return node_fail(r, REMAT_ERR_SHAPE, "auto_pad needs a 4-d input");
        for (int i = 0; i < 2; i++) {
            int64_t o = (xs[2 + i] + s[i] - 1) / s[i];
            int64_t tot = (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - xs[2 + i];

            tot = tot > 0 ? tot : 0;
            p[i] = p[i + 2] = tot / 2;
            if (tot % 2)
                return node_fail(r, REMAT_ERR_UNSUPPORTED, "auto_pad SAME with an odd total "
                                 "padding (%lld) is asymmetric; remat pads symmetrically",
                                 (long long)tot);
        }
    } else if (!attr_str_is(r, "auto_pad", "NOTSET", "NOTSET") &&
               !attr_str_is(r, "auto_pad", "VALID", "NOTSET")) {
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "unknown auto_pad");
    }
    if (p[0] != p[2] || p[1] != p[3])
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "asymmetric pads [%lld, %lld, %lld, %lld]; "
                         "remat pads both sides alike", (long long)p[0], (long long)p[1],
                         (long long)p[2], (long long)p[3]);
    if (p[0] < 0 || p[1] < 0)
        return node_fail(r, REMAT_ERR_PARSE, "negative pads");
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

/* ------------------------------------------------------------------ ops */

static remat_status op_conv(struct rd *r, bool transposed)
{
    const Onnx__TensorProto *w, *b;
    remat_attrs at = {0};
    int64_t g = attr_i(r, "group", 1), op[2] = {0, 0};
    int32_t x, y;
    bool given;
    remat_status st;

    if ((st = in_act(r, 0, &x)) || (st = in_tensor(r, 1, false, &w)) ||
        (st = in_tensor(r, 2, true, &b)))
        return st;
    if (w->n_dims != 4)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a %zu-d weight; remat convolves in 2-d",
                         w->n_dims);
    if (g <= 0 || g > (1 << 20))
        return node_fail(r, REMAT_ERR_PARSE, "group %lld", (long long)g);
    if ((st = window(r, x, w->dims[2], w->dims[3], &at)))
        return st;
    if (transposed && !attr_str_is(r, "auto_pad", "NOTSET", "NOTSET") &&
        !attr_str_is(r, "auto_pad", "VALID", "NOTSET"))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "auto_pad SAME on a transposed convolution; "
                         "give pads");
    at.groups = (int32_t)g;
    at.out_channels = transposed ? w->dims[1] * g : w->dims[0];
    at.bias = b != NULL;
    if (transposed) {
        if ((st = attr_ints(r, "output_padding", op, 2, &given)))
            return st;
        if (attr(r, "output_shape"))
            return node_fail(r, REMAT_ERR_UNSUPPORTED, "output_shape; give pads and "
                             "output_padding");
        at.out_pad_h = (int32_t)op[0];
        at.out_pad_w = (int32_t)op[1];
    }
    if ((st = emit(r, transposed ? REMAT_OP_CONV_TRANSPOSE2D : REMAT_OP_CONV2D, &x, 1, &at,
                   &y)))
        return st;
    if ((st = keep_weight(r, w, "weight", param_numel(r, 0))))
        return st;
    return keep_weight(r, b, "bias", param_numel(r, 1));
}

static remat_status op_batch_norm(struct rd *r)
{
    const Onnx__TensorProto *t[4];
    remat_attrs at = {0};
    int64_t xs[4];
    int32_t x;
    remat_status st;

    if ((st = in_act(r, 0, &x)))
        return st;
    /* remat trains with batch statistics: an inference-mode batch norm (training_mode 0
     * from opset 14, no running-statistics outputs before) would compute something else */
    if (r->opset >= 14 ? attr_i(r, "training_mode", 0) == 0
                       : r->node->n_output < 3 || !r->node->output[1] || !*r->node->output[1])
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "an inference-mode BatchNormalization; "
                         "export in training mode (torch.onnx.export(..., training="
                         "torch.onnx.TrainingMode.TRAINING))");
    for (int i = 0; i < 4; i++)
        if ((st = in_tensor(r, (size_t)i + 1, false, &t[i])))
            return st;
    if (shape_of(r, x, xs) < 2)
        return node_fail(r, REMAT_ERR_SHAPE, "needs a 2-d or 4-d input");
    at.eps = attr_f(r, "epsilon", 1e-5f);
    /* ONNX: running = running * momentum + batch * (1 - momentum); remat's is the other
     * weight (PyTorch's): running = (1 - m) running + m batch. */
    at.momentum = 1.0f - attr_f(r, "momentum", 0.9f);
    if (at.momentum <= 0 || at.momentum > 1)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "momentum %g leaves the running statistics "
                         "unchanged or out of [0, 1)", 1.0 - (double)at.momentum);
    if ((st = emit(r, REMAT_OP_BATCH_NORM, &x, 1, &at, NULL)) ||
        (st = keep_weight(r, t[0], "gamma", param_numel(r, 0))) ||
        (st = keep_weight(r, t[1], "beta", param_numel(r, 1))) ||
        (st = keep_weight(r, t[2], "running_mean", param_numel(r, -1))) ||
        (st = keep_weight(r, t[3], "running_var", param_numel(r, -1))))
        return st;
    return dead_outputs(r, 1, "a running statistic that batch norm updates in place");
}

static remat_status op_unary(struct rd *r, remat_op op, const remat_attrs *at)
{
    int32_t x;
    remat_status st = in_act(r, 0, &x);

    return st ? st : emit(r, op, &x, 1, at, NULL);
}

/* Makes the node's output the same value as its input (Identity, Dropout off, zero Pad). */
static remat_status alias(struct rd *r)
{
    int32_t x;
    remat_status st = in_act(r, 0, &x);

    return st ? st : define(r, r->node->output[0], (struct ent){.kind = E_ACT, .value = x});
}

static remat_status op_pool(struct rd *r, bool max)
{
    remat_attrs at = {0};
    int32_t x;
    remat_status st;

    if ((st = in_act(r, 0, &x)))
        return st;
    if (!attr(r, "kernel_shape"))
        return node_fail(r, REMAT_ERR_PARSE, "kernel_shape is required");
    if ((st = window(r, x, 1, 1, &at)))
        return st;
    if (at.dh != 1 || at.dw != 1)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "dilated pooling");
    at.dh = at.dw = 0;
    at.ceil_mode = attr_i(r, "ceil_mode", 0) != 0;
    if (max) {
        if (r->node->n_output > 1 && r->node->output[1] && *r->node->output[1])
            return node_fail(r, REMAT_ERR_UNSUPPORTED, "the Indices output");
        if (attr_i(r, "storage_order", 0) != 0)
            return node_fail(r, REMAT_ERR_UNSUPPORTED, "storage_order 1");
    } else {
        at.count_include_pad = attr_i(r, "count_include_pad", 0) != 0;
    }
    return emit(r, max ? REMAT_OP_MAX_POOL : REMAT_OP_AVG_POOL, &x, 1, &at, NULL);
}

static remat_status op_nary(struct rd *r, remat_op op)
{
    int32_t ins[64];
    int64_t s0[4], s1[4];
    size_t n = r->node->n_input;
    remat_status st;

    if (n < 1 || n > 64)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "%zu inputs (1 to 64)", n);
    for (size_t i = 0; i < n; i++)
        if ((st = in_act(r, i, &ins[i])))
            return st;
    if (op == REMAT_OP_CONCAT) {
        int64_t axis = attr_i(r, "axis", 1), nd = shape_of(r, ins[0], s0);

        if (axis != 1 && axis != 1 - nd)
            return node_fail(r, REMAT_ERR_UNSUPPORTED, "concatenation on axis %lld; remat "
                             "concatenates channels (axis 1)", (long long)axis);
    } else {
        for (size_t i = 1; i < n; i++) {
            int nd0 = (int)shape_of(r, ins[0], s0), nd1 = (int)shape_of(r, ins[i], s1);

            if (nd0 != nd1 || memcmp(s0, s1, sizeof(int64_t) * (size_t)nd0))
                return node_fail(r, REMAT_ERR_UNSUPPORTED, "inputs of different shapes "
                                 "(broadcasting)");
        }
    }
    return emit(r, op, ins, (int)n, NULL, NULL);
}

static remat_status op_flatten(struct rd *r)
{
    int64_t axis = attr_i(r, "axis", 1);

    if (axis != 1)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "axis %lld; remat flattens from axis 1",
                         (long long)axis);
    return op_unary(r, REMAT_OP_FLATTEN, NULL);
}

static remat_status op_reshape(struct rd *r)
{
    const Onnx__TensorProto *t;
    remat_attrs at = {0};
    int64_t v[4], xs[4];
    int n, nd;
    int32_t x;
    remat_status st;

    if ((st = in_act(r, 0, &x)) || (st = in_tensor(r, 1, false, &t)) ||
        (st = tensor_ints(r, t, v, 4, &n)))
        return st;
    nd = (int)shape_of(r, x, xs);
    at.ndim = n;
    for (int i = 0; i < n; i++) {
        if (v[i] == 0 && !attr_i(r, "allowzero", 0) && i < nd)
            v[i] = xs[i]; /* 0 copies the input's dimension */
        else if (i == 0 && v[i] == r->batch_file && r->batch != r->batch_file)
            v[i] = r->batch; /* the exported batch, replaced */
        at.shape[i] = v[i];
    }
    return emit(r, REMAT_OP_RESHAPE, &x, 1, &at, NULL);
}

static remat_status op_gemm(struct rd *r, bool matmul)
{
    const Onnx__TensorProto *w, *b = NULL;
    remat_attrs at = {0};
    int64_t xs[4];
    int32_t x;
    bool trans_b = matmul ? false : attr_i(r, "transB", 0) != 0;
    remat_status st;

    if ((st = in_act(r, 0, &x)) || (st = in_tensor(r, 1, false, &w)) ||
        (!matmul && (st = in_tensor(r, 2, true, &b))))
        return st;
    if (!matmul && (attr_f(r, "alpha", 1) != 1 || attr_f(r, "beta", 1) != 1 ||
                    attr_i(r, "transA", 0)))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "alpha, beta other than 1 or transA");
    if (w->n_dims != 2 || shape_of(r, x, xs) != 2)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "remat's linear layer takes a 2-d input "
                         "and a 2-d weight");
    at.out_channels = trans_b ? w->dims[0] : w->dims[1];
    at.bias = b != NULL;
    if (b && tensor_numel(b) != at.out_channels)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a bias of %lld values for %lld outputs "
                         "(broadcasting)", (long long)tensor_numel(b),
                         (long long)at.out_channels);
    if ((st = emit(r, REMAT_OP_LINEAR, &x, 1, &at, NULL)))
        return st;
    if (!trans_b) { /* the file's (in, out) weight, transposed to remat's (out, in) */
        int64_t in = w->dims[0], out = w->dims[1], n = 0;
        float *p = NULL, *q;

        if ((st = tensor_floats(r, w, &p, &n)))
            return st;
        q = core_alloc(r->a, sizeof(float) * (size_t)(n ? n : 1));
        if (!q) {
            core_free(r->a, p, sizeof(float) * (size_t)(n ? n : 1));
            return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        }
        for (int64_t i = 0; i < in; i++)
            for (int64_t o = 0; o < out; o++)
                q[o * in + i] = p[i * out + o];
        memcpy(p, q, sizeof(float) * (size_t)n);
        core_free(r->a, q, sizeof(float) * (size_t)(n ? n : 1));
        {
            Onnx__TensorProto tt = *w;

            tt.has_raw_data = 1;
            tt.raw_data.data = (uint8_t *)p;
            tt.raw_data.len = (size_t)n * 4;
            tt.n_float_data = 0;
            st = keep_weight(r, &tt, "weight", param_numel(r, 0));
        }
        core_free(r->a, p, sizeof(float) * (size_t)(n ? n : 1));
        if (st)
            return st;
    } else if ((st = keep_weight(r, w, "weight", param_numel(r, 0)))) {
        return st;
    }
    return keep_weight(r, b, "bias", param_numel(r, 1));
}

static remat_status op_dropout(struct rd *r)
{
    const Onnx__TensorProto *t;
    remat_attrs at = {0};
    float p = attr_f(r, "ratio", 0.5f);
    /* opset 11: training when the mask is asked for (as PyTorch exports it) */
    bool training = r->node->n_output > 1 && r->node->output[1] && *r->node->output[1];
    remat_status st;

    if (r->opset >= 12) { /* ratio and training_mode are inputs, training off by default */
        p = 0.5f;
        training = false;
        if ((st = in_tensor(r, 1, true, &t)) || (t && (st = tensor_scalar(r, t, &p))) ||
            (st = in_tensor(r, 2, true, &t)) || (t && (st = tensor_bool(r, t, &training))))
            return st;
    }
    if ((st = dead_outputs(r, 1, "dropout's mask")))
        return st;
    if (p < 0 || p >= 1)
        return node_fail(r, REMAT_ERR_PARSE, "ratio %g is not in [0, 1)", (double)p);
    if (p == 0 || !training)
        return alias(r); /* inference mode: the identity */
    at.p = p;
    return op_unary(r, REMAT_OP_DROPOUT, &at);
}

static remat_status op_clip(struct rd *r)
{
    const Onnx__TensorProto *t;
    float lo = -3.4e38f, hi = 3.4e38f;
    remat_status st;

    if (r->opset >= 11) {
        if ((st = in_tensor(r, 1, true, &t)) || (t && (st = tensor_scalar(r, t, &lo))) ||
            (st = in_tensor(r, 2, true, &t)) || (t && (st = tensor_scalar(r, t, &hi))))
            return st;
    }
    if (lo == 0 && hi >= 3.4e38f)
        return op_unary(r, REMAT_OP_RELU, NULL);
    if (!(lo < hi))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "Clip to [%g, %g]: remat clips to a "
                         "non-empty range", (double)lo, (double)hi);
    return op_unary(r, REMAT_OP_CLIP, &(remat_attrs){.clip_min = lo, .clip_max = hi});
}

static remat_status op_mul(struct rd *r)
{
    int32_t ins[2], t;
    int64_t s0[4], s1[4];
    remat_status st;

    if (r->node->n_input != 2)
        return node_fail(r, REMAT_ERR_PARSE, "%zu inputs, 2 expected", r->node->n_input);
    if ((st = in_act(r, 0, &ins[0])) || (st = in_act(r, 1, &ins[1])))
        return st;
    /* the (N, C, 1, 1) factor second */
    if (shape_of(r, ins[0], s0) == 4 && shape_of(r, ins[1], s1) == 4 && s0[2] * s0[3] == 1 &&
        s1[2] * s1[3] > 1) {
        t = ins[0];
        ins[0] = ins[1];
        ins[1] = t;
    }
    return emit(r, REMAT_OP_MUL, ins, 2, NULL, NULL);
}

static remat_status op_softmax(struct rd *r)
{
    int64_t xs[4], axis = attr_i(r, "axis", r->opset >= 13 ? -1 : 1);
    int32_t x;
    int nd;
    remat_status st;

    if ((st = in_act(r, 0, &x)))
        return st;
    nd = (int)shape_of(r, x, xs);
    if (axis < 0)
        axis += nd;
    if (axis != 1 || (nd != 2 && nd != 4))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "softmax over axis %lld of a %d-d tensor; "
                         "remat's is over the channels (axis 1) of a 2-d or 4-d one",
                         (long long)attr_i(r, "axis", r->opset >= 13 ? -1 : 1), nd);
    return emit(r, REMAT_OP_SOFTMAX, &x, 1, NULL, NULL);
}

static remat_status op_transpose(struct rd *r)
{
    const Onnx__AttributeProto *a = attr(r, "perm");
    remat_attrs at = {0};
    int64_t xs[4];
    int32_t x;
    int nd;
    remat_status st;

    if ((st = in_act(r, 0, &x)))
        return st;
    nd = (int)shape_of(r, x, xs);
    if (a) {
        if (a->n_ints != (size_t)nd)
            return node_fail(r, REMAT_ERR_PARSE, "perm has %zu entries for %d dimensions",
                             a->n_ints, nd);
        for (int i = 0; i < nd; i++) {
            if (a->ints[i] < 0 || a->ints[i] >= nd)
                return node_fail(r, REMAT_ERR_PARSE, "perm entry %lld", (long long)a->ints[i]);
            at.perm[i] = (int32_t)a->ints[i];
        }
    }
    return op_unary(r, REMAT_OP_TRANSPOSE, &at);
}

static remat_status op_pad(struct rd *r)
{
    const Onnx__TensorProto *t, *cv;
    remat_attrs at = {0};
    int64_t p[8];
    float c = 0;
    int n;
    remat_status st;

    if (!attr_str_is(r, "mode", "constant", "constant"))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a mode other than constant");
    if ((st = in_tensor(r, 1, false, &t)) || (st = tensor_ints(r, t, p, 8, &n)) ||
        (st = in_tensor(r, 2, true, &cv)) || (cv && (st = tensor_scalar(r, cv, &c))))
        return st;
    if (n != 8 || p[0] || p[1] || p[4] || p[5])
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "padding other than a 4-d tensor's height "
                         "and width");
    if (c != 0)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a constant value other than 0");
    if (!p[2] && !p[3] && !p[6] && !p[7])
        return alias(r);
    at.pad_t = (int32_t)p[2];
    at.pad_l = (int32_t)p[3];
    at.pad_b = (int32_t)p[6];
    at.pad_r = (int32_t)p[7];
    return op_unary(r, REMAT_OP_PAD, &at);
}

/* Resize (opset 11+) or Upsample: bilinear to a size, as PyTorch's interpolate exports. */
static remat_status op_resize(struct rd *r)
{
    const Onnx__TensorProto *scales = NULL, *sizes = NULL;
    remat_attrs at = {0};
    int64_t xs[4], v[4];
    int32_t x;
    int n;
    remat_status st;

    if ((st = in_act(r, 0, &x)) || shape_of(r, x, xs) != 4)
        return st ? st : node_fail(r, REMAT_ERR_UNSUPPORTED, "a resize of a non-4-d tensor");
    if (!attr_str_is(r, "mode", "linear", "nearest"))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a mode other than linear (bilinear)");
    if (attr_str_is(r, "coordinate_transformation_mode", "align_corners", "half_pixel"))
        at.align_corners = true;
    else if (!attr_str_is(r, "coordinate_transformation_mode", "half_pixel", "half_pixel") &&
             !attr_str_is(r, "coordinate_transformation_mode", "pytorch_half_pixel",
                          "half_pixel"))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a coordinate transformation other than "
                         "align_corners, half_pixel or pytorch_half_pixel");
    if ((st = in_tensor(r, strcmp(r->node->op_type, "Upsample") ? 2 : 1, true, &scales)) ||
        (strcmp(r->node->op_type, "Upsample") && (st = in_tensor(r, 3, true, &sizes))))
        return st;
    if (sizes && tensor_numel(sizes) > 0) {
        if ((st = tensor_ints(r, sizes, v, 4, &n)))
            return st;
        if (n != 4)
            return node_fail(r, REMAT_ERR_PARSE, "sizes needs 4 values");
        at.out_h = v[2];
        at.out_w = v[3];
    } else if (scales && tensor_numel(scales) == 4) {
        float *s = NULL;
        int64_t k = 0;

        if ((st = tensor_floats(r, scales, &s, &k)))
            return st;
        at.out_h = (int64_t)((double)xs[2] * s[2]);
        at.out_w = (int64_t)((double)xs[3] * s[3]);
        core_free(r->a, s, sizeof(float) * 4);
        /* ONNX maps coordinates with 1 / scale, remat (as PyTorch with sizes) with the
         * ratio of the sizes: the same only when the scale gives a whole size */
        if ((double)at.out_h != (double)xs[2] * s[2] || (double)at.out_w != (double)xs[3] * s[3])
            return node_fail(r, REMAT_ERR_UNSUPPORTED, "scales that do not give a whole output "
                             "size; give sizes");
    } else {
        return node_fail(r, REMAT_ERR_PARSE, "neither sizes nor 4 scales");
    }
    if (at.out_h < xs[2] || at.out_w < xs[3])
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "downsampling (%lldx%lld to %lldx%lld); "
                         "remat's bilinear resize upsamples", (long long)xs[2], (long long)xs[3],
                         (long long)at.out_h, (long long)at.out_w);
    return emit(r, REMAT_OP_UPSAMPLE_BILINEAR, &x, 1, &at, NULL);
}

static remat_status op_constant(struct rd *r)
{
    const Onnx__AttributeProto *a = attr(r, "value");

    if (!a || !a->t)
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "a constant other than a tensor 'value'");
    return define(r, r->node->output[0], (struct ent){.kind = E_TENSOR, .t = a->t});
}

static remat_status read_node(struct rd *r)
{
    const char *t = r->node->op_type ? r->node->op_type : "";

    if (r->node->domain && *r->node->domain && strcmp(r->node->domain, "ai.onnx"))
        return node_fail(r, REMAT_ERR_UNSUPPORTED, "domain '%s'", r->node->domain);
    if (r->node->n_output < 1 || !r->node->output[0] || !*r->node->output[0])
        return node_fail(r, REMAT_ERR_PARSE, "no output");
    if (!strcmp(t, "Conv"))
        return op_conv(r, false);
    if (!strcmp(t, "ConvTranspose"))
        return op_conv(r, true);
    if (!strcmp(t, "BatchNormalization"))
        return op_batch_norm(r);
    if (!strcmp(t, "Relu"))
        return op_unary(r, REMAT_OP_RELU, NULL);
    if (!strcmp(t, "Clip"))
        return op_clip(r);
    if (!strcmp(t, "MaxPool"))
        return op_pool(r, true);
    if (!strcmp(t, "AveragePool"))
        return op_pool(r, false);
    if (!strcmp(t, "GlobalAveragePool"))
        return op_unary(r, REMAT_OP_GLOBAL_AVG_POOL, NULL);
    if (!strcmp(t, "Add") || !strcmp(t, "Sum"))
        return op_nary(r, REMAT_OP_ADD);
    if (!strcmp(t, "Concat"))
        return op_nary(r, REMAT_OP_CONCAT);
    if (!strcmp(t, "Flatten"))
        return op_flatten(r);
    if (!strcmp(t, "Reshape"))
        return op_reshape(r);
    if (!strcmp(t, "Gemm"))
        return op_gemm(r, false);
    if (!strcmp(t, "MatMul"))
        return op_gemm(r, true);
    if (!strcmp(t, "Dropout"))
        return op_dropout(r);
    if (!strcmp(t, "Constant"))
        return op_constant(r);
    if (!strcmp(t, "Identity"))
        return alias(r);
    if (!strcmp(t, "Pad"))
        return op_pad(r);
    if (!strcmp(t, "LeakyRelu"))
        return op_unary(r, REMAT_OP_LEAKY_RELU,
                        &(remat_attrs){.alpha = attr_f(r, "alpha", 0.01f)});
    if (!strcmp(t, "Sigmoid"))
        return op_unary(r, REMAT_OP_SIGMOID, NULL);
    if (!strcmp(t, "Mul"))
        return op_mul(r);
    if (!strcmp(t, "Softmax"))
        return op_softmax(r);
    if (!strcmp(t, "Transpose"))
        return op_transpose(r);
    if (!strcmp(t, "Resize") || !strcmp(t, "Upsample"))
        return op_resize(r);
    return node_fail(r, REMAT_ERR_UNSUPPORTED, "remat has no %s (docs/onnx.md lists the ops "
                     "it reads)", t);
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
    return define(r, in->name, (struct ent){.kind = E_ACT, .value = v});
}

/* The graph's data inputs, those that are not initializers (at least one). */
static remat_status read_input(struct rd *r, const Onnx__GraphProto *gp)
{
    remat_status st;
    int n = 0;

    for (size_t i = 0; i < gp->n_input; i++) {
        const struct ent *e = lookup(r, gp->input[i]->name);

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
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];

        if (!t->name || !*t->name)
            return REMAT_FAIL(REMAT_ERR_PARSE, "%s: initializer %zu has no name", r->label, i);
        if ((st = define(r, t->name, (struct ent){.kind = E_TENSOR, .t = t})))
            return st;
    }
    if ((st = read_input(r, gp)))
        return st;
    for (size_t i = 0; i < gp->n_node; i++) {
        r->node = gp->node[i];
        r->node_i = i;
        if ((st = read_node(r)))
            return st;
    }
    if (gp->n_output != 1 || !gp->output[0]->name)
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: %zu graph outputs; remat trains one, "
                          "the logits", r->label, gp->n_output);
    out = lookup(r, gp->output[0]->name);
    if (!out || out->kind != E_ACT)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: the output '%s' is not computed by the graph",
                          r->label, gp->output[0]->name);
    if (!r->no_loss) {
        int64_t s[4];

        if (shape_of(r, out->value, s) != 2)
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
    remat_status st;

    if (!path)
        return REMAT_FAIL(REMAT_ERR_ARG, "no file name");
    f = fopen(path, "rb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
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
