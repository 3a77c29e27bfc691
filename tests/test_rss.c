/*
 * test_rss.c - the operating system's memory figures (core/rss.c) against what the test
 * itself does to the process: it maps and touches a known number of bytes, so the
 * resident set must grow by that much and the high-water mark must remember it; and a
 * trainer's figures must cover the arena and the resident bytes it allocated.
 *
 * The test's own blocks come from mmap, not malloc, so that no allocator can hand back
 * pages that were already resident, and munmap gives them back at once.
 *
 * Under AddressSanitizer (make san) every byte the test touches also makes 1/8 byte of
 * shadow resident (its checks read the shadow, and on some kernels a read of a fresh
 * page makes it resident), and the shadow stays after munmap: the checks allow for it.
 *
 * Tolerances: the kernel keeps its resident counters per CPU (per thread before Linux
 * 6.2, folded in every 64 page faults) and reads them lazily, so a read can lag by a few
 * hundred KiB; the test allows 2 MiB on 64 MiB. Elsewhere than Linux every figure is 0
 * and the tests say skipped.
 */
#include "harness.h"

#include "core/rss.h"

#include <sys/mman.h>
#include <unistd.h>

/* AddressSanitizer's shadow of n touched bytes (0 without it). */
#if defined(__SANITIZE_ADDRESS__)
#define SHADOW(n) ((n) / 8)
#else
#define SHADOW(n) ((size_t)0)
#endif

#define MIB ((size_t)1 << 20)
#define TOUCH_BYTES (64 * MIB)
#define SLACK (2 * MIB)

/* |a - b| <= tol */
static bool near(size_t a, size_t b, size_t tol)
{
    return (a > b ? a - b : b - a) <= tol;
}

/* x within [want - SLACK, want + shadow + SLACK]: want, give or take the counters' lag,
 * and the sanitizer's shadow of what was touched. */
static bool about(size_t x, size_t want, size_t shadow)
{
    return x + SLACK >= want && x <= want + shadow + SLACK;
}

/* A mapping of n bytes with every page written, or NULL. */
static unsigned char *touch_map(size_t n)
{
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    long page = sysconf(_SC_PAGESIZE);

    if (p == MAP_FAILED)
        return NULL;
    for (size_t i = 0; i < n; i += (size_t)page)
        ((volatile unsigned char *)p)[i] = (unsigned char)(i / (size_t)page + 1);
    return p;
}

/* The resident pages of /proc/self/statm (its second field) in bytes: the same count by
 * another file and another parser. 0 when unavailable. */
static size_t statm_resident(void)
{
    unsigned long long size, res;
    FILE *f = fopen("/proc/self/statm", "r");
    int n;

    if (!f)
        return 0;
    n = fscanf(f, "%llu %llu", &size, &res);
    fclose(f);
    return n == 2 ? (size_t)res * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

static bool have_proc(void)
{
    if (rss_current_bytes() && rss_peak_bytes())
        return true;
    SKIP("no VmRSS or VmHWM in /proc/self/status (not Linux?)");
    return false;
}

/* VmRSS agrees with statm, and grows by the bytes touched. */
static void test_rss_grows(void)
{
    size_t before, after, statm;
    unsigned char *p;

    if (!have_proc())
        return;
    statm = statm_resident();
    before = rss_current_bytes();
    CHECK(near(before, statm, SLACK), "VmRSS %zu, statm %zu", before, statm);
    p = touch_map(TOUCH_BYTES);
    REMAT_ASSERT_TEST(p);
    after = rss_current_bytes();
    CHECK(about(after - before, TOUCH_BYTES, SHADOW(TOUCH_BYTES)), "VmRSS grew by %zu "
          "touching %zu bytes", after - before, TOUCH_BYTES);
    CHECK(rss_peak_bytes() >= after, "VmHWM %zu below VmRSS %zu", rss_peak_bytes(), after);
    munmap(p, TOUCH_BYTES);
    CHECK(about(rss_current_bytes(), before, SHADOW(TOUCH_BYTES)), "VmRSS %zu after "
          "unmapping, %zu before", rss_current_bytes(), before);
}

/* After touching and unmapping 64 MiB the mark is at least that much above the resident
 * set; a reset brings it back to the resident set. */
static void test_peak_reset(void)
{
    size_t base, high, now;
    unsigned char *p;

    if (!have_proc())
        return;
    base = rss_current_bytes();
    p = touch_map(TOUCH_BYTES);
    REMAT_ASSERT_TEST(p);
    munmap(p, TOUCH_BYTES);
    high = rss_peak_bytes();
    CHECK(high + SLACK >= base + TOUCH_BYTES, "VmHWM %zu after touching %zu bytes on %zu",
          high, TOUCH_BYTES, base);
    if (!rss_reset_peak()) {
        SKIP("/proc/self/clear_refs refused the reset");
        return;
    }
    now = rss_current_bytes();
    CHECK(near(rss_peak_bytes(), now, SLACK), "VmHWM %zu after the reset, VmRSS %zu",
          rss_peak_bytes(), now);
}

/* A mark's peak: the high-water mark after a reset; without one (a mark whose reset
 * failed, made by hand), the samples and VmRSS until the mark rises past where it was,
 * then the mark. */
static void test_mark(void)
{
    struct rss_mark m;
    size_t now;
    unsigned char *p;

    if (!have_proc())
        return;
    rss_mark_begin(&m);
    if (!m.reset) {
        SKIP("/proc/self/clear_refs refused the reset");
        return;
    }
    p = touch_map(TOUCH_BYTES);
    REMAT_ASSERT_TEST(p);
    munmap(p, TOUCH_BYTES);
    CHECK(about(rss_mark_peak(&m, 0), m.before_bytes + TOUCH_BYTES, SHADOW(TOUCH_BYTES)),
          "peak %zu after touching %zu bytes from %zu", rss_mark_peak(&m, 0), TOUCH_BYTES,
          m.before_bytes);
    /* the fallback: the mark now stands 64 MiB above the resident set */
    m.reset = false;
    m.hwm_bytes = rss_peak_bytes();
    now = rss_current_bytes();
    CHECK(near(rss_mark_peak(&m, 0), now, SLACK), "fallback peak %zu, VmRSS %zu",
          rss_mark_peak(&m, 0), now);
    CHECK(rss_mark_peak(&m, now + 5 * TOUCH_BYTES) == now + 5 * TOUCH_BYTES,
          "fallback peak %zu, the sample %zu", rss_mark_peak(&m, now + 5 * TOUCH_BYTES),
          now + 5 * TOUCH_BYTES);
    p = touch_map(2 * TOUCH_BYTES); /* past the old mark by about 64 MiB */
    REMAT_ASSERT_TEST(p);
    munmap(p, 2 * TOUCH_BYTES);
    CHECK(about(rss_mark_peak(&m, 0), now + 2 * TOUCH_BYTES, SHADOW(2 * TOUCH_BYTES)),
          "fallback peak %zu after touching %zu bytes from %zu", rss_mark_peak(&m, 0),
          2 * TOUCH_BYTES, now);
}

/* RssFile grows by the pages of a file mapped and read, not by anonymous memory touched:
 * a 64 MiB file (sparse: its pages are zeros the kernel puts in the page cache when they
 * are read) mapped shared and read page by page. */
static void test_file_pages(void)
{
    char path[] = "/tmp/remat_rss_XXXXXX";
    size_t before, mid, after, page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *a, *f;
    volatile unsigned sum = 0;
    int fd;

    if (!have_proc())
        return;
    if (!rss_file_bytes()) {
        SKIP("no RssFile in /proc/self/status (Linux before 4.5?)");
        return;
    }
    before = rss_file_bytes();
    a = touch_map(TOUCH_BYTES);
    REMAT_ASSERT_TEST(a);
    mid = rss_file_bytes();
    CHECK(near(mid, before, SLACK), "RssFile %zu after touching %zu anonymous bytes, %zu "
          "before", mid, TOUCH_BYTES, before);
    munmap(a, TOUCH_BYTES);
    fd = mkstemp(path);
    REMAT_ASSERT_TEST(fd >= 0);
    unlink(path);
    REMAT_ASSERT_TEST(ftruncate(fd, (off_t)TOUCH_BYTES) == 0);
    f = mmap(NULL, TOUCH_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    REMAT_ASSERT_TEST(f != MAP_FAILED);
    for (size_t i = 0; i < TOUCH_BYTES; i += page)
        sum += f[i];
    after = rss_file_bytes();
    CHECK(about(after - mid, TOUCH_BYTES, 0), "RssFile grew by %zu reading %zu mapped bytes "
          "of a file (sum %u)", after - mid, TOUCH_BYTES, sum);
    munmap(f, TOUCH_BYTES);
    close(fd);
}

/*
 * A trainer (ref backend, resnet18 at 32x32, batch 2, strategy none) writes its whole
 * arena and resident block when it creates them (zeroed, then the parameters), so the
 * resident set grows by at least their size: the tolerance (4 MiB) is the counters' lag
 * and a page of rounding per block. It may grow by more (the trainer's own arrays, the
 * schedule's copy), up to the project's target of 5% + 16 MiB (plus AddressSanitizer's
 * shadow under make san).
 */
static void test_trainer(void)
{
    remat_zoo_opts zo = {.batch = 2, .height = 32, .width = 32, .classes = 10};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_NONE};
    remat_train_opts to = remat_train_opts_default();
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL;
    remat_trainer *t = NULL;
    remat_train_stats st;
    size_t want, grew;
    double loss;

    if (!have_proc())
        return;
    REMAT_ASSERT_TEST(!remat_zoo_build("resnet18", &zo, NULL, &g) &&
                      !remat_tgraph_from_graph(g, NULL, &tg) && !remat_plan(tg, &po, &s, NULL));
    CHECK_OK(remat_trainer_new(g, tg, s, &to, &t));
    if (t) {
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
        remat_trainer_stats(t, &st);
        want = st.arena_bytes + st.resident_bytes;
        grew = st.os_rss_peak_bytes - st.os_rss_before_bytes;
        CHECK(st.os_rss_before_bytes > 0 && st.os_rss_peak_bytes > st.os_rss_before_bytes,
              "before %zu, peak %zu", st.os_rss_before_bytes, st.os_rss_peak_bytes);
        CHECK(st.os_rss_peak_bytes + SLACK >= rss_current_bytes(), "peak %zu below VmRSS %zu",
              st.os_rss_peak_bytes, rss_current_bytes());
        CHECK(grew + 4 * MIB >= want, "grew %zu, arena + resident %zu", grew, want);
        CHECK(st.os_rss_file_growth_bytes <= grew + SLACK, "file pages %zu of a growth of %zu",
              st.os_rss_file_growth_bytes, grew);
        CHECK(grew <= want + want / 20 + SHADOW(want) + 16 * MIB,
              "grew %zu, arena + resident %zu: over 5%% + 16 MiB", grew, want);
        printf("  resnet18 32x32 b2 ref: grew %zu bytes, arena + resident %zu (%.3fx)\n",
               grew, want, (double)grew / (double)want);
    }
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_rss_grows);
    RUN(test_peak_reset);
    RUN(test_mark);
    RUN(test_file_pages);
    RUN(test_trainer);
    return harness_end();
}
