/*
 * cmd_report.c - `remat report MODEL|FILE -o report.html`: one self-contained HTML page
 * (inline SVG and CSS, nothing fetched when it is viewed) that shows, for every
 * strategy, what `remat plan` and `remat compare` print as text: the memory timeline of
 * the step, the comparison table, the peak and the step time against the budget, and
 * which values the plan keeps, recomputes or offloads.
 *
 * Work: each strategy planned once per --budget (default min, as `compare`) and at
 * --points budgets spread from the least any strategy meets to none's peak (the sweep),
 * each plan simulated; a few seconds for resnet50 at batch 32. The MILP (`optimal`) is
 * left out unless --strategies names it: it runs to its time limit at every budget.
 * The page grows with steps x strategies x budgets (about 40 KB per timeline).
 */
#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/svg.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUDGETS 4

static void help(FILE *f)
{
    fprintf(f,
            "usage: remat report MODEL|FILE [options] [-o report.html]\n\n"
            "Writes one HTML page (self-contained: open it in any browser, offline) with,\n"
            "for every strategy, the memory timeline of the training step (live bytes per\n"
            "step; forward, backward, recomputations, copies to the host tier and the\n"
            "kernels' scratch marked; the budget and the lower limit as lines), the table\n"
            "of `remat compare`, the activation peak and the time model's step time\n"
            "against the budget, and which values each plan keeps, recomputes or\n"
            "offloads. Prints the page's absolute path.\n\n"
            "  -o, --output FILE   the page (default report.html)\n"
            "  --budget B|min      a total budget to show the plans at (default min: each\n"
            "                      strategy at its least); repeat for up to %d budgets\n"
            "  --strategies LIST   comma-separated (default: all but optimal, the MILP,\n"
            "                      which runs to its time limit at every budget); none is\n"
            "                      always shown\n"
            "  --points N          budgets in the sweep, from the least any strategy meets\n"
            "                      to none's peak (default 12, 2 to 200)\n"
            "  --time-limit S      seconds for `optimal` per plan (default 60)\n"
            "  --max-lower-sets N  cap for the exact DP (default 100000)\n"
            "  --backend ref|cpu|cuda, --threads T  plan with that backend's kernels: their\n"
            "                      scratch counted and drawn, as `remat plan --backend`\n"
            "  --batch N, --input-size HxW, --classes K, --no-aux, --cost flops|kusumoto\n"            "  --layers N, --heads N, --width N, --seq-len N, --vocab N, --dropout P,\n"
            "  --optimizer sgd|adamw   transformers' shape and the optimizer (as for plan)\n"
            "                      as for `remat plan`\n" CLI_OFFLOAD_HELP, MAX_BUDGETS);
}

/* One strategy planned at one budget and simulated. */
struct run {
    remat_status st;
    char err[512];
    remat_plan_info pi;
    remat_sim_result r;
    remat_schedule *s; /* kept for the page's sections; NULL otherwise */
};

/* One point of a strategy's sweep: the total and activation budgets, the peak, the
 * time model's step. */
struct point {
    size_t budget, act_budget, peak;
    double seconds;
};

/* The command: its options, the plans it made and the sweep. */
struct report {
    struct cli_model m;
    remat_plan_opts base;               /* every option but strategy and budget */
    remat_train_opts to;
    bool backend;                       /* --backend given: plans with its kernels (al) */
    remat_algos *al;
    bool use[REMAT_STRATEGY_COUNT];
    remat_plan_opts budgets[MAX_BUDGETS];
    const char *budget_text[MAX_BUDGETS];
    int n_budgets;
    int64_t n_points;
    const char *out;
    struct run *runs;                   /* [n_budgets + 1][strategy]: the last row is the
                                           least budgets when no --budget is min */
    struct run *mins;                   /* the row at each strategy's least budget */
    struct point *sweep;                /* [strategy][n_points + 1] */
    size_t n_sweep[REMAT_STRATEGY_COUNT];
    size_t lo, hi;                      /* the sweep's total budgets */
    struct progress pr;                 /* plans done of all the report makes */
    int64_t done;
};

/* ---------------------------------------------------------------- options */

/* --strategies: a comma-separated list into use[]; none is always used. */
static bool parse_strategies(const char *list, bool *use)
{
    memset(use, 0, REMAT_STRATEGY_COUNT * sizeof *use);
    use[REMAT_STRATEGY_NONE] = true;
    for (const char *p = list; *p;) {
        char name[64];
        size_t n = strcspn(p, ",");
        remat_strategy s;

        snprintf(name, sizeof name, "%.*s", (int)n, p);
        if ((s = remat_strategy_from_name(name)) == REMAT_STRATEGY_COUNT)
            return !cli_error("`remat plan --help` lists the strategies",
                              "report: unknown strategy '%s'", name);
        use[s] = true;
        p += n + (p[n] == ',');
    }
    return true;
}

/* The options of report alone: 1 taken, 0 not one of them, -1 bad (printed). */
static int report_option(struct report *rp, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    int64_t x;

    if (!strcmp(a, "-o") || !strcmp(a, "--output"))
        return (rp->out = cli_value(argc, argv, i)) ? 1 : -1;
    if (!strcmp(a, "--budget")) {
        if (rp->n_budgets == MAX_BUDGETS)
            return cli_error(NULL, "report: at most %d budgets", MAX_BUDGETS), -1;
        if (!(v = cli_value(argc, argv, i)) ||
            !cli_parse_budget(a, v, &rp->budgets[rp->n_budgets]))
            return -1;
        rp->budget_text[rp->n_budgets++] = v;
        return 1;
    }
    if (!strcmp(a, "--strategies"))
        return (v = cli_value(argc, argv, i)) && parse_strategies(v, rp->use) ? 1 : -1;
    if (!strcmp(a, "--points"))
        return (v = cli_value(argc, argv, i)) && cli_parse_i64(a, v, 2, 200, &rp->n_points)
                   ? 1 : -1;
    if (!strcmp(a, "--time-limit")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 86400, &x))
            return -1;
        rp->base.time_limit = (double)x;
        return 1;
    }
    if (!strcmp(a, "--max-lower-sets"))
        return (v = cli_value(argc, argv, i)) &&
               cli_parse_i64(a, v, 1, 100000000, &rp->base.max_lower_sets) ? 1 : -1;
    return 0;
}

/* Every option; 0, 1 after printing an error, or -1 after printing help. */
static int parse(struct report *rp, int argc, char **argv)
{
    int k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return -1;
        } else if ((k = report_option(rp, argc, argv, &i)) != 0 ||
                   (k = cli_offload_option(&rp->base, argc, argv, &i)) != 0 ||
                   (k = cli_model_option(&rp->m, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
        } else if ((k = cli_backend_option(&rp->to, argc, argv, &i)) != 0) {
            if (k < 0)
                return 1;
            rp->backend = rp->backend || !strcmp(a, "--backend");
        } else if (cli_model_arg("report", a, &rp->m.spec)) {
            return 1;
        }
    }
    if (!rp->m.spec) {
        help(stderr);
        return cli_error(NULL, "report: no model given");
    }
    if (!rp->n_budgets) {
        rp->budgets[0].budget_min = true;
        rp->budget_text[rp->n_budgets++] = "min";
    }
    return 0;
}

/* --------------------------------------------------------------- planning */

/* Plans strategy s at budget b and simulates it; keeps the schedule when keep. */
static void plan_one(struct report *rp, remat_strategy s, const remat_plan_opts *b,
                     bool keep, struct run *out)
{
    remat_plan_opts o = rp->base;

    o.strategy = s;
    o.budget_bytes = b->budget_bytes;
    o.budget_min = b->budget_min;
    progress_step(&rp->pr, rp->done, remat_strategy_name(s));
    progress_wait_begin(&rp->pr, remat_strategy_name(s), s == REMAT_STRATEGY_OPTIMAL
                        ? (o.time_limit > 0 ? o.time_limit : 60) : 0);
    out->st = remat_plan(rp->m.tg, &o, &out->s, &out->pi);
    if (!out->st)
        out->st = remat_sim_run_opts(rp->m.tg, out->s, &(remat_sim_opts){o.bandwidth,
                                     o.flops, o.copy_slowdown}, &out->r);
    progress_wait_end(&rp->pr);
    progress_step(&rp->pr, ++rp->done, NULL);
    if (out->st)
        snprintf(out->err, sizeof out->err, "%s", remat_errmsg());
    if (out->st || !keep) {
        remat_schedule_free(out->s);
        out->s = NULL;
    }
}

/* Every used strategy at every --budget, and at its least budget (the sweep's start). */
static void plan_sections(struct report *rp)
{
    rp->mins = NULL;
    for (int k = 0; k < rp->n_budgets && !rp->mins; k++)
        if (rp->budgets[k].budget_min)
            rp->mins = rp->runs + (size_t)k * REMAT_STRATEGY_COUNT;
    for (int k = 0; k <= rp->n_budgets; k++) {
        struct run *row = rp->runs + (size_t)k * REMAT_STRATEGY_COUNT;
        remat_plan_opts least = {.budget_min = true};

        if (k == rp->n_budgets && rp->mins)
            break;
        for (int s = 0; s < REMAT_STRATEGY_COUNT; s++) {
            if (!rp->use[s])
                continue;
            plan_one(rp, (remat_strategy)s, k < rp->n_budgets ? &rp->budgets[k] : &least,
                     k < rp->n_budgets, &row[s]);
        }
        if (k == rp->n_budgets)
            rp->mins = row;
    }
}

/* The sweep: each strategy from its least budget, then at n_points budgets spread from
 * the least any strategy meets to none's peak (those above its own least). */
static int plan_sweep(struct report *rp)
{
    size_t lo = SIZE_MAX, hi, np = (size_t)rp->n_points;

    if (rp->mins[REMAT_STRATEGY_NONE].st)
        return cli_error_code(cli_exit_code(rp->mins[REMAT_STRATEGY_NONE].st), NULL,
                              "%s: none: %s", rp->m.spec, rp->mins[REMAT_STRATEGY_NONE].err);
    hi = rp->mins[REMAT_STRATEGY_NONE].pi.budget_bytes;
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++)
        if (rp->use[s] && !rp->mins[s].st && rp->mins[s].pi.budget_bytes < lo)
            lo = rp->mins[s].pi.budget_bytes;
    rp->lo = lo;
    rp->hi = hi;
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++) {
        struct point *pt = rp->sweep + (size_t)s * (np + 1);
        const struct run *least = &rp->mins[s];
        size_t *n = &rp->n_sweep[s];

        if (!rp->use[s] || least->st)
            continue;
        pt[(*n)++] = (struct point){least->pi.budget_bytes, least->pi.activation_budget_bytes,
                                    least->r.activation_peak_bytes, least->r.total_seconds};
        for (size_t k = 0; k < np; k++) {
            remat_plan_opts b = {.budget_bytes = lo + (size_t)((double)(hi - lo) *
                                                               (double)k / (double)(np - 1))};
            struct run r = {0};

            if (b.budget_bytes <= pt[0].budget) {
                progress_step(&rp->pr, ++rp->done, NULL);
                continue;
            }
            plan_one(rp, (remat_strategy)s, &b, false, &r);
            if (!r.st)
                pt[(*n)++] = (struct point){r.pi.budget_bytes, r.pi.activation_budget_bytes,
                                            r.r.activation_peak_bytes, r.r.total_seconds};
        }
    }
    return 0;
}

/* ------------------------------------------------------------------- page */

/* Per step, what it is and its kernel's scratch; the first backward step. */
static size_t step_lanes(const remat_tgraph *tg, const remat_schedule *s, unsigned char *lane,
                         size_t *scratch)
{
    const remat_step *st = remat_schedule_steps(s);
    size_t n = remat_schedule_n_steps(s), first_bwd = n;
    unsigned char *ran = calloc((size_t)remat_tgraph_n_ops(tg) + 1, 1);

    for (size_t i = 0; i < n; i++) {
        remat_schedule_step_algo(s, i, &scratch[i]);
        switch (st[i].kind) {
        case REMAT_STEP_FWD:
            lane[i] = ran && ran[st[i].id] ? SVG_RECOMPUTE : SVG_FWD;
            if (ran)
                ran[st[i].id] = 1;
            break;
        case REMAT_STEP_BWD:
            lane[i] = SVG_BWD;
            first_bwd = i < first_bwd ? i : first_bwd;
            break;
        case REMAT_STEP_OFFLOAD: lane[i] = SVG_OFFLOAD; break;
        case REMAT_STEP_PREFETCH: lane[i] = SVG_PREFETCH; break;
        case REMAT_STEP_WAIT: lane[i] = SVG_WAIT; break;
        default: lane[i] = SVG_FREE;
        }
    }
    free(ran);
    return first_bwd;
}

/* What the plan does with each forward value (buffer ids [0, n_values)). */
enum vclass { V_UNPLANNED, V_KEPT, V_FREED, V_RECOMPUTED, V_OFFLOADED, V_COUNT };
static const char *const vclass_names[V_COUNT] = {
    "unplanned", "kept", "freed", "recomputed", "offloaded"};
static const char *const vclass_what[V_COUNT] = {
    "", "kept from its forward to the backward",
    "freed in the forward pass (the backward does not read it)",
    "freed and computed again for the backward", "sent to the host tier and brought back"};

/* From the schedule alone: a value with an OFFLOAD is offloaded; one with more instances
 * (FREEs) than one is recomputed; one freed once before the first backward is not read
 * by the backward; else it is kept. Values without a FREE are not the plan's. */
static void value_classes(const remat_schedule *s, size_t first_bwd, int32_t nv,
                          unsigned char *cls)
{
    const remat_step *st = remat_schedule_steps(s);
    size_t n = remat_schedule_n_steps(s);

    memset(cls, 0, (size_t)nv);
    for (size_t i = 0; i < n; i++) {
        int32_t b = st[i].id;

        if (b < 0 || b >= nv || (st[i].kind != REMAT_STEP_FREE &&
                                 st[i].kind != REMAT_STEP_OFFLOAD))
            continue;
        if (st[i].kind == REMAT_STEP_OFFLOAD)
            cls[b] = V_OFFLOADED;
        else if (cls[b] == V_UNPLANNED)
            cls[b] = i < first_bwd ? V_FREED : V_KEPT;
        else if (cls[b] != V_OFFLOADED)
            cls[b] = V_RECOMPUTED;
    }
}

static const char style[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;"
    "margin:0;background:#fafafa}main{max-width:1180px;margin:0 auto;padding:12px 20px}"
    "h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px "
    "solid #ccc}h3{font-size:15px;margin:0 0 4px}h3 small{font-weight:normal;color:#555}"
    "svg{width:100%;height:auto;display:block}.pair{display:grid;grid-template-columns:"
    "1fr 1fr;gap:12px}table{border-collapse:collapse;font-variant-numeric:tabular-nums}"
    "th,td{padding:3px 9px;border-bottom:1px solid #ddd;text-align:right}th:first-child,"
    "td:first-child{text-align:left}article{background:#fff;border:1px solid #ddd;"
    "border-radius:4px;padding:10px 12px;margin:12px 0}.err{color:#b00}"
    ".grid{stroke:#e6e6e6}.tickmark{stroke:#999}.frame{fill:none;stroke:#999}"
    "text{font:12px system-ui,sans-serif;fill:#444}.axis-title{font-size:12px;fill:#222}"
    ".phase{fill:#777;font-size:11px}.phase-fwd{fill:#eef4fb}.phase-bwd{fill:#fbf3ea}"
    ".live{fill:#9ecae1;stroke:none}.scratch{fill:none;stroke:#d62728;stroke-width:1.6}"
    ".total{fill:none;stroke:#08519c;stroke-width:1.2}.budget{stroke:#c00;stroke-dasharray:6 4}"
    ".budget-label{fill:#c00}.lower{stroke:#555;stroke-dasharray:2 3}.lower-label{fill:#555}"
    ".peak{fill:#08519c}.lane-forward{fill:#4e79a7}.lane-recompute{fill:#f28e2b}"
    ".lane-backward{fill:#b07aa1}.lane-offload{fill:#59a14f}.lane-prefetch{fill:#17becf}"
    ".lane-wait{fill:#999}.curve polyline{fill:none;stroke:var(--c);stroke-width:2}"
    ".curve circle,.legend rect{fill:var(--c)}.diagonal{stroke:#bbb;stroke-dasharray:4 4}"
    ".cells{display:flex;flex-wrap:wrap;gap:1px;margin:6px 0}.cells i{width:7px;height:12px}"
    ".v-kept{background:#9ecae1}.v-freed{background:#ddd}.v-recomputed{background:#f28e2b}"
    ".v-offloaded{background:#59a14f}.key span{display:inline-block;margin-right:14px}"
    ".key i{display:inline-block;width:12px;height:10px;margin-right:4px}"
    "details{margin:2px 0}summary{cursor:pointer}details p{margin:2px 0 6px 16px;"
    "font-size:12px;color:#444;word-break:break-all}";

/* The page's head and title. */
static void page_head(FILE *f, const struct report *rp)
{
    char title[256];

    if (rp->m.is_dump)
        snprintf(title, sizeof title, "%s (graph dump)", rp->m.spec);
    else
        snprintf(title, sizeof title, "%s, batch %lld", rp->m.spec, (long long)rp->m.zoo.batch);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name="
          "\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>remat report: ",
          f);
    html_text(f, title);
    fprintf(f, "</title>\n<style>%s</style></head>\n<body><main>\n<h1>remat report: ", style);
    html_text(f, title);
    fputs("</h1>\n", f);
}

/* What the model is and how the page reads. */
static void page_summary(FILE *f, const struct report *rp)
{
    const struct run *none = &rp->mins[REMAT_STRATEGY_NONE];
    char a[32], b[32], c[32];

    fprintf(f, "<p>%s parameters, %d planned values, %d ops. Resident %s (parameters, "
            "their gradients and momentum, inputs: counted in every budget, not drawn). "
            "Without a plan (<code>none</code>, what PyTorch keeps) the activations peak at "
            "%s.",
            cli_commas((uint64_t)remat_tgraph_n_params(rp->m.tg), a, sizeof a),
            remat_tgraph_n_planned(rp->m.tg), remat_tgraph_n_ops(rp->m.tg),
            cli_human((double)remat_tgraph_resident_bytes(rp->m.tg), b, sizeof b),
            cli_human((double)none->r.activation_peak_bytes, c, sizeof c));
    fprintf(f, " Time model: %.4g TFLOP/s, host copies at %.4g GB/s.",
            (rp->base.flops > 0 ? rp->base.flops : REMAT_DEFAULT_FLOPS) / 1e12,
            (rp->base.bandwidth > 0 ? rp->base.bandwidth : REMAT_DEFAULT_BANDWIDTH) / 1e9);
    if (rp->backend)
        fprintf(f, " Kernels: the %s backend's, their scratch counted.",
                remat_backend_name(rp->to.backend));
    fprintf(f, " Written by remat %s; <code>remat plan ... --json</code> prints the same "
            "figures.</p>\n<p>Sections: <a href=\"#tradeoff\">peak and time against the "
            "budget</a>", REMAT_VERSION);
    for (int k = 0; k < rp->n_budgets; k++) {
        fprintf(f, ", <a href=\"#budget-%d\">plans at budget ", k);
        html_text(f, rp->budget_text[k]);
        fputs("</a>", f);
    }
    fputs(".</p>\n", f);
}

/* The sweep's two charts: activation peak and step time against the budget. */
static int page_tradeoff(FILE *f, const struct report *rp)
{
    size_t np = (size_t)rp->n_points + 1, total = REMAT_STRATEGY_COUNT * np;
    struct svg_series peak[REMAT_STRATEGY_COUNT], time[REMAT_STRATEGY_COUNT];
    double *x = calloc(total, sizeof *x), *y = calloc(total, sizeof *y),
           *t = calloc(total, sizeof *t);
    size_t *dx = calloc(total, sizeof *dx), *dy = calloc(total, sizeof *dy);
    int n = 0, rc = 0;
    char lo[32], hi[32];

    if (!x || !y || !t || !dx || !dy) {
        rc = cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory writing the report");
        goto out;
    }
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++) {
        const struct point *pt = rp->sweep + (size_t)s * np;
        size_t o = (size_t)s * np;

        if (!rp->n_sweep[s])
            continue;
        for (size_t i = 0; i < rp->n_sweep[s]; i++) {
            x[o + i] = (double)pt[i].act_budget;
            y[o + i] = (double)pt[i].peak;
            t[o + i] = pt[i].seconds;
            dx[o + i] = pt[i].budget;
            dy[o + i] = pt[i].peak;
        }
        peak[n] = (struct svg_series){remat_strategy_name((remat_strategy)s), s,
                                      rp->n_sweep[s], x + o, y + o, dx + o, dy + o};
        time[n] = peak[n];
        time[n].y = t + o;
        time[n++].data_y = NULL;
    }
    fprintf(f, "<h2 id=\"tradeoff\">Peak and step time against the budget</h2>\n<p>Each "
            "strategy at its least budget, then at %lld budgets from %s (the least any "
            "strategy meets) to %s (none's peak); budgets are totals, the x axis shows what "
            "they leave for activations. A strategy has no point where it cannot meet the "
            "budget. Below the diagonal a plan uses less than it was given.</p>\n"
            "<div class=\"pair\">\n", (long long)rp->n_points,
            cli_human((double)rp->lo, lo, sizeof lo), cli_human((double)rp->hi, hi, sizeof hi));
    svg_curves(f, "peak", peak, n, SVG_BYTES, SVG_BYTES, "budget for activations",
               "activation peak", true);
    svg_curves(f, "time", time, n, SVG_BYTES, SVG_SECONDS, "budget for activations",
               "step time (time model)", false);
    fputs("</div>\n", f);
out:
    free(x), free(y), free(t), free(dx), free(dy);
    return rc;
}

/* The table of `remat compare` for one budget. */
static void page_table(FILE *f, const struct report *rp, const struct run *row)
{
    double none_peak = (double)rp->mins[REMAT_STRATEGY_NONE].r.activation_peak_bytes;
    char a[32], b[32], c[32], d[32];

    fputs("<table class=\"compare\"><tr><th>strategy</th><th>budget</th><th>for "
          "activations</th><th>activation peak</th><th>reduction</th><th>overhead</th>"
          "<th>offloaded</th><th>step time</th><th>planning</th><th>blocks</th></tr>\n", f);
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++) {
        const struct run *r = &row[s];
        const char *name = remat_strategy_name((remat_strategy)s);

        if (!rp->use[s])
            continue;
        fprintf(f, "<tr data-strategy=\"%s\" data-feasible=\"%s\"", name,
                r->st ? "false" : "true");
        if (r->st) {
            fprintf(f, "><td>%s</td><td colspan=\"9\" class=\"err\">", name);
            html_text(f, r->err);
            fputs("</td></tr>\n", f);
            continue;
        }
        fprintf(f, " data-peak=\"%zu\"><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                "<td>%.1f%%</td><td>%.3f</td><td>%s</td><td>%.2f ms</td><td>%.3f s</td>"
                "<td>%d</td></tr>\n", r->r.activation_peak_bytes, name,
                cli_human((double)r->pi.budget_bytes, a, sizeof a),
                cli_human((double)r->pi.activation_budget_bytes, b, sizeof b),
                cli_human((double)r->r.activation_peak_bytes, c, sizeof c),
                100.0 * (1 - (double)r->r.activation_peak_bytes / none_peak), r->r.overhead,
                cli_human((double)r->pi.offloaded_bytes, d, sizeof d),
                1e3 * r->r.total_seconds, r->pi.plan_seconds, r->pi.n_blocks);
    }
    fputs("</table>\n", f);
}

/* The values a plan keeps, frees, recomputes and offloads: a cell per value, then the
 * names of each class. */
static int page_values(FILE *f, const remat_tgraph *tg, const remat_schedule *s,
                       size_t first_bwd)
{
    int32_t nv = remat_tgraph_n_values(tg);
    unsigned char *cls = malloc((size_t)nv + 1);
    static const int order[] = {V_RECOMPUTED, V_OFFLOADED, V_KEPT, V_FREED};
    size_t count[V_COUNT] = {0};
    char tmp[256];

    if (!cls)
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory writing the report");
    value_classes(s, first_bwd, nv, cls);
    for (int32_t b = 0; b < nv; b++)
        count[cls[b]]++;
    fprintf(f, "<div class=\"values\" data-kept=\"%zu\" data-freed=\"%zu\" data-recomputed="
            "\"%zu\" data-offloaded=\"%zu\"><div class=\"cells\">", count[V_KEPT],
            count[V_FREED], count[V_RECOMPUTED], count[V_OFFLOADED]);
    for (int32_t b = 0; b < nv; b++)
        if (cls[b] != V_UNPLANNED) {
            fprintf(f, "<i class=\"v-%s\" title=\"", vclass_names[cls[b]]);
            html_text(f, remat_buffer_name(tg, b, tmp, sizeof tmp));
            fprintf(f, ": %s\"></i>", vclass_names[cls[b]]);
        }
    fputs("</div>\n", f);
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        int c = order[k];
        bool first = true;

        fprintf(f, "<details><summary>%s: %zu value%s</summary><p>", vclass_what[c], count[c],
                count[c] == 1 ? "" : "s");
        for (int32_t b = 0; b < nv; b++)
            if (cls[b] == c) {
                fputs(first ? "" : ", ", f);
                html_text(f, remat_buffer_name(tg, b, tmp, sizeof tmp));
                first = false;
            }
        fputs("</p></details>\n", f);
    }
    fputs("</div>\n", f);
    free(cls);
    return 0;
}

/* The figures over a card's timeline. */
static void card_title(FILE *f, const struct run *r, const unsigned char *lane, size_t n)
{
    size_t count[SVG_LANE_COUNT] = {0};
    char a[32], b[32], c[32];

    for (size_t i = 0; i < n; i++)
        count[lane[i]]++;
    fprintf(f, " <small>activation peak %s after step %zu of %zu; budget %s for "
            "activations; lower limit %s; %zu recomputations (overhead %.3f); %zu values "
            "offloaded; step time %.2f ms</small></h3>\n",
            cli_human((double)r->r.activation_peak_bytes, a, sizeof a), r->r.peak_step, n,
            cli_human((double)r->pi.activation_budget_bytes, b, sizeof b),
            cli_human((double)r->r.lower_bound_bytes, c, sizeof c), count[SVG_RECOMPUTE],
            r->r.overhead, count[SVG_OFFLOAD], 1e3 * r->r.total_seconds);
}

/* The top of a timeline's y axis: its peak, or its budget where that is not far above. */
static double y_top(const struct run *r)
{
    double peak = (double)r->r.activation_peak_bytes,
           budget = (double)r->pi.activation_budget_bytes;

    return 1.06 * (budget > peak && budget < 1.5 * peak ? budget : peak);
}

/* One strategy's card: its figures, memory timeline and values. */
static int page_card(FILE *f, const struct report *rp, const struct run *r, remat_strategy s,
                     int k)
{
    const char *name = remat_strategy_name(s);
    size_t n = r->st ? 0 : remat_schedule_n_steps(r->s), first_bwd;
    size_t *live = calloc(n + 1, sizeof *live), *scratch = calloc(n + 1, sizeof *scratch);
    unsigned char *lane = calloc(n + 1, 1);
    int rc = 0;

    fprintf(f, "<article class=\"strategy\" id=\"b%d-%s\" data-strategy=\"%s\" "
            "data-feasible=\"%s\">\n<h3>%s", k, name, name, r->st ? "false" : "true", name);
    if (r->st) {
        fputs("</h3>\n<p class=\"err\">", f);
        html_text(f, r->err);
        fputs("</p>\n</article>\n", f);
        goto out;
    }
    if (!live || !scratch || !lane) {
        rc = cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory writing the report");
        goto out;
    }
    if (remat_sim_timeline(rp->m.tg, r->s, live, n)) {
        rc = cli_error_code(CLI_EXIT_CHECK, NULL, "%s: %s: %s", rp->m.spec, name,
                            remat_errmsg());
        goto out;
    }
    first_bwd = step_lanes(rp->m.tg, r->s, lane, scratch);
    card_title(f, r, lane, n);
    svg_timeline(f, &(struct svg_timeline){name, n, live, scratch, lane, first_bwd,
                                           r->r.activation_peak_bytes, r->r.peak_step,
                                           r->pi.activation_budget_bytes,
                                           r->r.lower_bound_bytes, y_top(r)});
    rc = page_values(f, rp->m.tg, r->s, first_bwd);
    fputs("</article>\n", f);
out:
    free(live), free(scratch), free(lane);
    return rc;
}

static const char timeline_key[] =
    "<p class=\"key\"><span><i style=\"background:#9ecae1\"></i>live activations and "
    "gradients</span><span><i style=\"background:#d62728\"></i>kernels' scratch during a "
    "step</span>"
    "<span><i style=\"background:#c00;height:2px\"></i>budget</span><span><i style="
    "\"background:#555;height:2px\"></i>lower limit (largest single step)</span><br>"
    "<span><i style=\"background:#4e79a7\"></i>forward</span><span><i style=\"background:"
    "#f28e2b\"></i>recomputation</span><span><i style=\"background:#b07aa1\"></i>backward"
    "</span><span><i style=\"background:#59a14f\"></i>offload</span><span><i style="
    "\"background:#17becf\"></i>prefetch</span><span><i style=\"background:#999\"></i>"
    "wait for a copy</span></p>\n<p class=\"key\">Values: <span><i class=\"v-kept\"></i>"
    "kept</span><span><i class=\"v-recomputed\"></i>recomputed</span><span><i class="
    "\"v-offloaded\"></i>offloaded</span><span><i class=\"v-freed\"></i>freed in the "
    "forward pass (not read by the backward)</span> (hover a cell for its name)</p>\n";

/* The plans at one budget: the table, then a card per strategy on one y scale. */
static int page_section(FILE *f, const struct report *rp, int k)
{
    const struct run *row = rp->runs + (size_t)k * REMAT_STRATEGY_COUNT;
    fprintf(f, "<h2 id=\"budget-%d\">Plans at budget ", k);
    html_text(f, rp->budget_text[k]);
    fprintf(f, "</h2>\n<p>%s Each chart shows the live bytes after each step of the "
            "schedule on its own scale, the peak marked by a dot.</p>\n",
            rp->budgets[k].budget_min ? "Each strategy at the least total budget it can "
            "meet, as <code>remat compare</code>." : "Every strategy at this total "
            "budget, resident bytes included.");
    page_table(f, rp, row);
    fputs(timeline_key, f);
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++)
        if (rp->use[s] && page_card(f, rp, &row[s], (remat_strategy)s, k))
            return 1;
    return 0;
}

/* After the page is laid out, each chart's points as the browser parsed them
 * (data-drawn-points): what a check on the rendered page compares. */
static const char drawn_script[] =
    "<script>for (const e of document.querySelectorAll('polyline[data-points]')) {\n"
    "  e.dataset.drawnPoints = e.points.numberOfItems;\n"
    "  e.dataset.drawnWidth = Math.round(e.getBBox().width);\n}</script>\n";

/* Writes the page to rp->out. 0, or 1 after printing an error. */
static int write_page(const struct report *rp)
{
    FILE *f = fopen(rp->out, "w");
    int rc = 0;

    if (!f)
        return cli_error_code(CLI_EXIT_FAILED, "give -o a path in a folder that exists and "
                              "can be written", "report: cannot write '%s': %s", rp->out,
                              strerror(errno));
    page_head(f, rp);
    page_summary(f, rp);
    rc = page_tradeoff(f, rp);
    for (int k = 0; k < rp->n_budgets && !rc; k++)
        rc = page_section(f, rp, k);
    fprintf(f, "%s</main></body></html>\n", drawn_script);
    if (ferror(f) | fclose(f))
        rc = rc ? rc : cli_error_code(CLI_EXIT_FAILED, NULL, "report: cannot write '%s': %s",
                                      rp->out, strerror(errno));
    return rc;
}

/* ----------------------------------------------------------------- command */

/* The backend's kernels, as `remat plan --backend` chooses them. 0, or 1 (printed). */
static int load_algos(struct report *rp)
{
    remat_status st;
    int rc;

    if (!rp->backend && rp->base.conv_algo && strcmp(rp->base.conv_algo, "fit"))
        return cli_error(NULL, "report: --conv-algo %s needs --backend cpu",
                         rp->base.conv_algo);
    if (!rp->backend)
        return 0;
    if (rp->m.is_dump)
        return cli_error(NULL, "%s: --backend needs a model with shapes, not a graph dump",
                         rp->m.spec);
    if ((rc = cli_time_model(&rp->to, &rp->base)))
        return rc;
    if ((st = remat_train_algos(rp->m.g, rp->m.tg, &rp->to, &rp->al)) != REMAT_OK)
        return cli_error_code(cli_exit_code(st), NULL, "%s: %s", rp->m.spec, remat_errmsg());
    rp->base.algos = rp->al;
    rp->base.host_in_budget = rp->to.backend != REMAT_BACKEND_CUDA;
    rp->base.whole_pages = rp->to.backend != REMAT_BACKEND_CUDA;
    return 0;
}

/* The plans the report makes, for the progress line. */
static int64_t n_plans(const struct report *rp)
{
    int64_t used = 0;
    bool min_given = false;

    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++)
        used += rp->use[s];
    for (int k = 0; k < rp->n_budgets; k++)
        min_given = min_given || rp->budgets[k].budget_min;
    return used * (rp->n_budgets + !min_given + rp->n_points);
}

int cmd_report(int argc, char **argv)
{
    struct report rp = {.m = {.zoo = {.batch = 1}}, .to = remat_train_opts_default(),
                        .n_points = 12, .out = "report.html"};
    char path[PATH_MAX], what[128];
    int rc;

    cli_begin(argc, argv);
    for (int s = 0; s < REMAT_STRATEGY_COUNT; s++)
        rp.use[s] = s != REMAT_STRATEGY_OPTIMAL;
    if ((rc = parse(&rp, argc, argv)) != 0)
        return rc < 0 ? 0 : rc;
    if ((rc = cli_model_load(&rp.m)) != 0 || (rc = load_algos(&rp)) != 0)
        goto out;
    rp.runs = calloc((size_t)(rp.n_budgets + 1) * REMAT_STRATEGY_COUNT, sizeof *rp.runs);
    rp.sweep = calloc((size_t)REMAT_STRATEGY_COUNT * (size_t)(rp.n_points + 1),
                      sizeof *rp.sweep);
    if (!rp.runs || !rp.sweep) {
        rc = cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
        goto out;
    }
    snprintf(what, sizeof what, "report %s", rp.m.spec);
    progress_begin(&rp.pr, what, "plans", n_plans(&rp));
    plan_sections(&rp);
    rc = plan_sweep(&rp);
    progress_end(&rp.pr);
    if (rc || (rc = write_page(&rp)) != 0)
        goto out;
    printf("report written to %s\n", realpath(rp.out, path) ? path : rp.out);
out:
    for (int i = 0; rp.runs && i < (rp.n_budgets + 1) * REMAT_STRATEGY_COUNT; i++)
        remat_schedule_free(rp.runs[i].s);
    free(rp.runs);
    free(rp.sweep);
    remat_algos_free(rp.al);
    cli_model_fini(&rp.m);
    return rc;
}
