/*
 * test_pack_occ.c - the packer's occupancy tree (src/mem/pack_occ.c) against a plain
 * answer: instances placed at random ranks and bytes (overlapping freely, touching, of
 * lifetimes from one rank to all), and after each, queries over random rank ranges
 * whose runs, merged here, must cover exactly the bytes of the placed instances that
 * meet the range (compared byte range by byte range), and whose count of placed
 * instances must be theirs; with a bound below the runs' count, SIZE_MAX and the output
 * untouched.
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

static int by_lo(const void *x, const void *y)
{
    const struct span *a = x, *b = y;

    return a->lo != b->lo ? (a->lo < b->lo ? -1 : 1) : (a->hi > b->hi) - (a->hi < b->hi);
}

/* Sorts s[0 .. m) and merges overlapping or touching spans in place: the count left. */
static size_t merge(struct span *s, size_t m)
{
    size_t k = 0;

    qsort(s, m, sizeof *s, by_lo);
    for (size_t q = 0; q < m; q++)
        if (k && s[q].lo <= s[k - 1].hi)
            s[k - 1].hi = s[q].hi > s[k - 1].hi ? s[q].hi : s[k - 1].hi;
        else
            s[k++] = s[q];
    return k;
}

static void test_against_plain(void)
{
    enum { MAXP = 400 };
    static struct span sp[MAXP], got[64 * MAXP], want[MAXP];
    static size_t lo[MAXP], hi[MAXP];
    size_t n_sets = 40, n_queries = 0, n_multi = 0;

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
                size_t ql = urand(nu), qh = ql + 1 + urand(nu - ql), m = 0, w = 0, c, raw;

                for (size_t j = 0; j <= i; j++)
                    if (lo[j] < qh && ql < hi[j]) {
                        want[w++] = sp[j];
                        m++;
                    }
                c = occ_placed(&o, ql, qh);
                CHECK(c == m, "set %zu, %zu placed: ranks [%zu, %zu) meet %zu, counted %zu",
                      t, i + 1, ql, qh, m, c);
                w = merge(want, w);
                raw = occ_runs(&o, ql, qh, got, SIZE_MAX);
                CHECK_OR(raw != SIZE_MAX, break, "set %zu: no runs", t);
                c = merge(got, raw);
                n_multi += c < raw;
                CHECK(c == w && !memcmp(got, want, w * sizeof *got),
                      "set %zu, %zu placed: ranks [%zu, %zu): %zu runs, %zu merged spans", t,
                      i + 1, ql, qh, c, w);
                n_queries++;
                if (raw > 0) { /* a bound below the count: refused, out untouched */
                    struct span keep = got[0];

                    CHECK(occ_runs(&o, ql, qh, got, raw - 1) == SIZE_MAX,
                          "set %zu: %zu runs given within %zu", t, raw, raw - 1);
                    CHECK(!memcmp(&keep, &got[0], sizeof keep), "set %zu: out written", t);
                }
            }
        }
        occ_fini(&o);
    }
    printf("  %zu queries, %zu of them with runs from several lists that overlap\n",
           n_queries, n_multi);
    CHECK(n_multi > 0, "no query merged runs of several lists");
}

int main(void)
{
    const char *e = getenv("REMAT_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 10) : 20261128;

    rng = seed;
    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
    RUN(test_against_plain);
    return harness_end();
}
