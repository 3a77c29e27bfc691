/*
 * exec.c - the executor: runs any valid schedule on a backend inside one arena laid
 * out in advance (mem/layout.c).
 *
 * Each step walks the schedule. A FWD or BWD takes the next instance of the layout for
 * every buffer it allocates (the layout was made by the same walk, so the order
 * matches), zeroes gradient buffers as it allocates them, builds a struct kop from the
 * graph's shapes and the live buffers' addresses, and calls the backend. A FREE gives
 * the bytes back. The live bytes are counted as the step runs: measured_peak_bytes.
 * OFFLOAD starts the backend's copy of a live value into its host-tier instance (laid
 * out like the arena), PREFETCH takes the value's next arena instance and starts the
 * copy back, WAIT blocks on the copy (the time is counted) and, for a copy back,
 * releases the host instance.
 * Dropout keys depend on (seed, step, op) only, and batch-norm running statistics are
 * updated on the first forward of an op in a step, so a recomputation repeats the same
 * bits. Nothing is allocated while a step runs.
 */
#include "exec/exec.h"
#include "io/tokens.h"
#include "plan/algos.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

remat_train_opts remat_train_opts_default(void)
{
    remat_train_opts o = {.backend = REMAT_BACKEND_REF, .seed = 1, .lr = 0.01f,
                          .momentum = 0.9f, .weight_decay = 1e-4f};

    return o;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void remat_trainer_free(remat_trainer *t)
{
    const remat_allocator *a;
    size_t nv, no, nb;

    if (!t)
        return;
    a = tgraph_al(t->tg);
    nv = (size_t)t->tg->n_values;
    no = (size_t)t->tg->n_ops;
    nb = 2 * nv;
    if (t->be) {
        if (t->arena)
            t->be->release(t->ctx, t->arena, t->lay.arena_bytes);
        if (t->block && t->be->release_shared)
            t->be->release_shared(t->ctx, t->block, t->block_floats * sizeof(float));
        else if (t->block)
            t->be->release(t->ctx, t->block, t->block_floats * sizeof(float));
        if (t->host && !t->host_mapped && t->be->release_pinned) {
            t->be->release_pinned(t->ctx, t->host, t->lay.host_bytes);
            t->host = NULL;
        }
    }
    dist_free(t);
    if (t->own_backend)
        remat_backend_free(t->backend);
    if (t->host && t->host_mapped)
        munmap(t->host, t->lay.host_bytes);
    else
        core_pages_free(t->host, t->lay.host_bytes);
    layout_fini(&t->lay);
    remat_schedule_free(t->own);
    core_free(a, t->host_off, sizeof *t->host_off * nb);
    core_free(a, t->ticket, sizeof *t->ticket * nb);
    core_free(a, t->host_state, sizeof *t->host_state * nb);
    core_free(a, t->vdata, sizeof *t->vdata * nv);
    core_free(a, t->vgrad, sizeof *t->vgrad * nv);
    core_free(a, t->run_mean, sizeof *t->run_mean * no);
    core_free(a, t->run_var, sizeof *t->run_var * no);
    core_free(a, t->cur_off, sizeof *t->cur_off * nb);
    core_free(a, t->live, sizeof *t->live * nb);
    core_free(a, t->fwd_count, sizeof *t->fwd_count * no);
    core_free(a, t->kin, sizeof *t->kin * (size_t)t->max_in);
    core_free(a, t->kdin, sizeof *t->kdin * (size_t)t->max_in);
    core_free(a, t->reads, sizeof *t->reads * (size_t)step_max_touch(t->tg));
    core_free(a, t->makes, sizeof *t->makes * (size_t)step_max_touch(t->tg));
    core_free(a, t, sizeof *t);
}

/* Training statistics over a single value per channel are undefined (the variance is
 * 0 and the output is beta whatever the input): refused, as PyTorch refuses them. */
static remat_status check_batch_norms(const remat_graph *g)
{
    for (int32_t o = 0; o < (int32_t)g->ops.n; o++) {
        const struct gop *op = graph_op(g, o);
        const struct gvalue *x;
        char dims[96] = "";

        if (op->type != REMAT_OP_BATCH_NORM)
            continue;
        x = graph_value(g, op->in[0]);
        if (graph_numel(x) > (x->shape[1] > 1 ? x->shape[1] : 1))
            continue;
        for (int32_t d = 0, n = 0; d < x->ndim && n >= 0 && n < (int)sizeof dims; d++)
            n += snprintf(dims + n, sizeof dims - (size_t)n, d ? "x%lld" : "%lld",
                          (long long)x->shape[d]);
        return REMAT_FAIL(REMAT_ERR_ARG, "batch norm '%s' would train on one value per "
                          "channel (its input is %s): the statistics are undefined; use a "
                          "larger batch or input", op->name ? op->name : "?", dims);
    }
    return REMAT_OK;
}

remat_status trainer_begin(remat_backend *b, const remat_graph *g, const remat_tgraph *tg,
                           const remat_train_opts *o, remat_trainer **out)
{
    const remat_allocator *a;
    remat_trainer *t;
    remat_status st;
    size_t nv, no, nb, mt;

    if (tg->n_values != (int32_t)g->values.n || tg->n_ops != (int32_t)g->ops.n)
        return REMAT_FAIL(REMAT_ERR_ARG, "the training graph was not made from this graph "
                          "(a graph dump has no shapes and cannot be trained)");
    if ((st = check_batch_norms(g)))
        return st;
    a = tgraph_al(tg);
    t = core_calloc(a, 1, sizeof *t);
    if (!t)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a trainer");
    t->g = g;
    t->tg = tg;
    t->o = o ? *o : remat_train_opts_default();
    t->debug = getenv("REMAT_DEBUG") != NULL;
    if (!b) {
        if ((st = remat_backend_new(&t->o, &b))) {
            core_free(a, t, sizeof *t);
            return st;
        }
        t->own_backend = true;
    } else if (b->o.backend != t->o.backend) {
        remat_backend_kind want = t->o.backend;

        core_free(a, t, sizeof *t);
        return REMAT_FAIL(REMAT_ERR_ARG, "a trainer for the %s backend on a %s backend",
                          remat_backend_name(want), remat_backend_name(b->o.backend));
    }
    t->backend = b;
    t->be = b->ops;
    t->ctx = b->ctx;
    t->o.threads = b->o.threads;
    nv = (size_t)tg->n_values;
    no = (size_t)tg->n_ops;
    nb = 2 * nv;
    mt = (size_t)step_max_touch(tg);
    for (int32_t i = 0; i < tg->n_ops; i++)
        t->max_in = tg->ops[i].n_in > t->max_in ? tg->ops[i].n_in : t->max_in;
    t->vdata = core_calloc(a, nv, sizeof *t->vdata);
    t->vgrad = core_calloc(a, nv, sizeof *t->vgrad);
    t->run_mean = core_calloc(a, no, sizeof *t->run_mean);
    t->run_var = core_calloc(a, no, sizeof *t->run_var);
    t->cur_off = core_calloc(a, nb, sizeof *t->cur_off);
    t->live = core_calloc(a, nb, sizeof *t->live);
    t->fwd_count = core_calloc(a, no, sizeof *t->fwd_count);
    t->kin = core_calloc(a, (size_t)t->max_in, sizeof *t->kin);
    t->kdin = core_calloc(a, (size_t)t->max_in, sizeof *t->kdin);
    t->reads = core_calloc(a, mt, sizeof *t->reads);
    t->makes = core_calloc(a, mt, sizeof *t->makes);
    t->host_off = core_calloc(a, nb, sizeof *t->host_off);
    t->ticket = core_calloc(a, nb, sizeof *t->ticket);
    t->host_state = core_calloc(a, nb, sizeof *t->host_state);
    if (!t->vdata || !t->vgrad || !t->run_mean || !t->run_var || !t->cur_off || !t->live ||
        !t->fwd_count || !t->kin || !t->kdin || !t->reads || !t->makes || !t->host_off ||
        !t->ticket || !t->host_state) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a trainer");
        goto fail;
    }
    *out = t;
    return REMAT_OK;
fail:
    remat_trainer_free(t);
    return st;
}

static void fill_kop(remat_trainer *t, int32_t o, struct kop *k);
static struct ktensor grad_tensor(const remat_trainer *t, int32_t v);

void dry_kop(remat_trainer *t, int32_t o, bool backward, struct kop *k)
{
    fill_kop(t, o, k);
    k->update_stats = !backward;
    if (!backward)
        return;
    k->dout = grad_tensor(t, graph_op(t->g, o)->out);
    if (t->tg->ops[o].n_gin == 0)
        k->dout.data = NULL; /* the loss: its gradient is 1 */
}

/* Prepares every op's forward and backward on the backend with the algorithm the
 * schedule chose (dry: tensors carry shapes and stand-in data), so that its kernels
 * exist before the first step, and checks that each step's scratch is what the kernel
 * takes (the table was made with other options, threads say, when it is not). */
static remat_status prepare_ops(remat_trainer *t)
{
    const remat_schedule *s = t->s;
    remat_status st = REMAT_OK;
    struct kop k;

    t->dry = true;
    for (size_t i = 0; i < s->n && !st; i++) {
        remat_step step = s->steps[i];
        bool bwd = step.kind == REMAT_STEP_BWD;
        size_t need;

        if ((step.kind != REMAT_STEP_FWD && !bwd) || t->tg->ops[step.id].is_view ||
            (!bwd && t->fwd_count[step.id]++) || (bwd && t->fwd_count[step.id] < 0))
            continue;
        if (bwd)
            t->fwd_count[step.id] = -1;
        dry_kop(t, step.id, bwd, &k);
        k.algo = s->algo[i] < 0 ? 0 : s->algo[i];
        if (!(st = t->be->prepare(t->ctx, &k, bwd, &need)) && need > s->scratch[i])
            st = REMAT_FAIL(REMAT_ERR_ARG, "the plan gives the %s of op %d (%s) %zu bytes of "
                            "scratch where the %s backend's %s kernel takes %zu: the plan's "
                            "kernels were listed with other options (threads?)",
                            bwd ? "backward" : "forward", (int)step.id,
                            t->tg->ops[step.id].type_name, s->scratch[i], t->be->name,
                            t->be->algo_name(k.algo), need);
    }
    memset(t->fwd_count, 0, sizeof *t->fwd_count * (size_t)t->tg->n_ops);
    t->dry = false;
    return st;
}

/* Free heap made resident before the blocks' mark (besides every page of the heap): the
 * kernels' per-call temporaries (oneDNN allocates a few hundred bytes per primitive it
 * runs) come and go inside it instead of touching a new page during the steps. */
#define KEEP_HEAP ((size_t)64 << 10)

remat_status remat_trainer_new(const remat_graph *g, const remat_tgraph *tg,
                               const remat_schedule *s, const remat_train_opts *o,
                               remat_trainer **out)
{
    return remat_trainer_on(NULL, g, tg, s, o, out);
}

remat_status remat_trainer_on(remat_backend *b, const remat_graph *g, const remat_tgraph *tg,
                              const remat_schedule *s, const remat_train_opts *o,
                              remat_trainer **out)
{
    remat_trainer *t = NULL;
    remat_sim_result r;
    remat_status st;
    struct rss_mark mark;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the trainer");
    *out = NULL;
    if (!g || !tg || !s)
        return REMAT_FAIL(REMAT_ERR_ARG, "a trainer needs a graph, its training graph and a "
                          "schedule");
    rss_release_free(); /* what was freed before is not resident at the mark either */
    rss_mark_begin(&mark); /* before anything below allocates */
    if ((st = remat_sim_run(tg, s, &r)) || (st = trainer_begin(b, g, tg, o, &t)))
        return st;
    if (s->algo && s->backend != t->o.backend) {
        st = REMAT_FAIL(REMAT_ERR_ARG, "the schedule's kernels were chosen for the %s backend; "
                        "train it there or plan again for %s", remat_backend_name(s->backend),
                        remat_backend_name(t->o.backend));
        goto fail;
    }
    if ((st = params_check(t)) || (st = dist_setup(t))) /* the training graph's options */
        goto fail;
    if (!s->algo) {
        /* planned without the kernels: each op and pass gets its fastest, counted here */
        remat_algos *a = NULL;
        int32_t nc, nf;

        if ((st = make_algos(t, true, &a)) || (st = schedule_copy(s, &t->own)) ||
            (st = algos_choose(tg, a, -1, SIZE_MAX, t->own, &nc, &nf)) ||
            (st = remat_sim_run(tg, t->own, &r))) {
            remat_algos_free(a);
            goto fail;
        }
        remat_algos_free(a);
        s = t->own;
    }
    t->s = s;
    t->activation_peak = r.activation_peak_bytes;
    t->workspace = r.scratch_peak_bytes;
    if ((st = layout_build(tg, s, 64, &t->lay)))
        goto fail;
    REMAT_ASSERT(t->lay.peak_bytes == t->activation_peak);
    if ((st = prepare_ops(t))) /* the kernels' descriptors (dry: no block needed) */
        goto fail;
    /* The tables are built (the schedule's maps, the layout, the kernels' descriptors: the
     * compiled plan): what planning freed (the packer's search log reaches megabytes) goes
     * back to the system and what they hold is measured. Then the heap is made resident
     * again for the kernels' temporaries, and the blocks' mark is taken: from here the
     * process grows by the blocks the plan counts. */
    rss_release_free();
    t->rss_tables = rss_mark_held(&mark).data_bytes;
    rss_keep_heap(KEEP_HEAP);
    rss_mark_begin(&t->rss);
    t->arena = t->be->alloc(t->ctx, t->lay.arena_bytes);
    if (!t->arena) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "cannot allocate the %zu-byte arena",
                        t->lay.arena_bytes);
        goto fail;
    }
    if ((st = trainer_host_tier(t)) || (st = params_setup(t)) || (st = dist_buckets_setup(t)))
        goto fail;
    params_init(t);
    t->rss_sampled = rss_current_bytes();
    *out = t;
    return REMAT_OK;
fail:
    remat_trainer_free(t);
    return st;
}

/* Stands in for data while preparing (never read or written). */
static float dry_data[16];

/* The tensor of value v: resident storage, or its buffer's live instance (NULL when
 * the buffer is not live; dry_data while preparing). */
static struct ktensor tensor(const remat_trainer *t, int32_t v)
{
    const struct gvalue *gv = graph_value(t->g, v);
    struct ktensor k = {NULL, {0, 0, 0, 0}, gv->ndim};
    int32_t b = t->tg->values[v].buf;

    memcpy(k.shape, gv->shape, sizeof k.shape);
    if (t->vdata[b])
        k.data = t->vdata[b];
    else if (t->tg->values[b].producer >= 0 && t->live[b])
        k.data = (float *)(t->arena + t->cur_off[b]);
    else if (t->dry)
        k.data = dry_data;
    return k;
}

static struct ktensor grad_tensor(const remat_trainer *t, int32_t v)
{
    struct ktensor k = tensor(t, v);
    int32_t b = t->tg->values[v].buf, gb = t->tg->n_values + b;

    k.data = NULL;
    if (!t->tg->values[v].grad)
        return k;
    if (t->vgrad[b])
        k.data = t->vgrad[b];
    else if (t->live[gb])
        k.data = (float *)(t->arena + t->cur_off[gb]);
    else if (t->dry)
        k.data = dry_data;
    return k;
}

/* Allocates the buffers a step makes (a PREFETCH: its buffer), each at its next
 * layout instance. */
static void allocate(remat_trainer *t, remat_step step, size_t *next_inst)
{
    int32_t nr, nm;

    if (step.kind == REMAT_STEP_PREFETCH) {
        nm = 1;
        t->makes[0] = step.id;
    } else {
        step_touch(t->tg, step, t->reads, &nr, t->makes, &nm);
    }
    for (int32_t j = 0; j < nm; j++) {
        int32_t b = t->makes[j];
        const struct instance *in;

        if (t->live[b])
            continue;
        REMAT_ASSERT(*next_inst < t->lay.n_inst);
        in = &t->lay.inst[(*next_inst)++];
        REMAT_ASSERT(in->buf == b);
        t->cur_off[b] = in->offset;
        if (t->debug)
            for (int32_t q = 0; q < 2 * t->tg->n_values; q++) {
                size_t qb = tgraph_buf_bytes(t->tg, q);

                /* no live buffer may share a byte with the new one */
                REMAT_ASSERT(!t->live[q] || !qb || !in->bytes ||
                             t->cur_off[q] >= in->offset + in->bytes ||
                             in->offset >= t->cur_off[q] + qb);
            }
        t->live[b] = true;
        t->live_bytes += in->bytes;
        if (b >= t->tg->n_values) /* a gradient: accumulated into, so zeroed first */
            t->be->zero(t->ctx, t->arena + in->offset, in->bytes);
    }
    if (t->live_bytes > t->measured_peak)
        t->measured_peak = t->live_bytes;
}

/* Fills the parts of a kop common to forward and backward. */
static void fill_kop(remat_trainer *t, int32_t o, struct kop *k)
{
    const struct gop *gop = graph_op(t->g, o);
    int32_t n = 0, np = 0;

    memset(k, 0, sizeof *k);
    k->type = gop->type;
    k->at = &gop->at;
    for (int32_t i = 0; i < gop->n_in; i++) {
        int32_t v = gop->in[i];

        if (graph_value(t->g, v)->kind == VK_PARAM) {
            if (np++ == 0) {
                k->w = tensor(t, v);
                k->dw = grad_tensor(t, v);
            } else {
                k->b = tensor(t, v);
                k->db = grad_tensor(t, v);
            }
            continue;
        }
        t->kin[n] = tensor(t, v);
        t->kdin[n] = grad_tensor(t, v);
        n++;
    }
    k->n_in = n;
    k->in = t->kin;
    k->din = t->kdin;
    k->out = tensor(t, gop->out);
    if (gop->aux >= 0)
        k->aux = tensor(t, gop->aux);
    k->running_mean = t->run_mean[o];
    k->running_var = t->run_var[o];
    k->key = mix(mix(t->o.seed, t->draw), (uint64_t)o);
}

/* OFFLOAD, PREFETCH and WAIT (the schedule is valid: the simulator checked it). */
static void host_step(remat_trainer *t, remat_step step, size_t *next_inst, size_t *next_host)
{
    int32_t b = step.id;
    size_t bytes = tgraph_buf_bytes(t->tg, b);
    double t0;

    switch (step.kind) {
    case REMAT_STEP_OFFLOAD: {
        const struct instance *h = &t->lay.host[(*next_host)++];

        REMAT_ASSERT(h->buf == b && t->live[b]);
        t->host_off[b] = h->offset;
        t->ticket[b] = t->be->copy_start(t->ctx, t->host + h->offset, t->arena + t->cur_off[b],
                                         bytes);
        t->host_state[b] = 1;
        t->host_live += bytes;
        if (t->host_live > t->measured_host)
            t->measured_host = t->host_live;
        t->transfer_bytes += bytes;
        break;
    }
    case REMAT_STEP_PREFETCH:
        REMAT_ASSERT(t->host_state[b] == 2 && !t->live[b]);
        allocate(t, step, next_inst);
        t->ticket[b] = t->be->copy_start(t->ctx, t->arena + t->cur_off[b], t->host + t->host_off[b],
                                         bytes);
        t->host_state[b] = 3;
        t->transfer_bytes += bytes;
        break;
    default: /* WAIT */
        t0 = core_seconds();
        t->be->copy_wait(t->ctx, t->ticket[b]);
        t->wait_seconds += core_seconds() - t0;
        if (t->host_state[b] == 3) {
            t->host_live -= bytes;
            t->host_state[b] = 0;
        } else {
            t->host_state[b] = 2;
        }
    }
}

/* The loss: the output's one float (read from the device on a device backend). */
static remat_status read_loss(remat_trainer *t, const struct kop *k, double *loss)
{
    float v;
    remat_status st = REMAT_OK;

    if (t->be->read)
        st = t->be->read(t->ctx, &v, k->out.data, sizeof v);
    else
        v = k->out.data[0];
    *loss = v;
    return st;
}

/* The forward hook with the op's output (and max pooling's winners) in host memory. */
static remat_status call_hook(remat_trainer *t, int32_t op, const struct kop *k)
{
    int64_t n = ktensor_numel(&k->out);
    bool argmax = k->type == REMAT_OP_MAX_POOL;
    float *out = k->out.data;
    int32_t *arg = argmax ? (int32_t *)k->aux.data : NULL;
    remat_status st = REMAT_OK;

    if (t->be->read) { /* copies for the call (the hook is for inspection) */
        out = malloc(sizeof(float) * (size_t)n);
        arg = argmax ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
        if (!out || (argmax && !arg))
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory for the forward hook");
        if (!st)
            st = t->be->read(t->ctx, out, k->out.data, sizeof(float) * (size_t)n);
        if (!st && argmax)
            st = t->be->read(t->ctx, arg, k->aux.data, sizeof(int32_t) * (size_t)n);
    }
    if (!st)
        t->hook(t->hook_ud, op, k->type, out, arg, n);
    if (t->be->read) {
        free(out);
        free(arg);
    }
    return st;
}

/* The algorithm and scratch of step i (its one-step instance, next in the layout). */
static void take_scratch(remat_trainer *t, size_t i, struct kop *k, size_t *next_inst)
{
    const struct instance *in;

    k->algo = t->s->algo[i] < 0 ? 0 : t->s->algo[i];
    if (!t->s->scratch[i])
        return;
    REMAT_ASSERT(*next_inst < t->lay.n_inst);
    in = &t->lay.inst[(*next_inst)++];
    REMAT_ASSERT(in->buf == -1 && in->first == i);
    k->scratch = t->arena + in->offset;
    k->scratch_bytes = in->bytes;
    t->live_bytes += in->bytes;
    if (t->live_bytes > t->measured_peak)
        t->measured_peak = t->live_bytes;
}

/* The layout's moves before step i (from *next on): each live instance to its new
 * offset, in the order listed (mem/relocate.h). */
static void apply_moves(remat_trainer *t, size_t i, size_t *next)
{
    const struct moves *mv = &t->lay.moves;
    double t0;

    if (*next >= mv->n || mv->m[*next].step != i)
        return;
    t0 = core_seconds();
    for (; *next < mv->n && mv->m[*next].step == i; (*next)++) {
        const struct move *m = &mv->m[*next];
        int32_t b = t->lay.inst[m->inst].buf;

        REMAT_ASSERT(b >= 0 && t->live[b] && t->cur_off[b] == m->from);
        if (t->host_state[b] == 1 || t->host_state[b] == 3) { /* its copy first */
            double w0 = core_seconds();

            REMAT_ASSERT(m->waits);
            t->be->copy_wait(t->ctx, t->ticket[b]);
            t->wait_seconds += core_seconds() - w0;
        }
        if (t->be->move)
            t->be->move(t->ctx, t->arena + m->to, t->arena + m->from, m->bytes);
        else
            memmove(t->arena + m->to, t->arena + m->from, m->bytes);
        t->cur_off[b] = m->to;
        t->moved_bytes += m->bytes;
    }
    t->move_seconds += core_seconds() - t0;
}

static remat_status run_steps(remat_trainer *t, double *loss)
{
    const remat_tgraph *tg = t->tg;
    size_t next_inst = 0, next_host = 0, next_move = 0;
    remat_status st = REMAT_OK;
    struct kop k;

    memset(t->live, 0, sizeof *t->live * 2 * (size_t)tg->n_values);
    memset(t->fwd_count, 0, sizeof *t->fwd_count * (size_t)tg->n_ops);
    t->live_bytes = 0;
    *loss = 0;
    for (size_t i = 0; i < t->s->n && !st; i++) {
        remat_step step = t->s->steps[i];

        apply_moves(t, i, &next_move);
        switch (step.kind) {
        case REMAT_STEP_FWD:
            allocate(t, step, &next_inst);
            if (tg->ops[step.id].is_view)
                break;
            fill_kop(t, step.id, &k);
            k.update_stats = t->fwd_count[step.id]++ == 0;
            take_scratch(t, i, &k, &next_inst);
            st = t->be->forward(t->ctx, &k);
            t->live_bytes -= k.scratch_bytes;
            if (!st && graph_op(t->g, step.id)->out == t->g->loss && k.update_stats)
                st = read_loss(t, &k, loss);
            if (!st && t->hook && k.update_stats)
                st = call_hook(t, step.id, &k);
            break;
        case REMAT_STEP_BWD:
            allocate(t, step, &next_inst);
            fill_kop(t, step.id, &k);
            k.dout = grad_tensor(t, graph_op(t->g, step.id)->out);
            if (tg->ops[step.id].n_gin == 0)
                k.dout.data = NULL; /* the loss: its gradient is 1 */
            take_scratch(t, i, &k, &next_inst);
            st = t->be->backward(t->ctx, &k);
            t->live_bytes -= k.scratch_bytes;
            break;
        case REMAT_STEP_FREE:
            t->live[step.id] = false;
            t->live_bytes -= tgraph_buf_bytes(tg, step.id);
            break;
        default:
            host_step(t, step, &next_inst, &next_host);
        }
        if (!st)
            st = dist_after_step(t, i); /* the reduction's buckets (dist.c) */
    }
    REMAT_ASSERT(st || (next_inst == t->lay.n_inst && next_host == t->lay.n_host &&
                        next_move == t->lay.moves.n &&
                        t->host_live == 0));
    return st;
}

/* Copies or draws the step's inputs and int32 values into their resident storage:
 * positions get 0 .. n-1 along their last axis; the entries of
 * remat_trainer_step_tokens (t->tokens) feed every other int32 value, else labels feeds
 * class labels; the rest are drawn in [0, vocab) of their readers. */
static void load_batch(remat_trainer *t, const float *const *inputs, const int32_t *labels)
{
    int32_t k = 0, j = 0;

    for (int32_t v = 0; v < t->tg->n_values; v++) {
        const struct gvalue *gv = graph_value(t->g, v);
        int64_t n = graph_numel(gv);

        if (gv->kind == VK_INPUT) {
            if (inputs && inputs[k])
                memcpy(t->vdata[v], inputs[k], sizeof(float) * (size_t)n);
            else
                for (int64_t i = 0; i < n; i++)
                    t->vdata[v][i] = 2 * kernel_uniform(mix(t->o.seed ^ 0x1d, t->draw),
                                                        (uint64_t)i) - 1;
            k++;
        } else if (gv->kind == VK_LABEL) {
            int32_t *lab = (int32_t *)t->vdata[v];
            int64_t vocab, last = gv->shape[gv->ndim - 1];
            remat_token_role role = tokens_role(t->g, v, &vocab, NULL);
            const int32_t *given = t->tokens ? t->tokens[j]
                                   : role == REMAT_TOKEN_LABELS ? labels : NULL;

            j++;
            for (int64_t i = 0; i < n; i++)
                lab[i] = role == REMAT_TOKEN_POSITIONS ? (int32_t)(i % last)
                         : given ? given[i]
                         : (int32_t)(kernel_uniform(mix(t->o.seed ^ 0x1b, t->draw),
                                                    (uint64_t)i) * (float)vocab);
        }
    }
}

/* A step (update) or its gradients alone fed token entries, checked first so that a
 * refused entry changes nothing. */
static remat_status run_tokens(remat_trainer *t, const int32_t *const *tokens, double *loss,
                               bool update)
{
    remat_status st;

    if (!t)
        return REMAT_FAIL(REMAT_ERR_ARG, "no trainer");
    if ((st = tokens_check(t->g, tokens)))
        return update ? dist_micro_done(t, st) : st; /* the other ranks learn of it */
    t->tokens = tokens;
    st = update ? remat_trainer_step(t, NULL, NULL, loss)
                : remat_trainer_gradients(t, NULL, NULL, loss);
    t->tokens = NULL;
    return st;
}

remat_status remat_trainer_step_tokens(remat_trainer *t, const int32_t *const *tokens,
                                       double *loss)
{
    return run_tokens(t, tokens, loss, true);
}

remat_status remat_trainer_gradients_tokens(remat_trainer *t, const int32_t *const *tokens,
                                            double *loss)
{
    return run_tokens(t, tokens, loss, false);
}

remat_status remat_trainer_gradients(remat_trainer *t, const float *const *inputs,
                                     const int32_t *labels, double *loss)
{
    double l = 0;
    remat_status st;

    if (!t)
        return REMAT_FAIL(REMAT_ERR_ARG, "no trainer");
    t->draw = (uint64_t)remat_trainer_micro(t);
    load_batch(t, inputs, labels);
    if (t->be->sync && (st = t->be->sync(t->ctx))) /* the last update is done */
        return st;
    memset(t->grad, 0, sizeof(float) * t->n_param_floats);
    st = run_steps(t, &l);
    if (!st && t->be->sync) /* the gradients are in place */
        st = t->be->sync(t->ctx);
    if (loss)
        *loss = l;
    return st;
}

remat_status remat_trainer_step(remat_trainer *t, const float *const *inputs,
                                const int32_t *labels, double *loss)
{
    if (!t)
        return REMAT_FAIL(REMAT_ERR_ARG, "no trainer");
    dist_micro_begin(t);
    return dist_micro_done(t, remat_trainer_gradients(t, inputs, labels, loss));
}

void remat_trainer_set_forward_hook(remat_trainer *t, remat_forward_hook fn, void *ud)
{
    if (!t)
        return;
    t->hook = fn;
    t->hook_ud = ud;
}

void remat_trainer_stats(const remat_trainer *t, remat_train_stats *st)
{
    struct rss_split g;

    memset(st, 0, sizeof *st);
    if (!t)
        return;
    st->workspace_bytes = t->workspace;
    st->planned_peak_bytes = t->activation_peak;
    /* Scratch the backend holds of its own: any means a kernel ran outside the plan. */
    st->measured_peak_bytes = t->measured_peak + t->be->workspace(t->ctx);
    st->arena_bytes = t->lay.arena_bytes;
    st->resident_bytes = t->block_floats * sizeof(float);
    st->steps = t->step;
    st->planned_host_bytes = t->lay.host_peak_bytes;
    st->measured_host_bytes = t->measured_host;
    st->host_bytes = t->lay.host_bytes;
    st->transfer_bytes = t->transfer_bytes;
    st->copy_seconds = t->be->copy_seconds(t->ctx);
    st->wait_seconds = t->wait_seconds;
    st->moved_bytes = t->moved_bytes;
    st->move_seconds = t->move_seconds;
    st->os_rss_before_bytes = t->rss.before_bytes;
    st->os_rss_peak_bytes = rss_mark_peak(&t->rss, t->rss_sampled);
    g = rss_mark_growth(&t->rss);
    st->os_rss_code_growth_bytes = g.code_bytes;
    st->os_rss_data_growth_bytes = g.data_bytes;
    st->os_rss_tables_bytes = t->rss_tables;
    st->os_rss_blocks_bytes = trainer_blocks_resident(t);
    dist_stats(t, st);
}
