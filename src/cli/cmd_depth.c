/*
 * cmd_depth.c - `remat depth --budget B --batch N`: the deepest ResNet whose plan fits
 * the budget, for each strategy.
 *
 * The family is the zoo's very deep ImageNet ResNets: bottleneck blocks (3, 8, k, 3), the
 * third stage grown (depth 3 (14 + k) + 2 = 3k + 44, k >= 1: ResNet-47 upwards; k = 319
 * is ResNet-1001). For each strategy the largest k whose plan fits the total budget
 * (resident bytes and, when verifying, the backend's kernels' scratch included) is
 * found by doubling and then bisection, each probe planned and simulated. The depth
 * found is then confirmed by one real training step (--no-verify skips it): the
 * trainer's measured peak must equal the plan's, and resident plus measured bytes must
 * fit the budget.
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_K 19000 /* the zoo's limit on bottleneck blocks, less stages 1, 2 and 4 */

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat depth --budget B [options]\n\n"
            "The deepest ResNet (bottleneck blocks (3, 8, k, 3): depth 3k + 44, ResNet-47\n"
            "upwards, as the zoo's resnet1001) whose plan fits the budget, for each\n"
            "strategy, found by bisection on the simulator; each depth is then confirmed\n"
            "by one real training step.\n\n"
            "  --budget B          total memory (bytes with a unit: 4GiB); required\n"
            "  --batch N           batch size (default 16)\n"
            "  --input-size HxW    input size (default 224x224)\n"
            "  --strategy S[,S..]  strategies (default: none, approx-tc, approx-mc,\n"
            "                      chen-sqrtn, chen-greedy, superneurons, hybrid)\n"
            "  --no-verify         skip the training step\n"
            "  --backend ref|cpu|cuda  the verifying step's backend (default cpu; its\n"
            "                      kernels' scratch counts in the budget)\n"
            "  --threads T         the cpu backend's threads (default: all)\n"
            "  --json              an array of {strategy, depth, activation_peak_bytes,\n"
            "                      verified, ...}\n" CLI_OFFLOAD_HELP);
}

struct setup {
    int64_t batch, h, w;
    size_t budget;
    remat_train_opts to;
    remat_plan_opts offload;   /* --bandwidth, --flops, --no-offload */
    bool verify;
};

/* The plan options of every probe; when verifying, the backend's kernels for the
 * probe's graph go to *al (NULL with the error printed on failure). */
static remat_plan_opts probe_opts(const struct setup *su, remat_strategy s,
                                  const remat_graph *g, const remat_tgraph *tg,
                                  remat_algos **al, bool *err)
{
    remat_plan_opts po = su->offload;

    po.strategy = s;
    po.budget_bytes = su->budget;
    po.time_limit = 20;
    *al = NULL;
    if (su->verify && remat_train_algos(g, tg, &su->to, al)) {
        cli_error(NULL, "depth: %s", remat_errmsg());
        *err = true;
    }
    po.algos = *al;
    return po;
}

struct probe {
    bool fits;
    size_t activation, resident, scratch;
};

static int64_t depth_of(int64_t k)
{
    return k > 0 ? 3 * k + 44 : 0;
}

/* The graph of ResNet (3, 8, k, 3); NULL with the error printed. */
static remat_graph *build(const struct setup *su, int64_t k)
{
    remat_zoo_opts zo = {.batch = su->batch, .height = su->h, .width = su->w};
    char name[64];
    remat_graph *g = NULL;

    snprintf(name, sizeof name, "resnet-3-8-%lld-3", (long long)k);
    if (remat_zoo_build(name, &zo, NULL, &g)) {
        cli_error(NULL, "%s: %s", name, remat_errmsg());
        return NULL;
    }
    return g;
}

/* Plans depth k with strategy s at the budget: fits or not (false on another error,
 * *err set). */
static struct probe try_depth(const struct setup *su, remat_strategy s, int64_t k, bool *err,
                              struct progress *pr)
{
    struct probe p = {0};
    remat_graph *g = build(su, k);
    remat_tgraph *tg = NULL;
    remat_schedule *sc = NULL;
    remat_algos *al = NULL;
    remat_plan_opts po;
    remat_sim_result r;
    remat_status st;

    if (!g || remat_tgraph_from_graph(g, NULL, &tg)) {
        if (g)
            cli_error(NULL, "%s", remat_errmsg());
        *err = true;
        remat_graph_free(g);
        return p;
    }
    p.resident = remat_tgraph_resident_bytes(tg);
    po = probe_opts(su, s, g, tg, &al, err);
    po.progress = progress_stage; /* the planner's stages on the line */
    po.progress_ud = pr;
    st = *err ? REMAT_ERR_ARG : remat_plan(tg, &po, &sc, NULL);
    if (st == REMAT_OK && !remat_sim_run(tg, sc, &r)) {
        p.fits = true;
        p.activation = r.activation_peak_bytes;
        p.scratch = r.scratch_peak_bytes;
    } else if (*err) {
        /* printed */
    } else if (st != REMAT_ERR_INFEASIBLE) {
        cli_error_code(cli_exit_code(st), NULL, "%s at depth %lld: %s",
                       remat_strategy_name(s), (long long)depth_of(k), remat_errmsg());
        *err = true;
    }
    remat_schedule_free(sc);
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return p;
}

/* One training step at depth k: the trainer's peak must be the plan's, and resident plus
 * measured bytes within the budget. */
static bool verify(const struct setup *su, remat_strategy s, int64_t k, double *secs)
{
    remat_graph *g = build(su, k);
    remat_tgraph *tg = NULL;
    remat_schedule *sc = NULL;
    remat_trainer *t = NULL;
    remat_algos *al = NULL;
    remat_plan_opts po;
    remat_train_stats ts;
    double loss, t0;
    bool ok = false, lib_failed = true, err = false;

    if (g && !remat_tgraph_from_graph(g, NULL, &tg) &&
        (po = probe_opts(su, s, g, tg, &al, &err), !err) && !remat_plan(tg, &po, &sc, NULL) &&
        !remat_trainer_new(g, tg, sc, &su->to, &t)) {
        t0 = cli_now();
        if (!remat_trainer_step(t, NULL, NULL, &loss)) {
            lib_failed = false;
            *secs = cli_now() - t0;
            remat_trainer_stats(t, &ts);
            ok = ts.measured_peak_bytes == ts.planned_peak_bytes &&
                 ts.measured_host_bytes == ts.planned_host_bytes &&
                 ts.resident_bytes + ts.measured_peak_bytes <= su->budget;
            if (!ok) /* a note: the command's error follows the results */
                fprintf(stderr, "remat: %s at depth %lld: measured %zu bytes, planned %zu "
                        "(host tier %zu, %zu), resident %zu, budget %zu\n",
                        remat_strategy_name(s),
                        (long long)depth_of(k), ts.measured_peak_bytes, ts.planned_peak_bytes,
                        ts.measured_host_bytes, ts.planned_host_bytes, ts.resident_bytes,
                        su->budget);
        }
    }
    if (lib_failed && g)
        fprintf(stderr, "remat: depth %lld, %s: %s\n", (long long)depth_of(k),
                remat_strategy_name(s), remat_errmsg());
    remat_trainer_free(t);
    remat_schedule_free(sc);
    remat_algos_free(al);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    return ok;
}

struct result {
    remat_strategy s;
    int64_t k;
    struct probe p;
    bool verified;
    double search_s, step_s;
};

/* Plans depth k with strategy s under the progress line: probe counts the probes. */
static struct probe probe_at(const struct setup *su, remat_strategy s, int64_t k, bool *err,
                             struct progress *pr, int64_t *probe)
{
    char detail[64];
    struct probe p;

    snprintf(detail, sizeof detail, "%s at depth %lld", remat_strategy_name(s),
             (long long)depth_of(k));
    progress_step(pr, *probe, detail);
    progress_wait_begin(pr, detail, 0);
    p = try_depth(su, s, k, err, pr);
    progress_wait_end(pr);
    progress_step(pr, ++*probe, detail);
    return p;
}

/* The largest k that fits: doubling, then bisection. 0, or 1 after printing an error. */
static int search(const struct setup *su, remat_strategy s, struct result *res,
                  struct progress *pr, int64_t *probe)
{
    int64_t lo = 0, hi, k = 1;
    struct probe best = {0}, p;
    bool err = false;
    double t0 = cli_now();

    for (;;) {
        p = probe_at(su, s, k, &err, pr, probe);
        if (err)
            return 1;
        if (!p.fits)
            break;
        lo = k;
        best = p;
        if (k >= MAX_K)
            break;
        k = k * 2 > MAX_K ? MAX_K : k * 2;
    }
    hi = p.fits ? lo + 1 : k;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;

        p = probe_at(su, s, mid, &err, pr, probe);
        if (err)
            return 1;
        if (p.fits) {
            lo = mid;
            best = p;
        } else {
            hi = mid;
        }
    }
    res->s = s;
    res->k = lo;
    res->p = best;
    res->search_s = cli_now() - t0;
    res->verified = false;
    if (su->verify && lo > 0) {
        char detail[64];

        snprintf(detail, sizeof detail, "%s: a training step at depth %lld",
                 remat_strategy_name(s), (long long)depth_of(lo));
        progress_wait_begin(pr, detail, 0);
        res->verified = verify(su, s, lo, &res->step_s);
        progress_wait_end(pr);
    }
    return 0;
}

static void print(const struct result *r, int n, const struct setup *su, bool as_json)
{
    int64_t base = 0;
    char a[32], b[32];

    for (int i = 0; i < n; i++)
        if (r[i].s == REMAT_STRATEGY_NONE)
            base = depth_of(r[i].k);
    if (as_json) {
        struct json j;

        json_begin(&j, stdout, '[');
        for (int i = 0; i < n; i++) {
            json_begin(&j, NULL, '{');
            json_str(&j, "strategy", remat_strategy_name(r[i].s));
            json_i64(&j, "depth", depth_of(r[i].k));
            json_i64(&j, "blocks", r[i].k ? r[i].k + 14 : 0);
            json_u64(&j, "activation_peak_bytes", r[i].p.activation);
            json_u64(&j, "resident_bytes", r[i].p.resident);
            json_u64(&j, "workspace_bytes", r[i].p.scratch);
            json_bool(&j, "verified", r[i].verified);
            if (base > 0)
                json_f64(&j, "depth_vs_none", (double)depth_of(r[i].k) / (double)base);
            json_f64(&j, "search_seconds", r[i].search_s);
            if (r[i].verified)
                json_f64(&j, "step_seconds", r[i].step_s);
            json_end(&j, '}');
        }
        json_end(&j, ']');
        return;
    }
    printf("budget %s bytes, batch %lld, %lldx%lld; ResNet (3, 8, k, 3)%s\n",
           cli_commas(su->budget, a, sizeof a), (long long)su->batch, (long long)su->h,
           (long long)su->w, su->verify ? "; activations include the kernels' scratch" : "");
    printf("%-13s %7s %9s %14s %14s %9s %9s\n", "strategy", "depth", "vs none",
           "activations", "resident", "verified", "step s");
    for (int i = 0; i < n; i++) {
        char c[32], d[32];

        printf("%-13s %7lld %9s %14s %14s %9s %9s\n", remat_strategy_name(r[i].s),
               (long long)depth_of(r[i].k),
               base > 0 ? (snprintf(a, sizeof a, "%.2fx", (double)depth_of(r[i].k) /
                                                             (double)base), a) : "-",
               cli_human((double)r[i].p.activation, c, sizeof c),
               cli_human((double)r[i].p.resident, d, sizeof d),
               !su->verify ? "skipped" : r[i].verified ? "yes" : "NO",
               r[i].verified ? (snprintf(b, sizeof b, "%.1f", r[i].step_s), b) : "-");
    }
}

/* --strategy's list into strat[*n]: 0, or 1 after printing the unknown name. */
static int parse_strategies(const char *v, remat_strategy *strat, int *n)
{
    for (const char *p = v; *p && *n < REMAT_STRATEGY_COUNT;) {
        char name[32];
        size_t l = strcspn(p, ",");

        snprintf(name, sizeof name, "%.*s", (int)(l < 31 ? l : 31), p);
        strat[*n] = remat_strategy_from_name(name);
        if (strat[*n] == REMAT_STRATEGY_COUNT)
            return cli_error("`remat plan --help` lists the strategies",
                             "depth: unknown strategy '%s'", name);
        ++*n;
        p += l + (p[l] == ',');
    }
    return 0;
}

/* The command line into su, strat and n: 0, -1 after --help, or an exit code after
 * printing an error. */
static int parse_args(struct setup *su, remat_strategy *strat, int *n, bool *as_json,
                      int argc, char **argv)
{
    remat_plan_opts po = {0};
    int k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;

        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return -1;
        } else if (!strcmp(a, "--budget")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_budget(a, v, &po))
                return 1;
            if (po.budget_min)
                return cli_error(NULL, "depth: --budget needs bytes, not min");
            su->budget = po.budget_bytes;
        } else if (!strcmp(a, "--batch")) {
            if (!(v = cli_value(argc, argv, &i)) ||
                !cli_parse_i64(a, v, 1, 1 << 16, &su->batch))
                return 1;
        } else if (!strcmp(a, "--input-size")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_hw(a, v, &su->h, &su->w))
                return 1;
        } else if (!strcmp(a, "--strategy")) {
            if (!(v = cli_value(argc, argv, &i)) || parse_strategies(v, strat, n))
                return 1;
        } else if (!strcmp(a, "--no-verify")) {
            su->verify = false;
        } else if ((k = cli_backend_option(&su->to, argc, argv, &i)) != 0 ||
                   (k = cli_offload_option(&su->offload, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
        } else if (!strcmp(a, "--json")) {
            *as_json = true;
        } else {
            help(stderr);
            return cli_error("`remat depth --help` lists the options",
                             "depth: unknown option '%s'", a);
        }
    }
    if (!su->budget) {
        help(stderr);
        return cli_error("give it in bytes with a unit, e.g. --budget 4GiB",
                         "depth: --budget is required");
    }
    /* on the host the host tier is the same memory; the time model is the backend's */
    su->offload.host_in_budget = su->verify && su->to.backend != REMAT_BACKEND_CUDA &&
                                 !su->to.host_file;
    su->offload.whole_pages = su->verify && su->to.backend != REMAT_BACKEND_CUDA;
    return su->verify ? cli_time_model(&su->to, &su->offload) : 0;
}

int cmd_depth(int argc, char **argv)
{
    static const remat_strategy dflt[] = {
        REMAT_STRATEGY_NONE,       REMAT_STRATEGY_APPROX_TC,   REMAT_STRATEGY_APPROX_MC,
        REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_CHEN_GREEDY, REMAT_STRATEGY_SUPERNEURONS,
        REMAT_STRATEGY_HYBRID,
    };
    struct setup su = {.batch = 16, .h = 224, .w = 224, .verify = true};
    remat_strategy strat[REMAT_STRATEGY_COUNT];
    struct result res[REMAT_STRATEGY_COUNT];
    int n = 0, rc;
    int64_t probes = 0;
    bool as_json = false, all_verified = true;
    struct progress pr;

    cli_begin(argc, argv);
    su.to = remat_train_opts_default();
    su.to.backend = REMAT_BACKEND_CPU;
    if ((rc = parse_args(&su, strat, &n, &as_json, argc, argv)))
        return rc < 0 ? 0 : rc;
    if (!n) {
        n = (int)(sizeof dflt / sizeof dflt[0]);
        memcpy(strat, dflt, sizeof dflt);
    }
    progress_begin(&pr, "depth", "probes", 0);
    for (int i = 0; i < n; i++) {
        if (search(&su, strat[i], &res[i], &pr, &probes)) {
            progress_end(&pr);
            return 1;
        }
        if (pr.on) { /* each strategy's result stays on the terminal */
            progress_clear(&pr);
            fprintf(stderr, "%s: depth %lld%s\n", remat_strategy_name(strat[i]),
                    (long long)depth_of(res[i].k),
                    !su.verify || !res[i].k ? "" : res[i].verified ? ", verified by a step"
                                                                   : ", NOT verified");
        }
        all_verified = all_verified && (!su.verify || !res[i].k || res[i].verified);
    }
    progress_end(&pr);
    print(res, n, &su, as_json);
    if (!all_verified)
        rc = cli_error_code(CLI_EXIT_CHECK, NULL, "depth: a training step did not confirm a "
                            "plan (see above)");
    return rc;
}
