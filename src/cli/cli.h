/*
 * cli.h - shared pieces of the remat command line: argument parsing, model loading,
 * JSON output and the subcommands.
 */
#ifndef REMAT_CLI_H
#define REMAT_CLI_H

#include "remat.h"

#include <stdbool.h>
#include <stdio.h>

/*
 * Exit codes (docs/cli.md): 0 done; 1 the input was refused (a command's options, a
 * model, a file, a budget no plan meets: what the user can change); 2 no command or an
 * unknown one (main.c prints the usage); 3 remat could not finish (out of memory,
 * writing an output failed); 4 a self-check failed (an invalid schedule, a training
 * step that measured another peak than planned: a bug to report).
 */
enum { CLI_EXIT_OK = 0, CLI_EXIT_INPUT = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_FAILED = 3,
       CLI_EXIT_CHECK = 4 };

/* Called first by every command: --json anywhere in argv makes errors JSON on stdout too. */
void cli_begin(int argc, char **argv);
bool cli_json_mode(void);
/* Prints "remat: <msg>" (and "hint: <hint>" when given) on stderr and, under --json,
 * {"error": msg, "hint": hint} on stdout (the first error, and only while no other JSON
 * document has started there); returns CLI_EXIT_INPUT. */
int cli_error(const char *hint, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with another exit code. */
int cli_error_code(int code, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The exit code of a library failure: NOMEM 3, INVALID 4, the rest (bad input) 1. */
int cli_exit_code(remat_status st);
/* Strategies whose plan is defined by a budget (the DP's four, optimal, hybrid) refuse
 * to run without one: 0, or 1 after printing what to give. */
int cli_need_budget(const char *cmd, const remat_plan_opts *po);

/* The time model for a plan on backend to->backend: --flops and --bandwidth as given,
 * the rest (and the copies' slowdown) measured for the backend on this machine
 * (remat_calibrate, cached). 0, or an exit code after printing why not. */
int cli_time_model(const remat_train_opts *to, remat_plan_opts *po);

/* Parsers: false with a message printed when the text is not a valid value. */
bool cli_parse_i64(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out);
bool cli_parse_bytes(const char *opt, const char *s, size_t *out);
/* A budget: "min" or bytes with a unit (above zero), into po's budget fields. */
bool cli_parse_budget(const char *opt, const char *s, remat_plan_opts *po);
/* A backend name: ref or cpu. */
bool cli_parse_backend(const char *opt, const char *s, remat_backend_kind *out);
/* --backend and --threads into *to: 1 when argv[*i] was one of them, 0 when not, -1 on a
 * bad value (printed). */
int cli_backend_option(remat_train_opts *to, int argc, char **argv, int *i);
/* --bandwidth, --flops, --no-offload and --conv-algo into *po: as cli_backend_option. */
int cli_offload_option(remat_plan_opts *po, int argc, char **argv, int *i);
#define CLI_OFFLOAD_HELP                                                                 \
    "  --conv-algo A       with --backend cpu: fit (the default: each convolution's\n"   \
    "                      fastest algorithm whose scratch fits what the plan leaves\n" \
    "                      free), or gemm, direct or winograd wherever it applies\n"     \
    "  --bandwidth B       host-tier copy bandwidth per second for offload plans (a byte\n" \
    "                      count with a unit: 12GB, the default, is PCIe 3.0 x16)\n"    \
    "  --flops F           compute rate for the same time model, FLOP/s (10e12, 10T;\n" \
    "                      default 10T)\n"                                                \
    "  --no-offload        superneurons and hybrid: keep everything on the device\n"
bool cli_parse_hw(const char *opt, const char *s, int64_t *h, int64_t *w);
/* The value of an option (argv[*i + 1]), advancing *i; NULL with a message if missing. */
const char *cli_value(int argc, char **argv, int *i);

/* The last case of every option loop: an unknown option, or the model argument
 * (only one). 0, or 1 after printing an error. */
int cli_model_arg(const char *cmd, const char *a, const char **spec);

/* A model given on the command line: a zoo name, a graph-dump file or an ONNX file. */
struct cli_model {
    const char *spec;
    remat_zoo_opts zoo;
    remat_tgraph_opts topts;
    bool batch_given, size_given;
    bool is_dump, is_onnx;
    remat_graph *g;          /* NULL for a dump */
    remat_onnx_weights *weights; /* an ONNX file's starting values */
    remat_tgraph *tg;
};
int cli_model_load(struct cli_model *m);
void cli_model_fini(struct cli_model *m);
/* Parses options shared by model commands (--batch, --input-size, --classes, --no-aux,
 * --base-channels, --cost; the zoo's options are refused for files by cli_model_load);
 * returns 1 when argv[*i] was one of them, 0 when not, -1 on a bad value. */
int cli_model_option(struct cli_model *m, int argc, char **argv, int *i);

/* Minimal JSON writer for one object per line of output. */
struct json {
    FILE *f;
    int depth;
    bool first;
};
void json_begin(struct json *j, FILE *f, char open);
void json_end(struct json *j, char close);
void json_key(struct json *j, const char *key);
void json_str(struct json *j, const char *key, const char *v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_f64(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);

/* What the plan chose for the kernels: per algorithm id, the convolution passes (op and
 * pass, not steps) given it; how many of them got their fastest; the most scratch of
 * one step. */
#define CLI_MAX_ALGOS 160
struct cli_kernels {
    int32_t choices, fastest, per_algo[CLI_MAX_ALGOS];
    size_t scratch_peak;
};
void cli_kernels_count(const remat_tgraph *tg, const remat_schedule *s, const remat_algos *a,
                       struct cli_kernels *k);
/* "kernels ..." and "scratch ..." lines; the JSON fields workspace_bytes, conv_passes,
 * conv_passes_fastest and conv_algos. */
void cli_kernels_text(const remat_algos *a, const struct cli_kernels *k, size_t reserve);
void cli_kernels_json(struct json *j, const remat_algos *a, const struct cli_kernels *k);

/* Seconds on the monotonic clock. */
double cli_now(void);

/* "1,234,567" into buf. */
const char *cli_commas(uint64_t v, char *buf, size_t n);
/* "3.24 GiB" into buf. */
const char *cli_human(double bytes, char *buf, size_t n);

/*
 * train --data with a language model (train_tokens.c): a token file or text read as
 * bytes (docs/formats.md) feeds the graph's first token-id value (an embedding's input)
 * and every token_ce target of the same size, with sequences drawn from (seed, step);
 * other int32 values are drawn or filled by the trainer (positions).
 */
struct cli_tokens {
    remat_tokens *file;
    const int32_t **feed;      /* per int32 value of the graph: its array, or NULL */
    int32_t *ids, *targets;    /* one batch: (batch, seq_len) */
    int64_t batch, seq_len;
    uint64_t seed;
};
/* Whether g reads token ids or targets (then --data is token data). */
bool cli_tokens_wanted(const remat_graph *g);
/* Opens path and checks that its vocabulary fits what reads it. 0, or an exit code
 * after printing an error. */
int cli_tokens_open(struct cli_tokens *c, const remat_graph *g, const char *path,
                    uint64_t seed);
/* Training step `step` (from 0) on the next batch. */
remat_status cli_tokens_step(struct cli_tokens *c, remat_trainer *t, int64_t step,
                             double *loss);
void cli_tokens_fini(struct cli_tokens *c);

int cmd_zoo(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_depth(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
