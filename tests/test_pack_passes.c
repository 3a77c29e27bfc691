/*
 * test_pack_passes.c - what the packer's greedy passes stand on, against plain answers:
 *
 * The sweep (src/mem/pack_sweep.c): its offsets against a plain best fit in order of
 * first step written here (for each instance, every placed one live at its first step
 * gathered, sorted by offset, and the smallest gap that holds it taken, the lowest of
 * equal ones, else the top of them), on random sets with ties of first step, instances
 * of size 0, lifetimes of one step and of nearly all; its cut; and through
 * layout_pack_within, a set of nested lifetimes past PACK_QUICK_MIN (a forward that
 * keeps every value to its backward, with one-step scratch) packed at its load.
 *
 * The occupancy tree (src/mem/pack_occ.c): instances placed at random ranks and bytes
 * (overlapping freely, touching, of lifetimes from one rank to all), and after each,
 * queries over random rank ranges whose runs, merged here, must cover exactly the bytes
 * of the placed instances that meet the range, and whose count of placed instances must
 * be theirs; with a bound below the runs' count, SIZE_MAX and the output untouched.
 * And the quick packing of a random set past PACK_QUICK_MIN (the sweep, then passes on
 * the tree: its instances overlap about 2,000 others on average) with its N-th allocation failing, for N across all it makes: the tree, the
 * sweep and the second lane give way silently, so the offsets are those of the packing
 * that fails nothing, or the packing fails as out of memory; nothing leaks either way.
 * And the tree alone with its k-th allocation failing: right runs until then, refusals
 * after (never runs that miss bytes), nothing left once freed.
 *
 * Seed: REMAT_SEED (printed).
 */
#include "harness.h"
#include "mem/pack_run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng;

static size_t urand(size_t n)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (size_t)((z ^ (z >> 31)) % n);
}

struct set {
    size_t n, nu;
    size_t *size, *lo, *hi, *ord, *off, *want;
};

static const struct set *cmp_set;

/* First step ascending, then size descending, then index. */
static int by_first(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    const struct set *s = cmp_set;

    if (s->lo[i] != s->lo[j])
        return s->lo[i] < s->lo[j] ? -1 : 1;
    if (s->size[i] != s->size[j])
        return s->size[i] > s->size[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int by_span_lo(const void *x, const void *y)
{
    const struct span *a = x, *b = y;

    return a->lo != b->lo ? (a->lo < b->lo ? -1 : 1) : (a->hi > b->hi) - (a->hi < b->hi);
}

/* The plain best fit in s->ord into s->want; its end. */
static size_t plain_best_fit(const struct set *s)
{
    struct span *sp = malloc((s->n + 1) * sizeof *sp);
    size_t end = 0;
    bool *placed = calloc(s->n + 1, sizeof *placed);

    REMAT_ASSERT_TEST(sp && placed);
    for (size_t k = 0; k < s->n; k++) {
        size_t i = s->ord[k], a = s->size[i], m = 0, cur = 0, best = SIZE_MAX, gap = SIZE_MAX;

        for (size_t j = 0; j < s->n; j++)
            if (placed[j] && s->size[j] && s->lo[j] <= s->lo[i] && s->lo[i] < s->hi[j]) {
                sp[m++] = (struct span){s->want[j], s->want[j] + s->size[j]};
            }
        qsort(sp, m, sizeof *sp, by_span_lo);
        for (size_t q = 0; q < m; q++) {
            REMAT_ASSERT_TEST(sp[q].lo >= cur); /* live at one step: disjoint */
            if (sp[q].lo - cur >= a && sp[q].lo - cur < gap) {
                gap = sp[q].lo - cur;
                best = cur;
            }
            cur = sp[q].hi;
        }
        s->want[i] = !a ? 0 : best != SIZE_MAX ? best : cur;
        end = s->want[i] + a > end ? s->want[i] + a : end;
        placed[i] = true;
    }
    free(sp);
    free(placed);
    return end;
}

static void set_alloc(struct set *s, size_t n)
{
    size_t *w = calloc(6 * n + 1, sizeof *w);

    REMAT_ASSERT_TEST(w);
    *s = (struct set){n, 0, w, w + n, w + 2 * n, w + 3 * n, w + 4 * n, w + 5 * n};
}

/* A random set over `steps` steps: sizes from a few classes (so that gaps of equal size
 * tie), some zero; lifetimes short, long or to the end. */
static void random_set(struct set *s, size_t steps)
{
    static const size_t cls[] = {0, 64, 128, 192, 256, 1024, 4096, 4160};

    for (size_t i = 0; i < s->n; i++) {
        size_t f = urand(steps), kind = urand(4);
        size_t len = kind == 0 ? 1 : kind == 1 ? 1 + urand(4) : kind == 2 ? 1 + urand(steps / 2 + 1)
                                                                          : steps - f;

        s->size[i] = urand(10) ? cls[1 + urand(7)] : cls[urand(2)] + 64 * urand(3);
        s->lo[i] = f;
        s->hi[i] = f + len < steps ? f + len : steps;
    }
    s->nu = steps;
    for (size_t i = 0; i < s->n; i++)
        s->ord[i] = i;
    cmp_set = s;
    qsort(s->ord, s->n, sizeof *s->ord, by_first);
}

/* Some instance was placed below one live at its first step: in a gap, not on top. */
static bool used_gap(const struct set *s)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->n && s->size[i]; j++)
            if (s->size[j] && s->want[j] > s->want[i] && s->lo[j] <= s->lo[i] &&
                s->lo[i] < s->hi[j])
                return true;
    return false;
}

static void test_sweep_against_plain(void)
{
    size_t n_sets = 300, n_top_gaps = 0;

    for (size_t t = 0; t < n_sets; t++) {
        struct set s;
        size_t n = 1 + urand(t < 250 ? 60 : 700), end, want;

        set_alloc(&s, n);
        random_set(&s, 1 + urand(t % 3 ? n : 6));
        want = plain_best_fit(&s);
        end = pack_sweep(NULL, s.n, s.nu, s.size, s.lo, s.hi, s.ord, s.off, SIZE_MAX);
        CHECK(end == want && !memcmp(s.off, s.want, n * sizeof *s.off),
              "set %zu (%zu instances, %zu steps): end %zu, the plain best fit's %zu, or "
              "other offsets", t, n, s.nu, end, want);
        /* the cut: at the end it gives up, one above it keeps the same offsets */
        if (want) {
            CHECK(pack_sweep(NULL, s.n, s.nu, s.size, s.lo, s.hi, s.ord, s.off, want) ==
                      SIZE_MAX, "set %zu: cut at its end %zu, not given up", t, want);
            end = pack_sweep(NULL, s.n, s.nu, s.size, s.lo, s.hi, s.ord, s.off, want + 1);
            CHECK(end == want && !memcmp(s.off, s.want, n * sizeof *s.off),
                  "set %zu: cut one above its end %zu: end %zu or other offsets", t, want, end);
        }
        n_top_gaps += used_gap(&s);
        free(s.size);
    }
    printf("  %zu of %zu sets placed an instance below one live before it\n", n_top_gaps,
           n_sets);
    CHECK(n_top_gaps > n_sets / 4, "only %zu sets used a gap: the gaps untested", n_top_gaps);
}

/* A forward of `layers` values of assorted sizes, each kept to its backward, which
 * frees them in reverse; each step also holds a scratch of one step, and each backward a
 * gradient of one step. The bytes live at once peak after the forward's last step. */
static void test_nested(void)
{
    enum { LAYERS = PACK_QUICK_MIN / 3 + 200 };
    size_t n = 3 * LAYERS, steps = 2 * LAYERS, load = 0, end = 0, k = 0;
    struct instance *in = calloc(n, sizeof *in);

    REMAT_ASSERT_TEST(in);
    for (size_t l = 0; l < LAYERS; l++) {
        size_t b = 4096 * (1 + urand(64));

        in[k++] = (struct instance){-1, l, steps - 1 - l, b, 0};       /* the value */
        in[k++] = (struct instance){-1, l, l, 512 * (1 + urand(8)), 0}; /* its scratch */
        in[k++] = (struct instance){-1, steps - 1 - l, steps - 1 - l, b, 0}; /* its gradient */
    }
    CHECK_OK(layout_load(NULL, in, n, 64, &load));
    CHECK_OK(layout_pack_within(NULL, in, n, 64, SIZE_MAX - 1, &end));
    CHECK(end == load, "%zu nested instances: end %zu, load %zu", n, end, load);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && i < 64; j++) /* spot check: no overlaps */
            CHECK_OR(!(in[i].first <= in[j].last && in[j].first <= in[i].last &&
                       in[i].offset < in[j].offset + in[j].bytes &&
                       in[j].offset < in[i].offset + in[i].bytes),
                     break, "instances %zu and %zu overlap", i, j);
    free(in);
}

/* ------------------------------------------------------------ the occupancy tree */

/* Sorts s[0 .. m) and merges overlapping or touching spans in place: the count left. */
static size_t merge(struct span *s, size_t m)
{
    size_t k = 0;

    qsort(s, m, sizeof *s, by_span_lo);
    for (size_t q = 0; q < m; q++)
        if (k && s[q].lo <= s[k - 1].hi)
            s[k - 1].hi = s[q].hi > s[k - 1].hi ? s[q].hi : s[k - 1].hi;
        else
            s[k++] = s[q];
    return k;
}

/* Where a scan of the merged spans w[0 .. m) (sorted, disjoint) places a bytes: the
 * lowest offset of the smallest gap that holds it (first: of the lowest), else the top. */
static size_t plain_fit(const struct span *w, size_t m, size_t a, bool first)
{
    size_t cur = 0, best = SIZE_MAX, gap = SIZE_MAX;

    for (size_t q = 0; q < m && !(first && best != SIZE_MAX); q++) {
        if (w[q].lo - cur >= a && w[q].lo - cur < gap) {
            gap = w[q].lo - cur;
            best = cur;
        }
        cur = w[q].hi;
    }
    return best != SIZE_MAX ? best : cur;
}

static void test_occ_against_plain(void)
{
    enum { MAXP = 400, MAXR = 64 * MAXP };
    static struct span sp[MAXP], buf[2 * (MAXR + 1)], want[MAXP];
    static size_t lo[MAXP], hi[MAXP];
    size_t n_sets = 40, n_queries = 0, n_gap = 0, n_best = 0;

    for (size_t t = 0; t < n_sets; t++) {
        size_t nu = 1 + urand(t % 4 ? 300 : 5), ns = 1, np = 1 + urand(MAXP);
        struct occ o;

        while (ns < nu)
            ns <<= 1;
        CHECK_OR(occ_init(&o, NULL, ns, nu), break, "occ_init");
        for (size_t i = 0; i < np; i++) {
            size_t a = urand(nu), len = urand(3) ? 1 + urand(4) : 1 + urand(nu);
            size_t at = 64 * urand(200), bytes = 64 * (1 + urand(urand(2) ? 3 : 40));

            lo[i] = a;
            hi[i] = a + len < nu ? a + len : nu;
            sp[i] = (struct span){at, at + bytes};
            occ_add(&o, lo[i], hi[i], sp[i]);
            for (int q = 0; q < 3; q++) {
                size_t ql = urand(nu), qh = ql + 1 + urand(nu - ql), m = 0, w = 0, c;
                size_t need = urand(2) ? 64 * (1 + urand(4)) : 1 + urand(64 * 60);

                for (size_t j = 0; j <= i; j++)
                    if (lo[j] < qh && ql < hi[j]) {
                        want[w++] = sp[j];
                        m++;
                    }
                c = occ_placed(&o, ql, qh);
                CHECK(c == m, "set %zu, %zu placed: ranks [%zu, %zu) meet %zu, counted %zu",
                      t, i + 1, ql, qh, m, c);
                w = merge(want, w);
                for (int first = 0; first < 2; first++) {
                    size_t got = occ_fit(&o, ql, qh, need, first, MAXR, buf),
                           exp = plain_fit(want, w, need, first);

                    CHECK(got == exp, "set %zu, %zu placed: ranks [%zu, %zu), %zu bytes%s: "
                          "at %zu, a scan of the merged spans %zu", t, i + 1, ql, qh, need,
                          first ? " (first fit)" : "", got, exp);
                    n_gap += w > 0 && exp < want[w - 1].hi;
                }
                n_best += w > 0 && plain_fit(want, w, need, false) != plain_fit(want, w, need, true);
                n_queries++;
                if (m > 0) /* runs past the bound given: refused */
                    CHECK(occ_fit(&o, ql, qh, need, false, 0, buf) == SIZE_MAX,
                          "set %zu: %zu placed given within no runs", t, m);
            }
        }
        occ_fini(&o);
    }
    printf("  %zu queries, %zu placements in a gap, %zu where best and first fit part\n",
           n_queries, n_gap, n_best);
    CHECK(n_gap > 0 && n_best > 0, "no query placed into a gap, or none told the fits apart");
}

/* ------------------------------------------------------ out of memory midway */

struct tracked {
    long count, fail_at, live; /* fail the fail_at-th request for bytes (1-based) */
};

static void *tracked_alloc(void *ud, void *ptr, size_t old, size_t n)
{
    struct tracked *t = ud;
    void *q;

    (void)old;
    if (n == 0) {
        t->live -= ptr != NULL;
        free(ptr);
        return NULL;
    }
    if (++t->count == t->fail_at)
        return NULL;
    if ((q = realloc(ptr, n)) && !ptr)
        t->live++;
    return q;
}

static void test_oom_midway(void)
{
    enum { N = PACK_QUICK_MIN + 100 };
    static struct instance in[N], want[N], got[N];
    struct tracked t = {0, 0, 0};
    remat_allocator al = {tracked_alloc, &t};
    size_t end_want = 0, end, n_same = 0, n_nomem = 0;
    long total;

    for (size_t i = 0; i < N; i++) {
        size_t f = urand(N / 4), len = urand(4) ? 1 + urand(8) : 1 + urand(N / 4);

        in[i] = (struct instance){-1, f, f + len - 1, 64 * (1 + urand(urand(2) ? 8 : 200)), 0};
    }
    memcpy(want, in, sizeof in);
    CHECK_OK(layout_pack_within(&al, want, N, 64, SIZE_MAX - 1, &end_want));
    total = t.count;
    CHECK(t.live == 0, "%ld blocks left", t.live);
    for (long k = 1; k <= total; k += k < 4 ? 1 : k) {
        remat_status st;

        memcpy(got, in, sizeof in);
        t = (struct tracked){0, k, 0};
        st = layout_pack_within(&al, got, N, 64, SIZE_MAX - 1, &end);
        CHECK(t.live == 0, "allocation %ld of %ld failing: %ld blocks left", k, total, t.live);
        if (st == REMAT_ERR_NOMEM) {
            n_nomem++;
            continue;
        }
        CHECK_OR(st == REMAT_OK, break, "allocation %ld failing: %s", k, remat_errmsg());
        CHECK(end == end_want && !memcmp(got, want, sizeof got), "allocation %ld of %ld "
              "failing: end %zu, without failures %zu, or other offsets", k, total, end,
              end_want);
        n_same++;
    }
    printf("  %ld allocations; with one failing: %zu packings the same, %zu out of memory\n",
           total, n_same, n_nomem);
    CHECK(n_same > 0 && n_nomem > 0, "failures never given way to, or never fatal");
}

/* The tree itself with its k-th allocation failing: until then its places over random
 * ranges are right, from then on it answers SIZE_MAX (never a place that misses bytes),
 * and it frees all it holds. */
static void test_occ_oom(void)
{
    enum { NP = 300, NU = 64 };
    static struct span sp[NP], buf[2 * (64 * NP + 1)], want[NP];
    static size_t lo[NP], hi[NP];
    struct tracked t;
    remat_allocator al = {tracked_alloc, &t};
    size_t n_refused = 0;

    for (long k = 1; k <= 200; k += k < 40 ? 1 : 7) {
        struct occ o;
        bool broke = false;

        t = (struct tracked){0, k, 0};
        if (!occ_init(&o, &al, NU, NU)) {
            CHECK(t.live == 0, "occ_init failing: %ld blocks left", t.live);
            continue;
        }
        for (size_t i = 0; i < NP; i++) {
            size_t a = urand(NU), at = 64 * urand(100), e = a + 1 + urand(8), w = 0, c;
            size_t need = 64 * (1 + urand(3));

            lo[i] = a;
            hi[i] = e < NU ? e : NU;
            sp[i] = (struct span){at, at + 64 * (1 + urand(4))};
            size_t ql = urand(NU), qh = ql + 1 + urand(NU - ql);

            occ_add(&o, lo[i], hi[i], sp[i]);
            c = occ_fit(&o, ql, qh, need, false, 64 * NP, buf);
            if (c == SIZE_MAX) {
                broke = true;
                continue;
            }
            CHECK_OR(!broke, break, "allocation %ld failing: runs again after a refusal", k);
            for (size_t j = 0; j <= i; j++)
                if (lo[j] < qh && ql < hi[j])
                    want[w++] = sp[j];
            w = merge(want, w);
            CHECK_OR(c == plain_fit(want, w, need, false), break,
                     "allocation %ld failing, %zu placed: a place that misses bytes", k, i + 1);
        }
        n_refused += broke;
        occ_fini(&o);
        CHECK(t.live == 0, "allocation %ld failing: %ld blocks left", k, t.live);
    }
    CHECK(n_refused > 0, "no failure reached the runs");
}

int main(void)
{
    const char *e = getenv("REMAT_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 10) : 20261128;

    rng = seed;
    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
    RUN(test_sweep_against_plain);
    RUN(test_nested);
    RUN(test_occ_against_plain);
    RUN(test_oom_midway);
    RUN(test_occ_oom);
    return harness_end();
}
