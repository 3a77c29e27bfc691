/*
 * bench.h - what the benchmark programs share: a monotonic clock and the order for
 * taking a median of times.
 */
#ifndef REMAT_BENCH_H
#define REMAT_BENCH_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* qsort's order for doubles, ascending. */
static inline int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

#endif
