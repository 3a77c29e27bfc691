/*
 * params.c - the trainer's resident block: parameters, their gradients and the
 * optimizer's state, the input batch and labels, batch-norm running statistics;
 * initialisation, the update (SGD or AdamW), the checksum and the parameter file
 * (docs/formats.md; the optimizer's state is not saved).
 */
#include "exec/exec.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

/* Whether parameter v is laid out with an earlier one (a later row block of a split
 * tensor), so that params_order skips it where the graph lists it. */
static bool is_later_part(const struct gvalue *gv, int32_t v)
{
    return gv->part_of >= 0 && gv->part_of != v;
}

size_t params_order(const remat_graph *g, int32_t *order)
{
    size_t n = 0;

    for (int32_t v = 0; v < (int32_t)g->values.n; v++) {
        const struct gvalue *gv = graph_value(g, v);

        if (gv->kind != VK_PARAM || is_later_part(gv, v))
            continue;
        if (order)
            order[n] = v;
        n++;
        for (int32_t u = v + 1; gv->part_of == v && u < (int32_t)g->values.n; u++)
            if (graph_value(g, u)->part_of == v) {
                if (order)
                    order[n] = u;
                n++;
            }
    }
    return n;
}

/* The element count and rows (first dimension) of v's whole tensor: v itself, or with
 * the later row blocks of a split tensor when v is its first. */
static int64_t whole_numel(const remat_graph *g, int32_t v, int64_t *rows)
{
    const struct gvalue *gv = graph_value(g, v);
    int64_t n = graph_numel(gv), r = gv->shape[0];

    for (int32_t u = v + 1; gv->part_of == v && u < (int32_t)g->values.n; u++)
        if (graph_value(g, u)->part_of == v) {
            n += graph_numel(graph_value(g, u));
            r += graph_value(g, u)->shape[0];
        }
    if (rows)
        *rows = r;
    return n;
}

remat_status params_setup(remat_trainer *t)
{
    const remat_graph *g = t->g;
    size_t np = 0, other = 0, at;

    for (size_t v = 0; v < g->values.n; v++) {
        const struct gvalue *gv = graph_value(g, (int32_t)v);

        if (gv->kind == VK_PARAM)
            np += (size_t)graph_numel(gv);
        else if (gv->kind == VK_INPUT || gv->kind == VK_LABEL)
            other += (size_t)graph_numel(gv);
    }
    other += (size_t)g->bn_state;
    t->n_param_floats = np;
    t->pb = tgraph_param_block(np, t->o.optimizer, t->accumulate, t->ranks,
                               t->tg->shard_optimizer, t->tg->bucket);
    t->block_floats = t->pb.total + other;
    t->block = t->be->alloc_shared ? t->be->alloc_shared(t->ctx, t->block_floats * sizeof(float))
                                   : t->be->alloc(t->ctx, t->block_floats * sizeof(float));
    if (!t->block)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "cannot allocate %zu bytes of parameters and "
                          "inputs", t->block_floats * sizeof(float));
    memset(t->block, 0, sizeof(float) * t->pb.total); /* the shards' padding stays 0 */
    t->grad = t->block + t->pb.padded;
    t->state = t->grad + t->pb.padded;
    t->state_first = t->pb.state < t->pb.padded ? (size_t)t->rank * t->pb.shard : 0;
    t->sum = t->state + (tgraph_param_copies(t->o.optimizer) - 2) * t->pb.state;
    t->recv = t->sum + t->pb.sum;
    at = 0;
    for (int32_t v = 0; v < (int32_t)g->values.n; v++) { /* in params_order's order */
        const struct gvalue *gv = graph_value(g, v);

        if (gv->kind != VK_PARAM || is_later_part(gv, v))
            continue;
        for (int32_t u = v; u < (int32_t)g->values.n; u++) {
            if (u > v && graph_value(g, u)->part_of != v)
                continue;
            t->vdata[u] = t->block + at;
            t->vgrad[u] = t->grad + at;
            at += (size_t)graph_numel(graph_value(g, u));
            if (gv->part_of != v)
                break; /* not split: v alone */
        }
    }
    REMAT_ASSERT(at == np);
    at = t->pb.total;
    for (size_t v = 0; v < g->values.n; v++) {
        const struct gvalue *gv = graph_value(g, (int32_t)v);

        if (gv->kind == VK_INPUT || gv->kind == VK_LABEL) {
            t->vdata[v] = t->block + at;
            at += (size_t)graph_numel(gv);
        }
    }
    for (size_t o = 0; o < g->ops.n; o++) {
        const struct gop *op = graph_op(g, (int32_t)o);
        size_t c;

        if (op->type != REMAT_OP_BATCH_NORM)
            continue;
        c = (size_t)graph_value(g, op->in[0])->shape[1];
        t->run_mean[o] = t->block + at;
        t->run_var[o] = t->block + at + c;
        at += 2 * c;
    }
    REMAT_ASSERT(at == t->block_floats);
    return REMAT_OK;
}

/* PyTorch's defaults: convolution and linear weights and biases uniform in
 * ±1/sqrt(fan_in); batch norm gamma 1, beta 0, running mean 0, running variance 1;
 * layer norm gamma 1, beta 0; an embedding's table uniform in ±sqrt(3) (variance 1, as
 * PyTorch's N(0, 1)). */
void params_init(remat_trainer *t)
{
    const remat_graph *g = t->g;

    for (size_t o = 0; o < g->ops.n; o++) {
        const struct gop *op = graph_op(g, (int32_t)o);
        int np = 0;

        for (int32_t i = 0; i < op->n_in; i++) {
            int32_t v = op->in[i];
            const struct gvalue *gv = graph_value(g, v);
            const struct gvalue *w;
            int64_t n = graph_numel(gv), fan_in;
            float bound;

            if (gv->kind != VK_PARAM)
                continue;
            np++;
            if (op->type == REMAT_OP_BATCH_NORM || op->type == REMAT_OP_LAYER_NORM) {
                for (int64_t k = 0; k < n; k++)
                    t->vdata[v][k] = np == 1 ? 1.0f : 0.0f;
                continue;
            }
            w = graph_value(g, op->in[i - np + 1]); /* the weight */
            fan_in = graph_numel(w) / w->shape[0];
            bound = op->type == REMAT_OP_EMBEDDING ? sqrtf(3.0f) /* variance 1 */
                                                   : 1.0f / sqrtf((float)fan_in);
            for (int64_t k = 0; k < n; k++)
                t->vdata[v][k] = bound * (2 * kernel_uniform(t->o.seed * 1000003u + (uint64_t)v,
                                                             (uint64_t)k) - 1);
        }
        if (op->type == REMAT_OP_BATCH_NORM) {
            size_t c = (size_t)graph_value(g, op->in[0])->shape[1];

            for (size_t k = 0; k < c; k++) {
                t->run_mean[o][k] = 0;
                t->run_var[o][k] = 1;
            }
        }
    }
}

/* ---------------------------------------------------------------- update */

static const char *const optimizer_names[] = {"sgd", "adamw"};
_Static_assert(sizeof optimizer_names / sizeof *optimizer_names == REMAT_OPTIMIZER_COUNT,
               "one name per optimizer");

/* True for x in [lo, hi) (NaN is not). */
static bool in_range(float x, float lo, float hi)
{
    return x >= lo && x < hi;
}

remat_status params_check(const remat_trainer *t)
{
    const remat_train_opts *o = &t->o;

    if ((unsigned)o->optimizer >= REMAT_OPTIMIZER_COUNT)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown optimizer %d", (int)o->optimizer);
    if (o->optimizer != t->tg->optimizer)
        return REMAT_FAIL(REMAT_ERR_ARG, "the trainer's optimizer is %s but the training "
                          "graph counts the state of %s in its resident bytes; make it with "
                          "remat_tgraph_opts.optimizer = the trainer's",
                          optimizer_names[o->optimizer], optimizer_names[t->tg->optimizer]);
    if (o->optimizer != REMAT_OPTIMIZER_ADAMW)
        return REMAT_OK;
    if (!in_range(o->beta1, 0, 1) || !in_range(o->beta2, 0, 1))
        return REMAT_FAIL(REMAT_ERR_ARG, "AdamW's betas must be in [0, 1) (0: the defaults "
                          "0.9, 0.999), not %g and %g", (double)o->beta1, (double)o->beta2);
    if (!in_range(o->eps, 0, INFINITY) || !in_range(o->lr, 0, INFINITY) ||
        !in_range(o->weight_decay, 0, INFINITY))
        return REMAT_FAIL(REMAT_ERR_ARG, "AdamW's eps, lr and weight decay must be "
                          "non-negative numbers, not %g, %g and %g", (double)o->eps,
                          (double)o->lr, (double)o->weight_decay);
    return REMAT_OK;
}

/* The scalars as torch.optim.AdamW (1.13) forms them: in double from the options (as
 * Python floats), each rounded to float32 once where the tensor op takes it. */
struct adamw_coef adamw_coef(const remat_train_opts *o, int64_t t)
{
    double lr = o->lr, wd = o->weight_decay;
    double b1 = o->beta1 ? o->beta1 : 0.9f, b2 = o->beta2 ? o->beta2 : 0.999f;
    double eps = o->eps ? o->eps : 1e-8f;
    struct adamw_coef c;

    c.decay = (float)(1 - lr * wd);
    c.beta1 = (float)b1;
    c.c1 = (float)(1 - b1);
    c.beta2 = (float)b2;
    c.c2 = (float)(1 - b2);
    c.step_size = (float)(lr / (1 - pow(b1, (double)t)));
    c.bc2_sqrt = (float)sqrt(1 - pow(b2, (double)t));
    c.eps = (float)eps;
    return c;
}

/*
 * torch.optim.AdamW (1.13, amsgrad and maximize off), each element in float32 in this
 * order (the library is built without contraction, so no step is fused):
 *   w = w * decay                      param.mul_(1 - lr * wd)
 *   m = m * beta1 + c1 * g             exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
 *   v = v * beta2 + (c2 * g) * g       exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
 *   d = sqrt(v) / bc2_sqrt + eps       (exp_avg_sq.sqrt() / sqrt(1 - beta2^t)).add_(eps)
 *   w = w - (step_size * m) / d        param.addcdiv_(exp_avg, d, value=-step_size)
 * PyTorch's vectorised add may fuse m's multiply-add (one rounding less), and its
 * scalars come from Python doubles where ours come from floats: the two agree to about
 * 1e-7 relative, not bit for bit. The cuda kernel (kernels/cuda/optim.cu) repeats this
 * order exactly.
 */
void adamw_update(float *w, const float *g, float *m, float *v, size_t n,
                  const struct adamw_coef *c)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) { /* each element alone: the same bits on any threads */
        float x = w[i] * c->decay, d;

        m[i] = m[i] * c->beta1 + c->c1 * g[i];
        v[i] = v[i] * c->beta2 + (c->c2 * g[i]) * g[i];
        d = sqrtf(v[i]) / c->bc2_sqrt + c->eps;
        w[i] = x - (c->step_size * m[i]) / d;
    }
}

/* torch.optim.SGD: d = g + wd * w; m = mu * m + d; w -= lr * m (n parameters). */
static remat_status sgd_update(remat_trainer *t, float *w, const float *gr, float *m,
                               size_t n)
{
    float lr = t->o.lr, mu = t->o.momentum, wd = t->o.weight_decay;

    if (t->be->sgd) /* on the device: the same formula */
        return t->be->sgd(t->ctx, w, gr, m, n, lr, mu, wd);
    for (size_t i = 0; i < n; i++) {
        float d = gr[i] + wd * w[i];

        m[i] = mu * m[i] + d;
        w[i] -= lr * m[i];
    }
    return REMAT_OK;
}

remat_status params_update(remat_trainer *t, size_t lo, size_t hi)
{
    size_t n = hi > lo ? hi - lo : 0;
    float *w = t->block + lo, *gr = t->grad + lo, *m = t->state + (lo - t->state_first);
    float *v = m + t->pb.state;
    struct adamw_coef c;

    if (!n)
        return REMAT_OK;
    if (t->o.optimizer != REMAT_OPTIMIZER_ADAMW)
        return sgd_update(t, w, gr, m, n);
    c = adamw_coef(&t->o, t->step + 1);
    if (t->be->adamw) /* on the device: the same order */
        return t->be->adamw(t->ctx, w, gr, m, v, n, &c);
    adamw_update(w, gr, m, v, n, &c);
    return REMAT_OK;
}

uint64_t remat_trainer_param_checksum(const remat_trainer *t)
{
    const unsigned char *p = (const unsigned char *)t->block;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < t->n_param_floats * sizeof(float); i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static float *find(remat_trainer *t, const char *name, int64_t *n);

remat_status remat_trainer_param(remat_trainer *t, const char *name, float **data,
                                 float **grad, int64_t *numel)
{
    int64_t n = 0;
    float *p;

    if (!t || !name)
        return REMAT_FAIL(REMAT_ERR_ARG, "no trainer or no name");
    for (size_t v = 0; v < t->g->values.n; v++) {
        const struct gvalue *gv = graph_value(t->g, (int32_t)v);

        if (t->vdata[v] && !strcmp(gv->name, name)) {
            if (data)
                *data = t->vdata[v];
            if (grad)
                *grad = t->vgrad[v];
            if (numel) /* a split tensor's first part names the whole */
                *numel = gv->kind == VK_PARAM ? whole_numel(t->g, (int32_t)v, NULL)
                                              : graph_numel(gv);
            return REMAT_OK;
        }
    }
    if ((p = find(t, name, &n))) { /* a batch-norm running statistic: no gradient */
        if (data)
            *data = p;
        if (grad)
            *grad = NULL;
        if (numel)
            *numel = n;
        return REMAT_OK;
    }
    return REMAT_FAIL(REMAT_ERR_ARG, "no parameter, running statistic or input named '%s'",
                      name);
}

/* ------------------------------------------------------------------ files */

#define MAGIC "REMATPRM"

static bool put(FILE *f, const void *p, size_t n)
{
    return fwrite(p, 1, n, f) == n;
}

remat_status remat_trainer_save(const remat_trainer *t, const char *path)
{
    FILE *f;
    uint32_t count = 0;
    bool ok;

    if (!t || !path)
        return REMAT_FAIL(REMAT_ERR_ARG, "no trainer or no path");
    f = fopen(path, "wb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    for (size_t v = 0; v < t->g->values.n; v++) {
        const struct gvalue *gv = graph_value(t->g, (int32_t)v);

        count += gv->kind == VK_PARAM && !is_later_part(gv, (int32_t)v);
    }
    for (size_t o = 0; o < t->g->ops.n; o++)
        count += 2 * (t->run_mean[o] != NULL);
    ok = put(f, MAGIC, 8) && put(f, &count, 4);
    for (size_t v = 0; ok && v < t->g->values.n; v++) { /* a split tensor whole, once */
        const struct gvalue *gv = graph_value(t->g, (int32_t)v);
        uint32_t len = (uint32_t)strlen(gv->name), nd = (uint32_t)gv->ndim;
        int64_t shape[4], n;

        if (gv->kind != VK_PARAM || is_later_part(gv, (int32_t)v))
            continue;
        memcpy(shape, gv->shape, sizeof shape);
        n = whole_numel(t->g, (int32_t)v, &shape[0]);
        ok = put(f, &len, 4) && put(f, gv->name, len) && put(f, &nd, 4) &&
             put(f, shape, 8 * nd) && put(f, t->vdata[v], sizeof(float) * (size_t)n);
    }
    for (size_t o = 0; ok && o < t->g->ops.n; o++) {
        const struct gop *op = graph_op(t->g, (int32_t)o);
        int64_t c;

        if (!t->run_mean[o])
            continue;
        c = graph_value(t->g, op->in[0])->shape[1];
        for (int k = 0; ok && k < 2; k++) {
            char name[300];
            uint32_t len, nd = 1;

            snprintf(name, sizeof name, "%s.%s", op->name, k ? "running_var" : "running_mean");
            len = (uint32_t)strlen(name);
            ok = put(f, &len, 4) && put(f, name, len) && put(f, &nd, 4) && put(f, &c, 8) &&
                 put(f, k ? t->run_var[o] : t->run_mean[o], sizeof(float) * (size_t)c);
        }
    }
    if (fclose(f) || !ok)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot write '%s'", path);
    return REMAT_OK;
}

/* The storage of a named parameter or running statistic, with its element count. */
static float *find(remat_trainer *t, const char *name, int64_t *n)
{
    for (size_t v = 0; v < t->g->values.n; v++) {
        const struct gvalue *gv = graph_value(t->g, (int32_t)v);

        if (gv->kind == VK_PARAM && !strcmp(gv->name, name)) {
            *n = whole_numel(t->g, (int32_t)v, NULL);
            return t->vdata[v];
        }
    }
    for (size_t o = 0; o < t->g->ops.n; o++) {
        const struct gop *op = graph_op(t->g, (int32_t)o);
        size_t l = strlen(op->name);

        if (!t->run_mean[o] || strncmp(name, op->name, l) || name[l] != '.')
            continue;
        *n = graph_value(t->g, op->in[0])->shape[1];
        if (!strcmp(name + l + 1, "running_mean"))
            return t->run_mean[o];
        if (!strcmp(name + l + 1, "running_var"))
            return t->run_var[o];
    }
    return NULL;
}

remat_status remat_trainer_load(remat_trainer *t, const char *path)
{
    FILE *f;
    char magic[8], name[300];
    uint32_t count, len, nd;
    struct stat sb;
    remat_status st = REMAT_OK;

    if (!t || !path)
        return REMAT_FAIL(REMAT_ERR_ARG, "no trainer or no path");
    f = fopen(path, "rb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!fstat(fileno(f), &sb) && (S_ISDIR(sb.st_mode) || (S_ISREG(sb.st_mode) && !sb.st_size))) {
        st = REMAT_FAIL(REMAT_ERR_IO, "%s: %s", path,
                        S_ISDIR(sb.st_mode) ? "is a directory" : "empty file");
        goto out;
    }
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MAGIC, 8) || fread(&count, 4, 1, f) != 1) {
        st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: not a remat parameter file", path);
        goto out;
    }
    for (uint32_t i = 0; i < count; i++) {
        int64_t dims[4], n = 1, want;
        float *dst;

        if (fread(&len, 4, 1, f) != 1 || len >= sizeof name || fread(name, 1, len, f) != len ||
            fread(&nd, 4, 1, f) != 1 || nd < 1 || nd > 4 || fread(dims, 8, nd, f) != nd) {
            st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: record %u is truncated or malformed", path, i);
            goto out;
        }
        name[len] = '\0';
        for (uint32_t d = 0; d < nd; d++)
            if (dims[d] <= 0 || !core_mul_i64(n, dims[d], &n)) {
                st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: '%s' has a bad dimension %lld", path,
                                name, (long long)dims[d]);
                goto out;
            }
        dst = find(t, name, &want);
        if (!dst || want != n) {
            st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: '%s' %s", path, name,
                            dst ? "has a different size in this model" : "is not in this model");
            goto out;
        }
        if (fread(dst, sizeof(float), (size_t)n, f) != (size_t)n) {
            st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: '%s' is truncated", path, name);
            goto out;
        }
    }
out:
    fclose(f);
    return st;
}
