/*
 * cmd_zoo.c - `remat zoo`: the built-in models with parameters, op count and forward
 * GFLOPs per sample at their default input size.
 */
#include "cli/cli.h"

#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: remat zoo [--json]\n\n"
               "Lists the built-in models: parameters, ops and forward GFLOPs per sample\n"
               "(a multiply-add counts 2) at each model's usual input size.\n"
               "Besides the names listed, resnetD builds a bottleneck ResNet of depth D\n"
               "((D - 2) divisible by 3) and resnet-a-b-c-d one with the given blocks.\n\n"
               "  --json   one JSON array of {name, params, n_ops, gflops}\n");
}

int cmd_zoo(int argc, char **argv)
{
    bool as_json = false;
    struct json j;
    char buf[32];
    remat_status st;

    cli_begin(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else {
            help(stderr);
            return cli_error("`remat zoo --help` lists the options",
                             "zoo: unknown argument '%s'", argv[i]);
        }
    }
    if (as_json)
        json_begin(&j, stdout, '[');
    else
        printf("%-14s %14s %6s %9s  %s\n", "model", "params", "ops", "GFLOPs", "description");
    for (size_t i = 0; remat_zoo_name(i); i++) {
        remat_zoo_opts o = {.batch = 1};
        remat_graph *g = NULL;

        if ((st = remat_zoo_build(remat_zoo_name(i), &o, NULL, &g)))
            return cli_error_code(cli_exit_code(st), NULL, "%s", remat_errmsg());
        if (as_json) {
            json_begin(&j, NULL, '{');
            json_str(&j, "name", remat_zoo_name(i));
            json_i64(&j, "params", remat_graph_n_params(g));
            json_i64(&j, "n_ops", remat_graph_n_ops(g));
            json_f64(&j, "gflops", remat_graph_forward_flops(g) / 1e9);
            json_end(&j, '}');
        } else {
            printf("%-14s %14s %6d %9.2f  %s\n", remat_zoo_name(i),
                   cli_commas((uint64_t)remat_graph_n_params(g), buf, sizeof buf),
                   remat_graph_n_ops(g), remat_graph_forward_flops(g) / 1e9,
                   remat_zoo_describe(i));
        }
        remat_graph_free(g);
    }
    if (as_json)
        json_end(&j, ']');
    return 0;
}
