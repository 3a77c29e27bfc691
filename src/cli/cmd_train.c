/*
 * cmd_train.c - `remat train MODEL`: plan the step, then train K steps inside the
 * planned arena and report planned against measured memory.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat train MODEL|FILE.onnx [options]\n\n"
            "Plans one training step, then runs K steps of SGD inside the planned arena\n"
            "and reports the planned and measured peaks. MODEL is a zoo name (`remat zoo`);\n"
            "an ONNX file (opsets 11-17, its output the logits) starts from its weights,\n"
            "with a softmax cross-entropy loss added (--loss softmax-ce, the default and\n"
            "only loss; docs/onnx.md).\n"
            "Inputs and labels are synthetic, drawn from the seed, unless --data is given.\n"
            "REMAT_DEBUG=1 checks every allocation for overlaps with live buffers.\n\n"
            "  --batch N            batch size (default 1)\n"
            "  --steps K            training steps (default 3)\n"
            "  --strategy S         planning strategy (default none; see `remat plan --help`)\n"
            "  --budget B|min       total memory budget (bytes with a unit, or min)\n"
            "  --backend ref|cpu|cuda  kernels: plain C loops, oneDNN, or cuDNN and cuBLAS on\n"
            "                       an NVIDIA GPU (make CUDA=1; default ref)\n"
            "  --threads T          CPU threads (default: all cores)\n"
            "  --host-file FILE     keep the host tier (offloaded values) in this file, mapped\n"
            "                       (default: in memory)\n"
            "  --input-size HxW     input height and width (default: the model's)\n"
            "  --classes K, --no-aux, --base-channels C, --cost flops|kusumoto   as for\n"
            "                       `remat plan`\n"
            "  --seed S             parameters, data and dropout (default 1)\n"
            "  --lr X --momentum X --weight-decay X   SGD (defaults 0.01, 0.9, 1e-4)\n"
            "  --data FILE          images and labels (format: docs/formats.md), used in order\n"
            "  --load FILE          start from saved parameters\n"
            "  --save FILE          save the parameters after training\n"
            "  --json               print the results as one JSON object\n"
            "Planning:\n" CLI_OFFLOAD_HELP);
}

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

int cmd_train(int argc, char **argv)
{
    struct cli_model m = {.zoo = {.batch = 1}};
    remat_plan_opts po = {0};
    remat_train_opts to = remat_train_opts_default();
    const char *strategy = "none", *load = NULL, *save = NULL, *data_path = NULL, *v;
    remat_data *data = NULL;
    float *xb = NULL;
    int32_t *yb = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    remat_plan_info pi;
    remat_algos *al = NULL;
    struct cli_kernels kn;
    remat_train_stats ts;
    remat_sim_result sr;
    double *loss = NULL, *secs = NULL, *sorted = NULL;
    int64_t steps = 3, x;
    bool as_json = false;
    int rc = 1, k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = true;
        } else if (!strcmp(a, "--steps")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 1, 1000000, &steps))
                return 1;
        } else if (!strcmp(a, "--strategy")) {
            if (!(strategy = cli_value(argc, argv, &i)))
                return 1;
        } else if (!strcmp(a, "--budget")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_budget(a, v, &po))
                return 1;
        } else if ((k = cli_backend_option(&to, argc, argv, &i)) != 0 ||
                   (k = cli_offload_option(&po, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
        } else if (!strcmp(a, "--host-file")) {
            if (!(to.host_file = cli_value(argc, argv, &i)))
                return 1;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 0, INT64_MAX, &x))
                return 1;
            to.seed = (uint64_t)x;
        } else if (!strcmp(a, "--lr")) {
            if (!(v = cli_value(argc, argv, &i)) || !parse_f(a, v, &to.lr))
                return 1;
        } else if (!strcmp(a, "--momentum")) {
            if (!(v = cli_value(argc, argv, &i)) || !parse_f(a, v, &to.momentum))
                return 1;
        } else if (!strcmp(a, "--weight-decay")) {
            if (!(v = cli_value(argc, argv, &i)) || !parse_f(a, v, &to.weight_decay))
                return 1;
        } else if (!strcmp(a, "--data")) {
            if (!(data_path = cli_value(argc, argv, &i)))
                return 1;
        } else if (!strcmp(a, "--load")) {
            if (!(load = cli_value(argc, argv, &i)))
                return 1;
        } else if (!strcmp(a, "--save")) {
            if (!(save = cli_value(argc, argv, &i)))
                return 1;
        } else if ((k = cli_model_option(&m, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
        } else if (cli_model_arg("train", a, &m.spec)) {
            return 1;
        }
    }
    if (!m.spec) {
        help(stderr);
        return cli_error(NULL, "train: no model given");
    }
    po.strategy = remat_strategy_from_name(strategy);
    if (po.strategy == REMAT_STRATEGY_COUNT)
        return cli_error("`remat plan --help` lists the strategies", "train: unknown strategy "
                         "'%s'", strategy);
    if (cli_model_load(&m))
        goto out;
    if (m.is_dump) {
        cli_error("train a zoo model", "%s: a graph dump has no shapes or weights to train",
                  m.spec);
        goto out;
    }
    /* The backend's kernels are listed first: the plan chooses them and counts their
     * scratch. */
    if (remat_train_algos(m.g, m.tg, &to, &al) || !(po.algos = al) ||
        remat_plan(m.tg, &po, &s, &pi) || remat_trainer_new(m.g, m.tg, s, &to, &t) ||
        (m.weights && remat_onnx_weights_apply(m.weights, t)) ||
        (load && remat_trainer_load(t, load))) {
        cli_error(NULL, "%s: %s", m.spec, remat_errmsg());
        goto out;
    }
    if (data_path && remat_graph_n_inputs(m.g) != 1) {
        cli_error("train it on synthetic data (no --data)", "%s: --data feeds models with one "
                  "input; this one has %d", m.spec, remat_graph_n_inputs(m.g));
        goto out;
    }
    if (data_path) {
        int64_t chw[3], shape[4];

        if (remat_data_open(data_path, &data)) {
            cli_error(NULL, "%s", remat_errmsg());
            goto out;
        }
        remat_data_sample_shape(data, chw);
        remat_graph_value_shape(m.g, 0, shape); /* the zoo's input is value 0 */
        if (chw[0] != shape[1] || chw[1] != shape[2] || chw[2] != shape[3]) {
            cli_error("give --input-size to match the data", "%s: samples are %lldx%lldx%lld "
                      "but %s takes %lldx%lldx%lld", data_path, (long long)chw[0],
                      (long long)chw[1], (long long)chw[2], m.spec, (long long)shape[1],
                      (long long)shape[2], (long long)shape[3]);
            goto out;
        }
        xb = malloc(sizeof *xb * (size_t)(m.zoo.batch * chw[0] * chw[1] * chw[2]));
        yb = malloc(sizeof *yb * (size_t)m.zoo.batch);
        if (!xb || !yb) {
            cli_error(NULL, "out of memory");
            goto out;
        }
    }
    loss = calloc((size_t)steps, sizeof *loss);
    secs = calloc((size_t)steps, sizeof *secs);
    sorted = calloc((size_t)steps, sizeof *sorted);
    if (!loss || !secs || !sorted) {
        cli_error(NULL, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < steps; i++) {
        double t0 = cli_now();

        const float *inputs[1] = {xb};

        if (data)
            remat_data_batch(data, i * m.zoo.batch, m.zoo.batch, xb, yb);
        if (remat_trainer_step(t, data ? inputs : NULL, yb, &loss[i])) {
            cli_error(NULL, "%s: step %lld: %s", m.spec, (long long)i + 1, remat_errmsg());
            goto out;
        }
        secs[i] = cli_now() - t0;
        fprintf(as_json ? stderr : stdout, "step %lld/%lld  loss %.6f  %.3f s  %.1f images/s\n",
                (long long)i + 1, (long long)steps, loss[i], secs[i],
                (double)m.zoo.batch / secs[i]);
        fflush(as_json ? stderr : stdout);
    }
    if (save && remat_trainer_save(t, save)) {
        cli_error(NULL, "%s", remat_errmsg());
        goto out;
    }
    remat_trainer_stats(t, &ts);
    cli_kernels_count(m.tg, s, al, &kn);
    if (remat_sim_run(m.tg, s, &sr)) {
        cli_error(NULL, "%s", remat_errmsg());
        goto out;
    }
    memcpy(sorted, secs, sizeof *secs * (size_t)steps);
    qsort(sorted, (size_t)steps, sizeof *sorted, cmp_d);
    if (as_json) {
        struct json j;
        char hex[32];

        json_begin(&j, stdout, '{');
        json_str(&j, "model", m.spec);
        json_i64(&j, "batch", m.zoo.batch);
        json_str(&j, "strategy", remat_strategy_name(po.strategy));
        json_str(&j, "backend", remat_backend_name(to.backend));
        json_u64(&j, "planned_peak_bytes", ts.planned_peak_bytes);
        json_u64(&j, "measured_peak_bytes", ts.measured_peak_bytes);
        json_u64(&j, "arena_bytes", ts.arena_bytes);
        cli_kernels_json(&j, al, &kn);
        json_u64(&j, "activation_peak_bytes", ts.planned_peak_bytes);
        json_u64(&j, "resident_bytes", ts.resident_bytes);
        json_u64(&j, "lower_bound_bytes", sr.lower_bound_bytes);
        json_i64(&j, "offloaded_values", pi.n_offloaded);
        json_u64(&j, "planned_host_bytes", ts.planned_host_bytes);
        json_u64(&j, "measured_host_bytes", ts.measured_host_bytes);
        json_u64(&j, "transfer_bytes", ts.transfer_bytes);
        json_f64(&j, "copy_seconds", ts.copy_seconds);
        json_f64(&j, "wait_seconds", ts.wait_seconds);
        json_f64(&j, "peak_to_lower_bound", sr.lower_bound_bytes
                                                ? (double)ts.planned_peak_bytes /
                                                      (double)sr.lower_bound_bytes
                                                : 0);
        json_key(&j, "loss");
        json_begin(&j, NULL, '[');
        for (int64_t i = 0; i < steps; i++)
            json_f64(&j, NULL, loss[i]);
        json_end(&j, ']');
        json_key(&j, "step_seconds");
        json_begin(&j, NULL, '[');
        for (int64_t i = 0; i < steps; i++)
            json_f64(&j, NULL, secs[i]);
        json_end(&j, ']');
        json_f64(&j, "median_step_seconds", sorted[steps / 2]);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)remat_trainer_param_checksum(t));
        json_str(&j, "param_checksum", hex);
        json_end(&j, '}');
    } else {
        char a[32], b[32];

        size_t act = ts.planned_peak_bytes;

        printf("planned peak     %s bytes (activations and the kernels' scratch)\n",
               cli_commas(ts.planned_peak_bytes, a, sizeof a));
        printf("measured peak    %s bytes\n", cli_commas(ts.measured_peak_bytes, a, sizeof a));
        cli_kernels_text(al, &kn, pi.scratch_reserve_bytes);
        printf("arena            %s bytes (%.3fx the activation peak)\n",
               cli_commas(ts.arena_bytes, a, sizeof a),
               act ? (double)ts.arena_bytes / (double)act : 0);
        printf("resident         %s bytes (%s)\n", cli_commas(ts.resident_bytes, a, sizeof a),
               cli_human((double)ts.resident_bytes, b, sizeof b));
        printf("lower limit      %s bytes (the largest single step); the activation peak "
               "is %.2fx\n", cli_commas(sr.lower_bound_bytes, a, sizeof a),
               sr.lower_bound_bytes ? (double)act / (double)sr.lower_bound_bytes : 0);
        if (pi.n_offloaded)
            printf("host tier        %d values offloaded; planned %s bytes, measured %s; "
                   "copies %.3f s, %.3f s waited (%lld steps)\n", pi.n_offloaded,
                   cli_commas(ts.planned_host_bytes, a, sizeof a),
                   cli_commas(ts.measured_host_bytes, b, sizeof b), ts.copy_seconds,
                   ts.wait_seconds, (long long)steps);
        printf("median step      %.3f s\n", sorted[steps / 2]);
        printf("param checksum   %016llx\n", (unsigned long long)remat_trainer_param_checksum(t));
    }
    rc = 0;
out:
    remat_data_free(data);
    free(xb);
    free(yb);
    free(loss);
    free(secs);
    free(sorted);
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_algos_free(al);
    cli_model_fini(&m);
    return rc;
}
