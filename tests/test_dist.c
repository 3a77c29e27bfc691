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
static remat_trainer *make(const remat_graph *g, remat_optimizer opt, int32_t k,
                           const remat_comm *comm, bool shard, remat_tgraph **tg,
                           remat_schedule **s)
{
    remat_tgraph_opts o = {.optimizer = opt, .accumulate = k,
                           .ranks = comm ? comm->size : 1, .shard_optimizer = shard};
    remat_train_opts to = remat_train_opts_default();
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_trainer *t = NULL;

    to.optimizer = opt;
    to.accumulate = k;
    to.comm = comm;
    to.shard_optimizer = shard;
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
    remat_trainer *a = make(g, REMAT_OPTIMIZER_SGD, k, NULL, false, &tga, &sa);
    remat_trainer *b = make(g, REMAT_OPTIMIZER_SGD, 1, NULL, false, &tgb, &sb);
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

/* An in-memory comm for threads: each call publishes its pointers, waits for every
 * rank, copies, and waits again before the pointers may change. */
struct shared {
    pthread_barrier_t bar;
    int32_t size, fail_rank;   /* fail_rank: reported failed by agree (-1: none) */
    const float *send[2];
    float *data[2];
    size_t stride[2];
    remat_status st[2];
};

struct rank {
    struct shared *sh;
    remat_comm comm;
    const remat_graph *g;
    remat_optimizer opt;
    bool shard;
    int steps;
    uint64_t checksum;
    size_t resident, graph_resident;
    remat_status last;
    char msg[256];
};

static remat_status x_exchange(void *ud, const float *send, size_t stride, float *recv,
                               size_t n)
{
    struct rank *r = ud;
    struct shared *sh = r->sh;
    int32_t me = r->comm.rank;

    sh->send[me] = send;
    sh->stride[me] = stride;
    pthread_barrier_wait(&sh->bar);
    for (int32_t i = 0; i < sh->size; i++)
        memcpy(recv + (size_t)i * n, sh->send[i] + (size_t)me * sh->stride[i],
               sizeof(float) * n);
    pthread_barrier_wait(&sh->bar);
    return REMAT_OK;
}

static remat_status x_gather(void *ud, float *data, size_t n)
{
    struct rank *r = ud;
    struct shared *sh = r->sh;
    int32_t me = r->comm.rank;

    sh->data[me] = data;
    pthread_barrier_wait(&sh->bar);
    for (int32_t i = 0; i < sh->size; i++)
        if (i != me)
            memcpy(data + (size_t)i * n, sh->data[i] + (size_t)i * n, sizeof(float) * n);
    pthread_barrier_wait(&sh->bar);
    return REMAT_OK;
}

static remat_status x_agree(void *ud, remat_status st, int32_t *failed,
                            remat_status *failed_st)
{
    struct rank *r = ud;
    struct shared *sh = r->sh;

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
    remat_trainer *t = make(r->g, r->opt, 1, &r->comm, r->shard, &tg, &s);
    remat_train_stats st;
    double loss;

    REMAT_ASSERT_TEST(t); /* a rank that stops here would leave the other waiting */
    r->last = REMAT_OK;
    for (int i = 0; i < r->steps && !r->last; i++)
        r->last = remat_trainer_step(t, NULL, NULL, &loss);
    if (r->last)
        snprintf(r->msg, sizeof r->msg, "%s", remat_errmsg());
    r->checksum = remat_trainer_param_checksum(t);
    remat_trainer_stats(t, &st);
    r->resident = st.resident_bytes;
    r->graph_resident = remat_tgraph_resident_bytes(tg);
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    return NULL;
}

/* Two ranks for `steps` steps; r[] filled. */
static void run_ranks(const remat_graph *g, remat_optimizer opt, bool shard, int steps,
                      int32_t fail_rank, struct rank r[2])
{
    struct shared sh = {.size = 2, .fail_rank = fail_rank};
    pthread_t th[2];

    pthread_barrier_init(&sh.bar, NULL, 2);
    for (int32_t i = 0; i < 2; i++) {
        r[i] = (struct rank){.sh = &sh, .g = g, .opt = opt, .shard = shard, .steps = steps};
        r[i].comm = (remat_comm){.rank = i, .size = 2, .ud = &r[i], .exchange = x_exchange,
                                 .gather = x_gather, .agree = x_agree};
        REMAT_ASSERT_TEST(!pthread_create(&th[i], NULL, rank_main, &r[i]));
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh.bar);
}

static void ranks_on(const char *what, remat_graph *g, remat_optimizer opt)
{
    remat_tgraph *tg;
    remat_schedule *s;
    remat_trainer *one = make(g, opt, 2, NULL, false, &tg, &s);
    struct rank plain[2], shard[2];
    uint64_t want = 0;
    double loss;

    for (int i = 0; one && i < 2 * 3; i++)
        CHECK_OK(remat_trainer_step(one, NULL, NULL, &loss));
    want = one ? remat_trainer_param_checksum(one) : 0;
    run_ranks(g, opt, false, 3, -1, plain);
    run_ranks(g, opt, true, 3, -1, shard);
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

static void test_failure(void)
{
    remat_graph *g = small_graph();
    struct rank r[2];

    run_ranks(g, REMAT_OPTIMIZER_SGD, false, 2, 1, r);
    for (int i = 0; i < 2; i++)
        CHECK(r[i].last != REMAT_OK && strstr(r[i].msg, "rank 1 of 2 failed in step 1"),
              "rank %d: %s (%s)", i, remat_status_name(r[i].last), r[i].msg);
    printf("  rank 0: %s\n", r[0].msg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_accumulate);
    RUN(test_ranks);
    RUN(test_failure);
    return harness_end();
}
