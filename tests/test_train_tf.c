/*
 * test_train_tf.c - the transformers of the zoo trained under every plan, and the tied
 * output layer's gradient.
 *
 * - Tied weights: a language model whose output layer reads its embedding's table
 *   (matmul with a parameter as B) gets the table's gradient from both uses; checked
 *   against central finite differences of the loss, entry by entry.
 * - A reduced GPT-2 and a two-layer BERT (dropout on, so the masks must be redrawn
 *   identically on recomputation) trained three SGD steps under none, blocks,
 *   selective, approx-mc, chen-sqrtn and hybrid at their least budgets, and exact-tc:
 *   the same parameter bits as none, the measured peak equal to the planned one, and
 *   the loss falls over ten steps on one batch (which the model memorises).
 */
#include "harness.h"

#include <math.h>
#include <stdlib.h>

/* ids (2, 5) over a vocabulary of 7, embedded in 4, a layer norm, logits against the
 * table transposed, token cross-entropy against targets. */
static remat_graph *tied_lm(void)
{
    remat_graph *g = NULL;
    int32_t ids, e, h, in[2];

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    ids = remat_graph_tokens(g, "ids", 2, (int64_t[]){2, 5});
    e = remat_graph_add(g, REMAT_OP_EMBEDDING, &ids, 1,
                        &(remat_attrs){.vocab = 7, .out_channels = 4}, "wte");
    h = remat_graph_add(g, REMAT_OP_LAYER_NORM, &e, 1, NULL, "ln");
    in[0] = h;
    in[1] = remat_graph_param(g, e, 0);
    in[0] = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true},
                            "head");
    in[1] = remat_graph_tokens(g, "next", 2, (int64_t[]){2, 5});
    remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
    CHECK(remat_graph_status(g) == REMAT_OK, "tied_lm: %s", remat_errmsg());
    return g;
}

/* The table's gradient against (L(w + h) - L(w - h)) / 2h: L is smooth (layer norm,
 * softmax), h 1e-2 in float32 arithmetic: rounding of the loss (about 1e-7) over 2h
 * gives 5e-6, truncation h^2 |L'''| / 6 below 1e-4; tolerance 2e-3 + 1e-2 relative. A
 * gradient that missed either use (the embedding's rows or the head's) would be off by
 * the other's contribution, of the same order as the whole. */
static void test_tied_grad(void)
{
    remat_graph *g = tied_lm();
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    float *w, *gw, *g0;
    int64_t n = 0;
    double loss, worst = 0;

    CHECK_I64(remat_graph_n_params(g), 7 * 4 + 4 + 4); /* the table once, gamma, beta */
    if (remat_tgraph_from_graph(g, NULL, &tg) || remat_plan_none(tg, &s) ||
        remat_trainer_new(g, tg, s, NULL, &t) ||
        remat_trainer_param(t, "wte.weight", &w, &gw, &n)) {
        CHECK(false, "tied_lm: %s", remat_errmsg());
        goto out;
    }
    CHECK_OK(remat_trainer_gradients(t, NULL, NULL, &loss));
    g0 = malloc(sizeof *g0 * (size_t)n);
    memcpy(g0, gw, sizeof *g0 * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        float keep = w[i];
        double lp, lm, fd;

        w[i] = keep + 1e-2f;
        CHECK_OK(remat_trainer_gradients(t, NULL, NULL, &lp));
        w[i] = keep - 1e-2f;
        CHECK_OK(remat_trainer_gradients(t, NULL, NULL, &lm));
        w[i] = keep;
        fd = (lp - lm) / (2 * 1e-2);
        CHECK(fabs(fd - g0[i]) <= 2e-3 + 1e-2 * fabs(fd), "wte.weight[%lld]: gradient %g, "
              "finite difference %g", (long long)i, g0[i], fd);
        worst = fmax(worst, fabs(fd - g0[i]));
    }
    printf("  tied table: %lld entries, worst |fd - grad| %.2e\n", (long long)n, worst);
    free(g0);
out:
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Three SGD steps of g under strategy s at its least budget on the ref backend;
 * NULL when not planned (the exact DP past its cap). */
static remat_trainer *train3(const remat_graph *g, const remat_tgraph *tg, remat_strategy s,
                             remat_schedule **sched, const char *model)
{
    remat_plan_opts po = {.strategy = s, .budget_min = true, .max_lower_sets = 20000};
    remat_trainer *t = NULL;
    remat_train_stats st;
    double loss;

    if (remat_plan(tg, &po, sched, NULL) == REMAT_ERR_UNSUPPORTED) {
        printf("  %s %s: not planned (%s)\n", model, remat_strategy_name(s), remat_errmsg());
        return NULL;
    }
    if (!*sched || remat_trainer_new(g, tg, *sched, NULL, &t)) {
        CHECK(false, "%s %s: %s", model, remat_strategy_name(s), remat_errmsg());
        return NULL;
    }
    for (int i = 0; i < 3; i++)
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
    remat_trainer_stats(t, &st);
    CHECK(st.measured_peak_bytes == st.planned_peak_bytes, "%s %s: measured %zu, planned %zu",
          model, remat_strategy_name(s), st.measured_peak_bytes, st.planned_peak_bytes);
    return t;
}

/* Ten steps on one batch (every token value fixed: entry i of a value of vocabulary V
 * holds (7 i + 3) mod V), its loss before the first and the last update. */
static void fixed_batch(const remat_graph *g, remat_trainer *t, double *first, double *last)
{
    remat_token_value tv[8];
    int32_t *owned[8] = {NULL};
    const int32_t *arrays[8] = {NULL};
    int32_t n = remat_graph_token_values(g, tv, 8);

    CHECK(n > 0 && n <= 8, "%d token values", n);
    for (int32_t i = 0; i < n && i < 8; i++) {
        int64_t shape[4], numel = 1;
        int nd = remat_graph_value_shape(g, tv[i].value, shape);
        int32_t *a;

        for (int d = 0; d < nd; d++)
            numel *= shape[d];
        arrays[i] = owned[i] = a = malloc(sizeof *a * (size_t)numel);
        for (int64_t k = 0; k < numel; k++)
            a[k] = (int32_t)((7 * k + 3) % tv[i].vocab);
    }
    for (int k = 0; k < 10; k++) {
        double loss = 0;

        CHECK_OK(remat_trainer_step_tokens(t, arrays, &loss));
        *first = k ? *first : loss;
        *last = loss;
    }
    for (int32_t i = 0; i < n && i < 8; i++)
        free(owned[i]);
}

static void same_bits(const char *model, const remat_zoo_opts *zo)
{
    static const remat_strategy ss[] = {
        REMAT_STRATEGY_NONE, REMAT_STRATEGY_BLOCKS, REMAT_STRATEGY_SELECTIVE,
        REMAT_STRATEGY_APPROX_MC, REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_HYBRID,
        REMAT_STRATEGY_EXACT_TC,
    };
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_trainer *base = NULL;
    double first = 0, last = 0;

    if (remat_zoo_build(model, zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "%s: %s", model, remat_errmsg());
        goto out;
    }
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        remat_schedule *sched = NULL;
        remat_trainer *t = train3(g, tg, ss[i], &sched, model);

        if (t && base)
            CHECK(remat_trainer_param_checksum(t) == remat_trainer_param_checksum(base),
                  "%s %s: other bits than none", model, remat_strategy_name(ss[i]));
        if (!base)
            base = t;
        else
            remat_trainer_free(t);
        remat_schedule_free(sched);
    }
    if (base)
        fixed_batch(g, base, &first, &last);
    printf("  %s: loss %.4f -> %.4f over ten steps on one batch\n", model, first, last);
    CHECK(base && last < first, "%s: the loss did not fall (%g -> %g)", model, first, last);
out:
    remat_trainer_free(base);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void test_gpt2_plans(void)
{
    remat_zoo_opts zo = {.batch = 2, .layers = 2, .heads = 2, .hidden = 16, .seq_len = 8,
                         .vocab = 32};

    same_bits("gpt2", &zo);
}

static void test_bert_plans(void)
{
    remat_zoo_opts zo = {.batch = 2, .layers = 2, .heads = 2, .hidden = 16, .seq_len = 8,
                         .vocab = 32};

    same_bits("bert-base", &zo);
}

int main(void)
{
    RUN(test_tied_grad);
    RUN(test_gpt2_plans);
    RUN(test_bert_plans);
    return harness_end();
}
