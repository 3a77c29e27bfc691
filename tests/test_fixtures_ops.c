/*
 * test_fixtures_ops.c - the reference backend against PyTorch, on every op case of
 * tests/data/ops.fix (fixture_util.h has the format and the tolerance): the reference
 * kernels' forward (y, and batch norm's running statistics) and backward (every input
 * and parameter gradient for L = sum(y * r)) against PyTorch's. Every op but reshape and
 * dropout must have a case.
 */
#include "kernel_util.h"
#include "fixture_util.h"

#include <stddef.h>

/* True when tensor t has the record's shape. */
static bool same_dims(const struct ktensor *t, const struct rec *r)
{
    if (t->ndim != r->ndim)
        return false;
    for (int i = 0; i < r->ndim; i++)
        if (t->shape[i] != r->dims[i])
            return false;
    return true;
}

/* ---------------------------------------------------------------- op cases */

/* The remat_attrs fields a fixture may set, by name. */
static const struct {
    const char *name;
    size_t off;
    char type; /* 'L' int64_t, 'i' int32_t, 'b' bool, 'f' float, 'P' int32_t[4], 'S'
                  int64_t[4] (from 4 int32 values) */
} attr_fields[] = {
#define AF(f, t) {#f, offsetof(remat_attrs, f), t}
    AF(out_channels, 'L'), AF(kh, 'i'), AF(kw, 'i'), AF(sh, 'i'), AF(sw, 'i'), AF(ph, 'i'),
    AF(pw, 'i'), AF(dh, 'i'), AF(dw, 'i'), AF(groups, 'i'), AF(out_pad_h, 'i'),
    AF(out_pad_w, 'i'), AF(bias, 'b'), AF(ceil_mode, 'b'), AF(count_include_pad, 'b'),
    AF(align_corners, 'b'), AF(eps, 'f'), AF(momentum, 'f'), AF(p, 'f'), AF(out_h, 'L'),
    AF(out_w, 'L'), AF(offset_h, 'i'), AF(offset_w, 'i'), AF(pad_t, 'i'), AF(pad_b, 'i'),
    AF(pad_l, 'i'), AF(pad_r, 'i'), AF(clip_min, 'f'), AF(clip_max, 'f'),
    AF(alpha, 'f'), AF(perm, 'P'), AF(approximate, 'b'), AF(trans_a, 'b'), AF(trans_b, 'b'),
    AF(causal, 'b'), AF(vocab, 'L'), AF(beta, 'f'), AF(scale, 'f'), AF(ndim, 'i'),
    AF(shape, 'S'),
#undef AF
};

/* Fills *at from the group's attr.* records; false on an unknown field. */
static bool case_attrs(const struct group *g, remat_attrs *at)
{
    memset(at, 0, sizeof *at);
    for (uint32_t i = 0; i < g->n; i++) {
        const struct rec *r = &g->r[i];
        size_t k;

        if (strncmp(r->name, "attr.", 5))
            continue;
        for (k = 0; k < REMAT_ARRAY_LEN(attr_fields); k++)
            if (!strcmp(r->name + 5, attr_fields[k].name))
                break;
        if (k == REMAT_ARRAY_LEN(attr_fields) || r->n != (strchr("PS", attr_fields[k].type) ? 4 : 1) ||
            r->dtype != (attr_fields[k].type == 'f' ? DT_F32 : DT_I32))
            return false;
        {
            char *p = (char *)at + attr_fields[k].off;
            int32_t v = *(const int32_t *)r->data;

            switch (attr_fields[k].type) {
            case 'L': *(int64_t *)(void *)p = v; break;
            case 'i': *(int32_t *)(void *)p = v; break;
            case 'b': *(bool *)p = v != 0; break;
            case 'P': memcpy(p, r->data, 4 * sizeof(int32_t)); break;
            case 'S':
                for (int j = 0; j < 4; j++)
                    ((int64_t *)(void *)p)[j] = ((const int32_t *)r->data)[j];
                break;
            default: *(float *)(void *)p = *(const float *)r->data;
            }
        }
    }
    return true;
}

static bool op_from_name(const char *name, remat_op *op)
{
    for (int i = 0; i < REMAT_OP_COUNT; i++)
        if (!strcmp(remat_op_name((remat_op)i), name)) {
            *op = (remat_op)i;
            return true;
        }
    return false;
}

/* Copies a record into a tensor of the same shape; false (and a failure) otherwise. */
static bool load_tensor(const char *ctx, struct ktensor *t, const struct rec *r)
{
    CHECK(t->data && same_dims(t, r), "%s: '%s' does not fit remat's tensor (shape from "
          "shape inference, or no such tensor)", ctx, r->name);
    if (!t->data || !same_dims(t, r))
        return false;
    memcpy(t->data, r->data, sizeof(float) * (size_t)r->n);
    return true;
}

/* Compares a gradient or output tensor with the record `name`, which must exist exactly
 * when the tensor does. */
static double compare_slot(const char *ctx, const char *name, const struct ktensor *t,
                           const struct group *g)
{
    const struct rec *r = find_rec(g, name);

    CHECK((r != NULL) == (t->data != NULL), "%s: %s is %s in remat but %s in the fixture", ctx,
          name, t->data ? "present" : "absent", r ? "present" : "absent");
    if (!r || !t->data)
        return 0;
    CHECK(same_dims(t, r), "%s: %s has another shape than PyTorch's", ctx, name);
    if (!same_dims(t, r))
        return 0;
    return check_fx(ctx, name, t->data, r->data, r->n);
}

/* One op case: build the op through the graph, load the fixture's tensors, forward,
 * backward, compare. */
static void run_op_case(const struct group *g)
{
    const char *ctx = group_name(g);
    const struct rec *oprec = find_rec(g, "op"), *r;
    struct shp shapes[TK_MAX_IN];
    char key[32];
    remat_attrs at;
    remat_op type = REMAT_OP_COUNT;
    struct tk t;
    int n_in = 0;
    double worst = 0;
    bool view, ok = true;
    int was = case_begin();

    REMAT_ASSERT_TEST(oprec && oprec->dtype == DT_TEXT);
    CHECK(op_from_name(oprec->data, &type), "%s: unknown op '%s'", ctx, (char *)oprec->data);
    CHECK(case_attrs(g, &at), "%s: an unknown or malformed attribute", ctx);
    if (h_cur_failed) {
        case_end(was);
        return;
    }
    for (;;) {
        snprintf(key, sizeof key, "x%d", n_in);
        if (!(r = find_rec(g, key)))
            break;
        REMAT_ASSERT_TEST(n_in < TK_MAX_IN);
        shapes[n_in].ndim = r->ndim;
        memset(shapes[n_in].d, 0, sizeof shapes[n_in].d);
        memcpy(shapes[n_in].d, r->dims, sizeof(int64_t) * (size_t)r->ndim);
        n_in++;
    }
    tk_init(&t, type, n_in, shapes, &at);
    view = op_info(type)->is_view;

    /* inputs (softmax_ce's labels: their int32 bits), parameters, statistics, r */
    for (int i = 0; i < n_in && ok; i++) {
        snprintf(key, sizeof key, "x%d", i);
        ok = load_tensor(ctx, &t.in[i], find_rec(g, key));
    }
    if (ok && (r = find_rec(g, "weight")))
        ok = load_tensor(ctx, &t.op.w, r);
    if (ok && (r = find_rec(g, "bias")))
        ok = load_tensor(ctx, &t.op.b, r);
    CHECK(!!find_rec(g, "weight") == !!t.op.w.data && !!find_rec(g, "bias") == !!t.op.b.data,
          "%s: remat's parameters are not PyTorch's", ctx);
    if (ok && type == REMAT_OP_BATCH_NORM) {
        const float *m = find_f32(g, "running_mean", NULL), *v = find_f32(g, "running_var", NULL);

        REMAT_ASSERT_TEST(m && v);
        memcpy(t.op.running_mean, m, sizeof(float) * (size_t)t.op.w.shape[0]);
        memcpy(t.op.running_var, v, sizeof(float) * (size_t)t.op.w.shape[0]);
        t.op.update_stats = true;
    }
    if (ok)
        ok = load_tensor(ctx, &t.op.dout, find_rec(g, "r"));
    if (!ok || h_cur_failed)
        goto out;

    /* forward */
    CHECK_OK(ref_forward(&t.op));
    if (!view) {
        worst = fmax(worst, compare_slot(ctx, "y", &t.op.out, g));
    } else {
        /* a view: the executor gives y the input's buffer, so PyTorch's y must be the
         * input's elements in order, in the shape shape inference gave */
        struct ktensor shared = t.op.out;

        shared.data = t.in[0].data;
        worst = fmax(worst, compare_slot(ctx, "y", &shared, g));
    }
    if (type == REMAT_OP_BATCH_NORM) {
        int64_t c = t.op.w.shape[0], n1 = 0, n2 = 0;
        const float *m = find_f32(g, "running_mean.after", &n1);
        const float *v = find_f32(g, "running_var.after", &n2);

        REMAT_ASSERT_TEST(m && v && n1 == c && n2 == c);
        worst = fmax(worst, check_fx(ctx, "running_mean", t.op.running_mean, m, c));
        worst = fmax(worst, check_fx(ctx, "running_var", t.op.running_var, v, c));
    }

    /* backward (reading only what the op table says), gradients zeroed by tk_init */
    CHECK_OK(tk_backward(&t));
    for (int i = 0; i < n_in; i++) {
        struct ktensor d = t.din[i];

        if (((type == REMAT_OP_SOFTMAX_CE || type == REMAT_OP_TOKEN_CE) && i == 1) ||
            (type == REMAT_OP_EMBEDDING && i == 0))
            continue; /* labels, token ids: integers */
        if (view)
            d.data = t.op.dout.data; /* the executor shares the gradient buffer too */
        snprintf(key, sizeof key, "dx%d", i);
        worst = fmax(worst, compare_slot(ctx, key, &d, g));
    }
    worst = fmax(worst, compare_slot(ctx, "dweight", &t.op.dw, g));
    worst = fmax(worst, compare_slot(ctx, "dbias", &t.op.db, g));
    printf("  %-48s worst error / tolerance %.3g\n", ctx, worst);
out:
    tk_fini(&t);
    case_end(was);
}

static void test_ops(void)
{
    struct fix fx;
    int n_ops[REMAT_OP_COUNT] = {0};

    CHECK(read_fix(DATA_DIR "ops.fix", &fx), "no op fixtures");
    for (uint32_t i = 0; i < fx.n; i++) {
        const struct rec *r = find_rec(&fx.g[i], "op");
        remat_op op;

        run_op_case(&fx.g[i]);
        if (r && r->dtype == DT_TEXT && op_from_name(r->data, &op))
            n_ops[op]++;
    }
    /* every op but reshape and dropout (which PyTorch cannot mirror: remat's own masks)
     * has a case */
    for (int op = 0; op < REMAT_OP_COUNT; op++)
        CHECK(n_ops[op] > 0 || op == REMAT_OP_RESHAPE || op == REMAT_OP_DROPOUT,
              "op %s has no PyTorch case in ops.fix", remat_op_name((remat_op)op));
    printf("  %u op cases\n", fx.n);
    fix_fini(&fx);
}

int main(void)
{
    (void)rng_seed; /* kernel_util.h's random stream: nothing here is random */
    RUN(test_ops);
    return harness_end();
}
