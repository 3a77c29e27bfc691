/*
 * cmd_compare.c - `remat compare MODEL|FILE`: every strategy on one model, in one
 * table shaped like the paper's: peak, reduction from `none`, overhead, bytes offloaded,
 * planning time.
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat compare MODEL|FILE [options]\n\n"
            "Plans the model with every strategy and prints one table: the budget each\n"
            "met, the simulated activation peak, its reduction from `none`, the overhead\n"
            "(recomputed cost / forward cost), the bytes sent to the host tier and the\n"
            "planning time. MODEL is a zoo name;\n"
            "FILE a graph dump (cg_*.txt) or an ONNX model (*.onnx).\n\n"
            "  --budget B|min      the total budget for every strategy (default min: each\n"
            "                      strategy at its own smallest feasible budget)\n"
            "  --strategies LIST   comma-separated subset (default: all)\n"
            "  --time-limit S      seconds for `optimal` (default 60)\n"
            "  --max-lower-sets N  cap for the exact DP (default 100000: its pair loop grows\n"
            "                      as the square; GoogLeNet's 27,358 sets take ~10 s)\n"
            "  --batch N, --input-size HxW, --classes K, --no-aux, --cost flops|kusumoto\n"            "  --layers N, --heads N, --width N, --seq-len N, --vocab N, --dropout P,\n"
            "  --optimizer sgd|adamw   transformers' shape and the optimizer (as for plan)\n"
            "                      as for `remat plan`\n"
            "  --json              an array of objects, one per strategy\n");
}

static bool selected(const char *list, const char *name)
{
    size_t n = strlen(name);

    if (!list)
        return true;
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* The baseline of the reductions: none's peak without a budget (at a budget, none is
 * judged like the others). 0, or an exit code after printing an error. */
static int none_baseline(const struct cli_model *m, size_t *peak)
{
    remat_schedule *ns = NULL;
    remat_sim_result nr;
    remat_status st;
    int rc = 0;

    if ((st = remat_plan(m->tg, &(remat_plan_opts){.strategy = REMAT_STRATEGY_NONE}, &ns,
                         NULL)) ||
        (st = remat_sim_run(m->tg, ns, &nr)))
        rc = cli_error_code(cli_exit_code(st), NULL, "%s: none: %s", m->spec, remat_errmsg());
    else
        *peak = nr.activation_peak_bytes;
    remat_schedule_free(ns);
    return rc;
}

struct compare_cmd {
    struct cli_model m;
    remat_plan_opts base;
    const char *list;
    bool as_json;
};

/* A comma-separated list of strategies: 0, or 1 after printing the unknown one. */
static int check_list(const char *list)
{
    for (const char *p = list; *p;) {
        char name[64];
        size_t n = strcspn(p, ",");

        snprintf(name, sizeof name, "%.*s", (int)n, p);
        if (remat_strategy_from_name(name) == REMAT_STRATEGY_COUNT)
            return cli_error("`remat plan --help` lists the strategies",
                             "compare: unknown strategy '%s'", name);
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The command line into c: 0, -1 after --help, or an exit code after printing an error. */
static int parse_args(struct compare_cmd *c, int argc, char **argv)
{
    const char *v;
    int64_t x;
    int k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return -1;
        } else if (!strcmp(a, "--json")) {
            c->as_json = true;
        } else if (!strcmp(a, "--budget")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_budget(a, v, &c->base))
                return 1;
        } else if (!strcmp(a, "--strategies")) {
            if (!(c->list = cli_value(argc, argv, &i)) || check_list(c->list))
                return 1;
        } else if (!strcmp(a, "--time-limit")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 1, 86400, &x))
                return 1;
            c->base.time_limit = (double)x;
        } else if (!strcmp(a, "--max-lower-sets")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 1, 100000000, &x))
                return 1;
            c->base.max_lower_sets = x;
        } else if ((k = cli_model_option(&c->m, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
        } else if (cli_model_arg("compare", a, &c->m.spec)) {
            return 1;
        }
    }
    if (!c->m.spec) {
        help(stderr);
        return cli_error(NULL, "compare: no model given");
    }
    return 0;
}

/* One strategy's row: its figures, or its error (an object with "error" under --json). */
static void print_row(const struct compare_cmd *c, struct json *j, const char *name,
                      remat_status st, const remat_plan_info *pi, const remat_sim_result *r,
                      size_t none_peak)
{
    if (!c->as_json && st) {
        printf("%-13s %s\n", name, remat_errmsg());
    } else if (!c->as_json) {
        printf("%-13s %10.3f %10.3f %9.1f%% %9.3f %10.3f %9.3f %10d\n", name,
               (double)pi->budget_bytes / 1e9, (double)r->activation_peak_bytes / 1e9,
               100.0 * (1 - (double)r->activation_peak_bytes / (double)none_peak),
               r->overhead, (double)pi->offloaded_bytes / 1e9, pi->plan_seconds, pi->n_blocks);
    } else {
        json_begin(j, NULL, '{');
        json_str(j, "strategy", name);
        json_bool(j, "feasible", st == REMAT_OK);
        if (st) {
            json_str(j, "error", remat_errmsg());
        } else {
            json_u64(j, "budget_bytes", pi->budget_bytes);
            json_u64(j, "activation_budget_bytes", pi->activation_budget_bytes);
            json_u64(j, "activation_peak_bytes", r->activation_peak_bytes);
            json_u64(j, "arena_bytes", pi->arena_bytes);
            json_u64(j, "allocated_bytes", pi->total_bytes);
            json_f64(j, "reduction", 1 - (double)r->activation_peak_bytes / (double)none_peak);
            json_f64(j, "overhead", r->overhead);
            json_u64(j, "offloaded_bytes", pi->offloaded_bytes);
            json_u64(j, "host_peak_bytes", r->host_peak_bytes);
            json_f64(j, "total_seconds", r->total_seconds);
            json_u64(j, "dp_bound_bytes", pi->dp_bound_bytes);
            json_i64(j, "n_lower_sets", pi->n_lower_sets);
            json_i64(j, "n_blocks", pi->n_blocks);
            json_f64(j, "optimality_gap", pi->optimality_gap);
        }
        json_f64(j, "plan_seconds", pi->plan_seconds);
        json_end(j, '}');
    }
    fflush(stdout);
}

static void print_header(const struct compare_cmd *c, struct json *j)
{
    if (c->as_json) {
        json_begin(j, stdout, '[');
        return;
    }
    printf("%s: %d values, %d ops, resident %.3f GB (GB = 10^9 bytes); budgets are "
           "totals, peaks are activations\n", c->m.spec, remat_tgraph_n_planned(c->m.tg),
           remat_tgraph_n_ops(c->m.tg), (double)remat_tgraph_resident_bytes(c->m.tg) / 1e9);
    printf("%-13s %10s %10s %10s %9s %10s %9s %10s\n", "strategy", "budget GB", "peak GB",
           "reduction", "overhead", "offload GB", "plan s", "blocks");
}

int cmd_compare(int argc, char **argv)
{
    struct compare_cmd c = {.m = {.zoo = {.batch = 1}}, .base = {.budget_min = true}};
    struct progress pr;
    size_t none_peak = 0;
    struct json j;
    int rc, n = 0, done = 0;
    char what[128];

    cli_begin(argc, argv);
    if ((rc = parse_args(&c, argc, argv)))
        return rc < 0 ? 0 : rc;
    if ((rc = cli_model_load(&c.m)) || (rc = none_baseline(&c.m, &none_peak)))
        goto out;
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++)
        n += s == REMAT_STRATEGY_NONE || selected(c.list, remat_strategy_name(s));
    snprintf(what, sizeof what, "compare %s", c.m.spec);
    progress_begin(&pr, what, "strategies", n);
    print_header(&c, &j);
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++) {
        remat_plan_opts o = c.base;
        remat_schedule *sched = NULL;
        remat_plan_info pi;
        remat_sim_result r;
        remat_status st;
        const char *name = remat_strategy_name((remat_strategy)s);

        if (s != REMAT_STRATEGY_NONE && !selected(c.list, name))
            continue;
        o.strategy = (remat_strategy)s;
        o.progress = progress_stage; /* the planner's stages on the line */
        o.progress_ud = &pr;
        progress_step(&pr, done, name);
        progress_wait_begin(&pr, name, s == REMAT_STRATEGY_OPTIMAL
                                           ? (o.time_limit > 0 ? o.time_limit : 60) : 0);
        st = remat_plan(c.m.tg, &o, &sched, &pi);
        if (!st)
            st = remat_sim_run(c.m.tg, sched, &r);
        progress_wait_end(&pr);
        progress_clear(&pr);
        /* a rule that does not apply (no blocks, no attention) is left out unless asked */
        if (!(st == REMAT_ERR_UNSUPPORTED && !c.list &&
              (s == REMAT_STRATEGY_BLOCKS || s == REMAT_STRATEGY_SELECTIVE)))
            print_row(&c, &j, name, st, &pi, &r, none_peak);
        progress_step(&pr, ++done, NULL);
        remat_schedule_free(sched);
    }
    progress_end(&pr);
    if (c.as_json)
        json_end(&j, ']');
    rc = 0;
out:
    cli_model_fini(&c.m);
    return rc;
}
