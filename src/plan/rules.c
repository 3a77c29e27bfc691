/*
 * rules.c - the hand-written rules users apply to transformers today, as reference
 * strategies beside the planners:
 *
 * blocks     one checkpoint per block, what torch.utils.checkpoint around each
 *            transformer layer (or residual block) does: a block is the ops whose names
 *            share a numbered prefix ("h.3.", "encoder.layer.3.", "layer2.1."); only
 *            each block's last output is kept through the forward (with every value
 *            outside the blocks), and a block's inner values are recomputed once, from
 *            the kept ones, before its backward.
 * selective  Megatron-LM's selective recomputation (Korthikanti et al. 2022): keep
 *            everything but the attention core, the scores (the product that feeds a
 *            softmax_last), the softmax and its dropout, which are recomputed before
 *            the backward that reads them.
 *
 * Both are plans of fixed decisions: they do not search a budget (a budget they miss
 * is reported as such by remat_plan).
 */
#include "plan/planners.h"

#include <string.h>

/* The block of an op name: the length of its prefix up to and including the first
 * dot-separated component that is a number ("h.3.attn.q" -> 4, "h.3."), 0 if none. */
static size_t block_prefix(const char *name)
{
    const char *p = name;

    while (*p) {
        const char *end = strchr(p, '.');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        bool digits = n > 0;

        for (size_t i = 0; i < n; i++)
            digits = digits && p[i] >= '0' && p[i] <= '9';
        if (digits && end && p != name)
            return (size_t)(end - name) + 1;
        if (!end)
            return 0;
        p = end + 1;
    }
    return 0;
}

static const char *node_name(const remat_tgraph *tg, const struct dag *d, int32_t v)
{
    const struct top *op = &tg->ops[d->op[v]];

    return tg->values[op->out[0]].name;
}

/* blocks: kept[v] unless v is inside a block and not its last node (in topological
 * order). False when no op name has a numbered block. */
static bool keep_blocks(const remat_tgraph *tg, const struct dag *d, bool *kept)
{
    bool any = false;

    for (int32_t v = 0; v < d->n; v++) {
        const char *a = node_name(tg, d, v);
        size_t pa = block_prefix(a);

        kept[v] = true;
        if (!pa)
            continue;
        any = true;
        /* kept when no later node of the same block follows */
        for (int32_t w = v + 1; w < d->n; w++) {
            const char *b = node_name(tg, d, w);

            if (block_prefix(b) == pa && !strncmp(a, b, pa)) {
                kept[v] = false;
                break;
            }
        }
    }
    return any;
}

/* selective: every node kept but the attention core. False when there is none. */
static bool keep_selective(const remat_tgraph *tg, const struct dag *d, bool *kept)
{
    bool any = false;

    for (int32_t v = 0; v < d->n; v++)
        kept[v] = true;
    for (int32_t v = 0; v < d->n; v++) {
        const struct top *op = &tg->ops[d->op[v]];

        if (op->type != REMAT_OP_SOFTMAX_LAST)
            continue;
        any = true;
        kept[v] = false;
        for (int32_t k = d->pred_at[v]; k < d->pred_at[v + 1]; k++)
            if (tg->ops[d->op[d->pred[k]]].type == REMAT_OP_MATMUL)
                kept[d->pred[k]] = false;
        for (int32_t k = d->succ_at[v]; k < d->succ_at[v + 1]; k++)
            if (tg->ops[d->op[d->succ[k]]].type == REMAT_OP_DROPOUT)
                kept[d->succ[k]] = false;
    }
    return any;
}

remat_status plan_rules(const remat_tgraph *tg, const struct dag *d, remat_strategy strategy,
                        remat_schedule **out)
{
    const remat_allocator *a = tgraph_al(tg);
    bool *kept = core_calloc(a, (size_t)d->n + 1, sizeof *kept);
    bool blocks = strategy == REMAT_STRATEGY_BLOCKS, any;
    remat_status st;

    *out = NULL;
    if (!kept)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
    any = blocks ? keep_blocks(tg, d, kept) : keep_selective(tg, d, kept);
    if (!any)
        st = REMAT_FAIL(REMAT_ERR_UNSUPPORTED, blocks
                        ? "blocks: no op name has a numbered block (such as h.0.*, "
                          "encoder.layer.0.* or layer1.0.*) to checkpoint"
                        : "selective: the graph has no attention (softmax_last) to recompute");
    else if (!(st = lower_keep(tg, d, kept, false, out)))
        st = planner_finish(tg, out);
    if (st) {
        remat_schedule_free(*out);
        *out = NULL;
    }
    core_free(a, kept, sizeof *kept * ((size_t)d->n + 1));
    return st;
}
