/*
 * cmd_plan.c - `remat plan MODEL|FILE`: build the training graph, plan the step with a
 * strategy, and print what the simulator measures.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat plan MODEL|FILE [options]\n\n"
            "Plans one training step and simulates its memory. MODEL is a zoo name\n"
            "(`remat zoo`); FILE is a graph dump of Kusumoto et al. (cg_*.txt).\n\n"
            "  --batch N           batch size (default 1; not for dumps)\n"
            "  --input-size HxW    input height and width (default: the model's)\n"
            "  --classes K         output classes (default: the model's)\n"
            "  --no-aux            GoogLeNet without its auxiliary classifiers\n"
            "  --strategy S        none (keep what the backward reads; the default)\n"
            "  --cost flops|kusumoto  T_v: forward FLOPs, or 10 per convolution and 1\n"
            "                      otherwise (the default for dumps)\n"
            "  --schedule FILE     write the schedule as JSON\n"
            "  --json              print the figures as one JSON object\n");
}

static int write_schedule(const char *path, const remat_tgraph *tg, const remat_schedule *s)
{
    static const char *const kinds[] = {"fwd", "bwd", "free", "offload", "prefetch", "wait"};
    const remat_step *st = remat_schedule_steps(s);
    FILE *f = fopen(path, "w");
    struct json j;
    char tmp[256];

    if (!f)
        return cli_error(NULL, "cannot write '%s'", path);
    json_begin(&j, f, '{');
    json_key(&j, "steps");
    json_begin(&j, NULL, '[');
    for (size_t i = 0; i < remat_schedule_n_steps(s); i++) {
        json_begin(&j, NULL, '{');
        json_str(&j, "kind", kinds[st[i].kind]);
        json_i64(&j, "id", st[i].id);
        if (st[i].kind >= REMAT_STEP_FREE)
            json_str(&j, "buffer", remat_buffer_name(tg, st[i].id, tmp, sizeof tmp));
        json_end(&j, '}');
    }
    json_end(&j, ']');
    json_end(&j, '}');
    if (fclose(f))
        return cli_error(NULL, "cannot write '%s'", path);
    return 0;
}

static void print_text(const struct cli_model *m, const remat_sim_result *r, double plan_s)
{
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
    printf("strategy         none\n");
    printf("activation peak  %s bytes (%s)\n", cli_commas(r->activation_peak_bytes, a, sizeof a),
           cli_human((double)r->activation_peak_bytes, b, sizeof b));
    printf("resident         %s bytes (%s): parameters, gradients, momentum, inputs\n",
           cli_commas(r->resident_bytes, a, sizeof a),
           cli_human((double)r->resident_bytes, b, sizeof b));
    printf("total peak       %s bytes (%s)\n",
           cli_commas(r->resident_bytes + r->activation_peak_bytes, a, sizeof a),
           cli_human((double)(r->resident_bytes + r->activation_peak_bytes), b, sizeof b));
    printf("nothing freed    %s bytes (2 M(V))\n", cli_commas(r->naive_bytes, a, sizeof a));
    printf("lower limit      %s bytes (largest single step); peak is %.2fx\n",
           cli_commas(r->lower_bound_bytes, a, sizeof a), ratio);
    printf("overhead         %.3f (recomputed cost / forward cost)\n", r->overhead);
    printf("steps            %zu (peak after step %zu)\n", r->n_steps, r->peak_step);
    printf("planning         %.3f s\n", plan_s);
}

static void print_json(const struct cli_model *m, const remat_sim_result *r, double plan_s)
{
    struct json j;

    json_begin(&j, stdout, '{');
    json_str(&j, "model", m->spec);
    if (m->is_dump)
        json_null(&j, "batch");
    else
        json_i64(&j, "batch", m->zoo.batch);
    json_str(&j, "strategy", "none");
    json_i64(&j, "params", remat_tgraph_n_params(m->tg));
    json_u64(&j, "resident_bytes", r->resident_bytes);
    json_u64(&j, "naive_bytes", r->naive_bytes);
    json_u64(&j, "naive_all_bytes", r->naive_all_bytes);
    json_u64(&j, "activation_peak_bytes", r->activation_peak_bytes);
    json_u64(&j, "total_peak_bytes", r->activation_peak_bytes + r->resident_bytes);
    json_u64(&j, "lower_bound_bytes", r->lower_bound_bytes);
    json_f64(&j, "peak_to_lower_bound",
             r->lower_bound_bytes ? (double)r->activation_peak_bytes /
                                        (double)r->lower_bound_bytes : 0);
    json_f64(&j, "forward_flops", remat_tgraph_forward_flops(m->tg));
    json_i64(&j, "n_values", remat_tgraph_n_planned(m->tg));
    json_i64(&j, "n_ops", remat_tgraph_n_ops(m->tg));
    json_u64(&j, "n_steps", r->n_steps);
    json_f64(&j, "overhead", r->overhead);
    json_str(&j, "order", remat_tgraph_is_file_order(m->tg) ? "file" : "topological");
    json_f64(&j, "plan_seconds", plan_s);
    json_end(&j, '}');
}

int cmd_plan(int argc, char **argv)
{
    struct cli_model m = {.zoo = {.batch = 1}};
    const char *strategy = "none", *sched_path = NULL;
    remat_schedule *s = NULL;
    remat_sim_result r;
    bool as_json = false;
    struct timespec t0, t1;
    double secs;
    int rc = 1, k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = true;
        } else if (!strcmp(a, "--strategy")) {
            if (!(strategy = cli_value(argc, argv, &i)))
                return 1;
        } else if (!strcmp(a, "--schedule")) {
            if (!(sched_path = cli_value(argc, argv, &i)))
                return 1;
        } else if ((k = cli_model_option(&m, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error("`remat plan --help` lists the options", "plan: unknown option "
                             "'%s'", a);
        } else if (m.spec) {
            return cli_error(NULL, "plan: more than one model given ('%s' and '%s')", m.spec,
                             a);
        } else {
            m.spec = a;
        }
    }
    if (!m.spec) {
        help(stderr);
        return cli_error(NULL, "plan: no model given");
    }
    if (strcmp(strategy, "none"))
        return cli_error("the strategies available are: none", "plan: unknown strategy '%s'",
                         strategy);
    if (cli_model_load(&m))
        goto out;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (remat_plan_none(m.tg, &s) || remat_sim_run(m.tg, s, &r)) {
        cli_error(NULL, "%s: %s", m.spec, remat_errmsg());
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (sched_path && write_schedule(sched_path, m.tg, s))
        goto out;
    secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (as_json)
        print_json(&m, &r, secs);
    else
        print_text(&m, &r, secs);
    rc = 0;
out:
    remat_schedule_free(s);
    cli_model_fini(&m);
    return rc;
}
