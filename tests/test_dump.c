/*
 * test_dump.c - the graph-dump reader and the `none` baseline on it: a hand-worked tiny
 * dump, malformed files, and the seven graphs of Kusumoto et al. (skipped when
 * ../shared/graphs is absent) against the authors' figures and an independent oracle
 * (tools/dump_oracle.py).
 */
#include "harness.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

/* tiny with the first occurrence of `from` replaced by `to`, in buf. */
static const char *mutate(char *buf, const char *from, const char *to)
{
    extern const char tiny[];
    const char *at = strstr(tiny, from);

    REMAT_ASSERT_TEST(at != NULL);
    snprintf(buf, 2048, "%.*s%s%s", (int)(at - tiny), tiny, to, at + strlen(from));
    return buf;
}

static const char *write_tmp(const char *name, const char *text, size_t n)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    f = fopen(path, "wb");
    if (!f)
        return NULL;
    fwrite(text, 1, n, f);
    fclose(f);
    return path;
}

/* input 0 (100 B), param W (40 B); v2 = conv(0, W) 200 B; v3 = relu(v2) 200 B;
 * v4 = loss(v3) 4 B. */
const char tiny[] =
    "5 6\n0 100 0\n1 40 /W\n2 200 _\n3 200 _\n4 4 _\n"
    "forward\n2 1\n0 _\n1 _\n2\nConvolution2DFunction\n{}\n"
    "forward\n1 1\n2 _\n3\nReLU\n{}\n"
    "forward\n1 1\n3 _\n4\nSoftmaxCrossEntropy\n{}\n"
    "backward\n3 1\n2 gradient\n0 input\n1 input\n1\nConvolution2DFunction\n{}\n"
    "backward\n2 1\n3 gradient\n3 output\n2\nReLU\n{}\n"
    "backward\n2 1\n4 gradient\n3 input\n3\nSoftmaxCrossEntropy\n{}\n";

/* tiny with the first two forward records swapped (relu before the conv it reads), and
 * their backward records with them */
static const char tiny_reordered[] =
    "5 6\n0 100 0\n1 40 /W\n2 200 _\n3 200 _\n4 4 _\n"
    "forward\n1 1\n2 _\n3\nReLU\n{}\n"
    "forward\n2 1\n0 _\n1 _\n2\nConvolution2DFunction\n{}\n"
    "forward\n1 1\n3 _\n4\nSoftmaxCrossEntropy\n{}\n"
    "backward\n2 1\n3 gradient\n3 output\n2\nReLU\n{}\n"
    "backward\n3 1\n2 gradient\n0 input\n1 input\n1\nConvolution2DFunction\n{}\n"
    "backward\n2 1\n4 gradient\n3 input\n3\nSoftmaxCrossEntropy\n{}\n";

static void test_tiny_dump(void)
{
    const char *p = write_tmp("tiny.txt", tiny, sizeof tiny - 1);
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;

    CHECK_OK(remat_tgraph_read_dump(p, NULL, NULL, &tg));
    if (!tg)
        return;
    CHECK_I64(remat_tgraph_n_planned(tg), 3);
    CHECK_I64(remat_tgraph_n_params(tg), 10); /* 40 bytes of float32 */
    CHECK_OK(remat_plan_none(tg, &s));
    CHECK_OK(remat_sim_run(tg, s, &r));
    /* Steps: F conv +200 (200); F relu +200 (400), v2 freed; F loss +4 (204), v4 freed;
     * B loss +grad(v3) 200 (400); B relu +grad(v2) 200 (600), v3 and grad(v3) freed;
     * B conv writes only the parameter's gradient (200), grad(v2) freed. */
    CHECK_I64(r.activation_peak_bytes, 600);
    CHECK_I64(r.naive_bytes, 2 * (200 + 200 + 4));
    CHECK_I64(r.naive_all_bytes, 2 * (100 + 40 + 200 + 200 + 4));
    /* B relu holds v3, grad(v3) and grad(v2). */
    CHECK_I64(r.lower_bound_bytes, 600);
    CHECK_I64(r.resident_bytes, 3 * 40 + 100);
    CHECK_I64(remat_schedule_n_steps(s), 6 + 5); /* every buffer freed once */
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    /* the same records with relu's forward first: not a topological order, kept as the
     * file gives it; every strategy plans it at its least budget, none below the largest
     * single step */
    p = write_tmp("tiny_order.txt", tiny_reordered, sizeof tiny_reordered - 1);
    tg = NULL;
    CHECK_OK(remat_tgraph_read_dump(p, NULL, NULL, &tg));
    if (!tg)
        return;
    for (int k = 0; k < REMAT_STRATEGY_COUNT; k++) {
        remat_plan_opts po = {.strategy = (remat_strategy)k, .budget_min = true};

        s = NULL;
        if (k == REMAT_STRATEGY_BLOCKS || k == REMAT_STRATEGY_SELECTIVE) {
            /* the rules need numbered blocks and attention, which this graph lacks */
            CHECK(remat_plan(tg, &po, &s, NULL) == REMAT_ERR_UNSUPPORTED && !s,
                  "%s on a dump without blocks or attention", remat_strategy_name(k));
            continue;
        }
        CHECK(remat_plan(tg, &po, &s, NULL) == REMAT_OK && remat_sim_run(tg, s, &r) == REMAT_OK,
              "%s on a dump: %s", remat_strategy_name((remat_strategy)k), remat_errmsg());
        if (s)
            CHECK(r.activation_peak_bytes >= 600, "%s: peak %zu below the largest step",
                  remat_strategy_name((remat_strategy)k), r.activation_peak_bytes);
        remat_schedule_free(s);
    }
    remat_tgraph_free(tg);
}

static void expect_parse_error(const char *name, const char *text, const char *line_tag)
{
    const char *p = write_tmp(name, text, strlen(text));
    remat_tgraph *tg = (remat_tgraph *)&tg; /* must be reset to NULL */
    remat_status s = remat_tgraph_read_dump(p, NULL, NULL, &tg);

    CHECK(s == REMAT_ERR_PARSE, "%s: status %s (%s)", name, remat_status_name(s),
          remat_errmsg());
    CHECK(tg == NULL, "%s: output not cleared", name);
    CHECK(strstr(remat_errmsg(), line_tag) != NULL, "%s: message '%s' lacks '%s'", name,
          remat_errmsg(), line_tag);
}

static void test_malformed(void)
{
    char buf[2048];
    remat_tgraph *tg = NULL;
    remat_tgraph_opts flops = {.cost = REMAT_COST_FLOPS};
    const char *p;

    expect_parse_error("empty.txt", "", "empty.txt:1:");
    expect_parse_error("odd.txt", "1 3\n0 4 _\n", "odd.txt:1:");
    expect_parse_error("vars.txt", "5 6\n0 100 0\n1 40 /W\n", "vars.txt:4:");
    expect_parse_error("badid.txt", "2 0\n0 4 _\n7 4 _\n", "badid.txt:3:");
    expect_parse_error("dupid.txt", "2 0\n0 4 _\n0 4 _\n", "dupid.txt:3:");
    expect_parse_error("nobytes.txt", "1 0\n0 x _\n", "nobytes.txt:2:");
    /* Mutations of the tiny dump, each at a known line (the dump's lines: 7 first
     * forward record, 14 the ReLU's, 17 its output, 28 the first backward entry, 34 the
     * ReLU's backward record, 47 the last line). */
    expect_parse_error("kind.txt", mutate(buf, "forward", "forwad"), "kind.txt:7:");
    expect_parse_error("gradkind.txt", mutate(buf, "2 gradient", "2 gradiant"),
                       "gradkind.txt:28:");
    expect_parse_error("counts.txt", mutate(buf, "2 1\n0 _", "99 1\n0 _"), "counts.txt:8:");
    expect_parse_error("outid.txt", mutate(buf, "3\nReLU", "8\nReLU"), "outid.txt:17:");
    expect_parse_error("type.txt", mutate(buf, "ReLU\n{}\nbackward", "ReLV\n{}\nbackward"),
                       "type.txt:34:");
    expect_parse_error("twice.txt", mutate(buf, "\n3\nReLU", "\n2\nReLU"), "twice.txt:14:");
    expect_parse_error("order.txt", mutate(buf, "forward\n1 1\n3 _", "backward\n1 1\n3 gradient"),
                       "order.txt:20:");
    snprintf(buf, sizeof buf, "%sjunk\n", tiny);
    expect_parse_error("after.txt", buf, "after.txt:48:");
    snprintf(buf, sizeof buf, "%s", tiny);
    buf[3] = '\0';
    p = write_tmp("nul.txt", buf, sizeof tiny - 1);
    CHECK(remat_tgraph_read_dump(p, NULL, NULL, &tg) == REMAT_ERR_PARSE, "NUL bytes: %s",
          remat_errmsg());
    CHECK(remat_tgraph_read_dump("/nonexistent/cg.txt", NULL, NULL, &tg) == REMAT_ERR_IO,
          "missing file: %s", remat_errmsg());
    p = write_tmp("tiny.txt", tiny, sizeof tiny - 1);
    CHECK(remat_tgraph_read_dump(p, &flops, NULL, &tg) == REMAT_ERR_ARG,
          "FLOPs on a dump: %s", remat_errmsg());
    CHECK(tg == NULL, "no graph on failure");
}

/* The authors' graphs. naive_all: the authors' solver's "naive" column; the other
 * columns come from tools/dump_oracle.py, and for ResNet-50 also from the issue text. */
static const struct {
    const char *file;
    int n_values;
    size_t naive, naive_all, none_peak;
} graphs[] = {
    {"cg_resnet50.txt", 176, 9211209736u, 9454201928u, 3478451200u},
    {"cg_resnet152.txt", 516, 19949676552u, 20469754952u, 7527855104u},
    {"cg_vgg19.txt", 46, 8009017352u, 9196890696u, 3027235840u},
    {"cg_densenet.txt", 568, 23323592712u, 23591576136u, 8093078528u},
    {"cg_googlenet.txt", 134, 2546505768u, 2692067944u, 1101198352u},
    {"cg_unet.txt", 60, 23563208712u, 23842586136u, 8603344896u},
    {"cg_pspnet.txt", 385, 14686886000u, 15267189152u, 5650073652u},
};

static void test_authors_graphs(void)
{
    const char *dir = harness_graphs_dir();

    if (!dir) {
        SKIP("../shared/graphs/kusumoto is absent");
        return;
    }
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) {
        char path[512];
        remat_tgraph *tg = NULL;
        remat_schedule *s = NULL;
        remat_sim_result r;

        snprintf(path, sizeof path, "%s/%s", dir, graphs[i].file);
        CHECK_OK(remat_tgraph_read_dump(path, NULL, NULL, &tg));
        if (!tg)
            continue;
        CHECK_I64(remat_tgraph_n_planned(tg), graphs[i].n_values);
        CHECK(remat_tgraph_is_file_order(tg), "%s keeps the file order", graphs[i].file);
        CHECK_OK(remat_plan_none(tg, &s));
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK_I64(r.naive_bytes, graphs[i].naive);
        CHECK_I64(r.naive_all_bytes, graphs[i].naive_all);
        CHECK_I64(r.activation_peak_bytes, graphs[i].none_peak);
        CHECK(r.lower_bound_bytes > 0 && r.lower_bound_bytes <= r.activation_peak_bytes,
              "%s: lower bound %zu within the peak", graphs[i].file, r.lower_bound_bytes);
        remat_schedule_free(s);
        remat_tgraph_free(tg);
    }
}

int main(void)
{
    char cmd[300];

    snprintf(tmpdir, sizeof tmpdir, "/tmp/remat_test_dump_%d", (int)getpid());
    if (mkdir(tmpdir, 0700) && errno != EEXIST) {
        printf("cannot create %s\n", tmpdir);
        return 1;
    }
    RUN(test_tiny_dump);
    RUN(test_malformed);
    RUN(test_authors_graphs);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", tmpdir);
    return harness_end();
}
