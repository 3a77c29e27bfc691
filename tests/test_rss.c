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

#include "core/core.h"
#include "core/rss.h"

#include <stdlib.h>
#include <string.h>
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

/* A file of n bytes (sparse: zeros the kernel puts in the page cache when they are
 * read), unlinked, mapped with prot and shared; NULL on failure. */
static unsigned char *file_map(size_t n, int prot)
{
    char path[] = "/tmp/remat_rss_XXXXXX";
    unsigned char *f;
    int fd = mkstemp(path);

    if (fd < 0)
        return NULL;
    unlink(path);
    if (ftruncate(fd, (off_t)n)) {
        close(fd);
        return NULL;
    }
    f = mmap(NULL, n, prot, MAP_SHARED, fd, 0);
    close(fd);
    return f == MAP_FAILED ? NULL : f;
}

/*
 * rss_code_bytes counts the resident pages of mappings that are executable or read-only
 * (code and constants), and nothing writable: against what the test maps and touches.
 * 64 MiB of anonymous memory written: no change. The same made executable (as a JIT
 * compiler does with the code it wrote): +64 MiB. A file mapped read-only and read: +64
 * MiB. A file mapped writable and written (the host tier's --host-file): no change.
 * smaps walks the page tables, so its figures do not lag: the slack is for the test's
 * own stack and libraries.
 */
static void test_code_pages(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), before, after;
    unsigned char *a, *f;
    volatile unsigned sum = 0;

    if (!have_proc())
        return;
    if (!rss_code_bytes()) {
        SKIP("no /proc/self/smaps");
        return;
    }
    before = rss_code_bytes();
    a = touch_map(TOUCH_BYTES);
    REMAT_ASSERT_TEST(a);
    after = rss_code_bytes();
    CHECK(near(after, before, SLACK), "code %zu after writing %zu anonymous bytes, %zu "
          "before", after, TOUCH_BYTES, before);
    REMAT_ASSERT_TEST(mprotect(a, TOUCH_BYTES, PROT_READ | PROT_EXEC) == 0);
    after = rss_code_bytes();
    CHECK(about(after - before, TOUCH_BYTES, 0), "code grew by %zu making %zu written bytes "
          "executable", after - before, TOUCH_BYTES);
    munmap(a, TOUCH_BYTES);

    before = rss_code_bytes();
    f = file_map(TOUCH_BYTES, PROT_READ);
    REMAT_ASSERT_TEST(f);
    for (size_t i = 0; i < TOUCH_BYTES; i += page)
        sum += f[i];
    after = rss_code_bytes();
    CHECK(about(after - before, TOUCH_BYTES, 0), "code grew by %zu reading %zu bytes of a "
          "read-only file (sum %u)", after - before, TOUCH_BYTES, sum);
    munmap(f, TOUCH_BYTES);

    before = rss_code_bytes();
    f = file_map(TOUCH_BYTES, PROT_READ | PROT_WRITE);
    REMAT_ASSERT_TEST(f);
    for (size_t i = 0; i < TOUCH_BYTES; i += page)
        f[i] = 1;
    after = rss_code_bytes();
    CHECK(near(after, before, SLACK), "code %zu after writing %zu bytes of a writable file, "
          "%zu before", after, TOUCH_BYTES, before);
    munmap(f, TOUCH_BYTES);
}

/*
 * rss_mark_growth: from a mark, 64 MiB of anonymous memory written and kept grows the
 * data part by 64 MiB (exactly, from the page tables: the slack is for the test's own
 * pages and the sanitizer's shadow), the code part not at all; 32 MiB more written and
 * unmapped again comes back through the high-water mark (where the reset works).
 */
static void test_mark_growth(void)
{
    struct rss_mark m;
    struct rss_split g;
    unsigned char *keep, *gone;

    if (!have_proc())
        return;
    rss_mark_begin(&m);
    if (!m.split_ok) {
        SKIP("no /proc/self/smaps");
        return;
    }
    keep = touch_map(TOUCH_BYTES);
    REMAT_ASSERT_TEST(keep);
    g = rss_mark_growth(&m);
    CHECK(about(g.data_bytes, TOUCH_BYTES, SHADOW(TOUCH_BYTES)), "data grew by %zu writing "
          "%zu bytes", g.data_bytes, TOUCH_BYTES);
    CHECK(g.code_bytes <= SLACK, "code grew by %zu writing data", g.code_bytes);
    if (m.reset) {
        gone = touch_map(TOUCH_BYTES / 2);
        REMAT_ASSERT_TEST(gone);
        munmap(gone, TOUCH_BYTES / 2);
        g = rss_mark_growth(&m);
        CHECK(about(g.data_bytes, TOUCH_BYTES + TOUCH_BYTES / 2, SHADOW(2 * TOUCH_BYTES)),
              "data grew by %zu with %zu kept and %zu gone", g.data_bytes, TOUCH_BYTES,
              TOUCH_BYTES / 2);
    }
    rss_mark_forget_peak(&m); /* what came and went before no longer counts */
    g = rss_mark_growth(&m);
    CHECK(about(g.data_bytes, TOUCH_BYTES, SHADOW(2 * TOUCH_BYTES)), "data grew by %zu "
          "with %zu kept, the peak forgotten", g.data_bytes, TOUCH_BYTES);
    munmap(keep, TOUCH_BYTES);
}

/*
 * rss_release_free: 64 MiB of the heap in 64 KiB blocks written, every other block freed
 * (holes between live blocks, which no trimming of the heap's top gives back): the data
 * part holds 64 MiB until the release, 32 MiB after (glibc; elsewhere skipped).
 */
static void test_release_free(void)
{
    enum { N = 1024, BLOCK = 64 << 10 };
    static unsigned char *blk[N];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct rss_mark m;
    struct rss_split g;

#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__)
    SKIP("not glibc's allocator");
    return;
#endif
    if (!have_proc())
        return;
    rss_release_free();
    rss_mark_begin(&m);
    if (!m.split_ok) {
        SKIP("no /proc/self/smaps");
        return;
    }
    for (int i = 0; i < N; i++) {
        blk[i] = malloc(BLOCK);
        REMAT_ASSERT_TEST(blk[i]);
        memset(blk[i], i + 1, BLOCK);
    }
    for (int i = 0; i < N; i += 2)
        free(blk[i]);
    g = rss_mark_growth(&m);
    CHECK(about(g.data_bytes, (size_t)N * BLOCK, 0), "data grew by %zu with %d blocks of %d "
          "written and half freed", g.data_bytes, N, BLOCK);
    rss_release_free();
    rss_mark_forget_peak(&m);
    g = rss_mark_growth(&m);
    /* a freed block's first and last pages may hold its neighbours' headers: up to one
     * page per hole stays */
    CHECK(g.data_bytes + SLACK >= (size_t)N / 2 * BLOCK &&
              g.data_bytes <= (size_t)N / 2 * (BLOCK + page) + SLACK,
          "data %zu after the release, %zu still allocated", g.data_bytes,
          (size_t)N / 2 * BLOCK);
    for (int i = 1; i < N; i += 2)
        free(blk[i]);
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
        CHECK(st.os_rss_code_growth_bytes <= grew + SLACK, "code pages %zu of a growth of %zu",
              st.os_rss_code_growth_bytes, grew);
        /* the arena and the resident block are whole pages of their own (core.h) */
        CHECK(st.os_rss_data_growth_bytes >= core_pages_round(st.arena_bytes) +
                  core_pages_round(st.resident_bytes),
              "data grew %zu, arena + resident %zu", st.os_rss_data_growth_bytes, want);
        CHECK(grew <= want + want / 20 + SHADOW(want) + 16 * MIB,
              "grew %zu, arena + resident %zu: over 5%% + 16 MiB", grew, want);
        printf("  resnet18 32x32 b2 ref: grew %zu bytes (data %zu, code %zu), arena + "
               "resident %zu (%.3fx)\n", grew, st.os_rss_data_growth_bytes,
               st.os_rss_code_growth_bytes, want, (double)grew / (double)want);
    }
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* rss_resident_in against pages the test maps and touches: a fresh mapping holds none,
 * then exactly the pages written (every other one of 64), the partial last page whole. */
static void test_resident_in(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 64 * page;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    REMAT_ASSERT_TEST(p != MAP_FAILED);
    CHECK(rss_resident_in(p, n) == 0, "fresh mapping: %zu bytes resident",
          rss_resident_in(p, n));
    for (size_t i = 0; i < 64; i += 2)
        p[i * page + 7] = 1;
    CHECK(rss_resident_in(p, n) == 32 * page, "%zu resident, 32 pages written",
          rss_resident_in(p, n));
    /* a range from inside page 0 to one byte into page 2: pages 0, 1 and 2, 0 and 2 written */
    CHECK(rss_resident_in(p + 100, 2 * page - 99) == 2 * page, "%zu",
          rss_resident_in(p + 100, 2 * page - 99));
    CHECK(rss_resident_in(p + page, 1) == 0, "page 1 untouched");
    munmap(p, n);
    CHECK(rss_resident_in(p, n) == 0, "unmapped: %zu", rss_resident_in(p, n));
}

/*
 * The plan in whole pages (remat_plan_opts.whole_pages, as `remat plan --backend cpu|ref`
 * and `remat train` count): its total is each block rounded up to the page, and after a
 * step the blocks hold exactly that many resident pages (the page tables, through
 * mincore), where before the first step the arena, mapped but untouched, held none; the
 * process's data grew by no more than that from the trainer's mark.
 * ResNet-18 at 32x32, batch 2, ref backend, approx-mc at its least budget.
 */
static void test_whole_pages(void)
{
    remat_zoo_opts zo = {.batch = 2, .height = 32, .width = 32, .classes = 10};
    remat_plan_opts po = {.strategy = REMAT_STRATEGY_APPROX_MC, .budget_min = true,
                          .whole_pages = true, .host_in_budget = true};
    remat_plan_opts pb = po;
    remat_train_opts to = remat_train_opts_default();
    remat_plan_info pi, bi;
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL, *sb = NULL;
    remat_trainer *t = NULL;
    remat_train_stats st;
    double loss;

    if (!have_proc())
        return;
    to.backend = REMAT_BACKEND_REF;
    pb.whole_pages = false;
    REMAT_ASSERT_TEST(!remat_zoo_build("resnet18", &zo, NULL, &g) &&
                      !remat_tgraph_from_graph(g, NULL, &tg) && !remat_plan(tg, &po, &s, &pi) &&
                      !remat_plan(tg, &pb, &sb, &bi));
    /* the same plan; its total rounded block by block */
    CHECK(bi.arena_bytes == pi.arena_bytes && bi.total_bytes == pi.arena_bytes +
              remat_tgraph_resident_bytes(tg), "bytes: arena %zu, total %zu", bi.arena_bytes,
          bi.total_bytes);
    CHECK(pi.total_bytes == core_pages_round(pi.arena_bytes) +
              core_pages_round(remat_tgraph_resident_bytes(tg)) && pi.budget_bytes ==
              pi.total_bytes, "pages: total %zu, budget %zu", pi.total_bytes, pi.budget_bytes);
    CHECK_OK(remat_trainer_new(g, tg, s, &to, &t));
    if (t) {
        remat_trainer_stats(t, &st);
        CHECK(st.os_rss_blocks_bytes < pi.total_bytes, "before a step: %zu of %zu",
              st.os_rss_blocks_bytes, pi.total_bytes);
        CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
        remat_trainer_stats(t, &st);
        CHECK(st.os_rss_blocks_bytes == pi.total_bytes, "after a step: blocks %zu, plan %zu",
              st.os_rss_blocks_bytes, pi.total_bytes);
        /* from the trainer's mark (its tables built) the data grew by its blocks: the
         * plan's total, within the budget (and AddressSanitizer's shadow of them) */
        CHECK(st.os_rss_data_growth_bytes >= st.os_rss_blocks_bytes &&
                  st.os_rss_data_growth_bytes <= pi.total_bytes + SHADOW(pi.total_bytes) &&
                  st.os_rss_tables_bytes > 0,
              "data %zu, blocks %zu, plan %zu, tables %zu", st.os_rss_data_growth_bytes,
              st.os_rss_blocks_bytes, pi.total_bytes, st.os_rss_tables_bytes);
        printf("  resnet18 32x32 b2 ref approx-mc min: plan %zu, blocks %zu, tables %zu, "
               "data %zu\n", pi.total_bytes, st.os_rss_blocks_bytes, st.os_rss_tables_bytes,
               st.os_rss_data_growth_bytes);
    }
    remat_trainer_free(t);
    remat_schedule_free(s);
    remat_schedule_free(sb);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_rss_grows);
    RUN(test_peak_reset);
    RUN(test_mark);
    RUN(test_code_pages);
    RUN(test_mark_growth);
    RUN(test_release_free);
    RUN(test_trainer);
    RUN(test_resident_in);
    RUN(test_whole_pages);
    return harness_end();
}
