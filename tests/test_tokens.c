/*
 * test_tokens.c - token data (src/io/tokens.c) and the trainer fed from it: a token
 * file written and read back, its bytes against the documented layout; batches against
 * offsets recomputed here from the hash as include/remat.h documents it; text read as
 * bytes; every malformed file refused with a message naming the fault; a tiny language
 * model trained on token data (the ids reach the embedding, the targets the loss, same
 * data same losses, other data other losses); positions filled 0 .. n-1 (a loss worked
 * out here); the CLI's glue (src/cli/train_tokens.c, compiled in).
 */
#include "harness.h"

#include "../src/cli/train_tokens.c"
#include "../src/cli/util.c"

#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *tmp_path(const char *name)
{
    static char path[4][128];
    static int k;

    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");

    REMAT_ASSERT_TEST(f && fwrite(b, 1, n, f) == n && !fclose(f));
}

/* splitmix64 and the start of sequence b, as include/remat.h states them. */
static uint64_t sm64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int64_t oracle_start(uint64_t seed, int64_t step, int64_t b, int64_t count, int64_t S)
{
    uint64_t n = (uint64_t)(count - S), h = sm64(sm64(sm64(seed) ^ (uint64_t)step) ^ (uint64_t)b);
    /* accepted: h below the largest multiple of n that is at most 2^64 */
    uint64_t limit_minus_1 = UINT64_MAX - (UINT64_MAX % n + 1) % n;

    while (h > limit_minus_1)
        h = sm64(h);
    return (int64_t)(h % n);
}

/* The batch of (seed, step) against tok[] and the recomputed starts. */
static void check_batch(const remat_tokens *t, const int32_t *tok, int64_t count, uint64_t seed,
                        int64_t step, int64_t B, int64_t S, const char *what)
{
    int32_t *ids = malloc(sizeof *ids * (size_t)(B * S)), *tg = malloc(sizeof *tg * (size_t)(B * S));
    int bad = 0;

    REMAT_ASSERT_TEST(ids && tg);
    CHECK_OK(remat_tokens_batch(t, seed, step, B, S, ids, tg));
    for (int64_t b = 0; b < B; b++) {
        int64_t off = oracle_start(seed, step, b, count, S);

        for (int64_t s = 0; s < S; s++)
            bad += ids[b * S + s] != tok[off + s] || tg[b * S + s] != tok[off + s + 1];
    }
    CHECK(bad == 0, "%s: seed %llu step %lld: %d entries differ from the recomputed offsets",
          what, (unsigned long long)seed, (long long)step, bad);
    free(ids);
    free(tg);
}

static void test_write_read(void)
{
    static const int64_t vocabs[] = {1000, 100000};
    enum { N = 300 };
    int32_t tok[N];
    uint64_t seed = 20261124;

    printf("  seed %llu\n", (unsigned long long)seed);
    for (int w = 0; w < 2; w++) {
        const char *p = tmp_path(w ? "wide.tok" : "narrow.tok");
        int width = w ? 4 : 2;
        unsigned char raw[32 + 4 * N];
        remat_tokens *t = NULL;
        FILE *f;

        for (int i = 0; i < N; i++)
            tok[i] = (int32_t)(sm64(seed + (uint64_t)i) % (uint64_t)vocabs[w]);
        tok[N - 1] = (int32_t)vocabs[w] - 1; /* the largest id */
        CHECK_OK(remat_tokens_write(p, vocabs[w], tok, N));
        /* the bytes, as docs/formats.md lays them out */
        f = fopen(p, "rb");
        REMAT_ASSERT_TEST(f);
        CHECK(fread(raw, 1, sizeof raw, f) == (size_t)(32 + width * N), "size");
        fclose(f);
        CHECK(!memcmp(raw, "REMATTOK", 8) && raw[8] == 1 && raw[12] == width && raw[16] == N % 256 &&
              raw[17] == N / 256 && raw[24] == (vocabs[w] & 255) && raw[25] == ((vocabs[w] >> 8) & 255),
              "header bytes");
        CHECK(raw[32 + width * 5] == (tok[5] & 255) && raw[33 + width * 5] == ((tok[5] >> 8) & 255),
              "token 5 little-endian");
        CHECK_OK(remat_tokens_open(p, &t));
        if (!t)
            continue;
        CHECK_I64(remat_tokens_count(t), N);
        CHECK_I64(remat_tokens_vocab(t), vocabs[w]);
        for (int64_t step = 0; step < 5; step++)
            check_batch(t, tok, N, seed, step, 4, 10, p);
        check_batch(t, tok, N, 7, 0, 3, N - 1, "the longest sequences"); /* one start */
        remat_tokens_free(t);
    }
}

/* Every start is drawn: over many steps of a short file each one appears. */
static void test_starts(void)
{
    int32_t tok[12];
    int seen[8] = {0}, ids[4], n_seen = 0;
    remat_tokens *t = NULL;

    for (int i = 0; i < 12; i++)
        tok[i] = i;
    CHECK_OK(remat_tokens_write(tmp_path("starts.tok"), 12, tok, 12));
    CHECK_OK(remat_tokens_open(tmp_path("starts.tok"), &t));
    for (int64_t step = 0; t && step < 200; step++) {
        CHECK_OK(remat_tokens_batch(t, 3, step, 1, 4, ids, NULL));
        CHECK(ids[0] >= 0 && ids[0] < 8, "start %d outside 0 .. 7", ids[0]);
        if (ids[0] >= 0 && ids[0] < 8)
            seen[ids[0]]++;
    }
    for (int i = 0; i < 8; i++)
        n_seen += seen[i] > 0;
    CHECK(n_seen == 8, "%d of the 8 starts drawn in 200 steps", n_seen);
    remat_tokens_free(t);
}

static void test_text(void)
{
    static const char text[] = "hello, w\xc3\xb6rld\n";
    int32_t tok[sizeof text - 1];
    remat_tokens *t = NULL;

    for (size_t i = 0; i < sizeof text - 1; i++)
        tok[i] = (unsigned char)text[i];
    write_bytes(tmp_path("hello.txt"), text, sizeof text - 1);
    CHECK_OK(remat_tokens_open(tmp_path("hello.txt"), &t));
    if (!t)
        return;
    CHECK_I64(remat_tokens_count(t), (int64_t)sizeof text - 1);
    CHECK_I64(remat_tokens_vocab(t), 256);
    CHECK(tok[8] == 0xc3 && tok[9] == 0xb6, "fixture");
    for (int64_t step = 0; step < 4; step++)
        check_batch(t, tok, (int64_t)sizeof text - 1, 11, step, 3, 5, "text");
    remat_tokens_free(t);
}

/* A header: version, width, count, vocab, reserved. */
static size_t header(unsigned char *b, uint32_t version, uint32_t width, uint64_t count,
                     uint32_t vocab, uint32_t reserved)
{
    uint32_t f[6] = {version, width, (uint32_t)count, (uint32_t)(count >> 32), vocab, reserved};

    memcpy(b, "REMATTOK", 8);
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 4; k++)
            b[8 + 4 * i + k] = (unsigned char)(f[i] >> (8 * k));
    return 32;
}

static void expect_refused(const char *name, const void *b, size_t n, remat_status want,
                           const char *needle)
{
    const char *p = tmp_path(name);
    remat_tokens *t = NULL;
    remat_status st;

    write_bytes(p, b, n);
    st = remat_tokens_open(p, &t);
    CHECK(st == want && !t, "%s: %s, expected %s", name, remat_status_name(st),
          remat_status_name(want));
    CHECK(strstr(remat_errmsg(), needle) && strstr(remat_errmsg(), p), "%s: message '%s' "
          "lacks '%s' or the path", name, remat_errmsg(), needle);
    remat_tokens_free(t);
}

static void test_malformed(void)
{
    unsigned char b[64];
    size_t h;

    memset(b, 0, sizeof b);
    h = header(b, 1, 2, 4, 10, 0);
    b[h] = 1, b[h + 2] = 2, b[h + 4] = 3, b[h + 6] = 9; /* valid: 40 bytes */
    expect_refused("short_header.tok", b, 20, REMAT_ERR_PARSE, "truncated header");
    expect_refused("truncated.tok", b, 39, REMAT_ERR_PARSE, "within token 3");
    expect_refused("trailing.tok", b, 41, REMAT_ERR_PARSE, "1 bytes from byte 40");
    b[h + 4] = 10; /* token 2 = vocab */
    expect_refused("big_token.tok", b, 40, REMAT_ERR_PARSE,
                   "token 2 (byte offset 36) is 10, not below the vocabulary 10");
    b[h + 4] = 3;
    header(b, 2, 2, 4, 10, 0);
    expect_refused("version.tok", b, 40, REMAT_ERR_PARSE, "version 2 at byte 8");
    header(b, 1, 3, 4, 10, 0);
    expect_refused("width.tok", b, 40, REMAT_ERR_PARSE, "token width 3 at byte 12");
    header(b, 1, 2, 0, 10, 0);
    expect_refused("count.tok", b, 40, REMAT_ERR_PARSE, "token count 0 at byte 16");
    header(b, 1, 2, 4, 70000, 0);
    expect_refused("vocab.tok", b, 40, REMAT_ERR_PARSE, "vocabulary 70000 at byte 24");
    header(b, 1, 2, 4, 10, 5);
    expect_refused("reserved.tok", b, 40, REMAT_ERR_PARSE, "bytes 28 to 31");
    header(b, 1, 4, (uint64_t)1 << 62, 10, 0); /* count * width overflows */
    expect_refused("huge.tok", b, 40, REMAT_ERR_PARSE, "truncated");
    header(b, 1, 4, 2, 10, 0);
    memset(b + h, 0, 8);
    b[h + 7] = 0x80; /* token 1 of int32 width: negative */
    expect_refused("negative.tok", b, 40, REMAT_ERR_PARSE, "token 1 (byte offset 36) is -");
    memcpy(b, "REMATDAT", 8);
    expect_refused("images.dat", b, 40, REMAT_ERR_PARSE, "another remat file's magic");
    expect_refused("empty.txt", b, 0, REMAT_ERR_IO, "empty file");
    {
        remat_tokens *t = NULL;
        int32_t ids[8], bad[2] = {3, 12};

        CHECK(remat_tokens_open(dir, &t) == REMAT_ERR_IO && strstr(remat_errmsg(), "directory"),
              "a directory: %s", remat_errmsg());
        CHECK(remat_tokens_open(tmp_path("missing"), &t) == REMAT_ERR_IO &&
              strstr(remat_errmsg(), "cannot open"), "a missing file: %s", remat_errmsg());
        write_bytes(tmp_path("four.txt"), "abcd", 4);
        CHECK_OK(remat_tokens_open(tmp_path("four.txt"), &t));
        CHECK(t && remat_tokens_batch(t, 1, 0, 2, 4, ids, ids) == REMAT_ERR_ARG &&
              strstr(remat_errmsg(), "4 tokens, too few for a sequence of 4"),
              "too short: %s", remat_errmsg());
        CHECK(t && remat_tokens_batch(t, 1, 0, 2, 3, ids, NULL) == REMAT_OK, "3 of 4 tokens");
        remat_tokens_free(t);
        CHECK(remat_tokens_write(tmp_path("w.tok"), 10, bad, 2) == REMAT_ERR_ARG &&
              strstr(remat_errmsg(), "token 1 is 12"), "writer: %s", remat_errmsg());
    }
}

/* ids (2, 8) -> wte (vocab 11, D 6) -> layer norm -> logits (2, 8, 11) through the tied
 * table -> token_ce against targets "next" (2, 8). */
static remat_graph *tiny_lm(void)
{
    remat_graph *g = NULL;
    int32_t ids, e, n, y, in[2];

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    ids = remat_graph_tokens(g, "ids", 2, (int64_t[]){2, 8});
    e = remat_graph_add(g, REMAT_OP_EMBEDDING, &ids, 1,
                        &(remat_attrs){.vocab = 11, .out_channels = 6}, "wte");
    n = remat_graph_add(g, REMAT_OP_LAYER_NORM, &e, 1, NULL, "ln");
    in[0] = n;
    in[1] = remat_graph_param(g, e, 0);
    y = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true}, "logits");
    in[0] = y;
    in[1] = remat_graph_tokens(g, "next", 2, (int64_t[]){2, 8});
    remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
    REMAT_ASSERT_TEST(remat_graph_status(g) == REMAT_OK);
    return g;
}

struct seen {
    float emb[2 * 8 * 6], logits[2 * 8 * 11];
};

static void keep(void *ud, int32_t op, remat_op type, const float *out, const int32_t *arg,
                 int64_t numel)
{
    struct seen *s = ud;

    if (type == REMAT_OP_EMBEDDING && numel == 96)
        memcpy(s->emb, out, sizeof s->emb);
    if (type == REMAT_OP_MATMUL && numel == 176)
        memcpy(s->logits, out, sizeof s->logits);
}

static remat_trainer *lm_trainer(const remat_graph *g, const remat_tgraph *tg,
                                 remat_schedule **s)
{
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_CHEN_SQRTN, .budget_min = true};
    remat_train_opts to = remat_train_opts_default();
    remat_trainer *t = NULL;

    REMAT_ASSERT_TEST(remat_plan(tg, &po, s, NULL) == REMAT_OK);
    CHECK_OK(remat_trainer_new(g, tg, *s, &to, &t));
    return t;
}

/* The step's loss worked out from the logits the hook saw and the targets fed. */
static double ce_oracle(const float *logits, const int32_t *targets)
{
    double sum = 0;
    int n = 0;

    for (int r = 0; r < 16; r++) {
        double m = logits[r * 11], z = 0;

        if (targets[r] < 0)
            continue;
        for (int v = 1; v < 11; v++)
            m = fmax(m, logits[r * 11 + v]);
        for (int v = 0; v < 11; v++)
            z += exp(logits[r * 11 + v] - m);
        sum += m + log(z) - logits[r * 11 + targets[r]];
        n++;
    }
    return n ? sum / n : 0;
}

/* Three steps on the file's batches: their losses; the first step's fed ids and targets
 * checked against the embedding's rows and the loss worked out here. */
static void run_lm(const remat_graph *g, const remat_tgraph *tg, const remat_tokens *f,
                   uint64_t seed, bool mask, double loss[3])
{
    remat_schedule *s = NULL;
    remat_trainer *t = lm_trainer(g, tg, &s);
    int32_t ids[16], next[16];
    const int32_t *feed[2] = {ids, next};
    struct seen seen;
    float *table, before[66];
    int64_t numel;
    int bad = 0;

    for (int k = 0; t && k < 3; k++) {
        CHECK_OK(remat_tokens_batch(f, seed, k, 2, 8, ids, next));
        if (k == 0) {
            next[3] = mask ? -1 : next[3]; /* ignored */
            CHECK_OK(remat_trainer_param(t, "wte.weight", &table, NULL, &numel));
            CHECK_I64(numel, 66);
            memcpy(before, table, sizeof before);
            remat_trainer_set_forward_hook(t, keep, &seen);
        }
        CHECK_OK(remat_trainer_step_tokens(t, feed, &loss[k]));
        if (k)
            continue;
        remat_trainer_set_forward_hook(t, NULL, NULL);
        for (int i = 0; i < 96; i++)
            bad += seen.emb[i] != before[ids[i / 6] * 6 + i % 6];
        CHECK(bad == 0, "%d embedding outputs are not the fed ids' rows", bad);
        CHECK(fabs(loss[0] - ce_oracle(seen.logits, next)) < 1e-5,
              "loss %.7f, from the logits and fed targets %.7f", loss[0],
              ce_oracle(seen.logits, next));
    }
    remat_trainer_free(t);
    remat_schedule_free(s);
}

static void test_trainer_tokens(void)
{
    remat_graph *g = tiny_lm();
    remat_tgraph *tg = NULL;
    remat_tokens *f = NULL;
    double a[3] = {0}, b[3] = {0}, c[3] = {0}, d = 0;
    int32_t tok[200];

    for (int i = 0; i < 200; i++)
        tok[i] = (int32_t)(sm64((uint64_t)i) % 11);
    CHECK_OK(remat_tokens_write(tmp_path("lm.tok"), 11, tok, 200));
    CHECK_OK(remat_tokens_open(tmp_path("lm.tok"), &f));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!f || !tg)
        goto out;
    run_lm(g, tg, f, 5, true, a);
    run_lm(g, tg, f, 5, true, b);
    run_lm(g, tg, f, 6, true, c); /* other sequences */
    for (int k = 0; k < 3; k++)
        CHECK(a[k] == b[k], "step %d: the same data gave %.9g and %.9g", k, a[k], b[k]);
    CHECK(a[0] != c[0], "other data gave the same loss %.9g", a[0]);
    {
        remat_schedule *s = NULL;
        remat_trainer *t = lm_trainer(g, tg, &s);
        int32_t ids[16] = {0}, next[16] = {0};
        const int32_t *feed[2] = {ids, next};
        remat_train_stats st;

        ids[9] = 11;
        CHECK(t && remat_trainer_step_tokens(t, feed, &d) == REMAT_ERR_ARG &&
              strstr(remat_errmsg(), "'ids'") && strstr(remat_errmsg(), "token id 11 at index 9 "
              "(row 1, column 1)") && strstr(remat_errmsg(), "embedding 'wte'"),
              "an id outside the vocabulary: %s", remat_errmsg());
        ids[9] = -2;
        CHECK(t && remat_trainer_step_tokens(t, feed, &d) == REMAT_ERR_ARG,
              "a negative id was taken");
        ids[9] = 0;
        next[15] = 11;
        CHECK(t && remat_trainer_step_tokens(t, feed, &d) == REMAT_ERR_ARG &&
              strstr(remat_errmsg(), "'next'") && strstr(remat_errmsg(), "target 11 at index 15"),
              "a target outside the logits: %s", remat_errmsg());
        remat_trainer_stats(t, &st);
        CHECK_I64(st.steps, 0); /* refused before the step */
        next[15] = -100;
        CHECK_OK(remat_trainer_step_tokens(t, feed, &d));
        remat_trainer_free(t);
        remat_schedule_free(s);
    }
out:
    remat_tokens_free(f);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* x (2, 5, 5) -> token_ce against positions (2, 5): the loss is the mean over rows r of
 * logsumexp(x[r]) - x[r][r mod 5], worked out here. */
static void test_positions(void)
{
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_trainer *t = NULL, *u = NULL;
    float x[50];
    const float *inputs[1] = {x};
    int32_t bogus[10] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    const int32_t *feed[1] = {bogus};
    double loss = 0, want = 0, l1 = 0, l2 = 0;
    int32_t in[2];

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    in[0] = remat_graph_input(g, "x", 3, (int64_t[]){2, 5, 5});
    in[1] = remat_graph_positions(g, "pos", 2, (int64_t[]){2, 5});
    remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
    CHECK_OK(remat_graph_status(g));
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    if (!tg || remat_plan(tg, &po, &s, NULL) || remat_trainer_new(g, tg, s, NULL, &t) ||
        remat_trainer_new(g, tg, s, NULL, &u)) {
        CHECK(false, "positions graph: %s", remat_errmsg());
        goto out;
    }
    for (int i = 0; i < 50; i++)
        x[i] = (float)((i * 37) % 11) * 0.25f - 1.0f;
    for (int r = 0; r < 10; r++) {
        double z = 0;

        for (int v = 0; v < 5; v++)
            z += exp(x[r * 5 + v]);
        want += (log(z) - x[r * 5 + r % 5]) / 10;
    }
    CHECK_OK(remat_trainer_step(t, inputs, NULL, &loss));
    CHECK(fabs(loss - want) < 1e-5, "loss %.7f against positions, by hand %.7f", loss, want);
    CHECK_OK(remat_trainer_step_tokens(u, feed, &l1)); /* the entry is ignored */
    CHECK_OK(remat_trainer_step(t, NULL, NULL, &l2));
    remat_trainer_free(t);
    t = NULL;
    CHECK_OK(remat_trainer_new(g, tg, s, NULL, &t));
    CHECK(t && !remat_trainer_step(t, NULL, NULL, &l2) && l1 == l2,
          "a positions entry was not ignored: %.9g against %.9g", l1, l2);
out:
    remat_trainer_free(t);
    remat_trainer_free(u);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* A BERT-like graph: what each int32 value is, and its vocabulary. */
static void test_roles(void)
{
    remat_graph *g = NULL;
    remat_token_value v[6];
    int32_t e[3], x[2], sum, in[2], n;
    static const remat_token_role roles[] = {REMAT_TOKEN_IDS, REMAT_TOKEN_IDS,
                                             REMAT_TOKEN_POSITIONS, REMAT_TOKEN_TARGETS,
                                             REMAT_TOKEN_LABELS};
    static const int64_t vocab[] = {50, 2, 6, 50, 2};
    static const char *const names[] = {"input_ids", "token_type_ids", "position_ids",
                                        "labels", "spare"};

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    x[0] = remat_graph_tokens(g, "input_ids", 2, (int64_t[]){2, 6});
    e[0] = remat_graph_add(g, REMAT_OP_EMBEDDING, &x[0], 1,
                           &(remat_attrs){.vocab = 50, .out_channels = 4}, "tok");
    x[1] = remat_graph_tokens(g, "token_type_ids", 2, (int64_t[]){2, 6});
    e[1] = remat_graph_add(g, REMAT_OP_EMBEDDING, &x[1], 1,
                           &(remat_attrs){.vocab = 2, .out_channels = 4}, "type");
    x[0] = remat_graph_positions(g, "position_ids", 2, (int64_t[]){2, 6});
    e[2] = remat_graph_add(g, REMAT_OP_EMBEDDING, &x[0], 1,
                           &(remat_attrs){.vocab = 16, .out_channels = 4}, "pos");
    sum = remat_graph_add(g, REMAT_OP_ADD, e, 3, NULL, "sum");
    in[0] = sum;
    in[1] = remat_graph_param(g, e[0], 0);
    in[0] = remat_graph_add(g, REMAT_OP_MATMUL, in, 2, &(remat_attrs){.trans_b = true}, "logits");
    in[1] = remat_graph_tokens(g, "labels", 2, (int64_t[]){2, 6});
    remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_TOKEN_CE, in, 2, NULL, "loss"));
    remat_graph_labels(g, "spare", 3);
    CHECK_OK(remat_graph_status(g));
    n = remat_graph_token_values(g, v, 6);
    CHECK_I64(n, 5);
    for (int k = 0; k < n && k < 5; k++) {
        CHECK(v[k].role == roles[k] && v[k].vocab == vocab[k] && !strcmp(v[k].name, names[k]),
              "entry %d: %s role %d vocab %lld", k, v[k].name, (int)v[k].role,
              (long long)v[k].vocab);
        CHECK(remat_graph_value_shape(g, v[k].value, (int64_t[4]){0}) == (k < 4 ? 2 : 1),
              "entry %d: value %d", k, (int)v[k].value);
    }
    CHECK(cli_tokens_wanted(g), "the BERT-like graph reads tokens");
    remat_graph_free(g);
    CHECK(!cli_tokens_wanted(NULL), "no graph");
}

/* The CLI's glue: refusals, and the same losses as feeding the trainer directly. */
static void test_cli(void)
{
    remat_graph *g = tiny_lm();
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    remat_tokens *f = NULL;
    struct cli_tokens c;
    double direct[3], loss;
    int32_t tok[5] = {1, 2, 3, 4, 5};

    write_bytes(tmp_path("bytes.txt"), "0123456789abcdef0123", 20);
    CHECK(cli_tokens_open(&c, g, tmp_path("bytes.txt"), 5) == CLI_EXIT_INPUT,
          "text (vocabulary 256) taken for a model of vocabulary 11");
    cli_tokens_fini(&c);
    CHECK_OK(remat_tokens_write(tmp_path("five.tok"), 11, tok, 5));
    CHECK(cli_tokens_open(&c, g, tmp_path("five.tok"), 5) == CLI_EXIT_INPUT,
          "5 tokens taken for sequences of 8");
    cli_tokens_fini(&c);
    CHECK(cli_tokens_open(&c, g, tmp_path("missing.tok"), 5) == CLI_EXIT_INPUT, "a missing file");
    cli_tokens_fini(&c);
    CHECK_OK(remat_tgraph_from_graph(g, NULL, &tg));
    CHECK_OK(remat_tokens_open(tmp_path("lm.tok"), &f));
    if (!tg || !f || cli_tokens_open(&c, g, tmp_path("lm.tok"), 5)) {
        CHECK(false, "the glue refused lm.tok");
        goto out;
    }
    CHECK(c.batch == 2 && c.seq_len == 8 && c.feed[0] == c.ids && c.feed[1] == c.targets,
          "batch %lld x %lld", (long long)c.batch, (long long)c.seq_len);
    run_lm(g, tg, f, 5, false, direct);
    t = lm_trainer(g, tg, &s);
    for (int k = 0; t && k < 3; k++) {
        CHECK_OK(cli_tokens_step(&c, t, k, &loss));
        CHECK(loss == direct[k], "step %d: %.9g through the glue, %.9g directly", k, loss,
              direct[k]);
    }
    cli_tokens_fini(&c);
out:
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tokens_free(f);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/remat_tokens_%d", (int)getpid());
    REMAT_ASSERT_TEST(!mkdir(dir, 0700));
    RUN(test_write_read);
    RUN(test_starts);
    RUN(test_text);
    RUN(test_malformed);
    RUN(test_trainer_tokens);
    RUN(test_positions);
    RUN(test_roles);
    RUN(test_cli);
    {
        char cmd[128];

        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        REMAT_ASSERT_TEST(system(cmd) == 0);
    }
    return harness_end();
}
