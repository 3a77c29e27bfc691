/*
 * progress.c - the progress line of the long commands (progress.h). One line on
 * stderr, rewritten in place with "\r" and erased with "\r\033[K".
 */
#include "cli/progress.h"

#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* "42 s", "3 min 05 s", "2 h 10 min" into buf. */
static const char *duration(double s, char *buf, size_t n)
{
    long t = s > 0 ? (long)(s + 0.5) : 0;

    if (t < 60)
        snprintf(buf, n, "%ld s", t);
    else if (t < 3600)
        snprintf(buf, n, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf(buf, n, "%ld h %02ld min", t / 3600, t / 60 % 60);
    return buf;
}

/* Appends to line (of n bytes, k used), keeping it terminated when it is full. */
static size_t add(char *line, size_t n, size_t k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t add(char *line, size_t n, size_t k, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (k + 1 >= n)
        return k;
    va_start(ap, fmt);
    w = vsnprintf(line + k, n - k, fmt, ap);
    va_end(ap);
    return w < 0 ? k : k + (size_t)w < n ? k + (size_t)w : n - 1;
}

/* Draws the line now; the caller holds the lock. "what: done/total unit (detail, its
 * seconds, limit), elapsed, about left" */
static void draw(struct progress *p, double now)
{
    char line[256], a[32], b[32];
    size_t n = sizeof line, k = add(line, n, 0, "%s", p->what);

    if (p->total > 0)
        k = add(line, n, k, ": %lld/%lld %s", (long long)p->done, (long long)p->total,
                p->unit);
    else if (p->done > 0)
        k = add(line, n, k, ": %lld %s", (long long)p->done, p->unit);
    if (p->detail[0])
        k = add(line, n, k, " (%s", p->detail);
    if (p->detail[0] && p->waiting)
        k = add(line, n, k, ", %s", duration(now - p->wait_t0, a, sizeof a));
    if (p->detail[0] && p->waiting && p->limit > 0)
        k = add(line, n, k, ", limit %s", duration(p->limit, a, sizeof a));
    if (p->detail[0])
        k = add(line, n, k, ")");
    if (p->waiting && p->stage[0]) {
        k = add(line, n, k, ", %s %.0f%%", p->stage, 100 * p->stage_done);
        if (p->stage_done > 0.01 && p->stage_done < 1)
            k = add(line, n, k, " (about %s left)",
                    duration((now - p->stage_t0) * (1 - p->stage_done) / p->stage_done, b,
                             sizeof b));
    }
    k = add(line, n, k, ", %s elapsed", duration(now - p->t0, a, sizeof a));
    if (p->total > 0 && p->done > 0 && p->done < p->total)
        add(line, n, k, ", about %s left",
            duration((now - p->t0) / (double)p->done * (double)(p->total - p->done), b,
                     sizeof b));
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    p->drawn = now;
    p->shown = true;
}

void progress_begin(struct progress *p, const char *what, const char *unit, int64_t total)
{
    memset(p, 0, sizeof *p);
    p->on = isatty(2) && !cli_json_mode();
    snprintf(p->what, sizeof p->what, "%s", what);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->total = total;
    p->t0 = cli_now();
    pthread_mutex_init(&p->lock, NULL);
}

void progress_step(struct progress *p, int64_t done, const char *detail)
{
    double now;

    if (!p->on)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = done;
    snprintf(p->detail, sizeof p->detail, "%s", detail ? detail : "");
    now = cli_now();
    if (now - p->drawn >= 0.2 || !p->shown)
        draw(p, now);
    pthread_mutex_unlock(&p->lock);
}

/* The waiting thread: redraws once a second until progress_wait_end. */
static void *ticker(void *arg)
{
    struct progress *p = arg;
    const struct timespec tick = {0, 250000000};

    for (;;) {
        nanosleep(&tick, NULL);
        pthread_mutex_lock(&p->lock);
        if (!p->waiting) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        if (cli_now() - p->drawn >= 1)
            draw(p, cli_now());
        pthread_mutex_unlock(&p->lock);
    }
}

void progress_wait_begin(struct progress *p, const char *detail, double limit)
{
    if (!p->on)
        return;
    pthread_mutex_lock(&p->lock);
    snprintf(p->detail, sizeof p->detail, "%s", detail ? detail : "");
    p->limit = limit;
    p->wait_t0 = cli_now();
    p->waiting = true;
    if (p->shown)
        draw(p, p->wait_t0);
    else
        p->drawn = p->wait_t0; /* a call shorter than a second leaves no line */
    pthread_mutex_unlock(&p->lock);
    if (pthread_create(&p->thread, NULL, ticker, p))
        p->waiting = false; /* no thread: the line stays as drawn */
}

void progress_stage(void *ud, const char *stage, double done)
{
    struct progress *p = ud;

    if (!p || !p->on)
        return;
    pthread_mutex_lock(&p->lock);
    if (strncmp(p->stage, stage, sizeof p->stage - 1) || done < p->stage_done) {
        snprintf(p->stage, sizeof p->stage, "%s", stage);
        p->stage_t0 = cli_now();
    }
    p->stage_done = done;
    pthread_mutex_unlock(&p->lock);
}

void progress_wait_end(struct progress *p)
{
    bool joined;

    if (!p->on)
        return;
    pthread_mutex_lock(&p->lock);
    joined = p->waiting;
    p->waiting = false;
    p->stage[0] = '\0';
    pthread_mutex_unlock(&p->lock);
    if (joined)
        pthread_join(p->thread, NULL);
}

void progress_clear(struct progress *p)
{
    if (!p->on || !p->shown)
        return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->shown = false;
}

void progress_end(struct progress *p)
{
    progress_wait_end(p);
    progress_clear(p);
    pthread_mutex_destroy(&p->lock);
}
