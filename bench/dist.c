/*
 * dist.c - data parallel against one process (docs/distributed.md): ResNet-50, batch 8
 * per micro-batch, 112x112, SGD, cpu backend. One process with 2 threads and
 * --accumulate 2 against 2 ranks of 1 thread each under mpirun (the same 16 samples
 * per step, the same parameters after the steps), the ranks' reduction started bucket
 * by bucket during the backward (the default) and after it (--reduce-after), and one
 * process with 2 threads on one micro-batch. Runs the remat command beside this program
 * (../remat) and reads its --json (rank 0's figures).
 *
 * The share of the reduction hidden behind the backward pass: 1 - w / w_after, where w
 * is the time rank 0 waited for the reduction after the ranks agreed their backward
 * passes were done (reduce_wait_seconds, over the steps), and w_after the same wait
 * with the whole reduction (the same buckets) started only then.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 4

struct fig {
    double step, wait; /* median step seconds; reduction waited, all steps (-1: none) */
    char sum[32];      /* param checksum */
};

/* The number after "key": in the JSON text, or -1. */
static double number(const char *json, const char *key)
{
    char pat[64];
    const char *at;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    return (at = strstr(json, pat)) ? atof(at + strlen(pat)) : -1;
}

/* Runs `remat train MODEL ARGS --json` (pre: an environment and launcher before it);
 * f->step -1 on failure. */
static void run(const char *pre, const char *remat, const char *args, struct fig *f)
{
    static const char *const model = "resnet50 --batch 8 --input-size 112x112 --backend cpu";
    char cmd[2048], buf[1 << 16];
    const char *at;
    size_t got;
    FILE *p;

    memset(f, 0, sizeof *f);
    f->step = f->wait = -1;
    snprintf(cmd, sizeof cmd, "%s%s train %s %s --steps %d --json 2>/dev/null", pre, remat,
             model, args, STEPS);
    if (!(p = popen(cmd, "r")))
        return;
    got = fread(buf, 1, sizeof buf - 1, p);
    buf[got] = '\0';
    if (pclose(p) != 0)
        return;
    f->step = number(buf, "median_step_seconds");
    f->wait = number(buf, "reduce_wait_seconds");
    if ((at = strstr(buf, "\"param_checksum\":\"")))
        snprintf(f->sum, sizeof f->sum, "%.16s", at + 18);
}

/* A row of the table; ranks: the reduction's wait is shown. */
static void row(const char *what, int samples, bool ranks, const struct fig *f)
{
    if (f->step <= 0) {
        printf("| %s | %d | failed or no MPI | | | |\n", what, samples);
        return;
    }
    printf("| %s | %d | %.3f | %.1f | ", what, samples, f->step, samples / f->step);
    if (ranks)
        printf("%.3f", f->wait / STEPS);
    printf(" | %s |\n", f->sum);
}

int main(int argc, char **argv)
{
    static const char *const mpi = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                   "mpirun -np 2 --oversubscribe ";
    const char *slash = strrchr(argv[0], '/');
    char remat[1024];
    struct fig f[5];

    (void)argc;
    snprintf(remat, sizeof remat, "%.*s/../remat", slash ? (int)(slash - argv[0]) : 1,
             slash ? argv[0] : ".");
    run("", remat, "--threads 2", &f[0]);
    run("", remat, "--threads 2 --accumulate 2", &f[1]);
    run(mpi, remat, "--threads 1", &f[2]);
    run(mpi, remat, "--threads 1 --reduce-after", &f[3]);
    run("", remat, "--threads 1 --accumulate 2", &f[4]);
    printf("### ResNet-50, batch 8 per micro-batch, 112x112, SGD, cpu backend\n\n"
           "Median step of %d; *samples/s* counts every rank's samples; *reduction "
           "waited*: rank 0's wait for the gradient reduction after the backward pass, per "
           "step.\n\n"
           "| run | samples per step | step s | samples/s | reduction waited s | param "
           "checksum |\n|---|---|---|---|---|---|\n", STEPS);
    row("1 process, 2 threads", 8, false, &f[0]);
    row("1 process, 2 threads, --accumulate 2", 16, false, &f[1]);
    row("2 ranks x 1 thread (mpirun), buckets during the backward", 16, true, &f[2]);
    row("2 ranks x 1 thread (mpirun), --reduce-after", 16, true, &f[3]);
    row("1 process, 1 thread, --accumulate 2", 16, false, &f[4]);
    printf("\n2 ranks of 1 thread against one process of 2 threads accumulating the same "
           "samples: %.2fx the samples/s. Share of the reduction hidden behind the backward "
           "pass (1 - waited / waited with --reduce-after): ",
           f[2].step > 0 ? f[1].step / f[2].step : 0.0);
    if (f[2].wait >= 0 && f[3].wait > 0)
        printf("%.0f%%.", 100 * (1 - f[2].wait / f[3].wait));
    else
        printf("not measured.");
    printf(" The ranks' parameters are the bits of one process with --accumulate 2 at the "
           "same thread count (1 here: %s); oneDNN's kernels sum in another order with 2 "
           "threads.\n", !strcmp(f[2].sum, f[4].sum) && !strcmp(f[3].sum, f[4].sum)
                             ? "the same checksum" : "checksums DIFFER");
    return f[0].step > 0 && f[1].step > 0 ? 0 : 1;
}
