/*
 * autodiff.c - from the forward graph to the training graph.
 *
 * A value needs a gradient when it depends on a parameter and the loss depends on it.
 * Each forward op whose inputs need a gradient gets a backward op that reads the
 * gradient of its output (except the loss, whose gradient is the constant 1), the
 * forward values the op table says it reads, and adds into the gradients of its
 * inputs. Views get no backward: their gradient buffer is their base's, so their
 * readers add into it directly.
 */
#include "graph/tgraph.h"

#include <string.h>

static double kusumoto_cost(remat_op t)
{
    return t == REMAT_OP_CONV2D || t == REMAT_OP_CONV_TRANSPOSE2D ? 10 : 1;
}

/* Marks which values depend on a parameter (dep) and which the loss depends on (reach). */
static remat_status mark_grads(const remat_graph *g, bool *dep, bool *reach)
{
    for (size_t i = 0; i < g->values.n; i++)
        dep[i] = graph_value(g, (int32_t)i)->kind == VK_PARAM;
    for (size_t o = 0; o < g->ops.n; o++) {
        const struct gop *op = graph_op(g, (int32_t)o);

        for (int32_t i = 0; i < op->n_in; i++)
            dep[op->out] = dep[op->out] || dep[op->in[i]];
    }
    reach[g->loss] = true;
    for (size_t o = g->ops.n; o-- > 0;) {
        const struct gop *op = graph_op(g, (int32_t)o);

        if (reach[op->out])
            for (int32_t i = 0; i < op->n_in; i++)
                reach[op->in[i]] = true;
    }
    return REMAT_OK;
}

static int32_t *take(remat_tgraph *tg, size_t *used, int32_t n)
{
    int32_t *p = tg->ints + *used;

    *used += (size_t)n;
    REMAT_ASSERT(*used <= tg->n_ints);
    return p;
}

static void fill_op(const remat_graph *g, remat_tgraph *tg, int32_t o, const bool *needs,
                    size_t *used)
{
    const struct gop *gop = graph_op(g, o);
    const struct op_info *info = op_info(gop->type);
    struct top *op = &tg->ops[o];
    int32_t n_gout = 0;

    op->type = (int32_t)gop->type;
    op->is_view = info->is_view;
    op->file_index = o;
    op->fwd_flops = graph_op_flops(g, gop, false);
    op->bwd_flops = graph_op_flops(g, gop, true);
    op->n_in = gop->n_in;
    op->in = take(tg, used, gop->n_in);
    memcpy(op->in, gop->in, sizeof(int32_t) * (size_t)gop->n_in);
    op->n_out = gop->aux >= 0 ? 2 : 1;
    op->out = take(tg, used, op->n_out);
    op->out[0] = gop->out;
    if (gop->aux >= 0)
        op->out[1] = gop->aux;

    for (int32_t i = 0; i < gop->n_in; i++)
        n_gout += needs[gop->in[i]];
    /* An op whose output the loss does not read (an unused branch) has no backward:
     * no gradient flows into its output. */
    op->has_bwd = n_gout > 0 && !info->is_view && (needs[gop->out] || gop->out == g->loss);
    if (!op->has_bwd)
        return;
    op->n_gout = n_gout;
    op->gout = take(tg, used, n_gout);
    n_gout = 0;
    for (int32_t i = 0; i < gop->n_in; i++)
        if (needs[gop->in[i]])
            op->gout[n_gout++] = gop->in[i];
    if (gop->out != g->loss) {
        op->n_gin = 1;
        op->gin = take(tg, used, 1);
        op->gin[0] = gop->out;
    }
    op->saved = take(tg, used, 4);
    if (info->bwd_reads & BR_IN0)
        op->saved[op->n_saved++] = gop->in[0];
    if (info->bwd_reads & BR_IN1)
        op->saved[op->n_saved++] = gop->in[1];
    if (info->bwd_reads & BR_OUT)
        op->saved[op->n_saved++] = gop->out;
    if ((info->bwd_reads & BR_AUX) && gop->aux >= 0)
        op->saved[op->n_saved++] = gop->aux;
}

remat_status remat_tgraph_from_graph(const remat_graph *g, const remat_tgraph_opts *o,
                                     remat_tgraph **out)
{
    remat_tgraph_opts opts = {0};
    const remat_allocator *a;
    remat_tgraph *tg = NULL;
    bool *dep = NULL, *reach = NULL;
    size_t n_ints = 0, used = 0, n_values, align;
    remat_status s;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the training graph");
    *out = NULL;
    if (!g)
        return REMAT_FAIL(REMAT_ERR_ARG, "no graph");
    if (g->err)
        return REMAT_FAIL(g->err, "the graph failed while it was built: %s",
                          remat_status_name(g->err));
    if (g->loss < 0)
        return REMAT_FAIL(REMAT_ERR_ARG, "the graph has no loss (remat_graph_set_loss)");
    if (o)
        opts = *o;
    if ((unsigned)opts.cost > REMAT_COST_KUSUMOTO)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown cost model %d", (int)opts.cost);
    if ((unsigned)opts.optimizer >= REMAT_OPTIMIZER_COUNT)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown optimizer %d", (int)opts.optimizer);
    align = opts.align ? opts.align : 64;
    a = graph_al(g);
    n_values = g->values.n;
    for (size_t i = 0; i < g->ops.n; i++)
        n_ints += (size_t)graph_op(g, (int32_t)i)->n_in * 2 + 2 + 1 + 4;

    dep = core_calloc(a, n_values, sizeof *dep);
    reach = core_calloc(a, n_values, sizeof *reach);
    if (!dep || !reach) {
        s = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in autodiff");
        goto out;
    }
    if ((s = tgraph_alloc(a, (int32_t)n_values, (int32_t)g->ops.n, n_ints, &tg)))
        goto out;
    mark_grads(g, dep, reach);
    tg->optimizer = opts.optimizer;

    for (size_t i = 0; i < n_values; i++) {
        const struct gvalue *gv = graph_value(g, (int32_t)i);
        struct tvalue *v = &tg->values[i];
        size_t bytes = (size_t)graph_numel(gv) * gv->elem_bytes;

        v->kind = gv->kind;
        v->producer = gv->producer;
        v->buf = gv->view_of >= 0 ? tg->values[gv->view_of].buf : (int32_t)i;
        v->bytes = gv->view_of >= 0 ? 0 : core_align_up(bytes, align);
        /* The loss's gradient is the constant 1: no buffer. */
        v->grad = dep[i] && reach[i] && (gv->kind == VK_ACT || gv->kind == VK_PARAM) &&
                  (int32_t)i != g->loss;
        dep[i] = v->grad; /* reused below as "needs a gradient" */
        if (gv->kind == VK_PARAM)
            tg->n_params += graph_numel(gv);
        if (gv->kind == VK_INPUT || gv->kind == VK_LABEL)
            tg->resident_bytes += bytes;
        v->name = core_strdup(a, gv->name);
        if (!v->name) {
            s = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in autodiff");
            goto out;
        }
    }
    tg->resident_bytes += (size_t)g->bn_state * 4;
    tg->accumulate = opts.accumulate > 1 ? opts.accumulate : 1;
    tg->ranks = opts.ranks > 1 ? opts.ranks : 1;
    tg->shard_optimizer = opts.shard_optimizer && tg->ranks > 1;
    tg->bucket = opts.bucket_bytes ? (opts.bucket_bytes + 3) / 4 : TGRAPH_BUCKET;
    tg->resident_bytes += sizeof(float) *
                          tgraph_param_block((size_t)tg->n_params, opts.optimizer,
                                             tg->accumulate, tg->ranks,
                                             tg->shard_optimizer, tg->bucket).total;
    for (size_t i = 0; i < g->ops.n; i++) {
        const struct gop *gop = graph_op(g, (int32_t)i);

        fill_op(g, tg, (int32_t)i, dep, &used);
        tg->ops[i].type_name = core_strdup(a, remat_op_name(gop->type));
        if (!tg->ops[i].type_name) {
            s = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in autodiff");
            goto out;
        }
        tg->forward_flops += tg->ops[i].fwd_flops;
        tg->values[gop->out].cost = opts.cost == REMAT_COST_KUSUMOTO
                                        ? kusumoto_cost(gop->type) : tg->ops[i].fwd_flops;
    }
    tgraph_finish(tg);
    *out = tg;
    tg = NULL;
out:
    core_free(a, dep, n_values * sizeof *dep);
    core_free(a, reach, n_values * sizeof *reach);
    remat_tgraph_free(tg);
    return s;
}
