/*
 * cmd_plan.c - `remat plan MODEL|FILE`: build the training graph, plan the step with a
 * strategy, and print what the simulator measures.
 */
#include "cli/cli.h"
#include "dist/dist.h"
#include "cli/progress.h"
#include "io/onnx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat plan MODEL|FILE [options]\n\n"
            "Plans one training step and simulates its memory. MODEL is a zoo name\n"
            "(`remat zoo`); FILE is a graph dump of Kusumoto et al. (cg_*.txt) or an ONNX\n"
            "model (*.onnx, docs/onnx.md).\n\n"
            "  --batch N           batch size (default 1; not for dumps)\n"
            "  --input-size HxW    input height and width (default: the model's)\n"
            "  --classes K         output classes (default: the model's)\n"
            "  --no-aux            GoogLeNet without its auxiliary classifiers\n"
            "  --base-channels C   U-Net's first-level channels (default 64)\n"
            "  --layers N, --heads N, --width N, --seq-len N, --vocab N, --dropout P\n"
            "                      transformers (gpt2, bert-base): blocks, attention heads,\n"
            "                      hidden width, tokens per sequence, vocabulary, dropout\n"
            "                      (defaults: the model's; --batch counts sequences)\n"
            "  --optimizer sgd|adamw  the optimizer whose state is resident (default sgd)\n"
            "  --ranks N, --accumulate K, --shard-optimizer   what one process of `mpirun\n"
            "                      -np N remat train` keeps resident (docs/distributed.md)\n"
            "  --bucket B          with --ranks: gradient bytes reduced as one bucket (25MiB)\n"
            "  --strategy S        none (the default: keep what the backward reads),\n"
            "                      approx-tc, approx-mc, exact-tc, exact-mc (Kusumoto et al.),\n"
            "                      chen-sqrtn, chen-greedy, superneurons (offloads its\n"
            "                      checkpoints when they do not fit), optimal, hybrid (keep,\n"
            "                      recompute or offload each value: least simulated time)\n"
            "  --budget B|min      total memory: bytes with a unit (4GiB, 512MB) or min, the\n"
            "                      smallest budget the strategy can meet; resident bytes\n"
            "                      (parameters, gradients, optimizer state, inputs) count in it\n"
            "  --authors-lattice   exact-tc/exact-mc: only the chains the authors' solver\n"
            "                      reaches (its depth-first numbering of the lower sets);\n"
            "                      reproduces their figures, never beats the default\n"
            "  --authors-bound     the DPs: the authors' bound of a block's peak instead\n"
            "                      of the simulator's model (reproduces their budgets)\n"
            "  --coarse-pairs N|never  approx-tc/-mc: past N pairs of lower sets within the\n"
            "                      budget, long blocks join only coarse sets, where the\n"
            "                      graph narrows (far faster on graphs of thousands of\n"
            "                      nodes); default: where the budget's window is wide on a\n"
            "                      large family (docs/planners.md); never: every pair, the\n"
            "                      flat DP that this is judged by; 1: always\n"
            "  --dp-within F|exact  approx-tc/exact-tc: take a chain proven within the\n"
            "                      fraction F of the least recomputation over the DP's\n"
            "                      lower sets where a beam finds one (default 0.001 past\n"
            "                      1,000 planned values: several times faster there);\n"
            "                      exact: always the least\n"
            "  --max-lower-sets N  cap for the exact DP (default 100000: its pair loop grows\n"
            "                      as the square; GoogLeNet's 27,358 sets take ~10 s)\n"
            "  --time-limit S      seconds for `optimal` (default 60)\n"
            "  --trace FILE        write the memory timeline as a Chrome trace (Perfetto)\n"
            "  --cost flops|kusumoto  T_v: forward FLOPs, or 10 per convolution and 1\n"
            "                      otherwise (the default for dumps)\n"
            "  --backend ref|cpu|cuda  choose that backend's kernels (per convolution the fastest\n"
            "                      algorithm whose scratch fits), their scratch counted in\n"
            "                      the peak as `remat train` will hold it\n"
            "  --threads T         the cpu backend's threads (its scratch depends on them)\n"
            "  --host-file FILE    training will keep the host tier in this file: with the\n"
            "                      cpu or ref backend, offloading is allowed only then (an\n"
            "                      in-memory host tier is the same RAM as the arena)\n"
            "  --reproducible      with --backend: each convolution's algorithm fixed (its\n"
            "                      fastest) whatever the budget, so that any two plans of\n"
            "                      a model train to the same bits\n"
            "  --schedule FILE     write the schedule as JSON\n" CLI_OFFLOAD_HELP
            "  --check             an ONNX model: report which op types remat lacks (each\n"
            "                      with its count and first node) and whether the whole\n"
            "                      model reads; exit 0 when it does, 1 otherwise\n"
            "  --json              print the figures as one JSON object\n");
}

static int write_schedule(const char *path, const remat_tgraph *tg, const remat_schedule *s,
                          const remat_algos *al)
{
    static const char *const kinds[] = {"fwd", "bwd", "free", "offload", "prefetch", "wait"};
    const remat_step *st = remat_schedule_steps(s);
    FILE *f = fopen(path, "w");
    struct json j;
    char tmp[256];
    size_t scratch;

    if (!f)
        return cli_error_code(CLI_EXIT_FAILED, NULL, "cannot write '%s'", path);
    json_begin(&j, f, '{');
    json_key(&j, "steps");
    json_begin(&j, NULL, '[');
    for (size_t i = 0; i < remat_schedule_n_steps(s); i++) {
        json_begin(&j, NULL, '{');
        json_str(&j, "kind", kinds[st[i].kind]);
        json_i64(&j, "id", st[i].id);
        if (st[i].kind >= REMAT_STEP_FREE)
            json_str(&j, "buffer", remat_buffer_name(tg, st[i].id, tmp, sizeof tmp));
        if (remat_schedule_step_algo(s, i, &scratch) >= 0) {
            json_str(&j, "algo", remat_algos_name(al, remat_schedule_step_algo(s, i, NULL)));
            json_u64(&j, "scratch_bytes", scratch);
        }
        json_end(&j, '}');
    }
    json_end(&j, ']');
    json_end(&j, '}');
    if (fclose(f))
        return cli_error_code(CLI_EXIT_FAILED, NULL, "cannot write '%s'", path);
    return 0;
}

static void print_text(const struct cli_model *m, const remat_sim_result *r,
                       const remat_plan_info *pi, const remat_plan_opts *po,
                       size_t n_recomputed, const remat_algos *al, const struct cli_kernels *kn)
{
    remat_strategy strat = po->strategy;
    char a[32], b[32];
    double ratio = r->lower_bound_bytes ? (double)r->activation_peak_bytes /
                                              (double)r->lower_bound_bytes : 0;

    if (m->is_dump)
        printf("model            %s (graph dump, %s order)\n", m->spec,
               remat_tgraph_is_file_order(m->tg) ? "file" : "topological");
    else
        printf("model            %s, batch %lld\n", m->spec, (long long)m->zoo.batch);
    printf("parameters       %s\n",
           cli_commas((uint64_t)remat_tgraph_n_params(m->tg), a, sizeof a));
    printf("values           %d planned, %d ops\n", remat_tgraph_n_planned(m->tg),
           remat_tgraph_n_ops(m->tg));
    if (!m->is_dump)
        printf("forward          %.2f GFLOPs\n", remat_tgraph_forward_flops(m->tg) / 1e9);
    printf("strategy         %s\n", remat_strategy_name(strat));
    if (pi->budget_bytes)
        printf("budget           %s bytes total, %s for activations\n",
               cli_commas(pi->budget_bytes, a, sizeof a),
               cli_commas(pi->activation_budget_bytes, b, sizeof b));
    printf("arena            %s bytes packed (%.3fx the activation peak)\n",
           cli_commas(pi->arena_bytes, a, sizeof a),
           r->activation_peak_bytes ? (double)pi->arena_bytes /
                                          (double)r->activation_peak_bytes : 0);
    if (pi->n_moves)
        printf("moves            %d live buffers moved inside the arena per step to keep "
               "it within the budget, %s bytes\n", pi->n_moves,
               cli_commas(pi->moved_bytes, a, sizeof a));
    printf("allocated        %s bytes (%s): arena + resident%s\n",
           cli_commas(pi->total_bytes, a, sizeof a), cli_human((double)pi->total_bytes, b, sizeof b),
           pi->host_arena_bytes ? " (the host tier apart)" : "");
    if (pi->n_blocks)
        printf("plan             %d blocks from %lld lower sets; DP bound %s bytes\n",
               pi->n_blocks, (long long)pi->n_lower_sets,
               cli_commas(pi->dp_bound_bytes, a, sizeof a));
    if (pi->kept_all)
        printf("plan             `none`'s: every value the backward reads kept, nothing "
               "recomputed (it fits, and the DP's chain is no better)\n");
    if (pi->n_blocks && pi->n_dp_sets > 0 && pi->n_dp_sets < pi->n_lower_sets)
        printf("DP sets          the chain chosen among %s of them in two stages, where the "
               "graph narrows (--coarse-pairs never: among all)\n",
               cli_commas((size_t)pi->n_dp_sets, a, sizeof a));
    if (pi->dp_within > 0)
        printf("DP chain         proven within %g%% of the least recomputation over the "
               "lower sets searched (--dp-within exact: the least)\n", 100 * pi->dp_within);
    printf("recomputed       %zu forward ops run again\n", n_recomputed);
    if (strat == REMAT_STRATEGY_OPTIMAL)
        printf("MILP gap         %.3f (0: proven optimal; -1: another strategy's plan was "
               "better)\n", pi->optimality_gap);
    printf("activation peak  %s bytes (%s)%s\n", cli_commas(r->activation_peak_bytes, a, sizeof a),
           cli_human((double)r->activation_peak_bytes, b, sizeof b),
           al ? ", the kernels' scratch included" : "");
    if (al)
        cli_kernels_text(al, kn, pi->scratch_reserve_bytes);
    printf("resident         %s bytes (%s): parameters, gradients, optimizer state, inputs\n",
           cli_commas(r->resident_bytes, a, sizeof a),
           cli_human((double)r->resident_bytes, b, sizeof b));
    printf("total peak       %s bytes (%s)\n",
           cli_commas(r->resident_bytes + r->activation_peak_bytes, a, sizeof a),
           cli_human((double)(r->resident_bytes + r->activation_peak_bytes), b, sizeof b));
    printf("nothing freed    %s bytes (2 M(V))\n", cli_commas(r->naive_bytes, a, sizeof a));
    printf("lower limit      %s bytes (largest single step); peak is %.2fx\n",
           cli_commas(r->lower_bound_bytes, a, sizeof a), ratio);
    printf("overhead         %.3f (recomputed cost / forward cost)\n", r->overhead);
    if (pi->n_offloaded)
        printf("host tier        %d values offloaded (%s bytes), host peak %s bytes\n",
               pi->n_offloaded, cli_commas(pi->offloaded_bytes, a, sizeof a),
               cli_commas(r->host_peak_bytes, b, sizeof b));
    printf("time model       %.4f s: compute %.4f s, copies %.4f s (%.0f%% hidden), stalls "
           "%.4f s\n", r->total_seconds, r->compute_seconds, r->transfer_seconds,
           r->transfer_seconds > 0 ? 100 * (1 - r->stall_seconds / r->transfer_seconds) : 100,
           r->stall_seconds);
    printf("                 at %.1f GFLOP/s, copies at %.1f GB/s taking %.0f%% of the compute%s\n",
           (po->flops > 0 ? po->flops : REMAT_DEFAULT_FLOPS) / 1e9,
           (po->bandwidth > 0 ? po->bandwidth : REMAT_DEFAULT_BANDWIDTH) / 1e9,
           100 * po->copy_slowdown, "");
    printf("steps            %zu (peak after step %zu)\n", r->n_steps, r->peak_step);
    printf("planning         %.3f s\n", pi->plan_seconds);
}

static void print_json(const struct cli_model *m, const remat_sim_result *r,
                       const remat_plan_info *pi, const remat_plan_opts *po,
                       size_t n_recomputed, const remat_algos *al, const struct cli_kernels *kn)
{
    remat_strategy strat = po->strategy;
    struct json j;

    json_begin(&j, stdout, '{');
    json_str(&j, "model", m->spec);
    if (m->is_dump)
        json_null(&j, "batch");
    else
        json_i64(&j, "batch", m->zoo.batch);
    json_str(&j, "strategy", remat_strategy_name(strat));
    json_bool(&j, "feasible", pi->feasible);
    if (pi->budget_bytes)
        json_u64(&j, "budget_bytes", pi->budget_bytes);
    else
        json_null(&j, "budget_bytes");
    json_u64(&j, "activation_budget_bytes", pi->activation_budget_bytes);
    json_u64(&j, "dp_bound_bytes", pi->dp_bound_bytes);
    json_i64(&j, "n_lower_sets", pi->n_lower_sets);
    json_i64(&j, "n_dp_sets", pi->n_dp_sets);
    json_i64(&j, "n_blocks", pi->n_blocks);
    json_bool(&j, "kept_all", pi->kept_all);
    json_f64(&j, "dp_within", pi->dp_within);
    json_u64(&j, "n_recomputed", n_recomputed);
    if (strat == REMAT_STRATEGY_OPTIMAL)
        json_f64(&j, "optimality_gap", pi->optimality_gap);
    json_i64(&j, "params", remat_tgraph_n_params(m->tg));
    json_u64(&j, "resident_bytes", r->resident_bytes);
    json_u64(&j, "naive_bytes", r->naive_bytes);
    json_u64(&j, "naive_all_bytes", r->naive_all_bytes);
    json_u64(&j, "activation_peak_bytes", r->activation_peak_bytes);
    json_f64(&j, "model_flops", po->flops > 0 ? po->flops : REMAT_DEFAULT_FLOPS);
    json_f64(&j, "model_bandwidth", po->bandwidth > 0 ? po->bandwidth : REMAT_DEFAULT_BANDWIDTH);
    json_f64(&j, "model_copy_slowdown", po->copy_slowdown);
    cli_kernels_json(&j, al, kn);
    json_u64(&j, "scratch_reserve_bytes", pi->scratch_reserve_bytes);
    json_u64(&j, "total_peak_bytes", r->activation_peak_bytes + r->resident_bytes);
    json_u64(&j, "arena_bytes", pi->arena_bytes);
    json_f64(&j, "arena_ratio", r->activation_peak_bytes ? (double)pi->arena_bytes /
                                                              (double)r->activation_peak_bytes : 0);
    json_u64(&j, "host_arena_bytes", pi->host_arena_bytes);
    json_i64(&j, "moves", pi->n_moves);
    json_u64(&j, "moved_bytes", pi->moved_bytes);
    json_u64(&j, "allocated_bytes", pi->total_bytes);
    json_u64(&j, "lower_bound_bytes", r->lower_bound_bytes);
    json_f64(&j, "peak_to_lower_bound",
             r->lower_bound_bytes ? (double)r->activation_peak_bytes /
                                        (double)r->lower_bound_bytes : 0);
    json_i64(&j, "offloaded_values", pi->n_offloaded);
    json_u64(&j, "offloaded_bytes", pi->offloaded_bytes);
    json_u64(&j, "host_peak_bytes", r->host_peak_bytes);
    json_u64(&j, "transfer_bytes", r->transfer_bytes);
    json_f64(&j, "compute_seconds", r->compute_seconds);
    json_f64(&j, "transfer_seconds", r->transfer_seconds);
    json_f64(&j, "stall_seconds", r->stall_seconds);
    json_f64(&j, "total_seconds", r->total_seconds);
    json_f64(&j, "forward_flops", remat_tgraph_forward_flops(m->tg));
    json_i64(&j, "n_values", remat_tgraph_n_planned(m->tg));
    json_i64(&j, "n_ops", remat_tgraph_n_ops(m->tg));
    json_u64(&j, "n_steps", r->n_steps);
    json_f64(&j, "overhead", r->overhead);
    json_str(&j, "order", remat_tgraph_is_file_order(m->tg) ? "file" : "topological");
    json_f64(&j, "plan_seconds", pi->plan_seconds);
    json_end(&j, '}');
}

/* A Chrome trace-event file: one counter event per step (live activation bytes). */
static int write_trace(const char *path, const remat_tgraph *tg, const remat_schedule *s)
{
    size_t n = remat_schedule_n_steps(s), *live = calloc(n + 1, sizeof *live);
    const remat_step *st = remat_schedule_steps(s);
    static const char *const kinds[] = {"fwd", "bwd", "free", "offload", "prefetch", "wait"};
    FILE *f;

    if (!live)
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory writing the trace");
    if (remat_sim_timeline(tg, s, live, n)) {
        free(live);
        return cli_error_code(CLI_EXIT_CHECK, NULL, "%s", remat_errmsg());
    }
    f = fopen(path, "w");
    if (!f) {
        free(live);
        return cli_error_code(CLI_EXIT_FAILED, NULL, "cannot write '%s'", path);
    }
    fprintf(f, "{\"traceEvents\":[\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "{\"name\":\"activation bytes\",\"ph\":\"C\",\"ts\":%zu,\"pid\":1,"
                "\"args\":{\"bytes\":%zu}},\n{\"name\":\"%s %d\",\"ph\":\"X\",\"ts\":%zu,"
                "\"dur\":1,\"pid\":1,\"tid\":1},\n", i, live[i], kinds[st[i].kind], st[i].id, i);
    fprintf(f, "{\"name\":\"end\",\"ph\":\"i\",\"ts\":%zu,\"pid\":1,\"s\":\"g\"}]}\n", n);
    free(live);
    if (fclose(f))
        return cli_error_code(CLI_EXIT_FAILED, NULL, "cannot write '%s'", path);
    return 0;
}

static size_t count_recomputed(const remat_tgraph *tg, const remat_schedule *s)
{
    int32_t n_ops = remat_tgraph_n_ops(tg);
    unsigned char *seen = calloc((size_t)n_ops + 1, 1);
    const remat_step *st = remat_schedule_steps(s);
    size_t r = 0;

    if (!seen)
        return 0;
    for (size_t i = 0; i < remat_schedule_n_steps(s); i++)
        if (st[i].kind == REMAT_STEP_FWD && seen[st[i].id]++)
            r++;
    free(seen);
    return r;
}

/* The command's options. */
struct plan_cmd {
    struct cli_model m;
    const char *strategy, *sched_path, *trace_path;
    remat_plan_opts po;
    remat_train_opts to;
    bool backend, as_json, check;
};

/* One option at argv[*i] (advancing *i past its value): 1 taken, 0 not an option of
 * plan's own, -1 bad (printed). */
static int plan_option(struct plan_cmd *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    int64_t secs;
    int k;

    if (!strcmp(a, "--json"))
        c->as_json = true;
    else if (!strcmp(a, "--check"))
        c->check = true;
    else if (!strcmp(a, "--strategy"))
        return (c->strategy = cli_value(argc, argv, i)) ? 1 : -1;
    else if (!strcmp(a, "--budget"))
        return (v = cli_value(argc, argv, i)) && cli_parse_budget(a, v, &c->po) ? 1 : -1;
    else if (!strcmp(a, "--coarse-pairs")) {
        if (!(v = cli_value(argc, argv, i)))
            return -1;
        if (!strcmp(v, "never"))
            return c->po.coarse_pairs = -1, 1;
        if (strspn(v, "0123456789") != strlen(v) || !*v) {
            cli_error(NULL, "%s: '%s' is neither a number of pairs (1 or more) nor 'never'",
                      a, v);
            return -1;
        }
        return cli_parse_i64(a, v, 1, INT64_MAX, &c->po.coarse_pairs) ? 1 : -1;
    } else if (!strcmp(a, "--dp-within")) {
        char *e;
        double f;

        if (!(v = cli_value(argc, argv, i)))
            return -1;
        if (!strcmp(v, "exact"))
            return c->po.dp_within = -1, 1;
        errno = 0;
        f = strtod(v, &e);
        if (e == v || *e || errno || !(f > 0 && f < 1)) {
            cli_error("give a fraction such as 0.001 (0.1%), or 'exact'",
                      "%s: '%s' is neither a fraction between 0 and 1 nor 'exact'", a, v);
            return -1;
        }
        return c->po.dp_within = f, 1;
    } else if (!strcmp(a, "--max-lower-sets"))
        return (v = cli_value(argc, argv, i)) &&
               cli_parse_i64(a, v, 1, 100000000, &c->po.max_lower_sets) ? 1 : -1;
    else if (!strcmp(a, "--time-limit"))
        return (v = cli_value(argc, argv, i)) && cli_parse_i64(a, v, 1, 86400, &secs)
                   ? (c->po.time_limit = (double)secs, 1) : -1;
    else if ((k = cli_backend_option(&c->to, argc, argv, i)) != 0)
        return c->backend = c->backend || !strcmp(a, "--backend"), k;
    else if ((k = cli_offload_option(&c->po, argc, argv, i)) != 0)
        return k;
    else if (!strcmp(a, "--host-file"))
        return (c->to.host_file = cli_value(argc, argv, i)) ? 1 : -1;
    else if (!strcmp(a, "--reproducible"))
        c->po.reproducible = true;
    else if (!strcmp(a, "--authors-lattice"))
        c->po.authors_lattice = true;
    else if (!strcmp(a, "--authors-bound"))
        c->po.authors_bound = true;
    else if (!strcmp(a, "--ranks") || !strcmp(a, "--accumulate"))
        return (v = cli_value(argc, argv, i)) && cli_parse_i64(a, v, 1, 1 << 20, &secs)
                   ? (*(a[2] == 'r' ? &c->m.topts.ranks : &c->m.topts.accumulate) =
                          (int32_t)secs, 1) : -1;
    else if (!strcmp(a, "--shard-optimizer"))
        c->m.topts.shard_optimizer = true;
    else if (!strcmp(a, "--bucket"))
        return (v = cli_value(argc, argv, i)) && dist_parse_bucket(a, v, &c->m.topts) ? 1 : -1;
    else if (!strcmp(a, "--schedule"))
        return (c->sched_path = cli_value(argc, argv, i)) ? 1 : -1;
    else if (!strcmp(a, "--trace"))
        return (c->trace_path = cli_value(argc, argv, i)) ? 1 : -1;
    else
        return cli_model_option(&c->m, argc, argv, i);
    return 1;
}

/* The command line into c: 0, -1 after --help, or an exit code after printing an error. */
static int parse_args(struct plan_cmd *c, int argc, char **argv)
{
    int k;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return -1;
        }
        if ((k = plan_option(c, argc, argv, &i)) < 0)
            return 1;
        if (!k && cli_model_arg("plan", argv[i], &c->m.spec))
            return 1;
    }
    if (!c->m.spec) {
        help(stderr);
        return cli_error(NULL, "plan: no model given");
    }
    c->po.strategy = remat_strategy_from_name(c->strategy);
    if (c->po.strategy == REMAT_STRATEGY_COUNT)
        return cli_error("the strategies: none, approx-tc, approx-mc, exact-tc, exact-mc, "
                         "chen-sqrtn, chen-greedy, superneurons, optimal, hybrid",
                         "plan: unknown strategy '%s'", c->strategy);
    if (c->po.authors_lattice && c->po.strategy != REMAT_STRATEGY_EXACT_TC &&
        c->po.strategy != REMAT_STRATEGY_EXACT_MC)
        return cli_error(NULL, "plan: --authors-lattice applies to exact-tc and exact-mc, "
                         "not %s", c->strategy);
    if (!c->backend && c->po.conv_algo && strcmp(c->po.conv_algo, "fit"))
        return cli_error(NULL, "plan: --conv-algo %s needs --backend cpu", c->po.conv_algo);
    return cli_need_budget("plan", &c->po);
}

/* remat_plan with the progress line: the strategy and its time (of at most the MILP's
 * limit for optimal). */
static remat_status plan_with_progress(const struct plan_cmd *c, remat_schedule **s,
                                       remat_plan_info *pi)
{
    remat_plan_opts po = c->po;
    struct progress pr;
    char what[128];
    remat_status st;

    snprintf(what, sizeof what, "plan %s", c->m.spec);
    progress_begin(&pr, what, "", 0);
    progress_wait_begin(&pr, remat_strategy_name(c->po.strategy),
                        c->po.strategy == REMAT_STRATEGY_OPTIMAL
                            ? (c->po.time_limit > 0 ? c->po.time_limit : 60) : 0);
    po.progress = progress_stage;
    po.progress_ud = &pr;
    st = remat_plan(c->m.tg, &po, s, pi);
    progress_end(&pr);
    return st;
}

/* --check: the coverage report of an ONNX file, as text or JSON; 0 when every node maps
 * and the model reads, else the exit code of the read's failure. */
static int check_onnx(const struct plan_cmd *c)
{
    static struct onnx_cover cv;
    const char *dot = strrchr(c->m.spec, '.');
    remat_onnx_opts oo = {.batch = c->m.batch_given ? c->m.zoo.batch : 0};
    remat_status st;
    struct json j;

    if (!dot || strcmp(dot, ".onnx"))
        return cli_error("--check reads an ONNX model (*.onnx)", "plan: --check applies to "
                         "ONNX files, not '%s'", c->m.spec);
    memset(&cv, 0, sizeof cv);
    st = onnx_check(c->m.spec, &oo, &cv);
    if (cv.opset < 0 && st) /* not an ONNX model we could open */
        return cli_error_code(cli_exit_code(st), NULL, "%s", remat_errmsg());
    if (c->as_json) {
        json_begin(&j, stdout, '{');
        json_str(&j, "model", c->m.spec);
        json_i64(&j, "opset", cv.opset);
        json_i64(&j, "nodes", (int64_t)cv.n_nodes);
        json_bool(&j, "supported", st == REMAT_OK);
        json_key(&j, "unsupported");
        json_begin(&j, NULL, '[');
        for (size_t k = 0; k < cv.n_gaps; k++) {
            json_begin(&j, NULL, '{');
            json_str(&j, "op_type", cv.gap[k].type);
            json_str(&j, "domain", cv.gap[k].domain);
            json_i64(&j, "count", (int64_t)cv.gap[k].count);
            json_i64(&j, "first_node", (int64_t)cv.gap[k].first);
            json_str(&j, "first_name", cv.gap[k].first_name);
            json_end(&j, '}');
        }
        json_end(&j, ']');
        json_i64(&j, "more_types", (int64_t)cv.more);
        if (st)
            json_str(&j, "error", remat_errmsg());
        else
            json_i64(&j, "ops", cv.n_ops);
        json_end(&j, '}');
        return cli_exit_code(st);
    }
    printf("model            %s, opset %d, %zu nodes\n", c->m.spec, cv.opset, cv.n_nodes);
    if (!cv.n_gaps)
        printf("coverage         every op type maps\n");
    for (size_t k = 0; k < cv.n_gaps; k++)
        printf("%-16s %s%s%s x%zu (first: node %zu '%s')\n", k ? "" : "unsupported",
               cv.gap[k].domain, *cv.gap[k].domain ? ":" : "", cv.gap[k].type,
               cv.gap[k].count, cv.gap[k].first, cv.gap[k].first_name);
    if (cv.more)
        printf("                 and %zu more op types\n", cv.more);
    if (!st)
        printf("read             ok: %d remat ops\n", cv.n_ops);
    else if (!cv.n_gaps)
        printf("read             refused: %s\n", remat_errmsg());
    return cli_exit_code(st);
}

int cmd_plan(int argc, char **argv)
{
    struct plan_cmd c = {.m = {.zoo = {.batch = 1}}, .strategy = "none",
                         .to = remat_train_opts_default()};
    remat_plan_info pi;
    remat_algos *al = NULL;
    struct cli_kernels kn;
    remat_schedule *s = NULL;
    remat_sim_result r;
    remat_status st;
    int rc;

    cli_begin(argc, argv);
    if ((rc = parse_args(&c, argc, argv)))
        return rc < 0 ? 0 : rc;
    if (c.check)
        return check_onnx(&c);
    if ((rc = cli_model_load(&c.m)))
        goto out;
    rc = 1;
    if (c.backend && c.m.is_dump) {
        cli_error(NULL, "%s: --backend needs a model with shapes, not a graph dump", c.m.spec);
        goto out;
    }
    if (c.backend && (rc = cli_time_model(&c.to, &c.po)))
        goto out;
    rc = 1;
    if (c.backend && (st = remat_train_algos(c.m.g, c.m.tg, &c.to, &al))) {
        rc = cli_error_code(cli_exit_code(st), NULL, "%s: %s", c.m.spec, remat_errmsg());
        goto out;
    }
    c.po.algos = al;
    c.po.host_in_budget = c.backend && c.to.backend != REMAT_BACKEND_CUDA && !c.to.host_file;
    c.po.whole_pages = c.backend && c.to.backend != REMAT_BACKEND_CUDA;
    if ((st = plan_with_progress(&c, &s, &pi)) ||
        (st = remat_sim_run_opts(c.m.tg, s, &(remat_sim_opts){c.po.bandwidth, c.po.flops,
                                                              c.po.copy_slowdown}, &r))) {
        rc = cli_error_code(cli_exit_code(st), NULL, "%s: %s", c.m.spec, remat_errmsg());
        goto out;
    }
    cli_kernels_count(c.m.tg, s, al, &kn);
    if ((c.sched_path && (rc = write_schedule(c.sched_path, c.m.tg, s, al))) ||
        (c.trace_path && (rc = write_trace(c.trace_path, c.m.tg, s))))
        goto out;
    if (c.as_json)
        print_json(&c.m, &r, &pi, &c.po, count_recomputed(c.m.tg, s), al, &kn);
    else
        print_text(&c.m, &r, &pi, &c.po, count_recomputed(c.m.tg, s), al, &kn);
    rc = 0;
out:
    remat_schedule_free(s);
    remat_algos_free(al);
    cli_model_fini(&c.m);
    return rc;
}
