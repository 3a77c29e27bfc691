/*
 * cmd_train.c - `remat train MODEL`: plan the step, then train K steps inside the
 * planned arena and report planned against measured memory, the operating system's
 * included (the process's resident-set growth over the trainer's life).
 *
 * One struct train_cmd holds the command's state; each phase (options, model, plan and
 * trainer, data, steps, report) is its own function over it, and cmd_train runs them in
 * order with one cleanup.
 */
#include "cli/cli.h"
#include "cli/progress.h"
#include "dist/dist.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat train MODEL|FILE.onnx [options]\n\n"
            "Plans one training step, then runs K steps of SGD or AdamW inside the planned\n"
            "arena and reports the planned and measured peaks, and how much the process's\n"
            "resident set grew (the operating system's count, Linux). MODEL is a zoo name\n"
            "(`remat zoo`); an ONNX file (opsets 11-17, its output the logits) starts from\n"
            "its weights, with a softmax cross-entropy loss added (docs/onnx.md).\n"
            "Inputs and labels are synthetic, drawn from the seed, unless --data is given.\n"
            "REMAT_DEBUG=1 checks every allocation for overlaps with live buffers.\n\n"
            "  --batch N            batch size (default 1)\n"
            "  --steps K            training steps (default 3)\n"
            "  --strategy S         planning strategy (default none; see `remat plan --help`)\n"
            "  --budget B|min       total memory budget (bytes with a unit, or min); on ref\n"
            "                       and cpu without --host-file the host tier counts in it\n"
            "  --time-limit S       seconds for `optimal`, per planning attempt (default 60)\n"
            "  --backend ref|cpu|cuda  kernels: plain C loops, oneDNN, or cuDNN and cuBLAS on\n"
            "                       an NVIDIA GPU (make CUDA=1; default ref)\n"
            "  --threads T          CPU threads (default: all cores)\n"
            "  --host-file FILE     keep the host tier (offloaded values) in this file, mapped\n"
            "                       (default: in memory)\n"
            "  --input-size HxW     input height and width (default: the model's)\n"
            "  --classes K, --no-aux, --base-channels C, --cost flops|kusumoto   as for\n"
            "                       `remat plan`\n"
            "  --loss softmax-ce    the loss: softmax cross-entropy of the logits against\n"
            "                       the labels (the default and only loss)\n"
            "  --seed S             parameters, data and dropout (default 1)\n"
            "  --optimizer sgd|adamw  the update: torch.optim.SGD with momentum, or\n"
            "                       torch.optim.AdamW (default sgd); its state is resident\n"
            "  --lr X --weight-decay X  learning rate and weight decay (defaults: SGD 0.01,\n"
            "                       1e-4; AdamW 1e-3, 1e-2, as PyTorch's)\n"
            "  --momentum X         SGD's momentum (default 0.9)\n"
            "  --beta1 X --beta2 X --eps X   AdamW's moment decay rates, in (0, 1), and the\n"
            "                       denominator's term, > 0 (defaults 0.9, 0.999, 1e-8)\n"
            "  --data FILE          images and labels (format: docs/formats.md), used in order;\n"
            "                       for a language model, token data or text read as bytes\n"
            "  --load FILE          start from saved parameters\n"
            "  --save FILE          save the parameters after training\n"
            "  --json               print the results as one JSON object\n"
            "  --accumulate K       K micro-batches of --batch per step, their gradients\n"
            "                       averaged (default 1; docs/distributed.md)\n"
            "  --shard-optimizer    under mpirun: each rank keeps 1/N of the optimizer state\n"
            "  --bucket B           under mpirun: gradient bytes reduced as one bucket, each\n"
            "                       started during the backward once final (default 25MiB)\n"
            "  --reduce-after       under mpirun: reduce after the backward instead\n"
            "Under mpirun -np N each rank trains micro-batch r of every step in its own\n"
            "planned arena; N ranks give the parameters of one process with --accumulate N.\n"
            "Planning:\n"
            "  --reproducible      each convolution's algorithm fixed whatever the budget,\n"
            "                      so that any two plans of a model train to the same bits\n"
            CLI_OFFLOAD_HELP);
}

/* The command's state: its options, then what it makes (freed by train_fini). */
struct train_cmd {
    struct cli_model m;
    remat_plan_opts po;
    remat_train_opts to;
    const char *strategy, *load, *save, *data_path;
    unsigned optim_given;      /* the optimizer options given: bits of enum optim_opt */
    int64_t steps, accumulate;
    bool as_json, shard, step_failed; /* step_failed: the ranks agreed already */
    struct cli_dist dist;      /* the ranks under mpirun (rank 0 of 1 alone) */
    remat_backend *be;         /* made once: its kernels' table, then the trainer */
    remat_algos *al;
    remat_schedule *s;
    remat_plan_info pi;
    remat_trainer *t;
    remat_data *data;
    float *xb;                 /* one batch of --data: (N, C, H, W) */
    int32_t *yb;               /* its labels: (N) */
    struct cli_tokens tok;     /* --data for a language model (train_tokens.c) */
    double *loss, *secs;       /* per step */
};

/* What the report prints, gathered once after the steps. */
struct train_report {
    remat_train_stats ts;
    remat_sim_result sr;
    struct cli_kernels kn;
    double median_secs;
    size_t os_growth;          /* the resident set's peak minus its size before */
    size_t os_expected;        /* what the plan allocates in host memory */
    const char *os_parts;      /* the parts os_expected adds up */
    uint64_t *rank_figs;       /* per rank: checksums, then planned, then measured peaks */
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static bool parse_f(const char *opt, const char *s, float *out)
{
    char *e;
    double v = strtod(s, &e);

    if (e == s || *e || !(v >= 0) || v > 1e6) {
        cli_error(NULL, "%s: '%s' is not a non-negative number", opt, s);
        return false;
    }
    *out = (float)v;
    return true;
}

/* The optimizer's options, as bits of train_cmd.optim_given; AdamW's defaults
 * (PyTorch's; SGD's are remat_train_opts_default's). */
enum optim_opt { OPT_LR, OPT_MOMENTUM, OPT_WD, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_COUNT };

static const char *const optim_names[OPT_COUNT] = {"--lr", "--momentum", "--weight-decay",
                                                   "--beta1", "--beta2", "--eps"};
static const float adamw_defaults[OPT_COUNT] = {1e-3f, 0, 1e-2f, 0.9f, 0.999f, 1e-8f};

static float *optim_field(remat_train_opts *to, int k)
{
    float *const f[OPT_COUNT] = {&to->lr, &to->momentum, &to->weight_decay, &to->beta1,
                                 &to->beta2, &to->eps};

    return f[k];
}

/* --seed and the optimizer's options into c->to (noting which were given): 1 when
 * argv[*i] was one of them, 0 when not, -1 on a bad value (printed). */
static int optim_option(struct train_cmd *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    int64_t x;

    for (int k = 0; k < OPT_COUNT; k++) {
        if (strcmp(a, optim_names[k]))
            continue;
        if (!(v = cli_value(argc, argv, i)) || !parse_f(a, v, optim_field(&c->to, k)))
            return -1;
        c->optim_given |= 1u << k;
        return 1;
    }
    if (strcmp(a, "--seed"))
        return 0;
    if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 0, INT64_MAX, &x))
        return -1;
    c->to.seed = (uint64_t)x;
    return 1;
}

/* The training graph's optimizer (--optimizer, parsed with the model's options) for the
 * trainer, AdamW's defaults for what was not given, and a refusal of the other
 * optimizer's options and of betas outside (0, 1) or eps not above 0. False after
 * printing an error. */
static bool apply_optimizer(struct train_cmd *c)
{
    remat_train_opts *to = &c->to;
    bool adamw = c->m.topts.optimizer == REMAT_OPTIMIZER_ADAMW;
    unsigned other = adamw ? 1u << OPT_MOMENTUM
                           : (1u << OPT_BETA1) | (1u << OPT_BETA2) | (1u << OPT_EPS);

    to->optimizer = c->m.topts.optimizer;
    for (int k = 0; k < OPT_COUNT; k++)
        if (c->optim_given & other & (1u << k))
            return cli_error(adamw ? "AdamW's momentum is its first moment's rate, --beta1"
                                   : "give --optimizer adamw to train with AdamW",
                             "train: %s is %s's option, not %s's", optim_names[k],
                             adamw ? "SGD" : "AdamW", adamw ? "AdamW" : "SGD"), false;
    if (!adamw)
        return true;
    for (int k = 0; k < OPT_COUNT; k++)
        if (k != OPT_MOMENTUM && !(c->optim_given & (1u << k)))
            *optim_field(to, k) = adamw_defaults[k];
    if (!(to->beta1 > 0 && to->beta1 < 1 && to->beta2 > 0 && to->beta2 < 1 && to->eps > 0))
        return cli_error(NULL, "train: --beta1 and --beta2 are in (0, 1) and --eps is above "
                         "0 (given %g, %g, %g)", (double)to->beta1, (double)to->beta2,
                         (double)to->eps), false;
    return true;
}

/* An option that names a file or a strategy: 1 when argv[*i] was one, 0 when not, -1
 * when its value is missing (printed). */
static int name_option(struct train_cmd *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char **dst = !strcmp(a, "--strategy")    ? &c->strategy
                       : !strcmp(a, "--host-file") ? &c->to.host_file
                       : !strcmp(a, "--data")      ? &c->data_path
                       : !strcmp(a, "--load")      ? &c->load
                       : !strcmp(a, "--save")      ? &c->save
                                                   : NULL;

    if (!dst)
        return 0;
    return (*dst = cli_value(argc, argv, i)) ? 1 : -1;
}

/* One option at argv[*i] (advancing *i past its value): 1 taken, -1 bad (printed). */
static int parse_one(struct train_cmd *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    int64_t secs;
    int k;

    if (!strcmp(a, "--json")) {
        c->as_json = true;
    } else if (!strcmp(a, "--reproducible")) {
        c->po.reproducible = true;
    } else if (!strcmp(a, "--loss")) {
        if (!(v = cli_value(argc, argv, i)))
            return -1;
        if (strcmp(v, "softmax-ce"))
            return cli_error("the loss is softmax-ce: softmax cross-entropy of the logits "
                             "against labels", "train: unknown loss '%s'", v), -1;
    } else if (!strcmp(a, "--accumulate")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 1 << 20, &c->accumulate))
            return -1;
    } else if (!strcmp(a, "--shard-optimizer")) {
        c->shard = true;
    } else if (!strcmp(a, "--reduce-after")) {
        c->to.reduce_after = true;
    } else if (!strcmp(a, "--bucket")) {
        if (!(v = cli_value(argc, argv, i)) || !dist_parse_bucket(a, v, &c->m.topts))
            return -1;
    } else if (!strcmp(a, "--steps")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 1000000, &c->steps))
            return -1;
    } else if (!strcmp(a, "--budget")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_budget(a, v, &c->po))
            return -1;
    } else if (!strcmp(a, "--time-limit")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 86400, &secs))
            return -1;
        c->po.time_limit = (double)secs;
    } else if ((k = cli_backend_option(&c->to, argc, argv, i)) != 0 ||
               (k = cli_offload_option(&c->po, argc, argv, i)) != 0 ||
               (k = optim_option(c, argc, argv, i)) != 0 ||
               (k = name_option(c, argc, argv, i)) != 0 ||
               (k = cli_model_option(&c->m, argc, argv, i)) != 0) {
        return k;
    } else if (cli_model_arg("train", a, &c->m.spec)) {
        return -1;
    }
    return 1;
}

enum parse_result { PARSE_OK, PARSE_HELP, PARSE_FAIL };

/* The command line into c, and the plan options that follow from it. */
static enum parse_result parse_args(struct train_cmd *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return PARSE_HELP;
        }
        if (parse_one(c, argc, argv, &i) < 0)
            return PARSE_FAIL;
    }
    if (!c->m.spec) {
        help(stderr);
        cli_error(NULL, "train: no model given");
        return PARSE_FAIL;
    }
    if (!apply_optimizer(c))
        return PARSE_FAIL;
    c->po.strategy = remat_strategy_from_name(c->strategy);
    if (c->po.strategy == REMAT_STRATEGY_COUNT) {
        cli_error("`remat plan --help` lists the strategies", "train: unknown strategy '%s'",
                  c->strategy);
        return PARSE_FAIL;
    }
    /* On the host, an in-memory host tier takes the same memory as the arena. */
    c->po.host_in_budget = c->to.backend != REMAT_BACKEND_CUDA && !c->to.host_file;
    /* there the arena, resident block and host tier are whole pages of the process's */
    c->po.whole_pages = c->to.backend != REMAT_BACKEND_CUDA;
    return cli_need_budget("train", &c->po) ? PARSE_FAIL : PARSE_OK;
}

/* The backend's kernels and the plan (they choose the kernels and count their scratch),
 * with the progress line while planning. */
static remat_status plan_step(struct train_cmd *c)
{
    remat_plan_opts po;
    struct progress pr;
    char what[128];
    remat_status st;

    if ((st = remat_backend_new(&c->to, &c->be)) ||
        (st = remat_backend_algos(c->be, c->m.g, c->m.tg, &c->al)))
        return st;
    c->po.algos = c->al;
    snprintf(what, sizeof what, "train %s: planning", c->m.spec);
    progress_begin(&pr, what, "", 0);
    progress_wait_begin(&pr, remat_strategy_name(c->po.strategy),
                        c->po.strategy == REMAT_STRATEGY_OPTIMAL
                            ? (c->po.time_limit > 0 ? c->po.time_limit : 60) : 0);
    po = c->po;
    po.progress = progress_stage;
    po.progress_ud = &pr;
    st = remat_plan(c->m.tg, &po, &c->s, &c->pi);
    progress_end(&pr);
    return st;
}

/* Opens --data when given, checks its samples' shape against the model's input and
 * allocates one batch, read once, before the trainer exists. 0, or 1 after printing an
 * error. */
static int open_data(struct train_cmd *c)
{
    const char *spec = c->m.spec;
    int64_t chw[3], shape[4], n = c->m.zoo.batch;
    remat_status st;

    if (!c->data_path)
        return 0;
    if (cli_tokens_wanted(c->m.g))
        return cli_tokens_open(&c->tok, c->m.g, c->data_path, c->to.seed);
    if (remat_graph_n_inputs(c->m.g) != 1)
        return cli_error("train it on synthetic data (no --data)", "%s: --data feeds models "
                         "with one input; this one has %d", spec,
                         remat_graph_n_inputs(c->m.g));
    if ((st = remat_data_open(c->data_path, &c->data)))
        return cli_error_code(cli_exit_code(st), NULL, "%s", remat_errmsg());
    remat_data_sample_shape(c->data, chw);
    remat_graph_value_shape(c->m.g, 0, shape); /* the zoo's input is value 0 */
    if (chw[0] != shape[1] || chw[1] != shape[2] || chw[2] != shape[3])
        return cli_error("give --input-size to match the data", "%s: samples are "
                         "%lldx%lldx%lld but %s takes %lldx%lldx%lld", c->data_path,
                         (long long)chw[0], (long long)chw[1], (long long)chw[2], spec,
                         (long long)shape[1], (long long)shape[2], (long long)shape[3]);
    c->xb = malloc(sizeof *c->xb * (size_t)(n * chw[0] * chw[1] * chw[2]));
    c->yb = malloc(sizeof *c->yb * (size_t)n);
    if (!c->xb || !c->yb)
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
    remat_data_batch(c->data, 0, n, c->xb, c->yb); /* resident before the trainer's mark */
    return 0;
}

/* Loads the model, plans and creates the trainer (from the ONNX file's weights or
 * --load when given). 0, or an exit code after printing an error. */
static int setup_trainer(struct train_cmd *c)
{
    struct cli_model *m = &c->m;
    remat_status st;
    int rc;

    if ((rc = cli_model_load(m)))
        return rc;
    if (m->is_dump)
        return cli_error("train a zoo model", "%s: a graph dump has no shapes or weights to "
                         "train", m->spec);
    if ((rc = cli_time_model(&c->to, &c->po)) || (rc = open_data(c)))
        return rc;
    /* what the steps keep per step, before the trainer's mark */
    c->loss = calloc((size_t)c->steps, sizeof *c->loss);
    c->secs = calloc((size_t)c->steps, sizeof *c->secs);
    if (!c->loss || !c->secs)
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
    if ((st = plan_step(c)) || (st = remat_trainer_on(c->be, m->g, m->tg, c->s, &c->to, &c->t)) ||
        (m->weights && (st = remat_onnx_weights_apply(m->weights, c->t))) ||
        (c->load && (st = remat_trainer_load(c->t, c->load))))
        return cli_error_code(cli_exit_code(st), NULL, "%s: %s", m->spec, remat_errmsg());
    return 0;
}

/* One step: this rank's --accumulate micro-batches, micro-batch m of the run taking
 * samples m * batch onwards of --data (token data: sequences drawn from m); *loss the
 * step's mean over every rank's micro-batches, summed in order. */
static remat_status micro_steps(struct train_cmd *c, double *loss)
{
    int64_t n = c->m.zoo.batch;
    const float *inputs[1] = {c->xb};
    remat_status st = REMAT_OK;
    double sum = 0, l = 0;

    for (int64_t k = 0; k < c->accumulate && !st; k++) {
        int64_t m = remat_trainer_micro(c->t);

        if (c->data)
            remat_data_batch(c->data, m * n, n, c->xb, c->yb);
        st = c->tok.file ? cli_tokens_step(&c->tok, c->t, m, &l)
                         : remat_trainer_step(c->t, c->data ? inputs : NULL, c->yb, &l);
        sum += l;
    }
    if (!st)
        *loss = dist_sum(&c->dist, sum) / (double)(c->accumulate * c->dist.comm.size);
    return st;
}

/* Tokens per sample of a language model (its first token-id value's elements over the
 * batch), 0 for a model of images. */
static double tokens_per_sample(const remat_graph *g, int64_t batch)
{
    remat_token_value tv[16];
    int32_t n = g ? remat_graph_token_values(g, tv, 16) : 0;

    for (int32_t i = 0; i < n && i < 16; i++) {
        int64_t shape[4], numel = 1;
        int nd = remat_graph_value_shape(g, tv[i].value, shape);

        if (tv[i].role != REMAT_TOKEN_IDS)
            continue;
        for (int d = 0; d < nd; d++)
            numel *= shape[d];
        return (double)numel / (double)(batch > 0 ? batch : 1);
    }
    return 0;
}

/* Runs the steps, printing each one's loss and time (on stderr under --json) with the
 * progress line below, and saves the parameters with --save (rank 0 prints and saves).
 * 0, or an exit code after printing an error. */
static int run_steps(struct train_cmd *c)
{
    FILE *f = c->as_json ? stderr : stdout;
    int64_t n = c->m.zoo.batch * c->accumulate * c->dist.comm.size;
    bool quiet = c->dist.comm.rank != 0;
    double per = tokens_per_sample(c->m.g, c->m.zoo.batch);
    struct progress pr;
    char what[128];
    remat_status st;
    int rc = 0;

    snprintf(what, sizeof what, "train %s", c->m.spec);
    progress_begin(&pr, what, "steps", c->steps);
    progress_step(&pr, 0, NULL);
    for (int64_t i = 0; i < c->steps && !rc; i++) {
        double t0 = cli_now();

        st = micro_steps(c, &c->loss[i]);
        progress_clear(&pr);
        if (st) {
            c->step_failed = true;
            rc = cli_error_code(cli_exit_code(st), NULL, "%s: step %lld: %s", c->m.spec,
                                (long long)i + 1, remat_errmsg());
            break;
        }
        c->secs[i] = cli_now() - t0;
        if (!quiet)
            fprintf(f, "step %lld/%lld  loss %.6f  %.3f s  %.1f %s/s\n", (long long)i + 1,
                    (long long)c->steps, c->loss[i], c->secs[i],
                    (double)n * (per > 0 ? per : 1) / c->secs[i], per > 0 ? "tokens" : "images");
        fflush(f);
        progress_step(&pr, i + 1, NULL);
    }
    progress_end(&pr);
    if (!rc && !quiet && c->save && (st = remat_trainer_save(c->t, c->save)))
        rc = cli_error_code(CLI_EXIT_FAILED, NULL, "%s", remat_errmsg());
    return rc;
}

/* What the trainer puts in the process's memory, against which its resident-set growth
 * is read: the arena and the resident bytes, and the host tier when it has one. A host
 * tier mapped from --host-file counts too (the file's pages, once written, are resident
 * while mapped, though the kernel may write them back and drop them). On cuda the arena
 * and the resident bytes are on the device. */
static void os_expected(const struct train_cmd *c, struct train_report *r)
{
    const remat_train_stats *ts = &r->ts;
    size_t host = ts->host_bytes;
    bool file = c->to.host_file != NULL;

    r->os_growth = ts->os_rss_peak_bytes > ts->os_rss_before_bytes
                       ? ts->os_rss_peak_bytes - ts->os_rss_before_bytes
                       : 0;
    if (c->to.backend == REMAT_BACKEND_CUDA) {
        r->os_expected = host;
        r->os_parts = "host tier; the arena and resident bytes are on the device";
        return;
    }
    /* the plan's total: the blocks in whole pages (and a host tier in memory) */
    r->os_expected = c->pi.total_bytes + (c->po.host_in_budget ? 0 : host);
    r->os_parts = !host ? "arena + resident in whole pages"
                  : file ? "arena + resident in whole pages + host tier mapped from its file"
                         : "arena + resident + host tier in whole pages";
}

/* The trainer's figures, the kernels the plan chose and the step times' median. 0, or 1
 * after printing an error. */
static int gather_report(const struct train_cmd *c, struct train_report *r)
{
    double *sorted;

    remat_trainer_stats(c->t, &r->ts);
    cli_kernels_count(c->m.tg, c->s, c->al, &r->kn);
    if (remat_sim_run(c->m.tg, c->s, &r->sr))
        return cli_error_code(CLI_EXIT_CHECK, NULL, "%s", remat_errmsg());
    if (!(sorted = malloc(sizeof *sorted * (size_t)c->steps)))
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
    memcpy(sorted, c->secs, sizeof *sorted * (size_t)c->steps);
    qsort(sorted, (size_t)c->steps, sizeof *sorted, cmp_d);
    r->median_secs = sorted[c->steps / 2];
    free(sorted);
    os_expected(c, r);
    return 0;
}

/* The "os resident" lines: the resident set's growth over the trainer's life (the
 * kernel's counters) against what the plan allocates in host memory, then its two parts
 * from the page tables, the data part against the budget (0: none to compare with). */
static void print_os(const struct train_report *r, size_t budget)
{
    const remat_train_stats *ts = &r->ts;
    char a[32], b[32];
    size_t other;

    if (!ts->os_rss_peak_bytes) {
        printf("os resident      unavailable (no /proc/self/status)\n");
        return;
    }
    printf("os resident      +%s bytes over the steps (%s: %s bytes; ratio %.3f)\n",
           cli_commas(r->os_growth, a, sizeof a), r->os_parts,
           cli_commas(r->os_expected, b, sizeof b),
           r->os_expected ? (double)r->os_growth / (double)r->os_expected : 0);
    if (!ts->os_rss_code_growth_bytes && !ts->os_rss_data_growth_bytes)
        return;
    other = ts->os_rss_data_growth_bytes > ts->os_rss_blocks_bytes
                ? ts->os_rss_data_growth_bytes - ts->os_rss_blocks_bytes : 0;
    printf("                 data +%s bytes", cli_commas(ts->os_rss_data_growth_bytes, a,
                                                         sizeof a));
    if (budget)
        printf(" (%s the budget of %s bytes)", ts->os_rss_data_growth_bytes <= budget
                                                   ? "within" : "OVER",
               cli_commas(budget, b, sizeof b));
    printf(": the blocks +%s, +%s beside them\n", cli_commas(ts->os_rss_blocks_bytes, a,
                                                              sizeof a),
           cli_commas(other, b, sizeof b));
    printf("                 code +%s bytes (the program's, its libraries' and the kernels "
           "compiled on first use, paged in)\n",
           cli_commas(ts->os_rss_code_growth_bytes, a, sizeof a));
    printf("                 before them, the trainer's tables +%s bytes (the compiled "
           "plan: the schedule's maps, the layout, the kernels' descriptors)\n",
           cli_commas(ts->os_rss_tables_bytes, a, sizeof a));
}

static void report_text(const struct train_cmd *c, const struct train_report *r)
{
    const remat_train_stats *ts = &r->ts;
    size_t act = ts->planned_peak_bytes, lb = r->sr.lower_bound_bytes;
    char a[32], b[32];

    printf("planned peak     %s bytes (activations and the kernels' scratch)\n",
           cli_commas(act, a, sizeof a));
    printf("measured peak    %s bytes\n", cli_commas(ts->measured_peak_bytes, a, sizeof a));
    cli_kernels_text(c->al, &r->kn, c->pi.scratch_reserve_bytes);
    printf("arena            %s bytes (%.3fx the activation peak)\n",
           cli_commas(ts->arena_bytes, a, sizeof a),
           act ? (double)ts->arena_bytes / (double)act : 0);
    if (ts->moved_bytes)
        printf("moves            %s bytes moved inside the arena to keep it within the "
               "budget, %.3f s (%lld steps)\n", cli_commas(ts->moved_bytes, a, sizeof a),
               ts->move_seconds, (long long)c->steps);
    printf("resident         %s bytes (%s)\n", cli_commas(ts->resident_bytes, a, sizeof a),
           cli_human((double)ts->resident_bytes, b, sizeof b));
    printf("lower limit      %s bytes (the largest single step); the activation peak "
           "is %.2fx\n", cli_commas(lb, a, sizeof a), lb ? (double)act / (double)lb : 0);
    if (c->pi.n_offloaded)
        printf("host tier        %d values offloaded; planned %s bytes, measured %s; "
               "copies %.3f s, %.3f s waited (%lld steps)\n", c->pi.n_offloaded,
               cli_commas(ts->planned_host_bytes, a, sizeof a),
               cli_commas(ts->measured_host_bytes, b, sizeof b), ts->copy_seconds,
               ts->wait_seconds, (long long)c->steps);
    print_os(r, c->to.backend == REMAT_BACKEND_CUDA ? 0 : c->pi.budget_bytes);
    if (c->dist.comm.size > 1) {
        printf("ranks            %d, each %lld micro-batch%s of %lld per step%s; every "
               "rank's parameters agree\n", (int)c->dist.comm.size, (long long)c->accumulate,
               c->accumulate > 1 ? "es" : "", (long long)c->m.zoo.batch,
               c->shard ? ", optimizer state sharded" : "");
        printf("reduction        %d buckets %s; %.3f s waited after the backward (%lld "
               "steps)\n", (int)ts->reduce_buckets, c->to.reduce_after ? "after the backward"
               : "started during the backward", ts->reduce_wait_seconds, (long long)c->steps);
    }
    else if (c->accumulate > 1)
        printf("micro-batches    %lld of %lld per step, gradients averaged\n",
               (long long)c->accumulate, (long long)c->m.zoo.batch);
    printf("median step      %.3f s\n", r->median_secs);
    printf("param checksum   %016llx\n",
           (unsigned long long)remat_trainer_param_checksum(c->t));
}

static void json_f64_array(struct json *j, const char *key, const double *v, int64_t n)
{
    json_key(j, key);
    json_begin(j, NULL, '[');
    for (int64_t i = 0; i < n; i++)
        json_f64(j, NULL, v[i]);
    json_end(j, ']');
}

/* The ranks (docs/distributed.md): how many, the micro-batches, and per rank the
 * checksum and the planned and measured peaks. */
static void json_ranks(struct json *j, const struct train_cmd *c, const struct train_report *r)
{
    int32_t n = c->dist.comm.size;
    char hex[32];

    json_i64(j, "params", c->m.tg ? remat_tgraph_n_params(c->m.tg) : 0);
    json_i64(j, "ranks", n);
    json_i64(j, "accumulate", c->accumulate);
    json_bool(j, "shard_optimizer", c->shard && n > 1);
    json_i64(j, "reduce_buckets", r->ts.reduce_buckets);
    json_f64(j, "reduce_wait_seconds", r->ts.reduce_wait_seconds);
    json_key(j, "rank_param_checksums");
    json_begin(j, NULL, '[');
    for (int32_t i = 0; i < n; i++) {
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r->rank_figs[i]);
        json_str(j, NULL, hex);
    }
    json_end(j, ']');
    for (int k = 1; k <= 2; k++) {
        json_key(j, k == 1 ? "rank_planned_peak_bytes" : "rank_measured_peak_bytes");
        json_begin(j, NULL, '[');
        for (int32_t i = 0; i < n; i++)
            json_u64(j, NULL, r->rank_figs[k * n + i]);
        json_end(j, ']');
    }
}

static void report_json(const struct train_cmd *c, const struct train_report *r)
{
    const remat_train_stats *ts = &r->ts;
    size_t lb = r->sr.lower_bound_bytes;
    struct json j;
    char hex[32];

    json_begin(&j, stdout, '{');
    json_str(&j, "model", c->m.spec);
    json_i64(&j, "batch", c->m.zoo.batch);
    json_str(&j, "strategy", remat_strategy_name(c->po.strategy));
    json_str(&j, "backend", remat_backend_name(c->to.backend));
    json_str(&j, "optimizer", c->to.optimizer == REMAT_OPTIMIZER_ADAMW ? "adamw" : "sgd");
    json_u64(&j, "planned_peak_bytes", ts->planned_peak_bytes);
    json_u64(&j, "measured_peak_bytes", ts->measured_peak_bytes);
    json_u64(&j, "arena_bytes", ts->arena_bytes);
    cli_kernels_json(&j, c->al, &r->kn);
    json_u64(&j, "activation_peak_bytes", ts->planned_peak_bytes);
    json_u64(&j, "resident_bytes", ts->resident_bytes);
    json_u64(&j, "lower_bound_bytes", lb);
    json_i64(&j, "offloaded_values", c->pi.n_offloaded);
    json_u64(&j, "planned_host_bytes", ts->planned_host_bytes);
    json_u64(&j, "measured_host_bytes", ts->measured_host_bytes);
    json_u64(&j, "transfer_bytes", ts->transfer_bytes);
    json_f64(&j, "copy_seconds", ts->copy_seconds);
    json_f64(&j, "wait_seconds", ts->wait_seconds);
    json_u64(&j, "moved_bytes", ts->moved_bytes);
    json_f64(&j, "move_seconds", ts->move_seconds);
    json_f64(&j, "peak_to_lower_bound", lb ? (double)ts->planned_peak_bytes / (double)lb : 0);
    json_u64(&j, "os_rss_before_bytes", ts->os_rss_before_bytes);
    json_u64(&j, "os_rss_peak_bytes", ts->os_rss_peak_bytes);
    json_u64(&j, "os_rss_growth_bytes", r->os_growth);
    json_u64(&j, "os_rss_code_growth_bytes", ts->os_rss_code_growth_bytes);
    json_u64(&j, "os_rss_data_growth_bytes", ts->os_rss_data_growth_bytes);
    json_u64(&j, "os_rss_tables_bytes", ts->os_rss_tables_bytes);
    json_u64(&j, "os_rss_blocks_bytes", ts->os_rss_blocks_bytes);
    json_f64_array(&j, "loss", c->loss, c->steps);
    json_f64_array(&j, "step_seconds", c->secs, c->steps);
    json_f64(&j, "median_step_seconds", r->median_secs);
    snprintf(hex, sizeof hex, "%016llx",
             (unsigned long long)remat_trainer_param_checksum(c->t));
    json_str(&j, "param_checksum", hex);
    json_ranks(&j, c, r);
    json_end(&j, '}');
}

static void train_fini(struct train_cmd *c)
{
    remat_data_free(c->data);
    cli_tokens_fini(&c->tok);
    free(c->xb);
    free(c->yb);
    free(c->loss);
    free(c->secs);
    remat_trainer_free(c->t);
    remat_schedule_free(c->s);
    remat_algos_free(c->al);
    remat_backend_free(c->be);
    cli_model_fini(&c->m);
}

/* Under mpirun: every rank's rc after a phase, so that a failure on one stops all of
 * them with a line naming it (never one rank waiting for another in a collective). A
 * failed step was agreed by the trainer, whose message names the rank. */
static int agree(struct train_cmd *c, int rc, const char *phase)
{
    int their, r = dist_agree_rc(&c->dist, rc, &their);

    if (r < 0 || c->dist.comm.size < 2 || c->step_failed)
        return rc;
    return cli_error_code(rc ? rc : their, NULL, "rank %d of %d failed %s; every rank stops",
                          r, (int)c->dist.comm.size, phase);
}

/* The ranks' figures (rank_figs: checksum, planned and measured peaks per rank), checked:
 * every rank's parameters must be rank 0's. 0, or 4 after printing the first that
 * differs. */
static int gather_ranks(struct train_cmd *c, struct train_report *r)
{
    int32_t n = c->dist.comm.size;

    r->rank_figs = calloc(3 * (size_t)n, sizeof *r->rank_figs);
    if (!r->rank_figs)
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
    dist_gather_u64(&c->dist, remat_trainer_param_checksum(c->t), r->rank_figs);
    dist_gather_u64(&c->dist, r->ts.planned_peak_bytes, r->rank_figs + n);
    dist_gather_u64(&c->dist, r->ts.measured_peak_bytes, r->rank_figs + 2 * n);
    for (int32_t i = 1; i < n; i++)
        if (r->rank_figs[i] != r->rank_figs[0])
            return cli_error_code(CLI_EXIT_CHECK, "a bug: please report it", "rank %d's "
                                  "parameters (checksum %016llx) differ from rank 0's "
                                  "(%016llx)", (int)i, (unsigned long long)r->rank_figs[i],
                                  (unsigned long long)r->rank_figs[0]);
    return 0;
}

/* Standard output's buffer, resident before the trainer's mark: the C library would
 * otherwise allocate it at the first step's line, a heap page the steps did not hold. */
static void stdout_buffer_ready(void)
{
    static char buf[BUFSIZ];

    if (!setvbuf(stdout, buf, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, sizeof buf))
        memset(buf, 0, sizeof buf);
}

int cmd_train(int argc, char **argv)
{
    struct train_cmd c = {.m = {.zoo = {.batch = 1}}, .to = remat_train_opts_default(),
                          .strategy = "none", .steps = 3, .accumulate = 1};
    struct train_report r = {0};
    enum parse_result p;
    int rc;

    stdout_buffer_ready();
    cli_begin(argc, argv);
    if ((rc = dist_begin(&c.dist)))
        return rc;
    p = parse_args(&c, argc, argv);
    rc = p == PARSE_FAIL ? CLI_EXIT_INPUT : 0;
    if (p == PARSE_HELP)
        goto out;
    if (!rc) {
        c.m.topts.accumulate = c.to.accumulate = (int32_t)c.accumulate;
        c.m.topts.ranks = c.dist.comm.size;
        c.m.topts.shard_optimizer = c.to.shard_optimizer = c.shard;
        c.to.comm = &c.dist.comm;
        rc = setup_trainer(&c);
    }
    if ((rc = agree(&c, rc, "setting up")) || (rc = agree(&c, run_steps(&c), "training")) ||
        (rc = agree(&c, gather_report(&c, &r), "measuring")) || (rc = gather_ranks(&c, &r)))
        goto out;
    if (c.dist.comm.rank == 0 && c.as_json)
        report_json(&c, &r);
    else if (c.dist.comm.rank == 0)
        report_text(&c, &r);
out:
    free(r.rank_figs);
    train_fini(&c);
    dist_end(&c.dist);
    return rc;
}
