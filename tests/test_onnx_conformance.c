/*
 * test_onnx_conformance.c - ONNX's own operator tests (Debian's libonnx-testdata,
 * /usr/share/libonnx-testdata/data/node/test_<op>*: model.onnx, test_data_set_0/
 * input_<i>.pb and output_0.pb) for every op the reader maps.
 *
 * Each case's model is one node whose inputs are all graph inputs; the first becomes
 * the data input and the others (weights, shapes, bounds) initializers holding the
 * test's values, as an exported model has them (for Add, Sum, Mul and Concat, whose
 * inputs are all activations, every input stays an input). The model is read without a loss
 * (remat_onnx_opts.no_loss) and its forward run op by op, here, on the ref and on the
 * cpu backend, from the test's inputs; the output must match output_0.pb within the
 * fixtures' tolerance (|got - want| <= max(1e-4 |want|, 1e-5)). A case the reader
 * refuses (a 3-d convolution, nearest resizing, broadcasting, inference-mode batch
 * norm, ...) is listed with the reader's message and is not a failure; a case that is
 * read and computes the wrong values is. docs/onnx.md has the table this prints.
 *
 * Without libonnx-testdata the test reports skipped.
 */
#include "harness.h"
#include "exec/backend.h"
#include "graph/graph.h"
#include "io/onnx.h"
#include "onnx.pb-c.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"

/* The ops the reader maps, as test-name prefixes (test_<prefix>...). */
static const char *const ops[] = {
    "conv_",       "convtranspose", "batchnorm",   "relu",     "clip",     "maxpool",
    "averagepool", "globalaveragepool", "add",     "concat",   "flatten",  "reshape",
    "gemm",        "matmul_",       "dropout",     "identity", "constant_pad", "resize",
    "upsample",    "sum_",          "leakyrelu",   "sigmoid",  "mul",      "softmax_",
    "transpose",   "reduce_mean", "tanh",     "hardsigmoid", "hardswish", "reduce_sum",
    "lstm",        "gru",
};

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    long sz;

    if (!f)
        return NULL;
    if (!fseek(f, 0, SEEK_END) && (sz = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
        (b = malloc((size_t)sz + 1)) && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    if (b)
        *n = (size_t)sz;
    fclose(f);
    return b;
}

static Onnx__TensorProto *read_tensor(const char *path)
{
    size_t n;
    uint8_t *b = slurp(path, &n);
    Onnx__TensorProto *t = b ? onnx__tensor_proto__unpack(NULL, n, b) : NULL;

    free(b);
    return t;
}

/* The float values of t (float_data or raw_data), or NULL. */
static const float *tensor_f32(const Onnx__TensorProto *t, int64_t *n)
{
    int64_t k = 1;

    for (size_t i = 0; i < t->n_dims; i++)
        k *= t->dims[i];
    *n = k;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return NULL;
    if (t->has_raw_data && t->raw_data.len == (size_t)k * 4)
        return (const float *)(const void *)t->raw_data.data;
    return t->n_float_data == (size_t)k ? t->float_data : NULL;
}

/* Runs the graph's forward on backend be from input x; the output's values, or NULL
 * (with *why) when the backend failed. */
static float *run_forward(const remat_graph *g, const remat_onnx_weights *w,
                          const Onnx__TensorProto *const *inputs, const struct backend_ops *be,
                          char *why, size_t nwhy)
{
    size_t nv = g->values.n;
    float **buf = calloc(nv, sizeof *buf), *out = NULL;
    float *stats = NULL;
    remat_train_opts to = remat_train_opts_default();
    void *ctx = NULL;
    struct ktensor kin[KOP_MAX_INPUTS];
    remat_status st = REMAT_OK;

    int n_inputs = 0;

    REMAT_ASSERT_TEST(buf);
    to.threads = 2;
    if (be->create(&to, &ctx)) {
        snprintf(why, nwhy, "%s backend: %s", be->name, remat_errmsg());
        free(buf);
        return NULL;
    }
    for (size_t v = 0; v < nv; v++) {
        const struct gvalue *gv = graph_value(g, (int32_t)v);
        int64_t n = graph_numel(gv);

        if (gv->view_of >= 0)
            continue;
        buf[v] = calloc((size_t)(n ? n : 1), 4);
        REMAT_ASSERT_TEST(buf[v]);
        if (gv->kind == VK_INPUT) { /* the graph's inputs, in order */
            int64_t k;
            const float *src = inputs[n_inputs] ? tensor_f32(inputs[n_inputs], &k) : NULL;

            REMAT_ASSERT_TEST(src && k == n);
            memcpy(buf[v], src, sizeof(float) * (size_t)n);
            n_inputs++;
        }
        if (gv->positions) { /* 0 .. n-1 along the last axis, as a trainer fills them */
            int64_t last = gv->shape[gv->ndim - 1];
            for (int64_t k = 0; k < n; k++)
                ((int32_t *)buf[v])[k] = (int32_t)(k % last);
        }
        for (size_t i = 0; i < w->n; i++)
            if (gv->kind == VK_PARAM && !strcmp(w->w[i].name, gv->name) && w->w[i].n == n)
                memcpy(buf[v], w->w[i].data, sizeof(float) * (size_t)n);
    }
    for (size_t v = 0; v < nv; v++)
        if (graph_value(g, (int32_t)v)->view_of >= 0)
            buf[v] = buf[graph_value(g, (int32_t)v)->view_of];
    stats = calloc(2 * 4096, sizeof *stats);
    REMAT_ASSERT_TEST(stats);
    for (size_t o = 0; o < g->ops.n && !st; o++) {
        const struct gop *op = graph_op(g, (int32_t)o);
        struct kop k;
        int n_in = 0, np = 0;

        memset(&k, 0, sizeof k);
        k.type = op->type;
        k.at = &op->at;
        for (int32_t i = 0; i < op->n_in; i++) {
            const struct gvalue *gv = graph_value(g, op->in[i]);
            struct ktensor t = {buf[op->in[i]], {0, 0, 0, 0}, gv->ndim};

            memcpy(t.shape, gv->shape, sizeof t.shape);
            if (gv->kind == VK_PARAM) {
                if (np++ == 0)
                    k.w = t;
                else
                    k.b = t;
            } else {
                kin[n_in++] = t;
            }
        }
        k.n_in = n_in;
        k.in = kin;
        {
            const struct gvalue *gv = graph_value(g, op->out);

            k.out = (struct ktensor){buf[op->out], {0, 0, 0, 0}, gv->ndim};
            memcpy(k.out.shape, gv->shape, sizeof k.out.shape);
        }
        if (op->aux >= 0) {
            const struct gvalue *gv = graph_value(g, op->aux);

            k.aux = (struct ktensor){buf[op->aux], {0, 0, 0, 0}, gv->ndim};
            memcpy(k.aux.shape, gv->shape, sizeof k.aux.shape);
        }
        k.running_mean = stats;
        k.running_var = stats + 4096;
        k.update_stats = k.in[0].ndim >= 2 && k.in[0].shape[1] <= 4096;
        k.key = 7;
        if (op_info(op->type)->is_view)
            continue;
        st = be->forward(ctx, &k);
    }
    if (st) {
        snprintf(why, nwhy, "%s backend: %s", be->name, remat_errmsg());
    } else {
        int64_t n = graph_numel(graph_value(g, w->output));

        out = malloc(sizeof(float) * (size_t)(n ? n : 1));
        REMAT_ASSERT_TEST(out);
        memcpy(out, buf[w->output], sizeof(float) * (size_t)n);
    }
    for (size_t v = 0; v < nv; v++)
        if (graph_value(g, (int32_t)v)->view_of < 0)
            free(buf[v]);
    free(buf);
    free(stats);
    be->destroy(ctx);
    return out;
}

struct tally {
    int cases, passed, refused;
};

/* The ops whose inputs are all activations: every input stays a graph input. */
static bool multi_input(const Onnx__ModelProto *m)
{
    const char *t = m->graph->n_node ? m->graph->node[0]->op_type : "";

    return !strcmp(t, "Add") || !strcmp(t, "Sum") || !strcmp(t, "Mul") || !strcmp(t, "Concat");
}

/* One case: "passed", "refused: why" or a failure (CHECK). */
static void run_case(const char *name, struct tally *ty)
{
    char path[600], why[600] = "";
    size_t n;
    uint8_t *b, *packed = NULL;
    Onnx__ModelProto *m;
    Onnx__TensorProto *in[8] = {0}, *want = NULL, **inits = NULL;
    char *own_name[8] = {0};
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    size_t n_in = 0, n_init0, keep;
    const float *x, *wv;
    int64_t nx, nw;
    bool ok = true;

    snprintf(path, sizeof path, NODE_DIR "/%s/model.onnx", name);
    b = slurp(path, &n);
    m = b ? onnx__model_proto__unpack(NULL, n, b) : NULL;
    free(b);
    if (!m || !m->graph) {
        onnx__model_proto__free_unpacked(m, NULL);
        return;
    }
    ty->cases++;
    n_in = m->graph->n_input < 8 ? m->graph->n_input : 8;
    for (size_t i = 0; i < n_in; i++) {
        snprintf(path, sizeof path, NODE_DIR "/%s/test_data_set_0/input_%zu.pb", name, i);
        in[i] = read_tensor(path);
    }
    snprintf(path, sizeof path, NODE_DIR "/%s/test_data_set_0/output_0.pb", name);
    want = read_tensor(path);
    x = in[0] ? tensor_f32(in[0], &nx) : NULL;
    wv = want ? tensor_f32(want, &nw) : NULL;
    if (!x || !wv || m->graph->n_input > 8) {
        snprintf(why, sizeof why, "its data is not float32");
        goto refused;
    }
    /* inputs 1.. become initializers named as the graph's inputs, except for the ops
     * whose inputs are all activations */
    keep = multi_input(m) ? n_in : 1;
    n_init0 = m->graph->n_initializer;
    inits = calloc(n_init0 + n_in, sizeof *inits);
    REMAT_ASSERT_TEST(inits);
    if (n_init0)
        memcpy(inits, m->graph->initializer, sizeof *inits * n_init0);
    for (size_t i = 1; i < n_in; i++) {
        if (i < keep) {
            if (!in[i] || !tensor_f32(in[i], &nx)) {
                snprintf(why, sizeof why, "its data is not float32");
                goto refused;
            }
            continue;
        }
        if (!in[i]) {
            snprintf(why, sizeof why, "input %zu unreadable", i);
            goto refused;
        }
        own_name[i] = in[i]->name;
        in[i]->name = m->graph->input[i]->name;
        inits[n_init0 + i - keep] = in[i];
    }
    {
        Onnx__TensorProto **old = m->graph->initializer;
        size_t old_n = m->graph->n_initializer, old_in = m->graph->n_input;
        Onnx__ValueInfoProto **out_keep = m->graph->output;
        size_t n_out = m->graph->n_output;
        remat_status st;

        m->graph->initializer = inits;
        m->graph->n_initializer = n_init0 + n_in - keep;
        m->graph->n_input = keep;
        m->graph->n_output = n_out ? 1 : 0; /* the first output is compared */
        n = onnx__model_proto__get_packed_size(m);
        packed = malloc(n + 1);
        REMAT_ASSERT_TEST(packed);
        onnx__model_proto__pack(m, packed);
        for (size_t i = keep; i < n_in; i++)
            in[i]->name = own_name[i]; /* the model owns the name it lent */
        m->graph->initializer = old;
        m->graph->n_initializer = old_n;
        m->graph->n_input = old_in;
        m->graph->output = out_keep;
        m->graph->n_output = n_out;
        st = remat_onnx_read_buffer(packed, n, name, &(remat_onnx_opts){.no_loss = true},
                                    NULL, &g, &w);
        if (st) {
            const char *msg = remat_errmsg(), *colon = strstr(msg, "): ");

            if (strstr(msg, "remat does not read")) /* the op types, after the count */
                colon = strstr(msg, "reads): ") + 5;

            snprintf(why, sizeof why, "%s", colon ? colon + 3 : msg);
            if (strchr(why, '['))
                *strrchr(why, '[') = '\0';
            goto refused;
        }
    }
    if (graph_numel(graph_value(g, w->output)) != nw) {
        CHECK(false, "%s: %lld outputs, ONNX expects %lld", name,
              (long long)graph_numel(graph_value(g, w->output)), (long long)nw);
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        const struct backend_ops *be = k ? backend_cpu() : backend_ref();
        float *got = run_forward(g, w, (const Onnx__TensorProto *const *)in, be, why,
                                 sizeof why);
        int64_t bad = -1;

        CHECK_OR(got, ok = false; continue, "%s: %s", name, why);
        for (int64_t i = 0; i < nw && bad < 0; i++)
            if (!(fabs((double)got[i] - wv[i]) <= fmax(1e-4 * fabs(wv[i]), 1e-5)))
                bad = i;
        CHECK(bad < 0, "%s on %s: element %lld is %.7g, ONNX says %.7g", name, be->name,
              (long long)bad, bad >= 0 ? (double)got[bad] : 0, bad >= 0 ? (double)wv[bad] : 0);
        ok = ok && bad < 0;
        free(got);
    }
    if (ok) {
        ty->passed++;
        printf("| %s | passes (ref, cpu) |\n", name + 5);
    }
    goto out;
refused:
    ty->refused++;
    printf("| %s | refused: %s |\n", name + 5, why);
out:
    free(packed);
    free(inits);
    for (size_t i = 0; i < n_in; i++)
        onnx__tensor_proto__free_unpacked(in[i], NULL);
    onnx__tensor_proto__free_unpacked(want, NULL);
    onnx__model_proto__free_unpacked(m, NULL);
    remat_graph_free(g);
    remat_onnx_weights_free(w);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_conformance(void)
{
    DIR *d = opendir(NODE_DIR);
    struct dirent *e;
    char *names[2048];
    size_t n = 0;
    struct tally ty = {0};

    if (!d) {
        SKIP(NODE_DIR " is absent (Debian's libonnx-testdata)");
        return;
    }
    while ((e = readdir(d)) && n < 2048) {
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            size_t l = strlen(ops[i]);

            if (!strncmp(e->d_name, "test_", 5) && !strncmp(e->d_name + 5, ops[i], l) &&
                (ops[i][l - 1] == '_' || e->d_name[5 + l] == '\0' || e->d_name[5 + l] == '_') &&
                strncmp(e->d_name, "test_reduce_sum_square", 22)) { /* another op */
                names[n++] = strdup(e->d_name);
                break;
            }
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    printf("| case | result |\n|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        run_case(names[i], &ty);
        free(names[i]);
    }
    printf("\n%d cases of the mapped ops: %d pass on both backends, %d refused by the reader\n",
           ty.cases, ty.passed, ty.refused);
    CHECK(ty.passed >= 20, "only %d cases pass", ty.passed);
}

int main(void)
{
    RUN(test_conformance);
    return harness_end();
}
