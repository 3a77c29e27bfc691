/*
 * test_sim_random.c - the simulator, the `none` plan and the liveness pass on random
 * graphs, against an oracle.
 *
 * Forward graphs are built at random from the public API; the `none` schedule is
 * checked against an oracle written here from docs/design.md section 2 (which buffers
 * each step reads and allocates), and mutated schedules are judged by the same oracle
 * and by the simulator, which must agree (on the verdict, the failing step, the peak
 * and every step's live bytes); the liveness pass must keep them valid and never raise
 * their peak. Seed: REMAT_SEED, printed.
 *
 * The hand-worked schedules are in test_sim.c. Mutated schedules are built with the
 * internal schedule_new / schedule_push (plan/schedule.h); nothing else of the
 * library's internals is used to compute an expected answer.
 */
#include "sim_util.h"

static uint64_t rng_state;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int rnd(int n)
{
    return (int)(splitmix64() % (uint64_t)n);
}

#define RG_MAXV 1024
#define RG_MAXO 128
#define RG_MAXIN 3
#define RG_MAXSTEPS 4096

enum rkind { RK_OTHER = 0, RK_ACT, RK_AUX };

struct rop {
    remat_op type;
    int n_in;
    int32_t in[RG_MAXIN]; /* data inputs */
    int32_t out, aux;     /* aux -1 when none */
    bool params;          /* has trainable parameters */
};

/* The oracle's picture of a random graph, built beside the library's. */
struct rg {
    remat_graph *g;
    int32_t n_values, n_ops, loss;
    uint8_t kind[RG_MAXV];
    int32_t base[RG_MAXV];    /* the value whose buffer it uses */
    size_t bytes[RG_MAXV];    /* from the shape: numel * 4 rounded up to 64 */
    struct rop op[RG_MAXO];
    /* derived */
    bool dep[RG_MAXV], reach[RG_MAXV], needs[RG_MAXV], has_bwd[RG_MAXO];
};

struct cand {
    int32_t id;
    int ndim;
    int64_t s[4];
};

static size_t round64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* Adds an op to both pictures; checks the library's output shape against `want`. */
static int32_t rg_add(struct rg *r, remat_op type, const int32_t *in, int n_in,
                      const remat_attrs *at, bool params, bool aux, const struct cand *want)
{
    int32_t before = remat_graph_n_values(r->g), out;
    struct rop *op;
    int64_t shape[4];
    int nd;

    REMAT_ASSERT_TEST(r->n_ops < RG_MAXO && before + 5 < RG_MAXV && n_in <= RG_MAXIN);
    out = remat_graph_add(r->g, type, in, n_in, at, NULL);
    CHECK(out >= 0, "adding %s: %s", remat_op_name(type), remat_errmsg());
    REMAT_ASSERT_TEST(out >= 0);
    CHECK_I64(remat_graph_n_values(r->g), out + 1 + (aux ? 1 : 0));
    nd = remat_graph_value_shape(r->g, out, shape);
    CHECK(nd == want->ndim, "%s: %d-d output, expected %d-d", remat_op_name(type), nd,
          want->ndim);
    for (int i = 0; i < want->ndim && i < nd; i++)
        CHECK(shape[i] == want->s[i], "%s: dim %d = %lld, expected %lld",
              remat_op_name(type), i, (long long)shape[i], (long long)want->s[i]);
    for (int32_t v = before; v < out; v++) { /* parameters */
        r->kind[v] = RK_OTHER;
        r->base[v] = v;
    }
    op = &r->op[r->n_ops++];
    op->type = type;
    op->n_in = n_in;
    memcpy(op->in, in, sizeof *in * (size_t)n_in);
    op->out = out;
    op->aux = aux ? out + 1 : -1;
    op->params = params;
    r->kind[out] = RK_ACT;
    r->base[out] = type == REMAT_OP_FLATTEN ? r->base[in[0]] : out;
    if (aux) {
        r->kind[out + 1] = RK_AUX;
        r->base[out + 1] = out + 1;
    }
    r->n_values = remat_graph_n_values(r->g);
    return out;
}

/* Picks an existing 4-d value, mostly one of the last few. */
static const struct cand *pick(const struct cand *c, int n)
{
    if (rnd(4))
        return &c[n - 1 - rnd(n < 3 ? n : 3)];
    return &c[rnd(n)];
}

/* A classifier head: flatten (when 4-d), linear, softmax_ce; returns the loss. */
static int32_t rg_head(struct rg *r, const struct cand *v, int32_t labels, int64_t n)
{
    struct cand w = *v;
    int32_t x = v->id, in[2];
    int64_t k = 1 + rnd(5);
    bool bias = rnd(2);

    if (v->ndim == 4) {
        w.ndim = 2;
        w.s[1] = v->s[1] * v->s[2] * v->s[3];
        x = rg_add(r, REMAT_OP_FLATTEN, &x, 1, NULL, false, false, &w);
    }
    w.ndim = 2, w.s[0] = n, w.s[1] = k;
    x = rg_add(r, REMAT_OP_LINEAR, &x, 1, &(remat_attrs){.out_channels = k, .bias = bias},
               true, false, &w);
    in[0] = x, in[1] = labels;
    w.ndim = 1, w.s[0] = 1;
    return rg_add(r, REMAT_OP_SOFTMAX_CE, in, 2, NULL, false, true, &w);
}

/* Builds a random graph: relu, batch_norm, dropout, max/avg pooling, 1x1 convolutions,
 * add and concat over an input, then one or two heads. */
static void rg_build(struct rg *r)
{
    struct cand c[RG_MAXO];
    int nc = 0, n_body = 1 + rnd(14);
    int64_t n = 1 + rnd(3), ch = 1 + rnd(4), h = 1 + rnd(5), w = 1 + rnd(5);
    int32_t labels, loss, in[RG_MAXIN];

    memset(r, 0, sizeof *r);
    r->g = new_graph();
    c[0] = (struct cand){remat_graph_input(r->g, "x", 4, (int64_t[]){n, ch, h, w}), 4,
                         {n, ch, h, w}};
    labels = remat_graph_labels(r->g, "labels", n);
    REMAT_ASSERT_TEST(c[0].id == 0 && labels == 1);
    r->base[0] = 0, r->base[1] = 1;
    nc = 1;
    for (int i = 0; i < n_body; i++) {
        const struct cand *v = pick(c, nc);
        struct cand o = *v;
        int kind = rnd(10), k;

        switch (kind) {
        case 0:
            o.id = rg_add(r, REMAT_OP_RELU, &v->id, 1, NULL, false, false, &o);
            break;
        case 1:
            o.id = rg_add(r, REMAT_OP_BATCH_NORM, &v->id, 1, NULL, true, true, &o);
            break;
        case 2:
            o.id = rg_add(r, REMAT_OP_DROPOUT, &v->id, 1, NULL, false, false, &o);
            break;
        case 3:
            o.id = rg_add(r, REMAT_OP_MAX_POOL, &v->id, 1, &(remat_attrs){.kh = 1, .kw = 1},
                          false, true, &o);
            break;
        case 4:
            if (v->s[2] >= 2 && v->s[3] >= 2) {
                /* k2 s2: floor(h / 2); only max_pool saves indices */
                remat_op t = rnd(2) ? REMAT_OP_MAX_POOL : REMAT_OP_AVG_POOL;

                o.s[2] = v->s[2] / 2, o.s[3] = v->s[3] / 2;
                o.id = rg_add(r, t, &v->id, 1, &(remat_attrs){.kh = 2, .kw = 2}, false,
                              t == REMAT_OP_MAX_POOL, &o);
            } else {
                o.id = rg_add(r, REMAT_OP_AVG_POOL, &v->id, 1,
                              &(remat_attrs){.kh = 1, .kw = 1}, false, false, &o);
            }
            break;
        case 5:
        case 6:
            o.s[1] = 1 + rnd(6);
            o.id = rg_add(r, REMAT_OP_CONV2D, &v->id, 1,
                          &(remat_attrs){.out_channels = o.s[1], .kh = 1, .kw = 1,
                                         .bias = rnd(2)},
                          true, false, &o);
            break;
        case 7:
        case 8: { /* add of 2-3 values of v's shape (repeats allowed) */
            int32_t same[RG_MAXO];
            int ns = 0;

            for (int j = 0; j < nc; j++)
                if (!memcmp(c[j].s, v->s, sizeof v->s))
                    same[ns++] = c[j].id;
            k = 2 + rnd(2);
            for (int j = 0; j < k; j++)
                in[j] = j == 0 ? v->id : same[rnd(ns)];
            o.id = rg_add(r, REMAT_OP_ADD, in, k, NULL, false, false, &o);
            break;
        }
        default: { /* concat of 2-3 values with v's N, H, W (repeats allowed) */
            int32_t fit[RG_MAXO];
            int64_t fc[RG_MAXO];
            int nf = 0;

            for (int j = 0; j < nc; j++)
                if (c[j].s[0] == v->s[0] && c[j].s[2] == v->s[2] && c[j].s[3] == v->s[3]) {
                    fc[nf] = c[j].s[1];
                    fit[nf++] = c[j].id;
                }
            k = 2 + rnd(2);
            o.s[1] = 0;
            for (int j = 0; j < k; j++) {
                int q = rnd(nf);

                in[j] = fit[q];
                o.s[1] += fc[q];
            }
            o.id = rg_add(r, REMAT_OP_CONCAT, in, k, NULL, false, false, &o);
            break;
        }
        }
        c[nc++] = o;
    }
    loss = rg_head(r, rnd(2) ? &c[nc - 1] : &c[rnd(nc)], labels, n);
    if (rnd(3) == 0) {
        int32_t l2 = rg_head(r, &c[rnd(nc)], labels, n);
        struct cand one = {0, 1, {1}};

        in[0] = loss, in[1] = l2;
        loss = rg_add(r, REMAT_OP_SUM_LOSSES, in, 2, NULL, false, false, &one);
    }
    REMAT_ASSERT_TEST(remat_graph_set_loss(r->g, loss) == REMAT_OK);
    r->loss = loss;

    /* sizes from the library's shapes (checked above against ours) */
    for (int32_t v = 0; v < r->n_values; v++) {
        int64_t s[4], numel = 1;
        int nd = remat_graph_value_shape(r->g, v, s);

        for (int i = 0; i < nd; i++)
            numel *= s[i];
        r->bytes[v] = r->base[v] == v ? round64((size_t)numel * 4) : 0;
    }
    /* gradients: a value needs one when it depends on a parameter and the loss depends
     * on it; ops are in topological order */
    for (int32_t o = 0; o < r->n_ops; o++) {
        const struct rop *op = &r->op[o];

        r->dep[op->out] = op->params;
        for (int i = 0; i < op->n_in; i++)
            r->dep[op->out] = r->dep[op->out] || r->dep[op->in[i]];
    }
    r->reach[r->loss] = true;
    for (int32_t o = r->n_ops; o-- > 0;)
        if (r->reach[r->op[o].out])
            for (int i = 0; i < r->op[o].n_in; i++)
                r->reach[r->op[o].in[i]] = true;
    for (int32_t v = 0; v < r->n_values; v++)
        r->needs[v] = r->kind[v] == RK_ACT && r->dep[v] && r->reach[v] && v != r->loss;
    for (int32_t o = 0; o < r->n_ops; o++) {
        const struct rop *op = &r->op[o];
        bool any = op->params;

        for (int i = 0; i < op->n_in; i++)
            any = any || r->needs[op->in[i]];
        r->has_bwd[o] = op->type != REMAT_OP_FLATTEN && r->reach[op->out] && any;
    }
}

/* A value's forward buffer, or -1 when resident (input, labels, or a view of them). */
static int32_t fbuf(const struct rg *r, int32_t v)
{
    return r->kind[r->base[v]] == RK_OTHER ? -1 : r->base[v];
}

static int32_t gbuf(const struct rg *r, int32_t v)
{
    return r->n_values + r->base[v];
}

static size_t buf_bytes(const struct rg *r, int32_t b)
{
    return r->bytes[b < r->n_values ? b : b - r->n_values];
}

static void add_unique(int32_t *list, int *n, int32_t b)
{
    if (b < 0)
        return;
    for (int i = 0; i < *n; i++)
        if (list[i] == b)
            return;
    list[(*n)++] = b;
}

/* What a FWD or BWD reads and allocates, from docs/design.md section 2. */
static void touch(const struct rg *r, remat_step st, int32_t *reads, int *nr, int32_t *makes,
                  int *nm)
{
    const struct rop *op = &r->op[st.id];

    *nr = *nm = 0;
    if (st.kind == REMAT_STEP_FWD) {
        for (int i = 0; i < op->n_in; i++)
            add_unique(reads, nr, fbuf(r, op->in[i]));
        if (op->type != REMAT_OP_FLATTEN) {
            add_unique(makes, nm, op->out);
            add_unique(makes, nm, op->aux);
        }
        return;
    }
    switch (op->type) {
    case REMAT_OP_CONV2D:
    case REMAT_OP_LINEAR:
        add_unique(reads, nr, fbuf(r, op->in[0]));
        break;
    case REMAT_OP_BATCH_NORM:
    case REMAT_OP_MAX_POOL:
        add_unique(reads, nr, fbuf(r, op->in[0]));
        add_unique(reads, nr, op->aux);
        break;
    case REMAT_OP_RELU:
        add_unique(reads, nr, op->out);
        break;
    case REMAT_OP_SOFTMAX_CE:
        add_unique(reads, nr, op->aux); /* the labels are resident */
        break;
    default: /* avg_pool, add, concat, dropout, sum_losses: nothing */
        break;
    }
    if (op->out != r->loss)
        add_unique(reads, nr, gbuf(r, op->out));
    for (int i = 0; i < op->n_in; i++)
        if (r->needs[op->in[i]])
            add_unique(makes, nm, gbuf(r, op->in[i]));
}

/* Does op o's backward add into gradient buffer b? */
static bool writes_grad(const struct rg *r, int32_t o, int32_t b)
{
    if (!r->has_bwd[o])
        return false;
    for (int i = 0; i < r->op[o].n_in; i++)
        if (r->needs[r->op[o].in[i]] && gbuf(r, r->op[o].in[i]) == b)
            return true;
    return false;
}

#define NO_STEP ((size_t)-1)

struct verdict {
    bool valid;
    size_t fail_step; /* NO_STEP: failed at the end, or valid */
    size_t peak;
};

/* The oracle simulator: validity and live bytes after each step. */
static struct verdict oracle(const struct rg *r, const remat_step *st, size_t n, size_t *live)
{
    static bool is_live[2 * RG_MAXV];
    static int fwd_runs[RG_MAXO], bwd_runs[RG_MAXO];
    struct verdict v = {true, NO_STEP, 0};
    int32_t reads[2 * RG_MAXIN + 4], makes[2 * RG_MAXIN + 4];
    int nr, nm;
    size_t cur = 0;

    memset(is_live, 0, sizeof is_live);
    memset(fwd_runs, 0, sizeof fwd_runs);
    memset(bwd_runs, 0, sizeof bwd_runs);
    for (size_t i = 0; i < n && v.valid; i++) {
        remat_step s = st[i];
        bool ok = true;

        if (s.kind == REMAT_STEP_FREE) {
            ok = s.id >= 0 && s.id < 2 * r->n_values && is_live[s.id];
            if (ok) {
                is_live[s.id] = false;
                cur -= buf_bytes(r, s.id);
            }
        } else if (s.id < 0 || s.id >= r->n_ops) {
            ok = false;
        } else if (s.kind == REMAT_STEP_FWD) {
            touch(r, s, reads, &nr, makes, &nm);
            for (int j = 0; j < nr; j++)
                ok = ok && is_live[reads[j]];
            for (int j = 0; j < nm; j++)
                ok = ok && !is_live[makes[j]];
            for (int j = 0; ok && j < nm; j++) {
                is_live[makes[j]] = true;
                cur += buf_bytes(r, makes[j]);
            }
            fwd_runs[s.id]++;
        } else {
            ok = r->has_bwd[s.id] && bwd_runs[s.id] == 0 && fwd_runs[s.id] > 0;
            if (ok)
                touch(r, s, reads, &nr, makes, &nm);
            for (int j = 0; ok && j < nr; j++)
                ok = is_live[reads[j]];
            /* the output gradient: every backward that adds into it has run */
            if (ok && r->op[s.id].out != r->loss)
                for (int32_t o = 0; o < r->n_ops; o++)
                    if (writes_grad(r, o, gbuf(r, r->op[s.id].out)) && !bwd_runs[o])
                        ok = false;
            /* a gradient not live but already added into was freed too early */
            for (int j = 0; ok && j < nm; j++)
                for (int32_t o = 0; o < r->n_ops; o++)
                    if (!is_live[makes[j]] && bwd_runs[o] && writes_grad(r, o, makes[j]))
                        ok = false;
            for (int j = 0; ok && j < nm; j++)
                if (!is_live[makes[j]]) {
                    is_live[makes[j]] = true;
                    cur += buf_bytes(r, makes[j]);
                }
            bwd_runs[s.id]++;
        }
        if (!ok) {
            v.valid = false;
            v.fail_step = i;
            break;
        }
        if (live)
            live[i] = cur;
        v.peak = cur > v.peak ? cur : v.peak;
    }
    for (int32_t o = 0; o < r->n_ops && v.valid; o++)
        if (fwd_runs[o] == 0 || bwd_runs[o] != (r->has_bwd[o] ? 1 : 0))
            v.valid = false;
    return v;
}

/* The `none` plan against the oracle. */
static void check_none(const struct rg *r, const remat_tgraph *tg, int gi, remat_step *copy,
                       size_t *n_copy)
{
    static size_t live[RG_MAXSTEPS], want_live[RG_MAXSTEPS];
    remat_step want[2 * RG_MAXO];
    remat_schedule *s = NULL;
    remat_sim_result res;
    const remat_step *st;
    size_t n, k = 0, nw = 0, naive = 0, lower = 0, max = 0;
    int32_t planned = 0, reads[2 * RG_MAXIN + 4], makes[2 * RG_MAXIN + 4];
    int nr, nm;
    struct verdict v;

    *n_copy = 0;
    for (int32_t o = 0; o < r->n_ops; o++) {
        const struct rop *op = &r->op[o];

        if (op->type != REMAT_OP_FLATTEN) {
            planned += 1 + (op->aux >= 0);
            naive += 2 * (r->bytes[op->out] + (op->aux >= 0 ? r->bytes[op->aux] : 0));
        }
        for (int k2 = 0; k2 < 2; k2++) {
            size_t need = 0;

            if (k2 && !r->has_bwd[o])
                continue;
            touch(r, (remat_step){k2 ? REMAT_STEP_BWD : REMAT_STEP_FWD, o}, reads, &nr, makes,
                  &nm);
            for (int j = 0; j < nr; j++)
                need += buf_bytes(r, reads[j]);
            for (int j = 0; j < nm; j++) {
                bool dup = false;

                for (int q = 0; q < nr; q++)
                    dup = dup || reads[q] == makes[j];
                need += dup ? 0 : buf_bytes(r, makes[j]);
            }
            lower = need > lower ? need : lower;
        }
    }
    CHECK(remat_tgraph_n_planned(tg) == planned, "graph %d: n_planned %d, expected %d", gi,
          remat_tgraph_n_planned(tg), planned);

    CHECK_OK(remat_plan_none(tg, &s));
    if (!s)
        return;
    n = remat_schedule_n_steps(s);
    st = remat_schedule_steps(s);
    REMAT_ASSERT_TEST(n <= RG_MAXSTEPS);

    /* structure: FWD of every op in order, then BWD of the ops that have one, in
     * reverse; FREEs between */
    for (int32_t o = 0; o < r->n_ops; o++)
        want[nw++] = (remat_step){REMAT_STEP_FWD, o};
    for (int32_t o = r->n_ops; o-- > 0;)
        if (r->has_bwd[o])
            want[nw++] = (remat_step){REMAT_STEP_BWD, o};
    for (size_t i = 0; i < n; i++) {
        if (st[i].kind == REMAT_STEP_FREE)
            continue;
        if (k < nw)
            CHECK(st[i].kind == want[k].kind && st[i].id == want[k].id,
                  "graph %d step %zu: kind %d id %d, expected kind %d id %d", gi, i,
                  (int)st[i].kind, st[i].id, (int)want[k].kind, want[k].id);
        k++;
    }
    CHECK(k == nw, "graph %d: %zu FWD/BWD steps, expected %zu", gi, k, nw);

    /* every FREE follows (through a run of FREEs) a step that touched its buffer */
    for (size_t i = 0; i < n; i++) {
        size_t p = i;
        bool touched = false;

        if (st[i].kind != REMAT_STEP_FREE)
            continue;
        while (p > 0 && st[p - 1].kind == REMAT_STEP_FREE)
            p--;
        if (p > 0) {
            touch(r, st[p - 1], reads, &nr, makes, &nm);
            for (int j = 0; j < nr; j++)
                touched = touched || reads[j] == st[i].id;
            for (int j = 0; j < nm; j++)
                touched = touched || makes[j] == st[i].id;
        }
        CHECK(touched, "graph %d: FREE %d at step %zu does not follow its last use", gi,
              st[i].id, i);
    }

    v = oracle(r, st, n, want_live);
    CHECK(v.valid, "graph %d: the oracle rejects the none schedule at step %zu", gi,
          v.fail_step);
    CHECK_OK(remat_sim_run(tg, s, &res));
    CHECK(res.activation_peak_bytes == v.peak, "graph %d: peak %zu, oracle %zu", gi,
          res.activation_peak_bytes, v.peak);
    CHECK(res.naive_bytes == naive, "graph %d: naive %zu, oracle %zu", gi, res.naive_bytes,
          naive);
    CHECK(res.lower_bound_bytes == lower, "graph %d: lower bound %zu, oracle %zu", gi,
          res.lower_bound_bytes, lower);
    CHECK(res.overhead == 0, "graph %d: overhead %g", gi, res.overhead);
    CHECK(res.activation_peak_bytes >= res.lower_bound_bytes, "graph %d: peak below bound",
          gi);
    CHECK_OK(remat_sim_timeline(tg, s, live, n));
    for (size_t i = 0; i < n; i++) {
        if (v.valid && live[i] != want_live[i]) {
            CHECK(live[i] == want_live[i], "graph %d: live after step %zu = %zu, oracle %zu",
                  gi, i, live[i], want_live[i]);
            break;
        }
        max = live[i] > max ? live[i] : max;
    }
    CHECK(max == res.activation_peak_bytes, "graph %d: timeline max %zu, peak %zu", gi, max,
          res.activation_peak_bytes);
    CHECK(n > 0 && live[n - 1] == 0, "graph %d: %zu bytes live at the end", gi,
          n ? live[n - 1] : 0);
    memcpy(copy, st, sizeof *st * n);
    *n_copy = n;
    remat_schedule_free(s);
}

/* One random change to a valid schedule; returns the new length. */
static size_t mutate(const struct rg *r, const remat_step *in, size_t n, remat_step *out)
{
    size_t m = 0, a = (size_t)rnd((int)n), b = (size_t)rnd((int)n);

    switch (rnd(7)) {
    case 0: /* delete a step */
        for (size_t i = 0; i < n; i++)
            if (i != a)
                out[m++] = in[i];
        return m;
    case 1: /* run a step twice */
        for (size_t i = 0; i < n; i++) {
            out[m++] = in[i];
            if (i == (a < b ? b : a))
                out[m++] = in[a < b ? a : b];
        }
        return m;
    case 2: /* swap two neighbours */
        memcpy(out, in, sizeof *in * n);
        if (a + 1 < n) {
            out[a] = in[a + 1];
            out[a + 1] = in[a];
        }
        return n;
    case 3: /* move a step */
        for (size_t i = 0; i < n; i++) {
            if (i == b && b < a)
                out[m++] = in[a];
            if (i != a)
                out[m++] = in[i];
            if (i == b && b > a)
                out[m++] = in[a];
        }
        return m;
    case 5: { /* a gradient's FREE moved up to right after the first of its writers,
               * when it has two or more (else after a random earlier BWD) */
        size_t bwd[RG_MAXSTEPS], nb = 0, first = NO_STEP;

        for (size_t t = 0; t < n && first == NO_STEP; t++) {
            size_t i = (a + t) % n, nw = 0, f = NO_STEP;

            if (in[i].kind != REMAT_STEP_FREE || in[i].id < r->n_values)
                continue;
            for (size_t j = 0; j < i; j++)
                if (in[j].kind == REMAT_STEP_BWD && writes_grad(r, in[j].id, in[i].id)) {
                    f = nw++ ? f : j;
                    if (nw == 2)
                        first = f, a = i;
                }
        }
        for (size_t i = 0; i < a; i++)
            if (in[i].kind == REMAT_STEP_BWD)
                bwd[nb++] = i;
        b = first != NO_STEP ? first : nb ? bwd[rnd((int)nb)] : a;
        for (size_t i = 0; i < n; i++) {
            if (i != a)
                out[m++] = in[i];
            if (i == b && b != a)
                out[m++] = in[a];
        }
        return m;
    }
    case 4: /* a FREE of any buffer somewhere */
        for (size_t i = 0; i < n; i++) {
            if (i == a)
                out[m++] = (remat_step){REMAT_STEP_FREE, rnd(2 * r->n_values)};
            out[m++] = in[i];
        }
        return m;
    default: { /* recompute: after a FREE of an op's output, run the op again later and
                * drop what it makes */
        size_t p = NO_STEP;
        int32_t o = -1;

        for (size_t t = 0; t < n && p == NO_STEP; t++) {
            size_t i = (a + t) % n;

            if (in[i].kind == REMAT_STEP_FREE && in[i].id < r->n_values)
                for (int32_t q = 0; q < r->n_ops; q++)
                    if (r->op[q].out == in[i].id && r->op[q].type != REMAT_OP_FLATTEN)
                        p = i, o = q;
        }
        if (p == NO_STEP) {
            memcpy(out, in, sizeof *in * n);
            return n;
        }
        b = p + 1 + (size_t)rnd((int)(n - p));
        for (size_t i = 0; i <= n; i++) {
            if (i == b) {
                out[m++] = (remat_step){REMAT_STEP_FWD, o};
                if (rnd(4)) {
                    out[m++] = (remat_step){REMAT_STEP_FREE, r->op[o].out};
                    if (r->op[o].aux >= 0)
                        out[m++] = (remat_step){REMAT_STEP_FREE, r->op[o].aux};
                }
            }
            if (i < n)
                out[m++] = in[i];
        }
        return m;
    }
    }
}

/* The frees the liveness pass places after one step come in increasing buffer order
 * (its sort's tie rule), each buffer once. */
static void check_free_order(const remat_schedule *lv, int gi)
{
    const remat_step *st = remat_schedule_steps(lv);
    size_t n = remat_schedule_n_steps(lv);

    for (size_t i = 1; i < n; i++)
        if (st[i].kind == REMAT_STEP_FREE && st[i - 1].kind == REMAT_STEP_FREE &&
            st[i - 1].id >= st[i].id) {
            CHECK(st[i - 1].id < st[i].id, "graph %d: frees of buffers %d then %d after one "
                  "step", gi, st[i - 1].id, st[i].id);
            return;
        }
}

static void test_random(void)
{
    static remat_step base[RG_MAXSTEPS], mut[RG_MAXSTEPS + 8];
    static size_t live[RG_MAXSTEPS + 8], want_live[RG_MAXSTEPS + 8];
    static struct rg r;
    const char *env = getenv("REMAT_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : 20240611u;
    int n_graphs = 200, n_valid = 0, n_invalid = 0, n_recompute = 0;

    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
    rng_state = seed;
    for (int gi = 0; gi < n_graphs; gi++) {
        remat_tgraph *tg;
        size_t n = 0;

        rg_build(&r);
        tg = to_tgraph(r.g, REMAT_COST_KUSUMOTO);
        check_none(&r, tg, gi, base, &n);
        for (int t = 0; n > 0 && t < 6; t++) {
            size_t m = mutate(&r, base, n, mut);
            struct verdict v = oracle(&r, mut, m, want_live);
            remat_schedule *s = make_schedule(mut, m);
            remat_sim_result res;
            remat_status st = remat_sim_run(tg, s, &res);

            CHECK((st == REMAT_OK) == v.valid, "graph %d mutation %d: simulator %s (%s), "
                  "oracle %s at step %zu", gi, t, remat_status_name(st), remat_errmsg(),
                  v.valid ? "valid" : "invalid", v.fail_step);
            if (st != REMAT_OK && !v.valid) {
                char want[32];

                n_invalid++;
                CHECK(st == REMAT_ERR_INVALID, "graph %d: %s", gi, remat_status_name(st));
                if (v.fail_step != NO_STEP) {
                    snprintf(want, sizeof want, "step %zu:", v.fail_step);
                    CHECK(strstr(remat_errmsg(), want), "graph %d mutation %d: '%s', "
                          "oracle fails at step %zu", gi, t, remat_errmsg(), v.fail_step);
                }
            } else if (st == REMAT_OK && v.valid) {
                remat_schedule *lv = NULL;
                remat_sim_result lres;
                size_t max = 0;
                bool recomputes = false;
                int fwd[RG_MAXO] = {0};

                n_valid++;
                for (size_t i = 0; i < m; i++)
                    if (mut[i].kind == REMAT_STEP_FWD && fwd[mut[i].id]++ > 0)
                        recomputes = true;
                n_recompute += recomputes;
                CHECK(res.activation_peak_bytes == v.peak, "graph %d mutation %d: peak %zu, "
                      "oracle %zu", gi, t, res.activation_peak_bytes, v.peak);
                CHECK(recomputes == (res.overhead > 0), "graph %d: overhead %g", gi,
                      res.overhead);
                CHECK_OK(remat_sim_timeline(tg, s, live, m));
                for (size_t i = 0; i < m; i++) {
                    max = live[i] > max ? live[i] : max;
                    if (live[i] != want_live[i]) {
                        CHECK(live[i] == want_live[i], "graph %d mutation %d: live after "
                              "step %zu = %zu, oracle %zu", gi, t, i, live[i], want_live[i]);
                        break;
                    }
                }
                CHECK(max == res.activation_peak_bytes, "graph %d: timeline max %zu, peak "
                      "%zu", gi, max, res.activation_peak_bytes);
                /* the liveness pass on it: still valid, never a higher peak */
                CHECK_OK(schedule_liveness(tg, s, &lv));
                if (lv) {
                    struct verdict lvv = oracle(&r, remat_schedule_steps(lv),
                                                remat_schedule_n_steps(lv), NULL);

                    CHECK(lvv.valid, "graph %d: liveness output rejected by the oracle at "
                          "step %zu", gi, lvv.fail_step);
                    CHECK_OK(remat_sim_run(tg, lv, &lres));
                    CHECK(lres.activation_peak_bytes == lvv.peak, "graph %d: liveness peak "
                          "%zu, oracle %zu", gi, lres.activation_peak_bytes, lvv.peak);
                    CHECK(lres.activation_peak_bytes <= res.activation_peak_bytes,
                          "graph %d: liveness raised the peak %zu -> %zu", gi,
                          res.activation_peak_bytes, lres.activation_peak_bytes);
                    check_free_order(lv, gi);
                }
                remat_schedule_free(lv);
            }
            remat_schedule_free(s);
        }
        remat_tgraph_free(tg);
        remat_graph_free(r.g);
    }
    printf("  %d graphs; mutated schedules: %d valid (%d recomputing), %d invalid\n",
           n_graphs, n_valid, n_recompute, n_invalid);
    /* the oracle must have seen both verdicts, or the comparison proved little */
    CHECK(n_valid > 50 && n_invalid > 50 && n_recompute > 10,
          "too few of a kind: %d valid, %d recomputing, %d invalid", n_valid, n_recompute,
          n_invalid);
}

int main(void)
{
    RUN(test_random);
    return harness_end();
}
