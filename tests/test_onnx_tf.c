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
 * Without PyTorch and onnx for /usr/bin/python3 the test reports skipped.
 */
#include "fixture_util.h"
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

int main(void)
{
    char cmd[128];

    snprintf(tmp_root, sizeof tmp_root, "/tmp/remat_onnx_tf_XXXXXX");
    REMAT_ASSERT_TEST(mkdtemp(tmp_root));
    RUN(test_gpt);
    RUN(test_encoder);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd)) {
    }
    return harness_end();
}
