/*
 * test_layout.c - the arena layout (src/mem/layout.c): the packer against a brute-force
 * oracle on small random instance sets (the least end over every order of first-fit
 * placement, which is the optimum: in an optimal packing pushed down and taken by
 * offset, first fit puts each instance no higher); layout_load against a step-by-step
 * sum; layout_check against a plain pairwise test, on valid and broken layouts; larger
 * random sets against a plain greedy; packings worked by hand; and real plans of
 * ResNet-50 at batch 8 (validity, the simulator's peaks, the arena against them).
 *
 * Seed: REMAT_SEED (printed); each random test restarts from it.
 */
#include "harness.h"
#include "mem/layout.h"
#include "sched/schedule.h"

#include <stdint.h>

#define MAXN 7    /* instances of an oracle set */
#define MAXM 2000 /* instances of a larger set */

static uint64_t seed, rng;

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t urand(size_t n)
{
    return (size_t)(next() % n);
}

static void reseed(uint64_t salt)
{
    rng = seed ^ (salt * 0xd1b54a32d192ed03ull);
    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
}

static size_t up(size_t n, size_t align)
{
    return (n + align - 1) / align * align;
}

static bool overlap_time(const struct instance *a, const struct instance *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* Two instances live at once that overlap in the arena (sizes rounded up to align),
 * by comparing every pair. */
static bool plain_valid(const struct instance *in, size_t n, size_t align)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (overlap_time(&in[i], &in[j]) && in[i].bytes && in[j].bytes &&
                in[i].offset < in[j].offset + up(in[j].bytes, align) &&
                in[j].offset < in[i].offset + up(in[i].bytes, align))
                return false;
    return true;
}

/* The largest sum of rounded sizes live at one step, step by step. */
static size_t plain_load(const struct instance *in, size_t n, size_t align)
{
    size_t last = 0, most = 0;

    for (size_t i = 0; i < n; i++)
        last = in[i].last > last ? in[i].last : last;
    for (size_t t = 0; t <= last && n; t++) {
        size_t live = 0;

        for (size_t i = 0; i < n; i++)
            if (in[i].first <= t && t <= in[i].last)
                live += up(in[i].bytes, align);
        most = live > most ? live : most;
    }
    return most;
}

static size_t end_of(const struct instance *in, size_t n, size_t align)
{
    size_t e = 0;

    for (size_t i = 0; i < n; i++)
        if (in[i].bytes && in[i].offset + up(in[i].bytes, align) > e)
            e = in[i].offset + up(in[i].bytes, align);
    return e;
}

static int by_offset(const void *x, const void *y)
{
    const size_t *a = x, *b = y;

    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* First fit: the lowest offset where instance i collides with none of the placed
 * instances live at the same time: the spans they take, by offset, swept for the first
 * gap that holds it. */
static size_t first_fit(const struct instance *in, const bool *placed, size_t n, size_t i,
                        size_t align)
{
    size_t (*span)[2] = malloc((n + 1) * sizeof *span), m = 0, o = 0, a = up(in[i].bytes, align);

    REMAT_ASSERT_TEST(span);
    for (size_t j = 0; j < n; j++)
        if (placed[j] && j != i && in[j].bytes && overlap_time(&in[j], &in[i])) {
            span[m][0] = in[j].offset;
            span[m++][1] = in[j].offset + up(in[j].bytes, align);
        }
    qsort(span, m, sizeof *span, by_offset);
    for (size_t k = 0; k < m && span[k][0] < o + a; k++)
        o = span[k][1] > o ? span[k][1] : o;
    free(span);
    return o;
}

/* The least end over every order of first-fit placement (depth first, cut at the best
 * so far). */
static void oracle_dfs(struct instance *in, bool *placed, size_t n, size_t k, size_t end,
                       size_t align, size_t *best)
{
    if (end >= *best)
        return;
    if (k == n) {
        *best = end;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t e;

        if (placed[i])
            continue;
        in[i].offset = in[i].bytes ? first_fit(in, placed, n, i, align) : 0;
        e = in[i].offset + up(in[i].bytes, align);
        placed[i] = true;
        oracle_dfs(in, placed, n, k + 1, e > end ? e : end, align, best);
        placed[i] = false;
    }
}

static size_t oracle(const struct instance *in0, size_t n, size_t align)
{
    struct instance in[MAXN];
    bool placed[MAXN] = {false};
    size_t best = SIZE_MAX;

    memcpy(in, in0, n * sizeof *in);
    oracle_dfs(in, placed, n, 0, 0, align, &best);
    return best;
}

/* A random set: lifetimes within [0, span), sizes from one of a few classes (ties,
 * multiples of 64, odd bytes, some zeros). */
static void random_set(struct instance *in, size_t n, size_t span, size_t max_len)
{
    int cls = (int)urand(4);

    for (size_t i = 0; i < n; i++) {
        size_t f = urand(span);

        in[i] = (struct instance){(int32_t)i, f, f + urand(max_len + 1), 0, 0};
        in[i].bytes = cls == 0 ? 64 * (1 + urand(4))
                      : cls == 1 ? 1 + urand(300)
                      : cls == 2 ? (urand(8) ? (size_t)64 << urand(5) : 0)
                                 : 1000 + urand(100000);
    }
}

static struct layout view(struct instance *in, size_t n, size_t align)
{
    return (struct layout){.inst = in, .n_inst = n, .align = align};
}

/* Thousands of small sets: never below the oracle's optimum (that would overlap),
 * never below the load, valid, and how often optimal. */
static void test_oracle(void)
{
    size_t n_sets = 3000, n_opt = 0, n_above_load = 0;

    reseed(1);
    for (size_t s = 0; s < n_sets; s++) {
        struct instance in[MAXN];
        size_t n = 1 + urand(MAXN), align = urand(2) ? 64 : 1, end = 0, load = 0, opt;
        struct layout lay = view(in, n, align);

        random_set(in, n, 10, 5);
        opt = oracle(in, n, align);
        CHECK_OK(layout_load(NULL, in, n, align, &load));
        CHECK_OK(layout_pack(NULL, in, n, align, &end));
        CHECK_OR(plain_valid(in, n, align), break, "set %zu: two live instances overlap", s);
        CHECK(layout_check(&lay), "set %zu: layout_check refuses a valid layout", s);
        CHECK(end == end_of(in, n, align), "set %zu: end %zu, offsets end at %zu", s, end,
              end_of(in, n, align));
        CHECK(load == plain_load(in, n, align), "set %zu: load %zu, step by step %zu", s,
              load, plain_load(in, n, align));
        CHECK(opt >= load, "set %zu: the oracle's %zu is below the load %zu", s, opt, load);
        CHECK_OR(end >= opt, break, "set %zu: end %zu below the optimum %zu", s, end, opt);
        n_opt += end == opt;
        n_above_load += opt > load;
    }
    printf("  %zu of %zu sets packed optimally (the optimum above the load in %zu)\n", n_opt,
           n_sets, n_above_load);
    CHECK(n_opt == n_sets, "%zu sets above the optimum", n_sets - n_opt);
}

/* The plain greedy the packer tries among others: by decreasing rounded size, then
 * earliest first step, then longest, then index, each at its first fit. */
static const struct instance *cmp_in;
static size_t cmp_align;

static int by_greedy(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    const struct instance *a = &cmp_in[i], *b = &cmp_in[j];
    size_t sa = up(a->bytes, cmp_align), sb = up(b->bytes, cmp_align);

    if (sa != sb)
        return sa > sb ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->last - a->first != b->last - b->first)
        return a->last - a->first > b->last - b->first ? -1 : 1;
    return i < j ? -1 : i > j;
}

static size_t plain_greedy(struct instance *in, size_t n, size_t align)
{
    size_t *order = malloc((n + 1) * sizeof *order);
    bool *placed = calloc(n + 1, sizeof *placed);

    REMAT_ASSERT_TEST(order && placed);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    cmp_in = in;
    cmp_align = align;
    qsort(order, n, sizeof *order, by_greedy);
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];

        in[i].offset = in[i].bytes ? first_fit(in, placed, n, i, align) : 0;
        placed[i] = true;
    }
    free(order);
    free(placed);
    return end_of(in, n, align);
}

/* Larger sets shaped like schedules (many short lifetimes, some long): valid, at least
 * the load, no worse than the plain greedy, the same offsets when packed again. */
static void test_random_larger(void)
{
    static struct instance in[MAXM], again[MAXM], plain[MAXM];
    size_t at_load = 0, n_sets = 60;

    reseed(2);
    for (size_t s = 0; s < n_sets; s++) {
        size_t n = 20 + urand(s < 50 ? 300 : MAXM - 20), align = 64, end = 0, end2 = 0, load = 0;
        struct layout lay = view(in, n, align);

        random_set(in, n, n, urand(2) ? 8 : n / 3);
        memcpy(plain, in, n * sizeof *in);
        CHECK_OK(layout_load(NULL, in, n, align, &load));
        CHECK_OK(layout_pack(NULL, in, n, align, &end));
        memcpy(again, in, n * sizeof *in);
        CHECK_OK(layout_pack(NULL, again, n, align, &end2));
        CHECK_OR(plain_valid(in, n, align), break, "set %zu (%zu instances): overlap", s, n);
        CHECK(layout_check(&lay), "set %zu: layout_check refuses a valid layout", s);
        CHECK(load == plain_load(in, n, align), "set %zu: load %zu, step by step %zu", s,
              load, plain_load(in, n, align));
        CHECK(end >= load && end == end_of(in, n, align), "set %zu: end %zu, load %zu", s,
              end, load);
        CHECK(end <= plain_greedy(plain, n, align), "set %zu: end %zu above the plain "
              "greedy's %zu", s, end, end_of(plain, n, align));
        CHECK(end2 == end && !memcmp(again, in, n * sizeof *in), "set %zu: packed again, "
              "end %zu and other offsets (first %zu)", s, end2, end);
        at_load += end == load;
    }
    printf("  %zu of %zu sets packed at the load\n", at_load, n_sets);
}

/* layout_check against the pairwise test on layouts broken on purpose: one instance
 * moved onto another live at the same time, or onto one that is not. */
static void test_check(void)
{
    static struct instance in[MAXM];
    size_t n_broken = 0;

    reseed(3);
    for (size_t s = 0; s < 400; s++) {
        size_t n = 2 + urand(s < 300 ? 40 : 400), align = urand(2) ? 64 : 1, end = 0;
        size_t i = urand(n), j = urand(n);
        struct layout lay = view(in, n, align);

        random_set(in, n, n / 2 + 1, 6);
        CHECK_OK(layout_pack(NULL, in, n, align, &end));
        in[i].offset = in[j].offset + (urand(2) && in[j].bytes ? urand(in[j].bytes) : 0);
        lay.host = in; /* the host tier is checked the same way */
        lay.n_host = urand(2) ? n : 0;
        /* the check is on the bytes themselves, not the rounded sizes */
        CHECK(layout_check(&lay) == plain_valid(in, n, 1), "set %zu: layout_check %d, "
              "pairwise %d", s, layout_check(&lay), plain_valid(in, n, 1));
        n_broken += !plain_valid(in, n, 1);
    }
    printf("  %zu of 400 layouts broken\n", n_broken);
    CHECK(n_broken > 50 && n_broken < 400, "%zu broken: the test needs both kinds", n_broken);
}

/* Packs n instances (align 1) and checks the end and, when given, the offsets. */
static void check_packed(const char *what, struct instance *in, size_t n, size_t want_end,
                         const size_t *want_off)
{
    size_t end = 0;

    CHECK_OK(layout_pack(NULL, in, n, 1, &end));
    CHECK(end == want_end, "%s: end %zu, expected %zu", what, end, want_end);
    CHECK(plain_valid(in, n, 1), "%s: overlap", what);
    for (size_t i = 0; want_off && i < n; i++)
        CHECK(in[i].offset == want_off[i], "%s: instance %zu at %zu, expected %zu", what, i,
              in[i].offset, want_off[i]);
}

/* Packings worked by hand (align 1). */
static void test_by_hand(void)
{
    /* two big blocks at different times share offset 0, and a small one between them
     * too */
    {
        struct instance in[] = {{0, 0, 1, 100, 9}, {1, 2, 3, 100, 9}, {2, 1, 2, 5, 9}};
        static const size_t off[] = {0, 0, 100};

        check_packed("disjoint", in, 3, 105, off);
    }
    /* a staircase of nested lifetimes [i, 9 - i]: all live at steps 4 and 5, so the
     * arena is their sum, 1 + 2 + 3 + 4 + 5 */
    {
        struct instance in[5];

        for (size_t i = 0; i < 5; i++)
            in[i] = (struct instance){(int32_t)i, i, 9 - i, i + 1, 0};
        check_packed("nested staircase", in, 5, 15, NULL);
    }
    /* a hole inside a wall of more spans than the passes' sort handles in one run (33
     * of size 2, placed longest first, so not in index order): H1 (4, steps 0-60) at 0,
     * H2 (3, steps 0-1) at 4, the wall at 7..73; X (3, steps 5-6) fits H2's place once
     * H2 is freed: the end is the load at steps 0-1 and 5-6, 4 + 3 + 66 = 73 */
    {
        struct instance in[36];
        size_t off[36];

        in[0] = (struct instance){0, 0, 60, 4, 0};
        in[1] = (struct instance){1, 0, 1, 3, 0};
        in[2] = (struct instance){2, 5, 6, 3, 0};
        for (size_t k = 0; k < 33; k++)
            in[3 + k] = (struct instance){(int32_t)(3 + k), 0, 10 + 7 * k % 33, 2, 0};
        off[0] = 0;
        off[1] = off[2] = 4;
        for (size_t k = 0; k < 33; k++) /* by length, longest first: 10 + 32 at 7 */
            off[3 + k] = 7 + 2 * (32 - 7 * k % 33);
        check_packed("a hole in a wall", in, 36, 73, off);
    }
    /* a chain [i, i + 1] of equal sizes: two live at a time, so two slots */
    {
        struct instance in[12];

        for (size_t i = 0; i < 12; i++)
            in[i] = (struct instance){(int32_t)i, i, i + 1, 7, 0};
        check_packed("chain", in, 12, 14, NULL);
    }
    /* the former packer's miss: A [0,2] x2, B [2,3] x2, C [3,4] x1, D [4,6] x2. By size
     * then first step it puts A at 0, B at 2, D at 0 (it overlaps neither), and C, live
     * with B and D, finds [0,2) and [2,4) taken: 5. The load is 4 (A and B at step 2),
     * met by C at 0 and D at 1 (or a mirror). */
    {
        struct instance in[] = {{0, 0, 2, 2, 0}, {1, 2, 3, 2, 0}, {2, 3, 4, 1, 0},
                                {3, 4, 6, 2, 0}};
        struct instance plain[4];

        memcpy(plain, in, sizeof in);
        CHECK_I64(plain_greedy(plain, 4, 1), 5);
        check_packed("former's miss", in, 4, 4, NULL);
    }
    /* empty instances: offset 0, no room; and none at all */
    {
        struct instance in[] = {{0, 0, 3, 0, 5}, {1, 1, 2, 8, 5}, {2, 2, 2, 0, 5}};
        static const size_t off[] = {0, 0, 0};
        size_t end = 1;

        check_packed("empty", in, 3, 8, off);
        CHECK_OK(layout_pack(NULL, in, 0, 1, &end));
        CHECK_I64(end, 0);
    }
    /* sizes rounded up: two live 1-byte instances take 64 bytes each */
    {
        struct instance in[] = {{0, 0, 1, 1, 0}, {1, 1, 2, 1, 0}};
        size_t end = 0, load = 0;

        CHECK_OK(layout_pack(NULL, in, 2, 64, &end));
        CHECK_OK(layout_load(NULL, in, 2, 64, &load));
        CHECK_I64(end, 128);
        CHECK_I64(load, 128);
        CHECK(in[0].offset % 64 == 0 && in[1].offset % 64 == 0 && in[0].offset != in[1].offset,
              "offsets %zu and %zu", in[0].offset, in[1].offset);
    }
}

/* Real plans of ResNet-50 at batch 8, each strategy at its least budget: the layout
 * valid, its peaks the simulator's, the arena at least the load (itself at least the
 * peak) and no more than the plain greedy's; the ratios printed. */
static void test_resnet50(void)
{
    static const remat_strategy sts[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_APPROX_MC,
                                         REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_CHEN_GREEDY,
                                         REMAT_STRATEGY_SUPERNEURONS, REMAT_STRATEGY_HYBRID};
    remat_zoo_opts zo = {.batch = 8};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;

    if (remat_zoo_build("resnet50", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "resnet50: %s", remat_errmsg());
        goto out;
    }
    for (size_t k = 0; k < sizeof sts / sizeof sts[0]; k++) {
        remat_plan_opts o = {.strategy = sts[k], .budget_min = true};
        const char *name = remat_strategy_name(sts[k]);
        remat_schedule *s = NULL;
        remat_sim_result r;
        struct layout lay, again;
        size_t load = 0, host_load = 0;
        struct instance *plain;

        if (remat_plan(tg, &o, &s, NULL) || remat_sim_run(tg, s, &r)) {
            CHECK(false, "%s: %s", name, remat_errmsg());
            remat_schedule_free(s);
            continue;
        }
        /* the packer's offsets alone: the moves that hold an arena within a cap
         * (arena_cap and held, set by remat_plan) have their own tests (test_relocate.c,
         * test_held) */
        s->arena_cap = 0;
        s->held = false;
        CHECK_OK(layout_build(tg, s, 64, &lay));
        plain = malloc((lay.n_inst + 1) * sizeof *plain);
        REMAT_ASSERT_TEST(plain);
        CHECK_OK(layout_build(tg, s, 64, &again));
        CHECK_OK(layout_load(NULL, lay.inst, lay.n_inst, 64, &load));
        CHECK_OK(layout_load(NULL, lay.host, lay.n_host, 64, &host_load));
        CHECK(layout_check(&lay), "%s: two live instances overlap", name);
        CHECK(plain_valid(lay.inst, lay.n_inst, 64) && plain_valid(lay.host, lay.n_host, 64),
              "%s: two live instances overlap (pairwise)", name);
        CHECK_I64(lay.peak_bytes, r.activation_peak_bytes);
        CHECK_I64(lay.host_peak_bytes, r.host_peak_bytes);
        CHECK(lay.arena_bytes >= load && load >= lay.peak_bytes, "%s: arena %zu, load %zu, "
              "peak %zu", name, lay.arena_bytes, load, lay.peak_bytes);
        CHECK(lay.host_bytes >= host_load && host_load >= lay.host_peak_bytes, "%s: host "
              "%zu, load %zu, peak %zu", name, lay.host_bytes, host_load, lay.host_peak_bytes);
        CHECK(again.arena_bytes == lay.arena_bytes &&
              !memcmp(again.inst, lay.inst, lay.n_inst * sizeof *lay.inst),
              "%s: laid out again differently", name);
        memcpy(plain, lay.inst, lay.n_inst * sizeof *plain);
        CHECK(lay.arena_bytes <= plain_greedy(plain, lay.n_inst, 64), "%s: arena %zu above "
              "the plain greedy's %zu", name, lay.arena_bytes, end_of(plain, lay.n_inst, 64));
        free(plain);
        printf("  %-12s %5zu instances  peak %10zu  arena %10zu  %.4fx", name, lay.n_inst,
               lay.peak_bytes, lay.arena_bytes, layout_ratio(&lay));
        if (lay.n_host)
            printf("  host %.4fx", (double)lay.host_bytes / (double)lay.host_peak_bytes);
        printf("\n");
        layout_fini(&lay);
        layout_fini(&again);
        remat_schedule_free(s);
    }
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Sets whose instances are all live at one step (the host tier's shape, which the
 * packer stacks without its greedy walk): valid, and ending at the sum of the rounded
 * sizes, the least any packing can (every pair overlaps); a few thousand instances, so
 * that the walk it replaces (k^2 log k) would show in the time. */
static void test_stacked(void)
{
    static struct instance in[4000];
    size_t n_sets = 40;

    reseed(5);
    for (size_t s = 0; s < n_sets; s++) {
        size_t n = 1 + urand(s % 4 ? 300 : 4000), align = urand(2) ? 64 : 1, end = 0, sum = 0;
        size_t at = 1000 + urand(100);

        random_set(in, n, 1, 0);
        for (size_t i = 0; i < n; i++) { /* every lifetime holds step `at` */
            in[i].first = at - urand(1000);
            in[i].last = at + urand(1000);
            sum += up(in[i].bytes, align);
        }
        CHECK_OK(layout_pack(NULL, in, n, align, &end));
        CHECK_OR(plain_valid(in, n, align), break, "set %zu: two live instances overlap", s);
        CHECK(end == sum && end_of(in, n, align) == sum,
              "set %zu: %zu instances live at one step end at %zu (offsets %zu), not at the "
              "sum of their sizes %zu", s, n, end, end_of(in, n, align), sum);
    }
}

/* The mending of a packing above the load (layout_mend), worked by hand: T (1 byte,
 * steps 0-1) at 0, L (1, steps 0-5) at 1, P (3, steps 1-3) at 2 and Q (3, steps 2-4) at
 * 5 end at 8, a byte above the load (7, at steps 2 and 3). Q is taken out; at 2 it would
 * displace only P (3 bytes x 3 steps), which then finds no room beside L and Q; at 0 it
 * displaces P and L (9 + 6): P goes to 3 (the first gap of 3 bytes over steps 1-3), L
 * to 6 (its only gap of 1 byte over steps 0-5): end 7. The same set packed at the load
 * stays as it is; and a block above the load that a gap holds goes into it. */
static void test_mend(void)
{
    {
        struct instance in[] = {{0, 0, 1, 1, 0}, {1, 0, 5, 1, 1}, {2, 1, 3, 3, 2},
                                {3, 2, 4, 3, 5}};
        static const size_t off[] = {0, 6, 3, 0};
        size_t end = 0;

        CHECK_OK(layout_mend(NULL, in, 4, 1, &end));
        CHECK(end == 7, "mended: end %zu, expected 7", end);
        CHECK(plain_valid(in, 4, 1), "mended: overlap");
        for (size_t i = 0; i < 4; i++)
            CHECK(in[i].offset == off[i], "mended: instance %zu at %zu, expected %zu", i,
                  in[i].offset, off[i]);
    }
    {   /* at the load already: nothing moves */
        struct instance in[] = {{0, 0, 1, 1, 0}, {1, 0, 5, 1, 6}, {2, 1, 3, 3, 3},
                                {3, 2, 4, 3, 0}};
        size_t end = 0;

        CHECK_OK(layout_mend(NULL, in, 4, 1, &end));
        CHECK(end == 7 && in[1].offset == 6 && in[2].offset == 3 && in[3].offset == 0,
              "at the load: end %zu, offsets %zu %zu %zu", end, in[1].offset, in[2].offset,
              in[3].offset);
    }
    {   /* A (2, steps 0-1), B (2, 1-2), C (2, 2-3): the load is 4, and so is the
         * optimum (A and C share an offset); packed A 0, B 2, C 4 it ends at 6: C goes to
         * 0 */
        struct instance in[] = {{0, 0, 1, 2, 0}, {1, 1, 2, 2, 2}, {2, 2, 3, 2, 4}};
        size_t end = 0;

        CHECK_OK(layout_mend(NULL, in, 3, 1, &end));
        CHECK(end == 4 && in[2].offset == 0 && plain_valid(in, 3, 1),
              "three blocks: end %zu, C at %zu", end, in[2].offset);
    }
}

/* Random small sets packed by first fit in a random order, then mended: valid, never
 * above the packing it was given nor below the oracle's optimum, unchanged where that
 * was at the load; and how often it lowered the end (it must, some of the time). */
static void test_mend_random(void)
{
    size_t n_sets = 3000, n_above = 0, n_lower = 0, n_to_opt = 0;

    reseed(7);
    for (size_t s = 0; s < n_sets; s++) {
        struct instance in[MAXN], was[MAXN];
        bool placed[MAXN] = {false};
        size_t n = 2 + urand(MAXN - 1), align = urand(2) ? 64 : 1, load = 0, end = 0, e0,
               opt, order[MAXN];

        random_set(in, n, 10, 5);
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        for (size_t i = n; i > 1; i--) {
            size_t j = urand(i), t = order[i - 1];

            order[i - 1] = order[j];
            order[j] = t;
        }
        for (size_t k = 0; k < n; k++) {
            size_t i = order[k];

            in[i].offset = in[i].bytes ? first_fit(in, placed, n, i, align) : 0;
            placed[i] = true;
        }
        e0 = end_of(in, n, align);
        memcpy(was, in, n * sizeof *in);
        opt = oracle(in, n, align);
        CHECK_OK(layout_load(NULL, in, n, align, &load));
        CHECK_OK(layout_mend(NULL, in, n, align, &end));
        CHECK_OR(plain_valid(in, n, align), break, "set %zu: mended into an overlap", s);
        CHECK(end == end_of(in, n, align), "set %zu: end %zu, offsets end at %zu", s, end,
              end_of(in, n, align));
        CHECK_OR(end <= e0 && end >= opt, break, "set %zu: mended to %zu from %zu (optimum "
                 "%zu)", s, end, e0, opt);
        if (e0 <= load)
            CHECK(!memcmp(was, in, n * sizeof *in), "set %zu: at the load, yet moved", s);
        n_above += e0 > load;
        n_lower += end < e0;
        n_to_opt += end < e0 && end == opt;
    }
    printf("  %zu of %zu first-fit packings above the load; %zu mended lower, %zu of them to "
           "the optimum\n", n_above, n_sets, n_lower, n_to_opt);
    CHECK(n_lower > 0, "no packing mended");
}

/* The quick packing of more than PACK_QUICK_MIN instances (layout_pack_within): valid,
 * at least the load and at most the plain greedy's end (one of its passes) and the
 * full packer's passes' (which it runs alone); given its own end as give_up, the same
 * offsets (the cut is inclusive); given one byte less, or less than the load, it gives
 * up and leaves the offsets as they were; on one thread (its passes one after another
 * on one lane, not on two) the same offsets, also on a set of lifetimes of one or two
 * steps, which it packs at the load (the passes after the first then stop early), and
 * on one of long lifetimes over few steps, where a pass of the second lane ends lowest
 * (the set that fails when the second lane's offsets are dropped). At most
 * PACK_QUICK_MIN: layout_pack's offsets whatever give_up. */
static void test_quick(void)
{
    enum { QN = PACK_QUICK_MIN + 3000 };
    static struct instance in[QN], again[QN], plain[QN], full[QN];
    remat_allocator one = {harness_one_thread_alloc, NULL};
    size_t n_sets = 6, n_end, load, e2, e_full, n_at_load = 0;

    reseed(6);
    for (size_t s = 0; s < n_sets; s++) {
        size_t n = s != 3 ? PACK_QUICK_MIN + 1 + urand(2999) : PACK_QUICK_MIN, align = 64;
        size_t end = 0, below;

        if (s < 5)
            random_set(in, n, n / 4, s == 4 ? 1 : urand(2) ? 8 : 400);
        else /* long lifetimes over few steps */
            random_set(in, n, n / 7, 2000);
        memcpy(plain, in, n * sizeof *in);
        memcpy(full, in, n * sizeof *in);
        CHECK_OK(layout_load(NULL, in, n, align, &load));
        CHECK_OK(layout_pack(NULL, full, n, align, &e_full));
        CHECK_OK(layout_pack_within(NULL, in, n, align, SIZE_MAX - 1, &end));
        if (n <= PACK_QUICK_MIN) { /* layout_pack itself */
            CHECK(end == e_full && !memcmp(in, full, n * sizeof *in),
                  "set %zu: %zu instances, not layout_pack's offsets", s, n);
            continue;
        }
        CHECK_OR(plain_valid(in, n, align), break, "set %zu (%zu): overlap", s, n);
        CHECK(end >= load && end == end_of(in, n, align) && end >= e_full,
              "set %zu: end %zu, load %zu, full packer %zu", s, end, load, e_full);
        CHECK(end <= plain_greedy(plain, n, align), "set %zu: end %zu above the plain "
              "greedy's %zu", s, end, end_of(plain, n, align));
        memcpy(again, in, n * sizeof *in);
        CHECK_OK(layout_pack_within(&one, again, n, align, SIZE_MAX - 1, &e2));
        CHECK(e2 == end && !memcmp(again, in, n * sizeof *in),
              "set %zu: on one thread end %zu, on two %zu, or other offsets", s, e2, end);
        CHECK_OK(layout_pack_within(NULL, again, n, align, end, &e2));
        CHECK(e2 == end && !memcmp(again, in, n * sizeof *in),
              "set %zu: given its own end %zu, end %zu or other offsets", s, end, e2);
        for (int k = 0; k < 2; k++) {
            below = k ? load - 1 : end - 1;
            n_end = end_of(again, n, align);
            CHECK(layout_pack_within(NULL, again, n, align, below, &e2) ==
                      REMAT_ERR_INFEASIBLE && !memcmp(again, in, n * sizeof *in),
                  "set %zu: packed within %zu (end %zu, load %zu, offsets end at %zu)", s,
                  below, end, load, n_end);
        }
        printf("  %zu instances: load %zu, quick %.4fx, full %.4fx\n", n, load,
               (double)end / (double)load, (double)e_full / (double)load);
        n_at_load += end == load;
    }
    CHECK(n_at_load > 0, "no quick packing met its load: the first pass's stopping the "
          "second untried");
}

/* layout_build_held against what it replaces (a plain layout_build, then layout_tighten
 * to the load plus 1% where the offsets end more than 1/64 above the load), on ResNet-50's
 * plans at their least budgets (under PACK_QUICK_MIN instances: the same layout). */
static void test_held(void)
{
    static const remat_strategy sts[] = {REMAT_STRATEGY_NONE, REMAT_STRATEGY_SUPERNEURONS,
                                         REMAT_STRATEGY_HYBRID};
    remat_zoo_opts zo = {.batch = 32};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    size_t n_moved = 0;

    if (remat_zoo_build("resnet50", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg)) {
        CHECK(false, "resnet50: %s", remat_errmsg());
        goto out;
    }
    for (size_t k = 0; k < sizeof sts / sizeof sts[0]; k++) {
        remat_plan_opts o = {.strategy = sts[k], .budget_min = true};
        remat_schedule *s = NULL;
        struct layout old, held;
        size_t load, want = 0, limit = 1;

        if (remat_plan(tg, &o, &s, NULL)) {
            CHECK(false, "%s: %s", remat_strategy_name(sts[k]), remat_errmsg());
            continue;
        }
        s->arena_cap = 0;
        s->held = false; /* a plain layout_build */
        CHECK_OK(layout_build(tg, s, 64, &old));
        load = layout_load_bytes(&old);
        if (old.arena_bytes > load + load / 64) {
            want = (load + load / 100 + 63) / 64 * 64;
            if (layout_tighten(&old, want) == REMAT_ERR_INFEASIBLE)
                want = 0;
        }
        CHECK_OK(layout_build_held(tg, s, 64, &held, &limit));
        CHECK(limit == want && held.arena_bytes == old.arena_bytes &&
                  held.moves.n == old.moves.n && held.n_inst == old.n_inst &&
                  !memcmp(held.inst, old.inst, old.n_inst * sizeof *old.inst) &&
                  layout_check(&held),
              "%s: held %zu (limit %zu, %zu moves), the old way %zu (limit %zu, %zu moves)",
              remat_strategy_name(sts[k]), held.arena_bytes, limit, held.moves.n,
              old.arena_bytes, want, old.moves.n);
        n_moved += old.moves.n > 0;
        layout_fini(&old);
        layout_fini(&held);
        remat_schedule_free(s);
    }
    printf("  %zu of %zu plans held with moves\n", n_moved, sizeof sts / sizeof sts[0]);
out:
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* A failed check (with the library's message) unless st is REMAT_OK. */
static bool ok(remat_status st)
{
    CHECK(st == REMAT_OK, "%s: %s", remat_status_name(st), remat_errmsg());
    return st == REMAT_OK;
}

/* The trainer's layout of a planned schedule (layout_build, as the executor calls it) is
 * the plan's: on GPT-2 of 200 layers (13,000 instances and more, past PACK_QUICK_MIN) at
 * a budget a tenth of the way from each strategy's least total to `none`'s, the arena
 * is the one remat_plan reports. chen-sqrtn's plan is one where the full packing (what
 * the layout of a schedule not held did) ends lower than the greedy passes that planned
 * it (1,730,322,432 bytes against 1,732,911,104): the check sees that difference. */
static void test_planned(void)
{
    static const remat_strategy sts[] = {REMAT_STRATEGY_CHEN_SQRTN, REMAT_STRATEGY_HYBRID,
                                         REMAT_STRATEGY_APPROX_TC};
    remat_zoo_opts zo = {.batch = 1, .layers = 200};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_plan_opts on = {.strategy = REMAT_STRATEGY_NONE};
    remat_plan_info pi;
    remat_schedule *s = NULL;
    size_t none = 0, n_lower = 0;

    if (remat_zoo_build("gpt2", &zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg) ||
        remat_plan(tg, &on, &s, &pi)) {
        CHECK(false, "gpt2: %s", remat_errmsg());
        goto out;
    }
    none = pi.total_bytes;
    for (size_t k = 0; k < sizeof sts / sizeof sts[0]; k++) {
        remat_plan_opts o = {.strategy = sts[k], .budget_min = true};
        struct layout lay, full;

        remat_schedule_free(s);
        s = NULL;
        if (!ok(remat_plan(tg, &o, &s, &pi)))
            continue;
        o.budget_min = false;
        o.budget_bytes = pi.total_bytes + (none - pi.total_bytes) / 10;
        remat_schedule_free(s);
        s = NULL;
        if (!ok(remat_plan(tg, &o, &s, &pi)) || !ok(layout_build(tg, s, ARENA_ALIGN, &lay)))
            continue;
        CHECK(s->held && lay.n_inst > PACK_QUICK_MIN && lay.arena_bytes == pi.arena_bytes &&
                  layout_check(&lay),
              "%s: held %d, %zu instances: the trainer's arena %zu, the plan's %zu",
              remat_strategy_name(sts[k]), s->held, lay.n_inst, lay.arena_bytes,
              pi.arena_bytes);
        s->held = false; /* the full packing */
        s->arena_cap = 0;
        if (ok(layout_build(tg, s, ARENA_ALIGN, &full))) {
            n_lower += full.arena_bytes < lay.arena_bytes;
            printf("  %s: %zu instances, arena %zu (the full packing %zu)\n",
                   remat_strategy_name(sts[k]), lay.n_inst, lay.arena_bytes, full.arena_bytes);
            layout_fini(&full);
        }
        layout_fini(&lay);
    }
    CHECK(n_lower > 0, "the full packing never ended lower: the held layout's rule untested");
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    const char *e = getenv("REMAT_SEED");

    seed = e ? strtoull(e, NULL, 10) : 20240611;
    RUN(test_by_hand);
    RUN(test_oracle);
    RUN(test_check);
    RUN(test_random_larger);
    RUN(test_resnet50);
    RUN(test_stacked);
    RUN(test_mend);
    RUN(test_mend_random);
    RUN(test_quick);
    RUN(test_held);
    RUN(test_planned);
    return harness_end();
}
