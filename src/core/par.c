/*
 * par.c - independent jobs on the machine's cores (core_par_run).
 *
 * Jobs are handed out in index order from a shared counter, so a slow one does not hold
 * back the rest; the caller's thread is one of the workers. Each job writes only its own
 * results, which the caller reads in index order after every worker has finished: the
 * outcome does not depend on which thread ran what.
 */
#include "core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* At most this many threads (the caller's included). */
#define PAR_MAX_THREADS 8

struct par {
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n;
    atomic_int next;
};

static void *par_worker(void *arg)
{
    struct par *p = arg;

    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        p->fn(p->ctx, i);
    return NULL;
}

int core_par_threads(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);

    return c < 1 ? 1 : c > PAR_MAX_THREADS ? PAR_MAX_THREADS : (int)c;
}

void core_par_run(int n, int threads, void (*fn)(void *ctx, int i), void *ctx)
{
    struct par p = {fn, ctx, n, 0};
    pthread_t tid[PAR_MAX_THREADS];
    int started = 0;

    if (threads > PAR_MAX_THREADS)
        threads = PAR_MAX_THREADS;
    if (threads > n)
        threads = n;
    /* a thread that cannot start leaves its share to the others */
    while (started < threads - 1 && !pthread_create(&tid[started], NULL, par_worker, &p))
        started++;
    par_worker(&p);
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
}
