/*
 * planners.c - every planner on the authors' seven graph dumps (Kusumoto cost) against
 * the figures of the authors' own solver, on the zoo's seven networks at the paper's
 * settings, planning times, and planning at scale (`planners --scale`: that table alone).
 * Prints markdown tables.
 *
 * The authors' figures below are their solver's, as published with the graphs (bytes;
 * GB = 10^9 bytes): the approximate DP's minimum budget, its time- and memory-centric
 * peaks at that budget, the exact DP's minimum budget and peaks, and Chen's √n peak.
 */
#include "bench.h"
#include "core/rss.h"
#include "remat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct authors {
    const char *file;
    double approx_min, approx_tc, approx_mc, exact_min, exact_tc, exact_mc, chen;
} authors[] = {
    {"cg_resnet50.txt", 1310300253, 1315704864, 1098362912, 1284744337, 1301188640,
     1249808416, 1230174240},
    {"cg_resnet152.txt", 1464398611, 1463423008, 1433051168, 1464398611, 1481019424,
     1413783584, 1472995360},
    {"cg_vgg19.txt", 2107110823, 2613227552, 2569195552, 2107110823, 2613227552, 2569195552,
     2312294432},
    {"cg_densenet.txt", 1676856002, 1673638944, 1506338592, 1676856002, 1673638944,
     1506338592, 1598096544},
    {"cg_googlenet.txt", 488124483, 494888992, 464057632, 489e6, 515e6, 464e6, 605383264},
    {"cg_unet.txt", 5784874113, 5467923976, 4465665544, 5717742155, 5390600200, 5092427272,
     7808796168},
    {"cg_pspnet.txt", 1227148169, 1247462860, 1247448524, 1231e6, 1306e6, 1281e6,
     1771816612},
};

struct result {
    bool ok;
    size_t budget, peak; /* activation budget B and simulated peak */
    double overhead, seconds;
    long long n_sets;
};

/* One remat_plan and its simulation; coarse: remat_plan_opts.coarse_pairs (0 the
 * default; -1 the flat DP, which is also the exact one: dp_within -1). */
static struct result run_coarse(const remat_tgraph *tg, remat_strategy s, bool min,
                                size_t budget, bool authors_lattice, bool authors_bound,
                                int64_t coarse)
{
    remat_plan_opts o = {.strategy = s, .budget_min = min, .budget_bytes = budget,
                         .max_lower_sets = 100000, .time_limit = 20,
                         .authors_lattice = authors_lattice, .authors_bound = authors_bound,
                         .coarse_pairs = coarse, .dp_within = coarse < 0 ? -1 : 0};
    struct result r = {0};
    remat_schedule *sched = NULL;
    remat_plan_info pi;
    remat_sim_result sr;
    double t0 = now();

    if (!remat_plan(tg, &o, &sched, &pi) && !remat_sim_run(tg, sched, &sr)) {
        r.ok = true;
        r.budget = pi.activation_budget_bytes;
        r.peak = sr.activation_peak_bytes;
        r.overhead = sr.overhead;
        r.n_sets = (long long)pi.n_lower_sets;
    } else {
        fprintf(stderr, "planners: %s: %s\n", remat_strategy_name(s), remat_errmsg());
    }
    r.seconds = now() - t0;
    remat_schedule_free(sched);
    return r;
}

static struct result run_opts(const remat_tgraph *tg, remat_strategy s, bool min,
                              size_t budget, bool authors_lattice, bool authors_bound)
{
    return run_coarse(tg, s, min, budget, authors_lattice, authors_bound, 0);
}

static struct result run(const remat_tgraph *tg, remat_strategy s, bool min, size_t budget)
{
    return run_opts(tg, s, min, budget, false, false);
}

static const char *cell(char *buf, size_t n, double ours, double theirs)
{
    snprintf(buf, n, "%.4f / %.4f (%+.1f%%)", ours / 1e9, theirs / 1e9,
             100 * (ours / theirs - 1));
    return buf;
}

static void dumps(const char *dir)
{
    char a[64], b[64], c[64], d[64], e[64], f[64], g[64];

    printf("### The authors' graphs: ours / the authors' solver, GB\n\n"
           "Budgets are activation budgets B (the DP's budget, with `--authors-bound`: the "
           "authors' bound of a block); peaks are simulated at each strategy's own minimum "
           "budget.\n\n"
           "| graph | approx min B | approx-tc peak | approx-mc peak | exact min B | "
           "exact-tc peak | exact-mc peak | chen-sqrtn peak |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof authors / sizeof authors[0]; i++) {
        char path[1024];
        remat_tgraph *tg = NULL;
        struct result at, am, et, em, ch;

        snprintf(path, sizeof path, "%s/%s", dir, authors[i].file);
        if (remat_tgraph_read_dump(path, NULL, NULL, &tg)) {
            printf("| %s | skipped: %s |\n", authors[i].file, remat_errmsg());
            continue;
        }
        /* the authors' bound: their budgets are what it gives */
        at = run_opts(tg, REMAT_STRATEGY_APPROX_TC, true, 0, false, true);
        am = run_opts(tg, REMAT_STRATEGY_APPROX_MC, true, 0, false, true);
        et = run_opts(tg, REMAT_STRATEGY_EXACT_TC, true, 0, false, true);
        em = run_opts(tg, REMAT_STRATEGY_EXACT_MC, true, 0, false, true);
        ch = run(tg, REMAT_STRATEGY_CHEN_SQRTN, true, 0);
        printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", authors[i].file,
               cell(a, sizeof a, (double)at.budget, authors[i].approx_min),
               cell(b, sizeof b, (double)at.peak, authors[i].approx_tc),
               cell(c, sizeof c, (double)am.peak, authors[i].approx_mc),
               cell(d, sizeof d, (double)et.budget, authors[i].exact_min),
               cell(e, sizeof e, (double)et.peak, authors[i].exact_tc),
               cell(f, sizeof f, (double)em.peak, authors[i].exact_mc),
               cell(g, sizeof g, (double)ch.peak, authors[i].chen));
        remat_tgraph_free(tg);
    }
    printf("\nThe exact DP restricted to the chains the authors' solver can reach "
           "(`--authors-lattice`: its depth-first numbering of the lower sets, a transition "
           "only to a set numbered later; docs/planners.md):\n\n"
           "| graph | lower sets reachable | exact min B | exact-tc peak | exact-mc peak |\n"
           "|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof authors / sizeof authors[0]; i++) {
        char path[1024];
        remat_tgraph *tg = NULL;
        struct result et, em;

        snprintf(path, sizeof path, "%s/%s", dir, authors[i].file);
        if (remat_tgraph_read_dump(path, NULL, NULL, &tg))
            continue;
        et = run_opts(tg, REMAT_STRATEGY_EXACT_TC, true, 0, true, true);
        em = run_opts(tg, REMAT_STRATEGY_EXACT_MC, true, 0, true, true);
        printf("| %s | %lld | %s | %s | %s |\n", authors[i].file, em.n_sets,
               cell(d, sizeof d, (double)et.budget, authors[i].exact_min),
               cell(e, sizeof e, (double)et.peak, authors[i].exact_tc),
               cell(f, sizeof f, (double)em.peak, authors[i].exact_mc));
        remat_tgraph_free(tg);
    }
}

/* Every strategy on one training graph, each at its minimum budget. */
static void all_strategies(const char *label, const remat_tgraph *tg, const char *paper)
{
    struct result none = run(tg, REMAT_STRATEGY_NONE, true, 0), best = none;
    const char *best_name = "none";

    printf("| %s | %.3f |", label, (double)none.peak / 1e9);
    for (int s = 1; s < REMAT_STRATEGY_COUNT; s++) {
        struct result r = run(tg, (remat_strategy)s, true, 0);

        if (!r.ok) {
            printf(" — |");
            continue;
        }
        printf(" %.3f (%.0f%%, %.2f) |", (double)r.peak / 1e9,
               100 * (1 - (double)r.peak / (double)none.peak), r.overhead);
        if (r.peak < best.peak) {
            best = r;
            best_name = remat_strategy_name((remat_strategy)s);
        }
    }
    printf(" %s %.0f%% | %s |\n", best_name, 100 * (1 - (double)best.peak / (double)none.peak),
           paper);
}

static void header(const char *first)
{
    printf("| %s | none GB |", first);
    for (int s = 1; s < REMAT_STRATEGY_COUNT; s++)
        printf(" %s |", remat_strategy_name((remat_strategy)s));
    printf(" best | paper |\n|---|---|");
    for (int s = 1; s < REMAT_STRATEGY_COUNT; s++)
        printf("---|");
    printf("---|---|\n");
}

static void zoo(void)
{
    static const struct {
        const char *name;
        int64_t batch;
        const char *paper;
    } nets[] = {{"pspnet", 1, "71%"},   {"unet", 8, "48%"},     {"resnet50", 32, "62%"},
                {"resnet152", 32, "75%"}, {"vgg19", 32, "36%"}, {"densenet161", 32, "81%"},
                {"googlenet", 32, "39%"}};

    printf("\n### The zoo's networks at the paper's settings (FLOP costs)\n\n"
           "Each cell: simulated activation peak in GB at the strategy's minimum budget "
           "(reduction from `none`, overhead = recomputed FLOPs / forward FLOPs). *paper*: "
           "the reduction Kusumoto et al. measured for their best plan (total GPU memory, "
           "parameters included). — : the strategy refused (too many lower sets for the "
           "exact DP, too large for `optimal`).\n\n");
    header("network");
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        remat_zoo_opts o = {.batch = nets[i].batch};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        char label[64];

        snprintf(label, sizeof label, "%s batch %lld", nets[i].name, (long long)nets[i].batch);
        if (remat_zoo_build(nets[i].name, &o, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg))
            printf("| %s | failed: %s |\n", label, remat_errmsg());
        else
            all_strategies(label, tg, nets[i].paper);
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

static void dump_all(const char *dir)
{
    printf("\n### The authors' graphs, every strategy (Kusumoto cost)\n\n");
    header("graph");
    for (size_t i = 0; i < sizeof authors / sizeof authors[0]; i++) {
        char path[1024];
        remat_tgraph *tg = NULL;
        char beat[96];
        double theirs = fmin(fmin(authors[i].approx_mc, authors[i].exact_mc),
                             fmin(authors[i].approx_tc, authors[i].exact_tc));

        snprintf(path, sizeof path, "%s/%s", dir, authors[i].file);
        if (remat_tgraph_read_dump(path, NULL, NULL, &tg))
            continue;
        snprintf(beat, sizeof beat, "authors' best DP %.3f", theirs / 1e9);
        all_strategies(authors[i].file, tg, beat);
        remat_tgraph_free(tg);
    }
}

/* The MILP against the DP plans: at each DP plan's own budget, the optimal plan's
 * overhead and the MILP's proven gap. */
static void optimal_gap(const char *dir)
{
    static const char *const files[] = {"cg_vgg19.txt", "cg_unet.txt"};
    static const remat_strategy dps[] = {REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC,
                                         REMAT_STRATEGY_EXACT_TC, REMAT_STRATEGY_EXACT_MC};

    printf("\n### `optimal` (Checkmate MILP, CBC, 20 s limit) at the DP plans' budgets\n\n"
           "Overheads are simulated (Kusumoto cost). *gap*: the MILP's relative gap to its "
           "best bound when the limit stopped it (0: proven optimal for its model; −1: "
           "another strategy's plan recomputed less and was returned).\n\n"
           "| graph | DP plan | budget GB | DP overhead | optimal overhead | gap | s |\n"
           "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        remat_tgraph *tg = NULL;

        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (remat_tgraph_read_dump(path, NULL, NULL, &tg))
            continue;
        for (size_t k = 0; k < sizeof dps / sizeof dps[0]; k++) {
            struct result dp = run(tg, dps[k], true, 0);
            remat_plan_opts o = {.strategy = REMAT_STRATEGY_OPTIMAL, .time_limit = 20,
                                 .budget_bytes = dp.peak + remat_tgraph_resident_bytes(tg)};
            remat_schedule *s = NULL;
            remat_plan_info pi;
            remat_sim_result r;
            double t0 = now();

            if (!dp.ok)
                continue;
            if (remat_plan(tg, &o, &s, &pi) || remat_sim_run(tg, s, &r))
                printf("| %s | %s | %.3f | %.3f | failed: %s | | |\n", files[i],
                       remat_strategy_name(dps[k]), (double)dp.peak / 1e9, dp.overhead,
                       remat_errmsg());
            else
                printf("| %s | %s | %.3f | %.3f | %.3f | %.2f | %.0f |\n", files[i],
                       remat_strategy_name(dps[k]), (double)dp.peak / 1e9, dp.overhead,
                       r.overhead, pi.optimality_gap, now() - t0);
            remat_schedule_free(s);
        }
        remat_tgraph_free(tg);
    }
}

static void timing(const char *dir)
{
    remat_zoo_opts o = {.batch = 1};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    char path[1024];
    struct result r;

    printf("\n### Planning time on this machine (seconds, one plan at a given budget)\n\n"
           "| graph | strategy | budget | seconds |\n|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof authors / sizeof authors[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, authors[i].file);
        if (remat_tgraph_read_dump(path, NULL, NULL, &tg))
            continue;
        r = run(tg, REMAT_STRATEGY_APPROX_MC, true, 0);
        r = run(tg, REMAT_STRATEGY_APPROX_TC, false, r.budget + remat_tgraph_resident_bytes(tg));
        printf("| %s | approx-tc | its minimum | %.3f |\n", authors[i].file, r.seconds);
        if (!strcmp(authors[i].file, "cg_googlenet.txt")) {
            struct result m = run(tg, REMAT_STRATEGY_EXACT_MC, true, 0);

            printf("| %s | exact-mc, searching the minimum | — | %.1f |\n", authors[i].file,
                   m.seconds);
            r = run(tg, REMAT_STRATEGY_EXACT_TC, false, m.budget + remat_tgraph_resident_bytes(tg));
            printf("| %s | exact-tc | its minimum | %.1f |\n", authors[i].file, r.seconds);
            r = run(tg, REMAT_STRATEGY_EXACT_TC, false, 0);
            printf("| %s | exact-tc | none (loose) | %.1f |\n", authors[i].file, r.seconds);
        }
        remat_tgraph_free(tg);
        tg = NULL;
    }
    for (int k = 0; k < 2; k++) {
        const char *net = k ? "resnet2498" : "resnet1001";

        if (remat_zoo_build(net, &o, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
            remat_graph_free(g);
            g = NULL;
            continue;
        }
        for (int mc = 0; mc < 2; mc++) {
            remat_strategy st = mc ? REMAT_STRATEGY_APPROX_MC : REMAT_STRATEGY_APPROX_TC;

            r = run(tg, st, true, 0);
            printf("| %s (zoo, batch 1, %d planned values) | %s, searching the minimum | — | %.2f |\n",
                   net, remat_tgraph_n_planned(tg), remat_strategy_name(st), r.seconds);
            r = run(tg, st, false, r.budget + remat_tgraph_resident_bytes(tg));
            printf("| %s (zoo, batch 1) | %s | its minimum | %.2f |\n", net,
                   remat_strategy_name(st), r.seconds);
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
        tg = NULL;
        g = NULL;
    }
}

/* The default plan's runs a row of the scale table times (the least seconds shown): a
 * row's time varied by up to 40% from one run to the next on a shared 2-core machine
 * (docs/benchmarks.md, "Twenty-fourth round"). Every run must plan the same peak and
 * overhead. */
#define SCALE_REPS 3

/*
 * Planning at scale: the zoo's deepest networks and GPT-2 of 48 and 1,000 layers at
 * batch 1, each strategy at `--budget min` and at the budget halfway between that
 * minimum and the peak of `none` (the whole remat_plan: the search, the packing), with
 * its planned values, seconds, simulated activation peak and recomputation overhead;
 * then the same with the flat DP (coarse_pairs -1: every pair of lower sets, where the
 * default restricts long blocks to coarse sets past 2^24 pairs; dp_coarse.h; and
 * dp_within -1: the time-centric optimum, where the default takes a chain proven within
 * 0.1% of it past 1,000 values), its seconds and the ratios of the default's peak and
 * overhead to its. The graphs of 10^4 values and more (ResNet-2498, GPT-2 of 1,000
 * layers) are also planned by approx-tc at 2% and 10% of the way from the minimum to
 * `none`'s peak, where their frontiers are widest; GPT-2-1000 at 10% and
 * halfway it is not planned flat by approx-tc (274 s and over 50 s of one core:
 * docs/benchmarks.md gives those runs' figures).
 * hybrid's sweep runs over a thinned family on graphs past 2,048 lower sets, and past
 * 1,000 nodes its runs above the least budget restrict long blocks to coarse sets
 * (docs/planners.md, "Seventeenth round"; the flat columns do not change that). Layouts of more than PACK_QUICK_MIN instances under a budget run
 * the packer's greedy passes alone, stopped past the load + 1/64 that the moves would
 * then replace (layout_build_held): the same plans, arenas and moves here, at a fraction
 * of the time.
 */
static void scale_row(const remat_tgraph *tg, const char *net, int64_t layers,
                      remat_strategy s, bool min, size_t budget, const struct result *have,
                      const char *label)
{
    bool skip_flat = layers >= 1000 && !min && s == REMAT_STRATEGY_APPROX_TC &&
                     strcmp(label, "2%");
    struct result r = have ? *have : run_coarse(tg, s, min, budget, false, false, 0);
    struct result f = {0};
    char name[64];

    for (int k = 1; r.ok && k < SCALE_REPS; k++) {
        struct result again = run_coarse(tg, s, min, budget, false, false, 0);

        if (!again.ok || again.peak != r.peak || again.overhead != r.overhead) {
            fprintf(stderr, "planners: %s %s %s: run %d planned peak %zu overhead %.6f, "
                    "the first %zu %.6f\n", net, remat_strategy_name(s), label, k + 1,
                    again.peak, again.overhead, r.peak, r.overhead);
            r.ok = false;
        }
        r.seconds = again.seconds < r.seconds ? again.seconds : r.seconds;
    }

    if (!skip_flat)
        f = run_coarse(tg, s, min, budget, false, false, -1);
    snprintf(name, sizeof name, "%s", net);
    if (layers > 12)
        snprintf(name, sizeof name, "%s (%lld layers)", net, (long long)layers);
    printf("| %s | %d | %s | %s | %.2f | %.4f | %.3f |", name, remat_tgraph_n_planned(tg),
           remat_strategy_name(s), label, r.seconds,
           r.ok ? (double)r.peak / 1e9 : NAN, r.overhead);
    if (r.ok && f.ok)
        printf(" %.2f | %.4f | %.4f |\n", f.seconds, (double)r.peak / (double)f.peak,
               f.overhead > 0 ? r.overhead / f.overhead : r.overhead > 0 ? INFINITY : 1.0);
    else
        printf(" %s | | |\n", skip_flat ? "not run" : "failed");
}

static void scale(void)
{
    static const struct {
        const char *net;
        int64_t layers;
    } nets[] = {{"resnet152", 0},  {"gpt2", 12},       {"gpt2", 48},
                {"resnet1001", 0}, {"resnet2498", 0}, {"gpt2", 1000}};
    static const remat_strategy st[] = {REMAT_STRATEGY_APPROX_TC, REMAT_STRATEGY_APPROX_MC,
                                        REMAT_STRATEGY_HYBRID};

    printf("\n### Planning at scale (batch 1, seconds on this machine, the least of %d runs; "
           "budget: `--budget min`, "
           "or halfway (2%%, 10%%) of the way from that minimum to the peak of `none`; flat: "
           "every pair of lower sets and the time-centric optimum, ratios default / flat)\n\n"
           "| graph | values | strategy | budget | seconds | activation peak (GB) | overhead "
           "| flat seconds | peak ratio | overhead ratio |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n", SCALE_REPS);
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        remat_zoo_opts o = {.batch = 1, .layers = nets[i].layers};
        remat_graph *g = NULL;
        remat_tgraph *tg = NULL;
        struct result none;

        if (remat_zoo_build(nets[i].net, &o, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
            fprintf(stderr, "planners: %s: %s\n", nets[i].net, remat_errmsg());
            remat_graph_free(g);
            continue;
        }
        none = run(tg, REMAT_STRATEGY_NONE, false, 0);
        for (size_t k = 0; k < sizeof st / sizeof st[0]; k++) {
            struct result m = run(tg, st[k], true, 0);

            scale_row(tg, nets[i].net, nets[i].layers, st[k], true, 0, &m, "min");
            if (!m.ok || !none.ok || none.peak <= m.budget)
                continue;
            if (remat_tgraph_n_planned(tg) >= 10000 && st[k] == REMAT_STRATEGY_APPROX_TC)
                for (int e = 0; e < 2; e++) {
                    static const double at[2] = {0.02, 0.1};
                    static const char *name[2] = {"2%", "10%"};
                    size_t b = m.budget + (size_t)(at[e] * (double)(none.peak - m.budget));

                    scale_row(tg, nets[i].net, nets[i].layers, st[k], false,
                              remat_tgraph_resident_bytes(tg) + b, NULL, name[e]);
                }
            scale_row(tg, nets[i].net, nets[i].layers, st[k], false,
                      remat_tgraph_resident_bytes(tg) + (m.budget + none.peak) / 2, NULL,
                      "halfway");
        }
        remat_tgraph_free(tg);
        remat_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 && strcmp(argv[1], "--scale") ? argv[1] : getenv("REMAT_GRAPHS");
    char probe[1024];
    FILE *f;

    rss_keep_freed(); /* as `remat plan` does */
    if (argc > 1 && !strcmp(argv[1], "--scale")) { /* the scale table alone */
        scale();
        return 0;
    }
    if (!dir)
        dir = "../shared/graphs/kusumoto";
    snprintf(probe, sizeof probe, "%s/cg_vgg19.txt", dir);
    if ((f = fopen(probe, "r"))) {
        fclose(f);
        dumps(dir);
        dump_all(dir);
        optimal_gap(dir);
    } else {
        printf("The authors' graphs: skipped (%s is absent).\n", dir);
    }
    zoo();
    timing(dir);
    scale();
    return 0;
}
