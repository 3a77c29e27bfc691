/*
 * test_onnx_tf.c - transformers exported from PyTorch to ONNX, trained by remat from
 * their weights, against PyTorch's float64 gradients.
 *
 * tools/onnx_tf_reference.py (Debian's PyTorch, run at test time into a temporary
 * folder) exports a small GPT written in plain PyTorch (token and position embeddings,
 * causal attention with matmul and softmax, GELU MLP, layer norms, output projection
 * tied to the token embedding) and a 2-layer torch.nn.TransformerEncoder with a linear
 * head, both taking int64 token ids, in training mode at opset 14; and computes the
 * loss (mean token cross-entropy against next-token targets) and every parameter's
 * gradient for one batch in float64 and in float32. remat reads the file (the token ids
 * become a tokens value, the positions folded from torch.arange a positions value, the
 * targets a new tokens value of its token_ce loss), starts a trainer from the
 * initializers (checked bit for bit), runs one forward and backward on the same tokens
 * on the ref and cpu backends, and compares: the loss within 1e-4 relative, and each
 * gradient ||remat - PyTorch|| / ||PyTorch|| (floored at the model's RMS gradient, as
 * tests/test_onnx.c) within 1e-4.
 *
 * Also: the same files at opset 17 (LayerNormalization as one op) and opset 13.
 *
 * A linear layer read in parts (the script's parts-* models, onnx_linear.c): one
 * nn.Linear(8, 24) cut into q, k, v by a Split (opset 14 and 11's attribute), Slices, a
 * Split of a bias-less MatMul or of a Gemm on 2-d rows must read as three linear layers
 * and no crop, with the op count worked out by hand (that of parts-twin, the same model
 * written with three nn.Linear(8, 8)); a Split of the embedding itself, a linear output
 * that a second head also reads, and a split into 8 and 16 stay one layer and crops.
 * Each trains one step against PyTorch float64 as above (the fused initializer's
 * gradient whole); for parts-split also the checksum (FNV-1a over PyTorch's parameters
 * in order), and the parameter file: the initializer saved once, whole, and read back.
 * Without PyTorch and onnx for /usr/bin/python3 the test reports skipped.
 */
#include "fixture_util.h"
#include "graph/graph.h"
#include "tf_grads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTOK 32 /* batch 2, 16 tokens */

static char tmp_root[64];

static bool have_torch(void)
{
    return system("/usr/bin/python3 -c 'import torch, onnx' >/dev/null 2>&1") == 0;
}

static bool export_model(const char *model, int opset, const char *dir)
{
    char cmd[1024];
    const char *seed = getenv("REMAT_SEED");

    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/onnx_tf_reference.py %s %s --opset %d "
             "--seed %s >%s/export.log 2>&1", model, dir, opset, seed && *seed ? seed : "1",
             tmp_root);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "tail -5 %s/export.log", tmp_root);
        if (system(cmd)) {
        }
        return false;
    }
    return true;
}

/* The token arrays of the trainer's int32 values: ids, positions (filled by the
 * trainer), targets. */
static bool token_feed(const remat_graph *g, const int32_t *tok, const int32_t *feed[4])
{
    remat_token_value tv[4];
    int32_t n = remat_graph_token_values(g, tv, 4);

    if (n < 2 || n > 4)
        return false;
    for (int32_t i = 0; i < n; i++)
        feed[i] = tv[i].role == REMAT_TOKEN_IDS ? tok : tv[i].role == REMAT_TOKEN_TARGETS
                                                          ? tok + NTOK : NULL;
    return true;
}

/* parts-split's parameters as PyTorch orders them (init): the trainer's checksum is
 * FNV-1a over their bytes; saved, the file holds each once under its name (lin.weight
 * whole, (24, 8)), and loading it restores a clobbered lin.weight. */
static void check_param_file(remat_trainer *t, const struct group *init, const char *label)
{
    char path[128];
    struct group saved = {0};
    const struct rec *w = find_rec(init, "lin.weight"), *sw;
    uint64_t h = 0xcbf29ce484222325ull;
    float *p;
    int64_t n;

    for (uint32_t i = 0; i < init->n; i++)
        for (size_t k = 0; k < sizeof(float) * (size_t)init->r[i].n; k++)
            h = (h ^ ((const unsigned char *)init->r[i].data)[k]) * 0x100000001b3ull;
    CHECK(remat_trainer_param_checksum(t) == h, "%s: checksum %016llx, PyTorch's parameters "
          "%016llx", label, (unsigned long long)remat_trainer_param_checksum(t),
          (unsigned long long)h);
    snprintf(path, sizeof path, "%s/saved.prm", tmp_root);
    CHECK_OR(w && remat_trainer_save(t, path) == REMAT_OK && read_prm(path, &saved), return,
             "%s: save: %s", label, remat_errmsg());
    sw = find_rec(&saved, "lin.weight");
    CHECK(saved.n == init->n, "%s: %u records saved, %u parameters", label, saved.n, init->n);
    CHECK(sw && sw->ndim == 2 && sw->dims[0] == 24 && sw->dims[1] == 8 &&
              !memcmp(sw->data, w->data, sizeof(float) * 192),
          "%s: lin.weight is not saved whole", label);
    CHECK_OR(remat_trainer_param(t, "lin.weight", &p, NULL, &n) == REMAT_OK && n == 192,
             goto out, "%s: no lin.weight of 192 values", label);
    memset(p, 0, sizeof(float) * 192);
    CHECK(remat_trainer_load(t, path) == REMAT_OK && !memcmp(p, w->data, sizeof(float) * 192),
          "%s: load did not restore lin.weight: %s", label, remat_errmsg());
out:
    group_fini(&saved);
}

static void run_backend(const char *what, const char *dir, remat_backend_kind be,
                        const struct group *ref, double torch32)
{
    char path[700], label[160];
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    struct group init = {0};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_train_opts to = remat_train_opts_default();
    const int32_t *feed[4] = {NULL, NULL, NULL, NULL};
    int32_t tok[2 * NTOK];
    const float *want;
    const char *worst_name = "";
    double loss = 0, worst;
    int64_t n;
    FILE *f;

    snprintf(label, sizeof label, "%s %s", what, remat_backend_name(be));
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    CHECK_OR(remat_onnx_read(path, NULL, NULL, &g, &w) == REMAT_OK, goto out, "%s: %s", label,
             remat_errmsg());
    to.backend = be;
    to.threads = 2;
    CHECK_OR(remat_tgraph_from_graph(g, NULL, &tg) == REMAT_OK &&
                 remat_plan(tg, &po, &s, NULL) == REMAT_OK &&
                 remat_trainer_new(g, tg, s, &to, &t) == REMAT_OK &&
                 remat_onnx_weights_apply(w, t) == REMAT_OK,
             goto out, "%s: %s", label, remat_errmsg());
    snprintf(path, sizeof path, "%s/init.prm", dir);
    CHECK_OR(read_prm(path, &init), goto out, "%s: cannot read init.prm", label);
    check_init(t, &init, label);
    if (strstr(what, "parts-split opset 14"))
        check_param_file(t, &init, label);
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    f = fopen(path, "rb");
    CHECK_OR(f && fread(tok, sizeof *tok, 2 * NTOK, f) == 2 * NTOK, if (f) fclose(f);
             goto out, "%s: cannot read tokens.bin", label);
    fclose(f);
    CHECK_OR(token_feed(g, tok, feed), goto out, "%s: unexpected int32 values", label);
    CHECK_OR(remat_trainer_gradients_tokens(t, feed, &loss) == REMAT_OK, goto out, "%s: %s",
             label, remat_errmsg());
    want = find_f32(ref, "loss", &n);
    CHECK_OR(want && n == 1, goto out, "%s: no loss in grads.prm", label);
    CHECK(fabs(loss - want[0]) <= REL_TOL * fabs(want[0]), "%s: loss %.7g, PyTorch %.7g",
          label, loss, (double)want[0]);
    worst = check_grads(t, NULL, ref, REL_TOL, label, &worst_name);
    printf("  %-22s %lld parameters in %u tensors, loss %.6f (PyTorch %.6f), worst gradient "
           "error %.2e (%s; PyTorch float32: %.2e)\n", label,
           (long long)remat_graph_n_params(g), init.n, loss, (double)want[0], worst,
           worst_name, torch32);
out:
    group_fini(&init);
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_onnx_weights_free(w);
    remat_graph_free(g);
}

static void check_model(const char *model, int opset)
{
    char dir[600], path[700], what[64];
    struct group ref = {0}, g32 = {0};
    const char *wn = "";
    double torch32;

    snprintf(dir, sizeof dir, "%s/%s%d", tmp_root, model, opset);
    snprintf(what, sizeof what, "%s opset %d", model, opset);
    CHECK_OR(export_model(model, opset, dir), return, "%s: tools/onnx_tf_reference.py failed",
             what);
    snprintf(path, sizeof path, "%s/grads.prm", dir);
    CHECK_OR(read_prm(path, &ref), goto out, "%s: cannot read grads.prm", what);
    snprintf(path, sizeof path, "%s/grads32.prm", dir);
    CHECK_OR(read_prm(path, &g32), goto out, "%s: cannot read grads32.prm", what);
    torch32 = check_grads(NULL, &g32, &ref, 0, what, &wn);
    run_backend(what, dir, REMAT_BACKEND_REF, &ref, torch32);
    run_backend(what, dir, REMAT_BACKEND_CPU, &ref, torch32);
out:
    group_fini(&ref);
    group_fini(&g32);
}

static void test_gpt(void)
{
    if (!have_torch()) {
        SKIP("no PyTorch or onnx for /usr/bin/python3");
        return;
    }
    check_model("gpt", 14);
    check_model("gpt", 13);
    check_model("gpt", 17);
}

static void test_encoder(void)
{
    if (!have_torch()) {
        SKIP("no PyTorch or onnx for /usr/bin/python3");
        return;
    }
    check_model("encoder", 14);
    check_model("encoder", 17);
}

/* linear and crop ops of the model's graph as read */
static void count_ops(const char *dir, int32_t *n_ops, int32_t *linears, int32_t *crops)
{
    char path[700];
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;

    *n_ops = *linears = *crops = -1;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    CHECK_OR(remat_onnx_read(path, NULL, NULL, &g, &w) == REMAT_OK, return, "%s: %s", dir,
             remat_errmsg());
    *n_ops = remat_graph_n_ops(g);
    *linears = *crops = 0;
    for (int32_t o = 0; o < *n_ops; o++) {
        *linears += graph_op(g, o)->type == REMAT_OP_LINEAR;
        *crops += graph_op(g, o)->type == REMAT_OP_CROP;
    }
    remat_onnx_weights_free(w);
    remat_graph_free(g);
}

/* Ops by hand: the embedding, the token loss, q * k + v (2), and per linear layer over
 * (2, 16, 8) its rows view, the op and the view back (3), or over 2-d rows the op alone;
 * per crop of a (2, 16, C) activation a 4-d view, the crop and a view back (3). */
static void test_parts(void)
{
    static const struct {
        const char *model;
        int opset;
        int32_t ops, linears, crops;
    } cases[] = {
        {"parts-twin", 14, 1 + 1 + 2 + 4 * 3, 4, 0},
        {"parts-split", 14, 1 + 1 + 2 + 4 * 3, 4, 0},
        {"parts-split", 11, 1 + 1 + 2 + 4 * 3, 4, 0},
        {"parts-slices", 14, 1 + 1 + 2 + 4 * 3, 4, 0},
        {"parts-nobias", 14, 1 + 1 + 2 + 4 * 3, 4, 0},
        /* the rows' view, three linear layers, three views back, the head */
        {"parts-gemm", 14, 1 + 1 + 2 + 1 + 3 + 3 + 3, 4, 0},
        {"parts-input", 14, 1 + 1 + 2 + 3 * 3 + 3, 1, 3},
        /* and a second head of 3, the add of the heads */
        {"parts-shared", 14, 1 + 1 + 2 + 2 * 3 + 3 * 3 + 3 + 1, 3, 3},
        {"parts-unequal", 14, 1 + 1 + 3 * 3 + 2 * 3 + 1, 3, 2},
    };

    if (!have_torch()) {
        SKIP("no PyTorch or onnx for /usr/bin/python3");
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[600];
        int32_t n_ops, lin, crops;

        snprintf(dir, sizeof dir, "%s/%s%d", tmp_root, cases[i].model, cases[i].opset);
        check_model(cases[i].model, cases[i].opset);
        count_ops(dir, &n_ops, &lin, &crops);
        CHECK(n_ops == cases[i].ops && lin == cases[i].linears && crops == cases[i].crops,
              "%s opset %d: %d ops, %d linear, %d crops; want %d, %d, %d", cases[i].model,
              cases[i].opset, n_ops, lin, crops, cases[i].ops, cases[i].linears,
              cases[i].crops);
        printf("  %-22s %d ops, %d linear layers, %d crops\n", cases[i].model, n_ops, lin,
               crops);
    }
}

int main(void)
{
    char cmd[128];

    snprintf(tmp_root, sizeof tmp_root, "/tmp/remat_onnx_tf_XXXXXX");
    REMAT_ASSERT_TEST(mkdtemp(tmp_root));
    RUN(test_gpt);
    RUN(test_encoder);
    RUN(test_parts);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd)) {
    }
    return harness_end();
}
