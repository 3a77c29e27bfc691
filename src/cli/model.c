/*
 * model.c - turning a MODEL|FILE argument and its options into a training graph.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The transformers' options (--layers ... --vocab, --dropout): 1 when argv[*i] was one,
 * 0 when not, -1 on a bad value. */
static int transformer_option(struct cli_model *m, int argc, char **argv, int *i)
{
    static const char *const names[5] = {"--layers", "--heads", "--width", "--seq-len",
                                         "--vocab"};
    int64_t *fields[5] = {&m->zoo.layers, &m->zoo.heads, &m->zoo.hidden, &m->zoo.seq_len,
                          &m->zoo.vocab};
    const char *a = argv[*i], *v;
    char *end;
    double p;

    for (int k = 0; k < 5; k++)
        if (!strcmp(a, names[k]))
            return (v = cli_value(argc, argv, i)) && cli_parse_i64(a, v, 1, 1 << 24, fields[k])
                   ? 1 : -1;
    if (strcmp(a, "--dropout"))
        return 0;
    if (!(v = cli_value(argc, argv, i)))
        return -1;
    p = strtod(v, &end);
    if (end == v || *end || !(p >= 0 && p < 1))
        return cli_error("a probability in [0, 1)", "--dropout: '%s' is not a dropout "
                         "probability", v), -1;
    m->zoo.dropout = p == 0 ? -1.0f : (float)p; /* the zoo's 0 is "the default" */
    return 1;
}

/* --optimizer sgd|adamw: the state it keeps is resident. */
static int optimizer_option(struct cli_model *m, int argc, char **argv, int *i)
{
    const char *v;

    if (strcmp(argv[*i], "--optimizer"))
        return 0;
    if (!(v = cli_value(argc, argv, i)))
        return -1;
    if (!strcmp(v, "sgd"))
        m->topts.optimizer = REMAT_OPTIMIZER_SGD;
    else if (!strcmp(v, "adamw"))
        m->topts.optimizer = REMAT_OPTIMIZER_ADAMW;
    else
        return cli_error("--optimizer is sgd (with momentum) or adamw", "unknown optimizer "
                         "'%s'", v), -1;
    return 1;
}

int cli_model_option(struct cli_model *m, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    int64_t x;
    int k;

    if ((k = transformer_option(m, argc, argv, i)) != 0 ||
        (k = optimizer_option(m, argc, argv, i)) != 0)
        return k;
    if (!strcmp(a, "--batch")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 1 << 20, &x))
            return -1;
        m->zoo.batch = x;
        m->batch_given = true;
    } else if (!strcmp(a, "--input-size")) {
        if (!(v = cli_value(argc, argv, i)) ||
            !cli_parse_hw(a, v, &m->zoo.height, &m->zoo.width))
            return -1;
        m->size_given = true;
    } else if (!strcmp(a, "--classes")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 1 << 24, &x))
            return -1;
        m->zoo.classes = x;
    } else if (!strcmp(a, "--base-channels")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 1 << 16, &x))
            return -1;
        m->zoo.base_channels = x;
    } else if (!strcmp(a, "--no-aux")) {
        m->zoo.aux = -1;
    } else if (!strcmp(a, "--cost")) {
        if (!(v = cli_value(argc, argv, i)))
            return -1;
        if (!strcmp(v, "flops"))
            m->topts.cost = REMAT_COST_FLOPS;
        else if (!strcmp(v, "kusumoto"))
            m->topts.cost = REMAT_COST_KUSUMOTO;
        else
            return cli_error("--cost is flops (the default for models) or kusumoto (10 per "
                             "convolution, 1 otherwise; the default for graph dumps)",
                             "unknown cost model '%s'", v), -1;
    } else {
        return 0;
    }
    return 1;
}

/* The options that shape a zoo model, which a file fixes itself: the first one given,
 * or NULL. */
static const char *zoo_option_given(const struct cli_model *m)
{
    if (m->zoo.classes)
        return "--classes";
    if (m->zoo.aux)
        return "--no-aux";
    if (m->zoo.base_channels)
        return "--base-channels";
    if (m->zoo.layers || m->zoo.heads || m->zoo.hidden || m->zoo.seq_len || m->zoo.vocab ||
        m->zoo.dropout)
        return "--layers, --heads, --width, --seq-len, --vocab or --dropout";
    return NULL;
}

static int load_onnx(struct cli_model *m)
{
    remat_onnx_opts oo = {.batch = m->batch_given ? m->zoo.batch : 0};
    const char *opt = zoo_option_given(m);
    int64_t shape[4];
    remat_status st;

    if (m->size_given)
        return cli_error("export the model at the size you want",
                         "%s: --input-size does not apply to an ONNX file", m->spec);
    if (opt)
        return cli_error("export the model with the head you want", "%s: %s does not apply "
                         "to an ONNX file (it applies to zoo models)", m->spec, opt);
    m->is_onnx = true;
    if ((st = remat_onnx_read(m->spec, &oo, NULL, &m->g, &m->weights)))
        return cli_error_code(cli_exit_code(st), NULL, "%s", remat_errmsg());
    if ((st = remat_tgraph_from_graph(m->g, &m->topts, &m->tg)))
        return cli_error_code(cli_exit_code(st), NULL, "%s: %s", m->spec, remat_errmsg());
    remat_graph_value_shape(m->g, 0, shape);
    m->zoo.batch = shape[0];
    return 0;
}

static int load_dump(struct cli_model *m)
{
    const char *opt = zoo_option_given(m);
    remat_status st;

    if (m->batch_given || m->size_given)
        return cli_error("a graph dump fixes its batch and input size",
                         "%s: --batch and --input-size do not apply to a graph dump",
                         m->spec);
    if (opt)
        return cli_error("a graph dump fixes its layers", "%s: %s does not apply to a graph "
                         "dump (it applies to zoo models)", m->spec, opt);
    m->is_dump = true;
    if ((st = remat_tgraph_read_dump(m->spec, &m->topts, NULL, &m->tg)))
        return cli_error_code(cli_exit_code(st), NULL, "%s", remat_errmsg());
    return 0;
}

static int load_zoo(struct cli_model *m)
{
    remat_status st = remat_zoo_build(m->spec, &m->zoo, NULL, &m->g);

    if (st == REMAT_ERR_UNSUPPORTED)
        return cli_error("`remat zoo` lists the models", "%s", remat_errmsg());
    if (st)
        return cli_error_code(cli_exit_code(st), NULL, "%s: %s", m->spec, remat_errmsg());
    if ((st = remat_tgraph_from_graph(m->g, &m->topts, &m->tg)))
        return cli_error_code(cli_exit_code(st), NULL, "%s: %s", m->spec, remat_errmsg());
    return 0;
}

int cli_model_load(struct cli_model *m)
{
    const char *dot = strrchr(m->spec, '.');
    struct stat st;

    if (stat(m->spec, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return cli_error("give a model file or a zoo name", "%s: is a directory",
                             m->spec);
        if (S_ISREG(st.st_mode) && st.st_size == 0)
            return cli_error("give a graph dump (cg_*.txt) or an ONNX model (*.onnx)",
                             "%s: empty file", m->spec);
        return dot && !strcmp(dot, ".onnx") ? load_onnx(m) : load_dump(m);
    }
    if (strchr(m->spec, '/') || (dot && (!strcmp(dot, ".txt") || !strcmp(dot, ".onnx"))))
        return cli_error("check the path", "%s: no such file", m->spec);
    return load_zoo(m);
}

void cli_model_fini(struct cli_model *m)
{
    remat_onnx_weights_free(m->weights);
    m->weights = NULL;
    remat_tgraph_free(m->tg);
    remat_graph_free(m->g);
    m->tg = NULL;
    m->g = NULL;
}
