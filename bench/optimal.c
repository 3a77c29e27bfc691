/*
 * optimal.c - the `optimal` strategy (Checkmate's MILP on CBC, with the retention bound)
 * at scale: its overhead, proven gap and time, and every other strategy's overhead at
 * the same budget, on the zoo's ResNet-50 at batch 32 (the approx-mc least budget) and
 * on random layered graphs of 1,000 nodes at 0.8 and 0.9 of the topological-order peak
 * (the `none` strategy's). Prints a markdown table.
 *
 *   optimal [--time-limit S] [--quick|--alone] [--row R]
 *                                          the table (S: seconds per `optimal` plan, 300;
 *                                          --quick: of the others only approx-tc and
 *                                          approx-mc; --alone: none of them; --row:
 *                                          only row R, 0 to 2)
 *   optimal --graph FILE [--nodes N] [--seed S]
 *                                          writes the layered graph as a dump and exits
 *
 * The layered graphs follow the description of the random layered graphs that Moccasin
 * (Bartan et al., ICML 2023) takes from Gagrani et al. (NeurIPS 2022, appendix A): nodes
 * in layers, each node reading nodes of the layer before and, now and then, of an earlier
 * layer (a skip), sized to Moccasin's largest (1,000 nodes, about 5,875 edges). The
 * generator here is written from that description alone, its parameters picked to meet
 * those sizes:
 *   - layers of a width drawn uniformly from 5 to 15 nodes, the first reading the input;
 *   - each later node draws an in-degree d uniformly from 2 to 14 and picks d inputs,
 *     each from the layer before with probability 0.8, else from any earlier layer
 *     (a pick already taken is dropped, so d is at most the candidates);
 *   - a node nobody reads becomes one more input of a node of the next layer, and the
 *     last node (the loss) reads the whole last layer;
 *   - each node is a convolution (T = 10; its backward reads its inputs and a weight of
 *     1 KiB) with probability 1/2, a product (T = 1; its backward reads its inputs) with
 *     1/4, a sum (T = 1; its backward reads no value) with 1/4 (the first layer is all
 *     convolutions); its output has 1 to 32 units of 256 KiB, uniformly.
 * All draws come from splitmix64 seeded with --seed (default 1), so a seed names a graph.
 */
#include "bench.h"
#include "plan/dag.h"
#include "plan/planners.h"
#include "remat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 20000
#define UNIT_BYTES (256 << 10)

static uint64_t rng;

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int uniform(int lo, int hi)
{
    return lo + (int)(next() % (uint64_t)(hi - lo + 1));
}

enum kind { CONV, MUL, ADD };

struct layered {
    int n, n_edges;
    int layer[MAX_NODES], first[MAX_NODES + 1]; /* node -> layer; layer -> first node */
    enum kind kind[MAX_NODES];
    int units[MAX_NODES];
    int *in_at, *in;                            /* node -> its inputs (CSR) */
};

static bool has_input(const struct layered *g, const int *deg, int j, int i)
{
    for (int e = 0; e < deg[j]; e++)
        if (g->in[g->in_at[j] + e] == i)
            return true;
    return false;
}

/* The graph of n nodes for seed; false when out of memory. */
static bool layered_make(struct layered *g, int n, uint64_t seed)
{
    int n_layers = 0, *deg, cap = 32; /* 10 drawn, 15 unread of the layer before, spare */
    bool *read;

    rng = seed;
    g->n = n;
    for (int v = 0; v < n - 1; n_layers++) {
        g->first[n_layers] = v;
        for (int w = uniform(5, 15); w > 0 && v < n - 1; w--)
            g->layer[v++] = n_layers;
    }
    g->first[n_layers] = n - 1;
    g->layer[n - 1] = n_layers;
    g->in_at = calloc((size_t)n + 1, sizeof *g->in_at);
    g->in = calloc((size_t)n * (size_t)cap, sizeof *g->in);
    deg = calloc((size_t)n, sizeof *deg);
    read = calloc((size_t)n, sizeof *read);
    if (!g->in_at || !g->in || !deg || !read)
        return false;
    for (int v = 0; v < n; v++) {
        int l = g->layer[v];

        g->in_at[v] = v * cap;
        g->kind[v] = l == 0 || next() % 2 ? CONV : next() % 2 ? MUL : ADD;
        g->units[v] = uniform(1, 32);
        if (l == 0 || v == n - 1)
            continue;
        for (int d = uniform(2, 14); d > 0; d--) {
            int lo = next() % 10 < 8 ? g->first[l - 1] : 0, i = uniform(lo, g->first[l] - 1);

            if (!has_input(g, deg, v, i)) {
                g->in[g->in_at[v] + deg[v]++] = i;
                read[i] = true;
            }
        }
    }
    for (int v = 0; v < n - 1; v++) { /* every value read: by the next layer, or the loss */
        int l = g->layer[v], j;

        if (read[v])
            continue;
        j = l + 1 < n_layers ? uniform(g->first[l + 1], g->first[l + 2] - 1) : n - 1;
        g->in[g->in_at[j] + deg[j]++] = v;
    }
    g->kind[n - 1] = ADD;
    g->n_edges = 0;
    for (int v = 0; v < n; v++)
        g->n_edges += g->layer[v] > 0 ? deg[v] : 0;
    for (int v = n; v-- > 0;) /* compact to CSR */
        g->in_at[v + 1] = deg[v];
    g->in_at[0] = 0;
    for (int v = 0, at = 0; v < n; v++) {
        memmove(g->in + at, g->in + (size_t)v * (size_t)cap, sizeof *g->in * (size_t)deg[v]);
        at += deg[v];
        g->in_at[v + 1] = at;
    }
    free(deg);
    free(read);
    return true;
}

static const char *type_name(enum kind k)
{
    return k == CONV ? "Convolution2DFunction" : k == MUL ? "Mul" : "Add";
}

/*
 * The dump (docs/formats.md): variable 0 the input, 1 + v node v's output, 1 + n + c
 * the weight of the c-th convolution; forward records in node order, then their
 * backward records in the same order.
 */
static void layered_write(const struct layered *g, FILE *f)
{
    int n = g->n, n_conv = 0, w;

    for (int v = 0; v < n; v++)
        n_conv += g->kind[v] == CONV;
    fprintf(f, "%d %d\n0 %d 0\n", 1 + n + n_conv, 2 * n, 4 * UNIT_BYTES);
    for (int v = 0; v < n; v++)
        fprintf(f, "%d %lld _\n", 1 + v, (long long)g->units[v] * UNIT_BYTES);
    for (int c = 0; c < n_conv; c++)
        fprintf(f, "%d 1024 /layered/conv%d/W\n", 1 + n + c, c);
    for (int pass = 0; pass < 2; pass++) {
        w = 1 + n;
        for (int v = 0; v < n; v++) {
            int k = g->in_at[v + 1] - g->in_at[v], conv = g->kind[v] == CONV;
            bool first = g->layer[v] == 0;

            if (pass == 0) {
                fprintf(f, "forward\n%d 1\n", (first ? 1 : k) + conv);
                for (int e = g->in_at[v]; e < g->in_at[v + 1] || (first && e == g->in_at[v]);
                     e++)
                    fprintf(f, "%d _\n", first ? 0 : 1 + g->in[e]);
                if (conv)
                    fprintf(f, "%d _\n", w);
                fprintf(f, "%d\n%s\n{}\n", 1 + v, type_name(g->kind[v]));
            } else {
                int reads = g->kind[v] == ADD ? 0 : (first ? 1 : k) + conv;

                fprintf(f, "backward\n%d %d\n%d gradient\n", 1 + reads, (first ? 0 : k) + conv,
                        1 + v);
                for (int e = g->in_at[v]; reads > 0 && e < g->in_at[v] + (first ? 1 : k); e++)
                    fprintf(f, "%d input\n", first ? 0 : 1 + g->in[e]);
                if (conv && reads > 0)
                    fprintf(f, "%d input\n", w);
                for (int e = g->in_at[v]; !first && e < g->in_at[v + 1]; e++)
                    fprintf(f, "%d\n", 1 + g->in[e]);
                if (conv)
                    fprintf(f, "%d\n", w);
                fprintf(f, "%s\n{}\n", type_name(g->kind[v]));
            }
            w += conv;
        }
    }
}

/* Writes the layered graph of n nodes for seed to path; false on failure. */
static bool layered_dump(const char *path, int n, uint64_t seed, int *n_edges)
{
    struct layered *g = calloc(1, sizeof *g);
    FILE *f = NULL;
    bool ok = g && n >= 20 && n <= MAX_NODES && layered_make(g, n, seed) &&
              (f = fopen(path, "w")) != NULL;

    if (ok) {
        layered_write(g, f);
        ok = !ferror(f);
        *n_edges = g->n_edges;
    }
    if (f && fclose(f))
        ok = false;
    if (g) {
        free(g->in_at);
        free(g->in);
    }
    free(g);
    return ok;
}

/* ------------------------------------------------------------------ the table */

static const char *const others[] = {"approx-tc", "approx-mc", "exact-tc", "exact-mc",
                                     "chen-sqrtn", "chen-greedy", "superneurons", "hybrid"};
#define N_OTHERS (sizeof others / sizeof *others)

struct outcome {
    bool ok;
    double overhead, gap, seconds;
    size_t peak;
};

/*
 * One plan at `total` bytes (resident included), simulated. `optimal` is called
 * directly (plan_optimal), so that the figures are the MILP's own: remat_plan also
 * plans every other strategy afterwards and keeps the best, which on a 1,000-node graph
 * takes the exact DPs far longer than the time limit. The exact DPs get at most 5,000
 * lower sets.
 */
static struct outcome plan_at(const remat_tgraph *tg, remat_strategy s, size_t total,
                              double limit)
{
    remat_plan_opts o = {.strategy = s, .budget_bytes = total, .time_limit = limit,
                         .max_lower_sets = 5000};
    struct outcome r = {.gap = -1};
    remat_schedule *sched = NULL;
    remat_plan_info pi = {0};
    remat_sim_result sr;
    double t0 = now();
    struct dag d;
    remat_status st;

    if (s == REMAT_STRATEGY_OPTIMAL) {
        if (!(st = dag_build(tg, &d))) {
            st = plan_optimal(tg, &d, total - remat_tgraph_resident_bytes(tg), limit, &sched,
                              &pi);
            dag_fini(&d);
        }
    } else {
        st = remat_plan(tg, &o, &sched, &pi);
    }
    if (st)
        fprintf(stderr, "optimal: %s: %s\n", remat_strategy_name(s), remat_errmsg());
    if (!st && !remat_sim_run(tg, sched, &sr) &&
        sr.activation_peak_bytes + remat_tgraph_resident_bytes(tg) <= total) {
        r.ok = true;
        r.overhead = sr.overhead;
        r.peak = sr.activation_peak_bytes;
        r.gap = pi.optimality_gap;
    }
    r.seconds = now() - t0;
    remat_schedule_free(sched);
    return r;
}

static bool alone; /* --alone: `optimal` only */

static void row(const char *name, const remat_tgraph *tg, int nodes, size_t total,
                double limit, bool quick)
{
    struct outcome opt = plan_at(tg, REMAT_STRATEGY_OPTIMAL, total, limit);
    char cell[64];

    printf("| %s | %d | %.4f | ", name, nodes, (double)total / 1e9);
    if (opt.ok)
        printf("%.4f | %.4f | %.0f |", opt.overhead, opt.gap, opt.seconds);
    else
        printf("— | — | %.0f |", opt.seconds);
    for (size_t k = 0; k < N_OTHERS; k++) {
        struct outcome r = {0};

        if (!quick || (k < 2 && !alone))
            r = plan_at(tg, remat_strategy_from_name(others[k]), total, limit);
        snprintf(cell, sizeof cell, r.ok ? " %.4f |" : " — |", r.overhead);
        printf("%s", cell);
    }
    printf("\n");
    fflush(stdout);
}

static remat_tgraph *zoo(const char *name, int batch)
{
    remat_zoo_opts zo = {.batch = batch};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;

    if (remat_zoo_build(name, &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg))
        fprintf(stderr, "optimal: %s: %s\n", name, remat_errmsg());
    remat_graph_free(g);
    return tg;
}

/* The approx-mc least total budget of tg. */
static size_t approx_mc_min(const remat_tgraph *tg)
{
    remat_plan_opts o = {.strategy = REMAT_STRATEGY_APPROX_MC, .budget_min = true};
    remat_schedule *s = NULL;
    remat_plan_info pi = {0};

    if (remat_plan(tg, &o, &s, &pi))
        pi.budget_bytes = 0;
    remat_schedule_free(s);
    return pi.budget_bytes;
}

/* The topological-order activation peak (the `none` strategy's). */
static size_t none_peak(const remat_tgraph *tg)
{
    remat_schedule *s = NULL;
    remat_sim_result r = {0};

    if (remat_plan_none(tg, &s) || remat_sim_run(tg, s, &r))
        r.activation_peak_bytes = 0;
    remat_schedule_free(s);
    return r.activation_peak_bytes;
}

static int table(double limit, bool quick, int only)
{
    const char *path = "/tmp/remat_layered_1000.txt";
    remat_tgraph *tg;
    int edges = 0;

    printf("| graph | nodes | budget (GB) | overhead | proven gap | seconds |");
    for (size_t k = 0; k < N_OTHERS; k++)
        printf(" %s |", others[k]);
    printf("\n|---|---|---|---|---|---|");
    for (size_t k = 0; k < N_OTHERS; k++)
        printf("---|");
    printf("\n");
    if (only <= 0 && (tg = zoo("resnet50", 32))) {
        row("resnet50 b32, approx-mc min", tg, remat_tgraph_n_ops(tg),
            approx_mc_min(tg), limit, quick);
        remat_tgraph_free(tg);
    }
    if (!layered_dump(path, 1000, 1, &edges)) {
        fprintf(stderr, "optimal: cannot write %s\n", path);
        return 1;
    }
    if (remat_tgraph_read_dump(path, NULL, NULL, &tg)) {
        fprintf(stderr, "optimal: %s\n", remat_errmsg());
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        double share = k ? 0.9 : 0.8;
        size_t peak = none_peak(tg), res = remat_tgraph_resident_bytes(tg);
        char name[96];

        if (only >= 0 && only != k + 1)
            continue;
        snprintf(name, sizeof name, "layered seed 1 (%d edges), %.1f x topo peak", edges, share);
        row(name, tg, remat_tgraph_n_ops(tg), res + (size_t)(share * (double)peak), limit,
            quick);
    }
    remat_tgraph_free(tg);
    return 0;
}

int main(int argc, char **argv)
{
    const char *graph = NULL;
    double limit = 300;
    int nodes = 1000, edges = 0;
    uint64_t seed = 1;
    bool quick = false;
    int only = -1;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--graph") && i + 1 < argc)
            graph = argv[++i];
        else if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            nodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--time-limit") && i + 1 < argc)
            limit = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--alone"))
            quick = alone = true;
        else if (!strcmp(argv[i], "--row") && i + 1 < argc)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: optimal [--time-limit S] [--quick|--alone] [--row 0|1|2] "
                    "| --graph FILE [--nodes N] [--seed S]\n");
            return 2;
        }
    }
    if (graph) {
        if (!layered_dump(graph, nodes, seed, &edges)) {
            fprintf(stderr, "optimal: cannot write the %d-node graph to %s (20 to %d "
                    "nodes)\n", nodes, graph, MAX_NODES);
            return 1;
        }
        printf("%s: %d nodes, %d edges, seed %llu\n", graph, nodes, edges,
               (unsigned long long)seed);
        return 0;
    }
    return table(limit, quick, only);
}
