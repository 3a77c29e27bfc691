/*
 * test_onnx_rnn.c - nn.LSTM and nn.GRU exported from PyTorch to ONNX, unrolled by remat
 * over the sequence, trained from their weights, against PyTorch's float64 gradients.
 *
 * tools/onnx_rnn_reference.py (Debian's PyTorch, run once at test time into a temporary
 * folder) exports, in training mode at opset 13, 1-layer nn.LSTM and nn.GRU over 10
 * steps of a batch of 3 with a linear head on the last step (also: the head on the
 * final states h_n and c_n; 2 layers, batch_first; 2 layers with the head on h_n;
 * bidirectional; the GRU with the exporter's constant folding, so that W, R and B are
 * not PyTorch's initializers; and that file with linear_before_reset set to 0, its
 * reference ONNX's GRU written out in PyTorch ops), and computes the loss
 * (cross-entropy against 3 labels) and every parameter's gradient in float64 and
 * float32. remat reads each file, starts a trainer from the initializers (checked bit
 * for bit against PyTorch's parameters, and no other parameter made), runs one forward
 * and backward on the same input on the ref and cpu backends, and compares: the loss
 * within 1e-4 relative, each gradient ||remat - PyTorch|| / ||PyTorch|| (floored at
 * the model's RMS gradient, as tests/test_onnx.c) within 1e-4.
 *
 * Also: the LSTM planned with approx-mc at its least budget trains 2 SGD steps to the
 * same parameter bits as with none, its measured peak the planned one and below none's;
 * an LSTM from a state of ones is refused with a message naming the node and the input.
 * Without PyTorch and onnx for /usr/bin/python3 the test reports skipped.
 */
#include "fixture_util.h"
#include "tf_grads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NX (10 * 3 * 8) /* the input's values */
#define NLAB 3

static char tmp_root[64];
static bool exported; /* PyTorch there and the exports made */

static bool have_torch(void)
{
    return system("/usr/bin/python3 -c 'import torch, onnx' >/dev/null 2>&1") == 0;
}

/* Runs tools/onnx_rnn_reference.py once for every model into tmp_root/<model>. */
static bool export_models(void)
{
    char cmd[1024];
    const char *seed = getenv("REMAT_SEED");

    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/onnx_rnn_reference.py %s lstm gru "
             "lstm_hc lstm2 gru2_hn lstm_bi gru_bi gru_fold gru_lbr0 lstm_h0 --seed %s "
             ">%s/export.log 2>&1", tmp_root, seed && *seed ? seed : "1", tmp_root);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "tail -5 %s/export.log", tmp_root);
        if (system(cmd)) {
        }
        return false;
    }
    return true;
}

static bool read_bin(const char *dir, const char *leaf, void *p, size_t bytes)
{
    char path[700];
    FILE *f;
    bool ok;

    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    f = fopen(path, "rb");
    ok = f && fread(p, 1, bytes, f) == bytes;
    if (f)
        fclose(f);
    return ok;
}

static int64_t init_numel(const struct group *init)
{
    int64_t n = 0;

    for (uint32_t i = 0; i < init->n; i++)
        n += init->r[i].n;
    return n;
}

/* A trainer of the model in dir planned with po on backend be, from the file's weights
 * (checked against init.prm bit for bit). */
static remat_trainer *trainer(const char *dir, const remat_plan_opts *po, remat_backend_kind be,
                              const char *what, remat_graph **g, remat_tgraph **tg,
                              remat_schedule **s)
{
    char path[700];
    remat_onnx_weights *w = NULL;
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *t = NULL;
    struct group init = {0};

    snprintf(path, sizeof path, "%s/model.onnx", dir);
    to.backend = be;
    to.threads = 2;
    CHECK_OR(remat_onnx_read(path, NULL, NULL, g, &w) == REMAT_OK &&
                 remat_tgraph_from_graph(*g, NULL, tg) == REMAT_OK &&
                 remat_plan(*tg, po, s, NULL) == REMAT_OK &&
                 remat_trainer_new(*g, *tg, *s, &to, &t) == REMAT_OK &&
                 remat_onnx_weights_apply(w, t) == REMAT_OK,
             goto out, "%s: %s", what, remat_errmsg());
    snprintf(path, sizeof path, "%s/init.prm", dir);
    CHECK_OR(read_prm(path, &init), goto out, "%s: cannot read init.prm", what);
    check_init(t, &init, what);
    /* remat made no parameter of its own: PyTorch's are all there are */
    CHECK(remat_graph_n_params(*g) == init_numel(&init), "%s: %lld parameters, PyTorch has "
          "%lld", what, (long long)remat_graph_n_params(*g), (long long)init_numel(&init));
out:
    group_fini(&init);
    remat_onnx_weights_free(w);
    return t;
}

static void free_all(remat_trainer *t, remat_schedule *s, remat_tgraph *tg, remat_graph *g)
{
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* One forward and backward on backend be against PyTorch's float64 loss and gradients. */
static void run_backend(const char *model, const char *dir, remat_backend_kind be,
                        const struct group *ref, double torch32)
{
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t;
    char what[96];
    float x[NX];
    int32_t y[NLAB];
    const float *want;
    const char *worst_name = "";
    double loss = 0, worst;
    int64_t n;

    snprintf(what, sizeof what, "%s %s", model, remat_backend_name(be));
    t = trainer(dir, &po, be, what, &g, &tg, &s);
    if (!t)
        goto out;
    CHECK_OR(read_bin(dir, "x.bin", x, sizeof x) && read_bin(dir, "labels.bin", y, sizeof y),
             goto out, "%s: cannot read the batch", what);
    CHECK_OR(remat_trainer_gradients(t, (const float *const[]){x}, y, &loss) == REMAT_OK,
             goto out, "%s: %s", what, remat_errmsg());
    want = find_f32(ref, "loss", &n);
    CHECK_OR(want && n == 1, goto out, "%s: no loss in grads.prm", what);
    CHECK(fabs(loss - want[0]) <= REL_TOL * fabs(want[0]), "%s: loss %.7g, PyTorch %.7g",
          what, loss, (double)want[0]);
    worst = check_grads(t, NULL, ref, REL_TOL, what, &worst_name);
    printf("  %-12s %lld parameters, %d remat ops, loss %.6f (PyTorch %.6f), worst gradient "
           "error %.2e (%s; PyTorch float32: %.2e)\n", what,
           (long long)remat_graph_n_params(g), remat_graph_n_ops(g), loss, (double)want[0],
           worst, worst_name, torch32);
out:
    free_all(t, s, tg, g);
}

static bool check_model(const char *model)
{
    char dir[600], path[700];
    struct group ref = {0}, g32 = {0};
    const char *wn = "";
    double torch32;
    bool ok = false;

    snprintf(dir, sizeof dir, "%s/%s", tmp_root, model);
    snprintf(path, sizeof path, "%s/grads.prm", dir);
    CHECK_OR(read_prm(path, &ref), goto out, "%s: cannot read grads.prm", model);
    snprintf(path, sizeof path, "%s/grads32.prm", dir);
    CHECK_OR(read_prm(path, &g32), goto out, "%s: cannot read grads32.prm", model);
    torch32 = check_grads(NULL, &g32, &ref, 0, model, &wn);
    run_backend(model, dir, REMAT_BACKEND_REF, &ref, torch32);
    run_backend(model, dir, REMAT_BACKEND_CPU, &ref, torch32);
    ok = true;
out:
    group_fini(&ref);
    group_fini(&g32);
    return ok;
}

/* 2 SGD steps on the ref backend under strategy st (approx-mc at its least budget):
 * the trainer, its measured peak checked against the planned one. */
static remat_trainer *train2(const char *dir, remat_strategy strat, remat_graph **g,
                             remat_tgraph **tg, remat_schedule **s, size_t *peak)
{
    remat_plan_opts po = {.strategy = strat, .budget_min = strat != REMAT_STRATEGY_NONE};
    remat_train_stats st;
    remat_trainer *t;
    float x[NX];
    int32_t y[NLAB];
    double loss;

    t = trainer(dir, &po, REMAT_BACKEND_REF, remat_strategy_name(strat), g, tg, s);
    if (!t || !read_bin(dir, "x.bin", x, sizeof x) || !read_bin(dir, "labels.bin", y, sizeof y))
        return t;
    for (int i = 0; i < 2; i++)
        CHECK_OK(remat_trainer_step(t, (const float *const[]){x}, y, &loss));
    remat_trainer_stats(t, &st);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "lstm %s: measured %zu, planned %zu",
          remat_strategy_name(strat), st.measured_peak_bytes, st.planned_peak_bytes);
    *peak = st.planned_peak_bytes;
    return t;
}

/* approx-mc at its least budget against none: the same parameter bits after 2 steps. */
static void check_budget(void)
{
    char dir[600], path[700];
    struct group init = {0};
    remat_graph *g[2] = {NULL, NULL};
    remat_tgraph *tg[2] = {NULL, NULL};
    remat_schedule *s[2] = {NULL, NULL};
    remat_trainer *t[2];
    size_t peak[2] = {0, 0};
    int same = 0;

    snprintf(dir, sizeof dir, "%s/lstm", tmp_root);
    t[0] = train2(dir, REMAT_STRATEGY_NONE, &g[0], &tg[0], &s[0], &peak[0]);
    t[1] = train2(dir, REMAT_STRATEGY_APPROX_MC, &g[1], &tg[1], &s[1], &peak[1]);
    snprintf(path, sizeof path, "%s/init.prm", dir);
    CHECK_OR(t[0] && t[1] && read_prm(path, &init), goto out, "lstm: no trainers");
    for (uint32_t i = 0; i < init.n; i++) {
        float *p0, *p1;
        int64_t n0 = 0, n1 = 0;

        CHECK_OR(!remat_trainer_param(t[0], init.r[i].name, &p0, NULL, &n0) &&
                     !remat_trainer_param(t[1], init.r[i].name, &p1, NULL, &n1) && n0 == n1,
                 continue, "lstm: no parameter '%s'", init.r[i].name);
        CHECK(!memcmp(p0, p1, sizeof(float) * (size_t)n0), "lstm: '%s' differs between none "
              "and approx-mc after 2 steps", init.r[i].name);
        same += !memcmp(p0, p1, sizeof(float) * (size_t)n0) &&
                memcmp(p0, init.r[i].data, sizeof(float) * (size_t)n0);
    }
    /* steps that end with h and c: a planner can checkpoint them (onnx_rnn.c) */
    CHECK(peak[1] < peak[0], "lstm: approx-mc's least peak %zu is not below none's %zu",
          peak[1], peak[0]);
    printf("  lstm 2 SGD steps: none peak %zu bytes, approx-mc least budget %zu bytes (measured "
           "= planned), %d of %u parameters moved and bit-identical\n", peak[0], peak[1], same,
           init.n);
out:
    group_fini(&init);
    for (int k = 0; k < 2; k++)
        free_all(t[k], s[k], tg[k], g[k]);
}

static void test_lstm(void)
{
    if (!exported) {
        SKIP("no PyTorch or onnx for /usr/bin/python3");
        return;
    }
    if (check_model("lstm"))
        check_budget();
    check_model("lstm_hc");
    check_model("lstm2");
    check_model("lstm_bi");
}

static void test_gru(void)
{
    if (!exported) {
        SKIP("no PyTorch or onnx for /usr/bin/python3");
        return;
    }
    check_model("gru");
    check_model("gru2_hn");
    check_model("gru_bi");
    check_model("gru_fold");
    check_model("gru_lbr0");
}

/* An LSTM from a state of ones: one message naming the node and the input. */
static void test_refused(void)
{
    char path[700];
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    remat_status st;

    if (!exported) {
        SKIP("no PyTorch or onnx for /usr/bin/python3");
        return;
    }
    snprintf(path, sizeof path, "%s/lstm_h0/model.onnx", tmp_root);
    st = remat_onnx_read(path, NULL, NULL, &g, &w);
    CHECK(st == REMAT_ERR_UNSUPPORTED && strstr(remat_errmsg(), "'/rnn/LSTM' (LSTM") &&
              strstr(remat_errmsg(), "initial_h"),
          "lstm_h0: status %d, message '%s'", (int)st, remat_errmsg());
    printf("  lstm_h0: %s\n", remat_errmsg());
    remat_onnx_weights_free(w);
    remat_graph_free(g);
}

int main(void)
{
    char cmd[128];

    snprintf(tmp_root, sizeof tmp_root, "/tmp/remat_onnx_rnn_XXXXXX");
    REMAT_ASSERT_TEST(mkdtemp(tmp_root));
    if (have_torch()) {
        exported = export_models();
        CHECK(exported, "tools/onnx_rnn_reference.py failed");
    }
    RUN(test_lstm);
    RUN(test_gru);
    RUN(test_refused);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd)) {
    }
    return harness_end();
}
