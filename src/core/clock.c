/*
 * clock.c - the monotonic clock every timing in the library reads.
 */
#include "core/core.h"

#include <time.h>

double core_seconds(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
