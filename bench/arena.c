/*
 * arena.c - how tightly the layout packs real plans: for the zoo's seven networks at the
 * paper's batches and every strategy, at the strategy's minimum budget and halfway
 * between it and `none`'s total, the activation peak (the simulator's, a lower bound on
 * any arena), the packed arena and their ratio, for the layout's packer and for the
 * former one (kept here as the baseline: by decreasing size, each at the lowest free
 * address); the host tier's likewise where a plan offloads. Then the packing time on
 * the deepest network's schedules. Plans use no backend's kernels (no scratch), and
 * the planners' own packing (remat_plan packs every plan it tries) is not timed here.
 * Prints markdown.
 *
 *   arena [--quick] [--dump DIR]
 *     --quick  resnet50 only (a smoke run)
 *     --dump   also writes each plan's device instances to DIR/<net>-<strategy>-<budget>.txt:
 *              a line `n align`, then one `first last bytes buf` per instance
 */
#include "mem/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caps for the slow planners, said in the table's preamble. */
#define OPTIMAL_SECONDS 5.0
#define EXACT_MAX_SETS 20000

struct row {
    size_t peak, arena, fixed, simple, load; /* device arena */
    size_t moved, n_moves;                   /* the layout's moves per step */
    size_t host_peak, host, host_simple;
    size_t n_inst;
    double seconds, simple_seconds; /* packing the device arena */
};

struct ratios {
    double *v;
    size_t n;
};

static struct ratios r_new, r_old, h_new, h_old;
static const char *dump_dir; /* --dump: where the instance sets go, else NULL */
static char dump_name[256];  /* the plan being measured: <net>-<strategy>-<budget> */

static void push(struct ratios *r, double x)
{
    double *v = realloc(r->v, (r->n + 1) * sizeof *v);

    if (!v) {
        fprintf(stderr, "arena: out of memory\n");
        exit(1);
    }
    r->v = v;
    r->v[r->n++] = x;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

static double median(struct ratios *r)
{
    if (!r->n)
        return 0;
    qsort(r->v, r->n, sizeof *r->v, by_value);
    return r->n % 2 ? r->v[r->n / 2] : (r->v[r->n / 2 - 1] + r->v[r->n / 2]) / 2;
}

static double worst(const struct ratios *r)
{
    double w = 0;

    for (size_t i = 0; i < r->n; i++)
        w = r->v[i] > w ? r->v[i] : w;
    return w;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n + 1, size);

    if (!p) {
        fprintf(stderr, "arena: out of memory\n");
        exit(1);
    }
    return p;
}

/* ------------------------------------------------ the former packer, the baseline */

struct span {
    size_t lo, hi;
};

static const struct instance *former_inst;

static int former_by_size(const void *x, const void *y)
{
    const struct instance *a = &former_inst[*(const size_t *)x];
    const struct instance *b = &former_inst[*(const size_t *)y];

    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->buf < b->buf ? -1 : a->buf > b->buf;
}

static int former_by_lo(const void *x, const void *y)
{
    const struct span *a = x, *b = y;

    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The layout's packer before this one, as it was: by decreasing size, each at the
 * lowest address free of the placed instances live at the same time (all scanned). */
static size_t former_pack(struct instance *inst, size_t n, size_t align)
{
    size_t *order = xcalloc(n, sizeof *order), *placed = xcalloc(n, sizeof *placed), end = 0;
    struct span *conf = xcalloc(n, sizeof *conf);

    for (size_t i = 0; i < n; i++)
        order[i] = i;
    former_inst = inst;
    qsort(order, n, sizeof *order, former_by_size);
    for (size_t k = 0; k < n; k++) {
        struct instance *in = &inst[order[k]];
        size_t m = 0, off = 0, bytes = core_align_up(in->bytes, align);

        for (size_t j = 0; j < k; j++) {
            const struct instance *o = &inst[placed[j]];

            if (in->first <= o->last && o->first <= in->last)
                conf[m++] = (struct span){o->offset, o->offset + core_align_up(o->bytes, align)};
        }
        qsort(conf, m, sizeof *conf, former_by_lo);
        for (size_t j = 0; j < m && conf[j].lo < off + bytes; j++)
            off = conf[j].hi > off ? conf[j].hi : off;
        in->offset = off;
        end = off + bytes > end ? off + bytes : end;
        placed[k] = order[k];
    }
    free(order);
    free(placed);
    free(conf);
    return end;
}

/* ----------------------------------------------------------------- the tables */

/* Packs a copy of n instances (the former packer or this one): the end, and the
 * seconds it took. */
static size_t repack(const struct instance *inst, size_t n, size_t align, bool former,
                     double *seconds)
{
    struct instance *c = xcalloc(n, sizeof *c);
    size_t end = 0;
    double t0;

    memcpy(c, inst, n * sizeof *c);
    t0 = core_seconds();
    if (former) {
        end = former_pack(c, n, align);
    } else if (layout_pack(NULL, c, n, align, &end)) {
        fprintf(stderr, "arena: %s\n", remat_errmsg());
        exit(1);
    }
    *seconds = core_seconds() - t0;
    free(c);
    return end;
}

/* Writes n instances to dump_dir/dump_name.txt (spaces in the name as '_'). */
static void dump(const struct instance *inst, size_t n, size_t align)
{
    char path[512];
    FILE *f;

    for (char *c = dump_name; *c; c++)
        *c = *c == ' ' ? '_' : *c;
    snprintf(path, sizeof path, "%s/%s.txt", dump_dir, dump_name);
    if (!(f = fopen(path, "w"))) {
        fprintf(stderr, "arena: cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "%zu %zu\n", n, align);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%zu %zu %zu %d\n", inst[i].first, inst[i].last, inst[i].bytes,
                (int)inst[i].buf);
    fclose(f);
}

/* Lays out one schedule with both packers. */
static bool measure(const remat_tgraph *tg, const remat_schedule *s, struct row *r)
{
    struct layout lay;
    double t;

    if (layout_build(tg, s, 64, &lay))
        return false;
    if (!layout_check(&lay)) {
        fprintf(stderr, "arena: the layout overlaps two live instances\n");
        exit(1);
    }
    r->peak = lay.peak_bytes;
    if (layout_load(NULL, lay.inst, lay.n_inst, lay.align, &r->load)) {
        layout_fini(&lay);
        return false;
    }
    r->n_inst = lay.n_inst;
    if (dump_dir)
        dump(lay.inst, lay.n_inst, lay.align);
    r->arena = lay.arena_bytes;
    r->moved = lay.moves.bytes;
    r->n_moves = lay.moves.n;
    r->fixed = repack(lay.inst, lay.n_inst, lay.align, false, &r->seconds);
    r->simple = repack(lay.inst, lay.n_inst, lay.align, true, &r->simple_seconds);
    r->host_peak = lay.host_peak_bytes;
    r->host = lay.host_bytes;
    r->host_simple = repack(lay.host, lay.n_host, lay.align, true, &t);
    if (!lay.moves.n && r->fixed != lay.arena_bytes) {
        fprintf(stderr, "arena: packing again gave %zu bytes, not %zu\n", r->fixed,
                lay.arena_bytes);
        exit(1);
    }
    layout_fini(&lay);
    return true;
}

static double ratio(size_t a, size_t b)
{
    return b ? (double)a / (double)b : 1.0;
}

static remat_status plan(const remat_tgraph *tg, remat_strategy st, bool min, size_t budget,
                         remat_schedule **s, remat_plan_info *pi)
{
    remat_plan_opts o = {.strategy = st, .budget_min = min, .budget_bytes = budget,
                         .time_limit = OPTIMAL_SECONDS, .max_lower_sets = EXACT_MAX_SETS};

    return remat_plan(tg, &o, s, pi);
}

static void print_row(const char *net, remat_strategy st, const char *budget, const struct row *r)
{
    printf("| %s | %s | %s | %zu | %.1f | %.1f | **%.4f** | %.4f | %.4f | %.4f | ", net,
           remat_strategy_name(st), budget, r->n_inst, (double)r->peak / 1048576.0,
           (double)r->arena / 1048576.0, ratio(r->arena, r->peak), ratio(r->fixed, r->peak),
           ratio(r->simple, r->peak), ratio(r->load, r->peak));
    if (r->n_moves)
        printf("%zu / %.1f ", r->n_moves, (double)r->moved / 1048576.0);
    printf("| %.1f |", 1e3 * r->seconds);
    push(&r_new, ratio(r->arena, r->peak));
    push(&r_old, ratio(r->simple, r->peak));
    if (r->host_peak) {
        printf(" %.1f / %.4f / %.4f |\n", (double)r->host_peak / 1048576.0,
               ratio(r->host, r->host_peak), ratio(r->host_simple, r->host_peak));
        push(&h_new, ratio(r->host, r->host_peak));
        push(&h_old, ratio(r->host_simple, r->host_peak));
    } else {
        printf(" |\n");
    }
}

/* One strategy at its minimum budget and halfway to none's total. */
static void strategy_rows(const char *net, const remat_tgraph *tg, remat_strategy st,
                          size_t none_total)
{
    remat_schedule *s = NULL;
    remat_plan_info pi;
    struct row r = {0};
    size_t half;

    remat_status ps;

    snprintf(dump_name, sizeof dump_name, "%s-%s-min", net, remat_strategy_name(st));
    if ((ps = plan(tg, st, true, 0, &s, &pi)) == REMAT_ERR_UNSUPPORTED &&
        (st == REMAT_STRATEGY_BLOCKS || st == REMAT_STRATEGY_SELECTIVE))
        return; /* a rule that does not apply: no numbered blocks, no attention */
    if (ps || !measure(tg, s, &r)) {
        printf("| %s | %s | min | failed: %s |||||||||\n", net, remat_strategy_name(st),
               remat_errmsg());
        remat_schedule_free(s);
        return;
    }
    print_row(net, st, "min", &r);
    remat_schedule_free(s);
    s = NULL;
    if (st == REMAT_STRATEGY_NONE)
        return; /* one plan whatever the budget */
    half = pi.budget_bytes + (none_total > pi.budget_bytes ? none_total - pi.budget_bytes : 0) / 2;
    memset(&r, 0, sizeof r);
    snprintf(dump_name, sizeof dump_name, "%s-%s-half", net, remat_strategy_name(st));
    if (plan(tg, st, false, half, &s, &pi) || !measure(tg, s, &r))
        printf("| %s | %s | half | failed: %s |||||||||\n", net, remat_strategy_name(st),
               remat_errmsg());
    else
        print_row(net, st, "half", &r);
    remat_schedule_free(s);
}

static void network(const char *name, int64_t batch)
{
    remat_zoo_opts zo = {.batch = batch};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_sim_result sr;
    char net[64];

    snprintf(net, sizeof net, "%s b%lld", name, (long long)batch);
    if (remat_zoo_build(name, &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_plan_none(tg, &s) || remat_sim_run(tg, s, &sr)) {
        printf("| %s | failed: %s |||||||||\n", net, remat_errmsg());
    } else {
        size_t none_total = sr.activation_peak_bytes + remat_tgraph_resident_bytes(tg);

        for (int st = 0; st < REMAT_STRATEGY_COUNT; st++)
            strategy_rows(net, tg, (remat_strategy)st, none_total);
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
    fflush(stdout);
}

/* Packing time on the deepest network's schedules. */
static void scale(void)
{
    static const remat_strategy sts[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_CHEN_SQRTN,
                                         REMAT_STRATEGY_APPROX_TC};
    remat_zoo_opts zo = {.batch = 1};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;

    printf("\n### Packing time at scale (resnet1001, batch 1, each strategy at its minimum "
           "budget)\n\n| strategy | instances | ratio | old ratio | pack s | old pack s |\n"
           "|---|---|---|---|---|---|\n");
    if (remat_zoo_build("resnet1001", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        printf("| failed: %s ||||||\n", remat_errmsg());
        goto out;
    }
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) {
        remat_schedule *s = NULL;
        remat_plan_info pi;
        struct row r = {0};

        snprintf(dump_name, sizeof dump_name, "resnet1001-%s-min", remat_strategy_name(sts[i]));
        if (plan(tg, sts[i], true, 0, &s, &pi) || !measure(tg, s, &r))
            printf("| %s | failed: %s |||||\n", remat_strategy_name(sts[i]), remat_errmsg());
        else
            printf("| %s | %zu | %.4f | %.4f | %.3f | %.3f |\n", remat_strategy_name(sts[i]),
                   r.n_inst, ratio(r.arena, r.peak), ratio(r.simple, r.peak), r.seconds,
                   r.simple_seconds);
        remat_schedule_free(s);
    }
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int64_t batch;
    } nets[] = {{"resnet50", 32}, {"resnet152", 32}, {"vgg19", 32}, {"densenet161", 32},
                {"googlenet", 32}, {"unet", 8}, {"pspnet", 1}};
    bool quick = false;

    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[a], "--dump") && a + 1 < argc) {
            dump_dir = argv[++a];
        } else {
            fprintf(stderr, "usage: arena [--quick] [--dump DIR]\n");
            return 2;
        }
    }

    printf("### Arena packing: the packed arena against the activation peak\n\n"
           "Each plan at the strategy's minimum budget (*min*) and halfway between it and "
           "`none`'s total (*half*); no backend's kernels (no scratch). `optimal` is capped at "
           "%.0f s of MILP and the exact DPs at %d lower sets (they refuse beyond: *failed*). "
           "*ratio*: the layout's arena / peak (the packer's offsets, and where they end above "
           "what the budget leaves the arena, live buffers moved inside it: *moves*, their "
           "count / MiB per step), *fixed*: this packer's offsets alone, *old*: the former "
           "packer (by decreasing size at the lowest free address), *load*: the largest sum "
           "of 64-byte-rounded sizes live at one step / peak (no layout goes below it). "
           "*pack ms*: this packer's time. *host*: the host tier's peak MiB / ratio / old "
           "ratio where the plan offloads.\n\n"
           "| network | strategy | budget | instances | peak MiB | arena MiB | ratio | fixed | "
           "old | load | moves | pack ms | host |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
           OPTIMAL_SECONDS, EXACT_MAX_SETS);
    for (size_t i = 0; i < (quick ? 1 : sizeof nets / sizeof nets[0]); i++)
        network(nets[i].name, nets[i].batch);
    printf("\n| arena / peak over %zu plans | median | worst |\n|---|---|---|\n"
           "| this packer | %.4f | %.4f |\n| old (decreasing size, lowest address) | %.4f | "
           "%.4f |\n",
           r_new.n, median(&r_new), worst(&r_new), median(&r_old), worst(&r_old));
    if (h_new.n)
        printf("| host tier, this packer (%zu plans) | %.4f | %.4f |\n| host tier, old | %.4f | "
               "%.4f |\n",
               h_new.n, median(&h_new), worst(&h_new), median(&h_old), worst(&h_old));
    if (!quick)
        scale();
    free(r_new.v);
    free(r_old.v);
    free(h_new.v);
    free(h_old.v);
    return 0;
}
