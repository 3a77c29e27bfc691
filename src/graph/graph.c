/*
 * graph.c - building the forward graph: inputs, labels and ops, each op's parameters
 * created from its attributes, shapes inferred as ops are added.
 */
#include "graph/graph.h"

#include <string.h>

#define MAX_PARAMS 2

remat_status remat_graph_new(const remat_allocator *a, remat_graph **out)
{
    remat_graph *g;

    *out = NULL;
    g = core_calloc(a, 1, sizeof *g);
    if (!g)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a graph");
    if (a)
        g->al = *a;
    vec_init(&g->values, sizeof(struct gvalue), graph_al(g));
    vec_init(&g->ops, sizeof(struct gop), graph_al(g));
    g->loss = -1;
    *out = g;
    return REMAT_OK;
}

void remat_graph_free(remat_graph *g)
{
    remat_allocator al;

    if (!g)
        return;
    for (size_t i = 0; i < g->values.n; i++)
        core_strfree(graph_al(g), graph_value(g, (int32_t)i)->name);
    for (size_t i = 0; i < g->ops.n; i++) {
        struct gop *op = graph_op(g, (int32_t)i);

        core_free(graph_al(g), op->in, sizeof(int32_t) * (size_t)op->n_in);
        core_strfree(graph_al(g), op->name);
    }
    vec_fini(&g->values);
    vec_fini(&g->ops);
    al = g->al;
    core_free(al.fn ? &al : NULL, g, sizeof *g);
}

remat_status remat_graph_status(const remat_graph *g)
{
    return g ? g->err : REMAT_ERR_ARG;
}

/* Records the first failure; returns -1 for the caller to pass on. */
static int32_t fail(remat_graph *g, remat_status s)
{
    if (g && g->err == REMAT_OK)
        g->err = s;
    return -1;
}

static int32_t new_value(remat_graph *g, const struct gvalue *proto, const char *name,
                         const char *suffix)
{
    struct gvalue *v;
    char buf[256];
    int32_t id = (int32_t)g->values.n;

    if (g->values.n >= INT32_MAX / 2)
        return fail(g, REMAT_FAIL(REMAT_ERR_ARG, "too many values in the graph"));
    v = vec_push(&g->values);
    if (!v)
        return fail(g, REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory adding a value"));
    *v = *proto;
    v->part_of = -1;
    snprintf(buf, sizeof buf, "%s%s", name ? name : "", suffix ? suffix : "");
    v->name = core_strdup(graph_al(g), buf);
    if (!v->name) {
        g->values.n--;
        return fail(g, REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory naming a value"));
    }
    return id;
}

static bool shape_ok(int ndim, const int64_t *shape)
{
    int64_t n = 1;

    if (ndim < 1 || ndim > 4 || !shape)
        return false;
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0 || !core_mul_i64(n, shape[i], &n))
            return false;
    return n <= ((int64_t)1 << 40);
}

int32_t remat_graph_input(remat_graph *g, const char *name, int ndim, const int64_t *shape)
{
    struct gvalue v = {.kind = VK_INPUT, .elem_bytes = 4, .producer = -1, .view_of = -1};

    if (!g || g->err)
        return -1;
    if (!shape_ok(ndim, shape))
        return fail(g, REMAT_FAIL(REMAT_ERR_ARG, "input '%s': a shape needs 1 to 4 positive "
                                  "dimensions of at most 2^40 elements", name ? name : ""));
    v.ndim = ndim;
    memcpy(v.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return new_value(g, &v, name ? name : "input", NULL);
}

int32_t remat_graph_labels(remat_graph *g, const char *name, int64_t n)
{
    struct gvalue v = {.kind = VK_LABEL, .elem_bytes = 4, .producer = -1, .view_of = -1,
                       .ndim = 1, .shape = {n}};

    if (!g || g->err)
        return -1;
    if (!shape_ok(1, &n))
        return fail(g, REMAT_FAIL(REMAT_ERR_ARG, "labels '%s': bad count %lld",
                                  name ? name : "", (long long)n));
    return new_value(g, &v, name ? name : "labels", NULL);
}

static int32_t token_value(remat_graph *g, const char *name, int ndim, const int64_t *shape,
                           bool positions)
{
    struct gvalue v = {.kind = VK_LABEL, .elem_bytes = 4, .producer = -1, .view_of = -1,
                       .positions = positions};
    const char *what = positions ? "positions" : "tokens";

    if (!g || g->err)
        return -1;
    if (ndim > 3 || !shape_ok(ndim, shape))
        return fail(g, REMAT_FAIL(REMAT_ERR_ARG, "%s '%s': a shape needs 1 to 3 positive "
                                  "dimensions", what, name ? name : ""));
    v.ndim = ndim;
    memcpy(v.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return new_value(g, &v, name ? name : what, NULL);
}

int32_t remat_graph_tokens(remat_graph *g, const char *name, int ndim, const int64_t *shape)
{
    return token_value(g, name, ndim, shape, false);
}

int32_t remat_graph_positions(remat_graph *g, const char *name, int ndim, const int64_t *shape)
{
    return token_value(g, name, ndim, shape, true);
}

int32_t remat_graph_param(const remat_graph *g, int32_t value, int k)
{
    const struct gop *op;
    int32_t seen = 0;

    if (!g || value < 0 || (size_t)value >= g->values.n || k < 0 ||
        graph_value(g, value)->producer < 0)
        return -1;
    op = graph_op(g, graph_value(g, value)->producer);
    for (int32_t i = 0; i < op->n_in; i++)
        if (graph_value(g, op->in[i])->kind == VK_PARAM && seen++ == k)
            return op->in[i];
    return -1;
}

static bool numel_ok(const struct gvalue *v)
{
    return shape_ok(v->ndim, v->shape);
}

int32_t remat_graph_add(remat_graph *g, remat_op type, const int32_t *inputs, int n_inputs,
                        const remat_attrs *attrs, const char *name)
{
    const struct op_info *info;
    const struct gvalue *inv[64];
    const struct gvalue **in = inv;
    struct gvalue out, aux, params[MAX_PARAMS];
    remat_attrs at;
    int n_params = 0;
    double fwd_flops, bwd_flops;
    int32_t op_id, out_id, aux_id = -1, *ins = NULL;
    struct gop *op;
    remat_status s;
    char nbuf[32];

    if (!g || g->err)
        return -1;
    if ((unsigned)type >= REMAT_OP_COUNT)
        return fail(g, REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "unknown op type %d", (int)type));
    info = op_info(type);
    if (!name) {
        snprintf(nbuf, sizeof nbuf, "%s%zu", remat_op_name(type), g->ops.n);
        name = nbuf;
    }
    if (n_inputs < info->min_in || n_inputs > info->max_in || !inputs)
        return fail(g, REMAT_FAIL(REMAT_ERR_ARG, "op '%s' (%s): takes %d to %d inputs, got %d",
                                  name, remat_op_name(type), info->min_in,
                                  info->max_in > 1000 ? 1000000 : info->max_in, n_inputs));
    if ((size_t)n_inputs > REMAT_ARRAY_LEN(inv)) {
        in = core_calloc(graph_al(g), (size_t)n_inputs, sizeof *in);
        if (!in)
            return fail(g, REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory adding op '%s'", name));
    }
    for (int i = 0; i < n_inputs; i++) {
        const struct gvalue *v;
        bool label_slot = ((type == REMAT_OP_SOFTMAX_CE || type == REMAT_OP_TOKEN_CE) &&
                           i == 1) || (type == REMAT_OP_EMBEDDING && i == 0);
        bool param_slot = type == REMAT_OP_MATMUL && i == 1 && n_inputs == 2;

        if (inputs[i] < 0 || (size_t)inputs[i] >= g->values.n) {
            s = REMAT_FAIL(REMAT_ERR_ARG, "op '%s' (%s): input %d is not a value (id %d)",
                           name, remat_op_name(type), i, inputs[i]);
            goto fail;
        }
        v = graph_value(g, inputs[i]);
        if (v->kind == VK_AUX || (v->kind == VK_PARAM && !(param_slot && v->ndim == 2)) ||
            (v->kind == VK_LABEL) != label_slot) {
            s = REMAT_FAIL(REMAT_ERR_ARG, "op '%s' (%s): input %d ('%s') cannot be used here",
                           name, remat_op_name(type), i, v->name);
            goto fail;
        }
        in[i] = v;
    }
    memset(&out, 0, sizeof out);
    memset(&aux, 0, sizeof aux);
    memset(params, 0, sizeof params);
    memset(&at, 0, sizeof at);
    if (attrs)
        at = *attrs;
    s = info->infer(in, n_inputs, &at, &out, info->has_aux ? &aux : NULL, &n_params, params,
                    name);
    if (s)
        goto fail;
    /* every op's outputs are float32 (or int32 indices of the same size) */
    out.elem_bytes = 4;
    aux.elem_bytes = 4;
    for (int i = 0; i < n_params; i++)
        params[i].elem_bytes = 4;
    if (!numel_ok(&out) || (info->has_aux && !numel_ok(&aux))) {
        s = REMAT_FAIL(REMAT_ERR_SHAPE, "op '%s' (%s): the output would be empty or have "
                       "more than 2^40 elements", name, remat_op_name(type));
        goto fail;
    }
    for (int i = 0; i < n_params; i++)
        if (!numel_ok(&params[i])) {
            s = REMAT_FAIL(REMAT_ERR_SHAPE, "op '%s' (%s): parameter too large", name,
                           remat_op_name(type));
            goto fail;
        }

    fwd_flops = info->flops(in, n_inputs, &at, &out, false);
    bwd_flops = info->flops(in, n_inputs, &at, &out, true);
    ins = core_calloc(graph_al(g), (size_t)(n_inputs + n_params), sizeof *ins);
    if (!ins) {
        s = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory adding op '%s'", name);
        goto fail;
    }
    memcpy(ins, inputs, sizeof *ins * (size_t)n_inputs);
    if (in != inv)
        core_free(graph_al(g), in, sizeof *in * (size_t)n_inputs);
    in = NULL;

    op_id = (int32_t)g->ops.n;
    for (int i = 0; i < n_params; i++) {
        static const char *const wb[] = {".weight", ".bias"};
        static const char *const gb[] = {".gamma", ".beta"};

        params[i].kind = VK_PARAM;
        params[i].producer = -1;
        params[i].view_of = -1;
        ins[n_inputs + i] = new_value(g, &params[i], name,
                                      type == REMAT_OP_BATCH_NORM ? gb[i] : wb[i]);
        if (ins[n_inputs + i] < 0)
            goto fail_ins;
    }
    out.kind = VK_ACT;
    out.producer = op_id;
    out.view_of = info->is_view ? inputs[0] : -1;
    out_id = new_value(g, &out, name, NULL);
    if (out_id < 0)
        goto fail_ins;
    if (info->has_aux) {
        aux.kind = VK_AUX;
        aux.producer = op_id;
        aux.view_of = -1;
        aux_id = new_value(g, &aux, name, ".saved");
        if (aux_id < 0)
            goto fail_ins;
    }
    op = vec_push(&g->ops);
    if (!op) {
        fail(g, REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory adding op '%s'", name));
        goto fail_ins;
    }
    op->type = type;
    op->n_in = n_inputs + n_params;
    op->in = ins;
    op->out = out_id;
    op->aux = aux_id;
    op->at = at;
    op->fwd_flops = fwd_flops;
    op->bwd_flops = bwd_flops;
    op->name = core_strdup(graph_al(g), name);
    if (!op->name) {
        g->ops.n--;
        fail(g, REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory naming op '%s'", name));
        goto fail_ins;
    }
    if (type == REMAT_OP_BATCH_NORM)
        g->bn_state += 2 * params[0].shape[0]; /* running mean and variance */
    return out_id;

fail_ins:
    core_free(graph_al(g), ins, sizeof *ins * (size_t)(n_inputs + n_params));
    return -1;
fail:
    if (in && in != inv)
        core_free(graph_al(g), in, sizeof *in * (size_t)n_inputs);
    return fail(g, s);
}

remat_status remat_graph_set_loss(remat_graph *g, int32_t value)
{
    if (!g)
        return REMAT_FAIL(REMAT_ERR_ARG, "no graph");
    if (g->err)
        return g->err;
    if (value < 0 || (size_t)value >= g->values.n ||
        graph_value(g, value)->kind != VK_ACT || graph_numel(graph_value(g, value)) != 1)
        return fail(g, REMAT_FAIL(REMAT_ERR_ARG, "the loss must be a scalar op output "
                                  "(value %d is not)", value)),
               g->err;
    g->loss = value;
    return REMAT_OK;
}

int32_t remat_graph_n_ops(const remat_graph *g)
{
    return g ? (int32_t)g->ops.n : 0;
}

int32_t remat_graph_n_inputs(const remat_graph *g)
{
    int32_t n = 0;

    for (size_t v = 0; g && v < g->values.n; v++)
        n += graph_value(g, (int32_t)v)->kind == VK_INPUT;
    return n;
}

int32_t remat_graph_n_values(const remat_graph *g)
{
    return g ? (int32_t)g->values.n : 0;
}

int64_t remat_graph_n_params(const remat_graph *g)
{
    int64_t n = 0;

    for (size_t i = 0; g && i < g->values.n; i++) {
        const struct gvalue *v = graph_value(g, (int32_t)i);

        if (v->kind == VK_PARAM)
            n += graph_numel(v);
    }
    return n;
}

double graph_op_flops(const remat_graph *g, const struct gop *op, bool backward)
{
    (void)g;
    return backward ? op->bwd_flops : op->fwd_flops;
}

double remat_graph_forward_flops(const remat_graph *g)
{
    double f = 0;

    for (size_t i = 0; g && i < g->ops.n; i++)
        f += graph_op_flops(g, graph_op(g, (int32_t)i), false);
    return f;
}

int remat_graph_value_shape(const remat_graph *g, int32_t value, int64_t shape[4])
{
    const struct gvalue *v;

    if (!g || value < 0 || (size_t)value >= g->values.n)
        return -1;
    v = graph_value(g, value);
    memcpy(shape, v->shape, sizeof v->shape);
    return v->ndim;
}
