/*
 * copier.c - one worker thread draining a ring of copy requests in order; a ticket is
 * done when the count of finished copies reaches it.
 */
#include "exec/copier.h"

#include <pthread.h>
#include <string.h>

#define RING 256

struct req {
    void *dst;
    const void *src;
    size_t n;
};

struct copier {
    remat_allocator al;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t more, done_cv;
    struct req ring[RING];
    uint64_t queued, done;   /* copies queued and finished since the start */
    double seconds;
    bool stop;
};

static void *worker(void *arg)
{
    struct copier *c = arg;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        struct req r;
        double t0;

        while (c->done == c->queued && !c->stop)
            pthread_cond_wait(&c->more, &c->mu);
        if (c->done == c->queued)
            break;
        r = c->ring[c->done % RING];
        pthread_mutex_unlock(&c->mu);
        t0 = core_seconds();
        memcpy(r.dst, r.src, r.n);
        t0 = core_seconds() - t0;
        pthread_mutex_lock(&c->mu);
        c->seconds += t0;
        c->done++;
        pthread_cond_broadcast(&c->done_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

remat_status copier_new(const remat_allocator *a, struct copier **out)
{
    struct copier *c = core_calloc(a, 1, sizeof *c);

    *out = NULL;
    if (!c)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating the copy thread");
    if (a)
        c->al = *a;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->more, NULL);
    pthread_cond_init(&c->done_cv, NULL);
    if (pthread_create(&c->th, NULL, worker, c)) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->more);
        pthread_cond_destroy(&c->done_cv);
        core_free(a, c, sizeof *c);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "cannot start the copy thread");
    }
    *out = c;
    return REMAT_OK;
}

void copier_free(struct copier *c)
{
    remat_allocator al;

    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->more);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->more);
    pthread_cond_destroy(&c->done_cv);
    al = c->al;
    core_free(al.fn ? &al : NULL, c, sizeof *c);
}

uint64_t copier_start(struct copier *c, void *dst, const void *src, size_t n)
{
    uint64_t t;

    pthread_mutex_lock(&c->mu);
    while (c->queued - c->done == RING)
        pthread_cond_wait(&c->done_cv, &c->mu);
    c->ring[c->queued % RING] = (struct req){dst, src, n};
    t = ++c->queued;
    pthread_cond_signal(&c->more);
    pthread_mutex_unlock(&c->mu);
    return t;
}

void copier_wait(struct copier *c, uint64_t ticket)
{
    pthread_mutex_lock(&c->mu);
    while (c->done < ticket)
        pthread_cond_wait(&c->done_cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

double copier_seconds(struct copier *c)
{
    double s;

    pthread_mutex_lock(&c->mu);
    s = c->seconds;
    pthread_mutex_unlock(&c->mu);
    return s;
}
