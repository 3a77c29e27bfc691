/*
 * dist.c - data parallel against one process (docs/distributed.md): ResNet-50, batch 8
 * per micro-batch, 112x112, SGD, cpu backend. One process with 2 threads and
 * --accumulate 2 against 2 ranks of 1 thread each under mpirun (the same 16 samples
 * per step, the same parameters after the steps), and against one process with 2
 * threads on one micro-batch. Runs the remat command beside this program
 * (../remat) and reads its --json; the reduction runs after the backward pass, so
 * none of it is hidden behind the backward (stated in the table).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 4

/* Runs cmd and reads "key": number from its JSON output; -1 on failure. */
static double run_json(const char *cmd, const char *key, char *checksum, size_t n)
{
    char buf[1 << 16], pat[64];
    size_t got;
    FILE *p = popen(cmd, "r");
    const char *at;
    double v = -1;

    if (!p)
        return -1;
    got = fread(buf, 1, sizeof buf - 1, p);
    buf[got] = '\0';
    if (pclose(p) != 0)
        return -1;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    if ((at = strstr(buf, pat)))
        v = atof(at + strlen(pat));
    if (checksum && (at = strstr(buf, "\"param_checksum\":\"")))
        snprintf(checksum, n, "%.16s", at + 18);
    return v;
}

int main(int argc, char **argv)
{
    static const char *const model = "resnet50 --batch 8 --input-size 112x112 --backend cpu";
    char remat[1024], cmd[2048], sum[4][32] = {"", "", "", ""};
    const char *slash = strrchr(argv[0], '/');
    double t[4];

    (void)argc;
    snprintf(remat, sizeof remat, "%.*s/../remat", slash ? (int)(slash - argv[0]) : 1,
             slash ? argv[0] : ".");
    snprintf(cmd, sizeof cmd, "%s train %s --threads 2 --steps %d --json 2>/dev/null", remat,
             model, STEPS);
    t[0] = run_json(cmd, "median_step_seconds", sum[0], sizeof sum[0]);
    snprintf(cmd, sizeof cmd, "%s train %s --threads 2 --accumulate 2 --steps %d --json "
             "2>/dev/null", remat, model, STEPS);
    t[1] = run_json(cmd, "median_step_seconds", sum[1], sizeof sum[1]);
    snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
             "mpirun -np 2 --oversubscribe %s train %s --threads 1 --steps %d --json "
             "2>/dev/null", remat, model, STEPS);
    t[2] = run_json(cmd, "median_step_seconds", sum[2], sizeof sum[2]);
    snprintf(cmd, sizeof cmd, "%s train %s --threads 1 --accumulate 2 --steps %d --json "
             "2>/dev/null", remat, model, STEPS);
    t[3] = run_json(cmd, "median_step_seconds", sum[3], sizeof sum[3]);
    printf("### ResNet-50, batch 8 per micro-batch, 112x112, SGD, cpu backend\n\n"
           "Median step of %d; *samples/s* counts every rank's samples. The gradient "
           "reduction runs after the backward pass: 0%% of it hidden.\n\n"
           "| run | samples per step | step s | samples/s | param checksum |\n"
           "|---|---|---|---|---|\n", STEPS);
    printf("| 1 process, 2 threads | 8 | %.3f | %.1f | %s |\n", t[0], 8 / t[0], sum[0]);
    printf("| 1 process, 2 threads, --accumulate 2 | 16 | %.3f | %.1f | %s |\n", t[1],
           16 / t[1], sum[1]);
    if (t[2] > 0)
        printf("| 2 ranks x 1 thread (mpirun) | 16 | %.3f | %.1f | %s |\n", t[2], 16 / t[2],
               sum[2]);
    else
        printf("| 2 ranks x 1 thread (mpirun) | 16 | failed or no MPI | | |\n");
    printf("| 1 process, 1 thread, --accumulate 2 | 16 | %.3f | %.1f | %s |\n", t[3],
           16 / t[3], sum[3]);
    printf("\n2 ranks of 1 thread against one process of 2 threads accumulating the same "
           "samples: %.2fx the samples/s. Their parameters are the bits of one process with "
           "--accumulate 2 at the same thread count (1 here: %s); oneDNN's kernels sum in "
           "another order with 2 threads.\n", t[2] > 0 ? t[1] / t[2] : 0.0,
           !strcmp(sum[2], sum[3]) ? "the same checksum" : "checksums DIFFER");
    return t[0] > 0 && t[1] > 0 ? 0 : 1;
}
