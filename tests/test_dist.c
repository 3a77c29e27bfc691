/*
 * test_dist.c - micro-batches and data-parallel training (exec/dist.c,
 * docs/distributed.md):
 *   accumulate   a trainer with accumulate K (2, 3) against the test's own sum: each
 *                micro-batch's gradient from remat_trainer_gradients on a second, plain
 *                trainer, combined here as g = ((g_0 + g_1) + g_2) / K and applied with
 *                the test's own SGD; the parameters bit-equal after every step
 *   ranks        two ranks as two threads over an in-memory comm (a barrier and shared
 *                pointers, no MPI), unsharded and with the optimizer sharded, SGD and
 *                AdamW: every rank's parameters bit-equal to one process with
 *                accumulate 2 on the same synthetic data; resident bytes as the
 *                training graph counts them, the sharded ones smaller by the state's half
 *   failure      a rank reported failed by the comm fails the step on both, naming it
 */
#include "harness.h"
#include "exec/exec.h"
#include "sched/schedule.h"

#include <pthread.h>

#define BATCH 4
#define N_IN 8
#define HID 16
#define N_OUT 5

/* x (4, 8) -> linear fc1 (16) -> relu -> linear fc2 (5) -> softmax_ce: 229 parameters,
 * an odd count (two shards pad one float). */
static remat_graph *small_graph(void)
{
    remat_attrs l1 = {.out_channels = HID, .bias = true}, l2 = {.out_channels = N_OUT, .bias = true};
    remat_graph *g = NULL;
    int32_t x, y, h, r, o;

    REMAT_ASSERT_TEST(remat_graph_new(NULL, &g) == REMAT_OK);
    x = remat_graph_input(g, "x", 2, (int64_t[]){BATCH, N_IN});
    y = remat_graph_labels(g, "y", BATCH);
    h = remat_graph_add(g, REMAT_OP_LINEAR, &x, 1, &l1, "fc1");
    r = remat_graph_add(g, REMAT_OP_RELU, &h, 1, NULL, "relu");
    o = remat_graph_add(g, REMAT_OP_LINEAR, &r, 1, &l2, "fc2");
    REMAT_ASSERT_TEST(remat_graph_set_loss(g, remat_graph_add(g, REMAT_OP_SOFTMAX_CE,
                                                              (int32_t[]){o, y}, 2, NULL,
                                                              "loss")) == REMAT_OK);
    REMAT_ASSERT_TEST(remat_graph_status(g) == REMAT_OK);
    return g;
}

static const char *const pnames[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

/* A trainer of g under `none` with accumulate k, ranks and sharding as given (comm may
 * be NULL); its training graph and schedule into *tg and *s. NULL after a CHECK. */
struct dp {
    bool shard, after;   /* optimizer sharded; the reduction after the backward */
    size_t bucket_bytes; /* 0: the default */
};

static remat_trainer *make(const remat_graph *g, remat_optimizer opt, int32_t k,
                           const remat_comm *comm, struct dp dp, remat_tgraph **tg,
                           remat_schedule **s)
{
    remat_tgraph_opts o = {.optimizer = opt, .accumulate = k,
                           .ranks = comm ? comm->size : 1, .shard_optimizer = dp.shard,
                           .bucket_bytes = dp.bucket_bytes};
    remat_train_opts to = remat_train_opts_default();
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_trainer *t = NULL;

    to.optimizer = opt;
    to.accumulate = k;
    to.comm = comm;
    to.shard_optimizer = dp.shard;
    to.reduce_after = dp.after;
    to.threads = 1;
    if (opt == REMAT_OPTIMIZER_ADAMW) {
        to.lr = 1e-3f;
        to.weight_decay = 1e-2f;
    }
    *tg = NULL;
    *s = NULL;
    CHECK_OK(remat_tgraph_from_graph(g, &o, tg));
    if (*tg)
        CHECK_OK(remat_plan(*tg, &po, s, NULL));
    if (*s)
        CHECK_OK(remat_trainer_new(g, *tg, *s, &to, &t));
    return t;
}

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* ------------------------------------------------------------- accumulate */

static void accumulate_k(int32_t k, uint64_t seed)
{
    remat_graph *g = small_graph();
    remat_tgraph *tga, *tgb;
    remat_schedule *sa, *sb;
    remat_trainer *a = make(g, REMAT_OPTIMIZER_SGD, k, NULL, (struct dp){0}, &tga, &sa);
    remat_trainer *b = make(g, REMAT_OPTIMIZER_SGD, 1, NULL, (struct dp){0}, &tgb, &sb);
    float x[BATCH * N_IN], sum[HID * N_IN], mom[4][HID * N_IN];
    int32_t y[BATCH];
    remat_train_opts d = remat_train_opts_default();
    remat_train_stats sta, stb;
    uint64_t rs = seed;
    double loss;
    bool same = true;

    memset(mom, 0, sizeof mom);
    for (int step = 0; a && b && step < 3; step++) {
        float gk[4][3][HID * N_IN];
        const float *in[1] = {x};

        for (int32_t m = 0; m < k; m++) {
            for (int i = 0; i < BATCH * N_IN; i++)
                x[i] = (float)((int)(rng_next(&rs) % 2001) - 1000) / 500.0f;
            for (int i = 0; i < BATCH; i++)
                y[i] = (int32_t)(rng_next(&rs) % N_OUT);
            CHECK_OK(remat_trainer_step(a, in, y, &loss));
            CHECK_OK(remat_trainer_gradients(b, in, y, &loss));
            for (int p = 0; p < 4; p++) {
                float *grad;
                int64_t n;

                CHECK_OK(remat_trainer_param(b, pnames[p], NULL, &grad, &n));
                memcpy(gk[p][m], grad, sizeof(float) * (size_t)n);
            }
        }
        for (int p = 0; p < 4; p++) { /* the documented order, then SGD, written here */
            float *w, *wa;
            int64_t n;

            CHECK_OK(remat_trainer_param(b, pnames[p], &w, NULL, &n));
            CHECK_OK(remat_trainer_param(a, pnames[p], &wa, NULL, &n));
            for (int64_t i = 0; i < n; i++) {
                float gi;

                sum[i] = gk[p][0][i];
                for (int32_t m = 1; m < k; m++)
                    sum[i] = sum[i] + gk[p][m][i];
                gi = sum[i] / (float)k;
                mom[p][i] = d.momentum * mom[p][i] + (gi + d.weight_decay * w[i]);
                w[i] -= d.lr * mom[p][i];
            }
            if (memcmp(w, wa, sizeof(float) * (size_t)n)) {
                CHECK(false, "accumulate %d, step %d: %s differs from the reference sum",
                      (int)k, step + 1, pnames[p]);
                same = false;
            }
        }
    }
    CHECK(remat_trainer_micro(a) == 3 * k, "accumulate %d: micro-batch %lld after 3 steps",
          (int)k, (long long)remat_trainer_micro(a));
    remat_trainer_stats(a, &sta);
    remat_trainer_stats(b, &stb);
    CHECK(sta.resident_bytes == remat_tgraph_resident_bytes(tga) &&
          sta.resident_bytes == stb.resident_bytes + 4 * 229,
          "accumulate %d: resident %zu (graph %zu), plain %zu: the sum's 229 floats?",
          (int)k, sta.resident_bytes, remat_tgraph_resident_bytes(tga), stb.resident_bytes);
    printf("  accumulate %d: %s (seed %llu)\n", (int)k, same ? "bit-equal" : "differs",
           (unsigned long long)seed);
    remat_trainer_free(a);
    remat_trainer_free(b);
    remat_schedule_free(sa);
    remat_schedule_free(sb);
    remat_tgraph_free(tga);
    remat_tgraph_free(tgb);
    remat_graph_free(g);
}

static void test_accumulate(void)
{
    accumulate_k(2, 7);
    accumulate_k(3, 11);
}

/* ------------------------------------------------------ ranks as threads */

/* An in-memory comm for threads, nonblocking as remat_comm asks: a transfer is a record
 * of every rank's arguments per kind (exchange, gather) and number; a rank's test
 * copies its pieces from the others' buffers once all have started it, and the
 * transfer is done when every rank has copied (so no buffer is reused early). agree
 * waits for every rank (a barrier). Each rank counts the exchanges it started before
 * each agree (pre_agree: the most in one step). */
#define XFERS 4096
struct xfer {
    const float *src[2];
    float *dst[2];
    size_t cnt[2][2], sdis[2][2], rcnt[2][2], rdis[2][2];
    int64_t num;
    int32_t posted, pulled, seen;
    bool did[2];
};

struct shared {
    pthread_barrier_t bar;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t size, fail_rank;   /* fail_rank: reported failed by agree (-1: none) */
    struct xfer x[2][XFERS];   /* [kind: exchange, gather][number % XFERS] */
    remat_status st[2];
};

struct rank {
    struct shared *sh;
    remat_comm comm;
    const remat_graph *g;
    remat_optimizer opt;
    struct dp dp;
    int steps;
    bool bad_labels;           /* its second step is fed a label past the classes */
    uint64_t checksum;
    size_t resident, graph_resident;
    int32_t buckets, started, pre_agree;
    int64_t next[2];           /* per kind: the number of the next transfer */
    int64_t req[512];          /* kind * 2^40 + number per request, -1: free */
    remat_status last;
    char msg[256];
};

static struct xfer *post(struct rank *r, int kind, int32_t *req)
{
    struct shared *sh = r->sh;
    int64_t num = r->next[kind]++;
    struct xfer *x = &sh->x[kind][num % XFERS];
    int32_t q = 0;

    while (q < 512 && r->req[q] >= 0)
        q++;
    REMAT_ASSERT_TEST(q < 512);
    r->req[q] = ((int64_t)kind << 40) + num;
    *req = q;
    pthread_mutex_lock(&sh->mu);
    while (x->posted && x->num != num) /* still in use by transfer num - XFERS */
        pthread_cond_wait(&sh->cv, &sh->mu);
    x->num = num;
    return x; /* locked */
}

static void posted(struct shared *sh, struct xfer *x)
{
    x->posted++;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

static remat_status x_exchange(void *ud, const float *send, const size_t *counts,
                               const size_t *sdispl, float *recv, const size_t *rcounts,
                               const size_t *rdispl, int32_t *req)
{
    struct rank *r = ud;
    int32_t me = r->comm.rank;
    struct xfer *x = post(r, 0, req);

    x->src[me] = send;
    x->dst[me] = recv;
    for (int i = 0; i < 2; i++) {
        x->cnt[me][i] = counts[i];
        x->sdis[me][i] = sdispl[i];
        x->rcnt[me][i] = rcounts[i];
        x->rdis[me][i] = rdispl[i];
    }
    r->started++;
    posted(r->sh, x);
    return REMAT_OK;
}

static remat_status x_gather(void *ud, float *data, const size_t *counts, const size_t *displ,
                             int32_t *req)
{
    struct rank *r = ud;
    int32_t me = r->comm.rank;
    struct xfer *x = post(r, 1, req);

    x->dst[me] = data;
    for (int i = 0; i < 2; i++) {
        x->cnt[me][i] = counts[i];
        x->sdis[me][i] = displ[i];
    }
    posted(r->sh, x);
    return REMAT_OK;
}

/* This rank's pieces of x (kind k) copied from the other's buffers. */
static void pull(struct xfer *x, int k, int32_t me)
{
    int32_t o = 1 - me;

    if (k == 0) {
        REMAT_ASSERT_TEST(x->cnt[o][me] == x->rcnt[me][o]);
        memcpy(x->dst[me] + x->rdis[me][o], x->src[o] + x->sdis[o][me],
               sizeof(float) * x->rcnt[me][o]);
    } else {
        REMAT_ASSERT_TEST(x->cnt[o][o] == x->cnt[me][o] && x->sdis[o][o] == x->sdis[me][o]);
        memcpy(x->dst[me] + x->sdis[me][o], x->dst[o] + x->sdis[o][o],
               sizeof(float) * x->cnt[me][o]);
    }
}

static remat_status x_test(void *ud, int32_t req, bool wait, bool *done)
{
    struct rank *r = ud;
    struct shared *sh = r->sh;
    int32_t me = r->comm.rank;
    int k = (int)(r->req[req] >> 40);
    struct xfer *x = &sh->x[k][(r->req[req] & ((1ll << 40) - 1)) % XFERS];

    pthread_mutex_lock(&sh->mu);
    for (;;) {
        if (x->posted == sh->size && !x->did[me]) {
            pull(x, k, me);
            x->did[me] = true;
            x->pulled++;
            pthread_cond_broadcast(&sh->cv);
        }
        *done = x->pulled == sh->size;
        if (*done || !wait)
            break;
        pthread_cond_wait(&sh->cv, &sh->mu);
    }
    if (*done) {
        r->req[req] = -1;
        if (++x->seen == sh->size) /* free for its next use */
            *x = (struct xfer){0};
        pthread_cond_broadcast(&sh->cv);
    }
    pthread_mutex_unlock(&sh->mu);
    return REMAT_OK;
}

static remat_status x_agree(void *ud, remat_status st, int32_t *failed,
                            remat_status *failed_st)
{
    struct rank *r = ud;
    struct shared *sh = r->sh;

    if (r->started > r->pre_agree)
        r->pre_agree = r->started;
    sh->st[r->comm.rank] = r->comm.rank == sh->fail_rank ? REMAT_ERR_IO : st;
    pthread_barrier_wait(&sh->bar);
    *failed = -1;
    for (int32_t i = sh->size - 1; i >= 0; i--)
        if (sh->st[i]) {
            *failed = i;
            *failed_st = sh->st[i];
        }
    pthread_barrier_wait(&sh->bar);
    return REMAT_OK;
}

static void *rank_main(void *arg)
{
    struct rank *r = arg;
    remat_tgraph *tg;
    remat_schedule *s;
    remat_trainer *t = make(r->g, r->opt, 1, &r->comm, r->dp, &tg, &s);
    remat_train_stats st;
    double loss;

    REMAT_ASSERT_TEST(t); /* a rank that stops here would leave the other waiting */
    r->last = REMAT_OK;
    for (int i = 0; i < r->steps && !r->last; i++) {
        const int32_t bad[BATCH] = {0, 99, 0, 0}, *tok[1] = {bad};

        r->started = 0;
        r->last = r->bad_labels && i == 1 ? remat_trainer_step_tokens(t, tok, &loss)
                                          : remat_trainer_step(t, NULL, NULL, &loss);
    }
    if (r->last)
        snprintf(r->msg, sizeof r->msg, "%s", remat_errmsg());
    r->checksum = remat_trainer_param_checksum(t);
    remat_trainer_stats(t, &st);
    r->resident = st.resident_bytes;
    r->buckets = st.reduce_buckets;
    r->graph_resident = remat_tgraph_resident_bytes(tg);
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    return NULL;
}

/* Two ranks for `steps` steps; r[] filled. Rank bad_rank feeds a bad label. */
static int32_t bad_rank = -1;

static void run_ranks(const remat_graph *g, remat_optimizer opt, struct dp dp, int steps,
                      int32_t fail_rank, struct rank r[2])
{
    static struct shared sh; /* large: not on the stack */
    pthread_t th[2];

    memset(&sh, 0, sizeof sh);
    sh.size = 2;
    sh.fail_rank = fail_rank;
    pthread_barrier_init(&sh.bar, NULL, 2);
    pthread_mutex_init(&sh.mu, NULL);
    pthread_cond_init(&sh.cv, NULL);
    for (int32_t i = 0; i < 2; i++) {
        r[i] = (struct rank){.sh = &sh, .g = g, .opt = opt, .dp = dp, .steps = steps,
                             .bad_labels = i == bad_rank};
        memset(r[i].req, 0xff, sizeof r[i].req);
        r[i].comm = (remat_comm){.rank = i, .size = 2, .ud = &r[i], .exchange = x_exchange,
                                 .gather = x_gather, .test = x_test, .agree = x_agree};
        REMAT_ASSERT_TEST(!pthread_create(&th[i], NULL, rank_main, &r[i]));
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh.bar);
    pthread_mutex_destroy(&sh.mu);
    pthread_cond_destroy(&sh.cv);
}

static void ranks_on(const char *what, remat_graph *g, remat_optimizer opt)
{
    remat_tgraph *tg;
    remat_schedule *s;
    remat_trainer *one = make(g, opt, 2, NULL, (struct dp){0}, &tg, &s);
    struct rank plain[2], shard[2];
    uint64_t want = 0;
    double loss;

    for (int i = 0; one && i < 2 * 3; i++)
        CHECK_OK(remat_trainer_step(one, NULL, NULL, &loss));
    want = one ? remat_trainer_param_checksum(one) : 0;
    run_ranks(g, opt, (struct dp){0}, 3, -1, plain);
    run_ranks(g, opt, (struct dp){.shard = true}, 3, -1, shard);
    for (int i = 0; i < 2; i++) {
        CHECK(plain[i].checksum == want && shard[i].checksum == want, "%s rank %d: %016llx "
              "unsharded, %016llx sharded, one process %016llx", what, i,
              (unsigned long long)plain[i].checksum, (unsigned long long)shard[i].checksum,
              (unsigned long long)want);
        CHECK(plain[i].resident == plain[i].graph_resident &&
              shard[i].resident == shard[i].graph_resident, "%s rank %d: resident %zu, %zu "
              "against the graph's %zu, %zu", what, i, plain[i].resident, shard[i].resident,
              plain[i].graph_resident, shard[i].graph_resident);
    }
    printf("  %s: 2 ranks = accumulate 2 (%016llx); resident per rank %zu, sharded %zu\n",
           what, (unsigned long long)want, plain[0].resident, shard[0].resident);
    CHECK(shard[0].resident < plain[0].resident, "%s: sharding saved nothing", what);
    remat_trainer_free(one);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
}

static void test_ranks(void)
{
    remat_zoo_opts zo = {.batch = 2};
    remat_graph *g = small_graph(), *mlp = NULL;

    ranks_on("small sgd", g, REMAT_OPTIMIZER_SGD);
    ranks_on("small adamw", g, REMAT_OPTIMIZER_ADAMW);
    /* 669,706 parameters: shards of 334,853 floats, two buckets each */
    CHECK_OK(remat_zoo_build("mlp", &zo, NULL, &mlp));
    if (mlp)
        ranks_on("mlp adamw", mlp, REMAT_OPTIMIZER_ADAMW);
    remat_graph_free(mlp);
    remat_graph_free(g);
}

/* ------------------------------------------------------------- buckets */

/* The value named name in g. */
static int32_t value_named(const remat_graph *g, const char *name)
{
    for (size_t v = 0; v < g->values.n; v++)
        if (graph_value(g, (int32_t)v)->name &&
            !strcmp(graph_value(g, (int32_t)v)->name, name))
            return (int32_t)v;
    return -1;
}

/* Buckets equal to the hand-worked list want (lo, hi, ready per bucket). */
static void check_plan(const char *what, const size_t *len, const int64_t *ready,
                       size_t bucket, int32_t nw, const int64_t (*want)[3])
{
    struct dist_bucket b[8];
    int32_t n = dist_bucket_plan(len, ready, 4, 230, bucket, NULL);

    CHECK(n == nw, "%s: %d buckets, not %d", what, (int)n, (int)nw);
    if (n != nw || n > 8)
        return;
    CHECK(dist_bucket_plan(len, ready, 4, 230, bucket, b) == n, "%s: counts differ", what);
    for (int32_t k = 0; k < n; k++)
        CHECK(b[k].lo == (size_t)want[k][0] && b[k].hi == (size_t)want[k][1] &&
              b[k].ready == want[k][2], "%s: bucket %d is [%zu, %zu) ready %lld, not "
              "[%lld, %lld) ready %lld", what, (int)k, b[k].lo, b[k].hi,
              (long long)b[k].ready, (long long)want[k][0], (long long)want[k][1],
              (long long)want[k][2]);
}

/* The small graph by hand: a schedule with fc1 recomputed before its backward (steps
 * 0 F fc1, 1 F relu, 2 F fc2, 3 F loss, 4 B loss, 5 B fc2, 6 B relu, 7 F fc1, 8 B fc1):
 * fc2's parameters are final after step 5, fc1's after 8, whatever reads them later in
 * a forward. The block: fc1.weight [0, 128), fc1.bias [128, 144), fc2.weight [144, 224),
 * fc2.bias [224, 229), padded to 230 for two ranks. */
static void test_buckets(void)
{
    static const remat_step_kind kind[9] = {
        REMAT_STEP_FWD, REMAT_STEP_FWD, REMAT_STEP_FWD, REMAT_STEP_FWD, REMAT_STEP_BWD,
        REMAT_STEP_BWD, REMAT_STEP_BWD, REMAT_STEP_FWD, REMAT_STEP_BWD};
    static const int32_t op[9] = {0, 1, 2, 3, 3, 2, 1, 0, 0};
    static const char *const other[4] = {"x", "y", "fc1", "loss"};
    /* 100 floats: fc2.bias, fc2.weight and the padding (86); fc1.bias alone (16 more
     * would be 102); fc1.weight cut from its end: [28, 128) and the rest [0, 28) */
    static const int64_t b100[4][3] = {{144, 230, 5}, {128, 144, 8}, {28, 128, 8}, {0, 28, 8}};
    /* 64: fc2.weight too long after the 6 floats: [224, 230), then [160, 224) cut from
     * it, its rest [144, 160) joined by fc1.bias (32), fc1.weight in two of 64 */
    static const int64_t b64[5][3] = {{224, 230, 5}, {160, 224, 5}, {128, 160, 8},
                                      {64, 128, 8}, {0, 64, 8}};
    static const int64_t all[1][3] = {{0, 230, 8}};
    static const size_t len[4] = {128, 16, 80, 5};
    static const int64_t pr[4] = {8, 8, 5, 5};
    remat_graph *g = small_graph();
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_tgraph_opts o = {0};
    int64_t ready[16];
    struct dist_bucket one[230];

    CHECK_OK(remat_tgraph_from_graph(g, &o, &tg));
    CHECK_OK(schedule_new(NULL, &s));
    for (int i = 0; s && i < 9; i++)
        CHECK_OK(schedule_push(s, kind[i], op[i]));
    if (tg && s && g->values.n <= 16) {
        dist_param_ready(g, tg, s, ready);
        for (int p = 0; p < 4; p++)
            CHECK(ready[value_named(g, pnames[p])] == (p < 2 ? 8 : 5), "%s final after "
                  "step %lld", pnames[p], (long long)ready[value_named(g, pnames[p])]);
        for (int v = 0; v < 4; v++)
            CHECK(ready[value_named(g, other[v])] == -1, "%s (no parameter) ready %lld",
                  other[v], (long long)ready[value_named(g, other[v])]);
    }
    check_plan("100 floats", len, pr, 100, 4, b100);
    check_plan("64 floats", len, pr, 64, 5, b64);
    check_plan("a bucket past the block", len, pr, 1000, 1, all);
    /* one float each: 230 buckets from the end, the padding's final from the start */
    CHECK(dist_bucket_plan(len, pr, 4, 230, 1, one) == 230 && one[0].lo == 229 &&
          one[0].ready == -1 && one[1].lo == 228 && one[1].ready == 5 && one[229].lo == 0 &&
          one[229].ready == 8, "one float per bucket");
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Two ranks with buckets of a given size, started during the backward or after it: the
 * bits of one process with accumulate 2 (want), the hand-worked bucket count, buckets
 * started before the ranks agree the backward is done only when overlapped, and the
 * receive slots as the training graph counts them. */
static void buckets_on(const char *what, const remat_graph *g, struct dp dp, uint64_t want,
                       int32_t buckets, size_t resident)
{
    struct rank r[2];

    run_ranks(g, REMAT_OPTIMIZER_SGD, dp, 3, -1, r);
    for (int i = 0; i < 2; i++) {
        CHECK(r[i].checksum == want && r[i].last == REMAT_OK, "%s rank %d: %016llx, one "
              "process %016llx (%s)", what, i, (unsigned long long)r[i].checksum,
              (unsigned long long)want, r[i].msg);
        CHECK(r[i].buckets == buckets, "%s rank %d: %d buckets, not %d", what, i,
              (int)r[i].buckets, (int)buckets);
        CHECK(dp.after ? r[i].pre_agree == 0 : r[i].pre_agree >= (buckets > 1 ? 2 : 1),
              "%s rank %d: %d buckets started before the backward ended", what, i,
              (int)r[i].pre_agree);
        CHECK(r[i].resident == r[i].graph_resident && r[i].resident == resident, "%s rank "
              "%d: resident %zu, the graph's %zu, by hand %zu", what, i, r[i].resident,
              r[i].graph_resident, resident);
    }
    printf("  %s: %d buckets, at most %d started during a backward\n", what, (int)buckets,
           (int)r[0].pre_agree);
}

static void test_bucket_ranks(void)
{
    remat_graph *g = small_graph();
    remat_tgraph *tg;
    remat_schedule *s;
    remat_trainer *one = make(g, REMAT_OPTIMIZER_SGD, 2, NULL, (struct dp){0}, &tg, &s);
    uint64_t want;
    double loss;
    struct rank r[2];
    size_t base;

    for (int i = 0; one && i < 2 * 3; i++)
        CHECK_OK(remat_trainer_step(one, NULL, NULL, &loss));
    want = one ? remat_trainer_param_checksum(one) : 0;
    /* the default bucket holds all 230 floats: slots of 2 x 115 floats */
    run_ranks(g, REMAT_OPTIMIZER_SGD, (struct dp){0}, 1, -1, r);
    base = r[0].resident - 4 * 230;
    buckets_on("default", g, (struct dp){0}, want, 1, base + 4 * 230);
    buckets_on("default, after the backward", g, (struct dp){.after = true}, want, 1,
               base + 4 * 230);
    buckets_on("100 floats", g, (struct dp){.bucket_bytes = 400}, want, 4, base + 4 * 200);
    buckets_on("100 floats, after", g, (struct dp){.bucket_bytes = 400, .after = true}, want,
               4, base + 4 * 200);
    buckets_on("one float", g, (struct dp){.bucket_bytes = 4}, want, 230, base + 4 * 2);
    remat_trainer_free(one);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

static void test_failure(void)
{
    remat_graph *g = small_graph();
    struct rank r[2];

    run_ranks(g, REMAT_OPTIMIZER_SGD, (struct dp){0}, 2, 1, r);
    for (int i = 0; i < 2; i++)
        CHECK(r[i].last != REMAT_OK && strstr(r[i].msg, "rank 1 of 2 failed in step 1"),
              "rank %d: %s (%s)", i, remat_status_name(r[i].last), r[i].msg);
    printf("  rank 0: %s\n", r[0].msg);
    /* rank 1's second step refused before its backward, while rank 0 started buckets in
     * its own: rank 1 still starts them after, and both stop (no transfer left waiting) */
    bad_rank = 1;
    run_ranks(g, REMAT_OPTIMIZER_SGD, (struct dp){.bucket_bytes = 400}, 3, -1, r);
    bad_rank = -1;
    CHECK(r[1].last == REMAT_ERR_ARG && strstr(r[1].msg, "99"), "rank 1: %s (%s)",
          remat_status_name(r[1].last), r[1].msg);
    CHECK(r[0].last == REMAT_ERR_ARG && strstr(r[0].msg, "rank 1 of 2 failed in step 2"),
          "rank 0: %s (%s)", remat_status_name(r[0].last), r[0].msg);
    CHECK(r[0].pre_agree >= 2, "rank 0 started %d buckets in its backward",
          (int)r[0].pre_agree);
    printf("  rank 0: %s\n", r[0].msg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_accumulate);
    RUN(test_ranks);
    RUN(test_buckets);
    RUN(test_bucket_ranks);
    RUN(test_failure);
    return harness_end();
}
