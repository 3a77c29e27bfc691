/*
 * util.c - argument parsing, error printing and number formatting for the CLI.
 */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --json seen: errors go to stdout as JSON too; json_started: a JSON document is under
 * way on stdout (an error then stays on stderr, so stdout holds one document). */
static bool json_errors, json_started, error_written;

void cli_begin(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--json"))
            json_errors = true;
}

bool cli_json_mode(void)
{
    return json_errors;
}

static void put_string(FILE *f, const char *v);

/* The error as {"error": msg, "hint": hint} on stdout: the first one only. */
static void json_error(const char *msg, const char *hint)
{
    if (!json_errors || json_started || error_written)
        return;
    fputs("{\"error\":", stdout);
    put_string(stdout, msg);
    if (hint) {
        fputs(",\"hint\":", stdout);
        put_string(stdout, hint);
    }
    fputs("}\n", stdout);
    fflush(stdout);
    error_written = true;
}

static int verror(int code, const char *hint, const char *fmt, va_list ap)
{
    char msg[2048];

    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "remat: %s\n", msg);
    if (hint)
        fprintf(stderr, "hint: %s\n", hint);
    json_error(msg, hint);
    return code;
}

int cli_error(const char *hint, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = verror(CLI_EXIT_INPUT, hint, fmt, ap);
    va_end(ap);
    return rc;
}

int cli_error_code(int code, const char *hint, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = verror(code, hint, fmt, ap);
    va_end(ap);
    return rc;
}

int cli_exit_code(remat_status st)
{
    switch (st) {
    case REMAT_OK:
        return CLI_EXIT_OK;
    case REMAT_ERR_NOMEM:
        return CLI_EXIT_FAILED;
    case REMAT_ERR_INVALID:
        return CLI_EXIT_CHECK;
    default:
        return CLI_EXIT_INPUT;
    }
}

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        cli_error("see --help", "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_model_arg(const char *cmd, const char *a, const char **spec)
{
    char hint[64];

    if (a[0] == '-' && a[1]) {
        snprintf(hint, sizeof hint, "`remat %s --help` lists the options", cmd);
        return cli_error(hint, "%s: unknown option '%s'", cmd, a);
    }
    if (*spec)
        return cli_error(NULL, "%s: more than one model given ('%s' and '%s')", cmd, *spec, a);
    *spec = a;
    return 0;
}

bool cli_parse_i64(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *e;
    long long v;

    errno = 0;
    v = strtoll(s, &e, 10);
    if (!*s || *e || errno || v < min || v > max) {
        cli_error(NULL, "%s: '%s' is not a whole number from %lld to %lld", opt, s,
                  (long long)min, (long long)max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_bytes(const char *opt, const char *s, size_t *out)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},       {"B", 1},          {"KB", 1e3},         {"MB", 1e6},
                 {"GB", 1e9},   {"TB", 1e12},      {"KiB", 1024.0},     {"MiB", 1048576.0},
                 {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"k", 1e3}, {"K", 1024.0},
                 {"M", 1048576.0}, {"G", 1073741824.0}};
    char *e;
    double v;

    errno = 0;
    v = strtod(s, &e);
    if (e == s || errno || !(v >= 0)) {
        cli_error("give bytes with an optional unit, e.g. 4GiB, 512MiB or 3.5GB", "%s: '%s' "
                  "is not a byte count", opt, s);
        return false;
    }
    while (*e == ' ')
        e++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(e, units[i].unit)) {
            double b = v * units[i].mult;

            if (b >= 1.8e19) {
                cli_error(NULL, "%s: '%s' is too large", opt, s);
                return false;
            }
            *out = (size_t)(b + 0.5);
            return true;
        }
    cli_error("units: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (of 1024)",
              "%s: unknown unit '%s'", opt, e);
    return false;
}

double cli_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

bool cli_parse_backend(const char *opt, const char *s, remat_backend_kind *out)
{
    if (!strcmp(s, "ref"))
        *out = REMAT_BACKEND_REF;
    else if (!strcmp(s, "cpu"))
        *out = REMAT_BACKEND_CPU;
    else if (!strcmp(s, "cuda"))
        *out = REMAT_BACKEND_CUDA;
    else
        return !cli_error("backends: ref, cpu, cuda", "%s: unknown backend '%s'", opt, s);
    return true;
}

int cli_backend_option(remat_train_opts *to, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    int64_t x;

    if (!strcmp(a, "--backend"))
        return (v = cli_value(argc, argv, i)) && cli_parse_backend(a, v, &to->backend) ? 1 : -1;
    if (!strcmp(a, "--threads")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 4096, &x))
            return -1;
        to->threads = (int)x;
        return 1;
    }
    return 0;
}

/* A rate such as 10e12, 10T or 500G. */
static bool parse_rate(const char *opt, const char *s, double *out)
{
    char *e;
    double v = strtod(s, &e);

    if (e != s && (*e == 'T' || *e == 'G' || *e == 'M')) {
        v *= *e == 'T' ? 1e12 : *e == 'G' ? 1e9 : 1e6;
        e++;
    }
    if (e == s || *e || !(v >= 1) || v > 1e18) {
        cli_error(NULL, "%s: '%s' is not a rate such as 10e12 or 10T", opt, s);
        return false;
    }
    *out = v;
    return true;
}

int cli_offload_option(remat_plan_opts *po, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    size_t b;

    if (!strcmp(a, "--no-offload")) {
        po->no_offload = true;
        return 1;
    }
    if (!strcmp(a, "--flops"))
        return (v = cli_value(argc, argv, i)) && parse_rate(a, v, &po->flops) ? 1 : -1;
    if (!strcmp(a, "--conv-algo"))
        return (po->conv_algo = cli_value(argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "--bandwidth")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_bytes(a, v, &b))
            return -1;
        if (!b) {
            cli_error(NULL, "%s: the bandwidth must be above zero", a);
            return -1;
        }
        po->bandwidth = (double)b;
        return 1;
    }
    return 0;
}

bool cli_parse_budget(const char *opt, const char *s, remat_plan_opts *po)
{
    po->budget_min = !strcmp(s, "min");
    po->budget_bytes = 0;
    if (po->budget_min)
        return true;
    if (!cli_parse_bytes(opt, s, &po->budget_bytes))
        return false;
    if (po->budget_bytes == 0) {
        cli_error(NULL, "%s: a budget must be above zero", opt);
        return false;
    }
    return true;
}

int cli_need_budget(const char *cmd, const remat_plan_opts *po)
{
    const char *name = remat_strategy_name(po->strategy);

    switch (po->strategy) {
    case REMAT_STRATEGY_APPROX_TC:
    case REMAT_STRATEGY_APPROX_MC:
    case REMAT_STRATEGY_EXACT_TC:
    case REMAT_STRATEGY_EXACT_MC:
    case REMAT_STRATEGY_OPTIMAL:
    case REMAT_STRATEGY_HYBRID:
        if (po->budget_bytes || po->budget_min)
            return 0;
        return cli_error("give --budget B (bytes with a unit: 2GiB, 500MB) or --budget min "
                         "(the least the strategy reaches)", "%s: %s plans for a memory "
                         "budget, and none was given", cmd, name);
    default:
        return 0; /* none, chen-sqrtn, superneurons; chen-greedy: its least peak */
    }
}

bool cli_parse_hw(const char *opt, const char *s, int64_t *h, int64_t *w)
{
    char *e, *x;

    errno = 0;
    *h = strtoll(s, &x, 10);
    if (x == s || errno || (*x != 'x' && *x != 'X') || *h <= 0 || *h > 1 << 20)
        goto bad;
    *w = strtoll(x + 1, &e, 10);
    if (e == x + 1 || *e || errno || *w <= 0 || *w > 1 << 20)
        goto bad;
    return true;
bad:
    cli_error(NULL, "%s: '%s' is not a size HxW such as 224x224", opt, s);
    return false;
}

const char *cli_commas(uint64_t v, char *buf, size_t n)
{
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), k = 0;

    for (int i = 0; i < len && (size_t)k + 2 < n; i++) {
        if (i && (len - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = tmp[i];
    }
    buf[k] = '\0';
    return buf;
}

const char *cli_human(double bytes, char *buf, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;

    while (bytes >= 1024 && i < 4) {
        bytes /= 1024;
        i++;
    }
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", bytes, u[i]);
    return buf;
}

/* ------------------------------------------------------------------- JSON */

static void put_string(FILE *f, const char *v)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Writes the separator before a value, and its key inside an object. */
static void json_sep(struct json *j, const char *key)
{
    if (key) {
        json_key(j, key);
        j->first = false;
        return;
    }
    if (!j->first)
        fputc(',', j->f);
    j->first = false;
}

void json_begin(struct json *j, FILE *f, char open)
{
    if (f) {
        j->f = f;
        j->depth = 0;
        json_started = json_started || f == stdout;
    } else {
        json_sep(j, NULL);
    }
    fputc(open, j->f);
    j->depth++;
    j->first = true;
}

void json_end(struct json *j, char close)
{
    fputc(close, j->f);
    j->first = false;
    if (--j->depth == 0)
        fputc('\n', j->f);
}

void json_key(struct json *j, const char *key)
{
    if (!j->first)
        fputc(',', j->f);
    put_string(j->f, key);
    fputc(':', j->f);
    j->first = true;
}

void json_str(struct json *j, const char *key, const char *v)
{
    json_sep(j, key);
    put_string(j->f, v);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
    json_sep(j, key);
    fprintf(j->f, "%lld", (long long)v);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
    json_sep(j, key);
    fprintf(j->f, "%llu", (unsigned long long)v);
}

void json_f64(struct json *j, const char *key, double v)
{
    json_sep(j, key);
    fprintf(j->f, "%.17g", v);
}

void json_bool(struct json *j, const char *key, bool v)
{
    json_sep(j, key);
    fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
    json_sep(j, key);
    fputs("null", j->f);
}

void cli_kernels_count(const remat_tgraph *tg, const remat_schedule *s, const remat_algos *a,
                       struct cli_kernels *k)
{
    const remat_step *st = remat_schedule_steps(s);
    size_t n = remat_schedule_n_steps(s);
    int32_t no = remat_tgraph_n_ops(tg);
    unsigned char *seen = calloc(2 * (size_t)no + 1, 1);

    memset(k, 0, sizeof *k);
    for (size_t i = 0; i < n && seen; i++) {
        size_t sc;
        int32_t id = remat_schedule_step_algo(s, i, &sc), first;
        bool bwd = st[i].kind == REMAT_STEP_BWD;

        k->scratch_peak = sc > k->scratch_peak ? sc : k->scratch_peak;
        if (id < 0 || seen[2 * st[i].id + bwd] ||
            remat_algos_choices(a, st[i].id, bwd, &first, NULL, 1) < 2)
            continue;
        seen[2 * st[i].id + bwd] = 1;
        k->choices++;
        k->fastest += id == first;
        if (id < CLI_MAX_ALGOS)
            k->per_algo[id]++;
    }
    free(seen);
}

void cli_kernels_text(const remat_algos *a, const struct cli_kernels *k, size_t reserve)
{
    char b1[32], b2[32];
    bool first = true;

    printf("kernels          %d of %d convolution passes at their fastest algorithm",
           k->fastest, k->choices);
    for (int32_t id = 0; id < CLI_MAX_ALGOS; id++)
        if (k->per_algo[id]) {
            printf("%s%s %d", first ? " (" : ", ", remat_algos_name(a, id), k->per_algo[id]);
            first = false;
        }
    printf("%s\n", first ? "" : ")");
    printf("scratch          %s at most in one step, %s kept free while planning\n",
           cli_human((double)k->scratch_peak, b1, sizeof b1),
           cli_human((double)reserve, b2, sizeof b2));
}

void cli_kernels_json(struct json *j, const remat_algos *a, const struct cli_kernels *k)
{
    json_u64(j, "workspace_bytes", k->scratch_peak);
    json_i64(j, "conv_passes", k->choices);
    json_i64(j, "conv_passes_fastest", k->fastest);
    json_key(j, "conv_algos");
    json_begin(j, NULL, '{');
    for (int32_t id = 0; id < CLI_MAX_ALGOS; id++)
        if (k->per_algo[id])
            json_i64(j, remat_algos_name(a, id), k->per_algo[id]);
    json_end(j, '}');
}
