/*
 * progress.h - one line of progress on stderr for the long commands (compare, depth,
 * train, a plan with the exact DP or the MILP): what is running, steps done of the
 * total, time elapsed and an estimate of the time left. Drawn only when stderr is a
 * terminal and --json was not given; otherwise every call does nothing.
 *
 * Two ways to drive it: progress_step after each unit of work the command loops over
 * (training steps, strategies, probes), and, around one long library call that reports
 * nothing (remat_plan), progress_wait_begin/progress_wait_end, which redraw the elapsed
 * time from a thread once a second until the call returns. The line is redrawn at most
 * five times a second and cleared by progress_end (and progress_clear before other
 * output on the terminal).
 */
#ifndef REMAT_CLI_PROGRESS_H
#define REMAT_CLI_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct progress {
    bool on;                  /* drawing (stderr a terminal, no --json) */
    char what[96];            /* e.g. "compare resnet50" */
    char unit[24];            /* e.g. "strategies", "steps" */
    char detail[64];          /* what the current step is, e.g. "exact-mc" */
    int64_t done, total;      /* total 0: unknown (no estimate) */
    double t0, drawn;         /* start, last redraw (cli_now seconds) */
    double limit;             /* > 0: the waited call stops by then (the MILP's limit) */
    double wait_t0;
    char stage[64];           /* the waited call's stage (progress_stage), "" none */
    double stage_done, stage_t0;
    bool waiting, shown;
    pthread_t thread;
    pthread_mutex_t lock;
};

void progress_begin(struct progress *p, const char *what, const char *unit, int64_t total);
/* done units of work are finished; detail (may be NULL) names the next. */
void progress_step(struct progress *p, int64_t done, const char *detail);
/* Around one long call: the line shows detail and the seconds spent in it (and the
 * call's own time limit when limit > 0: the MILP's), redrawn once a second. */
void progress_wait_begin(struct progress *p, const char *detail, double limit);
void progress_wait_end(struct progress *p);
/* During the wait: the call's stage and how far it is, in [0, 1] (the line adds the
 * percentage and the stage's time left). Its signature is remat_plan_opts.progress's,
 * ud the struct progress. */
void progress_stage(void *ud, const char *stage, double done);
/* Erases the line (before other output on the terminal); the next step redraws it. */
void progress_clear(struct progress *p);
void progress_end(struct progress *p);

#endif
