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
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* At most this many threads (the caller's included). */
#define PAR_MAX_THREADS 8

struct par {
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n;
    atomic_int next;
};

/* Set while this thread runs core_par_run's jobs: a team started inside one would only
 * take a core from the jobs beside it. */
static _Thread_local int par_depth;

static void par_worker(struct par *p)
{
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        p->fn(p->ctx, i);
}

static void *par_thread(void *arg)
{
    par_depth = 1; /* a thread of its own: never cleared */
    par_worker(arg);
    return NULL;
}

int core_par_threads(void)
{
    cpu_set_t set;
    long c = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                         : sysconf(_SC_NPROCESSORS_ONLN);

    return c < 1 ? 1 : c > PAR_MAX_THREADS ? PAR_MAX_THREADS : (int)c;
}

remat_status core_job_err_note(struct core_job_err *e, remat_status st)
{
    e->st = st;
    e->msg = st ? core_strdup(NULL, remat_errmsg()) : NULL;
    return st;
}

remat_status core_job_err_raise(struct core_job_err *e)
{
    remat_status st = e->st;

    if (st)
        st = REMAT_FAIL(st, "%s", e->msg ? e->msg : remat_status_name(st));
    core_job_err_clear(e);
    return st;
}

void core_job_err_clear(struct core_job_err *e)
{
    core_strfree(NULL, e->msg);
    e->msg = NULL;
    e->st = REMAT_OK;
}

void core_par_run(int n, int threads, void (*fn)(void *ctx, int i), void *ctx)
{
    struct par p = {fn, ctx, n, 0};
    pthread_t tid[PAR_MAX_THREADS];
    int started = 0;

    if (threads > PAR_MAX_THREADS)
        threads = PAR_MAX_THREADS;
    if (par_depth > 0)
        threads = 1; /* inside a job: the other threads have the other cores */
    if (threads > n)
        threads = n;
    /* a thread that cannot start leaves its share to the others */
    while (started < threads - 1 && !pthread_create(&tid[started], NULL, par_thread, &p))
        started++;
    par_depth += started > 0;
    par_worker(&p);
    par_depth -= started > 0;
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
}

/*
 * The team: one helper thread for many short rounds (a round each set of the DP), where
 * starting threads each round would cost more than the round's work. Between rounds the
 * helper spins a while (rounds follow each other within microseconds), then sleeps on a
 * condition variable; the caller spins for the helper's half, which is about as long as
 * its own.
 */
#define TEAM_SPINS (1 << 14)

struct core_team {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint seq;  /* the last round posted */
    atomic_uint done; /* the last round the helper finished */
    bool sleeping, quit;
    void (*fn)(void *ctx, int part);
    void *ctx;
};

static inline void team_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *team_helper(void *arg)
{
    core_team *t = arg;
    unsigned seen = 0;

    for (;;) {
        unsigned s;
        int spins = 0;

        while ((s = atomic_load_explicit(&t->seq, memory_order_acquire)) == seen) {
            if (++spins < TEAM_SPINS) {
                team_relax();
                continue;
            }
            pthread_mutex_lock(&t->mu);
            t->sleeping = true;
            while (atomic_load_explicit(&t->seq, memory_order_acquire) == seen)
                pthread_cond_wait(&t->cv, &t->mu);
            t->sleeping = false;
            pthread_mutex_unlock(&t->mu);
            spins = 0;
        }
        seen = s;
        if (t->quit)
            break;
        t->fn(t->ctx, 1);
        atomic_store_explicit(&t->done, s, memory_order_release);
    }
    return NULL;
}

core_team *core_team_start(void)
{
    core_team *t;

    if (par_depth > 0 || core_par_threads() < 2 || !(t = calloc(1, sizeof *t)))
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->tid, NULL, team_helper, t)) {
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t);
        return NULL;
    }
    return t;
}

static void team_post(core_team *t, unsigned s)
{
    pthread_mutex_lock(&t->mu);
    atomic_store_explicit(&t->seq, s, memory_order_release);
    if (t->sleeping)
        pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void core_team_run(core_team *t, void (*fn)(void *ctx, int part), void *ctx)
{
    unsigned s = atomic_load_explicit(&t->seq, memory_order_relaxed) + 1;
    int spins = 0;

    t->fn = fn;
    t->ctx = ctx;
    team_post(t, s);
    fn(ctx, 0);
    while (atomic_load_explicit(&t->done, memory_order_acquire) != s)
        if (++spins < TEAM_SPINS)
            team_relax();
        else
            sched_yield(); /* the helper is off its core: give it ours */
}

void core_team_stop(core_team *t)
{
    if (!t)
        return;
    t->quit = true;
    team_post(t, atomic_load_explicit(&t->seq, memory_order_relaxed) + 1);
    pthread_join(t->tid, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}
