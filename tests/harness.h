/*
 * harness.h - the test harness: RUN(test) runs one test function; CHECK(cond, fmt, ...)
 * records a failure with its message without stopping the test. Each program ends
 * with harness_end(), which prints "RESULT <passed> <failed> <skipped>" for
 * tools/run_tests.sh to add up, and returns the exit code.
 */
#ifndef REMAT_HARNESS_H
#define REMAT_HARNESS_H

#include "remat.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int h_passed, h_failed, h_skipped, h_cur_failed, h_cur_skipped;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            h_cur_failed = 1;                                                            \
            printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                     \
            printf(__VA_ARGS__);                                                         \
            printf("\n");                                                                \
        }                                                                                \
    } while (0)

/* A broken test fixture (not a failure of the code under test): stop. */
#define REMAT_ASSERT_TEST(c)                                                             \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            printf("test fixture broken at %s:%d: %s\n", __FILE__, __LINE__, #c);        \
            exit(2);                                                                     \
        }                                                                                \
    } while (0)

/* CHECK, then `on_fail` (return, goto, break, continue of the enclosing loop) when it
 * failed: one report per graph. An if-else, so that break and continue reach the loop. */
#define CHECK_OR(cond, on_fail, ...)                                                     \
    if (!(cond)) {                                                                       \
        CHECK(cond, __VA_ARGS__);                                                        \
        on_fail;                                                                         \
    } else                                                                               \
        (void)0

#define CHECK_I64(a, b)                                                                  \
    do {                                                                                 \
        long long ha_ = (long long)(a), hb_ = (long long)(b);                            \
        CHECK(ha_ == hb_, "%s = %lld, expected %lld", #a, ha_, hb_);                    \
    } while (0)

#define CHECK_OK(call)                                                                   \
    do {                                                                                 \
        remat_status hs_ = (call);                                               \
        CHECK(hs_ == REMAT_OK, "%s: %s", remat_status_name(hs_), remat_errmsg());        \
    } while (0)

/* Marks the running test skipped (it counts neither as passed nor as failed). */
#define SKIP(...)                                                                        \
    do {                                                                                 \
        h_cur_skipped = 1;                                                               \
        printf("  skipped: ");                                                           \
        printf(__VA_ARGS__);                                                             \
        printf("\n");                                                                    \
    } while (0)

/* REMAT_ONLY=name in the environment runs that test alone (while developing). */
#define RUN(fn)                                                                          \
    do {                                                                                 \
        if (getenv("REMAT_ONLY") && strcmp(getenv("REMAT_ONLY"), #fn))                   \
            break;                                                                       \
        h_cur_failed = h_cur_skipped = 0;                                                \
        fn();                                                                            \
        if (h_cur_failed)                                                                \
            h_failed++;                                                                  \
        else if (h_cur_skipped)                                                          \
            h_skipped++;                                                                 \
        else                                                                             \
            h_passed++;                                                                  \
        printf("%s %s\n", h_cur_failed ? "FAIL" : h_cur_skipped ? "skip" : "ok  ", #fn);  \
        fflush(stdout);                                                                  \
    } while (0)

/* The C library's allocator as a caller's: the library then runs on one thread
 * (core_par_threads_with), so a test can compare one thread with two. */
static inline void *harness_one_thread_alloc(void *ud, void *ptr, size_t old, size_t n)
{
    (void)ud;
    (void)old;
    if (n == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, n);
}

/* Whether two schedules have the same steps. */
static inline bool harness_same_steps(const remat_schedule *a, const remat_schedule *b)
{
    size_t n = remat_schedule_n_steps(a);

    return n == remat_schedule_n_steps(b) &&
           (n == 0 || !memcmp(remat_schedule_steps(a), remat_schedule_steps(b),
                              n * sizeof *remat_schedule_steps(a)));
}

static inline int harness_end(void)
{
    printf("RESULT %d %d %d\n", h_passed, h_failed, h_skipped);
    return h_failed ? 1 : 0;
}

/* The folder of the authors' graph dumps, or NULL when ../shared is absent. */
static inline const char *harness_graphs_dir(void)
{
    static const char *const dirs[] = {"../shared/graphs/kusumoto", "../../shared/graphs/kusumoto"};
    const char *env = getenv("REMAT_GRAPHS");
    char path[512];
    FILE *f;

    if (env && *env)
        return env;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/cg_vgg19.txt", dirs[i]);
        if ((f = fopen(path, "r"))) {
            fclose(f);
            return dirs[i];
        }
    }
    return NULL;
}

#endif
