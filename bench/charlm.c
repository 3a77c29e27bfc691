/*
 * charlm.c - a character-level GPT trained on the fortune corpus, against PyTorch 1.13
 * from the same weights on the same batches; then training throughput on the reduced
 * GPT-2 against PyTorch and against the machine's sgemm rate, all in one run. Prints
 * markdown.
 *
 * 1. Convergence. The zoo's gpt2 at 4 layers, 256 wide, 4 heads (head width 64),
 *    sequence 128, vocabulary 256, no dropout, batch 16 (2,048 bytes a step), trained
 *    with AdamW (lr 1e-3, weight decay 0.01 on every parameter, betas 0.9 and 0.999,
 *    eps 1e-8; lr 2e-3 stalls near 2.6 nats from step 500 to 1,200) on the cpu backend
 *    with 2 threads under `none`. The corpus: every plain
 *    fortune file of /usr/share/games/fortunes (regular files without a '.' in the name,
 *    the *.dat indexes and *.u8 links left out) concatenated in strcmp order of their
 *    names into one file under $TMPDIR (or /tmp), read as bytes; batches from
 *    remat_tokens_batch with seed 1, step i at step i. The weights start as GPT-2's
 *    (normal with std 0.02, the residual projections c_proj 0.02 / sqrt(2 layers),
 *    biases 0, layer norms 1 and 0; the first loss is then about ln 256 = 5.55), are
 *    saved with remat_trainer_save and loaded by bench/charlm_torch.py, which recomputes
 *    the batches from remat_tokens_batch's documented scheme (a hash of every batch's
 *    ids is compared) and trains the same model in float32 with torch.optim.AdamW and
 *    torch.set_num_threads(2). Debian's PyTorch runs nn.Linear and matmul on the
 *    reference BLAS (BLAS_INFO=generic, 6.5 s a step), so the script computes every
 *    matrix product as the equivalent oneDNN convolution (0.4 s a step; the same
 *    function, the float32 sums in another order: its docstring) and checks that form
 *    against F.linear and matmul on step 0. PyTorch trains every step remat does unless
 *    its training passes a time limit (40 minutes: 1,200 steps on the generic BLAS
 *    would take two hours), and then the steps it reached. Table: the loss of both at
 *    every 50th step and the last, their relative difference, the largest of those
 *    against the 2% tolerance (and the largest over every step both trained); the
 *    first step below 2.0 nats per byte and the first from which the mean of the last
 *    50 is; the step time (median) and bytes/s of each.
 * 2. Throughput. The reduced GPT-2 of the issue (6 layers, 384 wide, 6 heads, sequence
 *    256, GPT-2's vocabulary 50,257, batch 4, no dropout), AdamW, cpu, 2 threads,
 *    `none`, the same weights in both (PyTorch's products again as convolutions): the
 *    median step time of remat and of PyTorch, tokens/s, and FLOP/s by
 *    FLOPs = 6 P' n + 12 L n T D, where n = batch * T tokens, P' the parameters less
 *    the position table (a lookup: it multiplies nothing; the tied token table counts
 *    once, for the output layer's product), and the second term the attention's two
 *    batched products (scores and context, 2 n T D FLOPs each forward, twice that
 *    backward) over L layers. Beside it dnnl_sgemm on 4096 x 4096 x
 *    4096 with 2 threads, measured in the same run.
 *
 * usage: bench/charlm [steps (1200)] [PyTorch steps (all of remat's; 0: none)]
 *                     [speed steps (3; 0: no part 2)] [lr (1e-3)]
 *                     [PyTorch seconds (2400; 0: no limit)]
 * Measured: docs/benchmarks.md, section charlm. On a loaded machine every figure moves.
 */
#include "bench.h"
#include "remat.h"

#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORTUNES "/usr/share/games/fortunes"
#define TORCH_SCRIPT "bench/charlm_torch.py"
#define THREADS 2
#define SEED 1
#define STEPS 1200          /* remat's steps (argv[1]); PyTorch's by default (argv[2]) */
#define LR 1e-3f            /* AdamW's (argv[4]) */
#define TORCH_SECONDS 2400  /* PyTorch's training stops past it (argv[5]) */
#define MAX_STEPS 5000
#define EVERY 50    /* the table's rows */
#define TARGET 2.0  /* nats per byte */
#define TOL 0.02    /* remat against PyTorch, relative */

struct cfg {
    int64_t layers, heads, width, seq, vocab, batch;
    float lr, wd;
};

/* One model trained on the cpu backend under `none`. */
struct run {
    const struct cfg *c;
    remat_graph *g;
    remat_tgraph *tg;
    remat_algos *al;
    remat_schedule *s;
    remat_trainer *t;
    int32_t *ids, *targets;
    const int32_t *feed[8];
};

/* What a training run measured: loss per step, median step time; PyTorch's also the
 * hash of its batches (see batch_hash). */
struct curve {
    double *loss;
    int steps;
    double median;
    long long hash;
    long long n_params;
    bool ok;
};

/* ------------------------------------------------------------------ corpus */

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Appends file path to out; its bytes, or -1. */
static long append_file(const char *path, FILE *out)
{
    char buf[65536];
    long total = 0;
    size_t n;
    FILE *f = fopen(path, "rb");

    if (!f)
        return -1;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            total = -1;
            break;
        }
        total += (long)n;
    }
    fclose(f);
    return total;
}

/* The corpus (see the top) into path: its bytes and file count, 0 when absent. */
static long corpus_build(const char *path, int *n_files)
{
    struct dirent **names = NULL;
    int n = scandir(FORTUNES, &names, NULL, by_name);
    long total = 0;
    FILE *out;

    *n_files = 0;
    if (n < 0)
        return 0;
    out = fopen(path, "wb");
    for (int i = 0; i < n; i++) {
        char p[512];
        struct stat sb;
        long got;

        snprintf(p, sizeof p, "%s/%s", FORTUNES, names[i]->d_name);
        if (out && total >= 0 && !strchr(names[i]->d_name, '.') && !lstat(p, &sb) &&
            S_ISREG(sb.st_mode)) {
            got = append_file(p, out);
            total = got < 0 ? -1 : total + got;
            ++*n_files;
        }
        free(names[i]);
    }
    free(names);
    if (!out || fclose(out) || total < 0)
        return 0;
    return total;
}

/* -------------------------------------------------------------- the model */

static uint64_t mix64(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A standard normal draw from a counter (Box-Muller on two 53-bit uniforms in (0, 1]). */
static double normal_at(uint64_t *ctr)
{
    double u1 = (double)((mix64((*ctr)++) >> 11) + 1) * 0x1p-53;
    double u2 = (double)((mix64((*ctr)++) >> 11) + 1) * 0x1p-53;

    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* Sets parameter name to N(0, std^2) (std > 0) or to the constant c; its element count
 * (0 after a failure, reported). */
static int64_t set_param(remat_trainer *t, const char *name, double std, float c,
                         uint64_t *ctr)
{
    float *w;
    int64_t n;

    if (remat_trainer_param(t, name, &w, NULL, &n)) {
        fprintf(stderr, "charlm: %s\n", remat_errmsg());
        return 0;
    }
    for (int64_t i = 0; i < n; i++)
        w[i] = std > 0 ? (float)(std * normal_at(ctr)) : c;
    return n;
}

/* One linear layer prefix.{weight,bias}: the weight N(0, std^2), the bias 0. */
static int64_t set_linear(remat_trainer *t, const char *prefix, double std, uint64_t *ctr)
{
    char w[96], b[96];

    snprintf(w, sizeof w, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    return set_param(t, w, std, 0, ctr) + set_param(t, b, 0, 0, ctr);
}

/* One layer norm: gamma 1, beta 0. */
static int64_t set_norm(remat_trainer *t, const char *prefix)
{
    char w[96], b[96];

    snprintf(w, sizeof w, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    return set_param(t, w, 0, 1, NULL) + set_param(t, b, 0, 0, NULL);
}

/* GPT-2's initialisation of every parameter (see the top); false when one was missed. */
static bool gpt_init(struct run *r)
{
    static const char *const lin[] = {"attn.q", "attn.k", "attn.v", "mlp.c_fc"};
    double proj = 0.02 / sqrt(2.0 * (double)r->c->layers);
    uint64_t ctr = 0x5eed;
    int64_t n = set_param(r->t, "wte.weight", 0.02, 0, &ctr) +
                set_param(r->t, "wpe.weight", 0.02, 0, &ctr) + set_norm(r->t, "ln_f");
    char p[64];

    for (int64_t i = 0; i < r->c->layers; i++) {
        for (size_t k = 0; k < sizeof lin / sizeof *lin; k++) {
            snprintf(p, sizeof p, "h.%lld.%s", (long long)i, lin[k]);
            n += set_linear(r->t, p, 0.02, &ctr);
        }
        snprintf(p, sizeof p, "h.%lld.attn.c_proj", (long long)i);
        n += set_linear(r->t, p, proj, &ctr);
        snprintf(p, sizeof p, "h.%lld.mlp.c_proj", (long long)i);
        n += set_linear(r->t, p, proj, &ctr);
        snprintf(p, sizeof p, "h.%lld.ln_1", (long long)i);
        n += set_norm(r->t, p);
        snprintf(p, sizeof p, "h.%lld.ln_2", (long long)i);
        n += set_norm(r->t, p);
    }
    if (n != remat_graph_n_params(r->g))
        fprintf(stderr, "charlm: initialised %lld of %lld parameters\n", (long long)n,
                (long long)remat_graph_n_params(r->g));
    return n == remat_graph_n_params(r->g);
}

/* The feed of remat_trainer_step_tokens: ids and targets, positions left to the trainer. */
static bool set_feed(struct run *r)
{
    remat_token_value tv[8];
    int32_t n = remat_graph_token_values(r->g, tv, 8);
    size_t bt = (size_t)(r->c->batch * r->c->seq);
    bool have_ids = false;

    r->ids = calloc(bt, sizeof *r->ids);
    r->targets = calloc(bt, sizeof *r->targets);
    if (n < 1 || n > 8 || !r->ids || !r->targets)
        return false;
    for (int32_t k = 0; k < n; k++) {
        r->feed[k] = tv[k].role == REMAT_TOKEN_IDS       ? r->ids
                     : tv[k].role == REMAT_TOKEN_TARGETS ? r->targets
                                                         : NULL;
        have_ids |= tv[k].role == REMAT_TOKEN_IDS;
    }
    return have_ids;
}

static void run_free(struct run *r)
{
    remat_trainer_free(r->t);
    remat_schedule_free(r->s);
    remat_algos_free(r->al);
    remat_tgraph_free(r->tg);
    remat_graph_free(r->g);
    free(r->ids);
    free(r->targets);
    memset(r, 0, sizeof *r);
}

/* The model of c on the cpu backend, planned under `none`, GPT-2's initial weights. */
static bool run_new(struct run *r, const struct cfg *c)
{
    remat_zoo_opts zo = {.batch = c->batch, .layers = c->layers, .heads = c->heads,
                         .hidden = c->width, .seq_len = c->seq, .vocab = c->vocab,
                         .dropout = -1};
    remat_tgraph_opts tgo = {.optimizer = REMAT_OPTIMIZER_ADAMW};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE, .budget_min = true};
    remat_train_opts to = remat_train_opts_default();

    memset(r, 0, sizeof *r);
    r->c = c;
    to.backend = REMAT_BACKEND_CPU;
    to.threads = THREADS;
    to.optimizer = REMAT_OPTIMIZER_ADAMW;
    to.lr = c->lr;
    to.weight_decay = c->wd;
    if (remat_zoo_build("gpt2", &zo, NULL, &r->g) ||
        remat_tgraph_from_graph(r->g, &tgo, &r->tg) ||
        remat_train_algos(r->g, r->tg, &to, &r->al) || !(po.algos = r->al) ||
        remat_plan(r->tg, &po, &r->s, NULL) ||
        remat_trainer_new(r->g, r->tg, r->s, &to, &r->t)) {
        fprintf(stderr, "charlm: %s\n", remat_errmsg());
        run_free(r);
        return false;
    }
    if (!gpt_init(r) || !set_feed(r)) {
        fprintf(stderr, "charlm: cannot set up the model's weights or feed\n");
        run_free(r);
        return false;
    }
    return true;
}

/* Trains r for out->steps steps from data; the losses and the median step time (the
 * first step left out). */
static bool run_train(struct run *r, const remat_tokens *data, struct curve *out)
{
    double *times = calloc((size_t)out->steps, sizeof *times);

    for (int i = 0; i < out->steps && times; i++) {
        double t0;

        if (remat_tokens_batch(data, SEED, i, r->c->batch, r->c->seq, r->ids, r->targets))
            goto fail;
        t0 = now();
        if (remat_trainer_step_tokens(r->t, r->feed, &out->loss[i]))
            goto fail;
        times[i] = now() - t0;
        if (i % EVERY == 0) /* progress, on stderr: the tables go to stdout */
            fprintf(stderr, "charlm: step %d/%d loss %.4f %.3f s\n", i, out->steps,
                    out->loss[i], times[i]);
    }
    if (!times)
        return false;
    qsort(times + 1, (size_t)out->steps - 1, sizeof *times, cmp_d);
    out->median = out->steps > 1 ? times[1 + (out->steps - 1) / 2] : times[0];
    out->n_params = remat_graph_n_params(r->g);
    free(times);
    return out->ok = true;
fail:
    fprintf(stderr, "charlm: %s\n", remat_errmsg());
    free(times);
    return false;
}

/* ------------------------------------------------------------------ PyTorch */

/* What charlm_torch.py reports besides the curve. */
struct torch_info {
    char blas[64];      /* torch's BLAS_INFO */
    int mkldnn;         /* 1: its convolutions can run on oneDNN */
    double check_loss;  /* form_check: relative difference of the loss, */
    double check_grad;  /* and the largest of any gradient's; -1: not run */
    int stopped;        /* the steps trained when its time limit ended training; 0 */
};

/* Reads one line of charlm_torch.py's output into out and info; false when the line is
 * none of its records (an error message). got counts the losses read. */
static bool torch_line(const char *line, struct curve *out, struct torch_info *info,
                       int *got)
{
    int step;
    double v;

    if (sscanf(line, "loss %d %lf", &step, &v) == 2 && step >= 0 && step < out->steps) {
        out->loss[step] = v;
        ++*got;
        return true;
    }
    if (sscanf(line, "median_seconds %lf", &v) == 1) {
        out->median = v;
        return true;
    }
    return sscanf(line, "form_check %lf %lf", &info->check_loss, &info->check_grad) == 2 ||
           sscanf(line, "blas %63s", info->blas) == 1 ||
           sscanf(line, "mkldnn %d", &info->mkldnn) == 1 ||
           sscanf(line, "stopped %d", &info->stopped) == 1 ||
           sscanf(line, "batch_hash %lld", &out->hash) == 1 ||
           sscanf(line, "params %lld", &out->n_params) == 1;
}

/* Runs charlm_torch.py on c for out->steps steps (fewer when it passes seconds of
 * training; 0: no limit), with its form check when check; reads its losses, median step
 * time, batch hash and info. out->steps becomes the steps it trained. */
static bool torch_train(const struct cfg *c, const char *corpus, const char *params,
                        bool check, double seconds, struct curve *out,
                        struct torch_info *info)
{
    char cmd[1280], line[256];
    int got = 0;
    FILE *p;

    memset(info, 0, sizeof *info);
    info->check_loss = info->check_grad = -1;
    if (access("/usr/bin/python3", X_OK) || access(TORCH_SCRIPT, R_OK))
        return false;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s corpus=%s params=%s steps=%d batch=%lld "
             "seq=%lld layers=%lld heads=%lld width=%lld vocab=%lld lr=%.9g wd=%.9g "
             "seed=%d threads=%d check=%d seconds=%g 2>&1", TORCH_SCRIPT, corpus, params,
             out->steps, (long long)c->batch, (long long)c->seq, (long long)c->layers,
             (long long)c->heads, (long long)c->width, (long long)c->vocab, (double)c->lr,
             (double)c->wd, SEED, THREADS, check, seconds);
    if (!(p = popen(cmd, "r")))
        return false;
    while (fgets(line, sizeof line, p))
        if (!torch_line(line, out, info, &got))
            fprintf(stderr, "charlm_torch: %s", line);
    if (info->stopped > 0 && info->stopped < out->steps)
        out->steps = info->stopped;
    out->ok = pclose(p) == 0 && got == out->steps && out->median > 0;
    return out->ok;
}

/* The hash charlm_torch.py forms of its batches, over remat_tokens_batch's first steps
 * steps: the sum over steps i and entries k of ids[k] * (k + 1) * (i + 1). */
static bool batch_hash(const remat_tokens *data, const struct cfg *c, int steps,
                       long long *hash)
{
    size_t bt = (size_t)(c->batch * c->seq);
    int32_t *ids = malloc(bt * sizeof *ids), *tgt = malloc(bt * sizeof *tgt);
    bool ok = ids && tgt;

    *hash = 0;
    for (int i = 0; ok && i < steps; i++) {
        ok = !remat_tokens_batch(data, SEED, i, c->batch, c->seq, ids, tgt);
        for (size_t k = 0; ok && k < bt; k++)
            *hash += (long long)ids[k] * (long long)(k + 1) * (i + 1);
    }
    free(ids);
    free(tgt);
    return ok;
}

/* ------------------------------------------------------------------ reports */

/* The first step from which the mean of the last EVERY losses is below TARGET; -1. */
static int reached(const struct curve *c, bool single)
{
    double sum = 0;

    for (int i = 0; i < c->steps; i++) {
        if (single && c->loss[i] < TARGET)
            return i;
        sum += c->loss[i] - (i >= EVERY ? c->loss[i - EVERY] : 0);
        if (!single && i >= EVERY - 1 && sum / EVERY < TARGET)
            return i;
    }
    return -1;
}

/* One row of the loss table; the relative difference, 0 without PyTorch. */
static double print_row(const struct curve *r, const struct curve *t, int i)
{
    double d;

    if (!t->ok || i >= t->steps) {
        printf("| %d | %.4f | | |\n", i, r->loss[i]);
        return 0;
    }
    d = fabs(r->loss[i] - t->loss[i]) / t->loss[i];
    printf("| %d | %.4f | %.4f | %.2f%% |\n", i, r->loss[i], t->loss[i], 100 * d);
    return d;
}

/* The largest relative difference over every step both trained. */
static double worst_step(const struct curve *r, const struct curve *t, int *at)
{
    double worst = 0;

    *at = 0;
    for (int i = 0; t->ok && i < t->steps; i++)
        if (fabs(r->loss[i] - t->loss[i]) / t->loss[i] > worst) {
            worst = fabs(r->loss[i] - t->loss[i]) / t->loss[i];
            *at = i;
        }
    return worst;
}

static void print_curves(const struct curve *r, const struct curve *t, const struct cfg *c)
{
    double worst = 0, d, all, bytes = (double)(c->batch * c->seq);
    int at, worst_at = 0, rows = 0;

    printf("| step | remat loss | PyTorch loss | relative difference |\n|---|---|---|---|\n");
    for (int i = 0; i < r->steps; i++)
        if (i % EVERY == 0 || i == r->steps - 1 || (t->ok && i == t->steps - 1)) {
            d = print_row(r, t, i);
            rows += t->ok && i < t->steps;
            if (d > worst) {
                worst = d;
                worst_at = i;
            }
        }
    printf("\nFirst loss below %.1f: remat at step %d", TARGET, reached(r, true));
    if (t->ok)
        printf(", PyTorch at step %d", reached(t, true));
    printf(". Mean of the last %d losses below %.1f from step: remat %d", EVERY, TARGET,
           reached(r, false));
    if (t->ok)
        printf(", PyTorch %d", reached(t, false));
    printf(" (-1: not reached).\n");
    all = worst_step(r, t, &at);
    if (t->ok)
        printf("Largest relative difference over the %d rows both trained (every %dth "
               "step and the last): %.2f%% at step %d, %s %.0f%%; over all %d steps: "
               "%.2f%% (step %d)\n", rows, EVERY, 100 * worst, worst_at,
               worst <= TOL ? "within" : "**NOT within**", 100 * TOL, t->steps, 100 * all,
               at);
    printf("\n| | median step s | bytes/s |\n|---|---|---|\n| remat cpu (none) | %.4f | "
           "%.0f |\n", r->median, bytes / r->median);
    if (t->ok)
        printf("| PyTorch 1.13 | %.4f | %.0f |\n\nremat / PyTorch bytes/s: **%.2f**\n",
               t->median, bytes / t->median, t->median / r->median);
}

/* ------------------------------------------------------------------ parts */

/* A path under $TMPDIR (or /tmp) for this process. */
static void tmp_path(char *out, size_t n, const char *leaf)
{
    const char *dir = getenv("TMPDIR");

    snprintf(out, n, "%s/remat_charlm_%ld_%s", dir && *dir ? dir : "/tmp", (long)getpid(),
             leaf);
}

/* What PyTorch's run says of itself: its BLAS, its matrix products' form and that form's
 * check, a time limit reached, batches or parameters unlike remat's. */
static void print_torch_info(const struct torch_info *info, const struct curve *t,
                             long long hash, long long n_params, double seconds)
{
    printf("PyTorch's BLAS: %s; oneDNN for its convolutions: %s. charlm_torch.py computes "
           "every matrix product (the linear layers, the tied output layer, the "
           "attention's two batched products) as an equivalent oneDNN convolution",
           info->blas[0] ? info->blas : "unknown", info->mkldnn ? "yes" : "no");
    if (info->check_loss >= 0)
        printf("; on step 0 it differs from F.linear and matmul by %.1e in the loss and at "
               "most %.1e in any gradient (relative)", info->check_loss, info->check_grad);
    printf(".\n\n");
    if (info->stopped > 0)
        printf("PyTorch stopped after %d steps: its training passed the limit of %g s.\n\n",
               info->stopped, seconds);
    if (t->hash != hash || t->n_params != n_params)
        printf("**PyTorch's batches or parameters differ from remat's** (batch hash %lld "
               "against %lld, %lld parameters against %lld): the comparison is void\n\n",
               t->hash, hash, t->n_params, n_params);
}

/* Trains c in remat for r->steps steps and in PyTorch for t->steps (fewer when its
 * training passes seconds); prints the tables. */
static int part_curve(const struct cfg *c, const remat_tokens *data, const char *corpus,
                      double seconds, struct curve *r, struct curve *t)
{
    struct torch_info info;
    char params[512];
    long long hash = 0;
    struct run run;
    bool ok;

    tmp_path(params, sizeof params, "char_init.prm");
    if (!run_new(&run, c))
        return 1;
    ok = !remat_trainer_save(run.t, params) && run_train(&run, data, r);
    run_free(&run);
    if (!ok) {
        fprintf(stderr, "charlm: %s\n", remat_errmsg());
        return 1;
    }
    if (t->steps > 0 && !torch_train(c, corpus, params, true, seconds, t, &info))
        printf("(PyTorch column left empty: /usr/bin/python3 with torch 1.13 and %s are "
               "needed, run from the repository root)\n\n", TORCH_SCRIPT);
    remove(params);
    if (t->ok && !batch_hash(data, c, t->steps, &hash)) {
        fprintf(stderr, "charlm: %s\n", remat_errmsg());
        return 1;
    }
    if (t->ok)
        print_torch_info(&info, t, hash, r->n_params, seconds);
    print_curves(r, t, c);
    return 0;
}

/* dnnl_sgemm's FLOP/s on 4096^3 with THREADS threads: the median of 3 after one. */
static double sgemm_rate(void)
{
    const dnnl_dim_t n = 4096;
    size_t nn = (size_t)(n * n);
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *cc = malloc(nn * sizeof *cc);
    double t[3] = {0}, rate = 0;
    int saved = omp_get_max_threads();

    omp_set_num_threads(THREADS);
    for (size_t i = 0; a && b && cc && i < nn; i++) {
        a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    }
    for (int k = -1; a && b && cc && k < 3; k++) {
        double t0 = now();

        if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, cc, n) != dnnl_success)
            goto out;
        if (k >= 0)
            t[k] = now() - t0;
    }
    qsort(t, 3, sizeof *t, cmp_d);
    rate = 2.0 * (double)n * (double)n * (double)n / t[1];
out:
    omp_set_num_threads(saved);
    free(a);
    free(b);
    free(cc);
    return rate;
}

/* FLOPs of one training step by the formula at the top. */
static double step_flops(const struct cfg *c, long long n_params)
{
    double n = (double)(c->batch * c->seq), p = (double)n_params - 1024.0 * (double)c->width;

    return 6 * p * n + 12.0 * (double)c->layers * n * (double)c->seq * (double)c->width;
}

/* The reduced GPT-2's throughput in remat and PyTorch against sgemm's rate. */
static int part_speed(const remat_tokens *data, const char *corpus, int steps)
{
    static const struct cfg c = {6, 6, 384, 256, 50257, 4, 1e-4f, 0.01f};
    double rbuf[64], tbuf[64], gemm, f, tok = (double)(c.batch * c.seq);
    struct curve r = {.loss = rbuf, .steps = steps}, t = {.loss = tbuf, .steps = steps};
    struct torch_info info;
    char params[512];
    struct run run;
    bool ok;

    tmp_path(params, sizeof params, "gpt_init.prm");
    if (!run_new(&run, &c))
        return 1;
    ok = !remat_trainer_save(run.t, params) && run_train(&run, data, &r);
    run_free(&run);
    if (!ok)
        return 1;
    torch_train(&c, corpus, params, false, 0, &t, &info);
    remove(params);
    gemm = sgemm_rate();
    f = step_flops(&c, r.n_params);
    printf("\n### Reduced GPT-2 (6 layers, 384 wide, 6 heads, sequence 256, vocabulary "
           "50,257), batch 4: AdamW, cpu, %d threads, `none`\n\n%lld parameters; %.1f "
           "GFLOPs a step = 6 x %lld x %.0f tokens + 12 x 6 layers x %.0f tokens x 256 x "
           "384 (the position table's %d x 384 left out of the 6 P n term). Median of %d "
           "steps after one, same weights, both measured in this run.\n\n"
           "| | step s | tokens/s | GFLOP/s | / sgemm |\n|---|---|---|---|---|\n", THREADS,
           r.n_params, f / 1e9, r.n_params - 1024LL * 384, tok, tok, 1024, steps - 1);
    printf("| remat cpu (none) | %.3f | %.1f | %.1f | %.0f%% |\n", r.median, tok / r.median,
           f / r.median / 1e9, gemm > 0 ? 100 * f / r.median / gemm : 0);
    if (t.ok)
        printf("| PyTorch 1.13 | %.3f | %.1f | %.1f | %.0f%% |\n", t.median, tok / t.median,
               f / t.median / 1e9, gemm > 0 ? 100 * f / t.median / gemm : 0);
    else
        printf("| PyTorch 1.13 | not available (/usr/bin/python3 with torch) | | | |\n");
    printf("| dnnl_sgemm 4096^3 | | | %.1f | 100%% |\n\n", gemm / 1e9);
    if (t.ok)
        printf("remat / PyTorch tokens/s: **%.2f**; ", t.median / r.median);
    printf("remat / sgemm FLOP/s: **%.2f**\n", gemm > 0 ? f / r.median / gemm : 0);
    return 0;
}

int main(int argc, char **argv)
{
    struct cfg c = {4, 4, 256, 128, 256, 16, LR, 0.01f};
    int steps = argc > 1 ? atoi(argv[1]) : STEPS;
    int torch_steps = argc > 2 ? atoi(argv[2]) : steps;
    int speed = argc > 3 ? atoi(argv[3]) : 3;
    double seconds = argc > 5 ? strtod(argv[5], NULL) : TORCH_SECONDS;
    char corpus[512];
    struct curve r = {0}, t = {0};
    remat_tokens *data = NULL;
    int n_files, rc = 1;
    long bytes;

    c.lr = argc > 4 ? strtof(argv[4], NULL) : c.lr;
    torch_steps = torch_steps < steps ? torch_steps : steps;
    if (steps < 2 || steps > MAX_STEPS || torch_steps < 0 || torch_steps == 1 ||
        speed < 0 || speed == 1 || speed > 64 || !(c.lr > 0) || !(seconds >= 0))
        return fprintf(stderr, "usage: charlm [steps 2..%d (%d)] [PyTorch steps 0 (none), "
                       "2..steps (steps)] [speed steps 0 (none), 2..64 (3)] [lr (%g)] "
                       "[PyTorch seconds (%d; 0: no limit)]\n", MAX_STEPS, STEPS,
                       (double)LR, TORCH_SECONDS), 2;
    tmp_path(corpus, sizeof corpus, "corpus.txt");
    if (!(bytes = corpus_build(corpus, &n_files))) {
        printf("(skipped: no fortune files in %s: apt-get install fortunes)\n", FORTUNES);
        return 0;
    }
    if (remat_tokens_open(corpus, &data)) {
        fprintf(stderr, "charlm: %s\n", remat_errmsg());
        goto out;
    }
    r.steps = steps;
    t.steps = torch_steps;
    r.loss = calloc((size_t)steps, sizeof *r.loss);
    t.loss = calloc((size_t)steps, sizeof *t.loss);
    if (!r.loss || !t.loss)
        goto out;
    printf("### Character-level GPT on the fortune corpus: remat against PyTorch 1.13\n\n"
           "4 layers, 256 wide, 4 heads of 64, sequence 128, vocabulary 256 (bytes), no "
           "dropout, batch 16; AdamW lr %g, weight decay %g, betas 0.9, 0.999; cpu, %d "
           "threads, `none`; remat trains %d steps, PyTorch the first %d of them (at "
           "most %g s), from the same weights on the same batches. Corpus: %d fortune "
           "files, %ld bytes.\n\n", (double)c.lr, (double)c.wd, THREADS, steps, torch_steps,
           seconds, n_files, bytes);
    fflush(stdout);
    rc = part_curve(&c, data, corpus, seconds, &r, &t) ||
         (speed && part_speed(data, corpus, speed));
out:
    remat_tokens_free(data);
    remove(corpus);
    free(r.loss);
    free(t.loss);
    return rc;
}
