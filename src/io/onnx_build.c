/*
 * onnx_build.c - the ONNX reader's names and graph building: the table from ONNX names
 * to entries (open addressing, FNV-1a, grown at half full), unique op names after the
 * initializers ("layer1.0.conv1.weight" names the op "layer1.0.conv1"), adding ops,
 * keeping parameters' starting values, and initializers that became parameters (tied
 * weights). No protobuf struct is touched here (onnx_read.h's accessors).
 */
#include "io/onnx_read.h"

#include <stdio.h>
#include <string.h>
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

/* ------------------------------------------------------------------ building */

/* A unique op name: the prefix of r->base (an initializer the caller names the op after)
 * or of the node's first weight initializer ("a.b.weight" gives "a.b"), else the node's
 * name, else its type and index. */
/* A node name as an op name: PyTorch's scope path ("/blocks.0/attn/MatMul") with dots
 * for its slashes ("blocks.0.attn.MatMul"), so that ops without a parameter carry their
 * module's numbered prefix as those named after an initializer do (the blocks strategy
 * groups ops by it). */
static void scope_name(char *buf, size_t n, const char *node)
{
    size_t k = 0;

    node += *node == '/' && node[1];
    for (; *node && k + 1 < n; node++)
        buf[k++] = *node == '/' ? '.' : *node;
    buf[k] = '\0';
}

remat_status ox_op_name(struct rd *r, char *buf, size_t n)
{
    const char *w = r->base ? r->base : ox_in_name(r, 1);
    const struct ent *e = r->base ? NULL : ox_lookup(r, w);
    const char *dot = w ? strrchr(w, '.') : NULL;
    int k = 1;
    char base[200];

    if ((r->base || (e && e->kind == E_TENSOR)) && dot && dot > w && !strchr(dot, '/'))
        snprintf(base, sizeof base, "%.*s", (int)(dot - w), w);
    else if (r->base && *r->base)
        snprintf(base, sizeof base, "%s", r->base);
    else if (ox_node_name(r)[0])
        scope_name(base, sizeof base, ox_node_name(r));
    else
        snprintf(base, sizeof base, "%s_%zu", ox_node_type(r), r->node_i);
    r->base = NULL;
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

/* Adds op with the given activation inputs; defines out_name (when not NULL) as its value. */
remat_status ox_emit_as(struct rd *r, remat_op op, const int32_t *ins, int n,
                        const remat_attrs *at, const char *out_name, int32_t *out)
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
    return out_name ? ox_define(r, out_name, (struct ent){.kind = E_ACT, .value = v})
                    : REMAT_OK;
}

/* Adds op with the given activation inputs; defines the node's first output. */
remat_status ox_emit(struct rd *r, remat_op op, const int32_t *ins, int n,
                     const remat_attrs *at, int32_t *out)
{
    return ox_emit_as(r, op, ins, n, at, ox_out_name(r, 0), out);
}

/* data, a 2-d tensor t's values, transposed. */
static remat_status transpose_in_place(struct rd *r, const Onnx__TensorProto *t, float *data,
                                       int64_t n)
{
    int64_t d[2];
    float *q;

    if (ox_tensor_dims(t, d, 2) != 2) {
        core_free(r->a, data, sizeof(float) * (size_t)(n ? n : 1));
        return ox_node_fail(r, REMAT_ERR_SHAPE, "'%s' is not 2-d", ox_tensor_name(t));
    }
    q = core_alloc(r->a, sizeof(float) * (size_t)(n ? n : 1));
    if (!q) {
        core_free(r->a, data, sizeof(float) * (size_t)(n ? n : 1));
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    }
    for (int64_t i = 0; i < d[0]; i++)
        for (int64_t o = 0; o < d[1]; o++)
            q[o * d[0] + i] = data[i * d[1] + o];
    memcpy(data, q, sizeof(float) * (size_t)n);
    core_free(r->a, q, sizeof(float) * (size_t)(n ? n : 1));
    return REMAT_OK;
}

/* Records the starting value of parameter "<op>.<leaf>" from tensor t, whose element
 * count must be want (the parameter remat made). */
static remat_status keep(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                         int64_t want, bool transposed)
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
                            ox_tensor_name(t), (long long)n, (long long)want);
    }
    if (transposed && (st = transpose_in_place(r, t, data, n)))
        return st;
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

remat_status ox_keep_weight(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                            int64_t want)
{
    return keep(r, t, leaf, want, false);
}

remat_status ox_keep_weight_t(struct rd *r, const Onnx__TensorProto *t, const char *leaf,
                              int64_t want)
{
    return keep(r, t, leaf, want, true);
}

/* Notes that initializer t is parameter k of the op whose output is value. */
remat_status ox_own_param(struct rd *r, const Onnx__TensorProto *t, int32_t value, int k)
{
    if (r->n_params == r->cap_params) {
        size_t cap = r->cap_params ? 2 * r->cap_params : 32;
        struct owned_param *p = core_realloc(r->a, r->params, sizeof *p * r->cap_params,
                                             sizeof *p * cap);

        if (!p)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        r->params = p;
        r->cap_params = cap;
    }
    r->params[r->n_params++] = (struct owned_param){t, value, k};
    return REMAT_OK;
}

const struct owned_param *ox_find_param(const struct rd *r, const Onnx__TensorProto *t)
{
    for (size_t i = 0; i < r->n_params; i++)
        if (r->params[i].t == t)
            return &r->params[i];
    return NULL;
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

    for (size_t i = first; i < ox_n_out(r) && !st; i++)
        st = ox_define(r, ox_out_name(r, i), (struct ent){.kind = E_DEAD, .why = why});
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

