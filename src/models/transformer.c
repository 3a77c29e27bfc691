/*
 * transformer.c - GPT-2 and BERT-style encoders in the zoo, with Hugging Face's module
 * paths as op names ("h.3.attn.c_proj", "encoder.layer.3.attention.output.dense").
 *
 * Tokens come in as (batch, seq_len) ids; the hidden state is (batch, seq_len, hidden).
 * A linear layer over the hidden state is a view to (batch * seq_len, hidden), the
 * linear op, and a view back (views cost no memory). Attention's query, key and value
 * are three linear layers (GPT-2 fuses them into one c_attn of three times the width:
 * the same parameters and FLOPs); heads are a view to (batch, seq, heads, head_dim) and
 * a transpose to (batch, heads, seq, head_dim). The scores softmax_last takes
 * 1/sqrt(head_dim) as its scale, with the causal mask in GPT-2. The output layer reads
 * the token embedding's table transposed (tied weights), so GPT-2 small has exactly
 * 124,439,808 parameters. BERT's decoder has no bias of its own (a matmul has none).
 */
#include "models/zoo.h"

#include <math.h>
#include <string.h>

/* The shapes every layer shares. */
struct tf {
    remat_graph *g;
    const struct zoo_cfg *c;
    int64_t b, s, d, h;
    float eps;
};

static int32_t tf_reshape(const struct tf *t, int32_t x, const char *prefix,
                          const char *leaf, int ndim, const int64_t *shape)
{
    remat_attrs at = {.ndim = ndim};

    memcpy(at.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return zoo_op1(t->g, REMAT_OP_RESHAPE, x, &at, prefix, leaf);
}

/* A batched matrix product of in[0] and in[1], named prefix.leaf. */
static int32_t zoo_mm(remat_graph *g, const int32_t in[2], const remat_attrs *at,
                      const char *prefix, const char *leaf)
{
    char name[ZOO_NAME_MAX];

    snprintf(name, sizeof name, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", leaf);
    return remat_graph_add(g, REMAT_OP_MATMUL, in, 2, at, name);
}

/* A linear layer over the last axis of (b, s, in): (b, s, out). */
static int32_t tf_linear(const struct tf *t, int32_t x, const char *prefix, const char *leaf,
                         int64_t out)
{
    char name[ZOO_NAME_MAX], v[ZOO_NAME_MAX + 8];
    int64_t shape[4];

    if (!zoo_shape(t->g, x, shape))
        return -1;
    snprintf(name, sizeof name, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", leaf);
    snprintf(v, sizeof v, "%s.rows", name);
    x = tf_reshape(t, x, NULL, v, 2, (int64_t[]){t->b * t->s, shape[2]});
    x = zoo_linear(t->g, x, NULL, name, out, true);
    snprintf(v, sizeof v, "%s.seq", name);
    return tf_reshape(t, x, NULL, v, 3, (int64_t[]){t->b, t->s, out});
}

static int32_t tf_ln(const struct tf *t, int32_t x, const char *prefix, const char *leaf)
{
    remat_attrs at = {.eps = t->eps};

    return zoo_op1(t->g, REMAT_OP_LAYER_NORM, x, &at, prefix, leaf);
}

/* Dropout when the model has it; x itself otherwise. */
static int32_t tf_dropout(const struct tf *t, int32_t x, const char *prefix, const char *leaf)
{
    return t->c->dropout > 0 ? zoo_dropout(t->g, x, prefix, leaf, t->c->dropout) : x;
}

static int32_t tf_add(const struct tf *t, int32_t x, int32_t y, const char *prefix,
                      const char *leaf)
{
    int32_t xs[2] = {x, y};

    return zoo_opn(t->g, REMAT_OP_ADD, xs, 2, prefix, leaf);
}

/* The split in its two ops: (b, s, d) viewed as (b, s, h, d / h), then transposed to
 * (b, h, s, d / h). */
static int32_t tf_split_view(const struct tf *t, int32_t x, const char *prefix, const char *leaf)
{
    char name[ZOO_NAME_MAX];

    snprintf(name, sizeof name, "%s.split", leaf);
    return tf_reshape(t, x, prefix, name, 4, (int64_t[]){t->b, t->s, t->h, t->d / t->h});
}

static int32_t tf_split_transpose(const struct tf *t, int32_t x, const char *prefix,
                                  const char *leaf)
{
    remat_attrs tr = {.perm = {0, 2, 1, 3}};
    char name[ZOO_NAME_MAX];

    snprintf(name, sizeof name, "%s.heads", leaf);
    return zoo_op1(t->g, REMAT_OP_TRANSPOSE, x, &tr, prefix, name);
}

/* (b, s, d) to (b, h, s, d / h), or back (merge). */
static int32_t tf_heads(const struct tf *t, int32_t x, const char *prefix, const char *leaf,
                        bool merge)
{
    remat_attrs tr = {.perm = {0, 2, 1, 3}};
    char name[ZOO_NAME_MAX];

    if (!merge)
        return tf_split_transpose(t, tf_split_view(t, x, prefix, leaf), prefix, leaf);
    snprintf(name, sizeof name, "%s.merge", leaf);
    x = zoo_op1(t->g, REMAT_OP_TRANSPOSE, x, &tr, prefix, name);
    snprintf(name, sizeof name, "%s.merge_view", leaf);
    return tf_reshape(t, x, prefix, name, 3, (int64_t[]){t->b, t->s, t->d});
}

/* Multi-head self-attention on (b, s, d) up to the merged heads, before the output
 * projection; p is the module path of its query, key and value layers, named q, k, v
 * (GPT-2, causal) or query, key, value (BERT). */
static int32_t tf_attention(const struct tf *t, int32_t x, const char *p, bool causal)
{
    static const char *const gpt[3] = {"q", "k", "v"}, *const bert[3] = {"query", "key",
                                                                          "value"};
    const char *const *n = causal ? gpt : bert;
    remat_attrs sm = {.causal = causal, .scale = (float)(1.0 / sqrt((double)(t->d / t->h)))};
    int32_t qkv[3], in[2];

    /* The three projections first, then their heads: the order in which PyTorch's
     * fused projection and its split come out of an ONNX export, so that an exported
     * model and the zoo's give every planner the same op order (which decides ties). */
    for (int i = 0; i < 3; i++)
        qkv[i] = tf_linear(t, x, p, n[i], t->d);
    /* q's heads, then k's and v's views, then v's transpose and k's: the order in which
     * the ONNX reader emits PyTorch's q, k and v heads (tests/cli.sh plans both) */
    qkv[0] = tf_heads(t, qkv[0], p, n[0], false);
    for (int i = 1; i < 3; i++)
        qkv[i] = tf_split_view(t, qkv[i], p, n[i]);
    for (int i = 2; i >= 1; i--)
        qkv[i] = tf_split_transpose(t, qkv[i], p, n[i]);
    in[0] = qkv[0];
    in[1] = qkv[1];
    in[0] = zoo_mm(t->g, in, &(remat_attrs){.trans_b = true}, p, "scores");
    in[0] = zoo_op1(t->g, REMAT_OP_SOFTMAX_LAST, in[0], &sm, p, "softmax");
    in[0] = tf_dropout(t, in[0], p, "attn_dropout");
    in[1] = qkv[2];
    in[0] = zoo_mm(t->g, in, NULL, p, "context");
    return tf_heads(t, in[0], p, "context", true);
}

/* GPT-2's block h.i: x + attn(ln_1(x)), then + mlp(ln_2(x)). */
static int32_t gpt_block(const struct tf *t, int32_t x, int64_t i)
{
    char p[ZOO_NAME_MAX], q[ZOO_NAME_MAX + 8];
    remat_attrs tanh_gelu = {.approximate = true};
    int32_t a;

    snprintf(p, sizeof p, "h.%lld", (long long)i);
    snprintf(q, sizeof q, "%s.attn", p);
    a = tf_attention(t, tf_ln(t, x, p, "ln_1"), q, true);
    a = tf_dropout(t, tf_linear(t, a, q, "c_proj", t->d), q, "resid_dropout");
    x = tf_add(t, x, a, p, "residual_1");
    snprintf(q, sizeof q, "%s.mlp", p);
    a = tf_linear(t, tf_ln(t, x, p, "ln_2"), q, "c_fc", 4 * t->d);
    a = zoo_op1(t->g, REMAT_OP_GELU, a, &tanh_gelu, q, "act");
    a = tf_dropout(t, tf_linear(t, a, q, "c_proj", t->d), q, "dropout");
    return tf_add(t, x, a, p, "residual_2");
}

/* BERT's layer encoder.layer.i: post-norm attention and feed-forward. */
static int32_t bert_layer(const struct tf *t, int32_t x, int64_t i)
{
    char p[ZOO_NAME_MAX], q[ZOO_NAME_MAX + 32];
    int32_t a;

    snprintf(p, sizeof p, "encoder.layer.%lld", (long long)i);
    snprintf(q, sizeof q, "%s.attention.self", p);
    a = tf_attention(t, x, q, false);
    snprintf(q, sizeof q, "%s.attention.output", p);
    a = tf_dropout(t, tf_linear(t, a, q, "dense", t->d), q, "dropout");
    x = tf_ln(t, tf_add(t, a, x, q, "residual"), q, "LayerNorm");
    snprintf(q, sizeof q, "%s.intermediate", p);
    a = zoo_op1(t->g, REMAT_OP_GELU, tf_linear(t, x, q, "dense", 4 * t->d), NULL, q,
                "intermediate_act_fn");
    snprintf(q, sizeof q, "%s.output", p);
    a = tf_dropout(t, tf_linear(t, a, q, "dense", t->d), q, "dropout");
    return tf_ln(t, tf_add(t, a, x, q, "residual"), q, "LayerNorm");
}

/* An embedding of ids (b, s) into (b, s, d). */
static int32_t tf_embed(const struct tf *t, int32_t ids, int64_t vocab, const char *name)
{
    remat_attrs at = {.vocab = vocab, .out_channels = t->d};

    return zoo_op1(t->g, REMAT_OP_EMBEDDING, ids, &at, NULL, name);
}

/* The logits (b, s, vocab) of h against the table of the embedding that made emb, and
 * the token cross-entropy against "labels" as the loss. */
static remat_status tf_lm_loss(const struct tf *t, int32_t h, int32_t emb, const char *name)
{
    int64_t bs[2] = {t->b, t->s};
    int32_t in[2] = {h, remat_graph_param(t->g, emb, 0)};

    in[0] = zoo_mm(t->g, in, &(remat_attrs){.trans_b = true}, NULL, name);
    in[1] = remat_graph_tokens(t->g, "labels", 2, bs);
    return remat_graph_set_loss(t->g, zoo_opn(t->g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
}

remat_status zoo_build_transformer(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    const struct zoo_transformer_arch *arch = arg;
    struct tf t = {g, c, c->batch, c->seq_len, c->hidden, c->heads, 1e-5f};
    int64_t bs[2] = {c->batch, c->seq_len};
    int32_t ids, wte, x;

    ids = remat_graph_tokens(g, "input_ids", 2, bs);
    if (arch->bert) {
        t.eps = 1e-12f;
        wte = tf_embed(&t, ids, c->vocab, "embeddings.word_embeddings");
        x = tf_add(&t, wte, tf_embed(&t, remat_graph_positions(g, "position_ids", 2, bs),
                                     arch->positions, "embeddings.position_embeddings"),
                   "embeddings", "add_positions");
        x = tf_add(&t, x, tf_embed(&t, remat_graph_tokens(g, "token_type_ids", 2, bs), 2,
                                   "embeddings.token_type_embeddings"),
                   "embeddings", "add_token_types");
        x = tf_dropout(&t, tf_ln(&t, x, "embeddings", "LayerNorm"), "embeddings", "dropout");
        for (int64_t i = 0; i < c->layers; i++)
            x = bert_layer(&t, x, i);
        x = tf_linear(&t, x, "cls.predictions.transform", "dense", t.d);
        x = zoo_op1(g, REMAT_OP_GELU, x, NULL, "cls.predictions.transform", "transform_act_fn");
        x = tf_ln(&t, x, "cls.predictions.transform", "LayerNorm");
        return tf_lm_loss(&t, x, wte, "cls.predictions.decoder");
    }
    wte = tf_embed(&t, ids, c->vocab, "wte");
    x = tf_add(&t, wte, tf_embed(&t, remat_graph_positions(g, "position_ids", 2, bs),
                                 arch->positions, "wpe"), NULL, "embed");
    x = tf_dropout(&t, x, NULL, "drop");
    for (int64_t i = 0; i < c->layers; i++)
        x = gpt_block(&t, x, i);
    return tf_lm_loss(&t, tf_ln(&t, x, NULL, "ln_f"), wte, "lm_head");
}
