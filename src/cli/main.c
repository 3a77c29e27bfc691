/*
 * main.c - the remat command: dispatch to subcommands.
 */
#include "cli/cli.h"
#include "core/rss.h"

#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
    bool plans_only; /* rss_keep_freed: plans, does not train */
} commands[] = {
    {"zoo", cmd_zoo, "list the built-in models", false},
    {"plan", cmd_plan, "plan a training step and simulate its memory", true},
    {"compare", cmd_compare, "run every planning strategy on a model, in one table", true},
    {"train", cmd_train, "train a model inside its planned memory", false},
    {"depth", cmd_depth, "the deepest ResNet each strategy fits in a budget", true},
    {"report", cmd_report, "write an HTML page of every strategy's memory (charts)", true},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: remat <command> [options]\n\n"
               "Plans and runs neural-network training in less memory.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\n`remat <command> --help` describes a command. Version %s.\n",
            REMAT_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("remat %s\n", REMAT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            if (commands[i].plans_only)
                rss_keep_freed();
            return commands[i].run(argc - 1, argv + 1);
        }
    cli_begin(argc, argv);
    cli_error("`remat --help` lists the commands", "unknown command '%s'", argv[1]);
    return 2;
}
