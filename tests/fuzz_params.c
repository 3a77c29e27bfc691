/*
 * fuzz_params.c - libFuzzer target: any bytes through the parameter-file reader of
 * `remat train --load` (remat_trainer_load, src/exec/params.c). The trainer is made
 * once: the small residual network of tests/test_fixtures_models.c ("resnet": conv,
 * batch norm with running statistics, max pool, add, linear; 4 x 3 x 8 x 8 input), so
 * tests/data/resnet_*.prm are valid seeds and a well-formed record really loads. Each
 * input is written to one memory file (memfd) and read through /proc/self/fd. A
 * malformed file must come back as an error; anything ASan, UBSan or libFuzzer's checks
 * catch is a finding. FUZZ_SEED_OUT=FILE: write the trainer's own parameters there (a
 * seed) and exit. Built and run by `make fuzz` (clang).
 */
#include "fuzz_file.h"
#include "remat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static remat_graph *g;
static remat_tgraph *tg;
static remat_schedule *sched;
static remat_trainer *trainer;

static int32_t op1(remat_op type, int32_t x, const remat_attrs *at, const char *name)
{
    return remat_graph_add(g, type, &x, 1, at, name);
}

static int32_t conv(int32_t x, const char *name, bool bias)
{
    remat_attrs at = {.out_channels = 8, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .bias = bias};

    return op1(REMAT_OP_CONV2D, x, &at, name);
}

/* tests/test_fixtures_models.c's build_resnet, layer for layer (the same names). */
static int32_t build(void)
{
    int32_t x = remat_graph_input(g, "x", 4, (const int64_t[]){4, 3, 8, 8});
    int32_t y = remat_graph_labels(g, "labels", 4), h, p, r;

    h = op1(REMAT_OP_BATCH_NORM, conv(x, "conv1", false), NULL, "bn1");
    h = op1(REMAT_OP_RELU, h, NULL, "relu1");
    p = op1(REMAT_OP_MAX_POOL, h, &(remat_attrs){.kh = 2, .kw = 2}, "pool1");
    r = op1(REMAT_OP_BATCH_NORM, conv(p, "conv2", true), NULL, "bn2");
    h = remat_graph_add(g, REMAT_OP_ADD, (const int32_t[]){r, p}, 2, NULL, "add");
    h = op1(REMAT_OP_RELU, h, NULL, "relu2");
    h = op1(REMAT_OP_GLOBAL_AVG_POOL, h, NULL, "gap");
    h = op1(REMAT_OP_FLATTEN, h, NULL, "flat");
    h = op1(REMAT_OP_LINEAR, h, &(remat_attrs){.out_channels = 5, .bias = true}, "fc");
    return remat_graph_add(g, REMAT_OP_SOFTMAX_CE, (const int32_t[]){h, y}, 2, NULL, "loss");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    remat_train_opts to = remat_train_opts_default();
    const char *seed = getenv("FUZZ_SEED_OUT");

    (void)argc;
    (void)argv;
    if (remat_graph_new(NULL, &g) || remat_graph_set_loss(g, build()) ||
        remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_plan(tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_NONE}, &sched, NULL) ||
        remat_trainer_new(g, tg, sched, &to, &trainer)) {
        fprintf(stderr, "fuzz_params: %s\n", remat_errmsg());
        abort();
    }
    if (seed) {
        if (remat_trainer_save(trainer, seed)) {
            fprintf(stderr, "fuzz_params: %s\n", remat_errmsg());
            exit(1);
        }
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    (void)remat_trainer_load(trainer, as_file(data, n));
    return 0;
}
