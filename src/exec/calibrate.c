/*
 * calibrate.c - the time model's rates measured on this machine (remat_calibrate):
 * the compute rate a backend's kernels reach, the bandwidth of a host-tier copy, and
 * the share of the compute rate that a copy running beside the kernels takes.
 *
 * What is measured, half a second to a second in all (a warm-up, then 3 to 9 timed runs
 * each, the median kept, as remat measures time: DESIGN.md section 9; on a 2-core VM
 * shared with other work single runs of the same sgemm ranged over 3x):
 * - compute, cpu backend: oneDNN's dnnl_sgemm on 1024 x 1024 x 1024 (2 x 1024^3 FLOPs,
 *   12 MiB of operands) on o->threads OpenMP threads (0: all processors), as the
 *   backend's context sets them (kernels/cpu/ctx.c); the caller's OpenMP thread count is
 *   restored after. ref backend: its conv2d forward (kernels/ref/conv.c; one thread) on
 *   32 channels of 32 x 32 with a 3 x 3 kernel, 2 x 32 x 32 x 32 x 32 x 9 FLOPs. FLOPs
 *   count a multiply-add as 2, as the op table does.
 * - bandwidth: memcpy of 32 MiB on one thread (halved down to 4 MiB when memory is
 *   short), both buffers touched first: what the copy thread (copier.c) does per copy.
 *   32 + 32 MiB is past a last-level cache share (the copy streams from and to memory)
 *   yet quick to touch: on a 2-core VM first touching 512 MiB took 1.8 s, 128 MiB
 *   0.2 s (0.5 s under load); copies of 8, 32, 64 and 256 MiB ran there at 27, 18, 17
 *   and 16 GB/s.
 * - copy slowdown: the compute runs alternate with runs beside a second thread that
 *   copies between the same buffers without pause (time_pairs);
 *   1 - (rate beside the copy) / (rate alone), clamped to [0, 1]. Where the thread
 *   cannot be started: 1 / threads (a copy thread takes one of the cores).
 * - cuda backend: nothing measured; REMAT_DEFAULT_FLOPS, REMAT_DEFAULT_BANDWIDTH and
 *   slowdown 0 (a GPU copies on its own engine).
 *
 * Cache: one small text file per backend, thread count and machine in
 * $XDG_CACHE_HOME/remat/ (an absolute XDG_CACHE_HOME; else $HOME/.cache/remat/), named
 * calib-<backend>-t<threads>-<hash of the machine key>.txt; the machine key is
 * /proc/cpuinfo's first model name and the processor count. A file that does not parse,
 * or names another machine, backend or thread count, is measured again and rewritten
 * (written to a temporary name and renamed, so readers never see half a file). A cache
 * that cannot be read or written is not an error: the figures are measured each call.
 *
 * REMAT_CALIBRATE=0 in the environment: the defaults, nothing measured or cached;
 * REMAT_CALIBRATE=again: measured now and the cache rewritten (a measurement taken while
 * other work held the cores is kept until then).
 * Nothing is printed.
 */
#include "core/core.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GEMM_N 1024
#define CONV_C 32
#define CONV_HW 32
#define COPY_BYTES ((size_t)32 << 20)
#define COPY_MIN_BYTES ((size_t)4 << 20)
#define COPY_CHUNK ((size_t)4 << 20) /* the copy thread checks for stop between chunks */
#define MIN_RUNS 3    /* timed runs of each kind (and copies) at least */
#define MAX_RUNS 9
#define RUN_SECONDS 0.25 /* timed runs continue until this much time has passed */
#define CACHE_VERSION "remat-calibration 1"

struct rates {
    double flops, bandwidth, slowdown;
};

/* One compute workload: run() does `flops` FLOPs; REMAT_OK or a failure status. */
struct work {
    remat_status (*run)(struct work *w);
    double flops;
    int threads;
    float *a, *b, *c; /* gemm: A, B, C (N x N); ref conv: x, w, y */
};

/* ------------------------------------------------------------------ workloads */

static remat_status gemm_run(struct work *w)
{
    dnnl_status_t s = dnnl_sgemm('N', 'N', GEMM_N, GEMM_N, GEMM_N, 1.0f, w->a, GEMM_N, w->b,
                                 GEMM_N, 0.0f, w->c, GEMM_N);

    return s == dnnl_success ? REMAT_OK
                             : REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "dnnl_sgemm: status %d", (int)s);
}

static remat_status conv_run(struct work *w)
{
    static const remat_attrs at = {.out_channels = CONV_C, .kh = 3, .kw = 3, .ph = 1, .pw = 1};
    struct ktensor x = {w->a, {1, CONV_C, CONV_HW, CONV_HW}, 4};
    struct kop op = {
        .type = REMAT_OP_CONV2D, .at = &at, .n_in = 1, .in = &x,
        .out = {w->c, {1, CONV_C, CONV_HW, CONV_HW}, 4},
        .w = {w->b, {CONV_C, CONV_C, 3, 3}, 4},
    };

    return ref_forward(&op);
}

/* Fills n floats with small values (the rate of a kernel must not meet denormals). */
static void fill(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
}

/* The backend's workload with its operands allocated and filled; work_fini frees them. */
static remat_status work_init(struct work *w, remat_backend_kind b, int threads)
{
    size_t na, nb, nc;

    memset(w, 0, sizeof *w);
    w->threads = threads;
    if (b == REMAT_BACKEND_CPU) {
        w->run = gemm_run;
        w->flops = 2.0 * GEMM_N * GEMM_N * GEMM_N;
        na = nb = nc = (size_t)GEMM_N * GEMM_N;
    } else {
        w->run = conv_run;
        w->flops = 2.0 * CONV_C * CONV_HW * CONV_HW * CONV_C * 9;
        na = nc = (size_t)CONV_C * CONV_HW * CONV_HW;
        nb = (size_t)CONV_C * CONV_C * 9;
    }
    w->a = malloc(na * sizeof *w->a);
    w->b = malloc(nb * sizeof *w->b);
    w->c = malloc(nc * sizeof *w->c);
    if (!w->a || !w->b || !w->c) {
        free(w->a);
        free(w->b);
        free(w->c);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "calibration: out of memory");
    }
    fill(w->a, na);
    fill(w->b, nb);
    memset(w->c, 0, nc * sizeof *w->c);
    return REMAT_OK;
}

static void work_fini(struct work *w)
{
    free(w->a);
    free(w->b);
    free(w->c);
}

/* ------------------------------------------------------------------- timing */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The median of t[0..n), n > 0 (sorts t); not below the clock's resolution. */
static double median(double *t, int n)
{
    double m;

    qsort(t, (size_t)n, sizeof *t, cmp_double);
    m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return m > 1e-9 ? m : 1e-9;
}

/* The seconds of one run of w into *t. */
static remat_status time_run(struct work *w, double *t)
{
    double t0 = core_seconds();
    remat_status st = w->run(w);

    *t = core_seconds() - t0;
    return st;
}

/* Two buffers of *bytes, src touched (memset; copy_rate's warm-up touches dst) so that
 * no timed copy pays for page faults; the size halves from COPY_BYTES down to
 * COPY_MIN_BYTES while memory is short. */
static remat_status copy_bufs(char **src, char **dst, size_t *bytes)
{
    for (size_t n = COPY_BYTES; n >= COPY_MIN_BYTES; n /= 2) {
        *src = malloc(n);
        *dst = malloc(n);
        if (*src && *dst) {
            memset(*src, 1, n);
            *bytes = n;
            return REMAT_OK;
        }
        free(*src);
        free(*dst);
    }
    *src = *dst = NULL;
    return REMAT_FAIL(REMAT_ERR_NOMEM, "calibration: no memory for the copy buffers");
}

/* The bandwidth of memcpy from src to dst (bytes each): the median of MIN_RUNS copies
 * after a warm-up that touches dst. */
static double copy_rate(char *dst, const char *src, size_t bytes)
{
    double t[MIN_RUNS];

    memcpy(dst, src, bytes);
    for (int i = 0; i < MIN_RUNS; i++) {
        double t0 = core_seconds();

        memcpy(dst, src, bytes);
        t[i] = core_seconds() - t0;
    }
    return (double)bytes / median(t, MIN_RUNS);
}

/* The copy thread of the slowdown measurement: while `go`, copies src to dst in chunks
 * over and over; `running` (under mu) tells the measuring thread that it has started or
 * stopped, so that a timed run has a copy beside it from start to end, or none at all. */
struct copy_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool go;
    bool running, quit;
    char *dst;
    const char *src;
    size_t bytes;
};

static void *copy_loop(void *arg)
{
    struct copy_job *j = arg;

    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!atomic_load(&j->go) && !j->quit) {
            j->running = false;
            pthread_cond_broadcast(&j->cv);
            pthread_cond_wait(&j->cv, &j->mu);
        }
        if (j->quit)
            break;
        j->running = true;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        for (size_t off = 0; atomic_load(&j->go); off = off + COPY_CHUNK < j->bytes ?
                                                           off + COPY_CHUNK : 0) {
            size_t n = j->bytes - off < COPY_CHUNK ? j->bytes - off : COPY_CHUNK;

            memcpy(j->dst + off, j->src + off, n);
        }
        pthread_mutex_lock(&j->mu);
    }
    j->running = false;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Starts (on) or stops the copy thread and waits until it has. */
static void copy_set(struct copy_job *j, bool on)
{
    pthread_mutex_lock(&j->mu);
    atomic_store(&j->go, on);
    pthread_cond_broadcast(&j->cv);
    while (j->running != on)
        pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
}

/*
 * The compute rate alone and beside a copy (as slowdown = 1 - alone / beside seconds):
 * runs alternate, one alone then one beside the copy thread, so that load from other
 * processes that comes and goes falls on both alike; MIN_RUNS to MAX_RUNS pairs until
 * RUN_SECONDS have passed, the median of each kept. Without a copy thread (j NULL):
 * the runs alone, and the slowdown left as it is.
 */
static remat_status time_pairs(struct work *w, struct copy_job *j, struct rates *r)
{
    double ta[MAX_RUNS], tb[MAX_RUNS], start;
    int n = 0;
    remat_status st;

    if ((st = w->run(w))) /* warm-up: oneDNN makes its kernel */
        return st;
    start = core_seconds();
    while (n < MIN_RUNS || (n < MAX_RUNS && core_seconds() - start < RUN_SECONDS)) {
        if ((st = time_run(w, &ta[n])))
            return st;
        if (j) {
            copy_set(j, true);
            st = time_run(w, &tb[n]);
            copy_set(j, false);
            if (st)
                return st;
        }
        n++;
    }
    r->flops = w->flops / median(ta, n);
    if (j) {
        r->slowdown = 1 - median(ta, n) / median(tb, n);
        r->slowdown = r->slowdown < 0 ? 0 : r->slowdown > 1 ? 1 : r->slowdown;
    }
    return REMAT_OK;
}

/* The rates of the workload: a copy's bandwidth, then compute alone and beside a copy
 * thread (the slowdown; 1 / threads when the thread cannot be started). */
static remat_status measure(struct work *w, struct rates *r)
{
    struct copy_job job = {.dst = NULL};
    pthread_t th;
    char *src, *dst;
    size_t bytes = 0;
    remat_status st;
    bool threaded;

    if ((st = copy_bufs(&src, &dst, &bytes)))
        return st;
    r->bandwidth = copy_rate(dst, src, bytes);
    r->slowdown = 1.0 / (w->threads > 0 ? w->threads : 1);
    job.dst = dst;
    job.src = src;
    job.bytes = bytes;
    job.running = true; /* until the thread says it waits */
    atomic_init(&job.go, false);
    pthread_mutex_init(&job.mu, NULL);
    pthread_cond_init(&job.cv, NULL);
    threaded = pthread_create(&th, NULL, copy_loop, &job) == 0;
    if (threaded)
        copy_set(&job, false);
    st = time_pairs(w, threaded ? &job : NULL, r);
    if (threaded) {
        pthread_mutex_lock(&job.mu);
        job.quit = true;
        pthread_cond_broadcast(&job.cv);
        pthread_mutex_unlock(&job.mu);
        pthread_join(th, NULL);
    }
    pthread_mutex_destroy(&job.mu);
    pthread_cond_destroy(&job.cv);
    free(src);
    free(dst);
    return st;
}

/* Measures the backend's rates with the given threads (cpu: OpenMP's count set for the
 * measurement and restored after). */
static remat_status measure_backend(remat_backend_kind b, int threads, struct rates *r)
{
    int saved = omp_get_max_threads();
    struct work w;
    remat_status st;

    if ((st = work_init(&w, b, threads)))
        return st;
    if (b == REMAT_BACKEND_CPU)
        omp_set_num_threads(threads);
    st = measure(&w, r);
    omp_set_num_threads(saved);
    work_fini(&w);
    return st;
}

/* -------------------------------------------------------------------- cache */

/* The machine key: /proc/cpuinfo's first model name (or "unknown") and the processor
 * count, e.g. "AMD EPYC 7B13 x2". */
static void machine_key(char *key, size_t n)
{
    char line[512], model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");

    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');

        if (!strncmp(line, "model name", 10) && colon) {
            colon += 1 + (colon[1] == ' ');
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(model, sizeof model, "%s", colon);
            break;
        }
    }
    if (f)
        fclose(f);
    snprintf(key, n, "%s x%d", model, omp_get_num_procs());
}

/* FNV-1a, 64 bits. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Makes each directory of path in turn (mkdir -p); false when the last cannot be made. */
static bool make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

/* The cache directory into dir (n bytes); false when neither XDG_CACHE_HOME (absolute)
 * nor HOME is set. */
static bool cache_dir(char *dir, size_t n)
{
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int len;

    if (x && x[0] == '/')
        len = snprintf(dir, n, "%s/remat", x);
    else if (h && h[0])
        len = snprintf(dir, n, "%s/.cache/remat", h);
    else
        return false;
    return len > 0 && (size_t)len < n;
}

/* The text a cache file holds for these figures (as calibrate writes it). */
static void cache_text(char *buf, size_t n, const char *key, remat_backend_kind b,
                       int threads, const struct rates *r)
{
    snprintf(buf, n, "%s\nmachine %s\nbackend %s\nthreads %d\nflops %.17g\nbandwidth %.17g\n"
             "copy_slowdown %.17g\n", CACHE_VERSION, key, remat_backend_name(b), threads,
             r->flops, r->bandwidth, r->slowdown);
}

/* Reads line `name value` at *p into *v (a finite number) and moves *p past it; false
 * when the line is something else. */
static bool parse_num(const char **p, const char *name, double *v)
{
    size_t len = strlen(name);
    char *end;

    if (strncmp(*p, name, len) || (*p)[len] != ' ')
        return false;
    errno = 0;
    *v = strtod(*p + len + 1, &end);
    if (errno || end == *p + len + 1 || *end != '\n' || !isfinite(*v))
        return false;
    *p = end + 1;
    return true;
}

/* Parses a cache file's text: the header lines must match this machine, backend and
 * thread count exactly; false for anything else. */
static bool cache_parse(const char *text, const char *key, remat_backend_kind b, int threads,
                        struct rates *r)
{
    char head[1024];
    int n = snprintf(head, sizeof head, "%s\nmachine %s\nbackend %s\nthreads %d\n",
                     CACHE_VERSION, key, remat_backend_name(b), threads);
    const char *p = text;

    if (n <= 0 || (size_t)n >= sizeof head || strncmp(p, head, (size_t)n))
        return false;
    p += n;
    return parse_num(&p, "flops", &r->flops) && r->flops > 0 &&
           parse_num(&p, "bandwidth", &r->bandwidth) && r->bandwidth > 0 &&
           parse_num(&p, "copy_slowdown", &r->slowdown) && r->slowdown >= 0 &&
           r->slowdown <= 1 && *p == '\0';
}

/* Reads the cache file at path; false when it is missing or does not parse. */
static bool cache_read(const char *path, const char *key, remat_backend_kind b, int threads,
                       struct rates *r)
{
    char text[2048];
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return false;
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return n < sizeof text - 1 && cache_parse(text, key, b, threads, r);
}

/* Writes the cache file at path (in dir, made when missing) through a temporary file
 * and a rename; failures are ignored (the next call measures again). */
static void cache_write(char *dir, const char *path, const char *key, remat_backend_kind b,
                        int threads, const struct rates *r)
{
    char tmp[4200], text[2048];
    FILE *f;
    bool ok;

    if (!make_dirs(dir))
        return;
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return;
    cache_text(text, sizeof text, key, b, threads, r);
    f = fopen(tmp, "w");
    if (!f)
        return;
    ok = fputs(text, f) >= 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* The rates of backend b (ref or cpu) on `threads` threads: from the cache file when it
 * holds them, else measured and written there. */
static remat_status cached_rates(remat_backend_kind b, int threads, bool again,
                                 struct rates *r)
{
    char key[320], dir[4000], path[4100];
    bool have_dir = cache_dir(dir, sizeof dir);
    remat_status st;

    machine_key(key, sizeof key);
    if (have_dir) {
        snprintf(path, sizeof path, "%s/calib-%s-t%d-%016llx.txt", dir, remat_backend_name(b),
                 threads, (unsigned long long)hash_str(key));
        if (!again && cache_read(path, key, b, threads, r))
            return REMAT_OK;
    }
    if (!(st = measure_backend(b, threads, r)) && have_dir)
        cache_write(dir, path, key, b, threads, r);
    return st;
}

/* ------------------------------------------------------------------- public */

remat_status remat_calibrate(const remat_train_opts *o, double *flops, double *bandwidth,
                             double *copy_slowdown)
{
    const char *env = getenv("REMAT_CALIBRATE");
    struct rates r = {REMAT_DEFAULT_FLOPS, REMAT_DEFAULT_BANDWIDTH, 0};
    bool again = env && !strcmp(env, "again");
    remat_status st = REMAT_OK;

    if (!o || !flops || !bandwidth || !copy_slowdown)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_calibrate needs options and three results");
    if ((unsigned)o->backend >= REMAT_BACKEND_COUNT || o->threads < 0)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_calibrate: backend %d with %d threads",
                          (int)o->backend, o->threads);
    /* cuda: the defaults; ref: its kernels run on one thread */
    if (o->backend == REMAT_BACKEND_REF && !(env && !strcmp(env, "0")))
        st = cached_rates(o->backend, 1, again, &r);
    else if (o->backend == REMAT_BACKEND_CPU && !(env && !strcmp(env, "0")))
        st = cached_rates(o->backend, o->threads ? o->threads : omp_get_num_procs(), again,
                          &r);
    if (!st) {
        *flops = r.flops;
        *bandwidth = r.bandwidth;
        *copy_slowdown = r.slowdown;
    }
    return st;
}
